/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Where metadata lives and how to reach it (docs/metadata.md): the
 * metadata groups of the configuration, and calls to a bucket's leader
 * that follow leader changes.
 *
 * Groups: the buckets whose replica sets (cluster configuration) are the
 * same set of nodes form one Raft group per filesystem — a handful on a
 * small cluster, at most one per bucket. Groups are numbered by sorting
 * their sets, so every node and client derives the same numbers. A
 * group's members are the nodes' first data endpoints (node id << 8).
 *
 * Calls: mroute_call sends a request to the leader the route last saw for
 * the bucket's group (else a member), and goes on to the leader a replica
 * names (SH_ENOTLEADER) or to the next member (timeout, dead peer, no
 * leader yet) until the deadline: the callback sees the leader's answer,
 * or -ETIMEDOUT with the last error seen. The callback runs later, in a
 * turn of the loop of its own, never inside mroute_call (the first
 * attempt is a timer due now), so a caller may set up what the callback
 * reads after the call returns.
 */
#ifndef SH_META_MROUTE_H
#define SH_META_MROUTE_H

#include "../cluster/config.h"
#include "../net/net.h"
#include "mproto.h"

struct mplace {
	uint32_t nbuckets, replicas, ngroups;
	uint16_t *group_of; /* per bucket */
	uint64_t *members;  /* ngroups x replicas: data endpoint ids */
	uint32_t *gstart;   /* group g's buckets: gbuckets[gstart[g] .. gstart[g+1]) */
	uint16_t *gbuckets;
};

int mplace_build(const struct cfg *c, struct mplace *out);
void mplace_free(struct mplace *p);
/* The data endpoint id of a node's metadata worker, and back. */
static inline uint64_t
mplace_endpoint(uint64_t node)
{
	return node << 8;
}
static inline uint32_t
mplace_group_id(uint32_t fs, uint32_t g)
{
	return fs << 16 | g;
}

/*
 * Where target (a drive) is served: its worker's data endpoint and address.
 * -ENOENT (no such drive), -EHOSTDOWN (its node is marked down, or the
 * drive failed).
 */
int mplace_target(const struct cfg *c, uint64_t target, uint64_t *peer, char *addr);
/*
 * Tell net every data endpoint of c (each node's worker 0 and the workers
 * serving its drives) at all its interfaces (cfg_node_data): added,
 * or changed after a net.add or net.remove. On net's thread.
 */
void mplace_sync_peers(struct net *net, const struct cfg *c);

struct mroute;
typedef void (*mroute_cb)(void *arg, int status, const struct mp_reply *r);
/*
 * Handle a request here instead of over the network (a server's own
 * groups). Returns 1 if it took the request (cb will run), 0 to send it.
 */
typedef int (*mroute_local_fn)(void *arg, const struct mp_req *req, mroute_cb cb, void *cbarg);

int mroute_create(struct net *n, struct mroute **out);
/* Calls in flight fail with -ECANCELED (their callbacks run inside). */
void mroute_destroy(struct mroute *rt);
/* End every call now with -ECANCELED (callbacks run inside). */
void mroute_cancel_all(struct mroute *rt);
void mroute_set_local(struct mroute *rt, mroute_local_fn fn, void *arg);
/* Take a new configuration: placement and the members' addresses. -ENOMEM. */
int mroute_set_cfg(struct mroute *rt, const struct cfg *c);
const struct cfg *mroute_cfg(const struct mroute *rt);
const struct mplace *mroute_place(const struct mroute *rt);
/* Remember who leads a group (0: forget). */
void mroute_hint(struct mroute *rt, uint32_t fs, uint16_t bucket, uint64_t leader);

int mroute_call(struct mroute *rt, const struct mp_req *req, uint64_t timeout_ns, mroute_cb cb,
		void *arg);

#endif /* SH_META_MROUTE_H */
