// SPDX-License-Identifier: Apache-2.0
/* raft_io on env, net and raft_log (raft_io.h). */
#include <string.h>

#include "raft_codec.h"
#include "raft_io.h"

SH_LOG_FACILITY("cluster.raftio");

#define SEND_TIMEOUT_NS (2ull * 1000 * 1000 * 1000)
#define FRAME_HDR	12 /* u32 group, u64 stamp (raft_io.h, "Leader leases") */
#define ACKS_MAX	16 /* peers whose echoes an instance keeps */

struct rpeer {
	struct sh_hnode hn;
	uint64_t id;
	uint64_t last_heard;
	char addr[RC_ADDR_MAX];
};

struct rnet {
	struct net *net;
	struct env *env;
	struct sh_htable groups; /* struct rio by group */
	struct sh_htable peers;	 /* struct rpeer by node id */
	rnet_unknown_fn unknown;
	void *unknown_arg;
};

/* A send waiting for a durable vote, or a finished request waiting for its callback. */
struct rop {
	struct sh_list link;
	struct raft_io_send *send;
	struct raft_io_snapshot_get *get;
	struct raft_snapshot *snap;
	uint64_t to;
	char addr[RC_ADDR_MAX];
	uint8_t *body;
	size_t len;
};

struct rio {
	struct sh_hnode hn;
	uint32_t group;
	raft_id id;
	struct raft_io *io;
	struct rnet *rn;
	struct env *env;
	struct rwal *own; /* the instance's own file, or NULL: a shared one */
	struct rwal *wal;
	struct rlog *log;
	char name[RLOG_NAME_MAX + 1];
	struct env_task opened;
	struct env_timer tick;
	unsigned msecs;
	raft_io_tick_cb tick_cb;
	raft_io_recv_cb recv_cb;
	struct sh_list held; /* sends behind a vote not yet durable */
	struct sh_list done; /* callbacks to run */
	struct env_task run_done;
	uint64_t hold_gen, durable_gen;
	uint64_t hb_cap; /* while answering a heartbeat: its prev_log_index */
	bool in_hb;
	/* leader leases: the newest AppendEntries stamp from echo_from (echoed back to it) */
	uint64_t echo;
	raft_id echo_from;
	/* the newest of our stamps each peer echoed, in which term */
	struct {
		raft_id id;
		uint64_t term, at;
	} acks[ACKS_MAX];
	unsigned nacks;
	uint64_t started, vote_guard; /* io_start's env_now; rio_params.vote_guard_ns */
	bool closing;
	raft_io_close_cb close_cb;
	struct rio_snap_hooks hooks;
	rlog_done_cb open_cb;
	void *open_arg;
};

static bool
group_eq(const struct sh_hnode *n, const void *key)
{
	return sh_container_of(n, struct rio, hn)->group == *(const uint32_t *)key;
}

static bool
peer_eq(const struct sh_hnode *n, const void *key)
{
	return sh_container_of(n, struct rpeer, hn)->id == *(const uint64_t *)key;
}

static struct rpeer *
peer_find(const struct rnet *rn, uint64_t id)
{
	struct sh_hnode *h = sh_htable_find(&rn->peers, sh_hash_u64(id), &id, peer_eq);
	return h ? sh_container_of(h, struct rpeer, hn) : NULL;
}

static struct rpeer *
peer_get(struct rnet *rn, uint64_t id, const char *addr)
{
	struct rpeer *p = peer_find(rn, id);

	if (p != NULL) {
		if (addr && *addr && strcmp(p->addr, addr) != 0)
			snprintf(p->addr, sizeof(p->addr), "%s", addr);
		return p;
	}
	p = sh_calloc(1, sizeof(*p));
	if (p == NULL)
		return NULL;
	p->id = id;
	snprintf(p->addr, sizeof(p->addr), "%s", addr ? addr : "");
	sh_htable_insert(&rn->peers, &p->hn, sh_hash_u64(id));
	return p;
}

struct env *
rnet_env(const struct rnet *rn)
{
	return rn->env;
}

uint64_t
rnet_last_heard(const struct rnet *rn, uint64_t node)
{
	struct rpeer *p = peer_find(rn, node);
	return p ? p->last_heard : 0;
}

/* ---- receive ---- */

