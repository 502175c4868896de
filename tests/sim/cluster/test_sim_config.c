// SPDX-License-Identifier: Apache-2.0
/*
 * The cluster configuration service in the simulator: six shoald-like
 * nodes (net + cluster; five voters and a spare) form a cluster (create
 * on one, add the others), then take random changes at random nodes
 * while partitions come and go and the leader is killed. Checked, over
 * many seeds:
 *  - no two nodes ever see different configurations for one epoch;
 *  - after a leader is killed a new one commits a change within 3 s;
 *  - a silent node is marked down within 3 s, and up when it returns;
 *  - after healing every node follows the same newest configuration.
 */
#include <stdio.h>

#include "../../../src/cluster/cluster.h"
#include "../../../src/cluster/rgroup.h"
#include "../../../src/env/env_sim.h"
#include "../../lib/test.h"

#define N	  6 /* five voters and a spare */
#define EPOCH_MAX 4096

struct node {
	struct world *w;
	int id;
	struct sim_node *sn;
	struct env *env;
	struct net *net;
	struct cluster *cl;
	bool up;
	bool data_down; /* what its data_down callback says */
};

struct world {
	struct sim *sim;
	struct sh_rand rng;
	struct node n[N + 1];
	uint64_t epoch_hash[EPOCH_MAX]; /* 0: not seen yet */
	int done, ok, failed;
	uint64_t seed;
};

static void
addr(int id, int port, char *buf, size_t len)
{
	snprintf(buf, len, "10.0.1.%d:%d", id, port);
}

static void
on_changed(void *arg, const struct cfg *c)
{
	struct node *n = arg;
	struct world *w = n->w;
	struct sh_enc e;
	uint64_t h;

	sh_enc_init(&e);
	cfg_encode(&e, c);
	SH_ASSERT_OK(sh_enc_error(&e));
	h = sh_hash64(e.p, e.len, 7) | 1;
	sh_enc_fini(&e);
	SH_ASSERT_LT(c->epoch, EPOCH_MAX);
	if (w->epoch_hash[c->epoch] == 0)
		w->epoch_hash[c->epoch] = h;
	SH_ASSERT_MSG(w->epoch_hash[c->epoch] == h,
		      "seed %llu: node %d sees a different configuration for epoch %llu",
		      (unsigned long long)w->seed, n->id, (unsigned long long)c->epoch);
}

static bool
node_data_down(void *arg)
{
	return ((struct node *)arg)->data_down;
}

static void
node_start(struct node *n)
{
	struct net_iface ifc = { 0 };
	struct net_config ncfg = { .node_id = (uint64_t)n->id,
				   .ifaces = &ifc,
				   .nifaces = 1,
				   .dead_ns = 3 * SH_NSEC_PER_SEC };
	char mgmt[64], data[64];
	struct cluster_params p = { .node_id = (uint64_t)n->id,
				    .mgmt = mgmt,
				    .data = data,
				    .dir = "/var/shoal",
				    .changed = on_changed,
				    .data_down = node_data_down,
				    .arg = n };

	addr(n->id, 7000, mgmt, sizeof(mgmt));
	addr(n->id, 7100, data, sizeof(data));
	SH_ASSERT_OK(env_addr_parse(mgmt, &ifc.addr));
	SH_ASSERT_OK(net_create(n->env, &ncfg, &n->net));
	SH_ASSERT_OK(cluster_start(n->net, &p, &n->cl));
	n->up = true;
}

static void
on_stopped(void *arg)
{
	((struct node *)arg)->up = false;
}

static bool
stopped(void *arg)
{
	return !((struct node *)arg)->up;
}

static void
node_kill(struct world *w, struct node *n)
{
	sim_node_crash(n->sn, SIM_CRASH_TEAR);
	sim_node_restart(n->sn);
	cluster_stop(n->cl, on_stopped, n);
	SH_ASSERT(sim_run_until(w->sim, stopped, n, 10 * SH_NSEC_PER_SEC));
	net_destroy(n->net);
}

struct req {
	struct world *w;
	int status;
	bool done;
	char msg[CFG_MSG_MAX];
};

static void
on_done(void *arg, int status, const char *msg)
{
	struct req *r = arg;

	r->status = status;
	r->done = true;
	snprintf(r->msg, sizeof(r->msg), "%s", msg);
	r->w->done++;
	if (status == 0)
		r->w->ok++;
	else
		r->w->failed++;
}

static bool
req_done(void *arg)
{
	return ((struct req *)arg)->done;
}

