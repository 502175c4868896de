// SPDX-License-Identifier: Apache-2.0
/*
 * shoal ns FS COMMAND: the namespace of a filesystem through libshoal
 * (docs/cli.md): stat, ls, mkdir, touch, rm, rmdir, mv, ln, readlink,
 * xattr; and storm / check, a create storm from many threads with a log
 * of what succeeded, and its verification (cluster tests, kill -9).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <shoal/client.h>
#include <shoal/sh_errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "../../base/rand.h"
#include "shoal.h"

static sh_client *cl;
static sh_fs *fs;
static const char *fs_name;

static void
check(int rc, const char *what, const char *path)
{
	if (rc < 0)
		fail("%s %s: %s (%s)", what, path, sh_strerror(rc), sh_errname(rc));
}

static const char *
type_name(mode_t m)
{
	return S_ISDIR(m)    ? "directory"
	       : S_ISREG(m)  ? "file"
	       : S_ISLNK(m)  ? "symlink"
	       : S_ISFIFO(m) ? "fifo"
	       : S_ISSOCK(m) ? "socket"
	       : S_ISCHR(m)  ? "char-device"
			     : "block-device";
}

static void
print_stat(const struct cli *c, const char *path, const struct stat *st)
{
	if (c->json) {
		json_t *j = json_pack(
		    "{s:s, s:I, s:s, s:i, s:i, s:i, s:i, s:I, s:I, s:I}", "path", path, "ino",
		    (json_int_t)st->st_ino, "type", type_name(st->st_mode), "mode",
		    (int)(st->st_mode & 07777), "nlink", (int)st->st_nlink, "uid", (int)st->st_uid,
		    "gid", (int)st->st_gid, "size", (json_int_t)st->st_size, "mtime_ns",
		    (json_int_t)(st->st_mtim.tv_sec * 1000000000ll + st->st_mtim.tv_nsec),
		    "ctime_ns",
		    (json_int_t)(st->st_ctim.tv_sec * 1000000000ll + st->st_ctim.tv_nsec));
		char *s = json_dumps(j, JSON_COMPACT);

		puts(s);
		free(s);
		json_decref(j);
		return;
	}
	printf("%s: %s, inode %llx, mode %04o, links %u, owner %u:%u, size %lld\n", path,
	       type_name(st->st_mode), (unsigned long long)st->st_ino,
	       (unsigned)(st->st_mode & 07777), (unsigned)st->st_nlink, (unsigned)st->st_uid,
	       (unsigned)st->st_gid, (long long)st->st_size);
}

static int
ls(const struct cli *c, const char *path)
{
	sh_dir *d;
	struct sh_dirent e;
	struct stat st;
	unsigned long n = 0;
	int rc = sh_opendir(fs, path, &d);

	check(rc, "ls", path);
	/* --json: each entry with its attributes, most from the listing itself (readdirplus) */
	while ((rc = c->json ? sh_readdir_plus(d, &e, &st) : sh_readdir(d, &e)) == 1) {
		n++;
		if (c->json && st.st_ino == 0 && (rc = sh_getattr(fs, e.ino, &st)) < 0)
			break; /* kept elsewhere: asked for */
		if (c->json) {
			json_t *j = json_pack("{s:s, s:I, s:i, s:i, s:i, s:I}", "name", e.name,
					      "ino", (json_int_t)e.ino, "type", (int)e.type, "mode",
					      (int)(st.st_mode & 07777), "nlink", (int)st.st_nlink,
					      "size", (json_int_t)st.st_size);
			char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;

			if (s != NULL)
				puts(s);
			else /* JSON strings are UTF-8 */
				fprintf(stderr, "shoal: ls: inode %llu: its name is not UTF-8\n",
					(unsigned long long)e.ino);
			free(s);
			json_decref(j);
		} else
			printf("%s%s\n", e.name, e.type == 4 /* DT_DIR */ ? "/" : "");
	}
	sh_closedir(d);
	check(rc, "ls", path);
	if (!c->json)
		fprintf(stderr, "%lu entries\n", n);
	return 0;
}

/* ---- the storm ---- */

struct storm {
	const char *dir, *prefix;
	unsigned files, threads;
	FILE *log;
	pthread_mutex_t mu;
	unsigned long ok, exist, failed;
	uint64_t max_ns;
	double max_at; /* when the slowest create started (seconds since the epoch) */
	int last_err;
};

