#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Networks as WEKA runs them, on real shoald processes in network namespaces
(scripts/netns): 6 backends and a client, each host with a management leg and two
data legs on two switches joined by an inter-switch link; every backend started with
`--data IP:PORT/sw1,IP/sw2`, the client with SHOAL_DATA_IFACES on both of its legs.

- failover_flaps_and_loss_lose_nothing: a sequential writer and loops of creates run
  while a data link of a backend and then of the client goes down and comes back, the
  client's other link flaps, and a backend's link loses 30 % of its packets: no call
  fails, no create stalls for a second, every byte reads back, and traffic returns to
  a restored link after its hold time;
- labels_keep_traffic_in_a_switch: with both switches up no data packet takes a
  cross-label path (counted per path on every backend); with the only same-label paths
  between two backends down, their traffic crosses;
- processes_and_interfaces_at_run_time: `shoal cluster processes` shows every worker
  (role, mode, transport, interfaces with labels, paths with state, loss and RTT) and
  the client; an interface removed from a node (`shoal node net remove`) is closed by
  it and left by its peers, and added back is used again;
- a_client_with_one_address_works: a client without SHOAL_DATA_IFACES (one socket, the
  kernel's routes) writes and reads, and goes on when its first leg is cut;
- data_network_cut_is_reported_and_read_around: a backend whose data links are down and
  management link up is reported "data-down", not down; files read back around its
  fragments and new ones are written around it, without hanging.

Needs root and network namespaces; skipped with the reason where they cannot be made.
usage: tests/cluster/test_networks.py BIN_DIR [--only NAME[,NAME]] [--keep]
Prints the closing line "N passed, N failed, N skipped".
"""
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_cluster as tc  # noqa: E402
from test_cluster import Fail, Skip, check  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NETNS = os.path.join(ROOT, "scripts", "netns")
NODES = 6
PREFIX = os.environ.get("SH_NETNS_PREFIX", "shn")
STALL_MS = int(os.environ.get("SH_STALL_MS", "1000"))
TESTS = []


def test(fn):
    TESTS.append(fn)
    return fn


def netns(*args, check_rc=True):
    p = subprocess.run([NETNS] + [str(a) for a in args], capture_output=True, text=True,
                       timeout=60)
    if check_rc and p.returncode != 0:
        raise Fail("netns %s: %s" % (" ".join(map(str, args)), p.stderr.strip()))
    return p


def can_make_namespaces():
    if os.geteuid() != 0:
        return "not root"
    for tool in ("ip", "tc", "nft"):
        if shutil.which(tool) is None:
            return "no %s (scripts/deps installs it)" % tool
    # the whole topology once, small: namespaces, veths, bridges, routes, nft (a container
    # may allow some of them and not others)
    probe = PREFIX + "p"
    p = subprocess.run([NETNS, "up", probe, "1"], capture_output=True, text=True, timeout=60)
    if p.returncode == 0:
        p = subprocess.run([NETNS, "loss", probe, "1", "d1", "1"], capture_output=True,
                           text=True, timeout=60)
    subprocess.run([NETNS, "down", probe], capture_output=True, timeout=60)
    if p.returncode != 0:
        return "cannot make the test network here: %s" % (p.stderr.strip() or p.stdout.strip())
    return None


def mgmt(n):
    return "10.254.0.%d:7000" % n


class NetCluster:
    """6 backends in namespaces PREFIX1..6, the client's commands in PREFIXc."""

    def __init__(self, keep, drive_mb=256):
        self.dir = tempfile.mkdtemp(prefix="shoal-netns-",
                                    dir=os.environ.get("SH_TEST_TMP") or None)
        self.keep = keep
        self.drive_mb = drive_mb
        self.procs = {}
        self.client_env = dict(os.environ,
                               SHOAL_DATA_IFACES="10.254.1.200/sw1,10.254.1.250/sw2")
        # one cluster secret for every node, and the admin token the CLI uses
        self.secret = tc.write_secret(self.dir)
        self.client_env["SHOAL_TOKEN_FILE"] = os.path.abspath(os.path.join(self.dir,
                                                                           "admin.token"))
        self.client_env.pop("SHOAL_TOKEN", None)
        self.client_env["SHOAL_KEY_FILE"] = os.path.abspath(os.path.join(self.dir,
                                                                         "client.key"))
        self.client_env.pop("SHOAL_KEY", None)

    def start(self, n):
        d = os.path.join(self.dir, "n%d" % n)
        os.makedirs(d, exist_ok=True)
        log = open(os.path.join(self.dir, "n%d.log" % n), "a")
        cmd = ["ip", "netns", "exec", "%s%d" % (PREFIX, n), os.path.join(tc.BIN, "shoald"),
               "--id", str(n), "--mgmt", mgmt(n),
               ] + self.data_args(n) + [
               "--dir", d, "--log", os.path.join(self.dir, "n%d.log" % n),
               "--secret", self.secret]
        self.procs[n] = subprocess.Popen(cmd, stdout=log, stderr=log, start_new_session=True)

    def shoal(self, *args, check_rc=None, timeout=120, node=1):
        cmd = ["ip", "netns", "exec", PREFIX + "c", os.path.join(tc.BIN, "shoal"), "--addr",
               mgmt(node)] + [str(a) for a in args]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                           env=self.client_env)
        if check_rc is not None and p.returncode != check_rc:
            raise Fail("%s: exit %d, want %d\nstdout: %s\nstderr: %s" %
                       (" ".join(map(str, args)), p.returncode, check_rc, p.stdout, p.stderr))
        return p

    def popen(self, *args):
        cmd = ["ip", "netns", "exec", PREFIX + "c", os.path.join(tc.BIN, "shoal"), "--addr",
               mgmt(1)] + [str(a) for a in args]
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=self.client_env)

    def json(self, *args, node=1):
        return json.loads(self.shoal("--json", *args, check_rc=0, node=node).stdout)

    NAME = "nets"    # the cluster's
    ANNOUNCED = 2    # data interfaces each node announces (up waits for them)

    def data_addr(self, n):
        """Node n's data address, as `node add` gives it."""
        return "10.254.1.%d" % n

    def data_args(self, n):
        """shoald's options for node n's data network."""
        # no port: the management port + 100 (7100)
        return ["--data", "10.254.1.%d/sw1,10.254.1.%d/sw2" % (n, 100 + n)]

    def prepare(self):
        """After the namespaces are made, before the nodes start."""

    def up(self):
        netns("up", PREFIX, NODES)
        self.prepare()
        for n in range(1, NODES + 1):
            self.start(n)
        end = time.time() + 30
        while self.shoal("status").returncode != 0:
            check(time.time() < end, "node 1 never answered")
            time.sleep(0.2)
        self.shoal("cluster", "create", self.NAME, "--buckets", "64", check_rc=0)
        for n in range(2, NODES + 1):
            end = time.time() + 30
            while self.shoal("status", node=n).returncode != 0:
                check(time.time() < end, "node %d never answered" % n)
                time.sleep(0.2)
            self.shoal("node", "add", n, "--mgmt", mgmt(n), "--data",
                       "%s:7100" % self.data_addr(n), check_rc=0)
        os.makedirs(os.path.join(self.dir, "drives"), exist_ok=True)
        for n in range(1, NODES + 1):
            path = os.path.join(self.dir, "drives", "n%d.img" % n)
            with open(path, "wb") as f:
                f.truncate(self.drive_mb << 20)
            self.shoal("drive", "add", n, path, check_rc=0)
        # every node announces its second interface and its first one's label
        end = time.time() + 30
        while self.ANNOUNCED and len(self.json("net", "list")) < self.ANNOUNCED * NODES:
            check(time.time() < end, "interfaces not announced: %s" % self.json("net", "list"))
            time.sleep(0.3)
        self.shoal("fs", "create", "data", "--protection", "4+2", check_rc=0)
        end = time.time() + 60
        while self.shoal("ns", "data", "ls", "/").returncode != 0:
            check(time.time() < end, "filesystem data never answered")
            time.sleep(0.3)

    def logs(self):
        out = []
        for n in range(1, NODES + 1):
            p = os.path.join(self.dir, "n%d.log" % n)
            if os.path.exists(p):
                with open(p, errors="replace") as f:
                    out.append("--- node %d log tail\n%s" % (n, "".join(f.readlines()[-12:])))
        return "\n".join(out)

    def down(self):
        for p in self.procs.values():
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()
        netns("down", PREFIX, check_rc=False)
        if not self.keep:
            shutil.rmtree(self.dir, ignore_errors=True)

    def processes(self):
        return self.json("cluster", "processes")


