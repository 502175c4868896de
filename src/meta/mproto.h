/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The metadata protocol (docs/protocol.md, NET_OP_META): what clients and
 * bucket leaders ask a bucket's leader on the data network.
 *
 * A request names the filesystem (its id), the bucket, and what to do:
 * a command to replicate (create, remove, setattr ...), a read of the
 * applied state (lookup, getattr, readdir, readlink, xattrs, the buckets
 * that hold a directory's entries), or a leader-to-leader duty (deltas to
 * apply, a lease to revoke). The reply's status is the operation's; a
 * replica that is not the leader answers SH_ENOTLEADER with the leader it
 * knows (aux), one that does not serve the bucket -ENXIO (the caller's
 * configuration is stale).
 */
#ifndef SH_META_MPROTO_H
#define SH_META_MPROTO_H

#include "meta_cmd.h"

/*
 * Every metadata request kind, declared once: X(id, number, "name"). The
 * numbers are on the wire (NET_OP_META's body); never reuse or renumber
 * one. The names are the metrics' (MP_CMD's are the commands' own).
 */
#define MP_KINDS(X)                                                                           \
	/* cmd: replicate and apply; reply: attr, dentry, lease */                            \
	X(MP_CMD, 1, "cmd")                                                                   \
	/* ino = parent, name; reply: dentry (+ attr when in this bucket) */                  \
	X(MP_LOOKUP, 2, "lookup")                                                             \
	X(MP_GETATTR, 3, "getattr") /* ino; reply: attr */                                    \
	/* ino = dir, name = after, max, off = MP_READDIR_ATTRS or 0; reply: entries,         \
	 * MP_MORE */                                                                         \
	X(MP_READDIR, 4, "readdir")                                                           \
	X(MP_READLINK, 5, "readlink")	/* ino; reply: data */                                \
	X(MP_GETXATTR, 6, "getxattr")	/* ino, name; reply: data */                          \
	X(MP_LISTXATTR, 7, "listxattr") /* ino; reply: data (NUL-separated) */                \
	/* ino = dir at its bucket; reply: the other buckets with entries */                  \
	X(MP_DIRBUCKETS, 8, "dirbuckets")                                                     \
	X(MP_DELTAS, 9, "deltas") /* data: deltas for buckets of this group; apply them */    \
	/* ino = dir at the lessee bucket: give the lease back, flush */                      \
	X(MP_REVOKE, 10, "revoke")                                                            \
	/* ino, off, len, max: the extents there; reply data: an extent list */               \
	X(MP_EXTENTS, 11, "extents")                                                          \
	/* data: u64 LE stripe ids of this bucket; reply data: a byte each, 1 if an extent    \
	 * refers to it or it waits in the reclaim queue (orphan sweep); with ino = the       \
	 * target asking, data is per fragment u64 LE stripe, u32 LE index, and 0 also if     \
	 * that fragment is elsewhere now */                                                  \
	X(MP_STRIPES, 12, "stripes")                                                          \
	/* max: files' stripes at least half dead; reply data: per stripe u64 LE stripe, ino, \
	 * live bytes, bytes mapped (cleaning) */                                             \
	X(MP_DIRTY, 13, "dirty")                                                              \
	/* at any bucket of a group: reply data: the group's usage summed over its buckets,   \
	 * u64 LE mapped, unique, data, phys, inline bytes (quotas) */                        \
	X(MP_USAGE, 14, "usage")                                                              \
	/* ino = a directory at its bucket; reply aux: its parent (0: not known) */           \
	X(MP_PARENT, 15, "parent")                                                            \
	/* ino: a file opened (reply: attr, as getattr; -ESTALE if gone or, with              \
	 * MP_HOLD_FRESH, without names); data: u64 LE more files of this bucket still open   \
	 * (renewed); max: MP_HOLD_* (msvc_hold.c) */                                         \
	X(MP_HOLD, 16, "hold")                                                                \
	/* ino: a stripe of this bucket; reply data: where its fragments are now (an extent   \
	 * value, meta_stripe_loc); -ENOENT, -ENODATA */                                      \
	X(MP_STRIPE_LOC, 17, "stripe_loc")                                                    \
	/* ino: a stripe of this bucket, max: a fragment's index, off: the target that found  \
	 * it corrupt; it is re-created there (-ENOENT, -ESTALE: not the record's, -EBUSY:    \
	 * too many queued) */                                                                \
	X(MP_REPAIR, 18, "repair")                                                            \
	/* at any node, fs: the client is gone, its cache leases there go with it (a          \
	 * change need not wait for their recall) */                                          \
	X(MP_FORGET, 19, "forget")                                                            \
	/* at any bucket of a group: reply aux: the version its writes carry; data: u64 LE    \
	 * gen, settled, the last restore done, 1 if drained for one (msvc_restore_drained),  \
	 * then per kept snapshot u64 LE version (meta_version.h) */                          \
	X(MP_VERSION, 20, "version")                                                          \
	/* at = v2, off = v1 (ready snapshots of the fs, v1 < v2; v1 0: the empty fs), data:  \
	 * the logical key to go on after (empty: the bucket's first), max: reply bytes, len: \
	 * keys to look at (0 or more than MP_DIFF_KEYS: that); reply data: mp_diff records   \
	 * in key order, MP_MORE if the bucket has more */                                    \
	X(MP_DIFF, 21, "diff")

