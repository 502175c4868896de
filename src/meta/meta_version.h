/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A metadata group's file-system version (DESIGN.md §5, docs/snapshots.md):
 * the version its writes carry, the snapshot versions its buckets keep,
 * and how far it has settled since that list last changed. One record in
 * the group's first bucket (META_K_VERSION), changed only by applied
 * commands, so that every replica holds the same and a follower that gets
 * the leader's whole state gets it along.
 *
 *   u8 format (1), u64 ver, u64 gen, u64 settled, u32 cursor bucket,
 *   u16 key length, key, u16 n, n x u64 kept versions (ascending)
 *
 * META_OP_VERSION (at the first bucket; data: the kept versions, u64 LE
 * each, ascending) raises ver to the command's version and, if the list
 * differs, takes it: gen grows and settling starts over — unless the new
 * list only adds versions (a snapshot taken): then nothing can go that
 * could not before, and a settled group stays settled. META_OP_SETTLE
 * (at the bucket the cursor names; upto: the gen it settles for; flags:
 * keys in this step) settles that many keys there (meta_settle) and moves
 * the cursor; past the last bucket, settled becomes gen. A step for
 * another gen or bucket is -ESTALE, one with nothing left -EALREADY.
 *
 * META_OP_RESTORE (upto: the restore's epoch; data: the snapshot's
 * version, u64 LE; flags: keys in this step) puts that many keys of the
 * bucket rcursor names back as the snapshot has them (meta_restore); the
 * first step of an epoch is at the first bucket, and past the last,
 * repoch becomes the epoch. The snapshot must be kept (-EINVAL).
 *
 * Format 2 adds, after the kept versions: u32 repoch, u32 rdoing, u64
 * rver, u32 rcursor, u16 key length, key (format 1: no restore yet).
 *
 * Format 3 adds the branches the group serves (writable clones; meta_db.h
 * "Branches"): u16 top (the highest branch ever served), u16 n, n x (u16
 * branch, u64 base, u64 ver, u8 dropping, u32 cursor bucket, u16 key
 * length, key), ascending by branch. A branch not listed at or below top
 * went: what is still sent for it (a delta) changes nothing.
 * META_OP_BRANCH (at the first bucket; upto: the branch; data: its base,
 * a kept snapshot's version, u64 LE) adds one, whose writes then carry
 * ver (branch << 48 | 1); with base 0 it starts the branch's drop (of
 * one the group never served: top becomes it, so that it never comes), and
 * META_OP_BRANCH_DROP (upto: the branch; flags: keys; at the bucket its
 * cursor names) drops that many keys' records of it there
 * (meta_drop_branch: their stripes' references, live bytes and inline
 * usage go along); past the last bucket the branch is gone from the
 * record. A command of a branch the record does not list (or one being
 * dropped) is refused (-ESTALE), alike on every replica; its version is
 * the branch's, whatever it says. A base is kept: a snapshot with a
 * branch on it is not deleted (the caller's rule: -EBUSY here).
 */
#ifndef SH_META_META_VERSION_H
#define SH_META_META_VERSION_H

#include "meta_cmd.h"
#include "meta_ops.h"

#define META_KEEP_MAX	 256  /* snapshots a filesystem keeps at once */
#define META_SETTLE_MAX	 4096 /* keys in one settling step at most */
#define META_RESTORE_MAX 256  /* keys in one restore step at most */
#define META_BRANCH_MAX	 16   /* branches (clones) a group serves at once */
#define META_DROP_MAX	 256  /* keys in one branch drop step at most */
#define META_VERSION_VAL_MAX                                                            \
	(1 + 3 * 8 + 4 + 2 + META_KEY_MAX + 2 + META_KEEP_MAX * 8 + 4 + 4 + 8 + 4 + 2 + \
	 META_KEY_MAX + 2 + 2 + META_BRANCH_MAX * (2 + 8 + 8 + 1 + 4 + 2 + META_KEY_MAX))

/* A branch a group serves (format 3). */
struct meta_vbranch {
	uint16_t id;
	uint64_t base; /* the version it reads below its own records */
	uint64_t ver;  /* what its writes carry */
	bool dropping; /* it goes: META_OP_BRANCH_DROP steps at cursor, after key */
	uint32_t cursor;
	uint16_t klen;
	uint8_t key[META_KEY_MAX];
};

struct meta_version {
	uint64_t ver;	  /* writes carry at least this (>= 1) */
	uint64_t gen;	  /* how often the kept list changed */
	uint64_t settled; /* the gen every bucket of the group has settled for */
	uint32_t cursor;  /* settling: the index of the bucket in the group's list */
	uint16_t klen;	  /* settling: the key to go on after there (0: its start) */
	uint8_t key[META_KEY_MAX];
	/*
	 * Restores (docs/snapshots.md, "Restore"): repoch, the last one every
	 * bucket of the group has done; rdoing, the one under way (0: none),
	 * back to version rver, at the bucket of index rcursor after key rkey.
	 */
	uint32_t repoch, rdoing;
	uint64_t rver;
	uint32_t rcursor;
	uint16_t rklen;
	uint8_t rkey[META_KEY_MAX];
	uint16_t btop;
	unsigned nbranch;
	struct meta_vbranch branch[META_BRANCH_MAX];
	unsigned nkeep;
	uint64_t keep[META_KEEP_MAX];
	/* not stored: the group's buckets (the cursor's list) */
	const uint16_t *buckets;
	unsigned nb;
};

/* What a group holds before any snapshot: version 1, nothing kept, settled. */
void meta_version_init(struct meta_version *v);
/* Copy the stored part of src (not the bucket list) into dst. */
void meta_version_copy(struct meta_version *dst, const struct meta_version *src);
int meta_version_encode(const struct meta_version *v, uint8_t *out, size_t cap);
/* Fuzzed. -EBADMSG; the bucket list is left as it was. */
int meta_version_decode(const uint8_t *b, size_t len, struct meta_version *v);
/* The group's record (first: its first bucket): absent is meta_version_init's. */
int meta_version_load(struct meta_txn *t, uint16_t first, struct meta_version *v);
int meta_version_store(struct meta_txn *t, uint16_t first, const struct meta_version *v);
/* Kept lists, u64 LE each, ascending, at most META_KEEP_MAX (commands). -EBADMSG. */
int meta_keep_decode(const uint8_t *b, size_t len, uint64_t *v, unsigned *n);
/* A command of the record itself (version, settle, restore, branch steps): branch 0's alone. */
bool meta_version_op(uint8_t op);
/* The branch the record lists as id, or NULL. */
const struct meta_vbranch *meta_version_branch(const struct meta_version *v, uint16_t id);
/*
 * The version a command at ver writes at (ver of branch 0: the group's at
 * least; of a branch: the branch's), or 0 when ver names a branch the
 * record does not serve (absent, or being dropped).
 */
uint64_t meta_version_of(const struct meta_version *v, uint64_t ver);
/*
 * One bucket's part of a restore to version ver (a kept snapshot's): at
 * most max keys of versioned kinds after `after` (NULL: from the start)
 * whose newest value is not their value as of ver get that value back
 * (or are deleted), written at the bucket's version as any write:
 * extents take their references, live bytes and usage back, and those
 * they replace give theirs up. *next, *nlen: where to go on (*nlen 0: the
 * bucket is done, and then the leases it held on other buckets'
 * directories are dropped: the granting buckets went back too, and a
 * create asks again). A file without names put back is an orphan again,
 * since now. *changed counts the keys put back.
 */
int meta_restore(struct meta_bucket *b, uint64_t ver, const uint8_t *after, size_t alen,
		 unsigned max, uint64_t now, uint8_t *next, size_t *nlen, uint64_t *changed);
/* META_OP_VERSION, META_OP_SETTLE and META_OP_RESTORE in b (b->vs set; its changes stored). */
int meta_version_apply(struct meta_bucket *b, const struct meta_cmd *c, struct meta_result *r);
/*
 * What kept snapshots and writable clones hold of a bucket's file bytes
 * (meta_snap_usage.c; docs/snapshots.md, "Space"): only[i], the bytes of
 * extents and small files' inline bytes that keep[i] alone reads (what
 * deleting it frees, before compression, dedup and erasure coding);
 * held, those some kept snapshot reads and neither the live filesystem
 * nor a clone does; clone_only[j], those the clone on branch br[j] alone
 * reads (what deleting it frees); clone_mapped[j], the bytes its files'
 * extents map, whoever else reads them (its logical bytes, as
 * meta_usage.mapped is the live filesystem's). writable[j] (NULL: none):
 * br[j] is a writable snapshot's clone, one reader with its snapshot (they
 * go together: its clone_only is the snapshot's only). Added to *u; keep
 * in ascending order and br as the group's record has them.
 */
struct meta_snap_usage {
	uint64_t held;
	uint64_t only[META_KEEP_MAX];
	uint64_t clone_only[META_BRANCH_MAX], clone_mapped[META_BRANCH_MAX];
};
int meta_snap_usage(struct meta_txn *t, uint16_t bucket, const uint64_t *keep, unsigned nkeep,
		    const struct meta_vbranch *br, unsigned nbr, const bool *writable,
		    struct meta_snap_usage *u);

#endif /* SH_META_META_VERSION_H */