/* Submit at node i and wait; returns the status. */
static int
change(struct world *w, int i, const struct cfg_cmd *cmd, uint64_t max_ns, char *msg)
{
	struct req r = { .w = w };

	SH_ASSERT_OK(cluster_submit(w->n[i].cl, cmd, on_done, &r));
	if (!sim_run_until(w->sim, req_done, &r, max_ns)) {
		/* leave it to finish in the background; it must not touch r: wait it out */
		SH_ASSERT(sim_run_until(w->sim, req_done, &r, 60 * SH_NSEC_PER_SEC));
		return -EINPROGRESS;
	}
	if (msg)
		snprintf(msg, CFG_MSG_MAX, "%s", r.msg);
	return r.status;
}

static int
leader_of(struct world *w)
{
	for (int i = 1; i <= N; i++) {
		struct cluster_info ci;

		if (!w->n[i].up)
			continue;
		cluster_info(w->n[i].cl, &ci);
		if (ci.started && ci.raft_state == RGROUP_LEADER)
			return i;
	}
	return 0;
}

static bool
all_follow(void *arg)
{
	struct world *w = arg;
	uint64_t e = 0;

	for (int i = 1; i <= N; i++) {
		const struct cfg *c;

		if (!w->n[i].up)
			return false;
		c = cluster_cfg(w->n[i].cl);
		if (i == 1)
			e = c->epoch;
		else if (c->epoch != e)
			return false;
	}
	return e > 0;
}

/* The leader sees five voters (all of them up, if live). */
static bool
voters_are(struct world *w, bool live)
{
	int l = leader_of(w);
	struct cluster_info ci;

	if (l == 0)
		return false;
	cluster_info(w->n[l].cl, &ci);
	for (unsigned i = 0; live && i < ci.nvoters; i++)
		if (!w->n[ci.voters[i]].up)
			return false;
	return ci.nvoters == 5;
}

static bool
five_voters(void *arg)
{
	return voters_are(arg, false);
}

static bool
five_live_voters(void *arg)
{
	return voters_are(arg, true);
}

static void
form(struct world *w)
{
	struct cfg_cmd cmd = { .op = CFG_OP_CREATE, .nbuckets = 64 };
	char msg[CFG_MSG_MAX];

	snprintf(cmd.name, sizeof(cmd.name), "sim");
	SH_ASSERT_EQ(change(w, 1, &cmd, 10 * SH_NSEC_PER_SEC, msg), 0);
	for (int i = 2; i <= N; i++) {
		struct cfg_cmd add = { .op = CFG_OP_NODE_ADD, .id = (uint64_t)i };

		addr(i, 7000, add.addr, sizeof(add.addr));
		addr(i, 7100, add.data, sizeof(add.data));
		SH_ASSERT_MSG(change(w, 1, &add, 10 * SH_NSEC_PER_SEC, msg) == 0, "add %d: %s", i,
			      msg);
	}
	/* a duplicate is refused with a reason, and changes nothing */
	{
		struct cfg_cmd dup = { .op = CFG_OP_NODE_ADD, .id = 3 };
		uint64_t before = cluster_cfg(w->n[1].cl)->epoch;

		addr(9, 7000, dup.addr, sizeof(dup.addr));
		addr(9, 7100, dup.data, sizeof(dup.data));
		SH_ASSERT_EQ(change(w, 2, &dup, 10 * SH_NSEC_PER_SEC, msg), -EEXIST);
		SH_ASSERT(strstr(msg, "already exists") != NULL);
		SH_ASSERT_EQ(cluster_cfg(w->n[1].cl)->epoch, before);
	}
	SH_ASSERT_MSG(sim_run_until(w->sim, all_follow, w, 20 * SH_NSEC_PER_SEC),
		      "seed %llu: nodes do not follow the configuration",
		      (unsigned long long)w->seed);
	SH_ASSERT_MSG(sim_run_until(w->sim, five_voters, w, 20 * SH_NSEC_PER_SEC),
		      "seed %llu: the config group does not grow to 5 voters",
		      (unsigned long long)w->seed);
}

/* Six nodes started, the cluster formed. */
static void
world_start(struct world *w, uint64_t seed)
{
	memset(w, 0, sizeof(*w));
	w->seed = seed;
	sh_rand_seed(&w->rng, seed);
	w->sim = sim_create(seed);
	for (int i = 1; i <= N; i++) {
		char name[16], ip[32];

		snprintf(name, sizeof(name), "n%d", i);
		snprintf(ip, sizeof(ip), "10.0.1.%d", i);
		w->n[i].w = w;
		w->n[i].id = i;
		w->n[i].sn = sim_node_create(w->sim, name, ip);
		w->n[i].env = sim_node_env(w->n[i].sn);
		node_start(&w->n[i]);
	}
	form(w);
}

