// SPDX-License-Identifier: Apache-2.0
/* Metadata groups of a configuration, and calls to a bucket's leader (mroute.h). */
#include <stdlib.h>
#include <string.h>

#include "mroute.h"

SH_LOG_FACILITY("meta.route");

#define HINTS	       4096
#define RETRY_NS       (20ull * 1000 * 1000)
#define ATTEMPT_NS     (800ull * 1000 * 1000) /* at the leader we know */
#define PROBE_NS       (250ull * 1000 * 1000) /* at a member that may not lead: it says who does */
#define STALE_RETRY_NS (100ull * 1000 * 1000)

/* ---- placement ---- */

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

int
mplace_build(const struct cfg *c, struct mplace *out)
{
	uint32_t nb = c->nbuckets, r = c->replicas, ng = 0;
	int rc;

	memset(out, 0, sizeof(*out));
	if (!c->created || nb == 0 || r == 0 || c->buckets == NULL)
		return -ENOENT;
	out->group_of = sh_calloc(nb, sizeof(*out->group_of));
	out->gbuckets = sh_calloc(nb, sizeof(*out->gbuckets));
	out->gstart = sh_calloc((size_t)nb + 1, sizeof(*out->gstart));
	out->members = sh_calloc((size_t)nb * r, sizeof(*out->members));
	rc = -ENOMEM;
	if (!out->group_of || !out->gbuckets || !out->gstart || !out->members)
		goto out;
	rc = cfg_groups(c, out->group_of, &ng);
	if (rc < 0)
		goto out;
	/* each group's buckets ascending, groups in order; members sorted (every replica
	 * bootstraps the same configuration from them) */
	for (uint32_t b = 0; b < nb; b++)
		out->gstart[out->group_of[b] + 1]++;
	for (uint32_t g = 0; g < ng; g++)
		out->gstart[g + 1] += out->gstart[g];
	for (uint32_t b = 0; b < nb; b++) {
		uint32_t g = out->group_of[b];
		uint32_t at = out->gstart[g]++;

		out->gbuckets[at] = (uint16_t)b;
	}
	for (uint32_t g = ng; g > 0; g--)
		out->gstart[g] = out->gstart[g - 1];
	out->gstart[0] = 0;
	for (uint32_t g = 0; g < ng; g++) {
		uint64_t *m = out->members + (size_t)g * r;

		memcpy(m, cfg_bucket(c, out->gbuckets[out->gstart[g]]), r * sizeof(*m));
		qsort(m, r, sizeof(*m), cmp_u64);
		for (uint32_t k = 0; k < r; k++)
			m[k] = mplace_endpoint(m[k]);
	}
	out->ngroups = ng;
	out->nbuckets = nb;
	out->replicas = r;
	rc = 0;
out:
	if (rc < 0)
		mplace_free(out);
	return rc;
}

void
mplace_free(struct mplace *p)
{
	sh_free(p->group_of);
	sh_free(p->members);
	sh_free(p->gstart);
	sh_free(p->gbuckets);
	memset(p, 0, sizeof(*p));
}

int
mplace_target(const struct cfg *c, uint64_t target, uint64_t *peer, char *addr)
{
	for (uint32_t i = 0; i < c->ndrives; i++) {
		const struct cfg_drive *dr = &c->drives[i];
		const struct cfg_node *n;
		struct env_addr a;

		if (dr->id != target)
			continue;
		n = cfg_node_find(c, dr->node);
		if (n == NULL || env_addr_parse(n->data, &a) < 0)
			return -ENOENT;
		if (cfg_node_down(n) || dr->state == CFG_DRIVE_FAILED)
			return -EHOSTDOWN;
		a.port = (uint16_t)(a.port + dr->worker);
		env_addr_format(&a, addr, CFG_ADDR_MAX);
		*peer = dr->node << 8 | dr->worker;
		return 0;
	}
	return -ENOENT;
}

/* Sync one endpoint of node n (its worker w) unless it is net's own. */
static void
sync_endpoint(struct net *net, const struct cfg_node *n, unsigned w)
{
	char addrs[CFG_ADDRS_MAX];
	uint64_t ep = n->id << 8 | w;

	if (ep != net_node_id(net) && cfg_node_data(n, w, addrs, sizeof(addrs)) > 0)
		net_peer_sync(net, ep, addrs);
}

