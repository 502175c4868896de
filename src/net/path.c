// SPDX-License-Identifier: Apache-2.0
/*
 * Paths: the pairs of a local interface and one of a peer's, over which
 * one session's packets go (docs/protocol.md "Paths and failover").
 *
 * The session is per peer and its sequence numbers do not care which
 * path a packet takes, so a packet lost on a failed path is retransmitted
 * on another one and the RPC above never sees the failure. With a single
 * path nothing here runs beyond the bookkeeping.
 *
 * With several, each path is judged on its own:
 *   - probed every probe_ns: NET_PATH_MISSES probes in a row unanswered
 *     take it DOWN; the probes give its RTT and loss (a moving average);
 *   - a retransmission timeout of a packet sent on it makes it suspect at
 *     once (failover within one RTO under traffic; one path of a peer at a
 *     time, or several through one interface), and it is probed right
 *     away: an answer clears the suspicion;
 *   - taken down by its probes, what was in flight on it goes on the others;
 *   - the local stack refusing a send from its interface (no route: the
 *     link is down) makes every path from that interface suspect, and what
 *     was in flight on them is sent again on the others at once;
 *   - a path back from DOWN is in HOLD: it carries nothing until it has
 *     answered every probe for path_hold_ns (no flapping).
 * A packet goes on the best class of paths (path_rank: healthy ones, a
 * same-label pair before a cross-label one; then lossy ones; then held,
 * suspect or down ones), and among equals on the one with the fewest
 * bytes in flight, so healthy links share the traffic.
 */
#include <errno.h>
#include <string.h>

#include "net_int.h"

SH_LOG_FACILITY("net.path");

#define LOSS_SHIFT 3 /* moving average of probe loss: 1/8 of each new sample */
#define PPM	   1000000u

const char *
net_path_state_name(enum net_path_state s)
{
	switch (s) {
	case NET_PATH_UNKNOWN:
		return "unknown";
	case NET_PATH_UP:
		return "up";
	case NET_PATH_DOWN:
		return "down";
	case NET_PATH_HOLD:
		return "hold";
	}
	return "?";
}

static bool
same_label(const struct net_iface *a, const struct net_iface *b)
{
	return a->label[0] != '\0' && strcmp(a->label, b->label) == 0;
}

/* Each path's MTU, the smaller of its two ends' (and the transport's); the peer's, the least. */
static void
paths_mtu(struct net_peer *p)
{
	struct net *n = p->net;
	uint32_t was = p->mtu;

	p->mtu = 0;
	for (unsigned k = 0; k < p->npaths; k++) {
		struct net_path *x = &p->paths[k];
		uint32_t mine = n->mtu_own[x->local] ? n->ifaces[x->local].mtu
						     : net_default_mtu(&p->ifaces[x->remote].addr);

		x->mtu = SH_MIN(mine, p->ifaces[x->remote].mtu);
		x->mtu = SH_MIN(x->mtu, n->tps[x->local].ops->max_dgram);
		p->mtu = p->mtu == 0 ? x->mtu : SH_MIN(p->mtu, x->mtu);
	}
	if (was != 0 && p->mtu != 0 && p->mtu < was)
		net_sess_recut(p); /* an interface that takes less joined or spoke */
}

void
net_paths_build(struct net_peer *p)
{
	struct net *n = p->net;
	struct net_path old[NET_MAX_PATHS];
	unsigned nold = p->npaths;

	memcpy(old, p->paths, sizeof(old));
	p->npaths = 0;
	for (unsigned i = 0; i < n->nifaces; i++) {
		for (unsigned j = 0; j < p->nifaces && p->npaths < NET_MAX_PATHS; j++) {
			struct net_path *x = &p->paths[p->npaths];

			if (n->ifaces[i].addr.family != p->ifaces[j].addr.family)
				continue;
			memset(x, 0, sizeof(*x));
			for (unsigned k = 0; k < nold; k++) {
				if (old[k].local == i && old[k].remote == j) {
					*x = old[k]; /* the same pair: keep what is known of it */
					x->inflight_bytes = 0;
				}
			}
			x->local = (uint8_t)i;
			x->remote = (uint8_t)j;
			x->cross = !same_label(&n->ifaces[i], &p->ifaces[j]);
			p->npaths++;
		}
	}
	paths_mtu(p);
	/* packets in flight were counted on the old numbering: count them again */
	for (uint32_t s = p->snd_una; p->tx != NULL && s != p->snd_nxt; s++) {
		struct net_txpkt *t = &p->tx[s % n->cfg.window];

		if (t->path >= p->npaths)
			t->path = 0;
		if (t->state == TX_INFLIGHT && p->npaths > 0)
			p->paths[t->path].inflight_bytes += t->bytes;
	}
	p->rr = 0;
	p->rx_path = 0;
	p->burst_left = 0;
}

