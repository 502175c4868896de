// SPDX-License-Identifier: Apache-2.0
/*
 * The balance's planner (msvc_heal_fill.c) on its own: budgets from the
 * targets' fill, moves off the full ones onto the empty ones within them,
 * one failure domain per fragment, never onto a target down or gone.
 */
#include <stdlib.h>
#include <string.h>

#include "../../../src/meta/msvc_heal_int.h"
#include "../../lib/test.h"

#define NT   300 /* targets, a domain each; the last 30 joined empty */
#define FRAG 4096u

struct bal {
	struct place_target t[NT];
	uint64_t count[NT];
	uint64_t (*frag)[6]; /* per stripe: its targets' ids */
	unsigned nstripes;
	struct mheal h;
};

static void
bal_init(struct bal *b, unsigned nstripes)
{
	memset(b, 0, sizeof(*b));
	for (unsigned i = 0; i < NT; i++) /* ids not in index order: the plan sorts them */
		b->t[i] = (struct place_target){ .id = 1 + (i * 7919) % 1009,
						 .domain = i,
						 .weight = 1ull << 30 };
	for (unsigned i = NT - 30; i < NT; i++)
		b->t[i].weight = 0; /* not there yet */
	b->nstripes = nstripes;
	b->frag = sh_calloc(nstripes, sizeof(*b->frag));
	SH_ASSERT(b->frag != NULL);
	for (unsigned s = 0; s < nstripes; s++) {
		SH_ASSERT_OK(place_stripe(b->t, NT, s + 1, 6, b->frag[s]));
		for (unsigned k = 0; k < 6; k++)
			for (unsigned i = 0; i < NT; i++)
				b->count[i] += b->t[i].id == b->frag[s][k];
	}
	for (unsigned i = NT - 30; i < NT; i++)
		b->t[i].weight = 1ull << 30; /* joined */
}

static unsigned
index_of(const struct bal *b, uint64_t id)
{
	for (unsigned i = 0; i < NT; i++)
		if (b->t[i].id == id)
			return i;
	SH_ASSERT(false);
	return 0;
}

static int
by_target(const void *x, const void *y)
{
	uint64_t a = ((const struct hfill *)x)->target, c = ((const struct hfill *)y)->target;

	return a < c ? -1 : a > c;
}

/* One pass: budgets from the counts, every stripe planned; the fragments moved. */
static uint64_t
bal_pass(struct bal *b, struct plan *pl)
{
	uint64_t moved = 0, live = 0;

	b->h.fill = sh_calloc(NT, sizeof(*b->h.fill));
	SH_ASSERT(b->h.fill != NULL);
	b->h.nfill = NT;
	for (unsigned i = 0; i < NT; i++) {
		b->h.fill[i] = (struct hfill){ .target = b->t[i].id,
					       .live = b->count[i] * FRAG,
					       .capacity = 1ull << 30 };
		live += b->count[i] * FRAG;
	}
	qsort(b->h.fill, NT, sizeof(b->h.fill[0]), by_target); /* as fill_end keeps them */
	b->h.mine = live;
	heal_balance_budgets(&b->h, 0.5);
	for (unsigned s = 0; s < b->nstripes; s++) {
		struct meta_extent loc = { .stripe = s + 1, .d = 4, .p = 2, .frag = FRAG };
		uint64_t to[META_FRAGS_MAX];
		uint32_t make;

		memcpy(loc.targets, b->frag[s], sizeof(b->frag[s]));
		if (!heal_plan_balance(&b->h, pl, &loc, &make, to))
			continue;
		for (unsigned k = 0; k < 6; k++) {
			if (!(make & 1u << k)) {
				SH_ASSERT_EQ(to[k], loc.targets[k]); /* the others stay */
				continue;
			}
			SH_ASSERT_NE(to[k], loc.targets[k]);
			SH_ASSERT(heal_plan_target(pl, to[k])->weight > 0);
			b->count[index_of(b, loc.targets[k])]--;
			b->count[index_of(b, to[k])]++;
			b->frag[s][k] = to[k];
			moved++;
		}
		for (unsigned k = 0; k < 6; k++) /* still a domain each */
			for (unsigned m = 0; m < k; m++)
				SH_ASSERT_NE(heal_plan_target(pl, to[k])->domain,
					     heal_plan_target(pl, to[m])->domain);
	}
	sh_free(b->h.fill);
	sh_free(b->h.take);
	b->h.fill = NULL;
	b->h.take = NULL;
	b->h.ntake = 0;
	return moved;
}

static int
by_id(const void *x, const void *y)
{
	uint64_t a = ((const struct place_target *)x)->id, c = ((const struct place_target *)y)->id;

	return a < c ? -1 : a > c;
}

/*
 * 30 targets join 270 holding 20,000 stripes: one pass moves about what
 * the new ones hold at the mean fill (no more: only the surplus moves),
 * each new one ends near the mean, and a new one that is down meanwhile
 * gets nothing.
 */
TEST(heal_balance_moves_the_surplus_onto_targets_that_joined)
{
	static struct bal b;
	static struct place_target sorted[NT];
	struct plan pl = { .t = sorted, .nt = NT };
	uint64_t moved, total = 0, least;
	unsigned down = NT - 1;

	bal_init(&b, 20000);
	memcpy(sorted, b.t, sizeof(sorted));
	qsort(sorted, NT, sizeof(sorted[0]), by_id); /* (as heal_plan_targets sorts them) */
	for (unsigned i = 0; i < NT; i++)
		if (sorted[i].id == b.t[down].id)
			sorted[i].weight = 0; /* down since it joined */
	for (unsigned i = 0; i < NT; i++)
		total += b.count[i];
	least = total * 29 / (NT - 1); /* what the 29 new ones up hold at the mean */
	moved = bal_pass(&b, &pl);
	SH_ASSERT_MSG(moved >= least * 95 / 100 && moved <= least * 110 / 100,
		      "moved %llu fragments, the least is %llu", (unsigned long long)moved,
		      (unsigned long long)least);
	SH_ASSERT_EQ(b.count[down], 0u);
	for (unsigned i = NT - 30; i < NT - 1; i++)
		SH_ASSERT_MSG(b.count[i] * 100 >= total / NT * 90, "target %u holds %llu of %llu",
			      i, (unsigned long long)b.count[i], (unsigned long long)(total / NT));
	sh_free(b.frag);
}
