// SPDX-License-Identifier: Apache-2.0
/*
 * libshoal_preload.so: the calls around the data (pl.h, docs/preload.md):
 * offsets, attributes, durability and size served by the library; what
 * needs the kernel's own descriptor (duplicates, mappings, locks, owners,
 * xattrs) hands the descriptor back to it first; copies between
 * descriptors through the library's reads and writes; exec and spawn.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "pl.h"

#define PL_ALIAS(name) __attribute__((alias(#name), visibility("default")))

/* fd (served or not) back to the kernel: 0, or -1 with errno. */
static int
kernel(int fd)
{
	int rc = pl_real(fd);

	return rc < 0 ? (int)pl_ret(rc) : 0;
}

/* For a call the kernel can answer on a served descriptor, unless it is an O_PATH one. */
static int
kernel_if_path(int fd)
{
	struct pl_file *p = pl_get(fd);
	bool path = p && p->opath;

	if (p)
		pl_put(p);
	return path ? kernel(fd) : 0;
}

static bool
served(int fd)
{
	struct pl_file *p = pl_get(fd);

	if (p != NULL)
		pl_put(p);
	return p != NULL;
}

/* ---- offsets ---- */

/* p's attributes as the library has them (what it wrote included), in the kernel's terms. */
static int
sstat(struct pl_file *p, struct stat *st)
{
	long rc;

	pl_inside++;
	rc = sh_fstat(p->f, st);
	pl_inside--;
	if (rc < 0)
		return (int)pl_ret(rc);
	st->st_dev = p->dev;
	st->st_blksize = p->blksize;
	return 0;
}

static off_t
slseek(struct pl_file *p, off_t off, int whence)
{
	struct stat st;
	off_t to;

	pl_sync_others(p);
	pthread_mutex_lock(&p->mu);
	switch (whence) {
	case SEEK_SET:
		to = off;
		break;
	case SEEK_CUR:
		to = (off_t)p->off + off;
		break;
	case SEEK_END:
	case SEEK_DATA:
	case SEEK_HOLE:
		if (sstat(p, &st) < 0) {
			pthread_mutex_unlock(&p->mu);
			return -1;
		}
		/* holes read as zeros: the whole file is data, with one hole at its end */
		if (whence == SEEK_END) {
			to = st.st_size + off;
		} else if (off < 0 || off >= st.st_size) {
			pthread_mutex_unlock(&p->mu);
			return pl_ret(off < 0 ? -EINVAL : -ENXIO);
		} else {
			to = whence == SEEK_DATA ? off : st.st_size;
		}
		break;
	default:
		pthread_mutex_unlock(&p->mu);
		return pl_ret(-EINVAL);
	}
	if (to < 0) {
		pthread_mutex_unlock(&p->mu);
		return pl_ret(-EINVAL);
	}
	p->off = (uint64_t)to;
	pthread_mutex_unlock(&p->mu);
	return to;
}

PL_API off_t
lseek(int fd, off_t off, int whence)
{
	struct pl_file *p = pl_get(fd);
	off_t r;

	if (p == NULL)
		return pl_libc.lseek(fd, off, whence);
	r = slseek(p, off, whence);
	pl_put(p);
	return r;
}

/* ---- attributes ---- */

PL_API int
fstat(int fd, struct stat *st)
{
	struct pl_file *p = pl_get(fd);
	int r;

	if (p == NULL)
		return pl_libc.fstat(fd, st);
	pl_sync_others(p);
	r = sstat(p, st);
	pl_put(p);
	return r;
}

PL_API int
fstat64(int fd, struct stat64 *st)
{
	return fstat(fd, (struct stat *)st);
}

/* A stat by name: a file this process wrote around the kernel is flushed and asked again. */
static int
after_stat(int rc, const struct stat *st, int (*again)(const void *), const void *arg)
{
	if (rc == 0 && S_ISREG(st->st_mode) && atomic_load(&pl_ndirty) > 0 &&
	    pl_sync_ino(st->st_dev, st->st_ino))
		return again(arg);
	return rc;
}

struct at_args {
	int dirfd;
	const char *path;
	struct stat *st;
	int flags;
};

static int
at_again(const void *arg)
{
	const struct at_args *a = arg;

	return pl_libc.fstatat(a->dirfd, a->path, a->st, a->flags);
}

