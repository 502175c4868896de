/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The cluster configuration (DESIGN.md §3, §6): what the config Raft
 * group replicates, and the commands that change it.
 *
 * A struct cfg is a plain value: cluster name and uuid; nodes (id,
 * management and data addresses, data interfaces with labels, failure
 * domain, up or down); drives; the bucket table (each bucket's replica
 * group on distinct failure domains, placed by rendezvous hashing so that
 * adding a node moves only the buckets it wins); filesystems and their
 * snapshots; recent events; and the epoch, which grows by one with every
 * change applied.
 *
 * Commands are validated by the same function on the leader before they
 * are proposed (for a quick, clear error) and in apply (so every replica
 * decides alike): a rejected command changes nothing, not even the epoch.
 * Everything in apply depends only on the state and the command — the
 * command carries its own timestamp — so replicas stay identical.
 */
#ifndef SH_CLUSTER_CONFIG_H
#define SH_CLUSTER_CONFIG_H

#include "../base/base.h"

#define CFG_NAME_MAX	    64
#define CFG_ADDR_MAX	    64
#define CFG_LABEL_MAX	    16
#define CFG_PATH_MAX	    256
#define CFG_MSG_MAX	    192
#define CFG_NODES_MAX	    1024
#define CFG_NETS_MAX	    8
#define CFG_DRIVES_MAX	    4096
#define CFG_FS_MAX	    64
#define CFG_SNAPS_MAX	    1024 /* snapshots of all filesystems together */
#define CFG_FS_SNAPS_MAX    256	 /* snapshots one filesystem keeps (not being deleted) */
#define CFG_EVENTS_MAX	    256
#define CFG_KEYS_MAX	    256 /* file system access keys, revoked ones too */
#define CFG_KEY_LEN	    32
#define CFG_WRAP_LEN	    64 /* an encrypted filesystem's wrapped master key (SEAL_WRAPPED_LEN) */
#define CFG_KEY_FIRST	    2  /* access keys' ids: 0 and 1 are the cluster's own (net/auth.h) */
#define CFG_REPLICAS_MAX    5
#define CFG_BUCKETS_DEFAULT 4096
#define CFG_BUCKETS_MAX	    65536
#define CFG_DRIVE_MIN	    (64ull << 20)
/*
 * A snapshot schedule's interval: 1 s to 30 days. Operators want minutes
 * or more; seconds are accepted so that tests can watch a schedule run.
 */
#define CFG_SNAP_EVERY_MAX    (30u * 86400)
#define CFG_SNAP_KEEP_DEFAULT 96 /* what the CLI and the admin API keep unless told */

/*
 * Every configuration change, declared once: X(id, number, "name"). The
 * numbers are written into the configuration group's Raft log: never
 * reuse or renumber one. The names are what events and logs say.
 */
