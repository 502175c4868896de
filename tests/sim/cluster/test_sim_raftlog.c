// SPDX-License-Identifier: Apache-2.0
/*
 * The shared Raft log file under crashes: several instances in one file,
 * random appends, truncations, snapshots and term/vote changes on each,
 * instances closed, opened again, removed and made anew, and images of
 * them all into the other half whenever one fills up; the process killed at
 * random moments (unflushed writes lost, the last one torn, or a random
 * subset kept). After each reopen the loaded state of all instances
 * together must be exactly the state after some operation at or after the
 * last one acknowledged durable: a prefix of what was queued by all of
 * them, in order, never less than what was acknowledged.
 *
 * Also: a log written before files were shared (one unnumbered instance)
 * is taken over by the first name opened, and a log of its own is brought
 * into a shared one by rwal_import.
 */
#include <raft.h>
#include <stdio.h>

#include "../../../src/cluster/raft_log_int.h"
#include "../../../src/env/env_sim.h"
#include "../../lib/test.h"

#define OPS_MAX	 6000
#define NINST	 4
#define LOG_SIZE (512 * 1024)

static const char *const names[NINST] = { "config", "meta-1-g0", "meta-1-g1", "meta-2-g0" };

struct io {
	bool done;
	int rc;
};

/* A callback's status (an open, a barrier, an import). */
static void
on_done(void *arg, int rc)
{
	struct io *io = arg;
	io->rc = rc;
	io->done = true;
}

static bool
io_done(void *arg)
{
	return ((struct io *)arg)->done;
}

struct w {
	struct sim *sim;
	struct sim_node *node;
	struct env *env;
	struct rwal *wal;
	struct rlog *log[NINST]; /* NULL: closed; names[0]'s is always open */
	struct sh_rand rng;
	struct io open;
	uint64_t hist[OPS_MAX]; /* hash of every instance's state after op i */
	int nops;
	int acked;	    /* highest op whose barrier called back */
	unsigned images;    /* the active half's tail went back: an image into the other */
	uint64_t last_used; /* the tail after the last op */
};

static uint64_t
state_hash(const struct rlog_state *st, uint64_t h)
{
	h = sh_hash64(&st->term, 8, h);
	h = sh_hash64(&st->vote, 8, h);
	if (st->snap) {
		h = sh_hash64(&st->snap->index, 8, h);
		h = sh_hash64(&st->snap->term, 8, h);
		h = sh_hash64(st->snap->data, st->snap->len, h);
	}
	for (size_t i = 0; i < st->n; i++) {
		uint64_t idx = st->start + i;
		h = sh_hash64(&idx, 8, h);
		h = sh_hash64(&st->entries[i].term, 8, h);
		h = sh_hash64(st->entries[i].data, st->entries[i].len, h);
	}
	return h;
}

/* Every instance's state, in name order; one not there counts as such. */
static uint64_t
all_hash(struct w *w)
{
	uint64_t h = 1;

	for (int i = 0; i < NINST; i++) {
		uint64_t there = rwal_has(w->wal, names[i]);

		h = sh_hash64(&there, 8, h);
		if (w->log[i] != NULL)
			h = state_hash(rlog_state(w->log[i]), h);
		else if (there) {
			struct rlog *l;

			/* a closed one: its state, seen through a handle opened for the look */
			SH_ASSERT_OK(rlog_open(w->wal, names[i], &l));
			h = state_hash(rlog_state(l), h);
			rlog_close(l);
		}
	}
	return h;
}

static void
reopen(struct w *w)
{
	w->open = (struct io){ 0 };
	w->last_used = 0;
	SH_ASSERT_OK(rwal_open(w->env, "node.wal", LOG_SIZE, on_done, &w->open, &w->wal));
	SH_ASSERT(sim_run_until(w->sim, io_done, &w->open, 10 * SH_NSEC_PER_SEC));
	SH_ASSERT_OK(w->open.rc);
	SH_ASSERT_OK(rlog_open(w->wal, names[0], &w->log[0]));
	for (int i = 1; i < NINST; i++)
		if (rwal_has(w->wal, names[i]) && sh_rand_below(&w->rng, 2))
			SH_ASSERT_OK(rlog_open(w->wal, names[i], &w->log[i]));
}

