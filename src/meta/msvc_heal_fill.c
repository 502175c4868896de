// SPDX-License-Identifier: Apache-2.0
/*
 * Self-healing's balance (msvc_heal_int.h, docs/healing.md "Grow, shrink,
 * rebalance"): every 5 s each leader asks every target how full it is;
 * while the fill is uneven (max over mean above 1.05, until below 1.02),
 * each leader moves its part of every target's surplus over the mean to
 * the targets short of it, a fragment at a time, copying it and releasing
 * it where it was. New budgets come only from figures asked after every
 * move planned before had ended, so nothing is moved twice for the same
 * surplus.
 */
#include <stdlib.h>
#include <string.h>

#include "../store/store.h"
#include "../store/store_proto.h"
#include "msvc_heal_int.h"

SH_LOG_FACILITY("meta.heal");

/* ---- the targets' fill, and moves that even it out ---- */

struct fround;
static void takers(struct mheal *h);

static int
fill_by_target(const void *a, const void *b)
{
	uint64_t x = ((const struct hfill *)a)->target, y = ((const struct hfill *)b)->target;

	return x < y ? -1 : x > y;
}

/* A STORE_STAT's own argument: the round, and which target. */
struct farg {
	struct fround *r;
	unsigned i;
	struct net_call *h; /* in flight (cancelled when the filesystem closes) */
};

struct fround {
	struct mheal *h;
	uint64_t t0; /* when it asked */
	unsigned n, pending;
	struct hfill *f;
	struct store_proto_stat *st;
	struct net_call_opts o;
	struct farg *arg;
};

double
heal_fill_max(const struct hfill *f, unsigned n, double *mean)
{
	double sum = 0, max = 0;
	unsigned known = 0;

	for (unsigned i = 0; i < n; i++) {
		double x;

		if (f[i].capacity == 0)
			continue;
		x = (double)f[i].live / (double)f[i].capacity;
		sum += x;
		max = x > max ? x : max;
		known++;
	}
	*mean = known ? sum / known : 0;
	return max;
}

static void
fill_end(struct fround *r)
{
	struct mheal *h = r->h;
	struct mfs *fs = h->fs;
	double mean, max = heal_fill_max(r->f, r->n, &mean);

	for (unsigned i = 0; i < r->n; i++) /* the budgets left go on (new ones below, maybe) */
		for (unsigned k = 0; k < h->nfill; k++)
			if (h->fill[k].target == r->f[i].target) {
				r->f[i].out = h->fill[k].out;
				r->f[i].in = h->fill[k].in;
			}
	sh_free(h->fill);
	h->fill = r->f;
	h->nfill = r->n;
	qsort(h->fill, h->nfill, sizeof(h->fill[0]), fill_by_target); /* (fill_find) */
	h->filling = false;
	h->fround = NULL;
	h->fill_mean = mean;
	h->st.fill_ratio_milli = h->fill_mean > 0 ? (uint64_t)(max / h->fill_mean * 1000) : 1000;
	if (!h->balancing && h->fill_mean > 0 && max > h->fill_mean * BALANCE_ON) {
		h->balancing = true;
		h->pass_work = true; /* a pass plans the moves */
		sh_log_info("filesystem %u: targets' fill uneven (max %.3f of mean %.3f): "
			    "rebalancing",
			    fs->id, max, h->fill_mean);
	} else if (h->balancing && (h->fill_mean == 0 || max <= h->fill_mean * BALANCE_OFF)) {
		h->balancing = false;
		sh_log_info("filesystem %u: targets' fill even (max %.3f of mean %.3f)", fs->id,
			    max, h->fill_mean);
	}
	/*
	 * New budgets only from figures that count every move planned before (none
	 * queued or in flight, the last one ended before these were asked): what was
	 * planned is never planned twice.
	 */
	if (h->balancing && h->bal_jobs == 0 && !heal_balance_queued(h) && h->bal_end < r->t0) {
		heal_balance_budgets(h, (double)(env_random_u64(fs->s->env) >> 11) /
					    (double)(1ull << 53));
		h->pass_work = true; /* a pass plans them now */
	} else {
		if (!h->balancing)
			for (unsigned i = 0; i < h->nfill; i++)
				h->fill[i].out = h->fill[i].in = 0;
		takers(h);
	}
	sh_free(r->st);
	sh_free(r->arg);
	sh_free(r);
	mfs_unref(fs);
}

