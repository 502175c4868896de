# SPDX-License-Identifier: Apache-2.0
"""import shoal: files, names and errors, as os and the builtin open give them."""
import errno
import hashlib
import io
import os
import shutil
import stat
import subprocess
import sys
import time

import pytest


SIZES = [0, 1, 4095, 4096, 4097, 65536, (1 << 20) + 3, 5 << 20]


def test_write_and_read_every_byte(fs):
    for n in SIZES:
        data = os.urandom(n)
        p = "/rt-%d" % n
        with fs.open(p, "wb") as f:
            # in pieces of odd sizes, through the buffer
            k = 0
            while k < n:
                step = min(n - k, 1 + (k * 7919) % 300000)
                assert f.write(data[k:k + step]) == step
                k += step
        assert fs.stat(p).st_size == n
        with fs.open(p, "rb") as f:
            assert f.read() == data
        assert fs.read_bytes(p) == data
        # readinto lands in a bytearray and in a numpy array without a copy
        buf = bytearray(n + 10)
        with fs.open(p, "rb", buffering=0) as f:
            assert f.readinto(buf) == n
        assert bytes(buf[:n]) == data
        np = pytest.importorskip("numpy")
        arr = np.zeros(n, dtype=np.uint8)
        with fs.open(p, "rb", buffering=0) as f:
            assert f.readinto(arr) == n
        assert arr.tobytes() == data


def test_seek_tell_partial_reads_and_overwrite(fs):
    data = bytearray(os.urandom(3 << 20))
    fs.write_bytes("/seek", data)
    with fs.open("/seek", "r+b") as f:
        assert f.seek(1000) == 1000 and f.tell() == 1000
        assert f.read(5000) == data[1000:6000]
        f.seek(-10, io.SEEK_END)
        assert f.read() == data[-10:]
        f.seek(12345)
        f.write(b"x" * 70000)
        data[12345:12345 + 70000] = b"x" * 70000
        f.seek(0)
        assert f.read() == data
    with fs.open("/seek", "rb", buffering=0) as f:
        assert f.pread(10, len(data) - 4) == data[-4:]
        assert f.pread(10, len(data) + 100) == b""
        b = bytearray(100)
        assert f.preadinto(b, 2 << 20) == 100 and b == data[2 << 20:(2 << 20) + 100]


def test_append_truncate_exclusive_and_text(fs):
    with fs.open("/app", "wb") as f:
        f.write(b"abc")
    with fs.open("/app", "ab") as f:
        f.write(b"def")
    assert fs.read_bytes("/app") == b"abcdef"
    fs.truncate("/app", 2)
    assert fs.read_bytes("/app") == b"ab"
    with fs.open("/app", "r+b") as f:
        f.truncate(10)
    assert fs.read_bytes("/app") == b"ab" + bytes(8)
    with pytest.raises(FileExistsError):
        fs.open("/app", "xb")
    with fs.open("/new-x", "x") as f:
        f.write("héllo\nwörld\n")
    with fs.open("/new-x") as f:
        assert f.readlines() == ["héllo\n", "wörld\n"]
    with fs.open("/new-x", "w") as f:
        f.write("short")
    with fs.open("/new-x", "r", encoding="utf-8") as f:
        assert f.read() == "short"
    with pytest.raises(ValueError):
        fs.open("/new-x", "rw")
    with pytest.raises(ValueError):
        fs.open("/new-x", "r", buffering=0)


def test_fsync_and_durable_write(fs):
    with fs.open("/synced", "wb") as f:
        f.write(os.urandom(100000))
        fs.fsync(f)
        assert f.raw.stat().st_size == 100000


def expect(exc, code, fn, *args):
    with pytest.raises(exc) as e:
        fn(*args)
    assert e.value.errno == code, e.value
    return e.value


