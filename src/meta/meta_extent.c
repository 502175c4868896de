// SPDX-License-Identifier: Apache-2.0
/* A file's extent map, stripe references and the reclaim queue (meta_extent.h). */
#include <string.h>

#include "../data/reduce.h"
#include "meta_dedup.h"
#include "meta_extent.h"
#include "meta_int.h"

#define EXTENT_RAW     1
#define EXTENT_ENCODED 2
#define EXTENT_DEDUP   3
#define BATCH	       64
#define FILE_MAX       (1ull << 63)

int
meta_extent_encode(const struct meta_extent *e, uint8_t *out, size_t cap)
{
	unsigned n = (unsigned)e->d + e->p;
	size_t want = e->dedup ? META_EXTENT_LEN_V3(n)
			       : (e->enc ? META_EXTENT_LEN_V2(n) : META_EXTENT_LEN(n));
	uint8_t *p = out;

	if (n == 0 || n > META_FRAGS_MAX || cap < want)
		return -EINVAL;
	*p++ = e->dedup ? EXTENT_DEDUP : e->enc ? EXTENT_ENCODED : EXTENT_RAW;
	*p++ = e->d;
	*p++ = e->p;
	memcpy(p, &e->frag, 4);
	p += 4;
	memcpy(p, &e->len, 8);
	memcpy(p + 8, &e->stripe, 8);
	memcpy(p + 16, &e->soff, 8);
	p += 24;
	if (e->enc || e->dedup) {
		*p++ = e->enc;
		memcpy(p, &e->slen, 4);
		memcpy(p + 4, &e->blen, 4);
		memcpy(p + 8, &e->boff, 4);
		p += 12;
	}
	if (e->dedup) {
		memcpy(p, e->fp, 32);
		p += 32;
	}
	memcpy(p, e->targets, 8 * (size_t)n);
	return (int)want;
}

int
meta_extent_decode(const uint8_t *b, size_t len, struct meta_extent *e)
{
	uint64_t data;
	unsigned n;
	size_t at = 31;

	memset(e, 0, sizeof(*e));
	if (len < META_EXTENT_LEN(1) || b[0] < EXTENT_RAW || b[0] > EXTENT_DEDUP)
		return -EBADMSG;
	e->d = b[1];
	e->p = b[2];
	n = (unsigned)e->d + e->p;
	if (e->d == 0 || n > META_FRAGS_MAX ||
	    len != (b[0] == EXTENT_RAW	     ? META_EXTENT_LEN(n)
		    : b[0] == EXTENT_ENCODED ? META_EXTENT_LEN_V2(n)
					     : META_EXTENT_LEN_V3(n)))
		return -EBADMSG;
	memcpy(&e->frag, b + 3, 4);
	memcpy(&e->len, b + 7, 8);
	memcpy(&e->stripe, b + 15, 8);
	memcpy(&e->soff, b + 23, 8);
	if (b[0] != EXTENT_RAW) {
		e->enc = b[31];
		memcpy(&e->slen, b + 32, 4);
		memcpy(&e->blen, b + 36, 4);
		memcpy(&e->boff, b + 40, 4);
		at = 44;
	}
	if (b[0] == EXTENT_DEDUP) {
		e->dedup = true;
		memcpy(e->fp, b + 44, 32);
		at = 76;
	}
	memcpy(e->targets, b + at, 8 * (size_t)n);
	data = (uint64_t)e->d * e->frag;
	if (e->frag == 0 || e->len == 0 || e->len > META_EXTENT_LEN_MAX || e->soff > data)
		return -EBADMSG;
	if (b[0] == EXTENT_RAW)
		return e->len > data - e->soff ? -EBADMSG : 0;
	/* a block lies inside the stripe's data, the range inside the block; a raw one is stored
	 * as it is (only a dedup block may be raw) */
	if ((e->enc == REDUCE_RAW && (b[0] != EXTENT_DEDUP || e->slen != e->blen)) ||
	    e->enc >= REDUCE_ENC_MAX || e->slen == 0 || e->blen > REDUCE_BLOCK_MAX ||
	    e->slen > e->blen || e->slen > data - e->soff || e->boff >= e->blen ||
	    e->len > e->blen - e->boff)
		return -EBADMSG;
	return 0;
}

void
meta_extent_stored(const struct meta_extent *e, uint64_t a, uint64_t b, uint64_t *soff,
		   uint64_t *len)
{
	if (e->enc) {
		*soff = e->soff; /* the whole block, to expand */
		*len = e->slen;
	} else {
		*soff = e->soff + e->boff + (a - e->off);
		*len = b - a;
	}
}

/* Move the start of e forward by k bytes (k < e->len). */
static void
skip(struct meta_extent *e, uint64_t k)
{
	if (e->enc || e->dedup)
		e->boff += (uint32_t)k;
	else
		e->soff += k;
	e->off += k;
	e->len -= k;
}

