// SPDX-License-Identifier: Apache-2.0
/*
 * The admin API's snapshot routes (api.h, docs/admin-api.md): a
 * filesystem's snapshots listed, shown, created and deleted, and its
 * snapshot schedule shown and set (the configuration's leader runs it:
 * src/shoald/watch.c). A creation is answered once the snapshot is
 * ready (every metadata group of the filesystem writes at the next
 * version: the metadata layer then proposes snap.state), waiting on the
 * management loop with cluster_wait, never blocking it.
 */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "../base/alloc.h"
#include "api_int.h"

SH_LOG_FACILITY("admin.snap");

json_t *
admin_snap_json(const struct cfg *c, const struct cfg_snap *s, json_t *parts)
{
	const struct cfg_fs *f = cfg_fs_by_id(c, s->fs);
	json_t *o =
	    json_pack("{s:s, s:s, s:I, s:s, s:I}", "name", s->name, "fs", f ? f->name : "",
		      "version", (json_int_t)s->version, "state", cfg_snap_state_name(s->state),
		      "created", (json_int_t)(s->created / 1000000000));
	json_int_t only = 0;
	json_t *part;
	size_t i;
	char v[24];

	/* a writable snapshot: opened (read-write) as its clone's name */
	if (o != NULL && f != NULL)
		json_object_set_new(o, "writable", json_boolean(cfg_writable_of(c, f, s) != NULL));
	if (o == NULL || parts == NULL || f == NULL)
		return o;
	/* the bytes only it reads, summed over the nodes' parts (docs/snapshots.md, "Space") */
	snprintf(v, sizeof(v), "%llu", (unsigned long long)s->version);
	json_array_foreach(parts, i, part)
	{
		json_t *snaps = json_object_get(json_object_get(part, f->name), "snapshots");

		only += json_integer_value(json_object_get(snaps, v));
	}
	json_object_set_new(o, "bytes_only", json_integer(only));
	json_object_set_new(o, "usage_nodes", json_integer((json_int_t)json_array_size(parts)));
	return o;
}

static json_t *
list_json(const struct cfg *c, const struct cfg_fs *f, json_t *parts)
{
	json_t *a = json_array();

	for (uint32_t i = 0; i < c->nsnaps; i++)
		if (c->snaps[i].fs == f->id)
			json_array_append_new(a, admin_snap_json(c, &c->snaps[i], parts));
	return a;
}

/*
 * GET of a filesystem's snapshots (or one) with the bytes each holds alone:
 * every node is asked for its part (admin_usage_parts, up to 2 s a node),
 * so on a thread of its own with a copy of the configuration, never on the
 * management loop.
 */
struct usage_job {
	struct cfg *c;
	const struct admin_node *self;
	struct admin_req *req;
	uint32_t fs;
	char name[CFG_NAME_MAX]; /* "": the list */
};

static void *
usage_run(void *arg)
{
	struct usage_job *j = arg;
	struct admin_req *req = j->req;
	const struct cfg_fs *f = cfg_fs_by_id(j->c, j->fs);
	const struct cfg_snap *s = f && j->name[0] ? cfg_snap_find(j->c, f->id, j->name) : NULL;
	unsigned asked;
	json_t *parts = admin_usage_parts(j->c, j->self, &asked);
	json_t *o = f == NULL	 ? NULL
		    : j->name[0] ? (s ? admin_snap_json(j->c, s, parts) : NULL)
				 : list_json(j->c, f, parts);

	json_decref(parts);
	cfg_free(j->c);
	sh_free(j); /* all ours is gone before the answer is (a test's leak count) */
	if (o != NULL)
		admin_reply_json(req, 200, o);
	else
		admin_reply_err(req, -ENOENT, "gone meanwhile");
	return NULL;
}

