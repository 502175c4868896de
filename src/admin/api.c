// SPDX-License-Identifier: Apache-2.0
/* The admin JSON API routes (api.h). */
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/alloc.h"
#include "../base/http.h"
#include "../base/secret.h"
#include "api_int.h"

SH_LOG_FACILITY("admin.api");

unsigned
admin_http_status(int err)
{
	switch (err) {
	case 0:
		return 200;
	case -EINVAL:
	case -EBADMSG:
		return 400;
	case -ENOENT:
		return 404;
	case -EEXIST:
	case -EALREADY:
	case -EBUSY:
	case -ESTALE: /* a change over what another one changed first */
		return 409;
	case -ENOSPC:
		return 422;
	case -ETIMEDOUT:
	case -EAGAIN:
	case -ENOTCONN:
	case -ESHUTDOWN:
		return 503;
	case -EOPNOTSUPP: /* not built yet (docs say what) */
		return 501;
	default:
		return 500;
	}
}

void
admin_reply_json(struct admin_req *req, unsigned status, json_t *j)
{
	char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;

	if (s == NULL) {
		admin_reply(req, 500, NULL, "{\"error\":\"out of memory\"}\n", 26);
	} else {
		size_t n = strlen(s);
		char *b = malloc(n + 2);

		if (b != NULL) {
			memcpy(b, s, n);
			b[n] = '\n';
			admin_reply(req, status, NULL, b, n + 1);
			free(b);
		} else {
			admin_reply(req, status, NULL, s, n);
		}
		free(s);
	}
	json_decref(j);
}

void
admin_reply_err(struct admin_req *req, int err, const char *msg)
{
	json_t *j = json_pack("{s:s, s:s}", "error", msg && *msg ? msg : sh_strerror(err), "code",
			      sh_errname(err));
	admin_reply_json(req, admin_http_status(err), j);
}

/* ---- views ---- */

static const char *
state_name(uint8_t s)
{
	return s == CFG_UP ? "up" : s == CFG_DOWN ? "down" : s == CFG_DATA_DOWN ? "data-down" : "?";
}

static bool
is_voter(const struct cluster_info *ci, uint64_t id)
{
	for (unsigned i = 0; i < ci->nvoters; i++)
		if (ci->voters[i] == id)
			return true;
	return false;
}

static json_t *
nodes_json(const struct cfg *c, const struct cluster_info *ci)
{
	json_t *a = json_array();

	for (uint32_t i = 0; i < c->nnodes; i++) {
		const struct cfg_node *n = &c->nodes[i];
		json_t *nets = json_array();
		unsigned drives = 0;
		uint64_t cap = 0;

		for (unsigned k = 0; k < n->nnets; k++)
			json_array_append_new(nets, json_pack("{s:s, s:s}", "addr", n->nets[k].addr,
							      "label", n->nets[k].label));
		for (uint32_t k = 0; k < c->ndrives; k++)
			if (c->drives[k].node == n->id) {
				drives++;
				cap += c->drives[k].capacity;
			}
		json_array_append_new(
		    a, json_pack("{s:I, s:s, s:s, s:s, s:s, s:I, s:b, s:b, s:i, s:I, s:o}", "id",
				 (json_int_t)n->id, "mgmt", n->mgmt, "data", n->data, "domain",
				 n->domain, "state", state_name(n->state), "since",
				 (json_int_t)(n->since / 1000000000), "voter", is_voter(ci, n->id),
				 "leader", ci->leader == n->id, "drives", (int)drives, "capacity",
				 (json_int_t)cap, "nets", nets));
	}
	return a;
}