struct worker {
	struct storm *s;
	unsigned idx;
	pthread_t th;
};

static uint64_t
mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void *
storm_thread(void *arg)
{
	struct worker *w = arg;
	struct storm *s = w->s;
	char path[512];

	for (unsigned i = 0; i < s->files; i++) {
		uint64_t t0 = mono_ns(), dt;
		struct timespec wall;
		int rc;

		clock_gettime(CLOCK_REALTIME, &wall);

		snprintf(path, sizeof(path), "%s/%st%u-%u", s->dir, s->prefix, w->idx, i);
		rc = sh_mknod(fs, path, S_IFREG | 0640, 0);
		dt = mono_ns() - t0;
		pthread_mutex_lock(&s->mu);
		if (dt > s->max_ns) {
			s->max_ns = dt;
			s->max_at = (double)wall.tv_sec + (double)wall.tv_nsec / 1e9;
		}
		if (rc == 0) {
			s->ok++;
			fprintf(s->log, "%s\n", path);
		} else if (rc == -EEXIST) {
			s->exist++; /* a retry after a leader change found our own create */
			fprintf(s->log, "%s\n", path);
		} else {
			s->failed++;
			s->last_err = rc;
		}
		pthread_mutex_unlock(&s->mu);
	}
	return NULL;
}

static int
storm(const struct cli *c, const char *dir, unsigned threads, unsigned files, const char *logp,
      const char *prefix)
{
	struct storm s = { .dir = dir, .prefix = prefix, .files = files, .threads = threads };
	struct worker *w = calloc(threads, sizeof(*w));
	uint64_t t0 = mono_ns();
	double secs;

	(void)c;
	s.log = fopen(logp, "w");
	if (s.log == NULL || w == NULL)
		fail("cannot write %s", logp);
	pthread_mutex_init(&s.mu, NULL);
	for (unsigned i = 0; i < threads; i++) {
		w[i] = (struct worker){ .s = &s, .idx = i };
		if (pthread_create(&w[i].th, NULL, storm_thread, &w[i]) != 0)
			fail("cannot start thread %u", i);
	}
	for (unsigned i = 0; i < threads; i++)
		pthread_join(w[i].th, NULL);
	fclose(s.log);
	free(w);
	secs = (double)(mono_ns() - t0) / 1e9;
	printf("{\"created\":%lu,\"existed\":%lu,\"failed\":%lu,\"last_error\":\"%s\","
	       "\"max_latency_ms\":%.1f,\"max_at\":%.3f,\"seconds\":%.2f,\"per_s\":%.0f}\n",
	       s.ok, s.exist, s.failed, s.failed ? sh_errname(s.last_err) : "",
	       (double)s.max_ns / 1e6, s.max_at, secs, (double)(s.ok + s.exist) / secs);
	return s.failed ? 1 : 0;
}

/* Every path in the log exists, as a regular file with mode 0640. */
static int
verify(const char *logp)
{
	FILE *f = fopen(logp, "r");
	char line[600];
	unsigned long ok = 0, bad = 0;

	if (f == NULL)
		fail("cannot read %s", logp);
	while (fgets(line, sizeof(line), f)) {
		struct stat st;
		int rc;

		line[strcspn(line, "\n")] = '\0';
		if (line[0] == '\0')
			continue;
		rc = sh_stat(fs, line, &st);
		if (rc == 0 && S_ISREG(st.st_mode) && (st.st_mode & 07777) == 0640) {
			ok++;
		} else {
			bad++;
			fprintf(stderr, "shoal: %s: %s\n", line,
				rc < 0 ? sh_strerror(rc) : "wrong type or mode");
		}
	}
	fclose(f);
	printf("{\"found\":%lu,\"missing\":%lu}\n", ok, bad);
	return bad ? 1 : 0;
}

#define COH_LEN (3u << 20) /* several stripes */

/* Write the file whole: len bytes, all v (created, or cut to nothing first). */
static void
fill_write(sh_fs *f, const char *path, uint8_t v, size_t len)
{
	uint8_t *b = malloc(len);
	sh_file *h;

	if (b == NULL)
		fail("out of memory");
	memset(b, v, len);
	check(sh_open(f, path, O_WRONLY | O_CREAT | O_TRUNC, 0644, &h), "open", path);
	check((int)(sh_pwrite(h, b, len, 0) < 0 ? -EIO : 0), "write", path);
	check(sh_close(h), "close", path);
	free(b);
}

