// SPDX-License-Identifier: Apache-2.0
/*
 * Branches of the bucket store (meta_db.h, "Branches"; what writable
 * clones stand on): random writes in branch 0 and in branches based on
 * its kept snapshots, against a model. Every view reads what the model
 * says (meta_get, meta_scan), meta_diff from a branch's base to the branch
 * names what the model says changed, and every stored copy of a value
 * holds exactly one reference (the caller's +1 and -1 around its writes
 * and meta_keep.moved's together), before and after a branch is dropped.
 */
#include "versions_model.h"

#define NKEYS 20
#define NOPS  2500
#define NBR   3	 /* branches 1..NBR */
#define NOBR  -2 /* a key with no record of the branch: it reads the base */
#define NVALS (NOPS * 10 + 10)

struct model {
	struct hist h[NKEYS]; /* branch 0 */
	uint64_t keep[16];    /* branch 0's kept snapshots, ascending */
	unsigned nkeep;
	uint64_t ver;		  /* branch 0's version now */
	uint64_t base[NBR + 1];	  /* 0: the branch is not there */
	uint64_t bseq[NBR + 1];	  /* the branch's version now (its low bits) */
	int bval[NBR + 1][NKEYS]; /* NOBR, -1 (deleted) or a value */
	int refs[NVALS], refs_txn[NVALS];
};

static struct model M;

static int
key_index(const uint8_t *key, size_t klen)
{
	for (int i = 0; i < NKEYS; i++) {
		struct meta_key k;

		key_of(&k, i);
		if (k.len == klen && memcmp(k.b, key, klen) == 0)
			return i;
	}
	SH_ASSERT_MSG(0, "a key never written");
	return -1;
}

static uint64_t
view_of(int br)
{
	return br == 0 ? M.ver : (uint64_t)br << META_BRANCH_SHIFT | M.bseq[br];
}

/* What key i reads in branch br now (br 0: as of version at). */
static int
model_view(int br, int i, uint64_t at)
{
	if (br == 0)
		return model_at(&M.h[i], at);
	return M.bval[br][i] != NOBR ? M.bval[br][i] : model_at(&M.h[i], M.base[br]);
}

static struct model_counts refs_counts = { M.refs_txn, NVALS };

static void
refs_end(bool commit)
{
	for (int v = 0; v < NVALS; v++) {
		if (commit)
			M.refs[v] += M.refs_txn[v];
		M.refs_txn[v] = 0;
	}
}

/* The value k reads as of at, in t, or -1. */
static int
read_in(struct meta_txn *t, const struct meta_key *k, uint64_t at)
{
	size_t len = 0;
	int v = -1, rc = meta_get(t, k, at, &v, sizeof(v), &len);

	if (rc == -ENOENT)
		return -1;
	SH_ASSERT_OK(rc);
	SH_ASSERT_EQ(len, sizeof(v));
	return v;
}

struct scan_got {
	int val[NKEYS];
};

static int
on_scan(void *arg, const uint8_t *key, size_t klen, const void *val, size_t vlen)
{
	struct scan_got *g = arg;
	int i = key_index(key, klen);

	SH_ASSERT_EQ(vlen, sizeof(int));
	SH_ASSERT_EQ(g->val[i], -1); /* once a key */
	memcpy(&g->val[i], val, sizeof(int));
	return 0;
}

/* Branch br (0: as of at) reads what the model says, key by key and by scans. */
static void
check_view(struct meta_db *db, int br, uint64_t at)
{
	int want[NKEYS];
	struct scan_got g;
	struct meta_txn *t;

	if (br != 0)
		at = view_of(br);
	for (int i = 0; i < NKEYS; i++)
		g.val[i] = -1;
	SH_ASSERT_OK(meta_txn_begin(db, false, &t));
	for (uint16_t b = 0; b < MODEL_BUCKETS; b++) {
		struct meta_key pk;

		meta_key_kind(&pk, b, META_K_INODE);
		pk.len = 2; /* the bucket: every kind */
		SH_ASSERT_OK(meta_scan(t, &pk, NULL, 0, at, on_scan, &g));
	}
	for (int i = 0; i < NKEYS; i++) {
		struct meta_key k;
		want[i] = model_view(br, i, at);
		key_of(&k, i);
		SH_ASSERT_MSG(read_in(t, &k, at) == want[i] && g.val[i] == want[i],
			      "branch %d key %d at %#llx: get %d scan %d, want %d (seed %llu)", br,
			      i, (unsigned long long)at, read_in(t, &k, at), g.val[i], want[i],
			      (unsigned long long)sh_test_seed());
	}
	model_check_floor(t, want, NKEYS, at);
	meta_txn_abort(t);
}

