// SPDX-License-Identifier: Apache-2.0
/*
 * libraft on Shoal's raft_io in the simulator: five replicas over a lossy
 * network with partitions that come and go, and replicas killed (losing
 * unflushed writes, tearing the last) and restarted from their log files.
 * Small snapshot thresholds make snapshots, log images and snapshot
 * installs happen often. Checked: every replica's applied sequence is a
 * prefix of one common sequence (no two replicas ever apply different
 * commands at one index), and every command whose apply callback said
 * success is in it after the cluster heals.
 */
#include <stdio.h>
#include <stdlib.h>

#include "../../../src/cluster/raft_io.h"
#include "../../../src/env/env_sim.h"
#include "../../lib/test.h"

#define N	 5
#define MAX_VALS 16384
#define LOG_SIZE (1u << 20)

struct rnode {
	struct world *w;
	int id;
	struct sim_node *sn;
	struct env *env;
	struct net *net;
	struct rnet *rn;
	struct raft raft;
	struct raft_io io;
	struct raft_fsm fsm;
	bool running, closing, inited;
	uint64_t vals[MAX_VALS];
	unsigned nvals;
};

struct world {
	struct sim *sim;
	struct sh_rand rng;
	struct rnode n[N];
	uint64_t next_val;
	uint64_t acked[MAX_VALS];
	unsigned nacked;
	unsigned inflight;
	unsigned acked_at_heal;
};

struct prop {
	struct raft_apply req;
	struct world *w;
	uint64_t val;
	struct rnode *by;
};

static void
addr_of(int id, char *buf, size_t len)
{
	snprintf(buf, len, "10.0.0.%d:7000", id);
}

static int
fsm_apply(struct raft_fsm *fsm, const struct raft_buffer *buf, void **result)
{
	struct rnode *r = fsm->data;
	uint64_t v;

	SH_ASSERT_EQ(buf->len, 8);
	memcpy(&v, buf->base, 8);
	SH_ASSERT_LT(r->nvals, MAX_VALS);
	r->vals[r->nvals++] = v;
	*result = NULL;
	return 0;
}

static int
fsm_snapshot(struct raft_fsm *fsm, struct raft_buffer *bufs[], unsigned *n)
{
	struct rnode *r = fsm->data;

	*bufs = raft_malloc(sizeof(**bufs));
	(*bufs)[0].len = r->nvals * 8 + 8;
	(*bufs)[0].base = raft_malloc((*bufs)[0].len);
	memcpy((*bufs)[0].base, &(uint64_t){ r->nvals }, 8);
	memcpy((uint8_t *)(*bufs)[0].base + 8, r->vals, r->nvals * 8);
	*n = 1;
	return 0;
}

static int
fsm_restore(struct raft_fsm *fsm, struct raft_buffer *buf)
{
	struct rnode *r = fsm->data;
	uint64_t n;

	SH_ASSERT_GE(buf->len, 8);
	memcpy(&n, buf->base, 8);
	SH_ASSERT_EQ(buf->len, 8 + n * 8);
	memcpy(r->vals, (uint8_t *)buf->base + 8, n * 8);
	r->nvals = (unsigned)n;
	raft_free(buf->base);
	return 0;
}

static void
on_log_open(void *arg, int status)
{
	struct rnode *r = arg;
	struct raft_configuration conf;
	char addr[64];
	int rc;

	SH_ASSERT_OK(status);
	addr_of(r->id, addr, sizeof(addr));
	r->fsm = (struct raft_fsm){ .version = 1,
				    .data = r,
				    .apply = fsm_apply,
				    .snapshot = fsm_snapshot,
				    .restore = fsm_restore };
	r->nvals = 0;
	SH_ASSERT_EQ(raft_init(&r->raft, &r->io, &r->fsm, (raft_id)r->id, addr), 0);
	r->inited = true;
	raft_set_election_timeout(&r->raft, 1000);
	raft_set_heartbeat_timeout(&r->raft, 100);
	raft_set_snapshot_threshold(&r->raft, 32);
	raft_set_snapshot_trailing(&r->raft, 8);
	raft_set_pre_vote(&r->raft, true);
	raft_set_install_snapshot_timeout(&r->raft, 2000);
	raft_configuration_init(&conf);
	for (int i = 1; i <= N; i++) {
		addr_of(i, addr, sizeof(addr));
		SH_ASSERT_EQ(raft_configuration_add(&conf, (raft_id)i, addr, RAFT_VOTER), 0);
	}
	rc = raft_bootstrap(&r->raft, &conf);
	SH_ASSERT_MSG(rc == 0 || rc == RAFT_CANTBOOTSTRAP, "bootstrap: %d", rc);
	raft_configuration_close(&conf);
	SH_ASSERT_EQ(raft_start(&r->raft), 0);
	r->running = true;
}

