// SPDX-License-Identifier: Apache-2.0
/*
 * Self-healing (msvc.h, docs/healing.md): each bucket's leader keeps the
 * stripes its bucket names at full protection. A pass reads every stripe
 * record of the buckets led here and sorts the stripes by how many
 * fragments they miss (on targets lost, or down); a job per stripe, most
 * endangered first, reads D surviving fragments, decodes the others, writes
 * the ones to re-create on targets of failure domains the stripe does not
 * use yet (place_refill), and switches the stripe's record to them in one
 * command (META_OP_RELOCATE): a reader sees the old place or the new one,
 * both hold the same bytes. Stripes written while domains were down
 * (fragments sharing one) are spread out the same way once they can be,
 * and the fragment that moved is released where it was.
 *
 * Fragments are immutable and keyed by (stripe, index), so a job that a
 * crash, a new leader or a new failure interrupts leaves at worst copies no
 * record names, which the orphan sweep releases; the next pass plans again
 * from what the records say. Every node leads its share of the groups, so
 * every node rebuilds its share. While clients move data through a node,
 * the jobs it starts each second move at most rebuild-share percent of the
 * bytes they moved in the last (a share of the node's bandwidth, as
 * Ceph's mClock profiles give recovery); with no client traffic, as many
 * as JOBS_MAX at once.
 */
#include <stdlib.h>
#include <string.h>

#include "../data/ec.h"
#include "../store/store.h"
#include "../store/store_proto.h"
#include "msvc_heal_int.h"

SH_LOG_FACILITY("meta.heal");

static void
job_free(struct hjob *j)
{
	struct mfs *fs = j->fs;
	struct mheal *h = fs->heal;

	if (j->balance) {
		h->bal_jobs--;
		h->bal_end = env_now(fs->s->env);
	}
	for (unsigned i = 0; i < META_FRAGS_MAX; i++)
		sh_free(j->frags[i]);
	sh_list_del(&j->link);
	h->njobs--;
	h->st.in_flight = h->njobs;
	sh_free(j);
	if (!fs->closing)
		env_timer_arm(&h->tick, 1000 * 1000); /* the next one, soon */
	mfs_unref(fs);
}

static const struct cfg *
cfg_of(struct mfs *fs)
{
	return mroute_cfg(fs->s->rt);
}

/*
 * Another job may start: fewer than JOBS_MAX run, and the bytes started
 * this second are within the cap (one may always start when none runs and
 * none started: the rebuild never stops under load, it slows down).
 */
static bool
may_start(const struct mheal *h)
{
	return h->njobs < JOBS_MAX &&
	       (h->cap == 0 || h->spent < h->cap || (h->njobs == 0 && h->spent == 0));
}

/* What a job moves: D fragments read, the ones it makes written. */
static void
spend(struct mheal *h, const struct hjob *j)
{
	h->spent += ((uint64_t)j->loc.d + (unsigned)__builtin_popcount(j->make)) * j->loc.frag;
}

/* ---- fragment calls: to this endpoint's own stores, or over the network ---- */

static void call_done(struct hcall *c, int status);

static void
on_reply(void *arg, int status, const struct net_msg *reply)
{
	struct hcall *c = arg;
	struct hjob *j = c->j;

	c->h = NULL;
	if (status == 0 && !c->put) {
		if (reply->len != j->loc.frag)
			status = -EBADMSG;
		else
			memcpy(j->frags[c->idx], reply->buf->data + reply->off, reply->len);
	}
	call_done(c, status);
}

static void
on_local(void *arg, int rc)
{
	struct hcall *c = arg;

	if (rc >= 0 && !c->put && (uint32_t)rc != c->j->loc.frag)
		rc = -EBADMSG;
	call_done(c, rc < 0 ? rc : 0);
}

