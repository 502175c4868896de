/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The DPDK transport (issue #28; docs/dpdk.md): Shoal's datagrams in
 * Ethernet/IPv4/UDP frames that the process builds and parses itself
 * (net/frame.h), on a port it owns, with its own ARP table (net/arp.h),
 * never through the kernel's stack. The same wire protocol as kernel UDP,
 * so DPDK and UDP-mode processes talk to each other.
 *
 * A process starts the EAL once (sh_dpdk_init, from shoald's --dpdk
 * "EAL ARGS" or a client's option), which registers the transport "dpdk"
 * (net/transport.h). An interface then names it and its device
 * (net_iface.transport "dpdk", .dev "net_memif0" or a PCI address); its
 * address is the port's own (the kernel does not hold it).
 *
 * Ports and queues: a port is configured once, with as many RX/TX queue
 * pairs as the process has I/O workers (sh_dpdk_init's queues), and each
 * transport opened on it takes a pair of its own: the VF-per-core model of
 * a NIC with SR-IOV. A frame that lands on another worker's queue (one
 * port without flow rules: RSS spreads by hash, not by our UDP port) is
 * handed to the right one through a ring; ARP is answered by whichever
 * queue hears it, the table shared under a lock.
 *
 * The loop reads its queue as an env poller (env.h): every turn in
 * performance-optimized mode (ENV_REAL_POLL, a dedicated core), with
 * adaptive sleeps in CPU-optimized mode (ENV_REAL_EVENT).
 *
 * Without DPDK in the build (no libdpdk at build time), sh_dpdk_init says
 * -EPROTONOSUPPORT and nothing else changes.
 */
#ifndef SH_DPDK_DPDK_H
#define SH_DPDK_DPDK_H

#include <stdbool.h>
#include <stdint.h>

#include "../net/arp.h"

#define SH_DPDK_QUEUES_MAX 16

/*
 * Start the EAL with args (split at spaces, as a shell would without
 * quotes: "--no-huge -m 64 --no-pci --vdev=net_memif0,role=server"),
 * each port to be opened with `queues` RX/TX pairs (1..SH_DPDK_QUEUES_MAX).
 * The calling thread keeps its CPU affinity (the EAL pins it otherwise).
 * Once per process: -EALREADY after a first call. -EINVAL, -EPROTONOSUPPORT
 * (built without DPDK), or the EAL's error (logged).
 */
int sh_dpdk_init(const char *args, unsigned queues);
bool sh_dpdk_ready(void);

/*
 * The MTU every port is set to when it opens (jumbo frames: 9000; at most
 * SH_DPDK_MTU_MAX), or 0 (the default) for the port's own (1500 on most
 * NICs and vdevs). Call before the first port opens; a port that cannot
 * take it does not open (its error logged). The peers learn each
 * interface's MTU from the packets that open a session and probe its
 * paths (docs/protocol.md, "MTUs"). -EINVAL: below SH_DPDK_MTU_MIN or
 * above the maximum.
 */
#define SH_DPDK_MTU_MIN 576
#define SH_DPDK_MTU_MAX 9216
int sh_dpdk_set_mtu(unsigned mtu);

/*
 * What a port did (sh_dpdk_port_stats), all its queues together:
 *   rx_frames, tx_frames
 *   rx_bad          malformed (sh_frame_parse)
 *   rx_other        not ours: another address, protocol or port
 *   rx_handoff      landed on another worker's queue and passed on
 *   tx_unresolved   dropped while ARP resolved the peer
 *   tx_unreachable  dropped: the peer does not answer ARP
 *   tx_full         dropped: the port's TX queue stayed full
 *   arp_in, arp_out ARP frames heard and sent
 *   tx_zc_bytes     data bytes sent in place, from the sender's buffers
 */
#define DPDK_STATS_FIELDS(X) \
	X(rx_frames)         \
	X(tx_frames)         \
	X(rx_bad)            \
	X(rx_other)          \
	X(rx_handoff)        \
	X(tx_unresolved)     \
	X(tx_unreachable)    \
	X(tx_full)           \
	X(arp_in)            \
	X(arp_out)           \
	X(tx_zc_bytes)
struct sh_dpdk_stats {
#define X(f) uint64_t f;
	DPDK_STATS_FIELDS(X)
#undef X
	bool rx_intr; /* its queues wake sleeping loops (else: sleep-polling) */
};

/*
 * The port dev (as a transport names it) and its ARP table: -ENODEV
 * (no such port open in this process). entries: up to max (sh_arp_list).
 */
int sh_dpdk_port_stats(const char *dev, struct sh_dpdk_stats *st, struct sh_arp_entry *entries,
		       unsigned max, unsigned *n);

#endif /* SH_DPDK_DPDK_H */
