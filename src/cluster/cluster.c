// SPDX-License-Identifier: Apache-2.0
/* The configuration group: submissions, forwarding, following, heartbeats (cluster.h). */
#include <stdio.h>
#include <string.h>

#include "cluster_int.h"

SH_LOG_FACILITY("cluster");

static void notify(struct cluster *cl);
static void sync_view(struct cluster *cl);
static void maybe_finish(struct cluster *cl);

static void
on_ccall(void *arg, int status, const struct net_msg *reply)
{
	struct ccall *c = arg;
	struct cluster *cl = c->cl;

	sh_list_del(&c->link);
	if (!cl->closing)
		c->fn(cl, c->ctx, c->node, status, reply);
	sh_free(c);
	if (cl->closing)
		maybe_finish(cl);
}

static int
ccall(struct cluster *cl, uint64_t node, uint16_t op, const struct sh_enc *body,
      uint64_t timeout_ns, unsigned retries, ccall_fn fn, void *ctx, struct ccall **out)
{
	struct net_call_opts opts = { .timeout_ns = timeout_ns, .retries = retries };
	struct ccall *c;
	int rc = sh_enc_error(body);

	if (rc < 0)
		return rc;
	c = sh_calloc(1, sizeof(*c));
	if (c == NULL)
		return -ENOMEM;
	c->cl = cl;
	c->fn = fn;
	c->ctx = ctx;
	c->node = node;
	rc = net_call(cl->net, node, op, &(struct iovec){ body->p, body->len }, 1, &opts, on_ccall,
		      c, &c->h);
	if (rc < 0) {
		sh_free(c);
		return rc;
	}
	sh_list_add_tail(&cl->calls, &c->link);
	if (out)
		*out = c;
	return 0;
}

/* ---- the state machine ---- */

static int
sm_apply(void *arg, uint64_t idx, const void *p, size_t len, void **result)
{
	struct cluster *cl = arg;
	struct cfg_cmd cmd;
	int rc = cfg_cmd_decode(p, len, &cmd);

	(void)idx;
	if (rc == 0)
		rc = cfg_apply(cl->fsm_cfg, &cmd, cl->apply_msg, sizeof(cl->apply_msg));
	else
		snprintf(cl->apply_msg, sizeof(cl->apply_msg), "malformed command in the log");
	cl->apply_rc = rc;
	*result = NULL;
	if (rc == 0)
		sync_view(cl);
	if (rc == 0 && cluster_leads(cl))
		env_timer_arm(&cl->tick,
			      0); /* the nodes get the change now, not at the next tick */
	return 0;
}

static int
sm_snapshot(void *arg, uint64_t idx, struct rgroup_buf *out)
{
	struct cluster *cl = arg;
	struct sh_enc e;
	int rc;

	(void)idx;
	sh_enc_init(&e);
	cfg_encode(&e, cl->fsm_cfg);
	rc = rgroup_buf_enc(&e, out);
	sh_enc_fini(&e);
	return rc < 0 ? -ENOMEM : 0;
}

static int
sm_restore(void *arg, uint64_t applied, const void *p, size_t len)
{
	struct cluster *cl = arg;
	int rc = cfg_decode(p, len, cl->fsm_cfg);

	(void)applied;
	if (rc < 0) {
		sh_log_error("config snapshot of %zu bytes does not decode: %s", len,
			     sh_strerror(rc));
		return -EBADMSG;
	}
	sync_view(cl);
	return 0;
}

/*
 * The state machine moved: show it if it is newer than what this node
 * knew. A node that followed pushed copies before it became a voter
 * replays the log into its own state machine, never on top of a copy.
 */
static void
sync_view(struct cluster *cl)
{
	if (cl->fsm_cfg->epoch <= cl->cfg->epoch && cl->cfg->created)
		return;
	if (cfg_copy(cl->cfg, cl->fsm_cfg) < 0) {
		sh_log_error("out of memory copying the configuration (epoch %llu)",
			     (unsigned long long)cl->fsm_cfg->epoch);
		return;
	}
	notify(cl);
	if (!cl->closing)
		env_post(&cl->pump); /* cluster_wait's watchers look again */
}

static void
notify(struct cluster *cl)
{
	if (cl->p.changed)
		cl->p.changed(cl->p.arg, cl->cfg);
}

/* ---- raft lifecycle ---- */

/* Its member of the configuration group takes part. */
static bool
running(const struct cluster *cl)
{
	return cl->rg != NULL && rgroup_started(cl->rg);
}

bool
cluster_leads(struct cluster *cl)
{
	return running(cl) && rgroup_leads(cl->rg);
}

