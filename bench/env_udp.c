// SPDX-License-Identifier: Apache-2.0
/*
 * bench/env_udp: datagrams per second through the real env on loopback
 * (sendmmsg/recvmmsg in batches of 64, epoll loop), against the baseline of
 * plain UDP sockets with one sendto()/recvfrom() per datagram, both single
 * threaded in this process: a burst of 64 is sent, then drained.
 * Ends with: BENCH env_udp {...}
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../src/env/env_real.h"

#define BURST  64
#define ROUNDS 4000

static double
plain_udp(size_t size)
{
	int a = socket(AF_INET, SOCK_DGRAM, 0), b = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sa);
	static char buf[65536];
	int big = 8 << 20;
	uint64_t t0, got = 0;

	setsockopt(b, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof(big));
	bind(b, (struct sockaddr *)&sa, sizeof(sa));
	getsockname(b, (struct sockaddr *)&sa, &sl);
	t0 = sh_clock_mono_ns();
	for (int r = 0; r < ROUNDS; r++) {
		for (int i = 0; i < BURST; i++)
			sendto(a, buf, size, 0, (struct sockaddr *)&sa, sizeof(sa));
		for (int i = 0; i < BURST; i++)
			if (recv(b, buf, sizeof(buf), MSG_DONTWAIT) > 0)
				got++;
	}
	close(a);
	close(b);
	return (double)got * 1e9 / (double)(sh_clock_mono_ns() - t0);
}

struct side {
	uint64_t got;
};

static void
on_recv(struct env_dgram *d, const struct env_dgram_msg *msgs, unsigned n, void *arg)
{
	(void)d;
	(void)msgs;
	((struct side *)arg)->got += n;
}

static double
env_udp(size_t size)
{
	static const struct env_dgram_cbs cbs = { .recv = on_recv };
	struct env *env = env_real_create(NULL);
	struct env_dgram *a, *b;
	struct side sa = { 0 }, sb = { 0 };
	struct env_addr bind, dst;
	static char buf[65536];
	struct iovec iov = { buf, size };
	struct env_dgram_msg m[BURST];
	uint64_t t0;

	env_addr_parse("127.0.0.1:0", &bind);
	env_dgram_open(env, &bind, &cbs, &sa, &a);
	env_dgram_open(env, &bind, &cbs, &sb, &b);
	env_dgram_addr(b, &dst);
	for (int i = 0; i < BURST; i++)
		m[i] = (struct env_dgram_msg){ .peer = dst, .iov = &iov, .iovcnt = 1 };
	t0 = sh_clock_mono_ns();
	for (int r = 0; r < ROUNDS; r++) {
		env_dgram_send(a, m, BURST);
		env_real_run_once(env, 0);
	}
	env_real_run_once(env, 0);
	double rate = (double)sb.got * 1e9 / (double)(sh_clock_mono_ns() - t0);

	env_dgram_close(a);
	env_dgram_close(b);
	env_real_run_once(env, 0);
	env_real_destroy(env);
	return rate;
}

int
main(void)
{
	static const size_t sizes[] = { 64, 1024, 8192 };
	double ratio1k = 0, env1k = 0, plain1k = 0;

	printf("%8s %16s %16s %8s\n", "size", "plain UDP msg/s", "env msg/s", "ratio");
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		double p = plain_udp(sizes[i]), e = env_udp(sizes[i]);

		printf("%8zu %16.0f %16.0f %8.2f\n", sizes[i], p, e, e / p);
		if (sizes[i] == 1024) {
			plain1k = p;
			env1k = e;
			ratio1k = e / p;
		}
	}
	printf("BENCH env_udp {\"size\":1024,\"burst\":%d,\"env_msgs_per_s\":%.0f,"
	       "\"plain_msgs_per_s\":%.0f,\"ratio\":%.2f}\n",
	       BURST, env1k, plain1k, ratio1k);
	return 0;
}
