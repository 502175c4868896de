// SPDX-License-Identifier: Apache-2.0
/* What cluster.c and cluster_lead.c share: the configuration group's state. */
#ifndef SH_CLUSTER_CLUSTER_INT_H
#define SH_CLUSTER_CLUSTER_INT_H

#include "client_info.h"
#include "cluster.h"
#include "rgroup.h"

#define CONFIG_GROUP	0
#define RAFT_LOG_SIZE	(32ull << 20)
#define TICK_NS		(100ull * 1000 * 1000)
#define PUSH_RETRY_NS	(300ull * 1000 * 1000)
#define CALL_TIMEOUT_NS (2ull * 1000 * 1000 * 1000)
#define VOTERS_MAX	5
#define SYNC_WAIT_NS	(1000ull * 1000 * 1000)

/* SUB_WATCH: a cluster_wait, not a change (ready says when it is done) */
enum sub_state { SUB_WAIT, SUB_APPLYING, SUB_FORWARDING, SUB_SYNC, SUB_WATCH };

struct sub {
	struct sh_list link;
	struct cluster *cl;
	struct cfg_cmd cmd;
	cluster_cb cb;
	void *arg;
	struct net_req *req; /* forwarded to us: answer it */
	uint64_t deadline;
	int state;
	bool prepared;
	bool internal; /* from the leader's own duties (failure detection) */
	bool fwd_ok;   /* may go on to the leader (not already forwarded to us) */
	uint64_t fwd_to;
	struct ccall *call;	/* while forwarding */
	uint64_t want_epoch;	/* done at the leader: wait until this node has it too */
	cluster_ready_fn ready; /* SUB_WATCH */
};

/* What the leader tracks per node. */
/* A heartbeat (NET_OP_CLUSTER_HEARTBEAT): u64 node, u64 epoch, u8 flags of: */
#define HB_DATA_DOWN 0x01 /* none of its data interfaces has a link */

struct track {
	uint64_t id;
	uint64_t seen;	       /* env_now of the last sign of life */
	uint64_t acked;	       /* epoch the node confirmed */
	uint64_t pushed;       /* when we last pushed */
	uint64_t pushed_epoch; /* the epoch we last pushed (a newer one goes at once) */
	bool proposing;	       /* a state change for it is in flight */
	bool data_down;	       /* its last heartbeat said its data network is down */
};

struct cluster {
	struct cinfo *clients; /* what clients said of themselves (CINFO_MAX, allocated on use) */
	unsigned nclients;
	struct net *net;
	struct env *env;
	struct rnet *rn;
	struct cluster_params p;
	char mgmt[CFG_ADDR_MAX], data[CFG_ADDR_MAX], domain[CFG_NAME_MAX];
	char path[512];
	struct cfg *cfg;      /* the newest configuration known here (what readers see) */
	struct cfg *fsm_cfg;  /* the Raft state machine's own (voters) */
	struct rgroup *rg;    /* NULL from cluster_stop on */
	bool inited, closing; /* inited: rg's log is loaded */
	int apply_rc;
	char apply_msg[CFG_MSG_MAX];
	struct sh_list subs;
	struct sh_list calls; /* struct ccall */
	bool raft_closed;
	struct env_timer tick;
	struct env_task pump;
	uint64_t last_hb;
	uint64_t leader_hint; /* who pushed to us last (until it says it does not lead) */
	bool was_leader;
	bool changing;	       /* a membership change is in flight */
	uint64_t promote;      /* node added as spare, to make a voter */
	bool replacing;	       /* a metadata group replacement is in flight */
	uint64_t stuck_warned; /* when to say again that no node can replace a dead one */
	struct track track[CFG_NODES_MAX];
	unsigned ntrack;
	void (*stop_done)(void *arg);
	void *stop_arg;
	struct env_task stop_task;
};

/* An RPC in flight: cancelled (and waited for) when the cluster stops. */
typedef void (*ccall_fn)(struct cluster *cl, void *ctx, uint64_t node, int status,
			 const struct net_msg *reply);

struct ccall {
	struct sh_list link;
	struct cluster *cl;
	struct net_call *h;
	ccall_fn fn;
	void *ctx;
	uint64_t node;
};

/* cluster.c */
/* Whether this node leads the configuration group now. */
bool cluster_leads(struct cluster *cl);
/* Move the submissions along: propose, forward, fail those past their deadline. */
void cluster_pump(struct cluster *cl);
/* A submission of cmd, not yet queued (NULL: out of memory). */
struct sub *cluster_sub_new(struct cluster *cl, const struct cfg_cmd *cmd);
/* What the leader tracks of node id (made on first sight; NULL when full). */
struct track *cluster_track(struct cluster *cl, uint64_t id);
/* Push the configuration (encoded once per round by the caller: leader id, then cfg). */
void cluster_push(struct cluster *cl, struct track *t, const struct sh_enc *body);
/* A follower's heartbeat to whoever it believes leads. */
void cluster_heartbeat(struct cluster *cl);

/* cluster_lead.c */
/* One tick of the leader's duties. */
void cluster_lead(struct cluster *cl);

#endif /* SH_CLUSTER_CLUSTER_INT_H */
