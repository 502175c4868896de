// SPDX-License-Identifier: Apache-2.0
/*
 * The data network on real UDP sockets on loopback: many concurrent RPCs in
 * both loop modes, several client processes against one server, a 256 MiB
 * message, and malformed datagrams that are counted and dropped while the
 * session goes on.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../../src/env/env_real.h"
#include "../../../src/net/net.h"
#include "../../lib/test.h"

struct node {
	struct env *env;
	struct net *net;
	struct net_iface ifc;
};

static void
node_up(struct node *x, struct env *env, uint64_t id, uint64_t dead_ns)
{
	struct net_config cfg = {
		.node_id = id, .ifaces = &x->ifc, .nifaces = 1, .dead_ns = dead_ns
	};

	memset(x, 0, sizeof(*x));
	x->env = env;
	SH_ASSERT_OK(env_addr_parse("127.0.0.1:0", &x->ifc.addr));
	SH_ASSERT_OK(net_create(env, &cfg, &x->net));
	SH_ASSERT_OK(net_iface_addr(x->net, 0, &x->ifc.addr));
}

static void
run_until(struct env *env, const int *counter, int want, uint64_t max_ns)
{
	uint64_t end = sh_clock_mono_ns() + max_ns;

	while (*counter < want && sh_clock_mono_ns() < end)
		SH_ASSERT_OK(env_real_run_once(env, 10 * SH_NSEC_PER_MSEC));
}

struct echo_call {
	int *done;
	int *ok;
	uint32_t len, crc;
};

static void
echo_cb(void *arg, int status, const struct net_msg *reply)
{
	struct echo_call *c = arg;

	(*c->done)++;
	if (status == 0 && reply->len == c->len &&
	    sh_crc32c(0, reply->buf->data + reply->off, reply->len) == c->crc)
		(*c->ok)++;
	else
		fprintf(stderr, "call failed: status %d (%s), len %zu/%u\n", status,
			sh_errname(status), reply ? reply->len : 0, c->len);
	sh_free(c);
}

static uint64_t echo_bytes; /* bodies sent by issue_echo */

static int
issue_echo(struct net *net, uint64_t peer, struct sh_rand *rng, uint8_t *buf, int *done, int *ok)
{
	struct echo_call *c = sh_malloc(sizeof(*c));
	size_t len = sh_rand_below(rng, 200000);
	struct iovec iov = { buf, len };

	sh_rand_fill(rng, buf, len);
	c->done = done;
	c->ok = ok;
	c->len = (uint32_t)len;
	c->crc = sh_crc32c(0, buf, len);
	echo_bytes += len;
	return net_call(net, peer, NET_OP_ECHO, &iov, 1, NULL, echo_cb, c, NULL);
}

