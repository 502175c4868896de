// SPDX-License-Identifier: Apache-2.0
/*
 * Segment cleaning and scrub.
 *
 * Cleaning (one victim at a time, started when fewer than clean_below
 * segments are free, or by store_clean_kick): the sealed segment with the
 * most garbage becomes the victim; its live fragments are read (at most
 * clean_moves at once, so foreground I/O keeps its share) and appended
 * again with their original epochs, ahead of foreground appends and allowed
 * into the reserve; its tombstones are appended again only while an older
 * segment could still hold a version they kill. When the last move is
 * durable and no read is in flight on it, the victim is free.
 *
 *   SEALED --chosen--> CLEANING --moves durable, no readers--> FREE
 *
 * A moved copy keeps its epoch, so a release that lands during the move
 * still kills it; at acknowledgement the index follows the copy only if it
 * still points where the copy came from.
 */
#include <errno.h>
#include <string.h>

#include "store_int.h"

SH_LOG_FACILITY("store.clean");

struct clean_io {
	struct sh_list link;
	struct store *s;
	struct env_disk_req req;
	struct iovec iov;
	struct store_op *op; /* the move being prepared (its data is the read buffer) */
	uint32_t from_seg, from_blk;
	bool scrub;
	struct scrub *sc;
};

struct scrub {
	struct store *s;
	struct env_task done;
	struct env_timer pace; /* a paced scrub ahead of its rate waits on it */
	uint64_t *stripes;
	uint32_t *idxs;
	size_t n, next;
	unsigned inflight;
	int corrupt;
	uint64_t rate, bytes, t0; /* bytes/s (0: as fast as it goes), read so far, since */
	store_cb cb;
	void *arg;
};

static void clean_task(struct env_task *t);
static void clean_pump(struct store *s);

void
store_clean_seg_maybe_free(struct store *s, uint32_t seg)
{
	struct store_seg *g = &s->segs[seg];

	if (g->state != SEG_CLEANING || g->moves > 0 || g->readers > 0 || g->unacked > 0 ||
	    !sh_list_empty(&g->frags) || !sh_list_empty(&g->tombs))
		return;
	sh_log_trace("segment %u free", seg);
	g->state = SEG_FREE;
	g->used = 0;
	g->live = 0;
	/* min_epoch stays: the records are on disk until the segment is reopened */
	s->free_segs++;
	s->st.cleaned_segs++;
	if (s->victim == (int)seg)
		s->victim = -1;
	sh_log_debug("target %llx: segment %u cleaned", (unsigned long long)s->sb.target_id, seg);
	env_post(&s->clean_task);
}

/*
 * Could a segment other than the tombstone's still hold a version it
 * kills (a record, live or dead, with an older epoch)? Then recovery needs
 * the tombstone and it moves; otherwise it is dropped.
 */
static bool
tomb_needed(struct store *s, const struct store_tomb *t)
{
	for (uint32_t i = 0; i < s->sb.nsegs; i++) {
		const struct store_seg *g = &s->segs[i];

		/* FREE ones too: their old records are still there for recovery to find */
		if (i == t->seg)
			continue;
		if (g->min_epoch != 0 && g->min_epoch < t->epoch)
			return true;
	}
	return false;
}

static void
pick_victim(struct store *s)
{
	uint32_t best = UINT32_MAX, best_garbage = 0;

	for (uint32_t i = 0; i < s->sb.nsegs; i++) {
		const struct store_seg *g = &s->segs[i];
		/* the segment header is not garbage: cleaning cannot win it back */
		uint32_t garbage = g->used - SH_MIN(g->live + 1, g->used);

		if (g->state != SEG_SEALED || g->unacked > 0 || garbage <= best_garbage)
			continue;
		best = i;
		best_garbage = garbage;
	}
	if (best == UINT32_MAX)
		return;
	s->victim = (int)best;
	s->segs[best].state = SEG_CLEANING;
	sh_log_debug("target %llx: cleaning segment %u (%u of %u blocks garbage)",
		     (unsigned long long)s->sb.target_id, best, best_garbage, s->segs[best].used);
}

void
store_clean_maybe(struct store *s)
{
	if (s->state != ST_READY)
		return;
	if (s->victim < 0 && s->free_segs < s->o.clean_below)
		pick_victim(s);
	if (s->victim >= 0)
		clean_pump(s);
}

void
store_clean_kick(struct store *s)
{
	if (s->state != ST_READY)
		return;
	if (s->victim < 0)
		pick_victim(s);
	if (s->victim >= 0)
		clean_pump(s);
}

static void
clean_task(struct env_task *t)
{
	store_clean_maybe(t->arg);
}

