/* SPDX-License-Identifier: Apache-2.0 */
/* shoal mount: what the operation files share. */
#ifndef SH_FUSE_OPS_H
#define SH_FUSE_OPS_H

#include "sfuse.h"

struct sfuse *sfuse_of(fuse_req_t req);
void sfuse_creds(fuse_req_t req, fuse_ino_t parent, bool *sgid);
/* Remember a directory's attributes as the kernel got them (sfuse_creds uses them). */
void sfuse_dir_memo_put(const struct stat *st);
void sfuse_reply_err(fuse_req_t req, long rc);
/* A lookup's answer (ENOENT: a negative entry, cached for entry_timeout). */
void sfuse_reply_entry(fuse_req_t req, int rc, const struct stat *st);
/* A create-like call's answer. */
void sfuse_reply_new(fuse_req_t req, int rc, const struct stat *st);

/* ops_io.c */
/* Flush what the files open here on ino have buffered. */
int sfuse_flush_ino(uint64_t ino);
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
