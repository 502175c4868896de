// SPDX-License-Identifier: Apache-2.0
/* The admin HTTP server on libmicrohttpd (http.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "http.h"

SH_LOG_FACILITY("admin.http");

struct pending {
	struct admin_req req;
	struct sh_list link;
	struct admin_http *h;
	char *path;
	char *query;
	char *body;
	size_t len, cap;
	bool too_big;
	bool refused; /* answered 401 at its first call: nothing more of it is taken */
	/* the answer */
	bool done;
	bool abandoned; /* the connection thread gave up waiting */
	unsigned status;
	char *type;
	char *out;
	size_t out_len;
};

struct admin_http {
	struct env *env;
	struct MHD_Daemon *d;
	admin_handler fn;
	void *arg;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct sh_list queue; /* handed to the loop, not yet taken */
	struct env_async wake;
	bool quiet;
	struct admin_http_opts auth;
	uint64_t refused;   /* answered 401, under mu */
	uint64_t logged_ns; /* the last 401 logged (one a second at most), under mu */
	uint64_t unlogged;  /* 401s not logged since */
};

static void
pending_free(struct pending *p)
{
	sh_free(p->path);
	sh_free(p->query);
	sh_free(p->body);
	sh_free(p->type);
	sh_free(p->out);
	sh_free(p);
}

/* On the loop: take the queued requests and run the handler on each. */
static void
on_wake(struct env_async *a)
{
	struct admin_http *h = a->arg;

	for (;;) {
		struct pending *p = NULL;
		struct sh_list *l;

		pthread_mutex_lock(&h->mu);
		l = sh_list_pop(&h->queue);
		if (l != NULL)
			p = sh_list_entry(l, struct pending, link);
		pthread_mutex_unlock(&h->mu);
		if (p == NULL)
			break;
		h->fn(h->arg, &p->req);
	}
}

void
admin_reply(struct admin_req *req, unsigned status, const char *type, const char *body, size_t len)
{
	struct pending *p = sh_container_of(req, struct pending, req);
	struct admin_http *h = p->h;

	pthread_mutex_lock(&h->mu);
	if (p->abandoned) {
		pthread_mutex_unlock(&h->mu);
		pending_free(p);
		return;
	}
	p->status = status;
	p->type = sh_strdup(type ? type : "application/json");
	p->out = sh_malloc(len + 1);
	if (p->out != NULL) {
		if (len)
			memcpy(p->out, body, len);
		p->out[len] = '\0';
		p->out_len = len;
	} else {
		p->status = 500;
		p->out_len = 0;
	}
	p->done = true;
	pthread_cond_broadcast(&h->cv);
	pthread_mutex_unlock(&h->mu);
}