/* Whether the answer went to a thread (else the caller answers without usage). */
static bool
usage_reply(const struct cfg *c, const struct admin_node *self, struct admin_req *req,
	    const struct cfg_fs *f, const char *name)
{
	struct usage_job *j = sh_calloc(1, sizeof(*j));
	int rc = -1;

	if (j != NULL && (j->c = cfg_new()) != NULL && cfg_copy(j->c, c) == 0) {
		j->self = self;
		j->req = req;
		j->fs = f->id;
		snprintf(j->name, sizeof(j->name), "%s", name);
		rc = admin_detach(usage_run, j);
	}
	if (rc == 0)
		return true;
	if (j != NULL)
		cfg_free(j->c);
	sh_free(j);
	return false;
}

/* POST /v1/fs/FS/snapshots (and /restore), from the request to its answer. */
struct snap_wait {
	struct cluster *cl;
	struct admin_req *req;
	uint64_t until;	 /* sh_clock_mono_ns: answer 504 if not ready by then */
	bool seen;	 /* this node's configuration has had the snapshot */
	bool writable;	 /* a writable snapshot: its clone waited for too */
	uint32_t fs_id;	 /* once seen */
	uint32_t before; /* a restore: the filesystem's restores before it */
	char fs[CFG_NAME_MAX], name[CFG_NAME_MAX];
	char clone[CFG_NAME_MAX]; /* a clone: its name */
	/* once the change is committed: waited for until done says so, then answered */
	bool (*done)(void *arg, const struct cfg *c);
	void (*answer)(void *arg, int status, const char *msg);
};

static void
reply_late(struct admin_req *req, const char *msg)
{
	admin_reply_json(req, 504,
			 json_pack("{s:s, s:s}", "error", msg, "code", sh_errname(-ETIMEDOUT)));
}

/* The snapshot is ready, being deleted, or gone: done waiting. */
static bool
settled(void *arg, const struct cfg *c)
{
	struct snap_wait *w = arg;
	const struct cfg_fs *f = w->seen ? NULL : cfg_fs_find(c, w->fs);
	const struct cfg_snap *s = NULL;

	if (!w->seen && f != NULL && cfg_snap_find(c, f->id, w->name) != NULL) {
		w->seen = true;
		w->fs_id = f->id;
	}
	if (!w->seen)
		return false; /* committed, but not in this node's copy yet */
	s = cfg_snap_find(c, w->fs_id, w->name);
	if (s != NULL && s->state == CFG_SNAP_READY && w->writable) {
		const struct cfg_fs *wf = cfg_writable_of(c, cfg_fs_by_id(c, w->fs_id), s);

		return wf == NULL || wf->clone_state != CFG_CLONE_CREATING;
	}
	return s == NULL || s->state != CFG_SNAP_CREATING;
}

static void
on_settled(void *arg, int status, const char *msg)
{
	struct snap_wait *w = arg;
	const struct cfg *c;
	const struct cfg_snap *s = NULL;
	char err[512];

	if (status != 0 && status != -ETIMEDOUT) { /* the node stops */
		snprintf(err, sizeof(err),
			 "%s: snapshot %s of %s is created, and becomes ready later",
			 *msg ? msg : sh_strerror(status), w->name, w->fs);
		admin_reply_err(w->req, status, err);
		goto out;
	}
	c = cluster_cfg(w->cl);
	s = w->seen ? cfg_snap_find(c, w->fs_id, w->name) : NULL;
	if (s != NULL && s->state == CFG_SNAP_READY && w->writable && !settled(w, c)) {
		snprintf(err, sizeof(err),
			 "snapshot %s of %s is ready, but not writable yet: not every metadata "
			 "group serves %s@%s; it opens when they do",
			 w->name, w->fs, w->fs, w->name);
		reply_late(w->req, err);
	} else if (s != NULL && s->state == CFG_SNAP_READY) {
		admin_reply_json(w->req, 201, admin_snap_json(c, s, NULL));
	} else if (s != NULL && s->state == CFG_SNAP_CREATING) {
		snprintf(err, sizeof(err),
			 "snapshot %s of %s is still being created: not every metadata group has "
			 "taken version %llu yet; it becomes ready when they have",
			 w->name, w->fs, (unsigned long long)s->version + 1);
		reply_late(w->req, err);
	} else if (w->seen) {
		snprintf(err, sizeof(err), "snapshot %s of %s was deleted before it became ready",
			 w->name, w->fs);
		admin_reply_err(w->req, -ENOENT, err);
	} else {
		snprintf(err, sizeof(err),
			 "snapshot %s of %s is created, but this node has not heard of it yet "
			 "(configuration epoch %llu): list the snapshots to see when it is ready",
			 w->name, w->fs, (unsigned long long)c->epoch);
		reply_late(w->req, err);
	}
out:
	sh_free(w);
}

