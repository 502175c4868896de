// SPDX-License-Identifier: Apache-2.0
/* A metadata Raft group: the buckets of one replica set (mgroup.h). */
#include <stdio.h>
#include <string.h>

#include "mgroup.h"

SH_LOG_FACILITY("meta.group");

#define SNAP_VERSION 1

struct prop {
	struct sh_list link;
	struct mgroup *g;
	struct raft_apply req;
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
	struct raft raft;
	struct raft_io io;
	struct raft_fsm fsm;
	bool inited, started, closing;
	/* the leader's barrier of its term, applied: it serves */
	uint64_t ready_term;
	uint64_t barrier_term; /* a barrier in flight for this term */
	struct raft_barrier barrier;
	bool barrier_busy;
	struct meta_result res; /* the last applied command's result */
	struct sh_list props;	/* struct prop in flight */
	struct sh_list waiters; /* struct waiter */
	struct env_timer tick;
	struct env_task notify;
	void (*done)(void *arg);
	void *done_arg;
	struct env_task done_task;
};

static void check_ready(struct mgroup *g);

/* ---- the state machine ---- */

static int
fsm_apply(struct raft_fsm *fsm, const struct raft_buffer *buf, void **result)
{
	struct mgroup *g = fsm->data;
	struct meta_bucket mb = { .nbuckets = g->p.nbuckets };
	struct meta_cmd c;
	const uint8_t *b = buf->base;
	int rc;

	*result = &g->res;
	memset(&g->res, 0, sizeof(g->res));
	/* an entry is (u16 bucket, command); a bad one is rejected alike everywhere */
	if (buf->len < 2 || meta_cmd_decode(b + 2, buf->len - 2, &c) < 0) {
		g->res.status = -EBADMSG;
		return 0;
	}
	mb.bucket = (uint16_t)(b[0] | b[1] << 8); /* sh_enc_u16: little-endian */
	if (!mgroup_has_bucket(g, mb.bucket)) {
		g->res.status = -EINVAL;
		return 0;
	}
	rc = meta_txn_begin(g->p.db, true, &mb.t);
	if (rc < 0) {
		/* the store failed under us: this replica cannot go on */
		sh_log_error("group %#x: bucket store: %s", g->p.id, sh_strerror(rc));
		return RAFT_IOERR;
	}
	meta_cmd_apply(&mb, &c, &g->res);
	if (g->res.status < 0) {
		meta_txn_abort(mb.t);
	} else {
		rc = meta_txn_commit(mb.t);
		if (rc < 0) {
			sh_log_error("group %#x: bucket store commit: %s", g->p.id,
				     sh_strerror(rc));
			return RAFT_IOERR;
		}
	}
	if (g->p.applied)
		g->p.applied(g->p.arg, g, mb.bucket, &c, &g->res);
	return 0;
}

static int
fsm_snapshot(struct raft_fsm *fsm, struct raft_buffer *bufs[], unsigned *n)
{
	struct mgroup *g = fsm->data;
	struct meta_txn *t;
	struct sh_enc e, one;
	int rc = meta_txn_begin(g->p.db, false, &t);

	if (rc < 0)
		return RAFT_IOERR;
	sh_enc_init(&e);
	sh_enc_u8(&e, SNAP_VERSION);
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
		rc = sh_enc_error(&e);
	if (rc == 0) {
		*bufs = raft_malloc(sizeof(**bufs));
		if (*bufs != NULL) {
			(*bufs)[0].base = raft_malloc(e.len);
			if ((*bufs)[0].base == NULL) {
				raft_free(*bufs);
				rc = -ENOMEM;
			} else {
				memcpy((*bufs)[0].base, e.p, e.len);
				(*bufs)[0].len = e.len;
				*n = 1;
			}
		} else {
			rc = -ENOMEM;
		}
	}
	sh_enc_fini(&e);
	return rc == 0 ? 0 : rc == -ENOMEM ? RAFT_NOMEM : RAFT_IOERR;
}

static int
fsm_restore(struct raft_fsm *fsm, struct raft_buffer *buf)
{
	struct mgroup *g = fsm->data;
	struct sh_dec d;
	struct meta_txn *t;
	uint32_t nb;
	int rc = meta_txn_begin(g->p.db, true, &t);

	if (rc < 0)
		return RAFT_IOERR;
	sh_dec_init(&d, buf->base, buf->len);
	if (sh_dec_u8(&d) != SNAP_VERSION)
		rc = -EBADMSG;
	nb = sh_dec_u32(&d);
	for (uint32_t i = 0; i < nb && rc == 0 && !sh_dec_error(&d); i++) {
		uint16_t bucket = sh_dec_u16(&d);
		size_t len;
		const uint8_t *p = sh_dec_blob(&d, SIZE_MAX, &len);

		if (sh_dec_error(&d) || !mgroup_has_bucket(g, bucket))
			rc = -EBADMSG;
		else
			rc = meta_import_bucket(t, bucket, p, len);
	}
	if (rc == 0 && sh_dec_error(&d))
		rc = -EBADMSG;
	if (rc < 0) {
		meta_txn_abort(t);
		sh_log_error("group %#x: snapshot of %zu bytes does not restore: %s", g->p.id,
			     buf->len, sh_strerror(rc));
		return RAFT_CORRUPT;
	}
	rc = meta_txn_commit(t);
	if (rc < 0)
		return RAFT_IOERR;
	raft_free(buf->base);
	return 0;
}

