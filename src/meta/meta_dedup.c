// SPDX-License-Identifier: Apache-2.0
/* The dedup index: entries, claims, and the file bucket's side of them (meta_dedup.h). */
#include <string.h>

#include "../base/log.h"
#include "meta_dedup.h"
#include "meta_int.h"

SH_LOG_FACILITY("meta.dedup");

static _Atomic unsigned long damaged;

unsigned long
meta_dedup_damaged(void)
{
	return damaged;
}

#define ENTRY_HEAD 16 /* refs, holds; then the block's place (an extent value) */
#define CLAIM_HEAD 11 /* when, owner, n; then n fingerprints */
#define CLAIM_FPS  255

enum { CLAIMED_COMMITTED = 1, CLAIMED_REFUSED = 2 };

uint16_t
meta_fp_bucket(const uint8_t fp[META_FP_LEN], uint32_t nbuckets)
{
	/* SHA-256 is uniform: its first bytes spread entries over the buckets */
	uint32_t v = (uint32_t)fp[0] << 24 | (uint32_t)fp[1] << 16 | (uint32_t)fp[2] << 8 | fp[3];

	return nbuckets ? (uint16_t)(v % nbuckets) : 0;
}

static void
fp_key(struct meta_key *k, uint16_t bucket, const uint8_t fp[META_FP_LEN])
{
	k->b[0] = (uint8_t)(bucket >> 8);
	k->b[1] = (uint8_t)bucket;
	k->b[2] = META_K_DEDUP;
	memcpy(k->b + 3, fp, META_FP_LEN);
	k->len = 3 + META_FP_LEN;
}

/* ---- codecs ---- */

int
meta_claim_encode(struct sh_enc *e, uint64_t claim, uint16_t owner,
		  const struct meta_dedup_item *it, unsigned n)
{
	if (n == 0 || n > META_DEDUP_MAX)
		return -EINVAL;
	sh_enc_u64(e, claim);
	sh_enc_u16(e, owner);
	sh_enc_u8(e, (uint8_t)n);
	for (unsigned i = 0; i < n; i++) {
		sh_enc_bytes(e, it[i].fp, META_FP_LEN);
		sh_enc_u8(e, it[i].has_loc);
		if (it[i].has_loc) {
			uint8_t v[META_EXTENT_VMAX];
			int vl = meta_extent_encode(&it[i].loc, v, sizeof(v));

			if (vl < 0 || !it[i].loc.dedup)
				return -EINVAL;
			sh_enc_u8(e, (uint8_t)vl);
			sh_enc_bytes(e, v, (size_t)vl);
		}
	}
	return sh_enc_error(e);
}

int
meta_claim_decode(const uint8_t *b, size_t len, uint64_t *claim, uint16_t *owner,
		  struct meta_dedup_item *it, unsigned *n)
{
	struct sh_dec d;
	unsigned cnt;

	sh_dec_init(&d, b, len);
	*claim = sh_dec_u64(&d);
	*owner = sh_dec_u16(&d);
	cnt = sh_dec_u8(&d);
	if (cnt == 0 || cnt > META_DEDUP_MAX || *claim == 0)
		return -EBADMSG;
	for (unsigned i = 0; i < cnt; i++) {
		const uint8_t *fp = sh_dec_bytes(&d, META_FP_LEN);

		memset(&it[i], 0, sizeof(it[i]));
		if (fp == NULL)
			return -EBADMSG;
		memcpy(it[i].fp, fp, META_FP_LEN);
		it[i].has_loc = sh_dec_u8(&d) != 0;
		if (it[i].has_loc) {
			uint8_t vl = sh_dec_u8(&d);
			const uint8_t *v = sh_dec_bytes(&d, vl);

			/* a stored block: a whole one, named by the same fingerprint */
			if (v == NULL || meta_extent_decode(v, vl, &it[i].loc) < 0 ||
			    !it[i].loc.dedup || it[i].loc.boff != 0 ||
			    it[i].loc.len != it[i].loc.blen ||
			    memcmp(it[i].loc.fp, it[i].fp, META_FP_LEN) != 0)
				return -EBADMSG;
		}
	}
	sh_dec_end(&d);
	if (sh_dec_error(&d))
		return -EBADMSG;
	*n = cnt;
	return 0;
}

int
meta_claims_encode(struct sh_enc *e, const struct meta_extent *ex, unsigned nex,
		   const struct meta_claim_ref *c, unsigned n)
{
	struct sh_enc list;
	int rc;

	if (n > META_CLAIMS_MAX)
		return -EINVAL;
	sh_enc_init(&list);
	rc = meta_extent_list_encode(&list, ex, nex);
	if (rc == 0) {
		sh_enc_u32(e, (uint32_t)list.len);
		sh_enc_bytes(e, list.p, list.len);
		sh_enc_u8(e, (uint8_t)n);
		for (unsigned i = 0; i < n; i++) {
			sh_enc_u16(e, c[i].bucket);
			sh_enc_u64(e, c[i].claim);
			sh_enc_u64(e, c[i].when);
		}
		rc = sh_enc_error(e);
	}
	sh_enc_fini(&list);
	return rc;
}

