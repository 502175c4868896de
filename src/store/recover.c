// SPDX-License-Identifier: Apache-2.0
/*
 * Opening a target: read the superblock, scan every segment's log, check
 * the payloads that might be torn, rebuild the index, make it all durable.
 *
 *   SUPERBLOCK --> SCAN (segments in parallel, one record header after
 *   another until the first block that is not a record of the segment's
 *   sequence) --> VERIFY (payloads of records written after the newest
 *   durable_wseq any header names) --> SYNC (fsync) --> READY
 *
 * A record whose payload fails its crcs ends its segment's log: it and
 * everything after it were never acknowledged (acknowledgement is in log
 * order). The newest epoch of each (stripe, idx) wins; a tombstone kills
 * every older version.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "store_int.h"

SH_LOG_FACILITY("store.recover");

#define SCANNERS 32

struct rec_entry {
	uint64_t stripe, epoch, wseq;
	uint32_t idx, len, seg, blk, payload_crc;
	uint8_t type;
	bool dropped;
	uint32_t *bcrc;
};

struct scanner {
	struct store_recovery *rv;
	struct env_disk_req req;
	struct iovec iov;
	uint8_t *buf;
	uint32_t seg, pos;
	uint64_t seq;
	bool busy;
};

struct store_recovery {
	struct store *s;
	uint8_t *sbbuf;
	struct env_disk_req req;
	struct iovec iov;
	struct scanner sc[SCANNERS];
	uint32_t next_seg;
	unsigned active;
	struct rec_entry *ents;
	size_t nents, cap;
	uint64_t max_durable, max_wseq, max_epoch, max_seq;
	size_t verify_next;
	unsigned verifying;
	uint32_t *trunc; /* per segment: block where a torn record ended its log, or UINT32_MAX */
	uint8_t *zero;	 /* a zero block */
	struct env_disk_req *zreq; /* one per truncated segment */
	struct iovec *ziov;
	unsigned zeroing;
	int err;
	uint64_t t0;
};

static void finish(struct store_recovery *rv, int rc);
static void erase_torn(struct store_recovery *rv);
static void scan_next_segment(struct scanner *sc);
static void verify_pump(struct store_recovery *rv);
static void synced(struct env_disk_req *r, int rc);

static int
submit_read(struct store *s, struct env_disk_req *req, struct iovec *iov, uint8_t *buf,
	    uint32_t nblocks, uint64_t off, env_disk_cb cb, void *arg)
{
	*iov = (struct iovec){ buf, (size_t)nblocks * STORE_BLOCK };
	*req = (struct env_disk_req){
		.op = ENV_DISK_READ, .off = off, .iov = iov, .iovcnt = 1, .cb = cb, .arg = arg
	};
	return env_disk_submit(s->disk, req);
}

static int
add_entry(struct store_recovery *rv, const struct store_rec_df *rh, const uint32_t *bcrc,
	  uint32_t seg, uint32_t blk)
{
	struct rec_entry *e;

	if (rv->nents == rv->cap) {
		size_t cap = rv->cap ? rv->cap * 2 : 1024;
		struct rec_entry *n = sh_realloc(rv->ents, cap * sizeof(*n));

		if (n == NULL)
			return -ENOMEM;
		rv->ents = n;
		rv->cap = cap;
	}
	e = &rv->ents[rv->nents];
	memset(e, 0, sizeof(*e));
	e->stripe = rh->stripe;
	e->idx = rh->idx;
	e->len = rh->len;
	e->epoch = rh->epoch;
	e->wseq = rh->wseq;
	e->type = (uint8_t)rh->type;
	e->seg = seg;
	e->blk = blk;
	e->payload_crc = rh->payload_crc;
	if (rh->nblocks > 0) {
		e->bcrc = sh_alloc_array(rh->nblocks, sizeof(uint32_t));
		if (e->bcrc == NULL)
			return -ENOMEM;
		memcpy(e->bcrc, bcrc, rh->nblocks * sizeof(uint32_t));
	}
	rv->nents++;
	rv->max_durable = SH_MAX(rv->max_durable, rh->durable_wseq);
	rv->max_wseq = SH_MAX(rv->max_wseq, rh->wseq);
	rv->max_epoch = SH_MAX(rv->max_epoch, rh->epoch);
	return 0;
}

