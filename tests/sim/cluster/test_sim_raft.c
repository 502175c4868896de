// SPDX-License-Identifier: Apache-2.0
/*
 * Raft groups (rgroup: libraft on Shoal's raft_io) in the simulator: five
 * replicas over a lossy network with partitions that come and go, and
 * replicas killed (losing unflushed writes, tearing the last) and
 * restarted from their log files. Small snapshot thresholds make
 * snapshots, log images and snapshot installs happen often. Checked: every
 * replica's applied sequence is a prefix of one common sequence (no two
 * replicas ever apply different commands at one index), and every command
 * whose callback said success is in it after the cluster heals. Then
 * rgroup's contract (rgroup.h): callbacks later and once, closing fails
 * what is in flight, leadership handed over, members removed and added.
 */
#include <stdio.h>
#include <stdlib.h>

#include "../../../src/cluster/rgroup.h"
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
	struct rgroup *g;
	bool running, closing;
	uint64_t vals[MAX_VALS];
	uint64_t idx[MAX_VALS]; /* the index each was applied at */
	unsigned nvals;
};

struct world {
	struct sim *sim;
	struct sh_rand rng;
	struct rnode n[N];
	int nnodes;
	uint64_t next_val;
	uint64_t acked[MAX_VALS];
	unsigned nacked;
	unsigned inflight;
	unsigned acked_at_heal;
	bool in_call;		      /* inside an rgroup call: no callback may run */
	unsigned shutdown, notleader; /* how proposals ended, other than applied */
};

