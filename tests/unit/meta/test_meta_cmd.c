// SPDX-License-Identifier: Apache-2.0
/*
 * A bucket's commands: a random stream of commands (creates, links,
 * removes, renames, setattrs, xattrs, some bound to fail) is encoded,
 * decoded and applied to two separate stores, as two replicas would: every
 * result and the final contents agree, and rejected commands change
 * nothing.
 */
#include <stdio.h>

#include "../../../src/meta/meta_cmd.h"
#include "../../../src/meta/meta_done.h"
#include "../../../src/meta/mproto.h"
#include "../../lib/test.h"

#define NB 1 /* one bucket: every entry is local */

struct replica {
	struct meta_db *db;
};

static void
open_replica(struct replica *r, const char *name)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s.mdb", sh_test_dir(), name);
	SH_ASSERT_OK(meta_db_open(path, 64ull << 20, 0, &r->db));
}

static void
apply(struct replica *r, const struct meta_cmd *c, struct meta_result *res)
{
	struct meta_bucket b = { .bucket = 0, .nbuckets = NB };
	struct sh_enc e;
	struct meta_cmd d;

	sh_enc_init(&e);
	SH_ASSERT_OK(meta_cmd_encode(&e, c));
	SH_ASSERT_OK(meta_cmd_decode(e.p, e.len, &d));
	SH_ASSERT_OK(meta_txn_begin(r->db, true, &b.t));
	meta_cmd_apply(&b, &d, res);
	if (res->status < 0)
		meta_txn_abort(b.t);
	else
		SH_ASSERT_OK(meta_txn_commit(b.t));
	sh_enc_fini(&e);
}

static int
hash_rec(void *arg, const uint8_t *key, size_t klen, const void *val, size_t vlen)
{
	uint64_t *h = arg;

	*h = sh_hash64(key, klen, *h);
	*h = sh_hash64(val, vlen, *h);
	return 0;
}

static uint64_t
contents(struct replica *r)
{
	struct meta_txn *t;
	struct meta_key all = { .b = { 0, 0 }, .len = 2 };
	uint64_t h = 1;

	SH_ASSERT_OK(meta_txn_begin(r->db, false, &t));
	SH_ASSERT_OK(meta_scan(t, &all, NULL, 0, 1, hash_rec, &h));
	SH_ASSERT_OK(meta_scan(t, &all, NULL, 0, UINT64_MAX, hash_rec, &h));
	meta_txn_abort(t);
	return h;
}

