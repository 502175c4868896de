// SPDX-License-Identifier: Apache-2.0
/* Requests applied once: the tags of removes, renames and links (meta_done.h). */
#include "meta_done.h"

static void
by_time_key(struct meta_key *k, uint16_t bucket, uint64_t when, uint64_t tag)
{
	meta_key_id(k, bucket, META_K_DONE_BY_TIME, when);
	meta_be64_put(k->b + k->len, tag);
	k->len += 8;
}

int
meta_done_check(struct meta_bucket *b, uint64_t tag)
{
	struct meta_key k;
	uint8_t v[8];
	size_t n;

	meta_key_id(&k, b->bucket, META_K_DONE, tag);
	return meta_get(b->t, &k, b->ver, v, sizeof(v), &n);
}

int
meta_done_put(struct meta_bucket *b, uint64_t tag, uint64_t now)
{
	struct meta_key k;
	uint8_t v[8], none = 0;
	int rc;

	meta_be64_put(v, now);
	meta_key_id(&k, b->bucket, META_K_DONE, tag);
	rc = meta_put(b->t, &k, b->ver, v, sizeof(v), b->keep);
	if (rc == 0) {
		by_time_key(&k, b->bucket, now, tag);
		rc = meta_put(b->t, &k, b->ver, &none, 1, b->keep);
	}
	return rc;
}

struct old {
	uint64_t before;
	unsigned n;
	uint64_t when[META_DONE_FORGET_MAX], tag[META_DONE_FORGET_MAX];
};

static int
on_old(void *arg, const uint8_t *key, size_t klen, const void *val, size_t vlen)
{
	struct old *o = arg;
	uint64_t when;

	(void)val;
	(void)vlen;
	if (klen != 3 + 8 + 8)
		return -EBADMSG;
	when = meta_be64_get(key + 3);
	if (when >= o->before || o->n == META_DONE_FORGET_MAX)
		return 1; /* in time order: the rest are younger */
	o->when[o->n] = when;
	o->tag[o->n++] = meta_be64_get(key + 11);
	return 0;
}

int
meta_done_forget(struct meta_bucket *b, uint64_t before, bool dry, unsigned *n)
{
	struct old *o = sh_calloc(1, sizeof(*o));
	struct meta_key pk, k;
	int rc;

	*n = 0;
	if (o == NULL)
		return -ENOMEM;
	o->before = before;
	meta_key_kind(&pk, b->bucket, META_K_DONE_BY_TIME);
	rc = meta_scan(b->t, &pk, NULL, 0, b->ver, on_old, o);
	for (unsigned i = 0; rc >= 0 && !dry && i < o->n; i++) {
		by_time_key(&k, b->bucket, o->when[i], o->tag[i]);
		rc = meta_del(b->t, &k, b->ver, b->keep);
		if (rc == 0) {
			meta_key_id(&k, b->bucket, META_K_DONE, o->tag[i]);
			rc = meta_del(b->t, &k, b->ver, b->keep);
		}
	}
	*n = o->n;
	sh_free(o);
	return rc < 0 ? rc : 0;
}