struct prop {
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
sm_apply(void *arg, uint64_t idx, const void *p, size_t len, void **result)
{
	struct rnode *r = arg;
	uint64_t v;

	SH_ASSERT_EQ(len, 8);
	memcpy(&v, p, 8);
	SH_ASSERT_LT(r->nvals, MAX_VALS);
	SH_ASSERT_MSG(r->nvals == 0 || idx > r->idx[r->nvals - 1], "index %llu after %llu",
		      (unsigned long long)idx, (unsigned long long)r->idx[r->nvals - 1]);
	r->idx[r->nvals] = idx;
	r->vals[r->nvals++] = v;
	*result = &r->vals[r->nvals - 1];
	return 0;
}

static int
sm_snapshot(void *arg, uint64_t idx, struct rgroup_buf *out)
{
	struct rnode *r = arg;
	uint8_t *b;

	SH_ASSERT(r->nvals == 0 || idx >= r->idx[r->nvals - 1]);
	out->len = r->nvals * 16 + 8;
	b = out->p = rgroup_alloc(out->len);
	SH_ASSERT_NOT_NULL(b);
	memcpy(b, &(uint64_t){ r->nvals }, 8);
	memcpy(b + 8, r->vals, r->nvals * 8);
	memcpy(b + 8 + r->nvals * 8, r->idx, r->nvals * 8);
	return 0;
}

static int
sm_restore(void *arg, uint64_t applied, const void *p, size_t len)
{
	struct rnode *r = arg;
	const uint8_t *b = p;
	uint64_t n;

	(void)applied;
	SH_ASSERT_GE(len, 8);
	memcpy(&n, b, 8);
	SH_ASSERT_EQ(len, 8 + n * 16);
	memcpy(r->vals, b + 8, n * 8);
	memcpy(r->idx, b + 8 + n * 8, n * 8);
	r->nvals = (unsigned)n;
	return 0;
}

static void
on_open(void *arg, int status)
{
	struct rnode *r = arg;
	struct world *w = r->w;
	uint64_t ids[N];
	char addrs[N][64];
	const char *ap[N];

	SH_ASSERT_OK(status);
	r->nvals = 0;
	for (int i = 0; i < w->nnodes; i++) {
		ids[i] = (uint64_t)i + 1;
		addr_of(i + 1, addrs[i], sizeof(addrs[i]));
		ap[i] = addrs[i];
	}
	if (!rgroup_has_state(r->g))
		SH_ASSERT_OK(rgroup_bootstrap(r->g, ids, ap, (unsigned)w->nnodes));
	SH_ASSERT_OK(rgroup_start(r->g));
	SH_ASSERT(rgroup_started(r->g));
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
	char addr[64];
	struct rgroup_params p = {
		.io = { .group = 0, .id = (uint64_t)r->id, .path = "raft0", .log_size = LOG_SIZE },
		.addr = addr,
		.election_ms = 1000,
		.heartbeat_ms = 100,
		.snapshot_threshold = 32,
		.snapshot_trailing = 8,
		.install_snapshot_ms = 2000,
		.sm = { .apply = sm_apply,
			.snapshot = sm_snapshot,
			.restore = sm_restore,
			.arg = r },
	};

	addr_of(r->id, addr, sizeof(addr));
	SH_ASSERT_OK(env_addr_parse(addr, &ifc.addr));
	SH_ASSERT_OK(net_create(r->env, &cfg, &r->net));
	SH_ASSERT_OK(rnet_create(r->net, &r->rn));
	SH_ASSERT_OK(rgroup_open(r->rn, &p, on_open, r, &r->g));
}

static void
on_closed(void *arg)
{
	struct rnode *r = arg;

	SH_ASSERT(!r->w->in_call);
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
	r->closing = true;
	w->in_call = true;
	rgroup_close(r->g, on_closed, r);
	w->in_call = false;
	SH_ASSERT(sim_run_until(w->sim, closed, r, 10 * SH_NSEC_PER_SEC));
	r->g = NULL;
	rnet_destroy(r->rn);
	net_destroy(r->net);
	r->running = false;
}

static void
on_applied(void *arg, int status, void *result)
{
	struct prop *p = arg;
	struct world *w = p->w;

	SH_ASSERT(!w->in_call);
	SH_ASSERT_GT(w->inflight, 0);
	w->inflight--;
	if (status == 0) {
		SH_ASSERT_NOT_NULL(result);
		SH_ASSERT_EQ(*(uint64_t *)result, p->val); /* what apply set */
		SH_ASSERT_LT(w->nacked, MAX_VALS);
		w->acked[w->nacked++] = p->val;
	} else {
		SH_ASSERT_NULL(result);
		SH_ASSERT_MSG(status == SH_ENOTLEADER || status == -ESHUTDOWN, "status %d", status);
		status == -ESHUTDOWN ? w->shutdown++ : w->notleader++;
	}
	sh_free(p);
}

/* One proposal at r (its leader or not): 0, or what rgroup_propose said. */
static int
propose_at(struct world *w, struct rnode *r)
{
	struct rgroup_buf buf = { .p = rgroup_alloc(8), .len = 8 };
	struct prop *p = sh_calloc(1, sizeof(*p));
	int rc;

	SH_ASSERT(buf.p != NULL && p != NULL);
	p->w = w;
	p->val = ++w->next_val;
	p->by = r;
	memcpy(buf.p, &p->val, 8);
	w->in_call = true;
	rc = rgroup_propose(r->g, &buf, on_applied, p);
	w->in_call = false;
	SH_ASSERT_NULL(buf.p); /* taken, either way */
	if (rc != 0)
		sh_free(p);
	else
		w->inflight++;
	return rc;
}

static void
propose(struct world *w)
{
	for (int i = 0; i < w->nnodes; i++) {
		struct rnode *r = &w->n[i];

		if (r->running && rgroup_leads(r->g) && w->inflight <= 8)
			propose_at(w, r);
	}
}

/* Every pair of applied sequences agrees on their common prefix. */
static void
check_prefixes(struct world *w)
{
	for (int i = 0; i < w->nnodes; i++)
		for (int j = i + 1; j < w->nnodes; j++) {
			struct rnode *a = &w->n[i], *b = &w->n[j];
			unsigned m = a->nvals < b->nvals ? a->nvals : b->nvals;

			for (unsigned k = 0; k < m; k++)
				SH_ASSERT_MSG(a->vals[k] == b->vals[k] && a->idx[k] == b->idx[k],
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

	for (int i = 0; i < w->nnodes; i++) {
		if (!w->n[i].running)
			return false;
		if (w->n[i].nvals > want)
			want = w->n[i].nvals;
	}
	for (int i = 0; i < w->nnodes; i++)
		if (w->n[i].nvals != want)
			return false;
	/* a command acknowledged after healing: the new term's leader committed everything before
	 */
	return w->inflight == 0 && w->nacked > w->acked_at_heal;
}

/* A world of n replicas on a network with the given loss (duplicates and reorders alike). */
static struct world *
world_new(uint64_t seed, int n, double loss)
{
	static struct world w;
	struct sim_net_params np;

	memset(&w, 0, sizeof(w));
	sh_rand_seed(&w.rng, seed);
	w.sim = sim_create(seed);
	w.nnodes = n;
	sim_net_get(w.sim, &np);
	np.loss = loss;
	np.dup = loss / 2;
	np.reorder = loss;
	np.reorder_ns = 2 * SH_NSEC_PER_MSEC;
	sim_net_set(w.sim, &np);
	for (int i = 0; i < n; i++) {
		char name[16], ip[32];

		snprintf(name, sizeof(name), "n%d", i + 1);
		snprintf(ip, sizeof(ip), "10.0.0.%d", i + 1);
		w.n[i].w = &w;
		w.n[i].id = i + 1;
		w.n[i].sn = sim_node_create(w.sim, name, ip);
		w.n[i].env = sim_node_env(w.n[i].sn);
		node_start(&w.n[i]);
	}
	return &w;
}

static void
world_end(struct world *w)
{
	for (int i = 0; i < w->nnodes; i++)
		if (w->n[i].g != NULL)
			node_stop(w, &w->n[i]);
	SH_ASSERT_EQ(w->inflight, 0); /* every proposal was called back */
	sim_destroy(w->sim);
}

static void
run_world(uint64_t seed, bool crashes)
{
	struct world *w = world_new(seed, N, 0.02);
	for (int step = 0; step < 120; step++) {
		uint64_t r = sh_rand_below(&w->rng, 100);

		propose(w);
		if (r < 8) {
			/* a partition: a random minority or majority split */
			for (int i = 0; i < N; i++)
				sim_partition_set(w->n[i].sn, (int)sh_rand_below(&w->rng, 2));
		} else if (r < 16) {
			sim_heal(w->sim);
		} else if (crashes && r < 22) {
			struct rnode *v = &w->n[sh_rand_below(&w->rng, N)];
			unsigned flags = sh_rand_below(&w->rng, 2) ? SIM_CRASH_TEAR : 0;

			if (v->running) {
				sim_node_crash(v->sn, flags);
				sim_node_restart(v->sn);
				node_stop(w, v);
				node_start(v);
			}
		}
		for (uint64_t t = sh_rand_below(&w->rng, 15); t > 0; t--) {
			sim_run_for(w->sim, 20 * SH_NSEC_PER_MSEC);
			propose(w);
		}
		check_prefixes(w);
	}
	sim_heal(w->sim);
	w->acked_at_heal = w->nacked;
	for (int i = 0; i < 50 && !converged(w); i++) {
		if (w->nacked == w->acked_at_heal)
			propose(w); /* a leader commits in its own term, so the rest follows */
		sim_run_for(w->sim, 200 * SH_NSEC_PER_MSEC);
	}
	for (int i = 0; i < N && !converged(w); i++) {
		struct rnode *r = &w->n[i];

		fprintf(
		    stderr,
		    "node %d: running %d state %s term %llu commit %llu applied %llu leader %llu "
		    "vals %u inflight %u\n",
		    r->id, r->running, rgroup_state_name(r->running ? rgroup_state(r->g) : 0),
		    (unsigned long long)(r->running ? rgroup_term(r->g) : 0),
		    (unsigned long long)(r->running ? rgroup_commit(r->g) : 0),
		    (unsigned long long)(r->running ? rgroup_applied(r->g) : 0),
		    (unsigned long long)(r->running ? rgroup_leader(r->g) : 0), r->nvals,
		    w->inflight);
	}
	SH_ASSERT_MSG(
	    converged(w),
	    "seed %llu: replicas did not converge after healing (SH_WORLD_SEED=%llu to rerun)",
	    (unsigned long long)seed, (unsigned long long)seed);
	check_prefixes(w);
	SH_ASSERT_GT(w->nacked, 0);

	for (unsigned a = 0; a < w->nacked; a++) {
		bool found = false;

		for (unsigned k = 0; k < w->n[0].nvals && !found; k++)
			found = w->n[0].vals[k] == w->acked[a];
		SH_ASSERT_MSG(found, "seed %llu: acknowledged command %llu was lost",
			      (unsigned long long)seed, (unsigned long long)w->acked[a]);
	}
	if (getenv("SH_TEST_VERBOSE"))
		printf("seed %llu: %u acked, %u applied, sim time %llu ms\n",
		       (unsigned long long)seed, w->nacked, w->n[0].nvals,
		       (unsigned long long)(sim_now(w->sim) / SH_NSEC_PER_MSEC));
	world_end(w);
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

/* ---- the contract ---- */

struct done {
	struct world *w;
	int calls, status;
};

static void
on_done(void *arg, int status, void *result)
{
	struct done *d = arg;

	SH_ASSERT(!d->w->in_call);
	SH_ASSERT_NULL(result);
	d->calls++;
	d->status = status;
}

static bool
called(void *arg)
{
	return ((struct done *)arg)->calls > 0;
}

struct lead_wait {
	struct world *w;
	int who; /* 0: any */
};

static bool
led(void *arg)
{
	struct lead_wait *lw = arg;

	for (int i = 0; i < lw->w->nnodes; i++)
		if ((lw->who == 0 || lw->who == i + 1) && lw->w->n[i].running &&
		    rgroup_leads(lw->w->n[i].g))
			return true;
	return false;
}

static struct rnode *
leader_of(struct world *w)
{
	for (int i = 0; i < w->nnodes; i++)
		if (w->n[i].running && rgroup_leads(w->n[i].g))
			return &w->n[i];
	return NULL;
}

static bool
settled(void *arg)
{
	struct world *w = arg;

	for (int i = 0; i < w->nnodes; i++)
		if (w->n[i].nvals != w->nacked)
			return false;
	return w->inflight == 0;
}

static bool
heard_leader(void *arg)
{
	struct rnode *r = arg;

	return rgroup_leader(r->g) != 0;
}

static void
wait_done(struct world *w, struct done *d)
{
	SH_ASSERT(sim_run_until(w->sim, called, d, 10 * SH_NSEC_PER_SEC));
	sim_run_for(w->sim, 100 * SH_NSEC_PER_MSEC);
	SH_ASSERT_EQ(d->calls, 1); /* once */
}

TEST(rgroup_calls_back_later_and_once)
{
	struct world *w = world_new(sh_test_seed(), 3, 0);
	struct lead_wait lw = { .w = w };
	struct rnode *l, *f;
	struct rgroup_member m;
	struct done d = { .w = w };
	char addr[64];

	SH_ASSERT(sim_run_until(w->sim, led, &lw, 10 * SH_NSEC_PER_SEC));
	l = leader_of(w);
	f = &w->n[l == &w->n[0] ? 1 : 0];
	SH_ASSERT_EQ(rgroup_nmembers(l->g), 3);
	SH_ASSERT(rgroup_find(l->g, (uint64_t)f->id, &m) && m.role == RGROUP_VOTER);

	/* a follower does not take proposals (and takes the entry's bytes all the same) */
	SH_ASSERT_ERR(propose_at(w, f), SH_ENOTLEADER);
	SH_ASSERT(sim_run_until(w->sim, heard_leader, f, 5 * SH_NSEC_PER_SEC));
	SH_ASSERT_EQ(rgroup_leader(f->g), (uint64_t)l->id);

	/* committed everywhere, each callback once with what apply set */
	for (int i = 0; i < 5; i++)
		SH_ASSERT_OK(propose_at(w, l));
	SH_ASSERT_EQ(w->inflight, 5);
	SH_ASSERT(sim_run_until(w->sim, settled, w, 10 * SH_NSEC_PER_SEC));
	SH_ASSERT_EQ(w->nacked, 5);
	SH_ASSERT_GE(rgroup_applied(l->g), 5);
	SH_ASSERT_GE(rgroup_commit(l->g), rgroup_applied(l->g));
	SH_ASSERT_NE(rgroup_acked(l->g, (uint64_t)f->id), 0);

	w->in_call = true;
	SH_ASSERT_OK(rgroup_barrier(l->g, on_done, &d));
	w->in_call = false;
	wait_done(w, &d);
	SH_ASSERT_OK(d.status);

	/* leadership handed to a named member */
	d.calls = 0;
	w->in_call = true;
	SH_ASSERT_OK(rgroup_transfer(l->g, (uint64_t)f->id, on_done, &d));
	w->in_call = false;
	wait_done(w, &d);
	lw.who = f->id;
	SH_ASSERT(sim_run_until(w->sim, led, &lw, 10 * SH_NSEC_PER_SEC));
	SH_ASSERT(!rgroup_leads(l->g));

	/* membership: one change at a time; the old leader removed, added back, a voter again */
	d.calls = 0;
	w->in_call = true;
	SH_ASSERT_OK(rgroup_remove(f->g, (uint64_t)l->id, on_done, &d));
	SH_ASSERT_ERR(rgroup_assign(f->g, (uint64_t)l->id, RGROUP_VOTER, on_done, &d), -EBUSY);
	w->in_call = false;
	wait_done(w, &d);
	SH_ASSERT_OK(d.status);
	SH_ASSERT(!rgroup_find(f->g, (uint64_t)l->id, &m));
	SH_ASSERT_EQ(rgroup_nmembers(f->g), 2);
	d.calls = 0;
	addr_of(l->id, addr, sizeof(addr));
	SH_ASSERT_OK(rgroup_add(f->g, (uint64_t)l->id, addr, on_done, &d));
	wait_done(w, &d);
	SH_ASSERT_OK(d.status);
	SH_ASSERT(rgroup_find(f->g, (uint64_t)l->id, &m) && m.role == RGROUP_SPARE);
	d.calls = 0;
	SH_ASSERT_OK(rgroup_assign(f->g, (uint64_t)l->id, RGROUP_VOTER, on_done, &d));
	wait_done(w, &d);
	SH_ASSERT_OK(d.status);
	SH_ASSERT(rgroup_find(f->g, (uint64_t)l->id, &m) && m.role == RGROUP_VOTER);
	SH_ASSERT_ERR(rgroup_add(f->g, (uint64_t)l->id, addr, on_done, &d), -EEXIST);

	/* closing fails what is in flight (leadership lost, or closed), once each, before done */
	SH_ASSERT_EQ(w->shutdown + w->notleader, 0);
	for (int i = 0; i < 3; i++)
		SH_ASSERT_OK(propose_at(w, f));
	node_stop(w, f);
	SH_ASSERT_EQ(w->inflight, 0);
	SH_ASSERT_EQ(w->shutdown + w->notleader, 3);
	SH_ASSERT_EQ(w->nacked, 5);
	world_end(w);
}
