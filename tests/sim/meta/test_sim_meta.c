// SPDX-License-Identifier: Apache-2.0
/*
 * The metadata service in the simulator: six backends (net + msvc) serve
 * one filesystem's buckets in Raft groups of five; a client (net + mroute)
 * creates directories and files across buckets (leases between buckets),
 * stats them, lists directories by fanning out, removes them (rmdir with
 * leases out), while group leaders are killed and restarted and packets
 * are lost, duplicated and reordered. Checked, over seeds:
 *  - every create that succeeded is found afterwards, with its attributes;
 *  - a directory's size and nlink converge to what it holds (deltas);
 *  - readdir returns each entry exactly once;
 *  - rmdir says ENOTEMPTY while entries exist in any bucket, and works
 *    once they are gone.
 */
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

#define N	  6
#define NBUCKETS  16
#define NFILES	  60
#define CLIENT_ID (1ull << 63 | 77)

struct node {
	struct world *w;
	int id;
	struct sim_node *sn;
	struct env *env;
	struct net *net;
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
	struct node n[N + 1];
	struct sim_node *csn;
	struct net *cnet;
	struct mroute *rt;
	struct cfg *cfg;
	uint64_t seed;
	uint32_t fs;
	uint64_t log_size; /* of each group's Raft log */
	bool stores;	   /* each node serves a drive target (id = node id) */
	char base[64];
};

static void
addr(int id, char *buf, size_t len)
{
	snprintf(buf, len, "10.0.1.%d:7100", id);
}

static void
build_cfg(struct world *w)
{
	char msg[CFG_MSG_MAX];
	struct cfg_cmd c = { .op = CFG_OP_CREATE, .nbuckets = NBUCKETS, .id = 1 };

	w->cfg = cfg_new();
	snprintf(c.name, sizeof(c.name), "sim");
	snprintf(c.addr, sizeof(c.addr), "10.0.0.1:7000");
	addr(1, c.data, sizeof(c.data));
	SH_ASSERT_OK(cfg_apply(w->cfg, &c, msg, sizeof(msg)));
	for (int i = 2; i <= N; i++) {
		struct cfg_cmd a = { .op = CFG_OP_NODE_ADD, .id = (uint64_t)i };

		snprintf(a.addr, sizeof(a.addr), "10.0.0.%d:7000", i);
		addr(i, a.data, sizeof(a.data));
		SH_ASSERT_OK(cfg_apply(w->cfg, &a, msg, sizeof(msg)));
	}
	for (int i = 1; i <= N; i++) {
		struct cfg_cmd d = { .op = CFG_OP_DRIVE_ADD,
				     .id = (uint64_t)i,
				     .size = 1ull << 30 };

		snprintf(d.path, sizeof(d.path), "/dev/nvme0n1");
		SH_ASSERT_OK(cfg_apply(w->cfg, &d, msg, sizeof(msg)));
	}
	{
		struct cfg_cmd f = { .op = CFG_OP_FS_CREATE, .d = 4, .p = 2 };

		snprintf(f.name, sizeof(f.name), "fs1");
		SH_ASSERT_MSG(cfg_apply(w->cfg, &f, msg, sizeof(msg)) == 0, "%s", msg);
	}
	w->fs = w->cfg->fs[0].id;
	SH_ASSERT_EQ(w->cfg->replicas, 5u);
}

static void
on_store_done(void *arg, int rc)
{
	*(int *)arg = rc == 0 ? 1 : rc;
}

static bool
flag_set(void *arg)
{
	return *(int *)arg != 0;
}

/* This node's own target, for its msvc (a call to oneself is not sent). */
static struct store *
store_here(void *arg, uint64_t target)
{
	struct node *n = arg;

	return target == (uint64_t)n->id ? n->st : NULL;
}

/* Format (once) and open the node's drive, and serve it on its endpoint. */
static void
store_start(struct node *n)
{
	int flag = 0;

	if (!n->formatted) {
		struct store_format_opts fo = { .target_id = (uint64_t)n->id,
						.seg_size = 256u << 10 };

		SH_ASSERT_OK(store_format(n->env, "drive", 32u << 20, &fo, on_store_done, &flag));
		SH_ASSERT(sim_run_until(n->w->sim, flag_set, &flag, 5 * SH_NSEC_PER_SEC));
		SH_ASSERT_EQ(flag, 1);
		n->formatted = true;
		flag = 0;
	}
	SH_ASSERT_OK(store_open(n->env, "drive", NULL, &n->st, on_store_done, &flag));
	SH_ASSERT(sim_run_until(n->w->sim, flag_set, &flag, 5 * SH_NSEC_PER_SEC));
	SH_ASSERT_EQ(flag, 1);
	SH_ASSERT_OK(store_svc_create(n->net, &n->ssvc));
	SH_ASSERT_OK(store_svc_add(n->ssvc, n->st));
}

static void
node_start(struct node *n)
{
	struct net_iface ifc = { 0 };
	struct net_config nc = { .node_id = mplace_endpoint((uint64_t)n->id),
				 .ifaces = &ifc,
				 .nifaces = 1,
				 .dead_ns = 3 * SH_NSEC_PER_SEC };
	struct msvc_params p = { .dir = n->dir,
				 .log_size = n->w->log_size,
				 .store_nosync = true,
				 .store_local = store_here,
				 .arg = n };
	char a[64];

	addr(n->id, a, sizeof(a));
	SH_ASSERT_OK(env_addr_parse(a, &ifc.addr));
	SH_ASSERT_OK(net_create(n->env, &nc, &n->net));
	SH_ASSERT_OK(msvc_create(n->net, &p, &n->svc));
	SH_ASSERT_OK(msvc_set_cfg(n->svc, n->w->cfg));
	if (n->w->stores)
		store_start(n);
	n->up = true;
}

static void
on_stopped(void *arg)
{
	((struct node *)arg)->up = false;
}

static bool
stopped(void *arg)
{
	return !((struct node *)arg)->up;
}

static void
node_stop(struct world *w, struct node *n, bool crash)
{
	if (crash) {
		msvc_crash(n->svc);
		sim_node_crash(n->sn, SIM_CRASH_TEAR);
		sim_node_restart(n->sn);
	}
	msvc_stop(n->svc, on_stopped, n);
	SH_ASSERT(sim_run_until(w->sim, stopped, n, 30 * SH_NSEC_PER_SEC));
	if (n->ssvc != NULL) {
		store_svc_destroy(n->ssvc);
		n->ssvc = NULL;
	}
	if (n->st != NULL) {
		store_close(n->st);
		n->st = NULL;
	}
	net_destroy(n->net);
}

/* ---- a synchronous client over mroute ---- */

struct call {
	bool done;
	int status;
	struct mp_reply r;
	uint8_t data[65536];
};

static void
on_call(void *arg, int status, const struct mp_reply *r)
{
	struct call *c = arg;

	c->done = true;
	c->status = status;
	if (r != NULL) {
		c->r = *r;
		SH_ASSERT_LE(r->dlen, sizeof(c->data));
		memcpy(c->data, r->data, r->dlen);
		c->r.data = c->data;
	}
}

static bool
call_done(void *arg)
{
	return ((struct call *)arg)->done;
}

static int
call(struct world *w, struct mp_req *q, struct call *c)
{
	memset(c, 0, sizeof(*c));
	q->fs = w->fs;
	SH_ASSERT_OK(mroute_call(w->rt, q, 20 * SH_NSEC_PER_SEC, on_call, c));
	SH_ASSERT_MSG(sim_run_until(w->sim, call_done, c, 60 * SH_NSEC_PER_SEC),
		      "seed %llu: a call never ended", (unsigned long long)w->seed);
	return c->status;
}

static int
cmd(struct world *w, uint16_t bucket, const struct meta_cmd *mc, struct call *c)
{
	struct sh_enc e;
	struct mp_req q = { .kind = MP_CMD, .bucket = bucket };
	struct meta_cmd copy = *mc;
	int rc;

	copy.ver = 1; /* the leader stamps its own */
	mc = &copy;

	sh_enc_init(&e);
	SH_ASSERT_OK(meta_cmd_encode(&e, mc));
	q.data = e.p;
	q.dlen = e.len;
	rc = call(w, &q, c);
	sh_enc_fini(&e);
	return rc;
}

static uint16_t
dbucket(uint64_t parent, const char *name)
{
	return meta_dentry_bucket(parent, name, strlen(name), NBUCKETS);
}

static int
mk(struct world *w, uint64_t parent, const char *name, uint8_t type, uint64_t *ino)
{
	struct meta_cmd mc = { .op = META_OP_CREATE,
			       .type = type,
			       .parent = parent,
			       .mode = 0644,
			       .uid = 1000,
			       .gid = 100,
			       .tag = sh_rand_u64(&w->rng) | 1 };
	struct call *c = sh_calloc(1, sizeof(*c));
	int rc;

	snprintf(mc.name, sizeof(mc.name), "%s", name);
	rc = cmd(w, dbucket(parent, name), &mc, c);
	if (rc == 0) {
		SH_ASSERT(c->r.flags & MP_DENTRY);
		SH_ASSERT(c->r.flags & MP_ATTR);
		SH_ASSERT_EQ(c->r.attr.uid, 1000u);
		*ino = c->r.dentry.ino;
	}
	sh_free(c);
	return rc;
}

