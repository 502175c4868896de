/* SPDX-License-Identifier: Apache-2.0 */
/* The metadata service's insides, shared by its files (msvc.c, msvc_rename.c). */
#ifndef SH_META_MSVC_INT_H
#define SH_META_MSVC_INT_H

#include "mgroup.h"
#include "msvc.h"

/* What a bucket's outbox shipper is doing. */
struct ship {
	struct mfs *fs;
	uint16_t bucket;
	struct env_timer retry;
	bool busy, dirty;
	unsigned pending; /* replies awaited */
	int status;
	uint64_t upto;
	uint64_t applied; /* the outbox is applied where it goes up to this seq */
	/*
	 * Dropped from the outbox up to this seq (as this leader knows): the
	 * next command proposed in the bucket carries the trim (no commit of
	 * its own), or an OUTBOX_ACK after TRIM_NS if none comes.
	 */
	uint64_t trimmed;
	struct env_timer trim;
	struct sh_list flush;	/* struct mreq waiting for an empty outbox */
	struct sh_list waiters; /* struct mreq answered once their deltas are applied */
};

#define USAGE_NS (2ull * 1000 * 1000 * 1000)
/* what snapshots hold is a walk of every extent: at most this often (or when they change) */
#define SNAP_USAGE_NS (10ull * 1000 * 1000 * 1000)
#define KILLS_MAX     16
#define CLAIM_AGE_NS  (60ull * 1000 * 1000 * 1000)

/*
 * What a group's kept snapshots hold, as last summed here (msvc_fs.c): a
 * pass walks its buckets a few at a time (SNAP_USAGE_BUCKETS per
 * publication for all the groups of this loop, so that it never holds the
 * loop up for long), then publishes what it summed. A pass begun under
 * another kept list, term or bucket list starts again; one that cannot
 * read a bucket is dropped; what was summed under another kept list or
 * term is not shown.
 */
#define SNAP_USAGE_BUCKETS 4
struct msvc_snap_use {
	uint64_t term, gen, at; /* the group's term and kept list's gen then; when */
	unsigned n;
	uint64_t ver[META_KEEP_MAX];
	unsigned nbr; /* the clones' branches, in the order of u's clone figures */
	uint16_t br[META_BRANCH_MAX];
	uint64_t brs;		  /* and those clones with their bases, summed */
	struct meta_snap_usage u; /* published */
	/* the pass under way: its term, gen, bucket list (count and a sum of the buckets),
	 * clones (summed), next bucket (an index in that list), sum */
	uint64_t p_term, p_gen, p_list, p_brs;
	unsigned p_nb, p_next;
	bool p_on;
	struct meta_snap_usage p;
};

struct mfs {
	struct sh_list link;
	struct msvc *s;
	uint32_t id;
	struct meta_db *db;
	char dbpath[600];
	struct mgroup **groups;		 /* by group index; NULL where this node is no member */
	struct meta_usage *usage;	 /* by group index: as last summed while it served here */
	uint64_t *usage_term;		 /* by group index: the term of that sum (0: none yet) */
	struct msvc_snap_use **snap_use; /* by group index: what its snapshots hold (or NULL) */
	bool *leaving; /* by group index: its copy here is being dropped (or brought in) */
	bool deleted;  /* closing because the filesystem was deleted: its logs go */
	uint32_t ngroups;
	uint32_t nbuckets;
	struct ship *ship; /* per bucket */
	unsigned open_groups;
	unsigned refs;		 /* requests, shipments and renames that refer to it */
	struct sh_list r2s;	 /* renames between buckets coordinated here */
	struct sh_list reclaims; /* stripes being released (msvc_reclaim.c) */
	struct mcache *cache;	 /* client cache leases (msvc_cache.c), lazily made */
	struct mholds *holds;	 /* clients' open files (msvc_hold.c), lazily made */
	struct mheal *heal;	 /* rebuild and re-protection (msvc_heal.c) */
	uint64_t *led_since;	 /* by group index: when it became a serving leader here */
	unsigned nreclaims;
	uint64_t kills[KILLS_MAX]; /* dedup claims being asked about (0: a free slot) */
	bool reclaim_more;	   /* the last scan left records behind: scan again as jobs end */
	uint32_t reclaim_from;	   /* the group the next scan starts at (each one the next) */
	struct env_timer reclaim_tick;
	bool *snap_busy;  /* by group index: a version step in flight (msvc_snap.c) */
	bool snap_asking; /* the groups are being asked where they stand */
	/* a restore's pause, as this node saw it begin (monotonic ns; 0: not paused), and
	 * which restore it is */
	uint64_t paused_since;
	uint32_t paused_epoch;
	bool closing;
};

