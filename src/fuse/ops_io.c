// SPDX-License-Identifier: Apache-2.0
/* shoal mount: file data and directory listings (sfuse.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/hash.h"
#include "ops.h"

static sh_file *
fh(const struct fuse_file_info *fi)
{
	return (sh_file *)(uintptr_t)fi->fh;
}

/*
 * The files open through this mount, by inode: a getattr or setattr
 * without a handle (stat, utimensat, chmod by path) first flushes what
 * they buffered, so the size the kernel is told is never older than what
 * was written. Only open files are here: nothing grows with files seen.
 */
#define OPEN_SLOTS 1024

struct ofile {
	struct ofile *next;
	uint64_t ino;
	sh_file *f;
	bool fresh; /* this handle made the file, and no xattr was set through this mount since */
	bool writable; /* opened for writing (a flush's fi carries no flags) */
	unsigned busy; /* flushes for other callers in progress (sfuse_flush_ino) */
};

static pthread_mutex_t open_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t open_cv = PTHREAD_COND_INITIALIZER; /* a handle no longer busy */
static struct ofile *open_tab[OPEN_SLOTS];

/* The chain of ino's handles (the number hashed whole: its low bits repeat across buckets) */
static struct ofile **
open_head(uint64_t ino)
{
	return &open_tab[sh_hash_u64(ino) % OPEN_SLOTS];
}

static int
open_add(uint64_t ino, sh_file *f, bool fresh, int flags)
{
	struct ofile *o = malloc(sizeof(*o));

	if (o == NULL)
		return -ENOMEM;
	o->ino = ino;
	o->f = f;
	o->fresh = fresh;
	o->writable = (flags & O_ACCMODE) != O_RDONLY;
	o->busy = 0;
	pthread_mutex_lock(&open_mu);
	o->next = *open_head(ino);
	*open_head(ino) = o;
	pthread_mutex_unlock(&open_mu);
	return 0;
}

/* f leaves the open files, once no flush for another caller holds it. */
static void
open_del(uint64_t ino, sh_file *f)
{
	pthread_mutex_lock(&open_mu);
	for (struct ofile **pp = open_head(ino); *pp;) {
		struct ofile *o = *pp;

		if (o->f != f) {
			pp = &o->next;
		} else if (o->busy > 0) {
			pthread_cond_wait(&open_cv, &open_mu);
			pp = open_head(ino); /* (the chain may have changed meanwhile) */
		} else {
			*pp = o->next;
			free(o);
			break;
		}
	}
	pthread_mutex_unlock(&open_mu);
}

bool
sfuse_fresh_ino(uint64_t ino, bool forget)
{
	bool fresh = false;

	pthread_mutex_lock(&open_mu);
	for (struct ofile *o = *open_head(ino); o; o = o->next)
		if (o->ino == ino) {
			fresh |= o->fresh;
			if (forget)
				o->fresh = false;
		}
	pthread_mutex_unlock(&open_mu);
	return fresh;
}

/* Whether ino's handle f was opened for writing (not known: yes). */
static bool
open_writable(uint64_t ino, sh_file *f)
{
	bool w = true;

	pthread_mutex_lock(&open_mu);
	for (struct ofile *o = *open_head(ino); o; o = o->next)
		if (o->f == f) {
			w = o->writable;
			break;
		}
	pthread_mutex_unlock(&open_mu);
	return w;
}

/* Whether a handle here has ino open (writers: for writing). */
static bool
open_any(uint64_t ino, bool writers)
{
	bool open = false;

	pthread_mutex_lock(&open_mu);
	for (struct ofile *o = *open_head(ino); o && !open; o = o->next)
		open = o->ino == ino && (o->writable || !writers);
	pthread_mutex_unlock(&open_mu);
	return open;
}

bool
sfuse_open_ino(uint64_t ino)
{
	return open_any(ino, false);
}

/*
 * The handles are flushed outside open_mu (each held busy meanwhile, so it
 * is not freed): a flush waits for its writer's call in progress, and the
 * opens, reads and stats of every other file take open_mu.
 */
#define FLUSH_MAX 16

