# SPDX-License-Identifier: Apache-2.0
"""read_many, shoal.torch (Dataset, IterableDataset, Checkpoint, torch.save) and
shoal.fsspec, over the session's dataset of small files."""
import collections
import errno
import hashlib
import time

import pytest

torch = pytest.importorskip("torch")


def test_read_many_of_half_the_dataset(fs, dataset):
    """read_many of every other file of the dataset, at most 10,000 (of 20,000 in make
    test-long; make test writes 5,000, conftest.DATASET_N)."""
    paths, digests = dataset
    idx = list(range(0, len(paths), 2))[:10000]
    t0 = time.time()
    got = fs.read_many([(paths[i], 0) for i in idx])
    took = time.time() - t0
    assert [hashlib.sha256(g).hexdigest() for g in got] == [digests[i] for i in idx]
    print("\n  read_many: %d files in %.2f s (%.0f files/s)" % (len(idx), took,
                                                                len(idx) / took))
    # into the caller's buffers, a part of each file, and through open files
    bufs = [bytearray(4096) for _ in range(200)]
    counts = fs.read_many([(paths[i], 100, 4096, bufs[k]) for k, i in enumerate(idx[:200])])
    for k, i in enumerate(idx[:200]):
        want = fs.read_bytes(paths[i])[100:4196]
        assert counts[k] == len(want) and bytes(bufs[k][:counts[k]]) == want
    files = [fs.open(paths[i], "rb") for i in idx[:100]]
    try:
        whole = fs.read_many([(f, 0) for f in files])
        tails = fs.read_many([(f.raw, 1000, 2000, None) for f in files])
    finally:
        for f in files:
            f.close()
    for k, i in enumerate(idx[:100]):
        assert hashlib.sha256(whole[k]).hexdigest() == digests[i]
        assert tails[k] == whole[k][1000:3000]


def test_read_many_errors(fs, dataset):
    paths, _ = dataset
    with pytest.raises(FileNotFoundError) as e:
        fs.read_many([(paths[0], 0), ("/dataset/missing", 0), (paths[1], 0)])
    assert "missing" in str(e.value.filename)
    got = fs.read_many([(paths[0], 0), ("/dataset/missing", 0)], raise_errors=False)
    assert isinstance(got[0], bytes) and isinstance(got[1], FileNotFoundError)
    assert got[1].errno == errno.ENOENT
    with pytest.raises(ValueError):
        fs.read_many([(paths[0], 0, 100, bytearray(10))])
    with pytest.raises(TypeError):
        fs.read_many([(paths[0], 0, 10, b"read-only")])
    assert fs.read_many([]) == []


class Digest:
    """A transform: the sample's digest (what the workers send back)."""

    def __call__(self, data):
        return hashlib.sha256(data).hexdigest()


def test_dataloader_2_workers_sees_each_sample_once_per_epoch(fs, dataset):
    from torch.utils.data import BatchSampler, DataLoader, SequentialSampler

    from shoal.torch import Dataset

    paths, digests = dataset
    ds = Dataset(fs, "/dataset", transform=Digest())
    assert ds.paths == sorted(paths) and len(ds) == len(paths)
    want = dict(zip(paths, digests))
    order = [want[p] for p in ds.paths]

    class Indexed(torch.utils.data.Dataset):
        def __len__(self):
            return len(ds)

        def __getitem__(self, batch):  # a list of indices: one read_many
            return list(zip(batch, ds[batch]))

    for epoch in range(2):
        seen = collections.Counter()
        loader = DataLoader(Indexed(), num_workers=2, batch_size=None,
                            sampler=BatchSampler(SequentialSampler(range(len(ds))), 64, False),
                            multiprocessing_context="fork")
        t0 = time.time()
        for batch in loader:
            for i, dig in batch:
                seen[i] += 1
                assert dig == order[i], "sample %d (%s) read wrong" % (i, ds.paths[i])
        took = time.time() - t0
        assert len(seen) == len(ds) and set(seen.values()) == {1}, "epoch %d" % epoch
        print("\n  epoch %d: %d samples in %.1f s (%.0f samples/s)" % (
            epoch, len(ds), took, len(ds) / took))
    # one sample at a time, as plain DataLoader use does
    loader = DataLoader(ds, num_workers=2, batch_size=32, multiprocessing_context="fork")
    n = 0
    for batch in loader:
        for dig in batch:
            assert dig == order[n]
            n += 1
        if n >= 2000:
            break


