// SPDX-License-Identifier: Apache-2.0
/*
 * The data network in the simulator: clients call a server over a lossy,
 * duplicating, reordering network, through a partition that heals and
 * across a server restart. Every call completes exactly once, with the
 * right bytes, or fails with -ETIMEDOUT (or SH_EPEERRESTART when the
 * server restarted); the server's handler never sees a request twice.
 */
#include <errno.h>
#include <stdio.h>

#include "../../../src/env/env_sim.h"
#include "../../../src/net/net.h"
#include "../../lib/test.h"

#define MAX_NODES 8
#define MAX_CALLS 4096

struct call_rec {
	int done;
	int status;
	uint32_t len;
	uint32_t crc;
};

struct host {
	struct sim_node *node;
	struct env *env;
	struct net *net;
	struct net_config cfg;
	struct net_iface ifc;
	int id;
	/* client side */
	struct call_rec calls[MAX_CALLS];
	int issued, completed, inflight, ok, timedout, restarted;
	/* server side */
	uint8_t seen[MAX_NODES][MAX_CALLS];
	uint64_t handled, dup_handled;
	struct cluster *c;
};

struct cluster {
	struct sim *sim;
	struct host h[MAX_NODES];
	int n;
	uint32_t mtu;
	uint64_t dead_ns;
	int per_client, max_inflight, max_size;
	uint64_t timeout_ns;
	struct sh_rand rng;
	bool own_handler; /* the test registers the server's NET_OP_TEST handler itself */
};

/* Request body: client id, call index, then bytes derived from both. */
struct req_hdr {
	uint32_t client, idx;
};

static void
fill(uint8_t *p, size_t len, uint32_t client, uint32_t idx)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)(client * 131 + idx * 7 + i * 13);
}

static void
on_test(struct net_req *r, void *arg)
{
	struct host *s = arg;
	const struct net_msg *m = net_req_body(r);
	struct req_hdr hdr;
	struct iovec iov;

	SH_ASSERT_GE(m->len, sizeof(hdr));
	memcpy(&hdr, m->buf->data + m->off, sizeof(hdr));
	SH_ASSERT_LT(hdr.client, MAX_NODES);
	SH_ASSERT_LT(hdr.idx, MAX_CALLS);
	if (s->seen[hdr.client][hdr.idx]++)
		s->dup_handled++;
	s->handled++;
	iov = (struct iovec){ m->buf->data + m->off, m->len };
	net_reply(r, 7, &iov, 1); /* echo, with a status the caller checks */
}

static void issue(struct host *c);

struct call_ctx {
	struct host *c;
	int idx;
};

static void
on_reply(void *arg, int status, const struct net_msg *reply)
{
	struct call_ctx *x = arg;
	struct host *c = x->c;
	struct call_rec *rec = &c->calls[x->idx];

	rec->done++;
	SH_ASSERT_EQ(rec->done, 1); /* exactly once */
	rec->status = status;
	c->completed++;
	c->inflight--;
	if (status == 7) {
		SH_ASSERT_NOT_NULL(reply);
		SH_ASSERT_EQ(reply->len, rec->len);
		SH_ASSERT_EQ(sh_crc32c(0, reply->buf->data + reply->off, reply->len), rec->crc);
		c->ok++;
	} else if (status == -ETIMEDOUT) {
		c->timedout++;
	} else if (status == SH_EPEERRESTART) {
		c->restarted++;
	} else {
		SH_ASSERT_MSG(0, "call %d ended with %d (%s)", x->idx, status, sh_errname(status));
	}
	sh_free(x);
	issue(c);
}

static void
issue(struct host *c)
{
	struct cluster *cl = c->c;

	while (c->inflight < cl->max_inflight && c->issued < cl->per_client) {
		int idx = c->issued++;
		size_t len =
		    sizeof(struct req_hdr) + sh_rand_below(&cl->rng, (uint64_t)cl->max_size);
		uint8_t *body = sh_malloc(len);
		struct req_hdr hdr = { (uint32_t)c->id, (uint32_t)idx };
		struct call_ctx *x = sh_malloc(sizeof(*x));
		struct iovec iov = { body, len };
		struct net_call_opts o = { .timeout_ns = cl->timeout_ns, .retries = 5 };

		SH_ASSERT_NOT_NULL(body);
		fill(body, len, hdr.client, hdr.idx);
		memcpy(body, &hdr, sizeof(hdr));
		c->calls[idx].len = (uint32_t)len;
		c->calls[idx].crc = sh_crc32c(0, body, len);
		x->c = c;
		x->idx = idx;
		SH_ASSERT_OK(net_call(c->net, 1, NET_OP_TEST, &iov, 1, &o, on_reply, x, NULL));
		sh_free(body);
		c->inflight++;
	}
}