int
meta_claims_decode(const uint8_t *b, size_t len, struct meta_extent *ex, unsigned *nex,
		   struct meta_claim_ref *c, unsigned *n)
{
	struct sh_dec d;
	uint32_t ll;
	const uint8_t *list;
	unsigned cnt;

	sh_dec_init(&d, b, len);
	ll = sh_dec_u32(&d);
	list = sh_dec_bytes(&d, ll);
	if (list == NULL || meta_extent_list_decode(list, ll, ex, nex) < 0)
		return -EBADMSG;
	cnt = sh_dec_u8(&d);
	if (cnt > META_CLAIMS_MAX)
		return -EBADMSG;
	for (unsigned i = 0; i < cnt; i++) {
		c[i].bucket = sh_dec_u16(&d);
		c[i].claim = sh_dec_u64(&d);
		c[i].when = sh_dec_u64(&d);
		if (c[i].claim == 0)
			return -EBADMSG;
	}
	sh_dec_end(&d);
	if (sh_dec_error(&d))
		return -EBADMSG;
	*n = cnt;
	return 0;
}

/* ---- entries ---- */

int
meta_dedup_get(struct meta_bucket *b, const uint8_t fp[META_FP_LEN], struct meta_dedup_entry *out)
{
	uint8_t v[ENTRY_HEAD + META_EXTENT_VMAX];
	struct meta_key k;
	size_t len;
	int rc;

	fp_key(&k, b->bucket, fp);
	rc = meta_get(b->t, &k, b->ver, v, sizeof(v), &len);
	if (rc < 0)
		return rc == -EOVERFLOW ? -EBADMSG : rc;
	if (len <= ENTRY_HEAD ||
	    meta_extent_decode(v + ENTRY_HEAD, len - ENTRY_HEAD, &out->loc) < 0)
		return -EBADMSG;
	memcpy(&out->refs, v, 8);
	memcpy(&out->holds, v + 8, 8);
	return 0;
}

static int
entry_put(struct meta_bucket *b, const uint8_t fp[META_FP_LEN], const struct meta_dedup_entry *en)
{
	uint8_t v[ENTRY_HEAD + META_EXTENT_VMAX];
	struct meta_key k;
	int vl = meta_extent_encode(&en->loc, v + ENTRY_HEAD, sizeof(v) - ENTRY_HEAD);

	if (vl < 0)
		return vl;
	memcpy(v, &en->refs, 8);
	memcpy(v + 8, &en->holds, 8);
	fp_key(&k, b->bucket, fp);
	return meta_put(b->t, &k, b->ver, v, ENTRY_HEAD + (size_t)vl, b->keep);
}

/* The entry after a change of its counts: kept, or (nothing holds it) gone with its stripe. */
static int
entry_settle(struct meta_bucket *b, const uint8_t fp[META_FP_LEN], struct meta_dedup_entry *en)
{
	struct meta_key k;
	int rc;

	if (en->refs + en->holds > 0)
		return entry_put(b, fp, en);
	fp_key(&k, b->bucket, fp);
	rc = meta_del(b->t, &k, b->ver, b->keep);
	if (rc == 0)
		rc = meta_stripe_ref(b, &en->loc, -1); /* its stripe: to the reclaim queue */
	if (rc == 0)
		rc = meta_usage_add(b, 0, -(int64_t)en->loc.blen, 0, 0);
	return rc;
}

int
meta_dedup_ref(struct meta_bucket *b, const uint8_t fp[META_FP_LEN], int delta)
{
	struct meta_dedup_entry en;
	int rc = meta_dedup_get(b, fp, &en);

	if (rc == -ENOENT || (delta < 0 && en.refs < (uint64_t)-delta)) {
		/* a reference to a block nobody held: the counts are damaged; say so, go on */
		damaged++;
		sh_log_error("bucket %u: dedup entry %02x%02x%02x%02x..: %s reference %+d",
			     b->bucket, fp[0], fp[1], fp[2], fp[3],
			     rc == -ENOENT ? "no entry for" : "extra", delta);
		return 0;
	}
	if (rc < 0)
		return rc;
	en.refs = delta < 0 ? en.refs - (uint64_t)-delta : en.refs + (uint64_t)delta;
	return entry_settle(b, fp, &en);
}

/* ---- claims ---- */