/*
 * Leader leases (raft_io.h): a leader's AppendEntries stamp is kept to be
 * echoed in the answer; an answer's echo in this term is the newest time
 * that peer confirmed us. A vote that would disrupt a leader is dropped
 * while this instance is younger than its guard. false: drop msg.
 */
static bool
lease_note(struct rio *r, uint64_t from, const struct raft_message *msg, uint64_t stamp)
{
	uint64_t term = rlog_state(r->log)->term;
	unsigned i;

	switch (msg->type) {
	case RAFT_IO_APPEND_ENTRIES:
		r->echo = stamp;
		r->echo_from = from;
		return true;
	case RAFT_IO_APPEND_ENTRIES_RESULT:
		if (stamp == 0 || msg->append_entries_result.term != term)
			return true; /* (a follower of another term confirms nothing) */
		for (i = 0; i < r->nacks && r->acks[i].id != from; i++)
			;
		if (i == r->nacks) {
			if (r->nacks == ACKS_MAX)
				return true;
			r->acks[r->nacks++].id = from;
		}
		if (r->acks[i].term != term || stamp > r->acks[i].at) {
			r->acks[i].term = term;
			r->acks[i].at = stamp;
		}
		return true;
	case RAFT_IO_REQUEST_VOTE:
		return msg->request_vote.disrupt_leader || r->vote_guard == 0 ||
		       env_now(r->env) - r->started >= r->vote_guard;
	default:
		return true;
	}
}

uint64_t
rio_acked(struct raft_io *io, uint64_t id)
{
	struct rio *r = io->impl;
	uint64_t term = rlog_state(r->log)->term;

	for (unsigned i = 0; i < r->nacks; i++)
		if (r->acks[i].id == id)
			return r->acks[i].term == term ? r->acks[i].at : 0;
	return 0;
}

static void
on_raft_msg(struct net_req *req, void *arg)
{
	struct rnet *rn = arg;
	const struct net_msg *m = net_req_body(req);
	const uint8_t *b = m->buf->data + m->off;
	uint64_t from = net_req_peer(req);
	struct raft_message msg;
	char addr[RC_ADDR_MAX];
	struct sh_hnode *h;
	struct rpeer *p;
	struct rio *r;
	uint32_t group;
	uint64_t stamp;
	int rc;

	if (m->len < FRAME_HDR) {
		net_reply(req, -EINVAL, NULL, 0);
		return;
	}
	memcpy(&group, b, 4);
	memcpy(&stamp, b + 4, 8);
	rc = rc_msg_decode(b + FRAME_HDR, m->len - FRAME_HDR, &msg, addr);
	net_reply(req, rc < 0 ? rc : 0, NULL, 0); /* the body is gone after this */
	if (rc < 0) {
		sh_log_warn("raft: malformed message from node %llu dropped (%s)",
			    (unsigned long long)from, sh_strerror(rc));
		return;
	}
	p = peer_get(rn, from, addr);
	if (p != NULL)
		p->last_heard = env_now(rn->env);
	h = sh_htable_find(&rn->groups, sh_hash_u64(group), &group, group_eq);
	r = h ? sh_container_of(h, struct rio, hn) : NULL;
	if ((r == NULL || r->recv_cb == NULL) && rn->unknown != NULL) {
		rn->unknown(rn->unknown_arg, group, from);
		h = sh_htable_find(&rn->groups, sh_hash_u64(group), &group, group_eq);
		r = h ? sh_container_of(h, struct rio, hn) : NULL;
	}
	if (r == NULL || r->recv_cb == NULL || r->closing || p == NULL) {
		rc_msg_free(&msg);
		return;
	}
	msg.server_id = from; /* the session's authenticated peer, not the claim */
	msg.server_address = p->addr;
	if (!lease_note(r, from, &msg, stamp)) {
		rc_msg_free(&msg);
		return;
	}
	/*
	 * libraft 0.15 answers an empty AppendEntries (a heartbeat) with its
	 * whole log's last index instead of prev_log_index: a follower holding
	 * stale entries of an older term past that point then looks matched up
	 * to the leader's end, and the leader ignores its later rejections as
	 * stale — the follower never catches up (found by test_sim_raft). The
	 * answer is sent from inside recv, so cap it there (io_send).
	 */
	if (msg.type == RAFT_IO_APPEND_ENTRIES && msg.append_entries.n_entries == 0) {
		r->hb_cap = msg.append_entries.prev_log_index;
		r->in_hb = true;
	}
	r->recv_cb(r->io, &msg);
	r->in_hb = false;
}

