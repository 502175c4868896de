// SPDX-License-Identifier: Apache-2.0
/*
 * shoal local: a whole cluster on this machine, on loopback, with
 * file-backed drives (docs/cli.md).
 *
 *   DIR/local.json      nodes, ports, pids (what status and down read)
 *   DIR/nN/             node N's shoald directory (config Raft log)
 *   DIR/nN.log          its log
 *   DIR/drives/nN.img   its drive
 *   DIR/cluster.secret  the cluster secret every node is started with (0600)
 *   DIR/admin.token     the admin API's token derived from it (0600)
 *   DIR/client.key      the cluster's client key derived from it (0600): opens
 *                       every filesystem (SHOAL_KEY_FILE; docs/security.md)
 *
 * Node N listens on 127.0.0.1:(PORT + N - 1) for management (UDP and the
 * admin API on TCP) and 127.0.0.1:(PORT + 100 + N - 1) for data.
 * `up` on an existing DIR restarts the same cluster, which comes back with
 * the configuration it had; `down` stops it and keeps the data.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <stdarg.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../base/access_key.h"
#include "../../net/auth.h"
#include "shoal.h"

#define LOCAL_NODES_MAX 32

struct local {
	char dir[PATH_MAX];
	int nodes;
	int port;
	int buckets;
	long long drive_size;
	const char *mode;
	pid_t pids[LOCAL_NODES_MAX + 1];
	char token[SH_TOKEN_LEN + 1]; /* "": none (a cluster made before there were secrets) */
};

/*
 * The cluster's secret, made on the first `up` (docs/security.md), and
 * the admin token from it, written beside it for the CLI and the tests
 * (SHOAL_TOKEN_FILE=DIR/admin.token). Without make, a missing secret
 * leaves the token empty.
 */
static void
local_secret(struct local *l, bool make)
{
	char path[PATH_MAX + 32];
	uint8_t s[SH_SECRET_LEN], net_key[SH_SECRET_LEN], key[SH_KEY_LEN];
	int rc;

	snprintf(path, sizeof(path), "%s/" SH_SECRET_FILE, l->dir);
	rc = make ? sh_secret_load_or_make(path, s) : sh_secret_load(path, s);
	if (rc == -ENOENT && !make)
		return;
	if (rc >= 0)
		rc = sh_token_derive(s, l->token);
	if (rc >= 0)
		rc = sh_secret_net_key(s, net_key);
	if (rc >= 0)
		rc = net_auth_client_key(net_key, key);
	explicit_bzero(s, sizeof(s));
	explicit_bzero(net_key, sizeof(net_key));
	if (rc < 0)
		fail("the cluster secret %s: %s", path,
		     rc == -EPERM ? "group or others may read it, or another user owns it (chmod "
				    "600 it)"
				  : strerror(-rc));
	snprintf(path, sizeof(path), "%s/" SH_TOKEN_FILE, l->dir);
	rc = sh_token_keep(path, l->token);
	if (rc < 0)
		fail("cannot write %s: %s", path, strerror(-rc));
	snprintf(path, sizeof(path), "%s/" SH_CLIENT_KEY_FILE, l->dir);
	rc = sh_key_keep(path, SH_CLIENT_KEY_ID, key);
	explicit_bzero(key, sizeof(key));
	if (rc < 0)
		fail("cannot write %s: %s", path, strerror(-rc));
}

static void
node_addr(const struct local *l, int n, bool data, char *buf, size_t len)
{
	snprintf(buf, len, "127.0.0.1:%d", l->port + (data ? 100 : 0) + n - 1);
}

/*
 * A node's process is running: it exists and is not a zombie (a node
 * kill -9'd whose parent, not us since we daemonized it, has not reaped
 * it yet must count as dead, or `up` would not start it again).
 */
static bool
pid_alive(pid_t p)
{
	char path[64], buf[256];
	const char *st;
	FILE *f;
	bool alive;

	if (p <= 0 || kill(p, 0) != 0)
		return false;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)p);
	f = fopen(path, "r");
	if (f == NULL)
		return true; /* no /proc: take kill's word */
	alive = fgets(buf, sizeof(buf), f) == NULL || (st = strrchr(buf, ')')) == NULL ||
		(st[1] != ' ' || (st[2] != 'Z' && st[2] != 'X'));
	fclose(f);
	return alive;
}

