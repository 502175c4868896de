#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Clients' keys on real shoald processes (shoal local up), as tests/cluster/test_cluster.py
(docs/security.md, "Clients' keys"):
- a client without a key is refused at once (EACCES); an access key opens its file system
  and no other; a read-only one reads and is refused every change (EROFS); a key the
  cluster does not have is not answered (EKEYREJECTED); keys are made into files of mode
  0600 or onto a pipe, never onto a terminal, listed without their text, and their making
  and revoking are in the events with who asked;
- every datagram between a keyed client and the backends carries a MAC under its key (seen
  on the wire), and one altered on the way is dropped and counted;
- a mount, the Python binding and the fio engine take a key file; a revoked key cuts a
  mounted client off within seconds, with EACCES.

usage: tests/cluster/test_security.py BIN_DIR [--only NAME[,NAME]] [--keep]
Prints the closing line "N passed, N failed, N skipped".
"""
import json
import os
import re
import socket
import stat
import struct
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_cluster as tc  # noqa: E402
from test_cluster import Skip, check, make_fs  # noqa: E402

TESTS = []


def test(fn):
    TESTS.append(fn)
    return fn


def no_key():
    """This process's environment without any client key."""
    return {k: v for k, v in os.environ.items() if k not in ("SHOAL_KEY", "SHOAL_KEY_FILE")}


def run(c, env, *args, timeout=60):
    """shoal ARGS at node 1 with the environment env: (exit status, stdout + stderr)."""
    p = subprocess.run([os.path.join(tc.BIN, "shoal"), "--addr", c.addr(1)] + list(args),
                       capture_output=True, text=True, timeout=timeout, env=env)
    return p.returncode, p.stdout + p.stderr


def random_file(c, name, size):
    path = os.path.join(c.dir, name)
    with open(path, "wb") as f:
        f.write(os.urandom(size))
    return path


def same_file(a, b):
    with open(a, "rb") as x, open(b, "rb") as y:
        return x.read() == y.read()


@test
def clients_need_a_key_of_their_filesystem(c):
    c.up()
    c.leader()
    make_fs(c, "a")
    make_fs(c, "b")
    src = random_file(c, "src.bin", 300000)
    back = src + ".back"
    # no key: refused at once, and said so
    t0 = time.time()
    rc, out = run(c, no_key(), "ns", "a", "put", src, "/x")
    check(rc != 0 and "EACCES" in out, "a client without a key: exit %d: %s" % (rc, out))
    check(time.time() - t0 < 10, "the refusal took %.1f s" % (time.time() - t0))
    # keys: into a file of mode 0600, or onto a pipe (never a terminal)
    rw = os.path.join(c.dir, "rw.key")
    c.shoal("fs", "key", "create", "a", "--read-write", "--out", rw, check_rc=0)
    check(stat.S_IMODE(os.stat(rw).st_mode) == 0o600, "the key file is not 0600")
    ro = c.shoal("fs", "key", "create", "a", "--read-only", check_rc=0).stdout.strip()
    check(re.match(r"^sk1\.\d+\.[0-9a-f]{64}$", ro), "not a key's text: %r" % ro)
    rc, out = run(c, os.environ, "fs", "key", "create", "a")
    check(rc == 2 and "--read-only or --read-write" in out, "a key without access: %s" % out)
    # the read-write key: file system a, read and written; b refused
    env_rw = dict(no_key(), SHOAL_KEY_FILE=rw)
    rc, out = run(c, env_rw, "ns", "a", "put", src, "/x")
    check(rc == 0, "put with a read-write key: %s" % out)
    rc, out = run(c, env_rw, "ns", "a", "get", "/x", back)
    check(rc == 0 and same_file(src, back), "get with a read-write key: %s" % out)
    rc, out = run(c, env_rw, "ns", "b", "stat", "/")
    check(rc != 0 and "EACCES" in out, "a's key opened b: %s" % out)
    # the read-only key, given as text: reads, and is refused every change
    env_ro = dict(no_key(), SHOAL_KEY=ro)
    os.unlink(back)
    rc, out = run(c, env_ro, "ns", "a", "get", "/x", back)
    check(rc == 0 and same_file(src, back), "get with a read-only key: %s" % out)
    for args in (("put", src, "/y"), ("mkdir", "/d"), ("rm", "/x")):
        rc, out = run(c, env_ro, "ns", "a", *args)
        check(rc != 0 and "EROFS" in out, "%s with a read-only key: exit %d: %s" %
              (args[0], rc, out))
    # a key the cluster does not have: not answered, and said so
    rc, out = run(c, dict(no_key(), SHOAL_KEY="sk1.99." + "7" * 64), "ns", "a", "stat", "/")
    check(rc != 0 and "EKEYREJECTED" in out, "a made-up key: exit %d: %s" % (rc, out))
    # a key file others may read, or that is no key: refused before anything is sent
    loose = os.path.join(c.dir, "loose.key")
    with open(loose, "w") as f:
        f.write(ro + "\n")
    os.chmod(loose, 0o644)
    rc, out = run(c, dict(no_key(), SHOAL_KEY_FILE=loose), "ns", "a", "stat", "/")
    check(rc != 0 and "chmod 600" in out, "a key file others may read: %s" % out)
    rc, out = run(c, dict(no_key(), SHOAL_KEY="sk1.x"), "ns", "a", "stat", "/")
    check(rc != 0 and "not a key" in out, "a malformed key: %s" % out)
    # listed without their text; the events say who made them
    keys = c.json("fs", "key", "list", "a")
    check(len(keys) == 2 and {k["access"] for k in keys} == {"read-write", "read-only"},
          "fs key list: %s" % keys)
    check(all("key" not in k for k in keys), "a listed key shows its text")
    check(ro.split(".")[2] not in json.dumps(c.run_json(["fs", "key", "list", "a"], 2)),
          "the key's text in a listing")
    texts = [e["text"] for e in c.run_json(["events"], 1)]
    made = [t for t in texts if re.search(r"access key \d+ \(read-only\) of filesystem a "
                                          r"created \(admin API from 127\.0\.0\.1:\d+\)$", t)]
    check(made, "the key's making is not in the events: %s" % texts[:6])
    # revoked: refused with EACCES from then on, and it says so in the events
    rid = ro.split(".")[1]
    c.shoal("fs", "key", "revoke", "a", rid, check_rc=0)
    rc, out = run(c, env_ro, "ns", "a", "stat", "/")
    check(rc != 0 and "EACCES" in out, "a revoked key: exit %d: %s" % (rc, out))
    rc, out = run(c, os.environ, "fs", "key", "revoke", "a", rid)
    check(rc != 0 and "revoked already" in out, "revoked twice: %s" % out)
    check([k["revoked"] for k in c.json("fs", "key", "list", "a") if str(k["id"]) == rid] ==
          [True], "the listing does not say the key is revoked")
    texts = [e["text"] for e in c.run_json(["events"], 1)]
    check(any(re.search(r"access key %s \(read-only\) of filesystem a revoked" % rid, t)
              for t in texts), "the revocation is not in the events")