static int
claim_get(struct meta_bucket *b, uint64_t claim, uint8_t *v, size_t cap, size_t *len)
{
	struct meta_key k;
	int rc;

	meta_key_id(&k, b->bucket, META_K_CLAIM, claim);
	rc = meta_get(b->t, &k, b->ver, v, cap, len);
	if (rc == 0 && (*len < CLAIM_HEAD || (*len - CLAIM_HEAD) % META_FP_LEN != 0 ||
			(*len - CLAIM_HEAD) / META_FP_LEN != v[10]))
		rc = -EBADMSG;
	return rc;
}

int
meta_dedup_claim(struct meta_bucket *b, uint64_t claim, uint16_t owner, uint64_t now,
		 struct meta_dedup_item *it, unsigned n)
{
	uint8_t v[CLAIM_HEAD + CLAIM_FPS * META_FP_LEN];
	struct meta_key k;
	size_t len = 0;
	int rc = claim_get(b, claim, v, sizeof(v), &len);
	uint8_t had;

	if (rc == -ENOENT) {
		memcpy(v, &now, 8);
		memcpy(v + 8, &owner, 2);
		v[10] = 0;
		len = CLAIM_HEAD;
		rc = 0;
	}
	had = v[10];
	for (unsigned i = 0; rc == 0 && i < n; i++) {
		struct meta_dedup_entry en;

		if (meta_fp_bucket(it[i].fp, b->nbuckets) != b->bucket)
			return -EINVAL;
		rc = meta_dedup_get(b, it[i].fp, &en);
		if (rc == -ENOENT && !it[i].has_loc) {
			it[i].loc.stripe = 0; /* not here: the writer stores it */
			rc = 0;
			continue;
		}
		if (rc == -ENOENT) {
			/* a new block: its entry holds its stripe (here: the id names this bucket)
			 */
			en = (struct meta_dedup_entry){ .refs = 0, .holds = 0, .loc = it[i].loc };
			if ((en.loc.stripe >> 48) != b->bucket)
				return -EINVAL;
			rc = meta_stripe_ref(b, &en.loc, +1);
			if (rc == 0)
				rc = meta_usage_add(b, 0, (int64_t)en.loc.blen, 0, 0);
		}
		if (rc < 0)
			return rc;
		if (v[10] == CLAIM_FPS)
			return -E2BIG;
		en.holds++;
		rc = entry_put(b, it[i].fp, &en);
		it[i].loc = en.loc;
		it[i].has_loc = true;
		memcpy(v + len, it[i].fp, META_FP_LEN);
		len += META_FP_LEN;
		v[10]++;
	}
	if (rc < 0)
		return rc;
	/*
	 * Nothing held (none of the blocks is here: a new file's first claim):
	 * no record, so the command writes nothing and is answered like a read,
	 * not committed. The claim's time the file's bucket checks is the one
	 * the writer got back first, this one, earlier than the record a later
	 * claim makes: the commit deadline runs out no later for it.
	 */
	if (v[10] == had)
		return 0;
	meta_key_id(&k, b->bucket, META_K_CLAIM, claim);
	return meta_put(b->t, &k, b->ver, v, len, b->keep);
}

int
meta_dedup_release(struct meta_bucket *b, uint64_t claim)
{
	uint8_t v[CLAIM_HEAD + CLAIM_FPS * META_FP_LEN];
	struct meta_key k;
	size_t len;
	int rc = claim_get(b, claim, v, sizeof(v), &len);

	if (rc == -ENOENT)
		return 0; /* released before (done, then found dead, or the other way) */
	for (unsigned i = 0; rc == 0 && i < v[10]; i++) {
		const uint8_t *fp = v + CLAIM_HEAD + (size_t)i * META_FP_LEN;
		struct meta_dedup_entry en;

		rc = meta_dedup_get(b, fp, &en);
		if (rc == 0 && en.holds == 0)
			rc = -EBADMSG;
		if (rc == 0) {
			en.holds--;
			rc = entry_settle(b, fp, &en);
		}
	}
	if (rc < 0)
		return rc;
	meta_key_id(&k, b->bucket, META_K_CLAIM, claim);
	return meta_del(b->t, &k, b->ver, b->keep);
}

struct claim_scan {
	uint64_t before;
	int (*fn)(void *arg, uint64_t claim, uint16_t owner, uint64_t when);
	void *arg;
};

static int
on_claim(void *arg, const uint8_t *key, size_t klen, const void *val, size_t vlen)
{
	struct claim_scan *s = arg;
	uint64_t when;
	uint16_t owner;

	if (klen != 11 || vlen < CLAIM_HEAD)
		return -EBADMSG;
	memcpy(&when, val, 8);
	memcpy(&owner, (const uint8_t *)val + 8, 2);
	return when < s->before ? s->fn(s->arg, meta_be64_get(key + 3), owner, when) : 0;
}

