// SPDX-License-Identifier: Apache-2.0
/* Intrusive chained hash table; see htable.h. */
#include <errno.h>

#include "alloc.h"
#include "htable.h"

int
sh_htable_init(struct sh_htable *t, size_t hint)
{
	size_t nb = 16;

	while (nb < hint && nb < ((size_t)1 << 40))
		nb <<= 1;
	t->b = sh_alloc_array(nb, sizeof(*t->b));
	if (t->b == NULL)
		return -ENOMEM;
	t->nb = nb;
	t->n = 0;
	return 0;
}

void
sh_htable_fini(struct sh_htable *t)
{
	sh_free(t->b);
	t->b = NULL;
	t->nb = 0;
	t->n = 0;
}

static void
grow(struct sh_htable *t)
{
	size_t nb = t->nb * 2;
	struct sh_hnode **b = sh_alloc_array(nb, sizeof(*b));

	if (b == NULL)
		return;
	for (size_t i = 0; i < t->nb; i++) {
		struct sh_hnode *n = t->b[i], *next;

		for (; n != NULL; n = next) {
			next = n->next;
			n->next = b[n->hash & (nb - 1)];
			b[n->hash & (nb - 1)] = n;
		}
	}
	sh_free(t->b);
	t->b = b;
	t->nb = nb;
}

void
sh_htable_insert(struct sh_htable *t, struct sh_hnode *n, uint64_t hash)
{
	size_t i;

	if (t->n >= t->nb)
		grow(t);
	i = hash & (t->nb - 1);
	n->hash = hash;
	n->next = t->b[i];
	t->b[i] = n;
	t->n++;
}

struct sh_hnode *
sh_htable_find(const struct sh_htable *t, uint64_t hash, const void *key, sh_htable_eq_fn eq)
{
	struct sh_hnode *n;

	for (n = t->b[hash & (t->nb - 1)]; n != NULL; n = n->next)
		if (n->hash == hash && eq(n, key))
			return n;
	return NULL;
}

void
sh_htable_remove(struct sh_htable *t, struct sh_hnode *n)
{
	struct sh_hnode **pp = &t->b[n->hash & (t->nb - 1)];

	for (; *pp != NULL; pp = &(*pp)->next) {
		if (*pp == n) {
			*pp = n->next;
			n->next = NULL;
			t->n--;
			return;
		}
	}
}

static struct sh_hnode *
scan(const struct sh_htable *t, size_t *it)
{
	for (; *it < t->nb; (*it)++)
		if (t->b[*it] != NULL)
			return t->b[*it];
	return NULL;
}

struct sh_hnode *
sh_htable_first(const struct sh_htable *t, size_t *it)
{
	*it = 0;
	return scan(t, it);
}

struct sh_hnode *
sh_htable_next(const struct sh_htable *t, size_t *it, struct sh_hnode *cur)
{
	if (cur->next != NULL)
		return cur->next;
	(*it)++;
	return scan(t, it);
}
