// SPDX-License-Identifier: Apache-2.0
/*
 * The EAL and the ports of the DPDK transport (dpdk.h): started once per
 * process, a port configured with its queue pairs, mbuf pool, hand-off
 * rings and ARP table on first use. The transport itself is in
 * transport_dpdk.c.
 */
#define _GNU_SOURCE /* pthread_{get,set}affinity_np */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dpdk_int.h"

SH_LOG_FACILITY("dpdk");

#ifdef SH_HAVE_DPDK

#include <rte_bus.h>
#include <rte_dev.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_log.h>

#define ARGS_MAX 64
#define RXD	 1024
#define TXD	 1024
#define RING_LEN 1024

static struct {
	pthread_mutex_t lock;
	bool ready;
	unsigned queues;
	unsigned mtu; /* sh_dpdk_set_mtu; 0: each port's own */
	struct dport *ports[DPDK_PORTS_MAX];
	unsigned nports;
} G = { .lock = PTHREAD_MUTEX_INITIALIZER };

bool
sh_dpdk_ready(void)
{
	pthread_mutex_lock(&G.lock);
	bool r = G.ready;
	pthread_mutex_unlock(&G.lock);
	return r;
}

int
sh_dpdk_set_mtu(unsigned mtu)
{
	if (mtu != 0 && (mtu < SH_DPDK_MTU_MIN || mtu > SH_DPDK_MTU_MAX))
		return -EINVAL;
	pthread_mutex_lock(&G.lock);
	G.mtu = mtu;
	pthread_mutex_unlock(&G.lock);
	return 0;
}

