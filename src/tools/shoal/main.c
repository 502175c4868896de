// SPDX-License-Identifier: Apache-2.0
/*
 * shoal: the command line (docs/cli.md).
 *
 *   shoal [--addr IP:PORT] [--json] COMMAND ...
 *
 * The address of any node's admin API comes from --addr, else $SHOAL_ADDR,
 * else the local cluster of ./run (shoal local up), else 127.0.0.1:7400.
 * Exit status: 0 success, 2 bad usage (one-line reason), 1 the operation
 * failed (the server's reason).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../dpdk/dpdk.h"
#include "shoal.h"

static const char usage_text[] =
    "usage: shoal [--addr IP:PORT] [--json] COMMAND\n"
    "  cluster create NAME [--buckets N]\n"
    "  node add ID --mgmt IP:PORT --data IP:PORT [--domain NAME]\n"
    "  node list | node remove ID\n"
    "  drive add NODE PATH | drive list\n"
    "  net add NODE IP:PORT --label LABEL | net remove IP:PORT | net list (also: node net ...)\n"
    "  cluster processes\n"
    "  fs create NAME [--protection D+P] [--compression lz4|zstd[:LEVEL]|none] [--dedup on|off]\n"
    "            [--quota SIZE] [--encrypt KEYFILE]  (KEYFILE: the file system key, made if none)\n"
    "  fs rekey FS --old KEYFILE --new KEYFILE  (an encrypted FS's key changed; made if none)\n"
    "  fs list | fs delete NAME\n"
    "  fs snapshot create FS NAME [--writable] | fs snapshot list FS | fs snapshot delete FS NAME\n"
    "  fs restore FS@SNAPSHOT  (FS goes back to it; paused meanwhile, open files ESTALE)\n"
    "  fs clone FS@SNAPSHOT NEWFS  (a writable clone: shares every block until written)\n"
    "  fs key create FS --read-only|--read-write [--out FILE] | fs key list FS\n"
    "  fs key revoke FS ID\n"
    "  fs snapshot schedule FS [--every DURATION [--keep N]] (DURATION: 15m, 6h, 1d; off)\n"
    "  drive fail ID | drive remove ID (drains it first)\n"
    "  cluster set rebuild-delay|rebuild-share|scrub-rate|scrub-interval VALUE | cluster settings\n"
    "  rebuild status [--watch [SECONDS]]\n"
    "  status | events [--limit N] | stats [--interval S] [--count N]\n"
    "  local up [--nodes N] [--drive-size SIZE] [--dir DIR] [--port P] [--buckets N]\n"
    "           [--mode cpu|performance]\n"
    "  local status [--dir DIR] | local add [--dir DIR] | local down [--dir DIR] [--wipe]\n"
    "  ns FS stat|lstat|ls|mkdir|touch|rm|rmdir|readlink PATH | ns FS mv|ln FROM TO\n"
    "  ns FS ln -s TARGET PATH | ns FS chmod MODE PATH | ns FS xattr set|get|rm|ls ...\n"
    "  ns FS storm DIR THREADS FILES LOG [PREFIX] | ns FS check LOG\n"
    "  ns FS put LOCAL PATH | ns FS get PATH LOCAL | ns FS pwrite PATH OFFSET LOCAL\n"
    "  ns FS truncate PATH SIZE | ns FS usage | ns FS df\n"
    "  mount [ADDR/]FS DIR [-f] [-o "
    "allow_other,coherent,cache=on|off,attr_timeout=S,entry_timeout=S,threads=N,timeout=S,\n"
    "          readahead=KIB,max_io=KIB,frag=KIB]\n"
    "  umount DIR\n";

void
usage_error(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "shoal: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " (shoal --help for usage)\n");
	exit(2);
}

void
fail(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "shoal: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
	exit(1);
}

double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

long long
parse_size(const char *s)
{
	char *end;
	double v = strtod(s, &end);
	long long mul = 1;

	if (end == s || v < 0)
		return -1;
	switch (*end) {
	case '\0':
		break;
	case 'k':
	case 'K':
		mul = 1ll << 10;
		end++;
		break;
	case 'm':
	case 'M':
		mul = 1ll << 20;
		end++;
		break;
	case 'g':
	case 'G':
		mul = 1ll << 30;
		end++;
		break;
	case 't':
	case 'T':
		mul = 1ll << 40;
		end++;
		break;
	default:
		return -1;
	}
	if (*end == 'i' && end[-1] != '\0')
		end++;
	if (*end == 'B')
		end++;
	return *end ? -1 : (long long)(v * (double)mul);
}

static const char *
server_reason(int status, const char *body)
{
	static char msg[512];
	json_t *j = body ? json_loads(body, 0, NULL) : NULL;
	const char *e = j ? json_string_value(json_object_get(j, "error")) : NULL;

	snprintf(msg, sizeof(msg), "%s", e ? e : (body && *body ? body : "no reason given"));
	/* the HTTP server's own timeout says nothing more; the API's 504s do (with a code) */
	if (status == 504 && json_object_get(j, "code") == NULL)
		snprintf(msg, sizeof(msg), "the node did not answer in time");
	json_decref(j);
	return msg;
}