static void
fill_one(struct fround *r, unsigned i, int status)
{
	if (status < 0)
		r->f[i].capacity = 0; /* not known: not counted */
	if (--r->pending == 0)
		fill_end(r);
}

static void
on_stat(void *arg, int status, const struct net_msg *reply)
{
	struct fround *r = ((struct farg *)arg)->r;
	unsigned i = ((struct farg *)arg)->i;

	((struct farg *)arg)->h = NULL;
	if (status == 0 && reply->len == sizeof(r->st[i])) {
		memcpy(&r->st[i], reply->buf->data + reply->off, sizeof(r->st[i]));
		r->f[i].live = r->st[i].live;
		r->f[i].capacity = r->st[i].capacity;
	} else if (status == 0) {
		status = -EPROTO;
	}
	fill_one(r, i, status);
}

/* Ask every target up how full it is (a round; fill_end takes the answers). */
void
heal_fill_ask(struct mheal *h, const struct cfg *c)
{
	struct msvc *s = h->fs->s;
	struct fround *r = sh_calloc(1, sizeof(*r));

	if (r == NULL)
		return;
	r->h = h;
	r->t0 = env_now(s->env);
	r->n = c->ndrives;
	r->f = sh_calloc(r->n + 1, sizeof(*r->f));
	r->st = sh_calloc(r->n + 1, sizeof(*r->st));
	r->arg = sh_calloc(r->n + 1, sizeof(*r->arg));
	if (r->f == NULL || r->st == NULL || r->arg == NULL) {
		sh_free(r->f);
		sh_free(r->st);
		sh_free(r->arg);
		sh_free(r);
		return;
	}
	h->filling = true;
	h->fround = r;
	h->fs->refs++;
	r->pending = 1 + r->n; /* held while asking */
	r->o = (struct net_call_opts){ .timeout_ns = CALL_NS, .retries = 1 };
	for (unsigned i = 0; i < r->n; i++) {
		struct store_proto_req q = { .target = c->drives[i].id };
		uint8_t hdr[STORE_PROTO_HDR + 8];
		struct iovec iov = { hdr, store_proto_encode(NET_OP_STORE_STAT, &q, hdr) };
		char addr[CFG_ADDR_MAX];
		struct store *st;
		uint64_t peer;
		int rc;

		r->f[i].target = c->drives[i].id;
		r->arg[i].r = r;
		r->arg[i].i = i;
		rc = c->drives[i].state == CFG_DRIVE_ACTIVE
			 ? mplace_target(c, c->drives[i].id, &peer, addr)
			 : -EHOSTDOWN;
		if (rc == 0 && peer == net_node_id(s->net)) {
			struct store_stats ss;

			st = s->p.store_local ? s->p.store_local(s->p.arg, c->drives[i].id) : NULL;
			rc = st ? 0 : -ENODEV;
			if (st != NULL) {
				store_stats(st, &ss);
				r->f[i].live = ss.live;
				r->f[i].capacity = ss.capacity;
			}
			fill_one(r, i, rc);
			continue;
		}
		if (rc == 0)
			rc = net_peer_ensure(s->net, peer, addr);
		if (rc == 0)
			rc = net_call(s->net, peer, NET_OP_STORE_STAT, &iov, 1, &r->o, on_stat,
				      &r->arg[i], &r->arg[i].h);
		if (rc < 0)
			fill_one(r, i, rc);
	}
	fill_one(r, UINT32_MAX, 0);
}

