// SPDX-License-Identifier: Apache-2.0
/* A full target says -ENOSPC and keeps serving reads; cleaning gives space back; corruption is
 * caught. */
#include <errno.h>
#include <stdio.h>

#include "../../../src/env/env_sim.h"
#include "../../../src/store/store.h"
#include "../../lib/test.h"

#define SEG (64u << 10)

struct t {
	struct sim *sim;
	struct env *env;
	struct store *st;
	int done, rc, acks, fails;
};

static void
cb(void *arg, int rc)
{
	struct t *t = arg;

	t->done++;
	t->rc = rc;
	if (rc >= 0)
		t->acks++;
	else
		t->fails++;
}

static bool
one_done(void *arg)
{
	return ((struct t *)arg)->done > 0;
}

static void
wait_one(struct t *t)
{
	t->done = 0;
	SH_ASSERT(sim_run_until(t->sim, one_done, t, 10 * SH_NSEC_PER_SEC));
}

static void
setup(struct t *t, uint64_t seed, uint32_t nsegs)
{
	struct store_format_opts fo = { .target_id = 9, .seg_size = SEG };

	memset(t, 0, sizeof(*t));
	t->sim = sim_create(seed);
	t->env = sim_node_env(sim_node_create(t->sim, "t", "127.0.0.4"));
	SH_ASSERT_OK(store_format(t->env, "d", (1u << 20) + (uint64_t)nsegs * SEG, &fo, cb, t));
	wait_one(t);
	SH_ASSERT_OK(t->rc);
	SH_ASSERT_OK(store_open(t->env, "d", NULL, &t->st, cb, t));
	wait_one(t);
	SH_ASSERT_OK(t->rc);
	t->acks = t->fails = t->done = 0;
}

/* Per-append outcome, for the fill phase. */
static int outcome[4096]; /* 0 pending, 1 acked, -1 failed */

static void
append_cb(void *arg, int rc)
{
	outcome[(uintptr_t)arg] = rc == 0 ? 1 : -1;
}

static void
fill(uint8_t *p, size_t n, uint64_t k)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(k * 7 + i);
}

TEST(store_full_then_space_comes_back)
{
	static struct t t;
	static uint8_t buf[3 * STORE_BLOCK], got[3 * STORE_BLOCK];
	struct store_stats st;
	uint64_t n = 0;
	int rc;

	setup(&t, sh_test_seed(), 10);
	/* fill until the target refuses */
	memset(outcome, 0, sizeof(outcome));
	for (;;) {
		fill(buf, sizeof(buf), n);
		rc = store_append(t.st, n, 1, buf, sizeof(buf), append_cb, (void *)(uintptr_t)n);
		if (rc == -ENOSPC)
			break;
		SH_ASSERT_OK(rc);
		n++;
		SH_ASSERT_LT(n, SH_ARRAY_SIZE(outcome));
		sim_run_for(t.sim, 100 * SH_NSEC_PER_USEC);
	}
	sim_run_for(t.sim, 100 * SH_NSEC_PER_MSEC);
	SH_ASSERT_GT(n, 10);
	/* at the very edge an accepted append may still end with -ENOSPC (segment tails) */
	{
		uint64_t failed = 0;

		for (uint64_t k = 0; k < n; k++) {
			SH_ASSERT_NE(outcome[k], 0); /* every one answered */
			failed += outcome[k] < 0;
		}
		SH_ASSERT_LE(failed, n / 4);
	}
	store_stats(t.st, &st);
	SH_ASSERT_LE(st.segs_free, 3); /* the reserve, and less than one segment more */
	/* reads go on (fragment 3 was acknowledged long before the end) */
	SH_ASSERT_OK(store_read(t.st, 3, 1, 100, 5000, got, cb, &t));
	wait_one(&t);
	SH_ASSERT_EQ(t.rc, 5000);
	fill(buf, sizeof(buf), 3);
	SH_ASSERT_MEMEQ(got, buf + 100, 5000);
	/* release every other fragment: cleaning turns the garbage into free segments */
	for (uint64_t k = 0; k < n; k += 2)
		if (outcome[k] > 0)
			SH_ASSERT_OK(store_release(t.st, k, 1, cb, &t));
	sim_run_for(t.sim, 500 * SH_NSEC_PER_MSEC);
	store_clean_kick(t.st);
	sim_run_for(t.sim, 500 * SH_NSEC_PER_MSEC);
	store_stats(t.st, &st);
	SH_ASSERT_GT(st.cleaned_segs, 0);
	SH_ASSERT_GT(st.moved_frags, 0);
	SH_ASSERT_LE(st.fragments, n / 2);
	fill(buf, sizeof(buf), 1000);
	SH_ASSERT_OK(store_append(t.st, 1000, 1, buf, sizeof(buf), cb, &t));
	wait_one(&t);
	SH_ASSERT_OK(t.rc);
	store_stats(t.st, &st);
	/* everything that should be there still is, moved or not */
	for (uint64_t k = 1; k < n; k += 2) {
		if (outcome[k] < 0) {
			SH_ASSERT_EQ(store_frag_len(t.st, k, 1), -ENOENT); /* refused: not there */
			continue;
		}
		fill(buf, sizeof(buf), k);
		SH_ASSERT_OK(store_read(t.st, k, 1, 0, sizeof(buf), got, cb, &t));
		wait_one(&t);
		SH_ASSERT_EQ(t.rc, (int)sizeof(buf));
		SH_ASSERT_MEMEQ(got, buf, sizeof(buf));
	}
	SH_ASSERT_ERR(store_read(t.st, 0, 1, 0, 10, got, cb, &t), -ENOENT);
	store_close(t.st);
	/* and after a reopen */
	SH_ASSERT_OK(store_open(t.env, "d", NULL, &t.st, cb, &t));
	wait_one(&t);
	SH_ASSERT_OK(t.rc);
	{
		struct store_stats before = st;

		store_stats(t.st, &st);
		SH_ASSERT_EQ(st.fragments, before.fragments);
	}
	SH_ASSERT_EQ(store_frag_len(t.st, 0, 1), -ENOENT);
	SH_ASSERT_EQ(store_frag_len(t.st, 1000, 1), (int64_t)sizeof(buf));
	store_close(t.st);
	sim_destroy(t.sim);
}