PL_API int
fstatat(int dirfd, const char *path, struct stat *st, int flags)
{
	struct at_args a = { dirfd, path, st, flags };

	if ((flags & AT_EMPTY_PATH) && path[0] == 0) {
		struct pl_file *p = pl_get(dirfd);

		if (p != NULL) {
			int r = sstat(p, st);

			pl_put(p);
			return r;
		}
	}
	return after_stat(pl_libc.fstatat(dirfd, path, st, flags), st, at_again, &a);
}

PL_API int
fstatat64(int dirfd, const char *path, struct stat64 *st, int flags)
{
	return fstatat(dirfd, path, (struct stat *)st, flags);
}

PL_API int
stat(const char *path, struct stat *st)
{
	return fstatat(AT_FDCWD, path, st, 0);
}

PL_API int
stat64(const char *path, struct stat64 *st)
{
	return fstatat(AT_FDCWD, path, (struct stat *)st, 0);
}

PL_API int
lstat(const char *path, struct stat *st)
{
	return fstatat(AT_FDCWD, path, st, AT_SYMLINK_NOFOLLOW);
}

PL_API int
lstat64(const char *path, struct stat64 *st)
{
	return fstatat(AT_FDCWD, path, (struct stat *)st, AT_SYMLINK_NOFOLLOW);
}

/* glibc before 2.33 had programs call these (their version argument is 1 on x86-64) */
PL_API int __fxstat(int ver, int fd, struct stat *st);
PL_API int __fxstat64(int ver, int fd, struct stat64 *st);
PL_API int __xstat(int ver, const char *path, struct stat *st);
PL_API int __xstat64(int ver, const char *path, struct stat64 *st);
PL_API int __lxstat(int ver, const char *path, struct stat *st);
PL_API int __lxstat64(int ver, const char *path, struct stat64 *st);
PL_API int __fxstatat(int ver, int dirfd, const char *path, struct stat *st, int flags);
PL_API int __fxstatat64(int ver, int dirfd, const char *path, struct stat64 *st, int flags);

PL_API int
__fxstat(int ver, int fd, struct stat *st)
{
	(void)ver;
	return fstat(fd, st);
}

PL_API int
__fxstat64(int ver, int fd, struct stat64 *st)
{
	(void)ver;
	return fstat(fd, (struct stat *)st);
}

PL_API int
__xstat(int ver, const char *path, struct stat *st)
{
	(void)ver;
	return fstatat(AT_FDCWD, path, st, 0);
}

PL_API int
__xstat64(int ver, const char *path, struct stat64 *st)
{
	(void)ver;
	return fstatat(AT_FDCWD, path, (struct stat *)st, 0);
}

PL_API int
__lxstat(int ver, const char *path, struct stat *st)
{
	(void)ver;
	return fstatat(AT_FDCWD, path, st, AT_SYMLINK_NOFOLLOW);
}

PL_API int
__lxstat64(int ver, const char *path, struct stat64 *st)
{
	(void)ver;
	return fstatat(AT_FDCWD, path, (struct stat *)st, AT_SYMLINK_NOFOLLOW);
}

PL_API int
__fxstatat(int ver, int dirfd, const char *path, struct stat *st, int flags)
{
	(void)ver;
	return fstatat(dirfd, path, st, flags);
}

PL_API int
__fxstatat64(int ver, int dirfd, const char *path, struct stat64 *st, int flags)
{
	(void)ver;
	return fstatat(dirfd, path, (struct stat *)st, flags);
}

static struct statx_timestamp
stx_time(struct timespec t)
{
	return (struct statx_timestamp){ .tv_sec = t.tv_sec, .tv_nsec = (uint32_t)t.tv_nsec };
}

struct stx_args {
	int dirfd;
	const char *path;
	int flags;
	unsigned mask;
	struct statx *out;
};

static int
stx_again(const void *arg)
{
	const struct stx_args *a = arg;

	return pl_libc.statx(a->dirfd, a->path, a->flags, a->mask, a->out);
}