static void
scan_read_done(struct env_disk_req *r, int rc)
{
	struct scanner *sc = r->arg;
	struct store_recovery *rv = sc->rv;
	struct store *s = rv->s;
	struct store_seg *g = &s->segs[sc->seg];
	uint32_t segblocks = s->sb.seg_size / STORE_BLOCK;

	if (rc < 0) {
		rv->err = rc;
		goto seg_done;
	}
	if (sc->pos == 0) {
		struct store_seg_df sh;

		if (store_seg_decode(sc->buf, STORE_BLOCK, &sh) < 0 || sh.seg != sc->seg ||
		    sh.seq < s->sb.created_ns || sh.target_id != s->sb.target_id)
			goto seg_done; /* never written since format: free */
		sc->seq = sh.seq;
		g->seq = sh.seq;
		g->state = SEG_SEALED;
		g->used = 1;
		rv->max_seq = SH_MAX(rv->max_seq, sh.seq);
		sc->pos = 1;
	} else {
		struct store_rec_df rh;
		uint32_t bcrc[STORE_MAX_BLOCKS];

		if (store_rec_decode(sc->buf, STORE_BLOCK, &rh, bcrc) < 0 ||
		    rh.seg_seq != sc->seq || sc->pos + 1 + rh.nblocks > segblocks)
			goto seg_done; /* the end of this segment's log */
		if (g->min_epoch == 0 || rh.epoch < g->min_epoch)
			g->min_epoch = rh.epoch;
		rc = add_entry(rv, &rh, bcrc, sc->seg, sc->pos);
		if (rc < 0) {
			rv->err = rc;
			goto seg_done;
		}
		sc->pos += 1 + rh.nblocks;
		g->used = sc->pos;
	}
	if (sc->pos < segblocks &&
	    submit_read(s, &sc->req, &sc->iov, sc->buf, 1, store_seg_off(s, sc->seg, sc->pos),
			scan_read_done, sc) == 0)
		return;
seg_done:
	scan_next_segment(sc);
}

static void
scan_next_segment(struct scanner *sc)
{
	struct store_recovery *rv = sc->rv;
	struct store *s = rv->s;

	while (rv->err == 0 && rv->next_seg < s->sb.nsegs) {
		sc->seg = rv->next_seg++;
		sc->pos = 0;
		sc->seq = 0;
		if (submit_read(s, &sc->req, &sc->iov, sc->buf, 1, store_seg_off(s, sc->seg, 0),
				scan_read_done, sc) == 0)
			return;
	}
	if (sc->busy) {
		sc->busy = false;
		rv->active--;
	}
	if (rv->active > 0)
		return;
	if (rv->err < 0) {
		finish(rv, rv->err);
		return;
	}
	/* every segment scanned: check what might be torn */
	verify_pump(rv);
}

/* ---- verification of payloads written after the durable watermark ---- */

struct verify {
	struct store_recovery *rv;
	struct env_disk_req req;
	struct iovec iov;
	uint8_t *buf;
	size_t ent;
};

static void
truncate_segment(struct store_recovery *rv, uint32_t seg, uint32_t blk)
{
	struct store *s = rv->s;

	for (size_t i = 0; i < rv->nents; i++)
		if (rv->ents[i].seg == seg && rv->ents[i].blk >= blk)
			rv->ents[i].dropped = true;
	if (s->segs[seg].used > blk)
		s->segs[seg].used = blk;
	if (blk < rv->trunc[seg])
		rv->trunc[seg] = blk;
	s->st.recovery_torn++;
	sh_log_warn("target %llx: segment %u: record at block %u is torn; the log ends there",
		    (unsigned long long)s->sb.target_id, seg, blk);
}

