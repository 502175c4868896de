// SPDX-License-Identifier: Apache-2.0
/*
 * The dedup index's counts under everything that can happen between a
 * writer and the buckets, seeded: several writers at once (racing to store
 * the same new block), writers killed at every step, deltas shipped late,
 * in any order between buckets and twice (a lost ack), overwrites and
 * truncates that split and drop extents, clocks jumping past the commit
 * deadline and the claim age, and the reconciliation of old claims.
 * Checked after every step: no block an extent maps is ever freed (its
 * entry is there and holds its stripe). Checked at the end, once every
 * file is emptied and everything shipped and reconciled: nothing is left
 * (no entry, claim or stripe; every bucket's usage back to zero) — so
 * nothing leaks either.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../../../src/base/rand.h"
#include "../../../src/data/reduce.h"
#include "../../unit/meta/meta_apply.h"

#define NB	4
#define NFILES	4
#define NFP	6
#define SLOTS	4 /* blocks per file */
#define BLK	65536
#define WRITERS 6
#define STEPS	400
#define SEEDS	60
#define SEC	1000000000ull
#define AGE	(60 * SEC)

struct writer {
	bool busy;
	int file, fp, slot, stage; /* 0: ask; 1: store and enter; 2: map */
	uint64_t claim, when;
	struct meta_extent loc;
};

/* What the runs did, so that a run that does nothing cannot pass quietly. */
static struct {
	unsigned maps, refused, found, stored, raced, killed, shipped, punches;
} tally;

struct world {
	struct meta_db *db;
	struct sh_rand r;
	uint64_t seed, now, next_id;
	uint64_t ino[NFILES];
	uint8_t fp[NFP][META_FP_LEN];
	struct writer w[WRITERS];
};

static int
apply(struct world *w, uint16_t bucket, struct meta_cmd *c, struct meta_result *r)
{
	c->now = w->now;
	return meta_test_apply(w->db, NB, bucket, c, r);
}

#define LOOK(w, bk, b, body) META_LOOK((w)->db, NB, bk, b, body)

static void
setup(struct world *w, uint64_t seed)
{
	char path[512];
	struct meta_cmd c = { .op = META_OP_MKROOT, .mode = 0755 };
	struct meta_result r;

	memset(w, 0, sizeof(*w));
	w->seed = seed;
	w->now = 1000 * SEC;
	w->next_id = 1;
	sh_rand_seed(&w->r, seed);
	snprintf(path, sizeof(path), "%s/dedup-%llu.mdb", sh_test_dir(), (unsigned long long)seed);
	unlink(path);
	SH_ASSERT_OK(meta_db_open(path, 256ull << 20, META_DB_NOSYNC, &w->db));
	SH_ASSERT_OK(apply(w, 0, &c, &r));
	/* files wherever their names put them: their buckets ship to the fingerprints' */
	for (int k = 0, i = 0; i < NFILES; k++) {
		c = (struct meta_cmd){ .op = META_OP_CREATE,
				       .type = META_REG,
				       .mode = 0644,
				       .parent = META_ROOT_INO };
		snprintf(c.name, sizeof(c.name), "file%d", k);
		for (uint16_t b = 0; b < NB; b++)
			if (apply(w, b, &c, &r) == 0) {
				w->ino[i++] = r.dentry.ino;
				break;
			}
	}
	for (int k = 0; k < NFP; k++) {
		sh_rand_fill(&w->r, w->fp[k], META_FP_LEN);
		w->fp[k][3] = (uint8_t)k; /* spread over the buckets, some with the files */
		w->fp[k][0] = w->fp[k][1] = w->fp[k][2] = 0;
	}
}

static uint16_t
fpb(struct world *w, int k)
{
	return meta_fp_bucket(w->fp[k], NB);
}

/* ---- the invariant: what an extent maps is never freed ---- */

struct check {
	struct world *w;
};