static void
many_rpcs(enum env_real_mode mode)
{
	struct env_real_opts o = { .mode = mode };
	struct env *env = env_real_create(&o);
	struct node a, b;
	static uint8_t buf[200000];
	struct sh_rand rng;
	int done = 0, ok = 0, issued = 0;
	const int total = 2000, window = 64;
	struct net_stats st;
	struct net_op_stats ops[NET_OPS_TRACKED] = { 0 };
	struct net_peer_stats ps[4];
	uint64_t in_buckets = 0;

	sh_rand_seed(&rng, sh_test_seed());
	node_up(&a, env, 1, 0);
	node_up(&b, env, 2, 0);
	SH_ASSERT_OK(net_peer_add(b.net, 1, &a.ifc, 1));
	echo_bytes = 0;
	while (done < total) {
		while (issued - done < window && issued < total) {
			SH_ASSERT_OK(issue_echo(b.net, 1, &rng, buf, &done, &ok));
			issued++;
		}
		SH_ASSERT_OK(env_real_run_once(env, 10 * SH_NSEC_PER_MSEC));
	}
	SH_ASSERT_EQ(ok, total);
	/* let the last acks arrive: the server forgets replies its caller has */
	for (uint64_t end = sh_clock_mono_ns() + 50 * SH_NSEC_PER_MSEC; sh_clock_mono_ns() < end;)
		SH_ASSERT_OK(env_real_run_once(env, SH_NSEC_PER_MSEC));
	net_stats(a.net, &st);
	SH_ASSERT_LE(st.reply_cache_entries, 1);
	net_stats(b.net, &st);
	SH_ASSERT_EQ(st.calls_ok, total);
	SH_ASSERT_GT(st.pkts_sent, total);
	net_stats(a.net, &st);
	SH_ASSERT_EQ(st.requests, total);
	SH_ASSERT_EQ(st.duplicate_requests, 0);
	SH_ASSERT_EQ(st.bad_crc + st.bad_format + st.bad_magic, 0);
	/* the server's per-opcode account: every echo, its bytes both ways, its time */
	net_op_stats_add(a.net, ops);
	SH_ASSERT_EQ(ops[NET_OP_ECHO].requests, total);
	SH_ASSERT_EQ(ops[NET_OP_ECHO].errors, 0);
	SH_ASSERT_EQ(ops[NET_OP_ECHO].bytes_in, echo_bytes);
	SH_ASSERT_EQ(ops[NET_OP_ECHO].bytes_out, echo_bytes);
	for (unsigned i = 0; i < NET_LAT_BUCKETS; i++)
		in_buckets += ops[NET_OP_ECHO].lat[i];
	SH_ASSERT_EQ(in_buckets, total);
	SH_ASSERT_EQ(ops[NET_OP_PING].requests, 0);
	/* and per peer: what b sent a is what a received from b */
	SH_ASSERT_EQ(net_peer_stats(a.net, ps, 4), 1);
	SH_ASSERT_EQ(ps[0].id, 2);
	SH_ASSERT(ps[0].connected);
	SH_ASSERT_GT(ps[0].bytes_received, echo_bytes);
	SH_ASSERT_GT(ps[0].srtt_ns, 0);
	SH_ASSERT_EQ(net_peer_stats(b.net, ps, 4), 1);
	SH_ASSERT_GE(ps[0].bytes_sent, echo_bytes);
	SH_ASSERT_GE(ps[0].pkts_sent, ps[0].retransmits);
	net_destroy(b.net);
	net_destroy(a.net);
	env_real_run_once(env, 0);
	env_real_destroy(env);
}

/* Clients come and go: the server forgets each once it is gone, freeing its session memory. */
TEST(net_udp_gone_clients_are_forgotten)
{
	struct env_real_opts o = { .mode = ENV_REAL_EVENT };
	struct env *env = env_real_create(&o);
	struct net_config cfg = { .node_id = 1,
				  .nifaces = 1,
				  .dead_ns = 100 * SH_NSEC_PER_MSEC,
				  .keepalive_ns = 20 * SH_NSEC_PER_MSEC,
				  .forget_ns = 200 * SH_NSEC_PER_MSEC };
	static uint8_t buf[200000];
	struct net_peer_stats ps[8];
	struct net_stats st;
	struct sh_rand rng;
	struct node a, b;
	int done = 0, ok = 0;

	sh_rand_seed(&rng, sh_test_seed());
	memset(&a, 0, sizeof(a));
	SH_ASSERT_OK(env_addr_parse("127.0.0.1:0", &a.ifc.addr));
	cfg.ifaces = &a.ifc;
	SH_ASSERT_OK(net_create(env, &cfg, &a.net));
	SH_ASSERT_OK(net_iface_addr(a.net, 0, &a.ifc.addr));
	for (int round = 0; round < 3; round++) {
		node_up(&b, env, 1000 + (uint64_t)round, 0);
		SH_ASSERT_OK(net_peer_add(b.net, 1, &a.ifc, 1));
		SH_ASSERT_OK(issue_echo(b.net, 1, &rng, buf, &done, &ok));
		run_until(env, &done, round + 1, 5 * SH_NSEC_PER_SEC);
		SH_ASSERT_EQ(ok, round + 1);
		SH_ASSERT_EQ(net_peer_stats(a.net, ps, 8), 1); /* learned, and only this one */
		SH_ASSERT_EQ(ps[0].id, 1000 + (uint64_t)round);
		net_destroy(b.net);
		/* dead after 100 ms of silence, forgotten 200 ms later */
		for (uint64_t end = sh_clock_mono_ns() + 600 * SH_NSEC_PER_MSEC;
		     sh_clock_mono_ns() < end && net_peer_stats(a.net, NULL, 0) > 0;)
			SH_ASSERT_OK(env_real_run_once(env, 10 * SH_NSEC_PER_MSEC));
		SH_ASSERT_EQ(net_peer_stats(a.net, NULL, 0), 0);
	}
	net_stats(a.net, &st);
	SH_ASSERT_EQ(st.peers_forgotten, 3);
	net_destroy(a.net);
	env_real_run_once(env, 0);
	env_real_destroy(env);
}

