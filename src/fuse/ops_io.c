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
};

static pthread_mutex_t open_mu = PTHREAD_MUTEX_INITIALIZER;
static struct ofile *open_tab[OPEN_SLOTS];

/* The chain of ino's handles (the number hashed whole: its low bits repeat across buckets) */
static struct ofile **
open_head(uint64_t ino)
{
	return &open_tab[sh_hash_u64(ino) % OPEN_SLOTS];
}

static void
open_add(uint64_t ino, sh_file *f, bool fresh, int flags)
{
	struct ofile *o = malloc(sizeof(*o));

	if (o == NULL)
		return; /* flushed at close all the same */
	o->ino = ino;
	o->f = f;
	o->fresh = fresh;
	o->writable = (flags & O_ACCMODE) != O_RDONLY;
	pthread_mutex_lock(&open_mu);
	o->next = *open_head(ino);
	*open_head(ino) = o;
	pthread_mutex_unlock(&open_mu);
}

static void
open_del(uint64_t ino, sh_file *f)
{
	pthread_mutex_lock(&open_mu);
	for (struct ofile **pp = open_head(ino); *pp; pp = &(*pp)->next)
		if ((*pp)->f == f) {
			struct ofile *o = *pp;

			*pp = o->next;
			free(o);
			break;
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

bool
sfuse_open_ino(uint64_t ino)
{
	bool open = false;

	pthread_mutex_lock(&open_mu);
	for (struct ofile *o = *open_head(ino); o && !open; o = o->next)
		open = o->ino == ino;
	pthread_mutex_unlock(&open_mu);
	return open;
}

int
sfuse_flush_ino(uint64_t ino)
{
	int rc = 0;

	pthread_mutex_lock(&open_mu);
	for (struct ofile *o = *open_head(ino); o; o = o->next)
		if (o->ino == ino) {
			int r = sh_fsync(o->f);

			if (rc == 0)
				rc = r;
		}
	pthread_mutex_unlock(&open_mu);
	return rc;
}

void
sfuse_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
	     struct fuse_file_info *fi)
{
	struct sfuse *s = sfuse_of(req);
	struct fuse_entry_param e = { 0 };
	sh_file *f;
	int rc;

	if (!sfuse_live(parent)) {
		fuse_reply_err(req, EROFS);
		return;
	}
	sfuse_creds(req, parent, NULL);
	rc = sh_mknod_at(s->fs, parent, name, S_IFREG | (mode & 07777), 0, &e.attr);
	if (rc == 0)
		sfuse_dir_memo_created(parent, &e.attr);
	else if (rc == -EEXIST && !(fi->flags & O_EXCL))
		rc = sh_lookup(s->fs, parent, name, &e.attr); /* raced with another creator */
	if (rc == 0)
		rc = sh_open_stat(s->fs, &e.attr, fi->flags, &f);
	if (rc < 0) {
		sfuse_reply_err(req, rc);
		return;
	}
	fi->fh = (uintptr_t)f;
	fi->direct_io = s->o.coherent || s->o.nocache; /* no page cache: every read asks */
	open_add(e.attr.st_ino, f, true, fi->flags);
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
	struct sfuse_where w;
	sh_file *f;
	int rc;

	sfuse_readahead(sfuse_of(req)); /* once: the kernel's INIT is done by now */
	rc = sfuse_where(sfuse_of(req), ino, &w);
	if (rc == 1)
		rc = -EISDIR;
	if (rc == 0)
		rc = sh_open_ino(w.fs, w.ino, fi->flags, &f); /* (a snapshot's: EROFS to write) */
	if (rc < 0) {
		sfuse_reply_err(req, rc);
		return;
	}
	fi->fh = (uintptr_t)f;
	fi->keep_cache = 0; /* close-to-open: what another client wrote is read again */
	fi->direct_io = sfuse_of(req)->o.coherent || sfuse_of(req)->o.nocache;
	open_add(ino, f, false, fi->flags);
	if (fuse_reply_open(req, fi) != 0) {
		open_del(ino, f);
		sh_close(f);
	}
}

void
sfuse_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	char *buf = malloc(size ? size : 1);
	long n = buf ? sh_pread(fh(fi), buf, size, (uint64_t)off) : -ENOMEM;

	(void)ino;
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
	if ((fi->flags & O_APPEND) && (n = sfuse_flush_ino(ino)) < 0) {
		sfuse_reply_err(req, n);
		return;
	}
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
 * before the close returns, so the next stat or read through this mount
 * asks, and a changed mtime or size drops the cached pages then
 * (FUSE_CAP_AUTO_INVAL_DATA, op_init).
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
