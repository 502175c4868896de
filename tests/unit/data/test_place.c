// SPDX-License-Identifier: Apache-2.0
/* Stripe placement: distinct failure domains, deterministic, proportional to free space, stable. */
#include <math.h>
#include <string.h>

#include "../../../src/base/hash.h"
#include "../../../src/base/rand.h"
#include "../../../src/data/place.h"
#include "../../lib/test.h"

#define NT 24 /* 8 domains x 3 targets */

static void
targets(struct place_target *t)
{
	for (unsigned i = 0; i < NT; i++)
		t[i] =
		    (struct place_target){ .id = 1000 + i, .domain = i / 3, .weight = 1ull << 30 };
}

TEST(place_distinct_domains_and_deterministic)
{
	struct place_target t[NT];
	uint64_t a[9], b[9];

	targets(t);
	for (uint64_t s = 1; s < 2000; s++) {
		SH_ASSERT_OK(place_stripe(t, NT, s, 6, a));
		SH_ASSERT_OK(place_stripe(t, NT, s, 6, b));
		SH_ASSERT_MEMEQ(a, b, 6 * sizeof(a[0]));
		for (int i = 0; i < 6; i++)
			for (int k = 0; k < i; k++)
				SH_ASSERT_NE((a[i] - 1000) / 3, (a[k] - 1000) / 3);
	}
	/* 8 domains cannot hold 9 fragments; nor can targets with no room */
	SH_ASSERT_EQ(place_stripe(t, NT, 1, 9, a), -ENOSPC);
	for (unsigned i = 0; i < NT; i++)
		if (t[i].domain >= 3)
			t[i].weight = 0;
	SH_ASSERT_EQ(place_stripe(t, NT, 1, 4, a), -ENOSPC);
	SH_ASSERT_OK(place_stripe(t, NT, 1, 3, a));
}

TEST(place_follows_free_space)
{
	struct place_target t[NT];
	unsigned hits[NT] = { 0 };
	uint64_t a[6];
	const unsigned stripes = 60000;

	targets(t);
	t[0].weight = 3ull << 30; /* three times the room of its peers */
	for (uint64_t s = 1; s <= stripes; s++) {
		SH_ASSERT_OK(place_stripe(t, NT, s, 6, a));
		for (int i = 0; i < 6; i++)
			hits[a[i] - 1000]++;
	}
	/*
	 * an even share is 6/24 of the stripes; target 0 gets clearly more (and its domain
	 * peers, which lose their domain to it, less); the other domains' targets stay even
	 */
	for (unsigned i = 3; i < NT; i++) {
		double share = (double)hits[i] / stripes;

		SH_ASSERT_MSG(share > 0.20 && share < 0.28, "target %u: share %.3f", i, share);
	}
	SH_ASSERT_MSG((double)hits[0] / stripes > 0.40, "the roomy target: share %.3f",
		      (double)hits[0] / stripes);
	SH_ASSERT_LT(hits[1], hits[3]);
}

TEST(place_adding_a_target_moves_little)
{
	struct place_target t[NT + 1];
	uint64_t a[6], b[6];
	unsigned moved = 0;
	const unsigned stripes = 20000;

	targets(t);
	t[NT] = (struct place_target){ .id = 5000, .domain = 8, .weight = 1ull << 30 };
	for (uint64_t s = 1; s <= stripes; s++) {
		SH_ASSERT_OK(place_stripe(t, NT, s, 6, a));
		SH_ASSERT_OK(place_stripe(t, NT + 1, s, 6, b));
		for (int i = 0; i < 6; i++)
			moved += a[i] != b[i];
	}
	/* the new target takes about its share (6/25 of 6 fragments); reordering costs some more */
	SH_ASSERT_MSG((double)moved / (stripes * 6.0) < 0.25, "moved %.3f of the fragments",
		      (double)moved / (stripes * 6.0));
}

