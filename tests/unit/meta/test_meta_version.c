// SPDX-License-Identifier: Apache-2.0
/*
 * A group's version and kept snapshots (meta_version.h): what a snapshot
 * reads stays, overwritten, truncated or unlinked since, and keeps its
 * stripes out of the reclaim queue; deleting the snapshot and settling
 * lets them go. The record round-trips and refuses bad bytes.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../../../src/meta/meta_cmd.h"
#include "../../../src/meta/meta_extent.h"
#include "../../../src/meta/meta_int.h"
#include "../../../src/meta/meta_version.h"
#include "../../lib/test.h"

struct vfx {
	struct meta_db *db;
	struct meta_version vs;
	uint16_t buckets[2];
	uint64_t ino;
};

/* Apply c in bucket (of 2) with the group's state: the status; kept only if it succeeds. */
static int
vapply(struct vfx *f, uint16_t bucket, struct meta_cmd *c, struct meta_result *r)
{
	struct meta_version work = { .buckets = f->buckets, .nb = 2 };
	struct meta_txn *t;
	struct meta_bucket b;

	meta_version_copy(&work, &f->vs);
	SH_ASSERT_OK(meta_txn_begin(f->db, true, &t));
	b = (struct meta_bucket){ .t = t, .bucket = bucket, .nbuckets = 2, .vs = &work };
	if (c->ver == 0)
		c->ver = 1;
	meta_cmd_apply(&b, c, r);
	if (r->status == 0) {
		SH_ASSERT_OK(meta_txn_commit(t));
		meta_version_copy(&f->vs, &work);
		/* (what mgroup does: the store reads the branches the group serves) */
		for (unsigned i = 0; i < f->vs.nbranch; i++)
			SH_ASSERT_OK(
			    meta_db_branch(f->db, f->vs.branch[i].id, f->vs.branch[i].base));
	} else {
		meta_txn_abort(t);
	}
	return r->status;
}

static int
version_cmd(struct vfx *f, uint64_t ver, const uint64_t *keep, unsigned n)
{
	struct meta_cmd c = { .op = META_OP_VERSION, .ver = ver };
	uint8_t data[8 * META_KEEP_MAX];
	struct meta_result r;

	for (unsigned i = 0; i < n; i++)
		for (unsigned j = 0; j < 8; j++)
			data[i * 8 + j] = (uint8_t)(keep[i] >> (8 * j));
	c.data = data;
	c.dlen = n * 8;
	return vapply(f, f->buckets[0], &c, &r);
}

/* Settle both buckets, two keys a step: the versions dropped. */
static uint64_t
settle(struct vfx *f)
{
	uint64_t dropped = 0;
	unsigned steps = 0;

	for (;;) {
		struct meta_cmd c = { .op = META_OP_SETTLE, .upto = f->vs.gen, .flags = 2 };
		struct meta_result r;
		int rc;

		if (f->vs.settled == f->vs.gen) {
			/* nothing left: a step says so */
			SH_ASSERT_EQ(vapply(f, f->buckets[0], &c, &r), -EALREADY);
			return dropped;
		}
		/* a step at the wrong bucket or for another gen changes nothing */
		c.upto = f->vs.gen + 1;
		SH_ASSERT_EQ(vapply(f, f->buckets[f->vs.cursor], &c, &r), -ESTALE);
		c.upto = f->vs.gen;
		rc = vapply(f, f->buckets[f->vs.cursor], &c, &r);
		SH_ASSERT_OK(rc);
		dropped += r.aux;
		SH_ASSERT_LT(++steps, 100u);
	}
}

/* A fresh store named name in the test's directory, its group at version 1, with a root. */
static void
vfx_open(struct vfx *f, const char *name)
{
	struct meta_cmd c = { .op = META_OP_MKROOT, .mode = 0755, .now = 1 };
	struct meta_result r;
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", sh_test_dir(), name);
	unlink(path);
	SH_ASSERT_OK(meta_db_open(path, 64ull << 20, META_DB_NOSYNC, &f->db));
	f->vs.buckets = f->buckets;
	f->vs.nb = 2;
	meta_version_init(&f->vs);
	SH_ASSERT_OK(vapply(f, 0, &c, &r));
}

static struct meta_extent
ext(uint64_t off, uint64_t len, uint64_t stripe)
{
	struct meta_extent e = {
		.off = off, .len = len, .stripe = stripe, .d = 4, .p = 2, .frag = 1 << 20
	};

	for (int i = 0; i < 6; i++)
		e.targets[i] = 1000 + (uint64_t)i;
	return e;
}

static void
map(struct vfx *f, struct meta_extent *e, unsigned n, uint64_t now)
{
	struct meta_cmd c = { .op = META_OP_EXTENT, .ino = f->ino, .now = now };
	struct meta_result r;
	struct sh_enc enc;

	sh_enc_init(&enc);
	SH_ASSERT_OK(meta_extent_list_encode(&enc, e, n));
	c.data = enc.p;
	c.dlen = enc.len;
	SH_ASSERT_OK(vapply(f, 0, &c, &r));
	sh_enc_fini(&enc);
}

/* Map extent e over file ino (not f's own) at now. */
static void
map_ino(struct vfx *f, uint64_t ino, struct meta_extent e, uint64_t now)
{
	uint64_t keep = f->ino;

	f->ino = ino;
	map(f, &e, 1, now);
	f->ino = keep;
}

/* The stripes of f's extents as of version at (0: none), summed; UINT64_MAX if absent. */
static uint64_t
stripes_at(struct vfx *f, uint64_t at)
{
	struct meta_extent e[16];
	struct meta_txn *t;
	struct meta_dentry d;
	uint64_t sum = 0;
	unsigned n;
	int rc;

	SH_ASSERT_OK(meta_txn_begin(f->db, false, &t));
	struct meta_bucket b = {
		.t = t, .bucket = 0, .nbuckets = 2, .ver = at ? at : META_VER_NEWEST
	};
	rc = meta_lookup(&b, META_ROOT_INO, "f", 1, &d);
	if (rc == -ENOENT) {
		meta_txn_abort(t);
		return UINT64_MAX;
	}
	SH_ASSERT_OK(rc);
	SH_ASSERT_EQ(d.ino, f->ino);
	SH_ASSERT_OK(meta_extents(&b, f->ino, 0, UINT64_MAX, e, 16, &n));
	for (unsigned i = 0; i < n; i++)
		sum += e[i].stripe;
	meta_txn_abort(t);
	return sum;
}

static int
sum_reclaims(void *arg, const struct meta_extent *e)
{
	*(uint64_t *)arg += e->stripe;
	return 0;
}

static uint64_t
reclaims(struct vfx *f)
{
	struct meta_txn *t;
	uint64_t sum = 0;

	SH_ASSERT_OK(meta_txn_begin(f->db, false, &t));
	struct meta_bucket b = { .t = t, .bucket = 0, .nbuckets = 2, .ver = META_VER_NEWEST };
	SH_ASSERT_OK(meta_reclaims(&b, sum_reclaims, &sum));
	meta_txn_abort(t);
	return sum;
}

