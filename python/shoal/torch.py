# SPDX-License-Identifier: Apache-2.0
"""PyTorch over Shoal without the mount: datasets and checkpoints (docs/python.md).

    from shoal.torch import Dataset, IterableDataset, Checkpoint
    ds = Dataset(fs, "/train")                  # one sample per file, listed once
    loader = DataLoader(ds, batch_size=64, num_workers=8)
    Checkpoint(fs).save(model.state_dict(), "/ckpt/step-1000.pt")
    model.load_state_dict(Checkpoint(fs).load("/ckpt/step-1000.pt"))

Datasets list their files once, in the process that builds them; forked
workers share the list (and connect again by themselves). A batch of
indices is read with one read_many: all its files in flight at once.
Plain torch.save(obj, fs.open(path, "wb")) and torch.load(fs.open(path,
"rb")) work too.
"""
import ctypes
import io
import os
import pickle
import struct
from concurrent.futures import ThreadPoolExecutor

import torch
from torch.utils.data import Dataset as _Dataset
from torch.utils.data import IterableDataset as _IterableDataset
from torch.utils.data import get_worker_info

import shoal

__all__ = ["Dataset", "IterableDataset", "Checkpoint", "list_files"]


def _fs(fs, addr):
    return fs if isinstance(fs, shoal.FileSystem) else shoal.connect(fs, addr)


def list_files(fs, root="/", manifest=None, suffixes=None):
    """The sample files: those under root (sorted, recursively), or the paths a manifest
    file on fs lists one per line (relative ones under root)."""
    if manifest is not None:
        text = fs.read_bytes(manifest).decode()
        paths = [p if p.startswith("/") else root.rstrip("/") + "/" + p
                 for p in (line.strip() for line in text.splitlines()) if p]
    else:
        paths = []
        for d, _, files in fs.walk(root):
            paths.extend(d.rstrip("/") + "/" + f for f in files)
        paths.sort()
    if suffixes:
        paths = [p for p in paths if p.endswith(tuple(suffixes))]
    return paths


class Dataset(_Dataset):
    """Map-style: sample i is the bytes of the i-th file (through transform(data), if
    given). dataset[[i, j, ...]] (and __getitems__, which DataLoader uses from PyTorch
    2.0) reads them all at once."""

    def __init__(self, fs, root="/", manifest=None, transform=None, suffixes=None, addr=None,
                 threads=16):
        self.fs = _fs(fs, addr)
        self.root = root
        self.paths = list_files(self.fs, root, manifest, suffixes)
        self.transform = transform
        self.threads = threads

    def __len__(self):
        return len(self.paths)

    def _sample(self, data):
        return self.transform(data) if self.transform is not None else data

    def __getitem__(self, i):
        if isinstance(i, (list, tuple)):
            return self.__getitems__(i)
        return self._sample(self.fs.read_bytes(self.paths[i]))

    def __getitems__(self, indices):
        got = self.fs.read_many([(self.paths[i], 0) for i in indices], self.threads)
        return [self._sample(d) for d in got]


def _shard():
    """(this reader's index, how many readers): ranks times DataLoader workers."""
    rank, world = 0, 1
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        rank, world = torch.distributed.get_rank(), torch.distributed.get_world_size()
    else:
        rank = int(os.environ.get("RANK", "0"))
        world = int(os.environ.get("WORLD_SIZE", "1"))
    w = get_worker_info()
    if w is None:
        return rank, world
    return rank * w.num_workers + w.id, world * w.num_workers


class IterableDataset(_IterableDataset):
    """Streams the files' bytes (through transform, if given), each reader (rank x worker)
    its own share: file k goes to reader k mod readers. Reads `batch` files at once."""

    def __init__(self, fs, root="/", manifest=None, transform=None, suffixes=None, addr=None,
                 batch=64, threads=16):
        self.fs = _fs(fs, addr)
        self.paths = list_files(self.fs, root, manifest, suffixes)
        self.transform = transform
        self.batch = batch
        self.threads = threads

    def __len__(self):
        return len(self.paths)

    def __iter__(self):
        me, readers = _shard()
        mine = self.paths[me::readers]
        for k in range(0, len(mine), self.batch):
            part = mine[k:k + self.batch]
            for data in self.fs.read_many([(p, 0) for p in part], self.threads):
                yield self.transform(data) if self.transform is not None else data


