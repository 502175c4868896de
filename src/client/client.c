// SPDX-License-Identifier: Apache-2.0
/* libshoal: connection, configuration following, requests to buckets (client_int.h). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../base/http.h"
#include "../env/env_real.h"
#include "../data/place.h"
#include "client_env.h"
#include "../cluster/client_info.h"
#include "client_int.h"

SH_LOG_FACILITY("client");

#define CFG_CALL_NS    (2000ull * 1000 * 1000)
#define PAUSED_WAIT_NS (50ull * 1000 * 1000) /* a paused filesystem asked again after */
#define CONNECT_WAIT_S 10
#define FORGET_NS      (300ull * 1000 * 1000)

enum cop_kind { COP_META = 1, COP_CALLS, COP_STOP, COP_CFG };

/* An operation handed to the loop. */
struct cop {
	struct sh_list link;
	sh_client *c;
	enum cop_kind kind;
	const struct mp_req *req;
	struct cres *res;
	struct dcall *calls; /* COP_CALLS */
	unsigned ncalls, pending;
	uint64_t timeout_ns;
	pthread_cond_t *wake; /* its waiter's own (under c->mu), once it waits */
	bool done;
};

struct dref {
	struct sh_list link; /* in c->inflight (the loop's) */
	struct cop *o;
	struct dcall *d;
	struct net_call *h;
};

static void
finish(struct cop *o)
{
	sh_client *c = o->c;

	pthread_mutex_lock(&c->mu);
	o->done = true;
	if (o->wake != NULL)
		pthread_cond_signal(o->wake); /* its waiter alone, not every caller's */
	pthread_mutex_unlock(&c->mu);
}

/* ---- the configuration ---- */

static void ask_cfg(sh_client *c);
static void on_recall(struct net_req *req, void *arg);
static void cancel_down(sh_client *c, const struct cfg *n);

static void
adopt(sh_client *c, const uint8_t *b, size_t len)
{
	struct cfg *n = cfg_new();
	int rc = n ? cfg_decode(b, len, n) : -ENOMEM;

	if (rc == 0 && n->epoch > mroute_cfg(c->rt)->epoch) {
		rc = mroute_set_cfg(c->rt, n);
		if (rc == 0) {
			struct sh_list *pos;

			pthread_mutex_lock(&c->mu);
			cfg_copy(c->view, n);
			sh_list_for_each (pos, &c->fss) {
				sh_fs *fs = sh_list_entry(pos, sh_fs, link);
				const struct cfg_fs *f = cfg_fs_by_id(n, fs->id);

				/* (a clone's origin restored: the clone's branch did not go back)
				 */
				if (f != NULL && fs->at == 0 && fs->branch == 0)
					fs->epoch = f->restore_epoch;
			}
			pthread_cond_broadcast(&c->cv);
			pthread_mutex_unlock(&c->mu);
			/* what we learned of the nodes' management addresses */
			for (uint32_t i = 0; i < n->nnodes; i++)
				net_peer_ensure(c->mnet, n->nodes[i].id, n->nodes[i].mgmt);
			if (!c->cfg_spread) {
				uint64_t ask = client_cfg_node(n, net_node_id(c->mnet));

				c->cfg_spread = ask != 0;
				c->cfg_node = ask ? ask : c->cfg_node;
			}
			cancel_down(c, n);
		}
	}
	if (rc < 0)
		sh_log_warn("configuration from node %llu: %s", (unsigned long long)c->cfg_node,
			    sh_strerror(rc));
	cfg_free(n);
}

uint64_t
client_cfg_node(const struct cfg *c, uint64_t key)
{
	uint32_t up = 0, pick;

	for (uint32_t i = 0; i < c->nnodes; i++)
		up += c->nodes[i].state == CFG_UP;
	if (up == 0)
		return 0;
	pick = (uint32_t)(sh_hash_u64(key) % up);
	for (uint32_t i = 0; i < c->nnodes; i++)
		if (c->nodes[i].state == CFG_UP && pick-- == 0)
			return c->nodes[i].id;
	return 0;
}

static void
on_cfg(void *arg, int status, const struct net_msg *reply)
{
	sh_client *c = arg;

	c->cfg_busy = false;
	if (c->stopping)
		return;
	if (status == 0 && reply != NULL && reply->len > 8) {
		adopt(c, reply->buf->data + reply->off + 8, reply->len - 8);
	} else if (status < 0) {
		/* ask another node next time */
		const struct cfg *v = mroute_cfg(c->rt);

		if (v->nnodes > 0)
			c->cfg_node = v->nodes[c->cfg_tries++ % v->nnodes].id;
	}
}

static void
ask_cfg(sh_client *c)
{
	struct net_call_opts o = { .timeout_ns = CFG_CALL_NS, .retries = 1 };
	uint64_t epoch = mroute_cfg(c->rt)->epoch;
	struct iovec iov = { &epoch, sizeof(epoch) };

	if (c->cfg_busy || c->cfg_node == 0)
		return;
	if (net_call(c->mnet, c->cfg_node, NET_OP_CLUSTER_CONFIG, &iov, 1, &o, on_cfg, c, NULL) ==
	    0)
		c->cfg_busy = true;
}

