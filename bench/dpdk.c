// SPDX-License-Identifier: Apache-2.0
/*
 * bench/dpdk: Shoal's RPC over the DPDK transport against the same RPC
 * over kernel UDP, in one run (issue #28). Two processes each time, a
 * server and a client (forked: an EAL starts once per process):
 *
 *   DPDK   net_memif between the two (no NIC here: the kernel is out of
 *          the path, as it is with a NIC), --no-huge
 *   UDP    kernel sockets on loopback (UDP mode)
 *
 *   latency  64-byte echoes one at a time, both ends busy-polling
 *            (performance-optimized): p50 and p99
 *   stream   1 MiB messages one way (zero-copy calls), 8 in flight, both
 *            ends busy-polling: MB/s
 *   cpu      the same stream event-driven (CPU-optimized: DPDK sleeps
 *            adaptively, UDP in epoll): CPU seconds of both processes per
 *            GiB moved, from /proc/PID/stat
 *
 * Ends with: BENCH dpdk {"rpc_p50_vs_udp":R,"stream_vs_udp":R,"cpu_per_gib_vs_udp":R}
 * Usage: dpdk [seconds per measurement, default 2]. Needs root (the EAL);
 * without it, or without DPDK in the build, it says why and exits 2.
 */
#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../src/dpdk/dpdk.h"
#include "../src/env/env_real.h"
#include "../src/net/net.h"

#define SRV_IP "10.77.0.1"
#define CLI_IP "10.77.0.2"

/* both transports carry the same datagrams: what an Ethernet frame of 1500 bytes holds */
#define MTU_PAYLOAD (1500 - 28)

enum kind { UDP, DPDK };
enum what { LATENCY, STREAM, CPU };

static double secs = 2.0;
static char sock_path[PATH_MAX];

struct result {
	int rc; /* 0, or 2: the EAL did not start */
	double p50_us, p99_us, mbs, cpu_s, gib;
};

static int
write_full(int fd, const void *b, size_t len)
{
	for (size_t done = 0; done < len;) {
		ssize_t n = write(fd, (const char *)b + done, len - done);

		if (n <= 0)
			return -1;
		done += (size_t)n;
	}
	return 0;
}

static int
read_full(int fd, void *b, size_t len)
{
	for (size_t done = 0; done < len;) {
		ssize_t n = read(fd, (char *)b + done, len - done);

		if (n <= 0)
			return -1;
		done += (size_t)n;
	}
	return 0;
}

static struct net *
endpoint(enum kind k, struct env *env, uint64_t id, bool server)
{
	struct net_iface ifc = { 0 };
	struct net_config cfg = { .node_id = id, .ifaces = &ifc, .nifaces = 1 };
	struct net *n;

	if (k == DPDK) {
		char eal[PATH_MAX + 256];

		snprintf(eal, sizeof(eal),
			 "--no-huge -m 256 --no-pci --no-shconf --no-telemetry -l %d "
			 "--log-level=error --vdev=net_memif0,role=%s,socket=%s,socket-abstract=no",
			 server ? 1 : 0, server ? "server" : "client", sock_path);
		if (sh_dpdk_init(eal, 1) < 0)
			return NULL;
		env_addr_parse(server ? SRV_IP ":7000" : CLI_IP ":7000", &ifc.addr);
		snprintf(ifc.transport, sizeof(ifc.transport), "dpdk");
		snprintf(ifc.dev, sizeof(ifc.dev), "net_memif0");
	} else {
		env_addr_parse("127.0.0.1:0", &ifc.addr);
	}
	ifc.mtu = MTU_PAYLOAD;
	if (net_create(env, &cfg, &n) < 0)
		return NULL;
	return n;
}

/* The server: an endpoint that echoes and sinks (the net's own ops), its port to fd. */
static void
server(enum kind k, enum env_real_mode mode, int fd)
{
	struct env_real_opts o = { .mode = mode };
	struct env *env = env_real_create(&o);
	struct net *n = env != NULL ? endpoint(k, env, 1, true) : NULL;
	struct env_addr a;

	if (n == NULL)
		_exit(2);
	net_iface_addr(n, 0, &a);
	if (write_full(fd, &a.port, sizeof(a.port)) < 0)
		_exit(1);
	env_real_run(env);
	_exit(0);
}

