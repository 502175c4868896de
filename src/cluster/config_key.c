// SPDX-License-Identifier: Apache-2.0
/* File system access keys in the configuration (config.h, docs/security.md "Clients' keys"). */
#include <string.h>

#include "config_int.h"

const struct cfg_key *
cfg_key_find(const struct cfg *c, uint32_t id)
{
	for (uint32_t i = 0; i < c->nkeys; i++)
		if (c->keys[i].id == id)
			return &c->keys[i];
	return NULL;
}

const char *
cfg_key_access_name(unsigned access)
{
	return access == CFG_KEY_WRITE ? "read-write" : access == CFG_KEY_READ ? "read-only" : "?";
}

static void
drop(struct cfg *c, uint32_t i)
{
	memset(c->keys[i].secret, 0, CFG_KEY_LEN);
	memmove(&c->keys[i], &c->keys[i + 1], (c->nkeys - i - 1) * sizeof(c->keys[0]));
	c->nkeys--;
	memset(&c->keys[c->nkeys], 0, sizeof(c->keys[0]));
}

/* The oldest revoked key: its room is what a new key takes when the table is full. */
static int
oldest_revoked(const struct cfg *c)
{
	for (uint32_t i = 0; i < c->nkeys; i++)
		if (c->keys[i].revoked)
			return (int)i;
	return -1;
}

/*
 * An encrypted filesystem's master key wrapped anew (under a new key of its
 * clients): only over the wrapping it replaces (-ESTALE if another change
 * came first), never by the same bytes (-EALREADY), never by none.
 */
static int
check_rekey(const struct cfg *c, const struct cfg_cmd *cmd, char *msg, size_t len)
{
	static const uint8_t none[CFG_WRAP_LEN];
	const struct cfg_fs *f = cfg_fs_find(c, cmd->name);

	if (f == NULL)
		return cfg_fail(msg, len, -ENOENT, "no filesystem '%s'", cmd->name);
	if (!f->sealed)
		return cfg_fail(msg, len, -EINVAL, "filesystem %s is not encrypted", cmd->name);
	if (!cfg_fs_own(f))
		return cfg_fail(msg, len, -EINVAL,
				"filesystem %s is a clone: it opens with its origin's file system "
				"key (rekey the origin)",
				cmd->name);
	if (memcmp(cmd->wrapped, none, CFG_WRAP_LEN) == 0)
		return cfg_fail(msg, len, -EINVAL, "a new wrapped key is needed");
	if (memcmp(f->wrapped, cmd->key, CFG_KEY_LEN) != 0)
		return cfg_fail(
		    msg, len, -ESTALE,
		    "the key of filesystem %s was wrapped anew meanwhile: read it again",
		    cmd->name);
	if (memcmp(f->wrapped, cmd->wrapped, CFG_WRAP_LEN) == 0)
		return cfg_fail(msg, len, -EALREADY, "filesystem %s has that wrapped key already",
				cmd->name);
	return 0;
}

int
cfg_check_key(const struct cfg *c, const struct cfg_cmd *cmd, char *msg, size_t len)
{
	static const uint8_t zero[CFG_KEY_LEN];
	const struct cfg_key *k;

	if (cmd->op == CFG_OP_FS_REKEY)
		return check_rekey(c, cmd, msg, len);
	if (cmd->op == CFG_OP_KEY_REVOKE) {
		k = cmd->id > UINT32_MAX ? NULL : cfg_key_find(c, (uint32_t)cmd->id);
		if (k == NULL)
			return cfg_fail(msg, len, -ENOENT, "no access key %llu",
					(unsigned long long)cmd->id);
		if (k->revoked)
			return cfg_fail(msg, len, -EALREADY, "access key %u is revoked already",
					k->id);
		return 0;
	}
	if (cfg_fs_find(c, cmd->name) == NULL)
		return cfg_fail(msg, len, -ENOENT, "no filesystem '%s'", cmd->name);
	if (cmd->id < CFG_KEY_FIRST || cmd->id > UINT32_MAX)
		return cfg_fail(msg, len, -EINVAL, "an access key's id is %u to %u", CFG_KEY_FIRST,
				UINT32_MAX);
	if (cmd->state != CFG_KEY_READ && cmd->state != CFG_KEY_WRITE)
		return cfg_fail(msg, len, -EINVAL, "an access key is read-only or read-write");
	if (memcmp(cmd->key, zero, CFG_KEY_LEN) == 0)
		return cfg_fail(msg, len, -EINVAL, "an access key needs its bytes");
	if (cfg_key_find(c, (uint32_t)cmd->id) != NULL)
		return cfg_fail(msg, len, -EEXIST, "access key %llu exists",
				(unsigned long long)cmd->id);
	if (c->nkeys == CFG_KEYS_MAX && oldest_revoked(c) < 0)
		return cfg_fail(msg, len, -ENOSPC,
				"%u access keys, none revoked: revoke one before making another",
				CFG_KEYS_MAX);
	return 0;
}

void
cfg_apply_key(struct cfg *c, const struct cfg_cmd *cmd)
{
	const struct cfg_fs *f;
	struct cfg_key *k;

	if (cmd->op == CFG_OP_FS_REKEY) {
		struct cfg_fs *rf = (struct cfg_fs *)cfg_fs_find(c, cmd->name);

		memcpy(rf->wrapped, cmd->wrapped, CFG_WRAP_LEN);
		cfg_event(c, cmd->time, 0,
			  "filesystem %s: its master key wrapped under a new file system key",
			  rf->name);
		return;
	}
	if (cmd->op == CFG_OP_KEY_REVOKE) {
		k = (struct cfg_key *)cfg_key_find(c, (uint32_t)cmd->id);
		k->revoked = true;
		k->revoked_at = cmd->time;
		f = cfg_fs_by_id(c, k->fs);
		cfg_event(c, cmd->time, 0, "access key %u (%s) of filesystem %s revoked", k->id,
			  cfg_key_access_name(k->access), f ? f->name : "?");
		return;
	}
	if (c->nkeys == CFG_KEYS_MAX)
		drop(c, (uint32_t)oldest_revoked(c));
	f = cfg_fs_find(c, cmd->name);
	k = &c->keys[c->nkeys++];
	memset(k, 0, sizeof(*k));
	k->id = (uint32_t)cmd->id;
	k->fs = f->id;
	k->access = cmd->state;
	k->created = cmd->time;
	memcpy(k->secret, cmd->key, CFG_KEY_LEN);
	cfg_event(c, cmd->time, 0, "access key %u (%s) of filesystem %s created", k->id,
		  cfg_key_access_name(k->access), f->name);
}

unsigned
cfg_keys_drop(struct cfg *c, uint32_t fs)
{
	unsigned n = 0;

	for (uint32_t i = c->nkeys; i > 0; i--)
		if (c->keys[i - 1].fs == fs) {
			drop(c, i - 1);
			n++;
		}
	return n;
}