static void
on_info(void *arg, int status, const struct net_msg *reply)
{
	(void)arg;
	(void)status; /* said again in CINFO_EVERY_NS; an older node does not know it */
	(void)reply;
}

/* Tell the node we follow what this client is: its mode, transport and interfaces. */
static void
say_info(sh_client *c)
{
	struct net_call_opts o = { .timeout_ns = CFG_CALL_NS, .retries = 0 };
	struct cinfo ci = { .id = net_node_id(c->dnet), .mode = 0, .pid = (uint32_t)getpid() };
	uint64_t now = env_now(c->env);
	struct sh_enc e;

	if (c->cfg_node == 0 || (c->info_node == c->cfg_node && now - c->info_ns < CINFO_EVERY_NS))
		return;
	c->info_ns = now;
	c->info_node = c->cfg_node;
	snprintf(ci.transport, sizeof(ci.transport), "udp");
	gethostname(ci.host, sizeof(ci.host) - 1);
	for (unsigned i = 0; i < net_iface_slots(c->dnet) && ci.nifaces < CINFO_IFACES; i++) {
		struct net_iface ifc;

		static const uint8_t any[16];

		if (net_iface_get(c->dnet, i, &ifc) < 0 || memcmp(ifc.addr.ip, any, 16) == 0)
			continue; /* one socket on every address: no interface to name */
		if (strcmp(ifc.transport, "dpdk") == 0)
			snprintf(ci.transport, sizeof(ci.transport), "dpdk");
		env_addr_format(&ifc.addr, ci.ifaces[ci.nifaces].addr, sizeof(ci.ifaces[0].addr));
		snprintf(ci.ifaces[ci.nifaces].label, sizeof(ci.ifaces[0].label), "%s", ifc.label);
		ci.nifaces++;
	}
	sh_enc_init(&e);
	cinfo_encode(&e, &ci);
	if (!sh_enc_error(&e))
		net_call(c->mnet, c->cfg_node, NET_OP_CLIENT_INFO, &(struct iovec){ e.p, e.len }, 1,
			 &o, on_info, NULL, NULL);
	sh_enc_fini(&e);
}

static void
on_poll(struct env_timer *t)
{
	sh_client *c = t->arg;

	ask_cfg(c);
	say_info(c);
	env_timer_arm(&c->poll, CLIENT_CFG_POLL_NS);
}

/* ---- operations ---- */

static void
on_meta(void *arg, int status, const struct mp_reply *r)
{
	struct cop *o = arg;
	struct cres *res = o->res;

	res->status = status;
	if (r != NULL) {
		res->rep = *r;
		res->rep.data = NULL;
		if (r->dlen > 0) {
			res->data = sh_malloc(r->dlen);
			if (res->data == NULL) {
				res->status = status >= 0 ? -ENOMEM : status;
				res->rep.dlen = 0;
			} else {
				memcpy(res->data, r->data, r->dlen);
				res->rep.data = res->data;
			}
		}
	}
	if (status == -ENXIO || status == SH_EPAUSED)
		ask_cfg(o->c); /* a replica says our configuration is stale (or paused: restored) */
	finish(o);
}

static void
on_dcall(void *arg, int status, const struct net_msg *reply)
{
	struct dref *r = arg;
	struct dcall *d = r->d;
	struct cop *o = r->o;

	d->status = d->peer_down && status == -ECANCELED ? -EHOSTDOWN : status;
	if (status >= 0 && reply != NULL) {
		d->got = reply->len < d->cap ? reply->len : d->cap;
		if (d->got)
			memcpy(d->out, reply->buf->data + reply->off, d->got);
	}
	sh_list_del(&r->link);
	sh_free(r);
	if (--o->pending == 0)
		finish(o);
}

/*
 * A newer configuration marks nodes down: the data calls in flight to them
 * end now (-EHOSTDOWN) rather than at their timeout, so a writer places its
 * stripe again at once around them (the kill -9 of a backend: stalls of
 * one timeout per attempt, up to 11 s through a mount, before).
 */
static void
cancel_down(sh_client *c, const struct cfg *n)
{
	struct sh_list *pos, *tmp;

	sh_list_for_each_safe (pos, tmp, &c->inflight) {
		struct dref *r = sh_list_entry(pos, struct dref, link);
		const struct cfg_node *node = cfg_node_find(n, r->d->peer >> 8);

		if (node != NULL && cfg_node_down(node) && r->h != NULL) {
			struct net_call *h = r->h;

			r->h = NULL; /* once: its callback comes later */
			r->d->peer_down = true;
			net_call_cancel(h);
		}
	}
}

