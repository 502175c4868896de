// SPDX-License-Identifier: Apache-2.0
/* One member of a Raft group: libraft behind Shoal's interface (rgroup.h). */
#include <assert.h>
#include <raft.h>
#include <stdio.h>
#include <string.h>

#include "rgroup.h"

SH_LOG_FACILITY("cluster.raft");

_Static_assert((int)RGROUP_UNAVAILABLE == RAFT_UNAVAILABLE &&
		   (int)RGROUP_FOLLOWER == RAFT_FOLLOWER &&
		   (int)RGROUP_CANDIDATE == RAFT_CANDIDATE && (int)RGROUP_LEADER == RAFT_LEADER,
	       "rgroup_state is raft_state");
_Static_assert((int)RGROUP_STANDBY == RAFT_STANDBY && (int)RGROUP_VOTER == RAFT_VOTER &&
		   (int)RGROUP_SPARE == RAFT_SPARE,
	       "rgroup_role is libraft's role");

/* A request in flight: libraft holds its request struct until it calls back. */
struct rgop {
	struct sh_list link; /* rgroup.ops */
	struct rgroup *g;
	union {
		struct raft_apply apply;
		struct raft_barrier barrier;
		struct raft_change change;
		struct raft_transfer transfer;
	} u;
	rgroup_cb cb;
	void *arg;
	bool ended; /* libraft called back while closing: told at the end, with status, result */
	int status;
	void *result;
};

struct rgroup {
	struct rgroup_params p;
	char addr[64];
	struct env *env;
	struct raft raft;
	struct raft_io io;
	struct raft_fsm fsm;
	struct rio_snap_hooks hooks;
	bool inited, started, closing;
	struct sh_list ops; /* struct rgop, called back by libraft or at the end */
	void (*opened)(void *arg, int status);
	void *opened_arg;
	void (*done)(void *arg);
	void *done_arg;
	struct env_task done_task;
};

/* ---- codes ---- */

static int
to_errno(int rv)
{
	switch (rv) {
	case 0:
		return 0;
	case RAFT_NOTLEADER:
	case RAFT_LEADERSHIPLOST:
		return SH_ENOTLEADER;
	case RAFT_SHUTDOWN:
	case RAFT_CANCELED:
		return -ESHUTDOWN;
	case RAFT_NOMEM:
		return -ENOMEM;
	case RAFT_CANTCHANGE:
	case RAFT_BUSY:
		return -EBUSY;
	case RAFT_BADID:
	case RAFT_NOTFOUND:
		return -ENOENT;
	case RAFT_DUPLICATEID:
	case RAFT_DUPLICATEADDRESS:
		return -EEXIST;
	case RAFT_TOOBIG:
		return -E2BIG;
	default:
		return -EIO;
	}
}

/* A state machine's -errno as libraft's code. */
static int
to_raft(int rc)
{
	return rc == 0		? 0
	       : rc == -ENOMEM	? RAFT_NOMEM
	       : rc == -EBADMSG ? RAFT_CORRUPT
				: RAFT_IOERR;
}

/* libraft's code for a call that failed, logged once, as errno. */
static int
failed(struct rgroup *g, const char *what, int rv)
{
	int rc = to_errno(rv);

	if (rc != SH_ENOTLEADER && rc != -EBUSY)
		sh_log_debug("group %#x: %s: %s", g->p.io.group, what, raft_strerror(rv));
	return rc;
}

const char *
rgroup_state_name(int state)
{
	switch (state) {
	case RGROUP_FOLLOWER:
		return "follower";
	case RGROUP_CANDIDATE:
		return "candidate";
	case RGROUP_LEADER:
		return "leader";
	default:
		return "unavailable";
	}
}

/* The address libraft is given for a member named by its id alone (distinct, as it wants). */
static const char *
hex_addr(uint64_t id, char a[24])
{
	snprintf(a, 24, "%llx", (unsigned long long)id);
	return a;
}

/* ---- buffers ---- */

void *
rgroup_alloc(size_t len)
{
	return raft_malloc(len ? len : 1);
}

void
rgroup_free(void *p)
{
	raft_free(p);
}

int
rgroup_buf_copy(const void *p, size_t len, struct rgroup_buf *out)
{
	out->p = rgroup_alloc(len);
	if (out->p == NULL)
		return -ENOMEM;
	memcpy(out->p, p, len);
	out->len = len;
	return 0;
}

int
rgroup_buf_enc(const struct sh_enc *e, struct rgroup_buf *out)
{
	int rc = sh_enc_error(e);

	return rc < 0 ? rc : rgroup_buf_copy(e->p, e->len, out);
}

/* ---- the state machine, as libraft calls it ---- */

