// SPDX-License-Identifier: Apache-2.0
/* Refcounted buffers and slice vectors; see buf.h. */
#include <errno.h>
#include <string.h>

#include "alloc.h"
#include "buf.h"
#include "compiler.h"
#include "crc32c.h"

#define BUF_OWNED 1u

struct sh_buf *
sh_buf_create(size_t cap, size_t align)
{
	struct sh_buf *b = sh_malloc(sizeof(*b));

	if (b == NULL)
		return NULL;
	if (align != 0 && !SH_IS_POW2(align))
		goto out_free;
	if (align < sizeof(void *))
		align = sizeof(void *);
	b->data = sh_aligned_alloc(align, cap);
	if (b->data == NULL)
		goto out_free;
	atomic_init(&b->ref, 1);
	b->flags = BUF_OWNED;
	b->cap = cap;
	b->release = NULL;
	b->release_arg = NULL;
	return b;

out_free:
	sh_free(b);
	return NULL;
}

struct sh_buf *
sh_buf_wrap(void *data, size_t cap, sh_buf_release_cb release, void *arg)
{
	struct sh_buf *b = sh_malloc(sizeof(*b));

	if (b == NULL)
		return NULL;
	atomic_init(&b->ref, 1);
	b->flags = 0;
	b->cap = cap;
	b->data = data;
	b->release = release;
	b->release_arg = arg;
	return b;
}

void
sh_buf_put(struct sh_buf *b)
{
	if (b == NULL)
		return;
	if (atomic_fetch_sub_explicit(&b->ref, 1, memory_order_acq_rel) != 1)
		return;
	if (b->flags & BUF_OWNED)
		sh_free(b->data);
	else if (b->release != NULL)
		b->release(b->release_arg, b->data);
	sh_free(b);
}

void
sh_iov_init(struct sh_iov *v)
{
	v->seg = v->inl;
	v->n = 0;
	v->cap = SH_IOV_INLINE;
	v->len = 0;
}

void
sh_iov_fini(struct sh_iov *v)
{
	for (uint32_t i = 0; i < v->n; i++)
		sh_buf_put(v->seg[i].buf);
	if (v->seg != v->inl)
		sh_free(v->seg);
	sh_iov_init(v);
}

static int
reserve(struct sh_iov *v)
{
	struct sh_iov_seg *s;
	uint32_t cap;

	if (v->n < v->cap)
		return 0;
	cap = v->cap * 2;
	s = sh_alloc_array(cap, sizeof(*s));
	if (s == NULL)
		return -ENOMEM;
	memcpy(s, v->seg, v->n * sizeof(*s));
	if (v->seg != v->inl)
		sh_free(v->seg);
	v->seg = s;
	v->cap = cap;
	return 0;
}

int
sh_iov_append(struct sh_iov *v, struct sh_buf *buf, size_t off, size_t len)
{
	int rc;

	if (buf == NULL || off > buf->cap || len > buf->cap - off)
		return -EINVAL;
	if (len == 0)
		return 0;
	rc = reserve(v);
	if (rc < 0)
		return rc;
	v->seg[v->n].buf = sh_buf_get(buf);
	v->seg[v->n].off = off;
	v->seg[v->n].len = len;
	v->n++;
	v->len += len;
	return 0;
}

int
sh_iov_append_range(struct sh_iov *v, const struct sh_iov *src, size_t off, size_t len)
{
	int rc;

	if (off > src->len || len > src->len - off)
		return -EINVAL;
	for (uint32_t i = 0; i < src->n && len > 0; i++) {
		const struct sh_iov_seg *s = &src->seg[i];
		size_t take;

		if (off >= s->len) {
			off -= s->len;
			continue;
		}
		take = SH_MIN(s->len - off, len);
		rc = sh_iov_append(v, s->buf, s->off + off, take);
		if (rc < 0)
			return rc;
		len -= take;
		off = 0;
	}
	return 0;
}

unsigned
sh_iov_range_iovec(const struct sh_iov *v, size_t off, size_t len, struct iovec *out, unsigned max)
{
	return sh_iov_range_bufs(v, off, len, out, NULL, max);
}

unsigned
sh_iov_range_bufs(const struct sh_iov *v, size_t off, size_t len, struct iovec *out,
		  struct sh_buf **bufs, unsigned max)
{
	unsigned n = 0;

	for (uint32_t i = 0; i < v->n && len > 0 && n < max; i++) {
		const struct sh_iov_seg *s = &v->seg[i];
		size_t take;

		if (off >= s->len) {
			off -= s->len;
			continue;
		}
		take = SH_MIN(s->len - off, len);
		if (bufs != NULL)
			bufs[n] = s->buf;
		out[n++] = (struct iovec){ s->buf->data + s->off + off, take };
		len -= take;
		off = 0;
	}
	return n;
}

size_t
sh_iov_copyout(const struct sh_iov *v, size_t off, void *dst, size_t len)
{
	struct iovec part[16];
	unsigned char *d = dst;
	size_t done = 0;

	while (done < len) {
		unsigned n =
		    sh_iov_range_iovec(v, off + done, len - done, part, SH_ARRAY_SIZE(part));

		if (n == 0)
			break;
		for (unsigned i = 0; i < n; i++) {
			memcpy(d + done, part[i].iov_base, part[i].iov_len);
			done += part[i].iov_len;
		}
	}
	return done;
}

int
sh_iov_to_iovec(const struct sh_iov *v, struct iovec *out, int max)
{
	if (max < 0 || v->n > (uint32_t)max)
		return -E2BIG;
	for (uint32_t i = 0; i < v->n; i++) {
		out[i].iov_base = v->seg[i].buf->data + v->seg[i].off;
		out[i].iov_len = v->seg[i].len;
	}
	return (int)v->n;
}

uint32_t
sh_iov_crc32c(const struct sh_iov *v, uint32_t crc)
{
	for (uint32_t i = 0; i < v->n; i++)
		crc = sh_crc32c(crc, v->seg[i].buf->data + v->seg[i].off, v->seg[i].len);
	return crc;
}
