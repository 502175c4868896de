// SPDX-License-Identifier: Apache-2.0
/* A target on a real file with io_uring and O_DIRECT: format, append, read, release, reopen. */
#include <errno.h>
#include <stdio.h>

#include "../../../src/env/env_real.h"
#include "../../../src/store/store.h"
#include "../../lib/test.h"

struct w {
	int done, rc;
};

static void
cb(void *arg, int rc)
{
	struct w *w = arg;

	w->done++;
	w->rc = rc;
}

static void
wait_n(struct env *env, struct w *w, int n)
{
	uint64_t end = sh_clock_mono_ns() + 20 * SH_NSEC_PER_SEC;

	while (w->done < n && sh_clock_mono_ns() < end)
		SH_ASSERT_OK(env_real_run_once(env, 10 * SH_NSEC_PER_MSEC));
	SH_ASSERT_EQ(w->done, n);
}

TEST(store_real_file_round_trip)
{
	struct env *env = env_real_create(NULL);
	struct store_format_opts fo = { .target_id = 42, .seg_size = 1u << 20 };
	struct store *s;
	struct store_stats st;
	struct w w = { 0 };
	char path[4200];
	static uint8_t data[64][128 << 10], got[128 << 10];
	struct sh_rand rng;
	int rc;

	snprintf(path, sizeof(path), "%s/drive", sh_test_dir());
	sh_rand_seed(&rng, sh_test_seed());
	rc = store_format(env, path, 64u << 20, &fo, cb, &w);
	if (rc == -EINVAL)
		sh_test_skip("no O_DIRECT on %s", path);
	if (rc == -ENOSYS)
		sh_test_skip("io_uring is not available here");
	SH_ASSERT_OK(rc);
	wait_n(env, &w, 1);
	SH_ASSERT_OK(w.rc);
	w.done = 0;
	SH_ASSERT_OK(store_open(env, path, NULL, &s, cb, &w));
	wait_n(env, &w, 1);
	SH_ASSERT_OK(w.rc);
	SH_ASSERT_EQ(store_target_id(s), 42);
	/* 64 fragments of 128 KiB, all in flight at once */
	w.done = 0;
	for (int i = 0; i < 64; i++) {
		sh_rand_fill(&rng, data[i], sizeof(data[i]));
		SH_ASSERT_OK(store_append(s, 1000 + (uint64_t)i, (uint32_t)i % 6, data[i],
					  sizeof(data[i]) - (uint32_t)i, cb, &w));
	}
	wait_n(env, &w, 64);
	SH_ASSERT_OK(w.rc);
	store_stats(s, &st);
	SH_ASSERT_EQ(st.fragments, 64);
	SH_ASSERT_LT(st.fsyncs, 64); /* group commit */
	/* a release, then a reopen */
	w.done = 0;
	SH_ASSERT_OK(store_release(s, 1000, 0, cb, &w));
	wait_n(env, &w, 1);
	store_close(s);
	w.done = 0;
	SH_ASSERT_OK(store_open(env, path, NULL, &s, cb, &w));
	wait_n(env, &w, 1);
	SH_ASSERT_OK(w.rc);
	store_stats(s, &st);
	SH_ASSERT_EQ(st.fragments, 63);
	SH_ASSERT_EQ(store_frag_len(s, 1000, 0), -ENOENT);
	for (int i = 1; i < 64; i++) {
		uint32_t len = sizeof(data[i]) - (uint32_t)i;

		w.done = 0;
		SH_ASSERT_OK(
		    store_read(s, 1000 + (uint64_t)i, (uint32_t)i % 6, 0, len, got, cb, &w));
		wait_n(env, &w, 1);
		SH_ASSERT_EQ(w.rc, (int)len);
		SH_ASSERT_MEMEQ(got, data[i], len);
	}
	/* listing by age (the orphan sweep): everything before now, nothing before the start */
	{
		static struct store_key keys[128];
		uint64_t now = store_epoch(s);
		uint32_t cur = 0;
		unsigned n = 0, got_n;
		bool seen[64] = { false };

		SH_ASSERT_EQ(store_list(s, 1, &cur, keys, 128), 0u);
		cur = 0;
		do {
			got_n = store_list(s, now, &cur, keys + n, 128 - n);
			n += got_n;
		} while (cur != 0 && n < 128);
		SH_ASSERT_EQ(n, 63u);
		for (unsigned i = 0; i < n; i++) {
			SH_ASSERT(keys[i].stripe >= 1001 && keys[i].stripe < 1064);
			SH_ASSERT_EQ(keys[i].idx, (uint32_t)(keys[i].stripe - 1000) % 6);
			SH_ASSERT(!seen[keys[i].stripe - 1000]);
			seen[keys[i].stripe - 1000] = true;
		}
		/* small pages: whole segments each, all of them in the end */
		cur = 0;
		n = 0;
		do
			n += store_list(s, now, &cur, keys, 4);
		while (cur != 0);
		SH_ASSERT_LE(n, 63u);
		SH_ASSERT_GE(n, 4u);
	}
	/* a 4 KiB read in the middle, unaligned */
	w.done = 0;
	SH_ASSERT_OK(store_read(s, 1010, 4, 12345, 4096, got, cb, &w));
	wait_n(env, &w, 1);
	SH_ASSERT_EQ(w.rc, 4096);
	SH_ASSERT_MEMEQ(got, data[10] + 12345, 4096);
	store_close(s);
	env_real_run_once(env, 0);
	env_real_destroy(env);
}

/* Drives that hold 64 segments of 16 MiB get them; smaller ones 4 MiB (reserve and cleaning). */
TEST(store_default_segment_size)
{
	SH_ASSERT_EQ(store_default_seg_size(64ull << 20), 4u << 20);
	SH_ASSERT_EQ(store_default_seg_size(1ull << 30), 4u << 20);
	SH_ASSERT_EQ(store_default_seg_size((1ull << 30) + (1u << 20)), 16u << 20);
	SH_ASSERT_EQ(store_default_seg_size(4ull << 40), 16u << 20);
}