/* Read fragment idx from where the record says, or write it to j->to[idx]. */
static int
call_start(struct hjob *j, unsigned idx, bool put)
{
	struct msvc *s = j->fs->s;
	uint64_t target = put ? j->to[idx] : j->loc.targets[idx];
	struct store_proto_req r = {
		.target = target, .stripe = j->loc.stripe, .idx = idx, .len = j->loc.frag
	};
	uint8_t hdr[STORE_PROTO_HDR + 8];
	struct iovec iov[2];
	struct net_call_opts o = { .timeout_ns = CALL_NS, .retries = 1 };
	char addr[CFG_ADDR_MAX];
	struct hcall *c = &j->calls[idx];
	struct store *st;
	uint64_t peer;
	int rc, niov = 0;

	*c = (struct hcall){ .j = j, .idx = idx, .put = put };
	rc = mplace_target(cfg_of(j->fs), target, &peer, addr);
	if (rc < 0)
		return rc;
	if (peer == net_node_id(s->net)) {
		st = s->p.store_local ? s->p.store_local(s->p.arg, target) : NULL;
		if (st == NULL)
			return -ENODEV;
		return put ? store_append(st, r.stripe, idx, j->frags[idx], r.len, on_local, c)
			   : store_read(st, r.stripe, idx, 0, r.len, j->frags[idx], on_local, c);
	}
	rc = net_peer_ensure(s->net, peer, addr);
	if (rc < 0)
		return rc;
	if (put)
		iov[niov++] = (struct iovec){ j->frags[idx], r.len };
	iov[niov++] =
	    (struct iovec){ hdr, store_proto_encode(put ? NET_OP_STORE_PUT : NET_OP_STORE_GET, &r,
						    hdr) };
	return net_call(s->net, peer, put ? NET_OP_STORE_PUT : NET_OP_STORE_GET, iov, niov, &o,
			on_reply, c, &c->h);
}

/* ---- a job: read D, decode, write the new ones, switch the record ---- */

static void
job_fail(struct hjob *j, int status, const char *what)
{
	struct mheal *h = j->fs->heal;

	if (!j->cancelled)
		sh_log_warn("stripe %llx: %s: %s (planned again at the next pass)",
			    (unsigned long long)j->loc.stripe, what, sh_strerror(status));
	h->st.failed_jobs++;
	h->pass_work = true;
	job_free(j);
}

static void release_moved(struct hjob *j, bool made);

static void
on_relocated(void *arg, int status, const struct meta_result *r)
{
	struct hjob *j = arg;
	struct mheal *h = j->fs->heal;
	unsigned n = (unsigned)__builtin_popcount(j->make);

	if (status == 0)
		status = r->status;
	if (status == -ENOENT) {
		/* the stripe was released meanwhile (its file deleted): nothing names what this
		 * job wrote, so it goes now rather than at the orphan sweep's age */
		release_moved(j, true);
		job_free(j);
		return;
	}
	if (status < 0) {
		job_fail(j, status, "switching its record");
		return;
	}
	if (j->repair) {
		h->st.repaired_frags += n;
		sh_log_info("stripe %llx: fragment %u on target %llu was corrupt: re-created there",
			    (unsigned long long)j->loc.stripe, (unsigned)__builtin_ctz(j->make),
			    (unsigned long long)j->to[__builtin_ctz(j->make)]);
	} else if (j->balance) {
		h->st.balanced_frags += n;
		release_moved(j, false);
	} else if (j->reprotect) {
		h->st.moved_frags += n;
		release_moved(j, false);
	} else {
		h->st.rebuilt_frags += n;
	}
	h->st.rebuilt_bytes += (uint64_t)n * j->loc.frag;
	sh_log_debug("stripe %llx: %u fragment(s) %s", (unsigned long long)j->loc.stripe, n,
		     j->reprotect ? "spread out" : "rebuilt");
	job_free(j);
}

static void
relocate(struct hjob *j)
{
	struct mgroup *g = mfs_group(j->fs, j->bucket);
	struct meta_move mv[META_FRAGS_MAX];
	struct meta_cmd c = { .op = META_OP_RELOCATE,
			      .ver = 1,
			      .now = env_realtime(j->fs->s->env),
			      .upto = j->loc.stripe };
	struct sh_enc e;
	unsigned n = 0;
	int rc;

	for (unsigned i = 0; i < (unsigned)j->loc.d + j->loc.p; i++)
		if ((j->make & 1u << i) && j->to[i] != j->loc.targets[i])
			mv[n++] = (struct meta_move){ .idx = (uint8_t)i,
						      .from = j->loc.targets[i],
						      .to = j->to[i] };
	if (n == 0) { /* re-created where they were: the record stays as it is */
		struct meta_result r = { .status = 0 };

		on_relocated(j, 0, &r);
		return;
	}
	sh_enc_init(&e);
	rc = meta_moves_encode(&e, mv, n);
	if (rc == 0 && sh_enc_error(&e))
		rc = -ENOMEM;
	c.data = e.p;
	c.dlen = e.len;
	if (rc == 0)
		rc = g != NULL && mgroup_ready(g)
			 ? mgroup_propose(g, j->bucket, &c, on_relocated, j)
			 : SH_ENOTLEADER;
	sh_enc_fini(&e);
	if (rc < 0)
		job_fail(j, rc, "switching its record");
}

