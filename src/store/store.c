// SPDX-License-Identifier: Apache-2.0
/*
 * A drive target: format, the append pipeline with group commit,
 * releases, the index. Reads (per-block crc checks) and statistics are in
 * store_read.c, recovery at open in recover.c, cleaning and scrub in
 * clean.c; docs/ondisk.md has the format and the crash invariants.
 *
 * Append pipeline:
 *
 *   pending ops --pump--> batch (one write: [seg hdr] rec hdr, payload, ...)
 *     --write done--> written --fsync over every written batch from the
 *     head--> durable: index updated, callbacks (in log order)
 *
 * Invariants:
 *   - batches are acknowledged in log order and only once an fsync that
 *     started after their write completed has completed: an acknowledged
 *     record never follows a hole in its segment;
 *   - every record header says which records were durable when it was
 *     built (durable_wseq): recovery checks only the payloads after that;
 *   - a segment is reused only when none of its records is live, no read
 *     is in flight on it and the moves out of it are durable.
 */
#include <errno.h>
#include <string.h>

#include "../base/fault.h"
#include "store_int.h"
#include "store_proto.h"

SH_LOG_FACILITY("store");

#define SEG_BASE (1u << 20) /* segments start at 1 MiB: room for the superblocks */

static inline uint32_t
seg_blocks(const struct store *s)
{
	return s->sb.seg_size / STORE_BLOCK;
}

uint64_t
store_seg_off(const struct store *s, uint32_t seg, uint32_t blk)
{
	return s->sb.seg_base + (uint64_t)seg * s->sb.seg_size + (uint64_t)blk * STORE_BLOCK;
}

uint64_t
store_target_id(const struct store *s)
{
	return s->sb.target_id;
}

uint64_t
store_epoch(const struct store *s)
{
	return s->next_epoch;
}

unsigned
store_list(struct store *s, uint64_t before, uint32_t *cursor, struct store_key *out, unsigned max)
{
	unsigned n = 0;
	uint32_t i = *cursor;

	for (; i < s->sb.nsegs; i++) {
		struct sh_list *pos;
		unsigned here = 0;

		sh_list_for_each (pos, &s->segs[i].frags)
			here++;
		if (n > 0 && n + here > max)
			break; /* whole segments only: the next call starts with this one */
		sh_list_for_each (pos, &s->segs[i].frags) {
			struct store_frag *f = sh_list_entry(pos, struct store_frag, seglink);

			if (f->epoch < before && n < max)
				out[n++] = (struct store_key){ .stripe = f->stripe, .idx = f->idx };
		}
	}
	*cursor = i < s->sb.nsegs ? i : 0;
	return n;
}

/* ---- index ---- */

struct frag_key {
	uint64_t stripe;
	uint32_t idx;
};

static uint64_t
key_hash(uint64_t stripe, uint32_t idx)
{
	return sh_hash_u64(stripe * 0x9E3779B97F4A7C15ULL + idx);
}

static bool
frag_eq(const struct sh_hnode *h, const void *key)
{
	const struct store_frag *f = sh_container_of(h, struct store_frag, hn);
	const struct frag_key *k = key;

	return f->stripe == k->stripe && f->idx == k->idx;
}

struct store_frag *
store_frag_find(struct store *s, uint64_t stripe, uint32_t idx)
{
	struct frag_key k = { stripe, idx };
	struct sh_hnode *h = sh_htable_find(&s->index, key_hash(stripe, idx), &k, frag_eq);

	return h ? sh_container_of(h, struct store_frag, hn) : NULL;
}

static void
frag_unlink(struct store *s, struct store_frag *f)
{
	s->segs[f->seg].live -= 1 + store_blocks(f->len);
	sh_list_del(&f->seglink);
	store_clean_seg_maybe_free(s, f->seg);
}

static void
frag_link(struct store *s, struct store_frag *f)
{
	struct store_seg *g = &s->segs[f->seg];

	g->live += 1 + store_blocks(f->len);
	sh_list_add_tail(&g->frags, &f->seglink);
}

static void
frag_free(struct store *s, struct store_frag *f)
{
	sh_htable_remove(&s->index, &f->hn);
	s->st.fragments--;
	sh_free(f->bcrc);
	sh_free(f);
}

struct store_frag *
store_frag_insert(struct store *s, uint64_t stripe, uint32_t idx)
{
	struct store_frag *f = sh_calloc(1, sizeof(*f));

	if (f == NULL)
		return NULL;
	f->stripe = stripe;
	f->idx = idx;
	sh_list_init(&f->seglink);
	sh_htable_insert(&s->index, &f->hn, key_hash(stripe, idx));
	s->st.fragments++;
	return f;
}

