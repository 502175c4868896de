// SPDX-License-Identifier: Apache-2.0
/*
 * bench/fuse (make bench-fuse): the same work through `shoal mount` and
 * through libshoal, in one run, on a 6-node local cluster (4+2):
 * sequential write and read of SH_BENCH_MIB MiB (default 512) with 1 MiB
 * calls; 4 KiB random reads for 5 s; 4 KiB writes into an existing file
 * for 2 s against the same on the local file system; creating 20,000 (SH_BENCH_FILES) files of 4
 * KiB, reading them back, stat of them (through the mount: a data loader's pattern). Needs FUSE
 * (/dev/fuse, fusermount3); says so and stops if it is not usable. Prints, last: BENCH fuse
 * {"seq_read_vs_lib":R,"seq_write_vs_lib":R,"small_files_read_per_s":N,
 *   "create_per_s":N,"stat_per_s":N}
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <shoal/client.h>
#include <shoal/sh_errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench.h"

#define MIB	      (1u << 20)
#define FILES_DEFAULT 20000

static void
die(const char *what, int rc)
{
	fprintf(stderr, "bench/fuse: %s: %s\n", what, rc < 0 ? sh_strerror(rc) : strerror(errno));
	exit(1);
}

/* Microseconds a 4 KiB write(2) takes, for 2 s, into the file at path (which exists). */
static double
small_writes(const char *path)
{
	char buf[4096];
	int fd = open(path, O_WRONLY | O_CREAT, 0644);
	double t0 = bench_now();
	uint64_t n = 0;

	if (fd < 0)
		die(path, 0);
	memset(buf, 0x3c, sizeof(buf));
	while (bench_now() - t0 < 2)
		if (pwrite(fd, buf, sizeof(buf), (off_t)(n++ % 4096) * 4096) !=
		    (ssize_t)sizeof(buf))
			die(path, 0);
	close(fd);
	return (bench_now() - t0) * 1e6 / (double)n;
}

/* GiB/s writing (or reading) the file at path through the mount, 1 MiB at a time. */
static double
mount_seq(const char *path, uint64_t bytes, bool write)
{
	char *buf = malloc(MIB);
	int fd = open(path, write ? O_WRONLY | O_CREAT | O_TRUNC : O_RDONLY, 0644);
	double t0 = bench_now();

	if (fd < 0 || buf == NULL)
		die(path, 0);
	memset(buf, 0x5a, MIB);
	for (uint64_t off = 0; off < bytes; off += MIB)
		if ((write ? pwrite(fd, buf, MIB, (off_t)off) : pread(fd, buf, MIB, (off_t)off)) !=
		    (ssize_t)MIB)
			die(path, 0);
	if (write && fsync(fd) != 0)
		die("fsync", 0);
	close(fd);
	free(buf);
	return (double)bytes / (1u << 30) / (bench_now() - t0);
}

static double
lib_seq(sh_fs *fs, const char *path, uint64_t bytes, bool write)
{
	char *buf = malloc(MIB);
	sh_file *f;
	int rc = sh_open(fs, path, write ? O_WRONLY | O_CREAT | O_TRUNC : O_RDONLY, 0644, &f);
	double t0 = bench_now();

	if (rc < 0 || buf == NULL)
		die(path, rc);
	memset(buf, 0x5a, MIB);
	for (uint64_t off = 0; off < bytes; off += MIB) {
		long n = write ? sh_pwrite(f, buf, MIB, off) : sh_pread(f, buf, MIB, off);

		if (n != (long)MIB)
			die(path, (int)n);
	}
	rc = sh_close(f);
	if (rc < 0)
		die("close", rc);
	free(buf);
	return (double)bytes / (1u << 30) / (bench_now() - t0);
}

