// SPDX-License-Identifier: Apache-2.0
/*
 * The metadata service in the simulator: six backends (net + msvc) serve
 * one filesystem's buckets in Raft groups of five; a client (net + mroute)
 * creates directories and files across buckets (leases between buckets),
 * stats them, lists directories by fanning out, removes them (rmdir with
 * leases out), while group leaders are killed and restarted and packets
 * are lost, duplicated and reordered. Checked, over seeds:
 *  - every create that succeeded is found afterwards, with its attributes;
 *  - a directory's size and nlink converge to what it holds (deltas);
 *  - readdir returns each entry exactly once;
 *  - rmdir says ENOTEMPTY while entries exist in any bucket, and works
 *    once they are gone.
 */
#include <fcntl.h>

#include "shoal/client.h"
#include "world.h"

struct parent_wait {
	struct world *w;
	uint64_t dir, want;
};

/* The directory's bucket says its parent is the one wanted. */
static bool
parent_is(void *arg)
{
	struct parent_wait *pw = arg;
	struct mp_req q = { .kind = MP_PARENT, .bucket = meta_ino_bucket(pw->dir), .ino = pw->dir };
	struct call *c = sh_calloc(1, sizeof(*c));
	bool ok = call(pw->w, &q, c) == 0 && c->r.aux == pw->want;

	sh_free(c);
	return ok;
}

struct settle {
	struct world *w;
	uint64_t dir;
	uint64_t want_size;
};

static bool
dir_settled(void *arg)
{
	struct settle *s = arg;
	struct meta_inode in;

	if (getattr(s->w, s->dir, &in) != 0)
		return false;
	return in.size == s->want_size;
}