/* One read of up to cap bytes at 0 through h into b: v if len came and every one is v, else -1. */
static int
uniform_read(sh_file *h, const char *path, uint8_t *b, size_t cap, size_t len)
{
	long n = sh_pread(h, b, cap, 0);

	check((int)(n < 0 ? n : 0), "read", path);
	if (n != (long)len)
		return -1;
	for (size_t i = 1; i < len; i++)
		if (b[i] != b[0])
			return -1;
	return b[0];
}

/*
 * A handle keeps its file's extents between reads: it must never return a
 * mix, nor fail, when they go stale. Same client: another handle's write
 * is read at once. Another client (close-to-open): the old bytes until
 * their stripes are released, then the new ones, never an error.
 */
static int
data_coherence(sh_fs *fb, const char *path)
{
	uint8_t *b = malloc(COH_LEN);
	sh_file *h;
	int same, other = 1, bad = 0, v;
	uint64_t t0;

	if (b == NULL)
		fail("out of memory");
	fill_write(fs, path, 1, COH_LEN);
	check(sh_open(fs, path, O_RDONLY, 0, &h), "open", path);
	bad += uniform_read(h, path, b, COH_LEN, COH_LEN) != 1;
	fill_write(fs, path, 2, COH_LEN); /* another handle of this client */
	same = uniform_read(h, path, b, COH_LEN, COH_LEN);
	bad += same != 2;
	fill_write(fb, path, 3, COH_LEN); /* the other client */
	t0 = mono_ns();
	do {
		v = uniform_read(h, path, b, COH_LEN, COH_LEN);
		bad += v != 2 && v != 3;
		if (v == 3)
			other = 3;
		else
			usleep(20000);
	} while (v != 3 && mono_ns() - t0 < 10000000000ull);
	check(sh_close(h), "close", path);
	printf("\"data_same_client\":%d,\"data_other_client\":%d,\"data_other_seen_ms\":%.0f,"
	       "\"data_bad_reads\":%d}\n",
	       same, other, (double)(mono_ns() - t0) / 1e6, bad);
	free(b);
	return bad == 0 && same == 2 ? 0 : 1;
}

/* Open (by path: a lookup that may bring the bytes along) and read a small file: v, or -1. */
static int
small_read(sh_fs *f, const char *path, size_t len)
{
	uint8_t b[1000];
	sh_file *h;
	int v;

	check(sh_open(f, path, O_RDONLY, 0, &h), "open", path);
	v = uniform_read(h, path, b, sizeof(b), len);
	check(sh_close(h), "close", path);
	return v;
}

/*
 * Small files, whose bytes a client keeps with their attributes: its own
 * rewrite is read at once; another client's (same size) once the bucket
 * recalled what this one kept (not when a lease runs out), never a mix.
 */
static int
small_coherence(sh_fs *fb, const char *path)
{
	char p[4200];
	int bad = 0, v = 0;
	uint64_t t0, seen;

	snprintf(p, sizeof(p), "%s.small", path);
	fill_write(fs, p, 1, 700);
	for (int i = 0; i < 3; i++)
		bad += small_read(fs, p, 700) != 1; /* the second and third from what A keeps */
	fill_write(fs, p, 2, 700);
	bad += small_read(fs, p, 700) != 2;
	fill_write(fb, p, 3, 700); /* the other client */
	t0 = mono_ns();
	do {
		v = small_read(fs, p, 700);
		bad += v != 2 && v != 3;
	} while (v != 3 && mono_ns() - t0 < 3000000000ull);
	seen = mono_ns() - t0;
	fill_write(fb, p, 4, 300); /* shorter */
	t0 = mono_ns();
	do
		v = small_read(fs, p, 300);
	while (v != 4 && mono_ns() - t0 < 3000000000ull);
	bad += v != 4;
	check(sh_unlink(fs, p), "unlink", p);
	printf("\"small_other_seen_ms\":%.2f,\"small_bad_reads\":%d,", (double)seen / 1e6, bad);
	return bad == 0 ? 0 : 1;
}

/*
 * Two clients in one process: A caches PATH's attributes, B changes its
 * mode; how long until A sees it (a recall, not the lease running out), and
 * how fast A's repeated stats are (from its cache; the best of 10 batches).
 * One JSON line.
 */