void
store_clean_init(struct store *s)
{
	env_task_init(s->env, &s->clean_task, clean_task, s);
}

static void
move_read_done(struct env_disk_req *r, int rc)
{
	struct clean_io *io = r->arg;
	struct store *s = io->s;
	struct store_op *op = io->op;
	struct store_frag *f = store_frag_find(s, op->stripe, op->idx);
	uint32_t from = io->from_seg;
	struct store_seg *g = &s->segs[from];

	sh_list_del(&io->link);
	g->readers--;
	s->moves_inflight--;
	/* the fragment went (released, replaced) while we read: nothing to move */
	if (f == NULL || f->epoch != op->epoch || f->seg != io->from_seg ||
	    f->blk != io->from_blk) {
		g->moves--;
		store_op_free(op);
		goto out;
	}
	if (rc < 0) {
		/* cannot read it: leave it in place, try another segment later */
		sh_log_error("target %llx: cleaning read of %llx/%u failed: %s",
			     (unsigned long long)s->sb.target_id, (unsigned long long)op->stripe,
			     op->idx, sh_strerror(rc));
		f->moving = false;
		g->moves--;
		store_op_free(op);
		g->state = SEG_SEALED;
		s->victim = -1;
		goto out;
	}
	/* the bytes move as they are, with the crcs they were written with: corruption stays
	 * visible */
	for (uint32_t i = 0; i < store_blocks(op->len); i++)
		if (sh_crc32c(0, op->data + (size_t)i * STORE_BLOCK, STORE_BLOCK) != op->bcrc[i] &&
		    !f->corrupt) {
			f->corrupt = true;
			s->st.corrupt_blocks++;
			sh_log_error("target %llx: fragment %llx/%u corrupt (found while cleaning)",
				     (unsigned long long)s->sb.target_id,
				     (unsigned long long)op->stripe, op->idx);
		}
	op->payload_crc = f->payload_crc;
	rc = store_queue_op(s, op);
	if (rc < 0) {
		f->moving = false;
		g->moves--;
		store_op_free(op);
	}
out:
	sh_free(io);
	store_clean_seg_maybe_free(s, from);
	clean_pump(s);
}

/*
 * Read f's payload into the buffer of a new move op (a move, or a scrub's
 * check of the fragment); the read is tracked in clean_ios.
 */
static int
clean_io_start(struct store *s, struct store_frag *f, env_disk_cb done, struct clean_io **out)
{
	struct clean_io *io = sh_calloc(1, sizeof(*io));
	struct store_op *op = store_op_new(s, OP_MOVE_FRAG, f->len, NULL);
	int rc;

	if (io == NULL || op == NULL) {
		sh_free(io);
		if (op != NULL)
			store_op_free(op);
		return -ENOMEM;
	}
	op->stripe = f->stripe;
	op->idx = f->idx;
	op->epoch = f->epoch;
	io->s = s;
	io->op = op;
	io->from_seg = f->seg;
	io->from_blk = f->blk;
	io->iov = (struct iovec){ op->data, (size_t)store_blocks(f->len) * STORE_BLOCK };
	io->req = (struct env_disk_req){ .op = ENV_DISK_READ,
					 .off = store_seg_off(s, f->seg, f->blk + 1),
					 .iov = &io->iov,
					 .iovcnt = 1,
					 .cb = done,
					 .arg = io };
	rc = env_disk_submit(s->disk, &io->req);
	if (rc < 0) {
		store_op_free(op);
		sh_free(io);
		return rc;
	}
	s->segs[f->seg].readers++;
	sh_list_add_tail(&s->clean_ios, &io->link);
	*out = io;
	return 0;
}

static int
start_move(struct store *s, struct store_frag *f)
{
	struct clean_io *io;
	int rc = clean_io_start(s, f, move_read_done, &io);

	if (rc < 0)
		return rc;
	/* (the read's callback runs from the loop, never inside the submit) */
	io->op->from_seg = f->seg;
	memcpy(io->op->bcrc, f->bcrc, store_blocks(f->len) * sizeof(uint32_t));
	f->moving = true;
	s->segs[f->seg].moves++;
	s->moves_inflight++;
	return 0;
}