TEST(meta_cmd_replicas_agree)
{
	struct replica a, b;
	struct sh_rand rng;
	struct meta_cmd c = { .op = META_OP_MKROOT, .ver = 1, .mode = 0755, .now = 1 };
	struct meta_result ra, rb;
	uint64_t inos[64] = { META_ROOT_INO };
	unsigned ninos = 1, ok = 0, failed = 0;

	sh_rand_seed(&rng, sh_test_seed());
	open_replica(&a, "a");
	open_replica(&b, "b");
	apply(&a, &c, &ra);
	apply(&b, &c, &rb);
	SH_ASSERT_OK(ra.status);
	for (int i = 0; i < 600; i++) {
		uint64_t r = sh_rand_below(&rng, 100);

		memset(&c, 0, sizeof(c));
		c.ver = 1;
		c.now = 100 + (uint64_t)i;
		snprintf(c.name, sizeof(c.name), "n%u", (unsigned)sh_rand_below(&rng, 40));
		snprintf(c.name2, sizeof(c.name2), "n%u", (unsigned)sh_rand_below(&rng, 40));
		c.parent = inos[sh_rand_below(&rng, ninos)];
		c.parent2 = inos[sh_rand_below(&rng, ninos)];
		c.ino = inos[sh_rand_below(&rng, ninos)];
		if (r < 35) {
			c.op = META_OP_CREATE;
			c.type = sh_rand_below(&rng, 3) == 0 ? META_DIR : META_REG;
			c.mode = 0644;
		} else if (r < 45) {
			c.op = META_OP_CREATE;
			c.type = META_LNK;
			c.mode = 0777;
			c.data = (const uint8_t *)"target";
			c.dlen = 6;
		} else if (r < 60) {
			c.op = META_OP_REMOVE;
			c.dir = (uint8_t)sh_rand_below(&rng, 2);
		} else if (r < 72) {
			c.op = META_OP_RENAME;
			c.flags = (uint32_t)sh_rand_below(&rng, 3);
		} else if (r < 80) {
			c.op = META_OP_LINK;
			c.type = META_REG;
		} else if (r < 90) {
			c.op = META_OP_SETATTR;
			c.sa = (struct meta_setattr){ .valid = META_SET_SIZE | META_SET_MODE,
						      .size = sh_rand_below(&rng, 1 << 20),
						      .mode = 0600 };
		} else if (r < 96) {
			c.op = META_OP_SETXATTR;
			c.data = (const uint8_t *)"v";
			c.dlen = 1;
			c.flags = (uint32_t)sh_rand_below(&rng, 3);
			snprintf(c.name, sizeof(c.name), "user.k%u",
				 (unsigned)sh_rand_below(&rng, 3));
		} else {
			c.op = META_OP_REMOVEXATTR;
			snprintf(c.name, sizeof(c.name), "user.k%u",
				 (unsigned)sh_rand_below(&rng, 3));
		}
		apply(&a, &c, &ra);
		apply(&b, &c, &rb);
		SH_ASSERT_MSG(ra.status == rb.status, "command %d (op %u): %d vs %d", i, c.op,
			      ra.status, rb.status);
		SH_ASSERT_MEMEQ(&ra.attr, &rb.attr, sizeof(ra.attr));
		SH_ASSERT_EQ(ra.dentry.ino, rb.dentry.ino);
		ra.status < 0 ? failed++ : ok++;
		if (c.op == META_OP_CREATE && ra.status == 0 && ra.dentry.type == META_DIR &&
		    ninos < 64)
			inos[ninos++] = ra.dentry.ino;
	}
	SH_ASSERT_EQ(contents(&a), contents(&b));
	SH_ASSERT_GT(ok, 100);
	SH_ASSERT_GT(failed, 50); /* the stream also tries what must fail */
	meta_db_close(a.db);
	meta_db_close(b.db);
}

TEST(meta_cmd_codec_rejects_nonsense)
{
	struct meta_cmd c = { .op = META_OP_CREATE, .ver = 3, .type = META_REG, .parent = 1 }, d;
	struct sh_enc e;

	snprintf(c.name, sizeof(c.name), "file");
	sh_enc_init(&e);
	SH_ASSERT_OK(meta_cmd_encode(&e, &c));
	SH_ASSERT_OK(meta_cmd_decode(e.p, e.len, &d));
	SH_ASSERT_STREQ(d.name, "file");
	SH_ASSERT_EQ(d.ver, 3);
	for (size_t n = 0; n < e.len; n++)
		SH_ASSERT_EQ(meta_cmd_decode(e.p, n, &d), -EBADMSG);
	e.p[1] = META_OP_MAX; /* no such op */
	SH_ASSERT_EQ(meta_cmd_decode(e.p, e.len, &d), -EBADMSG);
	sh_enc_fini(&e);
	c.op = 0;
	sh_enc_init(&e);
	SH_ASSERT_EQ(meta_cmd_encode(&e, &c), -EINVAL);
	sh_enc_fini(&e);
}

