// SPDX-License-Identifier: Apache-2.0
/*
 * CRC-32C through ISA-L's crc32_iscsi(), which takes and returns the raw
 * (non-inverted) register; the inversions here give the standard CRC.
 */
#include <limits.h>
#include <pthread.h>
#include <isa-l/crc.h>

#include "crc32c.h"

uint32_t
sh_crc32c(uint32_t crc, const void *buf, size_t len)
{
	const unsigned char *p = buf;
	uint32_t c = ~crc;

	while (len > 0) {
		int n = len > (size_t)INT_MAX ? INT_MAX : (int)len;

		c = crc32_iscsi((unsigned char *)p, n, c);
		p += n;
		len -= (size_t)n;
	}
	return ~c;
}

uint32_t
sh_crc32c_iov(uint32_t crc, const struct iovec *iov, int iovcnt)
{
	for (int i = 0; i < iovcnt; i++)
		crc = sh_crc32c(crc, iov[i].iov_base, iov[i].iov_len);
	return crc;
}

/*
 * Combining: CRC-32C is linear, so crc(A || B) = crc(A) * x^(8 |B|) + crc(B)
 * over GF(2) modulo the polynomial. In the reflected form used here bit 31
 * is x^0 and bit 0 is x^31.
 */
#define CRC32C_POLY 0x82F63B78u

/* a * b mod P */
static uint32_t
gf_mul(uint32_t a, uint32_t b)
{
	uint32_t prod = 0;

	for (int k = 0; k < 32 && a != 0; k++) {
		if (a & (0x80000000u >> k)) {
			prod ^= b;
			a &= ~(0x80000000u >> k);
		}
		b = (b & 1) ? (b >> 1) ^ CRC32C_POLY : b >> 1; /* b * x */
	}
	return prod;
}

/* x^(8 n) mod P */
static uint32_t
x_pow_bytes(uint64_t n)
{
	uint32_t r = 0x80000000u, sq; /* x^0 */

	sq = gf_mul(0x40000000u, 0x40000000u); /* x^2 */
	sq = gf_mul(sq, sq);		       /* x^4 */
	sq = gf_mul(sq, sq);		       /* x^8 */
	for (; n != 0; n >>= 1) {
		if (n & 1)
			r = gf_mul(r, sq);
		sq = gf_mul(sq, sq);
	}
	return r;
}

/* c * x^(8 * 4096) mod P, byte by byte: the map is linear in c */
static uint32_t shift_4k[4][256];
static pthread_once_t shift_4k_once = PTHREAD_ONCE_INIT;

static void
shift_4k_init(void)
{
	uint32_t x = x_pow_bytes(4096);

	for (int k = 0; k < 4; k++)
		for (uint32_t v = 0; v < 256; v++)
			shift_4k[k][v] = gf_mul(x, v << (8 * k));
}

uint32_t
sh_crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b)
{
	if (len_b == 4096) {
		pthread_once(&shift_4k_once, shift_4k_init);
		return shift_4k[0][crc_a & 0xff] ^ shift_4k[1][(crc_a >> 8) & 0xff] ^
		       shift_4k[2][(crc_a >> 16) & 0xff] ^ shift_4k[3][crc_a >> 24] ^ crc_b;
	}
	return gf_mul(x_pow_bytes(len_b), crc_a) ^ crc_b;
}

static uint32_t crc_table[256];

static void
crc_table_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
		crc_table[i] = c;
	}
}

uint32_t
sh_crc32c_sw(uint32_t crc, const void *buf, size_t len)
{
	const unsigned char *p = buf;
	uint32_t c = ~crc;

	if (crc_table[1] == 0)
		crc_table_init();
	while (len--)
		c = crc_table[(c ^ *p++) & 0xff] ^ (c >> 8);
	return ~c;
}
