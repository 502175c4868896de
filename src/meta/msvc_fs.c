// SPDX-License-Identifier: Apache-2.0
/*
 * The metadata service's filesystems and groups (msvc.h): the groups a
 * node serves opened, closed and forgotten as the configuration says, in
 * the node's shared Raft log (DIR/meta.wal), logs of their own from
 * before brought into it, and the bucket stores; what each group is and
 * uses, as msvc_groups reports it.
 */
#include <stdio.h>
#include <string.h>

#include "msvc_int.h"

SH_LOG_FACILITY("meta.svc");

#define DB_MAP_SIZE (64ull << 30)

struct mfs *
mfs_find(struct msvc *s, uint32_t id)
{
	struct sh_list *pos;

	sh_list_for_each (pos, &s->fss) {
		struct mfs *fs = sh_list_entry(pos, struct mfs, link);

		if (fs->id == id && !fs->closing)
			return fs;
	}
	return NULL;
}

struct mgroup *
mfs_group(struct mfs *fs, uint16_t bucket)
{
	const struct mplace *pl = mroute_place(fs->s->rt);

	if (bucket >= pl->nbuckets || bucket >= fs->nbuckets)
		return NULL;
	return pl->group_of[bucket] < fs->ngroups ? fs->groups[pl->group_of[bucket]] : NULL;
}

static void
on_applied(void *arg, struct mgroup *g, uint16_t bucket, const struct meta_cmd *c,
	   const struct meta_result *r)
{
	struct mfs *fs = arg;

	if (r->status < 0 || !mgroup_ready(g))
		return;
	msvc_cache_changed(fs, g, c, r); /* what clients cached of it is recalled */
	if (r->queued > 0) {
		mfs_ship_kick(fs, bucket);
		return;
	}
	for (unsigned i = 0; i < META_DELTAS_MAX; i++)
		if (r->deltas[i].ino != 0) {
			mfs_ship_kick(fs, bucket);
			break;
		}
}

static void
on_mkroot(void *arg, int status, const struct meta_result *r)
{
	struct mfs *fs = arg;

	if (status == 0 && r->status == 0)
		sh_log_info("filesystem %u: root directory created", fs->id);
	else if (status == 0 && r->status != -EEXIST)
		sh_log_warn("filesystem %u: root directory: %s", fs->id, sh_strerror(r->status));
}

/* A new leader: the root if it is ours and missing, and the outboxes' leftovers. */
static void
on_ready(void *arg, struct mgroup *g)
{
	struct mfs *fs = arg;
	unsigned n;
	const uint16_t *b = mgroup_buckets(g, &n);

	if (mgroup_has_bucket(g, 0)) {
		struct meta_bucket mb;
		struct meta_inode in;
		int rc = mgroup_read(g, 0, &mb);

		if (rc == 0) {
			rc = meta_getattr(&mb, META_ROOT_INO, &in);
			meta_txn_abort(mb.t);
		}
		if (rc == -ESTALE || rc == -ENOENT) {
			struct meta_cmd c = { .op = META_OP_MKROOT,
					      .ver = 1,
					      .now = env_realtime(fs->s->env),
					      .mode = 0755 };

			mgroup_propose(g, 0, &c, on_mkroot, fs);
		}
	}
	for (uint32_t gi = 0; gi < fs->ngroups; gi++)
		if (fs->groups[gi] == g)
			msvc_hold_led(fs, gi);
	for (unsigned i = 0; i < n; i++)
		mfs_ship_kick(fs, b[i]);
	msvc_rename2_recover(fs, g);
}

static bool
group_member(const struct mplace *pl, uint32_t g, uint64_t self)
{
	const uint64_t *mem = pl->members + (size_t)g * pl->replicas;

	for (uint32_t k = 0; k < pl->replicas; k++)
		if (mem[k] == self)
			return true;
	return false;
}

/* Group g's instance in the node's shared Raft log. */
static void
group_log_name(const struct mfs *fs, uint32_t g, char *buf, size_t len)
{
	snprintf(buf, len, "meta-%u-g%u", fs->id, g);
}

/* Where group g kept a log of its own before the logs were shared. */
static void
group_old_log_path(const struct mfs *fs, uint32_t g, char *buf, size_t len)
{
	snprintf(buf, len, "%s/meta-%u-g%u.raft", fs->s->dir, fs->id, g);
}