static int
on_entry_of(struct world *w, const struct meta_extent *e)
{
	struct meta_dedup_entry en;
	uint16_t fb = meta_fp_bucket(e->fp, NB);
	int rc, known;

	LOOK(w, fb, b, {
		rc = meta_dedup_get(&b, e->fp, &en);
		known = meta_stripe_known(&b, e->stripe);
	});
	SH_ASSERT_MSG(rc == 0, "seed %llu: a mapped block's entry is gone (%d)",
		      (unsigned long long)w->seed, rc);
	SH_ASSERT_MSG(en.loc.stripe == e->stripe && known == 1,
		      "seed %llu: a mapped block's stripe is not held",
		      (unsigned long long)w->seed);
	return 0;
}

static void
check_mapped(struct world *w)
{
	for (int i = 0; i < NFILES; i++) {
		struct meta_extent ex[64];
		unsigned n = 0;
		uint16_t bk = meta_ino_bucket(w->ino[i]);

		LOOK(w, bk, b,
		     SH_ASSERT_OK(meta_extents(&b, w->ino[i], 0, UINT64_MAX, ex, 64, &n)));
		for (unsigned k = 0; k < n; k++)
			if (ex[k].dedup)
				on_entry_of(w, &ex[k]);
	}
}

/* ---- steps ---- */

static int
claim(struct world *w, struct writer *wr, bool stored)
{
	struct meta_dedup_item it = { .has_loc = stored };
	struct meta_cmd c = { .op = META_OP_DEDUP_CLAIM };
	struct meta_result r;
	struct sh_enc e;
	int rc;

	memcpy(it.fp, w->fp[wr->fp], META_FP_LEN);
	it.loc = wr->loc;
	sh_enc_init(&e);
	SH_ASSERT_OK(meta_claim_encode(&e, wr->claim, meta_ino_bucket(w->ino[wr->file]), &it, 1));
	c.data = e.p;
	c.dlen = e.len;
	rc = apply(w, fpb(w, wr->fp), &c, &r);
	sh_enc_fini(&e);
	SH_ASSERT_OK(rc);
	if (wr->when == 0)
		wr->when = r.aux;
	return r.dedup[0].loc.stripe != 0 ? (wr->loc = r.dedup[0].loc, 1) : 0;
}

static void
step_writer(struct world *w, struct writer *wr)
{
	struct meta_result r;

	if (wr->stage == 0) {
		wr->claim = w->next_id++;
		wr->when = 0;
		wr->stage = claim(w, wr, false) ? 2 : 1;
		tally.found += wr->stage == 2;
	} else if (wr->stage == 1) {
		/* stored in a stripe of its own (named by the entry's bucket), then entered */
		wr->loc =
		    (struct meta_extent){ .len = BLK,
					  .stripe = (uint64_t)fpb(w, wr->fp) << 48 | w->next_id++,
					  .d = 4,
					  .p = 2,
					  .frag = BLK / 4,
					  .enc = REDUCE_RAW,
					  .slen = BLK,
					  .blen = BLK,
					  .dedup = true };
		memcpy(wr->loc.fp, w->fp[wr->fp], META_FP_LEN);
		{
			uint64_t mine = wr->loc.stripe;

			SH_ASSERT_EQ(claim(w, wr, true), 1);
			tally.stored++;
			tally.raced += wr->loc.stripe != mine; /* another writer's copy was first */
		}
		wr->stage = 2;
	} else {
		struct meta_extent e = wr->loc;
		struct meta_claim_ref cl = { .bucket = fpb(w, wr->fp),
					     .claim = wr->claim,
					     .when = wr->when };
		struct meta_cmd c = { .op = META_OP_EXTENT,
				      .ino = w->ino[wr->file],
				      .flags = META_EXTENT_CLAIMS };
		struct sh_enc enc;
		int rc;

		e.off = (uint64_t)wr->slot * BLK;
		sh_enc_init(&enc);
		SH_ASSERT_OK(meta_claims_encode(&enc, &e, 1, &cl, 1));
		c.data = enc.p;
		c.dlen = enc.len;
		rc = apply(w, meta_ino_bucket(w->ino[wr->file]), &c, &r);
		sh_enc_fini(&enc);
		SH_ASSERT_MSG(rc == 0 || rc == -ETIMEDOUT, "seed %llu: map: %d",
			      (unsigned long long)w->seed, rc);
		tally.maps += rc == 0;
		tally.refused += rc != 0;
		wr->busy = false; /* mapped, or refused (a real writer starts over) */
	}
}

