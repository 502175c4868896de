// SPDX-License-Identifier: Apache-2.0
/* Real UDP endpoints on loopback: batches both ways, content intact, bad calls refused. */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>

#include "../../../src/env/env_real.h"
#include "../../lib/test.h"

struct peer {
	struct env_dgram *d;
	unsigned got;
	unsigned bad;
	uint64_t bytes;
	unsigned max_batch;
	struct env_addr from;
};

/* Datagram i: 4-byte index, then bytes derived from it. */
static size_t
dgram_len(unsigned i)
{
	return i % 97 == 0 ? 60000 : 4 + (i * 37) % 1400;
}

static void
fill(unsigned char *p, unsigned i, size_t len)
{
	memcpy(p, &i, 4);
	for (size_t k = 4; k < len; k++)
		p[k] = (unsigned char)(i * 31 + k);
}

static void
on_recv(struct env_dgram *d, const struct env_dgram_msg *msgs, unsigned n, void *arg)
{
	struct peer *p = arg;
	static unsigned char want[ENV_DGRAM_MAX];

	(void)d;
	SH_ASSERT_LE(n, ENV_DGRAM_BATCH);
	if (n > p->max_batch)
		p->max_batch = n;
	for (unsigned i = 0; i < n; i++) {
		unsigned idx;

		SH_ASSERT_GE(msgs[i].len, 4);
		memcpy(&idx, msgs[i].iov[0].iov_base, 4);
		fill(want, idx, dgram_len(idx));
		if (msgs[i].len != dgram_len(idx) ||
		    memcmp(want, msgs[i].iov[0].iov_base, msgs[i].len) != 0)
			p->bad++;
		p->got++;
		p->bytes += msgs[i].len;
		p->from = msgs[i].peer;
	}
}

static const struct env_dgram_cbs cbs = { .recv = on_recv };

static void
exchange(enum env_real_mode mode, const char *bind_ip)
{
	struct env_real_opts o = { .mode = mode };
	struct env *env = env_real_create(&o);
	struct peer a = { 0 }, b = { 0 };
	struct env_addr bind, aa, ba;
	static unsigned char bufs[ENV_DGRAM_BATCH][60000];
	struct iovec iov[ENV_DGRAM_BATCH][2];
	struct env_dgram_msg msgs[ENV_DGRAM_BATCH];
	unsigned sent = 0;
	int rc;

	SH_ASSERT_NOT_NULL(env);
	SH_ASSERT_OK(env_addr_parse(bind_ip, &bind));
	rc = env_dgram_open(env, &bind, &cbs, &a, &a.d);
	if (rc == -EADDRNOTAVAIL || rc == -EAFNOSUPPORT)
		sh_test_skip("cannot bind %s: %s", bind_ip, sh_strerror(rc));
	SH_ASSERT_OK(rc);
	SH_ASSERT_OK(env_dgram_open(env, &bind, &cbs, &b, &b.d));
	SH_ASSERT_OK(env_dgram_addr(a.d, &aa));
	SH_ASSERT_OK(env_dgram_addr(b.d, &ba));
	SH_ASSERT_NE(aa.port, 0);
	SH_ASSERT_NE(aa.port, ba.port);

	for (int batch = 0; batch < 20; batch++) {
		for (unsigned i = 0; i < ENV_DGRAM_BATCH; i++) {
			unsigned idx = sent + i;
			size_t len = dgram_len(idx);

			fill(bufs[i], idx, len);
			/* two iovecs per datagram: the header and the rest */
			iov[i][0] = (struct iovec){ bufs[i], 4 };
			iov[i][1] = (struct iovec){ bufs[i] + 4, len - 4 };
			msgs[i] = (struct env_dgram_msg){ .peer = ba, .iov = iov[i], .iovcnt = 2 };
		}
		rc = env_dgram_send(a.d, msgs, ENV_DGRAM_BATCH);
		SH_ASSERT_EQ(rc, ENV_DGRAM_BATCH);
		sent += ENV_DGRAM_BATCH;
		for (uint64_t end = sh_clock_mono_ns() + 10 * SH_NSEC_PER_SEC;
		     b.got < sent && sh_clock_mono_ns() < end;)
			SH_ASSERT_OK(env_real_run_once(env, 5 * SH_NSEC_PER_MSEC));
		SH_ASSERT_EQ(b.got, sent);
	}
	SH_ASSERT_EQ(b.bad, 0);
	SH_ASSERT(env_addr_eq(&b.from, &aa));
	SH_ASSERT_GT(b.max_batch, 1); /* recvmmsg handed over batches */
	{
		struct env_dgram_stats st;

		env_dgram_stats(a.d, &st);
		SH_ASSERT_EQ(st.sent, sent);
		SH_ASSERT_LE(st.send_calls, 20 * 2); /* batched: about one syscall per batch */
		env_dgram_stats(b.d, &st);
		SH_ASSERT_EQ(st.received, sent);
		SH_ASSERT_LT(st.recv_calls, sent / 4);
	}
	/* and back */
	iov[0][0] = (struct iovec){ bufs[0], 4 };
	fill(bufs[0], 0, 4);
	msgs[0] = (struct env_dgram_msg){ .peer = aa, .iov = iov[0], .iovcnt = 1 };
	SH_ASSERT_EQ(env_dgram_send(b.d, msgs, 1), 1);
	for (uint64_t end = sh_clock_mono_ns() + 10 * SH_NSEC_PER_SEC;
	     a.got < 1 && sh_clock_mono_ns() < end;)
		SH_ASSERT_OK(env_real_run_once(env, 5 * SH_NSEC_PER_MSEC));
	SH_ASSERT_EQ(a.got, 1);
	env_dgram_close(a.d);
	env_dgram_close(b.d);
	SH_ASSERT_OK(env_real_run_once(env, 0));
	env_real_destroy(env);
}