static void
write_done(struct hjob *j, int status)
{
	if (status < 0 && j->status == 0)
		j->status = status;
	if (--j->pending > 0)
		return;
	if (j->cancelled || j->fs->closing)
		job_fail(j, -ECANCELED, "writing");
	else if (j->status < 0)
		job_fail(j, j->status, "writing its new fragments");
	else
		relocate(j);
}

/* Fragment idx written (or not: a target out of space takes no more for a while). */
static void
put_done(struct hjob *j, unsigned idx, int status)
{
	if (status == -ENOSPC)
		heal_mark_full(j->fs->heal, j->to[idx]);
	write_done(j, status);
}

static void
decode_and_write(struct hjob *j)
{
	unsigned n = (unsigned)j->loc.d + j->loc.p;
	uint32_t missing = ((1u << n) - 1) & ~j->got;
	struct ec_code code;
	struct ec_decoder dec;
	int rc = j->copy ? 0 : ec_code_init(&code, j->loc.d, j->loc.p);

	if (rc == 0 && !j->copy)
		rc = ec_decoder_init(&code, &dec, missing);
	if (rc < 0) {
		job_fail(j, rc, "decoding");
		return;
	}
	if (!j->copy)
		ec_decode(&code, &dec, j->loc.frag, j->frags);
	j->pending = 1; /* held until every write is started */
	for (unsigned i = 0; i < n; i++) {
		if (!(j->make & 1u << i))
			continue;
		j->pending++;
		rc = call_start(j, i, true);
		if (rc < 0)
			put_done(j, i, rc);
	}
	write_done(j, 0);
}

/* The reads a job needs: D to decode from, or the fragments it copies. */
static unsigned
want_of(const struct hjob *j)
{
	return j->copy ? (unsigned)__builtin_popcount(j->make) : j->loc.d;
}

/* Start reads until enough are done or in flight; false if none is in flight. */
static bool
read_more(struct hjob *j)
{
	unsigned n = (unsigned)j->loc.d + j->loc.p;

	for (unsigned i = 0;
	     i < n && (unsigned)__builtin_popcount(j->got) + j->reading < want_of(j); i++) {
		if (!(j->cand & 1u << i) || (j->tried & 1u << i))
			continue;
		j->tried |= 1u << i;
		j->reading++;
		if (call_start(j, i, false) < 0)
			j->reading--;
	}
	return j->reading > 0;
}

static void
read_done(struct hjob *j, unsigned idx, int status)
{
	j->reading--;
	if (status == 0)
		j->got |= 1u << idx;
	else if (!j->cancelled)
		sh_log_info("stripe %llx: fragment %u on target %llu: %s (reading another)",
			    (unsigned long long)j->loc.stripe, idx,
			    (unsigned long long)j->loc.targets[idx], sh_strerror(status));
	if (j->reading > 0)
		return;
	if (j->cancelled || j->fs->closing)
		job_fail(j, -ECANCELED, "reading");
	else if ((unsigned)__builtin_popcount(j->got) >= want_of(j))
		decode_and_write(j);
	else if (!read_more(j))
		job_fail(j, -EIO, "fewer than D of its fragments could be read");
}

static void
call_done(struct hcall *c, int status)
{
	if (c->put)
		put_done(c->j, c->idx, status);
	else
		read_done(c->j, c->idx, status);
}

/* ---- releases of fragments that moved ---- */

static void
on_released(void *arg, int status, const struct net_msg *reply)
{
	(void)arg;
	(void)status;
	(void)reply; /* one that fails is stale: the orphan sweep asks about it later */
}

static void
on_released_local(void *arg, int rc)
{
	(void)arg;
	(void)rc;
}

/*
 * The fragments a re-protection moved are released where they were; made:
 * those the job wrote where it moved them (its stripe is gone).
 */