static json_t *
drives_json(const struct cfg *c)
{
	static const char *const st[] = { [CFG_TGT_UP] = "up",
					  [CFG_TGT_DOWN] = "down",
					  [CFG_TGT_LOST] = "lost",
					  [CFG_TGT_DRAINING] = "draining" };
	static const char *const ds[] = { [CFG_DRIVE_ACTIVE] = "active",
					  [CFG_DRIVE_FAILED] = "failed",
					  [CFG_DRIVE_DRAINING] = "draining" };
	uint64_t now = sh_clock_real_ns();
	json_t *a = json_array();

	for (uint32_t i = 0; i < c->ndrives; i++)
		json_array_append_new(
		    a, json_pack("{s:I, s:I, s:s, s:I, s:s, s:s}", "id",
				 (json_int_t)c->drives[i].id, "node", (json_int_t)c->drives[i].node,
				 "path", c->drives[i].path, "capacity",
				 (json_int_t)c->drives[i].capacity, "state", ds[c->drives[i].state],
				 "target", st[cfg_target_state(c, c->drives[i].id, now)]));
	return a;
}

static json_t *
nets_json(const struct cfg *c)
{
	json_t *a = json_array();

	for (uint32_t i = 0; i < c->nnodes; i++)
		for (unsigned k = 0; k < c->nodes[i].nnets; k++)
			json_array_append_new(a, json_pack("{s:I, s:s, s:s}", "node",
							   (json_int_t)c->nodes[i].id, "addr",
							   c->nodes[i].nets[k].addr, "label",
							   c->nodes[i].nets[k].label));
	return a;
}

/*
 * What filesystem fs's snapshots hold in the groups this node leads:
 * {"VERSION": bytes only that snapshot reads} (docs/snapshots.md, "Space").
 */
static json_t *
snaps_usage_json(const struct msvc_group_info *gi, unsigned n, uint32_t fs)
{
	json_t *o = json_object();

	for (unsigned i = 0; i < n; i++) {
		if (gi[i].fs != fs || !gi[i].ready)
			continue;
		for (unsigned k = 0; k < gi[i].nsnaps; k++) {
			char v[24];

			snprintf(v, sizeof(v), "%llu", (unsigned long long)gi[i].snap_ver[k]);
			json_object_set_new(o, v,
					    json_integer(json_integer_value(json_object_get(o, v)) +
							 (json_int_t)gi[i].snap_only[k]));
		}
	}
	return o;
}

/* This node's part of each filesystem's usage (the groups it leads): {"NAME": {...}}. */
static json_t *
usage_json(const struct cfg *c, const struct admin_node *self)
{
	unsigned n = self->meta_groups ? self->meta_groups(self->arg, NULL, 0) : 0;
	struct msvc_group_info *gi = n ? sh_calloc(n, sizeof(*gi)) : NULL;
	json_t *o = json_object();

	if (gi != NULL) {
		unsigned got = self->meta_groups(self->arg, gi, n);

		n = got < n ? got : n;
	} else {
		n = 0;
	}
	for (uint32_t i = 0; i < c->nfs; i++) {
		struct usage_sum s = { 0 };
		json_t *snaps = snaps_usage_json(gi, n, c->fs[i].id);

		admin_fs_usage(gi, n, &c->fs[i], &s);
		json_object_set_new(
		    o, c->fs[i].name,
		    json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:o}", "logical",
			      (json_int_t)s.u.mapped, "stored", (json_int_t)s.u.data, "physical",
			      (json_int_t)s.u.phys, "unique", (json_int_t)s.u.unique,
			      "snapshot_bytes", (json_int_t)s.held, "own_bytes", (json_int_t)s.own,
			      "snapshots", snaps));
	}
	sh_free(gi);
	return o;
}

/* The usage fields of /v1/fs, left out when asked without usage. */
static const char *const usage_keys[] = { "logical_bytes", "stored_bytes",   "physical_bytes",
					  "unique_bytes",  "snapshot_bytes", "compression_ratio",
					  "dedup_ratio",   "usage_nodes",    "nodes" };

int
admin_detach(void *(*fn)(void *), void *arg)
{
	pthread_attr_t a;
	pthread_t th;
	int rc;

	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	rc = pthread_create(&th, &a, fn, arg);
	pthread_attr_destroy(&a);
	return -rc;
}