int
msvc_keeps_group(const struct msvc *s, uint32_t fs, uint32_t g)
{
	char name[RLOG_NAME_MAX + 1];

	if (!s->wal_ready)
		return -EAGAIN;
	snprintf(name, sizeof(name), "meta-%u-g%u", fs, g);
	return rwal_has(s->wal, name);
}

static bool
file_exists(struct env *env, const char *path)
{
	struct env_disk *d;

	if (env_disk_open(env, path, 0, 0, &d) < 0)
		return false;
	env_disk_close(d);
	return true;
}

static void group_open(struct mfs *fs, const struct cfg *c, uint32_t g);
static void group_forget(struct mfs *fs, uint32_t g);

struct dropped {
	struct mfs *fs;
	uint32_t g;
};

/* A group's log of its own is in the shared one now (or could not be): it starts. */
static void
on_group_imported(void *arg, int status)
{
	struct dropped *d = arg;
	struct mfs *fs = d->fs;

	fs->leaving[d->g] = false;
	if (status < 0 && status != -EEXIST && status != -ENOENT)
		sh_log_error("filesystem %u: metadata group %u: its log of its own cannot be "
			     "brought into the shared log: %s; the group does not start here",
			     fs->id, d->g, sh_strerror(status));
	else if (fs->closing)
		;
	else if (group_member(mroute_place(fs->s->rt), d->g, fs->s->self))
		group_open(fs, mroute_cfg(fs->s->rt), d->g);
	else
		group_forget(fs, d->g); /* replaced meanwhile */
	fs->open_groups--;
	sh_free(d);
	mfs_unref(fs);
}

/* A log of its own from before the shared one: brought in first. True if that started. */
static bool
group_import(struct mfs *fs, uint32_t g, const char *name)
{
	struct dropped *d;
	char old[640];
	int rc;

	group_old_log_path(fs, g, old, sizeof(old));
	if (rwal_has(fs->s->wal, name) || !file_exists(fs->s->env, old))
		return false;
	d = sh_calloc(1, sizeof(*d));
	if (d == NULL)
		return false;
	d->fs = fs;
	d->g = g;
	rc = rwal_import(fs->s->wal, name, old, on_group_imported, d);
	if (rc < 0) {
		sh_free(d);
		return false;
	}
	sh_log_info("filesystem %u: metadata group %u: bringing %s into the shared log", fs->id, g,
		    old);
	fs->leaving[g] = true; /* nothing starts it meanwhile */
	fs->refs++;
	fs->open_groups++;
	return true;
}

/* Start this node's replica of group g (it is a member). */
static void
group_open(struct mfs *fs, const struct cfg *c, uint32_t g)
{
	const struct mplace *pl = mroute_place(fs->s->rt);
	struct mgroup_params gp;
	char path[RLOG_NAME_MAX + 1];
	int rc;

	group_log_name(fs, g, path, sizeof(path));
	if (group_import(fs, g, path))
		return;
	gp =
	    (struct mgroup_params){ .id = mplace_group_id(fs->id, g),
				    .self = fs->s->self,
				    .members = pl->members + (size_t)g * pl->replicas,
				    .nmembers = pl->replicas,
				    .buckets = pl->gbuckets + pl->gstart[g],
				    .nb = pl->gstart[g + 1] - pl->gstart[g],
				    .nbuckets = c->nbuckets,
				    /* the group formed before: a new member waits to be added */
				    .join = c->gepoch != NULL && g < c->ngroups && c->gepoch[g] > 0,
				    .db = fs->db,
				    .wal = fs->s->wal,
				    .path = path,
				    .log_size = fs->s->p.log_size,
				    .election_ms = fs->s->p.election_ms,
				    .applied = on_applied,
				    .ready = on_ready,
				    .arg = fs };
	rc = mgroup_open(fs->s->rn, &gp, &fs->groups[g]);
	if (rc < 0) {
		fs->groups[g] = NULL;
		sh_log_error("filesystem %u: metadata group %u: %s", fs->id, g, sh_strerror(rc));
		return;
	}
	fs->open_groups++;
}

