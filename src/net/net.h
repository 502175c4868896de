/* SPDX-License-Identifier: Apache-2.0 */
/*
 * net: Shoal's data network (DESIGN.md §7, docs/protocol.md).
 *
 * A struct net is one node's endpoint on one env (one loop thread): its
 * identity (node id, incarnation), its interfaces, the peers it talks to,
 * and an RPC layer. Between two nodes runs one reliable session over
 * datagrams: handshake with incarnations, sequence numbers, cumulative and
 * selective acks, retransmission timed from measured RTT, fast retransmit,
 * a congestion window, the peer's receive window, messages cut into
 * fragments of the path MTU and reassembled, keep-alives, and a peer
 * declared dead after a silence.
 *
 * RPC: net_call() sends a request and calls back exactly once with the
 * reply, -ETIMEDOUT (deadline passed or peer silent), SH_EPEERRESTART (the
 * peer restarted: the request may or may not have run), -ECANCELED
 * (net_call_cancel or net_destroy), or the handler's negative status. A
 * call survives a session that breaks and comes back (a healed partition)
 * by resending the request; the server keeps replies in a cache keyed by
 * (client, incarnation, call id), so a handler sees each request once.
 *
 * Threading: everything on the env's thread.
 */
#ifndef SH_NET_NET_H
#define SH_NET_NET_H

#include "../env/env.h"
#include "rpc_ops.h"
#include "wire.h"

struct net;
struct net_call;
struct net_req;

#define NET_LABEL_MAX	 16
#define NET_AUTH_KEY_LEN 32

#define NET_DEV_MAX 48

struct net_iface {
	struct env_addr addr;
	char label[NET_LABEL_MAX]; /* e.g. the switch it hangs on; "" for none */
	/*
	 * The largest datagram payload on this interface; 0: its own (the
	 * kernel's interface MTU, or the DPDK port's, less the IP and UDP
	 * headers), else 1,472 (64 KiB on loopback). A peer's: what it said
	 * (wire.h, the mtu field), until then the same default.
	 */
	uint32_t mtu;
	/*
	 * The transport that carries it (net_transport_find): "" for kernel UDP
	 * ("udp"); "dpdk" for a port of its own (dev: the DPDK device, as
	 * net/transport.h says).
	 */
	char transport[8];
	char dev[NET_DEV_MAX];
};

/*
 * What a peer may do (docs/security.md, "Clients' keys"): a backend, or any
 * peer of an endpoint without a network key, everything; a client what its
 * key allows, checked with every datagram: nothing without one (the
 * configuration only), nothing once its key is revoked.
 */
enum net_access { NET_ACCESS_NONE = 0, NET_ACCESS_READ = 1, NET_ACCESS_WRITE = 2 };
struct net_cred {
	uint32_t key_id; /* 0: no key (or a backend); 1: the cluster's client key; 2+: an fs key */
	uint32_t fs;	 /* the one file system it opens (its id); 0: any */
	uint8_t access;	 /* enum net_access */
};

enum net_peer_event {
	NET_PEER_UP = 1,    /* session established */
	NET_PEER_DOWN,	    /* declared dead after silence */
	NET_PEER_RESTARTED, /* came back with a new incarnation */
};