TEST(meta_bucket_snapshot_moves_a_bucket)
{
	struct replica a, b;
	struct meta_cmd c = { .op = META_OP_MKROOT, .ver = 1, .mode = 0755, .now = 1 };
	struct meta_result r;
	struct meta_txn *t;
	struct sh_enc e;
	size_t len;

	open_replica(&a, "src");
	open_replica(&b, "dst");
	apply(&a, &c, &r);
	for (int i = 0; i < 50; i++) {
		memset(&c, 0, sizeof(c));
		c.op = META_OP_CREATE;
		c.ver = 1 + (uint64_t)i / 10; /* several versions */
		c.now = 10 + (uint64_t)i;
		c.parent = META_ROOT_INO;
		c.type = META_REG;
		c.mode = 0644;
		snprintf(c.name, sizeof(c.name), "f%d", i);
		apply(&a, &c, &r);
		SH_ASSERT_OK(r.status);
	}
	/* b holds stale records of the bucket; the snapshot replaces them */
	memset(&c, 0, sizeof(c));
	c = (struct meta_cmd){ .op = META_OP_MKROOT, .ver = 1, .mode = 0700, .now = 99 };
	apply(&b, &c, &r);
	sh_enc_init(&e);
	SH_ASSERT_OK(meta_txn_begin(a.db, false, &t));
	SH_ASSERT_OK(meta_export_bucket(t, 0, &e));
	meta_txn_abort(t);
	SH_ASSERT_OK(meta_txn_begin(b.db, true, &t));
	SH_ASSERT_OK(meta_import_bucket(t, 0, e.p, e.len));
	SH_ASSERT_OK(meta_txn_commit(t));
	SH_ASSERT_EQ(contents(&a), contents(&b));
	/* truncated, or for another bucket: refused */
	SH_ASSERT_OK(meta_txn_begin(b.db, true, &t));
	for (len = 0; len < e.len; len += 37)
		SH_ASSERT_EQ(meta_import_bucket(t, 0, e.p, len), -EBADMSG);
	SH_ASSERT_EQ(meta_import_bucket(t, 1, e.p, e.len), -EBADMSG);
	meta_txn_abort(t);
	SH_ASSERT_EQ(contents(&a), contents(&b));
	sh_enc_fini(&e);
	meta_db_close(a.db);
	meta_db_close(b.db);
}

