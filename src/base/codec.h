/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Byte codecs for variable-length records (Raft messages, configuration
 * commands, snapshots): a growable little-endian encoder and a
 * bounds-checked decoder with a sticky error.
 *
 * Encoder: every put appends; on allocation failure the encoder remembers
 * -ENOMEM and later puts do nothing, so a sequence of puts is checked once
 * at the end with sh_enc_error(). Decoder: a get past the end (or a string
 * longer than allowed) sets -EBADMSG, returns zeros from then on, and the
 * caller checks sh_dec_error() once before using what it read.
 */
#ifndef SH_BASE_CODEC_H
#define SH_BASE_CODEC_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct sh_enc {
	uint8_t *p;
	size_t len, cap;
	int err;
};

struct sh_dec {
	const uint8_t *p;
	size_t len, off;
	int err;
};

void sh_enc_init(struct sh_enc *e);
/* Free the bytes (unless taken with sh_enc_take). */
void sh_enc_fini(struct sh_enc *e);
/* Make room for n more bytes; returns where they go, or NULL (err set). */
uint8_t *sh_enc_reserve(struct sh_enc *e, size_t n);
void sh_enc_bytes(struct sh_enc *e, const void *b, size_t n);
/* A string: u16 length then the bytes (no NUL). Longer than 65535: -EINVAL. */
void sh_enc_str(struct sh_enc *e, const char *s);
/* A blob: u32 length then the bytes. */
void sh_enc_blob(struct sh_enc *e, const void *b, size_t n);
/* Hand the bytes to the caller (sh_free them); the encoder is empty again. */
uint8_t *sh_enc_take(struct sh_enc *e, size_t *len);

static inline int
sh_enc_error(const struct sh_enc *e)
{
	return e->err;
}

#define SH_ENC_INT(name, type)                                     \
	static inline void sh_enc_##name(struct sh_enc *e, type v) \
	{                                                          \
		uint8_t *d = sh_enc_reserve(e, sizeof(v));         \
		if (d != NULL)                                     \
			memcpy(d, &v, sizeof(v));                  \
	}
SH_ENC_INT(u8, uint8_t)
SH_ENC_INT(u16, uint16_t)
SH_ENC_INT(u32, uint32_t)
SH_ENC_INT(u64, uint64_t)
#undef SH_ENC_INT

static inline void
sh_dec_init(struct sh_dec *d, const void *p, size_t len)
{
	d->p = p;
	d->len = len;
	d->off = 0;
	d->err = 0;
}

static inline int
sh_dec_error(const struct sh_dec *d)
{
	return d->err;
}

static inline size_t
sh_dec_left(const struct sh_dec *d)
{
	return d->err ? 0 : d->len - d->off;
}

/* n bytes in place (NULL and -EBADMSG if fewer are left). */
const uint8_t *sh_dec_bytes(struct sh_dec *d, size_t n);
/* A string into buf (NUL-terminated); -EBADMSG if it does not fit in cap-1 or holds a NUL. */
void sh_dec_str(struct sh_dec *d, char *buf, size_t cap);
/* A blob in place: its bytes and length; at most max bytes. */
const uint8_t *sh_dec_blob(struct sh_dec *d, size_t max, size_t *len);
/* Fails the decoder with -EBADMSG unless everything was read. */
void sh_dec_end(struct sh_dec *d);

#define SH_DEC_INT(name, type)                                 \
	static inline type sh_dec_##name(struct sh_dec *d)     \
	{                                                      \
		type v = 0;                                    \
		const uint8_t *s = sh_dec_bytes(d, sizeof(v)); \
		if (s != NULL)                                 \
			memcpy(&v, s, sizeof(v));              \
		return v;                                      \
	}
SH_DEC_INT(u8, uint8_t)
SH_DEC_INT(u16, uint16_t)
SH_DEC_INT(u32, uint32_t)
SH_DEC_INT(u64, uint64_t)
#undef SH_DEC_INT

#endif /* SH_BASE_CODEC_H */