/* What this node kept of group g, which it no longer serves: its buckets in the store, its log. */
static void
group_forget(struct mfs *fs, uint32_t g)
{
	const struct mplace *pl = mroute_place(fs->s->rt);
	struct meta_txn *t = NULL;
	char name[RLOG_NAME_MAX + 1], old[640];
	bool has_old;
	int rc;

	group_log_name(fs, g, name, sizeof(name));
	group_old_log_path(fs, g, old, sizeof(old));
	has_old = file_exists(fs->s->env, old);
	if (!rwal_has(fs->s->wal, name) && !has_old)
		return; /* none */
	/* the buckets first: a log without them is dropped again at the next start */
	rc = meta_txn_begin(fs->db, true, &t);
	for (uint32_t i = pl->gstart[g]; rc == 0 && i < pl->gstart[g + 1]; i++)
		rc = meta_drop_bucket(t, pl->gbuckets[i]);
	if (rc == 0)
		rc = meta_txn_commit(t);
	else if (t != NULL)
		meta_txn_abort(t);
	if (rc == 0)
		rc = meta_db_flush(fs->db, false);
	if (rc == 0 && rwal_has(fs->s->wal, name))
		rc = rwal_remove(fs->s->wal, name);
	if (rc == 0 && has_old)
		rc = env_disk_remove(fs->s->env, old);
	if (rc < 0)
		sh_log_warn("filesystem %u: metadata group %u: dropping this node's copy: %s",
			    fs->id, g, sh_strerror(rc));
	else
		sh_log_info("filesystem %u: metadata group %u: this node's copy dropped", fs->id,
			    g);
}

/* A group this node left is closed: its copy goes. */
static void
group_dropped(void *arg)
{
	struct dropped *d = arg;
	struct mfs *fs = d->fs;

	group_forget(fs, d->g);
	fs->leaving[d->g] = false;
	/* made a member again meanwhile: start afresh */
	if (!fs->closing && group_member(mroute_place(fs->s->rt), d->g, fs->s->self))
		group_open(fs, mroute_cfg(fs->s->rt), d->g);
	sh_free(d);
	fs->open_groups--;
	mfs_unref(fs);
}

/*
 * The configuration changed the groups' members (a dead node's replicas
 * replaced): groups this node joined start (and wait to be added), groups
 * it left close and drop its copy, the others learn their members.
 */
static void
fs_regroup(struct mfs *fs, const struct cfg *c)
{
	const struct mplace *pl = mroute_place(fs->s->rt);

	if (pl->ngroups != fs->ngroups) {
		sh_log_error("filesystem %u: %u metadata groups in the configuration, %u here",
			     fs->id, pl->ngroups, fs->ngroups);
		return;
	}
	for (uint32_t g = 0; g < fs->ngroups; g++) {
		bool member = group_member(pl, g, fs->s->self);
		struct mgroup *mg = fs->groups[g];

		if (fs->leaving[g]) {
			continue; /* its old copy is being dropped; it starts afresh after */
		} else if (member && mg == NULL) {
			sh_log_info("filesystem %u: this node joins metadata group %u", fs->id, g);
			group_open(fs, c, g);
		} else if (member) {
			(void)mgroup_set_members(mg, pl->members + (size_t)g * pl->replicas,
						 pl->replicas);
		} else if (mg != NULL) {
			struct dropped *d = sh_calloc(1, sizeof(*d));

			if (d == NULL)
				continue; /* the next configuration tries again */
			sh_log_info("filesystem %u: this node was replaced in metadata group %u",
				    fs->id, g);
			d->fs = fs;
			d->g = g;
			fs->refs++;
			fs->groups[g] = NULL;
			fs->leaving[g] = true;
			mgroup_close(mg, group_dropped, d);
		}
	}
}

/* What fs holds by group and by bucket, and fs. */
static void
fs_free(struct mfs *fs)
{
	sh_free(fs->groups);
	sh_free(fs->usage);
	sh_free(fs->usage_term);
	for (uint32_t g = 0; fs->snap_use != NULL && g < fs->ngroups; g++)
		sh_free(fs->snap_use[g]);
	sh_free(fs->snap_use);
	sh_free(fs->leaving);
	sh_free(fs->snap_busy);
	sh_free(fs->ship);
	sh_free(fs);
}

