// SPDX-License-Identifier: Apache-2.0
/*
 * bench/reduction (make bench-reduction): inline data reduction on a
 * 6-node local cluster, 4+2, through libshoal (docs/reduction.md).
 *
 * - Throughput cost: SH_BENCH_GIB GiB (default 1) of random data written
 *   (1 MiB calls, 8 in flight) to a filesystem with compression off and
 *   to one with lz4, alternately (which goes first alternating too), 5
 *   times each: the median of each, and their ratio (on / off).
 * - Compression: the same amount of text-like data (sh_rand_text) written
 *   to the lz4 filesystem: the stored bytes the buckets count against the
 *   size lz4 itself gets on the same bytes (in 4 MiB chunks, as the lz4
 *   tool does), in this process.
 * - Duplicates: the random data written into a filesystem with dedup on,
 *   then again into a second file: how much physical usage grew with the
 *   second copy, and the bytes every node received (all RPCs, as the
 *   transport counts them) while it was written, against its size.
 *
 * Prints, last:
 * BENCH reduction {"dedup_ratio":R,"lz4_ratio":R,"dup_write_net_fraction":F,
 *   "write_gib_s_on_vs_off":R}
 * with dedup_ratio the dedup filesystem's logical over unique bytes (two
 * copies: 2 at best), lz4_ratio the logical over stored bytes of the text
 * (the reference ratio of lz4 itself is printed above it).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <libgen.h>
#include <limits.h>
#include <lz4.h>
#include <pthread.h>
#include <shoal/client.h>
#include <shoal/sh_errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../src/base/http.h"
#include "../src/base/rand.h"
#include "../src/data/reduce.h"
#include "bench.h"

#define MIB	 (1u << 20)
#define INFLIGHT 8
#define ROUNDS	 5
#define NODES	 6

static char bin[PATH_MAX], addr[64];
static unsigned port;
static uint64_t size;

#define die(...) bench_die("bench/reduction", __VA_ARGS__)

struct part {
	sh_fs *fs;
	const char *path;
	const uint8_t *data;
	unsigned idx;
	pthread_t th;
	int err;
};

static void *
part_thread(void *arg)
{
	struct part *q = arg;
	uint64_t len = size / INFLIGHT, off = len * q->idx;
	sh_file *f;
	int rc = sh_open(q->fs, q->path, O_WRONLY, 0644, &f);

	for (uint64_t done = 0; rc == 0 && done < len; done += MIB) {
		long n = sh_pwrite(f, q->data + off + done, MIB, off + done);

		if (n != (long)MIB)
			rc = n < 0 ? (int)n : -EIO;
	}
	if (rc == 0)
		rc = sh_close(f);
	q->err = rc;
	return NULL;
}

/* Write data (size bytes) to path, 8 writers each its eighth: GiB/s. */
static double
write_file(sh_fs *fs, const char *path, const uint8_t *data)
{
	struct part q[INFLIGHT];
	sh_file *f;
	double t0;
	int rc = sh_open(fs, path, O_WRONLY | O_CREAT | O_TRUNC, 0644, &f);

	if (rc < 0 || (rc = sh_close(f)) < 0)
		die("create %s: %s", path, sh_strerror(rc));
	t0 = bench_now();
	for (unsigned i = 0; i < INFLIGHT; i++) {
		q[i] = (struct part){ .fs = fs, .path = path, .data = data, .idx = i };
		pthread_create(&q[i].th, NULL, part_thread, &q[i]);
	}
	for (unsigned i = 0; i < INFLIGHT; i++) {
		pthread_join(q[i].th, NULL);
		if (q[i].err < 0)
			die("write %s: %s", path, sh_strerror(q[i].err));
	}
	return (double)size / (1u << 30) / (bench_now() - t0);
}

/* Read path back whole and compare: a benchmark that stores wrong bytes proves nothing. */
static void
verify(sh_fs *fs, const char *path, const uint8_t *data)
{
	uint8_t *buf = malloc(MIB);
	sh_file *f;
	int rc = buf ? sh_open(fs, path, O_RDONLY, 0, &f) : -ENOMEM;

	for (uint64_t off = 0; rc == 0 && off < size; off += MIB) {
		if (sh_pread(f, buf, MIB, off) != (long)MIB || memcmp(buf, data + off, MIB) != 0)
			die("%s reads back wrong at %llu", path, (unsigned long long)off);
	}
	if (rc == 0)
		sh_close(f);
	free(buf);
	if (rc < 0)
		die("read %s: %s", path, sh_strerror(rc));
}

