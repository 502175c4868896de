// SPDX-License-Identifier: Apache-2.0
/*
 * The admin HTTP server and JSON API over real loopback sockets: a client
 * thread sends requests while the test's thread runs the env loop (as the
 * management thread does in shoald).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../../src/admin/api.h"
#include "../../../src/base/http.h"
#include "../../../src/env/env_real.h"
#include "../../lib/test.h"

struct client {
	int port;
	char addr[64];
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

/* The client's script on a thread of its own while this one runs the loop; fails on its first miss.
 */
static void
run_script(struct client *c)
{
	pthread_t th;

	pthread_create(&th, NULL, client_main, c);
	env_real_run(c->env);
	pthread_join(th, NULL);
	SH_ASSERT_MSG(c->failure[0] == '\0', "%s", c->failure);
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

	snprintf(addr, sizeof(addr), "127.0.0.1:%d", c.port);
	SH_ASSERT_OK(admin_http_start(env, addr, NULL, echo, NULL, &h));
	SH_ASSERT_EQ(admin_http_start(env, addr, NULL, echo, NULL, &(struct admin_http *){ NULL }),
		     -EADDRINUSE);
	SH_ASSERT_EQ(
	    admin_http_start(env, "localhost:80", NULL, echo, NULL, &(struct admin_http *){ NULL }),
	    -EINVAL);
	run_script(&c);
	admin_http_quiesce(h);
	{
		char out[256];
		SH_ASSERT_EQ(request(c.port, "GET", "/x", NULL, out, sizeof(out)), 503);
	}
	admin_http_stop(h);
	env_real_destroy(env);
}

/* ---- who may ask ---- */

#define TOKEN "78f38a4276e0592d2fadb341cab06972cc429dc62f090d8f4db5d5aed1079aea"

TEST(admin_auth_wants_the_token_except_on_open_paths)
{
	struct admin_http_opts a = { .token = TOKEN, .metrics_open = true };
	struct admin_http_opts none = { .token = "" };

	SH_ASSERT(admin_auth_allows(&a, "GET", "/v1/nodes", "Bearer " TOKEN));
	SH_ASSERT(admin_auth_allows(&a, "POST", "/v1/fs", "bearer  " TOKEN " "));
	SH_ASSERT(!admin_auth_allows(&a, "GET", "/v1/nodes", NULL));
	SH_ASSERT(!admin_auth_allows(&a, "GET", "/v1/nodes", ""));
	SH_ASSERT(!admin_auth_allows(&a, "GET", "/v1/nodes", TOKEN));
	SH_ASSERT(!admin_auth_allows(&a, "GET", "/v1/nodes", "Basic " TOKEN));
	/* one digit off, one short, one long */
	SH_ASSERT(!admin_auth_allows(
	    &a, "GET", "/v1/nodes",
	    "Bearer 78f38a4276e0592d2fadb341cab06972cc429dc62f090d8f4db5d5aed1079aeb"));
	SH_ASSERT(!admin_auth_allows(
	    &a, "GET", "/v1/nodes",
	    "Bearer 78f38a4276e0592d2fadb341cab06972cc429dc62f090d8f4db5d5aed1079ae"));
	SH_ASSERT(!admin_auth_allows(&a, "GET", "/v1/nodes", "Bearer " TOKEN "0"));
	/* open: a client's first contact, and the metrics when so set */
	SH_ASSERT(admin_auth_allows(&a, "GET", "/v1/status", NULL));
	SH_ASSERT(!admin_auth_allows(&a, "POST", "/v1/status", NULL));
	SH_ASSERT(!admin_auth_allows(&a, "GET", "/v1/status/x", NULL));
	SH_ASSERT(admin_auth_allows(&a, "GET", "/metrics", NULL));
	a.metrics_open = false;
	SH_ASSERT(!admin_auth_allows(&a, "GET", "/metrics", NULL));
	SH_ASSERT(admin_auth_allows(&a, "GET", "/metrics", "Bearer " TOKEN));
	/* no token set: nothing asked (the route tests here) */
	SH_ASSERT(admin_auth_allows(&none, "DELETE", "/v1/fs/x", NULL));
}

