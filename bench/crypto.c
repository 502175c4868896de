// SPDX-License-Identifier: Apache-2.0
/*
 * bench/crypto: what authenticating every datagram costs (src/net/auth.h),
 * against the same traffic without, in one run.
 *
 *   mac     the MAC alone (net_auth_seal): ns per packet of 100 B, 1,472 B
 *           and 64 KiB, and GB/s on the large ones
 *   rate    64-byte RPCs with 64 in flight between two backend endpoints
 *           on loopback (the server on a thread of its own): authenticated
 *           against plain, alternating rounds, the best round of each
 *   stream  1 MiB messages one way, the same way
 *
 *   at rest a 6-node local cluster (4+2, no compression) with two file
 *           systems, one encrypted (shoal fs create --encrypt): the same
 *           sequential write and read (1 MiB x 8 in flight, SH_BENCH_MIB
 *           MiB, 512 by default) of each, alternating (which goes first
 *           too), four rounds, the best of each, with the CPU seconds per GiB of the client and
 *           of the nodes; and what encrypting and decrypting stripe data
 *           costs alone (seal.h: AES-256-XTS in 4 KiB units)
 *
 * Ends with: BENCH crypto {"enc_write_vs_plain":R,"enc_read_vs_plain":R,
 *   "auth_rpc_rate_vs_plain":R,"auth_stream_vs_plain":R,"mac_ns_1472":X,"mac_gbs_64k":X,
 *   "seal_gbs":X,"open_gbs":X}
 * Usage: crypto [seconds per round, default 1]   (SH_BENCH_MIB=0: no cluster part, null)
 */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../src/data/seal.h"
#include "../src/env/env_real.h"
#include "../src/net/auth.h"
#include "bench.h"

static double secs = 1.0;
static const uint8_t key[NET_AUTH_KEY_LEN] = { 0x42, 0x13 };

struct server {
	pthread_t thread;
	bool auth;
	struct env *env;
	_Atomic uint16_t port; /* set once it listens */
};

static void *
server_main(void *arg)
{
	struct server *s = arg;
	struct net_iface ifc = { 0 };
	struct net_config cfg = {
		.node_id = 1, .ifaces = &ifc, .nifaces = 1, .auth_key = s->auth ? key : NULL
	};
	struct net *n;

	s->env = env_real_create(NULL);
	env_addr_parse("127.0.0.1:0", &ifc.addr);
	if (s->env == NULL || net_create(s->env, &cfg, &n) < 0) {
		fprintf(stderr, "crypto: the server cannot start\n");
		exit(1);
	}
	net_iface_addr(n, 0, &ifc.addr);
	atomic_store(&s->port, ifc.addr.port);
	env_real_run(s->env);
	net_destroy(n);
	env_real_destroy(s->env);
	return NULL;
}

struct client {
	struct server srv;
	struct env *env;
	struct net *net;
	uint64_t done;
	int inflight;
};

static void
done_cb(void *arg, int status, const struct net_msg *reply)
{
	struct client *c = arg;

	(void)reply;
	if (status < 0 && status != -ECANCELED) {
		fprintf(stderr, "crypto: a call failed: %s\n", sh_strerror(status));
		exit(1);
	}
	c->done++;
	c->inflight--;
}

static void
client_open(struct client *c, bool auth)
{
	struct net_iface ifc = { 0 }, srv = { 0 };
	struct net_config cfg = {
		.node_id = 2, .ifaces = &ifc, .nifaces = 1, .auth_key = auth ? key : NULL
	};

	memset(c, 0, sizeof(*c));
	c->srv.auth = auth;
	if (pthread_create(&c->srv.thread, NULL, server_main, &c->srv) != 0)
		exit(1);
	while (atomic_load(&c->srv.port) == 0)
		usleep(1000);
	c->env = env_real_create(NULL);
	env_addr_parse("127.0.0.1:0", &ifc.addr);
	if (c->env == NULL || net_create(c->env, &cfg, &c->net) < 0)
		exit(1);
	env_addr_parse("127.0.0.1", &srv.addr);
	srv.addr.port = atomic_load(&c->srv.port);
	net_peer_add(c->net, 1, &srv, 1);
	/* open the session */
	net_call(c->net, 1, NET_OP_PING, NULL, 0, NULL, done_cb, c, NULL);
	while (c->done < 1)
		env_real_run_once(c->env, 100 * SH_NSEC_PER_MSEC);
	c->done = 0;
	c->inflight = 0;
}