static bool
ok_status(int status)
{
	return status >= 200 && status <= 299;
}

const char *
cli_token(const char *addr)
{
	static char given[SH_TOKEN_LEN + 1], local[SH_TOKEN_LEN + 1];
	static bool done;
	int rc;

	if (!done) {
		done = true;
		rc = sh_token_env(given);
		if (rc < 0 && getenv("SHOAL_TOKEN") != NULL && *getenv("SHOAL_TOKEN") != '\0')
			usage_error("$SHOAL_TOKEN is not an admin token (64 hex digits)");
		if (rc < 0)
			usage_error("$SHOAL_TOKEN_FILE %s: %s", getenv("SHOAL_TOKEN_FILE"),
				    rc == -EPERM    ? "others may read it (chmod 600 it)"
				    : rc == -EINVAL ? "not an admin token (64 hex digits)"
						    : strerror(-rc));
		if (rc == 0)
			given[0] = '\0';
		/* the local cluster of ./run (`shoal local up`'s default), or of `make run` */
		if (sh_token_load("run/" SH_TOKEN_FILE, local) < 0 &&
		    sh_token_load("run/local/" SH_TOKEN_FILE, local) < 0)
			local[0] = '\0';
	}
	if (given[0])
		return given;
	/* a local cluster's token goes to loopback addresses only, never elsewhere */
	if (strncmp(addr, "https://", 8) == 0)
		addr += 8;
	return local[0] && strncmp(addr, "127.", 4) == 0 ? local : NULL;
}

static char *
call(const struct cli *c, const char *method, const char *path, const char *body, int *status)
{
	char *out = NULL;
	int rc = sh_http_call(c->addr, cli_token(c->addr), method, path, body, &out, 40);

	if (rc < 0) {
		if (rc == -EINVAL)
			usage_error("'%s' is not an address (IP:PORT)", c->addr);
		if (rc == -EKEYREJECTED)
			fail("the admin API at %s: its TLS certificate is not one $SHOAL_CA_FILE "
			     "trusts, or does not name that address",
			     c->addr);
		if (rc == -EPROTO || rc == -ECONNRESET)
			fail("the admin API at %s gave no HTTP answer: %s", c->addr,
			     getenv("SHOAL_CA_FILE") ? "it may not use TLS (unset $SHOAL_CA_FILE)"
						     : "it may use TLS (set $SHOAL_CA_FILE to the "
						       "certificates to trust)");
		fail("cannot reach the admin API at %s: %s", c->addr, strerror(-rc));
	}
	if (rc == 401)
		fail("the admin API at %s refused: %s", c->addr,
		     cli_token(c->addr)
			 ? "the token given is not this cluster's ($SHOAL_TOKEN, "
			   "$SHOAL_TOKEN_FILE or ./run[/local]/admin.token)"
			 : "it needs the cluster's admin token: set $SHOAL_TOKEN_FILE to "
			   "a node's DIR/admin.token, or $SHOAL_TOKEN to its text "
			   "(docs/security.md)");
	*status = rc;
	return out;
}

/*
 * Before a node is added: it must hold the cluster's secret. Both say
 * which one they hold in GET /v1/status (open); a node that does not answer
 * yet is added as before (it is checked when it answers).
 */
