// SPDX-License-Identifier: Apache-2.0
/*
 * Self-healing in the simulator (docs/healing.md): stripes written on the
 * six nodes by a real libshoal client, then one node's drive failed by the configuration; while the
 * buckets' leaders rebuild its fragments elsewhere, other nodes are kill
 * -9'd and restarted or cut off by a partition (one at a time) and
 * packets are lost, duplicated and reordered. Checked over seeds:
 *  - the rebuild finishes: every stripe's record names six fragments that
 *    are all there, none on the failed target (no fragment a record names
 *    was released, nothing was left half-switched by a crash);
 *  - every stripe reads back its bytes exactly from where its record says,
 *    also with one more node down;
 *  - the leaders' counters say so: every stripe at full count, nothing
 *    left to rebuild.
 */
#include <fcntl.h>

#include "shoal/client.h"
#include "world.h"

#define SLOTS 24

/*
 * The fragments there at loc's targets (bit i: fragment i came), and the
 * stripe's data decoded from any four into out (*rc: 0, or -EIO with fewer).
 */
static uint32_t
read_loc(struct world *w, const struct meta_extent *loc, uint8_t *out, int *rc)
{
	static uint8_t frags[DW_D + DW_P][DW_FRAG];
	static struct dreply r[DW_D + DW_P];
	uint8_t *fp[DW_D + DW_P];
	struct ec_code code;
	struct ec_decoder dec;
	uint32_t have = 0;

	to_targets(w, NET_OP_STORE_GET, loc->stripe, loc->targets, NULL, r);
	for (int i = 0; i < DW_D + DW_P; i++) {
		fp[i] = frags[i];
		if (r[i].status >= 0 && r[i].len == DW_FRAG) {
			memcpy(frags[i], r[i].data, DW_FRAG);
			have |= 1u << i;
		}
	}
	*rc = 0;
	if ((have & 0xf) != 0xf) {
		SH_ASSERT_OK(ec_code_init(&code, DW_D, DW_P));
		*rc = ec_decoder_init(&code, &dec, 0x3f & ~have) < 0 ? -EIO : 0;
		if (*rc == 0)
			ec_decode(&code, &dec, DW_FRAG, fp);
	}
	for (int i = 0; *rc == 0 && i < DW_D; i++)
		memcpy(out + i * DW_FRAG, frags[i], DW_FRAG);
	return have;
}

/*
 * Every slot written (version 0) with every node up, through a real
 * libshoal client (a stripe each: 4 x DW_FRAG); the file's inode into
 * *ino, each slot's stripe id into stripe[].
 */
static void
write_slots(struct world *w, uint64_t seed, uint64_t *ino, uint64_t *stripe)
{
	static uint8_t buf[DW_STRIPE];
	sh_client *c = world_client(w, DW_FRAG / 1024, 9);
	struct stat st;
	sh_file *f;
	sh_fs *fs;

	SH_ASSERT_OK(sh_fs_open(c, "fs1", &fs));
	SH_ASSERT_OK(sh_open(fs, "/data", O_CREAT | O_EXCL | O_WRONLY, 0644, &f));
	for (unsigned s = 0; s < SLOTS; s++) {
		slot_bytes(seed, s, 0, buf);
		SH_ASSERT_MSG(sh_pwrite(f, buf, DW_STRIPE, (uint64_t)s * DW_STRIPE) == DW_STRIPE,
			      "seed %llu: slot %u not written with every node up",
			      (unsigned long long)seed, s);
	}
	SH_ASSERT_OK(sh_fsync(f));
	SH_ASSERT_OK(sh_close(f));
	SH_ASSERT_OK(sh_stat(fs, "/data", &st));
	*ino = st.st_ino;
	sh_fs_close(fs);
	sh_client_close(c);
	for (unsigned s = 0; s < SLOTS; s++) {
		struct meta_extent e;

		SH_ASSERT_OK(extent_at(w, *ino, (uint64_t)s * DW_STRIPE, &e));
		SH_ASSERT_EQ(e.len, (uint64_t)DW_STRIPE); /* a stripe of its own */
		stripe[s] = e.stripe;
	}
}

