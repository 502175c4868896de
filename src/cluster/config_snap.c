// SPDX-License-Identifier: Apache-2.0
/*
 * The configuration's part of snapshots (config.h, enum cfg_snap_state):
 * the filesystems' versions, the snapshot table, and the commands that
 * change them (snap.create, snap.state, snap.delete, snap.forget); a
 * filesystem's restore to one (fs.restore, fs.restore_step); a
 * filesystem's snapshot schedule (snap.schedule: what the configuration's
 * leader takes and trims, src/shoald/watch.c).
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_int.h"

const char *
cfg_snap_state_name(unsigned state)
{
	switch (state) {
	case CFG_SNAP_CREATING:
		return "creating";
	case CFG_SNAP_READY:
		return "ready";
	case CFG_SNAP_DELETING:
		return "deleting";
	default:
		return "?";
	}
}

const struct cfg_snap *
cfg_snap_find(const struct cfg *c, uint32_t fs, const char *name)
{
	for (uint32_t i = 0; i < c->nsnaps; i++)
		if (c->snaps[i].fs == fs && strcmp(c->snaps[i].name, name) == 0)
			return &c->snaps[i];
	return NULL;
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

unsigned
cfg_fs_keep(const struct cfg *c, uint32_t fs, uint64_t *v, unsigned max)
{
	uint64_t all[CFG_SNAPS_MAX];
	unsigned n = 0, k = 0;

	for (uint32_t i = 0; i < c->nsnaps && i < CFG_SNAPS_MAX; i++)
		if (c->snaps[i].fs == fs && c->snaps[i].state != CFG_SNAP_DELETING)
			all[n++] = c->snaps[i].version;
	qsort(all, n, sizeof(all[0]), cmp_u64);
	for (unsigned i = 0; i < n; i++) {
		if (k > 0 && all[i] == all[k - 1])
			continue;
		all[k++] = all[i];
	}
	if (max > 0 && k > 0)
		memcpy(v, all,
		       (k < max ? k : max) * sizeof(*v)); /* (v may be NULL when max is 0) */
	return k;
}

const char *
cfg_duration_str(uint64_t s, char *buf, size_t len)
{
	if (s != 0 && s % 86400 == 0)
		snprintf(buf, len, "%llud", (unsigned long long)(s / 86400));
	else if (s != 0 && s % 3600 == 0)
		snprintf(buf, len, "%lluh", (unsigned long long)(s / 3600));
	else if (s != 0 && s % 60 == 0)
		snprintf(buf, len, "%llum", (unsigned long long)(s / 60));
	else
		snprintf(buf, len, "%llus", (unsigned long long)s);
	return buf;
}

int64_t
cfg_duration_parse(const char *s)
{
	unsigned long long v = 0, unit = 1;
	const char *p = s;

	if (!isdigit((unsigned char)*p))
		return -EINVAL;
	for (; isdigit((unsigned char)*p); p++) {
		v = v * 10 + (unsigned long long)(*p - '0');
		if (v > (1ull << 40))
			return -EINVAL;
	}
	switch (*p) {
	case '\0':
		return (int64_t)v;
	case 's':
		break;
	case 'm':
		unit = 60;
		break;
	case 'h':
		unit = 3600;
		break;
	case 'd':
		unit = 86400;
		break;
	default:
		return -EINVAL;
	}
	if (p[1] != '\0')
		return -EINVAL;
	return (int64_t)(v * unit);
}