/* d's call: its bytes copied into the message, or sent from their buffer (zbuf). */
static int
dcall_start(sh_client *c, struct dcall *d, const struct net_call_opts *opts, struct dref *r)
{
	struct sh_iov v;
	int rc;

	if (d->zbuf == NULL)
		return net_call(c->dnet, d->peer, d->op, d->iov, d->niov, opts, on_dcall, r, &r->h);
	sh_iov_init(&v);
	rc = sh_iov_append(&v, d->zbuf, d->zoff, d->iov[0].iov_len);
	for (int i = 1; rc == 0 && i < d->niov; i++) { /* the header after the bytes: copied */
		struct sh_buf *h = sh_buf_create(d->iov[i].iov_len, 0);

		if (h == NULL) {
			rc = -ENOMEM;
			break;
		}
		memcpy(h->data, d->iov[i].iov_base, d->iov[i].iov_len);
		rc = sh_iov_append(&v, h, 0, d->iov[i].iov_len);
		sh_buf_put(h);
	}
	if (rc == 0)
		rc = net_call_zc(c->dnet, d->peer, d->op, &v, opts, on_dcall, r, &r->h);
	sh_iov_fini(&v);
	return rc;
}

static void
start_calls(sh_client *c, struct cop *o)
{
	struct net_call_opts opts = { .timeout_ns = o->timeout_ns, .retries = 1 };

	unsigned n = o->ncalls;

	/* one count held until every call is made: o is the caller's and goes with finish */
	o->pending = n + 1;
	for (unsigned i = 0; i < n; i++) {
		struct dcall *d = &o->calls[i];
		struct dref *r = NULL;
		int rc = -EHOSTDOWN;

		if (d->peer != 0) { /* peer 0: known not to be reachable, its status stays */
			r = sh_calloc(1, sizeof(*r));
			rc = r ? net_peer_ensure(c->dnet, d->peer, d->addr) : -ENOMEM;
			if (rc == 0) {
				r->o = o;
				r->d = d;
				sh_list_add_tail(&c->inflight, &r->link);
				rc = dcall_start(c, d, &opts, r);
				if (rc < 0)
					sh_list_del(&r->link);
			}
			if (rc < 0) {
				sh_free(r);
				d->status = rc;
			}
		}
		if (rc < 0)
			o->pending--;
	}
	if (--o->pending == 0)
		finish(o);
}

static void
on_wake(struct env_async *a)
{
	sh_client *c = a->arg;

	for (;;) {
		struct cop *o = NULL;
		struct sh_list *l;
		int rc;

		pthread_mutex_lock(&c->mu);
		l = sh_list_pop(&c->q);
		if (l)
			o = sh_list_entry(l, struct cop, link);
		pthread_mutex_unlock(&c->mu);
		if (o == NULL)
			break;
		if (o->kind == COP_STOP) {
			c->stopping = true;
			env_timer_cancel(&c->poll);
			finish(o);
			if (c->drive == NULL)
				env_real_stop(c->env);
			continue;
		}
		if (o->kind == COP_CALLS) {
			start_calls(c, o);
			continue;
		}
		if (o->kind == COP_CFG) {
			ask_cfg(c); /* now, not at the next poll */
			finish(o);
			continue;
		}
		rc = mroute_call(c->rt, o->req, c->timeout_ns, on_meta, o);
		if (rc < 0) {
			o->res->status = rc;
			finish(o);
		}
	}
}

struct cops {
	struct cop *o;
	unsigned n;
};

static bool
cops_done(void *arg)
{
	const struct cops *w = arg;

	for (unsigned i = 0; i < w->n; i++)
		if (!w->o[i].done)
			return false;
	return true;
}

static bool
never(void *arg)
{
	(void)arg;
	return false;
}

/*
 * Until the n operations at o are done: signalled by the loop thread, or,
 * on a caller's env, the world driven until they are (each has a timeout
 * of its own, so a world that runs dry first is a simulator's deadlock).
 * Each waiter sleeps on a condition of its own, which the loop signals as
 * its operations end: one shared by every caller had each end wake all
 * of them (32 threads reading at queue depth 32: 31 woken for nothing).
 */
static void
wait_cops(sh_client *c, struct cop *o, unsigned n)
{
	struct cops w = { o, n };
	pthread_cond_t wake;

	if (c->drive != NULL) {
		if (!c->drive(c->world, cops_done, &w, 3600 * SH_NSEC_PER_SEC)) {
			sh_log_error("a call on the caller's env never ended");
			abort();
		}
		return;
	}
	pthread_cond_init(&wake, NULL);
	pthread_mutex_lock(&c->mu);
	for (unsigned i = 0; i < n; i++)
		o[i].wake = &wake;
	while (!cops_done(&w))
		pthread_cond_wait(&wake, &c->mu);
	pthread_mutex_unlock(&c->mu);
	/* (each operation ends once, under c->mu: none signals it from now on) */
	pthread_cond_destroy(&wake);
}

/* Hand an operation to the loop and wait for it. */
static void
run(sh_client *c, struct cop *o)
{
	o->c = c;
	pthread_mutex_lock(&c->mu);
	sh_list_add_tail(&c->q, &o->link);
	pthread_mutex_unlock(&c->mu);
	env_async_send(&c->wake);
	wait_cops(c, o, 1);
}

void
client_sleep(sh_client *c, uint64_t ns)
{
	struct timespec d = { (time_t)(ns / SH_NSEC_PER_SEC), (long)(ns % SH_NSEC_PER_SEC) };

	if (c->drive != NULL)
		c->drive(c->world, never, NULL, ns);
	else
		nanosleep(&d, NULL);
}