static void
host_start(struct cluster *cl, struct host *h)
{
	h->cfg = (struct net_config){ .node_id = (uint64_t)h->id + 1,
				      .ifaces = &h->ifc,
				      .nifaces = 1,
				      .dead_ns = cl->dead_ns };
	SH_ASSERT_OK(net_create(h->env, &h->cfg, &h->net));
	if (h->id == 0 && !cl->own_handler)
		SH_ASSERT_OK(net_handle(h->net, NET_OP_TEST, on_test, h));
	for (int j = 0; j < cl->n; j++) {
		struct net_iface pi;

		if (j == h->id)
			continue;
		pi = cl->h[j].ifc;
		SH_ASSERT_OK(net_peer_add(h->net, (uint64_t)j + 1, &pi, 1));
	}
}

static void
cluster_init(struct cluster *cl, uint64_t seed, int n)
{
	cl->sim = sim_create(seed);
	cl->n = n;
	sh_rand_seed(&cl->rng, seed);
	for (int i = 0; i < n; i++) {
		struct host *h = &cl->h[i];
		char ip[32], name[16];

		memset(h, 0, sizeof(*h));
		h->id = i;
		h->c = cl;
		snprintf(ip, sizeof(ip), "127.3.0.%d:7000", i + 1);
		snprintf(name, sizeof(name), i ? "c%d" : "srv", i);
		SH_ASSERT_OK(env_addr_parse(ip, &h->ifc.addr));
		h->ifc.mtu = cl->mtu;
		ip[strlen(ip) - 5] = '\0';
		h->node = sim_node_create(cl->sim, name, ip);
		SH_ASSERT_NOT_NULL(h->node);
		h->env = sim_node_env(h->node);
	}
	for (int i = 0; i < n; i++)
		host_start(cl, &cl->h[i]);
}

static void
cluster_fini(struct cluster *cl)
{
	for (int i = 0; i < cl->n; i++)
		net_destroy(cl->h[i].net);
	sim_destroy(cl->sim);
}

static bool
all_done(void *arg)
{
	struct cluster *cl = arg;

	for (int i = 1; i < cl->n; i++)
		if (cl->h[i].completed < cl->per_client)
			return false;
	return true;
}

/* A network that loses, duplicates and reorders datagrams at rate. */
static struct sim_net_params
faults(double rate)
{
	return (struct sim_net_params){ .lat_min_ns = 5 * SH_NSEC_PER_USEC,
					.lat_max_ns = 50 * SH_NSEC_PER_USEC,
					.loss = rate,
					.dup = rate,
					.reorder = rate,
					.reorder_ns = 500 * SH_NSEC_PER_USEC };
}

/* Run the workload over a network with the given fault rate; returns calls that succeeded. */
static int
lossy_round(uint64_t seed, double rate, int *timedout)
{
	static struct cluster cl;
	struct sim_net_params p = faults(rate);
	int ok = 0;

	memset(&cl, 0, sizeof(cl));
	cl.mtu = 1472; /* most requests take several fragments */
	cl.per_client = 150;
	cl.max_inflight = 8;
	cl.max_size = 12000;
	cl.timeout_ns = 20 * SH_NSEC_PER_SEC;
	cl.dead_ns = 30 * SH_NSEC_PER_SEC;
	cluster_init(&cl, seed, 4);
	sim_net_set(cl.sim, &p);
	for (int i = 1; i < cl.n; i++)
		issue(&cl.h[i]);
	SH_ASSERT_MSG(sim_run_until(cl.sim, all_done, &cl, 300 * SH_NSEC_PER_SEC),
		      "calls still pending after 300 s of virtual time (seed %llu, rate %.2f)",
		      (unsigned long long)seed, rate);
	*timedout = 0;
	for (int i = 1; i < cl.n; i++) {
		ok += cl.h[i].ok;
		*timedout += cl.h[i].timedout;
		SH_ASSERT_EQ(cl.h[i].restarted, 0);
	}
	SH_ASSERT_EQ(cl.h[0].dup_handled, 0);
	SH_ASSERT_LE(cl.h[0].handled, (uint64_t)(cl.n - 1) * cl.per_client);
	{
		struct net_stats st;
		struct sim_stats ss;

		net_stats(cl.h[1].net, &st);
		sim_stats(cl.sim, &ss);
		printf("seed %llu rate %.2f: %d ok, %d timed out in %.3f s; client 1: %llu pkts, "
		       "%llu retransmits (%llu fast), %llu timeouts, %llu dups, %llu out of order; "
		       "net: %llu lost, %llu dup\n",
		       (unsigned long long)seed, rate, ok, *timedout, (double)sim_now(cl.sim) / 1e9,
		       (unsigned long long)st.pkts_sent, (unsigned long long)st.retransmits,
		       (unsigned long long)st.fast_retransmits, (unsigned long long)st.timeouts,
		       (unsigned long long)st.dup_pkts, (unsigned long long)st.out_of_order,
		       (unsigned long long)ss.dgram_lost, (unsigned long long)ss.dgram_dup);
		if (rate > 0) {
			SH_ASSERT_GT(st.retransmits, 0);
			SH_ASSERT_GT(ss.dgram_lost, 0);
		}
	}
	cluster_fini(&cl);
	return ok;
}

