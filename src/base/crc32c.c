// SPDX-License-Identifier: Apache-2.0
/*
 * CRC-32C through ISA-L's crc32_iscsi(), which takes and returns the raw
 * (non-inverted) register; the inversions here give the standard CRC.
 */
#include <limits.h>
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
