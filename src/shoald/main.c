// SPDX-License-Identifier: Apache-2.0
/*
 * shoald: one Shoal backend server (shoald.h).
 *
 * usage: shoald --id N --mgmt IP:PORT --data IP:PORT --dir DIR
 *               [--domain NAME] [--mode cpu|performance] [--workers N]
 *               [--log FILE] [--election-ms N] [--down-ms N] [--heartbeat-ms N]
 *               [--secret FILE] [--metrics-auth] [--tls-cert FILE --tls-key FILE
 *               [--tls-ca FILE]]
 *
 * The management address serves the cluster protocol (UDP) and the admin
 * HTTP API (TCP) on the same port. Worker i listens on the data address's
 * port + i. SIGTERM or SIGINT: a clean shutdown.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <linux/fs.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../base/access_key.h"
#include "../base/fault.h"
#include "../base/http.h"
#include "../dpdk/dpdk.h"
#include "../net/auth.h"
#include "shoald.h"

SH_LOG_FACILITY("shoald");

static struct env *stop_env;

static void
on_signal(int sig)
{
	(void)sig;
	if (stop_env)
		env_real_stop(stop_env);
}

static void
usage(const char *why)
{
	fprintf(stderr,
		"shoald: %s\n"
		"usage: shoald --id N --mgmt IP:PORT --data IP[:PORT][/LABEL][,IP[/LABEL]...] "
		"--dir DIR\n"
		"              [--domain NAME]\n"
		"              [--mode cpu|performance] [--workers N] [--log FILE]\n"
		"              [--election-ms N] [--down-ms N] [--heartbeat-ms N]\n"
		"              [--orphan-age SECONDS (default 600; 0: off)]\n"
		"              [--secret FILE (default DIR/cluster.secret; FILE.also, if there,\n"
		"               is accepted too: a rotation)] [--metrics-auth]\n"
		"              [--tls-cert FILE --tls-key FILE [--tls-ca FILE]]\n"
		"              [--dpdk \"EAL ARGS\" (data interfaces IP:PORT@dpdk:DEV; "
		"docs/dpdk.md)]\n"
		"              [--dpdk-mtu N (the DPDK ports' MTU: 9000 for jumbo frames; "
		"default the port's own)]\n",
		why);
	exit(2);
}

static unsigned
parse_uint(const char *opt, const char *v, unsigned lo, unsigned hi)
{
	char *end;
	unsigned long x = strtoul(v, &end, 10);
	char msg[128];

	if (*v == '\0' || *end != '\0' || x < lo || x > hi) {
		snprintf(msg, sizeof(msg), "%s must be a number from %u to %u, not '%s'", opt, lo,
			 hi, v);
		usage(msg);
	}
	return (unsigned)x;
}

static void
copy_opt(char *dst, size_t cap, const char *opt, const char *v)
{
	char msg[128];

	if (strlen(v) >= cap) {
		snprintf(msg, sizeof(msg), "%s is too long", opt);
		usage(msg);
	}
	snprintf(dst, cap, "%s", v);
}

static void
parse_args(int argc, char **argv, struct shoald_opts *o)
{
	static const struct option longopts[] = { { "id", required_argument, NULL, 'i' },
						  { "mgmt", required_argument, NULL, 'm' },
						  { "data", required_argument, NULL, 'D' },
						  { "dir", required_argument, NULL, 'd' },
						  { "domain", required_argument, NULL, 'f' },
						  { "mode", required_argument, NULL, 'M' },
						  { "workers", required_argument, NULL, 'w' },
						  { "log", required_argument, NULL, 'l' },
						  { "election-ms", required_argument, NULL, 'e' },
						  { "down-ms", required_argument, NULL, 'o' },
						  { "heartbeat-ms", required_argument, NULL, 'h' },
						  { "orphan-age", required_argument, NULL, 'a' },
						  { "secret", required_argument, NULL, 's' },
						  { "metrics-auth", no_argument, NULL, 'A' },
						  { "tls-cert", required_argument, NULL, 'C' },
						  { "tls-key", required_argument, NULL, 'K' },
						  { "tls-ca", required_argument, NULL, 'T' },
						  { "dpdk", required_argument, NULL, 'P' },
						  { "dpdk-mtu", required_argument, NULL, 'U' },
						  { NULL, 0, NULL, 0 } };
	struct env_addr a;
	int c, rc;

	memset(o, 0, sizeof(*o));
	o->workers = 1;
	/*
	 * Fragments nobody refers to are released after 10 minutes: far longer
	 * than a client takes from sending a stripe to mapping it. SHOAL_ORPHAN_AGE
	 * (seconds) sets the default for the nodes `shoal local up` starts (tests).
	 */
	o->orphan_age_s = 600;
	if (getenv("SHOAL_ORPHAN_AGE") != NULL)
		o->orphan_age_s =
		    parse_uint("SHOAL_ORPHAN_AGE", getenv("SHOAL_ORPHAN_AGE"), 0, 30u * 86400);
	/*
	 * A dedup claim a writer never committed (it was killed between asking
	 * and mapping) is asked about after a minute; SHOAL_CLAIM_AGE (seconds)
	 * sets it for tests.
	 */
	o->claim_age_s = 60;
	/* files' stripes at least half dead are cleaned every minute (SHOAL_CLEAN_INTERVAL) */
	o->clean_s = 60;
	if (getenv("SHOAL_CLEAN_INTERVAL") != NULL)
		o->clean_s =
		    parse_uint("SHOAL_CLEAN_INTERVAL", getenv("SHOAL_CLEAN_INTERVAL"), 0, 86400);
	/* drives and the heal state looked at every 2 s (SHOAL_WATCH_INTERVAL; 0: never) */
	o->watch_s = 2;
	if (getenv("SHOAL_WATCH_INTERVAL") != NULL)
		o->watch_s =
		    parse_uint("SHOAL_WATCH_INTERVAL", getenv("SHOAL_WATCH_INTERVAL"), 0, 3600);
	/*
	 * A node down for 5 minutes is replaced in its metadata groups: longer
	 * than a restart takes, short against the time to a second failure
	 * (SHOAL_META_REPLACE, seconds, for tests).
	 */
	o->meta_replace_s = 300;
	if (getenv("SHOAL_META_REPLACE") != NULL)
		o->meta_replace_s =
		    parse_uint("SHOAL_META_REPLACE", getenv("SHOAL_META_REPLACE"), 1, 30u * 86400);
	if (getenv("SHOAL_CLAIM_AGE") != NULL)
		o->claim_age_s = parse_uint("SHOAL_CLAIM_AGE", getenv("SHOAL_CLAIM_AGE"), 1, 86400);
	/* the admin API over TLS for the nodes `shoal local up` starts (tests) */
	if (getenv("SHOAL_TLS_CERT") != NULL)
		copy_opt(o->tls_cert, sizeof(o->tls_cert), "SHOAL_TLS_CERT",
			 getenv("SHOAL_TLS_CERT"));
	if (getenv("SHOAL_TLS_KEY") != NULL)
		copy_opt(o->tls_key, sizeof(o->tls_key), "SHOAL_TLS_KEY", getenv("SHOAL_TLS_KEY"));
	if (getenv("SHOAL_TLS_CA") != NULL)
		copy_opt(o->tls_ca, sizeof(o->tls_ca), "SHOAL_TLS_CA", getenv("SHOAL_TLS_CA"));
	opterr = 0;
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 'i':
			o->id = parse_uint("--id", optarg, 1, 1u << 24);
			break;
		case 'm':
			copy_opt(o->mgmt, sizeof(o->mgmt), "--mgmt", optarg);
			break;
		case 'D':
			copy_opt(o->data_list, sizeof(o->data_list), "--data", optarg);
			break;
		case 'd':
			copy_opt(o->dir, sizeof(o->dir), "--dir", optarg);
			break;
		case 'f':
			copy_opt(o->domain, sizeof(o->domain), "--domain", optarg);
			break;
		case 'M':
			if (strcmp(optarg, "performance") == 0)
				o->performance = true;
			else if (strcmp(optarg, "cpu") != 0)
				usage("--mode is cpu or performance");
			break;
		case 'w':
			o->workers = parse_uint("--workers", optarg, 1, SHOALD_WORKERS_MAX);
			break;
		case 'l':
			copy_opt(o->log, sizeof(o->log), "--log", optarg);
			break;
		case 'e':
			o->election_ms = parse_uint("--election-ms", optarg, 100, 60000);
			break;
		case 'o':
			o->down_ms = parse_uint("--down-ms", optarg, 100, 600000);
			break;
		case 'h':
			o->heartbeat_ms = parse_uint("--heartbeat-ms", optarg, 10, 60000);
			break;
		case 'a':
			o->orphan_age_s = parse_uint("--orphan-age", optarg, 0, 30u * 86400);
			break;
		case 's':
			copy_opt(o->secret, sizeof(o->secret), "--secret", optarg);
			break;
		case 'A':
			o->metrics_auth = true;
			break;
		case 'C':
			copy_opt(o->tls_cert, sizeof(o->tls_cert), "--tls-cert", optarg);
			break;
		case 'K':
			copy_opt(o->tls_key, sizeof(o->tls_key), "--tls-key", optarg);
			break;
		case 'T':
			copy_opt(o->tls_ca, sizeof(o->tls_ca), "--tls-ca", optarg);
			break;
		case 'P':
			copy_opt(o->dpdk, sizeof(o->dpdk), "--dpdk", optarg);
			break;
		case 'U':
			o->dpdk_mtu =
			    parse_uint("--dpdk-mtu", optarg, SH_DPDK_MTU_MIN, SH_DPDK_MTU_MAX);
			break;
		default: {
			char msg[128];

			snprintf(msg, sizeof(msg), "unknown option '%s'", argv[optind - 1]);
			usage(msg);
		}
		}
	}
	if (optind < argc) {
		char msg[128];

		snprintf(msg, sizeof(msg), "unexpected argument '%s'", argv[optind]);
		usage(msg);
	}
	if (o->id == 0 || !o->mgmt[0] || !o->data_list[0] || !o->dir[0])
		usage("--id, --mgmt, --data and --dir are required");
	if (env_addr_parse(o->mgmt, &a) < 0 || a.port == 0)
		usage("--mgmt must be IP:PORT");
	rc = a.port + 100 > 65535 ? -EINVAL
				  : shoald_data_parse(o->data_list, (uint16_t)(a.port + 100),
						      o->data_ifc, SHOALD_IFACES_MAX);
	if (rc < 0)
		usage(
		    "--data must be IP[:PORT][/LABEL][@dpdk:DEV][,...] (at most 8; labels: "
		    "1-15 of A-Z a-z 0-9 . _ -; the port: the management port + 100 unless given; "
		    "DEV: a DPDK port, with --dpdk)");
	o->ndata = (unsigned)rc;
	for (unsigned i = 0; i < o->ndata; i++) {
		if (o->data_ifc[i].transport[0] == '\0')
			continue;
		if (strcmp(o->data_ifc[i].transport, "dpdk") != 0)
			usage("--data: the only transport besides kernel UDP is @dpdk:DEV");
		if (!o->dpdk[0] || !o->data_ifc[i].dev[0])
			usage("--data ...@dpdk:DEV needs --dpdk \"EAL ARGS\" and a DPDK device");
	}
	env_addr_format(&o->data_ifc[0].addr, o->data, sizeof(o->data));
	if (o->domain[0] && !cfg_name_ok(o->domain))
		usage("--domain: 1-63 of A-Z a-z 0-9 . _ -");
	if (!o->tls_cert[0] != !o->tls_key[0] || (o->tls_ca[0] && !o->tls_cert[0]))
		usage("--tls-cert and --tls-key go together (and --tls-ca with them)");
}