int
sh_dpdk_init(const char *args, unsigned queues)
{
	char *copy = NULL, *argv[ARGS_MAX + 1], *save = NULL;
	int argc = 0, rc;
	cpu_set_t cpus;
	bool have_cpus;

	if (args == NULL || queues == 0 || queues > SH_DPDK_QUEUES_MAX)
		return -EINVAL;
	pthread_mutex_lock(&G.lock);
	if (G.ready) {
		rc = -EALREADY;
		goto out;
	}
	copy = sh_strdup(args);
	if (copy == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	argv[argc++] = (char *)"shoal";
	for (char *a = strtok_r(copy, " \t", &save); a != NULL; a = strtok_r(NULL, " \t", &save)) {
		if (argc == ARGS_MAX) {
			rc = -E2BIG;
			goto out;
		}
		argv[argc++] = a;
	}
	argv[argc] = NULL;
	/* the EAL pins the calling thread to its main lcore: the workers it starts must not inherit
	 * that */
	have_cpus = pthread_getaffinity_np(pthread_self(), sizeof(cpus), &cpus) == 0;
	rc = rte_eal_init(argc, argv);
	if (have_cpus)
		pthread_setaffinity_np(pthread_self(), sizeof(cpus), &cpus);
	if (rc < 0) {
		rc = rte_errno > 0 ? -rte_errno : -EIO;
		sh_log_error("DPDK: the EAL did not start (%s): %s", args, rte_strerror(-rc));
		goto out;
	}
	rc = net_transport_register(&net_transport_dpdk);
	if (rc < 0)
		goto out;
	G.queues = queues;
	G.ready = true;
	sh_log_info("DPDK: EAL started (%s), %u ports, %u queue pairs a port", args,
		    rte_eth_dev_count_avail(), queues);
	rc = 0;
out:
	pthread_mutex_unlock(&G.lock);
	sh_free(copy);
	return rc;
}

/* SH_DPDK_ZERO_COPY=0 in the environment: every datagram copied (a benchmark's baseline) */
static bool
zc_off(void)
{
	const char *v = getenv("SH_DPDK_ZERO_COPY");

	return v != NULL && strcmp(v, "0") == 0;
}

static int
port_setup(struct dport *p, unsigned want)
{
	struct rte_eth_conf conf = { 0 };
	struct rte_eth_dev_info info;
	struct rte_ether_addr mac;
	uint16_t nrxd = RXD, ntxd = TXD;
	int sock = rte_eth_dev_socket_id(p->id);
	char name[RTE_MEMPOOL_NAMESIZE];
	unsigned nmbufs;
	int rc;

	rc = rte_eth_dev_info_get(p->id, &info);
	if (rc < 0)
		return rc;
	p->nq = SH_MIN(want, SH_MIN(info.max_rx_queues, info.max_tx_queues));
	if (p->nq == 0)
		return -ENODEV;
	if (p->nq > 1 && info.flow_type_rss_offloads != 0) {
		conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
		conf.rx_adv_conf.rss_conf.rss_hf =
		    info.flow_type_rss_offloads & (RTE_ETH_RSS_IP | RTE_ETH_RSS_UDP);
	}
	/*
	 * Zero-copy sends: chained mbufs, some on the sender's memory. Only on a
	 * virtual device (memif, af_packet, tap...), which reads it with the CPU: a
	 * NIC would DMA from memory its IOMMU has not mapped (the buffers are not
	 * the EAL's; docs/dpdk.md "Zero copy"). And only with IOVA as VA, where an
	 * address is its IOVA.
	 */
	if ((info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MULTI_SEGS) != 0 &&
	    rte_eal_iova_mode() == RTE_IOVA_VA && info.device != NULL &&
	    strcmp(rte_bus_name(rte_dev_bus(info.device)), "vdev") == 0 && !zc_off()) {
		conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_MULTI_SEGS;
		p->tx_zc = true;
	}
	if ((info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_UDP_CKSUM) != 0) {
		conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_UDP_CKSUM;
		p->tx_udp_csum = true;
	}
	if (G.mtu != 0) {
		if (G.mtu > info.max_mtu) {
			sh_log_error("DPDK: port %s takes an MTU of at most %u, not %u", p->name,
				     info.max_mtu, G.mtu);
			return -EINVAL;
		}
		conf.rxmode.mtu = G.mtu;
	}
	/* RX interrupts for CPU-optimized loops where the port has them; else sleep-polling */
	conf.intr_conf.rxq = 1;
	rc = rte_eth_dev_configure(p->id, (uint16_t)p->nq, (uint16_t)p->nq, &conf);
	if (rc < 0) {
		conf.intr_conf.rxq = 0;
		rc = rte_eth_dev_configure(p->id, (uint16_t)p->nq, (uint16_t)p->nq, &conf);
	}
	if (rc < 0)
		return rc;
	p->rx_intr = conf.intr_conf.rxq;
	rc = rte_eth_dev_adjust_nb_rx_tx_desc(p->id, &nrxd, &ntxd);
	if (rc < 0)
		return rc;
	if (G.mtu != 0 && (rc = rte_eth_dev_set_mtu(p->id, (uint16_t)G.mtu)) < 0 && rc != -ENOTSUP)
		return rc;
	if (rte_eth_dev_get_mtu(p->id, &p->mtu) < 0 || p->mtu == 0)
		p->mtu = 1500;
	p->mtu = (uint16_t)SH_MIN(p->mtu, SH_DPDK_MTU_MAX);
	/* every descriptor filled, every ring full, and a burst in hand per queue */
	nmbufs = p->nq * (nrxd + ntxd + RING_LEN + 2 * DPDK_BURST) + 1024;
	snprintf(name, sizeof(name), "sh_pool_%u", p->id);
	p->pool = rte_pktmbuf_pool_create(
	    name, nmbufs, 0, 0,
	    (uint16_t)(RTE_PKTMBUF_HEADROOM + SH_MAX(2048u, p->mtu + SH_ETH_HLEN + 4u)), sock);
	if (p->pool == NULL)
		return -rte_errno;
	for (unsigned q = 0; q < p->nq; q++) {
		rc =
		    rte_eth_rx_queue_setup(p->id, (uint16_t)q, nrxd, (unsigned)sock, NULL, p->pool);
		if (rc < 0)
			return rc;
		rc = rte_eth_tx_queue_setup(p->id, (uint16_t)q, ntxd, (unsigned)sock, NULL);
		if (rc < 0)
			return rc;
		snprintf(name, sizeof(name), "sh_ring_%u_%u", p->id, q);
		p->q[q].ring = rte_ring_create(name, RING_LEN, sock, RING_F_SC_DEQ);
		if (p->q[q].ring == NULL)
			return -rte_errno;
	}
	rc = rte_eth_dev_start(p->id);
	if (rc < 0)
		return rc;
	rc = rte_eth_macaddr_get(p->id, &mac);
	if (rc < 0)
		return rc;
	for (unsigned q = 0; q < p->nq; q++) {
		p->q[q].intr_fd =
		    p->rx_intr ? rte_eth_dev_rx_intr_ctl_q_get_fd(p->id, (uint16_t)q) : -1;
		if (p->q[q].intr_fd < 0)
			p->rx_intr = false;
	}
	memcpy(p->mac, mac.addr_bytes, 6);
	return 0;
}

static struct dport *
port_find(const char *dev)
{
	for (unsigned i = 0; i < G.nports; i++)
		if (strcmp(G.ports[i]->name, dev) == 0)
			return G.ports[i];
	return NULL;
}

int
dport_get(const char *dev, struct dport **out)
{
	struct dport *p;
	uint16_t id;
	int rc;

	pthread_mutex_lock(&G.lock);
	if (!G.ready) {
		rc = -EPROTONOSUPPORT;
		goto out;
	}
	p = port_find(dev);
	if (p != NULL) {
		*out = p;
		rc = 0;
		goto out;
	}
	if (G.nports == DPDK_PORTS_MAX) {
		rc = -ENOSPC;
		goto out;
	}
	if (rte_eth_dev_get_port_by_name(dev, &id) != 0) {
		sh_log_error("DPDK: no port %s (a --vdev or PCI device the EAL was given)", dev);
		rc = -ENODEV;
		goto out;
	}
	p = sh_calloc(1, sizeof(*p));
	if (p == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	snprintf(p->name, sizeof(p->name), "%s", dev);
	p->id = id;
	pthread_mutex_init(&p->lock, NULL);
	rc = port_setup(p, G.queues);
	if (rc < 0) {
		/* what the EAL set up for it stays with the process: the port is not usable */
		sh_log_error("DPDK: port %s: %s", dev, rte_strerror(-rc));
		pthread_mutex_destroy(&p->lock);
		sh_free(p);
		goto out;
	}
	sh_log_info("DPDK: port %s up: MAC %02x:%02x:%02x:%02x:%02x:%02x, MTU %u, %u queue "
		    "pairs, %s%s%s",
		    dev, p->mac[0], p->mac[1], p->mac[2], p->mac[3], p->mac[4], p->mac[5], p->mtu,
		    p->nq, p->rx_intr ? "RX interrupts" : "no RX interrupts (sleep-polling)",
		    p->tx_udp_csum ? ", UDP checksums offloaded" : "",
		    p->tx_zc ? ", zero-copy sends" : "");
	G.ports[G.nports++] = p;
	*out = p;
	rc = 0;
out:
	pthread_mutex_unlock(&G.lock);
	return rc;
}

int
sh_dpdk_port_stats(const char *dev, struct sh_dpdk_stats *st, struct sh_arp_entry *entries,
		   unsigned max, unsigned *n)
{
	struct dport *p;

	pthread_mutex_lock(&G.lock);
	p = G.ready ? port_find(dev) : NULL;
	pthread_mutex_unlock(&G.lock);
	if (p == NULL)
		return -ENODEV;
	memset(st, 0, sizeof(*st));
#define X(f) st->f = atomic_load_explicit(&p->st.f, memory_order_relaxed);
	DPDK_STATS_FIELDS(X)
#undef X
	st->rx_intr = p->rx_intr;
	pthread_mutex_lock(&p->lock);
	*n = p->arp != NULL ? sh_arp_list(p->arp, entries, max) : 0;
	pthread_mutex_unlock(&p->lock);
	return 0;
}

#else /* !SH_HAVE_DPDK */

int
sh_dpdk_set_mtu(unsigned mtu)
{
	(void)mtu;
	return -EPROTONOSUPPORT;
}

int
sh_dpdk_init(const char *args, unsigned queues)
{
	(void)args;
	(void)queues;
	sh_log_error("DPDK: this build has no DPDK (libdpdk-dev was missing when it was built)");
	return -EPROTONOSUPPORT;
}

bool
sh_dpdk_ready(void)
{
	return false;
}

int
sh_dpdk_port_stats(const char *dev, struct sh_dpdk_stats *st, struct sh_arp_entry *entries,
		   unsigned max, unsigned *n)
{
	(void)dev;
	(void)st;
	(void)entries;
	(void)max;
	(void)n;
	return -ENODEV;
}

#endif
