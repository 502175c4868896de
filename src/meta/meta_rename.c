// SPDX-License-Identifier: Apache-2.0
/*
 * Renames inside one bucket, and the two phases of a rename across two
 * buckets: intents, locked names (meta_ops.h, docs/metadata.md "Rename").
 */
#include <string.h>

#include "meta_done.h"
#include "meta_int.h"

/* The renamed inode's ctime, when it lives here. */
static int
touch_moved(struct meta_bucket *b, uint64_t ino, uint64_t now)
{
	struct meta_inode in;
	int rc;

	if (meta_ino_bucket(ino) != b->bucket)
		return 0;
	rc = meta_inode_load(b, ino, &in);
	if (rc == -ESTALE)
		return 0;
	return rc < 0 ? rc : meta_touch_ctime(b, ino, &in, now);
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
	return meta_effect(b, d);
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
		return meta_effect(b, d);
	}
	rc = meta_inode_load(b, ino, &t);
	if (rc == -ESTALE)
		return 0;
	if (rc < 0)
		return rc;
	if (dir || t.nlink <= 1)
		return meta_lose_last(b, ino, &t, now);
	t.nlink--;
	return meta_touch_ctime(b, ino, &t, now);
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
		return meta_effect(b, &deltas[0]);
	}
	deltas[0] =
	    (struct meta_delta){ .ino = op, .dentries = o_ents, .dlinks = o_links, .time = now };
	deltas[1] =
	    (struct meta_delta){ .ino = np, .dentries = n_ents, .dlinks = n_links, .time = now };
	rc = meta_effect(b, &deltas[0]);
	return rc < 0 ? rc : meta_effect(b, &deltas[1]);
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
	if ((rc = meta_local_parent_check(b, nparent)) < 0)
		return rc;
	if ((rc = meta_unlocked_check(b, oparent, oname, olen)) < 0 ||
	    (rc = meta_unlocked_check(b, nparent, nname, nlen)) < 0)
		return rc;
	rc = meta_dentry_get(b, oparent, oname, olen, &src, &sk);
	if (rc < 0)
		return rc;
	rc = meta_dentry_get(b, nparent, nname, nlen, &dst, &dk);
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
		rc = meta_dentry_put(b, &sk, dst.ino, dst.type);
		if (rc == 0)
			rc = meta_dentry_put(b, &dk, src.ino, src.type);
		if (rc == 0)
			rc = touch_moved(b, src.ino, now);
		if (rc == 0)
			rc = touch_moved(b, dst.ino, now);
		if (rc == 0)
			rc = touch_far(b, &src, b->bucket, now, &deltas[2]);
		if (rc == 0)
			rc = touch_far(b, &dst, b->bucket, now, &deltas[3]);
		if (rc == 0 && sdir && oparent != nparent)
			rc = meta_reparent(b, src.ino, nparent, now);
		if (rc == 0 && ddir && oparent != nparent)
			rc = meta_reparent(b, dst.ino, oparent, now);
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
			rc = meta_inode_load(b, dst.ino, &t);
			if (rc == 0 && t.size != 0)
				return -ENOTEMPTY;
			if (rc < 0 && rc != -ESTALE)
				return rc;
		}
		rc = lose_name(b, dst.ino, ddir, now, &deltas[2]); /* the replaced inode */
		if (rc < 0)
			return rc;
	}
	rc = meta_dentry_put(b, &dk, src.ino, src.type);
	if (rc == 0)
		rc = meta_del(b->t, &sk, b->ver, b->keep);
	if (rc == 0)
		rc = touch_moved(b, src.ino, now);
	if (rc == 0)
		rc = touch_far(b, &src, b->bucket, now, &deltas[3]);
	if (rc == 0 && sdir && oparent != nparent)
		rc = meta_reparent(b, src.ino, nparent, now);
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
	int rc = meta_lock_key(&k, b, parent, name, strlen(name));

	return rc < 0 ? rc : meta_put(b->t, &k, b->ver, &id, sizeof(id), b->keep);
}

/* The lock on (parent, name) is this rename's: 0, else -ESTALE. */
static int
own_lock(struct meta_bucket *b, uint64_t parent, const char *name, uint64_t id, bool drop)
{
	struct meta_key k;
	uint64_t v;
	size_t n;
	int rc = meta_lock_key(&k, b, parent, name, strlen(name));

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
	sh_enc_u16(e, r->branch);
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
	if (sh_dec_left(&d) > 0) /* ... and before branches, here */
		r->branch = sh_dec_u16(&d);
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
	rc = meta_entry_check(b, r->oparent, r->oname, olen);
	if (rc == 0)
		rc = meta_name_check(r->nname, strlen(r->nname));
	if (rc == 0)
		rc = meta_unlocked_check(b, r->oparent, r->oname, olen);
	if (rc == 0)
		rc = meta_dentry_get(b, r->oparent, r->oname, olen, &r->src, &k);
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
	rc = meta_entry_check(b, r->nparent, r->nname, nlen);
	if (rc == 0)
		rc = meta_local_parent_check(b, r->nparent);
	if (rc == 0)
		rc = meta_unlocked_check(b, r->nparent, r->nname, nlen);
	if (rc < 0)
		return rc;
	rc = meta_dentry_get(b, r->nparent, r->nname, nlen, &r->dst, &k);
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
			rc = meta_inode_load(b, r->dst.ino, &t);
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
		rc = xch ? meta_dentry_put(b, &k, r->dst.ino, r->dst.type)
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
		rc = meta_reparent(b, r->dst.ino, r->oparent, r->now);
	if (rc < 0)
		return rc;
	deltas[0] =
	    (struct meta_delta){ .ino = r->oparent,
				 .dentries = xch ? 0 : -1,
				 .dlinks = xch ? (int32_t)ddir - (int32_t)sdir : -(int32_t)sdir,
				 .time = r->now };
	return meta_effect(b, &deltas[0]);
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
		rc = meta_dentry_put(b, &k, r->src.ino, r->src.type);
	if (rc == 0)
		rc = touch_moved(b, r->src.ino, r->now);
	if (rc == 0)
		rc = touch_far(b, &r->src, r->src_bucket, r->now, &deltas[0]);
	if (rc == 0 && xch) /* the other inode of an exchange, where it is local here */
		rc = touch_moved(b, r->dst.ino, r->now);
	if (rc == 0 && sdir && r->oparent != r->nparent)
		rc = meta_reparent(b, r->src.ino, r->nparent, r->now);
	if (rc < 0)
		return rc;
	deltas[1] = (struct meta_delta){ .ino = r->nparent,
					 .dentries = xch || r->have_dst ? 0 : 1,
					 .dlinks = (int32_t)sdir - (int32_t)ddir,
					 .time = r->now };
	return meta_effect(b, &deltas[1]);
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