/* ---- drives ---- */

static void
on_formatted(void *arg, int rc)
{
	int *out = arg;
	*out = rc;
}

int
shoald_drive_prepare(void *arg, struct cfg_cmd *cmd, char *msg, size_t len)
{
	struct shoald *d = arg;
	const struct cfg *c = cluster_cfg(d->cl);
	struct store_format_opts fo = { 0 };
	struct stat st;
	uint64_t size;
	struct env *env;
	int rc = 1, fd;

	if (cmd->path[0] != '/') {
		snprintf(msg, len, "drive path '%s' is not absolute", cmd->path);
		return -EINVAL;
	}
	if (stat(cmd->path, &st) < 0) {
		snprintf(msg, len, "drive %s on node %llu: %s", cmd->path,
			 (unsigned long long)d->o.id, strerror(errno));
		return -errno;
	}
	if (S_ISREG(st.st_mode)) {
		size = (uint64_t)st.st_size;
	} else if (S_ISBLK(st.st_mode)) {
		fd = open(cmd->path, O_RDONLY);
		if (fd < 0 || ioctl(fd, BLKGETSIZE64, &size) < 0) {
			snprintf(msg, len, "drive %s: cannot read its size: %s", cmd->path,
				 strerror(errno));
			if (fd >= 0)
				close(fd);
			return -EIO;
		}
		close(fd);
	} else {
		snprintf(msg, len, "drive %s is not a file or a block device", cmd->path);
		return -EINVAL;
	}
	size -= size % 4096;
	if (size < CFG_DRIVE_MIN) {
		snprintf(msg, len, "drive %s is too small: %llu bytes, at least %llu", cmd->path,
			 (unsigned long long)size, (unsigned long long)CFG_DRIVE_MIN);
		return -EINVAL;
	}
	for (uint32_t i = 0; i < c->ndrives; i++)
		if (c->drives[i].node == cmd->id && strcmp(c->drives[i].path, cmd->path) == 0) {
			snprintf(msg, len, "node %llu already has drive %s",
				 (unsigned long long)cmd->id, cmd->path);
			return -EEXIST;
		}
	/* format it now, on a loop of our own: an unusable drive fails the request */
	cmd->size = size;
	/*
	 * Target ids are NODE * 1000 + n: unique without asking the leader, and
	 * readable. n follows the drives this node knows of and the ones it
	 * prepared itself (its copy of the configuration may lag a moment).
	 */
	{
		uint64_t base = d->o.id * 1000,
			 next = d->last_target ? d->last_target + 1 : base + 1;

		for (uint32_t i = 0; i < c->ndrives; i++)
			if (c->drives[i].id > base && c->drives[i].id < base + 1000 &&
			    c->drives[i].id >= next)
				next = c->drives[i].id + 1;
		if (next >= base + 1000) {
			snprintf(msg, len, "node %llu has the most drives it can (999)",
				 (unsigned long long)d->o.id);
			return -ENOSPC;
		}
		cmd->target = d->last_target = next;
		cmd->worker = (uint32_t)(next % d->o.workers); /* who serves it (on_config) */
	}
	memcpy(fo.cluster_uuid, c->uuid, sizeof(fo.cluster_uuid));
	fo.target_id = cmd->target;
	env = env_real_create(NULL);
	if (env == NULL) {
		snprintf(msg, len, "cannot create an I/O loop: %s", strerror(errno));
		return -ENOMEM;
	}
	for (int attempt = 0; attempt < 2; attempt++) {
		rc = 1;
		fo.buffered = attempt == 1;
		if (store_format(env, cmd->path, size, &fo, on_formatted, &rc) < 0)
			rc = -EIO;
		while (rc == 1)
			env_real_run_once(env, UINT64_MAX);
		if (rc != -EINVAL)
			break; /* -EINVAL: no O_DIRECT here; try buffered */
	}
	env_real_destroy(env);
	if (rc < 0) {
		snprintf(msg, len, "drive %s cannot be formatted: %s", cmd->path, sh_strerror(rc));
		return rc;
	}
	sh_log_info("drive %s formatted as target %llu (%llu MiB)", cmd->path,
		    (unsigned long long)cmd->target, (unsigned long long)(size >> 20));
	return 0;
}

