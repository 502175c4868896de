/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libshoal_preload.so (docs/preload.md): file data of a Shoal mount
 * straight through libshoal, under LD_PRELOAD, with the kernel's mount
 * keeping everything else.
 *
 * Every descriptor the library serves is a real kernel descriptor of the
 * same file on the mount, so that whatever it does not serve (fchmod,
 * flock, fstatfs, poll, a child's exec) still works on it:
 *  - opened for writing (or to create or truncate): the kernel's own open
 *    through the mount (permissions, creation, O_TRUNC, errors all its);
 *  - opened read-only: an O_PATH descriptor (a lookup, no FUSE open, no
 *    FUSE release), with read permission checked as open(2) would. When
 *    a call needs a readable kernel descriptor (mmap, dup, a forked
 *    child), the file is opened again through the kernel in its place
 *    ("made real": pl_real), and the library lets it go.
 * The data itself moves between the caller's buffers and the cluster
 * through the process's own libshoal client (one per cluster, connected
 * on first use); its leases keep it coherent with the mount's.
 *
 * Files: pl_fd.c (the table of served descriptors, mounts, connecting,
 * making real, fork), pl_io.c (open, close and the data calls),
 * pl_calls.c (the calls around the data), pl_stdio.c (fopen: a stream
 * over a served descriptor; glibc's own fopen opens through its internal
 * open, which nothing here would see).
 */
#ifndef SH_PRELOAD_PL_H
#define SH_PRELOAD_PL_H

#include <shoal/client.h>
#include <shoal/sh_errno.h>
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>

#define PL_API __attribute__((visibility("default")))

/* The libc functions under ours (dlsym RTLD_NEXT), resolved once at load. */
struct pl_libc_fns {
	int (*openat)(int, const char *, int, ...);
	int (*close)(int);
	ssize_t (*read)(int, void *, size_t);
	ssize_t (*write)(int, const void *, size_t);
	ssize_t (*pread)(int, void *, size_t, off_t);
	ssize_t (*pwrite)(int, const void *, size_t, off_t);
	ssize_t (*readv)(int, const struct iovec *, int);
	ssize_t (*writev)(int, const struct iovec *, int);
	ssize_t (*preadv)(int, const struct iovec *, int, off_t);
	ssize_t (*pwritev)(int, const struct iovec *, int, off_t);
	ssize_t (*preadv2)(int, const struct iovec *, int, off_t, int);
	ssize_t (*pwritev2)(int, const struct iovec *, int, off_t, int);
	off_t (*lseek)(int, off_t, int);
	int (*fstat)(int, struct stat *);
	int (*fstatat)(int, const char *, struct stat *, int);
	int (*statx)(int, const char *, int, unsigned, struct statx *);
	int (*fsync)(int);
	int (*fdatasync)(int);
	int (*ftruncate)(int, off_t);
	int (*dup)(int);
	int (*dup2)(int, int);
	int (*dup3)(int, int, int);
	int (*fcntl)(int, int, ...);
	void *(*mmap)(void *, size_t, int, int, int, off_t);
	int (*fallocate)(int, int, off_t, off_t);
	int (*posix_fallocate)(int, off_t, off_t);
	ssize_t (*sendfile)(int, int, off_t *, size_t);
	ssize_t (*copy_file_range)(int, off_t *, int, off_t *, size_t, unsigned);
	ssize_t (*splice)(int, off_t *, int, off_t *, size_t, unsigned);
	int (*flock)(int, int);
	int (*fchmod)(int, mode_t);
	int (*fchown)(int, uid_t, gid_t);
	ssize_t (*fgetxattr)(int, const char *, void *, size_t);
	int (*fsetxattr)(int, const char *, const void *, size_t, int);
	ssize_t (*flistxattr)(int, char *, size_t);
	int (*fremovexattr)(int, const char *);
	int (*futimens)(int, const struct timespec[2]);
	int (*posix_fadvise)(int, off_t, off_t, int);
	int (*ioctl)(int, unsigned long, ...);
	int (*lockf)(int, int, off_t);
	FILE *(*fdopen)(int, const char *);
	FILE *(*fopen)(const char *, const char *);
	int (*fileno)(FILE *);
	int (*fileno_unlocked)(FILE *);
	int (*execve)(const char *, char *const[], char *const[]);
	int (*execvpe)(const char *, char *const[], char *const[]);
	int (*fexecve)(int, char *const[], char *const[]);
	int (*posix_spawn)(pid_t *, const char *, const posix_spawn_file_actions_t *,
			   const posix_spawnattr_t *, char *const[], char *const[]);
	int (*posix_spawnp)(pid_t *, const char *, const posix_spawn_file_actions_t *,
			    const posix_spawnattr_t *, char *const[], char *const[]);
	ssize_t (*readahead)(int, off64_t, size_t);
	int (*isatty)(int);
	void (*_exit)(int);
	void (*_Exit)(int);
};
/*
 * pl_libc.NAME: resolved on first use, not only in this library's
 * constructor: another library's constructor may call open or stat
 * before ours runs (fio's libnl does).
 */
