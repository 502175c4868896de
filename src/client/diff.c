// SPDX-License-Identifier: Apache-2.0
/*
 * What changed between two snapshots (sh_fs_diff; docs/snapshots.md,
 * "What changed between two snapshots"): every bucket's leader is asked
 * (MP_DIFF) for the records whose value as of one snapshot is not their
 * value as of the other, a page at a time, the next page after the last
 * key of the one before. Buckets are asked DIFF_BATCH at once; each
 * one's pages are given in key order before the next bucket's. A leader
 * whose node has not yet heard that a snapshot is ready is asked again.
 */
#include <string.h>

#include "client_int.h"

#define DIFF_BATCH 32

/* The record's key split into what a caller wants to know of it. */
static void
diff_of(const struct mp_diff_rec *r, struct sh_diff *d)
{
	const uint8_t *k = r->key;

	memset(d, 0, sizeof(*d));
	d->bucket = (uint16_t)(k[0] << 8 | k[1]);
	d->kind = (char)k[2];
	if (r->klen >= 11)
		d->ino = meta_be64_get(k + 3);
	if (d->kind == META_K_EXTENT && r->klen >= 19)
		d->off = meta_be64_get(k + 11);
	if ((d->kind == META_K_DENTRY || d->kind == META_K_XATTR) && r->klen >= 13) {
		d->name = (const char *)k + 11;
		d->name_len = r->klen - 12; /* without the NUL that ends it in the key */
	}
	d->key = k;
	d->key_len = r->klen;
	d->old = r->old;
	d->old_len = r->olen;
	d->new = r->new;
	d->new_len = r->nlen;
}

/* Byte order of two logical keys (as the store sorts them). */
static int
key_cmp(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen)
{
	int c = memcmp(a, b, alen < blen ? alen : blen);

	return c != 0 ? c : (alen > blen) - (alen < blen);
}

/*
 * One page's records to fn: 0, fn's answer if not 0, or -EPROTO (a record
 * out of order, or more promised after nothing, which would ask the same
 * again). *last: where the page ended (its last key, or its cursor).
 */
static int
give_page(const struct cres *res, sh_diff_fn fn, void *arg, uint8_t *last, size_t *llen)
{
	struct mp_diff_rec r;
	struct sh_diff d;
	struct sh_dec dec;
	unsigned n = 0;
	int k, rc = 0;

	sh_dec_init(&dec, res->rep.data, res->rep.dlen);
	while (rc == 0 && (k = mp_diff_next(&dec, &r)) == 1) {
		if (*llen != 0 && key_cmp(r.key, r.klen, last, *llen) <= 0)
			return -EPROTO;
		memcpy(last, r.key, r.klen);
		*llen = r.klen;
		n++;
		if (r.cursor) /* the leader stopped there: nothing changed in it */
			continue;
		diff_of(&r, &d);
		rc = fn(arg, &d);
	}
	if (rc == 0 && k < 0)
		return -EPROTO;
	if (rc == 0 && (res->rep.flags & MP_MORE) && n == 0)
		return -EPROTO;
	return rc;
}

struct diff_snaps {
	const char *from, *to; /* from NULL: the empty filesystem */
};

/*
 * A bucket's leader may not know yet that a snapshot this client's
 * configuration says is ready is (its node's configuration is a moment
 * behind): -ESTALE, asked again every DIFF_STALE_NS while this client
 * still sees both ready, up to DIFF_STALE_TRIES times.
 */
#define DIFF_STALE_NS	 (100ull * 1000 * 1000)
#define DIFF_STALE_TRIES 50

static int
ask_again(sh_fs *fs, const struct diff_snaps *sn, const struct mp_req *q, struct cres *res)
{
	for (unsigned i = 0; res->status == -ESTALE && i < DIFF_STALE_TRIES; i++) {
		uint64_t v;

		if ((sn->from != NULL && client_snap_lookup(fs->c, fs->id, sn->from, &v) < 0) ||
		    client_snap_lookup(fs->c, fs->id, sn->to, &v) < 0)
			break; /* being deleted, or gone: -ESTALE it is */
		client_sleep(fs->c, DIFF_STALE_NS);
		cres_fini(res);
		(void)client_meta(fs->c, q, res);
	}
	return res->status;
}

/* Bucket b's records from its first page (res) on, asking for the others. */
static int
bucket_diff(sh_fs *fs, const struct diff_snaps *sn, struct mp_req *q, struct cres *res,
	    sh_diff_fn fn, void *arg)
{
	uint8_t last[META_KEY_MAX];
	size_t llen = 0;
	int rc = ask_again(fs, sn, q, res);

	while (rc == 0) {
		rc = give_page(res, fn, arg, last, &llen);
		if (rc != 0 || !(res->rep.flags & MP_MORE))
			break;
		cres_fini(res);
		q->data = last;
		q->dlen = llen;
		(void)client_meta(fs->c, q, res);
		rc = ask_again(fs, sn, q, res);
	}
	return rc;
}

int
sh_fs_diff(sh_fs *fs, const char *from, const char *to, sh_diff_fn fn, void *arg)
{
	struct mp_req req[DIFF_BATCH];
	struct cres res[DIFF_BATCH];
	struct diff_snaps sn = { from, to };
	uint64_t v1 = 0, v2 = 0;
	int rc = 0;

	if (fs == NULL || to == NULL || fn == NULL || fs->at != 0)
		return -EINVAL;
	if (fs->branch != 0)
		return -EOPNOTSUPP; /* a clone has no snapshots of its own */
	if (from != NULL)
		rc = client_snap_lookup_fresh(fs->c, fs->id, from, &v1);
	if (rc == 0)
		rc = client_snap_lookup_fresh(fs->c, fs->id, to, &v2);
	if (rc == 0 && from != NULL && v1 >= v2)
		rc = -EINVAL;
	for (uint32_t b0 = 0; rc == 0 && b0 < fs->nbuckets; b0 += DIFF_BATCH) {
		unsigned n = fs->nbuckets - b0 < DIFF_BATCH ? fs->nbuckets - b0 : DIFF_BATCH;

		for (unsigned i = 0; i < n; i++)
			req[i] = (struct mp_req){ .kind = MP_DIFF,
						  .fs = fs->id,
						  .bucket = (uint16_t)(b0 + i),
						  .off = v1,
						  .at = v2 };
		client_metas(fs->c, req, res, n);
		for (unsigned i = 0; i < n; i++) {
			if (rc == 0)
				rc = bucket_diff(fs, &sn, &req[i], &res[i], fn, arg);
			cres_fini(&res[i]);
		}
	}
	return rc;
}
