// SPDX-License-Identifier: Apache-2.0
/*
 * The data-network endpoint: configuration, interfaces and transports,
 * peers and their paths, the receive path (decode, route to a session),
 * the session handshake and liveness, and batched sending.
 *
 * Session handshake (per peer; docs/protocol.md):
 *
 *   IDLE --something to send--> CONNECTING --HELLO_ACK(our sess)--> ESTABLISHED
 *     ^                             |  \--peer's HELLO (wins if its id is higher)--^
 *     +--silence > dead_ns, RESET---+------------------------------------------+
 *
 * A packet names both ends' incarnations. One for an incarnation of ours
 * that is gone, or for a session we do not have, is answered with RESET.
 * A peer seen with a higher incarnation has restarted: its session is torn
 * down and calls sent to the old one fail with SH_EPEERRESTART.
 */
#include <assert.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>

#include "net_int.h"

SH_LOG_FACILITY("net");

#define ACK_BATCH_TICKS 4
#define RTO_MIN_NS	(2 * SH_NSEC_PER_MSEC)
/*
 * 1 ms, not 200 us: a Raft append's answer, a metadata command's reply,
 * come after a durable write, mostly within the millisecond; an ack that
 * waits for them rides along instead of going alone (a small file written
 * through the mount: 44 -> 21 acks alone per file, the nodes' datagrams
 * 116 -> 94; docs/performance.md).
 */
#define DELACK_NS (1000 * SH_NSEC_PER_USEC)

static bool
peer_eq(const struct sh_hnode *h, const void *key)
{
	return sh_container_of(h, struct net_peer, hn)->id == *(const uint64_t *)key;
}

struct net_peer *
net_peer_get(const struct net *n, uint64_t id)
{
	struct sh_hnode *h = sh_htable_find(&n->peers, sh_hash_u64(id), &id, peer_eq);

	return h ? sh_container_of(h, struct net_peer, hn) : NULL;
}

static bool
is_loopback(const struct env_addr *a)
{
	static const uint8_t v6lo[16] = { [15] = 1 };

	return (a->family == AF_INET && a->ip[0] == 127) ||
	       (a->family == AF_INET6 && memcmp(a->ip, v6lo, 16) == 0);
}

uint32_t
net_default_mtu(const struct env_addr *a)
{
	/* loopback takes 64 KiB datagrams; Ethernet without jumbo frames 1500 - 28 */
	return is_loopback(a) ? ENV_DGRAM_MAX : 1472;
}

struct net_iface
net_learned_iface(const struct net *n, unsigned tp, const struct env_addr *from)
{
	struct net_iface x = { .addr = *from, .mtu = net_default_mtu(from) };

	memcpy(x.label, n->ifaces[tp].label, NET_LABEL_MAX);
	return x;
}

void
net_peer_take_ifaces(struct net_peer *p, const struct net_iface *ifaces, unsigned nifaces)
{
	struct net_iface old[NET_MAX_IFACES];
	unsigned nold = p->nifaces;

	memcpy(old, p->ifaces, sizeof(old));
	p->nifaces = nifaces;
	for (unsigned i = 0; i < nifaces; i++) {
		p->ifaces[i] = ifaces[i];
		/* what the peer said of an interface it still has holds (net_path_said_mtu) */
		for (unsigned k = 0; k < nold && p->ifaces[i].mtu == 0; k++)
			if (env_addr_eq(&old[k].addr, &ifaces[i].addr))
				p->ifaces[i].mtu = old[k].mtu;
		if (p->ifaces[i].mtu == 0)
			p->ifaces[i].mtu = net_default_mtu(&ifaces[i].addr);
	}
	net_paths_build(p);
}

static struct net_peer *
peer_new(struct net *n, uint64_t id, const struct net_iface *ifaces, unsigned nifaces)
{
	struct net_peer *p = sh_calloc(1, sizeof(*p));

	if (p == NULL)
		return NULL;
	p->id = id;
	p->net = n;
	sh_list_init(&p->calls);
	sh_list_init(&p->dirty_link);
	if (net_sess_alloc(p) < 0) {
		sh_free(p);
		return NULL;
	}
	net_sess_reset(p);
	net_peer_take_ifaces(p, ifaces, nifaces);
	sh_htable_insert(&n->peers, &p->hn, sh_hash_u64(id));
	sh_list_add_tail(&n->peer_list, &p->link);
	return p;
}

int
net_peer_add(struct net *n, uint64_t id, const struct net_iface *ifaces, unsigned nifaces)
{
	struct net_peer *p;
	bool usable = false;

	if (id == 0 || id == n->id || nifaces == 0 || nifaces > NET_MAX_IFACES || ifaces == NULL)
		return -EINVAL;
	for (unsigned i = 0; i < nifaces; i++) {
		if (ifaces[i].addr.family != AF_INET && ifaces[i].addr.family != AF_INET6)
			return -EINVAL;
		for (unsigned k = 0; k < n->nifaces; k++)
			usable |= n->ifaces[k].addr.family == ifaces[i].addr.family;
	}
	if (!usable)
		return -EINVAL; /* no local interface of the same family */
	p = net_peer_get(n, id);
	if (p != NULL) {
		if (!p->learned)
			return -EEXIST;
		/* configured now: the addresses given win over the learned one */
		p->learned = false;
		net_peer_take_ifaces(p, ifaces, nifaces);
		return 0;
	}
	return peer_new(n, id, ifaces, nifaces) ? 0 : -ENOMEM;
}

