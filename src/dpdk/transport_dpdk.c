// SPDX-License-Identifier: Apache-2.0
/*
 * The "dpdk" transport (dpdk.h): one queue pair of a port per endpoint,
 * read by the endpoint's loop as an env poller; frames built and parsed
 * here (net/frame.h), peers resolved by the port's own ARP table.
 *
 * Receive: a burst from the queue and from the queue's hand-off ring;
 * each frame parsed, every length checked; ARP learned from and
 * answered; a datagram for this endpoint's UDP port handed up in place
 * (its payload in the mbuf, no copy); one for another endpoint of the
 * port passed to that one's ring; anything else dropped and counted.
 *
 * Send: each datagram gathered into one mbuf behind its 42 bytes of
 * headers, checksummed in software (or by the port where it offers it)
 * and sent in one burst per call; where the port takes chained mbufs,
 * the data a session holds until acknowledged goes in place (zero copy,
 * external mbufs: zc_mbuf). A peer still being resolved, or that
 * does not answer ARP, loses the datagram (counted): the protocol above
 * retransmits, and an unreachable peer counts as refused (the link is
 * down). A datagram to the port's own address goes straight to the
 * endpoint it is for.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "dpdk_int.h"

#ifdef SH_HAVE_DPDK
#include <rte_lcore.h>
#endif

SH_LOG_FACILITY("dpdk");

#ifdef SH_HAVE_DPDK

#define EPHEMERAL_FIRST 49152

struct dtp {
	struct net_transport *t;
	struct dport *p;
	unsigned q;
	uint16_t udp_port;
	uint16_t ip_id;
	struct env *env;
	struct env_poller poller;
	uint64_t refused;
};

#define STAT_ADD(p, f, n) atomic_fetch_add_explicit(&(p)->st.f, (n), memory_order_relaxed)

static uint32_t
addr_ip4(const struct env_addr *a)
{
	uint32_t ip;

	memcpy(&ip, a->ip, 4);
	return ntohl(ip);
}

static void
tx_burst(struct dtp *d, struct rte_mbuf **m, unsigned n)
{
	unsigned sent = 0;

	/* a full queue drains within microseconds: a few tries, then the rest is lost */
	for (int tries = 0; sent < n && tries < 64; tries++)
		sent += rte_eth_tx_burst(d->p->id, (uint16_t)d->q, m + sent, (uint16_t)(n - sent));
	STAT_ADD(d->p, tx_frames, sent);
	if (sent < n) {
		STAT_ADD(d->p, tx_full, n - sent);
		rte_pktmbuf_free_bulk(m + sent, n - sent);
	}
}

/* A frame already built (ARP) into an mbuf, or NULL. */
static struct rte_mbuf *
raw_mbuf(struct dtp *d, const uint8_t *b, size_t len)
{
	struct rte_mbuf *m = rte_pktmbuf_alloc(d->p->pool);
	char *data;

	if (m == NULL)
		return NULL;
	data = rte_pktmbuf_append(m, (uint16_t)len);
	if (data == NULL) {
		rte_pktmbuf_free(m);
		return NULL;
	}
	memcpy(data, b, len);
	return m;
}

/* The queue whose endpoint has UDP port `port`, or -1. */
static int
queue_of(const struct dport *p, uint16_t port)
{
	for (unsigned q = 0; q < p->nq; q++)
		if (atomic_load_explicit(&p->q[q].udp_port, memory_order_acquire) == port)
			return (int)q;
	return -1;
}

/* A frame for queue q: its ring (it may be ours: read on the next turn). */
static void
hand_off(struct dtp *d, int q, struct rte_mbuf *m)
{
	if (q < 0 || rte_ring_enqueue(d->p->q[q].ring, m) != 0) {
		STAT_ADD(d->p, rx_other, 1);
		rte_pktmbuf_free(m);
		return;
	}
	STAT_ADD(d->p, rx_handoff, 1);
}

static void
on_arp(struct dtp *d, const struct sh_frame *f)
{
	uint8_t out[SH_FRAME_MIN];
	size_t olen = 0;
	struct rte_mbuf *m;
	int rc;

	STAT_ADD(d->p, arp_in, 1);
	pthread_mutex_lock(&d->p->lock);
	rc = sh_arp_input(d->p->arp, f, env_now(d->env), out, sizeof(out), &olen);
	pthread_mutex_unlock(&d->p->lock);
	if (rc == 1 && (m = raw_mbuf(d, out, olen)) != NULL) {
		STAT_ADD(d->p, arp_out, 1);
		tx_burst(d, &m, 1);
	}
}