void
net_path_said_mtu(struct net_peer *p, unsigned j, uint32_t mtu)
{
	if (j >= p->nifaces || p->ifaces[j].mtu == mtu)
		return;
	p->ifaces[j].mtu = mtu;
	paths_mtu(p);
	sh_log_debug("peer %llx: its interface %u takes %u-byte datagrams: %u to it now",
		     (unsigned long long)p->id, j, mtu, p->mtu);
}

/*
 * Lower is better. Healthy paths (up and clean, or not tried yet) first,
 * same-label ones before cross-label ones; then lossy ones; then those
 * held after coming back, suspect after a timeout, or down.
 */
static unsigned
path_rank(const struct net_path *x)
{
	if (x->suspect)
		return 8 + x->cross;
	switch (x->state) {
	case NET_PATH_UP:
		if (x->st.loss_ppm > NET_PATH_LOSSY_PPM)
			return 4 + x->cross;
		return x->cross ? 2 : 0;
	case NET_PATH_UNKNOWN:
		return x->cross ? 3 : 1;
	case NET_PATH_HOLD:
		return 6 + x->cross;
	default:
		return 10 + x->cross; /* down */
	}
}

/*
 * path_rank for a packet of bytes: a path whose MTU does not take it (a
 * fragment cut before the peer said a smaller MTU) ranks below every
 * other, so that it goes where it fits while any path does.
 */
static unsigned
pick_rank(const struct net_peer *p, const struct net_path *x, uint32_t bytes)
{
	return path_rank(x) + (bytes > net_room(p, x->mtu) ? 16 : 0);
}

unsigned
net_path_pick(struct net_peer *p, uint32_t bytes)
{
	unsigned best = 0, best_rank = ~0u;
	uint64_t best_bytes = 0;

	if (p->npaths <= 1)
		return 0;
	for (unsigned k = 0; k < p->npaths; k++) {
		/* start at the round-robin point: ties go to paths in turn */
		unsigned i = (p->rr + k) % p->npaths;
		const struct net_path *x = &p->paths[i];
		unsigned r = pick_rank(p, x, bytes);

		if (r < best_rank || (r == best_rank && x->inflight_bytes < best_bytes)) {
			best = i;
			best_rank = r;
			best_bytes = x->inflight_bytes;
		}
	}
	if (bytes == 0) {
		/*
		 * A control packet (an ack) goes back the way the peer's last
		 * packet came if that path is among the best: the peer chose it,
		 * so it works for the peer now, before this end has noticed
		 * another one failing.
		 */
		if (p->rx_path < p->npaths && path_rank(&p->paths[p->rx_path]) == best_rank)
			return p->rx_path;
		return best;
	}
	if (p->burst_left >= bytes && p->burst_path < p->npaths &&
	    pick_rank(p, &p->paths[p->burst_path], bytes) == best_rank) {
		p->burst_left -= bytes;
		return p->burst_path;
	}
	p->rr = best + 1;
	p->burst_path = best;
	p->burst_left = NET_PATH_BURST > bytes ? NET_PATH_BURST - bytes : 0;
	return best;
}

static void
loss_sample(struct net_path *x, bool lost)
{
	int64_t d = (int64_t)(lost ? PPM : 0) - x->st.loss_ppm;

	x->st.loss_ppm = (uint32_t)((int64_t)x->st.loss_ppm + d / (1 << LOSS_SHIFT));
}

static void
log_path(const struct net_peer *p, const struct net_path *x, const char *what)
{
	char a[64], b[64];

	sh_log_info("peer %llx: path %s -> %s %s", (unsigned long long)p->id,
		    env_addr_format(&p->net->ifaces[x->local].addr, a, sizeof(a)),
		    env_addr_format(&p->ifaces[x->remote].addr, b, sizeof(b)), what);
}

static void
path_down(struct net_peer *p, struct net_path *x)
{
	if (x->state == NET_PATH_DOWN)
		return;
	x->state = NET_PATH_DOWN;
	x->st.downs++;
	log_path(p, x, "down (probes unanswered)");
	/* what is in flight on it goes on the others now, not when a backed-off timer fires */
	if (p->state == SESS_ESTABLISHED)
		net_sess_path_lost(p, (unsigned)(x - p->paths));
}