static int
coherence(const struct cli *c, const char *path)
{
	sh_client *cb;
	sh_fs *fb;
	struct stat st;
	uint64_t t0, best = 0, seen = 0;
	int rc, n = 2000;

	check(sh_client_connect(c->addr, NULL, &cb), "connect to", c->addr);
	check(sh_fs_open(cb, fs_name, &fb), "open filesystem", fs_name);
	check(sh_chmod(fb, path, 0644), "chmod", path);
	check(sh_stat(fs, path, &st), "stat", path); /* A caches it */
	/*
	 * The best of batches: what a stat costs, not how often a busy machine
	 * ran another process. Batches for 2 s at least: a leader about to hand
	 * its group over gives no cache leases for 1.1 s (msvc_balance.c), and
	 * a slow start (sanitizers) may put one here.
	 */
	uint64_t until = mono_ns() + 2000000000ull;

	for (int b = 0; b < 10 || (mono_ns() < until && b < 1000); b++) {
		t0 = mono_ns();
		for (int i = 0; i < n / 10; i++)
			check(sh_stat(fs, path, &st), "stat", path);
		t0 = mono_ns() - t0;
		if (b == 0 || t0 < best)
			best = t0;
	}
	{
		double per = (double)best / (n / 10) / 1000.0;
		uint64_t t1;

		check(sh_chmod(fb, path, 0600), "chmod", path); /* B changes it */
		t1 = mono_ns();
		do {
			rc = sh_stat(fs, path, &st);
			check(rc, "stat", path);
			if ((st.st_mode & 07777) == 0600) {
				seen = mono_ns() - t1;
				break;
			}
		} while (mono_ns() - t1 < 3000000000ull);
		printf("{\"cached_stat_us\":%.2f,\"change_seen_ms\":%.2f,\"seen\":%s,", per,
		       (double)seen / 1e6, (st.st_mode & 07777) == 0600 ? "true" : "false");
	}
	rc = small_coherence(fb, path);
	rc |= data_coherence(fb, path);
	sh_fs_close(fb);
	sh_client_close(cb);
	return (st.st_mode & 07777) == 0600 && rc == 0 ? 0 : 1;
}

/*
 * Random writes through one handle (sizes from a byte to several stripes,
 * of random, text-like or patterned bytes, so compressed and raw blocks mix,
 * overlapping, some in flight in the background while the next ones
 * fill), with reads and truncates between, checked byte for byte against
 * a model: through the same handle, then through a new one.
 */
#define SCRIBBLE_MAX (6u << 20)

static int
scribble_check(sh_file *h, const uint8_t *model, uint64_t size, uint8_t *buf, const char *when)
{
	long n = sh_pread(h, buf, SCRIBBLE_MAX, 0);

	check((int)(n < 0 ? n : 0), "read", when);
	if ((uint64_t)n != size || memcmp(buf, model, size) != 0) {
		uint64_t i = 0;

		while (i < size && i < (uint64_t)n && buf[i] == model[i])
			i++;
		fprintf(stderr, "shoal: %s: read %ld bytes, want %llu; first difference at %llu\n",
			when, n, (unsigned long long)size, (unsigned long long)i);
		return 1;
	}
	return 0;
}

static int
scribble(const char *path, unsigned long long seed)
{
	uint8_t *model = calloc(1, SCRIBBLE_MAX), *buf = malloc(SCRIBBLE_MAX);
	uint64_t size = 0, x = seed * 2654435761ull + 1;
	struct sh_rand rnd;
	sh_file *h;
	int bad = 0;

	sh_rand_seed(&rnd, seed);
	if (model == NULL || buf == NULL)
		fail("out of memory");
	check(sh_open(fs, path, O_RDWR | O_CREAT | O_TRUNC, 0644, &h), "open", path);
	for (int op = 0; op < 120 && !bad; op++) {
		uint64_t r, off, len;

		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		r = x % 100;
		off = (x >> 8) % (SCRIBBLE_MAX / 2);
		len = r < 40 ? 1 + (x >> 32) % 4096 : 1 + (x >> 32) % (SCRIBBLE_MAX / 2);
		if (r < 88) {
			/* bytes that compress well, some, or not at all: blocks of every kind */
			if (op % 3 == 0) {
				sh_rand_fill(&rnd, buf, len);
			} else if (op % 3 == 1) {
				sh_rand_text(&rnd, buf, len);
			} else {
				for (uint64_t i = 0; i < len; i++)
					buf[i] = (uint8_t)(op * 31 + i * 7 + (i >> 12));
			}
			check((int)(sh_pwrite(h, buf, len, off) < 0 ? -EIO : 0), "write", path);
			memcpy(model + off, buf, len);
			if (off + len > size)
				size = off + len;
		} else if (r < 94) {
			off = off * 2 % SCRIBBLE_MAX;
			check(sh_ftruncate(h, off), "truncate", path);
			if (off > size)
				memset(model + size, 0, off - size);
			else
				memset(model + off, 0, SCRIBBLE_MAX - off);
			size = off;
		} else {
			bad |=
			    scribble_check(h, model, size, buf, "read through the writing handle");
		}
	}
	bad |= scribble_check(h, model, size, buf, "read through the writing handle");
	check(sh_close(h), "close", path);
	check(sh_open(fs, path, O_RDONLY, 0, &h), "open", path);
	bad |= scribble_check(h, model, size, buf, "read through a new handle");
	check(sh_close(h), "close", path);
	printf("{\"size\":%llu,\"ok\":%s}\n", (unsigned long long)size, bad ? "false" : "true");
	free(model);
	free(buf);
	return bad;
}

