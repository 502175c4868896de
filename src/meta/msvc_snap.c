// SPDX-License-Identifier: Apache-2.0
/*
 * Snapshots at the metadata groups (docs/snapshots.md). Every tick, for
 * each filesystem:
 *
 * - each group this node leads and serves is brought to what the
 *   configuration says: the version its writes carry and the snapshots
 *   it keeps, every one not being deleted (META_OP_VERSION); after that
 *   list changed, its buckets are settled, SETTLE_KEYS keys a step
 *   (META_OP_SETTLE), so that what only a deleted snapshot read goes;
 * - the leader of the filesystem's first group, while a snapshot is being
 *   created or deleted, asks every group where it stands (MP_VERSION) and
 *   proposes the snapshot's next state: ready once every group writes past
 *   its version (only then does it read the same everywhere), forgotten
 *   once no group keeps it and every group has settled.
 *
 * Everything is asked again each tick from what the groups and the
 * configuration say, so a leader change or a crash midway loses nothing.
 */
#include <stdio.h>
#include <string.h>

#include "meta_version.h"
#include "msvc_int.h"

SH_LOG_FACILITY("meta.snap");

#define SNAP_TICK_NS (100ull * 1000 * 1000)
#define SETTLE_KEYS  META_SETTLE_MAX
#define RESTORE_KEYS META_RESTORE_MAX
/*
 * Paused this long, no client still caches what a leader said before (it
 * may for MP_CACHE_MS), and every client that can reach the cluster has
 * asked for the configuration (every 500 ms) and knows its handles are
 * stale.
 */
#define PAUSE_NS (1000ull * 1000 * 1000)
_Static_assert(PAUSE_NS >= 2ull * MP_CACHE_MS * 1000 * 1000, "every cache lease ends");
/* a snapshot being created: every group asked again this soon (and a little more per group) */
#define REASK_NS       (5ull * 1000 * 1000)
#define REASK_GROUP_NS (20ull * 1000)
#define ASK_NS	       (2ull * 1000 * 1000 * 1000)

_Static_assert(META_KEEP_MAX >= CFG_FS_SNAPS_MAX, "a group keeps every snapshot its fs may");

struct vjob {
	struct mfs *fs;
	uint32_t gi;
};

static void reconcile_group(struct mfs *fs, uint32_t gi);

static void
on_step(void *arg, int status, const struct meta_result *r)
{
	struct vjob *j = arg;
	struct mfs *fs = j->fs;

	if (status < 0 && status != SH_ENOTLEADER && !fs->closing)
		sh_log_warn("filesystem %u group %u: version step: %s", fs->id, j->gi,
			    sh_strerror(status));
	fs->snap_busy[j->gi] = false;
	/* settling: the next step at once (one in flight a group is all the pacing it gets:
	 * each is a commit of its own, and what it frees is released in the background) */
	if (status == 0 && r != NULL && r->status == 0 && !fs->closing)
		reconcile_group(fs, j->gi);
	mfs_unref(fs);
	sh_free(j);
}

static void
propose_step(struct mfs *fs, uint32_t gi, uint16_t bucket, const struct meta_cmd *c)
{
	struct vjob *j = sh_calloc(1, sizeof(*j));

	if (j == NULL)
		return;
	j->fs = fs;
	j->gi = gi;
	fs->refs++;
	fs->snap_busy[gi] = true;
	if (mgroup_propose(fs->groups[gi], bucket, c, on_step, j) < 0) {
		fs->snap_busy[gi] = false;
		mfs_unref(fs);
		sh_free(j);
	}
}

/* A restore under way that group gi has not done: its next step proposed (true). */
static bool
restore_step(struct mfs *fs, uint32_t gi, const struct meta_version *vs)
{
	const struct cfg_fs *f = cfg_fs_by_id(mroute_cfg(fs->s->rt), fs->id);
	struct meta_cmd c = { .op = META_OP_RESTORE, .ver = 1, .flags = RESTORE_KEYS };
	uint8_t data[8];

	if (f == NULL || f->restore_phase != CFG_RESTORE_REVERTING ||
	    vs->repoch >= f->restore_epoch ||
	    (vs->rdoing == f->restore_epoch && vs->rcursor >= vs->nb))
		return false;
	meta_le64_put(data, f->restore_ver);
	c.now = env_realtime(fs->s->env);
	c.upto = f->restore_epoch;
	c.data = data;
	c.dlen = sizeof(data);
	propose_step(
	    fs, gi, vs->rdoing == f->restore_epoch ? vs->buckets[vs->rcursor] : vs->buckets[0], &c);
	return true;
}

