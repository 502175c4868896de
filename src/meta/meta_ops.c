// SPDX-License-Identifier: Apache-2.0
/* Namespace operations inside one bucket (meta_ops.h, docs/metadata.md). */
#include <string.h>

#include "meta_extent.h"
#include "meta_dedup.h"
#include "meta_done.h"
#include "meta_int.h"
#include "meta_version.h"

#define DELTA_VERSION 2
#define SYMLINK_MAX   4095

enum { CTR_INO = 0, CTR_OUTBOX = 1 };

/* ---- small helpers ---- */

static int
get_u64(struct meta_bucket *b, const struct meta_key *k, uint64_t *v)
{
	size_t len;
	int rc = meta_get(b->t, k, b->ver, v, sizeof(*v), &len);

	if (rc == 0 && len != sizeof(*v))
		return -EBADMSG;
	return rc;
}

static int
next_counter(struct meta_bucket *b, uint64_t which, uint64_t first, uint64_t *out)
{
	struct meta_key k;
	uint64_t v;
	int rc;

	meta_key_id(&k, b->bucket, META_K_COUNTER, which);
	rc = get_u64(b, &k, &v);
	if (rc == -ENOENT)
		v = first;
	else if (rc < 0)
		return rc;
	*out = v;
	v++;
	return meta_put(b->t, &k, b->ver, &v, sizeof(v), b->keep);
}

int
meta_inode_load(struct meta_bucket *b, uint64_t ino, struct meta_inode *in)
{
	uint8_t buf[META_INODE_LEN];
	struct meta_key k;
	size_t len;
	int rc;

	if (ino == 0 || meta_ino_bucket(ino) != b->bucket)
		return -EINVAL;
	meta_key_inode(&k, b->bucket, ino);
	rc = meta_get(b->t, &k, b->ver, buf, sizeof(buf), &len);
	if (rc == -ENOENT || rc == -EOVERFLOW)
		return rc == -ENOENT ? -ESTALE : -EBADMSG;
	return rc < 0 ? rc : meta_inode_decode(buf, len, in);
}

int
meta_inode_store(struct meta_bucket *b, uint64_t ino, const struct meta_inode *in)
{
	uint8_t buf[META_INODE_LEN];
	struct meta_key k;

	meta_inode_encode(in, buf);
	meta_key_inode(&k, b->bucket, ino);
	return meta_put(b->t, &k, b->ver, buf, sizeof(buf), b->keep);
}

int
meta_dentry_get(struct meta_bucket *b, uint64_t parent, const char *name, size_t len,
		struct meta_dentry *d, struct meta_key *k)
{
	uint8_t buf[META_DENTRY_LEN];
	size_t n;
	int rc = meta_key_dentry(k, b->bucket, parent, name, len);

	if (rc < 0)
		return rc;
	rc = meta_get(b->t, k, b->ver, buf, sizeof(buf), &n);
	return rc < 0 ? (rc == -EOVERFLOW ? -EBADMSG : rc) : meta_dentry_decode(buf, n, d);
}

/* The entry (parent, name) belongs in this bucket. */
int
meta_entry_check(struct meta_bucket *b, uint64_t parent, const char *name, size_t len)
{
	int rc = meta_name_check(name, len);

	if (rc < 0)
		return rc;
	if (parent == 0)
		return -EINVAL;
	return meta_dentry_bucket(parent, name, len, b->nbuckets) == b->bucket ? 0 : -EINVAL;
}

int
meta_touch_ctime(struct meta_bucket *b, uint64_t ino, struct meta_inode *in, uint64_t now)
{
	in->ctime = now;
	return meta_inode_store(b, ino, in);
}

/* The later of two times (stored unsigned, read signed: a time may be before 1970) */
static uint64_t
time_max(uint64_t a, uint64_t b)
{
	return (int64_t)a > (int64_t)b ? a : b;
}

/* Drop an inode and what hangs on it (symlink target, xattrs, extents). */
static int drop_inode(struct meta_bucket *b, uint64_t ino);

/*
 * A bookkeeping record of one branch (its orphans, the leases it holds):
 * bucket kind id, then the branch (u16) unless it is branch 0.
 */
static void
key_in_branch(struct meta_key *k, uint16_t bucket, uint8_t kind, uint64_t id, uint16_t br)
{
	meta_key_id(k, bucket, kind, id);
	if (br != 0) {
		k->b[k->len++] = (uint8_t)(br >> 8);
		k->b[k->len++] = (uint8_t)br;
	}
}

/* Inode ino's orphan record, of the branch b writes (meta_ops.h). */
static void
orphan_key(struct meta_key *k, const struct meta_bucket *b, uint64_t ino)
{
	key_in_branch(k, b->bucket, META_K_ORPHAN, ino, meta_ver_branch(b->ver));
}

int
meta_lock_key(struct meta_key *k, const struct meta_bucket *b, uint64_t parent, const char *name,
	      size_t len)
{
	uint16_t br = meta_ver_branch(b->ver);
	int rc = meta_key_lock(k, b->bucket, parent, name, len);

	if (rc == 0 && br != 0) {
		k->b[k->len++] = (uint8_t)(br >> 8);
		k->b[k->len++] = (uint8_t)br;
	}
	return rc;
}

/*
 * The lease this bucket holds on directory dir of another bucket, in the
 * branch b writes: a clone's directory is leased apart from its origin's.
 */
