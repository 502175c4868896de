// SPDX-License-Identifier: Apache-2.0
/*
 * shoal-envcheck: shows, on this machine, what Shoal has so far. Checks UDP
 * datagrams on loopback (round trips and a batched stream), an io_uring
 * O_DIRECT write/fsync/read-back of a drive file, the simulator's
 * reproducibility, RPCs between two data-network endpoints, and a drive
 * target (format, durable appends, reads, reopen), printing what it
 * measured. Exit status 0 when everything works, 1 with the reason otherwise.
 * Usage: shoal-envcheck [DIR]   (DIR holds the test drive file; default ./run)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../env/env_real.h"
#include "../../env/env_sim.h"
#include "../../net/net.h"
#include "../../store/store.h"

#define PINGS	   2000
#define STREAM	   200000
#define DISK_BYTES (64u << 20)
#define DISK_IO	   (128u << 10)

struct udp_side {
	struct env_dgram *d;
	struct env_addr peer;
	uint64_t got;
	bool echo;
};

static void
udp_recv(struct env_dgram *d, const struct env_dgram_msg *msgs, unsigned n, void *arg)
{
	struct udp_side *s = arg;

	s->got += n;
	if (!s->echo)
		return;
	for (unsigned i = 0; i < n; i++) {
		struct env_dgram_msg m = msgs[i];

		m.iov[0].iov_len = m.len;
		env_dgram_send(d, &m, 1);
	}
}

static const struct env_dgram_cbs udp_cbs = { .recv = udp_recv };

static int
fail(const char *what, int rc)
{
	fprintf(stderr, "envcheck: %s: %s (%s)\n", what, sh_strerror(rc), sh_errname(rc));
	return 1;
}

static int
check_udp(void)
{
	struct env *env = env_real_create(NULL);
	struct udp_side a = { 0 }, b = { .echo = true };
	struct env_addr bind, ba;
	unsigned char buf[ENV_DGRAM_BATCH][1024];
	struct iovec iov[ENV_DGRAM_BATCH];
	struct env_dgram_msg m[ENV_DGRAM_BATCH];
	uint64_t t0, t1, sent = 0;
	int rc;

	if (env == NULL)
		return fail("event loop", -errno);
	env_addr_parse("127.0.0.1:0", &bind);
	rc = env_dgram_open(env, &bind, &udp_cbs, &a, &a.d);
	if (rc == 0)
		rc = env_dgram_open(env, &bind, &udp_cbs, &b, &b.d);
	if (rc < 0)
		return fail("UDP bind on 127.0.0.1", rc);
	env_dgram_addr(b.d, &ba);
	memset(buf, 0x5a, sizeof(buf));
	for (int i = 0; i < ENV_DGRAM_BATCH; i++) {
		iov[i] = (struct iovec){ buf[i], 64 };
		m[i] = (struct env_dgram_msg){ .peer = ba, .iov = &iov[i], .iovcnt = 1 };
	}
	t0 = sh_clock_mono_ns();
	for (int i = 0; i < PINGS; i++) {
		uint64_t want = a.got + 1, end = sh_clock_mono_ns() + SH_NSEC_PER_SEC;

		env_dgram_send(a.d, m, 1);
		while (a.got < want && sh_clock_mono_ns() < end)
			env_real_run_once(env, SH_NSEC_PER_MSEC);
		if (a.got < want)
			return fail("UDP round trip on loopback", -ETIMEDOUT);
	}
	t1 = sh_clock_mono_ns();
	printf("env: UDP loopback round trip %.1f us (%d pings, event-driven loop)\n",
	       (double)(t1 - t0) / PINGS / 1000.0, PINGS);

	b.echo = false;
	b.got = 0;
	for (int i = 0; i < ENV_DGRAM_BATCH; i++)
		iov[i].iov_len = sizeof(buf[i]);
	t0 = sh_clock_mono_ns();
	while (sent < STREAM) {
		rc = env_dgram_send(a.d, m, ENV_DGRAM_BATCH);
		if (rc < 0)
			return fail("UDP batched send", rc);
		sent += (unsigned)rc;
		env_real_run_once(env, 0);
	}
	for (uint64_t end = sh_clock_mono_ns() + 200 * SH_NSEC_PER_MSEC;
	     b.got < sent && sh_clock_mono_ns() < end;)
		env_real_run_once(env, SH_NSEC_PER_MSEC);
	t1 = sh_clock_mono_ns();
	printf("env: UDP batched stream %.0f datagrams/s of 1 KiB (%.0f MB/s), %.1f%% arrived\n",
	       (double)b.got * 1e9 / (double)(t1 - t0),
	       (double)b.got * 1024 / ((double)(t1 - t0) / 1e9) / 1e6,
	       100.0 * (double)b.got / (double)sent);
	env_dgram_close(a.d);
	env_dgram_close(b.d);
	env_real_run_once(env, 0);
	env_real_destroy(env);
	return 0;
}

struct disk_io {
	struct env_disk_req r;
	struct iovec iov;
	int result;
	bool busy;
	int *pending;
};

static void
disk_cb(struct env_disk_req *r, int result)
{
	struct disk_io *io = sh_container_of(r, struct disk_io, r);

	io->result = result;
	io->busy = false;
	(*io->pending)--;
}

static int
disk_pass(struct env *env, struct env_disk *d, enum env_disk_op op, unsigned char *buf)
{
	enum { QD = 16 };
	struct disk_io io[QD];
	int pending = 0;
	uint64_t off = 0;

	memset(io, 0, sizeof(io));
	while (off < DISK_BYTES || pending > 0) {
		for (int slot = 0; slot < QD && off < DISK_BYTES; slot++) {
			struct disk_io *x = &io[slot];
			int rc;

			if (x->busy)
				continue;
			x->busy = true;
			x->iov = (struct iovec){ buf + off, DISK_IO };
			x->r = (struct env_disk_req){
				.op = op, .off = off, .iov = &x->iov, .iovcnt = 1, .cb = disk_cb
			};
			x->pending = &pending;
			rc = env_disk_submit(d, &x->r);
			if (rc < 0)
				return rc;
			pending++;
			off += DISK_IO;
		}
		env_real_run_once(env, 10 * SH_NSEC_PER_MSEC);
		for (int i = 0; i < QD; i++)
			if (io[i].result < 0)
				return io[i].result;
	}
	return 0;
}

static int
check_disk(const char *dir)
{
	struct env *env = env_real_create(NULL);
	struct env_disk *d;
	char path[4096];
	unsigned char *w = sh_aligned_alloc(4096, DISK_BYTES),
		      *r = sh_aligned_alloc(4096, DISK_BYTES);
	struct disk_io fs = { 0 };
	int pending = 1, rc;
	uint64_t t0, t1, t2;
	struct sh_rand rng;

	if (env == NULL || w == NULL || r == NULL)
		return fail("disk check set-up", -ENOMEM);
	mkdir(dir, 0755);
	snprintf(path, sizeof(path), "%s/envcheck.drive", dir);
	rc = env_disk_open(env, path, ENV_DISK_CREATE | ENV_DISK_DIRECT, DISK_BYTES, &d);
	if (rc < 0)
		return fail(path, rc);
	sh_rand_seed(&rng, 1);
	sh_rand_fill(&rng, w, DISK_BYTES);
	t0 = sh_clock_mono_ns();
	rc = disk_pass(env, d, ENV_DISK_WRITE, w);
	if (rc < 0)
		return fail("O_DIRECT write", rc);
	fs.r = (struct env_disk_req){ .op = ENV_DISK_FSYNC, .cb = disk_cb };
	fs.pending = &pending;
	rc = env_disk_submit(d, &fs.r);
	while (rc == 0 && pending > 0)
		env_real_run_once(env, 10 * SH_NSEC_PER_MSEC);
	if (rc < 0 || fs.result < 0)
		return fail("fsync", rc < 0 ? rc : fs.result);
	t1 = sh_clock_mono_ns();
	rc = disk_pass(env, d, ENV_DISK_READ, r);
	if (rc < 0)
		return fail("O_DIRECT read", rc);
	t2 = sh_clock_mono_ns();
	if (memcmp(w, r, DISK_BYTES) != 0) {
		fprintf(stderr, "envcheck: data read back differs from data written in %s\n", path);
		return 1;
	}
	printf("env: io_uring O_DIRECT on %s: wrote %u MiB at %.0f MB/s (with fsync), "
	       "read back at %.0f MB/s, identical\n",
	       path, DISK_BYTES >> 20, DISK_BYTES / ((double)(t1 - t0) / 1e9) / 1e6,
	       DISK_BYTES / ((double)(t2 - t1) / 1e9) / 1e6);
	env_disk_close(d);
	env_real_run_once(env, 0);
	env_real_destroy(env);
	unlink(path);
	sh_free(w);
	sh_free(r);
	return 0;
}

struct simhost {
	struct env_dgram *d;
	struct env_timer t;
	struct env_addr next;
};

static void
sim_recv(struct env_dgram *d, const struct env_dgram_msg *msgs, unsigned n, void *arg)
{
	(void)d;
	(void)msgs;
	(void)n;
	(void)arg;
}

static void
sim_tick(struct env_timer *t)
{
	struct simhost *h = t->arg;
	char x[256];
	struct iovec iov = { x, sizeof(x) };
	struct env_dgram_msg m = { .peer = h->next, .iov = &iov, .iovcnt = 1 };

	env_random(t->ev.env, x, sizeof(x));
	env_dgram_send(h->d, &m, 1);
	env_timer_arm(t, 100 * SH_NSEC_PER_USEC);
}

static uint64_t
sim_run(uint64_t seed, struct sim_stats *st)
{
	static const struct env_dgram_cbs cbs = { .recv = sim_recv };
	struct sim *sim = sim_create(seed);
	struct sim_net_params p = { .lat_min_ns = 10000,
				    .lat_max_ns = 100000,
				    .loss = 0.05,
				    .dup = 0.02,
				    .reorder = 0.05,
				    .reorder_ns = 1000000 };
	struct simhost h[6];
	uint64_t hash;

	sim_net_set(sim, &p);
	for (int i = 0; i < 6; i++) {
		char ip[32], name[16];
		struct sim_node *n;
		struct env_addr a;

		snprintf(ip, sizeof(ip), "127.2.0.%d", i + 1);
		snprintf(name, sizeof(name), "n%d", i);
		n = sim_node_create(sim, name, ip);
		env_addr_parse(ip, &a);
		a.port = 7000;
		env_dgram_open(sim_node_env(n), &a, &cbs, &h[i], &h[i].d);
		snprintf(ip, sizeof(ip), "127.2.0.%d:7000", (i + 1) % 6 + 1);
		env_addr_parse(ip, &h[i].next);
		env_timer_init(sim_node_env(n), &h[i].t, sim_tick, &h[i]);
		env_timer_arm(&h[i].t, 0);
	}
	sim_run_for(sim, SH_NSEC_PER_SEC);
	hash = sim_trace_hash(sim);
	sim_stats(sim, st);
	for (int i = 0; i < 6; i++) {
		env_timer_cancel(&h[i].t);
		env_dgram_close(h[i].d);
	}
	sim_destroy(sim);
	return hash;
}

static int
check_sim(void)
{
	struct sim_stats a, b;
	uint64_t t0 = sh_clock_mono_ns();
	uint64_t h1 = sim_run(42, &a), h2 = sim_run(42, &b);
	uint64_t t1 = sh_clock_mono_ns();

	if (h1 != h2 || a.events != b.events) {
		fprintf(stderr,
			"envcheck: the simulator is not reproducible (%016llx != %016llx)\n",
			(unsigned long long)h1, (unsigned long long)h2);
		return 1;
	}
	printf("env: simulator: 6 nodes, 1 s virtual in %.0f ms real: %llu datagrams sent, "
	       "%llu lost, %llu duplicated, %llu reordered; seed 42 twice -> trace %016llx both "
	       "times\n",
	       (double)(t1 - t0) / 2e6, (unsigned long long)a.dgram_sent,
	       (unsigned long long)a.dgram_lost, (unsigned long long)a.dgram_dup,
	       (unsigned long long)a.dgram_reordered, (unsigned long long)h1);
	return 0;
}

struct rpc_wait {
	int done, status;
	size_t len;
};

static void
rpc_cb(void *arg, int status, const struct net_msg *reply)
{
	struct rpc_wait *w = arg;

	w->done++;
	w->status = status;
	w->len = reply ? reply->len : 0;
}

static int
check_net(void)
{
	struct env *env = env_real_create(NULL);
	struct net_iface a = { 0 }, b = { 0 };
	struct net_config ca = { .node_id = 1, .ifaces = &a, .nifaces = 1 };
	struct net_config cb = { .node_id = 2, .ifaces = &b, .nifaces = 1 };
	struct net *na, *nb;
	static char big[4 << 20];
	struct iovec iov = { big, sizeof(big) };
	struct rpc_wait w = { 0 };
	uint64_t t0, t1;
	int rc;

	env_addr_parse("127.0.0.1:0", &a.addr);
	env_addr_parse("127.0.0.1:0", &b.addr);
	rc = net_create(env, &ca, &na);
	if (rc == 0)
		rc = net_create(env, &cb, &nb);
	if (rc < 0)
		return fail("data network endpoints", rc);
	net_iface_addr(na, 0, &a.addr);
	net_peer_add(nb, 1, &a, 1);
	t0 = sh_clock_mono_ns();
	for (int i = 0; i < 1000; i++) {
		if (net_call(nb, 1, NET_OP_PING, NULL, 0, NULL, rpc_cb, &w, NULL) < 0)
			return fail("RPC", -EIO);
		while (w.done <= i)
			env_real_run_once(env, 10 * SH_NSEC_PER_MSEC);
		if (w.status < 0)
			return fail("RPC ping", w.status);
	}
	t1 = sh_clock_mono_ns();
	memset(big, 0x5a, sizeof(big));
	w.done = 0;
	if (net_call(nb, 1, NET_OP_ECHO, &iov, 1, NULL, rpc_cb, &w, NULL) < 0)
		return fail("RPC", -EIO);
	while (w.done == 0)
		env_real_run_once(env, 10 * SH_NSEC_PER_MSEC);
	if (w.status < 0 || w.len != sizeof(big))
		return fail("RPC echo of 4 MiB", w.status < 0 ? w.status : -EIO);
	printf("net: reliable RPC over UDP: ping round trip %.1f us (session up, 1000 calls); "
	       "a 4 MiB echo came back intact in %.1f ms\n",
	       (double)(t1 - t0) / 1000 / 1000.0, (double)(sh_clock_mono_ns() - t1) / 1e6);
	net_destroy(nb);
	net_destroy(na);
	env_real_run_once(env, 0);
	env_real_destroy(env);
	return 0;
}

struct st_wait {
	int done, rc;
};

static void
st_cb(void *arg, int rc)
{
	struct st_wait *w = arg;

	w->done++;
	w->rc = rc;
}

static int
st_wait(struct env *env, struct st_wait *w, int n)
{
	while (w->done < n)
		env_real_run_once(env, 10 * SH_NSEC_PER_MSEC);
	return w->rc;
}

static int
check_store(const char *dir)
{
	struct env *env = env_real_create(NULL);
	struct store_format_opts fo = { .target_id = 1 };
	struct store *s;
	struct store_stats st;
	struct st_wait w = { 0 };
	char path[4096];
	static uint8_t frag[128 << 10], got[128 << 10];
	uint64_t batches, fsyncs;
	int rc;

	snprintf(path, sizeof(path), "%s/envcheck.target", dir);
	unlink(path);
	rc = store_format(env, path, 64u << 20, &fo, st_cb, &w);
	if (rc < 0 || (rc = st_wait(env, &w, 1)) < 0)
		return fail("drive target format", rc);
	w.done = 0;
	if ((rc = store_open(env, path, NULL, &s, st_cb, &w)) < 0 || (rc = st_wait(env, &w, 1)) < 0)
		return fail("drive target open", rc);
	w.done = 0;
	for (uint32_t i = 0; i < 64; i++) {
		memset(frag, (int)i, sizeof(frag));
		if ((rc = store_append(s, 1, i, frag, sizeof(frag), st_cb, &w)) < 0)
			return fail("append", rc);
	}
	if ((rc = st_wait(env, &w, 64)) < 0)
		return fail("append", rc);
	store_stats(s, &st);
	batches = st.batches;
	fsyncs = st.fsyncs;
	store_close(s);
	w.done = 0;
	if ((rc = store_open(env, path, NULL, &s, st_cb, &w)) < 0 || (rc = st_wait(env, &w, 1)) < 0)
		return fail("drive target reopen", rc);
	w.done = 0;
	if ((rc = store_read(s, 1, 33, 0, sizeof(got), got, st_cb, &w)) < 0 ||
	    (rc = st_wait(env, &w, 1)) < 0)
		return fail("read", rc);
	memset(frag, 33, sizeof(frag));
	if (memcmp(frag, got, sizeof(got)) != 0) {
		fprintf(stderr, "envcheck: a fragment read back differs from what was written\n");
		return 1;
	}
	store_stats(s, &st);
	printf("store: drive target %s: 64 fragments of 128 KiB appended durably (%llu batched "
	       "writes, %llu fsyncs), reopened (%llu fragments recovered), read back with every "
	       "block's crc checked\n",
	       path, (unsigned long long)batches, (unsigned long long)fsyncs,
	       (unsigned long long)st.fragments);
	store_close(s);
	env_real_run_once(env, 0);
	env_real_destroy(env);
	unlink(path);
	return 0;
}

int
main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : "run";

	if (argc > 2 || (argc == 2 && argv[1][0] == '-')) {
		fprintf(stderr, "usage: shoal-envcheck [DIR]\n");
		return 2;
	}
	sh_log_init_from_env();
	printf("shoal %s: checking what Shoal has so far on this machine\n", sh_version());
	if (check_udp() || check_disk(dir) || check_sim() || check_net() || check_store(dir))
		return 1;
	printf("all checks passed\n");
	return 0;
}
