/* SPDX-License-Identifier: Apache-2.0 */
/* Private to net/: the endpoint, peers with their session state, messages, calls. */
#ifndef SH_NET_NET_INT_H
#define SH_NET_NET_INT_H

#include "auth.h"
#include "net.h"
#include "transport.h"

#define NET_BATCH   ENV_DGRAM_BATCH
#define NET_HDR_MAX (NET_HDR_SIZE + 8 * NET_MAX_SACK)

#define NET_MAX_IFACES 8
/* Slices of a zero-copy body: a fragment then needs at most this + 1 iovecs. */
#define NET_ZC_MAX_SLICES (ENV_DGRAM_IOV_MAX - 3)
#define NET_DUPTHRESH	  3
#define NET_CWND_MIN	  4

/* Paths: one per pair of a local and a peer's interface of the same family. */
#define NET_MAX_PATHS	16
#define NET_PATH_MISSES 3 /* probes in a row unanswered: the path is down */
/*
 * A path losing more than 20 % of its probes is used after clean ones (a
 * busy node answers some probes late, after the next one went: those count
 * as lost, then half taken back when the answer comes).
 */
#define NET_PATH_LOSSY_PPM 200000
/*
 * Consecutive data packets stay on one path for this many bytes before
 * the choice is made again: runs to one address keep the kernel's
 * segmentation offload and the receiver's order.
 */
#define NET_PATH_BURST (64u << 10)

/* Most bytes of chunks packed into one packet (small messages share packets). */
#define NET_PACK_MAX 8192

/* A message queued on a session: the bytes are shared (buf), the cut is per session. */
struct net_txmsg {
	uint32_t ref;
	uint32_t id;
	struct sh_iov data;
	uint32_t len;
	uint32_t frag_size;
	uint32_t frag_cnt;
	uint32_t next_frag;
	uint32_t acked; /* fragments cumulatively acked */
	bool is_reply;	/* a cached reply: forget it once the caller has it all */
	uint64_t key[3];
	struct sh_list qlink;
};

enum txpkt_state { TX_FREE = 0, TX_INFLIGHT, TX_SACKED, TX_LOST };

struct net_txchunk {
	struct net_txmsg *m;
	uint32_t frag;
};

/* One packet of the send window: its chunks (regenerated on retransmission). */
struct net_txpkt {
	struct net_txchunk c0;
	struct net_txchunk *more; /* chunks 1..nchunks-1, or NULL */
	uint16_t nchunks;
	uint8_t state;
	uint8_t retx;
	uint8_t path; /* the path it was last sent on (its bytes count there while in flight) */
	uint32_t bytes;
	uint64_t sent_ns;
};

/* A packet received ahead of a hole: its chunk bytes, kept until the hole fills. */
struct net_rxpkt {
	bool used;
	uint16_t nchunks;
	uint32_t len;
	struct sh_buf *data;
};

struct net_rxmsg {
	struct sh_list link;
	uint32_t id;
	uint32_t len, cnt, got, fsize;
	struct sh_buf *buf;
	size_t off; /* where the message starts in buf */
};

/*
 * Session states (one session per peer; docs/protocol.md has the diagram):
 *   IDLE -> CONNECTING (something to send: HELLO) -> ESTABLISHED (HELLO_ACK,
 *   or the peer's HELLO); ESTABLISHED -> IDLE on silence or RESET.
 */
enum sess_state { SESS_IDLE = 0, SESS_CONNECTING, SESS_ESTABLISHED };

/*
 * One path to a peer: a local interface and one of the peer's (path.c).
 * With one path there is nothing to choose and nothing is probed. With
 * several, each is probed every probe_ns and judged by its answers (loss,
 * RTT) and by the session's retransmission timeouts on it.
 */
struct net_path {
	uint8_t local, remote; /* interface indexes: ours, the peer's */
	uint8_t state;	       /* enum net_path_state */
	bool cross;	       /* the two ends carry different labels (or none) */
	bool suspect;	       /* a timeout on it: avoided until a probe is answered */
	uint8_t missed;	       /* probes in a row without an answer */
	uint32_t mtu;
	uint32_t probe_seq;   /* the last probe's number */
	uint32_t probe_acked; /* the newest probe answered */
	uint64_t probe_ns;    /* when the last probe went */
	uint64_t healthy_ns;  /* answered since (a path back from down waits hold_ns) */
	uint64_t inflight_bytes;
	struct net_path_stats st;
};

