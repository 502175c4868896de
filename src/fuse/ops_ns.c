// SPDX-License-Identifier: Apache-2.0
/* shoal mount: names and attributes (sfuse.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/fs.h>
#include <sys/xattr.h>
#include <stdlib.h>
#include <string.h>

#include "../base/clock.h"
#include "../base/hash.h"
#include "ops.h"

int
sfuse_errno(long rc)
{
	if (rc >= 0)
		return 0;
	return rc <= -4096 ? EIO : (int)-rc;
}

struct sfuse *
sfuse_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

/*
 * The caller's credentials own what this request creates in parent — the
 * group is the parent's when it is a setgid directory (as Linux does);
 * *sgid says so, for new directories to inherit the bit.
 */
/*
 * Directories' attributes as this mount last answered the kernel with them
 * (getattr, lookup, setattr), trusted for as long as the kernel trusts its
 * own copy (attr_timeout) and kept up with this mount's own creates in them:
 * - a create needs its parent's setgid bit and group, which the kernel has
 *   just asked for;
 * - the kernel forgets a directory's attributes after every create in it
 *   and asks for them again on the next path walk (default_permissions):
 *   answered here, as the bucket will have them once the create's delta is
 *   applied (size + 1, a subdirectory's link, mtime and ctime the new
 *   entry's), not with a request per file created. Another client's change
 *   is seen as late as the kernel's own cache would see it (attr_timeout
 *   from the answer the memo started from); any other change of a name in
 *   it (unlink, rmdir, link) forgets the directory, a rename forgets all.
 */
#define DIR_MEMO 1024
static struct {
	uint64_t ino, at_ns;
	struct stat st;
} dir_memo[DIR_MEMO];
static pthread_mutex_t dir_memo_mu = PTHREAD_MUTEX_INITIALIZER;

/* An inode's slot: its number hashed whole (the low bits are a per-bucket counter, alike
 * in directories of different buckets, which took turns in one slot) */
static unsigned
memo_slot(uint64_t ino)
{
	return (unsigned)(sh_hash_u64(ino) % DIR_MEMO);
}

void
sfuse_dir_memo_put(const struct stat *st)
{
	unsigned i = memo_slot(st->st_ino);

	if (!S_ISDIR(st->st_mode) || !sfuse_live(st->st_ino))
		return;
	pthread_mutex_lock(&dir_memo_mu);
	dir_memo[i].ino = st->st_ino;
	dir_memo[i].st = *st;
	dir_memo[i].at_ns = sh_clock_mono_ns();
	pthread_mutex_unlock(&dir_memo_mu);
}

void
sfuse_dir_memo_forget(uint64_t ino)
{
	unsigned i = memo_slot(ino);

	pthread_mutex_lock(&dir_memo_mu);
	if (ino == 0)
		memset(dir_memo, 0, sizeof(dir_memo));
	else if (dir_memo[i].ino == ino)
		dir_memo[i].ino = 0;
	pthread_mutex_unlock(&dir_memo_mu);
}

static void
ts_max(struct timespec *a, const struct timespec *b)
{
	if (b->tv_sec > a->tv_sec || (b->tv_sec == a->tv_sec && b->tv_nsec > a->tv_nsec))
		*a = *b;
}

void
sfuse_dir_memo_created(uint64_t parent, const struct stat *child)
{
	unsigned i = memo_slot(parent);

	pthread_mutex_lock(&dir_memo_mu);
	if (dir_memo[i].ino == parent) {
		struct stat *st = &dir_memo[i].st;

		/* as the delta's apply does (meta_ops.c apply_local) */
		st->st_size++;
		if (S_ISDIR(child->st_mode))
			st->st_nlink++;
		ts_max(&st->st_mtim, &child->st_ctim);
		ts_max(&st->st_ctim, &child->st_ctim);
	}
	pthread_mutex_unlock(&dir_memo_mu);
}

/* The directory's memo while the kernel may trust it; *left: for how much longer (s). */
static bool
dir_memo_get(const struct sfuse *s, uint64_t ino, struct stat *st, double *left)
{
	unsigned i = memo_slot(ino);
	bool hit;

	memset(st, 0, sizeof(*st));
	if (s->o.attr_timeout <= 0)
		return false;
	pthread_mutex_lock(&dir_memo_mu);
	*left = s->o.attr_timeout - (double)(sh_clock_mono_ns() - dir_memo[i].at_ns) / 1e9;
	hit = dir_memo[i].ino == ino && *left > 0;
	if (hit)
		*st = dir_memo[i].st;
	pthread_mutex_unlock(&dir_memo_mu);
	return hit;
}

