#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Security on real shoald processes (shoal local up), as tests/cluster/test_cluster.py
(docs/security.md):
- the admin API asks for the cluster's token, over TLS when given a certificate; a node
  whose secret others may read does not start;
- every datagram between backends carries a MAC; forged, altered and replayed ones are
  dropped and counted; the secret is rotated node by node while the cluster serves;
- a client without a key is refused at once (EACCES); an access key opens its file system
  and no other; a read-only one reads and is refused every change (EROFS); a key the
  cluster does not have is not answered (EKEYREJECTED); keys are made into files of mode
  0600 or onto a pipe, never onto a terminal, listed without their text, and their making
  and revoking are in the events with who asked;
- every datagram between a keyed client and the backends carries a MAC under its key (seen
  on the wire), and one altered on the way is dropped and counted;
- a mount and the Python binding take a key file; a revoked key cuts a mounted client off
  within seconds, with EACCES.

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


@test
def admin_api_asks_for_the_cluster_token(c):
    """docs/security.md: the secret `local up` made, 0600, is every node's; the token is
    HMAC-SHA-256(secret, label) on every node; without it the API answers 401 (counted), except
    a client's first contact and the metrics; the CLI says what to set; a node whose secret
    others may read does not start."""
    import hashlib
    import hmac
    import http.client
    import stat
    c.up()
    c.leader()
    with open(os.path.join(c.dir, "cluster.secret")) as f:
        secret = bytes.fromhex(f.read().strip())
    token = hmac.new(secret, b"shoal admin token v1", hashlib.sha256).hexdigest()
    check(c.token() == token, "DIR/admin.token is HMAC-SHA-256(secret, label)")
    # and the cluster's client key, HMAC-SHA-256(HMAC-SHA-256(secret, label), label), on
    # every node and beside the secret
    with open(os.path.join(c.dir, "client.key")) as f:
        check(f.read().strip() == tc.client_key(secret), "DIR/client.key is not the secret's")
    for name in ["cluster.secret", "admin.token", "client.key"] + \
            ["n%d/%s" % (n, f) for n in range(1, c.nodes + 1)
             for f in ("admin.token", "client.key")]:
        p = os.path.join(c.dir, name)
        check(stat.S_IMODE(os.stat(p).st_mode) == 0o600, "%s is 0600" % name)
        with open(p) as f:
            want = tc.client_key(secret) if name.endswith("client.key") else token
            check(name == "cluster.secret" or f.read().strip() == want,
                  "%s holds the cluster's token or client key" % name)

    def ask(method, path, headers=None, node=1):
        h = http.client.HTTPConnection("127.0.0.1", c.port + node - 1, timeout=10)
        h.request(method, path, headers=headers or {})
        r = h.getresponse()
        return r.status, r.getheader("WWW-Authenticate"), r.read().decode()

    e0 = c.status()["epoch"]
    for node in (1, 3):
        st, www, body = ask("GET", "/v1/nodes", node=node)
        check(st == 401 and www and "Bearer" in www and "admin token" in body,
              "no token, node %d: %d %s %s" % (node, st, www, body))
    st, _, _ = ask("POST", "/v1/fs", {"Authorization": "Bearer " + "0" * 64})
    check(st == 401, "a wrong token: %d" % st)
    st, _, _ = ask("DELETE", "/v1/nodes/5", {"Authorization": "Bearer"})
    check(st == 401, "an empty token: %d" % st)
    st, _, body = ask("GET", "/v1/nodes", c.headers())
    check(st == 200 and len(json.loads(body)) == c.nodes, "with the token: %d %s" % (st, body))
    st, _, _ = ask("GET", "/v1/status")
    check(st == 200, "a client's first contact is open: %d" % st)
    st, _, page = ask("GET", "/metrics")
    check(st == 200, "the metrics are open unless --metrics-auth: %d" % st)
    m = re.search(r'^shoal_admin_unauthorized_total\{node="1"\} (\d+)$', page, re.M)
    check(m and int(m.group(1)) == 3, "node 1 counted its 3 refusals: %s" %
          (m.group(0) if m else "no shoal_admin_unauthorized_total"))
    check(c.status()["epoch"] == e0, "nothing changed without the token")
    # every node calls the others with it: usage summed over all of them
    c.shoal("fs", "create", "tok", "--protection", "3+2", check_rc=0)
    check(any(f["name"] == "tok" for f in c.run_json(["fs", "list"], 2)), "fs list via node 2")

    # the CLI without the token (elsewhere than ./run/local), with a wrong one, a malformed one
    env = {k: v for k, v in os.environ.items() if k not in ("SHOAL_TOKEN", "SHOAL_TOKEN_FILE")}
    cli = [os.path.join(tc.BIN, "shoal"), "--addr", c.addr(1), "node", "list"]
    for extra, rc, text in (({}, 1, "SHOAL_TOKEN_FILE"),
                            ({"SHOAL_TOKEN": "ab" * 32}, 1, "not this cluster's"),
                            ({"SHOAL_TOKEN": "abc"}, 2, "not an admin token"),
                            ({"SHOAL_TOKEN": token}, 0, "")):
        p = subprocess.run(cli, capture_output=True, text=True, timeout=30, cwd=c.dir,
                           env=dict(env, **extra))
        check(p.returncode == rc and text in p.stderr and len(p.stderr.splitlines()) <= 1,
              "CLI with %s: exit %d (want %d), %r" % (extra, p.returncode, rc, p.stderr))

    # a node started without one makes its own (0600), and says so; it is not added
    stranger = os.path.join(c.dir, "n6x")
    mgmt6 = "127.0.0.1:%d" % (c.port + 10)
    log6 = open(os.path.join(c.dir, "n6x.log"), "w")
    proc = subprocess.Popen([os.path.join(tc.BIN, "shoald"), "--id", "6", "--mgmt", mgmt6,
                             "--data", "127.0.0.1:%d" % (c.port + 11), "--dir", stranger],
                            stdout=log6, stderr=log6, start_new_session=True)
    try:
        end = time.time() + 20 * tc.SLOW
        while True:
            try:
                h = http.client.HTTPConnection("127.0.0.1", c.port + 10, timeout=2)
                h.request("GET", "/v1/status")
                fp6 = json.loads(h.getresponse().read())["secret_fingerprint"]
                break
            except (OSError, ValueError, KeyError):
                check(time.time() < end, "the sixth node never answered")
                time.sleep(0.1)
        fp1 = c.status()["secret_fingerprint"]
        check(len(fp1) == 16 and len(fp6) == 16 and fp1 != fp6,
              "two secrets, two fingerprints: %s %s" % (fp1, fp6))
        check(all(c.status(n)["secret_fingerprint"] == fp1 for n in range(2, c.nodes + 1)),
              "every member holds the same secret")
        check(stat.S_IMODE(os.stat(os.path.join(stranger, "cluster.secret")).st_mode) == 0o600,
              "the secret a node made itself is 0600")
        p = c.shoal("node", "add", "6", "--mgmt", mgmt6, "--data",
                    "127.0.0.1:%d" % (c.port + 11))
        check(p.returncode == 1 and "another cluster secret" in p.stderr,
              "node add of a node with another secret: exit %d, %r" % (p.returncode, p.stderr))
        check(c.status()["nodes"]["total"] == c.nodes, "and it was not added")
    finally:
        proc.kill()
        proc.wait()
        log6.close()
    with open(os.path.join(c.dir, "n6x.log")) as f:
        check("no cluster secret: a new one is in" in f.read(), "the node said it made one")

    # a node whose secret group or others may read refuses to start, and says why
    loose = os.path.join(c.dir, "loose.secret")
    with open(loose, "w") as f:
        f.write(secret.hex() + "\n")
    os.chmod(loose, 0o644)
    p = subprocess.run([os.path.join(tc.BIN, "shoald"), "--id", "9", "--mgmt",
                        "127.0.0.1:%d" % (c.port + 15), "--data", "127.0.0.1:%d" % (c.port + 16),
                        "--dir", os.path.join(c.dir, "n9"), "--secret", loose],
                       capture_output=True, text=True, timeout=30)
    check(p.returncode == 1 and "chmod 600" in p.stderr,
          "a world-readable secret: exit %d, %r" % (p.returncode, p.stderr))


