/* SPDX-License-Identifier: Apache-2.0 */
/*
 * shoal mount: the FUSE low-level binding on libshoal (docs/mount.md).
 * Inode numbers are Shoal's (the root is 1 in both); the binding keeps no
 * state per inode, so memory does not grow with the files a mount has
 * seen (forget is free). Open files and directories are libshoal
 * handles in fi->fh.
 */
#ifndef SH_FUSE_SFUSE_H
#define SH_FUSE_SFUSE_H

/*
 * 3.12: fuse_session_loop_mt takes the configuration fuse_loop_cfg_create
 * makes. Under an older version it is the 3.2 call, which reads that
 * configuration as the old struct (clone_fd, max_idle_threads): every
 * worker then ended after one request and another was started for the
 * next, and -o threads was ignored.
 */
#define FUSE_USE_VERSION 312
#include <fuse3/fuse_lowlevel.h>
#include <shoal/client.h>
#include <shoal/sh_errno.h>
#include <pthread.h>
#include <stdbool.h>

struct sfuse_opts {
	const char *mgmt;     /* a management address of the cluster */
	const char *fs;	      /* the filesystem */
	const char *dir;      /* the mount point */
	bool foreground;      /* -f: do not become a daemon */
	bool allow_other;     /* -o allow_other (default on as root) */
	double attr_timeout;  /* -o attr_timeout=S (default 1) */
	double entry_timeout; /* -o entry_timeout=S (default 1) */
	unsigned threads;     /* -o threads=N (default 16) */
	unsigned timeout_ms;  /* -o timeout=S: how long an operation waits for the cluster */
	int readahead_kb;     /* -o readahead=KiB (default 4096; 0: the kernel's 128) */
	bool coherent;	      /* -o coherent: no kernel caching of attributes, names, data */
	bool nocache;	      /* -o cache=off: no kernel caching of file data */
	unsigned max_io_kb;   /* -o max_io=KiB: the largest read or write the kernel sends */
	unsigned frag_kb;     /* -o frag=KiB: the fragment size of the stripes written */
	const char *log;      /* where a daemon logs (default: syslog-less: nowhere) */
	const char *key_file; /* --key-file: the client's key (NULL: $SHOAL_KEY, $SHOAL_KEY_FILE) */
	/* --fs-key-file: what opens an encrypted file system (NULL: $SHOAL_FS_KEY, ..._FILE) */
	const char *fs_key_file;
};

struct sfuse {
	struct sfuse_opts o;
	sh_client *c;
	sh_fs *fs;
	struct fuse_session *se; /* for the kernel cache invalidations a flush sends */
	pthread_once_t ra_once;
};

/*
 * The root's read-only extended attribute that tells a process under
 * libshoal_preload.so where the cluster is (docs/preload.md): its value
 * is the management address the mount connected to. Not listed, not
 * settable (EPERM).
 */
#define SFUSE_XATTR_MOUNT "user.shoal.mount"
/*
 * And where the mount's key is (--key-file, an absolute path; ENODATA
 * without one), for the same processes: the file's mode decides who may
 * read the key itself (docs/preload.md).
 */
#define SFUSE_XATTR_KEY "user.shoal.key_file"

/*
 * Set the mount's read-ahead (its backing device's read_ahead_kb in
 * sysfs) to o.readahead_kb, once, after the kernel took the session's
 * INIT answer (which would clamp it back to 128 KiB): called on the
 * first open. Needs root; without it the kernel's 128 KiB stays (said
 * in the log once).
 */
void sfuse_readahead(struct sfuse *s);

/* Mount and serve until unmounted or signalled; 0 or a negative errno with a message printed. */
int sfuse_main(const struct sfuse_opts *o);
/* fusermount3 -u [-z] -- dir, without a shell: 0, or -EIO (fusermount3 said why on stderr). */
int sfuse_unmount(const char *dir, bool lazy);

/* ops.c: the operation table */
extern const struct fuse_lowlevel_ops sfuse_ops;
/* A Shoal error as an errno FUSE can carry (Shoal's own codes become EIO). */
int sfuse_errno(long rc);

#endif /* SH_FUSE_SFUSE_H */
