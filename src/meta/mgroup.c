// SPDX-License-Identifier: Apache-2.0
/* A metadata Raft group: the buckets of one replica set (mgroup.h). */
#include <stdio.h>
#include <string.h>

#include "meta_version.h"
#include "mgroup.h"

SH_LOG_FACILITY("meta.group");

/*
 * Snapshots (docs/metadata.md, "Replication"): the log keeps a marker,
 * the state is the bucket store; a follower that fell behind gets the
 * whole export, with the index it stands for.
 */
#define SNAP_WHOLE_V1 1 /* u32 count, (u16 bucket, blob export)... (older logs) */
#define SNAP_MARKER   2 /* u64 index: the store holds it durably */
#define SNAP_WHOLE    3 /* u64 index applied, then as SNAP_WHOLE_V1 */
#define FLUSH_NS      (200ull * 1000 * 1000)
#define TICK_NS	      (50ull * 1000 * 1000) /* hand-overs, membership, readiness (on the env grid) */
#define FLUSH_MAX     256		    /* applies in one batch at most */

#define CHANGE_RETRY_NS (10ull * 1000 * 1000 * 1000)

struct prop {
	mgroup_cb cb;
	void *arg;
};

struct waiter {
	struct sh_list link;
	uint64_t deadline;
	void (*cb)(void *arg, int status);
	void *arg;
};

struct mgroup {
	struct mgroup_params p;
	uint64_t *members;
	uint16_t *buckets;
	uint8_t *mine; /* bitmap over the cluster's buckets */
	char path[512];
	struct env *env;
	struct rnet *rn;
	struct rgroup *rg;
	bool closing;
	/* the leader's barrier of its term, applied: it serves */
	uint64_t ready_term;
	uint64_t barrier_term; /* a barrier in flight for this term */
	bool barrier_busy;
	struct meta_result res; /* the last applied command's result */
	struct sh_list waiters; /* struct waiter */
	struct env_timer tick;
	bool demoted;		/* this node is marked down: hand leadership over */
	bool transferring;	/* a transfer in flight */
	bool hold_cache;	/* handing over: answers carry no client cache lease */
	bool changing;		/* a membership change in flight */
	uint64_t change_after;	/* after a failed change, the next waits until then (env_now) */
	struct env_timer flush; /* the store's batch, committed soon after an apply */
	bool flush_armed;
	uint64_t applied; /* the Raft index the store holds applied (META_K_RAFT) */
	/* the group's version and kept snapshots, as applied (META_K_VERSION), and the copy a
	 * command that changes them works on until it commits */
	struct meta_version vs, vs_work;
	struct env_task notify;
	void (*done)(void *arg);
	void *done_arg;
};

static void check_ready(struct mgroup *g);

/* This replica leads its group (it may not serve yet: mgroup_ready). */
static bool
leads(const struct mgroup *g)
{
	return !g->closing && rgroup_leads(g->rg);
}

/* ---- the state machine ---- */

/* ---- the applied index, kept in the store with the state ---- */

static void
applied_key(const struct mgroup *g, struct meta_key *k)
{
	k->b[0] = (uint8_t)(g->buckets[0] >> 8);
	k->b[1] = (uint8_t)g->buckets[0];
	k->b[2] = META_K_RAFT;
	k->len = 3;
}

/* 0 with *idx (0 if never written: the store holds nothing of the group), or -errno. */
static int
applied_get(struct mgroup *g, struct meta_txn *t, uint64_t *idx)
{
	struct meta_key k;
	uint8_t v[8];
	int rc;

	applied_key(g, &k);
	rc = meta_get_exact(t, &k, META_VER_NEWEST, v, sizeof(v));
	*idx = 0;
	if (rc == -ENOENT)
		return 0;
	if (rc == 0)
		*idx = meta_be64_get(v);
	return rc;
}

static int
applied_put(struct mgroup *g, struct meta_txn *t, uint64_t idx)
{
	struct meta_key k;
	uint8_t v[8];

	applied_key(g, &k);
	meta_be64_put(v, idx);
	return meta_put(t, &k, 1, v, sizeof(v), NULL);
}

static void
on_flush(struct env_timer *t)
{
	struct mgroup *g = t->arg;
	int rc;

	g->flush_armed = false;
	rc = meta_db_flush(g->p.db, false);
	if (rc < 0)
		sh_log_error("group %#x: bucket store flush: %s", g->p.id, sh_strerror(rc));
}