def stacks(pid):
    """Every thread's stack of a process (gdb, where it is installed)."""
    if shutil.which("gdb") is None:
        return "(no gdb here to show them)"
    p = subprocess.run(["gdb", "-p", str(pid), "-batch", "-ex", "thread apply all bt"],
                       capture_output=True, text=True, timeout=60)
    return p.stdout[-20000:]


def data_pkts(path):
    """Packets a path carried that were not probes or their answers."""
    return path["pkts_sent"] - path["probes_sent"] - path["probes_answered"]


def backend_paths(c):
    """(node, peer id, path) for every path between two backends' workers."""
    out = []
    for p in c.processes()["processes"]:
        if p["role"] == "management":
            continue
        for peer in p["peers"]:
            if peer["kind"] == "node":
                out += [(p["node"], peer["id"], x) for x in peer["paths"]]
    return out


class Load:
    """A sequential writer (16 MiB files, one after another) and loops of creates (2
    threads, 300 files a round) from the client, until stopped."""

    def __init__(self, c):
        self.c = c
        self.stop = threading.Event()
        self.errors = []
        self.files = []
        self.storms = []
        self.timeline = []
        self.data = os.urandom(16 << 20)
        self.src = os.path.join(c.dir, "src")
        with open(self.src, "wb") as f:
            f.write(self.data)
        c.shoal("ns", "data", "mkdir", "/w", check_rc=0)
        c.shoal("ns", "data", "mkdir", "/s", check_rc=0)
        self.threads = [threading.Thread(target=self.guarded, args=(body,))
                        for body in (self.writer, self.creates)]
        for t in self.threads:
            t.start()

    def guarded(self, body):
        """A load thread's body: whatever it raises (a command past its timeout) is an
        error of the run, not a thread that dies unseen."""
        try:
            body()
        except Exception:
            self.errors.append(traceback.format_exc())

    def writer(self):
        i = 0
        while not self.stop.is_set():
            path = "/w/f%d" % i
            t0 = time.time()
            p = self.c.shoal("ns", "data", "put", self.src, path, timeout=300)
            if p.returncode != 0:
                self.errors.append("put %s: %s" % (path, p.stderr.strip()))
            else:
                self.files.append((path, time.time() - t0))
            i += 1

    def creates(self):
        r = 0
        while not self.stop.is_set():
            log = os.path.join(self.c.dir, "storm%d.log" % r)
            if self.c.shoal("ns", "data", "mkdir", "/s/r%d" % r).returncode != 0:
                self.errors.append("mkdir /s/r%d failed" % r)
            p = self.c.popen("ns", "data", "storm", "/s/r%d" % r, 2, 300, log, "r%d-" % r)
            try:
                so, se = p.communicate(timeout=300)
            except subprocess.TimeoutExpired:
                # where it is stuck, then its log
                so, se = stacks(p.pid), ""
                p.kill()
                se = p.communicate()[1]
                self.errors.append("storm %d: no end in 300 s; its threads:\n%s" % (r, so))
            with open(log + ".err", "w") as f:  # the client's log (SH_LOG), kept with --keep
                f.write(se)
            if p.returncode == -signal.SIGKILL:
                pass
            elif p.returncode != 0:
                self.errors.append("storm %d: %s %s" % (r, so, se))
            else:
                self.storms.append((log, json.loads(so)))
            r += 1

    def finish(self):
        self.stop.set()
        for t in self.threads:
            t.join(timeout=400)
        check(not self.errors, "calls failed under the network's faults: %s" % self.errors)
        worst, worst_at = 0, 0.0
        for log, res in self.storms:
            check(res["failed"] == 0 and res["existed"] == 0, "creates failed: %s" % res)
            if res["max_latency_ms"] > worst:
                worst, worst_at = res["max_latency_ms"], res["max_at"]
            miss = json.loads(self.c.shoal("ns", "data", "check", log, check_rc=0).stdout)
            check(miss["missing"] == 0, "acknowledged creates lost: %s" % miss)
        for path, _ in self.files:
            back = os.path.join(self.c.dir, "back")
            self.c.shoal("ns", "data", "get", path, back, check_rc=0, timeout=300)
            with open(back, "rb") as f:
                check(hashlib.sha256(f.read()).digest() == hashlib.sha256(self.data).digest(),
                      "%s reads back wrong" % path)
        print("  %d files of 16 MiB written and read back (slowest %.1f s), %d create rounds, "
              "slowest create %.0f ms" % (len(self.files), max(t for _, t in self.files),
                                          len(self.storms), worst))
        check(self.files and self.storms, "the load did not run")
        check(worst < STALL_MS, "a create stalled %.0f ms (failover must take < %d ms), "
              "starting %s" % (worst, STALL_MS, self.when(worst_at)))

    def fault(self, *args):
        """Applies one fault of the schedule and notes when, to place a stall in it."""
        self.timeline.append((time.time(), " ".join(map(str, args[2:]))))
        netns(*args)

    def when(self, t):
        last = [(at, what) for at, what in self.timeline if at <= t]
        if not last:
            return "before the first fault"
        at, what = last[-1]
        return "%.2f s after `%s` (faults: %s)" % (
            t - at, what, ", ".join("%+.1f %s" % (a - self.timeline[0][0], w)
                                    for a, w in self.timeline))