TEST(net_udp_many_rpcs_event_mode)
{
	many_rpcs(ENV_REAL_EVENT);
}

TEST(net_udp_many_rpcs_poll_mode)
{
	many_rpcs(ENV_REAL_POLL);
}

struct zc_ctx {
	int done;
	int status;
	uint32_t crc;
	int released;
};

static void
zc_release(void *arg, void *data)
{
	(void)data;
	((struct zc_ctx *)arg)->released++;
}

static void
zc_cb(void *arg, int status, const struct net_msg *reply)
{
	struct zc_ctx *z = arg;

	z->done++;
	z->status = status;
	if (status == 0)
		z->crc = sh_crc32c(0, reply->buf->data + reply->off, reply->len);
}

TEST(net_udp_zero_copy_call)
{
	struct env *env = env_real_create(NULL);
	struct node a, b;
	static uint8_t part1[100000], part2[3000];
	struct zc_ctx z = { 0 };
	struct sh_buf *b1 = sh_buf_wrap(part1, sizeof(part1), zc_release, &z);
	struct sh_buf *b2 = sh_buf_wrap(part2, sizeof(part2), zc_release, &z);
	struct sh_iov body;
	struct sh_rand rng;
	uint32_t want;

	sh_rand_seed(&rng, sh_test_seed());
	sh_rand_fill(&rng, part1, sizeof(part1));
	sh_rand_fill(&rng, part2, sizeof(part2));
	sh_iov_init(&body);
	/* three slices over two caller buffers, crossing fragment boundaries */
	SH_ASSERT_OK(sh_iov_append(&body, b1, 10, 70000));
	SH_ASSERT_OK(sh_iov_append(&body, b2, 0, 3000));
	SH_ASSERT_OK(sh_iov_append(&body, b1, 70010, 20000));
	want = sh_iov_crc32c(&body, 0);
	sh_buf_put(b1);
	sh_buf_put(b2);
	node_up(&a, env, 1, 0);
	node_up(&b, env, 2, 0);
	SH_ASSERT_OK(net_peer_add(b.net, 1, &a.ifc, 1));
	SH_ASSERT_OK(net_call_zc(b.net, 1, NET_OP_ECHO, &body, NULL, zc_cb, &z, NULL));
	sh_iov_fini(&body); /* net holds its own references until the call ends */
	SH_ASSERT_EQ(z.released, 0);
	run_until(env, &z.done, 1, 5 * SH_NSEC_PER_SEC);
	SH_ASSERT_OK(z.status);
	SH_ASSERT_EQ(z.crc, want);
	for (uint64_t end = sh_clock_mono_ns() + 20 * SH_NSEC_PER_MSEC; sh_clock_mono_ns() < end;)
		SH_ASSERT_OK(env_real_run_once(env, SH_NSEC_PER_MSEC));
	SH_ASSERT_EQ(z.released, 2); /* both buffers given back once everything was acked */
	net_destroy(b.net);
	net_destroy(a.net);
	env_real_destroy(env);
}

