#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Snapshots on real shoald processes (shoal local up), as tests/cluster/test_cluster.py:
- a snapshot is created in one configuration change and one version step per metadata
  group, and is ready once every group writes past it;
- it reads back as it was (a file overwritten and then removed, a small inline file
  rewritten and truncated, a directory renamed, a symlink) while the live tree shows the
  changes, and refuses every change; what it reads stays stored; deleting it gives that
  space back, in the background, and it is forgotten; its list shows the bytes only it
  holds;
- backends kill -9'd while snapshots are created and deleted: each one is there and reads
  right, or is not there; deleted ones are forgotten and give their space back;
- what changed between two snapshots (shoal fs snapshot diff, sh_fs_diff) names the
  entries added and removed and the files rewritten, and nothing else; it reads the
  snapshots, so changes to the live tree meanwhile do not change it;
- a restore (shoal fs restore FS@SNAP) brings the snapshot's tree back, small and
  deduplicated files included, while a handle opened before it answers ESTALE; the
  filesystem goes on from there, and once every snapshot and file is gone nothing is stored;
  with a backend kill -9'd while the groups drain and while they go back, it ends all the
  same, and every file of the snapshot is there, and none made after it;
- names are checked: a second snapshot of one name, one of a filesystem that is not there,
  the deletion of one that is not there, are refused and change nothing.

