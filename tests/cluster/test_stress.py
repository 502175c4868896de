#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""stress-ng's file system stressors on the mount, each checking what it reads back, and
dbench's file-server load.

usage: tests/cluster/test_stress.py BIN_DIR [--only NAME[,NAME]] [--keep]
       (make stress; STRESS_SECONDS per stressor, default 6)

A data-integrity exerciser nobody here wrote: real shoald processes on loopback (shoal
local up, as tests/cluster/test_cluster.py), one mount, and stress-ng (Debian's, from
scripts/deps) with --verify and two workers per stressor, each in a directory of its
own. A stressor fails the test when stress-ng exits other than 0 or prints a failure;
one stress-ng skips itself (what FUSE has not: FIEMAP, verity) is listed, not failed.
Then dbench (8 clients, DBENCH_SECONDS, default 60) on a mount of its own.
Not in the default run (about 9 minutes): `make stress`.
Prints the closing line "N passed, N failed, N skipped".
"""
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_cluster as tc  # noqa: E402
from test_cluster import Fail, Skip, check, make_fs, unmount, fuse_usable  # noqa: E402

TESTS = []

# names as stress-ng 0.15 (Debian 12) knows them; each checks its data with --verify
# where it can
STRESSORS = [
    # data: written, read back, compared
    "hdd", "seek", "fallocate", "fpunch", "fsize", "readahead", "sync-file", "copy-file",
    "sendfile", "splice", "tee", "io", "iomix", "aio",
    # memory maps of files
    "mmap", "mmapfork", "mremap", "msync",
    # the namespace
    "rename", "dir", "dirdeep", "dirmany", "link", "symlink", "dentry", "filename",
    "mknod", "open", "getdent", "chmod", "utime", "fstat", "xattr", "file-ioctl",
    # locks and leases
    "lockf", "flock", "fcntl", "locka", "lockofd", "lease",
]

# --hdd again with small unaligned writes under each of these option sets
HDD_OPTS = ["wr-rnd,rd-rnd", "wr-seq,rd-seq,fsync", "direct", "iovec,rd-rnd",
            "utimes,fdatasync", "noatime,wr-rnd,rd-seq,fadv-rnd"]

FAILED = re.compile(r"\b(fail|failed|error|unsuccessful)\b", re.I)
SKIPPED = re.compile(r"skipping stress", re.I)


def test(fn):
    TESTS.append(fn)
    return fn


def stress(where, name, args, seconds):
    """stress-ng ARGS with --verify in where: None if it passed, else what it said; and
    whether it skipped itself."""
    os.makedirs(where, exist_ok=True)
    cmd = ["stress-ng", "--timeout", "%ds" % seconds, "--verify", "--temp-path", where] + args
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds * 10 + 120)
    except subprocess.TimeoutExpired:
        return "%s: still running after %d s" % (name, seconds * 10 + 120), False
    out = p.stdout + p.stderr
    lines = [ln for ln in out.splitlines() if FAILED.search(ln) and "0 failed" not in ln]
    if p.returncode != 0 or lines:
        return "%s: exit %d: %s" % (name, p.returncode, " | ".join(lines[-5:] or
                                                                  out.splitlines()[-5:])), False
    return None, bool(SKIPPED.search(out))


def mounted(c, tool):
    """The cluster up, fs1 made and mounted: its mount point (Fail without tool, Skip
    without FUSE)."""
    if shutil.which(tool) is None:
        raise Fail("%s is missing (scripts/deps installs it)" % tool)
    if not fuse_usable():
        raise Skip("no usable /dev/fuse or fusermount3 on this machine")
    c.up()
    make_fs(c)
    mnt = os.path.join(c.dir, "m")
    os.makedirs(mnt)
    tc.mount_or_skip(c, "fs1", mnt)
    return mnt


@test
def stress_ng_verifies_on_the_mount(c):
    """Every stressor of STRESSORS with --verify and two workers, then --hdd with 3,000-byte
    writes under each of HDD_OPTS: stress-ng finds nothing wrong."""
    seconds = int(os.environ.get("STRESS_SECONDS", "6"))
    mnt = mounted(c, "stress-ng")
    bad, skipped = [], []
    try:
        runs = [(s, ["--" + s, "2"]) for s in STRESSORS]
        runs += [("hdd " + o, ["--hdd", "3", "--hdd-bytes", "8M", "--hdd-write-size", "3000",
                               "--hdd-opts", o]) for o in HDD_OPTS]
        for i, (name, args) in enumerate(runs):
            why, skip = stress(os.path.join(mnt, "s%d" % i), name, args, seconds)
            if why:
                bad.append(why)
            if skip:
                skipped.append(name)
            print("  %-40s %s" % (name, "FAILED" if why else "skipped itself" if skip else
                                  "ok"))
            sys.stdout.flush()
    finally:
        unmount(mnt)
    print("  %d runs, %d failed; skipped by stress-ng itself: %s" %
          (len(runs), len(bad), ", ".join(skipped) or "none"))
    check(not bad, "stress-ng found: %s" % "; ".join(bad))


@test
def dbench_clients_on_the_mount(c):
    """dbench (Debian's, from scripts/deps): 8 clients of its file-server load (creates,
    renames, truncates, reads and writes, locks) for DBENCH_SECONDS (default 60) on one
    mount: every call answers as it wants, and the mount is still there. It found the
    read-ahead's race that killed the mount (a NULL window in sh_pread, 2026-12-06)."""
    seconds = int(os.environ.get("DBENCH_SECONDS", "60"))
    mnt = mounted(c, "dbench")
    try:
        d = os.path.join(mnt, "db")
        os.makedirs(d)
        p = subprocess.run(["dbench", "-D", d, "-t", str(seconds), "8"], capture_output=True,
                           text=True, timeout=seconds * 4 + 120)
        out = p.stdout + p.stderr
        # dbench 4.00 says "failed to create barrier semaphore" when semget gives it the
        # id 0, which is a good id (the first in a fresh IPC namespace): not a failure, and
        # the semop right after it exits if the semaphore really is not there
        bad = [ln for ln in out.splitlines() if re.search(r"ERROR|failed|not connected", ln)
               and "failed to create barrier semaphore" not in ln]
        tput = re.search(r"Throughput ([0-9.]+ MB/sec)", out)
        print("  dbench, 8 clients, %d s: %s" % (seconds, tput.group(1) if tput else "-"))
        check(p.returncode == 0 and not bad, "dbench: exit %d: %s" % (
            p.returncode, " | ".join((bad or out.splitlines())[-5:])))
        check(os.path.isdir(d), "the mount is gone after dbench")
    finally:
        unmount(mnt)


def main():
    return tc.test_main(__doc__, TESTS, {}, 6, "SH_STRESS_PORT", 29600)


if __name__ == "__main__":
    sys.exit(main())
