/* SPDX-License-Identifier: Apache-2.0 */
/* Shared by the configuration's files (config*.c); not for other modules. */
#ifndef SH_CLUSTER_CONFIG_INT_H
#define SH_CLUSTER_CONFIG_INT_H

#include "config.h"

/* The one-line reason into msg; returns err. */
int cfg_fail(char *msg, size_t len, int err, const char *fmt, ...) SH_PRINTF(4, 5);
/* Record an event (the ring of the newest CFG_EVENTS_MAX). */
void cfg_event(struct cfg *c, uint64_t time, uint64_t node, const char *fmt, ...) SH_PRINTF(4, 5);

/* A new filesystem (the next id), its settings these, the rest zero (c has room). */
struct cfg_fs *cfg_fs_add(struct cfg *c, const char *name, uint8_t d, uint8_t p,
			  uint8_t compression, uint8_t dedup, uint64_t time);

/* id is one of the n in set. */
bool cfg_in_set(const uint64_t *set, unsigned n, uint64_t id);

/* config_heal.c: drive states and the heal settings */
void cfg_heal_defaults(struct cfg *c);
int cfg_check_heal(const struct cfg *c, const struct cfg_cmd *cmd, char *msg, size_t len);
void cfg_apply_heal(struct cfg *c, const struct cfg_cmd *cmd);

/*
 * config_snap.c: snapshots (snap.create, snap.state, snap.delete, snap.forget) and
 * schedules (snap.schedule)
 */
int cfg_check_snap(const struct cfg *c, const struct cfg_cmd *cmd, char *msg, size_t len);
void cfg_apply_snap(struct cfg *c, const struct cfg_cmd *cmd);
/* Forget every snapshot of filesystem fs (its id; the filesystem is deleted): how many. */
unsigned cfg_snaps_drop(struct cfg *c, uint32_t fs);

/*
 * config_clone.c: writable clones (fs.clone, fs.clone_state); the rules of
 * other operations that keep what a clone stands on (checked before them:
 * deleting a clone's origin or snapshot, snapshots and restores of a
 * clone); a clone deleted starts its drop instead of going at once.
 */
int cfg_check_clone(const struct cfg *c, const struct cfg_cmd *cmd, char *msg, size_t len);
void cfg_apply_clone(struct cfg *c, const struct cfg_cmd *cmd);
int cfg_check_clone_rules(const struct cfg *c, const struct cfg_cmd *cmd, char *msg, size_t len);
void cfg_apply_clone_delete(struct cfg *c, struct cfg_fs *f, uint64_t time);
/* Snapshot s of f made writable: its clone, being created (config.h CFG_SNAP_WRITABLE). */
void cfg_apply_writable(struct cfg *c, struct cfg_fs *f, const struct cfg_snap *s, uint64_t time);

/* config_key.c: the access keys' changes; a filesystem deleted drops its keys. */
int cfg_check_key(const struct cfg *c, const struct cfg_cmd *cmd, char *msg, size_t len);
void cfg_apply_key(struct cfg *c, const struct cfg_cmd *cmd);
unsigned cfg_keys_drop(struct cfg *c, uint32_t fs);

#endif /* SH_CLUSTER_CONFIG_INT_H */