static int
fsm_apply(struct raft_fsm *fsm, const struct raft_buffer *buf, void **result)
{
	struct rgroup *g = fsm->data;

	*result = NULL;
	/* libraft moves last_applied past an entry once it is applied */
	return to_raft(g->p.sm.apply(g->p.sm.arg, raft_last_applied(&g->raft) + 1, buf->base,
				     buf->len, result));
}

static int
fsm_snapshot(struct raft_fsm *fsm, struct raft_buffer *bufs[], unsigned *n)
{
	struct rgroup *g = fsm->data;
	struct rgroup_buf out = { 0 };
	int rc;

	rc = g->p.sm.snapshot(g->p.sm.arg, raft_last_applied(&g->raft), &out);
	if (rc < 0)
		return to_raft(rc);
	*bufs = raft_malloc(sizeof(**bufs));
	if (*bufs == NULL) {
		rgroup_free(out.p);
		return RAFT_NOMEM;
	}
	(*bufs)[0] = (struct raft_buffer){ .base = out.p, .len = out.len };
	*n = 1;
	return 0;
}

static int
fsm_restore(struct raft_fsm *fsm, struct raft_buffer *buf)
{
	struct rgroup *g = fsm->data;
	int rc = g->p.sm.restore(g->p.sm.arg, raft_last_applied(&g->raft), buf->base, buf->len);

	if (rc < 0)
		return to_raft(rc);
	raft_free(buf->base); /* taken on success */
	return 0;
}

static int
hook_persist(void *arg, const struct raft_snapshot *s, struct raft_buffer *keep)
{
	struct rgroup *g = arg;
	struct rgroup_buf k = { 0 };
	int rc;

	if (s->n_bufs != 1 || s->bufs[0].len == 0)
		return -EBADMSG;
	rc = g->p.sm.persist(g->p.sm.arg, s->index, s->bufs[0].base, s->bufs[0].len, &k);
	keep->base = k.p;
	keep->len = k.len;
	return rc;
}

static int
hook_expand(void *arg, const struct raft_buffer *kept, struct raft_buffer *out)
{
	struct rgroup *g = arg;
	struct rgroup_buf o = { 0 };
	int rc = g->p.sm.expand(g->p.sm.arg, kept->base, kept->len, &o);

	out->base = o.p;
	out->len = o.len;
	return rc;
}

/* ---- life ---- */

static void
on_log_open(void *arg, int status)
{
	struct rgroup *g = arg;
	int rc;

	if (g->closing)
		return;
	if (status == 0) {
		rc = raft_init(&g->raft, &g->io, &g->fsm, g->p.io.id, g->addr);
		if (rc != 0) {
			sh_log_error("group %#x: raft init: %s", g->p.io.group, raft_strerror(rc));
			status = to_errno(rc);
		}
	}
	if (status == 0) {
		g->inited = true;
		g->raft.data = g;
		raft_set_election_timeout(&g->raft, g->p.election_ms);
		raft_set_heartbeat_timeout(&g->raft, g->p.heartbeat_ms);
		raft_set_snapshot_threshold(&g->raft, g->p.snapshot_threshold);
		raft_set_snapshot_trailing(&g->raft, g->p.snapshot_trailing);
		raft_set_pre_vote(&g->raft, true);
		raft_set_install_snapshot_timeout(&g->raft, g->p.install_snapshot_ms);
	}
	g->opened(g->opened_arg, status);
}

int
rgroup_open(struct rnet *rn, const struct rgroup_params *p, void (*opened)(void *arg, int status),
	    void *arg, struct rgroup **out)
{
	struct rgroup *g;
	int rc;

	if (p->sm.apply == NULL || p->sm.snapshot == NULL || p->sm.restore == NULL ||
	    (p->sm.persist == NULL) != (p->sm.expand == NULL) || p->election_ms == 0 ||
	    p->heartbeat_ms == 0 || opened == NULL)
		return -EINVAL;
	g = sh_calloc(1, sizeof(*g));
	if (g == NULL)
		return -ENOMEM;
	g->p = *p;
	g->env = rnet_env(rn);
	g->opened = opened;
	g->opened_arg = arg;
	sh_list_init(&g->ops);
	if (p->addr != NULL)
		snprintf(g->addr, sizeof(g->addr), "%s", p->addr);
	else
		hex_addr(p->io.id, g->addr);
	g->fsm = (struct raft_fsm){ .version = 1,
				    .data = g,
				    .apply = fsm_apply,
				    .snapshot = fsm_snapshot,
				    .restore = fsm_restore };
	g->p.io.hooks = NULL;
	if (p->sm.persist != NULL) {
		g->hooks = (struct rio_snap_hooks){ .persist = hook_persist,
						    .expand = hook_expand,
						    .arg = g };
		g->p.io.hooks = &g->hooks;
	}
	rc = rio_open(rn, &g->io, &g->p.io, on_log_open, g);
	if (rc < 0) {
		sh_free(g);
		return rc;
	}
	*out = g;
	return 0;
}

