// SPDX-License-Identifier: Apache-2.0
/* The simulator's metadata world: backends, the client, synchronous calls (world.h). */
#include "../../../src/base/secret.h"
#include "../../../src/client/client_env.h"
#include "../../../src/data/seal.h"
#include "world.h"

void
addr(int id, char *buf, size_t len)
{
	snprintf(buf, len, "10.0.1.%d:7100", id);
}

void
mgmt_addr(int id, char *buf, size_t len)
{
	snprintf(buf, len, "10.0.1.%d:7000", id);
}

/* NET_OP_CLUSTER_CONFIG, as a node's cluster module answers it: the epoch, the newer config. */
static void
on_config(struct net_req *req, void *arg)
{
	struct node *n = arg;
	const struct net_msg *m = net_req_body(req);
	struct sh_enc e;
	uint64_t epoch;

	if (m->len != 8) {
		net_reply(req, -EINVAL, NULL, 0);
		return;
	}
	memcpy(&epoch, m->buf->data + m->off, 8);
	sh_enc_init(&e);
	sh_enc_u64(&e, n->w->cfg->epoch);
	if (epoch < n->w->cfg->epoch)
		cfg_encode(&e, n->w->cfg);
	net_reply(req, sh_enc_error(&e) ? -ENOMEM : 0, &(struct iovec){ e.p, e.len }, 1);
	sh_enc_fini(&e);
}

static void
build_cfg(struct world *w)
{
	char msg[CFG_MSG_MAX];
	struct cfg_cmd c = { .op = CFG_OP_CREATE, .nbuckets = NBUCKETS, .id = 1 };

	w->cfg = cfg_new();
	snprintf(c.name, sizeof(c.name), "sim");
	mgmt_addr(1, c.addr, sizeof(c.addr));
	addr(1, c.data, sizeof(c.data));
	SH_ASSERT_OK(cfg_apply(w->cfg, &c, msg, sizeof(msg)));
	for (int i = 2; i <= N; i++) {
		struct cfg_cmd a = { .op = CFG_OP_NODE_ADD, .id = (uint64_t)i };

		mgmt_addr(i, a.addr, sizeof(a.addr));
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
		struct cfg_cmd f = { .op = CFG_OP_FS_CREATE, .d = 4, .p = 2, .sealed = w->sealed };

		snprintf(f.name, sizeof(f.name), "fs1");
		if (w->sealed) {
			/* the key a client is given, and fs1's master key wrapped by it */
			uint8_t kek[SEAL_KEY_LEN], master[SEAL_KEY_LEN];
			char text[SEAL_KEK_TEXT];
			struct sh_rand r;

			sh_rand_seed(&r, w->seed ^ 0x5ea1);
			sh_rand_fill(&r, kek, sizeof(kek));
			sh_rand_fill(&r, master, sizeof(master));
			SH_ASSERT_OK(seal_wrap(kek, master, f.wrapped));
			seal_kek_format(kek, text);
			snprintf(w->kek_file, sizeof(w->kek_file), "%s/fs.key", w->base);
			SH_ASSERT_OK(sh_secret_write_text(w->kek_file, text));
		}
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

static void submitted(void *arg, const struct cfg_cmd *cmd);

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

void
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
				 .cfg_submit = submitted,
				 .arg = n };
	char a[64];

	addr(n->id, a, sizeof(a));
	SH_ASSERT_OK(env_addr_parse(a, &ifc.addr));
	SH_ASSERT_OK(net_create(n->env, &nc, &n->net));
	/* the management endpoint, for clients' configuration (client_env.h) */
	mgmt_addr(n->id, a, sizeof(a));
	SH_ASSERT_OK(env_addr_parse(a, &ifc.addr));
	nc.node_id = (uint64_t)n->id;
	SH_ASSERT_OK(net_create(n->env, &nc, &n->mnet));
	SH_ASSERT_OK(net_handle(n->mnet, NET_OP_CLUSTER_CONFIG, on_config, n));
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

/* A node's configuration change, applied by the test's loop (world_submits). */
static void
submitted(void *arg, const struct cfg_cmd *cmd)
{
	struct world *w = ((struct node *)arg)->w;

	if (w->nsubmits < sizeof(w->submits) / sizeof(w->submits[0]))
		w->submits[w->nsubmits++] = *cmd;
}

unsigned
world_submits(struct world *w)
{
	struct cfg_cmd cmds[sizeof(w->submits) / sizeof(w->submits[0])];
	unsigned n = w->nsubmits, applied = 0;

	memcpy(cmds, w->submits, n * sizeof(cmds[0]));
	w->nsubmits = 0;
	for (unsigned i = 0; i < n; i++) {
		char msg[CFG_MSG_MAX];
		int rc = cfg_check(w->cfg, &cmds[i], msg, sizeof(msg));

		if (rc == -EALREADY || rc == -EINVAL || rc == -ENOENT)
			continue;
		SH_ASSERT_MSG(rc == 0, "seed %llu: %s", (unsigned long long)w->seed, msg);
		world_apply(w, &cmds[i]);
		applied++;
	}
	return applied;
}

void
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
	net_destroy(n->mnet);
	net_destroy(n->net);
}