TEST(rpc_no_loss)
{
	for (uint64_t s = 0; s < 4; s++) {
		int to, ok = lossy_round(sh_test_seed() * 100 + s, 0.0, &to);

		SH_ASSERT_EQ(ok, 3 * 150);
	}
}

TEST(rpc_5_percent_faults)
{
	for (uint64_t s = 0; s < 4; s++) {
		int to, ok = lossy_round(sh_test_seed() * 100 + s, 0.05, &to);

		SH_ASSERT_EQ(ok, 3 * 150); /* 20 s deadlines: nothing should time out */
	}
}

TEST(rpc_30_percent_faults)
{
	for (uint64_t s = 0; s < 3; s++) {
		int to, ok = lossy_round(sh_test_seed() * 100 + s, 0.30, &to);

		SH_ASSERT_EQ(ok + to, 3 * 150);
		SH_ASSERT_GT(ok, 3 * 150 / 2);
	}
}

static bool
some_done(void *arg)
{
	struct cluster *cl = arg;

	return cl->h[1].completed >= cl->per_client / 4;
}

TEST(rpc_partition_heals)
{
	static struct cluster cl;

	memset(&cl, 0, sizeof(cl));
	cl.mtu = 8000;
	cl.per_client = 400;
	cl.max_inflight = 4;
	cl.max_size = 30000;
	cl.timeout_ns = 30 * SH_NSEC_PER_SEC;
	cl.dead_ns =
	    1 * SH_NSEC_PER_SEC; /* the partition outlasts it: sessions die and come back */
	cluster_init(&cl, sh_test_seed(), 4);
	for (int i = 1; i < cl.n; i++)
		issue(&cl.h[i]);
	SH_ASSERT(sim_run_until(cl.sim, some_done, &cl, SH_NSEC_PER_SEC));
	SH_ASSERT_LT(cl.h[1].completed, cl.per_client);
	sim_partition_set(cl.h[0].node, 1);
	sim_run_for(cl.sim, 3 * SH_NSEC_PER_SEC);
	{
		struct net_stats st;

		net_stats(cl.h[1].net, &st);
		SH_ASSERT_GE(st.peers_dead, 1);
	}
	sim_heal(cl.sim);
	SH_ASSERT(sim_run_until(cl.sim, all_done, &cl, 60 * SH_NSEC_PER_SEC));
	for (int i = 1; i < cl.n; i++) {
		SH_ASSERT_EQ(cl.h[i].ok, cl.per_client); /* deadlines outlast the partition */
		SH_ASSERT_EQ(cl.h[i].timedout, 0);
	}
	SH_ASSERT_EQ(cl.h[0].dup_handled, 0);
	SH_ASSERT_EQ(cl.h[0].handled, (uint64_t)(cl.n - 1) * cl.per_client);
	{
		struct net_stats st;

		net_stats(cl.h[0].net, &st);
		SH_ASSERT_GT(st.call_retries + st.duplicate_requests + st.replies_from_cache, 0);
	}
	cluster_fini(&cl);
}

TEST(rpc_server_restart)
{
	static struct cluster cl;
	struct net_stats st;
	uint64_t inc0;

	memset(&cl, 0, sizeof(cl));
	cl.mtu = 1472;
	cl.per_client = 300;
	cl.max_inflight = 8;
	cl.max_size = 5000;
	cl.timeout_ns = 10 * SH_NSEC_PER_SEC;
	cl.dead_ns = 5 * SH_NSEC_PER_SEC;
	cluster_init(&cl, sh_test_seed(), 3);
	for (int i = 1; i < cl.n; i++)
		issue(&cl.h[i]);
	SH_ASSERT(sim_run_until(cl.sim, some_done, &cl, SH_NSEC_PER_SEC));
	inc0 = net_incarnation(cl.h[0].net);
	SH_ASSERT_EQ(net_peer_incarnation(cl.h[1].net, 1), inc0);
	/* kill -9 of the server, back 200 ms later with a new incarnation */
	sim_node_crash(cl.h[0].node, 0);
	net_destroy(cl.h[0].net); /* frees the dead process's memory; its handles are inert */
	memset(cl.h[0].seen, 0, sizeof(cl.h[0].seen));
	sim_run_for(cl.sim, 200 * SH_NSEC_PER_MSEC);
	sim_node_restart(cl.h[0].node);
	host_start(&cl, &cl.h[0]);
	SH_ASSERT_GT(net_incarnation(cl.h[0].net), inc0);
	SH_ASSERT(sim_run_until(cl.sim, all_done, &cl, 60 * SH_NSEC_PER_SEC));
	for (int i = 1; i < cl.n; i++) {
		SH_ASSERT_EQ(cl.h[i].ok + cl.h[i].restarted + cl.h[i].timedout, cl.per_client);
		SH_ASSERT_GT(cl.h[i].ok, cl.per_client / 2);
		net_stats(cl.h[i].net, &st);
		SH_ASSERT_EQ(st.peers_restarted, 1);
		SH_ASSERT_EQ(net_peer_incarnation(cl.h[i].net, 1), net_incarnation(cl.h[0].net));
	}
	SH_ASSERT_GT(cl.h[1].restarted + cl.h[2].restarted, 0);
	SH_ASSERT_EQ(cl.h[0].dup_handled, 0);
	cluster_fini(&cl);
}