struct client {
	struct env *env;
	struct net *net;
	enum env_real_mode mode;
	uint64_t done;
	int inflight;
};

static void
count_cb(void *arg, int status, const struct net_msg *reply)
{
	struct client *c = arg;

	(void)reply;
	if (status < 0) {
		fprintf(stderr, "bench dpdk: call failed: %s\n", sh_strerror(status));
		_exit(1);
	}
	c->done++;
	c->inflight--;
}

static void
turn(struct client *c)
{
	env_real_run_once(c->env, c->mode == ENV_REAL_POLL ? 0 : 100 * SH_NSEC_PER_MSEC);
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* CPU seconds a process has used (all its threads), from /proc. */
static double
proc_cpu(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long ut = 0, st = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (f == NULL)
		return 0;
	if (fgets(buf, sizeof(buf), f) == NULL) {
		fclose(f);
		return 0;
	}
	fclose(f);
	p = strrchr(buf, ')'); /* fields after the command's name: state is the 3rd */
	if (p == NULL ||
	    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
		return 0;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static void
measure(struct client *c, enum what w, pid_t srv, struct result *r)
{
	static char body[1 << 20];
	static uint64_t lat[1 << 21];
	struct iovec iov = { body, 64 };
	struct net_call_opts o = { .timeout_ns = 30 * SH_NSEC_PER_SEC };
	uint64_t t0, end;
	size_t n = 0;

	/* open the session, and let ARP and the first exchanges settle */
	for (int i = 0; i < 100; i++) {
		net_call(c->net, 1, NET_OP_ECHO, &iov, 1, NULL, count_cb, c, NULL);
		c->inflight++;
		while (c->inflight > 0)
			turn(c);
	}
	if (w == LATENCY) {
		end = sh_clock_mono_ns() + (uint64_t)(secs * 1e9);
		while (sh_clock_mono_ns() < end && n < SH_ARRAY_SIZE(lat)) {
			uint64_t s = sh_clock_mono_ns();

			net_call(c->net, 1, NET_OP_ECHO, &iov, 1, NULL, count_cb, c, NULL);
			c->inflight++;
			while (c->inflight > 0)
				turn(c);
			lat[n++] = sh_clock_mono_ns() - s;
		}
		qsort(lat, n, sizeof(*lat), cmp_u64);
		r->p50_us = (double)lat[n / 2] / 1e3;
		r->p99_us = (double)lat[n * 99 / 100] / 1e3;
		return;
	}
	struct sh_buf *b = sh_buf_wrap(body, sizeof(body), NULL, NULL);
	struct sh_iov zc;
	double cpu0 = proc_cpu(getpid()) + proc_cpu(srv);

	memset(body, 0x5a, sizeof(body));
	sh_iov_init(&zc);
	sh_iov_append(&zc, b, 0, sizeof(body)); /* the zero-copy call: the message is not copied */
	sh_buf_put(b);
	c->done = 0;
	t0 = sh_clock_mono_ns();
	end = t0 + (uint64_t)(secs * 1e9);
	while (sh_clock_mono_ns() < end) {
		while (c->inflight < 8) {
			net_call_zc(c->net, 1, NET_OP_SINK, &zc, &o, count_cb, c, NULL);
			c->inflight++;
		}
		turn(c);
	}
	while (c->inflight > 0)
		turn(c);
	double el = (double)(sh_clock_mono_ns() - t0) / 1e9;

	r->mbs = (double)c->done * (1 << 20) / el / 1e6;
	r->gib = (double)c->done / 1024.0;
	r->cpu_s = proc_cpu(getpid()) + proc_cpu(srv) - cpu0;
	sh_iov_fini(&zc);
}

/* One measurement: a server and a client process; the client's result. */
static struct result
run(enum kind k, enum what w)
{
	enum env_real_mode mode = w == CPU ? ENV_REAL_EVENT : ENV_REAL_POLL;
	struct result r = { 0 };
	int sp[2], rp[2];
	uint16_t port;
	pid_t srv, cli;

	snprintf(sock_path, sizeof(sock_path), "/tmp/shoal-bench-dpdk-%d.sock", (int)getpid());
	unlink(sock_path);
	if (pipe(sp) < 0 || pipe(rp) < 0)
		exit(1);
	srv = fork();
	if (srv == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(sp[0]);
		server(k, mode, sp[1]);
	}
	close(sp[1]);
	if (read_full(sp[0], &port, sizeof(port)) < 0) {
		int st;

		waitpid(srv, &st, 0);
		r.rc = WIFEXITED(st) && WEXITSTATUS(st) == 2 ? 2 : 1;
		return r;
	}
	close(sp[0]);
	cli = fork();
	if (cli == 0) {
		struct env_real_opts o = { .mode = mode };
		struct client c = { .mode = mode };
		struct net_iface s = { 0 };

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(rp[0]);
		c.env = env_real_create(&o);
		c.net = c.env != NULL ? endpoint(k, c.env, 2, false) : NULL;
		if (c.net == NULL)
			_exit(2);
		env_addr_parse(k == DPDK ? SRV_IP : "127.0.0.1", &s.addr);
		s.addr.port = port;
		s.mtu = MTU_PAYLOAD;
		net_peer_add(c.net, 1, &s, 1);
		measure(&c, w, srv, &r);
		_exit(write_full(rp[1], &r, sizeof(r)) < 0);
	}
	close(rp[1]);
	if (read_full(rp[0], &r, sizeof(r)) < 0)
		r.rc = 1;
	close(rp[0]);
	waitpid(cli, NULL, 0);
	kill(srv, SIGKILL);
	waitpid(srv, NULL, 0);
	unlink(sock_path);
	return r;
}

int
main(int argc, char **argv)
{
	static const char *names[] = { "UDP (kernel, loopback)", "DPDK (net_memif)" };
	struct result lat[2], str[2], cpu[2];

	mallopt(M_MMAP_THRESHOLD, 512 << 20);
	mallopt(M_TRIM_THRESHOLD, 1 << 30);
	if (argc > 1)
		secs = atof(argv[1]);
	if (secs <= 0)
		secs = 2.0;
	for (int k = UDP; k <= DPDK; k++) {
		lat[k] = run((enum kind)k, LATENCY);
		str[k] = run((enum kind)k, STREAM);
		cpu[k] = run((enum kind)k, CPU);
		if (lat[k].rc == 2 || str[k].rc == 2 || cpu[k].rc == 2) {
			fprintf(stderr, "bench dpdk: the EAL did not start (root, and a build with "
					"DPDK: libdpdk-dev); nothing measured\n");
			return 2;
		}
		if (lat[k].rc || str[k].rc || cpu[k].rc) {
			fprintf(stderr, "bench dpdk: %s failed\n", names[k]);
			return 1;
		}
	}
	printf("64 B RPC, one at a time, busy-polling (us)     p50      p99\n");
	for (int k = UDP; k <= DPDK; k++)
		printf("  %-28s              %7.1f  %7.1f\n", names[k], lat[k].p50_us,
		       lat[k].p99_us);
	printf("1 MiB messages one way, 8 in flight, busy-polling (MB/s)\n");
	for (int k = UDP; k <= DPDK; k++)
		printf("  %-28s              %7.0f\n", names[k], str[k].mbs);
	printf("the same stream event-driven: MB/s, CPU s per GiB (both processes)\n");
	for (int k = UDP; k <= DPDK; k++)
		printf("  %-28s              %7.0f  %7.2f\n", names[k], cpu[k].mbs,
		       cpu[k].cpu_s / cpu[k].gib);
	printf("BENCH dpdk {\"rpc_p50_vs_udp\":%.2f,\"stream_vs_udp\":%.2f,"
	       "\"cpu_per_gib_vs_udp\":%.2f}\n",
	       lat[DPDK].p50_us / lat[UDP].p50_us, str[DPDK].mbs / str[UDP].mbs,
	       (cpu[DPDK].cpu_s / cpu[DPDK].gib) / (cpu[UDP].cpu_s / cpu[UDP].gib));
	return 0;
}