int
rnet_create(struct net *net, struct rnet **out)
{
	struct rnet *rn = sh_calloc(1, sizeof(*rn));
	int rc;

	if (rn == NULL)
		return -ENOMEM;
	rn->net = net;
	rn->env = net_env(net);
	if (sh_htable_init(&rn->groups, 16) < 0 || sh_htable_init(&rn->peers, 16) < 0) {
		rc = -ENOMEM;
		goto err;
	}
	rc = net_handle(net, NET_OP_RAFT, on_raft_msg, rn);
	if (rc < 0)
		goto err;
	*out = rn;
	return 0;
err:
	sh_htable_fini(&rn->groups);
	sh_htable_fini(&rn->peers);
	sh_free(rn);
	return rc;
}

void
rnet_set_unknown(struct rnet *rn, rnet_unknown_fn fn, void *arg)
{
	rn->unknown = fn;
	rn->unknown_arg = arg;
}

void
rnet_destroy(struct rnet *rn)
{
	struct sh_hnode *h;
	size_t it;

	if (rn == NULL)
		return;
	net_unhandle(rn->net, NET_OP_RAFT); /* a message that comes later finds no one */
	while ((h = sh_htable_first(&rn->peers, &it)) != NULL) {
		sh_htable_remove(&rn->peers, h);
		sh_free(sh_container_of(h, struct rpeer, hn));
	}
	sh_htable_fini(&rn->peers);
	sh_htable_fini(&rn->groups);
	sh_free(rn);
}

/* ---- send ---- */

static void
on_sent(void *arg, int status, const struct net_msg *reply)
{
	(void)arg;
	(void)status;
	(void)reply;
}

static void
transmit(struct rio *r, struct rop *op)
{
	struct rnet *rn = r->rn;
	struct net_call_opts opts = { .timeout_ns = SEND_TIMEOUT_NS, .retries = 0 };
	struct iovec iov = { op->body, op->len };
	int rc;

	if (peer_get(rn, op->to, op->addr) == NULL)
		return;
	rc = net_peer_ensure(rn->net, op->to, op->addr);
	/*
	 * One-way over an open session (Raft tolerates a lost message; no
	 * reply to send back, no reply cache); a call while there is none,
	 * which opens it.
	 */
	if (rc == 0)
		rc = net_send(rn->net, op->to, NET_OP_RAFT, &iov, 1);
	if (rc == -ENOTCONN)
		rc = net_call(rn->net, op->to, NET_OP_RAFT, &iov, 1, &opts, on_sent, NULL, NULL);
	if (rc < 0)
		sh_log_debug("raft: send to node %llu (%s): %s", (unsigned long long)op->to,
			     op->addr, sh_strerror(rc));
}

static void
finish(struct rio *r, struct rop *op)
{
	sh_free(op->body);
	op->body = NULL;
	sh_list_add_tail(&r->done, &op->link);
	if (!r->closing)
		env_post(&r->run_done);
}

static void
on_run_done(struct env_task *t)
{
	struct rio *r = t->arg;

	while (!sh_list_empty(&r->done)) {
		struct rop *op = sh_list_entry(sh_list_pop(&r->done), struct rop, link);
		int st = r->closing ? RAFT_CANCELED : 0;

		if (op->send != NULL && op->send->cb != NULL)
			op->send->cb(op->send, st);
		if (op->get != NULL)
			op->get->cb(op->get, op->snap, op->snap ? 0 : RAFT_NOTFOUND);
		sh_free(op);
	}
}

/*
 * libraft allocates a barrier entry's 8 bytes and never writes them: what
 * the heap held there would go to disk and over the wire (a few bytes of
 * this process's memory, and a simulator run that differs with the
 * address layout). Nobody reads them; they are zeroed before they leave.
 */
static void
zero_barriers(const struct raft_entry *entries, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		if (entries[i].type == RAFT_BARRIER && entries[i].buf.base != NULL)
			memset(entries[i].buf.base, 0, entries[i].buf.len);
}