static void
auth_script(struct client *c)
{
	char out[4096], *body = NULL;
	int st;

	st = request(c->port, "GET", "/v1/nodes", NULL, out, sizeof(out));
	EXPECT(c, st == 401 && strstr(out, "admin token") != NULL, "no token: %d '%s'", st, out);
	st = request(c->port, "POST", "/v1/fs", "{\"name\":\"x\"}", out, sizeof(out));
	EXPECT(c, st == 401, "a POST without a token: %d '%s'", st, out);
	{
		/* refused before its body is read: 401, not 413 */
		static char big[ADMIN_BODY_MAX + 100];

		memset(big, 'x', sizeof(big) - 1);
		st = request(c->port, "POST", "/v1/fs", big, out, sizeof(out));
		EXPECT(c, st == 401, "a big body without a token: %d", st);
	}
	st = request(c->port, "GET", "/v1/status", NULL, out, sizeof(out));
	EXPECT(c, st == 200 && strcmp(out, "GET /v1/status ? 0") == 0, "status, open: %d '%s'", st,
	       out);
	st = request(c->port, "GET", "/metrics", NULL, out, sizeof(out));
	EXPECT(c, st == 401, "metrics, not open here: %d '%s'", st, out);
	/* through the library's client, which sends the header */
	st = sh_http_call(c->addr, TOKEN, "POST", "/v1/fs", "{}", &body, 5);
	EXPECT(c, st == 200 && body && strcmp(body, "POST /v1/fs ? 2") == 0,
	       "with the token: %d '%s'", st, body ? body : "");
	free(body);
	body = NULL;
	st = sh_http_call(c->addr,
			  "78f38a4276e0592d2fadb341cab06972cc429dc62f090d8f4db5d5aed1079aeb", "GET",
			  "/metrics", NULL, &body, 5);
	EXPECT(c, st == 401, "a wrong token: %d", st);
	free(body);
	body = NULL;
	st = sh_http_call(c->addr, "x\r\nX-Evil: 1", "GET", "/v1/nodes", NULL, &body, 5);
	EXPECT(c, st == -EINVAL, "a token with a line break is not sent: %d", st);
	free(body);
}

TEST(admin_http_refuses_requests_without_the_token)
{
	struct env *env = env_real_create(NULL);
	struct admin_http *h;
	struct admin_http_opts auth = { .token = TOKEN, .metrics_open = false };
	struct client c = { .port = free_port(), .env = env, .script = auth_script };

	snprintf(c.addr, sizeof(c.addr), "127.0.0.1:%d", c.port);
	SH_ASSERT_OK(admin_http_start(env, c.addr, &auth, echo, NULL, &h));
	run_script(&c);
	SH_ASSERT_EQ(admin_http_refused(h), 5u);
	admin_http_stop(h);
	env_real_destroy(env);
}

/* ---- TLS ---- */

/* A self-signed certificate for ip (an IP subject alternative name) and its key, PEM text. */
static void
make_cert(const char *ip, char **cert, char **key)
{
	EVP_PKEY *pk = EVP_EC_gen("P-256");
	X509 *x = X509_new();
	X509_NAME *name;
	X509_EXTENSION *ext;
	X509V3_CTX v3;
	char san[64];
	BIO *b;
	long n;
	char *p;

	SH_ASSERT(pk != NULL && x != NULL);
	X509_set_version(x, 2);
	ASN1_INTEGER_set(X509_get_serialNumber(x), (long)getpid());
	X509_gmtime_adj(X509_getm_notBefore(x), -3600);
	X509_gmtime_adj(X509_getm_notAfter(x), 3600);
	X509_set_pubkey(x, pk);
	name = X509_get_subject_name(x);
	X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)"shoal-test",
				   -1, -1, 0);
	X509_set_issuer_name(x, name);
	X509V3_set_ctx(&v3, x, x, NULL, NULL, 0);
	snprintf(san, sizeof(san), "IP:%s", ip);
	ext = X509V3_EXT_conf_nid(NULL, &v3, NID_subject_alt_name, san);
	SH_ASSERT(ext != NULL);
	X509_add_ext(x, ext, -1);
	X509_EXTENSION_free(ext);
	SH_ASSERT(X509_sign(x, pk, EVP_sha256()) > 0);
	b = BIO_new(BIO_s_mem());
	PEM_write_bio_X509(b, x);
	n = BIO_get_mem_data(b, &p);
	*cert = strndup(p, (size_t)n);
	BIO_free(b);
	b = BIO_new(BIO_s_mem());
	PEM_write_bio_PrivateKey(b, pk, NULL, NULL, 0, NULL, NULL);
	n = BIO_get_mem_data(b, &p);
	*key = strndup(p, (size_t)n);
	BIO_free(b);
	X509_free(x);
	EVP_PKEY_free(pk);
}

