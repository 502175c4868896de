#!/usr/bin/env python3
"""A file-system exerciser in the manner of fsx: random operations on one file
(writes, reads, truncates up and down, holes, appends, fallocate, mmap reads and
writes, fsync, close and reopen, a second descriptor) checked after each one against
a model of what the file must hold.

usage: tests/posix/fsx.py DIR [--ops N] [--seed S] [--max-size BYTES] [--check-every K]
                          [--no-mmap] [--no-fallocate]

--no-mmap and --no-fallocate leave those operations out (the same seed then draws
the same others): what libshoal_preload.so hands to the kernel, so that a run under it
stays on its own paths.

Prints the seed; on a mismatch, the operation log's tail and the first differing
offset, exit 1. Run against the mount by the cluster tests, and against any local
directory as a reference (it must pass there too).
"""
import mmap
import os
import random
import sys


def main():
    args = sys.argv[1:]
    if not args:
        print(__doc__)
        return 2
    d = args[0]
    ops = int(args[args.index("--ops") + 1]) if "--ops" in args else 2000
    seed = int(args[args.index("--seed") + 1]) if "--seed" in args else random.randrange(1 << 30)
    max_size = int(args[args.index("--max-size") + 1]) if "--max-size" in args else 3 << 20
    every = int(args[args.index("--check-every") + 1]) if "--check-every" in args else 50
    no_mmap, no_falloc = "--no-mmap" in args, "--no-fallocate" in args
    rnd = random.Random(seed)
    print("fsx: seed %d, %d operations, files up to %d bytes" % (seed, ops, max_size))
    path = os.path.join(d, "fsx.%d" % seed)
    model = bytearray()
    log = []
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    fd2 = None

    def fail(msg):
        print("fsx: seed %d: %s" % (seed, msg))
        if os.environ.get("FSX_DUMP"):
            with open(os.environ["FSX_DUMP"], "wb") as f:
                f.write(model)
        for line in log[-25:]:
            print("  " + line)
        sys.exit(1)

    def check_range(got, off, what):
        want = bytes(model[off:off + len(got)])
        if got != want:
            at = next(i for i in range(min(len(got), len(want))) if got[i] != want[i]) \
                if len(got) == len(want) else min(len(got), len(want))
            fail("%s: %d bytes at %d differ from the model at %d (got %r, want %r)" %
                 (what, len(got), off, off + at, got[at:at + 8], want[at:at + 8]))

    def pattern(n, op):
        b = bytearray(rnd.getrandbits(8) for _ in range(min(n, 64)))
        return bytes((b * (n // len(b) + 1))[:n]) if n else b""

    for i in range(ops):
        size = len(model)
        r = rnd.random()
        if r < 0.30:  # write, anywhere (holes when past the end)
            off = rnd.randrange(0, max(1, min(max_size - 1, size + 65536)))
            n = rnd.choice([1, 7, 512, 4096, 5000, 65536, 131072, 600000])
            n = max(1, min(n, max_size - off))
            data = pattern(n, i)
            log.append("%d write %d+%d" % (i, off, n))
            if os.pwrite(fd, data, off) != n:
                fail("short write")
            if off > size:
                model.extend(bytes(off - size))
            model[off:off + n] = data
        elif r < 0.50:  # read
            off = rnd.randrange(0, size + 1)
            n = rnd.choice([1, 100, 4096, 70000, 1 << 20])
            log.append("%d read %d+%d" % (i, off, n))
            got = os.pread(fd if fd2 is None or rnd.random() < 0.5 else fd2, n, off)
            if len(got) != max(0, min(n, size - off)):
                fail("read %d+%d: %d bytes, file is %d" % (off, n, len(got), size))
            check_range(got, off, "read")
        elif r < 0.58:  # truncate down or up
            n = rnd.randrange(0, max_size) if rnd.random() < 0.3 else rnd.randrange(0, size + 1)
            log.append("%d truncate %d" % (i, n))
            os.ftruncate(fd, n)
            if n < size:
                del model[n:]
            else:
                model.extend(bytes(n - size))
        elif r < 0.63:  # append through O_APPEND
            n = rnd.choice([1, 300, 4096, 100000])
            n = min(n, max(0, max_size - size))
            if n == 0:
                continue
            data = pattern(n, i)
            log.append("%d append %d" % (i, n))
            a = os.open(path, os.O_WRONLY | os.O_APPEND)
            os.write(a, data)
            os.close(a)
            model.extend(data)
        elif r < 0.68 and no_falloc:
            continue
        elif r < 0.75 and no_mmap:
            continue
        elif r < 0.68:  # fallocate mode 0: extends, zeros
            off = rnd.randrange(0, max_size // 2)
            n = rnd.randrange(1, max_size // 2)
            log.append("%d fallocate %d+%d" % (i, off, n))
            try:
                os.posix_fallocate(fd, off, n)
            except OSError as e:
                fail("fallocate: %s" % e)
            if off + n > size:
                model.extend(bytes(off + n - size))
        elif r < 0.75 and size > 0:  # mmap: read a range, write a range
            off = rnd.randrange(0, size)
            n = min(rnd.choice([1, 100, 4096, 20000]), size - off)
            write = rnd.random() < 0.5
            log.append("%d mmap %s %d+%d" % (i, "write" if write else "read", off, n))
            m = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            try:
                if write:
                    data = pattern(n, i)
                    m[off:off + n] = data
                    model[off:off + n] = data
                    m.flush()
                else:
                    check_range(bytes(m[off:off + n]), off, "mmap read")
            finally:
                m.close()
        elif r < 0.80:  # fsync
            log.append("%d fsync" % i)
            os.fsync(fd)
        elif r < 0.88:  # close and reopen; sometimes a second descriptor
            log.append("%d reopen" % i)
            os.close(fd)
            fd = os.open(path, os.O_RDWR)
            if fd2 is not None:
                os.close(fd2)
                fd2 = None
            if rnd.random() < 0.5:
                fd2 = os.open(path, os.O_RDONLY)
        else:  # the size, as stat says
            log.append("%d stat" % i)
            st = os.fstat(fd)
            if st.st_size != size:
                fail("stat says %d bytes, the model %d" % (st.st_size, size))
        if i % every == every - 1 or i == ops - 1:
            # the whole file, through a fresh descriptor
            os.fsync(fd)
            with open(path, "rb") as f:
                got = f.read()
            if len(got) != len(model):
                fail("the file is %d bytes, the model %d" % (len(got), len(model)))
            check_range(got, 0, "whole file")
    os.close(fd)
    if fd2 is not None:
        os.close(fd2)
    os.unlink(path)
    print("fsx: seed %d: %d operations, all as the model" % (seed, ops))
    return 0


if __name__ == "__main__":
    sys.exit(main())