/* Drop f from the index (and from its segment, if placed). */
void
store_frag_remove(struct store *s, struct store_frag *f)
{
	if (!sh_list_empty(&f->seglink))
		frag_unlink(s, f);
	frag_free(s, f);
}

void
store_frag_place(struct store *s, struct store_frag *f)
{
	frag_link(s, f);
}

void
store_tomb_add(struct store *s, uint64_t stripe, uint32_t idx, uint64_t epoch, uint32_t seg,
	       uint32_t blk)
{
	struct store_tomb *t = sh_calloc(1, sizeof(*t));

	if (t == NULL)
		return; /* out of memory: untracked, so cleaning may drop the record early */
	t->stripe = stripe;
	t->idx = idx;
	t->epoch = epoch;
	t->seg = seg;
	t->blk = blk;
	sh_list_add_tail(&s->segs[seg].tombs, &t->seglink);
	s->segs[seg].live++;
	s->st.tombstones++;
}

/* ---- operations ---- */

#define POOL_MAX_BYTES (64u << 20)

void *
store_buf_get(struct store *s, uint32_t nb)
{
	void *b = s->pool != NULL ? s->pool[nb] : NULL;

	if (b == NULL)
		return sh_aligned_alloc(STORE_BLOCK, (size_t)nb * STORE_BLOCK);
	memcpy(&s->pool[nb], b, sizeof(void *));
	s->pool_bytes -= (uint64_t)nb * STORE_BLOCK;
	return b;
}

void
store_buf_put(struct store *s, void *b, uint32_t nb)
{
	if (b == NULL)
		return;
	if (s->pool == NULL || s->pool_bytes + (uint64_t)nb * STORE_BLOCK > POOL_MAX_BYTES) {
		sh_free(b);
		return;
	}
	memcpy(b, &s->pool[nb], sizeof(void *));
	s->pool[nb] = b;
	s->pool_bytes += (uint64_t)nb * STORE_BLOCK;
}

static void
pool_fini(struct store *s)
{
	for (uint32_t nb = 0; s->pool != NULL && nb <= STORE_MAX_BLOCKS; nb++) {
		while (s->pool[nb] != NULL) {
			void *b = s->pool[nb];

			memcpy(&s->pool[nb], b, sizeof(void *));
			sh_free(b);
		}
	}
	sh_free(s->pool);
	s->pool = NULL;
}

struct store_op *
store_op_new(struct store *s, enum op_type type, uint32_t len, const void *ref)
{
	struct store_op *op = sh_calloc(1, sizeof(*op));
	uint32_t nb = store_blocks(len);

	if (op == NULL)
		return NULL;
	op->s = s;
	op->type = type;
	op->len = len;
	op->data_ref = ref != NULL;
	if (nb > 0) {
		op->data = ref ? (uint8_t *)ref : store_buf_get(s, nb);
		op->bcrc = sh_alloc_array(nb, sizeof(uint32_t));
		if (op->data == NULL || op->bcrc == NULL) {
			store_op_free(op);
			return NULL;
		}
	}
	return op;
}

void
store_op_free(struct store_op *op)
{
	if (!op->data_ref)
		store_buf_put(op->s, op->data, store_blocks(op->len));
	sh_free(op->bcrc);
	sh_free(op);
}

static uint32_t
op_blocks(const struct store_op *op)
{
	return 1 + store_blocks(op->len);
}

static void
op_finish(struct store *s, struct store_op *op, int rc)
{
	(void)s;
	if (op->cb != NULL)
		op->cb(op->arg, rc);
	store_op_free(op);
}

/* The target cannot write any more: everything waiting fails, reads go on. */
static void
store_fail(struct store *s, int rc)
{
	struct sh_list *pos;

	if (s->state != ST_FAILED)
		sh_log_error("target %llx: write path failed (%s): no more writes",
			     (unsigned long long)s->sb.target_id, sh_strerror(rc));
	s->state = ST_FAILED;
	s->st.failed = 1;
	while ((pos = sh_list_pop(&s->pending)) != NULL)
		op_finish(s, sh_list_entry(pos, struct store_op, link), -EIO);
}

static void pump_task(struct env_task *t);
static void ack_durable(struct store *s);
static void batch_written(struct env_disk_req *r, int rc);
static void fsync_done(struct env_disk_req *r, int rc);

/* Take the lowest free segment; only moves and tombstones may take the reserve. */
static int
take_segment(struct store *s, bool use_reserve)
{
	uint32_t best = UINT32_MAX;

	if (!use_reserve && s->free_segs <= s->o.reserve_segs)
		return -ENOSPC;
	for (uint32_t i = 0; i < s->sb.nsegs; i++) {
		if (s->segs[i].state == SEG_FREE) {
			best = i;
			break;
		}
	}
	if (best == UINT32_MAX)
		return -ENOSPC;
	sh_log_trace("segment %u open", best);
	s->segs[best].state = SEG_OPEN;
	s->segs[best].seq = s->next_seg_seq++;
	s->segs[best].used = 0;
	s->segs[best].live = 0;
	/* min_epoch stays until the new header is durable: till then recovery may find the old log
	 */
	s->segs[best].hdr_pending = true;
	s->free_segs--;
	return (int)best;
}

