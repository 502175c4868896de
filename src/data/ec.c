// SPDX-License-Identifier: Apache-2.0
/* Reed-Solomon (Cauchy) erasure coding with ISA-L (ec.h). */
#include <errno.h>
#include <isa-l/erasure_code.h>
#include <stdbool.h>
#include <string.h>

#include "ec.h"

int
ec_code_init(struct ec_code *c, unsigned d, unsigned p)
{
	if (d < EC_D_MIN || d > EC_D_MAX || p < 1 || p > EC_P_MAX)
		return -EINVAL;
	memset(c, 0, sizeof(*c));
	c->d = d;
	c->p = p;
	/* identity on top: data fragments are the data; Cauchy rows below: any d rows invert */
	gf_gen_cauchy1_matrix(c->matrix, (int)(d + p), (int)d);
	ec_init_tables((int)d, (int)p, c->matrix + d * d, c->enc_tables);
	return 0;
}

void
ec_encode(const struct ec_code *c, size_t len, const uint8_t *const *data, uint8_t **parity)
{
	ec_encode_data((int)len, (int)c->d, (int)c->p, (unsigned char *)c->enc_tables,
		       (unsigned char **)data, parity);
}

int
ec_decoder_init(const struct ec_code *c, struct ec_decoder *dec, uint32_t missing)
{
	unsigned d = c->d, n = c->d + c->p, k = 0, nmiss = 0;
	uint8_t b[EC_D_MAX * EC_D_MAX], inv[EC_D_MAX * EC_D_MAX];
	uint8_t rows[EC_N_MAX * EC_D_MAX];

	memset(dec, 0, sizeof(*dec));
	if (missing == 0 || (missing >> n) != 0)
		return -EINVAL;
	for (unsigned i = 0; i < n; i++)
		nmiss += missing >> i & 1;
	if (nmiss > c->p)
		return -EINVAL;
	/* the first d fragments present are the sources */
	for (unsigned i = 0; i < n && k < d; i++)
		if (!(missing >> i & 1)) {
			dec->src[k] = (uint8_t)i;
			memcpy(b + k * d, c->matrix + i * d, d);
			k++;
		}
	if (gf_invert_matrix(b, inv, (int)d) != 0)
		return -EINVAL; /* cannot happen with a Cauchy matrix */
	/* a missing data fragment is a row of the inverse; a parity one its row times it */
	k = 0;
	for (unsigned i = 0; i < n; i++) {
		if (!(missing >> i & 1))
			continue;
		if (i < d) {
			memcpy(rows + k * d, inv + i * d, d);
		} else {
			for (unsigned j = 0; j < d; j++) {
				uint8_t s = 0;

				for (unsigned m = 0; m < d; m++)
					s ^= gf_mul(c->matrix[i * d + m], inv[m * d + j]);
				rows[k * d + j] = s;
			}
		}
		k++;
	}
	ec_init_tables((int)d, (int)nmiss, rows, dec->tables);
	dec->missing = missing;
	dec->nmiss = nmiss;
	dec->ready = true;
	return 0;
}

void
ec_decode(const struct ec_code *c, const struct ec_decoder *dec, size_t len, uint8_t *const *frags)
{
	unsigned char *src[EC_D_MAX], *out[EC_P_MAX];
	unsigned k = 0;

	for (unsigned i = 0; i < c->d; i++)
		src[i] = frags[dec->src[i]];
	for (unsigned i = 0; i < c->d + c->p; i++)
		if (dec->missing >> i & 1)
			out[k++] = frags[i];
	ec_encode_data((int)len, (int)c->d, (int)dec->nmiss, (unsigned char *)dec->tables, src,
		       out);
}
