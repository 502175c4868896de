// SPDX-License-Identifier: Apache-2.0
/*
 * The configuration's part of self-healing (config.h, docs/healing.md):
 * drive states, the rebuild settings, and what a target is to the data
 * path at a moment.
 */
#include <stddef.h>
#include <string.h>

#include "config_int.h"

/* Each setting: its field, and the values it takes. */
static const struct setting {
	const char *name, *unit;
	size_t off, size;
	uint64_t min, max;
} settings[] = {
	{ "rebuild-delay", "seconds", offsetof(struct cfg, rebuild_delay_s),
	  sizeof(((struct cfg *)0)->rebuild_delay_s), 0, CFG_REBUILD_DELAY_MAX },
	{ "rebuild-share", "percent", offsetof(struct cfg, rebuild_share),
	  sizeof(((struct cfg *)0)->rebuild_share), 1, 100 },
	{ "scrub-rate", "MiB/s per target (0: off)", offsetof(struct cfg, scrub_rate),
	  sizeof(((struct cfg *)0)->scrub_rate), 0, 100000 },
	{ "scrub-interval", "hours", offsetof(struct cfg, scrub_interval),
	  sizeof(((struct cfg *)0)->scrub_interval), 0, 8760 },
};
#define NSETTINGS (sizeof(settings) / sizeof(settings[0]))

const char *const cfg_setting_names[] = { "rebuild-delay", "rebuild-share", "scrub-rate",
					  "scrub-interval", NULL };

static const struct setting *
setting_find(const char *name)
{
	for (size_t i = 0; i < NSETTINGS; i++)
		if (strcmp(settings[i].name, name) == 0)
			return &settings[i];
	return NULL;
}

void
cfg_heal_defaults(struct cfg *c)
{
	c->rebuild_delay_s = CFG_REBUILD_DELAY_S;
	c->rebuild_share = CFG_REBUILD_SHARE;
	c->scrub_rate = CFG_SCRUB_RATE;
	c->scrub_interval = CFG_SCRUB_INTERVAL;
}

const struct cfg_drive *
cfg_drive_find(const struct cfg *c, uint64_t target)
{
	for (uint32_t i = 0; i < c->ndrives; i++)
		if (c->drives[i].id == target)
			return &c->drives[i];
	return NULL;
}

int
cfg_target_state(const struct cfg *c, uint64_t target, uint64_t now)
{
	const struct cfg_drive *d = cfg_drive_find(c, target);
	const struct cfg_node *n = d ? cfg_node_find(c, d->node) : NULL;
	uint64_t delay = (uint64_t)c->rebuild_delay_s * SH_NSEC_PER_SEC;

	if (n == NULL || d->state == CFG_DRIVE_FAILED)
		return CFG_TGT_LOST;
	if (!cfg_node_down(n))
		return d->state == CFG_DRIVE_DRAINING ? CFG_TGT_DRAINING : CFG_TGT_UP;
	return now >= n->since && now - n->since >= delay ? CFG_TGT_LOST : CFG_TGT_DOWN;
}

int64_t
cfg_setting_get(const struct cfg *c, const char *name)
{
	const struct setting *st = setting_find(name);
	uint32_t v32;
	uint8_t v8;

	if (st == NULL)
		return -ENOENT;
	if (st->size == 1) {
		memcpy(&v8, (const uint8_t *)c + st->off, 1);
		return v8;
	}
	memcpy(&v32, (const uint8_t *)c + st->off, 4);
	return v32;
}

bool
cfg_node_leaving(const struct cfg *c, uint64_t node)
{
	unsigned n = 0;

	for (uint32_t i = 0; i < c->ndrives; i++) {
		if (c->drives[i].node != node)
			continue;
		if (c->drives[i].state != CFG_DRIVE_DRAINING)
			return false;
		n++;
	}
	return n > 0;
}

