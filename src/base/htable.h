/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Intrusive chained hash table. The caller embeds a struct sh_hnode in its
 * object, computes a 64-bit hash of the key and supplies an equality
 * function; the table stores only pointers and never owns the objects.
 * It grows (doubling) when the load passes 1; if growing fails for lack of
 * memory, inserts still succeed with longer chains.
 */
#ifndef SH_BASE_HTABLE_H
#define SH_BASE_HTABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sh_hnode {
	struct sh_hnode *next;
	uint64_t hash;
};

struct sh_htable {
	struct sh_hnode **b;
	size_t nb; /* power of two */
	size_t n;
};

typedef bool (*sh_htable_eq_fn)(const struct sh_hnode *n, const void *key);

/* hint: expected number of entries (0 for a small default). -ENOMEM on failure. */
int sh_htable_init(struct sh_htable *t, size_t hint);
/* Frees the bucket array; the objects are the caller's. */
void sh_htable_fini(struct sh_htable *t);
void sh_htable_insert(struct sh_htable *t, struct sh_hnode *n, uint64_t hash);
struct sh_hnode *sh_htable_find(const struct sh_htable *t, uint64_t hash, const void *key,
				sh_htable_eq_fn eq);
/* Remove n, which must be in t. */
void sh_htable_remove(struct sh_htable *t, struct sh_hnode *n);

static inline size_t
sh_htable_count(const struct sh_htable *t)
{
	return t->n;
}

/*
 * Iteration: for (n = sh_htable_first(t, &it); n; n = sh_htable_next(t, &it, n)).
 * Removing the current node during iteration is allowed if the next one is
 * fetched first; inserting during iteration is not.
 */
struct sh_hnode *sh_htable_first(const struct sh_htable *t, size_t *it);
struct sh_hnode *sh_htable_next(const struct sh_htable *t, size_t *it, struct sh_hnode *cur);

#endif /* SH_BASE_HTABLE_H */