/* Parse a list of a peer's interfaces; every one needs a port. */
static int
parse_peer_ifaces(const char *addrs, struct net_iface *ifc)
{
	int cnt = addrs ? net_ifaces_parse(addrs, ifc, NET_MAX_IFACES) : -EINVAL;

	for (int i = 0; i < cnt; i++)
		if (ifc[i].addr.port == 0)
			return -EINVAL;
	return cnt < 0 ? -EINVAL : cnt;
}

int
net_peer_ensure(struct net *n, uint64_t id, const char *addrs)
{
	struct net_peer *p = net_peer_get(n, id);
	struct net_iface ifc[NET_MAX_IFACES];
	int cnt;

	if (p != NULL && p->learned)
		return 0; /* learned from its own packets: reachable as it is */
	cnt = parse_peer_ifaces(addrs, ifc);
	if (cnt < 0)
		return p != NULL
			   ? 0
			   : cnt; /* known: reachable as it is (addrs may name it otherwise) */
	if (p != NULL) {
		bool known = true;

		for (int i = 0; i < cnt && known; i++) {
			known = false;
			for (unsigned j = 0; j < p->nifaces && !known; j++)
				known = env_addr_eq(&ifc[i].addr, &p->ifaces[j].addr);
		}
		if (known)
			return 0; /* reachable there already (perhaps among others) */
	}
	return net_peer_set(n, id, ifc, (unsigned)cnt);
}

int
net_peer_sync(struct net *n, uint64_t id, const char *addrs)
{
	struct net_iface ifc[NET_MAX_IFACES];
	int cnt = parse_peer_ifaces(addrs, ifc);

	return cnt < 0 ? cnt : net_peer_set(n, id, ifc, (unsigned)cnt);
}

uint64_t
net_peer_incarnation(const struct net *n, uint64_t id)
{
	struct net_peer *p = net_peer_get(n, id);

	return p ? p->inc : 0;
}

int
net_peer_path(const struct net *n, uint64_t id, struct env_addr *local, struct env_addr *remote)
{
	struct net_peer *p = net_peer_get(n, id);

	unsigned i;

	if (p == NULL)
		return -ENOENT;
	i = net_path_pick(p, 0);
	*local = n->ifaces[p->paths[i].local].addr;
	*remote = p->ifaces[p->paths[i].remote].addr;
	return 0;
}

bool
net_peer_connected(const struct net *n, uint64_t id)
{
	struct net_peer *p = net_peer_get(n, id);

	return p != NULL && p->state == SESS_ESTABLISHED;
}

uint64_t
net_peer_heard_ns(const struct net *n, uint64_t id)
{
	struct net_peer *p = net_peer_get(n, id);

	return p != NULL ? p->heard_ns : 0;
}

/* ---- sending ---- */

void
net_out_flush(struct net *n)
{
	struct net_transport *t = &n->tps[n->out_tp];
	unsigned sent = 0;

	while (sent < n->nout) {
		int rc = t->ops->send(t, n->out + sent, n->nout - sent);

		if (rc <= 0)
			break; /* full or failing: the rest is lost and will be retransmitted */
		sent += (unsigned)rc;
	}
	/* the stack refused some (its link is down): the paths from it fail over now */
	if (n->nout > 0 && t->ops->refused) {
		uint64_t refused = t->ops->refused(t);

		if (refused != n->tps_refused[n->out_tp]) {
			n->tps_refused[n->out_tp] = refused;
			net_paths_refused(n, n->out_tp);
		}
	}
	n->nout = 0;
}

uint8_t *
net_out_begin(struct net_peer *p, unsigned path)
{
	struct net *n = p->net;
	unsigned tp = p->paths[path].local;

	if (n->nout > 0 && (n->out_tp != tp || n->nout == NET_BATCH))
		net_out_flush(n);
	n->out_tp = tp;
	return n->out_hdr[n->nout] + NET_HDR_MAX;
}

