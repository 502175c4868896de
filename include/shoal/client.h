/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libshoal, the namespace (docs/client.md): connect to a cluster, open a
 * filesystem, and every metadata operation, by path or by inode number.
 *
 * Every call is synchronous, thread-safe, and returns 0 (or a count) on
 * success and a negative errno on failure, as Linux file systems give
 * them: -ENOENT, -EEXIST, -ENOTDIR, -EISDIR, -ENOTEMPTY, -ENAMETOOLONG,
 * -EINVAL, -ESTALE (an inode that is gone), -ELOOP (too many symlinks in a
 * path), -ETIMEDOUT (the cluster did not answer in time), -ENOTCONN (no
 * cluster there yet).
 *
 * Paths are absolute within the filesystem ("/a/b"); symbolic links in
 * the middle of a path are followed (at most SH_SYMLOOP_MAX), the last
 * component is followed only by the calls that say so.
 *
 * A successful create or remove is durable (committed by a majority of
 * the bucket's replicas) when the call returns. A directory's size (its
 * entry count), nlink and times follow changes made in other buckets
 * within milliseconds; this client sees its own changes at once.
 */
#ifndef SHOAL_CLIENT_H
#define SHOAL_CLIENT_H

#include <shoal/sh_version.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sh_client sh_client;
typedef struct sh_fs sh_fs;
typedef struct sh_dir sh_dir;

#define SH_ROOT_INO    1ull
#define SH_NAME_MAX    255
#define SH_SYMLOOP_MAX 40

struct sh_client_opts {
	unsigned timeout_ms; /* per operation; 0: 30 s */
	/*
	 * The fragment size of the stripes this client writes, in KiB: 4 to
	 * 2048, a multiple of 4 (-EINVAL otherwise); 0: 128. A stripe holds
	 * D of them (512 KiB for 4+2 at 128). Readers take any size.
	 */
	unsigned frag_kb;
	/*
	 * The file holding the client's key (docs/security.md, "Clients'
	 * keys": "sk1.ID.HEX", mode 0600): a file system access key, or a
	 * node's DIR/client.key. NULL: $SHOAL_KEY (the key's text), else the
	 * file $SHOAL_KEY_FILE names, else none. A cluster serves a client
	 * without a key nothing but its configuration: sh_fs_open, and
	 * everything after, is -EACCES; with a read-only key every change is
	 * -EROFS; once its key is revoked, -EACCES. A key that is not one, or
	 * a file others may read, fails sh_client_connect (-EINVAL, -EPERM); a
	 * key the cluster does not have, -EKEYREJECTED (its datagrams are not
	 * answered: after the connection's 10 s).
	 */
	const char *key_file;
	/*
	 * The file holding the key that opens encrypted file systems
	 * (docs/security.md, "Encrypted file systems": "sek1.HEX", mode
	 * 0600, the KEYFILE of `shoal fs create --encrypt`). NULL: $SHOAL_FS_KEY
	 * (the key's text), else the file $SHOAL_FS_KEY_FILE names. Read when
	 * an encrypted file system is opened: without a key, or with one that
	 * does not open it, sh_fs_open is -EACCES (the reason logged).
	 */
	const char *fs_key_file;
};

/*
 * Connect through any management address of the cluster ("ip:port", or
 * several separated by commas: the first that answers and gives the
 * cluster's configuration; one that answered and went away before it
 * did, killed say, is passed over for the next). The client then follows
 * the cluster's configuration by itself.
 */
SH_API int sh_client_connect(const char *mgmt, const struct sh_client_opts *opts, sh_client **out);
SH_API void sh_client_close(sh_client *c);

/*
 * Open a filesystem by name: -ENOENT if the cluster has none by that name.
 * "FS@SNAP" opens snapshot SNAP of FS, read-only: it reads as FS was when
 * the snapshot was taken, and every change is refused with -EROFS. -ENOENT
 * (no such snapshot), -EAGAIN (it is still being created), -ESTALE (it is
 * being deleted; also what calls on a handle get once it is).
 */
SH_API int sh_fs_open(sh_client *c, const char *name, sh_fs **out);
/*
 * The ready snapshots of filesystem fs, as the cluster's configuration
 * last told this client: at most max names (each up to 63 bytes and a
 * NUL) into names, in the order they were taken. How many there are, or
 * -ENOENT (no such filesystem).
 */
SH_API int sh_fs_snapshots(sh_client *c, const char *fs, char (*names)[64], unsigned max);

/*
 * One change between two snapshots (sh_fs_diff): a metadata record whose
 * value as of `from` is not its value as of `to` (docs/snapshots.md,
 * "What changed between two snapshots"). The pointers are valid during
 * the callback only.
 */
struct sh_diff {
	/* 'i' an inode's attributes, 'd' a directory entry, 'x' an xattr, 'e' an
	 * extent of a file's map, 'l' a symlink's target, 'y' a small file's
	 * bytes, 'p' a directory's parent, 'g' which buckets hold a directory's
	 * entries */
	char kind;
	uint16_t bucket;
	uint64_t ino;	  /* the inode ('d': the directory the entry is in) */
	uint64_t off;	  /* 'e': where the extent starts in the file */
	const char *name; /* 'd', 'x': the entry's or attribute's name (not NUL-ended) */
	size_t name_len;
	const uint8_t *key; /* the record's key as stored (docs/ondisk.md), no version */
	size_t key_len;
	const void *old, *new; /* the record's bytes as of from and as of to; NULL: absent */
	size_t old_len, new_len;
};
typedef int (*sh_diff_fn)(void *arg, const struct sh_diff *d);
/*
 * What changed in filesystem fs (opened live, not as a snapshot) from
 * snapshot `from` (NULL: from the empty filesystem, everything in `to`)
 * to the later snapshot `to`: fn once per changed record, bucket by
 * bucket, in key order within a bucket. fn returns 0 to go on, anything
 * else to stop (sh_fs_diff then returns it). The iterator replication will
 * send; it reads the snapshots, not the live filesystem, so it may run
 * while files change. -ENOENT (no such snapshot), -EINVAL (from is not
 * older than to), -ESTALE (one is being deleted).
 */
SH_API int sh_fs_diff(sh_fs *fs, const char *from, const char *to, sh_diff_fn fn, void *arg);
SH_API void sh_fs_close(sh_fs *fs);

/* ---- by path ---- */

SH_API int sh_stat(sh_fs *fs, const char *path, struct stat *st);  /* follows a final symlink */
SH_API int sh_lstat(sh_fs *fs, const char *path, struct stat *st); /* does not */
SH_API int sh_mkdir(sh_fs *fs, const char *path, mode_t mode);
/* Create a regular file (S_IFREG or 0 in mode), a device, FIFO or socket; -EEXIST if present. */
SH_API int sh_mknod(sh_fs *fs, const char *path, mode_t mode, dev_t rdev);
SH_API int sh_unlink(sh_fs *fs, const char *path);
SH_API int sh_rmdir(sh_fs *fs, const char *path);
#define SH_RENAME_NOREPLACE 0x1
#define SH_RENAME_EXCHANGE  0x2
SH_API int sh_rename(sh_fs *fs, const char *from, const char *to, unsigned flags);
SH_API int sh_link(sh_fs *fs, const char *existing, const char *newpath);
SH_API int sh_symlink(sh_fs *fs, const char *target, const char *linkpath);
/* The target into buf (not NUL-terminated, as readlink(2)); returns its length. */
SH_API long sh_readlink(sh_fs *fs, const char *path, char *buf, size_t size);
SH_API int sh_chmod(sh_fs *fs, const char *path, mode_t mode);
SH_API int sh_chown(sh_fs *fs, const char *path, uid_t uid, gid_t gid); /* -1: unchanged */
SH_API int sh_truncate(sh_fs *fs, const char *path, uint64_t size);
/* times[0] atime, times[1] mtime; UTIME_NOW and UTIME_OMIT as utimensat(2); NULL: now. */
SH_API int sh_utimens(sh_fs *fs, const char *path, const struct timespec times[2]);
#define SH_XATTR_CREATE	 0x1
#define SH_XATTR_REPLACE 0x2
SH_API int sh_setxattr(sh_fs *fs, const char *path, const char *name, const void *value,
		       size_t size, int flags);
/* As getxattr(2): size 0 asks for the length; -ERANGE if it does not fit; -ENODATA. */
SH_API long sh_getxattr(sh_fs *fs, const char *path, const char *name, void *value, size_t size);
SH_API long sh_listxattr(sh_fs *fs, const char *path, char *list, size_t size);
SH_API int sh_removexattr(sh_fs *fs, const char *path, const char *name);
/*
 * Capacity and use from the cluster's targets (those that answer); with a
 * quota, the quota is the size and what it leaves is free. Files unknown (0).
 */
SH_API int sh_statvfs(sh_fs *fs, struct statvfs *out);

/* ---- directories ---- */

struct sh_dirent {
	uint64_t ino;
	unsigned char type; /* DT_REG, DT_DIR, ... */
	char name[SH_NAME_MAX + 1];
};

SH_API int sh_opendir(sh_fs *fs, const char *path, sh_dir **out);
SH_API int sh_opendir_ino(sh_fs *fs, uint64_t dir, sh_dir **out);
/*
 * The next entry into *out: 1, or 0 at the end. "." and ".." are not
 * returned. An entry that exists from opendir to the end is returned
 * exactly once; one created or removed meanwhile may or may not be.
 */
SH_API int sh_readdir(sh_dir *d, struct sh_dirent *out);
/*
 * The same with the entry's attributes as a getattr would give them, read
 * with the page (readdirplus: one round trip per page, not per entry);
 * st->st_ino is 0 when they did not come with it (an inode kept elsewhere:
 * hard-linked, renamed in), and sh_getattr gives them.
 */
SH_API int sh_readdir_plus(sh_dir *d, struct sh_dirent *out, struct stat *st);
SH_API void sh_closedir(sh_dir *d);

/* ---- by inode number (what a FUSE low-level binding uses) ---- */

SH_API int sh_lookup(sh_fs *fs, uint64_t parent, const char *name, struct stat *st);
SH_API int sh_getattr(sh_fs *fs, uint64_t ino, struct stat *st);
#define SH_SET_MODE  0x1
#define SH_SET_UID   0x2
#define SH_SET_GID   0x4
#define SH_SET_SIZE  0x8
#define SH_SET_ATIME 0x10
#define SH_SET_MTIME 0x20
/* Change what valid says, from st (st_mode, st_uid, st_gid, st_size, st_atim, st_mtim). */
SH_API int sh_setattr(sh_fs *fs, uint64_t ino, const struct stat *st, unsigned valid,
		      struct stat *out);
/* Create name in parent (mode carries S_IFMT; 0 type bits: a regular file). */
SH_API int sh_mknod_at(sh_fs *fs, uint64_t parent, const char *name, mode_t mode, dev_t rdev,
		       struct stat *out);
SH_API int sh_mkdir_at(sh_fs *fs, uint64_t parent, const char *name, mode_t mode, struct stat *out);
SH_API int sh_symlink_at(sh_fs *fs, const char *target, uint64_t parent, const char *name,
			 struct stat *out);
SH_API int sh_link_at(sh_fs *fs, uint64_t ino, uint64_t parent, const char *name, struct stat *out);
SH_API int sh_unlink_at(sh_fs *fs, uint64_t parent, const char *name);
SH_API int sh_rmdir_at(sh_fs *fs, uint64_t parent, const char *name);
SH_API int sh_rename_at(sh_fs *fs, uint64_t parent, const char *name, uint64_t newparent,
			const char *newname, unsigned flags);
SH_API long sh_readlink_ino(sh_fs *fs, uint64_t ino, char *buf, size_t size);
SH_API int sh_setxattr_ino(sh_fs *fs, uint64_t ino, const char *name, const void *value,
			   size_t size, int flags);
SH_API long sh_getxattr_ino(sh_fs *fs, uint64_t ino, const char *name, void *value, size_t size);
SH_API long sh_listxattr_ino(sh_fs *fs, uint64_t ino, char *list, size_t size);
SH_API int sh_removexattr_ino(sh_fs *fs, uint64_t ino, const char *name);

/* What one drive target holds (its node answers for it). */
struct sh_target_usage {
	uint64_t target, capacity, used, live, fragments;
	int status; /* 0, or why the target did not answer (-EHOSTDOWN, -ETIMEDOUT) */
	/* what writes can still take: capacity less live bytes and the cleaning reserve
	 * (used - live is garbage, fragments released that cleaning frees as room is needed) */
	uint64_t room;
};
/* Every target of the cluster, up to max into out; returns how many there are, or -errno. */
SH_API int sh_targets_usage(sh_fs *fs, struct sh_target_usage *out, unsigned max);

/*
 * Cleaning (docs/reduction.md): the live bytes of files' stripes that are
 * at least half dead (overwritten, truncated) are read and written into
 * new stripes, each range mapped only if nothing wrote it meanwhile, so the
 * old stripes go and their space comes back; what readers see never
 * changes. Over buckets [from, to) (to 0: all); progress(arg, done, total)
 * after each bucket, if given. Shoald runs it in the background.
 */
struct sh_clean_stats {
	uint64_t buckets, stripes, moved_bytes;
	uint64_t skipped; /* ranges written meanwhile, left as they are */
};
SH_API int sh_fs_clean(sh_fs *fs, uint32_t from, uint32_t to, struct sh_clean_stats *out,
		       void (*progress)(void *arg, uint32_t done, uint32_t total), void *arg);

/* ---- file data (docs/client.md, "Data") ---- */

typedef struct sh_file sh_file;

/*
 * Open a regular file: flags O_RDONLY, O_WRONLY or O_RDWR, with O_CREAT,
 * O_EXCL, O_TRUNC, O_APPEND as open(2); mode for a new file.
 */
SH_API int sh_open(sh_fs *fs, const char *path, int flags, mode_t mode, sh_file **out);
/*
 * Write len bytes at off (O_APPEND: at the end). Writes are buffered into
 * stripes; a full stripe is erasure-coded and sent to its targets, then
 * mapped in the file's bucket. Returns len or a negative errno (also one
 * an earlier buffered write met); -EDQUOT when the filesystem has a quota
 * and the bytes it adds past the file's end would go beyond it.
 */
SH_API long sh_pwrite(sh_file *f, const void *buf, size_t len, uint64_t off);
/*
 * Read up to len bytes at off: fewer at the end of the file, zeros in
 * holes. Fragments lost or corrupt (up to P of a stripe) are rebuilt from
 * the others; more than that: -EIO, never wrong data.
 */
SH_API long sh_pread(sh_file *f, void *buf, size_t len, uint64_t off);
/* What was written is durable and mapped (a partial stripe is written as one). */
SH_API int sh_fsync(sh_file *f);
/*
 * As sh_fsync, for a caller other than the handle's owner (the mount, for
 * a reader of the same file): an error a buffered write met is returned
 * but stays for the handle's own sh_fsync or sh_close to report.
 */
SH_API int sh_flush(sh_file *f);
SH_API int sh_ftruncate(sh_file *f, uint64_t size);
SH_API int sh_fstat(sh_file *f, struct stat *st);
/* Flush, then free the handle; returns what the flush returned. */
SH_API int sh_close(sh_file *f);
/* Open a regular file by inode (O_TRUNC honoured; O_CREAT/O_EXCL mean nothing here). */
SH_API int sh_open_ino(sh_fs *fs, uint64_t ino, int flags, sh_file **out);
/* As sh_open_ino; st: the file's attributes as the open found them (before any O_TRUNC). */
SH_API int sh_open_ino_st(sh_fs *fs, uint64_t ino, int flags, struct stat *st, sh_file **out);
/*
 * As sh_open_ino, with the attributes a call of this client just returned
 * for the file (a create's): no round trip to ask for them again. O_TRUNC
 * cuts (and marks the times of) a file another creator made first; a file
 * this caller just made has nothing to cut: leave O_TRUNC out then.
 */
SH_API int sh_open_stat(sh_fs *fs, const struct stat *st, int flags, sh_file **out);

/* Vectored: as sh_pread/sh_pwrite over the buffers in order (iovcnt <= SH_IOV_MAX). */
#define SH_IOV_MAX 1024
struct iovec;
SH_API long sh_preadv(sh_file *f, const struct iovec *iov, int iovcnt, uint64_t off);
SH_API long sh_pwritev(sh_file *f, const struct iovec *iov, int iovcnt, uint64_t off);

/*
 * Asynchronous calls: many in flight from one thread. Fill a request, hand
 * it over with sh_io_submit (0, or a negative errno and no callback); the
 * call runs on one of the filesystem handle's I/O threads and cb(io) runs
 * there once, with io->result set (bytes, or a negative errno as the
 * synchronous call returns). The request and its buffers stay the
 * caller's and must live until cb. Calls on one file run in no set order
 * relative to each other: wait for a write's callback before a read that
 * must see it. Close files (and sh_fs_close) only once every callback ran.
 */
enum { SH_IO_READ = 1, SH_IO_WRITE, SH_IO_FSYNC };
typedef struct sh_io sh_io;
struct sh_io {
	sh_file *f;
	int op; /* SH_IO_* */
	const struct iovec *iov;
	int iovcnt;
	uint64_t off;
	long result;
	void (*cb)(sh_io *io);
	void *data; /* the caller's */
};
SH_API int sh_io_submit(sh_io *io);

/*
 * Read up to len bytes at off into GPU memory: dptr is a CUDA device
 * pointer (of the calling thread's current context, else of device's
 * primary context). Returns the bytes read (fewer at the end of the file)
 * or a negative errno; -ENODEV where there is no CUDA driver or no usable
 * GPU (the log says which, once). The bytes go through a ring of pinned
 * host buffers with the reads of the next chunks in flight while earlier
 * ones are copied to the device (docs/python.md, "GPU").
 */
SH_API long sh_pread_device(sh_file *f, void *dptr, size_t len, uint64_t off, int device);

/*
 * The owner of what this thread creates from now on (a FUSE binding sets
 * the calling process's); by default the process's own uid and gid.
 */
SH_API void sh_creds(uid_t uid, gid_t gid);

/* The inode a path names (following a final symlink if follow). */
SH_API int sh_resolve(sh_fs *fs, const char *path, int follow, uint64_t *ino);

#ifdef __cplusplus
}
#endif

#endif /* SHOAL_CLIENT_H */