TEST(udp_batches_event_mode)
{
	exchange(ENV_REAL_EVENT, "127.0.0.1:0");
}

TEST(udp_batches_poll_mode)
{
	exchange(ENV_REAL_POLL, "127.0.0.1:0");
}

TEST(udp_batches_ipv6)
{
	exchange(ENV_REAL_EVENT, "[::1]:0");
}

TEST(udp_bad_calls)
{
	struct env *env = env_real_create(NULL);
	struct peer a = { 0 };
	struct env_addr bind, other, dst;
	struct env_dgram *d2;
	static unsigned char big[ENV_DGRAM_MAX + 1];
	struct iovec iov = { big, sizeof(big) };
	struct env_dgram_msg m = { .iov = &iov, .iovcnt = 1 };
	struct env_dgram_msg many[ENV_DGRAM_BATCH + 1];

	SH_ASSERT_OK(env_addr_parse("127.0.0.1:0", &bind));
	SH_ASSERT_OK(env_dgram_open(env, &bind, &cbs, &a, &a.d));
	SH_ASSERT_OK(env_dgram_addr(a.d, &dst));
	/* the same port twice */
	SH_ASSERT_ERR(env_dgram_open(env, &dst, &cbs, &a, &d2), -EADDRINUSE);
	/* an address this machine does not have (bind sends nothing) */
	SH_ASSERT_OK(env_addr_parse("203.0.113.7:0", &other));
	SH_ASSERT_ERR(env_dgram_open(env, &other, &cbs, &a, &d2), -EADDRNOTAVAIL);
	/* no callback, no family */
	SH_ASSERT_ERR(env_dgram_open(env, &bind, NULL, &a, &d2), -EINVAL);
	memset(&other, 0, sizeof(other));
	SH_ASSERT_ERR(env_dgram_open(env, &other, &cbs, &a, &d2), -EINVAL);

	m.peer = dst;
	SH_ASSERT_ERR(env_dgram_send(a.d, &m, 1), -EMSGSIZE);
	iov.iov_len = 10;
	memset(&m.peer, 0, sizeof(m.peer));
	SH_ASSERT_ERR(env_dgram_send(a.d, &m, 1), -EINVAL);
	m.peer = dst;
	m.iovcnt = ENV_DGRAM_IOV_MAX + 1;
	SH_ASSERT_ERR(env_dgram_send(a.d, &m, 1), -EINVAL);
	m.iovcnt = 1;
	for (int i = 0; i <= ENV_DGRAM_BATCH; i++)
		many[i] = m;
	SH_ASSERT_ERR(env_dgram_send(a.d, many, ENV_DGRAM_BATCH + 1), -EINVAL);
	SH_ASSERT_EQ(env_dgram_send(a.d, many, 0), 0);

	/* the send fault point drops silently: taken, never delivered */
	SH_ASSERT_OK(sh_fault_arm(FP_ENV_DGRAM_SEND_DROP, "always", NULL, 0));
	SH_ASSERT_EQ(env_dgram_send(a.d, many, 3), 3);
	sh_fault_disarm_all();
	SH_ASSERT_OK(env_real_run_once(env, 20 * SH_NSEC_PER_MSEC));
	SH_ASSERT_EQ(a.got, 0);
	{
		struct env_dgram_stats st;

		env_dgram_stats(a.d, &st);
		SH_ASSERT_EQ(st.send_dropped, 3);
	}
	env_dgram_close(a.d);
	env_real_run_once(env, 0);
	env_real_destroy(env);
}