/* The steps of a cross-bucket rename as commands, as the two buckets' logs would hold them. */
TEST(meta_cmd_rename_steps)
{
	struct replica a;
	struct meta_bucket b0 = { .bucket = 0, .nbuckets = 2 }, b1 = { .bucket = 1, .nbuckets = 2 };
	struct meta_cmd c = { .op = META_OP_MKROOT, .ver = 1, .mode = 0755, .now = 1 };
	struct meta_result r;
	struct meta_rename2 rn = { .id = 1,
				   .src_bucket = 0,
				   .dst_bucket = 1,
				   .oparent = META_ROOT_INO,
				   .nparent = META_ROOT_INO,
				   .now = 5,
				   .tag = 0x77 };
	struct sh_enc e;
	char src[32], dst[32];
	int i;

	open_replica(&a, "steps");
	SH_ASSERT_OK(meta_txn_begin(a.db, true, &b0.t));
	b1.t = b0.t;
	meta_cmd_apply(&b0, &c, &r);
	SH_ASSERT_OK(r.status);
	for (i = 0; meta_dentry_bucket(META_ROOT_INO, src,
				       (size_t)snprintf(src, sizeof(src), "s%d", i), 2) != 0;
	     i++)
		;
	for (i = 0; meta_dentry_bucket(META_ROOT_INO, dst,
				       (size_t)snprintf(dst, sizeof(dst), "d%d", i), 2) != 1;
	     i++)
		;
	c = (struct meta_cmd){ .op = META_OP_CREATE,
			       .ver = 1,
			       .type = META_REG,
			       .mode = 0644,
			       .parent = META_ROOT_INO,
			       .now = 2 };
	strcpy(c.name, src);
	meta_cmd_apply(&b0, &c, &r);
	SH_ASSERT_OK(r.status);
	/* bucket 1 holds a lease on the root */
	c = (struct meta_cmd){
		.op = META_OP_LEASE_GRANT, .ver = 1, .ino = META_ROOT_INO, .flags = 1
	};
	meta_cmd_apply(&b0, &c, &r);
	SH_ASSERT_OK(r.status);
	c = (struct meta_cmd){ .op = META_OP_LEASE_HOLD,
			       .ver = 1,
			       .ino = META_ROOT_INO,
			       .mode = r.lease.mode,
			       .upto = r.lease.generation };
	meta_cmd_apply(&b1, &c, &r);
	SH_ASSERT_OK(r.status);
	strcpy(rn.oname, src);
	strcpy(rn.nname, dst);
	for (int step = META_R2_PREPARE_SRC; step <= META_R2_FINISH; step++) {
		struct meta_bucket *on =
		    step == META_R2_PREPARE_DST || step == META_R2_COMMIT_DST ? &b1 : &b0;

		if (step == META_R2_ABORT)
			continue;
		sh_enc_init(&e);
		SH_ASSERT_OK(meta_rename2_encode(&e, &rn));
		c = (struct meta_cmd){ .op = META_OP_RENAME2,
				       .ver = 1,
				       .flags = (uint32_t)step,
				       .data = e.p,
				       .dlen = e.len };
		meta_cmd_apply(on, &c, &r);
		SH_ASSERT_MSG(r.status == 0, "step %d: %d", step, r.status);
		rn = r.rename; /* what the step filled in travels on */
		sh_enc_fini(&e);
	}
	{
		struct meta_dentry d;

		SH_ASSERT_EQ(meta_lookup(&b0, META_ROOT_INO, src, strlen(src), &d), -ENOENT);
		SH_ASSERT_OK(meta_lookup(&b1, META_ROOT_INO, dst, strlen(dst), &d));
	}
	/* the client's rename, retried at the source bucket: done (not ENOENT) */
	SH_ASSERT_OK(meta_done_check(&b0, 0x77));
	c = (struct meta_cmd){ .op = META_OP_RENAME,
			       .ver = 1,
			       .parent = META_ROOT_INO,
			       .parent2 = META_ROOT_INO,
			       .tag = 0x77 };
	strcpy(c.name, src);
	strcpy(c.name2, dst);
	meta_cmd_apply(&b0, &c, &r);
	SH_ASSERT_OK(r.status);
	c.tag = 0x78; /* another request: two phases again (whose first finds no source) */
	meta_cmd_apply(&b0, &c, &r);
	SH_ASSERT_EQ(r.status, -EXDEV);
	meta_txn_abort(b0.t);
	meta_db_close(a.db);
}

/* One tagged command through the stack, as a leader would after a dry run (meta_txn_wrote). */
static int
apply_tagged(struct replica *a, struct meta_cmd *c, bool *wrote)
{
	struct meta_bucket b = { .bucket = 0, .nbuckets = NB };
	struct meta_result *r = sh_calloc(1, sizeof(*r));
	int rc;

	SH_ASSERT_OK(meta_txn_begin(a->db, true, &b.t));
	meta_cmd_apply(&b, c, r);
	rc = r->status;
	*wrote = meta_txn_wrote(b.t);
	if (rc < 0)
		meta_txn_abort(b.t);
	else
		SH_ASSERT_OK(meta_txn_commit(b.t));
	sh_free(r);
	return rc;
}

/*
 * A remove, rename or link whose answer was lost comes again with the same
 * tag: it is answered with success and changes nothing, where an untagged
 * retry says ENOENT or EEXIST; across two buckets the decision records it.
 * Tags are forgotten oldest first.
 */
