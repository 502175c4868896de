# SPDX-License-Identifier: Apache-2.0
"""Shoal for Python: a file system of a Shoal cluster without FUSE in the way.

    import shoal
    fs = shoal.connect("data")                 # $SHOAL_ADDR, else 127.0.0.1:7400
    with fs.open("/ds/0001.bin", "wb") as f:
        f.write(b"...")
    buf = bytearray(1 << 20)
    with fs.open("/ds/0001.bin", "rb", buffering=0) as f:
        n = f.readinto(buf)                    # lands in buf, no copy
    fs.read_many([("/ds/0001.bin", 0, -1, None), ...])   # many reads in flight

Errors are OSError subclasses with errno set (FileNotFoundError, ...), as
os gives them. Handles survive fork(): a child (a DataLoader worker)
connects again by itself on its first call. docs/python.md has the rest:
shoal.torch (Dataset, IterableDataset, Checkpoint) and shoal.fsspec
(shoal://fs/path for pandas, pyarrow and fsspec tools).
"""
import collections
import io
import os
import stat as _stat

from . import _shoal

__all__ = ["connect", "FileSystem", "File", "DirEntry", "SnapshotChange", "DEFAULT_ADDR"]

DEFAULT_ADDR = "127.0.0.1:7400"
RENAME_NOREPLACE = _shoal.RENAME_NOREPLACE
RENAME_EXCHANGE = _shoal.RENAME_EXCHANGE
DEFAULT_BUFFER = 1 << 20  # a buffered file reads and writes 1 MiB at a time


def default_addr():
    """The cluster's management address(es): $SHOAL_ADDR, else 127.0.0.1:7400."""
    return os.environ.get("SHOAL_ADDR") or DEFAULT_ADDR


def connect(fs, addr=None, timeout_ms=0, frag_kb=0, key_file=None):
    """Connect to the cluster at addr ("ip:port[,ip:port...]") and open file system fs, with
    the client key in key_file (else $SHOAL_KEY, else the file $SHOAL_KEY_FILE names;
    docs/security.md)."""
    return FileSystem(fs, addr, timeout_ms=timeout_ms, frag_kb=frag_kb, key_file=key_file)