/*
 * Move on to the next segment: the one opened ahead if there is one (its
 * header is written or on its way), a free one otherwise (its header is
 * the next write).
 */
static int
open_segment(struct store *s, bool use_reserve)
{
	int seg = s->next_seg;

	if (seg < 0) {
		seg = take_segment(s, use_reserve);
		if (seg < 0)
			return seg;
	}
	if (s->open_seg >= 0)
		s->segs[s->open_seg].state = SEG_SEALED;
	s->open_seg = seg;
	s->wptr = s->segs[seg].used;
	s->next_seg = -1;
	if (s->segs[seg].hdr_pending)
		s->st.hdr_waits++; /* its records wait for the header */
	return 0;
}

/* Blocks the pending operations could still take without touching the reserve. */
static uint64_t
room_blocks(const struct store *s, bool use_reserve)
{
	uint64_t room = 0;
	uint32_t spare = s->free_segs;

	if (s->open_seg >= 0)
		room += seg_blocks(s) - s->wptr;
	if (s->next_seg >= 0)
		room += seg_blocks(s) - 1;
	if (!use_reserve)
		spare = spare > s->o.reserve_segs ? spare - s->o.reserve_segs : 0;
	return room + (uint64_t)spare * (seg_blocks(s) - 1);
}

static void
encode_record(struct store *s, struct store_op *op, uint8_t *block)
{
	struct store_rec_df rh = { 0 };

	rh.type = op->type == OP_TOMB || op->type == OP_MOVE_TOMB ? STORE_REC_TOMB : STORE_REC_FRAG;
	rh.seg_seq = s->segs[op->seg].seq;
	rh.stripe = op->stripe;
	rh.idx = op->idx;
	rh.len = rh.type == STORE_REC_FRAG ? op->len : 0;
	rh.epoch = op->epoch;
	rh.wseq = op->wseq;
	rh.durable_wseq = s->durable_wseq;
	rh.killed_epoch = rh.type == STORE_REC_TOMB ? op->epoch - 1 : 0;
	rh.payload_crc = op->payload_crc;
	rh.nblocks = store_blocks(rh.len);
	store_rec_encode(&rh, op->bcrc, block);
}

/* Submit a batch of b->nblocks blocks at (b->seg, b->blk) from iov; it is in the log from now on.
 */
static void
submit_batch(struct store *s, struct store_batch *b, struct iovec *iov, unsigned niov)
{
	int rc;

	b->dsync = !s->o.sync_by_fsync || s->o.unsafe_ack_before_durable;
	b->req = (struct env_disk_req){ .op = b->dsync && !s->o.unsafe_ack_before_durable
						  ? ENV_DISK_WRITE_DSYNC
						  : ENV_DISK_WRITE,
					.off = store_seg_off(s, b->seg, b->blk),
					.iov = iov,
					.iovcnt = niov,
					.cb = batch_written,
					.arg = b };
	b->seq = ++s->batch_seq;
	sh_list_add_tail(&s->batches, &b->link);
	s->segs[b->seg].unacked++;
	s->writes_inflight++;
	s->st.batches++;
	rc = env_disk_submit(s->disk, &b->req);
	if (rc < 0) {
		s->writes_inflight--;
		sh_log_error("target %llx: write submit: %s", (unsigned long long)s->sb.target_id,
			     sh_strerror(rc));
		batch_written(&b->req, rc);
	}
}

/*
 * Write the header of a segment just taken, alone. It goes out alone and
 * must be durable before any record follows: a reused segment still holds
 * its old log, and a crash that kept some new records but not the new
 * header would bring the old log back.
 */
static int
write_header(struct store *s, uint32_t seg)
{
	struct store_seg_df sh = { .seg = seg,
				   .seq = s->segs[seg].seq,
				   .wseq = s->next_wseq,
				   .target_id = s->sb.target_id };
	struct store_batch *b = sh_calloc(1, sizeof(*b));
	struct iovec *iov = sh_alloc_array(1, sizeof(*iov));
	uint8_t *buf = sh_aligned_alloc(STORE_BLOCK, STORE_BLOCK);

	if (b == NULL || iov == NULL || buf == NULL) {
		sh_free(buf);
		sh_free(iov);
		sh_free(b);
		return -ENOMEM;
	}
	sh_list_init(&b->ops);
	b->buf = buf;
	b->s = s;
	b->seg = seg;
	b->blk = 0;
	b->nblocks = 1;
	b->hdr_only = true;
	iov[0] = (struct iovec){ b->buf, STORE_BLOCK };
	store_seg_encode(&sh, b->buf);
	s->segs[seg].used = 1;
	submit_batch(s, b, iov, 1);
	return 0;
}

