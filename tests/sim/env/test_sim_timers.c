// SPDX-License-Identifier: Apache-2.0
/*
 * Periodic ticks on an env's grid (env_timer_arm_period): timers of one
 * period on one env fire at the same instants whenever they were armed,
 * never sooner than half a period after arming, exactly a period apart
 * when re-armed from their callbacks; two nodes' grids differ.
 */
#include "../../../src/env/env_sim.h"
#include "../../lib/test.h"

#define PERIOD (70 * SH_NSEC_PER_MSEC)
#define NTICK  4
#define NFIRE  16

struct tick {
	struct env_timer t;
	uint64_t armed;
	uint64_t at[NFIRE];
	unsigned n;
};

static void
tick_fire(struct env_timer *t)
{
	struct tick *k = t->arg;
	struct env *env = t->ev.env;

	if (k->n < NFIRE)
		k->at[k->n++] = env_now(env);
	if (k->n < NFIRE)
		SH_ASSERT_OK(env_timer_arm_period(t, PERIOD));
}

TEST(sim_timers_tick_together_on_a_node_grid)
{
	struct sim *sim = sim_create(sh_test_seed());
	struct sim_node *a = sim_node_create(sim, "a", "127.0.0.2");
	struct sim_node *b = sim_node_create(sim, "b", "127.0.0.3");
	struct tick ka[NTICK] = { 0 }, kb = { 0 };

	/* four timers on a, armed at four unrelated times */
	for (unsigned i = 0; i < NTICK; i++) {
		env_timer_init(sim_node_env(a), &ka[i].t, tick_fire, &ka[i]);
		ka[i].armed = env_now(sim_node_env(a));
		SH_ASSERT_OK(env_timer_arm_period(&ka[i].t, PERIOD));
		sim_run_for(sim, (i * 37 + 11) * SH_NSEC_PER_MSEC / 3);
	}
	env_timer_init(sim_node_env(b), &kb.t, tick_fire, &kb);
	kb.armed = env_now(sim_node_env(b));
	SH_ASSERT_OK(env_timer_arm_period(&kb.t, PERIOD));
	sim_run_for(sim, (NFIRE + 4) * PERIOD);

	for (unsigned i = 0; i < NTICK; i++) {
		SH_ASSERT_EQ(ka[i].n, NFIRE);
		/* the first fire: half a period after arming at the soonest, 1.5 at the latest */
		SH_ASSERT(ka[i].at[0] >= ka[i].armed + PERIOD / 2);
		SH_ASSERT(ka[i].at[0] <= ka[i].armed + PERIOD * 3 / 2);
		for (unsigned j = 1; j < NFIRE; j++)
			SH_ASSERT_EQ(ka[i].at[j] - ka[i].at[j - 1], PERIOD);
		/* on one grid: every later timer fires with the first at once */
		for (unsigned j = 0; j < NFIRE; j++) {
			bool met = false;

			for (unsigned x = 0; x < ka[0].n && !met; x++)
				met = ka[0].at[x] == ka[i].at[j];
			SH_ASSERT(met || ka[i].at[j] > ka[0].at[ka[0].n - 1]);
		}
	}
	/* another node: its own phase (a random 64-bit draw; equal once in 70 million) */
	SH_ASSERT_EQ(kb.n, NFIRE);
	SH_ASSERT_NE(kb.at[0] % PERIOD, ka[0].at[0] % PERIOD);
	sim_destroy(sim);
}