static unsigned
dtp_poll(struct env_poller *pl)
{
	struct dtp *d = pl->arg;
	struct dport *p = d->p;
	struct rte_mbuf *in[DPDK_BURST], *keep[DPDK_BURST];
	struct env_dgram_msg msgs[DPDK_BURST];
	struct iovec iov[DPDK_BURST];
	unsigned n, k = 0;

	n = rte_eth_rx_burst(p->id, (uint16_t)d->q, in, DPDK_BURST);
	STAT_ADD(p, rx_frames, n);
	if (n < DPDK_BURST)
		n += rte_ring_dequeue_burst(p->q[d->q].ring, (void **)in + n, DPDK_BURST - n, NULL);
	for (unsigned i = 0; i < n; i++) {
		struct rte_mbuf *m = in[i];
		struct sh_frame f;

		if (m->nb_segs > 1 && rte_pktmbuf_linearize(m) != 0) {
			STAT_ADD(p, rx_bad, 1);
			rte_pktmbuf_free(m);
			continue;
		}
		if (sh_frame_parse(rte_pktmbuf_mtod(m, const uint8_t *), rte_pktmbuf_pkt_len(m),
				   &f) < 0) {
			STAT_ADD(p, rx_bad, 1);
			rte_pktmbuf_free(m);
			continue;
		}
		if (f.kind == SH_FRAME_ARP) {
			on_arp(d, &f);
			rte_pktmbuf_free(m);
			continue;
		}
		if (f.kind != SH_FRAME_UDP || f.dst.ip != p->ip) {
			STAT_ADD(p, rx_other, 1);
			rte_pktmbuf_free(m);
			continue;
		}
		if (f.dst.port != d->udp_port) {
			hand_off(d, queue_of(p, f.dst.port), m);
			continue;
		}
		memset(&msgs[k].peer, 0, sizeof(msgs[k].peer));
		msgs[k].peer.family = AF_INET;
		msgs[k].peer.port = f.src.port;
		uint32_t ip = htonl(f.src.ip);
		memcpy(msgs[k].peer.ip, &ip, 4);
		iov[k].iov_base = (void *)f.payload;
		iov[k].iov_len = f.plen;
		msgs[k].iov = &iov[k];
		msgs[k].iovcnt = 1;
		msgs[k].len = f.plen;
		keep[k++] = m;
	}
	if (k > 0) {
		d->t->recv(d->t->arg, d->t, msgs, k);
		rte_pktmbuf_free_bulk(keep, k);
	}
	return n;
}

/* The loop sleeps: wake it when a frame comes (the port's RX interrupt), or no longer. */
static int
dtp_arm(struct env_poller *pl, bool on)
{
	struct dtp *d = pl->arg;

	return on ? rte_eth_dev_rx_intr_enable(d->p->id, (uint16_t)d->q)
		  : rte_eth_dev_rx_intr_disable(d->p->id, (uint16_t)d->q);
}

/*
 * Zero-copy sends: a data iovec of at least ZC_MIN bytes that lies in a
 * buffer the session holds until acknowledged (env_dgram_msg.bufs) goes as
 * an external mbuf chained behind the headers, the buffer referenced until
 * the port is done with it (the mbuf's free drops the reference). Smaller
 * ones cost less copied than described.
 */
#define ZC_MIN 512

struct zc_seg {
	struct rte_mbuf_ext_shared_info shinfo;
	struct sh_buf *buf;
};

static void
zc_free(void *addr, void *opaque)
{
	struct zc_seg *z = opaque;

	(void)addr;
	sh_buf_put(z->buf);
	sh_free(z);
}

/* An mbuf that is iov's bytes in place (they lie in b), or NULL. */
static struct rte_mbuf *
zc_mbuf(struct dtp *d, struct sh_buf *b, const struct iovec *iov)
{
	struct rte_mbuf *m;
	struct zc_seg *z;

	if (iov->iov_len > UINT16_MAX)
		return NULL;
	m = rte_pktmbuf_alloc(d->p->pool);
	z = m != NULL ? sh_malloc(sizeof(*z)) : NULL;
	if (z == NULL) {
		rte_pktmbuf_free(m);
		return NULL;
	}
	z->buf = sh_buf_get(b);
	z->shinfo.free_cb = zc_free;
	z->shinfo.fcb_opaque = z;
	rte_mbuf_ext_refcnt_set(&z->shinfo, 1);
	/* (IOVA as VA, checked when the port was set up: the address is the IOVA) */
	rte_pktmbuf_attach_extbuf(m, iov->iov_base, (rte_iova_t)(uintptr_t)iov->iov_base,
				  (uint16_t)iov->iov_len, &z->shinfo);
	m->data_len = (uint16_t)iov->iov_len;
	m->pkt_len = iov->iov_len;
	return m;
}

