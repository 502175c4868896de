// SPDX-License-Identifier: Apache-2.0
/*
 * bench/store: a drive target on a file against fio on the same file
 * system, in one run (make bench-store):
 *
 *   append    128 KiB fragments, 32 in flight, durable before acknowledged,
 *             each written from its own aligned buffer, as the data path
 *             writes a PUT from where its request landed (store_append_ref)
 *             vs  fio --ioengine=io_uring --direct=1 --rw=write --bs=128k
 *             --iodepth=32 (not durable) on the same file, run just before
 *             and just after (their mean: the disk drifts); also against
 *             fio with --sync=dsync, and the copying store_append
 *   randread  4 KiB reads of random fragments at random offsets, 32 in
 *             flight, every block crc-checked  vs  fio --rw=randread
 *             --bs=4k --iodepth=32
 *   open      seconds to open the target per GiB of live data
 *
 * Ends with: BENCH store {"append_vs_fio":R,"randread_vs_fio":R,"open_s_per_gib":S}
 * Usage: store [DIR [GiB [ROUNDS]]]   (default: build/bench-store, 1 GiB, 5 rounds;
 * fio and Shoal alternate, the ratios are the medians of the rounds')
 * SH_BENCH_BATCH_KB, SH_BENCH_WRITES: other pipeline shapes; SH_BENCH_NOFIXED: reads
 * without registered buffers; SH_BENCH_FSYNC: fdatasync instead of RWF_DSYNC;
 * SH_BENCH_NODURABLE: appends acknowledged before they are durable (analysis only).
 */
#include <errno.h>
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
	char cmd[1024], runtime[64] = "", line[4096];
	FILE *p;
	double bw = -1;
	bool in_job = false;

	if (secs > 0)
		snprintf(runtime, sizeof(runtime), "--time_based --runtime=%d", secs);
	snprintf(cmd, sizeof(cmd),
		 "fio --name=b --filename=%s --size=%llu --ioengine=io_uring --direct=1 --rw=%s "
		 "--bs=%s --iodepth=32 --numjobs=1 %s %s --output-format=json 2>/dev/null",
		 file, (unsigned long long)size, rw, bs, runtime, extra ? extra : "");
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
	int inflight, rc;
	struct sh_rand rng;
};

/* One request's buffer (a fragment or a 4 KiB read), reused once its callback ran. */
struct slot {
	uint8_t buf[FRAG] __attribute__((aligned(4096)));
	bool busy;
	struct ctx *c;
};

static struct slot slots[QD];

static void
done(struct ctx *c, int rc)
{
	c->inflight--;
	if (rc < 0 && c->rc == 0)
		c->rc = rc;
}

static void
ctx_cb(void *arg, int rc)
{
	done(arg, rc);
}

static void
slot_cb(void *arg, int rc)
{
	struct slot *sl = arg;

	sl->busy = false;
	done(sl->c, rc);
}

static void
wait_all(struct ctx *c)
{
	while (c->inflight > 0)
		env_real_run_once(c->env, 100 * SH_NSEC_PER_MSEC);
}

/* A slot with no request in flight; NULL when all are busy. */
static struct slot *
free_slot(void)
{
	for (int k = 0; k < QD; k++)
		if (!slots[k].busy)
			return &slots[k];
	return NULL;
}

static int
open_target(struct ctx *c, const char *drive, const struct store_opts *so)
{
	c->inflight = 1;
	if (store_open(c->env, drive, so, &c->s, ctx_cb, c) < 0)
		return -1;
	wait_all(c);
	if (c->rc < 0) {
		fprintf(stderr, "bench/store: open: %s\n", sh_strerror(c->rc));
		return -1;
	}
	return 0;
}

struct append_result {
	double bw, cpu_s;
	uint64_t writes, copied;
};

/*
 * Format a target on drive and append nfrags fragments, 32 in flight:
 * from the slots' buffers (copy false: store_append_ref) or copied
 * (store_append). The target stays open in c.
 */
