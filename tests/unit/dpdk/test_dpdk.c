// SPDX-License-Identifier: Apache-2.0
/*
 * The DPDK transport (src/dpdk, docs/dpdk.md) between two processes over
 * net_memif (no NIC, no hugepages, the kernel out of the path): each
 * process starts its own EAL in a child of the test runner (an EAL starts
 * once per process), opens a net endpoint on its memif port and its own
 * address, and the client's RPCs (echoes of 1 byte to 200 KiB, fragmented
 * to the port's MTU and reassembled, many in flight) come back byte for
 * byte; the ports resolved each other by ARP and the server's ARP table
 * names the client. Skipped, with the EAL's reason, where it cannot start
 * (not root, no DPDK in the build).
 */
#define _GNU_SOURCE /* unshare */
#include <errno.h>
#include <sched.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../../src/base/base.h"
#include "../../../src/dpdk/dpdk.h"
#include "../../../src/env/env_real.h"
#include "../../../src/net/net.h"
#include "../../lib/test.h"

#define SKIP_CODE 77
#define SRV_IP	  "10.77.0.1"
#define CLI_IP	  "10.77.0.2"

static int
eal(const char *role, const char *sock, unsigned lcore)
{
	char args[PATH_MAX + 512];

	snprintf(args, sizeof(args),
		 "--no-huge -m 128 --no-pci --no-shconf --no-telemetry -l %u --log-level=error "
		 "--vdev=net_memif0,role=%s,socket=%s,socket-abstract=no",
		 lcore, role, sock);
	return sh_dpdk_init(args, 1);
}

static struct net *
endpoint_dev(struct env *env, uint64_t id, const char *ip, const char *dev)
{
	struct net_iface ifc = { 0 };
	struct net_config cfg = { .node_id = id, .ifaces = &ifc, .nifaces = 1 };
	struct net *n = NULL;
	char addr[64];

	snprintf(addr, sizeof(addr), "%s:7000", ip);
	env_addr_parse(addr, &ifc.addr);
	snprintf(ifc.transport, sizeof(ifc.transport), "dpdk");
	snprintf(ifc.dev, sizeof(ifc.dev), "%s", dev);
	if (net_create(env, &cfg, &n) < 0)
		return NULL;
	return n;
}

static struct net *
endpoint(struct env *env, uint64_t id, const char *ip)
{
	return endpoint_dev(env, id, ip, "net_memif0");
}

static void
server(const char *sock, int ready_fd)
{
	struct env *env;
	struct net *n;
	char ok = 1;

	if (eal("server", sock, 0) < 0)
		_exit(SKIP_CODE);
	env = env_real_create(NULL);
	n = env != NULL ? endpoint(env, 1, SRV_IP) : NULL;
	if (n == NULL)
		_exit(2);
	if (write(ready_fd, &ok, 1) != 1)
		_exit(2);
	env_real_run(env);
	_exit(0);
}

struct echo {
	unsigned done, bad, failed;
	const uint8_t *want;
	size_t len;
};

static void
on_echo(void *arg, int status, const struct net_msg *reply)
{
	struct echo *e = arg;

	e->done++;
	if (status < 0) {
		fprintf(stderr, "echo of %zu bytes: %s\n", e->len, sh_strerror(status));
		e->failed++;
		return;
	}
	if (reply->len != e->len ||
	    memcmp((const uint8_t *)reply->buf->data + reply->off, e->want, e->len) != 0)
		e->bad++;
}

