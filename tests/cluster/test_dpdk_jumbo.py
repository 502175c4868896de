#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Jumbo frames (docs/protocol.md, "MTUs"): tests/cluster/test_dpdk.py's cluster with
backends 5 and 6 on ports at an MTU of 9000 (`--dpdk-mtu 9000`, net_pcap on a leg of
9000), the other backends' ports at 1,500, and the UDP-mode client's leg at 9000 (its
kernel interface's MTU is what it says; the inter-switch link it crosses carries 9000).
Each pair of processes sends datagrams as large as both its ends take:

- udp_client_writes_and_reads_through_dpdk_backends, dpdk_client_and_udp_client_share_files:
  test_dpdk.py's, over these mixed MTUs;
- jumbo_frames_where_both_ends_take_them: the paths' MTUs, as `shoal cluster processes`
  shows them: 8,972 between the UDP client and backends 5 and 6, 1,472 wherever an end
  takes 1,500 (the other backends, the DPDK client).

In the long tier (net_pcap adds the kernel's packet-socket blocks to every frame's way).
Needs root, network namespaces and an EAL that starts; skipped with the reason elsewhere.
usage: tests/cluster/test_dpdk_jumbo.py BIN_DIR [--only NAME[,NAME]] [--keep]
Prints the closing line "N passed, N failed, N skipped".
"""
import os
import sys

os.environ.setdefault("SH_NETNS_PREFIX", "shj")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_cluster as tc  # noqa: E402
import test_dpdk as td  # noqa: E402
from test_cluster import check  # noqa: E402

NODES = td.NODES
TESTS = []


def test(fn):
    TESTS.append(fn)
    tc.long_tier(fn)
    return fn


class JumboCluster(td.DpdkCluster):
    NAME = "dpdk-jumbo"
    JUMBO = (5, 6)


test(td.udp_client_writes_and_reads_through_dpdk_backends)
test(td.dpdk_client_and_udp_client_share_files)


@test
def jumbo_frames_where_both_ends_take_them(c):
    """Files through every MTU, then each path's MTU: what both its ends take."""
    src = os.path.join(c.dir, "jumbo")
    with open(src, "wb") as f:
        f.write(os.urandom(9 << 20))
    c.shoal("ns", "data", "put", src, "/jumbo", check_rc=0, timeout=120)
    saved = c.client_env
    try:
        # both clients write to every backend (4+2 stripes over 6), then read back
        c.client_env = c.dpdk_env
        c.shoal("ns", "data", "get", "/jumbo", src + ".back", check_rc=0, timeout=120)
        c.shoal("ns", "data", "put", src, "/jumbo2", check_rc=0, timeout=120)
    finally:
        c.client_env = saved
    check(td.digest(src + ".back") == td.digest(src), "/jumbo reads back wrong on DPDK")
    c.shoal("ns", "data", "get", "/jumbo2", src + ".back2", check_rc=0, timeout=120)
    check(td.digest(src + ".back2") == td.digest(src), "/jumbo2 reads back wrong in UDP mode")
    seen = {}
    for p in c.processes()["processes"]:
        if p["role"] == "management":
            continue
        mine = p["interfaces"][0]
        check(mine["mtu"] == (8972 if p["node"] in c.JUMBO else 1472),
              "node %d's port: MTU %s" % (p["node"], mine))
        for peer in p["peers"]:
            for x in peer["paths"]:
                remote = x["remote"].split(":")[0]
                if remote not in ("10.254.1.200", "10.254.1.250") or not peer["connected"]:
                    continue
                jumbo = remote == "10.254.1.200" and p["node"] in c.JUMBO
                check(x["mtu"] == (8972 if jumbo else 1472), "node %d to %s: MTU %d" %
                      (p["node"], remote, x["mtu"]))
                seen[(p["node"], remote)] = x["mtu"]
    check(any(seen.get((n, "10.254.1.200")) == 8972 for n in c.JUMBO) and
          any(seen.get((n, "10.254.1.200")) == 1472 for n in range(1, NODES + 1)) and
          any(seen.get((n, "10.254.1.250")) == 1472 for n in c.JUMBO),
          "not every kind of pair was seen: %s" % seen)


if __name__ == "__main__":
    sys.exit(td.main(__doc__, TESTS, JumboCluster))
