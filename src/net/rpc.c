// SPDX-License-Identifier: Apache-2.0
/*
 * RPC over sessions: calls with ids, deadlines, retries over a broken
 * session, cancellation; handlers registered per opcode; and the reply
 * cache that makes retries safe (a handler sees each request once). A
 * cached reply is dropped as soon as the session acks all of it (the
 * caller has it and will never resend that call), or after reply_ttl_ns
 * if the session broke first.
 *
 * Call states:
 *
 *   WAITING (no session) --session up--> SENT --reply--> done (cb)
 *      ^                                  |
 *      +---- session down, retries left --+--- no retries: -ETIMEDOUT
 *   any --deadline--> -ETIMEDOUT; --peer restarted after SENT--> SH_EPEERRESTART
 *   any --cancel--> -ECANCELED
 *
 * Message layout (little-endian), before the body:
 *   u8 kind (1 request, 2 reply, 3 one-way), u8 flags (0), u16 opcode,
 *   i32 status, u64 call id (0 one-way), u32 timeout in ms (requests),
 *   u32 reserved (0)
 */
#include <errno.h>
#include <string.h>

#include "net_int.h"

SH_LOG_FACILITY("net.rpc");

#define REPLY_CACHE_MAX (1u << 18)

static const char *const op_names[] = {
#define OP_NAME(id, num, name, from) [num] = name,
	NET_RPC_OPS(OP_NAME)
#undef OP_NAME
};

/* Who may send each opcode (rpc_ops.h): NET_FROM_*. */
enum { FROM_ANY = 0, FROM_NODE, FROM_KEY, FROM_WRITE };
static const uint8_t op_from[] = {
#define OP_FROM(id, num, name, from) [num] = FROM_##from,
	NET_RPC_OPS(OP_FROM)
#undef OP_FROM
};

bool
net_op_allowed(unsigned op, uint64_t peer_id)
{
	return !(op < SH_ARRAY_SIZE(op_from) && op_from[op] == FROM_NODE &&
		 net_id_is_client(peer_id));
}

int
net_op_check(unsigned op, uint64_t peer_id, const struct net_cred *cred)
{
	unsigned from = op < SH_ARRAY_SIZE(op_from) ? op_from[op] : FROM_ANY;

	if (!net_op_allowed(op, peer_id))
		return -EPERM;
	if (from == FROM_KEY && cred->access == NET_ACCESS_NONE)
		return -EACCES;
	if (from == FROM_WRITE && cred->access != NET_ACCESS_WRITE)
		return cred->access == NET_ACCESS_NONE ? -EACCES : -EROFS;
	return 0;
}

const char *
net_op_name(unsigned op)
{
	if (op < SH_ARRAY_SIZE(op_names) && op_names[op] != NULL)
		return op_names[op];
	return "?";
}

static void
rpc_hdr_put(uint8_t *b, uint8_t kind, uint16_t op, int32_t status, uint64_t id, uint32_t tmo_ms)
{
	memset(b, 0, RPC_HDR_SIZE);
	b[0] = kind;
	memcpy(b + 2, &op, 2);
	memcpy(b + 4, &status, 4);
	memcpy(b + 8, &id, 8);
	memcpy(b + 16, &tmo_ms, 4);
}

/*
 * A message into out (initialized): the header then the body, copied from
 * iovecs into one buffer, or, with zc, the header then zc's slices shared.
 */
static int
build_msg(struct sh_iov *out, uint8_t kind, uint16_t op, int32_t status, uint64_t id,
	  uint32_t tmo_ms, const struct iovec *body, int iovcnt, const struct sh_iov *zc)
{
	size_t len = RPC_HDR_SIZE;
	struct sh_buf *b;
	int rc;

	for (int i = 0; i < iovcnt; i++)
		len += body[i].iov_len;
	b = sh_buf_create(len, 0);
	if (b == NULL)
		return -ENOMEM;
	rpc_hdr_put(b->data, kind, op, status, id, tmo_ms);
	len = RPC_HDR_SIZE;
	for (int i = 0; i < iovcnt; i++) {
		memcpy(b->data + len, body[i].iov_base, body[i].iov_len);
		len += body[i].iov_len;
	}
	rc = sh_iov_append(out, b, 0, len);
	if (rc == 0 && zc != NULL)
		rc = sh_iov_append_range(out, zc, 0, zc->len);
	sh_buf_put(b);
	if (rc < 0)
		sh_iov_fini(out);
	return rc;
}