static int
rm(struct world *w, uint64_t parent, const char *name, bool dir)
{
	/* tagged as the client library tags them: a retry after a lost answer is done */
	struct meta_cmd mc = {
		.op = META_OP_REMOVE, .parent = parent, .dir = dir, .tag = sh_rand_u64(&w->rng) | 1
	};
	struct call *c = sh_calloc(1, sizeof(*c));
	int rc;

	snprintf(mc.name, sizeof(mc.name), "%s", name);
	rc = cmd(w, dbucket(parent, name), &mc, c);
	sh_free(c);
	return rc;
}

static int
mv(struct world *w, uint64_t parent, const char *name, uint64_t parent2, const char *name2,
   unsigned flags)
{
	struct meta_cmd mc = { .op = META_OP_RENAME,
			       .parent = parent,
			       .parent2 = parent2,
			       .flags = flags,
			       .tag = sh_rand_u64(&w->rng) | 1 };
	struct call *c = sh_calloc(1, sizeof(*c));
	int rc;

	snprintf(mc.name, sizeof(mc.name), "%s", name);
	snprintf(mc.name2, sizeof(mc.name2), "%s", name2);
	rc = cmd(w, dbucket(parent, name), &mc, c);
	sh_free(c);
	return rc;
}

static int
lookup(struct world *w, uint64_t parent, const char *name, struct meta_dentry *d)
{
	struct mp_req q = { .kind = MP_LOOKUP, .bucket = dbucket(parent, name), .ino = parent };
	struct call *c = sh_calloc(1, sizeof(*c));
	int rc;

	q.nlen = (uint16_t)strlen(name);
	memcpy(q.name, name, q.nlen);
	rc = call(w, &q, c);
	if (rc == 0)
		*d = c->r.dentry;
	sh_free(c);
	return rc;
}

static int
getattr(struct world *w, uint64_t ino, struct meta_inode *in)
{
	struct mp_req q = { .kind = MP_GETATTR, .bucket = meta_ino_bucket(ino), .ino = ino };
	struct call *c = sh_calloc(1, sizeof(*c));
	int rc = call(w, &q, c);

	if (rc == 0)
		*in = c->r.attr;
	sh_free(c);
	return rc;
}

/* Every entry of dir, by fanning out; each name must come once. Returns the count. */
static unsigned
list(struct world *w, uint64_t dir, uint8_t *seen, unsigned nseen)
{
	struct mp_req q = { .kind = MP_DIRBUCKETS, .bucket = meta_ino_bucket(dir), .ino = dir };
	struct call *c = sh_calloc(1, sizeof(*c));
	uint16_t buckets[NBUCKETS + 1];
	unsigned nb = 0, count = 0;

	SH_ASSERT_OK(call(w, &q, c));
	buckets[nb++] = meta_ino_bucket(dir);
	for (size_t i = 0; i + 2 <= c->r.dlen; i += 2) {
		uint16_t b;

		memcpy(&b, c->data + i, 2);
		SH_ASSERT_LT(b, NBUCKETS);
		buckets[nb++] = b;
	}
	for (unsigned i = 0; i < nb; i++) {
		char after[META_NAME_MAX + 1] = "";

		for (;;) {
			struct mp_req r = {
				.kind = MP_READDIR, .bucket = buckets[i], .ino = dir, .max = 7
			};
			struct sh_dec d;
			struct meta_dirent de;
			int k;

			r.nlen = (uint16_t)strlen(after);
			memcpy(r.name, after, r.nlen);
			SH_ASSERT_OK(call(w, &r, c));
			sh_dec_init(&d, c->data, c->r.dlen);
			while ((k = mp_dirent_next(&d, &de)) == 1) {
				unsigned idx;

				SH_ASSERT_EQ(sscanf(de.name, "f%u", &idx), 1);
				SH_ASSERT_LT(idx, nseen);
				SH_ASSERT_MSG(seen[idx] == 0, "seed %llu: %s listed twice",
					      (unsigned long long)w->seed, de.name);
				seen[idx] = 1;
				count++;
				snprintf(after, sizeof(after), "%s", de.name);
			}
			SH_ASSERT_EQ(k, 0);
			if (!(c->r.flags & MP_MORE))
				break;
		}
	}
	sh_free(c);
	return count;
}

/* Node i's metadata groups as it reports them (none while it is down). */
static unsigned
groups_of(struct world *w, int i, struct msvc_group_info gi[64])
{
	unsigned n;

	if (!w->n[i].up)
		return 0;
	n = msvc_groups(w->n[i].svc, gi, 64);
	return n < 64 ? n : 64;
}

static int
leader_node(struct world *w, uint16_t bucket)
{
	const struct mplace *pl = mroute_place(w->rt);
	uint32_t g = pl->group_of[bucket];

	for (int i = 1; i <= N; i++) {
		struct msvc_group_info gi[64];
		unsigned n = groups_of(w, i, gi);

		for (unsigned k = 0; k < n; k++)
			if (gi[k].index == g && gi[k].ready)
				return i;
	}
	return 0;
}

struct parent_wait {
	struct world *w;
	uint64_t dir, want;
};

/* The directory's bucket says its parent is the one wanted. */
static bool
parent_is(void *arg)
{
	struct parent_wait *pw = arg;
	struct mp_req q = { .kind = MP_PARENT, .bucket = meta_ino_bucket(pw->dir), .ino = pw->dir };
	struct call *c = sh_calloc(1, sizeof(*c));
	bool ok = call(pw->w, &q, c) == 0 && c->r.aux == pw->want;

	sh_free(c);
	return ok;
}

struct settle {
	struct world *w;
	uint64_t dir;
	uint64_t want_size;
};

static bool
dir_settled(void *arg)
{
	struct settle *s = arg;
	struct meta_inode in;

	if (getattr(s->w, s->dir, &in) != 0)
		return false;
	return in.size == s->want_size;
}

/* Six backends and a client on a lossy, reordering network, groups formed. */
static void
world_start_opts(struct world *w, uint64_t seed, uint64_t log_size, bool stores)
{
	memset(w, 0, sizeof(*w));
	w->seed = seed;
	w->log_size = log_size;
	w->stores = stores;
	sh_rand_seed(&w->rng, seed);
	snprintf(w->base, sizeof(w->base), "/tmp/shoal-simmeta-XXXXXX");
	SH_ASSERT(mkdtemp(w->base) != NULL);
	build_cfg(w);
	w->sim = sim_create(seed);
	for (int i = 1; i <= N; i++) {
		char name[16], ip[32];

		snprintf(name, sizeof(name), "n%d", i);
		snprintf(ip, sizeof(ip), "10.0.1.%d", i);
		snprintf(w->n[i].dir, sizeof(w->n[i].dir), "%s/n%d", w->base, i);
		SH_ASSERT_OK(mkdir(w->n[i].dir, 0755));
		w->n[i].w = w;
		w->n[i].id = i;
		w->n[i].sn = sim_node_create(w->sim, name, ip);
		w->n[i].env = sim_node_env(w->n[i].sn);
		node_start(&w->n[i]);
	}
	{
		struct net_iface ifc = { 0 };
		struct net_config nc = { .node_id = CLIENT_ID, .ifaces = &ifc, .nifaces = 1 };

		w->csn = sim_node_create(w->sim, "client", "10.0.2.1");
		SH_ASSERT_OK(env_addr_parse("10.0.2.1:7500", &ifc.addr));
		SH_ASSERT_OK(net_create(sim_node_env(w->csn), &nc, &w->cnet));
		SH_ASSERT_OK(mroute_create(w->cnet, &w->rt));
		SH_ASSERT_OK(mroute_set_cfg(w->rt, w->cfg));
	}
	{
		struct sim_net_params np;

		sim_net_get(w->sim, &np);
		np.loss = 0.02;
		np.dup = 0.01;
		np.reorder = 0.05;
		np.reorder_ns = 2 * SH_NSEC_PER_MSEC;
		sim_net_set(w->sim, &np);
	}
	sim_run_for(w->sim, 3 * SH_NSEC_PER_SEC);
}

static void
world_start(struct world *w, uint64_t seed, uint64_t log_size)
{
	world_start_opts(w, seed, log_size, false);
}

static void
world_end(struct world *w)
{
	char cmdline[512];

	mroute_destroy(w->rt);
	net_destroy(w->cnet);
	for (int i = 1; i <= N; i++)
		if (w->n[i].up)
			node_stop(w, &w->n[i], false);
	sim_destroy(w->sim);
	cfg_free(w->cfg);
	snprintf(cmdline, sizeof(cmdline), "rm -rf %s", w->base);
	SH_ASSERT_EQ(system(cmdline), 0);
}