/*
 * The asynchronous calls from one thread: a file written by 128 writes of
 * 64 KiB all in flight at once, an fsync, then 512 random reads of 4 KiB
 * in flight at once and a vectored read, checked byte for byte.
 */
#define AIO_LEN (8u << 20)
#define AIO_W	128
#define AIO_R	512

struct aio_wait {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	unsigned done, bad;
};

static void
aio_done(sh_io *io)
{
	struct aio_wait *w = io->data;
	long want = 0;

	for (int i = 0; i < io->iovcnt; i++)
		want += (long)io->iov[i].iov_len;
	pthread_mutex_lock(&w->mu);
	if (io->result != (io->op == SH_IO_FSYNC ? 0 : want)) {
		if (w->bad++ < 3)
			fprintf(stderr, "shoal: asynchronous %s at %llu: %ld, want %ld\n",
				io->op == SH_IO_READ	? "read"
				: io->op == SH_IO_WRITE ? "write"
							: "fsync",
				(unsigned long long)io->off, io->result, want);
	}
	w->done++;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
}

static void
aio_wait_for(struct aio_wait *w, unsigned n)
{
	pthread_mutex_lock(&w->mu);
	while (w->done < n)
		pthread_cond_wait(&w->cv, &w->mu);
	pthread_mutex_unlock(&w->mu);
}

static int
aio_check(const char *path)
{
	static sh_io ios[AIO_R];
	static struct iovec iov[AIO_R];
	static uint8_t got[AIO_R][4096];
	uint8_t *data = malloc(AIO_LEN), *back = malloc(AIO_LEN);
	struct aio_wait w = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0 };
	uint64_t x = 88172645463325252ull, t0 = mono_ns();
	unsigned bad = 0;
	sh_file *h;

	if (data == NULL || back == NULL)
		fail("out of memory");
	for (size_t i = 0; i < AIO_LEN; i++)
		data[i] = (uint8_t)(i * 131 + (i >> 16));
	check(sh_open(fs, path, O_RDWR | O_CREAT | O_TRUNC, 0644, &h), "open", path);
	for (unsigned i = 0; i < AIO_W; i++) {
		size_t chunk = AIO_LEN / AIO_W;

		iov[i] = (struct iovec){ data + i * chunk, chunk };
		ios[i] = (sh_io){ .f = h,
				  .op = SH_IO_WRITE,
				  .iov = &iov[i],
				  .iovcnt = 1,
				  .off = i * chunk,
				  .cb = aio_done,
				  .data = &w };
		check(sh_io_submit(&ios[i]), "submit", path);
	}
	aio_wait_for(&w, AIO_W);
	ios[0] = (sh_io){ .f = h, .op = SH_IO_FSYNC, .cb = aio_done, .data = &w };
	check(sh_io_submit(&ios[0]), "submit", path);
	aio_wait_for(&w, AIO_W + 1);
	for (unsigned i = 0; i < AIO_R; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		iov[i] = (struct iovec){ got[i], 4096 };
		ios[i] = (sh_io){ .f = h,
				  .op = SH_IO_READ,
				  .iov = &iov[i],
				  .iovcnt = 1,
				  .off = x % (AIO_LEN - 4096),
				  .cb = aio_done,
				  .data = &w };
		check(sh_io_submit(&ios[i]), "submit", path);
	}
	aio_wait_for(&w, AIO_W + 1 + AIO_R);
	for (unsigned i = 0; i < AIO_R; i++)
		bad += memcmp(got[i], data + ios[i].off, 4096) != 0;
	{
		/* vectored: the whole file into three pieces */
		struct iovec v[3] = { { back, 1000 },
				      { back + 1000, AIO_LEN / 2 },
				      { back + 1000 + AIO_LEN / 2, AIO_LEN / 2 - 1000 } };

		bad += sh_preadv(h, v, 3, 0) != (long)AIO_LEN || memcmp(back, data, AIO_LEN) != 0;
	}
	check(sh_close(h), "close", path);
	printf("{\"ios\":%u,\"failed\":%u,\"wrong\":%u,\"ms\":%.0f}\n", w.done, w.bad, bad,
	       (double)(mono_ns() - t0) / 1e6);
	free(data);
	free(back);
	return w.bad || bad;
}