/* ---- calls ---- */

static bool
call_eq(const struct sh_hnode *h, const void *key)
{
	return sh_container_of(h, struct net_call, hn)->id == *(const uint64_t *)key;
}

static void
call_finish(struct net_call *c, int status, const struct net_msg *reply)
{
	struct net *n = c->net;

	env_timer_cancel(&c->timer);
	env_task_cancel(&c->done_task);
	sh_htable_remove(&n->calls, &c->hn);
	sh_list_del(&c->plink);
	if (status >= 0)
		n->st.calls_ok++;
	else
		n->st.calls_failed++;
	c->cb(c->arg, status, reply);
	sh_iov_fini(&c->req);
	sh_free(c);
}

static void
call_timeout(struct env_timer *t)
{
	call_finish(t->arg, -ETIMEDOUT, NULL);
}

static void
call_done_task(struct env_task *t)
{
	struct net_call *c = t->arg;

	call_finish(c, c->status, NULL);
}

static void
call_send(struct net_call *c)
{
	struct net_peer *p = c->peer;

	if (net_sess_queue(p, &c->req, NULL) < 0)
		return; /* stays WAITING: the deadline ends it if memory never comes back */
	c->sess = p->sess;
}

/* A message of opcode with body (and extra bytes more) to peer_id: its peer, or -errno. */
static int
msg_peer(struct net *n, uint64_t peer_id, uint16_t opcode, const struct iovec *body, int iovcnt,
	 size_t extra, struct net_peer **out)
{
	size_t len = RPC_HDR_SIZE + extra;

	if (opcode == 0 || opcode >= NET_OP_MAX || iovcnt < 0 || (iovcnt > 0 && body == NULL))
		return -EINVAL;
	for (int i = 0; i < iovcnt; i++)
		len += body[i].iov_len;
	if (len > n->cfg.max_msg)
		return -EMSGSIZE;
	*out = net_peer_get(n, peer_id);
	return *out != NULL ? 0 : -ENOENT;
}

static int
call_start(struct net *n, uint64_t peer_id, uint16_t opcode, const struct iovec *body, int iovcnt,
	   const struct sh_iov *zc, const struct net_call_opts *opts, net_call_cb cb, void *arg,
	   struct net_call **out)
{
	struct net_peer *p;
	struct net_call *c;
	uint64_t tmo = opts && opts->timeout_ns ? opts->timeout_ns : 10 * SH_NSEC_PER_SEC;
	int rc;

	if (cb == NULL || (zc != NULL && zc->n > NET_ZC_MAX_SLICES))
		return -EINVAL;
	rc = msg_peer(n, peer_id, opcode, body, iovcnt, zc ? zc->len : 0, &p);
	if (rc < 0)
		return rc;
	c = sh_calloc(1, sizeof(*c));
	if (c == NULL)
		return -ENOMEM;
	c->net = n;
	c->peer = p;
	c->id = ++n->next_call_id;
	c->opcode = opcode;
	c->retries = opts ? opts->retries : 3;
	c->cb = cb;
	c->arg = arg;
	sh_iov_init(&c->req);
	rc = build_msg(&c->req, RPC_REQ, opcode, 0, c->id,
		       (uint32_t)SH_MIN(tmo / SH_NSEC_PER_MSEC, UINT32_MAX), body, iovcnt, zc);
	if (rc < 0) {
		sh_free(c);
		return rc;
	}
	env_timer_init(n->env, &c->timer, call_timeout, c);
	env_task_init(n->env, &c->done_task, call_done_task, c);
	if (env_timer_arm(&c->timer, tmo) < 0) {
		sh_iov_fini(&c->req);
		sh_free(c);
		return -ENOMEM;
	}
	sh_htable_insert(&n->calls, &c->hn, sh_hash_u64(c->id));
	sh_list_add_tail(&p->calls, &c->plink);
	n->st.calls++;
	if (p->state == SESS_ESTABLISHED)
		call_send(c);
	else
		net_mark_dirty(p); /* the flush opens the session */
	if (out != NULL)
		*out = c;
	return 0;
}