static void
random_change(struct world *w, int at)
{
	struct cfg_cmd cmd = { 0 };
	uint64_t r = sh_rand_below(&w->rng, 4);

	if (r == 3) {
		/* take back an interface some node has, if any */
		const struct cfg *c = cluster_cfg(w->n[at].cl);

		for (uint32_t i = 0; i < c->nnodes && cmd.op == 0; i++)
			if (c->nodes[i].nnets > 0) {
				cmd.op = CFG_OP_NET_REMOVE;
				cmd.id = c->nodes[i].id;
				snprintf(cmd.addr, sizeof(cmd.addr), "%s",
					 c->nodes[i].nets[0].addr);
			}
		if (cmd.op == 0)
			return;
	} else if (r == 0) {
		cmd.op = CFG_OP_NET_ADD;
		cmd.id = 1 + sh_rand_below(&w->rng, N);
		snprintf(cmd.addr, sizeof(cmd.addr), "10.9.%u.%u:7200",
			 (unsigned)sh_rand_below(&w->rng, 200),
			 (unsigned)sh_rand_below(&w->rng, 200));
		snprintf(cmd.label, sizeof(cmd.label), "sw%u", (unsigned)sh_rand_below(&w->rng, 3));
	} else {
		cmd.op = r == 1 ? CFG_OP_DRIVE_ADD : CFG_OP_FS_DELETE;
		cmd.id = (uint64_t)at;
		snprintf(cmd.path, sizeof(cmd.path), "/dev/nvme%un1",
			 (unsigned)sh_rand_below(&w->rng, 8));
		cmd.size = 1ull << 30;
		snprintf(cmd.name, sizeof(cmd.name), "fs%u", (unsigned)sh_rand_below(&w->rng, 3));
	}
	(void)change(w, at, &cmd, 30 * SH_NSEC_PER_SEC, NULL);
}

static void
run_world(uint64_t seed)
{
	static struct world w;
	char msg[CFG_MSG_MAX];

	world_start(&w, seed);

	/* kill -9 the leader: a new one commits a change within 3 s */
	{
		int l = leader_of(&w), at;
		uint64_t t0;
		struct cfg_cmd fs = { .op = CFG_OP_FS_CREATE, .d = 3, .p = 2 };

		SH_ASSERT_GT(l, 0);
		node_kill(&w, &w.n[l]);
		t0 = sim_now(w.sim);
		at = l % N + 1;
		snprintf(fs.name, sizeof(fs.name), "after-kill");
		/* drives first, so that 3+2 can be placed */
		for (int i = 1; i <= N; i++) {
			struct cfg_cmd d = { .op = CFG_OP_DRIVE_ADD,
					     .id = (uint64_t)i,
					     .size = 1ull << 30 };

			snprintf(d.path, sizeof(d.path), "/dev/nvme0n1");
			if (i == l)
				continue;
			SH_ASSERT_MSG(change(&w, at, &d, 10 * SH_NSEC_PER_SEC, msg) == 0,
				      "drive %d: %s", i, msg);
			if (i == at || (at == N && i == 1))
				SH_ASSERT_MSG(
				    sim_now(w.sim) - t0 < 3 * SH_NSEC_PER_SEC,
				    "seed %llu: first change after killing the leader took "
				    "%llu ms",
				    (unsigned long long)seed,
				    (unsigned long long)((sim_now(w.sim) - t0) / SH_NSEC_PER_MSEC));
		}
		/* only 5 domains have drives: 4+2 cannot be placed */
		fs.d = 4;
		SH_ASSERT_EQ(change(&w, at, &fs, 10 * SH_NSEC_PER_SEC, msg), -ENOSPC);
		/* the killed node is marked down within 3 s of its death */
		if (sim_now(w.sim) < t0 + 3 * SH_NSEC_PER_SEC)
			sim_run_for(w.sim, t0 + 3 * SH_NSEC_PER_SEC - sim_now(w.sim));
		SH_ASSERT_EQ(cfg_node_find(cluster_cfg(w.n[at].cl), (uint64_t)l)->state, CFG_DOWN);
		node_start(&w.n[l]);
		SH_ASSERT_MSG(sim_run_until(w.sim, all_follow, &w, 20 * SH_NSEC_PER_SEC),
			      "seed %llu: the restarted node does not catch up",
			      (unsigned long long)seed);
		sim_run_for(w.sim, 2 * SH_NSEC_PER_SEC);
		SH_ASSERT_EQ(cfg_node_find(cluster_cfg(w.n[at].cl), (uint64_t)l)->state, CFG_UP);
	}

	/* a voter dies for good: after replace_ns the spare takes its vote */
	{
		int l = leader_of(&w), v = 0;
		struct cluster_info ci;

		SH_ASSERT_GT(l, 0);
		cluster_info(w.n[l].cl, &ci);
		for (unsigned i = 0; i < ci.nvoters && v == 0; i++)
			if ((int)ci.voters[i] != l)
				v = (int)ci.voters[i];
		node_kill(&w, &w.n[v]);
		SH_ASSERT_MSG(sim_run_until(w.sim, five_live_voters, &w, 30 * SH_NSEC_PER_SEC),
			      "seed %llu: node %d's vote was not handed to the spare",
			      (unsigned long long)seed, v);
		node_start(&w.n[v]);
		SH_ASSERT(sim_run_until(w.sim, all_follow, &w, 20 * SH_NSEC_PER_SEC));
	}

	/* random changes under partitions */
	for (int step = 0; step < 40; step++) {
		uint64_t r = sh_rand_below(&w.rng, 100);

		if (r < 15) {
			for (int i = 1; i <= N; i++)
				sim_partition_set(w.n[i].sn, (int)sh_rand_below(&w.rng, 2));
		} else if (r < 30) {
			sim_heal(w.sim);
		}
		random_change(&w, 1 + (int)sh_rand_below(&w.rng, N));
		sim_run_for(w.sim, sh_rand_below(&w.rng, 500) * SH_NSEC_PER_MSEC);
	}
	sim_heal(w.sim);
	SH_ASSERT_MSG(sim_run_until(w.sim, all_follow, &w, 30 * SH_NSEC_PER_SEC),
		      "seed %llu: nodes do not converge after healing", (unsigned long long)seed);
	SH_ASSERT_GT(w.ok, N);
	for (int i = 1; i <= N; i++) {
		cluster_stop(w.n[i].cl, on_stopped, &w.n[i]);
		SH_ASSERT(sim_run_until(w.sim, stopped, &w.n[i], 10 * SH_NSEC_PER_SEC));
		net_destroy(w.n[i].net);
	}
	sim_destroy(w.sim);
}

