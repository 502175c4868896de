// SPDX-License-Identifier: Apache-2.0
/* XXH64 against published values: placement depends on it never changing. */
#include "../../../src/base/base.h"
#include "../../lib/test.h"

TEST(hash64_known_values)
{
	SH_ASSERT_EQ(sh_hash64("", 0, 0), 0xEF46DB3751D8E999ULL);
	SH_ASSERT_EQ(sh_hash64("abc", 3, 0), 0x44BC2CF5AD770999ULL);
}

TEST(hash64_all_lengths_differ)
{
	unsigned char buf[128];
	uint64_t seen[129];

	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (unsigned char)i;
	for (size_t n = 0; n <= sizeof(buf); n++) {
		seen[n] = sh_hash64(buf, n, 0);
		SH_ASSERT_EQ(sh_hash64(buf, n, 0), seen[n]);
		SH_ASSERT_NE(sh_hash64(buf, n, 1), seen[n]);
		for (size_t k = 0; k < n; k++)
			SH_ASSERT_NE(seen[k], seen[n]);
	}
}

TEST(hash_u64_mixes)
{
	SH_ASSERT_NE(sh_hash_u64(1), sh_hash_u64(2));
	SH_ASSERT_EQ(sh_hash_u64(0), 0);
}
