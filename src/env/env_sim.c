// SPDX-License-Identifier: Apache-2.0
/*
 * The simulated world: virtual clock, the one event queue, nodes with their
 * envs, crash and restart. The network is in env_sim_net.c, disks in
 * env_sim_disk.c; the model is described in env_sim.h.
 *
 * Node life cycle:
 *
 *     create --> ALIVE --crash--> DEAD --restart--> ALIVE ...
 *
 * Invariants: a dead node has no queued events, no endpoints and no open
 * disks; every queued event of a node is on node->events; events fire in
 * (time, sequence) order and time never goes backwards.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "env_sim_int.h"

SH_LOG_FACILITY("env.sim");

/* Virtual wall clock starts at 2026-01-01T00:00:00Z. */
#define SIM_EPOCH_NS (1767225600ULL * SH_NSEC_PER_SEC)

void
sim_trace_mix(struct sim *sim, uint64_t v)
{
	sim->trace = sh_hash_u64(sim->trace ^ sh_hash_u64(v + sim->now));
}

static uint64_t
node_now(struct env *env)
{
	return to_node(env)->sim->now;
}

static uint64_t
node_realtime(struct env *env)
{
	return SIM_EPOCH_NS + to_node(env)->sim->now;
}

static void
node_random(struct env *env, void *buf, size_t len)
{
	sh_rand_fill(&to_node(env)->rng, buf, len);
}

int
sim_event_push(struct env *env, struct env_event *ev, uint64_t when)
{
	struct sim_node *node = to_node(env);
	struct sim *sim = node->sim;
	int rc;

	if (!node->alive)
		return 0; /* a dead process schedules nothing */
	if (when < sim->now)
		when = sim->now;
	rc = sh_heap_push(&sim->q, &ev->hn, when);
	if (rc < 0)
		return rc;
	sh_list_add_tail(&node->events, &ev->link);
	return 0;
}

static void
node_event_cancel(struct env *env, struct env_event *ev)
{
	sh_heap_remove(&to_node(env)->sim->q, &ev->hn);
	sh_list_del(&ev->link);
}

static void
node_post(struct env *env, struct env_event *ev)
{
	sim_event_push(env, ev, to_node(env)->sim->now);
}

static int
node_async_init(struct env *env, struct env_async *a)
{
	(void)env;
	(void)a;
	return 0;
}

static void
node_async_send(struct env_async *a)
{
	/* the simulator is single-threaded: a send is a post */
	if (!sh_heap_node_queued(&a->ev.hn))
		sim_event_push(a->ev.env, &a->ev, to_node(a->ev.env)->sim->now);
}

static void
node_async_fini(struct env_async *a)
{
	node_event_cancel(a->ev.env, &a->ev);
}

static const struct env_ops sim_ops = {
	.name = "sim",
	.version = 1,
	.now = node_now,
	.realtime = node_realtime,
	.clock = node_now,
	.random = node_random,
	.event_push = sim_event_push,
	.event_cancel = node_event_cancel,
	.post = node_post,
	.async_init = node_async_init,
	.async_send = node_async_send,
	.async_fini = node_async_fini,
	.dgram_open = simnet_open,
	.dgram_addr = simnet_addr,
	.dgram_send = simnet_send,
	.dgram_stats = simnet_stats,
	.dgram_mtu = simnet_mtu,
	.dgram_close = simnet_close,
	.disk_open = simdisk_open,
	.disk_submit = simdisk_submit,
	.disk_info = simdisk_info,
	.disk_close = simdisk_close,
	.disk_remove = simdisk_remove,
};

static uint64_t
log_clock(void *arg)
{
	return ((struct sim *)arg)->now;
}