static void
release_moved(struct hjob *j, bool made)
{
	struct msvc *s = j->fs->s;

	for (unsigned i = 0; i < (unsigned)j->loc.d + j->loc.p; i++) {
		struct store_proto_req r = { .target = made ? j->to[i] : j->loc.targets[i],
					     .stripe = j->loc.stripe,
					     .idx = i };
		uint8_t hdr[STORE_PROTO_HDR + 8];
		struct iovec iov = { hdr, 0 };
		char addr[CFG_ADDR_MAX];
		struct store *st;
		uint64_t peer;

		if (!(j->make & 1u << i) || j->to[i] == j->loc.targets[i] ||
		    mplace_target(cfg_of(j->fs), r.target, &peer, addr) < 0)
			continue;
		if (peer == net_node_id(s->net)) {
			st = s->p.store_local ? s->p.store_local(s->p.arg, r.target) : NULL;
			if (st != NULL)
				(void)store_release(st, r.stripe, i, on_released_local, NULL);
			continue;
		}
		iov.iov_len = store_proto_encode(NET_OP_STORE_RELEASE, &r, hdr);
		if (net_peer_ensure(s->net, peer, addr) == 0)
			(void)net_call(s->net, peer, NET_OP_STORE_RELEASE, &iov, 1, NULL,
				       on_released, NULL, NULL);
	}
}

/* ---- planning ---- */

/* Fragments of loc on targets lost, and on targets down (not lost yet). */
static void
states(const struct cfg *c, const struct meta_extent *loc, uint64_t now, uint32_t *lost,
       uint32_t *down)
{
	*lost = *down = 0;
	for (unsigned i = 0; i < (unsigned)loc->d + loc->p; i++) {
		int st = cfg_target_state(c, loc->targets[i], now);

		if (st == CFG_TGT_LOST)
			*lost |= 1u << i;
		else if (st == CFG_TGT_DOWN)
			*down |= 1u << i;
	}
}

/* Fragments of loc on draining targets (readable, to be moved off). */
static uint32_t
draining(const struct cfg *c, const struct meta_extent *loc, uint64_t now)
{
	uint32_t m = 0;

	for (unsigned i = 0; i < (unsigned)loc->d + loc->p; i++)
		if (cfg_target_state(c, loc->targets[i], now) == CFG_TGT_DRAINING)
			m |= 1u << i;
	return m;
}

static bool
in_flight(struct mheal *h, uint64_t stripe)
{
	struct sh_list *pos;

	sh_list_for_each (pos, &h->jobs)
		if (sh_list_entry(pos, struct hjob, link)->loc.stripe == stripe)
			return true;
	return false;
}

/*
 * What to do with loc: 1 and *make, *to (re-create or move those fragments
 * there; *reprotect when they are still where they are), 0 if nothing can
 * be done now.
 */
static int
plan_stripe(const struct plan *pl, const struct meta_extent *loc, uint32_t *make, uint64_t *to,
	    bool *reprotect)
{
	unsigned n = (unsigned)loc->d + loc->p, shared, now_shared;
	uint32_t all = (1u << n) - 1, lost, down, which;

	states(pl->c, loc, pl->now, &lost, &down);
	*reprotect = lost == 0;
	if (lost == 0) {
		uint32_t dr = draining(pl->c, loc, pl->now);

		if (down != 0)
			return 0; /* a stripe is spread out again once all of it is up */
		if (dr != 0) {	  /* copied off the drives being removed */
			if (place_refill(pl->t, pl->nt, loc->stripe, n, loc->p, loc->targets,
					 all & ~dr, to, &shared) < 0)
				return 0;
			*make = dr;
			return 1;
		}
		now_shared = place_shared(pl->t, pl->nt, loc->targets, n, &which);
		if (now_shared == 0)
			return 0;
		if (place_refill(pl->t, pl->nt, loc->stripe, n, loc->p, loc->targets, all & ~which,
				 to, &shared) < 0 ||
		    shared >= now_shared)
			return 0; /* no more domains up than when it was written */
		*make = which;
		return 1;
	}
	if (place_refill(pl->t, pl->nt, loc->stripe, n, loc->p, loc->targets, all & ~lost, to,
			 &shared) < 0)
		return 0; /* no room on the domains up: it waits */
	*make = lost;
	return 1;
}

/* A job planned: its buffers, on the list, counted, its reads started (it frees itself). */
static void
job_begin(struct mheal *h, struct hjob *j)
{
	unsigned n = (unsigned)j->loc.d + j->loc.p;

	for (unsigned i = 0; i < n; i++)
		if ((j->frags[i] = sh_malloc(j->loc.frag)) == NULL) {
			for (unsigned k = 0; k < i; k++)
				sh_free(j->frags[k]);
			sh_free(j);
			return; /* (planned again by a later pass) */
		}
	sh_list_add_tail(&h->jobs, &j->link);
	h->njobs++;
	h->bal_jobs += j->balance; /* (job_free counts it back, however it ends) */
	h->st.in_flight = h->njobs;
	h->fs->refs++;
	spend(h, j);
	if (!read_more(j))
		job_fail(j, -EIO, "none of its fragments could be asked for");
}