static void
close_all(struct w *w)
{
	for (int i = 0; i < NINST; i++) {
		rlog_close(w->log[i]);
		w->log[i] = NULL;
	}
	rwal_close(w->wal);
	w->wal = NULL;
}

struct ack {
	struct w *w;
	int op;
};

static void
on_durable(void *arg, int status)
{
	struct ack *a = arg;

	if (status == 0 && a->op > a->w->acked)
		a->w->acked = a->op;
	sh_free(a);
}

/* One change to the state of instance l (as the single-instance log was tried). */
static void
change(struct w *w, struct rlog *l)
{
	const struct rlog_state *st = rlog_state(l);
	uint64_t last = rlog_last_index(l);
	uint64_t r = sh_rand_below(&w->rng, 100);
	uint8_t data[600];

	if (r < 55 || last == 0) {
		struct raft_entry e[3];
		unsigned n = 1 + (unsigned)sh_rand_below(&w->rng, 3);

		for (unsigned i = 0; i < n; i++) {
			e[i].term = st->term + 1;
			e[i].type = RAFT_COMMAND;
			e[i].buf.len = 1 + sh_rand_below(&w->rng, sizeof(data) / 3);
			e[i].buf.base = data + i * (sizeof(data) / 3);
			sh_rand_fill(&w->rng, e[i].buf.base, e[i].buf.len);
		}
		SH_ASSERT_OK(rlog_append(l, e, n, NULL, NULL));
	} else if (r < 70 && st->n > 0) {
		uint64_t at = st->start + sh_rand_below(&w->rng, st->n);
		SH_ASSERT_OK(rlog_truncate(l, at));
	} else if (r < 82 && last > 0) {
		struct raft_snapshot s = { 0 };
		struct raft_buffer b;
		unsigned trailing =
		    sh_rand_below(&w->rng, 2) ? 0 : 1 + (unsigned)sh_rand_below(&w->rng, 5);

		s.index = (st->snap ? st->snap->index : 0) + 1 +
			  sh_rand_below(&w->rng, last - (st->snap ? st->snap->index : 0));
		if (st->snap && s.index <= st->snap->index)
			s.index = st->snap->index + 1;
		if (s.index > last)
			s.index = last;
		s.term = st->term;
		raft_configuration_init(&s.configuration);
		SH_ASSERT_EQ(raft_configuration_add(&s.configuration, 1, "10.0.0.1:1", RAFT_VOTER),
			     0);
		b.len = 1 + sh_rand_below(&w->rng, sizeof(data));
		b.base = data;
		sh_rand_fill(&w->rng, data, b.len);
		s.bufs = &b;
		s.n_bufs = 1;
		SH_ASSERT_OK(rlog_snapshot(l, &s, trailing, NULL, NULL));
		raft_configuration_close(&s.configuration);
	} else {
		SH_ASSERT_OK(rlog_set_meta(l, st->term + sh_rand_below(&w->rng, 2),
					   sh_rand_below(&w->rng, 4)));
	}
}

static void
one_op(struct w *w)
{
	int i = (int)sh_rand_below(&w->rng, NINST);
	uint64_t r = sh_rand_below(&w->rng, 100);
	struct ack *a;

	if (rwal_used(w->wal) < w->last_used)
		w->images++;
	if (i > 0 && w->log[i] != NULL && r < 4) {
		rlog_close(w->log[i]);
		w->log[i] = NULL;
	} else if (i > 0 && w->log[i] == NULL && r < 3 && rwal_has(w->wal, names[i])) {
		SH_ASSERT_OK(rwal_remove(w->wal, names[i]));
		SH_ASSERT_ERR(rwal_remove(w->wal, names[i]), -ENOENT);
	} else if (w->log[i] == NULL) {
		SH_ASSERT_OK(rlog_open(w->wal, names[i], &w->log[i]));
		SH_ASSERT_ERR(rlog_open(w->wal, names[i], &(struct rlog *){ NULL }), -EBUSY);
	} else {
		change(w, w->log[i]);
	}
	SH_ASSERT_LT(w->nops, OPS_MAX);
	w->hist[w->nops] = all_hash(w);
	a = sh_calloc(1, sizeof(*a));
	a->w = w;
	a->op = w->nops++;
	SH_ASSERT_OK(rlog_barrier(w->log[0], on_durable, a));
	w->last_used = rwal_used(w->wal);
}

