// SPDX-License-Identifier: Apache-2.0
/* shoal mount: the session — connect, mount, serve, unmount (sfuse.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "sfuse.h"

static void
add_opt(struct fuse_args *a, const char *o)
{
	fuse_opt_add_arg(a, "-o");
	fuse_opt_add_arg(a, o);
}

int
sfuse_main(const struct sfuse_opts *o)
{
	struct sh_client_opts co = { .timeout_ms = o->timeout_ms };
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	struct fuse_loop_config *lc = NULL;
	struct fuse_session *se = NULL;
	struct sfuse s = { .o = *o };
	char fsname[128];
	int rc;

	if (s.o.threads == 0)
		s.o.threads = 8;
	/* the cluster and the filesystem answer before anything is mounted */
	rc = sh_client_connect(o->mgmt, &co, &s.c);
	if (rc == 0) {
		rc = sh_fs_open(s.c, o->fs, &s.fs);
		if (rc < 0)
			fprintf(stderr, "shoal: no filesystem '%s' in the cluster\n", o->fs);
		else
			sh_fs_close(s.fs);
		sh_client_close(s.c);
		s.c = NULL;
		s.fs = NULL;
	} else {
		fprintf(stderr, "shoal: cannot reach the cluster at %s: %s\n", o->mgmt,
			sh_strerror(rc));
	}
	if (rc < 0)
		return rc;
	snprintf(fsname, sizeof(fsname), "fsname=shoal:%s,subtype=shoal", o->fs);
	fuse_opt_add_arg(&args, "shoal");
	add_opt(&args, fsname);
	/* the kernel checks permissions as for a local file system */
	add_opt(&args, "default_permissions");
	if (o->allow_other)
		add_opt(&args, "allow_other");
	se = fuse_session_new(&args, &sfuse_ops, sizeof(sfuse_ops), &s);
	if (se == NULL) {
		fuse_opt_free_args(&args);
		fprintf(stderr, "shoal: cannot start a FUSE session\n");
		return -EIO;
	}
	if (fuse_set_signal_handlers(se) != 0 || fuse_session_mount(se, o->dir) != 0) {
		fprintf(stderr,
			"shoal: cannot mount on %s (is /dev/fuse usable, fuse3 installed?)\n",
			o->dir);
		rc = -EIO;
		goto out;
	}
	/* a daemon forks: the client's threads start after */
	if (fuse_daemonize(o->foreground) != 0) {
		rc = -EIO;
		goto out_unmount;
	}
	rc = sh_client_connect(o->mgmt, &co, &s.c);
	if (rc == 0)
		rc = sh_fs_open(s.c, o->fs, &s.fs);
	if (rc < 0)
		goto out_unmount;
	lc = fuse_loop_cfg_create();
	if (lc == NULL) {
		rc = -ENOMEM;
		goto out_unmount;
	}
	fuse_loop_cfg_set_max_threads(lc, s.o.threads);
	fuse_loop_cfg_set_idle_threads(lc, s.o.threads);
	rc = fuse_session_loop_mt(se, lc);
	rc = rc < 0 ? rc : 0;
out_unmount:
	fuse_session_unmount(se);
out:
	fuse_remove_signal_handlers(se);
	fuse_session_destroy(se);
	fuse_opt_free_args(&args);
	if (lc)
		fuse_loop_cfg_destroy(lc);
	if (s.fs)
		sh_fs_close(s.fs);
	if (s.c)
		sh_client_close(s.c);
	return rc;
}