TEST(meta_snapshot_keeps_what_it_reads_until_deleted)
{
	struct vfx f = { .buckets = { 0, 1 } };
	struct meta_cmd c;
	struct meta_result r;
	struct meta_extent e[2];
	struct meta_version back = { .buckets = f.buckets, .nb = 2 };

	vfx_open(&f, "version.mdb");
	c = (struct meta_cmd){ .op = META_OP_CREATE,
			       .type = META_REG,
			       .mode = 0644,
			       .now = 2,
			       .parent = META_ROOT_INO,
			       .name = "f" };
	SH_ASSERT_OK(vapply(&f, 0, &c, &r));
	f.ino = r.dentry.ino;
	e[0] = ext(0, 2 << 20, 7);
	e[1] = ext(2 << 20, 1 << 20, 9);
	map(&f, e, 2, 3);
	SH_ASSERT_EQ(stripes_at(&f, 1), 16u);

	/* snapshot 1: writes now carry version 2 */
	SH_ASSERT_OK(version_cmd(&f, 2, (uint64_t[]){ 1 }, 1));
	SH_ASSERT_EQ(f.vs.ver, 2u);
	SH_ASSERT_EQ(f.vs.gen, 1u);
	SH_ASSERT_EQ(version_cmd(&f, 2, (uint64_t[]){ 1 }, 1), -EALREADY);
	/* overwrite stripe 7's range: the snapshot still reads it, so it stays */
	e[0] = ext(0, 2 << 20, 8);
	map(&f, e, 1, 4);
	SH_ASSERT_EQ(stripes_at(&f, 1), 16u);
	SH_ASSERT_EQ(stripes_at(&f, 0), 17u);
	SH_ASSERT_EQ(reclaims(&f), 0u);
	/* overwrite it again: stripe 8 was the live file's alone, it goes */
	e[0] = ext(0, 2 << 20, 10);
	map(&f, e, 1, 5);
	SH_ASSERT_EQ(reclaims(&f), 8u);
	/* unlink: the live file goes, the snapshot's stays */
	c = (struct meta_cmd){
		.op = META_OP_REMOVE, .now = 6, .parent = META_ROOT_INO, .name = "f"
	};
	SH_ASSERT_OK(vapply(&f, 0, &c, &r));
	c = (struct meta_cmd){ .op = META_OP_ORPHAN_DROP, .ino = f.ino, .now = 7 };
	SH_ASSERT_OK(vapply(&f, 0, &c, &r));
	SH_ASSERT_EQ(stripes_at(&f, 0), UINT64_MAX);
	SH_ASSERT_EQ(stripes_at(&f, 1), 16u);
	SH_ASSERT_EQ(reclaims(&f), 18u); /* 8 and 10 */

	/* settling with the same list drops nothing */
	SH_ASSERT_EQ(settle(&f), 0u);
	SH_ASSERT_EQ(stripes_at(&f, 1), 16u);
	/* the record is what the group holds */
	{
		struct meta_txn *t;

		SH_ASSERT_OK(meta_txn_begin(f.db, false, &t));
		SH_ASSERT_OK(meta_version_load(t, 0, &back));
		meta_txn_abort(t);
		SH_ASSERT_EQ(back.ver, f.vs.ver);
		SH_ASSERT_EQ(back.gen, f.vs.gen);
		SH_ASSERT_EQ(back.settled, f.vs.gen);
		SH_ASSERT_EQ(back.nkeep, 1u);
		SH_ASSERT_EQ(back.keep[0], 1u);
	}
	/* snapshot deleted: settling lets its stripes go */
	SH_ASSERT_OK(version_cmd(&f, 2, NULL, 0));
	SH_ASSERT_EQ(f.vs.gen, 2u);
	SH_ASSERT(settle(&f) > 0);
	SH_ASSERT_EQ(stripes_at(&f, 1), UINT64_MAX);
	SH_ASSERT_EQ(reclaims(&f), 34u); /* 7, 8, 9, 10 */
	meta_db_close(f.db);
}

/* A name beginning with c whose entry in the root is in bucket 0 (of 2). */
static const char *
name0(char c)
{
	static char names[26][8];
	char *n = names[c - 'a'];

	for (unsigned i = 0;; i++) {
		snprintf(n, sizeof(names[0]), "%c%u", c, i);
		if (meta_dentry_bucket(META_ROOT_INO, n, strlen(n), 2) == 0)
			return n;
	}
}

/* Create name in the root: its inode. */
static uint64_t
vcreate(struct vfx *f, const char *name, uint64_t now)
{
	struct meta_cmd c = { .op = META_OP_CREATE,
			      .type = META_REG,
			      .mode = 0644,
			      .now = now,
			      .parent = META_ROOT_INO };
	struct meta_result r;

	snprintf(c.name, sizeof(c.name), "%s", name);
	SH_ASSERT_OK(vapply(f, 0, &c, &r));
	return r.dentry.ino;
}

static void
vremove(struct vfx *f, const char *name, uint64_t ino, uint64_t now)
{
	struct meta_cmd c = { .op = META_OP_REMOVE, .now = now, .parent = META_ROOT_INO };
	struct meta_result r;

	snprintf(c.name, sizeof(c.name), "%s", name);
	SH_ASSERT_OK(vapply(f, 0, &c, &r));
	c = (struct meta_cmd){ .op = META_OP_ORPHAN_DROP, .ino = ino, .now = now };
	SH_ASSERT_OK(vapply(f, 0, &c, &r));
}

/* Name's inline bytes in the live file system (-ENOENT: no such file, or none). */
static int
inline_of(struct vfx *f, const char *name, char *buf, size_t cap)
{
	struct meta_txn *t;
	struct meta_dentry d;
	int rc;

	SH_ASSERT_OK(meta_txn_begin(f->db, false, &t));
	struct meta_bucket b = { .t = t, .bucket = 0, .nbuckets = 2, .ver = META_VER_NEWEST };
	rc = meta_lookup(&b, META_ROOT_INO, name, strlen(name), &d);
	if (rc == 0)
		rc = meta_inline_get(&b, d.ino, buf, cap);
	meta_txn_abort(t);
	return rc;
}

/* ino has an orphan record (a file without names, kept while open). */
static bool
orphaned(struct vfx *f, uint64_t ino)
{
	struct meta_txn *t;
	struct meta_key k;
	uint8_t v[8];
	int rc;

	SH_ASSERT_OK(meta_txn_begin(f->db, false, &t));
	meta_key_id(&k, 0, META_K_ORPHAN, ino);
	rc = meta_get_exact(t, &k, META_VER_NEWEST, v, sizeof(v));
	meta_txn_abort(t);
	SH_ASSERT(rc == 0 || rc == -ENOENT);
	return rc == 0;
}

/* What bucket 0 counts of its files' bytes. */
static struct meta_usage
usage(struct vfx *f)
{
	struct meta_txn *t;
	struct meta_usage u;

	SH_ASSERT_OK(meta_txn_begin(f->db, false, &t));
	struct meta_bucket b = { .t = t, .bucket = 0, .nbuckets = 2, .ver = META_VER_NEWEST };
	SH_ASSERT_OK(meta_usage_get(&b, &u));
	meta_txn_abort(t);
	return u;
}

static uint64_t
mapped(struct vfx *f)
{
	return usage(f).mapped + usage(f).inlined;
}

static uint64_t
inlined(struct vfx *f)
{
	return usage(f).inlined;
}

/* Restore to version ver as epoch, one key a step: the keys put back. */
static uint64_t
restore(struct vfx *f, uint32_t epoch, uint64_t ver)
{
	uint8_t data[8];
	uint64_t changed = 0;

	for (unsigned i = 0; i < 8; i++)
		data[i] = (uint8_t)(ver >> (8 * i));
	for (unsigned steps = 0; f->vs.repoch < epoch; steps++) {
		struct meta_cmd c = {
			.op = META_OP_RESTORE, .upto = epoch, .flags = 1, .data = data, .dlen = 8
		};
		struct meta_result r;
		uint16_t at = f->vs.rdoing == epoch ? f->buckets[f->vs.rcursor] : f->buckets[0];

		/* a step at another bucket changes nothing */
		SH_ASSERT_EQ(vapply(f, at == 0 ? 1 : 0, &c, &r), -ESTALE);
		SH_ASSERT_OK(vapply(f, at, &c, &r));
		changed += r.aux;
		SH_ASSERT_LT(steps, 100u);
	}
	return changed;
}