static void
on_submitted(void *arg, int status, const char *msg)
{
	struct snap_wait *w = arg;
	uint64_t now = sh_clock_mono_ns();
	int rc;

	if (status < 0) {
		admin_reply_err(w->req, status, msg);
		sh_free(w);
		return;
	}
	rc = cluster_wait(w->cl, w->done, w->until > now ? w->until - now : 0, w->answer, w);
	if (rc < 0)
		w->answer(w, rc, "");
}

/*
 * cmd (name: the filesystem, snap: the body's string field `field`)
 * submitted, answered by answer once done says so, or 504 after the wait.
 */
static void
submit_and_wait(struct cluster *cl, const struct admin_node *self, struct admin_req *req,
		struct cfg_cmd *cmd, const char *field, struct snap_wait *w)
{
	uint64_t wait =
	    self->snap_wait_ns ? self->snap_wait_ns : (uint64_t)ADMIN_SNAP_WAIT_S * SH_NSEC_PER_SEC;
	json_t *o = admin_body_object(req), *v;
	char err[64];
	int rc;

	if (o == NULL) {
		sh_free(w);
		return;
	}
	v = json_object_get(o, field);
	if (v == NULL || !json_is_string(v) || strlen(json_string_value(v)) >= CFG_NAME_MAX) {
		json_decref(o);
		sh_free(w);
		snprintf(err, sizeof(err),
			 v == NULL ? "missing field \"%s\""
				   : "field \"%s\" must be a string of at most 63 bytes",
			 field);
		admin_reply_err(req, -EINVAL, err);
		return;
	}
	snprintf(cmd->snap, sizeof(cmd->snap), "%s", json_string_value(v));
	/* a snapshot: read-only, or writable ({"writable": true}) */
	v = json_object_get(o, "writable");
	if (cmd->op == CFG_OP_SNAP_CREATE && v != NULL && !json_is_boolean(v)) {
		json_decref(o);
		sh_free(w);
		admin_reply_err(req, -EINVAL, "field \"writable\" must be true or false");
		return;
	}
	if (cmd->op == CFG_OP_SNAP_CREATE && json_is_true(v)) {
		cmd->state = CFG_SNAP_WRITABLE;
		w->writable = true;
	}
	json_decref(o);
	w->cl = cl;
	w->req = req;
	w->until = sh_clock_mono_ns() + wait;
	snprintf(w->fs, sizeof(w->fs), "%s", cmd->name);
	snprintf(w->name, sizeof(w->name), "%s", cmd->snap);
	rc = admin_submit(cl, cmd, req, on_submitted, w);
	if (rc < 0) {
		sh_free(w);
		admin_reply_err(req, rc, "cannot submit the change");
	}
}

static void
create(struct cluster *cl, const struct admin_node *self, struct admin_req *req, const char *fs)
{
	struct cfg_cmd cmd = { .op = CFG_OP_SNAP_CREATE };
	struct snap_wait *w = sh_calloc(1, sizeof(*w));

	if (w == NULL) {
		admin_reply_err(req, -ENOMEM, "out of memory");
		return;
	}
	snprintf(cmd.name, sizeof(cmd.name), "%s", fs);
	w->done = settled;
	w->answer = on_settled;
	submit_and_wait(cl, self, req, &cmd, "name", w);
}

static void
on_deleted(void *arg, int status, const char *msg)
{
	struct admin_req *req = arg;

	if (status < 0) {
		admin_reply_err(req, status, msg);
		return;
	}
	/* accepted: the metadata layer frees its space, then forgets it (snap.forget) */
	admin_reply_json(req, 202, json_pack("{s:b}", "ok", 1));
}

