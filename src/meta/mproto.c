// SPDX-License-Identifier: Apache-2.0
/* The metadata protocol's codecs (mproto.h). */
#include <string.h>

#include "mproto.h"

#define MP_WIRE 1 /* the format of requests and replies */

static const char *const kind_names[MP_KIND_MAX] = {
#define MP_KIND_NAME(id, num, name) [num] = name,
	MP_KINDS(MP_KIND_NAME)
#undef MP_KIND_NAME
};

const char *
mp_kind_name(unsigned kind)
{
	return kind < MP_KIND_MAX ? kind_names[kind] : NULL;
}

int
mp_req_encode(struct sh_enc *e, const struct mp_req *r)
{
	if (r->kind == 0 || r->kind >= MP_KIND_MAX || r->nlen > META_NAME_MAX)
		return -EINVAL;
	sh_enc_u8(e, MP_WIRE);
	sh_enc_u8(e, r->kind);
	sh_enc_u32(e, r->fs);
	sh_enc_u16(e, r->bucket);
	sh_enc_u64(e, r->ino);
	sh_enc_u32(e, r->max);
	sh_enc_u64(e, r->off);
	sh_enc_u64(e, r->len);
	sh_enc_u16(e, r->nlen);
	sh_enc_bytes(e, r->name, r->nlen);
	sh_enc_blob(e, r->data, r->dlen);
	if (r->at != 0)
		sh_enc_u64(e, r->at);
	return sh_enc_error(e);
}

int
mp_req_decode(const uint8_t *b, size_t len, struct mp_req *r)
{
	struct sh_dec d;
	const uint8_t *p;

	memset(r, 0, sizeof(*r));
	sh_dec_init(&d, b, len);
	if (sh_dec_u8(&d) != MP_WIRE)
		return -EBADMSG;
	r->kind = sh_dec_u8(&d);
	r->fs = sh_dec_u32(&d);
	r->bucket = sh_dec_u16(&d);
	r->ino = sh_dec_u64(&d);
	r->max = sh_dec_u32(&d);
	r->off = sh_dec_u64(&d);
	r->len = sh_dec_u64(&d);
	r->nlen = sh_dec_u16(&d);
	if (r->nlen > META_NAME_MAX)
		return -EBADMSG;
	p = sh_dec_bytes(&d, r->nlen);
	if (p != NULL)
		memcpy(r->name, p, r->nlen);
	r->name[r->nlen] = '\0';
	r->data = sh_dec_blob(&d, len, &r->dlen);
	if (!sh_dec_error(&d) && sh_dec_left(&d) > 0) {
		r->at = sh_dec_u64(&d);
		if (r->at == 0)
			return -EBADMSG;
	}
	sh_dec_end(&d);
	if (sh_dec_error(&d) || r->kind == 0 || r->kind >= MP_KIND_MAX)
		return -EBADMSG;
	return 0;
}

int
mp_reply_encode(struct sh_enc *e, const struct mp_reply *r)
{
	uint8_t in[META_INODE_LEN], de[META_DENTRY_LEN];

	sh_enc_u8(e, MP_WIRE);
	sh_enc_u8(e, r->flags);
	sh_enc_u64(e, r->aux);
	if (r->flags & MP_ATTR) {
		meta_inode_encode(&r->attr, in);
		sh_enc_bytes(e, in, sizeof(in));
	}
	if (r->flags & MP_DENTRY) {
		meta_dentry_encode(&r->dentry, de);
		sh_enc_bytes(e, de, sizeof(de));
	}
	if (r->flags & MP_LEASE)
		meta_lease_put(e, &r->lease);
	sh_enc_blob(e, r->data, r->dlen);
	if (r->ver != 0)
		sh_enc_u64(e, r->ver);
	return sh_enc_error(e);
}

int
mp_reply_decode(const uint8_t *b, size_t len, struct mp_reply *r)
{
	struct sh_dec d;
	const uint8_t *p;

	memset(r, 0, sizeof(*r));
	sh_dec_init(&d, b, len);
	if (sh_dec_u8(&d) != MP_WIRE)
		return -EBADMSG;
	r->flags = sh_dec_u8(&d);
	r->aux = sh_dec_u64(&d);
	if (r->flags & MP_ATTR) {
		p = sh_dec_bytes(&d, META_INODE_LEN);
		if (p == NULL || meta_inode_decode(p, META_INODE_LEN, &r->attr) < 0)
			return -EBADMSG;
	}
	if (r->flags & MP_DENTRY) {
		p = sh_dec_bytes(&d, META_DENTRY_LEN);
		if (p == NULL || meta_dentry_decode(p, META_DENTRY_LEN, &r->dentry) < 0)
			return -EBADMSG;
	}
	if (r->flags & MP_LEASE)
		meta_lease_get(&d, &r->lease);
	r->data = sh_dec_blob(&d, len, &r->dlen);
	if (!sh_dec_error(&d) && sh_dec_left(&d) > 0 && (r->ver = sh_dec_u64(&d)) == 0)
		return -EBADMSG;
	sh_dec_end(&d);
	return sh_dec_error(&d) ? -EBADMSG : 0;
}