/* A probe or its answer: the session's names, no acks (it may go on a dead path). */
static void
send_probe_pkt(struct net_peer *p, unsigned i, uint8_t type, uint32_t seq, uint32_t ts_ecr)
{
	struct net *n = p->net;
	struct net_pkt h = { .type = type,
			     .src_id = n->id,
			     .dst_id = p->id,
			     .src_inc = n->inc,
			     .dst_inc = p->inc,
			     .sess = p->sess,
			     .seq = seq,
			     .ts = net_now_us(n),
			     .ts_ecr = ts_ecr };

	net_out_begin(p, i);
	net_out_end(p, i, &h, 0, NULL, NULL, 0);
}

static void
send_probe(struct net_peer *p, unsigned i, uint64_t now)
{
	struct net_path *x = &p->paths[i];

	if (x->probe_acked != x->probe_seq && x->probe_ns != 0) {
		/*
		 * The last one was not answered in time: lost. It counts toward
		 * taking an up path down unless this end was itself too busy to
		 * look (its tick late: the answer may be waiting in the socket).
		 */
		bool alive = x->state == NET_PATH_UP && p->net->tick_late;

		x->st.probes_lost++;
		loss_sample(x, true);
		if (!alive && ++x->missed >= NET_PATH_MISSES)
			path_down(p, x);
		else if (x->state == NET_PATH_HOLD)
			x->state = NET_PATH_DOWN; /* not steady yet: start the hold again */
	}
	x->probe_seq++;
	x->probe_ns = now;
	x->st.probes_sent++;
	send_probe_pkt(p, i, NET_PKT_PROBE, x->probe_seq, 0);
}

void
net_path_suspect(struct net_peer *p, unsigned i)
{
	struct net_path *x;

	if (p->npaths <= 1 || i >= p->npaths)
		return;
	x = &p->paths[i];
	x->st.timeouts++;
	if (x->suspect)
		return;
	/*
	 * One path at a time: when the packets resent on another path time out
	 * too, the peer itself is the likely cause (busy, or everything to it
	 * down, which the probes tell): moving on to a third path, a cross-label
	 * one, would not help. Unless the two share an interface, ours or the
	 * peer's: that interface is the likely cause (its link down), and the
	 * paths that do not go through it are the way around (a peer's link
	 * down: both paths to it time out, and those to its other interface,
	 * held or cross-label, answer).
	 */
	for (unsigned k = 0; k < p->npaths; k++) {
		const struct net_path *y = &p->paths[k];

		if (y->suspect && y->local != x->local && y->remote != x->remote)
			return;
	}
	x->suspect = true;
	sh_log_debug("peer %llx: path %u suspect after a timeout", (unsigned long long)p->id, i);
	send_probe(p, i, env_now(p->net->env));
}

void
net_path_trusted(struct net_peer *p, unsigned i)
{
	if (i < p->npaths && p->paths[i].state != NET_PATH_DOWN)
		p->paths[i].suspect = false;
}

void
net_paths_refused(struct net *n, unsigned tp)
{
	n->refused_tps |= 1u << tp;
	env_post(&n->refused_task);
}

void
net_paths_refused_task(struct env_task *task)
{
	struct net *n = task->arg;
	uint32_t tps = n->refused_tps;
	struct sh_list *pos;

	n->refused_tps = 0;
	sh_list_for_each (pos, &n->peer_list) {
		struct net_peer *p = sh_list_entry(pos, struct net_peer, link);
		bool elsewhere = false;

		for (unsigned i = 0; p->npaths > 1 && i < p->npaths; i++) {
			struct net_path *x = &p->paths[i];

			if (!(tps & 1u << x->local) || p->state != SESS_ESTABLISHED)
				continue;
			if (!x->suspect) {
				x->suspect = true;
				x->st.refused++;
			}
		}
		for (unsigned i = 0; i < p->npaths && !elsewhere; i++)
			elsewhere = !p->paths[i].suspect && p->paths[i].state != NET_PATH_DOWN;
		/*
		 * What was in flight on them goes on another path at once, if one
		 * is left to take it. With none (every local link down), the
		 * retransmission timer resends, backing off: resent at once, it
		 * would be refused again, and again, without end.
		 */
		for (unsigned i = 0; elsewhere && i < p->npaths; i++)
			if ((tps & 1u << p->paths[i].local) && p->state == SESS_ESTABLISHED)
				net_sess_path_lost(p, i);
	}
}

void
net_paths_tick(struct net_peer *p, uint64_t now)
{
	struct net *n = p->net;

	if (p->npaths <= 1 || p->state == SESS_IDLE)
		return;
	for (unsigned i = 0; i < p->npaths; i++) {
		struct net_path *x = &p->paths[i];

		if (x->state == NET_PATH_HOLD && x->missed == 0 &&
		    now - x->healthy_ns >= n->cfg.path_hold_ns) {
			x->state = NET_PATH_UP;
			log_path(p, x, "back up");
		}
		if (now - x->probe_ns >= n->cfg.probe_ns)
			send_probe(p, i, now);
	}
}