/* A write went into the store's batch: commit it soon, or now if it grew large. */
static void
dirty(struct mgroup *g)
{
	if (meta_db_pending(g->p.db) >= FLUSH_MAX) {
		if (g->flush_armed)
			env_timer_cancel(&g->flush);
		on_flush(&g->flush);
	} else if (!g->flush_armed) {
		g->flush_armed = true;
		env_timer_arm(&g->flush, FLUSH_NS);
	}
}

/* Record idx in write transaction t, commit it, make the store durable: it holds idx. */
static int
commit_durable(struct mgroup *g, struct meta_txn *t, uint64_t idx)
{
	int rc = applied_put(g, t, idx);

	rc = rc < 0 ? (meta_txn_abort(t), rc) : meta_txn_commit(t);
	if (rc == 0)
		rc = meta_db_flush(g->p.db, true);
	if (rc == 0)
		g->applied = idx;
	return rc;
}

/* Make the store durable, holding applied index idx (>= what it holds). */
static int
store_sync(struct mgroup *g, uint64_t idx)
{
	struct meta_txn *t;
	int rc = meta_txn_begin(g->p.db, true, &t);

	return rc < 0 ? rc : commit_durable(g, t, idx);
}

/* ---- the state machine ---- */

/* The version state command c (NULL: none) applies with: a copy if it may change it. */
static struct meta_version *
version_for(struct mgroup *g, const struct meta_cmd *c)
{
	if (c == NULL ||
	    (!meta_version_op(c->op) && (c->ver <= g->vs.ver || meta_ver_branch(c->ver) != 0)))
		return &g->vs;
	meta_version_copy(&g->vs_work, &g->vs);
	return &g->vs_work;
}

/*
 * The store reads the branches the group serves down to their bases
 * (meta_db_branch): told before any command of theirs is applied here.
 * A branch gone from the record stays known to the store (its number is
 * never reused, and other groups of the file system may still serve it).
 */
static int
branches_sync(struct mgroup *g)
{
	for (unsigned i = 0; i < g->vs.nbranch; i++) {
		int rc = meta_db_branch(g->p.db, g->vs.branch[i].id, g->vs.branch[i].base);

		if (rc < 0) { /* its reads would differ from the other replicas': it stops */
			sh_log_error("group %#x: branch %u: %s", g->p.id, g->vs.branch[i].id,
				     sh_strerror(rc));
			return rc;
		}
	}
	return 0;
}

/* The group's version state from the store (at open, and after a whole state came). */
static int
version_load(struct mgroup *g)
{
	struct meta_txn *t;
	int rc = meta_txn_begin(g->p.db, false, &t);

	if (rc < 0)
		return rc;
	rc = meta_version_load(t, g->buckets[0], &g->vs);
	meta_txn_abort(t);
	if (rc < 0)
		sh_log_error("group %#x: version record: %s", g->p.id, sh_strerror(rc));
	else
		rc = branches_sync(g);
	return rc;
}

static int
sm_apply(void *arg, uint64_t idx, const void *p, size_t len, void **result)
{
	struct mgroup *g = arg;
	struct meta_bucket mb = { .nbuckets = g->p.nbuckets };
	struct meta_cmd c;
	const uint8_t *b = p;
	bool valid = false;
	int rc;

	*result = &g->res;
	META_RESULT_CLEAR(&g->res);
	if (idx <= g->applied)
		return 0; /* the store has it already (replayed after a restart) */
	/* an entry is (u16 bucket, command); a bad one is rejected alike everywhere */
	if (len < 2 || meta_cmd_decode(b + 2, len - 2, &c) < 0) {
		g->res.status = -EBADMSG;
	} else {
		mb.bucket = (uint16_t)(b[0] | b[1] << 8); /* sh_enc_u16: little-endian */
		valid = mgroup_has_bucket(g, mb.bucket);
		if (!valid)
			g->res.status = -EINVAL;
	}
	rc = meta_txn_begin(g->p.db, true, &mb.t);
	if (rc < 0)
		goto fail;
	mb.vs = version_for(g, valid ? &c : NULL);
	if (valid) {
		meta_cmd_apply(&mb, &c, &g->res);
		if (g->res.status < 0) {
			/* rejected: nothing of it stays, but the index moves on */
			meta_txn_abort(mb.t);
			rc = meta_txn_begin(g->p.db, true, &mb.t);
			if (rc < 0)
				goto fail;
		}
	}
	rc = applied_put(g, mb.t, idx);
	rc = rc < 0 ? (meta_txn_abort(mb.t), rc) : meta_txn_commit(mb.t);
	if (rc < 0)
		goto fail;
	g->applied = idx;
	if (mb.vs == &g->vs_work && g->res.status >= 0) {
		meta_version_copy(&g->vs, &g->vs_work);
		rc = branches_sync(g);
		if (rc < 0)
			goto fail;
	}
	dirty(g);
	if (valid && g->p.applied)
		g->p.applied(g->p.arg, g, mb.bucket, &c, &g->res);
	return 0;
fail:
	/* the store failed under us: this replica cannot go on */
	sh_log_error("group %#x: bucket store: %s", g->p.id, sh_strerror(rc));
	return -EIO;
}