static void
run_world(uint64_t seed)
{
	static struct world w;
	uint64_t dirs[3], files[NFILES];
	int made[NFILES];

	world_start(&w, seed, 4ull << 20);

	/* three directories under the root (leases from bucket 0 where needed) */
	for (int i = 0; i < 3; i++) {
		char name[16];

		snprintf(name, sizeof(name), "d%d", i);
		int rc = mk(&w, META_ROOT_INO, name, META_DIR, &dirs[i]);

		SH_ASSERT_MSG(rc == 0, "seed %llu: mkdir %s: %s", (unsigned long long)seed, name,
			      sh_errname(rc));
	}
	/* a file's extents through the leader: mapped, read back by range, overwritten */
	{
		uint64_t f;
		struct meta_extent e[2] = {
			{ .off = 0, .len = 4096, .stripe = 77, .d = 4, .p = 2, .frag = 65536 },
			{ .off = 1 << 20, .len = 100, .stripe = 78, .d = 4, .p = 2, .frag = 65536 }
		};
		struct meta_cmd mc = { .op = META_OP_EXTENT };
		struct mp_req q = { .kind = MP_EXTENTS, .off = 0, .len = UINT64_MAX };
		struct call *c = sh_calloc(1, sizeof(*c));
		struct meta_extent got[META_EXTENTS_MAX];
		struct sh_enc enc;
		unsigned n;

		SH_ASSERT_OK(mk(&w, META_ROOT_INO, "data", META_REG, &f));
		sh_enc_init(&enc);
		SH_ASSERT_OK(meta_extent_list_encode(&enc, e, 2));
		mc.ino = f;
		mc.data = enc.p;
		mc.dlen = enc.len;
		SH_ASSERT_OK(cmd(&w, meta_ino_bucket(f), &mc, c));
		SH_ASSERT_EQ(c->r.attr.size, (1ull << 20) + 100);
		sh_enc_fini(&enc);
		q.bucket = meta_ino_bucket(f);
		q.ino = f;
		SH_ASSERT_OK(call(&w, &q, c));
		SH_ASSERT_OK(meta_extent_list_decode(c->data, c->r.dlen, got, &n));
		SH_ASSERT_EQ(n, 2u);
		SH_ASSERT_EQ(got[1].stripe, 78);
		q.off = 2000;
		q.len = 10;
		SH_ASSERT_OK(call(&w, &q, c));
		SH_ASSERT_OK(meta_extent_list_decode(c->data, c->r.dlen, got, &n));
		SH_ASSERT_EQ(n, 1u);
		SH_ASSERT_EQ(got[0].stripe, 77);
		/* the orphan sweep's question: which stripes does this bucket know */
		{
			uint8_t ids[24] = { 77, 0, 0, 0, 0,    0,    0, 0, 78, 0, 0, 0,
					    0,	0, 0, 0, 0x39, 0x30, 0, 0, 0,  0, 0, 0 };
			struct mp_req sq = { .kind = MP_STRIPES,
					     .bucket = meta_ino_bucket(f),
					     .data = ids,
					     .dlen = sizeof(ids) };

			SH_ASSERT_OK(call(&w, &sq, c));
			SH_ASSERT_EQ(c->r.dlen, 3u);
			SH_ASSERT(c->data[0] == 1 && c->data[1] == 1 && c->data[2] == 0);
			sq.dlen = 7; /* not whole ids */
			SH_ASSERT_EQ(call(&w, &sq, c), -EINVAL);
		}
		/* a client may not forge a release */
		mc = (struct meta_cmd){ .op = META_OP_RECLAIM_DONE, .upto = 77 };
		SH_ASSERT_EQ(cmd(&w, meta_ino_bucket(f), &mc, c), -EPERM);
		SH_ASSERT_OK(rm(&w, META_ROOT_INO, "data", false));
		sh_free(c);
	}

	/* forged inode numbers and bad names: clear errors, nothing changed */
	{
		struct meta_inode in;
		struct mp_req q = { .kind = MP_GETATTR, .bucket = 3, .ino = meta_ino_make(4, 1) };
		struct call *c = sh_calloc(1, sizeof(*c));
		SH_ASSERT_EQ(getattr(&w, meta_ino_make(5, 123456), &in), -ESTALE);
		SH_ASSERT_EQ(call(&w, &q, c), -ESTALE); /* an inode asked of another bucket */
		q.ino = 0;
		SH_ASSERT_EQ(call(&w, &q, c), -EINVAL);
		q.bucket = NBUCKETS + 3; /* no such bucket */
		SH_ASSERT_EQ(call(&w, &q, c), -EINVAL);
		sh_free(c);
		SH_ASSERT_EQ(mk(&w, META_ROOT_INO, "a/b", META_REG, &(uint64_t){ 0 }), -EINVAL);
		SH_ASSERT_EQ(mk(&w, meta_ino_make(7, 99), "x", META_REG, &(uint64_t){ 0 }),
			     -ENOENT);
	}
	{
		uint64_t x;

		SH_ASSERT_EQ(mk(&w, META_ROOT_INO, "d0", META_DIR, &x), -EEXIST);
		SH_ASSERT_EQ(mk(&w, dirs[0] + 1000, "x", META_REG, &x), -ENOENT);
	}

	/* files in d1, leaders killed now and then */
	for (int i = 0; i < NFILES; i++) {
		char name[16];

		snprintf(name, sizeof(name), "f%d", i);
		made[i] = mk(&w, dirs[1], name, META_REG, &files[i]);
		/* tagged: a create retried after a crash finds its own inode, never EEXIST */
		SH_ASSERT_MSG(made[i] == 0 || made[i] == -ETIMEDOUT, "seed %llu: create %s: %s",
			      (unsigned long long)seed, name, sh_errname(made[i]));
		if (i % 20 == 10) {
			int l = leader_node(&w, dbucket(dirs[1], name));

			if (l > 0) {
				node_stop(&w, &w.n[l], true);
				sim_run_for(w.sim, 500 * SH_NSEC_PER_MSEC);
				node_start(&w.n[l]);
			}
		}
	}
	/* what succeeded is there, with its attributes */
	for (int i = 0; i < NFILES; i++) {
		char name[16];
		struct meta_dentry d;
		struct meta_inode in;

		snprintf(name, sizeof(name), "f%d", i);
		if (made[i] != 0)
			continue;
		SH_ASSERT_MSG(lookup(&w, dirs[1], name, &d) == 0, "seed %llu: %s lost",
			      (unsigned long long)seed, name);
		SH_ASSERT_EQ(d.ino, files[i]);
		SH_ASSERT_OK(getattr(&w, d.ino, &in));
		SH_ASSERT_EQ(in.type, META_REG);
		SH_ASSERT_EQ(in.mode & 07777, 0644u);
	}
	/* the directory's size converges to its entry count; readdir lists each once */
	{
		uint8_t seen[NFILES] = { 0 };
		unsigned n = list(&w, dirs[1], seen, NFILES), want = 0;
		struct settle st = { &w, dirs[1], 0 };

		for (int i = 0; i < NFILES; i++) {
			if (made[i] == 0)
				SH_ASSERT_MSG(seen[i], "seed %llu: f%d not listed",
					      (unsigned long long)seed, i);
			want += seen[i];
		}
		SH_ASSERT_EQ(n, want);
		st.want_size = want;
		SH_ASSERT_MSG(sim_run_until(w.sim, dir_settled, &st, 20 * SH_NSEC_PER_SEC),
			      "seed %llu: d1's size does not converge to %u",
			      (unsigned long long)seed, want);
	}
	/*
	 * renames out of d1 into d2 (mostly between two buckets), leaders killed now and
	 * then: once recovery is done, every file has exactly one of its two names
	 */
	{
		int moved[NFILES];

		for (int i = 0; i < NFILES; i++) {
			char a[16], b[16];

			moved[i] = -1;
			if (made[i] != 0)
				continue;
			snprintf(a, sizeof(a), "f%d", i);
			snprintf(b, sizeof(b), "f%d", i);
			if (i % 3 != 0) {
				moved[i] = mv(&w, dirs[1], a, dirs[2], b, 0);
			} else {
				/* kill -9 the leader of one side at a random point of the rename */
				struct meta_cmd mc = { .op = META_OP_RENAME,
						       .ver = 1,
						       .parent = dirs[1],
						       .parent2 = dirs[2],
						       .tag = sh_rand_u64(&w.rng) | 1 };
				struct mp_req q = { .kind = MP_CMD,
						    .fs = w.fs,
						    .bucket = dbucket(dirs[1], a) };
				struct call *c = sh_calloc(1, sizeof(*c));
				struct sh_enc e;
				int l =
				    leader_node(&w, sh_rand_below(&w.rng, 2) ? dbucket(dirs[1], a)
									     : dbucket(dirs[2], b));

				snprintf(mc.name, sizeof(mc.name), "%s", a);
				snprintf(mc.name2, sizeof(mc.name2), "%s", b);
				sh_enc_init(&e);
				SH_ASSERT_OK(meta_cmd_encode(&e, &mc));
				q.data = e.p;
				q.dlen = e.len;
				SH_ASSERT_OK(
				    mroute_call(w.rt, &q, 20 * SH_NSEC_PER_SEC, on_call, c));
				sh_enc_fini(&e);
				sim_run_for(w.sim, sh_rand_below(&w.rng, 3000) * SH_NSEC_PER_USEC);
				if (l > 0) {
					node_stop(&w, &w.n[l], true);
					sim_run_for(w.sim, 200 * SH_NSEC_PER_MSEC);
					node_start(&w.n[l]);
				}
				SH_ASSERT(sim_run_until(w.sim, call_done, c, 60 * SH_NSEC_PER_SEC));
				moved[i] = c->status;
				sh_free(c);
			}
			/* a retry after a crash that finds the rename done says so (its tag):
			 * never ENOENT or EEXIST; a timeout leaves it either way */
			SH_ASSERT_MSG(moved[i] == 0 || moved[i] == -ETIMEDOUT ||
					  moved[i] == -ESHUTDOWN || moved[i] == SH_EPEERRESTART,
				      "seed %llu: rename f%d: %s", (unsigned long long)seed, i,
				      sh_errname(moved[i]));
		}
		sim_run_for(w.sim, 5 * SH_NSEC_PER_SEC); /* new leaders finish what they find */
		for (int i = 0; i < NFILES; i++) {
			char a[16];
			struct meta_dentry d1, d2;
			int r1, r2;

			if (made[i] != 0)
				continue;
			snprintf(a, sizeof(a), "f%d", i);
			r1 = lookup(&w, dirs[1], a, &d1);
			r2 = lookup(&w, dirs[2], a, &d2);
			SH_ASSERT_MSG((r1 == 0) != (r2 == 0),
				      "seed %llu: f%d has %s name after its rename (%s)",
				      (unsigned long long)seed, i, r1 == 0 ? "both" : "neither",
				      sh_errname(moved[i]));
			if (moved[i] == 0)
				SH_ASSERT_MSG(r2 == 0 && d2.ino == files[i],
					      "seed %llu: f%d renamed but not there",
					      (unsigned long long)seed, i);
			if (r2 == 0) /* move it back, for what follows */
				SH_ASSERT_OK(mv(&w, dirs[2], a, dirs[1], a, 0));
		}
		/* the rules of rename(2) hold between buckets too */
		SH_ASSERT_EQ(mk(&w, dirs[2], "x", META_REG, &(uint64_t){ 0 }), 0);
		SH_ASSERT_EQ(mv(&w, dirs[1], "f1", dirs[2], "x", META_RENAME_NOREPLACE), -EEXIST);
		SH_ASSERT_EQ(mv(&w, dirs[1], "nothing", dirs[2], "y", 0), -ENOENT);
		SH_ASSERT_EQ(mv(&w, dirs[1], "f1", dirs[2], "x", META_RENAME_EXCHANGE), 0);
		{
			struct meta_dentry d;

			SH_ASSERT_OK(lookup(&w, dirs[2], "x", &d));
			SH_ASSERT_EQ(d.ino, files[1]);
			SH_ASSERT_OK(mv(&w, dirs[1], "f1", dirs[2], "x", META_RENAME_EXCHANGE));
			/* replace: the old target's inode goes */
			SH_ASSERT_OK(lookup(&w, dirs[2], "x", &d));
			SH_ASSERT_OK(mv(&w, dirs[1], "f1", dirs[2], "x", 0));
			SH_ASSERT_EQ(lookup(&w, dirs[1], "f1", &(struct meta_dentry){ 0 }),
				     -ENOENT);
			{
				struct meta_inode in;
				int rc;

				/* an orphan (no client holds it) that its leader drops soon */
				rc = getattr(&w, d.ino, &in);
				SH_ASSERT(rc == -ESTALE || (rc == 0 && in.nlink == 0));
				for (int t = 0; rc == 0 && t < 30; t++) {
					sim_run_for(w.sim, SH_NSEC_PER_SEC);
					rc = getattr(&w, d.ino, &in);
				}
				SH_ASSERT_EQ(rc, -ESTALE);
			}
			SH_ASSERT_OK(mv(&w, dirs[2], "x", dirs[1], "f1", 0));
		}
	}

	/* a directory renamed between buckets, then removed: its own bucket says if it is empty */
	for (int k = 0; k < 4; k++) {
		char a[32], b[32];
		uint64_t sub, f;
		struct meta_inode in;

		snprintf(a, sizeof(a), "sub%d", k);
		snprintf(b, sizeof(b), "moved%d", k);
		SH_ASSERT_OK(mk(&w, dirs[0], a, META_DIR, &sub));
		SH_ASSERT_OK(mv(&w, dirs[0], a, dirs[2], b, 0));
		{
			/* its own bucket learns its new parent (a delta, unless it renamed there)
			 */
			struct parent_wait pw = { &w, sub, dirs[2] };

			SH_ASSERT_MSG(sim_run_until(w.sim, parent_is, &pw, 10 * SH_NSEC_PER_SEC),
				      "seed %llu: moved directory %d's parent never followed",
				      (unsigned long long)seed, k);
		}
		SH_ASSERT_OK(mk(&w, sub, "inside", META_REG, &f));
		SH_ASSERT_EQ(rm(&w, dirs[2], b, true), -ENOTEMPTY);
		SH_ASSERT_OK(rm(&w, sub, "inside", false));
		SH_ASSERT_MSG(rm(&w, dirs[2], b, true) == 0, "seed %llu: rmdir of moved dir %d",
			      (unsigned long long)seed, k);
		SH_ASSERT_EQ(lookup(&w, dirs[2], b, &(struct meta_dentry){ 0 }), -ENOENT);
		sim_run_for(w.sim, SH_NSEC_PER_SEC); /* the inode goes with a delta */
		SH_ASSERT_EQ(getattr(&w, sub, &in), -ESTALE);
		SH_ASSERT_EQ(mk(&w, sub, "late", META_REG, &f), -ENOENT);
	}

	/* rmdir: not empty while entries remain, then gone */
	SH_ASSERT_EQ(rm(&w, META_ROOT_INO, "d1", true), -ENOTEMPTY);
	SH_ASSERT_EQ(rm(&w, META_ROOT_INO, "d0", false), -EISDIR);
	for (int i = 0; i < NFILES; i++) {
		char name[16];
		int rc;

		snprintf(name, sizeof(name), "f%d", i);
		rc = rm(&w, dirs[1], name, false);
		SH_ASSERT_MSG(rc == 0 || (made[i] != 0 && rc == -ENOENT),
			      "seed %llu: unlink %s: %s", (unsigned long long)seed, name,
			      sh_errname(rc));
	}
	SH_ASSERT_EQ(rm(&w, META_ROOT_INO, "d1", true), 0);
	{
		struct meta_dentry d;
		uint64_t x;

		SH_ASSERT_EQ(lookup(&w, META_ROOT_INO, "d1", &d), -ENOENT);
		SH_ASSERT_EQ(mk(&w, dirs[1], "late", META_REG, &x), -ENOENT);
	}
	/* the root counts d0 and d2 */
	{
		struct settle st = { &w, META_ROOT_INO, 2 };
		struct meta_inode in;

		SH_ASSERT_MSG(sim_run_until(w.sim, dir_settled, &st, 20 * SH_NSEC_PER_SEC),
			      "seed %llu: the root's size does not converge to 2",
			      (unsigned long long)seed);
		SH_ASSERT_OK(getattr(&w, META_ROOT_INO, &in));
		SH_ASSERT_EQ(in.nlink, 4u);
	}

	world_end(&w);
}

