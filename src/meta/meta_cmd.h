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

#include "meta_proto.h"

struct meta_bucket; /* meta_ops.h: applying a command needs the bucket store */

/*
 * Every command of a bucket, declared once: X(id, number, "name"). The
 * numbers are written into Raft logs: never reuse or renumber one. The
 * names are the metrics' (shoal_meta_requests_total{kind=...}).
 */
#define META_OPS(X)                                                                              \
	X(META_OP_MKROOT, 1, "mkroot")                                                           \
	X(META_OP_CREATE, 2, "create")                                                           \
	X(META_OP_LINK, 3, "link")                                                               \
	X(META_OP_REMOVE, 4, "remove")                                                           \
	X(META_OP_RENAME, 5, "rename")                                                           \
	X(META_OP_SETATTR, 6, "setattr")                                                         \
	X(META_OP_SETXATTR, 7, "setxattr")                                                       \
	X(META_OP_REMOVEXATTR, 8, "removexattr")                                                 \
	X(META_OP_DELTA, 9, "delta")		/* apply a delta from another bucket */          \
	X(META_OP_OUTBOX_ACK, 10, "outbox_ack") /* drop shipped deltas */                        \
	/* ino: the directory, flags: the lessee bucket */                                       \
	X(META_OP_LEASE_GRANT, 11, "lease_grant")                                                \
	X(META_OP_LEASE_CLOSE, 12, "lease_close")   /* ino */                                    \
	X(META_OP_LEASE_REOPEN, 13, "lease_reopen") /* ino */                                    \
	X(META_OP_LEASE_DROP, 14, "lease_drop")	    /* ino, flags: the lessee */                 \
	/* ino, mode, uid, gid, upto: the generation */                                          \
	X(META_OP_LEASE_HOLD, 15, "lease_hold")                                                  \
	X(META_OP_LEASE_REVOKE, 16, "lease_revoke") /* ino */                                    \
	/* a step of a cross-bucket rename: flags = META_R2_*, data = the rename */              \
	X(META_OP_RENAME2, 17, "rename2")                                                        \
	/* ino, data: extents to map (meta_extent_list_encode) */                                \
	X(META_OP_EXTENT, 18, "extent")                                                          \
	/* upto: the stripe whose fragments are released */                                      \
	X(META_OP_RECLAIM_DONE, 19, "reclaim_done")                                              \
	/* ino, data: a small file's bytes (meta_inline_set); flags META_INLINE_MERGE:           \
	 * written at offset upto (meta_inline_merge) */                                         \
	X(META_OP_INLINE, 20, "inline")                                                          \
	/* data: meta_claim_encode (at the fingerprints' bucket) */                              \
	X(META_OP_DEDUP_CLAIM, 21, "dedup_claim")                                                \
	/* upto: a claim (at the file's bucket: meta_dedup_kill) */                              \
	X(META_OP_DEDUP_KILL, 22, "dedup_kill")                                                  \
	/* upto: a claim found dead (at its bucket) */                                           \
	X(META_OP_DEDUP_RELEASE, 23, "dedup_release")                                            \
	/* data: deltas for this bucket (n x META_DELTA_LEN), in order */                        \
	X(META_OP_DELTAS, 24, "delta_batch")                                                     \
	/* upto: refused claims recorded before this time go */                                  \
	X(META_OP_DEDUP_FORGET, 25, "dedup_forget")                                              \
	/* upto: request tags recorded before this time go (meta_done.h) */                      \
	X(META_OP_DONE_FORGET, 26, "done_forget")                                                \
	/* ino: a file without names nobody holds open goes (meta_ops.h) */                      \
	X(META_OP_ORPHAN_DROP, 27, "orphan_drop")                                                \
	/* upto: a stripe, data: its fragments' moves (meta_moves_encode) */                     \
	X(META_OP_RELOCATE, 28, "relocate")                                                      \
	/* at a group's first bucket: ver, data: the kept snapshot versions (meta_version.h) */  \
	X(META_OP_VERSION, 29, "version")                                                        \
	/* upto: the kept list's gen, flags: keys; at the bucket being settled */                \
	X(META_OP_SETTLE, 30, "settle")                                                          \
	/* upto: the restore's epoch, data: its snapshot's version, flags: keys (meta_version.h) \
	 */                                                                                      \
	X(META_OP_RESTORE, 31, "restore")                                                        \
	/* at a group's first bucket: upto: a branch (a clone), data: its base, u64 LE (0: it    \
	 * goes) (meta_version.h) */                                                             \
	X(META_OP_BRANCH, 32, "branch")                                                          \
	/* upto: a branch that goes, flags: keys; at the bucket its drop is at */                \
	X(META_OP_BRANCH_DROP, 33, "branch_drop")

enum meta_op {
#define META_OP_ENUM(id, num, name) id = (num),
	META_OPS(META_OP_ENUM)
#undef META_OP_ENUM
	    META_OP_MAX /* (the numbers are dense: one past the last) */
};

/* An operation's name ("create", ...), or NULL for a number that is none. */
const char *meta_op_name(unsigned op);

#define META_INLINE_MERGE 0x1
/* META_OP_EXTENT: data is meta_claims_encode's (extents, and the claims they consume) */
#define META_EXTENT_CLAIMS 0x2
/* META_OP_EXTENT: cleaning: ranges now all of stripe upto, moved (meta_extent_move) */
#define META_EXTENT_MOVE 0x4
/*
 * META_OP_EXTENT, META_OP_INLINE: an O_APPEND writer's, for a file whose
 * size was upto when its bytes were placed at the end: -EAGAIN, nothing
 * changed, when the size is no longer that (another client appended or
 * truncated meanwhile); the writer places them again at the new end.
 */
#define META_AT_END 0x8

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
	uint64_t ver;		    /* the file-system version it was applied at */
	unsigned ndedup;
	/* a claim's blocks, where they are: last, and not cleared (4 KiB) for every command */
	struct meta_dedup_item dedup[META_DEDUP_MAX];
};
/* A result cleared for a command (all but what ndedup says of dedup[]). */
#define META_RESULT_CLEAR(r) memset((r), 0, offsetof(struct meta_result, dedup))

int meta_cmd_encode(struct sh_enc *e, const struct meta_cmd *c);
/* Fuzzed. The command points into b for data; -EBADMSG. */
int meta_cmd_decode(const uint8_t *b, size_t len, struct meta_cmd *c);
/* The op of the encoded command b (0 if too short to say). */
uint8_t meta_cmd_op_of(const uint8_t *b, size_t len);
/* The version the encoded command b says (0 if too short to say). */
uint64_t meta_cmd_ver_of(const uint8_t *b, size_t len);
/*
 * Apply in bucket b (its ver is set from the command). A rejected command
 * (r->status < 0) changes nothing: the caller aborts the transaction.
 */
void meta_cmd_apply(struct meta_bucket *b, const struct meta_cmd *c, struct meta_result *r);
/* A lease in bytes (commands, replies): dir u64, mode, uid, gid u32, generation u64. */
void meta_lease_put(struct sh_enc *e, const struct meta_lease *l);
void meta_lease_get(struct sh_dec *d, struct meta_lease *l); /* errors in d */

#endif /* SH_META_META_CMD_H */
