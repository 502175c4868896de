// SPDX-License-Identifier: Apache-2.0
/*
 * The reliable session between two nodes: the sender's window of packets
 * (retransmission from measured RTT, fast retransmit on selective acks, a
 * congestion window), the receiver's reorder buffer and acks, and the
 * cutting of messages into fragments and their reassembly. The handshake,
 * liveness and the packet batches are in net.c; docs/protocol.md has the
 * state machine and the congestion control.
 *
 * Invariants (checked by assert_sess in debug builds):
 *   snd_una <= snd_nxt <= snd_una + window
 *   inflight + nlost + nsacked == packets in [snd_una, snd_nxt)
 *   every slot outside [snd_una, snd_nxt) is TX_FREE
 *   rx slots are used only for seq in (rcv_nxt, rcv_nxt + window)
 * Packets are delivered to the RPC layer in sequence order, so the
 * fragments of one message arrive in order and each exactly once.
 */
#include <assert.h>
#include <errno.h>
#include <string.h>

#include "net_int.h"

SH_LOG_FACILITY("net.sess");

#define ACK_EVERY 8 /* in-order packets that make an ack go at once */

static inline uint32_t
W(const struct net_peer *p)
{
	return p->net->cfg.window;
}

static inline struct net_txpkt *
txslot(struct net_peer *p, uint32_t seq)
{
	return &p->tx[seq % W(p)];
}

static inline struct net_rxpkt *
rxslot(struct net_peer *p, uint32_t seq)
{
	return &p->rx[seq % W(p)];
}

static void
assert_sess(struct net_peer *p)
{
#ifdef SH_DEBUG
	uint32_t in = 0, lost = 0, sacked = 0;

	assert(net_seq_le(p->snd_una, p->snd_nxt));
	assert(p->snd_nxt - p->snd_una <= W(p));
	for (uint32_t s = p->snd_una; s != p->snd_nxt; s++) {
		struct net_txpkt *t = txslot(p, s);

		in += t->state == TX_INFLIGHT;
		lost += t->state == TX_LOST;
		sacked += t->state == TX_SACKED;
		assert(t->state != TX_FREE);
	}
	assert(in == p->inflight && lost == p->nlost && sacked == p->nsacked);
#else
	(void)p;
#endif
}

static void
txmsg_put(struct net_txmsg *m)
{
	if (--m->ref > 0)
		return;
	sh_iov_fini(&m->data);
	sh_free(m);
}

static void
txpkt_clear(struct net_txpkt *t)
{
	if (t->c0.m != NULL)
		txmsg_put(t->c0.m);
	for (unsigned i = 1; i < t->nchunks; i++)
		txmsg_put(t->more[i - 1].m);
	sh_free(t->more);
	memset(t, 0, sizeof(*t));
}

static inline struct net_txchunk *
txchunk(struct net_txpkt *t, unsigned i)
{
	return i == 0 ? &t->c0 : &t->more[i - 1];
}

/* A packet enters or leaves the bytes in flight (the session's and its path's). */
static inline void
tx_in(struct net_peer *p, struct net_txpkt *t)
{
	p->inflight++;
	p->inflight_bytes += t->bytes;
	p->paths[t->path].inflight_bytes += t->bytes;
}

static inline void
tx_out(struct net_peer *p, struct net_txpkt *t)
{
	p->inflight--;
	p->inflight_bytes -= t->bytes;
	p->paths[t->path].inflight_bytes -= t->bytes;
}

static void rto_fire(struct env_timer *t);
static void delack_fire(struct env_timer *t);

int
net_sess_alloc(struct net_peer *p)
{
	struct net *n = p->net;

	p->tx = sh_alloc_array(n->cfg.window, sizeof(*p->tx));
	p->rx = sh_alloc_array(n->cfg.window, sizeof(*p->rx));
	if (p->tx == NULL || p->rx == NULL) {
		sh_free(p->tx);
		sh_free(p->rx);
		return -ENOMEM;
	}
	sh_list_init(&p->sendq);
	sh_list_init(&p->rxmsgs);
	env_timer_init(n->env, &p->rto_timer, rto_fire, p);
	env_timer_init(n->env, &p->delack, delack_fire, p);
	p->cwnd = n->cfg.cwnd_init;
	p->ssthresh = n->cfg.window;
	p->rto_ns = n->cfg.rto_min_ns * 5;
	return 0;
}