static uint64_t
leader_id(struct cluster *cl)
{
	if (running(cl)) {
		uint64_t id = rgroup_leader(cl->rg);

		if (id)
			return id;
		/*
		 * A voter without a leader waits for the election — unless a leader
		 * pushed to it since: then it may not be a voter any more (demoted
		 * while it was down, it cannot know until the leader replicates to
		 * it), and that leader wants its heartbeats. A node that is not the
		 * leader answers them -EAGAIN, which drops the hint.
		 */
		if (rgroup_state(cl->rg) != RGROUP_UNAVAILABLE && rgroup_nmembers(cl->rg) > 0 &&
		    cl->leader_hint == 0)
			return 0;
	}
	return cl->leader_hint;
}

static int
raft_go(struct cluster *cl)
{
	int rc;

	if (running(cl))
		return 0;
	rc = rgroup_start(cl->rg); /* (it logs why it could not) */
	if (rc < 0)
		return rc;
	sh_log_info("config raft started (node %llu)", (unsigned long long)cl->p.node_id);
	return 0;
}

static void
on_log_open(void *arg, int status)
{
	struct cluster *cl = arg;

	if (status < 0) {
		sh_log_error("config raft log %s: %s", cl->path, sh_strerror(status));
		return;
	}
	cl->inited = true;
	/* a log with state means this node was a member: rejoin at once */
	if (rgroup_has_state(cl->rg))
		raft_go(cl);
	env_post(&cl->pump);
}

/* A Raft message for the config group while ours is not running: a leader added us. */
static void
on_unknown_group(void *arg, uint32_t group, uint64_t from)
{
	struct cluster *cl = arg;

	if (group != CONFIG_GROUP || !cl->inited || cl->closing)
		return;
	sh_log_info("config raft: node %llu contacted us: joining", (unsigned long long)from);
	raft_go(cl);
}

/* ---- submissions ---- */

static void
sub_done(struct sub *s, int status, const char *msg)
{
	struct cluster *cl = s->cl;

	sh_list_del(&s->link);
	if (s->state != SUB_WATCH && (!s->internal || status < 0))
		sh_log(status < 0 && status != -EALREADY ? SH_LL_WARN : SH_LL_INFO,
		       "config change %s: %s%s%s", cfg_op_name(s->cmd.op),
		       status < 0 ? sh_errname(status) : "done", msg && *msg ? ": " : "",
		       msg ? msg : "");
	if (s->internal && s->cmd.op == CFG_OP_MGROUP_REPLACE) {
		cl->replacing = false;
	} else if (s->internal) {
		for (unsigned i = 0; i < cl->ntrack; i++)
			if (cl->track[i].id == s->cmd.id)
				cl->track[i].proposing = false;
	}
	if (s->req != NULL) {
		struct sh_enc e;

		sh_enc_init(&e);
		sh_enc_str(&e, msg ? msg : "");
		sh_enc_u64(&e, cl->cfg->epoch > s->want_epoch ? cl->cfg->epoch : s->want_epoch);
		net_reply(s->req, status, &(struct iovec){ e.p, e.len }, sh_enc_error(&e) ? 0 : 1);
		sh_enc_fini(&e);
	} else if (s->cb != NULL) {
		s->cb(s->arg, status, msg ? msg : "");
	}
	sh_free(s);
}

static void
on_applied(void *arg, int status, void *result)
{
	struct sub *s = arg;
	struct cluster *cl = s->cl;

	(void)result;
	if (status != 0) {
		char msg[CFG_MSG_MAX];

		snprintf(msg, sizeof(msg),
			 "the configuration leader changed before the change committed (%s); it "
			 "may or may not have been applied",
			 sh_strerror(status));
		sub_done(s, -EAGAIN, msg);
		return;
	}
	sub_done(s, cl->apply_rc, cl->apply_rc ? cl->apply_msg : "");
}

static int
propose(struct cluster *cl, struct sub *s)
{
	struct rgroup_buf buf;
	struct sh_enc e;
	char msg[CFG_MSG_MAX];
	int rc;

	/* against the state machine this leader applies to (its view may be a pushed copy) */
	rc = cfg_check(cl->fsm_cfg, &s->cmd, msg, sizeof(msg));
	if (rc < 0) {
		sub_done(s, rc, msg);
		return 0;
	}
	sh_enc_init(&e);
	cfg_cmd_encode(&e, &s->cmd);
	rc = rgroup_buf_enc(&e, &buf);
	sh_enc_fini(&e);
	if (rc < 0)
		return -ENOMEM;
	if (rgroup_propose(cl->rg, &buf, on_applied, s) != 0) /* buf taken */
		return -EAGAIN;
	s->state = SUB_APPLYING;
	return 0;
}