TEST(meta_groups)
{
	for (int i = 0; i < 2; i++)
		run_world(sh_test_seed() * 10 + (uint64_t)i);
}

/* ---- a state larger than a Raft log: the bucket store holds it ---- */

#define NBIG	1600
#define BIG_LEN 2048

static void
big_bytes(uint64_t seed, unsigned i, uint8_t *b)
{
	struct sh_rand r;

	sh_rand_seed(&r, seed ^ (0x9e3779b97f4a7c15ull * (i + 1)));
	for (unsigned k = 0; k < BIG_LEN; k += 8) {
		uint64_t v = sh_rand_u64(&r);

		memcpy(b + k, &v, 8);
	}
}

static int
put_inline(struct world *w, uint64_t ino, const uint8_t *b, size_t len)
{
	struct meta_cmd mc = { .op = META_OP_INLINE, .ino = ino, .data = b, .dlen = len };
	struct call *c = sh_calloc(1, sizeof(*c));
	int rc = cmd(w, meta_ino_bucket(ino), &mc, c);

	sh_free(c);
	return rc;
}

/* The file's name resolves to ino and its inline bytes are the expected ones. */
static void
check_big(struct world *w, uint64_t dir, unsigned i, uint64_t ino, const char *when)
{
	struct mp_req q = {
		.kind = MP_EXTENTS, .bucket = meta_ino_bucket(ino), .ino = ino, .len = UINT64_MAX
	};
	struct call *c = sh_calloc(1, sizeof(*c));
	struct meta_dentry d;
	uint8_t want[BIG_LEN];
	char name[16];
	int rc;

	snprintf(name, sizeof(name), "f%u", i);
	rc = lookup(w, dir, name, &d);
	SH_ASSERT_MSG(rc == 0 && d.ino == ino, "seed %llu, %s: %s: %s", (unsigned long long)w->seed,
		      when, name, sh_errname(rc));
	SH_ASSERT_OK(call(w, &q, c));
	SH_ASSERT(c->r.flags & MP_INLINE);
	big_bytes(w->seed, i, want);
	SH_ASSERT_MSG(c->r.dlen == BIG_LEN && memcmp(c->data, want, BIG_LEN) == 0,
		      "seed %llu, %s: %s reads back wrong", (unsigned long long)w->seed, when,
		      name);
	sh_free(c);
}