#define CFG_OPS(X)                                                                               \
	X(CFG_OP_CREATE, 1, "cluster.create")                                                    \
	X(CFG_OP_NODE_ADD, 2, "node.add")                                                        \
	X(CFG_OP_NODE_REMOVE, 3, "node.remove")                                                  \
	X(CFG_OP_NODE_STATE, 4, "node.state")                                                    \
	X(CFG_OP_NET_ADD, 5, "net.add")                                                          \
	X(CFG_OP_DRIVE_ADD, 6, "drive.add")                                                      \
	X(CFG_OP_FS_CREATE, 7, "fs.create")                                                      \
	X(CFG_OP_FS_DELETE, 8, "fs.delete")                                                      \
	X(CFG_OP_MGROUP_REPLACE, 9, "mgroup.replace")                                            \
	X(CFG_OP_DRIVE_STATE, 10, "drive.state") /* target: the drive; state: enum               \
						    cfg_drive_state */                           \
	X(CFG_OP_SET, 11, "set") /* name: a setting (cfg_setting_names), size: its value */      \
	X(CFG_OP_DRIVE_REMOVE, 12, "drive.remove") /* target: a drained drive, forgotten */      \
	/* id: the node that says it (0: the cluster), path: the text */                         \
	X(CFG_OP_EVENT, 13, "event")                                                             \
	/* name: the filesystem, snap: the snapshot (enum cfg_snap_state) */                     \
	X(CFG_OP_SNAP_CREATE, 14, "snap.create") /* state: CFG_SNAP_WRITABLE, or 0 */            \
	X(CFG_OP_SNAP_STATE, 15, "snap.state")	 /* state: CFG_SNAP_READY */                     \
	X(CFG_OP_SNAP_DELETE, 16, "snap.delete")                                                 \
	X(CFG_OP_SNAP_FORGET, 17, "snap.forget")                                                 \
	/* name: the filesystem, size: every (s, 0: off), quota: how many are kept */            \
	X(CFG_OP_SNAP_SCHEDULE, 18, "snap.schedule")                                             \
	X(CFG_OP_NET_REMOVE, 19, "net.remove") /* id: the node; addr: the interface */           \
	/* name: the filesystem; id: the key's id; state: enum cfg_key_access; key: its bytes */ \
	X(CFG_OP_KEY_CREATE, 20, "key.create")                                                   \
	X(CFG_OP_KEY_REVOKE, 21, "key.revoke") /* id: the key */                                 \
	/* name: an encrypted filesystem; wrapped: its master key wrapped anew; key: the first   \
	 * CFG_KEY_LEN bytes of the wrapped key it replaces (docs/security.md "Rotation") */     \
	X(CFG_OP_FS_REKEY, 22, "fs.rekey")                                                       \
	/* name: a filesystem, snap: a ready snapshot of it to go back to (docs/snapshots.md) */ \
	X(CFG_OP_FS_RESTORE, 23, "fs.restore")                                                   \
	/* name: a filesystem being restored, size: the restore's epoch, state: the phase it     \
	 * goes to (enum cfg_restore_phase: reverting, or none when done) */                     \
	X(CFG_OP_FS_RESTORE_STEP, 24, "fs.restore_step")                                         \
	/* name: a filesystem, snap: a ready snapshot of it, path: the writable clone's name */  \
	X(CFG_OP_FS_CLONE, 25, "fs.clone")                                                       \
	/* name: a clone, state: ready (every group serves its branch), or none (every group     \
	 * dropped it: the clone is forgotten) */                                                \
	X(CFG_OP_FS_CLONE_STATE, 26, "fs.clone_state")

enum cfg_op {
#define CFG_OP_ENUM(id, num, name) id = (num),
	CFG_OPS(CFG_OP_ENUM)
#undef CFG_OP_ENUM
	    CFG_OP_MAX /* (the numbers are dense: one past the last) */
};

/*
 * A node's state: up; down (silent on the management network); or its
 * data network down (it answers on the management network, but none of
 * its data interfaces has a link): its drives and metadata replicas are as
 * unreachable as a down node's, and it is reported as such, not as dead.
 */
enum cfg_state { CFG_UP = 1, CFG_DOWN = 2, CFG_DATA_DOWN = 3 };
/*
 * A drive: in service; failed (errors, or `shoal drive fail`): its
 * fragments are rebuilt; draining (`shoal drive remove`): its fragments are
 * copied off it, then it is removed (CFG_OP_DRIVE_REMOVE).
 */
enum cfg_drive_state { CFG_DRIVE_ACTIVE = 0, CFG_DRIVE_FAILED = 1, CFG_DRIVE_DRAINING = 2 };
/*
 * What a target is to the data path (docs/healing.md): up; down (its node
 * is marked down, for less than the rebuild delay: its fragments are read
 * around, and serve again when it comes back); lost (its drive failed, or
 * its node has been down for the rebuild delay, or it is no longer in the
 * configuration): its fragments are rebuilt elsewhere; draining: up, its
 * fragments copied elsewhere.
 */
enum cfg_target_state { CFG_TGT_UP = 0, CFG_TGT_DOWN = 1, CFG_TGT_LOST = 2, CFG_TGT_DRAINING = 3 };
#define CFG_REBUILD_DELAY_S   60
#define CFG_REBUILD_SHARE     30 /* percent of a target's bandwidth rebuild may take under load */
#define CFG_REBUILD_DELAY_MAX (7u * 86400)
#define CFG_SCRUB_RATE	      16  /* MiB/s each target's scrub reads (0: no scrub) */
#define CFG_SCRUB_INTERVAL    168 /* hours from a target's scrub to its next (0: at once) */
/* cfg_fs.compression: the algorithm in the low 2 bits, a level above them (0: its default) */
enum cfg_compression { CFG_COMP_NONE = 0, CFG_COMP_LZ4, CFG_COMP_ZSTD };
#define CFG_COMP_LEVEL_SHIFT 2
#define CFG_COMP_LEVEL_MAX   19
#define CFG_COMP_ALGO(c)     ((unsigned)(c)&3u)
#define CFG_COMP_LEVEL(c)    ((unsigned)(c) >> CFG_COMP_LEVEL_SHIFT)