@test
@tc.long_tier
def failover_flaps_and_loss_lose_nothing(c):
    load = Load(c)
    time.sleep(2)
    # a backend's switch-1 link down and back
    load.fault("link", PREFIX, 3, "d1", "down")
    time.sleep(3)
    down3 = [x for n, peer, x in backend_paths(c) if x["remote"].startswith("10.254.1.3:")]
    check(down3 and all(x["state"] == "down" for x in down3),
          "paths to node 3's switch-1 interface not down: %s" % down3)
    load.fault("link", PREFIX, 3, "d1", "up")
    time.sleep(1)
    # the client's switch-1 link down and back
    load.fault("link", PREFIX, "c", "d1", "down")
    time.sleep(3)
    load.fault("link", PREFIX, "c", "d1", "up")
    time.sleep(1)
    # the client's switch-2 link flaps
    for _ in range(5):
        load.fault("link", PREFIX, "c", "d2", "down")
        time.sleep(0.3)
        load.fault("link", PREFIX, "c", "d2", "up")
        time.sleep(0.3)
    # 30 % loss on a backend's switch-2 link
    load.fault("loss", PREFIX, 2, "d2", 30)
    time.sleep(4)
    load.fault("loss", PREFIX, 2, "d2", 0)
    time.sleep(1)
    load.finish()
    # past the hold time (2 s) the restored paths carry data again
    time.sleep(3)
    before = {(n, x["local"], x["remote"]): data_pkts(x) for n, peer, x in backend_paths(c)}
    c.shoal("ns", "data", "put", load.src, "/w/after", check_rc=0, timeout=300)
    # (a path that missed probes under the load holds again: under the sanitizers, with RTTs
    # of tens of ms, it can take a few holds to answer every probe of one)
    end = time.time() + 2 * STALL_MS / 1000.0
    while True:
        after = [(n, x) for n, peer, x in backend_paths(c)
                 if x["remote"].startswith("10.254.1.3:") and not x["cross"]]
        if all(x["state"] == "up" for _, x in after) or time.time() > end:
            break
        time.sleep(0.5)
    check(all(x["state"] == "up" for _, x in after), "node 3's link not back up: %s" % after)
    check(any(data_pkts(x) > before.get((n, x["local"], x["remote"]), 0) for n, x in after),
          "no traffic back on node 3's restored link")