static void
held_key(struct meta_key *k, const struct meta_bucket *b, uint64_t dir)
{
	key_in_branch(k, b->bucket, META_K_HELD, dir, meta_ver_branch(b->ver));
}

/* ---- deltas ---- */

void
meta_delta_encode(const struct meta_delta *d, uint8_t out[META_DELTA_LEN])
{
	uint8_t *p = out;

	*p++ = DELTA_VERSION;
	*p++ = d->kind;
	memcpy(p, &d->to, 2), p += 2;
	memcpy(p, &d->from, 2), p += 2;
	memcpy(p, &d->seq, 8), p += 8;
	memcpy(p, &d->ino, 8), p += 8;
	memcpy(p, &d->dentries, 4), p += 4;
	memcpy(p, &d->dlinks, 4), p += 4;
	memcpy(p, &d->time, 8), p += 8;
	memcpy(p, d->fp, 32);
	if (d->kind == META_DELTA_INODE || d->kind == META_DELTA_PARENT) {
		p[30] = (uint8_t)d->branch;
		p[31] = (uint8_t)(d->branch >> 8);
	}
}

int
meta_delta_decode(const uint8_t *b, size_t len, struct meta_delta *d)
{
	const uint8_t *p = b + 2;

	if (len != META_DELTA_LEN || b[0] != DELTA_VERSION || b[1] > META_DELTA_PARENT)
		return -EBADMSG;
	d->kind = b[1];
	memcpy(&d->to, p, 2), p += 2;
	memcpy(&d->from, p, 2), p += 2;
	memcpy(&d->seq, p, 8), p += 8;
	memcpy(&d->ino, p, 8), p += 8;
	memcpy(&d->dentries, p, 4), p += 4;
	memcpy(&d->dlinks, p, 4), p += 4;
	memcpy(&d->time, p, 8), p += 8;
	memcpy(d->fp, p, 32);
	d->branch = 0;
	if (d->kind == META_DELTA_INODE || d->kind == META_DELTA_PARENT) {
		d->branch = (uint16_t)(d->fp[30] | d->fp[31] << 8);
		d->fp[30] = d->fp[31] = 0;
	}
	return d->ino == 0 || d->seq == 0 ? -EBADMSG : 0;
}

/* Change an inode of this bucket by a delta's amounts. */
static int
apply_local(struct meta_bucket *b, const struct meta_delta *d)
{
	struct meta_inode in;
	int64_t size, nlink;
	int rc = meta_inode_load(b, d->ino, &in);

	if (rc == -ESTALE)
		return 0; /* gone meanwhile (removed): nothing left to count */
	if (rc < 0)
		return rc;
	size = (int64_t)in.size + d->dentries;
	nlink = (int64_t)in.nlink + d->dlinks;
	if (in.nlink == 0 && nlink > 0 && in.type == META_REG) {
		/* a link made elsewhere came after the name here went: no orphan any more */
		struct meta_key k;

		orphan_key(&k, b, d->ino);
		rc = meta_del(b->t, &k, b->ver, b->keep);
		if (rc < 0 && rc != -ENOENT)
			return rc;
	}
	if (in.type == META_DIR)
		in.size = size < 0 ? 0 : (uint64_t)size;
	in.nlink = nlink < 0 ? 0 : (uint32_t)nlink;
	if (d->time) {
		if (d->dentries || in.type == META_DIR)
			in.mtime = time_max(in.mtime, d->time);
		in.ctime = time_max(in.ctime, d->time);
	}
	if (in.nlink == 0) /* its last name went elsewhere (or, a directory, was removed there) */
		return meta_lose_last(b, d->ino, &in, d->time ? d->time : in.ctime);
	return meta_inode_store(b, d->ino, &in);
}

/* ---- a directory's parent ---- */

/* Directory dir's parent record: its parent and the time of the rename that set it. */
static int
get_parent(struct meta_bucket *b, uint64_t dir, uint64_t *parent, uint64_t *since)
{
	struct meta_key k;
	uint8_t v[16];
	int rc;

	meta_key_id(&k, b->bucket, META_K_PARENT, dir);
	rc = meta_get_exact(b->t, &k, b->ver, v, sizeof(v));
	*parent = rc == 0 ? meta_be64_get(v) : 0;
	*since = rc == 0 ? meta_be64_get(v + 8) : 0;
	return rc;
}

static int
put_parent(struct meta_bucket *b, uint64_t dir, uint64_t parent, uint64_t since)
{
	struct meta_key k;
	uint64_t had, at;
	uint8_t v[16];

	/* a rename older than the one recorded (its delta came late): the newer stands */
	if (get_parent(b, dir, &had, &at) == 0 && at > since)
		return 0;
	meta_key_id(&k, b->bucket, META_K_PARENT, dir);
	meta_be64_put(v, parent);
	meta_be64_put(v + 8, since);
	return meta_put(b->t, &k, b->ver, v, sizeof(v), b->keep);
}

int
meta_parent_get(struct meta_bucket *b, uint64_t dir, uint64_t *parent)
{
	struct meta_inode in;
	uint64_t since;
	int rc = meta_inode_load(b, dir, &in);

	*parent = 0;
	if (rc < 0)
		return rc;
	if (in.type != META_DIR)
		return -ENOTDIR;
	if (dir == META_ROOT_INO) {
		*parent = META_ROOT_INO;
		return 0;
	}
	rc = get_parent(b, dir, parent, &since);
	return rc == -ENOENT ? 0 : rc;
}

