// SPDX-License-Identifier: Apache-2.0
/* A bucket's commands: codec and apply (meta_cmd.h). */
#include <string.h>

#include "meta_cmd.h"
#include "meta_dedup.h"
#include "meta_done.h"
#include "meta_extent.h"
#include "meta_version.h"

/* 3: trim and lease (version 2 commands, with neither, still decode: logs written before) */
#define CMD_VERSION 3

static const char *const op_names[META_OP_MAX] = {
#define META_OP_NAME(id, num, name) [num] = name,
	META_OPS(META_OP_NAME)
#undef META_OP_NAME
};

const char *
meta_op_name(unsigned op)
{
	return op < META_OP_MAX ? op_names[op] : NULL;
}

uint8_t
meta_cmd_op_of(const uint8_t *b, size_t len)
{
	return len >= 2 ? b[1] : 0; /* (u8 format, u8 op, ...: meta_cmd_encode) */
}

uint64_t
meta_cmd_ver_of(const uint8_t *b, size_t len)
{
	/* (u8 format, op, type, dir, u32 flags, u64 ver LE: meta_cmd_encode) */
	return len >= 16 ? meta_le64_get(b + 8) : 0;
}

int
meta_cmd_encode(struct sh_enc *e, const struct meta_cmd *c)
{
	uint8_t d[META_DELTA_LEN];

	if (c->op == 0 || c->op >= META_OP_MAX)
		return -EINVAL;
	sh_enc_u8(e, CMD_VERSION);
	sh_enc_u8(e, c->op);
	sh_enc_u8(e, c->type);
	sh_enc_u8(e, c->dir);
	sh_enc_u32(e, c->flags);
	sh_enc_u64(e, c->ver);
	sh_enc_u64(e, c->now);
	sh_enc_u64(e, c->parent);
	sh_enc_u64(e, c->parent2);
	sh_enc_u64(e, c->ino);
	sh_enc_u32(e, c->mode);
	sh_enc_u32(e, c->uid);
	sh_enc_u32(e, c->gid);
	sh_enc_u32(e, c->rdev);
	sh_enc_u32(e, c->sa.valid);
	sh_enc_u32(e, c->sa.mode);
	sh_enc_u32(e, c->sa.uid);
	sh_enc_u32(e, c->sa.gid);
	sh_enc_u64(e, c->sa.size);
	sh_enc_u64(e, c->sa.atime);
	sh_enc_u64(e, c->sa.mtime);
	meta_delta_encode(&c->delta, d);
	sh_enc_bytes(e, d, sizeof(d));
	sh_enc_u64(e, c->upto);
	sh_enc_u64(e, c->tag);
	sh_enc_str(e, c->name);
	sh_enc_str(e, c->name2);
	sh_enc_blob(e, c->data, c->dlen);
	sh_enc_u64(e, c->trim);
	meta_lease_put(e, &c->lease);
	return sh_enc_error(e);
}

void
meta_lease_put(struct sh_enc *e, const struct meta_lease *l)
{
	sh_enc_u64(e, l->dir);
	sh_enc_u32(e, l->mode);
	sh_enc_u32(e, l->uid);
	sh_enc_u32(e, l->gid);
	sh_enc_u64(e, l->generation);
}

void
meta_lease_get(struct sh_dec *d, struct meta_lease *l)
{
	l->dir = sh_dec_u64(d);
	l->mode = sh_dec_u32(d);
	l->uid = sh_dec_u32(d);
	l->gid = sh_dec_u32(d);
	l->generation = sh_dec_u64(d);
}

int
meta_cmd_decode(const uint8_t *b, size_t len, struct meta_cmd *c)
{
	struct sh_dec d;
	const uint8_t *p;
	uint8_t v;

	memset(c, 0, sizeof(*c));
	sh_dec_init(&d, b, len);
	v = sh_dec_u8(&d);
	if (v != CMD_VERSION && v != 2)
		return -EBADMSG;
	c->op = sh_dec_u8(&d);
	c->type = sh_dec_u8(&d);
	c->dir = sh_dec_u8(&d);
	c->flags = sh_dec_u32(&d);
	c->ver = sh_dec_u64(&d);
	c->now = sh_dec_u64(&d);
	c->parent = sh_dec_u64(&d);
	c->parent2 = sh_dec_u64(&d);
	c->ino = sh_dec_u64(&d);
	c->mode = sh_dec_u32(&d);
	c->uid = sh_dec_u32(&d);
	c->gid = sh_dec_u32(&d);
	c->rdev = sh_dec_u32(&d);
	c->sa.valid = sh_dec_u32(&d);
	c->sa.mode = sh_dec_u32(&d);
	c->sa.uid = sh_dec_u32(&d);
	c->sa.gid = sh_dec_u32(&d);
	c->sa.size = sh_dec_u64(&d);
	c->sa.atime = sh_dec_u64(&d);
	c->sa.mtime = sh_dec_u64(&d);
	p = sh_dec_bytes(&d, META_DELTA_LEN);
	if (p != NULL && c->op == META_OP_DELTA &&
	    meta_delta_decode(p, META_DELTA_LEN, &c->delta) < 0)
		return -EBADMSG;
	c->upto = sh_dec_u64(&d);
	c->tag = sh_dec_u64(&d);
	sh_dec_str(&d, c->name, sizeof(c->name));
	sh_dec_str(&d, c->name2, sizeof(c->name2));
	c->data = sh_dec_blob(&d, META_XATTR_MAX, &c->dlen);
	if (v >= 3) {
		c->trim = sh_dec_u64(&d);
		meta_lease_get(&d, &c->lease);
	}
	sh_dec_end(&d);
	if (d.err || c->op == 0 || c->op >= META_OP_MAX || c->ver == 0 || c->dir > 2)
		return -EBADMSG;
	return 0;
}