void
net_out_end(struct net_peer *p, unsigned path, struct net_pkt *h, size_t extra_len,
	    const struct iovec *data, struct sh_buf *const *bufs, unsigned ndata)
{
	struct net_path *x = &p->paths[path];
	struct net *n = p->net;
	unsigned i = n->nout++;
	uint8_t *extra = n->out_hdr[i] + NET_HDR_MAX;
	struct iovec *iov = n->out_iov[i];
	size_t hlen = net_pkt_hdr_len(h->nsack), data_len = 0;
	uint8_t *start = extra - hlen;
	bool mac = net_peer_mac(p);
	const uint8_t *master = NULL;
	unsigned iovcnt = 1 + ndata;

	/* iov[0]: header and inline payload; iov[1..]: data, uncopied; then the MAC */
	iov[0] = (struct iovec){ extra, extra_len };
	n->out_bufs[i][0] = NULL;
	for (unsigned k = 0; k < ndata; k++) {
		iov[1 + k] = data[k];
		n->out_bufs[i][1 + k] = bufs != NULL ? bufs[k] : NULL;
		data_len += data[k].iov_len;
	}
	h->payload_len = (uint32_t)(extra_len + data_len);
	if (net_pkt_says_mtu(h->type) && n->mtu_own[x->local])
		h->mtu = (uint16_t)n->ifaces[x->local].mtu; /* (at most its transport's: 65507) */
	if (mac) {
		h->flags |= NET_FLAG_MAC;
		h->key_id = net_auth_key_id(n->auth);
		if (net_id_is_client(p->id)) {
			h->key_id = p->cred.key_id; /* a client's: under its key */
			master = p->ckey;
		}
	}
	net_pkt_encode_hdr(h, start, iov, (int)iovcnt);
	iov[0] = (struct iovec){ start, hlen + extra_len };
	if (mac) {
		assert(iovcnt < ENV_DGRAM_IOV_MAX);
		if (net_auth_seal(n->auth, &p->tx_key, master, h, iov, iovcnt, n->out_mac[i]) < 0) {
			n->nout--; /* not sent: lost, as on the wire, and sent again */
			n->st.auth_failed++;
			return;
		}
		n->out_bufs[i][iovcnt] = NULL;
		iov[iovcnt++] = (struct iovec){ n->out_mac[i], NET_MAC_TRAILER };
		data_len += NET_MAC_TRAILER;
	}
	n->out[i] = (struct env_dgram_msg){ .peer = p->ifaces[x->remote].addr,
					    .iov = iov,
					    .iovcnt = iovcnt,
					    .bufs = ndata > 0 ? n->out_bufs[i] : NULL };
	n->st.pkts_sent++;
	n->st.bytes_sent += hlen + extra_len + data_len;
	p->st.pkts_sent++;
	p->st.bytes_sent += hlen + extra_len + data_len;
	x->st.pkts_sent++;
	x->st.bytes_sent += hlen + extra_len + data_len;
	p->last_tx_ns = env_now(n->env);
}

void
net_mark_dirty(struct net_peer *p)
{
	struct net *n = p->net;

	if (!p->dirty) {
		p->dirty = true;
		sh_list_add_tail(&n->dirty, &p->dirty_link);
	}
	env_post(&n->flush_task);
}

/* Push every dirty session and send what it produced. */
static void
flush_dirty(struct net *n)
{
	struct sh_list *pos;

	while ((pos = sh_list_pop(&n->dirty)) != NULL) {
		struct net_peer *p = sh_list_entry(pos, struct net_peer, dirty_link);

		p->dirty = false;
		if (p->state == SESS_IDLE && !sh_list_empty(&p->calls))
			net_sess_connect(p); /* calls wait for this peer */
		net_sess_push(p);
		net_sess_end_of_batch(p);
	}
	net_out_flush(n);
}

static void
flush_task(struct env_task *t)
{
	flush_dirty(t->arg);
}

void
net_send_ctl(struct net_peer *p, unsigned path, uint8_t type)
{
	struct net_pkt h;

	net_sess_fill_hdr(p, &h, type);
	net_out_begin(p, path);
	net_out_end(p, path, &h, 0, NULL, NULL, 0);
}

static void
send_ctl(struct net *n SH_UNUSED, struct net_peer *p, uint8_t type)
{
	net_send_ctl(p, net_path_pick(p, 0), type);
}

static void
send_reset(struct net *n, unsigned tp, const struct env_addr *to, const struct net_pkt *bad)
{
	struct net_pkt h = { .type = NET_PKT_RESET };
	struct iovec none = { NULL, 0 };
	uint8_t buf[NET_HDR_MAX], mac[NET_MAC_TRAILER];
	const uint8_t *master = NULL;
	struct iovec iov[2];
	struct env_dgram_msg m;

	h.src_id = n->id;
	h.dst_id = bad->src_id;
	h.src_inc = n->inc;
	h.dst_inc = bad->src_inc;
	h.sess = bad->sess;
	h.ts = net_now_us(n);
	if (net_auth_on(n, h.dst_id)) {
		h.flags = NET_FLAG_MAC;
		h.key_id = net_auth_key_id(n->auth);
	} else if (n->auth != NULL && n->rx.keyed) {
		h.flags = NET_FLAG_MAC; /* a client's, just proved: under its key */
		h.key_id = n->rx.cred.key_id;
		master = n->rx.key;
	}
	iov[0] = (struct iovec){ buf, net_pkt_encode_hdr(&h, buf, &none, 0) };
	iov[1] = (struct iovec){ mac, NET_MAC_TRAILER };
	if (h.flags && net_auth_seal(n->auth, NULL, master, &h, iov, 1, mac) < 0)
		return;
	m = (struct env_dgram_msg){ .peer = *to, .iov = iov, .iovcnt = h.flags ? 2 : 1 };
	n->tps[tp].ops->send(&n->tps[tp], &m, 1);
	n->st.resets_sent++;
	n->st.pkts_sent++;
}

static void
peer_event(struct net *n, struct net_peer *p, enum net_peer_event ev)
{
	if (n->cfg.peer_event != NULL)
		n->cfg.peer_event(n->cfg.arg, p->id, ev);
}