static void
job_start(struct mheal *h, const struct plan *pl, const struct hcand *cd)
{
	struct mfs *fs = h->fs;
	unsigned n = (unsigned)cd->loc.d + cd->loc.p;
	uint32_t lost, down;
	struct hjob *j;

	if (in_flight(h, cd->loc.stripe) || (j = sh_calloc(1, sizeof(*j))) == NULL)
		return;
	j->fs = fs;
	j->bucket = cd->bucket;
	j->loc = cd->loc;
	if (cd->balance) {
		j->balance = j->reprotect = true; /* (moved: released where it was) */
		j->make = cd->make;
		memcpy(j->to, cd->to, sizeof(j->to));
	} else if (!plan_stripe(pl, &j->loc, &j->make, j->to, &j->reprotect)) {
		sh_free(j);
		return;
	}
	states(pl->c, &j->loc, pl->now, &lost, &down);
	j->cand = ((1u << n) - 1) & ~lost & ~down;
	if (j->reprotect && (j->make & j->cand) == j->make) {
		j->copy = true; /* a move of fragments that are there: read them, no decode */
		j->cand = j->make;
	}
	if (!j->copy && (unsigned)__builtin_popcount(j->cand) < j->loc.d) {
		if (down == 0)
			sh_log_error("stripe %llx: fewer than %u of its %u fragments survive: its "
				     "data is lost",
				     (unsigned long long)j->loc.stripe, j->loc.d, n);
		sh_free(j);
		return;
	}
	job_begin(h, j);
}

/* A corrupt fragment reported: re-created from the others, written where it is. */
static bool
repair_start(struct mheal *h, const struct plan *pl, const struct hrepair *rp)
{
	struct mfs *fs = h->fs;
	struct mgroup *g = mfs_group(fs, rp->bucket);
	struct meta_bucket mb;
	struct hjob *j;
	uint32_t lost, down;
	unsigned n;
	int rc;

	if (in_flight(h, rp->stripe))
		return false; /* after the job on it */
	if (g == NULL || !mgroup_ready(g) || mgroup_read(g, rp->bucket, &mb) < 0 ||
	    (j = sh_calloc(1, sizeof(*j))) == NULL)
		return true; /* not led here any more, or no memory: dropped (reported again) */
	rc = meta_stripe_loc(&mb, rp->stripe, &j->loc);
	meta_txn_abort(mb.t);
	n = (unsigned)j->loc.d + j->loc.p;
	if (rc < 0 || rp->idx >= n || j->loc.targets[rp->idx] != rp->target) {
		sh_free(j);
		return true; /* released, or moved since: nothing to repair */
	}
	j->fs = fs;
	j->bucket = rp->bucket;
	j->repair = true;
	j->make = 1u << rp->idx;
	memcpy(j->to, j->loc.targets, sizeof(j->to));
	states(pl->c, &j->loc, pl->now, &lost, &down);
	j->cand = ((1u << n) - 1) & ~lost & ~down & ~j->make;
	job_begin(h, j);
	return true;
}

int
msvc_heal_repair(struct mfs *fs, struct mgroup *g, uint16_t bucket, uint64_t stripe, uint32_t idx,
		 uint64_t target)
{
	struct mheal *h = fs->heal;
	struct meta_extent loc;
	struct meta_bucket mb;
	int rc;

	if (h == NULL || fs->closing)
		return -ESHUTDOWN;
	rc = mgroup_read(g, bucket, &mb);
	if (rc < 0)
		return rc;
	rc = meta_stripe_loc(&mb, stripe, &loc);
	meta_txn_abort(mb.t);
	if (rc < 0)
		return rc;
	if (idx >= (unsigned)loc.d + loc.p || loc.targets[idx] != target)
		return -ESTALE;
	for (unsigned i = 0; i < h->nrep; i++)
		if (h->rep[i].stripe == stripe && h->rep[i].idx == idx)
			return 0; /* queued already */
	if (h->nrep == REPAIRS_MAX)
		return -EBUSY;
	h->rep[h->nrep++] =
	    (struct hrepair){ .bucket = bucket, .idx = idx, .stripe = stripe, .target = target };
	sh_log_warn("stripe %llx: fragment %u on target %llu is corrupt: queued for repair",
		    (unsigned long long)stripe, idx, (unsigned long long)target);
	env_timer_arm(&h->tick, 1000 * 1000);
	return 0;
}