/* The configuration changed: serve this node's drives and metadata. */
static void
on_config(void *arg, const struct cfg *c)
{
	struct shoald *d = arg;

	shoald_keys_follow(d, c);
	cleaner_cfg(&d->cleaner, c, d->o.id);
	shoald_nets_announce(d, c);
	for (unsigned i = 0; i < d->o.workers; i++)
		if (worker_set_cfg(&d->workers[i], c) < 0)
			sh_log_error("out of memory handing the configuration to worker %u", i);
	for (uint32_t i = 0; i < c->ndrives; i++) {
		const struct cfg_drive *dr = &c->drives[i];
		bool have = false;

		if (dr->node != d->o.id)
			continue;
		for (unsigned k = 0; k < d->nopened && !have; k++)
			have = d->opened[k] == dr->id;
		if (have || d->nopened >= CFG_DRIVES_MAX)
			continue;
		d->opened[d->nopened++] = dr->id;
		/* the worker the configuration names (clients address it there) */
		worker_open(
		    &d->workers[dr->worker < d->o.workers ? dr->worker : dr->id % d->o.workers],
		    dr->id, dr->path);
	}
}

static void
on_admin(void *arg, struct admin_req *req)
{
	struct shoald *d = arg;
	admin_api_handle(d->cl, &d->self, req);
}

