// SPDX-License-Identifier: Apache-2.0
/*
 * Drive targets in the simulator: random appends, reads, releases and
 * cleaning, with crashes at random points (unflushed writes lost, the last
 * one torn, or a random subset kept). After every reopen, each fragment
 * reads back as its last acknowledged version or as a version submitted
 * after it, never anything else; released ones stay gone; flipped bytes
 * are reported as -EBADMSG.
 */
#include <errno.h>
#include <stdio.h>

#include "../../../src/env/env_sim.h"
#include "../../../src/store/store.h"
#include "../../lib/test.h"

#define NKEYS 48
#define MAXV  64
#define SEG   (64u << 10)
#define DISK  ((1u << 20) + 48 * SEG)

/* One version of a key: its bytes are derived from (key, ver), or it is a release. */
struct ver {
	uint32_t ver; /* 0: released */
	uint32_t len;
	bool acked;
	bool failed;
};

struct key {
	struct ver v[MAXV];
	int n;	   /* versions submitted */
	int acked; /* index of the newest acked version, -1: none (absent) */
};

struct world {
	struct sim *sim;
	struct sim_node *node;
	struct env *env;
	struct store *st;
	struct key keys[NKEYS];
	uint32_t next_ver;
	int open_rc, opened;
	uint64_t acks, nospc;
	struct sh_rand rng;
};

struct pending {
	struct world *w;
	int key, vi;
	uint8_t *buf;
	uint32_t len;
};

static void
fill(uint8_t *p, uint32_t len, int key, uint32_t ver)
{
	uint64_t st = (uint64_t)key * 1000003 + ver;

	for (uint32_t i = 0; i < len; i += 8) {
		uint64_t x = sh_splitmix64(&st);

		memcpy(p + i, &x, SH_MIN(8u, len - i));
	}
}

static void
on_open(void *arg, int rc)
{
	struct world *w = arg;

	w->open_rc = rc;
	w->opened = 1;
}

static bool
opened(void *arg)
{
	return ((struct world *)arg)->opened;
}

static void
open_store(struct world *w)
{
	struct store_opts o = { .batch_max = 32u << 10, .writes_max = 3 };

	w->opened = 0;
	SH_ASSERT_OK(store_open(w->env, "drive", &o, &w->st, on_open, w));
	SH_ASSERT(sim_run_until(w->sim, opened, w, 10 * SH_NSEC_PER_SEC));
	SH_ASSERT_OK(w->open_rc);
}

static void
on_ack(void *arg, int rc)
{
	struct pending *p = arg;
	struct key *k = &p->w->keys[p->key];

	if (rc == 0) {
		SH_ASSERT_GT(p->vi, k->acked); /* acknowledgements come in order */
		k->v[p->vi].acked = true;
		k->acked = p->vi;
		p->w->acks++;
	} else {
		SH_ASSERT_MSG(rc == -ENOSPC || rc == -ECANCELED, "ack with %d (%s)", rc,
			      sh_errname(rc));
		/* -ENOSPC: never written; -ECANCELED (closed after a crash): maybe written */
		k->v[p->vi].failed = rc == -ENOSPC;
	}
	sh_free(p->buf);
	sh_free(p);
}

/* An operation on key in flight; it will be its next version. */
static struct pending *
pending_new(struct world *w, int key)
{
	struct pending *p = sh_calloc(1, sizeof(*p));

	SH_ASSERT_NOT_NULL(p);
	p->w = w;
	p->key = key;
	p->vi = w->keys[key].n;
	return p;
}