static int
shoal_append(struct ctx *c, const char *drive, uint64_t nfrags, bool copy,
	     struct append_result *out)
{
	struct store_format_opts fo = { .target_id = 1 };
	struct store_opts so = {
		.batch_max = getenv("SH_BENCH_BATCH_KB")
				 ? (uint32_t)atoi(getenv("SH_BENCH_BATCH_KB")) << 10
				 : 0,
		.writes_max =
		    getenv("SH_BENCH_WRITES") ? (unsigned)atoi(getenv("SH_BENCH_WRITES")) : 0,
		.sync_by_fsync = getenv("SH_BENCH_FSYNC") != NULL,
		/* SH_BENCH_NODURABLE: acknowledged when written, as fio's are (analysis only) */
		.unsafe_ack_before_durable = getenv("SH_BENCH_NODURABLE") != NULL,
	};
	uint64_t bytes = nfrags * FRAG, t0, cpu0;
	struct store_stats st;

	c->inflight = 1;
	if (store_format(c->env, drive, bytes + bytes / 8 + (64u << 20), &fo, ctx_cb, c) < 0)
		return -1;
	wait_all(c);
	if (c->rc < 0 || open_target(c, drive, &so) < 0)
		return -1;
	cpu0 = sh_clock_cpu_ns();
	t0 = sh_clock_mono_ns();
	for (uint64_t i = 0; i < nfrags;) {
		struct slot *sl;

		while ((sl = free_slot()) != NULL && i < nfrags) {
			int rc;

			memcpy(sl->buf, &i, sizeof(i)); /* each fragment differs */
			sl->busy = true;
			sl->c = c;
			rc = copy ? store_append(c->s, i, 0, sl->buf, FRAG, slot_cb, sl)
				  : store_append_ref(c->s, i, 0, sl->buf, FRAG, slot_cb, sl);
			if (rc < 0)
				return -1;
			c->inflight++;
			i++;
		}
		env_real_run_once(c->env, 100 * SH_NSEC_PER_MSEC);
	}
	wait_all(c);
	out->bw = (double)bytes / ((double)(sh_clock_mono_ns() - t0) / 1e9);
	out->cpu_s = (double)(sh_clock_cpu_ns() - cpu0) / 1e9;
	store_stats(c->s, &st);
	out->writes = st.batches;
	out->copied = st.appends_copied;
	if (c->rc < 0) {
		fprintf(stderr, "bench/store: append: %s\n", sh_strerror(c->rc));
		return -1;
	}
	return 0;
}

/* Close and reopen the target: seconds. */
static double
shoal_reopen(struct ctx *c, const char *drive)
{
	uint64_t t0;

	store_close(c->s);
	t0 = sh_clock_mono_ns();
	if (open_target(c, drive, NULL) < 0)
		return -1;
	return (double)(sh_clock_mono_ns() - t0) / 1e9;
}

