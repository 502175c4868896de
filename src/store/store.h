/* SPDX-License-Identifier: Apache-2.0 */
/*
 * store: one drive target (DESIGN.md §2, §4; docs/ondisk.md). Fragments of
 * erasure-coded stripes, keyed by (stripe id, fragment index), kept in a
 * log-structured store on one disk (a block device, or a file), driven
 * through env (io_uring with O_DIRECT, or the simulator).
 *
 * Guarantees:
 *   - an append is acknowledged only when durable (written and fsynced),
 *     in log order; after a crash every acknowledged fragment reads back
 *     exactly, and nothing torn or unacknowledged is ever returned as valid;
 *   - every 4 KiB of payload carries a crc32c checked on every read: a
 *     corrupt block is reported as -EBADMSG, never returned;
 *   - a release is acknowledged when its tombstone is durable;
 *   - space comes back by segment cleaning (live fragments moved out of
 *     mostly-dead segments), throttled behind foreground work; a full
 *     target returns -ENOSPC and keeps serving reads.
 *
 * All calls on the env's thread; callbacks run later, exactly once.
 */
#ifndef SH_STORE_STORE_H
#define SH_STORE_STORE_H

#include "../env/env.h"
#include "store_df.h"

struct store;

typedef void (*store_cb)(void *arg, int rc);

struct store_format_opts {
	uint8_t cluster_uuid[16];
	uint64_t target_id;
	uint32_t seg_size; /* 0: store_default_seg_size(); a multiple of 4 KiB, >= 64 KiB */
	bool buffered;	   /* no O_DIRECT (file systems without it) */
};

struct store_opts {
	uint32_t batch_max;    /* bytes per write; 0: 1 MiB (capped by the segment) */
	unsigned writes_max;   /* batches written at once; 0: 16 */
	uint32_t reserve_segs; /* kept free for cleaning; 0: 2 */
	uint32_t clean_below;  /* clean when fewer free segments; 0: reserve + 2 */
	unsigned clean_moves;  /* fragment moves in flight while cleaning; 0: 8 */
	bool buffered;	       /* no O_DIRECT */
	/*
	 * Make writes durable with an fsync after them instead of writing with
	 * RWF_DSYNC (FUA where the device has it, durable on completion).
	 */
	bool sync_by_fsync;
	/*
	 * Benchmarks only (bench/store, SH_BENCH_NODURABLE=1): acknowledge a
	 * batch when its plain write completes, durable or not, to measure the
	 * pipeline against fio's non-durable writes on equal terms. Loses
	 * acknowledged appends at a power cut: never set by shoald.
	 */
	bool unsafe_ack_before_durable;
};

struct store_stats {
	uint64_t capacity, used, live, garbage; /* bytes */
	uint64_t fragments, tombstones;
	uint32_t segs, segs_free;
	uint64_t appends, reads, releases, bytes_appended, bytes_read;
	uint64_t appends_copied; /* taken through a copy (store_append, or unaligned) */
	uint64_t batches, fsyncs;
	uint64_t hdr_waits; /* segments whose first records waited for their header */
	uint64_t cleaned_segs, moved_frags, moved_bytes;
	uint64_t corrupt_blocks, scrubbed_frags;
	uint64_t recovered_records, recovery_torn;
	uint64_t read_errors; /* fragment reads the drive failed (-EIO) */
	uint64_t failed;      /* 1: the write path failed (-EIO): no more writes */
};

/* The segment size format picks for a drive of drive_size bytes: 4 or 16 MiB. */
uint32_t store_default_seg_size(uint64_t drive_size);

/* Write a fresh superblock (and nothing else: every segment starts free). cb(rc). */
int store_format(struct env *env, const char *path, uint64_t size,
		 const struct store_format_opts *o, store_cb cb, void *arg);