@test
def client_datagrams_carry_macs_under_their_key(c):
    c.up()
    c.leader()
    make_fs(c, "a")
    rw = os.path.join(c.dir, "rw.key")
    c.shoal("fs", "key", "create", "a", "--read-write", "--out", rw, check_rc=0)
    with open(rw) as f:
        kid = int(f.read().split(".")[1])
    src = random_file(c, "src.bin", 2 << 20)
    ports = {c.port + n - 1 for n in range(1, c.nodes + 1)} | \
        {c.port + 100 + n - 1 for n in range(1, c.nodes + 1)}
    seen = []
    sniffer = threading.Thread(target=lambda: seen.append(tc.sniff_shoal(ports, 4.0, True)))
    sniffer.start()
    time.sleep(0.3)
    rc, out = run(c, dict(no_key(), SHOAL_KEY_FILE=rw), "ns", "a", "put", src, "/x")
    check(rc == 0, "put: %s" % out)
    rc, out = run(c, dict(no_key(), SHOAL_KEY_FILE=rw), "ns", "a", "get", "/x", src + ".b")
    check(rc == 0 and same_file(src, src + ".b"), "get: %s" % out)
    sniffer.join()
    if seen[0] is None:
        raise Skip("capturing on lo needs root")
    # a client's: its id (source or destination) has the top bit
    client = [(s, d, p) for s, d, p in seen[0]
              if (struct.unpack("<Q", p[8:16])[0] | struct.unpack("<Q", p[16:24])[0]) >> 63]
    check(len(client) >= 50, "only %d datagrams of the client seen" % len(client))
    plain = [p for _, _, p in client if not p[6] & 1]
    check(not plain, "%d of %d of the client's datagrams without a MAC" %
          (len(plain), len(client)))
    # (the nodes' own cleaners are clients too, under the cluster's client key, 1)
    ids = {struct.unpack("<I", p[76:80])[0] for _, _, p in client}
    check(kid in ids and ids <= {kid, 1}, "the clients' datagrams name keys %s" % ids)
    # one of them altered on the way (crc mended), sent again: dropped and counted
    to_node = [(d, p) for s, d, p in client if d in ports][:5]
    counts = {}
    for d, _ in to_node:
        n = (d - c.port) % 100 + 1
        counts[n] = tc.total(tc.parse_metrics(tc.metrics_page(c, n)),
                             "shoal_net_auth_failed_total")
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for d, p in to_node:
        flipped = bytearray(p)
        flipped[56] ^= 4  # the timestamp: still well-formed
        s.sendto(tc.mend_crc(bytes(flipped), True), ("127.0.0.1", d))
    s.close()
    time.sleep(1.2)  # the workers' next publication
    got = sum(tc.total(tc.parse_metrics(tc.metrics_page(c, n)), "shoal_net_auth_failed_total") -
              counts[n] for n in counts)
    want = len(to_node)
    check(got == want, "%d altered datagrams of the client's, %d counted" % (want, got))
    print("  %d datagrams of a keyed client seen, all with a MAC under key %d" %
          (len(client), kid))


