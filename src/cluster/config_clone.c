// SPDX-License-Identifier: Apache-2.0
/*
 * Writable clones in the configuration (config.h, docs/snapshots.md
 * "Clones"): fs.clone makes one on a ready snapshot, fs.clone_state moves
 * it on, and the rules that keep what a clone stands on: its snapshot is
 * not deleted, its origin neither, while it is there.
 */
#include <stdio.h>
#include <string.h>

#include "config_int.h"

static const char *
clone_state_name(unsigned state)
{
	switch (state) {
	case CFG_CLONE_CREATING:
		return "being created";
	case CFG_CLONE_READY:
		return "ready";
	case CFG_CLONE_DELETING:
		return "being deleted";
	}
	return "no clone";
}

uint32_t
cfg_nfs_own(const struct cfg *c)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < c->nfs; i++)
		n += cfg_fs_own(&c->fs[i]);
	return n;
}

const struct cfg_fs *
cfg_clone_find(const struct cfg *c, uint32_t origin, uint16_t branch)
{
	for (uint32_t i = 0; i < c->nfs; i++)
		if (c->fs[i].origin == origin && origin != 0 && c->fs[i].branch == branch)
			return &c->fs[i];
	return NULL;
}

unsigned
cfg_clones_of(const struct cfg *c, uint32_t origin, uint64_t base, char *names, size_t len)
{
	unsigned n = 0;
	size_t at = 0;

	if (names != NULL && len > 0)
		names[0] = '\0';
	for (uint32_t i = 0; i < c->nfs; i++) {
		const struct cfg_fs *f = &c->fs[i];

		if (f->origin != origin || origin == 0 || (base != 0 && f->base != base))
			continue;
		if (names != NULL && at < len) {
			int w = snprintf(names + at, len - at, "%s%s", n ? ", " : "", f->name);

			at += w > 0 ? (size_t)w : 0;
		}
		n++;
	}
	return n;
}

int
cfg_check_clone_rules(const struct cfg *c, const struct cfg_cmd *cmd, char *msg, size_t len)
{
	const struct cfg_fs *f = cfg_fs_find(c, cmd->name);
	char names[256];

	if (f == NULL)
		return 0; /* (the operation's own check says so) */
	switch (cmd->op) {
	case CFG_OP_FS_DELETE:
		if (f->origin != 0 && f->clone_state == CFG_CLONE_DELETING)
			return cfg_fail(msg, len, -EALREADY, "clone %s is being deleted already",
					f->name);
		if (cfg_clones_of(c, f->id, 0, names, sizeof(names)) > 0)
			return cfg_fail(msg, len, -EBUSY,
					"filesystem %s has clones (%s): delete them first", f->name,
					names);
		return 0;
	case CFG_OP_SNAP_DELETE: {
		const struct cfg_snap *s = cfg_snap_find(c, f->id, cmd->snap);

		if (s != NULL && cfg_clones_of(c, f->id, s->version, names, sizeof(names)) > 0)
			return cfg_fail(msg, len, -EBUSY,
					"snapshot %s of %s has clones (%s): delete them first",
					s->name, f->name, names);
		return 0;
	}
	case CFG_OP_SNAP_CREATE:
	case CFG_OP_SNAP_SCHEDULE:
	case CFG_OP_FS_RESTORE:
		if (f->origin != 0)
			return cfg_fail(msg, len, -EOPNOTSUPP,
					"%s is a clone: clones have no snapshots or restores of "
					"their own yet (docs/snapshots.md \"Clones\")",
					f->name);
		return 0;
	}
	return 0;
}

