// SPDX-License-Identifier: Apache-2.0
/*
 * libshoal_preload.so: stdio streams over served descriptors (pl.h,
 * docs/preload.md). glibc's fopen opens with its internal open, which no
 * interposed call sees: fopen here opens as open(2) would under this
 * library, and a served descriptor gets a stream of fopencookie whose
 * reads, writes, seeks and close are this library's calls. fileno gives
 * the descriptor back (a cookie stream has none of its own). Anything
 * else (a descriptor the kernel keeps, a ",ccs=" mode) is libc's stream.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pl.h"

/* The cookie streams open, for fileno: a short list (streams are few; fileno is rare). */
struct stream {
	struct stream *next;
	FILE *f;
	int fd;
};

static pthread_mutex_t streams_mu = PTHREAD_MUTEX_INITIALIZER;
static struct stream *streams;

/* fopen's mode as open(2)'s flags; false: not one this library takes. */
static bool
mode_flags(const char *mode, int *flags)
{
	int f;

	switch (mode[0]) {
	case 'r':
		f = O_RDONLY;
		break;
	case 'w':
		f = O_WRONLY | O_CREAT | O_TRUNC;
		break;
	case 'a':
		f = O_WRONLY | O_CREAT | O_APPEND;
		break;
	default:
		return false;
	}
	for (const char *m = mode + 1; *m && *m != ','; m++) {
		if (*m == '+')
			f = (f & ~O_ACCMODE) | O_RDWR;
		else if (*m == 'x')
			f |= O_EXCL;
		else if (*m == 'e')
			f |= O_CLOEXEC;
	}
	if (strchr(mode, ',') != NULL)
		return false; /* ",ccs=": libc's wide-character streams */
	*flags = f;
	return true;
}

static ssize_t
c_read(void *c, char *buf, size_t len)
{
	return read(((struct stream *)c)->fd, buf, len);
}

static ssize_t
c_write(void *c, const char *buf, size_t len)
{
	ssize_t n = write(((struct stream *)c)->fd, buf, len);

	return n < 0 ? 0 : n; /* stdio: 0 is the error (errno says which) */
}

static int
c_seek(void *c, off64_t *pos, int whence)
{
	off_t r = lseek(((struct stream *)c)->fd, (off_t)*pos, whence);

	if (r < 0)
		return -1;
	*pos = r;
	return 0;
}

static int
c_close(void *c)
{
	struct stream *s = c;
	int rc;

	pthread_mutex_lock(&streams_mu);
	for (struct stream **pp = &streams; *pp; pp = &(*pp)->next)
		if (*pp == s) {
			*pp = s->next;
			break;
		}
	pthread_mutex_unlock(&streams_mu);
	rc = close(s->fd);
	free(s);
	return rc;
}

PL_API FILE *
fopen(const char *path, const char *mode)
{
	static const cookie_io_functions_t io = {
		.read = c_read, .write = c_write, .seek = c_seek, .close = c_close
	};
	struct stream *s;
	int flags, fd;
	FILE *f;

	if (path == NULL || mode == NULL || !mode_flags(mode, &flags) ||
	    !pl_maybe_shoal(AT_FDCWD, path))
		return pl_libc.fopen(path, mode);
	fd = pl_open(AT_FDCWD, path, flags, 0666);
	if (fd < 0)
		return NULL;
	if (!pl_served(fd)) {
		f = pl_libc.fdopen(fd, mode); /* the kernel's descriptor: libc's stream */
		goto out;
	}
	s = malloc(sizeof(*s));
	f = s ? fopencookie(s, mode, io) : NULL;
	if (f == NULL) {
		free(s);
		goto out;
	}
	s->f = f;
	s->fd = fd;
	pthread_mutex_lock(&streams_mu);
	s->next = streams;
	streams = s;
	pthread_mutex_unlock(&streams_mu);
	/* "a": the stream's position starts at the end, as libc's does ("a+": at the start) */
	if ((flags & O_APPEND) && (flags & O_ACCMODE) == O_WRONLY && fseeko(f, 0, SEEK_END) < 0) {
		int e = errno;

		fclose(f);
		errno = e;
		return NULL;
	}
	return f;
out:
	if (f == NULL) {
		int e = errno;

		close(fd);
		errno = e;
	}
	return f;
}

PL_API FILE *fopen64(const char *path, const char *mode) __attribute__((alias("fopen")));

static int
stream_fd(FILE *f)
{
	int fd = -1;

	pthread_mutex_lock(&streams_mu);
	for (struct stream *s = streams; s; s = s->next)
		if (s->f == f) {
			fd = s->fd;
			break;
		}
	pthread_mutex_unlock(&streams_mu);
	return fd;
}

PL_API int
fileno(FILE *f)
{
	int fd = __atomic_load_n(&streams, __ATOMIC_RELAXED) ? stream_fd(f) : -1;

	return fd >= 0 ? fd : pl_libc.fileno(f);
}

PL_API int
fileno_unlocked(FILE *f)
{
	int fd = __atomic_load_n(&streams, __ATOMIC_RELAXED) ? stream_fd(f) : -1;

	return fd >= 0 ? fd : pl_libc.fileno_unlocked(f);
}