struct simple {
	int calls;
	int status;
};

static void
simple_cb(void *arg, int status, const struct net_msg *reply)
{
	struct simple *s = arg;

	(void)reply;
	s->calls++;
	s->status = status;
}

TEST(rpc_unknown_opcode_cancel_and_bad_calls)
{
	static struct cluster cl;
	struct simple a = { 0 }, b = { 0 };
	struct net_call *call;
	static uint8_t big[4096];
	struct iovec iov = { big, sizeof(big) };

	memset(&cl, 0, sizeof(cl));
	cl.mtu = 1472;
	cl.dead_ns = 5 * SH_NSEC_PER_SEC;
	cluster_init(&cl, sh_test_seed(), 2);
	/* no handler for opcode 500 on the server */
	SH_ASSERT_OK(net_call(cl.h[1].net, 1, 500, NULL, 0, NULL, simple_cb, &a, NULL));
	SH_ASSERT_EQ(a.calls, 0);
	sim_run_for(cl.sim, 100 * SH_NSEC_PER_MSEC);
	SH_ASSERT_EQ(a.calls, 1);
	SH_ASSERT_ERR(a.status, -EOPNOTSUPP);

	/* a cancelled call ends once, later, with -ECANCELED */
	sim_partition_set(cl.h[0].node, 1);
	SH_ASSERT_OK(net_call(cl.h[1].net, 1, NET_OP_PING, NULL, 0, NULL, simple_cb, &b, &call));
	sim_run_for(cl.sim, 10 * SH_NSEC_PER_MSEC);
	net_call_cancel(call);
	SH_ASSERT_EQ(b.calls, 0);
	sim_run_for(cl.sim, 20 * SH_NSEC_PER_SEC);
	SH_ASSERT_EQ(b.calls, 1);
	SH_ASSERT_ERR(b.status, -ECANCELED);

	/* refused at once, without a callback */
	SH_ASSERT_ERR(net_call(cl.h[1].net, 99, NET_OP_PING, NULL, 0, NULL, simple_cb, &a, NULL),
		      -ENOENT);
	SH_ASSERT_ERR(net_call(cl.h[1].net, 1, NET_OP_MAX, NULL, 0, NULL, simple_cb, &a, NULL),
		      -EINVAL);
	SH_ASSERT_ERR(net_call(cl.h[1].net, 1, NET_OP_PING, NULL, 0, NULL, NULL, &a, NULL),
		      -EINVAL);
	net_destroy(cl.h[1].net);
	cl.h[1].cfg.max_msg = 1024;
	SH_ASSERT_OK(net_create(cl.h[1].env, &cl.h[1].cfg, &cl.h[1].net));
	SH_ASSERT_OK(net_peer_add(cl.h[1].net, 1, &cl.h[0].ifc, 1));
	SH_ASSERT_ERR(net_peer_add(cl.h[1].net, 1, &cl.h[0].ifc, 1), -EEXIST);
	SH_ASSERT_ERR(net_call(cl.h[1].net, 1, NET_OP_ECHO, &iov, 1, NULL, simple_cb, &a, NULL),
		      -EMSGSIZE);
	SH_ASSERT_EQ(a.calls, 1);
	cluster_fini(&cl);
}

