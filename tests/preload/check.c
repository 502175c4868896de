// SPDX-License-Identifier: Apache-2.0
/*
 * preload_check DIR: every call libshoal_preload.so intercepts, on files
 * in DIR, each answer (return value, errno, the bytes' checksum) printed
 * one per line. tests/cluster/test_preload.py runs it on a mount without
 * the library and with it: the two transcripts must be the same, errors
 * included, and the second run must have been served. Also a forked
 * child on an inherited descriptor, and threads writing and reading one
 * descriptor at once. Nothing printed depends on the file system beyond
 * what POSIX says (no inode numbers, no block counts).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[4096];

static const char *
at(const char *name)
{
	static char path[2][4200];
	static int k;

	k ^= 1;
	snprintf(path[k], sizeof(path[k]), "%s/%s", dir, name);
	return path[k];
}

/* A descriptor: that it is one (its number is the process's business). */
static int
say_fd(const char *what, int fd)
{
	if (fd < 0)
		printf("%s = -1 %s\n", what, strerrorname_np(errno));
	else
		printf("%s = fd\n", what);
	fflush(stdout);
	return fd;
}

/* One answer: what a call returned, and errno when it failed. */
static long
say(const char *what, long rc)
{
	if (rc < 0)
		printf("%s = -1 %s\n", what, strerrorname_np(errno));
	else
		printf("%s = %ld\n", what, rc);
	fflush(stdout);
	return rc;
}

static uint32_t
sum(const void *p, size_t n)
{
	const uint8_t *b = p;
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 16777619u;
	return h;
}

static void
fill(uint8_t *b, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (uint8_t)(seed * 131 + i * 7 + (i >> 9));
}

/* a read's answer and the checksum of what it read */
static void
say_read(const char *what, long rc, const void *buf)
{
	say(what, rc);
	if (rc > 0)
		printf("  sum %08x\n", sum(buf, (size_t)rc));
}

static void
say_stat(const char *what, int rc, const struct stat *st)
{
	say(what, rc);
	if (rc == 0)
		printf("  size %lld mode %o nlink %lu\n", (long long)st->st_size, st->st_mode,
		       (unsigned long)st->st_nlink);
}

#define BIG (3u << 20)

struct tjob {
	int fd, k;
	uint8_t *buf;
	int bad;
};

static void *
thread_io(void *arg)
{
	struct tjob *j = arg;
	size_t part = BIG / 4;
	uint8_t *back = malloc(part);

	for (int round = 0; round < 4 && back != NULL; round++) {
		fill(j->buf, part, (unsigned)(j->k * 10 + round));
		if (pwrite(j->fd, j->buf, part, (off_t)(part * (size_t)j->k)) != (ssize_t)part)
			j->bad++;
		if (pread(j->fd, back, part, (off_t)(part * (size_t)j->k)) != (ssize_t)part ||
		    memcmp(back, j->buf, part) != 0)
			j->bad++;
	}
	free(back);
	return NULL;
}