void
mplace_sync_peers(struct net *net, const struct cfg *c)
{
	for (uint32_t i = 0; i < c->nnodes; i++) {
		const struct cfg_node *n = &c->nodes[i];
		uint64_t seen = 1; /* worker 0 (metadata) always; then those serving drives */

		sync_endpoint(net, n, 0);
		for (uint32_t k = 0; k < c->ndrives; k++) {
			const struct cfg_drive *dr = &c->drives[k];

			if (dr->node != n->id || dr->worker >= 64 || (seen & 1ull << dr->worker))
				continue;
			seen |= 1ull << dr->worker;
			sync_endpoint(net, n, dr->worker);
		}
	}
}

/* ---- calls ---- */

struct hint {
	uint32_t gid;
	uint64_t leader;
};

struct mcall {
	struct sh_list link;
	struct mroute *rt;
	struct sh_enc body;
	struct mp_req req; /* for the local handler: name/data point into body copy */
	uint8_t *copy;
	uint64_t deadline;
	unsigned tries;
	uint64_t target;
	int last;
	struct net_call *h;
	struct env_timer retry;
	bool local;    /* with the local handler */
	bool finished; /* answered; freed when the net call or local handler returns */
	mroute_cb cb;
	void *arg;
};

/*
 * A member a call timed out at is tried last until SUSPECT_NS has passed
 * or it is heard from again (a packet of any kind: the net layer probes
 * every path of it). A dead leader is not waited on again while its
 * followers still name it; one a moment's loss cut off leads again as soon
 * as the loss ends.
 */
#define SUSPECTS   16
#define SUSPECT_NS (3000ull * 1000 * 1000)

struct suspect {
	uint64_t id, since, until;
};

struct mroute {
	struct suspect suspects[SUSPECTS]; /* members that timed out lately: tried last */
	struct net *net;
	struct env *env;
	struct cfg *cfg;
	struct mplace place;
	struct hint hints[HINTS];
	struct sh_list calls;
	mroute_local_fn local;
	void *local_arg;
};

int
mroute_create(struct net *n, struct mroute **out)
{
	struct mroute *rt = sh_calloc(1, sizeof(*rt));

	if (rt == NULL)
		return -ENOMEM;
	rt->cfg = cfg_new();
	if (rt->cfg == NULL) {
		sh_free(rt);
		return -ENOMEM;
	}
	rt->net = n;
	rt->env = net_env(n);
	sh_list_init(&rt->calls);
	*out = rt;
	return 0;
}

static void call_done(struct mcall *c, int status, const struct mp_reply *r);

void
mroute_cancel_all(struct mroute *rt)
{
	while (!sh_list_empty(&rt->calls))
		call_done(sh_list_entry(rt->calls.next, struct mcall, link), -ECANCELED, NULL);
}

void
mroute_destroy(struct mroute *rt)
{
	mroute_cancel_all(rt);
	mplace_free(&rt->place);
	cfg_free(rt->cfg);
	sh_free(rt);
}

void
mroute_set_local(struct mroute *rt, mroute_local_fn fn, void *arg)
{
	rt->local = fn;
	rt->local_arg = arg;
}

int
mroute_set_cfg(struct mroute *rt, const struct cfg *c)
{
	struct mplace np;
	int rc;

	if (c->epoch <= rt->cfg->epoch && rt->cfg->created)
		return 0;
	rc = mplace_build(c, &np);
	if (rc < 0 && rc != -ENOENT)
		return rc;
	rc = cfg_copy(rt->cfg, c);
	if (rc < 0) {
		mplace_free(&np);
		return rc;
	}
	mplace_free(&rt->place);
	rt->place = np;
	mplace_sync_peers(rt->net, c);
	return 0;
}

const struct cfg *
mroute_cfg(const struct mroute *rt)
{
	return rt->cfg;
}

const struct mplace *
mroute_place(const struct mroute *rt)
{
	return &rt->place;
}

static struct hint *
hint_slot(struct mroute *rt, uint32_t gid)
{
	return &rt->hints[(uint32_t)(sh_hash_u64(gid) % HINTS)];
}

void
mroute_hint(struct mroute *rt, uint32_t fs, uint16_t bucket, uint64_t leader)
{
	struct hint *h;
	uint32_t gid;

	if (bucket >= rt->place.nbuckets)
		return;
	gid = mplace_group_id(fs, rt->place.group_of[bucket]);
	h = hint_slot(rt, gid);
	h->gid = gid;
	h->leader = leader;
}