int
meta_extent_list_encode(struct sh_enc *enc, const struct meta_extent *e, unsigned n)
{
	if (n == 0 || n > META_EXTENTS_MAX)
		return -EINVAL;
	sh_enc_u8(enc, (uint8_t)n);
	for (unsigned i = 0; i < n; i++) {
		uint8_t v[META_EXTENT_VMAX];
		int len = meta_extent_encode(&e[i], v, sizeof(v));

		if (len < 0)
			return len;
		sh_enc_u64(enc, e[i].off);
		sh_enc_u8(enc, (uint8_t)len);
		sh_enc_bytes(enc, v, (size_t)len);
	}
	return sh_enc_error(enc);
}

int
meta_extent_list_decode(const uint8_t *b, size_t len, struct meta_extent *out, unsigned *n)
{
	struct sh_dec d;
	unsigned cnt;

	sh_dec_init(&d, b, len);
	cnt = sh_dec_u8(&d);
	if (cnt == 0 || cnt > META_EXTENTS_MAX)
		return -EBADMSG;
	for (unsigned i = 0; i < cnt; i++) {
		uint64_t off = sh_dec_u64(&d);
		uint8_t vl = sh_dec_u8(&d);
		const uint8_t *v = sh_dec_bytes(&d, vl);

		if (v == NULL || meta_extent_decode(v, vl, &out[i]) < 0)
			return -EBADMSG;
		out[i].off = off;
	}
	sh_dec_end(&d);
	if (sh_dec_error(&d))
		return -EBADMSG;
	*n = cnt;
	return 0;
}

static void
extent_key(struct meta_key *k, uint16_t bucket, uint64_t ino, uint64_t off)
{
	meta_key_id(k, bucket, META_K_EXTENT, ino);
	meta_be64_put(k->b + k->len, off);
	k->len += 8;
}

static int
put_extent(struct meta_bucket *b, uint64_t ino, const struct meta_extent *e)
{
	uint8_t v[META_EXTENT_VMAX];
	struct meta_key k;
	int len = meta_extent_encode(e, v, sizeof(v));

	if (len < 0)
		return len;
	extent_key(&k, b->bucket, ino, e->off);
	return meta_put(b->t, &k, b->ver, v, (size_t)len, b->keep);
}

static int
del_extent(struct meta_bucket *b, uint64_t ino, uint64_t off)
{
	struct meta_key k;

	extent_key(&k, b->bucket, ino, off);
	return meta_del(b->t, &k, b->ver, b->keep);
}

static int
usage_move(struct meta_bucket *b, const int64_t d[5])
{
	struct meta_usage u;
	uint64_t *v[5] = { &u.mapped, &u.data, &u.phys, &u.unique, &u.inlined };
	struct meta_key k;
	int rc = meta_usage_get(b, &u);

	if (rc < 0)
		return rc;
	for (unsigned i = 0; i < 5; i++)
		*v[i] = d[i] < 0 && (uint64_t)-d[i] > *v[i] ? 0 : *v[i] + (uint64_t)d[i];
	meta_key_id(&k, b->bucket, META_K_USAGE, 0);
	return meta_put(b->t, &k, b->ver, &u, sizeof(u), b->keep);
}

int
meta_usage_add(struct meta_bucket *b, int64_t mapped, int64_t unique, int64_t data, int64_t phys)
{
	return usage_move(b, (const int64_t[5]){ mapped, data, phys, unique, 0 });
}

int
meta_usage_inline(struct meta_bucket *b, int64_t delta)
{
	return delta == 0 ? 0 : usage_move(b, (const int64_t[5]){ 0, 0, 0, 0, delta });
}

int
meta_usage_get(struct meta_bucket *b, struct meta_usage *u)
{
	struct meta_key k;
	size_t len;
	int rc;

	memset(u, 0, sizeof(*u));
	meta_key_id(&k, b->bucket, META_K_USAGE, 0);
	rc = meta_get(b->t, &k, b->ver, u, sizeof(*u), &len);
	if (rc == -ENOENT)
		return 0;
	if (rc == 0 && len == 3 * sizeof(uint64_t))
		u->unique = u->mapped; /* kept before dedup: all of it once */
	else if (rc == 0 && len != 4 * sizeof(uint64_t) && len != sizeof(*u))
		rc = -EBADMSG; /* (4 u64: kept before inline bytes were counted) */
	return rc;
}

/*
 * A stripe's record: references; for a file's stripe, whose, and its bytes
 * mapped and live; then, for a stripe first referenced since rebuilds
 * exist, where its fragments are now (the whole stripe as an extent value:
 * docs/healing.md, the one place a rebuild changes).
 */