/* snap.schedule: a filesystem's schedule set, changed or turned off. */
static int
check_schedule(const struct cfg *c, const struct cfg_cmd *cmd, char *msg, size_t len)
{
	const struct cfg_fs *f = cfg_fs_find(c, cmd->name);
	char every[32];

	if (f == NULL)
		return cfg_fail(msg, len, -ENOENT, "no filesystem '%s'", cmd->name);
	if (cmd->size > CFG_SNAP_EVERY_MAX)
		return cfg_fail(msg, len, -EINVAL,
				"a snapshot schedule runs every 1 s to 30 days (%u s), not %llu s",
				CFG_SNAP_EVERY_MAX, (unsigned long long)cmd->size);
	if (cmd->size != 0 && (cmd->quota < 1 || cmd->quota > CFG_FS_SNAPS_MAX))
		return cfg_fail(msg, len, -EINVAL,
				"a snapshot schedule keeps the last 1 to %d snapshots, not %llu",
				CFG_FS_SNAPS_MAX, (unsigned long long)cmd->quota);
	if (cmd->size == 0 && f->snap_every_s == 0)
		return cfg_fail(msg, len, -EALREADY, "filesystem %s has no scheduled snapshots",
				f->name);
	if (cmd->size != 0 && cmd->size == f->snap_every_s && cmd->quota == f->snap_keep)
		return cfg_fail(msg, len, -EALREADY,
				"filesystem %s already takes a snapshot every %s, the last %u kept",
				f->name, cfg_duration_str(cmd->size, every, sizeof(every)),
				f->snap_keep);
	return 0;
}

static void
apply_schedule(struct cfg *c, const struct cfg_cmd *cmd)
{
	struct cfg_fs *f = (struct cfg_fs *)cfg_fs_find(c, cmd->name);
	char every[32];

	f->snap_every_s = (uint32_t)cmd->size;
	f->snap_keep = cmd->size ? (uint32_t)cmd->quota : 0;
	if (f->snap_every_s == 0)
		cfg_event(c, cmd->time, 0, "filesystem %s: no scheduled snapshots", f->name);
	else
		cfg_event(c, cmd->time, 0, "filesystem %s: a snapshot every %s, the last %u kept",
			  f->name, cfg_duration_str(f->snap_every_s, every, sizeof(every)),
			  f->snap_keep);
}

/* fs.restore_step: the restore under way moves on, pausing to reverting to done. */
static int
check_restore_step(const struct cfg *c, const struct cfg_cmd *cmd, char *msg, size_t len)
{
	const struct cfg_fs *f = cfg_fs_find(c, cmd->name);

	if (f == NULL)
		return cfg_fail(msg, len, -ENOENT, "no filesystem '%s'", cmd->name);
	if (f->restore_phase == CFG_RESTORE_NONE || cmd->size != f->restore_epoch)
		return cfg_fail(msg, len, -EALREADY,
				"filesystem %s is not under restore %llu (it is at %u, %s)",
				f->name, (unsigned long long)cmd->size, f->restore_epoch,
				f->restore_phase ? "under way" : "done");
	if ((f->restore_phase == CFG_RESTORE_PAUSING && cmd->state != CFG_RESTORE_REVERTING) ||
	    (f->restore_phase == CFG_RESTORE_REVERTING && cmd->state != CFG_RESTORE_NONE))
		return cfg_fail(msg, len, cmd->state == f->restore_phase ? -EALREADY : -EINVAL,
				"restore %u of %s is in phase %u: it cannot go to %u",
				f->restore_epoch, f->name, f->restore_phase, cmd->state);
	return 0;
}

/* The filesystem and the snapshot a command names; -ENOENT with a reason. */
static int
find(const struct cfg *c, const struct cfg_cmd *cmd, const struct cfg_fs **f,
     const struct cfg_snap **s, char *msg, size_t len)
{
	*f = cfg_fs_find(c, cmd->name);
	if (*f == NULL)
		return cfg_fail(msg, len, -ENOENT, "no filesystem '%s'", cmd->name);
	*s = cfg_snap_find(c, (*f)->id, cmd->snap);
	if (*s == NULL && cmd->op != CFG_OP_SNAP_CREATE)
		return cfg_fail(msg, len, -ENOENT, "filesystem %s has no snapshot '%s'", cmd->name,
				cmd->snap);
	return 0;
}

