// SPDX-License-Identifier: Apache-2.0
/*
 * bench/store: a drive target on a file against fio on the same file
 * system, in one run (make bench-store):
 *
 *   append    128 KiB fragments, 32 in flight, durable (fsync'd) before
 *             acknowledged   vs  fio --ioengine=io_uring --direct=1
 *             --rw=write --bs=128k --iodepth=32 (no fsync)
 *   randread  4 KiB reads of random fragments at random offsets, 32 in
 *             flight, every block crc-checked  vs  fio --rw=randread
 *             --bs=4k --iodepth=32
 *   open      seconds to open the target per GiB of live data
 *
 * Ends with: BENCH store {"append_vs_fio":R,"randread_vs_fio":R,"open_s_per_gib":S}
 * (the line before it: appends against fio making its writes durable too)
 * Usage: store [DIR [GiB]]   (default: build/bench-store, 1 GiB)
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

int
main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : "build/bench-store";
	double gib = argc > 2 ? atof(argv[2]) : 1.0;
	uint64_t bytes = (uint64_t)(gib * (1u << 30));
	char drive[4096], fiofile[4096];
	struct ctx c = { 0 };
	struct store_format_opts fo = { .target_id = 1,
					.seg_size = getenv("SEG_MB")
							? (uint32_t)atoi(getenv("SEG_MB")) << 20
							: 0 };
	static uint8_t frag[FRAG], rbuf[QD][4096];
	double fio_w, fio_ws, fio_r, fio_riops = 0, app, rd_iops, open_s;
	uint64_t t0, nfrags = bytes / FRAG, reads = 0;
	struct store_stats st;
	struct store_opts so = {
		.batch_max = getenv("BATCH_KB") ? (uint32_t)atoi(getenv("BATCH_KB")) << 10 : 0,
		.writes_max = getenv("WRITES") ? (unsigned)atoi(getenv("WRITES")) : 0
	};

	mkdir(dir, 0755);
	snprintf(fiofile, sizeof(fiofile), "%s/fio.dat", dir);
	/*
	 * One file for both, written once by fio first, as a drive that has been
	 * used: on a freshly allocated file ext4 converts "unwritten" extents on
	 * the first write of each block, and every fsync then commits the
	 * journal; on a block device (production) there is no such cost.
	 */
	snprintf(drive, sizeof(drive), "%s", fiofile);
	unlink(fiofile);
	fio_w = fio_bw(fiofile, "write", "128k", bytes + bytes / 8 + (64u << 20), 0, NULL, NULL);
	if (getenv("SH_BENCH_SHOAL_ONLY") == NULL) {
		/* the same writes made durable as ours are: an fdatasync every 32 writes */
		fio_ws = fio_bw(fiofile, "write", "128k", bytes, 0, NULL, "--fdatasync=32");
		fio_r = fio_bw(fiofile, "randread", "4k", bytes, 5, &fio_riops, NULL);
	} else {
		fio_ws = fio_r = fio_riops = 1; /* profiling Shoal alone */
	}
	if (fio_w <= 0 || fio_r <= 0) {
		fprintf(stderr, "bench/store: fio did not run (is it installed?)\n");
		return 1;
	}

	c.env = env_real_create(NULL);
	sh_rand_seed(&c.rng, 1);
	sh_rand_fill(&c.rng, frag, sizeof(frag));
	c.inflight = 1;
	if (store_format(c.env, drive, bytes + bytes / 8 + (64u << 20), &fo, cb, &c) < 0)
		return 1;
	wait_all(&c);
	c.inflight = 1;
	if (store_open(c.env, drive, &so, &c.s, cb, &c) < 0)
		return 1;
	wait_all(&c);
	if (c.rc < 0) {
		fprintf(stderr, "bench/store: open: %s\n", sh_strerror(c.rc));
		return 1;
	}
	/* append */
	uint64_t cpu0 = sh_clock_cpu_ns();

	t0 = sh_clock_mono_ns();
	for (uint64_t i = 0; i < nfrags;) {
		while (c.inflight < QD && i < nfrags) {
			memcpy(frag, &i, sizeof(i)); /* each fragment differs */
			if (store_append(c.s, i, 0, frag, FRAG, cb, &c) < 0)
				return 1;
			c.inflight++;
			i++;
		}
		env_real_run_once(c.env, 100 * SH_NSEC_PER_MSEC);
	}
	wait_all(&c);
	app = (double)nfrags * FRAG / ((double)(sh_clock_mono_ns() - t0) / 1e9);
	if (getenv("SH_BENCH_VERBOSE"))
		fprintf(stderr, "append: %.2f s wall, %.2f s cpu\n",
			(double)(sh_clock_mono_ns() - t0) / 1e9,
			(double)(sh_clock_cpu_ns() - cpu0) / 1e9);
	store_stats(c.s, &st);
	if (c.rc < 0) {
		fprintf(stderr, "bench/store: append: %s\n", sh_strerror(c.rc));
		return 1;
	}
	/* open */
	store_close(c.s);
	t0 = sh_clock_mono_ns();
	c.inflight = 1;
	store_open(c.env, drive, NULL, &c.s, cb, &c);
	wait_all(&c);
	open_s = (double)(sh_clock_mono_ns() - t0) / 1e9;
	/* random 4 KiB reads */
	cpu0 = sh_clock_cpu_ns();
	t0 = sh_clock_mono_ns();
	while (sh_clock_mono_ns() - t0 < 5 * SH_NSEC_PER_SEC) {
		while (c.inflight < QD) {
			uint64_t f = sh_rand_below(&c.rng, nfrags);
			uint64_t off = sh_rand_below(&c.rng, FRAG / 4096) * 4096;

			if (store_read(c.s, f, 0, off, 4096, rbuf[reads % QD], cb, &c) < 0)
				return 1;
			c.inflight++;
			reads++;
		}
		env_real_run_once(c.env, 100 * SH_NSEC_PER_MSEC);
	}
	wait_all(&c);
	rd_iops = (double)reads / ((double)(sh_clock_mono_ns() - t0) / 1e9);
	if (getenv("SH_BENCH_VERBOSE"))
		fprintf(stderr, "randread: %.2f s wall, %.2f s cpu\n",
			(double)(sh_clock_mono_ns() - t0) / 1e9,
			(double)(sh_clock_cpu_ns() - cpu0) / 1e9);
	store_close(c.s);
	env_real_destroy(c.env);
	unlink(drive);

	printf("append 128 KiB, 32 in flight   shoal %7.0f MB/s (%llu fsyncs)   fio %7.0f MB/s   "
	       "(%.2fx)\n",
	       app / 1e6, (unsigned long long)st.fsyncs, fio_w / 1e6, app / fio_w);
	printf("  the same with an fdatasync every 32 writes, durable as Shoal's: fio %7.0f MB/s   "
	       "(%.2fx)\n",
	       fio_ws / 1e6, app / fio_ws);
	printf("random read 4 KiB, 32 in flight shoal %7.0f IOPS   fio %7.0f IOPS   (%.2fx)\n",
	       rd_iops, fio_riops, rd_iops / fio_riops);
	printf("open: %.3f s for %.2f GiB of live data\n", open_s, gib);
	printf("BENCH store "
	       "{\"append_vs_fio\":%.2f,\"randread_vs_fio\":%.2f,\"open_s_per_gib\":%.3f}\n",
	       app / fio_w, rd_iops / fio_riops, open_s / gib);
	return 0;
}
