// SPDX-License-Identifier: Apache-2.0
/*
 * The orphan sweep (shoald.h, docs/metadata.md "Extents"): fragments that
 * no extent refers to and no reclaim record names — left by a client
 * killed between sending a stripe and mapping it — are released once they
 * are older than the orphan age. Each worker sweeps its own drives: it
 * lists fragments written before the age (by the store's epochs, sampled
 * as time goes), asks the buckets their stripe ids name (MP_STRIPES, every
 * filesystem: an id does not say which), and releases what nobody knows.
 * The question names the target: a stripe whose record says it is
 * elsewhere now (rebuilt while this node was lost, docs/healing.md) is not
 * known here either, so space on a node that comes back returns. A
 * question that fails keeps the fragments for the next round.
 */
#include <stdlib.h>
#include <string.h>

#include "shoald.h"

SH_LOG_FACILITY("shoald.sweep");

#define LIST_MAX 1024
#define CALL_NS	 (5ull * 1000 * 1000 * 1000)

struct sround {
	struct sdrive *sd;
	struct store_key keys[LIST_MAX];
	uint8_t known[LIST_MAX]; /* per key: some filesystem's bucket knows its stripe */
	unsigned n;
	unsigned pending;
	bool failed;
	unsigned released;
};

static int
key_cmp(const void *a, const void *b)
{
	const struct store_key *x = a, *y = b;

	return x->stripe < y->stripe ? -1 : x->stripe > y->stripe;
}

static void
on_released(void *arg, int rc)
{
	(void)arg;
	if (rc < 0 && rc != -ECANCELED)
		sh_log_warn("an orphan fragment's release failed: %s", sh_strerror(rc));
}

static void
round_end(struct sround *r)
{
	struct sdrive *sd = r->sd;
	unsigned known = 0;

	for (unsigned i = 0; i < r->n; i++)
		known += r->known[i] != 0;
	sh_log_debug("drive %llu: %u fragments old enough, %u of them mapped%s",
		     (unsigned long long)store_target_id(sd->st), r->n, known,
		     r->failed ? "; a question failed: nothing released" : "");
	if (!r->failed)
		for (unsigned i = 0; i < r->n; i++)
			if (!r->known[i] && store_release(sd->st, r->keys[i].stripe, r->keys[i].idx,
							  on_released, NULL) == 0)
				r->released++;
	if (r->released > 0)
		sh_log_info("drive %llu: released %u orphan or stale fragments (no record "
			    "names them here, older than %u s)",
			    (unsigned long long)store_target_id(sd->st), r->released,
			    sd->sw->age_s);
	sd->busy = false;
	sh_free(r);
}

struct scall {
	struct sround *r;
	unsigned from, to; /* the keys of one bucket */
};

static void
on_reply(void *arg, int status, const struct mp_reply *rep)
{
	struct scall *c = arg;
	struct sround *r = c->r;
	unsigned k = 0;

	if (status < 0 || rep == NULL) {
		r->failed = true;
	} else {
		/* one byte per fragment, in order */
		for (unsigned i = c->from; i < c->to; i++) {
			if (k >= rep->dlen) {
				r->failed = true;
				break;
			}
			r->known[i] |= rep->data[k++] != 0;
		}
	}
	sh_free(c);
	if (--r->pending == 0)
		round_end(r);
}

/* Ask every filesystem's bucket about keys [from, to) (one bucket's stripes). */
static void
ask(struct sround *r, unsigned from, unsigned to)
{
	struct sweep *sw = r->sd->sw;
	struct sh_enc ids;

	sh_enc_init(&ids);
	for (unsigned i = from; i < to; i++) {
		sh_enc_u64(&ids, r->keys[i].stripe);
		sh_enc_u32(&ids, r->keys[i].idx);
	}
	if (sh_enc_error(&ids) < 0) {
		r->failed = true;
		sh_enc_fini(&ids);
		return;
	}
	for (unsigned f = 0; f < sw->nfs; f++) {
		struct mp_req q = { .kind = MP_STRIPES,
				    .fs = sw->fs[f],
				    .ino = store_target_id(
					r->sd->st), /* per fragment: stale ones too */
				    .bucket = (uint16_t)(r->keys[from].stripe >> 48),
				    .data = ids.p,
				    .dlen = ids.len };
		struct scall *c = sh_calloc(1, sizeof(*c));

		if (c == NULL) {
			r->failed = true;
			continue;
		}
		c->r = r;
		c->from = from;
		c->to = to;
		r->pending++;
		if (mroute_call(sw->rt, &q, CALL_NS, on_reply, c) < 0) {
			r->pending--;
			r->failed = true;
			sh_free(c);
		}
	}
	sh_enc_fini(&ids);
}