/*
 * The cluster secret (docs/security.md): --secret FILE, else
 * DIR/cluster.secret, made here at a node's first start when there is none
 * (a one-node cluster, or the first node of one: the others need a copy
 * before they start). The admin token derived from it is kept in
 * DIR/admin.token (0600) for the CLI on this host.
 */
static int
secret_failed(const char *path, int rc)
{
	fprintf(stderr, "shoald: the cluster secret %s: %s\n", path,
		rc == -EPERM	? "group or others may read it, another user owns it, or it "
				  "is not a regular file (chmod 600 it)"
		: rc == -EINVAL ? "not a cluster secret (64 hex digits)"
				: sh_strerror(rc));
	return rc;
}

/*
 * What a node derives from a secret loaded with status rc: the admin token,
 * the fingerprint, the network key. The secret is wiped. 0 or an error.
 */
static int
secret_derive(uint8_t s[SH_SECRET_LEN], int rc, char *token, char *fp, uint8_t *net_key)
{
	if (rc >= 0)
		rc = sh_token_derive(s, token);
	if (rc >= 0)
		rc = sh_secret_fingerprint(s, fp);
	if (rc >= 0)
		rc = sh_secret_net_key(s, net_key);
	explicit_bzero(s, SH_SECRET_LEN);
	return rc;
}