def mend_crc(pkt, mac):
    """A datagram's crc32c made right again (src/net/wire.h), as a forger who knows the
    format does; the MAC trailer (28 bytes) is outside it."""
    end = len(pkt) - (28 if mac else 0)
    body = bytearray(pkt)
    body[72:76] = b"\0\0\0\0"
    body[72:76] = struct.pack("<I", tc.crc32c(bytes(body[:end])))
    return bytes(body)


def sniff_shoal(ports, seconds, either=False):
    """Shoal datagrams seen on lo for a while between the given UDP ports (either: to or
    from one of them): (sport, dport, payload). Needs root (AF_PACKET); None without."""
    try:
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.ntohs(0x0003))
    except PermissionError:
        return None
    s.bind(("lo", 0))
    s.settimeout(0.1)
    out, end = [], time.time() + seconds
    while time.time() < end:
        try:
            frame, addr = s.recvfrom(70000)
        except socket.timeout:
            continue
        if addr[2] == socket.PACKET_OUTGOING or len(frame) < 42 or frame[12:14] != b"\x08\x00":
            continue
        ihl = (frame[14] & 15) * 4
        if frame[23] != 17:
            continue
        sport, dport = struct.unpack(">HH", frame[14 + ihl:18 + ihl])
        payload = frame[22 + ihl:]
        near = (sport in ports or dport in ports) if either else \
            (sport in ports and dport in ports)
        if near and payload[:4] == b"SHN1":
            out.append((sport, dport, payload))
    s.close()
    return out