unsigned
sfuse_flush_ino(uint64_t ino, const sh_file *except)
{
	struct ofile *held[FLUSH_MAX];
	unsigned n = 0, more = 0;

	pthread_mutex_lock(&open_mu);
	for (struct ofile *o = *open_head(ino); o; o = o->next) {
		if (o->ino != ino || o->f == except || !o->writable)
			continue;
		if (n < FLUSH_MAX) {
			o->busy++;
			held[n++] = o;
		} else {
			(void)sh_flush(o->f); /* (so many writers of one file: under the lock) */
			more++;
		}
	}
	pthread_mutex_unlock(&open_mu);
	/* (a failure is its handle's, for its own fsync or close) */
	for (unsigned i = 0; i < n; i++)
		(void)sh_flush(held[i]->f);
	if (n == 0)
		return more;
	pthread_mutex_lock(&open_mu);
	for (unsigned i = 0; i < n; i++)
		held[i]->busy--;
	pthread_cond_broadcast(&open_cv);
	pthread_mutex_unlock(&open_mu);
	return n + more;
}

/*
 * ---- the kernel's page cache of a file ----
 *
 * The kernel keeps the pages of a file it read or wrote through this
 * mount. A write(2) copies its bytes into them, unlocks them, and only
 * then sends its WRITE; if the pages are dropped in between and another
 * thread's read-ahead asks for them again, the READ is answered before
 * the WRITE arrives and the pages hold the bytes from before the write,
 * which the writer then reads back (four threads writing and reading
 * back their quarters of one descriptor saw it once in 60 runs). The
 * kernel drops a file's pages on a changed mtime or size in a getattr
 * (FUSE_CAP_AUTO_INVAL_DATA), at every open without keep_cache, and on
 * a notification from here; so this mount asks for none of the first
 * two (FUSE_CAP_EXPLICIT_INVAL_DATA, keep_cache set) and drops pages
 * itself only where no write can be on its way: at an open, when no
 * handle here has the file open for writing and the file's ctime,
 * mtime or size differ from when its pages were last dropped or first
 * kept (close-to-open: what another client wrote is read, and a file
 * nobody changed keeps its pages from one open to the next). A writer's
 * open waits while the file's pages are being dropped.
 */
#define KEPT_SLOTS   16384 /* direct-mapped: a file pushed out is dropped at its next open */
#define DROPPING_MAX 64

struct kept {
	uint64_t ino, ctime_ns, mtime_ns, size;
};

static pthread_mutex_t gate_mu = PTHREAD_MUTEX_INITIALIZER; /* before open_mu */
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;
static struct kept kept_tab[KEPT_SLOTS];
static uint64_t dropping[DROPPING_MAX]; /* files whose pages are being dropped */
static unsigned ndropping;

static uint64_t
ts_ns(const struct timespec *t)
{
	return (uint64_t)t->tv_sec * 1000000000ull + (uint64_t)t->tv_nsec;
}

static struct kept
kept_of(uint64_t ino, const struct stat *st)
{
	return (struct kept){ .ino = ino,
			      .ctime_ns = ts_ns(&st->st_ctim),
			      .mtime_ns = ts_ns(&st->st_mtim),
			      .size = (uint64_t)st->st_size };
}

/* Under gate_mu: the slot of ino among the files being dropped, or -1. */
static int
dropping_at(uint64_t ino)
{
	for (unsigned i = 0; i < ndropping; i++)
		if (dropping[i] == ino)
			return (int)i;
	return -1;
}

/*
 * An open of ino with flags, whose attributes are st now: the kernel's
 * pages of it dropped first if they may be older than the file. Whether
 * the open may keep the kernel's pages (false: the notification failed;
 * the kernel drops them itself).
 */