/*
 * Files whose metadata (2 KiB inline each) adds up to more than a group's
 * Raft log can hold, while: a member is down long enough to need the
 * leader's whole state (sent from the store, installed into its store);
 * leaders are killed, losing their stores' unflushed batches (replayed
 * from their logs, never applied twice); then the member that was sent
 * the state serves in a quorum without two others; last, every node is
 * killed and restarted at once. Every file reads back each time.
 */
static void
run_large(uint64_t seed)
{
	static struct world w;
	static uint64_t inos[NBIG];
	uint8_t b[BIG_LEN];
	uint64_t dir;

	/* a 1 MiB log: each half holds well under a group's share of the state */
	world_start(&w, seed, 1ull << 20);
	SH_ASSERT_OK(mk(&w, META_ROOT_INO, "big", META_DIR, &dir));
	node_stop(&w, &w.n[N], true);
	for (unsigned i = 0; i < NBIG; i++) {
		char name[16];
		int rc;

		snprintf(name, sizeof(name), "f%u", i);
		do
			rc = mk(&w, dir, name, META_REG, &inos[i]);
		while (rc == -ETIMEDOUT);
		SH_ASSERT_MSG(rc == 0, "seed %llu: create %s: %s", (unsigned long long)seed, name,
			      sh_errname(rc));
		big_bytes(seed, i, b);
		do
			rc = put_inline(&w, inos[i], b, BIG_LEN);
		while (rc == -ETIMEDOUT);
		SH_ASSERT_MSG(rc == 0, "seed %llu: write %s: %s", (unsigned long long)seed, name,
			      sh_errname(rc));
		if (i == NBIG / 2)
			node_start(&w.n[N]); /* far behind: gets the whole state */
		if (i % 400 == 399) {
			int l = leader_node(&w, meta_ino_bucket(inos[i]));

			if (l > 0 && l != N) {
				node_stop(&w, &w.n[l], true);
				sim_run_for(w.sim, 300 * SH_NSEC_PER_MSEC);
				node_start(&w.n[l]);
			}
		}
	}
	sim_run_for(w.sim, 3 * SH_NSEC_PER_SEC);
	/* without nodes 1 and 2, every group of five needs node N in its quorum */
	node_stop(&w, &w.n[1], true);
	node_stop(&w, &w.n[2], true);
	for (unsigned i = 0; i < NBIG; i++)
		check_big(&w, dir, i, inos[i], "nodes 1 and 2 down");
	node_start(&w.n[1]);
	node_start(&w.n[2]);
	/* everyone killed at once: stores and logs as they were */
	for (int i = 1; i <= N; i++)
		node_stop(&w, &w.n[i], true);
	for (int i = 1; i <= N; i++)
		node_start(&w.n[i]);
	sim_run_for(w.sim, 3 * SH_NSEC_PER_SEC);
	for (unsigned i = 0; i < NBIG; i++)
		check_big(&w, dir, i, inos[i], "after a restart of all");
	world_end(&w);
}

TEST(meta_state_larger_than_log)
{
	run_large(sh_test_seed());
}

/* ---- the data path: stripes on the targets, extents in the buckets, under crashes ---- */

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

static void
on_dreply(void *arg, int status, const struct net_msg *m)
{
	struct dreply *r = arg;

	r->done = true;
	r->status = status;
	r->len = 0;
	if (status >= 0 && m != NULL && m->len <= sizeof(r->data)) {
		memcpy(r->data, m->buf->data + m->off, m->len);
		r->len = m->len;
	}
}

static bool
all_replied(void *arg)
{
	struct dreply *r = arg;

	for (int i = 0; i < DW_D + DW_P; i++)
		if (!r[i].done)
			return false;
	return true;
}

/* One request for each of the six fragments (fragment i on node tg[i]), all at once. */
static void
to_targets(struct world *w, uint16_t op, uint64_t stripe, const uint64_t *tg,
	   uint8_t (*frags)[DW_FRAG], struct dreply *r)
{
	static uint8_t hdr[DW_D + DW_P][STORE_PROTO_HDR + 8];
	struct net_call_opts o = { .timeout_ns = 2 * SH_NSEC_PER_SEC, .retries = 1 };

	for (int i = 0; i < DW_D + DW_P; i++) {
		struct store_proto_req q = {
			.target = tg[i], .stripe = stripe, .idx = (uint32_t)i, .len = DW_FRAG
		};
		struct iovec iov[2];
		char a[64];
		uint64_t peer = mplace_endpoint(tg[i]);

		addr((int)tg[i], a, sizeof(a));
		memset(&r[i], 0, sizeof(r[i]) - sizeof(r[i].data));
		/* a PUT's bytes go first, its header after them */
		iov[frags ? 1 : 0] = (struct iovec){ hdr[i], store_proto_encode(op, &q, hdr[i]) };
		if (frags)
			iov[0] = (struct iovec){ frags[i], DW_FRAG };
		if (net_peer_ensure(w->cnet, peer, a) < 0 ||
		    net_call(w->cnet, peer, op, iov, frags ? 2 : 1, &o, on_dreply, &r[i], NULL) <
			0) {
			r[i].done = true;
			r[i].status = -EIO;
		}
	}
	SH_ASSERT(sim_run_until(w->sim, all_replied, r, 30 * SH_NSEC_PER_SEC));
}

/*
 * Where a stripe's six fragments go: on nodes 1..6 when they are all up and
 * none failed the last try, else spread over the nodes up, the least used
 * first, never more than P on one (client/client.c, place_stripe_degraded:
 * one more failure never loses it). -ENOSPC when the nodes up cannot.
 */
static int
dw_place(struct world *w, uint64_t stripe, uint32_t avoid, uint64_t *tg)
{
	unsigned count[N + 1] = { 0 };

	for (int i = 0; i < DW_D + DW_P; i++) {
		int best = 0;

		for (int k = 1; k <= N; k++) {
			/* the same node for fragment i when it can, then by fewest, then by hash */
			int pref = 1 + (int)((stripe + (uint64_t)i) % N);

			if (!w->n[k].up || (avoid & (1u << k)) || count[k] >= DW_P)
				continue;
			if (best == 0 || count[k] < count[best] ||
			    (count[k] == count[best] && k == pref))
				best = k;
		}
		if (best == 0)
			return -ENOSPC;
		count[best]++;
		tg[i] = (uint64_t)best;
	}
	return 0;
}

/*
 * What a client does (client/io.c, write_stripes, map_extents): a stripe of
 * 4+2 fragments to six targets, tried again elsewhere (a new stripe id)
 * while a target fails, then its extent committed in the file's bucket
 * with a request tag. Returns 0 if acknowledged, -EAGAIN if it may or may
 * not have landed (the commit failed, maybe after it applied), another
 * error if surely not (no try stored every fragment: nothing was mapped).
 */