/* Several data interfaces with labels: the path in use joins two of the same label. */
TEST(rpc_path_prefers_same_label)
{
	struct sim *s = sim_create(sh_test_seed());
	struct sim_node *na = sim_node_create(s, "a", "127.6.0.1");
	struct sim_node *nb = sim_node_create(s, "b", "127.6.0.2");
	struct net_iface ia[2] = { 0 }, ib[2] = { 0 };
	struct net_config ca = { .node_id = 1, .ifaces = ia, .nifaces = 2 };
	struct net_config cb = { .node_id = 2, .ifaces = ib, .nifaces = 2 };
	struct net *a, *b;
	struct simple r = { 0 };
	struct net_stats st;

	/* one address per simulated node: the two interfaces are two ports of it */
	SH_ASSERT_OK(env_addr_parse("127.6.0.1:7000", &ia[0].addr));
	SH_ASSERT_OK(env_addr_parse("127.6.0.1:7001", &ia[1].addr));
	SH_ASSERT_OK(env_addr_parse("127.6.0.2:7000", &ib[0].addr));
	SH_ASSERT_OK(env_addr_parse("127.6.0.2:7001", &ib[1].addr));
	strcpy(ia[0].label, "switch-a");
	strcpy(ia[1].label, "switch-b");
	strcpy(ib[0].label, "switch-x");
	strcpy(ib[1].label, "switch-b");
	SH_ASSERT_OK(net_create(sim_node_env(na), &ca, &a));
	SH_ASSERT_OK(net_create(sim_node_env(nb), &cb, &b));
	SH_ASSERT_OK(net_peer_add(a, 2, ib, 2));
	SH_ASSERT_OK(net_call(a, 2, NET_OP_PING, NULL, 0, NULL, simple_cb, &r, NULL));
	sim_run_for(s, 50 * SH_NSEC_PER_MSEC);
	SH_ASSERT_EQ(r.calls, 1);
	SH_ASSERT_OK(r.status);
	/* a's path: its switch-b interface to b's switch-b interface */
	{
		struct env_addr l, rm;

		SH_ASSERT_OK(net_peer_path(a, 2, &l, &rm));
		SH_ASSERT(env_addr_eq(&l, &ia[1].addr));
		SH_ASSERT(env_addr_eq(&rm, &ib[1].addr));
		/* b learned a from its packets: where they came from, on the interface they reached
		 */
		SH_ASSERT_OK(net_peer_path(b, 1, &l, &rm));
		SH_ASSERT(env_addr_eq(&rm, &ia[1].addr));
		SH_ASSERT(env_addr_eq(&l, &ib[1].addr));
		SH_ASSERT_EQ(net_peer_incarnation(b, 1), net_incarnation(a));
		net_stats(b, &st);
		SH_ASSERT_GT(st.pkts_received, 0);
		SH_ASSERT_ERR(net_peer_path(a, 9, &l, &rm), -ENOENT);
	}
	/* cutting nothing, a second call goes the same way and works */
	SH_ASSERT_OK(net_call(b, 1, NET_OP_PING, NULL, 0, NULL, simple_cb, &r, NULL));
	sim_run_for(s, 50 * SH_NSEC_PER_MSEC);
	SH_ASSERT_EQ(r.calls, 2);
	SH_ASSERT_OK(r.status);
	net_destroy(a);
	net_destroy(b);
	sim_destroy(s);
}

/* ---- who may send what (rpc_ops.h) ---- */

static void
served(struct net_req *r, void *arg)
{
	(*(int *)arg)++;
	net_reply(r, 0, NULL, 0);
}