TEST(meta_cmd_tagged_retries_are_done)
{
	struct replica a;
	struct meta_cmd c = { .op = META_OP_MKROOT, .ver = 1, .mode = 0755, .now = 1 };
	struct meta_result r;
	struct meta_dentry d;
	uint64_t file;
	bool wrote;
	unsigned n;

	open_replica(&a, "tags");
	apply(&a, &c, &r);
	SH_ASSERT_OK(r.status);
	c = (struct meta_cmd){ .op = META_OP_CREATE,
			       .ver = 1,
			       .type = META_REG,
			       .mode = 0644,
			       .parent = META_ROOT_INO,
			       .now = 2,
			       .name = "a" };
	apply(&a, &c, &r);
	SH_ASSERT_OK(r.status);
	file = r.dentry.ino;

	/* link a -> b, twice with one tag, then once more with another */
	c = (struct meta_cmd){ .op = META_OP_LINK,
			       .ver = 2,
			       .type = META_REG,
			       .parent = META_ROOT_INO,
			       .ino = file,
			       .now = 100,
			       .tag = 0x1001,
			       .name = "b" };
	SH_ASSERT_OK(apply_tagged(&a, &c, &wrote));
	SH_ASSERT(wrote);
	SH_ASSERT_OK(apply_tagged(&a, &c, &wrote));
	SH_ASSERT(!wrote); /* answered without a proposal */
	c.tag = 0x1003;
	SH_ASSERT_EQ(apply_tagged(&a, &c, &wrote), -EEXIST);

	/* an xattr created, then removed: each twice with its tag */
	c = (struct meta_cmd){ .op = META_OP_SETXATTR,
			       .ver = 2,
			       .ino = file,
			       .flags = META_XATTR_CREATE,
			       .now = 150,
			       .tag = 0x1501,
			       .name = "user.k",
			       .data = (const uint8_t *)"v",
			       .dlen = 1 };
	SH_ASSERT_OK(apply_tagged(&a, &c, &wrote));
	SH_ASSERT_OK(apply_tagged(&a, &c, &wrote));
	SH_ASSERT(!wrote);
	c.tag = 0x1502;
	SH_ASSERT_EQ(apply_tagged(&a, &c, &wrote), -EEXIST);
	c = (struct meta_cmd){ .op = META_OP_REMOVEXATTR,
			       .ver = 2,
			       .ino = file,
			       .now = 160,
			       .tag = 0x1601,
			       .name = "user.k" };
	SH_ASSERT_OK(apply_tagged(&a, &c, &wrote));
	SH_ASSERT_OK(apply_tagged(&a, &c, &wrote));
	c.tag = 0x1602;
	SH_ASSERT_EQ(apply_tagged(&a, &c, &wrote), -ENODATA);

	/* rename b -> c */
	c = (struct meta_cmd){ .op = META_OP_RENAME,
			       .ver = 3,
			       .parent = META_ROOT_INO,
			       .parent2 = META_ROOT_INO,
			       .now = 200,
			       .tag = 0x2001,
			       .name = "b",
			       .name2 = "c" };
	SH_ASSERT_OK(apply_tagged(&a, &c, &wrote));
	SH_ASSERT_OK(apply_tagged(&a, &c, &wrote));
	SH_ASSERT(!wrote);
	c.tag = 0;
	SH_ASSERT_EQ(apply_tagged(&a, &c, &wrote), -ENOENT);

	/* remove c */
	c = (struct meta_cmd){ .op = META_OP_REMOVE,
			       .ver = 4,
			       .parent = META_ROOT_INO,
			       .now = 300,
			       .tag = 0x3001,
			       .name = "c" };
	SH_ASSERT_OK(apply_tagged(&a, &c, &wrote));
	SH_ASSERT_OK(apply_tagged(&a, &c, &wrote));
	SH_ASSERT(!wrote);
	{
		struct meta_bucket b = { .bucket = 0, .nbuckets = NB, .ver = 10 };

		SH_ASSERT_OK(meta_txn_begin(a.db, true, &b.t));
		SH_ASSERT_EQ(meta_lookup(&b, META_ROOT_INO, "c", 1, &d), -ENOENT);
		SH_ASSERT_OK(meta_lookup(&b, META_ROOT_INO, "a", 1, &d));
		/* forgotten oldest first: before 250 takes the link's, the xattrs' and the
		 * rename's */
		SH_ASSERT_OK(meta_done_forget(&b, 250, true, &n));
		SH_ASSERT_EQ(n, 4);
		SH_ASSERT_OK(meta_done_check(&b, 0x1001));
		SH_ASSERT_OK(meta_done_forget(&b, 250, false, &n));
		SH_ASSERT_EQ(meta_done_check(&b, 0x1001), -ENOENT);
		SH_ASSERT_EQ(meta_done_check(&b, 0x2001), -ENOENT);
		SH_ASSERT_OK(meta_done_check(&b, 0x3001));
		SH_ASSERT_OK(meta_done_forget(&b, 250, true, &n));
		SH_ASSERT_EQ(n, 0);
		SH_ASSERT_OK(meta_txn_commit(b.t));
	}
	/* forgotten, a retry is a new request again */
	c = (struct meta_cmd){ .op = META_OP_RENAME,
			       .ver = 11,
			       .parent = META_ROOT_INO,
			       .parent2 = META_ROOT_INO,
			       .now = 400,
			       .tag = 0x2001,
			       .name = "b",
			       .name2 = "c" };
	SH_ASSERT_EQ(apply_tagged(&a, &c, &wrote), -ENOENT);
	meta_db_close(a.db);
}

