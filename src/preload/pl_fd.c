// SPDX-License-Identifier: Apache-2.0
/*
 * libshoal_preload.so: the descriptors it serves, the Shoal mounts it
 * knows, their clients, handing a descriptor back to the kernel, and fork
 * (pl.h, docs/preload.md).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "../base/hash.h"
#include "../net/auth.h"
#include "pl.h"

struct pl_libc_fns pl_libc_tab;
atomic_bool pl_libc_ready;
__thread int pl_inside;
atomic_int pl_nfiles;
atomic_int pl_ndirty;

static bool disabled; /* SHOAL_PRELOAD=0, or libc not found */
static pid_t own_pid; /* this process (a forked child sets its own) */
static const char *stats_path;
static atomic_ulong n_served, n_kernel, n_real;

/* ---- the table: descriptor -> served file, two levels of 1,024 ---- */

#define CHUNK	  1024
#define NCHUNKS	  1024
#define PL_MAX_FD (CHUNK * NCHUNKS)

static _Atomic(struct pl_file *) *_Atomic chunks[NCHUNKS];
static pthread_mutex_t tab_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t tab_cv = PTHREAD_COND_INITIALIZER;

static _Atomic(struct pl_file *) *
slot(int fd, bool make)
{
	_Atomic(struct pl_file *) *c;

	if (fd < 0 || fd >= PL_MAX_FD)
		return NULL;
	c = atomic_load(&chunks[fd / CHUNK]);
	if (c == NULL && make) {
		_Atomic(struct pl_file *) *n = calloc(CHUNK, sizeof(*n));
		_Atomic(struct pl_file *) *none = NULL;

		if (n == NULL)
			return NULL;
		if (atomic_compare_exchange_strong(&chunks[fd / CHUNK], &none, n))
			c = n;
		else {
			free(n);
			c = none;
		}
	}
	return c ? &c[fd % CHUNK] : NULL;
}

struct pl_file *
pl_get(int fd)
{
	_Atomic(struct pl_file *) *s;
	struct pl_file *p;

	if (atomic_load_explicit(&pl_nfiles, memory_order_relaxed) == 0 || pl_inside)
		return NULL;
	s = slot(fd, false);
	/* libshoal's own sockets and most of the process's descriptors stop here, unlocked */
	if (s == NULL || atomic_load(s) == NULL)
		return NULL;
	pthread_mutex_lock(&tab_mu);
	p = atomic_load(s);
	if (p != NULL)
		p->refs++;
	pthread_mutex_unlock(&tab_mu);
	return p;
}

void
pl_put(struct pl_file *p)
{
	pthread_mutex_lock(&tab_mu);
	if (--p->refs == 0 && p->gone)
		pthread_cond_broadcast(&tab_cv);
	pthread_mutex_unlock(&tab_mu);
}

/* fd's file out of the table, once no call is using it: the caller's alone. NULL: not served. */
static struct pl_file *
take(int fd)
{
	_Atomic(struct pl_file *) *s = slot(fd, false);
	struct pl_file *p;

	if (s == NULL || atomic_load(s) == NULL)
		return NULL;
	pthread_mutex_lock(&tab_mu);
	p = atomic_load(s);
	if (p != NULL) {
		atomic_store(s, NULL);
		p->gone = true;
		while (p->refs > 0)
			pthread_cond_wait(&tab_cv, &tab_mu);
		atomic_fetch_sub(&pl_nfiles, 1);
		if (p->dirty)
			atomic_fetch_sub(&pl_ndirty, 1);
	}
	pthread_mutex_unlock(&tab_mu);
	return p;
}

/* p served at fd (again). */
static int
put_back(int fd, struct pl_file *p)
{
	_Atomic(struct pl_file *) *s = slot(fd, true);

	if (s == NULL)
		return -EMFILE;
	pthread_mutex_lock(&tab_mu);
	p->gone = false;
	p->refs = 0;
	atomic_store(s, p);
	atomic_fetch_add(&pl_nfiles, 1);
	if (p->dirty)
		atomic_fetch_add(&pl_ndirty, 1);
	pthread_mutex_unlock(&tab_mu);
	return 0;
}