/*
 * Open the next segment while the records of this one are being written,
 * so that its header is durable by the time this one is full and the
 * appends do not wait a round trip for it at each segment. Never from the
 * reserve: appends fall back to opening one when they need it.
 */
static void
open_ahead(struct store *s)
{
	int seg;

	if (s->next_seg >= 0 || s->open_seg < 0 || s->segs[s->open_seg].hdr_pending || s->wptr <= 1)
		return;
	seg = take_segment(s, false);
	if (seg < 0)
		return;
	s->next_seg = seg;
	if (write_header(s, (uint32_t)seg) < 0)
		s->segs[seg].used = 0; /* written when it is opened */
}

/* Form one batch from the head of the pending queue and write it. */
static int
write_batch(struct store *s)
{
	struct store_op *op = sh_list_entry(s->pending.next, struct store_op, link);
	struct store_batch *b;
	uint32_t hdrs = 0, max_blocks, start;
	struct sh_list *pos;
	struct iovec *iov;
	unsigned niov = 0;

	if (s->open_seg < 0 || s->wptr + op_blocks(op) > seg_blocks(s)) {
		int rc = open_segment(s, op->type != OP_APPEND);

		if (rc < 0)
			return rc;
	}
	if (s->wptr == 0) {
		int rc = write_header(s, (uint32_t)s->open_seg);

		if (rc == 0)
			s->wptr = 1;
		return rc;
	}
	if (s->segs[s->open_seg].hdr_pending)
		return -EAGAIN;
	start = s->wptr;
	max_blocks = SH_MIN(seg_blocks(s) - s->wptr, s->o.batch_max / STORE_BLOCK);
	b = sh_calloc(1, sizeof(*b));
	if (b == NULL)
		return -ENOMEM;
	sh_list_init(&b->ops);
	b->s = s;
	b->seg = (uint32_t)s->open_seg;
	b->blk = start;
	/* take ops while they fit (and while iovecs last: header + payload per op) */
	while ((pos = s->pending.next) != &s->pending) {
		op = sh_list_entry(pos, struct store_op, link);
		if (b->nblocks + op_blocks(op) > max_blocks && !sh_list_empty(&b->ops))
			break;
		if (b->nblocks + op_blocks(op) > seg_blocks(s) - start)
			break;
		if (2 * (hdrs + 1) > ENV_DISK_IOV_MAX)
			break;
		sh_list_del(pos);
		sh_list_add_tail(&b->ops, pos);
		op->seg = b->seg;
		op->blk = start + b->nblocks;
		op->wseq = s->next_wseq++;
		if (s->segs[b->seg].min_epoch == 0 || op->epoch < s->segs[b->seg].min_epoch)
			s->segs[b->seg].min_epoch = op->epoch;
		b->max_wseq = op->wseq;
		b->nblocks += op_blocks(op);
		hdrs++;
	}
	b->buf = sh_aligned_alloc(STORE_BLOCK, (size_t)hdrs * STORE_BLOCK);
	iov = sh_alloc_array(2 * hdrs, sizeof(*iov));
	if (b->buf == NULL || iov == NULL) {
		/* put the ops back, in order */
		while ((pos = b->ops.prev) != &b->ops) {
			sh_list_del(pos);
			sh_list_add(&s->pending, pos);
			s->next_wseq--;
		}
		sh_free(iov);
		sh_free(b->buf);
		sh_free(b);
		return -ENOMEM;
	}
	hdrs = 0;
	sh_list_for_each (pos, &b->ops) {
		uint8_t *hdr = b->buf + (size_t)hdrs++ * STORE_BLOCK;

		op = sh_list_entry(pos, struct store_op, link);
		encode_record(s, op, hdr);
		iov[niov++] = (struct iovec){ hdr, STORE_BLOCK };
		if (store_blocks(op->len) > 0 && op->type != OP_TOMB && op->type != OP_MOVE_TOMB)
			iov[niov++] =
			    (struct iovec){ op->data, (size_t)store_blocks(op->len) * STORE_BLOCK };
	}
	s->wptr += b->nblocks;
	s->segs[b->seg].used = s->wptr;
	submit_batch(s, b, iov, niov);
	if (s->state == ST_READY)
		open_ahead(s);
	return 0;
}