static int
write_stripe(struct world *w, uint64_t ino, uint64_t off, const uint8_t *data, uint64_t stripe)
{
	static uint8_t frags[DW_D + DW_P][DW_FRAG];
	static struct dreply r[DW_D + DW_P];
	const uint8_t *dp[DW_D];
	uint8_t *pp[DW_P];
	struct ec_code code;
	struct meta_extent e = {
		.off = off, .len = DW_STRIPE, .d = DW_D, .p = DW_P, .frag = DW_FRAG
	};
	struct meta_cmd mc = { .op = META_OP_EXTENT, .ino = ino, .tag = sh_rand_u64(&w->rng) | 1 };
	struct call *c;
	struct sh_enc enc;
	uint32_t failed = 0;
	int rc = -EIO;

	SH_ASSERT_OK(ec_code_init(&code, DW_D, DW_P));
	for (int i = 0; i < DW_D; i++) {
		memcpy(frags[i], data + i * DW_FRAG, DW_FRAG);
		dp[i] = frags[i];
	}
	for (int i = 0; i < DW_P; i++)
		pp[i] = frags[DW_D + i];
	ec_encode(&code, DW_FRAG, dp, pp);
	for (unsigned attempt = 0; attempt < 4 && rc < 0; attempt++) {
		e.stripe = stripe + ((uint64_t)attempt << 14);
		if (dw_place(w, e.stripe, failed, e.targets) < 0 &&
		    dw_place(w, e.stripe, 0, e.targets) < 0) {
			sim_run_for(w->sim, 300 * SH_NSEC_PER_MSEC); /* too few up: wait */
			continue;
		}
		to_targets(w, NET_OP_STORE_PUT, e.stripe, e.targets, frags, r);
		rc = 0;
		failed = 0;
		for (int i = 0; i < DW_D + DW_P; i++)
			if (r[i].status < 0) {
				rc = r[i].status; /* not every fragment is durable: not mapped */
				failed |= 1u << e.targets[i];
			}
	}
	if (rc < 0)
		return rc;
	sh_enc_init(&enc);
	SH_ASSERT_OK(meta_extent_list_encode(&enc, &e, 1));
	mc.data = enc.p;
	mc.dlen = enc.len;
	c = sh_calloc(1, sizeof(*c));
	rc = cmd(w, meta_ino_bucket(ino), &mc, c);
	sh_free(c);
	sh_enc_fini(&enc);
	/* an error from the commit (timeout, a restarted peer...) may hide one that landed */
	return rc == 0 ? 0 : -EAGAIN;
}

/*
 * What the file holds at [off, off + DW_STRIPE): its extent from the
 * bucket, the fragments from the targets, decoded from any four. 0, or
 * -ENOENT (no extent there), or an error.
 */
static unsigned dw_decoded;   /* reads that had to decode */
static uint64_t dw_data_node; /* the node of a data fragment the last read found */

static int
read_stripe(struct world *w, uint64_t ino, uint64_t off, uint8_t *out)
{
	static uint8_t frags[DW_D + DW_P][DW_FRAG];
	static struct dreply r[DW_D + DW_P];
	struct mp_req q = { .kind = MP_EXTENTS,
			    .bucket = meta_ino_bucket(ino),
			    .ino = ino,
			    .off = off,
			    .len = DW_STRIPE };
	struct call *c = sh_calloc(1, sizeof(*c));
	struct meta_extent ex[META_EXTENTS_MAX];
	uint8_t *fp[DW_D + DW_P];
	struct ec_code code;
	struct ec_decoder dec;
	uint32_t missing = 0;
	unsigned n = 0;
	int rc = call(w, &q, c);

	if (rc == 0 && c->r.dlen > 0) /* none there: an empty answer */
		rc = meta_extent_list_decode(c->data, c->r.dlen, ex, &n);
	sh_free(c);
	if (rc < 0)
		return rc;
	if (n == 0)
		return -ENOENT;
	/* one write covers one whole slot: exactly one extent, aligned */
	SH_ASSERT_EQ(n, 1u);
	SH_ASSERT(ex[0].off == off && ex[0].len == DW_STRIPE && ex[0].soff == 0);
	to_targets(w, NET_OP_STORE_GET, ex[0].stripe, ex[0].targets, NULL, r);
	dw_data_node = ex[0].targets[0];
	for (int i = 0; i < DW_D + DW_P; i++) {
		fp[i] = frags[i];
		if (r[i].status >= 0 && r[i].len == DW_FRAG)
			memcpy(frags[i], r[i].data, DW_FRAG);
		else
			missing |= 1u << i;
	}
	if ((missing & ((1u << DW_D) - 1)) != 0) {
		SH_ASSERT_OK(ec_code_init(&code, DW_D, DW_P));
		rc = ec_decoder_init(&code, &dec, missing);
		if (rc < 0)
			return -EIO; /* more than P lost */
		ec_decode(&code, &dec, DW_FRAG, fp);
		dw_decoded++;
	}
	for (int i = 0; i < DW_D; i++)
		memcpy(out + i * DW_FRAG, frags[i], DW_FRAG);
	return 0;
}

static void
slot_bytes(uint64_t seed, unsigned slot, unsigned version, uint8_t *b)
{
	struct sh_rand r;

	sh_rand_seed(&r, seed * 1000003 + slot * 131 + version);
	for (unsigned k = 0; k < DW_STRIPE; k += 8) {
		uint64_t v = sh_rand_u64(&r);

		memcpy(b + k, &v, 8);
	}
}

/* Every slot reads back as its last acknowledged version or a later one sent. */
static void
dw_check(struct world *w, uint64_t seed, uint64_t ino, const int *acked, const int *maybe_hi,
	 int crashes, const char *when)
{
	static uint8_t buf[DW_STRIPE], got[DW_STRIPE];

	for (unsigned s = 0; s < DW_SLOTS; s++) {
		int rc = read_stripe(w, ino, (uint64_t)s * DW_STRIPE, got), found = -1;

		if (acked[s] < 0 && maybe_hi[s] < 0) {
			SH_ASSERT_MSG(rc == -ENOENT,
				      "seed %llu: %s: slot %u never written reads %s",
				      (unsigned long long)seed, when, s, sh_errname(rc));
			continue;
		}
		if (rc == -ENOENT && acked[s] < 0)
			continue; /* only unanswered writes: none landed */
		SH_ASSERT_MSG(rc == 0, "seed %llu: %s: slot %u (acked version %d): %s",
			      (unsigned long long)seed, when, s, acked[s], sh_errname(rc));
		for (int v = acked[s] < 0 ? 0 : acked[s]; v <= maybe_hi[s] && found < 0; v++) {
			slot_bytes(seed, s, (unsigned)v, buf);
			if (memcmp(buf, got, DW_STRIPE) == 0)
				found = v;
		}
		SH_ASSERT_MSG(found >= 0,
			      "seed %llu: %s: slot %u holds none of versions %d..%d (acked %d), "
			      "after %d crashes",
			      (unsigned long long)seed, when, s, acked[s] < 0 ? 0 : acked[s],
			      maybe_hi[s], acked[s], crashes);
	}
}

/*
 * Writers overwrite a file's slots stripe by stripe, never pausing, while
 * the network loses and reorders packets and nodes are kill -9'd every 1-3
 * s of simulated time (their disks lose what was not flushed, the last
 * write torn), up to P = 2 down at once, each restarted 1-3 s later:
 * stripes are written around the nodes down (at most P fragments on one
 * node) and mappings retried after a leader died. Afterwards every slot
 * reads back, decoded from any four fragments, as exactly the version its
 * last acknowledged write put there — or a later write whose answer was
 * lost — never older, never a mix: with every node up, and again with one
 * node down (what the degraded placement promises).
 */
static void
run_data(uint64_t seed)
{
	static struct world w;
	static uint8_t buf[DW_STRIPE];
	int acked[DW_SLOTS], maybe_hi[DW_SLOTS], next[DW_SLOTS];
	uint64_t ino, back_at[N + 1] = { 0 }, kill_at;
	int crashes = 0, nacked = 0, ndown = 0;

	world_start_opts(&w, seed, 4ull << 20, true);
	dw_decoded = 0;
	SH_ASSERT_OK(mk(&w, META_ROOT_INO, "data", META_REG, &ino));
	for (int s = 0; s < DW_SLOTS; s++) {
		acked[s] = maybe_hi[s] = -1;
		next[s] = 0;
	}
	kill_at = sim_now(w.sim) + SH_NSEC_PER_SEC;
	for (int i = 0; i < DW_WRITES; i++) {
		unsigned slot = (unsigned)(sh_rand_u64(&w.rng) % DW_SLOTS);
		int v = next[slot]++, rc;
		uint64_t now = sim_now(w.sim);

		/* the schedule, by simulated time: restarts due, then a kill when due */
		for (int n = 1; n <= N; n++)
			if (back_at[n] && now >= back_at[n]) {
				node_start(&w.n[n]);
				back_at[n] = 0;
				ndown--;
			}
		if (now >= kill_at && ndown < DW_P) {
			int n = 1 + (int)(sh_rand_u64(&w.rng) % N);

			if (back_at[n] == 0) {
				node_stop(&w, &w.n[n], true);
				w.n[n].up = false;
				back_at[n] = sim_now(w.sim) + SH_NSEC_PER_SEC +
					     sh_rand_u64(&w.rng) % (2 * SH_NSEC_PER_SEC);
				ndown++;
				crashes++;
			}
			kill_at = sim_now(w.sim) + SH_NSEC_PER_SEC +
				  sh_rand_u64(&w.rng) % (2 * SH_NSEC_PER_SEC);
		}
		SH_ASSERT_LT(v, 1000);
		slot_bytes(seed, slot, (unsigned)v, buf);
		rc = write_stripe(&w, ino, (uint64_t)slot * DW_STRIPE, buf,
				  (uint64_t)meta_ino_bucket(ino) << 48 |
				      ((seed << 28) & ((1ull << 48) - 1)) | (uint64_t)i);
		if (rc == 0)
			acked[slot] = maybe_hi[slot] = v, nacked++;
		else if (rc == -EAGAIN)
			maybe_hi[slot] = v;
		sim_run_for(w.sim, 40 * SH_NSEC_PER_MSEC); /* the writer's own work: time passes */
	}
	for (int n = 1; n <= N; n++)
		if (back_at[n])
			node_start(&w.n[n]);
	sim_run_for(w.sim, 4 * SH_NSEC_PER_SEC);
	/* most writes get through: the test checks something */
	SH_ASSERT_MSG(nacked >= DW_WRITES / 2, "seed %llu: only %d of %d writes acknowledged",
		      (unsigned long long)seed, nacked, DW_WRITES);
	SH_ASSERT_MSG(crashes >= 3, "seed %llu: only %d crashes", (unsigned long long)seed,
		      crashes);
	dw_check(&w, seed, ino, acked, maybe_hi, crashes, "all up");
	{
		/* one node down for good, one with a data fragment read: reads decode */
		int a = dw_data_node >= 1 && dw_data_node <= N ? (int)dw_data_node : 1;

		node_stop(&w, &w.n[a], true);
		w.n[a].up = false;
		sim_run_for(w.sim, 3 * SH_NSEC_PER_SEC);
	}
	dw_check(&w, seed, ino, acked, maybe_hi, crashes, "one node down");
	SH_ASSERT_MSG(dw_decoded > 0, "seed %llu: no read had to decode", (unsigned long long)seed);
	world_end(&w);
}

