// SPDX-License-Identifier: Apache-2.0
/*
 * The dedup index: claims hold entries until the extents that use them are
 * committed (or found dead), references come and go as deltas from the
 * files' buckets, an entry nothing holds goes with its stripe.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../../../src/data/reduce.h"
#include "meta_apply.h"

#define NB  2
#define SEC 1000000000ull

struct fx {
	struct meta_db *db;
	uint64_t ino[2]; /* two files of bucket 0 */
	char name[2][META_NAME_MAX + 1];
	uint8_t fp[META_FP_LEN];
	uint16_t fb; /* the fingerprint's bucket: 1 */
};

static int
apply(struct fx *f, uint16_t bucket, struct meta_cmd *c, struct meta_result *r)
{
	return meta_test_apply(f->db, NB, bucket, c, r);
}

#define LOOK(f, bk, b, body) META_LOOK((f)->db, NB, bk, b, body)

static void
fx_open(struct fx *f)
{
	char path[512];
	struct meta_cmd c = { .op = META_OP_MKROOT, .mode = 0755, .now = 1 };
	struct meta_result r;

	snprintf(path, sizeof(path), "%s/dedup.mdb", sh_test_dir());
	unlink(path);
	SH_ASSERT_OK(meta_db_open(path, 64ull << 20, META_DB_NOSYNC, &f->db));
	SH_ASSERT_OK(apply(f, 0, &c, &r));
	/* two names whose entries (and so inodes) are in bucket 0 */
	for (int k = 0, i = 0; i < 2; k++) {
		SH_ASSERT_LT(k, 64);
		c = (struct meta_cmd){ .op = META_OP_CREATE,
				       .type = META_REG,
				       .mode = 0644,
				       .now = 2,
				       .parent = META_ROOT_INO };
		snprintf(c.name, sizeof(c.name), "f%d", k);
		if (apply(f, 0, &c, &r) != 0)
			continue;
		snprintf(f->name[i], sizeof(f->name[i]), "%s", c.name);
		f->ino[i] = r.dentry.ino;
		SH_ASSERT_EQ(meta_ino_bucket(f->ino[i]), 0);
		i++;
	}
	memset(f->fp, 0xA5, sizeof(f->fp));
	f->fp[3] = 1; /* 0xA5A5A501 is odd: bucket 1 of 2 */
	f->fb = meta_fp_bucket(f->fp, NB);
	SH_ASSERT_EQ(f->fb, 1);
}

static struct meta_extent
block_at(struct fx *f, uint64_t stripe)
{
	struct meta_extent e = { .len = 65536,
				 .stripe = stripe,
				 .d = 4,
				 .p = 2,
				 .frag = 16384,
				 .enc = REDUCE_RAW,
				 .slen = 65536,
				 .blen = 65536,
				 .dedup = true };

	memcpy(e.fp, f->fp, META_FP_LEN);
	for (int i = 0; i < 6; i++)
		e.targets[i] = 100 + (uint64_t)i;
	return e;
}

/* A claim of the block at its bucket; stored: this writer stored it at stripe. */
static int
claim(struct fx *f, uint64_t id, bool stored, uint64_t stripe, uint64_t now,
      struct meta_extent *where)
{
	struct meta_dedup_item it = { .has_loc = stored };
	struct meta_cmd c = { .op = META_OP_DEDUP_CLAIM, .now = now };
	struct meta_result r;
	struct sh_enc e;
	int rc;

	memcpy(it.fp, f->fp, META_FP_LEN);
	if (stored)
		it.loc = block_at(f, stripe);
	sh_enc_init(&e);
	SH_ASSERT_OK(meta_claim_encode(&e, id, 0, &it, 1));
	c.data = e.p;
	c.dlen = e.len;
	rc = apply(f, f->fb, &c, &r);
	sh_enc_fini(&e);
	if (rc == 0) {
		SH_ASSERT_EQ(r.ndedup, 1u);
		SH_ASSERT_EQ(r.aux, now);
		*where = r.dedup[0].loc;
	}
	return rc;
}

