// SPDX-License-Identifier: Apache-2.0
/* xoshiro256** by Blackman and Vigna, seeded with splitmix64 (public domain algorithms). */
#include <string.h>

#include "rand.h"

uint64_t
sh_splitmix64(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

void
sh_rand_seed(struct sh_rand *r, uint64_t seed)
{
	uint64_t st = seed;

	for (int i = 0; i < 4; i++)
		r->s[i] = sh_splitmix64(&st);
}

static inline uint64_t
rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

uint64_t
sh_rand_u64(struct sh_rand *r)
{
	uint64_t *s = r->s;
	uint64_t result = rotl(s[1] * 5, 7) * 9;
	uint64_t t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return result;
}

uint64_t
sh_rand_below(struct sh_rand *r, uint64_t n)
{
	uint64_t x, lim;

	if (n == 0)
		return 0;
	lim = -n % n; /* 2^64 mod n: values below it would bias */
	do {
		x = sh_rand_u64(r);
	} while (x < lim);
	return x % n;
}

uint64_t
sh_rand_range(struct sh_rand *r, uint64_t lo, uint64_t hi)
{
	if (hi - lo == UINT64_MAX)
		return sh_rand_u64(r);
	return lo + sh_rand_below(r, hi - lo + 1);
}

double
sh_rand_double(struct sh_rand *r)
{
	return (double)(sh_rand_u64(r) >> 11) * 0x1.0p-53;
}

int
sh_rand_chance(struct sh_rand *r, double p)
{
	if (p <= 0.0)
		return 0;
	if (p >= 1.0)
		return 1;
	return sh_rand_double(r) < p;
}

void
sh_rand_fill(struct sh_rand *r, void *buf, size_t len)
{
	unsigned char *p = buf;
	uint64_t x;

	while (len >= 8) {
		x = sh_rand_u64(r);
		memcpy(p, &x, 8);
		p += 8;
		len -= 8;
	}
	if (len > 0) {
		x = sh_rand_u64(r);
		memcpy(p, &x, len);
	}
}

void
sh_rand_text(struct sh_rand *r, void *buf, size_t len)
{
	static const char syl[16][4] = { "ka", "lo", "mi", "ne", "ru", "sa", "to", "vi",
					 "an", "el", "or", "us", "ph", "st", "qu", "ex" };
	uint8_t *p = buf;
	size_t at = 0;

	while (at < len) {
		/* a word: two to four syllables from 8 random bits (256 words) */
		uint64_t w = sh_rand_u64(r);
		unsigned nsyl = 2 + (unsigned)(w >> 8) % 3, v = (unsigned)w & 0xFF;
		char word[16];
		size_t wl = 0;

		for (unsigned i = 0; i < nsyl; i++) {
			const char *s = syl[(v >> (2 * i) ^ i * 5) & 15];

			word[wl++] = s[0];
			word[wl++] = s[1];
		}
		word[wl++] = (w >> 16) % 12 == 0 ? '\n' : ' ';
		for (size_t i = 0; i < wl && at < len; i++)
			p[at++] = (uint8_t)word[i];
	}
}