struct net_config {
	uint64_t node_id;     /* non-zero, unique in the cluster */
	uint64_t incarnation; /* 0: the env's wall clock (grows across restarts) */
	const struct net_iface *ifaces;
	unsigned nifaces;
	uint64_t rto_min_ns;   /* default 2 ms */
	uint64_t rto_max_ns;   /* default 500 ms */
	uint64_t keepalive_ns; /* idle time before a keep-alive; default 250 ms */
	uint64_t dead_ns;      /* silence before a peer is declared dead; default 5 s */
	/*
	 * A peer learned from its packets (a client), silent this long with no
	 * session, call or request left, is forgotten (its memory freed); it is
	 * learned again if it comes back. Default 30 s.
	 */
	uint64_t forget_ns;
	uint64_t delack_ns; /* longest an ack waits for a packet to ride on; default 1 ms, at most
			       half of rto_min_ns */
	uint32_t max_msg;   /* largest message; default 1 GiB */
	uint32_t window;    /* packets in flight per session; default 1024, at most 8192 */
	uint32_t cwnd_init; /* initial congestion window, packets; default 64 */
	uint32_t
	    max_inflight; /* bytes in flight per session; default 4 MiB (fits socket buffers) */
	uint64_t reply_ttl_ns; /* how long replies stay in the cache; default 60 s */
	/*
	 * Peers reached over several paths (interface pairs): each path is
	 * probed this often (default 100 ms); NET_PATH_MISSES probes in a row
	 * unanswered take it down, and a path back from down carries traffic
	 * again once it has answered every probe for path_hold_ns (default
	 * 2 s), so a flapping link is not used.
	 */
	uint64_t probe_ns;
	uint64_t path_hold_ns;
	/*
	 * The cluster's network key (NET_AUTH_KEY_LEN bytes, copied; from the
	 * cluster secret: sh_secret_net_key): every datagram to or from a
	 * backend carries a MAC under a key of its session, and one from a
	 * backend without a valid MAC is dropped (net/auth.h,
	 * docs/security.md). NULL: none sent, none accepted from backends.
	 */
	const uint8_t *auth_key;
	/* A second such key, accepted but never used to seal: while the secret is rotated. */
	const uint8_t *auth_key_also;
	/*
	 * A client's endpoint: auth_key is its own key, and this its id (1 or
	 * more); its datagrams and the backends' answers carry MACs under it.
	 */
	uint32_t auth_key_id;
	/*
	 * A backend's: the file system access key key_id (2 and up) of a client,
	 * its 32 bytes and what it allows (a revoked key: NET_ACCESS_NONE, so
	 * the client is told EACCES). 0, or -ENOENT: the datagram is dropped.
	 * Called on the endpoint's thread; net_client_keys_changed() says the
	 * answers may have changed. NULL: only the cluster's client key is known.
	 */
	int (*client_key)(void *arg, uint32_t key_id, uint8_t key[NET_AUTH_KEY_LEN],
			  struct net_cred *cred);
	void (*peer_event)(void *arg, uint64_t peer_id, enum net_peer_event ev);
	void *arg;
};

struct net_stats {
	uint64_t pkts_sent, pkts_received, bytes_sent, bytes_received;
	uint64_t retransmits, fast_retransmits, timeouts, spurious_timeouts;
	uint64_t backoffs_ended; /* a silent peer heard again: its backed-off timer cut short */
	uint64_t dup_pkts, out_of_order, acks_sent;
	uint64_t bad_magic, bad_format, bad_crc, misdirected, stale, resets_sent, resets_received;
	uint64_t msgs_sent, msgs_received;
	uint64_t calls, calls_ok, calls_failed, call_retries;
	uint64_t requests, duplicate_requests, replies_from_cache;
	uint64_t oneway_sent, oneway_received;
	uint64_t refused;     /* requests and messages a client sent that only a backend may */
	uint64_t auth_failed; /* datagrams without a valid MAC where one is needed: dropped */
	uint64_t denied; /* requests a client's key does not allow (none, revoked, read-only) */
	uint64_t reply_cache_entries; /* now, not a count */
	uint64_t sessions_opened, peers_dead, peers_restarted, peers_forgotten;
};

/*
 * What the requests this endpoint served cost, per opcode (those below
 * NET_OPS_TRACKED): counts, bytes of request and reply bodies, and the time
 * from arrival to reply in NET_LAT_BUCKETS buckets (not cumulative; bucket
 * i holds times <= net_lat_bound_ns[i], the last one everything above).
 */
#define NET_OPS_TRACKED 64
#define NET_LAT_BUCKETS 16
extern const uint64_t net_lat_bound_ns[NET_LAT_BUCKETS - 1];
struct net_op_stats {
	uint64_t requests, errors, bytes_in, bytes_out, lat_sum_ns;
	uint64_t lat[NET_LAT_BUCKETS];
};
enum net_path_state {
	NET_PATH_UNKNOWN = 0, /* nothing received on it yet */
	NET_PATH_UP,	      /* answers */
	NET_PATH_DOWN,	      /* probes unanswered */
	NET_PATH_HOLD,	      /* answers again, not used until it has for path_hold_ns */
};
const char *net_path_state_name(enum net_path_state s);

struct net_path_stats {
	struct env_addr local, remote;
	char local_label[NET_LABEL_MAX], remote_label[NET_LABEL_MAX];
	uint8_t state; /* enum net_path_state */
	bool cross;    /* the ends' labels differ (or are not set) */
	bool suspect;  /* a retransmission timeout on it, no probe answered since */
	bool in_use;   /* the best class: new packets go on it */
	uint64_t pkts_sent, pkts_received, bytes_sent, bytes_received;
	uint64_t probes_sent, probes_answered, probes_lost, timeouts;
	uint64_t refused;  /* times the local stack refused to send on it (its link down) */
	uint64_t downs;	   /* times it went down */
	uint32_t loss_ppm; /* probes lost, a moving average, parts per million */
	uint64_t rtt_ns;   /* from probes, smoothed; 0: none yet */
	uint32_t mtu;	   /* the largest datagram sent on it: the smaller of its ends' MTUs */
};

