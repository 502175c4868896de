/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Intrusive binary min-heap ordered by (key, seq): timers and simulator
 * events. seq breaks ties in insertion order, which keeps the simulator
 * deterministic. Each node knows its slot, so removal is O(log n).
 * The heap owns only its array of pointers; nodes belong to the caller.
 */
#ifndef SH_BASE_HEAP_H
#define SH_BASE_HEAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SH_HEAP_NONE UINT32_MAX

struct sh_heap_node {
	uint64_t key;
	uint64_t seq;
	uint32_t idx; /* SH_HEAP_NONE when not in a heap */
};

struct sh_heap {
	struct sh_heap_node **a;
	uint32_t n;
	uint32_t cap;
	uint64_t next_seq;
};

void sh_heap_init(struct sh_heap *h);
void sh_heap_fini(struct sh_heap *h);

static inline void
sh_heap_node_init(struct sh_heap_node *n)
{
	n->idx = SH_HEAP_NONE;
}

static inline bool
sh_heap_node_queued(const struct sh_heap_node *n)
{
	return n->idx != SH_HEAP_NONE;
}

/* Insert n with key; n must not be queued. -ENOMEM if the array cannot grow. */
int sh_heap_push(struct sh_heap *h, struct sh_heap_node *n, uint64_t key);
/* Remove n if queued; a no-op otherwise. */
void sh_heap_remove(struct sh_heap *h, struct sh_heap_node *n);
static inline struct sh_heap_node *
sh_heap_peek(const struct sh_heap *h)
{
	return h->n ? h->a[0] : NULL;
}
struct sh_heap_node *sh_heap_pop(struct sh_heap *h);

#endif /* SH_BASE_HEAP_H */