static void
verify_done(struct env_disk_req *r, int rc)
{
	struct verify *v = r->arg;
	struct store_recovery *rv = v->rv;
	struct rec_entry *e = &rv->ents[v->ent];
	bool ok = rc >= 0;

	for (uint32_t i = 0; ok && i < store_blocks(e->len); i++)
		ok = sh_crc32c(0, v->buf + (size_t)i * STORE_BLOCK, STORE_BLOCK) == e->bcrc[i];
	if (ok)
		ok = sh_crc32c(0, v->buf, e->len) == e->payload_crc;
	if (!ok)
		truncate_segment(rv, e->seg, e->blk);
	sh_free(v->buf);
	sh_free(v);
	rv->verifying--;
	verify_pump(rv);
}

/* Records in the order they were made: by version, then by write (a move is newer). */
static int
cmp_epoch_wseq(const void *a, const void *b)
{
	const struct rec_entry *x = a, *y = b;

	if (x->epoch != y->epoch)
		return x->epoch < y->epoch ? -1 : 1;
	return x->wseq < y->wseq ? -1 : x->wseq > y->wseq;
}

static void
build_index(struct store_recovery *rv)
{
	struct store *s = rv->s;
	struct sh_hnode *h;
	size_t it;

	if (rv->nents > 1)
		qsort(rv->ents, rv->nents, sizeof(*rv->ents), cmp_epoch_wseq);
	for (size_t i = 0; i < rv->nents; i++) {
		struct rec_entry *e = &rv->ents[i];
		struct store_frag *f = store_frag_find(s, e->stripe, e->idx);

		if (e->dropped)
			continue;
		if (e->type == STORE_REC_FRAG) {
			/* later in this order wins: a newer version, or a moved copy */
			if (f == NULL && (f = store_frag_insert(s, e->stripe, e->idx)) == NULL)
				continue;
			sh_free(f->bcrc);
			f->len = e->len;
			f->epoch = e->epoch;
			f->seg = e->seg;
			f->blk = e->blk;
			f->payload_crc = e->payload_crc;
			f->bcrc = e->bcrc;
			e->bcrc = NULL;
			continue;
		}
		/* a tombstone kills every older version */
		if (f != NULL && f->epoch < e->epoch)
			store_frag_remove(s, f);
		store_tomb_add(s, e->stripe, e->idx, e->epoch, e->seg, e->blk);
	}
	for (h = sh_htable_first(&s->index, &it); h != NULL;
	     h = sh_htable_next(&s->index, &it, h)) {
		struct store_frag *f = sh_container_of(h, struct store_frag, hn);

		sh_log_trace("recovered %llx/%u epoch %llu at %u:%u", (unsigned long long)f->stripe,
			     f->idx, (unsigned long long)f->epoch, f->seg, f->blk);
		store_frag_place(s, f);
	}
}

static void
verify_pump(struct store_recovery *rv)
{
	struct store *s = rv->s;

	while (rv->err == 0 && rv->verifying < SCANNERS && rv->verify_next < rv->nents) {
		struct rec_entry *e = &rv->ents[rv->verify_next];
		struct verify *v;
		uint32_t nb = store_blocks(e->len);

		if (e->wseq <= rv->max_durable || e->type != STORE_REC_FRAG || e->dropped) {
			rv->verify_next++;
			continue;
		}
		v = sh_calloc(1, sizeof(*v));
		if (v != NULL)
			v->buf = sh_aligned_alloc(STORE_BLOCK, (size_t)nb * STORE_BLOCK);
		if (v == NULL || v->buf == NULL) {
			sh_free(v);
			rv->err = -ENOMEM;
			break;
		}
		v->rv = rv;
		v->ent = rv->verify_next++;
		if (submit_read(s, &v->req, &v->iov, v->buf, nb,
				store_seg_off(s, e->seg, e->blk + 1), verify_done, v) < 0) {
			sh_free(v->buf);
			sh_free(v);
			rv->err = -EIO;
			break;
		}
		rv->verifying++;
	}
	if (rv->verifying > 0)
		return;
	if (rv->err < 0) {
		finish(rv, rv->err);
		return;
	}
	build_index(rv);
	erase_torn(rv);
}

