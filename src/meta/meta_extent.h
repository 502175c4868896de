/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A file's extent map in its inode's bucket (docs/metadata.md, "Extents";
 * docs/ondisk.md): which byte ranges of the file are where — a stripe (its
 * id, protection, fragment size and the targets of its fragments) and the
 * offset of the range within the stripe's data.
 *
 * Extents never overlap: setting one punches the range out of those
 * there (trimming, splitting or dropping them), so an overwrite or a
 * truncate writes new stripes and drops references, never data in place.
 * Every extent holds a reference on its stripe; when a stripe's last
 * reference goes, a reclaim record is queued in the same transaction, and
 * whoever releases the stripe's fragments on its targets removes it
 * (meta_reclaims, meta_reclaim_done), so space comes back even if the
 * releaser crashes midway.
 */
#ifndef SH_META_META_EXTENT_H
#define SH_META_META_EXTENT_H

#include "meta_ops.h"

/*
 * Map [e->off, e->off + e->len) of regular file ino (of this bucket) to
 * the extent, for n extents in order; the file grows to cover them;
 * mtime and ctime become now. The file's inline bytes, if it has any,
 * are dropped only with META_EXTENT_TAKES_INLINE (the writer put them in
 * its stripe); without it: -EAGAIN, nothing changed (a writer that did not
 * know of them — another handle wrote them since — looks again). -EISDIR,
 * -EINVAL (not a file, a bad extent), -ESTALE, -EFBIG (past 2^63).
 */
int meta_extent_set(struct meta_bucket *b, uint64_t ino, const struct meta_extent *e, unsigned n,
		    unsigned flags, uint64_t now, struct meta_inode *attr);
/*
 * Cleaning (docs/reduction.md): map e[0..n) where each one's range is now
 * all stripe from's (else -ESTALE, nothing changed: the file was written
 * meanwhile), without touching the file's size or times — the same bytes,
 * moved to a new stripe, so that from's dead bytes can go.
 */
int meta_extent_move(struct meta_bucket *b, uint64_t ino, const struct meta_extent *e, unsigned n,
		     uint64_t from);
/* Stripes of files at least half dead (live * 2 <= total mapped): fn(...) (1 stops). */
int meta_stripes_dirty(struct meta_bucket *b,
		       int (*fn)(void *arg, uint64_t stripe, uint64_t ino, uint64_t live,
				 uint64_t total),
		       void *arg);
/* Unmap [start, end) (a truncate: end UINT64_MAX), dropping references. */
int meta_extent_punch(struct meta_bucket *b, uint64_t ino, uint64_t start, uint64_t end);
/*
 * The extents overlapping [off, off + len), in file order, at most max into
 * out (*n of them). A hole is where no extent is (it reads as zeros).
 */
int meta_extents(struct meta_bucket *b, uint64_t ino, uint64_t off, uint64_t len,
		 struct meta_extent *out, unsigned max, unsigned *n);

/*
 * Small files: the first bytes of a regular file (at most META_INLINE_MAX)
 * kept in its bucket instead of in a stripe. A file has inline bytes or
 * extents, never both: setting inline bytes is refused (-ENOTEMPTY) while
 * the file has an extent anywhere, mapping an extent drops the inline
 * bytes (the writer includes them in its stripe). The file's size becomes
 * at least len.
 */
int meta_inline_set(struct meta_bucket *b, uint64_t ino, const void *data, size_t len, uint64_t now,
		    struct meta_inode *attr);
/*
 * As meta_inline_set, but len bytes written at off into what is inline now
 * (zeros between the old end and off): one step for a writer, with no read
 * of the bytes first. -EFBIG if off + len > META_INLINE_MAX.
 */
int meta_inline_merge(struct meta_bucket *b, uint64_t ino, uint64_t off, const void *data,
		      size_t len, uint64_t now, struct meta_inode *attr);
/* The inline bytes into buf (cap >= META_INLINE_MAX): their length, or -ENOENT (none). */
int meta_inline_get(struct meta_bucket *b, uint64_t ino, void *buf, size_t cap);
/* Keep only the first len inline bytes (a truncate). */
int meta_inline_cut(struct meta_bucket *b, uint64_t ino, uint64_t len);

