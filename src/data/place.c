// SPDX-License-Identifier: Apache-2.0
/* Stripe placement by weighted rendezvous hashing over failure domains (place.h). */
#include <math.h>
#include <string.h>

#include "place.h"

/* u in (0, 1) from (stripe, target). */
static double
unit(uint64_t stripe, uint64_t target)
{
	uint64_t h = sh_hash_u64(stripe * 0x9E3779B97F4A7C15ull ^ sh_hash_u64(target + 1));

	return ((double)(h >> 11) + 0.5) / 9007199254740992.0; /* 53 bits, never 0 or 1 */
}

/*
 * Every target's score for stripe, once (the fragments' picks compare them
 * again and again: at 1,000 targets, scoring once per pick was 6 logs per
 * target per 4+2 stripe). 0: weight 0, never chosen. A small table on the
 * stack; above PLACE_STACK targets, *heap (the caller frees it).
 */
#define PLACE_STACK 256

static double *
score_all(const struct place_target *t, unsigned nt, uint64_t stripe, double *stack, double **heap)
{
	double *s = stack;

	*heap = NULL;
	if (nt > PLACE_STACK && (s = *heap = sh_malloc(nt * sizeof(*s))) == NULL)
		return NULL;
	for (unsigned i = 0; i < nt; i++)
		s[i] = t[i].weight == 0 ? 0 : (double)t[i].weight / -log(unit(stripe, t[i].id));
	return s;
}

/* The best target for the next fragment, of a domain not used yet. */
static int
best(const struct place_target *t, unsigned nt, const double *sc, const uint32_t *used_dom,
     unsigned got)
{
	double top = 0;
	int bi = -1;

	for (unsigned i = 0; i < nt; i++) {
		bool clash = false;
		double s = sc[i];

		if (t[i].weight == 0)
			continue;
		for (unsigned k = 0; k < got && !clash; k++)
			clash = used_dom[k] == t[i].domain;
		if (clash)
			continue;
		if (bi < 0 || s > top || (s == top && t[i].id < t[bi].id)) {
			top = s;
			bi = (int)i;
		}
	}
	return bi;
}

/*
 * A degraded pick: the target of the domain holding the fewest of the
 * stripe's fragments so far (at most max each), a target not used yet
 * before one used, then by score. -1 if every domain is full.
 */
static int
best_spread(const struct place_target *t, unsigned nt, const double *sc, const uint32_t *used_dom,
	    const uint64_t *used_tgt, unsigned got, unsigned max)
{
	unsigned bcount = 0;
	bool bused = false;
	double top = 0;
	int bi = -1;

	for (unsigned i = 0; i < nt; i++) {
		unsigned count = 0;
		bool used = false;
		double s = sc[i];

		if (t[i].weight == 0)
			continue;
		for (unsigned k = 0; k < got; k++) {
			count += used_dom[k] == t[i].domain;
			used = used || used_tgt[k] == t[i].id;
		}
		if (count >= max)
			continue;
		if (bi >= 0 && (count > bcount || (count == bcount && used && !bused) ||
				(count == bcount && used == bused &&
				 (s < top || (s == top && t[i].id > t[bi].id)))))
			continue;
		bcount = count;
		bused = used;
		top = s;
		bi = (int)i;
	}
	return bi;
}

/*
 * Place n fragments; degraded: when domains run out, the rest are spread
 * over the domains up, at most max_per_domain on any one.
 */
static int
place(const struct place_target *t, unsigned nt, uint64_t stripe, unsigned n, uint64_t *out,
      unsigned max_per_domain, unsigned *shared)
{
	double stack[PLACE_STACK], *heap, *sc;
	uint32_t used[64];
	unsigned got = 0;
	int rc = 0;

	*shared = 0;
	if (n == 0 || n > 64)
		return -EINVAL;
	if ((sc = score_all(t, nt, stripe, stack, &heap)) == NULL)
		return -ENOMEM;
	while (got < n) {
		int bi = best(t, nt, sc, used, got);

		if (bi < 0 && max_per_domain > 1) {
			bi = best_spread(t, nt, sc, used, out, got, max_per_domain);
			*shared += bi >= 0;
		}
		if (bi < 0) {
			rc = -ENOSPC;
			break;
		}
		used[got] = t[bi].domain;
		out[got++] = t[bi].id;
	}
	sh_free(heap);
	return rc;
}

