// SPDX-License-Identifier: Apache-2.0
/*
 * shoal stats: a live cluster-wide summary from every node's /metrics
 * (docs/metrics.md). Each round reads every node's counters, and prints
 * what moved since the last round: data throughput and operations per
 * second, latency percentiles per operation (from the histograms), and
 * retransmits, per node and for the cluster.
 *
 *   shoal stats [--interval S] [--count N]     a table, redrawn each round on a terminal
 *   shoal --json stats ...                     one JSON object a round, a line each
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "shoal.h"

#define LAT_B	  16 /* buckets, +Inf last */
#define STATS_OPS 8
#define NODES_MAX 256

/* The operations shown, by opcode name as /metrics labels them. */
static const char *const op_names[STATS_OPS] = {
	"store.put", "store.get",	  "store.release",   "meta",
	"raft",	     "cluster.heartbeat", "cluster.propose", "store.stat"
};

struct op_sample {
	double requests, errors, bytes_in, bytes_out;
	double le[LAT_B]; /* cumulative counts, at bound[] */
	double bound[LAT_B];
	unsigned nb;
};

struct node_sample {
	unsigned long long id;
	char addr[64];
	bool ok;
	struct op_sample ops[STATS_OPS];
	double retransmits, timeouts, pkts_sent;
	double cap, used, live;
};

static int
op_index(const char *name)
{
	for (int i = 0; i < STATS_OPS; i++)
		if (strcmp(op_names[i], name) == 0)
			return i;
	return -1;
}

/* The value of label key in a "{a=\"x\",b=\"y\"}" string, into out. */
static bool
label(const char *labels, const char *key, char *out, size_t len)
{
	char pat[40];
	const char *p, *e;

	snprintf(pat, sizeof(pat), "%s=\"", key);
	p = strstr(labels, pat);
	if (p == NULL)
		return false;
	p += strlen(pat);
	e = strchr(p, '"');
	if (e == NULL || (size_t)(e - p) >= len)
		return false;
	memcpy(out, p, (size_t)(e - p));
	out[e - p] = '\0';
	return true;
}

/* One sample line of the text format into what this command keeps. */
static void
take_line(struct node_sample *ns, const char *line)
{
	char name[96], labels[512] = "", opn[40], le[32];
	const char *sp, *br = strchr(line, '{');
	double v;
	int oi;

	sp = strrchr(line, ' ');
	if (sp == NULL)
		return;
	v = strtod(sp + 1, NULL);
	if (br != NULL && br < sp) {
		const char *cb = strchr(br, '}');

		if (cb == NULL || (size_t)(br - line) >= sizeof(name) ||
		    (size_t)(cb - br) + 1 >= sizeof(labels))
			return;
		memcpy(name, line, (size_t)(br - line));
		name[br - line] = '\0';
		memcpy(labels, br, (size_t)(cb - br + 1));
		labels[cb - br + 1] = '\0';
	} else {
		if ((size_t)(sp - line) >= sizeof(name))
			return;
		memcpy(name, line, (size_t)(sp - line));
		name[sp - line] = '\0';
	}
	if (strncmp(name, "shoal_rpc_", 10) == 0 && label(labels, "op", opn, sizeof(opn)) &&
	    (oi = op_index(opn)) >= 0) {
		struct op_sample *o = &ns->ops[oi];

		if (strcmp(name, "shoal_rpc_requests_total") == 0)
			o->requests = v;
		else if (strcmp(name, "shoal_rpc_errors_total") == 0)
			o->errors = v;
		else if (strcmp(name, "shoal_rpc_received_bytes_total") == 0)
			o->bytes_in = v;
		else if (strcmp(name, "shoal_rpc_sent_bytes_total") == 0)
			o->bytes_out = v;
		else if (strcmp(name, "shoal_rpc_latency_seconds_bucket") == 0 &&
			 label(labels, "le", le, sizeof(le)) && o->nb < LAT_B) {
			o->bound[o->nb] = strcmp(le, "+Inf") == 0 ? INFINITY : strtod(le, NULL);
			o->le[o->nb++] = v;
		}
		return;
	}
	if (strcmp(name, "shoal_net_retransmits_total") == 0)
		ns->retransmits = v;
	else if (strcmp(name, "shoal_net_timeouts_total") == 0)
		ns->timeouts = v;
	else if (strcmp(name, "shoal_net_packets_total") == 0 && strstr(labels, "\"sent\""))
		ns->pkts_sent = v;
	else if (strcmp(name, "shoal_target_capacity_bytes") == 0)
		ns->cap += v;
	else if (strcmp(name, "shoal_target_used_bytes") == 0)
		ns->used += v;
	else if (strcmp(name, "shoal_target_live_bytes") == 0)
		ns->live += v;
}