def test_iterable_dataset_shards_by_worker(fs, dataset):
    from torch.utils.data import DataLoader

    from shoal.torch import IterableDataset

    paths, digests = dataset
    sub = "/dataset/07"
    mine = sorted(p for p in paths if p.startswith(sub + "/"))
    want = {digests[paths.index(p)] for p in mine}
    ds = IterableDataset(fs, sub, transform=Digest(), batch=16)
    got = [d for batch in DataLoader(ds, num_workers=2, batch_size=8,
                                     multiprocessing_context="fork") for d in batch]
    assert len(got) == len(mine) and set(got) == want


def test_manifest_dataset(fs, dataset):
    from shoal.torch import Dataset

    paths, digests = dataset
    fs.write_bytes("/manifest.txt", ("\n".join(p[len("/dataset/"):] for p in paths[:50])
                                     + "\n").encode())
    ds = Dataset(fs, "/dataset", manifest="/manifest.txt", transform=Digest())
    assert ds.paths == paths[:50]
    assert [ds[i] for i in range(50)] == digests[:50]


def state_dict_512m():
    g = torch.Generator().manual_seed(7)
    sd = collections.OrderedDict()
    for i in range(7):
        sd["layer%d.weight" % i] = torch.randn(4096, 4096, generator=g)  # 64 MiB each
    sd["emb.bf16"] = torch.randn(4096, 8192, generator=g).to(torch.bfloat16)  # 64 MiB
    sd["step"] = torch.tensor(1000, dtype=torch.int64)
    sd["mask"] = torch.rand(1000, generator=g) > 0.5
    sd["strided"] = torch.arange(100, dtype=torch.int32).reshape(10, 10).t()
    sd["empty"] = torch.empty(0, 3)
    sd["meta"] = {"lr": 0.1, "betas": (0.9, 0.999), "name": "ckpt", "hist": [1, 2, 3]}
    return sd


def same(a, b):
    assert type(a) is type(b) or (isinstance(a, dict) and isinstance(b, dict))
    if isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    elif isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            same(a[k], b[k])
    else:
        assert a == b


def test_checkpoint_of_512_mib_round_trips(fs):
    from shoal.torch import Checkpoint

    sd = state_dict_512m()
    fs.makedirs("/ckpt", exist_ok=True)
    ck = Checkpoint(fs)
    t0 = time.time()
    size = ck.save(sd, "/ckpt/a.pt")
    t1 = time.time()
    back = ck.load("/ckpt/a.pt")
    t2 = time.time()
    assert size >= 512 << 20 and fs.stat("/ckpt/a.pt").st_size == size
    same(sd, back)
    assert fs.listdir("/ckpt") == ["a.pt"]  # the temporary file was renamed over
    print("\n  Checkpoint: save %.0f MiB/s, load %.0f MiB/s" % (
        size / (t1 - t0) / 2**20, size / (t2 - t1) / 2**20))
    # saved again over itself: the new one is read whole
    sd["step"] = torch.tensor(2000)
    ck.save(sd, "/ckpt/a.pt")
    assert ck.load("/ckpt/a.pt")["step"].item() == 2000
    fs.write_bytes("/ckpt/not", b"something else entirely")
    with pytest.raises(ValueError):
        ck.load("/ckpt/not")


