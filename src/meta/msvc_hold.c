// SPDX-License-Identifier: Apache-2.0
/*
 * Open files without names (msvc_int.h, docs/metadata.md "Open files
 * without names"): a client holds every file it has open at the file's
 * bucket leader (MP_HOLD at open, renewed every MP_HOLD_RENEW_MS, given
 * back at the last close); a file whose last name goes stays as an
 * orphan (meta_ops.h) and the leader drops it (META_OP_ORPHAN_DROP) once
 * no hold is left on it.
 *
 * Holds are the leader's memory only, like the cache leases: a new leader
 * knows none, so it drops no orphan until it has led for MP_HOLD_MS, by
 * when every holder has renewed (three times). A holder that dies stops
 * renewing: its holds run out after MP_HOLD_MS and its orphans go then.
 * An orphan being dropped is never held again: such a hold is refused
 * with -ESTALE (the kernel then looks the name up again).
 */
#include <string.h>

#include "msvc_int.h"

SH_LOG_FACILITY("meta.hold");

#define SLOTS	   4096
#define HOLD_NS	   ((uint64_t)MP_HOLD_MS * 1000 * 1000)
#define DROPS_MAX  64 /* orphans being dropped at once, per filesystem */
#define SCAN_BATCH 64

struct hold {
	struct hold *next;
	uint64_t ino, client, expires;
};

struct mholds {
	struct hold *slot[SLOTS];
	uint64_t dropping[DROPS_MAX]; /* 0: a free slot */
};

static struct mholds *
holds_of(struct mfs *fs)
{
	if (fs->holds == NULL)
		fs->holds = sh_calloc(1, sizeof(*fs->holds));
	return fs->holds;
}

static bool
dropping(const struct mholds *h, uint64_t ino)
{
	for (unsigned i = 0; i < DROPS_MAX; i++)
		if (h->dropping[i] == ino)
			return true;
	return false;
}

int
msvc_hold(struct mfs *fs, uint64_t client, uint64_t ino, bool release)
{
	struct mholds *h = holds_of(fs);
	uint64_t now = env_now(fs->s->env);
	struct hold **pp, *l;

	if (h == NULL)
		return -ENOMEM;
	if (!release && dropping(h, ino))
		return -ESTALE;
	pp = &h->slot[sh_hash_u64(ino) % SLOTS];
	while ((l = *pp) != NULL) {
		if (l->expires < now || (release && l->ino == ino && l->client == client)) {
			*pp = l->next; /* run out (its holder stopped renewing), or given back */
			sh_free(l);
			continue;
		}
		if (l->ino == ino && l->client == client) {
			l->expires = now + HOLD_NS;
			return 0;
		}
		pp = &l->next;
	}
	if (release)
		return 0;
	l = sh_calloc(1, sizeof(*l));
	if (l == NULL)
		return -ENOMEM;
	*l = (struct hold){ .ino = ino, .client = client, .expires = now + HOLD_NS };
	*pp = l;
	return 0;
}

static bool
held(const struct mholds *h, uint64_t ino, uint64_t now)
{
	for (const struct hold *l = h->slot[sh_hash_u64(ino) % SLOTS]; l; l = l->next)
		if (l->ino == ino && l->expires >= now)
			return true;
	return false;
}

struct drop {
	struct mfs *fs;
	uint64_t ino;
};

static void
on_dropped(void *arg, int status, const struct meta_result *r)
{
	struct drop *d = arg;
	struct mholds *h = d->fs->holds;

	if (status == 0 && r->status == 0)
		sh_log_debug("orphan %llx dropped", (unsigned long long)d->ino);
	for (unsigned i = 0; h && i < DROPS_MAX; i++)
		if (h->dropping[i] == d->ino)
			h->dropping[i] = 0;
	mfs_unref(d->fs);
	sh_free(d);
}

struct oscan {
	struct mfs *fs;
	uint64_t now;
	uint64_t got[SCAN_BATCH];
	uint16_t branch[SCAN_BATCH];
	unsigned n;
};