struct raw {
	struct env_disk_req r;
	struct iovec iov;
	int done, rc;
};

static void
raw_cb(struct env_disk_req *r, int rc)
{
	struct raw *x = sh_container_of(r, struct raw, r);

	x->done = 1;
	x->rc = rc;
}

static bool
raw_done(void *arg)
{
	return ((struct raw *)arg)->done;
}

static void
raw_io(struct sim *sim, struct env_disk *d, enum env_disk_op op, uint64_t off, uint8_t *blk)
{
	struct raw x = { 0 };

	x.iov = (struct iovec){ blk, STORE_BLOCK };
	x.r = (struct env_disk_req){ .op = op,
				     .off = off,
				     .iov = &x.iov,
				     .iovcnt = op == ENV_DISK_FSYNC ? 0 : 1,
				     .cb = raw_cb };
	SH_ASSERT_OK(env_disk_submit(d, &x.r));
	SH_ASSERT(sim_run_until(sim, raw_done, &x, SH_NSEC_PER_SEC));
	SH_ASSERT_OK(x.rc);
}

static bool
scrubbed(void *arg)
{
	return ((struct t *)arg)->done > 0;
}

TEST(store_flipped_bytes_are_caught)
{
	static struct t t;
	static uint8_t buf[2 * STORE_BLOCK], got[2 * STORE_BLOCK];
	uint8_t *blk = sh_aligned_alloc(STORE_BLOCK, STORE_BLOCK);
	struct env_disk *raw;
	struct store_stats st;

	setup(&t, sh_test_seed(), 8);
	for (uint64_t k = 0; k < 6; k++) {
		fill(buf, sizeof(buf), k);
		SH_ASSERT_OK(store_append(t.st, k, 0, buf, sizeof(buf), cb, &t));
	}
	sim_run_for(t.sim, 50 * SH_NSEC_PER_MSEC);
	SH_ASSERT_EQ(t.acks, 6);
	/*
	 * Segment 0 starts at 1 MiB: its header, then fragment 0's record header,
	 * then its two payload blocks. Flip one byte of the second.
	 */
	SH_ASSERT_OK(env_disk_open(t.env, "d", 0, 0, &raw));
	raw_io(t.sim, raw, ENV_DISK_READ, (1u << 20) + 3 * STORE_BLOCK, blk);
	blk[100] ^= 0x10;
	raw_io(t.sim, raw, ENV_DISK_WRITE, (1u << 20) + 3 * STORE_BLOCK, blk);
	raw_io(t.sim, raw, ENV_DISK_FSYNC, 0, blk);
	env_disk_close(raw);

	/* crcs are per block: the first block still reads (through the copying path) */
	SH_ASSERT_OK(store_read(t.st, 0, 0, 0, 100, got, cb, &t));
	wait_one(&t);
	SH_ASSERT_EQ(t.rc, 100);
	/* the no-copy path (whole aligned blocks into an aligned buffer) checks too */
	{
		uint8_t *al = sh_aligned_alloc(STORE_BLOCK, STORE_BLOCK);

		SH_ASSERT_OK(store_read(t.st, 1, 0, 0, STORE_BLOCK, al, cb, &t));
		wait_one(&t);
		SH_ASSERT_EQ(t.rc, STORE_BLOCK);
		fill(buf, sizeof(buf), 1);
		SH_ASSERT_MEMEQ(al, buf, STORE_BLOCK);
		SH_ASSERT_OK(store_read(t.st, 0, 0, STORE_BLOCK, STORE_BLOCK, al, cb, &t));
		wait_one(&t);
		SH_ASSERT_ERR(t.rc, -EBADMSG);
		sh_free(al);
	}
	/* now marked corrupt: any read of it is refused at once */
	SH_ASSERT_ERR(store_read(t.st, 0, 0, 0, 100, got, cb, &t), -EBADMSG);
	/* scrub finds exactly that one */
	t.done = 0;
	SH_ASSERT_OK(store_scrub(t.st, cb, &t));
	SH_ASSERT_EQ(t.done, 0); /* never inside the call */
	SH_ASSERT(sim_run_until(t.sim, scrubbed, &t, SH_NSEC_PER_SEC));
	SH_ASSERT_EQ(t.rc, 1);
	store_stats(t.st, &st);
	SH_ASSERT_EQ(st.scrubbed_frags, 6);
	SH_ASSERT_GE(st.corrupt_blocks, 1);
	/* the others are intact */
	for (uint64_t k = 1; k < 6; k++) {
		fill(buf, sizeof(buf), k);
		SH_ASSERT_OK(store_read(t.st, k, 0, 0, sizeof(buf), got, cb, &t));
		wait_one(&t);
		SH_ASSERT_EQ(t.rc, (int)sizeof(buf));
		SH_ASSERT_MEMEQ(got, buf, sizeof(buf));
	}
	sh_free(blk);
	store_close(t.st);
	sim_destroy(t.sim);
}