static void
do_append(struct world *w, int key)
{
	struct key *k = &w->keys[key];
	struct pending *p;
	/* a third are whole aligned blocks written from the caller's buffer (no copy) */
	bool ref = sh_rand_below(&w->rng, 3) == 0;
	uint32_t len = ref ? (1 + (uint32_t)sh_rand_below(&w->rng, 3)) * STORE_BLOCK
			   : 1 + (uint32_t)sh_rand_below(&w->rng, 3 * STORE_BLOCK + 100);
	int rc;

	if (k->n == MAXV)
		return;
	p = pending_new(w, key);
	p->len = len;
	p->buf = ref ? sh_aligned_alloc(STORE_BLOCK, len) : sh_malloc(len);
	k->v[k->n] = (struct ver){ .ver = ++w->next_ver, .len = len };
	fill(p->buf, len, key, k->v[k->n].ver);
	rc = ref ? store_append_ref(w->st, (uint64_t)key, 0, p->buf, len, on_ack, p)
		 : store_append(w->st, (uint64_t)key, 0, p->buf, len, on_ack, p);
	if (rc == -ENOSPC) {
		w->nospc++;
		sh_free(p->buf);
		sh_free(p);
		return;
	}
	SH_ASSERT_OK(rc);
	k->n++;
}

static void
do_release(struct world *w, int key)
{
	struct key *k = &w->keys[key];
	struct pending *p;
	int rc;

	if (k->n == MAXV)
		return;
	p = pending_new(w, key);
	k->v[k->n] = (struct ver){ .ver = 0 };
	rc = store_release(w->st, (uint64_t)key, 0, on_ack, p);
	if (rc == -ENOENT) {
		sh_free(p);
		return;
	}
	SH_ASSERT_OK(rc);
	k->n++;
}

struct readback {
	int done, rc;
	uint8_t *buf;
};

static void
on_read(void *arg, int rc)
{
	struct readback *r = arg;

	r->done = 1;
	r->rc = rc;
}

static bool
read_done(void *arg)
{
	return ((struct readback *)arg)->done;
}

/* Does the store's state for key match one of the versions it may be in? */
static void
check_key(struct world *w, int key, bool settled)
{
	struct key *k = &w->keys[key];
	int64_t len = store_frag_len(w->st, (uint64_t)key, 0);
	int first = k->acked < 0 ? 0 : k->acked;
	static uint8_t want[4 * STORE_BLOCK + 200];
	struct readback r = { 0 };
	bool absent_ok = k->acked < 0 ? true : k->v[k->acked].ver == 0;
	bool match = false;

	for (int i = first; i < k->n; i++)
		if (k->v[i].ver == 0 && !k->v[i].failed && (!settled || i == k->acked))
			absent_ok = true;
	if (settled)
		absent_ok = k->acked < 0 || k->v[k->acked].ver == 0;
	if (len < 0) {
		SH_ASSERT_MSG(absent_ok,
			      "key %d is gone but its version %d (ver %u) was acknowledged", key,
			      k->acked, k->acked >= 0 ? k->v[k->acked].ver : 0);
		return;
	}
	r.buf = sh_malloc((size_t)len);
	SH_ASSERT_OK(store_read(w->st, (uint64_t)key, 0, 0, (uint32_t)len, r.buf, on_read, &r));
	SH_ASSERT(sim_run_until(w->sim, read_done, &r, SH_NSEC_PER_SEC));
	SH_ASSERT_EQ(r.rc, len);
	for (int i = k->acked < 0 ? 0 : k->acked; i < k->n && !match; i++) {
		if (k->v[i].ver == 0 || k->v[i].len != len || (settled && i != k->acked))
			continue;
		if (i > k->acked && k->v[i].failed)
			continue;
		fill(want, (uint32_t)len, key, k->v[i].ver);
		match = memcmp(want, r.buf, (size_t)len) == 0;
	}
	if (!match) {
		int older = -1;

		for (int i = 0; i < k->n; i++) {
			if (k->v[i].ver == 0 || k->v[i].len != len)
				continue;
			fill(want, (uint32_t)len, key, k->v[i].ver);
			if (memcmp(want, r.buf, (size_t)len) == 0)
				older = i;
		}
		SH_ASSERT_MSG(0,
			      "key %d: %lld bytes that are no version it may hold (acked %d of %d; "
			      "they are version %d)",
			      key, (long long)len, k->acked, k->n, older);
	}
	sh_free(r.buf);
}