static void
on_forwarded(struct cluster *cl, void *ctx, uint64_t node, int status, const struct net_msg *reply)
{
	struct sub *s = ctx;
	char msg[CFG_MSG_MAX] = "";
	uint64_t epoch = 0;

	(void)node;
	if (reply != NULL && reply->len > 0) {
		struct sh_dec d;

		sh_dec_init(&d, reply->buf->data + reply->off, reply->len);
		sh_dec_str(&d, msg, sizeof(msg));
		epoch = sh_dec_u64(&d);
	}
	s->call = NULL;
	if (status == -EAGAIN || status == -ETIMEDOUT || status == SH_EPEERRESTART ||
	    status == -ECONNREFUSED || status == -ECANCELED) {
		/* the leader moved or died: wait for the next one (until the deadline) */
		s->state = SUB_WAIT;
		cl->leader_hint = 0;
		return;
	}
	if (status == 0 && epoch > cl->cfg->epoch && s->req == NULL) {
		/* read your writes: answer once this node has the new configuration */
		s->state = SUB_SYNC;
		s->want_epoch = epoch;
		s->deadline = env_now(cl->env) + SYNC_WAIT_NS;
		cl->last_hb = 0; /* pull it now */
		return;
	}
	s->want_epoch = epoch; /* relayed to whoever forwarded it to us */
	sub_done(s, status, msg);
}

static int
ensure_peer(struct cluster *cl, uint64_t id)
{
	const struct cfg_node *n = cfg_node_find(cl->cfg, id);

	return n == NULL ? -ENOENT : net_peer_ensure(cl->net, id, n->mgmt);
}

static int
forward(struct cluster *cl, struct sub *s, uint64_t to)
{
	struct sh_enc e;
	int rc;

	rc = ensure_peer(cl, to);
	if (rc < 0)
		return rc;
	sh_enc_init(&e);
	cfg_cmd_encode(&e, &s->cmd);
	rc = ccall(cl, to,
		   s->cmd.op == CFG_OP_DRIVE_ADD && !s->prepared ? NET_OP_CLUSTER_LOCAL
								 : NET_OP_CLUSTER_PROPOSE,
		   &e, CALL_TIMEOUT_NS + CALL_TIMEOUT_NS / 2, 0, on_forwarded, s, &s->call);
	sh_enc_fini(&e);
	if (rc == 0) {
		s->state = SUB_FORWARDING;
		s->fwd_to = to;
	}
	return rc;
}

/*
 * The leader to forward to. A member that has not heard its leader for a
 * few Raft heartbeats treats it as gone (an election is coming) rather
 * than sending it changes that would only time out.
 */
static uint64_t
live_leader(struct cluster *cl)
{
	uint64_t lead = leader_id(cl);
	uint64_t quiet = 3ull * (cl->p.election_ms / 10) * 1000 * 1000;

	if (lead != 0 && running(cl) && lead != cl->p.node_id &&
	    env_now(cl->env) - rnet_last_heard(cl->rn, lead) > quiet)
		return 0;
	return lead;
}

static void
describe_no_leader(struct cluster *cl, char *msg, size_t len)
{
	struct cluster_info ci;
	size_t off;

	cluster_info(cl, &ci);
	off = (size_t)snprintf(msg, len,
			       "no configuration leader: a majority of the config members is "
			       "unreachable (members:");
	for (unsigned i = 0; i < ci.nvoters && off < len; i++) {
		uint64_t id = ci.voters[i];
		bool up = id == cl->p.node_id || net_peer_connected(cl->net, id);
		off += (size_t)snprintf(msg + off, len - off, " %llu%s", (unsigned long long)id,
					up ? "" : "(unreachable)");
	}
	if (off < len)
		snprintf(msg + off, len - off, ")");
}