/* With domains down, a stripe still gets all its fragments: spread first, then doubled up. */
TEST(place_degraded_when_domains_are_down)
{
	struct place_target t[6];
	uint64_t a[6];
	unsigned shared;

	for (unsigned i = 0; i < 6; i++)
		t[i] = (struct place_target){ .id = 10 + i, .domain = i, .weight = 1ull << 30 };
	t[5].weight = 0; /* one of six domains down */
	SH_ASSERT_EQ(place_stripe(t, 6, 7, 6, a), -ENOSPC);
	SH_ASSERT_OK(place_stripe_degraded(t, 6, 7, 6, 2, a, &shared));
	SH_ASSERT_EQ(shared, 1u);
	for (int i = 0; i < 6; i++)
		SH_ASSERT_NE(a[i], 15);
	/* the first five fragments are on five distinct domains */
	for (int i = 0; i < 5; i++)
		for (int k = 0; k < i; k++)
			SH_ASSERT_NE(a[i], a[k]);
	/* deterministic */
	{
		uint64_t b[6];

		SH_ASSERT_OK(place_stripe_degraded(t, 6, 7, 6, 2, b, &shared));
		SH_ASSERT_MEMEQ(a, b, sizeof(a));
	}
	for (unsigned i = 0; i < 6; i++)
		t[i].weight = 0;
	SH_ASSERT_EQ(place_stripe_degraded(t, 6, 7, 6, 2, a, &shared), -ENOSPC);
}

/* The fragments of a domain's count. */
static unsigned
on_domain(const struct place_target *t, unsigned nt, const uint64_t *a, unsigned n, uint32_t dom)
{
	unsigned c = 0;

	for (unsigned i = 0; i < n; i++)
		for (unsigned k = 0; k < nt; k++)
			c += t[k].id == a[i] && t[k].domain == dom;
	return c;
}

/*
 * Degraded stripes never put more than P fragments on one domain, so an
 * acknowledged stripe survives one more failure: 4+2 on 4 domains up is
 * 2,2,1,1 (not three on the best one), on 3 it is 2,2,2, on 2 it is refused;
 * a domain's second target is taken before its first again.
 */
TEST(place_degraded_spreads_at_most_p_per_domain)
{
	struct place_target t[12];
	uint64_t a[6];
	unsigned shared;

	for (uint64_t s = 1; s < 300; s++) {
		for (unsigned i = 0; i < 6; i++)
			t[i] = (struct place_target){ .id = 10 + i,
						      .domain = i,
						      .weight = 1ull << 30 };
		t[4].weight = t[5].weight = 0;
		SH_ASSERT_OK(place_stripe_degraded(t, 6, s, 6, 2, a, &shared));
		SH_ASSERT_EQ(shared, 2u);
		for (uint32_t d = 0; d < 4; d++)
			SH_ASSERT(on_domain(t, 6, a, 6, d) >= 1 && on_domain(t, 6, a, 6, d) <= 2);
		t[3].weight = 0;
		SH_ASSERT_OK(place_stripe_degraded(t, 6, s, 6, 2, a, &shared));
		for (uint32_t d = 0; d < 3; d++)
			SH_ASSERT_EQ(on_domain(t, 6, a, 6, d), 2u);
		t[2].weight = 0;
		SH_ASSERT_EQ(place_stripe_degraded(t, 6, s, 6, 2, a, &shared), -ENOSPC);
	}
	/* two targets per domain, 3 domains up: each domain's two fragments on its two targets */
	for (unsigned i = 0; i < 12; i++)
		t[i] = (struct place_target){ .id = 100 + i,
					      .domain = i / 2,
					      .weight = i < 6 ? 1ull << 30 : 0 };
	SH_ASSERT_OK(place_stripe_degraded(t, 12, 5, 6, 2, a, &shared));
	for (int i = 0; i < 6; i++)
		for (int k = 0; k < i; k++)
			SH_ASSERT_NE(a[i], a[k]);
}

