/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The simulator's metadata world (tests/sim/meta): six backends (net +
 * msvc, a drive target each when asked) serving one filesystem's buckets
 * in Raft groups of five, and a client (net + mroute) on a lossy,
 * reordering network; synchronous calls for the tests (world.c); real
 * libshoal clients for file data (world_client); and the checkers' reads
 * of fragments straight from the targets (frags.c).
 */
#ifndef SH_TESTS_SIM_META_WORLD_H
#define SH_TESTS_SIM_META_WORLD_H

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../../src/data/ec.h"
#include "../../../src/env/env_sim.h"
#include "../../../src/meta/msvc.h"
#include "../../../src/store/service.h"
#include "../../../src/store/store_proto.h"
#include "../../lib/test.h"

#define N	  6 /* the nodes a world starts with */
#define NMAX	  7 /* and the most it can have (world_add_node) */
#define NBUCKETS  16
#define NFILES	  60
#define CLIENT_ID (1ull << 63 | 77)

struct node {
	struct world *w;
	int id;
	struct sim_node *sn;
	struct env *env;
	struct net *net;
	struct net *mnet; /* management: the configuration for clients */
	struct msvc *svc;
	struct store *st; /* a drive target (worlds with stores) */
	struct store_svc *ssvc;
	bool formatted;
	bool up;
	char dir[256];
};

struct world {
	struct sim *sim;
	struct sh_rand rng;
	struct node n[NMAX + 1];
	int nn; /* nodes now: n[1..nn] */
	struct sim_node *csn;
	struct net *cnet;
	struct mroute *rt;
	struct cfg *cfg;
	uint64_t seed;
	uint32_t fs;
	uint64_t log_size; /* of each group's Raft log */
	bool stores;	   /* each node serves a drive target (id = node id) */
	/* fs1 is encrypted (docs/security.md): clients are given kek_file, its key */
	bool sealed;
	char kek_file[96];
	char base[64];
	uint64_t at; /* reads (call) as of this version: a snapshot's (0: the newest) */
	/* calls of a writable clone's (its branch; 0: the filesystem's own) */
	uint16_t branch;
	/* configuration changes the nodes proposed (snapshot states), for world_submits */
	struct cfg_cmd submits[32];
	unsigned nsubmits;
};

/* A call's answer, copied out of the loop. */
struct call {
	bool done;
	int status;
	struct mp_reply r;
	uint8_t data[65536];
};

#define DW_FRAG	    4096
#define DW_D	    4
#define DW_P	    2
#define DW_STRIPE   (DW_D * DW_FRAG)
#define DW_SLOTS    12 /* file ranges of one stripe each, written over and over */
#define DW_WRITES   240
#define DW_VERSIONS 8

struct dreply {
	bool done;
	int status;
	uint8_t data[DW_FRAG];
	size_t len;
};

/* world.c: node i's data address; its start and stop (crash: kill -9, the disk torn) */
void addr(int id, char *buf, size_t len);
void mgmt_addr(int id, char *buf, size_t len);
void node_start(struct node *n);
void node_stop(struct world *w, struct node *n, bool crash);
/*
 * A request to its bucket's leader, waited for (on_call, call_done: its
 * parts); the _start forms return at once, c->done set when it ends.
 */
void on_call(void *arg, int status, const struct mp_reply *r);
bool call_done(void *arg);
void call_start(struct world *w, struct mp_req *q, struct call *c);
int call(struct world *w, struct mp_req *q, struct call *c);
void cmd_start(struct world *w, uint16_t bucket, const struct meta_cmd *mc, struct call *c);
int cmd(struct world *w, uint16_t bucket, const struct meta_cmd *mc, struct call *c);
/* Namespace calls through the leaders: create, remove, rename, look up, list. */
uint16_t dbucket(uint64_t parent, const char *name);
int mk(struct world *w, uint64_t parent, const char *name, uint8_t type, uint64_t *ino);
int rm(struct world *w, uint64_t parent, const char *name, bool dir);
int mv(struct world *w, uint64_t parent, const char *name, uint64_t parent2, const char *name2,
       unsigned flags);
int lookup(struct world *w, uint64_t parent, const char *name, struct meta_dentry *d);
int getattr(struct world *w, uint64_t ino, struct meta_inode *in);
unsigned list(struct world *w, uint64_t dir, uint8_t *seen, unsigned nseen);
/* Node i's groups as it reports them; the node serving bucket's group as leader (0: none). */
unsigned groups_of(struct world *w, int i, struct msvc_group_info gi[64]);
int leader_node(struct world *w, uint16_t bucket);
/* The same, and the leader's term in *term (if a leader serves). */
int leader_term(struct world *w, uint16_t bucket, uint64_t *term);
/*
 * Run for ns at least, and until one leader has served bucket for ns in
 * one term (a new leader knows no file holds for MP_HOLD_MS: it keeps
 * removed files as orphans meanwhile).
 */
void run_steady_leader(struct world *w, uint16_t bucket, uint64_t ns);
/* Six backends (stores: a drive target each) and a client, groups formed; its end. */
void world_start_opts(struct world *w, uint64_t seed, uint64_t log_size, bool stores);
/* The same with fs1 encrypted (world.sealed): its key made from the seed. */
void world_start_sealed(struct world *w, uint64_t seed, uint64_t log_size, bool stores,
			bool sealed);
void world_start(struct world *w, uint64_t seed, uint64_t log_size);
void world_end(struct world *w);
/* One more node, with an empty drive (target id = its id), joins the running world; its id. */
int world_add_node(struct world *w);
/* A configuration change applied, and every node up and the client told. */
void world_apply(struct world *w, const struct cfg_cmd *c);
/*
 * Apply what the nodes proposed since the last call (msvc_params.cfg_submit,
 * as shoald submits it to the configuration group): changes that no longer
 * apply (-EALREADY, -EINVAL, -ENOENT: proposed twice) are dropped. How many
 * were applied.
 */
unsigned world_submits(struct world *w);
/* The configuration marks node up or down (world_apply). */
void set_state(struct world *w, int node, uint8_t state);
/*
 * A real libshoal client (client_env.h) on a simulated machine of its own
 * (10.0.3.i), pointed at a node up that the world's generator picks; its
 * stripes of 4 x frag_kb KiB. Asserts it connects.
 */
struct sh_client;
struct sh_client *world_client(struct world *w, unsigned frag_kb, int i);
/* The one extent of ino at [off, off + DW_STRIPE) (MP_EXTENTS); -ENOENT if not one. */
int extent_at(struct world *w, uint64_t ino, uint64_t off, struct meta_extent *e);

/* frags.c: a stripe's fragments, at tg (fragment i on node tg[i]), all asked at once */
void to_targets(struct world *w, uint16_t op, uint64_t stripe, const uint64_t *tg,
		uint8_t (*frags)[DW_FRAG], struct dreply *r);
/* Where the stripe's record says its fragments are now (MP_STRIPE_LOC). */
int stripe_loc(struct world *w, uint64_t stripe, struct meta_extent *loc);
/* The bytes of a slot's version (DW_STRIPE of them). */
void slot_bytes(uint64_t seed, unsigned slot, unsigned version, uint8_t *b);

#endif /* SH_TESTS_SIM_META_WORLD_H */