/*
 * A stream of appends never waits for a segment's header: the next segment
 * is opened, and its header written, while the records of the open one are
 * still going out. Only the first segment's records wait for theirs.
 */
TEST(store_next_segment_opened_ahead)
{
	static struct t t;
	static uint8_t buf[8 * STORE_BLOCK], got[8 * STORE_BLOCK];
	struct store_format_opts fo = { .target_id = 9, .seg_size = 1u << 20 };
	/* 32 KiB batches, two in flight: each 1 MiB segment takes many of them */
	struct store_opts so = { .batch_max = 36u << 10, .writes_max = 2 };
	struct store_stats st;
	const uint64_t n = 200; /* 9 blocks each: 28 per segment, 8 segments */

	memset(&t, 0, sizeof(t));
	t.sim = sim_create(sh_test_seed());
	t.env = sim_node_env(sim_node_create(t.sim, "t", "127.0.0.4"));
	SH_ASSERT_OK(store_format(t.env, "d", 16u << 20, &fo, cb, &t));
	wait_one(&t);
	SH_ASSERT_OK(t.rc);
	SH_ASSERT_OK(store_open(t.env, "d", &so, &t.st, cb, &t));
	wait_one(&t);
	SH_ASSERT_OK(t.rc);
	t.acks = 0;
	for (uint64_t k = 0; k < n; k++) {
		fill(buf, sizeof(buf), k);
		SH_ASSERT_OK(store_append(t.st, k, 0, buf, sizeof(buf), cb, &t));
	}
	sim_run_for(t.sim, SH_NSEC_PER_SEC);
	SH_ASSERT_EQ(t.acks, (int)n);
	store_stats(t.st, &st);
	SH_ASSERT_EQ(st.hdr_waits, 1);
	SH_ASSERT_GE(st.segs - st.segs_free, 8);
	/* and all of it reads back after a reopen, the empty segment opened ahead included */
	store_close(t.st);
	SH_ASSERT_OK(store_open(t.env, "d", &so, &t.st, cb, &t));
	wait_one(&t);
	SH_ASSERT_OK(t.rc);
	for (uint64_t k = 0; k < n; k++) {
		fill(buf, sizeof(buf), k);
		SH_ASSERT_OK(store_read(t.st, k, 0, 0, sizeof(buf), got, cb, &t));
		wait_one(&t);
		SH_ASSERT_EQ(t.rc, (int)sizeof(buf));
		SH_ASSERT_MEMEQ(got, buf, sizeof(buf));
	}
	store_close(t.st);
	sim_destroy(t.sim);
}