bool
client_driven(const sh_client *c)
{
	return c->drive != NULL;
}

void
client_metas(sh_client *c, const struct mp_req *req, struct cres *res, unsigned n)
{
	struct cop *o = n ? sh_calloc(n, sizeof(*o)) : NULL;

	if (o == NULL) {
		/* no memory for them all at once: one after the other */
		for (unsigned i = 0; i < n; i++)
			client_meta(c, &req[i], &res[i]);
		return;
	}
	pthread_mutex_lock(&c->mu);
	for (unsigned i = 0; i < n; i++) {
		memset(&res[i], 0, sizeof(res[i]));
		o[i] = (struct cop){ .c = c, .kind = COP_META, .req = &req[i], .res = &res[i] };
		sh_list_add_tail(&c->q, &o[i].link);
	}
	pthread_mutex_unlock(&c->mu);
	env_async_send(&c->wake);
	wait_cops(c, o, n);
	sh_free(o);
	for (unsigned i = 0; i < n; i++)
		if (res[i].status == SH_EPAUSED) { /* (client_meta waits the pause out) */
			cres_fini(&res[i]);
			client_meta(c, &req[i], &res[i]);
		}
}

/* Filesystem id's restores as this client's configuration says; *paused: one is under way. */
static uint32_t
restores_of(sh_client *c, uint32_t id, bool *paused)
{
	const struct cfg_fs *f;
	uint32_t e;

	pthread_mutex_lock(&c->mu);
	f = cfg_fs_by_id(c->view, id);
	e = f != NULL ? f->restore_epoch : 0;
	*paused = f != NULL && f->restore_phase != CFG_RESTORE_NONE;
	pthread_mutex_unlock(&c->mu);
	return e;
}

/*
 * What an open file's handle does (docs/snapshots.md "Restore"): map or
 * fetch its extents, write its inline bytes, change its size, hold it.
 * One that met a restore answers -ESTALE: sent again after it, it would
 * land on the restored file.
 */
static bool
handle_bound(const struct mp_req *req)
{
	uint8_t op = req->kind == MP_CMD ? meta_cmd_op_of(req->data, req->dlen) : 0;

	return req->kind == MP_EXTENTS || req->kind == MP_HOLD || op == META_OP_EXTENT ||
	       op == META_OP_INLINE || op == META_OP_SETATTR;
}

int
client_meta(sh_client *c, const struct mp_req *req, struct cres *res)
{
	bool paused;
	uint32_t e0 = restores_of(c, req->fs, &paused);

	for (;;) {
		struct cop o = { .kind = COP_META, .req = req, .res = res };
		uint32_t e;

		memset(res, 0, sizeof(*res));
		run(c, &o);
		if (res->status != SH_EPAUSED)
			return res->status;
		/* being restored: waited out, as NFS's hard mounts wait out a server's restart,
		 * until this client's configuration says it serves again (the refusal asked for
		 * it); then asked again, unless it is a handle's and a restore came between */
		cres_fini(res);
		do {
			client_sleep(c, PAUSED_WAIT_NS);
			e = restores_of(c, req->fs, &paused);
		} while (paused);
		if (e != e0 && handle_bound(req)) {
			memset(res, 0, sizeof(*res));
			res->status = -ESTALE;
			return -ESTALE;
		}
	}
}

void
client_calls(sh_client *c, struct dcall *calls, unsigned n, uint64_t timeout_ns)
{
	struct cop o = { .kind = COP_CALLS, .calls = calls, .ncalls = n, .timeout_ns = timeout_ns };

	run(c, &o);
}

void
cres_fini(struct cres *r)
{
	sh_free(r->data);
	r->data = NULL;
}

uint64_t
client_tag(sh_client *c)
{
	uint64_t n = __atomic_add_fetch(&c->tag_ctr, 1, __ATOMIC_RELAXED);

	return (c->tag_seed ^ (n * 0x9E3779B97F4A7C15ull)) | 1;
}

/* ---- connecting ---- */

static void *
loop_main(void *arg)
{
	sh_client *c = arg;

	sh_log_set_tag("shoal-client");
	env_real_run(c->env);
	return NULL;
}

/* Ask a management address who it is (the admin API's status). */
static int
node_at(const char *addr, uint64_t *id)
{
	char *body = NULL;
	json_t *j, *node;
	int rc = sh_http_call(addr, NULL, "GET", "/v1/status", NULL, &body, 5);

	if (rc != 200) {
		free(body);
		return rc < 0 ? rc : -EPROTO;
	}
	j = json_loads(body, 0, NULL);
	free(body);
	node = j ? json_object_get(j, "node") : NULL;
	rc = json_is_object(node) && json_is_integer(json_object_get(node, "id")) ? 0 : -EPROTO;
	if (rc == 0)
		*id = (uint64_t)json_integer_value(json_object_get(node, "id"));
	json_decref(j);
	return rc;
}

/*
 * A client endpoint: one socket on every address (the kernel's routes pick
 * the interface), or, for the data network, the interfaces SHOAL_DATA_IFACES
 * names ("IP[/LABEL],IP[/LABEL]", each bound at a port of its own; one
 * on DPDK, "IP/LABEL@dpdk:DEV", where the program started the EAL:
 * SHOAL_DPDK for the shoal command), so
 * that the client has a path per interface pair to each backend and
 * fails over and shares traffic as the nodes do (docs/networking.md).
 */
