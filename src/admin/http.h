/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The admin HTTP server (management network, TCP): libmicrohttpd threads
 * take requests and hand each to a handler that runs on an env loop (the
 * management thread), which answers with admin_reply — at once or after
 * a cluster change commits. A connection thread waits for its answer
 * (at most ADMIN_REPLY_TIMEOUT_S, then 504).
 */
#ifndef SH_ADMIN_HTTP_H
#define SH_ADMIN_HTTP_H

#include "../base/secret.h"
#include "../env/env.h"

#define ADMIN_BODY_MAX	      (64 * 1024)
#define ADMIN_REPLY_TIMEOUT_S 30

struct admin_http;

struct admin_req {
	const char *method; /* "GET", "POST", "DELETE", ... */
	const char *path;   /* without the query */
	const char *query;  /* after '?', or "" */
	const char *body;   /* NUL-terminated */
	size_t body_len;
	char from[64]; /* the caller's address, "IP:PORT" ("" in tests): for the audit trail */
};

/*
 * Who may ask (docs/security.md): a request carries the cluster's token as
 * "Authorization: Bearer TOKEN", else it is answered 401 on the connection's
 * thread and never reaches the handler. Open without the token: GET
 * /v1/status (a client's first contact: which node this is, the cluster's
 * state) and, when metrics_open, GET /metrics (Prometheus scrapes).
 */
struct admin_http_opts {
	char token[SH_TOKEN_LEN + 1];	   /* "": no token asked of anyone (unit tests of routes) */
	char token_also[SH_TOKEN_LEN + 1]; /* accepted too while the secret is rotated; "": none */
	bool metrics_open;
	/*
	 * TLS (docs/security.md): the certificate (chain) and its private key,
	 * PEM text, kept by the caller while the server runs; NULL: plain HTTP.
	 */
	const char *tls_cert, *tls_key;
};

/* Whether a request may go on; authorization: the header's value, or NULL. */
bool admin_auth_allows(const struct admin_http_opts *a, const char *method, const char *path,
		       const char *authorization);

/* Runs on the env's thread; must call admin_reply(req, ...) exactly once, now or later. */
typedef void (*admin_handler)(void *arg, struct admin_req *req);

/*
 * Listen on addr ("ip:port", TCP); opts is copied (NULL: plain HTTP, no
 * token asked). -EADDRINUSE, -EINVAL (the address, or a certificate or
 * key that does not load), -EIO.
 */
int admin_http_start(struct env *env, const char *addr, const struct admin_http_opts *opts,
		     admin_handler fn, void *arg, struct admin_http **out);
/* Requests answered 401 so far (shoal_admin_unauthorized_total). */
uint64_t admin_http_refused(const struct admin_http *h);
/*
 * Answer: status (200, 400, ...), body (copied; JSON unless type says
 * otherwise; NULL: empty).
 */
void admin_reply(struct admin_req *req, unsigned status, const char *type, const char *body,
		 size_t len);
/* Stop taking requests: new ones get 503 at once. */
void admin_http_quiesce(struct admin_http *h);
/* Close the listener and wait for connection threads; pending requests get 503. */
void admin_http_stop(struct admin_http *h);

#endif /* SH_ADMIN_HTTP_H */
