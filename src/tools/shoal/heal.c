// SPDX-License-Identifier: Apache-2.0
/*
 * shoal rebuild status (docs/cli.md, docs/healing.md): how protected the
 * cluster's data is, from GET /v1/rebuild (every node's part summed), and
 * with --watch the same again every few seconds until it is full.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shoal.h"

static long long
num(json_t *o, const char *k)
{
	return (long long)json_integer_value(json_object_get(o, k));
}

static const char *
str(json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));

	return s ? s : "?";
}

/* Bytes at each protection level: "1.2 GiB full, 20.0 MiB missing 1". */
static void
levels(json_t *j, char *out, size_t len)
{
	json_t *lv = json_object_get(j, "levels"), *l;
	size_t i, at = 0;

	out[0] = '\0';
	json_array_foreach(lv, i, l)
	{
		char sz[32];

		if (num(l, "stripes") == 0 && i > 0)
			continue;
		human_size(num(l, "bytes"), sz, sizeof(sz));
		if (i == 0)
			at += (size_t)snprintf(out + at, len - at, "%s full", sz);
		else
			at += (size_t)snprintf(out + at, len - at, ", %s missing %zu%s", sz, i,
					       i + 1 == json_array_size(lv) ? "+" : "");
		if (at >= len)
			break;
	}
}

void
rebuild_status_line(const struct cli *c)
{
	json_t *j = api_get(c, "/v1/rebuild");
	char lv[256];

	levels(j, lv, sizeof(lv));
	printf("protection  %s (%s)\n", str(j, "state"), lv);
	json_decref(j);
}

static void
show(json_t *j)
{
	char lv[256], pend[32], rate[32], done[32];
	json_t *eta = json_object_get(j, "eta_s");

	levels(j, lv, sizeof(lv));
	human_size(num(j, "pending_bytes"), pend, sizeof(pend));
	human_size(num(j, "rate_bytes_per_s"), rate, sizeof(rate));
	human_size(num(j, "rebuilt_bytes"), done, sizeof(done));
	printf("state       %s\n", str(j, "state"));
	printf("data        %s\n", lv);
	printf("targets     %lld lost, %lld down (rebuilt after %lld s down)\n",
	       num(j, "targets_lost"), num(j, "targets_down"), num(j, "rebuild_delay_s"));
	printf("rebuild     %s to go at %s/s", pend, rate);
	if (json_is_integer(eta))
		printf(", about %lld s left", (long long)json_integer_value(eta));
	printf("; %lld stripes in flight, %lld queued\n", num(j, "in_flight"), num(j, "queued"));
	printf("done        %lld fragments rebuilt, %lld moved (%s written), %lld retried\n",
	       num(j, "rebuilt_fragments"), num(j, "moved_fragments"), done, num(j, "failed_jobs"));
	printf("balance     targets' fill max/mean %.3f; %lld fragments moved, %lld stripes to "
	       "move\n",
	       json_number_value(json_object_get(j, "fill_max_over_mean")),
	       num(j, "balanced_fragments"), num(j, "balance_queued"));
	printf("scrub       %lld fragments repaired in place\n", num(j, "repaired_fragments"));
	if (num(j, "shared_stripes") || num(j, "unreadable_stripes"))
		printf("stripes     %lld sharing a failure domain, %lld unreadable\n",
		       num(j, "shared_stripes"), num(j, "unreadable_stripes"));
	if (num(j, "targets_full"))
		printf("space       %lld target(s) out of space: no heal writes go there (free "
		       "space, or add drives)\n",
		       num(j, "targets_full"));
	if (num(j, "nodes_answered") < num(j, "nodes_up"))
		printf("            (from %lld of %lld nodes up: the others did not answer)\n",
		       num(j, "nodes_answered"), num(j, "nodes_up"));
}

int
cmd_rebuild(struct cli *c, int argc, char **argv)
{
	unsigned every = 0;

	if (argc < 1 || strcmp(argv[0], "status") != 0)
		usage_error("rebuild needs: status [--watch [SECONDS]]");
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--watch") != 0)
			usage_error("unknown argument '%s'", argv[i]);
		every = 2;
		if (i + 1 < argc) {
			char *end;
			unsigned long v = strtoul(argv[i + 1], &end, 10);

			if (*end != '\0' || v == 0 || v > 3600)
				usage_error("--watch takes seconds, 1 to 3600, not '%s'",
					    argv[i + 1]);
			every = (unsigned)v;
			i++;
		}
	}
	for (;;) {
		json_t *j = api_get(c, "/v1/rebuild");
		bool full = strcmp(str(j, "state"), "full") == 0;

		if (c->json)
			print_json(j);
		else
			show(j);
		json_decref(j);
		if (every == 0 || full)
			return 0;
		fflush(stdout);
		sleep(every);
		if (!c->json)
			printf("\n");
	}
}

