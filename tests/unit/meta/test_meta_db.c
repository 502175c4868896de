// SPDX-License-Identifier: Apache-2.0
/*
 * The bucket store: versioned records against a model (random puts and
 * deletes at growing versions, snapshots kept and dropped; reads at the
 * current version and at every kept snapshot must match the model),
 * directory scans with resume cursors, bucket drops, records and keys.
 */
#include "versions_model.h"

#define NKEYS 24
#define NOPS  3000

static struct meta_db *
open_db(void)
{
	char path[512];
	struct meta_db *db;

	snprintf(path, sizeof(path), "%s/meta.mdb", sh_test_dir());
	SH_ASSERT_OK(meta_db_open(path, 64ull << 20, 0, &db));
	return db;
}

static void
check_read(struct meta_db *db, struct hist *h, uint64_t at)
{
	int wants[NKEYS];
	struct meta_txn *t;

	SH_ASSERT_OK(meta_txn_begin(db, false, &t));
	for (int i = 0; i < NKEYS; i++) {
		struct meta_key k;
		int want = model_at(&h[i], at), got = -1;
		size_t len = 0;
		int rc;

		key_of(&k, i);
		rc = meta_get(t, &k, at, &got, sizeof(got), &len);
		if (want < 0)
			SH_ASSERT_MSG(rc == -ENOENT, "key %d at %llu: rc %d, want absent", i,
				      (unsigned long long)at, rc);
		else
			SH_ASSERT_MSG(rc == 0 && len == sizeof(got) && got == want,
				      "key %d at %llu: rc %d value %d, want %d (seed %llu)", i,
				      (unsigned long long)at, rc, got, want,
				      (unsigned long long)sh_test_seed());
		wants[i] = want;
	}
	model_check_floor(t, wants, NKEYS, at);
	meta_txn_abort(t);
}

/*
 * What meta_keep.moved said of each value (values are unique: op * 10 +
 * j): +1 when it came to live for the snapshots alone, -1 when it went.
 * Told in a transaction, counted when it commits.
 */
#define NVALS (NOPS * 10 + 10)
static int moved_sum[NVALS], moved_txn[NVALS];

static struct model_counts moved_counts = { moved_txn, NVALS };

static void
moved_commit(bool commit)
{
	for (int v = 0; v < NVALS; v++) {
		if (commit)
			moved_sum[v] += moved_txn[v];
		moved_txn[v] = 0;
	}
}

/* Settle every bucket with keep, a few keys at a time (the resume cursor). */
static void
settle_all(struct meta_db *db, const struct meta_keep *kp)
{
	model_page_all(db, meta_settle, kp);
	moved_commit(true);
}

/*
 * Once settled, a value lives for the snapshots alone (moved said +1, not
 * yet -1) exactly when a kept snapshot reads it and it is not its key's
 * newest.
 */
static void
check_moved(const struct hist *h, const uint64_t *keep, unsigned nkeep)
{
	static int want[NVALS];

	memset(want, 0, sizeof(want));
	for (int i = 0; i < NKEYS; i++) {
		int newest = h[i].n > 0 ? h[i].val[h[i].n - 1] : -1;

		for (unsigned s = 0; s < nkeep; s++) {
			int v = model_at(&h[i], keep[s]);

			if (v >= 0 && v != newest)
				want[v] = 1;
		}
	}
	for (int v = 0; v < NVALS; v++)
		SH_ASSERT_MSG(moved_sum[v] == want[v],
			      "value %d: moved says %d, want %d (seed %llu)", v, moved_sum[v],
			      want[v], (unsigned long long)sh_test_seed());
}

struct diff_seen {
	int changed[NKEYS], old[NKEYS], new[NKEYS];
	uint8_t last[META_KEY_MAX]; /* where the page ended: the next one starts after it */
	size_t llen;
	unsigned n, page;
};