static int
fs_open(struct msvc *s, const struct cfg *c, const struct cfg_fs *f)
{
	const struct mplace *pl = mroute_place(s->rt);
	struct mfs *fs = sh_calloc(1, sizeof(*fs));
	int rc;

	if (fs == NULL)
		return -ENOMEM;
	fs->s = s;
	fs->id = f->id;
	fs->nbuckets = c->nbuckets;
	fs->ngroups = pl->ngroups;
	fs->groups = sh_calloc(pl->ngroups ? pl->ngroups : 1, sizeof(*fs->groups));
	fs->usage = sh_calloc(pl->ngroups ? pl->ngroups : 1, sizeof(*fs->usage));
	fs->usage_term = sh_calloc(pl->ngroups ? pl->ngroups : 1, sizeof(*fs->usage_term));
	fs->snap_use = sh_calloc(pl->ngroups ? pl->ngroups : 1, sizeof(*fs->snap_use));
	fs->leaving = sh_calloc(pl->ngroups ? pl->ngroups : 1, sizeof(*fs->leaving));
	fs->snap_busy = sh_calloc(pl->ngroups ? pl->ngroups : 1, sizeof(*fs->snap_busy));
	fs->ship = sh_calloc(c->nbuckets, sizeof(*fs->ship));
	if (fs->groups == NULL || fs->usage == NULL || fs->usage_term == NULL ||
	    fs->snap_use == NULL || fs->leaving == NULL || fs->snap_busy == NULL ||
	    fs->ship == NULL) {
		rc = -ENOMEM;
		goto err;
	}
	for (uint32_t b = 0; b < c->nbuckets; b++) {
		sh_list_init(&fs->ship[b].flush);
		sh_list_init(&fs->ship[b].waiters);
		fs->ship[b].fs = fs;
		fs->ship[b].bucket = (uint16_t)b;
		env_timer_init(s->env, &fs->ship[b].retry, mfs_ship_retry, &fs->ship[b]);
		env_timer_init(s->env, &fs->ship[b].trim, mfs_trim_due, &fs->ship[b]);
	}
	sh_list_init(&fs->r2s);
	sh_list_init(&fs->reclaims);
	rc = msvc_heal_start(fs);
	if (rc < 0)
		goto err;
	/*
	 * The groups' state machines: each group keeps its buckets here with
	 * the Raft index they hold, and replays its log from there.
	 */
	snprintf(fs->dbpath, sizeof(fs->dbpath), "%s/meta-%u.mdb", s->dir, f->id);
	rc = meta_db_open(fs->dbpath, DB_MAP_SIZE,
			  META_DB_BATCH | (s->p.store_nosync ? META_DB_NOSYNC : 0), &fs->db);
	if (rc < 0)
		goto err;
	for (uint32_t g = 0; g < pl->ngroups; g++)
		if (group_member(pl, g, s->self))
			group_open(fs, c, g);
		else
			group_forget(fs, g); /* replaced while this node was down */
	sh_list_add_tail(&s->fss, &fs->link);
	msvc_reclaim_start(fs);
	sh_log_info("filesystem %s (%u): %u of %u metadata groups here", f->name, f->id,
		    fs->open_groups, pl->ngroups);
	return 0;
err:
	msvc_heal_cancel(fs);
	msvc_heal_free(fs);
	if (fs->db)
		meta_db_close(fs->db);
	fs_free(fs);
	return rc;
}

static void
fs_maybe_free(struct mfs *fs)
{
	struct msvc *s = fs->s;

	if (!fs->closing || fs->refs > 0 || fs->open_groups > 0)
		return;
	if (fs->deleted)
		for (uint32_t g = 0; g < fs->ngroups; g++) {
			char name[RLOG_NAME_MAX + 1];

			group_log_name(fs, g, name, sizeof(name));
			(void)rwal_remove(s->wal, name); /* (-ENOENT: none here) */
		}
	sh_list_del(&fs->link);
	msvc_cache_free(fs);
	msvc_hold_free(fs);
	msvc_heal_free(fs);
	meta_db_close(fs->db);
	fs_free(fs);
	if (s->stopping && sh_list_empty(&s->fss))
		env_post(&s->done_task);
}

void
mfs_unref(struct mfs *fs)
{
	fs->refs--;
	fs_maybe_free(fs);
}

static void
fs_closed_one(void *arg)
{
	struct mfs *fs = arg;

	fs->open_groups--;
	fs_maybe_free(fs);
}

