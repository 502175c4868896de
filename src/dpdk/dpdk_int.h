/* SPDX-License-Identifier: Apache-2.0 */
/* Private to the DPDK module: a port as dpdk.c sets it up and transport_dpdk.c uses it. */
#ifndef SH_DPDK_DPDK_INT_H
#define SH_DPDK_DPDK_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "../base/base.h"
#include "../net/net.h"
#include "../net/transport.h"
#include "dpdk.h"

#ifdef SH_HAVE_DPDK
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_ring.h>
#endif

#define DPDK_PORTS_MAX 8
#define DPDK_BURST     32

struct dtp;

#ifdef SH_HAVE_DPDK
struct dport {
	char name[NET_DEV_MAX];
	uint16_t id;
	unsigned nq;
	uint16_t mtu;
	uint8_t mac[6];
	bool tx_udp_csum; /* the port computes UDP checksums */
	bool tx_zc;	  /* it sends chained mbufs, and IOVAs are addresses: zero copy */
	bool rx_intr;	  /* every queue has an RX interrupt fd */
	struct rte_mempool *pool;
	/* under lock: the address (the first transport's), the ARP table, the queues' owners */
	pthread_mutex_t lock;
	uint32_t ip; /* host order; 0 until a transport opens */
	struct sh_arp *arp;
	struct {
		struct dtp *owner;
		_Atomic uint16_t udp_port; /* read without the lock by the other queues */
		struct rte_ring *ring;	   /* frames for this queue that landed on another */
		int intr_fd;		   /* readable on RX while enabled (rx_intr) */
	} q[SH_DPDK_QUEUES_MAX];
	struct {
#define X(f) _Atomic uint64_t f;
		DPDK_STATS_FIELDS(X)
#undef X
	} st;
};

/* The port dev, configured and started on first use. -EPROTONOSUPPORT (no EAL), -ENODEV. */
int dport_get(const char *dev, struct dport **out);
#endif

extern const struct net_transport_ops net_transport_dpdk;

#endif /* SH_DPDK_DPDK_INT_H */