enum mp_kind {
#define MP_KIND_ENUM(id, num, name) id = (num),
	MP_KINDS(MP_KIND_ENUM)
#undef MP_KIND_ENUM
	    MP_KIND_MAX /* (the numbers are dense: one past the last) */
};

/* A kind's name ("lookup", ...), or NULL for a number that is none. */
const char *mp_kind_name(unsigned kind);

#define MP_ATTR	  0x1
#define MP_DENTRY 0x2
#define MP_MORE	  0x4
#define MP_LEASE  0x8
#define MP_INLINE \
	0x10 /* MP_EXTENTS, and lookup/getattr of a small file: data holds its inline bytes */
#define MP_CACHE 0x20 /* lookup, getattr: the client may cache the answer MP_CACHE_MS */
#define MP_EXTS	 0x40 /* MP_HOLD: data holds extents from offset 0 (meta_extent_list_encode) */

/* MP_HOLD's max: give the holds back (the last close) instead of taking them */
#define MP_HOLD_RELEASE 0x1
/* MP_HOLD's max: a new open by name; an inode without names is -ESTALE (looked up again) */
#define MP_HOLD_FRESH 0x2
/* MP_HOLD's max: an open for reading; the reply's data holds the file's first extents (MP_EXTS,
 * MP_MORE if there are more than MP_HOLD_EXTENTS_MAX), unless its bytes are inline */
#define MP_HOLD_EXTENTS	    0x4
#define MP_HOLD_EXTENTS_MAX 16
/* A hold lasts this long at the leader; clients renew every MP_HOLD_RENEW_MS. */
#define MP_HOLD_MS	 10000
#define MP_HOLD_RENEW_MS 3000
#define MP_HOLD_MAX	 512 /* inos in one MP_HOLD's data */

/*
 * How long a client may keep what a reply with MP_CACHE told it (unless
 * recalled first), from when it sent the request. A leader gives it only
 * while its own lease (mgroup_lease_end: 9/10 of a 500 ms election timeout
 * past the last quorum's confirmation, ~450 ms less a heartbeat) covers
 * it, so that no leader elected meanwhile can change what it covers
 * without recalling it: 300 ms (it was 1 s, and a leader cut off from its
 * group let clients read a removed file's attributes for up to that long;
 * tests/sim/meta client_real, seed 18).
 */
#define MP_CACHE_MS 300
#define MP_CACHE_NS ((uint64_t)MP_CACHE_MS * 1000 * 1000)

/*
 * What a client caches, as the leader names it in a recall
 * (NET_OP_META_RECALL: u32 fs, then per key u8 kind, u64 a, u64 h):
 * attributes of inode a, or the entry of name (hash h) in directory a.
 */
enum { MP_KEY_ATTR = 1, MP_KEY_DENTRY = 2 };
struct mp_key {
	uint8_t kind;
	uint64_t a, h;
};

static inline struct mp_key
mp_key_attr(uint64_t ino)
{
	return (struct mp_key){ .kind = MP_KEY_ATTR, .a = ino };
}

static inline struct mp_key
mp_key_dentry(uint64_t parent, const char *name, size_t len)
{
	return (
	    struct mp_key){ .kind = MP_KEY_DENTRY, .a = parent, .h = sh_hash64(name, len, 0x5a17) };
}

#define MP_READDIR_MAX 1024
/* MP_READDIR's off: each entry comes with its inode's attributes when the inode is in the
 * entry's bucket (readdirplus; an inode elsewhere, hard-linked or renamed in, comes without) */