struct stripe_rec {
	uint64_t n, ino, total, live;
	bool has_loc;
	struct meta_extent loc;
};
#define STRIPE_REC_HEAD 32

static int
stripe_rec_decode(const uint8_t *v, size_t len, struct stripe_rec *r)
{
	memset(r, 0, sizeof(*r));
	if (len == sizeof(r->n)) { /* (a count alone: before) */
		memcpy(&r->n, v, sizeof(r->n));
		return 0;
	}
	if (len < STRIPE_REC_HEAD)
		return -EBADMSG;
	memcpy(&r->n, v, 8);
	memcpy(&r->ino, v + 8, 8);
	memcpy(&r->total, v + 16, 8);
	memcpy(&r->live, v + 24, 8);
	if (len == STRIPE_REC_HEAD)
		return 0;
	r->has_loc = true;
	return meta_extent_decode(v + STRIPE_REC_HEAD, len - STRIPE_REC_HEAD, &r->loc);
}

static int
stripe_get(struct meta_bucket *b, uint64_t stripe, struct stripe_rec *r)
{
	uint8_t v[STRIPE_REC_HEAD + META_EXTENT_VMAX];
	struct meta_key k;
	size_t len;
	int rc;

	memset(r, 0, sizeof(*r));
	meta_key_id(&k, b->bucket, META_K_STRIPE, stripe);
	rc = meta_get(b->t, &k, b->ver, v, sizeof(v), &len);
	if (rc == 0)
		rc = stripe_rec_decode(v, len, r);
	return rc;
}

static int
stripe_put(struct meta_bucket *b, uint64_t stripe, const struct stripe_rec *r)
{
	uint8_t v[STRIPE_REC_HEAD + META_EXTENT_VMAX];
	struct meta_key k;
	int vl = 0;

	memcpy(v, &r->n, 8);
	memcpy(v + 8, &r->ino, 8);
	memcpy(v + 16, &r->total, 8);
	memcpy(v + 24, &r->live, 8);
	if (r->has_loc)
		vl = meta_extent_encode(&r->loc, v + STRIPE_REC_HEAD, sizeof(v) - STRIPE_REC_HEAD);
	if (vl < 0)
		return vl;
	meta_key_id(&k, b->bucket, META_K_STRIPE, stripe);
	return meta_put(b->t, &k, b->ver, v, STRIPE_REC_HEAD + (size_t)vl, b->keep);
}

/* The whole stripe of e as an extent: every fragment, e's targets. */
static struct meta_extent
stripe_whole(const struct meta_extent *e)
{
	struct meta_extent whole = *e;

	whole.off = 0;
	whole.soff = 0;
	whole.len = (uint64_t)e->d * e->frag;
	whole.enc = 0;
	whole.slen = whole.blen = whole.boff = 0;
	whole.dedup = false;
	memset(whole.fp, 0, sizeof(whole.fp));
	return whole;
}

/* A file's stripe: its live bytes (and all it ever mapped) move by these. */
static int
stripe_live(struct meta_bucket *b, const struct meta_extent *e, uint64_t ino, int64_t dlive,
	    int64_t dtotal)
{
	struct stripe_rec r;
	int rc;

	if (e->dedup)
		return 0; /* a dedup block's stripe is its entry's, whole */
	rc = stripe_get(b, e->stripe, &r);
	if (rc < 0)
		return rc == -ENOENT ? 0 : rc;
	if (ino)
		r.ino = ino;
	r.live = dlive < 0 && (uint64_t)-dlive > r.live ? 0 : r.live + (uint64_t)dlive;
	r.total += (uint64_t)dtotal;
	return stripe_put(b, e->stripe, &r);
}