/* A client's session may not send the cluster's own messages: -EPERM, counted, not served. */
TEST(rpc_client_ids_may_not_send_node_only_ops)
{
	struct sim *s = sim_create(sh_test_seed());
	struct sim_node *nn = sim_node_create(s, "node", "127.7.0.1");
	struct sim_node *nc = sim_node_create(s, "client", "127.7.0.2");
	struct sim_node *no = sim_node_create(s, "other", "127.7.0.3");
	struct net_iface in = { 0 }, ic = { 0 }, io = { 0 };
	struct net_config cn = { .node_id = 1, .ifaces = &in, .nifaces = 1 };
	struct net_config cc = { .node_id = 1ull << 63 | 5, .ifaces = &ic, .nifaces = 1 };
	struct net_config co = { .node_id = 2 << 8 | 1, .ifaces = &io, .nifaces = 1 };
	struct net *n, *c, *o;
	struct simple r = { 0 };
	struct net_stats st;
	int handled = 0;

	SH_ASSERT_OK(env_addr_parse("127.7.0.1:7000", &in.addr));
	SH_ASSERT_OK(env_addr_parse("127.7.0.2:7000", &ic.addr));
	SH_ASSERT_OK(env_addr_parse("127.7.0.3:7000", &io.addr));
	SH_ASSERT_OK(net_create(sim_node_env(nn), &cn, &n));
	SH_ASSERT_OK(net_create(sim_node_env(nc), &cc, &c));
	SH_ASSERT_OK(net_create(sim_node_env(no), &co, &o));
	SH_ASSERT_OK(net_handle(n, NET_OP_CLUSTER_PROPOSE, served, &handled));
	SH_ASSERT_OK(net_handle(n, NET_OP_RAFT, served, &handled));
	SH_ASSERT_OK(net_handle(n, NET_OP_CLUSTER_CONFIG, served, &handled));
	SH_ASSERT_OK(net_peer_add(c, 1, &in, 1));
	SH_ASSERT_OK(net_peer_add(o, 1, &in, 1));

	SH_ASSERT(!net_op_allowed(NET_OP_CLUSTER_PROPOSE, 1ull << 63 | 5));
	SH_ASSERT(net_op_allowed(NET_OP_CLUSTER_PROPOSE, 2 << 8 | 1));
	SH_ASSERT(net_op_allowed(NET_OP_META, 1ull << 63 | 5));
	SH_ASSERT(net_op_allowed(900, 1ull << 63 | 5)); /* not an op: its handler says */

	/* a client asks for a configuration change: refused, never served */
	SH_ASSERT_OK(net_call(c, 1, NET_OP_CLUSTER_PROPOSE, NULL, 0, NULL, simple_cb, &r, NULL));
	sim_run_for(s, 50 * SH_NSEC_PER_MSEC);
	SH_ASSERT_EQ(r.calls, 1);
	SH_ASSERT_ERR(r.status, -EPERM);
	/* a one-way Raft message from it: dropped */
	SH_ASSERT_OK(net_send(c, 1, NET_OP_RAFT, NULL, 0));
	sim_run_for(s, 50 * SH_NSEC_PER_MSEC);
	SH_ASSERT_EQ(handled, 0);
	net_stats(n, &st);
	SH_ASSERT_EQ(st.refused, 2u);
	/* what clients send is served */
	SH_ASSERT_OK(net_call(c, 1, NET_OP_CLUSTER_CONFIG, NULL, 0, NULL, simple_cb, &r, NULL));
	sim_run_for(s, 50 * SH_NSEC_PER_MSEC);
	SH_ASSERT_EQ(r.calls, 2);
	SH_ASSERT_OK(r.status);
	SH_ASSERT_EQ(handled, 1);
	/* a backend's worker endpoint sends both */
	SH_ASSERT_OK(net_call(o, 1, NET_OP_CLUSTER_PROPOSE, NULL, 0, NULL, simple_cb, &r, NULL));
	sim_run_for(s, 50 * SH_NSEC_PER_MSEC); /* (one-way messages need the session it opens) */
	SH_ASSERT_OK(net_send(o, 1, NET_OP_RAFT, NULL, 0));
	sim_run_for(s, 50 * SH_NSEC_PER_MSEC);
	SH_ASSERT_EQ(r.calls, 3);
	SH_ASSERT_OK(r.status);
	SH_ASSERT_EQ(handled, 3);
	net_stats(n, &st);
	SH_ASSERT_EQ(st.refused, 2u);
	net_destroy(n);
	net_destroy(c);
	net_destroy(o);
	sim_destroy(s);
}

/* ---- one-way messages ---- */

static void
on_sent_call(void *arg, int status, const struct net_msg *reply)
{
	(void)reply;
	*(int *)arg = status == 7 ? 1 : -1;
}

static bool
call_back(void *arg)
{
	return *(int *)arg != 0;
}

static bool
oneway_all_seen(void *arg)
{
	struct cluster *cl = arg;

	return cl->h[0].handled >= (uint64_t)cl->per_client;
}

/*
 * net_send: nothing before a session is up (-ENOTCONN); then each message
 * reaches the handler once at most, over a lossy, duplicating network —
 * all of them over a clean one — and the server keeps no reply for them.
 */