TEST(meta_restore_puts_a_snapshot_back_and_counts_every_reference)
{
	char buf[64];
	struct vfx f = { .buckets = { 0, 1 } };
	struct meta_cmd c;
	struct meta_result r;
	struct meta_extent e[2];
	uint64_t g, h, o, at_snap;
	uint8_t data[8] = { 9 };

	vfx_open(&f, "restore.mdb");
	f.ino = vcreate(&f, "f", 2);
	e[0] = ext(0, 2 << 20, 7);
	e[1] = ext(2 << 20, 1 << 20, 9);
	map(&f, e, 2, 3);
	g = vcreate(&f, name0('g'), 3);
	c = (struct meta_cmd){ .op = META_OP_INLINE, .ino = g, .now = 3 };
	c.data = (const uint8_t *)"hello";
	c.dlen = 5;
	SH_ASSERT_OK(vapply(&f, 0, &c, &r));
	/* o: a file without names, open (an orphan), with a stripe of its own */
	o = vcreate(&f, name0('o'), 3);
	map_ino(&f, o, ext(0, 1 << 20, 13), 3);
	c = (struct meta_cmd){ .op = META_OP_REMOVE, .now = 3, .parent = META_ROOT_INO };
	snprintf(c.name, sizeof(c.name), "%s", name0('o'));
	SH_ASSERT_OK(vapply(&f, 0, &c, &r));
	SH_ASSERT(orphaned(&f, o));
	at_snap = mapped(&f);

	/* snapshot 1; then f overwritten, g removed; snapshot 3; f again, h created */
	SH_ASSERT_OK(version_cmd(&f, 2, (uint64_t[]){ 1 }, 1));
	e[0] = ext(0, 2 << 20, 8);
	map(&f, e, 1, 4);
	vremove(&f, name0('g'), g, 5);
	c = (struct meta_cmd){ .op = META_OP_ORPHAN_DROP, .ino = o, .now = 5 }; /* closed */
	SH_ASSERT_OK(vapply(&f, 0, &c, &r));
	SH_ASSERT(!orphaned(&f, o));
	SH_ASSERT_OK(version_cmd(&f, 3, (uint64_t[]){ 1, 2 }, 2));
	e[0] = ext(0, 2 << 20, 10);
	map(&f, e, 1, 6);
	h = vcreate(&f, name0('h'), 7);
	map_ino(&f, h, ext(0, 1 << 20, 11), 8);
	SH_ASSERT_EQ(stripes_at(&f, 0), 19u); /* 10 and 9 */
	SH_ASSERT_EQ(reclaims(&f), 0u);	      /* 8 is snapshot 2's */
	SH_ASSERT_EQ(inline_of(&f, name0('g'), buf, sizeof(buf)), -ENOENT);

	/* an unkept version cannot be restored: what it read may be gone */
	c = (struct meta_cmd){ .op = META_OP_RESTORE, .upto = 1, .flags = 1, .data = data };
	c.dlen = 8;
	SH_ASSERT_EQ(vapply(&f, 0, &c, &r), -EINVAL);

	/* back to snapshot 1, a key a step: f maps 7 and 9 again, g is back, h is gone */
	SH_ASSERT(restore(&f, 1, 1) >= 6);
	SH_ASSERT_EQ(f.vs.repoch, 1u);
	SH_ASSERT_EQ(f.vs.rdoing, 0u);
	SH_ASSERT_EQ(stripes_at(&f, 0), 16u);
	SH_ASSERT_EQ(inline_of(&f, name0('g'), buf, sizeof(buf)), 5);
	SH_ASSERT(memcmp(buf, "hello", 5) == 0);
	SH_ASSERT_EQ(inline_of(&f, name0('h'), buf, sizeof(buf)), -ENOENT);
	/* snapshot 2 reads what it read; h's stripe (no snapshot's) and 10 are released */
	SH_ASSERT_EQ(stripes_at(&f, 2), 17u);
	SH_ASSERT_EQ(reclaims(&f), 21u);
	SH_ASSERT_EQ(mapped(&f), at_snap);
	/* o is back without names: an orphan again, which the sweep drops (below) */
	SH_ASSERT(orphaned(&f, o));
	/* done: the same epoch again is nothing to do */
	c = (struct meta_cmd){ .op = META_OP_RESTORE, .upto = 1, .flags = 1, .data = data };
	c.dlen = 8;
	data[0] = 1;
	SH_ASSERT_EQ(vapply(&f, 0, &c, &r), -EALREADY);

	/* the live file system goes on from there */
	e[0] = ext(0, 2 << 20, 12);
	map(&f, e, 1, 9);
	SH_ASSERT_EQ(stripes_at(&f, 0), 21u);
	SH_ASSERT_EQ(stripes_at(&f, 1), 16u);

	/* every snapshot and file gone: every stripe released once, nothing mapped */
	SH_ASSERT_OK(version_cmd(&f, 3, NULL, 0));
	settle(&f);
	vremove(&f, "f", f.ino, 10);
	vremove(&f, name0('g'), g, 10);
	c = (struct meta_cmd){ .op = META_OP_ORPHAN_DROP, .ino = o, .now = 10 };
	SH_ASSERT_OK(vapply(&f, 0, &c, &r));
	SH_ASSERT_EQ(reclaims(&f), 7u + 8 + 9 + 10 + 11 + 12 + 13);
	SH_ASSERT_EQ(mapped(&f), 0u);
	meta_db_close(f.db);
}