static void
run_world(uint64_t seed)
{
	static struct world w;
	uint64_t dirs[3], files[NFILES];
	int made[NFILES];

	world_start(&w, seed, 4ull << 20);

	/* three directories under the root (leases from bucket 0 where needed) */
	for (int i = 0; i < 3; i++) {
		char name[16];

		snprintf(name, sizeof(name), "d%d", i);
		int rc = mk(&w, META_ROOT_INO, name, META_DIR, &dirs[i]);

		SH_ASSERT_MSG(rc == 0, "seed %llu: mkdir %s: %s", (unsigned long long)seed, name,
			      sh_errname(rc));
	}
	/* a file's extents through the leader: mapped, read back by range, overwritten */
	{
		uint64_t f;
		struct meta_extent e[2] = {
			{ .off = 0, .len = 4096, .stripe = 77, .d = 4, .p = 2, .frag = 65536 },
			{ .off = 1 << 20, .len = 100, .stripe = 78, .d = 4, .p = 2, .frag = 65536 }
		};
		struct meta_cmd mc = { .op = META_OP_EXTENT };
		struct mp_req q = { .kind = MP_EXTENTS, .off = 0, .len = UINT64_MAX };
		struct call *c = sh_calloc(1, sizeof(*c));
		struct meta_extent got[META_EXTENTS_MAX];
		struct sh_enc enc;
		unsigned n;

		SH_ASSERT_OK(mk(&w, META_ROOT_INO, "data", META_REG, &f));
		sh_enc_init(&enc);
		SH_ASSERT_OK(meta_extent_list_encode(&enc, e, 2));
		mc.ino = f;
		mc.data = enc.p;
		mc.dlen = enc.len;
		SH_ASSERT_OK(cmd(&w, meta_ino_bucket(f), &mc, c));
		SH_ASSERT_EQ(c->r.attr.size, (1ull << 20) + 100);
		sh_enc_fini(&enc);
		q.bucket = meta_ino_bucket(f);
		q.ino = f;
		SH_ASSERT_OK(call(&w, &q, c));
		SH_ASSERT_OK(meta_extent_list_decode(c->data, c->r.dlen, got, &n));
		SH_ASSERT_EQ(n, 2u);
		SH_ASSERT_EQ(got[1].stripe, 78);
		q.off = 2000;
		q.len = 10;
		SH_ASSERT_OK(call(&w, &q, c));
		SH_ASSERT_OK(meta_extent_list_decode(c->data, c->r.dlen, got, &n));
		SH_ASSERT_EQ(n, 1u);
		SH_ASSERT_EQ(got[0].stripe, 77);
		/* the orphan sweep's question: which stripes does this bucket know */
		{
			uint8_t ids[24] = { 77, 0, 0, 0, 0,    0,    0, 0, 78, 0, 0, 0,
					    0,	0, 0, 0, 0x39, 0x30, 0, 0, 0,  0, 0, 0 };
			struct mp_req sq = { .kind = MP_STRIPES,
					     .bucket = meta_ino_bucket(f),
					     .data = ids,
					     .dlen = sizeof(ids) };

			SH_ASSERT_OK(call(&w, &sq, c));
			SH_ASSERT_EQ(c->r.dlen, 3u);
			SH_ASSERT(c->data[0] == 1 && c->data[1] == 1 && c->data[2] == 0);
			sq.dlen = 7; /* not whole ids */
			SH_ASSERT_EQ(call(&w, &sq, c), -EINVAL);
		}
		/* a client may not forge a release */
		mc = (struct meta_cmd){ .op = META_OP_RECLAIM_DONE, .upto = 77 };
		SH_ASSERT_EQ(cmd(&w, meta_ino_bucket(f), &mc, c), -EPERM);
		SH_ASSERT_OK(rm(&w, META_ROOT_INO, "data", false));
		sh_free(c);
	}

	/* forged inode numbers and bad names: clear errors, nothing changed */
	{
		struct meta_inode in;
		struct mp_req q = { .kind = MP_GETATTR, .bucket = 3, .ino = meta_ino_make(4, 1) };
		struct call *c = sh_calloc(1, sizeof(*c));
		SH_ASSERT_EQ(getattr(&w, meta_ino_make(5, 123456), &in), -ESTALE);
		SH_ASSERT_EQ(call(&w, &q, c), -ESTALE); /* an inode asked of another bucket */
		q.ino = 0;
		SH_ASSERT_EQ(call(&w, &q, c), -EINVAL);
		q.bucket = NBUCKETS + 3; /* no such bucket */
		SH_ASSERT_EQ(call(&w, &q, c), -EINVAL);
		sh_free(c);
		SH_ASSERT_EQ(mk(&w, META_ROOT_INO, "a/b", META_REG, &(uint64_t){ 0 }), -EINVAL);
		SH_ASSERT_EQ(mk(&w, meta_ino_make(7, 99), "x", META_REG, &(uint64_t){ 0 }),
			     -ENOENT);
	}
	{
		uint64_t x;

		SH_ASSERT_EQ(mk(&w, META_ROOT_INO, "d0", META_DIR, &x), -EEXIST);
		SH_ASSERT_EQ(mk(&w, dirs[0] + 1000, "x", META_REG, &x), -ENOENT);
	}

	/* files in d1, leaders killed now and then */
	for (int i = 0; i < NFILES; i++) {
		char name[16];

		snprintf(name, sizeof(name), "f%d", i);
		made[i] = mk(&w, dirs[1], name, META_REG, &files[i]);
		/* tagged: a create retried after a crash finds its own inode, never EEXIST */
		SH_ASSERT_MSG(made[i] == 0 || made[i] == -ETIMEDOUT, "seed %llu: create %s: %s",
			      (unsigned long long)seed, name, sh_errname(made[i]));
		if (i % 20 == 10) {
			int l = leader_node(&w, dbucket(dirs[1], name));

			if (l > 0) {
				node_stop(&w, &w.n[l], true);
				sim_run_for(w.sim, 500 * SH_NSEC_PER_MSEC);
				node_start(&w.n[l]);
			}
		}
	}
	/* what succeeded is there, with its attributes */
	for (int i = 0; i < NFILES; i++) {
		char name[16];
		struct meta_dentry d;
		struct meta_inode in;

		snprintf(name, sizeof(name), "f%d", i);
		if (made[i] != 0)
			continue;
		SH_ASSERT_MSG(lookup(&w, dirs[1], name, &d) == 0, "seed %llu: %s lost",
			      (unsigned long long)seed, name);
		SH_ASSERT_EQ(d.ino, files[i]);
		SH_ASSERT_OK(getattr(&w, d.ino, &in));
		SH_ASSERT_EQ(in.type, META_REG);
		SH_ASSERT_EQ(in.mode & 07777, 0644u);
	}
	/* the directory's size converges to its entry count; readdir lists each once */
	{
		uint8_t seen[NFILES] = { 0 };
		unsigned n = list(&w, dirs[1], seen, NFILES), want = 0;
		struct settle st = { &w, dirs[1], 0 };

		for (int i = 0; i < NFILES; i++) {
			if (made[i] == 0)
				SH_ASSERT_MSG(seen[i], "seed %llu: f%d not listed",
					      (unsigned long long)seed, i);
			want += seen[i];
		}
		SH_ASSERT_EQ(n, want);
		st.want_size = want;
		SH_ASSERT_MSG(sim_run_until(w.sim, dir_settled, &st, 20 * SH_NSEC_PER_SEC),
			      "seed %llu: d1's size does not converge to %u",
			      (unsigned long long)seed, want);
	}
	/*
	 * renames out of d1 into d2 (mostly between two buckets), leaders killed now and
	 * then: once recovery is done, every file has exactly one of its two names
	 */
	{
		int moved[NFILES];

		for (int i = 0; i < NFILES; i++) {
			char a[16], b[16];

			moved[i] = -1;
			if (made[i] != 0)
				continue;
			snprintf(a, sizeof(a), "f%d", i);
			snprintf(b, sizeof(b), "f%d", i);
			if (i % 3 != 0) {
				moved[i] = mv(&w, dirs[1], a, dirs[2], b, 0);
			} else {
				/* kill -9 the leader of one side at a random point of the rename */
				struct meta_cmd mc = { .op = META_OP_RENAME,
						       .ver = 1,
						       .parent = dirs[1],
						       .parent2 = dirs[2],
						       .tag = sh_rand_u64(&w.rng) | 1 };
				struct mp_req q = { .kind = MP_CMD,
						    .fs = w.fs,
						    .bucket = dbucket(dirs[1], a) };
				struct call *c = sh_calloc(1, sizeof(*c));
				struct sh_enc e;
				int l =
				    leader_node(&w, sh_rand_below(&w.rng, 2) ? dbucket(dirs[1], a)
									     : dbucket(dirs[2], b));

				snprintf(mc.name, sizeof(mc.name), "%s", a);
				snprintf(mc.name2, sizeof(mc.name2), "%s", b);
				sh_enc_init(&e);
				SH_ASSERT_OK(meta_cmd_encode(&e, &mc));
				q.data = e.p;
				q.dlen = e.len;
				SH_ASSERT_OK(
				    mroute_call(w.rt, &q, 20 * SH_NSEC_PER_SEC, on_call, c));
				sh_enc_fini(&e);
				sim_run_for(w.sim, sh_rand_below(&w.rng, 3000) * SH_NSEC_PER_USEC);
				if (l > 0) {
					node_stop(&w, &w.n[l], true);
					sim_run_for(w.sim, 200 * SH_NSEC_PER_MSEC);
					node_start(&w.n[l]);
				}
				SH_ASSERT(sim_run_until(w.sim, call_done, c, 60 * SH_NSEC_PER_SEC));
				moved[i] = c->status;
				sh_free(c);
			}
			/* a retry after a crash that finds the rename done says so (its tag):
			 * never ENOENT or EEXIST; a timeout leaves it either way */
			SH_ASSERT_MSG(moved[i] == 0 || moved[i] == -ETIMEDOUT ||
					  moved[i] == -ESHUTDOWN || moved[i] == SH_EPEERRESTART,
				      "seed %llu: rename f%d: %s", (unsigned long long)seed, i,
				      sh_errname(moved[i]));
		}
		sim_run_for(w.sim, 5 * SH_NSEC_PER_SEC); /* new leaders finish what they find */
		for (int i = 0; i < NFILES; i++) {
			char a[16];
			struct meta_dentry d1, d2;
			int r1, r2;

			if (made[i] != 0)
				continue;
			snprintf(a, sizeof(a), "f%d", i);
			r1 = lookup(&w, dirs[1], a, &d1);
			r2 = lookup(&w, dirs[2], a, &d2);
			SH_ASSERT_MSG((r1 == 0) != (r2 == 0),
				      "seed %llu: f%d has %s name after its rename (%s)",
				      (unsigned long long)seed, i, r1 == 0 ? "both" : "neither",
				      sh_errname(moved[i]));
			if (moved[i] == 0)
				SH_ASSERT_MSG(r2 == 0 && d2.ino == files[i],
					      "seed %llu: f%d renamed but not there",
					      (unsigned long long)seed, i);
			if (r2 == 0) /* move it back, for what follows */
				SH_ASSERT_OK(mv(&w, dirs[2], a, dirs[1], a, 0));
		}
		/* the rules of rename(2) hold between buckets too */
		SH_ASSERT_EQ(mk(&w, dirs[2], "x", META_REG, &(uint64_t){ 0 }), 0);
		SH_ASSERT_EQ(mv(&w, dirs[1], "f1", dirs[2], "x", META_RENAME_NOREPLACE), -EEXIST);
		SH_ASSERT_EQ(mv(&w, dirs[1], "nothing", dirs[2], "y", 0), -ENOENT);
		SH_ASSERT_EQ(mv(&w, dirs[1], "f1", dirs[2], "x", META_RENAME_EXCHANGE), 0);
		{
			struct meta_dentry d;

			SH_ASSERT_OK(lookup(&w, dirs[2], "x", &d));
			SH_ASSERT_EQ(d.ino, files[1]);
			SH_ASSERT_OK(mv(&w, dirs[1], "f1", dirs[2], "x", META_RENAME_EXCHANGE));
			/* replace: the old target's inode goes */
			SH_ASSERT_OK(lookup(&w, dirs[2], "x", &d));
			SH_ASSERT_OK(mv(&w, dirs[1], "f1", dirs[2], "x", 0));
			SH_ASSERT_EQ(lookup(&w, dirs[1], "f1", &(struct meta_dentry){ 0 }),
				     -ENOENT);
			{
				struct meta_inode in;
				int rc;

				/* an orphan (no client holds it) that its leader drops soon */
				rc = getattr(&w, d.ino, &in);
				SH_ASSERT(rc == -ESTALE || (rc == 0 && in.nlink == 0));
				for (int t = 0; rc == 0 && t < 30; t++) {
					sim_run_for(w.sim, SH_NSEC_PER_SEC);
					rc = getattr(&w, d.ino, &in);
				}
				SH_ASSERT_EQ(rc, -ESTALE);
			}
			SH_ASSERT_OK(mv(&w, dirs[2], "x", dirs[1], "f1", 0));
		}
	}

	/* a directory renamed between buckets, then removed: its own bucket says if it is empty */
	for (int k = 0; k < 4; k++) {
		char a[32], b[32];
		uint64_t sub, f;
		struct meta_inode in;

		snprintf(a, sizeof(a), "sub%d", k);
		snprintf(b, sizeof(b), "moved%d", k);
		SH_ASSERT_OK(mk(&w, dirs[0], a, META_DIR, &sub));
		SH_ASSERT_OK(mv(&w, dirs[0], a, dirs[2], b, 0));
		{
			/* its own bucket learns its new parent (a delta, unless it renamed there)
			 */
			struct parent_wait pw = { &w, sub, dirs[2] };

			SH_ASSERT_MSG(sim_run_until(w.sim, parent_is, &pw, 10 * SH_NSEC_PER_SEC),
				      "seed %llu: moved directory %d's parent never followed",
				      (unsigned long long)seed, k);
		}
		SH_ASSERT_OK(mk(&w, sub, "inside", META_REG, &f));
		SH_ASSERT_EQ(rm(&w, dirs[2], b, true), -ENOTEMPTY);
		SH_ASSERT_OK(rm(&w, sub, "inside", false));
		SH_ASSERT_MSG(rm(&w, dirs[2], b, true) == 0, "seed %llu: rmdir of moved dir %d",
			      (unsigned long long)seed, k);
		SH_ASSERT_EQ(lookup(&w, dirs[2], b, &(struct meta_dentry){ 0 }), -ENOENT);
		sim_run_for(w.sim, SH_NSEC_PER_SEC); /* the inode goes with a delta */
		SH_ASSERT_EQ(getattr(&w, sub, &in), -ESTALE);
		SH_ASSERT_EQ(mk(&w, sub, "late", META_REG, &f), -ENOENT);
	}

	/* rmdir: not empty while entries remain, then gone */
	SH_ASSERT_EQ(rm(&w, META_ROOT_INO, "d1", true), -ENOTEMPTY);
	SH_ASSERT_EQ(rm(&w, META_ROOT_INO, "d0", false), -EISDIR);
	for (int i = 0; i < NFILES; i++) {
		char name[16];
		int rc;

		snprintf(name, sizeof(name), "f%d", i);
		rc = rm(&w, dirs[1], name, false);
		SH_ASSERT_MSG(rc == 0 || (made[i] != 0 && rc == -ENOENT),
			      "seed %llu: unlink %s: %s", (unsigned long long)seed, name,
			      sh_errname(rc));
	}
	SH_ASSERT_EQ(rm(&w, META_ROOT_INO, "d1", true), 0);
	{
		struct meta_dentry d;
		uint64_t x;

		SH_ASSERT_EQ(lookup(&w, META_ROOT_INO, "d1", &d), -ENOENT);
		SH_ASSERT_EQ(mk(&w, dirs[1], "late", META_REG, &x), -ENOENT);
	}
	/* the root counts d0 and d2 */
	{
		struct settle st = { &w, META_ROOT_INO, 2 };
		struct meta_inode in;

		SH_ASSERT_MSG(sim_run_until(w.sim, dir_settled, &st, 20 * SH_NSEC_PER_SEC),
			      "seed %llu: the root's size does not converge to 2",
			      (unsigned long long)seed);
		SH_ASSERT_OK(getattr(&w, META_ROOT_INO, &in));
		SH_ASSERT_EQ(in.nlink, 4u);
	}

	world_end(&w);
}

