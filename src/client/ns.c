// SPDX-License-Identifier: Apache-2.0
/* libshoal's namespace: operations by inode and by path (client.h); directories in ns_dir.c. */
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "client_int.h"

#define PATH_DEPTH 256

/* ---- conversions ---- */

static const struct {
	uint8_t type;
	mode_t fmt;
	unsigned char dt;
} types[] = {
	{ META_REG, S_IFREG, DT_REG },	  { META_DIR, S_IFDIR, DT_DIR },
	{ META_LNK, S_IFLNK, DT_LNK },	  { META_CHR, S_IFCHR, DT_CHR },
	{ META_BLK, S_IFBLK, DT_BLK },	  { META_FIFO, S_IFIFO, DT_FIFO },
	{ META_SOCK, S_IFSOCK, DT_SOCK },
};

static mode_t
type_fmt(uint8_t t)
{
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		if (types[i].type == t)
			return types[i].fmt;
	return 0;
}

unsigned char
client_type_dt(uint8_t t)
{
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		if (types[i].type == t)
			return types[i].dt;
	return DT_UNKNOWN;
}

static int
fmt_type(mode_t m, uint8_t *t)
{
	if ((m & S_IFMT) == 0) {
		*t = META_REG;
		return 0;
	}
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		if (types[i].fmt == (m & S_IFMT)) {
			*t = types[i].type;
			return 0;
		}
	return -EINVAL;
}

/*
 * Times are stored as nanoseconds since the epoch in 64 bits, read as
 * signed: a time before 1970 (tar of an old tree, utimensat of a negative
 * second) is stored as its two's complement and comes back as it was set.
 */
static void
ns_ts(uint64_t ns, struct timespec *ts)
{
	int64_t v = (int64_t)ns, s = v / 1000000000, n = v % 1000000000;

	if (n < 0)
		s--, n += 1000000000;
	ts->tv_sec = (time_t)s;
	ts->tv_nsec = (long)n;
}

/*
 * A time (tv_nsec in [0, 1e9): the caller checks) to nanoseconds since the
 * epoch, held to what 64 bits signed can say either way (1677-2262), so
 * that ns_ts's seconds times 1e9 plus its nanoseconds never overflow either.
 */