/* Which of p's interfaces wrote from addr; a learned peer's new address is learned. */
static int
remote_index(struct net_peer *p, unsigned tp, const struct env_addr *from,
	     const struct net_pkt *pkt)
{
	for (unsigned j = 0; j < p->nifaces; j++)
		if (env_addr_eq(&p->ifaces[j].addr, from))
			return (int)j;
	if (!p->learned || pkt->src_inc != p->inc || p->nifaces >= NET_MAX_IFACES)
		return -ENOENT;
	/* a client writing from another of its interfaces: on the switch it reached us by */
	p->ifaces[p->nifaces++] = net_learned_iface(p->net, tp, from);
	net_paths_build(p);
	return (int)p->nifaces - 1;
}

bool
net_path_rx(struct net_peer *p, unsigned tp, const struct env_addr *from, const struct net_pkt *pkt)
{
	uint64_t now = env_now(p->net->env);
	struct net_path *x = NULL;
	int j = remote_index(p, tp, from, pkt);
	unsigned i;

	if (j >= 0 && pkt->mtu != 0 && (p->inc == 0 || pkt->src_inc >= p->inc))
		net_path_said_mtu(p, (unsigned)j, pkt->mtu); /* (not an older incarnation's) */
	for (i = 0; j >= 0 && i < p->npaths; i++) {
		if (p->paths[i].local == tp && p->paths[i].remote == (unsigned)j) {
			x = &p->paths[i];
			break;
		}
	}
	if (x == NULL)
		return pkt->type == NET_PKT_PROBE || pkt->type == NET_PKT_PROBE_ACK;
	x->st.pkts_received++;
	x->st.bytes_received += net_pkt_hdr_len(pkt->nsack) + pkt->payload_len;
	if (pkt->type == NET_PKT_PROBE) {
		x->st.probes_answered++;
		send_probe_pkt(p, i, NET_PKT_PROBE_ACK, pkt->seq, pkt->ts);
		net_mark_dirty(p); /* the batch goes out at the end of this receive */
		return true;
	}
	if (pkt->type == NET_PKT_PROBE_ACK) {
		uint32_t us = net_now_us(p->net) - pkt->ts_ecr;

		if (pkt->seq != x->probe_seq) {
			/* a late answer to a recent probe: counted lost already; it was not */
			if (net_seq_lt(pkt->seq, x->probe_seq) && x->probe_seq - pkt->seq <= 4) {
				loss_sample(x, false);
				x->missed = 0;
			}
			return true;
		}
		x->probe_acked = pkt->seq;
		if (us < 10u * 1000 * 1000) {
			uint64_t r = (uint64_t)us * 1000;

			x->st.rtt_ns = x->st.rtt_ns == 0 ? r : (7 * x->st.rtt_ns + r) / 8;
		}
		loss_sample(x, false);
		x->missed = 0;
		x->suspect = false;
		if (x->state == NET_PATH_DOWN) {
			/* judged afresh: what it lost while down says nothing of the link now */
			x->state = NET_PATH_HOLD;
			x->healthy_ns = now;
			x->st.loss_ppm = 0;
		} else if (x->state == NET_PATH_UNKNOWN) {
			x->state = NET_PATH_UP;
		}
		return true;
	}
	if (x->state == NET_PATH_UNKNOWN)
		x->state = NET_PATH_UP;
	p->rx_path = i;
	return false;
}

int
net_peer_paths(const struct net *n, uint64_t id, struct net_path_stats *out, unsigned max)
{
	struct net_peer *p = net_peer_get(n, id);
	unsigned best_rank = ~0u;

	if (p == NULL)
		return -ENOENT;
	for (unsigned i = 0; i < p->npaths; i++)
		best_rank = SH_MIN(best_rank, path_rank(&p->paths[i]));
	for (unsigned i = 0; i < p->npaths && i < max; i++) {
		const struct net_path *x = &p->paths[i];
		struct net_path_stats *o = &out[i];

		*o = x->st;
		o->local = n->ifaces[x->local].addr;
		o->remote = p->ifaces[x->remote].addr;
		memcpy(o->local_label, n->ifaces[x->local].label, NET_LABEL_MAX);
		memcpy(o->remote_label, p->ifaces[x->remote].label, NET_LABEL_MAX);
		o->state = x->state;
		o->cross = x->cross;
		o->suspect = x->suspect;
		o->in_use = path_rank(x) == best_rank;
		o->mtu = x->mtu;
	}
	return (int)p->npaths;
}