json_t *
admin_usage_parts(const struct cfg *c, const struct admin_node *self, unsigned *asked)
{
	json_t *parts = json_array();

	*asked = 0;
	for (uint32_t k = 0; k < c->nnodes; k++) {
		char *body = NULL;
		json_t *j = NULL;

		if (c->nodes[k].id == self->id) {
			j = usage_json(c, self);
		} else if (c->nodes[k].state == CFG_UP &&
			   sh_http_call(c->nodes[k].mgmt, self->token, "GET", "/v1/usage", NULL,
					&body, 2) == 200) {
			j = json_loads(body, 0, NULL);
		}
		free(body);
		if (json_is_object(j))
			json_array_append(parts, j);
		json_decref(j);
		(*asked)++;
	}
	return parts;
}

/*
 * The filesystems, each with its usage summed over every node's part
 * (admin_usage_parts). Without usage (?usage=0: the watcher's, every 2 s),
 * no node is asked and the usage fields are left out.
 */
static json_t *
fs_json(const struct cfg *c, const struct admin_node *self, bool usage)
{
	unsigned asked = 0;
	json_t *a = json_array(),
	       *parts = usage ? admin_usage_parts(c, self, &asked) : json_array();

	for (uint32_t i = 0; i < c->nfs; i++) {
		const struct cfg_fs *f = &c->fs[i];
		char prot[16], comp[16];
		json_int_t v[6] = { 0 };
		static const char *const keys[6] = { "logical", "stored",	  "physical",
						     "unique",	"snapshot_bytes", "own_bytes" };
		size_t k;
		json_t *part, *o;

		json_array_foreach(parts, k, part)
		{
			json_t *u = json_object_get(part, f->name);

			for (unsigned x = 0; x < SH_ARRAY_SIZE(keys); x++)
				v[x] += json_integer_value(json_object_get(u, keys[x]));
		}
		snprintf(prot, sizeof(prot), "%u+%u", f->d, f->p);
		o = json_pack(
		    "{s:s, s:s, s:s, s:b, s:b, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:f, "
		    "s:f, s:i, s:i}",
		    "name", f->name, "protection", prot, "compression",
		    cfg_comp_str(f->compression, comp, sizeof(comp)), "dedup", f->dedup,
		    "encrypted", f->sealed, "quota", (json_int_t)f->quota, "created",
		    (json_int_t)(f->created / 1000000000), "snapshot_every_s",
		    (json_int_t)f->snap_every_s, "snapshot_keep", (json_int_t)f->snap_keep,
		    "logical_bytes", v[0], "stored_bytes", v[1], "physical_bytes", v[2],
		    "unique_bytes", v[3], "snapshot_bytes", v[4], "compression_ratio",
		    v[1] ? (double)v[3] / (double)v[1] : 1.0, "dedup_ratio",
		    v[3] ? (double)v[0] / (double)v[3] : 1.0, "usage_nodes",
		    (int)json_array_size(parts), "nodes", (int)asked);
		for (size_t x = 0; !usage && o != NULL && x < SH_ARRAY_SIZE(usage_keys); x++)
			json_object_del(o, usage_keys[x]);
		/* its restores (docs/snapshots.md "Restore"): how many, and the one under way */
		if (o != NULL) {
			static const char *const phase[] = { NULL, "pausing", "reverting" };

			json_object_set_new(o, "restores", json_integer(f->restore_epoch));
			json_object_set_new(o, "restoring",
					    f->restore_phase ? json_string(phase[f->restore_phase])
							     : json_null());
		}
		/* a writable clone (docs/snapshots.md "Clones"): of what, and how far */
		if (o != NULL && !cfg_fs_own(f)) {
			static const char *const state[] = { NULL, "creating", "ready",
							     "deleting" };
			const struct cfg_fs *of = cfg_fs_by_id(c, f->origin);
			const struct cfg_snap *s = cfg_clone_snap(c, f);
			json_t *k =
			    json_pack("{s:s, s:s, s:I, s:i, s:s}", "origin", of ? of->name : "",
				      "snapshot", s ? s->name : "", "version", (json_int_t)f->base,
				      "branch", (int)f->branch, "state", state[f->clone_state]);

			/* what it alone reads: what deleting it frees (its other bytes are
			 * its snapshot's, counted with the origin) */
			if (k != NULL && usage)
				json_object_set_new(k, "own_bytes", json_integer(v[5]));
			json_object_set_new(o, "clone", k);
		}
		json_array_append_new(a, o);
	}
	json_decref(parts);
	return a;
}

