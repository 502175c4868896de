// SPDX-License-Identifier: Apache-2.0
/*
 * bench/store: a drive target on a file against fio on the same file
 * system, in one run (make bench-store):
 *
 *   append    128 KiB fragments, 32 in flight, durable before acknowledged
 *             vs  fio --ioengine=io_uring --direct=1 --rw=write --bs=128k
 *             --iodepth=32 (not durable); also vs the same with --sync=dsync
 *   randread  4 KiB reads of random fragments at random offsets, 32 in
 *             flight, every block crc-checked  vs  fio --rw=randread
 *             --bs=4k --iodepth=32
 *   open      seconds to open the target per GiB of live data
 *
 * Ends with: BENCH store {"append_vs_fio":R,"randread_vs_fio":R,"open_s_per_gib":S}
 * (the line before it: appends against fio making its writes durable too)
 * Usage: store [DIR [GiB [ROUNDS]]]   (default: build/bench-store, 1 GiB, 3 rounds;
 * fio and Shoal alternate round by round, the ratios are medians)
 */
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../src/env/env_real.h"
#include "../src/store/store.h"

#define FRAG (128u << 10)
#define QD   32

static double
fio_bw(const char *file, const char *rw, const char *bs, uint64_t size, int secs, double *iops,
       const char *extra)
{
	char cmd[1024], line[4096];
	FILE *p;
	double bw = -1;
	bool in_job = false;

	snprintf(cmd, sizeof(cmd),
		 "fio --name=b --filename=%s --size=%llu --ioengine=io_uring --direct=1 --rw=%s "
		 "--bs=%s --iodepth=32 --numjobs=1 %s %s --output-format=json 2>/dev/null",
		 file, (unsigned long long)size, rw, bs, secs > 0 ? "--runtime=5 --time_based" : "",
		 extra ? extra : "");
	p = popen(cmd, "r");
	if (p == NULL)
		return -1;
	/* the job's "read" or "write" section has "bw" (KiB/s) and "iops" */
	while (fgets(line, sizeof(line), p) != NULL) {
		char *k;

		if (strstr(line, strcmp(rw, "write") == 0 ? "\"write\" :" : "\"read\" :"))
			in_job = true;
		if (!in_job)
			continue;
		if ((k = strstr(line, "\"bw\" :")) != NULL && bw < 0)
			bw = atof(k + 6) * 1024;
		if ((k = strstr(line, "\"iops\" :")) != NULL && iops != NULL) {
			*iops = atof(k + 8);
			in_job = false;
		}
	}
	pclose(p);
	return bw;
}

struct ctx {
	struct env *env;
	struct store *s;
	int inflight, done, rc;
	uint64_t n;
	struct sh_rand rng;
};

static void
cb(void *arg, int rc)
{
	struct ctx *c = arg;

	c->inflight--;
	c->done++;
	if (rc < 0 && c->rc == 0)
		c->rc = rc;
}

static void
wait_all(struct ctx *c)
{
	while (c->inflight > 0)
		env_real_run_once(c->env, 100 * SH_NSEC_PER_MSEC);
}

struct rslot {
	uint8_t buf[4096] __attribute__((aligned(4096)));
	bool busy;
	struct ctx *c;
};

static struct rslot rslots[QD];

static void
read_cb(void *arg, int rc)
{
	struct rslot *r = arg;

	r->busy = false;
	cb(r->c, rc);
}

struct round {
	double app, open_s, rd_iops, cpu_app;
	uint64_t batches, fsyncs;
	bool fixed; /* reads went to registered buffers */
};