int
place_stripe(const struct place_target *t, unsigned nt, uint64_t stripe, unsigned n, uint64_t *out)
{
	unsigned shared;

	return place(t, nt, stripe, n, out, 1, &shared);
}

int
place_stripe_degraded(const struct place_target *t, unsigned nt, uint64_t stripe, unsigned n,
		      unsigned p, uint64_t *out, unsigned *shared)
{
	return p == 0 ? -ENOSPC : place(t, nt, stripe, n, out, p, shared);
}

int
place_refill(const struct place_target *t, unsigned nt, uint64_t stripe, unsigned n, unsigned p,
	     const uint64_t *cur, uint32_t keep, uint64_t *out, unsigned *shared)
{
	double stack[PLACE_STACK], *heap, *sc;
	uint32_t dom[64];
	uint64_t tgt[64];
	unsigned got = 0;
	int rc = 0;

	*shared = 0;
	if (n == 0 || n > 32 || p == 0)
		return -EINVAL;
	for (unsigned i = 0; i < n; i++) {
		if (!(keep & 1u << i))
			continue;
		dom[got] = UINT32_MAX - i; /* a target gone from the configuration: its own */
		for (unsigned k = 0; k < nt; k++)
			if (t[k].id == cur[i])
				dom[got] = t[k].domain;
		tgt[got++] = out[i] = cur[i];
	}
	if ((sc = score_all(t, nt, stripe, stack, &heap)) == NULL)
		return -ENOMEM;
	for (unsigned i = 0; i < n && rc == 0; i++) {
		int bi;

		if (keep & 1u << i)
			continue;
		bi = best(t, nt, sc, dom, got);
		if (bi < 0) {
			bi = best_spread(t, nt, sc, dom, tgt, got, p);
			*shared += bi >= 0;
		}
		if (bi < 0) {
			rc = -ENOSPC;
			break;
		}
		dom[got] = t[bi].domain;
		tgt[got++] = out[i] = t[bi].id;
	}
	sh_free(heap);
	return rc;
}

unsigned
place_shared(const struct place_target *t, unsigned nt, const uint64_t *cur, unsigned n,
	     uint32_t *which)
{
	uint32_t dom[32];
	unsigned extra = 0;

	*which = 0;
	for (unsigned i = 0; i < n && i < 32; i++) {
		dom[i] = UINT32_MAX - i;
		for (unsigned k = 0; k < nt; k++)
			if (t[k].id == cur[i])
				dom[i] = t[k].domain;
		for (unsigned j = 0; j < i; j++)
			if (dom[j] == dom[i]) {
				*which |= 1u << i; /* the later one of a pair moves */
				extra++;
				break;
			}
	}
	return extra;
}

int
place_targets(const struct cfg *c, struct place_target **out, unsigned *n)
{
	struct place_target *t = sh_calloc(c->ndrives ? c->ndrives : 1, sizeof(*t));

	if (t == NULL)
		return -ENOMEM;
	for (uint32_t i = 0; i < c->ndrives; i++) {
		const struct cfg_node *node = cfg_node_find(c, c->drives[i].node);
		uint32_t dom = 0;

		/* the domain's number: the index of the first node with that domain */
		for (uint32_t k = 0; node != NULL && k < c->nnodes; k++)
			if (strcmp(c->nodes[k].domain, node->domain) == 0) {
				dom = k;
				break;
			}
		t[i] =
		    (struct place_target){ .id = c->drives[i].id,
					   .domain = dom,
					   .weight = node && node->state == CFG_UP &&
							     c->drives[i].state == CFG_DRIVE_ACTIVE
							 ? c->drives[i].capacity
							 : 0 };
	}
	*out = t;
	*n = c->ndrives;
	return 0;
}
