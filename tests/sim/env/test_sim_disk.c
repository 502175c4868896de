// SPDX-License-Identifier: Apache-2.0
/*
 * Simulated disks: a crash loses exactly the writes no completed fsync
 * covered; torn writes persist a sector-aligned prefix; an fsync submitted
 * before a write completed does not cover it; injected errors.
 */
#include <errno.h>
#include <stdio.h>

#include "../../../src/env/env_sim.h"
#include "../../lib/test.h"

#define BS   4096
#define NBLK 32

struct op {
	struct env_disk_req r;
	struct iovec iov;
	unsigned char *buf;
	int blk;
	int result;
	int done;
	struct dmodel *m;
};

/*
 * The model: writes in completion order; an fsync covers the writes that had
 * completed when it was submitted, once it completes.
 */
struct dmodel {
	unsigned char durable[NBLK][BS];
	int nwritten[NBLK];
	struct op *completed[4096];
	int ncompleted;
	int durable_upto; /* completed[0 .. durable_upto) are durable */
	int callbacks;
};

static void
op_cb(struct env_disk_req *r, int result)
{
	struct op *o = sh_container_of(r, struct op, r);
	struct dmodel *m = o->m;

	o->done++;
	o->result = result;
	m->callbacks++;
	if (r->op == ENV_DISK_WRITE && result == BS) {
		m->completed[m->ncompleted++] = o;
	} else if (r->op == ENV_DISK_FSYNC && result == 0) {
		int upto = r->arg ? (int)(intptr_t)r->arg - 1 : 0;

		for (int i = m->durable_upto; i < upto; i++)
			memcpy(m->durable[m->completed[i]->blk], m->completed[i]->buf, BS);
		if (upto > m->durable_upto)
			m->durable_upto = upto;
	}
}

static struct op *
op_new(struct dmodel *m, enum env_disk_op type, int blk)
{
	struct op *o = sh_calloc(1, sizeof(*o));

	SH_ASSERT_NOT_NULL(o);
	o->m = m;
	o->blk = blk;
	o->buf = sh_aligned_alloc(BS, BS);
	SH_ASSERT_NOT_NULL(o->buf);
	o->iov = (struct iovec){ o->buf, BS };
	o->r = (struct env_disk_req){
		.op = type, .off = (uint64_t)blk * BS, .iov = &o->iov, .iovcnt = 1, .cb = op_cb
	};
	return o;
}

static void
op_free(struct op *o)
{
	sh_free(o->buf);
	sh_free(o);
}

static void
read_all(struct sim *sim, struct env *env, struct env_disk *d, unsigned char (*out)[BS])
{
	struct dmodel scratch = { 0 };
	struct op *ops[NBLK];

	for (int b = 0; b < NBLK; b++) {
		ops[b] = op_new(&scratch, ENV_DISK_READ, b);
		SH_ASSERT_OK(env_disk_submit(d, &ops[b]->r));
	}
	(void)env;
	sim_run_for(sim, 10 * SH_NSEC_PER_MSEC);
	for (int b = 0; b < NBLK; b++) {
		SH_ASSERT_EQ(ops[b]->result, BS);
		memcpy(out[b], ops[b]->buf, BS);
		op_free(ops[b]);
	}
}

/* One random workload, crash at a random moment, then check the disk against the model. */
static void
crash_round(uint64_t seed)
{
	struct sim *sim = sim_create(seed);
	struct sim_node *n = sim_node_create(sim, "d", "127.0.0.2");
	struct env *env = sim_node_env(n);
	struct env_disk *d;
	static struct dmodel m;
	static unsigned char got[NBLK][BS];
	struct op *all[600];
	int nops = 0, callbacks_at_crash;
	struct sh_rand rng;

	memset(&m, 0, sizeof(m));
	sh_rand_seed(&rng, seed);
	SH_ASSERT_OK(
	    env_disk_open(env, "/dev/sim0", ENV_DISK_CREATE | ENV_DISK_DIRECT, NBLK * BS, &d));
	for (int step = 0; step < 300; step++) {
		struct op *o;

		if (sh_rand_chance(&rng, 0.15)) {
			o = op_new(&m, ENV_DISK_FSYNC, 0);
			o->r.iovcnt = 0;
			o->r.arg = (void *)(intptr_t)(m.ncompleted + 1);
		} else {
			o = op_new(&m, ENV_DISK_WRITE, (int)sh_rand_below(&rng, NBLK));
			sh_rand_fill(&rng, o->buf, BS);
		}
		SH_ASSERT_OK(env_disk_submit(d, &o->r));
		all[nops++] = o;
		sim_run_for(sim, sh_rand_below(&rng, 60 * SH_NSEC_PER_USEC));
	}
	callbacks_at_crash = m.callbacks;
	sim_node_crash(n, 0);
	sim_run_for(sim, 10 * SH_NSEC_PER_MSEC);
	SH_ASSERT_EQ(m.callbacks, callbacks_at_crash); /* the dead process hears nothing */

	sim_node_restart(n);
	SH_ASSERT_OK(env_disk_open(env, "/dev/sim0", ENV_DISK_DIRECT, 0, &d));
	read_all(sim, env, d, got);
	for (int b = 0; b < NBLK; b++)
		SH_ASSERT_MSG(memcmp(got[b], m.durable[b], BS) == 0,
			      "block %d differs from the model after the crash (seed %llu)", b,
			      (unsigned long long)seed);
	env_disk_close(d);
	for (int i = 0; i < nops; i++)
		op_free(all[i]);
	sim_destroy(sim);
}