/*
 * A snapshot of a filesystem (docs/metadata.md): the filesystem as of its
 * version, kept by every metadata group of the filesystem.
 *
 *   snap.create --> CREATING --snap.state--> READY
 *                      |                       |
 *                      +----snap.delete--------+--> DELETING --snap.forget--> (gone)
 *
 * snap.create takes the filesystem's version for the snapshot and moves
 * the filesystem to the next one; the metadata layer proposes snap.state
 * once every metadata group writes at the next version (only then does the
 * snapshot read the same everywhere), and snap.forget once the space only
 * the snapshot kept is freed. Deleting the filesystem forgets its
 * snapshots at once.
 */
enum cfg_snap_state { CFG_SNAP_CREATING = 0, CFG_SNAP_READY = 1, CFG_SNAP_DELETING = 2 };
/*
 * snap.create of a writable snapshot (docs/snapshots.md "Writable
 * snapshots"): with it comes a clone of the snapshot named FS@NAME (no
 * other filesystem name has an @), which FS@NAME opens, read-write.
 * snap.delete deletes that clone first; the snapshot is deleted when the
 * clone is gone.
 */
#define CFG_SNAP_WRITABLE 1

struct cfg_net {
	char addr[CFG_ADDR_MAX];
	char label[CFG_LABEL_MAX];
};

struct cfg_node {
	uint64_t id;
	char mgmt[CFG_ADDR_MAX];
	char data[CFG_ADDR_MAX];
	char domain[CFG_NAME_MAX];
	uint8_t state;
	uint8_t nnets;
	struct cfg_net nets[CFG_NETS_MAX];
	uint64_t since; /* when its state last changed (ns since the epoch) */
};

struct cfg_drive {
	uint64_t id; /* also the store target id */
	uint64_t node;
	uint32_t worker; /* the node's I/O worker serving it: data endpoint node << 8 | worker */
	char path[CFG_PATH_MAX];
	uint64_t capacity;
	uint8_t state;	/* enum cfg_drive_state */
	uint64_t since; /* when its state last changed */
};

struct cfg_fs {
	char name[CFG_NAME_MAX];
	uint32_t id; /* from 1, never reused: names its metadata (bucket groups, stores) */
	uint8_t d, p;
	uint8_t compression;
	uint8_t dedup;
	uint64_t quota; /* bytes; 0: none */
	uint64_t created;
	uint64_t version; /* the version metadata writes carry now: from 1, +1 per snapshot */
	/*
	 * Its snapshot schedule (snap.schedule, docs/snapshots.md "Schedules"):
	 * the configuration's leader takes one every snap_every_s (0: no
	 * schedule) and keeps the last snap_keep (1..CFG_FS_SNAPS_MAX; 0 when
	 * there is no schedule).
	 */
	uint32_t snap_every_s;
	uint32_t snap_keep;
	/*
	 * Encrypted (docs/security.md, "Encrypted file systems"): its blocks
	 * are sealed by clients, and its master key is kept here only wrapped
	 * by a key the nodes never see (seal.h).
	 */
	bool sealed;
	uint8_t wrapped[CFG_WRAP_LEN];
	/*
	 * Restores (fs.restore, docs/snapshots.md "Restore"): restore_epoch
	 * counts them; while restore_phase is not CFG_RESTORE_NONE the file
	 * system is paused (its commands refused with -EAGAIN) and goes back
	 * to version restore_ver, a ready snapshot's. Handles opened before
	 * an epoch answer -ESTALE after it.
	 */
	uint32_t restore_epoch;
	uint8_t restore_phase;
	uint64_t restore_ver;
	/*
	 * A writable clone (fs.clone, docs/snapshots.md "Clones"): origin is
	 * the id of the filesystem whose metadata it lives in (0: it is no
	 * clone), as branch `branch` of that version space, on the snapshot
	 * at version base (kept while the clone is); clone_state says how far
	 * it is (enum cfg_clone_state). An origin's `branches` is the last
	 * branch it gave (a branch number is never used twice).
	 */
	uint32_t origin;
	uint16_t branch, branches;
	uint64_t base;
	uint8_t clone_state;
};

/*
 * A clone's life: creating (the origin's metadata groups are told of its
 * branch), ready (it serves), deleting (the groups drop its records; then
 * it is forgotten).
 */