void
sfuse_creds(fuse_req_t req, fuse_ino_t parent, bool *sgid)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct sfuse *s = sfuse_of(req);
	struct stat st;
	gid_t gid = ctx->gid;
	double left;

	if (sgid)
		*sgid = false;
	if (!dir_memo_get(s, parent, &st, &left) && sh_getattr(s->fs, parent, &st) == 0)
		sfuse_dir_memo_put(&st);
	if (st.st_ino == parent && (st.st_mode & S_ISGID)) {
		gid = st.st_gid;
		if (sgid)
			*sgid = true;
	}
	sh_creds(ctx->uid, gid);
}

void
sfuse_reply_err(fuse_req_t req, long rc)
{
	fuse_reply_err(req, sfuse_errno(rc));
}

void
sfuse_reply_entry(fuse_req_t req, int rc, const struct stat *st)
{
	struct sfuse *s = sfuse_of(req);
	struct fuse_entry_param e = { 0 };

	if (rc < 0) {
		/* a negative entry may be cached like a positive one */
		if (rc == -ENOENT && s->o.entry_timeout > 0) {
			e.entry_timeout = s->o.entry_timeout;
			fuse_reply_entry(req, &e);
			return;
		}
		sfuse_reply_err(req, rc);
		return;
	}
	e.ino = st->st_ino;
	e.generation = 1;
	e.attr = *st;
	e.attr_timeout = s->o.attr_timeout;
	e.entry_timeout = s->o.entry_timeout;
	sfuse_dir_memo_put(st);
	fuse_reply_entry(req, &e);
}

/* What a create-like call made in parent (its errors, ENOENT included, are errors: no
 * negative entry). */
void
sfuse_reply_new(fuse_req_t req, fuse_ino_t parent, int rc, const struct stat *st)
{
	if (rc < 0) {
		sfuse_reply_err(req, rc);
		return;
	}
	sfuse_dir_memo_created(parent, st);
	sfuse_reply_entry(req, 0, st);
}

static void
op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct sfuse_where w;
	struct stat st;
	int rc;

	if (sfuse_snap_lookup(req, parent, name))
		return; /* /.snapshots, or a snapshot in it */
	rc = sfuse_where(sfuse_of(req), parent, &w);
	if (rc == 0)
		rc = sh_lookup(w.fs, w.ino, name, &st);
	/*
	 * A file open here for writing may have buffered bytes its size does
	 * not count yet; the kernel takes the size in the reply as the file's
	 * (once its attributes expired, a stat of the path comes here, not to
	 * a getattr): what open files wrote counts, as for a getattr.
	 */
	if (rc == 0 && w.snap < 0 && S_ISREG(st.st_mode) && sfuse_flush_ino(st.st_ino, NULL) > 0)
		rc = sh_getattr(w.fs, st.st_ino, &st);
	if (rc == 0)
		rc = sfuse_kstat(&w, &st);
	sfuse_reply_entry(req, rc, &st);
}

/* A change under a snapshot (or of /.snapshots): EROFS answered, true. */
static bool
read_only(fuse_req_t req, fuse_ino_t ino)
{
	if (sfuse_live(ino))
		return false;
	fuse_reply_err(req, EROFS);
	return true;
}

static void
op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	(void)ino;
	(void)nlookup;
	fuse_reply_none(req); /* nothing is kept per inode */
}

static void
op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct sfuse_where w;
	struct stat st;
	double left;
	int rc;

	(void)fi;
	if (sfuse_live(ino) && dir_memo_get(sfuse_of(req), ino, &st, &left)) {
		fuse_reply_attr(req, &st, left); /* a directory the kernel just forgot */
		return;
	}
	rc = sfuse_where(sfuse_of(req), ino, &w);
	if (rc == 1) {
		sfuse_snapdir_stat(sfuse_of(req), &st);
		fuse_reply_attr(req, &st, sfuse_of(req)->o.attr_timeout);
		return;
	}
	if (rc == 0 && w.snap < 0)
		sfuse_flush_ino(ino, NULL); /* what open files wrote counts */
	if (rc == 0)
		rc = sh_getattr(w.fs, w.ino, &st);
	if (rc == 0)
		rc = sfuse_kstat(&w, &st);
	if (rc < 0) {
		sfuse_reply_err(req, rc);
	} else {
		sfuse_dir_memo_put(&st);
		fuse_reply_attr(req, &st, sfuse_of(req)->o.attr_timeout);
	}
}

