// SPDX-License-Identifier: Apache-2.0
/* A metadata group's file-system version and kept snapshots (meta_version.h). */
#include <errno.h>
#include <string.h>

#include "meta_extent.h"
#include "meta_version.h"

#define FORMAT 3 /* (1: before restores; 2: before branches) */

void
meta_version_init(struct meta_version *v)
{
	const uint16_t *buckets = v->buckets;
	unsigned nb = v->nb;

	memset(v, 0, offsetof(struct meta_version, keep));
	v->ver = 1;
	v->buckets = buckets;
	v->nb = nb;
}

void
meta_version_copy(struct meta_version *dst, const struct meta_version *src)
{
	memcpy(dst, src, offsetof(struct meta_version, keep));
	memcpy(dst->keep, src->keep, src->nkeep * sizeof(src->keep[0]));
}

int
meta_version_encode(const struct meta_version *v, uint8_t *out, size_t cap)
{
	struct sh_enc e;
	int rc;

	sh_enc_init(&e);
	sh_enc_u8(&e, FORMAT);
	sh_enc_u64(&e, v->ver);
	sh_enc_u64(&e, v->gen);
	sh_enc_u64(&e, v->settled);
	sh_enc_u32(&e, v->cursor);
	sh_enc_u16(&e, v->klen);
	sh_enc_bytes(&e, v->key, v->klen);
	sh_enc_u16(&e, (uint16_t)v->nkeep);
	for (unsigned i = 0; i < v->nkeep; i++)
		sh_enc_u64(&e, v->keep[i]);
	sh_enc_u32(&e, v->repoch);
	sh_enc_u32(&e, v->rdoing);
	sh_enc_u64(&e, v->rver);
	sh_enc_u32(&e, v->rcursor);
	sh_enc_u16(&e, v->rklen);
	sh_enc_bytes(&e, v->rkey, v->rklen);
	sh_enc_u16(&e, v->btop);
	sh_enc_u16(&e, (uint16_t)v->nbranch);
	for (unsigned i = 0; i < v->nbranch; i++) {
		const struct meta_vbranch *x = &v->branch[i];

		sh_enc_u16(&e, x->id);
		sh_enc_u64(&e, x->base);
		sh_enc_u64(&e, x->ver);
		sh_enc_u8(&e, x->dropping);
		sh_enc_u32(&e, x->cursor);
		sh_enc_u16(&e, x->klen);
		sh_enc_bytes(&e, x->key, x->klen);
	}
	rc = sh_enc_error(&e);
	if (rc == 0 && e.len > cap)
		rc = -EOVERFLOW;
	if (rc == 0) {
		memcpy(out, e.p, e.len);
		rc = (int)e.len;
	}
	sh_enc_fini(&e);
	return rc;
}

int
meta_version_decode(const uint8_t *b, size_t len, struct meta_version *v)
{
	struct meta_version n = { .buckets = v->buckets, .nb = v->nb };
	struct sh_dec d;
	const uint8_t *key;
	uint8_t format;

	sh_dec_init(&d, b, len);
	format = sh_dec_u8(&d);
	if (format < 1 || format > FORMAT)
		return -EBADMSG;
	n.ver = sh_dec_u64(&d);
	n.gen = sh_dec_u64(&d);
	n.settled = sh_dec_u64(&d);
	n.cursor = sh_dec_u32(&d);
	n.klen = sh_dec_u16(&d);
	if (n.klen > META_KEY_MAX)
		return -EBADMSG;
	key = sh_dec_bytes(&d, n.klen);
	if (key != NULL)
		memcpy(n.key, key, n.klen);
	n.nkeep = sh_dec_u16(&d);
	if (n.nkeep > META_KEEP_MAX)
		return -EBADMSG;
	for (unsigned i = 0; i < n.nkeep; i++) {
		n.keep[i] = sh_dec_u64(&d);
		if (i > 0 && n.keep[i] <= n.keep[i - 1])
			return -EBADMSG;
	}
	if (format >= 2) {
		n.repoch = sh_dec_u32(&d);
		n.rdoing = sh_dec_u32(&d);
		n.rver = sh_dec_u64(&d);
		n.rcursor = sh_dec_u32(&d);
		n.rklen = sh_dec_u16(&d);
		if (n.rklen > META_KEY_MAX || (n.rdoing != 0 && n.rdoing <= n.repoch))
			return -EBADMSG;
		key = sh_dec_bytes(&d, n.rklen);
		if (key != NULL)
			memcpy(n.rkey, key, n.rklen);
	}
	if (format >= 3) {
		n.btop = sh_dec_u16(&d);
		n.nbranch = sh_dec_u16(&d);
		if (n.nbranch > META_BRANCH_MAX)
			return -EBADMSG;
		for (unsigned i = 0; i < n.nbranch; i++) {
			struct meta_vbranch *x = &n.branch[i];
			uint8_t dropping;

			x->id = sh_dec_u16(&d);
			x->base = sh_dec_u64(&d);
			x->ver = sh_dec_u64(&d);
			dropping = sh_dec_u8(&d);
			x->cursor = sh_dec_u32(&d);
			x->klen = sh_dec_u16(&d);
			/* ascending, each on a lower branch's version, writing at its own */
			if (x->id == 0 || (i > 0 && x->id <= n.branch[i - 1].id) || x->base == 0 ||
			    meta_ver_branch(x->base) >= x->id || meta_ver_branch(x->ver) != x->id ||
			    dropping > 1 || x->klen > META_KEY_MAX || x->id > n.btop)
				return -EBADMSG;
			x->dropping = dropping;
			key = sh_dec_bytes(&d, x->klen);
			if (key != NULL)
				memcpy(x->key, key, x->klen);
		}
	}
	sh_dec_end(&d);
	if (sh_dec_error(&d) || n.ver == 0 || n.settled > n.gen)
		return -EBADMSG;
	meta_version_copy(v, &n);
	return 0;
}