/* A rebuild keeps the survivors, moves only the lost ones, to domains the stripe does not use. */
TEST(place_refill_keeps_survivors_and_spreads)
{
	struct place_target t[NT];
	uint64_t cur[6], out[6], again[6];
	unsigned shared, moved = 0;
	uint32_t which;

	targets(t);
	for (uint64_t s = 1; s < 500; s++) {
		SH_ASSERT_OK(place_stripe(t, NT, s, 6, cur));
		SH_ASSERT_EQ(place_shared(t, NT, cur, 6, &which), 0u);
		/* fragment 2's target is lost (it weighs 0): it goes elsewhere, the others stay */
		t[cur[2] - 1000].weight = 0;
		SH_ASSERT_OK(place_refill(t, NT, s, 6, 2, cur, 0x3f & ~(1u << 2), out, &shared));
		SH_ASSERT_EQ(shared, 0u);
		for (int i = 0; i < 6; i++)
			if (i != 2)
				SH_ASSERT_EQ(out[i], cur[i]);
		SH_ASSERT_NE(out[2], cur[2]);
		for (int i = 0; i < 6; i++)
			for (int k = 0; k < i; k++)
				SH_ASSERT_NE((out[i] - 1000) / 3, (out[k] - 1000) / 3);
		/* deterministic: a new leader plans the same */
		SH_ASSERT_OK(place_refill(t, NT, s, 6, 2, cur, 0x3f & ~(1u << 2), again, &shared));
		SH_ASSERT_MEMEQ(out, again, sizeof(out));
		t[cur[2] - 1000].weight = 1ull << 30;
	}
	/* 4 domains up for 6 fragments: two pairs, never more than p = 2 on one */
	for (unsigned i = 0; i < NT; i++)
		t[i].weight = t[i].domain < 4 ? 1ull << 30 : 0;
	for (uint64_t s = 1; s < 200; s++) {
		uint64_t cur2[6] = { 1000, 1003, 1006, 1009, 1012, 1015 }; /* domains 0..5 */

		SH_ASSERT_OK(place_refill(t, NT, s, 6, 2, cur2, 0x0f, out, &shared));
		SH_ASSERT_EQ(shared, 2u);
		SH_ASSERT_EQ(place_shared(t, NT, out, 6, &which), 2u);
		moved += __builtin_popcount(which);
		for (uint32_t d = 0; d < 4; d++)
			SH_ASSERT(on_domain(t, NT, out, 6, d) <= 2);
	}
	SH_ASSERT_EQ(moved, 2u * 199);
	/* one domain up for three fragments: at most p = 2 on it, no room */
	for (unsigned i = 0; i < NT; i++)
		t[i].weight = t[i].domain < 1 ? 1ull << 30 : 0;
	{
		uint64_t cur3[6] = { 1000, 1003, 1006, 1009, 1012, 1015 };

		SH_ASSERT_EQ(place_refill(t, NT, 7, 6, 2, cur3, 0x3f & ~0x7u, out, &shared),
			     -ENOSPC);
	}
}

/* The placement as first written: every pick scores every target again (the reference). */
static double
ref_unit(uint64_t stripe, uint64_t target)
{
	uint64_t h = sh_hash_u64(stripe * 0x9E3779B97F4A7C15ull ^ sh_hash_u64(target + 1));

	return ((double)(h >> 11) + 0.5) / 9007199254740992.0;
}

static void
ref_place(const struct place_target *t, unsigned nt, uint64_t stripe, unsigned n, uint64_t *out)
{
	uint32_t used[16];

	for (unsigned got = 0; got < n; got++) {
		double top = 0;
		int bi = -1;

		for (unsigned i = 0; i < nt; i++) {
			bool clash = false;
			double s;

			if (t[i].weight == 0)
				continue;
			for (unsigned k = 0; k < got && !clash; k++)
				clash = used[k] == t[i].domain;
			if (clash)
				continue;
			s = (double)t[i].weight / -log(ref_unit(stripe, t[i].id));
			if (bi < 0 || s > top || (s == top && t[i].id < t[bi].id)) {
				top = s;
				bi = (int)i;
			}
		}
		SH_ASSERT(bi >= 0);
		used[got] = t[bi].domain;
		out[got] = t[bi].id;
	}
}

/*
 * Scoring each target once per stripe places every stripe where scoring it
 * for each pick did (stored extents name those targets), on the stack's
 * table (24 targets) and the heap's (1,100), with uneven and zero weights.
 */
TEST(place_scored_once_places_as_before)
{
	static struct place_target t[1100];
	struct sh_rand r;
	uint64_t a[6], b[6];

	sh_rand_seed(&r, 9);
	for (unsigned nt = 24; nt <= 1100; nt += 1076) {
		for (unsigned i = 0; i < nt; i++)
			t[i] = (struct place_target){ .id = 7 + 3 * i,
						      .domain = i / 2,
						      .weight = sh_rand_below(&r, 8) == 0
								    ? 0
								    : (1 + sh_rand_below(&r, 4))
									  << 30 };
		for (uint64_t s = 1; s < (nt < 100 ? 4000u : 300u); s++) {
			SH_ASSERT_OK(place_stripe(t, nt, s * 7919, 6, a));
			ref_place(t, nt, s * 7919, 6, b);
			SH_ASSERT_MEMEQ(a, b, sizeof(a));
		}
	}
}