void
net_sess_connect(struct net_peer *p)
{
	struct net *n = p->net;

	if (p->state != SESS_IDLE)
		return;
	net_sess_reset(p);
	p->state = SESS_CONNECTING;
	p->sess++;
	p->hello_ns = env_now(n->env);
	p->hello_rto_ns = n->cfg.rto_min_ns * 5;
	p->last_rx_ns = p->hello_ns;
	send_ctl(n, p, NET_PKT_HELLO);
	net_mark_dirty(p);
}

void
net_sess_down(struct net_peer *p, int why)
{
	bool was_up = p->state == SESS_ESTABLISHED;

	sh_log_info("peer %llx: session %u down: %s", (unsigned long long)p->id, p->sess,
		    sh_strerror(why));
	net_sess_reset(p);
	if (was_up)
		peer_event(p->net, p, NET_PEER_DOWN);
	net_rpc_sess_down(p, false);
}

/* The peer came back with incarnation inc: everything of the old one is gone. */
static void
peer_restarted(struct net_peer *p, uint64_t inc)
{
	struct net *n = p->net;

	sh_log_info("peer %llx restarted (incarnation %llx -> %llx)", (unsigned long long)p->id,
		    (unsigned long long)p->inc, (unsigned long long)inc);
	n->st.peers_restarted++;
	net_sess_reset(p);
	p->inc = inc;
	peer_event(n, p, NET_PEER_RESTARTED);
	net_rpc_sess_down(p, true);
}

static void
established(struct net_peer *p, uint32_t sess)
{
	struct net *n = p->net;

	net_sess_start(p, sess);
	n->st.sessions_opened++;
	sh_log_debug("peer %llx: session %u up", (unsigned long long)p->id, sess);
	peer_event(n, p, NET_PEER_UP);
	net_rpc_sess_up(p);
	net_mark_dirty(p);
}

static void
on_hello(struct net *n, struct net_peer *p, const struct net_pkt *pkt)
{
	if (p->inc != 0 && pkt->src_inc < p->inc) {
		n->st.stale++;
		return;
	}
	if (p->inc != 0 && pkt->src_inc > p->inc)
		peer_restarted(p, pkt->src_inc);
	p->inc = pkt->src_inc;
	if (p->state == SESS_ESTABLISHED && p->sess == pkt->sess) {
		send_ctl(n, p, NET_PKT_HELLO_ACK); /* our ack was lost */
		return;
	}
	if (p->state == SESS_ESTABLISHED && net_seq_lt(pkt->sess, p->sess)) {
		n->st.stale++; /* a HELLO of an older session, delayed */
		return;
	}
	if (p->state == SESS_CONNECTING && n->id > p->id)
		return; /* both opened at once: the higher id's session wins, it will ack ours */
	if (p->state == SESS_ESTABLISHED)
		net_sess_down(p, -ECONNRESET); /* the peer opened a new session: the old is gone */
	established(p, pkt->sess);
	send_ctl(n, p, NET_PKT_HELLO_ACK);
}

static void
on_hello_ack(struct net *n, struct net_peer *p, const struct net_pkt *pkt)
{
	if (pkt->dst_inc != n->inc || p->state != SESS_CONNECTING || pkt->sess != p->sess) {
		n->st.stale++;
		return;
	}
	if (p->inc != 0 && pkt->src_inc < p->inc) {
		n->st.stale++;
		return;
	}
	if (p->inc != 0 && pkt->src_inc > p->inc) {
		uint32_t sess = p->sess;

		peer_restarted(p, pkt->src_inc);
		p->sess = sess;
	}
	p->inc = pkt->src_inc;
	established(p, pkt->sess);
}

static void
on_reset(struct net *n, struct net_peer *p, const struct net_pkt *pkt)
{
	n->st.resets_received++;
	if (pkt->dst_inc != n->inc || p->state == SESS_IDLE || pkt->sess != p->sess)
		return;
	if (p->inc != 0 && pkt->src_inc < p->inc)
		return;
	if (p->inc != 0 && pkt->src_inc > p->inc)
		peer_restarted(p, pkt->src_inc);
	else
		net_sess_down(p, -ECONNRESET);
	p->inc = pkt->src_inc;
}

/* A learned peer's address becomes from, on the switch of transport tp. */
static void
relearn(struct net *n, struct net_peer *p, unsigned tp, const struct env_addr *from)
{
	p->nifaces = 1;
	p->ifaces[0] = net_learned_iface(n, tp, from);
	net_paths_build(p);
}

/* A client's datagram at a backend, authentic: the peer takes what its key allows (n->rx). */
static void
client_cred(struct net *n, struct net_peer *p, unsigned tp, const struct env_addr *from,
	    const struct net_pkt *pkt)
{
	char addr[64];

	if (n->rx.keyed && p->cred.key_id == 0 && p->inc == pkt->src_inc) {
		/*
		 * its session began without a key: someone else's, claiming its id
		 * (client_authentic). What it held goes; the client's key begins anew,
		 * where the client writes from.
		 */
		net_sess_reset(p);
		net_rpc_sess_down(p, true);
		relearn(n, p, tp, from);
	}
	if (n->rx.keyed && p->cred.key_id != n->rx.cred.key_id) {
		/* the audit trail of keys' use (docs/security.md): once per client */
		env_addr_format(from, addr, sizeof(addr));
		sh_log_info("client %llx at %s holds key %u (%s)", (unsigned long long)p->id, addr,
			    n->rx.cred.key_id,
			    n->rx.cred.access == NET_ACCESS_WRITE  ? "read-write"
			    : n->rx.cred.access == NET_ACCESS_READ ? "read-only"
								   : "revoked");
	}
	/* what its key allows (client_authentic), for its requests */
	p->cred = n->rx.cred;
	p->cred_gen = n->rx.gen;
	if (n->rx.keyed)
		memcpy(p->ckey, n->rx.key, NET_AUTH_KEY_LEN);
}

