// SPDX-License-Identifier: Apache-2.0
/*
 * The admin HTTP server and JSON API over real loopback sockets: a client
 * thread sends requests while the test's thread runs the env loop (as the
 * management thread does in shoald).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../../src/admin/api.h"
#include "../../../src/env/env_real.h"
#include "../../lib/test.h"

struct client {
	int port;
	struct env *env;
	void (*script)(struct client *c);
	bool done;
	char failure[16384];
};

/* One request; returns the status, the body in out (NUL-terminated). */
static int
request(int port, const char *method, const char *path, const char *body, char *out, size_t cap)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	char req[70000];
	size_t len = 0;
	int fd, status = -1, n;

	inet_pton(AF_INET, "127.0.0.1", &sin.sin_addr);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0)
		return -1;
	n = snprintf(
	    req, sizeof(req),
	    "%s %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: %zu\r\n\r\n%s",
	    method, path, body ? strlen(body) : 0, body ? body : "");
	if (write(fd, req, (size_t)n) != n) {
		close(fd);
		return -1;
	}
	for (;;) {
		ssize_t r = read(fd, req + len, sizeof(req) - 1 - len);
		if (r <= 0)
			break;
		len += (size_t)r;
	}
	req[len] = '\0';
	close(fd);
	sscanf(req, "HTTP/1.%*d %d", &status);
	{
		char *b = strstr(req, "\r\n\r\n");
		snprintf(out, cap, "%s", b ? b + 4 : "");
	}
	return status;
}

static void *
client_main(void *arg)
{
	struct client *c = arg;

	c->script(c);
	c->done = true;
	env_real_stop(c->env);
	return NULL;
}

#define EXPECT(c, cond, ...)                                                       \
	do {                                                                       \
		if (!(cond) && !(c)->failure[0])                                   \
			snprintf((c)->failure, sizeof((c)->failure), __VA_ARGS__); \
	} while (0)

static int
free_port(void)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sin);
	int fd = socket(AF_INET, SOCK_STREAM, 0), port;

	inet_pton(AF_INET, "127.0.0.1", &sin.sin_addr);
	SH_ASSERT_EQ(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	getsockname(fd, (struct sockaddr *)&sin, &sl);
	port = ntohs(sin.sin_port);
	close(fd);
	return port;
}

/* ---- the HTTP server alone ---- */

static void
echo(void *arg, struct admin_req *req)
{
	char buf[256];
	int n;

	(void)arg;
	if (strcmp(req->path, "/late") == 0) {
		/* answered later, from the loop: the connection thread waits for it */
		static struct admin_req *pending;
		pending = req;
		admin_reply(pending, 202, "text/plain", "later", 5);
		return;
	}
	n = snprintf(buf, sizeof(buf), "%s %s ?%s %zu", req->method, req->path, req->query,
		     req->body_len);
	admin_reply(req, 200, "text/plain", buf, (size_t)n);
}

static void
http_script(struct client *c)
{
	char out[4096];
	static char big[ADMIN_BODY_MAX + 100];
	int st;

	st = request(c->port, "GET", "/a/b?x=1&y=2", NULL, out, sizeof(out));
	EXPECT(c, st == 200 && strcmp(out, "GET /a/b ?x=1&y=2 0") == 0, "GET: %d '%s'", st, out);
	st = request(c->port, "POST", "/p", "{\"k\":1}", out, sizeof(out));
	EXPECT(c, st == 200 && strcmp(out, "POST /p ? 7") == 0, "POST: %d '%s'", st, out);
	st = request(c->port, "GET", "/late", NULL, out, sizeof(out));
	EXPECT(c, st == 202 && strcmp(out, "later") == 0, "late: %d '%s'", st, out);
	memset(big, 'x', sizeof(big) - 1);
	st = request(c->port, "POST", "/big", big, out, sizeof(out));
	EXPECT(c, st == 413, "a body over the limit: %d", st);
}