struct pass {
	struct mheal *h;
	struct plan pl;
	uint16_t bucket;
	struct msvc_heal_stats st;
	uint64_t mine;
	bool work, waiting;
};

static void
cand_add(struct mheal *h, uint16_t bucket, const struct meta_extent *loc, unsigned missing,
	 bool balance)
{
	unsigned at = h->ncand;

	if (h->ncand == CANDS_MAX) { /* full: it takes the place of a less endangered one */
		at = 0;
		for (unsigned i = 1; i < h->ncand; i++)
			if (h->cand[i].missing < h->cand[at].missing)
				at = i;
		if (h->cand[at].missing >= missing)
			return;
	} else {
		h->ncand++;
	}
	h->cand[at] = (struct hcand){
		.bucket = bucket, .missing = (uint8_t)missing, .balance = balance, .loc = *loc
	};
	h->last = at;
}

static int
on_stripe(void *arg, const struct meta_extent *loc)
{
	struct pass *ps = arg;
	unsigned n = (unsigned)loc->d + loc->p, missing, level, shared;
	uint32_t lost, down, which, drain;
	uint64_t bytes = (uint64_t)loc->d * loc->frag;

	if (n > 32 || loc->d == 0)
		return 0;
	states(ps->pl.c, loc, ps->pl.now, &lost, &down);
	missing = (unsigned)__builtin_popcount(lost | down);
	level = missing < MSVC_HEAL_LEVELS ? missing : MSVC_HEAL_LEVELS - 1;
	ps->st.stripes[level]++;
	ps->st.bytes[level] += bytes;
	ps->mine += (uint64_t)n * loc->frag;
	if (missing > loc->p)
		ps->st.unreadable++;
	ps->st.pending_bytes += (uint64_t)__builtin_popcount(lost) * loc->frag;
	shared = place_shared(ps->pl.t, ps->pl.nt, loc->targets, n, &which);
	if (shared > 0)
		ps->st.shared++;
	drain = draining(ps->pl.c, loc, ps->pl.now);
	if (drain != 0)
		ps->st.draining++;
	if (down != 0 && lost == 0)
		ps->waiting = true;
	if (lost != 0 || ((shared > 0 || drain != 0) && down == 0)) {
		uint32_t make;
		uint64_t to[META_FRAGS_MAX];
		bool rp;

		if (lost != 0)
			ps->work = true;
		if (!in_flight(ps->h, loc->stripe) && plan_stripe(&ps->pl, loc, &make, to, &rp)) {
			ps->work = true;
			cand_add(ps->h, ps->bucket, loc, missing, false);
		} else if (lost == 0) {
			ps->waiting = true; /* for a domain with room: passes go on, paced */
		}
	} else if (ps->h->balancing && lost == 0 && down == 0 && shared == 0 && drain == 0) {
		uint32_t make;
		uint64_t to[META_FRAGS_MAX];

		if (!in_flight(ps->h, loc->stripe) &&
		    heal_plan_balance(ps->h, &ps->pl, loc, &make, to)) {
			ps->work = true;
			ps->st.balance_queued++;
			cand_add(ps->h, ps->bucket, loc, 0, true);
			ps->h->cand[ps->h->last].make = make;
			memcpy(ps->h->cand[ps->h->last].to, to, sizeof(to));
		}
	}
	return 0;
}

static int
by_missing(const void *a, const void *b)
{
	const struct hcand *x = a, *y = b;

	if (x->missing != y->missing)
		return x->missing > y->missing ? -1 : 1;
	return x->loc.stripe < y->loc.stripe ? -1 : x->loc.stripe > y->loc.stripe;
}