void
cluster_pump(struct cluster *cl)
{
	struct sh_list *pos, *tmp;
	uint64_t now = env_now(cl->env);

	sh_list_for_each_safe (pos, tmp, &cl->subs) {
		struct sub *s = sh_list_entry(pos, struct sub, link);
		uint64_t lead;
		int rc;

		if (s->state == SUB_FORWARDING && s->call != NULL &&
		    (s->prepared || s->cmd.op != CFG_OP_DRIVE_ADD)) {
			lead = live_leader(cl);
			if (lead != 0 && lead != s->fwd_to) {
				/* the leader we sent it to is gone: ask the new one */
				net_call_cancel(s->call->h);
				s->call = NULL;
			}
		}
		if (s->state == SUB_WATCH) {
			if (s->ready(s->arg, cl->cfg))
				sub_done(s, 0, "");
			else if (now >= s->deadline)
				sub_done(s, -ETIMEDOUT, "");
			continue;
		}
		if (s->state == SUB_SYNC) {
			if (cl->cfg->epoch >= s->want_epoch || now >= s->deadline)
				sub_done(s, 0, "");
			continue;
		}
		if (s->state != SUB_WAIT)
			continue;
		if (s->cmd.op == CFG_OP_DRIVE_ADD && !s->prepared && s->cmd.id == cl->p.node_id) {
			char msg[CFG_MSG_MAX] = "";

			rc =
			    cl->p.prepare ? cl->p.prepare(cl->p.arg, &s->cmd, msg, sizeof(msg)) : 0;
			if (rc < 0) {
				sub_done(s, rc, msg);
				continue;
			}
			s->prepared = true;
		}
		if (s->cmd.op == CFG_OP_DRIVE_ADD && !s->prepared) {
			/* prepared on its own node, which then proposes it */
			rc = forward(cl, s, s->cmd.id);
			if (rc < 0) {
				char msg[CFG_MSG_MAX];

				snprintf(msg, sizeof(msg), "cannot reach node %llu: %s",
					 (unsigned long long)s->cmd.id,
					 rc == -ENOENT ? "no such node" : sh_strerror(rc));
				sub_done(s, rc, msg);
			}
			continue;
		}
		if (s->cmd.op == CFG_OP_CREATE && !cl->cfg->created && cl->inited && !running(cl)) {
			const char *self = cl->mgmt;

			rc = rgroup_bootstrap(cl->rg, &cl->p.node_id, &self, 1);
			if (rc < 0 || raft_go(cl) < 0) {
				sub_done(s, -EIO, "could not start the configuration group");
				continue;
			}
		}
		if (cluster_leads(cl)) {
			rc = propose(cl, s);
			if (rc == 0)
				continue;
		} else if (s->fwd_ok && (lead = live_leader(cl)) != 0 && lead != cl->p.node_id) {
			if (forward(cl, s, lead) == 0)
				continue;
		} else if (!s->fwd_ok) {
			sub_done(s, -EAGAIN, "not the configuration leader");
			continue;
		}
		if (now >= s->deadline && s->cmd.op != CFG_OP_CREATE && !cl->cfg->created &&
		    !running(cl) && cl->leader_hint == 0) {
			sub_done(
			    s, -ENOTCONN,
			    "this node is not in a cluster: run 'shoal cluster create' here, or "
			    "'shoal node add' on a cluster node");
			continue;
		}
		if (now >= s->deadline) {
			char msg[CFG_MSG_MAX];

			describe_no_leader(cl, msg, sizeof(msg));
			sub_done(s, -ETIMEDOUT, msg);
		}
	}
}

static void
on_pump(struct env_task *t)
{
	cluster_pump(t->arg);
}

struct sub *
cluster_sub_new(struct cluster *cl, const struct cfg_cmd *cmd)
{
	struct sub *s = sh_calloc(1, sizeof(*s));

	if (s == NULL)
		return NULL;
	s->cl = cl;
	s->cmd = *cmd;
	if (s->cmd.time == 0)
		s->cmd.time = env_realtime(cl->env);
	if (s->cmd.op == CFG_OP_CREATE) {
		if (s->cmd.id == 0)
			s->cmd.id = cl->p.node_id;
		if (s->cmd.addr[0] == '\0')
			snprintf(s->cmd.addr, sizeof(s->cmd.addr), "%s", cl->mgmt);
		if (s->cmd.data[0] == '\0')
			snprintf(s->cmd.data, sizeof(s->cmd.data), "%s", cl->data);
		if (s->cmd.domain[0] == '\0')
			snprintf(s->cmd.domain, sizeof(s->cmd.domain), "%s", cl->domain);
		if (s->cmd.nbuckets == 0)
			s->cmd.nbuckets = CFG_BUCKETS_DEFAULT;
		if (s->cmd.uuid[0] == 0 && s->cmd.uuid[1] == 0)
			env_random(cl->env, s->cmd.uuid, sizeof(s->cmd.uuid));
	}
	s->deadline = env_now(cl->env) + cl->p.submit_ns;
	sh_list_add_tail(&cl->subs, &s->link);
	return s;
}

