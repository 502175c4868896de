/* SPDX-License-Identifier: Apache-2.0 */
/*
 * CRC-32C (Castagnoli), the checksum of every fragment and packet.
 * Standard parameters (reflected, init and final xor 0xFFFFFFFF), so
 * sh_crc32c(0, "123456789", 9) == 0xE3069283. Chainable: pass the result of
 * one call as crc of the next. Uses ISA-L (SSE4.2/PCLMUL/AVX-512 paths).
 */
#ifndef SH_BASE_CRC32C_H
#define SH_BASE_CRC32C_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

uint32_t sh_crc32c(uint32_t crc, const void *buf, size_t len);
uint32_t sh_crc32c_iov(uint32_t crc, const struct iovec *iov, int iovcnt);
/*
 * The CRC of A followed by B from the CRCs of each and B's length, without
 * reading either again (cheapest for 4 KiB, the store's block).
 */
uint32_t sh_crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b);
/* Portable table-driven version: the reference the fast one is tested against. */
uint32_t sh_crc32c_sw(uint32_t crc, const void *buf, size_t len);

#endif /* SH_BASE_CRC32C_H */
