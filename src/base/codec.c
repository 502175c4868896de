// SPDX-License-Identifier: Apache-2.0
/* Growable encoder and bounds-checked decoder (codec.h). */
#include "codec.h"

#include "alloc.h"

void
sh_enc_init(struct sh_enc *e)
{
	memset(e, 0, sizeof(*e));
}

void
sh_enc_fini(struct sh_enc *e)
{
	sh_free(e->p);
	memset(e, 0, sizeof(*e));
}

uint8_t *
sh_enc_reserve(struct sh_enc *e, size_t n)
{
	if (e->err)
		return NULL;
	if (n > e->cap - e->len) {
		size_t cap = e->cap ? e->cap : 256;
		uint8_t *p;

		while (cap - e->len < n) {
			if (cap > SIZE_MAX / 2) {
				e->err = -ENOMEM;
				return NULL;
			}
			cap *= 2;
		}
		p = sh_realloc(e->p, cap);
		if (p == NULL) {
			e->err = -ENOMEM;
			return NULL;
		}
		e->p = p;
		e->cap = cap;
	}
	e->len += n;
	return e->p + e->len - n;
}

void
sh_enc_bytes(struct sh_enc *e, const void *b, size_t n)
{
	uint8_t *d = n ? sh_enc_reserve(e, n) : NULL;

	if (d != NULL)
		memcpy(d, b, n);
}

void
sh_enc_str(struct sh_enc *e, const char *s)
{
	size_t n = s ? strlen(s) : 0;

	if (n > UINT16_MAX) {
		if (!e->err)
			e->err = -EINVAL;
		return;
	}
	sh_enc_u16(e, (uint16_t)n);
	sh_enc_bytes(e, s, n);
}

void
sh_enc_blob(struct sh_enc *e, const void *b, size_t n)
{
	if (n > UINT32_MAX) {
		if (!e->err)
			e->err = -EINVAL;
		return;
	}
	sh_enc_u32(e, (uint32_t)n);
	sh_enc_bytes(e, b, n);
}

uint8_t *
sh_enc_take(struct sh_enc *e, size_t *len)
{
	uint8_t *p = e->p;

	*len = e->len;
	memset(e, 0, sizeof(*e));
	return p;
}

const uint8_t *
sh_dec_bytes(struct sh_dec *d, size_t n)
{
	const uint8_t *p;

	if (d->err)
		return NULL;
	if (n > d->len - d->off) {
		d->err = -EBADMSG;
		return NULL;
	}
	p = d->p + d->off;
	d->off += n;
	return p;
}

void
sh_dec_str(struct sh_dec *d, char *buf, size_t cap)
{
	size_t n = sh_dec_u16(d);
	const uint8_t *s;

	buf[0] = '\0';
	if (n >= cap) {
		if (!d->err)
			d->err = -EBADMSG;
		return;
	}
	s = sh_dec_bytes(d, n);
	if (s == NULL)
		return;
	if (memchr(s, '\0', n) != NULL) {
		d->err = -EBADMSG;
		return;
	}
	memcpy(buf, s, n);
	buf[n] = '\0';
}

const uint8_t *
sh_dec_blob(struct sh_dec *d, size_t max, size_t *len)
{
	size_t n = sh_dec_u32(d);

	*len = 0;
	if (n > max) {
		if (!d->err)
			d->err = -EBADMSG;
		return NULL;
	}
	*len = n;
	return sh_dec_bytes(d, n);
}

void
sh_dec_end(struct sh_dec *d)
{
	if (!d->err && d->off != d->len)
		d->err = -EBADMSG;
}