/* The commands that fail when done twice (ENOENT, EEXIST, ENODATA): see meta_done.h. */
static int
apply_once(struct meta_bucket *b, const struct meta_cmd *c, struct meta_result *r)
{
	switch (c->op) {
	case META_OP_LINK:
		return meta_link(b, c->parent, c->name, strlen(c->name), c->ino, c->type, c->now,
				 r->deltas);
	case META_OP_REMOVE:
		return meta_remove(b, c->parent, c->name, strlen(c->name), c->dir, c->now,
				   &r->dentry.ino, r->deltas);
	case META_OP_RENAME:
		return meta_rename(b, c->parent, c->name, strlen(c->name), c->parent2, c->name2,
				   strlen(c->name2), c->flags, c->now, r->deltas);
	case META_OP_SETXATTR:
		return meta_setxattr(b, c->ino, c->name, c->data, c->dlen, (int)c->flags, c->now);
	default:
		return meta_removexattr(b, c->ino, c->name, c->now);
	}
}

/*
 * A tagged change of c->ino retried after it was applied (its answer lost):
 * 0 with the file's attributes in r, to answer it done; -ENOENT: apply it.
 */
static int
done_before(struct meta_bucket *b, const struct meta_cmd *c, struct meta_result *r)
{
	int rc = c->tag ? meta_done_check(b, c->tag) : -ENOENT;

	if (rc == 0)
		(void)meta_getattr(b, c->ino, &r->attr);
	return rc;
}

/* rc, what applying tagged c gave: if it changed something, its tag recorded too. */
static int
done_now(struct meta_bucket *b, const struct meta_cmd *c, int rc)
{
	return rc == 0 && c->tag && meta_txn_wrote(b->t) ? meta_done_put(b, c->tag, c->now) : rc;
}

/* META_AT_END: 0 if ino's size is off, else -EAGAIN (or -errno). */
static int
at_end(struct meta_bucket *b, uint64_t ino, uint64_t off)
{
	struct meta_inode in;
	int rc = meta_getattr(b, ino, &in);

	return rc < 0 ? rc : in.size == off ? 0 : -EAGAIN;
}

/* META_OP_EXTENT: map (or move) the extents, then consume the claims they use. */
static int
apply_extent(struct meta_bucket *b, const struct meta_cmd *c, struct meta_result *r)
{
	struct meta_extent e[META_EXTENTS_MAX];
	struct meta_claim_ref cl[META_CLAIMS_MAX];
	unsigned n, ncl = 0;
	int rc;

	rc = c->flags & META_EXTENT_CLAIMS ? meta_claims_decode(c->data, c->dlen, e, &n, cl, &ncl)
					   : meta_extent_list_decode(c->data, c->dlen, e, &n);
	rc = rc < 0 ? -EINVAL : meta_dedup_check(b, cl, ncl, c->now);
	if (rc == 0 && (c->flags & META_AT_END) && !(c->flags & META_EXTENT_MOVE))
		rc = at_end(b, c->ino, c->upto);
	if (rc == 0 && (c->flags & META_EXTENT_MOVE))
		rc = meta_extent_move(b, c->ino, e, n, c->upto);
	else if (rc == 0)
		rc =
		    meta_extent_set(b, c->ino, e, n, c->flags & ~(META_EXTENT_CLAIMS | META_AT_END),
				    c->now, &r->attr);
	/* the claims last: their CLAIM_DONE goes after the refs the extents sent */
	if (rc == 0 && ncl > 0)
		rc = meta_dedup_commit(b, cl, ncl, c->now);
	return rc;
}