void
net_sess_reset(struct net_peer *p)
{
	struct sh_list *pos;

	for (uint32_t s = p->snd_una; s != p->snd_nxt; s++)
		txpkt_clear(txslot(p, s));
	while ((pos = sh_list_pop(&p->sendq)) != NULL)
		txmsg_put(sh_list_entry(pos, struct net_txmsg, qlink));
	for (uint32_t i = 0; i < W(p); i++) {
		if (p->rx[i].used)
			sh_buf_put(p->rx[i].data);
		memset(&p->rx[i], 0, sizeof(p->rx[i]));
	}
	while ((pos = sh_list_pop(&p->rxmsgs)) != NULL) {
		struct net_rxmsg *m = sh_list_entry(pos, struct net_rxmsg, link);

		sh_buf_put(m->buf);
		sh_free(m);
	}
	env_timer_cancel(&p->rto_timer);
	env_timer_cancel(&p->delack);
	p->state = SESS_IDLE;
	p->snd_una = p->snd_nxt = p->rcv_nxt = 1;
	p->inflight = p->nlost = p->nsacked = 0;
	p->inflight_bytes = 0;
	for (unsigned i = 0; i < p->npaths; i++)
		p->paths[i].inflight_bytes = 0;
	p->rx_buffered = 0;
	p->ack_pending = 0;
	p->ack_now = false;
	p->in_recovery = false;
	p->cwnd = p->net->cfg.cwnd_init;
	p->ssthresh = W(p);
	p->cwnd_acc = 0;
	p->backoff = 0;
	p->ts_recent = 0;
}

void
net_sess_free(struct net_peer *p)
{
	net_sess_reset(p);
	sh_free(p->tx);
	sh_free(p->rx);
}

void
net_sess_start(struct net_peer *p, uint32_t sess)
{
	net_sess_reset(p);
	p->sess = sess;
	p->state = SESS_ESTABLISHED;
	p->next_msg_id = 1;
	p->peer_rwnd = W(p);
	p->last_rx_ns = p->last_tx_ns = env_now(p->net->env);
}

/* Cut m into fragments that fit p's datagrams. */
static void
cut(const struct net_peer *p, struct net_txmsg *m)
{
	uint32_t maxp = net_pkt_room(p) - NET_CHUNK_HDR;

	m->frag_cnt = m->len == 0 ? 1 : (uint32_t)(((uint64_t)m->len + maxp - 1) / maxp);
	m->frag_size = net_frag_size(m->len, m->frag_cnt);
}

void
net_sess_recut(struct net_peer *p)
{
	struct sh_list *pos;

	sh_list_for_each (pos, &p->sendq) {
		struct net_txmsg *m = sh_list_entry(pos, struct net_txmsg, qlink);

		if (m->next_frag == 0)
			cut(p, m);
	}
}

int
net_sess_queue(struct net_peer *p, const struct sh_iov *msg, const uint64_t *reply_key)
{
	struct net_txmsg *m = sh_calloc(1, sizeof(*m));
	uint32_t len = (uint32_t)msg->len;

	if (m == NULL)
		return -ENOMEM;
	sh_iov_init(&m->data);
	if (sh_iov_append_range(&m->data, msg, 0, msg->len) < 0) {
		sh_iov_fini(&m->data);
		sh_free(m);
		return -ENOMEM;
	}
	m->ref = 1; /* the send queue's */
	m->len = len;
	if (reply_key != NULL) {
		m->is_reply = true;
		memcpy(m->key, reply_key, sizeof(m->key));
	}
	cut(p, m);
	sh_list_add_tail(&p->sendq, &m->qlink);
	net_mark_dirty(p);
	return 0;
}