/* Directory dir moved under parent at `now`: here, or by a delta to its bucket. */
int
meta_reparent(struct meta_bucket *b, uint64_t dir, uint64_t parent, uint64_t now)
{
	struct meta_delta d = {
		.kind = META_DELTA_PARENT, .to = meta_ino_bucket(dir), .ino = dir, .time = now
	};

	memcpy(d.fp, &parent, sizeof(parent));
	return meta_delta_send(b, &d);
}

static int
apply_parent(struct meta_bucket *b, const struct meta_delta *d)
{
	struct meta_inode in;
	uint64_t parent;
	int rc = meta_inode_load(b, d->ino, &in);

	if (rc == -ESTALE)
		return 0; /* removed meanwhile */
	if (rc < 0)
		return rc;
	if (in.type != META_DIR)
		return 0;
	memcpy(&parent, d->fp, sizeof(parent));
	return put_parent(b, d->ino, parent, d->time);
}

/* A delta's change, in the bucket it is for. */
static int
apply_kind(struct meta_bucket *b, const struct meta_delta *d)
{
	switch (d->kind) {
	case META_DELTA_PARENT:
		return apply_parent(b, d);
	case META_DELTA_DEDUP_REF:
		return meta_dedup_ref(b, d->fp, d->dlinks);
	case META_DELTA_CLAIM_DONE:
		return meta_dedup_release(b, d->ino);
	default:
		return apply_local(b, d);
	}
}

/*
 * A delta shipped here changes its branch's records (meta_version.h): at
 * that branch's version and keep rule; nothing where the branch went;
 * -EAGAIN (tried again later) for one the group does not serve yet.
 */
static int
apply_in_branch(struct meta_bucket *b, const struct meta_delta *d)
{
	const struct meta_keep *keep = b->keep;
	const struct meta_vbranch *x;
	struct meta_keep bk;
	uint64_t ver = b->ver;
	int rc;

	if (d->branch == meta_ver_branch(b->ver))
		return apply_kind(b, d);
	if (b->vs == NULL || d->branch == 0)
		return -EINVAL; /* (shipped deltas are applied by commands of branch 0) */
	x = meta_version_branch(b->vs, d->branch);
	if (x == NULL && d->branch > b->vs->btop)
		return -EAGAIN;
	if (x == NULL || x->dropping)
		return 0;
	bk = (struct meta_keep){ NULL, 0, meta_branch_moved, b, d->branch };
	b->ver = x->ver;
	b->keep = &bk;
	rc = apply_kind(b, d);
	b->ver = ver;
	b->keep = keep;
	return rc;
}

int
meta_delta_send(struct meta_bucket *b, struct meta_delta *d)
{
	struct meta_key k;
	uint8_t buf[META_DELTA_LEN];
	int rc;

	d->from = b->bucket;
	if (d->kind == META_DELTA_INODE || d->kind == META_DELTA_PARENT)
		d->branch = meta_ver_branch(b->ver); /* it changes the records this command does */
	if (d->to == b->bucket) {
		rc = apply_kind(b, d);
		d->ino = 0; /* nothing to ship */
		return rc;
	}
	rc = next_counter(b, CTR_OUTBOX, 1, &d->seq);
	if (rc < 0)
		return rc;
	meta_delta_encode(d, buf);
	meta_key_id(&k, b->bucket, META_K_OUTBOX, d->seq);
	rc = meta_put(b->t, &k, b->ver, buf, sizeof(buf), NULL);
	if (rc == 0)
		b->queued++;
	return rc;
}

/* The effect on inode d->ino: here at once, or queued for its bucket (then d->seq is set). */
int
meta_effect(struct meta_bucket *b, struct meta_delta *d)
{
	d->kind = META_DELTA_INODE;
	d->to = meta_ino_bucket(d->ino);
	return meta_delta_send(b, d);
}

int
meta_apply_delta(struct meta_bucket *b, const struct meta_delta *d)
{
	struct meta_key k;
	uint64_t last = 0;
	int rc;

	if (d->to != b->bucket || d->from == b->bucket)
		return -EINVAL;
	meta_key_id(&k, b->bucket, META_K_APPLIED, d->from);
	rc = get_u64(b, &k, &last);
	if (rc < 0 && rc != -ENOENT)
		return rc;
	if (d->seq <= last)
		return 0; /* applied before: a resend after a lost ack */
	rc = apply_in_branch(b, d);
	if (rc == 0)
		rc = meta_put(b->t, &k, b->ver, &d->seq, sizeof(d->seq), b->keep);
	return rc;
}

struct outbox_scan {
	int (*fn)(void *arg, const struct meta_delta *d);
	void *arg;
	uint64_t upto;
	uint64_t seqs[128];
	uint64_t claims[128]; /* of CLAIM_DONE deltas (else 0): forgotten once shipped */
	unsigned n;
	int err;
};

static int
on_outbox(void *arg, const uint8_t *key, size_t klen, const void *val, size_t vlen)
{
	struct outbox_scan *o = arg;
	struct meta_delta d;

	(void)key;
	(void)klen;
	if (meta_delta_decode(val, vlen, &d) < 0) {
		o->err = -EBADMSG;
		return 1;
	}
	if (o->fn)
		return o->fn(o->arg, &d);
	if (d.seq > o->upto || o->n == 128)
		return 1;
	o->claims[o->n] = d.kind == META_DELTA_CLAIM_DONE ? d.ino : 0;
	o->seqs[o->n++] = d.seq;
	return 0;
}

