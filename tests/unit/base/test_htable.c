// SPDX-License-Identifier: Apache-2.0
/* The intrusive hash table: insert, find, remove, growth and iteration. */
#include "../../../src/base/base.h"
#include "../../lib/test.h"

struct item {
	struct sh_hnode hn;
	uint64_t key;
	bool in;
};

static bool
item_eq(const struct sh_hnode *n, const void *key)
{
	return sh_container_of(n, struct item, hn)->key == *(const uint64_t *)key;
}

static struct item *
find(struct sh_htable *t, uint64_t key)
{
	struct sh_hnode *n = sh_htable_find(t, sh_hash_u64(key) & 0xff, &key, item_eq);

	return n ? sh_container_of(n, struct item, hn) : NULL;
}

TEST(htable_model)
{
	enum { N = 5000 };
	static struct item items[N];
	struct sh_htable t;
	struct sh_rand r;
	size_t count = 0;

	sh_rand_seed(&r, sh_test_seed());
	SH_ASSERT_OK(sh_htable_init(&t, 0));
	for (int i = 0; i < N; i++)
		items[i].key = (uint64_t)i * 7919;
	/* hash masked to 8 bits: many collisions on purpose */
	for (int step = 0; step < 50000; step++) {
		struct item *it = &items[sh_rand_below(&r, N)];

		if (!it->in) {
			sh_htable_insert(&t, &it->hn, sh_hash_u64(it->key) & 0xff);
			it->in = true;
			count++;
		} else if (sh_rand_chance(&r, 0.4)) {
			sh_htable_remove(&t, &it->hn);
			it->in = false;
			count--;
		}
		SH_ASSERT(find(&t, it->key) == (it->in ? it : NULL));
	}
	SH_ASSERT_EQ(sh_htable_count(&t), count);
	{
		size_t iter, seen = 0;
		struct sh_hnode *n, *next;

		for (n = sh_htable_first(&t, &iter); n != NULL; n = next) {
			next = sh_htable_next(&t, &iter, n);
			SH_ASSERT(sh_container_of(n, struct item, hn)->in);
			sh_htable_remove(&t, n); /* removal during iteration */
			seen++;
		}
		SH_ASSERT_EQ(seen, count);
		SH_ASSERT_EQ(sh_htable_count(&t), 0);
	}
	sh_htable_fini(&t);
}