static int
io_send(struct raft_io *io, struct raft_io_send *req, const struct raft_message *m,
	raft_io_send_cb cb)
{
	struct rio *r = io->impl;
	struct sh_enc e;
	struct rop *op;
	int rc;

	if (r->closing)
		return RAFT_CANCELED;
	if (m->type == RAFT_IO_APPEND_ENTRIES)
		zero_barriers(m->append_entries.entries, m->append_entries.n_entries);
	op = sh_calloc(1, sizeof(*op));
	if (op == NULL)
		return RAFT_NOMEM;
	req->cb = cb;
	op->send = req;
	op->to = m->server_id;
	snprintf(op->addr, sizeof(op->addr), "%s", m->server_address ? m->server_address : "");
	sh_enc_init(&e);
	sh_enc_u32(&e, r->group);
	/* the stamp: ours on an AppendEntries, the leader's echoed on its answer */
	sh_enc_u64(&e, m->type == RAFT_IO_APPEND_ENTRIES ? env_now(r->env)
		       : m->type == RAFT_IO_APPEND_ENTRIES_RESULT && r->echo_from == m->server_id
			   ? r->echo
			   : 0);
	if (r->in_hb && m->type == RAFT_IO_APPEND_ENTRIES_RESULT &&
	    m->append_entries_result.rejected == 0 &&
	    m->append_entries_result.last_log_index > r->hb_cap) {
		struct raft_message capped = *m;

		capped.append_entries_result.last_log_index = r->hb_cap;
		rc = rc_msg_encode(&e, &capped, r->id, "");
	} else {
		rc = rc_msg_encode(&e, m, r->id, "");
	}
	if (rc < 0) {
		sh_enc_fini(&e);
		sh_free(op);
		return rc == -ENOMEM ? RAFT_NOMEM : RAFT_INVALID;
	}
	op->body = sh_enc_take(&e, &op->len);
	if (r->hold_gen != r->durable_gen) {
		sh_list_add_tail(&r->held, &op->link);
		return 0;
	}
	transmit(r, op);
	finish(r, op);
	return 0;
}

static void
on_meta_durable(void *arg, int status)
{
	struct rio *r = arg;

	if (status < 0)
		return; /* the log failed: held messages stay held (never sent) */
	r->durable_gen++;
	if (r->durable_gen != r->hold_gen)
		return;
	while (!sh_list_empty(&r->held)) {
		struct rop *op = sh_list_entry(sh_list_pop(&r->held), struct rop, link);

		if (!r->closing)
			transmit(r, op);
		finish(r, op);
	}
}

static int
set_meta(struct rio *r, uint64_t term, uint64_t vote)
{
	int rc = rlog_set_meta(r->log, term, vote);

	if (rc == 0)
		rc = rlog_barrier(r->log, on_meta_durable, r);
	if (rc < 0)
		return RAFT_IOERR;
	r->hold_gen++;
	return 0;
}

static int
io_set_term(struct raft_io *io, raft_term term)
{
	return set_meta(io->impl, term, 0);
}

static int
io_set_vote(struct raft_io *io, raft_id id)
{
	struct rio *r = io->impl;
	return set_meta(r, rlog_state(r->log)->term, id);
}

/* ---- log ---- */

static void
on_appended(void *arg, int status)
{
	struct raft_io_append *req = arg;

	/*
	 * Closing: libraft 0.15 looks up its leader state on a failed append
	 * even when it is no longer leader (a NULL dereference once closed),
	 * while a success is simply released. The instance is going away and
	 * nothing is acknowledged by it any more, so report success.
	 */
	if (status == -ECANCELED)
		status = 0;
	req->cb(req, status == 0 ? 0 : RAFT_IOERR);
}

static int
io_append(struct raft_io *io, struct raft_io_append *req, const struct raft_entry entries[],
	  unsigned n, raft_io_append_cb cb)
{
	struct rio *r = io->impl;

	zero_barriers(entries, n);
	req->cb = cb;
	return rlog_append(r->log, entries, n, on_appended, req) < 0 ? RAFT_IOERR : 0;
}

static int
io_truncate(struct raft_io *io, raft_index index)
{
	struct rio *r = io->impl;
	return rlog_truncate(r->log, index) < 0 ? RAFT_IOERR : 0;
}