int
meta_outbox(struct meta_bucket *b, int (*fn)(void *arg, const struct meta_delta *d), void *arg)
{
	struct outbox_scan o = { .fn = fn, .arg = arg };
	struct meta_key k;
	int rc;

	meta_key_kind(&k, b->bucket, META_K_OUTBOX);
	rc = meta_scan(b->t, &k, NULL, 0, b->ver, on_outbox, &o);
	return rc < 0 ? rc : o.err;
}

int
meta_outbox_ack(struct meta_bucket *b, uint64_t upto)
{
	struct meta_key k, pk;
	int rc;

	meta_key_kind(&pk, b->bucket, META_K_OUTBOX);
	for (;;) {
		struct outbox_scan o = { .upto = upto };

		rc = meta_scan(b->t, &pk, NULL, 0, b->ver, on_outbox, &o);
		if (rc < 0 || o.err < 0)
			return rc < 0 ? rc : o.err;
		for (unsigned i = 0; i < o.n; i++) {
			meta_key_id(&k, b->bucket, META_K_OUTBOX, o.seqs[i]);
			rc = meta_del(b->t, &k, b->ver, NULL);
			if (rc == 0 && o.claims[i])
				rc = meta_dedup_forget(b, o.claims[i]);
			if (rc < 0)
				return rc;
		}
		if (o.n < 128)
			return 0;
	}
}

/* ---- operations ---- */

int
meta_mkroot(struct meta_bucket *b, uint32_t mode, uint64_t now)
{
	struct meta_inode in = { .type = META_DIR,
				 .mode = mode & 07777,
				 .nlink = 2,
				 .atime = now,
				 .mtime = now,
				 .ctime = now,
				 .btime = now,
				 .generation = b->ver };
	int rc;

	if (b->bucket != 0)
		return -EINVAL;
	rc = meta_inode_load(b, META_ROOT_INO, &(struct meta_inode){ 0 });
	if (rc != -ESTALE)
		return rc == 0 ? -EEXIST : rc;
	return meta_inode_store(b, META_ROOT_INO, &in);
}

int
meta_lookup(struct meta_bucket *b, uint64_t parent, const char *name, size_t len,
	    struct meta_dentry *out)
{
	struct meta_key k;
	int rc = meta_entry_check(b, parent, name, len);

	return rc < 0 ? rc : meta_dentry_get(b, parent, name, len, out, &k);
}

int
meta_getattr(struct meta_bucket *b, uint64_t ino, struct meta_inode *out)
{
	return meta_inode_load(b, ino, out);
}

int
meta_setattr(struct meta_bucket *b, uint64_t ino, const struct meta_setattr *sa, uint64_t now,
	     struct meta_inode *out)
{
	struct meta_inode in;
	int rc = meta_inode_load(b, ino, &in);

	if (rc < 0)
		return rc;
	if ((sa->valid & META_SET_MODE) && (sa->mode & ~07777u))
		return -EINVAL;
	if (sa->valid & META_SET_SIZE) {
		if (in.type == META_DIR)
			return -EISDIR;
		if (in.type != META_REG)
			return -EINVAL;
		if (sa->size != in.size && !(sa->valid & META_SET_MTIME))
			in.mtime = now;
		if (sa->size < in.size) {
			rc = meta_extent_punch(b, ino, sa->size, UINT64_MAX); /* nothing in place */
			if (rc == 0)
				rc = meta_inline_cut(b, ino, sa->size);
			if (rc < 0)
				return rc;
		}
		in.size = sa->size;
	}
	if (sa->valid & META_SET_MODE)
		in.mode = sa->mode;
	if (sa->valid & META_SET_UID)
		in.uid = sa->uid;
	if (sa->valid & META_SET_GID)
		in.gid = sa->gid;
	if (sa->valid & META_SET_ATIME)
		in.atime = sa->atime;
	if (sa->valid & META_SET_MTIME)
		in.mtime = sa->mtime;
	in.ctime = now;
	rc = meta_inode_store(b, ino, &in);
	if (rc == 0 && out)
		*out = in;
	return rc;
}

int
meta_dentry_put(struct meta_bucket *b, const struct meta_key *k, uint64_t ino, uint8_t type)
{
	uint8_t buf[META_DENTRY_LEN];
	struct meta_dentry d = { .ino = ino, .type = type };

	meta_dentry_encode(&d, buf);
	return meta_put(b->t, k, b->ver, buf, sizeof(buf), b->keep);
}

#define META_IF_CLOSING 0x1 /* a directory being removed: no new leases */

static void
grant_key(struct meta_key *k, uint16_t bucket, uint64_t dir, uint16_t lessee)
{
	meta_key_id(k, bucket, META_K_GRANT, dir);
	k->b[k->len++] = (uint8_t)(lessee >> 8);
	k->b[k->len++] = (uint8_t)lessee;
}

/*
 * The parent must be a directory: checked here when it lives here, else
 * through the lease this bucket holds on it (-ENOLCK: get one first).
 */
