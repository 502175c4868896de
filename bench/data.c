// SPDX-License-Identifier: Apache-2.0
/*
 * bench/data (make bench-data): file data through libshoal on a 6-node
 * local cluster, 4+2, against fio direct I/O on the file system that
 * holds the drive files, in the same run.
 *
 * Sequential write then read of one file of SH_BENCH_GIB GiB (default 4)
 * with 1 MiB calls, 8 in flight (8 threads, each its own handle and its
 * own eighth of the file); 4 KiB random reads at queue depth 1 (latency
 * percentiles) and 32 (32 threads, IOPS); the CPU seconds all Shoal
 * processes (the 6 shoald and this client) spent per GiB. Prints, last:
 * BENCH data {"write_gib_s":X,"read_gib_s":X,"write_vs_disk":R,"read_vs_disk":R,
 *   "cpu_s_per_gib_write":X,"cpu_s_per_gib_read":X,"rand4k_qd1_p50_us":X,
 *   "rand4k_qd1_p99_us":X,"rand4k_qd32_iops":N}
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <shoal/client.h>
#include <shoal/sh_errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

#define QD	  32
#define QD1_READS 2000
#define QD32_SECS 5

static char bin[PATH_MAX], dir[PATH_MAX];
static sh_fs *fs;
static uint64_t file_size;

#define die(...) bench_die("bench/data", __VA_ARGS__)

/* CPU seconds of the cluster's daemons and this process so far. */
static double
cpu_seconds(void)
{
	double self, daemons = bench_cpu(dir, &self);

	return daemons + self;
}

/* GiB/s of one pass. */
static double
sequential(bool write)
{
	return bench_sequential("bench/data", fs, "/data", file_size, write) / 1024;
}

static int
cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

struct rnd {
	pthread_t th;
	unsigned seed;
	double until;
	unsigned long n;
};

static void *
rnd_thread(void *arg)
{
	struct rnd *r = arg;
	char buf[4096];
	sh_file *f;

	if (sh_open(fs, "/data", O_RDONLY, 0, &f) < 0)
		return NULL;
	while (bench_now() < r->until) {
		uint64_t off = (uint64_t)(rand_r(&r->seed) % (file_size / 4096)) * 4096;

		if (sh_pread(f, buf, 4096, off) == 4096)
			r->n++;
	}
	sh_close(f);
	return NULL;
}

/* fio's bandwidth in GiB/s for rw on the directory that holds the drives. */
static double
fio(const char *rw)
{
	char cmd[PATH_MAX * 3], out[PATH_MAX + 32];
	json_t *j, *job;
	double bw;

	snprintf(out, sizeof(out), "%s/fio.json", dir);
	snprintf(cmd, sizeof(cmd),
		 "fio --name=base --filename=%s/drives/fio.test --size=1G --bs=1M --rw=%s "
		 "--direct=1 --iodepth=8 --ioengine=io_uring --output-format=json --output=%s "
		 ">/dev/null 2>&1",
		 dir, rw, out);
	if (system(cmd) != 0)
		return 0;
	j = json_load_file(out, 0, NULL);
	job = j ? json_array_get(json_object_get(j, "jobs"), 0) : NULL;
	bw = job ? json_number_value(json_object_get(
		       json_object_get(job, strcmp(rw, "write") == 0 ? "write" : "read"),
		       "bw_bytes"))
		 : 0;
	json_decref(j);
	return bw / (1u << 30);
}