/* On a terminal, once a second: how far a long copy is, and how fast it goes. */
static void
copy_progress(const char *what, uint64_t done, uint64_t total, double t0, double *last, bool end)
{
	double now = now_s();

	if (!isatty(STDERR_FILENO) || (!end && now - *last < 1.0) || (end && *last == t0))
		return;
	*last = now;
	if (total)
		fprintf(stderr, "\r%s: %llu of %llu MiB (%.0f%%), %.1f MiB/s%s", what,
			(unsigned long long)(done >> 20), (unsigned long long)(total >> 20),
			100.0 * (double)done / (double)total, (double)done / 1048576 / (now - t0),
			end ? "\n" : "   ");
	else
		fprintf(stderr, "\r%s: %llu MiB, %.1f MiB/s%s", what,
			(unsigned long long)(done >> 20), (double)done / 1048576 / (now - t0),
			end ? "\n" : "   ");
}

/* Copy a local file into the filesystem, or out of it. */
static int
copy(const char *from, const char *to, bool in)
{
	size_t chunk = 1u << 20;
	char *buf = malloc(chunk);
	sh_file *f = NULL;
	FILE *l = fopen(in ? from : to, in ? "rb" : "wb");
	uint64_t off = 0, total = 0;
	double t0 = now_s(), last = t0;
	struct stat st;
	long n;
	int rc;

	if (buf == NULL || l == NULL)
		fail("cannot %s %s", in ? "read" : "write", in ? from : to);
	rc = sh_open(fs, in ? to : from, in ? O_WRONLY | O_CREAT | O_TRUNC : O_RDONLY, 0644, &f);
	check(rc, "open", in ? to : from);
	if (in ? fstat(fileno(l), &st) == 0 : sh_fstat(f, &st) == 0)
		total = (uint64_t)st.st_size;
	for (;;) {
		copy_progress(in ? to : from, off, total, t0, &last, false);
		if (in) {
			size_t got = fread(buf, 1, chunk, l);

			if (got == 0)
				break;
			n = sh_pwrite(f, buf, got, off);
			check((int)(n < 0 ? n : 0), "write", to);
			off += got;
		} else {
			n = sh_pread(f, buf, chunk, off);
			check((int)(n < 0 ? n : 0), "read", from);
			if (n == 0)
				break;
			if (fwrite(buf, 1, (size_t)n, l) != (size_t)n)
				fail("cannot write %s", to);
			off += (uint64_t)n;
		}
	}
	check(sh_close(f), "close", in ? to : from);
	if (fclose(l) != 0)
		fail("cannot write %s", to);
	copy_progress(in ? to : from, off, total, t0, &last, true);
	free(buf);
	return 0;
}

/* Cleaning's progress on a terminal: buckets done of all. */
static void
clean_progress(void *arg, uint32_t done, uint32_t total)
{
	(void)arg;
	if (isatty(STDERR_FILENO) && (done % 64 == 0 || done == total))
		fprintf(stderr, "\rcleaning: %u of %u buckets", done, total);
}

