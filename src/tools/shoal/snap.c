// SPDX-License-Identifier: Apache-2.0
/*
 * shoal fs snapshot: a filesystem's snapshots created, listed and deleted,
 * and its snapshot schedule shown and set, over the admin API (docs/cli.md
 * "Snapshots", docs/admin-api.md).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "shoal.h"

static const char snap_usage[] =
    "usage: shoal fs snapshot create FS NAME [--writable] | list FS [--json] | delete FS NAME\n"
    "       shoal fs snapshot schedule FS [--every DURATION [--keep N]] [--json]\n"
    "       shoal fs snapshot diff FS FROM TO [--json]\n"
    "  create FS NAME   snapshot filesystem FS as it is now; answers once the snapshot is\n"
    "                   ready (every metadata group of FS writes at the next version);\n"
    "                   --writable: FS@NAME then opens it read-write (a clone of it that\n"
    "                   goes with it), where a snapshot reads as it was\n"
    "  list FS          FS's snapshots: name, version, state (creating, ready, deleting),\n"
    "                   created (UTC), and the file bytes only that snapshot holds (what\n"
    "                   deleting it frees; summed every 10 s)\n"
    "  delete FS NAME   delete a snapshot; the space only it kept is freed in the background\n"
    "  schedule FS      FS's snapshot schedule; with --every, set it: the cluster takes a\n"
    "                   snapshot every DURATION (a number with s, m, h or d: 15m; off or 0\n"
    "                   turns it off), named auto-YYYYMMDDTHHMMSSZ (UTC), and deletes the\n"
    "                   oldest of them beyond the last N (--keep, 96 unless said); the\n"
    "                   others are left alone\n"
    "  diff FS FROM TO  what changed from snapshot FROM (- for the empty filesystem) to the\n"
    "                   later snapshot TO: a line per metadata record added (+), removed\n"
    "                   (-) or changed (~), then the counts\n"
    "NAME: 1-63 of A-Z a-z 0-9 . _ -, unique within FS; not \"schedule\".\n";

static void
check_name(const char *s, const char *what)
{
	if (!cfg_name_ok(s))
		usage_error("'%s' is not a %s name (1-63 of A-Z a-z 0-9 . _ -)", s, what);
}

const char *
iso_time(long long secs, char *buf, size_t len)
{
	time_t t = (time_t)secs;
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
	return buf;
}

static void
show_snaps(json_t *a)
{
	size_t i;
	json_t *s;

	printf("%-24s %10s %-9s %-20s %s\n", "NAME", "VERSION", "STATE", "CREATED", "ONLY");
	json_array_foreach(a, i, s)
	{
		char when[32], only[32];

		human_size(jint(s, "bytes_only"), only, sizeof(only));
		printf("%-24s %10lld %-9s %-20s %s%s\n", jstr(s, "name"), jint(s, "version"),
		       jstr(s, "state"), iso_time(jint(s, "created"), when, sizeof(when)),
		       json_object_get(s, "bytes_only") ? only : "-",
		       json_is_true(json_object_get(s, "writable")) ? " (writable)" : "");
	}
}

/* "filesystem FS: a snapshot every 15m, the last 96 kept" */
static void
say_schedule(const char *fs, long long every, long long keep)
{
	char d[32];

	if (every <= 0)
		printf("filesystem %s: no scheduled snapshots\n", fs);
	else
		printf("filesystem %s: a snapshot every %s, the last %lld kept\n", fs,
		       cfg_duration_str((uint64_t)every, d, sizeof(d)), keep);
}

/* shoal fs snapshot schedule FS [--every DURATION [--keep N]]: every and keep NULL to show. */
static int
schedule(struct cli *c, const char *fs, const char *every, const char *keep)
{
	long long e = 0, k = CFG_SNAP_KEEP_DEFAULT;
	char path[256], reason[512], *end;
	json_t *j;
	int st;

	snprintf(path, sizeof(path), "/v1/fs/%s/snapshots/schedule", fs);
	if (every == NULL && keep != NULL)
		usage_error("--keep goes with --every DURATION (--every off turns it off)");
	if (every == NULL) {
		j = api_get(c, path);
		if (c->json)
			print_json(j);
		else
			say_schedule(fs, jint(j, "every_s"), jint(j, "keep"));
		json_decref(j);
		return 0;
	}
	if (strcmp(every, "off") != 0 && (e = cfg_duration_parse(every)) < 0)
		usage_error("--every is a number with s, m, h or d (e.g. 15m), or off; not '%s'",
			    every);
	if (keep != NULL) {
		k = strtoll(keep, &end, 10);
		if (*keep < '0' || *keep > '9' || *end != '\0' || k < 1)
			usage_error("--keep is how many scheduled snapshots are kept, 1 or more; "
				    "not '%s'",
				    keep);
	}
	st = api_try(c, "PUT", path,
		     json_pack("{s:I, s:I}", "every_s", (json_int_t)e, "keep", (json_int_t)k),
		     reason, sizeof(reason));
	if (st == 409) { /* so already: nothing to change */
		if (c->json) {
			j = api_get(c, path);
			print_json(j);
			json_decref(j);
		} else {
			printf("%s\n", reason);
		}
		return 0;
	}
	if (st < 200 || st > 299)
		fail("%s", reason);
	if (!c->json)
		say_schedule(fs, e, k);
	return 0;
}