TEST(meta_groups)
{
	for (int i = 0; i < 2; i++)
		run_world(sh_test_seed() * 10 + (uint64_t)i);
}

/* ---- a state larger than a Raft log: the bucket store holds it ---- */

#define NBIG	1600
#define BIG_LEN 2048

static void
big_bytes(uint64_t seed, unsigned i, uint8_t *b)
{
	struct sh_rand r;

	sh_rand_seed(&r, seed ^ (0x9e3779b97f4a7c15ull * (i + 1)));
	for (unsigned k = 0; k < BIG_LEN; k += 8) {
		uint64_t v = sh_rand_u64(&r);

		memcpy(b + k, &v, 8);
	}
}

static int
put_inline(struct world *w, uint64_t ino, const uint8_t *b, size_t len)
{
	struct meta_cmd mc = { .op = META_OP_INLINE, .ino = ino, .data = b, .dlen = len };
	struct call *c = sh_calloc(1, sizeof(*c));
	int rc = cmd(w, meta_ino_bucket(ino), &mc, c);

	sh_free(c);
	return rc;
}

/* The file's name resolves to ino and its inline bytes are the expected ones. */
static void
check_big(struct world *w, uint64_t dir, unsigned i, uint64_t ino, const char *when)
{
	struct mp_req q = {
		.kind = MP_EXTENTS, .bucket = meta_ino_bucket(ino), .ino = ino, .len = UINT64_MAX
	};
	struct call *c = sh_calloc(1, sizeof(*c));
	struct meta_dentry d;
	uint8_t want[BIG_LEN];
	char name[16];
	int rc;

	snprintf(name, sizeof(name), "f%u", i);
	rc = lookup(w, dir, name, &d);
	SH_ASSERT_MSG(rc == 0 && d.ino == ino, "seed %llu, %s: %s: %s", (unsigned long long)w->seed,
		      when, name, sh_errname(rc));
	SH_ASSERT_OK(call(w, &q, c));
	SH_ASSERT(c->r.flags & MP_INLINE);
	big_bytes(w->seed, i, want);
	SH_ASSERT_MSG(c->r.dlen == BIG_LEN && memcmp(c->data, want, BIG_LEN) == 0,
		      "seed %llu, %s: %s reads back wrong", (unsigned long long)w->seed, when,
		      name);
	sh_free(c);
}