/* The tables: numbers as the logs and the wire hold them, dense, each named once. */
TEST(meta_op_and_kind_tables)
{
	SH_ASSERT_EQ(META_OP_CREATE, 2);
	SH_ASSERT_EQ(META_OP_DELTAS, 24);
	SH_ASSERT_EQ(META_OP_RELOCATE, 28);
	SH_ASSERT_STREQ(meta_op_name(META_OP_DELTAS), "delta_batch");
	SH_ASSERT_NULL(meta_op_name(0));
	SH_ASSERT_NULL(meta_op_name(META_OP_MAX));
	for (unsigned op = 1; op < META_OP_MAX; op++) {
		SH_ASSERT_NOT_NULL(meta_op_name(op));
		for (unsigned k = 1; k < op; k++)
			SH_ASSERT_MSG(strcmp(meta_op_name(op), meta_op_name(k)) != 0,
				      "ops %u and %u are both %s", k, op, meta_op_name(op));
	}
	SH_ASSERT_EQ(MP_HOLD, 16);
	SH_ASSERT_EQ(MP_REPAIR, 18);
	SH_ASSERT_EQ(MP_FORGET, 19);
	SH_ASSERT_STREQ(mp_kind_name(MP_FORGET), "forget");
	SH_ASSERT_STREQ(mp_kind_name(MP_LOOKUP), "lookup");
	SH_ASSERT_NULL(mp_kind_name(MP_KIND_MAX));
	for (unsigned k = 1; k < MP_KIND_MAX; k++)
		SH_ASSERT_NOT_NULL(mp_kind_name(k));
}

/* A rename's state carries the branch it renames in; one recorded before branches reads 0. */
TEST(meta_rename2_carries_its_branch)
{
	struct meta_rename2 r = { .id = 9, .oparent = 1, .nparent = 1, .tag = 5, .branch = 3 },
			    back;
	struct sh_enc e;

	strcpy(r.oname, "a");
	strcpy(r.nname, "b");
	sh_enc_init(&e);
	SH_ASSERT_OK(meta_rename2_encode(&e, &r));
	SH_ASSERT_OK(meta_rename2_decode(e.p, e.len, &back));
	SH_ASSERT_EQ(back.branch, 3u);
	SH_ASSERT_EQ(back.tag, 5u);
	SH_ASSERT_OK(meta_rename2_decode(e.p, e.len - 2, &back)); /* before branches */
	SH_ASSERT_EQ(back.branch, 0u);
	SH_ASSERT_EQ(back.tag, 5u);
	sh_enc_fini(&e);
}
