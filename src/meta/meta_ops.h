/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Namespace operations inside one bucket (docs/metadata.md): what a
 * bucket's state machine does with a committed command, in one bucket
 * store transaction. Each call checks, then changes records of this
 * bucket only; effects on another bucket (a parent directory's counts and
 * times, a remote inode's link count) are returned and queued as
 * outbound deltas in the same transaction, shipped later and applied
 * there with meta_apply_delta (idempotently, by source and sequence).
 *
 * Directories: size is the number of entries, nlink 2 + subdirectories.
 * Errors as Linux gives them: -ENOENT, -EEXIST, -ENOTDIR, -EISDIR,
 * -ENOTEMPTY, -ENAMETOOLONG, -EINVAL, -ESTALE (an inode number of this
 * bucket that is gone or never was), -ENODATA (no such xattr), -ERANGE;
 * and -ENOLCK: an entry under a directory of another bucket needs a lease
 * on it first (meta_lease_*), then the same call again.
 */
#ifndef SH_META_META_OPS_H
#define SH_META_META_OPS_H

#include "meta_db.h"
#include "meta_proto.h"

struct meta_bucket {
	struct meta_txn *t;
	uint16_t bucket;
	uint32_t nbuckets;
	uint64_t ver; /* the file-system version writes carry (reads: as of it) */
	const struct meta_keep *keep;
	/* the group's version and kept snapshots (meta_version.h; NULL: none, as in tests):
	 * meta_cmd_apply writes at its version at least and keeps what its snapshots read */
	struct meta_version *vs;
	struct meta_keep keep_own; /* what keep points at, then */
	unsigned queued;	   /* deltas queued for other buckets by what was applied */
	uint64_t unheld; /* a remove: this inode is open nowhere (its leader knew): no orphan */
};

/*
 * Queue d for bucket d->to (d->from and d->seq are set), or apply it here
 * at once when that is this bucket. b->queued counts what was queued.
 */
int meta_delta_send(struct meta_bucket *b, struct meta_delta *d);

/*
 * A directory's parent, kept at the directory's own bucket (META_K_PARENT)
 * for the subtree check of a rename by inode: set by mkdir, moved by a
 * rename to another parent (a META_DELTA_PARENT when the directory lives
 * in another bucket; the newest rename, by its time, wins), dropped with
 * the directory. 0 in *parent: not known (a directory made before parents
 * were kept). -ESTALE if dir is not an inode of this bucket, -ENOTDIR.
 */
int meta_parent_get(struct meta_bucket *b, uint64_t dir, uint64_t *parent);

/* The root directory (inode 1 of bucket 0), if absent. */
int meta_mkroot(struct meta_bucket *b, uint32_t mode, uint64_t now);

int meta_lookup(struct meta_bucket *b, uint64_t parent, const char *name, size_t len,
		struct meta_dentry *out);
int meta_getattr(struct meta_bucket *b, uint64_t ino, struct meta_inode *out);

int meta_setattr(struct meta_bucket *b, uint64_t ino, const struct meta_setattr *sa, uint64_t now,
		 struct meta_inode *out);

/*
 * Create (parent, name) with a new inode in this bucket (it must be the
 * entry's bucket: -EINVAL otherwise). *delta: for the parent's bucket.
 */
int meta_create(struct meta_bucket *b, uint64_t parent, const char *name, size_t len,
		const struct meta_new *n, struct meta_inode *attr, struct meta_dentry *out,
		struct meta_delta *delta);
/*
 * Add (parent, name) for an existing inode of type `type` (hard link; not
 * directories). Two deltas: the parent's, and the inode's link count.
 */
int meta_link(struct meta_bucket *b, uint64_t parent, const char *name, size_t len, uint64_t ino,
	      uint8_t type, uint64_t now, struct meta_delta deltas[2]);
/*
 * Remove (parent, name): rmdir if dir (-ENOTDIR / -ENOTEMPTY), unlink
 * otherwise (-EISDIR). The inode goes with its last link when it is in
 * this bucket; deltas[0] is the parent's, deltas[1] (ino 0 if none) the
 * remote inode's. *removed: the inode number the entry held. A directory
 * whose inode is in another bucket (renamed here) answers -EXDEV to dir 1;
 * dir 2 says its bucket closed it and found it empty: the entry goes and
 * a delta drops the inode there.
 */
int meta_remove(struct meta_bucket *b, uint64_t parent, const char *name, size_t len, int dir,
		uint64_t now, uint64_t *removed, struct meta_delta deltas[2]);
int meta_readlink(struct meta_bucket *b, uint64_t ino, char *buf, size_t cap, size_t *len);

/*
 * Rename when both entries are in this bucket (-EXDEV when they are not:
 * the two-phase path, docs/metadata.md). Linux's rules: -ENOENT, -EEXIST
 * (NOREPLACE), -ENOTDIR, -EISDIR, -ENOTEMPTY, -EINVAL (bad flags). The
 * check that a directory is not moved under itself is the caller's (it
 * walks the parents). deltas[0..2]: old parent, new parent, replaced inode
 * (ino 0: none to ship).
 */
int meta_rename(struct meta_bucket *b, uint64_t oparent, const char *oname, size_t olen,
		uint64_t nparent, const char *nname, size_t nlen, unsigned flags, uint64_t now,
		struct meta_delta deltas[META_DELTAS_MAX]);

/*
 * The entries of directory parent held in this bucket, in key order,
 * starting after name `after` (NULL: from the start): at most max into
 * out, *n of them; *more when entries may remain (resume after the last).
 */
int meta_readdir(struct meta_bucket *b, uint64_t parent, const char *after, size_t alen,
		 struct meta_dirent *out, unsigned max, unsigned *n, bool *more);

int meta_setxattr(struct meta_bucket *b, uint64_t ino, const char *name, const void *val,
		  size_t len, int flags, uint64_t now);
int meta_getxattr(struct meta_bucket *b, uint64_t ino, const char *name, void *val, size_t cap,
		  size_t *len);
/* Names NUL-separated into buf (Linux listxattr). -ERANGE if cap is too small; cap 0: size only. */
int meta_listxattr(struct meta_bucket *b, uint64_t ino, char *buf, size_t cap, size_t *len);
int meta_removexattr(struct meta_bucket *b, uint64_t ino, const char *name, uint64_t now);

/*
 * Rename across two buckets: two phases, coordinated by the source
 * entry's bucket S with an intent record; the target entry's bucket is T
 * (docs/metadata.md). Order: prepare_src at S, prepare_dst at T,
 * commit_src at S (the decision: the intent says committed), commit_dst
 * at T, finish at S. Until the end both names are locked: other
 * operations on them get -EBUSY. A prepare that fails is undone with
 * abort on the side(s) that prepared. After a crash, S's intents say what
 * to redo: prepared → abort both; committed → commit_dst, then finish.
 */

/* 1 (nothing done) if the rename's tag is done here: a retry another coordinator decided. */
int meta_rename_prepare_src(struct meta_bucket *b, struct meta_rename2 *r);
int meta_rename_prepare_dst(struct meta_bucket *b, struct meta_rename2 *r);
/* deltas: the old parent's (S), or the new parent's and a replaced inode's (T). */
int meta_rename_commit_src(struct meta_bucket *b, const struct meta_rename2 *r,
			   struct meta_delta deltas[META_DELTAS_MAX]);
int meta_rename_commit_dst(struct meta_bucket *b, const struct meta_rename2 *r,
			   struct meta_delta deltas[META_DELTAS_MAX]);
int meta_rename_abort(struct meta_bucket *b, const struct meta_rename2 *r);
int meta_rename_finish(struct meta_bucket *b, const struct meta_rename2 *r);
/* The renames this bucket coordinates, for recovery: phase 1 prepared, 2 committed. */
int meta_intents(struct meta_bucket *b,
		 int (*fn)(void *arg, int phase, const struct meta_rename2 *r), void *arg);

/*
 * Directory leases (docs/metadata.md). A bucket creates entries under a
 * directory of another bucket only while it holds a lease on it; the
 * directory's bucket records whom it granted, stops granting while the
 * directory is being removed, and refuses rmdir while leases are out.
 */
/* At the directory's bucket: grant lessee a lease. -ENOENT, -ENOTDIR, -EBUSY (closing). */
int meta_lease_grant(struct meta_bucket *b, uint64_t dir, uint16_t lessee, struct meta_lease *out);
/*
 * At the directory's bucket: stop granting (before rmdir) and list the
 * lessees to revoke (at most max; *n of them). meta_lease_reopen undoes it.
 */
int meta_lease_close(struct meta_bucket *b, uint64_t dir, uint16_t *lessees, unsigned max,
		     unsigned *n);
int meta_lease_reopen(struct meta_bucket *b, uint64_t dir);
/* At the directory's bucket: the buckets holding leases on dir (at most max; *n of them). */
int meta_lease_list(struct meta_bucket *b, uint64_t dir, uint16_t *out, unsigned max, unsigned *n);
/* At the directory's bucket: the lessee gave it back (after a revoke). */
int meta_lease_drop(struct meta_bucket *b, uint64_t dir, uint16_t lessee);
/* At a lessee: 0 if it holds a lease on dir (or dir is its own), -ENOLCK if not. */
int meta_lease_held(struct meta_bucket *b, uint64_t dir);
/* At the lessee: keep a granted lease, or give it up (revoke). */
int meta_lease_hold(struct meta_bucket *b, const struct meta_lease *l);
int meta_lease_revoke(struct meta_bucket *b, uint64_t dir);

/* At the bucket a delta is for: apply it unless applied before (then 0 and nothing). */
int meta_apply_delta(struct meta_bucket *b, const struct meta_delta *d);
/* The deltas queued here for other buckets, in order (fn as meta_scan's: 1 stops). */
int meta_outbox(struct meta_bucket *b, int (*fn)(void *arg, const struct meta_delta *d), void *arg);
/* Drop the queued deltas up to seq (their buckets applied them). */
int meta_outbox_ack(struct meta_bucket *b, uint64_t upto);

/*
 * Open files without names (docs/metadata.md): a regular file's last name
 * removed (unlink, rename over it, a delta from another bucket) leaves its
 * inode with nlink 0, its data and an orphan record; meta_orphan_drop
 * removes it all once its leader knows no client holds it open (0 also
 * when it is gone already). meta_orphans: each orphan with its branch
 * (a clone's file: the record is bucket 'O' ino branch; branch 0's has no
 * branch) and when it lost its last name (fn as meta_scan's: 1 stops);
 * a drop is a command of the orphan's branch. meta_branch_forget: a
 * branch goes, and its bookkeeping here with it: its orphans' records,
 * the leases it holds, its renames' locks and intents (the drop of the
 * branch's records frees the rest).
 */
int meta_orphan_drop(struct meta_bucket *b, uint64_t ino);
int meta_orphans(struct meta_bucket *b,
		 int (*fn)(void *arg, uint64_t ino, uint16_t branch, uint64_t since), void *arg);
int meta_branch_forget(struct meta_bucket *b, uint16_t branch);

#endif /* SH_META_META_OPS_H */