int
meta_local_parent_check(struct meta_bucket *b, uint64_t parent)
{
	struct meta_inode p;
	int rc;

	if (meta_ino_bucket(parent) != b->bucket) {
		struct meta_key k;
		uint8_t buf[64];
		size_t n;

		held_key(&k, b, parent);
		rc = meta_get(b->t, &k, b->ver, buf, sizeof(buf), &n);
		return rc == -ENOENT ? -ENOLCK : rc;
	}
	rc = meta_inode_load(b, parent, &p);
	if (rc == -ESTALE)
		return -ENOENT;
	if (rc < 0)
		return rc;
	if (p.type != META_DIR)
		return -ENOTDIR;
	/* being removed: no new entry slips in here either (the caller waits and sees) */
	return p.flags & META_IF_CLOSING ? -EBUSY : 0;
}

int
meta_lease_held(struct meta_bucket *b, uint64_t dir)
{
	return meta_ino_bucket(dir) == b->bucket ? 0 : meta_local_parent_check(b, dir);
}

/* -EBUSY while a two-phase rename holds entry (parent, name) of this bucket. */
int
meta_unlocked_check(struct meta_bucket *b, uint64_t parent, const char *name, size_t len)
{
	struct meta_key k;
	uint8_t v[8];
	size_t n;
	int rc = meta_lock_key(&k, b, parent, name, len);

	if (rc < 0)
		return rc;
	rc = meta_get(b->t, &k, b->ver, v, sizeof(v), &n);
	if (rc == -ENOENT)
		return 0;
	return rc == 0 ? -EBUSY : rc;
}

int
meta_create(struct meta_bucket *b, uint64_t parent, const char *name, size_t len,
	    const struct meta_new *n, struct meta_inode *attr, struct meta_dentry *out,
	    struct meta_delta *delta)
{
	struct meta_inode in = { 0 };
	struct meta_dentry old;
	struct meta_key k;
	uint64_t seq, ino;
	int rc = meta_entry_check(b, parent, name, len);

	if (rc < 0)
		return rc;
	if (n->type < META_REG || n->type > META_SOCK || (n->mode & ~07777u))
		return -EINVAL;
	if (n->type == META_LNK && (n->tlen == 0 || n->tlen > SYMLINK_MAX))
		return n->tlen ? -ENAMETOOLONG : -ENOENT;
	rc = meta_local_parent_check(b, parent);
	if (rc == 0)
		rc = meta_unlocked_check(b, parent, name, len);
	if (rc < 0)
		return rc;
	rc = meta_dentry_get(b, parent, name, len, &old, &k);
	if (rc == 0 && n->tag != 0 && old.type == n->type &&
	    meta_ino_bucket(old.ino) == b->bucket && meta_inode_load(b, old.ino, &in) == 0 &&
	    in.generation == n->tag) {
		/* our own create, retried: the same answer, nothing more to do */
		*delta = (struct meta_delta){ 0 };
		if (attr)
			*attr = in;
		if (out)
			*out = (struct meta_dentry){ .ino = old.ino, .type = old.type };
		return 0;
	}
	if (rc == 0)
		return -EEXIST;
	if (rc != -ENOENT)
		return rc;
	rc = next_counter(b, CTR_INO, b->bucket == 0 ? META_ROOT_INO + 1 : 1, &seq);
	if (rc < 0)
		return rc;
	ino = meta_ino_make(b->bucket, seq);
	in.type = n->type;
	in.mode = n->mode;
	in.uid = n->uid;
	in.gid = n->gid;
	in.rdev = n->rdev;
	in.nlink = n->type == META_DIR ? 2 : 1;
	in.size = n->type == META_LNK ? n->tlen : 0;
	in.atime = in.mtime = in.ctime = in.btime = n->now;
	in.generation = n->tag ? n->tag : b->ver;
	rc = meta_inode_store(b, ino, &in);
	if (rc == 0 && n->type == META_LNK) {
		struct meta_key lk;

		meta_key_id(&lk, b->bucket, META_K_SYMLINK, ino);
		rc = meta_put(b->t, &lk, b->ver, n->target, n->tlen, b->keep);
	}
	if (rc == 0)
		rc = meta_dentry_put(b, &k, ino, n->type);
	if (rc == 0 && n->type == META_DIR)
		rc = put_parent(b, ino, parent, n->now);
	if (rc < 0)
		return rc;
	*delta = (struct meta_delta){
		.ino = parent, .dentries = 1, .dlinks = n->type == META_DIR ? 1 : 0, .time = n->now
	};
	rc = meta_effect(b, delta);
	if (rc == 0) {
		if (attr)
			*attr = in;
		if (out)
			*out = (struct meta_dentry){ .ino = ino, .type = n->type };
	}
	return rc;
}