struct diff_got {
	int changed[NKEYS], old[NKEYS], new[NKEYS];
};

static int
on_diff(void *arg, const uint8_t *key, size_t klen, const void *old, size_t olen, const void *new,
	size_t nlen)
{
	struct diff_got *d = arg;
	int i = key_index(key, klen);

	d->changed[i]++;
	d->old[i] = d->new[i] = -1;
	if (old != NULL) {
		SH_ASSERT_EQ(olen, sizeof(int));
		memcpy(&d->old[i], old, sizeof(int));
	}
	if (new != NULL) {
		SH_ASSERT_EQ(nlen, sizeof(int));
		memcpy(&d->new[i], new, sizeof(int));
	}
	return 0;
}

/* meta_diff from branch 0 as of v1 to branch br now names what the model says changed. */
static void
check_diff(struct meta_db *db, uint64_t v1, int br)
{
	struct diff_got d = { 0 };
	struct meta_txn *t;

	SH_ASSERT_OK(meta_txn_begin(db, false, &t));
	for (uint16_t b = 0; b < MODEL_BUCKETS; b++) {
		struct meta_key pk;

		meta_key_kind(&pk, b, META_K_INODE);
		pk.len = 2;
		SH_ASSERT_OK(
		    meta_diff(t, &pk, NULL, 0, v1, view_of(br), 0, NULL, NULL, on_diff, &d));
	}
	meta_txn_abort(t);
	for (int i = 0; i < NKEYS; i++) {
		int was = model_at(&M.h[i], v1), is = model_view(br, i, 0);

		SH_ASSERT_MSG(d.changed[i] == (was != is),
			      "key %d from %llu to branch %d: %d -> %d, meta_diff said %d times "
			      "(seed %llu)",
			      i, (unsigned long long)v1, br, was, is, d.changed[i],
			      (unsigned long long)sh_test_seed());
		if (was != is) {
			SH_ASSERT_EQ(d.old[i], was);
			SH_ASSERT_EQ(d.new[i], is);
		}
	}
}

/*
 * Every value a stored record holds has one reference, every other none:
 * branch 0's newest and what its kept snapshots read, and each branch's own.
 */
static void
check_refs(void)
{
	static int want[NVALS];

	memset(want, 0, sizeof(want));
	for (int i = 0; i < NKEYS; i++) {
		const struct hist *h = &M.h[i];

		if (h->n > 0 && h->val[h->n - 1] >= 0)
			want[h->val[h->n - 1]] = 1;
		for (unsigned s = 0; s < M.nkeep; s++)
			if (model_at(h, M.keep[s]) >= 0)
				want[model_at(h, M.keep[s])] = 1;
		for (int br = 1; br <= NBR; br++)
			if (M.base[br] != 0 && M.bval[br][i] >= 0)
				want[M.bval[br][i]] = 1;
	}
	for (int v = 0; v < NVALS; v++)
		SH_ASSERT_MSG(M.refs[v] == want[v], "value %d: %d references, want %d (seed %llu)",
			      v, M.refs[v], want[v], (unsigned long long)sh_test_seed());
}

static void
page_all(struct meta_db *db, model_page_fn f, const struct meta_keep *kp)
{
	model_page_all(db, f, kp);
	refs_end(true);
}

/* Branch br deleted: its records and their references go, the base's stay. */
static void
drop_branch(struct meta_db *db, int br)
{
	page_all(db, meta_drop_branch,
		 &(struct meta_keep){
		     .moved = model_on_moved, .arg = &refs_counts, .branch = (uint16_t)br });
	M.base[br] = 0;
	SH_ASSERT_OK(meta_db_branch(db, (uint16_t)br, 0));
}