static void
write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	SH_ASSERT(f != NULL);
	fputs(text, f);
	fclose(f);
}

struct tls_case {
	char good[256], other[256], wrong_ip[256]; /* CA files */
};
static struct tls_case tls_files;

static void
tls_script(struct client *c)
{
	char *body = NULL;
	int st;

	sh_http_tls_ca(tls_files.good);
	st = sh_http_call(c->addr, TOKEN, "GET", "/v1/nodes", NULL, &body, 5);
	EXPECT(c, st == 200 && body && strcmp(body, "GET /v1/nodes ? 0") == 0, "over TLS: %d '%s'",
	       st, body ? body : "");
	free(body);
	body = NULL;
	st = sh_http_call(c->addr, NULL, "GET", "/v1/nodes", NULL, &body, 5);
	EXPECT(c, st == 401, "over TLS, no token: %d", st);
	free(body);
	body = NULL;
	sh_http_tls_ca(tls_files.other);
	st = sh_http_call(c->addr, TOKEN, "GET", "/v1/nodes", NULL, &body, 5);
	EXPECT(c, st == -EKEYREJECTED, "a certificate not trusted: %d", st);
	free(body);
	body = NULL;
	sh_http_tls_ca(tls_files.wrong_ip);
	st = sh_http_call(c->addr, TOKEN, "GET", "/v1/nodes", NULL, &body, 5);
	EXPECT(c, st == -EKEYREJECTED, "a certificate for another address: %d", st);
	free(body);
	body = NULL;
	sh_http_tls_ca("/nonexistent/ca.pem");
	st = sh_http_call(c->addr, TOKEN, "GET", "/v1/nodes", NULL, &body, 5);
	EXPECT(c, st == -ENOENT, "no such CA file: %d", st);
	free(body);
	body = NULL;
	/* plain HTTP to the TLS port: no answer that parses */
	sh_http_tls_ca(NULL);
	unsetenv("SHOAL_CA_FILE");
	st = sh_http_call(c->addr, TOKEN, "GET", "/v1/nodes", NULL, &body, 5);
	EXPECT(c, st < 0 || st == 400, "plain HTTP to TLS: %d", st);
	free(body);
}

TEST(admin_http_over_tls)
{
	struct env *env = env_real_create(NULL);
	struct admin_http *h;
	struct admin_http_opts opts = { .token = TOKEN };
	struct client c = { .port = free_port(), .env = env, .script = tls_script };
	char *cert, *key, *ocert, *okey, *wcert, *wkey;

	make_cert("127.0.0.1", &cert, &key);
	make_cert("127.0.0.1", &ocert, &okey);
	make_cert("127.0.0.2", &wcert, &wkey);
	snprintf(tls_files.good, sizeof(tls_files.good), "/tmp/sh-tls-%d-good.pem", (int)getpid());
	snprintf(tls_files.other, sizeof(tls_files.other), "/tmp/sh-tls-%d-other.pem",
		 (int)getpid());
	snprintf(tls_files.wrong_ip, sizeof(tls_files.wrong_ip), "/tmp/sh-tls-%d-ip.pem",
		 (int)getpid());
	write_text(tls_files.good, cert);
	write_text(tls_files.other, ocert);
	snprintf(c.addr, sizeof(c.addr), "127.0.0.1:%d", c.port);
	/* the server with the wrong-IP certificate, then the right one */
	opts.tls_cert = wcert;
	opts.tls_key = wkey;
	write_text(tls_files.wrong_ip, wcert);
	{
		struct admin_http *w;
		struct admin_http_opts bad = opts;

		bad.tls_key = okey; /* another certificate's key: does not load */
		SH_ASSERT_EQ(admin_http_start(env, c.addr, &bad, echo, NULL, &w), -EINVAL);
	}
	opts.tls_cert = cert;
	opts.tls_key = key;
	SH_ASSERT_OK(admin_http_start(env, c.addr, &opts, echo, NULL, &h));
	run_script(&c);
	admin_http_stop(h);
	env_real_destroy(env);
	sh_http_tls_ca(NULL);
	unlink(tls_files.good);
	unlink(tls_files.other);
	unlink(tls_files.wrong_ip);
	free(cert);
	free(key);
	free(ocert);
	free(okey);
	free(wcert);
	free(wkey);
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

	snprintf(mgmt, sizeof(mgmt), "127.0.0.1:%d", c.port);
	snprintf(data, sizeof(data), "127.0.0.1:%d", free_port());
	p.mgmt = mgmt;
	p.data = data;
	p.submit_ns = 2 * SH_NSEC_PER_SEC;
	SH_ASSERT_OK(env_addr_parse(mgmt, &ifc.addr));
	SH_ASSERT_OK(net_create(env, &nc, &net));
	SH_ASSERT_OK(cluster_start(net, &p, &a.cl));
	SH_ASSERT_OK(admin_http_start(env, mgmt, NULL, on_api, &a, &h));
	run_script(&c);
	admin_http_quiesce(h);
	cluster_stop(a.cl, on_stopped, &stopped);
	while (!stopped)
		env_real_run_once(env, 100 * SH_NSEC_PER_MSEC);
	admin_http_stop(h);
	net_destroy(net);
	env_real_destroy(env);
}