static void
sample_node(struct node_sample *ns)
{
	char *body = NULL, *line, *save = NULL;
	int st = sh_http_call(ns->addr, cli_token(ns->addr), "GET", "/metrics", NULL, &body, 5);

	unsigned long long id = ns->id;
	char addr[64];

	memcpy(addr, ns->addr, sizeof(addr));
	memset(ns, 0, sizeof(*ns));
	ns->id = id;
	memcpy(ns->addr, addr, sizeof(addr));
	if (st != 200) {
		free(body);
		return;
	}
	ns->ok = true;
	for (line = strtok_r(body, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		if (line[0] != '#')
			take_line(ns, line);
	free(body);
}

/* The q-quantile of the latencies between two cumulative histograms, in seconds (-1: none). */
static double
quantile(const struct op_sample *a, const struct op_sample *b, double q)
{
	double total, want, prev = 0, lo = 0;

	/* an operation first seen in b: a had no histogram yet (all zeros) */
	if ((a->nb != 0 && a->nb != b->nb) || b->nb == 0)
		return -1;
	total = b->le[b->nb - 1] - (a->nb ? a->le[a->nb - 1] : 0);
	if (total <= 0)
		return -1;
	want = q * total;
	for (unsigned i = 0; i < b->nb; i++) {
		double c = b->le[i] - (a->nb ? a->le[i] : 0);

		if (c >= want) {
			if (isinf(b->bound[i]))
				return lo; /* above the last bound: say the bound */
			/* linear inside the bucket, as Prometheus' histogram_quantile */
			return lo +
			       (b->bound[i] - lo) * (c > prev ? (want - prev) / (c - prev) : 1);
		}
		prev = c;
		lo = b->bound[i];
	}
	return lo;
}

struct op_rates {
	double ops, err, in, out, p50, p99;
};

static struct op_rates
op_rates(const struct op_sample *a, const struct op_sample *b, double dt)
{
	return (struct op_rates){ .ops = (b->requests - a->requests) / dt,
				  .err = (b->errors - a->errors) / dt,
				  .in = (b->bytes_in - a->bytes_in) / dt,
				  .out = (b->bytes_out - a->bytes_out) / dt,
				  .p50 = quantile(a, b, 0.5),
				  .p99 = quantile(a, b, 0.99) };
}

/* Sum two nodes' histograms and counters (a cluster view). */
static void
op_add(struct op_sample *into, const struct op_sample *o)
{
	into->requests += o->requests;
	into->errors += o->errors;
	into->bytes_in += o->bytes_in;
	into->bytes_out += o->bytes_out;
	if (o->nb == 0)
		return;
	if (into->nb == 0) {
		into->nb = o->nb;
		memcpy(into->bound, o->bound, sizeof(o->bound));
	}
	for (unsigned i = 0; i < o->nb && i < into->nb; i++)
		into->le[i] += o->le[i];
}

static json_t *
rates_json(const struct op_rates *r)
{
	return json_pack("{s:f, s:f, s:f, s:f, s:f, s:f}", "ops_per_s", r->ops, "errors_per_s",
			 r->err, "in_bytes_per_s", r->in, "out_bytes_per_s", r->out, "p50_ms",
			 r->p50 < 0 ? 0 : r->p50 * 1e3, "p99_ms", r->p99 < 0 ? 0 : r->p99 * 1e3);
}

static void
fmt_lat(char *out, size_t len, double s)
{
	if (s < 0)
		snprintf(out, len, "-");
	else if (s < 1e-3)
		snprintf(out, len, "%.0fus", s * 1e6);
	else
		snprintf(out, len, "%.1fms", s * 1e3);
}

/* One round: print what moved between prev and cur over dt seconds. */
static void
report(const struct cli *c, const struct node_sample *prev, const struct node_sample *cur,
       unsigned n, double dt, bool tty)
{
	struct op_sample ca[STATS_OPS] = { 0 }, cb[STATS_OPS] = { 0 };
	json_t *jn = json_array(), *jc = json_object();
	double wr = 0, rd = 0, iops = 0, retx = 0, cap = 0, used = 0;
	unsigned up = 0;

	for (unsigned i = 0; i < n; i++) {
		struct op_rates put, get;
		json_t *o;

		if (!prev[i].ok || !cur[i].ok) {
			json_array_append_new(jn, json_pack("{s:I, s:s, s:b}", "node",
							    (json_int_t)cur[i].id, "addr",
							    cur[i].addr, "up", 0));
			continue;
		}
		up++;
		put = op_rates(&prev[i].ops[0], &cur[i].ops[0], dt);
		get = op_rates(&prev[i].ops[1], &cur[i].ops[1], dt);
		o = json_pack("{s:I, s:s, s:b, s:f, s:f, s:f, s:f, s:f, s:f}", "node",
			      (json_int_t)cur[i].id, "addr", cur[i].addr, "up", 1,
			      "write_bytes_per_s", put.in, "read_bytes_per_s", get.out,
			      "retransmits_per_s", (cur[i].retransmits - prev[i].retransmits) / dt,
			      "capacity_bytes", cur[i].cap, "used_bytes", cur[i].used, "live_bytes",
			      cur[i].live);
		json_t *ops = json_object();

		for (int k = 0; k < STATS_OPS; k++) {
			struct op_rates r = op_rates(&prev[i].ops[k], &cur[i].ops[k], dt);

			json_object_set_new(ops, op_names[k], rates_json(&r));
			iops += k < 3 ? r.ops : 0;
			op_add(&ca[k], &prev[i].ops[k]);
			op_add(&cb[k], &cur[i].ops[k]);
		}
		json_object_set_new(o, "ops", ops);
		json_array_append_new(jn, o);
		wr += put.in;
		rd += get.out;
		retx += (cur[i].retransmits - prev[i].retransmits) / dt;
		cap += cur[i].cap;
		used += cur[i].used;
	}
	json_t *cops = json_object();
	struct op_rates cr[STATS_OPS];

	for (int k = 0; k < STATS_OPS; k++) {
		cr[k] = op_rates(&ca[k], &cb[k], dt);
		json_object_set_new(cops, op_names[k], rates_json(&cr[k]));
	}
	json_object_set_new(jc, "nodes_up", json_integer(up));
	json_object_set_new(jc, "nodes", json_integer(n));
	json_object_set_new(jc, "write_bytes_per_s", json_real(wr));
	json_object_set_new(jc, "read_bytes_per_s", json_real(rd));
	json_object_set_new(jc, "fragment_iops", json_real(iops));
	json_object_set_new(jc, "retransmits_per_s", json_real(retx));
	json_object_set_new(jc, "capacity_bytes", json_real(cap));
	json_object_set_new(jc, "used_bytes", json_real(used));
	json_object_set_new(jc, "ops", cops);
	if (c->json) {
		json_t *all = json_pack("{s:f, s:f, s:o, s:o}", "time", (double)time(NULL),
					"interval_s", dt, "cluster", jc, "per_node", jn);
		char *s = json_dumps(all, JSON_COMPACT);

		printf("%s\n", s ? s : "{}");
		free(s);
		json_decref(all);
		fflush(stdout);
		return;
	}
	if (tty)
		printf("\033[H\033[2J");
	printf("cluster: %u/%u nodes answer   write %.1f MiB/s   read %.1f MiB/s   fragment "
	       "ops %.0f/s   retransmits %.0f/s   used %.1f of %.1f GiB\n\n",
	       up, n, wr / 1048576, rd / 1048576, iops, retx, used / 1073741824.0,
	       cap / 1073741824.0);
	printf("%-18s %10s %8s %10s %10s %10s %10s\n", "operation", "ops/s", "err/s", "in MiB/s",
	       "out MiB/s", "p50", "p99");
	for (int k = 0; k < STATS_OPS; k++) {
		char p50[16], p99[16];

		fmt_lat(p50, sizeof(p50), cr[k].p50);
		fmt_lat(p99, sizeof(p99), cr[k].p99);
		printf("%-18s %10.0f %8.0f %10.1f %10.1f %10s %10s\n", op_names[k], cr[k].ops,
		       cr[k].err, cr[k].in / 1048576, cr[k].out / 1048576, p50, p99);
	}
	printf("\n%-6s %-22s %10s %10s %10s %10s %10s\n", "node", "admin", "write", "read",
	       "put p99", "get p99", "retx/s");
	for (unsigned i = 0; i < n; i++) {
		char p1[16], p2[16];

		if (!prev[i].ok || !cur[i].ok) {
			printf("%-6llu %-22s %10s\n", cur[i].id, cur[i].addr, "no answer");
			continue;
		}
		fmt_lat(p1, sizeof(p1), quantile(&prev[i].ops[0], &cur[i].ops[0], 0.99));
		fmt_lat(p2, sizeof(p2), quantile(&prev[i].ops[1], &cur[i].ops[1], 0.99));
		printf("%-6llu %-22s %8.1fM/s %8.1fM/s %10s %10s %10.0f\n", cur[i].id, cur[i].addr,
		       (cur[i].ops[0].bytes_in - prev[i].ops[0].bytes_in) / dt / 1048576,
		       (cur[i].ops[1].bytes_out - prev[i].ops[1].bytes_out) / dt / 1048576, p1, p2,
		       (cur[i].retransmits - prev[i].retransmits) / dt);
	}
	fflush(stdout);
	json_decref(jn);
	json_decref(jc);
}

int
cmd_stats(struct cli *c, int argc, char **argv)
{
	double interval = 1.0;
	long count = 0; /* 0: until interrupted */
	struct node_sample *prev, *cur;
	json_t *nodes, *v;
	unsigned n = 0;
	size_t i;

	for (int k = 1; k < argc; k++) {
		if (strcmp(argv[k], "--interval") == 0 && k + 1 < argc) {
			interval = strtod(argv[++k], NULL);
			if (!(interval >= 0.1 && interval <= 3600))
				usage_error("--interval is seconds, 0.1 to 3600");
		} else if (strcmp(argv[k], "--count") == 0 && k + 1 < argc) {
			count = strtol(argv[++k], NULL, 10);
			if (count < 1)
				usage_error("--count is a positive number of rounds");
		} else {
			usage_error("stats takes --interval S and --count N, not '%s'", argv[k]);
		}
	}
	nodes = api_get(c, "/v1/nodes");
	prev = calloc(NODES_MAX, sizeof(*prev));
	cur = calloc(NODES_MAX, sizeof(*cur));
	if (prev == NULL || cur == NULL)
		fail("out of memory");
	json_array_foreach(json_is_array(nodes) ? nodes : json_object_get(nodes, "nodes"), i, v)
	{
		const char *m = json_string_value(json_object_get(v, "mgmt"));

		if (m == NULL || n == NODES_MAX)
			continue;
		cur[n].id = (unsigned long long)json_integer_value(json_object_get(v, "id"));
		snprintf(cur[n].addr, sizeof(cur[n].addr), "%s", m);
		n++;
	}
	json_decref(nodes);
	if (n == 0)
		fail("the cluster has no nodes");
	for (unsigned k = 0; k < n; k++)
		sample_node(&cur[k]);
	double t0 = now_s();
	bool tty = isatty(STDOUT_FILENO) && !c->json;

	for (long round = 0; count == 0 || round < count; round++) {
		memcpy(prev, cur, n * sizeof(*cur));
		usleep((useconds_t)(interval * 1e6));
		for (unsigned k = 0; k < n; k++)
			sample_node(&cur[k]);
		double t1 = now_s();

		report(c, prev, cur, n, t1 - t0, tty);
		t0 = t1;
	}
	free(prev);
	free(cur);
	return 0;
}