static void
op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set, struct fuse_file_info *fi)
{
	struct sfuse *s = sfuse_of(req);
	struct stat st = *attr, out;
	unsigned valid = 0;
	int rc = 0;

	if (read_only(req, ino))
		return;
	if (to_set & FUSE_SET_ATTR_MODE)
		valid |= SH_SET_MODE;
	if (to_set & FUSE_SET_ATTR_UID)
		valid |= SH_SET_UID;
	if (to_set & FUSE_SET_ATTR_GID)
		valid |= SH_SET_GID;
	(void)fi;
	sfuse_flush_ino(ino, NULL); /* buffered writes land before the change */
	if (to_set & FUSE_SET_ATTR_SIZE)
		valid |= SH_SET_SIZE;
	if (to_set & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_ATIME_NOW)) {
		valid |= SH_SET_ATIME;
		if (to_set & FUSE_SET_ATTR_ATIME_NOW)
			clock_gettime(CLOCK_REALTIME, &st.st_atim);
	}
	if (to_set & (FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_MTIME_NOW)) {
		valid |= SH_SET_MTIME;
		if (to_set & FUSE_SET_ATTR_MTIME_NOW)
			clock_gettime(CLOCK_REALTIME, &st.st_mtim);
	}
	if (rc == 0)
		rc =
		    valid ? sh_setattr(s->fs, ino, &st, valid, &out) : sh_getattr(s->fs, ino, &out);
	if (rc < 0) {
		sfuse_reply_err(req, rc);
	} else {
		sfuse_dir_memo_put(&out);
		fuse_reply_attr(req, &out, s->o.attr_timeout);
	}
}

static void
op_readlink(fuse_req_t req, fuse_ino_t ino)
{
	char buf[4097];
	struct sfuse_where w;
	long n = sfuse_where(sfuse_of(req), ino, &w);

	if (n == 0)
		n = sh_readlink_ino(w.fs, w.ino, buf, sizeof(buf) - 1);
	else if (n == 1)
		n = -EINVAL; /* /.snapshots is no link */

	if (n < 0) {
		sfuse_reply_err(req, n);
		return;
	}
	buf[n] = '\0';
	fuse_reply_readlink(req, buf);
}

static void
op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
	struct stat st;
	int rc;

	if (read_only(req, parent))
		return;
	sfuse_creds(req, parent, NULL);
	rc = sh_mknod_at(sfuse_of(req)->fs, parent, name, mode, rdev, &st);
	sfuse_reply_new(req, parent, rc, &st);
}

static void
op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	struct stat st;
	int rc;

	bool sgid;

	if (read_only(req, parent))
		return;
	sfuse_creds(req, parent, &sgid);
	/* the kernel applied umask; a setgid parent passes its bit on */
	rc = sh_mkdir_at(sfuse_of(req)->fs, parent, name, mode | (sgid ? S_ISGID : 0), &st);
	sfuse_reply_new(req, parent, rc, &st);
}

static void
op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	struct stat st;
	int rc;

	if (read_only(req, parent))
		return;
	sfuse_creds(req, parent, NULL);
	rc = sh_symlink_at(sfuse_of(req)->fs, link, parent, name, &st);
	sfuse_reply_new(req, parent, rc, &st);
}

static void
op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	struct stat st;
	int rc;

	if (read_only(req, sfuse_live(ino) ? newparent : ino))
		return;
	sfuse_flush_ino(ino, NULL); /* the reply's size is the kernel's from here on */
	rc = sh_link_at(sfuse_of(req)->fs, ino, newparent, newname, &st);
	sfuse_dir_memo_forget(newparent); /* its times are the link's, not the inode's */
	sfuse_reply_new(req, newparent, rc, &st);
}

static void
op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	if (read_only(req, parent))
		return;
	int rc = sh_unlink_at(sfuse_of(req)->fs, parent, name);

	sfuse_dir_memo_forget(parent);
	sfuse_reply_err(req, rc);
}