@test
def datagrams_between_backends_are_authenticated(c):
    """docs/security.md: every datagram between backends carries a MAC (seen on the wire);
    a HELLO forged without one, captured packets with a bit flipped (crc mended) or a tag of
    their own are dropped and counted, per peer; replayed ones are duplicates; the cluster
    goes on working through all of it."""
    c.up()
    ports = {c.port + n - 1 for n in range(1, c.nodes + 1)}
    seen = sniff_shoal(ports, 1.5)
    if seen is None:
        raise Skip("capturing on lo needs root")
    check(len(seen) >= 10, "only %d datagrams between the nodes in 1.5 s" % len(seen))
    plain = [p for _, _, p in seen if not p[6] & 1]
    check(not plain, "%d of %d datagrams between backends without a MAC" % (len(plain), len(seen)))
    to1 = [p for _, d, p in seen if d == c.port][:5]
    check(len(to1) == 5, "captured %d datagrams to node 1" % len(to1))
    def backends_failed():
        """Node 1's datagrams dropped for their MAC that came as backends' (peers 2..N):
        a client of the test's own commands may have some of its own counted meanwhile."""
        m = tc.parse_metrics(tc.metrics_page(c, 1))
        return sum(tc.total(m, "shoal_peer_auth_failed_total", peer=str(k))
                   for k in range(2, c.nodes + 1))

    before_backends = tc.settled(backends_failed)
    before = tc.parse_metrics(tc.metrics_page(c, 1))
    bad = []
    # a HELLO claiming node 2, without a MAC
    hello = struct.pack("<IBBBBQQQQIIIIIIHHIII", 0x314E4853, 1, 1, 0, 0, 2, 1, 12345, 0, 77,
                        0, 0, 64, 0, 0, 0, 0, 0, 0, 0)
    bad += [mend_crc(hello, False)] * 5
    for p in to1:
        flipped = bytearray(p)
        flipped[56] ^= 4  # the timestamp: still a well-formed packet
        bad.append(mend_crc(bytes(flipped), True))
        bad.append(p[:-16] + bytes(16))  # a tag of its own
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for p in bad:
        s.sendto(p, ("127.0.0.1", c.port))
    for p in to1:  # replays, through the same door
        s.sendto(p, ("127.0.0.1", c.port))
    s.close()
    failed = tc.settled(backends_failed) - before_backends
    check(failed == len(bad), "node 1 dropped %d backends' datagrams for their MAC, %d were bad"
          % (failed, len(bad)))
    after = tc.parse_metrics(tc.metrics_page(c, 1))
    total = tc.total(after, "shoal_net_auth_failed_total") - \
        tc.total(before, "shoal_net_auth_failed_total")
    check(total >= len(bad), "node 1 counted %d datagrams dropped for their MAC in all, %d were "
          "bad" % (total, len(bad)))
    per2 = tc.total(after, "shoal_peer_auth_failed_total", peer="2") - \
        tc.total(before, "shoal_peer_auth_failed_total", peer="2")
    check(per2 >= 5, "the forged HELLOs counted against peer 2: %d" % per2)
    with open(os.path.join(c.dir, "n1.log")) as f:
        log = f.read()
    check("claiming to be 2 has no MAC: dropped" in log, "node 1 did not log the forgery")
    # the cluster still works: a configuration change commits, a file goes and comes back
    c.leader()
    c.shoal("fs", "create", "after", "--protection", "3+2", check_rc=0)
    src = os.path.join(c.dir, "src.bin")
    with open(src, "wb") as f:
        f.write(os.urandom(200000))
    end = time.time() + 15
    while c.shoal("ns", "after", "put", src, "/f", node=2).returncode != 0:
        check(time.time() < end, "the new file system never took a file")
        time.sleep(0.2)
    c.shoal("ns", "after", "get", "/f", src + ".back", check_rc=0, node=3)
    with open(src, "rb") as a, open(src + ".back", "rb") as b:
        check(a.read() == b.read(), "the file read back differs")
    # the audit trail: the change says who asked for it
    texts = [e["text"] for e in c.run_json(["events"], 1)]
    made = [t for t in texts if "after" in t and "created" in t]
    check(made and re.search(r"\(admin API from 127\.0\.0\.1:\d+\)$", made[0]),
          "the filesystem's creation does not say who asked: %s" % made)
    print("  %d datagrams seen between backends, all with a MAC; %d bad ones dropped" %
          (len(seen), failed))