int
cfg_check_snap(const struct cfg *c, const struct cfg_cmd *cmd, char *msg, size_t len)
{
	const struct cfg_fs *f;
	const struct cfg_snap *s;
	int rc;

	if (cmd->op == CFG_OP_SNAP_SCHEDULE)
		return check_schedule(c, cmd, msg, len);
	if (cmd->op == CFG_OP_FS_RESTORE_STEP)
		return check_restore_step(c, cmd, msg, len);
	rc = find(c, cmd, &f, &s, msg, len);
	if (rc < 0)
		return rc;
	if (f->restore_phase != CFG_RESTORE_NONE && cmd->op != CFG_OP_SNAP_STATE &&
	    cmd->op != CFG_OP_SNAP_FORGET)
		return cfg_fail(msg, len, -EBUSY,
				"filesystem %s is being restored to version %llu: try again when "
				"it is done",
				f->name, (unsigned long long)f->restore_ver);
	switch (cmd->op) {
	case CFG_OP_FS_RESTORE:
		if (s->state != CFG_SNAP_READY)
			return cfg_fail(msg, len, -EINVAL,
					"snapshot %s of %s is %s: only a ready one can be restored",
					s->name, f->name, cfg_snap_state_name(s->state));
		return 0;
	case CFG_OP_SNAP_CREATE:
		if (!cfg_name_ok(cmd->snap))
			return cfg_fail(msg, len, -EINVAL,
					"'%s' is not a snapshot name (1-63 of A-Z a-z 0-9 . _ -)",
					cmd->snap);
		/* the admin API's /v1/fs/FS/snapshots/schedule is the schedule's */
		if (strcmp(cmd->snap, "schedule") == 0)
			return cfg_fail(msg, len, -EINVAL,
					"'schedule' is not a snapshot name: it names the "
					"filesystem's snapshot schedule");
		if (s != NULL)
			return cfg_fail(msg, len, -EEXIST,
					"filesystem %s already has a snapshot '%s' (%s)", f->name,
					cmd->snap, cfg_snap_state_name(s->state));
		if (c->nsnaps >= CFG_SNAPS_MAX)
			return cfg_fail(msg, len, -ENOSPC,
					"the cluster has the most snapshots it can (%d): delete "
					"some first",
					CFG_SNAPS_MAX);
		if (cfg_fs_keep(c, f->id, NULL, 0) >= CFG_FS_SNAPS_MAX)
			return cfg_fail(msg, len, -ENOSPC,
					"filesystem %s has the most snapshots it can keep (%d): "
					"delete some first",
					f->name, CFG_FS_SNAPS_MAX);
		return 0;
	case CFG_OP_SNAP_STATE:
		if (cmd->state != CFG_SNAP_READY)
			return cfg_fail(msg, len, -EINVAL,
					"a snapshot only becomes ready (snap.delete deletes it), "
					"not state %u",
					cmd->state);
		if (s->state == CFG_SNAP_READY)
			return cfg_fail(msg, len, -EALREADY, "snapshot %s of %s is ready already",
					s->name, f->name);
		if (s->state != CFG_SNAP_CREATING)
			return cfg_fail(msg, len, -EINVAL, "snapshot %s of %s is being deleted",
					s->name, f->name);
		return 0;
	case CFG_OP_SNAP_DELETE:
		if (s->state == CFG_SNAP_DELETING)
			return cfg_fail(msg, len, -EALREADY,
					"snapshot %s of %s is being deleted already", s->name,
					f->name);
		return 0;
	case CFG_OP_SNAP_FORGET:
		if (s->state != CFG_SNAP_DELETING)
			return cfg_fail(msg, len, -EINVAL,
					"snapshot %s of %s is %s, not being deleted: delete it "
					"first",
					s->name, f->name, cfg_snap_state_name(s->state));
		return 0;
	}
	return cfg_fail(msg, len, -EINVAL, "unknown operation %u", cmd->op);
}