/* A stripe's references change by delta; at zero it goes to the reclaim queue. */
int
meta_stripe_ref(struct meta_bucket *b, const struct meta_extent *e, int delta)
{
	struct meta_key k;
	struct stripe_rec r;
	int rc = stripe_get(b, e->stripe, &r);

	if (rc < 0 && rc != -ENOENT)
		return rc;
	if (delta < 0 && r.n == 0)
		return -EBADMSG; /* a reference nobody counted: the map is damaged */
	if (delta > 0 && r.n == 0) {
		uint8_t v[META_EXTENT_VMAX];
		size_t vl;

		/* never a reference to a stripe whose fragments are being released */
		meta_key_id(&k, b->bucket, META_K_RECLAIM, e->stripe);
		rc = meta_get(b->t, &k, b->ver, v, sizeof(v), &vl);
		if (rc == 0)
			return -ESTALE;
		if (rc != -ENOENT)
			return rc;
	}
	if (r.n == 0 && delta > 0) {
		r.has_loc = true; /* where its fragments are: from now on, this record says */
		r.loc = stripe_whole(e);
	}
	r.n = delta < 0 ? r.n - 1 : r.n + 1;
	if (r.n == 1 && delta > 0) {
		/* a stripe newly referenced: its bytes count from now */
		int64_t data = (int64_t)e->d * e->frag;

		rc = meta_usage_add(b, 0, 0, data, data + (int64_t)e->p * e->frag);
		if (rc < 0)
			return rc;
	}
	if (r.n > 0)
		return stripe_put(b, e->stripe, &r);
	meta_key_id(&k, b->bucket, META_K_STRIPE, e->stripe);
	rc = meta_del(b->t, &k, b->ver, b->keep);
	if (rc == 0) {
		int64_t data = (int64_t)e->d * e->frag;

		rc = meta_usage_add(b, 0, 0, -data, -(data + (int64_t)e->p * e->frag));
	}
	if (rc == 0) {
		uint8_t v[META_EXTENT_VMAX];
		/* the record names the whole stripe where it is now: every fragment is released */
		struct meta_extent whole = r.has_loc ? r.loc : stripe_whole(e);
		int vl;

		vl = meta_extent_encode(&whole, v, sizeof(v));
		meta_key_id(&k, b->bucket, META_K_RECLAIM, e->stripe);
		rc = vl < 0 ? vl : meta_put(b->t, &k, b->ver, v, (size_t)vl, b->keep);
	}
	return rc;
}

/* An extent's reference: on its stripe here, or (a dedup block) on its entry wherever it is. */
static int
extent_ref(struct meta_bucket *b, uint64_t ino, const struct meta_extent *e, int delta)
{
	struct meta_delta d = { .kind = META_DELTA_DEDUP_REF, .ino = ino, .dlinks = delta };

	if (!e->dedup)
		return meta_stripe_ref(b, e, delta);
	d.to = meta_fp_bucket(e->fp, b->nbuckets);
	memcpy(d.fp, e->fp, sizeof(d.fp));
	return meta_delta_send(b, &d);
}

int
meta_extent_account(struct meta_bucket *b, uint64_t ino, const struct meta_extent *e, int sign)
{
	int64_t len = sign * (int64_t)e->len;
	int rc = extent_ref(b, ino, e, sign);

	if (rc == 0)
		rc = stripe_live(b, e, sign > 0 ? ino : 0, len, 0);
	if (rc == 0)
		rc = meta_usage_add(b, len, e->dedup ? 0 : len, 0, 0);
	return rc;
}

int
meta_extent_moved(void *arg, const struct meta_key *k, const void *val, size_t len, int delta)
{
	struct meta_bucket *b = arg;
	struct meta_extent e;

	if (k->len != 19 || k->b[2] != META_K_EXTENT)
		return 0; /* (only extents refer to anything) */
	if (meta_extent_decode(val, len, &e) < 0)
		return -EBADMSG;
	e.off = meta_be64_get(k->b + 11);
	return extent_ref(b, meta_be64_get(k->b + 3), &e, delta);
}

int
meta_branch_moved(void *arg, const struct meta_key *k, const void *val, size_t len, int delta)
{
	struct meta_extent e;

	if (k->len >= 3 && k->b[2] == META_K_INLINE)
		return meta_usage_inline(arg, delta * (int64_t)len);
	if (k->len != 19 || k->b[2] != META_K_EXTENT)
		return 0;
	if (meta_extent_decode(val, len, &e) < 0)
		return -EBADMSG;
	e.off = meta_be64_get(k->b + 11);
	return meta_extent_account(arg, meta_be64_get(k->b + 3), &e, delta);
}

struct collect {
	struct meta_extent *out;
	unsigned max, n;
	uint64_t start, end; /* only those overlapping [start, end) */
	uint64_t floor;	     /* where the extent meta_floor found starts */
};

static int
on_extent(void *arg, const uint8_t *key, size_t klen, const void *val, size_t vlen)
{
	struct collect *c = arg;
	struct meta_extent e;

	if (klen != 19 || meta_extent_decode(val, vlen, &e) < 0)
		return -EBADMSG;
	e.off = meta_be64_get(key + 11);
	if (e.off >= c->end)
		return 1; /* in file order: nothing further overlaps */
	if (e.off + e.len <= c->start)
		return 0;
	if (c->n == c->max)
		return 1;
	c->out[c->n++] = e;
	return 0;
}

/* The last extent starting at or before c->start: kept if it reaches it. */
static int
on_floor(void *arg, const uint8_t *key, size_t klen, const void *val, size_t vlen)
{
	struct collect *c = arg;

	if (klen != 19)
		return -EBADMSG;
	c->floor = meta_be64_get(key + 11);
	return on_extent(arg, key, klen, val, vlen);
}