/* Equal-size datagrams to one peer: one segmentation-offload send, split again on receipt. */
static void
on_seq(struct env_dgram *d, const struct env_dgram_msg *msgs, unsigned n, void *arg)
{
	struct peer *p = arg;

	(void)d;
	for (unsigned i = 0; i < n; i++) {
		unsigned idx;
		unsigned char want[1400];

		memcpy(&idx, msgs[i].iov[0].iov_base, 4);
		fill(want, idx, idx % 64 == 63 ? 900 : 1400);
		if (msgs[i].len != (idx % 64 == 63 ? 900u : 1400u) ||
		    memcmp(want, msgs[i].iov[0].iov_base, msgs[i].len) != 0 || idx != p->got)
			p->bad++; /* wrong bytes, wrong boundary or out of order */
		p->got++;
	}
}

TEST(udp_segmentation_offload)
{
	static const struct env_dgram_cbs scbs = { .recv = on_seq };
	struct env *env = env_real_create(NULL);
	struct peer a = { 0 }, b = { 0 };
	struct env_addr bind, ba;
	static unsigned char bufs[ENV_DGRAM_BATCH][1400];
	struct iovec iov[ENV_DGRAM_BATCH][2];
	struct env_dgram_msg m[ENV_DGRAM_BATCH];
	struct env_dgram_stats st;
	unsigned sent = 0;

	SH_ASSERT_OK(env_addr_parse("127.0.0.1:0", &bind));
	SH_ASSERT_OK(env_dgram_open(env, &bind, &cbs, &a, &a.d));
	SH_ASSERT_OK(env_dgram_open(env, &bind, &scbs, &b, &b.d));
	SH_ASSERT_OK(env_dgram_addr(b.d, &ba));
	for (int round = 0; round < 10; round++) {
		for (unsigned i = 0; i < ENV_DGRAM_BATCH; i++) {
			unsigned idx = sent + i;
			size_t len = i == 63 ? 900 : 1400; /* the last of a group may be shorter */

			fill(bufs[i], idx, len);
			iov[i][0] = (struct iovec){ bufs[i], 100 };
			iov[i][1] = (struct iovec){ bufs[i] + 100, len - 100 };
			m[i] = (struct env_dgram_msg){ .peer = ba, .iov = iov[i], .iovcnt = 2 };
		}
		SH_ASSERT_EQ(env_dgram_send(a.d, m, ENV_DGRAM_BATCH), ENV_DGRAM_BATCH);
		sent += ENV_DGRAM_BATCH;
		for (uint64_t end = sh_clock_mono_ns() + 5 * SH_NSEC_PER_SEC;
		     b.got < sent && sh_clock_mono_ns() < end;)
			SH_ASSERT_OK(env_real_run_once(env, SH_NSEC_PER_MSEC));
	}
	SH_ASSERT_EQ(b.got, sent);
	SH_ASSERT_EQ(b.bad, 0);
	env_dgram_stats(a.d, &st);
	SH_ASSERT_EQ(st.sent, sent);
	printf("%llu datagrams in %llu send calls\n", (unsigned long long)st.sent,
	       (unsigned long long)st.send_calls);
	env_dgram_close(a.d);
	env_dgram_close(b.d);
	env_real_run_once(env, 0);
	env_real_destroy(env);
}