PL_API int
statx(int dirfd, const char *path, int flags, unsigned mask, struct statx *out)
{
	struct stx_args a = { dirfd, path, flags, mask, out };
	struct stat st;
	int rc;

	if ((flags & AT_EMPTY_PATH) && path[0] == 0) {
		struct pl_file *p = pl_get(dirfd);

		if (p != NULL) {
			rc = sstat(p, &st);
			pl_put(p);
			if (rc < 0)
				return rc;
			memset(out, 0, sizeof(*out));
			out->stx_mask = STATX_BASIC_STATS;
			out->stx_blksize = (uint32_t)st.st_blksize;
			out->stx_nlink = (uint32_t)st.st_nlink;
			out->stx_uid = st.st_uid;
			out->stx_gid = st.st_gid;
			out->stx_mode = (uint16_t)st.st_mode;
			out->stx_ino = st.st_ino;
			out->stx_size = (uint64_t)st.st_size;
			out->stx_blocks = (uint64_t)st.st_blocks;
			out->stx_atime = stx_time(st.st_atim);
			out->stx_mtime = stx_time(st.st_mtim);
			out->stx_ctime = stx_time(st.st_ctim);
			out->stx_dev_major = major(st.st_dev);
			out->stx_dev_minor = minor(st.st_dev);
			return 0;
		}
	}
	rc = pl_libc.statx(dirfd, path, flags, mask, out);
	if (rc == 0) {
		struct stat s = { .st_mode = out->stx_mode,
				  .st_ino = out->stx_ino,
				  .st_dev = makedev(out->stx_dev_major, out->stx_dev_minor) };

		rc = after_stat(rc, &s, stx_again, &a);
	}
	return rc;
}

/* ---- durability and size ---- */

static int
ssync(int fd, bool data_only)
{
	struct pl_file *p = pl_get(fd);
	long rc;

	if (p == NULL)
		return data_only ? pl_libc.fdatasync(fd) : pl_libc.fsync(fd);
	pthread_mutex_lock(&p->mu);
	pl_inside++;
	rc = sh_fsync(p->f);
	pl_inside--;
	if (rc == 0 && p->dirty)
		pl_kernel_stale(fd, p);
	pthread_mutex_unlock(&p->mu);
	pl_put(p);
	return (int)pl_ret(rc);
}

PL_API int
fsync(int fd)
{
	return ssync(fd, false);
}

PL_API int
fdatasync(int fd)
{
	return ssync(fd, true);
}

PL_API int
ftruncate(int fd, off_t len)
{
	struct pl_file *p = pl_get(fd);
	long rc;

	if (p == NULL)
		return pl_libc.ftruncate(fd, len);
	if (len < 0 || (p->flags & O_ACCMODE) == O_RDONLY) {
		pl_put(p);
		return (int)pl_ret(-EINVAL);
	}
	pl_sync_others(p);
	pthread_mutex_lock(&p->mu);
	pl_inside++;
	rc = sh_ftruncate(p->f, (uint64_t)len);
	pl_inside--;
	if (rc == 0 && !p->dirty) {
		p->dirty = true;
		atomic_fetch_add(&pl_ndirty, 1);
	}
	pthread_mutex_unlock(&p->mu);
	pl_put(p);
	return (int)pl_ret(rc);
}

/* Space: what the library buffered lands first, then the mount does it (a kernel descriptor). */
static int
space(int fd)
{
	struct pl_file *p = pl_get(fd);
	long rc = 0;

	if (p == NULL)
		return 0;
	if (p->opath)
		rc = -EBADF; /* read-only, as the kernel says */
	pl_put(p);
	return rc < 0 ? (int)pl_ret(rc) : kernel(fd);
}

PL_API int
fallocate(int fd, int mode, off_t off, off_t len)
{
	return space(fd) < 0 ? -1 : pl_libc.fallocate(fd, mode, off, len);
}

PL_API int
posix_fallocate(int fd, off_t off, off_t len)
{
	struct pl_file *p = pl_get(fd);
	bool path = p && p->opath;

	if (p)
		pl_put(p);
	if (path)
		return EBADF;
	if (p && kernel(fd) < 0)
		return errno;
	return pl_libc.posix_fallocate(fd, off, len);
}

/* ---- what needs the kernel's descriptor ---- */

PL_API int
dup(int fd)
{
	if (pl_own_process() && kernel(fd) < 0)
		return -1;
	return pl_libc.dup(fd);
}

/* dup2 and dup3: newfd, if served, is closed first (its writes flushed); oldfd goes to the kernel.
 */