static void
sync_all(struct store_recovery *rv)
{
	/* what we found may sit in a volatile cache (a process crash, not a power cut): flush it */
	rv->req = (struct env_disk_req){ .op = ENV_DISK_FSYNC, .cb = synced, .arg = rv };
	if (env_disk_submit(rv->s->disk, &rv->req) < 0)
		finish(rv, -EIO);
}

static void
zeroed(struct env_disk_req *r, int rc)
{
	struct store_recovery *rv = r->arg;

	if (rc < 0 && rv->err == 0)
		rv->err = rc;
	if (--rv->zeroing > 0)
		return;
	if (rv->err < 0) {
		finish(rv, rv->err);
		return;
	}
	sync_all(rv);
}

/*
 * A torn record ends its segment's log, but its header is still on disk and
 * later records would make it look durable: overwrite it with zeros, so the
 * next scan ends there too.
 */
static void
erase_torn(struct store_recovery *rv)
{
	struct store *s = rv->s;
	unsigned n = 0;

	for (uint32_t i = 0; i < s->sb.nsegs; i++)
		n += rv->trunc[i] != UINT32_MAX;
	if (n == 0) {
		sync_all(rv);
		return;
	}
	rv->zero = sh_aligned_alloc(STORE_BLOCK, STORE_BLOCK);
	rv->zreq = sh_alloc_array(n, sizeof(*rv->zreq));
	rv->ziov = sh_alloc_array(n, sizeof(*rv->ziov));
	if (rv->zero == NULL || rv->zreq == NULL || rv->ziov == NULL) {
		finish(rv, -ENOMEM);
		return;
	}
	memset(rv->zero, 0, STORE_BLOCK);
	rv->zeroing = 1; /* held while submitting */
	for (uint32_t i = 0, k = 0; i < s->sb.nsegs; i++) {
		if (rv->trunc[i] == UINT32_MAX)
			continue;
		rv->ziov[k] = (struct iovec){ rv->zero, STORE_BLOCK };
		rv->zreq[k] = (struct env_disk_req){ .op = ENV_DISK_WRITE,
						     .off = store_seg_off(s, i, rv->trunc[i]),
						     .iov = &rv->ziov[k],
						     .iovcnt = 1,
						     .cb = zeroed,
						     .arg = rv };
		if (env_disk_submit(s->disk, &rv->zreq[k]) == 0)
			rv->zeroing++;
		else if (rv->err == 0)
			rv->err = -EIO;
		k++;
	}
	zeroed(&rv->req, 0); /* drop the hold */
}

static void
synced(struct env_disk_req *r, int rc)
{
	struct store_recovery *rv = r->arg;
	struct store *s = rv->s;

	if (rc < 0) {
		finish(rv, rc);
		return;
	}
	s->next_seg_seq = SH_MAX(rv->max_seq + 1, s->sb.created_ns);
	s->next_wseq = rv->max_wseq + 1;
	s->next_epoch = rv->max_epoch + 1;
	s->durable_wseq = rv->max_wseq;
	s->free_segs = 0;
	for (uint32_t i = 0; i < s->sb.nsegs; i++)
		if (s->segs[i].state == SEG_FREE)
			s->free_segs++;
	s->st.recovered_records = rv->nents;
	sh_log_info("target %llx: open: %u segments (%u free), %llu fragments, %zu records in "
		    "%.3f s",
		    (unsigned long long)s->sb.target_id, s->sb.nsegs, s->free_segs,
		    (unsigned long long)s->st.fragments, rv->nents,
		    (double)(env_now(s->env) - rv->t0) / 1e9);
	s->state = ST_READY;
	finish(rv, 0);
}

static void
finish(struct store_recovery *rv, int rc)
{
	struct store *s = rv->s;
	store_cb cb = s->open_cb;
	void *arg = s->open_arg;

	store_recover_free(s);
	if (rc == 0)
		store_clean_maybe(s);
	cb(arg, rc);
}

