/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The metadata service of a backend (docs/metadata.md): on one worker's
 * data endpoint, the metadata groups of every filesystem this node holds
 * replicas of, and the NET_OP_META requests for them.
 *
 * A leader serves reads from its applied state and replicates commands,
 * and does what a command needs first, so that a client's create, remove
 * or setattr is one round trip:
 * - an entry under a directory of another bucket needs a lease on it:
 *   the leader gets one from the directory's bucket, then proposes;
 * - rmdir of a directory with leases out revokes them (each lessee gives
 *   its lease back and ships its deltas), then removes it, or answers
 *   ENOTEMPTY and opens the directory to leases again;
 * - the deltas a command queued for other buckets (a parent's counts and
 *   times, a remote inode's link count) are shipped in batches to those
 *   buckets' leaders, then acknowledged in the source bucket.
 * A new leader creates the root directory if its group holds bucket 0 and
 * ships what its buckets' outboxes hold. Leaders also work their buckets'
 * reclaim queues: the fragments of stripes no extent refers to any more
 * are released on their targets, then the record goes.
 */
#ifndef SH_META_MSVC_H
#define SH_META_MSVC_H

#include "../cluster/raft_log.h"
#include "meta_extent.h"
#include "meta_version.h"
#include "mroute.h"

struct msvc;

struct msvc_params {
	const char *dir;      /* where the stores and Raft logs live */
	uint64_t log_size;    /* what one group's log may hold; default 32 MiB */
	uint64_t wal_size;    /* the groups' shared log file, DIR/meta.wal; default 512 MiB */
	unsigned election_ms; /* default 500: a few groups per node afford a quick failover */
	bool store_nosync;    /* the bucket stores never fsync (the simulator) */
	/* a dedup claim this old is asked about at its file's bucket (0: 60 s) */
	uint64_t claim_age_ns;
	/*
	 * A target this endpoint serves itself, or NULL (a call to oneself
	 * does not go over the network: releases, rebuild reads and writes
	 * go to the store directly).
	 */
	struct store *(*store_local)(void *arg, uint64_t target);
	/*
	 * Propose a change of the configuration (a snapshot's next state:
	 * msvc_snap.c), on the endpoint's thread; whether it lands is seen in
	 * the next configuration. NULL: this node proposes none.
	 */
	void (*cfg_submit)(void *arg, const struct cfg_cmd *cmd);
	void *arg;
};

int msvc_create(struct net *n, const struct msvc_params *p, struct msvc **out);
/* A newer configuration (on the endpoint's thread): start and stop groups. */
int msvc_set_cfg(struct msvc *s, const struct cfg *c);
/* Close every group; done(arg) later. Then destroy the net. */
void msvc_stop(struct msvc *s, void (*done)(void *arg), void *arg);
/*
 * The simulator's kill -9, before msvc_stop: the stores lose what they had
 * not flushed (the groups' logs still hold it).
 */
void msvc_crash(struct msvc *s);
/*
 * An mroute_local_fn (arg: the msvc) for other routes on this endpoint: a
 * call to one of this node's own groups is served here, not sent to itself.
 */
int msvc_local_call(void *arg, const struct mp_req *req, mroute_cb cb, void *cbarg);

struct msvc_group_info {
	uint32_t fs, index;
	unsigned nbuckets;
	int raft_state;
	uint64_t term, commit, applied, leader;
	bool ready;
	unsigned nvoters; /* node ids, as this replica knows the group's configuration */
	uint64_t voters[8];
	/* what its buckets' files use (meta_usage), summed every 2 s while it serves here;
	 * the filesystem's total is the sum over the groups where ready is true */
	struct meta_usage usage;
	/* what the filesystem's kept snapshots hold in its buckets (meta_snap_usage), summed
	 * at most every SNAP_USAGE_NS while it serves here: per kept version, the bytes only
	 * that snapshot reads; snap_held, the bytes only snapshots read */
	uint64_t snap_held;
	unsigned nsnaps;
	uint64_t snap_ver[META_KEEP_MAX], snap_only[META_KEEP_MAX];
	/* its writable clones, summed with the snapshots: per branch, the bytes only that
	 * clone reads and the bytes its files' extents map */
	unsigned nclones;
	uint16_t clone_branch[META_BRANCH_MAX];
	uint64_t clone_only[META_BRANCH_MAX], clone_mapped[META_BRANCH_MAX];
};
/*
 * What the requests served here were, counted when answered: slot
 * MSVC_SLOT_CMD + op for commands (creates, inline writes, ...), the
 * request kind below it for the rest (lookup, getattr, extents, ...).
 */
#define MSVC_SLOT_CMD 24
#define MSVC_SLOTS    (MSVC_SLOT_CMD + 40)
/*
 * Self-healing at this node (docs/healing.md), for the buckets it leads:
 * as the last pass over their stripes found them (stripes and data bytes
 * by fragments missing: 0, 1, 2, 3, 4 or more), and what it did since it
 * started.
 */
#define MSVC_HEAL_LEVELS 5
struct msvc_heal_stats {
	uint64_t stripes[MSVC_HEAL_LEVELS], bytes[MSVC_HEAL_LEVELS];
	uint64_t unreadable;	/* stripes missing more than their parity */
	uint64_t shared;	/* stripes with fragments sharing a failure domain */
	uint64_t pending_bytes; /* fragment bytes on lost targets, to rebuild */
	uint64_t rebuilt_frags, moved_frags, rebuilt_bytes, failed_jobs;
	uint64_t repaired_frags;   /* corrupt fragments re-created where they were */
	uint64_t balanced_frags;   /* fragments moved to even the targets' fill out */
	uint64_t balance_queued;   /* stripes the last pass planned to move for it */
	uint64_t draining;	   /* stripes with fragments on drives being removed */
	uint64_t fill_ratio_milli; /* the targets' fill, max over mean, x1000, as last asked */
	uint64_t in_flight, queued, rate_bps; /* jobs now, stripes planned, bytes/s lately */
	uint64_t passes, pass_at;	      /* whole passes, and when the last ended (realtime) */
	uint64_t pass_epoch;   /* the configuration the last pass went by (the oldest of a sum;
				* UINT64_MAX: no filesystem here) */
	uint64_t buckets;      /* buckets the last pass went over (led here, serving) */
	uint64_t targets_full; /* targets a heal write found out of space lately (the most of a
				* sum's parts: each leader knows its own) */
};
/* sum += h (counts added, the oldest pass kept): sums of nodes, of loops, of filesystems. */
void msvc_heal_stats_add(struct msvc_heal_stats *sum, const struct msvc_heal_stats *h);
struct msvc_stats {
	uint64_t requests[MSVC_SLOTS], errors[MSVC_SLOTS], time_ns[MSVC_SLOTS];
	struct msvc_heal_stats heal;
	unsigned log_instances; /* groups' logs kept in the shared Raft log (DIR/meta.wal) */
	struct rwal_stats log;
};
void msvc_stats(const struct msvc *s, struct msvc_stats *out);
/* A slot's name ("lookup", "create", ...), or NULL for a slot never used. */
const char *msvc_slot_name(unsigned slot);

/*
 * This node keeps a copy of filesystem fs's group g (its log: serving it
 * or not): 1, or 0; -EAGAIN while the groups' log is still loading.
 */
int msvc_keeps_group(const struct msvc *s, uint32_t fs, uint32_t g);

/* The groups served here: up to max into out; returns how many there are. */
unsigned msvc_groups(struct msvc *s, struct msvc_group_info *out, unsigned max);

#endif /* SH_META_MSVC_H */