int
cluster_submit(struct cluster *cl, const struct cfg_cmd *cmd, cluster_cb cb, void *arg)
{
	struct sub *s;

	if (cl->closing)
		return -ESHUTDOWN;
	if (cmd->op == CFG_OP_CREATE && cmd->id != 0 && cmd->id != cl->p.node_id)
		return -EINVAL;
	s = cluster_sub_new(cl, cmd);
	if (s == NULL)
		return -ENOMEM;
	s->cb = cb;
	s->arg = arg;
	s->fwd_ok = true;
	env_post(&cl->pump);
	return 0;
}

int
cluster_wait(struct cluster *cl, cluster_ready_fn ready, uint64_t timeout_ns, cluster_cb cb,
	     void *arg)
{
	struct sub *s;

	if (cl->closing)
		return -ESHUTDOWN;
	s = sh_calloc(1, sizeof(*s));
	if (s == NULL)
		return -ENOMEM;
	s->cl = cl;
	s->state = SUB_WATCH;
	s->ready = ready;
	s->cb = cb;
	s->arg = arg;
	s->deadline = env_now(cl->env) + timeout_ns;
	sh_list_add_tail(&cl->subs, &s->link);
	env_post(&cl->pump);
	return 0;
}

/* A change forwarded to us (we should be the leader), or a drive to prepare here. */
static void
on_remote(struct net_req *req, void *arg)
{
	struct cluster *cl = arg;
	const struct net_msg *m = net_req_body(req);
	bool local = net_req_opcode(req) == NET_OP_CLUSTER_LOCAL;
	struct cfg_cmd cmd;
	struct sub *s;

	if (cfg_cmd_decode(m->buf->data + m->off, m->len, &cmd) < 0 ||
	    (local && (cmd.op != CFG_OP_DRIVE_ADD || cmd.id != cl->p.node_id))) {
		net_reply(req, -EINVAL, NULL, 0);
		return;
	}
	s = cluster_sub_new(cl, &cmd);
	if (s == NULL) {
		net_reply(req, -ENOMEM, NULL, 0);
		return;
	}
	s->req = req;
	/* prepared here, a drive goes on to the leader; a proposal stops here */
	s->fwd_ok = local;
	s->prepared = !local; /* a proposal was prepared where it came from */
	env_post(&cl->pump);
}

/* ---- following: heartbeats and pushes ---- */

struct track *
cluster_track(struct cluster *cl, uint64_t id)
{
	for (unsigned i = 0; i < cl->ntrack; i++)
		if (cl->track[i].id == id)
			return &cl->track[i];
	if (cl->ntrack >= CFG_NODES_MAX)
		return NULL;
	cl->track[cl->ntrack] = (struct track){ .id = id, .seen = env_now(cl->env) };
	return &cl->track[cl->ntrack++];
}

/*
 * A copy of the configuration from the leader, for the view only: the
 * state machine of a voter follows its own log (and a spare's, which no
 * longer gets the log, stays where it is until it votes again).
 */
static void
adopt(struct cluster *cl, const uint8_t *b, size_t len)
{
	struct cfg *t;

	if (len == 0)
		return;
	t = cfg_new();
	if (t == NULL)
		return;
	if (cfg_decode(b, len, t) == 0 && t->epoch > cl->cfg->epoch) {
		struct cfg *old = cl->cfg;

		sh_log_debug("config epoch %llu -> %llu", (unsigned long long)old->epoch,
			     (unsigned long long)t->epoch);
		cl->cfg = t; /* the decoded copy becomes the view */
		t = old;
		notify(cl);
		env_post(&cl->pump);
	}
	cfg_free(t);
}

/* Answer with our epoch, and the configuration if the asker's epoch is older. */
static void
reply_cfg(struct cluster *cl, struct net_req *req, uint64_t epoch)
{
	struct sh_enc e;

	sh_enc_init(&e);
	sh_enc_u64(&e, cl->cfg->epoch);
	if (epoch < cl->cfg->epoch && net_id_is_client(net_req_peer(req)))
		cfg_encode_public(&e, cl->cfg); /* no access key's bytes to a client */
	else if (epoch < cl->cfg->epoch)
		cfg_encode(&e, cl->cfg);
	net_reply(req, sh_enc_error(&e) ? -ENOMEM : 0, &(struct iovec){ e.p, e.len }, 1);
	sh_enc_fini(&e);
}