void
net_sess_fill_hdr(struct net_peer *p, struct net_pkt *h, uint8_t type)
{
	struct net *n = p->net;

	memset(h, 0, sizeof(*h));
	h->type = type;
	h->src_id = n->id;
	h->dst_id = p->id;
	h->src_inc = n->inc;
	h->dst_inc = p->inc;
	h->sess = p->sess;
	h->ts = net_now_us(n);
	if (p->state != SESS_ESTABLISHED)
		return;
	h->ack = p->rcv_nxt;
	h->rwnd = W(p) - p->rx_buffered;
	h->ts_ecr = p->ts_recent;
	/* selective acks: runs of buffered packets above rcv_nxt */
	if (p->rx_buffered > 0) {
		uint32_t s = p->rcv_nxt + 1, end = p->rcv_nxt + W(p);

		while (s != end && h->nsack < NET_MAX_SACK) {
			if (!rxslot(p, s)->used) {
				s++;
				continue;
			}
			h->sack[h->nsack].start = s;
			while (s != end && rxslot(p, s)->used)
				s++;
			h->sack[h->nsack++].end = s;
		}
	}
	/* this packet carries the ack */
	p->ack_pending = 0;
	p->ack_now = false;
	env_timer_cancel(&p->delack);
}

static void
send_data(struct net_peer *p, uint32_t seq)
{
	struct net_txpkt *t = txslot(p, seq);
	uint8_t *extra = net_out_begin(p, t->path);
	struct iovec zc[ENV_DGRAM_IOV_MAX - 2]; /* and the header's, and the MAC's */
	struct sh_buf *zbufs[ENV_DGRAM_IOV_MAX - 2];
	unsigned nzc = 0;
	size_t elen = 0;
	struct net_pkt h;

	for (unsigned i = 0; i < t->nchunks; i++) {
		struct net_txchunk *c = txchunk(t, i);
		struct net_txmsg *m = c->m;
		struct net_chunk ch = { .msg_id = m->id,
					.msg_len = m->len,
					.frag_idx = c->frag,
					.frag_cnt = m->frag_cnt,
					.len = net_frag_len(m->len, m->frag_cnt, c->frag) };
		size_t off = (size_t)c->frag * m->frag_size;

		net_chunk_hdr_put(extra + elen, &ch);
		elen += NET_CHUNK_HDR;
		if (t->nchunks == 1) {
			/* a lone chunk goes from the message's slices, uncopied */
			nzc =
			    sh_iov_range_bufs(&m->data, off, ch.len, zc, zbufs, SH_ARRAY_SIZE(zc));
		} else {
			sh_iov_copyout(&m->data, off, extra + elen, ch.len);
			elen += ch.len;
		}
	}
	net_sess_fill_hdr(p, &h, NET_PKT_DATA);
	h.seq = seq;
	h.nchunks = t->nchunks;
	t->sent_ns = env_now(p->net->env);
	net_out_end(p, t->path, &h, elen, zc, zbufs, nzc);
}

/* The retransmission timeout as backed off now: doubled per timeout in a row, at most rto_max. */
static uint64_t
backed_off_rto(const struct net_peer *p)
{
	return SH_MIN(p->rto_ns << SH_MIN(p->backoff, 10u), p->net->cfg.rto_max_ns);
}

static void
arm_rto(struct net_peer *p)
{
	env_timer_arm(&p->rto_timer, backed_off_rto(p));
}

/* Take the next chunk of m; m leaves the send queue with its last fragment. */
static void
take_chunk(struct net_peer *p, struct net_txmsg *m, struct net_txchunk *c)
{
	if (m->next_frag == 0) {
		m->id = p->next_msg_id++;
		p->net->st.msgs_sent++;
	}
	c->m = m;
	m->ref++;
	c->frag = m->next_frag++;
	if (m->next_frag == m->frag_cnt) {
		sh_list_del(&m->qlink);
		txmsg_put(m);
	}
}

