// SPDX-License-Identifier: Apache-2.0
/*
 * bench/meta (make bench-meta): metadata operations per second on a
 * 6-backend local cluster through libshoal, against the same operations
 * on a local directory in the same run.
 *
 * For 1 and 16 client threads: create N files (each thread in its own
 * share of one directory), stat them (by path; the client caches nothing
 * yet, so every stat is cold), look them up (by parent inode and name),
 * unlink them. Then readdir of a directory of SH_BENCH_DIR_ENTRIES
 * (default 100,000) entries. The local baseline runs the same loops with
 * open(O_CREAT|O_EXCL)+close, stat, fstatat, unlink and readdir in a
 * directory under SH_BENCH_LOCAL_DIR (default /var/tmp).
 *
 * Environment: SH_BENCH_FILES (per thread count, default 4000),
 * SH_BENCH_DIR_ENTRIES, SH_BENCH_PORT (default 7800), SH_BENCH_KEEP=1
 * (leave the cluster running). Prints, last:
 * BENCH meta {"create_per_s":N,"stat_per_s":N,"unlink_per_s":N,
 *             "readdir_entries_per_s":N,"create_vs_local":R}
 * (the 16-thread figures).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
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
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

enum op { OP_CREATE, OP_STAT, OP_LOOKUP, OP_UNLINK, OP_N };
static const char *const op_names[OP_N] = { "create", "stat", "lookup", "unlink" };

struct run {
	bool local;
	sh_fs *fs;
	const char *dir; /* local: an absolute path; shoal: a path in the fs */
	int dirfd;
	uint64_t dir_ino;
	unsigned threads, files; /* files in all */
	enum op op;
	unsigned long errors;
	int first_err;
	pthread_mutex_t mu;
};

struct thr {
	struct run *r;
	unsigned idx;
	pthread_t th;
};

static int
one(struct run *r, unsigned i)
{
	char name[64], path[PATH_MAX];
	struct stat st;
	int rc;

	snprintf(name, sizeof(name), "f%u", i);
	snprintf(path, sizeof(path), "%s/%s", r->dir, name);
	if (r->local) {
		switch (r->op) {
		case OP_CREATE:
			rc = openat(r->dirfd, name, O_CREAT | O_EXCL | O_WRONLY, 0644);
			if (rc >= 0)
				close(rc);
			break;
		case OP_STAT:
			rc = stat(path, &st);
			break;
		case OP_LOOKUP:
			rc = fstatat(r->dirfd, name, &st, AT_SYMLINK_NOFOLLOW);
			break;
		default:
			rc = unlinkat(r->dirfd, name, 0);
		}
		return rc < 0 ? -errno : 0;
	}
	switch (r->op) {
	case OP_CREATE:
		return sh_mknod_at(r->fs, r->dir_ino, name, S_IFREG | 0644, 0, NULL);
	case OP_STAT:
		return sh_stat(r->fs, path, &st);
	case OP_LOOKUP:
		return sh_lookup(r->fs, r->dir_ino, name, &st);
	default:
		return sh_unlink_at(r->fs, r->dir_ino, name);
	}
}

static void *
thr_main(void *arg)
{
	struct thr *t = arg;
	struct run *r = t->r;

	for (unsigned i = t->idx; i < r->files; i += r->threads) {
		int rc = one(r, i);

		if (rc < 0) {
			pthread_mutex_lock(&r->mu);
			if (r->errors++ == 0)
				r->first_err = rc;
			pthread_mutex_unlock(&r->mu);
		}
	}
	return NULL;
}

/* Run op over the files with the run's threads: operations per second. */
static double
phase(struct run *r, enum op op)
{
	struct thr *t = calloc(r->threads, sizeof(*t));
	double t0 = bench_now(), dt;

	r->op = op;
	r->errors = 0;
	for (unsigned i = 0; i < r->threads; i++) {
		t[i] = (struct thr){ .r = r, .idx = i };
		pthread_create(&t[i].th, NULL, thr_main, &t[i]);
	}
	for (unsigned i = 0; i < r->threads; i++)
		pthread_join(t[i].th, NULL);
	dt = bench_now() - t0;
	free(t);
	if (r->errors) {
		fprintf(stderr, "bench/meta: %s %s: %lu errors, first %s\n",
			r->local ? "local" : "shoal", op_names[op], r->errors,
			sh_strerror(r->first_err));
		exit(1);
	}
	return r->files / dt;
}

/* readdir of every entry: entries per second. */
static double
list(struct run *r, unsigned want)
{
	double t0 = bench_now();
	unsigned n = 0;

	if (r->local) {
		DIR *d = opendir(r->dir);
		struct dirent *e;

		while (d && (e = readdir(d)) != NULL)
			n += e->d_name[0] != '.';
		if (d)
			closedir(d);
	} else {
		sh_dir *d;
		struct sh_dirent e;
		int rc = sh_opendir_ino(r->fs, r->dir_ino, &d);

		if (rc == 0)
			while ((rc = sh_readdir(d, &e)) == 1)
				n++;
		if (rc < 0) {
			fprintf(stderr, "bench/meta: readdir: %s\n", sh_strerror(rc));
			exit(1);
		}
		sh_closedir(d);
	}
	if (n != want) {
		fprintf(stderr, "bench/meta: readdir found %u entries, want %u\n", n, want);
		exit(1);
	}
	return n / (bench_now() - t0);
}

static unsigned
env_u(const char *name, unsigned def)
{
	const char *v = getenv(name);

	return v && *v ? (unsigned)strtoul(v, NULL, 10) : def;
}

struct result {
	double ops[OP_N];
};