/* Map the block at offset 0 of file i, consuming claim id (made at when). */
static int
map(struct fx *f, int i, const struct meta_extent *where, uint64_t id, uint64_t when, uint64_t now)
{
	struct meta_extent e = *where;
	struct meta_claim_ref cl = { .bucket = f->fb, .claim = id, .when = when };
	struct meta_cmd c = {
		.op = META_OP_EXTENT, .ino = f->ino[i], .flags = META_EXTENT_CLAIMS, .now = now
	};
	struct meta_result r;
	struct sh_enc enc;
	int rc;

	e.off = 0;
	sh_enc_init(&enc);
	SH_ASSERT_OK(meta_claims_encode(&enc, &e, 1, &cl, 1));
	c.data = enc.p;
	c.dlen = enc.len;
	rc = apply(f, 0, &c, &r);
	sh_enc_fini(&enc);
	if (rc == 0)
		SH_ASSERT_EQ(r.queued, 2u); /* the ref, then the claim's end */
	return rc;
}

static int
on_delta(void *arg, const struct meta_delta *d)
{
	struct meta_delta *out = arg;

	*out = *d;
	return 1;
}

/* Ship bucket 0's outbox to bucket 1 in order (twice each: a resend changes nothing). */
static unsigned
ship(struct fx *f)
{
	unsigned n = 0;

	for (;;) {
		struct meta_delta d = { 0 };
		struct meta_cmd c = { .op = META_OP_DELTA, .now = 5 };
		struct meta_result r;

		LOOK(f, 0, b, SH_ASSERT_OK(meta_outbox(&b, on_delta, &d)));
		if (d.seq == 0)
			return n;
		c.delta = d;
		SH_ASSERT_OK(apply(f, d.to, &c, &r));
		SH_ASSERT_OK(apply(f, d.to, &c, &r));
		c = (struct meta_cmd){ .op = META_OP_OUTBOX_ACK, .upto = d.seq, .now = 5 };
		SH_ASSERT_OK(apply(f, 0, &c, &r));
		n++;
	}
}

static void
entry(struct fx *f, int want_rc, uint64_t refs, uint64_t holds)
{
	struct meta_dedup_entry en = { 0 };
	int rc;

	LOOK(f, f->fb, b, rc = meta_dedup_get(&b, f->fp, &en));
	SH_ASSERT_EQ(rc, want_rc);
	if (rc == 0) {
		SH_ASSERT_EQ(en.refs, refs);
		SH_ASSERT_EQ(en.holds, holds);
	}
}

static int
count_reclaims(void *arg, const struct meta_extent *e)
{
	(void)e;
	(*(unsigned *)arg)++;
	return 0;
}

static int
count_claims(void *arg, uint64_t claim, uint16_t owner, uint64_t when)
{
	(void)claim;
	(void)owner;
	(void)when;
	(*(unsigned *)arg)++;
	return 0;
}

