/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What meta's commands and answers carry, and their codecs, without the
 * bucket store (docs/metadata.md): the types a client builds requests from
 * and reads replies into (meta_cmd.h, mproto.h), kept apart from the
 * operations on a bucket's records (meta_ops.h, meta_extent.h,
 * meta_dedup.h: those take a struct meta_bucket, a transaction of
 * meta_db.h). scripts/check-layers refuses a client file that reaches
 * meta_db.h through any chain of includes.
 */
#ifndef SH_META_META_PROTO_H
#define SH_META_META_PROTO_H

#include <stdbool.h>

#include "../base/codec.h"
#include "meta_rec.h"

/* ---- deltas ---- */

/*
 * A change for another bucket. META_DELTA_INODE: inode ino's entries,
 * links and times; META_DELTA_DEDUP_REF: dlinks references more (or
 * fewer) on the dedup entry of fp; META_DELTA_CLAIM_DONE: the claim ino
 * was committed, its holds go (meta_dedup.h).
 */
enum {
	META_DELTA_INODE = 0,
	META_DELTA_DEDUP_REF = 1,
	META_DELTA_CLAIM_DONE = 2,
	META_DELTA_PARENT = 3, /* directory ino now lives in fp's first 8 bytes (LE), since time */
};
struct meta_delta {
	uint8_t kind;
	uint16_t to;	  /* the bucket it is for */
	uint16_t from;	  /* the bucket that queued it */
	uint64_t seq;	  /* per source bucket, from 1 */
	uint64_t ino;	  /* the inode it changes (a claim: its id) */
	int32_t dentries; /* entries of a directory (its size) */
	int32_t dlinks;	  /* nlink (references) */
	uint64_t time;	  /* mtime and ctime become at least this (0: unchanged) */
	uint8_t fp[32];	  /* a dedup entry's fingerprint */
	/*
	 * INODE, PARENT: the branch whose records it changes (a clone's;
	 * meta_db.h "Branches"), stored in fp's last two bytes (LE), which
	 * those kinds leave zero: a delta of branch 0 reads as before.
	 */
	uint16_t branch;
};

/* The most deltas one command queues (a rename: two parents, a replaced inode, a moved one). */
#define META_DELTAS_MAX 4

/* format version, kind, to, from, seq, ino, dentries, dlinks, time, fp */
#define META_DELTA_LEN 70
void meta_delta_encode(const struct meta_delta *d, uint8_t out[META_DELTA_LEN]);
int meta_delta_decode(const uint8_t *b, size_t len, struct meta_delta *d); /* fuzzed */

/* ---- namespace ---- */

#define META_ROOT_INO 1ull

struct meta_setattr {
	unsigned valid; /* META_SET_* */
	uint32_t mode, uid, gid;
	uint64_t size, atime, mtime;
};
#define META_SET_MODE  0x1
#define META_SET_UID   0x2
#define META_SET_GID   0x4
#define META_SET_SIZE  0x8
#define META_SET_ATIME 0x10
#define META_SET_MTIME 0x20

struct meta_new {
	uint8_t type; /* META_REG, META_DIR, META_LNK, ... */
	uint32_t mode, uid, gid, rdev;
	const char *target; /* symlinks */
	size_t tlen;
	uint64_t now;
	/*
	 * The request's tag (0: none), kept as the inode's generation: a
	 * create retried after a lost answer finds its own inode and
	 * succeeds again instead of saying EEXIST.
	 */
	uint64_t tag;
};

#define META_RENAME_NOREPLACE 0x1
#define META_RENAME_EXCHANGE  0x2

struct meta_dirent {
	uint64_t ino;
	uint8_t type;
	uint16_t len;
	char name[META_NAME_MAX + 1];
};

#define META_XATTR_CREATE  0x1
#define META_XATTR_REPLACE 0x2
#define META_XATTR_MAX	   65536

struct meta_rename2 {
	uint64_t id; /* unique per S (e.g. its raft index) */
	uint16_t src_bucket, dst_bucket;
	uint64_t oparent, nparent;
	char oname[META_NAME_MAX + 1], nname[META_NAME_MAX + 1];
	unsigned flags;
	uint64_t now;
	uint64_t tag;	 /* the client's request: recorded as done at the decision (meta_done.h) */
	uint16_t branch; /* the branch it renames in (a clone's; meta_version.h): its steps' */
	/* filled by the prepares */
	struct meta_dentry src, dst;
	bool have_dst;
};

/* A rename's state as bytes (in intents, and between the two buckets); decode is fuzzed. */
int meta_rename2_encode(struct sh_enc *e, const struct meta_rename2 *r);
int meta_rename2_decode(const uint8_t *b, size_t len, struct meta_rename2 *r);

struct meta_lease {
	uint64_t dir;
	uint32_t mode, uid, gid;
	uint64_t generation;
};

/* ---- extents (meta_extent.h) ---- */

#define META_FRAGS_MAX 20 /* 16 + 4 */
/* The longest extent: a lookup at an offset starts this far before it. */
#define META_EXTENT_LEN_MAX (64ull << 20)

/*
 * A raw extent (enc REDUCE_RAW) is the range's bytes as they are, at soff
 * in the stripe's data. An encoded one (compressed: docs/reduction.md)
 * covers [boff, boff + len) of a block that expands to blen bytes from
 * the slen bytes stored at soff; trimming it moves boff, never soff.
 */