int
cmd_snapshot(struct cli *c, int argc, char **argv)
{
	char *pos[4];
	const char *verb, *every = NULL, *keep = NULL;
	bool writable = false;
	char path[256];
	int n = 0;

	/* --json may come after the command too */
	for (int i = 0; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0)
			c->json = true;
		else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
			n = -1;
		else if (strcmp(argv[i], "--writable") == 0)
			writable = true;
		else if (strcmp(argv[i], "--every") == 0 || strcmp(argv[i], "--keep") == 0) {
			if (i + 1 >= argc)
				usage_error("%s needs a value", argv[i]);
			if (strcmp(argv[i], "--every") == 0)
				every = argv[++i];
			else
				keep = argv[++i];
		} else if (strncmp(argv[i], "--", 2) == 0)
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
	if (strcmp(verb, "schedule") == 0) {
		if (n != 2)
			usage_error("fs snapshot schedule takes FS [--every DURATION [--keep N]]");
		check_name(pos[1], "filesystem");
		return schedule(c, pos[1], every, keep);
	}
	if (every != NULL || keep != NULL)
		usage_error("--every and --keep go with 'fs snapshot schedule'");
	if (writable && strcmp(verb, "create") != 0)
		usage_error("--writable goes with 'fs snapshot create'");
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
		j = api_call(c, "POST", path,
			     json_pack("{s:s, s:b}", "name", pos[2], "writable", writable));
		if (c->json)
			print_json(j);
		else if (writable)
			printf("snapshot %s of %s created (version %lld), writable: %s@%s opens it "
			       "read-write\n",
			       pos[2], pos[1], jint(j, "version"), pos[1], pos[2]);
		else
			printf("snapshot %s of %s created (version %lld)\n", pos[2], pos[1],
			       jint(j, "version"));
		json_decref(j);
		return 0;
	}
	if (strcmp(verb, "diff") == 0) {
		if (n != 4)
			usage_error("fs snapshot diff takes FS FROM TO");
		check_name(pos[1], "filesystem");
		if (strcmp(pos[2], "-") != 0)
			check_name(pos[2], "snapshot");
		check_name(pos[3], "snapshot");
		return snap_diff(c, pos[1], pos[2], pos[3]);
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

/* FS@SNAPSHOT (what restore and clone take) into fs (cap bytes); the snapshot's name. */
static const char *
fs_at_snap(const char *arg, char *fs, size_t cap, const char *what)
{
	const char *at = strchr(arg, '@');

	if (at == NULL || at == arg || (size_t)(at - arg) >= cap)
		usage_error("%s", what);
	memcpy(fs, arg, (size_t)(at - arg));
	fs[at - arg] = '\0';
	check_name(fs, "filesystem");
	check_name(at + 1, "snapshot");
	return at + 1;
}

/* POST /v1/fs/FS/SUB with body: the answer, printed as JSON if asked (else NULL). */
static json_t *
post_fs(struct cli *c, const char *fs, const char *sub, json_t *body)
{
	char path[256];
	json_t *j;

	snprintf(path, sizeof(path), "/v1/fs/%s/%s", fs, sub);
	j = api_call(c, "POST", path, body);
	if (!c->json)
		return j;
	print_json(j);
	json_decref(j);
	return NULL;
}

/* shoal fs clone FS@SNAPSHOT NEWFS: answered once the clone serves (a 504: not yet). */
int
cmd_clone(struct cli *c, int argc, char **argv)
{
	static const char what[] = "fs clone takes FS@SNAPSHOT NEWFS: a writable filesystem "
				   "sharing every block with the snapshot until written";
	char fs[128];
	const char *snap;
	json_t *j;

	if (argc != 2)
		usage_error("%s", what);
	snap = fs_at_snap(argv[0], fs, sizeof(fs), what);
	check_name(argv[1], "filesystem");
	j = post_fs(c, fs, "clone", json_pack("{s:s, s:s}", "snapshot", snap, "name", argv[1]));
	if (j != NULL)
		printf("filesystem %s is a writable clone of %s@%s: it serves\n", argv[1], fs,
		       snap);
	json_decref(j);
	return 0;
}

/* shoal fs restore FS@SNAPSHOT: answered once FS serves again (a 504: still going back). */
int
cmd_restore(struct cli *c, int argc, char **argv)
{
	static const char what[] = "fs restore takes FS@SNAPSHOT: the filesystem goes back to "
				   "that snapshot (every change since is lost; open files answer "
				   "ESTALE)";
	char fs[128];
	const char *snap;
	json_t *j;

	if (argc != 1)
		usage_error("%s", what);
	snap = fs_at_snap(argv[0], fs, sizeof(fs), what);
	j = post_fs(c, fs, "restore", json_pack("{s:s}", "snapshot", snap));
	if (j != NULL)
		printf("filesystem %s is back at snapshot %s (restore %lld): it serves again\n", fs,
		       snap, jint(j, "restore"));
	json_decref(j);
	return 0;
}
