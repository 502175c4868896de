// SPDX-License-Identifier: Apache-2.0
/*
 * The insides of libshoal's file data, shared by io.c (the handle, open
 * and close, target usage, cleaning), io_write.c (the write pipeline) and
 * io_read.c (the read pipeline and read-ahead). Everything of a handle is
 * under its mu unless said otherwise.
 */
#ifndef SHOAL_CLIENT_IO_INT_H
#define SHOAL_CLIENT_IO_INT_H

#include "client_int.h"

#define SMALL_ALIGN   4096u /* a partial stripe's fragments round up to this */
#define PUT_NS	      (5ull * 1000 * 1000 * 1000)
#define GET_NS	      (2ull * 1000 * 1000 * 1000)
#define RETRY_US      300000
#define FULL_TRIES    3 /* attempts failed on full targets only: -ENOSPC */
#define EXTENTS_BATCH 64
#define MAP_WINDOWS   32	 /* a handle's maps of EXTENTS_BATCH extents (struct emap) */
#define BEHIND_MAX    16	 /* stripes of one file in flight in the background, at most */
#define BEHIND_BYTES  (8u << 20) /* and at most this much of them (but 4 stripes) */
#define SPARES_MAX    4		 /* stripe buffers a handle keeps for reuse between them */
/* Files up to this size keep their bytes with the inode (one metadata write, no stripe). */
#define INLINE_MAX META_INLINE_MAX

#define RA_WIN 2 /* read-ahead windows per open file */

struct sh_file {
	sh_fs *fs;
	uint64_t ino;
	int flags;
	uint32_t epoch; /* the filesystem's restores when it was opened (sh_fs.epoch) */
	pthread_mutex_t mu;
	/* the stripe being filled: d x frag_of() bytes, parity room after them (its fragments
	 * are sent from it: nothing writes it while others hold it) */
	struct sh_buf *bufh;
	uint64_t buf_off;
	size_t fill;
	bool checked; /* this handle knows the file has no inline bytes (it has extents) */
	/* it was empty at open (created, truncated): no inline bytes to take along before its
	 * first stripe; another writer's since then make the mapping say -EAGAIN */
	bool empty;
	uint64_t append_t0; /* O_APPEND: when the buffer's first append came (env_clock) */
	/* O_APPEND: the tag of the buffer's placement (0: none yet), kept until it lands, so
	 * that a mapping applied whose every answer was lost is found done, not placed twice */
	uint64_t append_tag;
	uint64_t append_end;	       /* O_APPEND: where the last buffer landed ended */
	int err;		       /* a failed flush, reported by the next call */
	struct emap *map[MAP_WINDOWS]; /* the extents fetched (under mu), NULL until a read */
	unsigned map_hand;	       /* the window a fetch replaces next, when all are used */
	/* stripes written in the background (wpool), under mu */
	pthread_cond_t idle; /* signalled as each one ends */
	unsigned behind;
	struct {
		uint64_t off, end;
	} rng[BEHIND_MAX]; /* what each covers (off == end: a free slot) */
	struct sh_buf
	    *spare[SPARES_MAX]; /* stripe buffers to reuse (once nobody else holds them) */
	unsigned nspare;
	/*
	 * read-ahead for a sequential reader (under mu; filled by the AIO
	 * threads): RA_WIN windows, so that one is fetched while the reader
	 * copies from the other (one window made each read wait for a fetch
	 * of what it had just passed: 0.76x the mount's kernel read-ahead)
	 */
	struct ra_win {
		uint8_t *buf; /* cap bytes, fetched into again and again */
		size_t cap;
		uint64_t off, len;	     /* what buf holds (len 0: nothing) */
		uint64_t want_off, want_len; /* what is being fetched, while busy */
		bool busy;
		uint64_t wgen, ctime_ns, size; /* the file as it was then */
	} ra[RA_WIN];
	uint64_t ra_seq_end; /* where the last read ended */
	unsigned ra_seq;     /* reads in a row, each where the last ended */
};

/*
 * A handle's map of [from, to) of its file, kept while nothing on this
 * client changes extents (fs->wgen) and the file's ctime and size stay
 * what they were (another client's write changes them, and the attribute
 * cache is recalled then): sequential reads ask the metadata bucket once
 * per EXTENTS_BATCH extents, not once per read. A handle keeps
 * MAP_WINDOWS of them (the oldest fetched goes first), so that random
 * reads over a file of up to MAP_WINDOWS * EXTENTS_BATCH stripes (1 GiB
 * of 512 KiB stripes) cost one round trip each once the file's maps are
 * here, not two. A stripe released under a map that could not know it
 * fails the read, which then refetches.
 */
struct emap {
	uint64_t from, to, wgen;
	/* the file as it was when fetched: another client's change moves ctime (recalled) */
	uint64_t ctime_ns, size;
	unsigned n;
	struct meta_extent ex[EXTENTS_BATCH];
};

/* A full stripe's fragment size (the client's, sh_client_opts.frag_kb). */
static inline size_t
frag_of(const sh_file *f)
{
	return f->fs->c->frag;
}

static inline unsigned
ndata(const sh_file *f)
{
	return f->fs->code.d;
}

static inline unsigned
nfrags(const sh_file *f)
{
	return f->fs->code.d + f->fs->code.p;
}

/* io_write.c */
/*
 * Write fill bytes of buf (room for a stripe) as one stripe mapped at file
 * offset off; flags: META_EXTENT_*; from: a cleaned stripe's id (mapped
 * only where the range is still all its), else 0. -EAGAIN: the file has
 * inline bytes this writer did not know of.
 */
int io_put_stripe_from(sh_file *f, uint64_t off, uint8_t *buf, size_t fill, unsigned flags,
		       uint64_t from);
/* A stripe buffer (d + p fragments) nobody else holds: a spare of f's, or new; NULL on ENOMEM. */
struct sh_buf *io_buf_take(sh_file *f);
/* b kept as a spare of f's (for when its sends are acknowledged), or let go. */
void io_buf_give(sh_file *f, struct sh_buf *b);
/* f's stripe buffer its own to write (mu held): one a send still holds is swapped. */
int io_buf_own(sh_file *f);
/* The stripe buffer written now, or inline (mu held). */
int io_flush(sh_file *f);
/* A full stripe buffer written, in the background where it may be (mu held). */
int io_flush_full(sh_file *f);
/* Until no stripe of f is in flight in the background (mu held). */
void io_wait_behind(sh_file *f);

/* io_read.c */
/* Zero what of [at, upto) no extent of ex[0..n) covers, in buf (which holds the file from off). */
void io_zero_holes(const struct meta_extent *ex, unsigned n, uint64_t at, uint64_t upto,
		   uint8_t *buf, uint64_t off);
/* What a map of the extents from at describes of the file as st, as of wgen. */
void io_map_bounds(struct emap *m, const struct stat *st, uint64_t at, bool more, uint64_t wgen);
/* Every map of f's extents dropped (under f->mu). */
void io_map_drop_all(sh_file *f);
/* [off, end) of the file whose attributes are st, into buf: 0 or -errno. */
int io_read_range(sh_file *f, const struct stat *st, uint8_t *buf, uint64_t off, uint64_t end);
/* Whether a read-ahead window is fetching any of [off, end) (mu held). */
bool io_ra_coming(const sh_file *f, uint64_t off, uint64_t end);

/* f was opened before its filesystem was restored (-ESTALE, as NFS says), else 0. */
static inline int
io_stale(const sh_file *f)
{
	return f->epoch != f->fs->epoch ? -ESTALE : 0;
}

#endif