int
meta_extents(struct meta_bucket *b, uint64_t ino, uint64_t off, uint64_t len,
	     struct meta_extent *out, unsigned max, unsigned *n)
{
	struct collect c = { out, max, 0, off, len > UINT64_MAX - off ? UINT64_MAX : off + len, 0 };
	struct meta_key pk, at;
	int rc;

	meta_key_id(&pk, b->bucket, META_K_EXTENT, ino);
	/*
	 * Extents do not overlap: of those starting at or before off, only the
	 * last can hold it. It is found by one seek back, then the rest in order
	 * after it (a walk from the file's start would pass every extent before
	 * off, and after a snapshot every kept version of them too).
	 */
	extent_key(&at, b->bucket, ino, off);
	rc = meta_floor(b->t, &pk, &at, b->ver, on_floor, &c);
	if (rc == 0 && c.n < max) {
		extent_key(&at, b->bucket, ino, c.floor);
		rc = meta_scan(b->t, &pk, at.b, at.len, b->ver, on_extent, &c);
	} else if (rc == -ENOENT) {
		rc = meta_scan(b->t, &pk, NULL, 0, b->ver, on_extent, &c);
	}
	*n = c.n;
	return rc < 0 ? rc : 0;
}

int
meta_extent_punch(struct meta_bucket *b, uint64_t ino, uint64_t start, uint64_t end)
{
	struct meta_extent got[BATCH];
	uint64_t gone = 0, gone_once = 0;
	unsigned n;
	int rc;

	if (start >= end)
		return 0;
	do {
		rc = meta_extents(b, ino, start, end - start, got, BATCH, &n);
		for (unsigned i = 0; rc == 0 && i < n; i++) {
			struct meta_extent e = got[i], tail = got[i];
			uint64_t eend = e.off + e.len;

			uint64_t cut = (eend < end ? eend : end) - (e.off > start ? e.off : start);

			gone += cut;
			gone_once += e.dedup ? 0 : cut;
			rc = stripe_live(b, &e, 0, -(int64_t)cut, 0);
			if (rc < 0)
				break;
			if (e.off < start) {
				/* the head stays; a tail past the hole becomes its own extent */
				e.len = start - e.off;
				rc = put_extent(b, ino, &e);
				if (rc == 0 && eend > end) {
					skip(&tail, end - tail.off);
					rc = put_extent(b, ino, &tail);
					if (rc == 0)
						rc = extent_ref(b, ino, &tail, +1);
				}
			} else {
				rc = del_extent(b, ino, e.off);
				if (rc == 0 && eend > end) {
					skip(&tail, end - tail.off);
					rc = put_extent(b, ino, &tail);
				} else if (rc == 0) {
					rc = extent_ref(b, ino, &e, -1);
				}
			}
		}
		/* a pass that changed extents inside the range leaves none there: loop while full
		 */
	} while (rc == 0 && n == BATCH);
	return rc == 0 && gone > 0 ? meta_usage_add(b, -(int64_t)gone, -(int64_t)gone_once, 0, 0)
				   : rc;
}

static void
inline_key(struct meta_key *k, uint16_t bucket, uint64_t ino)
{
	meta_key_id(k, bucket, META_K_INLINE, ino);
}

int
meta_inline_get(struct meta_bucket *b, uint64_t ino, void *buf, size_t cap)
{
	struct meta_key k;
	size_t len;
	int rc;

	inline_key(&k, b->bucket, ino);
	rc = meta_get(b->t, &k, b->ver, buf, cap, &len);
	return rc < 0 ? rc : (int)len;
}

int
meta_inline_cut(struct meta_bucket *b, uint64_t ino, uint64_t len)
{
	uint8_t buf[META_INLINE_MAX];
	struct meta_key k;
	int have = meta_inline_get(b, ino, buf, sizeof(buf)), rc;

	if (have == -ENOENT || (have >= 0 && (uint64_t)have <= len))
		return 0;
	if (have < 0)
		return have;
	inline_key(&k, b->bucket, ino);
	rc = len == 0 ? meta_del(b->t, &k, b->ver, b->keep)
		      : meta_put(b->t, &k, b->ver, buf, (size_t)len, b->keep);
	return rc < 0 ? rc : meta_usage_inline(b, (int64_t)len - have);
}

/* The inode of a regular file: -EISDIR for a directory, -EINVAL for anything else. */
static int
load_reg(struct meta_bucket *b, uint64_t ino, struct meta_inode *in)
{
	int rc = meta_inode_load(b, ino, in);

	if (rc == 0 && in->type != META_REG)
		rc = in->type == META_DIR ? -EISDIR : -EINVAL;
	return rc;
}

int
meta_inline_set(struct meta_bucket *b, uint64_t ino, const void *data, size_t len, uint64_t now,
		struct meta_inode *attr)
{
	struct meta_inode in;
	struct meta_key k;
	int rc = load_reg(b, ino, &in);