@test
def labels_keep_traffic_in_a_switch(c):
    src = os.path.join(c.dir, "lab")
    with open(src, "wb") as f:
        f.write(os.urandom(8 << 20))
    # every same-label path healthy again (an earlier test's faults are over)
    end = time.time() + 15
    while any(not x["cross"] and (x["state"] != "up" or x["suspect"])
              for _, _, x in backend_paths(c)):
        check(time.time() < end, "same-label paths not all up")
        time.sleep(0.5)
    key = lambda n, x: (n, x["local"], x["remote"])  # noqa: E731
    before = {key(n, x): data_pkts(x) for n, _, x in backend_paths(c)}
    c.shoal("ns", "data", "put", src, "/lab1", check_rc=0, timeout=300)
    c.shoal("ns", "data", "get", "/lab1", os.path.join(c.dir, "lab1"), check_rc=0)
    paths = [(x, data_pkts(x) - before.get(key(n, x), 0)) for n, _, x in backend_paths(c)]
    same = [(x, d) for x, d in paths if not x["cross"]]
    cross = [(x, d) for x, d in paths if x["cross"]]
    check(same and cross, "no labelled paths: %s" % paths[:3])
    moved = sum(d for _, d in same)
    crossed = sum(d for _, d in cross)
    # Under the sanitizers (SH_STALL_MS raised by scripts/run-tests) six daemons on two
    # cores answer late enough for retransmission timeouts that are not losses (in one
    # such run nearly every path timed out once or twice during the put): a path they
    # make suspect is avoided until a probe answers, and with both same-label paths to a
    # peer suspect at once a retransmission takes a cross-label one. The release build
    # has none of those: nothing may cross.
    allowed = 0 if STALL_MS <= 1000 else moved // 20
    check(crossed <= allowed, "data crossed labels with both switches up (%d packets, %d "
          "allowed): %s" % (crossed, allowed,
                            [(x["local"], x["remote"], d) for x, d in cross if d > 0][:5]))
    check(moved > 0, "nothing on the same-label paths")
    print("  both switches up: %d data packets between backends, all on same-label paths" %
          moved)
    # the busiest pair of backends (a group's leader and a follower): a's switch-1 link and
    # b's switch-2 link down, so that the only path between them crosses the switches
    pairs = {}
    for n, peer, x in backend_paths(c):
        d = data_pkts(x) - before.get(key(n, x), 0)
        pairs[(n, peer >> 8)] = pairs.get((n, peer >> 8), 0) + d
    a, b = max(pairs, key=pairs.get)
    netns("link", PREFIX, a, "d1", "down")
    netns("link", PREFIX, b, "d2", "down")
    try:
        time.sleep(1.5)
        cross_ab = lambda: [x for n, peer, x in backend_paths(c)  # noqa: E731
                            if n == a and peer >> 8 == b and x["cross"]
                            and x["local"].startswith("10.254.1.%d:" % (100 + a))
                            and x["remote"].startswith("10.254.1.%d:" % b)]
        x0 = cross_ab()
        check(x0 and x0[0]["state"] == "up", "the cross path %d -> %d is not up: %s" %
              (a, b, x0))
        c.shoal("ns", "data", "put", src, "/lab2", check_rc=0, timeout=300)
        c.shoal("ns", "data", "get", "/lab2", os.path.join(c.dir, "lab2"), check_rc=0)
        time.sleep(1)
        x1 = cross_ab()
        moved = data_pkts(x1[0]) - data_pkts(x0[0])
        print("  nodes %d and %d with both same-label paths between them down: %d data "
              "packets crossed" % (a, b, moved))
        check(x1[0]["in_use"], "the only healthy path is not in use: %s" % x1[0])
        check(moved > 0, "no traffic crossed between nodes %d and %d" % (a, b))
    finally:
        netns("link", PREFIX, a, "d1", "up")
        netns("link", PREFIX, b, "d2", "up")