static void
suspect(struct mroute *rt, uint64_t id)
{
	unsigned slot = 0;
	uint64_t now = env_now(rt->env);

	for (unsigned i = 0; i < SUSPECTS; i++) {
		if (rt->suspects[i].id == id || rt->suspects[i].until < now) {
			slot = i;
			if (rt->suspects[i].id == id)
				break;
		}
	}
	rt->suspects[slot] = (struct suspect){ id, now, now + SUSPECT_NS };
}

/* A member worth trying first: not marked down in the configuration, not timed out lately. */
static bool
likely_up(struct mroute *rt, uint64_t id)
{
	const struct cfg_node *n = cfg_node_find(rt->cfg, id >> 8);
	uint64_t now = env_now(rt->env);

	if (n != NULL && cfg_node_down(n))
		return false;
	for (unsigned i = 0; i < SUSPECTS; i++) {
		struct suspect *s = &rt->suspects[i];

		if (s->id != id || s->until <= now)
			continue;
		if (net_peer_heard_ns(rt->net, id) > s->since) {
			s->until = 0; /* heard from since: it answers again */
			return true;
		}
		return false;
	}
	return true;
}

static void
call_free(struct mcall *c)
{
	sh_enc_fini(&c->body);
	sh_free(c->copy);
	sh_free(c);
}

/* Answer the caller once; the call's memory goes when nothing refers to it. */
static void
call_done(struct mcall *c, int status, const struct mp_reply *r)
{
	sh_list_del(&c->link);
	env_timer_cancel(&c->retry);
	c->finished = true;
	if (status < 0)
		sh_log_debug("call for bucket %u of fs %u ends: %s (node %llu, %u tries)",
			     c->req.bucket, c->req.fs, sh_errname(status),
			     (unsigned long long)(c->target >> 8), c->tries);
	c->cb(c->arg, status, r);
	if (c->h)
		net_call_cancel(c->h); /* on_reply frees it */
	else if (!c->local)
		call_free(c);
}

static void attempt(struct mcall *c);

static bool
is_member(const struct mroute *rt, uint32_t g, uint64_t id)
{
	for (uint32_t k = 0; k < rt->place.replicas; k++)
		if (rt->place.members[(size_t)g * rt->place.replicas + k] == id)
			return true;
	return false;
}

/* Try again after delay_ns (0: now, at the next member or the leader named). */
static void
again(struct mcall *c, int status, uint64_t delay_ns)
{
	c->last = status;
	if (env_now(c->rt->env) + delay_ns >= c->deadline) {
		call_done(c, c->last == SH_ENOTLEADER || c->last == -ENXIO ? -ETIMEDOUT : c->last,
			  NULL);
		return;
	}
	env_timer_arm(&c->retry, delay_ns);
}

static void
on_reply(void *arg, int status, const struct net_msg *msg)
{
	struct mcall *c = arg;
	struct mroute *rt = c->rt;
	struct mp_reply r;
	const uint8_t *b = NULL;
	int drc = -EBADMSG;

	c->h = NULL;
	if (c->finished) {
		call_free(c);
		return;
	}
	if (msg != NULL && msg->len > 0) {
		b = msg->buf->data + msg->off;
		drc = mp_reply_decode(b, msg->len, &r);
	}
	if (status == SH_ENOTLEADER) {
		uint64_t hint = drc == 0 ? r.aux : 0;
		uint32_t g = rt->place.group_of[c->req.bucket];

		/* a follower may still name a leader that just died: not one that timed out */
		if (hint != 0 && hint != c->target && is_member(rt, g, hint) &&
		    likely_up(rt, hint)) {
			mroute_hint(rt, c->req.fs, c->req.bucket, hint);
			again(c, status, 0);
		} else {
			mroute_hint(rt, c->req.fs, c->req.bucket, 0);
			c->tries++;
			again(c, status, RETRY_NS);
		}
		return;
	}
	if (status == -ENXIO) { /* our configuration is stale: wait for a newer one */
		mroute_hint(rt, c->req.fs, c->req.bucket, 0);
		c->tries++;
		again(c, status, STALE_RETRY_NS);
		return;
	}
	if (status == -ETIMEDOUT || status == SH_EPEERDEAD || status == SH_EPEERRESTART ||
	    status == -ECONNREFUSED || status == -ESHUTDOWN) {
		/* (a restarted peer may have run a command: creates are tagged for that) */
		if (status != SH_EPEERRESTART)
			suspect(rt, c->target);
		mroute_hint(rt, c->req.fs, c->req.bucket, 0);
		c->tries++;
		again(c, status, 0);
		return;
	}
	if (status == -ECANCELED) {
		call_done(c, status, NULL);
		return;
	}
	if (status >= 0 && drc < 0) {
		call_done(c, -EBADMSG, NULL);
		return;
	}
	call_done(c, status, drc == 0 ? &r : NULL);
}