int
main(int argc, char **argv)
{
	unsigned gib = getenv("SH_BENCH_GIB") ? (unsigned)atoi(getenv("SH_BENCH_GIB")) : 4;
	unsigned port = getenv("SH_BENCH_PORT") ? (unsigned)atoi(getenv("SH_BENCH_PORT")) : 7820;
	char self[PATH_MAX], tmp[] = "/var/tmp/shoal-bench-data-XXXXXX";
	double w, r, cw, cr, c0, dw, dr, lat[QD1_READS];
	unsigned long qd32 = 0;
	sh_client *cl;
	sh_file *f;

	(void)argc;
	snprintf(self, sizeof(self), "%s", argv[0]);
	snprintf(bin, sizeof(bin), "%s/../bin/shoal", dirname(self));
	if (gib == 0 || mkdtemp(tmp) == NULL)
		die("bad SH_BENCH_GIB or no temporary directory");
	snprintf(dir, sizeof(dir), "%s", tmp);
	file_size = (uint64_t)gib << 30;
	printf("bench/data: 6-node local cluster in %s, 4+2, a %u GiB file\n", dir, gib);
	fflush(stdout);
	bench_cluster_fs("bench/data", bin, dir, port, gib + 2, "data", "/data", &cl, &fs);

	c0 = cpu_seconds();
	w = sequential(true);
	cw = (cpu_seconds() - c0) / gib;
	c0 = cpu_seconds();
	r = sequential(false);
	cr = (cpu_seconds() - c0) / gib;
	printf("sequential 1 MiB x %d in flight: write %.3f GiB/s (%.1f CPU s/GiB), read %.3f "
	       "GiB/s (%.1f CPU s/GiB)\n",
	       BENCH_SEQ_INFLIGHT, w, cw, r, cr);
	fflush(stdout);

	/* 4 KiB random reads: queue depth 1, latency */
	if (sh_open(fs, "/data", O_RDONLY, 0, &f) < 0)
		die("open");
	{
		unsigned seed = 1;
		char buf[4096];

		for (int i = 0; i < QD1_READS; i++) {
			uint64_t off = (uint64_t)(rand_r(&seed) % (file_size / 4096)) * 4096;
			double t0 = bench_now();

			if (sh_pread(f, buf, 4096, off) != 4096)
				die("random read at %llu", (unsigned long long)off);
			lat[i] = (bench_now() - t0) * 1e6;
		}
		qsort(lat, QD1_READS, sizeof(lat[0]), cmp_d);
	}
	sh_close(f);
	/* queue depth 32: IOPS */
	{
		struct rnd t[QD];
		double until = bench_now() + QD32_SECS;

		for (unsigned i = 0; i < QD; i++) {
			t[i] = (struct rnd){ .seed = i + 7, .until = until };
			pthread_create(&t[i].th, NULL, rnd_thread, &t[i]);
		}
		for (unsigned i = 0; i < QD; i++) {
			pthread_join(t[i].th, NULL);
			qd32 += t[i].n;
		}
		qd32 /= QD32_SECS;
	}
	printf("4 KiB random reads: qd1 p50 %.0f us, p99 %.0f us; qd32 %lu IOPS\n",
	       lat[QD1_READS / 2], lat[QD1_READS * 99 / 100], qd32);
	sh_fs_close(fs);
	sh_client_close(cl);
	/* the physical baseline: the disk under the drive files, direct I/O */
	dw = fio("write");
	dr = fio("read");
	printf(
	    "fio direct 1 MiB x 8 on the drives' file system: write %.3f GiB/s, read %.3f GiB/s\n",
	    dw, dr);
	printf("BENCH data {\"write_gib_s\":%.3f,\"read_gib_s\":%.3f,\"write_vs_disk\":%.3f,"
	       "\"read_vs_disk\":%.3f,\"cpu_s_per_gib_write\":%.2f,\"cpu_s_per_gib_read\":%.2f,"
	       "\"rand4k_qd1_p50_us\":%.0f,\"rand4k_qd1_p99_us\":%.0f,\"rand4k_qd32_iops\":%lu}\n",
	       w, r, dw > 0 ? w / dw : 0, dr > 0 ? r / dr : 0, cw, cr, lat[QD1_READS / 2],
	       lat[QD1_READS * 99 / 100], qd32);
	return 0;
}