static inline bool
small_whole(const struct net_txmsg *m, uint32_t room)
{
	return m->next_frag == 0 && m->frag_cnt == 1 && m->len + NET_CHUNK_HDR <= room;
}

/* Fill slot t from the send queue (not empty). */
static void
cut_packet(struct net_peer *p, struct net_txpkt *t)
{
	struct net_txmsg *m = sh_list_entry(p->sendq.next, struct net_txmsg, qlink);
	uint32_t room = SH_MIN(net_pkt_room(p), (uint32_t)NET_PACK_MAX);
	struct sh_list *pos;
	unsigned n = 0;

	memset(t, 0, sizeof(*t));
	t->nchunks = 1;
	if (!small_whole(m, room)) {
		t->bytes = net_frag_len(m->len, m->frag_cnt, m->next_frag);
		take_chunk(p, m, &t->c0);
		return;
	}
	/* how many small messages after m fit with it */
	room -= m->len + NET_CHUNK_HDR;
	for (pos = m->qlink.next; pos != &p->sendq && 1 + n < NET_MAX_CHUNKS; pos = pos->next) {
		struct net_txmsg *x = sh_list_entry(pos, struct net_txmsg, qlink);

		if (!small_whole(x, room))
			break;
		room -= x->len + NET_CHUNK_HDR;
		n++;
	}
	if (n > 0) {
		t->more = sh_alloc_array(n, sizeof(*t->more));
		if (t->more == NULL)
			n = 0; /* no memory: m goes alone */
	}
	t->bytes = m->len;
	take_chunk(p, m, &t->c0);
	for (unsigned i = 0; i < n; i++) {
		struct net_txmsg *x = sh_list_entry(p->sendq.next, struct net_txmsg, qlink);

		t->bytes += x->len;
		take_chunk(p, x, &t->more[i]);
	}
	t->nchunks = (uint16_t)(1 + n);
}

/* The path for packet t: by its payload with the chunks' headers, one whose MTU takes it. */
static unsigned
pick_path(struct net_peer *p, const struct net_txpkt *t)
{
	return net_path_pick(p, t->bytes + NET_CHUNK_HDR * t->nchunks);
}

void
net_sess_push(struct net_peer *p)
{
	struct net *n = p->net;
	uint32_t wnd = SH_MIN(p->cwnd, p->peer_rwnd);

	if (p->state != SESS_ESTABLISHED)
		return;
	if (wnd == 0)
		wnd = 1; /* probe a closed window: the ack reopens it */
	/* retransmit what was lost, oldest first */
	for (uint32_t s = p->snd_una; p->nlost > 0 && s != p->snd_nxt && p->inflight < wnd; s++) {
		struct net_txpkt *t = txslot(p, s);

		if (t->state != TX_LOST)
			continue;
		t->state = TX_INFLIGHT;
		t->retx++;
		p->nlost--;
		t->path = (uint8_t)pick_path(p, t); /* perhaps another path */
		tx_in(p, t);
		n->st.retransmits++;
		p->st.retransmits++;
		send_data(p, s);
	}
	/* then new packets: a fragment alone, or several small messages together */
	while (p->inflight < wnd && p->inflight_bytes < n->cfg.max_inflight &&
	       p->snd_nxt - p->snd_una < W(p) && !sh_list_empty(&p->sendq)) {
		struct net_txpkt *t = txslot(p, p->snd_nxt);

		cut_packet(p, t);
		t->state = TX_INFLIGHT;
		t->retx = 0;
		t->path = (uint8_t)pick_path(p, t);
		tx_in(p, t);
		send_data(p, p->snd_nxt++);
	}
	if (p->snd_una != p->snd_nxt && !env_timer_armed(&p->rto_timer))
		arm_rto(p);
	assert_sess(p);
}