static void
check_secret(const struct cli *c, const char *mgmt)
{
	char *out = NULL;
	json_t *self = api_get(c, "/v1/status"), *other = NULL;
	const char *want = json_string_value(json_object_get(self, "secret_fingerprint")), *got;

	if (sh_http_call(mgmt, NULL, "GET", "/v1/status", NULL, &out, 5) == 200)
		other = json_loads(out, 0, NULL);
	free(out);
	got = json_string_value(json_object_get(other, "secret_fingerprint"));
	if (want && *want && got && *got && strcmp(want, got) != 0)
		fail("the node at %s holds another cluster secret (fingerprint %s, this cluster's "
		     "%s): copy a member's DIR/cluster.secret to its state directory (mode 0600) "
		     "and restart it (docs/security.md)",
		     mgmt, got, want);
	json_decref(self);
	json_decref(other);
}

json_t *
api_get(const struct cli *c, const char *path)
{
	return api_call(c, "GET", path, NULL);
}

int
api_try(const struct cli *c, const char *method, const char *path, json_t *body, char *reason,
	size_t len)
{
	char *b = body ? json_dumps(body, JSON_COMPACT) : NULL;
	int status;
	char *out = call(c, method, path, b, &status);

	free(b);
	json_decref(body);
	if (!ok_status(status))
		snprintf(reason, len, "%s", server_reason(status, out));
	else if (c->json)
		printf("%s", out);
	free(out);
	return status;
}

void
api_change(const struct cli *c, const char *method, const char *path, json_t *body)
{
	char reason[512];

	if (!ok_status(api_try(c, method, path, body, reason, sizeof(reason))))
		fail("%s", reason);
}

json_t *
api_call(const struct cli *c, const char *method, const char *path, json_t *body)
{
	char *b = body ? json_dumps(body, JSON_COMPACT) : NULL;
	int status;
	char *out = call(c, method, path, b, &status);
	json_t *j;

	free(b);
	json_decref(body);
	if (!ok_status(status))
		fail("%s", server_reason(status, out));
	j = json_loads(out, 0, NULL);
	if (j == NULL)
		fail("the server sent a reply that is not JSON");
	free(out);
	return j;
}

/* ---- argument helpers ---- */

struct args {
	int argc;
	char **argv;
	int i;
};

static const char *
next_pos(struct args *a, const char *what)
{
	if (a->i >= a->argc || strncmp(a->argv[a->i], "--", 2) == 0)
		usage_error("missing %s", what);
	return a->argv[a->i++];
}

/* --name VALUE options after the positional ones; unknown ones are usage errors. */
static const char *
opt(struct args *a, const char *name, const char *const known[])
{
	for (int i = a->i; i < a->argc; i++) {
		bool ok = false;

		for (int k = 0; known[k]; k++)
			ok |= strcmp(a->argv[i], known[k]) == 0;
		if (!ok)
			usage_error("unknown %s '%s'",
				    strncmp(a->argv[i], "--", 2) == 0 ? "option" : "argument",
				    a->argv[i]);
		if (i + 1 >= a->argc)
			usage_error("%s needs a value", a->argv[i]);
		if (strcmp(a->argv[i], name) == 0)
			return a->argv[i + 1];
		i++;
	}
	return NULL;
}

static unsigned long long
parse_id(const char *s, const char *what)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 10);

	if (*s == '\0' || *end != '\0' || v == 0 || s[0] == '-')
		usage_error("%s must be a positive number, not '%s'", what, s);
	return v;
}

static void
check_addr(const char *s, const char *what)
{
	unsigned a, b, c, d, port;
	char tail;

	if (sscanf(s, "%u.%u.%u.%u:%u%c", &a, &b, &c, &d, &port, &tail) != 5 || a > 255 ||
	    b > 255 || c > 255 || d > 255 || port == 0 || port > 65535)
		usage_error("%s '%s' is not IP:PORT", what, s);
}

/* ---- tables ---- */

const char *
jstr(json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));
	return s ? s : "";
}

long long
jint(json_t *o, const char *k)
{
	return (long long)json_integer_value(json_object_get(o, k));
}