static void
on_packet(struct net *n, unsigned tp, const struct env_addr *from, const struct net_pkt *pkt)
{
	struct net_peer *p;
	uint64_t now = env_now(n->env), silent;

	if (pkt->dst_id != n->id) {
		n->st.misdirected++;
		return;
	}
	p = net_peer_get(n, pkt->src_id);
	if (p == NULL) {
		struct net_iface learned = net_learned_iface(n, tp, from);

		if (pkt->type != NET_PKT_HELLO) {
			if (pkt->type != NET_PKT_RESET)
				send_reset(n, tp, from, pkt);
			return;
		}
		/* a client or a node not configured yet: reach it where it wrote from */
		p = peer_new(n, pkt->src_id, &learned, 1);
		if (p == NULL)
			return;
		p->learned = true;
	} else if (p->learned && pkt->type == NET_PKT_HELLO && pkt->src_inc > p->inc &&
		   p->inc != 0) {
		relearn(n, p, tp,
			from); /* a learned peer restarted: it may write from other ports */
	}
	if (pkt->dst_inc != 0 && pkt->dst_inc != n->inc && pkt->type != NET_PKT_RESET) {
		send_reset(n, tp, from, pkt); /* meant for an incarnation of ours that is gone */
		return;
	}
	if (n->auth != NULL && net_id_is_client(p->id) && (p->inc == 0 || pkt->src_inc >= p->inc))
		client_cred(n, p, tp, from, pkt);
	silent = now - p->heard_ns;
	p->last_rx_ns = p->heard_ns = now;
	net_sess_heard(p, silent);
	p->st.pkts_received++;
	p->st.bytes_received += net_pkt_hdr_len(pkt->nsack) + pkt->payload_len;
	if (net_path_rx(p, tp, from, pkt))
		return; /* a probe, or its answer */
	switch (pkt->type) {
	case NET_PKT_HELLO:
		on_hello(n, p, pkt);
		return;
	case NET_PKT_HELLO_ACK:
		on_hello_ack(n, p, pkt);
		return;
	case NET_PKT_RESET:
		on_reset(n, p, pkt);
		return;
	}
	if (p->state != SESS_ESTABLISHED || pkt->sess != p->sess || pkt->src_inc != p->inc ||
	    pkt->dst_inc != n->inc) {
		if (p->inc != 0 && pkt->src_inc < p->inc) {
			n->st.stale++;
			return;
		}
		send_reset(n, tp, from, pkt);
		return;
	}
	net_sess_on_ack(p, pkt);
	if (pkt->type == NET_PKT_DATA)
		net_sess_on_data(p, pkt);
	else if (pkt->type == NET_PKT_KEEPALIVE) {
		p->ack_now = true;
		net_mark_dirty(p);
	}
}

static bool
auth_failed(struct net *n, const struct env_dgram_msg *m, const struct net_pkt *pkt,
	    struct net_peer *p, const char *why)
{
	char addr[64];

	if (p != NULL)
		p->st.auth_failed++;
	if (n->st.auth_failed++ % 1000 == 0) {
		env_addr_format(&m->peer, addr, sizeof(addr));
		sh_log_warn("a datagram from %s claiming to be %llx %s: dropped (%llu so far; "
			    "docs/security.md)",
			    addr, (unsigned long long)pkt->src_id, why,
			    (unsigned long long)n->st.auth_failed);
	}
	return false;
}

/*
 * A client's datagram at a backend (auth.h): without a MAC it is heard as
 * a client without a key, unless its session has one; with one, the key
 * its key id names must prove it. What the key allows is kept in n->rx for
 * on_packet to give the peer.
 */