TEST(admin_http_server)
{
	struct env *env = env_real_create(NULL);
	struct admin_http *h;
	struct client c = { .port = free_port(), .env = env, .script = http_script };
	char addr[64];
	pthread_t th;

	snprintf(addr, sizeof(addr), "127.0.0.1:%d", c.port);
	SH_ASSERT_OK(admin_http_start(env, addr, echo, NULL, &h));
	SH_ASSERT_EQ(admin_http_start(env, addr, echo, NULL, &(struct admin_http *){ NULL }),
		     -EADDRINUSE);
	SH_ASSERT_EQ(
	    admin_http_start(env, "localhost:80", echo, NULL, &(struct admin_http *){ NULL }),
	    -EINVAL);
	pthread_create(&th, NULL, client_main, &c);
	env_real_run(env);
	pthread_join(th, NULL);
	SH_ASSERT_MSG(c.failure[0] == '\0', "%s", c.failure);
	admin_http_quiesce(h);
	{
		char out[256];
		SH_ASSERT_EQ(request(c.port, "GET", "/x", NULL, out, sizeof(out)), 503);
	}
	admin_http_stop(h);
	env_real_destroy(env);
}

/* ---- the API on a one-node cluster ---- */

struct api_ctx {
	struct cluster *cl;
	struct admin_node self;
};

static void
on_api(void *arg, struct admin_req *req)
{
	struct api_ctx *a = arg;
	admin_api_handle(a->cl, &a->self, req);
}

static void
api_script(struct client *c)
{
	char out[8192];
	int st;

	st = request(c->port, "GET", "/v1/status", NULL, out, sizeof(out));
	EXPECT(c, st == 200 && strstr(out, "\"created\":false"), "status before: %d %s", st, out);
	st = request(c->port, "POST", "/v1/fs", "{\"name\":\"early\"}", out, sizeof(out));
	EXPECT(c, st == 503 && strstr(out, "not in a cluster"), "fs before create: %d %s", st, out);
	st = request(c->port, "POST", "/v1/cluster", "{\"name\":\"unit\",\"buckets\":16}", out,
		     sizeof(out));
	EXPECT(c, st == 200, "create: %d %s", st, out);
	st = request(c->port, "POST", "/v1/cluster", "{\"name\":\"unit\"}", out, sizeof(out));
	EXPECT(c, st == 409 && strstr(out, "EEXIST"), "create twice: %d %s", st, out);
	st = request(c->port, "GET", "/v1/status", NULL, out, sizeof(out));
	EXPECT(c, st == 200 && strstr(out, "\"cluster\":\"unit\"") && strstr(out, "\"epoch\":1"),
	       "status: %d %s", st, out);
	st = request(c->port, "POST", "/v1/nodes", "{\"id\":", out, sizeof(out));
	EXPECT(c, st == 400 && strstr(out, "malformed JSON"), "malformed: %d %s", st, out);
	st = request(c->port, "POST", "/v1/nodes", "{\"id\":\"two\",\"mgmt\":\"1.2.3.4:5\"}", out,
		     sizeof(out));
	EXPECT(c, st == 400 && strstr(out, "non-negative integer"), "wrong type: %d %s", st, out);
	st = request(c->port, "POST", "/v1/nodes", "[1]", out, sizeof(out));
	EXPECT(c, st == 400 && strstr(out, "JSON object"), "not an object: %d %s", st, out);
	st = request(c->port, "POST", "/v1/nodes", "{\"id\":1,\"mgmt\":\"1.2.3.4:5\"}", out,
		     sizeof(out));
	EXPECT(c, st == 400 && strstr(out, "missing field"), "missing field: %d %s", st, out);
	st = request(c->port, "POST", "/v1/fs", "{\"name\":\"f\",\"protection\":\"4-2\"}", out,
		     sizeof(out));
	EXPECT(c, st == 400 && strstr(out, "D+P"), "bad protection: %d %s", st, out);
	st = request(c->port, "POST", "/v1/fs", "{\"name\":\"f\",\"protection\":\"4+2\"}", out,
		     sizeof(out));
	EXPECT(c, st == 422 && strstr(out, "failure domains"), "unplaceable: %d %s", st, out);
	st = request(c->port, "DELETE", "/v1/fs/none", NULL, out, sizeof(out));
	EXPECT(c, st == 404, "delete missing: %d %s", st, out);
	st = request(c->port, "GET", "/v1/bogus", NULL, out, sizeof(out));
	EXPECT(c, st == 404, "unknown resource: %d", st);
	st = request(c->port, "PUT", "/v1/nodes", "{}", out, sizeof(out));
	EXPECT(c, st == 405, "PUT: %d", st);
	st = request(c->port, "GET", "/v1/events?limit=1", NULL, out, sizeof(out));
	EXPECT(c, st == 200 && strstr(out, "cluster unit created") && !strstr(out, "},{"),
	       "events: %d %s", st, out);
	st = request(c->port, "GET", "/metrics", NULL, out, sizeof(out));
	EXPECT(c,
	       st == 200 && strstr(out, "shoal_config_epoch{node=\"1\"} 1") &&
		   strstr(out, "shoal_config_leader 1"),
	       "metrics: %d %s", st, out);
	st = request(c->port, "GET", "/v1/status", NULL, out, sizeof(out));
	EXPECT(c, st == 200 && strstr(out, "\"epoch\":1"), "nothing changed: %d %s", st, out);
	/* the cluster's heal state, answered from a thread of its own */
	st = request(c->port, "GET", "/v1/rebuild", NULL, out, sizeof(out));
	EXPECT(c,
	       st == 200 && strstr(out, "\"state\":\"full\"") &&
		   strstr(out, "\"nodes_answered\":1"),
	       "rebuild: %d %s", st, out);
	/* an event posted (the watcher's rebuild progress), then read */
	st = request(c->port, "POST", "/v1/events", "{\"node\":7}", out, sizeof(out));
	EXPECT(c, st == 400 && strstr(out, "text"), "event without text: %d %s", st, out);
	st = request(c->port, "POST", "/v1/events", "{\"text\":\"rebuild started: 1 B\"}", out,
		     sizeof(out));
	EXPECT(c, st == 200, "event: %d %s", st, out);
	st = request(c->port, "GET", "/v1/events?limit=1", NULL, out, sizeof(out));
	EXPECT(c, st == 200 && strstr(out, "rebuild started: 1 B"), "event read: %d %s", st, out);
}