/* The client's checks; its exit status: 0, 1 (a check failed), SKIP_CODE. */
static int
client(const char *sock)
{
	static uint8_t body[200 << 10];
	static const size_t sizes[] = { 1, 64, 1000, 1400, 1500, 4096, 9000, 65536, 200 << 10 };
	struct net_path_stats ps;
	struct echo e[64] = { 0 };
	struct net_iface srv = { 0 };
	struct sh_dpdk_stats st;
	struct sh_arp_entry arp[8];
	struct env *env;
	struct net *n;
	unsigned narp = 0;
	uint64_t end;

	if (eal("client", sock, 1) < 0)
		return SKIP_CODE;
	env = env_real_create(NULL);
	n = env != NULL ? endpoint(env, 2, CLI_IP) : NULL;
	if (n == NULL)
		return 1;
	env_addr_parse(SRV_IP ":7000", &srv.addr);
	net_peer_add(n, 1, &srv, 1);
	for (size_t i = 0; i < sizeof(body); i++)
		body[i] = (uint8_t)(i * 131 + 7);
	/* every size alone, then 64 at once (one burst of calls in flight) */
	for (size_t s = 0; s < SH_ARRAY_SIZE(sizes); s++) {
		struct iovec iov = { body, sizes[s] };

		e[0] = (struct echo){ .want = body, .len = sizes[s] };
		net_call(n, 1, NET_OP_ECHO, &iov, 1, NULL, on_echo, &e[0], NULL);
		end = sh_clock_mono_ns() + 20 * SH_NSEC_PER_SEC;
		while (e[0].done == 0 && sh_clock_mono_ns() < end)
			env_real_run_once(env, SH_NSEC_PER_MSEC);
		if (e[0].done == 0 || e[0].bad || e[0].failed) {
			fprintf(stderr, "echo of %zu bytes: done %u bad %u failed %u\n", sizes[s],
				e[0].done, e[0].bad, e[0].failed);
			return 1;
		}
	}
	for (unsigned i = 0; i < 64; i++) {
		struct iovec iov = { body + i, 3000 + i * 997 };

		e[i] = (struct echo){ .want = body + i, .len = iov.iov_len };
		net_call(n, 1, NET_OP_ECHO, &iov, 1, NULL, on_echo, &e[i], NULL);
	}
	end = sh_clock_mono_ns() + 30 * SH_NSEC_PER_SEC;
	for (unsigned i = 0; i < 64; i++)
		while (e[i].done == 0 && sh_clock_mono_ns() < end)
			env_real_run_once(env, SH_NSEC_PER_MSEC);
	for (unsigned i = 0; i < 64; i++)
		if (e[i].done == 0 || e[i].bad || e[i].failed) {
			fprintf(stderr, "echo %u in flight: done %u bad %u failed %u\n", i,
				e[i].done, e[i].bad, e[i].failed);
			return 1;
		}
	/* the client's port learned the server's MAC by ARP, and nothing was malformed */
	if (sh_dpdk_port_stats("net_memif0", &st, arp, SH_ARRAY_SIZE(arp), &narp) < 0 ||
	    narp != 1 || !arp[0].resolved || st.rx_bad != 0 || st.arp_out == 0) {
		fprintf(stderr, "arp entries %u, rx_bad %llu, arp_out %llu\n", narp,
			(unsigned long long)st.rx_bad, (unsigned long long)st.arp_out);
		return 1;
	}
	/* the echoes' bytes went from the messages' buffers, uncopied (memif takes chained
	 * mbufs, and the EAL runs IOVA as VA without hugepages): most of the 2 MiB sent */
	if (st.tx_zc_bytes < (1u << 20)) {
		fprintf(stderr, "only %llu bytes sent in place\n",
			(unsigned long long)st.tx_zc_bytes);
		return 1;
	}
	/* the datagrams to the server as large as both ports take (memif's MTU is 1,500) */
	if (net_peer_paths(n, 1, &ps, 1) != 1 || ps.mtu != 1500 - 28) {
		fprintf(stderr, "the path to the server sends %u-byte datagrams, not 1472\n",
			ps.mtu);
		return 1;
	}
	net_destroy(n);
	env_real_destroy(env);
	return 0;
}

TEST(dpdk_rpc_between_two_processes_over_memif)
{
	char sock[PATH_MAX + 16], dir[PATH_MAX];
	int pfd[2], status;
	pid_t srv, cli;
	char ok;

	SH_ASSERT_NOT_NULL(realpath(sh_test_dir(), dir)); /* memif wants a directory that exists */
	snprintf(sock, sizeof(sock), "%s/memif.sock", dir);
	SH_ASSERT_OK(pipe(pfd));
	srv = fork();
	SH_ASSERT(srv >= 0);
	if (srv == 0) {
		close(pfd[0]);
		server(sock, pfd[1]);
	}
	close(pfd[1]);
	if (read(pfd[0], &ok, 1) != 1) {
		close(pfd[0]);
		waitpid(srv, &status, 0);
		if (WIFEXITED(status) && WEXITSTATUS(status) == SKIP_CODE)
			sh_test_skip("the EAL does not start here (see its error above)");
		SH_ASSERT_MSG(0, "the server did not start (status %d)", status);
	}
	close(pfd[0]);
	cli = fork();
	SH_ASSERT(cli >= 0);
	if (cli == 0)
		_exit(client(sock));
	SH_ASSERT_EQ(waitpid(cli, &status, 0), cli);
	kill(srv, SIGKILL);
	waitpid(srv, NULL, 0);
	SH_ASSERT(WIFEXITED(status));
	if (WEXITSTATUS(status) == SKIP_CODE)
		sh_test_skip("the EAL does not start here (see its error above)");
	SH_ASSERT_EQ(WEXITSTATUS(status), 0);
}

