// SPDX-License-Identifier: Apache-2.0
/*
 * Fuzz target: the on-disk structures of a drive target (superblock,
 * segment header, record header), which come from a disk that may hold
 * anything. Decoding must never crash; what decodes must re-encode to the
 * same bytes.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/store/store_df.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *blk = calloc(1, STORE_BLOCK), *out = malloc(STORE_BLOCK);
	struct store_sb_df sb;
	struct store_seg_df sh;
	struct store_rec_df rh;
	static uint32_t bcrc[STORE_MAX_BLOCKS];
	size_t n = size < STORE_BLOCK ? size : STORE_BLOCK;

	if (blk == NULL || out == NULL)
		goto out;
	memcpy(blk, data, n);
	if (store_sb_decode(blk, n, &sb) == 0) {
		store_sb_encode(&sb, out);
		if (memcmp(out, blk, sizeof(sb)) != 0)
			__builtin_trap();
	}
	if (store_seg_decode(blk, n, &sh) == 0) {
		store_seg_encode(&sh, out);
		if (memcmp(out, blk, sizeof(sh)) != 0)
			__builtin_trap();
	}
	if (store_rec_decode(blk, n, &rh, bcrc) == 0) {
		store_rec_encode(&rh, bcrc, out);
		if (memcmp(out, blk, sizeof(rh) + 4 * (size_t)rh.nblocks) != 0)
			__builtin_trap();
	}
out:
	free(blk);
	free(out);
	return 0;
}