static void
on_stopped(void *arg)
{
	*(bool *)arg = true;
}

TEST(admin_api_one_node)
{
	struct env *env = env_real_create(NULL);
	struct net_iface ifc = { 0 };
	struct net_config nc = { .node_id = 1, .ifaces = &ifc, .nifaces = 1 };
	struct client c = { .port = free_port(), .env = env, .script = api_script };
	struct api_ctx a = { .self = { .id = 1, .mode = "cpu", .workers = 1 } };
	struct cluster_params p = { .node_id = 1, .dir = sh_test_dir() };
	struct admin_http *h;
	struct net *net;
	char mgmt[64], data[64];
	bool stopped = false;
	pthread_t th;

	snprintf(mgmt, sizeof(mgmt), "127.0.0.1:%d", c.port);
	snprintf(data, sizeof(data), "127.0.0.1:%d", free_port());
	p.mgmt = mgmt;
	p.data = data;
	p.submit_ns = 2 * SH_NSEC_PER_SEC;
	SH_ASSERT_OK(env_addr_parse(mgmt, &ifc.addr));
	SH_ASSERT_OK(net_create(env, &nc, &net));
	SH_ASSERT_OK(cluster_start(net, &p, &a.cl));
	SH_ASSERT_OK(admin_http_start(env, mgmt, on_api, &a, &h));
	pthread_create(&th, NULL, client_main, &c);
	env_real_run(env);
	pthread_join(th, NULL);
	SH_ASSERT_MSG(c.failure[0] == '\0', "%s", c.failure);
	admin_http_quiesce(h);
	cluster_stop(a.cl, on_stopped, &stopped);
	while (!stopped)
		env_real_run_once(env, 100 * SH_NSEC_PER_MSEC);
	admin_http_stop(h);
	net_destroy(net);
	env_real_destroy(env);
}