	if (rc < 0)
		return rc;
	if (len == 0 || len > META_INLINE_MAX)
		return -EINVAL;
	{
		/*
		 * A file with extents anywhere keeps them: inline bytes would hide
		 * them (a write at the start of a file whose first 4 KiB are a hole
		 * once replaced a whole file this way — fsx found it). The writer
		 * writes a stripe instead.
		 */
		struct meta_extent e;
		unsigned n = 0;

		rc = meta_extents(b, ino, 0, UINT64_MAX, &e, 1, &n);
		if (rc == 0 && n > 0)
			return -ENOTEMPTY;
	}
	inline_key(&k, b->bucket, ino);
	if (rc == 0) {
		uint8_t old[META_INLINE_MAX];
		int had = meta_inline_get(b, ino, old, sizeof(old));

		rc = had < 0 && had != -ENOENT ? had
					       : meta_put(b->t, &k, b->ver, data, len, b->keep);
		if (rc == 0)
			rc = meta_usage_inline(b, (int64_t)len - (had < 0 ? 0 : had));
	}
	if (rc < 0)
		return rc;
	if (len > in.size)
		in.size = len;
	in.mtime = in.ctime = now;
	rc = meta_inode_store(b, ino, &in);
	if (rc == 0 && attr)
		*attr = in;
	return rc;
}

int
meta_inline_merge(struct meta_bucket *b, uint64_t ino, uint64_t off, const void *data, size_t len,
		  uint64_t now, struct meta_inode *attr)
{
	uint8_t cur[META_INLINE_MAX];
	size_t clen, end;
	int rc;

	if (len == 0 || off > META_INLINE_MAX || len > META_INLINE_MAX - off)
		return len == 0 ? -EINVAL : -EFBIG;
	rc = meta_inline_get(b, ino, cur, sizeof(cur));
	if (rc < 0 && rc != -ENOENT)
		return rc;
	clen = rc < 0 ? 0 : (size_t)rc;
	end = off + len > clen ? off + len : clen;
	if (off > clen)
		memset(cur + clen, 0, off - clen);
	memcpy(cur + off, data, len);
	return meta_inline_set(b, ino, cur, end, now, attr);
}

/* e passes the checks a stored extent gets when it is read back. */
static bool
extent_ok(const struct meta_extent *e)
{
	uint8_t v[META_EXTENT_VMAX];
	struct meta_extent chk;
	int vl = meta_extent_encode(e, v, sizeof(v));

	return vl >= 0 && meta_extent_decode(v, (size_t)vl, &chk) == 0;
}

/* e over whatever was mapped there: its reference, its stripe's live bytes, the usage. */
static int
map_one(struct meta_bucket *b, uint64_t ino, const struct meta_extent *e)
{
	int rc = meta_extent_punch(b, ino, e->off, e->off + e->len);

	if (rc == 0)
		rc = put_extent(b, ino, e);
	if (rc == 0)
		rc = extent_ref(b, ino, e, +1);
	if (rc == 0)
		rc = stripe_live(b, e, ino, (int64_t)e->len, (int64_t)e->len);
	if (rc == 0)
		rc = meta_usage_add(b, (int64_t)e->len, e->dedup ? 0 : (int64_t)e->len, 0, 0);
	return rc;
}

int
meta_extent_set(struct meta_bucket *b, uint64_t ino, const struct meta_extent *e, unsigned n,
		unsigned flags, uint64_t now, struct meta_inode *attr)
{
	struct meta_inode in;
	int rc = load_reg(b, ino, &in);

	if (rc < 0)
		return rc;
	for (unsigned i = 0; i < n; i++) {
		if (!extent_ok(&e[i]))
			return -EINVAL;
		if (e[i].off >= FILE_MAX || e[i].len > FILE_MAX - e[i].off)
			return -EFBIG;
	}
	if (n > 0 && !(flags & META_EXTENT_TAKES_INLINE)) {
		uint8_t il[META_INLINE_MAX];

		rc = meta_inline_get(b, ino, il, sizeof(il));
		if (rc >= 0)
			return -EAGAIN; /* inline bytes the writer did not take along */
		if (rc != -ENOENT)
			return rc;
		rc = 0;
	}
	if (n > 0)
		rc = meta_inline_cut(b, ino, 0); /* a file with extents has no inline bytes */
	for (unsigned i = 0; rc == 0 && i < n; i++) {
		rc = map_one(b, ino, &e[i]);
		if (e[i].off + e[i].len > in.size)
			in.size = e[i].off + e[i].len;
	}
	if (rc < 0)
		return rc;
	in.mtime = in.ctime = now;
	rc = meta_inode_store(b, ino, &in);
	if (rc == 0 && attr)
		*attr = in;
	return rc;
}