/*
 * Files whose metadata (2 KiB inline each) adds up to more than a group's
 * Raft log can hold, while: a member is down long enough to need the
 * leader's whole state (sent from the store, installed into its store);
 * leaders are killed, losing their stores' unflushed batches (replayed
 * from their logs, never applied twice); then the member that was sent
 * the state serves in a quorum without two others; last, every node is
 * killed and restarted at once. Every file reads back each time.
 */
static void
run_large(uint64_t seed)
{
	static struct world w;
	static uint64_t inos[NBIG];
	uint8_t b[BIG_LEN];
	uint64_t dir;

	/* a 1 MiB log: each half holds well under a group's share of the state */
	world_start(&w, seed, 1ull << 20);
	SH_ASSERT_OK(mk(&w, META_ROOT_INO, "big", META_DIR, &dir));
	node_stop(&w, &w.n[N], true);
	for (unsigned i = 0; i < NBIG; i++) {
		char name[16];
		int rc;

		snprintf(name, sizeof(name), "f%u", i);
		do
			rc = mk(&w, dir, name, META_REG, &inos[i]);
		while (rc == -ETIMEDOUT);
		SH_ASSERT_MSG(rc == 0, "seed %llu: create %s: %s", (unsigned long long)seed, name,
			      sh_errname(rc));
		big_bytes(seed, i, b);
		do
			rc = put_inline(&w, inos[i], b, BIG_LEN);
		while (rc == -ETIMEDOUT);
		SH_ASSERT_MSG(rc == 0, "seed %llu: write %s: %s", (unsigned long long)seed, name,
			      sh_errname(rc));
		if (i == NBIG / 2)
			node_start(&w.n[N]); /* far behind: gets the whole state */
		if (i % 400 == 399) {
			int l = leader_node(&w, meta_ino_bucket(inos[i]));

			if (l > 0 && l != N) {
				node_stop(&w, &w.n[l], true);
				sim_run_for(w.sim, 300 * SH_NSEC_PER_MSEC);
				node_start(&w.n[l]);
			}
		}
	}
	sim_run_for(w.sim, 3 * SH_NSEC_PER_SEC);
	/* without nodes 1 and 2, every group of five needs node N in its quorum */
	node_stop(&w, &w.n[1], true);
	node_stop(&w, &w.n[2], true);
	for (unsigned i = 0; i < NBIG; i++)
		check_big(&w, dir, i, inos[i], "nodes 1 and 2 down");
	node_start(&w.n[1]);
	node_start(&w.n[2]);
	/* everyone killed at once: stores and logs as they were */
	for (int i = 1; i <= N; i++)
		node_stop(&w, &w.n[i], true);
	for (int i = 1; i <= N; i++)
		node_start(&w.n[i]);
	sim_run_for(w.sim, 3 * SH_NSEC_PER_SEC);
	for (unsigned i = 0; i < NBIG; i++)
		check_big(&w, dir, i, inos[i], "after a restart of all");
	world_end(&w);
}

TEST(meta_state_larger_than_log)
{
	run_large(sh_test_seed());
}

/* ---- the data path: stripes on the targets, extents in the buckets, under crashes ---- */

/*
 * Every slot reads back, through a fresh libshoal client, as its last
 * acknowledged version or a later one sent (or, if none was acknowledged,
 * as never written: zeros or past the end).
 */
static void
dw_check(struct world *w, uint64_t seed, const int *acked, const int *maybe_hi, int crashes,
	 const char *when, int id)
{
	static uint8_t buf[DW_STRIPE], got[DW_STRIPE], zero[DW_STRIPE];
	sh_client *c = world_client(w, DW_FRAG / 1024, id);
	sh_file *f;
	sh_fs *fs;

	SH_ASSERT_OK(sh_fs_open(c, "fs1", &fs));
	SH_ASSERT_OK(sh_open(fs, "/data", O_RDONLY, 0, &f));
	for (unsigned s = 0; s < DW_SLOTS; s++) {
		long n = sh_pread(f, got, DW_STRIPE, (uint64_t)s * DW_STRIPE);
		int found = -1;

		SH_ASSERT_MSG(n >= 0, "seed %llu: %s: slot %u (acked version %d): %s",
			      (unsigned long long)seed, when, s, acked[s], sh_errname((int)n));
		if (acked[s] < 0 && (n == 0 || (n == DW_STRIPE && !memcmp(got, zero, DW_STRIPE))))
			continue; /* never written, or only unanswered writes and none landed */
		SH_ASSERT_MSG(n == DW_STRIPE, "seed %llu: %s: slot %u reads %ld bytes",
			      (unsigned long long)seed, when, s, n);
		for (int v = acked[s] < 0 ? 0 : acked[s]; v <= maybe_hi[s] && found < 0; v++) {
			slot_bytes(seed, s, (unsigned)v, buf);
			if (memcmp(buf, got, DW_STRIPE) == 0)
				found = v;
		}
		SH_ASSERT_MSG(found >= 0,
			      "seed %llu: %s: slot %u holds none of versions %d..%d (acked %d), "
			      "after %d crashes",
			      (unsigned long long)seed, when, s, acked[s] < 0 ? 0 : acked[s],
			      maybe_hi[s], acked[s], crashes);
	}
	SH_ASSERT_OK(sh_close(f));
	sh_fs_close(fs);
	sh_client_close(c);
}

/* A slot's version written and made durable through the writer's handle; 0 when acknowledged. */
static int
dw_put(sh_fs *fs, sh_file **f, unsigned slot, const uint8_t *buf)
{
	long n;
	int rc;

	if (*f == NULL && (rc = sh_open(fs, "/data", O_WRONLY, 0, f)) < 0) {
		*f = NULL;
		return rc;
	}
	n = sh_pwrite(*f, buf, DW_STRIPE, (uint64_t)slot * DW_STRIPE);
	rc = n < 0 ? (int)n : n != DW_STRIPE ? -EIO : sh_fsync(*f);
	if (rc < 0) { /* what it held is in doubt: a new handle for the next */
		(void)sh_close(*f);
		*f = NULL;
	}
	return rc;
}

