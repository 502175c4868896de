// SPDX-License-Identifier: Apache-2.0
/*
 * The configuration's part of self-healing (config.h, docs/healing.md):
 * drive states, the rebuild settings, and what a target is to the data
 * path at a moment.
 */
#include <string.h>

#include "config_int.h"

const char *const cfg_setting_names[] = { "rebuild-delay", "rebuild-share", NULL };

void
cfg_heal_defaults(struct cfg *c)
{
	c->rebuild_delay_s = CFG_REBUILD_DELAY_S;
	c->rebuild_share = CFG_REBUILD_SHARE;
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
	if (n->state != CFG_DOWN)
		return CFG_TGT_UP;
	return now >= n->since && now - n->since >= delay ? CFG_TGT_LOST : CFG_TGT_DOWN;
}

int64_t
cfg_setting_get(const struct cfg *c, const char *name)
{
	if (strcmp(name, "rebuild-delay") == 0)
		return c->rebuild_delay_s;
	if (strcmp(name, "rebuild-share") == 0)
		return c->rebuild_share;
	return -ENOENT;
}

int
cfg_check_heal(const struct cfg *c, const struct cfg_cmd *cmd, char *msg, size_t len)
{
	const struct cfg_drive *d;
	int64_t cur;

	if (cmd->op == CFG_OP_DRIVE_STATE) {
		d = cfg_drive_find(c, cmd->target);
		if (d == NULL)
			return cfg_fail(msg, len, -ENOENT, "no drive %llu",
					(unsigned long long)cmd->target);
		if (cmd->state != CFG_DRIVE_FAILED)
			return cfg_fail(msg, len, -EINVAL,
					"a failed drive stays failed: remove it, then add it again");
		if (d->state == cmd->state)
			return cfg_fail(msg, len, -EALREADY, "drive %llu has failed already",
					(unsigned long long)cmd->target);
		return 0;
	}
	cur = cfg_setting_get(c, cmd->name);
	if (cur < 0)
		return cfg_fail(msg, len, -ENOENT,
				"no setting '%s' (there are rebuild-delay, rebuild-share)",
				cmd->name);
	if (strcmp(cmd->name, "rebuild-delay") == 0 && cmd->size > CFG_REBUILD_DELAY_MAX)
		return cfg_fail(msg, len, -EINVAL,
				"rebuild-delay is seconds from 0 to %u, not %llu",
				CFG_REBUILD_DELAY_MAX, (unsigned long long)cmd->size);
	if (strcmp(cmd->name, "rebuild-share") == 0 && (cmd->size == 0 || cmd->size > 100))
		return cfg_fail(msg, len, -EINVAL, "rebuild-share is a percent from 1 to 100, not %llu",
				(unsigned long long)cmd->size);
	if ((uint64_t)cur == cmd->size)
		return cfg_fail(msg, len, -EALREADY, "%s is %lld already", cmd->name,
				(long long)cur);
	return 0;
}

void
cfg_apply_heal(struct cfg *c, const struct cfg_cmd *cmd)
{
	if (cmd->op == CFG_OP_DRIVE_STATE) {
		struct cfg_drive *d = (struct cfg_drive *)cfg_drive_find(c, cmd->target);

		d->state = cmd->state;
		d->since = cmd->time;
		cfg_event(c, cmd->time, d->node, "drive %llu of node %llu failed: its fragments are rebuilt",
			  (unsigned long long)d->id, (unsigned long long)d->node);
		return;
	}
	if (strcmp(cmd->name, "rebuild-delay") == 0)
		c->rebuild_delay_s = (uint32_t)cmd->size;
	else
		c->rebuild_share = (uint8_t)cmd->size;
	cfg_event(c, cmd->time, 0, "setting %s is now %llu", cmd->name,
		  (unsigned long long)cmd->size);
}