TEST(data_acked_stripes_survive_crashes)
{
	run_data(sh_test_seed());
}

/* ---- a node marked down while it is alive ---- */

static void
set_state(struct world *w, int node, uint8_t state)
{
	char msg[CFG_MSG_MAX];
	struct cfg_cmd c = { .op = CFG_OP_NODE_STATE, .id = (uint64_t)node, .state = state };

	SH_ASSERT_MSG(cfg_apply(w->cfg, &c, msg, sizeof(msg)) == 0, "%s", msg);
	for (int i = 1; i <= N; i++)
		if (w->n[i].up)
			SH_ASSERT_OK(msvc_set_cfg(w->n[i].svc, w->cfg));
	SH_ASSERT_OK(mroute_set_cfg(w->rt, w->cfg));
}

static bool
leads_nothing(void *arg)
{
	struct node *n = arg;
	struct msvc_group_info gi[64];
	unsigned k = msvc_groups(n->svc, gi, 64);

	for (unsigned i = 0; i < k && i < 64; i++)
		if (gi[i].ready)
			return false;
	return true;
}

/*
 * The configuration marks a node down while it is alive (its management
 * network cut, say): clients skip it, so its groups' leaders hand over to
 * other members, and creates go on in every bucket. Back up, it may lead
 * again.
 */
TEST(meta_leaders_marked_down_hand_over)
{
	static struct world w;
	int victim = 0;

	world_start(&w, sh_test_seed(), 4ull << 20);
	for (int i = 1; i <= N && victim == 0; i++)
		if (!leads_nothing(&w.n[i]))
			victim = i;
	SH_ASSERT(victim > 0);
	set_state(&w, victim, CFG_DOWN);
	SH_ASSERT_MSG(sim_run_until(w.sim, leads_nothing, &w.n[victim], 10 * SH_NSEC_PER_SEC),
		      "seed %llu: node %d marked down still leads", (unsigned long long)w.seed,
		      victim);
	for (int i = 0; i < 3 * NBUCKETS; i++) {
		char name[16];
		uint64_t ino;
		int rc;

		snprintf(name, sizeof(name), "m%d", i);
		rc = mk(&w, META_ROOT_INO, name, META_REG, &ino);
		SH_ASSERT_MSG(rc == 0, "seed %llu: create %s with node %d marked down: %s",
			      (unsigned long long)w.seed, name, victim, sh_errname(rc));
	}
	set_state(&w, victim, CFG_UP);
	world_end(&w);
}

/* ---- a dead node's replicas replaced ---- */

/* Every group's leader has the members the configuration names as its voters, all caught up. */
static bool
groups_match_cfg(void *arg)
{
	struct world *w = arg;
	const struct mplace *pl = mroute_place(w->rt);

	for (uint32_t g = 0; g < pl->ngroups; g++) {
		const uint64_t *mem = pl->members + (size_t)g * pl->replicas;
		struct msvc_group_info lead = { 0 };
		bool found = false;

		for (int i = 1; i <= N && !found; i++) {
			struct msvc_group_info gi[64];
			unsigned n = groups_of(w, i, gi);

			for (unsigned k = 0; k < n && !found; k++)
				if (gi[k].index == g && gi[k].ready) {
					lead = gi[k];
					found = true;
				}
		}
		if (!found || lead.nvoters != pl->replicas)
			return false;
		for (uint32_t k = 0; k < pl->replicas; k++) {
			bool voter = false;
			int node = (int)(mem[k] >> 8);
			struct msvc_group_info gi[64];
			unsigned n;

			for (unsigned v = 0; v < lead.nvoters; v++)
				voter |= lead.voters[v] == mem[k] >> 8;
			if (!voter || node < 1 || node > N || !w->n[node].up)
				return false;
			/* the member has the group's state: it applied what the leader committed */
			n = groups_of(w, node, gi);
			voter = false;
			for (unsigned v = 0; v < n; v++)
				voter |= gi[v].index == g && gi[v].applied >= lead.commit;
			if (!voter)
				return false;
		}
	}
	return true;
}

static bool
holds_no_group(void *arg)
{
	struct node *n = arg;

	return msvc_groups(n->svc, NULL, 0) == 0;
}

static void
push_cfg(struct world *w)
{
	for (int i = 1; i <= N; i++)
		if (w->n[i].up)
			SH_ASSERT_OK(msvc_set_cfg(w->n[i].svc, w->cfg));
	SH_ASSERT_OK(mroute_set_cfg(w->rt, w->cfg));
}

static void
expect_files(struct world *w, const uint64_t *inos, int n, const char *when)
{
	for (int i = 0; i < n; i++) {
		char name[16];
		struct meta_dentry d;
		struct meta_inode in;
		int rc;

		snprintf(name, sizeof(name), "r%d", i);
		rc = lookup(w, META_ROOT_INO, name, &d);
		SH_ASSERT_MSG(rc == 0 && d.ino == inos[i], "seed %llu: %s: %s: %s",
			      (unsigned long long)w->seed, when, name, sh_errname(rc));
		SH_ASSERT_OK(getattr(w, d.ino, &in));
		SH_ASSERT_EQ(in.uid, 1000u);
	}
}

/*
 * A node dies for good: the configuration puts another node in its place
 * in every group it was in, each group's leader adds the new member, brings
 * it up to date and removes the dead one, so every group has five voters
 * again and survives two more failures. Creates made before and after are
 * all there once two more of the original members are killed; the dead node,
 * back, drops the copies it no longer serves.
 */
static void
run_replace(uint64_t seed)
{
	static struct world w;
	uint64_t inos[2 * NFILES];
	int victim, replaced = 0, killed[2];
	uint32_t g;
	uint64_t old, node;
	char msg[CFG_MSG_MAX];

	world_start(&w, seed, 1ull << 20); /* a small log: new members get the whole state */
	for (int i = 0; i < NFILES; i++) {
		char name[16];

		snprintf(name, sizeof(name), "r%d", i);
		SH_ASSERT_OK(mk(&w, META_ROOT_INO, name, META_REG, &inos[i]));
	}
	victim = 1 + (int)sh_rand_below(&w.rng, N);
	node_stop(&w, &w.n[victim], true);
	set_state(&w, victim, CFG_DOWN);
	/* what the configuration's leader proposes, one group at a time */
	while (cfg_mgroup_replacement(w.cfg, UINT64_MAX >> 1, 0, &g, &old, &node) == 0) {
		struct cfg_cmd c = {
			.op = CFG_OP_MGROUP_REPLACE, .group = g, .id = old, .node2 = node
		};

		SH_ASSERT_EQ(old, (uint64_t)victim);
		SH_ASSERT_MSG(cfg_apply(w.cfg, &c, msg, sizeof(msg)) == 0, "%s", msg);
		replaced++;
		push_cfg(&w);
		sim_run_for(w.sim, 200 * SH_NSEC_PER_MSEC);
	}
	SH_ASSERT_GT(replaced, 0);
	for (uint32_t b = 0; b < NBUCKETS; b++)
		for (uint32_t k = 0; k < w.cfg->replicas; k++)
			SH_ASSERT_NE(cfg_bucket(w.cfg, b)[k], (uint64_t)victim);
	SH_ASSERT_MSG(sim_run_until(w.sim, groups_match_cfg, &w, 60 * SH_NSEC_PER_SEC),
		      "seed %llu: node %d's groups never got their new members",
		      (unsigned long long)seed, victim);
	for (int i = NFILES; i < 2 * NFILES; i++) {
		char name[16];

		snprintf(name, sizeof(name), "r%d", i);
		SH_ASSERT_OK(mk(&w, META_ROOT_INO, name, META_REG, &inos[i]));
	}
	/* two more of the members that were there from the start */
	for (int k = 0; k < 2; k++) {
		do
			killed[k] = 1 + (int)sh_rand_below(&w.rng, N);
		while (killed[k] == victim || (k == 1 && killed[1] == killed[0]));
		node_stop(&w, &w.n[killed[k]], true);
		set_state(&w, killed[k], CFG_DOWN);
	}
	expect_files(&w, inos, 2 * NFILES, "after two more members were killed");
	/* the replaced node comes back: it serves nothing and keeps nothing */
	set_state(&w, victim, CFG_UP);
	node_start(&w.n[victim]);
	SH_ASSERT(sim_run_until(w.sim, holds_no_group, &w.n[victim], 5 * SH_NSEC_PER_SEC));
	for (uint32_t i = 0; i < mroute_place(w.rt)->ngroups; i++) {
		char path[600];
		struct env_disk *d;

		snprintf(path, sizeof(path), "%s/meta-%u-g%u.raft", w.n[victim].dir, w.fs, i);
		int rc = env_disk_open(w.n[victim].env, path, 0, 0, &d);

		SH_ASSERT_MSG(rc == -ENOENT, "seed %llu: %s kept (%s)", (unsigned long long)seed,
			      path, sh_errname(rc));
	}
	world_end(&w);
}