/* Bring group gi (led and served here) to the configuration's version and kept list. */
static void
reconcile(struct mfs *fs, uint32_t gi, uint64_t ver, const uint64_t *keep, unsigned nkeep)
{
	const struct meta_version *vs = mgroup_version(fs->groups[gi]);
	uint8_t data[META_KEEP_MAX * 8];
	struct meta_cmd c = { .ver = 1, .now = env_realtime(fs->s->env), .data = data };
	uint16_t bucket;

	if (vs->nb == 0)
		return;
	if (vs->ver < ver || vs->nkeep != nkeep ||
	    memcmp(vs->keep, keep, nkeep * sizeof(*keep)) != 0) {
		for (unsigned i = 0; i < nkeep; i++)
			meta_le64_put(data + i * 8, keep[i]);
		c.op = META_OP_VERSION;
		c.ver = ver > vs->ver ? ver : vs->ver;
		c.data = data;
		c.dlen = nkeep * 8;
		propose_step(fs, gi, vs->buckets[0], &c);
	} else if (restore_step(fs, gi, vs)) {
		/* (proposed: a restore goes before settling) */
	} else if (msvc_clone_step(fs, vs, &c, &bucket)) {
		propose_step(fs, gi, bucket, &c); /* (a clone's branch: before settling too) */
	} else if (vs->settled != vs->gen && vs->cursor < vs->nb) {
		c.op = META_OP_SETTLE;
		c.upto = vs->gen;
		c.flags = SETTLE_KEYS;
		propose_step(fs, gi, vs->buckets[vs->cursor], &c);
	}
}

/* Group gi is led and served here, and nothing of it is in flight: it may take a step. */
static bool
group_free(const struct mfs *fs, uint32_t gi)
{
	struct mgroup *g = gi < fs->ngroups ? fs->groups[gi] : NULL;

	return g != NULL && mgroup_ready(g) && !fs->snap_busy[gi];
}

/* What the configuration asks of fs's groups: the version to write at, the versions kept. */
static uint64_t
wanted(const struct mfs *fs, uint64_t *keep, unsigned *nkeep)
{
	const struct cfg *c = mroute_cfg(fs->s->rt);
	const struct cfg_fs *f = cfg_fs_by_id(c, fs->id);

	if (f == NULL)
		return 0;
	*nkeep = cfg_fs_keep(c, fs->id, keep, META_KEEP_MAX);
	return f->version ? f->version : 1;
}

/* Group gi's next step, if it may take one (a step of it just ended). */
static void
reconcile_group(struct mfs *fs, uint32_t gi)
{
	uint64_t keep[META_KEEP_MAX], ver;
	unsigned nkeep;

	if (group_free(fs, gi) && (ver = wanted(fs, keep, &nkeep)) != 0)
		reconcile(fs, gi, ver, keep, nkeep);
}

/* ---- the first group's leader: where every group stands ---- */

struct ask {
	struct mfs *fs;
	unsigned pending;
	bool failed;
	uint64_t min_ver;      /* the least version a group's writes carry */
	uint64_t min_repoch;   /* the least restore a group has done */
	bool drained;	       /* every group is drained for a restore */
	uint64_t deleting[64]; /* snapshots being deleted (versions) */
	bool still[64];	       /* a group still keeps it, or has not settled */
	unsigned ndeleting;
	unsigned ngroups;
	struct clone_tally clones; /* clones being created or deleted: whose groups serve them */
};

