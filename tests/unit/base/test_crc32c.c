// SPDX-License-Identifier: Apache-2.0
/* CRC-32C: standard vectors, ISA-L against the table version, chaining and iovecs. */
#include "../../../src/base/base.h"
#include "../../lib/test.h"

TEST(crc32c_vectors)
{
	unsigned char zeros[32] = { 0 }, ones[32];

	memset(ones, 0xff, sizeof(ones));
	SH_ASSERT_EQ(sh_crc32c(0, "123456789", 9), 0xE3069283u);
	SH_ASSERT_EQ(sh_crc32c_sw(0, "123456789", 9), 0xE3069283u);
	/* RFC 3720 B.4 */
	SH_ASSERT_EQ(sh_crc32c(0, zeros, 32), 0x8A9136AAu);
	SH_ASSERT_EQ(sh_crc32c(0, ones, 32), 0x62A8AB43u);
	SH_ASSERT_EQ(sh_crc32c(0, "", 0), 0u);
}

TEST(crc32c_fast_matches_reference)
{
	struct sh_rand r;
	static unsigned char buf[70000];

	sh_rand_seed(&r, sh_test_seed());
	sh_rand_fill(&r, buf, sizeof(buf));
	for (int i = 0; i < 300; i++) {
		size_t off = sh_rand_below(&r, 64);
		size_t len = sh_rand_below(&r, sizeof(buf) - 64);

		SH_ASSERT_EQ(sh_crc32c(0, buf + off, len), sh_crc32c_sw(0, buf + off, len));
	}
}

TEST(crc32c_chains)
{
	const char *s = "the quick brown fox jumps over the lazy dog";
	size_t n = strlen(s);
	uint32_t whole = sh_crc32c(0, s, n);
	struct iovec iov[3] = { { (void *)s, 5 },
				{ (void *)(s + 5), 20 },
				{ (void *)(s + 25), n - 25 } };

	for (size_t cut = 0; cut <= n; cut++)
		SH_ASSERT_EQ(sh_crc32c(sh_crc32c(0, s, cut), s + cut, n - cut), whole);
	SH_ASSERT_EQ(sh_crc32c_iov(0, iov, 3), whole);
}

TEST(crc32c_combines)
{
	struct sh_rand r;
	static unsigned char buf[3 * 4096 + 100];

	sh_rand_seed(&r, sh_test_seed());
	sh_rand_fill(&r, buf, sizeof(buf));
	/* 4 KiB pieces (the store's blocks), as the store folds them */
	{
		uint32_t c = sh_crc32c(0, buf, 4096);

		for (int i = 1; i < 3; i++)
			c = sh_crc32c_combine(c, sh_crc32c(0, buf + i * 4096, 4096), 4096);
		SH_ASSERT_EQ(c, sh_crc32c(0, buf, 3 * 4096));
	}
	/* any cut, any length, the empty ones included */
	for (int i = 0; i < 200; i++) {
		size_t cut = sh_rand_below(&r, sizeof(buf) + 1);
		size_t len = cut + sh_rand_below(&r, sizeof(buf) - cut + 1);

		SH_ASSERT_EQ(sh_crc32c_combine(sh_crc32c(0, buf, cut),
					       sh_crc32c(0, buf + cut, len - cut), len - cut),
			     sh_crc32c(0, buf, len));
	}
}
