// SPDX-License-Identifier: Apache-2.0
/* Namespace operations inside one bucket (meta_ops.h, docs/metadata.md). */
#include <string.h>

#include "meta_extent.h"
#include "meta_dedup.h"
#include "meta_done.h"
#include "meta_int.h"

#define DELTA_VERSION 2
#define SYMLINK_MAX   4095
#define XNAME_MAX     255

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

static int
get_inode(struct meta_bucket *b, uint64_t ino, struct meta_inode *in)
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

static int
put_inode(struct meta_bucket *b, uint64_t ino, const struct meta_inode *in)
{
	uint8_t buf[META_INODE_LEN];
	struct meta_key k;

	meta_inode_encode(in, buf);
	meta_key_inode(&k, b->bucket, ino);
	return meta_put(b->t, &k, b->ver, buf, sizeof(buf), b->keep);
}

static int
get_dentry(struct meta_bucket *b, uint64_t parent, const char *name, size_t len,
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
static int
check_entry(struct meta_bucket *b, uint64_t parent, const char *name, size_t len)
{
	int rc = meta_name_check(name, len);

	if (rc < 0)
		return rc;
	if (parent == 0)
		return -EINVAL;
	return meta_dentry_bucket(parent, name, len, b->nbuckets) == b->bucket ? 0 : -EINVAL;
}

static uint64_t
max64(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

/* Drop an inode and what hangs on it (symlink target, xattrs, extents). */
static int drop_inode(struct meta_bucket *b, uint64_t ino);
static int lose_last(struct meta_bucket *b, uint64_t ino, struct meta_inode *in, uint64_t now);

int
meta_inode_load(struct meta_bucket *b, uint64_t ino, struct meta_inode *in)
{
	return get_inode(b, ino, in);
}

int
meta_inode_store(struct meta_bucket *b, uint64_t ino, const struct meta_inode *in)
{
	return put_inode(b, ino, in);
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
	return d->ino == 0 || d->seq == 0 ? -EBADMSG : 0;
}

/* Change an inode of this bucket by a delta's amounts. */
static int
apply_local(struct meta_bucket *b, const struct meta_delta *d)
{
	struct meta_inode in;
	int64_t size, nlink;
	int rc = get_inode(b, d->ino, &in);

	if (rc == -ESTALE)
		return 0; /* gone meanwhile (removed): nothing left to count */
	if (rc < 0)
		return rc;
	size = (int64_t)in.size + d->dentries;
	nlink = (int64_t)in.nlink + d->dlinks;
	if (in.nlink == 0 && nlink > 0 && in.type == META_REG) {
		/* a link made elsewhere came after the name here went: no orphan any more */
		struct meta_key k;

		meta_key_id(&k, b->bucket, META_K_ORPHAN, d->ino);
		rc = meta_del(b->t, &k, b->ver, b->keep);
		if (rc < 0 && rc != -ENOENT)
			return rc;
	}
	if (in.type == META_DIR)
		in.size = size < 0 ? 0 : (uint64_t)size;
	in.nlink = nlink < 0 ? 0 : (uint32_t)nlink;
	if (d->time) {
		if (d->dentries || in.type == META_DIR)
			in.mtime = max64(in.mtime, d->time);
		in.ctime = max64(in.ctime, d->time);
	}
	if (in.nlink == 0) /* its last name went elsewhere (or, a directory, was removed there) */
		return lose_last(b, d->ino, &in, d->time ? d->time : in.ctime);
	return put_inode(b, d->ino, &in);
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
	int rc = get_inode(b, dir, &in);

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
static int
reparent(struct meta_bucket *b, uint64_t dir, uint64_t parent, uint64_t now)
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
	int rc = get_inode(b, d->ino, &in);

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

int
meta_delta_send(struct meta_bucket *b, struct meta_delta *d)
{
	struct meta_key k;
	uint8_t buf[META_DELTA_LEN];
	int rc;

	d->from = b->bucket;
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
static int
effect(struct meta_bucket *b, struct meta_delta *d)
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
	rc = apply_kind(b, d);
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
	rc = get_inode(b, META_ROOT_INO, &(struct meta_inode){ 0 });
	if (rc != -ESTALE)
		return rc == 0 ? -EEXIST : rc;
	return put_inode(b, META_ROOT_INO, &in);
}

int
meta_lookup(struct meta_bucket *b, uint64_t parent, const char *name, size_t len,
	    struct meta_dentry *out)
{
	struct meta_key k;
	int rc = check_entry(b, parent, name, len);

	return rc < 0 ? rc : get_dentry(b, parent, name, len, out, &k);
}

int
meta_getattr(struct meta_bucket *b, uint64_t ino, struct meta_inode *out)
{
	return get_inode(b, ino, out);
}

int
meta_setattr(struct meta_bucket *b, uint64_t ino, const struct meta_setattr *sa, uint64_t now,
	     struct meta_inode *out)
{
	struct meta_inode in;
	int rc = get_inode(b, ino, &in);

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
	rc = put_inode(b, ino, &in);
	if (rc == 0 && out)
		*out = in;
	return rc;
}

static int
put_dentry(struct meta_bucket *b, const struct meta_key *k, uint64_t ino, uint8_t type)
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
static int
check_local_parent(struct meta_bucket *b, uint64_t parent)
{
	struct meta_inode p;
	int rc;

	if (meta_ino_bucket(parent) != b->bucket) {
		struct meta_key k;
		uint8_t buf[64];
		size_t n;

		meta_key_id(&k, b->bucket, META_K_HELD, parent);
		rc = meta_get(b->t, &k, b->ver, buf, sizeof(buf), &n);
		return rc == -ENOENT ? -ENOLCK : rc;
	}
	rc = get_inode(b, parent, &p);
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
	return meta_ino_bucket(dir) == b->bucket ? 0 : check_local_parent(b, dir);
}

/* -EBUSY while a two-phase rename holds entry (parent, name) of this bucket. */
static int
check_unlocked(struct meta_bucket *b, uint64_t parent, const char *name, size_t len)
{
	struct meta_key k;
	uint8_t v[8];
	size_t n;
	int rc = meta_key_lock(&k, b->bucket, parent, name, len);

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
	int rc = check_entry(b, parent, name, len);

	if (rc < 0)
		return rc;
	if (n->type < META_REG || n->type > META_SOCK || (n->mode & ~07777u))
		return -EINVAL;
	if (n->type == META_LNK && (n->tlen == 0 || n->tlen > SYMLINK_MAX))
		return n->tlen ? -ENAMETOOLONG : -ENOENT;
	rc = check_local_parent(b, parent);
	if (rc == 0)
		rc = check_unlocked(b, parent, name, len);
	if (rc < 0)
		return rc;
	rc = get_dentry(b, parent, name, len, &old, &k);
	if (rc == 0 && n->tag != 0 && old.type == n->type &&
	    meta_ino_bucket(old.ino) == b->bucket && get_inode(b, old.ino, &in) == 0 &&
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
	rc = put_inode(b, ino, &in);
	if (rc == 0 && n->type == META_LNK) {
		struct meta_key lk;

		meta_key_id(&lk, b->bucket, META_K_SYMLINK, ino);
		rc = meta_put(b->t, &lk, b->ver, n->target, n->tlen, b->keep);
	}
	if (rc == 0)
		rc = put_dentry(b, &k, ino, n->type);
	if (rc == 0 && n->type == META_DIR)
		rc = put_parent(b, ino, parent, n->now);
	if (rc < 0)
		return rc;
	*delta = (struct meta_delta){
		.ino = parent, .dentries = 1, .dlinks = n->type == META_DIR ? 1 : 0, .time = n->now
	};
	rc = effect(b, delta);
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
	int rc = check_entry(b, parent, name, len);

	if (rc < 0)
		return rc;
	if (type == META_DIR)
		return -EPERM; /* no hard links to directories, as Linux */
	if (type < META_REG || type > META_SOCK || ino == 0)
		return -EINVAL;
	rc = check_local_parent(b, parent);
	if (rc == 0)
		rc = check_unlocked(b, parent, name, len);
	if (rc < 0)
		return rc;
	if (meta_ino_bucket(ino) == b->bucket) {
		struct meta_inode in;

		rc = get_inode(b, ino, &in);
		if (rc < 0)
			return rc == -ESTALE ? -ENOENT : rc;
		if (in.nlink == 0)
			return -ENOENT; /* no name left (kept while open): none to be given */
		if (in.type != type)
			return -EINVAL;
	}
	rc = get_dentry(b, parent, name, len, &old, &k);
	if (rc == 0)
		return -EEXIST;
	if (rc != -ENOENT)
		return rc;
	rc = put_dentry(b, &k, ino, type);
	if (rc < 0)
		return rc;
	deltas[0] = (struct meta_delta){ .ino = parent, .dentries = 1, .time = now };
	deltas[1] = (struct meta_delta){ .ino = ino, .dlinks = 1, .time = now };
	rc = effect(b, &deltas[0]);
	return rc < 0 ? rc : effect(b, &deltas[1]);
}

struct xcollect {
	struct meta_key keys[64];
	unsigned n;
	uint8_t *out;
	size_t cap, len;
};

static int
on_xattr(void *arg, const uint8_t *key, size_t klen, const void *val, size_t vlen)
{
	struct xcollect *x = arg;
	size_t nlen = klen - 11; /* name and its NUL */

	(void)val;
	(void)vlen;
	if (x->out != NULL || x->cap == SIZE_MAX) {
		if (x->out != NULL && x->len + nlen <= x->cap)
			memcpy(x->out + x->len, key + 11, nlen);
		x->len += nlen;
		return 0;
	}
	if (x->n == 64)
		return 1;
	memcpy(x->keys[x->n].b, key, klen);
	x->keys[x->n++].len = klen;
	return 0;
}

static int
drop_inode(struct meta_bucket *b, uint64_t ino)
{
	struct meta_key k, pk;
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
	meta_key_id(&pk, b->bucket, META_K_XATTR, ino);
	while (rc == 0) {
		struct xcollect x = { .n = 0 };

		rc = meta_scan(b->t, &pk, NULL, 0, b->ver, on_xattr, &x);
		for (unsigned i = 0; rc == 0 && i < x.n; i++)
			rc = meta_del(b->t, &x.keys[i], b->ver, b->keep);
		if (x.n < 64)
			break;
	}
	return rc;
}

/*
 * An inode lost its last name. A regular file may be open on some client:
 * it stays, with no links and its data, as an orphan of this bucket
 * (docs/metadata.md "Open files without names") until the bucket's leader
 * knows nobody holds it (META_OP_ORPHAN_DROP). Anything else goes now.
 */
static int
lose_last(struct meta_bucket *b, uint64_t ino, struct meta_inode *in, uint64_t now)
{
	struct meta_key k;
	uint8_t v[8];
	int rc;

	if (in->type != META_REG || ino == b->unheld)
		return drop_inode(b, ino);
	in->nlink = 0;
	in->ctime = max64(in->ctime, now);
	rc = put_inode(b, ino, in);
	meta_be64_put(v, now);
	meta_key_id(&k, b->bucket, META_K_ORPHAN, ino);
	return rc < 0 ? rc : meta_put(b->t, &k, b->ver, v, sizeof(v), b->keep);
}

int
meta_orphan_drop(struct meta_bucket *b, uint64_t ino)
{
	struct meta_key k;
	uint8_t v[8];
	int rc;

	meta_key_id(&k, b->bucket, META_K_ORPHAN, ino);
	rc = meta_get_exact(b->t, &k, b->ver, v, sizeof(v));
	if (rc == -ENOENT)
		return 0; /* dropped before (a retry) */
	if (rc == 0)
		rc = meta_del(b->t, &k, b->ver, b->keep);
	if (rc == 0) {
		struct meta_inode in;

		rc = get_inode(b, ino, &in);
		if (rc == -ESTALE)
			return 0;
		if (rc == 0 && in.nlink > 0)
			return 0; /* named again meanwhile (a late link): it stays */
	}
	return rc < 0 ? rc : drop_inode(b, ino);
}

struct orphans {
	int (*fn)(void *arg, uint64_t ino, uint64_t since);
	void *arg;
};

static int
on_orphan(void *arg, const uint8_t *key, size_t klen, const void *val, size_t vlen)
{
	struct orphans *o = arg;

	if (klen != 11 || vlen != 8)
		return -EBADMSG;
	return o->fn(o->arg, meta_be64_get(key + 3), meta_be64_get(val));
}

int
meta_orphans(struct meta_bucket *b, int (*fn)(void *arg, uint64_t ino, uint64_t since), void *arg)
{
	struct meta_key pk;
	struct orphans o = { fn, arg };

	meta_key_kind(&pk, b->bucket, META_K_ORPHAN);
	return meta_scan(b->t, &pk, NULL, 0, b->ver, on_orphan, &o);
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
	int rc = get_inode(b, dir, in);

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
		rc = put_inode(b, dir, &in);
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
	return put_inode(b, dir, &in);
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
	meta_key_id(&k, b->bucket, META_K_HELD, l->dir);
	return meta_put(b->t, &k, b->ver, v, sizeof(v), b->keep);
}

int
meta_lease_revoke(struct meta_bucket *b, uint64_t dir)
{
	struct meta_key k;

	meta_key_id(&k, b->bucket, META_K_HELD, dir);
	return meta_del(b->t, &k, b->ver, b->keep);
}

int
meta_remove(struct meta_bucket *b, uint64_t parent, const char *name, size_t len, int dir,
	    uint64_t now, uint64_t *removed, struct meta_delta deltas[2])
{
	struct meta_dentry d;
	struct meta_key k;
	int rc = check_entry(b, parent, name, len);

	if (rc == 0)
		rc = check_unlocked(b, parent, name, len);
	if (rc < 0)
		return rc;
	rc = get_dentry(b, parent, name, len, &d, &k);
	if (rc < 0)
		return rc;
	if (dir && d.type != META_DIR)
		return -ENOTDIR;
	if (!dir && d.type == META_DIR)
		return -EISDIR;
	deltas[1] = (struct meta_delta){ 0 };
	if (meta_ino_bucket(d.ino) == b->bucket) {
		struct meta_inode in;

		rc = get_inode(b, d.ino, &in);
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
				rc = lose_last(b, d.ino, &in, now);
			} else {
				in.nlink--;
				in.ctime = now;
				rc = put_inode(b, d.ino, &in);
			}
		} else if (rc == -ESTALE) {
			rc = 0; /* a dangling entry: remove it all the same */
		}
	} else if (dir == 1) {
		return -EXDEV; /* a directory renamed here: its own bucket says if it is empty */
	} else if (dir) {
		/* its bucket closed it and found it empty: its inode goes with this delta */
		deltas[1] = (struct meta_delta){ .ino = d.ino, .dlinks = -2, .time = now };
		rc = effect(b, &deltas[1]);
	} else {
		deltas[1] = (struct meta_delta){ .ino = d.ino, .dlinks = -1, .time = now };
		rc = effect(b, &deltas[1]);
	}
	if (rc == 0)
		rc = meta_del(b->t, &k, b->ver, b->keep);
	if (rc < 0)
		return rc;
	deltas[0] = (struct meta_delta){
		.ino = parent, .dentries = -1, .dlinks = dir ? -1 : 0, .time = now
	};
	rc = effect(b, &deltas[0]);
	if (rc == 0 && removed)
		*removed = d.ino;
	return rc;
}

int
meta_readlink(struct meta_bucket *b, uint64_t ino, char *buf, size_t cap, size_t *len)
{
	struct meta_inode in;
	struct meta_key k;
	int rc = get_inode(b, ino, &in);

	if (rc < 0)
		return rc;
	if (in.type != META_LNK)
		return -EINVAL;
	meta_key_id(&k, b->bucket, META_K_SYMLINK, ino);
	rc = meta_get(b->t, &k, b->ver, buf, cap, len);
	return rc == -EOVERFLOW ? -ERANGE : rc;
}

static int
xattr_key(struct meta_bucket *b, uint64_t ino, const char *name, struct meta_key *k)
{
	size_t n = strlen(name);

	if (n == 0 || n > XNAME_MAX)
		return -ERANGE;
	return meta_key_xattr(k, b->bucket, ino, name, n);
}

static int
touch_ctime(struct meta_bucket *b, uint64_t ino, struct meta_inode *in, uint64_t now)
{
	in->ctime = now;
	return put_inode(b, ino, in);
}

/* The inode, the xattr's key and whether it is set (for set and remove). */
static int
xattr_probe(struct meta_bucket *b, uint64_t ino, const char *name, struct meta_inode *in,
	    struct meta_key *k, bool *present)
{
	uint8_t probe;
	size_t n;
	int rc = get_inode(b, ino, in);

	if (rc < 0)
		return rc;
	rc = xattr_key(b, ino, name, k);
	if (rc < 0)
		return rc;
	rc = meta_get(b->t, k, b->ver, &probe, 0, &n);
	*present = rc == 0 || rc == -EOVERFLOW; /* EOVERFLOW: present, with a value */
	return *present || rc == -ENOENT ? 0 : rc;
}

int
meta_setxattr(struct meta_bucket *b, uint64_t ino, const char *name, const void *val, size_t len,
	      int flags, uint64_t now)
{
	struct meta_inode in;
	struct meta_key k;
	bool present;
	int rc;

	if (len > META_XATTR_MAX)
		return -E2BIG;
	if ((flags & META_XATTR_CREATE) && (flags & META_XATTR_REPLACE))
		return -EINVAL;
	rc = xattr_probe(b, ino, name, &in, &k, &present);
	if (rc < 0)
		return rc;
	if (present && (flags & META_XATTR_CREATE))
		return -EEXIST;
	if (!present && (flags & META_XATTR_REPLACE))
		return -ENODATA;
	rc = meta_put(b->t, &k, b->ver, val, len, b->keep);
	return rc < 0 ? rc : touch_ctime(b, ino, &in, now);
}

int
meta_getxattr(struct meta_bucket *b, uint64_t ino, const char *name, void *val, size_t cap,
	      size_t *len)
{
	struct meta_inode in;
	struct meta_key k;
	int rc = get_inode(b, ino, &in);

	if (rc < 0)
		return rc;
	rc = xattr_key(b, ino, name, &k);
	if (rc < 0)
		return rc;
	rc = meta_get(b->t, &k, b->ver, val, cap, len);
	if (rc == -ENOENT)
		return -ENODATA;
	if (rc == -EOVERFLOW)
		return cap == 0 ? 0 : -ERANGE; /* cap 0 asks for the size, as Linux */
	return rc;
}

int
meta_listxattr(struct meta_bucket *b, uint64_t ino, char *buf, size_t cap, size_t *len)
{
	struct meta_inode in;
	struct xcollect x = { .out = (uint8_t *)buf, .cap = buf ? cap : SIZE_MAX };
	struct meta_key pk;
	int rc = get_inode(b, ino, &in);

	if (rc < 0)
		return rc;
	meta_key_id(&pk, b->bucket, META_K_XATTR, ino);
	rc = meta_scan(b->t, &pk, NULL, 0, b->ver, on_xattr, &x);
	if (rc < 0)
		return rc;
	*len = x.len;
	return buf != NULL && cap > 0 && x.len > cap ? -ERANGE : 0;
}

int
meta_removexattr(struct meta_bucket *b, uint64_t ino, const char *name, uint64_t now)
{
	struct meta_inode in;
	struct meta_key k;
	bool present;
	int rc = xattr_probe(b, ino, name, &in, &k, &present);

	if (rc < 0)
		return rc;
	if (!present)
		return -ENODATA;
	rc = meta_del(b->t, &k, b->ver, b->keep);
	return rc < 0 ? rc : touch_ctime(b, ino, &in, now);
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

/* The renamed inode's ctime, when it lives here. */
static int
touch_moved(struct meta_bucket *b, uint64_t ino, uint64_t now)
{
	struct meta_inode in;
	int rc;

	if (meta_ino_bucket(ino) != b->bucket)
		return 0;
	rc = get_inode(b, ino, &in);
	if (rc == -ESTALE)
		return 0;
	return rc < 0 ? rc : touch_ctime(b, ino, &in, now);
}

/*
 * A file moved by a rename between buckets whose inode neither entry's
 * bucket holds (a hard link's name renamed): its ctime by a delta to its
 * own bucket (touch_moved does it where the inode is local). A directory's
 * delta would move its mtime too: only files get one.
 */
static int
touch_far(struct meta_bucket *b, const struct meta_dentry *e, uint16_t other, uint64_t now,
	  struct meta_delta *d)
{
	uint16_t at = meta_ino_bucket(e->ino);

	if (e->ino == 0 || e->type == META_DIR || at == b->bucket || at == other)
		return 0;
	*d = (struct meta_delta){ .ino = e->ino, .time = now };
	return effect(b, d);
}

/*
 * Inode ino loses one of its names: dropped with its last (a directory at
 * once), else its link count shrinks: here, or by a delta to its bucket.
 */
static int
lose_name(struct meta_bucket *b, uint64_t ino, bool dir, uint64_t now, struct meta_delta *d)
{
	struct meta_inode t;
	int rc;

	if (meta_ino_bucket(ino) != b->bucket) {
		*d = (struct meta_delta){ .ino = ino, .dlinks = -1, .time = now };
		return effect(b, d);
	}
	rc = get_inode(b, ino, &t);
	if (rc == -ESTALE)
		return 0;
	if (rc < 0)
		return rc;
	if (dir || t.nlink <= 1)
		return lose_last(b, ino, &t, now);
	t.nlink--;
	return touch_ctime(b, ino, &t, now);
}

/* Parent effects of a rename: one delta per parent (one in all when they are the same). */
static int
rename_parents(struct meta_bucket *b, uint64_t op, uint64_t np, int32_t o_ents, int32_t o_links,
	       int32_t n_ents, int32_t n_links, uint64_t now,
	       struct meta_delta deltas[META_DELTAS_MAX])
{
	int rc;

	if (op == np) {
		deltas[0] = (struct meta_delta){ .ino = op,
						 .dentries = o_ents + n_ents,
						 .dlinks = o_links + n_links,
						 .time = now };
		deltas[1] = (struct meta_delta){ 0 };
		return effect(b, &deltas[0]);
	}
	deltas[0] =
	    (struct meta_delta){ .ino = op, .dentries = o_ents, .dlinks = o_links, .time = now };
	deltas[1] =
	    (struct meta_delta){ .ino = np, .dentries = n_ents, .dlinks = n_links, .time = now };
	rc = effect(b, &deltas[0]);
	return rc < 0 ? rc : effect(b, &deltas[1]);
}

int
meta_rename(struct meta_bucket *b, uint64_t oparent, const char *oname, size_t olen,
	    uint64_t nparent, const char *nname, size_t nlen, unsigned flags, uint64_t now,
	    struct meta_delta deltas[META_DELTAS_MAX])
{
	struct meta_dentry src, dst;
	struct meta_key sk, dk;
	bool have_dst, sdir, ddir;
	int rc;

	if ((flags & ~3u) || flags == 3)
		return -EINVAL;
	if ((rc = meta_name_check(oname, olen)) < 0 || (rc = meta_name_check(nname, nlen)) < 0)
		return rc;
	if (oparent == 0 || nparent == 0)
		return -EINVAL;
	if (meta_dentry_bucket(oparent, oname, olen, b->nbuckets) != b->bucket ||
	    meta_dentry_bucket(nparent, nname, nlen, b->nbuckets) != b->bucket)
		return -EXDEV;
	deltas[0] = deltas[1] = deltas[2] = deltas[3] = (struct meta_delta){ 0 };
	/*
	 * The new name needs what a create needs: its parent a directory, not being
	 * removed, and, when it lives in another bucket, this bucket's lease on it,
	 * which is how a readdir there learns to look here. (An exchange puts the
	 * old parent's entry back where one was: that lease is held already.)
	 */
	if ((rc = check_local_parent(b, nparent)) < 0)
		return rc;
	if ((rc = check_unlocked(b, oparent, oname, olen)) < 0 ||
	    (rc = check_unlocked(b, nparent, nname, nlen)) < 0)
		return rc;
	rc = get_dentry(b, oparent, oname, olen, &src, &sk);
	if (rc < 0)
		return rc;
	rc = get_dentry(b, nparent, nname, nlen, &dst, &dk);
	if (rc < 0 && rc != -ENOENT)
		return rc;
	have_dst = rc == 0;
	if (oparent == nparent && olen == nlen && memcmp(oname, nname, olen) == 0)
		return (flags & META_RENAME_NOREPLACE) ? -EEXIST : 0; /* onto itself */
	sdir = src.type == META_DIR;
	ddir = have_dst && dst.type == META_DIR;
	if (flags & META_RENAME_EXCHANGE) {
		if (!have_dst)
			return -ENOENT;
		rc = put_dentry(b, &sk, dst.ino, dst.type);
		if (rc == 0)
			rc = put_dentry(b, &dk, src.ino, src.type);
		if (rc == 0)
			rc = touch_moved(b, src.ino, now);
		if (rc == 0)
			rc = touch_moved(b, dst.ino, now);
		if (rc == 0)
			rc = touch_far(b, &src, b->bucket, now, &deltas[2]);
		if (rc == 0)
			rc = touch_far(b, &dst, b->bucket, now, &deltas[3]);
		if (rc == 0 && sdir && oparent != nparent)
			rc = reparent(b, src.ino, nparent, now);
		if (rc == 0 && ddir && oparent != nparent)
			rc = reparent(b, dst.ino, oparent, now);
		if (rc < 0)
			return rc;
		return rename_parents(b, oparent, nparent, 0, (int32_t)ddir - (int32_t)sdir, 0,
				      (int32_t)sdir - (int32_t)ddir, now, deltas);
	}
	if (have_dst) {
		if (flags & META_RENAME_NOREPLACE)
			return -EEXIST;
		if (dst.ino == src.ino)
			return 0; /* two names of one inode: nothing to do, as POSIX says */
		if (sdir && !ddir)
			return -ENOTDIR;
		if (!sdir && ddir)
			return -EISDIR;
		if (ddir) {
			struct meta_inode t;

			if (meta_ino_bucket(dst.ino) != b->bucket)
				return -EXDEV; /* its emptiness is its own bucket's to say */
			rc = get_inode(b, dst.ino, &t);
			if (rc == 0 && t.size != 0)
				return -ENOTEMPTY;
			if (rc < 0 && rc != -ESTALE)
				return rc;
		}
		rc = lose_name(b, dst.ino, ddir, now, &deltas[2]); /* the replaced inode */
		if (rc < 0)
			return rc;
	}
	rc = put_dentry(b, &dk, src.ino, src.type);
	if (rc == 0)
		rc = meta_del(b->t, &sk, b->ver, b->keep);
	if (rc == 0)
		rc = touch_moved(b, src.ino, now);
	if (rc == 0)
		rc = touch_far(b, &src, b->bucket, now, &deltas[3]);
	if (rc == 0 && sdir && oparent != nparent)
		rc = reparent(b, src.ino, nparent, now);
	if (rc < 0)
		return rc;
	return rename_parents(b, oparent, nparent, -1, -(int32_t)sdir, have_dst ? 0 : 1,
			      (int32_t)sdir - (int32_t)ddir, now, deltas);
}

/* ---- rename across two buckets ---- */

static int
put_lock(struct meta_bucket *b, uint64_t parent, const char *name, uint64_t id)
{
	struct meta_key k;
	int rc = meta_key_lock(&k, b->bucket, parent, name, strlen(name));

	return rc < 0 ? rc : meta_put(b->t, &k, b->ver, &id, sizeof(id), b->keep);
}

/* The lock on (parent, name) is this rename's: 0, else -ESTALE. */
static int
own_lock(struct meta_bucket *b, uint64_t parent, const char *name, uint64_t id, bool drop)
{
	struct meta_key k;
	uint64_t v;
	size_t n;
	int rc = meta_key_lock(&k, b->bucket, parent, name, strlen(name));

	if (rc == 0)
		rc = meta_get(b->t, &k, b->ver, &v, sizeof(v), &n);
	if (rc == -ENOENT || (rc == 0 && (n != sizeof(v) || v != id)))
		return -ESTALE;
	if (rc == 0 && drop)
		rc = meta_del(b->t, &k, b->ver, b->keep);
	return rc;
}

int
meta_rename2_encode(struct sh_enc *e, const struct meta_rename2 *r)
{
	uint8_t d[META_DENTRY_LEN];

	sh_enc_u64(e, r->id);
	sh_enc_u16(e, r->src_bucket);
	sh_enc_u16(e, r->dst_bucket);
	sh_enc_u64(e, r->oparent);
	sh_enc_u64(e, r->nparent);
	sh_enc_u32(e, r->flags);
	sh_enc_u64(e, r->now);
	sh_enc_str(e, r->oname);
	sh_enc_str(e, r->nname);
	sh_enc_u8(e, r->src.ino != 0);
	if (r->src.ino) {
		meta_dentry_encode(&r->src, d);
		sh_enc_bytes(e, d, sizeof(d));
	}
	sh_enc_u8(e, r->have_dst);
	if (r->have_dst) {
		meta_dentry_encode(&r->dst, d);
		sh_enc_bytes(e, d, sizeof(d));
	}
	sh_enc_u64(e, r->tag);
	return sh_enc_error(e);
}

int
meta_rename2_decode(const uint8_t *b, size_t len, struct meta_rename2 *r)
{
	struct sh_dec d;
	const uint8_t *p;

	memset(r, 0, sizeof(*r));
	sh_dec_init(&d, b, len);
	r->id = sh_dec_u64(&d);
	r->src_bucket = sh_dec_u16(&d);
	r->dst_bucket = sh_dec_u16(&d);
	r->oparent = sh_dec_u64(&d);
	r->nparent = sh_dec_u64(&d);
	r->flags = sh_dec_u32(&d);
	r->now = sh_dec_u64(&d);
	sh_dec_str(&d, r->oname, sizeof(r->oname));
	sh_dec_str(&d, r->nname, sizeof(r->nname));
	if (sh_dec_u8(&d)) {
		p = sh_dec_bytes(&d, META_DENTRY_LEN);
		if (p == NULL || meta_dentry_decode(p, META_DENTRY_LEN, &r->src) < 0)
			return -EBADMSG;
	}
	r->have_dst = sh_dec_u8(&d) != 0;
	if (r->have_dst) {
		p = sh_dec_bytes(&d, META_DENTRY_LEN);
		if (p == NULL || meta_dentry_decode(p, META_DENTRY_LEN, &r->dst) < 0)
			return -EBADMSG;
	}
	if (sh_dec_left(&d) > 0) /* intents recorded before renames carried tags end here */
		r->tag = sh_dec_u64(&d);
	sh_dec_end(&d);
	if (d.err || r->id == 0 || (r->flags & ~3u) || r->flags == 3)
		return -EBADMSG;
	return 0;
}

/* The coordinator's record: the phase (1 prepared, 2 committed) and the whole rename. */
static int
put_intent(struct meta_bucket *b, const struct meta_rename2 *r, uint8_t phase)
{
	struct sh_enc e;
	struct meta_key k;
	int rc;

	sh_enc_init(&e);
	sh_enc_u8(&e, phase);
	rc = meta_rename2_encode(&e, r);
	meta_key_id(&k, b->bucket, META_K_INTENT, r->id);
	if (rc == 0)
		rc = meta_put(b->t, &k, b->ver, e.p, e.len, b->keep);
	sh_enc_fini(&e);
	return rc;
}

struct intents {
	int (*fn)(void *arg, int phase, const struct meta_rename2 *r);
	void *arg;
	int err;
};

static int
on_intent(void *arg, const uint8_t *key, size_t klen, const void *val, size_t vlen)
{
	struct intents *x = arg;
	struct meta_rename2 r;
	const uint8_t *v = val;

	(void)key;
	(void)klen;
	if (vlen < 1 || (v[0] != 1 && v[0] != 2) || meta_rename2_decode(v + 1, vlen - 1, &r) < 0) {
		x->err = -EBADMSG;
		return 1;
	}
	return x->fn(x->arg, v[0], &r);
}

int
meta_intents(struct meta_bucket *b, int (*fn)(void *arg, int phase, const struct meta_rename2 *r),
	     void *arg)
{
	struct intents x = { fn, arg, 0 };
	struct meta_key pk;
	int rc;

	meta_key_kind(&pk, b->bucket, META_K_INTENT);
	rc = meta_scan(b->t, &pk, NULL, 0, b->ver, on_intent, &x);
	return rc < 0 ? rc : x.err;
}

int
meta_rename_prepare_src(struct meta_bucket *b, struct meta_rename2 *r)
{
	size_t olen = strlen(r->oname);
	struct meta_key k;
	int rc;

	if ((r->flags & ~3u) || r->flags == 3 || r->id == 0 || r->src_bucket != b->bucket ||
	    r->dst_bucket == b->bucket)
		return -EINVAL;
	/* the same request, sent again while its first coordinator went on: decided already */
	rc = r->tag ? meta_done_check(b, r->tag) : -ENOENT;
	if (rc != -ENOENT)
		return rc == 0 ? 1 : rc;
	rc = check_entry(b, r->oparent, r->oname, olen);
	if (rc == 0)
		rc = meta_name_check(r->nname, strlen(r->nname));
	if (rc == 0)
		rc = check_unlocked(b, r->oparent, r->oname, olen);
	if (rc == 0)
		rc = get_dentry(b, r->oparent, r->oname, olen, &r->src, &k);
	if (rc == 0)
		rc = put_lock(b, r->oparent, r->oname, r->id);
	return rc < 0 ? rc : put_intent(b, r, 1);
}

int
meta_rename_prepare_dst(struct meta_bucket *b, struct meta_rename2 *r)
{
	size_t nlen = strlen(r->nname);
	bool sdir = r->src.type == META_DIR, ddir;
	struct meta_key k;
	int rc;

	if (r->dst_bucket != b->bucket)
		return -EINVAL;
	/* aborted here before (its prepare arrived late): it never locks again */
	if (meta_done_check(b, r->id) == 0)
		return -ECANCELED;
	rc = check_entry(b, r->nparent, r->nname, nlen);
	if (rc == 0)
		rc = check_local_parent(b, r->nparent);
	if (rc == 0)
		rc = check_unlocked(b, r->nparent, r->nname, nlen);
	if (rc < 0)
		return rc;
	rc = get_dentry(b, r->nparent, r->nname, nlen, &r->dst, &k);
	if (rc < 0 && rc != -ENOENT)
		return rc;
	r->have_dst = rc == 0;
	ddir = r->have_dst && r->dst.type == META_DIR;
	if ((r->flags & META_RENAME_EXCHANGE) && !r->have_dst)
		return -ENOENT;
	if (r->have_dst && !(r->flags & META_RENAME_EXCHANGE)) {
		if (r->flags & META_RENAME_NOREPLACE)
			return -EEXIST;
		if (r->dst.ino == r->src.ino)
			return 1; /* two names of one inode: nothing to do (abort both, succeed) */
		if (sdir && !ddir)
			return -ENOTDIR;
		if (!sdir && ddir)
			return -EISDIR;
		if (ddir) {
			struct meta_inode t;

			if (meta_ino_bucket(r->dst.ino) != b->bucket)
				return -EXDEV; /* its emptiness is a third bucket's to say */
			rc = get_inode(b, r->dst.ino, &t);
			if (rc == 0 && t.size != 0)
				return -ENOTEMPTY;
			if (rc < 0 && rc != -ESTALE)
				return rc;
		}
	}
	return put_lock(b, r->nparent, r->nname, r->id);
}

int
meta_rename_commit_src(struct meta_bucket *b, const struct meta_rename2 *r,
		       struct meta_delta deltas[META_DELTAS_MAX])
{
	bool sdir = r->src.type == META_DIR, ddir = r->have_dst && r->dst.type == META_DIR;
	bool xch = r->flags & META_RENAME_EXCHANGE;
	struct meta_key k;
	int rc = own_lock(b, r->oparent, r->oname, r->id, true);

	deltas[0] = deltas[1] = deltas[2] = deltas[3] = (struct meta_delta){ 0 };
	if (rc == 0)
		rc = meta_key_dentry(&k, b->bucket, r->oparent, r->oname, strlen(r->oname));
	if (rc == 0)
		rc = xch ? put_dentry(b, &k, r->dst.ino, r->dst.type)
			 : meta_del(b->t, &k, b->ver, b->keep);
	if (rc == 0)
		rc = put_intent(b, r, 2); /* the decision */
	if (rc == 0 && r->tag)		  /* a retry of the client's request is answered: done */
		rc = meta_done_put(b, r->tag, r->now);
	if (rc == 0)
		rc = touch_moved(b, r->src.ino, r->now);
	if (rc == 0 && xch)
		rc = touch_moved(b, r->dst.ino, r->now);
	if (rc == 0 && xch) /* the target's inode moved here */
		rc = touch_far(b, &r->dst, r->dst_bucket, r->now, &deltas[1]);
	if (rc == 0 && xch && ddir && r->oparent != r->nparent)
		rc = reparent(b, r->dst.ino, r->oparent, r->now);
	if (rc < 0)
		return rc;
	deltas[0] =
	    (struct meta_delta){ .ino = r->oparent,
				 .dentries = xch ? 0 : -1,
				 .dlinks = xch ? (int32_t)ddir - (int32_t)sdir : -(int32_t)sdir,
				 .time = r->now };
	return effect(b, &deltas[0]);
}

int
meta_rename_commit_dst(struct meta_bucket *b, const struct meta_rename2 *r,
		       struct meta_delta deltas[META_DELTAS_MAX])
{
	bool sdir = r->src.type == META_DIR, ddir = r->have_dst && r->dst.type == META_DIR;
	bool xch = r->flags & META_RENAME_EXCHANGE;
	struct meta_key k;
	int rc = own_lock(b, r->nparent, r->nname, r->id, true);

	deltas[0] = deltas[1] = deltas[2] = deltas[3] = (struct meta_delta){ 0 };
	if (rc == 0 && r->have_dst && !xch) {
		rc = lose_name(b, r->dst.ino, ddir, r->now, &deltas[2]); /* the replaced inode */
	}
	if (rc == 0)
		rc = meta_key_dentry(&k, b->bucket, r->nparent, r->nname, strlen(r->nname));
	if (rc == 0)
		rc = put_dentry(b, &k, r->src.ino, r->src.type);
	if (rc == 0)
		rc = touch_moved(b, r->src.ino, r->now);
	if (rc == 0)
		rc = touch_far(b, &r->src, r->src_bucket, r->now, &deltas[0]);
	if (rc == 0 && xch) /* the other inode of an exchange, where it is local here */
		rc = touch_moved(b, r->dst.ino, r->now);
	if (rc == 0 && sdir && r->oparent != r->nparent)
		rc = reparent(b, r->src.ino, r->nparent, r->now);
	if (rc < 0)
		return rc;
	deltas[1] = (struct meta_delta){ .ino = r->nparent,
					 .dentries = xch || r->have_dst ? 0 : 1,
					 .dlinks = (int32_t)sdir - (int32_t)ddir,
					 .time = r->now };
	return effect(b, &deltas[1]);
}

int
meta_rename_abort(struct meta_bucket *b, const struct meta_rename2 *r)
{
	struct meta_key k;
	int rc = 0;

	if (b->bucket == r->src_bucket) {
		rc = own_lock(b, r->oparent, r->oname, r->id, true);
		if (rc == -ESTALE)
			rc = 0; /* never locked, or released already */
		meta_key_id(&k, b->bucket, META_K_INTENT, r->id);
		if (rc == 0)
			rc = meta_del(b->t, &k, b->ver, b->keep);
	}
	if (rc == 0 && b->bucket == r->dst_bucket) {
		rc = own_lock(b, r->nparent, r->nname, r->id, true);
		if (rc == -ESTALE)
			rc = 0;
		/*
		 * A fence: a prepare of this rename still on its way (its coordinator
		 * gave up waiting) finds the id and locks nothing. Without it, a
		 * prepare applied after the abort left a lock no intent names, and
		 * every later rename onto the name waited for it until it timed out.
		 */
		if (rc == 0 && meta_done_check(b, r->id) != 0)
			rc = meta_done_put(b, r->id, r->now ? r->now : 1);
	}
	return rc;
}

int
meta_rename_finish(struct meta_bucket *b, const struct meta_rename2 *r)
{
	struct meta_key k;

	if (b->bucket != r->src_bucket)
		return -EINVAL;
	meta_key_id(&k, b->bucket, META_K_INTENT, r->id);
	return meta_del(b->t, &k, b->ver, b->keep);
}