static int
load_secret(struct shoald *d)
{
	uint8_t s[SH_SECRET_LEN], key[SH_KEY_LEN];
	char path[600], tpath[600];
	bool given = d->o.secret[0] != '\0';
	int rc;

	if (given)
		snprintf(path, sizeof(path), "%s", d->o.secret);
	else
		snprintf(path, sizeof(path), "%s/" SH_SECRET_FILE, d->o.dir);
	rc = given ? sh_secret_load(path, s) : sh_secret_load_or_make(path, s);
	if (rc == 1)
		sh_log_warn("no cluster secret: a new one is in %s; every other node of this "
			    "cluster needs a copy of it (mode 0600) before it starts "
			    "(docs/security.md)",
			    path);
	rc = secret_derive(s, rc, d->token, d->secret_fp, d->net_key);
	if (rc < 0)
		return secret_failed(path, rc);
	/* a rotation (docs/security.md): a second secret beside the first, accepted too */
	snprintf(path + strlen(path), sizeof(path) - strlen(path), ".also");
	rc = sh_secret_load(path, s);
	if (rc != -ENOENT) {
		rc = secret_derive(s, rc, d->token_also, d->secret_fp_also, d->net_key_also);
		if (rc < 0)
			return secret_failed(path, rc);
		d->rotating = true;
		sh_log_info(
		    "the cluster secret is being rotated: the one in %s (fingerprint %s) is "
		    "accepted too, never used",
		    path, d->secret_fp_also);
	}
	snprintf(tpath, sizeof(tpath), "%s/" SH_TOKEN_FILE, d->o.dir);
	rc = sh_token_keep(tpath, d->token);
	if (rc < 0)
		sh_log_warn("cannot write the admin token to %s: %s", tpath, sh_strerror(rc));
	/* the cluster's client key, for clients on this host (docs/security.md) */
	snprintf(tpath, sizeof(tpath), "%s/" SH_CLIENT_KEY_FILE, d->o.dir);
	rc = net_auth_client_key(d->net_key, key);
	if (rc == 0)
		rc = sh_key_keep(tpath, SH_CLIENT_KEY_ID, key);
	explicit_bzero(key, sizeof(key));
	if (rc < 0)
		sh_log_warn("cannot write the cluster's client key to %s: %s", tpath,
			    sh_strerror(rc));
	return 0;
}

/*
 * The admin API over TLS (docs/security.md): the certificate and key as
 * PEM text into opts (kept for the process's life); this node's own calls
 * to the nodes' APIs then go over TLS too, trusting --tls-ca, else the
 * node's certificate (a cluster that shares one).
 */
