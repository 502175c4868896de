// SPDX-License-Identifier: Apache-2.0
/*
 * bench/scale (make bench-scale, docs/performance.md "At 1,000 backends"):
 * Shoal's placement, balancing and rebuild planning at 1,000 backends and
 * its configuration's way to 10,000 clients, in one process. The nodes are
 * light: a backend is its target (one drive, a failure domain of its own),
 * the stripes are their records in memory, and what decides where bytes go
 * is the servers' own code:
 *
 *   fill      every stripe placed by place_stripe (the client's choice), then
 *             the targets' fill evened out as the leaders' balance does it
 *             (heal_balance_budgets, heal_plan_balance: on above 1.05 of the
 *             mean, off below 1.02); the figure is max / mean fill after.
 *   grow      10 % more backends join, empty; the balance moves bytes onto
 *             them. The least that must move is what the new targets hold
 *             at the mean fill; the figure is moved / that.
 *   rebuild   one backend is lost; every stripe it held is planned as the
 *             heal plans it (place_refill for the new places, the first D
 *             fragments left as sources, as a job reads them). Each target
 *             reads and writes its share at --disk-gbs; the rebuild ends when
 *             the busiest has. Ideal: the lost bytes times (D + 1) spread
 *             over the N - 1 others evenly. The figure is the ratio.
 *   fanout    the simulator (env_sim) carries a configuration change from the
 *             leader to every backend (NET_OP_CLUSTER_PUSH's way: one message
 *             each, the configuration of N nodes encoded by cfg_encode, the
 *             leader's link paced at --link-gbs) and from the backends to the
 *             clients, each asking its backend every poll (NET_OP_CLUSTER_CONFIG's
 *             way); the figure is the simulated time until the last client
 *             holds the new epoch.
 *
 * Ends with BENCH scale {"backends":N,"clients":N,"fill_max_over_mean":R,
 * "grow_moved_vs_min":R,"rebuild_vs_ideal":R,"config_fanout_s":X}.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../src/client/client_int.h"
#include "../src/data/place.h"
#include "../src/env/env_sim.h"
#include "../src/meta/msvc_heal_int.h"
#include "bench.h"

#define D    4
#define P    2
#define N    (D + P)
#define FRAG (1u << 20)
#define CAP  (3840ull * 1000 * 1000 * 1000) /* a 3.84 TB drive */

struct bench_fanout {
	size_t cfg_bytes;		     /* the configuration, encoded */
	double backends_s, median_s, last_s; /* since the change: every backend, clients */
};

struct world {
	unsigned nt;		/* targets (backends) now */
	struct place_target *t; /* by id (1..nt) */
	uint64_t *count;	/* fragments on each */
	uint64_t nstripes;	/* stripe s has id s + 1 */
	uint32_t *frag;		/* nstripes x N target indexes */
	struct mheal *h;	/* one leader's balance state, leading every stripe */
	uint64_t moved;		/* fragments moved by balancing */
};

static void
targets_add(struct world *w, unsigned n)
{
	w->t = realloc(w->t, (w->nt + n) * sizeof(*w->t));
	w->count = realloc(w->count, (w->nt + n) * sizeof(*w->count));
	if (w->t == NULL || w->count == NULL)
		bench_die("scale", "out of memory");
	for (unsigned i = w->nt; i < w->nt + n; i++) {
		w->t[i] = (struct place_target){ .id = i + 1, .domain = i, .weight = CAP };
		w->count[i] = 0;
	}
	w->nt += n;
}

/* The targets' fill (by target, as fill_end keeps it) into the leader's state, from the counts. */
static void
fills(struct world *w)
{
	free(w->h->fill);
	if ((w->h->fill = calloc(w->nt, sizeof(*w->h->fill))) == NULL)
		bench_die("scale", "out of memory");
	w->h->nfill = w->nt;
	for (unsigned i = 0; i < w->nt; i++)
		w->h->fill[i] = (struct hfill){ .target = w->t[i].id,
						.live = w->count[i] * FRAG,
						.capacity = w->t[i].weight };
}