static void
on_local(void *arg, int status, const struct mp_reply *r)
{
	struct mcall *c = arg;

	c->local = false;
	if (c->finished) {
		call_free(c);
		return;
	}
	if (status == SH_ENOTLEADER) {
		c->tries++;
		again(c, status, RETRY_NS);
		return;
	}
	call_done(c, status, r);
}

static void
attempt(struct mcall *c)
{
	struct mroute *rt = c->rt;
	const struct mplace *pl = &rt->place;
	struct net_call_opts o;
	struct iovec iov;
	uint64_t now = env_now(rt->env);
	uint32_t g, gid;
	struct hint *h;
	int rc;

	if (c->req.bucket >= pl->nbuckets) {
		call_done(c, pl->nbuckets ? -EINVAL : -ENXIO, NULL);
		return;
	}
	g = pl->group_of[c->req.bucket];
	gid = mplace_group_id(c->req.fs, g);
	h = hint_slot(rt, gid);
	bool hinted = h->gid == gid && h->leader != 0 && is_member(rt, g, h->leader);
	uint64_t limit = hinted ? ATTEMPT_NS : PROBE_NS;

	if (hinted) {
		c->target = h->leader;
	} else {
		/* round robin from the try count, over the members likely up first */
		unsigned k;

		for (k = 0; k < pl->replicas; k++) {
			uint64_t m =
			    pl->members[(size_t)g * pl->replicas + (c->tries + k) % pl->replicas];

			if (likely_up(rt, m))
				break;
		}
		c->tries += k < pl->replicas ? k : 0;
		c->target = pl->members[(size_t)g * pl->replicas + c->tries % pl->replicas];
	}
	if (c->target == net_node_id(rt->net)) {
		if (rt->local != NULL) {
			c->local = true;
			if (rt->local(rt->local_arg, &c->req, on_local, c))
				return;
			c->local = false;
		}
		/* we are a member but cannot serve it: ask the others */
		c->tries++;
		c->target = pl->members[(size_t)g * pl->replicas + c->tries % pl->replicas];
		if (c->target == net_node_id(rt->net)) {
			again(c, SH_ENOTLEADER, RETRY_NS);
			return;
		}
	}
	o = (struct net_call_opts){ .timeout_ns =
					c->deadline - now < limit ? c->deadline - now : limit,
				    .retries = 1 };
	iov = (struct iovec){ c->body.p, c->body.len };
	rc = net_call(rt->net, c->target, NET_OP_META, &iov, 1, &o, on_reply, c, &c->h);
	if (rc < 0) {
		c->h = NULL;
		c->tries++;
		again(c, rc, RETRY_NS);
	}
}

static void
on_retry(struct env_timer *t)
{
	attempt(t->arg);
}

int
mroute_call(struct mroute *rt, const struct mp_req *req, uint64_t timeout_ns, mroute_cb cb,
	    void *arg)
{
	struct mcall *c = sh_calloc(1, sizeof(*c));
	int rc;

	if (c == NULL)
		return -ENOMEM;
	sh_enc_init(&c->body);
	rc = mp_req_encode(&c->body, req);
	if (rc == 0) {
		/* a private copy for the local handler: it may outlive the caller's */
		c->copy = sh_malloc(c->body.len);
		if (c->copy == NULL)
			rc = -ENOMEM;
		else
			memcpy(c->copy, c->body.p, c->body.len);
	}
	if (rc == 0)
		rc = mp_req_decode(c->copy, c->body.len, &c->req);
	if (rc < 0) {
		call_free(c);
		return rc;
	}
	c->rt = rt;
	c->cb = cb;
	c->arg = arg;
	c->deadline = env_now(rt->env) + timeout_ns;
	env_timer_init(rt->env, &c->retry, on_retry, c);
	/* the first attempt in a turn of its own: a local handler may answer at once,
	 * and the callback never runs before this returns (env/README.md) */
	rc = env_timer_arm(&c->retry, 0);
	if (rc < 0) {
		call_free(c);
		return rc;
	}
	sh_list_add_tail(&rt->calls, &c->link);
	return 0;
}
