/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A backend's bucket store: one LMDB environment holding the records of
 * all its buckets, versioned by file-system version (DESIGN.md §5). All
 * LMDB calls are in meta_db.c.
 *
 * Each stored key is a logical key (meta_rec.h) followed by the
 * complement of the version that wrote it, so the newest version sorts
 * first. Reading "as of version S" finds the newest record at or before
 * S; a tombstone there means absent. Writing at version V replaces what V
 * wrote before and drops older versions that no kept snapshot still reads
 * (a snapshot S reads the newest version at or before S).
 *
 * Threading: one writer transaction at a time per environment (LMDB's
 * rule); read transactions from any thread.
 */
#ifndef SH_META_META_DB_H
#define SH_META_META_DB_H

#include <stdbool.h>

#include "meta_rec.h"

struct meta_db;
struct meta_txn;

/*
 * Open (creating) the store in file path with room for map_size bytes.
 * -errno. Flags:
 *
 * META_DB_NOSYNC: commits are not flushed to disk (tests and the
 * simulator; a system crash may then corrupt the store).
 *
 * META_DB_BATCH: write transactions are nested in one open batch
 * transaction and become durable together at meta_db_flush (one LMDB
 * commit, one fdatasync, for many writes): what a Raft group's state
 * machine wants, whose log holds everything not yet flushed. Reads see
 * the batch. One transaction at a time (-EBUSY otherwise), all on one
 * thread. A crash loses the unflushed batch whole; the store stays
 * intact (LMDB's integrity with MDB_NOMETASYNC: a system crash may undo
 * the last flush, never corrupt).
 */
#define META_DB_NOSYNC 0x1
#define META_DB_BATCH  0x2
int meta_db_open(const char *path, uint64_t map_size, unsigned flags, struct meta_db **out);
/* Flushes the batch first. */
void meta_db_close(struct meta_db *db);
/* Commit the batch (durable unless NOSYNC); sync: and force everything to disk. */
int meta_db_flush(struct meta_db *db, bool sync);
/* Drop the unflushed batch, as a crash would (the simulator). */
void meta_db_discard(struct meta_db *db);
/* Write transactions in the unflushed batch. */
unsigned meta_db_pending(const struct meta_db *db);

int meta_txn_begin(struct meta_db *db, bool write, struct meta_txn **out);
/*
 * Durable on return (LMDB's sync commit) unless opened META_DB_NOSYNC or
 * META_DB_BATCH (then at the next flush). Frees t either way.
 */
int meta_txn_commit(struct meta_txn *t);
/* A put or delete was made through t (a dry run that wrote nothing changed nothing). */
bool meta_txn_wrote(const struct meta_txn *t);
void meta_txn_abort(struct meta_txn *t);

/*
 * Branches (writable clones; docs/snapshots.md "Clones"). A version's top
 * 16 bits name its branch; a file system's own versions are branch 0's
 * (1 .. META_VER_NEWEST). A branch b > 0 is based on a version of a lower
 * branch (a snapshot's, kept while b lives). Read as of a version v of b,
 * a key has its newest record of b at or below v, else its value as of
 * b's base, and so on down the chain; a branch without a base sees its
 * own records alone. Reads of branch 0 see branch 0's records alone.
 * Bookkeeping (kinds not versioned) has one copy that every branch reads.
 *
 * Writes at a version of b keep to b's records: older versions of b go by
 * b's kept list, a record of another branch is never dropped, and a
 * tombstone of b stays while the base has a value it hides. The first
 * record of b over a value the base reads tells keep->moved +1 of that
 * value (b stopped reading it; the base still does), so a caller that
 * drops the reference of what its write replaced leaves the base's as it
 * was: every stored copy of a value holds one reference, in every branch.
 */
/* (META_BRANCH_SHIFT, META_VER_NEWEST, meta_ver_branch, meta_ver_newest: meta_rec.h) */

/*
 * Set branch b's base (a version of a lower branch), or forget it (base
 * 0). Set before any read or write of b, on the thread that writes the
 * store. -EINVAL (b 0, or a base not of a lower branch), -ENOMEM.
 */
int meta_db_branch(struct meta_db *db, uint16_t branch, uint64_t base);

/*
 * The snapshot versions still kept, ascending: older versions they read
 * survive writes. Kinds that are not versioned (meta_kind_versioned) are
 * written at version 1 and never kept, whatever the caller passes.
 *
 * moved (NULL: nobody asks) hears of every stored value of a versioned
 * kind whose standing changes, after the write that changed it, in the
 * same transaction: delta +1 when it stops being the newest and a kept
 * snapshot still reads it (it now lives for the snapshots alone), -1 when
 * such a value is dropped (no kept snapshot reads it any more). A value
 * replaced or deleted while it is the newest is no news: the caller
 * changed it. So what a value refers to (an extent's stripe) can hold one
 * reference per stored copy. A nonzero return fails the write.
 */
struct meta_keep {
	const uint64_t *v;
	unsigned n;
	int (*moved)(void *arg, const struct meta_key *k, const void *val, size_t len, int delta);
	void *arg;
	uint16_t
	    branch; /* meta_settle, meta_drop_branch: whose records (writes: their version's) */
};

/*
 * The value of k as of version at, into val (cap bytes); *len its length.
 * -ENOENT (absent or deleted as of at), -EOVERFLOW (cap too small).
 */
int meta_get(struct meta_txn *t, const struct meta_key *k, uint64_t at, void *val, size_t cap,
	     size_t *len);
/* meta_get of a value that is exactly len bytes: -EBADMSG if shorter, -EOVERFLOW if longer. */
int meta_get_exact(struct meta_txn *t, const struct meta_key *k, uint64_t at, void *val,
		   size_t len);