def python_reads(c, key_file, write):
    """The Python binding, connected with key_file: (exit status, output) of a read of /x,
    then, if write, a write of /w."""
    pydir = os.path.join(os.path.dirname(tc.BIN), "python")
    code = ("import errno, shoal\n"
            "fs = shoal.connect('a', %r, key_file=%r)\n"
            "print(len(fs.open('/x', 'rb').read()))\n" % (c.addr(1), key_file))
    if write:
        code += ("try:\n"
                 "    with fs.open('/w', 'wb') as f: f.write(b'x')\n"
                 "except OSError as e:\n"
                 "    print('write:', errno.errorcode[e.errno])\n")
    p = subprocess.run(["/usr/bin/python3", "-c", code], capture_output=True, text=True,
                       timeout=60, env=dict(no_key(), PYTHONPATH=pydir))
    return p.returncode, p.stdout + p.stderr


@test
def a_revoked_key_cuts_a_mounted_client_off(c):
    c.up()
    c.leader()
    make_fs(c, "a")
    rw, ro = os.path.join(c.dir, "rw.key"), os.path.join(c.dir, "ro.key")
    c.shoal("fs", "key", "create", "a", "--read-write", "--out", rw, check_rc=0)
    c.shoal("fs", "key", "create", "a", "--read-only", "--out", ro, check_rc=0)
    mnt = os.path.join(c.dir, "mnt")
    os.makedirs(mnt)
    # without a key the mount says why, and mounts nothing
    rc, out = run(c, no_key(), "mount", "a", mnt)
    check(rc != 0 and "needs a key of that filesystem" in out, "a mount without a key: %s" % out)
    tc.mount_or_skip(c, "a", mnt, "--key-file", rw, "-o", "coherent,cache=off")
    try:
        with open(os.path.join(mnt, "x"), "wb") as f:
            f.write(os.urandom(200000))
        # the Python binding with the read-only key: reads; a write is EROFS
        if os.path.isdir(os.path.join(os.path.dirname(tc.BIN), "python", "shoal")):
            rc, out = python_reads(c, ro, True)
            check(rc == 0 and "200000" in out and "write: EROFS" in out,
                  "Python with a read-only key: %s" % out)
            rc, out = python_reads(c, None, False)
            check(rc != 0 and "PermissionError" in out, "Python without a key: %s" % out)
        c.shoal("fs", "key", "revoke", "a", open(rw).read().split(".")[1], check_rc=0)
        t0 = time.time()
        while True:
            try:
                with open(os.path.join(mnt, "n%d" % int(time.time() * 1000)), "wb") as f:
                    f.write(b"after")
            except PermissionError:
                break
            check(time.time() - t0 < 5, "the mount still writes 5 s after its key was revoked")
            time.sleep(0.1)
        took = time.time() - t0
        try:
            with open(os.path.join(mnt, "x"), "rb") as f:
                f.read()
            check(False, "the mount still reads after its key was revoked")
        except PermissionError:
            pass
        print("  a mounted client refused %.2f s after its key was revoked" % took)
    finally:
        subprocess.run(["fusermount3", "-u", mnt], capture_output=True)
    # the read-only key mounts, reads, and is refused every change
    tc.mount_or_skip(c, "a", mnt, "--key-file", ro)
    try:
        with open(os.path.join(mnt, "x"), "rb") as f:
            check(len(f.read()) == 200000, "the read-only mount reads short")
        for what, fn in (("create", lambda: open(os.path.join(mnt, "y"), "wb")),
                         ("mkdir", lambda: os.mkdir(os.path.join(mnt, "d"))),
                         ("unlink", lambda: os.unlink(os.path.join(mnt, "x")))):
            try:
                fn()
                check(False, "a read-only mount let %s through" % what)
            except OSError as e:
                check(e.errno == 30, "%s on a read-only mount: %s" % (what, e))
    finally:
        subprocess.run(["fusermount3", "-u", mnt], capture_output=True)


def main():
    return tc.test_main(__doc__, TESTS, {}, 6, "SH_SECURITY_PORT", 28500)


if __name__ == "__main__":
    sys.exit(main())
