/* SPDX-License-Identifier: Apache-2.0 */
/* What meta's files share and nobody else sees. */
#ifndef SH_META_META_INT_H
#define SH_META_META_INT_H

#include "meta_ops.h"

/*
 * meta_ops.c, meta_xattr.c and meta_rename.c: the namespace operations of
 * one bucket, each inside the caller's write transaction.
 */

/* An inode of this bucket: -ESTALE if gone, -EINVAL if of another bucket. */
int meta_inode_load(struct meta_bucket *b, uint64_t ino, struct meta_inode *in);
int meta_inode_store(struct meta_bucket *b, uint64_t ino, const struct meta_inode *in);
/* Its ctime set to now, and stored. */
int meta_touch_ctime(struct meta_bucket *b, uint64_t ino, struct meta_inode *in, uint64_t now);

/* Entry (parent, name) of this bucket (k: its key): -ENOENT, or d. */
int meta_dentry_get(struct meta_bucket *b, uint64_t parent, const char *name, size_t len,
		    struct meta_dentry *d, struct meta_key *k);
int meta_dentry_put(struct meta_bucket *b, const struct meta_key *k, uint64_t ino, uint8_t type);
/* Entry (parent, name) is a valid name and belongs in this bucket. */
int meta_entry_check(struct meta_bucket *b, uint64_t parent, const char *name, size_t len);
/*
 * The parent must be a directory: checked here when it lives here, else
 * through the lease this bucket holds on it (-ENOLCK: get one first).
 */
int meta_local_parent_check(struct meta_bucket *b, uint64_t parent);
/* -EBUSY while a two-phase rename holds entry (parent, name) of this bucket. */
int meta_unlocked_check(struct meta_bucket *b, uint64_t parent, const char *name, size_t len);
/*
 * The lock a two-phase rename of the branch b writes holds on entry
 * (parent, name): bucket 'k' parent name 0x00, then the branch (u16 BE)
 * for a clone's, so that a clone's rename never holds its origin's name.
 */
int meta_lock_key(struct meta_key *k, const struct meta_bucket *b, uint64_t parent,
		  const char *name, size_t len);

/* The effect on inode d->ino: here at once, or queued for its bucket (then d->seq is set). */
int meta_effect(struct meta_bucket *b, struct meta_delta *d);
/* Directory dir moved under parent at `now`: here, or by a delta to its bucket. */
int meta_reparent(struct meta_bucket *b, uint64_t dir, uint64_t parent, uint64_t now);
/* Inode ino (in) lost its last name: an orphan while a regular file may be open, else gone. */
int meta_lose_last(struct meta_bucket *b, uint64_t ino, struct meta_inode *in, uint64_t now);
/* Every xattr of ino removed (the inode goes). */
int meta_xattrs_drop(struct meta_bucket *b, uint64_t ino);

#endif /* SH_META_META_INT_H */