static void
on_heartbeat(struct net_req *req, void *arg)
{
	struct cluster *cl = arg;
	const struct net_msg *m = net_req_body(req);
	struct sh_dec d;
	struct track *t;
	uint64_t node, epoch;
	uint8_t flags = 0;

	sh_dec_init(&d, m->buf->data + m->off, m->len);
	node = sh_dec_u64(&d);
	epoch = sh_dec_u64(&d);
	if (m->len > 16)
		flags = sh_dec_u8(&d); /* (a node of an older version sends none) */
	sh_dec_end(&d);
	if (d.err) {
		net_reply(req, -EINVAL, NULL, 0);
		return;
	}
	if (!cluster_leads(cl)) {
		net_reply(req, -EAGAIN, NULL, 0);
		return;
	}
	t = cluster_track(cl, node);
	if (t != NULL) {
		t->seen = env_now(cl->env);
		t->acked = epoch;
		t->data_down = flags & HB_DATA_DOWN;
	}
	reply_cfg(cl, req, epoch);
}

/* A client asks for the configuration: u64 epoch it has; reply u64 epoch (+ cfg if newer). */
static void
on_config_req(struct net_req *req, void *arg)
{
	struct cluster *cl = arg;
	const struct net_msg *m = net_req_body(req);
	uint64_t epoch;

	if (m->len != 8) {
		net_reply(req, -EINVAL, NULL, 0);
		return;
	}
	memcpy(&epoch, m->buf->data + m->off, 8);
	if (!cl->cfg->created) {
		net_reply(req, -ENOTCONN, NULL, 0);
		return;
	}
	reply_cfg(cl, req, epoch);
}

/* A client says what it is: kept (by its data endpoint id) for the process view. */
static void
on_client_info(struct net_req *req, void *arg)
{
	struct cluster *cl = arg;
	const struct net_msg *m = net_req_body(req);
	uint64_t now = env_now(cl->env);
	struct cinfo ci;
	unsigned i, oldest = 0;

	if (cinfo_decode(m->buf->data + m->off, m->len, &ci) < 0) {
		net_reply(req, -EINVAL, NULL, 0);
		return;
	}
	if (cl->clients == NULL && (cl->clients = sh_calloc(CINFO_MAX, sizeof(ci))) == NULL) {
		net_reply(req, -ENOMEM, NULL, 0);
		return;
	}
	ci.seen_ns = now;
	for (i = 0; i < cl->nclients && cl->clients[i].id != ci.id; i++)
		if (cl->clients[i].seen_ns < cl->clients[oldest].seen_ns)
			oldest = i;
	if (i == cl->nclients && cl->nclients == CINFO_MAX)
		i = oldest; /* full: the one heard from longest ago goes */
	else if (i == cl->nclients)
		cl->nclients++;
	cl->clients[i] = ci;
	net_reply(req, 0, NULL, 0);
}

unsigned
cluster_clients(const struct cluster *cl, struct cinfo *out, unsigned max)
{
	uint64_t now = env_now(cl->env);
	unsigned n = 0;

	for (unsigned i = 0; i < cl->nclients; i++)
		if (now - cl->clients[i].seen_ns < CINFO_TTL_NS && n < max)
			out[n++] = cl->clients[i];
	return n;
}

static void
on_heartbeat_reply(struct cluster *cl, void *ctx, uint64_t node, int status,
		   const struct net_msg *reply)
{
	(void)ctx;
	(void)node;
	if (status == -EAGAIN)
		cl->leader_hint = 0; /* it is not the leader any more; wait for a push */
	if (status < 0 || reply == NULL || reply->len < 8)
		return;
	if (reply->len > 8)
		adopt(cl, reply->buf->data + reply->off + 8, reply->len - 8);
}

static void
on_push(struct net_req *req, void *arg)
{
	struct cluster *cl = arg;
	const struct net_msg *m = net_req_body(req);
	uint64_t leader;
	struct sh_enc e;

	if (m->len < 8) {
		net_reply(req, -EINVAL, NULL, 0);
		return;
	}
	memcpy(&leader, m->buf->data + m->off, 8);
	if (leader == net_req_peer(req))
		cl->leader_hint = leader;
	adopt(cl, m->buf->data + m->off + 8, m->len - 8);
	sh_enc_init(&e);
	sh_enc_u64(&e, cl->cfg->epoch);
	net_reply(req, 0, &(struct iovec){ e.p, e.len }, sh_enc_error(&e) ? 0 : 1);
	sh_enc_fini(&e);
}

static void
on_push_reply(struct cluster *cl, void *ctx, uint64_t node, int status, const struct net_msg *reply)
{
	struct track *t;
	uint64_t epoch;

	(void)ctx;
	if (status == 0 && reply != NULL && reply->len >= 8) {
		memcpy(&epoch, reply->buf->data + reply->off, 8);
		t = cluster_track(cl, node);
		if (t != NULL && epoch > t->acked)
			t->acked = epoch;
	}
}