void
human_size(long long b, char *buf, size_t len)
{
	const char *u[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
	double v = (double)b;
	int i = 0;

	while (v >= 1024 && i < 5) {
		v /= 1024;
		i++;
	}
	snprintf(buf, len, i ? "%.1f %s" : "%.0f %s", v, u[i]);
}

void
print_json(json_t *j)
{
	char *s = json_dumps(j, JSON_INDENT(2));

	printf("%s\n", s ? s : "null");
	free(s);
}

static void
show_status(const struct cli *c, json_t *j)
{
	json_t *n = json_object_get(j, "nodes"), *r = json_object_get(j, "raft");
	json_t *me = json_object_get(j, "node"), *voters = json_object_get(r, "voters");
	char cap[32];
	size_t i;
	json_t *v;

	(void)c;
	if (!json_is_true(json_object_get(j, "created"))) {
		printf("node %lld: not in a cluster yet (shoal cluster create NAME)\n",
		       jint(me, "id"));
		return;
	}
	human_size(jint(j, "capacity"), cap, sizeof(cap));
	printf("cluster     %s (%s)\n", jstr(j, "cluster"), jstr(j, "uuid"));
	printf("epoch       %lld\n", jint(j, "epoch"));
	printf("leader      node %lld\n", jint(j, "leader"));
	printf("config      ");
	json_array_foreach(voters, i, v)
	    printf("%s%lld", i ? "," : "nodes ", (long long)json_integer_value(v));
	printf(" (this node: %s, term %lld)\n", jstr(r, "state"), jint(r, "term"));
	printf("nodes       %lld (%lld up, %lld down", jint(n, "total"), jint(n, "up"),
	       jint(n, "down"));
	if (jint(n, "data_down") > 0)
		printf(", of which %lld with the data network down", jint(n, "data_down"));
	printf(")\n");
	printf("drives      %lld, %s\n", jint(j, "drives"), cap);
	printf("buckets     %lld, groups of %lld\n", jint(j, "buckets"), jint(j, "replicas"));
	printf("filesystems %lld\n", jint(j, "filesystems"));
	if (jint(j, "filesystems") > 0)
		rebuild_status_line(c);
}

static void
show_nodes(json_t *a)
{
	size_t i;
	json_t *n;

	printf("%-5s %-9s %-22s %-22s %-12s %-7s %-7s %s\n", "ID", "STATE", "MGMT", "DATA",
	       "DOMAIN", "CONFIG", "DRIVES", "CAPACITY");
	json_array_foreach(a, i, n)
	{
		char cap[32];

		human_size(jint(n, "capacity"), cap, sizeof(cap));
		printf("%-5lld %-9s %-22s %-22s %-12s %-7s %-7lld %s\n", jint(n, "id"),
		       jstr(n, "state"), jstr(n, "mgmt"), jstr(n, "data"), jstr(n, "domain"),
		       json_is_true(json_object_get(n, "leader"))  ? "leader"
		       : json_is_true(json_object_get(n, "voter")) ? "voter"
								   : "-",
		       jint(n, "drives"), cap);
	}
}

static void
show_drives(json_t *a)
{
	size_t i;
	json_t *d;

	printf("%-6s %-5s %-10s %-7s %-6s %s\n", "ID", "NODE", "CAPACITY", "STATE", "DATA", "PATH");
	json_array_foreach(a, i, d)
	{
		char cap[32];

		human_size(jint(d, "capacity"), cap, sizeof(cap));
		printf("%-6lld %-5lld %-10s %-7s %-6s %s\n", jint(d, "id"), jint(d, "node"), cap,
		       jstr(d, "state"), jstr(d, "target"), jstr(d, "path"));
	}
}

static void
show_nets(json_t *a)
{
	size_t i;
	json_t *d;

	printf("%-5s %-22s %s\n", "NODE", "ADDRESS", "LABEL");
	json_array_foreach(a, i, d)
	    printf("%-5lld %-22s %s\n", jint(d, "node"), jstr(d, "addr"), jstr(d, "label"));
}

static void
show_fs(json_t *a)
{
	size_t i;
	json_t *f;

	printf("%-16s %-6s %-8s %-5s %-8s %9s %9s %6s %6s %9s\n", "NAME", "PROT", "COMPRESS",
	       "DEDUP", "QUOTA", "LOGICAL", "PHYSICAL", "COMP", "DEDUP", "SNAPSHOTS");
	json_array_foreach(a, i, f)
	{
		char q[32] = "none", lg[32], ph[32], sn[32];

		if (jint(f, "quota"))
			human_size(jint(f, "quota"), q, sizeof(q));
		human_size(jint(f, "logical_bytes"), lg, sizeof(lg));
		human_size(jint(f, "physical_bytes"), ph, sizeof(ph));
		human_size(jint(f, "snapshot_bytes"), sn, sizeof(sn));
		printf("%-16s %-6s %-8s %-5s %-8s %9s %9s %5.2fx %5.2fx %9s\n", jstr(f, "name"),
		       jstr(f, "protection"), jstr(f, "compression"),
		       json_is_true(json_object_get(f, "dedup")) ? "on" : "off", q, lg, ph,
		       json_real_value(json_object_get(f, "compression_ratio")),
		       json_real_value(json_object_get(f, "dedup_ratio")), sn);
		if (jint(f, "usage_nodes") < jint(f, "nodes"))
			printf("  (usage from %lld of %lld nodes: the others did not answer)\n",
			       (long long)jint(f, "usage_nodes"), (long long)jint(f, "nodes"));
		if (json_is_string(json_object_get(f, "restoring")))
			printf("  (being restored to a snapshot: %s; paused meanwhile)\n",
			       jstr(f, "restoring"));
		if (json_is_object(json_object_get(f, "clone"))) {
			json_t *k = json_object_get(f, "clone");

			char own[32];

			human_size(jint(k, "own_bytes"), own, sizeof(own));
			printf("  (%s %s@%s, %s: %s its own, freed when it is deleted; what it "
			       "shares with the snapshot is stored with %s)\n",
			       strchr(jstr(f, "name"), '@') ? "the writable snapshot"
							    : "a writable clone of",
			       jstr(k, "origin"), jstr(k, "snapshot"), jstr(k, "state"), own,
			       jstr(k, "origin"));
		}
	}
}

static void
show_events(json_t *a)
{
	size_t i;
	json_t *e;

	for (i = json_array_size(a); i > 0; i--) {
		char when[32];
		time_t t;
		struct tm tm;

		e = json_array_get(a, i - 1);
		t = (time_t)(jint(e, "time") / 1000);
		gmtime_r(&t, &tm);
		strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
		printf("%s.%03lld  %s\n", when, jint(e, "time") % 1000, jstr(e, "text"));
	}
}

/* GET and show, as a table or as JSON. */
static int
show(const struct cli *c, const char *path, void (*fn)(json_t *))
{
	json_t *j = api_get(c, path);

	if (c->json)
		print_json(j);
	else
		fn(j);
	json_decref(j);
	return 0;
}

/* ---- commands ---- */

static const char *const no_opts[] = { NULL };

static void
done(const struct cli *c, const char *what)
{
	if (!c->json)
		printf("%s\n", what);
}

static int
run(struct cli *c, int argc, char **argv)
{
	struct args a = { argc, argv, 2 };
	const char *obj = argv[0], *verb = argc > 1 ? argv[1] : "";
	char path[512], msg[512];

	if (strcmp(obj, "status") == 0) {
		json_t *j;

		a.i = 1;
		opt(&a, "", no_opts);
		j = api_get(c, "/v1/status");
		if (c->json)
			print_json(j);
		else
			show_status(c, j);
		json_decref(j);
		return 0;
	}
	if (strcmp(obj, "events") == 0) {
		static const char *const k[] = { "--limit", NULL };
		const char *lim;

		a.i = 1;
		lim = opt(&a, "--limit", k);
		snprintf(path, sizeof(path), "/v1/events?limit=%llu",
			 lim ? parse_id(lim, "--limit") : 256ull);
		return show(c, path, show_events);
	}
	if (strcmp(obj, "local") == 0)
		return cmd_local(c, argc - 1, argv + 1);
	if (strcmp(obj, "rebuild") == 0)
		return cmd_rebuild(c, argc - 1, argv + 1);
	if (strcmp(obj, "stats") == 0)
		return cmd_stats(c, argc, argv);
	if (strcmp(obj, "ns") == 0)
		return cmd_ns(c, argc - 1, argv + 1);
	if (strcmp(obj, "mount") == 0)
		return cmd_mount(c, argc - 1, argv + 1);
	if (strcmp(obj, "umount") == 0)
		return cmd_umount(c, argc - 1, argv + 1);
	if (strcmp(obj, "cluster") == 0 && strcmp(verb, "create") == 0) {
		static const char *const k[] = { "--buckets", NULL };
		const char *name = next_pos(&a, "cluster name"), *b = opt(&a, "--buckets", k);
		json_t *body = json_pack("{s:s}", "name", name);

		if (b)
			json_object_set_new(body, "buckets",
					    json_integer((json_int_t)parse_id(b, "--buckets")));
		api_change(c, "POST", "/v1/cluster", body);
		snprintf(msg, sizeof(msg), "cluster %s created", name);
		done(c, msg);
		return 0;
	}
	if (strcmp(obj, "cluster") == 0 && strcmp(verb, "set") == 0) {
		const char *name = next_pos(&a, "setting name");
		const char *v = next_pos(&a, "value");
		char *end;
		long long n = strtoll(v, &end, 10);

		opt(&a, "", no_opts);
		if (*v == '\0' || *end != '\0' || n < 0)
			usage_error("the value of %s must be a number, 0 or more, not '%s'", name,
				    v);
		{
			json_t *cur = api_get(c, "/v1/settings");
			json_t *v2 = json_object_get(cur, name);
			bool same = json_is_integer(v2) && json_integer_value(v2) == n;

			json_decref(cur);
			if (same) { /* asked again: nothing to change */
				snprintf(msg, sizeof(msg), "%s is %lld already", name, n);
				done(c, msg);
				return 0;
			}
		}
		snprintf(path, sizeof(path), "/v1/settings/%s", name);
		api_change(c, "PUT", path, json_pack("{s:I}", "value", (json_int_t)n));
		snprintf(msg, sizeof(msg), "%s is now %lld", name, n);
		done(c, msg);
		return 0;
	}
	if (strcmp(obj, "cluster") == 0 && strcmp(verb, "settings") == 0) {
		json_t *j, *v;
		const char *k;

		opt(&a, "", no_opts);
		j = api_get(c, "/v1/settings");
		if (c->json)
			print_json(j);
		else
			json_object_foreach(j, k, v)
			    printf("%-14s %lld\n", k, (long long)json_integer_value(v));
		json_decref(j);
		return 0;
	}
	if (strcmp(obj, "node") == 0) {
		if (strcmp(verb, "list") == 0) {
			opt(&a, "", no_opts);
			return show(c, "/v1/nodes", show_nodes);
		}
		if (strcmp(verb, "add") == 0) {
			static const char *const k[] = { "--mgmt", "--data", "--domain", NULL };
			unsigned long long id = parse_id(next_pos(&a, "node id"), "node id");
			const char *m = opt(&a, "--mgmt", k), *d = opt(&a, "--data", k);
			const char *dom = opt(&a, "--domain", k);
			json_t *body;

			if (!m || !d)
				usage_error("node add needs --mgmt IP:PORT and --data IP:PORT");
			check_addr(m, "--mgmt");
			check_addr(d, "--data");
			body = json_pack("{s:I, s:s, s:s}", "id", (json_int_t)id, "mgmt", m, "data",
					 d);
			if (dom)
				json_object_set_new(body, "domain", json_string(dom));
			check_secret(c, m);
			api_change(c, "POST", "/v1/nodes", body);
			snprintf(msg, sizeof(msg), "node %llu added", id);
			done(c, msg);
			return 0;
		}
		if (strcmp(verb, "remove") == 0) {
			unsigned long long id = parse_id(next_pos(&a, "node id"), "node id");

			opt(&a, "", no_opts);
			return node_remove(c, id);
		}
	}
	if (strcmp(obj, "drive") == 0) {
		if (strcmp(verb, "fail") == 0) {
			unsigned long long id = parse_id(next_pos(&a, "drive id"), "drive id");

			opt(&a, "", no_opts);
			snprintf(path, sizeof(path), "/v1/drives/%llu", id);
			api_change(c, "PUT", path, json_pack("{s:s}", "state", "failed"));
			snprintf(
			    msg, sizeof(msg),
			    "drive %llu failed: its fragments are rebuilt (shoal rebuild status)",
			    id);
			done(c, msg);
			return 0;
		}
		if (strcmp(verb, "remove") == 0) {
			unsigned long long id = parse_id(next_pos(&a, "drive id"), "drive id");

			opt(&a, "", no_opts);
			return drive_remove(c, id);
		}
		if (strcmp(verb, "list") == 0) {
			opt(&a, "", no_opts);
			return show(c, "/v1/drives", show_drives);
		}
		if (strcmp(verb, "add") == 0) {
			unsigned long long node = parse_id(next_pos(&a, "node id"), "node id");
			const char *p = next_pos(&a, "drive path");
			char *abs = realpath(p, NULL);

			opt(&a, "", no_opts);
			/* the path is resolved here only to be helpful; the node checks it */
			api_change(c, "POST", "/v1/drives",
				   json_pack("{s:I, s:s}", "node", (json_int_t)node, "path",
					     abs ? abs : p));
			snprintf(msg, sizeof(msg), "drive %s added to node %llu", abs ? abs : p,
				 node);
			free(abs);
			done(c, msg);
			return 0;
		}
	}
	if (strcmp(obj, "node") == 0 && strcmp(verb, "net") == 0)
		return run(c, argc - 1,
			   argv + 1); /* shoal node net add|remove|list: as shoal net */
	if (strcmp(obj, "cluster") == 0 && strcmp(verb, "processes") == 0) {
		opt(&a, "", no_opts);
		return cmd_processes(c);
	}
	if (strcmp(obj, "net") == 0) {
		if (strcmp(verb, "remove") == 0) {
			const char *ad = next_pos(&a, "interface address");

			opt(&a, "", no_opts);
			check_addr(ad, "interface address");
			snprintf(path, sizeof(path), "/v1/nets/%s", ad);
			api_change(c, "DELETE", path, NULL);
			snprintf(msg, sizeof(msg), "interface %s removed", ad);
			done(c, msg);
			return 0;
		}
		if (strcmp(verb, "list") == 0) {
			opt(&a, "", no_opts);
			return show(c, "/v1/nets", show_nets);
		}
		if (strcmp(verb, "add") == 0) {
			static const char *const k[] = { "--label", NULL };
			unsigned long long node = parse_id(next_pos(&a, "node id"), "node id");
			const char *ad = next_pos(&a, "interface address");
			const char *l = opt(&a, "--label", k);

			check_addr(ad, "interface address");
			if (!l)
				usage_error("net add needs --label LABEL");
			api_change(c, "POST", "/v1/nets",
				   json_pack("{s:I, s:s, s:s}", "node", (json_int_t)node, "addr",
					     ad, "label", l));
			snprintf(msg, sizeof(msg), "interface %s (%s) added to node %llu", ad, l,
				 node);
			done(c, msg);
			return 0;
		}
	}
	if (strcmp(obj, "fs") == 0) {
		if (strcmp(verb, "snapshot") == 0)
			return cmd_snapshot(c, argc - 2, argv + 2);
		if (strcmp(verb, "key") == 0)
			return cmd_key(c, argc - 2, argv + 2);
		if (strcmp(verb, "restore") == 0)
			return cmd_restore(c, argc - 2, argv + 2);
		if (strcmp(verb, "clone") == 0)
			return cmd_clone(c, argc - 2, argv + 2);
		if (strcmp(verb, "rekey") == 0) {
			static const char *const k[] = { "--old", "--new", NULL };
			const char *name = next_pos(&a, "filesystem name");
			const char *o = opt(&a, "--old", k), *n = opt(&a, "--new", k);

			if (o == NULL || n == NULL)
				usage_error("fs rekey FS --old KEYFILE --new KEYFILE");
			return fs_rekey(c, name, o, n);
		}
		if (strcmp(verb, "list") == 0) {
			opt(&a, "", no_opts);
			return show(c, "/v1/fs", show_fs);
		}
		if (strcmp(verb, "create") == 0) {
			static const char *const k[] = { "--protection", "--compression", "--dedup",
							 "--quota",	 "--encrypt",	  NULL };
			const char *name = next_pos(&a, "filesystem name");
			const char *p = opt(&a, "--protection", k),
				   *cm = opt(&a, "--compression", k);
			const char *dd = opt(&a, "--dedup", k), *q = opt(&a, "--quota", k);
			const char *ek = opt(&a, "--encrypt", k);
			json_t *body = json_pack("{s:s}", "name", name);
			unsigned dv, pv;
			char tail;

			if (p) {
				if (sscanf(p, "%u+%u%c", &dv, &pv, &tail) != 2)
					usage_error("--protection '%s' is not D+P (e.g. 4+2)", p);
				json_object_set_new(body, "protection", json_string(p));
			}
			if (cm) {
				if (cfg_comp_parse(cm) < 0)
					usage_error("--compression is lz4, zstd, zstd:LEVEL (1-19) "
						    "or none, not '%s'",
						    cm);
				json_object_set_new(body, "compression", json_string(cm));
			}
			if (dd) {
				if (strcmp(dd, "on") && strcmp(dd, "off"))
					usage_error("--dedup is on or off, not '%s'", dd);
				json_object_set_new(body, "dedup",
						    json_boolean(strcmp(dd, "on") == 0));
			}
			if (q) {
				long long qb = parse_size(q);

				if (qb < 0)
					usage_error("--quota '%s' is not a size (e.g. 10G)", q);
				json_object_set_new(body, "quota", json_integer(qb));
			}
			if (ek)
				fs_encrypt_body(body, ek);
			api_change(c, "POST", "/v1/fs", body);
			snprintf(msg, sizeof(msg), "filesystem %s created", name);
			done(c, msg);
			return 0;
		}
		if (strcmp(verb, "delete") == 0) {
			const char *name = next_pos(&a, "filesystem name");

			opt(&a, "", no_opts);
			snprintf(path, sizeof(path), "/v1/fs/%s", name);
			api_change(c, "DELETE", path, NULL);
			snprintf(msg, sizeof(msg), "filesystem %s deleted", name);
			done(c, msg);
			return 0;
		}
	}
	if (argc > 1 && *verb)
		usage_error("unknown command '%s %s'", obj, verb);
	usage_error("unknown command '%s'", obj);
}

/* The admin address of ./run's local cluster, if there is one. */
static const char *
local_addr(void)
{
	static char buf[64];
	json_t *j = json_load_file("run/local.json", 0, NULL);
	const char *a = j ? json_string_value(json_object_get(j, "addr")) : NULL;

	if (a != NULL)
		snprintf(buf, sizeof(buf), "%s", a);
	json_decref(j);
	return a ? buf : NULL;
}

int
main(int argc, char **argv)
{
	struct cli c = { 0 };
	int i = 1;

	for (; i < argc && strncmp(argv[i], "--", 2) == 0; i++) {
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			fputs(usage_text, stdout);
			return 0;
		} else if (strcmp(argv[i], "--json") == 0) {
			c.json = true;
		} else if (strcmp(argv[i], "--addr") == 0 && i + 1 < argc) {
			c.addr = argv[++i];
		} else {
			usage_error("unknown option '%s'", argv[i]);
		}
	}
	if (i >= argc) {
		fputs(usage_text, stderr);
		return 2;
	}
	if (getenv("SHOAL_DPDK") != NULL && *getenv("SHOAL_DPDK") != '\0') {
		/* a DPDK client (docs/dpdk.md): SHOAL_DATA_IFACES names IP/LABEL@dpdk:DEV */
		const char *mtu = getenv("SHOAL_DPDK_MTU");
		char *end = NULL;
		unsigned long v = mtu != NULL && *mtu ? strtoul(mtu, &end, 10) : 0;
		int rc = end != NULL && *end != '\0' ? -EINVAL : sh_dpdk_set_mtu((unsigned)v);

		if (rc < 0) {
			fprintf(stderr, "shoal: SHOAL_DPDK_MTU=%s: not an MTU of %d to %d\n", mtu,
				SH_DPDK_MTU_MIN, SH_DPDK_MTU_MAX);
			return 1;
		}
		rc = sh_dpdk_init(getenv("SHOAL_DPDK"), 1);

		if (rc < 0) {
			fprintf(stderr, "shoal: SHOAL_DPDK: DPDK does not start: %s\n",
				sh_strerror(rc));
			return 1;
		}
	}
	if (c.addr == NULL)
		c.addr = getenv("SHOAL_ADDR");
	if (c.addr == NULL)
		c.addr = local_addr();
	if (c.addr == NULL)
		c.addr = SHOAL_DEFAULT_ADDR;
	return run(&c, argc - i, argv + i);
}