int
main(int argc, char **argv)
{
	unsigned mib = getenv("SH_BENCH_MIB") ? (unsigned)atoi(getenv("SH_BENCH_MIB")) : 512;
	/* SH_BENCH_FILES: fewer small files for a quick look (the BENCH line wants 20,000) */
	int nfiles = getenv("SH_BENCH_FILES") ? atoi(getenv("SH_BENCH_FILES")) : FILES_DEFAULT;
	unsigned port = getenv("SH_BENCH_PORT") ? (unsigned)atoi(getenv("SH_BENCH_PORT")) : 7860;
	char self[PATH_MAX], bin[PATH_MAX], tmp[] = "/var/tmp/shoal-bench-fuse-XXXXXX";
	char mnt[PATH_MAX], path[PATH_MAX * 2], addr[64];
	uint64_t bytes = (uint64_t)mib * MIB;
	double mw, mr, lw, lr, t0, create, readback, stats;
	unsigned long rnd = 0;
	sh_client *cl;
	sh_fs *fs;
	int rc;

	(void)argc;
	snprintf(self, sizeof(self), "%s", argv[0]);
	snprintf(bin, sizeof(bin), "%s/../bin/shoal", dirname(self));
	if (access("/dev/fuse", R_OK | W_OK) != 0 || system("command -v fusermount3 >/dev/null")) {
		printf("bench/fuse: FUSE is not usable here (/dev/fuse, fusermount3): nothing "
		       "measured\n");
		return 0;
	}
	if (mkdtemp(tmp) == NULL)
		die("mkdtemp", 0);
	snprintf(mnt, sizeof(mnt), "%s/mnt", tmp);
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", port);
	bench_at_exit(
	    "fusermount3 -u %s 2>/dev/null; %s local down --dir %s --wipe >/dev/null; rm -rf %s",
	    mnt, bin, tmp, tmp);
	printf("bench/fuse: 6-node local cluster in %s, 4+2, %u MiB sequential, %d small files\n",
	       tmp, mib, nfiles);
	fflush(stdout);
	bench_sh("bench/fuse",
		 "%s local up --nodes 6 --dir %s --port %u --drive-size 4G >/dev/null", bin, tmp,
		 port);
	bench_use_token(tmp);
	bench_sh("bench/fuse",
		 "%s --addr %s fs create b --protection 4+2 --compression none >/dev/null", bin,
		 addr);
	mkdir(mnt, 0755);
	rc = sh_client_connect(addr, NULL, &cl);
	if (rc == 0)
		rc = sh_fs_open(cl, "b", &fs);
	for (int i = 0; rc == 0 && i < 100; i++) { /* the root appears once groups elect */
		struct stat st;

		if (sh_stat(fs, "/", &st) == 0)
			break;
		usleep(100000);
	}
	if (rc < 0)
		die("connect", rc);
	bench_sh("bench/fuse", "%s --addr %s mount b %s", bin, addr, mnt);

	/* sequential: through the mount, then the library */
	snprintf(path, sizeof(path), "%s/seq", mnt);
	mw = mount_seq(path, bytes, true);
	mr = mount_seq(path, bytes, false);
	lw = lib_seq(fs, "/seq-lib", bytes, true);
	lr = lib_seq(fs, "/seq-lib", bytes, false);
	printf("sequential 1 MiB: mount write %.3f GiB/s, read %.3f GiB/s; library write %.3f "
	       "GiB/s, read %.3f GiB/s\n",
	       mw, mr, lw, lr);
	/* 4 KiB random reads through the mount */
	{
		int fd = open(path, O_RDONLY);
		char buf[4096];
		unsigned seed = 3;

		t0 = bench_now();
		while (fd >= 0 && bench_now() - t0 < 5) {
			off_t off = (off_t)(rand_r(&seed) % (bytes / 4096)) * 4096;

			if (pread(fd, buf, sizeof(buf), off) == (ssize_t)sizeof(buf))
				rnd++;
		}
		if (fd >= 0)
			close(fd);
		printf("4 KiB random reads through the mount: %.0f IOPS (one thread)\n",
		       rnd / (bench_now() - t0));
	}
	/*
	 * small writes into a file that exists (a log, a database's pages): the
	 * kernel asks the mount for security.capability before each one
	 */
	{
		char local[PATH_MAX];
		double us_mount, us_local;

		snprintf(local, sizeof(local), "%s/small-writes", tmp);
		us_mount = small_writes(path);
		us_local = small_writes(local);
		printf("4 KiB writes into an existing file, one thread: %.1f us each through the "
		       "mount, %.1f us on the local file system (%.1fx)\n",
		       us_mount, us_local, us_mount / us_local);
	}
	/* a data loader's pattern: many small files */
	{
		char data[4096];

		memset(data, 7, sizeof(data));
		snprintf(path, sizeof(path), "%s/small", mnt);
		mkdir(path, 0755);
		t0 = bench_now();
		for (int i = 0; i < nfiles; i++) {
			int fd;

			snprintf(path, sizeof(path), "%s/small/%05d", mnt, i);
			fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
			if (fd < 0 || write(fd, data, sizeof(data)) != (ssize_t)sizeof(data) ||
			    close(fd) != 0)
				die(path, 0);
		}
		create = nfiles / (bench_now() - t0);
		t0 = bench_now();
		for (int i = 0; i < nfiles; i++) {
			int fd;

			snprintf(path, sizeof(path), "%s/small/%05d", mnt, i);
			fd = open(path, O_RDONLY);
			if (fd < 0 || read(fd, data, sizeof(data)) != (ssize_t)sizeof(data))
				die(path, 0);
			close(fd);
		}
		readback = nfiles / (bench_now() - t0);
		sleep(2); /* past the kernel's attribute cache (1 s): stats that ask */
		t0 = bench_now();
		for (int i = 0; i < nfiles; i++) {
			struct stat st;

			snprintf(path, sizeof(path), "%s/small/%05d", mnt, i);
			if (stat(path, &st) != 0)
				die(path, 0);
		}
		stats = nfiles / (bench_now() - t0);
		printf("%d files of 4 KiB through the mount: created %.0f/s, read %.0f/s, stat "
		       "%.0f/s\n",
		       nfiles, create, readback, stats);
	}
	sh_fs_close(fs);
	sh_client_close(cl);
	printf("BENCH fuse {\"seq_read_vs_lib\":%.3f,\"seq_write_vs_lib\":%.3f,"
	       "\"small_files_read_per_s\":%.0f,\"create_per_s\":%.0f,\"stat_per_s\":%.0f}\n",
	       mr / lr, mw / lw, readback, create, stats);
	return 0;
}