static void
clean_pump(struct store *s)
{
	struct store_seg *g;
	struct sh_list *pos, *tmp;

	if (s->victim < 0 || s->state != ST_READY)
		return;
	g = &s->segs[s->victim];
	/* tombstones: keep the ones still needed, drop the rest */
	sh_list_for_each_safe (pos, tmp, &g->tombs) {
		struct store_tomb *t = sh_list_entry(pos, struct store_tomb, seglink);
		struct store_op *op;

		if (t->moving)
			continue;
		if (!tomb_needed(s, t)) {
			sh_list_del(&t->seglink);
			g->live--;
			s->st.tombstones--;
			sh_free(t);
			continue;
		}
		op = store_op_new(s, OP_MOVE_TOMB, 0, NULL);
		if (op == NULL)
			return;
		op->stripe = t->stripe;
		op->idx = t->idx;
		op->epoch = t->epoch;
		op->from_tomb = t;
		if (store_queue_op(s, op) < 0) {
			store_op_free(op);
			return;
		}
		t->moving = true;
		g->moves++;
	}
	sh_list_for_each (pos, &g->frags) {
		struct store_frag *f = sh_list_entry(pos, struct store_frag, seglink);

		if (s->moves_inflight >= s->o.clean_moves)
			break;
		if (f->moving)
			continue;
		if (start_move(s, f) < 0)
			break;
	}
	store_clean_seg_maybe_free(s, (uint32_t)s->victim);
}

/* A move is durable: the index follows it if nothing newer came. */
void
store_clean_op_done(struct store *s, struct store_op *op)
{
	if (op->type == OP_MOVE_TOMB) {
		struct store_tomb *t = op->from_tomb;
		uint32_t from = t->seg;

		sh_list_del(&t->seglink);
		s->segs[from].live--;
		s->segs[from].moves--;
		t->seg = op->seg;
		t->blk = op->blk;
		t->moving = false;
		sh_list_add_tail(&s->segs[op->seg].tombs, &t->seglink);
		s->segs[op->seg].live++;
		store_clean_seg_maybe_free(s, from);
		return;
	}
	{
		struct store_frag *f = store_frag_find(s, op->stripe, op->idx);
		uint32_t from = op->from_seg;

		s->st.moved_frags++;
		s->st.moved_bytes += op->len;
		if (f != NULL && f->epoch == op->epoch && f->moving && f->seg == from) {
			/* re-place: out of the victim, at the copy */
			sh_log_trace("moved %llx/%u epoch %llu %u:%u -> %u:%u",
				     (unsigned long long)f->stripe, f->idx,
				     (unsigned long long)f->epoch, f->seg, f->blk, op->seg,
				     op->blk);
			f->moving = false;
			sh_list_del(&f->seglink);
			s->segs[from].live -= 1 + store_blocks(f->len);
			f->seg = op->seg;
			f->blk = op->blk;
			store_frag_place(s, f);
		}
		/* else: released or replaced meanwhile, the copy is garbage */
		s->segs[from].moves--;
		store_clean_seg_maybe_free(s, from);
	}
	clean_pump(s);
}

/* ---- scrub ---- */

static void scrub_pump(struct scrub *sc);

static void
scrub_read_done(struct env_disk_req *r, int rc)
{
	struct clean_io *io = r->arg;
	struct scrub *sc = io->sc;
	struct store *s = sc->s;
	struct store_op *op = io->op;
	struct store_frag *f = store_frag_find(s, op->stripe, op->idx);

	sh_list_del(&io->link);
	s->segs[io->from_seg].readers--;
	sc->inflight--;
	if (f != NULL && f->epoch == op->epoch && f->seg == io->from_seg &&
	    f->blk == io->from_blk) {
		bool bad = rc < 0;

		for (uint32_t i = 0; !bad && i < store_blocks(op->len); i++)
			bad = sh_crc32c(0, op->data + (size_t)i * STORE_BLOCK, STORE_BLOCK) !=
			      f->bcrc[i];
		if (!bad)
			bad = sh_crc32c(0, op->data, op->len) != f->payload_crc;
		s->st.scrubbed_frags++;
		if (bad) {
			sc->corrupt++;
			if (!f->corrupt)
				s->st.corrupt_blocks++;
			f->corrupt = true;
			sh_log_error("target %llx: scrub: fragment %llx/%u is corrupt (%s)",
				     (unsigned long long)s->sb.target_id,
				     (unsigned long long)op->stripe, op->idx,
				     rc < 0 ? sh_strerror(rc) : "crc mismatch");
		}
	}
	store_clean_seg_maybe_free(s, io->from_seg);
	store_op_free(op);
	sh_free(io);
	scrub_pump(sc);
}

static void
on_pace(struct env_timer *t)
{
	scrub_pump(t->arg);
}