TEST(store_bad_calls)
{
	static struct t t;
	static uint8_t buf[16];
	struct store *s2;

	setup(&t, sh_test_seed(), 4);
	SH_ASSERT_ERR(store_append(t.st, 1, 0, buf, 0, cb, &t), -EINVAL);
	SH_ASSERT_ERR(store_append(t.st, 1, 0, buf, STORE_MAX_FRAG + 1, cb, &t), -EINVAL);
	SH_ASSERT_ERR(store_append(t.st, 1, 0, NULL, 10, cb, &t), -EINVAL);
	SH_ASSERT_ERR(store_append(t.st, 1, 0, buf, 10, NULL, &t), -EINVAL);
	/* the same checks without the copy (aligned, whole blocks), and past the largest */
	{
		uint8_t *al = sh_aligned_alloc(STORE_BLOCK, STORE_BLOCK);

		SH_ASSERT_ERR(store_append_ref(t.st, 1, 0, al, 0, cb, &t), -EINVAL);
		SH_ASSERT_ERR(store_append_ref(t.st, 1, 0, NULL, STORE_BLOCK, cb, &t), -EINVAL);
		SH_ASSERT_ERR(store_append_ref(t.st, 1, 0, al, STORE_BLOCK, NULL, &t), -EINVAL);
		SH_ASSERT_ERR(
		    store_append_ref(t.st, 1, 0, al, STORE_MAX_FRAG + STORE_BLOCK, cb, &t),
		    -EINVAL);
		sh_free(al);
	}
	SH_ASSERT_ERR(store_read(t.st, 1, 0, 0, 10, buf, cb, &t), -ENOENT);
	SH_ASSERT_ERR(store_release(t.st, 1, 0, cb, &t), -ENOENT);
	SH_ASSERT_OK(store_append(t.st, 1, 0, buf, 16, cb, &t));
	wait_one(&t);
	t.done = 0;
	SH_ASSERT_ERR(store_read(t.st, 1, 0, 10, 10, buf, cb, &t), -ERANGE);
	SH_ASSERT_ERR(store_read(t.st, 1, 0, 17, 1, buf, cb, &t), -ERANGE);
	SH_ASSERT_ERR(store_read(t.st, 1, 0, 0, 0, buf, cb, &t), -EINVAL);
	SH_ASSERT_EQ(t.done, 0);
	/* a drive that was never formatted */
	{
		struct env_disk *d;

		SH_ASSERT_OK(env_disk_open(t.env, "blank", ENV_DISK_CREATE, 4u << 20, &d));
		env_disk_close(d);
		SH_ASSERT_OK(store_open(t.env, "blank", NULL, &s2, cb, &t));
		wait_one(&t);
		SH_ASSERT_ERR(t.rc, SH_ENOTFORMATTED);
		store_close(s2);
	}
	SH_ASSERT_ERR(store_open(t.env, "missing", NULL, &s2, cb, &t), -ENOENT);
	/* a drive too small to hold four segments */
	SH_ASSERT_ERR(store_format(t.env, "tiny", 1u << 20, NULL, cb, &t), -ENOSPC);
	store_close(t.st);
	sim_destroy(t.sim);
}