/* ---- superblock ---- */

static void
sb_read_done(struct env_disk_req *r, int rc)
{
	struct store_recovery *rv = r->arg;
	struct store *s = rv->s;
	struct env_disk_info info;
	int rc0, rc1;

	if (rc < 0) {
		finish(rv, rc);
		return;
	}
	rc0 = store_sb_decode(rv->sbbuf, STORE_BLOCK, &s->sb);
	if (rc0 < 0) {
		rc1 = store_sb_decode(rv->sbbuf + STORE_BLOCK, STORE_BLOCK, &s->sb);
		if (rc1 < 0) {
			rc = rc0 == SH_EVERSION || rc1 == SH_EVERSION ? SH_EVERSION
								      : SH_ENOTFORMATTED;
			sh_log_warn("open: no valid superblock (%s)", sh_strerror(rc));
			finish(rv, rc);
			return;
		}
	}
	env_disk_info(s->disk, &info);
	if (info.size < s->sb.size) {
		sh_log_warn(
		    "open: the drive (%llu bytes) is smaller than its superblock says (%llu)",
		    (unsigned long long)info.size, (unsigned long long)s->sb.size);
		finish(rv, -EBADMSG);
		return;
	}
	s->segs = sh_alloc_array(s->sb.nsegs, sizeof(*s->segs));
	rv->trunc = sh_alloc_array(s->sb.nsegs, sizeof(*rv->trunc));
	if (s->segs == NULL || rv->trunc == NULL) {
		finish(rv, -ENOMEM);
		return;
	}
	for (uint32_t i = 0; i < s->sb.nsegs; i++)
		rv->trunc[i] = UINT32_MAX;
	for (uint32_t i = 0; i < s->sb.nsegs; i++) {
		sh_list_init(&s->segs[i].frags);
		sh_list_init(&s->segs[i].tombs);
	}
	for (unsigned i = 0; i < SCANNERS; i++) {
		struct scanner *sc = &rv->sc[i];

		sc->rv = rv;
		sc->buf = sh_aligned_alloc(STORE_BLOCK, STORE_BLOCK);
		if (sc->buf == NULL) {
			finish(rv, -ENOMEM);
			return;
		}
	}
	rv->active = SCANNERS;
	for (unsigned i = 0; i < SCANNERS; i++)
		rv->sc[i].busy = true;
	/* (if every read fails to start, the last call finishes and frees rv) */
	for (unsigned i = 0; i < SCANNERS && s->rec == rv; i++)
		scan_next_segment(&rv->sc[i]);
}

int
store_recover_start(struct store *s)
{
	struct store_recovery *rv = sh_calloc(1, sizeof(*rv));
	int rc;

	if (rv == NULL)
		return -ENOMEM;
	rv->s = s;
	rv->t0 = env_now(s->env);
	rv->sbbuf = sh_aligned_alloc(STORE_BLOCK, 2 * STORE_BLOCK);
	if (rv->sbbuf == NULL) {
		sh_free(rv);
		return -ENOMEM;
	}
	s->rec = rv;
	rc = submit_read(s, &rv->req, &rv->iov, rv->sbbuf, 2, 0, sb_read_done, rv);
	if (rc < 0) {
		s->rec = NULL;
		sh_free(rv->sbbuf);
		sh_free(rv);
	}
	return rc;
}

void
store_recover_free(struct store *s)
{
	struct store_recovery *rv = s->rec;

	if (rv == NULL)
		return;
	s->rec = NULL;
	for (size_t i = 0; i < rv->nents; i++)
		sh_free(rv->ents[i].bcrc);
	for (unsigned i = 0; i < SCANNERS; i++)
		sh_free(rv->sc[i].buf);
	sh_free(rv->ents);
	sh_free(rv->sbbuf);
	sh_free(rv->trunc);
	sh_free(rv->zero);
	sh_free(rv->zreq);
	sh_free(rv->ziov);
	sh_free(rv);
}