/* Format a target on the drive file, append, reopen, read at random; -1 on failure. */
static int
shoal_round(const char *drive, uint64_t bytes, struct round *out)
{
	static uint8_t frag[FRAG];
	struct store_format_opts fo = { .target_id = 1 };
	struct ctx c = { 0 };
	uint64_t t0, cpu0, nfrags = bytes / FRAG, reads = 0;
	struct store_stats st;
	int slot;
	/* SH_BENCH_BATCH_KB, SH_BENCH_WRITES: other pipeline shapes; SH_BENCH_NOFIXED: no fixed
	 * buffers */
	struct store_opts so = {
		.batch_max = getenv("SH_BENCH_BATCH_KB")
				 ? (uint32_t)atoi(getenv("SH_BENCH_BATCH_KB")) << 10
				 : 0,
		.writes_max =
		    getenv("SH_BENCH_WRITES") ? (unsigned)atoi(getenv("SH_BENCH_WRITES")) : 0,
		/* SH_BENCH_NODURABLE: the pipeline without durability, like fio's */
		.unsafe_ack_before_durable = getenv("SH_BENCH_NODURABLE") != NULL
	};

	c.env = env_real_create(NULL);
	sh_rand_seed(&c.rng, 1);
	sh_rand_fill(&c.rng, frag, sizeof(frag));
	c.inflight = 1;
	if (store_format(c.env, drive, bytes + bytes / 8 + (64u << 20), &fo, cb, &c) < 0)
		return -1;
	wait_all(&c);
	c.inflight = 1;
	if (store_open(c.env, drive, &so, &c.s, cb, &c) < 0)
		return -1;
	wait_all(&c);
	if (c.rc < 0) {
		fprintf(stderr, "bench/store: open: %s\n", sh_strerror(c.rc));
		return -1;
	}
	cpu0 = sh_clock_cpu_ns();
	t0 = sh_clock_mono_ns();
	for (uint64_t i = 0; i < nfrags;) {
		while (c.inflight < QD && i < nfrags) {
			memcpy(frag, &i, sizeof(i)); /* each fragment differs */
			if (store_append(c.s, i, 0, frag, FRAG, cb, &c) < 0)
				return -1;
			c.inflight++;
			i++;
		}
		env_real_run_once(c.env, 100 * SH_NSEC_PER_MSEC);
	}
	wait_all(&c);
	out->app = (double)nfrags * FRAG / ((double)(sh_clock_mono_ns() - t0) / 1e9);
	out->cpu_app = (double)(sh_clock_cpu_ns() - cpu0) / 1e9;
	store_stats(c.s, &st);
	out->batches = st.batches;
	out->fsyncs = st.fsyncs;
	if (c.rc < 0) {
		fprintf(stderr, "bench/store: append: %s\n", sh_strerror(c.rc));
		return -1;
	}
	store_close(c.s);
	t0 = sh_clock_mono_ns();
	c.inflight = 1;
	store_open(c.env, drive, NULL, &c.s, cb, &c);
	wait_all(&c);
	out->open_s = (double)(sh_clock_mono_ns() - t0) / 1e9;
	/* the reader's buffers are registered, as the data path registers its pools */
	slot =
	    getenv("SH_BENCH_NOFIXED") ? -1 : env_disk_buf_register(c.env, rslots, sizeof(rslots));
	out->fixed = slot >= 0;
	t0 = sh_clock_mono_ns();
	while (sh_clock_mono_ns() - t0 < 3 * SH_NSEC_PER_SEC) {
		/* each read its own aligned buffer, reused only once its read is back */
		for (int k = 0; k < QD; k++) {
			uint64_t f = sh_rand_below(&c.rng, nfrags);
			uint64_t off = sh_rand_below(&c.rng, FRAG / 4096) * 4096;

			if (rslots[k].busy)
				continue;
			rslots[k].busy = true;
			rslots[k].c = &c;
			if (store_read(c.s, f, 0, off, 4096, rslots[k].buf, read_cb, &rslots[k]) <
			    0)
				return -1;
			c.inflight++;
			reads++;
		}
		env_real_run_once(c.env, 100 * SH_NSEC_PER_MSEC);
	}
	wait_all(&c);
	if (c.rc < 0) {
		fprintf(stderr, "bench/store: read: %s\n", sh_strerror(c.rc));
		return -1;
	}
	out->rd_iops = (double)reads / ((double)(sh_clock_mono_ns() - t0) / 1e9);
	env_disk_buf_unregister(c.env, slot);
	store_close(c.s);
	env_real_destroy(c.env);
	return 0;
}

static int
cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double
median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_d);
	return v[n / 2];
}

int
main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : "build/bench-store";
	double gib = argc > 2 ? atof(argv[2]) : 1.0;
	int rounds = argc > 3 ? atoi(argv[3]) : 5;
	uint64_t bytes = (uint64_t)(gib * (1u << 30));
	char drive[4096];
	double r_app[16], r_rd[16], r_sync[16], r_open[16];

	if (rounds < 1 || rounds > 16)
		rounds = 3;
	mkdir(dir, 0755);
	/*
	 * One file for both, written by fio first, as a drive that has been used:
	 * on a freshly allocated file ext4 converts "unwritten" extents on the
	 * first write of each block and every fsync commits the journal; a block
	 * device (production) has no such cost. The disk of a virtual machine
	 * drifts: the measurements alternate, round by round, and the ratios are
	 * the medians of the rounds.
	 */
	snprintf(drive, sizeof(drive), "%s/fio.dat", dir);
	unlink(drive);
	for (int r = 0; r < rounds; r++) {
		struct round sh;
		double fw, fws, fr, friops = 0;

		fw = fio_bw(drive, "write", "128k", bytes + bytes / 8 + (64u << 20), 0, NULL, NULL);
		if (fw <= 0) {
			fprintf(stderr, "bench/store: fio did not run (is it installed?)\n");
			return 1;
		}
		if (shoal_round(drive, bytes, &sh) < 0)
			return 1;
		fr = fio_bw(drive, "randread", "4k", bytes, 3, &friops, NULL);
		/* the same writes made durable as Shoal's are: O_DSYNC, each write durable */
		fws = fio_bw(drive, "write", "128k", bytes, 0, NULL, "--sync=dsync");
		if (fr <= 0 || fws <= 0 || friops <= 0)
			return 1;
		printf("round %d: append shoal %5.0f MB/s (%llu writes, %llu fsyncs, %.2f s cpu), "
		       "fio %5.0f MB/s, "
		       "fio O_DSYNC %5.0f MB/s; randread shoal %6.0f IOPS%s, fio %6.0f IOPS; "
		       "open %.3f s\n",
		       r + 1, sh.app / 1e6, (unsigned long long)sh.batches,
		       (unsigned long long)sh.fsyncs, sh.cpu_app, fw / 1e6, fws / 1e6, sh.rd_iops,
		       sh.fixed ? " (fixed buffers)" : "", friops, sh.open_s);
		r_app[r] = sh.app / fw;
		r_sync[r] = sh.app / fws;
		r_rd[r] = sh.rd_iops / friops;
		r_open[r] = sh.open_s / gib;
	}
	unlink(drive);
	printf("medians of %d rounds: append %.2fx fio (%.2fx fio with O_DSYNC), random read "
	       "%.2fx fio, open %.3f s per GiB\n",
	       rounds, median(r_app, rounds), median(r_sync, rounds), median(r_rd, rounds),
	       median(r_open, rounds));
	printf("BENCH store "
	       "{\"append_vs_fio\":%.2f,\"randread_vs_fio\":%.2f,\"open_s_per_gib\":%.3f}\n",
	       median(r_app, rounds), median(r_rd, rounds), median(r_open, rounds));
	return 0;
}