/* Push the configuration (encoded once per round by the caller: leader id, then cfg). */
void
cluster_push(struct cluster *cl, struct track *t, const struct sh_enc *body)
{
	t->pushed = env_now(cl->env);
	t->pushed_epoch = cl->cfg->epoch;
	if (ensure_peer(cl, t->id) == 0)
		ccall(cl, t->id, NET_OP_CLUSTER_PUSH, body, CALL_TIMEOUT_NS, 0, on_push_reply, NULL,
		      NULL);
}

void
cluster_heartbeat(struct cluster *cl)
{
	uint64_t lead = leader_id(cl);
	struct sh_enc e;

	if (lead == 0 || lead == cl->p.node_id || ensure_peer(cl, lead) < 0)
		return;
	sh_enc_init(&e);
	sh_enc_u64(&e, cl->p.node_id);
	sh_enc_u64(&e, cl->cfg->epoch);
	sh_enc_u8(&e, cl->p.data_down != NULL && cl->p.data_down(cl->p.arg) ? HB_DATA_DOWN : 0);
	ccall(cl, lead, NET_OP_CLUSTER_HEARTBEAT, &e, CALL_TIMEOUT_NS, 0, on_heartbeat_reply, NULL,
	      NULL);
	sh_enc_fini(&e);
}

static void
on_tick(struct env_timer *tm)
{
	struct cluster *cl = tm->arg;
	uint64_t now = env_now(cl->env);

	env_timer_arm_period(&cl->tick, TICK_NS);
	if (cluster_leads(cl)) {
		cluster_lead(cl);
	} else {
		cl->was_leader = false;
		if (now - cl->last_hb >= cl->p.heartbeat_ns) {
			cl->last_hb = now;
			cluster_heartbeat(cl);
		}
	}
	cluster_pump(cl);
}

/* ---- lifecycle ---- */

/* What the cluster answers on the management network. */
static const struct {
	uint16_t op;
	net_handler_fn fn;
} handlers[] = {
	{ NET_OP_CLUSTER_PROPOSE, on_remote },	    { NET_OP_CLUSTER_LOCAL, on_remote },
	{ NET_OP_CLUSTER_HEARTBEAT, on_heartbeat }, { NET_OP_CLUSTER_PUSH, on_push },
	{ NET_OP_CLUSTER_CONFIG, on_config_req },   { NET_OP_CLIENT_INFO, on_client_info },
};

/* Before cl goes: what comes later for its opcodes finds no one. */
static void
unhandle(struct cluster *cl)
{
	for (size_t i = 0; i < SH_ARRAY_SIZE(handlers); i++)
		net_unhandle(cl->net, handlers[i].op);
}

int
cluster_start(struct net *mgmt, const struct cluster_params *p, struct cluster **out)
{
	struct cluster *cl;
	struct rgroup_params rp;
	int rc;

	if (p->node_id == 0 || p->mgmt == NULL || p->data == NULL || p->dir == NULL)
		return -EINVAL;
	cl = sh_calloc(1, sizeof(*cl));
	if (cl == NULL)
		return -ENOMEM;
	cl->net = mgmt;
	cl->env = net_env(mgmt);
	cl->p = *p;
	snprintf(cl->mgmt, sizeof(cl->mgmt), "%s", p->mgmt);
	snprintf(cl->data, sizeof(cl->data), "%s", p->data);
	snprintf(cl->domain, sizeof(cl->domain), "%s", p->domain ? p->domain : "");
	snprintf(cl->path, sizeof(cl->path), "%s/config.raft", p->dir);
	if (cl->p.heartbeat_ns == 0)
		cl->p.heartbeat_ns = 500ull * 1000 * 1000;
	if (cl->p.down_ns == 0)
		cl->p.down_ns = 2ull * 1000 * 1000 * 1000;
	if (cl->p.submit_ns == 0)
		cl->p.submit_ns = 8ull * 1000 * 1000 * 1000;
	if (cl->p.replace_ns == 0)
		cl->p.replace_ns = 10ull * 1000 * 1000 * 1000;
	if (cl->p.meta_replace_ns == 0)
		cl->p.meta_replace_ns = 300ull * 1000 * 1000 * 1000;
	if (cl->p.election_ms == 0)
		cl->p.election_ms = 700;
	sh_list_init(&cl->subs);
	sh_list_init(&cl->calls);
	cl->cfg = cfg_new();
	cl->fsm_cfg = cfg_new();
	if (cl->cfg == NULL || cl->fsm_cfg == NULL) {
		rc = -ENOMEM;
		goto err;
	}
	env_timer_init(cl->env, &cl->tick, on_tick, cl);
	env_task_init(cl->env, &cl->pump, on_pump, cl);
	rc = rnet_create(mgmt, &cl->rn);
	if (rc < 0)
		goto err;
	rnet_set_unknown(cl->rn, on_unknown_group, cl);
	for (size_t i = 0; i < SH_ARRAY_SIZE(handlers); i++) {
		rc = net_handle(mgmt, handlers[i].op, handlers[i].fn, cl);
		if (rc < 0) {
			while (i-- > 0)
				net_unhandle(mgmt, handlers[i].op);
			goto err_rn;
		}
	}
	rp = (struct rgroup_params){
		.io = { .group = CONFIG_GROUP,
			.id = p->node_id,
			.path = cl->path,
			.log_size = RAFT_LOG_SIZE },
		.addr = cl->mgmt,
		.election_ms = cl->p.election_ms,
		.heartbeat_ms = cl->p.election_ms / 10,
		.snapshot_threshold = 128,
		.snapshot_trailing = 64,
		.install_snapshot_ms = 5000,
		.sm = { .apply = sm_apply,
			.snapshot = sm_snapshot,
			.restore = sm_restore,
			.arg = cl },
	};
	rc = rgroup_open(cl->rn, &rp, on_log_open, cl, &cl->rg);
	if (rc < 0)
		goto err_rn;
	env_timer_arm_period(&cl->tick, TICK_NS);
	*out = cl;
	return 0;
err_rn:
	rnet_destroy(cl->rn);
err:
	cfg_free(cl->cfg);
	cfg_free(cl->fsm_cfg);
	sh_free(cl);
	return rc;
}