static void
on_snap_put(void *arg, int status)
{
	struct raft_io_snapshot_put *req = arg;
	req->cb(req, status == 0 ? 0 : (status == -ECANCELED ? RAFT_CANCELED : RAFT_IOERR));
}

static int
io_snapshot_put(struct raft_io *io, unsigned trailing, struct raft_io_snapshot_put *req,
		const struct raft_snapshot *s, raft_io_snapshot_put_cb cb)
{
	struct rio *r = io->impl;
	struct raft_buffer keep = { 0 };
	struct raft_snapshot marker;
	int rc;

	req->cb = cb;
	if (r->hooks.persist != NULL) {
		rc = r->hooks.persist(r->hooks.arg, s, &keep);
		if (rc < 0) {
			sh_log_error("group %#x: snapshot %llu not stored: %s", r->group,
				     (unsigned long long)s->index, sh_strerror(rc));
			return RAFT_IOERR;
		}
		if (keep.base != NULL) {
			marker = *s;
			marker.bufs = &keep;
			marker.n_bufs = 1;
			s = &marker;
		}
	}
	rc = rlog_snapshot(r->log, s, trailing, on_snap_put, req);
	raft_free(keep.base);
	return rc < 0 ? RAFT_IOERR : 0;
}

/* A raft_snapshot (raft_malloc'd, as raft frees it) from the stored one. */
static struct raft_snapshot *
snap_build(const struct rlog_snap *s)
{
	struct raft_snapshot *rs = raft_calloc(1, sizeof(*rs));
	struct sh_dec d;

	if (rs == NULL)
		return NULL;
	raft_configuration_init(&rs->configuration);
	sh_dec_init(&d, s->conf, s->conf_len);
	if (rc_conf_decode(&d, &rs->configuration) < 0)
		goto err;
	rs->index = s->index;
	rs->term = s->term;
	rs->configuration_index = s->conf_index;
	rs->bufs = raft_malloc(sizeof(*rs->bufs));
	if (rs->bufs == NULL)
		goto err_conf;
	rs->bufs[0].base = raft_malloc(s->len ? s->len : 1);
	if (rs->bufs[0].base == NULL)
		goto err_bufs;
	memcpy(rs->bufs[0].base, s->data, s->len);
	rs->bufs[0].len = s->len;
	rs->n_bufs = 1;
	return rs;
err_bufs:
	raft_free(rs->bufs);
err_conf:
	raft_configuration_close(&rs->configuration);
err:
	raft_free(rs);
	return NULL;
}

static int
io_snapshot_get(struct raft_io *io, struct raft_io_snapshot_get *req, raft_io_snapshot_get_cb cb)
{
	struct rio *r = io->impl;
	const struct rlog_state *st = rlog_state(r->log);
	struct rop *op = sh_calloc(1, sizeof(*op));

	if (op == NULL)
		return RAFT_NOMEM;
	req->cb = cb;
	op->get = req;
	op->snap = st->snap ? snap_build(st->snap) : NULL;
	if (st->snap && op->snap == NULL) {
		sh_free(op);
		return RAFT_NOMEM;
	}
	if (op->snap != NULL && r->hooks.expand != NULL) {
		struct raft_buffer full = { 0 };
		int rc = r->hooks.expand(r->hooks.arg, &op->snap->bufs[0], &full);

		if (rc < 0) {
			sh_log_error("group %#x: snapshot %llu not readable: %s", r->group,
				     (unsigned long long)op->snap->index, sh_strerror(rc));
			raft_free(op->snap->bufs[0].base);
			raft_free(op->snap->bufs);
			raft_configuration_close(&op->snap->configuration);
			raft_free(op->snap);
			sh_free(op);
			return RAFT_IOERR;
		}
		raft_free(op->snap->bufs[0].base);
		op->snap->bufs[0] = full;
	}
	finish(r, op);
	return 0;
}