/* ---- snapshots, on five nodes in this process (a filesystem needs 3+2 domains) ---- */

#define SNAP_NODES 5

struct snap_world {
	struct net *net[SNAP_NODES];
	struct cluster *cl[SNAP_NODES];
	char mgmt[SNAP_NODES][64], data[SNAP_NODES][64];
	struct api_ctx api, api2; /* node 1's admin API, and node 2's (not the leader) */
	int port2;
	bool marking; /* a snap.state of the stand-in metadata layer in flight */
	unsigned stopped;
};

static struct snap_world *snap_w; /* for the client's script */

/* A creation still waiting when the node stops: answered 503. */
struct late_post {
	int port, status;
	char out[1024];
};

static void *
late_post(void *arg)
{
	struct late_post *l = arg;

	l->status = request(l->port, "POST", "/v1/fs/data/snapshots", "{\"name\":\"slow2\"}",
			    l->out, sizeof(l->out));
	return NULL;
}

static struct late_post late;
static pthread_t late_th;

/* Each node formats its drives: here, any path is a 1 GiB drive. */
static int
fake_prepare(void *arg, struct cfg_cmd *cmd, char *msg, size_t len)
{
	(void)arg;
	(void)msg;
	(void)len;
	cmd->size = 1ull << 30;
	return 0;
}

static void
on_marked(void *arg, int status, const char *msg)
{
	(void)status;
	(void)msg;
	((struct snap_world *)arg)->marking = false;
}

/*
 * The metadata layer's part, stood in for: a snapshot being created is
 * ready at once (as if every group took the next version) — unless its
 * name starts with "slow": those stay creating.
 */
static void
fake_meta(void *arg, const struct cfg *c)
{
	struct snap_world *w = arg;

	for (uint32_t i = 0; i < c->nsnaps && !w->marking && w->cl[0] != NULL; i++) {
		const struct cfg_snap *s = &c->snaps[i];
		const struct cfg_fs *f = cfg_fs_by_id(c, s->fs);
		struct cfg_cmd cmd = { .op = CFG_OP_SNAP_STATE, .state = CFG_SNAP_READY };

		if (s->state != CFG_SNAP_CREATING || strncmp(s->name, "slow", 4) == 0 || f == NULL)
			continue;
		snprintf(cmd.name, sizeof(cmd.name), "%s", f->name);
		snprintf(cmd.snap, sizeof(cmd.snap), "%s", s->name);
		w->marking = cluster_submit(w->cl[0], &cmd, on_marked, w) == 0;
	}
}

