/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Erasure coding of stripes (DESIGN.md §3, §4): D data fragments and P
 * parity fragments, Reed-Solomon over GF(2^8) with a Cauchy matrix (any D
 * of the D+P fragments recover the stripe), through ISA-L.
 *
 * An ec_code is made once per protection scheme (3+2 .. 16+4) and is then
 * read-only: encode and decode can run on many threads at once. Decode
 * tables for an erasure pattern are built on demand into the caller's
 * ec_decoder, so a reader that keeps seeing the same fragments missing
 * (a dead target) builds them once.
 */
#ifndef SH_DATA_EC_H
#define SH_DATA_EC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define EC_D_MIN 2
#define EC_D_MAX 16
#define EC_P_MAX 4
#define EC_N_MAX (EC_D_MAX + EC_P_MAX)

struct ec_code {
	unsigned d, p;
	uint8_t matrix[EC_N_MAX * EC_D_MAX]; /* (d+p) x d: identity, then the parity rows */
	uint8_t enc_tables[32 * EC_D_MAX * EC_P_MAX];
};

/* d data and p parity fragments: -EINVAL outside 2..16 and 1..4. */
int ec_code_init(struct ec_code *c, unsigned d, unsigned p);

/*
 * Parity of one stripe: data[0..d) fragments of len bytes each in,
 * parity[0..p) out (len bytes each). Any len; 32-byte multiples are fastest.
 */
void ec_encode(const struct ec_code *c, size_t len, const uint8_t *const *data, uint8_t **parity);

struct ec_decoder {
	uint32_t missing; /* the erasure pattern the tables are for (bit i: fragment i) */
	unsigned nmiss;
	uint8_t src[EC_D_MAX]; /* the fragments read: d of them, by index */
	uint8_t tables[32 * EC_D_MAX * EC_N_MAX];
	bool ready;
};

/*
 * Prepare to rebuild the fragments in `missing` (bit i: fragment i, data
 * first) from d of the others (the lowest-numbered present ones). -EINVAL
 * when more than p are missing, or none.
 */
int ec_decoder_init(const struct ec_code *c, struct ec_decoder *dec, uint32_t missing);
/*
 * Rebuild: frags[0..d+p) with the present ones filled (len bytes each);
 * the missing ones are written into their buffers (which must exist).
 */
void ec_decode(const struct ec_code *c, const struct ec_decoder *dec, size_t len,
	       uint8_t *const *frags);

#endif /* SH_DATA_EC_H */