static void
oneway_round(uint64_t seed, double rate)
{
	static struct cluster cl;
	struct sim_net_params p = faults(rate);
	struct iovec iov;
	struct net_stats st;
	struct req_hdr hdr = { 1, 0 };
	uint8_t body[3000];
	int opened = 0;

	memset(&cl, 0, sizeof(cl));
	cl.mtu = 1472;
	cl.per_client = 400;
	cl.dead_ns = 30 * SH_NSEC_PER_SEC;
	cluster_init(&cl, seed, 2);
	sim_net_set(cl.sim, &p);
	iov = (struct iovec){ &hdr, sizeof(hdr) };
	SH_ASSERT_ERR(net_send(cl.h[1].net, 1, NET_OP_TEST, &iov, 1), -ENOTCONN);
	SH_ASSERT_ERR(net_send(cl.h[1].net, 9, NET_OP_TEST, &iov, 1), -ENOENT);
	SH_ASSERT_ERR(net_send(cl.h[1].net, 1, 0, &iov, 1), -EINVAL);
	/* a call opens the session */
	SH_ASSERT_OK(
	    net_call(cl.h[1].net, 1, NET_OP_TEST, &iov, 1,
		     &(struct net_call_opts){ .timeout_ns = 20 * SH_NSEC_PER_SEC, .retries = 5 },
		     on_sent_call, &opened, NULL));
	SH_ASSERT(sim_run_until(cl.sim, call_back, &opened, 60 * SH_NSEC_PER_SEC));
	SH_ASSERT_EQ(opened, 1);
	cl.h[0].handled = 0;
	memset(cl.h[0].seen, 0, sizeof(cl.h[0].seen));
	for (int i = 0; i < cl.per_client; i++) {
		size_t len =
		    sizeof(hdr) + (size_t)sh_rand_below(&cl.rng, sizeof(body) - sizeof(hdr));

		hdr.idx = (uint32_t)i;
		fill(body, len, hdr.client, hdr.idx);
		memcpy(body, &hdr, sizeof(hdr));
		iov = (struct iovec){ body, len };
		SH_ASSERT_OK(net_send(cl.h[1].net, 1, NET_OP_TEST, &iov, 1));
		if (sh_rand_below(&cl.rng, 8) == 0)
			sim_run_for(cl.sim, 100 * SH_NSEC_PER_USEC);
	}
	if (rate == 0)
		SH_ASSERT(sim_run_until(cl.sim, oneway_all_seen, &cl, 30 * SH_NSEC_PER_SEC));
	else
		sim_run_for(cl.sim, 30 * SH_NSEC_PER_SEC);
	SH_ASSERT_EQ(cl.h[0].dup_handled, 0);
	SH_ASSERT_LE(cl.h[0].handled, (uint64_t)cl.per_client);
	/* the session is reliable while it lasts: lossy or not, this one did not break */
	SH_ASSERT_EQ(cl.h[0].handled, (uint64_t)cl.per_client);
	net_stats(cl.h[0].net, &st);
	SH_ASSERT_EQ(st.oneway_received, (uint64_t)cl.per_client);
	SH_ASSERT_LE(st.reply_cache_entries, 1); /* the call's, at most */
	net_stats(cl.h[1].net, &st);
	SH_ASSERT_EQ(st.oneway_sent, (uint64_t)cl.per_client);
	cluster_fini(&cl);
}

TEST(rpc_oneway_messages)
{
	oneway_round(sh_test_seed(), 0);
	oneway_round(sh_test_seed() + 1, 0.05);
}

/* A server that answers each call after a while, as one answers after a durable write. */
struct slow_srv {
	struct env_timer t;
	struct net_req *req;
	int answered;
};

static void
slow_answer(struct env_timer *t)
{
	struct slow_srv *s = t->arg;

	net_reply(s->req, 0, NULL, 0);
	s->req = NULL;
	s->answered++;
}

static void
on_slow(struct net_req *r, void *arg)
{
	struct slow_srv *s = arg;

	SH_ASSERT_NULL(s->req);
	s->req = r;
	SH_ASSERT_OK(env_timer_arm(&s->t, 600 * SH_NSEC_PER_USEC));
}

static void
on_slow_reply(void *arg, int status, const struct net_msg *reply)
{
	(void)reply;
	SH_ASSERT_EQ(status, 0);
	(*(int *)arg)++;
}

/*
 * An answer that comes within the delayed-ack time carries the ack of its
 * request: the server sends no ack alone (at 200 us, one per call).
 */
TEST(rpc_answer_within_the_delayed_ack_carries_the_ack)
{
	static struct cluster cl;
	struct sim_net_params p = faults(0);
	struct slow_srv srv = { 0 };
	struct net_stats st;
	int v[2] = { 0, 20 }; /* calls answered, calls */

	memset(&cl, 0, sizeof(cl));
	cl.own_handler = true;
	cluster_init(&cl, sh_test_seed(), 2);
	sim_net_set(cl.sim, &p);
	SH_ASSERT_OK(net_handle(cl.h[0].net, NET_OP_TEST, on_slow, &srv));
	env_timer_init(cl.h[0].env, &srv.t, slow_answer, &srv);
	for (int i = 0; i < v[1]; i++) {
		struct net_call_opts o = { .timeout_ns = SH_NSEC_PER_SEC, .retries = 0 };
		struct iovec iov = { &i, sizeof(i) };
		int before = v[0];

		SH_ASSERT_OK(
		    net_call(cl.h[1].net, 1, NET_OP_TEST, &iov, 1, &o, on_slow_reply, v, NULL));
		while (v[0] == before)
			sim_run_for(cl.sim, 100 * SH_NSEC_PER_USEC);
		sim_run_for(cl.sim, 5 * SH_NSEC_PER_MSEC); /* the client's own ack goes, alone */
	}
	SH_ASSERT_EQ(v[0], v[1]);
	net_stats(cl.h[0].net, &st);
	SH_ASSERT_EQ(srv.answered, v[1]);
	SH_ASSERT_EQ(st.acks_sent, 0);
	cluster_fini(&cl);
}

static bool
simple_done(void *arg)
{
	return ((struct simple *)arg)->calls > 0;
}