def test_errors_are_oserror_subclasses_with_errno(fs):
    e = expect(FileNotFoundError, errno.ENOENT, fs.open, "/no/such", "rb")
    assert e.filename == "/no/such"
    expect(FileNotFoundError, errno.ENOENT, fs.stat, "/nothing")
    expect(FileNotFoundError, errno.ENOENT, fs.remove, "/nothing")
    fs.mkdir("/errs")
    expect(FileExistsError, errno.EEXIST, fs.mkdir, "/errs")
    expect(IsADirectoryError, errno.EISDIR, fs.open, "/errs", "rb")
    fs.write_bytes("/errs/f", b"x")
    expect(NotADirectoryError, errno.ENOTDIR, fs.listdir, "/errs/f")
    expect(NotADirectoryError, errno.ENOTDIR, fs.open, "/errs/f/g", "wb")
    expect(OSError, errno.ENOTEMPTY, fs.rmdir, "/errs")
    expect(IsADirectoryError, errno.EISDIR, fs.remove, "/errs")
    expect(OSError, errno.ENAMETOOLONG, fs.mkdir, "/" + "n" * 300)
    with fs.open("/errs/f", "rb") as f:
        with pytest.raises(io.UnsupportedOperation):
            f.write(b"y")
    f = fs.open("/errs/f", "rb")
    f.close()
    with pytest.raises(ValueError):
        f.read()
    assert not fs.exists("/nothing") and fs.exists("/errs") and fs.isdir("/errs")
    assert fs.isfile("/errs/f") and not fs.isfile("/errs")


def test_a_cluster_that_is_not_there_is_a_clear_error(cluster):
    import shoal

    with pytest.raises(FileNotFoundError) as e:
        shoal.connect("no-such-fs", cluster.addr)
    assert "no-such-fs" in str(e.value)
    with pytest.raises(OSError):
        shoal.connect("py", "127.0.0.1:1", timeout_ms=1000)


def test_names(fs):
    fs.makedirs("/ns/a/b/c")
    fs.makedirs("/ns/a/b/c", exist_ok=True)
    with pytest.raises(FileExistsError):
        fs.makedirs("/ns/a/b/c")
    for i in range(40):
        fs.write_bytes("/ns/a/f%02d" % i, b"z" * i)
    assert sorted(fs.listdir("/ns/a")) == ["b"] + ["f%02d" % i for i in range(40)]
    ents = {e.name: e for e in fs.scandir("/ns/a")}
    assert ents["b"].is_dir() and not ents["b"].is_file()
    for i in range(40):
        e = ents["f%02d" % i]
        st = fs.stat(e.path)
        assert e.is_file() and e.stat().st_size == i == st.st_size
        assert e.inode() == st.st_ino and e.stat().st_mode == st.st_mode
    walked = list(fs.walk("/ns"))
    assert walked[0][0] == "/ns" and walked[0][1] == ["a"]
    assert [w[0] for w in walked] == ["/ns", "/ns/a", "/ns/a/b", "/ns/a/b/c"]
    fs.rename("/ns/a/f00", "/ns/a/b/moved")
    fs.replace("/ns/a/f01", "/ns/a/f02")  # over an existing file
    assert fs.read_bytes("/ns/a/f02") == b"z"
    assert not fs.exists("/ns/a/f01") and fs.exists("/ns/a/b/moved")
    fs.symlink("/ns/a/f03", "/ns/link")
    assert fs.readlink("/ns/link") == "/ns/a/f03"
    assert fs.read_bytes("/ns/link") == b"zzz"
    assert stat.S_ISLNK(fs.lstat("/ns/link").st_mode)
    fs.link("/ns/a/f04", "/ns/hard")
    assert fs.stat("/ns/hard").st_nlink == 2
    fs.chmod("/ns/hard", 0o600)
    assert stat.S_IMODE(fs.stat("/ns/a/f04").st_mode) == 0o600
    fs.utime("/ns/hard", ns=(1_000_000_123, 2_000_000_456))
    st = fs.stat("/ns/hard")
    assert st.st_atime_ns == 1_000_000_123 and st.st_mtime_ns == 2_000_000_456
    assert st.st_mtime == pytest.approx(2.000000456)
    before = time.time()
    fs.utime("/ns/hard")
    assert fs.stat("/ns/hard").st_mtime >= before - 2
    v = fs.statvfs()
    assert v.f_blocks > 0 and v.f_bsize > 0 and v.f_namemax == 255
    fs.rmtree("/ns")
    assert not fs.exists("/ns")