static void
del(struct cluster *cl, struct admin_req *req, const char *fs, const char *name)
{
	struct cfg_cmd cmd = { .op = CFG_OP_SNAP_DELETE };
	int rc;

	snprintf(cmd.name, sizeof(cmd.name), "%s", fs);
	snprintf(cmd.snap, sizeof(cmd.snap), "%s", name);
	rc = admin_submit(cl, &cmd, req, on_deleted, req);
	if (rc < 0)
		admin_reply_err(req, rc, "cannot submit the change");
}

/* A filesystem's snapshot schedule: every_s (0: none), keep (0 when none). */
static json_t *
schedule_json(const struct cfg_fs *f)
{
	return json_pack("{s:I, s:I}", "every_s", (json_int_t)f->snap_every_s, "keep",
			 (json_int_t)f->snap_keep);
}

/* PUT /v1/fs/FS/snapshots/schedule, from the request to its answer. */
struct sched_put {
	struct admin_req *req;
	uint64_t every, keep;
};

static void
on_scheduled(void *arg, int status, const char *msg)
{
	struct sched_put *p = arg;

	if (status < 0)
		admin_reply_err(p->req, status, msg);
	else
		admin_reply_json(p->req, 200,
				 json_pack("{s:I, s:I}", "every_s", (json_int_t)p->every, "keep",
					   (json_int_t)(p->every ? p->keep : 0)));
	sh_free(p);
}

/* A non-negative integer field of o; absent: dflt, or an error if dflt < 0. */
static int
uint_field(json_t *o, const char *key, json_int_t dflt, uint64_t *out, char *err, size_t elen)
{
	json_t *v = json_object_get(o, key);

	if (v == NULL && dflt < 0) {
		snprintf(err, elen, "missing field \"%s\"", key);
		return -EINVAL;
	}
	if (v != NULL && (!json_is_integer(v) || json_integer_value(v) < 0)) {
		snprintf(err, elen, "field \"%s\" must be a non-negative integer", key);
		return -EINVAL;
	}
	*out = (uint64_t)(v ? json_integer_value(v) : dflt);
	return 0;
}

/*
 * /v1/fs/FS/snapshots/schedule: GET shows it, PUT {"every_s", "keep"?}
 * sets it (every_s 0: off; keep CFG_SNAP_KEEP_DEFAULT unless said),
 * checked by snap.schedule (-EALREADY, 409, when it is so already).
 */
static void
schedule(struct cluster *cl, struct admin_req *req, const char *fs, const struct cfg_fs *f)
{
	struct cfg_cmd cmd = { .op = CFG_OP_SNAP_SCHEDULE };
	char err[CFG_MSG_MAX];
	struct sched_put *p;
	json_t *o;
	int rc;

	if (strcmp(req->method, "GET") == 0) {
		if (f == NULL) {
			snprintf(err, sizeof(err), "no filesystem '%s'", fs);
			admin_reply_err(req, -ENOENT, err);
		} else {
			admin_reply_json(req, 200, schedule_json(f));
		}
		return;
	}
	if (strcmp(req->method, "PUT") != 0) {
		admin_reply_json(req, 405,
				 json_pack("{s:s, s:s}", "error",
					   "method not allowed: GET or PUT the schedule (PUT "
					   "{\"every_s\": 0} turns it off)",
					   "code", "EINVAL"));
		return;
	}
	o = admin_body_object(req);
	if (o == NULL)
		return;
	rc = uint_field(o, "every_s", -1, &cmd.size, err, sizeof(err));
	if (rc == 0)
		rc = uint_field(o, "keep", CFG_SNAP_KEEP_DEFAULT, &cmd.quota, err, sizeof(err));
	json_decref(o);
	if (rc < 0) {
		admin_reply_err(req, rc, err);
		return;
	}
	snprintf(cmd.name, sizeof(cmd.name), "%s", fs);
	p = sh_calloc(1, sizeof(*p));
	if (p == NULL) {
		admin_reply_err(req, -ENOMEM, "out of memory");
		return;
	}
	p->req = req;
	p->every = cmd.size;
	p->keep = cmd.quota;
	rc = admin_submit(cl, &cmd, req, on_scheduled, p);
	if (rc < 0) {
		sh_free(p);
		admin_reply_err(req, rc, "cannot submit the change");
	}
}