int
net_call(struct net *n, uint64_t peer_id, uint16_t opcode, const struct iovec *body, int iovcnt,
	 const struct net_call_opts *opts, net_call_cb cb, void *arg, struct net_call **out)
{
	return call_start(n, peer_id, opcode, body, iovcnt, NULL, opts, cb, arg, out);
}

int
net_call_zc(struct net *n, uint64_t peer_id, uint16_t opcode, const struct sh_iov *body,
	    const struct net_call_opts *opts, net_call_cb cb, void *arg, struct net_call **out)
{
	if (body == NULL)
		return -EINVAL;
	return call_start(n, peer_id, opcode, NULL, 0, body, opts, cb, arg, out);
}

int
net_send(struct net *n, uint64_t peer_id, uint16_t opcode, const struct iovec *body, int iovcnt)
{
	struct net_peer *p;
	struct sh_iov msg;
	int rc = msg_peer(n, peer_id, opcode, body, iovcnt, 0, &p);

	if (rc < 0)
		return rc;
	if (p->state != SESS_ESTABLISHED)
		return -ENOTCONN;
	sh_iov_init(&msg);
	rc = build_msg(&msg, RPC_MSG, opcode, 0, 0, 0, body, iovcnt, NULL);
	if (rc < 0)
		return rc;
	rc = net_sess_queue(p, &msg, NULL);
	sh_iov_fini(&msg);
	if (rc == 0)
		n->st.oneway_sent++;
	return rc;
}

void
net_call_cancel(struct net_call *c)
{
	c->status = -ECANCELED;
	env_timer_cancel(&c->timer);
	env_post(&c->done_task);
}

void
net_rpc_sess_down(struct net_peer *p, bool restart)
{
	struct net *n = p->net;
	struct sh_list *pos, *tmp;

	sh_list_for_each_safe (pos, tmp, &p->calls) {
		struct net_call *c = sh_list_entry(pos, struct net_call, plink);

		if (c->sess == 0 || sh_heap_node_queued(&c->done_task.ev.hn) ||
		    !sh_list_empty(&c->done_task.ev.link))
			continue; /* never sent, or already finishing */
		if (restart) {
			c->status = SH_EPEERRESTART; /* it may or may not have run there */
		} else if (c->retries > 0) {
			c->retries--;
			c->sess = 0; /* resent when a session is up; the reply cache dedups */
			n->st.call_retries++;
			continue;
		} else {
			c->status = -ETIMEDOUT;
		}
		c->sess = 0;
		env_post(&c->done_task);
	}
	if (!sh_list_empty(&p->calls))
		net_mark_dirty(p);
}

void
net_rpc_sess_up(struct net_peer *p)
{
	struct sh_list *pos;

	sh_list_for_each (pos, &p->calls) {
		struct net_call *c = sh_list_entry(pos, struct net_call, plink);

		if (c->sess == 0 && !env_timer_armed(&c->timer))
			continue; /* finishing */
		if (c->sess == 0)
			call_send(c);
	}
}

/* ---- handlers and the reply cache ---- */

struct reply_key {
	uint64_t peer_id, peer_inc, id;
};

static bool
reply_eq(const struct sh_hnode *h, const void *key)
{
	const struct net_reply *r = sh_container_of(h, struct net_reply, hn);
	const struct reply_key *k = key;

	return r->peer_id == k->peer_id && r->peer_inc == k->peer_inc && r->id == k->id;
}

static uint64_t
reply_hash(const struct reply_key *k)
{
	return sh_hash_u64(k->peer_id ^ sh_hash_u64(k->peer_inc ^ sh_hash_u64(k->id)));
}