/* A base of a branch there now. */
static bool
is_base(uint64_t v)
{
	for (int br = 1; br <= NBR; br++)
		if (M.base[br] == v)
			return true;
	return false;
}

/* One transaction of 1 to 4 writes in branch br, as a caller accounts them. */
static void
write_some(struct meta_db *db, struct sh_rand *rng, int op, int br)
{
	uint64_t at = view_of(br);
	struct meta_keep kp = { br == 0 ? M.keep : NULL, br == 0 ? M.nkeep : 0, model_on_moved,
				&refs_counts };
	int n = 1 + (int)sh_rand_below(rng, 4), undo[4][2];
	struct meta_txn *t;

	SH_ASSERT_OK(meta_txn_begin(db, true, &t));
	for (int j = 0; j < n; j++) {
		int i = (int)sh_rand_below(rng, NKEYS), old, v = -1;
		struct meta_key k;

		key_of(&k, i);
		old = read_in(t, &k, at);
		if (sh_rand_below(rng, 4) == 0) {
			SH_ASSERT_OK(meta_del(t, &k, at, &kp));
		} else {
			v = op * 10 + j;
			SH_ASSERT_OK(meta_put(t, &k, at, &v, sizeof(v), &kp));
			M.refs_txn[v]++; /* the caller's: what it wrote */
		}
		if (old >= 0)
			M.refs_txn[old]--; /* and what it replaced */
		undo[j][0] = i;
		if (br != 0) {
			undo[j][1] = M.bval[br][i];
			M.bval[br][i] = v;
			continue;
		}
		struct hist *x = &M.h[i];

		SH_ASSERT_LT(x->n, HIST);
		undo[j][1] = x->n > 0 && x->ver[x->n - 1] == at ? x->val[x->n - 1] : NOBR;
		if (undo[j][1] != NOBR) {
			x->val[x->n - 1] = v; /* written again in one version: the last counts */
		} else {
			x->ver[x->n] = at;
			x->val[x->n++] = v;
		}
	}
	if (sh_rand_below(rng, 10) == 0) {
		meta_txn_abort(t); /* nothing of it happened */
		refs_end(false);
		for (int j = n - 1; j >= 0; j--) {
			int i = undo[j][0];

			if (br != 0)
				M.bval[br][i] = undo[j][1];
			else if (undo[j][1] == NOBR)
				M.h[i].n--;
			else
				M.h[i].val[M.h[i].n - 1] = undo[j][1];
		}
		return;
	}
	SH_ASSERT_OK(meta_txn_commit(t));
	refs_end(true);
	if (sh_rand_below(rng, 3) == 0) {
		if (br == 0)
			M.ver++;
		else
			M.bseq[br]++; /* the branch's older records go: nothing of it is kept */
	}
}

static void
check_all(struct meta_db *db)
{
	check_view(db, 0, M.ver);
	for (unsigned s = 0; s < M.nkeep; s++)
		check_view(db, 0, M.keep[s]);
	for (int br = 1; br <= NBR; br++) {
		if (M.base[br] == 0)
			continue;
		check_view(db, br, 0);
		check_diff(db, M.base[br], br);
		check_diff(db, 0, br);
		for (unsigned s = 0; s < M.nkeep; s++)
			if (M.keep[s] > M.base[br])
				check_diff(db, M.keep[s],
					   br); /* a later snapshot's, not the base */
	}
}