TEST(meta_version_record_refuses_bad_bytes)
{
	uint16_t buckets[1] = { 3 };
	struct meta_version v = { .buckets = buckets, .nb = 1 },
			    w = { .buckets = buckets, .nb = 1 };
	uint8_t buf[META_VERSION_VAL_MAX];
	int len;

	meta_version_init(&v);
	v.ver = 9;
	v.gen = 4;
	v.settled = 3;
	v.cursor = 1;
	v.klen = 3;
	memcpy(v.key, "abc", 3);
	v.nkeep = 2;
	v.keep[0] = 2;
	v.keep[1] = 7;
	v.repoch = 2;
	v.rdoing = 3;
	v.rver = 7;
	v.rcursor = 0;
	v.rklen = 2;
	memcpy(v.rkey, "xy", 2);
	len = meta_version_encode(&v, buf, sizeof(buf));
	SH_ASSERT(len > 0);
	SH_ASSERT_OK(meta_version_decode(buf, (size_t)len, &w));
	SH_ASSERT_EQ(w.ver, 9u);
	SH_ASSERT_EQ(w.keep[1], 7u);
	SH_ASSERT_EQ(w.klen, 3u);
	SH_ASSERT_EQ(w.repoch, 2u);
	SH_ASSERT_EQ(w.rdoing, 3u);
	SH_ASSERT_EQ(w.rver, 7u);
	SH_ASSERT_EQ(w.rklen, 2u);
	SH_ASSERT(memcmp(w.rkey, "xy", 2) == 0);
	SH_ASSERT(w.buckets == buckets);
	/* format 2 (before branches): the same record without the branch count */
	buf[0] = 2;
	SH_ASSERT_OK(meta_version_decode(buf, (size_t)len - 4, &w));
	SH_ASSERT_EQ(w.nbranch, 0u);
	SH_ASSERT_EQ(w.rver, 7u);
	v.nbranch = 2;
	v.btop = 5;
	v.branch[0] = (struct meta_vbranch){ .id = 1, .base = 2, .ver = 1ull << 48 | 1 };
	v.branch[1] = (struct meta_vbranch){ .id = 4,
					     .base = 7,
					     .ver = 4ull << 48 | 1,
					     .dropping = true,
					     .cursor = 1,
					     .klen = 2,
					     .key = "kk" };
	len = meta_version_encode(&v, buf, sizeof(buf));
	SH_ASSERT(len > 0);
	SH_ASSERT_OK(meta_version_decode(buf, (size_t)len, &w));
	SH_ASSERT_EQ(w.nbranch, 2u);
	SH_ASSERT_EQ(w.branch[1].id, 4u);
	SH_ASSERT_EQ(w.branch[1].base, 7u);
	SH_ASSERT(w.branch[1].dropping);
	SH_ASSERT_EQ(w.branch[1].klen, 2u);
	SH_ASSERT_EQ(w.btop, 5u);
	SH_ASSERT(meta_version_branch(&w, 4) != NULL && meta_version_branch(&w, 3) == NULL);
	SH_ASSERT_EQ(meta_version_of(&w, 1ull << 48 | 9), 1ull << 48 | 1); /* the branch's */
	SH_ASSERT_EQ(meta_version_of(&w, 4ull << 48 | 1), 0u);		   /* being dropped */
	SH_ASSERT_EQ(meta_version_of(&w, 3), 9u);			   /* the group's */
	for (int cut = 0; cut < len; cut++)
		SH_ASSERT_EQ(meta_version_decode(buf, (size_t)cut, &w), -EBADMSG);
	v.branch[1].base = 4ull << 48 | 1; /* a base on its own branch */
	len = meta_version_encode(&v, buf, sizeof(buf));
	SH_ASSERT_EQ(meta_version_decode(buf, (size_t)len, &w), -EBADMSG);
	v.branch[1].base = 7;
	v.btop = 3; /* above the highest ever served */
	len = meta_version_encode(&v, buf, sizeof(buf));
	SH_ASSERT_EQ(meta_version_decode(buf, (size_t)len, &w), -EBADMSG);
	v.btop = 5;
	v.branch[1].id = 1; /* not ascending */
	len = meta_version_encode(&v, buf, sizeof(buf));
	SH_ASSERT_EQ(meta_version_decode(buf, (size_t)len, &w), -EBADMSG);
	v.nbranch = 0;
	v.keep[1] = 2; /* not ascending */
	len = meta_version_encode(&v, buf, sizeof(buf));
	SH_ASSERT_EQ(meta_version_decode(buf, (size_t)len, &w), -EBADMSG);
}

static int
branch_cmd(struct vfx *f, uint64_t branch, uint64_t base)
{
	uint8_t data[8];
	struct meta_cmd c = {
		.op = META_OP_BRANCH, .upto = branch, .data = data, .dlen = sizeof(data)
	};
	struct meta_result r;

	for (unsigned j = 0; j < 8; j++)
		data[j] = (uint8_t)(base >> (8 * j));
	return vapply(f, f->buckets[0], &c, &r);
}

/* Map e over f's file in the commands' version ver. */
static int
map_at(struct vfx *f, struct meta_extent e, uint64_t ver)
{
	struct meta_cmd c = { .op = META_OP_EXTENT, .ino = f->ino, .now = 9, .ver = ver };
	struct meta_result r;
	struct sh_enc enc;
	int rc;

	sh_enc_init(&enc);
	SH_ASSERT_OK(meta_extent_list_encode(&enc, &e, 1));
	c.data = enc.p;
	c.dlen = enc.len;
	rc = vapply(f, 0, &c, &r);
	sh_enc_fini(&enc);
	return rc;
}

/*
 * A branch (a clone's metadata) on a kept snapshot: its writes are its
 * own, take and drop their stripes' references as any write, and leave
 * the base's; dropping it lets its stripes go and the snapshot be deleted.
 */
TEST(meta_branch_writes_its_own_and_drops_them)
{
	const uint64_t b1 = 1ull << META_BRANCH_SHIFT | 1;
	struct vfx f = { .buckets = { 0, 1 } };
	struct meta_cmd c;
	struct meta_result r;
	unsigned steps = 0;

	vfx_open(&f, "branch.mdb");
	f.ino = vcreate(&f, "f", 2);
	map_at(&f, ext(0, 2 << 20, 7), 1);
	SH_ASSERT_OK(version_cmd(&f, 2, (uint64_t[]){ 1 }, 1)); /* snapshot 1 */

	SH_ASSERT_EQ(map_at(&f, ext(0, 2 << 20, 8), b1), -ESTALE); /* a branch not served */
	SH_ASSERT_EQ(branch_cmd(&f, 1, 5), -EINVAL);		   /* not on a kept version */
	SH_ASSERT_OK(branch_cmd(&f, 1, 1));
	SH_ASSERT_EQ(branch_cmd(&f, 1, 1), -EALREADY);
	SH_ASSERT_EQ(branch_cmd(&f, 1, 2), -EEXIST);
	SH_ASSERT_EQ(f.vs.nbranch, 1u);
	SH_ASSERT_EQ(version_cmd(&f, b1, (uint64_t[]){ 1 }, 1), -EINVAL); /* branch 0's step */

	/* the clone overwrites the file (a version of its own whatever the command says) */
	SH_ASSERT_EQ(usage(&f).mapped, 2u << 20);
	SH_ASSERT_OK(map_at(&f, ext(0, 2 << 20, 8), b1 + 5));
	SH_ASSERT_EQ(usage(&f).mapped, 4u << 20); /* the origin's and the clone's */
	SH_ASSERT_EQ(f.vs.ver, 2u);		  /* the group's version is not the branch's */
	SH_ASSERT_EQ(stripes_at(&f, b1), 8u);
	SH_ASSERT_EQ(stripes_at(&f, 0), 7u);
	SH_ASSERT_EQ(stripes_at(&f, 1), 7u);
	SH_ASSERT_EQ(reclaims(&f), 0u);
	/* and again: its own 8 goes, the base's 7 stays */
	SH_ASSERT_OK(map_at(&f, ext(0, 2 << 20, 10), b1));
	SH_ASSERT_EQ(reclaims(&f), 8u);
	/* the file system overwrites it too: 7 stays, for the snapshot and the clone's base */
	SH_ASSERT_OK(map_at(&f, ext(0, 2 << 20, 9), 2));
	SH_ASSERT_EQ(usage(&f).mapped, 4u << 20);
	SH_ASSERT_EQ(stripes_at(&f, 0), 9u);
	SH_ASSERT_EQ(stripes_at(&f, b1), 10u);
	SH_ASSERT_EQ(reclaims(&f), 8u);
	/* the clone creates a file of its own: branch 0 has no such name */
	c = (struct meta_cmd){ .op = META_OP_CREATE,
			       .type = META_REG,
			       .mode = 0644,
			       .now = 10,
			       .parent = META_ROOT_INO,
			       .ver = b1 };
	snprintf(c.name, sizeof(c.name), "%s", name0('g'));
	SH_ASSERT_OK(vapply(&f, 0, &c, &r));
	c.ver = 2;
	SH_ASSERT_OK(vapply(&f, 0, &c, &r)); /* (created again: it was not there) */
	/* the snapshot cannot go while the branch stands on it */
	SH_ASSERT_EQ(version_cmd(&f, 2, NULL, 0), -EBUSY);

	/* the branch goes: its commands are refused, its records dropped a step at a time */
	SH_ASSERT_OK(branch_cmd(&f, 1, 0));
	SH_ASSERT_EQ(branch_cmd(&f, 1, 0), -EALREADY);
	SH_ASSERT_EQ(map_at(&f, ext(0, 2 << 20, 11), b1), -ESTALE);
	while (f.vs.nbranch > 0) {
		c = (struct meta_cmd){ .op = META_OP_BRANCH_DROP, .upto = 1, .flags = 1 };
		SH_ASSERT_EQ(vapply(&f, f.buckets[1 - f.vs.branch[0].cursor], &c, &r), -ESTALE);
		SH_ASSERT_OK(vapply(&f, f.buckets[f.vs.branch[0].cursor], &c, &r));
		SH_ASSERT_LT(++steps, 50u);
	}
	SH_ASSERT_EQ(vapply(&f, 0, &c, &r), -EALREADY);
	SH_ASSERT_EQ(branch_cmd(&f, 1, 1), -ESTALE); /* a branch that went never comes back */
	/* one the group never served goes: fenced, it never comes late */
	SH_ASSERT_OK(branch_cmd(&f, 3, 0));
	SH_ASSERT_EQ(f.vs.btop, 3u);
	SH_ASSERT_EQ(branch_cmd(&f, 3, 0), -EALREADY);
	SH_ASSERT_EQ(branch_cmd(&f, 3, 1), -ESTALE);
	SH_ASSERT_EQ(f.vs.nbranch, 0u);
	SH_ASSERT_EQ(reclaims(&f), 18u);	  /* 8 and 10 */
	SH_ASSERT_EQ(usage(&f).mapped, 2u << 20); /* the origin's alone */
	SH_ASSERT_EQ(stripes_at(&f, 0), 9u);
	SH_ASSERT_EQ(stripes_at(&f, 1), 7u);
	/* now the snapshot goes, and its 7 with it */
	SH_ASSERT_OK(version_cmd(&f, 2, NULL, 0));
	SH_ASSERT(settle(&f) > 0);
	SH_ASSERT_EQ(reclaims(&f), 25u);
	meta_db_close(f.db);
}