static int
endpoint(sh_client *c, uint64_t id, bool data, struct net **out)
{
	struct net_iface ifc[8] = { 0 };
	struct net_config nc = { .node_id = id, .ifaces = ifc, .nifaces = 1 };
	struct env *env = c->env;
	const char *want = data ? getenv("SHOAL_DATA_IFACES") : NULL;
	int rc;

	if (want != NULL && *want != '\0') {
		rc = net_ifaces_parse(want, ifc, SH_ARRAY_SIZE(ifc));
		if (rc < 0) {
			sh_log_error("SHOAL_DATA_IFACES='%s' is not IP[/LABEL][@dpdk:DEV][,...]",
				     want);
			return rc;
		}
		nc.nifaces = (unsigned)rc;
	} else {
		rc = env_addr_parse("0.0.0.0:0", &ifc[0].addr);
		if (rc < 0)
			return rc;
	}
	if (c->key_id != 0) {
		/* its datagrams, and the backends' to it, under its key (net/auth.h) */
		nc.auth_key = c->key;
		nc.auth_key_id = c->key_id;
	}
	return net_create(env, &nc, out);
}

static void
destroy(sh_client *c)
{
	if (c->rt)
		mroute_cancel_all(c->rt);
	if (c->dnet)
		net_destroy(c->dnet);
	if (c->mnet)
		net_destroy(c->mnet);
	if (c->rt)
		mroute_destroy(c->rt);
	env_async_fini(&c->wake);
	if (c->drive == NULL)
		env_real_destroy(c->env);
	cfg_free(c->view);
	pthread_mutex_destroy(&c->mu);
	pthread_cond_destroy(&c->cv);
	explicit_bzero(c->key, sizeof(c->key));
	sh_free(c->fs_key_file);
	sh_free(c);
}

static bool
cfg_created(void *arg)
{
	return ((sh_client *)arg)->view->created;
}

/*
 * The client's env (made here when env is NULL, with the loop thread that
 * runs it), its endpoints and its first configuration, asked of node at
 * addr (a management address).
 */
static int
start(sh_client *c, struct env *env, uint64_t node, const char *addr)
{
	struct env_real_opts eo = { .mode = ENV_REAL_EVENT, .name = "shoal-client" };
	uint64_t id;
	int rc;

	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->cv, NULL);
	sh_list_init(&c->q);
	sh_list_init(&c->inflight);
	sh_list_init(&c->fss);
	c->view = cfg_new();
	c->env = env != NULL ? env : env_real_create(&eo);
	if (c->view == NULL || c->env == NULL) {
		cfg_free(c->view);
		if (c->env && env == NULL)
			env_real_destroy(c->env);
		pthread_mutex_destroy(&c->mu);
		pthread_cond_destroy(&c->cv);
		explicit_bzero(c->key, sizeof(c->key));
		sh_free(c->fs_key_file);
		sh_free(c);
		return -ENOMEM;
	}
	/* client endpoints: random ids with the top bit set, never a node's */
	id = env_random_u64(c->env) | 1ull << 63;
	c->tag_seed = env_random_u64(c->env);
	rc = env_async_init(c->env, &c->wake, on_wake, c);
	if (rc == 0)
		rc = endpoint(c, id, false, &c->mnet);
	if (rc == 0)
		rc = endpoint(c, id ^ 1, true, &c->dnet);
	if (rc == 0)
		rc = mroute_create(c->dnet, &c->rt);
	if (rc == 0)
		rc = net_handle(c->dnet, NET_OP_META_RECALL, on_recall, c);
	if (rc == 0)
		rc = net_peer_ensure(c->mnet, node, addr);
	if (rc < 0) {
		destroy(c);
		return rc;
	}
	c->cfg_node = node;
	env_timer_init(c->env, &c->poll, on_poll, c);
	env_timer_arm(&c->poll, 0);
	if (c->drive != NULL) {
		c->drive(c->world, cfg_created, c, CONNECT_WAIT_S * SH_NSEC_PER_SEC);
	} else {
		struct timespec until;

		rc = pthread_create(&c->th, NULL, loop_main, c);
		if (rc != 0) {
			destroy(c);
			return -rc;
		}
		/* wait for the first configuration */
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += CONNECT_WAIT_S;
		pthread_mutex_lock(&c->mu);
		while (!c->view->created && rc == 0)
			rc = pthread_cond_timedwait(&c->cv, &c->mu, &until);
		pthread_mutex_unlock(&c->mu);
	}
	if (!c->view->created) {
		bool keyed = c->key_id != 0, sim = c->drive != NULL;

		sh_client_close(c); /* (c is gone) */
		if (rc != ETIMEDOUT && !sim)
			return -ENOTCONN;
		/*
		 * the node answered its admin API (node_at), and its endpoint never a
		 * datagram: one under a key it does not hold is dropped unanswered
		 * (docs/security.md)
		 */
		return keyed ? -EKEYREJECTED : -ETIMEDOUT;
	}
	return 0;
}