int
cfg_check_heal(const struct cfg *c, const struct cfg_cmd *cmd, char *msg, size_t len)
{
	const struct cfg_drive *d;
	const struct setting *st;
	int64_t cur;

	if (cmd->op == CFG_OP_EVENT) {
		if (cmd->path[0] == '\0')
			return cfg_fail(msg, len, -EINVAL, "an event needs a text");
		if (cmd->id != 0 && cfg_node_find(c, cmd->id) == NULL)
			return cfg_fail(msg, len, -ENOENT, "no node %llu",
					(unsigned long long)cmd->id);
		return 0;
	}
	if (cmd->op == CFG_OP_DRIVE_STATE || cmd->op == CFG_OP_DRIVE_REMOVE) {
		d = cfg_drive_find(c, cmd->target);
		if (d == NULL)
			return cfg_fail(msg, len, -ENOENT, "no drive %llu",
					(unsigned long long)cmd->target);
		if (cmd->op == CFG_OP_DRIVE_REMOVE)
			return d->state == CFG_DRIVE_DRAINING || d->state == CFG_DRIVE_FAILED
				   ? 0
				   : cfg_fail(msg, len, -EBUSY,
					      "drive %llu is in service: drain it first "
					      "(shoal drive remove)",
					      (unsigned long long)cmd->target);
		if (cmd->state != CFG_DRIVE_FAILED && cmd->state != CFG_DRIVE_DRAINING)
			return cfg_fail(msg, len, -EINVAL,
					"a drive fails or drains; neither "
					"is undone (remove it, add it again)");
		if (d->state == cmd->state)
			return cfg_fail(msg, len, -EALREADY, "drive %llu is %s already",
					(unsigned long long)cmd->target,
					d->state == CFG_DRIVE_FAILED ? "failed" : "draining");
		if (d->state == CFG_DRIVE_FAILED)
			return cfg_fail(msg, len, -EINVAL,
					"drive %llu has failed: nothing to drain from it",
					(unsigned long long)cmd->target);
		return 0;
	}
	st = setting_find(cmd->name);
	if (st == NULL)
		return cfg_fail(msg, len, -ENOENT,
				"no setting '%s' (there are rebuild-delay, rebuild-share, "
				"scrub-rate, scrub-interval)",
				cmd->name);
	cur = cfg_setting_get(c, cmd->name);
	if (cmd->size < st->min || cmd->size > st->max)
		return cfg_fail(msg, len, -EINVAL, "%s is %s from %llu to %llu, not %llu",
				cmd->name, st->unit, (unsigned long long)st->min,
				(unsigned long long)st->max, (unsigned long long)cmd->size);
	if ((uint64_t)cur == cmd->size)
		return cfg_fail(msg, len, -EALREADY, "%s is %lld already", cmd->name,
				(long long)cur);
	return 0;
}

void
cfg_apply_heal(struct cfg *c, const struct cfg_cmd *cmd)
{
	if (cmd->op == CFG_OP_EVENT) {
		cfg_event(c, cmd->time, cmd->id, "%s", cmd->path);
		return;
	}
	if (cmd->op == CFG_OP_DRIVE_REMOVE) {
		uint32_t i;

		for (i = 0; c->drives[i].id != cmd->target; i++)
			;
		cfg_event(c, cmd->time, c->drives[i].node, "drive %llu of node %llu removed",
			  (unsigned long long)cmd->target, (unsigned long long)c->drives[i].node);
		memmove(&c->drives[i], &c->drives[i + 1],
			(c->ndrives - i - 1) * sizeof(c->drives[0]));
		c->ndrives--;
		return;
	}
	if (cmd->op == CFG_OP_DRIVE_STATE) {
		struct cfg_drive *d = (struct cfg_drive *)cfg_drive_find(c, cmd->target);

		d->state = cmd->state;
		d->since = cmd->time;
		if (d->state == CFG_DRIVE_FAILED)
			cfg_event(c, cmd->time, d->node,
				  "drive %llu of node %llu failed%s%s%s: its fragments are rebuilt",
				  (unsigned long long)d->id, (unsigned long long)d->node,
				  cmd->path[0] ? " (" : "", cmd->path, cmd->path[0] ? ")" : "");
		else
			cfg_event(c, cmd->time, d->node,
				  "drive %llu of node %llu draining: its fragments move off it",
				  (unsigned long long)d->id, (unsigned long long)d->node);
		return;
	}
	{
		const struct setting *st = setting_find(cmd->name);
		uint32_t v32 = (uint32_t)cmd->size;
		uint8_t v8 = (uint8_t)cmd->size;

		memcpy((uint8_t *)c + st->off, st->size == 1 ? (void *)&v8 : (void *)&v32,
		       st->size);
	}
	cfg_event(c, cmd->time, 0, "setting %s is now %llu", cmd->name,
		  (unsigned long long)cmd->size);
}
