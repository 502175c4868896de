// SPDX-License-Identifier: Apache-2.0
/*
 * The simulated network: a 50-node run with loss, duplication and
 * reordering is identical for one seed and differs for another;
 * partitions and cut links drop exactly what they should.
 */
#include <errno.h>
#include <stdio.h>

#include "../../../src/env/env_sim.h"
#include "../../lib/test.h"

#define NODES 50
#define PORT  7000

struct host {
	struct sim_node *node;
	struct env *env;
	struct env_dgram *d;
	struct env_timer tick;
	struct env_addr addr;
	uint32_t seq;
	uint32_t last_seq[NODES];
	uint64_t got, dups, out_of_order, corrupt;
	int id;
	struct world *w;
};

struct world {
	struct sim *sim;
	struct host h[NODES];
	int n;
};

struct payload_hdr {
	uint32_t src, seq, len, crc;
};

static void
on_recv(struct env_dgram *d, const struct env_dgram_msg *msgs, unsigned n, void *arg)
{
	struct host *h = arg;

	(void)d;
	for (unsigned i = 0; i < n; i++) {
		struct payload_hdr hdr;
		const unsigned char *p = msgs[i].iov[0].iov_base;

		SH_ASSERT_GE(msgs[i].len, sizeof(hdr));
		memcpy(&hdr, p, sizeof(hdr));
		if (hdr.len != msgs[i].len || hdr.src >= NODES ||
		    hdr.crc != sh_crc32c(0, p + sizeof(hdr), hdr.len - sizeof(hdr))) {
			h->corrupt++;
			continue;
		}
		h->got++;
		if (hdr.seq == h->last_seq[hdr.src])
			h->dups++;
		else if (hdr.seq < h->last_seq[hdr.src])
			h->out_of_order++;
		else
			h->last_seq[hdr.src] = hdr.seq;
	}
}

static const struct env_dgram_cbs cbs = { .recv = on_recv };

/* Every 500 us each node sends a batch of 4 datagrams to random peers. */
static void
on_tick(struct env_timer *t)
{
	struct host *h = t->arg;
	struct world *w = h->w;
	unsigned char bufs[4][1200];
	struct iovec iov[4];
	struct env_dgram_msg m[4];

	for (int i = 0; i < 4; i++) {
		struct payload_hdr hdr;
		uint64_t r = env_random_u64(h->env);
		int dst = (int)(r % (uint64_t)(w->n - 1));
		size_t len = sizeof(hdr) + (size_t)((r >> 16) % 1000);

		if (dst >= h->id)
			dst++;
		hdr.src = (uint32_t)h->id;
		hdr.seq = ++h->seq;
		hdr.len = (uint32_t)len;
		env_random(h->env, bufs[i] + sizeof(hdr), len - sizeof(hdr));
		hdr.crc = sh_crc32c(0, bufs[i] + sizeof(hdr), len - sizeof(hdr));
		memcpy(bufs[i], &hdr, sizeof(hdr));
		iov[i] = (struct iovec){ bufs[i], len };
		m[i] =
		    (struct env_dgram_msg){ .peer = w->h[dst].addr, .iov = &iov[i], .iovcnt = 1 };
	}
	SH_ASSERT_EQ(env_dgram_send(h->d, m, 4), 4);
	SH_ASSERT_OK(env_timer_arm(t, 500 * SH_NSEC_PER_USEC));
}

static void
world_init(struct world *w, uint64_t seed, int n)
{
	struct env_addr bind;

	w->sim = sim_create(seed);
	w->n = n;
	SH_ASSERT_NOT_NULL(w->sim);
	for (int i = 0; i < n; i++) {
		struct host *h = &w->h[i];
		char name[16], ip[32];

		memset(h, 0, sizeof(*h));
		snprintf(name, sizeof(name), "n%d", i);
		snprintf(ip, sizeof(ip), "127.1.%d.%d", i / 200, 1 + i % 200);
		h->node = sim_node_create(w->sim, name, ip);
		SH_ASSERT_NOT_NULL(h->node);
		h->env = sim_node_env(h->node);
		h->id = i;
		h->w = w;
		SH_ASSERT_OK(env_addr_parse(ip, &bind));
		bind.port = PORT;
		SH_ASSERT_OK(env_dgram_open(h->env, &bind, &cbs, h, &h->d));
		SH_ASSERT_OK(env_dgram_addr(h->d, &h->addr));
		env_timer_init(h->env, &h->tick, on_tick, h);
	}
}

static void
world_fini(struct world *w)
{
	for (int i = 0; i < w->n; i++) {
		env_timer_cancel(&w->h[i].tick);
		env_dgram_close(w->h[i].d);
	}
	sim_destroy(w->sim);
}