static bool
pages_checked(struct sfuse *s, uint64_t ino, const struct stat *st, int flags)
{
	struct kept now = kept_of(ino, st), *k = &kept_tab[sh_hash_u64(ino) % KEPT_SLOTS];
	int rc, at;

	/*
	 * O_TRUNC: the kernel drops the pages itself once the open is answered,
	 * and meanwhile holds back the file's page write-backs, which dropping
	 * its mmap-dirtied pages from here would wait for.
	 */
	if ((flags & O_TRUNC) && (flags & O_ACCMODE) != O_RDONLY)
		return true;
	pthread_mutex_lock(&gate_mu);
	while (dropping_at(ino) >= 0 || ndropping == DROPPING_MAX)
		pthread_cond_wait(&gate_cv, &gate_mu);
	if (open_any(ino, true) || memcmp(k, &now, sizeof(now)) == 0) {
		/* a writer here: the pages are the newest this mount has (and one may be
		 * on its way); or the file is as it was when its pages were last checked */
		pthread_mutex_unlock(&gate_mu);
		return true;
	}
	dropping[ndropping++] = ino;
	pthread_mutex_unlock(&gate_mu);
	rc = fuse_lowlevel_notify_inval_inode(s->se, ino, 0, 0);
	pthread_mutex_lock(&gate_mu);
	at = dropping_at(ino); /* (before the count shrinks: it may be the last) */
	dropping[at] = dropping[--ndropping];
	if (rc == 0 || rc == -ENOENT) /* (ENOENT: the kernel has no pages of it) */
		*k = now;
	pthread_cond_broadcast(&gate_cv);
	pthread_mutex_unlock(&gate_mu);
	return rc == 0 || rc == -ENOENT;
}

/* A new file's pages: none, and none older than st. */
static void
pages_new(uint64_t ino, const struct stat *st)
{
	pthread_mutex_lock(&gate_mu);
	kept_tab[sh_hash_u64(ino) % KEPT_SLOTS] = kept_of(ino, st);
	pthread_mutex_unlock(&gate_mu);
}

/*
 * f, ino's new handle, joins the open files (a writer once no open is
 * dropping ino's pages). -ENOMEM.
 */
static int
open_join(uint64_t ino, sh_file *f, bool fresh, int flags)
{
	int rc;

	pthread_mutex_lock(&gate_mu);
	while ((flags & O_ACCMODE) != O_RDONLY && dropping_at(ino) >= 0)
		pthread_cond_wait(&gate_cv, &gate_mu);
	rc = open_add(ino, f, fresh, flags);
	pthread_mutex_unlock(&gate_mu);
	return rc;
}

void
sfuse_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
	     struct fuse_file_info *fi)
{
	struct sfuse *s = sfuse_of(req);
	struct fuse_entry_param e = { 0 };
	sh_file *f;
	bool made;
	int rc;

	if (!sfuse_live(parent)) {
		fuse_reply_err(req, EROFS);
		return;
	}
	sfuse_creds(req, parent, NULL);
	rc = sh_mknod_at(s->fs, parent, name, S_IFREG | (mode & 07777), 0, &e.attr);
	made = rc == 0;
	if (rc == 0)
		sfuse_dir_memo_created(parent, &e.attr);
	else if (rc == -EEXIST && !(fi->flags & O_EXCL))
		rc = sh_lookup(s->fs, parent, name, &e.attr); /* raced with another creator */
	if (rc == 0) /* O_TRUNC: only of a file another creator made first */
		rc = sh_open_stat(s->fs, &e.attr, made ? fi->flags & ~O_TRUNC : fi->flags, &f);
	if (rc < 0) {
		sfuse_reply_err(req, rc);
		return;
	}
	if (made)
		pages_new(e.attr.st_ino, &e.attr);
	else
		fi->keep_cache = pages_checked(s, e.attr.st_ino, &e.attr, fi->flags);
	rc = open_join(e.attr.st_ino, f, made, fi->flags);
	if (rc < 0) {
		sh_close(f);
		sfuse_reply_err(req, rc);
		return;
	}
	fi->fh = (uintptr_t)f;
	fi->direct_io = s->o.coherent || s->o.nocache; /* no page cache: every read asks */
	e.ino = e.attr.st_ino;
	e.generation = 1;
	e.attr_timeout = s->o.attr_timeout;
	e.entry_timeout = s->o.entry_timeout;
	if (fuse_reply_create(req, &e, fi) != 0) {
		open_del(e.attr.st_ino, f);
		sh_close(f); /* the caller went away */
	}
}