struct sim *
sim_create(uint64_t seed)
{
	struct sim *sim = sh_calloc(1, sizeof(*sim));

	if (sim == NULL)
		return NULL;
	sim->seed = seed;
	sh_rand_seed(&sim->rng, seed);
	sh_heap_init(&sim->q);
	sh_list_init(&sim->nodes);
	sh_list_init(&sim->cut_list);
	if (sh_htable_init(&sim->eps, 64) < 0)
		goto out_free;
	if (sh_htable_init(&sim->cuts, 16) < 0)
		goto out_eps;
	if (sh_htable_init(&sim->by_ip, 64) < 0) {
		sh_htable_fini(&sim->cuts);
		goto out_eps;
	}
	sim->net = (struct sim_net_params){ .lat_min_ns = 10 * SH_NSEC_PER_USEC,
					    .lat_max_ns = 100 * SH_NSEC_PER_USEC,
					    .reorder_ns = 1 * SH_NSEC_PER_MSEC };
	sim->trace = seed;
	sh_log_set_clock(log_clock, sim, true);
	return sim;

out_eps:
	sh_htable_fini(&sim->eps);
out_free:
	sh_free(sim);
	return NULL;
}

void
sim_destroy(struct sim *sim)
{
	struct sh_list *pos;
	struct sh_heap_node *hn;

	if (sim == NULL)
		return;
	while ((pos = sh_list_pop(&sim->nodes)) != NULL) {
		struct sim_node *node = sh_list_entry(pos, struct sim_node, link);

		sim_node_crash(node, 0);
		simnet_node_fini(node);
		simdisk_node_fini(node);
		sh_free(node);
	}
	while ((hn = sh_heap_pop(&sim->q)) != NULL) {
		struct env_event *ev = sh_container_of(hn, struct env_event, hn);

		if (simnet_is_packet(ev))
			simnet_packet_free(ev);
	}
	simnet_fini(sim);
	sh_heap_fini(&sim->q);
	sh_htable_fini(&sim->eps);
	sh_htable_fini(&sim->cuts);
	sh_htable_fini(&sim->by_ip);
	sh_log_set_clock(NULL, NULL, false);
	sh_log_set_tag(NULL);
	sh_free(sim);
}

uint64_t
sim_seed(const struct sim *sim)
{
	return sim->seed;
}

uint64_t
sim_now(const struct sim *sim)
{
	return sim->now;
}

static void
node_reseed(struct sim_node *node)
{
	uint64_t st = node->sim->seed ^ ((uint64_t)node->id << 32) ^ node->incarnation;

	sh_rand_seed(&node->rng, sh_splitmix64(&st));
}

struct sim_node *
sim_node_create(struct sim *sim, const char *name, const char *addr)
{
	struct sim_node *node, *other;
	struct env_addr a;

	if (name == NULL || addr == NULL || env_addr_parse(addr, &a) < 0 || a.port != 0) {
		sh_log_warn("sim_node_create: bad address '%s' (want an IP without port)",
			    addr ? addr : "(null)");
		return NULL;
	}
	if ((other = sim_node_by_ip(sim, &a)) != NULL) {
		sh_log_warn("sim_node_create: address %s is taken by %s", addr, other->env.name);
		return NULL;
	}
	node = sh_calloc(1, sizeof(*node));
	if (node == NULL)
		return NULL;
	node->env.ops = &sim_ops;
	snprintf(node->env.name, sizeof(node->env.name), "%s", name);
	node->sim = sim;
	node->id = sim->nnodes++;
	node->addr = a;
	node->alive = true;
	node->next_port = 32768;
	node->dparams = (struct sim_disk_params){ .lat_min_ns = 20 * SH_NSEC_PER_USEC,
						  .lat_max_ns = 100 * SH_NSEC_PER_USEC };
	node_reseed(node);
	sh_list_init(&node->events);
	sh_list_init(&node->eps);
	sh_list_init(&node->disks);
	sh_list_init(&node->dead_eps);
	sh_list_init(&node->dead_disks);
	sh_list_init(&node->media);
	sh_list_add_tail(&sim->nodes, &node->link);
	sh_htable_insert(&sim->by_ip, &node->ip_hn, env_addr_hash(&a));
	return node;
}

static bool
node_ip_eq(const struct sh_hnode *n, const void *key)
{
	return env_addr_eq(&sh_container_of(n, struct sim_node, ip_hn)->addr, key);
}