static void
crash_round(uint64_t seed, unsigned flags, unsigned *images)
{
	static struct w w;

	memset(&w, 0, sizeof(w));
	sh_rand_seed(&w.rng, seed);
	w.sim = sim_create(seed);
	w.node = sim_node_create(w.sim, "n", "10.0.0.1");
	w.env = sim_node_env(w.node);
	w.acked = -1;
	reopen(&w);
	for (int cycle = 0; cycle < 8; cycle++) {
		int steps = 20 + (int)sh_rand_below(&w.rng, 400);
		uint64_t h;
		int k;

		for (int i = 0; i < steps; i++) {
			one_op(&w);
			if (sh_rand_below(&w.rng, 3) == 0)
				sim_run_for(w.sim, sh_rand_below(&w.rng, 200) * SH_NSEC_PER_USEC);
		}
		sim_node_crash(w.node, flags);
		close_all(&w);
		sim_node_restart(w.node);
		reopen(&w);
		h = all_hash(&w);
		for (k = w.nops - 1; k >= 0 && w.hist[k] != h; k--)
			;
		SH_ASSERT_MSG(k >= w.acked || (w.acked < 0 && k < 0),
			      "seed %llu cycle %d: loaded state matches op %d, but op %d was "
			      "acknowledged durable (of %d); rerun: SH_TEST_SEED=%llu",
			      (unsigned long long)seed, cycle, k, w.acked, w.nops,
			      (unsigned long long)sh_test_seed());
		/* what was loaded is the new history */
		w.nops = k + 1;
		w.acked = k;
	}
	*images += w.images;
	close_all(&w);
	sim_destroy(w.sim);
}

static void
crash_rounds(uint64_t base, unsigned flags)
{
	unsigned images = 0;

	for (int i = 0; i < 10; i++)
		crash_round(sh_test_seed() * 1000 + base + (uint64_t)i, flags, &images);
	/* the halves took turns: images of every instance were written and survived crashes */
	SH_ASSERT_GT(images, 10);
}

TEST(raftlog_crash)
{
	crash_rounds(0, 0);
}

TEST(raftlog_crash_torn)
{
	crash_rounds(500, SIM_CRASH_TEAR);
}

TEST(raftlog_crash_keep_random)
{
	crash_rounds(800, SIM_CRASH_TEAR | SIM_CRASH_KEEP_RANDOM);
}

/* ---- logs from before the files were shared ---- */

static void
on_io(struct env_disk_req *r, int rc)
{
	struct io *io = r->arg;
	io->rc = rc;
	io->done = true;
}

/*
 * A log file as a group wrote it alone: records without instance numbers
 * (term 3, vote 2, entries 1..5) in half 0, generation 1.
 */
static void
write_old_log(struct sim *sim, struct env *env, const char *path)
{
	struct env_disk *d;
	struct sh_enc e;
	struct iovec iov;
	struct env_disk_req r;
	struct io io = { 0 };
	size_t at;
	uint8_t *b;

	SH_ASSERT_OK(env_disk_open(env, path, ENV_DISK_CREATE, LOG_SIZE, &d));
	sh_enc_init(&e);
	at = rlog_rec_begin(&e);
	sh_enc_u64(&e, LOG_SIZE / 2);
	rlog_rec_end(&e, at, REC_HDR, 0, 1);
	memset(sh_enc_reserve(&e, 4096 - e.len), 0, 4096 - e.len);
	rlog_enc_meta(&e, 0, 1, 3, 2);
	for (uint64_t i = 1; i <= 5; i++)
		rlog_enc_entry(&e, 0, 1, i, 3, RAFT_COMMAND, &i, sizeof(i));
	SH_ASSERT_OK(sh_enc_error(&e));
	b = e.p;
	iov = (struct iovec){ b, e.len };
	r = (struct env_disk_req){ .op = ENV_DISK_WRITE_DSYNC,
				   .off = 0,
				   .iov = &iov,
				   .iovcnt = 1,
				   .cb = on_io,
				   .arg = &io };
	SH_ASSERT_OK(env_disk_submit(d, &r));
	SH_ASSERT(sim_run_until(sim, io_done, &io, SH_NSEC_PER_SEC));
	SH_ASSERT_OK(io.rc);
	sh_enc_fini(&e);
	env_disk_close(d);
}