static bool
zc_takes(const struct dtp *d, const struct env_dgram_msg *msg, unsigned j)
{
	return d->p->tx_zc && msg->bufs != NULL && msg->bufs[j] != NULL &&
	       msg->iov[j].iov_len >= ZC_MIN;
}

/* The datagram as headers' room then its iovecs, those it can in place; NULL if dry. */
static struct rte_mbuf *
gather_zc(struct dtp *d, const struct env_dgram_msg *msg)
{
	struct rte_mbuf *head = rte_pktmbuf_alloc(d->p->pool);

	if (head == NULL || rte_pktmbuf_append(head, SH_FRAME_UDP_HLEN) == NULL)
		goto fail;
	for (unsigned j = 0; j < msg->iovcnt; j++) {
		struct rte_mbuf *seg = NULL;
		size_t l = msg->iov[j].iov_len;
		char *to;

		if (zc_takes(d, msg, j) && (seg = zc_mbuf(d, msg->bufs[j], &msg->iov[j])) != NULL) {
			if (rte_pktmbuf_chain(head, seg) < 0) {
				rte_pktmbuf_free(seg);
				goto fail;
			}
			STAT_ADD(d->p, tx_zc_bytes, l);
			continue;
		}
		if (rte_pktmbuf_tailroom(rte_pktmbuf_lastseg(head)) < l) {
			seg = rte_pktmbuf_alloc(d->p->pool);
			if (seg == NULL || rte_pktmbuf_chain(head, seg) < 0) {
				rte_pktmbuf_free(seg);
				goto fail;
			}
		}
		to = rte_pktmbuf_append(head, (uint16_t)l);
		if (to == NULL)
			goto fail;
		memcpy(to, msg->iov[j].iov_base, l);
	}
	return head;
fail:
	rte_pktmbuf_free(head);
	return NULL;
}

/*
 * One datagram into an mbuf behind room for its headers (in place where
 * zc, the frame going on the wire, and the port can); NULL if the pool is
 * dry.
 */
static struct rte_mbuf *
gather(struct dtp *d, const struct env_dgram_msg *msg, size_t len, bool zc)
{
	struct rte_mbuf *m;
	uint8_t *data;

	for (unsigned j = 0; zc && j < msg->iovcnt; j++)
		if (zc_takes(d, msg, j))
			return gather_zc(d, msg);
	m = rte_pktmbuf_alloc(d->p->pool);
	if (m == NULL)
		return NULL;
	data = (uint8_t *)rte_pktmbuf_append(m, (uint16_t)(SH_FRAME_UDP_HLEN + len));
	if (data == NULL) {
		rte_pktmbuf_free(m);
		return NULL;
	}
	data += SH_FRAME_UDP_HLEN;
	for (unsigned j = 0; j < msg->iovcnt; j++) {
		memcpy(data, msg->iov[j].iov_base, msg->iov[j].iov_len);
		data += msg->iov[j].iov_len;
	}
	return m;
}