/*
 * A real libshoal client overwrites a file's slots stripe by stripe (each
 * write fsync'd), never pausing, while the network loses and reorders
 * packets and nodes are kill -9'd every 1-3 s of simulated time (their
 * disks lose what was not flushed, the last write torn), up to P = 2 down
 * at once, each restarted 1-3 s later: the client writes its stripes
 * around the nodes down and retries what a dead leader did not answer.
 * Afterwards every slot reads back, through a fresh client, as exactly the
 * version its last acknowledged write put there — or a later write that
 * failed or was not answered — never older, never a mix: with every node
 * up, and again with the node of slot 0's first data fragment down for
 * good (that read decodes).
 */
static void
run_data(uint64_t seed)
{
	static struct world w;
	static uint8_t buf[DW_STRIPE];
	int acked[DW_SLOTS], maybe_hi[DW_SLOTS], next[DW_SLOTS];
	uint64_t back_at[N + 1] = { 0 }, kill_at, ino;
	int crashes = 0, nacked = 0, ndown = 0;
	struct stat st;
	sh_client *c;
	sh_file *f = NULL;
	sh_fs *fs;

	world_start_opts(&w, seed, 4ull << 20, true);
	c = world_client(&w, DW_FRAG / 1024, 1);
	SH_ASSERT_OK(sh_fs_open(c, "fs1", &fs));
	SH_ASSERT_OK(sh_open(fs, "/data", O_CREAT | O_EXCL | O_WRONLY, 0644, &f));
	for (int s = 0; s < DW_SLOTS; s++) {
		acked[s] = maybe_hi[s] = -1;
		next[s] = 0;
	}
	kill_at = sim_now(w.sim) + SH_NSEC_PER_SEC;
	for (int i = 0; i < DW_WRITES; i++) {
		unsigned slot = (unsigned)(sh_rand_u64(&w.rng) % DW_SLOTS);
		int v = next[slot]++;
		uint64_t now = sim_now(w.sim);

		/* the schedule, by simulated time: restarts due, then a kill when due */
		for (int n = 1; n <= N; n++)
			if (back_at[n] && now >= back_at[n]) {
				node_start(&w.n[n]);
				back_at[n] = 0;
				ndown--;
			}
		if (now >= kill_at && ndown < DW_P) {
			int n = 1 + (int)(sh_rand_u64(&w.rng) % N);

			if (back_at[n] == 0) {
				node_stop(&w, &w.n[n], true);
				w.n[n].up = false;
				back_at[n] = sim_now(w.sim) + SH_NSEC_PER_SEC +
					     sh_rand_u64(&w.rng) % (2 * SH_NSEC_PER_SEC);
				ndown++;
				crashes++;
			}
			kill_at = sim_now(w.sim) + SH_NSEC_PER_SEC +
				  sh_rand_u64(&w.rng) % (2 * SH_NSEC_PER_SEC);
		}
		SH_ASSERT_LT(v, 1000);
		slot_bytes(seed, slot, (unsigned)v, buf);
		maybe_hi[slot] = v; /* sent: it may have landed, acknowledged or not */
		if (dw_put(fs, &f, slot, buf) == 0)
			acked[slot] = v, nacked++;
		sim_run_for(w.sim, 40 * SH_NSEC_PER_MSEC); /* the writer's own work: time passes */
	}
	if (f != NULL)
		(void)sh_close(f);
	for (int n = 1; n <= N; n++)
		if (back_at[n])
			node_start(&w.n[n]);
	sim_run_for(w.sim, 4 * SH_NSEC_PER_SEC);
	SH_ASSERT_OK(sh_stat(fs, "/data", &st));
	ino = st.st_ino;
	sh_fs_close(fs);
	sh_client_close(c);
	/* most writes get through: the test checks something */
	SH_ASSERT_MSG(nacked >= DW_WRITES / 2, "seed %llu: only %d of %d writes acknowledged",
		      (unsigned long long)seed, nacked, DW_WRITES);
	SH_ASSERT_MSG(crashes >= 3, "seed %llu: only %d crashes", (unsigned long long)seed,
		      crashes);
	dw_check(&w, seed, acked, maybe_hi, crashes, "all up", 2);
	{
		/* the node of a data fragment down for good: that slot's read decodes */
		int a = 1;

		for (unsigned s = 0; s < DW_SLOTS; s++) {
			struct meta_extent e;

			if (acked[s] >= 0 && extent_at(&w, ino, (uint64_t)s * DW_STRIPE, &e) == 0) {
				a = (int)e.targets[0]; /* (a target's id is its node's) */
				break;
			}
		}
		node_stop(&w, &w.n[a], true);
		w.n[a].up = false;
		sim_run_for(w.sim, 3 * SH_NSEC_PER_SEC);
	}
	dw_check(&w, seed, acked, maybe_hi, crashes, "one node down", 3);
	world_end(&w);
}

TEST(data_acked_stripes_survive_crashes)
{
	run_data(sh_test_seed());
}

/* ---- a node marked down while it is alive ---- */

static bool
leads_nothing(void *arg)
{
	struct node *n = arg;
	struct msvc_group_info gi[64];
	unsigned k = msvc_groups(n->svc, gi, 64);

	for (unsigned i = 0; i < k && i < 64; i++)
		if (gi[i].ready)
			return false;
	return true;
}

/*
 * The configuration marks a node down while it is alive (its management
 * network cut, say): clients skip it, so its groups' leaders hand over to
 * other members, and creates go on in every bucket. Back up, it may lead
 * again.
 */
TEST(meta_leaders_marked_down_hand_over)
{
	static struct world w;
	int victim = 0;

	world_start(&w, sh_test_seed(), 4ull << 20);
	for (int i = 1; i <= N && victim == 0; i++)
		if (!leads_nothing(&w.n[i]))
			victim = i;
	SH_ASSERT(victim > 0);
	set_state(&w, victim, CFG_DOWN);
	SH_ASSERT_MSG(sim_run_until(w.sim, leads_nothing, &w.n[victim], 10 * SH_NSEC_PER_SEC),
		      "seed %llu: node %d marked down still leads", (unsigned long long)w.seed,
		      victim);
	for (int i = 0; i < 3 * NBUCKETS; i++) {
		char name[16];
		uint64_t ino;
		int rc;

		snprintf(name, sizeof(name), "m%d", i);
		rc = mk(&w, META_ROOT_INO, name, META_REG, &ino);
		SH_ASSERT_MSG(rc == 0, "seed %llu: create %s with node %d marked down: %s",
			      (unsigned long long)w.seed, name, victim, sh_errname(rc));
	}
	set_state(&w, victim, CFG_UP);
	world_end(&w);
}