int
meta_link(struct meta_bucket *b, uint64_t parent, const char *name, size_t len, uint64_t ino,
	  uint8_t type, uint64_t now, struct meta_delta deltas[2])
{
	struct meta_dentry old;
	struct meta_key k;
	int rc = meta_entry_check(b, parent, name, len);

	if (rc < 0)
		return rc;
	if (type == META_DIR)
		return -EPERM; /* no hard links to directories, as Linux */
	if (type < META_REG || type > META_SOCK || ino == 0)
		return -EINVAL;
	rc = meta_local_parent_check(b, parent);
	if (rc == 0)
		rc = meta_unlocked_check(b, parent, name, len);
	if (rc < 0)
		return rc;
	if (meta_ino_bucket(ino) == b->bucket) {
		struct meta_inode in;

		rc = meta_inode_load(b, ino, &in);
		if (rc < 0)
			return rc == -ESTALE ? -ENOENT : rc;
		if (in.nlink == 0)
			return -ENOENT; /* no name left (kept while open): none to be given */
		if (in.type != type)
			return -EINVAL;
	}
	rc = meta_dentry_get(b, parent, name, len, &old, &k);
	if (rc == 0)
		return -EEXIST;
	if (rc != -ENOENT)
		return rc;
	rc = meta_dentry_put(b, &k, ino, type);
	if (rc < 0)
		return rc;
	deltas[0] = (struct meta_delta){ .ino = parent, .dentries = 1, .time = now };
	deltas[1] = (struct meta_delta){ .ino = ino, .dlinks = 1, .time = now };
	rc = meta_effect(b, &deltas[0]);
	return rc < 0 ? rc : meta_effect(b, &deltas[1]);
}

static int
drop_inode(struct meta_bucket *b, uint64_t ino)
{
	struct meta_key k;
	int rc;

	rc = meta_extent_punch(b, ino, 0, UINT64_MAX); /* its stripes lose a reference */
	if (rc == 0)
		rc = meta_inline_cut(b, ino, 0);
	meta_key_inode(&k, b->bucket, ino);
	if (rc == 0)
		rc = meta_del(b->t, &k, b->ver, b->keep);
	meta_key_id(&k, b->bucket, META_K_SYMLINK, ino);
	if (rc == 0)
		rc = meta_del(b->t, &k, b->ver, b->keep);
	meta_key_id(&k, b->bucket, META_K_PARENT, ino);
	if (rc == 0)
		rc = meta_del(b->t, &k, b->ver, b->keep);
	return rc < 0 ? rc : meta_xattrs_drop(b, ino);
}

/*
 * An inode lost its last name. A regular file may be open on some client:
 * it stays, with no links and its data, as an orphan of this bucket
 * (docs/metadata.md "Open files without names") until the bucket's leader
 * knows nobody holds it (META_OP_ORPHAN_DROP). Anything else goes now.
 */
int
meta_lose_last(struct meta_bucket *b, uint64_t ino, struct meta_inode *in, uint64_t now)
{
	struct meta_key k;
	uint8_t v[8];
	int rc;

	if (in->type != META_REG || ino == b->unheld)
		return drop_inode(b, ino);
	in->nlink = 0;
	in->ctime = time_max(in->ctime, now);
	rc = meta_inode_store(b, ino, in);
	meta_be64_put(v, now);
	orphan_key(&k, b, ino);
	return rc < 0 ? rc : meta_put(b->t, &k, b->ver, v, sizeof(v), b->keep);
}

int
meta_orphan_drop(struct meta_bucket *b, uint64_t ino)
{
	struct meta_key k;
	uint8_t v[8];
	int rc;

	orphan_key(&k, b, ino);
	rc = meta_get_exact(b->t, &k, b->ver, v, sizeof(v));
	if (rc == -ENOENT)
		return 0; /* dropped before (a retry) */
	if (rc == 0)
		rc = meta_del(b->t, &k, b->ver, b->keep);
	if (rc == 0) {
		struct meta_inode in;

		rc = meta_inode_load(b, ino, &in);
		if (rc == -ESTALE)
			return 0;
		if (rc == 0 && in.nlink > 0)
			return 0; /* named again meanwhile (a late link): it stays */
	}
	return rc < 0 ? rc : drop_inode(b, ino);
}

struct orphans {
	int (*fn)(void *arg, uint64_t ino, uint16_t branch, uint64_t since);
	void *arg;
};

static int
on_orphan(void *arg, const uint8_t *key, size_t klen, const void *val, size_t vlen)
{
	struct orphans *o = arg;

	if ((klen != 11 && klen != 13) || vlen != 8)
		return -EBADMSG;
	return o->fn(o->arg, meta_be64_get(key + 3),
		     klen == 13 ? (uint16_t)(key[11] << 8 | key[12]) : 0, meta_be64_get(val));
}

int
meta_orphans(struct meta_bucket *b,
	     int (*fn)(void *arg, uint64_t ino, uint16_t branch, uint64_t since), void *arg)
{
	struct meta_key pk;
	struct orphans o = { fn, arg };

	meta_key_kind(&pk, b->bucket, META_K_ORPHAN);
	return meta_scan(b->t, &pk, NULL, 0, b->ver, on_orphan, &o);
}

#define FORGET_AT_ONCE 64

struct forget {
	uint8_t kind;
	uint16_t branch;
	unsigned n;
	struct meta_key *k; /* FORGET_AT_ONCE */
};

/* The branch a bookkeeping record of kind is of (0: the file system's own). */
static uint16_t
record_branch(uint8_t kind, const uint8_t *key, size_t klen, const void *val, size_t vlen)
{
	const uint8_t *end;
	struct meta_rename2 r;

	switch (kind) {
	case META_K_ORPHAN:
	case META_K_HELD:
		return klen == 13 ? (uint16_t)(key[11] << 8 | key[12]) : 0;
	case META_K_LOCK: /* the name ends with 0x00; a clone's branch follows it */
		end = klen > 11 ? memchr(key + 11, 0, klen - 11) : NULL;
		return end != NULL && end + 3 == key + klen ? (uint16_t)(end[1] << 8 | end[2]) : 0;
	default: /* an intent: in its rename */
		return vlen > 1 && meta_rename2_decode((const uint8_t *)val + 1, vlen - 1, &r) == 0
			   ? r.branch
			   : 0;
	}
}