static int
on_diff(void *arg, const uint8_t *key, size_t klen, const void *old, size_t olen, const void *new,
	size_t nlen)
{
	struct diff_seen *d = arg;

	for (int i = 0; i < NKEYS; i++) {
		struct meta_key k;

		key_of(&k, i);
		if (k.len != klen || memcmp(k.b, key, klen) != 0)
			continue;
		d->changed[i]++;
		d->old[i] = -1;
		d->new[i] = -1;
		if (old != NULL) {
			SH_ASSERT_EQ(olen, sizeof(int));
			memcpy(&d->old[i], old, sizeof(int));
		}
		if (new != NULL) {
			SH_ASSERT_EQ(nlen, sizeof(int));
			memcpy(&d->new[i], new, sizeof(int));
		}
		memcpy(d->last, key, klen);
		d->llen = klen;
		return ++d->n == d->page; /* a page is full: stop, as MP_DIFF does */
	}
	SH_ASSERT_MSG(0, "meta_diff names a key never written");
	return -1;
}

/*
 * meta_diff from v1 to v2 over every bucket names exactly the keys the
 * model says changed, read in pages of 1 to 4 changes and 2 to 5 keys
 * looked at, each after where the one before stopped (as MP_DIFF pages it).
 */
static void
check_diff(struct meta_db *db, const struct hist *h, uint64_t v1, uint64_t v2)
{
	struct diff_seen d = { .page = 1 + (unsigned)((v1 + v2) % 4) };
	struct meta_txn *t;

	SH_ASSERT_OK(meta_txn_begin(db, false, &t));
	for (uint16_t b = 0; b < MODEL_BUCKETS; b++) {
		struct meta_key pk;

		meta_key_kind(&pk, b, META_K_INODE);
		pk.len = 2;
		d.llen = 0;
		for (;;) {
			uint8_t after[META_KEY_MAX], next[META_KEY_MAX];
			size_t alen = d.llen, nlen;

			memcpy(after, d.last, alen);
			d.n = 0;
			/* at most page + 1 keys looked at: some pages end at a key not changed */
			SH_ASSERT_OK(meta_diff(t, &pk, after, alen, v1, v2, d.page + 1, next, &nlen,
					       on_diff, &d));
			if (nlen > 0) {
				memcpy(d.last, next, nlen);
				d.llen = nlen;
			} else if (d.n < d.page) {
				break;
			}
		}
	}
	meta_txn_abort(t);
	for (int i = 0; i < NKEYS; i++) {
		int was = model_at(&h[i], v1), is = model_at(&h[i], v2);

		SH_ASSERT_MSG(
		    d.changed[i] == (was != is),
		    "key %d from %llu to %llu: %d -> %d, meta_diff said %d times (seed %llu)", i,
		    (unsigned long long)v1, (unsigned long long)v2, was, is, d.changed[i],
		    (unsigned long long)sh_test_seed());
		if (was != is) {
			SH_ASSERT_EQ(d.old[i], was);
			SH_ASSERT_EQ(d.new[i], is);
		}
	}
}