static int
dup_to(int oldfd, int newfd, int flags, bool three)
{
	struct pl_file *p;

	if (!pl_own_process()) {
		/* a vfork child: its own table only; an O_PATH one copied as a readable one */
		p = pl_get(oldfd);
		if (p != NULL) {
			bool path = p->opath;

			pl_put(p);
			if (path && oldfd != newfd)
				return pl_real_copy(oldfd, newfd, flags);
		}
		return three ? pl_libc.dup3(oldfd, newfd, flags) : pl_libc.dup2(oldfd, newfd);
	}
	if (oldfd != newfd) {
		if (kernel(oldfd) < 0)
			return -1;
		p = pl_get(newfd);
		if (p != NULL) {
			pl_put(p);
			(void)pl_drop(newfd); /* (dup2 closes newfd silently) */
		}
	}
	return three ? pl_libc.dup3(oldfd, newfd, flags) : pl_libc.dup2(oldfd, newfd);
}

PL_API int
dup2(int oldfd, int newfd)
{
	return dup_to(oldfd, newfd, 0, false);
}

PL_API int
dup3(int oldfd, int newfd, int flags)
{
	return dup_to(oldfd, newfd, flags, true);
}

/* The status flags an O_PATH descriptor stands for: those of the open it served. */
#define PL_FL_KEPT (O_ACCMODE | O_NONBLOCK | O_DIRECT | O_NOATIME | O_SYNC | O_DSYNC)

static int
sfcntl(int fd, int cmd, void *arg)
{
	struct pl_file *p = pl_get(fd);
	bool path;

	if (p == NULL)
		return pl_libc.fcntl(fd, cmd, arg);
	path = p->opath;
	if (path && cmd == F_GETFL) {
		int fl = (p->flags & PL_FL_KEPT) | O_LARGEFILE;

		pl_put(p);
		return fl;
	}
	if (path && cmd == F_SETFL) {
		int fl = (int)(intptr_t)arg;

		/* (what F_SETFL may change; none of it matters to the library's reads) */
		p->flags = (p->flags & ~(O_NONBLOCK | O_DIRECT | O_NOATIME)) |
			   (fl & (O_NONBLOCK | O_DIRECT | O_NOATIME));
		pl_put(p);
		return 0;
	}
	pl_put(p);
	if (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC ||
	    (path && cmd != F_GETFD && cmd != F_SETFD)) {
		if (!pl_own_process()) {
			if (path && (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC)) {
				int d = pl_libc.fcntl(fd, cmd, arg);

				return d < 0 ? d
					     : pl_real_copy(fd, d,
							    cmd == F_DUPFD_CLOEXEC ? O_CLOEXEC : 0);
			}
		} else if (kernel(fd) < 0) {
			return -1;
		}
	}
	return pl_libc.fcntl(fd, cmd, arg);
}

PL_API int
fcntl(int fd, int cmd, ...)
{
	va_list ap;
	void *arg;

	va_start(ap, cmd);
	arg = va_arg(ap, void *);
	va_end(ap);
	return sfcntl(fd, cmd, arg);
}

PL_API void *
mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	/* (the kernel's page cache then holds the file: the library lets it go) */
	if (!(flags & MAP_ANONYMOUS) && served(fd) && kernel(fd) < 0)
		return MAP_FAILED;
	return pl_libc.mmap(addr, len, prot, flags, fd, off);
}

PL_API int
flock(int fd, int op)
{
	return kernel_if_path(fd) < 0 ? -1 : pl_libc.flock(fd, op);
}

PL_API int
lockf(int fd, int cmd, off_t len)
{
	return kernel_if_path(fd) < 0 ? -1 : pl_libc.lockf(fd, cmd, len);
}

PL_API int
fchmod(int fd, mode_t mode)
{
	return kernel_if_path(fd) < 0 ? -1 : pl_libc.fchmod(fd, mode);
}

PL_API int
fchown(int fd, uid_t uid, gid_t gid)
{
	return kernel_if_path(fd) < 0 ? -1 : pl_libc.fchown(fd, uid, gid);
}

PL_API int
futimens(int fd, const struct timespec t[2])
{
	return kernel_if_path(fd) < 0 ? -1 : pl_libc.futimens(fd, t);
}

PL_API ssize_t
fgetxattr(int fd, const char *name, void *value, size_t size)
{
	return kernel_if_path(fd) < 0 ? -1 : pl_libc.fgetxattr(fd, name, value, size);
}

PL_API int
fsetxattr(int fd, const char *name, const void *value, size_t size, int flags)
{
	return kernel_if_path(fd) < 0 ? -1 : pl_libc.fsetxattr(fd, name, value, size, flags);
}

