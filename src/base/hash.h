/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Non-cryptographic hashing: a 64-bit hash of bytes (XXH64, from its public
 * specification) and a 64-bit integer mixer. Stable across versions and
 * machines: placement (bucket of a directory entry) depends on it, so it is
 * part of the on-disk and wire contract. Never change its output.
 */
#ifndef SH_BASE_HASH_H
#define SH_BASE_HASH_H

#include <stddef.h>
#include <stdint.h>

uint64_t sh_hash64(const void *data, size_t len, uint64_t seed);

static inline uint64_t
sh_hash_u64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return x;
}

#endif /* SH_BASE_HASH_H */