/* max / mean of the targets' fill, as the leaders' fill round says it. */
static double
fill_ratio(struct world *w)
{
	double mean, max;

	fills(w);
	max = heal_fill_max(w->h->fill, w->h->nfill, &mean);
	return mean > 0 ? max / mean : 1;
}

struct filler {
	struct world *w;
	uint64_t from, to;
	uint64_t *count; /* its own, added up after */
	int rc;
};

static void *
fill_part(void *arg)
{
	struct filler *f = arg;
	uint64_t out[N];

	for (uint64_t s = f->from; s < f->to && f->rc == 0; s++) {
		f->rc = place_stripe(f->w->t, f->w->nt, s + 1, N, out);
		for (unsigned i = 0; i < N && f->rc == 0; i++) {
			f->w->frag[s * N + i] = (uint32_t)(out[i] - 1);
			f->count[out[i] - 1]++;
		}
	}
	return NULL;
}

/* Every stripe placed as a client places it (on two threads: the placements are independent). */
static void
fill(struct world *w, uint64_t nstripes)
{
	struct filler f[2];
	pthread_t th;

	w->nstripes = nstripes;
	w->frag = malloc(nstripes * N * sizeof(*w->frag));
	if (w->frag == NULL)
		bench_die("scale", "out of memory");
	for (unsigned k = 0; k < 2; k++) {
		f[k] = (struct filler){ .w = w,
					.from = nstripes * k / 2,
					.to = nstripes * (k + 1) / 2,
					.count = calloc(w->nt, sizeof(uint64_t)) };
		if (f[k].count == NULL)
			bench_die("scale", "out of memory");
	}
	if (pthread_create(&th, NULL, fill_part, &f[1]) != 0)
		bench_die("scale", "a thread");
	fill_part(&f[0]);
	pthread_join(th, NULL);
	for (unsigned k = 0; k < 2; k++) {
		if (f[k].rc < 0)
			bench_die("scale", "placing: %s", sh_strerror(f[k].rc));
		for (unsigned i = 0; i < w->nt; i++)
			w->count[i] += f[k].count[i];
		free(f[k].count);
	}
}

static void
loc_of(const struct world *w, uint64_t s, struct meta_extent *loc)
{
	*loc = (struct meta_extent){ .stripe = s + 1, .d = D, .p = P, .frag = FRAG };
	for (unsigned i = 0; i < N; i++)
		loc->targets[i] = w->frag[s * N + i] + 1;
}

/*
 * The balance, pass after pass, as the leaders run it between their fill
 * rounds: on while max / mean is above BALANCE_ON, until it is below
 * BALANCE_OFF; each pass's budgets from the fill before it. Passes run.
 */
static unsigned
balance(struct world *w)
{
	struct plan pl = { .t = w->t, .nt = w->nt };
	bool on = false;
	unsigned passes = 0;

	for (; passes < 20; passes++) {
		double r = fill_ratio(w);
		uint64_t live = 0;

		if (!on && r > BALANCE_ON)
			on = true;
		else if (on && r <= BALANCE_OFF)
			on = false;
		if (!on)
			break;
		for (unsigned i = 0; i < w->nt; i++) /* (the fill fill_ratio just took) */
			live += w->h->fill[i].live;
		w->h->mine = live; /* every stripe led here: the leaders' parts together */
		heal_balance_budgets(w->h, (double)passes / 20); /* (a draw, the same each run) */
		for (uint64_t s = 0; s < w->nstripes; s++) {
			struct meta_extent loc;
			uint64_t to[META_FRAGS_MAX];
			uint32_t make;

			loc_of(w, s, &loc);
			if (!heal_plan_balance(w->h, &pl, &loc, &make, to))
				continue;
			for (unsigned i = 0; i < N; i++) {
				if (!(make & 1u << i))
					continue;
				w->count[w->frag[s * N + i]]--;
				w->frag[s * N + i] = (uint32_t)(to[i] - 1);
				w->count[to[i] - 1]++;
				w->moved++;
			}
		}
	}
	return passes;
}