PL_API ssize_t
flistxattr(int fd, char *list, size_t size)
{
	return kernel_if_path(fd) < 0 ? -1 : pl_libc.flistxattr(fd, list, size);
}

PL_API int
fremovexattr(int fd, const char *name)
{
	return kernel_if_path(fd) < 0 ? -1 : pl_libc.fremovexattr(fd, name);
}

PL_API int
ioctl(int fd, unsigned long req, ...)
{
	va_list ap;
	void *arg;

	va_start(ap, req);
	arg = va_arg(ap, void *);
	va_end(ap);
	if (fd >= 0) {
		struct pl_file *p = pl_get(fd);

		if (p != NULL) {
			pl_put(p);
			/* a terminal's question asked of a file: not one, without a trip */
			if (req == TCGETS) {
				errno = ENOTTY;
				return -1;
			}
			if (kernel(fd) < 0)
				return -1;
		}
	}
	return pl_libc.ioctl(fd, req, arg);
}

PL_API int
isatty(int fd)
{
	if (served(fd)) {
		errno = ENOTTY;
		return 0;
	}
	return pl_libc.isatty(fd);
}

/* Advice only: the library reads ahead by itself, so a served file takes none. */
PL_API int
posix_fadvise(int fd, off_t off, off_t len, int advice)
{
	struct pl_file *p = pl_get(fd);

	if (p != NULL) {
		pl_put(p);
		return off < 0 || len < 0 || advice < 0 || advice > POSIX_FADV_NOREUSE ? EINVAL : 0;
	}
	return pl_libc.posix_fadvise(fd, off, len, advice);
}

PL_API ssize_t
readahead(int fd, off64_t off, size_t count)
{
	struct pl_file *p = pl_get(fd);

	if (p != NULL) {
		pl_put(p);
		return 0;
	}
	return pl_libc.readahead(fd, off, count);
}

/* stdio on a served descriptor reads with libc's own calls: it gets the kernel's. */
PL_API FILE *
fdopen(int fd, const char *mode)
{
	if (pl_own_process() && kernel(fd) < 0)
		return NULL;
	return pl_libc.fdopen(fd, mode);
}

/* ---- copies between descriptors: through the reads and writes above ---- */

#define COPY_CHUNK (1u << 20)

/*
 * count bytes from in (at *inoff, or its offset) to out (at *outoff, or
 * its offset): what sendfile, copy_file_range and splice do, for a
 * served descriptor on either side.
 */
static ssize_t
copy(int in, off_t *inoff, int out, off_t *outoff, size_t count)
{
	char *buf = malloc(count < COPY_CHUNK ? (count ? count : 1) : COPY_CHUNK);
	size_t done = 0;
	int err = 0;

	if (buf == NULL)
		return pl_ret(-ENOMEM);
	while (done < count) {
		size_t want = count - done < COPY_CHUNK ? count - done : COPY_CHUNK;
		ssize_t n = inoff ? pread(in, buf, want, *inoff) : read(in, buf, want), w = 0;

		if (n <= 0) {
			err = n < 0 ? errno : 0;
			break;
		}
		while (w < n) {
			ssize_t k = outoff ? pwrite(out, buf + w, (size_t)(n - w), *outoff + w)
					   : write(out, buf + w, (size_t)(n - w));

			if (k < 0) {
				err = errno;
				break;
			}
			w += k;
		}
		if (inoff)
			*inoff += w;
		if (outoff)
			*outoff += w;
		done += (size_t)w;
		if (err || w < n) {
			/* what was read and not written is read again by the next call */
			if (!inoff && w < n)
				(void)lseek(in, w - n, SEEK_CUR);
			break;
		}
	}
	free(buf);
	if (done == 0 && err) {
		errno = err;
		return -1;
	}
	return (ssize_t)done;
}

PL_API ssize_t
sendfile(int out, int in, off_t *off, size_t count)
{
	if (!served(in) && !served(out))
		return pl_libc.sendfile(out, in, off, count);
	return copy(in, off, out, NULL, count);
}

PL_API ssize_t
copy_file_range(int in, off64_t *inoff, int out, off64_t *outoff, size_t len, unsigned flags)
{
	if (!served(in) && !served(out))
		return pl_libc.copy_file_range(in, inoff, out, outoff, len, flags);
	if (flags != 0)
		return pl_ret(-EINVAL);
	return copy(in, inoff, out, outoff, len);
}