static json_t *
events_json(const struct cfg *c, unsigned limit)
{
	json_t *a = json_array();

	for (uint32_t i = 0; i < c->nevents && i < limit; i++) {
		const struct cfg_event *e = cfg_event_at(c, i);

		json_array_append_new(a,
				      json_pack("{s:I, s:I, s:I, s:s}", "seq", (json_int_t)e->seq,
						"time", (json_int_t)(e->time / 1000000), "node",
						(json_int_t)e->node, "text", e->text));
	}
	return a;
}

static const char *
raft_state_name(const struct cluster_info *ci)
{
	return ci->started ? rgroup_state_name(ci->raft_state) : "not-member";
}

static json_t *
status_json(struct cluster *cl, const struct admin_node *self)
{
	const struct cfg *c = cluster_cfg(cl);
	struct cluster_info ci;
	unsigned up = 0, down = 0, data_down = 0;
	uint64_t cap = 0;
	char uuid[40];
	json_t *voters = json_array();

	cluster_info(cl, &ci);
	for (uint32_t i = 0; i < c->nnodes; i++) {
		c->nodes[i].state == CFG_UP ? up++ : down++;
		data_down += c->nodes[i].state == CFG_DATA_DOWN;
	}
	for (uint32_t i = 0; i < c->ndrives; i++)
		cap += c->drives[i].capacity;
	for (unsigned i = 0; i < ci.nvoters; i++)
		json_array_append_new(voters, json_integer((json_int_t)ci.voters[i]));
	for (int i = 0; i < 16; i++)
		snprintf(uuid + i * 2, 3, "%02x", c->uuid[i]);
	return json_pack(
	    "{s:s, s:s, s:b, s:I, s:i, s:i, s:I, s:{s:I, s:s, s:i, s:s}, "
	    "s:{s:s, s:I, s:I, s:o}, s:{s:i, s:i, s:i, s:i}, s:i, s:I, s:i, s:s, s:s}",
	    "cluster", c->name, "uuid", c->created ? uuid : "", "created", c->created, "epoch",
	    (json_int_t)c->epoch, "buckets", (int)c->nbuckets, "replicas", (int)c->replicas,
	    "leader", (json_int_t)ci.leader, "node", "id", (json_int_t)self->id, "mode", self->mode,
	    "workers", (int)self->workers, "version", "0.1", "raft", "state", raft_state_name(&ci),
	    "term", (json_int_t)ci.term, "commit", (json_int_t)ci.commit, "voters", voters, "nodes",
	    "total", (int)c->nnodes, "up", (int)up, "down", (int)down, "data_down", (int)data_down,
	    "drives", (int)c->ndrives, "capacity", (json_int_t)cap, "filesystems", (int)c->nfs,
	    "secret_fingerprint", self->secret_fp ? self->secret_fp : "", "secret_also_fingerprint",
	    self->secret_also_fp ? self->secret_also_fp : "");
}

/* The metadata groups this node serves. */
static json_t *
meta_json(const struct admin_node *self)
{
	/* on the heap: each holds what its snapshots hold (4 KiB) */
	struct msvc_group_info *gi = sh_calloc(256, sizeof(*gi));
	unsigned n = self->meta_groups && gi ? self->meta_groups(self->arg, gi, 256) : 0;
	json_t *a = json_array();

	for (unsigned i = 0; i < n && i < 256; i++) {
		json_t *voters = json_array();

		for (unsigned k = 0; k < gi[i].nvoters; k++)
			json_array_append_new(voters, json_integer((json_int_t)gi[i].voters[k]));
		json_array_append_new(
		    a, json_pack("{s:i, s:i, s:i, s:s, s:b, s:I, s:I, s:I, s:I, s:o}", "fs",
				 (int)gi[i].fs, "group", (int)gi[i].index, "buckets",
				 (int)gi[i].nbuckets, "raft", rgroup_state_name(gi[i].raft_state),
				 "serving", gi[i].ready, "term", (json_int_t)gi[i].term, "commit",
				 (json_int_t)gi[i].commit, "applied", (json_int_t)gi[i].applied,
				 "leader", (json_int_t)(gi[i].leader >> 8), "voters", voters));
	}
	sh_free(gi);
	return a;
}

