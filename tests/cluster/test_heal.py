#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Self-healing tests (docs/healing.md): real shoald processes on loopback.

usage: tests/cluster/test_heal.py BIN_DIR [--only NAME[,NAME]] [--keep]

On 7 local nodes, 4+2: files written (small inline ones, compressed ones, deduplicated
ones), a node kill -9'd and left down (or its drive failed by command); once `shoal
rebuild status` says full protection, two more nodes are kill -9'd and every file
reads back byte for byte, which without the rebuild loses data (3 fragments of a
6-fragment stripe on 6 of 7 nodes). A node back within the rebuild delay serves its
fragments again and nothing is rebuilt; one back after the rebuild has its stale
fragments released. Prints the closing line "N passed, N failed, N skipped".
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_cluster as tc  # noqa: E402
from test_cluster import Fail, check, make_fs, serving, flip_block as flip  # noqa: E402

TESTS = []
NODES = 7


def test(fn):
    TESTS.append(fn)
    return fn


def ns(c, fs, *args, node=1):
    p = c.shoal("ns", fs, *args, node=node, timeout=120)
    if p.returncode != 0:
        raise Fail("ns %s %s on node %d: exit %d: %s%s" % (fs, " ".join(args), node,
                                                          p.returncode, p.stdout, p.stderr))
    return p


def text(n, seed):
    words = [b"shoal", b"stripe", b"fragment", b"parity", b"rebuild", b"node", b"drive"]
    out, x = bytearray(), seed
    while len(out) < n:
        x = (x * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        out += words[(x >> 40) % len(words)] + b" "
    return bytes(out[:n])


class Files:
    """What was written, to read back: {(fs, name): bytes}."""

    def __init__(self, c):
        self.c = c
        self.want = {}

    def put(self, fs, name, data):
        local = os.path.join(self.c.dir, "put.tmp")
        with open(local, "wb") as f:
            f.write(data)
        ns(self.c, fs, "put", local, "/" + name)
        self.want[(fs, name)] = data

    def verify(self, label, node=1):
        out = os.path.join(self.c.dir, "get.tmp")
        for (fs, name), data in sorted(self.want.items()):
            p = self.c.shoal("ns", fs, "get", "/" + name, out, node=node, timeout=120)
            check(p.returncode == 0, "%s: %s:/%s does not read: %s" % (label, fs, name,
                                                                      p.stderr.strip()))
            with open(out, "rb") as f:
                got = f.read()
            check(got == data, "%s: %s:/%s reads %d bytes, want %d%s" %
                  (label, fs, name, len(got), len(data),
                   " (different bytes)" if len(got) == len(data) else ""))


def dataset(c):
    """Two filesystems: fs1 (lz4) and fs2 (dedup, zstd); files of every kind."""
    make_fs(c, "fs1")
    make_fs(c, "fs2", compression="zstd", dedup=True)
    files = Files(c)
    files.put("fs1", "tiny", b"x" * 100)                     # inline
    files.put("fs1", "inline4k", os.urandom(4096))           # inline, the largest
    for i, size in enumerate([5000, 300000, 1048576 + 17, 2500000]):
        files.put("fs1", "rand%d" % i, os.urandom(size))     # incompressible
    files.put("fs1", "text", text(1500000, 7))               # compressed
    block = os.urandom(65536)
    for i in range(3):                                       # deduplicated blocks
        files.put("fs2", "dup%d" % i, block * 8 + os.urandom(1000 + i))
    files.put("fs2", "text", text(700000, 9))
    files.verify("written")
    return files


def rebuild(c, node=1):
    return c.run_json(["rebuild", "status"], node)


def wait_full(c, what, timeout=180, node=1, stripes=1):
    """Until `shoal rebuild status` says full protection (of at least `stripes` stripes);
    the last status."""
    end = time.time() + timeout
    s = {}
    while time.time() < end:
        try:
            s = rebuild(c, node)
            if s["state"] == "full" and s["levels"][0]["stripes"] >= stripes:
                return s
        except Fail:
            pass
        time.sleep(0.5)
    raise Fail("%s: not at full protection after %d s: %s" % (what, timeout, s))


def wait_state(c, what, states, timeout=60, node=1):
    end = time.time() + timeout
    s = {}
    while time.time() < end:
        try:
            s = rebuild(c, node)
            if s["state"] in states:
                return s
        except Fail:
            pass
        time.sleep(0.3)
    raise Fail("%s: rebuild status never %s in %d s: %s" % (what, states, timeout, s))


def wait_event(c, what, words, timeout=30, node=1):
    """Until an event's text has every one of words (the watcher posts them every 2 s)."""
    end = time.time() + timeout
    texts = []
    while time.time() < end:
        try:
            texts = [e["text"] for e in c.run_json(["events"], node)]
        except Fail:
            texts = []
        for t in texts:
            if all(w in t for w in words):
                return t
        time.sleep(0.5)
    raise Fail("%s: no event with %s in %d s: %s" % (what, words, timeout, texts[:12]))


def fragments(c, fs="fs1", node=1):
    return json.loads(ns(c, fs, "usage", node=node).stdout)


def setup(c, delay):
    c.env["SHOAL_META_REPLACE"] = "3"  # a dead node's metadata replicas move on quickly
    c.env["SHOAL_ORPHAN_AGE"] = "5"    # stale fragments go soon after a node comes back
    c.up()
    p = c.shoal("cluster", "set", "rebuild-delay", str(delay))
    check(p.returncode == 0, "cluster set rebuild-delay: %s" % p.stderr)


def groups_moved_off(c, gone, nodes=NODES):
    """Every metadata group leads again with five live voters, none of them gone."""
    alive = [n for n in range(1, nodes + 1) if n not in gone]
    end = time.time() + 90
    seen = {}
    while time.time() < end:
        seen = {k: g["voters"] for k, (_, g) in serving(c, alive).items()}
        if seen and all(len(v) == 5 and not set(v) & set(gone) for v in seen.values()):
            return
        time.sleep(0.5)
    raise Fail("metadata groups still have %s as members: %s" % (gone, seen))


def survive_two_more(c, files, lost):
    """After the loss of `lost` was healed: two more nodes kill -9'd, all of it reads."""
    groups_moved_off(c, [lost])
    more = [n for n in range(NODES, 1, -1) if n != lost][:2]
    for n in more:
        c.kill(n)
    for n in more:
        c.wait_state(n, "down", 1, 20)
    files.verify("node %d lost and rebuilt, then nodes %s down" % (lost, more))


@test
def rebuild_after_node_loss_survives_two_more(c):
    setup(c, 2)
    files = dataset(c)
    wait_full(c, "written")
    c.kill(7)
    c.wait_state(7, "down", 1, 20)
    s = wait_state(c, "node 7 killed", ("rebuilding", "degraded", "full"))
    s = wait_full(c, "node 7 lost")
    check(s["rebuilt_fragments"] > 0, "nothing was rebuilt: %s" % s)
    check(s["targets_lost"] == 1, "node 7's target not lost: %s" % s)
    print("  %d fragments rebuilt (%d bytes)" % (s["rebuilt_fragments"], s["rebuilt_bytes"]))
    print("  event: %s" % wait_event(c, "node 7 rebuilt", ["rebuild finished"]))
    files.verify("node 7 lost, rebuilt")
    survive_two_more(c, files, 7)


@test
def rebuild_after_drive_failed_by_command(c):
    setup(c, 60)
    files = dataset(c)
    wait_full(c, "written")
    drive = [d for d in c.run_json(["drive", "list"], 1) if d["node"] == 6][0]["id"]
    p = c.shoal("drive", "fail", str(drive))
    check(p.returncode == 0, "drive fail: %s" % p.stderr)
    p = c.shoal("drive", "fail", str(drive))
    check(p.returncode != 0 and "already" in p.stderr, "a second fail: %s" % p.stderr)
    s = wait_full(c, "drive %d failed" % drive)
    check(s["rebuilt_fragments"] > 0 and drive in s["failed_drives"], "rebuilt: %s" % s)
    files.verify("drive %d failed, rebuilt" % drive)
    # the failed drive's node is up: it is still a metadata replica; the data survives
    # any two more nodes down
    for n in (7, 5):
        c.kill(n)
    for n in (7, 5):
        c.wait_state(n, "down", 1, 20)
    files.verify("drive %d failed and rebuilt, then nodes 7 and 5 down" % drive)


@test
def node_back_within_delay_rebuilds_nothing(c):
    setup(c, 60)
    files = dataset(c)
    wait_full(c, "written")
    c.kill(4)
    c.wait_state(4, "down", 1, 20)
    s = wait_state(c, "node 4 down", ("degraded",))
    check(s["targets_down"] == 1 and s["targets_lost"] == 0, "node 4 down, not lost: %s" % s)
    files.verify("node 4 down (not lost)")
    c.up()
    c.wait_state(4, "up", 1, 30)
    s = wait_full(c, "node 4 back")
    check(s["rebuilt_fragments"] == 0, "a node back within the delay: rebuilt %s" % s)
    files.verify("node 4 back within the delay")


@test
@tc.long_tier
def node_back_after_rebuild_releases_stale_fragments(c):
    setup(c, 1)
    files = dataset(c)
    wait_full(c, "written")
    start = fragments(c)
    c.kill(3)
    c.wait_state(3, "down", 1, 20)
    s = wait_full(c, "node 3 lost")
    check(s["rebuilt_fragments"] > 0, "nothing rebuilt: %s" % s)
    c.up()
    c.wait_state(3, "up", 1, 30)
    # its fragments were all rebuilt elsewhere: the sweep releases them, totals come back
    end = time.time() + 90
    now = {}
    while time.time() < end:
        now = fragments(c)
        if now["fragments"] == start["fragments"]:
            break
        time.sleep(1)
    check(now["fragments"] == start["fragments"],
          "fragments after node 3 came back: %s, before it went %s" % (now, start))
    files.verify("node 3 back after the rebuild")
    wait_full(c, "node 3 back")
    # deleting everything gives every fragment back
    for (fs, name) in list(files.want):
        ns(c, fs, "rm", "/" + name)
    end = time.time() + 60
    while time.time() < end:
        if fragments(c)["fragments"] == 0:
            break
        time.sleep(1)
    check(fragments(c)["fragments"] == 0, "fragments left after deleting all: %s" %
          fragments(c))


@test
def degraded_writes_spread_out_when_domains_return(c):
    setup(c, 600)
    make_fs(c, "fs1")
    files = Files(c)
    for n in (6, 7):
        c.kill(n)
    for n in (6, 7):
        c.wait_state(n, "down", 1, 20)
    for i in range(4):
        files.put("fs1", "late%d" % i, os.urandom(400000 + i * 100000))
    s = wait_state(c, "written on 5 of 7 nodes", ("shared",), timeout=30)
    check(s["shared_stripes"] > 0, "no stripe shares a domain: %s" % s)
    files.verify("written on 5 of 7 nodes")
    c.up()
    for n in (6, 7):
        c.wait_state(n, "up", 1, 30)
    s = wait_full(c, "nodes 6 and 7 back")
    check(s["moved_fragments"] > 0 and s["shared_stripes"] == 0, "spread out: %s" % s)
    files.verify("spread out again")
    for n in (2, 3):
        c.kill(n)
    for n in (2, 3):
        c.wait_state(n, "down", 1, 20)
    files.verify("spread out, then nodes 2 and 3 down")


@test
@tc.long_tier
def rebuild_interrupted_by_kills_finishes_and_leaks_nothing(c):
    setup(c, 1)
    files = dataset(c)
    for i in range(6):
        files.put("fs1", "big%d" % i, os.urandom(3000000))
    wait_full(c, "written")
    start = fragments(c)
    c.kill(7)
    c.wait_state(7, "down", 1, 20)
    time.sleep(1.5)  # lost now: the rebuild starts
    c.kill(1)        # a node doing it (it leads groups), and a second failure
    time.sleep(2)
    c.up()           # node 1 back (7 too: `local up` starts what is not running)
    c.kill(7)
    s = wait_full(c, "rebuild interrupted", node=2)
    files.verify("rebuild interrupted by kills", node=2)
    # copies the interrupted jobs wrote that no record names are swept
    end = time.time() + 60
    now = {}
    while time.time() < end:
        now = fragments(c, node=2)
        if now["fragments"] == start["fragments"]:
            break
        time.sleep(1)
    check(now["fragments"] == start["fragments"],
          "fragments after the rebuild: %s, before it %s" % (now, start))
    for (fs, name) in list(files.want):
        ns(c, fs, "rm", "/" + name, node=2)
    end = time.time() + 60
    while time.time() < end and fragments(c, node=2)["fragments"] != 0:
        time.sleep(1)
    check(fragments(c, node=2)["fragments"] == 0, "fragments left after deleting all")


@test
@tc.long_tier
def full_file_system_says_enospc_and_rebuilds_once_there_is_room(c):
    """Written until full: the write fails with ENOSPC, not EIO. A node lost then has
    nowhere to be rebuilt: the heal writes stop at the full targets (targets_full), the
    passes and failed jobs stay paced, nothing leaks; files deleted: the rebuild finishes."""
    c.env["SHOAL_META_REPLACE"] = "3"
    c.env["SHOAL_ORPHAN_AGE"] = "5"
    c.local("up", "--nodes", str(c.nodes), "--port", str(c.port), "--drive-size", "64M",
            "--buckets", "64")
    c.shoal("cluster", "set", "rebuild-delay", "2", check_rc=0)
    make_fs(c, "fs1")
    files, local, err = Files(c), os.path.join(c.dir, "put.tmp"), ""
    for i in range(200):
        data = os.urandom(4 << 20)
        with open(local, "wb") as f:
            f.write(data)
        p = c.shoal("ns", "fs1", "put", local, "/f%d" % i, timeout=120)
        if p.returncode != 0:
            err = p.stderr.strip()
            break
        files.want[("fs1", "f%d" % i)] = data
    check("No space left on device" in err,
          "writing until full: %d files, then %r (want ENOSPC)" % (len(files.want), err))
    print("  %d files of 4 MiB, then: %s" % (len(files.want), err))
    files.verify("full")
    wait_full(c, "full")
    c.kill(7)
    c.wait_state(7, "down", 1, 20)
    end, s = time.time() + 90, {}
    while time.time() < end:
        s = rebuild(c)
        if s["targets_full"] > 0 and s["state"] == "rebuilding":
            break
        time.sleep(1)
    check(s.get("targets_full", 0) > 0, "no target out of space after node 7 was lost: %s" % s)
    time.sleep(3)
    a = rebuild(c)
    time.sleep(10)
    b = rebuild(c)
    passes, failed = b["passes"] - a["passes"], b["failed_jobs"] - a["failed_jobs"]
    print("  nowhere to rebuild: %d passes and %d failed jobs in 10 s, %d target(s) full" %
          (passes, failed, b["targets_full"]))
    check(b["state"] == "rebuilding", "node 7 lost, no room: %s" % b)
    check(passes <= 150 and failed <= 200,
          "passes not paced while there is no room: %d passes, %d failed jobs in 10 s" %
          (passes, failed))
    files.verify("node 7 lost, no room to rebuild", node=2)
    names = sorted(files.want)
    for (fs, name) in names[: len(names) // 2]:
        ns(c, fs, "rm", "/" + name)
        del files.want[(fs, name)]
    s = wait_full(c, "half the files deleted", timeout=240)
    check(s["rebuilt_fragments"] > 0, "nothing was rebuilt: %s" % s)
    files.verify("rebuilt once there was room", node=2)
    for (fs, name) in list(files.want):
        ns(c, fs, "rm", "/" + name)
    for name in ("f%d" % len(names),):  # what the failed put left
        c.shoal("ns", "fs1", "rm", "/" + name)
    end = time.time() + 60
    while time.time() < end and fragments(c)["fragments"] != 0:
        time.sleep(1)
    left = fragments(c)
    if left["fragments"] != 0:
        print(c.shoal("ns", "fs1", "ls", "-l", "/").stdout, c.shoal("rebuild", "status").stdout)
    check(left["fragments"] == 0, "fragments left after deleting all: %s" % left)


def log_count(c, n, text):
    with open(os.path.join(c.dir, "n%d.log" % n)) as f:
        return f.read().count(text)


def wait_repaired(c, want, what, timeout=60, moved_from=None):
    """Until want fragments were repaired; with moved_from (a status from before), a
    fragment moved by the balance since then counts too: a balance that copies the
    corrupt fragment away re-creates it from the others as a repair would (the test's
    reads afterwards check that nothing meets it again)."""
    end = time.time() + timeout
    s = {}
    while time.time() < end:
        s = rebuild(c)
        moved = 0
        if moved_from is not None:
            moved = (s["balanced_fragments"] - moved_from["balanced_fragments"] +
                     s["moved_fragments"] - moved_from["moved_fragments"])
        if s["repaired_fragments"] + min(moved, 1) >= want:
            return s
        time.sleep(0.5)
    raise Fail("%s: %d fragment(s) repaired after %d s, want %d: %s" %
               (what, s.get("repaired_fragments", 0), timeout, want, s))


@test
def corrupt_fragments_repaired_after_a_read_and_by_the_scrub(c):
    setup(c, 60)
    make_fs(c, "fs1", compression="none")  # the test finds the blocks' bytes on the drives
    files = Files(c)
    files.put("fs1", "p", b"".join((b"SHOAL-BLOCK-%06d-" % i) * (4096 // 19) +
                                   bytes(4096 - 19 * (4096 // 19)) for i in range(256)))
    # a read meets the corrupt block, decodes around it; the target reports it, the
    # stripe's leader re-creates the fragment where it was
    n = flip(c, 5)
    files.verify("a corrupt block")
    check(log_count(c, n, "crc mismatch") >= 1, "node %d did not log the corruption" % n)
    wait_repaired(c, 1, "after a read")
    seen = log_count(c, n, "crc mismatch")
    files.verify("repaired")
    check(log_count(c, n, "crc mismatch") == seen, "the read met the corrupt fragment again")
    # the scrub finds one nobody reads (or the balance, moving fragments meanwhile, reads
    # it first)
    before = rebuild(c)
    m = flip(c, 40)
    p = c.shoal("cluster", "set", "scrub-interval", "0")
    check(p.returncode == 0, "cluster set scrub-interval: %s" % p.stderr)
    s = wait_repaired(c, 2, "by the scrub", moved_from=before)
    check(log_count(c, m, "scrub: fragment") >= 1 or s["repaired_fragments"] < 2,
          "node %d's scrub did not log it" % m)
    seen = log_count(c, m, "crc mismatch")
    files.verify("repaired after the scrub")
    if log_count(c, m, "crc mismatch") != seen and s["repaired_fragments"] < 2:
        # the balance moved another fragment, not the corrupt one, before the scrub came
        # to it: the read decoded around it and reported it, and it is repaired as after
        # the first read
        s = wait_repaired(c, 2, "after the balance and a read")
        seen = log_count(c, m, "crc mismatch")
        files.verify("repaired after the balance and a read")
    check(log_count(c, m, "crc mismatch") == seen, "a read met the scrubbed fragment")


@test
@tc.long_tier
def drive_failing_writes_or_reads_is_failed_and_rebuilt(c):
    """No `shoal drive fail`: the drive's writes fail (store.write_eio), its node's watcher
    marks it failed, and its fragments are rebuilt elsewhere; then the same for a drive
    whose reads fail (store.read_eio)."""
    setup(c, 60)
    files = dataset(c)
    wait_full(c, "written")
    c.env["SH_FAULTS"] = "store.write_eio:nth=4"  # node 8 only: its 4th segment write
    c.local("add")
    del c.env["SH_FAULTS"]
    c.nodes = NODES + 1
    drive = [d["id"] for d in c.run_json(["drive", "list"], 1) if d["node"] == NODES + 1][0]
    for i in range(12):  # writes that land on node 8's drive too (and the rebalance's)
        files.put("fs1", "more%d" % i, os.urandom(700000))
    end = time.time() + 60
    st = None
    while time.time() < end:
        st = [d for d in c.run_json(["drive", "list"], 1) if d["id"] == drive][0]["state"]
        if st == "failed":
            break
        time.sleep(0.5)
    check(st == "failed", "drive %d with failing writes is %s, not failed" % (drive, st))
    print("  event: %s" % wait_event(c, "drive %d failing" % drive,
                                     ["drive %d" % drive, "its writes fail with I/O errors"]))
    files.verify("drive %d failed by its node" % drive)
    s = wait_full(c, "drive %d failed by its node" % drive)
    check(drive in s["failed_drives"], "drive %d not among the failed: %s" % (drive, s))
    files.verify("drive %d failed, rebuilt" % drive)
    # a ninth node whose drive writes but cannot read: the readers decode around it, and
    # its node marks it failed after 8 read errors
    c.env["SH_FAULTS"] = "store.read_eio:always"
    c.local("add")
    del c.env["SH_FAULTS"]
    c.nodes = NODES + 2
    drive = [d["id"] for d in c.run_json(["drive", "list"], 1) if d["node"] == NODES + 2][0]
    for i in range(12):
        files.put("fs1", "late%d" % i, os.urandom(700000))
    end = time.time() + 90
    t = None
    while time.time() < end and t is None:
        files.verify("drive %d failing its reads" % drive)
        try:
            t = wait_event(c, "drive %d" % drive, ["drive %d" % drive, "reads failed"], 2)
        except Fail:
            pass
    check(t is not None, "drive %d failing its reads was not marked failed" % drive)
    print("  event: %s" % t)
    wait_full(c, "drive %d failed by its reads" % drive)
    files.verify("drive %d failed by its reads, rebuilt" % drive)


@test
def drive_that_does_not_open_is_failed_after_the_delay(c):
    """A node restarts and its drive no longer opens (both superblock copies gone): once
    the rebuild delay has passed, its node marks it failed and it is rebuilt."""
    setup(c, 3)
    files = dataset(c)
    wait_full(c, "written")
    drive = [d["id"] for d in c.run_json(["drive", "list"], 1) if d["node"] == 5][0]
    c.kill(5)
    img = os.path.join(c.dir, "drives", "n5.img")
    fd = os.open(img, os.O_RDWR)
    try:
        os.pwrite(fd, bytes(8192), 0)
        os.fsync(fd)
    finally:
        os.close(fd)
    c.up()
    c.wait_state(5, "up", 1, 30)
    t = wait_event(c, "drive %d unformatted" % drive, ["drive %d" % drive, "does not open"],
                   timeout=60)
    print("  event: %s" % t)
    s = wait_full(c, "drive %d does not open" % drive)
    check(drive in s["failed_drives"] and s["rebuilt_fragments"] > 0,
          "drive %d not failed and rebuilt: %s" % (drive, s))
    files.verify("drive %d does not open, rebuilt" % drive)


def put_json(c, path, body, node=1):
    import urllib.request
    req = urllib.request.Request("http://%s%s" % (c.addr(node), path), method="PUT",
                                 data=json.dumps(body).encode(),
                                 headers=dict(c.headers(), **{"Content-Type": "application/json"}))
    with urllib.request.urlopen(req, timeout=30) as r:
        return r.status


@test
@tc.long_tier
def node_add_rebalances_and_drive_remove_drains(c):
    setup(c, 60)
    make_fs(c, "fs1", compression="none")
    files = Files(c)
    for i in range(10):
        files.put("fs1", "f%d" % i, os.urandom(6000000))
    wait_full(c, "written")
    c.local("add")  # node 8 joins the running cluster with an empty drive
    c.nodes = NODES + 1
    files.verify("while node 8's drive fills")
    end = time.time() + 120
    s = {}
    while time.time() < end:
        s = rebuild(c)
        if s["state"] == "full" and s["balanced_fragments"] > 0 and \
                s["fill_max_over_mean"] <= 1.05:
            break
        time.sleep(1)
    check(s.get("fill_max_over_mean", 9) <= 1.05 and s["balanced_fragments"] > 0,
          "the fill did not even out after node 8 joined: %s" % s)
    new = [d["id"] for d in c.run_json(["drive", "list"], 1) if d["node"] == NODES + 1][0]
    per = fragments(c)["per_target"]
    check(per[str(new)] > 0, "nothing moved onto node 8's drive: %s" % per)
    print("  %d fragments moved onto node 8; fill max/mean %.3f" %
          (s["balanced_fragments"], s["fill_max_over_mean"]))
    files.verify("rebalanced")
    # a drive drained: every stripe keeps its six fragments, the drive ends empty
    drive = [d["id"] for d in c.run_json(["drive", "list"], 1) if d["node"] == 3][0]
    check(put_json(c, "/v1/drives/%d" % drive, {"state": "draining"}) == 200, "drain")
    end = time.time() + 120
    while time.time() < end:
        s = rebuild(c)
        if s["draining_stripes"] == 0 and s["state"] not in ("checking", "draining"):
            break
        files.verify("while drive %d drains" % drive) if s["draining_stripes"] else None
        time.sleep(1)
    check(s["draining_stripes"] == 0, "drive %d did not drain: %s" % (drive, s))
    check(s["levels"][1]["stripes"] == 0, "a stripe lost protection while draining: %s" % s)
    per = fragments(c)["per_target"]
    check(per[str(drive)] == 0, "drive %d still holds %d fragments" % (drive, per[str(drive)]))
    p = c.shoal("drive", "remove", str(drive), timeout=120)
    check(p.returncode == 0, "drive remove: %s %s" % (p.stdout, p.stderr))
    check(all(d["id"] != drive for d in c.run_json(["drive", "list"], 1)),
          "drive %d still listed" % drive)
    files.verify("drive %d removed" % drive)
    wait_full(c, "drive %d removed" % drive)
    wait_event(c, "drive %d drained" % drive, ["drain finished"])
    # a node up leaves: its drive drains, its metadata replicas move, then it goes
    p = c.shoal("node", "remove", "2", timeout=300)
    check(p.returncode == 0 and "leaving" in p.stdout,
          "node remove 2: exit %d: %s %s" % (p.returncode, p.stdout, p.stderr))
    check(all(n["id"] != 2 for n in c.run_json(["node", "list"], 1)), "node 2 still listed")
    check(all(d["node"] != 2 for d in c.run_json(["drive", "list"], 1)),
          "node 2's drives still listed")
    wait_event(c, "node 2 left", ["node 2 replaced by node", "leaves the cluster"])
    groups_moved_off(c, [2], nodes=NODES + 1)
    s = wait_full(c, "node 2 removed")
    check(s["levels"][1]["stripes"] == 0, "a stripe lost protection: %s" % s)
    files.verify("node 2 removed")


def main():
    return tc.test_main(__doc__, TESTS, {}, NODES, "SH_HEAL_PORT", 28800)


if __name__ == "__main__":
    sys.exit(main())