int
main(int argc, char **argv)
{
	static uint8_t a[BIG], b[BIG];
	struct stat st;
	struct iovec v[3];
	int fd, fd2, r;
	char *m;

	if (argc != 2) {
		fprintf(stderr, "usage: preload_check DIR\n");
		return 2;
	}
	snprintf(dir, sizeof(dir), "%s", argv[1]);
	fill(a, BIG, 1);

	/* opens and their errors */
	say("open missing", open(at("none"), O_RDONLY));
	say("open missing/x", open(at("none/x"), O_RDONLY));
	say("mkdir d", mkdir(at("d"), 0755));
	say("open dir for writing", open(at("d"), O_WRONLY));
	fd = say_fd("open excl", open(at("f"), O_RDWR | O_CREAT | O_EXCL, 0644));
	say("close excl", close(fd));
	say("open excl again", open(at("f"), O_RDWR | O_CREAT | O_EXCL, 0644));

	/* write, read, offsets */
	fd = say_fd("open rw trunc", open(at("f"), O_RDWR | O_TRUNC));
	say("write 1M+17", write(fd, a, (1u << 20) + 17));
	say("lseek cur", lseek(fd, 0, SEEK_CUR));
	say("lseek end", lseek(fd, 0, SEEK_END));
	say("lseek -1", lseek(fd, -1, SEEK_SET));
	say("lseek data 100", lseek(fd, 100, SEEK_DATA));
	say("lseek hole 100", lseek(fd, 100, SEEK_HOLE));
	say("lseek data past end", lseek(fd, 5 << 20, SEEK_DATA));
	say("lseek set 10", lseek(fd, 10, SEEK_SET));
	say_read("read 100", read(fd, b, 100), b);
	say("lseek cur after read", lseek(fd, 0, SEEK_CUR));
	say_read("pread at 1M", pread(fd, b, 100, 1 << 20), b);
	say_read("pread past end", pread(fd, b, 100, 2 << 20), b);
	say("pread -1", pread(fd, b, 100, -1));
	say_stat("fstat", fstat(fd, &st), &st);
	say_stat("stat by name, open", stat(at("f"), &st), &st);
	say("pwrite hole", pwrite(fd, a, 4096, 2 << 20));
	say_read("pread hole", pread(fd, b, 8192, (2 << 20) - 4096), b);
	say("ftruncate 5000", ftruncate(fd, 5000));
	say("ftruncate -1", ftruncate(fd, -1));
	say_stat("fstat truncated", fstat(fd, &st), &st);
	say("fsync", fsync(fd));
	say("fdatasync", fdatasync(fd));
	say("fcntl getfl", fcntl(fd, F_GETFL) & (O_ACCMODE | O_APPEND));

	/* vectors */
	v[0] = (struct iovec){ a, 10 };
	v[1] = (struct iovec){ a + 1000, 5000 };
	v[2] = (struct iovec){ a + 9000, 1 };
	say("pwritev", pwritev(fd, v, 3, 100));
	say("lseek 0", lseek(fd, 0, SEEK_SET));
	say("writev", writev(fd, v, 3));
	v[0] = (struct iovec){ b, 7 };
	v[1] = (struct iovec){ b + 7, 9000 };
	v[2] = (struct iovec){ b + 9007, 3 };
	say_read("preadv", preadv(fd, v, 3, 0), b);
	say("lseek 0 again", lseek(fd, 0, SEEK_SET));
	say_read("readv", readv(fd, v, 3), b);
	say("preadv2", preadv2(fd, v, 3, 50, 0));
	say("close", close(fd));
	say("close again", close(fd));
	say("read closed", read(fd, b, 1));

	/* access modes */
	fd = say_fd("open ro", open(at("f"), O_RDONLY));
	say("write on ro", write(fd, a, 1));
	say("ftruncate on ro", ftruncate(fd, 0));
	say("fcntl getfl ro", fcntl(fd, F_GETFL) & (O_ACCMODE | O_APPEND));
	say_read("read ro", read(fd, b, BIG), b);
	/* a duplicate shares the offset, as the kernel's does */
	fd2 = say_fd("dup", dup(fd));
	say("lseek dup 3", lseek(fd2, 3, SEEK_SET));
	say("lseek orig cur", lseek(fd, 0, SEEK_CUR));
	say_read("read orig after dup's seek", read(fd, b, 10), b);
	say("close dup", close(fd2));
	m = mmap(NULL, 5000, PROT_READ, MAP_SHARED, fd, 0);
	say("mmap", m == MAP_FAILED ? -1 : 0);
	if (m != MAP_FAILED) {
		printf("  sum %08x\n", sum(m, 5000));
		munmap(m, 5000);
	}
	say("close ro", close(fd));
	fd = say_fd("open wo", open(at("f"), O_WRONLY));
	say("read on wo", read(fd, b, 1));
	say("close wo", close(fd));

	/* appends, creat, a stat by name of an unclosed write */
	fd = say_fd("open append", open(at("f"), O_WRONLY | O_APPEND));
	say("append 300", write(fd, a, 300));
	say("lseek cur after append", lseek(fd, 0, SEEK_CUR));
	say("pwrite on append", pwrite(fd, a, 10, 0));
	say_stat("stat after append", stat(at("f"), &st), &st);
	say("close append", close(fd));
	fd = say_fd("creat g", creat(at("g"), 0600));
	say("write g", write(fd, a, 70000));
	say_stat("stat g unclosed", stat(at("g"), &st), &st);
	say_stat("lstat g unclosed", lstat(at("g"), &st), &st);
	say("close g", close(fd));

	/* copies between descriptors */
	fd = say_fd("open f", open(at("f"), O_RDONLY));
	fd2 = say_fd("open h", open(at("h"), O_WRONLY | O_CREAT | O_TRUNC, 0644));
	say("sendfile", sendfile(fd2, fd, NULL, 4000));
	say("copy_file_range", copy_file_range(fd, NULL, fd2, NULL, 100000, 0));
	say("close h", close(fd2));
	say("close f", close(fd));
	fd = say_fd("open h ro", open(at("h"), O_RDONLY));
	say_read("read h", read(fd, b, BIG), b);
	say("close h ro", close(fd));

	/* a forked child reads an inherited descriptor and writes a file of its own */
	fd = say_fd("open f for fork", open(at("f"), O_RDONLY));
	say_read("parent read before fork", read(fd, b, 1000), b);
	fflush(stdout);
	pid_t pid = fork();

	if (pid == 0) {
		long n = pread(fd, b, 1000, 1000);
		int w = open(at("child"), O_WRONLY | O_CREAT | O_TRUNC, 0644);

		r = n == 1000 && w >= 0 && write(w, a, 200000) == 200000 && close(w) == 0;
		_exit(r ? 0 : 1);
	}
	int status = 0;

	waitpid(pid, &status, 0);
	say("child", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	say_read("parent read after fork", read(fd, b, 1000), b);
	say("close fork's", close(fd));
	fd = say_fd("open child's", open(at("child"), O_RDONLY));
	say_read("read child's", read(fd, b, BIG), b);
	say("close child's", close(fd));

	/* threads: four write and read back their quarters of one descriptor */
	fd = say_fd("open t", open(at("t"), O_RDWR | O_CREAT | O_TRUNC, 0644));
	pthread_t th[4];
	struct tjob jobs[4];
	int bad = 0;

	for (int k = 0; k < 4; k++) {
		jobs[k] = (struct tjob){ .fd = fd, .k = k, .buf = malloc(BIG / 4) };
		pthread_create(&th[k], NULL, thread_io, &jobs[k]);
	}
	for (int k = 0; k < 4; k++) {
		pthread_join(th[k], NULL);
		bad += jobs[k].bad;
		free(jobs[k].buf);
	}
	say("threads' mismatches", bad);
	say_read("read t whole", pread(fd, b, BIG, 0), b);
	say("close t", close(fd));

	/* unlinked while open */
	fd = say_fd("open u", open(at("u"), O_RDWR | O_CREAT | O_TRUNC, 0644));
	say("write u", write(fd, a, 50000));
	say("unlink u", unlink(at("u")));
	say_read("pread unlinked", pread(fd, b, 50000, 0), b);
	say_stat("fstat unlinked", fstat(fd, &st), &st);
	say("close u", close(fd));
	say("stat u", stat(at("u"), &st));
	say("rename f g", rename(at("f"), at("g")));
	say_stat("stat g renamed", stat(at("g"), &st), &st);

	/* stdio: fopen's modes, formatted and binary I/O, seeks, fileno */
	FILE *s = fopen(at("none/x"), "r");

	say("fopen missing", s == NULL ? -1 : 0);
	s = fopen(at("s"), "w");
	say("fopen w", s == NULL ? -1 : 0);
	if (s != NULL) {
		say("fprintf", fprintf(s, "line %d\nline %s\n", 1, "two"));
		say("fwrite", (long)fwrite(a, 1, 100000, s));
		say("ftell", ftell(s));
		say_stat("fstat fileno", fstat(fileno(s), &st), &st);
		say("fclose w", fclose(s));
	}
	s = fopen(at("s"), "r");
	say("fopen r", s == NULL ? -1 : 0);
	if (s != NULL) {
		char line[64];

		say("fgets", fgets(line, sizeof(line), s) == NULL ? -1 : (long)strlen(line));
		say("fgets 2", fgets(line, sizeof(line), s) == NULL ? -1 : (long)strlen(line));
		say_read("fread", (long)fread(b, 1, BIG, s), b);
		say("feof", feof(s) != 0);
		say("fseek 5", fseek(s, 5, SEEK_SET));
		say("fgetc", fgetc(s));
		say("fputc on r", fputc('x', s));
		say("fclose r", fclose(s));
	}
	s = fopen(at("s"), "a+");
	say("fopen a+", s == NULL ? -1 : 0);
	if (s != NULL) {
		say("ftell a+", ftell(s));
		say("fputs", fputs("appended\n", s));
		say("fflush", fflush(s));
		say("rewind", (rewind(s), ftell(s)));
		say_read("fread a+", (long)fread(b, 1, 20, s), b);
		say("fclose a+", fclose(s));
	}
	say("fopen x on existing", fopen(at("s"), "wx") == NULL ? -1 : 0);
	s = fopen(at("s"), "r+");
	say("fopen r+", s == NULL ? -1 : 0);
	if (s != NULL) {
		say("fwrite r+", (long)fwrite("XY", 1, 2, s));
		say("fseek end", fseek(s, 0, SEEK_END));
		say("ftell end", ftell(s));
		say("fclose r+", fclose(s));
	}
	say_stat("stat s", stat(at("s"), &st), &st);
	fd = say_fd("open s", open(at("s"), O_RDONLY));
	say_read("read s", read(fd, b, BIG), b);
	say("close s", close(fd));
	/* a stream never closed: exit flushes it (libc's streams, and this library's) */
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		FILE *u = fopen(at("unclosed"), "w");

		for (int i = 0; u != NULL && i < 5000; i++)
			fprintf(u, "row %d\n", i);
		exit(u != NULL ? 0 : 1);
	}
	waitpid(pid, &status, 0);
	say("unclosed child", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	say_stat("stat unclosed", stat(at("unclosed"), &st), &st);
	return 0;
}
