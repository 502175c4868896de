/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A metadata Raft group (docs/metadata.md, "Replication"): the buckets of
 * one filesystem that share one replica set, replicated by a Raft
 * group (cluster/rgroup.h) on the data network, applied to the worker's
 * bucket store.
 *
 * The bucket store is the state machine's state: each apply also records
 * the Raft index applied, in the same store transaction, and a restart
 * replays the log from there (entries the store holds are skipped). A
 * log entry is (bucket, meta_cmd); applying it is one store transaction,
 * aborted on every replica alike when the command is rejected. Applies
 * are batched into one store commit (META_DB_BATCH), made 200 ms after
 * the first write or at 256 applies; a snapshot fsyncs the store and
 * leaves only a marker of its index in the log. A follower too far
 * behind is sent the export of every bucket of the group, installed
 * durably before its log records the snapshot.
 *
 * Every member bootstraps the same configuration (the members, from the
 * cluster configuration) when its log is empty, so a group needs no
 * coordinator to form. Reads are served by a leader whose barrier of its
 * current term has been applied (mgroup_ready): it has every committed
 * entry.
 */
#ifndef SH_META_MGROUP_H
#define SH_META_MGROUP_H

#include "../cluster/rgroup.h"
#include "meta_cmd.h"
#include "meta_dedup.h"

struct mgroup;

struct mgroup_params {
	uint32_t id;   /* the Raft group: filesystem id << 16 | group index */
	uint64_t self; /* this endpoint's Raft id (its data-network node id) */
	const uint64_t *members;
	unsigned nmembers;
	const uint16_t *buckets; /* the buckets it serves */
	unsigned nb;
	uint32_t nbuckets; /* of the cluster */
	/*
	 * A member that took a replaced one's place (the group formed without
	 * it): with an empty log it does not bootstrap, it waits to be added.
	 */
	bool join;
	struct meta_db *db;
	struct rwal *wal;  /* the node's shared Raft log (loaded), or NULL: */
	const char *path;  /* its instance's name in it, or a log file of its own */
	uint64_t log_size; /* what its log may hold (its snapshots' threshold and trailing) */
	unsigned election_ms;
	/* A committed command was applied here (leaders and followers). Optional. */
	void (*applied)(void *arg, struct mgroup *g, uint16_t bucket, const struct meta_cmd *c,
			const struct meta_result *r);
	/* This replica became a leader that serves (mgroup_ready). Optional. */
	void (*ready)(void *arg, struct mgroup *g);
	void *arg;
};

typedef void (*mgroup_cb)(void *arg, int status, const struct meta_result *r);

int mgroup_open(struct rnet *rn, const struct mgroup_params *p, struct mgroup **out);
/* Close Raft; pending proposals fail; done(arg) runs later. */
void mgroup_close(struct mgroup *g, void (*done)(void *arg), void *arg);

uint32_t mgroup_id(const struct mgroup *g);
bool mgroup_has_bucket(const struct mgroup *g, uint16_t bucket);
/* The buckets it serves. */
const uint16_t *mgroup_buckets(const struct mgroup *g, unsigned *n);
/* A leader with every committed entry applied: may serve reads and propose. */
bool mgroup_ready(struct mgroup *g);
/*
 * This node is marked down in the configuration (or no longer): while it
 * is, a leader here hands leadership to another member (clients skip
 * nodes marked down, so a group led here would answer no one).
 */
void mgroup_set_demoted(struct mgroup *g, bool demoted);
/*
 * The members the configuration now names: the leader makes them the
 * group's voters, one change at a time (a new one added and caught up
 * before one that left is removed).
 */
int mgroup_set_members(struct mgroup *g, const uint64_t *members, unsigned n);
/* Hand leadership to member `to` (a leader that is not busy changing). 0, -EAGAIN. */
int mgroup_transfer(struct mgroup *g, uint64_t to);
/*
 * Before a hand-over: answers stop carrying client cache leases (a new
 * leader does not know them, so it could not recall them); once the last
 * one given has expired, the hand-over is safe. Cleared when it ends.
 */
void mgroup_hold_cache(struct mgroup *g, bool hold);
/*
 * The leader's lease (raft_io.h "Leader leases"): until when (env_now) no
 * other replica can have become leader — the AppendEntries stamp a quorum
 * of the voters last echoed, plus 9/10 of the election timeout (the
 * minimum a member waits after hearing its leader before it votes). 0:
 * not the leader, a hand-over in flight, or not confirmed yet this term.
 * Reads answered to clients and their cache leases must end before it.
 */
uint64_t mgroup_lease_end(struct mgroup *g);
/* A client cache lease of lease_ns may be given now: no hand-over holds them, and the lease covers
 * it. */
bool mgroup_cache_ok(struct mgroup *g, uint64_t lease_ns);
/* Whom to ask instead: the known leader's Raft id, 0 if none. */
uint64_t mgroup_leader(struct mgroup *g);
/*
 * Wait until this replica is ready: cb(arg, 0) then, or cb(arg,
 * SH_ENOTLEADER) as soon as it is clear it will not be (a follower, or
 * after timeout_ns). Called back later, never inside the call.
 */
int mgroup_wait_ready(struct mgroup *g, uint64_t timeout_ns, void (*cb)(void *arg, int status),
		      void *arg);

/*
 * Propose command c for bucket (of this group) at the leader. cb runs
 * once: with 0 and the apply result (r->status is the command's own
 * outcome), or a negative errno when it may not have committed
 * (SH_ENOTLEADER: leadership lost or never held).
 */
int mgroup_propose(struct mgroup *g, uint16_t bucket, const struct meta_cmd *c, mgroup_cb cb,
		   void *arg);

/*
 * Run c against the applied state without keeping its effects (a dry run
 * the leader uses to decide what a command needs first). r as apply's.
 */
int mgroup_try(struct mgroup *g, uint16_t bucket, const struct meta_cmd *c, struct meta_result *r,
	       bool *wrote);

/* A read transaction on the applied state of bucket: *b to use, meta_txn_abort(b->t) after. */
int mgroup_read(struct mgroup *g, uint16_t bucket, struct meta_bucket *b);
/* As mgroup_read, as of file-system version at (a snapshot's; 0: the newest). */
int mgroup_read_at(struct mgroup *g, uint16_t bucket, uint64_t at, struct meta_bucket *b);
/* The group's version and kept snapshots, as applied here (meta_version.h). */
const struct meta_version *mgroup_version(const struct mgroup *g);

#define MGROUP_VOTERS_MAX 8
struct mgroup_info {
	int raft_state; /* enum rgroup_state */
	uint64_t term, commit, applied, leader;
	bool ready;
	unsigned nvoters; /* as this replica knows the group's configuration */
	uint64_t voters[MGROUP_VOTERS_MAX];
};
void mgroup_info(struct mgroup *g, struct mgroup_info *out);

/*
 * A whole group state as sent to a follower (docs/ondisk.md, "Bucket
 * store"): fn(arg, bucket, export, len) for each bucket, in order, *idx
 * set to the index it holds (left as it is for an older log's format).
 * 0, fn's first error, or -EBADMSG (fuzzed: tests/fuzz/fuzz_meta_snap.c).
 */
typedef int (*mgroup_snap_fn)(void *arg, uint16_t bucket, const uint8_t *b, size_t len);
int mgroup_snap_walk(const uint8_t *p, size_t len, uint64_t *idx, mgroup_snap_fn fn, void *arg);

#endif /* SH_META_MGROUP_H */