static void
op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	if (read_only(req, parent))
		return;
	int rc = sh_rmdir_at(sfuse_of(req)->fs, parent, name);

	sfuse_dir_memo_forget(parent);
	sfuse_reply_err(req, rc);
}

static void
op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
	  const char *newname, unsigned int flags)
{
	unsigned f = 0;
	int rc;

	if (read_only(req, sfuse_live(parent) ? newparent : parent))
		return;
	if (flags & ~(unsigned)(RENAME_NOREPLACE | RENAME_EXCHANGE)) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (flags & RENAME_NOREPLACE)
		f |= SH_RENAME_NOREPLACE;
	if (flags & RENAME_EXCHANGE)
		f |= SH_RENAME_EXCHANGE;
	rc = sh_rename_at(sfuse_of(req)->fs, parent, name, newparent, newname, f);
	sfuse_dir_memo_forget(0); /* both parents, and a directory moved (its ctime, its ..) */
	sfuse_reply_err(req, rc);
}

static void
op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct statvfs v;
	int rc = sh_statvfs(sfuse_of(req)->fs, &v);

	(void)ino;
	if (rc < 0)
		sfuse_reply_err(req, rc);
	else
		fuse_reply_statfs(req, &v);
}

/*
 * Files known to have no security.capability, since when: the kernel asks
 * for it before every write(2) to a FUSE file (file_remove_privs; FUSE
 * never marks an inode S_NOSEC), which was a round trip to the file's
 * bucket per write (180 us a 1-byte write). An answer "none" is trusted for
 * as long as the kernel trusts the file's attributes (attr_timeout), as a
 * mode another client changed is; setting or removing an xattr through
 * this mount forgets the file at once.
 */
#define CAPS_MEMO 1024
static struct {
	uint64_t ino, at_ns;
} caps_memo[CAPS_MEMO];
static pthread_mutex_t caps_memo_mu = PTHREAD_MUTEX_INITIALIZER;

static bool
caps_none(const struct sfuse *s, uint64_t ino)
{
	unsigned i = memo_slot(ino);
	bool hit;

	pthread_mutex_lock(&caps_memo_mu);
	hit = caps_memo[i].ino == ino &&
	      (double)(sh_clock_mono_ns() - caps_memo[i].at_ns) / 1e9 < s->o.attr_timeout;
	pthread_mutex_unlock(&caps_memo_mu);
	return hit;
}

/* at_ns 0: forget ino */
static void
caps_memo_set(uint64_t ino, uint64_t at_ns)
{
	unsigned i = memo_slot(ino);

	pthread_mutex_lock(&caps_memo_mu);
	if (at_ns != 0)
		caps_memo[i].ino = ino, caps_memo[i].at_ns = at_ns;
	else if (caps_memo[i].ino == ino)
		caps_memo[i].ino = 0;
	pthread_mutex_unlock(&caps_memo_mu);
}

/* The root's SFUSE_XATTR_MOUNT and SFUSE_XATTR_KEY: the mount's own, never stored */
static bool
is_mount_xattr(fuse_ino_t ino, const char *name)
{
	return ino == FUSE_ROOT_ID &&
	       (strcmp(name, SFUSE_XATTR_MOUNT) == 0 || strcmp(name, SFUSE_XATTR_KEY) == 0);
}

static void
op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value, size_t size,
	    int flags)
{
	int f = (flags & XATTR_CREATE ? SH_XATTR_CREATE : 0) |
		(flags & XATTR_REPLACE ? SH_XATTR_REPLACE : 0);
	int rc;

	if (is_mount_xattr(ino, name)) {
		fuse_reply_err(req, EPERM);
		return;
	}
	if (read_only(req, ino))
		return;
	(void)sfuse_fresh_ino(ino, true);
	caps_memo_set(ino, 0);
	rc = sh_setxattr_ino(sfuse_of(req)->fs, ino, name, value, size, f);
	sfuse_dir_memo_forget(ino); /* its ctime */
	sfuse_reply_err(req, rc);
}

/* getxattr and listxattr: size 0 asks for the length */
static void
reply_value(fuse_req_t req, long n, const char *buf, size_t size)
{
	if (n < 0)
		sfuse_reply_err(req, n);
	else if (size == 0)
		fuse_reply_xattr(req, (size_t)n);
	else
		fuse_reply_buf(req, buf, (size_t)n);
}