static int
dtp_send(struct net_transport *t, const struct env_dgram_msg *msgs, unsigned n)
{
	struct dtp *d = t->impl;
	struct dport *p = d->p;
	struct rte_mbuf *out[2 * ENV_DGRAM_BATCH];
	struct sh_frame_end src = { .ip = p->ip, .port = d->udp_port };
	/* the last peer resolved in this call: a batch mostly goes to one, resolved once */
	uint32_t last_ip = 0;
	uint8_t last_mac[6];
	int last_rc = 0;
	unsigned k = 0;
	int rc = env_dgram_batch_check(msgs, n);

	if (rc < 0)
		return rc;
	memcpy(src.mac, p->mac, 6);
	for (unsigned i = 0; i < n; i++) {
		const struct env_dgram_msg *msg = &msgs[i];
		struct sh_frame_end dst = { .port = msg->peer.port };
		uint8_t areq[SH_FRAME_MIN];
		size_t len = 0, alen = 0;
		struct rte_mbuf *m;

		for (unsigned j = 0; j < msg->iovcnt; j++)
			len += msg->iov[j].iov_len;
		if (len > t->ops->max_dgram || len + SH_IP4_HLEN + SH_UDP_HLEN > (size_t)p->mtu) {
			/* larger than the port takes: refused as by a kernel stack (the path is
			 * suspect, the packet goes again on another), the rest of the batch goes */
			d->refused++;
			continue;
		}
		if (msg->peer.family != AF_INET) {
			STAT_ADD(p, tx_unreachable, 1);
			d->refused++;
			continue;
		}
		dst.ip = addr_ip4(&msg->peer);
		if (dst.ip == p->ip) {
			/* another endpoint of this port (or this one): no wire, no ARP */
			memcpy(dst.mac, p->mac, 6);
			rc = 0;
		} else if (dst.ip == last_ip) {
			memcpy(dst.mac, last_mac, 6); /* what was asked once is not asked again */
			rc = last_rc;
		} else {
			pthread_mutex_lock(&p->lock);
			rc = sh_arp_resolve(p->arp, dst.ip, env_now(d->env), dst.mac, areq,
					    sizeof(areq), &alen);
			pthread_mutex_unlock(&p->lock);
			last_ip = dst.ip;
			last_rc = rc;
			memcpy(last_mac, dst.mac, 6);
		}
		if (alen > 0 && (m = raw_mbuf(d, areq, alen)) != NULL) {
			STAT_ADD(p, arp_out, 1);
			out[k++] = m;
		}
		if (rc == -EAGAIN) {
			STAT_ADD(p, tx_unresolved, 1);
			continue;
		}
		if (rc < 0) {
			STAT_ADD(p, tx_unreachable, 1);
			d->refused++;
			continue;
		}
		/* (a frame to another endpoint of the port is parsed there: one segment) */
		m = gather(d, msg, len, dst.ip != p->ip);
		if (m == NULL) {
			STAT_ADD(p, tx_full, 1);
			continue;
		}
		uint8_t *head = rte_pktmbuf_mtod(m, uint8_t *);
		/* without offload no UDP checksum: the datagram's CRC32C covers every byte */
		unsigned flags = SH_FRAME_UDP_CSUM_NONE;

		if (p->tx_udp_csum) {
			flags = SH_FRAME_NO_UDP_CSUM;
			m->ol_flags |= RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_UDP_CKSUM;
			m->l2_len = SH_ETH_HLEN;
			m->l3_len = SH_IP4_HLEN;
		}
		rc = sh_frame_udp_head(head, SH_FRAME_UDP_HLEN, &src, &dst,
				       head + SH_FRAME_UDP_HLEN, len, d->ip_id++, flags);
		if (rc < 0) {
			rte_pktmbuf_free(m);
			return i > 0 ? (int)i : rc;
		}
		if (dst.ip == p->ip) {
			hand_off(d, queue_of(p, dst.port), m);
			continue;
		}
		out[k++] = m;
	}
	if (k > 0)
		tx_burst(d, out, k);
	return (int)n;
}

/* A UDP port no other endpoint of p has (under p->lock): the one asked for, or a free one. */
static int
pick_port(struct dport *p, uint16_t want, uint16_t *out)
{
	if (want != 0) {
		if (queue_of(p, want) >= 0)
			return -EADDRINUSE;
		*out = want;
		return 0;
	}
	for (uint32_t port = EPHEMERAL_FIRST; port <= 65535; port++)
		if (queue_of(p, (uint16_t)port) < 0) {
			*out = (uint16_t)port;
			return 0;
		}
	return -EADDRINUSE;
}

