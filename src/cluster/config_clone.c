// SPDX-License-Identifier: Apache-2.0
/*
 * Writable clones in the configuration (config.h, docs/snapshots.md
 * "Clones"): fs.clone makes one on a ready snapshot, fs.clone_state moves
 * it on, and the rules that keep what a clone stands on: its snapshot is
 * not deleted, its origin neither, while it is there. A writable snapshot
 * is a snapshot with a clone of its own (CFG_SNAP_WRITABLE).
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

/* The name a writable snapshot of fs called snap opens as: FS@NAME (its clone's). */
#define WRITABLE_NAME_MAX (2 * CFG_NAME_MAX + 1)
static const char *
writable_name(char *buf, const char *fs, const char *snap)
{
	snprintf(buf, WRITABLE_NAME_MAX, "%s@%s", fs, snap);
	return buf;
}

const struct cfg_fs *
cfg_writable_of(const struct cfg *c, const struct cfg_fs *origin, const struct cfg_snap *s)
{
	char name[WRITABLE_NAME_MAX];
	const struct cfg_fs *w;

	if (origin == NULL || s == NULL)
		return NULL;
	w = cfg_fs_find(c, writable_name(name, origin->name, s->name));
	return w != NULL && w->origin == origin->id && w->base == s->version ? w : NULL;
}

const struct cfg_snap *
cfg_clone_snap(const struct cfg *c, const struct cfg_fs *f)
{
	for (uint32_t i = 0; f->origin != 0 && i < c->nsnaps; i++)
		if (c->snaps[i].fs == f->origin && c->snaps[i].version == f->base)
			return &c->snaps[i];
	return NULL;
}

const struct cfg_snap *
cfg_writable_snap(const struct cfg *c, const struct cfg_fs *f)
{
	const struct cfg_snap *s = cfg_clone_snap(c, f);

	return s != NULL && cfg_writable_of(c, cfg_fs_by_id(c, f->origin), s) == f ? s : NULL;
}

/* Room for one more clone of f (a clone or a writable snapshot), called name. */
static int
room_for_clone(const struct cfg *c, const struct cfg_fs *f, const char *name, char *msg, size_t len)
{
	if (cfg_fs_find(c, name) != NULL)
		return cfg_fail(msg, len, -EEXIST, "filesystem '%s' already exists", name);
	if (c->nfs >= CFG_FS_MAX)
		return cfg_fail(msg, len, -ENOSPC,
				"the cluster has the most filesystems it can (%d; a clone or a "
				"writable snapshot is one)",
				CFG_FS_MAX);
	if (cfg_clones_of(c, f->id, 0, NULL, 0) >= CFG_CLONES_MAX)
		return cfg_fail(msg, len, -ENOSPC,
				"filesystem %s has the most clones and writable snapshots it can "
				"(%d): delete some first",
				f->name, CFG_CLONES_MAX);
	if (f->branches == UINT16_MAX)
		return cfg_fail(msg, len, -ENOSPC, "filesystem %s has no branch numbers left",
				f->name);
	return 0;
}