static int
load_tls(struct shoald *d, struct admin_http_opts *opts)
{
	static char *cert, *key;
	int rc;

	if (!d->o.tls_cert[0])
		return 0;
	rc = sh_secret_read_file(d->o.tls_cert, SH_FILE_PUBLIC, 1 << 20, &cert);
	if (rc < 0) {
		fprintf(stderr, "shoald: the TLS certificate %s: %s\n", d->o.tls_cert,
			sh_strerror(rc));
		return rc;
	}
	rc = sh_secret_read_file(d->o.tls_key, SH_FILE_GROUP, 1 << 20, &key);
	if (rc < 0) {
		fprintf(stderr, "shoald: the TLS key %s: %s\n", d->o.tls_key,
			rc == -EPERM ? "others may read it, or it is not a regular file (chmod 600 "
				       "or 640 it)"
				     : sh_strerror(rc));
		return rc;
	}
	opts->tls_cert = cert;
	opts->tls_key = key;
	sh_http_tls_ca(d->o.tls_ca[0] ? d->o.tls_ca : d->o.tls_cert);
	return 0;
}

static void
on_cluster_stopped(void *arg)
{
	((struct shoald *)arg)->stopped = true;
}

int
main(int argc, char **argv)
{
	static struct shoald d;
	struct net_iface ifc = { 0 };
	struct net_config nc = { 0 };
	struct cluster_params cp = { 0 };
	struct admin_http_opts auth = { 0 };
	struct sigaction sa = { 0 };
	char path[600];
	FILE *f;
	int rc;

	parse_args(argc, argv, &d.o);
	if (sh_fault_init_from_env() < 0)
		return 1; /* SH_FAULTS: fault points armed for tests (src/base/fault_list.h) */
	pthread_mutex_init(&d.stats_mu, NULL);
	if (mkdir(d.o.dir, 0755) < 0 && errno != EEXIST) {
		fprintf(stderr, "shoald: cannot create %s: %s\n", d.o.dir, strerror(errno));
		return 1;
	}
	if (d.o.log[0] && sh_log_set_file(d.o.log) < 0) {
		fprintf(stderr, "shoald: cannot write log %s: %s\n", d.o.log, strerror(errno));
		return 1;
	}
	sh_log_configure("info", NULL, 0);
	sh_log_init_from_env();
	snprintf(path, sizeof(path), "shoald-%llu", (unsigned long long)d.o.id);
	sh_log_set_tag(path);
	shoald_keys_init(&d.keys);
	if (load_secret(&d) < 0)
		return 1;

	d.env = env_real_create(&(struct env_real_opts){ .name = "mgmt" });
	if (d.env == NULL) {
		fprintf(stderr, "shoald: cannot create the management loop: %s\n", strerror(errno));
		return 1;
	}
	rc = shoald_submit_init(&d);
	if (rc < 0) {
		fprintf(stderr, "shoald: cannot set up the management loop: %s\n", sh_strerror(rc));
		return 1;
	}
	env_addr_parse(d.o.mgmt, &ifc.addr);
	nc.node_id = d.o.id;
	nc.ifaces = &ifc;
	nc.nifaces = 1;
	nc.dead_ns = 3ull * 1000 * 1000 * 1000;
	nc.auth_key = d.net_key;
	nc.auth_key_also = d.rotating ? d.net_key_also : NULL;
	nc.client_key = shoald_client_key;
	nc.arg = &d.keys;
	rc = net_create(d.env, &nc, &d.net);
	if (rc < 0) {
		fprintf(stderr, "shoald: cannot bind the management address %s (UDP): %s\n",
			d.o.mgmt, sh_strerror(rc));
		return 1;
	}
	if (d.o.dpdk[0]) {
		/* before the workers: a queue pair of each DPDK port for each of them */
		rc = sh_dpdk_set_mtu(d.o.dpdk_mtu);
		if (rc == 0)
			rc = sh_dpdk_init(d.o.dpdk, SH_MIN(d.o.workers, SH_DPDK_QUEUES_MAX));
		if (rc < 0) {
			fprintf(stderr, "shoald: DPDK does not start (--dpdk \"%s\"): %s\n",
				d.o.dpdk, sh_strerror(rc));
			return 1;
		}
	}
	for (unsigned i = 0; i < d.o.workers; i++) {
		rc = worker_start(&d, i);
		if (rc < 0) {
			fprintf(
			    stderr,
			    "shoald: worker %u cannot start (data interfaces %s, ports + %u): %s\n",
			    i, d.o.data_list, i, sh_strerror(rc));
			return 1;
		}
	}
	cp.node_id = d.o.id;
	cp.mgmt = d.o.mgmt;
	cp.data = d.o.data;
	cp.domain = d.o.domain;
	cp.dir = d.o.dir;
	cp.election_ms = d.o.election_ms;
	cp.down_ns = (uint64_t)d.o.down_ms * 1000000;
	cp.heartbeat_ns = (uint64_t)d.o.heartbeat_ms * 1000000;
	cp.meta_replace_ns = (uint64_t)d.o.meta_replace_s * 1000000000;
	cp.prepare = shoald_drive_prepare;
	cp.changed = on_config;
	cp.data_down = shoald_data_down;
	cp.arg = &d;
	rc = cluster_start(d.net, &cp, &d.cl);
	if (rc < 0) {
		fprintf(stderr, "shoald: cannot start the cluster service: %s\n", sh_strerror(rc));
		return 1;
	}
	d.self = (struct admin_node){ .id = d.o.id,
				      .mode = d.o.performance ? "performance" : "cpu",
				      .workers = d.o.workers,
				      .meta_groups = shoald_meta_groups,
				      .with_stats = shoald_with_stats,
				      .arg = &d,
				      .started_ns = env_realtime(d.env),
				      .token = d.token,
				      .secret_fp = d.secret_fp,
				      .secret_also_fp = d.secret_fp_also };
	auth.metrics_open = !d.o.metrics_auth;
	snprintf(auth.token, sizeof(auth.token), "%s", d.token);
	snprintf(auth.token_also, sizeof(auth.token_also), "%s", d.token_also);
	if (load_tls(&d, &auth) < 0)
		return 1;
	rc = admin_http_start(d.env, d.o.mgmt, &auth, on_admin, &d, &d.http);
	d.self.http = d.http;
	if (rc < 0) {
		fprintf(stderr, "shoald: cannot serve the admin API on %s (TCP): %s\n", d.o.mgmt,
			sh_strerror(rc));
		return 1;
	}
	snprintf(path, sizeof(path), "%s/" SH_CLIENT_KEY_FILE, d.o.dir);
	rc = cleaner_start(&d.cleaner, d.o.mgmt, path, d.o.clean_s);
	if (rc < 0) {
		fprintf(stderr, "shoald: cannot start the cleaner: %s\n", sh_strerror(rc));
		return 1;
	}
	rc = watcher_start(&d.watcher, &d, d.o.watch_s);
	if (rc < 0) {
		fprintf(stderr, "shoald: cannot start the watcher: %s\n", sh_strerror(rc));
		return 1;
	}
	snprintf(path, sizeof(path), "%s/shoald.pid", d.o.dir);
	f = fopen(path, "w");
	if (f) {
		fprintf(f, "%d\n", (int)getpid());
		fclose(f);
	}
	stop_env = d.env;
	sa.sa_handler = on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	sh_log_info("shoald %llu up: management %s, data %s (+%u workers, %s mode), dir %s",
		    (unsigned long long)d.o.id, d.o.mgmt, d.o.data_list, d.o.workers,
		    d.o.performance ? "performance" : "cpu", d.o.dir);

	env_real_run(d.env);

	sh_log_info("shoald %llu stopping", (unsigned long long)d.o.id);
	watcher_stop(&d.watcher);
	cleaner_stop(&d.cleaner);
	admin_http_quiesce(d.http);
	cluster_stop(d.cl, on_cluster_stopped, &d);
	while (!d.stopped)
		env_real_run_once(d.env, 100ull * 1000 * 1000);
	admin_http_stop(d.http);
	for (unsigned i = 0; i < d.o.workers; i++) {
		worker_stop(&d.workers[i]);
		admin_stats_clear(&d.stats[i]);
	}
	net_destroy(d.net);
	shoald_keys_fini(&d.keys);	/* (every endpoint that asked is gone) */
	env_async_fini(&d.submit_wake); /* (the workers, who send it, are gone) */
	env_real_destroy(d.env);
	unlink(path);
	sh_log_info("shoald %llu stopped", (unsigned long long)d.o.id);
	return 0;
}