# ---- checkpoints ----
#
# A checkpoint file: MAGIC, the header's length (u64 little-endian), the
# header (a pickle: the tensors' dtypes, shapes and offsets, and the state
# pickled with each tensor replaced by its number), then from the next
# multiple of DATA_ALIGN the tensors' bytes, each at an offset from there
# that is a multiple of TENSOR_ALIGN. The bytes are
# written and read in CHUNK pieces by many handles at once, straight from
# and into the tensors' memory.
MAGIC = b"SHOALCK1"
DATA_ALIGN = 1 << 20
TENSOR_ALIGN = 4096


def _up(n, a):
    return (n + a - 1) // a * a


def _bytes_of(t):
    """A writable byte view of a contiguous CPU tensor's memory (no copy)."""
    n = t.numel() * t.element_size()
    if n == 0:
        return memoryview(bytearray(0))
    return memoryview((ctypes.c_ubyte * n).from_address(t.data_ptr())).cast("B")


class _Saver(pickle.Pickler):
    def __init__(self, f, tensors):
        super().__init__(f, protocol=4)
        self.tensors = tensors

    def persistent_id(self, obj):
        if isinstance(obj, torch.Tensor):
            self.tensors.append(obj)
            return ("tensor", len(self.tensors) - 1)
        return None


class _Loader(pickle.Unpickler):
    def __init__(self, f, tensors):
        super().__init__(f)
        self.tensors = tensors

    def persistent_load(self, pid):
        kind, i = pid
        if kind != "tensor":
            raise pickle.UnpicklingError("unknown persistent id %r" % (kind,))
        return self.tensors[i]


def _pieces(views, offsets, chunk):
    """(file offset, memoryview) pieces of at most chunk bytes, cut at chunk boundaries of
    the file so that each piece writes whole stripes where it can."""
    out = []
    for mv, off in zip(views, offsets):
        done = 0
        while done < len(mv):
            n = min(len(mv) - done, chunk - (off + done) % chunk)
            out.append((off + done, mv[done:done + n]))
            done += n
    return out