static void
reply_free(struct net *n, struct net_reply *r)
{
	sh_htable_remove(&n->replies, &r->hn);
	sh_list_del(&r->fifo);
	sh_iov_fini(&r->reply);
	sh_free(r);
	n->nreplies--;
}

int
net_handle(struct net *n, uint16_t opcode, net_handler_fn fn, void *arg)
{
	if (opcode == 0 || opcode >= NET_OP_MAX || fn == NULL)
		return -EINVAL;
	if (n->handlers[opcode].fn != NULL)
		return -EEXIST;
	n->handlers[opcode].fn = fn;
	n->handlers[opcode].arg = arg;
	return 0;
}

void
net_unhandle(struct net *n, uint16_t opcode)
{
	if (opcode != 0 && opcode < NET_OP_MAX)
		n->handlers[opcode] = (struct net_handler){ NULL, NULL };
}

const struct net_msg *
net_req_body(const struct net_req *r)
{
	return &r->body;
}

uint64_t
net_req_peer(const struct net_req *r)
{
	return r->peer->id;
}

const struct net_cred *
net_req_cred(const struct net_req *r)
{
	return &r->cred;
}

uint16_t
net_req_opcode(const struct net_req *r)
{
	return r->opcode;
}

const uint64_t net_lat_bound_ns[NET_LAT_BUCKETS - 1] = {
	25000,	  50000,    100000,   250000,	 500000,    1000000,	2500000,       5000000,
	10000000, 25000000, 50000000, 100000000, 250000000, 1000000000, 5000000000ull,
};

/* Count a served request: its opcode's totals and latency bucket. */
static void
op_account(struct net *n, const struct net_req *r, int status, const struct iovec *body, int iovcnt)
{
	struct net_op_stats *o;
	uint64_t t;
	unsigned b = 0;

	if (r->opcode >= NET_OPS_TRACKED)
		return;
	o = &n->ops[r->opcode];
	t = env_now(n->env) - r->start_ns;
	while (b < NET_LAT_BUCKETS - 1 && t > net_lat_bound_ns[b])
		b++;
	o->requests++;
	o->errors += status < 0;
	o->bytes_in += r->body.len;
	for (int i = 0; i < iovcnt; i++)
		o->bytes_out += body[i].iov_len;
	o->lat_sum_ns += t;
	o->lat[b]++;
}

void
net_reply(struct net_req *r, int status, const struct iovec *body, int iovcnt)
{
	struct net *n = r->net;
	struct net_reply *e = r->cache;
	struct net_peer *p = r->peer;

	op_account(n, r, status, body, iovcnt);
	p->nreqs--;
	if (e == NULL)
		goto out; /* one-way: nobody waits for an answer */
	if (build_msg(&e->reply, RPC_RESP, r->opcode, status, r->id, 0, body, iovcnt, NULL) < 0) {
		/* no memory for the reply: forget the request, the caller's retry runs it again */
		sh_htable_remove(&n->replies, &e->hn);
		sh_free(e);
		n->nreplies--;
		goto out;
	}
	e->done = true;
	e->done_ns = env_now(n->env);
	sh_list_add_tail(&n->reply_fifo, &e->fifo);
	if (p->state == SESS_ESTABLISHED && p->inc == r->peer_inc) {
		uint64_t key[3] = { e->peer_id, e->peer_inc, e->id };

		net_sess_queue(p, &e->reply, key);
	}
out:
	sh_buf_put(r->body.buf);
	sh_free(r);
}

/*
 * A client sent what only a backend may, or what its key does not allow
 * (rpc_ops.h, rc from net_op_check): counted, logged now and then.
 */
static void
refused(struct net_peer *p, uint16_t op, int rc)
{
	struct net *n = p->net;
	uint64_t *count = rc == -EPERM ? &n->st.refused : &n->st.denied;

	if ((*count)++ % 1000 == 0)
		sh_log_warn("peer %llx, a client, sent %s, which %s: refused (%llu so far)",
			    (unsigned long long)p->id, net_op_name(op),
			    rc == -EPERM	  ? "only a backend may"
			    : p->cred.key_id == 0 ? "needs a key, and it has none"
			    : rc == -EROFS	  ? "writes, and its key is read-only"
						  : "its key does not allow (revoked?)",
			    (unsigned long long)*count);
}