void
net_sess_path_lost(struct net_peer *p, unsigned path)
{
	for (uint32_t s = p->snd_una; s != p->snd_nxt; s++) {
		struct net_txpkt *t = txslot(p, s);

		if (t->state == TX_INFLIGHT && t->path == path) {
			t->state = TX_LOST;
			tx_out(p, t);
			p->nlost++;
		}
	}
	if (p->nlost > 0)
		net_mark_dirty(p);
	assert_sess(p);
}

void
net_sess_heard(struct net_peer *p, uint64_t silent_ns)
{
	if (p->state != SESS_ESTABLISHED || p->backoff == 0 || p->snd_una == p->snd_nxt)
		return;
	if (silent_ns < backed_off_rto(p))
		return; /* it spoke while we waited: one way may be down, and backing off helps */
	p->backoff = 0;
	arm_rto(p);
	p->net->st.backoffs_ended++;
}

static void
rtt_sample(struct net_peer *p, uint64_t r)
{
	struct net *n = p->net;

	if (!p->rtt_valid) {
		p->srtt_ns = r;
		p->rttvar_ns = r / 2;
		p->rtt_valid = true;
	} else {
		uint64_t d = r > p->srtt_ns ? r - p->srtt_ns : p->srtt_ns - r;

		p->rttvar_ns = (3 * p->rttvar_ns + d) / 4;
		p->srtt_ns = (7 * p->srtt_ns + r) / 8;
	}
	p->rto_ns = p->srtt_ns + SH_MAX(4 * p->rttvar_ns, 100 * SH_NSEC_PER_USEC);
	if (p->rto_ns < n->cfg.rto_min_ns)
		p->rto_ns = n->cfg.rto_min_ns;
	if (p->rto_ns > n->cfg.rto_max_ns)
		p->rto_ns = n->cfg.rto_max_ns;
}

/* Release slot s (cumulatively acked); returns true if it was in flight or lost. */
static bool
release(struct net_peer *p, uint32_t s)
{
	struct net_txpkt *t = txslot(p, s);
	bool counted = t->state == TX_INFLIGHT || t->state == TX_LOST;

	for (unsigned i = 0; i < t->nchunks; i++) {
		struct net_txmsg *m = txchunk(t, i)->m;

		if (++m->acked == m->frag_cnt && m->is_reply)
			net_rpc_reply_acked(p->net, m->key);
	}

	if (t->state == TX_INFLIGHT) {
		tx_out(p, t);
	} else if (t->state == TX_LOST) {
		p->nlost--;
	} else if (t->state == TX_SACKED) {
		p->nsacked--;
	}
	txpkt_clear(t);
	return counted;
}

static void
enter_recovery(struct net_peer *p)
{
	if (p->in_recovery)
		return;
	p->in_recovery = true;
	p->recover = p->snd_nxt;
	p->ssthresh = SH_MAX(p->cwnd / 2, (uint32_t)NET_CWND_MIN);
	p->cwnd = p->ssthresh;
	p->cwnd_acc = 0;
}