/*
 * The rebuild of target lost, simulated: every stripe that held a fragment
 * there is a job of the heal, planned as its pass plans it (place_refill:
 * the new places) and run as a job runs (the first D fragments left read,
 * at once; then the lost ones written where they go). Each stripe's record
 * is led by one of the nodes left (its bucket's leader: a hash here), and
 * a leader runs JOBS_MAX jobs at once. Each target serves reads and writes
 * one after the other at disk_gbs. Returns the time until the last job
 * ended over the ideal: the bytes to re-create times (D + 1) spread evenly
 * over the N - 1 targets left, at disk_gbs.
 */
struct rjob {
	struct sh_heap_node hn; /* its next step's time */
	uint32_t src[D], dst[N];
	unsigned ndst, leader;
	enum { R_READ, R_WRITE, R_END } step; /* what its next time is for */
	struct rjob *next;		      /* in its leader's queue */
};

static uint64_t
serve(uint64_t *busy, uint32_t t, uint64_t now, uint64_t op_ns)
{
	busy[t] = (busy[t] > now ? busy[t] : now) + op_ns;
	return busy[t];
}

static double
rebuild(struct world *w, unsigned lost, double disk_gbs, double *secs, uint64_t *stripes)
{
	uint64_t *busy = calloc(w->nt, sizeof(*busy)), lost_frags = 0, end = 0;
	uint64_t op_ns = (uint64_t)((double)FRAG / (disk_gbs * 1e9) * 1e9), cur[N], to[N];
	struct rjob **queue = calloc(w->nt, sizeof(*queue)), *jobs;
	unsigned *running = calloc(w->nt, sizeof(*running)), njobs = 0;
	struct sh_heap heap;
	double ideal;

	jobs = calloc(w->count[lost] + 1, sizeof(*jobs));
	if (busy == NULL || queue == NULL || running == NULL || jobs == NULL)
		bench_die("scale", "out of memory");
	sh_heap_init(&heap);
	w->t[lost].weight = 0; /* lost: never a destination */
	for (uint64_t s = 0; s < w->nstripes; s++) {
		uint32_t lmask = 0;
		unsigned shared, reads = 0;
		struct rjob *j;

		for (unsigned i = 0; i < N; i++) {
			cur[i] = w->frag[s * N + i] + 1;
			if (w->frag[s * N + i] == lost)
				lmask |= 1u << i;
		}
		if (lmask == 0)
			continue;
		if (place_refill(w->t, w->nt, s + 1, N, P, cur, ((1u << N) - 1) & ~lmask, to,
				 &shared) < 0)
			bench_die("scale", "no place to rebuild stripe %llu",
				  (unsigned long long)s + 1);
		j = &jobs[njobs++];
		sh_heap_node_init(&j->hn);
		for (unsigned i = 0; i < N; i++) {
			if (lmask & 1u << i) {
				j->dst[j->ndst++] = (uint32_t)(to[i] - 1);
				lost_frags++;
			} else if (reads < D) {
				j->src[reads++] = (uint32_t)(cur[i] - 1);
			}
		}
		/* led by one of the nodes left (by the stripe, as its bucket would be) */
		j->leader = (unsigned)(sh_hash_u64(s + 1) % (w->nt - 1));
		j->leader += j->leader >= lost;
		j->next = queue[j->leader];
		queue[j->leader] = j;
	}
	*stripes = njobs;
	for (unsigned l = 0; l < w->nt; l++) /* every leader starts JOBS_MAX at once */
		while (queue[l] != NULL && running[l] < JOBS_MAX) {
			sh_heap_push(&heap, &queue[l]->hn, 0);
			queue[l] = queue[l]->next;
			running[l]++;
		}
	while (heap.n > 0) {
		struct sh_heap_node *hn = sh_heap_pop(&heap);
		struct rjob *j = (struct rjob *)hn;
		uint64_t now = hn->key, done = now;

		switch (j->step) {
		case R_READ: /* the reads, at once */
			for (unsigned i = 0; i < D; i++) {
				uint64_t t = serve(busy, j->src[i], now, op_ns);

				done = t > done ? t : done;
			}
			j->step = R_WRITE;
			sh_heap_push(&heap, &j->hn, done);
			break;
		case R_WRITE: /* the last read is in: the lost ones written */
			for (unsigned i = 0; i < j->ndst; i++) {
				uint64_t t = serve(busy, j->dst[i], now, op_ns);

				done = t > done ? t : done;
			}
			j->step = R_END;
			sh_heap_push(&heap, &j->hn, done);
			break;
		case R_END: /* its leader starts the next */
			end = now > end ? now : end;
			running[j->leader]--;
			if (queue[j->leader] != NULL) {
				struct rjob *n = queue[j->leader];

				queue[j->leader] = n->next;
				running[j->leader]++;
				sh_heap_push(&heap, &n->hn, now);
			}
			break;
		}
	}
	ideal = (double)lost_frags * (D + 1) / (w->nt - 1) * (double)op_ns;
	*secs = (double)end / 1e9;
	sh_heap_fini(&heap);
	free(busy);
	free(queue);
	free(running);
	free(jobs);
	return (double)end / ideal;
}