static bool
opts_ok(const struct sh_client_opts *opts)
{
	return opts == NULL || opts->frag_kb == 0 ||
	       (opts->frag_kb >= 4 && opts->frag_kb <= 2048 && opts->frag_kb % 4 == 0);
}

/*
 * A new client of these options (the env and its world not yet set): NULL,
 * and in rc -EINVAL, or the key's error. env: its key may come from the
 * environment (a real client; the simulator's take only opts->key_file).
 */
static sh_client *
client_new(const struct sh_client_opts *opts, bool env, int *rc)
{
	const char *file = opts && opts->key_file && *opts->key_file ? opts->key_file : NULL;
	sh_client *c;

	*rc = opts_ok(opts) ? -ENOMEM : -EINVAL;
	if (*rc == -EINVAL)
		return NULL;
	c = sh_calloc(1, sizeof(*c));
	if (c == NULL)
		return NULL;
	/* its key (docs/security.md, "Clients' keys"): given, or from the environment */
	*rc = file != NULL || env ? sh_key_find(file, &c->key_id, c->key) : 0;
	if (*rc < 0) {
		sh_log_error("the client's key (%s): %s",
			     file != NULL				   ? file
			     : getenv("SHOAL_KEY") && *getenv("SHOAL_KEY") ? "$SHOAL_KEY"
									   : "$SHOAL_KEY_FILE",
			     *rc == -EINVAL  ? "not a key (sk1.ID.HEX)"
			     : *rc == -EPERM ? "others may read it (chmod 600 it)"
					     : sh_strerror(*rc));
		sh_free(c);
		return NULL;
	}
	*rc = -ENOMEM;
	c->fs_key_env = env;
	if (opts && opts->fs_key_file && *opts->fs_key_file &&
	    (c->fs_key_file = sh_strdup(opts->fs_key_file)) == NULL) {
		explicit_bzero(c->key, sizeof(c->key));
		sh_free(c);
		return NULL;
	}
	c->timeout_ns = (opts && opts->timeout_ms ? opts->timeout_ms : 30000) * 1000000ull;
	c->frag = (opts && opts->frag_kb ? opts->frag_kb : 128) * 1024u;
	*rc = 0;
	return c;
}

int
sh_client_connect(const char *mgmt, const struct sh_client_opts *opts, sh_client **out)
{
	char addr[CFG_ADDR_MAX];
	const char *p = mgmt;
	int rc = -EINVAL, started = 0;

	if (!opts_ok(opts))
		return -EINVAL;
	/* the first address that answers, and gives its configuration */
	while (p != NULL && *p) {
		const char *comma = strchr(p, ',');
		size_t n = comma ? (size_t)(comma - p) : strlen(p);
		uint64_t node = 0;
		sh_client *c;

		if (n == 0 || n >= sizeof(addr)) {
			p = comma ? comma + 1 : NULL;
			continue;
		}
		memcpy(addr, p, n);
		addr[n] = '\0';
		p = comma ? comma + 1 : NULL;
		rc = node_at(addr, &node);
		if (rc < 0)
			continue;
		c = client_new(opts, true, &rc);
		if (c == NULL)
			return rc;
		started = start(c, NULL, node, addr);
		if (started == 0) {
			*out = c;
			return 0;
		}
		/*
		 * It answered, then gave no configuration. Killed meanwhile (it no
		 * longer answers): the next address. Still there: the failure is
		 * ours (a key it does not hold), and another node would say the same.
		 */
		if (node_at(addr, &node) == 0)
			return started;
		sh_log_warn("node %llu at %s went away before it gave its configuration: trying "
			    "the next address",
			    (unsigned long long)node, addr);
	}
	if (started < 0)
		return -ETIMEDOUT; /* the last that answered went away */
	return rc == -EINVAL ? -EINVAL : rc == -EPROTO ? -EPROTO : -ECONNREFUSED;
}

int
sh_client_connect_env(const struct sh_client_env *e, const struct sh_client_opts *opts,
		      sh_client **out)
{
	sh_client *c;
	int rc;

	if (e == NULL || e->env == NULL || e->drive == NULL || e->node == 0 || e->mgmt == NULL ||
	    out == NULL)
		return -EINVAL;
	c = client_new(opts, false, &rc);
	if (c == NULL)
		return rc;
	c->drive = e->drive;
	c->world = e->world;
	rc = start(c, e->env, e->node, e->mgmt);
	if (rc == 0)
		*out = c;
	return rc;
}

/*
 * The cache leases this client holds are given back (MP_FORGET at every
 * node, for every filesystem it opened): a change to what it cached need
 * not wait for a recall it would never answer (up to a lease, 1 s).
 */