/* After a crash the unacknowledged versions are resolved one way or the other: forget them. */
static void
settle_after_reopen(struct world *w)
{
	for (int key = 0; key < NKEYS; key++) {
		struct key *k = &w->keys[key];
		int64_t len = store_frag_len(w->st, (uint64_t)key, 0);
		struct ver now = { 0 };

		check_key(w, key, false);
		/* record what is there as the one acknowledged version */
		if (len >= 0) {
			uint8_t *buf = sh_malloc((size_t)len), *want = sh_malloc((size_t)len);
			struct readback r = { 0 };

			SH_ASSERT_OK(store_read(w->st, (uint64_t)key, 0, 0, (uint32_t)len, buf,
						on_read, &r));
			SH_ASSERT(sim_run_until(w->sim, read_done, &r, SH_NSEC_PER_SEC));
			for (int i = k->n - 1; i >= 0; i--) {
				if (k->v[i].ver == 0 || k->v[i].len != len)
					continue;
				fill(want, (uint32_t)len, key, k->v[i].ver);
				if (memcmp(want, buf, (size_t)len) == 0) {
					now = k->v[i];
					break;
				}
			}
			sh_free(buf);
			sh_free(want);
		}
		memset(k, 0, sizeof(*k));
		k->acked = -1;
		if (len >= 0) {
			k->v[0] = now;
			k->v[0].acked = true;
			k->n = 1;
			k->acked = 0;
		}
	}
}

static void
format(struct world *w)
{
	struct store_format_opts fo = { .target_id = 7, .seg_size = SEG };

	w->opened = 0;
	SH_ASSERT_OK(store_format(w->env, "drive", DISK, &fo, on_open, w));
	SH_ASSERT(sim_run_until(w->sim, opened, w, SH_NSEC_PER_SEC));
	SH_ASSERT_OK(w->open_rc);
}

static void
crash_round(uint64_t seed, unsigned flags)
{
	static struct world w;

	memset(&w, 0, sizeof(w));
	sh_rand_seed(&w.rng, seed);
	w.sim = sim_create(seed);
	w.node = sim_node_create(w.sim, "t", "127.0.0.3");
	w.env = sim_node_env(w.node);
	for (int i = 0; i < NKEYS; i++)
		w.keys[i].acked = -1;
	format(&w);
	open_store(&w);
	for (int cycle = 0; cycle < 3; cycle++) {
		int steps = 100 + (int)sh_rand_below(&w.rng, 300);

		for (int i = 0; i < steps; i++) {
			int key = (int)sh_rand_below(&w.rng, NKEYS);
			uint64_t r = sh_rand_below(&w.rng, 100);

			if (r < 70)
				do_append(&w, key);
			else if (r < 85)
				do_release(&w, key);
			else if (r < 88)
				store_clean_kick(w.st);
			sim_run_for(w.sim, sh_rand_below(&w.rng, 150 * SH_NSEC_PER_USEC));
		}
		/* kill -9 (and power loss) at a random moment */
		sim_node_crash(w.node, flags);
		store_close(
		    w.st); /* frees the dead process's memory; its callbacks say -ECANCELED */
		sim_node_restart(w.node);
		open_store(&w);
		settle_after_reopen(&w);
	}
	/* and a clean run to the end: everything acknowledged reads back exactly */
	for (int i = 0; i < 200; i++)
		do_append(&w, (int)sh_rand_below(&w.rng, NKEYS));
	sim_run_for(w.sim, 100 * SH_NSEC_PER_MSEC);
	for (int key = 0; key < NKEYS; key++)
		check_key(&w, key, true);
	store_close(w.st);
	sim_destroy(w.sim);
}

TEST(store_crash_lose_unflushed)
{
	for (uint64_t i = 0; i < 8; i++)
		crash_round(sh_test_seed() * 1000 + i, 0);
}

TEST(store_crash_torn_last_write)
{
	for (uint64_t i = 0; i < 8; i++)
		crash_round(sh_test_seed() * 1000 + 100 + i, SIM_CRASH_TEAR);
}

TEST(store_crash_random_subset_kept)
{
	for (uint64_t i = 0; i < 8; i++)
		crash_round(sh_test_seed() * 1000 + 200 + i,
			    SIM_CRASH_KEEP_RANDOM | SIM_CRASH_TEAR);
}