/* ---- several processes ---- */

#define NCLIENTS   4
#define PER_CLIENT 500

struct server {
	uint8_t seen[NCLIENTS][PER_CLIENT];
	int handled, dups;
};

static void
on_tagged(struct net_req *r, void *arg)
{
	struct server *s = arg;
	const struct net_msg *m = net_req_body(r);
	uint32_t tag[2];
	struct iovec iov;

	SH_ASSERT_GE(m->len, sizeof(tag));
	memcpy(tag, m->buf->data + m->off, sizeof(tag));
	SH_ASSERT_LT(tag[0], NCLIENTS);
	SH_ASSERT_LT(tag[1], PER_CLIENT);
	if (s->seen[tag[0]][tag[1]]++)
		s->dups++;
	s->handled++;
	iov = (struct iovec){ m->buf->data + m->off, m->len };
	net_reply(r, 0, &iov, 1);
}

struct tagged_call {
	int *done, *bad;
	uint32_t tag[2];
};

static void
tagged_cb(void *arg, int status, const struct net_msg *reply)
{
	struct tagged_call *c = arg;

	(*c->done)++;
	if (status != 0 || reply->len < 8 || memcmp(reply->buf->data + reply->off, c->tag, 8) != 0)
		(*c->bad)++;
	sh_free(c);
}

static int
client_main(int idx, const struct net_iface *srv)
{
	struct env *env = env_real_create(NULL);
	struct node c;
	int done = 0, bad = 0, issued = 0;
	static uint8_t body[3000];

	node_up(&c, env, 100 + (uint64_t)idx, 0);
	SH_ASSERT_OK(net_peer_add(c.net, 1, srv, 1));
	while (done < PER_CLIENT) {
		while (issued - done < 32 && issued < PER_CLIENT) {
			struct tagged_call *t = sh_malloc(sizeof(*t));
			struct iovec iov = { body, 8 + (size_t)(issued * 37) % (sizeof(body) - 8) };

			t->done = &done;
			t->bad = &bad;
			t->tag[0] = (uint32_t)idx;
			t->tag[1] = (uint32_t)issued++;
			memcpy(body, t->tag, 8);
			SH_ASSERT_OK(
			    net_call(c.net, 1, NET_OP_TEST, &iov, 1, NULL, tagged_cb, t, NULL));
		}
		SH_ASSERT_OK(env_real_run_once(env, 10 * SH_NSEC_PER_MSEC));
	}
	net_destroy(c.net);
	env_real_destroy(env);
	return bad == 0 ? 0 : 1;
}

TEST(net_udp_several_processes)
{
	struct env *env = env_real_create(NULL);
	static struct server s;
	struct node srv;
	pid_t pids[NCLIENTS];
	int exited = 0, failed = 0;

	node_up(&srv, env, 1, 0);
	SH_ASSERT_OK(net_handle(srv.net, NET_OP_TEST, on_tagged, &s));
	for (int i = 0; i < NCLIENTS; i++) {
		pids[i] = fork();
		SH_ASSERT_GE(pids[i], 0);
		if (pids[i] == 0)
			_exit(client_main(i, &srv.ifc));
	}
	for (uint64_t end = sh_clock_mono_ns() + 60 * SH_NSEC_PER_SEC;
	     exited < NCLIENTS && sh_clock_mono_ns() < end;) {
		int status;
		pid_t p;

		SH_ASSERT_OK(env_real_run_once(env, 5 * SH_NSEC_PER_MSEC));
		while ((p = waitpid(-1, &status, WNOHANG)) > 0) {
			exited++;
			if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
				failed++;
		}
	}
	for (int i = 0; i < NCLIENTS && exited < NCLIENTS; i++)
		kill(pids[i], SIGKILL);
	SH_ASSERT_EQ(exited, NCLIENTS);
	SH_ASSERT_EQ(failed, 0);
	SH_ASSERT_EQ(s.handled, NCLIENTS * PER_CLIENT);
	SH_ASSERT_EQ(s.dups, 0);
	net_destroy(srv.net);
	env_real_destroy(env);
}

