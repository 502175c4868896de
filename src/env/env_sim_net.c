// SPDX-License-Identifier: Apache-2.0
/*
 * The simulated network: endpoints bound to a node's address, datagrams
 * copied into packets that the world delivers after a random latency, and
 * the faults of env_sim.h (loss, duplication, reordering, partitions, cut
 * links). Packets in flight belong to the world, not to a node: they still
 * arrive after their sender crashes, and reach whoever is bound to the
 * destination address when they land.
 */
#include <errno.h>
#include <netinet/in.h>
#include <string.h>

#include "env_sim_int.h"

SH_LOG_FACILITY("env.simnet");

struct sim_ep {
	struct env_dgram base;
	struct sim_node *node;
	struct env_addr addr;
	struct sh_hnode hn;
	struct sh_list link;
	const struct env_dgram_cbs *cbs;
	void *arg;
	struct env_dgram_stats st;
	struct env_event wev; /* "writable again" after a partial send */
	bool dead;	      /* its process crashed: unbound, freed on close */
};

struct sim_pkt {
	struct env_event ev;
	struct sim *sim;
	struct env_addr src;
	struct env_addr dst;
	size_t len;
	unsigned char data[];
};

struct sim_cut {
	struct sh_hnode hn;
	struct sh_list link;
	unsigned from, to;
};

static bool
ep_eq(const struct sh_hnode *n, const void *key)
{
	return env_addr_eq(&sh_container_of(n, struct sim_ep, hn)->addr, key);
}

static struct sim_ep *
ep_find(struct sim *sim, const struct env_addr *a)
{
	struct sh_hnode *n = sh_htable_find(&sim->eps, env_addr_hash(a), a, ep_eq);

	return n ? sh_container_of(n, struct sim_ep, hn) : NULL;
}

static bool
any_addr(const struct env_addr *a)
{
	static const uint8_t zero[16];

	return memcmp(a->ip, zero, a->family == AF_INET ? 4 : 16) == 0;
}

static void
ep_writable(struct env_event *ev)
{
	struct sim_ep *ep = sh_container_of(ev, struct sim_ep, wev);

	if (ep->cbs->writable != NULL)
		ep->cbs->writable(&ep->base, ep->arg);
}

int
simnet_open(struct env *env, const struct env_addr *bind, const struct env_dgram_cbs *cbs,
	    void *arg, struct env_dgram **out)
{
	struct sim_node *node = to_node(env);
	struct sim_ep *ep;
	struct env_addr a = *bind;

	if (!node->alive)
		return -SH_ECRASHED;
	if (any_addr(&a) && a.family == node->addr.family)
		memcpy(a.ip, node->addr.ip, sizeof(a.ip));
	a.port = 0;
	if (!env_addr_eq(&a, &node->addr))
		return -EADDRNOTAVAIL;
	a.port = bind->port;
	if (a.port == 0) {
		for (unsigned tries = 0; tries < 32768; tries++) {
			a.port = node->next_port;
			node->next_port = node->next_port == 65535 ? 32768 : node->next_port + 1;
			if (ep_find(node->sim, &a) == NULL)
				break;
		}
	}
	if (ep_find(node->sim, &a) != NULL)
		return -EADDRINUSE;
	ep = sh_calloc(1, sizeof(*ep));
	if (ep == NULL)
		return -ENOMEM;
	ep->base.env = env;
	ep->node = node;
	ep->addr = a;
	ep->cbs = cbs;
	ep->arg = arg;
	env_event_init(env, &ep->wev, ep_writable);
	sh_htable_insert(&node->sim->eps, &ep->hn, env_addr_hash(&a));
	sh_list_add_tail(&node->eps, &ep->link);
	*out = &ep->base;
	return 0;
}

int
simnet_addr(struct env_dgram *d, struct env_addr *out)
{
	*out = sh_container_of(d, struct sim_ep, base)->addr;
	return 0;
}