void
net_sess_on_ack(struct net_peer *p, const struct net_pkt *pkt)
{
	struct net *n = p->net;
	uint32_t newly = 0, high = p->snd_una;
	bool sacked_any = false, sample = true;

	p->peer_rwnd = pkt->rwnd;
	if (net_seq_lt(p->snd_una, pkt->ack) && net_seq_le(pkt->ack, p->snd_nxt)) {
		while (p->snd_una != pkt->ack)
			newly += release(p, p->snd_una++);
	}
	for (unsigned i = 0; i < pkt->nsack; i++) {
		uint32_t a = pkt->sack[i].start, b = pkt->sack[i].end;

		if (net_seq_lt(a, p->snd_una))
			a = p->snd_una;
		if (net_seq_lt(p->snd_nxt, b))
			b = p->snd_nxt;
		for (uint32_t s = a; net_seq_lt(s, b); s++) {
			struct net_txpkt *t = txslot(p, s);

			if (t->state == TX_INFLIGHT || t->state == TX_LOST) {
				if (t->state == TX_INFLIGHT) {
					tx_out(p, t);
				} else {
					p->nlost--;
				}
				t->state = TX_SACKED;
				p->nsacked++;
				newly++;
			}
			sacked_any = true;
		}
		if (net_seq_lt(a, b) && net_seq_lt(high, b))
			high = b;
	}
	if (newly > 0 && p->rto_undo) {
		/*
		 * Eifel: an ack echoing a time before the timeout acks an original
		 * transmission, so the timeout was spurious (a late ack, not a loss):
		 * take back the window cut and the "lost" marks not yet resent.
		 */
		p->rto_undo = false;
		/*
		 * Not spurious (it acks what was sent again): no RTT from it, as
		 * Karn's rule has it. Were the acks, not the packets, lost (the
		 * way back out), it would count the outage as one RTT and keep the
		 * RTO at its most for many RTTs after.
		 */
		sample = false;
		if (pkt->ts_ecr != 0 && (int32_t)(pkt->ts_ecr - p->rto_ts) < 0) {
			sample = true;
			n->st.spurious_timeouts++;
			net_path_trusted(p, p->rto_path); /* it was slow, not broken */
			p->cwnd = SH_MAX(p->cwnd, p->undo_cwnd);
			p->ssthresh = SH_MAX(p->ssthresh, p->undo_ssthresh);
			for (uint32_t s = p->snd_una; p->nlost > 0 && s != p->snd_nxt; s++) {
				struct net_txpkt *t = txslot(p, s);

				if (t->state != TX_LOST)
					continue;
				t->state = TX_INFLIGHT;
				p->nlost--;
				tx_in(p, t);
			}
		}
	}
	if (newly > 0) {
		if (pkt->ts_ecr != 0 && sample) {
			uint32_t us = net_now_us(n) - pkt->ts_ecr;

			/*
			 * One longer than the most an RTO may be measures an outage
			 * (an ack the peer could not send while the way back was out,
			 * deemed spurious by Eifel), not the path: it would hold the
			 * RTO at its most for many RTTs after.
			 */
			if ((uint64_t)us * 1000 <= n->cfg.rto_max_ns)
				rtt_sample(p, (uint64_t)us * 1000);
		}
		p->backoff = 0;
	}
	/* fast retransmit: a packet with NET_DUPTHRESH sacked ones above it is lost */
	if (sacked_any) {
		for (uint32_t s = p->snd_una; net_seq_lt(s, high) && high - s > NET_DUPTHRESH;
		     s++) {
			struct net_txpkt *t = txslot(p, s);

			if (t->state != TX_INFLIGHT)
				continue;
			/* a retransmission is given an RTT before being declared lost again */
			if (t->retx > 0 &&
			    env_now(n->env) - t->sent_ns < p->srtt_ns + p->rttvar_ns * 4)
				continue;
			t->state = TX_LOST;
			tx_out(p, t);
			p->nlost++;
			n->st.fast_retransmits++;
			enter_recovery(p);
		}
	}
	if (p->in_recovery && net_seq_le(p->recover, p->snd_una))
		p->in_recovery = false;
	if (newly > 0 && !p->in_recovery) {
		if (p->cwnd < p->ssthresh) {
			p->cwnd += newly;
		} else {
			p->cwnd_acc += newly;
			while (p->cwnd_acc >= p->cwnd) {
				p->cwnd_acc -= p->cwnd;
				p->cwnd++;
			}
		}
		if (p->cwnd > W(p))
			p->cwnd = W(p);
	}
	if (p->snd_una == p->snd_nxt)
		env_timer_cancel(&p->rto_timer);
	else if (newly > 0)
		arm_rto(p);
	if (newly > 0 || p->nlost > 0 || !sh_list_empty(&p->sendq))
		net_mark_dirty(p);
	assert_sess(p);
}