/* ---- fanout: a configuration change's way to every client, in the simulator ---- */

#define HOSTS	    100 /* client machines (the clients share their endpoints) */
#define FAN_T0_NS   (3ull * SH_NSEC_PER_SEC) /* the change, once every client asked twice */
#define FAN_MAX_NS  (30ull * SH_NSEC_PER_SEC)
#define FAN_CALL_NS (2ull * SH_NSEC_PER_SEC) /* as the client's */

struct fanout;

struct fnode { /* a backend: the configuration as the leader last pushed it */
	struct fanout *f;
	struct net *net;
	uint64_t epoch;
	uint8_t *cfg;
	size_t len;
	struct env_timer push; /* (the leader's, to it) */
};

struct fclient {
	struct fanout *f;
	struct net *net; /* its host's */
	uint64_t node;	 /* the backend it asks (client_cfg_node) */
	uint64_t epoch;
	struct env_timer poll;
	bool busy;
};

struct fanout {
	struct sim *sim;
	struct cfg *cur; /* decoded into (as a backend's and a client's adopt) */
	struct fnode *b;
	unsigned nb, nc, got_b, got_c;
	struct fclient *c;
	struct net *lead, *host[HOSTS];
	struct sh_enc next;		   /* the leader id, then the new configuration */
	uint64_t epoch, t0, last_b, *at_c; /* when each client held it */
	bool failed;
};

static struct net *
fan_net(struct sim *sim, const char *name, uint64_t id, const char *addr)
{
	char ip[64];
	struct sim_node *sn;
	struct net_iface ifc = { 0 };
	struct net_config nc = { .node_id = id, .ifaces = &ifc, .nifaces = 1 };
	struct net *n;

	snprintf(ip, sizeof(ip), "%.*s", (int)strcspn(addr, ":"), addr);
	sn = sim_node_create(sim, name, ip);
	if (sn == NULL || env_addr_parse(addr, &ifc.addr) < 0 ||
	    net_create(sim_node_env(sn), &nc, &n) < 0)
		bench_die("scale", "a simulated endpoint for %s", addr);
	return n;
}

static void
fan_addr(char *buf, size_t len, unsigned net, unsigned i)
{
	snprintf(buf, len, "10.%u.%u.%u:7000", net, i / 200, i % 200 + 1);
}