void
store_pump(struct store *s)
{
	while (s->state == ST_READY && !sh_list_empty(&s->pending) &&
	       s->writes_inflight < s->o.writes_max) {
		int rc = write_batch(s);

		if (rc == -ENOSPC) {
			/* only cleaning's moves may use the reserve; it was accounted at submit */
			struct store_op *op =
			    sh_list_entry(sh_list_pop(&s->pending), struct store_op, link);

			sh_log_warn("target %llx: no free segment",
				    (unsigned long long)s->sb.target_id);
			op_finish(s, op, -ENOSPC);
			continue;
		}
		if (rc == -EAGAIN)
			break; /* a segment header must be durable first */
		if (rc < 0) {
			env_post(&s->pump_task); /* out of memory: try again next turn */
			break;
		}
	}
}

static void
pump_task(struct env_task *t)
{
	store_pump(t->arg);
}

int
store_queue_op(struct store *s, struct store_op *op)
{
	/* moves and tombstones may use the reserve: they are how space comes back */
	bool reserve = op->type != OP_APPEND;
	uint64_t queued = 0;
	struct sh_list *pos;

	if (s->state != ST_READY)
		return s->state == ST_FAILED ? -EIO : -EAGAIN;
	sh_list_for_each (pos, &s->pending)
		queued += op_blocks(sh_list_entry(pos, struct store_op, link));
	/* the next segment header too */
	if (queued + op_blocks(op) + 1 > room_blocks(s, reserve))
		return -ENOSPC;
	if (op->type == OP_MOVE_FRAG || op->type == OP_MOVE_TOMB)
		sh_list_add(&s->pending, &op->link); /* moves first: they free space */
	else
		sh_list_add_tail(&s->pending, &op->link);
	env_post(&s->pump_task);
	return 0;
}

/*
 * Start an fsync for the written prefix of the batch queue, if it grew
 * since the last one. Several may be in flight: the device flushes while
 * more batches land, and whichever completes acknowledges what it covers,
 * so a batch waits for about one flush, not two.
 */
static void
sync_pump(struct store *s)
{
	struct store_batch *last = NULL;
	struct store_fsync *f = NULL;
	struct sh_list *pos;
	int rc;

	if (s->state == ST_FAILED)
		return;
	for (unsigned i = 0; i < STORE_FSYNCS && f == NULL; i++)
		if (!s->fsyncs[i].busy)
			f = &s->fsyncs[i];
	if (f == NULL)
		return;
	sh_list_for_each (pos, &s->batches) {
		struct store_batch *b = sh_list_entry(pos, struct store_batch, link);

		if (!b->written)
			break;
		last = b;
	}
	if (last == NULL || last->seq <= s->synced_upto)
		return;
	s->synced_upto = last->seq;
	f->busy = true;
	f->s = s;
	f->upto = last->seq;
	f->req = (struct env_disk_req){ .op = ENV_DISK_FSYNC, .cb = fsync_done, .arg = f };
	s->st.fsyncs++;
	rc = env_disk_submit(s->disk, &f->req);
	if (rc < 0) {
		f->busy = false;
		store_fail(s, rc);
	}
}

static void
batch_written(struct env_disk_req *r, int rc)
{
	struct store_batch *b = r->arg;
	struct store *s = b->s;

	sh_free(r->iov);
	r->iov = NULL;
	s->writes_inflight--;
	if (rc >= 0 && SH_FAULT(FP_STORE_WRITE_EIO))
		rc = -EIO;
	if (rc < 0) {
		store_fail(s, rc);
		/* the batch and everything after it never become durable */
		while (!sh_list_empty(&s->batches)) {
			struct store_batch *x =
			    sh_list_entry(s->batches.prev, struct store_batch, link);
			struct sh_list *pos;

			if (!x->written && x != b)
				break; /* still being written: it fails when it completes */
			sh_list_del(&x->link);
			s->segs[x->seg].unacked--;
			while ((pos = sh_list_pop(&x->ops)) != NULL)
				op_finish(s, sh_list_entry(pos, struct store_op, link), -EIO);
			sh_free(x->buf);
			sh_free(x);
			if (x == b)
				break;
		}
		return;
	}
	b->written = true;
	if (b->dsync) {
		b->durable = true; /* a DSYNC write: durable as it completes */
		ack_durable(s);
		return;
	}
	sync_pump(s);
	store_pump(s);
}