void
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

bool
call_done(void *arg)
{
	return ((struct call *)arg)->done;
}

void
call_start(struct world *w, struct mp_req *q, struct call *c)
{
	memset(c, 0, sizeof(*c));
	q->fs = w->fs;
	if (q->kind != MP_CMD)
		q->at = w->at	    ? w->at
			: w->branch ? meta_ver_newest((uint64_t)w->branch << META_BRANCH_SHIFT)
				    : 0;
	SH_ASSERT_OK(mroute_call(w->rt, q, 20 * SH_NSEC_PER_SEC, on_call, c));
}

int
call(struct world *w, struct mp_req *q, struct call *c)
{
	call_start(w, q, c);
	SH_ASSERT_MSG(sim_run_until(w->sim, call_done, c, 60 * SH_NSEC_PER_SEC),
		      "seed %llu: a call never ended", (unsigned long long)w->seed);
	return c->status;
}

void
cmd_start(struct world *w, uint16_t bucket, const struct meta_cmd *mc, struct call *c)
{
	struct sh_enc e;
	struct mp_req q = { .kind = MP_CMD, .bucket = bucket };
	struct meta_cmd copy = *mc;

	/* the leader stamps its own (a clone's: its branch's) */
	copy.ver = (uint64_t)w->branch << META_BRANCH_SHIFT | 1;
	sh_enc_init(&e);
	SH_ASSERT_OK(meta_cmd_encode(&e, &copy));
	q.data = e.p;
	q.dlen = e.len;
	call_start(w, &q, c); /* (mroute_call keeps a copy of the body) */
	sh_enc_fini(&e);
}

int
cmd(struct world *w, uint16_t bucket, const struct meta_cmd *mc, struct call *c)
{
	cmd_start(w, bucket, mc, c);
	SH_ASSERT_MSG(sim_run_until(w->sim, call_done, c, 60 * SH_NSEC_PER_SEC),
		      "seed %llu: a call never ended", (unsigned long long)w->seed);
	return c->status;
}

uint16_t
dbucket(uint64_t parent, const char *name)
{
	return meta_dentry_bucket(parent, name, strlen(name), NBUCKETS);
}

int
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

int
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

int
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

int
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