static int
marker(uint64_t idx, struct rgroup_buf *out)
{
	struct sh_enc e;
	int rc;

	sh_enc_init(&e);
	sh_enc_u8(&e, SNAP_MARKER);
	sh_enc_u64(&e, idx);
	rc = rgroup_buf_enc(&e, out);
	sh_enc_fini(&e);
	return rc;
}

/*
 * The log is compacted up to the last applied index: the store must hold
 * it durably first. The snapshot is then a marker of that index.
 */
static int
sm_snapshot(void *arg, uint64_t idx, struct rgroup_buf *out)
{
	struct mgroup *g = arg;
	int rc;

	/* (replaying after a restart, the store may be ahead of Raft) */
	rc = store_sync(g, idx > g->applied ? idx : g->applied);
	if (rc == 0)
		rc = marker(idx, out);
	if (rc < 0) {
		sh_log_error("group %#x: snapshot at %llu: %s", g->p.id, (unsigned long long)idx,
			     sh_strerror(rc));
		return rc == -ENOMEM ? rc : -EIO;
	}
	return 0;
}

/* The whole state, for a follower too far behind: every bucket, and the index it holds. */
static int
export_whole(struct mgroup *g, struct rgroup_buf *out)
{
	struct meta_txn *t;
	struct sh_enc e, one;
	uint64_t idx;
	int rc = meta_txn_begin(g->p.db, false, &t);

	if (rc < 0)
		return rc;
	rc = applied_get(g, t, &idx);
	sh_enc_init(&e);
	sh_enc_u8(&e, SNAP_WHOLE);
	sh_enc_u64(&e, idx);
	sh_enc_u32(&e, g->p.nb);
	for (unsigned i = 0; i < g->p.nb && rc == 0; i++) {
		sh_enc_init(&one);
		rc = meta_export_bucket(t, g->buckets[i], &one);
		if (rc == 0)
			rc = sh_enc_error(&one);
		sh_enc_u16(&e, g->buckets[i]);
		sh_enc_blob(&e, one.p, one.len);
		sh_enc_fini(&one);
	}
	meta_txn_abort(t);
	if (rc == 0)
		rc = rgroup_buf_enc(&e, out);
	sh_log_info("group %#x: state of %zu bytes at %llu for a follower: %s", g->p.id, e.len,
		    (unsigned long long)idx, sh_strerror(rc));
	sh_enc_fini(&e);
	return rc;
}

/*
 * Install a whole state (SNAP_WHOLE or an older log's SNAP_WHOLE_V1 at
 * index v1_idx) into the store, durably: every bucket of the group is
 * replaced. -EBADMSG leaves the store as it was.
 */
int
mgroup_snap_walk(const uint8_t *p, size_t len, uint64_t *idx, mgroup_snap_fn fn, void *arg)
{
	struct sh_dec d;
	uint32_t nb;
	int rc = 0;

	sh_dec_init(&d, p, len);
	switch (sh_dec_u8(&d)) {
	case SNAP_WHOLE:
		*idx = sh_dec_u64(&d);
		break;
	case SNAP_WHOLE_V1:
		break;
	default:
		return -EBADMSG;
	}
	nb = sh_dec_u32(&d);
	for (uint32_t i = 0; i < nb && rc == 0 && !sh_dec_error(&d); i++) {
		uint16_t bucket = sh_dec_u16(&d);
		size_t blen;
		const uint8_t *b = sh_dec_blob(&d, SIZE_MAX, &blen);

		if (!sh_dec_error(&d))
			rc = fn(arg, bucket, b, blen);
	}
	sh_dec_end(&d);
	if (rc == 0 && sh_dec_error(&d))
		rc = -EBADMSG;
	return rc;
}

struct install {
	struct mgroup *g;
	struct meta_txn *t;
};

static int
install_bucket(void *arg, uint16_t bucket, const uint8_t *b, size_t len)
{
	struct install *in = arg;

	if (!mgroup_has_bucket(in->g, bucket))
		return -EBADMSG;
	return meta_import_bucket(in->t, bucket, b, len);
}