enum cfg_clone_state {
	CFG_CLONE_NONE = 0,
	CFG_CLONE_CREATING = 1,
	CFG_CLONE_READY = 2,
	CFG_CLONE_DELETING = 3,
};
#define CFG_CLONES_MAX 16 /* clones of one filesystem at once (META_BRANCH_MAX) */

/* f has metadata groups, stores and stripes of its own (a clone lives in its origin's). */
static inline bool
cfg_fs_own(const struct cfg_fs *f)
{
	return f->origin == 0;
}

/*
 * A restore's phases: pausing (the metadata groups refuse the file
 * system's commands, ship what their buckets owe others, and wait until
 * no client can still cache what they said), then reverting (each group
 * puts its buckets back as the snapshot has them).
 */
enum cfg_restore_phase { CFG_RESTORE_NONE = 0, CFG_RESTORE_PAUSING = 1, CFG_RESTORE_REVERTING = 2 };

struct cfg_snap {
	char name[CFG_NAME_MAX]; /* unique within its filesystem */
	uint32_t fs;		 /* the filesystem's id */
	uint64_t version;	 /* the filesystem as of this version */
	uint8_t state;		 /* enum cfg_snap_state */
	uint64_t created;	 /* ns since the Unix epoch */
};

/*
 * A file system access key (docs/security.md, "Clients' keys"): a client
 * that proves it holds the bytes opens that file system, and writes it if
 * the key is read-write. A revoked key is kept (its clients are told
 * EACCES) until the table needs its room; a filesystem's go with it.
 */
enum cfg_key_access { CFG_KEY_READ = 1, CFG_KEY_WRITE = 2 }; /* as enum net_access */
struct cfg_key {
	uint32_t id; /* CFG_KEY_FIRST and up, chosen at random by who makes it */
	uint32_t fs; /* the filesystem's id */
	uint8_t access;
	bool revoked;
	uint64_t created, revoked_at; /* ns since the Unix epoch */
	uint8_t secret[CFG_KEY_LEN];  /* zeros in the copy clients get (cfg_encode_public) */
};

struct cfg_event {
	uint64_t seq, time, node;
	char text[CFG_MSG_MAX];
};

struct cfg {
	uint64_t epoch;
	bool created;
	char name[CFG_NAME_MAX];
	uint8_t uuid[16];
	uint32_t nbuckets;
	uint32_t replicas; /* per bucket group */
	uint32_t nnodes, ndrives, nfs, nevents, nsnaps, nkeys;
	uint64_t next_drive, next_event;
	uint32_t next_fs;	  /* the id the next filesystem gets */
	uint32_t rebuild_delay_s; /* a node down this long has its targets rebuilt */
	uint8_t rebuild_share;	  /* percent, 1-100 */
	uint32_t scrub_rate;	  /* MiB/s per target, 0: off */
	uint32_t scrub_interval;  /* hours */
	struct cfg_node nodes[CFG_NODES_MAX];
	struct cfg_drive drives[CFG_DRIVES_MAX];
	struct cfg_fs fs[CFG_FS_MAX];
	struct cfg_event events[CFG_EVENTS_MAX]; /* a ring: the newest nevents */
	struct cfg_snap snaps[CFG_SNAPS_MAX];	 /* in the order they were created */
	struct cfg_key keys[CFG_KEYS_MAX];	 /* in the order they were created */
	uint64_t *buckets;			 /* nbuckets x replicas node ids */
	/*
	 * The metadata groups, fixed when the first filesystem is created
	 * (NULL before: derived from the replica sets, cfg_groups): each
	 * bucket's group, and how often each group had a member replaced.
	 */
	uint32_t ngroups;
	uint16_t *bgroup; /* nbuckets */
	uint32_t *gepoch; /* ngroups */
};