/*
 * A DPDK port and the kernel's UDP on one link: net_tap in a network
 * namespace of the test's own (unshare), the DPDK endpoint on 10.88.0.1
 * (its own ARP table), a kernel-UDP endpoint on the tap's kernel side
 * 10.88.0.2 in a process forked from it. The kernel client's echoes come
 * back, and the tap's queue wakes the DPDK loop by its RX interrupt (CPU-
 * optimized mode sleeps on it once idle).
 */
/* want: the datagrams it should send to the port, the smaller of the two ends' */
static int
udp_client(unsigned want)
{
	static uint8_t body[100 << 10];
	struct net_path_stats ps;
	struct net_iface ifc = { 0 }, srv = { 0 };
	struct net_config cfg = { .node_id = 2, .ifaces = &ifc, .nifaces = 1 };
	struct env *env = env_real_create(NULL);
	struct net *n;

	env_addr_parse("10.88.0.2:7000", &ifc.addr);
	if (env == NULL || net_create(env, &cfg, &n) < 0)
		return 1;
	env_addr_parse("10.88.0.1:7000", &srv.addr);
	net_peer_add(n, 1, &srv, 1);
	for (size_t i = 0; i < sizeof(body); i++)
		body[i] = (uint8_t)(i * 13 + 1);
	for (int round = 0; round < 6; round++) {
		struct echo e = { .want = body, .len = round % 2 ? sizeof(body) : 100 };
		struct iovec iov = { body, e.len };
		uint64_t end = sh_clock_mono_ns() + 20 * SH_NSEC_PER_SEC;

		net_call(n, 1, NET_OP_ECHO, &iov, 1, NULL, on_echo, &e, NULL);
		while (e.done == 0 && sh_clock_mono_ns() < end)
			env_real_run_once(env, SH_NSEC_PER_MSEC);
		if (e.done == 0 || e.bad || e.failed)
			return 1;
		usleep(100 * 1000); /* idle: the DPDK side's loop goes to sleep on its queue */
	}
	/* its datagrams to the port: as large as the tap's kernel side and the port both take */
	if (net_peer_paths(n, 1, &ps, 1) != 1 || ps.mtu != want) {
		fprintf(stderr, "the kernel side sends %u-byte datagrams, not %u\n", ps.mtu, want);
		return 3;
	}
	return 0;
}

/*
 * The link: a tap (net_tap makes it; its kernel side addressed once the
 * EAL is up), or a veth pair made first, the port on one end through
 * net_pcap (frames of up to 64 KiB) and the kernel on the other,
 * without the transmit checksum offload a veth never performs
 * (docs/dpdk.md).
 */