static void
finish_stop(struct env_task *t)
{
	struct cluster *cl = t->arg;
	void (*done)(void *) = cl->stop_done;
	void *arg = cl->stop_arg;

	while (!sh_list_empty(&cl->subs))
		sub_done(sh_list_entry(cl->subs.next, struct sub, link), -ESHUTDOWN,
			 "the node is shutting down");
	unhandle(cl);
	rnet_destroy(cl->rn);
	cfg_free(cl->cfg);
	cfg_free(cl->fsm_cfg);
	sh_free(cl->clients);
	sh_free(cl);
	if (done)
		done(arg);
}

static void
maybe_finish(struct cluster *cl)
{
	if (cl->raft_closed && sh_list_empty(&cl->calls))
		env_post(&cl->stop_task);
}

/* rg's done: the proposals in flight were called back; it is gone. */
static void
on_raft_closed(void *arg)
{
	struct cluster *cl = arg;

	cl->raft_closed = true;
	maybe_finish(cl);
}

void
cluster_stop(struct cluster *cl, void (*done)(void *arg), void *arg)
{
	cl->closing = true;
	cl->stop_done = done;
	cl->stop_arg = arg;
	env_timer_cancel(&cl->tick);
	env_task_cancel(&cl->pump);
	{
		struct sh_list *pos, *tmp;

		/* applying ones are called back as rgroup_close fails them */
		sh_list_for_each_safe (pos, tmp, &cl->subs) {
			struct sub *s = sh_list_entry(pos, struct sub, link);

			if (s->state != SUB_APPLYING)
				sub_done(s, -ESHUTDOWN, "the node is shutting down");
		}
		sh_list_for_each (pos, &cl->calls)
			net_call_cancel(sh_list_entry(pos, struct ccall, link)->h);
	}
	env_task_init(cl->env, &cl->stop_task, finish_stop, cl);
	/* nothing looks at rg from now on: it is freed before the stop finishes */
	cl->inited = false;
	if (cl->rg != NULL) {
		struct rgroup *rg = cl->rg;

		cl->rg = NULL;
		rgroup_close(rg, on_raft_closed, cl);
	} else {
		cl->raft_closed = true;
		maybe_finish(cl);
	}
}

const struct cfg *
cluster_cfg(const struct cluster *cl)
{
	return cl->cfg;
}

void
cluster_info(const struct cluster *cl, struct cluster_info *out)
{
	struct cluster *c = (struct cluster *)cl;

	memset(out, 0, sizeof(*out));
	out->started = running(cl);
	out->leader = leader_id(c);
	if (!out->started)
		return;
	out->raft_state = rgroup_state(c->rg);
	out->term = rgroup_term(c->rg);
	out->commit = rgroup_commit(c->rg);
	out->applied = rgroup_applied(c->rg);
	for (unsigned i = 0; i < rgroup_nmembers(c->rg) && out->nvoters < 8; i++) {
		struct rgroup_member m = rgroup_member(c->rg, i);

		if (m.role != RGROUP_VOTER)
			continue;
		out->voters[out->nvoters++] = m.id;
		if (m.id == cl->p.node_id)
			out->member = true;
	}
}