/*
 * A small file's inline bytes in a branch: counted as any write's, the
 * base's left counted while the origin still has them, and gone with
 * the branch.
 */
TEST(meta_branch_counts_inline_bytes)
{
	const uint64_t b1 = 1ull << META_BRANCH_SHIFT | 1;
	struct vfx f = { .buckets = { 0, 1 } };
	struct meta_cmd c;
	struct meta_result r;
	uint64_t g;

	vfx_open(&f, "branch_inline.mdb");
	g = vcreate(&f, name0('g'), 2);
	c = (struct meta_cmd){ .op = META_OP_INLINE, .ino = g, .now = 3 };
	c.data = (const uint8_t *)"hello";
	c.dlen = 5;
	SH_ASSERT_OK(vapply(&f, 0, &c, &r));
	SH_ASSERT_EQ(inlined(&f), 5u);
	SH_ASSERT_OK(version_cmd(&f, 2, (uint64_t[]){ 1 }, 1));
	SH_ASSERT_OK(branch_cmd(&f, 1, 1));
	/* the clone rewrites it longer: its 9 bytes and the origin's 5 */
	c = (struct meta_cmd){ .op = META_OP_INLINE, .ino = g, .now = 4, .ver = b1 };
	c.data = (const uint8_t *)"hi there!";
	c.dlen = 9;
	SH_ASSERT_OK(vapply(&f, 0, &c, &r));
	SH_ASSERT_EQ(inlined(&f), 14u);
	/* the origin removes its file: the snapshot keeps its 5 bytes, uncounted */
	vremove(&f, name0('g'), g, 5);
	SH_ASSERT_EQ(inlined(&f), 9u);
	/* the clone goes: its bytes with it */
	SH_ASSERT_OK(branch_cmd(&f, 1, 0));
	c = (struct meta_cmd){ .op = META_OP_BRANCH_DROP, .upto = 1, .flags = 8 };
	while (f.vs.nbranch > 0)
		SH_ASSERT_OK(vapply(&f, f.buckets[f.vs.branch[0].cursor], &c, &r));
	SH_ASSERT_EQ(inlined(&f), 0u);
	meta_db_close(f.db);
}

/* The root's size (its entries) as of at. */
static uint64_t
root_size(struct vfx *f, uint64_t at)
{
	struct meta_inode a;
	struct meta_txn *t;

	SH_ASSERT_OK(meta_txn_begin(f->db, false, &t));
	struct meta_bucket b = { .t = t, .bucket = 0, .nbuckets = 2, .ver = at };
	SH_ASSERT_OK(meta_getattr(&b, META_ROOT_INO, &a));
	meta_txn_abort(t);
	return a.size;
}

/* A delta for the root, from bucket 1, of branch br, applied as shipped deltas are. */
static int
root_delta(struct vfx *f, uint64_t seq, uint16_t br)
{
	struct meta_delta d = { .kind = META_DELTA_INODE,
				.to = 0,
				.from = 1,
				.seq = seq,
				.ino = META_ROOT_INO,
				.dentries = 1,
				.branch = br };
	uint8_t buf[META_DELTA_LEN];
	struct meta_cmd c = { .op = META_OP_DELTAS, .data = buf, .dlen = sizeof(buf) };
	struct meta_result r;

	meta_delta_encode(&d, buf);
	return vapply(f, 0, &c, &r);
}

static int
on_orphan_seen(void *arg, uint64_t ino, uint16_t branch, uint64_t since)
{
	uint64_t *seen = arg;

	(void)since;
	seen[0]++;
	seen[1] = ino;
	seen[2] = branch;
	return 0;
}

/* The orphans of bucket 0: how many, and the last one's inode and branch. */
static void
orphans_of(struct vfx *f, uint64_t seen[3])
{
	struct meta_txn *t;

	seen[0] = seen[1] = seen[2] = 0;
	SH_ASSERT_OK(meta_txn_begin(f->db, false, &t));
	struct meta_bucket b = { .t = t, .bucket = 0, .nbuckets = 2, .ver = META_VER_NEWEST };
	SH_ASSERT_OK(meta_orphans(&b, on_orphan_seen, seen));
	meta_txn_abort(t);
}

static int
count_intent(void *arg, int phase, const struct meta_rename2 *r)
{
	(void)phase;
	(void)r;
	++*(unsigned *)arg;
	return 0;
}

/*
 * What a branch's commands cause beyond their bucket: a delta shipped for
 * a branch changes that branch's records, waits for a branch not served
 * yet and changes nothing once it went; a branch's open file without
 * names is an orphan of that branch, dropped by a command of it, and
 * forgotten with the branch.
 */