static void
tap_side(int res_fd, unsigned port_mtu, unsigned kernel_mtu, bool veth)
{
	unsigned want = SH_MIN(port_mtu, kernel_mtu) - 28;
	struct net_path_stats path;
	const char *dev = veth ? "net_pcap0" : "net_tap0";
	char cmd[512], eal_args[256];
	char st[2] = { 1, 0 };
	struct sh_dpdk_stats ps;
	struct sh_arp_entry arp[4];
	struct env *env;
	struct net *n;
	unsigned narp;
	pid_t cli;
	int status;

	snprintf(eal_args, sizeof(eal_args),
		 "--no-huge -m 128 --no-pci --no-shconf --no-telemetry -l 0 --log-level=error "
		 "--vdev=%s",
		 veth ? "net_pcap0,iface=shdv0" : "net_tap0,iface=shdtap0");
	snprintf(cmd, sizeof(cmd),
		 "ip link add shdv0 type veth peer name shdv1 && ip link set shdv0 mtu %u up && "
		 "ip link set shdv1 mtu %u up && ethtool -K shdv1 tx off >/dev/null",
		 port_mtu, kernel_mtu);
	if (unshare(CLONE_NEWNET) < 0 || (veth && system(cmd) != 0) ||
	    sh_dpdk_set_mtu(port_mtu == 1500 ? 0 : port_mtu) < 0 || sh_dpdk_init(eal_args, 1) < 0)
		_exit(SKIP_CODE);
	env = env_real_create(NULL);
	n = env != NULL ? endpoint_dev(env, 1, "10.88.0.1", dev) : NULL;
	snprintf(cmd, sizeof(cmd),
		 "ip link set lo up && ip addr add 10.88.0.2/24 dev %s && ip link set %s mtu %u up",
		 veth ? "shdv1" : "shdtap0", veth ? "shdv1" : "shdtap0", kernel_mtu);
	if (n == NULL || system(cmd) != 0)
		_exit(2);
	cli = fork();
	if (cli == 0)
		_exit(udp_client(want)); /* the kernel's UDP, in this namespace; no DPDK call */
	while (waitpid(cli, &status, WNOHANG) == 0)
		env_real_run_once(env, 10 * SH_NSEC_PER_MSEC);
	st[0] = WIFEXITED(status) ? (char)WEXITSTATUS(status) : 1;
	/* and the port to the client: what the client said of its interface */
	if (st[0] == 0 && (net_peer_paths(n, 2, &path, 1) != 1 || path.mtu != want)) {
		fprintf(stderr, "the port sends %u-byte datagrams, not %u\n", path.mtu, want);
		st[0] = 4;
	}
	if (sh_dpdk_port_stats(dev, &ps, arp, SH_ARRAY_SIZE(arp), &narp) == 0) {
		st[1] = (char)ps.rx_intr;
		if (st[0] != 0)
			fprintf(stderr,
				"%s: rx %llu tx %llu bad %llu other %llu unresolved %llu arp "
				"in %llu out %llu, %u entries\n",
				dev, (unsigned long long)ps.rx_frames,
				(unsigned long long)ps.tx_frames, (unsigned long long)ps.rx_bad,
				(unsigned long long)ps.rx_other,
				(unsigned long long)ps.tx_unresolved, (unsigned long long)ps.arp_in,
				(unsigned long long)ps.arp_out, narp);
	}
	if (write(res_fd, st, 2) != 2)
		_exit(2);
	_exit(0);
}

static void
tap_pair(unsigned port_mtu, unsigned kernel_mtu, bool veth)
{
	int pfd[2], status;
	char st[2];
	pid_t pid;

	if (geteuid() != 0)
		sh_test_skip("not root (a network namespace and a tap)");
	SH_ASSERT_OK(pipe(pfd));
	pid = fork();
	SH_ASSERT(pid >= 0);
	if (pid == 0) {
		close(pfd[0]);
		tap_side(pfd[1], port_mtu, kernel_mtu, veth);
	}
	close(pfd[1]);
	ssize_t got = read(pfd[0], st, 2);

	close(pfd[0]);
	SH_ASSERT_EQ(waitpid(pid, &status, 0), pid);
	if (got != 2 && WIFEXITED(status) && WEXITSTATUS(status) == SKIP_CODE)
		sh_test_skip("no namespace or the EAL does not start here (see above)");
	SH_ASSERT_EQ(got, 2);
	SH_ASSERT_MSG(st[0] == 0, "the kernel-UDP client's echoes failed (%d)", st[0]);
	SH_ASSERT_MSG(veth || st[1] == 1, "net_tap has RX interrupts: the port did not take them");
}

TEST(dpdk_port_and_kernel_udp_on_one_link_with_rx_interrupts)
{
	tap_pair(1500, 1500, false);
}

/*
 * Jumbo frames on a veth pair (in DPDK 22.11 net_tap, net_memif and
 * net_af_packet take 1,500 bytes at most; net_pcap 64 KiB): the port at an MTU of 9000 and the
 * kernel's end too. The kernel- UDP endpoint reads its interface's MTU, the port says its own in
 * its answers: 8,972-byte datagrams each way.
 */
TEST(dpdk_jumbo_frames_between_a_port_and_kernel_udp)
{
	tap_pair(9000, 9000, true);
}

/*
 * A jumbo port and a kernel end at 1,500 (a veth drops what is larger than
 * its MTU, as a NIC does): the kernel end says 1,472 in its HELLO, and the
 * port sends it nothing larger.
 */
TEST(dpdk_a_jumbo_port_sends_a_standard_kernel_end_what_it_takes)
{
	tap_pair(9000, 1500, true);
}