static int
on_forget(void *arg, const uint8_t *key, size_t klen, const void *val, size_t vlen)
{
	struct forget *f = arg;

	if (record_branch(f->kind, key, klen, val, vlen) == f->branch) {
		memcpy(f->k[f->n].b, key, klen);
		f->k[f->n++].len = klen;
	}
	return f->n == FORGET_AT_ONCE;
}

int
meta_branch_forget(struct meta_bucket *b, uint16_t branch)
{
	static const uint8_t kinds[] = { META_K_ORPHAN, META_K_HELD, META_K_LOCK, META_K_INTENT };
	struct forget f = { .branch = branch };
	int rc = 0;

	if (branch == 0)
		return -EINVAL;
	f.k = sh_calloc(FORGET_AT_ONCE, sizeof(*f.k));
	if (f.k == NULL)
		return -ENOMEM;

	for (unsigned i = 0; rc == 0 && i < sizeof(kinds); i++) {
		struct meta_key pk;

		f.kind = kinds[i];
		meta_key_kind(&pk, b->bucket, kinds[i]);
		do {
			f.n = 0;
			rc = meta_scan(b->t, &pk, NULL, 0, b->ver, on_forget, &f);
			for (unsigned k = 0; rc == 0 && k < f.n; k++)
				rc = meta_del(b->t, &f.k[k], 1, NULL);
		} while (rc == 0 && f.n == FORGET_AT_ONCE);
	}
	sh_free(f.k);
	return rc;
}

struct grants {
	uint16_t *out;
	unsigned max, n;
};

static int
on_grant(void *arg, const uint8_t *key, size_t klen, const void *val, size_t vlen)
{
	struct grants *g = arg;

	(void)val;
	(void)vlen;
	if (klen != 13)
		return -EBADMSG;
	if (g->n == g->max)
		return 1;
	g->out[g->n++] = (uint16_t)(key[11] << 8 | key[12]);
	return 0;
}

int
meta_lease_list(struct meta_bucket *b, uint64_t dir, uint16_t *out, unsigned max, unsigned *n)
{
	struct grants g = { out, max, 0 };
	struct meta_key pk;
	int rc;

	meta_key_id(&pk, b->bucket, META_K_GRANT, dir);
	rc = meta_scan(b->t, &pk, NULL, 0, b->ver, on_grant, &g);
	*n = g.n;
	return rc;
}

static int
lease_dir(struct meta_bucket *b, uint64_t dir, struct meta_inode *in)
{
	int rc = meta_inode_load(b, dir, in);

	if (rc == -ESTALE)
		return -ENOENT;
	if (rc < 0)
		return rc;
	return in->type == META_DIR ? 0 : -ENOTDIR;
}

int
meta_lease_grant(struct meta_bucket *b, uint64_t dir, uint16_t lessee, struct meta_lease *out)
{
	struct meta_inode in;
	struct meta_key k;
	uint8_t one = 1;
	int rc = lease_dir(b, dir, &in);

	if (rc < 0)
		return rc;
	if (in.flags & META_IF_CLOSING)
		return -EBUSY;
	if (lessee == b->bucket || lessee >= b->nbuckets)
		return -EINVAL;
	grant_key(&k, b->bucket, dir, lessee);
	rc = meta_put(b->t, &k, b->ver, &one, 1, b->keep);
	if (rc == 0 && out)
		*out = (struct meta_lease){ .dir = dir,
					    .mode = in.mode,
					    .uid = in.uid,
					    .gid = in.gid,
					    .generation = in.generation };
	return rc;
}

int
meta_lease_close(struct meta_bucket *b, uint64_t dir, uint16_t *lessees, unsigned max, unsigned *n)
{
	struct meta_inode in;
	int rc = lease_dir(b, dir, &in);

	if (rc < 0)
		return rc;
	if (!(in.flags & META_IF_CLOSING)) {
		in.flags |= META_IF_CLOSING;
		rc = meta_inode_store(b, dir, &in);
		if (rc < 0)
			return rc;
	}
	return meta_lease_list(b, dir, lessees, max, n);
}

int
meta_lease_reopen(struct meta_bucket *b, uint64_t dir)
{
	struct meta_inode in;
	int rc = lease_dir(b, dir, &in);

	if (rc < 0 || !(in.flags & META_IF_CLOSING))
		return rc;
	in.flags &= ~(uint64_t)META_IF_CLOSING;
	return meta_inode_store(b, dir, &in);
}

int
meta_lease_drop(struct meta_bucket *b, uint64_t dir, uint16_t lessee)
{
	struct meta_key k;

	grant_key(&k, b->bucket, dir, lessee);
	return meta_del(b->t, &k, b->ver, b->keep);
}

int
meta_lease_hold(struct meta_bucket *b, const struct meta_lease *l)
{
	struct meta_key k;

	uint8_t v[28];

	if (l->dir == 0 || meta_ino_bucket(l->dir) == b->bucket)
		return -EINVAL;
	memcpy(v, &l->dir, 8);
	memcpy(v + 8, &l->mode, 4);
	memcpy(v + 12, &l->uid, 4);
	memcpy(v + 16, &l->gid, 4);
	memcpy(v + 20, &l->generation, 8);
	held_key(&k, b, l->dir);
	return meta_put(b->t, &k, b->ver, v, sizeof(v), b->keep);
}