static int
save(const struct local *l)
{
	char path[PATH_MAX + 32], addr[64];
	json_t *pids = json_array();
	json_t *j;
	int rc;

	for (int n = 1; n <= l->nodes; n++)
		json_array_append_new(pids, json_integer(l->pids[n]));
	node_addr(l, 1, false, addr, sizeof(addr));
	j = json_pack("{s:i, s:i, s:i, s:I, s:s, s:s, s:o}", "nodes", l->nodes, "port", l->port,
		      "buckets", l->buckets, "drive_size", (json_int_t)l->drive_size, "mode",
		      l->mode, "addr", addr, "pids", pids);
	snprintf(path, sizeof(path), "%s/local.json", l->dir);
	rc = json_dump_file(j, path, JSON_INDENT(2));
	json_decref(j);
	return rc;
}

static bool
load(struct local *l)
{
	char path[PATH_MAX + 32];
	json_t *j, *pids;
	static char mode[16];

	snprintf(path, sizeof(path), "%s/local.json", l->dir);
	j = json_load_file(path, 0, NULL);
	if (j == NULL)
		return false;
	l->nodes = (int)json_integer_value(json_object_get(j, "nodes"));
	l->port = (int)json_integer_value(json_object_get(j, "port"));
	l->buckets = (int)json_integer_value(json_object_get(j, "buckets"));
	l->drive_size = json_integer_value(json_object_get(j, "drive_size"));
	snprintf(mode, sizeof(mode), "%s",
		 json_string_value(json_object_get(j, "mode"))
		     ? json_string_value(json_object_get(j, "mode"))
		     : "cpu");
	l->mode = mode;
	pids = json_object_get(j, "pids");
	if (l->nodes < 1 || l->nodes > LOCAL_NODES_MAX || l->port <= 0)
		fail("%s is damaged; remove it (shoal local down --wipe)", path);
	for (int n = 1; n <= l->nodes; n++)
		l->pids[n] = (pid_t)json_integer_value(json_array_get(pids, (size_t)n - 1));
	json_decref(j);
	return true;
}

/* Is this port free for UDP and TCP on loopback? */
static bool
port_free(int port, bool tcp_too)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	bool ok = true;

	inet_pton(AF_INET, "127.0.0.1", &sin.sin_addr);
	for (int t = 0; t < (tcp_too ? 2 : 1) && ok; t++) {
		int fd = socket(AF_INET, t ? SOCK_STREAM : SOCK_DGRAM, 0);

		if (fd < 0)
			return false;
		if (t)
			setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &(int){ 1 }, sizeof(int));
		ok = bind(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0;
		close(fd);
	}
	return ok;
}

static const char *
self_dir(void)
{
	static char dir[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", dir, sizeof(dir) - 1);
	char *slash;

	if (n <= 0)
		return ".";
	dir[n] = '\0';
	slash = strrchr(dir, '/');
	if (slash)
		*slash = '\0';
	return dir;
}

static pid_t
spawn(const struct local *l, int n)
{
	char id[16], mgmt[64], data[64], dir[PATH_MAX + 16], log[PATH_MAX + 32], exe[PATH_MAX + 16];
	char secret[PATH_MAX + 32];
	pid_t pid;

	snprintf(id, sizeof(id), "%d", n);
	node_addr(l, n, false, mgmt, sizeof(mgmt));
	node_addr(l, n, true, data, sizeof(data));
	snprintf(dir, sizeof(dir), "%s/n%d", l->dir, n);
	snprintf(log, sizeof(log), "%s/n%d.log", l->dir, n);
	snprintf(secret, sizeof(secret), "%s/" SH_SECRET_FILE, l->dir);
	snprintf(exe, sizeof(exe), "%s/shoald", self_dir());
	pid = fork();
	if (pid < 0)
		fail("fork: %s", strerror(errno));
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);

		setsid();
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
			close(fd);
		}
		fd = open("/dev/null", O_RDONLY);
		if (fd >= 0)
			dup2(fd, 0);
		execl(exe, "shoald", "--id", id, "--mgmt", mgmt, "--data", data, "--dir", dir,
		      "--mode", l->mode, "--log", log, "--secret", secret, (char *)NULL);
		fprintf(stderr, "shoal local: cannot run %s: %s\n", exe, strerror(errno));
		_exit(127);
	}
	return pid;
}