static int
io_load(struct raft_io *io, raft_term *term, raft_id *vote, struct raft_snapshot **snapshot,
	raft_index *start_index, struct raft_entry *entries[], size_t *n_entries)
{
	struct rio *r = io->impl;
	const struct rlog_state *st = rlog_state(r->log);
	size_t total = 0;
	uint8_t *batch;

	*term = st->term;
	*vote = st->vote;
	*snapshot = NULL;
	*entries = NULL;
	*n_entries = 0;
	*start_index = st->n ? st->start : (st->snap ? st->snap->index + 1 : 1);
	if (st->snap) {
		*snapshot = snap_build(st->snap);
		if (*snapshot == NULL)
			return RAFT_NOMEM;
	}
	if (st->n == 0)
		return 0;
	for (size_t i = 0; i < st->n; i++)
		total += st->entries[i].len;
	*entries = raft_calloc(st->n, sizeof(**entries));
	batch = raft_malloc(total ? total : 1);
	if (*entries == NULL || batch == NULL) {
		raft_free(*entries);
		raft_free(batch);
		*entries = NULL;
		return RAFT_NOMEM; /* raft frees *snapshot on error? no: we do */
	}
	for (size_t i = 0, off = 0; i < st->n; i++) {
		struct raft_entry *e = &(*entries)[i];

		memcpy(batch + off, st->entries[i].data, st->entries[i].len);
		e->term = st->entries[i].term;
		e->type = st->entries[i].type;
		e->buf.base = batch + off;
		e->buf.len = st->entries[i].len;
		e->batch = batch;
		off += st->entries[i].len;
	}
	*n_entries = st->n;
	return 0;
}

static int
append_conf(struct rio *r, uint64_t term, const struct raft_configuration *conf)
{
	struct raft_entry e = { .term = term, .type = RAFT_CHANGE };
	int rc;

	if (raft_configuration_encode(conf, &e.buf) != 0)
		return RAFT_NOMEM;
	rc = rlog_append(r->log, &e, 1, NULL, NULL);
	raft_free(e.buf.base);
	return rc < 0 ? RAFT_IOERR : 0;
}

static int
io_bootstrap(struct raft_io *io, const struct raft_configuration *conf)
{
	struct rio *r = io->impl;
	const struct rlog_state *st = rlog_state(r->log);

	if (st->term != 0 || st->n != 0 || st->snap != NULL)
		return RAFT_CANTBOOTSTRAP;
	if (rlog_set_meta(r->log, 1, 0) < 0)
		return RAFT_IOERR;
	return append_conf(r, 1, conf);
}

static int
io_recover(struct raft_io *io, const struct raft_configuration *conf)
{
	struct rio *r = io->impl;
	return append_conf(r, rlog_state(r->log)->term, conf);
}

/* ---- lifecycle, clock ---- */

static int
io_init(struct raft_io *io, raft_id id, const char *address)
{
	struct rio *r = io->impl;

	(void)address;
	r->id = id;
	return 0;
}

static void
on_tick(struct env_timer *t)
{
	struct rio *r = t->arg;

	env_timer_arm_period(&r->tick, (uint64_t)r->msecs * 1000000);
	r->tick_cb(r->io);
}

static int
io_start(struct raft_io *io, unsigned msecs, raft_io_tick_cb tick, raft_io_recv_cb recv)
{
	struct rio *r = io->impl;

	r->msecs = msecs ? msecs : 100;
	r->tick_cb = tick;
	r->recv_cb = recv;
	r->started = env_now(r->env);
	/*
	 * On the env's grid (env_timer_arm_period): the instances of a node
	 * with one period tick in one wake-up, and their messages to a peer
	 * leave in one batch; nodes do not tick in step (a phase each).
	 */
	return env_timer_arm_period(&r->tick, (uint64_t)r->msecs * 1000000) < 0 ? RAFT_NOMEM : 0;
}

static void
on_closed(struct env_task *t)
{
	struct rio *r = t->arg;

	while (!sh_list_empty(&r->held))
		finish(r, sh_list_entry(sh_list_pop(&r->held), struct rop, link));
	on_run_done(&r->run_done);
	rlog_close(r->log); /* pending appends and snapshot puts: RAFT_CANCELED */
	r->log = NULL;
	rwal_close(r->own);
	r->own = NULL;
	if (r->close_cb)
		r->close_cb(r->io);
}