static void
forget_all(sh_client *c)
{
	unsigned nn, nf, n = 0;
	struct dcall *calls;
	struct sh_enc *e;

	pthread_mutex_lock(&c->mu);
	nn = c->view->nnodes;
	nf = c->nused_fs;
	calls = sh_calloc((size_t)nn * nf + 1, sizeof(*calls));
	e = sh_calloc(nf + 1, sizeof(*e));
	for (unsigned f = 0; calls != NULL && e != NULL && f < nf; f++) {
		struct mp_req q = { .kind = MP_FORGET, .fs = c->used_fs[f] };

		sh_enc_init(&e[f]);
		if (mp_req_encode(&e[f], &q) < 0)
			continue;
		for (unsigned i = 0; i < nn; i++) {
			const struct cfg_node *node = &c->view->nodes[i];
			struct dcall *d = &calls[n];

			if (node->state != CFG_UP)
				continue;
			d->peer = mplace_endpoint(node->id);
			snprintf(d->addr, sizeof(d->addr), "%s", node->data);
			d->op = NET_OP_META;
			d->iov[0] = (struct iovec){ e[f].p, e[f].len };
			d->niov = 1;
			n++;
		}
	}
	pthread_mutex_unlock(&c->mu);
	if (n > 0)
		client_calls(c, calls, n,
			     FORGET_NS); /* a node that does not answer: its leases run out */
	for (unsigned f = 0; e != NULL && f < nf; f++)
		sh_enc_fini(&e[f]);
	sh_free(e);
	sh_free(calls);
}

void
sh_client_close(sh_client *c)
{
	struct cop o = { .kind = COP_STOP };

	if (c == NULL)
		return;
	forget_all(c);
	run(c, &o);
	if (c->drive == NULL)
		pthread_join(c->th, NULL);
	destroy(c);
}

/*
 * Filesystem *id a writable clone? Then *id becomes its origin's and
 * *branch its branch (else 0). A clone being created is waited for as a
 * snapshot is (it serves once every group of its origin does: -EAGAIN
 * after a second); one being deleted is -ENOENT.
 */
static int
clone_lookup(sh_client *c, uint32_t *id, uint16_t *branch)
{
	const struct cfg_fs *f;
	int rc = 0;

	pthread_mutex_lock(&c->mu);
	f = cfg_fs_by_id(c->view, *id);
	*branch = 0;
	if (f == NULL)
		rc = -ENOENT;
	else if (f->origin != 0 && f->clone_state == CFG_CLONE_CREATING)
		rc = -EAGAIN;
	else if (f->origin != 0 && f->clone_state != CFG_CLONE_READY)
		rc = -ENOENT;
	else if (f->origin != 0) {
		*id = f->origin;
		*branch = f->branch;
	}
	pthread_mutex_unlock(&c->mu);
	return rc;
}

/*
 * client_snap_lookup, and when the snapshot is not known here or not ready
 * yet, the configuration asked for at once and the answer waited for (up
 * to a second): one created a moment ago opens.
 */
/* The configuration asked for at once; a newer one, or 50 ms, waited for. */
static void
cfg_refresh(sh_client *c)
{
	struct cop o = { .kind = COP_CFG };
	struct timespec until;
	uint64_t epoch;

	pthread_mutex_lock(&c->mu);
	epoch = c->view->epoch;
	pthread_mutex_unlock(&c->mu);
	run(c, &o);
	/* (the node asked may lag too: asked again by the caller) */
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_nsec += 50 * 1000 * 1000;
	if (until.tv_nsec >= 1000000000) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&c->mu);
	while (c->view->epoch == epoch &&
	       pthread_cond_timedwait(&c->cv, &c->mu, &until) != ETIMEDOUT)
		;
	pthread_mutex_unlock(&c->mu);
}

int
client_snap_lookup_fresh(sh_client *c, uint32_t id, const char *snap, uint64_t *ver)
{
	uint64_t end = sh_clock_mono_ns() + SH_NSEC_PER_SEC;
	int rc;

	while ((rc = client_snap_lookup(c, id, snap, ver)) == -ENOENT || rc == -EAGAIN) {
		if (client_driven(c) || sh_clock_mono_ns() >= end)
			break;
		cfg_refresh(c);
	}
	return rc;
}

/* clone_lookup, a clone being created waited for (up to a second) as a snapshot is. */
static int
clone_lookup_fresh(sh_client *c, uint32_t *id, uint16_t *branch)
{
	uint64_t end = sh_clock_mono_ns() + SH_NSEC_PER_SEC;
	uint32_t was = *id;
	int rc;

	while ((rc = clone_lookup(c, id, branch)) == -EAGAIN) {
		if (client_driven(c) || sh_clock_mono_ns() >= end)
			break;
		cfg_refresh(c);
		*id = was;
	}
	return rc;
}

/*
 * Whether snapshot `name` (FS@NAME; FS's id, the snapshot's version at) is
 * a writable one: its clone's id into *wid (config.h CFG_SNAP_WRITABLE).
 */
static bool
writable_of(sh_client *c, const char *name, uint32_t id, uint64_t at, uint32_t *wid)
{
	const struct cfg_fs *f;

	pthread_mutex_lock(&c->mu);
	f = cfg_fs_find(c->view, name);
	*wid = f != NULL && f->origin == id && f->base == at ? f->id : 0;
	pthread_mutex_unlock(&c->mu);
	return *wid != 0;
}