TEST(meta_dedup_two_files_one_copy_then_freed)
{
	struct fx f;
	struct meta_extent where, again;
	struct meta_usage u;
	uint64_t stripe = (uint64_t)1 << 48 | 77;
	unsigned nrec = 0;

	fx_open(&f);
	/* writer 1: not there; stores it; enters it (held); maps it */
	SH_ASSERT_OK(claim(&f, 11, false, 0, 10 * SEC, &where));
	SH_ASSERT_EQ(where.stripe, 0);
	SH_ASSERT_OK(claim(&f, 11, true, stripe, 10 * SEC, &where));
	SH_ASSERT_EQ(where.stripe, stripe);
	entry(&f, 0, 0, 1);
	LOOK(&f, f.fb, b, SH_ASSERT_EQ(meta_stripe_known(&b, stripe), 1));
	SH_ASSERT_OK(map(&f, 0, &where, 11, 10 * SEC, 11 * SEC));
	entry(&f, 0, 0, 1); /* the ref is on its way; the hold stays until it is there */
	SH_ASSERT_EQ(ship(&f), 2u);
	entry(&f, 0, 1, 0);
	/* writer 2 (another file) finds it: held, mapped, nothing stored */
	SH_ASSERT_OK(claim(&f, 12, false, 0, 20 * SEC, &again));
	SH_ASSERT_EQ(again.stripe, stripe);
	entry(&f, 0, 1, 1);
	SH_ASSERT_OK(map(&f, 1, &again, 12, 20 * SEC, 21 * SEC));
	ship(&f);
	entry(&f, 0, 2, 0);
	LOOK(&f, f.fb, b, SH_ASSERT_OK(meta_usage_get(&b, &u)));
	SH_ASSERT_EQ(u.unique, 65536); /* stored once */
	SH_ASSERT_EQ(u.data, 65536);
	LOOK(&f, 0, b, SH_ASSERT_OK(meta_usage_get(&b, &u)));
	SH_ASSERT_EQ(u.mapped, 2 * 65536); /* mapped twice */
	SH_ASSERT_EQ(u.unique, 0);
	/* the first file cut in the middle of the block: head and tail both refer to it */
	{
		struct meta_txn *t;
		struct meta_bucket b;

		SH_ASSERT_OK(meta_txn_begin(f.db, true, &t));
		b = (struct meta_bucket){ .t = t, .bucket = 0, .nbuckets = NB, .ver = 1 };
		SH_ASSERT_OK(meta_extent_punch(&b, f.ino[0], 1000, 2000));
		SH_ASSERT_OK(meta_txn_commit(t));
	}
	ship(&f);
	entry(&f, 0, 3, 0);
	/* both files gone: every reference goes, then the entry and its stripe */
	for (int i = 0; i < 2; i++) {
		struct meta_cmd c = { .op = META_OP_REMOVE, .parent = META_ROOT_INO, .now = 30 };
		struct meta_result r;

		snprintf(c.name, sizeof(c.name), "%s", f.name[i]);
		SH_ASSERT_OK(apply(&f, 0, &c, &r));
		/* nobody holds it open: its leader drops the orphan */
		c = (struct meta_cmd){ .op = META_OP_ORPHAN_DROP, .ino = f.ino[i], .now = 31 };
		SH_ASSERT_OK(apply(&f, 0, &c, &r));
	}
	entry(&f, 0, 3, 0);
	SH_ASSERT_EQ(ship(&f), 3u);
	entry(&f, -ENOENT, 0, 0);
	LOOK(&f, f.fb, b, SH_ASSERT_OK(meta_reclaims(&b, count_reclaims, &nrec)));
	SH_ASSERT_EQ(nrec, 1u);
	LOOK(&f, f.fb, b, SH_ASSERT_OK(meta_usage_get(&b, &u)));
	SH_ASSERT_EQ(u.unique + u.data + u.phys, 0);
	meta_db_close(f.db);
}

/* A new file's first claim (its block is nowhere) writes nothing: the group answers it like a
 * read, without a Raft commit; a claim that holds a block writes its record. */
TEST(meta_dedup_claim_of_an_unknown_block_writes_nothing)
{
	struct fx f;
	struct meta_dedup_item it = { .has_loc = false };
	struct meta_cmd c = { .op = META_OP_DEDUP_CLAIM, .now = 5 * SEC };
	struct meta_result r;
	struct meta_extent where;
	struct meta_txn *t;
	struct meta_bucket b;
	struct sh_enc e;

	fx_open(&f);
	memcpy(it.fp, f.fp, META_FP_LEN);
	sh_enc_init(&e);
	SH_ASSERT_OK(meta_claim_encode(&e, 31, 0, &it, 1));
	c.data = e.p;
	c.dlen = e.len;
	c.ver = 1;
	SH_ASSERT_OK(meta_txn_begin(f.db, true, &t));
	b = (struct meta_bucket){ .t = t, .bucket = f.fb, .nbuckets = NB, .ver = 1 };
	meta_cmd_apply(&b, &c, &r);
	SH_ASSERT_OK(r.status);
	SH_ASSERT_EQ(r.ndedup, 1u);
	SH_ASSERT_EQ(r.dedup[0].loc.stripe, 0);
	SH_ASSERT_EQ(r.aux, 5 * SEC);
	SH_ASSERT(!meta_txn_wrote(t));
	meta_txn_abort(t);
	sh_enc_fini(&e);
	/* the same claim once the block is entered holds it: a record, a write */
	SH_ASSERT_OK(claim(&f, 32, true, (uint64_t)1 << 48 | 9, 6 * SEC, &where));
	SH_ASSERT_OK(claim(&f, 31, false, 0, 7 * SEC, &where));
	SH_ASSERT_EQ(where.stripe, (uint64_t)1 << 48 | 9);
	entry(&f, 0, 0, 2);
	meta_db_close(f.db);
}