static int
target_by_id(const void *a, const void *b)
{
	uint64_t x = ((const struct place_target *)a)->id, y = ((const struct place_target *)b)->id;

	return x < y ? -1 : x > y;
}

void
heal_mark_full(struct mheal *h, uint64_t target)
{
	uint64_t until = env_now(h->fs->s->env) + FULL_NS;
	unsigned at = 0;

	while (at < h->nfull && h->full[at].target != target)
		at++;
	if (at == h->nfull) {
		sh_log_warn("filesystem %u: target %llu is out of space: no heal writes go there "
			    "for %llu s",
			    h->fs->id, (unsigned long long)target,
			    (unsigned long long)(FULL_NS / SH_NSEC_PER_SEC));
		if (h->nfull < FULLS_MAX) {
			h->nfull++;
		} else { /* every slot taken: the mark that ends first goes */
			at = 0;
			for (unsigned i = 1; i < h->nfull; i++)
				if (h->full[i].until < h->full[at].until)
					at = i;
		}
	}
	h->full[at] = (struct hfull){ .target = target, .until = until };
}

static struct place_target *
plan_find(const struct plan *pl, uint64_t id)
{
	struct place_target key = { .id = id };

	return bsearch(&key, pl->t, pl->nt, sizeof(pl->t[0]), target_by_id);
}

int
heal_plan_targets(struct mheal *h, struct plan *pl)
{
	uint64_t now = env_now(h->fs->s->env);
	int rc = place_targets(pl->c, &pl->t, &pl->nt);
	unsigned nfull = 0;

	if (rc < 0)
		return rc;
	qsort(pl->t, pl->nt, sizeof(pl->t[0]), target_by_id); /* (ties go by id: no pick moves) */
	for (unsigned i = 0; i < h->nfull;) {
		struct place_target *t;

		if (h->full[i].until <= now) { /* forgotten: planned onto again */
			h->full[i] = h->full[--h->nfull];
			continue;
		}
		t = plan_find(pl, h->full[i].target);
		if (t != NULL && t->weight > 0) {
			t->weight = 0;
			nfull++;
		}
		i++;
	}
	h->st.targets_full = nfull;
	return 0;
}

const struct place_target *
heal_plan_target(const struct plan *pl, uint64_t id)
{
	return plan_find(pl, id);
}

static uint32_t
domain_of(const struct plan *pl, uint64_t target)
{
	const struct place_target *t = heal_plan_target(pl, target);

	return t ? t->domain : UINT32_MAX;
}

/*
 * A pass's budgets while the fill is uneven: each target's surplus over the
 * mean fill (capacity-weighted) is to move off it, each one's shortfall onto
 * it; this leader takes its part, as the bytes of its stripes are of all
 * the targets hold (every leader plans its part from the same figures).
 */
/* Balance moves planned and not started. */
bool
heal_balance_queued(const struct mheal *h)
{
	for (unsigned i = h->next; i < h->ncand; i++)
		if (h->cand[i].balance)
			return true;
	return false;
}

/* The targets a pass's budgets still let take bytes (h->take), in fill order. */
static void
takers(struct mheal *h)
{
	h->ntake = 0;
	sh_free(h->take);
	h->take = NULL;
	for (unsigned i = 0; i < h->nfill; i++)
		if (h->fill[i].capacity && h->fill[i].in > 0) {
			if (h->take == NULL &&
			    (h->take = sh_calloc(h->nfill, sizeof(*h->take))) == NULL)
				return; /* (no moves this pass) */
			h->take[h->ntake++] = i;
		}
}

/*
 * This leader's part of a surplus (or shortfall) of x bytes, in whole
 * fragments of about f bytes where it is less than one: one fragment with
 * probability x / f, else none (u, uniform in [0, 1), is drawn once per
 * round for all targets, so an out and an in budget round up together).
 * Otherwise a surplus of a fragment or two, split over many leaders, would
 * give each a part too small to move anything, and the fill would stay
 * uneven for good (tests/sim/meta heal_grow, seed 943527733: 1.061).
 */