static int
first_delta(void *arg, const struct meta_delta *d)
{
	*(struct meta_delta *)arg = *d;
	return 1;
}

/* Ship the first delta of bucket's outbox (in order per bucket); ack it unless lost. */
static bool
ship_one(struct world *w, uint16_t bucket, bool lose_ack)
{
	struct meta_delta d = { 0 };
	struct meta_cmd c = { .op = META_OP_DELTA };
	struct meta_result r;

	LOOK(w, bucket, b, SH_ASSERT_OK(meta_outbox(&b, first_delta, &d)));
	if (d.seq == 0)
		return false;
	c.delta = d;
	tally.shipped++;
	SH_ASSERT_MSG(apply(w, d.to, &c, &r) == 0, "seed %llu: a delta failed: %d",
		      (unsigned long long)w->seed, r.status);
	if (!lose_ack) {
		c = (struct meta_cmd){ .op = META_OP_OUTBOX_ACK, .upto = d.seq };
		SH_ASSERT_OK(apply(w, bucket, &c, &r));
	}
	return true;
}

struct oldc {
	struct world *w;
	uint16_t bucket;
	uint64_t claims[64];
	uint16_t owners[64];
	unsigned n;
};

static int
on_old(void *arg, uint64_t claim, uint16_t owner, uint64_t when)
{
	struct oldc *o = arg;

	(void)when;
	if (o->n == 64)
		return 1;
	o->claims[o->n] = claim;
	o->owners[o->n++] = owner;
	return 0;
}

/*
 * What a bucket's leader does with claims older than the claim age; and
 * with refused claims, forgotten here after 60 s (an hour in shoald): any
 * commit of one is past its 30 s deadline by then.
 */
static void
reconcile(struct world *w)
{
	for (uint16_t bk = 0; bk < NB; bk++) {
		struct oldc o = { .w = w, .bucket = bk };
		struct meta_cmd f = { .op = META_OP_DEDUP_FORGET, .upto = w->now - AGE };
		struct meta_result fr;

		SH_ASSERT_OK(apply(w, bk, &f, &fr));

		LOOK(w, bk, b, SH_ASSERT_OK(meta_dedup_claims(&b, w->now - AGE, on_old, &o)));
		for (unsigned i = 0; i < o.n; i++) {
			struct meta_cmd c = { .op = META_OP_DEDUP_KILL, .upto = o.claims[i] };
			struct meta_result r;

			SH_ASSERT_OK(apply(w, o.owners[i], &c, &r));
			if (r.aux == 0) {
				c = (struct meta_cmd){ .op = META_OP_DEDUP_RELEASE,
						       .upto = o.claims[i] };
				SH_ASSERT_OK(apply(w, bk, &c, &r));
				tally.killed++;
			}
		}
	}
}

static void
punch(struct world *w, int file, uint64_t a, uint64_t b)
{
	struct meta_txn *t;
	struct meta_bucket mb;

	SH_ASSERT_OK(meta_txn_begin(w->db, true, &t));
	mb = (struct meta_bucket){
		.t = t, .bucket = meta_ino_bucket(w->ino[file]), .nbuckets = NB, .ver = 1
	};
	SH_ASSERT_OK(meta_extent_punch(&mb, w->ino[file], a, b));
	SH_ASSERT_OK(meta_txn_commit(t));
}

