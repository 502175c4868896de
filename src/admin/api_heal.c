// SPDX-License-Identifier: Apache-2.0
/*
 * Self-healing in the admin API (docs/admin-api.md, docs/healing.md):
 * GET /v1/heal is this node's part (the buckets it leads), GET /v1/rebuild
 * the cluster's, summed over every node's part; PUT /v1/drives/ID
 * {"state":"failed"} fails a drive, {"state":"draining"} drains it, DELETE
 * /v1/drives/ID removes a drive drained (or failed and rebuilt), PUT
 * /v1/settings/NAME {"value":N} changes a setting, GET /v1/settings lists
 * them.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/alloc.h"
#include "../base/http.h"
#include "api_int.h"

struct sum_ctx {
	struct msvc_heal_stats *sum;
};

static void
sum_with(void *ctx, const struct admin_stats *const *ws, unsigned n)
{
	struct msvc_heal_stats *sum = ((struct sum_ctx *)ctx)->sum;

	for (unsigned w = 0; w < n; w++)
		if (ws[w]->has_meta)
			msvc_heal_stats_add(sum, &ws[w]->meta.heal);
}

void
admin_heal_local(const struct admin_node *self, struct msvc_heal_stats *out)
{
	struct sum_ctx ctx = { out };

	memset(out, 0, sizeof(*out));
	out->pass_epoch = UINT64_MAX;
	if (self->with_stats)
		self->with_stats(self->arg, sum_with, &ctx);
}

static json_t *
heal_to_json(const struct msvc_heal_stats *h)
{
	json_t *lv = json_array(), *o;

	for (unsigned i = 0; i < MSVC_HEAL_LEVELS; i++)
		json_array_append_new(lv, json_pack("{s:i, s:I, s:I}", "missing", (int)i, "stripes",
						    (json_int_t)h->stripes[i], "bytes",
						    (json_int_t)h->bytes[i]));
	o = json_pack("{s:o, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, "
		      "s:I}",
		      "levels", lv, "unreadable_stripes", (json_int_t)h->unreadable,
		      "shared_stripes", (json_int_t)h->shared, "pending_bytes",
		      (json_int_t)h->pending_bytes, "rebuilt_fragments",
		      (json_int_t)h->rebuilt_frags, "moved_fragments", (json_int_t)h->moved_frags,
		      "repaired_fragments", (json_int_t)h->repaired_frags, "rebuilt_bytes",
		      (json_int_t)h->rebuilt_bytes, "failed_jobs", (json_int_t)h->failed_jobs,
		      "in_flight", (json_int_t)h->in_flight, "queued", (json_int_t)h->queued,
		      "rate_bytes_per_s", (json_int_t)h->rate_bps, "passes", (json_int_t)h->passes,
		      "buckets", (json_int_t)h->buckets, "pass_epoch",
		      (json_int_t)(h->pass_epoch == UINT64_MAX ? -1 : (json_int_t)h->pass_epoch));
	json_object_set_new(o, "balanced_fragments", json_integer((json_int_t)h->balanced_frags));
	json_object_set_new(o, "balance_queued", json_integer((json_int_t)h->balance_queued));
	json_object_set_new(o, "draining_stripes", json_integer((json_int_t)h->draining));
	json_object_set_new(o, "fill_max_over_mean", json_real((double)h->fill_ratio_milli / 1000));
	json_object_set_new(o, "targets_full", json_integer((json_int_t)h->targets_full));
	return o;
}

json_t *
admin_heal_json(const struct admin_node *self)
{
	struct msvc_heal_stats h;

	admin_heal_local(self, &h);
	return heal_to_json(&h);
}

static uint64_t
jget(json_t *o, const char *k)
{
	return (uint64_t)json_integer_value(json_object_get(o, k));
}

/* A node's part, as JSON, into sum. */
static void
add_json(struct msvc_heal_stats *sum, json_t *j)
{
	struct msvc_heal_stats h = { 0 };
	json_t *lv = json_object_get(j, "levels"), *l;
	json_int_t pe = json_integer_value(json_object_get(j, "pass_epoch"));
	size_t i;

	json_array_foreach(lv, i, l) if (i < MSVC_HEAL_LEVELS)
	{
		h.stripes[i] = jget(l, "stripes");
		h.bytes[i] = jget(l, "bytes");
	}
	h.unreadable = jget(j, "unreadable_stripes");
	h.shared = jget(j, "shared_stripes");
	h.pending_bytes = jget(j, "pending_bytes");
	h.rebuilt_frags = jget(j, "rebuilt_fragments");
	h.moved_frags = jget(j, "moved_fragments");
	h.repaired_frags = jget(j, "repaired_fragments");
	h.balanced_frags = jget(j, "balanced_fragments");
	h.balance_queued = jget(j, "balance_queued");
	h.draining = jget(j, "draining_stripes");
	h.targets_full = jget(j, "targets_full");
	h.fill_ratio_milli =
	    (uint64_t)(json_number_value(json_object_get(j, "fill_max_over_mean")) * 1000 + 0.5);
	h.rebuilt_bytes = jget(j, "rebuilt_bytes");
	h.failed_jobs = jget(j, "failed_jobs");
	h.in_flight = jget(j, "in_flight");
	h.queued = jget(j, "queued");
	h.rate_bps = jget(j, "rate_bytes_per_s");
	h.passes = jget(j, "passes");
	h.buckets = jget(j, "buckets");
	h.pass_epoch = pe < 0 ? UINT64_MAX : (uint64_t)pe;
	msvc_heal_stats_add(sum, &h);
}