TEST(meta_dead_node_replicas_replaced)
{
	for (int i = 0; i < 3; i++)
		run_replace(sh_test_seed() * 10 + (uint64_t)i);
}

/* ---- leader balancing ---- */

struct spread {
	struct world *w;
	int most, least;
};

/* Every group has a leader, and the spread of how many each node leads is at most one. */
static bool
leaders_spread(void *arg)
{
	struct spread *sp = arg;
	struct world *w = sp->w;
	int led[N + 1] = { 0 }, total = 0;

	sp->most = 0;
	sp->least = 1 << 30;
	for (int i = 1; i <= N; i++) {
		struct msvc_group_info gi[64];
		unsigned n = groups_of(w, i, gi);

		for (unsigned k = 0; k < n; k++)
			led[i] += gi[k].ready;
		total += led[i];
	}
	for (int i = 1; i <= N; i++) {
		sp->most = led[i] > sp->most ? led[i] : sp->most;
		sp->least = led[i] < sp->least ? led[i] : sp->least;
	}
	/* every group led (none in an election) */
	return total == (int)mroute_place(w->rt)->ngroups && sp->most - sp->least <= 1;
}

/*
 * A node marked down hands its groups' leadership over; back up, it leads
 * nothing until the others hand it a share: a node that leads two groups
 * more than a member of one of them hands one over, until every node leads
 * one (six groups, six nodes).
 */
TEST(meta_leaders_balance)
{
	static struct world w;
	struct spread sp = { .w = &w };

	for (int round = 0; round < 2; round++) {
		int victim;

		world_start(&w, sh_test_seed() * 10 + (uint64_t)round, 4ull << 20);
		victim = 1 + (int)sh_rand_below(&w.rng, N);
		set_state(&w, victim, CFG_DOWN);
		SH_ASSERT(sim_run_until(w.sim, leads_nothing, &w.n[victim], 10 * SH_NSEC_PER_SEC));
		set_state(&w, victim, CFG_UP);
		SH_ASSERT_MSG(sim_run_until(w.sim, leaders_spread, &sp, 60 * SH_NSEC_PER_SEC),
			      "seed %llu: leaders never spread (most %d, least %d)",
			      (unsigned long long)w.seed, sp.most, sp.least);
		SH_ASSERT(!leads_nothing(&w.n[victim]));
		/* and it stays so: no hand-over goes back and forth */
		sim_run_for(w.sim, 20 * SH_NSEC_PER_SEC);
		SH_ASSERT_MSG(leaders_spread(&sp), "seed %llu: spread again (most %d, least %d)",
			      (unsigned long long)w.seed, sp.most, sp.least);
		world_end(&w);
	}
}

/* ---- open files without names (msvc_hold.c) ---- */

/* MP_HOLD for ino (0: none) with more inos renewed or given back; the status. */
static int
hold(struct world *w, uint64_t ino, uint32_t flags, const uint64_t *more, unsigned n,
     struct meta_inode *attr)
{
	uint8_t data[64 * 8];
	struct mp_req q = { .kind = MP_HOLD,
			    .bucket = meta_ino_bucket(ino ? ino : more[0]),
			    .ino = ino,
			    .max = flags,
			    .data = data,
			    .dlen = (size_t)n * 8 };
	struct call *c = sh_calloc(1, sizeof(*c));
	int rc;

	for (unsigned i = 0; i < n; i++)
		for (int b = 0; b < 8; b++)
			data[i * 8 + b] = (uint8_t)(more[i] >> (8 * b));
	rc = call(w, &q, c);
	if (rc == 0 && attr != NULL)
		*attr = c->r.attr;
	sh_free(c);
	return rc;
}

/* Run for ns, renewing ino's hold every 3 s as a client does (if renew). */
static void
hold_for(struct world *w, uint64_t ino, uint64_t ns, bool renew)
{
	for (uint64_t t = 0; t < ns; t += 3 * SH_NSEC_PER_SEC) {
		if (renew)
			SH_ASSERT_OK(hold(w, 0, 0, &ino, 1, NULL));
		sim_run_for(w->sim, 3 * SH_NSEC_PER_SEC);
	}
}

/*
 * A file removed while a client holds it open stays (nlink 0) through the
 * renewals and a kill -9 of its bucket's leader, and goes once given back;
 * one whose holder stops renewing goes after the hold runs out; one open
 * nowhere goes with its remove; a new open by name of a file without names
 * is refused (ESTALE: the caller looks the name up again).
 */
TEST(meta_open_files_held_through_leader_crash)
{
	static struct world w;
	struct meta_inode in;
	uint64_t held, gone, lapsed;
	int lead, rc;

	world_start(&w, sh_test_seed(), 4ull << 20);
	SH_ASSERT_OK(mk(&w, META_ROOT_INO, "held", META_REG, &held));
	SH_ASSERT_OK(mk(&w, META_ROOT_INO, "gone", META_REG, &gone));
	SH_ASSERT_OK(mk(&w, META_ROOT_INO, "lapsed", META_REG, &lapsed));
	sim_run_for(w.sim, 11 * SH_NSEC_PER_SEC); /* the creator's holds run out */
	/* open nowhere: it goes with its remove */
	SH_ASSERT_OK(rm(&w, META_ROOT_INO, "gone", false));
	rc = getattr(&w, gone, &in);
	SH_ASSERT_MSG(rc == -ESTALE, "seed %llu: a file open nowhere after its remove: %s",
		      (unsigned long long)w.seed, sh_errname(rc));
	/* held: an orphan through renewals and a new leader */
	SH_ASSERT_OK(hold(&w, held, MP_HOLD_FRESH, NULL, 0, &in));
	SH_ASSERT_EQ(in.nlink, 1u);
	SH_ASSERT_OK(hold(&w, lapsed, 0, NULL, 0, NULL));
	SH_ASSERT_OK(rm(&w, META_ROOT_INO, "held", false));
	SH_ASSERT_OK(rm(&w, META_ROOT_INO, "lapsed", false));
	SH_ASSERT_OK(getattr(&w, held, &in));
	SH_ASSERT_EQ(in.nlink, 0u);
	SH_ASSERT_EQ(hold(&w, held, MP_HOLD_FRESH, NULL, 0, NULL), -ESTALE);
	hold_for(&w, held, 6 * SH_NSEC_PER_SEC, true);
	lead = leader_node(&w, meta_ino_bucket(held));
	SH_ASSERT(lead > 0);
	node_stop(&w, &w.n[lead], true);
	hold_for(&w, held, 6 * SH_NSEC_PER_SEC, true);
	node_start(&w.n[lead]);
	hold_for(&w, held, 18 * SH_NSEC_PER_SEC, true);
	rc = getattr(&w, held, &in);
	SH_ASSERT_MSG(rc == 0 && in.nlink == 0,
		      "seed %llu: a file held open, 30 s and a leader crash later: %s",
		      (unsigned long long)w.seed, sh_errname(rc));
	/* the holder that stopped renewing: gone after its hold ran out */
	rc = getattr(&w, lapsed, &in);
	SH_ASSERT_MSG(rc == -ESTALE, "seed %llu: a lapsed hold kept its file: %s",
		      (unsigned long long)w.seed, sh_errname(rc));
	/* given back: it goes */
	SH_ASSERT_OK(hold(&w, held, MP_HOLD_RELEASE, NULL, 0, NULL));
	hold_for(&w, held, 3 * SH_NSEC_PER_SEC, false);
	rc = getattr(&w, held, &in);
	SH_ASSERT_MSG(rc == -ESTALE, "seed %llu: a file given back stays: %s",
		      (unsigned long long)w.seed, sh_errname(rc));
	world_end(&w);
}