/* A configuration of n nodes (ids 2..n+1), a drive each, 4,096 buckets on 5 each. */
static struct cfg *
fan_cfg(unsigned n, uint64_t epoch)
{
	struct cfg *c = cfg_new();

	if (c == NULL || n > CFG_NODES_MAX || n > CFG_DRIVES_MAX)
		bench_die("scale", "a configuration of %u nodes (at most %u)", n, CFG_NODES_MAX);
	c->epoch = epoch;
	c->created = true;
	snprintf(c->name, sizeof(c->name), "scale");
	c->nbuckets = CFG_BUCKETS_DEFAULT;
	c->replicas = 5;
	c->nnodes = c->ndrives = n;
	c->next_drive = n + 1;
	for (unsigned i = 0; i < n; i++) {
		struct cfg_node *nd = &c->nodes[i];

		nd->id = i + 2;
		nd->state = CFG_UP;
		fan_addr(nd->mgmt, sizeof(nd->mgmt), 1, i);
		fan_addr(nd->data, sizeof(nd->data), 1, i);
		snprintf(nd->domain, sizeof(nd->domain), "rack%u-n%u", i / 20, i);
		c->drives[i] = (struct cfg_drive){ .id = i + 1, .node = nd->id, .capacity = CAP };
		snprintf(c->drives[i].path, sizeof(c->drives[i].path), "/dev/nvme0n1");
	}
	c->buckets = sh_calloc((size_t)c->nbuckets * c->replicas, sizeof(uint64_t));
	if (c->buckets == NULL)
		bench_die("scale", "out of memory");
	for (size_t i = 0; i < (size_t)c->nbuckets * c->replicas; i++)
		c->buckets[i] = (i / c->replicas * 7 + i % c->replicas) % n + 2;
	return c;
}

static void
fan_store(struct fnode *b, uint64_t epoch, const uint8_t *cfg, size_t len)
{
	sh_free(b->cfg);
	if ((b->cfg = sh_malloc(len)) == NULL)
		bench_die("scale", "out of memory");
	memcpy(b->cfg, cfg, len);
	b->len = len;
	b->epoch = epoch;
}

/* NET_OP_CLUSTER_PUSH at a backend: the leader's id, the configuration (cluster.c on_push). */
static void
on_fan_push(struct net_req *req, void *arg)
{
	struct fnode *b = arg;
	const struct net_msg *m = net_req_body(req);
	const uint8_t *p = m->buf->data + m->off;

	if (m->len <= 8 || cfg_decode(p + 8, m->len - 8, b->f->cur) < 0) {
		b->f->failed = true;
		net_reply(req, -EINVAL, NULL, 0);
		return;
	}
	if (b->f->cur->epoch > b->epoch) {
		fan_store(b, b->f->cur->epoch, p + 8, m->len - 8);
		b->f->got_b++;
		b->f->last_b = sim_now(b->f->sim);
	}
	net_reply(req, 0, &(struct iovec){ &b->epoch, 8 }, 1);
}

/* NET_OP_CLUSTER_CONFIG at a backend: our epoch, and the configuration if the asker's is older. */
static void
on_fan_config(struct net_req *req, void *arg)
{
	struct fnode *b = arg;
	const struct net_msg *m = net_req_body(req);
	uint64_t epoch;
	struct iovec iov[2] = { { &b->epoch, 8 }, { b->cfg, b->len } };

	if (m->len != 8) {
		net_reply(req, -EINVAL, NULL, 0);
		return;
	}
	memcpy(&epoch, m->buf->data + m->off, 8);
	net_reply(req, 0, iov, epoch < b->epoch ? 2 : 1);
}

static void
on_fan_pushed(void *arg, int status, const struct net_msg *reply)
{
	(void)reply;
	if (status < 0)
		((struct fnode *)arg)->f->failed = true;
}