def write_private(path, text):
    fd = os.open(path + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text + "\n")
    os.rename(path + ".tmp", path)


@test
@tc.long_tier
def secret_rotated_node_by_node_while_the_cluster_serves(c):
    """docs/security.md, "Rotating the secret": a new secret goes in beside the old
    (cluster.secret.also), then takes its place, then the old one goes; a node restarted at
    each step, one at a time, while files go in and come out. At the end every node holds
    the new secret alone, the old admin token is refused, and a node started with the old
    secret is not heard."""
    import hashlib
    import hmac
    import http.client
    c.up()
    c.leader()
    c.shoal("fs", "create", "r", "--protection", "3+2", check_rc=0)
    secret = os.path.join(c.dir, "cluster.secret")
    with open(secret) as f:
        old = f.read().strip()
    new = os.urandom(32).hex()
    old_token = c.token()
    src = os.path.join(c.dir, "src.bin")
    with open(src, "wb") as f:
        f.write(os.urandom(100000))

    def works(tag):
        end = time.time() + 20
        while c.shoal("ns", "r", "put", src, "/" + tag, node=2).returncode != 0:
            check(time.time() < end, "%s: the file system takes no file" % tag)
            time.sleep(0.2)
        c.shoal("ns", "r", "get", "/" + tag, src + ".back", check_rc=0, node=4)
        with open(src, "rb") as a, open(src + ".back", "rb") as b:
            check(a.read() == b.read(), "%s: the file read back differs" % tag)

    def roll(tag):
        for n in range(1, c.nodes + 1):
            c.kill(n)
            c.up()
            if n == 3:
                works("%s-%d" % (tag, n))  # half the nodes on each side of the step
        works(tag)

    works("before")
    write_private(secret + ".also", new)  # 1. accepted everywhere, used nowhere
    roll("accept")
    fps = [c.status(n) for n in range(1, c.nodes + 1)]
    check(all(s["secret_also_fingerprint"] for s in fps), "a node does not say it rotates")
    write_private(secret + ".also", old)  # 2. the new one seals, the old is accepted
    write_private(secret, new)
    roll("seal")
    check(c.token() != old_token, "`local up` wrote the new secret's token")
    os.unlink(secret + ".also")  # 3. the old one goes
    roll("done")
    fps = [c.status(n) for n in range(1, c.nodes + 1)]
    check(all(s["secret_also_fingerprint"] == "" for s in fps), "a node still rotates")
    check(len({s["secret_fingerprint"] for s in fps}) == 1, "the nodes hold different secrets")
    check(fps[0]["secret_fingerprint"] != hmac.new(bytes.fromhex(old),
                                                   b"shoal secret fingerprint v1",
                                                   hashlib.sha256).hexdigest()[:16],
          "the old secret is still the nodes'")
    h = http.client.HTTPConnection("127.0.0.1", c.port, timeout=10)
    h.request("GET", "/v1/nodes", headers={"Authorization": "Bearer " + old_token})
    check(h.getresponse().status == 401, "the old token is still accepted")
    # a node started with the old secret alone is not heard
    stale = os.path.join(c.dir, "stale.secret")
    write_private(stale, old)
    with open("/proc/%d/cmdline" % c.pids()[4]) as f:
        cmd = f.read().split("\0")[:-1]
    cmd[0] = os.path.join(tc.BIN, "shoald")
    cmd[cmd.index("--secret") + 1] = stale
    before = tc.parse_metrics(tc.metrics_page(c, 1))
    c.kill(5)
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        c.wait_state(5, "down", 1, 15)
        time.sleep(1.5)
        after = tc.parse_metrics(tc.metrics_page(c, 1))
        failed = tc.total(after, "shoal_peer_auth_failed_total", peer="5") - \
            tc.total(before, "shoal_peer_auth_failed_total", peer="5")
        check(failed > 0, "node 1 counted nothing against node 5 holding the old secret")
        check(c.node_state(5, 1) == "down", "node 5 with the old secret was heard")
    finally:
        proc.kill()
        proc.wait()
    c.up()
    works("after")