TEST(sim_crash_loses_exactly_unflushed_writes)
{
	for (uint64_t i = 0; i < 20; i++)
		crash_round(sh_test_seed() * 1000 + i);
}

TEST(sim_fsync_covers_only_completed_writes)
{
	struct sim *sim = sim_create(sh_test_seed());
	struct sim_node *n = sim_node_create(sim, "d", "127.0.0.2");
	struct env *env = sim_node_env(n);
	struct env_disk *d;
	static struct dmodel m;
	struct op *w1, *f1, *w2, *f2;
	static unsigned char got[NBLK][BS];

	memset(&m, 0, sizeof(m));
	SH_ASSERT_OK(env_disk_open(env, "disk", ENV_DISK_CREATE, NBLK * BS, &d));
	/* w1 and its fsync submitted together: the fsync does not cover w1 */
	w1 = op_new(&m, ENV_DISK_WRITE, 1);
	memset(w1->buf, 0x11, BS);
	f1 = op_new(&m, ENV_DISK_FSYNC, 0);
	f1->r.iovcnt = 0;
	SH_ASSERT_OK(env_disk_submit(d, &w1->r));
	SH_ASSERT_OK(env_disk_submit(d, &f1->r));
	sim_run_for(sim, SH_NSEC_PER_MSEC);
	SH_ASSERT_EQ(w1->result, BS);
	SH_ASSERT_EQ(f1->result, 0);
	/* w2, then an fsync after it completed: durable */
	w2 = op_new(&m, ENV_DISK_WRITE, 2);
	memset(w2->buf, 0x22, BS);
	SH_ASSERT_OK(env_disk_submit(d, &w2->r));
	sim_run_for(sim, SH_NSEC_PER_MSEC);
	f2 = op_new(&m, ENV_DISK_FSYNC, 0);
	f2->r.iovcnt = 0;
	SH_ASSERT_OK(env_disk_submit(d, &f2->r));
	sim_run_for(sim, SH_NSEC_PER_MSEC);
	/* before the crash both are visible */
	read_all(sim, env, d, got);
	SH_ASSERT_EQ(got[1][0], 0x11);
	SH_ASSERT_EQ(got[2][0], 0x22);
	sim_node_crash(n, 0);
	sim_node_restart(n);
	SH_ASSERT_OK(env_disk_open(env, "disk", 0, 0, &d));
	read_all(sim, env, d, got);
	/* f2 came after w1 completed, so it covers w1 as well */
	SH_ASSERT_EQ(got[1][0], 0x11);
	SH_ASSERT_EQ(got[2][0], 0x22);

	/* now without the second fsync: w3 is lost */
	{
		struct op *w3 = op_new(&m, ENV_DISK_WRITE, 3), *f3 = op_new(&m, ENV_DISK_FSYNC, 0);
		struct sim_stats st;

		memset(w3->buf, 0x33, BS);
		f3->r.iovcnt = 0;
		SH_ASSERT_OK(env_disk_submit(d, &w3->r));
		SH_ASSERT_OK(env_disk_submit(d, &f3->r));
		sim_run_for(sim, SH_NSEC_PER_MSEC);
		SH_ASSERT_EQ(w3->result, BS);
		sim_node_crash(n, 0);
		sim_stats(sim, &st);
		SH_ASSERT_EQ(st.lost_writes, 1);
		sim_node_restart(n);
		SH_ASSERT_OK(env_disk_open(env, "disk", 0, 0, &d));
		read_all(sim, env, d, got);
		SH_ASSERT_EQ(got[3][0], 0);
		op_free(w3);
		op_free(f3);
	}
	env_disk_close(d);
	op_free(w1);
	op_free(f1);
	op_free(w2);
	op_free(f2);
	sim_destroy(sim);
}