/* A durable record: make it visible. */
static void
apply(struct store *s, struct store_op *op)
{
	struct store_frag *f = store_frag_find(s, op->stripe, op->idx);

	switch (op->type) {
	case OP_APPEND:
		if (f != NULL && f->epoch > op->epoch)
			break; /* a newer version got there first */
		if (f == NULL) {
			f = store_frag_insert(s, op->stripe, op->idx);
			if (f == NULL)
				break; /* the record is on disk; recovery would find it */
		} else {
			frag_unlink(s, f);
			sh_free(f->bcrc);
		}
		f->len = op->len;
		f->epoch = op->epoch;
		f->seg = op->seg;
		f->blk = op->blk;
		f->payload_crc = op->payload_crc;
		sh_log_trace("append %llx/%u epoch %llu at %u:%u", (unsigned long long)op->stripe,
			     op->idx, (unsigned long long)op->epoch, op->seg, op->blk);
		f->corrupt = false;
		f->moving = false; /* a move of the older version, if any, ends up as garbage */
		f->bcrc = op->bcrc;
		op->bcrc = NULL;
		frag_link(s, f);
		s->st.appends++;
		s->st.bytes_appended += op->len;
		break;
	case OP_TOMB:
		if (f != NULL && f->epoch < op->epoch)
			store_frag_remove(s, f);
		s->st.releases++;
		store_tomb_add(s, op->stripe, op->idx, op->epoch, op->seg, op->blk);
		break;
	case OP_MOVE_FRAG:
	case OP_MOVE_TOMB:
		store_clean_op_done(s, op);
		break;
	}
}

static void
fsync_done(struct env_disk_req *r, int rc)
{
	struct store_fsync *f = r->arg;
	struct store *s = f->s;
	struct sh_list *pos;

	f->busy = false;
	if (rc < 0) {
		store_fail(s, rc);
		return;
	}
	/* everything up to f->upto is durable (an earlier fsync may have covered some) */
	sh_list_for_each (pos, &s->batches) {
		struct store_batch *b = sh_list_entry(pos, struct store_batch, link);

		if (b->seq > f->upto)
			break;
		b->durable = true;
	}
	ack_durable(s);
}

/* Acknowledge the durable batches at the head of the log, in order. */
static void
ack_durable(struct store *s)
{
	struct sh_list *pos;

	while ((pos = s->batches.next) != &s->batches) {
		struct store_batch *b = sh_list_entry(pos, struct store_batch, link);
		struct sh_list *opos;

		if (!b->durable)
			break;
		sh_list_del(pos);
		s->segs[b->seg].unacked--;
		if (b->hdr_only) {
			/* the old log of this segment is gone for good */
			s->segs[b->seg].hdr_pending = false;
			s->segs[b->seg].min_epoch = 0;
		}
		if (b->max_wseq > s->durable_wseq)
			s->durable_wseq = b->max_wseq;
		while ((opos = sh_list_pop(&b->ops)) != NULL) {
			struct store_op *op = sh_list_entry(opos, struct store_op, link);

			apply(s, op);
			op_finish(s, op, 0);
		}
		sh_free(b->buf);
		sh_free(b);
	}
	sync_pump(s);
	store_pump(s);
	store_clean_maybe(s);
}

/* ---- public operations ---- */

/* A new version of (stripe, idx), a fragment or a tombstone: the next epoch, queued. */
static int
queue_new_version(struct store *s, struct store_op *op, uint64_t stripe, uint32_t idx, store_cb cb,
		  void *arg)
{
	int rc;

	op->stripe = stripe;
	op->idx = idx;
	op->epoch = s->next_epoch;
	op->cb = cb;
	op->arg = arg;
	rc = store_queue_op(s, op);
	if (rc < 0) {
		store_op_free(op);
		return rc;
	}
	s->next_epoch++;
	return 0;
}

/* Block i's crc; a whole block's is folded into the payload's crc (no second pass over it). */
static void
crc_block(struct store_op *op, uint32_t i, bool whole)
{
	op->bcrc[i] = sh_crc32c(0, op->data + (size_t)i * STORE_BLOCK, STORE_BLOCK);
	if (whole)
		op->payload_crc =
		    i == 0 ? op->bcrc[0]
			   : sh_crc32c_combine(op->payload_crc, op->bcrc[i], STORE_BLOCK);
}

int
store_append_ref(struct store *s, uint64_t stripe, uint32_t idx, const void *data, uint32_t len,
		 store_cb cb, void *arg)
{
	struct store_op *op;
	uint32_t nb = store_blocks(len);

	if ((uintptr_t)data % STORE_BLOCK != 0 || len % STORE_BLOCK != 0)
		return store_append(s, stripe, idx, data, len, cb, arg);
	if (len == 0 || len > STORE_MAX_FRAG || data == NULL || cb == NULL)
		return -EINVAL;
	op = store_op_new(s, OP_APPEND, len, data); /* the caller keeps data until cb */
	if (op == NULL)
		return -ENOMEM;
	for (uint32_t i = 0; i < nb; i++)
		crc_block(op, i, true);
	return queue_new_version(s, op, stripe, idx, cb, arg);
}