int
meta_lease_revoke(struct meta_bucket *b, uint64_t dir)
{
	struct meta_key k;

	held_key(&k, b, dir);
	return meta_del(b->t, &k, b->ver, b->keep);
}

int
meta_remove(struct meta_bucket *b, uint64_t parent, const char *name, size_t len, int dir,
	    uint64_t now, uint64_t *removed, struct meta_delta deltas[2])
{
	struct meta_dentry d;
	struct meta_key k;
	int rc = meta_entry_check(b, parent, name, len);

	if (rc == 0)
		rc = meta_unlocked_check(b, parent, name, len);
	if (rc < 0)
		return rc;
	rc = meta_dentry_get(b, parent, name, len, &d, &k);
	if (rc < 0)
		return rc;
	if (dir && d.type != META_DIR)
		return -ENOTDIR;
	if (!dir && d.type == META_DIR)
		return -EISDIR;
	deltas[1] = (struct meta_delta){ 0 };
	if (meta_ino_bucket(d.ino) == b->bucket) {
		struct meta_inode in;

		rc = meta_inode_load(b, d.ino, &in);
		if (rc == 0 && dir) {
			unsigned nl = 0;
			uint16_t l;
			int lr = meta_lease_list(b, d.ino, &l, 1, &nl);

			/*
			 * Leases out: other buckets may hold entries whose deltas have
			 * not come yet, so the size is not the truth until they are
			 * revoked (meta_lease_close).
			 */
			if (lr < 0)
				return lr;
			if (nl > 0)
				return -EBUSY;
			if (in.size != 0)
				return -ENOTEMPTY;
		}
		if (rc == 0) {
			if (dir || in.nlink <= 1) {
				rc = meta_lose_last(b, d.ino, &in, now);
			} else {
				in.nlink--;
				in.ctime = now;
				rc = meta_inode_store(b, d.ino, &in);
			}
		} else if (rc == -ESTALE) {
			rc = 0; /* a dangling entry: remove it all the same */
		}
	} else if (dir == 1) {
		return -EXDEV; /* a directory renamed here: its own bucket says if it is empty */
	} else if (dir) {
		/* its bucket closed it and found it empty: its inode goes with this delta */
		deltas[1] = (struct meta_delta){ .ino = d.ino, .dlinks = -2, .time = now };
		rc = meta_effect(b, &deltas[1]);
	} else {
		deltas[1] = (struct meta_delta){ .ino = d.ino, .dlinks = -1, .time = now };
		rc = meta_effect(b, &deltas[1]);
	}
	if (rc == 0)
		rc = meta_del(b->t, &k, b->ver, b->keep);
	if (rc < 0)
		return rc;
	deltas[0] = (struct meta_delta){
		.ino = parent, .dentries = -1, .dlinks = dir ? -1 : 0, .time = now
	};
	rc = meta_effect(b, &deltas[0]);
	if (rc == 0 && removed)
		*removed = d.ino;
	return rc;
}

int
meta_readlink(struct meta_bucket *b, uint64_t ino, char *buf, size_t cap, size_t *len)
{
	struct meta_inode in;
	struct meta_key k;
	int rc = meta_inode_load(b, ino, &in);

	if (rc < 0)
		return rc;
	if (in.type != META_LNK)
		return -EINVAL;
	meta_key_id(&k, b->bucket, META_K_SYMLINK, ino);
	rc = meta_get(b->t, &k, b->ver, buf, cap, len);
	return rc == -EOVERFLOW ? -ERANGE : rc;
}

struct rd {
	struct meta_dirent *out;
	unsigned max, n;
	bool more;
	int err;
};

static int
on_dirent(void *arg, const uint8_t *key, size_t klen, const void *val, size_t vlen)
{
	struct rd *r = arg;
	struct meta_dentry d;
	const uint8_t *name;
	size_t nlen;

	if (r->n == r->max) {
		r->more = true;
		return 1;
	}
	if (meta_key_dentry_name(key, klen, &name, &nlen) < 0 || nlen > META_NAME_MAX ||
	    meta_dentry_decode(val, vlen, &d) < 0) {
		r->err = -EBADMSG;
		return 1;
	}
	r->out[r->n].ino = d.ino;
	r->out[r->n].type = d.type;
	r->out[r->n].len = (uint16_t)nlen;
	memcpy(r->out[r->n].name, name, nlen);
	r->out[r->n].name[nlen] = '\0';
	r->n++;
	return 0;
}

int
meta_readdir(struct meta_bucket *b, uint64_t parent, const char *after, size_t alen,
	     struct meta_dirent *out, unsigned max, unsigned *n, bool *more)
{
	struct rd r = { .out = out, .max = max };
	struct meta_key prefix, from;
	int rc;

	if (parent == 0 || max == 0)
		return -EINVAL;
	meta_key_dir_prefix(&prefix, b->bucket, parent);
	if (after != NULL) {
		rc = meta_key_dentry(&from, b->bucket, parent, after, alen);
		if (rc < 0)
			return rc;
	}
	rc = meta_scan(b->t, &prefix, after ? from.b : NULL, after ? from.len : 0, b->ver,
		       on_dirent, &r);
	if (rc < 0 || r.err < 0)
		return rc < 0 ? rc : r.err;
	*n = r.n;
	*more = r.more;
	return 0;
}
