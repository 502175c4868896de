/* SPDX-License-Identifier: Apache-2.0 */
/*
 * On-disk format of a drive target (docs/ondisk.md). Little-endian, every
 * structure fixed-size with a crc32c; decoders are bounds-checked and fuzzed
 * (tests/fuzz/fuzz_store_df.c).
 *
 *   block 0, 1        superblock (two copies)
 *   [seg_base, ...)   nsegs segments of seg_size bytes
 *
 * A segment starts with a segment header block, then records, each a
 * header block followed by its payload blocks (zero-padded to 4 KiB):
 *
 *   | seg hdr | rec hdr | payload ... | rec hdr | payload ... | rec hdr (tomb) | ...
 *
 * The log of a segment ends at the first block that is not a valid record
 * header of the segment's current sequence number.
 */
#ifndef SH_STORE_STORE_DF_H
#define SH_STORE_STORE_DF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define STORE_BLOCK	4096
#define STORE_SB_MAGIC	0x314C4F4853424453ULL /* "SDBSHOL1" */
#define STORE_SEG_MAGIC 0x47455353u	      /* "SSEG" */
#define STORE_REC_MAGIC 0x43455253u	      /* "SREC" */
#define STORE_VERSION	1
/* Payload blocks one record may have: their crcs fill the header block. */
#define STORE_MAX_BLOCKS 960
#define STORE_MAX_FRAG	 (STORE_MAX_BLOCKS * STORE_BLOCK)

struct store_sb_df {
	uint64_t magic;
	uint32_t version;
	uint32_t block_size;
	uint8_t cluster_uuid[16];
	uint64_t target_id;
	uint64_t size;	   /* bytes of the drive in use */
	uint64_t seg_base; /* byte offset of segment 0 */
	uint32_t seg_size; /* bytes */
	uint32_t nsegs;
	uint64_t created_ns;
	uint8_t reserved[48];
	uint32_t pad;
	uint32_t crc; /* crc32c of the bytes before it */
};
_Static_assert(sizeof(struct store_sb_df) == 128, "superblock size");

struct store_seg_df {
	uint32_t magic;
	uint16_t version;
	uint16_t pad;
	uint32_t seg; /* index */
	uint32_t pad2;
	uint64_t seq;  /* grows each time a segment is opened for writing */
	uint64_t wseq; /* write sequence when it was opened */
	uint64_t target_id;
	uint8_t reserved[20];
	uint32_t crc;
};
_Static_assert(sizeof(struct store_seg_df) == 64, "segment header size");

enum store_rec_type { STORE_REC_FRAG = 1, STORE_REC_TOMB = 2 };

/*
 * A record's header block: this header, then nblocks u32, the crc32c of
 * each 4 KiB payload block (zero padding included), then zeros.
 */

struct store_rec_df {
	uint32_t magic;
	uint16_t version;
	uint16_t type;
	uint64_t seg_seq; /* the segment's sequence number when written */
	uint64_t stripe;
	uint32_t idx;	       /* fragment index in the stripe */
	uint32_t len;	       /* payload bytes (FRAG), 0 (TOMB) */
	uint64_t epoch;	       /* version: the newest epoch of a (stripe, idx) wins */
	uint64_t wseq;	       /* write sequence of this record (moves get new ones) */
	uint64_t durable_wseq; /* every record with wseq <= this was durable when this was built */
	uint64_t killed_epoch; /* TOMB: the newest epoch it kills */
	uint32_t payload_crc;  /* crc32c of the payload bytes */
	uint32_t nblocks;      /* payload blocks that follow */
	uint8_t reserved[20];
	uint32_t crc; /* crc32c of this header and the block crcs that follow it */
};
_Static_assert(sizeof(struct store_rec_df) == 96, "record header size");
_Static_assert(sizeof(struct store_rec_df) + 4 * STORE_MAX_BLOCKS <= STORE_BLOCK,
	       "block crcs fit the header block");

static inline uint32_t
store_blocks(uint32_t len)
{
	return (len + STORE_BLOCK - 1) / STORE_BLOCK;
}

/* Encode into a 4 KiB block (zeroing the rest); fills magic, version and crc. */
void store_sb_encode(const struct store_sb_df *sb, uint8_t *block);
void store_seg_encode(const struct store_seg_df *sh, uint8_t *block);
void store_rec_encode(const struct store_rec_df *rh, const uint32_t *bcrc, uint8_t *block);

/*
 * Decode a block. 0, -EBADMSG (not this kind of block / malformed / bad
 * crc), SH_EVERSION (a version this code does not know). For records,
 * bcrc (STORE_MAX_BLOCKS entries) receives the block crcs.
 */
int store_sb_decode(const uint8_t *block, size_t len, struct store_sb_df *sb);
int store_seg_decode(const uint8_t *block, size_t len, struct store_seg_df *sh);
int store_rec_decode(const uint8_t *block, size_t len, struct store_rec_df *rh, uint32_t *bcrc);

#endif /* SH_STORE_STORE_DF_H */