/* Every stripe of the buckets led here: counted by protection, and planned. */
static void
pass(struct mheal *h, const struct plan *pl)
{
	struct mfs *fs = h->fs;
	struct pass ps = { .h = h, .pl = *pl };

	h->ncand = h->next = 0;
	for (uint32_t g = 0; g < fs->ngroups; g++) {
		const uint16_t *b;
		unsigned nb;

		if (fs->groups[g] == NULL || !mgroup_ready(fs->groups[g]))
			continue;
		b = mgroup_buckets(fs->groups[g], &nb);
		for (unsigned i = 0; i < nb; i++) {
			struct meta_bucket mb;

			if (mgroup_read(fs->groups[g], b[i], &mb) < 0)
				continue;
			ps.bucket = b[i];
			if (meta_stripe_locs(&mb, 0, on_stripe, &ps) == 0)
				ps.st.buckets++;
			meta_txn_abort(mb.t);
		}
	}
	qsort(h->cand, h->ncand, sizeof(h->cand[0]), by_missing);
	memcpy(h->st.stripes, ps.st.stripes, sizeof(h->st.stripes));
	memcpy(h->st.bytes, ps.st.bytes, sizeof(h->st.bytes));
	h->st.unreadable = ps.st.unreadable;
	h->st.shared = ps.st.shared;
	h->st.pending_bytes = ps.st.pending_bytes;
	h->st.buckets = ps.st.buckets;
	h->st.balance_queued = ps.st.balance_queued;
	h->st.draining = ps.st.draining;
	h->mine = ps.mine;
	h->st.pass_epoch = pl->c->epoch;
	h->st.queued = h->ncand;
	h->st.passes++;
	h->st.pass_at = pl->now;
	h->pass_at = pl->now;
	h->pass_epoch = pl->c->epoch;
	h->pass_work = ps.work;
	h->pass_waiting = ps.waiting;
	if (h->ncand > 0)
		sh_log_info("filesystem %u: %u stripe(s) to heal here, the most endangered "
			    "missing %u fragment(s)",
			    fs->id, h->ncand, h->cand[0].missing);
}

/*
 * Bytes this endpoint moved to and from clients (their ids have the top bit
 * set): what the rebuild shares the drives and the network with.
 */
static uint64_t
client_bytes(const struct msvc *s)
{
	struct net_peer_stats *ps = sh_malloc(PEERS_MAX * sizeof(*ps));
	unsigned n = ps ? net_peer_stats(s->net, ps, PEERS_MAX) : 0;
	uint64_t b = 0;

	for (unsigned i = 0; i < n && i < PEERS_MAX; i++)
		if (ps[i].id >> 63)
			b += ps[i].bytes_sent + ps[i].bytes_received;
	sh_free(ps);
	return b;
}

/* Which groups lead and serve here now, as a hash (a pass covers them). */
static uint64_t
led_of(const struct mfs *fs)
{
	uint64_t h = 0;

	for (uint32_t g = 0; g < fs->ngroups; g++)
		if (fs->groups[g] != NULL && mgroup_ready(fs->groups[g]))
			h ^= sh_hash_u64((uint64_t)g + 1);
	return h;
}

/* Targets lost now (a node down past the rebuild delay becomes one without an epoch). */
static unsigned
lost_of(const struct cfg *c, uint64_t now)
{
	unsigned n = 0;

	for (uint32_t i = 0; i < c->ndrives; i++)
		n += cfg_target_state(c, c->drives[i].id, now) == CFG_TGT_LOST;
	return n;
}

/* Commands that map stripes (new ones counted at the next pass). */
static uint64_t
writes_of(const struct msvc *s)
{
	return s->st.requests[MSVC_SLOT_CMD + META_OP_EXTENT] +
	       s->st.requests[MSVC_SLOT_CMD + META_OP_DEDUP_CLAIM];
}

static void
on_tick(struct env_timer *t)
{
	struct mheal *h = t->arg;
	struct mfs *fs = h->fs;
	struct plan pl = { .c = cfg_of(fs), .now = env_realtime(fs->s->env) };
	uint64_t mono = env_now(fs->s->env), wr = writes_of(fs->s);
	uint64_t led = led_of(fs);
	unsigned lost = lost_of(pl.c, pl.now);
	bool due;

	if (fs->closing)
		return;
	if (mono - h->client_at >= TICK_NS) { /* (ticks come sooner as jobs end) */
		uint64_t cb = client_bytes(fs->s), dt = mono - h->client_at;
		uint64_t per_s = (cb - h->client) * SH_NSEC_PER_SEC / dt;

		h->idle = per_s < BUSY_BYTES;
		/* clients busy here: the rebuild adds at most its share of their bytes */
		h->cap = h->idle ? 0 : per_s * pl.c->rebuild_share / 100;
		h->spent = 0;
		h->client = cb;
		h->client_at = mono;
	}
	if (mono - h->rate_at >= TICK_NS) {
		uint64_t dt = mono - h->rate_at, db = h->st.rebuilt_bytes - h->bytes_at;

		h->st.rate_bps = h->rate_at ? db * SH_NSEC_PER_SEC / dt : 0;
		h->rate_at = mono;
		h->bytes_at = h->st.rebuilt_bytes;
	}
	due = pl.c->epoch != h->pass_epoch || led != h->led || lost != h->lost ||
	      (h->next >= h->ncand && h->njobs == 0 &&
	       (h->pass_work || (h->pass_waiting && pl.now - h->pass_at >= WAITING_NS) ||
		(wr != h->writes && pl.now - h->pass_at >= WRITTEN_NS) ||
		pl.now - h->pass_at >= CLEAN_NS));
	if (!h->filling && mono - h->fill_at >= FILL_NS) {
		h->fill_at = mono;
		heal_fill_ask(h, pl.c);
	}
	if (heal_plan_targets(h, &pl) < 0)
		goto out;
	if (due) {
		h->writes = wr;
		h->led = led;
		h->lost = lost;
		pass(h, &pl);
	}
	/* corrupt fragments first: they are reads decoding now */
	for (unsigned i = 0; i < h->nrep && may_start(h);) {
		if (repair_start(h, &pl, &h->rep[i]))
			memmove(&h->rep[i], &h->rep[i + 1], (--h->nrep - i) * sizeof(h->rep[0]));
		else
			i++;
	}
	while (may_start(h) && h->next < h->ncand)
		job_start(h, &pl, &h->cand[h->next++]);
	h->st.queued = h->ncand - h->next;
	sh_free(pl.t);
out:
	env_timer_arm(&h->tick, TICK_NS);
}

