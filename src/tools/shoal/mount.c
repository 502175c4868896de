// SPDX-License-Identifier: Apache-2.0
/* shoal mount / umount (docs/mount.md). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../fuse/sfuse.h"
#include "shoal.h"

/* -o name=value,... */
static void
parse_o(struct sfuse_opts *o, char *s)
{
	for (char *tok = strtok(s, ","); tok; tok = strtok(NULL, ",")) {
		char *eq = strchr(tok, '=');
		const char *v = eq ? eq + 1 : NULL;

		if (eq)
			*eq = '\0';
		if (strcmp(tok, "allow_other") == 0)
			o->allow_other = true;
		else if (strcmp(tok, "coherent") == 0)
			o->coherent = true;
		else if (strcmp(tok, "cache") == 0 && v && (!strcmp(v, "on") || !strcmp(v, "off")))
			o->nocache = strcmp(v, "off") == 0;
		else if (strcmp(tok, "frag") == 0 && v && atoi(v) >= 4 && atoi(v) <= 2048 &&
			 atoi(v) % 4 == 0)
			o->frag_kb = (unsigned)atoi(v);
		else if (strcmp(tok, "max_io") == 0 && v && atoi(v) >= 4 && atoi(v) <= 1024)
			o->max_io_kb = (unsigned)atoi(v);
		else if (strcmp(tok, "attr_timeout") == 0 && v)
			o->attr_timeout = atof(v);
		else if (strcmp(tok, "entry_timeout") == 0 && v)
			o->entry_timeout = atof(v);
		else if (strcmp(tok, "threads") == 0 && v && atoi(v) > 0)
			o->threads = (unsigned)atoi(v);
		else if (strcmp(tok, "readahead") == 0 && v && atoi(v) >= 0)
			o->readahead_kb = atoi(v);
		else if (strcmp(tok, "timeout") == 0 && v && atoi(v) > 0)
			o->timeout_ms = (unsigned)atoi(v) * 1000;
		else
			usage_error("unknown mount option '%s'", tok);
	}
}

int
cmd_mount(struct cli *c, int argc, char **argv)
{
	struct sfuse_opts o = {
		.attr_timeout = 1,
		.entry_timeout = 1,
		.timeout_ms = 30000,
		.readahead_kb = 4096,
		.max_io_kb = 1024,
	};
	static char addr[512], key_file[PATH_MAX], fs_key_file[PATH_MAX];
	const char *what = NULL;
	int rc;

	o.allow_other = geteuid() == 0; /* usable by every local user, as a kernel file system */
	for (int i = 0; i < argc; i++) {
		if (strcmp(argv[i], "-f") == 0)
			o.foreground = true;
		else if (strcmp(argv[i], "-o") == 0 && i + 1 < argc)
			parse_o(&o, argv[++i]);
		else if (strcmp(argv[i], "--key-file") == 0 && i + 1 < argc) {
			/* absolute: the daemon leaves the directory it started in */
			if (realpath(argv[++i], key_file) == NULL)
				usage_error("--key-file %s: %s", argv[i], strerror(errno));
			o.key_file = key_file;
		} else if (strcmp(argv[i], "--fs-key-file") == 0 && i + 1 < argc) {
			if (realpath(argv[++i], fs_key_file) == NULL)
				usage_error("--fs-key-file %s: %s", argv[i], strerror(errno));
			o.fs_key_file = fs_key_file;
		} else if (what == NULL)
			what = argv[i];
		else if (o.dir == NULL)
			o.dir = argv[i];
		else
			usage_error("mount [ADDR/]FS DIR [-f] [-o OPTIONS] [--key-file FILE] "
				    "[--fs-key-file FILE]: "
				    "unexpected '%s'",
				    argv[i]);
	}
	if (what == NULL || o.dir == NULL)
		usage_error(
		    "mount [ADDR/]FS DIR [-f] [-o OPTIONS] [--key-file FILE] [--fs-key-file FILE]");
	if (o.coherent) {
		/* every stat and lookup asks the client, whose caches the cluster recalls */
		o.attr_timeout = 0;
		o.entry_timeout = 0;
	}
	/* ADDR/FS: the cluster named in the argument; FS alone: --addr's */
	if (strchr(what, '/') != NULL) {
		snprintf(addr, sizeof(addr), "%.*s", (int)(strchr(what, '/') - what), what);
		o.mgmt = addr;
		o.fs = strchr(what, '/') + 1;
	} else {
		o.mgmt = c->addr;
		o.fs = what;
	}
	rc = sfuse_main(&o);
	return rc < 0 ? 1 : 0;
}

int
cmd_umount(struct cli *c, int argc, char **argv)
{
	(void)c;
	if (argc != 1)
		usage_error("umount DIR");
	return sfuse_unmount(argv[0], false) == 0 ? 0 : 1; /* (no shell: DIR may hold anything) */
}
