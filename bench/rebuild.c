// SPDX-License-Identifier: Apache-2.0
/*
 * bench/rebuild (make bench-rebuild): self-healing on a 7-node local
 * cluster, 4+2 (docs/healing.md, docs/performance.md "Rebuild").
 *
 * A file of SH_BENCH_GIB GiB (default 2) is written. A: node 7 is kill -9'd and
 * left down (rebuild-delay 1 s), nothing else running, until `GET
 * /v1/rebuild` says full protection: rebuild_s is the time from the kill.
 * The ideal time in the same run: node 7's bytes B read D times and
 * written once, spread over the 6 survivors, at the per-target rates fio
 * measures on the drive files' file system with 6 jobs at once (the
 * targets share one disk here): D*B/(6*read) + B/(6*write). Node 7 stays
 * down; node 8 joins (`shoal local add`) with an empty drive, and the
 * targets' fill evens out: rebalance_fill_max_over_mean once it does (or
 * as it is after 10 min). Client sequential reads (1 MiB, 8 threads) are
 * timed for 10 s. B: node 6 is kill -9'd while the same readers run,
 * held down 8 s past its detection (rebuild-delay 60 s: the reads around it alone), then let
 * go (1 s): the readers' throughput from the rebuild's start to its end
 * against before. C: nodes 5 and 4 are kill -9'd at once: last_parity_s is
 * the time until no stripe misses two fragments (the most endangered are
 * rebuilt first).
 * SH_BENCH_SHARE sets rebuild-share (default 30). Prints, last:
 * BENCH rebuild {"rebuild_s":X,"ideal_s":X,"vs_ideal":R,"last_parity_s":X,
 *   "client_read_during_vs_before":R,"rebalance_fill_max_over_mean":R}
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
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../src/base/http.h"
#include "bench.h"

#define MIB	   (1u << 20)
#define READERS	   8
#define NODES	   7
#define BEFORE_S   10
#define DEGRADED_S 8

static char bin[PATH_MAX], dir[PATH_MAX], addr[64];
static sh_fs *fs;
static uint64_t file_size;
static atomic_ullong read_bytes;
static atomic_bool readers_stop;

#define die(...) bench_die("bench/rebuild", __VA_ARGS__)

static json_t *
api(const char *path)
{
	char *body = NULL;
	json_t *j = NULL;

	if (sh_http_call(addr, bench_token(), "GET", path, NULL, &body, 10) == 200)
		j = json_loads(body, 0, NULL);
	free(body);
	return j;
}

static long long
jnum(json_t *o, const char *k)
{
	return (long long)json_integer_value(json_object_get(o, k));
}

/* Stripes missing at least `from` fragments, as the status counts them. */
static long long
missing_at_least(json_t *s, unsigned from)
{
	json_t *lv = json_object_get(s, "levels");
	long long n = 0;

	for (size_t i = from; i < json_array_size(lv); i++)
		n += jnum(json_array_get(lv, i), "stripes");
	return n;
}

static bool
state_is(json_t *s, const char *want)
{
	const char *st = json_string_value(json_object_get(s, "state"));

	return st != NULL && strcmp(st, want) == 0;
}

struct worker {
	pthread_t th;
	unsigned idx;
	bool write;
	int err;
};

static void *
writer(void *arg)
{
	struct worker *w = arg;
	uint64_t part = file_size / READERS, off = part * w->idx;
	char *buf = malloc(MIB);
	sh_file *f = NULL;
	int rc = sh_open(fs, "/data", O_WRONLY, 0644, &f);

	for (size_t i = 0; buf && i < MIB; i++)
		buf[i] = (char)(i * 13 + w->idx);
	for (uint64_t done = 0; rc == 0 && done < part; done += MIB)
		if (sh_pwrite(f, buf, MIB, off + done) != (long)MIB)
			rc = -EIO;
	if (f && sh_close(f) < 0 && rc == 0)
		rc = -EIO;
	free(buf);
	w->err = rc;
	return NULL;
}

/* Sequential reads of its eighth of the file, round and round, until told to stop. */
static void *
reader(void *arg)
{
	struct worker *w = arg;
	uint64_t part = file_size / READERS, off = part * w->idx, at = 0;
	char *buf = malloc(MIB);
	sh_file *f = NULL;
	int rc = sh_open(fs, "/data", O_RDONLY, 0, &f);

	while (rc == 0 && buf && !atomic_load(&readers_stop)) {
		long n = sh_pread(f, buf, MIB, off + at);

		if (n != (long)MIB) {
			rc = n < 0 ? (int)n : -EIO;
			break;
		}
		atomic_fetch_add(&read_bytes, MIB);
		at = (at + MIB) % part;
	}
	if (f)
		sh_close(f);
	free(buf);
	w->err = rc;
	return NULL;
}

