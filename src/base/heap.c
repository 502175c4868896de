// SPDX-License-Identifier: Apache-2.0
/* Binary min-heap on an array of node pointers; see heap.h. */
#include <errno.h>

#include "alloc.h"
#include "heap.h"

void
sh_heap_init(struct sh_heap *h)
{
	h->a = NULL;
	h->n = 0;
	h->cap = 0;
	h->next_seq = 0;
}

void
sh_heap_fini(struct sh_heap *h)
{
	for (uint32_t i = 0; i < h->n; i++)
		h->a[i]->idx = SH_HEAP_NONE;
	sh_free(h->a);
	sh_heap_init(h);
}

static inline bool
less(const struct sh_heap_node *x, const struct sh_heap_node *y)
{
	return x->key < y->key || (x->key == y->key && x->seq < y->seq);
}

static inline void
place(struct sh_heap *h, uint32_t i, struct sh_heap_node *n)
{
	h->a[i] = n;
	n->idx = i;
}

static void
sift_up(struct sh_heap *h, uint32_t i)
{
	struct sh_heap_node *n = h->a[i];

	while (i > 0) {
		uint32_t parent = (i - 1) / 2;

		if (!less(n, h->a[parent]))
			break;
		place(h, i, h->a[parent]);
		i = parent;
	}
	place(h, i, n);
}

static void
sift_down(struct sh_heap *h, uint32_t i)
{
	struct sh_heap_node *n = h->a[i];

	for (;;) {
		uint32_t c = 2 * i + 1;

		if (c >= h->n)
			break;
		if (c + 1 < h->n && less(h->a[c + 1], h->a[c]))
			c++;
		if (!less(h->a[c], n))
			break;
		place(h, i, h->a[c]);
		i = c;
	}
	place(h, i, n);
}

int
sh_heap_push(struct sh_heap *h, struct sh_heap_node *n, uint64_t key)
{
	if (h->n == h->cap) {
		uint32_t cap = h->cap ? h->cap * 2 : 64;
		struct sh_heap_node **a = sh_realloc(h->a, cap * sizeof(*a));

		if (a == NULL)
			return -ENOMEM;
		h->a = a;
		h->cap = cap;
	}
	n->key = key;
	n->seq = h->next_seq++;
	place(h, h->n++, n);
	sift_up(h, n->idx);
	return 0;
}

void
sh_heap_remove(struct sh_heap *h, struct sh_heap_node *n)
{
	uint32_t i = n->idx;
	struct sh_heap_node *last;

	if (i == SH_HEAP_NONE || i >= h->n || h->a[i] != n)
		return;
	n->idx = SH_HEAP_NONE;
	last = h->a[--h->n];
	if (i == h->n)
		return;
	place(h, i, last);
	if (i > 0 && less(last, h->a[(i - 1) / 2]))
		sift_up(h, i);
	else
		sift_down(h, i);
}

struct sh_heap_node *
sh_heap_pop(struct sh_heap *h)
{
	struct sh_heap_node *top = sh_heap_peek(h);

	if (top != NULL)
		sh_heap_remove(h, top);
	return top;
}