/*
 * Install a whole state (SNAP_WHOLE or an older log's SNAP_WHOLE_V1 at
 * index v1_idx) into the store, durably: every bucket of the group is
 * replaced. -EBADMSG leaves the store as it was.
 */
static int
install_whole(struct mgroup *g, const uint8_t *p, size_t len, uint64_t v1_idx)
{
	struct install in = { .g = g };
	uint64_t idx = v1_idx;
	int rc = meta_txn_begin(g->p.db, true, &in.t);

	if (rc < 0)
		return rc;
	for (unsigned i = 0; i < g->p.nb && rc == 0; i++)
		rc = meta_drop_bucket(in.t, g->buckets[i]);
	if (rc == 0)
		rc = mgroup_snap_walk(p, len, &idx, install_bucket, &in);
	if (rc < 0) {
		meta_txn_abort(in.t);
		return rc;
	}
	rc = commit_durable(g, in.t, idx);
	return rc < 0 ? rc : version_load(g);
}

static int
sm_restore(void *arg, uint64_t applied, const void *p, size_t len)
{
	struct mgroup *g = arg;
	struct sh_dec d;
	uint8_t v;
	uint64_t idx;
	int rc = 0;

	sh_dec_init(&d, p, len);
	v = sh_dec_u8(&d);
	idx = sh_dec_u64(&d);
	if (sh_dec_error(&d)) {
		rc = -EBADMSG;
	} else if (v == SNAP_MARKER) {
		/* at start: the store must hold what the log forgot */
		if (g->applied < idx) {
			sh_log_error("group %#x: the bucket store holds index %llu, the log "
				     "starts after %llu: the store was lost or replaced",
				     g->p.id, (unsigned long long)g->applied,
				     (unsigned long long)idx);
			return -EBADMSG;
		}
	} else if (v == SNAP_WHOLE && g->applied >= idx) {
		/* installed already, as it was stored (snap_persist) */
	} else {
		rc = install_whole(g, p, len, applied);
	}
	if (rc < 0) {
		sh_log_error("group %#x: snapshot of %zu bytes does not restore: %s", g->p.id, len,
			     sh_strerror(rc));
		return rc == -EBADMSG ? rc : -EIO;
	}
	return 0;
}

/* What the log stores of a snapshot, and what a follower is sent (rgroup_sm) */
static int
sm_persist(void *arg, uint64_t idx, const void *p, size_t len, struct rgroup_buf *keep)
{
	struct mgroup *g = arg;
	int rc;

	if (((const uint8_t *)p)[0] == SNAP_MARKER)
		return 0; /* our own: the store is durable at its index */
	/* a leader's whole state: in the store, durably, before the log forgets */
	rc = install_whole(g, p, len, idx);
	if (rc == 0)
		rc = marker(idx, keep);
	if (rc < 0)
		sh_log_error("group %#x: state of %zu bytes at %llu not installed: %s", g->p.id,
			     len, (unsigned long long)idx, sh_strerror(rc));
	else
		sh_log_info("group %#x: installed the leader's state at %llu", g->p.id,
			    (unsigned long long)g->applied);
	return rc;
}

static int
sm_expand(void *arg, const void *kept, size_t len, struct rgroup_buf *out)
{
	struct mgroup *g = arg;

	if (len == 0 || ((const uint8_t *)kept)[0] != SNAP_MARKER)
		return rgroup_buf_copy(kept, len, out); /* an older log's whole snapshot */
	return export_whole(g, out);
}

/* ---- readiness ---- */

static void
wake_waiters(struct mgroup *g, bool all_fail)
{
	struct sh_list *pos, *tmp;
	uint64_t now = env_now(g->env);
	bool ready = !all_fail && mgroup_ready(g);
	bool leader = !all_fail && leads(g);

	sh_list_for_each_safe (pos, tmp, &g->waiters) {
		struct waiter *w = sh_list_entry(pos, struct waiter, link);

		if (!ready && leader && now < w->deadline)
			continue;
		sh_list_del(&w->link);
		w->cb(w->arg, ready ? 0 : SH_ENOTLEADER);
		sh_free(w);
	}
}

static void
on_notify(struct env_task *t)
{
	wake_waiters(t->arg, false);
}

static void
on_barrier(void *arg, int status, void *result)
{
	struct mgroup *g = arg;

	(void)result;
	g->barrier_busy = false;
	if (g->closing)
		return;
	if (status == 0 && g->barrier_term == rgroup_term(g->rg) && leads(g)) {
		g->ready_term = g->barrier_term;
		sh_log_debug("group %#x: leader of term %llu, serving", g->p.id,
			     (unsigned long long)g->ready_term);
		if (g->p.ready)
			g->p.ready(g->p.arg, g);
	}
	env_post(&g->notify);
}