/* One command; which fields matter depends on op. */
struct cfg_cmd {
	uint8_t op;
	uint8_t state;
	uint8_t d, p, compression, dedup;
	uint32_t nbuckets;
	uint64_t time; /* set by the proposer: ns since the Unix epoch */
	uint64_t id;   /* node */
	uint64_t size, quota;
	uint64_t target; /* drive add: its target id (0: the next free one) */
	uint32_t worker; /* drive add: the worker that serves it (set by the node's prepare) */
	uint8_t uuid[16];
	char name[CFG_NAME_MAX]; /* cluster or filesystem */
	char addr[CFG_ADDR_MAX]; /* management address, or a data interface */
	char data[CFG_ADDR_MAX];
	char domain[CFG_NAME_MAX];
	char label[CFG_LABEL_MAX];
	char path[CFG_PATH_MAX];
	uint32_t group;		 /* mgroup replace: the metadata group; id: the member that goes */
	uint64_t node2;		 /* mgroup replace: the node that takes its place */
	char snap[CFG_NAME_MAX]; /* snap.*: the snapshot (name: its filesystem) */
	/*
	 * Who asked (the audit trail, docs/security.md): "admin API from
	 * IP:PORT" for a request to the admin API; "" for the cluster's own
	 * changes. Said in the events the change records.
	 */
	char by[CFG_ADDR_MAX + 16];
	uint8_t key[CFG_KEY_LEN]; /* key.create: the key's bytes */
	bool sealed;		  /* fs.create: encrypted, with this wrapped master key */
	uint8_t wrapped[CFG_WRAP_LEN];
};

struct cfg *cfg_new(void);
void cfg_free(struct cfg *c);
/* Replace dst's contents by a copy of src's. -ENOMEM. */
int cfg_copy(struct cfg *dst, const struct cfg *src);

/*
 * Would cmd apply? 0, or a negative errno with a one-line reason in msg:
 * -EEXIST, -ENOENT, -EINVAL, -ENOSPC, -EALREADY (no change), -ENOTCONN
 * (no cluster yet).
 */
int cfg_check(const struct cfg *c, const struct cfg_cmd *cmd, char *msg, size_t len);
/* Check and apply; on success the epoch grows and an event is recorded. */
int cfg_apply(struct cfg *c, const struct cfg_cmd *cmd, char *msg, size_t len);

void cfg_cmd_encode(struct sh_enc *e, const struct cfg_cmd *cmd);
int cfg_cmd_decode(const uint8_t *b, size_t len, struct cfg_cmd *cmd); /* fuzzed */
void cfg_encode(struct sh_enc *e, const struct cfg *c);
/* As cfg_encode, without the access keys' bytes: for clients. */
void cfg_encode_public(struct sh_enc *e, const struct cfg *c);
int cfg_decode(const uint8_t *b, size_t len, struct cfg *c); /* fuzzed; c from cfg_new */

const struct cfg_node *cfg_node_find(const struct cfg *c, uint64_t id);
/* Whether a node cannot be reached for data or metadata (down, or its data network down). */
static inline bool
cfg_node_down(const struct cfg_node *n)
{
	return n->state != CFG_UP;
}
/*
 * A node's data interfaces as net_ifaces_parse reads them, for its worker
 * (each port + worker): its data address first (labelled by a data
 * interface of the same address, if one was added), then the interfaces
 * added with net.add. Returns the length, or -ENOSPC (out: CFG_ADDRS_MAX
 * is enough), -EINVAL (an address that does not parse).
 */
#define CFG_ADDRS_MAX (CFG_ADDR_MAX + CFG_NETS_MAX * (CFG_ADDR_MAX + CFG_LABEL_MAX + 2))
int cfg_node_data(const struct cfg_node *n, unsigned worker, char *out, size_t len);
const struct cfg_fs *cfg_fs_find(const struct cfg *c, const char *name);
const struct cfg_fs *cfg_fs_by_id(const struct cfg *c, uint32_t id);
/* Access key id, or NULL. */
const struct cfg_key *cfg_key_find(const struct cfg *c, uint32_t id);
/* "read-only", "read-write". */
const char *cfg_key_access_name(unsigned access);
/* Snapshot name of filesystem fs (its id), or NULL. */
const struct cfg_snap *cfg_snap_find(const struct cfg *c, uint32_t fs, const char *name);
/*
 * The clones of filesystem origin (its id) on the snapshot at version
 * base (0: on any), their names comma-separated into names (NULL: not
 * wanted): how many.
 */
unsigned cfg_clones_of(const struct cfg *c, uint32_t origin, uint64_t base, char *names,
		       size_t len);
/* The filesystems with metadata of their own (not clones). */
uint32_t cfg_nfs_own(const struct cfg *c);
/* The clone that is branch `branch` of filesystem origin (its id), or NULL. */
const struct cfg_fs *cfg_clone_find(const struct cfg *c, uint32_t origin, uint16_t branch);
/* The clone that makes snapshot s of origin writable (named ORIGIN@NAME), or NULL. */
const struct cfg_fs *cfg_writable_of(const struct cfg *c, const struct cfg_fs *origin,
				     const struct cfg_snap *s);
