/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Buckets of one LMDB environment driven by their commands, for the tests
 * of what crosses buckets (the dedup index: tests/unit/meta, tests/sim/meta).
 */
#ifndef SH_TESTS_META_APPLY_H
#define SH_TESTS_META_APPLY_H

#include "../../../src/meta/meta_cmd.h"
#include "../../../src/meta/meta_dedup.h"
#include "../../lib/test.h"

/* Apply c in bucket (of nb), its own transaction, kept only if it succeeds: the status. */
static inline int
meta_test_apply(struct meta_db *db, uint32_t nb, uint16_t bucket, struct meta_cmd *c,
		struct meta_result *r)
{
	struct meta_txn *t;
	struct meta_bucket b;

	SH_ASSERT_OK(meta_txn_begin(db, true, &t));
	b = (struct meta_bucket){ .t = t, .bucket = bucket, .nbuckets = nb, .ver = 1 };
	c->ver = 1;
	meta_cmd_apply(&b, c, r);
	if (r->status == 0)
		SH_ASSERT_OK(meta_txn_commit(t));
	else
		meta_txn_abort(t);
	return r->status;
}

/* A read-only look at bucket bk (of nb) as b: body runs with it. */
#define META_LOOK(db, nb, bk, b, body)                                                          \
	do {                                                                                    \
		struct meta_txn *t_;                                                            \
		SH_ASSERT_OK(meta_txn_begin((db), false, &t_));                                 \
		struct meta_bucket b = { .t = t_, .bucket = (bk), .nbuckets = (nb), .ver = 1 }; \
		body;                                                                           \
		meta_txn_abort(t_);                                                             \
	} while (0)

#endif /* SH_TESTS_META_APPLY_H */