int
store_append(struct store *s, uint64_t stripe, uint32_t idx, const void *data, uint32_t len,
	     store_cb cb, void *arg)
{
	struct store_op *op;
	uint32_t nb = store_blocks(len);
	int rc;

	if (len == 0 || len > STORE_MAX_FRAG || data == NULL || cb == NULL)
		return -EINVAL;
	op = store_op_new(s, OP_APPEND, len, NULL);
	if (op == NULL)
		return -ENOMEM;
	/*
	 * One pass: each block is copied and checksummed while it is in the
	 * cache; a partial last block is padded with zeros and the payload's
	 * crc takes its own bytes only.
	 */
	for (uint32_t i = 0; i < nb; i++) {
		const uint8_t *src = (const uint8_t *)data + (size_t)i * STORE_BLOCK;
		uint8_t *dst = op->data + (size_t)i * STORE_BLOCK;
		uint32_t n = SH_MIN(STORE_BLOCK, len - i * STORE_BLOCK);

		memcpy(dst, src, n);
		if (n < STORE_BLOCK) {
			memset(dst + n, 0, STORE_BLOCK - n);
			op->payload_crc = sh_crc32c(op->payload_crc, src, n);
		}
		crc_block(op, i, n == STORE_BLOCK);
	}
	rc = queue_new_version(s, op, stripe, idx, cb, arg);
	if (rc == 0)
		s->st.appends_copied++;
	return rc;
}

int
store_release(struct store *s, uint64_t stripe, uint32_t idx, store_cb cb, void *arg)
{
	struct store_op *op;

	if (cb == NULL)
		return -EINVAL;
	if (store_frag_find(s, stripe, idx) == NULL)
		return -ENOENT;
	op = store_op_new(s, OP_TOMB, 0, NULL);
	if (op == NULL)
		return -ENOMEM;
	return queue_new_version(s, op, stripe, idx, cb, arg);
}

int64_t
store_frag_len(struct store *s, uint64_t stripe, uint32_t idx)
{
	struct store_frag *f = store_frag_find(s, stripe, idx);

	return f ? (int64_t)f->len : -ENOENT;
}

/* ---- format, open, close ---- */

struct format_ctx {
	struct env_disk *disk;
	struct env_disk_req req;
	struct iovec iov;
	uint8_t *buf;
	int step;
	store_cb cb;
	void *arg;
};

static void
format_step(struct env_disk_req *r, int rc)
{
	struct format_ctx *x = r->arg;

	if (rc >= 0 && x->step == 0) {
		x->step = 1;
		x->req = (struct env_disk_req){ .op = ENV_DISK_FSYNC, .cb = format_step, .arg = x };
		rc = env_disk_submit(x->disk, &x->req);
		if (rc == 0)
			return;
	}
	env_disk_close(x->disk);
	x->cb(x->arg, rc < 0 ? rc : 0);
	sh_free(x->buf);
	sh_free(x);
}

/*
 * 16 MiB segments on a drive that holds at least 64 of them, 4 MiB on a
 * smaller one (tests, small local clusters), where the reserve and the
 * cleaning threshold would otherwise take too much of it. Larger segments
 * mean fewer header writes (each a durable round trip the appends may
 * wait for) and fewer short batches at segment ends: bench/store appends
 * went from 0.90x to 0.94-0.99x fio with them (docs/performance.md).
 */
uint32_t
store_default_seg_size(uint64_t drive_size)
{
	return drive_size >= SEG_BASE + 64ull * (16u << 20) ? 16u << 20 : 4u << 20;
}

int
store_format(struct env *env, const char *path, uint64_t size, const struct store_format_opts *o,
	     store_cb cb, void *arg)
{
	struct store_sb_df sb = { 0 };
	struct format_ctx *x;
	uint32_t seg_size = o && o->seg_size ? o->seg_size : store_default_seg_size(size);
	unsigned flags = ENV_DISK_CREATE | (o && o->buffered ? 0 : ENV_DISK_DIRECT);
	int rc;

	if (cb == NULL || seg_size % STORE_BLOCK != 0 || seg_size < 16 * STORE_BLOCK)
		return -EINVAL;
	size -= size % STORE_BLOCK;
	if (size < SEG_BASE + 4ull * seg_size) {
		sh_log_warn("format %s: %llu bytes hold fewer than 4 segments of %u", path,
			    (unsigned long long)size, seg_size);
		return -ENOSPC;
	}
	x = sh_calloc(1, sizeof(*x));
	if (x == NULL)
		return -ENOMEM;
	x->buf = sh_aligned_alloc(STORE_BLOCK, 2 * STORE_BLOCK);
	if (x->buf == NULL) {
		sh_free(x);
		return -ENOMEM;
	}
	rc = env_disk_open(env, path, flags, size, &x->disk);
	if (rc < 0)
		goto out_free;
	if (o != NULL) {
		memcpy(sb.cluster_uuid, o->cluster_uuid, sizeof(sb.cluster_uuid));
		sb.target_id = o->target_id;
	}
	sb.size = size;
	sb.seg_base = SEG_BASE;
	sb.seg_size = seg_size;
	sb.nsegs = (uint32_t)SH_MIN((size - SEG_BASE) / seg_size, (uint64_t)UINT32_MAX);
	/* segment sequence numbers start here: no header of an older format can match */
	sb.created_ns = SH_MAX(env_realtime(env), 1);
	store_sb_encode(&sb, x->buf);
	memcpy(x->buf + STORE_BLOCK, x->buf, STORE_BLOCK);
	x->iov = (struct iovec){ x->buf, 2 * STORE_BLOCK };
	x->cb = cb;
	x->arg = arg;
	x->req = (struct env_disk_req){ .op = ENV_DISK_WRITE,
					.off = 0,
					.iov = &x->iov,
					.iovcnt = 1,
					.cb = format_step,
					.arg = x };
	rc = env_disk_submit(x->disk, &x->req);
	if (rc < 0)
		goto out_close;
	return 0;

out_close:
	env_disk_close(x->disk);
out_free:
	sh_free(x->buf);
	sh_free(x);
	return rc;
}