static void
file_free(struct pl_file *p)
{
	pthread_mutex_destroy(&p->mu);
	free(p);
}

long
pl_ret(long rc)
{
	if (rc >= 0)
		return rc;
	errno = rc <= -SH_ERR_BASE ? EIO : (int)-rc;
	return -1;
}

bool
pl_own_process(void)
{
	return getpid() == own_pid;
}

/* ---- mounts: /proc/self/mountinfo, read again when it changes ---- */

#define MAX_MOUNTS 32

static pthread_mutex_t mounts_mu = PTHREAD_MUTEX_INITIALIZER;
static struct pl_mount mounts[MAX_MOUNTS]; /* never freed: files point at them */
static atomic_int nmounts;		   /* entries in use (present or not) */
static bool present[MAX_MOUNTS];
static int info_fd = -1;
static bool info_read;

/* A mount point as mountinfo escapes it (\040 for a space) */
static void
unescape(char *s)
{
	char *o = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '7' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*o++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 3;
		} else {
			*o++ = *s;
		}
	}
	*o = 0;
}

/* One mountinfo line: a Shoal mount's point, device and filesystem, or false. */
static bool
parse_line(char *line, char *dir, size_t dirlen, dev_t *dev, char *fs, size_t fslen)
{
	char *sep = strstr(line, " - "), *save = NULL, *tok;
	unsigned maj, min;
	int i = 0;

	if (sep == NULL)
		return false;
	*sep = 0;
	for (tok = strtok_r(line, " ", &save); tok; tok = strtok_r(NULL, " ", &save), i++) {
		if (i == 2 && sscanf(tok, "%u:%u", &maj, &min) != 2)
			return false;
		if (i == 4) {
			unescape(tok);
			snprintf(dir, dirlen, "%s", tok);
		}
	}
	if (i < 5)
		return false;
	save = NULL;
	tok = strtok_r(sep + 3, " ", &save);
	if (tok == NULL || strcmp(tok, "fuse.shoal") != 0)
		return false;
	tok = strtok_r(NULL, " ", &save);
	if (tok == NULL || strncmp(tok, "shoal:", 6) != 0 || tok[6] == 0)
		return false;
	snprintf(fs, fslen, "%s", tok + 6);
	*dev = makedev(maj, min);
	return true;
}

static void
load_mounts(void)
{
	size_t cap = 1 << 16, len = 0;
	char *buf = malloc(cap), *line, *save = NULL;
	ssize_t n;

	if (buf == NULL)
		return;
	if (info_fd < 0)
		info_fd = pl_libc.openat(AT_FDCWD, "/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
	if (info_fd < 0 || pl_libc.lseek(info_fd, 0, SEEK_SET) < 0) {
		free(buf);
		return;
	}
	while ((n = pl_libc.read(info_fd, buf + len, cap - len - 1)) > 0) {
		len += (size_t)n;
		if (len + 1 == cap) {
			char *b = realloc(buf, cap * 2);

			if (b == NULL)
				break;
			buf = b;
			cap *= 2;
		}
	}
	buf[len] = 0;
	memset(present, 0, sizeof(present));
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char dir[sizeof(mounts[0].dir)], fs[sizeof(mounts[0].fs)];
		dev_t dev;
		int i, nm = atomic_load(&nmounts);

		if (!parse_line(line, dir, sizeof(dir), &dev, fs, sizeof(fs)))
			continue;
		for (i = 0; i < nm; i++)
			if (mounts[i].dev == dev && strcmp(mounts[i].dir, dir) == 0 &&
			    strcmp(mounts[i].fs, fs) == 0)
				break;
		if (i == nm) {
			if (nm == MAX_MOUNTS)
				continue;
			struct pl_mount *m = &mounts[nm];

			snprintf(m->dir, sizeof(m->dir), "%s", dir);
			m->dirlen = strlen(m->dir);
			m->dev = dev;
			snprintf(m->fs, sizeof(m->fs), "%s", fs);
			pthread_mutex_init(&m->mu, NULL);
			atomic_store(&nmounts, nm + 1);
		}
		present[i] = true;
	}
	info_read = true;
	free(buf);
}