PL_API ssize_t
splice(int in, off64_t *inoff, int out, off64_t *outoff, size_t len, unsigned flags)
{
	if (!served(in) && !served(out))
		return pl_libc.splice(in, inoff, out, outoff, len, flags);
	return copy(in, inoff, out, outoff, len);
}

/* ---- exec and spawn: a new program gets kernel descriptors ---- */

PL_API int
execve(const char *path, char *const argv[], char *const envp[])
{
	pl_before_exec();
	return pl_libc.execve(path, argv, envp);
}

PL_API int
execv(const char *path, char *const argv[])
{
	pl_before_exec();
	return pl_libc.execve(path, argv, environ);
}

PL_API int
execvpe(const char *file, char *const argv[], char *const envp[])
{
	pl_before_exec();
	return pl_libc.execvpe(file, argv, envp);
}

PL_API int
execvp(const char *file, char *const argv[])
{
	pl_before_exec();
	return pl_libc.execvpe(file, argv, environ);
}

PL_API int
fexecve(int fd, char *const argv[], char *const envp[])
{
	pl_before_exec();
	return pl_libc.fexecve(fd, argv, envp);
}

/* execl, execlp, execle: their arguments gathered (as many as the kernel takes in a page) */
#define EXECL_MAX 4096

static int
execl_common(const char *path, const char *arg, va_list ap, bool env, bool search)
{
	char *argv[EXECL_MAX];
	char *const *envp = environ;
	int n = 0;

	argv[n++] = (char *)arg;
	while (argv[n - 1] != NULL) {
		if (n == EXECL_MAX) {
			errno = E2BIG;
			return -1;
		}
		argv[n++] = va_arg(ap, char *);
	}
	if (env)
		envp = va_arg(ap, char *const *);
	pl_before_exec();
	return search ? pl_libc.execvpe(path, argv, envp) : pl_libc.execve(path, argv, envp);
}

PL_API int
execl(const char *path, const char *arg, ...)
{
	va_list ap;
	int r;

	va_start(ap, arg);
	r = execl_common(path, arg, ap, false, false);
	va_end(ap);
	return r;
}

PL_API int
execlp(const char *file, const char *arg, ...)
{
	va_list ap;
	int r;

	va_start(ap, arg);
	r = execl_common(file, arg, ap, false, true);
	va_end(ap);
	return r;
}

PL_API int
execle(const char *path, const char *arg, ...)
{
	va_list ap;
	int r;

	va_start(ap, arg);
	r = execl_common(path, arg, ap, true, false);
	va_end(ap);
	return r;
}

PL_API int
posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
	    const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	pl_before_exec();
	return pl_libc.posix_spawn(pid, path, fa, attr, argv, envp);
}

PL_API int
posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
	     const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	pl_before_exec();
	return pl_libc.posix_spawnp(pid, file, fa, attr, argv, envp);
}

/* the 64-bit names: the same calls on x86-64 (off64_t is off_t) */
PL_API off64_t lseek64(int fd, off64_t off, int whence) PL_ALIAS(lseek);
PL_API int ftruncate64(int fd, off64_t len) PL_ALIAS(ftruncate);
PL_API int fallocate64(int fd, int mode, off64_t off, off64_t len) PL_ALIAS(fallocate);
PL_API int posix_fallocate64(int fd, off64_t off, off64_t len) PL_ALIAS(posix_fallocate);
PL_API void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off64_t off)
    PL_ALIAS(mmap);
PL_API int lockf64(int fd, int cmd, off64_t len) PL_ALIAS(lockf);
PL_API int posix_fadvise64(int fd, off64_t off, off64_t len, int advice) PL_ALIAS(posix_fadvise);
PL_API ssize_t sendfile64(int out, int in, off64_t *off, size_t count) PL_ALIAS(sendfile);
PL_API int fcntl64(int fd, int cmd, ...) PL_ALIAS(fcntl);

/* ---- the end: _exit runs no destructor, but what was written must land ---- */

PL_API void
_exit(int status)
{
	pl_at_exit(false);
	pl_libc._exit(status);
	__builtin_unreachable();
}

PL_API void
_Exit(int status)
{
	pl_at_exit(false);
	pl_libc._Exit(status);
	__builtin_unreachable();
}