/* ---- one huge message ---- */

static void
on_crc(struct net_req *r, void *arg)
{
	const struct net_msg *m = net_req_body(r);
	uint32_t crc = sh_crc32c(0, m->buf->data + m->off, m->len);
	uint64_t len = m->len;
	struct iovec iov[2] = { { &crc, 4 }, { &len, 8 } };

	(void)arg;
	net_reply(r, 0, iov, 2);
}

struct crc_reply {
	int done;
	int status;
	uint32_t crc;
	uint64_t len;
};

static void
crc_cb(void *arg, int status, const struct net_msg *reply)
{
	struct crc_reply *c = arg;

	c->done++;
	c->status = status;
	if (status == 0 && reply->len == 12) {
		memcpy(&c->crc, reply->buf->data + reply->off, 4);
		memcpy(&c->len, reply->buf->data + reply->off + 4, 8);
	}
}

TEST(net_udp_256mib_message)
{
	struct env *env = env_real_create(NULL);
	struct node a, b;
	size_t len = 256u << 20;
	uint8_t *big = sh_malloc(len);
	struct iovec iov = { big, len };
	struct net_call_opts o = { .timeout_ns = 60 * SH_NSEC_PER_SEC };
	struct crc_reply r = { 0 };
	struct sh_rand rng;
	uint64_t t0;

	SH_ASSERT_NOT_NULL(big);
	sh_rand_seed(&rng, sh_test_seed());
	sh_rand_fill(&rng, big, len);
	node_up(&a, env, 1, 0);
	node_up(&b, env, 2, 0);
	SH_ASSERT_OK(net_handle(a.net, NET_OP_TEST, on_crc, NULL));
	SH_ASSERT_OK(net_peer_add(b.net, 1, &a.ifc, 1));
	t0 = sh_clock_mono_ns();
	SH_ASSERT_OK(net_call(b.net, 1, NET_OP_TEST, &iov, 1, &o, crc_cb, &r, NULL));
	run_until(env, &r.done, 1, 60 * SH_NSEC_PER_SEC);
	SH_ASSERT_EQ(r.done, 1);
	SH_ASSERT_OK(r.status);
	SH_ASSERT_EQ(r.len, len);
	SH_ASSERT_EQ(r.crc, sh_crc32c(0, big, len));
	printf("256 MiB in %.2f s\n", (double)(sh_clock_mono_ns() - t0) / 1e9);
	net_destroy(b.net);
	net_destroy(a.net);
	env_real_destroy(env);
	sh_free(big);
}

/*
 * A handler forgotten (its owner about to free what it was given: a
 * service stopping while its endpoint still receives) is never called
 * again: a request for its opcode is answered -EOPNOTSUPP, and the opcode
 * may be handled anew.
 */
TEST(net_udp_a_forgotten_handler_is_never_called)
{
	struct env *env = env_real_create(NULL);
	struct net_call_opts o = { .timeout_ns = 5 * SH_NSEC_PER_SEC };
	struct iovec iov = { "abc", 3 };
	struct node a, b;

	node_up(&a, env, 1, 0);
	node_up(&b, env, 2, 0);
	SH_ASSERT_OK(net_handle(a.net, NET_OP_TEST, on_crc, NULL));
	SH_ASSERT_OK(net_peer_add(b.net, 1, &a.ifc, 1));
	for (int round = 0; round < 3; round++) {
		struct crc_reply r = { 0 };

		if (round == 1)
			net_unhandle(a.net, NET_OP_TEST);
		if (round == 2)
			SH_ASSERT_OK(net_handle(a.net, NET_OP_TEST, on_crc, NULL));
		SH_ASSERT_OK(net_call(b.net, 1, NET_OP_TEST, &iov, 1, &o, crc_cb, &r, NULL));
		run_until(env, &r.done, 1, 5 * SH_NSEC_PER_SEC);
		SH_ASSERT_EQ(r.done, 1);
		SH_ASSERT_EQ(r.status, round == 1 ? -EOPNOTSUPP : 0);
		if (round != 1)
			SH_ASSERT_EQ(r.crc, sh_crc32c(0, "abc", 3));
	}
	net_destroy(b.net);
	net_destroy(a.net);
	env_real_destroy(env);
}

