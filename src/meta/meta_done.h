/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Requests applied once (docs/metadata.md, "Retried requests"): a client
 * tags each remove, rename, link, setxattr, removexattr, extent mapping
 * and O_APPEND inline write with a random 64-bit tag, and the bucket that
 * applies it records the tag in the same transaction. A retry of the same
 * request (its answer lost when a leader died after the
 * commit; mroute resends the same bytes to the next leader) finds the tag
 * and is answered with success instead of ENOENT, EEXIST or ENODATA. A rename
 * between two buckets records its tag at the source entry's bucket when it
 * is decided (COMMIT_SRC). Tags are kept META_DONE_KEEP_NS, far longer
 * than a client retries, then forgotten by the bucket's leader.
 *
 *   done      bucket 't' tag            -> when (u64 ns)
 *   by time   bucket 'T' when tag       -> (empty), for forgetting in order
 */
#ifndef SH_META_META_DONE_H
#define SH_META_META_DONE_H

#include "meta_ops.h"

#define META_DONE_KEEP_NS    (10ull * 60 * 1000 * 1000 * 1000)
#define META_DONE_FORGET_MAX 256 /* tags forgotten by one command */

/* 0 if tag was applied in this bucket (and not forgotten), -ENOENT if not. */
int meta_done_check(struct meta_bucket *b, uint64_t tag);
/* Record tag as applied now. */
int meta_done_put(struct meta_bucket *b, uint64_t tag, uint64_t now);
/*
 * Forget up to META_DONE_FORGET_MAX tags applied before `before`, oldest
 * first; *n: how many there were to forget (dry: only counted).
 */
int meta_done_forget(struct meta_bucket *b, uint64_t before, bool dry, unsigned *n);

#endif /* SH_META_META_DONE_H */
