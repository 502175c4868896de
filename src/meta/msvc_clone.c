// SPDX-License-Identifier: Apache-2.0
/*
 * Writable clones at the metadata groups (docs/snapshots.md "Clones"). A
 * clone lives in its origin's groups as a branch of their version space
 * (meta_db.h "Branches", meta_version.h). With the snapshot steps
 * (msvc_snap.c), every tick:
 *
 * - each group this node leads is brought to what the configuration says
 *   of the origin's clones: a branch for each one being created or ready
 *   (META_OP_BRANCH on its snapshot's version), the branch of each one
 *   being deleted dropped, CLONE_KEYS keys a step (META_OP_BRANCH_DROP);
 * - the leader of the origin's first group, while a clone is being
 *   created or deleted, hears from every group which branches it serves
 *   (MP_VERSION) and proposes the clone's next state: ready once every
 *   group serves its branch (only then may a command of it come anywhere),
 *   forgotten once none does.
 */
#include <stdio.h>
#include <string.h>

#include "meta_version.h"
#include "msvc_int.h"

SH_LOG_FACILITY("meta.clone");

#define CLONE_KEYS META_DROP_MAX

int
msvc_branch_ok(const struct mfs *fs, uint16_t branch)
{
	const struct cfg_fs *f = cfg_clone_find(mroute_cfg(fs->s->rt), fs->id, branch);

	if (f == NULL)
		return -ESTALE; /* no such clone (any more) */
	return f->clone_state == CFG_CLONE_READY      ? 0
	       : f->clone_state == CFG_CLONE_CREATING ? -EAGAIN
						      : -ESTALE;
}

bool
msvc_clone_step(struct mfs *fs, const struct meta_version *vs, struct meta_cmd *c, uint16_t *bucket)
{
	const struct cfg *cfg = mroute_cfg(fs->s->rt);
	uint8_t *data = (uint8_t *)c->data;

	/* a clone to serve that the group does not yet: its branch, on the clone's snapshot */
	for (uint32_t i = 0; i < cfg->nfs; i++) {
		const struct cfg_fs *f = &cfg->fs[i];

		if (f->origin != fs->id || f->clone_state == CFG_CLONE_DELETING ||
		    meta_version_branch(vs, f->branch) != NULL || f->branch <= vs->btop)
			continue;
		c->op = META_OP_BRANCH;
		c->upto = f->branch;
		meta_le64_put(data, f->base);
		c->dlen = 8;
		*bucket = vs->buckets[0];
		return true;
	}
	/* a clone that goes which the group never served: fenced (it never comes late) */
	for (uint32_t i = 0; i < cfg->nfs; i++) {
		const struct cfg_fs *f = &cfg->fs[i];

		if (f->origin != fs->id || f->clone_state != CFG_CLONE_DELETING ||
		    f->branch <= vs->btop)
			continue;
		c->op = META_OP_BRANCH;
		c->upto = f->branch;
		memset(data, 0, 8);
		c->dlen = 8;
		*bucket = vs->buckets[0];
		return true;
	}
	/* a branch whose clone goes (or went): its drop begun, or its next step */
	for (unsigned i = 0; i < vs->nbranch; i++) {
		const struct meta_vbranch *x = &vs->branch[i];
		const struct cfg_fs *f = cfg_clone_find(cfg, fs->id, x->id);
		const struct cfg_fs *o = cfg_fs_by_id(cfg, fs->id);

		if (f != NULL && f->clone_state != CFG_CLONE_DELETING)
			continue;
		if (f == NULL && (o == NULL || o->branches < x->id))
			continue; /* this node's configuration is older than the clone: it waits */
		if (!x->dropping) {
			c->op = META_OP_BRANCH;
			c->upto = x->id;
			memset(data, 0, 8);
			c->dlen = 8;
			*bucket = vs->buckets[0];
		} else if (x->cursor < vs->nb) {
			c->op = META_OP_BRANCH_DROP;
			c->upto = x->id;
			c->flags = CLONE_KEYS;
			c->dlen = 0;
			*bucket = vs->buckets[x->cursor];
		} else {
			continue;
		}
		return true;
	}
	return false;
}

bool
msvc_clone_pending(const struct mfs *fs, const struct cfg *c)
{
	for (uint32_t i = 0; i < c->nfs; i++)
		if (c->fs[i].origin == fs->id && c->fs[i].clone_state != CFG_CLONE_READY)
			return true;
	return false;
}

void
msvc_clone_ask(struct clone_tally *t, const struct mfs *fs, const struct cfg *c)
{
	memset(t, 0, sizeof(*t));
	for (uint32_t i = 0; i < c->nfs && t->n < CFG_CLONES_MAX; i++)
		if (c->fs[i].origin == fs->id && c->fs[i].clone_state != CFG_CLONE_READY)
			t->branch[t->n++] = c->fs[i].branch;
}

void
msvc_clone_heard(struct clone_tally *t, const uint8_t *b, size_t len)
{
	t->groups++;
	for (unsigned k = 0; k < t->n; k++)
		for (size_t at = 0; at + 8 <= len; at += 8) {
			uint64_t v = meta_le64_get(b + at);

			if (v >> 17 & 1) { /* the highest branch the group ever served */
				t->fenced[k] += (uint16_t)v >= t->branch[k];
			} else if ((uint16_t)v == t->branch[k]) {
				t->listed[k]++;
				t->serving[k] += !(v >> 16 & 1);
			}
		}
}

void
msvc_clone_conclude(const struct clone_tally *t, struct mfs *fs, unsigned ngroups)
{
	const struct cfg *c = mroute_cfg(fs->s->rt);

	if (t->groups != ngroups)
		return; /* not every group answered: asked again */
	for (unsigned k = 0; k < t->n; k++) {
		const struct cfg_fs *f = cfg_clone_find(c, fs->id, t->branch[k]);
		struct cfg_cmd cmd = { .op = CFG_OP_FS_CLONE_STATE };

		if (f == NULL)
			continue;
		if (f->clone_state == CFG_CLONE_CREATING && t->serving[k] == ngroups)
			cmd.state = CFG_CLONE_READY;
		else if (f->clone_state == CFG_CLONE_DELETING && t->listed[k] == 0 &&
			 t->fenced[k] == ngroups)
			cmd.state = CFG_CLONE_NONE; /* (and none can take it late) */
		else
			continue;
		snprintf(cmd.name, sizeof(cmd.name), "%s", f->name);
		cmd.time = env_realtime(fs->s->env);
		sh_log_info("clone %s (branch %u of filesystem %u): %s", f->name, f->branch, fs->id,
			    cmd.state == CFG_CLONE_READY ? "every group serves it, ready"
							 : "every group dropped it, gone");
		fs->s->p.cfg_submit(fs->s->p.arg, &cmd);
	}
}
