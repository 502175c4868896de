// SPDX-License-Identifier: Apache-2.0
/*
 * libshoal_preload.so: the interposed calls (pl.h, docs/preload.md).
 * Each looks its descriptor up; one the library does not serve goes to
 * libc at once, with the arguments it came with.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "pl.h"

/* ---- open ---- */

/* A read-only open that may take an O_PATH descriptor: nothing a FUSE open would have to do. */
static bool
path_open(int flags)
{
	return (flags & O_ACCMODE) == O_RDONLY &&
	       !(flags & (O_CREAT | O_TRUNC | O_DIRECTORY | O_PATH | __O_TMPFILE));
}

int
pl_open(int dirfd, const char *path, int flags, mode_t mode)
{
	bool maybe = pl_maybe_shoal(dirfd, path);
	int fd;

	if (maybe && path_open(flags)) {
		fd = pl_libc.openat(dirfd, path, O_PATH | (flags & (O_NOFOLLOW | O_CLOEXEC)));
		if (fd >= 0) {
			int e = errno;

			if (pl_adopt(fd, flags, true) == 0)
				return fd;
			pl_libc.close(fd);
			errno = e;
		}
		/* not served (or an error): the kernel's open, with its own answer */
		return pl_libc.openat(dirfd, path, flags, mode);
	}
	fd = pl_libc.openat(dirfd, path, flags, mode);
	/* an O_APPEND write asks the cluster where the end is (after this process's other writes)
	 */
	if (fd >= 0 && maybe && !(flags & (O_PATH | O_DIRECTORY | __O_TMPFILE))) {
		int e = errno;

		(void)pl_adopt(fd, flags, false);
		errno = e;
	}
	return fd;
}

static mode_t
mode_arg(int flags, va_list ap)
{
	return (flags & O_CREAT) || (flags & __O_TMPFILE) == __O_TMPFILE ? (mode_t)va_arg(ap, int)
									 : 0;
}

PL_API int
open(const char *path, int flags, ...)
{
	va_list ap;
	mode_t mode;

	va_start(ap, flags);
	mode = mode_arg(flags, ap);
	va_end(ap);
	return pl_open(AT_FDCWD, path, flags, mode);
}

PL_API int
openat(int dirfd, const char *path, int flags, ...)
{
	va_list ap;
	mode_t mode;

	va_start(ap, flags);
	mode = mode_arg(flags, ap);
	va_end(ap);
	return pl_open(dirfd, path, flags, mode);
}

PL_API int
creat(const char *path, mode_t mode)
{
	return pl_open(AT_FDCWD, path, O_CREAT | O_WRONLY | O_TRUNC, mode);
}

/* the 64-bit names: the same calls on x86-64 (off64_t is off_t) */
#define PL_ALIAS(name) __attribute__((alias(#name), visibility("default")))
PL_API int open64(const char *path, int flags, ...) PL_ALIAS(open);
PL_API int openat64(int dirfd, const char *path, int flags, ...) PL_ALIAS(openat);
PL_API int creat64(const char *path, mode_t mode) PL_ALIAS(creat);

/* _FORTIFY_SOURCE's: without a mode (an O_CREAT here is the caller's bug; libc aborts) */
PL_API int __open_2(const char *path, int flags);
PL_API int __openat_2(int dirfd, const char *path, int flags);

PL_API int __open64_2(const char *path, int flags) PL_ALIAS(__open_2);
PL_API int __openat64_2(int dirfd, const char *path, int flags) PL_ALIAS(__openat_2);

PL_API int
__open_2(const char *path, int flags)
{
	if (flags & O_CREAT)
		abort();
	return pl_open(AT_FDCWD, path, flags, 0);
}

PL_API int
__openat_2(int dirfd, const char *path, int flags)
{
	if (flags & O_CREAT)
		abort();
	return pl_open(dirfd, path, flags, 0);
}

/* ---- close ---- */

PL_API int
close(int fd)
{
	struct pl_file *p = pl_get(fd);
	int rc = 0, r;

	if (p != NULL) {
		pl_put(p);
		/* a vfork child closing its copy: the parent's file is not its to close */
		if (pl_own_process())
			rc = pl_drop(fd);
	}
	r = pl_libc.close(fd);
	if (rc < 0) {
		errno = rc <= -SH_ERR_BASE ? EIO : -rc;
		return -1; /* the descriptor is closed all the same, as close(2) does */
	}
	return r;
}

/* ---- data ---- */

static long
iov_total(const struct iovec *iov, int n)
{
	size_t t = 0;

	if (n < 0 || n > IOV_MAX)
		return -EINVAL;
	for (int i = 0; i < n; i++) {
		if (iov[i].iov_len > (size_t)SSIZE_MAX - t)
			return -EINVAL;
		t += iov[i].iov_len;
	}
	return (long)t;
}

