/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One member of a Raft group (DESIGN.md §5.1): libraft's instance on
 * Shoal's raft_io, behind the only interface the rest of Shoal uses. The
 * configuration group (cluster.c) and the metadata groups (meta/mgroup.c)
 * are both built on it; no file outside cluster/'s raft_* and rgroup.c
 * includes <raft.h> (scripts/check-layers).
 *
 * Life: rgroup_open sets up the transport and loads the log (async);
 * opened(arg, status) runs when it is loaded. Then the owner may look at
 * rgroup_has_state, bootstrap a new group's voters, and rgroup_start (now,
 * or later: the configuration group starts when a leader contacts it).
 * rgroup_close fails every request in flight: their callbacks run later,
 * not inside it (-ESHUTDOWN, or what ended them as it closed), then
 * done(arg); the rgroup is freed then.
 *
 * The state machine's callbacks run from inside libraft; they may look at
 * the rgroup but not close it. Entries and snapshots come and go as bytes:
 * buffers handed over (struct rgroup_buf) are rgroup_alloc'd, and taken by
 * whom they are handed to, also when the call fails.
 *
 * Every asynchronous request (propose, barrier, transfer, membership
 * change) calls back exactly once, later, never inside the call that
 * started it (env/README.md), with 0 or a negative errno:
 * SH_ENOTLEADER (not the leader, or leadership lost: a proposal may or may
 * not have committed), -ESHUTDOWN (closing), -EBUSY (another change in
 * flight), -ENOMEM, -EIO (anything else; the rgroup logs libraft's word
 * for it). Calls return 0 or the same codes.
 */
#ifndef SH_CLUSTER_RGROUP_H
#define SH_CLUSTER_RGROUP_H

#include "../base/codec.h"
#include "raft_io.h"

struct rgroup;

/* What this member is now (the values of libraft's raft_state). */
enum rgroup_state {
	RGROUP_UNAVAILABLE = 0, /* not started, or closing */
	RGROUP_FOLLOWER = 1,
	RGROUP_CANDIDATE = 2,
	RGROUP_LEADER = 3,
};
const char *rgroup_state_name(int state);

/* A member's part in the group's configuration. */
enum rgroup_role {
	RGROUP_STANDBY = 0, /* is sent the log, does not vote */
	RGROUP_VOTER = 1,
	RGROUP_SPARE = 2, /* neither */
};

struct rgroup_member {
	uint64_t id;
	enum rgroup_role role;
};

/* Bytes whose memory libraft may take over. */
struct rgroup_buf {
	void *p;
	size_t len;
};
void *rgroup_alloc(size_t len);
void rgroup_free(void *p);
/* *out = a copy of len bytes at p. 0, -ENOMEM. */
int rgroup_buf_copy(const void *p, size_t len, struct rgroup_buf *out);
/* *out = a copy of what e encoded. 0, e's error, -ENOMEM. */
int rgroup_buf_enc(const struct sh_enc *e, struct rgroup_buf *out);

/*
 * The replicated state machine. Each returns 0 or a negative errno; an
 * error from apply or restore stops this member (its state could not
 * follow the log): -EBADMSG says the bytes were corrupt.
 */
struct rgroup_sm {
	/* Entry idx committed: apply it, alike on every member; *result goes to its proposer. */
	int (*apply)(void *arg, uint64_t idx, const void *p, size_t len, void **result);
	/* The state at applied index idx, as bytes (*out, rgroup_alloc'd), for the log to keep. */
	int (*snapshot)(void *arg, uint64_t idx, struct rgroup_buf *out);
	/*
	 * Replace the state by a snapshot's bytes (at start, or one a leader
	 * sent); applied: the index applied before it. The snapshot's own index
	 * is in its bytes where the state machine needs it.
	 */
	int (*restore)(void *arg, uint64_t applied, const void *p, size_t len);
	/*
	 * Optional, for a state machine that keeps its own durable state
	 * (raft_io.h, rio_snap_hooks): persist: a snapshot at idx is about to
	 * be stored; set *keep (rgroup_alloc'd) to what to store instead, or
	 * leave keep->p NULL. expand: the kept bytes are to be sent to a
	 * follower: *out, the whole state they stand for.
	 */
	int (*persist)(void *arg, uint64_t idx, const void *p, size_t len, struct rgroup_buf *keep);
	int (*expand)(void *arg, const void *kept, size_t len, struct rgroup_buf *out);
	void *arg;
};