/* Every slot reads back its bytes exactly from where its record says (when: for the message). */
static void
read_back(struct world *w, uint64_t seed, const uint64_t *stripe, const char *when)
{
	static uint8_t buf[DW_STRIPE], got[DW_STRIPE];

	for (unsigned s = 0; s < SLOTS; s++) {
		struct meta_extent loc;
		int rc;

		SH_ASSERT_OK(stripe_loc(w, stripe[s], &loc));
		(void)read_loc(w, &loc, got, &rc);
		slot_bytes(seed, s, 0, buf);
		SH_ASSERT_MSG(rc == 0 && memcmp(got, buf, DW_STRIPE) == 0,
			      "seed %llu: slot %u reads %s (%s)", (unsigned long long)seed, s,
			      rc ? sh_errname(rc) : "other bytes", when);
	}
}

static void
fail_drive(struct world *w, int node)
{
	struct cfg_cmd c = { .op = CFG_OP_DRIVE_STATE,
			     .target = (uint64_t)node,
			     .state = CFG_DRIVE_FAILED,
			     .time = sim_now(w->sim) };

	world_apply(w, &c);
}

/* Every stripe at its record's six targets, none of them the failed one; how many are not. */
static unsigned
not_healed(struct world *w, const uint64_t *stripe, int failed)
{
	static uint8_t got[DW_STRIPE];
	unsigned bad = 0;

	for (unsigned s = 0; s < SLOTS; s++) {
		struct meta_extent loc;
		bool on_failed = false;
		int rc;

		if (stripe_loc(w, stripe[s], &loc) < 0) {
			bad++;
			continue;
		}
		for (int i = 0; i < DW_D + DW_P; i++)
			on_failed |= loc.targets[i] == (uint64_t)failed;
		bad += on_failed || read_loc(w, &loc, got, &rc) != 0x3f;
	}
	return bad;
}

static void
heal_totals(struct world *w, struct msvc_heal_stats *sum)
{
	memset(sum, 0, sizeof(*sum));
	sum->pass_epoch = UINT64_MAX;
	for (int i = 1; i <= w->nn; i++) {
		struct msvc_stats st;

		if (!w->n[i].up)
			continue;
		msvc_stats(w->n[i].svc, &st);
		msvc_heal_stats_add(sum, &st.heal);
	}
}

static void
run_heal(uint64_t seed)
{
	static struct world w;
	uint64_t ino, stripe[SLOTS], back_at[N + 1] = { 0 }, end, cut_until = 0;
	struct msvc_heal_stats hs;
	int failed, crashes = 0, cuts = 0, ndown = 0;
	unsigned bad = SLOTS;

	world_start_opts(&w, seed, 4ull << 20, true);
	write_slots(&w, seed, &ino, stripe);
	failed = 1 + (int)(sh_rand_u64(&w.rng) % N);
	fail_drive(&w, failed);
	/*
	 * the rebuild runs while other nodes crash and come back, or are cut off
	 * from everyone else for a while, one at a time
	 */
	end = sim_now(w.sim) + 20 * SH_NSEC_PER_SEC;
	/* for 20 s, and until three have happened (a few seeds draw long ones) */
	while (sim_now(w.sim) < end ||
	       (crashes + cuts < 3 && sim_now(w.sim) < end + 20 * SH_NSEC_PER_SEC)) {
		int n = 1 + (int)(sh_rand_u64(&w.rng) % N);

		for (int k = 1; k <= N; k++)
			if (back_at[k] && sim_now(w.sim) >= back_at[k]) {
				node_start(&w.n[k]);
				back_at[k] = 0;
				ndown--;
			}
		if (cut_until && sim_now(w.sim) >= cut_until) {
			sim_heal(w.sim);
			cut_until = 0;
		}
		if (ndown == 0 && cut_until == 0 && n != failed && back_at[n] == 0) {
			uint64_t span =
			    SH_NSEC_PER_SEC + sh_rand_u64(&w.rng) % (2 * SH_NSEC_PER_SEC);

			if (sh_rand_u64(&w.rng) % 3 == 0) {
				sim_partition_set(w.n[n].sn,
						  1); /* a partition: alive, unreachable */
				cut_until = sim_now(w.sim) + span;
				cuts++;
			} else {
				node_stop(&w, &w.n[n], true);
				w.n[n].up = false;
				back_at[n] = sim_now(w.sim) + span;
				ndown++;
				crashes++;
			}
		}
		sim_run_for(w.sim, SH_NSEC_PER_SEC + sh_rand_u64(&w.rng) % (2 * SH_NSEC_PER_SEC));
	}
	sim_heal(w.sim);
	SH_ASSERT_MSG(crashes + cuts >= 3, "seed %llu: only %d crashes and %d partitions",
		      (unsigned long long)seed, crashes, cuts);
	for (int k = 1; k <= N; k++)
		if (back_at[k])
			node_start(&w.n[k]);
	/* then, all up: it finishes */
	end = sim_now(w.sim) + 120 * SH_NSEC_PER_SEC;
	while (sim_now(w.sim) < end && (bad = not_healed(&w, stripe, failed)) > 0)
		sim_run_for(w.sim, 2 * SH_NSEC_PER_SEC);
	SH_ASSERT_MSG(bad == 0,
		      "seed %llu: %u of %u stripes not rebuilt off drive %d after %d crashes and "
		      "%d partitions",
		      (unsigned long long)seed, bad, SLOTS, failed, crashes, cuts);
	sim_run_for(w.sim, 3 * SH_NSEC_PER_SEC); /* a pass after the last switch */
	heal_totals(&w, &hs);
	SH_ASSERT_MSG(hs.stripes[0] == SLOTS && hs.pending_bytes == 0,
		      "seed %llu: the leaders count %llu stripes at full count of %u, %llu bytes "
		      "to rebuild",
		      (unsigned long long)seed, (unsigned long long)hs.stripes[0], SLOTS,
		      (unsigned long long)hs.pending_bytes);
	/* exact bytes from the records' targets, with every node up, then with one more down */
	for (int round = 0; round < 2; round++) {
		if (round == 1) {
			int g = 1 + (int)(sh_rand_u64(&w.rng) % N);

			node_stop(&w, &w.n[g], true);
			w.n[g].up = false;
			sim_run_for(w.sim, 2 * SH_NSEC_PER_SEC);
		}
		read_back(&w, seed, stripe, round == 0 ? "all up" : "one more down");
	}
	world_end(&w);
}