/*
 * A read of p: at off, or at the file's offset (off < 0, which it then
 * moves); bytes, or -1 with errno.
 */
static ssize_t
sread(struct pl_file *p, const struct iovec *iov, int n, off_t off)
{
	long t = iov_total(iov, n), rc;
	bool cur = off < 0;

	if ((p->flags & O_ACCMODE) == O_WRONLY)
		return pl_ret(-EBADF);
	if (t < 0)
		return pl_ret(t);
	pl_sync_others(p);
	if (cur)
		pthread_mutex_lock(&p->mu);
	pl_inside++;
	rc = n == 1 ? sh_pread(p->f, iov[0].iov_base, iov[0].iov_len, cur ? p->off : (uint64_t)off)
		    : sh_preadv(p->f, iov, n, cur ? p->off : (uint64_t)off);
	pl_inside--;
	if (cur) {
		if (rc > 0)
			p->off += (uint64_t)rc;
		pthread_mutex_unlock(&p->mu);
	}
	return pl_ret(rc);
}

static void
mark_dirty(struct pl_file *p)
{
	if (!p->dirty) {
		p->dirty = true;
		atomic_fetch_add(&pl_ndirty, 1);
	}
}

static ssize_t
swrite(struct pl_file *p, const struct iovec *iov, int n, off_t off)
{
	long t = iov_total(iov, n), rc;
	bool cur = off < 0;

	if ((p->flags & O_ACCMODE) == O_RDONLY)
		return pl_ret(-EBADF);
	if (t < 0)
		return pl_ret(t);
	if (t == 0)
		return 0;
	pl_sync_others(p); /* the order writes land in is the order they were made */
	pthread_mutex_lock(&p->mu);
	pl_inside++;
	if (p->privs) { /* (a served file's mount is connected) */
		p->privs = false;
		if (sh_getxattr_ino(p->m->fsh, p->ino, "security.capability", NULL, 0) > 0)
			(void)sh_removexattr_ino(p->m->fsh, p->ino, "security.capability");
	}
	rc = n == 1 ? sh_pwrite(p->f, iov[0].iov_base, iov[0].iov_len, cur ? p->off : (uint64_t)off)
		    : sh_pwritev(p->f, iov, n, cur ? p->off : (uint64_t)off);
	pl_inside--;
	if (rc > 0) {
		struct stat st;

		mark_dirty(p);
		/* an append wrote at the end (the library asked where): the offset is the end now
		 */
		pl_inside++;
		if (cur && (p->flags & O_APPEND) && sh_fstat(p->f, &st) == 0)
			p->off = (uint64_t)st.st_size;
		else if (cur)
			p->off += (uint64_t)rc;
		pl_inside--;
	}
	pthread_mutex_unlock(&p->mu);
	return pl_ret(rc);
}

PL_API ssize_t
read(int fd, void *buf, size_t len)
{
	struct pl_file *p = pl_get(fd);
	struct iovec v = { buf, len > SSIZE_MAX ? SSIZE_MAX : len };
	ssize_t r;

	if (p == NULL)
		return pl_libc.read(fd, buf, len);
	r = sread(p, &v, 1, -1);
	pl_put(p);
	return r;
}

PL_API ssize_t
write(int fd, const void *buf, size_t len)
{
	struct pl_file *p = pl_get(fd);
	struct iovec v = { (void *)buf, len > SSIZE_MAX ? SSIZE_MAX : len };
	ssize_t r;

	if (p == NULL)
		return pl_libc.write(fd, buf, len);
	r = swrite(p, &v, 1, -1);
	pl_put(p);
	return r;
}

static ssize_t
pread_at(int fd, void *buf, size_t len, off_t off)
{
	struct pl_file *p = pl_get(fd);
	struct iovec v = { buf, len > SSIZE_MAX ? SSIZE_MAX : len };
	ssize_t r;

	if (p == NULL)
		return pl_libc.pread(fd, buf, len, off);
	r = off < 0 ? pl_ret(-EINVAL) : sread(p, &v, 1, off);
	pl_put(p);
	return r;
}

static ssize_t
pwrite_at(int fd, const void *buf, size_t len, off_t off)
{
	struct pl_file *p = pl_get(fd);
	struct iovec v = { (void *)buf, len > SSIZE_MAX ? SSIZE_MAX : len };
	ssize_t r;

	if (p == NULL)
		return pl_libc.pwrite(fd, buf, len, off);
	r = off < 0 ? pl_ret(-EINVAL) : swrite(p, &v, 1, off);
	pl_put(p);
	return r;
}

PL_API ssize_t
pread(int fd, void *buf, size_t len, off_t off)
{
	return pread_at(fd, buf, len, off);
}

PL_API ssize_t
pwrite(int fd, const void *buf, size_t len, off_t off)
{
	return pwrite_at(fd, buf, len, off);
}