static uint8_t
state_of(struct world *w, int id)
{
	int l = leader_of(w);
	const struct cfg_node *n = l ? cfg_node_find(cluster_cfg(w->n[l].cl), (uint64_t)id) : NULL;

	return n ? n->state : 0;
}

struct want {
	struct world *w;
	int id;
	uint8_t state;
};

static bool
state_is(void *arg)
{
	struct want *x = arg;

	return state_of(x->w, x->id) == x->state;
}

/*
 * A node that says its data network is down (its heartbeats, or the
 * leader's own check) is marked CFG_DATA_DOWN, not down; silent it is
 * down; saying it is fine again it is up.
 */
TEST(config_data_network_down_is_marked_and_cleared)
{
	static struct world w;
	uint64_t seed = sh_test_seed();

	world_start(&w, seed);
	for (int round = 0; round < 2; round++) {
		/* a follower, then the leader itself */
		int id = round == 0 ? (leader_of(&w) % N) + 1 : leader_of(&w);
		struct want x = { &w, id, CFG_DATA_DOWN };

		SH_ASSERT_NE(id, 0);
		w.n[id].data_down = true;
		SH_ASSERT_MSG(sim_run_until(w.sim, state_is, &x, 3 * SH_NSEC_PER_SEC),
			      "seed %llu: node %d not marked data-down (state %u)",
			      (unsigned long long)seed, id, state_of(&w, id));
		w.n[id].data_down = false;
		x.state = CFG_UP;
		SH_ASSERT_MSG(sim_run_until(w.sim, state_is, &x, 3 * SH_NSEC_PER_SEC),
			      "seed %llu: node %d not back up", (unsigned long long)seed, id);
	}
	/* silent while it says data-down: down; heard again: data-down */
	{
		int id = (leader_of(&w) % N) + 1;
		struct want x = { &w, id, CFG_DOWN };

		w.n[id].data_down = true;
		sim_partition_set(w.n[id].sn, 1);
		SH_ASSERT_MSG(sim_run_until(w.sim, state_is, &x, 5 * SH_NSEC_PER_SEC),
			      "seed %llu: silent node %d not down", (unsigned long long)seed, id);
		sim_heal(w.sim);
		x.state = CFG_DATA_DOWN;
		SH_ASSERT_MSG(sim_run_until(w.sim, state_is, &x, 5 * SH_NSEC_PER_SEC),
			      "seed %llu: node %d not data-down after healing",
			      (unsigned long long)seed, id);
	}
	for (int i = 1; i <= N; i++) {
		cluster_stop(w.n[i].cl, on_stopped, &w.n[i]);
		SH_ASSERT(sim_run_until(w.sim, stopped, &w.n[i], 10 * SH_NSEC_PER_SEC));
		net_destroy(w.n[i].net);
	}
	sim_destroy(w.sim);
}

TEST(config_cluster)
{
	for (int i = 0; i < 2; i++)
		run_world(sh_test_seed() * 10 + (uint64_t)i);
}