/* A new leader serves once its barrier is applied: then it has every committed entry. */
static void
check_ready(struct mgroup *g)
{
	if (!leads(g) || g->ready_term == rgroup_term(g->rg) || g->barrier_busy)
		return;
	g->barrier_term = rgroup_term(g->rg);
	if (rgroup_barrier(g->rg, on_barrier, g) == 0)
		g->barrier_busy = true;
}

bool
mgroup_ready(struct mgroup *g)
{
	if (!leads(g))
		return false;
	if (g->ready_term == rgroup_term(g->rg))
		return true;
	check_ready(g);
	return false;
}

uint64_t
mgroup_leader(struct mgroup *g)
{
	return g->closing ? 0 : rgroup_leader(g->rg);
}

int
mgroup_wait_ready(struct mgroup *g, uint64_t timeout_ns, void (*cb)(void *arg, int status),
		  void *arg)
{
	struct waiter *w = sh_calloc(1, sizeof(*w));

	if (w == NULL)
		return -ENOMEM;
	w->deadline = env_now(g->env) + timeout_ns;
	w->cb = cb;
	w->arg = arg;
	sh_list_add_tail(&g->waiters, &w->link);
	check_ready(g);
	env_post(&g->notify);
	return 0;
}

static void
on_transferred(void *arg, int status, void *result)
{
	struct mgroup *g = arg;

	(void)status;
	(void)result;
	g->transferring = false;
	g->hold_cache = false; /* handed over, or not: either way leases are safe again */
}

void
mgroup_hold_cache(struct mgroup *g, bool hold)
{
	g->hold_cache = hold;
}

uint64_t
mgroup_lease_end(struct mgroup *g)
{
	uint64_t st[MGROUP_VOTERS_MAX], now = env_now(g->env), s;
	unsigned n = 0;

	if (g->transferring || !leads(g))
		return 0;
	for (unsigned i = 0; i < rgroup_nmembers(g->rg) && n < MGROUP_VOTERS_MAX; i++) {
		struct rgroup_member m = rgroup_member(g->rg, i);

		if (m.role == RGROUP_VOTER)
			st[n++] = m.id == g->p.self ? now : rgroup_acked(g->rg, m.id);
	}
	for (unsigned i = 1; i < n; i++) /* newest first */
		for (unsigned k = i; k > 0 && st[k] > st[k - 1]; k--) {
			s = st[k];
			st[k] = st[k - 1];
			st[k - 1] = s;
		}
	s = n ? st[n / 2] : 0; /* the oldest of the newest quorum (n / 2 + 1) */
	return s ? s + (uint64_t)g->p.election_ms * 900 * 1000 : 0;
}

bool
mgroup_cache_ok(struct mgroup *g, uint64_t lease_ns)
{
	return !g->hold_cache && mgroup_lease_end(g) >= env_now(g->env) + lease_ns;
}

/* Leadership to member `to` (0: the one libraft finds most up to date). 0, -EAGAIN. */
static int
start_transfer(struct mgroup *g, uint64_t to)
{
	if (g->transferring || !leads(g))
		return -EAGAIN;
	if (rgroup_transfer(g->rg, to, on_transferred, g) != 0)
		return -EAGAIN;
	g->transferring = true;
	return 0;
}

/* Marked down, yet leading: clients skip this node, so another member should lead. */
static void
hand_over(struct mgroup *g)
{
	if (g->demoted && start_transfer(g, 0) == 0)
		sh_log_info("group %#x: this node is marked down: handing leadership over",
			    g->p.id);
}

int
mgroup_transfer(struct mgroup *g, uint64_t to)
{
	return g->demoted || g->changing ? -EAGAIN : start_transfer(g, to);
}

void
mgroup_set_demoted(struct mgroup *g, bool demoted)
{
	g->demoted = demoted;
	hand_over(g);
}

/* ---- membership: the configuration's members become the group's voters ---- */

static bool
wanted(const struct mgroup *g, uint64_t id)
{
	for (unsigned i = 0; i < g->p.nmembers; i++)
		if (g->members[i] == id)
			return true;
	return false;
}

static void
on_change(void *arg, int status, void *result)
{
	struct mgroup *g = arg;

	(void)result;
	g->changing = false;
	if (status != 0) {
		/* a new member that cannot catch up (unreachable, or too far behind to be sent
		 * the state) is not asked for again at once: the state is sent whole each time */
		g->change_after = env_now(g->env) + CHANGE_RETRY_NS;
		sh_log_warn("group %#x: membership change: %s (again in %llu s)", g->p.id,
			    sh_strerror(status),
			    (unsigned long long)(CHANGE_RETRY_NS / 1000000000ull));
	}
}