struct net_peer {
	struct sh_hnode hn;
	struct sh_list link;
	uint64_t id;
	struct net *net;
	struct net_iface ifaces[NET_MAX_IFACES];
	unsigned nifaces;
	struct net_path paths[NET_MAX_PATHS];
	unsigned npaths;
	unsigned rr;	     /* round-robin among equal paths */
	unsigned burst_path; /* data packets stay on one path for NET_PATH_BURST bytes */
	uint32_t burst_left;
	unsigned rx_path; /* the path the peer's last packet came by: acks follow it */
	uint32_t mtu;	  /* the smallest of the paths': a fragment fits any of them */
	bool learned;	  /* address learned from its packets, not configured */

	uint64_t inc; /* the peer's incarnation, 0 if never seen */
	uint32_t sess;
	enum sess_state state;

	/* sender */
	uint32_t snd_una, snd_nxt;
	struct net_txpkt *tx; /* ring, window entries */
	struct sh_list sendq;
	uint32_t inflight, nlost, nsacked;
	uint64_t inflight_bytes;
	uint32_t cwnd, ssthresh, cwnd_acc;
	uint32_t peer_rwnd;
	uint32_t recover;
	bool in_recovery;
	uint64_t srtt_ns, rttvar_ns, rto_ns;
	bool rtt_valid;
	bool rto_undo; /* a timeout's window cut may be undone (Eifel) */
	uint32_t undo_cwnd, undo_ssthresh, rto_ts;
	uint8_t rto_path; /* the path the last timeout made suspect */
	unsigned backoff;
	struct env_timer rto_timer;
	uint32_t next_msg_id;

	/* receiver */
	uint32_t rcv_nxt;
	struct net_rxpkt *rx; /* ring, window entries */
	uint32_t rx_buffered;
	struct sh_list rxmsgs;
	uint32_t ts_recent;
	uint32_t ack_pending;
	bool ack_now;
	struct env_timer delack;

	/* liveness */
	uint64_t last_rx_ns, last_tx_ns, hello_ns, hello_rto_ns;
	uint64_t heard_ns; /* its last packet (last_rx_ns is also reset when a session starts) */

	struct sh_list calls; /* struct net_call.plink: calls waiting on this peer */
	struct net_peer_stats st;
	struct net_mac_key tx_key, rx_key; /* the session keys last used each way (auth.h) */
	/*
	 * A client's, at a backend with a network key: what its session's key
	 * allows, that key (cred.key_id 0: none, its datagrams carry no MAC),
	 * and net.keys_gen when it was looked up (stale: asked again).
	 */
	struct net_cred cred;
	uint8_t ckey[NET_AUTH_KEY_LEN];
	uint64_t cred_gen;
	uint32_t nreqs; /* requests from it being handled (struct net_req.peer) */
	bool dirty;
	struct sh_list dirty_link;
};

struct net_call {
	struct sh_hnode hn;
	struct sh_list plink;
	struct net *net;
	struct net_peer *peer;
	uint64_t id;
	uint16_t opcode;
	unsigned retries;
	struct sh_iov req; /* the whole request message: header, then the body */
	uint32_t sess;	   /* session it was last sent on */
	struct env_timer timer;
	struct env_task done_task;
	int status;
	net_call_cb cb;
	void *arg;
};

struct net_req {
	struct net *net;
	struct net_peer *peer;
	uint64_t peer_inc;
	uint64_t id;
	uint16_t opcode;
	struct net_msg body;
	struct net_reply *cache;
	struct net_cred cred; /* the peer's when the request came */
	uint64_t start_ns;
};

/* Reply cache entry: (peer, incarnation, call id) -> reply (NULL while the handler runs). */
struct net_reply {
	struct sh_hnode hn;
	struct sh_list fifo;
	uint64_t peer_id, peer_inc, id;
	uint64_t done_ns;
	struct sh_iov reply; /* whole reply message, empty while in progress */
	bool done;
};

struct net_handler {
	net_handler_fn fn;
	void *arg;
};

struct net {
	struct env *env;
	struct net_config cfg;
	uint64_t id, inc;
	struct net_iface ifaces[NET_MAX_IFACES];
	struct net_transport tps[NET_MAX_IFACES];
	uint64_t tps_refused[NET_MAX_IFACES]; /* each one's refused count as last seen */
	/*
	 * Each interface's MTU is its own (configured, or its transport's):
	 * said to peers. Else it is the default, which a peer derives from the
	 * address as well: nothing is said, and an interface bound to every
	 * address takes, path by path, the default for the peer's address
	 * (loopback's 64 KiB to a loopback peer).
	 */
	bool mtu_own[NET_MAX_IFACES];
	unsigned nifaces;

	struct sh_htable peers;
	struct sh_list peer_list;
	struct sh_list dirty;
	struct env_task flush_task;
	uint32_t refused_tps; /* transports whose stack refused a send (a link down) */
	uint64_t last_tick_ns;
	bool tick_late; /* this tick came late (the loop was busy): probes unanswered say nothing */
	struct env_task refused_task;
	struct env_timer tick;

