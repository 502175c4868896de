/* SPDX-License-Identifier: Apache-2.0 */
/*
 * GET /metrics: what a backend is doing, in the Prometheus text format
 * (version 0.0.4; docs/metrics.md lists every family). Each I/O loop
 * publishes a snapshot of its counters (admin_stats) a few times a
 * second; the management loop sums them per opcode, peer and target when
 * asked.
 */
#ifndef SH_ADMIN_METRICS_H
#define SH_ADMIN_METRICS_H

#include "../cluster/cluster.h"
#include "../meta/msvc.h"
#include "../net/net.h"
#include "../store/store.h"
#include "http.h"

struct admin_node;

struct admin_drive_stats {
	uint64_t target;
	int open_err; /* < 0: the drive does not open (st is zero), why */
	struct store_stats st;
};

/* One loop's counters (a worker's, or the management loop's). */
#define ADMIN_IFACES_MAX 8
struct admin_stats {
	uint64_t endpoint; /* the loop's net endpoint id */
	struct net_iface ifaces[ADMIN_IFACES_MAX];
	unsigned nifaces;
	struct net_stats net;
	struct net_op_stats ops[NET_OPS_TRACKED];
	struct net_peer_stats *peers;
	unsigned npeers;
	struct admin_drive_stats *drives;
	unsigned ndrives;
	bool has_meta; /* the loop serves metadata groups: */
	struct msvc_stats meta;
	struct msvc_group_info *groups; /* their state */
	unsigned ngroups;
};

/* A snapshot of n's counters (peers copied into a new array) with no drives. */
int admin_stats_of_net(struct net *n, struct admin_stats *out);
/* Free what a snapshot owns (peers, drives, groups); the struct itself is the caller's. */
void admin_stats_clear(struct admin_stats *s);

/*
 * What filesystem f uses, summed over the groups of g[0..n) that serve
 * here (ready): its usage records into *out; *held, the bytes only its
 * snapshots read; *own, 0. A writable clone has no groups of its own: its
 * logical bytes (out->mapped) and *own, the bytes it alone reads (what
 * deleting it frees), are its origin's groups' figures of its branch; the
 * rest of what it uses is counted with its origin.
 */
struct usage_sum {
	struct meta_usage u;
	uint64_t held, own;
};
void admin_fs_usage(const struct msvc_group_info *g, unsigned n, const struct cfg_fs *f,
		    struct usage_sum *out);

/* The page: reply to req with every family. */
void admin_metrics_reply(struct cluster *cl, const struct admin_node *self,
			 const struct admin_stats *const *ws, unsigned nws, struct admin_req *req);

#endif /* SH_ADMIN_METRICS_H */