struct run_result {
	uint64_t hash;
	struct sim_stats st;
	uint64_t got, dups, ooo, corrupt;
};

static void
lossy_run(uint64_t seed, struct run_result *res)
{
	static struct world w;
	struct sim_net_params p = { .lat_min_ns = 10 * SH_NSEC_PER_USEC,
				    .lat_max_ns = 200 * SH_NSEC_PER_USEC,
				    .loss = 0.2,
				    .dup = 0.2,
				    .reorder = 0.2,
				    .reorder_ns = 2 * SH_NSEC_PER_MSEC };

	world_init(&w, seed, NODES);
	sim_net_set(w.sim, &p);
	for (int i = 0; i < NODES; i++)
		SH_ASSERT_OK(env_timer_arm(&w.h[i].tick, (uint64_t)i * SH_NSEC_PER_USEC));
	sim_run_for(w.sim, 100 * SH_NSEC_PER_MSEC);
	memset(res, 0, sizeof(*res));
	res->hash = sim_trace_hash(w.sim);
	sim_stats(w.sim, &res->st);
	for (int i = 0; i < NODES; i++) {
		res->got += w.h[i].got;
		res->dups += w.h[i].dups;
		res->ooo += w.h[i].out_of_order;
		res->corrupt += w.h[i].corrupt;
	}
	world_fini(&w);
}

TEST(sim_50_nodes_lossy_is_reproducible)
{
	uint64_t seed = sh_test_seed();
	struct run_result a, b, c;
	double lost;

	lossy_run(seed, &a);
	lossy_run(seed, &b);
	lossy_run(seed + 1000003, &c);
	SH_ASSERT_EQ(a.hash, b.hash);
	SH_ASSERT_EQ(a.got, b.got);
	SH_ASSERT_EQ(a.st.events, b.st.events);
	SH_ASSERT_NE(a.hash, c.hash);
	SH_ASSERT_EQ(a.corrupt, 0);
	/* 50 nodes x 200 ticks x 4 datagrams */
	SH_ASSERT_GE(a.st.dgram_sent, 39000);
	lost = (double)a.st.dgram_lost / (double)a.st.dgram_sent;
	SH_ASSERT_MSG(lost > 0.18 && lost < 0.22, "loss %.3f, configured 0.2", lost);
	SH_ASSERT_GT(a.st.dgram_dup, a.st.dgram_sent / 8);
	SH_ASSERT_GT(a.st.dgram_reordered, a.st.dgram_sent / 8);
	SH_ASSERT_GT(a.dups, 0);
	SH_ASSERT_GT(a.ooo, 0);
	SH_ASSERT_EQ(a.got, a.st.dgram_delivered);
}

TEST(sim_partitions_and_cut_links)
{
	static struct world w;
	struct sim_stats st;
	uint64_t before;

	world_init(&w, sh_test_seed(), 4);
	sim_partition_set(w.h[0].node, 1);
	sim_partition_set(w.h[1].node, 1);
	/* {0,1} | {2,3}: node 0 sends 1000 datagrams to random peers for a while */
	SH_ASSERT_OK(env_timer_arm(&w.h[0].tick, 0));
	sim_run_for(w.sim, 50 * SH_NSEC_PER_MSEC);
	env_timer_cancel(&w.h[0].tick);
	sim_run_for(w.sim, 10 * SH_NSEC_PER_MSEC);
	sim_stats(w.sim, &st);
	SH_ASSERT_GT(w.h[1].got, 0);
	SH_ASSERT_EQ(w.h[2].got, 0);
	SH_ASSERT_EQ(w.h[3].got, 0);
	SH_ASSERT_EQ(st.dgram_partitioned + st.dgram_delivered, st.dgram_sent);

	sim_heal(w.sim);
	SH_ASSERT_OK(sim_link_cut(w.h[0].node, w.h[2].node, true)); /* 0 -> 2 only */
	before = w.h[1].got;
	SH_ASSERT_OK(env_timer_arm(&w.h[0].tick, 0));
	SH_ASSERT_OK(env_timer_arm(&w.h[2].tick, 0));
	sim_run_for(w.sim, 50 * SH_NSEC_PER_MSEC);
	env_timer_cancel(&w.h[0].tick);
	env_timer_cancel(&w.h[2].tick);
	sim_run_for(w.sim, 10 * SH_NSEC_PER_MSEC);
	SH_ASSERT_GT(w.h[1].got, before);
	SH_ASSERT_GT(w.h[3].got, 0);
	SH_ASSERT_GT(w.h[0].got, 0);	     /* 2 -> 0 still flows */
	SH_ASSERT_EQ(w.h[2].last_seq[0], 0); /* nothing from 0 reached 2 */
	SH_ASSERT_OK(sim_link_cut(w.h[0].node, w.h[2].node, false));
	world_fini(&w);
}