static void
on_request(struct net_peer *p, struct sh_buf *buf, size_t off, uint32_t len, uint16_t op,
	   uint64_t id)
{
	struct net *n = p->net;
	struct reply_key k = { p->id, p->inc, id };
	struct sh_hnode *h = sh_htable_find(&n->replies, reply_hash(&k), &k, reply_eq);
	struct net_reply *e;
	struct net_req *r;
	int rc;

	n->st.requests++;
	if (h != NULL) {
		e = sh_container_of(h, struct net_reply, hn);
		n->st.duplicate_requests++;
		if (e->done) {
			uint64_t key[3] = { e->peer_id, e->peer_inc, e->id };

			n->st.replies_from_cache++;
			net_sess_queue(p, &e->reply, key);
		}
		return; /* still running: its reply goes out when it is done */
	}
	e = sh_calloc(1, sizeof(*e));
	r = sh_calloc(1, sizeof(*r));
	if (e == NULL || r == NULL) {
		sh_free(e);
		sh_free(r);
		return; /* the caller retries or times out */
	}
	e->peer_id = p->id;
	e->peer_inc = p->inc;
	e->id = id;
	sh_list_init(&e->fifo);
	sh_iov_init(&e->reply);
	sh_htable_insert(&n->replies, &e->hn, reply_hash(&k));
	n->nreplies++;
	r->net = n;
	r->peer = p;
	p->nreqs++;
	r->peer_inc = p->inc;
	r->id = id;
	r->opcode = op;
	r->cache = e;
	r->start_ns = env_now(n->env);
	r->body = (struct net_msg){ .buf = sh_buf_get(buf),
				    .off = off + RPC_HDR_SIZE,
				    .len = len - RPC_HDR_SIZE };
	r->cred = net_peer_cred(p);
	if ((rc = net_op_check(op, p->id, &r->cred)) < 0) {
		refused(p, op, rc);
		net_reply(r, rc, NULL, 0);
		return;
	}
	if (n->handlers[op].fn == NULL) {
		sh_log_debug("no handler for opcode %u (%s)", op, net_op_name(op));
		net_reply(r, -EOPNOTSUPP, NULL, 0);
		return;
	}
	n->handlers[op].fn(r, n->handlers[op].arg);
}

/* A one-way message: to its handler as a request that is never answered. */
static void
on_oneway(struct net_peer *p, struct sh_buf *buf, size_t off, uint32_t len, uint16_t op)
{
	struct net *n = p->net;
	struct net_cred cred = net_peer_cred(p);
	struct net_req *r;
	int rc;

	n->st.oneway_received++;
	if ((rc = net_op_check(op, p->id, &cred)) < 0) {
		refused(p, op, rc);
		return;
	}
	if (n->handlers[op].fn == NULL) {
		sh_log_debug("no handler for one-way opcode %u (%s)", op, net_op_name(op));
		return;
	}
	r = sh_calloc(1, sizeof(*r));
	if (r == NULL)
		return; /* lost, as the sender was told it may be */
	r->net = n;
	r->peer = p;
	p->nreqs++;
	r->peer_inc = p->inc;
	r->opcode = op;
	r->cred = cred;
	r->start_ns = env_now(n->env);
	r->body = (struct net_msg){ .buf = sh_buf_get(buf),
				    .off = off + RPC_HDR_SIZE,
				    .len = len - RPC_HDR_SIZE };
	n->handlers[op].fn(r, n->handlers[op].arg);
}