static int
on_orphan(void *arg, uint64_t ino, uint16_t branch, uint64_t since)
{
	struct oscan *o = arg;

	(void)since;
	if (o->n == SCAN_BATCH)
		return 1;
	/* (a hold names an inode, not a branch: a clone's file and its origin's keep both) */
	if (!held(o->fs->holds, ino, o->now) && !dropping(o->fs->holds, ino)) {
		o->branch[o->n] = branch;
		o->got[o->n++] = ino;
	}
	return 0;
}

void
msvc_orphans_reap(struct mfs *fs, struct mgroup *g, uint32_t gi, uint16_t bucket)
{
	struct mholds *h = holds_of(fs);
	struct oscan o = { .fs = fs, .now = env_now(fs->s->env) };
	struct meta_bucket mb;

	/* a new leader knows no holds until every holder has renewed */
	if (h == NULL || fs->led_since == NULL || fs->led_since[gi] == 0 ||
	    o.now - fs->led_since[gi] < HOLD_NS || mgroup_read(g, bucket, &mb) < 0)
		return;
	(void)meta_orphans(&mb, on_orphan, &o);
	meta_txn_abort(mb.t);
	for (unsigned i = 0; i < o.n; i++) {
		/* a drop of a branch's orphan is a command of that branch */
		struct meta_cmd c = { .op = META_OP_ORPHAN_DROP,
				      .ver = (uint64_t)o.branch[i] << META_BRANCH_SHIFT | 1,
				      .now = env_realtime(fs->s->env),
				      .ino = o.got[i] };
		unsigned slot = DROPS_MAX;
		struct drop *d;

		for (unsigned k = 0; k < DROPS_MAX && slot == DROPS_MAX; k++)
			if (h->dropping[k] == 0)
				slot = k;
		if (slot == DROPS_MAX || (d = sh_calloc(1, sizeof(*d))) == NULL)
			return; /* the rest next round */
		*d = (struct drop){ .fs = fs, .ino = o.got[i] };
		h->dropping[slot] = o.got[i];
		fs->refs++;
		if (mgroup_propose(g, bucket, &c, on_dropped, d) < 0) {
			h->dropping[slot] = 0;
			fs->refs--;
			sh_free(d);
		}
	}
}

bool
msvc_hold_fence(struct mfs *fs, uint32_t gi, uint64_t ino)
{
	struct mholds *h = holds_of(fs);
	uint64_t now = env_now(fs->s->env);

	if (h == NULL || fs->led_since == NULL || gi >= fs->ngroups || fs->led_since[gi] == 0 ||
	    now - fs->led_since[gi] < HOLD_NS || held(h, ino, now) || dropping(h, ino))
		return false;
	for (unsigned k = 0; k < DROPS_MAX; k++)
		if (h->dropping[k] == 0) {
			h->dropping[k] = ino;
			return true;
		}
	return false; /* many at once: the orphan path */
}

void
msvc_hold_unfence(struct mfs *fs, uint64_t ino)
{
	for (unsigned k = 0; fs->holds && k < DROPS_MAX; k++)
		if (fs->holds->dropping[k] == ino) {
			fs->holds->dropping[k] = 0;
			return;
		}
}

void
msvc_hold_led(struct mfs *fs, uint32_t gi)
{
	if (fs->led_since == NULL)
		fs->led_since = sh_calloc(fs->ngroups ? fs->ngroups : 1, sizeof(*fs->led_since));
	if (fs->led_since != NULL && gi < fs->ngroups)
		fs->led_since[gi] = env_now(fs->s->env) | 1;
}

void
msvc_hold_free(struct mfs *fs)
{
	if (fs->holds == NULL)
		goto out;
	for (unsigned i = 0; i < SLOTS; i++)
		while (fs->holds->slot[i]) {
			struct hold *l = fs->holds->slot[i];

			fs->holds->slot[i] = l->next;
			sh_free(l);
		}
	sh_free(fs->holds);
	fs->holds = NULL;
out:
	sh_free(fs->led_since);
	fs->led_since = NULL;
}