/* ---- a dead node's replicas replaced ---- */

/* Every group's leader has the members the configuration names as its voters, all caught up. */
static bool
groups_match_cfg(void *arg)
{
	struct world *w = arg;
	const struct mplace *pl = mroute_place(w->rt);

	for (uint32_t g = 0; g < pl->ngroups; g++) {
		const uint64_t *mem = pl->members + (size_t)g * pl->replicas;
		struct msvc_group_info lead = { 0 };
		bool found = false;

		for (int i = 1; i <= N && !found; i++) {
			struct msvc_group_info gi[64];
			unsigned n = groups_of(w, i, gi);

			for (unsigned k = 0; k < n && !found; k++)
				if (gi[k].index == g && gi[k].ready) {
					lead = gi[k];
					found = true;
				}
		}
		if (!found || lead.nvoters != pl->replicas)
			return false;
		for (uint32_t k = 0; k < pl->replicas; k++) {
			bool voter = false;
			int node = (int)(mem[k] >> 8);
			struct msvc_group_info gi[64];
			unsigned n;

			for (unsigned v = 0; v < lead.nvoters; v++)
				voter |= lead.voters[v] == mem[k] >> 8;
			if (!voter || node < 1 || node > N || !w->n[node].up)
				return false;
			/* the member has the group's state: it applied what the leader committed */
			n = groups_of(w, node, gi);
			voter = false;
			for (unsigned v = 0; v < n; v++)
				voter |= gi[v].index == g && gi[v].applied >= lead.commit;
			if (!voter)
				return false;
		}
	}
	return true;
}

static bool
holds_no_group(void *arg)
{
	struct node *n = arg;

	return msvc_groups(n->svc, NULL, 0) == 0;
}

/* Every node's groups' log is loaded (and the configuration applied). */
static bool
log_loaded(void *arg)
{
	struct world *w = arg;

	for (int i = 1; i <= N; i++)
		if (w->n[i].up && msvc_keeps_group(w->n[i].svc, w->fs, 0) == -EAGAIN)
			return false;
	return true;
}

static void
push_cfg(struct world *w)
{
	for (int i = 1; i <= N; i++)
		if (w->n[i].up)
			SH_ASSERT_OK(msvc_set_cfg(w->n[i].svc, w->cfg));
	SH_ASSERT_OK(mroute_set_cfg(w->rt, w->cfg));
}

static void
expect_files(struct world *w, const uint64_t *inos, int n, const char *when)
{
	for (int i = 0; i < n; i++) {
		char name[16];
		struct meta_dentry d;
		struct meta_inode in;
		int rc;

		snprintf(name, sizeof(name), "r%d", i);
		rc = lookup(w, META_ROOT_INO, name, &d);
		SH_ASSERT_MSG(rc == 0 && d.ino == inos[i], "seed %llu: %s: %s: %s",
			      (unsigned long long)w->seed, when, name, sh_errname(rc));
		SH_ASSERT_OK(getattr(w, d.ino, &in));
		SH_ASSERT_EQ(in.uid, 1000u);
	}
}

/*
 * A node dies for good: the configuration puts another node in its place
 * in every group it was in, each group's leader adds the new member, brings
 * it up to date and removes the dead one, so every group has five voters
 * again and survives two more failures. Creates made before and after are
 * all there once two more of the original members are killed; the dead node,
 * back, drops the copies it no longer serves.
 */
static void
run_replace(uint64_t seed)
{
	static struct world w;
	uint64_t inos[2 * NFILES];
	int victim, replaced = 0, killed[2];
	uint32_t g;
	uint64_t old, node;
	char msg[CFG_MSG_MAX];

	world_start(&w, seed, 1ull << 20); /* a small log: new members get the whole state */
	for (int i = 0; i < NFILES; i++) {
		char name[16];

		snprintf(name, sizeof(name), "r%d", i);
		SH_ASSERT_OK(mk(&w, META_ROOT_INO, name, META_REG, &inos[i]));
	}
	victim = 1 + (int)sh_rand_below(&w.rng, N);
	node_stop(&w, &w.n[victim], true);
	set_state(&w, victim, CFG_DOWN);
	/* what the configuration's leader proposes, one group at a time */
	while (cfg_mgroup_replacement(w.cfg, UINT64_MAX >> 1, 0, &g, &old, &node) == 0) {
		struct cfg_cmd c = {
			.op = CFG_OP_MGROUP_REPLACE, .group = g, .id = old, .node2 = node
		};

		SH_ASSERT_EQ(old, (uint64_t)victim);
		SH_ASSERT_MSG(cfg_apply(w.cfg, &c, msg, sizeof(msg)) == 0, "%s", msg);
		replaced++;
		push_cfg(&w);
		sim_run_for(w.sim, 200 * SH_NSEC_PER_MSEC);
	}
	SH_ASSERT_GT(replaced, 0);
	for (uint32_t b = 0; b < NBUCKETS; b++)
		for (uint32_t k = 0; k < w.cfg->replicas; k++)
			SH_ASSERT_NE(cfg_bucket(w.cfg, b)[k], (uint64_t)victim);
	SH_ASSERT_MSG(sim_run_until(w.sim, groups_match_cfg, &w, 60 * SH_NSEC_PER_SEC),
		      "seed %llu: node %d's groups never got their new members",
		      (unsigned long long)seed, victim);
	for (int i = NFILES; i < 2 * NFILES; i++) {
		char name[16];

		snprintf(name, sizeof(name), "r%d", i);
		SH_ASSERT_OK(mk(&w, META_ROOT_INO, name, META_REG, &inos[i]));
	}
	/* two more of the members that were there from the start */
	for (int k = 0; k < 2; k++) {
		do
			killed[k] = 1 + (int)sh_rand_below(&w.rng, N);
		while (killed[k] == victim || (k == 1 && killed[1] == killed[0]));
		node_stop(&w, &w.n[killed[k]], true);
		set_state(&w, killed[k], CFG_DOWN);
	}
	expect_files(&w, inos, 2 * NFILES, "after two more members were killed");
	/* the replaced node comes back: it serves nothing and keeps nothing */
	set_state(&w, victim, CFG_UP);
	node_start(&w.n[victim]);
	SH_ASSERT(sim_run_until(w.sim, holds_no_group, &w.n[victim], 5 * SH_NSEC_PER_SEC));
	SH_ASSERT(sim_run_until(w.sim, log_loaded, &w, 5 * SH_NSEC_PER_SEC));
	for (uint32_t i = 0; i < mroute_place(w.rt)->ngroups; i++)
		SH_ASSERT_MSG(msvc_keeps_group(w.n[victim].svc, w.fs, i) == 0,
			      "seed %llu: node %d keeps group %u's log", (unsigned long long)seed,
			      victim, i);
	world_end(&w);
}