static void
rto_fire(struct env_timer *tm)
{
	struct net_peer *p = tm->arg;
	struct net *n = p->net;
	bool suspected = false;

	if (p->state != SESS_ESTABLISHED || p->snd_una == p->snd_nxt)
		return;
	n->st.timeouts++;
	p->st.timeouts++;
	for (uint32_t s = p->snd_una; s != p->snd_nxt; s++) {
		struct net_txpkt *t = txslot(p, s);

		if (t->state == TX_INFLIGHT) {
			if (!suspected) {
				p->rto_path = t->path;
				suspected = true;
			}
			t->state = TX_LOST;
			tx_out(p, t);
			p->nlost++;
		}
	}
	/*
	 * The oldest packet's path is suspect (another may take it), once every
	 * packet is marked: its probe may take the path down, which marks what
	 * is in flight on it (net_sess_path_lost), and must find none left.
	 */
	if (suspected)
		net_path_suspect(p, p->rto_path);
	if (!p->rto_undo) {
		p->undo_cwnd = p->cwnd;
		p->undo_ssthresh = p->ssthresh;
		p->rto_ts = net_now_us(n);
		p->rto_undo = true;
	}
	p->ssthresh = SH_MAX(p->cwnd / 2, (uint32_t)NET_CWND_MIN);
	p->cwnd = NET_CWND_MIN;
	p->cwnd_acc = 0;
	p->in_recovery = false;
	p->backoff++;
	sh_log_debug("peer %llx: retransmission timeout (rto %llu us, backoff %u)",
		     (unsigned long long)p->id, (unsigned long long)p->rto_ns / 1000, p->backoff);
	net_sess_push(p);
	arm_rto(p);
	net_out_flush(n);
}

/* ---- receiving ---- */

/* A buffer for a received message of len bytes; *off: where the message starts in it. */
static struct sh_buf *
rx_buf(uint32_t len, size_t *off)
{
	*off = len >= NET_ALIGN_MIN ? NET_BODY_ALIGN - RPC_HDR_SIZE : 0;
	return sh_buf_create(*off + len, *off ? NET_BODY_ALIGN : 0);
}

static void
deliver_chunk(struct net_peer *p, const struct net_chunk *c)
{
	struct net *n = p->net;
	struct net_rxmsg *m = NULL;
	struct sh_list *pos;

	/* the decoder checked the chunk's shape; the message's size is checked here */
	if (c->msg_len > n->cfg.max_msg) {
		n->st.bad_format++;
		sh_log_warn("peer %llx: message of %u bytes is over the limit",
			    (unsigned long long)p->id, c->msg_len);
		return;
	}
	if (c->frag_cnt == 1) {
		size_t off;
		struct sh_buf *b = rx_buf(c->msg_len, &off);

		if (b == NULL)
			return;
		memcpy(b->data + off, c->data, c->len);
		n->st.msgs_received++;
		net_rpc_deliver(p, b, off, c->msg_len);
		sh_buf_put(b);
		return;
	}
	sh_list_for_each (pos, &p->rxmsgs) {
		struct net_rxmsg *x = sh_list_entry(pos, struct net_rxmsg, link);

		if (x->id == c->msg_id) {
			m = x;
			break;
		}
	}
	if (m == NULL) {
		if (c->frag_idx != 0) {
			n->st.bad_format++; /* in-order delivery: a message starts at fragment 0 */
			return;
		}
		m = sh_calloc(1, sizeof(*m));
		if (m == NULL)
			return;
		m->buf = rx_buf(c->msg_len, &m->off);
		if (m->buf == NULL) {
			sh_free(m);
			return;
		}
		m->id = c->msg_id;
		m->len = c->msg_len;
		m->cnt = c->frag_cnt;
		m->fsize = net_frag_size(c->msg_len, c->frag_cnt);
		sh_list_add_tail(&p->rxmsgs, &m->link);
	}
	if (m->len != c->msg_len || m->cnt != c->frag_cnt || c->frag_idx != m->got) {
		n->st.bad_format++;
		return;
	}
	memcpy(m->buf->data + m->off + (size_t)c->frag_idx * m->fsize, c->data, c->len);
	if (++m->got < m->cnt)
		return;
	sh_list_del(&m->link);
	n->st.msgs_received++;
	net_rpc_deliver(p, m->buf, m->off, m->len);
	sh_buf_put(m->buf);
	sh_free(m);
}

