/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The admin JSON API (docs/admin-api.md): the routes of the management
 * HTTP server, on top of the cluster service.
 *
 *   GET    /v1/status                 cluster, this node, Raft, counts
 *   POST   /v1/cluster                {"name", "buckets"}: create, on this node
 *   GET    /v1/nodes                  POST {"id", "mgmt", "data", "domain"}
 *   DELETE /v1/nodes/ID
 *   GET    /v1/drives                 POST {"node", "path"}
 *   GET    /v1/nets                   POST {"node", "addr", "label"}
 *   GET    /v1/fs                     POST {"name", "protection", "compression", "dedup", "quota"}
 *   DELETE /v1/fs/NAME
 *   GET    /v1/fs/NAME/snapshots      POST {"name"}: 201 once ready (504 if not in time)
 *   GET    /v1/fs/NAME/snapshots/SNAP DELETE: 202 (its space is freed in the background)
 *   GET    /v1/events                 newest first; ?limit=N
 *   GET    /metrics                   Prometheus text
 *
 * Errors: {"error": reason, "code": "EEXIST"} with 400 (bad request), 404
 * (no such thing), 405, 409 (exists), 422 (cannot be placed or is full),
 * 503 (no leader or quorum, not in a cluster), 504 (a snapshot created but
 * not ready in time), 500.
 */
#ifndef SH_ADMIN_API_H
#define SH_ADMIN_API_H

#include "../cluster/cluster.h"
#include "../meta/msvc.h"
#include "http.h"
#include "metrics.h"

typedef void (*admin_stats_fn)(void *ctx, const struct admin_stats *const *ws, unsigned n);

/* Node-local facts for /v1/status and /metrics. */
struct admin_node {
	uint64_t id;
	const char *mode; /* "cpu" or "performance" */
	unsigned workers;
	uint64_t started_ns; /* env_realtime at start */
	/* This node's metadata groups as last published by the worker that serves them: up to
	 * max into out, returns how many. Optional. */
	unsigned (*meta_groups)(void *arg, struct msvc_group_info *out, unsigned max);
	/* Call fn with the loops' latest counters (valid only during the call). Optional. */
	void (*with_stats)(void *arg, admin_stats_fn fn, void *ctx);
	void *arg;
	/* How long POST .../snapshots waits for the snapshot to be ready (0: ADMIN_SNAP_WAIT_S). */
	uint64_t snap_wait_ns;
	/* The admin token, for this node's calls to the others' APIs (NULL: none). */
	const char *token;
	/* Which cluster secret this node holds (sh_secret_fingerprint; NULL: none). */
	const char *secret_fp;
	/* A second secret it accepts while the secret is rotated ("" or NULL: none). */
	const char *secret_also_fp;
	/* This node's HTTP server, for its count of refused requests (NULL: none). */
	const struct admin_http *http;
};

/*
 * A snapshot is ready once every metadata group of its filesystem writes
 * at the next version; POST .../snapshots waits for that at most this
 * long after it took the request, commit included, then answers 504 (the
 * snapshot stays and becomes ready later). Less than ADMIN_REPLY_TIMEOUT_S,
 * so that the reason, not the HTTP server's timeout, answers.
 */
#define ADMIN_SNAP_WAIT_S (ADMIN_REPLY_TIMEOUT_S - 2)

void admin_api_handle(struct cluster *cl, const struct admin_node *self, struct admin_req *req);

/* The HTTP status for a negative errno from a change. */
unsigned admin_http_status(int err);

#endif /* SH_ADMIN_API_H */