/* Node from's smoothed RTT to node to (ids as host_start gives them). */
static uint64_t
srtt_ns(struct cluster *cl, int from, int to)
{
	struct net_peer_stats ps[MAX_NODES];
	unsigned np = net_peer_stats(cl->h[from].net, ps, MAX_NODES);

	for (unsigned i = 0; i < np; i++)
		if (ps[i].id == (uint64_t)to + 1)
			return ps[i].srtt_ns;
	return 0;
}

/* Ping from a client, with the link to the server cut (in both ways or back only) for cut_ns. */
static uint64_t
ping_across_a_cut(struct cluster *cl, bool both, uint64_t cut_ns)
{
	struct net_call_opts o = { .timeout_ns = 60 * SH_NSEC_PER_SEC };
	struct simple s = { 0 };
	uint64_t healed;

	sim_link_cut(cl->h[0].node, cl->h[1].node, true);
	if (both)
		sim_link_cut(cl->h[1].node, cl->h[0].node, true);
	SH_ASSERT_OK(net_call(cl->h[1].net, 1, NET_OP_PING, NULL, 0, &o, simple_cb, &s, NULL));
	sim_run_for(cl->sim, cut_ns);
	SH_ASSERT_EQ(s.calls, 0);
	sim_link_cut(cl->h[0].node, cl->h[1].node, false);
	sim_link_cut(cl->h[1].node, cl->h[0].node, false);
	healed = sim_now(cl->sim);
	SH_ASSERT(sim_run_until(cl->sim, simple_done, &s, 10 * SH_NSEC_PER_SEC));
	SH_ASSERT_OK(s.status);
	return sim_now(cl->sim) - healed;
}

/*
 * A link out both ways for longer than the retransmission timer backs off
 * to (500 ms): when it is back, the server's first packet (a keepalive,
 * every 250 ms) ends the client's backoff, and the call goes within it,
 * not up to 500 ms later when the backed-off timer would have fired.
 */
TEST(rpc_a_silent_peer_heard_again_ends_the_backoff)
{
	static struct cluster cl;
	uint64_t worst = 0;
	struct net_stats st;

	memset(&cl, 0, sizeof(cl));
	cl.mtu = 1472;
	cl.dead_ns = 30 * SH_NSEC_PER_SEC;
	cluster_init(&cl, sh_test_seed(), 2);
	for (unsigned round = 0; round < 12; round++) {
		uint64_t took;

		sim_run_for(cl.sim, 100 * SH_NSEC_PER_MSEC);
		/* the cut ends at a different point of the timer's period each round */
		took = ping_across_a_cut(&cl, true, (1500 + 43 * round) * SH_NSEC_PER_MSEC);
		worst = SH_MAX(worst, took);
	}
	net_stats(cl.h[1].net, &st);
	printf("  12 cuts of 1.5-2 s: the slowest call ended %llu ms after the link was back; "
	       "%llu backoffs ended by the server's voice\n",
	       (unsigned long long)(worst / SH_NSEC_PER_MSEC),
	       (unsigned long long)st.backoffs_ended);
	SH_ASSERT_GT(st.backoffs_ended, 0);
	SH_ASSERT_LT(worst, 300 * SH_NSEC_PER_MSEC);
	cluster_fini(&cl);
}

/*
 * Only the way back cut: the server has the request, its answer and acks
 * are lost, and the client sends again and again, backing off. When the
 * way is back, the server's ack echoes the time of the copy it got last
 * (RFC 7323), and the client takes no RTT from what ends a timeout (Karn):
 * its RTT stays the link's, not the outage's.
 */
TEST(rpc_acks_lost_for_a_while_do_not_count_as_rtt)
{
	static struct cluster cl;
	uint64_t before, after, rto_max = 500 * SH_NSEC_PER_MSEC;

	memset(&cl, 0, sizeof(cl));
	cl.mtu = 1472;
	cl.dead_ns = 30 * SH_NSEC_PER_SEC;
	cluster_init(&cl, sh_test_seed(), 2);
	for (unsigned i = 0; i < 20; i++) {
		struct simple s = { 0 };

		SH_ASSERT_OK(
		    net_call(cl.h[1].net, 1, NET_OP_PING, NULL, 0, NULL, simple_cb, &s, NULL));
		SH_ASSERT(sim_run_until(cl.sim, simple_done, &s, SH_NSEC_PER_SEC));
	}
	before = srtt_ns(&cl, 1, 0);
	SH_ASSERT_GT(before, 0);
	for (unsigned round = 0; round < 4; round++)
		ping_across_a_cut(&cl, false, (1200 + 97 * round) * SH_NSEC_PER_MSEC);
	after = srtt_ns(&cl, 1, 0);
	printf("  client's RTT %llu us before 4 cuts of the way back, %llu us after\n",
	       (unsigned long long)before / 1000, (unsigned long long)after / 1000);
	SH_ASSERT_LT(after, rto_max / 20);
	cluster_fini(&cl);
}