/* /v1/fs/data/snapshots/schedule: shown, set, changed, refused, turned off. */
static void
schedule_script(struct client *c, struct snap_world *w)
{
	const char *sched = "/v1/fs/data/snapshots/schedule";
	char out[8192];
	int st;

	st = request(c->port, "GET", sched, NULL, out, sizeof(out));
	EXPECT(c, st == 200 && strcmp(out, "{\"every_s\":0,\"keep\":0}\n") == 0, "none: %d %s", st,
	       out);
	st = request(c->port, "PUT", sched, "{\"every_s\":900,\"keep\":96}", out, sizeof(out));
	EXPECT(c, st == 200 && strcmp(out, "{\"every_s\":900,\"keep\":96}\n") == 0, "set: %d %s",
	       st, out);
	st = request(c->port, "GET", sched, NULL, out, sizeof(out));
	EXPECT(c, st == 200 && strcmp(out, "{\"every_s\":900,\"keep\":96}\n") == 0, "shown: %d %s",
	       st, out);
	st = request(c->port, "PUT", sched, "{\"every_s\":900,\"keep\":96}", out, sizeof(out));
	EXPECT(c,
	       st == 409 && strstr(out, "EALREADY") &&
		   strstr(out, "already takes a snapshot every 15m, the last 96 kept"),
	       "again: %d %s", st, out);
	/* keep unless said: 96; through a node that does not lead, forwarded */
	st = request(w->port2, "PUT", sched, "{\"every_s\":60}", out, sizeof(out));
	EXPECT(c, st == 200 && strcmp(out, "{\"every_s\":60,\"keep\":96}\n") == 0,
	       "via node 2: %d %s", st, out);
	st = request(c->port, "PUT", sched, "{\"every_s\":60,\"keep\":3}", out, sizeof(out));
	EXPECT(c, st == 200 && strstr(out, "\"keep\":3"), "keep 3: %d %s", st, out);
	/* refused, changing nothing */
	st = request(c->port, "PUT", sched, "{\"keep\":3}", out, sizeof(out));
	EXPECT(c, st == 400 && strstr(out, "missing field \\\"every_s\\\""), "no every: %d %s", st,
	       out);
	st = request(c->port, "PUT", sched, "{\"every_s\":-1}", out, sizeof(out));
	EXPECT(c, st == 400 && strstr(out, "non-negative integer"), "every -1: %d %s", st, out);
	st = request(c->port, "PUT", sched, "{\"every_s\":\"15m\"}", out, sizeof(out));
	EXPECT(c, st == 400 && strstr(out, "non-negative integer"), "every 15m: %d %s", st, out);
	st = request(c->port, "PUT", sched, "{\"every_s\":2592001,\"keep\":3}", out, sizeof(out));
	EXPECT(c, st == 400 && strstr(out, "every 1 s to 30 days"), "every too long: %d %s", st,
	       out);
	st = request(c->port, "PUT", sched, "{\"every_s\":60,\"keep\":0}", out, sizeof(out));
	EXPECT(c, st == 400 && strstr(out, "keeps the last 1 to 256"), "keep 0: %d %s", st, out);
	st = request(c->port, "PUT", sched, "{\"every_s\":60,\"keep\":257}", out, sizeof(out));
	EXPECT(c, st == 400 && strstr(out, "not 257"), "keep 257: %d %s", st, out);
	st = request(c->port, "PUT", sched, "[1]", out, sizeof(out));
	EXPECT(c, st == 400 && strstr(out, "must be a JSON object"), "not an object: %d %s", st,
	       out);
	st = request(c->port, "PUT", "/v1/fs/nope/snapshots/schedule", "{\"every_s\":60}", out,
		     sizeof(out));
	EXPECT(c, st == 404 && strstr(out, "no filesystem 'nope'"), "PUT no fs: %d %s", st, out);
	st = request(c->port, "GET", "/v1/fs/nope/snapshots/schedule", NULL, out, sizeof(out));
	EXPECT(c, st == 404 && strstr(out, "no filesystem 'nope'"), "GET no fs: %d %s", st, out);
	st = request(c->port, "DELETE", sched, NULL, out, sizeof(out));
	EXPECT(c, st == 405 && strstr(out, "every_s"), "DELETE: %d %s", st, out);
	st = request(c->port, "POST", sched, "{}", out, sizeof(out));
	EXPECT(c, st == 405, "POST: %d %s", st, out);
	st = request(c->port, "GET", sched, NULL, out, sizeof(out));
	EXPECT(c, st == 200 && strcmp(out, "{\"every_s\":60,\"keep\":3}\n") == 0,
	       "unchanged: %d %s", st, out);
	/* no snapshot takes the schedule's name */
	st = request(c->port, "POST", "/v1/fs/data/snapshots", "{\"name\":\"schedule\"}", out,
		     sizeof(out));
	EXPECT(c, st == 400 && strstr(out, "'schedule' is not a snapshot name"),
	       "a snapshot named schedule: %d %s", st, out);
	/* the filesystems' list says it (without usage: no node asked, no usage fields) */
	st = request(c->port, "GET", "/v1/fs?usage=0", NULL, out, sizeof(out));
	EXPECT(c,
	       st == 200 && strstr(out, "\"name\":\"data\"") &&
		   strstr(out, "\"snapshot_every_s\":60,\"snapshot_keep\":3") &&
		   !strstr(out, "stored_bytes") && !strstr(out, "usage_nodes"),
	       "fs list: %d %s", st, out);
	/* off: keep is dropped */
	st = request(c->port, "PUT", sched, "{\"every_s\":0,\"keep\":5}", out, sizeof(out));
	EXPECT(c, st == 200 && strcmp(out, "{\"every_s\":0,\"keep\":0}\n") == 0, "off: %d %s", st,
	       out);
	st = request(c->port, "PUT", sched, "{\"every_s\":0}", out, sizeof(out));
	EXPECT(c, st == 409 && strstr(out, "has no scheduled snapshots"), "off again: %d %s", st,
	       out);
	for (int i = 0; i < 50; i++) { /* node 2 follows the leader's configuration */
		st = request(w->port2, "GET", sched, NULL, out, sizeof(out));
		if (st == 200 && strcmp(out, "{\"every_s\":0,\"keep\":0}\n") == 0)
			break;
		usleep(100 * 1000);
	}
	EXPECT(c, st == 200 && strcmp(out, "{\"every_s\":0,\"keep\":0}\n") == 0,
	       "off via node 2: %d %s", st, out);
	st = request(c->port, "GET", "/v1/events?limit=8", NULL, out, sizeof(out));
	EXPECT(c,
	       st == 200 && strstr(out, "filesystem data: a snapshot every 1m, the last 3 kept") &&
		   strstr(out, "filesystem data: no scheduled snapshots"),
	       "events: %d %s", st, out);
}