static int
dtp_open(struct net_transport *t, struct env *env, const struct env_addr *bind)
{
	struct dport *p;
	struct dtp *d;
	uint32_t ip;
	int q = -1, rc;

	if (t->dev == NULL || t->dev[0] == '\0') {
		sh_log_error("DPDK: an interface on DPDK names its device");
		return -EINVAL;
	}
	if (bind->family != AF_INET || (ip = addr_ip4(bind)) == 0) {
		sh_log_error("DPDK: port %s needs an IPv4 address of its own", t->dev);
		return -EADDRNOTAVAIL;
	}
	rc = dport_get(t->dev, &p);
	if (rc < 0)
		return rc;
	d = sh_calloc(1, sizeof(*d));
	if (d == NULL)
		return -ENOMEM;
	d->t = t;
	d->p = p;
	d->env = env;
	pthread_mutex_lock(&p->lock);
	if (p->ip != 0 && p->ip != ip) {
		rc = -EADDRNOTAVAIL; /* one address a port (a VF has one) */
		goto out_unlock;
	}
	for (unsigned i = 0; i < p->nq && q < 0; i++)
		if (p->q[i].owner == NULL)
			q = (int)i;
	if (q < 0) {
		sh_log_error("DPDK: port %s: all %u queue pairs are taken", p->name, p->nq);
		rc = -EBUSY;
		goto out_unlock;
	}
	rc = pick_port(p, bind->port, &d->udp_port);
	if (rc < 0)
		goto out_unlock;
	if (p->arp == NULL) {
		struct sh_arp_config ac = { .ips = { ip }, .nips = 1 };

		memcpy(ac.mac, p->mac, 6);
		rc = sh_arp_create(&ac, &p->arp);
		if (rc < 0)
			goto out_unlock;
		p->ip = ip;
	}
	d->q = (unsigned)q;
	p->q[q].owner = d;
	atomic_store_explicit(&p->q[q].udp_port, d->udp_port, memory_order_release);
	pthread_mutex_unlock(&p->lock);

	/* an lcore id of its own for the loop's thread: the pool's per-lcore cache, not its ring,
	 * for every mbuf (where the EAL has no id left, the ring still works) */
	if (rte_lcore_id() == LCORE_ID_ANY && rte_thread_register() < 0)
		sh_log_warn("DPDK: no lcore id for this thread: mbufs come from the pool's ring");
	d->poller.poll = dtp_poll;
	d->poller.arg = d;
	if (p->rx_intr) {
		/* CPU-optimized loops sleep on it once idle (a frame to the ring from another
		 * queue is not signalled: that queue's poll hands it off while the sleep is
		 * short, and the sleep is bounded by the loop's timers) */
		d->poller.arm = dtp_arm;
		d->poller.fd = p->q[q].intr_fd;
	}
	rc = env_poller_add(env, &d->poller);
	if (rc < 0) {
		pthread_mutex_lock(&p->lock);
		p->q[q].owner = NULL;
		atomic_store_explicit(&p->q[q].udp_port, 0, memory_order_release);
		pthread_mutex_unlock(&p->lock);
		sh_free(d);
		return rc;
	}
	t->impl = d;
	/* an address now here: the neighbours' tables learn it (an address that moved) */
	uint8_t g[SH_FRAME_MIN];
	int glen = sh_arp_announce(p->arp, ip, g, sizeof(g));
	struct rte_mbuf *m;

	if (glen > 0 && (m = raw_mbuf(d, g, (size_t)glen)) != NULL) {
		STAT_ADD(p, arp_out, 1);
		tx_burst(d, &m, 1);
	}
	return 0;

out_unlock:
	pthread_mutex_unlock(&p->lock);
	sh_free(d);
	return rc;
}

static int
dtp_local_addr(struct net_transport *t, struct env_addr *out)
{
	struct dtp *d = t->impl;
	uint32_t ip = htonl(d->p->ip);

	memset(out, 0, sizeof(*out));
	out->family = AF_INET;
	out->port = d->udp_port;
	memcpy(out->ip, &ip, 4);
	return 0;
}

static uint64_t
dtp_refused(struct net_transport *t)
{
	return ((struct dtp *)t->impl)->refused;
}

static uint32_t
dtp_mtu(struct net_transport *t)
{
	return (uint32_t)((struct dtp *)t->impl)->p->mtu - SH_IP4_HLEN - SH_UDP_HLEN;
}

static void
dtp_close(struct net_transport *t)
{
	struct dtp *d = t->impl;
	struct dport *p = d->p;
	struct rte_mbuf *m;

	env_poller_del(&d->poller);
	pthread_mutex_lock(&p->lock);
	p->q[d->q].owner = NULL;
	atomic_store_explicit(&p->q[d->q].udp_port, 0, memory_order_release);
	pthread_mutex_unlock(&p->lock);
	while (rte_ring_dequeue(p->q[d->q].ring, (void **)&m) == 0)
		rte_pktmbuf_free(m);
	sh_free(d);
	t->impl = NULL;
}

const struct net_transport_ops net_transport_dpdk = {
	.name = "dpdk",
	.version = 1,
	/* one frame, no IP fragments: the largest MTU less IPv4 and UDP; a port's is its own */
	.max_dgram = SH_DPDK_MTU_MAX - SH_IP4_HLEN - SH_UDP_HLEN,
	.open = dtp_open,
	.send = dtp_send,
	.local_addr = dtp_local_addr,
	.refused = dtp_refused,
	.mtu = dtp_mtu,
	.close = dtp_close,
};

#endif /* SH_HAVE_DPDK */
