// SPDX-License-Identifier: Apache-2.0
/* Per-block compression: round trips, the raw fallback, corrupt input refused. */
#include <errno.h>
#include <lz4.h>
#include <string.h>

#include "../../../src/base/alloc.h"
#include "../../../src/base/rand.h"
#include "../../../src/data/reduce.h"
#include "../../lib/test.h"

#define BLK (64 * 1024)

static const unsigned comps[] = { REDUCE_ALGO_LZ4, REDUCE_ALGO_ZSTD, REDUCE_ALGO_ZSTD | 1u << 2,
				  REDUCE_ALGO_ZSTD | 19u << 2 };

TEST(reduce_text_round_trips_and_shrinks)
{
	static uint8_t src[BLK], enc[BLK], back[BLK];
	struct sh_rand r;

	sh_rand_seed(&r, 7);
	sh_rand_text(&r, src, sizeof(src));
	for (unsigned i = 0; i < sizeof(comps) / sizeof(comps[0]); i++) {
		uint8_t how = 99;
		size_t n = reduce_block(comps[i], src, sizeof(src), enc, &how);

		SH_ASSERT_GT(n, 0);
		SH_ASSERT_LT(n, sizeof(src) * 2 / 3); /* text: at least 1.5x */
		SH_ASSERT_EQ(how,
			     REDUCE_ALGO(comps[i]) == REDUCE_ALGO_LZ4 ? REDUCE_LZ4 : REDUCE_ZSTD);
		memset(back, 0, sizeof(back));
		SH_ASSERT_OK(reduce_unblock(how, enc, n, back, sizeof(back)));
		SH_ASSERT_MEMEQ(back, src, sizeof(src));
		/* the wrong length, or a flipped byte, is refused, never silently wrong */
		SH_ASSERT_ERR(reduce_unblock(how, enc, n, back, sizeof(back) - 1), -EBADMSG);
		enc[n / 2] ^= 0x5A;
		{
			int rc = reduce_unblock(how, enc, n, back, sizeof(back));

			SH_ASSERT(rc == -EBADMSG || memcmp(back, src, sizeof(src)) != 0 ||
				  how == REDUCE_LZ4);
		}
	}
	/* the generator's ratio is what the benchmarks say it is: about 2x with lz4 */
	{
		int n = LZ4_compress_default((const char *)src, (char *)enc, BLK, BLK);
		long pct = 100L * BLK / n;

		SH_ASSERT_GT(pct, 160);
		SH_ASSERT_LT(pct, 350);
	}
}

TEST(reduce_random_and_none_stay_raw)
{
	static uint8_t src[BLK], enc[BLK], back[BLK];
	struct sh_rand r;
	uint8_t how = 99;

	sh_rand_seed(&r, 8);
	sh_rand_fill(&r, src, sizeof(src));
	for (unsigned i = 0; i < sizeof(comps) / sizeof(comps[0]); i++) {
		SH_ASSERT_EQ(reduce_block(comps[i], src, sizeof(src), enc, &how), 0);
		SH_ASSERT_EQ(how, REDUCE_RAW);
	}
	/* compression off: raw even for text */
	sh_rand_text(&r, src, sizeof(src));
	SH_ASSERT_EQ(reduce_block(REDUCE_NONE, src, sizeof(src), enc, &how), 0);
	SH_ASSERT_EQ(how, REDUCE_RAW);
	/* raw "decodes" to itself, and only at its own length */
	SH_ASSERT_OK(reduce_unblock(REDUCE_RAW, src, 100, back, 100));
	SH_ASSERT_MEMEQ(back, src, 100);
	SH_ASSERT_ERR(reduce_unblock(REDUCE_RAW, src, 100, back, 101), -EBADMSG);
	SH_ASSERT_ERR(reduce_unblock(REDUCE_ENC_MAX, src, 100, back, 100), -EINVAL);
	SH_ASSERT_ERR(reduce_unblock(REDUCE_LZ4, src, 10, back, REDUCE_BLOCK_MAX + 1), -EBADMSG);
}

TEST(reduce_saves_at_least_an_eighth_or_stores_raw)
{
	static uint8_t src[BLK], enc[BLK];
	struct sh_rand r;
	uint8_t how;

	/* half random, half zeros: compresses to about half, kept */
	sh_rand_seed(&r, 9);
	memset(src, 0, sizeof(src));
	sh_rand_fill(&r, src, BLK / 2);
	SH_ASSERT_GT(reduce_block(REDUCE_ALGO_LZ4, src, BLK, enc, &how), 0);
	SH_ASSERT_EQ(how, REDUCE_LZ4);
	/* 15/16 random: would save less than 1/8, so raw */
	sh_rand_fill(&r, src, BLK - BLK / 16);
	SH_ASSERT_EQ(reduce_block(REDUCE_ALGO_LZ4, src, BLK, enc, &how), 0);
	SH_ASSERT_EQ(how, REDUCE_RAW);
	/* compressible only in its last quarter, random where the samples are: taken as random */
	sh_rand_fill(&r, src, BLK);
	memset(src + BLK * 3 / 4, 0, BLK / 4);
	SH_ASSERT_EQ(reduce_block(REDUCE_ALGO_LZ4, src, BLK, enc, &how), 0);
	/* compressible at its middle: tried, and kept */
	sh_rand_fill(&r, src, BLK);
	memset(src + BLK / 2, 0, BLK / 2);
	SH_ASSERT_GT(reduce_block(REDUCE_ALGO_LZ4, src, BLK, enc, &how), 0);
	/* tiny blocks are not worth a try */
	SH_ASSERT_EQ(reduce_block(REDUCE_ALGO_LZ4, src, 8, enc, &how), 0);
}