/* A restore's next phase, once every group is drained (pausing) or has done it (reverting). */
static void
conclude_restore(struct ask *a, const struct cfg *c)
{
	struct mfs *fs = a->fs;
	const struct cfg_fs *f = cfg_fs_by_id(c, fs->id);
	struct cfg_cmd cmd = { .op = CFG_OP_FS_RESTORE_STEP };
	bool next = false;

	if (f == NULL || f->restore_phase == CFG_RESTORE_NONE)
		return;
	if (f->restore_phase == CFG_RESTORE_PAUSING) {
		next = a->drained;
		cmd.state = CFG_RESTORE_REVERTING;
	} else {
		next = a->min_repoch >= f->restore_epoch;
		cmd.state = CFG_RESTORE_NONE;
	}
	if (!next) { /* asked again soon, not at the next tick */
		msvc_snap_kick(fs->s, REASK_NS + mroute_place(fs->s->rt)->ngroups * REASK_GROUP_NS);
		return;
	}
	snprintf(cmd.name, sizeof(cmd.name), "%s", f->name);
	cmd.size = f->restore_epoch;
	cmd.time = env_realtime(fs->s->env);
	sh_log_info("filesystem %s: restore %u to version %llu: %s", f->name, f->restore_epoch,
		    (unsigned long long)f->restore_ver,
		    cmd.state == CFG_RESTORE_REVERTING ? "every group is drained, going back"
						       : "every group went back, serving again");
	fs->s->p.cfg_submit(fs->s->p.arg, &cmd);
}

static void
conclude(struct ask *a)
{
	struct mfs *fs = a->fs;
	const struct cfg *c = mroute_cfg(fs->s->rt);

	fs->snap_asking = false;
	if (fs->closing || fs->s->p.cfg_submit == NULL)
		return;
	for (uint32_t i = 0; i < c->nsnaps; i++)
		if (c->snaps[i].fs == fs->id && c->snaps[i].state == CFG_SNAP_CREATING &&
		    (a->failed || a->min_ver <= c->snaps[i].version)) {
			/* one is being created: ask again soon, not at the next tick */
			msvc_snap_kick(fs->s, REASK_NS + mroute_place(fs->s->rt)->ngroups *
							     REASK_GROUP_NS);
			break;
		}
	if (a->failed)
		return;
	conclude_restore(a, c);
	msvc_clone_conclude(&a->clones, fs, a->ngroups);
	for (uint32_t i = 0; i < c->nsnaps; i++) {
		const struct cfg_snap *sn = &c->snaps[i];
		const struct cfg_fs *f = cfg_fs_by_id(c, fs->id);
		struct cfg_cmd cmd = { 0 };
		bool ready = false;

		if (sn->fs != fs->id || f == NULL)
			continue;
		if (sn->state == CFG_SNAP_CREATING && a->min_ver > sn->version) {
			cmd.op = CFG_OP_SNAP_STATE;
			cmd.state = CFG_SNAP_READY;
			ready = true;
		} else if (sn->state == CFG_SNAP_DELETING) {
			bool still = true;

			for (unsigned k = 0; k < a->ndeleting; k++)
				if (a->deleting[k] == sn->version)
					still = a->still[k];
			if (still)
				continue;
			cmd.op = CFG_OP_SNAP_FORGET;
		} else {
			continue;
		}
		snprintf(cmd.name, sizeof(cmd.name), "%s", f->name);
		snprintf(cmd.snap, sizeof(cmd.snap), "%s", sn->name);
		cmd.time = env_realtime(fs->s->env);
		sh_log_info("filesystem %s: snapshot %s (version %llu) %s", f->name, sn->name,
			    (unsigned long long)sn->version,
			    ready ? "is ready: every group writes past it"
				  : "is freed: no group keeps it");
		fs->s->p.cfg_submit(fs->s->p.arg, &cmd);
	}
}

/* One answer (or the asking itself) less to wait for. */
static void
ask_release(struct ask *a)
{
	if (--a->pending > 0)
		return;
	conclude(a);
	mfs_unref(a->fs);
	sh_free(a);
}

static void
on_version(void *arg, int status, const struct mp_reply *r)
{
	struct ask *a = arg;

	/* gen, settled, repoch, drained, n, n kept versions, the branches served */
	uint64_t nkeep = r != NULL && r->dlen >= 40 ? meta_le64_get(r->data + 32) : 0;

	if (status < 0 || r == NULL || r->dlen < 40 || r->dlen % 8 != 0 ||
	    nkeep > (r->dlen - 40) / 8) {
		a->failed = true;
	} else {
		uint64_t gen = meta_le64_get(r->data), settled = meta_le64_get(r->data + 8);
		uint64_t repoch = meta_le64_get(r->data + 16),
			 drained = meta_le64_get(r->data + 24);
		size_t kend = 40 + nkeep * 8;

		if (r->aux < a->min_ver)
			a->min_ver = r->aux;
		if (repoch < a->min_repoch)
			a->min_repoch = repoch;
		a->drained = a->drained && drained == 1;
		for (unsigned k = 0; k < a->ndeleting; k++) {
			bool kept = false;

			for (size_t at = 40; at < kend; at += 8)
				kept = kept || meta_le64_get(r->data + at) == a->deleting[k];
			if (kept || settled != gen)
				a->still[k] = true;
		}
		msvc_clone_heard(&a->clones, r->data + kend, r->dlen - kend);
	}
	ask_release(a);
}