/* Write k at version ver (>= every version of k written before). -EINVAL, -ENOSPC, -EIO. */
int meta_put(struct meta_txn *t, const struct meta_key *k, uint64_t ver, const void *val,
	     size_t len, const struct meta_keep *keep);
/* Delete k at version ver (a tombstone where a kept snapshot still reads an older version). */
int meta_del(struct meta_txn *t, const struct meta_key *k, uint64_t ver,
	     const struct meta_keep *keep);

/*
 * Visit, in key order, every logical key that starts with prefix and sorts
 * after `after` (NULL: from the start), as of version at, skipping deleted
 * ones; fn returns 0 to go on, 1 to stop, or a negative errno to fail.
 */
typedef int (*meta_scan_fn)(void *arg, const uint8_t *key, size_t klen, const void *val,
			    size_t vlen);
int meta_scan(struct meta_txn *t, const struct meta_key *prefix, const uint8_t *after, size_t alen,
	      uint64_t at, meta_scan_fn fn, void *arg);

/*
 * The greatest logical key at or below k that starts with prefix and
 * reads a value as of version at, given to fn (its return: 0 or a
 * negative errno); -ENOENT if there is none. What finds the extent that
 * holds an offset without walking the file's extents before it.
 */
int meta_floor(struct meta_txn *t, const struct meta_key *prefix, const struct meta_key *k,
	       uint64_t at, meta_scan_fn fn, void *arg);

/*
 * After the kept snapshots changed (one was deleted): decide again, for
 * at most max logical keys of versioned kinds that start with prefix and
 * sort after `after` (NULL: from the start), which of their stored
 * versions of branch keep->branch survive, as a write would (moved hears
 * of what goes). The newest
 * version of each key stays unless it is a tombstone nothing older needs.
 * *next (META_KEY_MAX bytes) and *nlen: the key to go on after; *nlen 0
 * when the prefix is done. *dropped (may be NULL) counts the versions
 * dropped.
 */
int meta_settle(struct meta_txn *t, const struct meta_key *prefix, const uint8_t *after,
		size_t alen, unsigned max, const struct meta_keep *keep, uint8_t *next,
		size_t *nlen, uint64_t *dropped);

/*
 * A branch deleted (its clone is): drop every record of branch
 * keep->branch (> 0) of at most max logical keys of versioned kinds that
 * start with prefix and sort after `after`, as meta_settle pages them;
 * keep->moved hears -1 of each value dropped, the newest included (what
 * the branch still named goes with it). Other branches' records stay.
 */
int meta_drop_branch(struct meta_txn *t, const struct meta_key *prefix, const uint8_t *after,
		     size_t alen, unsigned max, const struct meta_keep *keep, uint8_t *next,
		     size_t *nlen, uint64_t *dropped);

/*
 * What changed from version v1 to version v2 (v1 < v2; v1 a kept
 * snapshot's or 0, the empty file system; v2 one's or the newest; each
 * read as its branch reads, so v1 may be a clone's base and v2 the
 * clone's): for
 * each logical key of a versioned kind that starts with prefix, comes
 * after the logical key `after` (alen 0: from the first) and whose value
 * as of v1 is not its value as of v2 (absent, or other bytes), in key order, fn(arg, key, klen,
 * old, olen, new, nlen) — old NULL where it was absent at v1, new NULL
 * where it is absent at v2 (the keys and extents replication sends between
 * two snapshots; MP_DIFF pages them with `after`). fn returns 0 to go on,
 * 1 to stop, or a negative errno to fail. With max (0: no limit), at most
 * max logical keys are looked at: stopped there, the last one looked at is
 * copied to next (META_KEY_MAX bytes) and its length to *nlen (0 when the
 * walk ended or fn stopped it), so that a bucket of many keys and few
 * changes is walked a slice at a time.
 */
typedef int (*meta_diff_fn)(void *arg, const uint8_t *key, size_t klen, const void *old,
			    size_t olen, const void *new, size_t nlen);
int meta_diff(struct meta_txn *t, const struct meta_key *prefix, const uint8_t *after, size_t alen,
	      uint64_t v1, uint64_t v2, unsigned max, uint8_t *next, size_t *nlen, meta_diff_fn fn,
	      void *arg);

/*
 * Every stored version of every logical key that starts with prefix (a
 * kind's prefix: 3 bytes), in key order and, within a key, by branch from
 * the highest to branch 0 and newest first in each: fn(arg, key, klen,
 * ver, val, vlen, newer) — val NULL for a tombstone, newer the version of
 * the key's next newer record of ver's branch (0 for the branch's
 * newest). What snapshots and clones hold (meta_snap_usage). fn returns 0
 * to go on, 1 to stop, or a negative errno to fail.
 */
typedef int (*meta_history_fn)(void *arg, const uint8_t *key, size_t klen, uint64_t ver,
			       const void *val, size_t vlen, uint64_t newer);
int meta_history(struct meta_txn *t, const struct meta_key *prefix, meta_history_fn fn, void *arg);

/* Remove every record of a bucket (before installing a snapshot of it). */
int meta_drop_bucket(struct meta_txn *t, uint16_t bucket);

/*
 * A bucket's snapshot for a replica that fell behind: every stored record
 * of the bucket, every version, as (u16 key length, key, u32 value length,
 * value) pairs after a u16 bucket and a u64 count. Import replaces the
 * bucket with it, refusing (-EBADMSG, nothing changed once aborted) a
 * malformed one or one with keys of another bucket.
 */
int meta_export_bucket(struct meta_txn *t, uint16_t bucket, struct sh_enc *e);
int meta_import_bucket(struct meta_txn *t, uint16_t bucket, const uint8_t *b, size_t len);

#endif /* SH_META_META_DB_H */