static void
ep_free(struct sim_ep *ep)
{
	sh_heap_remove(&ep->node->sim->q, &ep->wev.hn);
	sh_list_del(&ep->wev.link);
	sh_htable_remove(&ep->node->sim->eps, &ep->hn);
	sh_list_del(&ep->link);
	sh_free(ep);
}

void
simnet_close(struct env_dgram *d)
{
	struct sim_ep *ep = sh_container_of(d, struct sim_ep, base);

	if (ep->dead) {
		sh_list_del(&ep->link);
		sh_free(ep);
		return;
	}
	ep_free(ep);
}

void
simnet_stats(struct env_dgram *d, struct env_dgram_stats *out)
{
	*out = sh_container_of(d, struct sim_ep, base)->st;
}

/* t's value for interface a (0 if none). */
static double
port_get(const struct sim_ports *t, const struct env_addr *a)
{
	for (unsigned i = 0; i < t->n; i++)
		if (env_addr_eq(&t->e[i].addr, a))
			return t->e[i].v;
	return 0;
}

/* Set t's value for interface a; 0 (or less) takes it out. -ENOSPC. */
static int
port_set(struct sim_ports *t, const struct env_addr *a, double v)
{
	unsigned i;

	for (i = 0; i < t->n && !env_addr_eq(&t->e[i].addr, a); i++)
		;
	if (v <= 0) {
		if (i < t->n)
			t->e[i] = t->e[--t->n];
		return 0;
	}
	if (i == t->n) {
		if (i == SIM_LOSSY_MAX)
			return -ENOSPC;
		t->e[t->n++].addr = *a;
	}
	t->e[i].v = v;
	return 0;
}

uint32_t
simnet_mtu(struct env_dgram *d)
{
	struct sim_ep *ep = sh_container_of(d, struct sim_ep, base);

	return (uint32_t)port_get(&ep->node->sim->mtus, &ep->addr);
}

int
sim_port_mtu(struct sim *sim, const struct env_addr *a, uint32_t mtu)
{
	return port_set(&sim->mtus, a, mtu);
}

/* Longer than the MTU of the interface it leaves or the one it is sent to. */
static bool
too_big(const struct sim *sim, const struct env_addr *src, const struct env_addr *dst, size_t len)
{
	double a = port_get(&sim->mtus, src), b = port_get(&sim->mtus, dst);

	return (a != 0 && len > a) || (b != 0 && len > b);
}

void
simnet_node_crash(struct sim_node *node)
{
	struct sh_list *pos;

	/* the process is gone but its memory still holds the handles: unbind them, free on close */
	while ((pos = sh_list_pop(&node->eps)) != NULL) {
		struct sim_ep *ep = sh_list_entry(pos, struct sim_ep, link);

		sh_heap_remove(&node->sim->q, &ep->wev.hn);
		sh_list_del(&ep->wev.link);
		sh_htable_remove(&node->sim->eps, &ep->hn);
		ep->dead = true;
		sh_list_add_tail(&node->dead_eps, &ep->link);
	}
}

void
simnet_node_fini(struct sim_node *node)
{
	struct sh_list *pos;

	while ((pos = sh_list_pop(&node->dead_eps)) != NULL)
		sh_free(sh_list_entry(pos, struct sim_ep, link));
}

static void
pkt_deliver(struct env_event *ev)
{
	struct sim_pkt *p = sh_container_of(ev, struct sim_pkt, ev);
	struct sim *sim = p->sim;
	struct sim_ep *ep = ep_find(sim, &p->dst);
	struct iovec iov = { .iov_base = p->data, .iov_len = p->len };
	struct env_dgram_msg msg = { .peer = p->src, .iov = &iov, .iovcnt = 1, .len = p->len };

	if (ep == NULL || !ep->node->alive) {
		sim->st.dgram_unbound++;
		goto out;
	}
	sh_log_set_tag(ep->node->env.name);
	if (sim->tap != NULL && !sim->tap(sim->tap_arg, &p->src, &p->dst, p->data, &p->len))
		goto out;
	msg.len = iov.iov_len = p->len;
	if (SH_FAULT(FP_ENV_DGRAM_RECV_DROP)) {
		ep->st.recv_dropped++;
		goto out;
	}
	sim_trace_mix(sim, env_addr_hash(&p->src) ^ (env_addr_hash(&p->dst) << 1) ^
			       ((uint64_t)sh_crc32c(0, p->data, p->len) << 16) ^ p->len);
	sim->st.dgram_delivered++;
	ep->st.received++;
	ep->st.recv_calls++;
	ep->cbs->recv(&ep->base, &msg, 1, ep->arg);
out:
	sh_free(p);
}

