/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Shoal's raft_io for libraft (DESIGN.md §5.1, §6): clock and timers from
 * env, messages over Shoal's network layer, log and snapshots in a
 * raft_log file through env — so the simulator drives Raft like
 * everything else.
 *
 * An rnet is one node's Raft transport on one net endpoint: it registers
 * NET_OP_RAFT and routes each message to its group's instance. Many
 * groups (the configuration group, later the buckets) share it.
 *
 * Each raft instance gets its own struct raft_io (libraft takes it over),
 * set up by rio_open. Its log is an instance in the node's shared log file
 * (raft_log.h) or a file of its own, which loads asynchronously: call
 * raft_init and raft_start (or raft_bootstrap first) only after the open
 * callback, in either case.
 *
 * set_term and set_vote are synchronous in libraft: they change the state
 * at once, queue a record, and hold this instance's outgoing messages
 * until the record is durable — a vote is never visible before it is
 * persisted, and no fsync happens inside the call.
 *
 * Leader leases (docs/metadata.md "Leader leases"). A frame is u32 group,
 * u64 stamp, the message (raft_codec.h). A leader stamps each
 * AppendEntries with its env_now when sent; a member echoes the newest
 * stamp it got from a node in its answers to that node. An answer in the
 * leader's current term says the member heard the leader at or after the
 * stamp, and libraft's member then refuses to vote (it has a leader) until
 * its own election timeout runs out, at least the minimum timeout later:
 * so no other leader can be elected before the stamp a quorum echoed plus
 * that minimum. rio_acked gives each peer's newest echo; mgroup turns the
 * quorum's into the time its reads and client cache leases are safe until.
 * A restarted member forgets its leader, so for vote_guard_ns after start
 * an instance drops the RequestVotes that would disrupt one.
 */
#ifndef SH_CLUSTER_RAFT_IO_H
#define SH_CLUSTER_RAFT_IO_H

#include "../net/net.h"
#include "raft_log.h"

struct raft_buffer;
struct raft_io;
struct rnet;

/* A message came for a group with no running instance here (e.g. to start it lazily). */
typedef void (*rnet_unknown_fn)(void *arg, uint32_t group, uint64_t from);

int rnet_create(struct net *net, struct rnet **out);
void rnet_set_unknown(struct rnet *rn, rnet_unknown_fn fn, void *arg);
/* Instances must be closed (their close callback run) first. */
void rnet_destroy(struct rnet *rn);
struct env *rnet_env(const struct rnet *rn);
/* env_now() when a Raft message from node last arrived; 0 if never. */
uint64_t rnet_last_heard(const struct rnet *rn, uint64_t node);

/*
 * A state machine that keeps its own durable state (the metadata groups'
 * bucket store) stores only a small marker in the log as its snapshot:
 *
 * persist: a snapshot is about to be stored (one the state machine made,
 * or one received from a leader, whose state it must install now, durably,
 * since the log will forget the entries before it). Set *keep to the
 * bytes (raft_malloc'd) to store instead of s's, or leave keep->base NULL
 * to store s as it is. 0 or a negative errno (the put fails).
 *
 * expand: the stored bytes kept are to be sent to a follower: set *out
 * (raft_malloc'd) to the whole state they stand for. 0 or -errno.
 */
struct rio_snap_hooks {
	int (*persist)(void *arg, const struct raft_snapshot *s, struct raft_buffer *keep);
	int (*expand)(void *arg, const struct raft_buffer *kept, struct raft_buffer *out);
	void *arg;
};

struct rio_params {
	uint32_t group;
	uint64_t id; /* the instance's Raft id */
	/* the node's shared log (loaded), and the instance's name in it; or NULL: */
	struct rwal *wal;
	const char *name;
	const char *path;		    /* a log file of its own */
	uint64_t log_size;		    /* its size (two halves) */
	const struct rio_snap_hooks *hooks; /* NULL: snapshots stored whole */
	uint64_t vote_guard_ns;		    /* 0: none (see "Leader leases" above) */
};

/* Set up io; cb(arg, status) when its log is loaded. */
int rio_open(struct rnet *rn, struct raft_io *io, const struct rio_params *p, rlog_done_cb cb,
	     void *arg);
/* After raft_close's callback (or instead of raft_init if never used). */
void rio_destroy(struct raft_io *io);
/* The loaded log holds state (a term, entries or a snapshot): this node was a member. */
bool rio_has_state(struct raft_io *io);
/* The newest of our AppendEntries stamps peer id echoed in the current term; 0: none. */
uint64_t rio_acked(struct raft_io *io, uint64_t id);

#endif /* SH_CLUSTER_RAFT_IO_H */