TEST(meta_versions_match_model)
{
	static struct hist h[NKEYS];
	struct meta_db *db = open_db();
	struct sh_rand rng;
	uint64_t keep[16], ver = 1;
	unsigned nkeep = 0;

	memset(h, 0, sizeof(h));
	memset(moved_sum, 0, sizeof(moved_sum));
	sh_rand_seed(&rng, sh_test_seed());
	for (int op = 0; op < NOPS; op++) {
		struct meta_keep kp = { keep, nkeep, model_on_moved, &moved_counts };
		struct meta_txn *t;
		int n = 1 + (int)sh_rand_below(&rng, 4);
		uint64_t r = sh_rand_below(&rng, 100);

		if (r < 5 && nkeep < 16) {
			keep[nkeep++] = ver; /* a snapshot of what is there now */
			ver++;
			continue;
		}
		if (r < 8 && nkeep > 0) {
			unsigned drop = (unsigned)sh_rand_below(&rng, nkeep);

			memmove(keep + drop, keep + drop + 1, (nkeep - drop - 1) * sizeof(keep[0]));
			nkeep--;
			continue;
		}
		SH_ASSERT_OK(meta_txn_begin(db, true, &t));
		for (int j = 0; j < n; j++) {
			int i = (int)sh_rand_below(&rng, NKEYS);
			struct meta_key k;
			struct hist *x = &h[i];

			key_of(&k, i);
			SH_ASSERT_LT(x->n, HIST);
			if (sh_rand_below(&rng, 4) == 0) {
				SH_ASSERT_OK(meta_del(t, &k, ver, &kp));
				x->val[x->n] = -1;
			} else {
				int v = op * 10 + j;
				SH_ASSERT_OK(meta_put(t, &k, ver, &v, sizeof(v), &kp));
				x->val[x->n] = v;
			}
			/* several writes of one key in one version: the last counts */
			if (x->n > 0 && x->ver[x->n - 1] == ver)
				x->val[x->n - 1] = x->val[x->n];
			else
				x->ver[x->n++] = ver;
		}
		if (sh_rand_below(&rng, 10) == 0) {
			meta_txn_abort(t); /* nothing of it happened */
			moved_commit(false);
			for (int i = 0; i < NKEYS; i++)
				while (h[i].n > 0 && h[i].ver[h[i].n - 1] == ver)
					h[i].n--;
		} else {
			SH_ASSERT_OK(meta_txn_commit(t));
			moved_commit(true);
		}
		ver++;
		if (op % 50 == 0) {
			check_read(db, h, ver);
			for (unsigned s = 0; s < nkeep; s++)
				check_read(db, h, keep[s]);
		}
		if (op % 50 == 25) {
			for (unsigned s = 0; s < nkeep; s++)
				check_diff(db, h, keep[s], s + 1 < nkeep ? keep[s + 1] : ver);
			check_diff(db, h, 0, nkeep > 0 ? keep[0] : ver); /* from nothing */
		}
		if (op % 200 == 0) {
			settle_all(db, &kp);
			check_moved(h, keep, nkeep);
			check_read(db, h, ver);
			for (unsigned s = 0; s < nkeep; s++)
				check_read(db, h, keep[s]);
		}
	}
	check_read(db, h, ver);
	for (unsigned s = 0; s < nkeep; s++)
		check_read(db, h, keep[s]);
	/* every snapshot deleted: nothing lives for them, one version a key is left */
	settle_all(db, &(struct meta_keep){ keep, 0, model_on_moved, &moved_counts });
	check_moved(h, keep, 0);
	check_read(db, h, ver);
	meta_db_close(db);
}

struct scan {
	char names[64][32];
	int n;
	int stop_at;
	uint8_t last[META_KEY_MAX];
	size_t lastlen;
};

static int
on_entry(void *arg, const uint8_t *key, size_t klen, const void *val, size_t vlen)
{
	struct scan *s = arg;
	const uint8_t *name;
	size_t nlen;
	struct meta_dentry d;

	SH_ASSERT_OK(meta_key_dentry_name(key, klen, &name, &nlen));
	SH_ASSERT_OK(meta_dentry_decode(val, vlen, &d));
	SH_ASSERT_LT(s->n, 64);
	memcpy(s->names[s->n], name, nlen);
	s->names[s->n][nlen] = '\0';
	s->n++;
	memcpy(s->last, key, klen);
	s->lastlen = klen;
	return s->n == s->stop_at ? 1 : 0;
}

