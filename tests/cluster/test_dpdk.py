#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Backends on the DPDK transport (docs/dpdk.md), in network namespaces (scripts/netns):
6 backends whose data interface is a DPDK port (net_af_packet on the host's second data
leg, which the kernel holds no address on: the backend's own ARP table answers for it),
two workers each (two queue pairs of the port), and a client in UDP mode (kernel
sockets) and a DPDK client on the same switches: one cluster, one wire protocol.

- udp_client_writes_and_reads_through_dpdk_backends: files of 1 byte to 24 MiB written
  and read back byte for byte, a directory listed and files removed, every write's
  stripes on backends that only speak DPDK; `shoal cluster processes` says so;
- dpdk_client_and_udp_client_share_files: a client on DPDK (SHOAL_DPDK, its data
  interface IP/LABEL@dpdk:DEV) and the UDP-mode one each read what the other wrote;
- dpdk_backends_resolve_and_follow_a_moved_address: the client's address moves to
  another MAC (the leg's MAC changed, a gratuitous ARP sent, as a failover would) and
  the backends follow it: reads go on.

tests/cluster/test_dpdk_jumbo.py runs the first two on jumbo frames.

Needs root, network namespaces and an EAL that starts (DPDK in the build); skipped with
the reason where any is missing.
usage: tests/cluster/test_dpdk.py BIN_DIR [--only NAME[,NAME]] [--keep]
Prints the closing line "N passed, N failed, N skipped".
"""
import hashlib
import os
import re
import shutil
import subprocess
import sys
import time

os.environ.setdefault("SH_NETNS_PREFIX", "shd")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_cluster as tc  # noqa: E402
import test_networks as tn  # noqa: E402
from test_cluster import Fail, check  # noqa: E402

PREFIX = tn.PREFIX
NODES = tn.NODES
TESTS = []


def test(fn):
    TESTS.append(fn)
    return fn


def dpdk_addr(n):
    return "10.254.1.%d" % (100 + n)


class DpdkCluster(tn.NetCluster):
    """NetCluster's hosts, each backend's data on DPDK over its d2 leg."""

    NAME = "dpdk"
    ANNOUNCED = 0  # one data interface each, named by `node add`
    # backends on jumbo frames (test_dpdk_jumbo.py): their d2 legs at an MTU of 9000, their
    # ports too (--dpdk-mtu), through net_pcap (DPDK 22.11's net_af_packet takes 1,500
    # bytes at most), one worker each (net_pcap has one queue pair)
    JUMBO = ()

    def data_addr(self, n):
        return dpdk_addr(n)

    def data_args(self, n):
        eal = "--no-huge -m 256 --no-pci --no-shconf --no-telemetry -l 0 --log-level=warning "
        if n in self.JUMBO:
            return ["--data", "%s:7100/sw2@dpdk:net_pcap0" % dpdk_addr(n), "--dpdk",
                    # phy_mac: the leg's own MAC (net_pcap's default, 02:70:63:61:70:00, would
                    # be both jumbo backends', and the switch would send one's frames to the other)
                    eal + "--vdev=net_pcap0,iface=eth-d2,phy_mac=1", "--dpdk-mtu", "9000",
                    "--workers", "1"]
        return ["--data", "%s:7100/sw2@dpdk:net_af_packet0" % dpdk_addr(n), "--dpdk",
                eal + "--vdev=net_af_packet0,iface=eth-d2,qpairs=2", "--workers", "2"]

    def prepare(self):
        for n in list(range(1, NODES + 1)) + ["c"]:
            # the DPDK port owns the leg's address: the kernel must not answer for it
            tn.netns("exec", PREFIX, n, "ip", "addr", "flush", "dev", "eth-d2")
            if n in self.JUMBO:
                tn.netns("mtu", PREFIX, n, "d2", 9000)
        # the UDP-mode client on its first leg; a DPDK client on its second (SHOAL_DPDK)
        self.client_env["SHOAL_DATA_IFACES"] = "10.254.1.200/sw1"
        self.dpdk_env = dict(self.client_env, SHOAL_DATA_IFACES=(
            "10.254.1.250/sw2@dpdk:net_af_packet0"), SHOAL_DPDK=(
            "--no-huge -m 256 --no-pci --no-shconf --no-telemetry -l 0 --log-level=warning "
            "--vdev=net_af_packet0,iface=eth-d2"))
        if self.JUMBO:
            # the UDP-mode client's leg on jumbo frames, and the inter-switch link it crosses
            # to the DPDK legs: its kernel interface's MTU is what it says
            tn.netns("mtu", PREFIX, "c", "d1", 9000)
            tn.netns("mtu", PREFIX, "isl", "-", 9000)
        for leg in ("eth-d1", "eth-d2"):
            # frames the kernel sends over a veth leave their UDP checksum to an offload a
            # veth never does: a DPDK port checks every checksum, so have them computed
            tn.netns("exec", PREFIX, "c", "ethtool", "-K", leg, "tx", "off")


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


@test
def udp_client_writes_and_reads_through_dpdk_backends(c):
    """Every size through the DPDK backends from a kernel-UDP client, back byte for byte."""
    for size in (1, 4095, 65537, 1 << 20, 24 << 20):
        src = os.path.join(c.dir, "src%d" % size)
        with open(src, "wb") as f:
            f.write(os.urandom(size))
        c.shoal("ns", "data", "put", src, "/f%d" % size, check_rc=0, timeout=180)
        back = src + ".back"
        c.shoal("ns", "data", "get", "/f%d" % size, back, check_rc=0, timeout=180)
        check(digest(back) == digest(src), "/f%d reads back wrong" % size)
    names = c.shoal("ns", "data", "ls", "/", check_rc=0).stdout
    for size in (1, 4095, 65537):
        check("f%d" % size in names, "f%d not listed: %s" % (size, names))
        c.shoal("ns", "data", "rm", "/f%d" % size, check_rc=0)
    names = c.shoal("ns", "data", "ls", "/", check_rc=0).stdout
    check("f4095" not in names, "a removed file is listed: %s" % names)
    procs = c.processes()
    workers = [p for p in procs.get("processes", procs) if isinstance(p, dict) and
               p.get("role", "").startswith("worker")]
    check(len(workers) == 2 * NODES - len(c.JUMBO), "workers: %s" % workers)
    for w in workers:
        check(w.get("transport") == "dpdk", "a worker not on DPDK: %s" % w)
        d = w["interfaces"][0].get("dpdk")
        check(d is not None and d["tx_frames"] > 0 and d["rx_frames"] > 0,
              "a worker's port has not carried traffic: %s" % w["interfaces"])
        # the node's own ARP table knows the client's address (never the kernel's table)
        check(any(e["ip"] == "10.254.1.200" and e["resolved"] for e in d["arp"]),
              "the client is not in a port's ARP table: %s" % d["arp"])
    text = c.shoal("cluster", "processes", check_rc=0).stdout
    check("DPDK port net_" in text and "arp 10.254.1.200" in text,
          "cluster processes shows no DPDK port and ARP table:\n%s" % text)


@test
def dpdk_client_and_udp_client_share_files(c):
    """A client on DPDK (its own port and ARP table) and one in UDP mode, one cluster: each
    reads what the other wrote."""
    saved = c.client_env
    a = os.path.join(c.dir, "by_udp")
    b = os.path.join(c.dir, "by_dpdk")
    with open(a, "wb") as f:
        f.write(os.urandom(5 << 20))
    with open(b, "wb") as f:
        f.write(os.urandom((3 << 20) + 17))
    try:
        c.shoal("ns", "data", "put", a, "/by_udp", check_rc=0, timeout=120)
        c.client_env = c.dpdk_env
        c.shoal("ns", "data", "get", "/by_udp", a + ".back", check_rc=0, timeout=120)
        c.shoal("ns", "data", "put", b, "/by_dpdk", check_rc=0, timeout=120)
        c.shoal("ns", "data", "mkdir", "/made_by_dpdk", check_rc=0)
    finally:
        c.client_env = saved
    check(digest(a + ".back") == digest(a), "the DPDK client read /by_udp wrong")
    c.shoal("ns", "data", "get", "/by_dpdk", b + ".back", check_rc=0, timeout=120)
    check(digest(b + ".back") == digest(b), "the UDP client read /by_dpdk wrong")
    names = c.shoal("ns", "data", "ls", "/", check_rc=0).stdout
    check("made_by_dpdk" in names, "the DPDK client's directory is missing: %s" % names)


@test
def dpdk_backends_resolve_and_follow_a_moved_address(c):
    """The client's leg gets another MAC and announces it (a gratuitous ARP, as an address
    that moved to another port would): the backends' own ARP tables follow it."""
    src = os.path.join(c.dir, "moved")
    with open(src, "wb") as f:
        f.write(os.urandom(3 << 20))
    c.shoal("ns", "data", "put", src, "/moved", check_rc=0, timeout=120)
    for leg, addr in (("eth-d1", "10.254.1.200"), ("eth-d2", "10.254.1.250")):
        tn.netns("exec", PREFIX, "c", "ip", "link", "set", leg, "address",
                 "02:5e:%02x:00:00:%02x" % (int(time.time()) & 0xff, 1 if leg == "eth-d1" else 2))
        # what an address that moved announces (arping -U), sent from a raw socket here
        tn.netns("exec", PREFIX, "c", sys.executable, "-c", GARP, leg, addr)
    back = src + ".back"
    c.shoal("ns", "data", "get", "/moved", back, check_rc=0, timeout=120)
    check(digest(back) == digest(src), "/moved reads back wrong after the move")


# a gratuitous ARP request for an address from the leg's own MAC (python, no arping needed)
GARP = r"""
import socket, struct, sys
dev, ip = sys.argv[1], socket.inet_aton(sys.argv[2])
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((dev, 0))
mac = s.getsockname()[4]
frame = b"\xff" * 6 + mac + b"\x08\x06" + struct.pack("!HHBBH", 1, 0x0800, 6, 4, 1) + \
    mac + ip + b"\x00" * 6 + ip
s.send(frame + b"\x00" * (60 - len(frame)))
"""


def eal_starts():
    """Why DPDK cannot run here, or None: the unit runner's memif test answers it."""
    if os.geteuid() != 0:
        return "not root"
    if shutil.which("ethtool") is None:
        return "no ethtool (scripts/deps installs it)"
    p = subprocess.run([os.path.join(os.path.dirname(tc.BIN), "tests", "unit_dpdk")],
                       capture_output=True, text=True, timeout=120)
    if not re.search(r"^[1-9][0-9]* passed, 0 failed, 0 skipped$", p.stdout, re.M):
        return "the EAL does not start here: %s" % (p.stdout.strip().splitlines() or ["?"])[-1]
    return None


def main(doc=__doc__, tests=TESTS, cluster=DpdkCluster):
    return tn.run_suite(doc, tests, cluster,
                        lambda: tn.can_make_namespaces() or eal_starts(),
                        "a cluster of %d DPDK backends")


if __name__ == "__main__":
    sys.exit(main())