#define BALANCE_ANSWERS 8

struct msvc {
	struct net *net;
	struct env *env;
	struct rnet *rn;
	struct rwal *wal; /* the groups' shared Raft log, DIR/meta.wal */
	bool wal_ready;	  /* loaded: groups may start */
	struct mroute *rt;
	struct msvc_params p;
	char dir[512];
	uint64_t self;	     /* this endpoint's id */
	struct sh_list fss;  /* struct mfs */
	struct sh_list reqs; /* struct mreq in progress */
	struct msvc_stats st;
	uint64_t usage_at; /* when msvc_groups last summed the groups' usage */
	bool stopping;
	unsigned closing_groups;
	struct env_timer balance;   /* leader balancing (msvc_balance.c) */
	struct env_timer snap_tick; /* snapshots at the groups (msvc_snap.c) */
	uint64_t balance_quiet;	    /* no hand-over before this (env_now) */
	struct ask *asking;	    /* a member asked how many groups it leads */
	struct handing {
		uint32_t gid; /* 0: none */
		uint64_t to, at;
		int led;
	} handing; /* a hand-over waiting for the cache leases given to run out */
	struct {
		uint64_t node, at;
		unsigned led;
	} answers[BALANCE_ANSWERS]; /* what members answered lately */
	void (*done)(void *arg);
	void *done_arg;
	struct env_task done_task;
};

enum step {
	ST_NONE,
	ST_LEASE,      /* getting a lease from the directory's bucket */
	ST_HOLD,       /* proposing the lease we got */
	ST_PROPOSE,    /* the command itself */
	ST_CLOSE,      /* rmdir: stop granting leases on the directory */
	ST_REVOKE,     /* rmdir: lessees give theirs back */
	ST_DROP,       /* rmdir: forget the lessees */
	ST_REOPEN,     /* rmdir failed: grant again */
	ST_DELTAS,     /* applying deltas from another bucket */
	ST_FLUSH,      /* revoke: shipping the outbox */
	ST_WAIT_READY, /* the group's barrier */
	ST_LATER,      /* waiting to try again (its timer) */
	ST_RENAME2,    /* a rename between buckets answers it */
	ST_SHIPPED,    /* done: answered once its deltas are applied where they go */
};

/* A request in progress: from the network (nr) or from this node (cb). */
struct mreq {
	struct sh_list link;
	struct msvc *s;
	struct mp_req req;
	struct net_req *nr;
	mroute_cb cb;
	void *cbarg;
	struct mfs *fs;
	struct mgroup *g;
	struct meta_cmd cmd;
	struct meta_result res;
	struct mp_reply rep;
	enum step step;
	unsigned rounds;
	unsigned pending;
	int status;
	uint64_t t0; /* when it came */
	uint64_t deadline;
	uint64_t dir;	   /* rmdir: the directory; lease: the directory */
	uint64_t wait_seq; /* ST_SHIPPED: the last delta of its bucket's outbox it made */
	uint64_t trim;	   /* the outbox trim its last proposal carried (in trim_bucket) */
	/* a lease just granted for the command: its next round carries it (dir 0: none) */
	struct meta_lease fold;
	uint16_t trim_bucket;
	uint64_t fenced; /* a remove: the inode msvc_hold_fence fenced for it */
	uint16_t lessees[64];
	uint8_t held[64]; /* revoke: lessee still holds entries */
	unsigned nlessees;
	struct env_timer timer;
	struct sh_list flink; /* in a ship's flush list */
	uint8_t buf[META_XATTR_MAX];
};