/* Read mountinfo again if it changed (the kernel flags it: POLLPRI) or was never read. */
static void
refresh_mounts(void)
{
	struct pollfd pf;

	pthread_mutex_lock(&mounts_mu);
	pf.fd = info_fd;
	pf.events = POLLPRI;
	pf.revents = 0;
	if (!info_read || info_fd < 0 ||
	    (poll(&pf, 1, 0) > 0 && (pf.revents & (POLLPRI | POLLERR))))
		load_mounts();
	pthread_mutex_unlock(&mounts_mu);
}

static bool
under(const struct pl_mount *m, const char *path)
{
	if (m->dirlen == 1)
		return path[0] == '/';
	return strncmp(path, m->dir, m->dirlen) == 0 &&
	       (path[m->dirlen] == '/' || path[m->dirlen] == 0);
}

static bool
under_any(const char *path)
{
	int nm = atomic_load(&nmounts);

	for (int i = 0; i < nm; i++)
		if (present[i] && under(&mounts[i], path))
			return true;
	return false;
}

bool
pl_maybe_shoal(int dirfd, const char *path)
{
	char base[PATH_MAX];
	size_t len;

	if (disabled || pl_inside || path == NULL)
		return false;
	refresh_mounts();
	if (atomic_load(&nmounts) == 0)
		return false;
	if (path[0] == '/')
		return under_any(path);
	if (dirfd == AT_FDCWD) {
		if (getcwd(base, sizeof(base)) == NULL)
			return false;
	} else {
		char link[64];
		ssize_t n;

		snprintf(link, sizeof(link), "/proc/self/fd/%d", dirfd);
		n = readlink(link, base, sizeof(base) - 1);
		if (n <= 0)
			return false;
		base[n] = 0;
	}
	/* the name as the kernel walks it from there ("..", a symlink may lead out: adopt checks)
	 */
	len = strlen(base);
	if (len + 1 + strlen(path) < sizeof(base)) {
		base[len] = '/';
		strcpy(base + len + 1, path);
	}
	return under_any(base);
}

static struct pl_mount *
mount_of(dev_t dev)
{
	int nm = atomic_load(&nmounts);

	for (int i = 0; i < nm; i++)
		if (present[i] && mounts[i].dev == dev)
			return &mounts[i];
	return NULL;
}

/* The cluster's management address: $SHOAL_MGMT, else what the mount says (docs/preload.md). */
static int
mgmt_of(const struct pl_mount *m, char *out, size_t len)
{
	const char *env = getenv("SHOAL_MGMT");
	ssize_t n;

	if (env != NULL && *env) {
		snprintf(out, len, "%s", env);
		return 0;
	}
	n = getxattr(m->dir, "user.shoal.mount", out, len - 1);
	if (n <= 0)
		return n < 0 ? -errno : -ENODATA;
	out[n] = 0;
	return 0;
}

/* $SHOAL_PRELOAD_VERBOSE: why a mount is left to the kernel, on stderr */
static void
say_kernel(const char *dir, int rc)
{
	if (getenv("SHOAL_PRELOAD_VERBOSE") != NULL)
		fprintf(stderr, "shoal preload: %s is served by the kernel: %s\n", dir,
			sh_strerror(rc));
}

/*
 * The client's key: $SHOAL_KEY or $SHOAL_KEY_FILE if set (the library reads
 * them: out ""), else the mount's --key-file (its root's user.shoal.key_file),
 * which this process may or may not be allowed to read.
 */