class Checkpoint:
    """Saves and loads a state dict (any picklable object holding tensors) with `writers`
    handles writing (`readers` threads reading) chunk-sized pieces at once, from and into
    tensor memory. (On a 2-core machine 4 writers beat 8 and 16: the cluster's CPU is the bound,
    and more writers only add switches; reads gain up to 16. docs/python.md.)

    save() writes a temporary file and renames it over path when it is durable, so a
    reader (or a crash) sees the old checkpoint or the new one, never a mix. Tensors that
    shared storage are saved (and load) as separate tensors."""

    def __init__(self, fs, addr=None, writers=4, readers=16, chunk=8 << 20, frag_kb=1024):
        self.fs = _fs(fs, addr)
        self.writers = writers
        self.readers = readers
        self.chunk = chunk
        self.frag_kb = frag_kb
        self._wfs = None

    def _writer_fs(self):
        """A connection of its own that writes stripes of frag_kb fragments (4 MiB stripes
        for 4+2 at 1024): a checkpoint is large and written once, and bigger stripes cost
        fewer requests and commits per byte (1.7-2x the rate of 128 KiB fragments here)."""
        if self.frag_kb == self.fs._opts[1]:
            return self.fs
        if self._wfs is None:
            self._wfs = shoal.FileSystem(self.fs.name, self.fs.addr, self.fs._opts[0],
                                         self.frag_kb, key_file=self.fs._opts[2])
        return self._wfs

    def close(self):
        if self._wfs is not None:
            self._wfs.close()
            self._wfs = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def save(self, state, path):
        """Write state to path (replaced atomically); returns the file's size."""
        path = shoal._path(path)
        wfs = self._writer_fs()
        tensors, specs = [], []
        body = io.BytesIO()
        _Saver(body, tensors).dump(state)
        cpu = []
        for t in tensors:
            c = t.detach()
            if c.device.type != "cpu":
                c = c.cpu()
            if not c.is_contiguous():
                c = c.contiguous()
            cpu.append(c)
        views = [_bytes_of(c) for c in cpu]
        rel, at = [], 0
        for t, c, mv in zip(tensors, cpu, views):
            rel.append(at)
            specs.append((str(c.dtype).replace("torch.", ""), tuple(c.shape), at, len(mv),
                          t.requires_grad, str(t.device)))
            at = _up(at + len(mv), TENSOR_ALIGN)
        header = pickle.dumps((specs, body.getvalue()), protocol=4)
        base = _up(16 + len(header), DATA_ALIGN)
        offsets = [base + r for r in rel]
        tmp = "%s.tmp-%d" % (path, os.getpid())
        size = base + at
        with shoal.File(wfs, tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC) as f:
            f.pwrite(MAGIC + struct.pack("<Q", len(header)) + header, 0)
            self._write(wfs, tmp, _pieces(views, offsets, self.chunk))
            f.truncate(size)
            f.fsync()
        wfs.rename(tmp, path)
        return size

    def _write(self, fs, path, pieces):
        """The pieces over `writers` handles of path, each a run of whole chunks."""
        if not pieces:
            return
        groups = {}
        for off, mv in pieces:
            groups.setdefault(off // self.chunk, []).append((off, mv))
        runs = [[] for _ in range(min(self.writers, len(groups)))]
        for k, g in enumerate(sorted(groups)):
            runs[k * len(runs) // len(groups)].extend(groups[g])

        def one(run):
            with shoal.File(fs, path, os.O_WRONLY) as f:
                for off, mv in run:
                    done = 0
                    while done < len(mv):
                        done += f.pwrite(mv[done:], off + done)
                f.fsync()

        with ThreadPoolExecutor(len(runs)) as ex:
            list(ex.map(one, runs))

    def _read(self, path, pieces):
        """The pieces read at once by `readers` threads, each piece on a handle of its own
        (one read of whole stripes, no read-ahead racing the next piece: 10-20 % faster
        here than runs of pieces on shared handles)."""
        got = self.fs.read_many([(path, off, len(mv), mv) for off, mv in pieces], self.readers)
        for (off, mv), n in zip(pieces, got):
            if n != len(mv):
                raise OSError(5, "checkpoint %s is short at offset %d" % (path, off + n), path)

    def load(self, path, map_location=None):
        """The state saved at path; map_location as torch.load's (a device, or a function
        of (tensor, saved device)); tensors saved from a GPU go back to it by default."""
        path = shoal._path(path)
        with shoal.File(self.fs, path, os.O_RDONLY) as f:
            first = f.pread(16, 0)
            if len(first) != 16 or first[:8] != MAGIC:
                raise ValueError("%s is not a Shoal checkpoint (Checkpoint.save)" % path)
            (hlen,) = struct.unpack("<Q", first[8:])
            header = f.pread(hlen, 16)
            if len(header) != hlen:
                raise OSError(5, "checkpoint header is short", path)
        specs, body = pickle.loads(header)
        base = _up(16 + hlen, DATA_ALIGN)
        tensors, views, offsets = [], [], []
        for dtype, shape, off, nbytes, grad, _device in specs:
            t = torch.empty(shape, dtype=getattr(torch, dtype))
            mv = _bytes_of(t)
            if len(mv) != nbytes:
                raise ValueError("checkpoint %s: tensor of %d bytes, header says %d" %
                                 (path, len(mv), nbytes))
            tensors.append(t)
            views.append(mv)
            offsets.append(base + off)
        self._read(path, _pieces(views, offsets, self.chunk))
        out = []
        for t, (_, _, _, _, grad, device) in zip(tensors, specs):
            if map_location is not None:
                dev = map_location(t, device) if callable(map_location) else map_location
                t = t.to(dev)
            elif device != "cpu":
                t = t.to(device)
            if grad:
                t.requires_grad_(True)
            out.append(t)
        return _Loader(io.BytesIO(body), out).load()
