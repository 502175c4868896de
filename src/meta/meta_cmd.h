/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A bucket's commands: what its Raft log holds and its state machine
 * applies (docs/metadata.md). A command carries everything that must be
 * the same on every replica — the proposer's clock and the file system's
 * version — so applying it is a function of (store, command).
 */
#ifndef SH_META_META_CMD_H
#define SH_META_META_CMD_H

#include <stddef.h>
#include <string.h>

#include "meta_dedup.h"
#include "meta_extent.h"

enum meta_op {
	META_OP_MKROOT = 1,
	META_OP_CREATE,
	META_OP_LINK,
	META_OP_REMOVE,
	META_OP_RENAME,
	META_OP_SETATTR,
	META_OP_SETXATTR,
	META_OP_REMOVEXATTR,
	META_OP_DELTA,	      /* apply a delta from another bucket */
	META_OP_OUTBOX_ACK,   /* drop shipped deltas */
	META_OP_LEASE_GRANT,  /* ino: the directory, flags: the lessee bucket */
	META_OP_LEASE_CLOSE,  /* ino */
	META_OP_LEASE_REOPEN, /* ino */
	META_OP_LEASE_DROP,   /* ino, flags: the lessee */
	META_OP_LEASE_HOLD,   /* ino, mode, uid, gid, upto: the generation */
	META_OP_LEASE_REVOKE, /* ino */
	META_OP_RENAME2, /* a step of a cross-bucket rename: flags = META_R2_*, data = the rename */
	META_OP_EXTENT,	 /* ino, data: extents to map (meta_extent_list_encode) */
	META_OP_RECLAIM_DONE,  /* upto: the stripe whose fragments are released */
	META_OP_INLINE,	       /* ino, data: a small file's bytes (meta_inline_set); flags
				* META_INLINE_MERGE: written at offset upto (meta_inline_merge) */
	META_OP_DEDUP_CLAIM,   /* data: meta_claim_encode (at the fingerprints' bucket) */
	META_OP_DEDUP_KILL,    /* upto: a claim (at the file's bucket: meta_dedup_kill) */
	META_OP_DEDUP_RELEASE, /* upto: a claim found dead (at its bucket) */
	META_OP_DELTAS,	       /* data: deltas for this bucket (n x META_DELTA_LEN), in order */
	META_OP_DEDUP_FORGET,  /* upto: refused claims recorded before this time go */
	META_OP_DONE_FORGET,   /* upto: request tags recorded before this time go (meta_done.h) */
	META_OP_ORPHAN_DROP,   /* ino: a file without names nobody holds open goes (meta_ops.h) */
	META_OP_RELOCATE,      /* upto: a stripe, data: its fragments' moves (meta_moves_encode) */
	META_OP_MAX
};

#define META_INLINE_MERGE 0x1
/* META_OP_EXTENT: data is meta_claims_encode's (extents, and the claims they consume) */
#define META_EXTENT_CLAIMS 0x2
/* META_OP_EXTENT: cleaning: ranges now all of stripe upto, moved (meta_extent_move) */
#define META_EXTENT_MOVE 0x4

struct meta_cmd {
	uint8_t op;
	uint8_t type;	/* create, link */
	uint8_t dir;	/* remove: rmdir (2: its remote inode's bucket found it empty) */
	uint32_t flags; /* rename, setxattr */
	uint64_t ver;	/* the file-system version this writes at */
	uint64_t now;
	uint64_t parent, parent2; /* the (old, new) parents */
	uint64_t ino; /* remove: set by its leader, an inode of the entry open nowhere */
	uint32_t mode, uid, gid, rdev;
	struct meta_setattr sa;
	struct meta_delta delta;
	uint64_t upto;
	uint64_t tag; /* create: the request's tag (meta_new); link, remove, rename, xattrs:
		       * meta_done.h */
	/* any command: first drop the bucket's outbox up to this seq (its deltas applied where
	 * they go), as META_OP_OUTBOX_ACK would; 0: nothing */
	uint64_t trim;
	/* any command: first hold this lease (dir 0: none), as META_OP_LEASE_HOLD would: the
	 * first create under a directory in a bucket holds the lease it was just granted in
	 * its own commit */
	struct meta_lease lease;
	char name[META_NAME_MAX + 1], name2[META_NAME_MAX + 1];
	/* symlink target or xattr value (points into the decoded bytes) */
	const uint8_t *data;
	size_t dlen;
};

enum {
	META_R2_PREPARE_SRC = 1,
	META_R2_PREPARE_DST,
	META_R2_COMMIT_SRC,
	META_R2_COMMIT_DST,
	META_R2_ABORT,
	META_R2_FINISH
};

struct meta_result {
	int status;
	struct meta_inode attr;
	struct meta_dentry dentry;
	struct meta_delta deltas[META_DELTAS_MAX]; /* to ship (ino 0: none) */
	struct meta_lease lease;		   /* granted */
	uint16_t lessees[64];			   /* to revoke (lease close) */
	unsigned nlessees;
	struct meta_rename2 rename; /* as the step left it (prepares fill it in) */
	unsigned queued;	    /* deltas queued for other buckets */
	uint64_t aux;		    /* a claim: when it was made; a kill: 1 if committed */
	unsigned ndedup;
	/* a claim's blocks, where they are: last, and not cleared (4 KiB) for every command */
	struct meta_dedup_item dedup[META_DEDUP_MAX];
};
/* A result cleared for a command (all but what ndedup says of dedup[]). */
#define META_RESULT_CLEAR(r) memset((r), 0, offsetof(struct meta_result, dedup))

int meta_cmd_encode(struct sh_enc *e, const struct meta_cmd *c);
/* Fuzzed. The command points into b for data; -EBADMSG. */
int meta_cmd_decode(const uint8_t *b, size_t len, struct meta_cmd *c);
/*
 * Apply in bucket b (its ver is set from the command). A rejected command
 * (r->status < 0) changes nothing: the caller aborts the transaction.
 */
void meta_cmd_apply(struct meta_bucket *b, const struct meta_cmd *c, struct meta_result *r);
/* A lease in bytes (commands, replies): dir u64, mode, uid, gid u32, generation u64. */
void meta_lease_put(struct sh_enc *e, const struct meta_lease *l);
void meta_lease_get(struct sh_dec *d, struct meta_lease *l); /* errors in d */

#endif /* SH_META_META_CMD_H */
