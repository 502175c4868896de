// SPDX-License-Identifier: Apache-2.0
/*
 * Space reclaim (msvc.h, docs/metadata.md "Extents"): a bucket's leader
 * releases the fragments of the stripes its reclaim queue holds — the
 * stripes whose last extent went with an overwrite, a truncate or an
 * unlink — on every target, then removes the record
 * (META_OP_RECLAIM_DONE). A target that is down or silent leaves the
 * record for the next round; a release of a fragment the target does
 * not have counts as done, and so does one on a target lost (a node down
 * past the rebuild delay, a failed drive): it may never answer, and if it
 * comes back its sweep finds the stripe unknown and releases the
 * fragment. Each round's scan starts at the next group, so records that
 * wait for a node down do not keep every slot from the others. The queue
 * is a replicated record, so a new leader picks up where the old one
 * stopped.
 */
#include <string.h>

#include "../store/store.h"
#include "../store/store_proto.h"
#include "meta_done.h"
#include "msvc_int.h"

SH_LOG_FACILITY("meta.reclaim");

#define TICK_NS	   (1000ull * 1000 * 1000)
#define CALL_NS	   (3ull * 1000 * 1000 * 1000)
#define INFLIGHT   64 /* stripes being released at once, per filesystem */
#define SCAN_BATCH INFLIGHT
#define AGAIN_NS   (1000ull * 1000) /* a backlog: scan again this soon as jobs end */

struct rjob;

struct rcall {
	struct rjob *j;
	struct net_call *h;
	int idx;
};

struct rjob {
	struct sh_list link; /* in fs->reclaims */
	struct mfs *fs;
	uint16_t bucket;
	struct meta_extent e;
	unsigned pending;
	int status;
	bool cancelled;
	struct rcall calls[META_FRAGS_MAX];
};

static void
job_free(struct rjob *j)
{
	struct mfs *fs = j->fs;

	sh_list_del(&j->link);
	fs->nreclaims--;
	sh_free(j);
	/* a backlog (a big delete): refill as soon as half the slots are free */
	if (fs->reclaim_more && fs->nreclaims <= INFLIGHT / 2 && !fs->closing) {
		fs->reclaim_more = false; /* the scan says again if there is still more */
		env_timer_arm(&fs->reclaim_tick, AGAIN_NS);
	}
	mfs_unref(fs);
}

static void
on_done(void *arg, int status, const struct meta_result *r)
{
	struct rjob *j = arg;

	if (status == 0 && r->status == 0)
		sh_log_debug("stripe %llx released (%u fragments)", (unsigned long long)j->e.stripe,
			     (unsigned)(j->e.d + j->e.p));
	job_free(j);
}

/* Every fragment answered: if all are gone, the record goes too. */
static void
fragment_done(struct rjob *j, int idx, int status)
{
	struct mgroup *g;
	struct meta_cmd c;

	if (idx >= 0)
		j->calls[idx].h = NULL;
	/* -ENOENT: never written there, or released before */
	if (status < 0 && status != -ENOENT && j->status == 0)
		j->status = status;
	if (status < 0 && status != -ENOENT && idx >= 0)
		sh_log_debug("stripe %llx: fragment %d on target %llu not released: %s (the "
			     "record stays)",
			     (unsigned long long)j->e.stripe, idx,
			     (unsigned long long)j->e.targets[idx], sh_strerror(status));
	if (--j->pending > 0)
		return;
	g = mfs_group(j->fs, j->bucket);
	if (j->cancelled || j->fs->closing || j->status < 0 || g == NULL || !mgroup_ready(g)) {
		job_free(j); /* the record stays: the next round tries again */
		return;
	}
	c = (struct meta_cmd){ .op = META_OP_RECLAIM_DONE,
			       .ver = 1,
			       .now = env_realtime(j->fs->s->env),
			       .upto = j->e.stripe };
	if (mgroup_propose(g, j->bucket, &c, on_done, j) < 0)
		job_free(j);
}

static void
on_reply(void *arg, int status, const struct net_msg *reply)
{
	struct rcall *rc = arg;

	(void)reply;
	fragment_done(rc->j, rc->idx, status);
}

static void
on_local(void *arg, int status)
{
	struct rcall *rc = arg;

	fragment_done(rc->j, rc->idx, status);
}