static void
on_fan_push_timer(struct env_timer *t)
{
	struct fnode *b = t->arg;
	struct fanout *f = b->f;
	struct net_call_opts o = { .timeout_ns = FAN_CALL_NS, .retries = 1 };

	if (net_call(f->lead, net_node_id(b->net), NET_OP_CLUSTER_PUSH,
		     &(struct iovec){ f->next.p, f->next.len }, 1, &o, on_fan_pushed, b, NULL) < 0)
		f->failed = true;
}

static void
on_fan_answer(void *arg, int status, const struct net_msg *reply)
{
	struct fclient *c = arg;
	struct fanout *f = c->f;

	c->busy = false;
	if (status < 0 || reply == NULL || reply->len <= 8)
		return; /* (nothing new: it asks again at its next poll) */
	if (cfg_decode(reply->buf->data + reply->off + 8, reply->len - 8, f->cur) < 0) {
		f->failed = true;
		return;
	}
	if (f->cur->epoch > c->epoch) {
		c->epoch = f->cur->epoch;
		if (c->epoch == f->epoch)
			f->at_c[f->got_c++] = sim_now(f->sim) - f->t0;
	}
}

static void
on_fan_poll(struct env_timer *t)
{
	struct fclient *c = t->arg;
	struct net_call_opts o = { .timeout_ns = FAN_CALL_NS, .retries = 1 };

	if (!c->busy &&
	    net_call(c->net, c->node, NET_OP_CLUSTER_CONFIG, &(struct iovec){ &c->epoch, 8 }, 1, &o,
		     on_fan_answer, c, NULL) == 0)
		c->busy = true;
	env_timer_arm(t, CLIENT_CFG_POLL_NS);
}

static bool
fan_done(void *arg)
{
	const struct fanout *f = arg;

	return f->failed || f->got_c == f->nc;
}

static int
by_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * Every backend holds configuration epoch 1 and every client knows it; at
 * FAN_T0_NS the leader pushes epoch 2 (a node marked down) to each backend,
 * one after the other as its link sends them; the clients ask their
 * backend every CLIENT_CFG_POLL_NS from a random phase.
 */
