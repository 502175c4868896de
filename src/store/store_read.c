// SPDX-License-Identifier: Apache-2.0
/*
 * A drive target's reads, each block's crc checked, and its statistics
 * (store.h; docs/ondisk.md).
 */
#include <errno.h>
#include <string.h>

#include "../base/fault.h"
#include "store_int.h"

SH_LOG_FACILITY("store");

#define READ_INLINE_CRCS 8

struct store_read {
	struct sh_list link;
	struct store *s;
	struct env_disk_req req;
	struct iovec iov;
	uint8_t *buf; /* a bounce buffer, or dst itself when it is block-aligned */
	bool direct;
	uint64_t stripe, epoch;
	uint32_t idx, seg, b0, nb, skip, len;
	uint32_t *bcrc; /* copy: the fragment may move or go while we read */
	uint32_t bcrc_inl[READ_INLINE_CRCS];
	void *dst;
	store_cb cb;
	void *arg;
};

static void
read_free(struct store *s, struct store_read *rd)
{
	if (rd->bcrc != rd->bcrc_inl)
		sh_free(rd->bcrc);
	if (!rd->direct)
		store_buf_put(s, rd->buf, rd->nb);
	sh_free(rd);
}

/*
 * A direct read failed its crc check. The bytes went to the caller's
 * buffer, which the caller might have touched during the read, so the
 * disk is not blamed yet: read the same blocks again into a bounce buffer.
 */
static int
retry_bounced(struct store *s, struct store_read *rd)
{
	uint8_t *b = store_buf_get(s, rd->nb);

	if (b == NULL)
		return -ENOMEM;
	rd->direct = false;
	rd->buf = b;
	rd->iov = (struct iovec){ b, (size_t)rd->nb * STORE_BLOCK };
	rd->req.iov = &rd->iov;
	if (env_disk_submit(s->disk, &rd->req) < 0) {
		store_buf_put(s, b, rd->nb);
		rd->buf = rd->dst;
		rd->direct = true;
		return -EIO;
	}
	s->segs[rd->seg].readers++;
	sh_list_add_tail(&s->ios, &rd->link);
	return 0;
}

static void
read_done(struct env_disk_req *r, int rc)
{
	struct store_read *rd = r->arg;
	struct store *s = rd->s;

	sh_list_del(&rd->link);
	s->segs[rd->seg].readers--;
	if (rc >= 0 && SH_FAULT(FP_STORE_READ_EIO))
		rc = -EIO;
	if (rc < 0 && rc != -EBADMSG)
		s->st.read_errors++;
	if (rc >= 0) {
		for (uint32_t i = 0; i < rd->nb; i++) {
			if (sh_crc32c(0, rd->buf + (size_t)i * STORE_BLOCK, STORE_BLOCK) ==
			    rd->bcrc[i])
				continue;
			if (rd->direct && retry_bounced(s, rd) == 0)
				return; /* the caller's buffer may have changed under us: read again
					 */
			struct store_frag *f = store_frag_find(s, rd->stripe, rd->idx);

			sh_log_error("target %llx: fragment %llx/%u block %u: crc mismatch",
				     (unsigned long long)s->sb.target_id,
				     (unsigned long long)rd->stripe, rd->idx, rd->b0 + i);
			s->st.corrupt_blocks++;
			if (f != NULL && f->epoch == rd->epoch)
				f->corrupt = true;
			rc = -EBADMSG;
			break;
		}
	}
	if (rc >= 0) {
		if (!rd->direct)
			memcpy(rd->dst, rd->buf + rd->skip, rd->len);
		s->st.reads++;
		s->st.bytes_read += rd->len;
		rc = (int)rd->len;
	}
	store_clean_seg_maybe_free(s, rd->seg);
	rd->cb(rd->arg, rc);
	read_free(s, rd);
}

int
store_read(struct store *s, uint64_t stripe, uint32_t idx, uint64_t off, uint32_t len, void *dst,
	   store_cb cb, void *arg)
{
	struct store_frag *f = store_frag_find(s, stripe, idx);
	struct store_read *rd;
	int rc;

	if (cb == NULL || (len > 0 && dst == NULL) || len > STORE_MAX_FRAG)
		return -EINVAL;
	if (s->state == ST_OPENING)
		return -EAGAIN;
	if (f == NULL)
		return -ENOENT;
	if (off > f->len || len > f->len - off || len == 0)
		return len == 0 && off <= f->len ? -EINVAL : -ERANGE;
	if (f->corrupt)
		return -EBADMSG;
	rd = sh_calloc(1, sizeof(*rd));
	if (rd == NULL)
		return -ENOMEM;
	rd->s = s;
	rd->stripe = stripe;
	rd->idx = idx;
	rd->epoch = f->epoch;
	rd->seg = f->seg;
	rd->b0 = (uint32_t)(off / STORE_BLOCK);
	rd->nb = (uint32_t)((off + len - 1) / STORE_BLOCK) - rd->b0 + 1;
	rd->skip = (uint32_t)(off % STORE_BLOCK);
	rd->len = len;
	rd->dst = dst;
	rd->cb = cb;
	rd->arg = arg;
	/* whole, aligned blocks into an aligned buffer: read straight into it */
	rd->direct = rd->skip == 0 && len % STORE_BLOCK == 0 && (uintptr_t)dst % STORE_BLOCK == 0;
	rd->buf = rd->direct ? dst : store_buf_get(s, rd->nb);
	rd->bcrc =
	    rd->nb <= READ_INLINE_CRCS ? rd->bcrc_inl : sh_alloc_array(rd->nb, sizeof(uint32_t));
	if (rd->buf == NULL || rd->bcrc == NULL) {
		read_free(s, rd);
		return -ENOMEM;
	}
	/* the crcs of the blocks read (the fragment may move or go while we read) */
	memcpy(rd->bcrc, f->bcrc + rd->b0, rd->nb * sizeof(uint32_t));
	rd->iov = (struct iovec){ rd->buf, (size_t)rd->nb * STORE_BLOCK };
	rd->req = (struct env_disk_req){ .op = ENV_DISK_READ,
					 .off = store_seg_off(s, f->seg, f->blk + 1 + rd->b0),
					 .iov = &rd->iov,
					 .iovcnt = 1,
					 .cb = read_done,
					 .arg = rd };
	rc = env_disk_submit(s->disk, &rd->req);
	if (rc < 0) {
		read_free(s, rd);
		return rc;
	}
	s->segs[f->seg].readers++;
	sh_list_add_tail(&s->ios, &rd->link);
	return 0;
}

/* ---- stats ---- */

void
store_stats(struct store *s, struct store_stats *out)
{
	uint64_t used = 0, live = 0;

	for (uint32_t i = 0; i < s->sb.nsegs; i++) {
		if (s->segs[i].state == SEG_FREE)
			continue;
		used += s->segs[i].used;
		live += s->segs[i].live + (s->segs[i].used > 0); /* its header is not garbage */
	}
	*out = s->st;
	out->capacity = (uint64_t)s->sb.nsegs * s->sb.seg_size;
	out->used = used * STORE_BLOCK;
	out->live = live * STORE_BLOCK;
	out->garbage = out->used - out->live;
	out->segs = s->sb.nsegs;
	out->segs_free = s->free_segs;
}

void
store_reads_cancel(struct store *s)
{
	struct sh_list *pos;

	while ((pos = sh_list_pop(&s->ios)) != NULL) {
		struct store_read *rd = sh_list_entry(pos, struct store_read, link);

		rd->cb(rd->arg, -ECANCELED);
		read_free(s, rd);
	}
}
