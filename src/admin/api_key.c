// SPDX-License-Identifier: Apache-2.0
/*
 * The admin API's access key routes (docs/admin-api.md, docs/security.md
 * "Clients' keys"): a file system's keys listed, made (the key's text is
 * in that answer and nowhere after: the cluster keeps it, but never shows
 * it again), and revoked; an encrypted file system's wrapped master key
 * read and wrapped anew (docs/security.md "Rotation").
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/access_key.h"
#include "../base/alloc.h"
#include "../base/secret.h"
#include "api_int.h"

SH_LOG_FACILITY("admin.key");

static json_t *
key_json(const struct cfg *c, const struct cfg_key *k)
{
	const struct cfg_fs *f = cfg_fs_by_id(c, k->fs);
	json_t *j = json_pack("{s:I, s:s, s:s, s:b, s:I}", "id", (json_int_t)k->id, "fs",
			      f ? f->name : "", "access", cfg_key_access_name(k->access), "revoked",
			      k->revoked, "created", (json_int_t)(k->created / 1000000000));

	if (k->revoked)
		json_object_set_new(j, "revoked_at",
				    json_integer((json_int_t)(k->revoked_at / 1000000000)));
	return j;
}

/* POST /v1/fs/FS/keys, from the request to its answer. */
struct key_new {
	struct admin_req *req;
	char fs[CFG_NAME_MAX];
	uint32_t id;
	uint8_t access;
	char text[SH_KEY_TEXT_MAX];
};

static void
on_created(void *arg, int status, const char *msg)
{
	struct key_new *k = arg;

	if (status < 0)
		admin_reply_err(k->req, status, msg);
	else
		admin_reply_json(k->req, 201,
				 json_pack("{s:I, s:s, s:s, s:s}", "id", (json_int_t)k->id, "fs",
					   k->fs, "access", cfg_key_access_name(k->access), "key",
					   k->text));
	explicit_bzero(k->text, sizeof(k->text));
	sh_free(k);
}

/* A new key: {"access": "read-only" | "read-write"}; its id and bytes drawn here. */
static void
create(struct cluster *cl, struct admin_req *req, const char *fs)
{
	struct cfg_cmd cmd = { .op = CFG_OP_KEY_CREATE };
	json_t *o = admin_body_object(req), *a;
	const char *access;
	struct key_new *k;
	uint8_t id[SH_SECRET_LEN];
	int rc;

	if (o == NULL)
		return;
	a = json_object_get(o, "access");
	access = json_is_string(a) ? json_string_value(a) : "";
	cmd.state = strcmp(access, "read-only") == 0	? CFG_KEY_READ
		    : strcmp(access, "read-write") == 0 ? CFG_KEY_WRITE
							: 0;
	json_decref(o);
	if (cmd.state == 0) {
		admin_reply_err(req, -EINVAL,
				"field \"access\" must be \"read-only\" or \"read-write\"");
		return;
	}
	k = sh_calloc(1, sizeof(*k));
	if (k == NULL) {
		admin_reply_err(req, -ENOMEM, "out of memory");
		return;
	}
	rc = sh_secret_random(cmd.key);
	if (rc == 0)
		rc = sh_secret_random(id);
	if (rc < 0) {
		sh_free(k);
		admin_reply_err(req, rc, "no random bytes for the key");
		return;
	}
	/* an id at random (31 bits, from CFG_KEY_FIRST): a clash is refused, -EEXIST */
	k->id =
	    CFG_KEY_FIRST + (uint32_t)((id[0] | id[1] << 8 | id[2] << 16 | (uint32_t)id[3] << 24) %
				       (0x7fffffffu - CFG_KEY_FIRST));
	cmd.id = k->id;
	k->req = req;
	k->access = cmd.state;
	snprintf(k->fs, sizeof(k->fs), "%s", fs);
	snprintf(cmd.name, sizeof(cmd.name), "%s", fs);
	sh_key_format(k->id, cmd.key, k->text);
	rc = admin_submit(cl, &cmd, req, on_created, k);
	explicit_bzero(cmd.key, sizeof(cmd.key));
	if (rc < 0) {
		explicit_bzero(k->text, sizeof(k->text));
		sh_free(k);
		admin_reply_err(req, rc, "cannot submit the change");
	}
}

static void
on_ok(void *arg, int status, const char *msg)
{
	struct admin_req *req = arg;

	if (status < 0)
		admin_reply_err(req, status, msg);
	else
		admin_reply_json(req, 200, json_pack("{s:b}", "ok", 1));
}

