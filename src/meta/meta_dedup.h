/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The dedup index (DESIGN.md §4; docs/reduction.md "Deduplication"): the
 * blocks of a filesystem with dedup on are stored once each, named by the
 * SHA-256 of their bytes (their fingerprint, fp). A block's entry lives in
 * bucket meta_fp_bucket(fp): where the block is stored (a stripe of its
 * own, whose id carries that bucket, so the orphan sweep asks it) and two
 * counts that keep it alive:
 *
 *   refs   extents that map the block, in any bucket: each mapping and
 *          unmapping of such an extent sends a META_DELTA_DEDUP_REF here
 *          from the file's bucket, in the same transaction (exactly once);
 *   holds  claims: a writer that found the block here (or stored it) holds
 *          it until the extents that use it are committed (then the file's
 *          bucket sends META_DELTA_CLAIM_DONE, after their refs) or the
 *          claim is found dead: the entry cannot go between the writer's
 *          question and its commit.
 *
 * At refs + holds = 0 the entry goes and its stripe goes to the reclaim
 * queue. A claim is a record here (id, when, the file's bucket, the fps it
 * holds); the file's bucket records the claims it committed until their
 * CLAIM_DONE is shipped, and refuses a claim it was asked about before
 * (meta_dedup_kill) or one older than META_CLAIM_COMMIT_NS. Claims older
 * than the claim age are asked about by this bucket's leader and released
 * if their writer never committed (a client killed mid-write).
 */
#ifndef SH_META_META_DEDUP_H
#define SH_META_META_DEDUP_H

#include "meta_extent.h"

/*
 * At fp's bucket: hold each item's block for claim (made at now, for the
 * file in bucket owner): one found here is held and its place returned in
 * it[i].loc; one not here is made from it[i].loc if the writer stored it
 * (has_loc), else it[i].loc.stripe = 0. A claim asked again adds to what
 * it holds.
 */
int meta_dedup_claim(struct meta_bucket *b, uint64_t claim, uint16_t owner, uint64_t now,
		     struct meta_dedup_item *it, unsigned n);
/* refs += delta on fp's entry (from a file's bucket). */
int meta_dedup_ref(struct meta_bucket *b, const uint8_t fp[META_FP_LEN], int delta);
/* References that found no entry (or too few refs) in this process: damage, never expected. */
unsigned long meta_dedup_damaged(void);
/* The claim's holds go (committed, or dead); 0 if there is no such claim. */
int meta_dedup_release(struct meta_bucket *b, uint64_t claim);

struct meta_dedup_entry {
	uint64_t refs, holds;
	struct meta_extent loc;
};
/* fp's entry: 0, -ENOENT. */
int meta_dedup_get(struct meta_bucket *b, const uint8_t fp[META_FP_LEN],
		   struct meta_dedup_entry *out);

/* The claims made before `before`: fn(arg, claim, owner, when) (1 stops). */
int meta_dedup_claims(struct meta_bucket *b, uint64_t before,
		      int (*fn)(void *arg, uint64_t claim, uint16_t owner, uint64_t when),
		      void *arg);

/* ---- in the file's bucket ---- */

/*
 * The claims an extent commit consumes, checked before it maps anything:
 * each must be younger than META_CLAIM_COMMIT_NS at now and never asked
 * about (-ETIMEDOUT: the writer claims again). Then, once the extents are
 * mapped, meta_dedup_commit records each as committed and queues its
 * CLAIM_DONE for its bucket (after the refs the mapping queued).
 */
int meta_dedup_check(struct meta_bucket *b, const struct meta_claim_ref *c, unsigned n,
		     uint64_t now);
int meta_dedup_commit(struct meta_bucket *b, const struct meta_claim_ref *c, unsigned n,
		      uint64_t now);
/*
 * A claim's bucket asks: *committed = 1 if it was (its CLAIM_DONE is on
 * its way or there), else 0 and it never will be (recorded as refused).
 */
int meta_dedup_kill(struct meta_bucket *b, uint64_t claim, uint64_t now, int *committed);
/*
 * Refused claims recorded before `before` (at most 256 of them, *n): counted
 * (dry), or forgotten. Safe once before is older than META_CLAIM_COMMIT_NS
 * plus any clock skew between buckets' leaders: a commit that late is
 * refused for its age (the leaders forget them after META_REFUSED_KEEP_NS).
 */
#define META_REFUSED_KEEP_NS (3600ull * 1000 * 1000 * 1000)
int meta_dedup_forget_refused(struct meta_bucket *b, uint64_t before, bool dry, unsigned *n);
/* Its CLAIM_DONE was shipped: forget that it was committed. */
int meta_dedup_forget(struct meta_bucket *b, uint64_t claim);

#endif /* SH_META_META_DEDUP_H */