int
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
unsigned
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
			/* every other bucket read as readdirplus: the attributes come along */
			bool plus = i % 2 == 1;
			struct mp_req r = { .kind = MP_READDIR,
					    .bucket = buckets[i],
					    .ino = dir,
					    .max = 7,
					    .off = plus ? MP_READDIR_ATTRS : 0 };
			struct sh_dec d;
			struct meta_dirent de;
			struct meta_inode a;
			int k;

			r.nlen = (uint16_t)strlen(after);
			memcpy(r.name, after, r.nlen);
			SH_ASSERT_OK(call(w, &r, c));
			sh_dec_init(&d, c->data, c->r.dlen);
			while ((k = mp_dirent_next(&d, &de, plus ? &a : NULL)) == 1) {
				unsigned idx;

				/* a created file's inode is in its entry's bucket */
				if (plus)
					SH_ASSERT_MSG(a.type == de.type && a.nlink == 1,
						      "seed %llu: %s listed with type %u nlink %u",
						      (unsigned long long)w->seed, de.name, a.type,
						      a.nlink);

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
unsigned
groups_of(struct world *w, int i, struct msvc_group_info gi[64])
{
	unsigned n;

	if (!w->n[i].up)
		return 0;
	n = msvc_groups(w->n[i].svc, gi, 64);
	return n < 64 ? n : 64;
}

int
leader_term(struct world *w, uint16_t bucket, uint64_t *term)
{
	const struct mplace *pl = mroute_place(w->rt);
	uint32_t g = pl->group_of[bucket];

	for (int i = 1; i <= w->nn; i++) {
		struct msvc_group_info gi[64];
		unsigned n = groups_of(w, i, gi);

		for (unsigned k = 0; k < n; k++)
			if (gi[k].index == g && gi[k].ready) {
				if (term)
					*term = gi[k].term;
				return i;
			}
	}
	return 0;
}

int
leader_node(struct world *w, uint16_t bucket)
{
	return leader_term(w, bucket, NULL);
}

void
run_steady_leader(struct world *w, uint16_t bucket, uint64_t ns)
{
	uint64_t start = sim_now(w->sim), since = start, term = 0, t;
	int lead = 0, l;

	while (sim_now(w->sim) - start < ns || sim_now(w->sim) - since < ns) {
		SH_ASSERT_MSG(sim_now(w->sim) - start < 120 * SH_NSEC_PER_SEC,
			      "seed %llu: bucket %u's group found no steady leader in 120 s",
			      (unsigned long long)w->seed, bucket);
		l = leader_term(w, bucket, &t);
		if (l == 0 || l != lead || t != term)
			since = sim_now(w->sim);
		lead = l;
		term = t;
		sim_run_for(w->sim, 500 * SH_NSEC_PER_MSEC);
	}
}

/* Node i's simulated machine, and its shoald started on it. */
static void
node_create(struct world *w, int i)
{
	char name[16], ip[32];

	snprintf(name, sizeof(name), "n%d", i);
	snprintf(ip, sizeof(ip), "10.0.1.%d", i);
	snprintf(w->n[i].dir, sizeof(w->n[i].dir), "%s/n%d", w->base, i);
	SH_ASSERT_OK(mkdir(w->n[i].dir, 0755));
	w->n[i].w = w;
	w->n[i].id = i;
	w->n[i].sn = sim_node_create(w->sim, name, ip);
	w->n[i].env = sim_node_env(w->n[i].sn);
	w->nn = i > w->nn ? i : w->nn;
	node_start(&w->n[i]);
}

int
world_add_node(struct world *w)
{
	int i = w->nn + 1;
	struct cfg_cmd a = { .op = CFG_OP_NODE_ADD, .id = (uint64_t)i };
	struct cfg_cmd d = {
		.op = CFG_OP_DRIVE_ADD, .id = (uint64_t)i, .target = (uint64_t)i, .size = 1ull << 30
	};

	SH_ASSERT_LE(i, NMAX);
	mgmt_addr(i, a.addr, sizeof(a.addr));
	addr(i, a.data, sizeof(a.data));
	world_apply(w, &a);
	node_create(w, i);
	snprintf(d.path, sizeof(d.path), "/dev/nvme0n1");
	world_apply(w, &d);
	return i;
}

/* Six backends and a client on a lossy, reordering network, groups formed. */
void
world_start_opts(struct world *w, uint64_t seed, uint64_t log_size, bool stores)
{
	world_start_sealed(w, seed, log_size, stores, false);
}

void
world_start_sealed(struct world *w, uint64_t seed, uint64_t log_size, bool stores, bool sealed)
{
	memset(w, 0, sizeof(*w));
	w->seed = seed;
	w->log_size = log_size;
	w->stores = stores;
	w->sealed = sealed;
	sh_rand_seed(&w->rng, seed);
	snprintf(w->base, sizeof(w->base), "/tmp/shoal-simmeta-XXXXXX");
	SH_ASSERT(mkdtemp(w->base) != NULL);
	build_cfg(w);
	w->sim = sim_create(seed);
	for (int i = 1; i <= N; i++)
		node_create(w, i);
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

void
world_start(struct world *w, uint64_t seed, uint64_t log_size)
{
	world_start_opts(w, seed, log_size, false);
}

void
world_end(struct world *w)
{
	char cmdline[512];

	mroute_destroy(w->rt);
	net_destroy(w->cnet);
	for (int i = 1; i <= w->nn; i++)
		if (w->n[i].up)
			node_stop(w, &w->n[i], false);
	sim_destroy(w->sim);
	cfg_free(w->cfg);
	snprintf(cmdline, sizeof(cmdline), "rm -rf %s", w->base);
	SH_ASSERT_EQ(system(cmdline), 0);
}

void
world_apply(struct world *w, const struct cfg_cmd *c)
{
	char msg[CFG_MSG_MAX];

	SH_ASSERT_MSG(cfg_apply(w->cfg, c, msg, sizeof(msg)) == 0, "%s", msg);
	for (int i = 1; i <= w->nn; i++)
		if (w->n[i].up)
			SH_ASSERT_OK(msvc_set_cfg(w->n[i].svc, w->cfg));
	SH_ASSERT_OK(mroute_set_cfg(w->rt, w->cfg));
}

void
set_state(struct world *w, int node, uint8_t state)
{
	struct cfg_cmd c = { .op = CFG_OP_NODE_STATE, .id = (uint64_t)node, .state = state };

	world_apply(w, &c);
}

static bool
drive(void *world, bool (*pred)(void *arg), void *arg, uint64_t max_ns)
{
	return sim_run_until(((struct world *)world)->sim, pred, arg, max_ns);
}

struct sh_client *
world_client(struct world *w, unsigned frag_kb, int i)
{
	char name[16], ip[32], mgmt[64];
	struct sim_node *sn;
	int node = 1 + (int)(sh_rand_u64(&w->rng) % N);
	struct sh_client_env e = { .drive = drive, .world = w };
	struct sh_client_opts o = { .frag_kb = frag_kb,
				    .timeout_ms = 20000,
				    .fs_key_file = w->sealed ? w->kek_file : NULL };
	sh_client *c = NULL;

	snprintf(name, sizeof(name), "client%d", i);
	snprintf(ip, sizeof(ip), "10.0.3.%d", i);
	sn = sim_node_create(w->sim, name, ip);
	while (!w->n[node].up)
		node = 1 + node % N;
	mgmt_addr(node, mgmt, sizeof(mgmt));
	e.env = sim_node_env(sn);
	e.node = (uint64_t)node;
	e.mgmt = mgmt;
	SH_ASSERT_MSG(sh_client_connect_env(&e, &o, &c) == 0, "seed %llu: client %d connects",
		      (unsigned long long)w->seed, i);
	return c;
}

int
extent_at(struct world *w, uint64_t ino, uint64_t off, struct meta_extent *e)
{
	struct mp_req q = { .kind = MP_EXTENTS,
			    .bucket = meta_ino_bucket(ino),
			    .ino = ino,
			    .off = off,
			    .len = DW_STRIPE };
	struct call *c = sh_calloc(1, sizeof(*c));
	struct meta_extent ex[META_EXTENTS_MAX];
	unsigned n = 0;
	int rc = call(w, &q, c);

	if (rc == 0)
		rc = meta_extent_list_decode(c->data, c->r.dlen, ex, &n);
	sh_free(c);
	if (rc == 0 && n != 1)
		rc = -ENOENT;
	if (rc == 0)
		*e = ex[0];
	return rc;
}
