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