static void
step(struct world *w)
{
	uint64_t x = sh_rand_below(&w->r, 100);

	if (x < 15) {
		/* a writer starts: a block (one of a few contents) into a file's slot */
		for (int i = 0; i < WRITERS; i++)
			if (!w->w[i].busy) {
				w->w[i] = (struct writer){
					.busy = true,
					.file = (int)sh_rand_below(&w->r, NFILES),
					.fp = (int)sh_rand_below(&w->r, NFP),
					.slot = (int)sh_rand_below(&w->r, SLOTS),
				};
				break;
			}
	} else if (x < 50) {
		struct writer *wr = &w->w[sh_rand_below(&w->r, WRITERS)];

		if (wr->busy)
			step_writer(w, wr);
	} else if (x < 54) {
		w->w[sh_rand_below(&w->r, WRITERS)].busy = false; /* kill -9 of a writer */
	} else if (x < 78) {
		ship_one(w, (uint16_t)sh_rand_below(&w->r, NB), sh_rand_chance(&w->r, 0.2));
	} else if (x < 86) {
		uint64_t a = sh_rand_below(&w->r, SLOTS * BLK), len = sh_rand_below(&w->r, 2 * BLK);

		punch(w, (int)sh_rand_below(&w->r, NFILES), a, a + len + 1);
		tally.punches++;
	} else if (x < 94) {
		w->now += sh_rand_below(&w->r, 40 * SEC); /* time passes, sometimes a lot */
	} else {
		reconcile(w);
	}
}

static int
count_entries(void *arg, const uint8_t *key, size_t klen, const void *val, size_t vlen)
{
	(void)key;
	(void)klen;
	(void)val;
	(void)vlen;
	(*(unsigned *)arg)++;
	return 0;
}

static unsigned
records(struct world *w, uint16_t bk, uint8_t kind)
{
	struct meta_key pk;
	unsigned n = 0;

	meta_key_kind(&pk, bk, kind);
	LOOK(w, bk, b, SH_ASSERT_OK(meta_scan(b.t, &pk, NULL, 0, 1, count_entries, &n)));
	return n;
}

static void
run(uint64_t seed)
{
	struct world w;

	setup(&w, seed);
	for (int s = 0; s < STEPS; s++) {
		step(&w);
		check_mapped(&w);
	}
	/* the end: writers gone, files emptied, everything shipped and reconciled */
	for (int i = 0; i < WRITERS; i++)
		w.w[i].busy = false;
	for (int i = 0; i < NFILES; i++)
		punch(&w, i, 0, UINT64_MAX);
	for (int round = 0; round < 3; round++) {
		for (uint16_t bk = 0; bk < NB; bk++)
			while (ship_one(&w, bk, false))
				;
		w.now += 2 * AGE;
		reconcile(&w);
	}
	for (uint16_t bk = 0; bk < NB; bk++) {
		struct meta_usage u;

		SH_ASSERT_MSG(
		    records(&w, bk, META_K_DEDUP) == 0 && records(&w, bk, META_K_CLAIM) == 0 &&
			records(&w, bk, META_K_STRIPE) == 0 && records(&w, bk, META_K_OUTBOX) == 0,
		    "seed %llu: bucket %u keeps %u entries, %u claims, %u stripes, %u "
		    "deltas",
		    (unsigned long long)seed, bk, records(&w, bk, META_K_DEDUP),
		    records(&w, bk, META_K_CLAIM), records(&w, bk, META_K_STRIPE),
		    records(&w, bk, META_K_OUTBOX));
		LOOK(&w, bk, b, SH_ASSERT_OK(meta_usage_get(&b, &u)));
		SH_ASSERT_MSG(u.mapped + u.unique + u.data + u.phys == 0,
			      "seed %llu: bucket %u usage left: %llu %llu %llu %llu",
			      (unsigned long long)seed, bk, (unsigned long long)u.mapped,
			      (unsigned long long)u.unique, (unsigned long long)u.data,
			      (unsigned long long)u.phys);
	}
	meta_db_close(w.db);
}

TEST(sim_dedup_counts_never_free_a_mapped_block_nor_leak)
{
	for (uint64_t i = 0; i < SEEDS; i++)
		run(sh_test_seed() * 1000 + i);
	printf("  %d seeds: %u mapped (%u refused as too old), %u found in the index, %u stored "
	       "(%u lost a race), %u dead claims released, %u deltas shipped, %u punches\n",
	       SEEDS, tally.maps, tally.refused, tally.found, tally.stored, tally.raced,
	       tally.killed, tally.shipped, tally.punches);
	SH_ASSERT_EQ(meta_dedup_damaged(), 0);
	/* every path was taken */
	SH_ASSERT(tally.maps > 100 && tally.refused > 0 && tally.found > 50 && tally.raced > 0 &&
		  tally.killed > 0 && tally.punches > 100);
}