TEST(meta_dedup_dead_claims_are_released_and_refused)
{
	struct fx f;
	struct meta_extent where;
	struct meta_cmd c = { .op = META_OP_DEDUP_KILL, .upto = 21, .now = 100 * SEC };
	struct meta_result r;
	uint64_t stripe = (uint64_t)1 << 48 | 78;
	unsigned nrec = 0, nclaims = 0;

	fx_open(&f);
	/* a writer stores and enters the block, then dies before mapping it */
	SH_ASSERT_OK(claim(&f, 21, false, 0, 10 * SEC, &where));
	SH_ASSERT_OK(claim(&f, 21, true, stripe, 10 * SEC, &where));
	entry(&f, 0, 0, 1);
	/* its bucket finds the claim old, asks the file's bucket: never committed */
	LOOK(&f, f.fb, b, SH_ASSERT_OK(meta_dedup_claims(&b, 80 * SEC, count_claims, &nclaims)));
	SH_ASSERT_EQ(nclaims, 1u);
	SH_ASSERT_OK(apply(&f, 0, &c, &r));
	SH_ASSERT_EQ(r.aux, 0);
	/* the late writer's mapping is refused from now on, even within the deadline */
	SH_ASSERT_ERR(map(&f, 0, &where, 21, 10 * SEC, 11 * SEC), -ETIMEDOUT);
	c = (struct meta_cmd){ .op = META_OP_DEDUP_RELEASE, .upto = 21, .now = 100 * SEC };
	SH_ASSERT_OK(apply(&f, f.fb, &c, &r));
	entry(&f, -ENOENT, 0, 0);
	LOOK(&f, f.fb, b, SH_ASSERT_OK(meta_reclaims(&b, count_reclaims, &nrec)));
	SH_ASSERT_EQ(nrec, 1u);
	/* released twice: nothing more happens */
	SH_ASSERT_OK(apply(&f, f.fb, &c, &r));
	/* a claim older than the commit deadline is refused by the file's bucket */
	SH_ASSERT_OK(claim(&f, 22, false, 0, 200 * SEC, &where));
	SH_ASSERT_OK(claim(&f, 22, true, stripe + 1, 200 * SEC, &where));
	SH_ASSERT_ERR(map(&f, 0, &where, 22, 200 * SEC, 200 * SEC + META_CLAIM_COMMIT_NS + 1),
		      -ETIMEDOUT);
	/* one committed in time: asked about before its end arrives, it says committed */
	SH_ASSERT_OK(map(&f, 0, &where, 22, 200 * SEC, 201 * SEC));
	c = (struct meta_cmd){ .op = META_OP_DEDUP_KILL, .upto = 22, .now = 300 * SEC };
	SH_ASSERT_OK(apply(&f, 0, &c, &r));
	SH_ASSERT_EQ(r.aux, 1);
	ship(&f);
	entry(&f, 0, 1, 0);
	/* refused claims are forgotten once old (then a late commit is refused for its age) */
	{
		unsigned n = 0;

		c = (struct meta_cmd){ .op = META_OP_DEDUP_FORGET, .upto = 100 * SEC };
		SH_ASSERT_OK(apply(&f, 0, &c, &r));
		LOOK(&f, 0, b, SH_ASSERT_OK(meta_dedup_forget_refused(&b, UINT64_MAX, true, &n)));
		SH_ASSERT_EQ(n, 1u); /* refused at 100 s: not before 100 s */
		c = (struct meta_cmd){ .op = META_OP_DEDUP_FORGET, .upto = 101 * SEC };
		SH_ASSERT_OK(apply(&f, 0, &c, &r));
		LOOK(&f, 0, b, SH_ASSERT_OK(meta_dedup_forget_refused(&b, UINT64_MAX, true, &n)));
		SH_ASSERT_EQ(n, 0u);
		SH_ASSERT_ERR(map(&f, 0, &where, 21, 10 * SEC, 4000 * SEC), -ETIMEDOUT);
	}
	meta_db_close(f.db);
}