bool
simnet_is_packet(const struct env_event *ev)
{
	return ev->fire == pkt_deliver;
}

void
simnet_packet_free(struct env_event *ev)
{
	sh_free(sh_container_of(ev, struct sim_pkt, ev));
}

static bool
cut_eq(const struct sh_hnode *n, const void *key)
{
	const struct sim_cut *c = sh_container_of(n, struct sim_cut, hn);
	const unsigned *k = key;

	return c->from == k[0] && c->to == k[1];
}

static struct sim_cut *
cut_find(struct sim *sim, unsigned from, unsigned to)
{
	unsigned key[2] = { from, to };
	struct sh_hnode *n =
	    sh_htable_find(&sim->cuts, sh_hash_u64(((uint64_t)from << 32) | to), key, cut_eq);

	return n ? sh_container_of(n, struct sim_cut, hn) : NULL;
}

int
sim_link_cut(struct sim_node *a, struct sim_node *b, bool cut)
{
	struct sim *sim = a->sim;
	struct sim_cut *c = cut_find(sim, a->id, b->id);

	if (cut && c == NULL) {
		c = sh_calloc(1, sizeof(*c));
		if (c == NULL)
			return -ENOMEM;
		c->from = a->id;
		c->to = b->id;
		sh_htable_insert(&sim->cuts, &c->hn, sh_hash_u64(((uint64_t)a->id << 32) | b->id));
		sh_list_add_tail(&sim->cut_list, &c->link);
	} else if (!cut && c != NULL) {
		sh_htable_remove(&sim->cuts, &c->hn);
		sh_list_del(&c->link);
		sh_free(c);
	}
	return 0;
}

int
sim_port_loss(struct sim *sim, const struct env_addr *a, double loss)
{
	return port_set(&sim->lossy, a, loss);
}

/*
 * The sender's own interface down (loss 1): the kernel refuses the send
 * (no route), as a real link down does; the datagram is dropped at once.
 */
static bool
port_down(struct sim *sim, const struct env_addr *src)
{
	return port_get(&sim->lossy, src) >= 1;
}

/* A datagram from src to dst lost by a lossy interface at either end. */
static bool
port_loses(struct sim *sim, const struct env_addr *src, const struct env_addr *dst)
{
	for (unsigned i = 0; i < sim->lossy.n; i++)
		if ((env_addr_eq(&sim->lossy.e[i].addr, src) ||
		     env_addr_eq(&sim->lossy.e[i].addr, dst)) &&
		    (sim->lossy.e[i].v >= 1 || sh_rand_chance(&sim->rng, sim->lossy.e[i].v)))
			return true;
	return false;
}

void
simnet_fini(struct sim *sim)
{
	struct sh_list *pos;

	while ((pos = sh_list_pop(&sim->cut_list)) != NULL) {
		struct sim_cut *c = sh_list_entry(pos, struct sim_cut, link);

		sh_htable_remove(&sim->cuts, &c->hn);
		sh_free(c);
	}
}

void
sim_heal(struct sim *sim)
{
	struct sh_list *pos;

	sh_list_for_each (pos, &sim->nodes)
		sh_list_entry(pos, struct sim_node, link)->group = 0;
	sim->lossy.n = 0;
	simnet_fini(sim);
}