static json_t *
try_get(const struct local *l, int n, const char *path)
{
	char addr[64], *out = NULL;
	json_t *j = NULL;
	int rc;

	node_addr(l, n, false, addr, sizeof(addr));
	rc = sh_http_call(addr, l->token, "GET", path, NULL, &out, 5);
	if (rc == 200)
		j = json_loads(out, 0, NULL);
	free(out);
	return j;
}

static void
post(const struct local *l, int n, const char *path, json_t *body, const char *what)
{
	char addr[64], *out = NULL, *b = json_dumps(body, JSON_COMPACT);
	int rc;

	node_addr(l, n, false, addr, sizeof(addr));
	rc = sh_http_call(addr, l->token, "POST", path, b, &out, 40);
	free(b);
	json_decref(body);
	if (rc != 200) {
		json_t *e = out ? json_loads(out, 0, NULL) : NULL;
		const char *m = e ? json_string_value(json_object_get(e, "error")) : NULL;

		fail("%s: %s", what, m ? m : (rc < 0 ? strerror(-rc) : "failed"));
	}
	free(out);
}

/* Healthy: a leader, every node up and following the newest epoch, min(5, n) voters. */
static bool
healthy(const struct local *l, char *why, size_t len)
{
	json_t *s = try_get(l, 1, "/v1/status");
	long long epoch, up, voters;
	bool ok = true;

	if (s == NULL) {
		snprintf(why, len, "node 1 does not answer");
		return false;
	}
	epoch = (long long)json_integer_value(json_object_get(s, "epoch"));
	up = (long long)json_integer_value(json_object_get(json_object_get(s, "nodes"), "up"));
	voters = (long long)json_array_size(json_object_get(json_object_get(s, "raft"), "voters"));
	if (json_integer_value(json_object_get(s, "leader")) == 0) {
		snprintf(why, len, "no configuration leader yet");
		ok = false;
	} else if (up != l->nodes) {
		snprintf(why, len, "%lld of %d nodes up", up, l->nodes);
		ok = false;
	} else if (voters != (l->nodes < 5 ? l->nodes : 5)) {
		snprintf(why, len, "%lld configuration members of %d", voters,
			 l->nodes < 5 ? l->nodes : 5);
		ok = false;
	}
	json_decref(s);
	for (int n = 2; ok && n <= l->nodes; n++) {
		json_t *t = try_get(l, n, "/v1/status");
		long long e = t ? (long long)json_integer_value(json_object_get(t, "epoch")) : -1;

		json_decref(t);
		if (e < epoch) {
			snprintf(why, len, "node %d has not caught up with the configuration", n);
			ok = false;
		}
	}
	return ok;
}

/* A step of `local up` and what it waits for, with the time since the start. */
static double up_t0;

static void __attribute__((format(printf, 1, 2))) step(const char *fmt, ...)
{
	va_list ap;

	printf("  [%5.1f s] ", now_s() - up_t0);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
}

static void
wait_healthy(const struct local *l, double timeout)
{
	double until = now_s() + timeout;
	char why[128] = "", said[128] = "";

	while (!healthy(l, why, sizeof(why))) {
		if (strcmp(why, said) != 0) {
			step("waiting: %s", why);
			memcpy(said, why, sizeof(said));
		}
		for (int n = 1; n <= l->nodes; n++)
			if (!pid_alive(l->pids[n]))
				fail("node %d (pid %d) died; see %s/n%d.log", n, (int)l->pids[n],
				     l->dir, n);
		if (now_s() > until)
			fail("the cluster is not healthy after %.0f s: %s (logs in %s)", timeout,
			     why, l->dir);
		usleep(100 * 1000);
	}
}

static void
wait_api(const struct local *l, int n)
{
	double until = now_s() + 15;

	for (;;) {
		json_t *j = try_get(l, n, "/v1/status");

		if (j != NULL) {
			json_decref(j);
			return;
		}
		if (!pid_alive(l->pids[n]))
			fail("node %d did not start; see %s/n%d.log", n, l->dir, n);
		if (now_s() > until)
			fail("node %d does not answer; see %s/n%d.log", n, l->dir, n);
		usleep(50 * 1000);
	}
}