/* 4 KiB reads at random for secs, 32 in flight: IOPS, or -1. */
static double
shoal_randread(struct ctx *c, uint64_t nfrags, int secs, bool *fixed)
{
	/* the reader's buffers are registered, as the data path registers its pools */
	int slot =
	    getenv("SH_BENCH_NOFIXED") ? -1 : env_disk_buf_register(c->env, slots, sizeof(slots));
	uint64_t t0 = sh_clock_mono_ns(), reads = 0;

	*fixed = slot >= 0;
	while (sh_clock_mono_ns() - t0 < (uint64_t)secs * SH_NSEC_PER_SEC) {
		struct slot *sl;

		while ((sl = free_slot()) != NULL) {
			uint64_t f = sh_rand_below(&c->rng, nfrags);
			uint64_t off = sh_rand_below(&c->rng, FRAG / 4096) * 4096;

			sl->busy = true;
			sl->c = c;
			if (store_read(c->s, f, 0, off, 4096, sl->buf, slot_cb, sl) < 0)
				return -1;
			c->inflight++;
			reads++;
		}
		env_real_run_once(c->env, 100 * SH_NSEC_PER_MSEC);
	}
	wait_all(c);
	env_disk_buf_unregister(c->env, slot);
	if (c->rc < 0) {
		fprintf(stderr, "bench/store: read: %s\n", sh_strerror(c->rc));
		return -1;
	}
	return (double)reads / ((double)(sh_clock_mono_ns() - t0) / 1e9);
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
	uint64_t bytes = (uint64_t)(gib * (1u << 30)), nfrags = bytes / FRAG;
	uint64_t fsize = bytes + bytes / 8 + (64u << 20);
	char drive[4096];
	double r_app[16], r_copy[16], r_rd[16], r_sync[16], r_open[16], r_dur[16];

	if (rounds < 1 || rounds > 16)
		rounds = 5;
	mkdir(dir, 0755);
	/*
	 * One file for both, written by fio first, as a drive that has been
	 * used: on a freshly allocated file ext4 converts "unwritten" extents
	 * on the first write of each block and every fsync commits the
	 * journal; a block device (production) has no such cost. The same
	 * file, because where a file lies on this virtual disk changes its
	 * speed.
	 */
	snprintf(drive, sizeof(drive), "%s/target.dat", dir);
	unlink(drive);
	if (fio_bw(drive, "write", "1m", fsize, 0, NULL, NULL) <= 0) {
		fprintf(stderr, "bench/store: fio did not run (is it installed?)\n");
		return 1;
	}
	for (int r = 0; r < rounds; r++) {
		struct ctx c = { 0 };
		struct append_result ref, cp;
		double fw0, fw1, fw2, fws, friops = 0, open_s, rd_iops;
		bool fixed;

		c.env = env_real_create(NULL);
		sh_rand_seed(&c.rng, (uint64_t)r + 1);
		for (int k = 0; k < QD; k++)
			sh_rand_fill(&c.rng, slots[k].buf, FRAG);
		/*
		 * fio, Shoal, fio: the append between two of fio's writes; then
		 * the copying append, reopened and read at random, and fio again
		 */
		fw0 = fio_bw(drive, "write", "128k", fsize, 0, NULL, NULL);
		if (shoal_append(&c, drive, nfrags, false, &ref) < 0)
			return 1;
		store_close(c.s);
		fw1 = fio_bw(drive, "write", "128k", fsize, 0, NULL, NULL);
		if (shoal_append(&c, drive, nfrags, true, &cp) < 0)
			return 1;
		open_s = shoal_reopen(&c, drive);
		if (open_s < 0)
			return 1;
		rd_iops = shoal_randread(&c, nfrags, 3, &fixed);
		store_close(c.s);
		env_real_destroy(c.env);
		fw2 = fio_bw(drive, "write", "128k", fsize, 0, NULL, NULL);
		/* the same writes made durable as Shoal's are: O_DSYNC, each write durable */
		fws = fio_bw(drive, "write", "128k", fsize, 0, NULL, "--sync=dsync");
		if (fio_bw(drive, "randread", "4k", bytes, 3, &friops, NULL) <= 0 || rd_iops < 0)
			return 1;
		if (fw0 <= 0 || fw1 <= 0 || fw2 <= 0 || fws <= 0 || friops <= 0)
			return 1;
		printf(
		    "round %d: append %5.0f MB/s (%llu writes, %llu copied, %.2f s cpu), copying "
		    "%5.0f MB/s (%.2f s cpu); fio %5.0f/%5.0f/%5.0f MB/s, O_DSYNC %5.0f MB/s; "
		    "randread %6.0f IOPS%s, fio %6.0f IOPS; open %.3f s\n",
		    r + 1, ref.bw / 1e6, (unsigned long long)ref.writes,
		    (unsigned long long)ref.copied, ref.cpu_s, cp.bw / 1e6, cp.cpu_s, fw0 / 1e6,
		    fw1 / 1e6, fw2 / 1e6, fws / 1e6, rd_iops, fixed ? " (fixed buffers)" : "",
		    friops, open_s);
		fflush(stdout);
		r_app[r] = ref.bw / ((fw0 + fw1) / 2);
		r_copy[r] = cp.bw / ((fw1 + fw2) / 2);
		r_sync[r] = ref.bw / fws;
		r_dur[r] = fws / fw2; /* what durability costs fio itself, just after */
		r_rd[r] = rd_iops / friops;
		r_open[r] = open_s / gib;
	}
	unlink(drive);
	printf("medians of %d rounds: append %.2fx fio (%.2fx fio with O_DSYNC, which itself "
	       "runs at %.2fx fio; copying store_append %.2fx fio), random read %.2fx fio, open "
	       "%.3f s per GiB\n",
	       rounds, median(r_app, rounds), median(r_sync, rounds), median(r_dur, rounds),
	       median(r_copy, rounds), median(r_rd, rounds), median(r_open, rounds));
	printf("BENCH store "
	       "{\"append_vs_fio\":%.2f,\"randread_vs_fio\":%.2f,\"open_s_per_gib\":%.3f}\n",
	       median(r_app, rounds), median(r_rd, rounds), median(r_open, rounds));
	return 0;
}