/* The snapshot clone f stands on, or NULL (no clone). */
const struct cfg_snap *cfg_clone_snap(const struct cfg *c, const struct cfg_fs *f);
/* The snapshot clone f makes writable, or NULL (an ordinary clone, or no clone). */
const struct cfg_snap *cfg_writable_snap(const struct cfg *c, const struct cfg_fs *f);
/*
 * The versions filesystem fs (its id) keeps for its snapshots: those
 * being created and those ready (one being deleted is kept no more: its
 * groups settle without it, then it is forgotten; docs/snapshots.md),
 * ascending and each once: at most max into v. Returns how many there
 * are, which may be more than max (the caller checks).
 */
unsigned cfg_fs_keep(const struct cfg *c, uint32_t fs, uint64_t *v, unsigned max);
/* "creating", "ready", "deleting" ("?" if none of them). */
const char *cfg_snap_state_name(unsigned state);
/* A duration in seconds as people write it, in its largest whole unit: "15m", "2h", "90s". */
const char *cfg_duration_str(uint64_t s, char *buf, size_t len);
/* "90s", "15m", "2h", "1d" or plain seconds ("90") -> seconds; -EINVAL if malformed. */
int64_t cfg_duration_parse(const char *s);
/* The replica group of bucket b: replicas node ids. */
static inline const uint64_t *
cfg_bucket(const struct cfg *c, uint32_t b)
{
	return c->buckets + (size_t)b * c->replicas;
}
/*
 * The metadata group of every bucket (group_of, nbuckets entries) and how
 * many there are: the fixed table once a filesystem exists, else buckets
 * grouped by their sorted replica sets, groups in the order of those sets.
 * -ENOENT (no placement yet), -E2BIG (more than 65536 groups).
 */
int cfg_groups(const struct cfg *c, uint16_t *group_of, uint32_t *ngroups);
/* The lowest bucket of each group (*first: ngroups entries, sh_free it); cfg_groups' errors. */
int cfg_group_firsts(const struct cfg *c, uint32_t **first, uint32_t *ngroups);
/*
 * The replacement the configuration's leader proposes next: the first
 * group with a member marked down for longer than after_ns at now (ns
 * since the Unix epoch), and the node to take its place (up, not in the
 * group, on a failure domain the rest of the group does not use if there
 * is one, chosen by rendezvous hashing). 0 and the three; -ENOENT (no
 * member down for that long), -ENOSPC (one is, but no node outside its
 * group is up to take its place).
 */
int cfg_mgroup_replacement(const struct cfg *c, uint64_t now, uint64_t after_ns, uint32_t *group,
			   uint64_t *old, uint64_t *node);
/*
 * A node leaving the cluster: it has drives and every one of them drains
 * (`shoal node remove`). Its metadata replicas are replaced at once, as a
 * node down for long would have them replaced, and it takes no new ones.
 */
bool cfg_node_leaving(const struct cfg *c, uint64_t node);
/*
 * A target's state at now (ns since the Unix epoch) for the data path,
 * enum cfg_target_state: a drive not in the configuration is lost.
 */
int cfg_target_state(const struct cfg *c, uint64_t target, uint64_t now);
const struct cfg_drive *cfg_drive_find(const struct cfg *c, uint64_t target);
/* The settings CFG_OP_SET takes ("rebuild-delay", ...), NULL-terminated. */
extern const char *const cfg_setting_names[];
/* A setting's value; -ENOENT if there is no such setting. */
int64_t cfg_setting_get(const struct cfg *c, const char *name);
/* Failure domains that have at least one drive. */
unsigned cfg_domains_with_drives(const struct cfg *c);
const char *cfg_op_name(unsigned op);
/* The algorithm's name; cfg_comp_str with the level ("zstd:9"). */
const char *cfg_comp_name(unsigned comp);
const char *cfg_comp_str(unsigned comp, char *buf, size_t len);
/* "none", "lz4", "zstd", "zstd:1".."zstd:19" -> a cfg_fs.compression; -EINVAL if unknown. */
int cfg_comp_parse(const char *s);
/* "4+2" -> d, p. -EINVAL if malformed. */
int cfg_protection_parse(const char *s, uint8_t *d, uint8_t *p);
/* A name for clusters, filesystems and snapshots: 1-63 of [A-Za-z0-9._-]. */
bool cfg_name_ok(const char *s);
/* The i-th newest event (0: newest), or NULL. */
const struct cfg_event *cfg_event_at(const struct cfg *c, uint32_t i);

#endif /* SH_CLUSTER_CONFIG_H */
