/* SPDX-License-Identifier: Apache-2.0 */
/* Shared by the admin API's files (api.c, api_heal.c, api_snap.c); not for other modules. */
#ifndef SH_ADMIN_API_INT_H
#define SH_ADMIN_API_INT_H

#include <jansson.h>

#include "../cluster/cluster.h"
#include "../cluster/rgroup.h"
#include "api.h"
#include "metrics.h"

/* api_heal.c: self-healing's views and changes */
/* This node's part (its loops' counters summed). */
void admin_heal_local(const struct admin_node *self, struct msvc_heal_stats *out);
json_t *admin_heal_json(const struct admin_node *self);
/* The cluster's: every node up asked (2 s each), at now (ns since the Unix epoch). */
json_t *admin_rebuild_json(const struct cfg *c, const struct admin_node *self, uint64_t now);
/*
 * GET /v1/rebuild answered from a thread of its own with a copy of c, so
 * that a node slow to answer (2 s each) never holds up the management
 * loop (the configuration's Raft, heartbeats); inline if no thread starts.
 */
void admin_rebuild_reply(const struct cfg *c, const struct admin_node *self, struct admin_req *req);
/* Answer req with j (decref'd), compact, a newline after it. */
void admin_reply_json(struct admin_req *req, unsigned status, json_t *j);
/* Answer req with {"error": msg (sh_strerror(err) if empty), "code": err's name ("ENOENT")},
 * its status by err. */
void admin_reply_err(struct admin_req *req, int err, const char *msg);
/*
 * cluster_submit, with who asked (cmd->by: the audit trail, docs/security.md):
 * the admin API and the caller's address.
 */
int admin_submit(struct cluster *cl, struct cfg_cmd *cmd, const struct admin_req *req,
		 cluster_cb cb, void *arg);
/* The request's body as a JSON object, or NULL (answered with the reason). */
json_t *admin_body_object(struct admin_req *req);
json_t *admin_settings_json(const struct cfg *c);
/*
 * PUT /v1/WHAT/KEY with body o into a command: drives/ID {"state":"failed"},
 * settings/NAME {"value":N}. 0, -EINVAL or -ENOENT with a reason in err.
 */
int admin_heal_put(const char *what, const char *key, json_t *o, struct cfg_cmd *cmd, char *err,
		   size_t elen);

/*
 * DELETE /v1/drives/KEY into a command: refused (-EBUSY, a reason in err)
 * while a stripe still needs a fragment on it (it drains, or rebuilds).
 */
int admin_drive_remove(const struct cfg *c, const struct admin_node *self, const char *key,
		       struct cfg_cmd *cmd, char *err, size_t elen);
/* DELETE /v1/nodes/KEY: refused (-EBUSY) while its draining drives hold what a stripe needs. */
int admin_node_remove(const struct cfg *c, const struct admin_node *self, const char *key,
		      struct cfg_cmd *cmd, char *err, size_t elen);

/* api_snap.c: a filesystem's snapshots */
/*
 * The routes under /v1/fs/FS/snapshots: name is "" for the collection
 * (GET lists, POST creates and answers once ready), "schedule" for the
 * filesystem's snapshot schedule (GET shows, PUT sets), else one snapshot
 * (GET shows, DELETE deletes).
 */
void admin_snap_handle(struct cluster *cl, const struct admin_node *self, struct admin_req *req,
		       const char *fs, const char *name);
/*
 * POST /v1/fs/FS/restore {"snapshot": NAME}: FS goes back to its snapshot
 * (fs.restore), answered once it serves again (200), or 504 while it is
 * still under way (docs/snapshots.md "Restore").
 */
void admin_restore_handle(struct cluster *cl, const struct admin_node *self, struct admin_req *req,
			  const char *fs, const char *rest);
/*
 * POST /v1/fs/FS/clone {"snapshot": NAME, "name": NEWFS}: a writable clone
 * of FS@NAME (fs.clone), answered once it serves (201), or 504 while the
 * metadata groups are still being told (docs/snapshots.md "Clones").
 */
void admin_clone_handle(struct cluster *cl, const struct admin_node *self, struct admin_req *req,
			const char *fs, const char *rest);
/* A snapshot as JSON: name, fs, version, state, created (s in c). */
/*
 * fn(arg) on a detached thread of its own (an answer that asks other nodes,
 * off the management loop): 0, or the error (fn does not run).
 */
int admin_detach(void *(*fn)(void *), void *arg);
/* A snapshot as the API shows it; with parts (admin_usage_parts), the bytes only it holds. */
json_t *admin_snap_json(const struct cfg *c, const struct cfg_snap *s, json_t *parts);
/*
 * Every node's part of the filesystems' usage (its /v1/usage; this node's
 * at once): a JSON array, one object per node that answered within 2 s;
 * *asked, how many nodes were asked.
 */
json_t *admin_usage_parts(const struct cfg *c, const struct admin_node *self, unsigned *asked);

/* api_key.c: a filesystem's access keys */
/*
 * The routes under /v1/fs/FS/keys: id is "" for the collection (GET lists,
 * POST {"access"} makes one and answers with its text, once), else one key
 * (GET shows, DELETE revokes).
 */
void admin_key_handle(struct cluster *cl, struct admin_req *req, const char *fs, const char *id);

/* api_net.c: networks */
/* GET /v1/processes: this node's loops, their interfaces, peers and paths. */
json_t *admin_processes_json(struct cluster *cl, const struct admin_node *self);
/* DELETE /v1/nets/ADDR into a command (-ENOENT with a reason: no node has it). */
int admin_net_remove(const struct cfg *c, const char *key, struct cfg_cmd *cmd, char *err,
		     size_t elen);

#endif /* SH_ADMIN_API_INT_H */