def test_threads_write_and_read_in_parallel(fs):
    """The GIL is released in calls: 8 threads, each its own file, all bytes right."""
    from concurrent.futures import ThreadPoolExecutor

    fs.mkdir("/par")
    blobs = [os.urandom((i + 1) * 300000) for i in range(8)]

    def one(i):
        with fs.open("/par/%d" % i, "wb") as f:
            f.write(blobs[i])
        return hashlib.sha256(fs.read_bytes("/par/%d" % i)).digest()

    with ThreadPoolExecutor(8) as ex:
        got = list(ex.map(one, range(8)))
    assert got == [hashlib.sha256(b).digest() for b in blobs]


def test_fork_child_connects_again(fs):
    """A child forked with the file system and a file open uses both (connected and opened
    again by themselves), as DataLoader workers do; the parent's go on working."""
    fs.write_bytes("/forked-in", b"from the parent" * 1000)
    f = fs.open("/forked-in", "rb", buffering=0)
    assert f.read(4) == b"from"
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            if f.read(11) == b" the parent" and fs.read_bytes("/forked-in")[:4] == b"from":
                fs.write_bytes("/forked-out", b"from the child")
                code = 0
        except BaseException as e:  # noqa: BLE001 (report anything, then leave)
            print("child:", repr(e), file=sys.stderr)
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    assert fs.read_bytes("/forked-out") == b"from the child"
    assert f.read(11) == b" the parent"
    f.close()


