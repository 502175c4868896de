# SPDX-License-Identifier: Apache-2.0
"""shoal:// for fsspec (pandas, pyarrow, datasets and the other fsspec tools).

    import fsspec
    with fsspec.open("shoal://data/tables/x.csv", "w") as f:   # file system "data"
        f.write("a,b\\n1,2\\n")
    fs = fsspec.filesystem("shoal", addr="10.0.0.1:7400")
    fs.ls("data/tables")

A path is FS/PATH: the first component names the file system. The
cluster's address is the addr= storage option, else $SHOAL_ADDR, else
127.0.0.1:7400. `import shoal` registers the protocol; an installed
package also registers it through fsspec's entry points.
"""
import stat as _stat

from fsspec.spec import AbstractFileSystem

import shoal

__all__ = ["ShoalFileSystem"]

COPY_CHUNK = 8 << 20


class ShoalFileSystem(AbstractFileSystem):
    protocol = "shoal"
    root_marker = ""

    def __init__(self, addr=None, timeout_ms=0, key_file=None, **kwargs):
        super().__init__(**kwargs)
        self.addr = addr or shoal.default_addr()
        self.timeout_ms = timeout_ms
        self.key_file = key_file  # else $SHOAL_KEY, $SHOAL_KEY_FILE (docs/security.md)
        self._open_fss = {}

    @classmethod
    def _strip_protocol(cls, path):
        if isinstance(path, list):
            return [cls._strip_protocol(p) for p in path]
        path = str(path)
        if path.startswith("shoal://"):
            path = path[len("shoal://"):]
        return path.strip("/")

    def _split(self, path):
        """(the FileSystem, the path in it) of FS/PATH."""
        path = self._strip_protocol(path)
        name, _, rest = path.partition("/")
        if not name:
            raise ValueError("a shoal path names its file system first: shoal://FS/PATH")
        fs = self._open_fss.get(name)
        if fs is None:
            fs = shoal.connect(name, self.addr, timeout_ms=self.timeout_ms,
                               key_file=self.key_file)
            self._open_fss[name] = fs
        return fs, "/" + rest

    @staticmethod
    def _entry(name, st):
        kind = ("directory" if _stat.S_ISDIR(st.st_mode) else
                "file" if _stat.S_ISREG(st.st_mode) else "other")
        return {"name": name, "size": st.st_size if kind == "file" else 0, "type": kind,
                "mode": st.st_mode, "nlink": st.st_nlink, "ino": st.st_ino,
                "mtime": st.st_mtime, "created": st.st_ctime,
                "islink": _stat.S_ISLNK(st.st_mode)}

    def ls(self, path, detail=True, **kwargs):
        path = self._strip_protocol(path)
        fs, p = self._split(path)
        if not fs.isdir(p):
            info = self.info(path)
            return [info] if detail else [info["name"]]
        out = []
        for e in fs.scandir(p):
            name = path + "/" + e.name
            if detail:
                st = e.stat(follow_symlinks=True) if e.is_symlink() else e.stat()
                out.append(self._entry(name, st))
            else:
                out.append(name)
        return out

    def info(self, path, **kwargs):
        path = self._strip_protocol(path)
        fs, p = self._split(path)
        return self._entry(path, fs.stat(p))

    def _open(self, path, mode="rb", block_size=None, autocommit=True, cache_options=None,
              **kwargs):
        fs, p = self._split(path)
        if "w" in mode or "a" in mode or "x" in mode:
            parent = p.rsplit("/", 1)[0]
            if parent and not fs.isdir(parent) and self.auto_mkdir(kwargs):
                fs.makedirs(parent, exist_ok=True)
        return fs.open(p, mode if "b" in mode else mode + "b",
                       buffering=block_size if block_size else -1)

    @staticmethod
    def auto_mkdir(kwargs):
        return kwargs.get("auto_mkdir", True)

    def mkdir(self, path, create_parents=True, **kwargs):
        fs, p = self._split(path)
        if create_parents:
            fs.makedirs(p, exist_ok=False)
        else:
            fs.mkdir(p)

    def makedirs(self, path, exist_ok=False):
        fs, p = self._split(path)
        fs.makedirs(p, exist_ok=exist_ok)

    def rmdir(self, path):
        fs, p = self._split(path)
        fs.rmdir(p)

    def rm_file(self, path):
        """A file, or an empty directory (fsspec's rm removes the tree bottom up with it)."""
        self._rm(path)

    def _rm(self, path):
        fs, p = self._split(path)
        if fs.isdir(p):
            fs.rmdir(p)
        else:
            fs.remove(p)

    def cp_file(self, path1, path2, **kwargs):
        fs1, p1 = self._split(path1)
        fs2, p2 = self._split(path2)
        buf = bytearray(COPY_CHUNK)
        with fs1.open(p1, "rb", buffering=0) as src, fs2.open(p2, "wb", buffering=0) as dst:
            while True:
                n = src.readinto(buf)
                if not n:
                    break
                mv = memoryview(buf)[:n]
                done = 0
                while done < n:
                    done += dst.write(mv[done:])

    def mv(self, path1, path2, recursive=False, maxdepth=None, **kwargs):
        fs1, p1 = self._split(path1)
        fs2, p2 = self._split(path2)
        if fs1 is fs2:
            fs1.rename(p1, p2)  # a directory moves whole, as rename(2) does
            return
        super().mv(path1, path2, recursive=recursive, maxdepth=maxdepth, **kwargs)

    def cat_file(self, path, start=None, end=None, **kwargs):
        fs, p = self._split(path)
        if start is None and end is None:
            return fs.read_bytes(p)
        size = fs.stat(p).st_size
        start = 0 if start is None else (start if start >= 0 else max(size + start, 0))
        end = size if end is None else (end if end >= 0 else max(size + end, 0))
        with fs.open(p, "rb", buffering=0) as f:
            return f.pread(max(end - start, 0), start)

    def pipe_file(self, path, value, **kwargs):
        fs, p = self._split(path)
        parent = p.rsplit("/", 1)[0]
        if parent and not fs.isdir(parent):
            fs.makedirs(parent, exist_ok=True)
        fs.write_bytes(p, value)

    def created(self, path):
        return self.info(path)["created"]

    def modified(self, path):
        import datetime

        return datetime.datetime.fromtimestamp(self.info(path)["mtime"],
                                               tz=datetime.timezone.utc)

    def ukey(self, path):
        st = self.info(path)
        return "%s-%s-%s" % (st["ino"], st["size"], st["mtime"])


try:
    import fsspec as _fsspec

    _fsspec.register_implementation("shoal", ShoalFileSystem, clobber=True)
except (ImportError, ValueError):
    pass