TEST(meta_branches_match_model)
{
	char path[512];
	struct meta_db *db;
	struct sh_rand rng;

	memset(&M, 0, sizeof(M));
	M.ver = 1;
	snprintf(path, sizeof(path), "%s/branch.mdb", sh_test_dir());
	SH_ASSERT_OK(meta_db_open(path, 64ull << 20, META_DB_NOSYNC, &db));
	sh_rand_seed(&rng, sh_test_seed());
	for (int op = 0; op < NOPS; op++) {
		uint64_t r = sh_rand_below(&rng, 100);
		int br = 1 + (int)sh_rand_below(&rng, NBR);

		if (r < 4 && M.nkeep < 16) {
			M.keep[M.nkeep++] = M.ver++; /* a snapshot of what is there now */
		} else if (r < 7 && M.nkeep > 0) {
			unsigned s = (unsigned)sh_rand_below(&rng, M.nkeep);

			if (is_base(M.keep[s]))
				continue; /* a clone stands on it: refused (the ZFS rule) */
			memmove(M.keep + s, M.keep + s + 1, (M.nkeep - s - 1) * sizeof(M.keep[0]));
			M.nkeep--;
			page_all(
			    db, meta_settle,
			    &(struct meta_keep){ M.keep, M.nkeep, model_on_moved, &refs_counts });
		} else if (r < 9 && M.base[br] == 0 && M.nkeep > 0) {
			/* a clone of a kept snapshot: one call, nothing per key */
			M.base[br] = M.keep[sh_rand_below(&rng, M.nkeep)];
			M.bseq[br] = 1;
			for (int i = 0; i < NKEYS; i++)
				M.bval[br][i] = NOBR;
			SH_ASSERT_OK(meta_db_branch(db, (uint16_t)br, M.base[br]));
		} else if (r < 10 && M.base[br] != 0) {
			/* the clone deleted: its records and their references go, the base's stay
			 */
			drop_branch(db, br);
			check_refs();
		} else {
			/* half the writes in a branch there, half in branch 0 */
			write_some(db, &rng, op, M.base[br] != 0 && r % 2 ? br : 0);
		}
		if (op % 100 == 0) {
			check_all(db);
			page_all(
			    db, meta_settle,
			    &(struct meta_keep){ M.keep, M.nkeep, model_on_moved, &refs_counts });
			check_refs();
		}
	}
	check_all(db);
	/* every clone and snapshot gone: one reference for each newest value of branch 0 */
	for (int br = 1; br <= NBR; br++) {
		if (M.base[br] == 0)
			continue;
		drop_branch(db, br);
	}
	M.nkeep = 0;
	page_all(db, meta_settle, &(struct meta_keep){ M.keep, 0, model_on_moved, &refs_counts });
	check_refs();
	check_view(db, 0, M.ver);
	meta_db_close(db);
}

/*
 * A clone of a clone: branch 2 based on a kept version of branch 1,
 * itself based on branch 0's snapshot; each reads down its chain and
 * writes only its own records.
 */