TEST(meta_branch_deltas_and_orphans)
{
	const uint64_t b1 = 1ull << META_BRANCH_SHIFT | 1;
	struct vfx f = { .buckets = { 0, 1 } };
	struct meta_cmd c;
	struct meta_result r;
	uint64_t seen[3], size0, ino;

	vfx_open(&f, "branch_deltas.mdb");
	ino = vcreate(&f, name0('a'), 2);
	SH_ASSERT_OK(version_cmd(&f, 2, (uint64_t[]){ 1 }, 1));
	SH_ASSERT_OK(branch_cmd(&f, 1, 1));
	size0 = root_size(&f, META_VER_NEWEST);
	SH_ASSERT_EQ(root_size(&f, b1), size0);

	/* a shipped delta of the branch: the branch's root, not the file system's */
	SH_ASSERT_OK(root_delta(&f, 1, 1));
	SH_ASSERT_EQ(root_size(&f, b1), size0 + 1);
	SH_ASSERT_EQ(root_size(&f, META_VER_NEWEST), size0);
	SH_ASSERT_OK(root_delta(&f, 2, 0));
	SH_ASSERT_EQ(root_size(&f, META_VER_NEWEST), size0 + 1);
	SH_ASSERT_EQ(root_size(&f, b1), size0 + 1);
	/* a branch the group does not serve yet: later (the whole command waits) */
	SH_ASSERT_EQ(root_delta(&f, 3, 7), -EAGAIN);

	/* a file of the origin unlinked in the clone while open: the clone's orphan */
	c = (struct meta_cmd){ .op = META_OP_REMOVE, .now = 5, .parent = META_ROOT_INO, .ver = b1 };
	snprintf(c.name, sizeof(c.name), "%s", name0('a'));
	SH_ASSERT_OK(vapply(&f, 0, &c, &r));
	orphans_of(&f, seen);
	SH_ASSERT_EQ(seen[0], 1u);
	SH_ASSERT_EQ(seen[1], ino);
	SH_ASSERT_EQ(seen[2], 1u);
	/* dropped by a command of the branch: the origin's file stays */
	c = (struct meta_cmd){ .op = META_OP_ORPHAN_DROP, .ino = ino, .now = 6, .ver = b1 };
	SH_ASSERT_OK(vapply(&f, 0, &c, &r));
	orphans_of(&f, seen);
	SH_ASSERT_EQ(seen[0], 0u);
	{
		struct meta_txn *t;
		struct meta_dentry d;

		SH_ASSERT_OK(meta_txn_begin(f.db, false, &t));
		struct meta_bucket b = {
			.t = t, .bucket = 0, .nbuckets = 2, .ver = META_VER_NEWEST
		};
		SH_ASSERT_OK(meta_lookup(&b, META_ROOT_INO, name0('a'), strlen(name0('a')), &d));
		SH_ASSERT_EQ(d.ino, ino);
		b.ver = b1;
		SH_ASSERT_EQ(meta_lookup(&b, META_ROOT_INO, name0('a'), strlen(name0('a')), &d),
			     -ENOENT);
		meta_txn_abort(t);
	}
	/* another open file unlinked in the clone; then the clone goes, its orphan with it */
	ino = vcreate(&f, name0('b'), 7);
	c = (struct meta_cmd){
		.op = META_OP_CREATE, .type = META_REG, .mode = 0644, .now = 8, .ver = b1
	};
	c.parent = META_ROOT_INO;
	snprintf(c.name, sizeof(c.name), "%s", name0('c'));
	SH_ASSERT_OK(vapply(&f, 0, &c, &r));
	c.op = META_OP_REMOVE;
	SH_ASSERT_OK(vapply(&f, 0, &c, &r));
	orphans_of(&f, seen);
	SH_ASSERT_EQ(seen[0], 1u);
	SH_ASSERT_EQ(seen[2], 1u);
	/* a rename of the clone under way: its lock holds the clone's name, not the origin's */
	{
		struct meta_rename2 rn = { .id = 77, .oparent = META_ROOT_INO, .branch = 1 };
		struct meta_txn *t;
		struct meta_key k;
		struct sh_enc e;

		SH_ASSERT_OK(meta_txn_begin(f.db, true, &t));
		struct meta_bucket b = { .t = t, .bucket = 0, .nbuckets = 2, .ver = b1 };
		SH_ASSERT_OK(meta_lock_key(&k, &b, META_ROOT_INO, "busy", 4));
		SH_ASSERT_OK(meta_put(t, &k, b1, &rn.id, sizeof(rn.id), NULL));
		strcpy(rn.oname, "busy");
		strcpy(rn.nname, "there");
		sh_enc_init(&e);
		sh_enc_u8(&e, 1);
		SH_ASSERT_OK(meta_rename2_encode(&e, &rn));
		meta_key_id(&k, 0, META_K_INTENT, rn.id);
		SH_ASSERT_OK(meta_put(t, &k, 1, e.p, e.len, NULL));
		sh_enc_fini(&e);
		SH_ASSERT_EQ(meta_unlocked_check(&b, META_ROOT_INO, "busy", 4), -EBUSY);
		b.ver = META_VER_NEWEST;
		SH_ASSERT_OK(meta_unlocked_check(&b, META_ROOT_INO, "busy", 4));
		SH_ASSERT_OK(meta_txn_commit(t));
	}
	SH_ASSERT_OK(branch_cmd(&f, 1, 0));
	c = (struct meta_cmd){ .op = META_OP_BRANCH_DROP, .upto = 1, .flags = 64 };
	while (f.vs.nbranch > 0)
		SH_ASSERT_OK(vapply(&f, f.buckets[f.vs.branch[0].cursor], &c, &r));
	orphans_of(&f, seen);
	SH_ASSERT_EQ(seen[0], 0u);
	/* its rename's lock and intent went with it */
	{
		struct meta_txn *t;
		unsigned n = 0;

		SH_ASSERT_OK(meta_txn_begin(f.db, false, &t));
		struct meta_bucket b = { .t = t, .bucket = 0, .nbuckets = 2, .ver = b1 };
		SH_ASSERT_OK(meta_unlocked_check(&b, META_ROOT_INO, "busy", 4));
		SH_ASSERT_OK(meta_intents(&b, count_intent, &n));
		SH_ASSERT_EQ(n, 0u);
		meta_txn_abort(t);
	}
	/* a delta of the branch that went changes nothing, and is done */
	SH_ASSERT_OK(root_delta(&f, 3, 1));
	SH_ASSERT_EQ(root_size(&f, META_VER_NEWEST), size0 + 2); /* (b's name) */
	meta_db_close(f.db);
}

/* meta_snap_usage's model: each key's writes (version, bytes; 0 bytes: deleted). */
#define SU_KEYS 6
#define SU_OPS	300
#define SU_BR	2 /* clones: branches 1 .. SU_BR */
struct su_hist {
	int n;
	uint64_t ver[SU_OPS];
	uint64_t bytes[SU_OPS];
	bool own[SU_BR + 1];	    /* a clone's record of it: it reads that, not its base's */
	uint64_t obytes[SU_BR + 1]; /* what that record maps (0: deleted) */
};

/* The write read as of version at: its index (the last at that version wins), -1: none. */
static int
su_read(const struct su_hist *h, uint64_t at)
{
	int r = -1;

	for (int i = 0; i < h->n && h->ver[i] <= at; i++)
		r = i;
	return r;
}

static void
su_key(struct meta_key *k, int i)
{
	if (i % 2)
		meta_key_id(k, 0, META_K_INLINE, (uint64_t)i);
	else
		meta_key_id(k, 0, META_K_EXTENT, (uint64_t)i); /* one field: ino, no offset */
}

/* An extent of len bytes in a stripe of its own (no two writes share bytes: the partial
 * overwrites are meta_snap_usage_counts_stored_bytes_not_lengths), or len inline bytes. */
static int
su_value(int i, uint64_t len, int op, uint8_t *v, size_t cap)
{
	struct meta_extent x = {
		.len = len, .stripe = 1000 + (uint64_t)op, .d = 2, .p = 1, .frag = 4096
	};

	x.targets[0] = 1;
	x.targets[1] = 2;
	x.targets[2] = 3;
	SH_ASSERT(len <= cap);
	if (i % 2 == 0)
		return meta_extent_encode(&x, v, cap);
	memset(v, 'y', len);
	return (int)len;
}