/* Answer a request (over the network or to a local caller) and free it. */
void mreq_answer(struct mreq *m, int status, const struct mp_reply *r);
/* A command's result answered (its reply built from r). */
void msvc_reply_result(struct mreq *m, const struct meta_result *r);
/* A read (msvc_read.c): answered from the bucket's store. */
void msvc_do_read(struct mreq *m);
/* The client endpoint that asked (0: a backend, or this node). */
uint64_t msvc_client_of(const struct mreq *m);
/* What the buckets of group g use, summed (a read of each bucket's usage record). */
void msvc_group_usage(struct mgroup *g, struct meta_usage *out);
/* The filesystems (msvc_fs.c): one by id or NULL; closed; the configuration applied. */
struct mfs *mfs_find(struct msvc *s, uint32_t id);
void mfs_close(struct mfs *fs);
void msvc_apply_cfg(struct msvc *s, const struct cfg *c);
/* A bucket's outbox timers (msvc_ship.c): ship again; trim what was applied where it went. */
void mfs_ship_retry(struct env_timer *t);
void mfs_trim_due(struct env_timer *t);
/* bucket's outbox was applied up to upto where it goes: the commands waiting for it answer. */
void mfs_shipped(struct mfs *fs, uint16_t bucket, uint64_t upto);
/* A command that carried a trim up to upto is through: if applied, the outbox is dropped there. */
void mfs_trimmed(struct ship *sh, int status, const struct meta_result *r, uint64_t upto);
/* The group serving bucket here, or NULL. */
struct mgroup *mfs_group(struct mfs *fs, uint16_t bucket);
void mfs_unref(struct mfs *fs);
/* Ship what bucket's outbox holds (deltas for other buckets). */
void mfs_ship_kick(struct mfs *fs, uint16_t bucket);

/* The last delta r queued in bucket's outbox for another bucket (0: none). */
uint64_t msvc_deltas_out(const struct meta_result *r, uint16_t bucket);
/*
 * Answer m, a success with nothing more to say, once its bucket's outbox
 * has been applied past seq where it goes (2 s at most; seq 0: at once):
 * what the client asks next sees the command's deltas.
 */
void msvc_answer_shipped(struct mreq *m, uint64_t seq);
/*
 * A rename between two buckets, coordinated here by the source entry's
 * bucket (m->req.bucket, a group this node leads): prepare, decide,
 * commit, finish (docs/metadata.md). Answers m.
 */
void msvc_rename2(struct mreq *m);
/* Start working the reclaim queues of the groups this node leads (a timer). */
void msvc_reclaim_start(struct mfs *fs);
/* The filesystem closes: releases in flight are cancelled. */
void msvc_reclaim_cancel(struct mfs *fs);
/* The filesystem closes: renames waiting to retry end. */
void msvc_rename2_cancel(struct mfs *fs);
/* Send a command to bucket's leader (this node's own groups included). */
int msvc_call_cmd(struct mfs *fs, uint16_t bucket, const struct meta_cmd *c, uint64_t timeout_ns,
		  mroute_cb cb, void *arg);
/* Client cache leases (msvc_cache.c). */
struct mcache;
void msvc_cache_grant(struct mfs *fs, uint64_t client, const struct mp_key *k);
/* What command c, applied by g here, changed that clients cached is recalled. */
void msvc_cache_changed(struct mfs *fs, struct mgroup *g, const struct meta_cmd *c,
			const struct meta_result *r);
void msvc_cache_free(struct mfs *fs);
/* Client is gone (MP_FORGET): its leases go, unrecalled. */
void msvc_cache_forget(struct mfs *fs, uint64_t client);
/*
 * The answer (encoded: body) to a command of group g, which must wait for
 * g's recalls in flight: kept, and net_reply'd once they are done (true),
 * or to be answered now (false).
 */
bool msvc_cache_park(struct mfs *fs, struct mgroup *g, struct net_req *nr, int status,
		     const void *body, size_t len);
/*
 * Open files without names (msvc_hold.c). msvc_hold: client holds ino open
 * (or gives it back); -ESTALE if ino is being dropped. msvc_hold_led: group
 * gi became a serving leader here. msvc_orphans_reap: drop bucket's orphans
 * nobody holds (from the reclaim tick).
 */
struct mholds;
int msvc_hold(struct mfs *fs, uint64_t client, uint64_t ino, bool release);
void msvc_hold_led(struct mfs *fs, uint32_t gi);
void msvc_orphans_reap(struct mfs *fs, struct mgroup *g, uint32_t gi, uint16_t bucket);
void msvc_hold_free(struct mfs *fs);
/*
 * A remove's leader, before proposing it: true if ino, of group gi here, is
 * open nowhere (no hold, led long enough to know); it is then fenced (a hold
 * of it is refused) until msvc_hold_unfence, so it can go with the remove.
 */