/* The restore asked for is done (or the filesystem is gone): done waiting. */
static bool
restored(void *arg, const struct cfg *c)
{
	struct snap_wait *w = arg;
	const struct cfg_fs *f = cfg_fs_find(c, w->fs);

	return f == NULL || (f->restore_epoch > w->before && f->restore_phase == CFG_RESTORE_NONE);
}

static void
on_restored(void *arg, int status, const char *msg)
{
	struct snap_wait *w = arg;
	const struct cfg_fs *f = cfg_fs_find(cluster_cfg(w->cl), w->fs);
	char err[512];

	if (status != 0 && status != -ETIMEDOUT) {
		snprintf(err, sizeof(err), "%s: the restore of %s goes on, and ends later",
			 *msg ? msg : sh_strerror(status), w->fs);
		admin_reply_err(w->req, status, err);
	} else if (f == NULL) {
		snprintf(err, sizeof(err), "filesystem %s was deleted meanwhile", w->fs);
		admin_reply_err(w->req, -ENOENT, err);
	} else if (f->restore_epoch > w->before && f->restore_phase == CFG_RESTORE_NONE) {
		admin_reply_json(w->req, 200,
				 json_pack("{s:s, s:s, s:I}", "fs", w->fs, "snapshot", w->name,
					   "restore", (json_int_t)f->restore_epoch));
	} else {
		snprintf(err, sizeof(err),
			 "filesystem %s is still going back to snapshot %s (%s): it serves again "
			 "when every metadata group has",
			 w->fs, w->name,
			 f->restore_phase == CFG_RESTORE_PAUSING ? "pausing" : "reverting");
		reply_late(w->req, err);
	}
	sh_free(w);
}

void
admin_restore_handle(struct cluster *cl, const struct admin_node *self, struct admin_req *req,
		     const char *fs, const char *rest)
{
	const struct cfg_fs *f = cfg_fs_find(cluster_cfg(cl), fs);
	struct cfg_cmd cmd = { .op = CFG_OP_FS_RESTORE };
	struct snap_wait *w;

	if (strcmp(req->method, "POST") != 0 || rest[0] != '\0') {
		admin_reply_json(req, 405,
				 json_pack("{s:s, s:s}", "error",
					   "method not allowed: POST /v1/fs/FS/restore "
					   "{\"snapshot\": NAME}",
					   "code", "EINVAL"));
		return;
	}
	w = sh_calloc(1, sizeof(*w));
	if (w == NULL) {
		admin_reply_err(req, -ENOMEM, "out of memory");
		return;
	}
	snprintf(cmd.name, sizeof(cmd.name), "%s", fs);
	w->before = f != NULL ? f->restore_epoch : 0;
	w->done = restored;
	w->answer = on_restored;
	submit_and_wait(cl, self, req, &cmd, "snapshot", w);
}

/* The clone asked for serves (or is gone): done waiting. */
static bool
cloned(void *arg, const struct cfg *c)
{
	struct snap_wait *w = arg;
	const struct cfg_fs *f = cfg_fs_find(c, w->clone);

	return f == NULL || f->clone_state != CFG_CLONE_CREATING;
}

static void
on_cloned(void *arg, int status, const char *msg)
{
	struct snap_wait *w = arg;
	const struct cfg_fs *f = cfg_fs_find(cluster_cfg(w->cl), w->clone);
	char err[512];

	if (status != 0 && status != -ETIMEDOUT) {
		snprintf(err, sizeof(err), "%s: clone %s of %s@%s is made, and serves later",
			 *msg ? msg : sh_strerror(status), w->clone, w->fs, w->name);
		admin_reply_err(w->req, status, err);
	} else if (f != NULL && f->clone_state == CFG_CLONE_READY) {
		admin_reply_json(w->req, 201,
				 json_pack("{s:s, s:s, s:s, s:i}", "fs", w->clone, "origin", w->fs,
					   "snapshot", w->name, "branch", (int)f->branch));
	} else if (f != NULL && f->clone_state == CFG_CLONE_CREATING) {
		snprintf(err, sizeof(err),
			 "clone %s of %s@%s is made, but not every metadata group of %s serves "
			 "it yet: it serves when they do",
			 w->clone, w->fs, w->name, w->fs);
		reply_late(w->req, err);
	} else {
		snprintf(err, sizeof(err), "clone %s was deleted before it served", w->clone);
		admin_reply_err(w->req, -ENOENT, err);
	}
	sh_free(w);
}