/*
 * /v1/fs/FS/keys/wrapped (docs/security.md, "Rotation"): an encrypted
 * filesystem's master key as the configuration keeps it, wrapped (GET:
 * {"wrapped_key": hex}; no secret: only its clients' key opens it), and
 * wrapped anew (PUT {"wrapped_key": the new, "replaces": the one read}):
 * fs.rekey, refused (409) if another came first.
 */
static void
wrapped(struct cluster *cl, struct admin_req *req, const struct cfg_fs *f)
{
	struct cfg_cmd cmd = { .op = CFG_OP_FS_REKEY };
	uint8_t old[CFG_WRAP_LEN];
	char hex[2 * CFG_WRAP_LEN + 1];
	json_t *o;
	int rc;

	if (!f->sealed) {
		admin_reply_err(req, -ENOENT, "the filesystem is not encrypted: it has no key");
		return;
	}
	if (!cfg_fs_own(f)) {
		admin_reply_err(req, -EINVAL,
				"the filesystem is a clone: it opens with its origin's file system "
				"key (rekey the origin)");
		return;
	}
	if (strcmp(req->method, "GET") == 0) {
		sh_hex(f->wrapped, CFG_WRAP_LEN, hex);
		admin_reply_json(req, 200,
				 json_pack("{s:s, s:s}", "fs", f->name, "wrapped_key", hex));
		return;
	}
	if (strcmp(req->method, "PUT") != 0) {
		admin_reply(req, 405, NULL,
			    "{\"error\":\"method not allowed\",\"code\":\"EINVAL\"}\n", 47);
		return;
	}
	if ((o = admin_body_object(req)) == NULL)
		return;
	rc = sh_unhex(json_string_value(json_object_get(o, "wrapped_key")), cmd.wrapped,
		      CFG_WRAP_LEN) &&
		     sh_unhex(json_string_value(json_object_get(o, "replaces")), old, CFG_WRAP_LEN)
		 ? 0
		 : -EINVAL;
	json_decref(o);
	if (rc < 0) {
		admin_reply_err(
		    req, rc,
		    "fields \"wrapped_key\" and \"replaces\" must be 128 hex digits each "
		    "(shoal fs rekey makes them)");
		return;
	}
	snprintf(cmd.name, sizeof(cmd.name), "%s", f->name);
	memcpy(cmd.key, old, CFG_KEY_LEN);
	rc = admin_submit(cl, &cmd, req, on_ok, req);
	if (rc < 0)
		admin_reply_err(req, rc, "cannot submit the change");
}

void
admin_key_handle(struct cluster *cl, struct admin_req *req, const char *fs, const char *id)
{
	const struct cfg *c = cluster_cfg(cl);
	const struct cfg_fs *f = cfg_fs_find(c, fs);
	struct cfg_cmd cmd = { .op = CFG_OP_KEY_REVOKE };
	const struct cfg_key *k = NULL;
	char err[CFG_MSG_MAX], *end;
	unsigned long v = 0;
	int rc;

	if (f == NULL) {
		snprintf(err, sizeof(err), "no filesystem '%s'", fs);
		admin_reply_err(req, -ENOENT, err);
		return;
	}
	if (strcmp(id, "wrapped") == 0) {
		wrapped(cl, req, f);
		return;
	}
	if (id[0] != '\0') {
		v = strtoul(id, &end, 10);
		k = *end == '\0' && v <= UINT32_MAX ? cfg_key_find(c, (uint32_t)v) : NULL;
		if (k == NULL || k->fs != f->id) {
			snprintf(err, sizeof(err), "filesystem %s has no access key '%s'", fs, id);
			admin_reply_err(req, -ENOENT, err);
			return;
		}
	}
	if (strcmp(req->method, "GET") == 0) {
		json_t *a = json_array();

		for (uint32_t i = 0; k == NULL && i < c->nkeys; i++)
			if (c->keys[i].fs == f->id)
				json_array_append_new(a, key_json(c, &c->keys[i]));
		admin_reply_json(req, 200, k ? (json_decref(a), key_json(c, k)) : a);
		return;
	}
	if (strcmp(req->method, "POST") == 0 && k == NULL) {
		create(cl, req, fs);
		return;
	}
	if (strcmp(req->method, "DELETE") == 0 && k != NULL) {
		cmd.id = k->id;
		rc = admin_submit(cl, &cmd, req, on_ok, req);
		if (rc < 0)
			admin_reply_err(req, rc, "cannot submit the change");
		return;
	}
	sh_log_debug("%s %s: not allowed", req->method, req->path);
	admin_reply(req, 405, NULL, "{\"error\":\"method not allowed\",\"code\":\"EINVAL\"}\n", 47);
}