def _stat_result(t):
    mode, ino, dev, nlink, uid, gid, size, at, mt, ct, blksize, blocks, rdev = t
    return os.stat_result(
        (mode, ino, dev, nlink, uid, gid, size, at // 10**9, mt // 10**9, ct // 10**9),
        {"st_atime": at / 1e9, "st_mtime": mt / 1e9, "st_ctime": ct / 1e9,
         "st_atime_ns": at, "st_mtime_ns": mt, "st_ctime_ns": ct,
         "st_blksize": blksize, "st_blocks": blocks, "st_rdev": rdev})


def _path(p):
    p = os.fspath(p)
    if isinstance(p, bytes):
        p = os.fsdecode(p)
    if not p.startswith("/"):
        p = "/" + p
    return p


def _join(d, name):
    return d.rstrip("/") + "/" + name


_MODES = {"r": os.O_RDONLY, "w": os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
          "a": os.O_WRONLY | os.O_CREAT | os.O_APPEND, "x": os.O_WRONLY | os.O_CREAT | os.O_EXCL}


def _flags(mode):
    kinds = [c for c in mode if c in "rwax"]
    if len(kinds) != 1 or any(c not in "rwaxbt+" for c in mode) or \
            ("b" in mode and "t" in mode) or len(set(mode)) != len(mode):
        raise ValueError("invalid mode: %r" % mode)
    flags = _MODES[kinds[0]]
    if "+" in mode:
        flags = (flags & ~(os.O_WRONLY | os.O_RDONLY)) | os.O_RDWR
    return flags


class File(io.RawIOBase):
    """An open Shoal file, unbuffered (what FileSystem.open wraps in io's buffers).

    readinto() reads into the caller's buffer without a copy; pread, preadinto
    and pwrite take an offset and leave the position alone."""

    def __init__(self, fs, path, flags, mode=0o666):
        super().__init__()
        self._h = fs._fs.open(path, flags, mode)
        self.name = path
        self._flags = flags
        self._pos = 0
        self._append = bool(flags & os.O_APPEND)
        acc = flags & (os.O_WRONLY | os.O_RDWR | os.O_RDONLY)
        self._r = acc in (os.O_RDONLY, os.O_RDWR)
        self._w = acc in (os.O_WRONLY, os.O_RDWR)
        self.mode = ("rb+" if self._r and self._w else "rb" if self._r else
                     "ab" if self._append else "wb")

    def readable(self):
        return self._r

    def writable(self):
        return self._w

    def seekable(self):
        return True

    def fileno(self):
        raise io.UnsupportedOperation("a Shoal file has no file descriptor")

    def _check(self, ok, what):
        if self.closed:
            raise ValueError("I/O operation on closed file")
        if not ok:
            raise io.UnsupportedOperation("File not open for %s" % what)

    def readinto(self, b):
        """Into any writable buffer, or GPU memory: a contiguous CUDA tensor (or any
        object with __cuda_array_interface__) is filled through sh_pread_device."""
        self._check(self._r, "reading")
        dev = _device_target(b)
        if dev is not None:
            n = self._h.pread_device(dev[0], dev[1], self._pos, dev[2])
        else:
            n = self._h.preadinto(b, self._pos)
        self._pos += n
        return n

    def pread_device(self, ptr, n, offset, device=0):
        """n bytes at offset into GPU memory at device pointer ptr: the count read."""
        return self._h.pread_device(ptr, n, offset, device)

    def readall(self):
        self._check(self._r, "reading")
        size = self._h.fstat()[6]
        data = self._h.pread(max(size - self._pos, 0), self._pos) if size > self._pos else b""
        self._pos += len(data)
        return data

    def write(self, b):
        self._check(self._w, "writing")
        if self._append:
            self._pos = self._h.fstat()[6]
        n = self._h.pwrite(b, self._pos)
        self._pos += n
        return n

    def seek(self, offset, whence=io.SEEK_SET):
        self._check(True, "seeking")
        if whence == io.SEEK_SET:
            pos = offset
        elif whence == io.SEEK_CUR:
            pos = self._pos + offset
        elif whence == io.SEEK_END:
            pos = self._h.fstat()[6] + offset
        else:
            raise ValueError("invalid whence (%r)" % whence)
        if pos < 0:
            raise OSError(22, "Invalid argument: negative seek position", self.name)
        self._pos = pos
        return pos

    def tell(self):
        self._check(True, "telling")
        return self._pos

    def truncate(self, size=None):
        self._check(self._w, "writing")
        size = self._pos if size is None else size
        self._h.ftruncate(size)
        return size

    def fsync(self):
        """What was written is durable (os.fsync of a local file)."""
        self._check(True, "syncing")
        self._h.fsync()

    def stat(self):
        return _stat_result(self._h.fstat())

    def pread(self, n, offset):
        return self._h.pread(n, offset)

    def preadinto(self, b, offset):
        return self._h.preadinto(b, offset)

    def pwrite(self, b, offset):
        return self._h.pwrite(b, offset)

    def close(self):
        if not self.closed:
            try:
                super().close()
            finally:
                self._h.close()

    def __repr__(self):
        return "<shoal.File name=%r mode=%r>" % (self.name, self.mode)


def _device_target(b):
    """(device pointer, bytes, device index) of GPU memory to read into, else None."""
    cai = getattr(b, "__cuda_array_interface__", None)
    if cai is None:
        return None
    if cai.get("strides") is not None:
        raise ValueError("readinto: GPU memory must be contiguous")
    n = 1
    for d in cai["shape"]:
        n *= d
    itemsize = int(cai["typestr"][2:])
    dev = getattr(b, "device", None)
    return cai["data"][0], n * itemsize, getattr(dev, "index", None) or 0


def _raw(f, what):
    """The shoal.File under what FileSystem.open returned, its buffers flushed first."""
    if not isinstance(f, File) and hasattr(f, "flush"):
        f.flush()  # what a buffered writer holds reads back, and is synced
    raw = f
    while not isinstance(raw, File):
        raw = getattr(raw, "raw", None) or getattr(raw, "buffer", None)
        if raw is None:
            raise TypeError("%s: not a path or Shoal file: %r" % (what, f))
    return raw


def _fsync(f):
    """fsync a file object FileSystem.open returned (flushes its buffer first)."""
    _raw(f, "fsync").fsync()


class DirEntry:
    """What scandir yields, as os.DirEntry: attributes from the listing when they came."""

    __slots__ = ("name", "path", "_ino", "_type", "_stat", "_fs")

    def __init__(self, fs, d, name, dtype, ino, st):
        self.name = name
        self.path = _join(d, name)
        self._fs, self._type, self._ino = fs, dtype, ino
        self._stat = _stat_result(st) if st is not None else None

    def inode(self):
        return self._ino

    def _mode(self):
        if self._type != 0:
            return {4: _stat.S_IFDIR, 8: _stat.S_IFREG, 10: _stat.S_IFLNK}.get(self._type, 0)
        return _stat.S_IFMT(self.stat(follow_symlinks=False).st_mode)

    def is_dir(self, follow_symlinks=True):
        if follow_symlinks and self.is_symlink():
            return self._fs.isdir(self.path)
        return self._mode() == _stat.S_IFDIR

    def is_file(self, follow_symlinks=True):
        if follow_symlinks and self.is_symlink():
            return self._fs.isfile(self.path)
        return self._mode() == _stat.S_IFREG

    def is_symlink(self):
        return self._mode() == _stat.S_IFLNK

    def stat(self, follow_symlinks=True):
        if self._stat is None or (follow_symlinks and
                                  _stat.S_ISLNK(self._stat.st_mode)):
            st = self._fs.stat(self.path, follow_symlinks=follow_symlinks)
            if not follow_symlinks or not _stat.S_ISLNK(st.st_mode):
                self._stat = st
            return st
        return self._stat

    def __fspath__(self):
        return self.path

    def __repr__(self):
        return "<shoal.DirEntry %r>" % self.name


SnapshotChange = collections.namedtuple("SnapshotChange",
                                        "op kind bucket ino name off old new")
SnapshotChange.__doc__ = """One metadata record that changed between two snapshots
(FileSystem.diff): op "+" (added), "-" (removed) or "~" (changed); kind "i" (an inode's
attributes), "d" (a directory entry: ino is its directory), "x" (an xattr), "e" (an extent:
off is where it starts), "l" (a symlink's target), "y" (a small file's bytes), "p" (a
directory's parent), "g" (which buckets hold a directory's entries); name (str, entries
and xattrs) or None; old and new: the record's bytes before and after, or None."""


class FileSystem:
    """One file system of a Shoal cluster, with an os-like API over absolute paths."""

    def __init__(self, name, addr=None, timeout_ms=0, frag_kb=0, key_file=None):
        self.name = name
        self.addr = addr or default_addr()
        # a key file's path, made absolute: a spawned worker may start elsewhere
        key_file = os.path.abspath(key_file) if key_file else None
        self._opts = (timeout_ms, frag_kb, key_file)
        self._fs = _shoal.FS(self.addr, name, timeout_ms, frag_kb, key_file)

    def __reduce__(self):
        # pickled (a Dataset sent to spawned workers): the receiver connects by itself
        return (FileSystem, (self.name, self.addr) + self._opts)

    def close(self):
        self._fs.close()

    def diff(self, from_snapshot, to_snapshot):
        """What changed in this file system from snapshot from_snapshot (None: from the
        empty file system) to the later snapshot to_snapshot: a list of SnapshotChange, bucket
        by bucket, in key order within a bucket (docs/snapshots.md). It reads the two
        snapshots, not the live tree."""
        return [SnapshotChange(op, kind, bucket, ino,
                               os.fsdecode(name) if name is not None else None, off, old, new)
                for op, kind, bucket, ino, name, off, old, new
                in self._fs.diff(from_snapshot, to_snapshot)]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return "<shoal.FileSystem %r at %s>" % (self.name, self.addr)

    # ---- files ----
    def open(self, path, mode="r", buffering=-1, encoding=None, errors=None, newline=None):
        """As the builtin open(), on this file system."""
        flags = _flags(mode)
        binary = "b" in mode
        if buffering == 0 and not binary:
            raise ValueError("can't have unbuffered text I/O")
        raw = File(self, _path(path), flags)
        try:
            if buffering == 0:
                return raw
            size = buffering if buffering > 1 else DEFAULT_BUFFER
            if raw.readable() and raw.writable():
                f = io.BufferedRandom(raw, size)
            elif raw.writable():
                f = io.BufferedWriter(raw, size)
            else:
                f = io.BufferedReader(raw, size)
            if binary:
                return f
            t = io.TextIOWrapper(f, encoding, errors, newline, line_buffering=buffering == 1)
            t.mode = mode
            return t
        except BaseException:
            raw.close()
            raise

    fsync = staticmethod(_fsync)

    def read_bytes(self, path):
        """The whole file, in one call."""
        return self._fs.read_many([(_path(path), 0)])[0]

    def write_bytes(self, path, data, fsync=False):
        """Create or replace path with data (durable on return with fsync)."""
        with File(self, _path(path), os.O_WRONLY | os.O_CREAT | os.O_TRUNC) as f:
            mv = memoryview(data).cast("B")
            done = 0
            while done < len(mv):
                done += f.pwrite(mv[done:], done)
            if fsync:
                f.fsync()
        return len(mv)

    def read_many(self, requests, threads=16, raise_errors=True):
        """Many reads at once: [(path_or_file, offset[, length[, buffer]]), ...].

        length -1 (or left out) reads to the end; a buffer receives the bytes without a
        copy and its result is the count, else the result is a bytes object. Open files
        (File, or what open() returned) go to the library's asynchronous calls together;
        paths are opened, read and closed by `threads` threads at once. The GIL is
        released throughout. The first failure raises (with its path); with
        raise_errors=False it stands in the list as its OSError."""
        reqs = []
        for r in requests:
            target = r[0]
            if isinstance(target, (str, bytes, os.PathLike)):
                target = _path(target)
            else:
                target = _raw(target, "read_many")._h
            reqs.append((target,) + tuple(r[1:]))
        return self._fs.read_many(reqs, threads, raise_errors)

    # ---- names ----
    def stat(self, path, follow_symlinks=True):
        """os.stat of path (follow_symlinks=False: os.lstat)."""
        return _stat_result(self._fs.stat(_path(path), follow_symlinks))

    def lstat(self, path):
        return self.stat(path, follow_symlinks=False)

    def exists(self, path):
        try:
            self._fs.stat(_path(path), True)
            return True
        except FileNotFoundError:
            return False

    def isdir(self, path):
        try:
            return _stat.S_ISDIR(self._fs.stat(_path(path), True)[0])
        except (FileNotFoundError, NotADirectoryError):
            return False

    def isfile(self, path):
        try:
            return _stat.S_ISREG(self._fs.stat(_path(path), True)[0])
        except (FileNotFoundError, NotADirectoryError):
            return False

    def listdir(self, path="/"):
        return [os.fsdecode(e[0]) for e in self._fs.listdir(_path(path), False)]

    def scandir(self, path="/"):
        """os.scandir: entries with their attributes read with the listing (readdirplus)."""
        d = _path(path)
        return iter([DirEntry(self, d, os.fsdecode(n), t, ino, st)
                     for n, t, ino, st in self._fs.listdir(d, True)])

    def walk(self, top="/", topdown=True):
        """os.walk: (dirpath, dirnames, filenames), one readdirplus listing per directory."""
        top = _path(top)
        try:
            entries = list(self.scandir(top))
        except OSError:
            return
        dirs = [e.name for e in entries if e.is_dir(follow_symlinks=False)]
        files = [e.name for e in entries if not e.is_dir(follow_symlinks=False)]
        if topdown:
            yield top, dirs, files
        for d in list(dirs):
            yield from self.walk(_join(top, d), topdown)
        if not topdown:
            yield top, dirs, files

    def mkdir(self, path, mode=0o777):
        self._fs.mkdir(_path(path), mode)

    def makedirs(self, path, mode=0o777, exist_ok=False):
        path = _path(path)
        parts = [p for p in path.split("/") if p]
        cur = ""
        for i, p in enumerate(parts):
            cur += "/" + p
            try:
                self._fs.mkdir(cur, mode)
            except FileExistsError:
                if i == len(parts) - 1 and not exist_ok:
                    raise
                if not self.isdir(cur):
                    raise

    def rename(self, src, dst):
        """Replaces dst if it exists (as os.rename on Linux)."""
        self._fs.rename(_path(src), _path(dst), 0)

    replace = rename

    def remove(self, path):
        self._fs.unlink(_path(path))

    unlink = remove

    def rmdir(self, path):
        self._fs.rmdir(_path(path))

    def rmtree(self, path):
        path = _path(path)
        for e in self.scandir(path):
            if e.is_dir(follow_symlinks=False):
                self.rmtree(e.path)
            else:
                self.remove(e.path)
        self.rmdir(path)

    def symlink(self, target, path):
        self._fs.symlink(os.fspath(target), _path(path))

    def readlink(self, path):
        return os.fsdecode(self._fs.readlink(_path(path)))

    def link(self, existing, new):
        self._fs.link(_path(existing), _path(new))

    def chmod(self, path, mode):
        self._fs.chmod(_path(path), mode)

    def chown(self, path, uid, gid):
        self._fs.chown(_path(path), uid, gid)

    def truncate(self, path, length):
        self._fs.truncate(_path(path), length)

    def utime(self, path, times=None, ns=None):
        if times is not None and ns is not None:
            raise ValueError("utime: you may specify either 'times' or 'ns' but not both")
        if times is not None:
            ns = (int(times[0] * 1e9), int(times[1] * 1e9))
        at, mt = ns if ns is not None else (None, None)
        self._fs.utime(_path(path), at, mt)

    def statvfs(self):
        return os.statvfs_result(self._fs.statvfs())


try:  # shoal:// for fsspec, loaded only when fsspec is asked for it
    from fsspec.registry import register_implementation as _register
    _register("shoal", "shoal.fsspec.ShoalFileSystem", clobber=True)
except ImportError:
    pass