struct su_model {
	struct su_hist h[SU_KEYS];
	uint64_t keep[12];
	unsigned nkeep;
	uint64_t base[SU_BR + 1]; /* 0: no such clone yet */
	bool writable[SU_BR + 1]; /* a writable snapshot's (one reader with it) */
};

/* Which write of branch 0 the clone on branch b reads of key i: -1 its own record, or none. */
static int
su_clone_read(const struct su_model *m, unsigned b, int i)
{
	return m->h[i].own[b] ? -1 : su_read(&m->h[i], m->base[b]);
}

/* The reader clone b is (meta_snap_usage's numbering): its writable snapshot, or nkeep + b. */
static unsigned
su_group(const struct su_model *m, unsigned b)
{
	for (unsigned s = 0; s < m->nkeep && m->writable[b]; s++)
		if (m->keep[s] == m->base[b])
			return s;
	return m->nkeep + b;
}

/* A stored value of bytes, read by the live file or not, and by the snapshots and clones
 * marked: what it adds to each figure. */
static void
su_count(const struct su_model *m, struct meta_snap_usage *u, bool live, const bool *snap,
	 const bool *clone, uint64_t bytes)
{
	bool several = false, any = false, normal = false;
	long g = -1;

	if (live || bytes == 0)
		return;
	for (unsigned s = 0; s < m->nkeep; s++)
		if (snap[s]) {
			several |= g >= 0 && g != (long)s;
			g = (long)s;
			any = true;
		}
	for (unsigned b = 1; b <= SU_BR; b++)
		if (clone[b]) {
			long gb = (long)su_group(m, b);

			several |= g >= 0 && g != gb;
			g = gb;
			any |= m->writable[b];
			normal |= !m->writable[b];
		}
	if (any && !normal)
		u->held += bytes; /* (snapshots, writable ones included, alone) */
	if (g < 0 || several)
		return;
	if (g < (long)m->nkeep) {
		u->only[g] += bytes;
		for (unsigned b = 1; b <= SU_BR; b++)
			if (m->base[b] != 0 && m->writable[b] && su_group(m, b) == (unsigned)g)
				u->clone_only[b - 1] += bytes;
	} else {
		u->clone_only[g - (long)m->nkeep - 1] += bytes;
	}
}

/* What the model says meta_snap_usage finds, into u. */
static void
su_expect(const struct su_model *m, struct meta_snap_usage *u)
{
	memset(u, 0, sizeof(*u));
	for (int i = 0; i < SU_KEYS; i++) {
		const struct su_hist *h = &m->h[i];

		/* branch 0's stored values: one per version (the last written there) */
		for (int rec = 0; rec < h->n; rec++) {
			bool snap[12] = { false }, clone[SU_BR + 1] = { false };

			if (rec + 1 < h->n && h->ver[rec + 1] == h->ver[rec])
				continue;
			for (unsigned s = 0; s < m->nkeep; s++)
				snap[s] = su_read(h, m->keep[s]) == rec;
			for (unsigned b = 1; b <= SU_BR; b++)
				clone[b] = m->base[b] != 0 && su_clone_read(m, b, i) == rec;
			su_count(m, u, rec == h->n - 1, snap, clone, h->bytes[rec]);
		}
		/* each clone's own */
		for (unsigned b = 1; b <= SU_BR; b++) {
			bool snap[12] = { false }, clone[SU_BR + 1] = { false };

			clone[b] = true;
			if (m->base[b] != 0 && h->own[b])
				su_count(m, u, false, snap, clone, h->obytes[b]);
		}
		for (unsigned b = 1, j = 0; b <= SU_BR; b++) {
			int rec;

			if (m->base[b] == 0)
				continue;
			rec = su_clone_read(m, b, i);
			if (i % 2 == 0)
				u->clone_mapped[j] += h->own[b]	 ? h->obytes[b]
						      : rec >= 0 ? h->bytes[rec]
								 : 0;
			j++;
		}
	}
}

/* meta_snap_usage of the bucket says what the model does. */
static void
su_check(struct meta_db *db, const struct su_model *m, const struct meta_vbranch *br, unsigned nbr)
{
	struct meta_snap_usage *u = sh_calloc(1, sizeof(*u)), *want = sh_calloc(1, sizeof(*u));
	struct meta_txn *t;

	SH_ASSERT(u != NULL && want != NULL);
	su_expect(m, want);
	SH_ASSERT_OK(meta_txn_begin(db, false, &t));
	SH_ASSERT_OK(meta_snap_usage(t, 0, m->keep, m->nkeep, br, nbr, m->writable + 1, u));
	meta_txn_abort(t);
	SH_ASSERT_MSG(u->held == want->held, "held %llu, the model says %llu (seed %llu)",
		      (unsigned long long)u->held, (unsigned long long)want->held,
		      (unsigned long long)sh_test_seed());
	for (unsigned s = 0; s < m->nkeep; s++)
		SH_ASSERT_MSG(u->only[s] == want->only[s],
			      "snapshot %u (version %llu): %llu only its, the model says "
			      "%llu (seed %llu)",
			      s, (unsigned long long)m->keep[s], (unsigned long long)u->only[s],
			      (unsigned long long)want->only[s],
			      (unsigned long long)sh_test_seed());
	for (unsigned j = 0; j < nbr; j++)
		SH_ASSERT_MSG(
		    u->clone_only[j] == want->clone_only[j] &&
			u->clone_mapped[j] == want->clone_mapped[j],
		    "clone %u: %llu only its and %llu mapped, the model says %llu "
		    "and %llu (seed %llu)",
		    j + 1, (unsigned long long)u->clone_only[j],
		    (unsigned long long)u->clone_mapped[j], (unsigned long long)want->clone_only[j],
		    (unsigned long long)want->clone_mapped[j], (unsigned long long)sh_test_seed());
	sh_free(u);
	sh_free(want);
}

/*
 * Bytes only one kept snapshot reads, bytes only snapshots read, and what
 * each clone alone reads and maps, from the bucket's stored versions, are
 * what a model of every write says, with snapshots taken and dropped and
 * clones made on them and written (never settled: versions no one reads
 * stay stored and count for none).
 */