/*
 * The state in a word: checking (a node did not answer, a bucket was not
 * gone over, or a pass has not seen the newest configuration yet),
 * data-loss (a stripe misses more than its parity), rebuilding (fragments
 * on lost targets to re-create), draining (fragments on drives being
 * removed, copied off them), degraded (fragments on nodes down, not
 * lost yet: read around until they come back or the delay ends),
 * spreading (stripes with fragments sharing a failure domain, being spread
 * out), shared (such stripes, and no failure domain free to take them),
 * rebalancing (every fragment there, some moving to even the targets' fill
 * out), full (every fragment there, each on a failure domain of its own).
 */
static const char *
heal_state(const struct cfg *c, const struct msvc_heal_stats *h, unsigned answered, unsigned up)
{
	uint64_t missing = 0;

	for (unsigned i = 1; i < MSVC_HEAL_LEVELS; i++)
		missing += h->stripes[i];
	if (answered < up || h->buckets < (uint64_t)cfg_nfs_own(c) * c->nbuckets ||
	    (h->pass_epoch != UINT64_MAX && h->pass_epoch < c->epoch))
		return "checking";
	if (h->unreadable > 0)
		return "data-loss";
	if (h->pending_bytes > 0)
		return "rebuilding";
	if (h->draining > 0)
		return "draining";
	if (missing > 0)
		return "degraded";
	if (h->shared > 0)
		return h->queued > 0 || h->in_flight > 0 ? "spreading" : "shared";
	if (h->balance_queued > 0 || h->queued > 0 || h->in_flight > 0)
		return "rebalancing";
	return "full";
}

static json_t *rebuild_json(const struct cfg *c, const struct admin_node *self,
			    const struct msvc_heal_stats *local, uint64_t now);

json_t *
admin_rebuild_json(const struct cfg *c, const struct admin_node *self, uint64_t now)
{
	struct msvc_heal_stats h;

	admin_heal_local(self, &h);
	return rebuild_json(c, self, &h, now);
}