def test_torch_save_and_load_through_a_shoal_file(fs):
    sd = state_dict_512m()
    with fs.open("/ckpt-torch.pt", "wb") as f:
        torch.save(sd, f)
    with fs.open("/ckpt-torch.pt", "rb") as f:
        back = torch.load(f)
    same(sd, back)


def test_fsspec_open_ls_cp(cluster, fs):
    import fsspec

    import shoal.fsspec  # noqa: F401 (registers shoal://)

    with fsspec.open("shoal://py/fss/dir/a.txt", "w") as f:
        f.write("hello from fsspec\n")
    with fsspec.open("shoal://py/fss/dir/a.txt", "r") as f:
        assert f.read() == "hello from fsspec\n"
    sfs = fsspec.filesystem("shoal", addr=cluster.addr)
    assert sfs.ls("py/fss/dir", detail=False) == ["py/fss/dir/a.txt"]
    info = sfs.ls("shoal://py/fss/dir")[0]
    assert info["type"] == "file" and info["size"] == len("hello from fsspec\n")
    sfs.cp("py/fss/dir/a.txt", "py/fss/dir/b.txt")
    assert sfs.cat("py/fss/dir/b.txt") == b"hello from fsspec\n"
    assert sfs.cat_file("py/fss/dir/b.txt", start=6, end=10) == b"from"
    sfs.pipe("py/fss/other/c.bin", b"\x00\x01")
    assert sorted(sfs.ls("py/fss", detail=False)) == ["py/fss/dir", "py/fss/other"]
    assert sfs.isdir("py/fss/other") and sfs.isfile("py/fss/other/c.bin")
    assert sfs.exists("py/fss/dir/b.txt") and not sfs.exists("py/fss/dir/zzz")
    sfs.mv("py/fss/dir/b.txt", "py/fss/dir/moved.txt")
    assert sorted(sfs.find("py/fss")) == ["py/fss/dir/a.txt", "py/fss/dir/moved.txt",
                                          "py/fss/other/c.bin"]
    sfs.rm("py/fss", recursive=True)
    assert not sfs.exists("py/fss")
    assert fs.listdir("/").count("fss") == 0


def test_read_many_of_sequential_pieces_of_one_file_never_stalls(fs):
    """Many in-order pieces of one open file at once: every asynchronous-call thread in
    sh_pread may wait for the file's read-ahead, which must run elsewhere (it ran on the
    same 16 threads once, and this hung)."""
    import threading

    data = bytes(range(256)) * (48 << 12)  # 12 MiB
    fs.write_bytes("/seq-pieces", data)
    out = {}

    def run():
        with fs.open("/seq-pieces", "rb", buffering=0) as f:
            for rnd in range(4):
                piece = (64 << 10) * (rnd + 1)
                bufs = [bytearray(piece) for _ in range(len(data) // piece)]
                got = fs.read_many([(f, k * piece, piece, b) for k, b in enumerate(bufs)])
                out[rnd] = all(n == piece for n in got) and b"".join(bufs) == \
                    data[:len(bufs) * piece]

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(120)
    assert not t.is_alive(), "read_many of one file's pieces stalled"
    assert out == {0: True, 1: True, 2: True, 3: True}


def test_iterable_dataset_shards_by_rank(fs, dataset, monkeypatch):
    """Without torch.distributed, RANK and WORLD_SIZE pick the share: the two ranks'
    shares are disjoint and make the whole."""
    from shoal.torch import IterableDataset

    paths, digests = dataset
    sub = "/dataset/11"
    want = sorted(digests[paths.index(p)] for p in paths if p.startswith(sub + "/"))
    got = []
    for rank in (0, 1):
        monkeypatch.setenv("RANK", str(rank))
        monkeypatch.setenv("WORLD_SIZE", "2")
        mine = list(IterableDataset(fs, sub, transform=Digest(), batch=7))
        assert abs(len(mine) - len(want) / 2) <= 1
        got += mine
    assert sorted(got) == want