static void
version_key(struct meta_key *k, uint16_t first)
{
	meta_key_id(k, first, META_K_VERSION, 0);
}

int
meta_version_load(struct meta_txn *t, uint16_t first, struct meta_version *v)
{
	static _Thread_local uint8_t val[META_VERSION_VAL_MAX];
	struct meta_key k;
	size_t len;
	int rc;

	version_key(&k, first);
	rc = meta_get(t, &k, META_VER_NEWEST, val, sizeof(val), &len);
	if (rc == -ENOENT) {
		meta_version_init(v);
		return 0;
	}
	return rc < 0 ? rc : meta_version_decode(val, len, v);
}

int
meta_version_store(struct meta_txn *t, uint16_t first, const struct meta_version *v)
{
	static _Thread_local uint8_t val[META_VERSION_VAL_MAX];
	struct meta_key k;
	int len = meta_version_encode(v, val, sizeof(val));

	if (len < 0)
		return len;
	version_key(&k, first);
	return meta_put(t, &k, 1, val, (size_t)len, NULL);
}

int
meta_keep_decode(const uint8_t *b, size_t len, uint64_t *v, unsigned *n)
{
	if (len % 8 != 0 || len / 8 > META_KEEP_MAX)
		return -EBADMSG;
	*n = (unsigned)(len / 8);
	for (unsigned i = 0; i < *n; i++) {
		uint64_t x = meta_le64_get(b + i * 8);

		if (x == 0 || (i > 0 && x <= v[i - 1]))
			return -EBADMSG;
		v[i] = x;
	}
	return 0;
}

const struct meta_vbranch *
meta_version_branch(const struct meta_version *v, uint16_t id)
{
	for (unsigned i = 0; i < v->nbranch; i++)
		if (v->branch[i].id == id)
			return &v->branch[i];
	return NULL;
}

uint64_t
meta_version_of(const struct meta_version *v, uint64_t ver)
{
	const struct meta_vbranch *x;

	if (meta_ver_branch(ver) == 0)
		return ver > v->ver ? ver : v->ver;
	x = meta_version_branch(v, meta_ver_branch(ver));
	return x != NULL && !x->dropping ? x->ver : 0;
}

/* Every version of old (ascending) is in new (ascending). */
static bool
keeps_all(const uint64_t *new, unsigned nn, const uint64_t *old, unsigned no)
{
	unsigned i = 0;

	for (unsigned k = 0; k < no; k++) {
		while (i < nn && new[i] < old[k])
			i++;
		if (i == nn || new[i] != old[k])
			return false;
	}
	return true;
}