/* ---- malformed datagrams ---- */

static void
ignore_recv(struct env_dgram *d, const struct env_dgram_msg *m, unsigned n, void *arg)
{
	(void)d;
	(void)m;
	(void)n;
	(void)arg;
}

TEST(net_udp_malformed_datagrams_are_dropped)
{
	static const struct env_dgram_cbs cbs = { .recv = ignore_recv };
	struct env *env = env_real_create(NULL);
	struct node a, b;
	struct env_dgram *raw;
	struct env_addr bind;
	static uint8_t buf[200000];
	struct sh_rand rng;
	int done = 0, ok = 0;
	struct net_stats before, after;
	uint8_t pkt[1024];
	struct iovec iov;
	struct env_dgram_msg m;

	sh_rand_seed(&rng, sh_test_seed());
	node_up(&a, env, 1, 0);
	node_up(&b, env, 2, 0);
	SH_ASSERT_OK(net_peer_add(b.net, 1, &a.ifc, 1));
	SH_ASSERT_OK(issue_echo(b.net, 1, &rng, buf, &done, &ok));
	run_until(env, &done, 1, 5 * SH_NSEC_PER_SEC);
	SH_ASSERT_EQ(ok, 1);
	net_stats(a.net, &before);

	SH_ASSERT_OK(env_addr_parse("127.0.0.1:0", &bind));
	SH_ASSERT_OK(env_dgram_open(env, &bind, &cbs, NULL, &raw));
	m = (struct env_dgram_msg){ .peer = a.ifc.addr, .iov = &iov, .iovcnt = 1 };
	/* random bytes */
	for (int i = 0; i < 200; i++) {
		sh_rand_fill(&rng, pkt, sizeof(pkt));
		iov = (struct iovec){ pkt, 1 + sh_rand_below(&rng, sizeof(pkt)) };
		SH_ASSERT_EQ(env_dgram_send(raw, &m, 1), 1);
	}
	/* well-formed headers with damage: bad crc, wrong version, lies about lengths */
	for (int i = 0; i < 100; i++) {
		struct net_pkt p = { .type = NET_PKT_DATA,
				     .src_id = 2,
				     .dst_id = 1,
				     .src_inc = net_incarnation(b.net),
				     .dst_inc = net_incarnation(a.net),
				     .sess = 1,
				     .seq = 1000000,
				     .nchunks = 1 };
		struct net_chunk ch = { .msg_id = 9, .msg_len = 16, .frag_cnt = 1, .len = 16 };
		uint8_t *payload = pkt + 200;
		struct iovec piov = { payload, NET_CHUNK_HDR + 16 };
		size_t h;

		net_chunk_hdr_put(payload, &ch);
		p.payload_len = NET_CHUNK_HDR + 16;
		h = net_pkt_encode_hdr(&p, pkt, &piov, 1);
		memmove(pkt + h, payload, NET_CHUNK_HDR + 16);
		iov = (struct iovec){ pkt, h + NET_CHUNK_HDR + 16 };
		switch (i % 4) {
		case 0:
			pkt[h + 3] ^= 0x40; /* crc */
			break;
		case 1:
			pkt[4] = 9; /* version */
			break;
		case 2:
			iov.iov_len = h + 10; /* truncated */
			break;
		case 3:
			break; /* valid, but far outside the receive window */
		}
		SH_ASSERT_EQ(env_dgram_send(raw, &m, 1), 1);
	}
	/* the session goes on */
	done = ok = 0;
	for (int i = 0; i < 50; i++)
		SH_ASSERT_OK(issue_echo(b.net, 1, &rng, buf, &done, &ok));
	run_until(env, &done, 50, 10 * SH_NSEC_PER_SEC);
	SH_ASSERT_EQ(ok, 50);
	net_stats(a.net, &after);
	SH_ASSERT_GE(after.bad_magic + after.bad_crc + after.bad_format + after.stale +
			 after.resets_sent -
			 (before.bad_magic + before.bad_crc + before.bad_format + before.stale +
			  before.resets_sent),
		     300 - 25);
	SH_ASSERT_GE(after.bad_crc - before.bad_crc, 25);
	env_dgram_close(raw);
	net_destroy(b.net);
	net_destroy(a.net);
	env_real_run_once(env, 0);
	env_real_destroy(env);
}