TEST(heal_failed_drive_rebuilt_through_crashes)
{
	run_heal(sh_test_seed());
}

/* The configuration marks node up or down as of now (so the rebuild delay counts from now). */
static void
mark(struct world *w, int node, uint8_t state)
{
	struct cfg_cmd c = { .op = CFG_OP_NODE_STATE, .id = (uint64_t)node, .state = state };

	for (int i = 1; i <= N && c.time == 0; i++)
		if (w->n[i].up)
			c.time = env_realtime(w->n[i].env);
	world_apply(w, &c);
}

/* Stripes whose record still puts a fragment on node x's target. */
static unsigned
on_node(struct world *w, const uint64_t *stripe, int x)
{
	unsigned n = 0;

	for (unsigned s = 0; s < SLOTS; s++) {
		struct meta_extent loc;

		SH_ASSERT_OK(stripe_loc(w, stripe[s], &loc));
		for (int i = 0; i < DW_D + DW_P; i++)
			if (loc.targets[i] == (uint64_t)x) {
				n++;
				break;
			}
	}
	return n;
}

/*
 * Failback: a node kill -9'd and marked down comes back within the rebuild
 * delay: nothing moved, every fragment where it was and readable. Down
 * again past the delay: its fragments are rebuilt elsewhere, every stripe
 * reads back exactly from its record's targets, and once it is back the
 * sweep's question says its old copies are stale (never one a record
 * names). Over seeds, packets lost and reordered.
 */