/* A counter summed over every node's /metrics: lines that start with series. */
static double
metric_sum(const char *series)
{
	double sum = 0;

	for (unsigned n = 0; n < NODES; n++) {
		char a[64], *body = NULL;

		snprintf(a, sizeof(a), "127.0.0.1:%u", port + n);
		if (sh_http_call(a, bench_token(), "GET", "/metrics", NULL, &body, 5) != 200)
			die("no metrics from %s", a);
		for (char *l = body; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
			const char *rest = strstr(l, "} ");

			if (strncmp(l, series, strlen(series)) == 0 && strstr(l, "node=") && rest &&
			    strchr(l, '\n') > rest)
				sum += strtod(rest + 2, NULL);
		}
		free(body);
	}
	return sum;
}

/* A filesystem's field as the admin API gives it: "logical_bytes", "dedup_ratio"... */
static double
fs_usage(const char *name, const char *key)
{
	char *body = NULL;
	json_t *j, *f;
	size_t i;
	double v = -1;

	if (sh_http_call(addr, bench_token(), "GET", "/v1/fs", NULL, &body, 10) != 200)
		die("GET /v1/fs failed");
	j = json_loads(body, 0, NULL);
	json_array_foreach(j, i, f)
	{
		if (strcmp(json_string_value(json_object_get(f, "name")), name) == 0)
			v = json_number_value(json_object_get(f, key));
	}
	json_decref(j);
	free(body);
	return v;
}

/* The usage once the buckets' leaders have summed it with logical bytes mapped (2 s apart). */
static double
settled(const char *name, const char *key, double logical)
{
	for (int i = 0; i < 100; i++) {
		if (fs_usage(name, "logical_bytes") == logical) {
			double a = fs_usage(name, key);

			sleep(3);
			if (fs_usage(name, key) == a)
				return a;
		}
		usleep(500000);
	}
	die("usage of %s never settled at %.0f logical bytes", name, logical);
}

static int
cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static sh_fs *
open_fs(sh_client *cl, const char *name)
{
	sh_fs *fs = NULL;
	int rc = sh_fs_open(cl, name, &fs);

	for (int i = 0; rc == 0 && i < 100; i++) {
		sh_file *f;

		rc = sh_open(fs, "/probe", O_WRONLY | O_CREAT, 0644, &f);
		if (rc == 0) {
			sh_close(f);
			return fs;
		}
		usleep(100000);
		rc = i < 99 ? 0 : rc;
	}
	die("cannot use filesystem %s: %s", name, sh_strerror(rc));
}