static void
io_close(struct raft_io *io, raft_io_close_cb cb)
{
	struct rio *r = io->impl;

	r->closing = true;
	r->close_cb = cb;
	env_timer_cancel(&r->tick);
	sh_htable_remove(&r->rn->groups, &r->hn);
	/* run_done may be queued: cancel before re-initializing it */
	env_task_cancel(&r->run_done);
	env_task_init(r->env, &r->run_done, on_closed, r);
	env_post(&r->run_done);
}

static raft_time
io_time(struct raft_io *io)
{
	struct rio *r = io->impl;
	return env_now(r->env) / 1000000;
}

static int
io_random(struct raft_io *io, int min, int max)
{
	struct rio *r = io->impl;

	if (max <= min)
		return min;
	return min + (int)(env_random_u64(r->env) % (uint64_t)(max - min));
}

static void
on_log_open(void *arg, int status)
{
	struct rio *r = arg;

	if (status == 0)
		status = rlog_open(r->wal, r->name, &r->log);
	r->open_cb(r->open_arg, status);
}

static void
on_opened(struct env_task *t)
{
	on_log_open(t->arg, 0);
}

int
rio_open(struct rnet *rn, struct raft_io *io, const struct rio_params *p, rlog_done_cb cb,
	 void *arg)
{
	struct rio *r;
	struct env *env = net_env(rn->net);
	int rc;

	if (sh_htable_find(&rn->groups, sh_hash_u64(p->group), &p->group, group_eq) != NULL)
		return -EEXIST;
	r = sh_calloc(1, sizeof(*r));
	if (r == NULL)
		return -ENOMEM;
	r->group = p->group;
	r->id = p->id;
	r->vote_guard = p->vote_guard_ns;
	r->io = io;
	r->rn = rn;
	r->env = env;
	r->open_cb = cb;
	r->open_arg = arg;
	if (p->hooks != NULL)
		r->hooks = *p->hooks;
	sh_list_init(&r->held);
	sh_list_init(&r->done);
	env_timer_init(env, &r->tick, on_tick, r);
	env_task_init(env, &r->run_done, on_run_done, r);
	env_task_init(env, &r->opened, on_opened, r);
	snprintf(r->name, sizeof(r->name), "%s", p->wal ? p->name : "raft");
	if (p->wal != NULL) {
		/* a shared file, loaded already: the instance opens at once, reported later */
		r->wal = p->wal;
		env_post(&r->opened);
	} else {
		rc = rwal_open(env, p->path, p->log_size, on_log_open, r, &r->own);
		if (rc < 0) {
			sh_free(r);
			return rc;
		}
		r->wal = r->own;
	}
	memset(io, 0, sizeof(*io));
	io->version = 1;
	io->impl = r;
	io->init = io_init;
	io->close = io_close;
	io->load = io_load;
	io->start = io_start;
	io->bootstrap = io_bootstrap;
	io->recover = io_recover;
	io->set_term = io_set_term;
	io->set_vote = io_set_vote;
	io->send = io_send;
	io->append = io_append;
	io->truncate = io_truncate;
	io->snapshot_put = io_snapshot_put;
	io->snapshot_get = io_snapshot_get;
	io->time = io_time;
	io->random = io_random;
	sh_htable_insert(&rn->groups, &r->hn, sh_hash_u64(p->group));
	return 0;
}

void
rio_destroy(struct raft_io *io)
{
	struct rio *r = io ? io->impl : NULL;

	if (r == NULL)
		return;
	if (!r->closing) {
		/* never started: close synchronously */
		r->closing = true;
		env_timer_cancel(&r->tick);
		sh_htable_remove(&r->rn->groups, &r->hn);
	}
	env_task_cancel(&r->run_done);
	env_task_cancel(&r->opened);
	while (!sh_list_empty(&r->held)) {
		struct rop *op = sh_list_entry(sh_list_pop(&r->held), struct rop, link);
		sh_free(op->body);
		sh_free(op);
	}
	while (!sh_list_empty(&r->done))
		sh_free(sh_list_entry(sh_list_pop(&r->done), struct rop, link));
	rlog_close(r->log);
	rwal_close(r->own);
	sh_free(r);
	io->impl = NULL;
}

bool
rio_has_state(struct raft_io *io)
{
	struct rio *r = io->impl;
	const struct rlog_state *st = r->log ? rlog_state(r->log) : NULL;

	return st != NULL && (st->term != 0 || st->n != 0 || st->snap != NULL);
}
