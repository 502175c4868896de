// SPDX-License-Identifier: Apache-2.0
/* Erasure coding: every scheme from 3+2 to 16+4 rebuilds any P lost fragments, byte for byte. */
#include <stdlib.h>
#include <string.h>

#include "../../../src/base/base.h"
#include "../../../src/data/ec.h"
#include "../../lib/test.h"

static void
fill(struct sh_rand *r, uint8_t *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (uint8_t)sh_rand_u64(r);
}

/* Every erasure pattern of up to p fragments (all of them for small n, a sample for large). */
static void
check_scheme(unsigned d, unsigned p, size_t len, struct sh_rand *r)
{
	struct ec_code c;
	uint8_t *frag[EC_N_MAX], *orig[EC_N_MAX];
	unsigned n = d + p, tried = 0;

	SH_ASSERT_OK(ec_code_init(&c, d, p));
	for (unsigned i = 0; i < n; i++) {
		frag[i] = sh_malloc(len);
		orig[i] = sh_malloc(len);
	}
	for (unsigned i = 0; i < d; i++)
		fill(r, frag[i], len);
	ec_encode(&c, len, (const uint8_t *const *)frag, frag + d);
	for (unsigned i = 0; i < n; i++)
		memcpy(orig[i], frag[i], len);
	/* every pattern for up to 14 fragments; for wider schemes every single loss and 400 random
	 */
	for (uint32_t k = 0;; k++) {
		struct ec_decoder dec;
		uint32_t m;
		unsigned bits;

		if (n <= 14) {
			m = k + 1;
			if (m >= (1u << n))
				break;
		} else if (k < n) {
			m = 1u << k;
		} else if (k < n + 400) {
			unsigned want = 1 + (unsigned)sh_rand_below(r, p);

			for (m = 0; (unsigned)__builtin_popcount(m) < want;)
				m |= 1u << sh_rand_below(r, n);
		} else {
			break;
		}
		bits = (unsigned)__builtin_popcount(m);
		if (bits > p) {
			SH_ASSERT_EQ(ec_decoder_init(&c, &dec, m), -EINVAL);
			continue;
		}
		SH_ASSERT_OK(ec_decoder_init(&c, &dec, m));
		for (unsigned i = 0; i < n; i++)
			if (m >> i & 1)
				memset(frag[i], 0xA5, len);
		ec_decode(&c, &dec, len, frag);
		for (unsigned i = 0; i < n; i++)
			SH_ASSERT_MSG(memcmp(frag[i], orig[i], len) == 0,
				      "%u+%u: fragment %u wrong after losing pattern %#x", d, p, i,
				      m);
		tried++;
	}
	SH_ASSERT_GT(tried, n);
	for (unsigned i = 0; i < n; i++) {
		sh_free(frag[i]);
		sh_free(orig[i]);
	}
}

TEST(ec_every_scheme_rebuilds_lost_fragments)
{
	static const unsigned schemes[][2] = { { 3, 2 }, { 4, 2 },  { 6, 2 },  { 8, 2 }, { 4, 4 },
					       { 8, 4 }, { 12, 4 }, { 16, 2 }, { 16, 4 } };
	struct sh_rand r;

	sh_rand_seed(&r, sh_test_seed());
	for (size_t i = 0; i < sizeof(schemes) / sizeof(schemes[0]); i++)
		check_scheme(schemes[i][0], schemes[i][1], 4096 + 32 * i + (i & 1) * 7, &r);
}

TEST(ec_bad_schemes_and_patterns)
{
	struct ec_code c;
	struct ec_decoder dec;

	SH_ASSERT_EQ(ec_code_init(&c, 1, 2), -EINVAL);
	SH_ASSERT_EQ(ec_code_init(&c, 17, 2), -EINVAL);
	SH_ASSERT_EQ(ec_code_init(&c, 4, 0), -EINVAL);
	SH_ASSERT_EQ(ec_code_init(&c, 4, 5), -EINVAL);
	SH_ASSERT_OK(ec_code_init(&c, 4, 2));
	SH_ASSERT_EQ(ec_decoder_init(&c, &dec, 0), -EINVAL);	   /* nothing missing */
	SH_ASSERT_EQ(ec_decoder_init(&c, &dec, 1u << 6), -EINVAL); /* no such fragment */
	SH_ASSERT_EQ(ec_decoder_init(&c, &dec, 0x7), -EINVAL);	   /* three of 4+2 */
}