	/* the batch being built for one transport */
	struct env_dgram_msg out[NET_BATCH];
	struct iovec out_iov[NET_BATCH][ENV_DGRAM_IOV_MAX];
	struct sh_buf *out_bufs[NET_BATCH][ENV_DGRAM_IOV_MAX]; /* what each lies in (or NULL) */
	uint8_t out_hdr[NET_BATCH][NET_HDR_MAX + NET_PACK_MAX];
	uint8_t out_mac[NET_BATCH][NET_MAC_TRAILER];
	unsigned nout;
	unsigned out_tp;
	bool tp_full;

	struct sh_htable calls;
	uint64_t next_call_id;
	struct net_handler handlers[NET_OP_MAX];
	struct sh_htable replies;
	struct sh_list reply_fifo;
	uint32_t nreplies;

	struct net_auth *auth; /* NULL: datagrams are not authenticated */
	uint64_t keys_gen;     /* net_client_keys_changed() (atomic) */
	/* the datagram being handled, if a client's with a valid MAC: its key and what it allows */
	struct {
		bool keyed;
		struct net_cred cred;
		uint8_t key[NET_AUTH_KEY_LEN];
		uint64_t gen;
	} rx;

	struct net_stats st;
	struct net_op_stats ops[NET_OPS_TRACKED];
	bool destroying;
};

/* RPC message header, at the start of every message (little-endian). */
#define RPC_HDR_SIZE 24
enum rpc_kind { RPC_REQ = 1, RPC_RESP = 2, RPC_MSG = 3 /* one-way: no reply, no cache */ };
/*
 * The body of a received message of at least NET_ALIGN_MIN bytes starts on
 * a NET_BODY_ALIGN boundary, so a payload that leads its body (a drive
 * target's PUT) can be written to an O_DIRECT drive without a copy.
 */
#define NET_BODY_ALIGN 4096u
#define NET_ALIGN_MIN  (16u << 10)

static inline uint32_t
net_now_us(struct net *n)
{
	return (uint32_t)(env_now(n->env) / 1000);
}

/* net.c */
struct net_peer *net_peer_get(const struct net *n, uint64_t id);
/*
 * Whether datagrams to and from backend id carry a MAC under this
 * endpoint's own key (auth.h): a backend's network key, a client's key.
 */
static inline bool
net_auth_on(const struct net *n, uint64_t id)
{
	return n->auth != NULL && !net_id_is_client(id);
}

/* Whether datagrams to p carry a MAC: a backend's, a client's that has a key. */
static inline bool
net_peer_mac(const struct net_peer *p)
{
	return net_auth_on(p->net, p->id) || (p->net->auth != NULL && p->cred.key_id != 0);
}

/* What p may do (struct net_cred): a client's key's rights, else everything. */
static inline struct net_cred
net_peer_cred(const struct net_peer *p)
{
	if (p->net->auth == NULL || !net_id_is_client(p->id))
		return (struct net_cred){ .access = NET_ACCESS_WRITE };
	return p->cred;
}

/* The most payload a datagram of mtu bytes to p carries: less header, ranges and MAC. */
static inline uint32_t
net_room(const struct net_peer *p, uint32_t mtu)
{
	return mtu - NET_HDR_MAX - (net_peer_mac(p) ? NET_MAC_TRAILER : 0);
}

/* ... at p's MTU, which every path takes. */
static inline uint32_t
net_pkt_room(const struct net_peer *p)
{
	return net_room(p, p->mtu);
}
uint32_t net_default_mtu(const struct env_addr *a);
/*
 * A peer's interface learned from its packets: where it wrote from, on
 * the switch of our interface tp, at the default MTU until it says its own.
 */
struct net_iface net_learned_iface(const struct net *n, unsigned tp, const struct env_addr *from);
/* p's interfaces become these (MTUs defaulted), its paths rebuilt. */
void net_peer_take_ifaces(struct net_peer *p, const struct net_iface *ifaces, unsigned nifaces);
/*
 * Open the transport of interface slot i (n->ifaces[i] set); its bound
 * address is written back, and its MTU if it had none: the transport's,
 * else net_default_mtu.
 */
int net_transport_open(struct net *n, unsigned i);
void net_mark_dirty(struct net_peer *p);
void net_out_flush(struct net *n);
/*
 * Build one packet on the batch of p's path: net_out_begin() returns room
 * for NET_PACK_MAX bytes of inline payload (chunk headers, packed chunks);
 * net_out_end() encodes hdr in front of the extra_len bytes written there,
 * followed by data (not copied: it must live until the batch is flushed;
 * bufs, NULL or one per data iovec: the buffer it lies in, which a
 * transport may hold to send from later: env_dgram_msg.bufs).
 */
