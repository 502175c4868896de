// SPDX-License-Identifier: Apache-2.0
/*
 * The metadata service's reads (msvc_int.h): lookups, attributes,
 * listings (with attributes), links, xattrs, extents, stripes, holds and
 * the other requests answered from a bucket's store without a command.
 */
#include <string.h>

#include "meta_version.h"
#include "msvc_int.h"

SH_LOG_FACILITY("meta.svc");

/* The client endpoint that asked (0: a backend, or this node). */
uint64_t
msvc_client_of(const struct mreq *m)
{
	uint64_t peer = m->nr ? net_req_peer(m->nr) : 0;

	return peer >> 63 ? peer : 0;
}

static bool
ino_ok(const struct mreq *m, uint64_t ino)
{
	return ino != 0 && meta_ino_bucket(ino) == m->req.bucket;
}

/*
 * A small regular file's bytes along with its attributes, for a client
 * (it keeps them under the attributes' lease: opening and reading the file
 * is then one round trip).
 */
static void
with_inline(struct mreq *m, struct meta_bucket *mb, uint64_t ino, struct mp_reply *rep,
	    struct sh_enc *e)
{
	int n;

	if (!msvc_client_of(m) || rep->attr.type != META_REG || rep->attr.size == 0 ||
	    rep->attr.size > META_INLINE_MAX)
		return;
	n = meta_inline_get(mb, ino, m->buf, META_INLINE_MAX);
	if (n <= 0)
		return;
	sh_enc_bytes(e, m->buf, (size_t)n); /* the reply's data */
	rep->flags |= MP_INLINE;
}

/*
 * An open for reading: the file's first extents along with its hold, so
 * that reading a small file whole asks nothing more of its bucket.
 */
static void
hold_extents(struct meta_bucket *mb, uint64_t ino, struct mp_reply *rep, struct sh_enc *e)
{
	struct meta_extent x[MP_HOLD_EXTENTS_MAX];
	unsigned n = 0;

	if (rep->attr.type != META_REG || rep->attr.size == 0 ||
	    meta_extents(mb, ino, 0, rep->attr.size, x, MP_HOLD_EXTENTS_MAX, &n) < 0)
		return;
	if (n > 0 && meta_extent_list_encode(e, x, n) < 0)
		return;
	rep->flags |= MP_EXTS | (n == MP_HOLD_EXTENTS_MAX ? MP_MORE : 0);
}

/* MP_DIRTY: the stripes found, into the reply. */
struct dirty {
	struct sh_enc *e;
	unsigned n, max;
};

static int
on_dirty(void *arg, uint64_t stripe, uint64_t ino, uint64_t live, uint64_t total)
{
	struct dirty *d = arg;

	if (d->n == d->max)
		return 1;
	sh_enc_u64(d->e, stripe);
	sh_enc_u64(d->e, ino);
	sh_enc_u64(d->e, live);
	sh_enc_u64(d->e, total);
	d->n++;
	return 0;
}

/* MP_DIFF: the records, into the reply, up to its budget (one at least). */
struct diff_page {
	struct sh_enc *e;
	size_t max;
	bool more;
};

static int
on_diff(void *arg, const uint8_t *key, size_t klen, const void *old, size_t olen, const void *new,
	size_t nlen)
{
	struct diff_page *p = arg;
	struct mp_diff_rec r = { key, klen, old, new, olen, nlen };

	if (p->e->len > 0 && p->e->len + MP_DIFF_REC_HDR + klen + olen + nlen > p->max) {
		p->more = true;
		return 1;
	}
	mp_diff_put(p->e, &r);
	return 0;
}