void
mfs_close(struct mfs *fs)
{
	struct sh_list *pos, *tmp;

	fs->closing = true;
	/* those waiting for an outbox to empty: it will not; its retries stop */
	for (uint32_t b = 0; b < fs->nbuckets; b++) {
		env_timer_cancel(&fs->ship[b].retry);
		env_timer_cancel(&fs->ship[b].trim);
		while (!sh_list_empty(&fs->ship[b].flush))
			mreq_answer(sh_list_entry(fs->ship[b].flush.next, struct mreq, flink),
				    -ESHUTDOWN, NULL);
		while (!sh_list_empty(&fs->ship[b].waiters)) {
			struct mreq *m =
			    sh_list_entry(fs->ship[b].waiters.next, struct mreq, flink);

			msvc_reply_result(m, &m->res); /* done already: its deltas follow later */
		}
	}
	/* those waiting to try again (their timers may never fire after a crash) */
	sh_list_for_each_safe (pos, tmp, &fs->s->reqs) {
		struct mreq *m = sh_list_entry(pos, struct mreq, link);

		if (m->fs == fs && m->step == ST_LATER)
			mreq_answer(m, -ESHUTDOWN, NULL);
	}
	msvc_rename2_cancel(fs);
	msvc_reclaim_cancel(fs);
	msvc_heal_cancel(fs);
	fs->refs++; /* held while the groups are told to close */
	for (uint32_t g = 0; g < fs->ngroups; g++)
		if (fs->groups[g] != NULL)
			mgroup_close(fs->groups[g], fs_closed_one, fs);
	mfs_unref(fs);
}

int
msvc_set_cfg(struct msvc *s, const struct cfg *c)
{
	int rc;

	if (s->stopping)
		return 0;
	rc = mroute_set_cfg(s->rt, c);
	if (rc < 0)
		return rc;
	if (!s->wal_ready)
		return 0; /* the groups start once their log is loaded */
	msvc_apply_cfg(s, mroute_cfg(s->rt));
	msvc_snap_kick(s, 0); /* a snapshot taken or deleted: the groups move on at once */
	return 0;
}

#define ORPHANS_AT_ONCE 64

struct orphans {
	struct msvc *s;
	const struct cfg *c;
	unsigned n;
	char names[ORPHANS_AT_ONCE][RLOG_NAME_MAX + 1];
};

static void
orphan_name(void *arg, const char *name)
{
	struct orphans *o = arg;
	unsigned fs, g;

	/* ids are never reused: one below next_fs that the configuration lacks was deleted */
	if (sscanf(name, "meta-%u-g%u", &fs, &g) != 2 || fs >= o->c->next_fs ||
	    cfg_fs_by_id(o->c, fs) != NULL || mfs_find(o->s, fs) != NULL || o->n == ORPHANS_AT_ONCE)
		return;
	snprintf(o->names[o->n++], sizeof(o->names[0]), "%s", name);
}

/* Groups' logs of filesystems deleted while this node was down: they go. */
static void
drop_orphans(struct msvc *s, const struct cfg *c)
{
	struct orphans *o = sh_calloc(1, sizeof(*o));

	if (o == NULL)
		return; /* the next configuration tries again */
	o->s = s;
	o->c = c;
	do {
		o->n = 0;
		rwal_each(s->wal, orphan_name, o);
		for (unsigned i = 0; i < o->n; i++)
			if (rwal_remove(s->wal, o->names[i]) == 0)
				sh_log_info("metadata: %s dropped: its filesystem is gone",
					    o->names[i]);
	} while (o->n == ORPHANS_AT_ONCE);
	sh_free(o);
}

