/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Metadata records and keys (DESIGN.md §3, §5; docs/ondisk.md "Bucket
 * store"). Every record lives in one bucket; a key is the bucket, a kind,
 * the kind's fields in big-endian order (so that LMDB's byte order is the
 * natural order: one directory's entries are adjacent), and last the
 * complement of the file-system version that wrote it, so that the newest
 * version of a key sorts first.
 *
 *   inode   bucket 'i' ino
 *   dentry  bucket 'd' parent name 0x00
 *   xattr   bucket 'x' ino name 0x00
 *   extent  bucket 'e' ino offset
 *   intent  bucket 'r' id            (two-phase renames)
 *
 * Inode numbers are bucket (16 bits) | sequence (48 bits); a directory
 * entry (parent, name) lives in bucket hash(parent, name) mod nbuckets,
 * and a new inode in the bucket of its first name.
 */
#ifndef SH_META_META_REC_H
#define SH_META_META_REC_H

#include "../base/base.h"

#define META_NAME_MAX  255
#define META_KEY_MAX   (3 + 8 + META_NAME_MAX + 1 + 8)
#define META_VER_LEN   8
#define META_VALUE_MAX (65536 + 64) /* a stored value: flags and the largest record (an xattr) */

enum meta_kind {
	META_K_INODE = 'i',
	META_K_DENTRY = 'd',
	META_K_XATTR = 'x',
	META_K_EXTENT = 'e',
	META_K_INTENT = 'r',
	META_K_SYMLINK = 'l', /* bucket 'l' ino: the link's target */
	META_K_COUNTER = 'n', /* bucket 'n' 0: the next inode sequence */
	META_K_OUTBOX = 'o',  /* bucket 'o' seq: a delta for another bucket */
	META_K_APPLIED = 's', /* bucket 's' source: the last delta seq applied from it */
	META_K_GRANT = 'g',   /* bucket 'g' dir lessee: a lease this directory's bucket gave */
	META_K_HELD = 'h',    /* bucket 'h' dir: a lease this bucket holds on a directory */
	META_K_LOCK = 'k',    /* bucket 'k' parent name 0x00: an entry a rename holds */
	META_K_STRIPE = 'z',  /* bucket 'z' stripe: how many extents refer to it */
	META_K_RECLAIM = 'c', /* bucket 'c' stripe: a stripe to release on its targets */
	META_K_INLINE = 'y',  /* bucket 'y' ino: a small file's bytes, kept with its inode */
	META_K_USAGE = 'u',   /* bucket 'u' 0: bytes mapped and stripe bytes referenced */
	META_K_DEDUP = 'f',   /* bucket 'f' fp: a dedup entry (meta_dedup.h) */
	META_K_CLAIM = 'm',   /* bucket 'm' claim: what a writer holds, since when */
	META_K_CLAIMED = 'q', /* bucket 'q' claim: committed here (or refused) */
	META_K_RAFT = 'a',    /* bucket 'a': the Raft index its group applied last (first bucket) */
	META_K_DONE = 't',    /* bucket 't' tag: a request applied here (meta_done.h) */
	META_K_DONE_BY_TIME = 'T', /* bucket 'T' when tag: the same, in time order */
	META_K_PARENT = 'p',	   /* bucket 'p' dir: its parent directory, and since when */
	META_K_ORPHAN = 'O',  /* bucket 'O' ino: a file without names, kept while open (u64 when) */
	META_K_VERSION = 'v', /* bucket 'v' 0 (a group's first bucket): its version and snapshots */
};

/*
 * What a snapshot reads: the namespace and the files' bytes and maps. The
 * other kinds are the bucket's own bookkeeping (counts, queues, leases,
 * dedup entries), one copy whatever the version: meta_db writes them at
 * version 1 and never keeps an older one.
 */
static inline bool
meta_kind_versioned(uint8_t kind)
{
	switch (kind) {
	case META_K_INODE:
	case META_K_DENTRY:
	case META_K_XATTR:
	case META_K_EXTENT:
	case META_K_SYMLINK:
	case META_K_INLINE:
	case META_K_PARENT:
	case META_K_GRANT: /* which buckets hold a directory's entries: a snapshot's readdir */
		return true;
	default:
		return false;
	}
}

/*
 * Versions: a version's top 16 bits name its branch (writable clones;
 * meta_db.h "Branches"); a file system's own versions are branch 0's.
 */
#define META_BRANCH_SHIFT 48
#define META_VER_NEWEST	  (((uint64_t)1 << META_BRANCH_SHIFT) - 1) /* branch 0's newest */

static inline uint16_t
meta_ver_branch(uint64_t ver)
{
	return (uint16_t)(ver >> META_BRANCH_SHIFT);
}

/* The newest of ver's branch (a read as of it sees everything the branch has). */
static inline uint64_t
meta_ver_newest(uint64_t ver)
{
	return (uint64_t)meta_ver_branch(ver) << META_BRANCH_SHIFT | META_VER_NEWEST;
}

/* A logical key (without the version). */
struct meta_key {
	uint8_t b[META_KEY_MAX];
	size_t len;
};

/* Big-endian u64, so that byte order is numeric order in keys. */
static inline void
meta_be64_put(uint8_t *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
}

static inline uint64_t
meta_be64_get(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

/* Little-endian u64: the versions, counts and bases commands and group answers carry. */
static inline void
meta_le64_put(uint8_t *p, uint64_t v)
{
	for (unsigned i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint64_t
meta_le64_get(const uint8_t *p)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < 8; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

static inline uint16_t
meta_ino_bucket(uint64_t ino)
{
	return (uint16_t)(ino >> 48);
}

static inline uint64_t
meta_ino_make(uint16_t bucket, uint64_t seq)
{
	return (uint64_t)bucket << 48 | (seq & ((1ull << 48) - 1));
}

/* The bucket of directory entry (parent, name). */
uint16_t meta_dentry_bucket(uint64_t parent, const char *name, size_t len, uint32_t nbuckets);

/* A name is 1-255 bytes without '/' or NUL, and not "." or "..". -EINVAL or -ENAMETOOLONG. */
int meta_name_check(const char *name, size_t len);

void meta_key_inode(struct meta_key *k, uint16_t bucket, uint64_t ino);
/* A key of kind `kind` with one u64 field (inode, sequence, source bucket). */
void meta_key_id(struct meta_key *k, uint16_t bucket, uint8_t kind, uint64_t id);
/* The prefix of every record of one kind in a bucket (for scans). */
void meta_key_kind(struct meta_key *k, uint16_t bucket, uint8_t kind);
int meta_key_dentry(struct meta_key *k, uint16_t bucket, uint64_t parent, const char *name,
		    size_t len);
int meta_key_xattr(struct meta_key *k, uint16_t bucket, uint64_t ino, const char *name, size_t len);
/* The lock a two-phase rename holds on entry (parent, name) of this bucket. */
int meta_key_lock(struct meta_key *k, uint16_t bucket, uint64_t parent, const char *name,
		  size_t len);
/* The prefix shared by all of a directory's entries in one bucket. */
void meta_key_dir_prefix(struct meta_key *k, uint16_t bucket, uint64_t parent);
/* Split a dentry key back: the name (not NUL-terminated) and its length. -EINVAL. */
int meta_key_dentry_name(const uint8_t *key, size_t len, const uint8_t **name, size_t *nlen);

enum meta_type { META_REG = 1, META_DIR, META_LNK, META_CHR, META_BLK, META_FIFO, META_SOCK };

struct meta_inode {
	uint8_t type;
	uint32_t mode; /* permission bits and set-id/sticky (S_IFMT comes from type) */
	uint32_t uid, gid;
	uint32_t nlink;
	uint32_t rdev;
	uint64_t size;
	uint64_t atime, mtime, ctime, btime; /* ns since the Unix epoch */
	uint64_t generation;		     /* with the number: an inode identity (ESTALE) */
	uint64_t flags;
};

#define META_INODE_LEN 78 /* version, type, 5 x u32, 7 x u64 */

void meta_inode_encode(const struct meta_inode *in, uint8_t out[META_INODE_LEN]);
/* Fuzzed. -EBADMSG (length, version or type). */
int meta_inode_decode(const uint8_t *b, size_t len, struct meta_inode *in);

struct meta_dentry {
	uint64_t ino;
	uint8_t type;
};

#define META_DENTRY_LEN 10

void meta_dentry_encode(const struct meta_dentry *d, uint8_t out[META_DENTRY_LEN]);
int meta_dentry_decode(const uint8_t *b, size_t len, struct meta_dentry *d); /* fuzzed */

#endif /* SH_META_META_REC_H */