struct metrics_ctx {
	struct cluster *cl;
	const struct admin_node *self;
	struct admin_req *req;
	bool done;
};

static void
metrics_with(void *ctx, const struct admin_stats *const *ws, unsigned n)
{
	struct metrics_ctx *m = ctx;

	admin_metrics_reply(m->cl, m->self, ws, n, m->req);
	m->done = true;
}

static void
metrics(struct cluster *cl, const struct admin_node *self, struct admin_req *req)
{
	struct metrics_ctx m = { cl, self, req, false };

	if (self->with_stats != NULL)
		self->with_stats(self->arg, metrics_with, &m);
	if (!m.done)
		admin_metrics_reply(cl, self, NULL, 0, req);
}

/* ---- changes ---- */

static void
on_changed(void *arg, int status, const char *msg)
{
	struct admin_req *req = arg;

	if (status < 0) {
		admin_reply_err(req, status, msg);
		return;
	}
	admin_reply_json(req, 200, json_pack("{s:b}", "ok", 1));
}

/* A field of o: NULL when absent (an error if required), else the value. */
static json_t *
field(json_t *o, const char *key, bool required, int *rc, char *err, size_t elen)
{
	json_t *v = json_object_get(o, key);

	if (v == NULL && required) {
		snprintf(err, elen, "missing field \"%s\"", key);
		*rc = -EINVAL;
	}
	return v;
}

static int
get_str(json_t *o, const char *key, bool required, char *out, size_t cap, char *err, size_t elen)
{
	int rc = 0;
	json_t *v = field(o, key, required, &rc, err, elen);

	if (v == NULL)
		return rc;
	if (!json_is_string(v) || strlen(json_string_value(v)) >= cap) {
		snprintf(err, elen, "field \"%s\" must be a string of at most %zu bytes", key,
			 cap - 1);
		return -EINVAL;
	}
	snprintf(out, cap, "%s", json_string_value(v));
	return 0;
}