static void
node_start(struct rnode *r)
{
	struct net_iface ifc = { 0 };
	struct net_config cfg = { .node_id = (uint64_t)r->id,
				  .ifaces = &ifc,
				  .nifaces = 1,
				  .dead_ns = 3 * SH_NSEC_PER_SEC };
	struct rio_params p = {
		.group = 0, .id = (raft_id)r->id, .path = "raft0", .log_size = LOG_SIZE
	};
	char addr[64];

	addr_of(r->id, addr, sizeof(addr));
	SH_ASSERT_OK(env_addr_parse(addr, &ifc.addr));
	SH_ASSERT_OK(net_create(r->env, &cfg, &r->net));
	SH_ASSERT_OK(rnet_create(r->net, &r->rn));
	SH_ASSERT_OK(rio_open(r->rn, &r->io, &p, on_log_open, r));
}

static void
on_raft_closed(struct raft *raft)
{
	struct rnode *r = raft->data;
	r->closing = false;
}

static bool
closed(void *arg)
{
	return !((struct rnode *)arg)->closing;
}

static void
node_stop(struct world *w, struct rnode *r)
{
	if (r->inited) {
		r->closing = true;
		r->raft.data = r;
		raft_close(&r->raft, on_raft_closed);
		SH_ASSERT(sim_run_until(w->sim, closed, r, 10 * SH_NSEC_PER_SEC));
	}
	rio_destroy(&r->io);
	rnet_destroy(r->rn);
	net_destroy(r->net);
	r->running = r->inited = false;
}

static void
on_applied(struct raft_apply *req, int status, void *result)
{
	struct prop *p = req->data;
	struct world *w = p->w;

	(void)result;
	w->inflight--;
	if (status == 0) {
		SH_ASSERT_LT(w->nacked, MAX_VALS);
		w->acked[w->nacked++] = p->val;
	}
	sh_free(p);
}

static void
propose(struct world *w)
{
	for (int i = 0; i < N; i++) {
		struct rnode *r = &w->n[i];
		struct raft_buffer buf;
		struct prop *p;

		if (!r->running || raft_state(&r->raft) != RAFT_LEADER || w->inflight > 8)
			continue;
		p = sh_calloc(1, sizeof(*p));
		p->w = w;
		p->val = ++w->next_val;
		p->by = r;
		p->req.data = p;
		buf.len = 8;
		buf.base = raft_malloc(8);
		memcpy(buf.base, &p->val, 8);
		if (raft_apply(&r->raft, &p->req, &buf, 1, on_applied) != 0) {
			raft_free(buf.base);
			sh_free(p);
			continue;
		}
		w->inflight++;
	}
}

/* Every pair of applied sequences agrees on their common prefix. */
static void
check_prefixes(struct world *w)
{
	for (int i = 0; i < N; i++)
		for (int j = i + 1; j < N; j++) {
			struct rnode *a = &w->n[i], *b = &w->n[j];
			unsigned m = a->nvals < b->nvals ? a->nvals : b->nvals;

			for (unsigned k = 0; k < m; k++)
				SH_ASSERT_MSG(a->vals[k] == b->vals[k],
					      "seed %llu: nodes %d and %d applied %llu and %llu at "
					      "position %u",
					      (unsigned long long)sh_test_seed(), a->id, b->id,
					      (unsigned long long)a->vals[k],
					      (unsigned long long)b->vals[k], k);
		}
}

static bool
converged(void *arg)
{
	struct world *w = arg;
	unsigned want = 0;

	for (int i = 0; i < N; i++) {
		if (!w->n[i].running)
			return false;
		if (w->n[i].nvals > want)
			want = w->n[i].nvals;
	}
	for (int i = 0; i < N; i++)
		if (w->n[i].nvals != want)
			return false;
	/* a command acknowledged after healing: the new term's leader committed everything before
	 */
	return w->inflight == 0 && w->nacked > w->acked_at_heal;
}