static bool
client_authentic(struct net *n, const struct env_dgram_msg *m, const struct net_pkt *pkt)
{
	struct net_peer *p = pkt->dst_id == n->id ? net_peer_get(n, pkt->src_id) : NULL;
	bool same = p != NULL && p->inc != 0 && p->inc == pkt->src_inc;
	const uint8_t(*keys)[NET_AUTH_KEY_LEN] = NULL;
	uint8_t key[1][NET_AUTH_KEY_LEN];
	unsigned nkeys;
	int idx;

	n->rx.cred = (struct net_cred){ .key_id = pkt->key_id };
	n->rx.gen = __atomic_load_n(&n->keys_gen, __ATOMIC_ACQUIRE);
	if (!(pkt->flags & NET_FLAG_MAC))
		return same && p->cred.key_id != 0
			   ? auth_failed(n, m, pkt, p, "has no MAC, and its session has a key")
			   : true;
	if (same && p->cred.key_id != 0 && p->cred.key_id != pkt->key_id)
		return auth_failed(n, m, pkt, p, "names another key than its session's");
	nkeys = net_auth_keys(n->auth, pkt->key_id, &keys);
	if (pkt->key_id == NET_KEY_CLUSTER_CLIENT) {
		n->rx.cred.access = NET_ACCESS_WRITE;
	} else if (pkt->key_id == NET_KEY_NETWORK) {
		return auth_failed(n, m, pkt, p, "is a client's under the network key");
	} else if (same && p->cred.key_id == pkt->key_id && p->cred_gen == n->rx.gen) {
		n->rx.cred = p->cred; /* looked up already, and no key changed since */
		keys = (const uint8_t(*)[NET_AUTH_KEY_LEN])p->ckey;
		nkeys = 1;
	} else {
		if (n->cfg.client_key == NULL ||
		    n->cfg.client_key(n->cfg.arg, pkt->key_id, key[0], &n->rx.cred) < 0)
			return auth_failed(n, m, pkt, p, "names a key this cluster does not have");
		n->rx.cred.key_id = pkt->key_id;
		keys = (const uint8_t(*)[NET_AUTH_KEY_LEN])key;
		nkeys = 1;
	}
	idx = net_auth_check(n->auth, p ? &p->rx_key : NULL, keys, nkeys, pkt, m->iov[0].iov_base,
			     m->len);
	if (idx < 0)
		return auth_failed(n, m, pkt, p, "failed authentication");
	memcpy(n->rx.key, keys[idx], NET_AUTH_KEY_LEN);
	explicit_bzero(key, sizeof(key));
	n->rx.keyed = true;
	return true;
}

/*
 * A packet from a backend must carry a valid MAC under this endpoint's key
 * (auth.h); a client's is client_authentic's. Else it is dropped, counted
 * against the id it claims, and logged now and then.
 */
static bool
authentic(struct net *n, const struct env_dgram_msg *m, const struct net_pkt *pkt)
{
	const uint8_t(*keys)[NET_AUTH_KEY_LEN];
	struct net_peer *p;
	unsigned nkeys;

	n->rx.keyed = false;
	if (n->auth == NULL)
		return auth_failed(n, m, pkt, NULL,
				   "is authenticated, and this endpoint holds no key");
	if (net_id_is_client(pkt->src_id))
		return net_auth_key_id(n->auth) == NET_KEY_NETWORK
			   ? client_authentic(n, m, pkt)
			   : auth_failed(n, m, pkt, NULL, "is a client's, at a client");
	p = pkt->dst_id == n->id ? net_peer_get(n, pkt->src_id) : NULL;
	if (!(pkt->flags & NET_FLAG_MAC))
		return auth_failed(n, m, pkt, p, "has no MAC");
	/* a backend's: under this endpoint's own key (its network key, a client's key) */
	nkeys = pkt->key_id == net_auth_key_id(n->auth) ? net_auth_keys(n->auth, pkt->key_id, &keys)
							: 0;
	if (nkeys == 0 || net_auth_check(n->auth, p ? &p->rx_key : NULL, keys, nkeys, pkt,
					 m->iov[0].iov_base, m->len) < 0)
		return auth_failed(n, m, pkt, p, "failed authentication");
	return true;
}

static void
on_recv(void *arg, struct net_transport *t, const struct env_dgram_msg *msgs, unsigned cnt)
{
	struct net *n = arg;
	unsigned tp = (unsigned)(t - n->tps);

	for (unsigned i = 0; i < cnt; i++) {
		struct net_pkt pkt;
		int rc = net_pkt_decode(msgs[i].iov[0].iov_base, msgs[i].len, &pkt);

		n->st.pkts_received++;
		n->st.bytes_received += msgs[i].len;
		if (rc == -EPROTO) {
			n->st.bad_magic++;
			continue;
		}
		if (rc == SH_ECRC) {
			n->st.bad_crc++;
			continue;
		}
		if (rc < 0) {
			n->st.bad_format++;
			continue;
		}
		if ((n->auth != NULL || pkt.flags != 0) && !authentic(n, &msgs[i], &pkt))
			continue;
		on_packet(n, tp, &msgs[i].peer, &pkt);
		if (n->destroying)
			return;
	}
	/* acks and replies produced by this batch go out now, together */
	flush_dirty(n);
}

/* ---- liveness ---- */

void
net_client_keys_changed(struct net *n)
{
	__atomic_add_fetch(&n->keys_gen, 1, __ATOMIC_RELEASE);
}

static void
peer_free(struct net *n, struct net_peer *p)
{
	explicit_bzero(p->ckey, sizeof(p->ckey));
	net_sess_free(p);
	net_mac_key_fini(&p->tx_key);
	net_mac_key_fini(&p->rx_key);
	sh_htable_remove(&n->peers, &p->hn);
	sh_list_del(&p->link);
	sh_free(p);
}

/* A client gone long enough, with nothing that points at it: forget it. */
static bool
peer_forgettable(const struct net *n, const struct net_peer *p, uint64_t now)
{
	return p->learned && p->state == SESS_IDLE && p->nreqs == 0 && sh_list_empty(&p->calls) &&
	       !p->dirty && now - p->last_rx_ns >= n->cfg.forget_ns &&
	       now - p->last_tx_ns >= n->cfg.forget_ns;
}

