// SPDX-License-Identifier: Apache-2.0
/* The drive-target RPCs between two simulated nodes: put, get, release, stat, and bad requests. */
#include <errno.h>
#include <stdio.h>

#include "../../../src/env/env_sim.h"
#include "../../../src/net/net.h"
#include "../../../src/store/service.h"
#include "../../../src/store/store_proto.h"
#include "../../lib/test.h"

struct reply {
	int done, status;
	uint8_t data[70000];
	size_t len;
};

static void
on_reply(void *arg, int status, const struct net_msg *m)
{
	struct reply *r = arg;

	r->done = 1;
	r->status = status;
	r->len = 0;
	if (m != NULL && m->len <= sizeof(r->data)) {
		memcpy(r->data, m->buf->data + m->off, m->len);
		r->len = m->len;
	}
}

static bool
replied(void *arg)
{
	return ((struct reply *)arg)->done;
}

static void
on_store(void *arg, int rc)
{
	*(int *)arg = rc == 0 ? 1 : rc;
}

static bool
flag_set(void *arg)
{
	return *(int *)arg != 0;
}

static struct sim *sim;
static struct net *client;

static int
call(uint16_t op, const void *body, size_t len, struct reply *r)
{
	struct iovec iov = { (void *)body, len };

	memset(r, 0, sizeof(*r) - sizeof(r->data));
	SH_ASSERT_OK(net_call(client, 1, op, &iov, 1, NULL, on_reply, r, NULL));
	SH_ASSERT(sim_run_until(sim, replied, r, 10 * SH_NSEC_PER_SEC));
	return r->status;
}

static int
put(uint64_t target, uint64_t stripe, uint32_t idx, const uint8_t *data, uint32_t len)
{
	static uint8_t buf[STORE_PROTO_HDR + 65536];
	static struct reply r;
	struct store_proto_req q = { .target = target, .stripe = stripe, .idx = idx, .len = len };
	size_t h;

	memcpy(buf, data, len);
	h = store_proto_encode(NET_OP_STORE_PUT, &q, buf + len);
	return call(NET_OP_STORE_PUT, buf, h + len, &r);
}

static int
get(uint64_t target, uint64_t stripe, uint32_t idx, uint64_t off, uint32_t len, struct reply *r)
{
	uint8_t buf[64];
	struct store_proto_req q = {
		.target = target, .stripe = stripe, .idx = idx, .len = len, .off = off
	};

	return call(NET_OP_STORE_GET, buf, store_proto_encode(NET_OP_STORE_GET, &q, buf), r);
}