int
meta_dedup_claims(struct meta_bucket *b, uint64_t before,
		  int (*fn)(void *arg, uint64_t claim, uint16_t owner, uint64_t when), void *arg)
{
	struct claim_scan s = { before, fn, arg };
	struct meta_key pk;

	meta_key_kind(&pk, b->bucket, META_K_CLAIM);
	return meta_scan(b->t, &pk, NULL, 0, b->ver, on_claim, &s);
}

/* ---- the file's bucket ---- */

static int
claimed_get(struct meta_bucket *b, uint64_t claim, uint8_t *state)
{
	uint8_t v[9];
	struct meta_key k;
	int rc;

	meta_key_id(&k, b->bucket, META_K_CLAIMED, claim);
	rc = meta_get_exact(b->t, &k, b->ver, v, sizeof(v));
	if (rc == 0)
		*state = v[0];
	return rc;
}

static int
claimed_put(struct meta_bucket *b, uint64_t claim, uint8_t state, uint64_t now)
{
	uint8_t v[9];
	struct meta_key k;

	v[0] = state;
	memcpy(v + 1, &now, 8);
	meta_key_id(&k, b->bucket, META_K_CLAIMED, claim);
	return meta_put(b->t, &k, b->ver, v, sizeof(v), b->keep);
}

int
meta_dedup_check(struct meta_bucket *b, const struct meta_claim_ref *c, unsigned n, uint64_t now)
{
	for (unsigned i = 0; i < n; i++) {
		uint8_t state;
		int rc = claimed_get(b, c[i].claim, &state);

		if (rc == 0 && state == CLAIMED_REFUSED)
			return -ETIMEDOUT; /* its bucket asked about it: released there */
		if (rc < 0 && rc != -ENOENT)
			return rc;
		if (now > c[i].when + META_CLAIM_COMMIT_NS)
			return -ETIMEDOUT; /* too old: its bucket may be asking about it now */
	}
	return 0;
}

int
meta_dedup_commit(struct meta_bucket *b, const struct meta_claim_ref *c, unsigned n, uint64_t now)
{
	for (unsigned i = 0; i < n; i++) {
		struct meta_delta d = { .kind = META_DELTA_CLAIM_DONE,
					.to = c[i].bucket,
					.ino = c[i].claim };
		int rc = 0;

		if (c[i].bucket != b->bucket)
			rc = claimed_put(b, c[i].claim, CLAIMED_COMMITTED, now);
		if (rc == 0)
			rc = meta_delta_send(b, &d); /* after the refs the commit queued */
		if (rc < 0)
			return rc;
	}
	return 0;
}

int
meta_dedup_kill(struct meta_bucket *b, uint64_t claim, uint64_t now, int *committed)
{
	uint8_t state;
	int rc = claimed_get(b, claim, &state);

	if (rc == 0) {
		*committed = state == CLAIMED_COMMITTED;
		return 0;
	}
	if (rc != -ENOENT)
		return rc;
	*committed = 0;
	return claimed_put(b, claim, CLAIMED_REFUSED, now);
}

int
meta_dedup_forget(struct meta_bucket *b, uint64_t claim)
{
	uint8_t state;
	struct meta_key k;
	int rc = claimed_get(b, claim, &state);

	if (rc == -ENOENT || (rc == 0 && state != CLAIMED_COMMITTED))
		return 0;
	if (rc < 0)
		return rc;
	meta_key_id(&k, b->bucket, META_K_CLAIMED, claim);
	return meta_del(b->t, &k, b->ver, b->keep);
}

struct refused_scan {
	uint64_t before;
	uint64_t claims[256];
	unsigned n;
};

static int
on_claimed(void *arg, const uint8_t *key, size_t klen, const void *val, size_t vlen)
{
	struct refused_scan *rs = arg;
	const uint8_t *v = val;
	uint64_t when;

	if (klen != 11 || vlen != 9)
		return -EBADMSG;
	memcpy(&when, v + 1, 8);
	if (v[0] != CLAIMED_REFUSED || when >= rs->before)
		return 0;
	if (rs->n == 256)
		return 1;
	rs->claims[rs->n++] = meta_be64_get(key + 3);
	return 0;
}

int
meta_dedup_forget_refused(struct meta_bucket *b, uint64_t before, bool dry, unsigned *n)
{
	struct refused_scan rs = { .before = before };
	struct meta_key pk, k;
	int rc;

	meta_key_kind(&pk, b->bucket, META_K_CLAIMED);
	rc = meta_scan(b->t, &pk, NULL, 0, b->ver, on_claimed, &rs);
	for (unsigned i = 0; rc >= 0 && !dry && i < rs.n; i++) {
		meta_key_id(&k, b->bucket, META_K_CLAIMED, rs.claims[i]);
		rc = meta_del(b->t, &k, b->ver, b->keep);
	}
	*n = rs.n;
	return rc < 0 ? rc : 0;
}