static void
snap_script(struct client *c)
{
	struct snap_world *w = snap_w;
	char out[8192], body[256];
	int st;

	st = request(c->port, "POST", "/v1/cluster", "{\"name\":\"snaps\",\"buckets\":16}", out,
		     sizeof(out));
	EXPECT(c, st == 200, "create: %d %s", st, out);
	for (int i = 1; i < SNAP_NODES; i++) {
		snprintf(body, sizeof(body), "{\"id\":%d,\"mgmt\":\"%s\",\"data\":\"%s\"}", i + 1,
			 w->mgmt[i], w->data[i]);
		st = request(c->port, "POST", "/v1/nodes", body, out, sizeof(out));
		EXPECT(c, st == 200, "node add %d: %d %s", i + 1, st, out);
	}
	for (int i = 0; i < SNAP_NODES; i++) {
		snprintf(body, sizeof(body), "{\"node\":%d,\"path\":\"/dev/fake%d\"}", i + 1, i);
		st = request(c->port, "POST", "/v1/drives", body, out, sizeof(out));
		EXPECT(c, st == 200, "drive add %d: %d %s", i + 1, st, out);
	}
	st =
	    request(c->port, "POST", "/v1/fs/data/snapshots", "{\"name\":\"a\"}", out, sizeof(out));
	EXPECT(c, st == 404 && strstr(out, "no filesystem 'data'"), "no fs yet: %d %s", st, out);
	st = request(c->port, "POST", "/v1/fs", "{\"name\":\"data\",\"protection\":\"3+2\"}", out,
		     sizeof(out));
	EXPECT(c, st == 200, "fs create: %d %s", st, out);
	st = request(c->port, "GET", "/v1/fs/data/snapshots?usage=0", NULL, out, sizeof(out));
	EXPECT(c, st == 200 && strcmp(out, "[]\n") == 0, "none yet: %d %s", st, out);

	/* created, and answered once ready */
	st =
	    request(c->port, "POST", "/v1/fs/data/snapshots", "{\"name\":\"a\"}", out, sizeof(out));
	EXPECT(c,
	       st == 201 && strstr(out, "\"name\":\"a\"") && strstr(out, "\"fs\":\"data\"") &&
		   strstr(out, "\"version\":1,") && strstr(out, "\"state\":\"ready\"") &&
		   strstr(out, "\"created\":"),
	       "snapshot a: %d %s", st, out);
	st =
	    request(c->port, "POST", "/v1/fs/data/snapshots", "{\"name\":\"a\"}", out, sizeof(out));
	EXPECT(c, st == 409 && strstr(out, "EEXIST") && strstr(out, "already has a snapshot"),
	       "a again: %d %s", st, out);
	st = request(c->port, "POST", "/v1/fs/data/snapshots", "{\"name\":\"a b\"}", out,
		     sizeof(out));
	EXPECT(c, st == 400 && strstr(out, "not a snapshot name"), "bad name: %d %s", st, out);
	st = request(c->port, "POST", "/v1/fs/data/snapshots", "{\"nom\":\"a\"}", out, sizeof(out));
	EXPECT(c, st == 400 && strstr(out, "missing field"), "no name: %d %s", st, out);
	st = request(c->port, "POST", "/v1/fs/data/snapshots", "{\"name\":7}", out, sizeof(out));
	EXPECT(c, st == 400 && strstr(out, "must be a string"), "name of a number: %d %s", st, out);
	st =
	    request(c->port, "POST", "/v1/fs/nope/snapshots", "{\"name\":\"a\"}", out, sizeof(out));
	EXPECT(c, st == 404 && strstr(out, "no filesystem 'nope'"), "no such fs: %d %s", st, out);

	/* not ready in time: 504 with the reason; it stays, creating */
	st = request(c->port, "POST", "/v1/fs/data/snapshots", "{\"name\":\"slow1\"}", out,
		     sizeof(out));
	EXPECT(c,
	       st == 504 && strstr(out, "ETIMEDOUT") &&
		   strstr(out, "snapshot slow1 of data is still being created: not every "
			       "metadata group has taken version 3 yet"),
	       "slow1: %d %s", st, out);
	st = request(c->port, "GET", "/v1/fs/data/snapshots?usage=0", NULL, out, sizeof(out));
	EXPECT(c,
	       st == 200 && strstr(out, "{\"name\":\"a\"") &&
		   strstr(out, "\"name\":\"slow1\",\"fs\":\"data\",\"version\":2,\"state\":"
			       "\"creating\""),
	       "list: %d %s", st, out);
	st = request(c->port, "GET", "/v1/fs/data/snapshots/a", NULL, out, sizeof(out));
	/* with what it holds alone, summed over the nodes that answer (none leads a group here) */
	EXPECT(c,
	       st == 200 && strstr(out, "\"state\":\"ready\"") && out[0] == '{' &&
		   strstr(out, "\"bytes_only\":0") && strstr(out, "\"usage_nodes\":"),
	       "one: %d %s", st, out);
	/* asked of a node that does not lead: forwarded, then answered once ready there too */
	st = request(w->port2, "POST", "/v1/fs/data/snapshots", "{\"name\":\"b\"}", out,
		     sizeof(out));
	EXPECT(c, st == 201 && strstr(out, "\"version\":3,") && strstr(out, "\"state\":\"ready\""),
	       "b via node 2: %d %s", st, out);
	st = request(w->port2, "GET", "/v1/fs/data/snapshots?usage=0", NULL, out, sizeof(out));
	EXPECT(c, st == 200 && strstr(out, "\"name\":\"b\""), "list via node 2: %d %s", st, out);
	st = request(c->port, "GET", "/v1/fs/data/snapshots/zz", NULL, out, sizeof(out));
	EXPECT(c, st == 404 && strstr(out, "no snapshot 'zz'"), "no such one: %d %s", st, out);
	st = request(c->port, "GET", "/v1/fs/nope/snapshots", NULL, out, sizeof(out));
	EXPECT(c, st == 404, "list of no fs: %d %s", st, out);

	/* deleted: 202, its space freed in the background */
	st = request(c->port, "DELETE", "/v1/fs/data/snapshots/slow1", NULL, out, sizeof(out));
	EXPECT(c, st == 202, "delete: %d %s", st, out);
	st = request(c->port, "DELETE", "/v1/fs/data/snapshots/slow1", NULL, out, sizeof(out));
	EXPECT(c, st == 409 && strstr(out, "being deleted already"), "delete again: %d %s", st,
	       out);
	st = request(c->port, "DELETE", "/v1/fs/data/snapshots/zz", NULL, out, sizeof(out));
	EXPECT(c, st == 404, "delete none: %d %s", st, out);
	st = request(c->port, "GET", "/v1/fs/data/snapshots/slow1?usage=0", NULL, out, sizeof(out));
	EXPECT(c, st == 200 && strstr(out, "\"state\":\"deleting\""), "deleting: %d %s", st, out);
	st = request(c->port, "DELETE", "/v1/fs/data/snapshots", NULL, out, sizeof(out));
	EXPECT(c, st == 405, "DELETE of all: %d", st);
	st = request(c->port, "PUT", "/v1/fs/data/snapshots/a", "{}", out, sizeof(out));
	EXPECT(c, st == 405, "PUT: %d", st);
	st = request(c->port, "GET", "/v1/fs/data/snapshots/a/b", NULL, out, sizeof(out));
	EXPECT(c, st == 404, "too deep: %d", st);
	st = request(c->port, "GET", "/v1/events?limit=32", NULL, out, sizeof(out));
	EXPECT(c,
	       st == 200 && strstr(out, "snapshot a of fs data created (version 1)") &&
		   strstr(out, "snapshot a of fs data is ready (version 1)") &&
		   strstr(out, "snapshot slow1 of fs data deleted (version 2)"),
	       "events: %d %s", st, out);
	schedule_script(c, w);
	/* one left waiting (for long) as the node stops */
	w->api.self.snap_wait_ns = 60 * SH_NSEC_PER_SEC;
	late.port = c->port;
	pthread_create(&late_th, NULL, late_post, &late);
	usleep(500 * 1000);
}