static const char ns_usage[] =
    "shoal ns FS stat|lstat|ls|mkdir|touch|rm|rmdir|readlink PATH\n"
    "shoal ns FS mv|ln FROM TO | ln -s TARGET PATH | chmod MODE PATH\n"
    "shoal ns FS xattr set PATH NAME VALUE | xattr get|rm PATH NAME | xattr ls PATH\n"
    "shoal ns FS storm DIR THREADS FILES LOG [PREFIX] | check LOG\n"
    "shoal ns FS put LOCAL PATH | get PATH LOCAL | pwrite PATH OFFSET LOCAL | truncate PATH SIZE\n"
    "shoal ns FS usage (what the drive targets hold) | coherence PATH (two clients)\n"
    "shoal ns FS df (size and free bytes as statfs says: the quota, if any)\n"
    "shoal ns FS clean (rewrite the live bytes of stripes at least half dead)\n"
    "shoal ns FS scribble PATH SEED (random writes through one handle against a model)\n"
    "shoal ns FS aio PATH (asynchronous writes and reads, many in flight, checked)";

int
cmd_ns(struct cli *c, int argc, char **argv)
{
	const char *op, *p;
	struct stat st;
	int rc = 0;

	if (argc < 2 || (argc < 3 && strcmp(argv[1], "usage") != 0 &&
			 strcmp(argv[1], "clean") != 0 && strcmp(argv[1], "df") != 0))
		usage_error("%s", ns_usage);
	{
		/* SHOAL_FRAG_KB: the fragment size of the stripes written (tests, tuning) */
		struct sh_client_opts co = { .frag_kb =
						 getenv("SHOAL_FRAG_KB")
						     ? (unsigned)atoi(getenv("SHOAL_FRAG_KB"))
						     : 0 };

		check(sh_client_connect(c->addr, &co, &cl), "connect to", c->addr);
	}
	check(sh_fs_open(cl, argv[0], &fs), "open filesystem", argv[0]);
	fs_name = argv[0];
	op = argv[1];
	p = argc > 2 ? argv[2] : "";
	if (strcmp(op, "stat") == 0 || strcmp(op, "lstat") == 0) {
		check(op[0] == 's' ? sh_stat(fs, p, &st) : sh_lstat(fs, p, &st), op, p);
		print_stat(c, p, &st);
	} else if (strcmp(op, "ls") == 0) {
		rc = ls(c, p);
	} else if (strcmp(op, "mkdir") == 0) {
		check(sh_mkdir(fs, p, 0755), op, p);
	} else if (strcmp(op, "touch") == 0) {
		rc = sh_mknod(fs, p, S_IFREG | 0644, 0);
		check(rc == -EEXIST ? sh_utimens(fs, p, NULL) : rc, op, p);
		rc = 0;
	} else if (strcmp(op, "rm") == 0) {
		check(sh_unlink(fs, p), op, p);
	} else if (strcmp(op, "rmdir") == 0) {
		check(sh_rmdir(fs, p), op, p);
	} else if (strcmp(op, "readlink") == 0) {
		char buf[4097];
		long n = sh_readlink(fs, p, buf, sizeof(buf) - 1);

		check((int)(n < 0 ? n : 0), op, p);
		buf[n] = '\0';
		puts(buf);
	} else if ((strcmp(op, "mv") == 0 || strcmp(op, "ln") == 0) && argc == 4) {
		if (op[0] == 'm')
			check(sh_rename(fs, p, argv[3], 0), op, p);
		else
			check(sh_link(fs, p, argv[3]), op, p);
	} else if (strcmp(op, "ln") == 0 && argc == 5 && strcmp(p, "-s") == 0) {
		check(sh_symlink(fs, argv[3], argv[4]), op, argv[4]);
	} else if (strcmp(op, "chmod") == 0 && argc == 4) {
		check(sh_chmod(fs, argv[3], (mode_t)strtoul(p, NULL, 8)), op, argv[3]);
	} else if (strcmp(op, "xattr") == 0 && argc >= 4) {
		const char *path = argv[3];

		if (strcmp(p, "set") == 0 && argc == 6) {
			check(sh_setxattr(fs, path, argv[4], argv[5], strlen(argv[5]), 0),
			      "setxattr", path);
		} else if (strcmp(p, "get") == 0 && argc == 5) {
			char v[65537];
			long n = sh_getxattr(fs, path, argv[4], v, sizeof(v) - 1);

			check((int)(n < 0 ? n : 0), "getxattr", path);
			v[n] = '\0';
			puts(v);
		} else if (strcmp(p, "rm") == 0 && argc == 5) {
			check(sh_removexattr(fs, path, argv[4]), "removexattr", path);
		} else if (strcmp(p, "ls") == 0) {
			char v[65536];
			long n = sh_listxattr(fs, path, v, sizeof(v));

			check((int)(n < 0 ? n : 0), "listxattr", path);
			for (long i = 0; i < n; i += (long)strlen(v + i) + 1)
				puts(v + i);
		} else {
			usage_error("%s", ns_usage);
		}
	} else if (strcmp(op, "storm") == 0 && (argc == 6 || argc == 7)) {
		rc = storm(c, p, (unsigned)atoi(argv[3]), (unsigned)atoi(argv[4]), argv[5],
			   argc == 7 ? argv[6] : "");
	} else if (strcmp(op, "aio") == 0) {
		rc = aio_check(p);
	} else if (strcmp(op, "scribble") == 0 && argc == 4) {
		rc = scribble(p, strtoull(argv[3], NULL, 10));
	} else if (strcmp(op, "pwrite") == 0 && argc == 5) {
		/* the local file's bytes at OFFSET, the rest of the file kept */
		FILE *l = fopen(argv[4], "rb");
		static char b[1 << 20];
		size_t got = l ? fread(b, 1, sizeof(b), l) : 0;
		sh_file *f;

		if (l == NULL)
			fail("cannot read %s", argv[4]);
		fclose(l);
		check(sh_open(fs, p, O_WRONLY, 0, &f), "open", p);
		check((int)(sh_pwrite(f, b, got, strtoull(argv[3], NULL, 10)) < 0 ? -EIO : 0),
		      "write", p);
		check(sh_close(f), "close", p);
	} else if (strcmp(op, "truncate") == 0 && argc == 4) {
		check(sh_truncate(fs, p, strtoull(argv[3], NULL, 10)), op, p);
	} else if (strcmp(op, "coherence") == 0) {
		rc = coherence(c, p);
	} else if (strcmp(op, "clean") == 0) {
		struct sh_clean_stats cs;
		double t0 = now_s();

		check(sh_fs_clean(fs, 0, 0, &cs, clean_progress, NULL), "clean", argv[0]);
		if (isatty(STDERR_FILENO))
			fputc('\n', stderr);
		printf("{\"buckets\":%llu,\"stripes\":%llu,\"moved_bytes\":%llu,\"skipped\":%llu,"
		       "\"seconds\":%.2f}\n",
		       (unsigned long long)cs.buckets, (unsigned long long)cs.stripes,
		       (unsigned long long)cs.moved_bytes, (unsigned long long)cs.skipped,
		       now_s() - t0);
	} else if (strcmp(op, "usage") == 0) {
		static struct sh_target_usage u[1024];
		int n = sh_targets_usage(fs, u, 1024);
		uint64_t used = 0, live = 0, room = 0, frags = 0;

		check(n, "usage of", argv[0]);
		for (int i = 0; i < n && i < 1024; i++) {
			if (u[i].status < 0)
				fprintf(stderr, "shoal: target %llu: %s\n",
					(unsigned long long)u[i].target, sh_strerror(u[i].status));
			used += u[i].used;
			live += u[i].live;
			room += u[i].room;
			frags += u[i].fragments;
		}
		printf("{\"targets\":%d,\"used\":%llu,\"live\":%llu,\"room\":%llu,"
		       "\"fragments\":%llu,\"per_target\":{",
		       n, (unsigned long long)used, (unsigned long long)live,
		       (unsigned long long)room, (unsigned long long)frags);
		for (int i = 0; i < n && i < 1024; i++)
			printf("%s\"%llu\":%llu", i ? "," : "", (unsigned long long)u[i].target,
			       (unsigned long long)u[i].fragments);
		printf("}}\n");
	} else if (strcmp(op, "df") == 0) {
		struct statvfs v;

		check(sh_statvfs(fs, &v), "statfs of", argv[0]);
		printf("{\"size\":%llu,\"free\":%llu}\n",
		       (unsigned long long)v.f_blocks * v.f_frsize,
		       (unsigned long long)v.f_bfree * v.f_frsize);
	} else if (strcmp(op, "put") == 0 && argc == 4) {
		rc = copy(p, argv[3], true);
	} else if (strcmp(op, "get") == 0 && argc == 4) {
		rc = copy(p, argv[3], false);
	} else if (strcmp(op, "check") == 0) {
		rc = verify(p);
	} else {
		usage_error("%s", ns_usage);
	}
	sh_fs_close(fs);
	sh_client_close(cl);
	return rc;
}
