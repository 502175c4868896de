#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""libshoal_preload.so on a mount (docs/preload.md): what a program reads and writes
through it is what the mount would have given it, and what the mount shows after.

usage: tests/cluster/test_preload.py BIN_DIR [--only NAME[,NAME]] [--keep]

Real shoald processes on loopback, a mount of an lz4 filesystem, programs run with
LD_PRELOAD and SHOAL_PRELOAD_STATS (one line per process: descriptors served, left to
the kernel, given back to it):
- Python writing and reading files of 0 B to 5 MiB: served, the bytes as written; a
  process without the library then reads the same bytes and sizes, and a stat cached
  before a preloaded writer extended a file sees the new size at once (the mount's
  flush drops the kernel's attributes);
- tests/preload/check.c: every intercepted call (errors included, a fork, threads) gives
  the same transcript on a local directory, through the mount, and under the library;
- tests/posix/posix.py and tests/posix/fsx.py under the library;
- cp, cmp, dd, a fork whose child reads an inherited descriptor and writes a file it
  never closes (os._exit);
- SHOAL_PRELOAD=0 serves nothing; torch.save and torch.load when torch is installed.
Prints the closing line "N passed, N failed, N skipped".
"""
import hashlib
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_cluster as tc  # noqa: E402
from test_cluster import Skip, check, make_fs, unmount, fuse_usable  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = []


def test(fn):
    TESTS.append(fn)
    return fn


def library():
    return os.path.normpath(os.path.join(tc.BIN, "..", "lib", "libshoal_preload.so"))


class Preloaded:
    """Runs commands under the library, each process's line in one stats file."""

    def __init__(self, d):
        self.stats = os.path.join(d, "preload-stats")

    def env(self, **extra):
        e = dict(os.environ, LD_PRELOAD=library(), SHOAL_PRELOAD_STATS=self.stats)
        e.update(extra)
        return e

    def run(self, *cmd, cwd=None, **extra):
        """Run cmd under the library: its stdout; the counts it added (served, kernel, real)."""
        before = self.counts()
        r = subprocess.run(list(cmd), capture_output=True, text=True, errors="replace", cwd=cwd,
                           timeout=300,
                           env=self.env(**extra))
        check(r.returncode == 0, "%s under the library: %s%s" % (" ".join(cmd), r.stdout,
                                                                    r.stderr))
        after = self.counts()
        return r.stdout, tuple(a - b for a, b in zip(after, before))

    def counts(self):
        s = k = real = 0
        if os.path.exists(self.stats):
            with open(self.stats) as f:
                for line in f:
                    w = line.split()
                    s, k, real = s + int(w[3]), k + int(w[5]), real + int(w[7])
        return s, k, real


def mounted(c):
    if not fuse_usable():
        raise Skip("no usable /dev/fuse or fusermount3 on this machine")
    if not os.path.exists(library()):
        raise Skip("no %s (not built in SAN builds)" % library())
    c.up()
    make_fs(c, compression="lz4")
    mnt = os.path.join(c.dir, "mnt")
    os.makedirs(mnt)
    tc.mount_or_skip(c, "fs1", mnt)
    return mnt


WRITER = r"""
import hashlib, os, sys
d = sys.argv[1]
out = []
for i, n in enumerate([0, 1, 100, 4096, 4097, 65536, 131072 + 5, 1 << 20, 5 << 20]):
    data = hashlib.sha256(b"%d" % i).digest() * (n // 32 + 1)
    data = data[:n]
    with open(os.path.join(d, "f%d" % i), "wb") as f:
        f.write(data[:n // 2])
        f.write(data[n // 2:])
    with open(os.path.join(d, "f%d" % i), "rb") as f:
        assert f.read() == data, "f%d reads back" % i
    assert os.stat(os.path.join(d, "f%d" % i)).st_size == n
    out.append("%d %s" % (n, hashlib.sha256(data).hexdigest()))
# a read-write descriptor: pwrite, pread, lseek, ftruncate
fd = os.open(os.path.join(d, "rw"), os.O_RDWR | os.O_CREAT, 0o644)
os.pwrite(fd, b"x" * 10000, 0)
os.pwrite(fd, b"y" * 10, 5000)
assert os.pread(fd, 20, 4995) == b"x" * 5 + b"y" * 10 + b"x" * 5
assert os.lseek(fd, 0, os.SEEK_END) == 10000
os.ftruncate(fd, 6000)
assert os.fstat(fd).st_size == 6000
os.close(fd)
print("\n".join(out))
"""

FORK = r"""
import os, sys
d = sys.argv[1]
fd = os.open(os.path.join(d, "f7"), os.O_RDONLY)
first = os.read(fd, 1000)
pid = os.fork()
if pid == 0:
    ok = os.pread(fd, 1000, 1000) == open(os.path.join(d, "f7"), "rb").read()[1000:2000]
    # written, never closed: os._exit runs no destructor, the library's _exit lands it
    w = os.open(os.path.join(d, "child"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(w, b"c" * 300000)
    os._exit(0 if ok else 3)
_, st = os.waitpid(pid, 0)
assert os.WEXITSTATUS(st) == 0, "the child's read"
assert os.read(fd, 1000) == open(os.path.join(d, "f7"), "rb").read()[1000:2000]
assert open(os.path.join(d, "child"), "rb").read() == b"c" * 300000
print("fork ok")
"""

TORCH = r"""
import sys, torch
t = {"w": torch.arange(1 << 20, dtype=torch.float32), "step": 7}
torch.save(t, sys.argv[1])
u = torch.load(sys.argv[1])
assert torch.equal(u["w"], t["w"]) and u["step"] == 7
print("torch ok")
"""


@test
def preload_serves_what_the_mount_would(c):
    """Python, posix.py, fsx, coreutils, fork and torch under libshoal_preload.so on a
    mount: served (stats), the same bytes and sizes as the kernel's view, no failed check."""
    mnt = mounted(c)
    pl = Preloaded(c.dir)
    try:
        d = os.path.join(mnt, "w")
        os.makedirs(d)
        out, (served, _, _) = pl.run(sys.executable, "-c", WRITER, d)
        check(served >= 18, "the writer's files are served: %d descriptors" % served)
        # the kernel's view, in this process (no library here)
        for i, line in enumerate(out.split()[::2]):
            n, digest = int(line), out.split()[2 * i + 1]
            p = os.path.join(d, "f%d" % i)
            check(os.stat(p).st_size == n, "f%d: size %d through the kernel" % (i, n))
            with open(p, "rb") as f:
                check(hashlib.sha256(f.read()).hexdigest() == digest,
                      "f%d: the bytes through the kernel" % i)
        check(os.stat(os.path.join(d, "rw")).st_size == 6000, "rw truncated")
        # a stat the kernel cached, then a preloaded writer extends the file: seen at once
        grow = os.path.join(d, "grow")
        with open(grow, "wb") as f:
            f.write(b"g" * 1000)
        check(os.stat(grow).st_size == 1000, "grow before")
        pl.run(sys.executable, "-c", "import sys; open(sys.argv[1], 'r+b').write(b'h' * 5000)",
               grow)
        check(os.stat(grow).st_size == 5000, "a cached stat after a preloaded write: %d" %
              os.stat(grow).st_size)
        # coreutils: reads and writes served, the copy the same
        _, (served, _, _) = pl.run("cp", os.path.join(d, "f8"), os.path.join(d, "f8.cp"))
        check(served >= 1, "cp: %d served" % served)
        pl.run("cmp", os.path.join(d, "f8"), os.path.join(d, "f8.cp"))
        pl.run("dd", "if=" + os.path.join(d, "f7"), "of=" + os.path.join(d, "f7.dd"), "bs=64k",
               "status=none")
        check(open(os.path.join(d, "f7.dd"), "rb").read() ==
              open(os.path.join(d, "f7"), "rb").read(), "dd's copy through the kernel")
        out, _ = pl.run(sys.executable, "-c", FORK, d)
        check("fork ok" in out, "fork: %s" % out)
        # off: nothing served
        _, (served, _, _) = pl.run("cat", os.path.join(d, "f8"), SHOAL_PRELOAD="0")
        check(served == 0, "SHOAL_PRELOAD=0 served %d" % served)
        # every intercepted call, errors included, a fork and threads: the same transcript
        # on a local directory, through the mount, and under the library
        chk = os.path.normpath(os.path.join(tc.BIN, "..", "tests", "preload_check"))
        outs = []
        for where, preload in (("local", False), ("mount", False), ("library", True)):
            d2 = tempfile.mkdtemp(dir=c.dir) if where == "local" else os.path.join(mnt, where)
            os.makedirs(d2, exist_ok=True)
            if preload:
                out, (served, _, _) = pl.run(chk, d2)
                check(served >= 10, "preload_check: %d descriptors served" % served)
            else:
                r = subprocess.run([chk, d2], capture_output=True, text=True, timeout=120)
                check(r.returncode == 0, "preload_check %s: %s" % (where, r.stderr))
                out = r.stdout
            outs.append(out)
        for where, out in (("the mount", outs[1]), ("the library", outs[2])):
            diff = [(x, y) for x, y in zip(outs[0].splitlines(), out.splitlines()) if x != y]
            check(not diff and len(out) == len(outs[0]),
                  "preload_check: %s answers otherwise than a local directory: %s" %
                  (where, diff[:5]))
        print("  preload_check: %d answers, the same locally, through the mount and under "
              "the library" % len(outs[0].splitlines()))
        # the POSIX checks and fsx, under the library
        ref = tempfile.mkdtemp(dir=c.dir)
        os.makedirs(os.path.join(mnt, "posix"))
        out, (served, _, _) = pl.run(sys.executable, os.path.join(HERE, "..", "posix",
                                                                  "posix.py"),
                                     os.path.join(mnt, "posix"), ref)
        print("  posix.py under the library: %s, %d descriptors served" %
              (out.strip().splitlines()[-1], served))
        # fsx: as the mount runs it (mmap and fallocate give the file to the kernel), and
        # without those, on the library's paths throughout
        for seed, only_served in ((1, False), (5, False), (1, True), (2, True), (3, True)):
            extra = ("--no-mmap", "--no-fallocate") if only_served else ()
            out, counts = pl.run(sys.executable, os.path.join(HERE, "..", "posix", "fsx.py"),
                                 mnt, "--ops", "1500", "--seed", str(seed), *extra)
            check("all as the model" in out, "fsx seed %d %s: %s" % (seed, extra, out))
            check(not only_served or counts[2] == 0, "fsx %s gave a file back: %s" %
                  (extra, counts))
            print("  fsx seed %d %s under the library: served/kernel/real %s" %
                  (seed, " ".join(extra), counts))
        torch_py = next((py for py in (sys.executable, "/usr/bin/python3") if os.path.exists(py)
                         and subprocess.run([py, "-c", "import torch"],
                                            capture_output=True).returncode == 0), None)
        if torch_py:
            out, (served, _, _) = pl.run(torch_py, "-c", TORCH, os.path.join(d, "ck.pt"))
            check("torch ok" in out and served >= 1, "torch: %s, %d served" % (out, served))
        else:
            print("  no torch here: torch.save and torch.load not tried")
        total = pl.counts()
        print("  in all: %d descriptors served, %d the kernel's, %d given back" % total)
    finally:
        unmount(mnt)


def main():
    return tc.test_main(__doc__, TESTS, {}, 6, "SH_PRELOAD_PORT", 28900)


if __name__ == "__main__":
    sys.exit(main())