/*
 * What a bucket's files use (docs/reduction.md, "Usage"): mapped, the
 * bytes of file data extents map (logical; holes and inline bytes not
 * counted); data and phys, the data and the data + parity bytes of the
 * stripes those extents refer to (physical, dead blocks in live stripes
 * included). Kept in the same transactions that change them.
 */
int meta_usage_get(struct meta_bucket *b, struct meta_usage *u);
/* (meta's own) the usage moves by these, saturating at zero */
int meta_usage_add(struct meta_bucket *b, int64_t mapped, int64_t unique, int64_t data,
		   int64_t phys);
/* (meta's own) small files' inline bytes move by delta */
int meta_usage_inline(struct meta_bucket *b, int64_t delta);
/* (meta's own) e's stripe gets delta references here; at zero it is queued for reclaim */
int meta_stripe_ref(struct meta_bucket *b, const struct meta_extent *e, int delta);

/*
 * (meta's own) extent e of ino, stored again (sign +1) or no longer
 * (-1) as the newest: its reference, its stripe's live bytes and the
 * usage, as a write that maps it or punches it would (a restore).
 */
int meta_extent_account(struct meta_bucket *b, uint64_t ino, const struct meta_extent *e, int sign);

/*
 * meta_keep.moved for bucket arg (a struct meta_bucket): an extent that
 * comes to live for snapshots alone keeps a reference on its stripe (or
 * dedup entry), one of those that goes drops it (meta_db.h).
 */
int meta_extent_moved(void *arg, const struct meta_key *k, const void *val, size_t len, int delta);
/*
 * meta_keep.moved of a branch's writes and drops (a clone's; meta_db.h
 * "Branches"): what its writer took out of the counts for a value the
 * base still reads is put back (+1), and what the branch's own values
 * counted goes with them (-1): an extent's whole account (its stripe's
 * reference and live bytes, the usage: meta_extent_account), a small
 * file's inline bytes. Branch 0's values kept for snapshots keep only
 * their reference (meta_extent_moved): the usage counts the live tree.
 */
int meta_branch_moved(void *arg, const struct meta_key *k, const void *val, size_t len, int delta);

/* Stripes with no reference left: fn(arg, e) with stripe, d, p, frag and targets (1 stops). */
int meta_reclaims(struct meta_bucket *b, int (*fn)(void *arg, const struct meta_extent *e),
		  void *arg);
/* The stripe's fragments are released: forget it. */
int meta_reclaim_done(struct meta_bucket *b, uint64_t stripe);
/* 1 if an extent of this bucket refers to stripe or it waits in the reclaim queue, else 0. */
int meta_stripe_known(struct meta_bucket *b, uint64_t stripe);

/*
 * Where a stripe's fragments are (docs/healing.md): its record in the
 * bucket its id names says, for every stripe first referenced since
 * rebuilds exist; the targets in extents and dedup entries are where they
 * were written (hints a reader tries first). A rebuild, a re-protection
 * or a move changes this record only, in one command.
 *
 * meta_stripe_known_at: as meta_stripe_known, for fragment idx on target
 * (0: any): 0 also when the record says the fragment is elsewhere now (what
 * the target holds of it was rebuilt elsewhere: stale, to be released).
 */
int meta_stripe_known_at(struct meta_bucket *b, uint64_t stripe, uint32_t idx, uint64_t target);
/* *loc: the whole stripe, where it is now. -ENOENT, -ENODATA (a record from before). */
int meta_stripe_loc(struct meta_bucket *b, uint64_t stripe, struct meta_extent *loc);
/* Every referenced stripe with a location, in id order after `after` (0: all): fn (1 stops). */
int meta_stripe_locs(struct meta_bucket *b, uint64_t after,
		     int (*fn)(void *arg, const struct meta_extent *loc), void *arg);
/*
 * Apply n moves at once: -ESTALE (a fragment is not on its `from` any more:
 * nothing changed), -ENOENT (the stripe is gone), -ENODATA, -EINVAL.
 */
int meta_stripe_relocate(struct meta_bucket *b, uint64_t stripe, const struct meta_move *mv,
			 unsigned n);

#endif /* SH_META_META_EXTENT_H */