/* MP_DIFF's request: two versions in order, v1 a ready snapshot's or 0, a key of this bucket. */
static int
diff_check(const struct mreq *m)
{
	const struct mp_req *q = &m->req;

	if (q->at == 0 || q->off >= q->at || q->dlen > META_KEY_MAX ||
	    (q->dlen != 0 &&
	     (q->dlen < 3 || ((unsigned)q->data[0] << 8 | q->data[1]) != q->bucket)))
		return -EINVAL;
	return q->off == 0 ? 0 : msvc_snap_ready(m->fs, q->off);
}

void
msvc_do_read(struct mreq *m)
{
	struct meta_bucket mb;
	struct mp_reply rep = { 0 };
	struct sh_enc e;
	size_t len = 0;
	int rc;

	sh_enc_init(&e);
	switch (m->req.kind) {
	case MP_LOOKUP:
		if (meta_name_check(m->req.name, m->req.nlen) < 0 ||
		    meta_dentry_bucket(m->req.ino, m->req.name, m->req.nlen, m->fs->nbuckets) !=
			m->req.bucket) {
			mreq_answer(m, meta_name_check(m->req.name, m->req.nlen) ?: -EINVAL, NULL);
			goto out;
		}
		break;
	case MP_READDIR:
	case MP_DIRTY:
		break;
	case MP_DIFF:
		if ((rc = diff_check(m)) < 0) {
			mreq_answer(m, rc, NULL);
			goto out;
		}
		break;
	case MP_STRIPE_LOC:
		if (meta_ino_bucket(m->req.ino) != m->req.bucket) {
			mreq_answer(m, -EINVAL, NULL);
			goto out;
		}
		break;
	case MP_REPAIR:
		mreq_answer(m,
			    meta_ino_bucket(m->req.ino) != m->req.bucket || msvc_client_of(m)
				? (msvc_client_of(m) ? -EPERM : -EINVAL)
				: msvc_heal_repair(m->fs, m->g, m->req.bucket, m->req.ino,
						   m->req.max, m->req.off),
			    NULL);
		goto out;
	case MP_STRIPES:
		if (m->req.dlen % (m->req.ino ? 12 : 8) != 0 ||
		    m->req.dlen > MP_STRIPES_MAX * (m->req.ino ? 12 : 8)) {
			mreq_answer(m, -EINVAL, NULL);
			goto out;
		}
		break;
	case MP_HOLD:
		if (m->req.dlen % 8 != 0 || m->req.dlen > MP_HOLD_MAX * 8 || !msvc_client_of(m) ||
		    (m->req.ino != 0 && !ino_ok(m, m->req.ino))) {
			mreq_answer(m,
				    !msvc_client_of(m) ? -EPERM
				    : m->req.ino       ? -ESTALE
						       : -EINVAL,
				    NULL);
			goto out;
		}
		break;
	case MP_USAGE: {
		/* the whole group's, read bucket by bucket (not inside one bucket's read) */
		struct meta_usage u;

		msvc_group_usage(m->g, &u);
		sh_enc_u64(&e, u.mapped);
		sh_enc_u64(&e, u.unique);
		sh_enc_u64(&e, u.data);
		sh_enc_u64(&e, u.phys);
		sh_enc_u64(&e, u.inlined);
		rep.data = e.p;
		rep.dlen = e.len;
		mreq_answer(m, sh_enc_error(&e) ? -ENOMEM : 0, sh_enc_error(&e) ? NULL : &rep);
		goto out;
	}
	case MP_VERSION: {
		const struct meta_version *vs = mgroup_version(m->g);

		sh_enc_u64(&e, vs->gen);
		sh_enc_u64(&e, vs->settled);
		sh_enc_u64(&e, vs->repoch);
		sh_enc_u64(&e, msvc_restore_drained(m->fs, m->g));
		sh_enc_u64(&e, vs->nkeep);
		for (unsigned i = 0; i < vs->nkeep; i++)
			sh_enc_u64(&e, vs->keep[i]);
		for (unsigned i = 0; i < vs->nbranch; i++) /* the branches it serves */
			sh_enc_u64(&e, vs->branch[i].id | (uint64_t)vs->branch[i].dropping << 16);
		sh_enc_u64(&e, vs->btop | 1ull << 17);
		rep.aux = vs->ver;
		rep.data = e.p;
		rep.dlen = e.len;
		mreq_answer(m, sh_enc_error(&e) ? -ENOMEM : 0, sh_enc_error(&e) ? NULL : &rep);
		goto out;
	}
	default:
		if (!ino_ok(m, m->req.ino)) {
			mreq_answer(m, m->req.ino == 0 ? -EINVAL : -ESTALE, NULL);
			goto out;
		}
	}
	/*
	 * A leader cut off from its group may still think it leads while another
	 * was elected and changed what it would answer: it answers clients only
	 * while its lease says no other can have been (mgroup_lease_end).
	 */
	rc = mgroup_lease_end(m->g) > env_now(m->fs->s->env)
		 ? mgroup_read_at(m->g, m->req.bucket, m->req.at, &mb)
		 : SH_ENOTLEADER;
	if (rc < 0) {
		mreq_answer(m, rc, NULL);
		goto out;
	}
	switch (m->req.kind) {
	case MP_LOOKUP:
		rc = meta_lookup(&mb, m->req.ino, m->req.name, m->req.nlen, &rep.dentry);
		if (rc == 0) {
			rep.flags |= MP_DENTRY;
			if (meta_ino_bucket(rep.dentry.ino) == m->req.bucket &&
			    meta_getattr(&mb, rep.dentry.ino, &rep.attr) == 0) {
				rep.flags |= MP_ATTR;
				with_inline(m, &mb, rep.dentry.ino, &rep, &e);
			}
			if (msvc_client_of(m) && mgroup_cache_ok(m->g, MP_CACHE_NS)) {
				struct mp_key k =
				    mp_key_dentry(m->req.ino, m->req.name, m->req.nlen);

				msvc_cache_grant(m->fs, msvc_client_of(m), &k);
				if (rep.flags & MP_ATTR) {
					k = mp_key_attr(rep.dentry.ino);
					msvc_cache_grant(m->fs, msvc_client_of(m), &k);
				}
				rep.flags |= MP_CACHE;
			}
		}
		break;
	case MP_HOLD: {
		struct sh_dec d;
		bool release = m->req.max & MP_HOLD_RELEASE;

		/* the files still open, of any bucket of this group: renewed (or given back);
		 * those gone are no matter */
		sh_dec_init(&d, m->req.data, m->req.dlen);
		for (size_t i = 0; i < m->req.dlen / 8; i++) {
			uint64_t ino = sh_dec_u64(&d);

			if (ino != 0 && mgroup_has_bucket(m->g, meta_ino_bucket(ino)))
				(void)msvc_hold(m->fs, msvc_client_of(m), ino, release);
		}
		rc = 0;
		if (m->req.ino == 0)
			break;
		if (release) {
			rc = msvc_hold(m->fs, msvc_client_of(m), m->req.ino, true);
			break;
		}
		rc = meta_getattr(&mb, m->req.ino, &rep.attr);
		if (rc == 0 && rep.attr.nlink == 0 && (m->req.max & MP_HOLD_FRESH))
			rc = -ESTALE; /* its name went meanwhile: the caller looks again */
		if (rc == 0)
			rc = msvc_hold(m->fs, msvc_client_of(m), m->req.ino, false);
		if (rc < 0)
			break;
		rep.flags |= MP_ATTR;
		with_inline(m, &mb, m->req.ino, &rep, &e);
		if ((m->req.max & MP_HOLD_EXTENTS) && !(rep.flags & MP_INLINE))
			hold_extents(&mb, m->req.ino, &rep, &e);
		if (msvc_client_of(m) && mgroup_cache_ok(m->g, MP_CACHE_NS)) {
			struct mp_key k = mp_key_attr(m->req.ino);

			msvc_cache_grant(m->fs, msvc_client_of(m), &k);
			rep.flags |= MP_CACHE;
		}
		break;
	}
	case MP_GETATTR:
		rc = meta_getattr(&mb, m->req.ino, &rep.attr);
		if (rc == 0) {
			rep.flags |= MP_ATTR;
			with_inline(m, &mb, m->req.ino, &rep, &e);
		}
		if (rc == 0 && msvc_client_of(m) && mgroup_cache_ok(m->g, MP_CACHE_NS)) {
			struct mp_key k = mp_key_attr(m->req.ino);

			msvc_cache_grant(m->fs, msvc_client_of(m), &k);
			rep.flags |= MP_CACHE;
		}
		break;
	case MP_READDIR: {
		struct meta_dirent *d = sh_calloc(MP_READDIR_MAX, sizeof(*d));
		unsigned max =
		    m->req.max == 0 || m->req.max > MP_READDIR_MAX ? MP_READDIR_MAX : m->req.max;
		unsigned n = 0;
		bool more = false;

		if (d == NULL) {
			rc = -ENOMEM;
			break;
		}
		rc = meta_readdir(&mb, m->req.ino, m->req.nlen ? m->req.name : NULL, m->req.nlen, d,
				  max, &n, &more);
		/* readdirplus: the attributes of inodes kept here, as a getattr reads them */
		bool plus = m->req.off & MP_READDIR_ATTRS;

		for (unsigned i = 0; rc == 0 && i < n; i++) {
			struct meta_inode a = { 0 };

			if (plus && meta_ino_bucket(d[i].ino) == m->req.bucket &&
			    meta_getattr(&mb, d[i].ino, &a) < 0)
				a.type = 0;
			mp_dirent_put(&e, &d[i], plus ? &a : NULL);
		}
		sh_free(d);
		if (more)
			rep.flags |= MP_MORE;
		break;
	}
	case MP_PARENT:
		rc = meta_parent_get(&mb, m->req.ino, &rep.aux);
		break;
	case MP_READLINK:
		rc = meta_readlink(&mb, m->req.ino, (char *)m->buf, sizeof(m->buf), &len);
		if (rc == 0)
			sh_enc_bytes(&e, m->buf, len);
		break;
	case MP_GETXATTR:
		rc = meta_getxattr(&mb, m->req.ino, m->req.name, m->buf, sizeof(m->buf), &len);
		if (rc == 0)
			sh_enc_bytes(&e, m->buf, len);
		break;
	case MP_LISTXATTR:
		rc = meta_listxattr(&mb, m->req.ino, (char *)m->buf, sizeof(m->buf), &len);
		if (rc == 0)
			sh_enc_bytes(&e, m->buf, len);
		break;
	case MP_EXTENTS: {
		struct meta_extent *x = sh_calloc(META_EXTENTS_MAX, sizeof(*x));
		unsigned max = m->req.max == 0 || m->req.max > META_EXTENTS_MAX ? META_EXTENTS_MAX
										: m->req.max;
		unsigned n = 0;

		int il = x ? meta_getattr(&mb, m->req.ino, &rep.attr) : -ENOMEM;

		/* a file gone (its last holder closed it): -ESTALE, never holes read as zeros */
		if (il == 0)
			il = meta_inline_get(&mb, m->req.ino, m->buf, sizeof(m->buf));
		else if (x != NULL)
			il = il == -ENOENT ? -ESTALE : il;
		if (il < 0 && il != -ENOENT) {
			rc = il;
			sh_free(x);
			break;
		}

		if (il >= 0) {
			/* a small file: its bytes instead of extents */
			rep.flags |= MP_INLINE;
			sh_enc_bytes(&e, m->buf, (size_t)il);
			rc = 0;
			sh_free(x);
			break;
		}
		rc =
		    x ? meta_extents(&mb, m->req.ino, m->req.off, m->req.len, x, max, &n) : -ENOMEM;
		if (rc == 0 && n > 0)
			rc = meta_extent_list_encode(&e, x, n);
		if (n == max)
			rep.flags |= MP_MORE; /* ask again from the end of the last one */
		sh_free(x);
		break;
	}
	case MP_STRIPES: {
		struct sh_dec d;

		rc = 0;
		sh_dec_init(&d, m->req.data, m->req.dlen);
		for (size_t i = 0; rc == 0 && i < m->req.dlen / (m->req.ino ? 12 : 8); i++) {
			uint64_t id = sh_dec_u64(&d);
			int k = m->req.ino
				    ? meta_stripe_known_at(&mb, id, sh_dec_u32(&d), m->req.ino)
				    : meta_stripe_known(&mb, id);

			if (k < 0)
				rc = k;
			else
				sh_enc_u8(&e, (uint8_t)k);
		}
		break;
	}
	case MP_STRIPE_LOC: {
		struct meta_extent loc;
		uint8_t v[META_EXTENT_VMAX];
		int vl;

		rc = meta_stripe_loc(&mb, m->req.ino, &loc);
		if (rc == 0 && (vl = meta_extent_encode(&loc, v, sizeof(v))) < 0)
			rc = vl;
		if (rc == 0)
			sh_enc_bytes(&e, v, (size_t)vl);
		break;
	}
	case MP_DIRTY: {
		struct dirty d = { .e = &e,
				   .max = m->req.max && m->req.max < 64 ? m->req.max : 64 };

		rc = meta_stripes_dirty(&mb, on_dirty, &d);
		break;
	}
	case MP_DIFF: {
		struct diff_page p = { .e = &e,
				       .max = m->req.max == 0		 ? MP_DIFF_DEFAULT
					      : m->req.max > MP_DIFF_MAX ? MP_DIFF_MAX
									 : m->req.max };
		struct meta_key pk = {
			.b = { (uint8_t)(m->req.bucket >> 8), (uint8_t)m->req.bucket }, .len = 2
		};

		uint8_t next[META_KEY_MAX];
		size_t nlen = 0;

		unsigned keys = m->req.len == 0 || m->req.len > MP_DIFF_KEYS ? MP_DIFF_KEYS
									     : (unsigned)m->req.len;

		rc = meta_diff(mb.t, &pk, m->req.data, m->req.dlen, m->req.off, m->req.at, keys,
			       next, &nlen, on_diff, &p);
		if (rc == 0 && nlen > 0) { /* looked at enough: the next page goes on after it */
			struct mp_diff_rec c = { .key = next, .klen = nlen, .cursor = true };

			mp_diff_put(&e, &c);
			p.more = true;
		}
		if (p.more)
			rep.flags |= MP_MORE;
		break;
	}
	case MP_DIRBUCKETS: {
		uint16_t *l = sh_calloc(m->fs->nbuckets, sizeof(*l));
		unsigned n = 0;

		if (l == NULL) {
			rc = -ENOMEM;
			break;
		}
		rc = meta_getattr(&mb, m->req.ino, &rep.attr);
		if (rc == 0 && rep.attr.type != META_DIR)
			rc = -ENOTDIR;
		if (rc == 0)
			rc = meta_lease_list(&mb, m->req.ino, l, m->fs->nbuckets, &n);
		for (unsigned i = 0; rc == 0 && i < n; i++)
			sh_enc_u16(&e, l[i]);
		rep.flags |= MP_ATTR;
		sh_free(l);
		break;
	}
	default:
		rc = -EINVAL;
	}
	meta_txn_abort(mb.t);
	if (rc == 0 && sh_enc_error(&e))
		rc = -ENOMEM;
	rep.data = e.p;
	rep.dlen = e.len;
	mreq_answer(m, rc, rc == 0 ? &rep : NULL);
out:
	sh_enc_fini(&e);
}