TEST(meta_snap_usage_matches_a_model)
{
	static struct su_model m;
	struct meta_vbranch br[SU_BR];
	uint64_t bseq[SU_BR + 1] = { 0 }, ver = 1;
	unsigned nbr = 0;
	struct meta_db *db;
	struct sh_rand rng;
	char path[512];

	snprintf(path, sizeof(path), "%s/su.mdb", sh_test_dir());
	SH_ASSERT_OK(meta_db_open(path, 64ull << 20, 0, &db));
	memset(&m, 0, sizeof(m));
	sh_rand_seed(&rng, sh_test_seed());
	for (int op = 0; op < SU_OPS; op++) {
		struct meta_keep kp = { m.keep, m.nkeep, NULL, NULL, 0 };
		uint64_t r = sh_rand_below(&rng, 100);
		int i = (int)sh_rand_below(&rng, SU_KEYS);
		struct su_hist *k = &m.h[i];
		unsigned b = nbr > 0 && sh_rand_below(&rng, 3) == 0
				 ? 1 + (unsigned)sh_rand_below(&rng, nbr)
				 : 0;
		bool there;
		uint64_t wver = ver;
		struct meta_txn *t;
		struct meta_key key;

		if (r < 8 && m.nkeep < 12) {
			m.keep[m.nkeep++] = ver++;
			continue;
		}
		if (r < 11 && m.nkeep > 0) {
			unsigned d = (unsigned)sh_rand_below(&rng, m.nkeep);
			bool based = false;

			for (unsigned c = 1; c <= nbr; c++)
				based |= m.base[c] == m.keep[d]; /* (the ZFS rule) */
			if (!based) {
				memmove(m.keep + d, m.keep + d + 1,
					(m.nkeep - d - 1) * sizeof(m.keep[0]));
				m.nkeep--;
			}
			continue;
		}
		if (r < 14 && nbr < SU_BR && m.nkeep > 0) {
			nbr++;
			m.base[nbr] = m.keep[sh_rand_below(&rng, m.nkeep)];
			m.writable[nbr] = sh_rand_below(&rng, 2) == 0;
			SH_ASSERT_OK(meta_db_branch(db, (uint16_t)nbr, m.base[nbr]));
			br[nbr - 1] =
			    (struct meta_vbranch){ .id = (uint16_t)nbr, .base = m.base[nbr] };
			continue;
		}
		if (b != 0) {
			int rec = su_clone_read(&m, b, i);

			kp = (struct meta_keep){ NULL, 0, NULL, NULL, (uint16_t)b };
			wver = (uint64_t)b << META_BRANCH_SHIFT | ++bseq[b];
			there = k->own[b] ? k->obytes[b] != 0 : rec >= 0 && k->bytes[rec] != 0;
		} else {
			there = k->n > 0 && k->bytes[k->n - 1] != 0;
		}
		su_key(&key, i);
		SH_ASSERT_OK(meta_txn_begin(db, true, &t));
		if (r < 30 && there) {
			SH_ASSERT_OK(meta_del(t, &key, wver, &kp));
			if (b == 0)
				k->bytes[k->n] = 0;
			else
				k->obytes[b] = 0;
		} else {
			uint64_t len = 1 + sh_rand_below(&rng, 3000);
			uint8_t v[4096];
			int vl = su_value(i, len, op, v, sizeof(v));

			SH_ASSERT(vl > 0);
			SH_ASSERT_OK(meta_put(t, &key, wver, v, (size_t)vl, &kp));
			if (b == 0)
				k->bytes[k->n] = len;
			else
				k->obytes[b] = len;
		}
		if (b == 0)
			k->ver[k->n++] = ver;
		else
			k->own[b] = true;
		SH_ASSERT_OK(meta_txn_commit(t));
		if (op % 20 == 19)
			su_check(db, &m, br, nbr);
	}
	su_check(db, &m, br, nbr);
	meta_db_close(db);
}

/* One extent record of ino at off (bucket 0), as a write maps it. */
static void
su_put(struct meta_db *db, uint64_t ino, uint64_t off, uint64_t ver, const struct meta_extent *x,
       const uint64_t *keep, unsigned nkeep, bool del)
{
	struct meta_keep kp = { keep, nkeep, NULL, NULL };
	uint8_t v[META_EXTENT_VMAX];
	struct meta_txn *t;
	struct meta_key k;
	int vl = meta_extent_encode(x, v, sizeof(v));

	SH_ASSERT(vl > 0);
	meta_key_id(&k, 0, META_K_EXTENT, ino);
	meta_be64_put(k.b + k.len, off);
	k.len += 8;
	SH_ASSERT_OK(meta_txn_begin(db, true, &t));
	if (del)
		SH_ASSERT_OK(meta_del(t, &k, ver, &kp));
	else
		SH_ASSERT_OK(meta_put(t, &k, ver, v, (size_t)vl, &kp));
	SH_ASSERT_OK(meta_txn_commit(t));
}

static struct meta_snap_usage *
su_of(struct meta_db *db, const uint64_t *keep, unsigned nkeep)
{
	static struct meta_snap_usage u;
	struct meta_txn *t;

	memset(&u, 0, sizeof(u));
	SH_ASSERT_OK(meta_txn_begin(db, false, &t));
	SH_ASSERT_OK(meta_snap_usage(t, 0, keep, nkeep, NULL, 0, NULL, &u));
	meta_txn_abort(t);
	return &u;
}

/*
 * 4 KiB overwritten in the middle of a 64 KiB extent after a snapshot: the
 * snapshot alone reads the 64 KiB record, but the live file still maps all
 * of it but those 4 KiB; the same in a compressed block (its expanded
 * bytes), and for two snapshots that share what they read.
 */
TEST(meta_snap_usage_counts_stored_bytes_not_lengths)
{
	struct meta_extent whole = { .len = 65536,
				     .stripe = 9,
				     .d = 2,
				     .p = 1,
				     .frag = 32768,
				     .targets = { 1, 2, 3 } },
			   head = whole, tail = whole, fresh = whole;
	uint64_t keep[2] = { 1, 2 };
	struct meta_snap_usage *u;
	struct meta_db *db;
	char path[512];

	snprintf(path, sizeof(path), "%s/su2.mdb", sh_test_dir());
	SH_ASSERT_OK(meta_db_open(path, 64ull << 20, 0, &db));
	su_put(db, 5, 0, 1, &whole, keep, 0, false); /* version 1: snapshot 1 takes it */
	head.len = 16384;
	tail.soff = 20480;
	tail.len = 45056;
	fresh.stripe = 10;
	fresh.len = 4096;
	su_put(db, 5, 0, 2, &head, keep, 1, false); /* version 2: [16 KiB, 20 KiB) rewritten */
	su_put(db, 5, 16384, 2, &fresh, keep, 1, false);
	su_put(db, 5, 20480, 2, &tail, keep, 1, false);
	u = su_of(db, keep, 1);
	SH_ASSERT_EQ(u->only[0], 4096u);
	SH_ASSERT_EQ(u->held, 4096u);
	/* snapshot 2 reads what the live file does: nothing is its own, nor more held */
	u = su_of(db, keep, 2);
	SH_ASSERT_EQ(u->only[0], 4096u);
	SH_ASSERT_EQ(u->only[1], 0u);
	SH_ASSERT_EQ(u->held, 4096u);
	/* the file removed at version 3: what both read is theirs together, not either's */
	su_put(db, 5, 0, 3, &head, keep, 2, true);
	su_put(db, 5, 16384, 3, &fresh, keep, 2, true);
	su_put(db, 5, 20480, 3, &tail, keep, 2, true);
	u = su_of(db, keep, 2);
	SH_ASSERT_EQ(u->only[0], 4096u);       /* the old 4 KiB */
	SH_ASSERT_EQ(u->only[1], 4096u);       /* the new 4 KiB */
	SH_ASSERT_EQ(u->held, 65536u + 4096u); /* stripe 9 whole, and stripe 10 */
	meta_db_close(db);

	/* a compressed block: ranges of its expanded bytes */
	snprintf(path, sizeof(path), "%s/su3.mdb", sh_test_dir());
	SH_ASSERT_OK(meta_db_open(path, 64ull << 20, 0, &db));
	whole = (struct meta_extent){ .len = 65536,
				      .stripe = 11,
				      .soff = 8192,
				      .d = 2,
				      .p = 1,
				      .frag = 32768,
				      .enc = 1,
				      .slen = 1000,
				      .blen = 65536,
				      .targets = { 1, 2, 3 } };
	head = whole;
	head.len = 32768;
	su_put(db, 6, 0, 1, &whole, keep, 0, false);
	su_put(db, 6, 0, 2, &head, keep, 1, false); /* truncated to 32 KiB after snapshot 1 */
	u = su_of(db, keep, 1);
	SH_ASSERT_EQ(u->only[0], 32768u);
	SH_ASSERT_EQ(u->held, 32768u);
	meta_db_close(db);
}