/*
 * Open a formatted target: read the superblock, scan the segments, rebuild
 * the index. *out is set at once; use it after cb(0). On cb(rc < 0) close it.
 * -ENOENT (no file), SH_ENOTFORMATTED, SH_EVERSION, -EIO.
 */
int store_open(struct env *env, const char *path, const struct store_opts *o, struct store **out,
	       store_cb cb, void *arg);
/* Pending operations complete with -ECANCELED (before it returns). */
void store_close(struct store *s);

/*
 * Append fragment (stripe, idx) of len bytes (copied). cb(0) once durable.
 * A newer append of the same key replaces the older. -EINVAL (len 0 or over
 * STORE_MAX_FRAG), -ENOSPC (full: reserve reached), -EIO (drive failed).
 * At the very edge of full, an accepted append may still end with
 * cb(-ENOSPC) (the tails of segments were too short for it): not written.
 */
int store_append(struct store *s, uint64_t stripe, uint32_t idx, const void *data, uint32_t len,
		 store_cb cb, void *arg);
/*
 * store_append without the copy: the drive is written straight from data,
 * which must stay as it is until cb runs (close included: its cb(-ECANCELED)
 * comes after the drive has let go of it). For a 4 KiB-aligned data of
 * whole 4 KiB blocks; anything else is copied, as store_append does.
 */
int store_append_ref(struct store *s, uint64_t stripe, uint32_t idx, const void *data, uint32_t len,
		     store_cb cb, void *arg);
/*
 * Read len bytes at off of fragment (stripe, idx) into dst. cb(len) or
 * -ENOENT, -ERANGE (outside the fragment), -EBADMSG (corrupt), -EIO; after
 * an error dst's bytes are undefined. Whole 4 KiB blocks read into a
 * 4 KiB-aligned dst go there straight from the disk (no copy).
 */
int store_read(struct store *s, uint64_t stripe, uint32_t idx, uint64_t off, uint32_t len,
	       void *dst, store_cb cb, void *arg);
/* Release (stripe, idx); cb(0) once the tombstone is durable. -ENOENT if absent. */
int store_release(struct store *s, uint64_t stripe, uint32_t idx, store_cb cb, void *arg);
/* Length of a fragment, or -ENOENT. */
int64_t store_frag_len(struct store *s, uint64_t stripe, uint32_t idx);
void store_stats(struct store *s, struct store_stats *out);
uint64_t store_target_id(const struct store *s);
/*
 * Verify every live fragment (all blocks, payload crc); corrupt ones are
 * logged, counted and marked (reads then return -EBADMSG). cb(corrupt count).
 * -EBUSY while one runs.
 */
int store_scrub(struct store *s, store_cb cb, void *arg);
/* As store_scrub, reading at most bytes_per_s (0: as fast as it goes); one at a time. */
int store_scrub_paced(struct store *s, uint64_t bytes_per_s, store_cb cb, void *arg);
bool store_scrubbing(const struct store *s);
/* The epoch the next record gets: a fragment with a smaller one was written before now. */
uint64_t store_epoch(const struct store *s);

struct store_key {
	uint64_t stripe;
	uint32_t idx;
};
/*
 * Live fragments written before epoch `before` (moved by cleaning since
 * counts as written then), segment by segment from segment *cursor: up
 * to max into out, whole segments at a time (a segment holding more than
 * max gives its first max). *cursor is where the next call goes on, 0
 * after the last segment. Returns how many.
 */
unsigned store_list(struct store *s, uint64_t before, uint32_t *cursor, struct store_key *out,
		    unsigned max);
/*
 * Live fragments a read, a scrub or the cleaner found corrupt (reads of
 * them return -EBADMSG until a newer append of the key replaces them), up
 * to max into out; returns how many.
 */
unsigned store_corrupt_list(struct store *s, struct store_key *out, unsigned max);

/* Run segment cleaning now if any segment has garbage (normally automatic). */
void store_clean_kick(struct store *s);

#endif /* SH_STORE_STORE_H */