usage: tests/cluster/test_snapshot.py BIN_DIR [--only NAME[,NAME]] [--keep]
Prints the closing line "N passed, N failed, N skipped".
"""
import errno
import json
import os
import random
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_cluster as tc  # noqa: E402
from test_cluster import Fail, check, make_fs  # noqa: E402

TESTS = []


def test(fn):
    TESTS.append(fn)
    return fn


def stored(c, name, timeout=40, want=None):
    """The filesystem's stored bytes once every node summed its groups and the figure held
    still (want(x): until it also says yes)."""
    end = time.time() + timeout
    last = None
    while True:
        row = [f for f in c.json("fs", "list") if f["name"] == name][0]
        x = row["stored_bytes"]
        if row["usage_nodes"] == row["nodes"] and (want is None or want(x)):
            if x == last:
                return x
            last = x
            time.sleep(2.2)
            continue
        last = None
        check(time.time() < end, "usage of %s never settled as asked: %s" % (name, row))
        time.sleep(0.5)


def snaps(c, fs):
    return {s["name"]: s for s in c.json("fs", "snapshot", "list", fs)}


def put_random(c, fs, path, size, tag):
    local = os.path.join(c.dir, tag)
    data = os.urandom(size)
    with open(local, "wb") as f:
        f.write(data)
    c.shoal("ns", fs, "put", local, path, check_rc=0, timeout=120)
    return data


def get(c, fs, path):
    back = os.path.join(c.dir, "back")
    c.shoal("ns", fs, "get", path, back, check_rc=0, timeout=120)
    with open(back, "rb") as f:
        return f.read()


def ckpt_tree(c, fs, size):
    """A compressed, deduplicating filesystem fs with a checkpoint /ckpt of size bytes, a
    small file /d/small and two copies of one block (/dup1, /dup2): their bytes."""
    make_fs(c, fs, compression="lz4", dedup=True)
    old = put_random(c, fs, "/ckpt", size, "a")
    c.shoal("ns", fs, "mkdir", "/d", check_rc=0)
    small = put_random(c, fs, "/d/small", 300, "s")
    dup = put_random(c, fs, "/dup1", 1 << 20, "u")
    c.shoal("ns", fs, "put", os.path.join(c.dir, "u"), "/dup2", check_rc=0, timeout=120)
    return old, small, dup


def all_gone(c, fs, snapnames):
    """ckpt_tree's files and fs's snapshots snapnames deleted: the bytes still stored once
    the snapshots are forgotten (0 wanted: waited for a while)."""
    for sn in snapnames:
        c.shoal("fs", "snapshot", "delete", fs, sn, check_rc=0)
    for f in ("/ckpt", "/d/small", "/dup1", "/dup2"):
        c.shoal("ns", fs, "rm", f, check_rc=0)
    end = time.time() + 60
    while snaps(c, fs):
        check(time.time() < end, "snapshots never forgotten: %s" % snaps(c, fs))
        time.sleep(0.3)
    return stored(c, fs, want=lambda x: x == 0, timeout=60)


def through_the_mount(c, old, small):
    """The same snapshot under the mount's /.snapshots: hidden from the root's listing, read
    as it was, every change refused (EROFS); skipped where FUSE mounts are not allowed."""
    mnt = os.path.join(c.dir, "mnt")
    os.makedirs(mnt, exist_ok=True)
    try:
        tc.mount_or_skip(c, "sn", mnt)
    except tc.Skip as e:
        print("  (the mount's /.snapshots not tried: %s)" % e)
        return
    try:
        check(".snapshots" not in os.listdir(mnt), "the root lists .snapshots")
        check(sorted(os.listdir(os.path.join(mnt, ".snapshots"))) == ["s1"],
              "/.snapshots lists %s" % os.listdir(os.path.join(mnt, ".snapshots")))
        snap = os.path.join(mnt, ".snapshots", "s1")
        check(sorted(os.listdir(snap)) == ["d", "f", "link"], "s1 lists %s" % os.listdir(snap))
        with open(os.path.join(snap, "f"), "rb") as f:
            check(f.read() == old, "the mount reads s1/f wrong")
        with open(os.path.join(snap, "d", "small"), "rb") as f:
            check(f.read() == small, "the mount reads s1/d/small wrong")
        check(os.readlink(os.path.join(snap, "link")) == "/d/small", "s1/link leads elsewhere")
        check(os.stat(os.path.join(snap, "d")).st_ino != os.stat(mnt).st_ino,
              "a snapshot's inode numbers are the live ones")
        for what, fn in (("create", lambda: open(os.path.join(snap, "new"), "w")),
                         ("write", lambda: open(os.path.join(snap, "f"), "r+b")),
                         ("unlink", lambda: os.unlink(os.path.join(snap, "f"))),
                         ("mkdir", lambda: os.mkdir(os.path.join(snap, "x"))),
                         ("rename", lambda: os.rename(os.path.join(snap, "f"),
                                                      os.path.join(snap, "g"))),
                         ("chmod", lambda: os.chmod(os.path.join(snap, "f"), 0o600))):
            try:
                fn()
                raise tc.Fail("%s in a snapshot through the mount worked" % what)
            except OSError as e:
                check(e.errno == errno.EROFS, "%s in a snapshot: %s" % (what, e))
    finally:
        tc.unmount(mnt)


@test
def snapshot_keeps_what_it_reads_until_deleted(c):
    c.up()
    make_fs(c, "sn")
    size = 4 << 20
    old = put_random(c, "sn", "/f", size, "a")
    base = stored(c, "sn", want=lambda x: x >= size)
    # a small file (its bytes inline, with its inode) in a directory, and a symlink
    c.shoal("ns", "sn", "mkdir", "/d", check_rc=0)
    small = put_random(c, "sn", "/d/small", 300, "s")
    c.shoal("ns", "sn", "ln", "-s", "/d/small", "/link", check_rc=0)
    t0 = time.time()
    c.shoal("fs", "snapshot", "create", "sn", "s1", check_rc=0)
    took = time.time() - t0
    s = snaps(c, "sn")
    check(s["s1"]["state"] == "ready", "snapshot s1 not ready once created: %s" % s)
    check(s["s1"]["version"] == 1, "snapshot s1 reads version %s, want 1" % s["s1"]["version"])
    print("  snapshot created in %.0f ms (through the CLI)" % (took * 1000))
    # refused: the name again, a filesystem that is not there, a snapshot that is not there
    p = c.shoal("fs", "snapshot", "create", "sn", "s1")
    check(p.returncode != 0 and "already" in (p.stderr + p.stdout),
          "a second s1: exit %d %s" % (p.returncode, p.stderr))
    p = c.shoal("fs", "snapshot", "create", "nofs", "s1")
    check(p.returncode != 0, "a snapshot of a filesystem that is not there was taken")
    p = c.shoal("fs", "snapshot", "delete", "sn", "nope")
    check(p.returncode != 0, "deleting a snapshot that is not there: exit 0")
    check(list(snaps(c, "sn")) == ["s1"], "refused requests changed the list")
    # the live file overwritten, then removed: the snapshot reads what was, and its
    # stripes stay stored
    new = put_random(c, "sn", "/f", size, "b")
    check(get(c, "sn", "/f") == new, "the live file reads wrong after the overwrite")
    check(get(c, "sn@s1", "/f") == old, "the snapshot reads the overwrite")
    both = stored(c, "sn", want=lambda x: x >= 1.8 * base)
    put_random(c, "sn", "/d/small", 200, "s2")
    c.shoal("ns", "sn", "truncate", "/d/small", "10", check_rc=0)
    c.shoal("ns", "sn", "mv", "/d", "/e", check_rc=0)
    c.shoal("ns", "sn", "rm", "/f", check_rc=0)
    kept = stored(c, "sn", want=lambda x: x < 1.2 * base)
    check(kept >= 0.9 * base, "the snapshot's data was freed with the live file: %d of %d"
          % (kept, base))
    # what s1 alone holds: the removed file's bytes and the small file's first 300 bytes
    end = time.time() + 40
    while True:
        row = snaps(c, "sn")["s1"]
        fsrow = [f for f in c.json("fs", "list") if f["name"] == "sn"][0]
        if row.get("bytes_only") == size + 300 and fsrow["snapshot_bytes"] == size + 300:
            break
        check(time.time() < end, "s1 holds %s bytes alone and the filesystem's snapshots %s, "
              "want %d" % (row.get("bytes_only"), fsrow["snapshot_bytes"], size + 300))
        time.sleep(1)
    held = sum(tc.total(tc.parse_metrics(tc.metrics_page(c, n)), "shoal_fs_snapshot_bytes",
                        fs="sn") for n in range(1, c.nodes + 1))
    check(held == size + 300, "shoal_fs_snapshot_bytes sums to %d, want %d" % (held, size + 300))
    print("  s1 alone holds %d bytes (%s)" % (row["bytes_only"], c.shoal(
        "fs", "snapshot", "list", "sn", check_rc=0).stdout.splitlines()[-1]))
    check(get(c, "sn@s1", "/f") == old, "the snapshot lost the removed file")
    check(get(c, "sn@s1", "/d/small") == small, "the snapshot's small file changed")
    check(get(c, "sn@s1", "/link") == small, "the snapshot's symlink does not lead there")
    ls = [n.rstrip("/") for n in c.shoal("ns", "sn@s1", "ls", "/", check_rc=0).stdout.split()]
    check("f" in ls and "d" in ls and "link" in ls and "e" not in ls,
          "the snapshot's root lists %s" % ls)
    ls = [n.rstrip("/") for n in c.shoal("ns", "sn", "ls", "/", check_rc=0).stdout.split()]
    check("f" not in ls and "d" not in ls and "e" in ls, "the live root lists %s" % ls)
    through_the_mount(c, old, small)
    # a snapshot is read-only
    for args in (["mkdir", "/x"], ["rm", "/f"], ["put", os.path.join(c.dir, "a"), "/g"],
                 ["truncate", "/f", "0"]):
        p = c.shoal("ns", "sn@s1", *args)
        check(p.returncode != 0 and "read-only" in p.stderr.lower(),
              "%s in a snapshot: exit %d %s" % (args, p.returncode, p.stderr))
    # deleted: it is forgotten once every group settled, and its space comes back
    c.shoal("fs", "snapshot", "delete", "sn", "s1", check_rc=0)
    end = time.time() + 30
    while "s1" in snaps(c, "sn"):
        check(time.time() < end, "snapshot s1 never forgotten: %s" % snaps(c, "sn"))
        time.sleep(0.3)
    p = c.shoal("ns", "sn@s1", "stat", "/")
    check(p.returncode != 0, "a deleted snapshot still opens")
    left = stored(c, "sn", want=lambda x: x < 0.1 * base)
    print("  stored: %.1f MiB, %.1f with the overwrite, %.1f after the remove, %.1f once "
          "the snapshot went" % (base / 2**20, both / 2**20, kept / 2**20, left / 2**20))


def open_across_restore(c, fs):
    """A file opened through the mount before the restore (the mount's handle), read after:
    None where FUSE mounts are not allowed."""
    mnt = os.path.join(c.dir, "rmnt")
    os.makedirs(mnt, exist_ok=True)
    try:
        tc.mount_or_skip(c, fs, mnt)
    except tc.Skip as e:
        print("  (a handle across the restore not tried: %s)" % e)
        return None, None
    return mnt, os.open(os.path.join(mnt, "ckpt"), os.O_RDONLY | os.O_DIRECT)


def stale_write(mnt):
    """A handle opened to write before the restore writes after it: ESTALE, at the write or
    at the close (the kernel may buffer the write), and nothing lands."""
    fd = os.open(os.path.join(mnt, "dup1"), os.O_WRONLY)
    return fd


@test
def restore_brings_the_snapshot_back(c):
    c.up()
    size = 4 << 20
    old, small, dup = ckpt_tree(c, "rs", size)
    before = stored(c, "rs", want=lambda x: x >= size)
    c.shoal("fs", "snapshot", "create", "rs", "s1", check_rc=0)
    # after it: the checkpoint rewritten, the small file cut, a copy removed, the
    # directory renamed, a new file
    new = put_random(c, "rs", "/ckpt", size, "b")
    c.shoal("ns", "rs", "truncate", "/d/small", "10", check_rc=0)
    c.shoal("ns", "rs", "rm", "/dup2", check_rc=0)
    c.shoal("ns", "rs", "mv", "/d", "/e", check_rc=0)
    put_random(c, "rs", "/later", 1 << 20, "l")
    check(get(c, "rs", "/ckpt") == new, "the live checkpoint reads wrong before the restore")
    # refused: a snapshot that is not there, a malformed name
    p = c.shoal("fs", "restore", "rs@nope")
    check(p.returncode != 0 and "no snapshot" in p.stderr, "restore of no snapshot: exit %d %s"
          % (p.returncode, p.stderr))
    p = c.shoal("fs", "restore", "rs")
    check(p.returncode != 0, "restore without @SNAPSHOT: exit 0")
    mnt, fd = open_across_restore(c, "rs")
    try:
        wfd = None
        if fd is not None:
            check(os.pread(fd, 4096, 0) == new[:4096], "the mount reads the new checkpoint wrong")
            wfd = stale_write(mnt)
        t0 = time.time()
        out = c.shoal("fs", "restore", "rs@s1", check_rc=0, timeout=120).stdout
        took = time.time() - t0
        check("back at snapshot s1" in out, "restore said %r" % out)
        print("  restored in %.0f ms (through the CLI: pause, drain, revert)" % (took * 1000))
        if fd is not None:
            try:
                os.pread(fd, 4096, 0)
                raise tc.Fail("a handle opened before the restore still reads")
            except OSError as e:
                check(e.errno == errno.ESTALE, "a handle from before the restore: %s" % e)
            with open(os.path.join(mnt, "ckpt"), "rb") as f:
                check(f.read() == old, "the mount reads the restored checkpoint wrong")
            errs = []
            for what, fn in (("write", lambda: os.pwrite(wfd, b"stale", 0)),
                             ("close", lambda: os.close(wfd))):
                try:
                    fn()
                except OSError as e:
                    errs.append((what, e.errno))
            check(errs and all(e == errno.ESTALE for _, e in errs),
                  "a handle from before the restore wrote: %s" % errs)
    finally:
        if fd is not None:
            try:
                os.close(fd)  # (nothing written: a stale handle closes fine)
            finally:
                tc.unmount(mnt)
    check(get(c, "rs", "/ckpt") == old, "the restored checkpoint reads wrong")
    check(get(c, "rs", "/d/small") == small, "the restored small file reads wrong")
    check(get(c, "rs", "/dup1") == dup and get(c, "rs", "/dup2") == dup,
          "the restored deduplicated copies read wrong (or a stale handle's write landed)")
    ls = sorted(n.rstrip("/") for n in c.shoal("ns", "rs", "ls", "/", check_rc=0).stdout.split())
    check(ls == ["ckpt", "d", "dup1", "dup2"], "the restored root lists %s" % ls)
    check(get(c, "rs@s1", "/ckpt") == old, "the snapshot reads wrong after the restore")
    # the file system goes on from there: written, snapshotted again
    again = put_random(c, "rs", "/ckpt", size, "c")
    check(get(c, "rs", "/ckpt") == again, "a write after the restore reads wrong")
    c.shoal("fs", "snapshot", "create", "rs", "s2", check_rc=0)
    check(get(c, "rs@s2", "/ckpt") == again, "a snapshot after the restore reads wrong")
    # every snapshot and file gone: the space comes back to where it started
    left = all_gone(c, "rs", ("s1", "s2"))
    print("  stored: %.1f MiB before the snapshot, %d bytes once all went"
          % (before / 2**20, left))


def diff(c, fs, a, b):
    """shoal fs snapshot diff FS A B --json: the records, and the closing counts."""
    out = c.shoal("fs", "snapshot", "diff", fs, a, b, "--json", check_rc=0,
                  timeout=60).stdout
    lines = [json.loads(x) for x in out.splitlines()]
    return lines[:-1], lines[-1]


@test
def snapshot_diff_names_what_changed(c):
    """From nothing to s1: every entry added, nothing removed. From s1 to s2 (a file
    rewritten, one removed, a directory and a file in it made, a mode changed): those
    entries and inodes, the rewritten file's map, and no entry that stayed. The same again
    while the live tree changes."""
    c.up()
    make_fs(c, "df")
    put_random(c, "df", "/big", 1 << 20, "a")
    put_random(c, "df", "/gone", 1000, "b")
    put_random(c, "df", "/stays", 100, "c")
    c.shoal("ns", "df", "mkdir", "/dir", check_rc=0)
    c.shoal("fs", "snapshot", "create", "df", "s1", check_rc=0)
    put_random(c, "df", "/big", 1 << 20, "a2")
    c.shoal("ns", "df", "rm", "/gone", check_rc=0)
    c.shoal("ns", "df", "mkdir", "/new", check_rc=0)
    put_random(c, "df", "/new/f", 5000, "d")
    c.shoal("ns", "df", "chmod", "600", "/stays", check_rc=0)
    c.shoal("fs", "snapshot", "create", "df", "s2", check_rc=0)
    ino = {n: c.json("ns", "df", "stat", "/" + n)["ino"] for n in ("big", "stays", "new")}

    recs, n = diff(c, "df", "-", "s1")
    names = {(r["op"], r["name"]) for r in recs if r["kind"] == "entry"}
    check(names == {("+", "big"), ("+", "gone"), ("+", "stays"), ("+", "dir")},
          "from nothing to s1, the entries: %s" % sorted(names))
    check(n["removed"] == 0 and n["changed"] == 0 and n["added"] == len(recs),
          "from nothing to s1: %s" % n)

    recs, n = diff(c, "df", "s1", "s2")
    names = {(r["op"], r["name"]) for r in recs if r["kind"] == "entry"}
    check(names == {("-", "gone"), ("+", "new"), ("+", "f")},
          "from s1 to s2, the entries: %s" % sorted(names))
    inodes = {r["ino"]: r["op"] for r in recs if r["kind"] == "inode"}
    check(inodes.get(ino["stays"]) == "~" and inodes.get(ino["big"]) == "~" and
          inodes.get(ino["new"]) == "+", "from s1 to s2, the inodes: %s (%s)" % (inodes, ino))
    check(any(r["kind"] == "extent" and r["ino"] == ino["big"] for r in recs),
          "the rewritten file's extents are not in the diff")
    check(not any(r["kind"] == "extent" and r["ino"] == ino["stays"] for r in recs),
          "an unchanged file's bytes are in the diff")
    print("  s1 -> s2: %d records (%s)" % (len(recs), n))
    text = c.shoal("fs", "snapshot", "diff", "df", "s1", "s2", check_rc=0).stdout
    check(any(x.startswith("- entry") and '"gone"' in x for x in text.splitlines()) and
          text.splitlines()[-1] == "8 records added, 1 removed, 6 changed from s1 to s2"
          if n == {"added": 8, "removed": 1, "changed": 6} else "records added" in text,
          "the diff as text:\n%s" % text)
    print("  " + "\n  ".join(text.splitlines()[:4]))

    # the live tree changes: the diff of two snapshots does not
    c.shoal("ns", "df", "rm", "/stays", check_rc=0)
    put_random(c, "df", "/later", 100, "e")
    again, n2 = diff(c, "df", "s1", "s2")
    check(again == recs and n2 == n, "the diff changed with the live tree")
    for a, b, why in (("s2", "s1", "Invalid argument"), ("s1", "nope", "No such"),
                      ("s1", "s1", "Invalid argument")):
        p = c.shoal("fs", "snapshot", "diff", "df", a, b)
        check(p.returncode != 0 and why in p.stderr,
              "diff %s %s: exit %d %s" % (a, b, p.returncode, p.stderr.strip()))


def wait_snaps(c, fs, pred, what, timeout=60):
    end = time.time() + timeout
    while True:
        s = snaps(c, fs)
        if pred(s):
            return s
        check(time.time() < end, "%s: never (%s)" % (what, s))
        time.sleep(0.3)


@test
@tc.long_tier
def snapshots_survive_kill9(c):
    """Backends kill -9'd while snapshots are created, read and deleted: each one is ready
    and reads what was there when it was taken, or is not there (taken again); deleted,
    each is forgotten and its space comes back, and the live file never changes."""
    c.up()
    make_fs(c, "sk")
    size = 2 << 20
    taken = {}
    rnd = random.Random(25)
    for k in range(3):
        data = put_random(c, "sk", "/a", size, "v%d" % k)
        if k == 0:
            one = stored(c, "sk", want=lambda x: x >= size)
        name = "s%d" % k
        p = subprocess.Popen([os.path.join(tc.BIN, "shoal"), "--addr", c.addr(1), "fs",
                              "snapshot", "create", "sk", name], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        time.sleep(rnd.random() * 0.3)
        victim = rnd.randrange(2, c.nodes + 1)
        c.kill(victim)
        out, err = p.communicate(timeout=90)
        print("  %s: node %d killed; the create said %d %s" % (name, victim, p.returncode,
                                                                (out + err).strip()[:120]))
        c.local("up")
        if name not in snaps(c, "sk"):
            c.shoal("fs", "snapshot", "create", "sk", name, check_rc=0, timeout=90)
        wait_snaps(c, "sk", lambda s: s.get(name, {}).get("state") == "ready",
                   "%s ready" % name)
        taken[name] = data
    last = put_random(c, "sk", "/a", size, "last")
    for name, data in taken.items():
        check(get(c, "sk@" + name, "/a") == data, "%s reads what was not there" % name)
    for k, name in enumerate(taken):
        c.shoal("fs", "snapshot", "delete", "sk", name, check_rc=0, timeout=90)
        c.kill(2 + k)
        time.sleep(0.2 + rnd.random() * 0.5)
        c.local("up")
    wait_snaps(c, "sk", lambda s: not s, "every snapshot forgotten")
    check(get(c, "sk", "/a") == last, "the live file changed")
    left = stored(c, "sk", want=lambda x: x < 1.2 * one)
    print("  stored: %.1f MiB with one file's worth %.1f" % (left / 2**20, one / 2**20))


def fs_row(c, fs):
    return [f for f in c.json("fs", "list") if f["name"] == fs][0]


def stormed_snapshot(c, fs):
    """Filesystem fs with a 2 MiB /big and 800 files a create storm made under /base,
    snapshotted as s1: /big's bytes and the storm's log (for ns check)."""
    make_fs(c, fs)
    big = put_random(c, fs, "/big", 2 << 20, "a")
    c.shoal("ns", fs, "mkdir", "/base", check_rc=0)
    log = os.path.join(c.dir, "base.log")
    c.shoal("ns", fs, "storm", "/base", "4", "200", log, "b-", check_rc=0, timeout=300)
    c.shoal("fs", "snapshot", "create", fs, "s1", check_rc=0, timeout=90)
    return big, log


@test
@tc.long_tier
def restore_survives_kill9(c):
    """A restore with thousands of keys to put back (a create storm after the snapshot),
    a backend kill -9'd while the groups drain and while they go back: it ends, every file
    of the snapshot is there and reads as it did, nothing created after it is, and the
    filesystem serves again."""
    c.up()
    big, log = stormed_snapshot(c, "rk")
    c.shoal("ns", "rk", "mkdir", "/after", check_rc=0)
    c.shoal("ns", "rk", "storm", "/after", "4", "500", os.path.join(c.dir, "after.log"), "a-",
            check_rc=0, timeout=300)
    put_random(c, "rk", "/big", 2 << 20, "b")
    rnd = random.Random(26)
    for k, when in enumerate((0.3, 1.3)):  # pausing, then going back
        if k == 1:
            c.shoal("ns", "rk", "mkdir", "/after2", check_rc=0)
            c.shoal("ns", "rk", "storm", "/after2", "4", "300",
                    os.path.join(c.dir, "after2.log"), "c-", check_rc=0, timeout=300)
        p = subprocess.Popen([os.path.join(tc.BIN, "shoal"), "--addr", c.addr(1), "fs",
                              "restore", "rk@s1"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        time.sleep(when + rnd.random() * 0.2)
        victim = rnd.randrange(2, c.nodes + 1)
        c.kill(victim)
        out, err = p.communicate(timeout=120)
        print("  restore %d: node %d killed after %.1f s; it said %d %s"
              % (k + 1, victim, when, p.returncode, (out + err).strip()[:100]))
        c.local("up")
        end = time.time() + 120
        while True:
            row = fs_row(c, "rk")
            if row["restores"] == k + 1 and row["restoring"] is None:
                break
            check(time.time() < end, "restore %d never ended: %s" % (k + 1, row))
            time.sleep(0.5)
        check(get(c, "rk", "/big") == big, "the restored /big reads wrong")
        c.shoal("ns", "rk", "check", log, check_rc=0, timeout=300)
        ls = sorted(n.rstrip("/") for n in
                    c.shoal("ns", "rk", "ls", "/", check_rc=0).stdout.split())
        check(ls == ["base", "big"], "the restored root lists %s" % ls)
        n = len(c.shoal("ns", "rk", "ls", "/base", check_rc=0).stdout.split())
        check(n == 800, "the restored /base lists %d entries, want 800" % n)


@test
@tc.long_tier
def clone_survives_kill9(c):
    """A clone of a snapshot with thousands of keys, a backend kill -9'd as the groups
    take its branch, then, with a create storm written in the clone, while they drop it:
    it serves and then it is gone, the origin and the snapshot read as they did, and the
    clone's blocks come back."""
    c.up()
    big, log = stormed_snapshot(c, "ck")
    before = stored(c, "ck", want=lambda x: x >= 2 << 20)
    rnd = random.Random(27)
    victim = rnd.randrange(2, c.nodes + 1)
    c.kill(victim)  # (its groups' leaders: elected again while they take the branch)
    p = subprocess.Popen([os.path.join(tc.BIN, "shoal"), "--addr", c.addr(1), "fs", "clone",
                          "ck@s1", "ckc"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    out, err = p.communicate(timeout=120)
    print("  clone: node %d killed; it said %d %s" % (victim, p.returncode,
                                                       (out + err).strip()[:100]))
    c.local("up")
    end = time.time() + 120
    while fs_names(c).get("ckc", {}).get("clone", {}).get("state") != "ready":
        check(time.time() < end, "the clone never serves: %s" % fs_names(c).get("ckc"))
        time.sleep(0.5)
    c.shoal("ns", "ckc", "check", log, check_rc=0, timeout=300)  # its snapshot's files
    c.shoal("ns", "ckc", "mkdir", "/mine", check_rc=0)
    c.shoal("ns", "ckc", "storm", "/mine", "4", "300", os.path.join(c.dir, "mine.log"), "m-",
            check_rc=0, timeout=300)
    put_random(c, "ckc", "/big", 2 << 20, "b")
    c.shoal("fs", "delete", "ckc", check_rc=0)
    time.sleep(0.1 + rnd.random() * 0.3)
    victim = rnd.randrange(2, c.nodes + 1)
    c.kill(victim)
    print("  clone's drop: node %d killed" % victim)
    c.local("up")
    end = time.time() + 120
    while "ckc" in (names := fs_names(c)):  # (asked once: it may go between two asks)
        check(time.time() < end, "the clone is never gone: %s" % names["ckc"])
        time.sleep(0.5)
    check(get(c, "ck", "/big") == big and get(c, "ck@s1", "/big") == big,
          "the origin or its snapshot reads wrong after the clone went")
    c.shoal("ns", "ck", "check", log, check_rc=0, timeout=300)
    ls = sorted(n.rstrip("/") for n in c.shoal("ns", "ck", "ls", "/", check_rc=0).stdout.split())
    check(ls == ["base", "big"], "the origin's root lists %s" % ls)
    left = stored(c, "ck", want=lambda x: x <= before, timeout=90)
    check(left <= before, "the clone's blocks stay: %d bytes stored, %d before it" %
          (left, before))


@test
def snapshot_schedule_takes_and_trims(c):
    """A schedule every 2 s keeping 2: the configuration's leader takes auto-* snapshots
    and deletes the oldest beyond the last 2, never the user's own; turned off, it takes
    no more."""
    import re
    c.up()
    make_fs(c, "sch")
    c.shoal("fs", "snapshot", "schedule", "sch", "--every", "2s", "--keep", "2", check_rc=0)
    got = c.json("fs", "snapshot", "schedule", "sch")
    check(got == {"every_s": 2, "keep": 2}, "the schedule reads %s" % got)

    def taken():
        """The auto-* snapshots of sch the events say were created."""
        ev = c.json("events", "--limit", "256")
        return {m.group(1) for e in ev
                for m in [re.match(r"snapshot (auto-\S+) of fs sch created", e["text"])] if m}

    seen, mine, end = set(), False, time.time() + 20
    while True:
        s = snaps(c, "sch")
        auto = {n: x for n, x in s.items() if n.startswith("auto-")}
        seen |= set(auto)
        ready = sorted(n for n, x in auto.items() if x["state"] == "ready")
        live = [n for n, x in auto.items() if x["state"] != "deleting"]
        # at most one more than kept: the one just taken, before the oldest is deleted
        check(len(ready) <= 3, "%d scheduled snapshots ready, keeping 2: %s" % (len(ready), s))
        check(not mine or s.get("mine", {}).get("state") == "ready",
              "the user's own snapshot went: %s" % s)
        if not mine and auto:
            c.shoal("fs", "snapshot", "create", "sch", "mine", check_rc=0)
            mine = True
            continue
        if mine and len(live) == 2 and ready == sorted(live) and len(seen | taken()) >= 3:
            break
        check(time.time() < end, "never 2 scheduled snapshots ready of 3 or more taken: "
              "%s (taken: %s)" % (s, sorted(seen | taken())))
        time.sleep(0.3)
    print("  %d scheduled snapshots taken, kept: %s" % (len(seen | taken()), ready))
    # off: a pass that read the schedule before may still take one; then none
    c.shoal("fs", "snapshot", "schedule", "sch", "--every", "0", check_rc=0)
    got = c.json("fs", "snapshot", "schedule", "sch")
    check(got == {"every_s": 0, "keep": 0}, "the schedule reads %s once off" % got)
    time.sleep(1)
    before = {n for n in snaps(c, "sch") if n.startswith("auto-")} | taken()
    end = time.time() + 5
    while time.time() < end:
        s = snaps(c, "sch")
        new = {n for n in s if n.startswith("auto-")} - before
        check(not new, "scheduled snapshots taken with the schedule off: %s" % sorted(new))
        time.sleep(0.5)
    new = taken() - before
    check(not new, "scheduled snapshots taken with the schedule off: %s" % sorted(new))
    check(snaps(c, "sch").get("mine", {}).get("state") == "ready",
          "the user's own snapshot went: %s" % snaps(c, "sch"))


def fs_names(c):
    return {f["name"]: f for f in c.json("fs", "list")}


@test
def clone_differs_only_where_written(c):
    """A writable clone of a snapshot (shoal fs clone FS@SNAP NEW): it reads as the snapshot,
    takes writes of its own that neither its origin nor the snapshot see, and the origin's
    later writes are not the clone's; what it stands on cannot go while it is; deleted, its
    blocks go, and with the snapshot and the files gone the space is back where it
    started."""
    c.up()
    size = 4 << 20
    old, small, dup = ckpt_tree(c, "co", size)
    for k in range(4):  # empty directories, to be renamed (across buckets) and removed
        c.shoal("ns", "co", "mkdir", "/e%d" % k, check_rc=0)
    stored(c, "co", want=lambda x: x >= size)
    c.shoal("fs", "snapshot", "create", "co", "s1", check_rc=0)
    p = c.shoal("fs", "clone", "co@nope", "cc")
    check(p.returncode != 0 and "no snapshot" in p.stderr, "clone of no snapshot: exit %d %s"
          % (p.returncode, p.stderr))
    t0 = time.time()
    out = c.shoal("fs", "clone", "co@s1", "cc", check_rc=0, timeout=120).stdout
    print("  cloned in %.0f ms (through the CLI: every group told)" % ((time.time() - t0) * 1000))
    check("writable clone of co@s1" in out, "clone said %r" % out)
    row = fs_names(c)["cc"]
    check(row.get("clone", {}).get("origin") == "co" and row["clone"]["state"] == "ready",
          "fs list shows the clone as %s" % row)
    # it reads as the snapshot
    check(get(c, "cc", "/ckpt") == old, "the clone reads the checkpoint wrong")
    check(get(c, "cc", "/d/small") == small, "the clone reads the small file wrong")
    check(get(c, "cc", "/dup2") == dup, "the clone reads the deduplicated copy wrong")
    # its own writes: a checkpoint rewritten, a small file cut, a copy removed, a directory
    # renamed, a new one made with a file
    new = put_random(c, "cc", "/ckpt", size, "b")
    c.shoal("ns", "cc", "truncate", "/d/small", "10", check_rc=0)
    c.shoal("ns", "cc", "rm", "/dup2", check_rc=0)
    c.shoal("ns", "cc", "mv", "/d", "/e", check_rc=0)
    c.shoal("ns", "cc", "mkdir", "/x", check_rc=0)
    mine = put_random(c, "cc", "/x/mine", 200 << 10, "m")
    # a directory of the snapshot, filled and renamed in the clone: its rmdir is the
    # clone's (not empty there, though it is in the origin), then it goes
    for k in range(4):
        c.shoal("ns", "cc", "touch", "/e%d/f" % k, check_rc=0)
        c.shoal("ns", "cc", "mv", "/e%d" % k, "/m%d" % k, check_rc=0)
        p = c.shoal("ns", "cc", "rmdir", "/m%d" % k)
        check(p.returncode != 0 and "not empty" in p.stderr.lower(),
              "rmdir of the clone's full /m%d: exit %d %s" % (k, p.returncode, p.stderr))
        c.shoal("ns", "cc", "rm", "/m%d/f" % k, check_rc=0)
        c.shoal("ns", "cc", "rmdir", "/m%d" % k, check_rc=0)
    # through the mount, as any file system
    mnt = os.path.join(c.dir, "cmnt")
    os.makedirs(mnt, exist_ok=True)
    try:
        tc.mount_or_skip(c, "cc", mnt)
        try:
            with open(os.path.join(mnt, "x", "via"), "wb") as f:
                f.write(b"through the mount")
                os.fsync(f.fileno())
            with open(os.path.join(mnt, "ckpt"), "rb") as f:
                check(f.read() == new, "the mount reads the clone's checkpoint wrong")
            check(sorted(os.listdir(mnt)) == ["ckpt", "dup1", "e", "x"],
                  "the clone's mount lists %s" % os.listdir(mnt))
        finally:
            tc.unmount(mnt)
        check(get(c, "cc", "/x/via") == b"through the mount", "the mount's write reads wrong")
        p = c.shoal("ns", "co", "stat", "/x/via")
        check(p.returncode != 0, "the origin sees a file written in the clone's mount")
    except tc.Skip as e:
        print("  (the clone's mount not tried: %s)" % e)
    # the origin writes on after the snapshot too
    later = put_random(c, "co", "/ckpt", size, "c")
    ls = lambda fs: sorted(n.rstrip("/") for n in c.shoal("ns", fs, "ls", "/", check_rc=0)
                           .stdout.split())
    check(ls("cc") == ["ckpt", "dup1", "e", "x"], "the clone's root lists %s" % ls("cc"))
    check(ls("co") == ["ckpt", "d", "dup1", "dup2", "e0", "e1", "e2", "e3"],
          "the origin's root lists %s" % ls("co"))
    check(get(c, "cc", "/ckpt") == new, "the clone's own checkpoint reads wrong")
    check(get(c, "cc", "/e/small") == small[:10], "the clone's cut file reads wrong")
    check(get(c, "cc", "/x/mine") == mine, "the clone's new file reads wrong")
    check(get(c, "cc", "/dup1") == dup, "the clone's other copy reads wrong")
    check(get(c, "co", "/ckpt") == later, "the origin's checkpoint reads wrong")
    check(get(c, "co", "/d/small") == small and get(c, "co", "/dup2") == dup,
          "the origin sees the clone's writes")
    check(get(c, "co@s1", "/ckpt") == old and get(c, "co@s1", "/d/small") == small,
          "the snapshot sees writes made after it")
    # its space: what it alone reads is its rewritten checkpoint, its new file and its
    # small files' bytes (the cut file's 10, the mount's 17); its logical bytes, the extents
    # it maps (the checkpoint, the copy it shares with the snapshot, its new file)
    own_lo, maps = size + (200 << 10), size + (1 << 20) + (200 << 10)
    end = time.time() + 40
    while True:
        row = fs_names(c)["cc"]
        own = row["clone"].get("own_bytes")
        if (row["usage_nodes"] == row["nodes"] and own_lo <= own <= own_lo + 27
                and maps <= row["logical_bytes"] <= maps + 17):
            break
        check(time.time() < end, "the clone holds %s bytes alone and maps %s; want %d (+27) "
              "and %d (+17)" % (own, row["logical_bytes"], own_lo, maps))
        time.sleep(1)
    mown = sum(tc.total(tc.parse_metrics(tc.metrics_page(c, n)), "shoal_fs_clone_own_bytes",
                        fs="cc") for n in range(1, c.nodes + 1))
    check(mown == own, "shoal_fs_clone_own_bytes sums to %d, fs list says %d" % (mown, own))
    print("  the clone alone holds %d bytes and maps %d (%s)" % (own, row["logical_bytes"], [
        ln for ln in c.shoal("fs", "list", check_rc=0).stdout.splitlines() if "clone" in ln]))
    # what it stands on stays; what it cannot do yet says so
    for args, want in ((("fs", "snapshot", "delete", "co", "s1"), "has clones (cc)"),
                       (("fs", "delete", "co"), "has clones (cc)"),
                       (("fs", "snapshot", "create", "cc", "x"), "is a clone"),
                       (("fs", "clone", "cc@s1", "cc2"), "")):
        p = c.shoal(*args)
        check(p.returncode != 0 and want in p.stderr, "%s: exit %d %s"
              % (" ".join(args), p.returncode, p.stderr))
    # the clone deleted: its own blocks go, the origin's and the snapshot's stay
    c.shoal("fs", "delete", "cc", check_rc=0)
    end = time.time() + 60
    while "cc" in (names := fs_names(c)):  # (asked once: it may go between two asks)
        check(time.time() < end, "the clone is never gone: %s" % names["cc"])
        time.sleep(0.3)
    check(get(c, "co@s1", "/ckpt") == old and get(c, "co", "/ckpt") == later,
          "the clone's drop took what others read")
    # every snapshot and file gone: the space is back to where it started
    left = all_gone(c, "co", ("s1",))
    check(left == 0, "%d bytes still stored with every clone, snapshot and file gone" % left)


def origin_sees_it_read_only(c, mnt):
    """ws's mount shows its writable snapshot w (mounted at mnt) under /.snapshots/w
    read-only, as every snapshot there, and reads what it holds now (/via, changed through
    mnt to "THROUGH the mount")."""
    omnt = os.path.join(c.dir, "omnt")
    os.makedirs(omnt, exist_ok=True)
    tc.mount_or_skip(c, "ws", omnt)
    try:
        sp = os.path.join(omnt, ".snapshots", "w", "via")
        with open(sp, "rb") as f:
            check(f.read() == b"through the mount", "/.snapshots/w/via reads wrong")
        for flags in (os.O_WRONLY, os.O_RDWR, os.O_WRONLY | os.O_TRUNC):
            try:
                os.close(os.open(sp, flags))
                raise Fail("/.snapshots/w/via opened to write (flags %#o)" % flags)
            except OSError as e:
                check(e.errno == errno.EROFS, "/.snapshots/w/via opened to write: %s" % e)
        with open(os.path.join(mnt, "via"), "r+b") as f:
            f.write(b"THROUGH")
            os.fsync(f.fileno())
        with open(sp, "rb") as f:
            got = f.read()
        check(got == b"THROUGH the mount",
              "/.snapshots/w/via after ws@w changed it reads %r (pages kept)" % got)
    finally:
        tc.unmount(omnt)


@test
def writable_snapshot_takes_writes(c):
    """shoal fs snapshot create FS NAME --writable: FS@NAME opens it read-write (its writes
    neither FS nor its read-only snapshots see, and FS's later writes are not its); it
    cannot be cloned or restored to; deleted, its writes go first, then it."""
    c.up()
    make_fs(c, "ws")
    old = put_random(c, "ws", "/f", 1 << 20, "a")
    small = put_random(c, "ws", "/small", 100, "s")
    out = c.shoal("fs", "snapshot", "create", "ws", "w", "--writable", check_rc=0,
                  timeout=120).stdout
    check("ws@w opens it read-write" in out, "create --writable said %r" % out)
    check(snaps(c, "ws")["w"].get("writable") is True, "the list: %s" % snaps(c, "ws"))
    check("(writable)" in c.shoal("fs", "snapshot", "list", "ws", check_rc=0).stdout,
          "the list does not say writable")
    check(get(c, "ws@w", "/f") == old and get(c, "ws@w", "/small") == small,
          "the writable snapshot does not read as the filesystem did")
    new = put_random(c, "ws@w", "/f", 1 << 20, "b")
    mine = put_random(c, "ws@w", "/mine", 5000, "m")
    c.shoal("ns", "ws@w", "rm", "/small", check_rc=0)
    later = put_random(c, "ws", "/f", 1 << 20, "c")
    check(get(c, "ws@w", "/f") == new and get(c, "ws@w", "/mine") == mine,
          "the writable snapshot's own writes read wrong")
    check(c.shoal("ns", "ws@w", "stat", "/small").returncode != 0,
          "the writable snapshot's removal did not hold")
    check(get(c, "ws", "/f") == later and get(c, "ws", "/small") == small,
          "the filesystem sees the writable snapshot's writes")
    check(c.shoal("ns", "ws", "stat", "/mine").returncode != 0,
          "the filesystem sees a file made in the writable snapshot")
    # mounted read-write, as any file system
    mnt = os.path.join(c.dir, "wmnt")
    os.makedirs(mnt, exist_ok=True)
    try:
        tc.mount_or_skip(c, "ws@w", mnt)
        try:
            with open(os.path.join(mnt, "via"), "wb") as f:
                f.write(b"through the mount")
                os.fsync(f.fileno())
            check(sorted(os.listdir(mnt)) == ["f", "mine", "via"],
                  "the writable snapshot's mount lists %s" % os.listdir(mnt))
            origin_sees_it_read_only(c, mnt)
        finally:
            tc.unmount(mnt)
        check(get(c, "ws@w", "/via") == b"THROUGH the mount", "the mount's write reads wrong")
    except tc.Skip as e:
        print("  (the writable snapshot's mount not tried: %s)" % e)
    # its space: the snapshot and its writes go together, so what either alone reads is
    # what deleting it frees: ws's old /f (now read by the snapshot alone), its own /f, /mine
    # and /via (the mount's, if it ran)
    lo = (2 << 20) + 5000
    end = time.time() + 40
    while True:
        own = fs_names(c)["ws@w"]["clone"].get("own_bytes")
        only = snaps(c, "ws")["w"].get("bytes_only")
        if lo <= own <= lo + 17 and only == own:
            break
        check(time.time() < end, "the writable snapshot holds %s alone (its clone says %s); "
              "want %d (+17)" % (only, own, lo))
        time.sleep(1)
    row = fs_names(c)["ws@w"]
    check(row["clone"]["origin"] == "ws" and row["clone"]["snapshot"] == "w",
          "fs list shows %s" % row)
    check(any("the writable snapshot ws@w" in ln for ln in
              c.shoal("fs", "list", check_rc=0).stdout.splitlines()), "fs list does not say so")
    for args, want in ((("fs", "clone", "ws@w", "x"), "is writable"),
                       (("fs", "restore", "ws@w"), "is writable"),
                       (("fs", "delete", "ws"), "has clones (ws@w)")):
        p = c.shoal(*args)
        check(p.returncode != 0 and want in p.stderr, "%s: exit %d %s"
              % (" ".join(args), p.returncode, p.stderr))
    # deleted: the clone goes, then the snapshot; the filesystem stays as it is
    c.shoal("fs", "snapshot", "delete", "ws", "w", check_rc=0)
    end = time.time() + 90
    while "w" in snaps(c, "ws") or "ws@w" in fs_names(c):
        check(time.time() < end, "the writable snapshot never went: %s, %s"
              % (snaps(c, "ws"), sorted(fs_names(c))))
        time.sleep(0.5)
    p = c.shoal("ns", "ws@w", "stat", "/f")
    check(p.returncode != 0, "ws@w still opens after its deletion")
    check(get(c, "ws", "/f") == later, "the filesystem changed with the snapshot's deletion")


def main():
    return tc.test_main(__doc__, TESTS, {}, 6, "SH_SNAPSHOT_PORT", 28700)


if __name__ == "__main__":
    sys.exit(main())
