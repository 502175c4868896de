// SPDX-License-Identifier: Apache-2.0
/*
 * Fuzz target: a stored block's bytes as a drive gives them back (they
 * passed its crcs, yet may be anything): expanding must never crash or
 * write past the block, and says -EBADMSG unless exactly blen bytes come
 * out. The input compressed by each algorithm must expand to itself.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/data/reduce.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const unsigned comps[] = { REDUCE_ALGO_LZ4, REDUCE_ALGO_ZSTD,
					  REDUCE_ALGO_ZSTD | 9u << 2 };
	uint8_t *out, *enc;
	uint32_t blen;
	int rc;

	if (size < 5)
		return 0;
	/* the record's claims: the encoding and the expanded length */
	memcpy(&blen, data + 1, 4);
	blen %= 256 * 1024;
	out = malloc(blen ? blen : 1);
	if (out == NULL)
		return 0;
	rc = reduce_unblock(data[0] % (REDUCE_ENC_MAX + 1), data + 5, size - 5, out, blen);
	if (rc != 0 && rc != -EBADMSG && rc != -EINVAL)
		abort();
	free(out);
	/* round trips */
	size -= 5;
	data += 5;
	out = malloc(size + 1);
	enc = malloc(size + 1);
	for (unsigned i = 0; out && enc && i < sizeof(comps) / sizeof(comps[0]); i++) {
		uint8_t how;
		size_t n = reduce_block(comps[i], data, size, enc, &how);

		if (how == REDUCE_RAW)
			continue;
		if (n == 0 || n > size - size / REDUCE_MIN_GAIN ||
		    reduce_unblock(how, enc, n, out, size) != 0 || memcmp(out, data, size) != 0)
			abort();
	}
	free(out);
	free(enc);
	return 0;
}