static void
job_start(struct mfs *fs, uint16_t bucket, const struct meta_extent *e)
{
	struct msvc *s = fs->s;
	unsigned n = (unsigned)e->d + e->p;
	struct rjob *j = sh_calloc(1, sizeof(*j));

	if (j == NULL)
		return;
	j->fs = fs;
	j->bucket = bucket;
	j->e = *e;
	j->pending = n + 1; /* held until every call is made */
	fs->refs++;
	fs->nreclaims++;
	sh_list_add_tail(&fs->reclaims, &j->link);
	for (unsigned i = 0; i < n; i++) {
		struct store_proto_req r = { .target = e->targets[i],
					     .stripe = e->stripe,
					     .idx = i };
		uint8_t hdr[STORE_PROTO_HDR + 8];
		struct iovec iov = { hdr, store_proto_encode(NET_OP_STORE_RELEASE, &r, hdr) };
		struct net_call_opts o = { .timeout_ns = CALL_NS, .retries = 1 };
		char addr[CFG_ADDR_MAX];
		uint64_t peer;
		int rc;

		j->calls[i] = (struct rcall){ .j = j, .idx = (int)i };
		if (cfg_target_state(mroute_cfg(s->rt), e->targets[i], env_realtime(s->env)) ==
		    CFG_TGT_LOST) {
			fragment_done(j, (int)i, -ENOENT); /* (its sweep, if it comes back) */
			continue;
		}
		rc = mplace_target(mroute_cfg(s->rt), e->targets[i], &peer, addr);
		if (rc == 0 && peer == net_node_id(s->net)) {
			struct store *st =
			    s->p.store_local ? s->p.store_local(s->p.arg, e->targets[i]) : NULL;

			rc = st ? store_release(st, e->stripe, i, on_local, &j->calls[i]) : -ENODEV;
		} else if (rc == 0 && (rc = net_peer_ensure(s->net, peer, addr)) == 0)
			rc = net_call(s->net, peer, NET_OP_STORE_RELEASE, &iov, 1, &o, on_reply,
				      &j->calls[i], &j->calls[i].h);
		if (rc < 0)
			fragment_done(j, (int)i, rc);
	}
	fragment_done(j, -1, 0); /* drop the hold */
}

struct scan {
	struct mfs *fs;
	uint16_t bucket;
	struct meta_extent got[SCAN_BATCH];
	unsigned n;
};

static bool
in_flight(struct mfs *fs, uint64_t stripe)
{
	struct sh_list *pos;

	sh_list_for_each (pos, &fs->reclaims)
		if (sh_list_entry(pos, struct rjob, link)->e.stripe == stripe)
			return true;
	return false;
}

static int
on_record(void *arg, const struct meta_extent *e)
{
	struct scan *sc = arg;

	if (sc->n == SCAN_BATCH || sc->fs->nreclaims + sc->n >= INFLIGHT) {
		sc->fs->reclaim_more = true;
		return 1;
	}
	if (!in_flight(sc->fs, e->stripe))
		sc->got[sc->n++] = *e;
	return 0;
}

/* ---- dedup claims of writers that never committed ---- */

struct kjob {
	struct mfs *fs;
	uint16_t bucket;
	unsigned slot;
	uint64_t claim;
};

static void
kjob_free(struct kjob *k)
{
	k->fs->kills[k->slot] = 0;
	mfs_unref(k->fs);
	sh_free(k);
}

static void
on_released(void *arg, int status, const struct meta_result *r)
{
	struct kjob *k = arg;

	if (status == 0 && r->status == 0)
		sh_log_info("bucket %u: claim %llx was never committed: its holds released",
			    k->bucket, (unsigned long long)k->claim);
	kjob_free(k);
}

/* The file's bucket answered: committed (its CLAIM_DONE comes), or refused from now on. */
static void
on_killed(void *arg, int status, const struct mp_reply *rep)
{
	struct kjob *k = arg;
	struct mgroup *g = mfs_group(k->fs, k->bucket);
	struct meta_cmd c = { .op = META_OP_DEDUP_RELEASE, .ver = 1, .upto = k->claim };

	if (status < 0 || rep == NULL || rep->aux != 0 || k->fs->closing || g == NULL ||
	    !mgroup_ready(g)) {
		kjob_free(k); /* unreachable, or committed: asked again next round if still here */
		return;
	}
	c.now = env_realtime(k->fs->s->env);
	if (mgroup_propose(g, k->bucket, &c, on_released, k) < 0)
		kjob_free(k);
}

struct kscan {
	struct mfs *fs;
	uint16_t bucket;
};

static int
on_old_claim(void *arg, uint64_t claim, uint16_t owner, uint64_t when)
{
	struct kscan *ks = arg;
	struct mfs *fs = ks->fs;
	struct meta_cmd c = { .op = META_OP_DEDUP_KILL, .ver = 1, .upto = claim };
	struct kjob *k;
	unsigned slot = KILLS_MAX;

	(void)when;
	for (unsigned i = 0; i < KILLS_MAX; i++) {
		if (fs->kills[i] == claim)
			return 0; /* being asked */
		if (fs->kills[i] == 0 && slot == KILLS_MAX)
			slot = i;
	}
	if (slot == KILLS_MAX || (k = sh_calloc(1, sizeof(*k))) == NULL)
		return 1;
	*k = (struct kjob){ .fs = fs, .bucket = ks->bucket, .slot = slot, .claim = claim };
	fs->kills[slot] = claim;
	fs->refs++;
	c.now = env_realtime(fs->s->env);
	if (msvc_call_cmd(fs, owner, &c, CALL_NS, on_killed, k) < 0)
		kjob_free(k);
	return 0;
}

