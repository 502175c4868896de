/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The model the bucket store's version tests check against: each key's
 * writes in order (version, value; -1 deleted), keys over MODEL_BUCKETS
 * buckets (inodes and directory entries).
 */
#ifndef SH_TESTS_UNIT_META_VERSIONS_MODEL_H
#define SH_TESTS_UNIT_META_VERSIONS_MODEL_H

#include <stdio.h>
#include <string.h>

#include "../../../src/meta/meta_db.h"
#include "../../lib/test.h"

#define HIST	      512
#define MODEL_BUCKETS 5

struct hist {
	uint64_t ver[HIST];
	int val[HIST]; /* -1: deleted */
	int n;
};

/* Key i of the model. */
static inline void
key_of(struct meta_key *k, int i)
{
	if (i % 3 == 0) {
		meta_key_inode(k, (uint16_t)(i % MODEL_BUCKETS), (uint64_t)i * 7919);
	} else {
		char name[32];
		int n = snprintf(name, sizeof(name), "file-%d", i);
		SH_ASSERT_OK(
		    meta_key_dentry(k, (uint16_t)(i % MODEL_BUCKETS), 42, name, (size_t)n));
	}
}

/* What h reads as of version at: its value, or -1. */
static inline int
model_at(const struct hist *h, uint64_t at)
{
	int v = -1;

	for (int i = 0; i < h->n; i++)
		if (h->ver[i] <= at)
			v = h->val[i];
	return v;
}

/* LMDB's order of logical keys: bytes, then the shorter first. */
static inline int
model_keycmp(const struct meta_key *a, const struct meta_key *b)
{
	int c = memcmp(a->b, b->b, a->len < b->len ? a->len : b->len);

	return c != 0 ? c : (a->len > b->len) - (a->len < b->len);
}

struct model_floor {
	struct meta_key k;
	int val;
};

static inline int
model_on_floor(void *arg, const uint8_t *key, size_t klen, const void *val, size_t vlen)
{
	struct model_floor *f = arg;

	SH_ASSERT(klen <= META_KEY_MAX);
	SH_ASSERT_EQ(vlen, sizeof(int));
	memcpy(f->k.b, key, klen);
	f->k.len = (uint8_t)klen;
	memcpy(&f->val, val, sizeof(int));
	return 0;
}

/* meta_floor of probe in its bucket as of at finds what the model says (want[j]: key j's value). */
static inline void
model_check_floor_of(struct meta_txn *t, const struct meta_key *probe, const int *want, int nkeys,
		     uint64_t at)
{
	struct meta_key pk = *probe, kb = { 0 }, kj;
	struct model_floor f = { 0 };
	int best = -1, rc;

	pk.len = 2; /* the bucket */
	for (int j = 0; j < nkeys; j++) {
		key_of(&kj, j);
		if (want[j] < 0 || memcmp(kj.b, pk.b, 2) != 0 || model_keycmp(&kj, probe) > 0)
			continue;
		if (best < 0 || model_keycmp(&kj, &kb) > 0) {
			best = j;
			kb = kj;
		}
	}
	rc = meta_floor(t, &pk, probe, at, model_on_floor, &f);
	if (best < 0) {
		SH_ASSERT_MSG(rc == -ENOENT, "floor at %#llx: rc %d, want none (seed %llu)",
			      (unsigned long long)at, rc, (unsigned long long)sh_test_seed());
		return;
	}
	SH_ASSERT_MSG(rc == 0 && model_keycmp(&f.k, &kb) == 0 && f.val == want[best],
		      "floor at %#llx: rc %d value %d, want key %d value %d (seed %llu)",
		      (unsigned long long)at, rc, f.val, best, want[best],
		      (unsigned long long)sh_test_seed());
}

/* meta_floor of every key of the model, and of each bucket's ends, as of at. */
static inline void
model_check_floor(struct meta_txn *t, const int *want, int nkeys, uint64_t at)
{
	struct meta_key k;

	for (int i = 0; i < nkeys; i++) {
		key_of(&k, i);
		model_check_floor_of(t, &k, want, nkeys, at);
	}
	for (uint16_t b = 0; b < MODEL_BUCKETS; b++) {
		meta_key_kind(&k, b, 0);
		model_check_floor_of(t, &k, want, nkeys, at);
		meta_key_id(&k, b, 0xff, UINT64_MAX);
		model_check_floor_of(t, &k, want, nkeys, at);
	}
}

/*
 * meta_keep.moved into counts (arg: a struct model_counts): values are
 * ints below n, each counted by what moved says of it.
 */
struct model_counts {
	int *c;
	int n;
};

static inline int
model_on_moved(void *arg, const struct meta_key *k, const void *val, size_t len, int delta)
{
	struct model_counts *m = arg;
	int v;

	(void)k;
	SH_ASSERT_EQ(len, sizeof(v));
	memcpy(&v, val, sizeof(v));
	SH_ASSERT(v >= 0 && v < m->n);
	m->c[v] += delta;
	return 0;
}

/* f (meta_settle or meta_drop_branch) over every bucket, 3 keys a page, in one transaction. */
typedef int (*model_page_fn)(struct meta_txn *, const struct meta_key *, const uint8_t *, size_t,
			     unsigned, const struct meta_keep *, uint8_t *, size_t *, uint64_t *);

static inline void
model_page_all(struct meta_db *db, model_page_fn f, const struct meta_keep *kp)
{
	struct meta_txn *t;

	SH_ASSERT_OK(meta_txn_begin(db, true, &t));
	for (uint16_t b = 0; b < MODEL_BUCKETS; b++) {
		uint8_t next[META_KEY_MAX];
		size_t nlen = 0;
		struct meta_key pk;

		meta_key_kind(&pk, b, META_K_INODE);
		pk.len = 2; /* the whole bucket: every kind */
		do {
			uint8_t after[META_KEY_MAX];
			size_t alen = nlen;

			memcpy(after, next, nlen);
			SH_ASSERT_OK(
			    f(t, &pk, alen ? after : NULL, alen, 3, kp, next, &nlen, NULL));
		} while (nlen > 0);
	}
	SH_ASSERT_OK(meta_txn_commit(t));
}

#endif /* SH_TESTS_UNIT_META_VERSIONS_MODEL_H */
