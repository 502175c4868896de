/* SPDX-License-Identifier: Apache-2.0 */
/* What the cluster benchmarks share: a clock, running a command, giving up. */
#ifndef SH_BENCH_BENCH_H
#define SH_BENCH_BENCH_H

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <shoal/client.h>
#include <shoal/sh_errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "../src/base/secret.h"

static inline double
bench_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Give up: "name: what went wrong" on stderr, and exit 1 (the atexit handlers clean up). */
static inline void __attribute__((format(printf, 2, 3), noreturn))
bench_die(const char *name, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

/* Run a shell command; a failure ends the benchmark (its atexit handlers clean up). */
static inline void __attribute__((format(printf, 2, 3)))
bench_sh(const char *name, const char *fmt, ...)
{
	char cmd[8192];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	if (system(cmd) != 0) {
		fprintf(stderr, "%s: failed: %s\n", name, cmd);
		exit(1);
	}
}

/* What tears the benchmark's cluster down, run at exit (unless SH_BENCH_KEEP is set). */
static char bench_down_cmd[16384];

static inline void
bench_down(void)
{
	if (bench_down_cmd[0] && getenv("SH_BENCH_KEEP") == NULL && system(bench_down_cmd) != 0)
		fprintf(stderr, "bench: could not clean up: %s\n", bench_down_cmd);
}

/* Set the clean-up command (printf-like) and run it however the benchmark ends. */
static inline void __attribute__((format(printf, 1, 2))) bench_at_exit(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(bench_down_cmd, sizeof(bench_down_cmd), fmt, ap);
	va_end(ap);
	atexit(bench_down);
}

/*
 * Connect to the cluster at addr and open filesystem fs_name: ready once a
 * file at probe can be created (its bucket has a leader; 10 s at most). A
 * failure ends the benchmark.
 */
static inline void
bench_connect_fs(const char *name, const char *addr, const char *fs_name, const char *probe,
		 sh_client **cl, sh_fs **fs)
{
	sh_file *f;
	int rc = sh_client_connect(addr, NULL, cl);

	if (rc == 0)
		rc = sh_fs_open(*cl, fs_name, fs);
	for (int i = 0; rc == 0 && i < 100; i++) {
		rc = sh_open(*fs, probe, O_WRONLY | O_CREAT, 0644, &f);
		if (rc == 0) {
			sh_close(f);
			break;
		}
		usleep(100000);
		rc = i < 99 ? 0 : rc;
	}
	if (rc < 0)
		bench_die(name, "cannot use the cluster: %s", sh_strerror(rc));
}

/*
 * The admin token of the local cluster in dir for the commands and calls
 * that follow ($SHOAL_TOKEN_FILE, docs/security.md).
 */
static inline void
bench_use_token(const char *dir)
{
	char path[4096], cwd[2048] = "";

	if (dir[0] != '/' && getcwd(cwd, sizeof(cwd)) == NULL)
		cwd[0] = '\0';
	snprintf(path, sizeof(path), "%s%s%.1900s/%s", cwd, cwd[0] ? "/" : "", dir, SH_TOKEN_FILE);
	setenv("SHOAL_TOKEN_FILE", path, 1);
	/* and the cluster's client key for the clients it starts (DIR/client.key) */
	snprintf(path, sizeof(path), "%s%s%.1900s/client.key", cwd, cwd[0] ? "/" : "", dir);
	setenv("SHOAL_KEY_FILE", path, 1);
	unsetenv("SHOAL_TOKEN");
}

/* The admin token given to this process (bench_use_token), or NULL. */
static inline const char *
bench_token(void)
{
	static char t[SH_TOKEN_LEN + 1];

	return sh_token_env(t) > 0 ? t : NULL;
}

/* One thread's share of a sequential pass (bench_sequential). */
struct bench_seq {
	pthread_t th;
	sh_fs *fs;
	const char *path;
	bool write;
	unsigned idx;
	uint64_t part;
	int err;
};

static inline void *
bench_seq_thread(void *arg)
{
	struct bench_seq *q = arg;
	char *buf = malloc(1u << 20);
	uint64_t off = q->idx * q->part;
	sh_file *f = NULL;
	int rc = buf ? sh_open(q->fs, q->path, q->write ? O_WRONLY | O_CREAT : O_RDONLY, 0644, &f)
		     : -ENOMEM;

	for (size_t i = 0; buf && i < (1u << 20); i++)
		buf[i] = (char)(i * 7 + q->idx + (i >> 12) * 13); /* no two 4 KiB alike */
	for (uint64_t done = 0; rc == 0 && done < q->part; done += 1u << 20) {
		long n = q->write ? sh_pwrite(f, buf, 1u << 20, off + done)
				  : sh_pread(f, buf, 1u << 20, off + done);

		if (n != (long)(1u << 20))
			rc = n < 0 ? (int)n : -EIO;
	}
	if (f && sh_close(f) < 0 && rc == 0)
		rc = -EIO;
	free(buf);
	q->err = rc;
	return NULL;
}

#define BENCH_SEQ_INFLIGHT 8

/*
 * MiB/s of one sequential pass over bytes of fs's file at path (made if
 * need be): 1 MiB calls, BENCH_SEQ_INFLIGHT threads each on its part. A
 * failure ends the benchmark.
 */
static inline double
bench_sequential(const char *name, sh_fs *fs, const char *path, uint64_t bytes, bool write)
{
	struct bench_seq q[BENCH_SEQ_INFLIGHT];
	uint64_t part = bytes / BENCH_SEQ_INFLIGHT / (1u << 20) * (1u << 20);
	double t0 = bench_now();

	for (unsigned i = 0; i < BENCH_SEQ_INFLIGHT; i++) {
		q[i] = (struct bench_seq){
			.fs = fs, .path = path, .write = write, .idx = i, .part = part
		};
		pthread_create(&q[i].th, NULL, bench_seq_thread, &q[i]);
	}
	for (unsigned i = 0; i < BENCH_SEQ_INFLIGHT; i++) {
		pthread_join(q[i].th, NULL);
		if (q[i].err < 0)
			bench_die(name, "%s: %s", write ? "write" : "read", sh_strerror(q[i].err));
	}
	return (double)(part * BENCH_SEQ_INFLIGHT) / (1u << 20) / (bench_now() - t0);
}

/*
 * CPU seconds so far of the local cluster in dir's daemons (its
 * local.json's pids), and in *self this process's.
 */
static inline double
bench_cpu(const char *dir, double *self)
{
	char path[4096 + 32];
	json_t *j;
	double s = 0;
	struct rusage ru;
	long tck = sysconf(_SC_CLK_TCK);

	snprintf(path, sizeof(path), "%.4000s/local.json", dir);
	j = json_load_file(path, 0, NULL);
	for (size_t i = 0; j && i < json_array_size(json_object_get(j, "pids")); i++) {
		int pid = (int)json_integer_value(json_array_get(json_object_get(j, "pids"), i));
		char p[64], buf[1024];
		unsigned long ut = 0, st = 0;
		FILE *f;

		snprintf(p, sizeof(p), "/proc/%d/stat", pid);
		f = fopen(p, "r");
		if (f && fgets(buf, sizeof(buf), f)) {
			char *q = strrchr(buf, ')');

			/* fields after the command: state is 3rd; utime 14th, stime 15th */
			if (q &&
			    sscanf(q + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu",
				   &ut, &st) == 2)
				s += (double)(ut + st) / (double)tck;
		}
		if (f)
			fclose(f);
	}
	json_decref(j);
	getrusage(RUSAGE_SELF, &ru);
	*self = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
		(double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
	return s;
}

/*
 * A 6-node local cluster in dir (its first admin port port, drives of
 * drive_gib GiB) with filesystem fs_name (4+2, no compression), connected
 * (bench_connect_fs), torn down at exit (bench_at_exit).
 */
static inline void
bench_cluster_fs(const char *name, const char *bin, const char *dir, unsigned port,
		 unsigned drive_gib, const char *fs_name, const char *probe, sh_client **cl,
		 sh_fs **fs)
{
	char addr[64];

	snprintf(addr, sizeof(addr), "127.0.0.1:%u", port);
	bench_at_exit("%s local down --dir %s --wipe >/dev/null; rm -rf %s", bin, dir, dir);
	bench_sh(name, "%s local up --nodes 6 --dir %s --port %u --drive-size %uG >/dev/null", bin,
		 dir, port, drive_gib);
	bench_use_token(dir);
	bench_sh(name, "%s --addr %s fs create %s --protection 4+2 --compression none >/dev/null",
		 bin, addr, fs_name);
	bench_connect_fs(name, addr, fs_name, probe, cl, fs);
}

#endif /* SH_BENCH_BENCH_H */