void
sfuse_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct sfuse *s = sfuse_of(req);
	struct sfuse_where w;
	struct stat st;
	sh_file *f;
	int rc;

	sfuse_readahead(s); /* once: the kernel's INIT is done by now */
	rc = sfuse_where(s, ino, &w);
	if (rc == 1)
		rc = -EISDIR;
	/*
	 * Everything under /.snapshots is read-only here, a writable snapshot's
	 * too (its handle is its clone's, which the library lets write: it is
	 * written through a mount of FS@NAME).
	 */
	if (rc == 0 && w.snap >= 0 &&
	    ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC)))
		rc = -EROFS;
	if (rc == 0)
		rc = sh_open_ino_st(w.fs, w.ino, fi->flags, &st, &f);
	/*
	 * close-to-open: what another client wrote is read (a read-only
	 * snapshot's file never changes, and keeps its pages; a writable one's
	 * is read anew once it changed)
	 */
	if (rc == 0)
		fi->keep_cache = pages_checked(s, ino, &st, fi->flags);
	if (rc == 0) {
		rc = open_join(ino, f, false, fi->flags);
		if (rc < 0)
			sh_close(f);
	}
	if (rc < 0) {
		sfuse_reply_err(req, rc);
		return;
	}
	fi->fh = (uintptr_t)f;
	fi->direct_io = s->o.coherent || s->o.nocache;
	if (fuse_reply_open(req, fi) != 0) {
		open_del(ino, f);
		sh_close(f);
	}
}

void
sfuse_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	char *buf = malloc(size ? size : 1);
	long n;

	/* the kernel asks for pages it does not hold, through any handle: what the others
	 * here buffered (a partial page written through another descriptor) counts */
	sfuse_flush_ino(ino, fh(fi));
	n = buf ? sh_pread(fh(fi), buf, size, (uint64_t)off) : -ENOMEM;
	if (n < 0)
		sfuse_reply_err(req, n);
	else
		fuse_reply_buf(req, buf, (size_t)n);
	free(buf);
}

void
sfuse_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
	    struct fuse_file_info *fi)
{
	long n;

	/*
	 * O_APPEND is the file system's to honour (no writeback cache): the
	 * end is the size once what other open files here buffered has landed
	 * (fsx caught an append that went under another descriptor's write).
	 */
	if (fi->flags & O_APPEND)
		sfuse_flush_ino(ino, fh(fi));
	n = sh_pwrite(fh(fi), buf, size, (uint64_t)off);
	if (n < 0)
		sfuse_reply_err(req, n);
	else
		fuse_reply_write(req, (size_t)n);
}

/*
 * close(2) of one descriptor: what it wrote is made durable and visible
 * (close-to-open). A descriptor open for writing may have had its data
 * written around the kernel (libshoal_preload.so writes straight to the
 * cluster, docs/preload.md): the kernel forgets the file's attributes
 * before the close returns, so the next stat asks; the next open finds
 * the file changed and drops the pages ("the kernel's page cache" above).
 *
 * Attributes only, never the pages from here: dropping pages takes each
 * page's lock, and a write(2) into the same file holds its pages locked
 * until its WRITE is answered. A flush comes from any close of any copy
 * of the descriptor (a fork's child closing what it inherited, while the
 * parent writes), so the flush would wait on a write that waits for this
 * mount's threads: the chaos test hung so, the killer's fork stuck in
 * close_range.
 */
void
sfuse_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	int rc = sh_fsync(fh(fi));

	if (rc == 0 && open_writable(ino, fh(fi)))
		(void)fuse_lowlevel_notify_inval_inode(sfuse_of(req)->se, ino, -1, 0);
	sfuse_reply_err(req, rc);
}

void
sfuse_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	(void)ino;
	(void)datasync;
	sfuse_reply_err(req, sh_fsync(fh(fi)));
}

void
sfuse_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	open_del(ino, fh(fi));
	sfuse_reply_err(req, sh_close(fh(fi)));
}

/*
 * fallocate mode 0: the file covers [off, off + len) afterwards (a hole
 * reads as zeros; space is taken when written). Other modes: EOPNOTSUPP.
 */