static void
client_close(struct client *c)
{
	struct net_stats st;

	while (c->inflight > 0)
		env_real_run_once(c->env, 100 * SH_NSEC_PER_MSEC);
	net_stats(c->net, &st);
	if (st.auth_failed != 0) {
		fprintf(stderr, "crypto: %llu datagrams failed authentication\n",
			(unsigned long long)st.auth_failed);
		exit(1);
	}
	net_destroy(c->net);
	env_real_destroy(c->env);
	env_real_stop(c->srv.env);
	pthread_join(c->srv.thread, NULL);
}

/* Calls per second (or MB/s for 1 MiB sinks) of one round. */
static double
round_of(bool auth, bool stream)
{
	static char small[64], big[1 << 20];
	struct iovec iov = { stream ? big : small, stream ? sizeof(big) : sizeof(small) };
	struct net_call_opts o = { .timeout_ns = 30 * SH_NSEC_PER_SEC };
	int depth = stream ? 8 : 64;
	struct client c;
	uint64_t t0, end;
	double r;

	client_open(&c, auth);
	t0 = sh_clock_mono_ns();
	end = t0 + (uint64_t)(secs * 1e9);
	while (sh_clock_mono_ns() < end) {
		while (c.inflight < depth) {
			net_call(c.net, 1, stream ? NET_OP_SINK : NET_OP_ECHO, &iov, 1, &o, done_cb,
				 &c, NULL);
			c.inflight++;
		}
		env_real_run_once(c.env, 100 * SH_NSEC_PER_MSEC);
	}
	r = (double)c.done * 1e9 / (double)(sh_clock_mono_ns() - t0);
	if (stream)
		r = r * (double)sizeof(big) / 1e6;
	client_close(&c);
	return r;
}

/* ns per seal of a packet of len bytes. */
static double
mac_ns(struct net_auth *a, size_t len)
{
	static uint8_t pkt[65536];
	struct net_pkt h = { .type = NET_PKT_DATA,
			     .flags = NET_FLAG_MAC,
			     .src_id = 1,
			     .dst_id = 2,
			     .src_inc = 1,
			     .dst_inc = 2,
			     .sess = 1 };
	struct net_mac_key k = { 0 };
	uint8_t trailer[NET_MAC_TRAILER];
	struct iovec iov = { pkt, len };
	unsigned n = len > 10000 ? 20000 : 400000;
	uint64_t t0;

	net_auth_seal(a, &k, NULL, &h, &iov, 1, trailer); /* derive the key */
	t0 = sh_clock_mono_ns();
	for (unsigned i = 0; i < n; i++)
		if (net_auth_seal(a, &k, NULL, &h, &iov, 1, trailer) < 0)
			exit(1);
	net_mac_key_fini(&k);
	return (double)(sh_clock_mono_ns() - t0) / n;
}

/* ---- at rest ---- */

/* GB/s of encrypting (or decrypting) a 512 KiB stripe's data in place on this core (seal.h). */
static double
seal_gbs(bool enc)
{
	static uint8_t data[512 << 10];
	uint8_t master[SEAL_KEY_LEN] = { 9 };
	struct seal_keys k;
	unsigned n = 1000;
	double t0;

	seal_keys_init(&k, master);
	memset(data, 0x5a, sizeof(data));
	t0 = bench_now();
	for (unsigned i = 0; i < n; i++)
		if (seal_units(&k, i + 1, 0, data, data, sizeof(data), enc) < 0)
			exit(1);
	return (double)n * sizeof(data) / (bench_now() - t0) / 1e9;
}

/*
 * The at-rest rounds: *w and *r the encrypted file system's sequential
 * write and read rates over the plain one's (best rounds); 0 without a
 * cluster (SH_BENCH_MIB=0).
 */