static void
op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	bool caps = strcmp(name, "security.capability") == 0;
	char *buf;

	if (caps && (sfuse_fresh_ino(ino, false) || caps_none(sfuse_of(req), ino))) {
		sfuse_reply_err(req, -ENODATA);
		return;
	}
	if (is_mount_xattr(ino, name)) {
		const struct sfuse_opts *o = &sfuse_of(req)->o;
		const char *mgmt = strcmp(name, SFUSE_XATTR_MOUNT) == 0 ? o->mgmt : o->key_file;
		size_t n = mgmt ? strlen(mgmt) : 0;

		if (n == 0)
			fuse_reply_err(req, ENODATA); /* no --key-file */
		else if (size == 0)
			fuse_reply_xattr(req, n);
		else if (size < n)
			fuse_reply_err(req, ERANGE);
		else
			fuse_reply_buf(req, mgmt, n);
		return;
	}
	struct sfuse_where w;
	long n = sfuse_where(sfuse_of(req), ino, &w);

	buf = size ? malloc(size) : NULL;
	if (n == 1)
		n = -ENODATA; /* /.snapshots has none */
	else if (n == 0)
		n = size && buf == NULL ? -ENOMEM : sh_getxattr_ino(w.fs, w.ino, name, buf, size);
	if (caps && n == -ENODATA && sfuse_of(req)->o.attr_timeout > 0)
		caps_memo_set(ino, sh_clock_mono_ns());

	reply_value(req, n, buf, size);
	free(buf);
}

static void
op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	char *buf = size ? malloc(size) : NULL;
	struct sfuse_where w;
	long n = sfuse_where(sfuse_of(req), ino, &w);

	if (n == 0)
		n = size && buf == NULL ? -ENOMEM : sh_listxattr_ino(w.fs, w.ino, buf, size);
	else if (n == 1)
		n = 0; /* /.snapshots has none */

	reply_value(req, n, buf, size);
	free(buf);
}

static void
op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	int rc;

	if (is_mount_xattr(ino, name)) {
		fuse_reply_err(req, EPERM);
		return;
	}
	if (read_only(req, ino))
		return;
	caps_memo_set(ino, 0);
	rc = sh_removexattr_ino(sfuse_of(req)->fs, ino, name);
	sfuse_dir_memo_forget(ino); /* its ctime */
	sfuse_reply_err(req, rc);
}

/* The session starts: the largest request the kernel may send (-o max_io). */
static void
op_init(void *userdata, struct fuse_conn_info *conn)
{
	struct sfuse *s = userdata;
	unsigned max = s->o.max_io_kb ? s->o.max_io_kb * 1024 : 1u << 20;

	conn->max_write = max;
	conn->max_read = max;
	/*
	 * The kernel never drops a file's pages on a getattr's changed mtime or
	 * size: a write on its way would be lost to the cache (ops_io.c, "the
	 * kernel's page cache"); an open does, where nothing can be written.
	 */
	conn->want &= ~FUSE_CAP_AUTO_INVAL_DATA;
	if (conn->capable & FUSE_CAP_EXPLICIT_INVAL_DATA)
		conn->want |= FUSE_CAP_EXPLICIT_INVAL_DATA;
}

const struct fuse_lowlevel_ops sfuse_ops = {
	.init = op_init,
	.lookup = op_lookup,
	.forget = op_forget,
	.getattr = op_getattr,
	.setattr = op_setattr,
	.readlink = op_readlink,
	.mknod = op_mknod,
	.mkdir = op_mkdir,
	.symlink = op_symlink,
	.link = op_link,
	.unlink = op_unlink,
	.rmdir = op_rmdir,
	.rename = op_rename,
	.statfs = op_statfs,
	.setxattr = op_setxattr,
	.getxattr = op_getxattr,
	.listxattr = op_listxattr,
	.removexattr = op_removexattr,
	.create = sfuse_create,
	.open = sfuse_open,
	.read = sfuse_read,
	.write = sfuse_write,
	.flush = sfuse_flush,
	.fsync = sfuse_fsync,
	.release = sfuse_release,
	.fallocate = sfuse_fallocate,
	.opendir = sfuse_opendir,
	.readdir = sfuse_readdir,
	.readdirplus = sfuse_readdirplus,
	.releasedir = sfuse_releasedir,
};