/*
 * One change at a time, at the leader: a new member is added (as a spare)
 * and made a voter (libraft first brings its log up to date: entries, or
 * the whole state), and only then is a member the configuration dropped
 * removed, so the group never has fewer voters than it had.
 */
static void
reconcile(struct mgroup *g)
{
	const char *what = NULL;
	uint64_t id = 0;
	int err = 0;

	if (g->changing || !leads(g) || env_now(g->env) < g->change_after)
		return;
	for (unsigned i = 0; i < g->p.nmembers && what == NULL; i++) {
		struct rgroup_member m;

		id = g->members[i];
		if (!rgroup_find(g->rg, id, &m)) {
			what = "adding";
			err = rgroup_add(g->rg, id, NULL, on_change, g);
		} else if (m.role != RGROUP_VOTER) {
			what = "making a voter of";
			err = rgroup_assign(g->rg, id, RGROUP_VOTER, on_change, g);
		}
	}
	for (unsigned k = 0; k < rgroup_nmembers(g->rg) && what == NULL; k++) {
		id = rgroup_member(g->rg, k).id;
		if (wanted(g, id) || id == g->p.self)
			continue;
		what = "removing";
		err = rgroup_remove(g->rg, id, on_change, g);
	}
	if (what == NULL)
		return;
	if (err != 0) {
		sh_log_debug("group %#x: %s node %llu refused: %s", g->p.id, what,
			     (unsigned long long)(id >> 8), sh_strerror(err));
		return;
	}
	g->changing = true;
	sh_log_info("group %#x: %s node %llu", g->p.id, what, (unsigned long long)(id >> 8));
}

int
mgroup_set_members(struct mgroup *g, const uint64_t *members, unsigned n)
{
	uint64_t *m;

	if (n == 0)
		return -EINVAL;
	m = sh_calloc(n, sizeof(*m));
	if (m == NULL)
		return -ENOMEM;
	memcpy(m, members, n * sizeof(*m));
	sh_free(g->members);
	g->members = m;
	g->p.members = m;
	g->p.nmembers = n;
	reconcile(g);
	return 0;
}

static void
on_tick(struct env_timer *t)
{
	struct mgroup *g = t->arg;

	if (g->closing)
		return;
	hand_over(g);
	reconcile(g);
	check_ready(g);
	if (!sh_list_empty(&g->waiters))
		wake_waiters(g, false);
	env_timer_arm_period(&g->tick, TICK_NS);
}

/* ---- proposals ---- */

/* Not led here any more, closing, or anything else: what a proposer is told. */
static int
prop_status(int status)
{
	return status == 0 || status == SH_ENOTLEADER || status == -ESHUTDOWN ? status : -EIO;
}

static void
on_applied(void *arg, int status, void *result)
{
	struct prop *pr = arg;

	pr->cb(pr->arg, prop_status(status), status == 0 ? result : NULL);
	sh_free(pr);
}

static int
encode_entry(uint16_t bucket, const struct meta_cmd *c, struct rgroup_buf *buf)
{
	struct sh_enc e;
	int rc;

	sh_enc_init(&e);
	sh_enc_u16(&e, bucket);
	rc = meta_cmd_encode(&e, c);
	if (rc == 0)
		rc = rgroup_buf_enc(&e, buf);
	sh_enc_fini(&e);
	return rc;
}

int
mgroup_propose(struct mgroup *g, uint16_t bucket, const struct meta_cmd *c, mgroup_cb cb, void *arg)
{
	struct rgroup_buf buf;
	struct prop *pr;
	int rc;

	if (!mgroup_has_bucket(g, bucket))
		return -EINVAL;
	if (!mgroup_ready(g))
		return SH_ENOTLEADER;
	rc = encode_entry(bucket, c, &buf);
	if (rc < 0)
		return rc;
	pr = sh_calloc(1, sizeof(*pr));
	if (pr == NULL) {
		rgroup_free(buf.p);
		return -ENOMEM;
	}
	pr->cb = cb;
	pr->arg = arg;
	rc = rgroup_propose(g->rg, &buf, on_applied, pr); /* buf taken */
	if (rc != 0) {
		sh_free(pr);
		return rc == SH_ENOTLEADER || rc == -ENOMEM ? rc : -EIO;
	}
	return 0;
}