static int
bench_fanout(unsigned nb, unsigned nc, double link_gbs, uint64_t seed, struct bench_fanout *out)
{
	struct fanout f = { .nb = nb, .nc = nc, .epoch = 2 };
	struct cfg *old = fan_cfg(nb, 1), *next = fan_cfg(nb, 2);
	struct sh_enc e;
	struct sh_rand r;
	char addr[64];
	uint64_t lead_id = 1;
	double per_s;

	sh_rand_seed(&r, seed);
	f.sim = sim_create(seed);
	f.cur = cfg_new();
	f.b = calloc(nb, sizeof(*f.b));
	f.c = calloc(nc, sizeof(*f.c));
	f.at_c = calloc(nc, sizeof(*f.at_c));
	if (f.sim == NULL || f.cur == NULL || f.b == NULL || f.c == NULL || f.at_c == NULL)
		bench_die("scale", "out of memory");
	next->nodes[nb - 1].state = CFG_DOWN; /* the change */
	sh_enc_init(&e);
	cfg_encode(&e, old);
	sh_enc_init(&f.next);
	sh_enc_u64(&f.next, lead_id);
	cfg_encode(&f.next, next);
	if (sh_enc_error(&e) || sh_enc_error(&f.next))
		bench_die("scale", "encoding the configuration");
	out->cfg_bytes = f.next.len - 8;

	fan_addr(addr, sizeof(addr), 3, 0);
	f.lead = fan_net(f.sim, "leader", lead_id, addr);
	for (unsigned i = 0; i < nb; i++) {
		struct fnode *b = &f.b[i];
		char name[32];

		snprintf(name, sizeof(name), "backend%u", i);
		fan_addr(addr, sizeof(addr), 1, i);
		b->f = &f;
		b->net = fan_net(f.sim, name, old->nodes[i].id, addr);
		fan_store(b, 1, e.p, e.len);
		if (net_handle(b->net, NET_OP_CLUSTER_PUSH, on_fan_push, b) < 0 ||
		    net_handle(b->net, NET_OP_CLUSTER_CONFIG, on_fan_config, b) < 0 ||
		    net_peer_ensure(f.lead, old->nodes[i].id, addr) < 0)
			bench_die("scale", "backend %u", i);
		env_timer_init(net_env(f.lead), &b->push, on_fan_push_timer, b);
	}
	for (unsigned h = 0; h < HOSTS; h++) {
		char name[32];

		snprintf(name, sizeof(name), "host%u", h);
		fan_addr(addr, sizeof(addr), 2, h);
		f.host[h] = fan_net(f.sim, name, 100000 + h, addr);
		for (unsigned i = 0; i < nb; i++)
			if (net_peer_ensure(f.host[h], old->nodes[i].id, old->nodes[i].mgmt) < 0)
				bench_die("scale", "host %u", h);
	}
	for (unsigned i = 0; i < nc; i++) {
		struct fclient *c = &f.c[i];

		c->f = &f;
		c->net = f.host[i % HOSTS];
		c->epoch = 1;
		c->node = client_cfg_node(old, 1000000 + i); /* (its key: its own endpoint's id) */
		env_timer_init(net_env(c->net), &c->poll, on_fan_poll, c);
		env_timer_arm(&c->poll, sh_rand_below(&r, CLIENT_CFG_POLL_NS));
	}
	/* the change: pushed one after the other, as fast as the leader's link sends them */
	f.t0 = FAN_T0_NS;
	per_s = (double)f.next.len / (link_gbs * 1e9);
	for (unsigned i = 0; i < nb; i++)
		env_timer_arm_at(&f.b[i].push, f.t0 + (uint64_t)(per_s * 1e9 * (i + 1)));
	sim_run_until(f.sim, fan_done, &f, FAN_MAX_NS);

	if (!f.failed && f.got_c == nc) {
		qsort(f.at_c, nc, sizeof(f.at_c[0]), by_u64);
		out->backends_s = (double)(f.last_b - f.t0) / 1e9;
		out->last_s = (double)f.at_c[nc - 1] / 1e9;
		out->median_s = (double)f.at_c[nc / 2] / 1e9;
	}
	for (unsigned i = 0; i < nc; i++)
		env_timer_cancel(&f.c[i].poll);
	for (unsigned i = 0; i < nb; i++) {
		env_timer_cancel(&f.b[i].push);
		net_destroy(f.b[i].net);
		sh_free(f.b[i].cfg);
	}
	for (unsigned h = 0; h < HOSTS; h++)
		net_destroy(f.host[h]);
	net_destroy(f.lead);
	sim_destroy(f.sim);
	sh_enc_fini(&e);
	sh_enc_fini(&f.next);
	cfg_free(old);
	cfg_free(next);
	cfg_free(f.cur);
	free(f.b);
	free(f.c);
	free(f.at_c);
	return f.failed || f.got_c != nc ? -ETIMEDOUT : 0;
}

static const char *
arg(int argc, char **argv, const char *name, const char *dflt)
{
	for (int i = 1; i + 1 < argc; i++)
		if (strcmp(argv[i], name) == 0)
			return argv[i + 1];
	return dflt;
}