static void
run_failback(uint64_t seed)
{
	static struct world w;
	static uint8_t got[DW_STRIPE];
	uint64_t ino, stripe[SLOTS], end;
	unsigned left = SLOTS;
	int x;

	world_start_opts(&w, seed, 4ull << 20, true);
	w.cfg->rebuild_delay_s = 10;
	write_slots(&w, seed, &ino, stripe);
	x = 1 + (int)(sh_rand_u64(&w.rng) % N);
	/* down for less than the delay: nothing moves */
	node_stop(&w, &w.n[x], true);
	w.n[x].up = false;
	mark(&w, x, CFG_DOWN);
	sim_run_for(w.sim, 6 * SH_NSEC_PER_SEC);
	SH_ASSERT_MSG(on_node(&w, stripe, x) == SLOTS,
		      "seed %llu: node %d down within the delay: only %u of %u stripes left on it",
		      (unsigned long long)seed, x, on_node(&w, stripe, x), SLOTS);
	node_start(&w.n[x]);
	mark(&w, x, CFG_UP);
	sim_run_for(w.sim, 3 * SH_NSEC_PER_SEC);
	for (unsigned s = 0; s < SLOTS; s++) {
		struct meta_extent loc;
		int rc;

		SH_ASSERT_OK(stripe_loc(&w, stripe[s], &loc));
		SH_ASSERT_MSG(
		    read_loc(&w, &loc, got, &rc) == 0x3f,
		    "seed %llu: slot %u: not every fragment serves after node %d came back",
		    (unsigned long long)seed, s, x);
	}
	/* down past the delay: rebuilt elsewhere */
	node_stop(&w, &w.n[x], true);
	w.n[x].up = false;
	mark(&w, x, CFG_DOWN);
	end = sim_now(w.sim) + 90 * SH_NSEC_PER_SEC;
	while (sim_now(w.sim) < end && (left = on_node(&w, stripe, x)) > 0)
		sim_run_for(w.sim, 2 * SH_NSEC_PER_SEC);
	SH_ASSERT_MSG(left == 0, "seed %llu: %u stripes still on node %d past the delay",
		      (unsigned long long)seed, left, x);
	read_back(&w, seed, stripe, "after the rebuild");
	/* back: what it holds is stale, and the sweep's question says so, fragment by fragment */
	node_start(&w.n[x]);
	mark(&w, x, CFG_UP);
	sim_run_for(w.sim, 3 * SH_NSEC_PER_SEC);
	for (unsigned s = 0; s < SLOTS; s++) {
		uint8_t q[12 * (DW_D + DW_P)];
		struct mp_req sq = { .kind = MP_STRIPES,
				     .bucket = meta_ino_bucket(stripe[s]),
				     .ino = (uint64_t)x,
				     .data = q,
				     .dlen = sizeof(q) };
		struct call *c = sh_calloc(1, sizeof(*c));
		struct meta_extent loc;

		SH_ASSERT_OK(stripe_loc(&w, stripe[s], &loc));
		for (unsigned i = 0; i < DW_D + DW_P; i++) {
			uint64_t id = stripe[s];
			uint32_t idx = i;

			memcpy(q + 12 * i, &id, 8); /* (little-endian hosts: the wire's order) */
			memcpy(q + 12 * i + 8, &idx, 4);
		}
		SH_ASSERT_OK(call(&w, &sq, c));
		SH_ASSERT_EQ(c->r.dlen, (size_t)(DW_D + DW_P));
		for (unsigned i = 0; i < DW_D + DW_P; i++)
			SH_ASSERT_MSG(
			    c->data[i] == (loc.targets[i] == (uint64_t)x),
			    "seed %llu: slot %u fragment %u on node %d: the sweep is told %u",
			    (unsigned long long)seed, s, i, x, c->data[i]);
		sh_free(c);
	}
	world_end(&w);
}

TEST(heal_failback_within_the_delay_and_after_it)
{
	run_failback(sh_test_seed());
}

/*
 * Every stripe at six distinct targets that all serve its bytes exactly,
 * none on target `off` (0: any): how many are not.
 */
static unsigned
not_whole(struct world *w, const uint64_t *stripe, int off)
{
	static uint8_t buf[DW_STRIPE], got[DW_STRIPE];
	unsigned bad = 0;

	for (unsigned s = 0; s < SLOTS; s++) {
		struct meta_extent loc;
		bool ok;
		int rc;

		if (stripe_loc(w, stripe[s], &loc) < 0) {
			bad++;
			continue;
		}
		ok = read_loc(w, &loc, got, &rc) == 0x3f;
		slot_bytes(w->seed, s, 0, buf);
		ok &= rc == 0 && memcmp(got, buf, DW_STRIPE) == 0;
		for (int i = 0; i < DW_D + DW_P; i++) {
			ok &= loc.targets[i] != (uint64_t)off;
			for (int k = 0; k < i; k++)
				ok &= loc.targets[k] != loc.targets[i];
		}
		bad += !ok;
	}
	return bad;
}

/*
 * Grow and shrink: a seventh node joins with an empty drive; the leaders
 * move fragments onto it until the targets' fill evens out, while a node
 * is kill -9'd and restarted in the middle and packets are lost. Every
 * stripe keeps six fragments on six distinct targets, all serving its
 * bytes exactly. Then one of the first six drives is drained: every stripe
 * with a fragment on it gets a copy elsewhere before its own is given up,
 * and ends with all six, none on the drained drive.
 */