static enum MHD_Result
respond(struct MHD_Connection *c, unsigned status, const char *type, const char *body, size_t len)
{
	struct MHD_Response *r;
	enum MHD_Result ret;

	r = MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
	if (r == NULL)
		return MHD_NO;
	MHD_add_response_header(r, "Content-Type", type);
	MHD_add_response_header(r, "Connection", "close");
	ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

#define ERR_JSON(msg) "{\"error\":\"" msg "\"}\n"

bool
admin_auth_allows(const struct admin_http_opts *a, const char *method, const char *path,
		  const char *authorization)
{
	if (a->token[0] == '\0')
		return true;
	if (strcmp(method, "GET") == 0 &&
	    (strcmp(path, "/v1/status") == 0 || (a->metrics_open && strcmp(path, "/metrics") == 0)))
		return true;
	return sh_bearer_ok(authorization, a->token) ||
	       (a->token_also[0] != '\0' && sh_bearer_ok(authorization, a->token_also));
}

#define ERR_401                                                                                  \
	ERR_JSON("this needs the cluster's admin token: Authorization: Bearer TOKEN (the CLI "   \
		 "reads $SHOAL_TOKEN or $SHOAL_TOKEN_FILE; a node keeps it in DIR/admin.token; " \
		 "docs/security.md)")

/* Answer 401 and count it; logged once a second at most, with how many were not. */
/* The connection's client address, "IP:PORT" ("?" if unknown). */
static void
client_addr(struct MHD_Connection *c, char *out, size_t len)
{
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	char ip[INET6_ADDRSTRLEN] = "?";
	unsigned port = 0;

	if (ci != NULL && ci->client_addr != NULL && ci->client_addr->sa_family == AF_INET) {
		const struct sockaddr_in *sa = (const struct sockaddr_in *)ci->client_addr;

		inet_ntop(AF_INET, &sa->sin_addr, ip, sizeof(ip));
		port = ntohs(sa->sin_port);
	} else if (ci != NULL && ci->client_addr != NULL &&
		   ci->client_addr->sa_family == AF_INET6) {
		const struct sockaddr_in6 *sa = (const struct sockaddr_in6 *)ci->client_addr;

		inet_ntop(AF_INET6, &sa->sin6_addr, ip, sizeof(ip));
		port = ntohs(sa->sin6_port);
	}
	snprintf(out, len, port ? "%s:%u" : "%s", ip, port);
}

static enum MHD_Result
refuse(struct admin_http *h, struct MHD_Connection *c, const struct pending *p)
{
	char from[64];
	uint64_t now = sh_clock_mono_ns(), skipped = 0;
	bool log = false;
	struct MHD_Response *r;
	enum MHD_Result ret;

	client_addr(c, from, sizeof(from));
	pthread_mutex_lock(&h->mu);
	h->refused++;
	if (h->logged_ns == 0 || now - h->logged_ns >= SH_NSEC_PER_SEC) {
		log = true;
		skipped = h->unlogged;
		h->unlogged = 0;
		h->logged_ns = now;
	} else {
		h->unlogged++;
	}
	pthread_mutex_unlock(&h->mu);
	if (log) {
		char path[128];
		size_t i = 0;

		/* the path as MHD decoded it: control bytes would forge log lines */
		for (const char *s = p->path ? p->path : ""; *s && i + 1 < sizeof(path); s++)
			path[i++] = (unsigned char)*s < 0x20 || *s == 0x7f ? '?' : *s;
		path[i] = '\0';
		sh_log_warn("admin API: %s %s from %s refused: no valid token (%llu more refused "
			    "since the last of these lines)",
			    p->req.method, path, from, (unsigned long long)skipped);
	}
	r = MHD_create_response_from_buffer(sizeof(ERR_401) - 1, (void *)ERR_401,
					    MHD_RESPMEM_PERSISTENT);
	if (r == NULL)
		return MHD_NO;
	MHD_add_response_header(r, "Content-Type", "application/json");
	MHD_add_response_header(r, "Connection", "close");
	MHD_add_response_header(r, "WWW-Authenticate", "Bearer realm=\"shoal\"");
	ret = MHD_queue_response(c, 401, r);
	MHD_destroy_response(r);
	return ret;
}

uint64_t
admin_http_refused(const struct admin_http *h)
{
	struct admin_http *m = (struct admin_http *)h;
	uint64_t n;

	pthread_mutex_lock(&m->mu);
	n = m->refused;
	pthread_mutex_unlock(&m->mu);
	return n;
}

struct qbuf {
	char b[1024];
	size_t len;
};

static enum MHD_Result
add_arg(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	struct qbuf *q = cls;
	int n;

	(void)kind;
	n = snprintf(q->b + q->len, sizeof(q->b) - q->len, "%s%s=%s", q->len ? "&" : "", key,
		     value ? value : "");
	if (n > 0 && (size_t)n < sizeof(q->b) - q->len)
		q->len += (size_t)n;
	return MHD_YES;
}

static enum MHD_Result
on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
	   const char *version, const char *upload, size_t *upload_size, void **state)
{
	struct admin_http *h = cls;
	struct pending *p = *state;
	enum MHD_Result ret;
	struct timespec until;
	const char *q;

	(void)version;
	if (p == NULL) {
		p = sh_calloc(1, sizeof(*p));
		if (p == NULL)
			return MHD_NO;
		p->h = h;
		struct qbuf qb = { .len = 0 };

		/* MHD hands over the path without its query: rebuild it from the arguments */
		qb.b[0] = '\0';
		MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, add_arg, &qb);
		q = strchr(url, '?');
		p->path = q ? sh_strndup(url, (size_t)(q - url)) : sh_strdup(url);
		p->query = sh_strdup(qb.b);
		p->req.method = method;
		client_addr(c, p->req.from, sizeof(p->req.from));
		*state = p;
		/* refused before any body is read: nothing of it is buffered */
		if (p->path != NULL &&
		    !admin_auth_allows(
			&h->auth, method, p->path,
			MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization"))) {
			p->refused = true;
			return refuse(h, c, p);
		}
		return MHD_YES;
	}
	if (p->refused) {
		*upload_size =
		    0; /* (MHD skips the body of an answered request; in case it does not) */
		return MHD_YES;
	}
	if (*upload_size > 0) {
		if (!p->too_big && p->len + *upload_size > ADMIN_BODY_MAX) {
			p->too_big = true;
		} else if (!p->too_big) {
			if (p->len + *upload_size + 1 > p->cap) {
				size_t cap = (p->len + *upload_size + 1) * 2;
				char *b = sh_realloc(p->body, cap);
				if (b == NULL)
					return MHD_NO;
				p->body = b;
				p->cap = cap;
			}
			memcpy(p->body + p->len, upload, *upload_size);
			p->len += *upload_size;
			p->body[p->len] = '\0';
		}
		*upload_size = 0;
		return MHD_YES;
	}
	if (p->too_big)
		return respond(c, 413, "application/json", ERR_JSON("request body too large"),
			       sizeof(ERR_JSON("request body too large")) - 1);
	if (p->path == NULL || p->query == NULL)
		return MHD_NO;
	p->req.path = p->path;
	p->req.query = p->query;
	p->req.body = p->body ? p->body : "";
	p->req.body_len = p->len;

	pthread_mutex_lock(&h->mu);
	if (h->quiet) {
		pthread_mutex_unlock(&h->mu);
		return respond(c, 503, "application/json", ERR_JSON("the node is shutting down"),
			       sizeof(ERR_JSON("the node is shutting down")) - 1);
	}
	sh_list_add_tail(&h->queue, &p->link);
	pthread_mutex_unlock(&h->mu);
	env_async_send(&h->wake);

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += ADMIN_REPLY_TIMEOUT_S;
	pthread_mutex_lock(&h->mu);
	while (!p->done) {
		if (pthread_cond_timedwait(&h->cv, &h->mu, &until) == ETIMEDOUT)
			break;
	}
	if (!p->done) {
		/* still queued: take it back; taken by the handler: it frees it when it answers */
		bool queued = false;
		struct sh_list *pos;

		sh_list_for_each (pos, &h->queue)
			if (pos == &p->link)
				queued = true;
		if (queued)
			sh_list_del(&p->link);
		else
			p->abandoned = true;
		pthread_mutex_unlock(&h->mu);
		*state = queued ? p : NULL;
		return respond(c, 504, "application/json", ERR_JSON("no answer in time"),
			       sizeof(ERR_JSON("no answer in time")) - 1);
	}
	pthread_mutex_unlock(&h->mu);
	ret = respond(c, p->status, p->type ? p->type : "application/json", p->out ? p->out : "",
		      p->out_len);
	return ret;
}