@test
def admin_api_over_tls(c):
    """docs/security.md: nodes with a certificate (--tls-cert/--tls-key; here $SHOAL_TLS_CERT
    and $SHOAL_TLS_KEY for the nodes `local up` starts) serve the admin API over TLS only; the
    CLI, the nodes' calls to one another and the client library's first contact trust
    $SHOAL_CA_FILE; plain HTTP gets no answer; an untrusted certificate is refused, said so."""
    import http.client
    import ssl
    os.makedirs(c.dir, exist_ok=True)
    cert, key = os.path.join(c.dir, "tls.pem"), os.path.join(c.dir, "tls.key")
    other, okey = os.path.join(c.dir, "other.pem"), os.path.join(c.dir, "other.key")
    for crt, k in ((cert, key), (other, okey)):
        p = subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                            "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", k, "-out", crt,
                            "-days", "2", "-subj", "/CN=shoal-test", "-addext",
                            "subjectAltName=IP:127.0.0.1"], capture_output=True, text=True)
        check(p.returncode == 0, "openssl req: %s" % p.stderr)
        os.chmod(k, 0o600)
    c.env = {"SHOAL_TLS_CERT": cert, "SHOAL_TLS_KEY": key, "SHOAL_CA_FILE": cert}
    os.environ["SHOAL_CA_FILE"] = cert
    try:
        c.up()
        c.leader()
        c.shoal("fs", "create", "t", "--protection", "3+2", check_rc=0)
        src = os.path.join(c.dir, "src.bin")
        with open(src, "wb") as f:
            f.write(os.urandom(300000))
        c.shoal("ns", "t", "put", src, "/f", check_rc=0, node=3)
        c.shoal("ns", "t", "get", "/f", src + ".back", check_rc=0, node=2)
        with open(src, "rb") as a, open(src + ".back", "rb") as b:
            check(a.read() == b.read(), "the library's bytes over a TLS first contact")
        fs = [x for x in c.run_json(["fs", "list"], 4) if x["name"] == "t"][0]
        check(fs.get("usage_nodes") == c.nodes, "every node's usage over TLS: %s" % fs)
        r = c.run_json(["rebuild", "status"], 5)
        check(r.get("nodes_answered") == c.nodes, "every node's heal over TLS: %s" % r)

        ctx = ssl.create_default_context(cafile=cert)
        h = http.client.HTTPSConnection("127.0.0.1", c.port, timeout=10, context=ctx)
        h.request("GET", "/v1/nodes", headers=c.headers())
        check(h.getresponse().status == 200, "HTTPS with the token")
        # the client library's traffic is all a client may send (rpc_ops.h): nothing refused
        for n in range(1, c.nodes + 1):
            h = http.client.HTTPSConnection("127.0.0.1", c.port + n - 1, timeout=10,
                                            context=ctx)
            h.request("GET", "/metrics")
            page = h.getresponse().read().decode()
            m = re.search(r'^shoal_net_refused_total\{node="%d"\} (\d+)$' % n, page, re.M)
            check(m and m.group(1) == "0", "node %d refused a client's request: %s" %
                  (n, m.group(0) if m else "no shoal_net_refused_total"))
        try:
            h = http.client.HTTPConnection("127.0.0.1", c.port, timeout=10)
            h.request("GET", "/v1/status")
            st = h.getresponse().status
        except (OSError, http.client.HTTPException):
            st = None
        check(st is None or st >= 400, "plain HTTP to the TLS port: %s" % st)

        cli = [os.path.join(tc.BIN, "shoal"), "--addr", c.addr(1), "node", "list"]
        env = {k: v for k, v in os.environ.items() if k != "SHOAL_CA_FILE"}
        for extra, text in (({}, "set $SHOAL_CA_FILE"),
                            ({"SHOAL_CA_FILE": other}, "not one $SHOAL_CA_FILE trusts")):
            p = subprocess.run(cli, capture_output=True, text=True, timeout=30,
                               env=dict(env, **extra))
            check(p.returncode == 1 and text in p.stderr and len(p.stderr.splitlines()) == 1,
                  "CLI with %s: exit %d, %r" % (extra, p.returncode, p.stderr))
    finally:
        os.environ.pop("SHOAL_CA_FILE", None)


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
def a_clones_key_opens_the_clone_alone(c):
    """A writable clone lives in its origin's metadata groups, but its own key opens it, and
    neither the clone's key opens the origin nor the origin's the clone; a writable snapshot
    opens with its filesystem's key."""
    c.up()
    c.leader()
    make_fs(c, "orig")
    src = random_file(c, "src.bin", 100000)
    c.shoal("ns", "orig", "put", src, "/x", check_rc=0)
    c.shoal("fs", "snapshot", "create", "orig", "s1", check_rc=0)
    c.shoal("fs", "clone", "orig@s1", "cl", check_rc=0, timeout=120)
    ck = os.path.join(c.dir, "clone.key")
    ok = os.path.join(c.dir, "orig.key")
    c.shoal("fs", "key", "create", "cl", "--read-write", "--out", ck, check_rc=0)
    c.shoal("fs", "key", "create", "orig", "--read-write", "--out", ok, check_rc=0)
    env_c = dict(no_key(), SHOAL_KEY_FILE=ck)
    env_o = dict(no_key(), SHOAL_KEY_FILE=ok)
    back = src + ".back"
    rc, out = run(c, env_c, "ns", "cl", "get", "/x", back)
    check(rc == 0 and same_file(src, back), "the clone's key reads the clone: %s" % out)
    rc, out = run(c, env_c, "ns", "cl", "put", src, "/y")
    check(rc == 0, "the clone's key writes the clone: %s" % out)
    rc, out = run(c, env_c, "ns", "orig", "stat", "/x")
    check(rc != 0 and "EACCES" in out, "the clone's key opened its origin: %s" % out)
    rc, out = run(c, env_o, "ns", "cl", "stat", "/x")
    check(rc != 0 and "EACCES" in out, "the origin's key opened its clone: %s" % out)
    rc, out = run(c, env_o, "ns", "orig", "stat", "/y")
    check(rc != 0 and "EACCES" not in out, "the origin sees the clone's file: %s" % out)
    # a writable snapshot is its filesystem's, as every snapshot is: the origin's key opens
    # it (and writes it), the other clone's does not
    c.shoal("fs", "snapshot", "create", "orig", "w", "--writable", check_rc=0, timeout=120)
    rc, out = run(c, env_o, "ns", "orig@w", "put", src, "/z")
    check(rc == 0, "the origin's key writes its writable snapshot: %s" % out)
    rc, out = run(c, env_o, "ns", "orig@w", "get", "/x", back + "w")
    check(rc == 0 and same_file(src, back + "w"), "the writable snapshot reads: %s" % out)
    rc, out = run(c, env_c, "ns", "orig@w", "stat", "/x")
    check(rc != 0 and "EACCES" in out, "the clone's key opened a writable snapshot: %s" % out)


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
    sniffer = threading.Thread(target=lambda: seen.append(sniff_shoal(ports, 4.0, True)))
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
        s.sendto(mend_crc(bytes(flipped), True), ("127.0.0.1", d))
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
        # a file held open, its stripes' places known to the handle: once the key is
        # revoked its reads go to the targets alone, which refuse them (EACCES, not EIO)
        held = open(os.path.join(mnt, "x"), "rb", buffering=0)
        check(len(held.read(65536)) == 65536, "the held file reads short")
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
        try:
            held.seek(0)
            held.read()
            check(False, "a file held open still reads after its key was revoked")
        except PermissionError:
            pass
        finally:
            held.close()
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


# the tests of the admin API, the backends' datagrams and the secret on 5 nodes
SIZES = {"admin_api_asks_for_the_cluster_token": 5, "admin_api_over_tls": 5,
         "datagrams_between_backends_are_authenticated": 5,
         "secret_rotated_node_by_node_while_the_cluster_serves": 5}


def main():
    return tc.test_main(__doc__, TESTS, SIZES, 6, "SH_SECURITY_PORT", 28500)


if __name__ == "__main__":
    sys.exit(main())