struct sim_node *
sim_node_by_ip(struct sim *sim, const struct env_addr *a)
{
	struct env_addr ip = *a;
	struct sh_hnode *n;

	ip.port = 0;
	n = sh_htable_find(&sim->by_ip, env_addr_hash(&ip), &ip, node_ip_eq);
	return n ? sh_container_of(n, struct sim_node, ip_hn) : NULL;
}

struct env *
sim_node_env(struct sim_node *node)
{
	return &node->env;
}

struct sim_node *
sim_env_node(struct env *env)
{
	return env->ops == &sim_ops ? to_node(env) : NULL;
}

const char *
sim_node_name(const struct sim_node *node)
{
	return node->env.name;
}

bool
sim_node_alive(const struct sim_node *node)
{
	return node->alive;
}

void
sim_node_crash(struct sim_node *node, unsigned flags)
{
	struct sh_list *pos;

	if (!node->alive)
		return;
	sh_log_info("node %s crashes", node->env.name);
	while ((pos = sh_list_pop(&node->events)) != NULL) {
		struct env_event *ev = sh_list_entry(pos, struct env_event, link);

		sh_heap_remove(&node->sim->q, &ev->hn);
		simdisk_event_dropped(ev);
	}
	simnet_node_crash(node);
	simdisk_node_crash(node, flags);
	node->alive = false;
	node->incarnation++;
	node->sim->st.crashes++;
	sim_trace_mix(node->sim, 0xC0A5ULL + node->id);
}

void
sim_node_restart(struct sim_node *node)
{
	if (node->alive)
		return;
	node->alive = true;
	node_reseed(node);
	sh_log_info("node %s restarts (incarnation %llu)", node->env.name,
		    (unsigned long long)node->incarnation);
}

bool
sim_step(struct sim *sim)
{
	struct sh_heap_node *hn = sh_heap_pop(&sim->q);
	struct env_event *ev;

	if (hn == NULL)
		return false;
	ev = sh_container_of(hn, struct env_event, hn);
	sim->now = hn->key;
	sim->st.events++;
	if (ev->env != NULL) {
		sh_list_del(&ev->link);
		sh_log_set_tag(ev->env->name);
	} else {
		sh_log_set_tag(NULL);
	}
	ev->fire(ev);
	return true;
}

uint64_t
sim_run_for(struct sim *sim, uint64_t ns)
{
	uint64_t end = sim->now + ns, n = 0;
	struct sh_heap_node *top;

	while ((top = sh_heap_peek(&sim->q)) != NULL && top->key <= end) {
		sim_step(sim);
		n++;
	}
	sim->now = end;
	return n;
}

bool
sim_run_until(struct sim *sim, bool (*pred)(void *arg), void *arg, uint64_t max_ns)
{
	uint64_t end = sim->now + max_ns;
	struct sh_heap_node *top;

	while (!pred(arg)) {
		top = sh_heap_peek(&sim->q);
		if (top == NULL || top->key > end) {
			sim->now = end;
			return pred(arg);
		}
		sim_step(sim);
	}
	return true;
}

void
sim_net_set(struct sim *sim, const struct sim_net_params *p)
{
	sim->net = *p;
	if (sim->net.lat_max_ns < sim->net.lat_min_ns)
		sim->net.lat_max_ns = sim->net.lat_min_ns;
}

void
sim_net_get(const struct sim *sim, struct sim_net_params *p)
{
	*p = sim->net;
}

void
sim_partition_set(struct sim_node *node, int group)
{
	node->group = group;
}

void
sim_disk_set(struct sim_node *node, const struct sim_disk_params *p)
{
	node->dparams = *p;
	if (node->dparams.lat_max_ns < node->dparams.lat_min_ns)
		node->dparams.lat_max_ns = node->dparams.lat_min_ns;
}

void
sim_stats(const struct sim *sim, struct sim_stats *out)
{
	*out = sim->st;
}

uint64_t
sim_trace_hash(const struct sim *sim)
{
	return sim->trace;
}
