/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Every RPC opcode of Shoal, declared once: X(id, number, "name").
 * The module that owns an opcode registers its handler with net_handle().
 * Numbers are part of the wire protocol: never reuse or renumber one.
 */
#ifndef SH_NET_RPC_OPS_H
#define SH_NET_RPC_OPS_H

#define NET_RPC_OPS(X)                                                                             \
	X(NET_OP_PING, 1, "ping") /* net: reply at once, empty body */                             \
	X(NET_OP_ECHO, 2, "echo") /* net: reply with the request's body */                         \
	X(NET_OP_SINK, 3, "sink") /* net: discard the body, reply empty (stream tests) */          \
	X(NET_OP_STORE_PUT, 10, "store.put")	     /* store: append a fragment */                \
	X(NET_OP_STORE_GET, 11, "store.get")	     /* store: read a byte range */                \
	X(NET_OP_STORE_RELEASE, 12, "store.release") /* store: release a fragment */               \
	X(NET_OP_STORE_STAT, 13, "store.stat")	     /* store: a target's statistics */            \
	X(NET_OP_RAFT, 20, "raft")		     /* cluster: a Raft message for a group */     \
	X(NET_OP_CLUSTER_PROPOSE, 21,                                                              \
	  "cluster.propose") /* cluster: a config change, to the leader */                         \
	X(NET_OP_CLUSTER_HEARTBEAT, 22,                                                            \
	  "cluster.heartbeat")			     /* cluster: node alive; config pull */        \
	X(NET_OP_CLUSTER_PUSH, 23, "cluster.push")   /* cluster: leader pushes a config copy */    \
	X(NET_OP_CLUSTER_LOCAL, 24, "cluster.local") /* cluster: run an admin request on a node */ \
	X(NET_OP_CLUSTER_CONFIG, 25,                                                               \
	  "cluster.config") /* cluster: a client asks for the configuration if newer */            \
	X(NET_OP_CLIENT_INFO, 26,                                                                  \
	  "client.info")	   /* cluster: a client says what it is (client_info.h) */         \
	X(NET_OP_META, 30, "meta") /* meta: a request for a bucket's leader (mproto.h) */          \
	X(NET_OP_META_RECALL, 31,                                                                  \
	  "meta.recall") /* meta: a leader recalls what a client cached (mproto.h) */              \
	X(NET_OP_META_LEADS, 32,                                                                   \
	  "meta.leads")		    /* meta: how many groups do you lead (status: the count) */    \
	X(NET_OP_TEST, 100, "test") /* tests register their own handler here */

enum net_op {
#define NET_OP_ENUM(id, num, name) id = (num),
	NET_RPC_OPS(NET_OP_ENUM)
#undef NET_OP_ENUM
	    NET_OP_MAX = 1024 /* opcodes are below this */
};

const char *net_op_name(unsigned op);

#endif /* SH_NET_RPC_OPS_H */