static int
take_version(struct meta_bucket *b, const struct meta_cmd *c)
{
	struct meta_version *vs = b->vs;
	uint64_t keep[META_KEEP_MAX];
	unsigned n;

	if (vs->nb == 0 || b->bucket != vs->buckets[0])
		return -EINVAL; /* the group's record is at its first bucket */
	if (meta_keep_decode(c->data, c->dlen, keep, &n) < 0 || meta_ver_branch(c->ver) != 0)
		return -EINVAL;
	for (unsigned i = 0; i < vs->nbranch; i++)
		if (!keeps_all(keep, n, &vs->branch[i].base, 1))
			return -EBUSY; /* a branch stands on it: it stays until the branch goes */
	if (c->ver <= vs->ver && n == vs->nkeep && memcmp(keep, vs->keep, n * sizeof(keep[0])) == 0)
		return -EALREADY;
	if (c->ver > vs->ver)
		vs->ver = c->ver;
	if (n != vs->nkeep || memcmp(keep, vs->keep, n * sizeof(keep[0])) != 0) {
		bool more = keeps_all(keep, n, vs->keep, vs->nkeep), was = vs->settled == vs->gen;

		memcpy(vs->keep, keep, n * sizeof(keep[0]));
		vs->nkeep = n;
		vs->gen++;
		if (!more) {
			vs->cursor = 0; /* settle every bucket again, from the start */
			vs->klen = 0;
		} else if (was) {
			/* a snapshot more (none less): nothing can go that could not before */
			vs->settled = vs->gen;
		}
		/* (else settling goes on where it was: keeping more is never wrong) */
	}
	return meta_version_store(b->t, vs->buckets[0], vs);
}

static int
settle_step(struct meta_bucket *b, const struct meta_cmd *c, struct meta_result *r)
{
	struct meta_version *vs = b->vs;
	uint8_t next[META_KEY_MAX];
	uint64_t dropped = 0;
	struct meta_key pk;
	size_t nlen;
	int rc;

	if (vs->settled == vs->gen)
		return -EALREADY;
	if (c->upto != vs->gen || vs->cursor >= vs->nb || b->bucket != vs->buckets[vs->cursor])
		return -ESTALE;
	if (c->flags == 0 || c->flags > META_SETTLE_MAX)
		return -EINVAL;
	pk.b[0] = (uint8_t)(b->bucket >> 8);
	pk.b[1] = (uint8_t)b->bucket;
	pk.len = 2;
	rc = meta_settle(b->t, &pk, vs->klen ? vs->key : NULL, vs->klen, c->flags, b->keep, next,
			 &nlen, &dropped);
	if (rc < 0)
		return rc;
	if (nlen > 0) {
		memcpy(vs->key, next, nlen);
		vs->klen = (uint16_t)nlen;
	} else {
		vs->klen = 0;
		if (++vs->cursor == vs->nb)
			vs->settled = vs->gen;
	}
	r->aux = dropped;
	return meta_version_store(b->t, vs->buckets[0], vs);
}

static bool
kept(const struct meta_version *vs, uint64_t ver)
{
	for (unsigned i = 0; i < vs->nkeep; i++)
		if (vs->keep[i] == ver)
			return true;
	return false;
}

static int
restore_step(struct meta_bucket *b, const struct meta_cmd *c, struct meta_result *r)
{
	struct meta_version *vs = b->vs;
	uint8_t next[META_KEY_MAX];
	uint64_t ver = 0, changed = 0;
	unsigned n;
	size_t nlen;
	int rc;

	if (c->dlen != 8 || c->upto == 0 || c->upto > UINT32_MAX || c->flags == 0 ||
	    c->flags > META_RESTORE_MAX)
		return -EINVAL;
	if (meta_keep_decode(c->data, c->dlen, &ver, &n) < 0)
		ver = 0; /* (version 0: kept by none) */
	if (c->upto <= vs->repoch)
		return -EALREADY;
	if (!kept(vs, ver))
		return -EINVAL; /* what it reads may be gone already */
	if (c->upto != vs->rdoing) {
		/* a restore begins (or a newer one takes over): from the first bucket */
		if (vs->nb == 0 || b->bucket != vs->buckets[0])
			return -ESTALE;
		vs->rdoing = (uint32_t)c->upto;
		vs->rver = ver;
		vs->rcursor = 0;
		vs->rklen = 0;
	} else if (ver != vs->rver || vs->rcursor >= vs->nb ||
		   b->bucket != vs->buckets[vs->rcursor]) {
		return -ESTALE;
	}
	rc = meta_restore(b, ver, vs->rklen ? vs->rkey : NULL, vs->rklen, c->flags, c->now, next,
			  &nlen, &changed);
	if (rc < 0)
		return rc;
	if (nlen > 0) {
		memcpy(vs->rkey, next, nlen);
		vs->rklen = (uint16_t)nlen;
	} else {
		vs->rklen = 0;
		if (++vs->rcursor == vs->nb) {
			vs->repoch = vs->rdoing;
			vs->rdoing = 0;
		}
	}
	r->aux = changed;
	return meta_version_store(b->t, vs->buckets[0], vs);
}

static struct meta_vbranch *
find_branch(struct meta_version *vs, uint64_t id)
{
	return id > UINT16_MAX ? NULL
			       : (struct meta_vbranch *)meta_version_branch(vs, (uint16_t)id);
}