static void
key_of(const struct pl_mount *m, char *out, size_t len)
{
	const char *k = getenv("SHOAL_KEY"), *f = getenv("SHOAL_KEY_FILE");
	ssize_t n;

	out[0] = 0;
	if ((k != NULL && *k) || (f != NULL && *f))
		return;
	n = getxattr(m->dir, "user.shoal.key_file", out, len - 1);
	out[n > 0 ? n : 0] = 0;
}

/* m's filesystem handle, connected on first use; NULL: the kernel serves m. */
static sh_fs *
mount_fs(struct pl_mount *m)
{
	char mgmt[1024], key[1024];
	struct sh_client_opts o = { .key_file = key };
	int rc;

	pthread_mutex_lock(&m->mu);
	if (m->state == 0) {
		pl_inside++;
		rc = mgmt_of(m, mgmt, sizeof(mgmt));
		key_of(m, key, sizeof(key));
		if (rc == 0)
			rc = sh_client_connect(mgmt, key[0] ? &o : NULL, &m->c);
		if (rc == 0) {
			rc = sh_fs_open(m->c, m->fs, &m->fsh);
			if (rc < 0) {
				sh_client_close(m->c);
				m->c = NULL;
			}
		}
		pl_inside--;
		m->state = rc < 0 ? rc : 1;
		if (rc < 0)
			say_kernel(m->dir, rc);
	}
	pthread_mutex_unlock(&m->mu);
	return m->state == 1 ? m->fsh : NULL;
}

/* ---- adopting, dropping, making real ---- */

/*
 * The files this process gave to the kernel (mmap, locks, fallocate, a
 * dup...): once one descriptor of a file is the kernel's, the mount's
 * page cache and write buffer hold its newest bytes, so every descriptor
 * of that file in this process is the kernel's from then on — the others
 * are made real with it, later opens are not served. Open addressing;
 * full, a file is not recorded (its later opens are served, flushed as
 * any other).
 */
#define KERNEL_SLOTS 4096

struct kfile {
	dev_t dev;
	ino_t ino; /* 0: empty */
};

static struct kfile kernel_files[KERNEL_SLOTS];
static atomic_int n_kernel_files;
static pthread_mutex_t kernel_mu = PTHREAD_MUTEX_INITIALIZER;

static struct kfile *
kernel_slot(dev_t dev, ino_t ino)
{
	uint64_t h = sh_hash_u64((uint64_t)ino ^ ((uint64_t)dev << 40));

	for (unsigned i = 0; i < KERNEL_SLOTS; i++) {
		struct kfile *k = &kernel_files[(h + i) % KERNEL_SLOTS];

		if (k->ino == 0 || (k->ino == ino && k->dev == dev))
			return k;
	}
	return NULL;
}

static bool
kernel_owns(dev_t dev, ino_t ino)
{
	struct kfile *k;
	bool own;

	if (atomic_load(&n_kernel_files) == 0)
		return false;
	pthread_mutex_lock(&kernel_mu);
	k = kernel_slot(dev, ino);
	own = k != NULL && k->ino == ino && k->dev == dev;
	pthread_mutex_unlock(&kernel_mu);
	return own;
}

static void
kernel_record(dev_t dev, ino_t ino)
{
	struct kfile *k;

	pthread_mutex_lock(&kernel_mu);
	k = kernel_slot(dev, ino);
	if (k != NULL && k->ino == 0 && atomic_load(&n_kernel_files) < KERNEL_SLOTS / 2) {
		k->dev = dev;
		k->ino = ino;
		atomic_fetch_add(&n_kernel_files, 1);
	}
	pthread_mutex_unlock(&kernel_mu);
}