static int64_t
whole_part(double x, uint64_t f, double u)
{
	if (x <= 0)
		return 0;
	if (f == 0 || x >= (double)f)
		return (int64_t)x;
	return u < x / (double)f ? (int64_t)f : 0;
}

void
heal_balance_budgets(struct mheal *h, double u)
{
	double part, mean;
	uint64_t live = 0, cap = 0;

	for (unsigned i = 0; i < h->nfill; i++) {
		live += h->fill[i].live;
		cap += h->fill[i].capacity;
	}
	part = live ? (double)h->mine / (double)live : 0;
	mean = cap ? (double)live / (double)cap : 0;
	for (unsigned i = 0; i < h->nfill; i++) {
		double surplus = (double)h->fill[i].live - mean * (double)h->fill[i].capacity;

		h->fill[i].out =
		    h->fill[i].capacity ? whole_part(surplus * part, h->frag_seen, u) : 0;
		h->fill[i].in =
		    h->fill[i].capacity ? whole_part(-surplus * part, h->frag_seen, u) : 0;
	}
	takers(h);
}

static struct hfill *
fill_find(struct mheal *h, uint64_t target)
{
	struct hfill key = { .target = target }, *f;

	f = h->fill ? bsearch(&key, h->fill, h->nfill, sizeof(key), fill_by_target) : NULL;
	return f != NULL && f->capacity > 0 ? f : NULL;
}

/*
 * A stripe at full protection while the fill is uneven: its fragments on
 * targets with bytes to give move to the targets with the most room to
 * take, a failure domain each, as long as the pass's budgets last (so only
 * the surplus moves: about the least there is). 1 and *make, to; 0 if
 * nothing moves. Costs O(n x (log targets + the targets that may take)).
 */
int
heal_plan_balance(struct mheal *h, const struct plan *pl, const struct meta_extent *loc,
		  uint32_t *make, uint64_t *to)
{
	unsigned n = (unsigned)loc->d + loc->p;
	uint32_t dom[META_FRAGS_MAX];

	*make = 0;
	memcpy(to, loc->targets, n * sizeof(to[0]));
	if (loc->frag > h->frag_seen)
		h->frag_seen = loc->frag;
	if (h->ntake == 0)
		return 0;
	for (unsigned i = 0; i < n; i++)
		dom[i] = domain_of(pl, to[i]);
	for (unsigned i = 0; i < n; i++) {
		struct hfill *src = fill_find(h, to[i]), *best = NULL;
		uint32_t bdom = 0;

		if (src == NULL || src->out < (int64_t)loc->frag)
			continue;
		for (unsigned k = 0; k < h->ntake; k++) {
			struct hfill *t = &h->fill[h->take[k]];
			const struct place_target *pt;
			bool clash = false;

			if (t->in < (int64_t)loc->frag || (best && t->in <= best->in))
				continue;
			pt = heal_plan_target(pl, t->target);
			if (pt == NULL || pt->weight == 0)
				continue; /* gone, down, failed: never a destination */
			for (unsigned m = 0; m < n && !clash; m++)
				clash = m != i && dom[m] == pt->domain;
			if (!clash) {
				best = t;
				bdom = pt->domain;
			}
		}
		if (best == NULL)
			continue;
		src->out -= loc->frag;
		best->in -= loc->frag;
		to[i] = best->target;
		dom[i] = bdom;
		*make |= 1u << i;
	}
	return *make != 0;
}

void
heal_fill_cancel(struct mheal *h)
{
	struct fround *r = h->fround;

	/* their callbacks come back with -ECANCELED and end the round */
	for (unsigned i = 0; r != NULL && i < r->n; i++)
		if (r->arg[i].h != NULL)
			net_call_cancel(r->arg[i].h);
}