TEST(sim_crash_drops_endpoints_and_timers)
{
	static struct world w;
	struct env_addr bind;
	struct sim_stats st;
	struct env_dgram *d;

	world_init(&w, sh_test_seed(), 3);
	SH_ASSERT_OK(env_timer_arm(&w.h[1].tick, 0));
	SH_ASSERT_OK(env_timer_arm(&w.h[2].tick, 0));
	sim_run_for(w.sim, 5 * SH_NSEC_PER_MSEC);
	sim_node_crash(w.h[2].node, 0);
	SH_ASSERT(!sim_node_alive(w.h[2].node));
	SH_ASSERT(!env_timer_armed(&w.h[2].tick));
	w.h[2].d = NULL; /* closed by the crash */
	{
		uint64_t sent_by_2 = w.h[2].seq;

		sim_run_for(w.sim, 20 * SH_NSEC_PER_MSEC);
		SH_ASSERT_EQ(w.h[2].seq, sent_by_2); /* its timer never fired again */
	}
	sim_stats(w.sim, &st);
	SH_ASSERT_GT(st.dgram_unbound, 0); /* node 1's datagrams to 2 went nowhere */
	SH_ASSERT_ERR(env_dgram_open(w.h[2].env, &w.h[2].addr, &cbs, &w.h[2], &d), -SH_ECRASHED);

	sim_node_restart(w.h[2].node);
	bind = w.h[2].addr;
	SH_ASSERT_OK(env_dgram_open(w.h[2].env, &bind, &cbs, &w.h[2], &w.h[2].d));
	{
		uint64_t got = w.h[2].got;

		sim_run_for(w.sim, 20 * SH_NSEC_PER_MSEC);
		SH_ASSERT_GT(w.h[2].got, got);
	}
	/* binding someone else's address fails */
	bind = w.h[0].addr;
	bind.port = 9;
	SH_ASSERT_ERR(env_dgram_open(w.h[2].env, &bind, &cbs, &w.h[2], &d), -EADDRNOTAVAIL);
	bind = w.h[2].addr;
	SH_ASSERT_ERR(env_dgram_open(w.h[2].env, &bind, &cbs, &w.h[2], &d), -EADDRINUSE);
	world_fini(&w);
}

struct tim {
	struct env_timer t;
	uint64_t fired_at;
	int count;
};

static void
tim_fire(struct env_timer *t)
{
	struct tim *x = sh_container_of(t, struct tim, t);

	x->fired_at = env_now(t->ev.env);
	x->count++;
}

static bool
tim_done(void *arg)
{
	return ((struct tim *)arg)->count > 0;
}

TEST(sim_virtual_time)
{
	struct sim *sim = sim_create(sh_test_seed());
	struct sim_node *n = sim_node_create(sim, "a", "127.0.0.9");
	struct env *env = sim_node_env(n);
	struct tim x = { 0 }, y = { 0 };

	SH_ASSERT_NULL(sim_node_create(sim, "b", "127.0.0.9"));	   /* taken */
	SH_ASSERT_NULL(sim_node_create(sim, "c", "127.0.0.10:5")); /* has a port */
	SH_ASSERT(sim_env_node(env) == n);
	SH_ASSERT_STREQ(sim_node_name(n), "a");
	env_timer_init(env, &x.t, tim_fire, NULL);
	env_timer_init(env, &y.t, tim_fire, NULL);
	SH_ASSERT_OK(env_timer_arm(&x.t, 3 * SH_NSEC_PER_SEC));
	SH_ASSERT_OK(env_timer_arm(&y.t, 1 * SH_NSEC_PER_SEC));
	SH_ASSERT(sim_run_until(sim, tim_done, &y, 10 * SH_NSEC_PER_SEC));
	SH_ASSERT_EQ(y.fired_at, 1 * SH_NSEC_PER_SEC);
	SH_ASSERT_EQ(sim_now(sim), 1 * SH_NSEC_PER_SEC);
	SH_ASSERT(!sim_run_until(sim, tim_done, &x, SH_NSEC_PER_SEC)); /* not yet */
	SH_ASSERT_EQ(sim_now(sim), 2 * SH_NSEC_PER_SEC);
	sim_run_for(sim, 5 * SH_NSEC_PER_SEC);
	SH_ASSERT_EQ(x.fired_at, 3 * SH_NSEC_PER_SEC);
	SH_ASSERT_EQ(sim_now(sim), 7 * SH_NSEC_PER_SEC);
	SH_ASSERT_EQ(env_realtime(env) - env_now(env), 1767225600ULL * SH_NSEC_PER_SEC);
	SH_ASSERT(!sim_step(sim));
	sim_destroy(sim);
}