/* A writable snapshot's clone: its name fits, and the clone rules let it be. */
static int
check_writable(const struct cfg *c, const struct cfg_fs *f, const struct cfg_cmd *cmd, char *msg,
	       size_t len)
{
	char name[WRITABLE_NAME_MAX];

	if (cmd->state != CFG_SNAP_WRITABLE)
		return cmd->state == 0
			   ? 0
			   : cfg_fail(msg, len, -EINVAL,
				      "a snapshot is made read-only (0) or writable (%d), "
				      "not %u",
				      CFG_SNAP_WRITABLE, cmd->state);
	if (strlen(writable_name(name, f->name, cmd->snap)) >= CFG_NAME_MAX)
		return cfg_fail(msg, len, -ENAMETOOLONG,
				"a writable snapshot is opened as %s, longer than a filesystem "
				"name may be (%d): name it shorter",
				name, CFG_NAME_MAX - 1);
	return room_for_clone(c, f, name, msg, len);
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
		if (cfg_writable_snap(c, f) != NULL) {
			/* its snapshot goes with it: not while the origin is restored (as
			 * snap.delete) */
			const struct cfg_fs *o = cfg_fs_by_id(c, f->origin);

			if (o != NULL && o->restore_phase != CFG_RESTORE_NONE)
				return cfg_fail(msg, len, -EBUSY,
						"filesystem %s is being restored to version %llu: "
						"try again when it is done",
						o->name, (unsigned long long)o->restore_ver);
		}
		if (cfg_clones_of(c, f->id, 0, names, sizeof(names)) > 0)
			return cfg_fail(msg, len, -EBUSY,
					"filesystem %s has clones (%s): delete them first", f->name,
					names);
		return 0;
	case CFG_OP_SNAP_DELETE: {
		const struct cfg_snap *s = cfg_snap_find(c, f->id, cmd->snap);
		const struct cfg_fs *w = cfg_writable_of(c, f, s);

		if (w != NULL && w->clone_state == CFG_CLONE_DELETING)
			return cfg_fail(msg, len, -EALREADY,
					"snapshot %s of %s is being deleted already (its writes "
					"first)",
					s->name, f->name);
		/* (its own clone goes with it) */
		if (s != NULL &&
		    cfg_clones_of(c, f->id, s->version, names, sizeof(names)) > (w != NULL))
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
		if (cmd->op == CFG_OP_FS_RESTORE &&
		    cfg_writable_of(c, f, cfg_snap_find(c, f->id, cmd->snap)) != NULL)
			return cfg_fail(msg, len, -EOPNOTSUPP,
					"snapshot %s of %s is writable: a restore to it is not "
					"supported yet (restore a read-only one)",
					cmd->snap, f->name);
		return cmd->op == CFG_OP_SNAP_CREATE ? check_writable(c, f, cmd, msg, len) : 0;
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
	if (cfg_writable_of(c, f, s) != NULL)
		return cfg_fail(msg, len, -EOPNOTSUPP,
				"snapshot %s of %s is writable: it is a clone (%s@%s) itself, and "
				"clones of clones are not supported yet",
				s->name, f->name, f->name, s->name);
	if (!cfg_name_ok(cmd->path))
		return cfg_fail(msg, len, -EINVAL,
				"'%s' is not a filesystem name (1-63 of A-Z a-z 0-9 . _ -)",
				cmd->path);
	return room_for_clone(c, f, cmd->path, msg, len);
}

/* A clone named name of f on snapshot s: being created. */
static struct cfg_fs *
clone_add(struct cfg *c, struct cfg_fs *f, const struct cfg_snap *s, const char *name,
	  uint64_t time)
{
	struct cfg_fs *n = cfg_fs_add(c, name, f->d, f->p, f->compression, f->dedup, time);

	n->origin = f->id;
	/* its blocks are its origin's, under the same master key: opened with the origin's
	 * wrapping (the client asks for the origin's), so none is kept here to go stale */
	n->sealed = f->sealed;
	n->branch = ++f->branches;
	n->base = s->version;
	n->clone_state = CFG_CLONE_CREATING;
	return n;
}

void
cfg_apply_writable(struct cfg *c, struct cfg_fs *f, const struct cfg_snap *s, uint64_t time)
{
	char name[WRITABLE_NAME_MAX];

	clone_add(c, f, s, writable_name(name, f->name, s->name), time);
}

void
cfg_apply_clone(struct cfg *c, const struct cfg_cmd *cmd)
{
	struct cfg_fs *f = (struct cfg_fs *)cfg_fs_find(c, cmd->name), *n;
	const struct cfg_snap *s;

	if (cmd->op == CFG_OP_FS_CLONE_STATE) {
		/* a writable snapshot's clone gone: the snapshot goes now */
		struct cfg_snap *ws = (struct cfg_snap *)cfg_writable_snap(c, f);

		if (cmd->state == CFG_CLONE_READY) {
			f->clone_state = CFG_CLONE_READY;
			cfg_event(c, cmd->time, cmd->id, "clone %s is ready: it serves", f->name);
			return;
		}
		cfg_event(c, cmd->time, cmd->id, "clone %s is gone: its space is freed", f->name);
		cfg_keys_drop(c, f->id);
		memmove(f, f + 1, (size_t)(c->fs + c->nfs - (f + 1)) * sizeof(*f));
		c->nfs--;
		if (ws != NULL && ws->state != CFG_SNAP_DELETING) {
			ws->state = CFG_SNAP_DELETING;
			cfg_event(
			    c, cmd->time, 0,
			    "snapshot %s deleted (version %llu), its writes gone: its space is "
			    "freed in the background",
			    ws->name, (unsigned long long)ws->version);
		}
		return;
	}
	s = cfg_snap_find(c, f->id, cmd->snap);
	n = clone_add(c, f, s, cmd->path, cmd->time);
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