int
pl_adopt(int fd, int flags, bool opath)
{
	struct pl_mount *m;
	struct pl_file *p;
	struct stat st;
	sh_file *f;
	sh_fs *fs;
	int rc;

	if (disabled || pl_inside || pl_libc.fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		goto kernel;
	m = mount_of(st.st_dev);
	if (m == NULL || kernel_owns(st.st_dev, st.st_ino))
		goto kernel;
	/* read permission as open(2) checks it (an O_PATH open checks only the path) */
	if (opath && faccessat(fd, "", R_OK, AT_EMPTY_PATH | AT_EACCESS) < 0)
		goto kernel;
	fs = mount_fs(m);
	if (fs == NULL)
		goto kernel;
	pl_inside++;
	rc = sh_open_ino(fs, st.st_ino, flags & (O_ACCMODE | O_APPEND), &f);
	pl_inside--;
	if (rc < 0)
		goto kernel;
	p = calloc(1, sizeof(*p));
	if (p == NULL)
		goto kernel_close;
	pthread_mutex_init(&p->mu, NULL);
	p->f = f;
	p->m = m;
	p->flags = flags & ~(O_CREAT | O_EXCL | O_TRUNC | O_NOFOLLOW);
	p->privs = (flags & O_ACCMODE) != O_RDONLY && !(flags & (O_EXCL | O_TRUNC));
	p->opath = opath;
	p->dev = st.st_dev;
	p->ino = st.st_ino;
	p->blksize = st.st_blksize;
	if (put_back(fd, p) < 0) {
		file_free(p);
		goto kernel_close;
	}
	atomic_fetch_add(&n_served, 1);
	return 0;
kernel_close:
	pl_inside++;
	sh_close(f);
	pl_inside--;
kernel:
	atomic_fetch_add(&n_kernel, 1);
	return 1;
}

/* Flush p (taken) and release its handle: 0 or the error a buffered write met. */
static int
release(struct pl_file *p)
{
	int rc;

	pl_inside++;
	rc = sh_close(p->f);
	pl_inside--;
	file_free(p);
	return rc;
}

bool
pl_served(int fd)
{
	struct pl_file *p = pl_get(fd);

	if (p != NULL)
		pl_put(p);
	return p != NULL;
}

int
pl_drop(int fd)
{
	struct pl_file *p = take(fd);

	return p == NULL ? 0 : release(p);
}

void
pl_kernel_stale(int fd, struct pl_file *p)
{
	/*
	 * A close of a duplicate is a FUSE flush: the mount then tells the
	 * kernel to forget the file's attributes (the size this library
	 * wrote) and cached pages, so the next stat or read through the
	 * kernel asks.
	 */
	if (!p->opath) {
		int d = pl_libc.fcntl(fd, F_DUPFD_CLOEXEC, 0);
		struct stat st;

		if (d >= 0)
			pl_libc.close(d);
		/* and asks now: a page fault of an mmap checks the size the kernel holds, asking
		 * nothing */
		(void)pl_libc.fstat(fd, &st);
	}
	if (p->dirty) {
		p->dirty = false;
		atomic_fetch_sub(&pl_ndirty, 1);
	}
}

/* fd's O_PATH descriptor replaced by one opened through the kernel with flags. */
static int
reopen_real(int fd, int flags)
{
	char path[64];
	int cloexec = pl_libc.fcntl(fd, F_GETFD), r;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	r = pl_libc.openat(AT_FDCWD, path, (flags & ~(O_CREAT | O_EXCL | O_TRUNC)) | O_CLOEXEC);
	if (r < 0)
		return -errno;
	if (pl_libc.dup3(r, fd, cloexec > 0 && (cloexec & FD_CLOEXEC) ? O_CLOEXEC : 0) < 0) {
		int e = errno;

		pl_libc.close(r);
		return -e;
	}
	pl_libc.close(r);
	return 0;
}

static void real_others(dev_t dev, ino_t ino);

int
pl_real(int fd)
{
	struct pl_file *p = take(fd);
	int rc = 0;

	if (p == NULL)
		return 0;
	pl_sync_others(p);
	pthread_mutex_lock(&p->mu);
	pl_inside++;
	if (p->dirty || (p->flags & O_ACCMODE) != O_RDONLY)
		rc = sh_fsync(p->f);
	pl_inside--;
	/*
	 * A new kernel open, over fd: the mount's handle of the old one was
	 * opened before this library wrote and may hold what the file was
	 * then (fsx caught a read of it). The handle still holds the file:
	 * an unlinked one opens again by its descriptor. A writer the kernel
	 * no longer lets open (a chmod since) keeps its old descriptor.
	 */
	if (rc == 0) {
		int r = reopen_real(fd, p->flags);

		if (p->opath)
			rc = r;
	}
	if (rc == 0) {
		pl_kernel_stale(fd, p);
		if (pl_libc.lseek(fd, (off_t)p->off, SEEK_SET) < 0)
			rc = -errno;
	}
	pthread_mutex_unlock(&p->mu);
	if (rc < 0) {
		put_back(fd, p);
		return rc;
	}
	atomic_fetch_add(&n_real, 1);
	kernel_record(p->dev, p->ino);
	real_others(p->dev, p->ino);
	return release(p);
}

/* Every served file, each held for the caller (n of them), for fork and pl_sync_ino. */
static struct pl_file **
hold_all(int *fds, int max, int *n)
{
	struct pl_file **out = malloc(sizeof(*out) * (size_t)max);

	*n = 0;
	if (out == NULL)
		return NULL;
	pthread_mutex_lock(&tab_mu);
	for (int c = 0; c < NCHUNKS && *n < max; c++) {
		_Atomic(struct pl_file *) *ch = atomic_load(&chunks[c]);

		for (int i = 0; ch != NULL && i < CHUNK && *n < max; i++) {
			struct pl_file *p = atomic_load(&ch[i]);

			if (p != NULL) {
				p->refs++;
				fds[*n] = c * CHUNK + i;
				out[(*n)++] = p;
			}
		}
	}
	pthread_mutex_unlock(&tab_mu);
	return out;
}

/* Every served file, each held: files[i] is served at fds[i]; n 0 when none (or no memory). */
struct held {
	int n, *fds;
	struct pl_file **files;
};

static void
hold_every(struct held *h)
{
	int max = atomic_load(&pl_nfiles) + 16;

	h->n = 0;
	h->files = NULL;
	h->fds = atomic_load(&pl_nfiles) ? malloc(sizeof(int) * (size_t)max) : NULL;
	if (h->fds != NULL)
		h->files = hold_all(h->fds, max, &h->n);
	if (h->files == NULL)
		h->n = 0;
}

static void
unhold(struct held *h)
{
	for (int i = 0; i < h->n; i++)
		pl_put(h->files[i]);
	free(h->files);
	free(h->fds);
}

/* What p (served at fd, held) buffered lands, and the kernel is told; whether it had any. */
static bool
land(int fd, struct pl_file *p)
{
	bool dirty;

	pthread_mutex_lock(&p->mu);
	dirty = p->dirty;
	if (dirty) {
		pl_inside++;
		if (sh_fsync(p->f) == 0)
			pl_kernel_stale(fd, p);
		pl_inside--;
	}
	pthread_mutex_unlock(&p->mu);
	return dirty;
}

/* Flush the dirty served files of dev:ino but skip (NULL: all); whether one was. */
static bool
sync_matching(dev_t dev, ino_t ino, const struct pl_file *skip)
{
	struct held h;
	bool synced = false;

	hold_every(&h);
	for (int i = 0; i < h.n; i++) {
		struct pl_file *p = h.files[i];

		if (p != skip && p->dev == dev && p->ino == ino)
			synced |= land(h.fds[i], p);
	}
	unhold(&h);
	return synced;
}

bool
pl_sync_ino(dev_t dev, ino_t ino)
{
	return atomic_load(&pl_ndirty) > 0 && sync_matching(dev, ino, NULL);
}

void
pl_sync_others(struct pl_file *self)
{
	/* the common case, one file written or none: one load */
	if (atomic_load(&pl_ndirty) > (self->dirty ? 1 : 0))
		(void)sync_matching(self->dev, self->ino, self);
}

/* The other served descriptors of dev:ino given to the kernel too (see kernel_files). */
static void
real_others(dev_t dev, ino_t ino)
{
	struct held h;
	int n = 0;

	hold_every(&h);
	for (int i = 0; i < h.n; i++)
		if (h.files[i]->dev == dev && h.files[i]->ino == ino)
			h.fds[n++] = h.fds[i]; /* (i >= n: nothing unread is overwritten) */
	for (int i = 0; i < h.n; i++)
		pl_put(h.files[i]);
	h.n = 0;
	for (int i = 0; i < n; i++)
		(void)pl_real(h.fds[i]); /* not held: pl_real takes the descriptor */
	unhold(&h);
}

int
pl_real_copy(int fd, int newfd, int flags)
{
	_Atomic(struct pl_file *) *s = slot(fd, false);
	/* (in a vfork child: the parent's table is read, never written) */
	struct pl_file *p = s ? atomic_load(s) : NULL;
	char path[64];
	int r, fl;

	fl = p ? p->flags : O_RDONLY;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	r = pl_libc.openat(AT_FDCWD, path, (fl & ~(O_CREAT | O_EXCL | O_TRUNC)) | O_CLOEXEC);
	if (r < 0)
		return -1;
	if (pl_libc.dup3(r, newfd, flags) < 0) {
		int e = errno;

		pl_libc.close(r);
		errno = e;
		return -1;
	}
	if (p != NULL)
		(void)pl_libc.lseek(newfd, (off_t)p->off, SEEK_SET);
	pl_libc.close(r);
	return newfd;
}

void
pl_before_exec(void)
{
	bool own = pl_own_process();

	if (atomic_load(&pl_nfiles) == 0)
		return;
	for (int c = 0; c < NCHUNKS; c++) {
		_Atomic(struct pl_file *) *ch = atomic_load(&chunks[c]);

		for (int i = 0; ch != NULL && i < CHUNK; i++) {
			struct pl_file *p = atomic_load(&ch[i]);
			int fd = c * CHUNK + i, fdf;

			if (p == NULL || !p->opath)
				continue;
			fdf = pl_libc.fcntl(fd, F_GETFD);
			if (fdf < 0 || (fdf & FD_CLOEXEC))
				continue; /* gone with the exec */
			if (own)
				(void)pl_real(fd);
			else
				(void)pl_real_copy(fd, fd, 0);
		}
	}
}

/* ---- fork: the child gets kernel descriptors, and a client of its own when it opens ---- */

static void
fork_prepare(void)
{
	struct held h;

	/* what was written before fork reads back in the child, through the kernel */
	hold_every(&h);
	for (int i = 0; i < h.n; i++)
		(void)land(h.fds[i], h.files[i]);
	unhold(&h);
	pthread_mutex_lock(&tab_mu);
}

static void
fork_parent(void)
{
	pthread_mutex_unlock(&tab_mu);
}

static void
fork_child(void)
{
	own_pid = getpid();
	pthread_mutex_init(&tab_mu, NULL);
	pthread_cond_init(&tab_cv, NULL);
	pthread_mutex_init(&mounts_mu, NULL);
	/* the parent's clients have no threads here: left as they are, never used */
	for (int i = 0; i < atomic_load(&nmounts); i++) {
		pthread_mutex_init(&mounts[i].mu, NULL);
		mounts[i].state = 0;
		mounts[i].c = NULL;
		mounts[i].fsh = NULL;
	}
	for (int c = 0; c < NCHUNKS; c++) {
		_Atomic(struct pl_file *) *ch = atomic_load(&chunks[c]);

		for (int i = 0; ch != NULL && i < CHUNK; i++) {
			struct pl_file *p = atomic_load(&ch[i]);
			int fd = c * CHUNK + i;

			if (p == NULL)
				continue;
			atomic_store(&ch[i], NULL);
			/* (a reopen that fails leaves the O_PATH descriptor: reads get EBADF) */
			if (p->opath)
				(void)reopen_real(fd, p->flags);
			(void)pl_libc.lseek(fd, (off_t)p->off, SEEK_SET);
			free(p); /* its mutex may be a parent thread's: not destroyed */
		}
	}
	atomic_store(&pl_nfiles, 0);
	atomic_store(&pl_ndirty, 0);
}

/* ---- load and exit ---- */

#define SYM(name)                                                                      \
	do {                                                                           \
		*(void **)&pl_libc_tab.name = dlsym(RTLD_NEXT, #name);                 \
		if (pl_libc_tab.name == NULL) {                                        \
			fprintf(stderr, "shoal preload: no %s in libc: off\n", #name); \
			disabled = true;                                               \
		}                                                                      \
	} while (0)

static void
load_once(void)
{
	const char *off = getenv("SHOAL_PRELOAD");

	SYM(openat);
	SYM(close);
	SYM(read);
	SYM(write);
	SYM(pread);
	SYM(pwrite);
	SYM(readv);
	SYM(writev);
	SYM(preadv2);
	SYM(pwritev2);
	SYM(lseek);
	SYM(fstat);
	SYM(fstatat);
	SYM(statx);
	SYM(fsync);
	SYM(fdatasync);
	SYM(ftruncate);
	SYM(dup);
	SYM(dup2);
	SYM(dup3);
	SYM(fcntl);
	SYM(mmap);
	SYM(fallocate);
	SYM(posix_fallocate);
	SYM(sendfile);
	SYM(copy_file_range);
	SYM(splice);
	SYM(flock);
	SYM(fchmod);
	SYM(fchown);
	SYM(fgetxattr);
	SYM(fsetxattr);
	SYM(flistxattr);
	SYM(fremovexattr);
	SYM(futimens);
	SYM(posix_fadvise);
	SYM(preadv);
	SYM(pwritev);
	SYM(ioctl);
	SYM(lockf);
	SYM(fdopen);
	SYM(execve);
	SYM(execvpe);
	SYM(fexecve);
	SYM(posix_spawn);
	SYM(posix_spawnp);
	SYM(readahead);
	SYM(isatty);
	SYM(_exit);
	SYM(fopen);
	SYM(fileno);
	SYM(fileno_unlocked);
	SYM(_Exit);
	if (off != NULL && strcmp(off, "0") == 0)
		disabled = true;
	own_pid = getpid();
	stats_path = getenv("SHOAL_PRELOAD_STATS");
	pthread_atfork(fork_prepare, fork_parent, fork_child);
	atomic_store_explicit(&pl_libc_ready, true, memory_order_release);
}

struct pl_libc_fns *
pl_libc_load(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, load_once);
	return &pl_libc_tab;
}

__attribute__((constructor)) static void
pl_load(void)
{
	(void)pl_libc_load();
	/*
	 * OpenSSL set up before the program can: it then never frees itself at
	 * exit, and the destructor below still seals what it sends (net/auth.h)
	 */
	net_auth_init();
}

/* $SHOAL_PRELOAD_STATS: one line per process at exit (what the tests check). */
void
pl_at_exit(bool stdio)
{
	static atomic_bool done;
	struct held h;
	FILE *f;

	if (!pl_own_process() || atomic_exchange(&done, true))
		return;
	if (stdio)
		(void)fflush(NULL);
	/* what files still open buffered lands, as the kernel's page cache would keep it */
	hold_every(&h);
	for (int i = 0; i < h.n; i++) {
		pl_inside++;
		(void)sh_fsync(h.files[i]->f);
		pl_inside--;
	}
	unhold(&h);
	if (stats_path == NULL)
		return;
	pl_inside++;
	f = fopen(stats_path, "a");
	if (f != NULL) {
		fprintf(f, "pid %d served %lu kernel %lu real %lu\n", (int)getpid(),
			atomic_load(&n_served), atomic_load(&n_kernel), atomic_load(&n_real));
		fclose(f);
	}
	pl_inside--;
}

__attribute__((destructor)) static void
pl_unload(void)
{
	pl_at_exit(true);
}