void
cfg_apply_snap(struct cfg *c, const struct cfg_cmd *cmd)
{
	struct cfg_fs *f, *w;
	struct cfg_snap *s;
	unsigned long long v;

	if (cmd->op == CFG_OP_SNAP_SCHEDULE) {
		apply_schedule(c, cmd);
		return;
	}
	f = (struct cfg_fs *)cfg_fs_find(c, cmd->name);
	if (cmd->op == CFG_OP_FS_RESTORE_STEP) {
		f->restore_phase = cmd->state;
		if (cmd->state == CFG_RESTORE_NONE) {
			cfg_event(c, cmd->time, cmd->id,
				  "filesystem %s is back at version %llu (restore %u): it serves "
				  "again",
				  f->name, (unsigned long long)f->restore_ver, f->restore_epoch);
			f->restore_ver = 0;
		}
		return;
	}
	s = (struct cfg_snap *)cfg_snap_find(c, f->id, cmd->snap);
	switch (cmd->op) {
	case CFG_OP_FS_RESTORE:
		f->restore_epoch++;
		f->restore_phase = CFG_RESTORE_PAUSING;
		f->restore_ver = s->version;
		cfg_event(
		    c, cmd->time, 0,
		    "filesystem %s goes back to snapshot %s (version %llu, restore %u): paused "
		    "meanwhile",
		    f->name, s->name, (unsigned long long)s->version, f->restore_epoch);
		break;
	case CFG_OP_SNAP_CREATE:
		s = &c->snaps[c->nsnaps++];
		memset(s, 0, sizeof(*s));
		snprintf(s->name, sizeof(s->name), "%s", cmd->snap);
		s->fs = f->id;
		s->version = f->version;
		s->state = CFG_SNAP_CREATING;
		s->created = cmd->time;
		f->version++; /* writes from now on carry the next version */
		cfg_event(c, cmd->time, 0, "snapshot %s of fs %s created (version %llu%s)", s->name,
			  f->name, (unsigned long long)s->version,
			  cmd->state == CFG_SNAP_WRITABLE ? ", writable" : "");
		if (cmd->state == CFG_SNAP_WRITABLE)
			cfg_apply_writable(c, f, s, cmd->time);
		break;
	case CFG_OP_SNAP_STATE:
		s->state = CFG_SNAP_READY;
		cfg_event(c, cmd->time, cmd->id, "snapshot %s of fs %s is ready (version %llu)",
			  s->name, f->name, (unsigned long long)s->version);
		break;
	case CFG_OP_SNAP_DELETE:
		w = (struct cfg_fs *)cfg_writable_of(c, f, s);
		if (w != NULL) {
			/* its writes go first (its clone's drop); then it does (fs.clone_state) */
			cfg_apply_clone_delete(c, w, cmd->time);
			break;
		}
		s->state = CFG_SNAP_DELETING;
		cfg_event(c, cmd->time, 0,
			  "snapshot %s of fs %s deleted (version %llu): its space is freed in the "
			  "background",
			  s->name, f->name, (unsigned long long)s->version);
		break;
	case CFG_OP_SNAP_FORGET:
		v = s->version;
		cfg_event(c, cmd->time, cmd->id,
			  "snapshot %s of fs %s is gone (version %llu): its space is freed",
			  s->name, f->name, v);
		memmove(s, s + 1, (size_t)(c->snaps + c->nsnaps - (s + 1)) * sizeof(*s));
		c->nsnaps--;
		break;
	}
}

unsigned
cfg_snaps_drop(struct cfg *c, uint32_t fs)
{
	uint32_t k = 0, n = c->nsnaps;

	for (uint32_t i = 0; i < n; i++)
		if (c->snaps[i].fs != fs)
			c->snaps[k++] = c->snaps[i];
	c->nsnaps = k;
	return n - k;
}
