// SPDX-License-Identifier: Apache-2.0
/* shoal mount: the session — connect, mount, serve, unmount (sfuse.h). */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ops.h"

/* A mountinfo field's octal escapes (\040 a space, \011, \012, \134) undone, in place. */
static void
unescape(char *s)
{
	char *o = s;

	for (; *s; s++, o++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*o = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 3;
		} else {
			*o = *s;
		}
	}
	*o = '\0';
}

/*
 * The "major:minor" of the Shoal mount at dir, from /proc/self/mountinfo
 * (field 3; the mount point is field 5, the type the first after " - "):
 * -ENOENT if what is mounted there last is not a Shoal mount.
 */
static int
mount_dev(const char *dir, char *dev, size_t len)
{
	char real[PATH_MAX], line[4096];
	FILE *f;
	int rc = -ENOENT;

	if (realpath(dir, real) == NULL)
		snprintf(real, sizeof(real), "%s", dir);
	f = fopen("/proc/self/mountinfo", "r");
	if (f == NULL)
		return -errno;
	while (fgets(line, sizeof(line), f) != NULL) {
		char d[64], mp[PATH_MAX], type[64];
		const char *sep = strstr(line, " - ");

		if (sep == NULL || sscanf(line, "%*s %*s %63s %*s %4095s", d, mp) != 2 ||
		    sscanf(sep + 3, "%63s", type) != 1)
			continue;
		unescape(mp);
		if (strcmp(mp, real) != 0)
			continue;
		/* the last mount on the point is the one seen there */
		rc = strcmp(type, "fuse.shoal") == 0 ? 0 : -ENOENT;
		if (rc == 0)
			snprintf(dev, len, "%s", d);
	}
	fclose(f);
	return rc;
}

int
sfuse_unmount(const char *dir, bool lazy)
{
	pid_t pid = fork();
	int st;

	if (pid == 0) {
		if (lazy)
			execlp("fusermount3", "fusermount3", "-u", "-z", "--", dir, (char *)NULL);
		else
			execlp("fusermount3", "fusermount3", "-u", "--", dir, (char *)NULL);
		fprintf(stderr, "shoal: fusermount3: %s\n", strerror(errno));
		_exit(127);
	}
	if (pid < 0)
		return -errno;
	return waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -EIO;
}

/*
 * A mount of ours at dir whose daemon died (kill -9, a crash): every access
 * there is ENOTCONN until it is unmounted. Detached (fusermount3 -u -z), so
 * that a new mount can take the point; 0 if there was one and it is gone.
 */
static int
stale_unmount(const char *dir)
{
	char abs[PATH_MAX], cwd[PATH_MAX], dev[64];
	size_t n;

	if (dir[0] != '/' && getcwd(cwd, sizeof(cwd)) == NULL)
		return -errno;
	n = (size_t)snprintf(abs, sizeof(abs), "%s%s%s", dir[0] == '/' ? "" : cwd,
			     dir[0] == '/' ? "" : "/", dir);
	if (n >= sizeof(abs))
		return -ENAMETOOLONG;
	while (n > 1 && abs[n - 1] == '/')
		abs[--n] = '\0';
	if (mount_dev(abs, dev, sizeof(dev)) < 0)
		return -ENOENT; /* not ours: left as it is */
	if (sfuse_unmount(abs, true) < 0) {
		fprintf(stderr,
			"shoal: %s is a mount whose daemon died; fusermount3 -u -z could "
			"not unmount it (above)\n",
			abs);
		return -EIO;
	}
	fprintf(stderr, "shoal: %s was a mount whose daemon had died: unmounted\n", abs);
	return 0;
}

static struct sfuse *ra_of;

static void
ra_set(void)
{
	struct sfuse *s = ra_of;
	char dev[64], path[128];
	FILE *f;
	bool ok;

	if (s->o.readahead_kb <= 0 || mount_dev(s->o.dir, dev, sizeof(dev)) < 0)
		return;
	snprintf(path, sizeof(path), "/sys/class/bdi/%s/read_ahead_kb", dev);
	f = fopen(path, "w");
	ok = f != NULL && fprintf(f, "%d\n", s->o.readahead_kb) > 0;
	if (f != NULL && fclose(f) != 0)
		ok = false;
	if (!ok)
		fprintf(stderr, "shoal: read-ahead left at the kernel's (%s: %s)\n", path,
			strerror(errno));
}

void
sfuse_readahead(struct sfuse *s)
{
	ra_of = s;
	pthread_once(&s->ra_once, ra_set);
}

static void
add_opt(struct fuse_args *a, const char *o)
{
	fuse_opt_add_arg(a, "-o");
	fuse_opt_add_arg(a, o);
}