bool
rgroup_has_state(struct rgroup *g)
{
	return g->inited && rio_has_state(&g->io);
}

int
rgroup_bootstrap(struct rgroup *g, const uint64_t *ids, const char *const *addrs, unsigned n)
{
	struct raft_configuration conf;
	int rv = 0;

	if (!g->inited || g->started)
		return -EAGAIN;
	raft_configuration_init(&conf);
	for (unsigned i = 0; i < n && rv == 0; i++) {
		char a[24];

		rv = raft_configuration_add(&conf, ids[i], addrs ? addrs[i] : hex_addr(ids[i], a),
					    RAFT_VOTER);
	}
	if (rv == 0)
		rv = raft_bootstrap(&g->raft, &conf);
	raft_configuration_close(&conf);
	if (rv != 0)
		sh_log_error("group %#x: bootstrap: %s", g->p.io.group, raft_strerror(rv));
	return to_errno(rv);
}

int
rgroup_start(struct rgroup *g)
{
	int rv;

	if (g->started)
		return 0;
	if (!g->inited || g->closing)
		return -EAGAIN;
	rv = raft_start(&g->raft);
	if (rv != 0) {
		sh_log_error("group %#x: raft start: %s (%s)", g->p.io.group, raft_strerror(rv),
			     raft_errmsg(&g->raft));
		return -EIO;
	}
	g->started = true;
	return 0;
}

bool
rgroup_started(const struct rgroup *g)
{
	return g->started;
}

static void
finish(struct env_task *t)
{
	struct rgroup *g = t->arg;
	void (*done)(void *) = g->done;
	void *arg = g->done_arg;

	/* what libraft failed as it closed, and what it did not call back (forgotten): once, now */
	while (!sh_list_empty(&g->ops)) {
		struct rgop *op = sh_list_entry(sh_list_pop(&g->ops), struct rgop, link);

		if (op->cb != NULL)
			op->cb(op->arg, op->ended ? op->status : -ESHUTDOWN,
			       op->ended ? op->result : NULL);
		sh_free(op);
	}
	rio_destroy(&g->io);
	sh_free(g);
	if (done)
		done(arg);
}

static void
on_closed(struct raft *raft)
{
	struct rgroup *g = raft->data;

	env_post(&g->done_task);
}

void
rgroup_close(struct rgroup *g, void (*done)(void *arg), void *arg)
{
	assert(!g->closing);
	g->closing = true;
	g->done = done;
	g->done_arg = arg;
	env_task_init(g->env, &g->done_task, finish, g);
	if (g->inited)
		raft_close(&g->raft, on_closed); /* fails the requests in flight */
	else
		env_post(&g->done_task);
}

/* ---- what this member knows ---- */

enum rgroup_state
rgroup_state(const struct rgroup *g)
{
	if (!g->started || g->closing)
		return RGROUP_UNAVAILABLE;
	return (enum rgroup_state)raft_state((struct raft *)&g->raft);
}

uint64_t
rgroup_id(const struct rgroup *g)
{
	return g->p.io.id;
}

uint64_t
rgroup_term(const struct rgroup *g)
{
	return g->inited ? g->raft.current_term : 0;
}

uint64_t
rgroup_commit(const struct rgroup *g)
{
	return g->inited ? g->raft.commit_index : 0;
}

uint64_t
rgroup_applied(const struct rgroup *g)
{
	return g->inited ? raft_last_applied((struct raft *)&g->raft) : 0;
}

uint64_t
rgroup_leader(const struct rgroup *g)
{
	raft_id id = 0;
	const char *addr = NULL;

	if (g->started && !g->closing)
		raft_leader((struct raft *)&g->raft, &id, &addr);
	return id;
}

unsigned
rgroup_nmembers(const struct rgroup *g)
{
	return g->inited ? g->raft.configuration.n : 0;
}

struct rgroup_member
rgroup_member(const struct rgroup *g, unsigned i)
{
	const struct raft_server *s = &g->raft.configuration.servers[i];

	assert(i < rgroup_nmembers(g));
	return (struct rgroup_member){ .id = s->id, .role = (enum rgroup_role)s->role };
}

bool
rgroup_find(const struct rgroup *g, uint64_t id, struct rgroup_member *out)
{
	for (unsigned i = 0; i < rgroup_nmembers(g); i++)
		if (g->raft.configuration.servers[i].id == id) {
			*out = rgroup_member(g, i);
			return true;
		}
	return false;
}