int
meta_extent_move(struct meta_bucket *b, uint64_t ino, const struct meta_extent *e, unsigned n,
		 uint64_t from)
{
	struct meta_inode in;
	int rc = load_reg(b, ino, &in);

	for (unsigned i = 0; rc == 0 && i < n; i++) {
		struct meta_extent got[BATCH];
		uint64_t covered = 0, moved = 0;
		unsigned ng = 0;

		if (!extent_ok(&e[i]) || e[i].dedup)
			return -EINVAL;
		/* the range is still all from's: the bytes moved are the bytes there */
		rc = meta_extents(b, ino, e[i].off, e[i].len, got, BATCH, &ng);
		for (unsigned k = 0; rc == 0 && k < ng; k++) {
			uint64_t a = got[k].off > e[i].off ? got[k].off : e[i].off;
			uint64_t z = got[k].off + got[k].len < e[i].off + e[i].len
					 ? got[k].off + got[k].len
					 : e[i].off + e[i].len;

			if (got[k].stripe == from && !got[k].dedup)
				covered += z - a;
			if (got[k].stripe == e[i].stripe)
				moved += z - a;
		}
		if (rc == 0 && ng < BATCH && moved == e[i].len && i == 0)
			return 0; /* moved before: a retry whose first answer was lost */
		if (rc == 0 && (ng == BATCH || covered != e[i].len))
			return -ESTALE;
	}
	/* as a mapping, but the file's size and times stay: nothing a reader sees changes */
	for (unsigned i = 0; rc == 0 && i < n; i++)
		rc = map_one(b, ino, &e[i]);
	return rc;
}

struct dirty_scan {
	int (*fn)(void *arg, uint64_t stripe, uint64_t ino, uint64_t live, uint64_t total);
	void *arg;
};

static int
on_stripe_rec(void *arg, const uint8_t *key, size_t klen, const void *val, size_t vlen)
{
	struct dirty_scan *ds = arg;
	struct stripe_rec r;

	if (klen != 11)
		return -EBADMSG;
	if (vlen < STRIPE_REC_HEAD || stripe_rec_decode(val, vlen, &r) < 0)
		return 0; /* a count alone (a dedup block's, or of before): not a file's */
	if (r.ino == 0 || r.total == 0 || r.live * 2 > r.total)
		return 0;
	return ds->fn(ds->arg, meta_be64_get(key + 3), r.ino, r.live, r.total);
}

int
meta_stripes_dirty(struct meta_bucket *b,
		   int (*fn)(void *arg, uint64_t stripe, uint64_t ino, uint64_t live,
			     uint64_t total),
		   void *arg)
{
	struct dirty_scan ds = { fn, arg };
	struct meta_key pk;

	meta_key_kind(&pk, b->bucket, META_K_STRIPE);
	return meta_scan(b->t, &pk, NULL, 0, b->ver, on_stripe_rec, &ds);
}

struct reclaims {
	int (*fn)(void *arg, const struct meta_extent *e);
	void *arg;
};

static int
on_reclaim(void *arg, const uint8_t *key, size_t klen, const void *val, size_t vlen)
{
	struct reclaims *r = arg;
	struct meta_extent e;

	if (klen != 11 || meta_extent_decode(val, vlen, &e) < 0 ||
	    e.stripe != meta_be64_get(key + 3))
		return -EBADMSG;
	return r->fn(r->arg, &e);
}

int
meta_reclaims(struct meta_bucket *b, int (*fn)(void *arg, const struct meta_extent *e), void *arg)
{
	struct reclaims r = { fn, arg };
	struct meta_key pk;

	meta_key_kind(&pk, b->bucket, META_K_RECLAIM); /* every stripe of the queue */
	return meta_scan(b->t, &pk, NULL, 0, b->ver, on_reclaim, &r);
}

int
meta_reclaim_done(struct meta_bucket *b, uint64_t stripe)
{
	struct meta_key k;

	meta_key_id(&k, b->bucket, META_K_RECLAIM, stripe);
	return meta_del(b->t, &k, b->ver, b->keep);
}

int
meta_stripe_known(struct meta_bucket *b, uint64_t stripe)
{
	static const uint8_t kinds[] = { META_K_STRIPE, META_K_RECLAIM };
	uint8_t v[META_EXTENT_VMAX];
	struct meta_key k;
	size_t len;

	for (unsigned i = 0; i < sizeof(kinds); i++) {
		int rc;

		meta_key_id(&k, b->bucket, kinds[i], stripe);
		rc = meta_get(b->t, &k, b->ver, v, sizeof(v), &len);
		if (rc == 0 || rc == -EOVERFLOW)
			return 1;
		if (rc != -ENOENT)
			return rc;
	}
	return 0;
}