static int
schedule(struct sim *sim, const struct env_addr *src, const struct env_dgram_msg *m, size_t len,
	 bool reordered)
{
	struct sim_pkt *p = sh_malloc(sizeof(*p) + len);
	uint64_t lat = sh_rand_range(&sim->rng, sim->net.lat_min_ns, sim->net.lat_max_ns);
	size_t off = 0;

	if (p == NULL)
		return -ENOMEM;
	if (reordered)
		lat += sh_rand_range(&sim->rng, 0, sim->net.reorder_ns);
	env_event_init(NULL, &p->ev, pkt_deliver);
	p->sim = sim;
	p->src = *src;
	p->dst = m->peer;
	p->len = len;
	for (unsigned k = 0; k < m->iovcnt; k++) {
		memcpy(p->data + off, m->iov[k].iov_base, m->iov[k].iov_len);
		off += m->iov[k].iov_len;
	}
	if (sh_heap_push(&sim->q, &p->ev.hn, sim->now + lat) < 0) {
		sh_free(p);
		return -ENOMEM;
	}
	return 0;
}

/* Took only i datagrams: tell the owner later that it may send again. */
static int
partial(struct sim_ep *ep, unsigned i)
{
	if (!sh_heap_node_queued(&ep->wev.hn))
		sim_event_push(&ep->node->env, &ep->wev, ep->node->sim->now + SH_NSEC_PER_USEC);
	return (int)i;
}

int
simnet_send(struct env_dgram *d, const struct env_dgram_msg *msgs, unsigned n)
{
	struct sim_ep *ep = sh_container_of(d, struct sim_ep, base);
	struct sim *sim = ep->node->sim;

	if (ep->dead)
		return (int)n; /* a dead process's datagrams go nowhere */
	ep->st.send_calls++;
	for (unsigned i = 0; i < n; i++) {
		const struct env_dgram_msg *m = &msgs[i];
		struct sim_node *dst = sim_node_by_ip(sim, &m->peer);
		size_t len = 0;
		bool reordered;

		for (unsigned k = 0; k < m->iovcnt; k++)
			len += m->iov[k].iov_len;
		ep->st.sent++;
		sim->st.dgram_sent++;
		if (SH_FAULT(FP_ENV_DGRAM_SEND_DROP) ||
		    (sim->lossy.n > 0 && port_down(sim, &ep->addr))) {
			ep->st.send_dropped++;
			continue;
		}
		if (dst != NULL &&
		    (dst->group != ep->node->group || cut_find(sim, ep->node->id, dst->id))) {
			sim->st.dgram_partitioned++;
			continue;
		}
		if (sim->mtus.n > 0 && too_big(sim, &ep->addr, &m->peer, len)) {
			sim->st.dgram_too_big++;
			continue;
		}
		if (sh_rand_chance(&sim->rng, sim->net.loss) ||
		    (sim->lossy.n > 0 && port_loses(sim, &ep->addr, &m->peer))) {
			sim->st.dgram_lost++;
			continue;
		}
		reordered = sh_rand_chance(&sim->rng, sim->net.reorder);
		if (reordered)
			sim->st.dgram_reordered++;
		if (schedule(sim, &ep->addr, m, len, reordered) < 0)
			return partial(ep, i); /* out of memory: the rest is not taken */
		if (sh_rand_chance(&sim->rng, sim->net.dup)) {
			sim->st.dgram_dup++;
			if (schedule(sim, &ep->addr, m, len, true) < 0)
				return partial(ep, i + 1);
		}
	}
	return (int)n;
}

void
sim_net_tap(struct sim *sim, sim_tap_fn fn, void *arg)
{
	sim->tap = fn;
	sim->tap_arg = arg;
}

int
sim_inject(struct sim *sim, const struct env_addr *src, const struct env_addr *dst,
	   const void *data, size_t len)
{
	struct iovec iov = { (void *)data, len };
	struct env_dgram_msg m = { .peer = *dst, .iov = &iov, .iovcnt = 1 };

	if (len > ENV_DGRAM_MAX)
		return -EINVAL;
	sim->st.dgram_sent++;
	return schedule(sim, src, &m, len, false);
}