@test
def processes_and_interfaces_at_run_time(c):
    # a client connected right now: a create loop while the view is taken
    c.shoal("ns", "data", "mkdir", "/pv", check_rc=0)
    p = c.popen("ns", "data", "storm", "/pv", 1, 400, os.path.join(c.dir, "pv.log"), "pv-")
    time.sleep(0.5)
    pr = c.processes()
    p.communicate(timeout=120)
    workers = [x for x in pr["processes"] if x["role"].startswith("worker")]
    check(len(workers) == NODES, "workers shown: %s" % [x["role"] for x in workers])
    for w in workers:
        for k in ("node", "endpoint", "role", "mode", "mode_detail", "transport", "rdma",
                  "interfaces", "peers"):
            check(k in w, "%s missing from %s" % (k, w["role"]))
        check(w["transport"] == "udp" and w["mode"] in ("cpu", "performance"), str(w)[:200])
        labels = sorted(i["label"] for i in w["interfaces"])
        check(labels == ["sw1", "sw2"], "node %d's interfaces: %s" % (w["node"], w["interfaces"]))
        for peer in w["peers"]:
            for x in peer["paths"]:
                for k in ("state", "loss_pct", "rtt_us", "local_label", "remote_label"):
                    check(k in x, "%s missing from a path" % k)
    check(pr["clients"], "no client shown")
    # the client that ran the storm said what it is: its mode, transport and both legs
    said = [x for x in pr["clients"] if x.get("pid")]
    check(said, "no client said what it is: %s" % pr["clients"])
    check(any(sorted(i["label"] for i in x["interfaces"]) == ["sw1", "sw2"] and
              x["mode"] == "cpu" and x["transport"] == "udp" and x["seen_by"] for x in said),
          "no client with its two labelled legs, its mode and the nodes' paths to it: %s" % said)
    text = c.shoal("cluster", "processes", check_rc=0).stdout
    check("worker 0" in text and "sw1" in text and "client" in text, text[:500])

    # node 6's switch-2 interface removed at run time: closed by node 6, left by its peers
    c.shoal("node", "net", "remove", "10.254.1.106:7100", check_rc=0)
    end = time.time() + 15
    while True:
        w6 = [x for x in c.processes()["processes"] if x["node"] == 6 and x["role"] == "worker 0"]
        paths = [x for _, _, x in backend_paths(c) if x["remote"].startswith("10.254.1.106:")]
        if w6 and len(w6[0]["interfaces"]) == 1 and not paths:
            break
        check(time.time() < end, "interface not gone: %s / %d paths to it" %
              (w6[0]["interfaces"] if w6 else None, len(paths)))
        time.sleep(0.3)
    src = os.path.join(c.dir, "rt")
    with open(src, "wb") as f:
        f.write(os.urandom(4 << 20))
    c.shoal("ns", "data", "put", src, "/rt", check_rc=0, timeout=300)
    # added back: bound again, and used
    c.shoal("node", "net", "add", 6, "10.254.1.106:7100", "--label", "sw2", check_rc=0)
    end = time.time() + 15
    while True:
        paths = [x for _, _, x in backend_paths(c)
                 if x["remote"].startswith("10.254.1.106:") and x["state"] == "up"]
        if paths:
            break
        check(time.time() < end, "interface added back never came up")
        time.sleep(0.3)
    c.shoal("ns", "data", "put", src, "/rt2", check_rc=0, timeout=300)