static void
run_world(uint64_t seed, bool crashes)
{
	static struct world w;
	struct sim_net_params np;

	memset(&w, 0, sizeof(w));
	sh_rand_seed(&w.rng, seed);
	w.sim = sim_create(seed);
	sim_net_get(w.sim, &np);
	np.loss = 0.02;
	np.dup = 0.01;
	np.reorder = 0.02;
	np.reorder_ns = 2 * SH_NSEC_PER_MSEC;
	sim_net_set(w.sim, &np);
	for (int i = 0; i < N; i++) {
		char name[16], ip[32];

		snprintf(name, sizeof(name), "n%d", i + 1);
		snprintf(ip, sizeof(ip), "10.0.0.%d", i + 1);
		w.n[i].w = &w;
		w.n[i].id = i + 1;
		w.n[i].sn = sim_node_create(w.sim, name, ip);
		w.n[i].env = sim_node_env(w.n[i].sn);
		node_start(&w.n[i]);
	}
	for (int step = 0; step < 120; step++) {
		uint64_t r = sh_rand_below(&w.rng, 100);

		propose(&w);
		if (r < 8) {
			/* a partition: a random minority or majority split */
			for (int i = 0; i < N; i++)
				sim_partition_set(w.n[i].sn, (int)sh_rand_below(&w.rng, 2));
		} else if (r < 16) {
			sim_heal(w.sim);
		} else if (crashes && r < 22) {
			struct rnode *v = &w.n[sh_rand_below(&w.rng, N)];
			unsigned flags = sh_rand_below(&w.rng, 2) ? SIM_CRASH_TEAR : 0;

			if (v->running) {
				sim_node_crash(v->sn, flags);
				sim_node_restart(v->sn);
				node_stop(&w, v);
				node_start(v);
			}
		}
		for (uint64_t t = sh_rand_below(&w.rng, 15); t > 0; t--) {
			sim_run_for(w.sim, 20 * SH_NSEC_PER_MSEC);
			propose(&w);
		}
		check_prefixes(&w);
	}
	sim_heal(w.sim);
	w.acked_at_heal = w.nacked;
	for (int i = 0; i < 50 && !converged(&w); i++) {
		if (w.nacked == w.acked_at_heal)
			propose(&w); /* a leader commits in its own term, so the rest follows */
		sim_run_for(w.sim, 200 * SH_NSEC_PER_MSEC);
	}
	for (int i = 0; i < N && !converged(&w); i++) {
		struct rnode *r = &w.n[i];
		raft_id lid = 0;
		const char *la = NULL;

		if (r->running)
			raft_leader(&r->raft, &lid, &la);
		fprintf(stderr,
			"node %d: running %d state %d term %llu last %llu applied %llu leader %llu "
			"vals %u inflight %u\n",
			r->id, r->running, r->running ? raft_state(&r->raft) : -1,
			(unsigned long long)(r->running ? r->raft.current_term : 0),
			(unsigned long long)(r->running ? raft_last_index(&r->raft) : 0),
			(unsigned long long)(r->running ? raft_last_applied(&r->raft) : 0),
			(unsigned long long)lid, r->nvals, w.inflight);
	}
	SH_ASSERT_MSG(
	    converged(&w),
	    "seed %llu: replicas did not converge after healing (SH_WORLD_SEED=%llu to rerun)",
	    (unsigned long long)seed, (unsigned long long)seed);
	check_prefixes(&w);
	SH_ASSERT_GT(w.nacked, 0);

	for (unsigned a = 0; a < w.nacked; a++) {
		bool found = false;

		for (unsigned k = 0; k < w.n[0].nvals && !found; k++)
			found = w.n[0].vals[k] == w.acked[a];
		SH_ASSERT_MSG(found, "seed %llu: acknowledged command %llu was lost",
			      (unsigned long long)seed, (unsigned long long)w.acked[a]);
	}
	if (getenv("SH_TEST_VERBOSE"))
		printf("seed %llu: %u acked, %u applied, sim time %llu ms\n",
		       (unsigned long long)seed, w.nacked, w.n[0].nvals,
		       (unsigned long long)(sim_now(w.sim) / SH_NSEC_PER_MSEC));
	for (int i = 0; i < N; i++)
		node_stop(&w, &w.n[i]);
	sim_destroy(w.sim);
}

/* SH_WORLD_SEED=N reruns the one world a failure names. */
static bool
one_world(bool crashes)
{
	const char *s = getenv("SH_WORLD_SEED");

	if (s == NULL)
		return false;
	run_world(strtoull(s, NULL, 10), crashes);
	return true;
}

TEST(raft_partitions)
{
	for (int i = 0; i < 3 && !one_world(false); i++)
		run_world(sh_test_seed() * 100 + (uint64_t)i, false);
}

TEST(raft_partitions_and_crashes)
{
	for (int i = 0; i < 3 && !one_world(true); i++)
		run_world(sh_test_seed() * 100 + 50 + (uint64_t)i, true);
}