/* local: this node's part, taken on the management loop (its counters are the loop's). */
static json_t *
rebuild_json(const struct cfg *c, const struct admin_node *self,
	     const struct msvc_heal_stats *local, uint64_t now)
{
	struct msvc_heal_stats sum = { 0 };
	unsigned answered = 0, up = 0, lost = 0, down = 0;
	json_t *o, *failed = json_array();

	sum.pass_epoch = UINT64_MAX;
	for (uint32_t k = 0; k < c->nnodes; k++) {
		char *body = NULL;
		json_t *j = NULL;

		if (c->nodes[k].state != CFG_UP)
			continue;
		up++;
		if (c->nodes[k].id == self->id) {
			msvc_heal_stats_add(&sum, local);
			answered++;
			continue;
		}
		if (sh_http_call(c->nodes[k].mgmt, self->token, "GET", "/v1/heal", NULL, &body,
				 2) == 200)
			j = json_loads(body, 0, NULL);
		free(body);
		if (json_is_object(j)) {
			add_json(&sum, j);
			answered++;
		}
		json_decref(j);
	}
	for (uint32_t i = 0; i < c->ndrives; i++) {
		int st = cfg_target_state(c, c->drives[i].id, now);

		lost += st == CFG_TGT_LOST;
		down += st == CFG_TGT_DOWN;
		if (c->drives[i].state == CFG_DRIVE_FAILED)
			json_array_append_new(failed, json_integer((json_int_t)c->drives[i].id));
	}
	o = heal_to_json(&sum);
	json_object_set_new(o, "state", json_string(heal_state(c, &sum, answered, up)));
	json_object_set_new(o, "eta_s",
			    sum.rate_bps
				? json_integer((json_int_t)(sum.pending_bytes / sum.rate_bps))
				: json_null());
	json_object_set_new(o, "nodes_answered", json_integer(answered));
	json_object_set_new(o, "nodes_up", json_integer(up));
	json_object_set_new(o, "buckets_total",
			    json_integer((json_int_t)cfg_nfs_own(c) * c->nbuckets));
	json_object_set_new(o, "epoch", json_integer((json_int_t)c->epoch));
	json_object_set_new(o, "targets_lost", json_integer(lost));
	json_object_set_new(o, "targets_down", json_integer(down));
	json_object_set_new(o, "failed_drives", failed);
	json_object_set_new(o, "rebuild_delay_s", json_integer(c->rebuild_delay_s));
	json_object_set_new(o, "rebuild_share", json_integer(c->rebuild_share));
	return o;
}

struct rebuild_job {
	struct cfg *c;
	const struct admin_node *self;
	struct msvc_heal_stats local;
	struct admin_req *req;
};

static void *
rebuild_run(void *arg)
{
	struct rebuild_job *j = arg;
	json_t *o = rebuild_json(j->c, j->self, &j->local, sh_clock_real_ns());
	struct admin_req *req = j->req;

	cfg_free(j->c);
	sh_free(j); /* all ours is gone before the answer is (a test's leak count) */
	admin_reply_json(req, 200, o);
	return NULL;
}

void
admin_rebuild_reply(const struct cfg *c, const struct admin_node *self, struct admin_req *req)
{
	struct rebuild_job *j = sh_calloc(1, sizeof(*j));
	int rc = -1;

	if (j != NULL && (j->c = cfg_new()) != NULL && cfg_copy(j->c, c) == 0) {
		j->self = self;
		j->req = req;
		admin_heal_local(self, &j->local); /* here, on the loop that owns the counters */
		rc = admin_detach(rebuild_run, j);
	}
	if (rc == 0)
		return;
	if (j != NULL)
		cfg_free(j->c);
	sh_free(j);
	admin_reply_json(req, 200, admin_rebuild_json(c, self, sh_clock_real_ns()));
}

json_t *
admin_settings_json(const struct cfg *c)
{
	json_t *o = json_object();

	for (unsigned i = 0; cfg_setting_names[i]; i++)
		json_object_set_new(o, cfg_setting_names[i],
				    json_integer(cfg_setting_get(c, cfg_setting_names[i])));
	return o;
}