void
net_sess_on_data(struct net_peer *p, const struct net_pkt *pkt)
{
	struct net *n = p->net;
	uint32_t seq = pkt->seq;

	net_mark_dirty(p);
	if (net_seq_lt(seq, p->rcv_nxt)) {
		n->st.dup_pkts++;
		p->st.drops++;
		/*
		 * Our ack was lost: say it again, echoing this copy's time (RFC 7323
		 * 4.3). The original's would have the sender take its whole wait
		 * for one RTT, and its RTO grow to the most for many RTTs after.
		 */
		if (p->ack_pending == 0 && (int32_t)(pkt->ts - p->ts_recent) > 0)
			p->ts_recent = pkt->ts;
		p->ack_now = true;
		return;
	}
	if (!net_seq_lt(seq, p->rcv_nxt + W(p))) {
		n->st.stale++;
		p->st.drops++;
		p->ack_now = true;
		return;
	}
	/* echo the oldest unacked packet's time, so the sender's RTT includes our ack delay */
	if (p->ack_pending == 0 && !p->ack_now)
		p->ts_recent = pkt->ts;
	if (seq != p->rcv_nxt) {
		struct net_rxpkt *r = rxslot(p, seq);

		p->ack_now = true;
		if (r->used) {
			n->st.dup_pkts++;
			p->st.drops++;
			return;
		}
		r->data = sh_buf_create(pkt->payload_len, 0);
		if (r->data == NULL) {
			p->st.drops++;
			return; /* dropped: the sender retransmits */
		}
		memcpy(r->data->data, pkt->payload, pkt->payload_len);
		r->used = true;
		r->nchunks = pkt->nchunks;
		r->len = pkt->payload_len;
		p->rx_buffered++;
		n->st.out_of_order++;
		return;
	}
	p->rcv_nxt++;
	p->ack_pending++;
	for (unsigned i = 0; i < pkt->nchunks; i++)
		deliver_chunk(p, &pkt->chunk[i]);
	/* then what waited behind the hole (a handler may not tear the session down) */
	while (p->state == SESS_ESTABLISHED && rxslot(p, p->rcv_nxt)->used) {
		struct net_rxpkt *r = rxslot(p, p->rcv_nxt);
		struct net_rxpkt x = *r;
		struct net_chunk ch[NET_MAX_CHUNKS];

		memset(r, 0, sizeof(*r));
		p->rx_buffered--;
		p->rcv_nxt++;
		p->ack_pending++;
		if (net_chunks_parse(x.data->data, x.len, x.nchunks, ch) == 0)
			for (unsigned i = 0; i < x.nchunks; i++)
				deliver_chunk(p, &ch[i]);
		sh_buf_put(x.data);
	}
}

void
net_sess_send_ack(struct net_peer *p)
{
	struct net_pkt h;
	unsigned path = net_path_pick(p, 0);

	net_out_begin(p, path);
	net_sess_fill_hdr(p, &h, NET_PKT_ACK);
	p->net->st.acks_sent++;
	net_out_end(p, path, &h, 0, NULL, NULL, 0);
}

void
net_sess_end_of_batch(struct net_peer *p)
{
	if (p->state != SESS_ESTABLISHED)
		return;
	if (p->ack_now || p->ack_pending >= ACK_EVERY)
		net_sess_send_ack(p);
	else if (p->ack_pending > 0 && !env_timer_armed(&p->delack))
		env_timer_arm(&p->delack, p->net->cfg.delack_ns);
}

static void
delack_fire(struct env_timer *t)
{
	struct net_peer *p = t->arg;

	if (p->state == SESS_ESTABLISHED && p->ack_pending > 0) {
		net_sess_send_ack(p);
		net_out_flush(p->net);
	}
}