int
main(int argc, char **argv)
{
	unsigned backends = (unsigned)atoi(arg(argc, argv, "--backends", "1000"));
	unsigned clients = (unsigned)atoi(arg(argc, argv, "--clients", "10000"));
	unsigned per = (unsigned)atoi(arg(argc, argv, "--frags-per-target", "16000"));
	double disk_gbs = atof(arg(argc, argv, "--disk-gbs", "2"));
	double link_gbs = atof(arg(argc, argv, "--link-gbs", "12.5"));
	uint64_t seed = strtoull(arg(argc, argv, "--seed", "1"), NULL, 10);
	struct world w = { 0 };
	double t0, r_raw, r_fill, r_grow_after, grow_ratio, rb_ratio, rb_secs, min, fanout;
	uint64_t moved_fill, rb_stripes, live = 0;
	unsigned passes_fill, passes_grow, grown = backends / 10;
	struct bench_fanout fo;

	if (backends < 2 * N || clients == 0 || per == 0 || disk_gbs <= 0 || link_gbs <= 0)
		bench_die("scale",
			  "usage: scale [--backends N >= 12] [--clients N] "
			  "[--frags-per-target N] [--disk-gbs X] [--link-gbs X] [--seed N]");
	if ((w.h = calloc(1, sizeof(*w.h))) == NULL)
		bench_die("scale", "out of memory");
	targets_add(&w, backends);

	/* fill */
	t0 = bench_now();
	fill(&w, (uint64_t)backends * per / N);
	printf("fill: %llu stripes of %u+%u on %u targets placed in %.1f s (%.1f us each)\n",
	       (unsigned long long)w.nstripes, D, P, w.nt, bench_now() - t0,
	       (bench_now() - t0) * 1e6 / (double)w.nstripes);
	r_raw = fill_ratio(&w);
	t0 = bench_now();
	passes_fill = balance(&w);
	moved_fill = w.moved;
	r_fill = fill_ratio(&w);
	printf("fill: max/mean %.4f as placed, %.4f after %u balance pass(es) "
	       "(%.2f %% of the fragments moved, %.1f s)\n",
	       r_raw, r_fill, passes_fill, 100.0 * (double)moved_fill / (double)(w.nstripes * N),
	       bench_now() - t0);

	/* grow: 10 % more, empty */
	targets_add(&w, grown);
	for (unsigned i = 0; i < w.nt; i++)
		live += w.count[i] * FRAG;
	min = (double)live * grown / w.nt; /* what the new ones hold at the mean (equal drives) */
	t0 = bench_now();
	passes_grow = balance(&w);
	grow_ratio = (double)(w.moved - moved_fill) * FRAG / min;
	r_grow_after = fill_ratio(&w);
	printf("grow: %u backends join %u: %.1f GiB moved, the least is %.1f GiB: %.3fx "
	       "(%u pass(es), max/mean after %.4f, %.1f s)\n",
	       grown, backends, (double)(w.moved - moved_fill) * FRAG / (1 << 30), min / (1 << 30),
	       grow_ratio, passes_grow, r_grow_after, bench_now() - t0);

	/* rebuild: the first backend lost */
	rb_ratio = rebuild(&w, 0, disk_gbs, &rb_secs, &rb_stripes);
	printf("rebuild: %llu stripes lost a fragment, re-created in %.3f s (simulated, %u jobs "
	       "at once per leader, %.1f GB/s per target): %.3fx the ideal\n",
	       (unsigned long long)rb_stripes, rb_secs, JOBS_MAX, disk_gbs, rb_ratio);

	/* fanout */
	t0 = bench_now();
	if (bench_fanout(backends, clients, link_gbs, seed, &fo) < 0)
		bench_die("scale", "the fanout simulation failed");
	fanout = fo.last_s;
	printf("fanout: a configuration of %u nodes (%zu bytes) from the leader to %u backends "
	       "in %.3f s, to %u clients in %.3f s (median %.3f s; simulated, %.1f s to run)\n",
	       backends, fo.cfg_bytes, backends, fo.backends_s, clients, fanout, fo.median_s,
	       bench_now() - t0);

	printf("BENCH scale {\"backends\":%u,\"clients\":%u,\"fill_max_over_mean\":%.4f,"
	       "\"grow_moved_vs_min\":%.4f,\"rebuild_vs_ideal\":%.4f,\"config_fanout_s\":%.4f}\n",
	       backends, clients, r_fill, grow_ratio, rb_ratio, fanout);
	free(w.h->fill);
	sh_free(w.h->take);
	free(w.h);
	free(w.frag);
	free(w.count);
	free(w.t);
	return 0;
}