void
mp_dirent_put(struct sh_enc *e, const struct meta_dirent *d, const struct meta_inode *attr)
{
	uint8_t in[META_INODE_LEN];

	sh_enc_u64(e, d->ino);
	sh_enc_u8(e, d->type);
	sh_enc_u8(e, (uint8_t)d->len);
	sh_enc_bytes(e, d->name, d->len);
	if (attr == NULL)
		return;
	sh_enc_u8(e, attr->type != 0);
	if (attr->type != 0) {
		meta_inode_encode(attr, in);
		sh_enc_bytes(e, in, sizeof(in));
	}
}

int
mp_dirent_next(struct sh_dec *d, struct meta_dirent *out, struct meta_inode *attr)
{
	const uint8_t *p;
	uint8_t has;

	if (sh_dec_left(d) == 0)
		return 0;
	out->ino = sh_dec_u64(d);
	out->type = sh_dec_u8(d);
	out->len = sh_dec_u8(d);
	p = sh_dec_bytes(d, out->len);
	if (sh_dec_error(d) || p == NULL || out->len == 0)
		return -EBADMSG;
	memcpy(out->name, p, out->len);
	out->name[out->len] = '\0';
	if (attr == NULL)
		return 1;
	memset(attr, 0, sizeof(*attr));
	has = sh_dec_u8(d);
	if (sh_dec_error(d) || has > 1)
		return -EBADMSG;
	if (has) {
		p = sh_dec_bytes(d, META_INODE_LEN);
		if (p == NULL || meta_inode_decode(p, META_INODE_LEN, attr) < 0)
			return -EBADMSG;
	}
	return 1;
}

void
mp_diff_put(struct sh_enc *e, const struct mp_diff_rec *r)
{
	sh_enc_u8(e, r->cursor
			 ? MP_DIFF_CURSOR
			 : (uint8_t)((r->old ? MP_DIFF_OLD : 0) | (r->new ? MP_DIFF_NEW : 0)));
	sh_enc_u16(e, (uint16_t)r->klen);
	sh_enc_bytes(e, r->key, r->klen);
	if (r->cursor)
		return;
	if (r->old != NULL) {
		sh_enc_u32(e, (uint32_t)r->olen);
		sh_enc_bytes(e, r->old, r->olen);
	}
	if (r->new != NULL) {
		sh_enc_u32(e, (uint32_t)r->nlen);
		sh_enc_bytes(e, r->new, r->nlen);
	}
}

/* A record's value as of one side: its length and bytes. */
static const uint8_t *
diff_side(struct sh_dec *d, size_t *len)
{
	*len = sh_dec_u32(d);
	if (sh_dec_error(d) || *len > META_VALUE_MAX)
		return NULL;
	return sh_dec_bytes(d, *len);
}

int
mp_diff_next(struct sh_dec *d, struct mp_diff_rec *out)
{
	uint8_t f;

	memset(out, 0, sizeof(*out));
	if (sh_dec_left(d) == 0)
		return 0;
	f = sh_dec_u8(d);
	out->klen = sh_dec_u16(d);
	if (sh_dec_error(d) || f == 0 || (f & ~(MP_DIFF_OLD | MP_DIFF_NEW | MP_DIFF_CURSOR)) ||
	    ((f & MP_DIFF_CURSOR) && f != MP_DIFF_CURSOR) || out->klen < 3 ||
	    out->klen > META_KEY_MAX)
		return -EBADMSG;
	out->key = sh_dec_bytes(d, out->klen);
	if (out->key == NULL)
		return -EBADMSG;
	out->cursor = f == MP_DIFF_CURSOR;
	if ((f & MP_DIFF_OLD) && (out->old = diff_side(d, &out->olen)) == NULL)
		return -EBADMSG;
	if ((f & MP_DIFF_NEW) && (out->new = diff_side(d, &out->nlen)) == NULL)
		return -EBADMSG;
	return 1;
}

void
mp_recall_encode(struct sh_enc *e, uint32_t fs, const struct mp_key *keys, unsigned n)
{
	sh_enc_u32(e, fs);
	for (unsigned i = 0; i < n; i++) {
		sh_enc_u8(e, keys[i].kind);
		sh_enc_u64(e, keys[i].a);
		sh_enc_u64(e, keys[i].h);
	}
}

int
mp_recall_decode(const uint8_t *b, size_t len,
		 void (*fn)(void *arg, uint32_t fs, const struct mp_key *k), void *arg)
{
	struct sh_dec d;
	uint32_t fs;

	sh_dec_init(&d, b, len);
	fs = sh_dec_u32(&d);
	while (!sh_dec_error(&d) && sh_dec_left(&d) > 0) {
		struct mp_key k;

		k.kind = sh_dec_u8(&d);
		k.a = sh_dec_u64(&d);
		k.h = sh_dec_u64(&d);
		if (sh_dec_error(&d) || (k.kind != MP_KEY_ATTR && k.kind != MP_KEY_DENTRY))
			return -EBADMSG;
		fn(arg, fs, &k);
	}
	return sh_dec_error(&d) ? -EBADMSG : 0;
}