static void
on_node_stopped(void *arg)
{
	((struct snap_world *)arg)->stopped++;
}

TEST(admin_api_snapshots)
{
	static struct snap_world w;
	struct env *env = env_real_create(NULL);
	struct client c = { .env = env, .script = snap_script };
	struct net_iface ifc[SNAP_NODES];
	struct admin_http *h, *h2;
	char dir[SNAP_NODES][600];

	snap_w = &w;
	w.api.self = (struct admin_node){
		.id = 1, .mode = "cpu", .workers = 1, .snap_wait_ns = 2 * SH_NSEC_PER_SEC
	};
	for (int i = 0; i < SNAP_NODES; i++) {
		struct net_config nc = { .node_id = (uint64_t)i + 1,
					 .ifaces = &ifc[i],
					 .nifaces = 1 };
		struct cluster_params p = { .node_id = (uint64_t)i + 1,
					    .submit_ns = 5 * SH_NSEC_PER_SEC,
					    .prepare = fake_prepare };
		int port = free_port();

		if (i == 0)
			c.port = port;
		if (i == 1)
			w.port2 = port;
		snprintf(w.mgmt[i], sizeof(w.mgmt[i]), "127.0.0.1:%d", port);
		snprintf(w.data[i], sizeof(w.data[i]), "127.0.0.1:%d", free_port());
		snprintf(dir[i], sizeof(dir[i]), "%s/n%d", sh_test_dir(), i + 1);
		SH_ASSERT_EQ(mkdir(dir[i], 0755), 0);
		memset(&ifc[i], 0, sizeof(ifc[i]));
		SH_ASSERT_OK(env_addr_parse(w.mgmt[i], &ifc[i].addr));
		SH_ASSERT_OK(net_create(env, &nc, &w.net[i]));
		p.mgmt = w.mgmt[i];
		p.data = w.data[i];
		p.dir = dir[i];
		if (i == 0) {
			p.changed = fake_meta;
			p.arg = &w;
		}
		SH_ASSERT_OK(cluster_start(w.net[i], &p, &w.cl[i]));
	}
	w.api.cl = w.cl[0];
	w.api2 = (struct api_ctx){ .cl = w.cl[1], .self = w.api.self };
	w.api2.self.id = 2;
	SH_ASSERT_OK(admin_http_start(env, w.mgmt[0], NULL, on_api, &w.api, &h));
	SH_ASSERT_OK(admin_http_start(env, w.mgmt[1], NULL, on_api, &w.api2, &h2));
	run_script(&c);
	admin_http_quiesce(h);
	admin_http_quiesce(h2);
	for (int i = 0; i < SNAP_NODES; i++)
		cluster_stop(w.cl[i], on_node_stopped, &w);
	w.cl[0] = NULL;
	while (w.stopped < SNAP_NODES)
		env_real_run_once(env, 100 * SH_NSEC_PER_MSEC);
	pthread_join(late_th, NULL);
	SH_ASSERT_MSG(late.status == 503 && strstr(late.out, "shutting down"), "%d %s", late.status,
		      late.out);
	admin_http_stop(h);
	admin_http_stop(h2);
	for (int i = 0; i < SNAP_NODES; i++)
		net_destroy(w.net[i]);
	env_real_destroy(env);
}
