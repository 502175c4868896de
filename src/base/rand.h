/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Deterministic pseudo-random numbers (xoshiro256**, seeded by splitmix64).
 * Not for secrets: env_random() of the real env is. The simulator draws
 * every decision from these so that a seed reproduces a run exactly.
 */
#ifndef SH_BASE_RAND_H
#define SH_BASE_RAND_H

#include <stddef.h>
#include <stdint.h>

struct sh_rand {
	uint64_t s[4];
};

void sh_rand_seed(struct sh_rand *r, uint64_t seed);
uint64_t sh_rand_u64(struct sh_rand *r);
/* Uniform in [0, n); n == 0 returns 0. Unbiased (rejection). */
uint64_t sh_rand_below(struct sh_rand *r, uint64_t n);
/* Uniform in [lo, hi]; requires lo <= hi. */
uint64_t sh_rand_range(struct sh_rand *r, uint64_t lo, uint64_t hi);
/* Uniform double in [0, 1). */
double sh_rand_double(struct sh_rand *r);
/* True with probability p (p <= 0 never, p >= 1 always). */
int sh_rand_chance(struct sh_rand *r, double p);
void sh_rand_fill(struct sh_rand *r, void *buf, size_t len);
/*
 * Text-like bytes: words of a fixed 256-word vocabulary drawn at random,
 * separated by spaces and now and then a newline, the way logs and
 * tokenized corpora look. Compresses about 2x with lz4 (3x with zstd),
 * never more than the vocabulary allows: the benchmarks and tests of data
 * reduction measure against the ratio lz4 gets on the same bytes.
 */
void sh_rand_text(struct sh_rand *r, void *buf, size_t len);
/* One step of splitmix64: a good mixer to derive seeds. */
uint64_t sh_splitmix64(uint64_t *state);

#endif /* SH_BASE_RAND_H */