struct closer {
	struct env_dgram *d;
	int calls;
};

static void
close_in_cb(struct env_dgram *d, const struct env_dgram_msg *msgs, unsigned n, void *arg)
{
	struct closer *c = arg;

	(void)msgs;
	(void)n;
	c->calls++;
	env_dgram_close(d);
	c->d = NULL;
}

TEST(udp_close_inside_callback)
{
	static const struct env_dgram_cbs ccbs = { .recv = close_in_cb };
	struct env *env = env_real_create(NULL);
	struct closer c = { 0 };
	struct peer s = { 0 };
	struct env_addr bind, dst;
	unsigned char x[8] = "12345678";
	struct iovec iov = { x, sizeof(x) };
	struct env_dgram_msg m[ENV_DGRAM_BATCH];

	SH_ASSERT_OK(env_addr_parse("127.0.0.1:0", &bind));
	SH_ASSERT_OK(env_dgram_open(env, &bind, &ccbs, &c, &c.d));
	SH_ASSERT_OK(env_dgram_open(env, &bind, &cbs, &s, &s.d));
	SH_ASSERT_OK(env_dgram_addr(c.d, &dst));
	for (int i = 0; i < ENV_DGRAM_BATCH; i++)
		m[i] = (struct env_dgram_msg){ .peer = dst, .iov = &iov, .iovcnt = 1 };
	SH_ASSERT_EQ(env_dgram_send(s.d, m, ENV_DGRAM_BATCH), ENV_DGRAM_BATCH);
	for (int i = 0; i < 50 && c.calls == 0; i++)
		SH_ASSERT_OK(env_real_run_once(env, 5 * SH_NSEC_PER_MSEC));
	SH_ASSERT_EQ(c.calls, 1);
	SH_ASSERT_OK(env_real_run_once(env, 5 * SH_NSEC_PER_MSEC));
	SH_ASSERT_EQ(c.calls, 1);
	env_dgram_close(s.d);
	env_real_run_once(env, 0);
	env_real_destroy(env);
}

/* The endpoint's interface MTU, less IP and UDP: lo's for its addresses, unknown for the wildcard.
 */
TEST(udp_endpoint_knows_its_interface_mtu)
{
	struct env *env = env_real_create(NULL);
	struct peer a = { 0 };
	struct env_addr bind;
	unsigned lo = 0;
	FILE *f = fopen("/sys/class/net/lo/mtu", "r");

	SH_ASSERT_NOT_NULL(f);
	SH_ASSERT_EQ(fscanf(f, "%u", &lo), 1);
	fclose(f);
	SH_ASSERT_GT(lo, 1500);
	{
		static const struct {
			const char *addr;
			uint32_t want;
		} cases[] = {
			{ "127.0.0.1:0", 0 }, /* lo's MTU less 28 (set below) */
			{ "[::1]:0", 1 },     /* less 48 */
			{ "0.0.0.0:0", 2 },   /* every address: not known */
			{ "127.0.0.2:0", 2 }, /* lo's only through its /8: not known */
		};

		for (size_t i = 0; i < SH_ARRAY_SIZE(cases); i++) {
			uint32_t want =
			    cases[i].want == 0	 ? SH_MIN(lo - 28, (unsigned)ENV_DGRAM_MAX)
			    : cases[i].want == 1 ? SH_MIN(lo - 48, (unsigned)ENV_DGRAM_MAX)
						 : 0;

			SH_ASSERT_OK(env_addr_parse(cases[i].addr, &bind));
			if (env_dgram_open(env, &bind, &cbs, &a, &a.d) < 0) {
				SH_ASSERT_EQ(bind.family, AF_INET6); /* a host without IPv6 */
				continue;
			}
			SH_ASSERT_MSG(env_dgram_mtu(a.d) == want, "%s: %u, not %u", cases[i].addr,
				      env_dgram_mtu(a.d), want);
			env_dgram_close(a.d);
			env_real_run_once(env, 0);
		}
	}
	env_real_destroy(env);
}