/* ---- where a stripe's fragments are (docs/healing.md) ---- */

int
meta_stripe_known_at(struct meta_bucket *b, uint64_t stripe, uint32_t idx, uint64_t target)
{
	uint8_t v[META_EXTENT_VMAX];
	struct meta_extent e;
	struct stripe_rec r;
	struct meta_key k;
	size_t len;
	int rc;

	if (target == 0)
		return meta_stripe_known(b, stripe);
	rc = stripe_get(b, stripe, &r);
	if (rc == 0 && !r.has_loc)
		return 1; /* a stripe from before: wherever its extents say */
	if (rc == 0)
		e = r.loc;
	if (rc == -ENOENT) {
		meta_key_id(&k, b->bucket, META_K_RECLAIM, stripe);
		rc = meta_get(b->t, &k, b->ver, v, sizeof(v), &len);
		if (rc == 0)
			rc = meta_extent_decode(v, len, &e);
	}
	if (rc == -ENOENT)
		return 0;
	if (rc < 0)
		return rc;
	/* else the fragment is elsewhere now (or never was): what this target has is stale */
	return idx < (unsigned)e.d + e.p && e.targets[idx] == target;
}

int
meta_stripe_loc(struct meta_bucket *b, uint64_t stripe, struct meta_extent *loc)
{
	struct stripe_rec r;
	int rc = stripe_get(b, stripe, &r);

	if (rc < 0)
		return rc;
	if (!r.has_loc)
		return -ENODATA;
	*loc = r.loc;
	loc->stripe = stripe;
	return 0;
}

struct locs {
	int (*fn)(void *arg, const struct meta_extent *loc);
	void *arg;
};

static int
on_loc(void *arg, const uint8_t *key, size_t klen, const void *val, size_t vlen)
{
	struct locs *l = arg;
	struct stripe_rec r;

	if (klen != 11)
		return -EBADMSG;
	if (stripe_rec_decode(val, vlen, &r) < 0 || !r.has_loc || r.n == 0)
		return 0;
	r.loc.stripe = meta_be64_get(key + 3);
	return l->fn(l->arg, &r.loc);
}

int
meta_stripe_locs(struct meta_bucket *b, uint64_t after,
		 int (*fn)(void *arg, const struct meta_extent *loc), void *arg)
{
	struct locs l = { fn, arg };
	struct meta_key pk, from;

	meta_key_kind(&pk, b->bucket, META_K_STRIPE);
	if (after == 0)
		return meta_scan(b->t, &pk, NULL, 0, b->ver, on_loc, &l);
	meta_key_id(&from, b->bucket, META_K_STRIPE, after);
	return meta_scan(b->t, &pk, from.b, from.len, b->ver, on_loc, &l);
}

int
meta_stripe_relocate(struct meta_bucket *b, uint64_t stripe, const struct meta_move *mv, unsigned n)
{
	struct stripe_rec r;
	int rc = stripe_get(b, stripe, &r);

	if (rc < 0)
		return rc; /* -ENOENT: released meanwhile (what was rebuilt is an orphan) */
	if (!r.has_loc)
		return -ENODATA;
	for (unsigned i = 0; i < n; i++) {
		if (mv[i].idx >= (unsigned)r.loc.d + r.loc.p || mv[i].to == 0)
			return -EINVAL;
		if (r.loc.targets[mv[i].idx] != mv[i].from)
			return -ESTALE; /* moved by someone else: nothing changes */
	}
	for (unsigned i = 0; i < n; i++)
		r.loc.targets[mv[i].idx] = mv[i].to;
	return stripe_put(b, stripe, &r);
}

int
meta_moves_encode(struct sh_enc *e, const struct meta_move *mv, unsigned n)
{
	if (n == 0 || n > META_FRAGS_MAX)
		return -EINVAL;
	sh_enc_u8(e, (uint8_t)n);
	for (unsigned i = 0; i < n; i++) {
		sh_enc_u8(e, mv[i].idx);
		sh_enc_u64(e, mv[i].from);
		sh_enc_u64(e, mv[i].to);
	}
	return 0;
}

int
meta_moves_decode(const uint8_t *b, size_t len, struct meta_move *mv, unsigned *n)
{
	struct sh_dec d;

	sh_dec_init(&d, b, len);
	*n = sh_dec_u8(&d);
	if (*n == 0 || *n > META_FRAGS_MAX)
		return -EBADMSG;
	for (unsigned i = 0; i < *n; i++) {
		mv[i].idx = sh_dec_u8(&d);
		mv[i].from = sh_dec_u64(&d);
		mv[i].to = sh_dec_u64(&d);
		if (mv[i].idx >= META_FRAGS_MAX)
			return -EBADMSG;
	}
	sh_dec_end(&d);
	return d.err ? -EBADMSG : 0;
}
