// SPDX-License-Identifier: Apache-2.0
/* Intrusive lists and the seeded random generator. */
#include "../../../src/base/base.h"
#include "../../lib/test.h"

struct elem {
	struct sh_list link;
	int v;
};

TEST(list_basic)
{
	struct sh_list h = SH_LIST_INIT(h), *pos, *tmp;
	struct elem e[4];
	int sum = 0, order[4], k = 0;

	SH_ASSERT(sh_list_empty(&h));
	for (int i = 0; i < 4; i++) {
		e[i].v = i;
		if (i % 2)
			sh_list_add_tail(&h, &e[i].link);
		else
			sh_list_add(&h, &e[i].link);
	}
	sh_list_for_each (pos, &h)
		order[k++] = sh_list_entry(pos, struct elem, link)->v;
	SH_ASSERT_EQ(order[0], 2);
	SH_ASSERT_EQ(order[1], 0);
	SH_ASSERT_EQ(order[2], 1);
	SH_ASSERT_EQ(order[3], 3);
	sh_list_for_each_safe (pos, tmp, &h) {
		sum += sh_list_entry(pos, struct elem, link)->v;
		sh_list_del(pos);
		sh_list_del(pos); /* harmless twice */
	}
	SH_ASSERT_EQ(sum, 6);
	SH_ASSERT(sh_list_empty(&h));
	SH_ASSERT_NULL(sh_list_pop(&h));
}

TEST(rand_deterministic_and_bounded)
{
	struct sh_rand a, b;
	int hist[10] = { 0 };

	sh_rand_seed(&a, 42);
	sh_rand_seed(&b, 42);
	for (int i = 0; i < 1000; i++)
		SH_ASSERT_EQ(sh_rand_u64(&a), sh_rand_u64(&b));
	sh_rand_seed(&b, 43);
	SH_ASSERT_NE(sh_rand_u64(&a), sh_rand_u64(&b));
	for (int i = 0; i < 100000; i++) {
		uint64_t x = sh_rand_below(&a, 10);

		SH_ASSERT_LT(x, 10);
		hist[x]++;
	}
	for (int i = 0; i < 10; i++) {
		SH_ASSERT_GT(hist[i], 9500);
		SH_ASSERT_LT(hist[i], 10500);
	}
	SH_ASSERT_EQ(sh_rand_below(&a, 0), 0);
	SH_ASSERT_EQ(sh_rand_range(&a, 5, 5), 5);
	for (int i = 0; i < 1000; i++) {
		double d = sh_rand_double(&a);

		SH_ASSERT(d >= 0.0 && d < 1.0);
	}
	SH_ASSERT_EQ(sh_rand_chance(&a, 0.0), 0);
	SH_ASSERT_EQ(sh_rand_chance(&a, 1.0), 1);
}
