// SPDX-License-Identifier: Apache-2.0
/*
 * The Raft log file under crashes: random appends, truncations, snapshots
 * (log images into the other half) and term/vote changes, with the
 * process killed at random moments (unflushed writes lost, the last one
 * torn). After each reopen the loaded state must be exactly the state
 * after some operation at or after the last one acknowledged durable: a
 * prefix of what was queued, never less than what was acknowledged.
 */
#include <stdio.h>

#include "../../../src/cluster/raft_log.h"
#include "../../../src/env/env_sim.h"
#include "../../lib/test.h"

#define OPS_MAX 4000

struct w {
	struct sim *sim;
	struct sim_node *node;
	struct env *env;
	struct rlog *log;
	struct sh_rand rng;
	int open_rc;
	bool opened;
	uint64_t hist[OPS_MAX]; /* state hash after op i */
	int nops;
	int acked; /* highest op whose barrier called back */
};

static uint64_t
state_hash(const struct rlog_state *st)
{
	uint64_t h = sh_hash64(&st->term, 8, 1);

	h = sh_hash64(&st->vote, 8, h);
	if (st->snap) {
		h = sh_hash64(&st->snap->index, 8, h);
		h = sh_hash64(&st->snap->term, 8, h);
		h = sh_hash64(st->snap->data, st->snap->len, h);
	}
	for (size_t i = 0; i < st->n; i++) {
		uint64_t idx = st->start + i;
		h = sh_hash64(&idx, 8, h);
		h = sh_hash64(&st->entries[i].term, 8, h);
		h = sh_hash64(st->entries[i].data, st->entries[i].len, h);
	}
	return h;
}

static void
on_open(void *arg, int rc)
{
	struct w *w = arg;
	w->open_rc = rc;
	w->opened = true;
}

static bool
is_open(void *arg)
{
	return ((struct w *)arg)->opened;
}

static void
reopen(struct w *w)
{
	w->opened = false;
	SH_ASSERT_OK(rlog_open(w->env, "raft", 256 * 1024, on_open, w, &w->log));
	SH_ASSERT(sim_run_until(w->sim, is_open, w, 10 * SH_NSEC_PER_SEC));
	SH_ASSERT_OK(w->open_rc);
}

struct ack {
	struct w *w;
	int op;
};

static void
on_durable(void *arg, int status)
{
	struct ack *a = arg;

	if (status == 0 && a->op > a->w->acked)
		a->w->acked = a->op;
	sh_free(a);
}

static void
one_op(struct w *w)
{
	const struct rlog_state *st = rlog_state(w->log);
	uint64_t last = rlog_last_index(w->log);
	uint64_t r = sh_rand_below(&w->rng, 100);
	struct ack *a = sh_calloc(1, sizeof(*a));
	uint8_t data[600];

	if (r < 55 || last == 0) {
		struct raft_entry e[3];
		unsigned n = 1 + (unsigned)sh_rand_below(&w->rng, 3);

		for (unsigned i = 0; i < n; i++) {
			e[i].term = st->term + 1;
			e[i].type = RAFT_COMMAND;
			e[i].buf.len = 1 + sh_rand_below(&w->rng, sizeof(data) / 3);
			e[i].buf.base = data + i * (sizeof(data) / 3);
			sh_rand_fill(&w->rng, e[i].buf.base, e[i].buf.len);
		}
		SH_ASSERT_OK(rlog_append(w->log, e, n, NULL, NULL));
	} else if (r < 70 && st->n > 0) {
		uint64_t at = st->start + sh_rand_below(&w->rng, st->n);
		SH_ASSERT_OK(rlog_truncate(w->log, at));
	} else if (r < 80 && last > 0) {
		struct raft_snapshot s = { 0 };
		struct raft_buffer b;
		unsigned trailing =
		    sh_rand_below(&w->rng, 2) ? 0 : 1 + (unsigned)sh_rand_below(&w->rng, 5);

		s.index = (st->snap ? st->snap->index : 0) + 1 +
			  sh_rand_below(&w->rng, last - (st->snap ? st->snap->index : 0));
		if (st->snap && s.index <= st->snap->index)
			s.index = st->snap->index + 1;
		if (s.index > last)
			s.index = last;
		s.term = st->term;
		raft_configuration_init(&s.configuration);
		SH_ASSERT_EQ(raft_configuration_add(&s.configuration, 1, "10.0.0.1:1", RAFT_VOTER),
			     0);
		b.len = 1 + sh_rand_below(&w->rng, sizeof(data));
		b.base = data;
		sh_rand_fill(&w->rng, data, b.len);
		s.bufs = &b;
		s.n_bufs = 1;
		SH_ASSERT_OK(rlog_snapshot(w->log, &s, trailing, NULL, NULL));
		raft_configuration_close(&s.configuration);
	} else {
		SH_ASSERT_OK(rlog_set_meta(w->log, st->term + sh_rand_below(&w->rng, 2),
					   sh_rand_below(&w->rng, 4)));
	}
	SH_ASSERT_LT(w->nops, OPS_MAX);
	w->hist[w->nops] = state_hash(rlog_state(w->log));
	a->w = w;
	a->op = w->nops++;
	SH_ASSERT_OK(rlog_barrier(w->log, on_durable, a));
}

static void
crash_round(uint64_t seed, unsigned flags)
{
	static struct w w;

	memset(&w, 0, sizeof(w));
	sh_rand_seed(&w.rng, seed);
	w.sim = sim_create(seed);
	w.node = sim_node_create(w.sim, "n", "10.0.0.1");
	w.env = sim_node_env(w.node);
	w.acked = -1;
	reopen(&w);
	for (int cycle = 0; cycle < 8; cycle++) {
		int steps = 20 + (int)sh_rand_below(&w.rng, 200);
		uint64_t h;
		int k;

		for (int i = 0; i < steps; i++) {
			one_op(&w);
			if (sh_rand_below(&w.rng, 3) == 0)
				sim_run_for(w.sim, sh_rand_below(&w.rng, 200) * SH_NSEC_PER_USEC);
		}
		sim_node_crash(w.node, flags);
		rlog_close(w.log);
		sim_node_restart(w.node);
		reopen(&w);
		h = state_hash(rlog_state(w.log));
		if (w.acked < 0 && h == state_hash(&(struct rlog_state){ 0 }))
			k = -1;
		else
			for (k = w.nops - 1; k >= 0 && w.hist[k] != h; k--)
				;
		SH_ASSERT_MSG(k >= w.acked,
			      "seed %llu cycle %d: loaded state matches op %d, but op %d was "
			      "acknowledged durable (of %d)",
			      (unsigned long long)seed, cycle, k, w.acked, w.nops);
		/* what was loaded is the new history */
		w.nops = k + 1;
		w.acked = k;
	}
	rlog_close(w.log);
	sim_destroy(w.sim);
}

TEST(raftlog_crash)
{
	for (int i = 0; i < 10; i++)
		crash_round(sh_test_seed() * 1000 + (uint64_t)i, 0);
}

TEST(raftlog_crash_torn)
{
	for (int i = 0; i < 10; i++)
		crash_round(sh_test_seed() * 1000 + 500 + (uint64_t)i, SIM_CRASH_TEAR);
}

TEST(raftlog_crash_keep_random)
{
	for (int i = 0; i < 10; i++)
		crash_round(sh_test_seed() * 1000 + 800 + (uint64_t)i,
			    SIM_CRASH_TEAR | SIM_CRASH_KEEP_RANDOM);
}