def test_wheel_installs_and_imports(cluster, tmp_path):
    """pip builds a wheel of python/ against the build's libraries; installed on its own
    (no build tree on the path) it connects and reads."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    src = tmp_path / "src"  # built from a copy: nothing is left in the tree
    shutil.copytree(os.path.join(root, "python"), src,
                    ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    env = dict(os.environ, SHOAL_BUILD=cluster.build, SHOAL_SRC=root)
    p = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps",
                        "--no-build-isolation", "-q", "-w", str(tmp_path / "w"), str(src)],
                       capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    wheels = list((tmp_path / "w").glob("shoal-*.whl"))
    assert len(wheels) == 1, wheels
    p = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target",
                        str(tmp_path / "site"), str(wheels[0])], capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import shoal;"
            "assert shoal.__file__.startswith(sys.argv[1]), shoal.__file__;"
            "fs = shoal.connect('py', sys.argv[2]); print(fs.stat('/').st_mode)")
    p = subprocess.run([sys.executable, "-I", "-c", code, str(tmp_path / "site"),
                        cluster.addr], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and stat.S_ISDIR(int(p.stdout)), p.stdout + p.stderr


class FakeDeviceMemory:
    """What CUDA arrays (torch, CuPy, Numba) show: __cuda_array_interface__."""

    def __init__(self, n):
        self.__cuda_array_interface__ = {"shape": (n,), "typestr": "|u1", "data": (4096, False),
                                         "version": 3, "strides": None}


def test_gpu_reads_say_enodev_without_a_gpu(fs):
    if os.path.exists("/dev/nvidia0"):
        pytest.skip("a GPU is here: bench/gpu measures the GPU path")
    fs.write_bytes("/gpu-src", os.urandom(1 << 20))
    with fs.open("/gpu-src", "rb", buffering=0) as f:
        e = expect(OSError, errno.ENODEV, f.readinto, FakeDeviceMemory(1 << 20))
        assert "GPU" in str(e)
        expect(OSError, errno.ENODEV, f.pread_device, 4096, 100, 0)
        assert f.tell() == 0 and f.read(4) == fs.read_bytes("/gpu-src")[:4]


def test_closing_while_in_use_never_frees_what_is_used(cluster):
    """A file system closed with files open lets them finish (it closes with the last); a
    file closed while another thread reads it closes when that read ends."""
    import threading

    import shoal

    fs2 = shoal.connect("py", cluster.addr)
    f = fs2.open("/in-use", "wb")
    fs2.close()
    with pytest.raises(ValueError):
        fs2.stat("/")
    f.write(b"still written" * 100000)
    f.close()
    fs3 = shoal.connect("py", cluster.addr)
    assert fs3.read_bytes("/in-use") == b"still written" * 100000
    big = os.urandom(48 << 20)
    fs3.write_bytes("/in-use", big)
    r = fs3.open("/in-use", "rb", buffering=0)
    got = {}

    def reader():
        try:
            got["data"] = r.pread(len(big), 0)
        except ValueError as e:  # closed before the read began
            got["closed"] = e

    t = threading.Thread(target=reader)
    t.start()
    time.sleep(0.05)
    r.close()
    t.join(60)
    assert not t.is_alive()
    assert got.get("data", big) == big
    with pytest.raises(ValueError):
        r.read(1)
    fs3.close()


def test_diff_between_snapshots_names_what_changed(cluster):
    """FileSystem.diff: the entries added and removed between two snapshots, everything from
    nothing, and the errors of snapshots out of order or not there."""
    import shoal

    cluster.mkfs("pysnap")
    with shoal.connect("pysnap", cluster.addr) as f:
        f.mkdir("/d")
        f.write_bytes("/d/a", b"x" * 5000)
        f.write_bytes("/d/b", b"y" * 100)
        cluster.shoal("fs", "snapshot", "create", "pysnap", "p1")
        f.unlink("/d/b")
        f.write_bytes("/d/c", b"z")
        cluster.shoal("fs", "snapshot", "create", "pysnap", "p2")
        f.write_bytes("/d/later", b"not in either")
        ch = f.diff("p1", "p2")
        assert all(isinstance(c, shoal.SnapshotChange) for c in ch)
        assert {(c.op, c.name) for c in ch if c.kind == "d"} == {("-", "b"), ("+", "c")}
        b = [c for c in ch if c.kind == "d" and c.name == "b"][0]
        assert b.new is None and len(b.old) > 0
        first = f.diff(None, "p1")
        assert {(c.op, c.name) for c in first if c.kind == "d"} == {
            ("+", "d"), ("+", "a"), ("+", "b")}
        assert all(c.op == "+" and c.old is None for c in first)
        with pytest.raises(OSError) as e:
            f.diff("p2", "p1")
        assert e.value.errno == errno.EINVAL
        with pytest.raises(FileNotFoundError):
            f.diff("p1", "nope")


def test_encrypted_filesystem_reads_with_its_key_only(cluster, tmp_path, monkeypatch):
    """An encrypted file system (docs/security.md): the binding reads and writes it with the
    key in $SHOAL_FS_KEY_FILE, text and binary, torch-sized and small; without the key, or
    with another, connecting is a PermissionError that says why."""
    import shoal

    key = str(tmp_path / "fs.key")
    monkeypatch.setenv("SHOAL_FS_KEY_FILE", key)  # (made by the create)
    cluster.mkfs("pysec", "--encrypt", key)
    blob = os.urandom(3 << 20) + b"tail"
    with shoal.connect("pysec", cluster.addr) as f:
        f.write_bytes("/big", blob)
        f.write_bytes("/small", b"a few bytes")
        with f.open("/t.txt", "w") as t:
            t.write("line\n" * 1000)
        assert f.read_bytes("/big") == blob
        assert f.read_bytes("/small") == b"a few bytes"
        with f.open("/big", "rb") as r:
            r.seek(1 << 20)
            assert r.read(5000) == blob[1 << 20:(1 << 20) + 5000]
        assert f.open("/t.txt").read() == "line\n" * 1000
    monkeypatch.delenv("SHOAL_FS_KEY_FILE")
    with pytest.raises(PermissionError) as e:
        shoal.connect("pysec", cluster.addr)
    assert "SHOAL_FS_KEY" in str(e.value)
    other = str(tmp_path / "other.key")
    monkeypatch.setenv("SHOAL_FS_KEY_FILE", other)
    cluster.mkfs("pysec2", "--encrypt", other)
    with pytest.raises(PermissionError):
        shoal.connect("pysec", cluster.addr)