int
cfg_check_clone(const struct cfg *c, const struct cfg_cmd *cmd, char *msg, size_t len)
{
	const struct cfg_fs *f = cfg_fs_find(c, cmd->name);
	const struct cfg_snap *s;

	if (f == NULL)
		return cfg_fail(msg, len, -ENOENT, "no filesystem '%s'", cmd->name);
	if (cmd->op == CFG_OP_FS_CLONE_STATE) {
		if (f->origin == 0)
			return cfg_fail(msg, len, -EINVAL, "%s is no clone", f->name);
		if (cmd->state == CFG_CLONE_READY && f->clone_state == CFG_CLONE_READY)
			return cfg_fail(msg, len, -EALREADY, "clone %s is ready already", f->name);
		if ((cmd->state == CFG_CLONE_READY && f->clone_state != CFG_CLONE_CREATING) ||
		    (cmd->state == CFG_CLONE_NONE && f->clone_state != CFG_CLONE_DELETING) ||
		    (cmd->state != CFG_CLONE_READY && cmd->state != CFG_CLONE_NONE))
			return cfg_fail(msg, len, -EINVAL, "clone %s is %s: it cannot go to %u",
					f->name, clone_state_name(f->clone_state), cmd->state);
		return 0;
	}
	if (f->origin != 0)
		return cfg_fail(msg, len, -EOPNOTSUPP,
				"%s is a clone: clones of clones are not supported yet", f->name);
	s = cfg_snap_find(c, f->id, cmd->snap);
	if (s == NULL)
		return cfg_fail(msg, len, -ENOENT, "filesystem %s has no snapshot '%s'", f->name,
				cmd->snap);
	if (s->state != CFG_SNAP_READY)
		return cfg_fail(msg, len, -EINVAL,
				"snapshot %s of %s is %s: only a ready one can be cloned", s->name,
				f->name, cfg_snap_state_name(s->state));
	if (!cfg_name_ok(cmd->path))
		return cfg_fail(msg, len, -EINVAL,
				"'%s' is not a filesystem name (1-63 of A-Z a-z 0-9 . _ -)",
				cmd->path);
	if (cfg_fs_find(c, cmd->path) != NULL)
		return cfg_fail(msg, len, -EEXIST, "filesystem '%s' already exists", cmd->path);
	if (c->nfs >= CFG_FS_MAX)
		return cfg_fail(msg, len, -ENOSPC,
				"the cluster has the most filesystems it can (%d)", CFG_FS_MAX);
	if (cfg_clones_of(c, f->id, 0, NULL, 0) >= CFG_CLONES_MAX)
		return cfg_fail(msg, len, -ENOSPC,
				"filesystem %s has the most clones it can (%d): delete some first",
				f->name, CFG_CLONES_MAX);
	if (f->branches == UINT16_MAX)
		return cfg_fail(msg, len, -ENOSPC, "filesystem %s has no branch numbers left",
				f->name);
	return 0;
}

void
cfg_apply_clone(struct cfg *c, const struct cfg_cmd *cmd)
{
	struct cfg_fs *f = (struct cfg_fs *)cfg_fs_find(c, cmd->name), *n;
	const struct cfg_snap *s;

	if (cmd->op == CFG_OP_FS_CLONE_STATE) {
		if (cmd->state == CFG_CLONE_READY) {
			f->clone_state = CFG_CLONE_READY;
			cfg_event(c, cmd->time, cmd->id, "clone %s is ready: it serves", f->name);
			return;
		}
		cfg_event(c, cmd->time, cmd->id, "clone %s is gone: its space is freed", f->name);
		cfg_keys_drop(c, f->id);
		memmove(f, f + 1, (size_t)(c->fs + c->nfs - (f + 1)) * sizeof(*f));
		c->nfs--;
		return;
	}
	s = cfg_snap_find(c, f->id, cmd->snap);
	n = cfg_fs_add(c, cmd->path, f->d, f->p, f->compression, f->dedup, cmd->time);
	n->origin = f->id;
	/* its blocks are its origin's, under the same master key: opened with the origin's
	 * wrapping (the client asks for the origin's), so none is kept here to go stale */
	n->sealed = f->sealed;
	n->branch = ++f->branches;
	n->base = s->version;
	n->clone_state = CFG_CLONE_CREATING;
	cfg_event(c, cmd->time, 0,
		  "filesystem %s created: a writable clone of %s@%s (version %llu)", n->name,
		  f->name, s->name, (unsigned long long)s->version);
}

void
cfg_apply_clone_delete(struct cfg *c, struct cfg_fs *f, uint64_t time)
{
	f->clone_state = CFG_CLONE_DELETING;
	cfg_event(c, time, 0, "clone %s deleted: its space is freed in the background", f->name);
}