int
mgroup_try(struct mgroup *g, uint16_t bucket, const struct meta_cmd *c, struct meta_result *r,
	   bool *wrote)
{
	struct meta_bucket mb = { .bucket = bucket, .nbuckets = g->p.nbuckets };
	int rc;

	if (!mgroup_has_bucket(g, bucket))
		return -EINVAL;
	rc = meta_txn_begin(g->p.db, true, &mb.t);
	if (rc < 0)
		return rc;
	mb.vs = version_for(g, c); /* (a dry run: the copy changes, never the state) */
	meta_cmd_apply(&mb, c, r);
	*wrote = meta_txn_wrote(mb.t);
	meta_txn_abort(mb.t);
	return 0;
}

int
mgroup_read(struct mgroup *g, uint16_t bucket, struct meta_bucket *b)
{
	return mgroup_read_at(g, bucket, 0, b);
}

int
mgroup_read_at(struct mgroup *g, uint16_t bucket, uint64_t at, struct meta_bucket *b)
{
	memset(b, 0, sizeof(*b));
	if (!mgroup_has_bucket(g, bucket))
		return -EINVAL;
	b->bucket = bucket;
	b->nbuckets = g->p.nbuckets;
	b->ver = at != 0 ? at : META_VER_NEWEST; /* 0: the newest */
	return meta_txn_begin(g->p.db, false, &b->t);
}

const struct meta_version *
mgroup_version(const struct mgroup *g)
{
	return &g->vs;
}

/* ---- life ---- */

static unsigned
clampu(uint64_t v, unsigned lo, unsigned hi)
{
	return v < lo ? lo : v > hi ? hi : (unsigned)v;
}

/*
 * What the store holds of this group: kept if the log has state and the
 * store knows the index it applied; otherwise dropped (a new member, or
 * a store written before it recorded indexes) and rebuilt from the log.
 */
static int
load_applied(struct mgroup *g)
{
	struct meta_txn *t;
	uint64_t idx = 0;
	int rc = meta_txn_begin(g->p.db, true, &t);

	if (rc < 0)
		return rc;
	if (rgroup_has_state(g->rg))
		rc = applied_get(g, t, &idx);
	if (rc == 0 && idx == 0)
		for (unsigned i = 0; i < g->p.nb && rc == 0; i++)
			rc = meta_drop_bucket(t, g->buckets[i]);
	rc = rc < 0 ? (meta_txn_abort(t), rc) : meta_txn_commit(t);
	if (rc == 0)
		rc = meta_db_flush(g->p.db, false);
	if (rc == 0)
		g->applied = idx;
	if (rc == 0)
		rc = version_load(g);
	if (idx != 0)
		sh_log_info("group %#x: bucket store at index %llu", g->p.id,
			    (unsigned long long)idx);
	return rc;
}

static void
on_log_open(void *arg, int status)
{
	struct mgroup *g = arg;
	int rc;

	if (g->closing)
		return;
	if (status < 0) {
		sh_log_error("group %#x: raft log %s: %s", g->p.id, g->path, sh_strerror(status));
		return;
	}
	rc = load_applied(g);
	if (rc < 0) {
		sh_log_error("group %#x: bucket store: %s", g->p.id, sh_strerror(rc));
		return;
	}
	if (!rgroup_has_state(g->rg) && g->p.join) {
		/* a member that replaced another: the leader adds it and sends it the state */
		sh_log_info("group %#x: joining; waiting for the leader to add this node", g->p.id);
	} else if (!rgroup_has_state(g->rg)) {
		/* every member bootstraps the same voters: the group forms by itself */
		if (rgroup_bootstrap(g->rg, g->members, NULL, g->p.nmembers) < 0)
			return;
	}
	if (rgroup_start(g->rg) < 0)
		return;
	env_timer_arm_period(&g->tick, TICK_NS);
}

