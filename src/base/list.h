/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Intrusive circular doubly linked lists (kernel style). A list head is a
 * node whose next/prev point to itself when empty. Nodes are owned by the
 * caller; the list never allocates.
 */
#ifndef SH_BASE_LIST_H
#define SH_BASE_LIST_H

#include <stdbool.h>

#include "compiler.h"

struct sh_list {
	struct sh_list *next;
	struct sh_list *prev;
};

#define SH_LIST_INIT(name)       \
	{                        \
		&(name), &(name) \
	}

static inline void
sh_list_init(struct sh_list *h)
{
	h->next = h;
	h->prev = h;
}

static inline bool
sh_list_empty(const struct sh_list *h)
{
	return h->next == h;
}

static inline void
sh_list_insert_between(struct sh_list *n, struct sh_list *prev, struct sh_list *next)
{
	n->next = next;
	n->prev = prev;
	prev->next = n;
	next->prev = n;
}

/* Append n at the tail of h. */
static inline void
sh_list_add_tail(struct sh_list *h, struct sh_list *n)
{
	sh_list_insert_between(n, h->prev, h);
}

/* Insert n at the head of h. */
static inline void
sh_list_add(struct sh_list *h, struct sh_list *n)
{
	sh_list_insert_between(n, h, h->next);
}

/* Unlink n and leave it self-linked, so a second del is harmless. */
static inline void
sh_list_del(struct sh_list *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	sh_list_init(n);
}

static inline struct sh_list *
sh_list_pop(struct sh_list *h)
{
	struct sh_list *n;

	if (sh_list_empty(h))
		return NULL;
	n = h->next;
	sh_list_del(n);
	return n;
}

#define sh_list_entry(ptr, type, member) sh_container_of(ptr, type, member)

#define sh_list_for_each(pos, head) for ((pos) = (head)->next; (pos) != (head); (pos) = (pos)->next)

/* Safe against removal of pos inside the loop. */
#define sh_list_for_each_safe(pos, tmp, head)                            \
	for ((pos) = (head)->next, (tmp) = (pos)->next; (pos) != (head); \
	     (pos) = (tmp), (tmp) = (pos)->next)

#endif /* SH_BASE_LIST_H */