/* _FORTIFY_SOURCE's reads (coreutils calls these) */
PL_API ssize_t __read_chk(int fd, void *buf, size_t len, size_t buflen);
PL_API ssize_t __pread_chk(int fd, void *buf, size_t len, off_t off, size_t buflen);

PL_API ssize_t
__read_chk(int fd, void *buf, size_t len, size_t buflen)
{
	if (len > buflen)
		abort();
	return read(fd, buf, len);
}

PL_API ssize_t
__pread_chk(int fd, void *buf, size_t len, off_t off, size_t buflen)
{
	if (len > buflen)
		abort();
	return pread_at(fd, buf, len, off);
}

PL_API ssize_t pread64(int fd, void *buf, size_t len, off64_t off) PL_ALIAS(pread);
PL_API ssize_t pwrite64(int fd, const void *buf, size_t len, off64_t off) PL_ALIAS(pwrite);
PL_API ssize_t __pread64_chk(int fd, void *buf, size_t len, off64_t off, size_t buflen)
    PL_ALIAS(__pread_chk);

/*
 * The vectored forms: how their offset reads (VEC_CUR: the file's; VEC_AT:
 * the one given; VEC_V2: the one given, -1 the file's), flags as
 * preadv2(2): RWF_DSYNC and RWF_SYNC make the write durable before it
 * returns, RWF_APPEND hands the descriptor to the kernel, the rest are hints.
 */
enum { VEC_CUR, VEC_AT, VEC_V2 };

static ssize_t
libc_vec(int fd, const struct iovec *iov, int n, off_t off, int flags, bool wr, int kind)
{
	if (kind == VEC_CUR)
		return wr ? pl_libc.writev(fd, iov, n) : pl_libc.readv(fd, iov, n);
	if (kind == VEC_AT)
		return wr ? pl_libc.pwritev(fd, iov, n, off) : pl_libc.preadv(fd, iov, n, off);
	return wr ? pl_libc.pwritev2(fd, iov, n, off, flags)
		  : pl_libc.preadv2(fd, iov, n, off, flags);
}

static ssize_t
vec(int fd, const struct iovec *iov, int n, off_t off, int flags, bool wr, int kind)
{
	struct pl_file *p = pl_get(fd);
	ssize_t r;

	if (p != NULL && wr && (flags & RWF_APPEND)) {
		pl_put(p);
		if (pl_real(fd) < 0)
			return -1;
		p = NULL;
	}
	if (p == NULL)
		return libc_vec(fd, iov, n, off, flags, wr, kind);
	if (kind == VEC_CUR)
		off = -1; /* the file's (preadv_check caught readv and writev refused as EINVAL) */
	else if (off < (kind == VEC_V2 ? -1 : 0)) {
		pl_put(p);
		return pl_ret(-EINVAL);
	}
	r = wr ? swrite(p, iov, n, off) : sread(p, iov, n, off);
	if (r >= 0 && wr && (flags & (RWF_DSYNC | RWF_SYNC))) {
		long rc;

		pl_inside++;
		rc = sh_fsync(p->f);
		pl_inside--;
		if (rc < 0)
			r = pl_ret(rc);
	}
	pl_put(p);
	return r;
}

PL_API ssize_t
readv(int fd, const struct iovec *iov, int n)
{
	return vec(fd, iov, n, -1, 0, false, VEC_CUR);
}

PL_API ssize_t
writev(int fd, const struct iovec *iov, int n)
{
	return vec(fd, iov, n, -1, 0, true, VEC_CUR);
}

PL_API ssize_t
preadv(int fd, const struct iovec *iov, int n, off_t off)
{
	return vec(fd, iov, n, off, 0, false, VEC_AT);
}

PL_API ssize_t
pwritev(int fd, const struct iovec *iov, int n, off_t off)
{
	return vec(fd, iov, n, off, 0, true, VEC_AT);
}

PL_API ssize_t
preadv2(int fd, const struct iovec *iov, int n, off_t off, int flags)
{
	return vec(fd, iov, n, off, flags, false, VEC_V2);
}

PL_API ssize_t
pwritev2(int fd, const struct iovec *iov, int n, off_t off, int flags)
{
	return vec(fd, iov, n, off, flags, true, VEC_V2);
}

PL_API ssize_t preadv64(int fd, const struct iovec *iov, int n, off64_t off) PL_ALIAS(preadv);
PL_API ssize_t pwritev64(int fd, const struct iovec *iov, int n, off64_t off) PL_ALIAS(pwritev);
PL_API ssize_t preadv64v2(int fd, const struct iovec *iov, int n, off64_t off, int flags)
    PL_ALIAS(preadv2);
PL_API ssize_t pwritev64v2(int fd, const struct iovec *iov, int n, off64_t off, int flags)
    PL_ALIAS(pwritev2);
