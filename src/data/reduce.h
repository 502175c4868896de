/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Inline data reduction of file blocks (DESIGN.md §4; docs/reduction.md):
 * each block of file data is compressed on its own (lz4, or zstd with a
 * level) before it is packed into a stripe, and stored raw when it does
 * not shrink by at least REDUCE_MIN_GAIN of its length, so incompressible
 * data costs one failed attempt and nothing on the read side.
 *
 * Thread-safe: each thread keeps its own compression state.
 */
#ifndef SH_DATA_REDUCE_H
#define SH_DATA_REDUCE_H

#include <stddef.h>
#include <stdint.h>

/* How a block is stored (the extent record says so: docs/ondisk.md). */
enum reduce_enc { REDUCE_RAW = 0, REDUCE_LZ4 = 1, REDUCE_ZSTD = 2, REDUCE_ENC_MAX };

/* What a filesystem asks for (cfg_fs.compression: algorithm | level << 2). */
enum reduce_algo { REDUCE_NONE = 0, REDUCE_ALGO_LZ4 = 1, REDUCE_ALGO_ZSTD = 2 };
#define REDUCE_ALGO(comp)   ((unsigned)(comp)&3u)
#define REDUCE_LEVEL(comp)  ((int)((unsigned)(comp) >> 2)) /* 0: the algorithm's default */
#define REDUCE_ZSTD_DEFAULT 3
#define REDUCE_ZSTD_MAX	    19

#define REDUCE_BLOCK	 128u	    /* KiB of file data per block (the default) */
#define REDUCE_BLOCK_MAX (1u << 20) /* the largest block a record may describe */
#define REDUCE_MIN_GAIN	 8u	    /* stored compressed only if it saves len / 8 */

/*
 * Compress len bytes of src (len <= REDUCE_BLOCK_MAX) into dst (room for
 * len bytes) as comp asks. Returns the stored length and sets *enc; 0 with
 * REDUCE_RAW when it is not worth it (the caller stores src as it is): it
 * does not save 1/8, or (a block of 32 KiB or more) neither 4 KiB at its
 * start nor at its middle would, so the whole is not tried.
 */
size_t reduce_block(unsigned comp, const void *src, size_t len, void *dst, uint8_t *enc);

/*
 * Expand slen stored bytes of a block encoded as enc into exactly blen
 * bytes at dst. Fuzzed: the bytes come from a disk. 0, -EBADMSG (corrupt,
 * or not blen bytes), -EINVAL (unknown encoding).
 */
int reduce_unblock(uint8_t enc, const void *src, size_t slen, void *dst, size_t blen);

#endif /* SH_DATA_REDUCE_H */