uint8_t *net_out_begin(struct net_peer *p, unsigned path);
void net_out_end(struct net_peer *p, unsigned path, struct net_pkt *hdr, size_t extra_len,
		 const struct iovec *data, struct sh_buf *const *bufs, unsigned ndata);
/* Send a control packet (no payload) of type on path. */
void net_send_ctl(struct net_peer *p, unsigned path, uint8_t type);
void net_sess_connect(struct net_peer *p);
/* The session broke without the peer restarting (silence, RESET); why: for the log. */
void net_sess_down(struct net_peer *p, int why);

/* path.c */
/* (Re)build p's paths from both interface lists; keeps what it knew of pairs that remain. */
void net_paths_build(struct net_peer *p);
/*
 * The path for a packet of bytes (0: a control packet): the healthiest
 * class (up and clean, same label first), then the fewest bytes in flight.
 */
unsigned net_path_pick(struct net_peer *p, uint32_t bytes);
/*
 * A packet of p arrived on local interface tp from addr: find its path
 * (learning the address of a learned peer), count it, answer or take a
 * probe. Returns true if the packet was a probe (nothing more to do).
 */
bool net_path_rx(struct net_peer *p, unsigned tp, const struct env_addr *from,
		 const struct net_pkt *pkt);
/*
 * The peer said its interface j takes datagrams of up to mtu bytes (the
 * header's mtu field): the paths to it send no larger; if the peer's
 * smallest MTU fell, the messages not begun are cut again
 * (net_sess_recut).
 */
void net_path_said_mtu(struct net_peer *p, unsigned j, uint32_t mtu);
/* A retransmission timeout on path: avoid it until it answers a probe. */
void net_path_suspect(struct net_peer *p, unsigned path);
/* The timeout that made path suspect was spurious (Eifel): it is not any more. */
void net_path_trusted(struct net_peer *p, unsigned path);
/* Housekeeping each tick: probes, misses, holds. */
void net_paths_tick(struct net_peer *p, uint64_t now);
/*
 * The local stack refused a send on transport tp (its link is down): every
 * path from it becomes suspect and what was in flight on them goes on the
 * others, later (a task: this is called while packets are being sent).
 */
void net_paths_refused(struct net *n, unsigned tp);
void net_paths_refused_task(struct env_task *t);

/* session.c */
int net_sess_alloc(struct net_peer *p);
void net_sess_free(struct net_peer *p);
void net_sess_reset(struct net_peer *p);
void net_sess_start(struct net_peer *p, uint32_t sess);
/*
 * Queue a whole message (its slices are shared, not copied). reply_key, if
 * not NULL, names the reply-cache entry to drop once the message is acked.
 */
int net_sess_queue(struct net_peer *p, const struct sh_iov *msg, const uint64_t *reply_key);
/*
 * p's MTU fell: the queued messages none of whose fragments has gone are
 * cut again to fit it. (One half sent keeps its fragments: net_path_pick
 * sends each on a path whose MTU takes it while one does.)
 */
void net_sess_recut(struct net_peer *p);
void net_sess_push(struct net_peer *p);
void net_sess_on_ack(struct net_peer *p, const struct net_pkt *pkt);
void net_sess_on_data(struct net_peer *p, const struct net_pkt *pkt);
void net_sess_send_ack(struct net_peer *p);
void net_sess_fill_hdr(struct net_peer *p, struct net_pkt *h, uint8_t type);
void net_sess_end_of_batch(struct net_peer *p);
/* Every packet in flight on path is lost (it failed): they go again, on another path. */
void net_sess_path_lost(struct net_peer *p, unsigned path);
/*
 * The peer was heard from (any packet, a probe too) after silent_ns of
 * silence. Were our packets waiting on a timer backed off for longer than
 * that silence (the way to it was out: a link down, a partition), the way
 * is likely back with the peer's voice: the backoff ends and what is in
 * flight goes again after one RTO, not after up to rto_max_ns more.
 */
void net_sess_heard(struct net_peer *p, uint64_t silent_ns);

/* rpc.c */
int net_rpc_init(struct net *n);
void net_rpc_fini(struct net *n);
void net_rpc_deliver(struct net_peer *p, struct sh_buf *buf, size_t off, uint32_t len);
/* The session to p broke (restart: the peer has a new incarnation). */
void net_rpc_sess_down(struct net_peer *p, bool restart);
/* A session to p is up: resend what waits. */
void net_rpc_sess_up(struct net_peer *p);
void net_rpc_tick(struct net *n, uint64_t now);
/* The caller acked the whole reply: its cache entry is no longer needed. */
void net_rpc_reply_acked(struct net *n, const uint64_t key[3]);

#endif /* SH_NET_NET_INT_H */