static void
on_forgot(void *arg, int status, const struct meta_result *r)
{
	(void)arg;
	(void)status;
	(void)r; /* what is left (more than one command's worth) goes next round */
}

/*
 * Records of bucket b kept `keep` ns (refused dedup claims, request tags)
 * that are older: forgotten (one command, if there are any).
 */
static void
forget_old(struct mfs *fs, struct mgroup *g, uint16_t b, uint8_t op, uint64_t keep,
	   int (*forget)(struct meta_bucket *b, uint64_t before, bool dry, unsigned *n))
{
	uint64_t now = env_realtime(fs->s->env);
	struct meta_cmd c = { .op = op, .ver = 1, .now = now };
	struct meta_bucket mb;
	unsigned n = 0;

	if (now < keep || mgroup_read(g, b, &mb) < 0)
		return;
	c.upto = now - keep;
	(void)forget(&mb, c.upto, true, &n);
	meta_txn_abort(mb.t);
	if (n > 0)
		(void)mgroup_propose(g, b, &c, on_forgot, NULL);
}

/* Claims older than the claim age in bucket b of group g: ask their files' buckets. */
static void
old_claims(struct mfs *fs, struct mgroup *g, uint16_t b)
{
	uint64_t age = fs->s->p.claim_age_ns ? fs->s->p.claim_age_ns : CLAIM_AGE_NS;
	uint64_t now = env_realtime(fs->s->env);
	struct kscan ks = { fs, b };
	struct meta_bucket mb;

	if (now < age || mgroup_read(g, b, &mb) < 0)
		return;
	(void)meta_dedup_claims(&mb, now - age, on_old_claim, &ks);
	meta_txn_abort(mb.t);
}

static void
on_tick(struct env_timer *t)
{
	struct mfs *fs = t->arg;

	if (fs->closing)
		return;
	fs->reclaim_more = fs->nreclaims >= INFLIGHT;
	for (uint32_t k = 0; k < fs->ngroups && fs->nreclaims < INFLIGHT; k++) {
		uint32_t g = (fs->reclaim_from + k) % fs->ngroups;
		const uint16_t *b;
		unsigned nb;

		if (fs->groups[g] == NULL || !mgroup_ready(fs->groups[g]))
			continue;
		b = mgroup_buckets(fs->groups[g], &nb);
		for (unsigned i = 0; i < nb && fs->nreclaims < INFLIGHT; i++) {
			struct scan sc = { .fs = fs, .bucket = b[i] };
			struct meta_bucket mb;

			old_claims(fs, fs->groups[g], b[i]);
			forget_old(fs, fs->groups[g], b[i], META_OP_DEDUP_FORGET,
				   META_REFUSED_KEEP_NS, meta_dedup_forget_refused);
			forget_old(fs, fs->groups[g], b[i], META_OP_DONE_FORGET, META_DONE_KEEP_NS,
				   meta_done_forget);
			msvc_orphans_reap(fs, fs->groups[g], g, b[i]);
			if (mgroup_read(fs->groups[g], b[i], &mb) < 0)
				continue;
			(void)meta_reclaims(&mb, on_record, &sc);
			meta_txn_abort(mb.t);
			for (unsigned x = 0; x < sc.n; x++)
				job_start(fs, b[i], &sc.got[x]);
		}
	}
	if (fs->ngroups > 0)
		fs->reclaim_from = (fs->reclaim_from + 1) % fs->ngroups;
	env_timer_arm_period(&fs->reclaim_tick, TICK_NS);
}

void
msvc_reclaim_start(struct mfs *fs)
{
	env_timer_init(fs->s->env, &fs->reclaim_tick, on_tick, fs);
	env_timer_arm_period(&fs->reclaim_tick, TICK_NS);
}

void
msvc_reclaim_cancel(struct mfs *fs)
{
	struct sh_list *pos;

	env_timer_cancel(&fs->reclaim_tick);
	/* their callbacks come back with -ECANCELED and free the jobs */
	sh_list_for_each (pos, &fs->reclaims) {
		struct rjob *j = sh_list_entry(pos, struct rjob, link);

		j->cancelled = true;
		for (unsigned i = 0; i < (unsigned)j->e.d + j->e.p; i++)
			if (j->calls[i].h)
				net_call_cancel(j->calls[i].h);
	}
}