TEST(meta_dead_node_replicas_replaced)
{
	for (int i = 0; i < 3; i++)
		run_replace(sh_test_seed() * 10 + (uint64_t)i);
}

/* ---- leader balancing ---- */

struct spread {
	struct world *w;
	int most, least;
};

/* Every group has a leader, and the spread of how many each node leads is at most one. */
static bool
leaders_spread(void *arg)
{
	struct spread *sp = arg;
	struct world *w = sp->w;
	int led[N + 1] = { 0 }, total = 0;

	sp->most = 0;
	sp->least = 1 << 30;
	for (int i = 1; i <= N; i++) {
		struct msvc_group_info gi[64];
		unsigned n = groups_of(w, i, gi);

		for (unsigned k = 0; k < n; k++)
			led[i] += gi[k].ready;
		total += led[i];
	}
	for (int i = 1; i <= N; i++) {
		sp->most = led[i] > sp->most ? led[i] : sp->most;
		sp->least = led[i] < sp->least ? led[i] : sp->least;
	}
	/* every group led (none in an election) */
	return total == (int)mroute_place(w->rt)->ngroups && sp->most - sp->least <= 1;
}

/*
 * A node marked down hands its groups' leadership over; back up, it leads
 * nothing until the others hand it a share: a node that leads two groups
 * more than a member of one of them hands one over, until every node leads
 * one (six groups, six nodes).
 */
TEST(meta_leaders_balance)
{
	static struct world w;
	struct spread sp = { .w = &w };

	for (int round = 0; round < 2; round++) {
		int victim;

		world_start(&w, sh_test_seed() * 10 + (uint64_t)round, 4ull << 20);
		victim = 1 + (int)sh_rand_below(&w.rng, N);
		set_state(&w, victim, CFG_DOWN);
		SH_ASSERT(sim_run_until(w.sim, leads_nothing, &w.n[victim], 10 * SH_NSEC_PER_SEC));
		set_state(&w, victim, CFG_UP);
		SH_ASSERT_MSG(sim_run_until(w.sim, leaders_spread, &sp, 60 * SH_NSEC_PER_SEC),
			      "seed %llu: leaders never spread (most %d, least %d)",
			      (unsigned long long)w.seed, sp.most, sp.least);
		SH_ASSERT(!leads_nothing(&w.n[victim]));
		/* and it stays so: no hand-over goes back and forth */
		sim_run_for(w.sim, 20 * SH_NSEC_PER_SEC);
		SH_ASSERT_MSG(leaders_spread(&sp), "seed %llu: spread again (most %d, least %d)",
			      (unsigned long long)w.seed, sp.most, sp.least);
		world_end(&w);
	}
}

/* ---- open files without names (msvc_hold.c) ---- */

/* MP_HOLD for ino (0: none) with more inos renewed or given back; the status. */
static int
hold(struct world *w, uint64_t ino, uint32_t flags, const uint64_t *more, unsigned n,
     struct meta_inode *attr)
{
	uint8_t data[64 * 8];
	struct mp_req q = { .kind = MP_HOLD,
			    .bucket = meta_ino_bucket(ino ? ino : more[0]),
			    .ino = ino,
			    .max = flags,
			    .data = data,
			    .dlen = (size_t)n * 8 };
	struct call *c = sh_calloc(1, sizeof(*c));
	int rc;

	for (unsigned i = 0; i < n; i++)
		for (int b = 0; b < 8; b++)
			data[i * 8 + b] = (uint8_t)(more[i] >> (8 * b));
	rc = call(w, &q, c);
	if (rc == 0 && attr != NULL)
		*attr = c->r.attr;
	sh_free(c);
	return rc;
}

/* Run for ns, renewing ino's hold every 3 s as a client does (if renew). */
static void
hold_for(struct world *w, uint64_t ino, uint64_t ns, bool renew)
{
	for (uint64_t t = 0; t < ns; t += 3 * SH_NSEC_PER_SEC) {
		if (renew)
			SH_ASSERT_OK(hold(w, 0, 0, &ino, 1, NULL));
		sim_run_for(w->sim, 3 * SH_NSEC_PER_SEC);
	}
}

/*
 * A file removed while a client holds it open stays (nlink 0) through the
 * renewals and a kill -9 of its bucket's leader, and goes once given back;
 * one whose holder stops renewing goes after the hold runs out; one open
 * nowhere goes with its remove; a new open by name of a file without names
 * is refused (ESTALE: the caller looks the name up again).
 */
TEST(meta_open_files_held_through_leader_crash)
{
	static struct world w;
	struct meta_inode in;
	uint64_t held, gone, lapsed;
	int lead, rc;

	world_start(&w, sh_test_seed(), 4ull << 20);
	SH_ASSERT_OK(mk(&w, META_ROOT_INO, "held", META_REG, &held));
	SH_ASSERT_OK(mk(&w, META_ROOT_INO, "gone", META_REG, &gone));
	SH_ASSERT_OK(mk(&w, META_ROOT_INO, "lapsed", META_REG, &lapsed));
	/* the creator's holds run out, and the leader has led long enough to know every hold */
	run_steady_leader(&w, meta_ino_bucket(gone), 11 * SH_NSEC_PER_SEC);
	/* open nowhere: it goes with its remove */
	SH_ASSERT_OK(rm(&w, META_ROOT_INO, "gone", false));
	rc = getattr(&w, gone, &in);
	SH_ASSERT_MSG(rc == -ESTALE, "seed %llu: a file open nowhere after its remove: %s",
		      (unsigned long long)w.seed, sh_errname(rc));
	/* held: an orphan through renewals and a new leader */
	SH_ASSERT_OK(hold(&w, held, MP_HOLD_FRESH, NULL, 0, &in));
	SH_ASSERT_EQ(in.nlink, 1u);
	SH_ASSERT_OK(hold(&w, lapsed, 0, NULL, 0, NULL));
	SH_ASSERT_OK(rm(&w, META_ROOT_INO, "held", false));
	SH_ASSERT_OK(rm(&w, META_ROOT_INO, "lapsed", false));
	SH_ASSERT_OK(getattr(&w, held, &in));
	SH_ASSERT_EQ(in.nlink, 0u);
	SH_ASSERT_EQ(hold(&w, held, MP_HOLD_FRESH, NULL, 0, NULL), -ESTALE);
	hold_for(&w, held, 6 * SH_NSEC_PER_SEC, true);
	lead = leader_node(&w, meta_ino_bucket(held));
	SH_ASSERT(lead > 0);
	node_stop(&w, &w.n[lead], true);
	hold_for(&w, held, 6 * SH_NSEC_PER_SEC, true);
	node_start(&w.n[lead]);
	hold_for(&w, held, 18 * SH_NSEC_PER_SEC, true);
	rc = getattr(&w, held, &in);
	SH_ASSERT_MSG(rc == 0 && in.nlink == 0,
		      "seed %llu: a file held open, 30 s and a leader crash later: %s",
		      (unsigned long long)w.seed, sh_errname(rc));
	/* the holder that stopped renewing: gone after its hold ran out */
	rc = getattr(&w, lapsed, &in);
	SH_ASSERT_MSG(rc == -ESTALE, "seed %llu: a lapsed hold kept its file: %s",
		      (unsigned long long)w.seed, sh_errname(rc));
	/* given back: it goes */
	SH_ASSERT_OK(hold(&w, held, MP_HOLD_RELEASE, NULL, 0, NULL));
	hold_for(&w, held, 3 * SH_NSEC_PER_SEC, false);
	rc = getattr(&w, held, &in);
	SH_ASSERT_MSG(rc == -ESTALE, "seed %llu: a file given back stays: %s",
		      (unsigned long long)w.seed, sh_errname(rc));
	world_end(&w);
}