static void
run_grow_and_drain(uint64_t seed)
{
	static struct world w;
	struct msvc_heal_stats hs;
	uint64_t ino, stripe[SLOTS], end;
	unsigned onto = 0, left = SLOTS, bad;
	int x, victim, drained;

	world_start_opts(&w, seed, 4ull << 20, true);
	write_slots(&w, seed, &ino, stripe);
	x = world_add_node(&w);
	/* a node crashes while the fragments move, and comes back */
	sim_run_for(w.sim, (3 + sh_rand_u64(&w.rng) % 8) * SH_NSEC_PER_SEC);
	victim = 1 + (int)(sh_rand_u64(&w.rng) % N);
	node_stop(&w, &w.n[victim], true);
	w.n[victim].up = false;
	sim_run_for(w.sim, (1 + sh_rand_u64(&w.rng) % 3) * SH_NSEC_PER_SEC);
	node_start(&w.n[victim]);
	/* 144 fragments over seven targets: about 20 belong on the new one */
	end = sim_now(w.sim) + 120 * SH_NSEC_PER_SEC;
	while (sim_now(w.sim) < end && (onto = on_node(&w, stripe, x)) < 16)
		sim_run_for(w.sim, 2 * SH_NSEC_PER_SEC);
	SH_ASSERT_MSG(onto >= 16,
		      "seed %llu: only %u of %u stripes moved a fragment onto node %d (node %d "
		      "crashed meanwhile)",
		      (unsigned long long)seed, onto, SLOTS, x, victim);
	sim_run_for(w.sim, 10 * SH_NSEC_PER_SEC); /* moves planned end */
	bad = not_whole(&w, stripe, 0);
	SH_ASSERT_MSG(bad == 0, "seed %llu: %u stripes not whole after the rebalance",
		      (unsigned long long)seed, bad);
	/* the last moves: a leader's next passes plan what a crash cut short */
	end = sim_now(w.sim) + 60 * SH_NSEC_PER_SEC;
	do {
		heal_totals(&w, &hs);
		if (hs.fill_ratio_milli > 0 && hs.fill_ratio_milli <= 1050)
			break;
		sim_run_for(w.sim, 2 * SH_NSEC_PER_SEC);
	} while (sim_now(w.sim) < end);
	/* (the counts of moves are the leaders': one that crashed counts from 0 again) */
	SH_ASSERT_MSG(hs.fill_ratio_milli > 0 && hs.fill_ratio_milli <= 1050,
		      "seed %llu: the targets' fill max/mean is %.3f after the rebalance",
		      (unsigned long long)seed, (double)hs.fill_ratio_milli / 1000);
	/* a drive drained: copied off, then given up, every stripe whole throughout */
	drained = 1 + (int)(sh_rand_u64(&w.rng) % N);
	{
		struct cfg_cmd c = { .op = CFG_OP_DRIVE_STATE,
				     .target = (uint64_t)drained,
				     .state = CFG_DRIVE_DRAINING,
				     .time = sim_now(w.sim) };

		world_apply(&w, &c);
	}
	end = sim_now(w.sim) + 120 * SH_NSEC_PER_SEC;
	while (sim_now(w.sim) < end && (left = on_node(&w, stripe, drained)) > 0) {
		sim_run_for(w.sim, 2 * SH_NSEC_PER_SEC);
		bad = not_whole(&w, stripe, -1);
		SH_ASSERT_MSG(bad == 0, "seed %llu: %u stripes not whole while drive %d drains",
			      (unsigned long long)seed, bad, drained);
	}
	SH_ASSERT_MSG(left == 0, "seed %llu: %u stripes still on drive %d after the drain",
		      (unsigned long long)seed, left, drained);
	sim_run_for(w.sim, 3 * SH_NSEC_PER_SEC); /* a pass after the last switch */
	bad = not_whole(&w, stripe, drained);
	SH_ASSERT_MSG(bad == 0, "seed %llu: %u stripes not whole after drive %d drained",
		      (unsigned long long)seed, bad, drained);
	heal_totals(&w, &hs);
	SH_ASSERT_MSG(hs.stripes[0] == SLOTS && hs.draining == 0,
		      "seed %llu: the leaders count %llu stripes whole of %u, %llu draining",
		      (unsigned long long)seed, (unsigned long long)hs.stripes[0], SLOTS,
		      (unsigned long long)hs.draining);
	world_end(&w);
}

TEST(heal_grow_rebalances_and_drain_empties_a_drive)
{
	run_grow_and_drain(sh_test_seed());
}
