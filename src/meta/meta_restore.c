// SPDX-License-Identifier: Apache-2.0
/*
 * One bucket's part of a restore (meta_version.h, docs/snapshots.md
 * "Restore"): what changed since the snapshot (meta_diff) is put back as
 * the snapshot has it, a step of keys at a time, at the bucket's version.
 * Nothing is overwritten in place: the records the snapshot reads stay
 * (it is kept), the file system's newest records become theirs again,
 * and snapshots taken since keep reading what they read.
 *
 * The changes are collected first and written after, so that the walk's
 * cursor never sees its own writes.
 */
#include <errno.h>
#include <string.h>

#include "meta_extent.h"
#include "meta_version.h"

struct change {
	uint16_t klen;
	uint8_t key[META_KEY_MAX];
	uint8_t *old, *new; /* one allocation: old's bytes then new's; NULL where absent */
	size_t olen, nlen;
};

struct collect {
	struct change *ch;
	unsigned n, max;
};

static int
on_diff(void *arg, const uint8_t *key, size_t klen, const void *old, size_t olen, const void *new,
	size_t nlen)
{
	struct collect *c = arg;
	struct change *ch;
	uint8_t *p;

	if (klen > META_KEY_MAX)
		return -EBADMSG;
	if (c->n == c->max)
		return -EOVERFLOW; /* (the walk looks at max keys at most) */
	ch = &c->ch[c->n];
	p = sh_malloc((old ? olen : 0) + (new ? nlen : 0) + 1);
	if (p == NULL)
		return -ENOMEM;
	c->n++;
	ch->klen = (uint16_t)klen;
	memcpy(ch->key, key, klen);
	ch->old = old ? p : NULL;
	ch->olen = old ? olen : 0;
	if (old)
		memcpy(p, old, olen);
	ch->new = new ? p + ch->olen : NULL;
	ch->nlen = new ? nlen : 0;
	if (new)
		memcpy(p + ch->olen, new, nlen);
	return 0;
}

/* The extent a stored value names, at the offset its key says. */
static int
extent_of(const struct change *ch, const uint8_t *val, size_t len, struct meta_extent *e)
{
	if (ch->klen != 19 || meta_extent_decode(val, len, e) < 0)
		return -EBADMSG;
	e->off = meta_be64_get(ch->key + 11);
	return 0;
}

/*
 * A file without names that was open at the snapshot, and dropped since:
 * back, it is an orphan again (its record is bookkeeping, not the
 * snapshot's), so that the sweep drops it once nobody holds it, and its
 * stripes do not stay forever.
 */
static int
orphan_again(struct meta_bucket *b, uint64_t ino, const uint8_t *val, size_t len, uint64_t now)
{
	struct meta_inode in;
	struct meta_key k;
	uint8_t v[8];

	if (meta_inode_decode(val, len, &in) < 0)
		return -EBADMSG;
	if (in.type != META_REG || in.nlink != 0)
		return 0;
	meta_be64_put(v, now);
	meta_key_id(&k, b->bucket, META_K_ORPHAN, ino);
	return meta_put(b->t, &k, b->ver, v, sizeof(v), b->keep);
}

/*
 * Key ch back to its old value. The old extent's reference is taken before
 * the write (its stripe may be the one the newest also maps), the newest's
 * dropped after it (the write gives it a reference of its own where a
 * snapshot taken since still reads it), as an overwrite does.
 */
static int
put_back(struct meta_bucket *b, const struct change *ch, uint64_t now)
{
	struct meta_extent was, newest;
	struct meta_key k;
	uint64_t ino = ch->klen >= 11 ? meta_be64_get(ch->key + 3) : 0;
	bool extent = ch->key[2] == META_K_EXTENT;
	int rc = 0;

	memcpy(k.b, ch->key, ch->klen);
	k.len = ch->klen;
	if (extent && ch->old)
		rc = extent_of(ch, ch->old, ch->olen, &was);
	if (rc == 0 && extent && ch->new)
		rc = extent_of(ch, ch->new, ch->nlen, &newest);
	if (rc == 0 && extent && ch->old)
		rc = meta_extent_account(b, ino, &was, +1);
	if (rc == 0 && ch->key[2] == META_K_INLINE)
		rc = meta_usage_inline(b, (int64_t)ch->olen - (int64_t)ch->nlen);
	if (rc == 0)
		rc = ch->old ? meta_put(b->t, &k, b->ver, ch->old, ch->olen, b->keep)
			     : meta_del(b->t, &k, b->ver, b->keep);
	if (rc == 0 && extent && ch->new)
		rc = meta_extent_account(b, ino, &newest, -1);
	if (rc == 0 && ch->key[2] == META_K_INODE && ch->old)
		rc = orphan_again(b, ino, ch->old, ch->olen, now);
	return rc;
}

static int
on_held(void *arg, const uint8_t *key, size_t klen, const void *val, size_t vlen)
{
	struct collect *c = arg;

	(void)val;
	(void)vlen;
	if (klen == 13)
		return 0; /* a branch's (a clone's): it did not go back */
	if (klen != 11)
		return -EBADMSG;
	if (c->n == c->max)
		return 1;
	c->ch[c->n].klen = (uint16_t)klen;
	memcpy(c->ch[c->n].key, key, klen);
	c->n++;
	return 0;
}

/*
 * The leases this bucket holds on other buckets' directories go: those
 * buckets' grants went back to the snapshot, and a lease held here that
 * is not granted there any more would let entries in that the directory's
 * listing does not look for. A create asks for its lease again.
 */
static int
drop_held(struct meta_bucket *b, struct change *room, unsigned max)
{
	struct collect c = { room, 0, max };
	struct meta_key pk;
	int rc;

	do {
		c.n = 0;
		meta_key_kind(&pk, b->bucket, META_K_HELD);
		rc = meta_scan(b->t, &pk, NULL, 0, b->ver, on_held, &c);
		for (unsigned i = 0; rc >= 0 && i < c.n; i++)
			rc = meta_lease_revoke(b, meta_be64_get(room[i].key + 3));
	} while (rc >= 0 && c.n == max);
	return rc < 0 ? rc : 0;
}

int
meta_restore(struct meta_bucket *b, uint64_t ver, const uint8_t *after, size_t alen, unsigned max,
	     uint64_t now, uint8_t *next, size_t *nlen, uint64_t *changed)
{
	struct collect c = { NULL, 0, max };
	struct meta_key pk;
	int rc;

	*nlen = 0;
	if (max == 0 || max > META_RESTORE_MAX || ver == 0)
		return -EINVAL;
	c.ch = sh_calloc(max, sizeof(*c.ch));
	if (c.ch == NULL)
		return -ENOMEM;
	pk.b[0] = (uint8_t)(b->bucket >> 8);
	pk.b[1] = (uint8_t)b->bucket;
	pk.len = 2;
	rc = meta_diff(b->t, &pk, after, alen, ver, META_VER_NEWEST, max, next, nlen, on_diff, &c);
	for (unsigned i = 0; rc >= 0 && i < c.n; i++)
		rc = put_back(b, &c.ch[i], now);
	if (rc >= 0)
		*changed = c.n;
	for (unsigned i = 0; i < c.n; i++)
		sh_free(c.ch[i].old ? c.ch[i].old : c.ch[i].new);
	if (rc >= 0 && *nlen == 0)
		rc = drop_held(b, c.ch, max);
	sh_free(c.ch);
	return rc < 0 ? rc : 0;
}