TEST(store_rpc_put_get_release_stat)
{
	struct sim_node *sn, *cn;
	struct net_iface si = { 0 }, ci = { 0 };
	struct net_config scfg = { .node_id = 1, .ifaces = &si, .nifaces = 1 };
	struct net_config ccfg = { .node_id = 2, .ifaces = &ci, .nifaces = 1 };
	struct store_format_opts fo = { .target_id = 77, .seg_size = 256u << 10 };
	struct net *server;
	struct store *st;
	struct store_svc *svc;
	static struct reply r;
	static uint8_t data[60000];
	uint8_t buf[64];
	int flag = 0;

	sim = sim_create(sh_test_seed());
	sn = sim_node_create(sim, "srv", "127.0.5.1");
	cn = sim_node_create(sim, "cli", "127.0.5.2");
	SH_ASSERT_OK(env_addr_parse("127.0.5.1:7000", &si.addr));
	SH_ASSERT_OK(env_addr_parse("127.0.5.2:7000", &ci.addr));
	SH_ASSERT_OK(net_create(sim_node_env(sn), &scfg, &server));
	SH_ASSERT_OK(net_create(sim_node_env(cn), &ccfg, &client));
	SH_ASSERT_OK(net_peer_add(client, 1, &si, 1));
	SH_ASSERT_OK(store_format(sim_node_env(sn), "nvme0", 8u << 20, &fo, on_store, &flag));
	SH_ASSERT(sim_run_until(sim, flag_set, &flag, SH_NSEC_PER_SEC));
	flag = 0;
	SH_ASSERT_OK(store_open(sim_node_env(sn), "nvme0", NULL, &st, on_store, &flag));
	SH_ASSERT(sim_run_until(sim, flag_set, &flag, SH_NSEC_PER_SEC));
	SH_ASSERT_EQ(flag, 1);
	SH_ASSERT_OK(store_svc_create(server, &svc));
	SH_ASSERT_OK(store_svc_add(svc, st));
	SH_ASSERT_ERR(store_svc_add(svc, st), -EEXIST);

	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 13);
	SH_ASSERT_OK(put(77, 5, 2, data, sizeof(data)));
	{
		/*
		 * A body of whole 4 KiB blocks lands aligned and is written from
		 * where it landed; 60000 bytes are not whole blocks: copied
		 */
		struct store_stats ss;

		SH_ASSERT_OK(put(77, 6, 0, data, 32768));
		store_stats(st, &ss);
		SH_ASSERT_EQ(ss.appends_copied, 1);
		SH_ASSERT_OK(get(77, 6, 0, 0, 32768, &r));
		SH_ASSERT_EQ(r.len, 32768);
		SH_ASSERT_MEMEQ(r.data, data, 32768);
		flag = 0;
		SH_ASSERT_OK(store_release(st, 6, 0, on_store, &flag));
		SH_ASSERT(sim_run_until(sim, flag_set, &flag, SH_NSEC_PER_SEC));
	}
	SH_ASSERT_OK(get(77, 5, 2, 1000, 20000, &r));
	SH_ASSERT_EQ(r.len, 20000);
	SH_ASSERT_MEMEQ(r.data, data + 1000, 20000);
	/* errors the store gives */
	SH_ASSERT_ERR(get(77, 5, 2, 59000, 2000, &r), -ERANGE);
	SH_ASSERT_ERR(get(77, 6, 2, 0, 10, &r), -ENOENT);
	SH_ASSERT_ERR(get(78, 5, 2, 0, 10, &r), -ENODEV);
	/* malformed requests */
	SH_ASSERT_ERR(call(NET_OP_STORE_GET, buf, 10, &r), -EINVAL);
	{
		struct store_proto_req q = { .target = 77, .stripe = 1, .len = 100 };
		size_t h = store_proto_encode(NET_OP_STORE_PUT, &q, buf + 10);

		SH_ASSERT_ERR(call(NET_OP_STORE_PUT, buf, h + 10, &r), -EINVAL); /* length lies */
		q.len = 0;
		h = store_proto_encode(NET_OP_STORE_PUT, &q, buf);
		SH_ASSERT_ERR(call(NET_OP_STORE_PUT, buf, h, &r), -EINVAL); /* empty fragment */
	}
	/* stat */
	{
		uint64_t t = 77;
		struct store_proto_stat ps;

		SH_ASSERT_OK(call(NET_OP_STORE_STAT, &t, 8, &r));
		SH_ASSERT_EQ(r.len, sizeof(ps));
		memcpy(&ps, r.data, sizeof(ps));
		SH_ASSERT_EQ(ps.fragments, 1);
		SH_ASSERT_GT(ps.capacity, 0);
		SH_ASSERT_GE(ps.live, sizeof(data));
	}
	/* release */
	{
		struct store_proto_req q = { .target = 77, .stripe = 5, .idx = 2 };

		SH_ASSERT_OK(call(NET_OP_STORE_RELEASE, buf,
				  store_proto_encode(NET_OP_STORE_RELEASE, &q, buf), &r));
		SH_ASSERT_ERR(get(77, 5, 2, 0, 10, &r), -ENOENT);
		SH_ASSERT_ERR(call(NET_OP_STORE_RELEASE, buf,
				   store_proto_encode(NET_OP_STORE_RELEASE, &q, buf), &r),
			      -ENOENT);
	}
	store_close(st);
	store_svc_destroy(svc);
	net_destroy(client);
	net_destroy(server);
	sim_destroy(sim);
}