TEST(meta_scan_directory_with_cursor)
{
	struct meta_db *db = open_db();
	struct meta_txn *t;
	struct meta_key k, prefix;
	struct scan s = { .stop_at = 7 };
	int total = 0;

	SH_ASSERT_OK(meta_txn_begin(db, true, &t));
	for (int i = 0; i < 30; i++) {
		char name[32];
		int n = snprintf(name, sizeof(name), "e%02d", i);
		struct meta_dentry d = { .ino = meta_ino_make(3, (uint64_t)i + 1),
					 .type = META_REG };
		uint8_t v[META_DENTRY_LEN];

		meta_dentry_encode(&d, v);
		SH_ASSERT_OK(meta_key_dentry(&k, 3, 1000, name, (size_t)n));
		SH_ASSERT_OK(meta_put(t, &k, 1, v, sizeof(v), NULL));
		/* another directory in the same bucket, and the same name in another bucket */
		SH_ASSERT_OK(meta_key_dentry(&k, 3, 1001, name, (size_t)n));
		SH_ASSERT_OK(meta_put(t, &k, 1, v, sizeof(v), NULL));
		SH_ASSERT_OK(meta_key_dentry(&k, 4, 1000, name, (size_t)n));
		SH_ASSERT_OK(meta_put(t, &k, 1, v, sizeof(v), NULL));
	}
	/* version 2 deletes e05 and rewrites e10 */
	SH_ASSERT_OK(meta_key_dentry(&k, 3, 1000, "e05", 3));
	SH_ASSERT_OK(meta_del(t, &k, 2, &(struct meta_keep){ (uint64_t[]){ 1 }, 1 }));
	SH_ASSERT_OK(meta_txn_commit(t));

	SH_ASSERT_OK(meta_txn_begin(db, false, &t));
	meta_key_dir_prefix(&prefix, 3, 1000);
	/* in pages of 7, resuming after the last key seen */
	SH_ASSERT_OK(meta_scan(t, &prefix, NULL, 0, 2, on_entry, &s));
	while (s.n == s.stop_at) {
		total += s.n;
		s.n = 0;
		SH_ASSERT_OK(meta_scan(t, &prefix, s.last, s.lastlen, 2, on_entry, &s));
	}
	total += s.n;
	SH_ASSERT_EQ(total, 29); /* e05 is gone as of version 2 */
	/* as of version 1 (kept) all 30 are there */
	s = (struct scan){ .stop_at = 0 };
	SH_ASSERT_OK(meta_scan(t, &prefix, NULL, 0, 1, on_entry, &s));
	SH_ASSERT_EQ(s.n, 30);
	SH_ASSERT_STREQ(s.names[5], "e05");
	meta_txn_abort(t);

	/* dropping bucket 3 leaves bucket 4 */
	SH_ASSERT_OK(meta_txn_begin(db, true, &t));
	SH_ASSERT_OK(meta_drop_bucket(t, 3));
	SH_ASSERT_OK(meta_txn_commit(t));
	SH_ASSERT_OK(meta_txn_begin(db, false, &t));
	s = (struct scan){ .stop_at = 0 };
	SH_ASSERT_OK(meta_scan(t, &prefix, NULL, 0, 5, on_entry, &s));
	SH_ASSERT_EQ(s.n, 0);
	meta_key_dir_prefix(&prefix, 4, 1000);
	SH_ASSERT_OK(meta_scan(t, &prefix, NULL, 0, 5, on_entry, &s));
	SH_ASSERT_EQ(s.n, 30);
	meta_txn_abort(t);
	meta_db_close(db);
}

TEST(meta_records_and_names)
{
	struct meta_inode in = { .type = META_DIR,
				 .mode = 0755,
				 .uid = 1,
				 .gid = 2,
				 .nlink = 2,
				 .size = 4096,
				 .mtime = 123456789,
				 .generation = 9 },
			  out;
	struct meta_dentry d = { .ino = meta_ino_make(7, 99), .type = META_LNK }, dout;
	uint8_t b[META_INODE_LEN], db[META_DENTRY_LEN];
	char long_name[300];
	struct meta_key k;

	meta_inode_encode(&in, b);
	SH_ASSERT_OK(meta_inode_decode(b, sizeof(b), &out));
	SH_ASSERT_MEMEQ(&in, &out, sizeof(in));
	SH_ASSERT_EQ(meta_inode_decode(b, sizeof(b) - 1, &out), -EBADMSG);
	b[1] = 99;
	SH_ASSERT_EQ(meta_inode_decode(b, sizeof(b), &out), -EBADMSG);
	meta_dentry_encode(&d, db);
	SH_ASSERT_OK(meta_dentry_decode(db, sizeof(db), &dout));
	SH_ASSERT_EQ(dout.ino, d.ino);
	SH_ASSERT_EQ(meta_ino_bucket(dout.ino), 7);
	SH_ASSERT_EQ(dout.type, META_LNK);

	memset(long_name, 'a', sizeof(long_name));
	SH_ASSERT_EQ(meta_name_check("a/b", 3), -EINVAL);
	SH_ASSERT_EQ(meta_name_check("a\0b", 3), -EINVAL);
	SH_ASSERT_EQ(meta_name_check(".", 1), -EINVAL);
	SH_ASSERT_EQ(meta_name_check("..", 2), -EINVAL);
	SH_ASSERT_EQ(meta_name_check(long_name, 256), -ENAMETOOLONG);
	SH_ASSERT_OK(meta_name_check(long_name, 255));
	SH_ASSERT_EQ(meta_key_dentry(&k, 0, 1, long_name, 256), -ENAMETOOLONG);
	SH_ASSERT_OK(meta_key_dentry(&k, 0, 1, long_name, 255));
	SH_ASSERT_EQ(k.len, 3 + 8 + 255 + 1);
	/* entries spread over buckets */
	{
		unsigned hits[16] = { 0 };

		for (int i = 0; i < 16000; i++) {
			char name[16];
			int n = snprintf(name, sizeof(name), "f%d", i);
			hits[meta_dentry_bucket(1, name, (size_t)n, 16)]++;
		}
		for (int b2 = 0; b2 < 16; b2++)
			SH_ASSERT_MSG(hits[b2] > 800 && hits[b2] < 1200, "bucket %d: %u", b2,
				      hits[b2]);
	}
}