static void
on_completed(void *cls, struct MHD_Connection *c, void **state, enum MHD_RequestTerminationCode tc)
{
	struct pending *p = *state;

	(void)cls;
	(void)c;
	(void)tc;
	if (p == NULL)
		return;
	pending_free(p); /* not with the handler: never queued, answered, or taken back */
	*state = NULL;
}

/* Whether a TCP port can be bound now (to tell a taken port from a bad certificate). */
static bool
port_free_tcp(const struct sockaddr_in *sin)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
	bool ok;

	if (fd < 0)
		return false;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	ok = bind(fd, (const struct sockaddr *)sin, sizeof(*sin)) == 0;
	close(fd);
	return ok;
}

int
admin_http_start(struct env *env, const char *addr, const struct admin_http_opts *opts,
		 admin_handler fn, void *arg, struct admin_http **out)
{
	struct admin_http *h;
	struct env_addr a;
	struct sockaddr_in sin = { .sin_family = AF_INET };
	bool tls;
	int rc;

	if (env_addr_parse(addr, &a) < 0 || a.family != AF_INET || a.port == 0)
		return -EINVAL;
	memcpy(&sin.sin_addr, a.ip, 4);
	sin.sin_port = htons(a.port);
	h = sh_calloc(1, sizeof(*h));
	if (h == NULL)
		return -ENOMEM;
	h->env = env;
	h->fn = fn;
	h->arg = arg;
	if (opts != NULL)
		h->auth = *opts;
	sh_list_init(&h->queue);
	pthread_mutex_init(&h->mu, NULL);
	pthread_cond_init(&h->cv, NULL);
	rc = env_async_init(env, &h->wake, on_wake, h);
	if (rc < 0)
		goto err;
	tls = h->auth.tls_cert != NULL && h->auth.tls_key != NULL;
	if (tls && MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
		sh_log_error("admin API: this libmicrohttpd was built without TLS");
		rc = -EPROTONOSUPPORT;
		env_async_fini(&h->wake);
		goto err;
	}
	{
		/* TLS: the certificate, its key and the versions; plain HTTP: none of them */
		struct MHD_OptionItem tls_opts[] = {
			{ MHD_OPTION_HTTPS_MEM_CERT, 0, (void *)h->auth.tls_cert },
			{ MHD_OPTION_HTTPS_MEM_KEY, 0, (void *)h->auth.tls_key },
			{ MHD_OPTION_HTTPS_PRIORITIES, 0,
			  (void *)"NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2" },
			{ MHD_OPTION_END, 0, NULL },
		};

		h->d = MHD_start_daemon(
		    MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
			MHD_USE_ERROR_LOG | (tls ? MHD_USE_TLS : 0),
		    0, NULL, NULL, on_request, h, MHD_OPTION_SOCK_ADDR, &sin,
		    MHD_OPTION_NOTIFY_COMPLETED, on_completed, h, MHD_OPTION_CONNECTION_TIMEOUT,
		    (unsigned)60, MHD_OPTION_ARRAY, tls ? tls_opts : tls_opts + 3, MHD_OPTION_END);
	}
	if (h->d == NULL) {
		/* a port taken, or (TLS) a certificate or key MHD could not load */
		if (tls && port_free_tcp(&sin)) {
			sh_log_error("admin API: the TLS certificate or key does not load");
			rc = -EINVAL;
		} else {
			sh_log_error("admin API: cannot listen on %s (TCP): in use or not a local "
				     "address",
				     addr);
			rc = -EADDRINUSE;
		}
		env_async_fini(&h->wake);
		goto err;
	}
	*out = h;
	return 0;
err:
	pthread_cond_destroy(&h->cv);
	pthread_mutex_destroy(&h->mu);
	sh_free(h);
	return rc;
}

void
admin_http_quiesce(struct admin_http *h)
{
	pthread_mutex_lock(&h->mu);
	h->quiet = true;
	pthread_mutex_unlock(&h->mu);
}

void
admin_http_stop(struct admin_http *h)
{
	if (h == NULL)
		return;
	admin_http_quiesce(h);
	/* requests not yet taken by the loop: answer 503 */
	pthread_mutex_lock(&h->mu);
	while (!sh_list_empty(&h->queue)) {
		struct pending *p = sh_list_entry(sh_list_pop(&h->queue), struct pending, link);

		p->link.next = NULL;
		p->status = 503;
		p->out = sh_strdup(ERR_JSON("the node is shutting down"));
		p->out_len = p->out ? strlen(p->out) : 0;
		p->done = true;
	}
	pthread_cond_broadcast(&h->cv);
	pthread_mutex_unlock(&h->mu);
	MHD_stop_daemon(h->d);
	env_async_fini(&h->wake);
	pthread_cond_destroy(&h->cv);
	pthread_mutex_destroy(&h->mu);
	sh_free(h);
}
