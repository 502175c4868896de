// SPDX-License-Identifier: Apache-2.0
/*
 * Deltas between buckets, shipping (msvc_int.h): a bucket's outbox sent
 * to the groups of the buckets its changes belong to, retried, and
 * trimmed once applied there; the requests waiting on a flush answered.
 */
#include <string.h>

#include "msvc_int.h"

SH_LOG_FACILITY("meta.svc");

#define CALL_NS	      (5ull * 1000 * 1000 * 1000)
#define SHIP_RETRY_NS (100ull * 1000 * 1000)
/* How long deltas applied where they went wait in the outbox for a command to trim them. */
#define TRIM_NS (2ull * 1000 * 1000 * 1000)

struct shipment {
	struct mfs *fs;
	uint16_t bucket;
	uint64_t upto; /* an OUTBOX_ACK's */
};

static void ship_step(struct mfs *fs, uint16_t bucket);

static struct shipment *
shipment_new(struct mfs *fs, uint16_t bucket)
{
	struct shipment *sp = sh_calloc(1, sizeof(*sp));

	if (sp != NULL) {
		sp->fs = fs;
		sp->bucket = bucket;
		fs->refs++;
	}
	return sp;
}

static void
shipment_free(struct shipment *sp)
{
	struct mfs *fs = sp->fs;

	sh_free(sp);
	mfs_unref(fs);
}

void
mfs_ship_retry(struct env_timer *t)
{
	struct ship *sh = t->arg;

	sh->busy = false;
	if (!sh->fs->closing)
		mfs_ship_kick(sh->fs, sh->bucket);
}

/* Try the bucket's outbox again a little later (its timer is cancelled if the fs closes). */
static void
ship_fail(struct mfs *fs, uint16_t bucket)
{
	env_timer_arm(&fs->ship[bucket].retry, SHIP_RETRY_NS);
}

/* An OUTBOX_ACK of deltas applied where they went (after TRIM_NS without a command). */
static void
on_trimmed(void *arg, int status, const struct meta_result *r)
{
	struct shipment *sp = arg;

	mfs_trimmed(&sp->fs->ship[sp->bucket], status, r, sp->upto);
	shipment_free(sp);
}

void
mfs_trim_due(struct env_timer *t)
{
	struct ship *sh = t->arg;
	struct mfs *fs = sh->fs;
	struct mgroup *g = mfs_group(fs, sh->bucket);
	struct shipment *sp;
	struct meta_cmd c;

	if (fs->closing || g == NULL || !mgroup_ready(g) || sh->applied <= sh->trimmed)
		return; /* (a new leader ships and trims what it finds) */
	sp = shipment_new(fs, sh->bucket);
	if (sp == NULL)
		return;
	sp->upto = sh->applied;
	c = (struct meta_cmd){ .op = META_OP_OUTBOX_ACK,
			       .ver = 1,
			       .now = env_realtime(fs->s->env),
			       .upto = sp->upto };
	if (mgroup_propose(g, sh->bucket, &c, on_trimmed, sp) < 0)
		shipment_free(sp);
}

static void
on_shipped(void *arg, int status, const struct mp_reply *r)
{
	struct shipment *sp = arg;
	struct mfs *fs = sp->fs;
	struct ship *sh = &fs->ship[sp->bucket];
	struct mgroup *g;

	(void)r;
	if (status < 0 && sh->status == 0)
		sh->status = status;
	if (--sh->pending > 0 || fs->closing) {
		if (sh->pending == 0)
			sh->busy = false;
		shipment_free(sp);
		return;
	}
	if (sh->status == 0) {
		if (sh->upto > sh->applied)
			sh->applied = sh->upto;
		mfs_shipped(fs, sp->bucket, sh->upto); /* every receiver applied what it got */
	}
	g = mfs_group(fs, sp->bucket);
	if (sh->status < 0 || g == NULL || !mgroup_ready(g)) {
		if (g != NULL && mgroup_ready(g))
			ship_fail(fs, sp->bucket);
		else
			sh->busy = false;
		shipment_free(sp);
		return;
	}
	/*
	 * Applied: they stay in the outbox (skipped by the next shipments)
	 * until a command of this bucket carries the trim, or TRIM_NS passes
	 * (one OUTBOX_ACK then). A create every few seconds per bucket, as a
	 * dataset writer makes them, is one commit less each.
	 */
	if (!env_timer_armed(&sh->trim))
		env_timer_arm(&sh->trim, TRIM_NS);
	sh->busy = false;
	mfs_ship_kick(fs, sp->bucket); /* more may have come; none new wakes the flushers */
	shipment_free(sp);
}

struct outbox_read {
	uint8_t *bytes; /* n x META_DELTA_LEN */
	struct meta_delta *d;
	unsigned n;
	uint64_t applied; /* those up to this seq are applied already (not trimmed yet) */
};

static int
on_outbox(void *arg, const struct meta_delta *d)
{
	struct outbox_read *o = arg;

	if (d->seq <= o->applied)
		return 0;
	if (o->n == MP_DELTAS_MAX)
		return 1;
	o->d[o->n] = *d;
	meta_delta_encode(d, o->bytes + (size_t)o->n * META_DELTA_LEN);
	o->n++;
	return 0;
}