int
store_open(struct env *env, const char *path, const struct store_opts *o, struct store **out,
	   store_cb cb, void *arg)
{
	struct store *s;
	int rc;

	if (cb == NULL || out == NULL)
		return -EINVAL;
	s = sh_calloc(1, sizeof(*s));
	if (s == NULL)
		return -ENOMEM;
	s->env = env;
	if (o != NULL)
		s->o = *o;
	if (s->o.batch_max == 0)
		s->o.batch_max = 1u << 20;
	if (s->o.batch_max < 2 * STORE_BLOCK)
		s->o.batch_max = 2 * STORE_BLOCK;
	if (s->o.writes_max == 0)
		s->o.writes_max = 16;
	if (s->o.reserve_segs == 0)
		s->o.reserve_segs = STORE_PROTO_RESERVE_SEGS;
	if (s->o.clean_below == 0)
		s->o.clean_below = s->o.reserve_segs + 2;
	if (s->o.clean_moves == 0)
		s->o.clean_moves = 8;
	s->open_seg = -1;
	s->next_seg = -1;
	s->victim = -1;
	s->state = ST_OPENING;
	sh_list_init(&s->pending);
	sh_list_init(&s->batches);
	sh_list_init(&s->ios);
	sh_list_init(&s->clean_ios);
	env_task_init(env, &s->pump_task, pump_task, s);
	store_clean_init(s);
	s->pool = sh_alloc_array(STORE_MAX_BLOCKS + 1, sizeof(void *));
	s->open_cb = cb;
	s->open_arg = arg;
	rc = sh_htable_init(&s->index, 1024);
	if (rc < 0)
		goto out_free;
	rc = env_disk_open(env, path, o && o->buffered ? 0 : ENV_DISK_DIRECT, 0, &s->disk);
	if (rc < 0)
		goto out_index;
	rc = store_recover_start(s);
	if (rc < 0)
		goto out_disk;
	*out = s;
	return 0;

out_disk:
	env_disk_close(s->disk);
out_index:
	sh_htable_fini(&s->index);
out_free:
	pool_fini(s);
	sh_free(s);
	return rc;
}

void
store_close(struct store *s)
{
	struct sh_list *pos;
	struct sh_hnode *h, *next;
	size_t it;

	if (s == NULL)
		return;
	/* no disk callback runs after this: their memory can go below */
	env_disk_close(s->disk);
	env_task_cancel(&s->pump_task);
	env_task_cancel(&s->clean_task);
	store_recover_free(s);
	store_clean_fini(s);
	while ((pos = sh_list_pop(&s->pending)) != NULL)
		op_finish(s, sh_list_entry(pos, struct store_op, link), -ECANCELED);
	while ((pos = sh_list_pop(&s->batches)) != NULL) {
		struct store_batch *b = sh_list_entry(pos, struct store_batch, link);
		struct sh_list *opos;

		while ((opos = sh_list_pop(&b->ops)) != NULL)
			op_finish(s, sh_list_entry(opos, struct store_op, link), -ECANCELED);
		sh_free(b->req.iov);
		sh_free(b->buf);
		sh_free(b);
	}
	store_reads_cancel(s);
	for (h = sh_htable_first(&s->index, &it); h != NULL; h = next) {
		next = sh_htable_next(&s->index, &it, h);
		frag_free(s, sh_container_of(h, struct store_frag, hn));
	}
	for (uint32_t i = 0; s->segs != NULL && i < s->sb.nsegs; i++)
		while ((pos = sh_list_pop(&s->segs[i].tombs)) != NULL)
			sh_free(sh_list_entry(pos, struct store_tomb, seglink));
	sh_htable_fini(&s->index);
	pool_fini(s);
	sh_free(s->segs);
	sh_free(s);
}