static void
check_old_state(const struct rlog_state *st)
{
	SH_ASSERT_EQ(st->term, 3);
	SH_ASSERT_EQ(st->vote, 2);
	SH_ASSERT_EQ(st->start, 1);
	SH_ASSERT_EQ(st->n, 5);
	for (uint64_t i = 0; i < 5; i++) {
		uint64_t v;

		memcpy(&v, st->entries[i].data, 8);
		SH_ASSERT_EQ(v, i + 1);
	}
}

static struct rwal *
open_wal(struct sim *sim, struct env *env, const char *path)
{
	struct rwal *wal;
	struct io io = { 0 };

	SH_ASSERT_OK(rwal_open(env, path, LOG_SIZE, on_done, &io, &wal));
	SH_ASSERT(sim_run_until(sim, io_done, &io, SH_NSEC_PER_SEC));
	SH_ASSERT_OK(io.rc);
	return wal;
}

TEST(raftlog_old_log_taken_over)
{
	struct sim *sim = sim_create(sh_test_seed());
	struct sim_node *node = sim_node_create(sim, "n", "10.0.0.1");
	struct env *env = sim_node_env(node);
	struct rlog *l;
	struct rwal *wal;
	struct io io = { 0 };

	write_old_log(sim, env, "config.raft");
	wal = open_wal(sim, env, "config.raft");
	SH_ASSERT(!rwal_has(wal, "config"));
	SH_ASSERT_OK(rlog_open(wal, "config", &l));
	check_old_state(rlog_state(l));
	SH_ASSERT_OK(rlog_barrier(l, on_done, &io));
	SH_ASSERT(sim_run_until(sim, io_done, &io, SH_NSEC_PER_SEC));
	SH_ASSERT_OK(io.rc);
	rlog_close(l);
	rwal_close(wal);
	/* now named in the file: another name gets a new, empty instance */
	wal = open_wal(sim, env, "config.raft");
	SH_ASSERT(rwal_has(wal, "config"));
	SH_ASSERT_OK(rlog_open(wal, "other", &l));
	SH_ASSERT_EQ(rlog_state(l)->n, 0);
	rlog_close(l);
	SH_ASSERT_OK(rlog_open(wal, "config", &l));
	check_old_state(rlog_state(l));
	rlog_close(l);
	rwal_close(wal);
	sim_destroy(sim);
}

TEST(raftlog_import)
{
	struct sim *sim = sim_create(sh_test_seed());
	struct sim_node *node = sim_node_create(sim, "n", "10.0.0.1");
	struct env *env = sim_node_env(node);
	struct rlog *l;
	struct rwal *wal;
	struct env_disk *d;
	struct io io = { 0 };

	write_old_log(sim, env, "meta-1-g3.raft");
	wal = open_wal(sim, env, "meta.wal");
	SH_ASSERT_OK(rlog_open(wal, "meta-1-g0", &l));
	SH_ASSERT_ERR(rwal_import(wal, "meta-1-g0", "meta-1-g3.raft", on_done, &io), -EEXIST);
	SH_ASSERT_OK(rwal_import(wal, "meta-1-g4", "none.raft", on_done, &io));
	SH_ASSERT(sim_run_until(sim, io_done, &io, SH_NSEC_PER_SEC));
	SH_ASSERT_ERR(io.rc, -ENOENT);
	io = (struct io){ 0 };
	SH_ASSERT_OK(rwal_import(wal, "meta-1-g3", "meta-1-g3.raft", on_done, &io));
	SH_ASSERT(sim_run_until(sim, io_done, &io, SH_NSEC_PER_SEC));
	SH_ASSERT_OK(io.rc);
	SH_ASSERT_ERR(env_disk_open(env, "meta-1-g3.raft", 0, 0, &d), -ENOENT);
	rlog_close(l);
	rwal_close(wal);
	/* durable before the old file went: a crash now loses nothing */
	sim_node_crash(node, SIM_CRASH_TEAR);
	sim_node_restart(node);
	wal = open_wal(sim, env, "meta.wal");
	SH_ASSERT_OK(rlog_open(wal, "meta-1-g3", &l));
	check_old_state(rlog_state(l));
	rlog_close(l);
	rwal_close(wal);
	sim_destroy(sim);
}