/* ---- readiness ---- */

static void
wake_waiters(struct mgroup *g, bool all_fail)
{
	struct sh_list *pos, *tmp;
	uint64_t now = env_now(g->env);
	bool ready = !all_fail && mgroup_ready(g);
	bool leader = !all_fail && g->started && raft_state(&g->raft) == RAFT_LEADER;

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
on_barrier(struct raft_barrier *req, int status)
{
	struct mgroup *g = req->data;

	g->barrier_busy = false;
	if (g->closing)
		return;
	if (status == 0 && g->barrier_term == g->raft.current_term &&
	    raft_state(&g->raft) == RAFT_LEADER) {
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
	if (!g->started || g->closing || raft_state(&g->raft) != RAFT_LEADER)
		return;
	if (g->ready_term == g->raft.current_term || g->barrier_busy)
		return;
	g->barrier.data = g;
	g->barrier_term = g->raft.current_term;
	if (raft_barrier(&g->raft, &g->barrier, on_barrier) == 0)
		g->barrier_busy = true;
}

bool
mgroup_ready(struct mgroup *g)
{
	if (!g->started || g->closing || raft_state(&g->raft) != RAFT_LEADER)
		return false;
	if (g->ready_term == g->raft.current_term)
		return true;
	check_ready(g);
	return false;
}

uint64_t
mgroup_leader(struct mgroup *g)
{
	raft_id id = 0;
	const char *addr;

	if (g->started)
		raft_leader(&g->raft, &id, &addr);
	return id;
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
on_tick(struct env_timer *t)
{
	struct mgroup *g = t->arg;

	if (g->closing)
		return;
	check_ready(g);
	if (!sh_list_empty(&g->waiters))
		wake_waiters(g, false);
	env_timer_arm(&g->tick, 50ull * 1000 * 1000);
}

/* ---- proposals ---- */

static void
on_applied(struct raft_apply *req, int status, void *result)
{
	struct prop *pr = req->data;

	sh_list_del(&pr->link);
	if (status != 0)
		pr->cb(pr->arg,
		       status == RAFT_NOTLEADER || status == RAFT_LEADERSHIPLOST ? SH_ENOTLEADER
		       : status == RAFT_SHUTDOWN				 ? -ESHUTDOWN
										 : -EIO,
		       NULL);
	else
		pr->cb(pr->arg, 0, result);
	sh_free(pr);
}

static int
encode_entry(uint16_t bucket, const struct meta_cmd *c, struct raft_buffer *buf)
{
	struct sh_enc e;
	int rc;

	sh_enc_init(&e);
	sh_enc_u16(&e, bucket);
	rc = meta_cmd_encode(&e, c);
	if (rc == 0 && (buf->base = raft_malloc(e.len)) == NULL)
		rc = -ENOMEM;
	if (rc == 0) {
		memcpy(buf->base, e.p, e.len);
		buf->len = e.len;
	}
	sh_enc_fini(&e);
	return rc;
}

int
mgroup_propose(struct mgroup *g, uint16_t bucket, const struct meta_cmd *c, mgroup_cb cb, void *arg)
{
	struct raft_buffer buf;
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
		raft_free(buf.base);
		return -ENOMEM;
	}
	pr->g = g;
	pr->cb = cb;
	pr->arg = arg;
	pr->req.data = pr;
	rc = raft_apply(&g->raft, &pr->req, &buf, 1, on_applied);
	if (rc != 0) {
		raft_free(buf.base);
		sh_free(pr);
		return rc == RAFT_NOTLEADER ? SH_ENOTLEADER : -EIO;
	}
	sh_list_add_tail(&g->props, &pr->link);
	return 0;
}

int
mgroup_try(struct mgroup *g, uint16_t bucket, const struct meta_cmd *c, struct meta_result *r)
{
	struct meta_bucket mb = { .bucket = bucket, .nbuckets = g->p.nbuckets };
	int rc;

	if (!mgroup_has_bucket(g, bucket))
		return -EINVAL;
	rc = meta_txn_begin(g->p.db, true, &mb.t);
	if (rc < 0)
		return rc;
	meta_cmd_apply(&mb, c, r);
	meta_txn_abort(mb.t);
	return 0;
}

int
mgroup_read(struct mgroup *g, uint16_t bucket, struct meta_bucket *b)
{
	memset(b, 0, sizeof(*b));
	if (!mgroup_has_bucket(g, bucket))
		return -EINVAL;
	b->bucket = bucket;
	b->nbuckets = g->p.nbuckets;
	b->ver = UINT64_MAX >> 1; /* the newest (no snapshots read here yet) */
	return meta_txn_begin(g->p.db, false, &b->t);
}

/* ---- life ---- */

static void
on_log_open(void *arg, int status)
{
	struct mgroup *g = arg;
	struct raft_configuration conf;
	int rc;

	if (g->closing)
		return;
	if (status < 0) {
		sh_log_error("group %#x: raft log %s: %s", g->p.id, g->path, sh_strerror(status));
		return;
	}
	char self[24];

	/* libraft wants distinct addresses: the ids are what the transport uses */
	snprintf(self, sizeof(self), "%llx", (unsigned long long)g->p.self);
	rc = raft_init(&g->raft, &g->io, &g->fsm, g->p.self, self);
	if (rc != 0) {
		sh_log_error("group %#x: raft init: %s", g->p.id, raft_strerror(rc));
		return;
	}
	g->inited = true;
	g->raft.data = g;
	raft_set_election_timeout(&g->raft, g->p.election_ms);
	raft_set_heartbeat_timeout(&g->raft, g->p.election_ms / 7);
	raft_set_snapshot_threshold(&g->raft, 512);
	raft_set_snapshot_trailing(&g->raft, 128);
	raft_set_pre_vote(&g->raft, true);
	raft_set_install_snapshot_timeout(&g->raft, 10000);
	if (!rio_has_state(&g->io)) {
		/* every member bootstraps the same voters: the group forms by itself */
		raft_configuration_init(&conf);
		rc = 0;
		for (unsigned i = 0; i < g->p.nmembers && rc == 0; i++) {
			char a[24];

			snprintf(a, sizeof(a), "%llx", (unsigned long long)g->members[i]);
			rc = raft_configuration_add(&conf, g->members[i], a, RAFT_VOTER);
		}
		if (rc == 0)
			rc = raft_bootstrap(&g->raft, &conf);
		raft_configuration_close(&conf);
		if (rc != 0) {
			sh_log_error("group %#x: bootstrap: %s", g->p.id, raft_strerror(rc));
			return;
		}
	}
	rc = raft_start(&g->raft);
	if (rc != 0) {
		sh_log_error("group %#x: raft start: %s (%s)", g->p.id, raft_strerror(rc),
			     raft_errmsg(&g->raft));
		return;
	}
	g->started = true;
	env_timer_arm(&g->tick, 50ull * 1000 * 1000);
}

int
mgroup_open(struct rnet *rn, const struct mgroup_params *p, struct mgroup **out)
{
	struct mgroup *g;
	struct rio_params rp;
	struct meta_txn *t;
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
	/* the store is rebuilt from the log: drop what it held of these buckets */
	rc = meta_txn_begin(p->db, true, &t);
	for (unsigned i = 0; i < p->nb && rc == 0; i++)
		rc = meta_drop_bucket(t, p->buckets[i]);
	if (rc == 0)
		rc = meta_txn_commit(t);
	else if (t)
		meta_txn_abort(t);
	if (rc < 0)
		goto err;
	g->rn = rn;
	g->env = rnet_env(rn);
	sh_list_init(&g->props);
	sh_list_init(&g->waiters);
	g->fsm = (struct raft_fsm){ .version = 1,
				    .data = g,
				    .apply = fsm_apply,
				    .snapshot = fsm_snapshot,
				    .restore = fsm_restore };
	env_timer_init(g->env, &g->tick, on_tick, g);
	env_task_init(g->env, &g->notify, on_notify, g);
	rp = (struct rio_params){
		.group = p->id, .id = p->self, .path = g->path, .log_size = p->log_size
	};
	rc = rio_open(rn, &g->io, &rp, on_log_open, g);
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

static void
finish(struct env_task *t)
{
	struct mgroup *g = t->arg;
	void (*done)(void *) = g->done;
	void *arg = g->done_arg;

	wake_waiters(g, true);
	rio_destroy(&g->io);
	sh_free(g->members);
	sh_free(g->buckets);
	sh_free(g->mine);
	sh_free(g);
	if (done)
		done(arg);
}

static void
on_closed(struct raft *raft)
{
	struct mgroup *g = raft->data;

	env_post(&g->done_task);
}

void
mgroup_close(struct mgroup *g, void (*done)(void *arg), void *arg)
{
	g->closing = true;
	g->done = done;
	g->done_arg = arg;
	env_timer_cancel(&g->tick);
	env_task_cancel(&g->notify);
	env_task_init(g->env, &g->done_task, finish, g);
	if (g->inited)
		raft_close(&g->raft, on_closed); /* fails the proposals in flight */
	else
		env_post(&g->done_task);
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
	if (!g->started)
		return;
	out->raft_state = raft_state(&g->raft);
	out->term = g->raft.current_term;
	out->commit = g->raft.commit_index;
	out->applied = raft_last_applied(&g->raft);
	out->leader = mgroup_leader(g);
	out->ready = g->ready_term == g->raft.current_term && out->raft_state == RAFT_LEADER;
}