int
main(int argc, char **argv)
{
	unsigned gib = getenv("SH_BENCH_GIB") ? (unsigned)atoi(getenv("SH_BENCH_GIB")) : 1;
	char self[PATH_MAX], dir[] = "/var/tmp/shoal-bench-reduction-XXXXXX";
	double off[ROUNDS], on[ROUNDS], ratio, lz4_size = 0, stored, p0, p1, n0, n1;
	double dd1, dd2, dedup;
	uint8_t *rnd, *text;
	struct sh_rand r;
	sh_client *cl;
	sh_fs *fs_off, *fs_lz4, *fs_dd;
	int rc;

	(void)argc;
	port = getenv("SH_BENCH_PORT") ? (unsigned)atoi(getenv("SH_BENCH_PORT")) : 7840;
	snprintf(self, sizeof(self), "%s", argv[0]);
	snprintf(bin, sizeof(bin), "%s/../bin/shoal", dirname(self));
	if (gib == 0 || mkdtemp(dir) == NULL)
		die("bad SH_BENCH_GIB or no temporary directory");
	size = (uint64_t)gib << 30;
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", port);
	rnd = malloc(size);
	text = malloc(size);
	if (rnd == NULL || text == NULL)
		die("no memory for 2 x %u GiB of data", gib);
	sh_rand_seed(&r, 42);
	sh_rand_fill(&r, rnd, size);
	sh_rand_text(&r, text, size);
	{
		/* the reference: lz4 on the same text, 4 MiB at a time (the lz4 tool's default) */
		size_t chunk = 4 * MIB;
		char *out = malloc((size_t)LZ4_compressBound((int)chunk));

		for (uint64_t at = 0; out && at < size; at += chunk)
			lz4_size += LZ4_compress_default((const char *)text + at, out, (int)chunk,
							 LZ4_compressBound((int)chunk));
		free(out);
	}
	bench_at_exit("%s local down --dir %s --wipe >/dev/null; rm -rf %s", bin, dir, dir);
	printf("bench/reduction: 6-node local cluster in %s, 4+2, %u GiB per file\n", dir, gib);
	fflush(stdout);
	bench_sh("bench/reduction",
		 "%s local up --nodes %d --dir %s --port %u --drive-size %uG >/dev/null", bin,
		 NODES, dir, port, 2 * gib + 2);
	bench_use_token(dir);
	bench_sh("bench/reduction",
		 "%s --addr %s fs create off --compression none >/dev/null && "
		 "%s --addr %s fs create lz4 --compression lz4 >/dev/null && "
		 "%s --addr %s fs create dd --compression lz4 --dedup on >/dev/null",
		 bin, addr, bin, addr, bin, addr);
	rc = sh_client_connect(addr, NULL, &cl);
	if (rc < 0)
		die("connect: %s", sh_strerror(rc));
	fs_off = open_fs(cl, "off");
	fs_lz4 = open_fs(cl, "lz4");
	fs_dd = open_fs(cl, "dd");

	/* 1. what trying to compress incompressible data costs */
	for (unsigned i = 0; i < ROUNDS; i++) {
		/* which goes first alternates: neither gets the quieter half of each round */
		if (i % 2 == 0) {
			off[i] = write_file(fs_off, "/random", rnd);
			on[i] = write_file(fs_lz4, "/random", rnd);
		} else {
			on[i] = write_file(fs_lz4, "/random", rnd);
			off[i] = write_file(fs_off, "/random", rnd);
		}
		printf("  round %u: random data, compression off %.3f GiB/s, lz4 %.3f GiB/s\n",
		       i + 1, off[i], on[i]);
		fflush(stdout);
	}
	verify(fs_lz4, "/random", rnd);
	qsort(off, ROUNDS, sizeof(off[0]), cmp_d);
	qsort(on, ROUNDS, sizeof(on[0]), cmp_d);
	ratio = on[ROUNDS / 2] / off[ROUNDS / 2];
	{
		/* what trying costs, without the cluster's noise: the same blocks, one thread */
		static uint8_t out[REDUCE_BLOCK * 1024];
		size_t bl = REDUCE_BLOCK * 1024;
		double t0 = bench_now(), cpu;
		uint8_t how;

		for (uint64_t at = 0; at + bl <= size; at += bl)
			(void)reduce_block(REDUCE_ALGO_LZ4, rnd + at, bl, out, &how);
		cpu = (bench_now() - t0) / ((double)size / (1u << 30));
		printf("lz4 on random 128 KiB blocks: %.4f CPU s per GiB, %.2f%% of one core at "
		       "%.3f GiB/s\n",
		       cpu, 100 * cpu * off[ROUNDS / 2], off[ROUNDS / 2]);
	}
	printf("random data (median of %d): off %.3f GiB/s, lz4 %.3f GiB/s: %.3fx\n", ROUNDS,
	       off[ROUNDS / 2], on[ROUNDS / 2], ratio);

	/* 2. text: what is stored against what lz4 gets */
	p0 = settled("lz4", "stored_bytes", (double)size);
	write_file(fs_lz4, "/text", text);
	verify(fs_lz4, "/text", text);
	stored = settled("lz4", "stored_bytes", 2.0 * (double)size) - p0;
	printf("text: %.1f MiB stored for %.1f MiB (%.3fx); lz4 itself %.1f MiB (%.3fx): "
	       "stored / lz4 %.3f\n",
	       stored / MIB, (double)size / MIB, (double)size / stored, lz4_size / MIB,
	       (double)size / lz4_size, stored / lz4_size);

	/* 3. dedup: the random data into a filesystem with dedup on, twice */
	dd1 = write_file(fs_dd, "/random", rnd);
	p0 = settled("dd", "physical_bytes", (double)size);
	n0 = metric_sum("shoal_rpc_received_bytes_total{node=");
	dd2 = write_file(fs_dd, "/random2", rnd);
	n1 = metric_sum("shoal_rpc_received_bytes_total{node=");
	verify(fs_dd, "/random2", rnd);
	p1 = settled("dd", "physical_bytes", 2.0 * (double)size);
	dedup = fs_usage("dd", "dedup_ratio");
	printf("dedup: first copy %.3f GiB/s (%.3fx compression off), second %.3f GiB/s; "
	       "physical grew %.1f MiB for the %.1f MiB copy; the nodes received %.2f MiB "
	       "(every RPC) while it was written\n",
	       dd1, dd1 / off[ROUNDS / 2], dd2, (p1 - p0) / MIB, (double)size / MIB,
	       (n1 - n0) / MIB);
	printf("BENCH reduction {\"dedup_ratio\":%.3f,\"lz4_ratio\":%.3f,"
	       "\"dup_write_net_fraction\":%.4f,\"write_gib_s_on_vs_off\":%.3f}\n",
	       dedup, (double)size / stored, (n1 - n0) / (double)size, ratio);
	sh_fs_close(fs_dd);
	sh_fs_close(fs_off);
	sh_fs_close(fs_lz4);
	sh_client_close(cl);
	free(rnd);
	free(text);
	return 0;
}