struct meta_extent {
	uint64_t off;	 /* file offset */
	uint64_t len;	 /* bytes */
	uint64_t stripe; /* the stripe's id (unique in the cluster) */
	uint64_t soff;	 /* where the range (raw) or block (encoded) starts in the stripe's data */
	uint8_t d, p;
	uint32_t frag;		   /* fragment size */
	uint8_t enc;		   /* enum reduce_enc */
	uint32_t slen, blen, boff; /* an encoded block: stored, expanded, where the range starts */
	bool dedup;		   /* a block of the dedup index (meta_dedup.h), named by fp */
	uint8_t fp[32];
	uint64_t targets[META_FRAGS_MAX];
};

/*
 * The value stored (and sent): version 1 (raw): d, p, frag, len, stripe,
 * soff, the d+p targets; version 2 (encoded): the same with enc, slen,
 * blen and boff before the targets; version 3 (a dedup block, raw or
 * encoded): version 2's with the fingerprint before the targets.
 */
#define META_EXTENT_LEN(n)    (31 + 8 * (size_t)(n))
#define META_EXTENT_LEN_V2(n) (44 + 8 * (size_t)(n))
#define META_EXTENT_LEN_V3(n) (76 + 8 * (size_t)(n))
#define META_EXTENT_VMAX      META_EXTENT_LEN_V3(META_FRAGS_MAX)
/* The bytes of the stripe's data a read of [a, b) of the file needs from e (inside it). */
void meta_extent_stored(const struct meta_extent *e, uint64_t a, uint64_t b, uint64_t *soff,
			uint64_t *len);
int meta_extent_encode(const struct meta_extent *e, uint8_t *out, size_t cap);
/* Fuzzed. off is not in the value (it is the key's); -EBADMSG. */
int meta_extent_decode(const uint8_t *b, size_t len, struct meta_extent *e);

/* A list of extents with their offsets (a command's data): u8 count, then per extent u64 off,
 * u8 value length, the value. */
#define META_EXTENTS_MAX 64
int meta_extent_list_encode(struct sh_enc *enc, const struct meta_extent *e, unsigned n);
/* Fuzzed. At most META_EXTENTS_MAX into out; -EBADMSG. */
int meta_extent_list_decode(const uint8_t *b, size_t len, struct meta_extent *out, unsigned *n);

#define META_EXTENT_TAKES_INLINE 0x1

#define META_INLINE_MAX 4096

struct meta_usage {
	uint64_t mapped, data, phys;
	uint64_t unique;  /* mapped bytes stored once: extents not deduplicated, dedup blocks */
	uint64_t inlined; /* small files' bytes kept inline (not in mapped: no stripe) */
};

/* Fragment idx of a stripe goes from target `from` to target `to` (rebuilt or copied there). */
struct meta_move {
	uint8_t idx;
	uint64_t from, to;
};

/* META_OP_RELOCATE's data: u8 n, per move u8 idx, u64 from, u64 to. */
int meta_moves_encode(struct sh_enc *e, const struct meta_move *mv, unsigned n);
/* Fuzzed. At most META_FRAGS_MAX into mv; -EBADMSG. */
int meta_moves_decode(const uint8_t *b, size_t len, struct meta_move *mv, unsigned *n);

/* ---- the dedup index (meta_dedup.h) ---- */

#define META_FP_LEN	     32
#define META_DEDUP_MAX	     16		      /* fingerprints per claim command */
#define META_CLAIMS_MAX	     META_EXTENTS_MAX /* claims per extent commit */
#define META_CLAIM_COMMIT_NS (30ull * 1000 * 1000 * 1000)

/* The bucket of fp's entry. */
uint16_t meta_fp_bucket(const uint8_t fp[META_FP_LEN], uint32_t nbuckets);

struct meta_dedup_item {
	uint8_t fp[META_FP_LEN];
	bool has_loc;		/* a block the writer stored: where (a v3 extent, off 0) */
	struct meta_extent loc; /* (the reply: where the block is; stripe 0: not here) */
};

/* A claim command's data: u64 claim, u16 the file's bucket, u8 n, per item fp, u8 has, [u8 len,
 * the extent value]. */
int meta_claim_encode(struct sh_enc *e, uint64_t claim, uint16_t owner,
		      const struct meta_dedup_item *it, unsigned n);
/* Fuzzed. At most META_DEDUP_MAX items; -EBADMSG. */
int meta_claim_decode(const uint8_t *b, size_t len, uint64_t *claim, uint16_t *owner,
		      struct meta_dedup_item *it, unsigned *n);

struct meta_claim_ref {
	uint16_t bucket; /* where it holds */
	uint64_t claim, when;
};

/* An extent commit's data with claims: u32 extent list length, the list, u8 n, per claim u16
 * bucket, u64 claim, u64 when. */
int meta_claims_encode(struct sh_enc *e, const struct meta_extent *ex, unsigned nex,
		       const struct meta_claim_ref *c, unsigned n);
/* Fuzzed. -EBADMSG. */
int meta_claims_decode(const uint8_t *b, size_t len, struct meta_extent *ex, unsigned *nex,
		       struct meta_claim_ref *c, unsigned *n);

#endif /* SH_META_META_PROTO_H */