/* One peer's traffic on this endpoint. */
#define NET_PEER_PATHS 8
struct net_peer_stats {
	uint64_t id;
	uint64_t pkts_sent, pkts_received, bytes_sent, bytes_received;
	uint64_t retransmits, timeouts;
	uint64_t drops;	      /* packets received and thrown away: duplicates, stale, no memory */
	uint64_t auth_failed; /* datagrams claiming to be it without a valid MAC: dropped */
	uint64_t srtt_ns;
	bool connected;
	bool learned; /* known from its packets (a client), not configured */
	/* its paths (the first NET_PEER_PATHS of them) */
	unsigned npaths;
	struct net_path_stats paths[NET_PEER_PATHS];
};

/* Create the endpoint: binds every interface. -EINVAL for a bad config. */
int net_create(struct env *env, const struct net_config *cfg, struct net **out);
/* Fail pending calls with -ECANCELED, close everything. */
void net_destroy(struct net *n);
uint64_t net_node_id(const struct net *n);
struct env *net_env(const struct net *n);
uint64_t net_incarnation(const struct net *n);
void net_stats(const struct net *n, struct net_stats *out);
/* Per opcode, out[NET_OPS_TRACKED] (summed into out, so several endpoints add up). */
void net_op_stats_add(const struct net *n, struct net_op_stats *out);
/* Fold one op's stats into another. */
void net_op_stats_sum(struct net_op_stats *into, const struct net_op_stats *from);
/* Every known peer, up to max into out; returns how many there are. */
unsigned net_peer_stats(const struct net *n, struct net_peer_stats *out, unsigned max);
/* The bound address of interface i (with its port if it was 0). */
int net_iface_addr(const struct net *n, unsigned i, struct env_addr *out);

/* Tell net how to reach a node. -EEXIST if known, -EINVAL, -ENOMEM. */
int net_peer_add(struct net *n, uint64_t node_id, const struct net_iface *ifaces, unsigned nifaces);
/*
 * Make sure node id is reachable at addrs ("IP:PORT[/LABEL][,...]", some
 * of its interfaces): added if unknown, left alone if it is known there
 * already (among other interfaces) or was learned from its packets, else
 * given these. net_peer_sync makes a configured peer's interfaces exactly
 * addrs (its session and calls go on over the new paths). 0, -EINVAL
 * (malformed), -ENOMEM.
 */
int net_peer_ensure(struct net *n, uint64_t id, const char *addrs);
int net_peer_sync(struct net *n, uint64_t id, const char *addrs);
/* Add or update a configured peer's interfaces (as net_peer_ensure, parsed). */
int net_peer_set(struct net *n, uint64_t id, const struct net_iface *ifaces, unsigned nifaces);
/*
 * A list of interfaces in text: "IP:PORT[/LABEL][@TRANSPORT[:DEV]][,...]"
 * (labels: 1-15 of A-Z a-z 0-9 . _ -; a transport other than kernel UDP
 * and its device: "@dpdk:net_af_packet0", net_iface.transport). Parse returns how many (at most
 * max) or -EINVAL; format returns the length written or -ENOSPC.
 */
int net_ifaces_parse(const char *s, struct net_iface *out, unsigned max);
int net_ifaces_format(const struct net_iface *ifc, unsigned n, char *out, size_t len);
/*
 * Interfaces of a running endpoint: bind one more (-EEXIST, -ENOSPC, a
 * bind error), or close one (-ENOENT; -EBUSY for the last). Every peer's
 * paths follow.
 */
int net_iface_add(struct net *n, const struct net_iface *ifc);
int net_iface_remove(struct net *n, const struct env_addr *addr);
/* Interface slot i (0 .. net_iface_slots - 1; -ENOENT: an empty slot, removed). */
int net_iface_get(const struct net *n, unsigned i, struct net_iface *out);
unsigned net_iface_slots(const struct net *n);
/* Relabel the interface bound at addr (-ENOENT, -EINVAL). */
int net_iface_label(struct net *n, const struct env_addr *addr, const char *label);
/* The peer's incarnation as last seen (0: never), and whether a session is up. */
uint64_t net_peer_incarnation(const struct net *n, uint64_t node_id);
/*
 * A peer's paths, up to max into out; returns how many it has (-ENOENT:
 * no such peer).
 */