uint64_t
rgroup_acked(const struct rgroup *g, uint64_t id)
{
	return rio_acked((struct raft_io *)&g->io, id);
}

/* ---- requests ---- */

/* A request to start (*out): 0, or SH_ENOTLEADER when not running, -ENOMEM. */
static int
op_new(struct rgroup *g, rgroup_cb cb, void *arg, struct rgop **out)
{
	struct rgop *op;

	if (!g->started || g->closing)
		return SH_ENOTLEADER;
	op = sh_calloc(1, sizeof(*op));
	if (op == NULL)
		return -ENOMEM;
	op->g = g;
	op->cb = cb;
	op->arg = arg;
	*out = op;
	return 0;
}

/* Started (rv 0): in flight until libraft calls back; else gone. */
static int
op_started(struct rgop *op, const char *what, int rv)
{
	if (rv != 0) {
		int rc = failed(op->g, what, rv);

		sh_free(op);
		return rc;
	}
	sh_list_add_tail(&op->g->ops, &op->link);
	return 0;
}

static void
op_done(struct rgop *op, int rv, void *result)
{
	if (op->g->closing) {
		/* raft_close fails requests inside the call: their callbacks wait for finish */
		op->ended = true;
		op->status = to_errno(rv);
		op->result = result;
		return;
	}
	sh_list_del(&op->link);
	if (op->cb != NULL)
		op->cb(op->arg, to_errno(rv), result);
	sh_free(op);
}

static void
on_applied(struct raft_apply *req, int status, void *result)
{
	op_done(req->data, status, status == 0 ? result : NULL);
}

int
rgroup_propose(struct rgroup *g, struct rgroup_buf *entry, rgroup_cb cb, void *arg)
{
	struct raft_buffer buf = { .base = entry->p, .len = entry->len };
	struct rgop *op;
	int rv = op_new(g, cb, arg, &op);

	entry->p = NULL; /* taken, in every case */
	if (rv < 0) {
		rgroup_free(buf.base);
		return rv;
	}
	op->u.apply.data = op;
	rv = raft_apply(&g->raft, &op->u.apply, &buf, 1, on_applied);
	if (rv != 0)
		rgroup_free(buf.base); /* not taken */
	return op_started(op, "apply", rv);
}

static void
on_barrier(struct raft_barrier *req, int status)
{
	op_done(req->data, status, NULL);
}

int
rgroup_barrier(struct rgroup *g, rgroup_cb cb, void *arg)
{
	struct rgop *op;
	int rc = op_new(g, cb, arg, &op);

	if (rc < 0)
		return rc;
	op->u.barrier.data = op;
	return op_started(op, "barrier", raft_barrier(&g->raft, &op->u.barrier, on_barrier));
}

static void
on_transferred(struct raft_transfer *req)
{
	op_done(req->data, 0, NULL);
}

int
rgroup_transfer(struct rgroup *g, uint64_t to, rgroup_cb cb, void *arg)
{
	struct rgop *op;
	int rc = op_new(g, cb, arg, &op);

	if (rc < 0)
		return rc;
	op->u.transfer.data = op;
	return op_started(op, "transfer",
			  raft_transfer(&g->raft, &op->u.transfer, to, on_transferred));
}

static void
on_changed(struct raft_change *req, int status)
{
	op_done(req->data, status, NULL);
}

/* A membership change: kind 'a'dd, a's'sign or 'r'emove. */
static int
change(struct rgroup *g, char kind, uint64_t id, const char *addr, enum rgroup_role role,
       rgroup_cb cb, void *arg)
{
	struct rgop *op;
	char a[24];
	int rv = op_new(g, cb, arg, &op);

	if (rv < 0)
		return rv;
	op->u.change.data = op;
	if (kind == 'a')
		rv = raft_add(&g->raft, &op->u.change, id, addr ? addr : hex_addr(id, a),
			      on_changed);
	else if (kind == 's')
		rv = raft_assign(&g->raft, &op->u.change, id, (int)role, on_changed);
	else
		rv = raft_remove(&g->raft, &op->u.change, id, on_changed);
	return op_started(op, "membership change", rv);
}

int
rgroup_add(struct rgroup *g, uint64_t id, const char *addr, rgroup_cb cb, void *arg)
{
	return change(g, 'a', id, addr, RGROUP_SPARE, cb, arg);
}

int
rgroup_assign(struct rgroup *g, uint64_t id, enum rgroup_role role, rgroup_cb cb, void *arg)
{
	return change(g, 's', id, NULL, role, cb, arg);
}

int
rgroup_remove(struct rgroup *g, uint64_t id, rgroup_cb cb, void *arg)
{
	return change(g, 'r', id, NULL, RGROUP_SPARE, cb, arg);
}