@test
def data_network_cut_is_reported_and_read_around(c):
    src = os.path.join(c.dir, "dd")
    data = os.urandom(8 << 20)
    with open(src, "wb") as f:
        f.write(data)
    c.shoal("ns", "data", "put", src, "/dd", check_rc=0, timeout=300)
    # node 6's two data links down, its management link up
    netns("link", PREFIX, 6, "d1", "down")
    netns("link", PREFIX, 6, "d2", "down")
    try:
        t0 = time.time()
        while True:
            state = [n["state"] for n in c.json("node", "list") if n["id"] == 6][0]
            if state == "data-down":
                break
            check(state != "down", "node 6 reported down, not its data network")
            check(time.time() - t0 < 15, "node 6 never reported with its data network down")
            time.sleep(0.2)
        print("  node 6 reported 'data-down' %.1f s after its data links went down" %
              (time.time() - t0))
        status = c.shoal("status", check_rc=0).stdout
        check("data network down" in status, status)
        # reads around its fragments, writes around it: no hang
        for path in ("/dd", "/dd2"):
            if path == "/dd2":
                c.shoal("ns", "data", "put", src, path, check_rc=0, timeout=60)
            t1 = time.time()
            back = os.path.join(c.dir, "ddback")
            c.shoal("ns", "data", "get", path, back, check_rc=0, timeout=60)
            with open(back, "rb") as f:
                check(f.read() == data, "%s reads back wrong with node 6 cut" % path)
            check(time.time() - t1 < 20, "reading %s took %.1f s" % (path, time.time() - t1))
    finally:
        netns("link", PREFIX, 6, "d1", "up")
        netns("link", PREFIX, 6, "d2", "up")
    end = time.time() + 15
    while [n["state"] for n in c.json("node", "list") if n["id"] == 6][0] != "up":
        check(time.time() < end, "node 6 not back up")
        time.sleep(0.2)