static int
get_one(struct meta_db *db, const struct meta_key *k, uint64_t *v)
{
	struct meta_txn *t;
	size_t len = 0;
	int rc;

	SH_ASSERT_OK(meta_txn_begin(db, false, &t));
	rc = meta_get(t, k, 100, v, sizeof(*v), &len);
	meta_txn_abort(t);
	return rc;
}

static void
put_one(struct meta_db *db, const struct meta_key *k, uint64_t v, bool commit)
{
	struct meta_txn *t;

	SH_ASSERT_OK(meta_txn_begin(db, true, &t));
	SH_ASSERT_OK(meta_put(t, k, 1, &v, sizeof(v), NULL));
	if (commit)
		SH_ASSERT_OK(meta_txn_commit(t));
	else
		meta_txn_abort(t);
}

/*
 * A batched store: writes are seen at once, an aborted one is gone, the
 * batch becomes durable at a flush, a discarded batch is lost whole, and
 * a close flushes.
 */
TEST(meta_db_batch)
{
	char path[512];
	struct meta_db *db;
	struct meta_txn *t, *t2;
	struct meta_key a, b;
	uint64_t v = 0;

	snprintf(path, sizeof(path), "%s/batch.mdb", sh_test_dir());
	SH_ASSERT_OK(meta_db_open(path, 64ull << 20, META_DB_BATCH, &db));
	meta_key_inode(&a, 1, 1);
	meta_key_inode(&b, 1, 2);
	put_one(db, &a, 7, true);
	put_one(db, &b, 9, false);
	SH_ASSERT_EQ(meta_db_pending(db), 1u);
	SH_ASSERT_OK(get_one(db, &a, &v));
	SH_ASSERT_EQ(v, 7u);
	SH_ASSERT_EQ(get_one(db, &b, &v), -ENOENT);
	/* one transaction at a time */
	SH_ASSERT_OK(meta_txn_begin(db, true, &t));
	SH_ASSERT_EQ(meta_txn_begin(db, false, &t2), -EBUSY);
	SH_ASSERT_EQ(meta_db_flush(db, false), -EBUSY);
	meta_txn_abort(t);
	SH_ASSERT_OK(meta_db_flush(db, true));
	SH_ASSERT_EQ(meta_db_pending(db), 0u);
	/* after the flush, a discarded batch loses only what came after */
	put_one(db, &b, 9, true);
	put_one(db, &a, 8, true);
	meta_db_discard(db);
	SH_ASSERT_OK(get_one(db, &a, &v));
	SH_ASSERT_EQ(v, 7u);
	SH_ASSERT_EQ(get_one(db, &b, &v), -ENOENT);
	put_one(db, &b, 10, true);
	meta_db_close(db);
	SH_ASSERT_OK(meta_db_open(path, 64ull << 20, META_DB_BATCH, &db));
	SH_ASSERT_OK(get_one(db, &b, &v));
	SH_ASSERT_EQ(v, 10u);
	SH_ASSERT_OK(get_one(db, &a, &v));
	SH_ASSERT_EQ(v, 7u);
	meta_db_close(db);
}