void
admin_clone_handle(struct cluster *cl, const struct admin_node *self, struct admin_req *req,
		   const char *fs, const char *rest)
{
	struct cfg_cmd cmd = { .op = CFG_OP_FS_CLONE };
	struct snap_wait *w;
	json_t *o, *v;

	if (strcmp(req->method, "POST") != 0 || rest[0] != '\0') {
		admin_reply_json(req, 405,
				 json_pack("{s:s, s:s}", "error",
					   "method not allowed: POST /v1/fs/FS/clone "
					   "{\"snapshot\": NAME, \"name\": NEWFS}",
					   "code", "EINVAL"));
		return;
	}
	o = admin_body_object(req);
	if (o == NULL)
		return;
	v = json_object_get(o, "name");
	if (v == NULL || !json_is_string(v) || strlen(json_string_value(v)) >= CFG_NAME_MAX) {
		json_decref(o);
		admin_reply_err(req, -EINVAL,
				v == NULL ? "missing field \"name\" (the clone's)"
					  : "field \"name\" must be a string of at most 63 bytes");
		return;
	}
	snprintf(cmd.path, sizeof(cmd.path), "%s", json_string_value(v));
	json_decref(o);
	w = sh_calloc(1, sizeof(*w));
	if (w == NULL) {
		admin_reply_err(req, -ENOMEM, "out of memory");
		return;
	}
	snprintf(cmd.name, sizeof(cmd.name), "%s", fs);
	snprintf(w->clone, sizeof(w->clone), "%.*s", (int)sizeof(w->clone) - 1, cmd.path);
	w->done = cloned;
	w->answer = on_cloned;
	submit_and_wait(cl, self, req, &cmd, "snapshot", w);
}

void
admin_snap_handle(struct cluster *cl, const struct admin_node *self, struct admin_req *req,
		  const char *fs, const char *name)
{
	const struct cfg *c = cluster_cfg(cl);
	const struct cfg_fs *f = cfg_fs_find(c, fs);
	const struct cfg_snap *s = NULL;
	char err[CFG_MSG_MAX];

	if (strcmp(name, "schedule") == 0) { /* no snapshot takes that name (snap.create) */
		schedule(cl, req, fs, f);
		return;
	}
	if (strcmp(req->method, "GET") == 0) {
		if (f == NULL) {
			snprintf(err, sizeof(err), "no filesystem '%s'", fs);
			admin_reply_err(req, -ENOENT, err);
		} else if (name[0] != '\0' && (s = cfg_snap_find(c, f->id, name)) == NULL) {
			snprintf(err, sizeof(err), "filesystem %s has no snapshot '%s'", fs, name);
			admin_reply_err(req, -ENOENT, err);
		} else if (strstr(req->query, "usage=0") != NULL ||
			   !usage_reply(c, self, req, f, name)) {
			/* without what each holds (asked not to, or no thread for it) */
			admin_reply_json(req, 200,
					 name[0] ? admin_snap_json(c, s, NULL)
						 : list_json(c, f, NULL));
		}
		return;
	}
	if (strcmp(req->method, "POST") == 0 && name[0] == '\0') {
		create(cl, self, req, fs);
		return;
	}
	if (strcmp(req->method, "DELETE") == 0 && name[0] != '\0') {
		del(cl, req, fs, name);
		return;
	}
	sh_log_debug("%s %s: not allowed", req->method, req->path);
	admin_reply(req, 405, NULL, "{\"error\":\"method not allowed\",\"code\":\"EINVAL\"}\n", 47);
}
