/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Buffers and refcounted I/O vectors.
 *
 * struct sh_buf is a refcounted block of memory: either allocated by Shoal
 * (optionally aligned, for O_DIRECT) or wrapped around caller memory (the
 * zero-copy API), in which case a release callback runs when the last
 * reference goes. References may be taken and dropped from any thread.
 *
 * struct sh_iov is a list of slices (buf, offset, length); each slice holds
 * one reference to its buf. Data moves through Shoal as sh_iovs so that a
 * block is never copied between the client, the packet layer and the disk.
 */
#ifndef SH_BASE_BUF_H
#define SH_BASE_BUF_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

struct sh_buf;
typedef void (*sh_buf_release_cb)(void *arg, void *data);

struct sh_buf {
	_Atomic uint32_t ref;
	uint32_t flags;
	size_t cap;
	unsigned char *data;
	sh_buf_release_cb release;
	void *release_arg;
};

/* cap bytes aligned to align (0 or a power of two). Starts with one reference. NULL on ENOMEM. */
struct sh_buf *sh_buf_create(size_t cap, size_t align);
/* Wrap caller memory; release(arg, data) runs when the last reference is dropped. */
struct sh_buf *sh_buf_wrap(void *data, size_t cap, sh_buf_release_cb release, void *arg);

static inline struct sh_buf *
sh_buf_get(struct sh_buf *b)
{
	atomic_fetch_add_explicit(&b->ref, 1, memory_order_relaxed);
	return b;
}

void sh_buf_put(struct sh_buf *b);

struct sh_iov_seg {
	struct sh_buf *buf;
	size_t off;
	size_t len;
};

#define SH_IOV_INLINE 4

struct sh_iov {
	struct sh_iov_seg *seg;
	uint32_t n;
	uint32_t cap;
	size_t len; /* total bytes */
	struct sh_iov_seg inl[SH_IOV_INLINE];
};

void sh_iov_init(struct sh_iov *v);
/* Drop every slice's reference; v is empty and reusable afterwards. */
void sh_iov_fini(struct sh_iov *v);
/* Append buf[off, off+len) taking a new reference. -EINVAL if out of range, -ENOMEM. */
int sh_iov_append(struct sh_iov *v, struct sh_buf *buf, size_t off, size_t len);
/* Append the bytes [off, off+len) of src as slices sharing its buffers. */
int sh_iov_append_range(struct sh_iov *v, const struct sh_iov *src, size_t off, size_t len);
/* Copy up to len bytes starting at off into dst; returns bytes copied. */
size_t sh_iov_copyout(const struct sh_iov *v, size_t off, void *dst, size_t len);
/*
 * The iovecs of bytes [off, off + len) of v, at most max of them; returns
 * the count. bufs (NULL: not asked) gets the buffer each one lies in.
 */
unsigned sh_iov_range_iovec(const struct sh_iov *v, size_t off, size_t len, struct iovec *out,
			    unsigned max);
unsigned sh_iov_range_bufs(const struct sh_iov *v, size_t off, size_t len, struct iovec *out,
			   struct sh_buf **bufs, unsigned max);
/* Fill out[] with at most max iovecs; -E2BIG if more are needed. Returns the count. */
int sh_iov_to_iovec(const struct sh_iov *v, struct iovec *out, int max);
uint32_t sh_iov_crc32c(const struct sh_iov *v, uint32_t crc);

#endif /* SH_BASE_BUF_H */