static void
sweep_drive(struct sdrive *sd, uint64_t now)
{
	struct sweep *sw = sd->sw;
	uint64_t before = 0, age = (uint64_t)sw->age_s * 1000000000ull;
	struct sround *r;

	/* the store's epoch now, and the newest one at least `age` ago */
	memmove(sd->hist + 1, sd->hist, sizeof(sd->hist) - sizeof(sd->hist[0]));
	sd->hist[0].t = now;
	sd->hist[0].epoch = store_epoch(sd->st);
	for (unsigned i = 0; i < SWEEP_HIST; i++)
		if (sd->hist[i].t != 0 && sd->hist[i].t + age <= now) {
			before = sd->hist[i].epoch;
			break;
		}
	if (before == 0 || sd->busy || sw->nfs == 0)
		return;
	r = sh_calloc(1, sizeof(*r));
	if (r == NULL)
		return;
	r->sd = sd;
	r->n = store_list(sd->st, before, &sd->cursor, r->keys, LIST_MAX);
	/* only ids that name a bucket of this cluster: anything else is not ours to judge */
	for (unsigned i = 0; i < r->n;)
		if ((r->keys[i].stripe >> 48) >= sw->nbuckets)
			r->keys[i] = r->keys[--r->n];
		else
			i++;
	if (r->n == 0) {
		sh_free(r);
		return;
	}
	qsort(r->keys, r->n, sizeof(r->keys[0]), key_cmp);
	sd->busy = true;
	r->pending = 1; /* held while asking */
	for (unsigned from = 0, i = 1; i <= r->n; i++)
		if (i == r->n || (r->keys[i].stripe >> 48) != (r->keys[from].stripe >> 48) ||
		    i - from == MP_STRIPES_MAX) {
			ask(r, from, i);
			from = i;
		}
	if (--r->pending == 0)
		round_end(r);
}

static void
on_tick(struct env_timer *t)
{
	struct sweep *sw = t->arg;
	uint64_t now = env_now(sw->env);
	struct sh_list *pos;

	if (sw->stopping)
		return;
	sh_list_for_each (pos, &sw->drives)
		sweep_drive(sh_list_entry(pos, struct sdrive, link), now);
	env_timer_arm(&sw->tick, sw->period_ns);
}

void
sweep_set_local(struct sweep *sw, mroute_local_fn fn, void *arg)
{
	if (sw != NULL)
		mroute_set_local(sw->rt, fn, arg);
}

void
sweep_stop(struct sweep *sw)
{
	if (sw == NULL)
		return;
	sw->stopping = true;
	env_timer_cancel(&sw->tick);
}

int
sweep_create(struct net *n, unsigned age_s, struct sweep **out)
{
	struct sweep *sw;
	int rc;

	*out = NULL;
	if (age_s == 0)
		return 0; /* off */
	sw = sh_calloc(1, sizeof(*sw));
	if (sw == NULL)
		return -ENOMEM;
	rc = mroute_create(n, &sw->rt);
	if (rc < 0) {
		sh_free(sw);
		return rc;
	}
	sw->env = net_env(n);
	sw->age_s = age_s;
	/* a few samples per age, at most a minute apart */
	sw->period_ns = (uint64_t)age_s * 1000000000ull / 4;
	if (sw->period_ns > 60ull * 1000000000ull)
		sw->period_ns = 60ull * 1000000000ull;
	sh_list_init(&sw->drives);
	env_timer_init(sw->env, &sw->tick, on_tick, sw);
	env_timer_arm(&sw->tick, sw->period_ns);
	*out = sw;
	return 0;
}

int
sweep_set_cfg(struct sweep *sw, const struct cfg *c)
{
	if (sw == NULL)
		return 0;
	sw->nfs = 0;
	for (uint32_t i = 0; i < c->nfs && i < CFG_FS_MAX; i++)
		if (cfg_fs_own(&c->fs[i])) /* (a clone's stripes are its origin's) */
			sw->fs[sw->nfs++] = c->fs[i].id;
	sw->nbuckets = c->nbuckets;
	return mroute_set_cfg(sw->rt, c);
}

int
sweep_add(struct sweep *sw, struct store *st)
{
	struct sdrive *sd;

	if (sw == NULL)
		return 0;
	sd = sh_calloc(1, sizeof(*sd));
	if (sd == NULL)
		return -ENOMEM;
	sd->sw = sw;
	sd->st = st;
	sd->hist[0].t = env_now(sw->env);
	sd->hist[0].epoch = store_epoch(st);
	sh_list_add_tail(&sw->drives, &sd->link);
	return 0;
}

void
sweep_destroy(struct sweep *sw)
{
	if (sw == NULL)
		return;
	env_timer_cancel(&sw->tick);
	mroute_cancel_all(sw->rt); /* rounds in flight end now (their calls fail) */
	mroute_destroy(sw->rt);
	while (!sh_list_empty(&sw->drives))
		sh_free(sh_list_entry(sh_list_pop(&sw->drives), struct sdrive, link));
	sh_free(sw);
}
