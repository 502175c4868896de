// SPDX-License-Identifier: Apache-2.0
/* Allocation wrappers: live counting, overflow checks, and failing each allocation in turn. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>

#include "../../../src/base/base.h"
#include "../../lib/test.h"

TEST(alloc_counts_live)
{
	int64_t before = sh_alloc_live();
	void *a = sh_malloc(10), *b = sh_calloc(3, 4), *c = sh_aligned_alloc(4096, 100);
	char *d = sh_strdup("shoal");

	SH_ASSERT_NOT_NULL(a);
	SH_ASSERT_NOT_NULL(b);
	SH_ASSERT_NOT_NULL(c);
	SH_ASSERT_EQ((uintptr_t)c % 4096, 0);
	SH_ASSERT_STREQ(d, "shoal");
	SH_ASSERT_EQ(sh_alloc_live() - before, 4);
	a = sh_realloc(a, 1000);
	SH_ASSERT_EQ(sh_alloc_live() - before, 4);
	sh_free(a);
	sh_free(b);
	sh_free(c);
	sh_free(d);
	sh_free(NULL);
	SH_ASSERT_EQ(sh_alloc_live(), before);
}

TEST(alloc_array_overflow)
{
	SH_ASSERT_NULL(sh_alloc_array(SIZE_MAX / 2, 3));
	void *p = sh_alloc_array(4, 8);

	SH_ASSERT_NOT_NULL(p);
	SH_ASSERT_EQ(((uint64_t *)p)[3], 0);
	sh_free(p);
}

/* A small operation that allocates several times and must clean up on any failure. */
static int
build_table(struct sh_htable *t, struct sh_buf **bufs, int n)
{
	int rc = sh_htable_init(t, 4);

	if (rc < 0)
		return rc;
	for (int i = 0; i < n; i++) {
		bufs[i] = sh_buf_create(64, 0);
		if (bufs[i] == NULL) {
			while (i-- > 0)
				sh_buf_put(bufs[i]);
			sh_htable_fini(t);
			return -ENOMEM;
		}
	}
	return 0;
}

TEST(alloc_fail_each_in_turn)
{
	struct sh_htable t;
	struct sh_buf *bufs[5];
	int64_t live = sh_alloc_live();
	int failures = 0;

	for (int nth = 1;; nth++) {
		char mode[32];
		int rc;

		snprintf(mode, sizeof(mode), "nth=%d", nth);
		SH_ASSERT_OK(sh_fault_arm(FP_ALLOC, mode, NULL, 0));
		rc = build_table(&t, bufs, 5);
		sh_fault_arm(FP_ALLOC, "off", NULL, 0);
		if (rc == 0) {
			for (int i = 0; i < 5; i++)
				sh_buf_put(bufs[i]);
			sh_htable_fini(&t);
			break;
		}
		SH_ASSERT_ERR(rc, -ENOMEM);
		SH_ASSERT_EQ(sh_alloc_live(), live);
		failures++;
	}
	/* table + 5 x (struct + data) = 11 allocations, each failed once */
	SH_ASSERT_EQ(failures, 11);
	SH_ASSERT_EQ(sh_alloc_live(), live);
}