static void
ask_groups(struct mfs *fs, const struct cfg *c)
{
	const struct mplace *pl = mroute_place(fs->s->rt);
	struct ask *a;
	bool pending = false;

	const struct cfg_fs *f = cfg_fs_by_id(c, fs->id);

	pending = (f != NULL && f->restore_phase != CFG_RESTORE_NONE) || msvc_clone_pending(fs, c);
	for (uint32_t i = 0; i < c->nsnaps; i++)
		pending =
		    pending || (c->snaps[i].fs == fs->id && c->snaps[i].state != CFG_SNAP_READY);
	if (!pending || pl->ngroups == 0 || fs->s->p.cfg_submit == NULL)
		return;
	a = sh_calloc(1, sizeof(*a));
	if (a == NULL)
		return;
	a->fs = fs;
	a->min_ver = UINT64_MAX;
	a->min_repoch = UINT64_MAX;
	a->drained = true;
	a->ngroups = pl->ngroups;
	msvc_clone_ask(&a->clones, fs, c);
	for (uint32_t i = 0; i < c->nsnaps && a->ndeleting < 64; i++)
		if (c->snaps[i].fs == fs->id && c->snaps[i].state == CFG_SNAP_DELETING)
			a->deleting[a->ndeleting++] = c->snaps[i].version;
	fs->refs++;
	fs->snap_asking = true;
	a->pending = 1; /* held until every call is sent */
	for (uint32_t g = 0; g < pl->ngroups; g++) {
		struct mp_req q = { .kind = MP_VERSION,
				    .fs = fs->id,
				    .bucket = pl->gbuckets[pl->gstart[g]] };

		a->pending++;
		if (mroute_call(fs->s->rt, &q, ASK_NS, on_version, a) < 0) {
			a->pending--;
			a->failed = true;
		}
	}
	ask_release(a);
}

static void
on_tick(struct env_timer *t)
{
	struct msvc *s = t->arg;
	const struct cfg *c = mroute_cfg(s->rt);
	struct sh_list *pos;

	if (s->stopping)
		return;
	env_timer_arm_period(&s->snap_tick, SNAP_TICK_NS);
	sh_list_for_each (pos, &s->fss) {
		struct mfs *fs = sh_list_entry(pos, struct mfs, link);

		uint64_t keep[META_KEEP_MAX], ver;
		unsigned nkeep;

		if (fs->closing || fs->snap_busy == NULL || (ver = wanted(fs, keep, &nkeep)) == 0)
			continue;
		{
			const struct cfg_fs *f = cfg_fs_by_id(c, fs->id);
			bool paused = f != NULL && f->restore_phase != CFG_RESTORE_NONE;

			if (!paused) {
				fs->paused_since = 0;
			} else if (fs->paused_since == 0 || fs->paused_epoch != f->restore_epoch) {
				fs->paused_since = env_now(s->env);
				fs->paused_epoch = f->restore_epoch;
			}
		}
		/* (the kept list once for all the groups) */
		for (uint32_t gi = 0; gi < fs->ngroups; gi++)
			if (group_free(fs, gi))
				reconcile(fs, gi, ver, keep, nkeep);
		if (fs->ngroups > 0 && fs->groups[0] != NULL && mgroup_ready(fs->groups[0]) &&
		    !fs->snap_asking)
			ask_groups(fs, c);
	}
}

int
msvc_snap_readable(const struct mfs *fs, const struct mp_req *req)
{
	if (meta_ver_branch(req->at) != 0) /* a clone's: anything, at its branch's newest */
		return req->at == meta_ver_newest(req->at)
			   ? msvc_branch_ok(fs, meta_ver_branch(req->at))
			   : -EINVAL;
	switch (req->kind) {
	case MP_LOOKUP:
	case MP_GETATTR:
	case MP_READDIR:
	case MP_READLINK:
	case MP_GETXATTR:
	case MP_LISTXATTR:
	case MP_DIRBUCKETS:
	case MP_EXTENTS:
	case MP_PARENT:
	case MP_DIFF:
		break;
	default:
		return -EROFS;
	}
	return msvc_snap_ready(fs, req->at);
}