TEST(sim_torn_and_random_crash_modes)
{
	int torn = 0, kept = 0, lost = 0;

	for (uint64_t i = 0; i < 40; i++) {
		struct sim *sim = sim_create(sh_test_seed() * 100 + i);
		struct sim_node *n = sim_node_create(sim, "d", "127.0.0.2");
		struct env *env = sim_node_env(n);
		struct env_disk *d;
		struct dmodel m = { 0 };
		unsigned char *buf = sh_aligned_alloc(BS, 4 * BS),
			      *rd = sh_aligned_alloc(BS, 4 * BS);
		struct iovec iov = { buf, 4 * BS }, riov = { rd, 4 * BS };
		struct op o = { .m = &m }, r = { .m = &m };
		unsigned flags = i % 2 ? SIM_CRASH_TEAR : SIM_CRASH_KEEP_RANDOM;
		size_t prefix = 0;

		SH_ASSERT_OK(env_disk_open(env, "disk", ENV_DISK_CREATE, 64 * BS, &d));
		memset(buf, 0xEE, 4 * BS);
		o.r = (struct env_disk_req){
			.op = ENV_DISK_WRITE, .iov = &iov, .iovcnt = 1, .cb = op_cb
		};
		SH_ASSERT_OK(env_disk_submit(d, &o.r));
		sim_run_for(sim, SH_NSEC_PER_MSEC);
		SH_ASSERT_EQ(o.result, 4 * BS);
		sim_node_crash(n, flags);
		sim_node_restart(n);
		SH_ASSERT_OK(env_disk_open(env, "disk", 0, 0, &d));
		r.r = (struct env_disk_req){
			.op = ENV_DISK_READ, .iov = &riov, .iovcnt = 1, .cb = op_cb
		};
		SH_ASSERT_OK(env_disk_submit(d, &r.r));
		sim_run_for(sim, SH_NSEC_PER_MSEC);
		SH_ASSERT_EQ(r.result, 4 * BS);
		while (prefix < 4 * BS && rd[prefix] == 0xEE)
			prefix++;
		for (size_t k = prefix; k < 4 * BS; k++)
			SH_ASSERT_EQ(rd[k], 0); /* a prefix of the write, then the old content */
		SH_ASSERT_EQ(prefix % 512, 0);
		if (flags == SIM_CRASH_KEEP_RANDOM)
			SH_ASSERT(prefix == 0 || prefix == 4 * BS); /* whole or nothing */
		if (prefix > 0 && prefix < 4 * BS)
			torn++;
		else if (prefix == 4 * BS)
			kept++;
		else
			lost++;
		env_disk_close(d);
		sh_free(buf);
		sh_free(rd);
		sim_destroy(sim);
	}
	SH_ASSERT_GT(torn, 0);
	SH_ASSERT_GT(kept, 0);
	SH_ASSERT_GT(lost, 0);
}

TEST(sim_disk_errors_and_cancel)
{
	struct sim *sim = sim_create(sh_test_seed());
	struct sim_node *n = sim_node_create(sim, "d", "127.0.0.2");
	struct env *env = sim_node_env(n);
	struct sim_disk_params p = { .lat_min_ns = 1000, .lat_max_ns = 2000, .read_err = 1.0 };
	struct env_disk *d;
	struct dmodel m = { 0 };
	struct op *rd = op_new(&m, ENV_DISK_READ, 0), *wr = op_new(&m, ENV_DISK_WRITE, 0);

	SH_ASSERT_ERR(env_disk_open(env, "nope", 0, 0, &d), -ENOENT);
	SH_ASSERT_OK(env_disk_open(env, "disk", ENV_DISK_CREATE | ENV_DISK_DIRECT, 8 * BS, &d));
	sim_disk_set(n, &p);
	SH_ASSERT_OK(env_disk_submit(d, &rd->r));
	SH_ASSERT_OK(sh_fault_arm(FP_ENV_DISK_WRITE_EIO, "once", NULL, 0));
	SH_ASSERT_OK(env_disk_submit(d, &wr->r));
	SH_ASSERT_EQ(m.callbacks, 0);
	sim_run_for(sim, SH_NSEC_PER_MSEC);
	SH_ASSERT_ERR(rd->result, -EIO);
	SH_ASSERT_ERR(wr->result, -EIO);
	/* alignment is enforced in the simulator exactly as on a real O_DIRECT disk */
	wr->iov.iov_base = wr->buf + 8;
	SH_ASSERT_ERR(env_disk_submit(d, &wr->r), -EINVAL);
	wr->iov.iov_base = wr->buf;
	wr->r.off = 8 * BS;
	SH_ASSERT_ERR(env_disk_submit(d, &wr->r), -ERANGE);
	/* close with a request in flight: it is abandoned, its callback never runs */
	wr->r.off = 0;
	SH_ASSERT_OK(env_disk_submit(d, &wr->r));
	env_disk_close(d);
	SH_ASSERT_EQ(wr->done, 1);
	sim_run_for(sim, SH_NSEC_PER_MSEC);
	SH_ASSERT_EQ(wr->done, 1);
	SH_ASSERT(!wr->r.inflight);
	op_free(rd);
	op_free(wr);
	sim_destroy(sim);
}