extern struct pl_libc_fns pl_libc_tab;
extern atomic_bool pl_libc_ready;
struct pl_libc_fns *pl_libc_load(void);

static inline struct pl_libc_fns *
pl_libc_get(void)
{
	return __builtin_expect(atomic_load_explicit(&pl_libc_ready, memory_order_acquire), 1)
		   ? &pl_libc_tab
		   : pl_libc_load();
}
#define pl_libc (*pl_libc_get())

/* One Shoal mount of this process's mount namespace. */
struct pl_mount {
	char dir[4096];
	size_t dirlen;
	dev_t dev;
	char fs[256];	    /* from the mount's source, "shoal:FS" */
	pthread_mutex_t mu; /* connecting */
	int state;	    /* 0: not tried, 1: connected, < 0: why not (served by the kernel) */
	sh_client *c;
	sh_fs *fsh;
};

/* A descriptor this library serves. */
struct pl_file {
	pthread_mutex_t mu; /* the offset, and calls that use it, one at a time */
	sh_file *f;
	struct pl_mount *m;
	uint64_t off;
	int flags;  /* as opened (access mode, O_NONBLOCK, ...) for F_GETFL */
	bool opath; /* the kernel descriptor is an O_PATH one */
	bool dirty; /* written since the kernel last took the file's attributes */
	/*
	 * The first write must drop the file's security.capability, as the
	 * kernel does before a write (file_remove_privs): set at open unless
	 * the open made the file (O_EXCL) or truncated it (O_TRUNC: the kernel
	 * dropped it then). A capability set later, while the descriptor is
	 * open, is not dropped by its writes (docs/preload.md).
	 */
	bool privs;
	dev_t dev; /* st_dev, st_ino and st_blksize as the kernel gives them */
	ino_t ino;
	blksize_t blksize;
	int refs;  /* calls in flight (under the table's lock) */
	bool gone; /* closed: the last call out frees it */
};

/*
 * The calling thread is inside the library (connecting, in libshoal):
 * every interposed call it makes goes straight to libc.
 */
extern __thread int pl_inside;

/* The table: a served descriptor, held for one call (pl_put), or NULL (errno untouched). */
struct pl_file *pl_get(int fd);
void pl_put(struct pl_file *p);
/* How many descriptors are served now (0: every call is libc's at once). */
extern atomic_int pl_nfiles;
/* How many served descriptors hold writes the kernel's attributes do not show. */
extern atomic_int pl_ndirty;

/*
 * After a successful open through the kernel of path (relative to dirfd)
 * with flags: fd served from now on if it is a regular file of a Shoal
 * mount this process can reach (0), or left to the kernel (1). opath:
 * fd is an O_PATH descriptor the caller made for a read-only open.
 */
int pl_adopt(int fd, int flags, bool opath);
/*
 * Whether path (relative to dirfd) may be on a Shoal mount: the cheap
 * test that picks the O_PATH open. The answer is only a hint: pl_adopt
 * checks the device of what was opened.
 */
bool pl_maybe_shoal(int dirfd, const char *path);

/* close(2) of a served descriptor: removed, its writes flushed; returns 0 or -errno. */
int pl_drop(int fd);
/*
 * Give fd back to the kernel: what it wrote flushed and the kernel told,
 * an O_PATH descriptor replaced by a readable one at the same number,
 * the kernel's offset set to the library's. 0 or -errno (fd then still served).
 */
int pl_real(int fd);
/* The kernel's attributes of p's file are told to be stale (it was written around it). */
void pl_kernel_stale(int fd, struct pl_file *p);
/* A served file with this device and inode written around the kernel: flushed and told (true). */
bool pl_sync_ino(dev_t dev, ino_t ino);
/*
 * Before self is read, written, sized or sought: what other served
 * descriptors of its file buffered lands, as the kernel's one page cache
 * would show it (fsx caught a read under another descriptor's write).
 * Call without self->mu held.
 */
void pl_sync_others(struct pl_file *self);
/*
 * Before an exec (or a posix_spawn): every served O_PATH descriptor the
 * new program inherits is made readable (in a vfork child, in its own
 * descriptor table only, the parent's memory untouched).
 */
void pl_before_exec(void);
/*
 * The process ends (exit's destructor, or _exit/_Exit, which run none):
 * what served files buffered lands, as the kernel's page cache would keep
 * it, and the $SHOAL_PRELOAD_STATS line is written. Once. stdio: exit's,
 * which flushes the streams (libc would, after our destructor: streams
 * over served descriptors are flushed first).
 */
void pl_at_exit(bool stdio);
/* Whether this library serves fd. */
bool pl_served(int fd);
/* open(2) as this library serves it (pl_io.c): a descriptor, or -1 with errno. */
int pl_open(int dirfd, const char *path, int flags, mode_t mode);
/* fd is served and an O_PATH one: a readable descriptor of it at newfd (dup3 flags), table
 * untouched. */
int pl_real_copy(int fd, int newfd, int flags);

/* A libshoal result as errno: -1 with errno set, or the value. */
long pl_ret(long rc);

/* The process (not a vfork child still sharing the parent's memory, which must change nothing). */
bool pl_own_process(void);

#endif /* SH_PRELOAD_PL_H */
