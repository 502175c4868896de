// SPDX-License-Identifier: Apache-2.0
/*
 * bench/ec: erasure coding speed on one core, against memcpy of the same
 * bytes in the same run. 4+2 and 8+2 and 16+4 with 128 KiB fragments:
 * encode (data in, parity out) and decode of P lost data fragments, in
 * GiB/s of stripe data. Prints, last,
 * BENCH ec {"encode_4p2_gib_s":X,"decode_4p2_gib_s":X,"memcpy_gib_s":X,"encode_vs_memcpy":R}
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../src/data/ec.h"
#include "bench.h"

#define FRAG (128u << 10)

/* GiB/s of data bytes through fn for about a second. */
static double
rate(void (*fn)(void *), void *arg, size_t bytes_per_call)
{
	double t0 = bench_now(), dt;
	unsigned long calls = 0;

	do {
		for (int i = 0; i < 16; i++)
			fn(arg);
		calls += 16;
		dt = bench_now() - t0;
	} while (dt < 1.0);
	return (double)calls * (double)bytes_per_call / dt / (1u << 30);
}

struct job {
	struct ec_code c;
	struct ec_decoder dec;
	uint8_t *frag[EC_N_MAX];
	uint8_t *copy;
};

static void
do_encode(void *arg)
{
	struct job *j = arg;

	ec_encode(&j->c, FRAG, (const uint8_t *const *)j->frag, j->frag + j->c.d);
}

static void
do_decode(void *arg)
{
	struct job *j = arg;

	ec_decode(&j->c, &j->dec, FRAG, j->frag);
}

static void
do_memcpy(void *arg)
{
	struct job *j = arg;

	for (unsigned i = 0; i < j->c.d; i++)
		memcpy(j->copy + (size_t)i * FRAG, j->frag[i], FRAG);
}

int
main(void)
{
	static const unsigned schemes[][2] = { { 4, 2 }, { 8, 2 }, { 16, 4 } };
	double enc42 = 0, dec42 = 0, mc = 0;

	for (size_t s = 0; s < 3; s++) {
		struct job j;
		unsigned d = schemes[s][0], p = schemes[s][1];
		double e, dd, m;

		ec_code_init(&j.c, d, p);
		for (unsigned i = 0; i < d + p; i++) {
			j.frag[i] = aligned_alloc(64, FRAG);
			for (unsigned k = 0; k < FRAG; k++)
				j.frag[i][k] = (uint8_t)(k * 31 + i);
		}
		j.copy = aligned_alloc(64, (size_t)d * FRAG);
		ec_decoder_init(&j.c, &j.dec, (1u << p) - 1); /* the first p data fragments lost */
		e = rate(do_encode, &j, (size_t)d * FRAG);
		dd = rate(do_decode, &j, (size_t)d * FRAG);
		m = rate(do_memcpy, &j, (size_t)d * FRAG);
		printf("%2u+%u  encode %6.2f GiB/s   decode (%u lost) %6.2f GiB/s   memcpy %6.2f "
		       "GiB/s\n",
		       d, p, e, p, dd, m);
		if (s == 0) {
			enc42 = e;
			dec42 = dd;
			mc = m;
		}
		for (unsigned i = 0; i < d + p; i++)
			free(j.frag[i]);
		free(j.copy);
	}
	printf(
	    "BENCH ec {\"encode_4p2_gib_s\":%.2f,\"decode_4p2_gib_s\":%.2f,\"memcpy_gib_s\":%.2f,"
	    "\"encode_vs_memcpy\":%.3f}\n",
	    enc42, dec42, mc, enc42 / mc);
	return 0;
}