/* Start and stop filesystems and groups as configuration c says. */
void
msvc_apply_cfg(struct msvc *s, const struct cfg *c)
{
	struct sh_list *pos, *tmp;
	int rc;

	/* filesystems deleted: their groups stop, their files go */
	sh_list_for_each_safe (pos, tmp, &s->fss) {
		struct mfs *fs = sh_list_entry(pos, struct mfs, link);

		if (!fs->closing && cfg_fs_by_id(c, fs->id) == NULL) {
			sh_log_info("filesystem %u deleted: closing its metadata groups", fs->id);
			fs->deleted = true;
			mfs_close(fs);
		}
	}
	sh_list_for_each (pos, &s->fss) {
		struct mfs *fs = sh_list_entry(pos, struct mfs, link);

		if (!fs->closing)
			fs_regroup(fs, c);
	}
	for (uint32_t i = 0; i < c->nfs; i++)
		if (cfg_fs_own(&c->fs[i]) && mfs_find(s, c->fs[i].id) == NULL) {
			rc = fs_open(s, c, &c->fs[i]);
			if (rc < 0)
				sh_log_error("filesystem %s: metadata: %s", c->fs[i].name,
					     sh_strerror(rc));
		}
	drop_orphans(s, c);
	/* marked down while alive (a management network cut, or its data network's): lead nothing
	 */
	{
		const struct cfg_node *me = cfg_node_find(c, s->self >> 8);
		bool down = me != NULL && cfg_node_down(me);

		sh_list_for_each (pos, &s->fss) {
			struct mfs *fs = sh_list_entry(pos, struct mfs, link);

			for (uint32_t g = 0; g < fs->ngroups; g++)
				if (fs->groups[g] != NULL)
					mgroup_set_demoted(fs->groups[g], down);
		}
	}
}

/* ---- what the groups are and use ---- */

/* What the buckets of group g use, summed (a read of each bucket's usage record). */
void
msvc_group_usage(struct mgroup *g, struct meta_usage *out)
{
	unsigned nb;
	const uint16_t *b = mgroup_buckets(g, &nb);

	memset(out, 0, sizeof(*out));
	for (unsigned i = 0; i < nb; i++) {
		struct meta_bucket mb;
		struct meta_usage u;

		if (mgroup_read(g, b[i], &mb) < 0)
			continue;
		if (meta_usage_get(&mb, &u) == 0) {
			out->mapped += u.mapped;
			out->data += u.data;
			out->phys += u.phys;
			out->unique += u.unique;
			out->inlined += u.inlined;
		}
		meta_txn_abort(mb.t);
	}
}

/* A group's bucket list, summed: a pass begun over another list starts again. */
static uint64_t
list_sum(const uint16_t *b, unsigned nb)
{
	uint64_t h = nb;

	for (unsigned i = 0; i < nb; i++)
		h = h * 0x100000001b3ull + b[i];
	return h;
}

/*
 * The clones group g reads for (those not being dropped) into br, whether
 * each is a writable snapshot's into wr: how many; *sum, a sum of them (a
 * pass begun over others starts again).
 */
static unsigned
clones_read(const struct mfs *fs, const struct meta_version *vs, struct meta_vbranch *br, bool *wr,
	    uint64_t *sum)
{
	const struct cfg *c = mroute_cfg(fs->s->rt);
	unsigned n = 0;

	*sum = 0;
	for (unsigned i = 0; i < vs->nbranch; i++) {
		const struct cfg_fs *f = cfg_clone_find(c, fs->id, vs->branch[i].id);

		if (vs->branch[i].dropping)
			continue; /* (it goes: no longer a reader) */
		br[n] = vs->branch[i];
		wr[n] = f != NULL && cfg_writable_snap(c, f) != NULL;
		*sum = ((*sum * 0x100000001b3ull + br[n].id) * 0x100000001b3ull + br[n].base) * 2 +
		       wr[n];
		n++;
	}
	return n;
}

/*
 * What group g's kept snapshots and clones hold, into *out, as the last
 * finished pass summed it under this term and kept list (struct
 * msvc_snap_use). A pass starts when the kept list, the clones or the
 * term changed, or SNAP_USAGE_NS after the last one began; it walks at
 * most *budget buckets (of this loop's, taken from it). Nothing to do
 * while none is kept (a clone's snapshot is kept).
 */
static void
snap_usage(struct mfs *fs, uint32_t g, uint64_t term, uint64_t now, unsigned *budget,
	   struct msvc_group_info *out)
{
	const struct meta_version *vs = mgroup_version(fs->groups[g]);
	struct msvc_snap_use *su = fs->snap_use[g];
	unsigned nb;
	const uint16_t *b = mgroup_buckets(fs->groups[g], &nb);
	struct meta_vbranch br[META_BRANCH_MAX];
	bool wr[META_BRANCH_MAX];
	uint64_t list, brs;
	unsigned nbr;