static uint64_t
ts_ns(const struct timespec *ts)
{
	const int64_t lim = INT64_MAX / 1000000000 - 1;

	if (ts->tv_sec > lim)
		return (uint64_t)(lim * 1000000000 + 999999999);
	if (ts->tv_sec < -lim)
		return (uint64_t)(-lim * 1000000000);
	return (uint64_t)((int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec);
}

static bool
nsec_ok(const struct timespec *ts)
{
	return ts->tv_nsec >= 0 && ts->tv_nsec < 1000000000L;
}

void
client_to_stat(uint64_t ino, const struct meta_inode *in, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_mode = type_fmt(in->type) | (in->mode & 07777);
	st->st_nlink = in->nlink;
	st->st_uid = in->uid;
	st->st_gid = in->gid;
	st->st_rdev = in->rdev;
	st->st_size = (off_t)in->size;
	st->st_blksize = 65536;
	st->st_blocks = in->type == META_DIR ? 0 : (blkcnt_t)((in->size + 511) / 512);
	ns_ts(in->atime, &st->st_atim);
	ns_ts(in->mtime, &st->st_mtim);
	ns_ts(in->ctime, &st->st_ctim);
}

/* The wall clock, through the client's env (virtual in the simulator). */
static uint64_t
now_ns(sh_fs *fs)
{
	return env_realtime(fs->c->env);
}

void
client_now_ts(sh_fs *fs, struct timespec *ts)
{
	ns_ts(now_ns(fs), ts);
}

/* ---- requests ---- */

static int
name_ok(const char *name, size_t *len)
{
	*len = strnlen(name, SH_NAME_MAX + 2);
	if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		return -EINVAL;
	return meta_name_check(name, *len);
}

static uint16_t
entry_bucket(sh_fs *fs, uint64_t parent, const char *name, size_t len)
{
	return meta_dentry_bucket(parent, name, len, fs->nbuckets);
}

/* Replicate a command at bucket; res holds the reply. */
int
ns_cmd(sh_fs *fs, uint16_t bucket, struct meta_cmd *mc, struct cres *res)
{
	struct mp_req q = { .kind = MP_CMD, .fs = fs->id, .bucket = bucket };
	struct sh_enc e;
	int rc;

	if (fs->at != 0) {
		memset(res, 0, sizeof(*res));
		return -EROFS; /* a snapshot */
	}
	/* after what we saw (the leader writes at this or its group's version) */
	mc->ver = atomic_load(&fs->ver_seen);
	if (mc->ver == 0)
		mc->ver = 1;
	cache_forget_cmd(fs, mc, false); /* what it changes is not to be trusted from here on */
	sh_enc_init(&e);
	rc = meta_cmd_encode(&e, mc);
	if (rc == 0) {
		q.data = e.p;
		q.dlen = e.len;
		rc = client_meta(fs->c, &q, res);
		for (uint64_t seen = atomic_load(&fs->ver_seen); res->rep.ver > seen;)
			if (atomic_compare_exchange_weak(&fs->ver_seen, &seen, res->rep.ver))
				break;
		cache_forget_cmd(fs, mc, true); /* nor what a lookup cached meanwhile */
	} else {
		memset(res, 0, sizeof(*res));
	}
	sh_enc_fini(&e);
	return rc;
}

int
ns_read(sh_fs *fs, uint8_t kind, uint16_t bucket, uint64_t ino, const char *name, size_t nlen,
	uint32_t max, struct cres *res)
{
	return ns_read_at(fs, kind, bucket, ino, name, nlen, max, 0, res);
}

int
ns_read_at(sh_fs *fs, uint8_t kind, uint16_t bucket, uint64_t ino, const char *name, size_t nlen,
	   uint32_t max, uint64_t off, struct cres *res)
{
	struct mp_req q = { .kind = kind,
			    .fs = fs->id,
			    .bucket = bucket,
			    .ino = ino,
			    .max = max,
			    .off = off,
			    .at = client_at(fs) };

	if (nlen > META_NAME_MAX) {
		memset(res, 0, sizeof(*res));
		return -ENAMETOOLONG;
	}
	q.nlen = (uint16_t)nlen;
	memcpy(q.name, name, nlen);
	return client_meta(fs->c, &q, res);
}

int
sh_getattr(sh_fs *fs, uint64_t ino, struct stat *st)
{
	struct cres r;
	int rc;

	struct meta_inode in;
	uint64_t since;

	if (!client_ino_valid(fs, ino))
		return -ESTALE;
	if (cache_get_attr(fs, ino, &in)) {
		if (st)
			client_to_stat(ino, &in, st);
		return 0;
	}
	since = cache_now(fs);
	rc = ns_read(fs, MP_GETATTR, meta_ino_bucket(ino), ino, "", 0, 0, &r);
	return client_attr_reply(fs, ino, rc, &r, since, st);
}

int
client_attr_reply(sh_fs *fs, uint64_t ino, int rc, struct cres *r, uint64_t since, struct stat *st)
{
	if (rc == 0 && !(r->rep.flags & MP_ATTR))
		rc = -EPROTO;
	if (rc == 0 && (r->rep.flags & MP_CACHE)) {
		cache_put_attr(fs, ino, &r->rep.attr, since);
		if (r->rep.flags & MP_INLINE)
			cache_put_inline(fs, ino, &r->rep.attr, r->rep.data, r->rep.dlen);
	}
	if (rc == 0 && st)
		client_to_stat(ino, &r->rep.attr, st);
	cres_fini(r);
	return rc;
}

/* Look name up in parent: its inode and (one more round trip if elsewhere) its attributes. */
static int
lookup(sh_fs *fs, uint64_t parent, const char *name, uint64_t *ino, struct meta_inode *attr,
       bool need_attr)
{
	struct cres r;
	size_t len;
	uint8_t type;
	uint64_t since;
	int rc = name_ok(name, &len);

	if (rc < 0)
		return rc;
	if (!client_ino_valid(fs, parent))
		return -ESTALE;
	if (cache_get_entry(fs, parent, name, len, ino, &type)) {
		struct stat st;

		/* the entry is known: a walk needs its type only; else its attributes */
		if (!need_attr) {
			*attr = (struct meta_inode){ .type = type };
			return 0;
		}
		if (cache_get_attr(fs, *ino, attr))
			return 0;
		rc = sh_getattr(fs, *ino, &st);
		if (rc == 0 && !cache_get_attr(fs, *ino, attr)) {
			struct cres a;

			rc = ns_read(fs, MP_GETATTR, meta_ino_bucket(*ino), *ino, "", 0, 0, &a);
			if (rc == 0)
				*attr = a.rep.attr;
			cres_fini(&a);
		}
		return rc == -ESTALE ? -ENOENT : rc;
	}
	since = cache_now(fs);
	rc = ns_read(fs, MP_LOOKUP, entry_bucket(fs, parent, name, len), parent, name, len, 0, &r);
	if (rc == 0 && !(r.rep.flags & MP_DENTRY))
		rc = -EPROTO;
	if (rc == 0 && (r.rep.flags & MP_CACHE)) {
		cache_put_entry(fs, parent, name, len, r.rep.dentry.ino, r.rep.dentry.type, since);
		if (r.rep.flags & MP_ATTR)
			cache_put_attr(fs, r.rep.dentry.ino, &r.rep.attr, since);
		if ((r.rep.flags & (MP_ATTR | MP_INLINE)) == (MP_ATTR | MP_INLINE))
			cache_put_inline(fs, r.rep.dentry.ino, &r.rep.attr, r.rep.data, r.rep.dlen);
	}
	if (rc == 0) {
		*ino = r.rep.dentry.ino;
		client_hold_looked_up(fs, *ino);
		if (r.rep.flags & MP_ATTR) {
			*attr = r.rep.attr;
		} else if (!need_attr) {
			*attr = (struct meta_inode){ .type = r.rep.dentry.type };
		} else {
			struct cres a;

			rc = ns_read(fs, MP_GETATTR, meta_ino_bucket(*ino), *ino, "", 0, 0, &a);
			if (rc == 0)
				*attr = a.rep.attr;
			if (rc == -ESTALE)
				rc = -ENOENT; /* removed between the two */
			cres_fini(&a);
		}
	}
	cres_fini(&r);
	return rc;
}

int
sh_lookup(sh_fs *fs, uint64_t parent, const char *name, struct stat *st)
{
	struct meta_inode in;
	uint64_t ino;
	int rc = lookup(fs, parent, name, &ino, &in, true);

	if (rc == 0 && st)
		client_to_stat(ino, &in, st);
	return rc;
}

static __thread bool creds_set;
static __thread uid_t creds_uid;
static __thread gid_t creds_gid;

void
sh_creds(uid_t uid, gid_t gid)
{
	creds_set = true;
	creds_uid = uid;
	creds_gid = gid;
}

static int
create_at(sh_fs *fs, uint64_t parent, const char *name, uint8_t type, mode_t mode, dev_t rdev,
	  const char *target, struct stat *out)
{
	struct meta_cmd mc = { .op = META_OP_CREATE,
			       .type = type,
			       .parent = parent,
			       .mode = mode & 07777,
			       .uid = (uint32_t)(creds_set ? creds_uid : getuid()),
			       .gid = (uint32_t)(creds_set ? creds_gid : getgid()),
			       .rdev = (uint32_t)rdev,
			       .tag = client_tag(fs->c) };
	struct cres r;
	size_t len;
	int rc = name_ok(name, &len);

	if (rc < 0)
		return rc;
	if (!client_ino_valid(fs, parent))
		return -ESTALE;
	memcpy(mc.name, name, len + 1);
	if (target != NULL) {
		mc.data = (const uint8_t *)target;
		mc.dlen = strlen(target);
	}
	rc = ns_cmd(fs, entry_bucket(fs, parent, name, len), &mc, &r);
	if (rc == 0 && out != NULL) {
		if ((r.rep.flags & (MP_ATTR | MP_DENTRY)) != (MP_ATTR | MP_DENTRY))
			rc = -EPROTO;
		else
			client_to_stat(r.rep.dentry.ino, &r.rep.attr, out);
	}
	cres_fini(&r);
	return rc;
}

int
sh_mknod_at(sh_fs *fs, uint64_t parent, const char *name, mode_t mode, dev_t rdev, struct stat *out)
{
	uint8_t t;

	if (fmt_type(mode, &t) < 0 || t == META_DIR || t == META_LNK)
		return -EINVAL;
	return create_at(fs, parent, name, t, mode, rdev, NULL, out);
}

int
sh_mkdir_at(sh_fs *fs, uint64_t parent, const char *name, mode_t mode, struct stat *out)
{
	return create_at(fs, parent, name, META_DIR, mode, 0, NULL, out);
}

int
sh_symlink_at(sh_fs *fs, const char *target, uint64_t parent, const char *name, struct stat *out)
{
	if (target == NULL || *target == '\0')
		return -ENOENT;
	if (strlen(target) >= 4096)
		return -ENAMETOOLONG;
	return create_at(fs, parent, name, META_LNK, 0777, 0, target, out);
}

static int
remove_at(sh_fs *fs, uint64_t parent, const char *name, bool dir)
{
	struct meta_cmd mc = {
		.op = META_OP_REMOVE, .parent = parent, .dir = dir, .tag = client_tag(fs->c)
	};
	struct cres r;
	size_t len;
	int rc = name_ok(name, &len);

	if (rc < 0)
		return rc == -EINVAL && dir && strcmp(name, ".") == 0 ? -EINVAL
		       : rc == -EINVAL && dir			      ? -ENOTEMPTY
								      : rc;
	if (!client_ino_valid(fs, parent))
		return -ESTALE;
	memcpy(mc.name, name, len + 1);
	rc = ns_cmd(fs, entry_bucket(fs, parent, name, len), &mc, &r);
	cres_fini(&r);
	return rc;
}

int
sh_unlink_at(sh_fs *fs, uint64_t parent, const char *name)
{
	return remove_at(fs, parent, name, false);
}

int
sh_rmdir_at(sh_fs *fs, uint64_t parent, const char *name)
{
	return remove_at(fs, parent, name, true);
}

/*
 * A directory is never moved below itself: walk up from the new parent by
 * the parents the directories' buckets keep (MP_PARENT) and refuse when the
 * walk meets the directory that moves (-EINVAL, as Linux). A parent not
 * known (0), or a walk that cannot go on, lets the rename go: the check
 * protects against mistakes, not against two clients racing.
 */
static int
check_not_below(sh_fs *fs, uint64_t parent, const char *name, uint64_t newparent)
{
	struct meta_inode in;
	uint64_t moving, at = newparent;
	int rc;

	if (parent == newparent)
		return 0;
	rc = lookup(fs, parent, name, &moving, &in, false); /* the type is enough */
	if (rc < 0 || in.type != META_DIR)
		return 0; /* the rename itself says what is wrong */
	for (unsigned depth = 0; depth < 4096 && at != 0; depth++) {
		struct cres r;

		if (at == moving)
			return -EINVAL;
		if (at == META_ROOT_INO)
			return 0;
		rc = ns_read(fs, MP_PARENT, meta_ino_bucket(at), at, "", 0, 0, &r);
		at = rc == 0 ? r.rep.aux : 0;
		cres_fini(&r);
	}
	return 0;
}

int
sh_rename_at(sh_fs *fs, uint64_t parent, const char *name, uint64_t newparent, const char *newname,
	     unsigned flags)
{
	struct meta_cmd mc = { .op = META_OP_RENAME,
			       .parent = parent,
			       .parent2 = newparent,
			       .flags = flags,
			       .tag = client_tag(fs->c) };
	struct cres r;
	size_t len, len2;
	int rc = name_ok(name, &len);

	if (rc == 0)
		rc = name_ok(newname, &len2);
	if (rc < 0)
		return rc;
	if (flags & ~(unsigned)(SH_RENAME_NOREPLACE | SH_RENAME_EXCHANGE) ||
	    (flags & SH_RENAME_NOREPLACE && flags & SH_RENAME_EXCHANGE))
		return -EINVAL;
	if (!client_ino_valid(fs, parent) || !client_ino_valid(fs, newparent))
		return -ESTALE;
	memcpy(mc.name, name, len + 1);
	memcpy(mc.name2, newname, len2 + 1);
	rc = check_not_below(fs, parent, name, newparent);
	if (rc == 0 && (flags & SH_RENAME_EXCHANGE)) /* the other one moves too */
		rc = check_not_below(fs, newparent, newname, parent);
	if (rc < 0)
		return rc;
	rc = ns_cmd(fs, entry_bucket(fs, parent, name, len), &mc, &r);
	cres_fini(&r);
	return rc;
}

int
sh_link_at(sh_fs *fs, uint64_t ino, uint64_t parent, const char *name, struct stat *out)
{
	struct meta_cmd mc = {
		.op = META_OP_LINK, .parent = parent, .ino = ino, .tag = client_tag(fs->c)
	};
	struct stat st;
	struct cres r;
	size_t len;
	int rc = name_ok(name, &len);

	if (rc < 0)
		return rc;
	if (!client_ino_valid(fs, parent))
		return -ESTALE;
	rc = sh_getattr(fs, ino, &st);
	if (rc < 0)
		return rc == -ENOENT ? -ESTALE : rc;
	if (S_ISDIR(st.st_mode))
		return -EPERM;
	fmt_type(st.st_mode, &mc.type);
	memcpy(mc.name, name, len + 1);
	rc = ns_cmd(fs, entry_bucket(fs, parent, name, len), &mc, &r);
	cres_fini(&r);
	if (rc == 0 && out != NULL) {
		rc = sh_getattr(fs, ino, out);
		/* the inode's count follows by a delta from the entry's bucket: it may not
		 * have come yet, but this client made a link: show at least that */
		if (rc == 0 && out->st_nlink < st.st_nlink + 1) {
			struct timespec now;

			out->st_nlink = st.st_nlink + 1;
			/* and its ctime moves with it (the kernel keeps what this says) */
			ns_ts(now_ns(fs), &now);
			if (out->st_ctim.tv_sec < now.tv_sec ||
			    (out->st_ctim.tv_sec == now.tv_sec &&
			     out->st_ctim.tv_nsec < now.tv_nsec))
				out->st_ctim = now;
		}
	}
	return rc;
}

static int
setattr(sh_fs *fs, uint64_t ino, const struct meta_setattr *sa, struct stat *out)
{
	struct meta_cmd mc = { .op = META_OP_SETATTR, .ino = ino, .sa = *sa };
	struct cres r;
	int rc;

	if (!client_ino_valid(fs, ino))
		return -ESTALE;
	if ((sa->valid & META_SET_SIZE) && sa->size > CLIENT_FILE_MAX)
		return -EFBIG; /* as far as a write may reach */
	rc = ns_cmd(fs, meta_ino_bucket(ino), &mc, &r);
	if (rc == 0 && out != NULL) {
		if (r.rep.flags & MP_ATTR)
			client_to_stat(ino, &r.rep.attr, out);
		else
			rc = sh_getattr(fs, ino, out);
	}
	cres_fini(&r);
	return rc;
}

int
sh_setattr(sh_fs *fs, uint64_t ino, const struct stat *st, unsigned valid, struct stat *out)
{
	struct meta_setattr sa = { .valid = valid };
	int rc;

	if (valid & ~(unsigned)0x3f)
		return -EINVAL;
	sa.mode = st->st_mode & 07777;
	sa.uid = st->st_uid;
	sa.gid = st->st_gid;
	sa.size = (uint64_t)st->st_size;
	if (((valid & SH_SET_ATIME) && !nsec_ok(&st->st_atim)) ||
	    ((valid & SH_SET_MTIME) && !nsec_ok(&st->st_mtim)))
		return -EINVAL;
	sa.atime = valid & SH_SET_ATIME ? ts_ns(&st->st_atim) : 0;
	sa.mtime = valid & SH_SET_MTIME ? ts_ns(&st->st_mtim) : 0;
	if (!(valid & SH_SET_SIZE))
		return setattr(fs, ino, &sa, out);
	/* the file's extents change: bumped before and after, a read in between refetches */
	atomic_fetch_add(&fs->wgen, 1);
	rc = setattr(fs, ino, &sa, out);
	atomic_fetch_add(&fs->wgen, 1);
	return rc;
}

long
sh_readlink_ino(sh_fs *fs, uint64_t ino, char *buf, size_t size)
{
	struct cres r;
	long rc;

	if (!client_ino_valid(fs, ino))
		return -ESTALE;
	rc = ns_read(fs, MP_READLINK, meta_ino_bucket(ino), ino, "", 0, 0, &r);
	if (rc == 0) {
		rc = (long)(r.rep.dlen < size ? r.rep.dlen : size);
		memcpy(buf, r.rep.data, (size_t)rc);
	}
	cres_fini(&r);
	return rc;
}

/* An attribute's name: -EINVAL (empty), -ERANGE (past 255 bytes). */
static int
xattr_name_ok(const char *name)
{
	if (name == NULL || *name == '\0')
		return -EINVAL;
	return strlen(name) > META_NAME_MAX ? -ERANGE : 0;
}

/*
 * A name an attribute may be set under, as Linux takes it: "namespace.name"
 * in a namespace Linux knows (user, trusted, security, system), the name
 * after the dot not empty; else -EOPNOTSUPP, as ext4 and tmpfs answer, or
 * -EINVAL. Only a set checks it: a name stored before this rule still reads,
 * lists and goes (cp -a, rsync -X). The mount's kernel takes
 * system.posix_acl_* itself (FUSE without POSIX ACLs refuses them), so what
 * reaches here of system.* is stored as any other name.
 */
static int
xattr_name_settable(const char *name)
{
	static const char *const spaces[] = { "user.", "trusted.", "security.", "system." };
	int rc = xattr_name_ok(name);

	if (rc < 0)
		return rc;
	for (size_t i = 0; i < sizeof(spaces) / sizeof(spaces[0]); i++) {
		size_t n = strlen(spaces[i]);

		if (strncmp(name, spaces[i], n) == 0)
			return name[n] == '\0' ? -EINVAL : 0;
	}
	return -EOPNOTSUPP;
}

/* A get or remove of name found nothing stored: -ENODATA, or why nothing could be */
static int
xattr_none(const char *name)
{
	int rc = xattr_name_settable(name);

	return rc < 0 ? rc : -ENODATA;
}

int
sh_setxattr_ino(sh_fs *fs, uint64_t ino, const char *name, const void *value, size_t size,
		int flags)
{
	struct meta_cmd mc = { .op = META_OP_SETXATTR,
			       .ino = ino,
			       .flags = (uint32_t)flags,
			       .tag = client_tag(fs->c),
			       .data = value,
			       .dlen = size };
	struct cres r;
	int rc;

	if (!client_ino_valid(fs, ino))
		return -ESTALE;
	rc = xattr_name_settable(name);
	if (rc < 0)
		return rc;
	if (size > META_XATTR_MAX)
		return -E2BIG;
	snprintf(mc.name, sizeof(mc.name), "%s", name);
	rc = ns_cmd(fs, meta_ino_bucket(ino), &mc, &r);
	cres_fini(&r);
	return rc;
}

/* A value into (buf, size) as the xattr calls return it: size 0 asks for the length. */
static long
copy_value(const struct cres *r, void *buf, size_t size)
{
	if (size == 0)
		return (long)r->rep.dlen;
	if (r->rep.dlen > size)
		return -ERANGE;
	memcpy(buf, r->rep.data, r->rep.dlen);
	return (long)r->rep.dlen;
}

long
sh_getxattr_ino(sh_fs *fs, uint64_t ino, const char *name, void *value, size_t size)
{
	struct cres r;
	long rc;

	if (!client_ino_valid(fs, ino))
		return -ESTALE;
	rc = xattr_name_ok(name);
	if (rc < 0)
		return rc;
	rc = ns_read(fs, MP_GETXATTR, meta_ino_bucket(ino), ino, name, strlen(name), 0, &r);
	if (rc == 0)
		rc = copy_value(&r, value, size);
	else if (rc == -ENODATA)
		rc = xattr_none(name); /* none stored, and none could be: as Linux */
	cres_fini(&r);
	return rc;
}

long
sh_listxattr_ino(sh_fs *fs, uint64_t ino, char *list, size_t size)
{
	struct cres r;
	long rc;

	if (!client_ino_valid(fs, ino))
		return -ESTALE;
	rc = ns_read(fs, MP_LISTXATTR, meta_ino_bucket(ino), ino, "", 0, 0, &r);
	if (rc == 0)
		rc = copy_value(&r, list, size);
	cres_fini(&r);
	return rc;
}

int
sh_removexattr_ino(sh_fs *fs, uint64_t ino, const char *name)
{
	struct meta_cmd mc = { .op = META_OP_REMOVEXATTR, .ino = ino, .tag = client_tag(fs->c) };
	struct cres r;
	int rc;

	if (!client_ino_valid(fs, ino))
		return -ESTALE;
	rc = xattr_name_ok(name);
	if (rc < 0)
		return rc;
	snprintf(mc.name, sizeof(mc.name), "%s", name);
	rc = ns_cmd(fs, meta_ino_bucket(ino), &mc, &r);
	if (rc == -ENODATA)
		rc = xattr_none(name);
	cres_fini(&r);
	return rc;
}

/* ---- paths ---- */

/*
 * Walk path from the root: *ino the inode it names, *parent its directory
 * and *leaf its last component (for the calls that create or remove it).
 * Symbolic links met in the middle (and at the end when follow) are
 * followed; ".." goes back up the directories walked.
 */
struct walk {
	uint64_t stack[PATH_DEPTH];
	unsigned depth; /* stack[depth-1] is the current directory */
	unsigned links;
};

static int
walk_path(sh_fs *fs, struct walk *w, const char *path, bool follow, bool want_leaf, uint64_t *ino,
	  struct meta_inode *attr, char *leaf)
{
	const char *p = path;
	struct meta_inode cur = { .type = META_DIR };
	uint64_t cino;
	bool got = false; /* the last component named an inode (not "." or "..") */
	int rc;

	if (*p == '/') {
		w->depth = 1;
		w->stack[0] = SH_ROOT_INO;
		while (*p == '/')
			p++;
	}
	if (*p == '\0') {
		if (want_leaf)
			return -EINVAL; /* "/" has no entry to create or remove */
		*ino = w->stack[w->depth - 1];
		if (attr)
			*attr = cur;
		return *ino == SH_ROOT_INO ? sh_getattr(fs, *ino, NULL) : 0;
	}
	while (*p) {
		char name[SH_NAME_MAX + 1];
		const char *end = strchr(p, '/');
		size_t n = end ? (size_t)(end - p) : strlen(p);
		bool last;

		if (n > SH_NAME_MAX)
			return -ENAMETOOLONG;
		memcpy(name, p, n);
		name[n] = '\0';
		p += n;
		while (*p == '/')
			p++;
		last = *p == '\0';
		if (last && want_leaf) {
			if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
				return -EINVAL;
			memcpy(leaf, name, n + 1);
			*ino = w->stack[w->depth - 1];
			return 0;
		}
		got = false;
		if (strcmp(name, ".") == 0)
			continue;
		if (strcmp(name, "..") == 0) {
			if (w->depth > 1)
				w->depth--;
			continue;
		}
		/* a directory on the way needs its type only; the last one its attributes */
		rc = lookup(fs, w->stack[w->depth - 1], name, &cino, &cur, last);
		if (rc < 0)
			return rc;
		if (cur.type == META_LNK && (!last || follow)) {
			char target[4097];
			long tl;

			if (++w->links > SH_SYMLOOP_MAX)
				return -ELOOP;
			tl = sh_readlink_ino(fs, cino, target, sizeof(target) - 1);
			if (tl < 0)
				return (int)tl;
			target[tl] = '\0';
			rc = walk_path(fs, w, target, true, false, &cino, &cur, NULL);
			if (rc < 0)
				return rc;
		}
		if (!last) {
			if (cur.type != META_DIR)
				return -ENOTDIR;
			if (w->depth == PATH_DEPTH)
				return -ENAMETOOLONG;
			w->stack[w->depth++] = cino;
		} else {
			got = true;
			*ino = cino;
			if (attr)
				*attr = cur;
		}
	}
	if (!got) { /* ended on "." or "..": the directory we are in */
		*ino = w->stack[w->depth - 1];
		if (attr)
			*attr = (struct meta_inode){ .type = META_DIR };
	}
	return 0;
}

/* A walk from the root of an absolute path (what every call by path starts with). */
static int
walk_from_root(sh_fs *fs, const char *path, bool follow, bool want_leaf, uint64_t *ino,
	       struct meta_inode *attr, char *leaf)
{
	struct walk w = { .stack = { SH_ROOT_INO }, .depth = 1 };

	if (path == NULL || path[0] != '/')
		return -EINVAL;
	if (strlen(path) >= 4096)
		return -ENAMETOOLONG;
	*ino = 0;
	return walk_path(fs, &w, path, follow, want_leaf, ino, attr, leaf);
}

int
client_resolve(sh_fs *fs, const char *path, bool follow, uint64_t *ino)
{
	return walk_from_root(fs, path, follow, false, ino, NULL, NULL);
}

/* The directory that would hold path's last component, and that name. */
static int
resolve_parent(sh_fs *fs, const char *path, uint64_t *parent, char *leaf)
{
	return walk_from_root(fs, path, true, true, parent, NULL, leaf);
}

/* resolve_parent for the calls that name an entry: "/" itself answers root_rc. */
static int
entry_of(sh_fs *fs, const char *path, int root_rc, uint64_t *parent, char *leaf)
{
	int rc = resolve_parent(fs, path, parent, leaf);

	return rc == -EINVAL && path && strcmp(path, "/") == 0 ? root_rc : rc;
}

int
sh_resolve(sh_fs *fs, const char *path, int follow, uint64_t *ino)
{
	return client_resolve(fs, path, follow != 0, ino);
}

static int
stat_path(sh_fs *fs, const char *path, bool follow, struct stat *st)
{
	struct meta_inode in = { 0 };
	uint64_t ino = 0;
	int rc = walk_from_root(fs, path, follow, false, &ino, &in, NULL);

	if (rc < 0)
		return rc;
	/* the last lookup brought the attributes along: no second round trip */
	if (in.nlink != 0 && in.type != 0) {
		client_to_stat(ino, &in, st);
		return 0;
	}
	return sh_getattr(fs, ino, st);
}

int
sh_stat(sh_fs *fs, const char *path, struct stat *st)
{
	return stat_path(fs, path, true, st);
}

int
sh_lstat(sh_fs *fs, const char *path, struct stat *st)
{
	return stat_path(fs, path, false, st);
}

int
sh_mkdir(sh_fs *fs, const char *path, mode_t mode)
{
	char leaf[SH_NAME_MAX + 1];
	uint64_t parent;
	int rc = entry_of(fs, path, -EEXIST, &parent, leaf);

	return rc < 0 ? rc : sh_mkdir_at(fs, parent, leaf, mode, NULL);
}

int
sh_mknod(sh_fs *fs, const char *path, mode_t mode, dev_t rdev)
{
	char leaf[SH_NAME_MAX + 1];
	uint64_t parent;
	int rc = entry_of(fs, path, -EEXIST, &parent, leaf);

	return rc < 0 ? rc : sh_mknod_at(fs, parent, leaf, mode, rdev, NULL);
}

int
sh_unlink(sh_fs *fs, const char *path)
{
	char leaf[SH_NAME_MAX + 1];
	uint64_t parent;
	int rc = entry_of(fs, path, -EISDIR, &parent, leaf);

	return rc < 0 ? rc : sh_unlink_at(fs, parent, leaf);
}

int
sh_rmdir(sh_fs *fs, const char *path)
{
	char leaf[SH_NAME_MAX + 1];
	uint64_t parent;
	int rc = entry_of(fs, path, -EBUSY, &parent, leaf);

	return rc < 0 ? rc : sh_rmdir_at(fs, parent, leaf);
}

int
sh_rename(sh_fs *fs, const char *from, const char *to, unsigned flags)
{
	char l1[SH_NAME_MAX + 1], l2[SH_NAME_MAX + 1];
	uint64_t p1, p2;
	int rc = resolve_parent(fs, from, &p1, l1);

	if (rc == 0)
		rc = resolve_parent(fs, to, &p2, l2);
	if (rc < 0)
		return rc == -EINVAL ? -EBUSY : rc;
	/* a directory is never moved below itself: the target's path must not run through it */
	{
		size_t n = strlen(from);

		while (n > 1 && from[n - 1] == '/')
			n--;
		if (strncmp(from, to, n) == 0 && to[n] == '/') {
			struct stat st;

			if (sh_lstat(fs, from, &st) == 0 && S_ISDIR(st.st_mode))
				return -EINVAL;
		}
	}
	return sh_rename_at(fs, p1, l1, p2, l2, flags);
}

int
sh_link(sh_fs *fs, const char *existing, const char *newpath)
{
	char leaf[SH_NAME_MAX + 1];
	uint64_t ino, parent;
	int rc = client_resolve(fs, existing, false, &ino);

	if (rc == 0)
		rc = entry_of(fs, newpath, -EEXIST, &parent, leaf);
	return rc < 0 ? rc : sh_link_at(fs, ino, parent, leaf, NULL);
}

int
sh_symlink(sh_fs *fs, const char *target, const char *linkpath)
{
	char leaf[SH_NAME_MAX + 1];
	uint64_t parent;
	int rc = entry_of(fs, linkpath, -EEXIST, &parent, leaf);

	return rc < 0 ? rc : sh_symlink_at(fs, target, parent, leaf, NULL);
}

long
sh_readlink(sh_fs *fs, const char *path, char *buf, size_t size)
{
	struct stat st;
	uint64_t ino;
	int rc = client_resolve(fs, path, false, &ino);

	if (rc == 0)
		rc = sh_getattr(fs, ino, &st);
	if (rc < 0)
		return rc;
	if (!S_ISLNK(st.st_mode))
		return -EINVAL;
	return sh_readlink_ino(fs, ino, buf, size);
}

static int
setattr_path(sh_fs *fs, const char *path, const struct meta_setattr *sa)
{
	uint64_t ino;
	int rc = client_resolve(fs, path, true, &ino);

	return rc < 0 ? rc : setattr(fs, ino, sa, NULL);
}

int
sh_chmod(sh_fs *fs, const char *path, mode_t mode)
{
	struct meta_setattr sa = { .valid = META_SET_MODE, .mode = mode & 07777 };

	return setattr_path(fs, path, &sa);
}

int
sh_chown(sh_fs *fs, const char *path, uid_t uid, gid_t gid)
{
	struct meta_setattr sa = { .uid = uid, .gid = gid };

	if (uid != (uid_t)-1)
		sa.valid |= META_SET_UID;
	if (gid != (gid_t)-1)
		sa.valid |= META_SET_GID;
	return sa.valid ? setattr_path(fs, path, &sa)
			: client_resolve(fs, path, true, &(uint64_t){ 0 });
}

int
sh_truncate(sh_fs *fs, const char *path, uint64_t size)
{
	struct meta_setattr sa = { .valid = META_SET_SIZE, .size = size };

	return setattr_path(fs, path, &sa);
}

int
sh_utimens(sh_fs *fs, const char *path, const struct timespec times[2])
{
	struct meta_setattr sa = { 0 };
	uint64_t now = now_ns(fs);

	for (int i = 0; i < 2; i++) {
		uint64_t v;

		if (times != NULL && times[i].tv_nsec == UTIME_OMIT)
			continue;
		if (times == NULL || times[i].tv_nsec == UTIME_NOW)
			v = now;
		else if (!nsec_ok(&times[i]))
			return -EINVAL;
		else
			v = ts_ns(&times[i]);
		if (i == 0) {
			sa.valid |= META_SET_ATIME;
			sa.atime = v;
		} else {
			sa.valid |= META_SET_MTIME;
			sa.mtime = v;
		}
	}
	return sa.valid ? setattr_path(fs, path, &sa)
			: client_resolve(fs, path, true, &(uint64_t){ 0 });
}

int
sh_setxattr(sh_fs *fs, const char *path, const char *name, const void *value, size_t size,
	    int flags)
{
	uint64_t ino;
	int rc = client_resolve(fs, path, true, &ino);

	return rc < 0 ? rc : sh_setxattr_ino(fs, ino, name, value, size, flags);
}

long
sh_getxattr(sh_fs *fs, const char *path, const char *name, void *value, size_t size)
{
	uint64_t ino;
	int rc = client_resolve(fs, path, true, &ino);

	return rc < 0 ? rc : sh_getxattr_ino(fs, ino, name, value, size);
}

long
sh_listxattr(sh_fs *fs, const char *path, char *list, size_t size)
{
	uint64_t ino;
	int rc = client_resolve(fs, path, true, &ino);

	return rc < 0 ? rc : sh_listxattr_ino(fs, ino, list, size);
}

int
sh_removexattr(sh_fs *fs, const char *path, const char *name)
{
	uint64_t ino;
	int rc = client_resolve(fs, path, true, &ino);

	return rc < 0 ? rc : sh_removexattr_ino(fs, ino, name);
}

int
sh_statvfs(sh_fs *fs, struct statvfs *out)
{
	struct sh_target_usage *u = sh_calloc(CFG_DRIVES_MAX, sizeof(*u));
	uint64_t cap = client_capacity(fs->c), room = 0;
	int n = u ? sh_targets_usage(fs, u, CFG_DRIVES_MAX) : -ENOMEM;

	memset(out, 0, sizeof(*out));
	/*
	 * free: what the targets that answer can still take (a silent one counts
	 * as full); the space of a file removed counts as soon as its fragments
	 * are released, before cleaning moves the segments' live rest
	 */
	for (int i = 0; i < n && i < CFG_DRIVES_MAX; i++)
		if (u[i].status == 0)
			room += u[i].room;
	sh_free(u);
	if (n < 0)
		return n;
	out->f_bsize = 4096;
	out->f_frsize = 4096;
	out->f_blocks = cap / 4096;
	/* user data takes d+p bytes of raw space for every d: what fits is less */
	out->f_bfree = room / 4096 * fs->code.d / (fs->code.d + fs->code.p);
	out->f_blocks = out->f_blocks * fs->code.d / (fs->code.d + fs->code.p);
	if (out->f_bfree > out->f_blocks)
		out->f_bfree = out->f_blocks;
	{
		/* a quota is the filesystem's size as df shows it */
		uint64_t quota, used;

		client_quota_space(fs, &quota, &used);
		if (quota > 0) {
			uint64_t left = used < quota ? (quota - used) / 4096 : 0;

			out->f_blocks = quota / 4096;
			if (out->f_bfree > left)
				out->f_bfree = left;
		}
	}
	out->f_bavail = out->f_bfree;
	out->f_namemax = SH_NAME_MAX;
	out->f_fsid = fs->id;
	return 0;
}