/* The sessions' housekeeping period: a node's transports (and its workers') tick together. */
static uint64_t
tick_ns(const struct net *n)
{
	return SH_MIN(n->cfg.keepalive_ns / 2, n->cfg.rto_min_ns * 5);
}

static void
tick(struct env_timer *t)
{
	struct net *n = t->arg;
	uint64_t now = env_now(n->env);
	struct sh_list *pos, *tmp;

	n->tick_late = n->last_tick_ns != 0 && now - n->last_tick_ns > 3 * tick_ns(n);
	n->last_tick_ns = now;
	sh_list_for_each_safe (pos, tmp, &n->peer_list) {
		struct net_peer *p = sh_list_entry(pos, struct net_peer, link);

		if (peer_forgettable(n, p, now)) {
			n->st.peers_forgotten++;
			peer_free(n, p);
			continue;
		}
		net_paths_tick(p, now);
		if (p->state == SESS_ESTABLISHED) {
			if (now - p->last_rx_ns >= n->cfg.dead_ns) {
				n->st.peers_dead++;
				net_sess_down(p, -ETIMEDOUT);
			} else if (now - p->last_tx_ns >= n->cfg.keepalive_ns) {
				send_ctl(n, p, NET_PKT_KEEPALIVE);
			}
		} else if (p->state == SESS_CONNECTING) {
			if (now - p->last_rx_ns >= n->cfg.dead_ns) {
				/* nobody answers: give up this attempt; waiting calls keep their
				 * deadlines */
				net_sess_reset(p);
				net_rpc_sess_down(p, false);
			} else if (now - p->hello_ns >= p->hello_rto_ns) {
				p->hello_ns = now;
				p->hello_rto_ns = SH_MIN(p->hello_rto_ns * 2, n->cfg.rto_max_ns);
				send_ctl(n, p, NET_PKT_HELLO);
			}
		}
	}
	net_rpc_tick(n, now);
	net_out_flush(n);
	env_timer_arm_period(t, tick_ns(n));
}

/* ---- life cycle ---- */

int
net_transport_open(struct net *n, unsigned i)
{
	int rc;

	n->tps[i].ops = net_transport_find(n->ifaces[i].transport);
	if (n->tps[i].ops == NULL) {
		n->tps[i].impl = NULL;
		return -EPROTONOSUPPORT; /* a transport this process did not start (DPDK) */
	}
	n->tps[i].dev = n->ifaces[i].dev;
	n->tps[i].recv = on_recv;
	n->tps[i].arg = n;
	rc = n->tps[i].ops->open(&n->tps[i], n->env, &n->ifaces[i].addr);
	if (rc < 0) {
		n->tps[i].impl = NULL;
		return rc;
	}
	n->tps[i].ops->local_addr(&n->tps[i], &n->ifaces[i].addr);
	if (n->tps[i].ops->mtu != NULL) {
		uint32_t own = n->tps[i].ops->mtu(&n->tps[i]);

		/* a configured MTU is not more than the interface takes */
		if (own != 0 && (n->ifaces[i].mtu == 0 || own < n->ifaces[i].mtu))
			n->ifaces[i].mtu = own;
	}
	n->ifaces[i].mtu = SH_MIN(n->ifaces[i].mtu, n->tps[i].ops->max_dgram);
	/* (an MTU under the protocol's least is not said: the peers could not take it) */
	n->mtu_own[i] = n->ifaces[i].mtu >= NET_MTU_MIN;
	if (n->ifaces[i].mtu == 0)
		n->ifaces[i].mtu = net_default_mtu(&n->ifaces[i].addr);
	return 0;
}

static int
check_config(const struct net_config *c)
{
	if (c->node_id == 0 || c->nifaces == 0 || c->nifaces > NET_MAX_IFACES || c->ifaces == NULL)
		return -EINVAL;
	if (c->window > 8192 || (c->window != 0 && c->window < 16))
		return -EINVAL;
	for (unsigned i = 0; i < c->nifaces; i++)
		if (c->ifaces[i].mtu != 0 && c->ifaces[i].mtu < 512)
			return -EINVAL;
	/* an ack held longer than half the shortest timeout would make the sender time out */
	if ((c->delack_ns ? c->delack_ns : DELACK_NS) * 2 >
	    (c->rto_min_ns ? c->rto_min_ns : RTO_MIN_NS))
		return -EINVAL;
	return 0;
}