int
msvc_snap_ready(const struct mfs *fs, uint64_t ver)
{
	const struct cfg *c = mroute_cfg(fs->s->rt);

	for (uint32_t i = 0; i < c->nsnaps; i++)
		if (c->snaps[i].fs == fs->id && c->snaps[i].version == ver)
			return c->snaps[i].state == CFG_SNAP_READY ? 0 : -ESTALE;
	return -ESTALE;
}

bool
msvc_restore_refuses(const struct mfs *fs, const struct mreq *m)
{
	const struct cfg_fs *f = cfg_fs_by_id(mroute_cfg(fs->s->rt), fs->id);
	const struct meta_version *vs = m->g != NULL ? mgroup_version(m->g) : NULL;

	if (f == NULL || m->req.at != 0 || msvc_client_of(m) == 0)
		return false;
	/* paused; or this group is going back, or went back in a restore this node's
	 * configuration has not heard of yet (a leader newly elected on a lagging node) */
	return f->restore_phase != CFG_RESTORE_NONE ||
	       (vs != NULL && (vs->rdoing != 0 || vs->repoch > f->restore_epoch));
}

struct unapplied {
	uint64_t applied;
	unsigned n;
};

/* (an outbox keeps what was applied where it went until trimmed: only what is not counts) */
static int
count_outbox(void *arg, const struct meta_delta *d)
{
	struct unapplied *u = arg;

	if (d->seq <= u->applied)
		return 0;
	u->n++;
	return 1;
}

static int
count_intent(void *arg, int phase, const struct meta_rename2 *r)
{
	(void)phase;
	(void)r;
	(*(unsigned *)arg)++;
	return 1;
}

bool
msvc_restore_drained(struct mfs *fs, struct mgroup *g)
{
	const struct cfg_fs *f = cfg_fs_by_id(mroute_cfg(fs->s->rt), fs->id);
	const struct meta_version *vs = mgroup_version(g);
	uint64_t now = env_now(fs->s->env), since = fs->paused_since;
	struct sh_list *pos;

	/* paused long enough here, as this restore, and since this node leads the group */
	for (uint32_t gi = 0; gi < fs->ngroups && fs->led_since != NULL; gi++)
		if (fs->groups[gi] == g && fs->led_since[gi] > since)
			since = fs->led_since[gi];
	if (f == NULL || f->restore_phase == CFG_RESTORE_NONE || fs->paused_since == 0 ||
	    fs->paused_epoch != f->restore_epoch || now - since < PAUSE_NS)
		return false;
	sh_list_for_each (pos, &fs->s->reqs) {
		const struct mreq *m = sh_list_entry(pos, struct mreq, link);

		if (m->fs == fs && m->req.at == 0 && msvc_client_of(m) != 0)
			return false; /* a client's, let in before the pause */
	}
	for (unsigned i = 0; i < vs->nb; i++) {
		struct unapplied u = { .applied = fs->ship[vs->buckets[i]].applied };
		struct meta_bucket mb;
		unsigned n = 0;
		int rc = mgroup_read(g, vs->buckets[i], &mb);

		if (rc < 0)
			return false;
		rc = meta_outbox(&mb, count_outbox, &u);
		if (rc >= 0 && u.n == 0)
			rc = meta_intents(&mb, count_intent, &n);
		meta_txn_abort(mb.t);
		if (rc < 0 || n + u.n > 0) {
			mfs_ship_kick(fs, vs->buckets[i]);
			return false;
		}
	}
	return true;
}

void
msvc_snap_kick(struct msvc *s, uint64_t delay_ns)
{
	if (!s->stopping)
		env_timer_arm(&s->snap_tick, delay_ns);
}

void
msvc_snap_start(struct msvc *s)
{
	env_timer_init(s->env, &s->snap_tick, on_tick, s);
	env_timer_arm_period(&s->snap_tick, SNAP_TICK_NS);
}

void
msvc_snap_stop(struct msvc *s)
{
	env_timer_cancel(&s->snap_tick);
}
