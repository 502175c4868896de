#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Encrypted file systems on real shoald processes (docs/security.md, "Encrypted file
systems"), as tests/cluster/test_cluster.py:
- `shoal fs create --encrypt KEYFILE` makes the file system key (mode 0600) and gives the
  cluster only the master key wrapped by it; listings and events say "encrypted";
- what is written reads back exactly (compressible, random, small files; overwrites in the
  middle; one written while a node is stopped, so that its stripes are written again), yet
  no byte run of it is on any drive file or in any datagram (a plain file system written
  alongside shows that the search finds what is there);
- without a file system key, or with another, opening it is EACCES with the reason, never
  garbage; the key is taken from --fs-key-file, $SHOAL_FS_KEY_FILE or $SHOAL_FS_KEY; after
  `shoal fs rekey` the new key opens it and the old one no longer does;
- dedup works within it: a second copy takes no new space;
- a writable clone of it is encrypted too and opens with its key (and after a rekey of its
  origin, with the new one);
- the mount reads and writes it.

usage: tests/cluster/test_encrypt.py BIN_DIR [--only NAME[,NAME]] [--keep]
Prints the closing line "N passed, N failed, N skipped".
"""
import os
import re
import signal
import stat
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_cluster as tc  # noqa: E402
import test_security as ts  # noqa: E402
from test_cluster import Skip, check, make_fs  # noqa: E402

TESTS = []


def test(fn):
    TESTS.append(fn)
    return fn


def make_encrypted(c, name, key_file, dedup=False):
    extra = ["--dedup", "on"] if dedup else []
    c.shoal("fs", "create", name, "--protection", "4+2", "--encrypt", key_file, *extra,
            check_rc=0)
    env = dict(os.environ, SHOAL_FS_KEY_FILE=key_file)
    end = time.time() + 15
    while time.time() < end:
        if ts.run(c, env, "ns", name, "stat", "/")[0] == 0:
            return env
        time.sleep(0.2)
    raise tc.Fail("the root of %s never appeared" % name)


def start(c, name="sec", dedup=False):
    """The cluster up, encrypted file system name made: (local/ for the test's own files, the
    key file, the environment that gives clients the key)."""
    c.up()
    c.leader()
    local = os.path.join(c.dir, "local")
    os.makedirs(local)
    key = os.path.join(local, "fs.key")
    return local, key, make_encrypted(c, name, key, dedup)


def marked(size, mark, compressible):
    """size bytes with mark every 4 KiB: text-like (compressible) or random between."""
    out = bytearray()
    while len(out) < size:
        filler = (b"checkpoint layer weights %08d " % len(out)) * 120 if compressible \
            else os.urandom(4000)
        out += mark + filler[:4096 - len(mark)]
    return bytes(out[:size])


def found_in_cluster(root, needles):
    """Which of needles some file of the cluster under root holds (the nodes' state and
    drives, not the test's own local/ files), in one pass over them."""
    found = set()
    for d in os.listdir(root):
        if d in ("local", "mnt") or not os.path.isdir(os.path.join(root, d)):
            continue
        for top, _, names in os.walk(os.path.join(root, d)):
            for n in names:
                try:
                    with open(os.path.join(top, n), "rb") as f:
                        data = f.read()
                except OSError:
                    continue
                found |= {x for x in needles if x in data}
    return found


@test
@tc.long_tier
def encrypted_filesystem_keeps_only_ciphertext(c):
    local, key, env = start(c)
    # the key file: made, private, a key's text; the cluster says encrypted
    check(stat.S_IMODE(os.stat(key).st_mode) == 0o600, "the key file is not 0600")
    with open(key) as f:
        text = f.read().strip()
    check(re.match(r"^sek1\.[0-9a-f]{64}$", text), "not a file system key: %r" % text)
    row = [f for f in c.json("fs", "list") if f["name"] == "sec"][0]
    check(row["encrypted"] is True, "fs list: %s" % row)
    texts = [e["text"] for e in c.run_json(["events"], 1)]
    check(any("filesystem sec created" in t and "encrypted" in t for t in texts),
          "the events do not say it is encrypted: %s" % texts[:5])
    make_fs(c, "plain", compression="none")
    marks = {"text": b"<<SEALED-TEXT-7f3a>>", "random": b"<<SEALED-RAND-91c2>>",
             "small": b"<<SEALED-SMALL-55d0>>"}
    data = {"text": marked(3 << 20, marks["text"], True),
            "random": marked(2 << 20, marks["random"], False),
            "small": marks["small"] * 3}
    ports = {c.port + n - 1 for n in range(1, c.nodes + 1)} | \
        {c.port + 100 + n - 1 for n in range(1, c.nodes + 1)}
    seen = []
    sniffer = threading.Thread(target=lambda: seen.append(ts.sniff_shoal(ports, 14.0, True)))
    sniffer.start()
    time.sleep(0.3)
    # the first file written while node 6 is stopped for longer than a PUT waits (5 s): the
    # stripes placed on it are written again under new ids, around it, and what its sessions
    # send again once it is back must be ciphertext too
    victim = c.pids()[5]
    os.kill(victim, signal.SIGSTOP)
    waker = threading.Timer(7.0, lambda: os.kill(victim, signal.SIGCONT))
    waker.start()
    try:
        for name in ("random", "text", "small"):
            path = os.path.join(local, name)
            with open(path, "wb") as f:
                f.write(data[name])
            t0 = time.time()
            rc, out = ts.run(c, env, "ns", "sec", "put", path, "/" + name, timeout=120)
            check(rc == 0, "put %s: %s" % (name, out))
            if name == "random":
                # the attempts that failed on it: their fragments released on the others
                rel = sum(tc.total(tc.parse_metrics(tc.metrics_page(c, n)),
                                   "shoal_rpc_requests_total", op="store.release")
                          for n in range(1, 6))
                print("  a put with node 6 stopped: %.1f s, %d fragments of failed attempts "
                      "released" % (time.time() - t0, rel))
                check(rel > 0, "no attempt failed on the stopped node: nothing was retried")
            rc, out = ts.run(c, env, "ns", "sec", "get", "/" + name, path + ".back",
                             timeout=120)
            check(rc == 0 and ts.same_file(path, path + ".back"),
                  "%s reads back wrong: %s" % (name, out))
    finally:
        waker.join()
    sniffer.join()
    # the plain file system, written the same: the search finds what is there
    ctl = os.path.join(local, "control")
    with open(ctl, "wb") as f:
        f.write(marked(1 << 20, b"<<PLAIN-CONTROL-0b1e>>", False))
    c.shoal("ns", "plain", "put", ctl, "/control", check_rc=0, timeout=120)
    with open(ctl + ".small", "wb") as f:
        f.write(b"<<PLAIN-SMALL-2c4d>>" * 3)
    c.shoal("ns", "plain", "put", ctl + ".small", "/small", check_rc=0)
    found = found_in_cluster(c.dir, [b"<<PLAIN-CONTROL-0b1e>>", b"<<PLAIN-SMALL-2c4d>>",
                                     marks["text"], marks["random"], marks["small"],
                                     text[5:].encode(), bytes.fromhex(text[5:])])
    check(b"<<PLAIN-CONTROL-0b1e>>" in found and b"<<PLAIN-SMALL-2c4d>>" in found,
          "a plain file's bytes are on no drive file: the search is blind (%s)" % found)
    # ... and finds nothing of the encrypted ones, nor the file system key
    check(not found & {marks["text"], marks["random"], marks["small"]},
          "plaintext of an encrypted file in the cluster's files: %s" % found)
    check(not found & {text[5:].encode(), bytes.fromhex(text[5:])},
          "the file system key is in the nodes' files")
    if seen[0] is None:
        print("  (capturing on lo needs root: datagrams not searched)")
    else:
        payloads = [p for _, _, p in seen[0]]
        check(len(payloads) > 100, "only %d datagrams seen" % len(payloads))
        leaked = [m for m in marks.values() if any(m in p for p in payloads)]
        check(not leaked, "plaintext %s in %d datagrams" % (leaked, len(payloads)))
        print("  %d datagrams searched: no plaintext" % len(payloads))
    # an overwrite in the middle of a block, read back whole
    part = os.path.join(local, "part")
    with open(part, "wb") as f:
        f.write(b"Z" * 5000)
    rc, out = ts.run(c, env, "ns", "sec", "pwrite", "/text", "200000", part)
    check(rc == 0, "write at an offset: %s" % out)
    want = bytearray(data["text"])
    want[200000:205000] = b"Z" * 5000
    rc, out = ts.run(c, env, "ns", "sec", "get", "/text", part + ".back", timeout=120)
    with open(part + ".back", "rb") as f:
        check(rc == 0 and f.read() == bytes(want), "the overwritten file reads wrong: %s" % out)
    # random writes through one handle, checked against a model
    rc, out = ts.run(c, env, "ns", "sec", "scribble", "/scribbled", "7", timeout=300)
    check(rc == 0, "scribble: %s" % out)


def start_with_file(c):
    """start, and a file of 300000 random bytes put as /x: (local/, key file, environment,
    the file's local copy)."""
    local, key, env = start(c)
    src = ts.random_file(c, "local/src", 300000)
    rc, out = ts.run(c, env, "ns", "sec", "put", src, "/x")
    check(rc == 0, "put: %s" % out)
    return local, key, env, src


@test
def encrypted_filesystem_needs_its_key(c):
    local, key, env, src = start_with_file(c)
    # no key: EACCES, and why
    bare = {k: v for k, v in env.items() if not k.startswith("SHOAL_FS_KEY")}
    rc, out = ts.run(c, bare, "ns", "sec", "get", "/x", src + ".b")
    check(rc != 0 and "EACCES" in out and "encrypted" in out,
          "no file system key: exit %d: %s" % (rc, out))
    # another key (made by another file system's create): EACCES, never garbage
    other = os.path.join(local, "other.key")
    make_encrypted(c, "sec2", other)
    rc, out = ts.run(c, dict(bare, SHOAL_FS_KEY_FILE=other), "ns", "sec", "get", "/x",
                     src + ".b")
    check(rc != 0 and "EACCES" in out and "does not open it" in out,
          "another file system's key: exit %d: %s" % (rc, out))
    check(not os.path.exists(src + ".b") or os.path.getsize(src + ".b") == 0,
          "bytes were written with the wrong key")
    # the key as text in the environment
    with open(key) as f:
        text = f.read().strip()
    rc, out = ts.run(c, dict(bare, SHOAL_FS_KEY=text), "ns", "sec", "get", "/x", src + ".c")
    check(rc == 0 and ts.same_file(src, src + ".c"), "$SHOAL_FS_KEY: %s" % out)
    # a key file others may read: refused
    loose = os.path.join(local, "loose.key")
    with open(loose, "w") as f:
        f.write(text + "\n")
    os.chmod(loose, 0o644)
    rc, out = ts.run(c, dict(bare, SHOAL_FS_KEY_FILE=loose), "ns", "sec", "stat", "/x")
    check(rc != 0 and "chmod 600" in out, "a key file others may read: %s" % out)
    # the key changed (fs rekey): the data stays, the new key opens it, the old one no more
    new = os.path.join(local, "new.key")
    rc, out = ts.run(c, env, "fs", "rekey", "sec", "--old", key, "--new", new)
    check(rc == 0 and "no longer opens it" in out, "rekey: exit %d: %s" % (rc, out))
    check(stat.S_IMODE(os.stat(new).st_mode) == 0o600, "the new key file is not 0600")
    rc, out = ts.run(c, dict(bare, SHOAL_FS_KEY_FILE=new), "ns", "sec", "get", "/x", src + ".d")
    check(rc == 0 and ts.same_file(src, src + ".d"), "read with the new key: %s" % out)
    rc, out = ts.run(c, env, "ns", "sec", "stat", "/x")
    check(rc != 0 and "EACCES" in out, "the old key after rekey: exit %d: %s" % (rc, out))
    rc, out = ts.run(c, env, "fs", "rekey", "sec", "--old", key, "--new", other)
    check(rc != 0 and "does not open" in out, "rekey with a key that no longer opens: %s" % out)
    texts = [e["text"] for e in c.run_json(["events"], 1)]
    check(any(re.search(r"filesystem sec: its master key wrapped under a new file system "
                        r"key \(admin API from", t) for t in texts),
          "the rekey is not in the events: %s" % texts[:4])
    # a plain file system needs none, and has no key to change
    make_fs(c, "plain")
    rc, out = ts.run(c, env, "fs", "rekey", "plain", "--old", key, "--new", new)
    check(rc != 0 and "not encrypted" in out, "rekey of a plain file system: %s" % out)
    rc, out = ts.run(c, bare, "ns", "plain", "put", src, "/x")
    check(rc == 0, "a plain file system without a file system key: %s" % out)


@test
def encrypted_filesystem_deduplicates_within_itself(c):
    local, key, env = start(c, "sd", dedup=True)
    size = 8 << 20
    src = ts.random_file(c, "local/src", size)
    rc, out = ts.run(c, env, "ns", "sd", "put", src, "/a", timeout=120)
    check(rc == 0, "put: %s" % out)
    first = tc.fs_usage(c, "sd", size)
    rc, out = ts.run(c, env, "ns", "sd", "put", src, "/b", timeout=120)
    check(rc == 0, "put again: %s" % out)
    both = tc.fs_usage(c, "sd", 2 * size)
    grew = both["physical_bytes"] - first["physical_bytes"]
    print("  a second copy of %d MiB: physical grew %d bytes; dedup %.2fx" %
          (size >> 20, grew, both["dedup_ratio"]))
    check(grew <= size * 6 // 4 * 5 // 100, "the copy took space: %s then %s" % (first, both))
    check(both["dedup_ratio"] > 1.9, "dedup ratio %s" % both)
    rc, out = ts.run(c, env, "ns", "sd", "get", "/b", src + ".b", timeout=120)
    check(rc == 0 and ts.same_file(src, src + ".b"), "the deduplicated copy reads wrong")


@test
def encrypted_filesystem_through_the_mount(c):
    if not os.path.exists("/dev/fuse"):
        raise Skip("no /dev/fuse")
    local, key, _ = start(c)
    mnt = os.path.join(c.dir, "mnt")
    os.makedirs(mnt)
    # without the key: refused before anything is mounted, and said so
    bare = {k: v for k, v in os.environ.items() if not k.startswith("SHOAL_FS_KEY")}
    p = subprocess.run([os.path.join(tc.BIN, "shoal"), "--addr", c.addr(1), "mount", "sec",
                        mnt], capture_output=True, text=True, timeout=60, env=bare)
    check(p.returncode != 0 and "fs-key-file" in p.stderr,
          "a mount without the file system key: exit %d: %s" % (p.returncode, p.stderr))
    p = subprocess.run([os.path.join(tc.BIN, "shoal"), "--addr", c.addr(1), "mount", "sec",
                        mnt, "--fs-key-file", key], capture_output=True, text=True,
                       timeout=60, env=bare)
    check(p.returncode == 0, "mount: %s" % p.stderr)
    try:
        blob = os.urandom(1 << 20) + b"tail" * 1000
        with open(os.path.join(mnt, "f"), "wb") as f:
            f.write(blob)
            f.flush()
            os.fsync(f.fileno())
        with open(os.path.join(mnt, "f"), "r+b") as f:
            f.seek(300001)
            f.write(b"patch")
        blob = blob[:300001] + b"patch" + blob[300006:]
        with open(os.path.join(mnt, "small"), "w") as f:
            f.write("a small file\n")
        os.rename(os.path.join(mnt, "small"), os.path.join(mnt, "renamed"))
        subprocess.run(["sync"], check=False)
        with open(os.path.join(mnt, "f"), "rb") as f:
            check(f.read() == blob, "the mounted file reads wrong")
        with open(os.path.join(mnt, "renamed")) as f:
            check(f.read() == "a small file\n", "the small file reads wrong")
    finally:
        subprocess.run(["fusermount3", "-u", mnt], capture_output=True)
    # and from another client, after the mount is gone
    back = os.path.join(local, "renamed.back")
    rc, out = ts.run(c, dict(bare, SHOAL_FS_KEY_FILE=key), "ns", "sec", "get", "/renamed", back)
    with open(back) as f:
        check(rc == 0 and f.read() == "a small file\n", "read after the mount: %s" % out)


@test
def encrypted_filesystem_clones_with_its_key(c):
    local, key, env, src = start_with_file(c)
    c.shoal("fs", "snapshot", "create", "sec", "s1", check_rc=0)
    rc, out = ts.run(c, env, "fs", "clone", "sec@s1", "sc", timeout=120)
    check(rc == 0 and "writable clone of sec@s1" in out, "clone: exit %d: %s" % (rc, out))
    row = [f for f in c.json("fs", "list") if f["name"] == "sc"][0]
    check(row["encrypted"] and row["clone"]["origin"] == "sec", "fs list shows %s" % row)
    # its origin's key opens it; none does not
    rc, out = ts.run(c, env, "ns", "sc", "get", "/x", src + ".a")
    check(rc == 0 and ts.same_file(src, src + ".a"), "the clone reads: %s" % out)
    bare = {k: v for k, v in env.items() if not k.startswith("SHOAL_FS_KEY")}
    rc, out = ts.run(c, bare, "ns", "sc", "get", "/x", src + ".b")
    check(rc != 0 and "EACCES" in out and "encrypted" in out,
          "the clone without a file system key: exit %d: %s" % (rc, out))
    # its own writes, sealed as its origin's; the origin does not see them
    mine = ts.random_file(c, "local/mine", 200000)
    rc, out = ts.run(c, env, "ns", "sc", "put", mine, "/x")
    check(rc == 0, "put in the clone: %s" % out)
    rc, out = ts.run(c, env, "ns", "sc", "get", "/x", src + ".c")
    check(rc == 0 and ts.same_file(mine, src + ".c"), "the clone's own write: %s" % out)
    rc, out = ts.run(c, env, "ns", "sec", "get", "/x", src + ".d")
    check(rc == 0 and ts.same_file(src, src + ".d"), "the origin after the clone's write")
    # its key is its origin's: rekeyed there, and then the new key opens both
    new = os.path.join(local, "new.key")
    rc, out = ts.run(c, env, "fs", "rekey", "sc", "--old", key, "--new", new)
    check(rc != 0 and "is a clone" in out, "rekey of the clone: exit %d: %s" % (rc, out))
    rc, out = ts.run(c, env, "fs", "rekey", "sec", "--old", key, "--new", new)
    check(rc == 0, "rekey of the origin: %s" % out)
    rc, out = ts.run(c, dict(bare, SHOAL_FS_KEY_FILE=new), "ns", "sc", "get", "/x", src + ".e")
    check(rc == 0 and ts.same_file(mine, src + ".e"), "the clone with the new key: %s" % out)
    rc, out = ts.run(c, env, "ns", "sc", "stat", "/x")
    check(rc != 0 and "EACCES" in out, "the clone with the old key: exit %d: %s" % (rc, out))
    c.shoal("fs", "delete", "sc", check_rc=0)


def main():
    return tc.test_main(__doc__, TESTS, {}, 6, "SH_ENCRYPT_PORT", 29100)


if __name__ == "__main__":
    sys.exit(main())