int
sh_fs_open(sh_client *c, const char *name, sh_fs **out)
{
	char fsname[CFG_NAME_MAX];
	const char *snap = strchr(name, '@');
	uint64_t at = 0;
	uint16_t branch = 0;
	uint32_t id, nb, wid;
	sh_fs *fs;
	int rc;

	if (snap != NULL && (snap == name || (size_t)(snap - name) >= sizeof(fsname) ||
			     snap[1] == '\0' || strlen(snap + 1) >= CFG_NAME_MAX))
		return -ENOENT;
	snprintf(fsname, sizeof(fsname), "%.*s", snap ? (int)(snap - name) : CFG_NAME_MAX - 1,
		 name);
	rc = client_fs_lookup(c, fsname, &id, &nb);
	if (rc == 0)
		rc = clone_lookup_fresh(c, &id, &branch);
	if (rc == 0 && snap != NULL)
		rc = branch ? -ENOENT : client_snap_lookup_fresh(c, id, snap + 1, &at);
	/* a writable snapshot: its clone (named FS@NAME, made with it), read-write */
	if (rc == 0 && snap != NULL && writable_of(c, name, id, at, &wid)) {
		id = wid;
		at = 0;
		rc = clone_lookup_fresh(c, &id, &branch);
	}
	if (rc < 0)
		return rc;
	fs = sh_calloc(1, sizeof(*fs));
	if (fs == NULL)
		return -ENOMEM;
	fs->c = c;
	fs->id = id;
	fs->at = at;
	fs->branch = branch;
	/* a clone's commands: at its branch's version */
	atomic_store(&fs->ver_seen, branch ? (uint64_t)branch << META_BRANCH_SHIFT | 1 : 0);
	pthread_mutex_lock(&c->mu);
	{
		unsigned i = 0;

		while (i < c->nused_fs && c->used_fs[i] != id)
			i++;
		if (i == c->nused_fs && i < sizeof(c->used_fs) / sizeof(c->used_fs[0]))
			c->used_fs[c->nused_fs++] = id;
	}
	pthread_mutex_unlock(&c->mu);
	fs->nbuckets = nb;
	pthread_mutex_init(&fs->wmu, NULL);
	pthread_mutex_init(&fs->qmu, NULL);
	pthread_mutex_init(&fs->lmu, NULL);
	rc = cache_init(fs);
	if (rc == 0 && (rc = client_holds_init(fs)) < 0)
		cache_fini(fs);
	if (rc < 0) {
		sh_free(fs);
		return rc;
	}
	{
		unsigned d, p, comp = 0;

		rc = client_fs_settings(c, id, &d, &p, &comp, &fs->dedup, &fs->quota);
		if (rc == 0)
			rc = ec_code_init(&fs->code, d, p);
		if (rc == 0)
			rc = client_fs_keys(c, id, fsname, &fs->keys);
		fs->comp = (uint8_t)comp;
		if (rc < 0) {
			client_holds_fini(fs);
			cache_fini(fs);
			sh_free(fs);
			return rc;
		}
	}
	pthread_mutex_lock(&c->mu);
	sh_list_add_tail(&c->fss, &fs->link);
	{
		const struct cfg_fs *f = at == 0 && branch == 0 ? cfg_fs_by_id(c->view, id) : NULL;

		fs->epoch = f != NULL ? f->restore_epoch : 0;
	}
	pthread_mutex_unlock(&c->mu);
	snprintf(fs->name, sizeof(fs->name), "%s", name);
	if (c->drive == NULL) {
		/* whether the cluster lets this client in (its key: docs/security.md) */
		struct stat st;

		if (sh_getattr(fs, SH_ROOT_INO, &st) == -EACCES) {
			sh_fs_close(fs);
			return -EACCES;
		}
	}
	*out = fs;
	return 0;
}

void
sh_fs_close(sh_fs *fs)
{
	if (fs == NULL)
		return;
	wpool_stop(fs);
	client_holds_fini(fs); /* what is still open is given back */
	pthread_mutex_lock(&fs->c->mu);
	sh_list_del(&fs->link);
	pthread_mutex_unlock(&fs->c->mu);
	cache_fini(fs);
	client_locs_fini(fs);
	pthread_mutex_destroy(&fs->wmu);
	pthread_mutex_destroy(&fs->qmu);
	if (fs->keys)
		seal_keys_wipe(fs->keys);
	sh_free(fs->keys);
	sh_free(fs);
}

static void
drop_key(void *arg, uint32_t fsid, const struct mp_key *k)
{
	sh_client *c = arg;
	struct sh_list *pos;

	sh_list_for_each (pos, &c->fss) {
		sh_fs *fs = sh_list_entry(pos, sh_fs, link);

		if (fs->id == fsid)
			cache_drop(fs, k);
	}
}

/* A leader recalls what it let us cache (mp_recall_decode). */
static void
on_recall(struct net_req *req, void *arg)
{
	sh_client *c = arg;
	const struct net_msg *m = net_req_body(req);
	int rc;

	pthread_mutex_lock(&c->mu);
	rc = mp_recall_decode(m->buf->data + m->off, m->len, drop_key, c);
	pthread_mutex_unlock(&c->mu);
	net_reply(req, rc < 0 ? -EINVAL : 0, NULL, 0);
}