int
mgroup_open(struct rnet *rn, const struct mgroup_params *p, struct mgroup **out)
{
	struct mgroup *g;
	struct rgroup_params rp;
	int rc;

	if (p->nmembers == 0 || p->nb == 0 || p->nbuckets == 0 || p->nbuckets > 65536)
		return -EINVAL;
	g = sh_calloc(1, sizeof(*g));
	if (g == NULL)
		return -ENOMEM;
	g->p = *p;
	g->members = sh_calloc(p->nmembers, sizeof(*g->members));
	g->buckets = sh_calloc(p->nb, sizeof(*g->buckets));
	g->mine = sh_calloc((p->nbuckets + 7) / 8, 1);
	if (g->members == NULL || g->buckets == NULL || g->mine == NULL) {
		rc = -ENOMEM;
		goto err;
	}
	memcpy(g->members, p->members, p->nmembers * sizeof(*g->members));
	memcpy(g->buckets, p->buckets, p->nb * sizeof(*g->buckets));
	g->p.members = g->members;
	g->p.buckets = g->buckets;
	g->vs.buckets = g->vs_work.buckets = g->buckets;
	g->vs.nb = g->vs_work.nb = p->nb;
	meta_version_init(&g->vs);
	snprintf(g->path, sizeof(g->path), "%s", p->path);
	g->p.path = g->path;
	if (g->p.election_ms == 0)
		g->p.election_ms = 700;
	for (unsigned i = 0; i < p->nb; i++) {
		if (p->buckets[i] >= p->nbuckets) {
			rc = -EINVAL;
			goto err;
		}
		g->mine[p->buckets[i] / 8] |= (uint8_t)(1u << (p->buckets[i] % 8));
	}
	g->rn = rn;
	g->env = rnet_env(rn);
	sh_list_init(&g->waiters);
	env_timer_init(g->env, &g->tick, on_tick, g);
	env_timer_init(g->env, &g->flush, on_flush, g);
	env_task_init(g->env, &g->notify, on_notify, g);
	rp = (struct rgroup_params){
		.io = { .group = p->id,
			.id = p->self,
			.wal = p->wal,
			.name = g->path,
			.path = g->path,
			.log_size = p->log_size,
			.vote_guard_ns = (uint64_t)g->p.election_ms * 1000 * 1000 },
		.election_ms = g->p.election_ms,
		.heartbeat_ms = g->p.election_ms / 7,
		/*
		 * Compact every `threshold` entries, keeping `trailing` for
		 * followers a little behind (further behind, they get the whole
		 * state): both must fit a log half at ~4 KiB an entry (inline
		 * file data).
		 */
		.snapshot_threshold = clampu(p->log_size >> 15, 64, 512),
		.snapshot_trailing = clampu(p->log_size >> 14, 128, 2048),
		.install_snapshot_ms = 10000,
		.sm = { .apply = sm_apply,
			.snapshot = sm_snapshot,
			.restore = sm_restore,
			.persist = sm_persist,
			.expand = sm_expand,
			.arg = g },
	};
	rc = rgroup_open(rn, &rp, on_log_open, g, &g->rg);
	if (rc < 0)
		goto err;
	*out = g;
	return 0;
err:
	sh_free(g->members);
	sh_free(g->buckets);
	sh_free(g->mine);
	sh_free(g);
	return rc;
}

/* rgroup's done: every proposal in flight has been called back, the rgroup is gone. */
static void
finish(void *arg_)
{
	struct mgroup *g = arg_;
	void (*done)(void *) = g->done;
	void *arg = g->done_arg;

	wake_waiters(g, true);
	sh_free(g->members);
	sh_free(g->buckets);
	sh_free(g->mine);
	sh_free(g);
	if (done)
		done(arg);
}

void
mgroup_close(struct mgroup *g, void (*done)(void *arg), void *arg)
{
	g->closing = true;
	g->done = done;
	g->done_arg = arg;
	env_timer_cancel(&g->tick);
	env_timer_cancel(&g->flush); /* the store commits its batch when it closes */
	env_task_cancel(&g->notify);
	rgroup_close(g->rg, finish, g); /* fails the proposals in flight */
}

uint32_t
mgroup_id(const struct mgroup *g)
{
	return g->p.id;
}

bool
mgroup_has_bucket(const struct mgroup *g, uint16_t bucket)
{
	return bucket < g->p.nbuckets && (g->mine[bucket / 8] >> (bucket % 8) & 1);
}

const uint16_t *
mgroup_buckets(const struct mgroup *g, unsigned *n)
{
	*n = g->p.nb;
	return g->buckets;
}

void
mgroup_info(struct mgroup *g, struct mgroup_info *out)
{
	memset(out, 0, sizeof(*out));
	if (g->closing || !rgroup_started(g->rg))
		return;
	out->raft_state = rgroup_state(g->rg);
	out->term = rgroup_term(g->rg);
	out->commit = rgroup_commit(g->rg);
	out->applied = rgroup_applied(g->rg);
	out->leader = mgroup_leader(g);
	for (unsigned i = 0; i < rgroup_nmembers(g->rg); i++) {
		struct rgroup_member m = rgroup_member(g->rg, i);

		if (m.role == RGROUP_VOTER && out->nvoters < MGROUP_VOTERS_MAX)
			out->voters[out->nvoters++] = m.id;
	}
	out->ready = g->ready_term == out->term && out->raft_state == RGROUP_LEADER;
}