static int
mkdirs(const char *path)
{
	char tmp[PATH_MAX];

	snprintf(tmp, sizeof(tmp), "%s", path);
	for (char *p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(tmp, 0755) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	return mkdir(tmp, 0755) < 0 && errno != EEXIST ? -errno : 0;
}

static void
stop_nodes(struct local *l)
{
	double until;
	bool any = false;

	for (int n = 1; n <= l->nodes; n++)
		if (pid_alive(l->pids[n])) {
			kill(l->pids[n], SIGTERM);
			any = true;
		}
	until = now_s() + 15;
	while (any && now_s() < until) {
		any = false;
		for (int n = 1; n <= l->nodes; n++) {
			waitpid(l->pids[n], NULL, WNOHANG);
			any |= pid_alive(l->pids[n]);
		}
		if (any)
			usleep(50 * 1000);
	}
	for (int n = 1; n <= l->nodes; n++)
		if (pid_alive(l->pids[n])) {
			fprintf(stderr, "shoal local: node %d did not stop in time: killing it\n",
				n);
			kill(l->pids[n], SIGKILL);
		}
	for (int n = 1; n <= l->nodes; n++)
		l->pids[n] = 0;
}

/* Node n's drive: a file of the cluster's drive size under DIR/drives, added to the cluster. */
static void
add_drive(const struct local *l, int n)
{
	char dpath[PATH_MAX + 64], w[64];
	int fd;

	snprintf(dpath, sizeof(dpath), "%s/drives/n%d.img", l->dir, n);
	fd = open(dpath, O_RDWR | O_CREAT, 0644);
	if (fd < 0 || ftruncate(fd, l->drive_size) < 0)
		fail("cannot create drive %s: %s", dpath, strerror(errno));
	close(fd);
	snprintf(w, sizeof(w), "drive add on node %d", n);
	post(l, 1, "/v1/drives", json_pack("{s:i, s:s}", "node", n, "path", dpath), w);
}

static int
local_up(struct local *l, bool fresh)
{
	double t0 = up_t0 = now_s();
	char addr[64];

	int starting = 0;

	for (int n = 1; n <= l->nodes; n++) {
		if (pid_alive(l->pids[n]))
			continue; /* already running: `up` starts the ones that are not */
		if (!port_free(l->port + n - 1, true) || !port_free(l->port + 100 + n - 1, false))
			fail("port %d or %d is in use: choose others with --port", l->port + n - 1,
			     l->port + 100 + n - 1);
		starting++;
	}
	if (mkdirs(l->dir) < 0)
		fail("cannot create %s: %s", l->dir, strerror(errno));
	local_secret(l, true);
	printf("starting %d of %d nodes in %s ...\n", starting, l->nodes, l->dir);
	fflush(stdout);
	for (int n = 1; n <= l->nodes; n++)
		if (!pid_alive(l->pids[n]))
			l->pids[n] = spawn(l, n);
	save(l);
	for (int n = 1; n <= l->nodes; n++)
		wait_api(l, n);
	step("%d nodes answer on their admin ports", l->nodes);
	if (fresh) {
		char dpath[PATH_MAX + 64];

		post(l, 1, "/v1/cluster",
		     json_pack("{s:s, s:i}", "name", "local", "buckets", l->buckets),
		     "cluster create");
		step("cluster created on node 1; adding the other %d nodes", l->nodes - 1);
		for (int n = 2; n <= l->nodes; n++) {
			char m[64], d[64], w[64];

			node_addr(l, n, false, m, sizeof(m));
			node_addr(l, n, true, d, sizeof(d));
			snprintf(w, sizeof(w), "node add %d", n);
			post(l, 1, "/v1/nodes",
			     json_pack("{s:i, s:s, s:s}", "id", n, "mgmt", m, "data", d), w);
		}
		snprintf(dpath, sizeof(dpath), "%s/drives", l->dir);
		mkdirs(dpath);
		step("adding %d drives of %lld MiB (each is checked and formatted by its node)",
		     l->nodes, l->drive_size >> 20);
		for (int n = 1; n <= l->nodes; n++)
			add_drive(l, n);
	}
	wait_healthy(l, 30);
	node_addr(l, 1, false, addr, sizeof(addr));
	printf("cluster 'local' is up: %d nodes, %d drives of %lld MiB, in %.1f s\n", l->nodes,
	       l->nodes, l->drive_size >> 20, now_s() - t0);
	printf("  admin API   http://%s/v1/status   (any node: ports %d-%d)\n", addr, l->port,
	       l->port + l->nodes - 1);
	printf("  token       export SHOAL_TOKEN_FILE=%s/" SH_TOKEN_FILE
	       "   (the admin API asks for it)\n",
	       l->dir);
	printf("  client key  export SHOAL_KEY_FILE=%s/" SH_CLIENT_KEY_FILE
	       "   (mounts and programs: every filesystem)\n",
	       l->dir);
	printf("  try         shoal --addr %s status | node list | events\n", addr);
	printf("  stop        shoal local down --dir %s   (keeps the data; --wipe removes it)\n",
	       l->dir);
	return 0;
}

/*
 * One more node joins the running cluster: its shoald started, added to
 * the configuration with a drive of the cluster's size; the rebalance
 * then moves data onto it (docs/healing.md).
 */
static int
local_add(struct local *l)
{
	int n = l->nodes + 1;
	char m[64], d[64], w[64];

	if (n > LOCAL_NODES_MAX)
		fail("the local cluster has the most nodes it can (%d)", LOCAL_NODES_MAX);
	if (!port_free(l->port + n - 1, true) || !port_free(l->port + 100 + n - 1, false))
		fail("port %d or %d is in use", l->port + n - 1, l->port + 100 + n - 1);
	up_t0 = now_s();
	local_secret(l, true);
	l->nodes = n;
	l->pids[n] = spawn(l, n);
	save(l);
	wait_api(l, n);
	node_addr(l, n, false, m, sizeof(m));
	node_addr(l, n, true, d, sizeof(d));
	snprintf(w, sizeof(w), "node add %d", n);
	post(l, 1, "/v1/nodes", json_pack("{s:i, s:s, s:s}", "id", n, "mgmt", m, "data", d), w);
	add_drive(l, n);
	/* (committed once answered; the others need not all be up: a node may be down) */
	printf("node %d added with a drive of %lld MiB in %.1f s; data moves onto it "
	       "(shoal rebuild status)\n",
	       n, l->drive_size >> 20, now_s() - up_t0);
	return 0;
}

static int
local_status(struct cli *c, struct local *l)
{
	json_t *all = json_array();

	if (!c->json)
		printf("%-5s %-8s %-22s %-10s %-7s %s\n", "NODE", "PID", "ADMIN", "PROCESS",
		       "EPOCH", "CONFIG");
	for (int n = 1; n <= l->nodes; n++) {
		char addr[64];
		bool alive = pid_alive(l->pids[n]);
		json_t *s = alive ? try_get(l, n, "/v1/status") : NULL;
		const char *st =
		    s ? json_string_value(json_object_get(json_object_get(s, "raft"), "state"))
		      : NULL;
		long long epoch =
		    s ? (long long)json_integer_value(json_object_get(s, "epoch")) : -1;

		node_addr(l, n, false, addr, sizeof(addr));
		if (c->json)
			json_array_append_new(
			    all, json_pack("{s:i, s:i, s:s, s:b, s:b, s:I, s:s}", "node", n, "pid",
					   (int)l->pids[n], "addr", addr, "running", alive,
					   "answers", s != NULL, "epoch", (json_int_t)epoch,
					   "config", st ? st : ""));
		else
			printf("%-5d %-8d %-22s %-10s %-7lld %s\n", n, (int)l->pids[n], addr,
			       !alive ? "stopped"
			       : s    ? "running"
				      : "silent",
			       epoch, st ? st : "-");
		json_decref(s);
	}
	if (c->json) {
		char *t = json_dumps(all, JSON_INDENT(2));
		printf("%s\n", t);
		free(t);
	}
	json_decref(all);
	return 0;
}

static int
wipe(const char *dir)
{
	char cmd[PATH_MAX + 32];

	/* only what `local up` made: a directory with local.json in it */
	snprintf(cmd, sizeof(cmd), "%s/local.json", dir);
	if (access(cmd, F_OK) != 0)
		fail("%s does not look like a local cluster (no local.json): not removing it", dir);
	snprintf(cmd, sizeof(cmd), "rm -rf -- '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

int
cmd_local(struct cli *c, int argc, char **argv)
{
	struct local l = {
		.nodes = 6, .port = 7400, .buckets = 256, .drive_size = 2ll << 30, .mode = "cpu"
	};
	const char *verb = argc > 0 ? argv[0] : "";
	const char *dir = "./run";
	bool wipe_it = false, nodes_set = false;
	bool existing;

	for (int i = 1; i < argc; i++) {
		const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (strcmp(o, "--wipe") == 0 && strcmp(verb, "down") == 0) {
			wipe_it = true;
			continue;
		}
		if (strncmp(o, "--", 2) != 0)
			usage_error("unexpected argument '%s'", o);
		if (v == NULL)
			usage_error("%s needs a value", o);
		i++;
		if (strcmp(o, "--dir") == 0) {
			dir = v;
		} else if (strcmp(verb, "up") != 0) {
			usage_error("unknown option '%s' for local %s", o, verb);
		} else if (strcmp(o, "--nodes") == 0) {
			char *end;
			long n = strtol(v, &end, 10);

			if (*end || n < 1 || n > LOCAL_NODES_MAX)
				usage_error("--nodes must be 1 to %d, not '%s'", LOCAL_NODES_MAX,
					    v);
			l.nodes = (int)n;
			nodes_set = true;
		} else if (strcmp(o, "--drive-size") == 0) {
			l.drive_size = parse_size(v);
			if (l.drive_size < (64ll << 20))
				usage_error("--drive-size must be a size of at least 64M, not '%s'",
					    v);
			l.drive_size -= l.drive_size % 4096;
		} else if (strcmp(o, "--port") == 0) {
			char *end;
			long p = strtol(v, &end, 10);

			if (*end || p < 1024 || p > 65000)
				usage_error("--port must be 1024 to 65000, not '%s'", v);
			l.port = (int)p;
		} else if (strcmp(o, "--buckets") == 0) {
			char *end;
			long b = strtol(v, &end, 10);

			if (*end || b < 1 || b > 65536)
				usage_error("--buckets must be 1 to 65536, not '%s'", v);
			l.buckets = (int)b;
		} else if (strcmp(o, "--mode") == 0) {
			if (strcmp(v, "cpu") && strcmp(v, "performance"))
				usage_error("--mode is cpu or performance, not '%s'", v);
			l.mode = v;
		} else {
			usage_error("unknown option '%s' for local up", o);
		}
	}
	if (realpath(dir, l.dir) == NULL) {
		if (strcmp(verb, "up") != 0)
			fail("no local cluster in %s", dir);
		if (dir[0] == '/')
			snprintf(l.dir, sizeof(l.dir), "%s", dir);
		else {
			char cwd[PATH_MAX];

			if (getcwd(cwd, sizeof(cwd)) == NULL)
				fail("getcwd: %s", strerror(errno));
			snprintf(l.dir, sizeof(l.dir), "%.2000s/%.2000s", cwd, dir);
		}
	}
	if (strcmp(verb, "up") == 0) {
		struct local saved = l;

		existing = load(&saved);
		if (existing) {
			if (nodes_set && saved.nodes != l.nodes)
				fail("%s holds a %d-node cluster; use --nodes %d or another --dir",
				     l.dir, saved.nodes, saved.nodes);
			printf("the cluster in %s exists: starting what is not running\n", l.dir);
			l = saved;
		}
		return local_up(&l, !existing);
	}
	if (strcmp(verb, "status") == 0) {
		if (!load(&l))
			fail("no local cluster in %s", l.dir);
		local_secret(&l, false);
		return local_status(c, &l);
	}
	if (strcmp(verb, "add") == 0) {
		if (!load(&l))
			fail("no local cluster in %s", l.dir);
		return local_add(&l);
	}
	if (strcmp(verb, "down") == 0) {
		if (!load(&l)) {
			if (wipe_it && access(l.dir, F_OK) != 0)
				return 0;
			fail("no local cluster in %s", l.dir);
		}
		stop_nodes(&l);
		save(&l);
		printf("cluster in %s stopped%s\n", l.dir,
		       wipe_it ? " and removed" : " (data kept)");
		if (wipe_it && wipe(l.dir) < 0)
			fail("cannot remove %s", l.dir);
		return 0;
	}
	usage_error("local takes up, add, status or down, not '%s'", verb);
}
