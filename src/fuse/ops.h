/* SPDX-License-Identifier: Apache-2.0 */
/* shoal mount: what the operation files share. */
#ifndef SH_FUSE_OPS_H
#define SH_FUSE_OPS_H

#include "sfuse.h"

struct sfuse *sfuse_of(fuse_req_t req);
void sfuse_creds(fuse_req_t req, fuse_ino_t parent, bool *sgid);
/*
 * A directory's attributes as the kernel got them, kept up with this mount's
 * creates in it (sfuse_creds, getattr answer from them; ops_ns.c).
 */
void sfuse_dir_memo_put(const struct stat *st);
/* What a create, mkdir, mknod or symlink of child in parent changed there. */
void sfuse_dir_memo_created(uint64_t parent, const struct stat *child);
/* ino's memo (0: every one) is no longer to be trusted. */
void sfuse_dir_memo_forget(uint64_t ino);
void sfuse_reply_err(fuse_req_t req, long rc);
/* A lookup's answer (ENOENT: a negative entry, cached for entry_timeout). */
void sfuse_reply_entry(fuse_req_t req, int rc, const struct stat *st);
/* A create-like call's answer: st made in parent. */
void sfuse_reply_new(fuse_req_t req, fuse_ino_t parent, int rc, const struct stat *st);

/* snaps.c: /.snapshots (docs/snapshots.md) */
#define SFUSE_SNAPDIR_NAME ".snapshots"
#define SFUSE_SNAPDIR_INO  0xfffffffffffffff0ull /* /.snapshots itself */
#define SFUSE_SNAP_FIRST   0xffff800000000000ull /* the kernel's numbers in snapshots: from here */
static inline bool
sfuse_live(fuse_ino_t kino)
{
	return kino < SFUSE_SNAP_FIRST;
}
/* Where the kernel's inode is: a file system's handle and Shoal's number there. */
struct sfuse_where {
	sh_fs *fs;
	uint64_t ino;
	int snap; /* the mount's index of its snapshot, -1: the live file system */
};
/* 0, 1: kino is /.snapshots itself, -ESTALE: a number this mount never gave. */
int sfuse_where(struct sfuse *s, fuse_ino_t kino, struct sfuse_where *w);
/* The kernel's number for ino of w's file system (0: no memory). */
fuse_ino_t sfuse_kino(const struct sfuse_where *w, uint64_t ino);
/* st->st_ino, Shoal's number in w's file system, becomes the kernel's. -ENOMEM. */
int sfuse_kstat(const struct sfuse_where *w, struct stat *st);
void sfuse_snapdir_stat(struct sfuse *s, struct stat *st);
/* A lookup of .snapshots in the root or of a snapshot in it: answered (true), or not its. */
bool sfuse_snap_lookup(fuse_req_t req, fuse_ino_t parent, const char *name);
/* The ready snapshots' names and the kernel's numbers of their roots (free both): how many. */
int sfuse_snapdir_list(struct sfuse *s, char (**names)[64], fuse_ino_t **kinos);
/* The snapshots' handles closed and the numbers forgotten (the mount ends). */
void sfuse_snaps_fini(void);

/* ops_io.c */
/*
 * Flush what the files open here for writing on ino have buffered (but
 * except's; NULL: all): how many handles were flushed. A failure stays for
 * its handle's fsync or close.
 */
unsigned sfuse_flush_ino(uint64_t ino, const sh_file *except);
/* Whether a file is open here on ino. */
bool sfuse_open_ino(uint64_t ino);
/*
 * Whether a handle open here created the file and no xattr was set
 * through this mount since (forget: from now on, not). The kernel asks
 * every write of a file for its security.capability (to drop it): for
 * such a file that is answered here, with no round trip.
 */
bool sfuse_fresh_ino(uint64_t ino, bool forget);
void sfuse_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		  struct fuse_file_info *fi);
void sfuse_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void sfuse_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi);
void sfuse_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		 struct fuse_file_info *fi);
void sfuse_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void sfuse_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi);
void sfuse_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void sfuse_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
		     struct fuse_file_info *fi);
void sfuse_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void sfuse_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		   struct fuse_file_info *fi);
void sfuse_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi);
void sfuse_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);

#endif /* SH_FUSE_OPS_H */