/* A local handler that answers inside the call it is handed, as msvc's may. */
static int
answer_at_once(void *arg, const struct mp_req *req, mroute_cb cb, void *cbarg)
{
	struct mp_reply r = { 0 };

	(void)req;
	(*(unsigned *)arg)++;
	cb(cbarg, 0, &r);
	return 1;
}

struct counted {
	unsigned calls, answers;
};

static void
on_counted(void *arg, int status, const struct mp_reply *r)
{
	(void)status;
	(void)r;
	((struct counted *)arg)->answers++;
}

static bool
all_answered(void *arg)
{
	const struct counted *k = arg;

	return k->answers == k->calls;
}

/*
 * mroute_call never runs its callback before it returns (env/README.md),
 * also where the first attempt goes to this node's own handler and that
 * answers at once: a call to every bucket from a member of its group.
 */
TEST(meta_route_answers_after_the_call_returns)
{
	static struct world w;
	struct mroute *rt;
	struct counted k = { 0 };
	unsigned local = 0;

	world_start(&w, sh_test_seed(), 4ull << 20);
	SH_ASSERT_OK(mroute_create(w.n[1].net, &rt));
	SH_ASSERT_OK(mroute_set_cfg(rt, w.cfg));
	mroute_set_local(rt, answer_at_once, &local);
	for (uint32_t b = 0; b < mroute_place(rt)->nbuckets; b++) {
		struct mp_req q = {
			.kind = MP_GETATTR, .fs = w.fs, .bucket = (uint16_t)b, .ino = META_ROOT_INO
		};
		unsigned before = k.answers;

		SH_ASSERT_OK(mroute_call(rt, &q, 5 * SH_NSEC_PER_SEC, on_counted, &k));
		k.calls++;
		SH_ASSERT_MSG(k.answers == before, "bucket %u: answered inside mroute_call", b);
	}
	SH_ASSERT(sim_run_until(w.sim, all_answered, &k, 30 * SH_NSEC_PER_SEC));
	SH_ASSERT(local > 0); /* some went to the handler here */
	mroute_destroy(rt);
	world_end(&w);
}

/*
 * A leader the client lost for a moment (its link cut longer than one
 * attempt's limit) leads again as soon as it is heard from: a create that
 * timed out at it goes back to it then, not once the suspicion that kept
 * it off (3 s) runs out while its followers name it.
 */
TEST(meta_route_back_to_a_leader_heard_again)
{
	static struct world w;
	static struct call c;
	struct meta_cmd mc = { .op = META_OP_CREATE, .type = META_REG, .mode = 0644 };
	uint64_t ino, healed;
	uint16_t b;
	int lead;

	world_start(&w, sh_test_seed(), 4ull << 20);
	snprintf(mc.name, sizeof(mc.name), "cut");
	mc.parent = META_ROOT_INO;
	mc.tag = sh_rand_u64(&w.rng) | 1;
	b = dbucket(META_ROOT_INO, mc.name);
	run_steady_leader(&w, b, SH_NSEC_PER_SEC);
	for (unsigned i = 0;; i++) { /* the client knows the leader, with a session to it */
		char warm[16];

		snprintf(warm, sizeof(warm), "warm%u", i);
		if (dbucket(META_ROOT_INO, warm) == b) {
			SH_ASSERT_OK(mk(&w, META_ROOT_INO, warm, META_REG, &ino));
			break;
		}
	}
	lead = leader_node(&w, b);
	SH_ASSERT(lead > 0);
	sim_link_cut(w.csn, w.n[lead].sn, true);
	sim_link_cut(w.n[lead].sn, w.csn, true);
	cmd_start(&w, b, &mc, &c);
	sim_run_for(w.sim, 1200 * SH_NSEC_PER_MSEC); /* past an attempt at the leader (800 ms) */
	SH_ASSERT_MSG(!c.done, "seed %llu: the create ended with the leader cut off: %s",
		      (unsigned long long)w.seed, sh_errname(c.status));
	sim_link_cut(w.csn, w.n[lead].sn, false);
	sim_link_cut(w.n[lead].sn, w.csn, false);
	healed = sim_now(w.sim);
	SH_ASSERT(sim_run_until(w.sim, call_done, &c, 10 * SH_NSEC_PER_SEC));
	SH_ASSERT_MSG(c.status == 0, "seed %llu: %s", (unsigned long long)w.seed,
		      sh_errname(c.status));
	SH_ASSERT_MSG(leader_node(&w, b) == lead, "seed %llu: the leader changed",
		      (unsigned long long)w.seed);
	SH_ASSERT_MSG(sim_now(w.sim) - healed < 700 * SH_NSEC_PER_MSEC,
		      "seed %llu: the create ended %llu ms after the link came back",
		      (unsigned long long)w.seed,
		      (unsigned long long)((sim_now(w.sim) - healed) / SH_NSEC_PER_MSEC));
	printf("  the create ended %llu ms after the link came back\n",
	       (unsigned long long)((sim_now(w.sim) - healed) / SH_NSEC_PER_MSEC));
	world_end(&w);
}