int
sfuse_main(const struct sfuse_opts *o)
{
	struct sh_client_opts co = { .timeout_ms = o->timeout_ms,
				     .frag_kb = o->frag_kb,
				     .key_file = o->key_file,
				     .fs_key_file = o->fs_key_file };
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	struct fuse_loop_config *lc = NULL;
	struct fuse_session *se = NULL;
	struct sfuse s = { .o = *o, .ra_once = PTHREAD_ONCE_INIT };
	char fsname[128], maxread[32], dir[PATH_MAX], dev[64];
	struct statvfs vfs;
	struct stat dst;
	int rc;

	if (s.o.threads == 0)
		s.o.threads = 16;
	/* the cluster and the filesystem answer before anything is mounted */
	rc = sh_client_connect(o->mgmt, &co, &s.c);
	if (rc == 0) {
		rc = sh_fs_open(s.c, o->fs, &s.fs);
		if (rc == -ENOENT)
			fprintf(stderr, "shoal: no filesystem '%s' in the cluster\n", o->fs);
		else if (rc == -EACCES)
			fprintf(stderr,
				"shoal: the cluster refuses filesystem '%s' to this client: it "
				"needs a key of that filesystem (--key-file, $SHOAL_KEY_FILE or "
				"$SHOAL_KEY; docs/security.md), not revoked; an encrypted one also "
				"its file system key (--fs-key-file, $SHOAL_FS_KEY_FILE)\n",
				o->fs);
		else if (rc < 0)
			fprintf(stderr, "shoal: filesystem '%s': %s\n", o->fs, sh_strerror(rc));
		else
			sh_fs_close(s.fs);
		sh_client_close(s.c);
		s.c = NULL;
		s.fs = NULL;
	} else {
		fprintf(stderr, "shoal: cannot reach the cluster at %s: %s\n", o->mgmt,
			rc == -EINVAL || rc == -EPERM ? "the client's key cannot be used (above)"
						      : sh_strerror(rc));
	}
	if (rc < 0)
		return rc;
	snprintf(fsname, sizeof(fsname), "fsname=shoal:%s,subtype=shoal", o->fs);
	fuse_opt_add_arg(&args, "shoal");
	add_opt(&args, fsname);
	/* the kernel checks permissions as for a local file system */
	add_opt(&args, "default_permissions");
	/* libfuse wants max_read both here and in init */
	snprintf(maxread, sizeof(maxread), "max_read=%u",
		 (o->max_io_kb ? o->max_io_kb : 1024) * 1024);
	add_opt(&args, maxread);
	if (o->allow_other)
		add_opt(&args, "allow_other");
	se = fuse_session_new(&args, &sfuse_ops, sizeof(sfuse_ops), &s);
	if (se == NULL) {
		fuse_opt_free_args(&args);
		fprintf(stderr, "shoal: cannot start a FUSE session\n");
		return -EIO;
	}
	/* an absolute mount point: a daemon changes to /, and unmounting names it again */
	/* (statfs always reaches a FUSE mount's daemon; a stat may be answered from the cache) */
	if (statvfs(o->dir, &vfs) != 0 && errno == ENOTCONN)
		(void)stale_unmount(o->dir); /* else it says ENOTCONN below */
	if (realpath(o->dir, dir) == NULL) {
		rc = -errno;
		fprintf(stderr, "shoal: mount point %s: %s\n", o->dir, strerror(-rc));
		goto out_session;
	}
	/* (libfuse would mount a file on a file, whose root then reads as EIO) */
	rc = stat(dir, &dst) != 0 ? -errno : S_ISDIR(dst.st_mode) ? 0 : -ENOTDIR;
	if (rc < 0) {
		fprintf(stderr, "shoal: mount point %s: %s\n", o->dir, strerror(-rc));
		goto out_session;
	}
	if (mount_dev(dir, dev, sizeof(dev)) == 0) {
		rc = -EBUSY;
		fprintf(stderr, "shoal: %s is a Shoal mount already (shoal umount it first)\n",
			o->dir);
		goto out_session;
	}
	s.o.dir = dir;
	s.se = se;
	if (fuse_set_signal_handlers(se) != 0) {
		fprintf(stderr, "shoal: cannot set the mount's signal handlers\n");
		rc = -EIO;
		goto out_session;
	}
	if (fuse_session_mount(se, dir) != 0) {
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
	/*
	 * Up to threads workers, kept once started (libfuse's idle limit left
	 * unset: a worker ended and another started per request costs a clone
	 * and an open of /dev/fuse each; sfuse.h on the API version).
	 */
	fuse_loop_cfg_set_max_threads(lc, s.o.threads);
	rc = fuse_session_loop_mt(se, lc);
	rc = rc < 0 ? rc : 0;
out_unmount:
	fuse_session_unmount(se);
out:
	fuse_remove_signal_handlers(se);
out_session: /* (libfuse complains of handlers removed that were never set) */
	fuse_session_destroy(se);
	fuse_opt_free_args(&args);
	if (lc)
		fuse_loop_cfg_destroy(lc);
	sfuse_snaps_fini(); /* the snapshots' handles, before their client goes */
	if (s.fs)
		sh_fs_close(s.fs);
	if (s.c)
		sh_client_close(s.c);
	return rc;
}