void
sfuse_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
		struct fuse_file_info *fi)
{
	struct stat st;
	int rc;

	if (!sfuse_live(ino)) {
		fuse_reply_err(req, EROFS);
		return;
	}
	if (mode != 0) {
		fuse_reply_err(req, EOPNOTSUPP);
		return;
	}
	if (off < 0 || len <= 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	rc = sh_fsync(fh(fi));
	if (rc == 0)
		rc = sh_getattr(sfuse_of(req)->fs, ino, &st);
	if (rc == 0 && (uint64_t)st.st_size < (uint64_t)off + (uint64_t)len) {
		st.st_size = off + len;
		rc = sh_setattr(sfuse_of(req)->fs, ino, &st, SH_SET_SIZE, NULL);
	}
	sfuse_reply_err(req, rc);
}

/* ---- directories ---- */

struct dh {
	sh_dir *d;
	uint64_t ino;		/* the kernel's number */
	struct sfuse_where w;	/* where it is (/.snapshots: w.fs NULL) */
	char (*snaps)[64];	/* /.snapshots: the snapshots' names */
	fuse_ino_t *snap_kinos; /* and their roots' numbers */
	int nsnaps;
	off_t pos; /* entries handed out so far ("." and ".." are the first two) */
	struct sh_dirent next;
	struct stat next_st; /* readdirplus: its attributes (st_ino 0: none) */
	bool have_next;
};

static struct dh *
dhp(const struct fuse_file_info *fi)
{
	return (struct dh *)(uintptr_t)fi->fh;
}

static void
dh_free(struct dh *h)
{
	if (h->d != NULL)
		sh_closedir(h->d);
	free(h->snaps);
	free(h->snap_kinos);
	free(h);
}

/* The next entry of /.snapshots (a directory per ready snapshot): 1, or 0 at the end. */
static int
next_snap(struct dh *h, struct sh_dirent *e, struct stat *st)
{
	int i = (int)h->pos - 2;

	if (i >= h->nsnaps)
		return 0;
	memset(e, 0, sizeof(*e));
	e->ino = h->snap_kinos[i];
	e->type = DT_DIR;
	snprintf(e->name, sizeof(e->name), "%s", h->snaps[i]);
	if (st != NULL)
		memset(st, 0, sizeof(*st)); /* the kernel looks each one up */
	return 1;
}

/* An entry of a snapshot's directory: its numbers become the kernel's (-ENOMEM). */
static int
to_kernel(const struct dh *h, struct sh_dirent *e, struct stat *st)
{
	if (h->w.snap < 0)
		return 0;
	e->ino = sfuse_kino(&h->w, e->ino);
	if (st != NULL && st->st_ino != 0)
		st->st_ino = e->ino;
	return e->ino != 0 ? 0 : -ENOMEM;
}

void
sfuse_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct dh *h = calloc(1, sizeof(*h));
	int rc = h ? sfuse_where(sfuse_of(req), ino, &h->w) : -ENOMEM;

	if (rc == 1) {
		h->w.fs = NULL;
		rc = h->nsnaps = sfuse_snapdir_list(sfuse_of(req), &h->snaps, &h->snap_kinos);
	} else if (rc == 0) {
		rc = sh_opendir_ino(h->w.fs, h->w.ino, &h->d);
	}
	if (rc < 0) {
		free(h);
		sfuse_reply_err(req, rc);
		return;
	}
	h->ino = ino;
	fi->fh = (uintptr_t)h;
	if (fuse_reply_open(req, fi) != 0)
		dh_free(h);
}

/*
 * The entry at position pos (0 ".", 1 "..", then the directory's),
 * advancing h; with st (readdirplus), its attributes when they came with
 * the listing (st_ino 0: none, the kernel looks it up).
 */
