/* SPDX-License-Identifier: Apache-2.0 */
/* Private to store/: the target, segments, index entries and queued operations. */
#ifndef SH_STORE_STORE_INT_H
#define SH_STORE_STORE_INT_H

#include "store.h"

enum seg_state { SEG_FREE = 0, SEG_OPEN, SEG_SEALED, SEG_CLEANING };

struct store_seg {
	enum seg_state state;
	uint64_t seq;
	uint32_t used;	      /* blocks written (header included) */
	uint32_t live;	      /* blocks of live records (fragments and needed tombstones) */
	uint64_t min_epoch;   /* smallest epoch of any record on disk here (kept while FREE: the
			       * old records stay readable to recovery until it is reopened) */
	struct sh_list frags; /* live fragments here */
	struct sh_list tombs; /* tombstones here */
	uint32_t readers;     /* reads in flight: not reused until 0 */
	uint32_t unacked;     /* batches written here, not yet durable: not cleaned until 0 */
	bool hdr_pending;     /* reopened: no record goes in until its new header is durable */
	uint32_t moves;	      /* cleaning: moves not yet durable */
};

/* A live fragment: where its newest version is. */
struct store_frag {
	struct sh_hnode hn;
	struct sh_list seglink;
	uint64_t stripe;
	uint32_t idx;
	uint32_t len;
	uint64_t epoch;
	uint32_t seg, blk; /* header block of the record, within the segment */
	uint32_t payload_crc;
	bool corrupt;
	bool moving;
	uint32_t *bcrc; /* store_blocks(len) block crcs */
};

/* A tombstone record on disk, remembered so cleaning knows whether to keep it. */
struct store_tomb {
	struct sh_list seglink;
	uint64_t stripe;
	uint32_t idx;
	uint64_t epoch;
	uint32_t seg, blk;
	bool moving;
};

enum op_type { OP_APPEND = 1, OP_TOMB, OP_MOVE_FRAG, OP_MOVE_TOMB };

struct store_op {
	struct sh_list link;
	struct store *s;
	enum op_type type;
	uint64_t stripe;
	uint32_t idx;
	uint32_t len;
	uint64_t epoch;
	uint8_t *data; /* payload, blocks-padded, 4 KiB aligned (FRAG) */
	bool data_ref; /* data is the caller's (store_append_ref), not the pool's */
	uint32_t *bcrc;
	uint32_t payload_crc;
	struct store_frag *from_frag; /* OP_MOVE_FRAG */
	struct store_tomb *from_tomb; /* OP_MOVE_TOMB */
	uint32_t from_seg;	      /* OP_MOVE_FRAG: the victim */
	uint32_t seg, blk;	      /* where it was written */
	uint64_t wseq;
	store_cb cb;
	void *arg;
};

#define STORE_FSYNCS 3

struct store_batch {
	struct sh_list link;
	uint64_t seq;
	struct store *s;
	struct sh_list ops;
	uint8_t *buf;
	uint32_t nblocks;
	uint32_t seg, blk;
	uint64_t max_wseq;
	bool written;
	bool durable;
	bool dsync;    /* written with RWF_DSYNC: durable when written, no fsync needed */
	bool hdr_only; /* the header of a (re)opened segment */
	struct env_disk_req req;
};

enum store_state { ST_OPENING = 0, ST_READY, ST_FAILED };

struct store {
	struct env *env;
	struct env_disk *disk;
	struct store_opts o;
	struct store_sb_df sb;
	enum store_state state;
	struct store_seg *segs;
	uint32_t free_segs;
	struct sh_htable index;

	int open_seg; /* -1: none */
	int next_seg; /* opened ahead, its header written first; -1: none */
	uint32_t wptr;
	uint64_t next_wseq, next_epoch, next_seg_seq, durable_wseq;
	struct sh_list pending;
	struct sh_list batches; /* written or being written, in log order */
	unsigned writes_inflight;
	/* fsyncs in flight: each covers the batches up to its upto (a batch sequence) */
	struct store_fsync {
		struct env_disk_req req;
		struct store *s;
		uint64_t upto;
		bool busy;
	} fsyncs[STORE_FSYNCS];
	uint64_t batch_seq;   /* of the newest batch */
	uint64_t synced_upto; /* the newest batch an fsync was submitted for */
	struct env_task pump_task;

	/* cleaning */
	int victim; /* -1: none */
	unsigned moves_inflight;
	struct env_task clean_task;

	/* open */
	store_cb open_cb;
	void *open_arg;
	struct store_recovery *rec;

	/*
	 * Freed payload buffers, by size in blocks, for the next operations:
	 * a fresh 128 KiB aligned buffer per append means mmap, page faults and
	 * munmap with TLB shoot-downs (bench/store: 1.1 -> 2.8 GB/s without).
	 */
	void **pool; /* STORE_MAX_BLOCKS + 1 free lists (next pointer in the buffer) */
	uint64_t pool_bytes;

	struct store_stats st;
	struct sh_list ios;	  /* reads in flight (for close) */
	struct sh_list clean_ios; /* cleaning and scrub reads in flight */
	struct scrub *scrubbing;
};

/* store.c */
struct store_frag *store_frag_find(struct store *s, uint64_t stripe, uint32_t idx);
void store_pump(struct store *s);
int store_queue_op(struct store *s, struct store_op *op);
/* An operation on len bytes: in a pool buffer, or written from ref (the caller's) if not NULL. */
struct store_op *store_op_new(struct store *s, enum op_type type, uint32_t len, const void *ref);
void store_op_free(struct store_op *op);
/* A block-aligned buffer of nb blocks, from the target's pool when it has one; and back. */
void *store_buf_get(struct store *s, uint32_t nb);
void store_buf_put(struct store *s, void *b, uint32_t nb);
/* Where block blk of segment seg is on the drive. */
uint64_t store_seg_off(const struct store *s, uint32_t seg, uint32_t blk);

/* store_read.c */
/* Every read in flight answered -ECANCELED and freed (the target closes). */
void store_reads_cancel(struct store *s);

/* clean.c */
void store_clean_maybe(struct store *s);
void store_clean_op_done(struct store *s, struct store_op *op);
void store_clean_seg_maybe_free(struct store *s, uint32_t seg);
void store_clean_init(struct store *s);
void store_clean_fini(struct store *s);

/* recover.c */
int store_recover_start(struct store *s);
void store_recover_free(struct store *s);
/* The index gains (stripe, idx) at this place; used by recovery. */
struct store_frag *store_frag_insert(struct store *s, uint64_t stripe, uint32_t idx);
void store_frag_remove(struct store *s, struct store_frag *f);
void store_frag_place(struct store *s, struct store_frag *f);
/* Remember a tombstone record at (seg, blk) so cleaning can decide whether to keep it. */
void store_tomb_add(struct store *s, uint64_t stripe, uint32_t idx, uint64_t epoch, uint32_t seg,
		    uint32_t blk);

#endif /* SH_STORE_STORE_INT_H */