static void
measure(struct run *r, struct result *res)
{
	if (r->local) {
		mkdir(r->dir, 0755);
		r->dirfd = open(r->dir, O_DIRECTORY | O_RDONLY);
		if (r->dirfd < 0) {
			perror(r->dir);
			exit(1);
		}
	} else {
		struct stat st;
		int rc = sh_mkdir(r->fs, r->dir, 0755);

		if (rc == 0)
			rc = sh_stat(r->fs, r->dir, &st);
		if (rc < 0) {
			fprintf(stderr, "bench/meta: mkdir %s: %s\n", r->dir, sh_strerror(rc));
			exit(1);
		}
		r->dir_ino = st.st_ino;
	}
	for (int op = 0; op < OP_N; op++)
		res->ops[op] = phase(r, (enum op)op);
	if (r->local) {
		close(r->dirfd);
		rmdir(r->dir);
	} else {
		sh_rmdir(r->fs, r->dir);
	}
}

int
main(int argc, char **argv)
{
	char bin[PATH_MAX], tmp[] = "/tmp/shoal-bench-meta-XXXXXX", addr[64], ldir[PATH_MAX];
	unsigned files = env_u("SH_BENCH_FILES", 4000), big = env_u("SH_BENCH_DIR_ENTRIES", 100000);
	unsigned port = env_u("SH_BENCH_PORT", 7800), threads[2] = { 1, 16 };
	const char *lbase = getenv("SH_BENCH_LOCAL_DIR");
	struct result shoal[2], local[2];
	double rd_shoal, rd_local;
	sh_client *cl;
	sh_fs *fs;
	int rc;

	(void)argc;
	{
		char self[PATH_MAX];

		snprintf(self, sizeof(self), "%s", argv[0]);
		snprintf(bin, sizeof(bin), "%s/../bin/shoal", dirname(self));
	}
	if (mkdtemp(tmp) == NULL) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", port);
	printf("bench/meta: 6-node local cluster in %s, %u files per run, %u-entry directory\n",
	       tmp, files, big);
	fflush(stdout);
	bench_at_exit("%s local down --dir %s --wipe >/dev/null", bin, tmp);
	bench_sh("bench/meta",
		 "%s local up --nodes 6 --dir %s --port %u --drive-size 256M >/dev/null", bin, tmp,
		 port);
	bench_use_token(tmp);
	bench_sh("bench/meta", "%s --addr %s fs create bench --protection 4+2 >/dev/null", bin,
		 addr);
	rc = sh_client_connect(addr, NULL, &cl);
	if (rc == 0)
		rc = sh_fs_open(cl, "bench", &fs);
	for (int i = 0; rc == 0 && i < 100; i++) { /* the groups elect, bucket 0 makes the root */
		struct stat st;

		rc = sh_stat(fs, "/", &st);
		if (rc < 0 && i < 99) {
			usleep(100000);
			rc = 0;
			continue;
		}
		break;
	}
	if (rc < 0) {
		fprintf(stderr, "bench/meta: cannot use the cluster: %s\n", sh_strerror(rc));
		return 1;
	}
	snprintf(ldir, sizeof(ldir), "%s/shoal-bench-meta-%d", lbase ? lbase : "/var/tmp",
		 (int)getpid());
	for (int k = 0; k < 2; k++) {
		struct run s = { .fs = fs, .threads = threads[k], .files = files, .dir = "/b" };
		struct run l = {
			.local = true, .threads = threads[k], .files = files, .dir = ldir
		};

		pthread_mutex_init(&s.mu, NULL);
		pthread_mutex_init(&l.mu, NULL);
		measure(&s, &shoal[k]);
		measure(&l, &local[k]);
		for (int op = 0; op < OP_N; op++)
			printf("%2u threads  %-7s shoal %9.0f/s   local %9.0f/s   ratio %.3f\n",
			       threads[k], op_names[op], shoal[k].ops[op], local[k].ops[op],
			       shoal[k].ops[op] / local[k].ops[op]);
		fflush(stdout);
	}
	/* the big directory: filled with 16 threads, listed by one */
	{
		struct run s = { .fs = fs, .threads = 16, .files = big, .dir = "/big" };
		struct run l = { .local = true, .threads = 16, .files = big, .dir = ldir };
		struct stat st;
		double cs, clo;

		pthread_mutex_init(&s.mu, NULL);
		pthread_mutex_init(&l.mu, NULL);
		sh_mkdir(fs, "/big", 0755);
		sh_stat(fs, "/big", &st);
		s.dir_ino = st.st_ino;
		cs = phase(&s, OP_CREATE);
		rd_shoal = list(&s, big);
		mkdir(ldir, 0755);
		l.dirfd = open(ldir, O_DIRECTORY | O_RDONLY);
		clo = phase(&l, OP_CREATE);
		rd_local = list(&l, big);
		phase(&l, OP_UNLINK);
		close(l.dirfd);
		rmdir(ldir);
		printf("%u-entry directory: filled at %.0f/s (local %.0f/s); readdir shoal %.0f "
		       "entries/s, local %.0f entries/s, ratio %.3f\n",
		       big, cs, clo, rd_shoal, rd_local, rd_shoal / rd_local);
	}
	sh_fs_close(fs);
	sh_client_close(cl);
	printf("BENCH meta {\"create_per_s\":%.0f,\"stat_per_s\":%.0f,\"unlink_per_s\":%.0f,"
	       "\"readdir_entries_per_s\":%.0f,\"create_vs_local\":%.3f}\n",
	       shoal[1].ops[OP_CREATE], shoal[1].ops[OP_STAT], shoal[1].ops[OP_UNLINK], rd_shoal,
	       shoal[1].ops[OP_CREATE] / local[1].ops[OP_CREATE]);
	return 0;
}
