/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Every RPC opcode of Shoal, declared once: X(id, number, "name").
 * The module that owns an opcode registers its handler with net_handle().
 * Numbers are part of the wire protocol: never reuse or renumber one.
 */
#ifndef SH_NET_RPC_OPS_H
#define SH_NET_RPC_OPS_H

#include <stdbool.h>
#include <stdint.h>

/*
 * from: who may send it (docs/security.md).
 * - NODE: only a backend's endpoint (an id without the top bit; clients'
 *   ids have it, client.c): a request from a client's session is answered
 *   -EPERM, a one-way message dropped, both counted
 *   (shoal_net_refused_total). The cluster's own messages (Raft, the
 *   configuration's changes and pushes, an admin request run on a node).
 * - ANY: anyone, a client without a key too (the configuration, pings).
 * - KEY: a backend, or a client whose key is valid (not revoked): else
 *   -EACCES (shoal_net_denied_total). Which file system a key opens, and
 *   whether it writes, the metadata service checks (msvc.c).
 * - WRITE: as KEY, and a client's key must be read-write: else -EROFS.
 * A backend's id is proved by its datagrams' MACs, a client's key by its
 * own (net/auth.h); an endpoint without a network key (the simulator's
 * tests) lets everyone do everything.
 */
#define NET_RPC_OPS(X)                                                                          \
	X(NET_OP_PING, 1, "ping", ANY) /* net: reply at once, empty body */                     \
	X(NET_OP_ECHO, 2, "echo", KEY) /* net: reply with the request's body */                 \
	X(NET_OP_SINK, 3, "sink", KEY) /* net: discard the body, reply empty (stream tests) */  \
	X(NET_OP_STORE_PUT, 10, "store.put", WRITE)	    /* store: append a fragment */      \
	X(NET_OP_STORE_GET, 11, "store.get", KEY)	    /* store: read a byte range */      \
	X(NET_OP_STORE_RELEASE, 12, "store.release", WRITE) /* store: release a fragment */     \
	X(NET_OP_STORE_STAT, 13, "store.stat", KEY)	    /* store: a target's statistics */  \
	X(NET_OP_RAFT, 20, "raft", NODE) /* cluster: a Raft message for a group */              \
	X(NET_OP_CLUSTER_PROPOSE, 21, "cluster.propose",                                        \
	  NODE) /* cluster: a config change, to the leader */                                   \
	X(NET_OP_CLUSTER_HEARTBEAT, 22, "cluster.heartbeat",                                    \
	  NODE) /* cluster: node alive; config pull */                                          \
	X(NET_OP_CLUSTER_PUSH, 23, "cluster.push",                                              \
	  NODE) /* cluster: leader pushes a config copy */                                      \
	X(NET_OP_CLUSTER_LOCAL, 24, "cluster.local",                                            \
	  NODE) /* cluster: run an admin request on a node */                                   \
	X(NET_OP_CLUSTER_CONFIG, 25, "cluster.config",                                          \
	  ANY) /* cluster: a client asks for the configuration if newer */                      \
	X(NET_OP_CLIENT_INFO, 26, "client.info",                                                \
	  ANY)				/* cluster: a client says what it is (client_info.h) */ \
	X(NET_OP_META, 30, "meta", KEY) /* meta: a request for a bucket's leader (mproto.h) */  \
	X(NET_OP_META_RECALL, 31, "meta.recall",                                                \
	  ANY) /* meta: a leader recalls what a client cached (mproto.h) */                     \
	X(NET_OP_META_LEADS, 32, "meta.leads",                                                  \
	  NODE) /* meta: how many groups do you lead (status: the count) */                     \
	X(NET_OP_TEST, 100, "test", ANY) /* tests register their own handler here */

enum net_op {
#define NET_OP_ENUM(id, num, name, from) id = (num),
	NET_RPC_OPS(NET_OP_ENUM)
#undef NET_OP_ENUM
	    NET_OP_MAX = 1024 /* opcodes are below this */
};

const char *net_op_name(unsigned op);
/* Whether a session with peer id may send op (its NET_FROM_ class, NODE). */
bool net_op_allowed(unsigned op, uint64_t peer_id);
struct net_cred;
/* Whether op may come from peer_id with cred: 0, -EPERM, -EACCES, -EROFS (from). */
int net_op_check(unsigned op, uint64_t peer_id, const struct net_cred *cred);
/* Clients' endpoint ids have the top bit; backends' (node, node << 8 | worker) do not. */
static inline bool
net_id_is_client(uint64_t id)
{
	return (id >> 63) != 0;
}

#endif /* SH_NET_RPC_OPS_H */