/* An ack held longer than half the shortest retransmission timeout would time senders out. */
TEST(net_udp_refuses_a_delayed_ack_past_half_the_rto)
{
	struct env_real_opts o = { .mode = ENV_REAL_EVENT };
	struct env *env = env_real_create(&o);
	struct net_iface ifc = { 0 };
	struct net_config cfg = { .node_id = 1, .nifaces = 1, .ifaces = &ifc };
	struct net *n = NULL;

	SH_ASSERT_OK(env_addr_parse("127.0.0.1:0", &ifc.addr));
	cfg.delack_ns = 1500 * SH_NSEC_PER_USEC; /* default rto_min_ns: 2 ms */
	SH_ASSERT_EQ(net_create(env, &cfg, &n), -EINVAL);
	cfg.rto_min_ns = 3 * SH_NSEC_PER_MSEC;
	SH_ASSERT_OK(net_create(env, &cfg, &n));
	net_destroy(n);
	cfg.delack_ns = 0; /* the default, 1 ms, against an rto_min_ns of 1 ms */
	cfg.rto_min_ns = SH_NSEC_PER_MSEC;
	SH_ASSERT_EQ(net_create(env, &cfg, &n), -EINVAL);
	env_real_destroy(env);
}

/*
 * MTUs on loopback: a server on 127.0.0.1 says lo's (less 28); a client
 * bound to every address has none of its own and says nothing, each taking
 * the default for the other's address: 64 KiB datagrams both ways (a
 * client that said 1,472 would have its replies cut 44 times finer).
 */
TEST(net_udp_mtus_on_loopback_with_a_wildcard_client)
{
	struct env_real_opts o = { .mode = ENV_REAL_EVENT };
	struct env *env = env_real_create(&o);
	static uint8_t buf[200000];
	struct net_path_stats ps;
	struct net_iface any = { 0 };
	struct net_config cfg = { .node_id = 2, .ifaces = &any, .nifaces = 1 };
	struct net *cli;
	struct sh_rand rng;
	struct node a;
	int done = 0, ok = 0;

	sh_rand_seed(&rng, sh_test_seed());
	node_up(&a, env, 1, 0);
	SH_ASSERT_OK(env_addr_parse("0.0.0.0:0", &any.addr));
	SH_ASSERT_OK(net_create(env, &cfg, &cli));
	SH_ASSERT_OK(net_peer_add(cli, 1, &a.ifc, 1));
	for (int i = 0; i < 4; i++)
		SH_ASSERT_OK(issue_echo(cli, 1, &rng, buf, &done, &ok));
	run_until(env, &done, 4, 5 * SH_NSEC_PER_SEC);
	SH_ASSERT_EQ(ok, 4);
	SH_ASSERT_EQ(net_peer_paths(cli, 1, &ps, 1), 1);
	SH_ASSERT_EQ(ps.mtu, ENV_DGRAM_MAX);
	SH_ASSERT_EQ(net_peer_paths(a.net, 2, &ps, 1), 1); /* learned: where it wrote from */
	SH_ASSERT_EQ(ps.mtu, ENV_DGRAM_MAX);
	net_destroy(cli);
	net_destroy(a.net);
	env_real_run_once(env, 0);
	env_real_destroy(env);
}