TEST(meta_branch_chain_reads_down_and_writes_its_own)
{
	const uint64_t b1 = 1ull << META_BRANCH_SHIFT, b2 = 2ull << META_BRANCH_SHIFT;
	struct meta_keep k0 = { (uint64_t[]){ 1 }, 1, model_on_moved, &refs_counts };
	struct meta_keep k1 = { (uint64_t[]){ b1 | 1 }, 1, model_on_moved, &refs_counts };
	struct meta_keep k2 = { NULL, 0, model_on_moved, &refs_counts };
	struct meta_key ka, kb, kc;
	struct meta_txn *t;
	struct meta_db *db;
	char path[512];
	int v;

	memset(&M, 0, sizeof(M));
	snprintf(path, sizeof(path), "%s/chain.mdb", sh_test_dir());
	SH_ASSERT_OK(meta_db_open(path, 16ull << 20, META_DB_NOSYNC, &db));
	SH_ASSERT_EQ(meta_db_branch(db, 1, b1 | 1), -EINVAL); /* a base of a lower branch */
	SH_ASSERT_EQ(meta_db_branch(db, 0, 1), -EINVAL);
	SH_ASSERT_OK(meta_db_branch(db, 1, 1));
	SH_ASSERT_OK(meta_db_branch(db, 2, b1 | 1));
	key_of(&ka, 1);
	key_of(&kb, 2);
	key_of(&kc, 4);

	SH_ASSERT_OK(meta_txn_begin(db, true, &t));
	v = 10; /* a, b and c at version 1 (the snapshot both clones stand on) */
	SH_ASSERT_OK(meta_put(t, &ka, 1, &v, sizeof(v), &k0));
	v = 20;
	SH_ASSERT_OK(meta_put(t, &kb, 1, &v, sizeof(v), &k0));
	v = 30;
	SH_ASSERT_OK(meta_put(t, &kc, 1, &v, sizeof(v), &k0));
	v = 11; /* branch 0 goes on: a is 11 at version 2 */
	SH_ASSERT_OK(meta_put(t, &ka, 2, &v, sizeof(v), &k0));
	v = 21; /* branch 1 writes b at its version 1 (kept: branch 2 stands on it) */
	SH_ASSERT_OK(meta_put(t, &kb, b1 | 1, &v, sizeof(v), &k1));
	SH_ASSERT_EQ(M.refs_txn[20], 1); /* branch 1 stopped reading 20; branch 0 has not */
	SH_ASSERT_OK(meta_del(t, &kc, b1 | 1, &k1));
	SH_ASSERT_EQ(M.refs_txn[30], 1);
	v = 22; /* and again at its version 2: 21 stays for branch 2 */
	SH_ASSERT_OK(meta_put(t, &kb, b1 | 2, &v, sizeof(v), &k1));
	SH_ASSERT_EQ(M.refs_txn[21], 1);
	v = 23; /* branch 2 writes b: branch 1's 21 is what it stopped reading */
	SH_ASSERT_OK(meta_put(t, &kb, b2 | 1, &v, sizeof(v), &k2));
	SH_ASSERT_EQ(M.refs_txn[21], 2);
	SH_ASSERT_EQ(M.refs_txn[22], 0);

	SH_ASSERT_EQ(read_in(t, &ka, 1), 10);
	SH_ASSERT_EQ(read_in(t, &ka, 2), 11);
	SH_ASSERT_EQ(read_in(t, &ka, b1 | 2), 10); /* from the base, not branch 0's newest */
	SH_ASSERT_EQ(read_in(t, &ka, b2 | 1), 10); /* down two links */
	SH_ASSERT_EQ(read_in(t, &kb, 2), 20);
	SH_ASSERT_EQ(read_in(t, &kb, b1 | 1), 21);
	SH_ASSERT_EQ(read_in(t, &kb, b1 | 2), 22);
	SH_ASSERT_EQ(read_in(t, &kb, b2 | 1), 23);
	SH_ASSERT_EQ(read_in(t, &kc, b1 | 2), -1); /* deleted in branch 1 */
	SH_ASSERT_EQ(read_in(t, &kc, b2 | 1), -1); /* and so in what stands on it */
	SH_ASSERT_EQ(read_in(t, &kc, 2), 30);	   /* not in branch 0 */
	SH_ASSERT_EQ(read_in(t, &ka, 3ull << META_BRANCH_SHIFT | 1), -1); /* no base: its own */
	/* bookkeeping has one copy, whatever the version, that every branch reads */
	meta_key_id(&kc, 1, META_K_COUNTER, 0);
	v = 40;
	SH_ASSERT_OK(meta_put(t, &kc, b2 | 1, &v, sizeof(v), &k2));
	SH_ASSERT_EQ(read_in(t, &kc, 1), 40);
	SH_ASSERT_EQ(read_in(t, &kc, 3ull << META_BRANCH_SHIFT | 1), 40);
	SH_ASSERT_OK(meta_txn_commit(t));

	/* branch 2 goes: its 23 is dropped, branch 1's 21 and 22 stay */
	memset(M.refs_txn, 0, sizeof(M.refs_txn));
	page_all(db, meta_drop_branch,
		 &(struct meta_keep){ .moved = model_on_moved, .arg = &refs_counts, .branch = 2 });
	SH_ASSERT_EQ(M.refs[23], -1);
	SH_ASSERT_EQ(M.refs[21], 0);
	SH_ASSERT_OK(meta_txn_begin(db, false, &t));
	SH_ASSERT_EQ(read_in(t, &kb, b1 | 1), 21);
	SH_ASSERT_EQ(read_in(t, &kb, b1 | 2), 22);
	SH_ASSERT_EQ(read_in(t, &kb, 1), 20);
	meta_txn_abort(t);
	meta_db_close(db);
}