/* META_OP_BRANCH: a branch on a kept snapshot comes, or (base 0) starts to go. */
static int
branch_step(struct meta_bucket *b, const struct meta_cmd *c)
{
	struct meta_version *vs = b->vs;
	struct meta_vbranch *x;
	uint64_t base;
	unsigned i;

	if (vs->nb == 0 || b->bucket != vs->buckets[0] || c->dlen != 8 || c->upto == 0 ||
	    c->upto > UINT16_MAX)
		return -EINVAL;
	base = meta_le64_get(c->data);
	x = find_branch(vs, c->upto);
	if (base == 0) {
		if (x == NULL && c->upto > vs->btop) {
			/* one this group never served goes: fenced, so a late add is refused */
			vs->btop = (uint16_t)c->upto;
			return meta_version_store(b->t, vs->buckets[0], vs);
		}
		if (x == NULL || x->dropping)
			return -EALREADY; /* gone, or going */
		x->dropping = true;
		x->cursor = 0;
		x->klen = 0;
		return meta_version_store(b->t, vs->buckets[0], vs);
	}
	if (x != NULL)
		return x->base == base && !x->dropping ? -EALREADY : -EEXIST;
	if (c->upto <= vs->btop)
		return -ESTALE; /* it was here, and went: a number is never used again */
	if (meta_ver_branch(base) != 0 || !kept(vs, base))
		return -EINVAL; /* on a snapshot the group keeps (clones of clones: not yet) */
	if (vs->nbranch == META_BRANCH_MAX)
		return -ENOSPC;
	for (i = vs->nbranch; i > 0 && vs->branch[i - 1].id > c->upto; i--)
		vs->branch[i] = vs->branch[i - 1];
	vs->branch[i] = (struct meta_vbranch){
		.id = (uint16_t)c->upto,
		.base = base,
		.ver = c->upto << META_BRANCH_SHIFT | 1,
	};
	vs->nbranch++;
	vs->btop = (uint16_t)c->upto;
	return meta_version_store(b->t, vs->buckets[0], vs);
}

/* META_OP_BRANCH_DROP: a step of a going branch's drop, at the bucket its cursor names. */
static int
branch_drop_step(struct meta_bucket *b, const struct meta_cmd *c, struct meta_result *r)
{
	struct meta_version *vs = b->vs;
	struct meta_vbranch *x = find_branch(vs, c->upto);
	struct meta_keep kp = { NULL, 0, meta_branch_moved, b, 0 };
	uint8_t next[META_KEY_MAX];
	uint64_t dropped = 0;
	struct meta_key pk;
	size_t nlen;
	int rc;

	if (c->flags == 0 || c->flags > META_DROP_MAX)
		return -EINVAL;
	if (x == NULL)
		return -EALREADY;
	if (!x->dropping || x->cursor >= vs->nb || b->bucket != vs->buckets[x->cursor])
		return -ESTALE;
	kp.branch = x->id;
	if (x->klen == 0) {
		/* the bucket's first step: the branch's orphans and leases here go */
		rc = meta_branch_forget(b, x->id);
		if (rc < 0)
			return rc;
	}
	pk.b[0] = (uint8_t)(b->bucket >> 8);
	pk.b[1] = (uint8_t)b->bucket;
	pk.len = 2;
	rc = meta_drop_branch(b->t, &pk, x->klen ? x->key : NULL, x->klen, c->flags, &kp, next,
			      &nlen, &dropped);
	if (rc < 0)
		return rc;
	if (nlen > 0) {
		memcpy(x->key, next, nlen);
		x->klen = (uint16_t)nlen;
	} else if (++x->cursor == vs->nb) {
		/* every bucket done: the branch is gone from the record */
		unsigned i = (unsigned)(x - vs->branch);

		memmove(x, x + 1, (vs->nbranch - i - 1) * sizeof(*x));
		vs->nbranch--;
	} else {
		x->klen = 0;
	}
	r->aux = dropped;
	return meta_version_store(b->t, vs->buckets[0], vs);
}

bool
meta_version_op(uint8_t op)
{
	return op == META_OP_VERSION || op == META_OP_SETTLE || op == META_OP_RESTORE ||
	       op == META_OP_BRANCH || op == META_OP_BRANCH_DROP;
}

int
meta_version_apply(struct meta_bucket *b, const struct meta_cmd *c, struct meta_result *r)
{
	if (b->vs == NULL)
		return -EINVAL;
	switch (c->op) {
	case META_OP_VERSION:
		return take_version(b, c);
	case META_OP_SETTLE:
		return settle_step(b, c, r);
	case META_OP_BRANCH:
		return branch_step(b, c);
	case META_OP_BRANCH_DROP:
		return branch_drop_step(b, c, r);
	default:
		return restore_step(b, c, r);
	}
}
