/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One node's part in the cluster configuration (DESIGN.md §6): the config
 * Raft group (when this node is one of its up to 5 voters), the copy of
 * the configuration every node follows, heartbeats and failure detection.
 *
 * - Config members run libraft (group 0) on the management net; the
 *   state machine is struct cfg. A node's Raft instance starts when its
 *   log has state, when it creates the cluster, or when the leader first
 *   sends it a Raft message after adding it.
 * - The leader keeps the voters at min(5, nodes): it adds nodes that are up
 *   as voters (raft_add, then raft_assign) in id order, removes the voters
 *   of removed nodes, and demotes a voter down for longer than replace_ns
 *   to standby (RAFT_STANDBY: it is still sent the log) when a node that
 *   is up can take its vote.
 * - Every other node follows: the leader pushes a full copy to each node
 *   whose acknowledged epoch is behind, and each node's heartbeat reply
 *   carries a copy when it reports an old epoch. Clients pull a copy
 *   (NET_OP_CLUSTER_CONFIG, answered by any node when it has a newer one).
 * - Heartbeats: every node sends one to the leader each heartbeat period.
 *   The leader marks a node silent for longer than down_ns as down (a
 *   replicated change, with an event), and up again when it is heard.
 * - A node down for longer than meta_replace_ns is replaced in the
 *   metadata groups it is a member of, one group at a time
 *   (CFG_OP_MGROUP_REPLACE, cfg_mgroup_replacement picks the node); each
 *   group's leader then changes its Raft membership (mgroup.c).
 *
 * Changes (cluster_submit) go to the leader: applied locally when this
 * node leads, else forwarded once over the management net. A change
 * waits up to submit_ns for a leader, then fails with -ETIMEDOUT and a
 * reason that names the voters this node cannot reach.
 */
#ifndef SH_CLUSTER_CLUSTER_H
#define SH_CLUSTER_CLUSTER_H

#include "../net/net.h"
#include "config.h"

struct cluster;

struct cluster_params {
	uint64_t node_id;
	const char *mgmt;      /* this node's management address: ip:port */
	const char *data;      /* its data address */
	const char *domain;    /* failure domain ("" : node-ID) */
	const char *dir;       /* where the Raft log lives */
	uint64_t heartbeat_ns; /* default 500 ms */
	uint64_t down_ns;      /* silence before a node is marked down; default 2 s */
	uint64_t submit_ns;    /* how long a change waits for a leader; default 8 s */
	uint64_t replace_ns; /* a voter down this long gives its vote to a node that is up; 10 s */
	/* a node down this long is replaced in every metadata group it is in; 5 min */
	uint64_t meta_replace_ns;
	unsigned election_ms; /* default 700 */
	/*
	 * A change that must be prepared on this node before it is proposed
	 * (adding a drive: check the path, measure and format it). Returns
	 * 0 (and may fill cmd fields, e.g. size) or a negative errno with a
	 * reason in msg. Optional.
	 */
	int (*prepare)(void *arg, struct cfg_cmd *cmd, char *msg, size_t len);
	/*
	 * Whether this node's data network is down (none of its data
	 * interfaces has a link): said in each heartbeat; the configuration's
	 * leader marks it CFG_DATA_DOWN while it says so. Optional.
	 */
	bool (*data_down)(void *arg);
	/* The configuration seen here changed (a newer epoch). Optional. */
	void (*changed)(void *arg, const struct cfg *c);
	void *arg;
};

typedef void (*cluster_cb)(void *arg, int status, const char *msg);

int cluster_start(struct net *mgmt, const struct cluster_params *p, struct cluster **out);
/* Close Raft and free everything; done(arg) runs when it is over (not inside the call). */
void cluster_stop(struct cluster *cl, void (*done)(void *arg), void *arg);

/*
 * Propose a change. cb(arg, status, msg) runs exactly once, later: 0 when
 * it is committed and applied, else a negative errno and a reason.
 */
int cluster_submit(struct cluster *cl, const struct cfg_cmd *cmd, cluster_cb cb, void *arg);

/*
 * Wait, without holding up the loop, until ready(arg, c) is true of the
 * configuration this node sees (c: cluster_cfg, valid during the call):
 * it is asked soon after the call, whenever the configuration changes,
 * and every tick. cb(arg, status, msg) runs exactly once, later: 0 once
 * ready said so, -ETIMEDOUT when timeout_ns passed first, -ESHUTDOWN when
 * the node stops. ready runs on the loop and must not submit or wait.
 * -ESHUTDOWN (stopping), -ENOMEM: cb is not called.
 */
typedef bool (*cluster_ready_fn)(void *arg, const struct cfg *c);
int cluster_wait(struct cluster *cl, cluster_ready_fn ready, uint64_t timeout_ns, cluster_cb cb,
		 void *arg);

/* The newest configuration this node knows (epoch 0, !created: none yet). */
const struct cfg *cluster_cfg(const struct cluster *cl);

struct cluster_info {
	uint64_t leader; /* 0: none known */
	bool member;	 /* this node is a config voter */
	bool started;	 /* its Raft instance runs */
	int raft_state;	 /* enum rgroup_state (rgroup.h), when started */
	uint64_t term, commit, applied;
	unsigned nvoters;
	uint64_t voters[8];
};
void cluster_info(const struct cluster *cl, struct cluster_info *out);
/*
 * The clients that described themselves to this node lately (client_info.h;
 * heard within CINFO_TTL_NS): up to max into out, how many.
 */
struct cinfo;
unsigned cluster_clients(const struct cluster *cl, struct cinfo *out, unsigned max);

#endif /* SH_CLUSTER_CLUSTER_H */