/* Every instance removed: the image of none is a block of zeros, and the file goes on. */
TEST(raftlog_every_instance_removed)
{
	struct sim *sim = sim_create(sh_test_seed());
	struct sim_node *node = sim_node_create(sim, "n", "10.0.0.1");
	struct env *env = sim_node_env(node);
	struct raft_entry e = { .term = 1, .type = RAFT_COMMAND, .buf = { "x", 1 } };
	struct rlog *l;
	struct rwal *wal = open_wal(sim, env, "node.wal");
	struct io io = { 0 };

	SH_ASSERT_OK(rlog_open(wal, "a", &l));
	rlog_close(l);
	SH_ASSERT_OK(rwal_remove(wal, "a"));
	SH_ASSERT_OK(rwal_flush(wal, on_done, &io)); /* the first write after open: an image */
	SH_ASSERT(sim_run_until(sim, io_done, &io, SH_NSEC_PER_SEC));
	SH_ASSERT_OK(io.rc);
	SH_ASSERT_EQ(rwal_count(wal), 0);
	io = (struct io){ 0 };
	SH_ASSERT_OK(rlog_open(wal, "b", &l));
	SH_ASSERT_OK(rlog_append(l, &e, 1, on_done, &io));
	SH_ASSERT(sim_run_until(sim, io_done, &io, SH_NSEC_PER_SEC));
	SH_ASSERT_OK(io.rc);
	rlog_close(l);
	rwal_close(wal);
	wal = open_wal(sim, env, "node.wal");
	SH_ASSERT(!rwal_has(wal, "a"));
	SH_ASSERT_OK(rlog_open(wal, "b", &l));
	SH_ASSERT_EQ(rlog_state(l)->n, 1);
	rlog_close(l);
	SH_ASSERT_OK(rwal_remove(wal, "b"));
	rwal_close(wal);
	sim_destroy(sim);
}

/* A log of its own that was never written (no header): brought in as an empty one. */
TEST(raftlog_import_never_written)
{
	struct sim *sim = sim_create(sh_test_seed());
	struct sim_node *node = sim_node_create(sim, "n", "10.0.0.1");
	struct env *env = sim_node_env(node);
	struct env_disk *d;
	struct rlog *l;
	struct rwal *wal;
	struct io io = { 0 };

	SH_ASSERT_OK(env_disk_open(env, "meta-1-g5.raft", ENV_DISK_CREATE, LOG_SIZE, &d));
	env_disk_close(d);
	wal = open_wal(sim, env, "meta.wal");
	SH_ASSERT_OK(rwal_import(wal, "meta-1-g5", "meta-1-g5.raft", on_done, &io));
	SH_ASSERT(sim_run_until(sim, io_done, &io, SH_NSEC_PER_SEC));
	SH_ASSERT_OK(io.rc);
	SH_ASSERT_ERR(env_disk_open(env, "meta-1-g5.raft", 0, 0, &d), -ENOENT);
	SH_ASSERT_OK(rlog_open(wal, "meta-1-g5", &l));
	SH_ASSERT_EQ(rlog_state(l)->n, 0);
	SH_ASSERT_EQ(rlog_state(l)->term, 0);
	rlog_close(l);
	rwal_close(wal);
	sim_destroy(sim);
}