static int
get_u64(json_t *o, const char *key, bool required, uint64_t *out, char *err, size_t elen)
{
	int rc = 0;
	json_t *v = field(o, key, required, &rc, err, elen);

	if (v == NULL)
		return rc;
	if (!json_is_integer(v) || json_integer_value(v) < 0) {
		snprintf(err, elen, "field \"%s\" must be a non-negative integer", key);
		return -EINVAL;
	}
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

/*
 * An encrypted filesystem's fields (docs/security.md, "Encrypted file
 * systems"): "encrypted": true and "wrapped_key", its master key wrapped by a
 * key only clients hold (128 hex digits): the nodes are never given one that
 * opens it.
 */
static int
get_sealed(json_t *o, struct cfg_cmd *cmd, char *err, size_t elen)
{
	json_t *en = json_object_get(o, "encrypted");
	char hex[2 * CFG_WRAP_LEN + 2] = "";
	int rc = 0;

	if (en != NULL && !json_is_boolean(en)) {
		snprintf(err, elen, "field \"encrypted\" must be true or false");
		return -EINVAL;
	}
	cmd->sealed = en != NULL && json_is_true(en);
	if (!cmd->sealed)
		return 0;
	rc = get_str(o, "wrapped_key", true, hex, sizeof(hex), err, elen);
	if (rc < 0)
		return rc;
	rc = sh_unhex(hex, cmd->wrapped, CFG_WRAP_LEN) ? 0 : -EINVAL;
	if (rc < 0)
		snprintf(err, elen,
			 "field \"wrapped_key\" must be %d hex digits (shoal fs create "
			 "--encrypt makes it)",
			 2 * CFG_WRAP_LEN);
	return rc;
}

/* The JSON body of a change into a command. 0 or -EINVAL with a reason. */
static int
parse_change(const char *what, json_t *o, struct cfg_cmd *cmd, char *err, size_t elen)
{
	uint64_t v = 0;
	int rc = 0;

	if (strcmp(what, "cluster") == 0) {
		cmd->op = CFG_OP_CREATE;
		rc = get_str(o, "name", true, cmd->name, sizeof(cmd->name), err, elen);
		if (!rc)
			rc = get_u64(o, "buckets", false, &v, err, elen);
		if (!rc && v > CFG_BUCKETS_MAX) {
			snprintf(err, elen, "buckets must be 1 to %d", CFG_BUCKETS_MAX);
			rc = -EINVAL;
		}
		cmd->nbuckets = (uint32_t)v;
	} else if (strcmp(what, "nodes") == 0) {
		cmd->op = CFG_OP_NODE_ADD;
		rc = get_u64(o, "id", true, &cmd->id, err, elen);
		if (!rc)
			rc = get_str(o, "mgmt", true, cmd->addr, sizeof(cmd->addr), err, elen);
		if (!rc)
			rc = get_str(o, "data", true, cmd->data, sizeof(cmd->data), err, elen);
		if (!rc)
			rc = get_str(o, "domain", false, cmd->domain, sizeof(cmd->domain), err,
				     elen);
	} else if (strcmp(what, "drives") == 0) {
		cmd->op = CFG_OP_DRIVE_ADD;
		rc = get_u64(o, "node", true, &cmd->id, err, elen);
		if (!rc)
			rc = get_str(o, "path", true, cmd->path, sizeof(cmd->path), err, elen);
	} else if (strcmp(what, "nets") == 0) {
		cmd->op = CFG_OP_NET_ADD;
		rc = get_u64(o, "node", true, &cmd->id, err, elen);
		if (!rc)
			rc = get_str(o, "addr", true, cmd->addr, sizeof(cmd->addr), err, elen);
		if (!rc)
			rc = get_str(o, "label", true, cmd->label, sizeof(cmd->label), err, elen);
	} else if (strcmp(what, "fs") == 0) {
		char prot[16] = "4+2", comp[16] = "lz4";
		json_t *dd = json_object_get(o, "dedup");
		int c;

		cmd->op = CFG_OP_FS_CREATE;
		rc = get_str(o, "name", true, cmd->name, sizeof(cmd->name), err, elen);
		if (!rc)
			rc = get_str(o, "protection", false, prot, sizeof(prot), err, elen);
		if (!rc && cfg_protection_parse(prot, &cmd->d, &cmd->p) < 0) {
			snprintf(err, elen, "protection '%s' is not D+P (e.g. 4+2)", prot);
			rc = -EINVAL;
		}
		if (!rc)
			rc = get_str(o, "compression", false, comp, sizeof(comp), err, elen);
		if (!rc && (c = cfg_comp_parse(comp)) < 0) {
			snprintf(err, elen,
				 "compression '%s' is not lz4, zstd, zstd:LEVEL (1-19) or none",
				 comp);
			rc = -EINVAL;
		} else if (!rc) {
			cmd->compression = (uint8_t)c;
		}
		if (!rc && dd != NULL && !json_is_boolean(dd)) {
			snprintf(err, elen, "field \"dedup\" must be true or false");
			rc = -EINVAL;
		}
		cmd->dedup = dd != NULL && json_is_true(dd);
		if (!rc)
			rc = get_u64(o, "quota", false, &cmd->quota, err, elen);
		if (!rc)
			rc = get_sealed(o, cmd, err, elen);
	} else if (strcmp(what, "events") == 0) {
		cmd->op = CFG_OP_EVENT;
		rc = get_str(o, "text", true, cmd->path, CFG_MSG_MAX, err, elen);
		if (!rc)
			rc = get_u64(o, "node", false, &cmd->id, err, elen);
	} else {
		return -ENOENT;
	}
	return rc;
}

json_t *
admin_body_object(struct admin_req *req)
{
	char err[CFG_MSG_MAX];
	json_error_t jerr;
	json_t *o = json_loadb(req->body, req->body_len, JSON_REJECT_DUPLICATES, &jerr);

	if (o != NULL && json_is_object(o))
		return o;
	if (o == NULL)
		snprintf(err, sizeof(err), "malformed JSON: %.120s (line %d, column %d)", jerr.text,
			 jerr.line, jerr.column);
	else
		snprintf(err, sizeof(err), "the body must be a JSON object");
	json_decref(o);
	admin_reply_err(req, -EINVAL, err);
	return NULL;
}

int
admin_submit(struct cluster *cl, struct cfg_cmd *cmd, const struct admin_req *req, cluster_cb cb,
	     void *arg)
{
	snprintf(cmd->by, sizeof(cmd->by), "admin API from %s", req->from[0] ? req->from : "?");
	return cluster_submit(cl, cmd, cb, arg);
}

/* POST /v1/WHAT, or PUT /v1/WHAT/KEY: the change it asks for, submitted. */
static void
change(struct cluster *cl, const char *what, const char *key, struct admin_req *req)
{
	struct cfg_cmd cmd = { 0 };
	char err[CFG_MSG_MAX] = "";
	json_t *o = admin_body_object(req);
	int rc;

	if (o == NULL)
		return;
	rc = key ? admin_heal_put(what, key, o, &cmd, err, sizeof(err))
		 : parse_change(what, o, &cmd, err, sizeof(err));
	json_decref(o);
	if (rc == -ENOENT && err[0] == '\0') {
		admin_reply_err(req, -ENOENT, "no such resource");
		return;
	}
	if (rc < 0) {
		admin_reply_err(req, rc, err);
		return;
	}
	rc = admin_submit(cl, &cmd, req, on_changed, req);
	if (rc < 0)
		admin_reply_err(req, rc, "cannot submit the change");
}

static void
del(struct cluster *cl, const struct admin_node *self, const char *what, const char *key,
    struct admin_req *req)
{
	struct cfg_cmd cmd = { 0 };
	char err[CFG_MSG_MAX];
	int rc;

	if (strcmp(what, "drives") == 0) {
		rc = admin_drive_remove(cluster_cfg(cl), self, key, &cmd, err, sizeof(err));
		if (rc < 0) {
			admin_reply_err(req, rc, err);
			return;
		}
	} else if (strcmp(what, "nodes") == 0) {
		rc = admin_node_remove(cluster_cfg(cl), self, key, &cmd, err, sizeof(err));
		if (rc < 0) {
			admin_reply_err(req, rc, err);
			return;
		}
	} else if (strcmp(what, "nets") == 0) {
		rc = admin_net_remove(cluster_cfg(cl), key, &cmd, err, sizeof(err));
		if (rc < 0) {
			admin_reply_err(req, rc, err);
			return;
		}
	} else if (strcmp(what, "fs") == 0) {
		cmd.op = CFG_OP_FS_DELETE;
		if (strlen(key) >= sizeof(cmd.name)) {
			admin_reply_err(req, -EINVAL, "filesystem name too long");
			return;
		}
		memcpy(cmd.name, key, strlen(key) + 1);
	} else {
		admin_reply_err(req, -ENOENT, "no such resource");
		return;
	}
	rc = admin_submit(cl, &cmd, req, on_changed, req);
	if (rc < 0)
		admin_reply_err(req, rc, "cannot submit the change");
}

static unsigned
query_limit(const char *q)
{
	const char *p = strstr(q, "limit=");
	unsigned long v;

	if (p == NULL)
		return CFG_EVENTS_MAX;
	v = strtoul(p + 6, NULL, 10);
	return v == 0 || v > CFG_EVENTS_MAX ? CFG_EVENTS_MAX : (unsigned)v;
}

/*
 * /v1/fs/FS/SUB[/NAME] (SUB "snapshots", "keys", "restore" or "clone"): which (0: none),
 * with the names (name "" without it).
 */
static int
fs_sub_path(const char *path, char *fs, char *name)
{
	static const char *const subs[] = { "/snapshots", "/keys", "/restore", "/clone" };
	const char *p, *q;
	int which = 0;
	size_t l = 0;

	if (strncmp(path, "/v1/fs/", 7) != 0)
		return 0;
	p = path + 7;
	q = strchr(p, '/');
	if (q == NULL || q == p || (size_t)(q - p) >= CFG_NAME_MAX)
		return 0;
	for (int i = 0; i < (int)SH_ARRAY_SIZE(subs) && which == 0; i++) {
		l = strlen(subs[i]);
		if (strncmp(q, subs[i], l) == 0 && (q[l] == '\0' || q[l] == '/'))
			which = i + 1;
	}
	if (which == 0)
		return 0;
	memcpy(fs, p, (size_t)(q - p));
	fs[q - p] = '\0';
	q += l;
	name[0] = '\0';
	if (*q == '\0')
		return which;
	if (*q != '/' || q[1] == '\0' || strchr(q + 1, '/') != NULL ||
	    strlen(q + 1) >= CFG_NAME_MAX)
		return 0;
	snprintf(name, CFG_NAME_MAX, "%s", q + 1);
	return which;
}

void
admin_api_handle(struct cluster *cl, const struct admin_node *self, struct admin_req *req)
{
	const struct cfg *c = cluster_cfg(cl);
	bool get = strcmp(req->method, "GET") == 0;
	char what[32] = "", key[CFG_NAME_MAX + 8] = "", snap[CFG_NAME_MAX];
	struct cluster_info ci;

	sh_log_debug("%s %s", req->method, req->path);
	if (get && strcmp(req->path, "/metrics") == 0) {
		metrics(cl, self, req);
		return;
	}
	switch (fs_sub_path(req->path, key, snap)) {
	case 1:
		admin_snap_handle(cl, self, req, key, snap);
		return;
	case 2:
		admin_key_handle(cl, req, key, snap);
		return;
	case 3:
		admin_restore_handle(cl, self, req, key, snap);
		return;
	case 4:
		admin_clone_handle(cl, self, req, key, snap);
		return;
	}
	if (strncmp(req->path, "/v1/", 4) != 0 ||
	    sscanf(req->path + 4, "%31[a-z]/%71[^/]", what, key) < 1 ||
	    strlen(req->path + 4) > strlen(what) + 1 + strlen(key)) {
		admin_reply_err(req, -ENOENT, "no such resource");
		return;
	}
	cluster_info(cl, &ci);
	if (get && key[0] == '\0') {
		if (strcmp(what, "status") == 0)
			admin_reply_json(req, 200, status_json(cl, self));
		else if (strcmp(what, "nodes") == 0)
			admin_reply_json(req, 200, nodes_json(c, &ci));
		else if (strcmp(what, "drives") == 0)
			admin_reply_json(req, 200, drives_json(c));
		else if (strcmp(what, "nets") == 0)
			admin_reply_json(req, 200, nets_json(c));
		else if (strcmp(what, "fs") == 0)
			admin_reply_json(req, 200,
					 fs_json(c, self, strstr(req->query, "usage=0") == NULL));
		else if (strcmp(what, "usage") == 0)
			admin_reply_json(req, 200, usage_json(c, self));
		else if (strcmp(what, "events") == 0)
			admin_reply_json(req, 200, events_json(c, query_limit(req->query)));
		else if (strcmp(what, "meta") == 0)
			admin_reply_json(req, 200, meta_json(self));
		else if (strcmp(what, "heal") == 0)
			admin_reply_json(req, 200, admin_heal_json(self));
		else if (strcmp(what, "rebuild") == 0)
			admin_rebuild_reply(c, self, req); /* asks every node: off this loop */
		else if (strcmp(what, "settings") == 0)
			admin_reply_json(req, 200, admin_settings_json(c));
		else if (strcmp(what, "processes") == 0)
			admin_reply_json(req, 200, admin_processes_json(cl, self));
		else
			admin_reply_err(req, -ENOENT, "no such resource");
		return;
	}
	if (strcmp(req->method, "POST") == 0 && key[0] == '\0') {
		change(cl, what, NULL, req);
		return;
	}
	if (strcmp(req->method, "PUT") == 0 && key[0] != '\0') {
		change(cl, what, key, req);
		return;
	}
	if (strcmp(req->method, "DELETE") == 0 && key[0] != '\0') {
		del(cl, self, what, key, req);
		return;
	}
	admin_reply(req, 405, NULL, "{\"error\":\"method not allowed\",\"code\":\"EINVAL\"}\n", 47);
}