struct rgroup_params {
	/* the transport and the log: group, id, wal/name or path, log_size, vote_guard_ns
	 * (hooks: left NULL, rgroup sets them from sm) */
	struct rio_params io;
	const char
	    *addr; /* this member's address for libraft (distinct per member); NULL: id in hex */
	unsigned election_ms, heartbeat_ms;
	unsigned snapshot_threshold, snapshot_trailing; /* entries */
	unsigned install_snapshot_ms;
	struct rgroup_sm sm;
};

typedef void (*rgroup_cb)(void *arg, int status, void *result);

/* opened(arg, status) once the log is loaded (not if closed before). */
int rgroup_open(struct rnet *rn, const struct rgroup_params *p,
		void (*opened)(void *arg, int status), void *arg, struct rgroup **out);
void rgroup_close(struct rgroup *g, void (*done)(void *arg), void *arg);

/* After opened(0): the loaded log holds state (a term, entries or a snapshot). */
bool rgroup_has_state(struct rgroup *g);
/*
 * Before start, on an empty log: the group's first voters (ids; addrs:
 * libraft's addresses, or NULL: each id in hex, as rgroup_params.addr
 * NULL and rgroup_add's addr NULL give).
 */
int rgroup_bootstrap(struct rgroup *g, const uint64_t *ids, const char *const *addrs, unsigned n);
/* Take part (idempotent). 0, -EAGAIN before opened(0), -EIO. */
int rgroup_start(struct rgroup *g);
bool rgroup_started(const struct rgroup *g);

enum rgroup_state rgroup_state(const struct rgroup *g);
static inline bool
rgroup_leads(const struct rgroup *g)
{
	return rgroup_state(g) == RGROUP_LEADER;
}
uint64_t rgroup_id(const struct rgroup *g);
uint64_t rgroup_term(const struct rgroup *g);
uint64_t rgroup_commit(const struct rgroup *g);
uint64_t rgroup_applied(const struct rgroup *g);
/* The leader this member knows of; 0: none. */
uint64_t rgroup_leader(const struct rgroup *g);
/* The configuration this member holds: its members, 0 <= i < rgroup_nmembers. */
unsigned rgroup_nmembers(const struct rgroup *g);
struct rgroup_member rgroup_member(const struct rgroup *g, unsigned i);
/* The member id of the configuration; false if it holds none. */
bool rgroup_find(const struct rgroup *g, uint64_t id, struct rgroup_member *out);
/* The newest AppendEntries stamp member id echoed in this term (raft_io.h); 0: none. */
uint64_t rgroup_acked(const struct rgroup *g, uint64_t id);

/* Replicate entry (taken) at the leader; cb's result is what apply set. */
int rgroup_propose(struct rgroup *g, struct rgroup_buf *entry, rgroup_cb cb, void *arg);
/* cb once every entry before it is committed and applied here (the leader). */
int rgroup_barrier(struct rgroup *g, rgroup_cb cb, void *arg);
/* Hand leadership to member to (0: the one most up to date). cb when it ends, either way. */
int rgroup_transfer(struct rgroup *g, uint64_t to, rgroup_cb cb, void *arg);
/* Membership, one change at a time: add (as a spare), give a role, remove. */
int rgroup_add(struct rgroup *g, uint64_t id, const char *addr, rgroup_cb cb, void *arg);
int rgroup_assign(struct rgroup *g, uint64_t id, enum rgroup_role role, rgroup_cb cb, void *arg);
int rgroup_remove(struct rgroup *g, uint64_t id, rgroup_cb cb, void *arg);

#endif /* SH_CLUSTER_RGROUP_H */