static void
flushed(struct mfs *fs, uint16_t bucket, int status)
{
	struct ship *sh = &fs->ship[bucket];

	while (!sh_list_empty(&sh->flush)) {
		struct mreq *m = sh_list_entry(sh_list_pop(&sh->flush), struct mreq, flink);

		m->step = ST_NONE;
		if (status < 0) {
			mreq_answer(m, status, NULL);
			continue;
		}
		{
			/* how many entries of the directory this bucket holds (0 or 1 is enough) */
			struct meta_bucket mb;
			struct meta_dirent de;
			unsigned n = 0;
			bool more;
			/* (in the revoke's branch: a clone's directory is its own) */
			int rc = mgroup_read_at(m->g, bucket, m->req.at, &mb);

			if (rc == 0) {
				rc = meta_readdir(&mb, m->req.ino, NULL, 0, &de, 1, &n, &more);
				meta_txn_abort(mb.t);
			}
			m->rep = (struct mp_reply){ .aux = n ? ((uint64_t)bucket << 16 | 1) : 0 };
			mreq_answer(m, rc, rc == 0 ? &m->rep : NULL);
		}
	}
}

/* Ship the first batch of bucket's outbox to its buckets' leaders. */
static void
ship_step(struct mfs *fs, uint16_t bucket)
{
	struct ship *sh = &fs->ship[bucket];
	struct mgroup *g = mfs_group(fs, bucket);
	struct outbox_read o = { .applied = sh->applied };
	struct meta_bucket mb;
	uint8_t *sent;
	int rc;

	if (g == NULL || !mgroup_ready(g)) {
		sh->busy = false;
		flushed(fs, bucket, SH_ENOTLEADER);
		return;
	}
	o.bytes = sh_malloc((size_t)MP_DELTAS_MAX * META_DELTA_LEN);
	o.d = sh_calloc(MP_DELTAS_MAX, sizeof(*o.d));
	sent = sh_calloc(MP_DELTAS_MAX, 1);
	rc = o.bytes && o.d && sent ? mgroup_read(g, bucket, &mb) : -ENOMEM;
	if (rc == 0) {
		rc = meta_outbox(&mb, on_outbox, &o);
		meta_txn_abort(mb.t);
	}
	if (rc < 0 || o.n == 0) {
		sh->busy = false;
		if (rc == 0)
			flushed(fs, bucket, 0);
		/* (leading again: what it knew applied is trimmed too) */
		if (rc == 0 && sh->applied > sh->trimmed && !env_timer_armed(&sh->trim))
			env_timer_arm(&sh->trim, TRIM_NS);
		goto out;
	}
	/* one request per destination group, each with its deltas */
	sh->pending = 1;
	sh->status = 0;
	sh->upto = o.d[o.n - 1].seq;
	{
		const struct mplace *pl = mroute_place(fs->s->rt);
		uint8_t *batch = sh_malloc((size_t)o.n * META_DELTA_LEN);

		if (batch == NULL) {
			sh->busy = false;
			goto out;
		}
		for (unsigned i = 0; i < o.n; i++) {
			uint16_t grp;
			unsigned k = 0;
			struct shipment *sp;
			struct mp_req q;

			if (sent[i])
				continue;
			if (o.d[i].to >= pl->nbuckets) {
				sent[i] = 1;
				continue;
			}
			grp = pl->group_of[o.d[i].to];
			for (unsigned j = i; j < o.n; j++)
				if (!sent[j] && o.d[j].to < pl->nbuckets &&
				    pl->group_of[o.d[j].to] == grp) {
					memcpy(batch + (size_t)k * META_DELTA_LEN,
					       o.bytes + (size_t)j * META_DELTA_LEN,
					       META_DELTA_LEN);
					k++;
					sent[j] = 1;
				}
			sp = shipment_new(fs, bucket);
			if (sp == NULL) {
				sh->status = -ENOMEM;
				break;
			}
			q = (struct mp_req){ .kind = MP_DELTAS,
					     .fs = fs->id,
					     .bucket = o.d[i].to,
					     .data = batch,
					     .dlen = (size_t)k * META_DELTA_LEN };
			sh->pending++;
			rc = mroute_call(fs->s->rt, &q, CALL_NS, on_shipped, sp);
			if (rc < 0) {
				shipment_free(sp);
				sh->pending--;
				sh->status = rc;
			}
		}
		sh_free(batch);
	}
	/* the extra count held the batch open while it was sent */
	{
		struct shipment *sp = shipment_new(fs, bucket);

		if (sp != NULL) {
			on_shipped(sp, 0, NULL);
		} else if (--sh->pending == 0) {
			sh->busy = false;
		}
	}
out:
	sh_free(o.bytes);
	sh_free(o.d);
	sh_free(sent);
}

void
mfs_ship_kick(struct mfs *fs, uint16_t bucket)
{
	struct ship *sh = &fs->ship[bucket];

	if (fs->closing)
		return;
	if (sh->busy) {
		sh->dirty = true;
		return;
	}
	sh->busy = true;
	sh->dirty = false;
	ship_step(fs, bucket);
}