	if (vs->nkeep == 0)
		return;
	list = list_sum(b, nb);
	nbr = clones_read(fs, vs, br, wr, &brs);
	if (su == NULL && (su = fs->snap_use[g] = sh_calloc(1, sizeof(*su))) == NULL)
		return;
	if (su->p_on &&
	    (su->p_term != term || su->p_gen != vs->gen || su->p_list != list || su->p_brs != brs))
		su->p_on = false; /* begun under another kept list, term, list or clones: again */
	if (!su->p_on && (su->at == 0 || su->term != term || su->gen != vs->gen || su->brs != brs ||
			  now - su->at >= SNAP_USAGE_NS)) {
		memset(&su->p, 0, sizeof(su->p));
		su->p_term = term;
		su->p_gen = vs->gen;
		su->p_list = list;
		su->p_brs = brs;
		su->p_next = 0;
		su->p_on = true;
		su->at = now;
	}
	while (su->p_on && *budget > 0 && su->p_next < nb) {
		struct meta_bucket mb;
		uint16_t bk = b[su->p_next++];
		int rc = mgroup_read(fs->groups[g], bk, &mb);

		(*budget)--;
		if (rc == 0) {
			rc = meta_snap_usage(mb.t, bk, vs->keep, vs->nkeep, br, nbr, wr, &su->p);
			meta_txn_abort(mb.t);
		}
		if (rc < 0)
			su->p_on = false; /* a bucket not read: this pass would say too little */
	}
	if (su->p_on && su->p_next >= nb) { /* done: published */
		su->u = su->p;
		su->n = vs->nkeep;
		memcpy(su->ver, vs->keep, vs->nkeep * sizeof(vs->keep[0]));
		su->nbr = nbr;
		for (unsigned i = 0; i < nbr; i++)
			su->br[i] = br[i].id;
		su->brs = brs;
		su->term = term;
		su->gen = vs->gen;
		su->p_on = false;
	}
	if (su->term != term || su->gen != vs->gen)
		return; /* what was summed is of another kept list or term: not shown */
	out->snap_held = su->u.held;
	out->nsnaps = su->n;
	memcpy(out->snap_ver, su->ver, su->n * sizeof(su->ver[0]));
	memcpy(out->snap_only, su->u.only, su->n * sizeof(su->u.only[0]));
	out->nclones = su->nbr;
	memcpy(out->clone_branch, su->br, su->nbr * sizeof(su->br[0]));
	memcpy(out->clone_only, su->u.clone_only, su->nbr * sizeof(su->u.clone_only[0]));
	memcpy(out->clone_mapped, su->u.clone_mapped, su->nbr * sizeof(su->u.clone_mapped[0]));
}

unsigned
msvc_groups(struct msvc *s, struct msvc_group_info *out, unsigned max)
{
	struct sh_list *pos;
	unsigned n = 0;
	uint64_t now = env_now(s->env);
	/* usage is summed over every bucket: at most every USAGE_NS */
	bool fresh = max > 0 && now - s->usage_at >= USAGE_NS;
	unsigned budget = SNAP_USAGE_BUCKETS; /* what snapshots hold: buckets walked, at most */

	if (fresh)
		s->usage_at = now;
	sh_list_for_each (pos, &s->fss) {
		struct mfs *fs = sh_list_entry(pos, struct mfs, link);

		for (uint32_t g = 0; g < fs->ngroups; g++) {
			struct mgroup_info gi;
			unsigned nb;

			if (fs->groups[g] == NULL)
				continue;
			if (n < max) {
				mgroup_info(fs->groups[g], &gi);
				mgroup_buckets(fs->groups[g], &nb);
				/* a group that has just become ready here sums at once:
				 * what it kept from an older term is stale */
				if (gi.ready && (fresh || fs->usage_term[g] != gi.term)) {
					msvc_group_usage(fs->groups[g], &fs->usage[g]);
					fs->usage_term[g] = gi.term;
				}
				out[n] = (struct msvc_group_info){ .fs = fs->id,
								   .index = g,
								   .nbuckets = nb,
								   .raft_state = gi.raft_state,
								   .term = gi.term,
								   .commit = gi.commit,
								   .applied = gi.applied,
								   .leader = gi.leader,
								   .ready = gi.ready,
								   .usage = fs->usage[g] };
				for (unsigned k = 0; k < gi.nvoters && k < 8; k++)
					out[n].voters[out[n].nvoters++] = gi.voters[k] >> 8;
				if (gi.ready)
					snap_usage(fs, g, gi.term, now, &budget, &out[n]);
			}
			n++;
		}
	}
	return n;
}
