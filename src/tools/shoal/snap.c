// SPDX-License-Identifier: Apache-2.0
/*
 * shoal fs snapshot: a filesystem's snapshots created, listed and deleted
 * over the admin API (docs/cli.md "Snapshots", docs/admin-api.md).
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "shoal.h"

static const char snap_usage[] =
    "usage: shoal fs snapshot create FS NAME | list FS [--json] | delete FS NAME\n"
    "  create FS NAME   snapshot filesystem FS as it is now; answers once the snapshot is\n"
    "                   ready (every metadata group of FS writes at the next version)\n"
    "  list FS          FS's snapshots: name, version, state (creating, ready, deleting),\n"
    "                   created (UTC)\n"
    "  delete FS NAME   delete a snapshot; the space only it kept is freed in the background\n"
    "NAME: 1-63 of A-Z a-z 0-9 . _ -, unique within FS.\n";

static void
check_name(const char *s, const char *what)
{
	if (!cfg_name_ok(s))
		usage_error("'%s' is not a %s name (1-63 of A-Z a-z 0-9 . _ -)", s, what);
}

/* "2024-05-01T12:00:00Z" */
static const char *
iso_time(long long secs, char *buf, size_t len)
{
	time_t t = (time_t)secs;
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
	return buf;
}

static const char *
jstr(json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));

	return s ? s : "";
}

static long long
jint(json_t *o, const char *k)
{
	return (long long)json_integer_value(json_object_get(o, k));
}

static void
show_snaps(json_t *a)
{
	size_t i;
	json_t *s;

	printf("%-24s %10s %-9s %s\n", "NAME", "VERSION", "STATE", "CREATED");
	json_array_foreach(a, i, s)
	{
		char when[32];

		printf("%-24s %10lld %-9s %s\n", jstr(s, "name"), jint(s, "version"),
		       jstr(s, "state"), iso_time(jint(s, "created"), when, sizeof(when)));
	}
}

int
cmd_snapshot(struct cli *c, int argc, char **argv)
{
	char *pos[4];
	const char *verb;
	char path[256];
	int n = 0;

	/* --json may come after the command too */
	for (int i = 0; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0)
			c->json = true;
		else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
			n = -1;
		else if (strncmp(argv[i], "--", 2) == 0)
			usage_error("unknown option '%s'", argv[i]);
		else if (n >= 0 && n < 4)
			pos[n++] = argv[i];
		else if (n >= 0)
			usage_error("unexpected argument '%s'", argv[i]);
	}
	if (n < 0 || (n == 1 && strcmp(pos[0], "help") == 0)) {
		fputs(snap_usage, stdout);
		return 0;
	}
	if (n == 0) {
		fputs(snap_usage, stderr);
		return 2;
	}
	verb = pos[0];
	if (strcmp(verb, "list") == 0) {
		json_t *j;

		if (n != 2)
			usage_error("fs snapshot list takes FS");
		check_name(pos[1], "filesystem");
		snprintf(path, sizeof(path), "/v1/fs/%s/snapshots", pos[1]);
		j = api_get(c, path);
		if (c->json)
			print_json(j);
		else
			show_snaps(j);
		json_decref(j);
		return 0;
	}
	if (strcmp(verb, "create") == 0) {
		json_t *j;

		if (n != 3)
			usage_error("fs snapshot create takes FS NAME");
		check_name(pos[1], "filesystem");
		check_name(pos[2], "snapshot");
		snprintf(path, sizeof(path), "/v1/fs/%s/snapshots", pos[1]);
		/* answered once ready; a 504 says it is still being created (exit 1) */
		j = api_call(c, "POST", path, json_pack("{s:s}", "name", pos[2]));
		if (c->json)
			print_json(j);
		else
			printf("snapshot %s of %s created (version %lld)\n", pos[2], pos[1],
			       jint(j, "version"));
		json_decref(j);
		return 0;
	}
	if (strcmp(verb, "delete") == 0) {
		if (n != 3)
			usage_error("fs snapshot delete takes FS NAME");
		check_name(pos[1], "filesystem");
		check_name(pos[2], "snapshot");
		snprintf(path, sizeof(path), "/v1/fs/%s/snapshots/%s", pos[1], pos[2]);
		api_change(c, "DELETE", path, NULL);
		if (!c->json)
			printf("snapshot %s of %s deleted: its space is freed in the background\n",
			       pos[2], pos[1]);
		return 0;
	}
	usage_error("unknown command 'fs snapshot %s'", verb);
}