/* Until no stripe has fragments on draining drives (and nothing is to rebuild). */
static void
drain_wait(const struct cli *c, double t0)
{
	for (;;) {
		json_t *j = api_get(c, "/v1/rebuild");
		long long left = num(j, "draining_stripes");
		bool done = left == 0 && strcmp(str(j, "state"), "checking") != 0 &&
			    num(j, "pending_bytes") == 0;

		if (!c->json)
			printf("  %5.0f s  %s, %lld stripes still on draining drives\n",
			       now_s() - t0, str(j, "state"), left);
		fflush(stdout);
		json_decref(j);
		if (done)
			return;
		sleep(2);
	}
}

/*
 * DELETE path, again while the server answers 409: a node's metadata
 * replicas still moving, or the server's own look at the stripes not yet
 * sure (a heal pass has not seen the configuration the drain finished in,
 * a node did not answer in time), though the last status read drained.
 */
static void
delete_when_drained(const struct cli *c, const char *path, double t0)
{
	char reason[512];

	for (;;) {
		int st = api_try(c, "DELETE", path, NULL, reason, sizeof(reason));

		if (st == 200)
			return;
		if (st != 409 || now_s() - t0 > 3600)
			fail("%s", reason);
		if (!c->json)
			printf("  %5.0f s  waiting: %s\n", now_s() - t0, reason);
		fflush(stdout);
		sleep(2);
	}
}

static void
drain(const struct cli *c, unsigned long long id)
{
	char path[64];

	snprintf(path, sizeof(path), "/v1/drives/%llu", id);
	api_change(c, "PUT", path, json_pack("{s:s}", "state", "draining"));
}

int
drive_remove(const struct cli *c, unsigned long long id)
{
	char path[64];
	json_t *drives = api_get(c, "/v1/drives"), *d;
	const char *state = NULL;
	double t0 = now_s();
	size_t i;

	json_array_foreach(drives, i, d) if (num(d, "id") == (long long)id) state = str(d, "state");
	if (state == NULL)
		fail("no drive %llu", id);
	if (strcmp(state, "active") == 0)
		drain(c, id);
	json_decref(drives);
	if (!c->json)
		printf("drive %llu draining: its fragments move to the other drives\n", id);
	drain_wait(c, t0);
	snprintf(path, sizeof(path), "/v1/drives/%llu", id);
	delete_when_drained(c, path, t0);
	if (!c->json)
		printf("drive %llu removed (drained in %.0f s)\n", id, now_s() - t0);
	return 0;
}

int
node_remove(const struct cli *c, unsigned long long id)
{
	json_t *nodes = api_get(c, "/v1/nodes"), *drives = api_get(c, "/v1/drives"), *d;
	json_t *st = api_get(c, "/v1/status");
	bool data = num(st, "filesystems") > 0; /* else no drive holds anything yet */
	const char *state = NULL;
	char path[64];
	unsigned ndrives = 0;
	double t0 = now_s();
	size_t i;

	json_decref(st);
	json_array_foreach(nodes, i, d) if (num(d, "id") == (long long)id) state = str(d, "state");
	if (state == NULL)
		fail("no node %llu", id);
	if (!data || strcmp(state, "up") != 0)
		json_array_clear(drives); /* a node down is gone: its drives are rebuilt */
	json_array_foreach(drives, i, d)
	{
		if (num(d, "node") != (long long)id)
			continue;
		ndrives++;
		if (strcmp(str(d, "state"), "active") == 0)
			drain(c, (unsigned long long)num(d, "id"));
	}
	json_decref(nodes);
	json_decref(drives);
	if (ndrives > 0) {
		if (!c->json)
			printf("node %llu leaving: its %u drive%s drain and its metadata replicas "
			       "move to other nodes\n",
			       id, ndrives, ndrives == 1 ? "" : "s");
		drain_wait(c, t0);
	}
	snprintf(path, sizeof(path), "/v1/nodes/%llu", id);
	delete_when_drained(c, path, t0);
	if (!c->json)
		printf("node %llu removed (in %.0f s)\n", id, now_s() - t0);
	return 0;
}