#define MP_READDIR_ATTRS 0x1
#define MP_DELTAS_MAX	 256
#define MP_STRIPES_MAX	 512

struct mp_req {
	uint8_t kind;
	uint32_t fs;
	uint16_t bucket;
	uint64_t ino;
	uint32_t max;
	uint64_t off, len; /* MP_EXTENTS: the byte range */
	uint16_t nlen;
	char name[META_NAME_MAX + 1];
	const uint8_t *data; /* MP_CMD: meta_cmd bytes; MP_DELTAS: n x META_DELTA_LEN */
	size_t dlen;
	/* a read as of this file-system version: a ready snapshot's (0: the newest); on the
	 * wire after data, only when not 0. Anything but a read is refused with -EROFS */
	uint64_t at;
};

struct mp_reply {
	uint8_t flags;
	uint64_t aux; /* SH_ENOTLEADER: the leader's id; MP_REVOKE: entries held; remove: the ino */
	struct meta_inode attr;
	struct meta_dentry dentry;
	struct meta_lease lease;
	const uint8_t *data; /* points into the decoded bytes */
	size_t dlen;
	/* MP_CMD: the file-system version it was applied at (the client's next commands say
	 * they come after it); on the wire after data, only when not 0 */
	uint64_t ver;
};

/* A recall's body: u32 fs, then per key u8 kind, u64 a, u64 h. */
void mp_recall_encode(struct sh_enc *e, uint32_t fs, const struct mp_key *keys, unsigned n);
/* Fuzzed. fn(arg, fs, key) per key; -EBADMSG (keys before the bad one were given). */
int mp_recall_decode(const uint8_t *b, size_t len,
		     void (*fn)(void *arg, uint32_t fs, const struct mp_key *k), void *arg);

int mp_req_encode(struct sh_enc *e, const struct mp_req *r);
/* Fuzzed. Points into b for data; -EBADMSG. */
int mp_req_decode(const uint8_t *b, size_t len, struct mp_req *r);
int mp_reply_encode(struct sh_enc *e, const struct mp_reply *r);
int mp_reply_decode(const uint8_t *b, size_t len, struct mp_reply *r); /* fuzzed */

/*
 * Readdir entries in a reply's data: appended one by one, walked with
 * mp_dirent_next. With MP_READDIR_ATTRS each is followed by u8 1 and the
 * inode (META_INODE_LEN), or u8 0; put and next are then given attr.
 */
void mp_dirent_put(struct sh_enc *e, const struct meta_dirent *d, const struct meta_inode *attr);
/* The next entry from *d: 1, 0 at the end, -EBADMSG; attr (if asked): type 0 when none came. */
int mp_dirent_next(struct sh_dec *d, struct meta_dirent *out, struct meta_inode *attr);

/*
 * MP_DIFF's records (sh_fs_diff, docs/snapshots.md "What changed"): u8
 * flags, u16 key length, the logical key (bucket first, no version), then
 * u32 length and bytes of the record as of v1 (MP_DIFF_OLD) and as of v2
 * (MP_DIFF_NEW); one without the flag was absent there. At least one of
 * the two is present, except in a cursor (MP_DIFF_CURSOR alone, the last
 * record of a page): the leader looked at MP_DIFF_KEYS keys and stopped
 * there, no change in it; the next page starts after its key.
 */
#define MP_DIFF_OLD	0x1
#define MP_DIFF_NEW	0x2
#define MP_DIFF_CURSOR	0x4
#define MP_DIFF_DEFAULT (256u << 10) /* reply bytes when max is 0 */
#define MP_DIFF_MAX	(1u << 20)   /* and at most */
#define MP_DIFF_KEYS	4096	     /* keys looked at for one page, at most */
#define MP_DIFF_REC_HDR 11	     /* a record's bytes besides its key and values */
struct mp_diff_rec {
	const uint8_t *key;
	size_t klen;
	const uint8_t *old, *new; /* NULL: absent */
	size_t olen, nlen;
	bool cursor; /* where the page stopped, nothing else (old, new NULL) */
};
void mp_diff_put(struct sh_enc *e, const struct mp_diff_rec *r);
/* Fuzzed. The next record from *d, pointing into its bytes: 1, 0 at the end, -EBADMSG. */
int mp_diff_next(struct sh_dec *d, struct mp_diff_rec *out);

#endif /* SH_META_MPROTO_H */
