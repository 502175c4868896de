// SPDX-License-Identifier: Apache-2.0
/* XXH64 written from the xxHash specification (doc/xxhash_spec.md), little-endian reads. */
#include <string.h>

#include "hash.h"

#define P1 0x9E3779B185EBCA87ULL
#define P2 0xC2B2AE3D27D4EB4FULL
#define P3 0x165667B19E3779F9ULL
#define P4 0x85EBCA77C2B2AE63ULL
#define P5 0x27D4EB2F165667C5ULL

static inline uint64_t
rotl64(uint64_t x, int r)
{
	return (x << r) | (x >> (64 - r));
}

static inline uint64_t
rd64(const unsigned char *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return v; /* host is little-endian: see the _Static_assert below */
}

static inline uint32_t
rd32(const unsigned char *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return v;
}

static inline uint64_t
round1(uint64_t acc, uint64_t lane)
{
	acc += lane * P2;
	acc = rotl64(acc, 31);
	return acc * P1;
}

static inline uint64_t
merge(uint64_t acc, uint64_t v)
{
	acc ^= round1(0, v);
	return acc * P1 + P4;
}

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "Shoal assumes a little-endian host");

uint64_t
sh_hash64(const void *data, size_t len, uint64_t seed)
{
	const unsigned char *p = data, *end = p + len;
	uint64_t h;

	if (len >= 32) {
		uint64_t v1 = seed + P1 + P2, v2 = seed + P2, v3 = seed, v4 = seed - P1;

		do {
			v1 = round1(v1, rd64(p));
			v2 = round1(v2, rd64(p + 8));
			v3 = round1(v3, rd64(p + 16));
			v4 = round1(v4, rd64(p + 24));
			p += 32;
		} while (end - p >= 32);
		h = rotl64(v1, 1) + rotl64(v2, 7) + rotl64(v3, 12) + rotl64(v4, 18);
		h = merge(h, v1);
		h = merge(h, v2);
		h = merge(h, v3);
		h = merge(h, v4);
	} else {
		h = seed + P5;
	}
	h += (uint64_t)len;
	while (end - p >= 8) {
		h ^= round1(0, rd64(p));
		h = rotl64(h, 27) * P1 + P4;
		p += 8;
	}
	if (end - p >= 4) {
		h ^= (uint64_t)rd32(p) * P1;
		h = rotl64(h, 23) * P2 + P3;
		p += 4;
	}
	while (p < end) {
		h ^= (*p) * P5;
		h = rotl64(h, 11) * P1;
		p++;
	}
	h ^= h >> 33;
	h *= P2;
	h ^= h >> 29;
	h *= P3;
	h ^= h >> 32;
	return h;
}