int
admin_heal_put(const char *what, const char *key, json_t *o, struct cfg_cmd *cmd, char *err,
	       size_t elen)
{
	char *end;

	if (strcmp(what, "drives") == 0) {
		json_t *s = json_object_get(o, "state");

		cmd->op = CFG_OP_DRIVE_STATE;
		cmd->target = strtoull(key, &end, 10);
		if (*key == '\0' || *end != '\0' || cmd->target == 0) {
			snprintf(err, elen, "a drive id is a positive number");
			return -EINVAL;
		}
		if (!json_is_string(s) || (strcmp(json_string_value(s), "failed") != 0 &&
					   strcmp(json_string_value(s), "draining") != 0)) {
			snprintf(err, elen, "field \"state\" must be \"failed\" or \"draining\"");
			return -EINVAL;
		}
		cmd->state = strcmp(json_string_value(s), "failed") == 0 ? CFG_DRIVE_FAILED
									 : CFG_DRIVE_DRAINING;
		s = json_object_get(o, "reason"); /* said in the event: why it failed */
		if (s != NULL && !json_is_string(s)) {
			snprintf(err, elen, "field \"reason\" must be a string");
			return -EINVAL;
		}
		if (s != NULL)
			snprintf(cmd->path, sizeof(cmd->path), "%s", json_string_value(s));
		return 0;
	}
	if (strcmp(what, "settings") == 0) {
		json_t *v = json_object_get(o, "value");

		cmd->op = CFG_OP_SET;
		if (strlen(key) >= sizeof(cmd->name)) {
			snprintf(err, elen, "no setting '%s'", key);
			return -ENOENT;
		}
		memcpy(cmd->name, key, strlen(key) + 1);
		if (!json_is_integer(v) || json_integer_value(v) < 0) {
			snprintf(err, elen, "field \"value\" must be a number, 0 or more");
			return -EINVAL;
		}
		cmd->size = (uint64_t)json_integer_value(v);
		return 0;
	}
	return -ENOENT;
}

/* Every stripe off the drives going: nothing drains, nothing rebuilds, nothing unknown. */
static bool
drained(const struct cfg *c, const struct admin_node *self)
{
	json_t *st = admin_rebuild_json(c, self, sh_clock_real_ns());
	const char *state = json_string_value(json_object_get(st, "state"));
	bool done = json_integer_value(json_object_get(st, "draining_stripes")) == 0 &&
		    json_integer_value(json_object_get(st, "pending_bytes")) == 0 &&
		    state != NULL && strcmp(state, "checking") != 0 &&
		    strcmp(state, "data-loss") != 0;

	json_decref(st);
	return done;
}

static int
parse_id(const char *key, const char *what, uint64_t *id, char *err, size_t elen)
{
	char *end;

	*id = strtoull(key, &end, 10);
	if (*key == '\0' || *end != '\0' || *id == 0) {
		snprintf(err, elen, "a %s id is a positive number", what);
		return -EINVAL;
	}
	return 0;
}

int
admin_drive_remove(const struct cfg *c, const struct admin_node *self, const char *key,
		   struct cfg_cmd *cmd, char *err, size_t elen)
{
	const struct cfg_drive *d;
	int rc;

	cmd->op = CFG_OP_DRIVE_REMOVE;
	rc = parse_id(key, "drive", &cmd->target, err, elen);
	if (rc < 0)
		return rc;
	d = cfg_drive_find(c, cmd->target);
	if (d == NULL || d->state == CFG_DRIVE_ACTIVE)
		return 0; /* the configuration's check says why */
	if (!drained(c, self)) {
		snprintf(err, elen,
			 "drive %llu still holds fragments a stripe needs (shoal rebuild status)",
			 (unsigned long long)cmd->target);
		return -EBUSY;
	}
	return 0;
}

int
admin_node_remove(const struct cfg *c, const struct admin_node *self, const char *key,
		  struct cfg_cmd *cmd, char *err, size_t elen)
{
	bool draining = false;
	int rc;

	cmd->op = CFG_OP_NODE_REMOVE;
	rc = parse_id(key, "node", &cmd->id, err, elen);
	if (rc < 0)
		return rc;
	for (uint32_t i = 0; i < c->ndrives; i++)
		draining |=
		    c->drives[i].node == cmd->id && c->drives[i].state == CFG_DRIVE_DRAINING;
	/* an active drive of a node up: the configuration's check refuses it */
	if (draining && !drained(c, self)) {
		snprintf(err, elen,
			 "node %llu's drives still hold fragments a stripe needs "
			 "(shoal rebuild status)",
			 (unsigned long long)cmd->id);
		return -EBUSY;
	}
	return 0;
}