static void
run(struct worker *w, void *(*fn)(void *))
{
	for (unsigned i = 0; i < READERS; i++) {
		w[i] = (struct worker){ .idx = i };
		pthread_create(&w[i].th, NULL, fn, &w[i]);
	}
}

static void
join(struct worker *w, const char *what)
{
	for (unsigned i = 0; i < READERS; i++) {
		pthread_join(w[i].th, NULL);
		if (w[i].err < 0)
			die("%s: %s", what, sh_strerror(w[i].err));
	}
}

/* The mean per-job bandwidth (bytes/s) of fio rw with jobs at once on the drives' disk. */
static double
fio_per_job(const char *rw, unsigned jobs)
{
	char cmd[PATH_MAX * 5], out[PATH_MAX + 32];
	json_t *j;
	double sum = 0;
	size_t n;

	snprintf(out, sizeof(out), "%s/fio.json", dir);
	snprintf(cmd, sizeof(cmd),
		 "fio --name=base --directory=%s/drives --size=256M --bs=1M --rw=%s --direct=1 "
		 "--iodepth=8 --ioengine=io_uring --numjobs=%u --group_reporting=0 "
		 "--output-format=json --output=%s >/dev/null 2>&1; rm -f %s/drives/base.*",
		 dir, rw, jobs, out, dir);
	if (system(cmd) != 0)
		return 0;
	j = json_load_file(out, 0, NULL);
	n = json_array_size(json_object_get(j, "jobs"));
	for (size_t i = 0; i < n; i++)
		sum += json_number_value(
		    json_object_get(json_object_get(json_array_get(json_object_get(j, "jobs"), i),
						    strcmp(rw, "write") == 0 ? "write" : "read"),
				    "bw_bytes"));
	json_decref(j);
	return n ? sum / (double)n : 0;
}

static int
node_pid(unsigned n)
{
	char path[PATH_MAX + 32];
	json_t *j;
	int pid;

	snprintf(path, sizeof(path), "%s/local.json", dir);
	j = json_load_file(path, 0, NULL);
	pid = (int)json_integer_value(json_array_get(json_object_get(j, "pids"), n - 1));
	json_decref(j);
	if (pid <= 0)
		die("no pid for node %u", n);
	return pid;
}

/* The live bytes on node n's target(s). */
static uint64_t
node_live(unsigned n)
{
	static struct sh_target_usage u[256];
	json_t *d = api("/v1/drives"), *x;
	int k = sh_targets_usage(fs, u, 256);
	uint64_t live = 0;
	size_t i;

	json_array_foreach(d, i, x) if (jnum(x, "node") ==
					(long long)n) for (int t = 0; t < k;
							   t++) if (u[t].target ==
								    (uint64_t)jnum(x, "id")) live +=
	    u[t].live;
	json_decref(d);
	return live;
}

/* Poll the rebuild status until done(s) says so; the seconds it took, or -1 on timeout. */
static double
wait_for(bool (*done)(json_t *s, void *arg), void *arg, double t0, double timeout)
{
	char last[32] = "";

	while (bench_now() - t0 < timeout) {
		json_t *s = api("/v1/rebuild");
		bool ok = s != NULL && done(s, arg);
		const char *st = s ? json_string_value(json_object_get(s, "state")) : "no answer";

		if (st != NULL &&
		    strcmp(st, last) != 0) { /* the states it went through, and when */
			printf("  %6.1f s  %s (%lld lost, %lld down; %lld stripes missing 1, %lld "
			       "missing 2+)\n",
			       bench_now() - t0, st, jnum(s, "targets_lost"),
			       jnum(s, "targets_down"),
			       s ? missing_at_least(s, 1) - missing_at_least(s, 2) : 0,
			       s ? missing_at_least(s, 2) : 0);
			fflush(stdout);
			snprintf(last, sizeof(last), "%s", st);
		}

		json_decref(s);
		if (ok)
			return bench_now() - t0;
		usleep(200000);
	}
	return -1;
}

static bool
is_degraded(json_t *s, void *arg)
{
	(void)arg;
	return state_is(s, "degraded");
}

/* Full protection and the fill even (or as even as it gets): *arg the fill's max/mean. */
static bool
balanced(json_t *s, void *arg)
{
	double f = json_number_value(json_object_get(s, "fill_max_over_mean"));

	*(double *)arg = f;
	return state_is(s, "full") && jnum(s, "balanced_fragments") > 0 && f <= 1.05;
}

