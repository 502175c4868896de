// SPDX-License-Identifier: Apache-2.0
/* The min-heap against a brute-force model under random pushes, pops and removals. */
#include "../../../src/base/base.h"
#include "../../lib/test.h"

#define N 2000

TEST(heap_random_against_model)
{
	static struct sh_heap_node nodes[N];
	struct sh_heap h;
	struct sh_rand r;

	sh_heap_init(&h);
	sh_rand_seed(&r, sh_test_seed());
	for (int i = 0; i < N; i++)
		sh_heap_node_init(&nodes[i]);
	for (int step = 0; step < 20000; step++) {
		int op = (int)sh_rand_below(&r, 3);
		struct sh_heap_node *n = &nodes[sh_rand_below(&r, N)];

		if (op == 0 && !sh_heap_node_queued(n)) {
			SH_ASSERT_OK(sh_heap_push(&h, n, sh_rand_below(&r, 100)));
		} else if (op == 1) {
			sh_heap_remove(&h, n);
			SH_ASSERT(!sh_heap_node_queued(n));
		} else if (op == 2 && h.n > 0) {
			struct sh_heap_node *min = NULL, *top;

			for (int i = 0; i < N; i++) {
				struct sh_heap_node *c = &nodes[i];

				if (sh_heap_node_queued(c) &&
				    (min == NULL || c->key < min->key ||
				     (c->key == min->key && c->seq < min->seq)))
					min = c;
			}
			top = sh_heap_pop(&h);
			SH_ASSERT(top == min);
		}
	}
	/* drained in order, ties in insertion order */
	{
		uint64_t lk = 0, ls = 0;
		struct sh_heap_node *n;
		int first = 1;

		while ((n = sh_heap_pop(&h)) != NULL) {
			SH_ASSERT(first || n->key > lk || (n->key == lk && n->seq > ls));
			lk = n->key;
			ls = n->seq;
			first = 0;
		}
	}
	sh_heap_fini(&h);
}