int
msvc_heal_start(struct mfs *fs)
{
	struct mheal *h = sh_calloc(1, sizeof(*h));

	if (h == NULL || (h->cand = sh_calloc(CANDS_MAX, sizeof(*h->cand))) == NULL) {
		sh_free(h);
		return -ENOMEM;
	}
	h->fs = fs;
	sh_list_init(&h->jobs);
	fs->heal = h;
	env_timer_init(fs->s->env, &h->tick, on_tick, h);
	env_timer_arm(&h->tick, TICK_NS);
	return 0;
}

void
msvc_heal_cancel(struct mfs *fs)
{
	struct mheal *h = fs->heal;
	struct sh_list *pos;

	if (h == NULL)
		return;
	env_timer_cancel(&h->tick);
	heal_fill_cancel(h);
	/* their callbacks come back with -ECANCELED and free the jobs */
	sh_list_for_each (pos, &h->jobs) {
		struct hjob *j = sh_list_entry(pos, struct hjob, link);

		j->cancelled = true;
		for (unsigned i = 0; i < (unsigned)j->loc.d + j->loc.p; i++)
			if (j->calls[i].h)
				net_call_cancel(j->calls[i].h);
	}
}

void
msvc_heal_free(struct mfs *fs)
{
	if (fs->heal == NULL)
		return;
	sh_free(fs->heal->cand);
	sh_free(fs->heal->fill);
	sh_free(fs->heal->take);
	sh_free(fs->heal);
	fs->heal = NULL;
}

void
msvc_heal_stats_add(struct msvc_heal_stats *sum, const struct msvc_heal_stats *st)
{
	for (unsigned i = 0; i < MSVC_HEAL_LEVELS; i++) {
		sum->stripes[i] += st->stripes[i];
		sum->bytes[i] += st->bytes[i];
	}
	sum->unreadable += st->unreadable;
	sum->shared += st->shared;
	sum->pending_bytes += st->pending_bytes;
	sum->rebuilt_frags += st->rebuilt_frags;
	sum->moved_frags += st->moved_frags;
	sum->repaired_frags += st->repaired_frags;
	sum->balanced_frags += st->balanced_frags;
	sum->balance_queued += st->balance_queued;
	sum->draining += st->draining;
	if (st->fill_ratio_milli > sum->fill_ratio_milli)
		sum->fill_ratio_milli = st->fill_ratio_milli;
	if (st->targets_full > sum->targets_full)
		sum->targets_full = st->targets_full;
	sum->rebuilt_bytes += st->rebuilt_bytes;
	sum->failed_jobs += st->failed_jobs;
	sum->in_flight += st->in_flight;
	sum->queued += st->queued;
	sum->rate_bps += st->rate_bps;
	sum->passes += st->passes;
	sum->buckets += st->buckets;
	if (st->pass_epoch < sum->pass_epoch)
		sum->pass_epoch = st->pass_epoch; /* (a sum's starts at UINT64_MAX) */
	if (sum->pass_at == 0 || (st->pass_at && st->pass_at < sum->pass_at))
		sum->pass_at = st->pass_at; /* the oldest: what the sum is at least as new as */
}

void
msvc_heal_add(const struct mfs *fs, struct msvc_heal_stats *sum)
{
	if (fs->heal != NULL)
		msvc_heal_stats_add(sum, &fs->heal->st);
}