static void
scrub_pump(struct scrub *sc)
{
	struct store *s = sc->s;

	while (sc->inflight < 8 && sc->next < sc->n) {
		size_t i = sc->next;
		struct store_frag *f = store_frag_find(s, sc->stripes[i], sc->idxs[i]);
		struct clean_io *io;
		int rc;

		if (f != NULL && sc->rate > 0) {
			/* ahead of the rate: wait until the bytes read so far are due */
			uint64_t due = sc->t0 + sc->bytes * SH_NSEC_PER_SEC / sc->rate;
			uint64_t now = env_now(s->env);

			if (due > now) {
				if (sc->inflight == 0)
					env_timer_arm(&sc->pace, due - now);
				return;
			}
		}
		sc->next++;
		if (f == NULL)
			continue;
		sc->bytes += f->len;
		rc = clean_io_start(s, f, scrub_read_done, &io);
		if (rc == -ENOMEM) {
			sc->next--;
			sc->bytes -= f->len;
			break;
		}
		if (rc < 0)
			continue;
		io->sc = sc;
		io->scrub = true;
		sc->inflight++;
	}
	if (sc->inflight == 0 && sc->next >= sc->n)
		env_post(&sc->done); /* never inside store_scrub() */
}

static void
scrub_done(struct env_task *t)
{
	struct scrub *sc = t->arg;
	store_cb cb = sc->cb;
	void *arg = sc->arg;
	int corrupt = sc->corrupt;

	sh_log_info("target %llx: scrub: %zu fragments, %d corrupt",
		    (unsigned long long)sc->s->sb.target_id, sc->n, corrupt);
	sc->s->scrubbing = NULL;
	sh_free(sc->stripes);
	sh_free(sc->idxs);
	sh_free(sc);
	cb(arg, corrupt);
}

int
store_scrub(struct store *s, store_cb cb, void *arg)
{
	return store_scrub_paced(s, 0, cb, arg);
}

int
store_scrub_paced(struct store *s, uint64_t bytes_per_s, store_cb cb, void *arg)
{
	struct scrub *sc;
	struct sh_hnode *h;
	size_t it, n = 0;

	if (cb == NULL)
		return -EINVAL;
	if (s->state == ST_OPENING)
		return -EAGAIN;
	if (s->scrubbing != NULL)
		return -EBUSY;
	sc = sh_calloc(1, sizeof(*sc));
	if (sc == NULL)
		return -ENOMEM;
	sc->s = s;
	sc->cb = cb;
	sc->arg = arg;
	sc->n = sh_htable_count(&s->index);
	sc->stripes = sh_alloc_array(sc->n + 1, sizeof(uint64_t));
	sc->idxs = sh_alloc_array(sc->n + 1, sizeof(uint32_t));
	if (sc->stripes == NULL || sc->idxs == NULL) {
		sh_free(sc->stripes);
		sh_free(sc->idxs);
		sh_free(sc);
		return -ENOMEM;
	}
	for (h = sh_htable_first(&s->index, &it); h != NULL;
	     h = sh_htable_next(&s->index, &it, h)) {
		struct store_frag *f = sh_container_of(h, struct store_frag, hn);

		sc->stripes[n] = f->stripe;
		sc->idxs[n++] = f->idx;
	}
	sc->n = n;
	sc->rate = bytes_per_s;
	sc->t0 = env_now(s->env);
	env_task_init(s->env, &sc->done, scrub_done, sc);
	env_timer_init(s->env, &sc->pace, on_pace, sc);
	s->scrubbing = sc;
	scrub_pump(sc);
	return 0;
}

unsigned
store_corrupt_list(struct store *s, struct store_key *out, unsigned max)
{
	struct sh_hnode *h;
	unsigned n = 0;
	size_t it;

	if (s->st.corrupt_blocks == 0)
		return 0; /* never any: nothing to look for */
	for (h = sh_htable_first(&s->index, &it); h != NULL && n < max;
	     h = sh_htable_next(&s->index, &it, h)) {
		struct store_frag *f = sh_container_of(h, struct store_frag, hn);

		if (f->corrupt)
			out[n++] = (struct store_key){ .stripe = f->stripe, .idx = f->idx };
	}
	return n;
}

bool
store_scrubbing(const struct store *s)
{
	return s->scrubbing != NULL;
}

void
store_clean_fini(struct store *s)
{
	struct sh_list *pos;

	while ((pos = sh_list_pop(&s->clean_ios)) != NULL) {
		struct clean_io *io = sh_list_entry(pos, struct clean_io, link);

		store_op_free(io->op);
		sh_free(io);
	}
	if (s->scrubbing != NULL) {
		struct scrub *sc = s->scrubbing;

		env_task_cancel(&sc->done);
		env_timer_cancel(&sc->pace);
		sc->cb(sc->arg, -ECANCELED);
		sh_free(sc->stripes);
		sh_free(sc->idxs);
		sh_free(sc);
		s->scrubbing = NULL;
	}
}