int
net_create(struct env *env, const struct net_config *cfg, struct net **out)
{
	struct net *n;
	int rc = check_config(cfg);

	if (rc < 0) {
		sh_log_warn("net_create: invalid configuration");
		return rc;
	}
	n = sh_calloc(1, sizeof(*n));
	if (n == NULL)
		return -ENOMEM;
	n->env = env;
	n->cfg = *cfg;
	n->cfg.ifaces = NULL;
	n->cfg.auth_key = n->cfg.auth_key_also = NULL; /* held by n->auth */
#define DEFAULT(f, v)      \
	if (n->cfg.f == 0) \
	n->cfg.f = (v)
	DEFAULT(rto_min_ns, RTO_MIN_NS);
	DEFAULT(rto_max_ns, 500 * SH_NSEC_PER_MSEC);
	DEFAULT(keepalive_ns, 250 * SH_NSEC_PER_MSEC);
	DEFAULT(dead_ns, 5 * SH_NSEC_PER_SEC);
	DEFAULT(forget_ns, 30 * SH_NSEC_PER_SEC);
	DEFAULT(delack_ns, DELACK_NS);
	DEFAULT(max_msg, 1u << 30);
	DEFAULT(window, 1024);
	DEFAULT(cwnd_init, 64);
	DEFAULT(max_inflight, 4u << 20);
	DEFAULT(reply_ttl_ns, 60 * SH_NSEC_PER_SEC);
	DEFAULT(probe_ns, 100 * SH_NSEC_PER_MSEC);
	DEFAULT(path_hold_ns, 2 * SH_NSEC_PER_SEC);
#undef DEFAULT
	if (n->cfg.cwnd_init > n->cfg.window)
		n->cfg.cwnd_init = n->cfg.window;
	n->id = cfg->node_id;
	n->inc = cfg->incarnation ? cfg->incarnation : SH_MAX(env_realtime(env), 1);
	sh_list_init(&n->peer_list);
	sh_list_init(&n->dirty);
	env_task_init(env, &n->flush_task, flush_task, n);
	env_task_init(env, &n->refused_task, net_paths_refused_task, n);
	env_timer_init(env, &n->tick, tick, n);
	if (cfg->auth_key != NULL && (rc = net_auth_create(env, cfg->auth_key, cfg->auth_key_also,
							   cfg->auth_key_id, &n->auth)) < 0)
		goto out_free;
	rc = sh_htable_init(&n->peers, 64);
	if (rc < 0)
		goto out_free;
	rc = net_rpc_init(n);
	if (rc < 0)
		goto out_peers;
	for (unsigned i = 0; i < cfg->nifaces; i++) {
		n->ifaces[i] = cfg->ifaces[i];
		rc = net_transport_open(n, i);
		if (rc < 0)
			goto out_tps;
		n->nifaces++;
	}
	env_timer_arm_period(&n->tick, tick_ns(n));
	*out = n;
	return 0;

out_tps:
	for (unsigned i = 0; i < n->nifaces; i++)
		n->tps[i].ops->close(&n->tps[i]);
	net_rpc_fini(n);
out_peers:
	sh_htable_fini(&n->peers);
out_free:
	net_auth_destroy(n->auth);
	sh_free(n);
	return rc;
}

void
net_destroy(struct net *n)
{
	struct sh_list *pos;

	if (n == NULL)
		return;
	n->destroying = true;
	env_timer_cancel(&n->tick);
	env_task_cancel(&n->flush_task);
	env_task_cancel(&n->refused_task);
	net_rpc_fini(n);
	while ((pos = n->peer_list.next) != &n->peer_list)
		peer_free(n, sh_list_entry(pos, struct net_peer, link));
	for (unsigned i = 0; i < n->nifaces; i++)
		if (n->tps[i].impl != NULL)
			n->tps[i].ops->close(&n->tps[i]);
	sh_htable_fini(&n->peers);
	net_auth_destroy(n->auth);
	sh_free(n);
}

uint64_t
net_node_id(const struct net *n)
{
	return n->id;
}

struct env *
net_env(const struct net *n)
{
	return n->env;
}

uint64_t
net_incarnation(const struct net *n)
{
	return n->inc;
}

void
net_stats(const struct net *n, struct net_stats *out)
{
	*out = n->st;
	out->reply_cache_entries = n->nreplies;
}

void
net_op_stats_sum(struct net_op_stats *into, const struct net_op_stats *from)
{
	into->requests += from->requests;
	into->errors += from->errors;
	into->bytes_in += from->bytes_in;
	into->bytes_out += from->bytes_out;
	into->lat_sum_ns += from->lat_sum_ns;
	for (unsigned b = 0; b < NET_LAT_BUCKETS; b++)
		into->lat[b] += from->lat[b];
}

void
net_op_stats_add(const struct net *n, struct net_op_stats *out)
{
	for (unsigned op = 0; op < NET_OPS_TRACKED; op++)
		net_op_stats_sum(&out[op], &n->ops[op]);
}

unsigned
net_peer_stats(const struct net *n, struct net_peer_stats *out, unsigned max)
{
	unsigned cnt = 0;
	struct sh_list *pos;

	sh_list_for_each (pos, &n->peer_list) {
		const struct net_peer *p = sh_list_entry(pos, struct net_peer, link);

		if (cnt < max) {
			out[cnt] = p->st;
			out[cnt].id = p->id;
			out[cnt].srtt_ns = p->rtt_valid ? p->srtt_ns : 0;
			out[cnt].connected = p->state == SESS_ESTABLISHED;
			out[cnt].learned = p->learned;
			out[cnt].npaths = (unsigned)SH_MAX(
			    net_peer_paths(n, p->id, out[cnt].paths, NET_PEER_PATHS), 0);
			out[cnt].npaths = SH_MIN(out[cnt].npaths, (unsigned)NET_PEER_PATHS);
		}
		cnt++;
	}
	return cnt;
}

int
net_iface_addr(const struct net *n, unsigned i, struct env_addr *out)
{
	if (i >= n->nifaces || n->tps[i].impl == NULL)
		return -EINVAL;
	*out = n->ifaces[i].addr;
	return 0;
}