void
meta_cmd_apply(struct meta_bucket *b, const struct meta_cmd *c, struct meta_result *r)
{
	struct meta_new n;
	int rc;

	META_RESULT_CLEAR(r);
	b->ver = c->ver;
	b->queued = 0;
	if (b->vs != NULL && meta_ver_branch(c->ver) != 0) {
		/* a clone's (meta_version.h): at its branch's version, if the group serves it */
		uint16_t br = meta_ver_branch(c->ver);

		b->ver = meta_version_of(b->vs, c->ver);
		if (b->ver == 0 || meta_version_op(c->op)) {
			r->status = b->ver == 0 ? -ESTALE : -EINVAL;
			return;
		}
		b->keep_own = (struct meta_keep){ NULL, 0, meta_branch_moved, b, br };
		b->keep = &b->keep_own;
	} else if (b->vs != NULL) {
		/* the group's version at least; what its snapshots read is kept */
		if (b->vs->ver > b->ver)
			b->ver = b->vs->ver;
		b->keep_own = (struct meta_keep){ b->vs->keep, b->vs->nkeep, meta_extent_moved, b };
		b->keep = &b->keep_own;
		/*
		 * A command that comes after one applied at a newer version elsewhere (its
		 * client saw it) raises the group's: what follows a change a snapshot does
		 * not hold is never in it, and the group's writes stay in version order.
		 */
		if (c->ver > b->vs->ver && c->op != META_OP_VERSION) {
			b->vs->ver = c->ver;
			rc = b->vs->nb ? meta_version_store(b->t, b->vs->buckets[0], b->vs) : 0;
			if (rc < 0) {
				r->status = rc;
				return;
			}
		}
	}
	r->ver = b->ver;
	/* the bucket's deltas applied where they went, dropped along (no commit of their own) */
	if (c->trim != 0 && c->op != META_OP_OUTBOX_ACK) {
		rc = meta_outbox_ack(b, c->trim);
		if (rc < 0) {
			r->status = rc;
			return;
		}
	}
	/* the lease the command needs, granted a moment ago (its own commit spared) */
	if (c->lease.dir != 0 && c->op != META_OP_LEASE_HOLD) {
		rc = meta_lease_hold(b, &c->lease);
		if (rc < 0) {
			r->status = rc;
			return;
		}
	}
	switch (c->op) {
	case META_OP_MKROOT:
		rc = meta_mkroot(b, c->mode, c->now);
		break;
	case META_OP_CREATE:
		n = (struct meta_new){ .type = c->type,
				       .mode = c->mode,
				       .uid = c->uid,
				       .gid = c->gid,
				       .rdev = c->rdev,
				       .target = (const char *)c->data,
				       .tlen = c->dlen,
				       .now = c->now,
				       .tag = c->tag };
		rc = meta_create(b, c->parent, c->name, strlen(c->name), &n, &r->attr, &r->dentry,
				 &r->deltas[0]);
		break;
	case META_OP_LINK:
	case META_OP_REMOVE:
	case META_OP_RENAME:
	case META_OP_SETXATTR:
	case META_OP_REMOVEXATTR:
		/* a retry of a request applied before (its answer lost): done, not again */
		rc = c->tag ? meta_done_check(b, c->tag) : -ENOENT;
		/* a remove's leader found the inode open nowhere (msvc_hold.c): dropped at once */
		b->unheld = c->op == META_OP_REMOVE ? c->ino : 0;
		if (rc == -ENOENT)
			rc = apply_once(b, c, r);
		b->unheld = 0;
		if (rc == 0 && c->tag && meta_txn_wrote(b->t))
			rc = meta_done_put(b, c->tag, c->now);
		break;
	case META_OP_SETATTR:
		rc = meta_setattr(b, c->ino, &c->sa, c->now, &r->attr);
		break;
	case META_OP_DELTA:
		rc = meta_apply_delta(b, &c->delta);
		break;
	case META_OP_DELTAS:
		rc = c->dlen == 0 || c->dlen % META_DELTA_LEN != 0 ? -EINVAL : 0;
		for (size_t at = 0; rc == 0 && at < c->dlen; at += META_DELTA_LEN) {
			struct meta_delta d;

			rc = meta_delta_decode(c->data + at, META_DELTA_LEN, &d);
			if (rc == 0)
				rc = meta_apply_delta(b, &d);
		}
		break;
	case META_OP_OUTBOX_ACK:
		rc = meta_outbox_ack(b, c->upto);
		break;
	case META_OP_VERSION:
	case META_OP_SETTLE:
	case META_OP_RESTORE:
	case META_OP_BRANCH:
	case META_OP_BRANCH_DROP:
		rc = meta_version_apply(b, c, r);
		break;
	case META_OP_LEASE_GRANT:
		rc = c->flags > UINT16_MAX
			 ? -EINVAL
			 : meta_lease_grant(b, c->ino, (uint16_t)c->flags, &r->lease);
		break;
	case META_OP_LEASE_CLOSE:
		rc = meta_lease_close(b, c->ino, r->lessees, 64, &r->nlessees);
		break;
	case META_OP_LEASE_REOPEN:
		rc = meta_lease_reopen(b, c->ino);
		break;
	case META_OP_LEASE_DROP:
		rc = c->flags > UINT16_MAX ? -EINVAL
					   : meta_lease_drop(b, c->ino, (uint16_t)c->flags);
		break;
	case META_OP_LEASE_HOLD:
		r->lease = (struct meta_lease){ .dir = c->ino,
						.mode = c->mode,
						.uid = c->uid,
						.gid = c->gid,
						.generation = c->upto };
		rc = meta_lease_hold(b, &r->lease);
		break;
	case META_OP_LEASE_REVOKE:
		rc = meta_lease_revoke(b, c->ino);
		break;
	case META_OP_EXTENT:
		/*
		 * A retried mapping (its answer lost when a leader died after the
		 * commit) is done already: applied again it would punch its own
		 * extents, drop its stripes' last reference and queue them for
		 * release while they stay mapped.
		 */
		rc = done_before(b, c, r);
		if (rc != 0)
			rc = done_now(b, c, apply_extent(b, c, r));
		break;
	case META_OP_DEDUP_CLAIM: {
		uint64_t claim;
		uint16_t owner;

		rc = meta_claim_decode(c->data, c->dlen, &claim, &owner, r->dedup, &r->ndedup);
		if (rc == 0)
			rc = meta_dedup_claim(b, claim, owner, c->now, r->dedup, r->ndedup);
		else
			rc = -EINVAL;
		r->aux = c->now;
		break;
	}
	case META_OP_DEDUP_KILL: {
		int committed = 0;

		rc = meta_dedup_kill(b, c->upto, c->now, &committed);
		r->aux = (uint64_t)committed;
		break;
	}
	case META_OP_DEDUP_RELEASE:
		rc = meta_dedup_release(b, c->upto);
		break;
	case META_OP_ORPHAN_DROP:
		rc = meta_ino_bucket(c->ino) == b->bucket ? meta_orphan_drop(b, c->ino) : -EINVAL;
		break;
	case META_OP_DEDUP_FORGET: {
		unsigned n;

		rc = meta_dedup_forget_refused(b, c->upto, false, &n);
		break;
	}
	case META_OP_DONE_FORGET: {
		unsigned n;

		rc = meta_done_forget(b, c->upto, false, &n);
		break;
	}
	case META_OP_RECLAIM_DONE:
		rc = meta_reclaim_done(b, c->upto);
		break;
	case META_OP_RELOCATE: {
		struct meta_move mv[META_FRAGS_MAX];
		unsigned n;

		rc = meta_moves_decode(c->data, c->dlen, mv, &n);
		if (rc == 0)
			rc = meta_ino_bucket(c->upto) == b->bucket
				 ? meta_stripe_relocate(b, c->upto, mv, n)
				 : -EINVAL;
		break;
	}
	case META_OP_INLINE:
		/* an append (tagged) retried, its answer lost: done, not placed again at the end */
		rc = done_before(b, c, r);
		if (rc == 0)
			break;
		rc = c->flags & META_AT_END ? at_end(b, c->ino, c->upto) : 0;
		if (rc == 0 && (c->flags & META_INLINE_MERGE))
			rc = meta_inline_merge(b, c->ino, c->upto, c->data, c->dlen, c->now,
					       &r->attr);
		else if (rc == 0)
			rc = meta_inline_set(b, c->ino, c->data, c->dlen, c->now, &r->attr);
		rc = done_now(b, c, rc);
		break;
	case META_OP_RENAME2:
		rc = meta_rename2_decode(c->data, c->dlen, &r->rename);
		if (rc < 0)
			break;
		switch (c->flags) {
		case META_R2_PREPARE_SRC:
			rc = meta_rename_prepare_src(b, &r->rename);
			break;
		case META_R2_PREPARE_DST:
			rc = meta_rename_prepare_dst(b, &r->rename);
			break;
		case META_R2_COMMIT_SRC:
			rc = meta_rename_commit_src(b, &r->rename, r->deltas);
			break;
		case META_R2_COMMIT_DST:
			rc = meta_rename_commit_dst(b, &r->rename, r->deltas);
			break;
		case META_R2_ABORT:
			rc = meta_rename_abort(b, &r->rename);
			break;
		case META_R2_FINISH:
			rc = meta_rename_finish(b, &r->rename);
			break;
		default:
			rc = -EINVAL;
		}
		break;
	default:
		rc = -EINVAL;
	}
	r->status = rc;
	r->queued = b->queued;
}