static void
at_rest(const char *argv0, double *w, double *r)
{
	unsigned mib = getenv("SH_BENCH_MIB") ? (unsigned)atoi(getenv("SH_BENCH_MIB")) : 512;
	unsigned port = getenv("SH_BENCH_PORT") ? (unsigned)atoi(getenv("SH_BENCH_PORT")) : 7840;
	char self[PATH_MAX], bin[PATH_MAX + 16], tmp[] = "/var/tmp/shoal-bench-crypto-XXXXXX";
	char addr[64], key[PATH_MAX];
	double best[2][2] = { { 0, 0 }, { 0, 0 } }; /* [sealed][write] */
	sh_client *cl, *cl2;
	sh_fs *fs[2];

	*w = *r = 0;
	if (mib < BENCH_SEQ_INFLIGHT)
		return;
	snprintf(self, sizeof(self), "%s", argv0);
	snprintf(bin, sizeof(bin), "%s/../bin/shoal", dirname(self));
	if (mkdtemp(tmp) == NULL)
		bench_die("bench/crypto", "no temporary directory");
	printf("at rest: 6-node local cluster in %s, 4+2, %u MiB per pass\n", tmp, mib);
	fflush(stdout);
	bench_cluster_fs("bench/crypto", bin, tmp, port, mib / 1024 + 2, "plain", "/data", &cl,
			 &fs[0]);
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", port);
	snprintf(key, sizeof(key), "%s/fs.key", tmp);
	bench_sh("bench/crypto",
		 "%s --addr %s fs create sealed --protection 4+2 --compression none --encrypt %s "
		 "2>/dev/null >/dev/null",
		 bin, addr, key);
	setenv("SHOAL_FS_KEY_FILE", key, 1);
	bench_connect_fs("bench/crypto", addr, "sealed", "/data", &cl2, &fs[1]);
	for (int round = 0; round < 4; round++)
		for (int i = 0; i < 2; i++) {
			int sealed =
			    i ^ (round & 1); /* which goes first: each, every other round */
			double c0, d0 = bench_cpu(tmp, &c0), c1, d1, c2, d2, wr, rd;

			wr = bench_sequential("bench/crypto", fs[sealed], "/data",
					      (uint64_t)mib << 20, true);
			d1 = bench_cpu(tmp, &c1);
			rd = bench_sequential("bench/crypto", fs[sealed], "/data",
					      (uint64_t)mib << 20, false);
			d2 = bench_cpu(tmp, &c2);
			/* CPU seconds per GiB: the client's, the daemons' */
			printf(
			    "round %d, %s: write %.0f MiB/s (CPU s/GiB client %.2f, nodes %.2f), "
			    "read %.0f MiB/s (client %.2f, nodes %.2f)\n",
			    round + 1, sealed ? "encrypted" : "plain", wr, (c1 - c0) * 1024 / mib,
			    (d1 - d0) * 1024 / mib, rd, (c2 - c1) * 1024 / mib,
			    (d2 - d1) * 1024 / mib);
			fflush(stdout);
			best[sealed][1] = wr > best[sealed][1] ? wr : best[sealed][1];
			best[sealed][0] = rd > best[sealed][0] ? rd : best[sealed][0];
		}
	sh_fs_close(fs[1]);
	sh_client_close(cl2);
	sh_fs_close(fs[0]);
	sh_client_close(cl);
	*w = best[1][1] / best[0][1];
	*r = best[1][0] / best[0][0];
}

int
main(int argc, char **argv)
{
	double rate[2] = { 0, 0 }, stream[2] = { 0, 0 }, m100, m1472, m64k, sg, og, ew, er;
	char encw[16] = "null", encr[16] = "null";
	struct env *env = env_real_create(NULL);
	struct net_auth *a;

	if (argc > 1)
		secs = atof(argv[1]);
	if (env == NULL || net_auth_create(env, key, NULL, 0, &a) < 0)
		return 1;
	m100 = mac_ns(a, 100);
	m1472 = mac_ns(a, 1472);
	m64k = mac_ns(a, 65000);
	net_auth_destroy(a);
	env_real_destroy(env);
	printf(
	    "mac: %.0f ns per 100 B packet, %.0f ns per 1,472 B, %.0f ns per 64 KiB (%.2f GB/s)\n",
	    m100, m1472, m64k, 65000 / m64k);
	for (int round = 0; round < 2; round++) {
		for (int auth = 0; auth < 2; auth++) {
			double r = round_of(auth, false), s = round_of(auth, true);

			printf("round %d, %s: %.0f RPCs/s, %.0f MB/s of 1 MiB messages\n",
			       round + 1, auth ? "authenticated" : "plain", r, s);
			rate[auth] = r > rate[auth] ? r : rate[auth];
			stream[auth] = s > stream[auth] ? s : stream[auth];
		}
	}
	sg = seal_gbs(true);
	og = seal_gbs(false);
	printf(
	    "AES-256-XTS of stripe data: encrypting %.2f GB/s, decrypting %.2f GB/s (one core)\n",
	    sg, og);
	fflush(stdout);
	at_rest(argv[0], &ew, &er);
	if (ew > 0)
		snprintf(encw, sizeof(encw), "%.3f", ew);
	if (er > 0)
		snprintf(encr, sizeof(encr), "%.3f", er);
	printf("BENCH crypto {\"enc_write_vs_plain\":%s,\"enc_read_vs_plain\":%s,"
	       "\"auth_rpc_rate_vs_plain\":%.3f,\"auth_stream_vs_plain\":%.3f,\"mac_ns_1472\":%.0f,"
	       "\"mac_gbs_64k\":%.2f,\"seal_gbs\":%.2f,\"open_gbs\":%.2f}\n",
	       encw, encr, rate[1] / rate[0], stream[1] / stream[0], m1472, 65000 / m64k, sg, og);
	return 0;
}