int net_peer_paths(const struct net *n, uint64_t node_id, struct net_path_stats *out, unsigned max);
/* The best path to a peer now: our interface's and its interface's address. -ENOENT. */
int net_peer_path(const struct net *n, uint64_t node_id, struct env_addr *local,
		  struct env_addr *remote);
bool net_peer_connected(const struct net *n, uint64_t node_id);
/* When its last packet came (env_now; any packet, a probe's answer too), 0: never. */
uint64_t net_peer_heard_ns(const struct net *n, uint64_t node_id);

struct net_msg {
	struct sh_buf *buf; /* take a reference (sh_buf_get) to keep it */
	size_t off;
	size_t len;
};

typedef void (*net_call_cb)(void *arg, int status, const struct net_msg *reply);

struct net_call_opts {
	uint64_t timeout_ns; /* default 10 s */
	unsigned retries;    /* resends after a broken session; default 3 */
};

/*
 * Call opcode on node peer_id with the body bytes (copied). opts may be
 * NULL. On 0, cb runs exactly once later; *out (if not NULL) can cancel
 * it until then. -ENOENT (unknown peer), -EMSGSIZE, -EINVAL, -ENOMEM.
 */
int net_call(struct net *n, uint64_t peer_id, uint16_t opcode, const struct iovec *body, int iovcnt,
	     const struct net_call_opts *opts, net_call_cb cb, void *arg, struct net_call **out);
/*
 * Zero-copy: like net_call, but the body's slices are referenced, not
 * copied (at most 13 slices); the buffers must not change until the
 * callback, and their references are dropped by then.
 */
int net_call_zc(struct net *n, uint64_t peer_id, uint16_t opcode, const struct sh_iov *body,
		const struct net_call_opts *opts, net_call_cb cb, void *arg, struct net_call **out);
/*
 * One-way: opcode's handler on peer_id gets the body (copied) as a request
 * whose net_reply sends nothing. Delivered at most once, in the order of
 * the session; lost if the session breaks before it arrives (nothing is
 * resent then, nothing is cached at the receiver). For messages whose
 * protocol tolerates loss (Raft's). -ENOTCONN when no session is up (a
 * net_call opens one), -ENOENT, -EMSGSIZE, -EINVAL, -ENOMEM.
 */
int net_send(struct net *n, uint64_t peer_id, uint16_t opcode, const struct iovec *body,
	     int iovcnt);
/* The callback runs later with -ECANCELED (unless it already ran: then a no-op is impossible, do
 * not call). */
void net_call_cancel(struct net_call *c);

typedef void (*net_handler_fn)(struct net_req *req, void *arg);

/* Register the handler of an opcode. -EEXIST, -EINVAL. */
int net_handle(struct net *n, uint16_t opcode, net_handler_fn fn, void *arg);
/*
 * Forget it: what comes for the opcode from now on is answered as for an
 * opcode nobody handles. Whoever registered a handler calls this before it
 * frees the handler's argument: the endpoint still receives until it is
 * destroyed (a datagram that came during a shutdown would call it).
 */
void net_unhandle(struct net *n, uint16_t opcode);
const struct net_msg *net_req_body(const struct net_req *r);
uint64_t net_req_peer(const struct net_req *r);
/* What the peer could do when it sent the request (struct net_cred). */
const struct net_cred *net_req_cred(const struct net_req *r);
/* Whether cred opens file system fs (its id), and writes it. */
static inline bool
net_cred_opens(const struct net_cred *c, uint32_t fs)
{
	return c->access != NET_ACCESS_NONE && (c->fs == 0 || c->fs == fs);
}
/*
 * The answers of net_config.client_key may have changed (a key made or
 * revoked): every client's next datagram asks again, so a revoked key's
 * sessions are refused from then on. Any thread.
 */
void net_client_keys_changed(struct net *n);
uint16_t net_req_opcode(const struct net_req *r);
/*
 * Answer a request, now or later, exactly once: status >= 0 for success
 * (given to the caller as its status) or a negative errno. The body is
 * copied. After this, r is gone.
 */
void net_reply(struct net_req *r, int status, const struct iovec *body, int iovcnt);

#endif /* SH_NET_NET_H */