@test
def a_client_with_one_address_works(c):
    """A client on one socket for every address (no SHOAL_DATA_IFACES: the kernel's routes
    choose the leg), against backends with two interfaces each; its leg cut, the routes
    take the other."""
    env = dict(c.client_env)
    env.pop("SHOAL_DATA_IFACES")
    src = os.path.join(c.dir, "one")
    with open(src, "wb") as f:
        f.write(os.urandom(6 << 20))
    saved, c.client_env = c.client_env, env
    try:
        for path in ("/one1", "/one2"):
            c.shoal("ns", "data", "put", src, path, check_rc=0, timeout=120)
            back = os.path.join(c.dir, "oneback")
            c.shoal("ns", "data", "get", path, back, check_rc=0, timeout=120)
            with open(back, "rb") as f, open(src, "rb") as g:
                check(f.read() == g.read(), "%s reads back wrong" % path)
            if path == "/one1":
                netns("link", PREFIX, "c", "d1", "down")
    finally:
        c.client_env = saved
        netns("link", PREFIX, "c", "d1", "up")


def run_suite(doc, tests, make_cluster, why_not, what="a cluster of %d nodes in namespaces"):
    """Every test of tests (those --only names) on one cluster from make_cluster(keep), or
    each skipped with why_not() where it says why; the closing line and the exit status."""
    a = tc.parse_args(doc)
    if a is None:
        return 2
    only, keep = a[1], a[2]
    why = why_not()
    tests = tc.tier_pick(tests, only)
    if tests is None:
        return 2
    if not tests:
        print("0 passed, 0 failed, 0 skipped")
        return 0
    if why:
        for t in tests:
            print("SKIP %s: %s" % (t.__name__, why))
        print("0 passed, 0 failed, %d skipped" % len(tests))
        return 0
    passed = failed = 0
    c = make_cluster(keep)
    try:
        t0 = time.time()
        c.up()
        print("  %s up in %.1f s" % (what % NODES, time.time() - t0))
        for fn in tests:
            t0 = time.time()
            try:
                fn(c)
                print("PASS %s (%.1fs)" % (fn.__name__, time.time() - t0))
                passed += 1
            except Exception as e:
                print("FAIL %s (%.1fs): %s" % (fn.__name__, time.time() - t0, e))
                if not isinstance(e, Fail):
                    traceback.print_exc()
                print(c.logs())
                failed += 1
            sys.stdout.flush()
    except Exception as e:
        print("FAIL setting up %s: %s" % (what % NODES, e))
        print(c.logs())
        failed = len(tests)
    finally:
        c.down()
    print("%d passed, %d failed, 0 skipped" % (passed, failed))
    return 1 if failed else 0


def main():
    return run_suite(__doc__, TESTS, NetCluster, can_make_namespaces)


if __name__ == "__main__":
    sys.exit(main())