void
net_rpc_deliver(struct net_peer *p, struct sh_buf *buf, size_t off, uint32_t len)
{
	struct net *n = p->net;
	const uint8_t *b = buf->data + off;
	uint16_t op;
	int32_t status;
	uint64_t id;

	if (len < RPC_HDR_SIZE || b[1] != 0 || b[0] < RPC_REQ || b[0] > RPC_MSG) {
		n->st.bad_format++;
		return;
	}
	memcpy(&op, b + 2, 2);
	memcpy(&status, b + 4, 4);
	memcpy(&id, b + 8, 8);
	if (op >= NET_OP_MAX || op == 0) {
		n->st.bad_format++;
		return;
	}
	if (b[0] == RPC_REQ) {
		on_request(p, buf, off, len, op, id);
	} else if (b[0] == RPC_MSG) {
		on_oneway(p, buf, off, len, op);
	} else {
		struct sh_hnode *h = sh_htable_find(&n->calls, sh_hash_u64(id), &id, call_eq);
		struct net_call *c = h ? sh_container_of(h, struct net_call, hn) : NULL;
		struct net_msg reply = { .buf = buf,
					 .off = off + RPC_HDR_SIZE,
					 .len = len - RPC_HDR_SIZE };

		if (c == NULL || c->peer != p || c->opcode != op)
			return; /* late (timed out or cancelled) or a duplicate */
		call_finish(c, status, &reply);
	}
}

void
net_rpc_reply_acked(struct net *n, const uint64_t key[3])
{
	struct reply_key k = { key[0], key[1], key[2] };
	struct sh_hnode *h = sh_htable_find(&n->replies, reply_hash(&k), &k, reply_eq);

	/* the caller has the whole reply: it will never ask again */
	if (h != NULL && sh_container_of(h, struct net_reply, hn)->done)
		reply_free(n, sh_container_of(h, struct net_reply, hn));
}

void
net_rpc_tick(struct net *n, uint64_t now)
{
	struct sh_list *pos;

	while ((pos = n->reply_fifo.next) != &n->reply_fifo) {
		struct net_reply *r = sh_list_entry(pos, struct net_reply, fifo);

		if (now - r->done_ns < n->cfg.reply_ttl_ns && n->nreplies <= REPLY_CACHE_MAX)
			break;
		reply_free(n, r);
	}
}

/* ---- built-in handlers ---- */

static void
h_ping(struct net_req *r, void *arg)
{
	(void)arg;
	net_reply(r, 0, NULL, 0);
}

static void
h_echo(struct net_req *r, void *arg)
{
	const struct net_msg *m = net_req_body(r);
	struct iovec iov = { m->buf->data + m->off, m->len };

	(void)arg;
	net_reply(r, 0, &iov, 1);
}

int
net_rpc_init(struct net *n)
{
	int rc = sh_htable_init(&n->calls, 256);

	if (rc < 0)
		return rc;
	rc = sh_htable_init(&n->replies, 256);
	if (rc < 0) {
		sh_htable_fini(&n->calls);
		return rc;
	}
	sh_list_init(&n->reply_fifo);
	n->handlers[NET_OP_PING] = (struct net_handler){ h_ping, NULL };
	n->handlers[NET_OP_ECHO] = (struct net_handler){ h_echo, NULL };
	n->handlers[NET_OP_SINK] = (struct net_handler){ h_ping, NULL };
	return 0;
}

void
net_rpc_fini(struct net *n)
{
	struct sh_hnode *h, *next;
	size_t it;

	/* pending calls end with -ECANCELED, now: the loop may not turn again */
	for (h = sh_htable_first(&n->calls, &it); h != NULL; h = next) {
		next = sh_htable_next(&n->calls, &it, h);
		call_finish(sh_container_of(h, struct net_call, hn), -ECANCELED, NULL);
	}
	for (h = sh_htable_first(&n->replies, &it); h != NULL; h = next) {
		struct net_reply *r = sh_container_of(h, struct net_reply, hn);

		next = sh_htable_next(&n->replies, &it, h);
		/* in-progress entries belong to a net_req still held by a handler */
		if (!r->done) {
			sh_htable_remove(&n->replies, h);
			continue;
		}
		reply_free(n, r);
	}
	sh_htable_fini(&n->calls);
	sh_htable_fini(&n->replies);
}