static bool
is_full(json_t *s, void *arg)
{
	(void)arg;
	return state_is(s, "full") && missing_at_least(s, 0) > 0;
}

struct rebuild_watch {
	double started, ended; /* when the status first said rebuilding, and full after it */
	unsigned long long bytes_at_start, bytes_at_end;
};

static bool
rebuilt(json_t *s, void *arg)
{
	struct rebuild_watch *w = arg;

	if (w->started == 0 && state_is(s, "rebuilding")) {
		w->started = bench_now();
		w->bytes_at_start = atomic_load(&read_bytes);
	}
	if (w->started > 0 && state_is(s, "full")) {
		w->ended = bench_now();
		w->bytes_at_end = atomic_load(&read_bytes);
		return true;
	}
	return false;
}

static bool seen_two_missing;

static bool
no_last_parity(json_t *s, void *arg)
{
	(void)arg;
	if (state_is(s, "checking"))
		return false;
	if (missing_at_least(s, 2) > 0)
		seen_two_missing = true;
	return seen_two_missing && missing_at_least(s, 2) == 0;
}

int
main(int argc, char **argv)
{
	unsigned gib = getenv("SH_BENCH_GIB") ? (unsigned)atoi(getenv("SH_BENCH_GIB")) : 2;
	unsigned port = getenv("SH_BENCH_PORT") ? (unsigned)atoi(getenv("SH_BENCH_PORT")) : 7840;
	char self[PATH_MAX], tmp[] = "/var/tmp/shoal-bench-rebuild-XXXXXX";
	struct worker w[READERS];
	struct rebuild_watch rw = { 0 };
	char fill_s[32];
	double t0, t1, before, during, degraded, detect_s, rebuild_s, loaded_s, ideal_s,
	    last_parity_s;
	double rr, ww, balance_s;
	double fill = 0;
	uint64_t lost;
	unsigned drive_gib;
	sh_client *cl;

	(void)argc;
	snprintf(self, sizeof(self), "%s", argv[0]);
	snprintf(bin, sizeof(bin), "%s/../bin/shoal", dirname(self));
	if (gib == 0 || mkdtemp(tmp) == NULL)
		die("bad SH_BENCH_GIB or no temporary directory");
	snprintf(dir, sizeof(dir), "%s", tmp);
	file_size = (uint64_t)gib << 30;
	/* 1.5x for parity over 7, the rebuilt share on 4, and room to clean */
	drive_gib = gib * 3 / 4 + 2;
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", port);
	bench_at_exit("%s local down --dir %s --wipe >/dev/null; rm -rf %s", bin, dir, dir);
	printf("bench/rebuild: %d-node local cluster in %s, 4+2, a %u GiB file, %u GiB drives\n",
	       NODES, dir, gib, drive_gib);
	fflush(stdout);
	bench_sh("bench/rebuild",
		 "SHOAL_META_REPLACE=5 %s local up --nodes %d --dir %s --port %u --drive-size %uG "
		 ">/dev/null",
		 bin, NODES, dir, port, drive_gib);
	bench_use_token(dir);
	bench_sh("bench/rebuild",
		 "%s --addr %s fs create data --protection 4+2 --compression none >/dev/null && "
		 "%s --addr %s cluster set rebuild-delay 1 >/dev/null",
		 bin, addr, bin, addr);
	if (getenv("SH_BENCH_SHARE")) /* the rebuild's share of the drives under client load */
		bench_sh("bench/rebuild", "%s --addr %s cluster set rebuild-share %s >/dev/null",
			 bin, addr, getenv("SH_BENCH_SHARE"));
	bench_connect_fs("bench/rebuild", addr, "data", "/data", &cl, &fs);
	t0 = bench_now();
	run(w, writer);
	join(w, "write");
	printf("written: %u GiB in %.1f s\n", gib, bench_now() - t0);
	if (wait_for(is_full, NULL, bench_now(), 120) < 0)
		die("not at full protection after writing");

	lost = node_live(NODES);
	rr = fio_per_job("read", NODES - 1);
	ww = fio_per_job("write", NODES - 1);
	ideal_s = rr > 0 && ww > 0
		      ? 4.0 * (double)lost / ((NODES - 1) * rr) + (double)lost / ((NODES - 1) * ww)
		      : 0;
	printf("node %d holds %.0f MiB; fio per target with %d at once: read %.0f MiB/s, write "
	       "%.0f MiB/s: ideal %.1f s\n",
	       NODES, (double)lost / MIB, NODES - 1, rr / MIB, ww / MIB, ideal_s);
	fflush(stdout);

	/* A: node 7 lost, nothing else running: the rebuild at its own pace */
	t0 = bench_now();
	kill(node_pid(NODES), SIGKILL);
	rebuild_s = wait_for(rebuilt, &rw, t0, 1800);
	if (rebuild_s < 0)
		die("not at full protection 30 min after the loss");
	printf("A: node %d lost, no clients: full protection after %.1f s (rebuilding for %.1f "
	       "s)\n",
	       NODES, rebuild_s, rw.ended - rw.started);
	/* node 8 joins with an empty drive: the data spreads onto it until the fill is even */
	bench_sh("bench/rebuild", "%s local add --dir %s >/dev/null", bin, dir);
	t0 = bench_now();
	balance_s = wait_for(balanced, &fill, t0, 600);
	printf("node %d added: targets' fill max/mean %.3f after %.1f s\n", NODES + 1, fill,
	       balance_s);
	fflush(stdout);

	/* the readers alone, on the nodes B starts with */
	atomic_store(&readers_stop, false);
	atomic_store(&read_bytes, 0);
	run(w, reader);
	sleep(BEFORE_S);
	atomic_store(&readers_stop, true);
	join(w, "read before");
	before = (double)atomic_load(&read_bytes) / BEFORE_S / (1u << 30);
	printf("readers alone on nodes 1-6 and 8: %.3f GiB/s\n", before);

	/*
	 * B: node 6 lost while the readers run: first held down (rebuild-delay 60 s) to
	 * time the detection and the reads around it alone, then let go (1 s)
	 */
	bench_sh("bench/rebuild", "%s --addr %s cluster set rebuild-delay 60 >/dev/null", bin,
		 addr);
	atomic_store(&readers_stop, false);
	atomic_store(&read_bytes, 0);
	run(w, reader);
	t0 = bench_now();
	kill(node_pid(NODES - 1), SIGKILL);
	detect_s = wait_for(is_degraded, NULL, t0, 120);
	if (detect_s < 0)
		die("node %d never marked down", NODES - 1);
	{
		unsigned long long b0 = atomic_load(&read_bytes);
		double d0 = bench_now();

		sleep(DEGRADED_S);
		degraded =
		    (double)(atomic_load(&read_bytes) - b0) / (bench_now() - d0) / (1u << 30);
	}
	bench_sh("bench/rebuild", "%s --addr %s cluster set rebuild-delay 1 >/dev/null", bin, addr);
	memset(&rw, 0, sizeof(rw));
	t1 = bench_now();
	loaded_s = wait_for(rebuilt, &rw, t1, 1800);
	atomic_store(&readers_stop, true);
	join(w, "read during the rebuild");
	if (loaded_s < 0)
		die("not at full protection 30 min after the loss");
	during = rw.ended > rw.started ? (double)(rw.bytes_at_end - rw.bytes_at_start) /
					     (rw.ended - rw.started) / (1u << 30)
				       : 0;
	printf("B: node %d lost under the readers: marked down after %.1f s; readers around it "
	       "%.3f GiB/s (nothing rebuilt yet); full protection %.1f s after it was let go "
	       "(rebuilding for %.1f s, share %s%%); readers %.3f GiB/s meanwhile\n",
	       NODES - 1, detect_s, degraded, loaded_s, rw.ended - rw.started,
	       getenv("SH_BENCH_SHARE") ? getenv("SH_BENCH_SHARE") : "30", during);
	fflush(stdout);

	/* C: two more at once: the stripes at their last parity first */
	t0 = bench_now();
	kill(node_pid(NODES - 2), SIGKILL);
	kill(node_pid(NODES - 3), SIGKILL);
	last_parity_s = wait_for(no_last_parity, NULL, t0, 1800);
	printf("C: nodes %d and %d lost at once: no stripe at its last parity after %.1f s\n",
	       NODES - 2, NODES - 3, last_parity_s);
	sh_fs_close(fs);
	sh_client_close(cl);
	snprintf(fill_s, sizeof(fill_s), "%.3f", fill);
	printf("BENCH rebuild {\"rebuild_s\":%.1f,\"ideal_s\":%.1f,\"vs_ideal\":%.2f,"
	       "\"last_parity_s\":%.1f,\"client_read_during_vs_before\":%.2f,"
	       "\"rebalance_fill_max_over_mean\":%s}\n",
	       rebuild_s, ideal_s, ideal_s > 0 ? rebuild_s / ideal_s : 0, last_parity_s,
	       before > 0 ? during / before : 0, fill_s);
	return 0;
}