static int
next_entry(struct dh *h, struct sh_dirent *e, struct stat *st)
{
	int rc;

	if (st != NULL)
		memset(st, 0, sizeof(*st));
	if (h->pos < 2) {
		memset(e, 0, sizeof(*e));
		e->ino = h->ino; /* ".." gets the directory too: FUSE does not use it */
		e->type = DT_DIR;
		strcpy(e->name, h->pos == 0 ? "." : "..");
		return 1;
	}
	if (h->have_next) {
		*e = h->next;
		if (st != NULL)
			*st = h->next_st;
		return 1;
	}
	if (h->w.fs == NULL)
		return next_snap(h, e, st);
	rc = st == NULL ? sh_readdir(h->d, e) : sh_readdir_plus(h->d, e, st);
	if (rc == 1 && to_kernel(h, e, st) < 0)
		rc = -ENOMEM;
	return rc;
}

/* A seek (rewinddir, seekdir): list again from the start up to off. */
static int
dir_seek(struct sfuse *s, struct dh *h, off_t off)
{
	int rc = 0;

	(void)s;
	if (h->d != NULL)
		sh_closedir(h->d);
	h->d = NULL;
	h->pos = 0;
	h->have_next = false;
	if (h->w.fs != NULL)
		rc = sh_opendir_ino(h->w.fs, h->w.ino, &h->d);
	while (rc == 0 && h->pos < off) {
		struct sh_dirent e;

		rc = next_entry(h, &e, NULL);
		if (rc == 1) {
			h->pos++;
			rc = 0;
		} else if (rc == 0) {
			break;
		}
	}
	return rc;
}

/* One entry into buf (its size n, or more than left when it does not fit). */
static size_t
add_entry(fuse_req_t req, struct sfuse *s, char *buf, size_t left, const struct sh_dirent *e,
	  const struct stat *st, off_t next, bool plus)
{
	struct fuse_entry_param ep = { 0 };

	if (!plus) {
		struct stat t = { .st_ino = e->ino, .st_mode = (mode_t)e->type << 12 };

		return fuse_add_direntry(req, buf, left, e->name, &t, next);
	}
	/*
	 * ino 0 gives the kernel the name alone (it looks the entry up when
	 * used). A file open here may have buffered writes the listing's size
	 * does not show: its attributes come from a getattr, which flushes.
	 */
	ep.attr.st_ino = e->ino;
	ep.attr.st_mode = (mode_t)e->type << 12;
	if (st->st_ino != 0 && strcmp(e->name, ".") != 0 && strcmp(e->name, "..") != 0 &&
	    !sfuse_open_ino(e->ino)) {
		ep.ino = e->ino;
		ep.generation = 1;
		ep.attr = *st;
		ep.attr_timeout = s->o.attr_timeout;
		ep.entry_timeout = s->o.entry_timeout;
	}
	return fuse_add_direntry_plus(req, buf, left, e->name, &ep, next);
}

static void
list(fuse_req_t req, size_t size, off_t off, struct fuse_file_info *fi, bool plus)
{
	struct sfuse *s = sfuse_of(req);
	struct dh *h = dhp(fi);
	char *buf = malloc(size);
	size_t used = 0;
	int rc = buf ? 0 : -ENOMEM;

	if (rc == 0 && off != h->pos)
		rc = dir_seek(s, h, off);
	while (rc == 0) {
		struct sh_dirent e;
		struct stat st;
		size_t n;

		rc = next_entry(h, &e, plus ? &st : NULL);
		if (rc <= 0)
			break;
		rc = 0;
		n = add_entry(req, s, buf + used, size - used, &e, &st, h->pos + 1, plus);
		if (n > size - used) {
			/* no room: keep it for the next call */
			if (h->pos >= 2) {
				h->next = e;
				h->next_st = plus ? st : (struct stat){ 0 };
				h->have_next = true;
			}
			break;
		}
		used += n;
		h->pos++;
		h->have_next = false;
	}
	if (rc < 0 && used == 0)
		sfuse_reply_err(req, rc);
	else
		fuse_reply_buf(req, buf, used);
	free(buf);
}

void
sfuse_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	(void)ino;
	list(req, size, off, fi, false);
}

void
sfuse_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	(void)ino;
	list(req, size, off, fi, true);
}

void
sfuse_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	dh_free(dhp(fi));
	fuse_reply_err(req, 0);
}