bool msvc_hold_fence(struct mfs *fs, uint32_t gi, uint64_t ino);
void msvc_hold_unfence(struct mfs *fs, uint64_t ino);
/* rmdir of m's directory whose inode (dir) lives in another bucket. Answers m. */
void msvc_rmdir_remote(struct mreq *m, uint64_t dir);
/* A new leader finishes or undoes the renames its buckets' intents record. */
void msvc_rename2_recover(struct mfs *fs, struct mgroup *g);

/*
 * Self-healing (msvc_heal.c): msvc_heal_start at open (a timer), cancel at
 * close (jobs in flight end), free with the filesystem; msvc_heal_add adds
 * its counters to sum.
 */
struct mheal;
int msvc_heal_start(struct mfs *fs);
void msvc_heal_cancel(struct mfs *fs);
void msvc_heal_free(struct mfs *fs);
void msvc_heal_add(const struct mfs *fs, struct msvc_heal_stats *sum);
/*
 * Fragment idx of stripe (of bucket, group g) found corrupt on target:
 * queued to be re-created there. 0, -ENOENT (no such stripe), -ESTALE (the
 * record does not put it there), -EBUSY (the queue is full), -ENODATA.
 */
int msvc_heal_repair(struct mfs *fs, struct mgroup *g, uint16_t bucket, uint64_t stripe,
		     uint32_t idx, uint64_t target);

/* Leader balancing: a node leading two groups more than a member of one hands it over. */
/* Snapshots: groups brought to the configuration's version, states moved on (msvc_snap.c). */
void msvc_snap_start(struct msvc *s);
/* Look at the snapshots again in delay_ns (sooner than the next tick). */
void msvc_snap_kick(struct msvc *s, uint64_t delay_ns);
/*
 * A request as of a snapshot's version (req->at): 0 if it is a read and a
 * ready snapshot of the filesystem reads at that version; -EROFS (not a
 * read), -ESTALE (no such snapshot, or not ready: being created or deleted).
 */
int msvc_snap_readable(const struct mfs *fs, const struct mp_req *req);
/* 0 if version ver is a ready snapshot's of the filesystem, else -ESTALE. */
int msvc_snap_ready(const struct mfs *fs, uint64_t ver);
/*
 * Clones (msvc_clone.c): msvc_branch_ok, 0 if branch is a ready clone's of
 * fs (-EAGAIN: being created; -ESTALE: none, or being deleted).
 * msvc_clone_step: the next step group gi (its record vs) takes for the
 * clones (c->data: room for 8 bytes), into c and *bucket; false if none.
 * The first group's leader tallies which branches each group serves
 * (MP_VERSION: u64 LE each, branch | 1 << 16 while dropped; and the
 * highest it ever served | 1 << 17) and proposes clones' states once every
 * group answered: ready once every group serves the branch, gone once
 * none does and none can take it late (each has served or fenced it).
 */
int msvc_branch_ok(const struct mfs *fs, uint16_t branch);
bool msvc_clone_step(struct mfs *fs, const struct meta_version *vs, struct meta_cmd *c,
		     uint16_t *bucket);
bool msvc_clone_pending(const struct mfs *fs, const struct cfg *c);
struct clone_tally {
	unsigned n, groups;
	uint16_t branch[CFG_CLONES_MAX];
	unsigned listed[CFG_CLONES_MAX], serving[CFG_CLONES_MAX], fenced[CFG_CLONES_MAX];
};
void msvc_clone_ask(struct clone_tally *t, const struct mfs *fs, const struct cfg *c);
void msvc_clone_heard(struct clone_tally *t, const uint8_t *b, size_t len);
void msvc_clone_conclude(const struct clone_tally *t, struct mfs *fs, unsigned ngroups);
/*
 * A restore (docs/snapshots.md, "Restore"): whether the filesystem is
 * paused, and so refuses m (a client's, not of a snapshot) with
 * SH_EPAUSED; whether group g (led here) is drained: nothing of its
 * buckets' outboxes left to apply elsewhere, no rename under way, no
 * client's request in flight here, and paused long enough that no
 * client still caches what a leader said before.
 */
bool msvc_restore_refuses(const struct mfs *fs, const struct mreq *m);
bool msvc_restore_drained(struct mfs *fs, struct mgroup *g);
void msvc_snap_stop(struct msvc *s);
void msvc_balance_start(struct msvc *s);
void msvc_balance_stop(struct msvc *s);

#endif /* SH_META_MSVC_INT_H */
