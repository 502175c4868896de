// SPDX-License-Identifier: Apache-2.0
/* The configuration state machine: validation, apply, placement, events, codecs. */
#include <stdio.h>

#include "../../../src/cluster/config.h"
#include "../../lib/test.h"

/* What "CFG7", "CFG8" and "CFG9" add at the end: a u8 per filesystem (and 64 bytes per
 * encrypted one), then its restores (u32 epoch, u8 phase, u64 version), then its clone's
 * fields (u32 origin, u16 branch, u16 branches, u64 base, u8 state) */
#define CFG9_TAIL(c) ((size_t)(c)->nfs * 17)
#define CFG8_TAIL(c) ((size_t)(c)->nfs * 13 + CFG9_TAIL(c))
#define CFG7_TAIL(c) ((size_t)(c)->nfs + CFG8_TAIL(c))
/* and at the end of a command: sealed u8 and the wrapped key */
#define CMD7_TAIL (1 + CFG_WRAP_LEN)

static struct cfg_cmd
node_cmd(uint8_t op, uint64_t id, const char *domain)
{
	struct cfg_cmd c = { .op = op, .id = id, .time = id * 1000 };

	snprintf(c.addr, sizeof(c.addr), "10.0.0.%llu:7000", (unsigned long long)id);
	snprintf(c.data, sizeof(c.data), "10.0.0.%llu:7100", (unsigned long long)id);
	if (domain)
		snprintf(c.domain, sizeof(c.domain), "%s", domain);
	return c;
}

static struct cfg *
cluster_of(unsigned nodes, uint32_t buckets)
{
	struct cfg *c = cfg_new();
	struct cfg_cmd cmd = node_cmd(CFG_OP_CREATE, 1, NULL);
	char msg[CFG_MSG_MAX];

	SH_ASSERT_NOT_NULL(c);
	snprintf(cmd.name, sizeof(cmd.name), "t");
	cmd.nbuckets = buckets;
	SH_ASSERT_MSG(cfg_apply(c, &cmd, msg, sizeof(msg)) == 0, "%s", msg);
	for (unsigned i = 2; i <= nodes; i++) {
		cmd = node_cmd(CFG_OP_NODE_ADD, i, NULL);
		SH_ASSERT_MSG(cfg_apply(c, &cmd, msg, sizeof(msg)) == 0, "%s", msg);
	}
	return c;
}

static void
add_drive(struct cfg *c, uint64_t node)
{
	struct cfg_cmd d = { .op = CFG_OP_DRIVE_ADD, .id = node, .size = 1ull << 30 };
	char msg[CFG_MSG_MAX];

	snprintf(d.path, sizeof(d.path), "/dev/nvme%llun1", (unsigned long long)c->ndrives);
	SH_ASSERT_MSG(cfg_apply(c, &d, msg, sizeof(msg)) == 0, "%s", msg);
}

TEST(config_create_and_add)
{
	struct cfg *c = cluster_of(6, 256);

	SH_ASSERT(c->created);
	SH_ASSERT_EQ(c->nnodes, 6);
	SH_ASSERT_EQ(c->epoch, 6);
	SH_ASSERT_EQ(c->replicas, 5);
	SH_ASSERT_EQ(c->nevents, 6);
	SH_ASSERT(strstr(cfg_event_at(c, 0)->text, "node 6 added") != NULL);
	SH_ASSERT(strstr(cfg_event_at(c, 5)->text, "created") != NULL);
	cfg_free(c);
}

/* Every bad change is refused with a reason and changes nothing. */
TEST(config_refuses_bad_changes)
{
	struct cfg *c = cluster_of(3, 64);
	struct cfg *before = cfg_new();
	char msg[CFG_MSG_MAX];
	struct cfg_cmd x;
	struct {
		struct cfg_cmd cmd;
		int rc;
		const char *text;
	} cases[16];
	int n = 0;

	cases[n].cmd = node_cmd(CFG_OP_NODE_ADD, 2, NULL);
	cases[n].rc = -EEXIST, cases[n++].text = "already exists";
	x = node_cmd(CFG_OP_NODE_ADD, 9, NULL);
	snprintf(x.addr, sizeof(x.addr), "10.0.0.1");
	cases[n].cmd = x, cases[n].rc = -EINVAL, cases[n++].text = "not a management address";
	x = node_cmd(CFG_OP_NODE_ADD, 9, NULL);
	snprintf(x.addr, sizeof(x.addr), "10.0.0.2:7000");
	cases[n].cmd = x, cases[n].rc = -EEXIST, cases[n++].text = "already used by node 2";
	x = node_cmd(CFG_OP_NODE_ADD, 0, NULL);
	cases[n].cmd = x, cases[n].rc = -EINVAL, cases[n++].text = "positive";
	x = (struct cfg_cmd){ .op = CFG_OP_DRIVE_ADD, .id = 7, .size = 1ull << 30 };
	snprintf(x.path, sizeof(x.path), "/d");
	cases[n].cmd = x, cases[n].rc = -ENOENT, cases[n++].text = "no node 7";
	x = (struct cfg_cmd){ .op = CFG_OP_DRIVE_ADD, .id = 1, .size = 1 << 20 };
	snprintf(x.path, sizeof(x.path), "/d");
	cases[n].cmd = x, cases[n].rc = -EINVAL, cases[n++].text = "too small";
	x = (struct cfg_cmd){ .op = CFG_OP_FS_CREATE, .d = 4, .p = 2 };
	snprintf(x.name, sizeof(x.name), "fs");
	cases[n].cmd = x, cases[n].rc = -ENOSPC, cases[n++].text = "needs 6 failure domains";
	x = (struct cfg_cmd){ .op = CFG_OP_FS_CREATE, .d = 4, .p = 3 };
	snprintf(x.name, sizeof(x.name), "fs");
	cases[n].cmd = x, cases[n].rc = -EINVAL, cases[n++].text = "parity 2 or 4";
	x = (struct cfg_cmd){ .op = CFG_OP_FS_CREATE, .d = 4, .p = 2 };
	snprintf(x.name, sizeof(x.name), "a b");
	cases[n].cmd = x, cases[n].rc = -EINVAL, cases[n++].text = "not a filesystem name";
	x = (struct cfg_cmd){ .op = CFG_OP_FS_DELETE };
	snprintf(x.name, sizeof(x.name), "nope");
	cases[n].cmd = x, cases[n].rc = -ENOENT, cases[n++].text = "no filesystem";
	x = (struct cfg_cmd){ .op = CFG_OP_NODE_STATE, .id = 2, .state = CFG_UP };
	cases[n].cmd = x, cases[n].rc = -EALREADY, cases[n++].text = "already up";
	x = (struct cfg_cmd){ .op = CFG_OP_NET_ADD, .id = 2 };
	snprintf(x.addr, sizeof(x.addr), "10.1.0.2:7200");
	cases[n].cmd = x, cases[n].rc = -EINVAL, cases[n++].text = "not a label";
	x = node_cmd(CFG_OP_CREATE, 5, NULL);
	snprintf(x.name, sizeof(x.name), "again");
	x.nbuckets = 4;
	cases[n].cmd = x, cases[n].rc = -EEXIST, cases[n++].text = "already exists";
	x = (struct cfg_cmd){ .op = 99 };
	cases[n].cmd = x, cases[n].rc = -EINVAL, cases[n++].text = "unknown operation";

	SH_ASSERT_OK(cfg_copy(before, c));
	for (int i = 0; i < n; i++) {
		int rc = cfg_apply(c, &cases[i].cmd, msg, sizeof(msg));

		SH_ASSERT_MSG(rc == cases[i].rc, "case %d: %d (%s), want %d", i, rc, msg,
			      cases[i].rc);
		SH_ASSERT_MSG(strstr(msg, cases[i].text) != NULL, "case %d: '%s' lacks '%s'", i,
			      msg, cases[i].text);
		SH_ASSERT_EQ(c->epoch, before->epoch);
		SH_ASSERT_EQ(c->nnodes, before->nnodes);
		SH_ASSERT_EQ(c->ndrives, before->ndrives);
		SH_ASSERT_EQ(c->nfs, before->nfs);
	}
	/* without a cluster, only create works */
	{
		struct cfg *e = cfg_new();
		struct cfg_cmd d = node_cmd(CFG_OP_NODE_ADD, 2, NULL);

		SH_ASSERT_EQ(cfg_apply(e, &d, msg, sizeof(msg)), -ENOTCONN);
		cfg_free(e);
	}
	cfg_free(before);
	cfg_free(c);
}

TEST(config_filesystems_need_domains_with_drives)
{
	struct cfg *c = cluster_of(6, 64);
	struct cfg_cmd fs = { .op = CFG_OP_FS_CREATE, .d = 4, .p = 2, .compression = CFG_COMP_LZ4 };
	char msg[CFG_MSG_MAX];

	snprintf(fs.name, sizeof(fs.name), "data");
	SH_ASSERT_EQ(cfg_apply(c, &fs, msg, sizeof(msg)), -ENOSPC); /* no drives yet */
	for (uint64_t n = 1; n <= 6; n++)
		add_drive(c, n);
	SH_ASSERT_EQ(cfg_domains_with_drives(c), 6);
	SH_ASSERT_MSG(cfg_apply(c, &fs, msg, sizeof(msg)) == 0, "%s", msg);
	SH_ASSERT_EQ(c->nfs, 1);
	SH_ASSERT_EQ(cfg_apply(c, &fs, msg, sizeof(msg)), -EEXIST);
	fs.op = CFG_OP_FS_DELETE;
	SH_ASSERT_OK(cfg_apply(c, &fs, msg, sizeof(msg)));
	SH_ASSERT_EQ(c->nfs, 0);
	cfg_free(c);
}

static unsigned
distinct_domains(const struct cfg *c, const uint64_t *g)
{
	unsigned n = 0;

	for (uint32_t i = 0; i < c->replicas; i++) {
		bool seen = false;

		for (uint32_t k = 0; k < i; k++)
			seen |= strcmp(cfg_node_find(c, g[i])->domain,
				       cfg_node_find(c, g[k])->domain) == 0;
		n += !seen;
	}
	return n;
}

TEST(config_placement_spreads_over_domains)
{
	struct cfg *c = cfg_new();
	struct cfg_cmd cmd = node_cmd(CFG_OP_CREATE, 1, "rack1");
	char msg[CFG_MSG_MAX];
	unsigned load[13] = { 0 };

	snprintf(cmd.name, sizeof(cmd.name), "t");
	cmd.nbuckets = 4096;
	SH_ASSERT_OK(cfg_apply(c, &cmd, msg, sizeof(msg)));
	/* 12 nodes in 6 racks of two */
	for (uint64_t i = 2; i <= 12; i++) {
		char dom[16];

		snprintf(dom, sizeof(dom), "rack%llu", (unsigned long long)(i + 1) / 2);
		cmd = node_cmd(CFG_OP_NODE_ADD, i, dom);
		SH_ASSERT_MSG(cfg_apply(c, &cmd, msg, sizeof(msg)) == 0, "%s", msg);
	}
	SH_ASSERT_EQ(c->replicas, 5);
	for (uint32_t b = 0; b < c->nbuckets; b++) {
		const uint64_t *g = cfg_bucket(c, b);

		SH_ASSERT_EQ(distinct_domains(c, g), 5);
		for (uint32_t i = 0; i < c->replicas; i++)
			load[g[i]]++;
	}
	/* spread: every node holds 4096 * 5 / 12 = 1707 replicas, give or take 15% */
	for (int i = 1; i <= 12; i++)
		SH_ASSERT_MSG(load[i] > 1450 && load[i] < 1960, "node %d holds %u replicas", i,
			      load[i]);
	cfg_free(c);
}

TEST(config_adding_a_node_moves_few_buckets)
{
	struct cfg *c = cluster_of(9, 4096);
	uint64_t *old = sh_malloc((size_t)c->nbuckets * c->replicas * sizeof(uint64_t));
	struct cfg_cmd add = node_cmd(CFG_OP_NODE_ADD, 10, NULL);
	char msg[CFG_MSG_MAX];
	unsigned moved = 0;

	memcpy(old, c->buckets, (size_t)c->nbuckets * c->replicas * sizeof(uint64_t));
	SH_ASSERT_OK(cfg_apply(c, &add, msg, sizeof(msg)));
	for (uint32_t b = 0; b < c->nbuckets; b++)
		for (uint32_t i = 0; i < c->replicas; i++) {
			bool kept = false;

			for (uint32_t k = 0; k < c->replicas; k++)
				kept |= old[(size_t)b * c->replicas + k] == cfg_bucket(c, b)[i];
			moved += !kept;
		}
	/* the new node takes its share (1/10 of the replicas) and little else moves */
	SH_ASSERT_MSG(moved < c->nbuckets * c->replicas / 10 * 13 / 10, "%u of %u replicas moved",
		      moved, c->nbuckets * c->replicas);
	sh_free(old);
	cfg_free(c);
}

TEST(config_small_clusters_use_groups_of_three)
{
	struct cfg *c = cluster_of(3, 16);

	SH_ASSERT_EQ(c->replicas, 3);
	cfg_free(c);
	c = cluster_of(1, 16);
	SH_ASSERT_EQ(c->replicas, 1);
	cfg_free(c);
}

TEST(config_node_state_and_remove)
{
	struct cfg *c = cluster_of(4, 32);
	struct cfg_cmd st = { .op = CFG_OP_NODE_STATE, .id = 3, .state = CFG_DOWN, .time = 5 };
	struct cfg_cmd rm = { .op = CFG_OP_NODE_REMOVE, .id = 3 };
	char msg[CFG_MSG_MAX];

	add_drive(c, 3);
	SH_ASSERT_OK(cfg_apply(c, &st, msg, sizeof(msg)));
	SH_ASSERT_EQ(cfg_node_find(c, 3)->state, CFG_DOWN);
	SH_ASSERT(strstr(cfg_event_at(c, 0)->text, "node 3 is down") != NULL);
	SH_ASSERT_OK(cfg_apply(c, &rm, msg, sizeof(msg)));
	SH_ASSERT_NULL(cfg_node_find(c, 3));
	SH_ASSERT_EQ(c->ndrives, 0); /* its drives go with it */
	for (uint32_t b = 0; b < c->nbuckets; b++)
		for (uint32_t i = 0; i < c->replicas; i++)
			SH_ASSERT_NE(cfg_bucket(c, b)[i], 3);
	cfg_free(c);
}

static bool
group_has(const struct cfg *c, const uint16_t *gof, uint32_t g, uint64_t node)
{
	for (uint32_t b = 0; b < c->nbuckets; b++)
		if (gof[b] == g)
			for (uint32_t k = 0; k < c->replicas; k++)
				if (cfg_bucket(c, b)[k] == node)
					return true;
	return false;
}

/*
 * The metadata groups are fixed when the first filesystem is created; a
 * node down for long is replaced in each of its groups by an up node of a
 * failure domain the group does not use, and can then be removed.
 */
TEST(config_metadata_groups_fixed_and_replaced)
{
	struct cfg *c = cluster_of(6, 64), *d = cfg_new();
	struct cfg_cmd fs = { .op = CFG_OP_FS_CREATE, .d = 4, .p = 2, .time = 100 };
	struct cfg_cmd seven = node_cmd(CFG_OP_NODE_ADD, 7, "node-1");
	struct cfg_cmd down = { .op = CFG_OP_NODE_STATE, .id = 3, .state = CFG_DOWN };
	struct cfg_cmd rm = { .op = CFG_OP_NODE_REMOVE, .id = 3 };
	uint16_t before[64], gof[64];
	uint32_t ng0 = 0, ng = 0, g, replaced = 0;
	uint64_t old, node, t0 = 1000ull * SH_NSEC_PER_SEC;
	char msg[CFG_MSG_MAX];
	struct sh_enc e;

	for (uint64_t n = 1; n <= 6; n++)
		add_drive(c, n);
	SH_ASSERT_OK(cfg_groups(c, before, &ng0));
	SH_ASSERT_NULL(c->bgroup);
	SH_ASSERT_EQ(cfg_mgroup_replacement(c, t0, 0, &g, &old, &node), -ENOENT); /* no fs */
	snprintf(fs.name, sizeof(fs.name), "data");
	SH_ASSERT_MSG(cfg_apply(c, &fs, msg, sizeof(msg)) == 0, "%s", msg);
	SH_ASSERT_NOT_NULL(c->bgroup);
	SH_ASSERT_EQ(c->ngroups, ng0);
	/* a node added later (on node 1's failure domain) changes no group */
	SH_ASSERT_OK(cfg_apply(c, &seven, msg, sizeof(msg)));
	SH_ASSERT_OK(cfg_groups(c, gof, &ng));
	SH_ASSERT_EQ(ng, ng0);
	SH_ASSERT_MEMEQ(gof, before, sizeof(gof));
	SH_ASSERT_EQ(cfg_mgroup_replacement(c, t0, 0, &g, &old, &node), -ENOENT); /* all up */
	SH_ASSERT_EQ(cfg_apply(c, &rm, msg, sizeof(msg)), -EBUSY);

	down.time = t0;
	SH_ASSERT_OK(cfg_apply(c, &down, msg, sizeof(msg)));
	SH_ASSERT_EQ(cfg_mgroup_replacement(c, t0 + 5 * SH_NSEC_PER_SEC, 10 * SH_NSEC_PER_SEC, &g,
					    &old, &node),
		     -ENOENT); /* not down for long enough */
	while (cfg_mgroup_replacement(c, t0 + 11 * SH_NSEC_PER_SEC, 10 * SH_NSEC_PER_SEC, &g, &old,
				      &node) == 0) {
		struct cfg_cmd r = {
			.op = CFG_OP_MGROUP_REPLACE, .group = g, .id = old, .node2 = node
		};

		SH_ASSERT_EQ(old, 3);
		SH_ASSERT(group_has(c, gof, g, 3));
		SH_ASSERT(!group_has(c, gof, g, node));
		/* node 7 shares node 1's domain: it is chosen only where node 1 is not a member,
		 * or where the one other candidate, node 6, is a member already */
		if (node == 7)
			SH_ASSERT(!group_has(c, gof, g, 1) || group_has(c, gof, g, 6));
		SH_ASSERT_MSG(cfg_apply(c, &r, msg, sizeof(msg)) == 0, "%s", msg);
		SH_ASSERT(!group_has(c, gof, g, 3));
		SH_ASSERT(group_has(c, gof, g, node));
		SH_ASSERT_EQ(c->gepoch[g], 1);
		SH_ASSERT(strstr(cfg_event_at(c, 0)->text, "replaced by node") != NULL);
		/* the same again: node 3 is no member any more */
		SH_ASSERT_EQ(cfg_check(c, &r, msg, sizeof(msg)), -ENOENT);
		replaced++;
	}
	SH_ASSERT_GT(replaced, 0);
	for (uint32_t b = 0; b < c->nbuckets; b++) {
		SH_ASSERT_EQ(c->bgroup[b], before[b]); /* the groups keep their numbers */
		for (uint32_t k = 0; k < c->replicas; k++)
			SH_ASSERT_NE(cfg_bucket(c, b)[k], 3);
	}
	/* what a replacement refuses */
	{
		struct cfg_cmd r = { .op = CFG_OP_MGROUP_REPLACE, .group = 0, .node2 = 3 };

		r.id = cfg_bucket(c, 0)[0];
		r.group = c->bgroup[0];
		SH_ASSERT_EQ(cfg_check(c, &r, msg, sizeof(msg)), -EHOSTDOWN); /* node 3 is down */
		r.node2 = cfg_bucket(c, 0)[1];
		SH_ASSERT_EQ(cfg_check(c, &r, msg, sizeof(msg)), -EEXIST);
		r.node2 = 99;
		SH_ASSERT_EQ(cfg_check(c, &r, msg, sizeof(msg)), -ENOENT);
		r.group = c->ngroups;
		SH_ASSERT_EQ(cfg_check(c, &r, msg, sizeof(msg)), -ENOENT);
	}
	/* the table travels with the configuration */
	sh_enc_init(&e);
	cfg_encode(&e, c);
	SH_ASSERT_OK(cfg_decode(e.p, e.len, d));
	SH_ASSERT_EQ(d->ngroups, c->ngroups);
	SH_ASSERT_MEMEQ(d->bgroup, c->bgroup, c->nbuckets * sizeof(*c->bgroup));
	SH_ASSERT_MEMEQ(d->gepoch, c->gepoch, c->ngroups * sizeof(*c->gepoch));
	SH_ASSERT_EQ(cfg_decode(e.p, e.len - 1, d), -EBADMSG);
	sh_enc_fini(&e);
	/* the one node outside a group down as well: that group has no one to take the place */
	{
		struct cfg *e = cluster_of(6, 16);
		struct cfg_cmd f2 = { .op = CFG_OP_FS_CREATE, .d = 3, .p = 2, .time = 100 };
		struct cfg_cmd d6 = { .op = CFG_OP_NODE_STATE, .id = 6, .state = CFG_DOWN };
		uint64_t now = t0 + 11 * SH_NSEC_PER_SEC;
		int rc;

		for (uint64_t k = 1; k <= 6; k++)
			add_drive(e, k);
		snprintf(f2.name, sizeof(f2.name), "x");
		SH_ASSERT_MSG(cfg_apply(e, &f2, msg, sizeof(msg)) == 0, "%s", msg);
		down.time = t0;
		d6.time = now - SH_NSEC_PER_SEC; /* down, but not for long */
		SH_ASSERT_OK(cfg_apply(e, &down, msg, sizeof(msg)));
		SH_ASSERT_OK(cfg_apply(e, &d6, msg, sizeof(msg)));
		while ((rc = cfg_mgroup_replacement(e, now, 10 * SH_NSEC_PER_SEC, &g, &old,
						    &node)) == 0) {
			struct cfg_cmd r = {
				.op = CFG_OP_MGROUP_REPLACE, .group = g, .id = old, .node2 = node
			};

			SH_ASSERT_NE(node, 6);
			SH_ASSERT_MSG(cfg_apply(e, &r, msg, sizeof(msg)) == 0, "%s", msg);
		}
		/* left: the group of nodes 1-5, whose only outsider is node 6 */
		SH_ASSERT_EQ(rc, -ENOSPC);
		cfg_free(e);
	}
	/* node 3 holds no replica now: it may go */
	SH_ASSERT_MSG(cfg_apply(c, &rm, msg, sizeof(msg)) == 0, "%s", msg);
	cfg_free(d);
	cfg_free(c);
}

TEST(config_events_ring)
{
	struct cfg *c = cluster_of(2, 8);
	struct cfg_cmd st = { .op = CFG_OP_NODE_STATE, .id = 2 };
	char msg[CFG_MSG_MAX];
	struct sh_enc e;
	struct cfg *d = cfg_new();

	for (int i = 0; i < 300; i++) {
		st.state = (i & 1) ? CFG_UP : CFG_DOWN;
		st.time = (uint64_t)i;
		SH_ASSERT_OK(cfg_apply(c, &st, msg, sizeof(msg)));
	}
	SH_ASSERT_EQ(c->nevents, CFG_EVENTS_MAX);
	SH_ASSERT_EQ(cfg_event_at(c, 0)->seq, 302);
	SH_ASSERT_EQ(cfg_event_at(c, CFG_EVENTS_MAX - 1)->seq, 302 - CFG_EVENTS_MAX + 1);
	SH_ASSERT_NULL(cfg_event_at(c, CFG_EVENTS_MAX));
	/* and the ring survives a round trip */
	sh_enc_init(&e);
	cfg_encode(&e, c);
	SH_ASSERT_OK(cfg_decode(e.p, e.len, d));
	for (uint32_t i = 0; i < CFG_EVENTS_MAX; i++)
		SH_ASSERT_EQ(cfg_event_at(d, i)->seq, cfg_event_at(c, i)->seq);
	sh_enc_fini(&e);
	cfg_free(d);
	cfg_free(c);
}

TEST(config_codecs_round_trip)
{
	struct cfg *c = cluster_of(5, 128);
	struct cfg *d = cfg_new();
	struct cfg_cmd net = { .op = CFG_OP_NET_ADD, .id = 4 }, back;
	struct sh_enc e, f;
	char msg[CFG_MSG_MAX];

	snprintf(net.addr, sizeof(net.addr), "10.2.0.4:7300");
	snprintf(net.label, sizeof(net.label), "sw2");
	SH_ASSERT_OK(cfg_apply(c, &net, msg, sizeof(msg)));
	add_drive(c, 2);
	sh_enc_init(&e);
	sh_enc_init(&f);
	cfg_encode(&e, c);
	SH_ASSERT_OK(cfg_decode(e.p, e.len, d));
	cfg_encode(&f, d);
	SH_ASSERT_EQ(e.len, f.len);
	SH_ASSERT_MEMEQ(e.p, f.p, e.len);
	SH_ASSERT_EQ(d->epoch, c->epoch);
	SH_ASSERT_STREQ(cfg_node_find(d, 4)->nets[0].label, "sw2");
	/* every truncation is refused */
	for (size_t n = 0; n < e.len; n += 97)
		SH_ASSERT_EQ(cfg_decode(e.p, n, d), -EBADMSG);
	sh_enc_fini(&e);
	sh_enc_fini(&f);

	sh_enc_init(&e);
	cfg_cmd_encode(&e, &net);
	SH_ASSERT_OK(cfg_cmd_decode(e.p, e.len, &back));
	SH_ASSERT_EQ(back.op, CFG_OP_NET_ADD);
	SH_ASSERT_STREQ(back.addr, net.addr);
	SH_ASSERT_EQ(cfg_cmd_decode(e.p, e.len - 1, &back), -EBADMSG);
	sh_enc_fini(&e);
	cfg_free(d);
	cfg_free(c);
}

TEST(config_parsers)
{
	uint8_t d, p;

	SH_ASSERT_OK(cfg_protection_parse("4+2", &d, &p));
	SH_ASSERT_EQ(d, 4);
	SH_ASSERT_EQ(p, 2);
	SH_ASSERT_EQ(cfg_protection_parse("4+", &d, &p), -EINVAL);
	SH_ASSERT_EQ(cfg_protection_parse("4+2x", &d, &p), -EINVAL);
	SH_ASSERT_EQ(cfg_comp_parse("zstd"), CFG_COMP_ZSTD);
	SH_ASSERT_EQ(cfg_comp_parse("gzip"), -EINVAL);
	{
		char buf[16];
		int z9 = cfg_comp_parse("zstd:9");

		SH_ASSERT_EQ(CFG_COMP_ALGO(z9), CFG_COMP_ZSTD);
		SH_ASSERT_EQ(CFG_COMP_LEVEL(z9), 9);
		SH_ASSERT_STREQ(cfg_comp_str((unsigned)z9, buf, sizeof(buf)), "zstd:9");
		SH_ASSERT_STREQ(cfg_comp_str(CFG_COMP_LZ4, buf, sizeof(buf)), "lz4");
		SH_ASSERT_EQ(cfg_comp_parse("zstd:0"), -EINVAL);
		SH_ASSERT_EQ(cfg_comp_parse("zstd:20"), -EINVAL);
		SH_ASSERT_EQ(cfg_comp_parse("zstd:"), -EINVAL);
		SH_ASSERT_EQ(cfg_comp_parse("zstd:3x"), -EINVAL);
		SH_ASSERT_EQ(cfg_comp_parse("lz4:3"), -EINVAL);
	}
	SH_ASSERT(cfg_name_ok("a.b_c-1"));
	SH_ASSERT(!cfg_name_ok(""));
	SH_ASSERT(!cfg_name_ok("a/b"));
}

/* Drive states and the heal settings: checked, applied, kept by the codecs; a target's state. */
TEST(config_drive_fail_and_heal_settings)
{
	struct cfg *c = cluster_of(4, 64), *d = cfg_new();
	struct cfg_cmd f = { .op = CFG_OP_DRIVE_STATE, .state = CFG_DRIVE_FAILED, .time = 50 };
	struct cfg_cmd st = { .op = CFG_OP_NODE_STATE, .id = 3, .state = CFG_DOWN };
	struct cfg_cmd set = { .op = CFG_OP_SET, .size = 10 };
	char msg[CFG_MSG_MAX];
	struct sh_enc e;
	uint64_t s = SH_NSEC_PER_SEC;

	for (uint64_t n = 1; n <= 4; n++)
		add_drive(c, n);
	SH_ASSERT_EQ(c->rebuild_delay_s, (uint32_t)CFG_REBUILD_DELAY_S);
	SH_ASSERT_EQ(cfg_setting_get(c, "rebuild-share"), CFG_REBUILD_SHARE);
	f.target = c->drives[1].id;
	SH_ASSERT_EQ(cfg_target_state(c, f.target, 100), CFG_TGT_UP);
	SH_ASSERT_OK(cfg_apply(c, &f, msg, sizeof(msg)));
	SH_ASSERT_EQ(cfg_target_state(c, f.target, 100), CFG_TGT_LOST);
	SH_ASSERT_EQ(cfg_apply(c, &f, msg, sizeof(msg)), -EALREADY);
	SH_ASSERT(strstr(msg, "already") != NULL);
	f.target = 999;
	SH_ASSERT_EQ(cfg_check(c, &f, msg, sizeof(msg)), -ENOENT);
	f.target = c->drives[0].id;
	f.state = CFG_DRIVE_ACTIVE;
	SH_ASSERT_EQ(cfg_check(c, &f, msg, sizeof(msg)), -EINVAL);
	/* a node down: its targets are down for the delay, lost after it */
	snprintf(set.name, sizeof(set.name), "rebuild-delay");
	SH_ASSERT_OK(cfg_apply(c, &set, msg, sizeof(msg)));
	SH_ASSERT_EQ(cfg_apply(c, &set, msg, sizeof(msg)), -EALREADY);
	st.time = 100 * s;
	SH_ASSERT_OK(cfg_apply(c, &st, msg, sizeof(msg)));
	SH_ASSERT_EQ(cfg_target_state(c, c->drives[2].id, 105 * s), CFG_TGT_DOWN);
	SH_ASSERT_EQ(cfg_target_state(c, c->drives[2].id, 110 * s), CFG_TGT_LOST);
	SH_ASSERT_EQ(cfg_target_state(c, 12345, 110 * s), CFG_TGT_LOST); /* not there */
	set.size = CFG_REBUILD_DELAY_MAX + 1ull;
	SH_ASSERT_EQ(cfg_check(c, &set, msg, sizeof(msg)), -EINVAL);
	snprintf(set.name, sizeof(set.name), "rebuild-share");
	set.size = 0;
	SH_ASSERT_EQ(cfg_check(c, &set, msg, sizeof(msg)), -EINVAL);
	set.size = 55;
	SH_ASSERT_OK(cfg_apply(c, &set, msg, sizeof(msg)));
	snprintf(set.name, sizeof(set.name), "nonsense");
	SH_ASSERT_EQ(cfg_check(c, &set, msg, sizeof(msg)), -ENOENT);
	/* the codec keeps all of it */
	sh_enc_init(&e);
	cfg_encode(&e, c);
	SH_ASSERT_OK(cfg_decode(e.p, e.len, d));
	sh_enc_fini(&e);
	SH_ASSERT_EQ(d->drives[1].state, CFG_DRIVE_FAILED);
	SH_ASSERT_EQ(d->drives[1].since, 50u);
	SH_ASSERT_EQ(d->rebuild_delay_s, 10u);
	SH_ASSERT_EQ(d->rebuild_share, 55u);
	SH_ASSERT(strstr(cfg_event_at(d, 0)->text, "rebuild-share") != NULL);
	cfg_free(d);
	cfg_free(c);
}

/*
 * A node leaving (every drive of it draining): its metadata replicas are
 * replaced at once, by nodes not leaving; it is refused removal while up
 * with a drive in service; events posted by nodes are kept as said.
 */
TEST(config_node_leaving_and_events)
{
	struct cfg *c = cluster_of(7, 64);
	struct cfg_cmd fs = { .op = CFG_OP_FS_CREATE, .d = 4, .p = 2, .time = 100 };
	struct cfg_cmd rm = { .op = CFG_OP_NODE_REMOVE, .id = 7 };
	struct cfg_cmd ev = { .op = CFG_OP_EVENT, .id = 2, .time = 200 };
	struct cfg_cmd f = { .op = CFG_OP_DRIVE_STATE, .state = CFG_DRIVE_FAILED, .time = 300 };
	uint64_t old, node, now = 1000ull * SH_NSEC_PER_SEC;
	char msg[CFG_MSG_MAX];
	unsigned replaced = 0;
	uint32_t g;

	for (uint64_t n = 1; n <= 7; n++)
		add_drive(c, n);
	add_drive(c, 7); /* node 7 has two drives */
	snprintf(fs.name, sizeof(fs.name), "data");
	SH_ASSERT_MSG(cfg_apply(c, &fs, msg, sizeof(msg)) == 0, "%s", msg);
	/* up, its drives in service: removing it would take fragments away */
	SH_ASSERT_EQ(cfg_check(c, &rm, msg, sizeof(msg)), -EBUSY);
	SH_ASSERT(strstr(msg, "drain") != NULL);
	SH_ASSERT(!cfg_node_leaving(c, 7));
	for (uint32_t i = 0; i < c->ndrives; i++) {
		struct cfg_cmd dr = { .op = CFG_OP_DRIVE_STATE,
				      .state = CFG_DRIVE_DRAINING,
				      .target = c->drives[i].id };

		if (c->drives[i].node != 7)
			continue;
		SH_ASSERT(!cfg_node_leaving(c, 7)); /* one drive draining is not leaving */
		SH_ASSERT_OK(cfg_apply(c, &dr, msg, sizeof(msg)));
	}
	SH_ASSERT(cfg_node_leaving(c, 7));
	SH_ASSERT(!cfg_node_leaving(c, 6));
	/* not down at all, yet replaced at once (after_ns is for nodes down) */
	while (cfg_mgroup_replacement(c, now, 3600 * SH_NSEC_PER_SEC, &g, &old, &node) == 0) {
		struct cfg_cmd r = {
			.op = CFG_OP_MGROUP_REPLACE, .group = g, .id = old, .node2 = node
		};

		SH_ASSERT_EQ(old, 7);
		SH_ASSERT_NE(node, 7);
		SH_ASSERT_MSG(cfg_apply(c, &r, msg, sizeof(msg)) == 0, "%s", msg);
		SH_ASSERT(strstr(cfg_event_at(c, 0)->text, "leaves the cluster") != NULL);
		SH_ASSERT_LT(++replaced, 100u);
	}
	for (size_t i = 0; i < (size_t)c->nbuckets * c->replicas; i++)
		SH_ASSERT_NE(c->buckets[i], 7);
	/* drained (the admin API checks the stripes): now it goes, and its drives with it */
	SH_ASSERT_MSG(cfg_apply(c, &rm, msg, sizeof(msg)) == 0, "%s", msg);
	for (uint32_t i = 0; i < c->ndrives; i++)
		SH_ASSERT_NE(c->drives[i].node, 7);
	/* a node's event, as said */
	SH_ASSERT_EQ(cfg_check(c, &ev, msg, sizeof(msg)), -EINVAL); /* no text */
	snprintf(ev.path, sizeof(ev.path), "rebuild started: 1.0 GiB to re-create");
	SH_ASSERT_OK(cfg_apply(c, &ev, msg, sizeof(msg)));
	SH_ASSERT_STREQ(cfg_event_at(c, 0)->text, "rebuild started: 1.0 GiB to re-create");
	SH_ASSERT_EQ(cfg_event_at(c, 0)->node, 2u);
	ev.id = 99;
	SH_ASSERT_EQ(cfg_check(c, &ev, msg, sizeof(msg)), -ENOENT);
	/* a drive failed with a reason says it */
	f.target = c->drives[0].id;
	snprintf(f.path, sizeof(f.path), "its writes fail with I/O errors");
	SH_ASSERT_OK(cfg_apply(c, &f, msg, sizeof(msg)));
	SH_ASSERT(strstr(cfg_event_at(c, 0)->text, "failed (its writes fail with I/O errors)") !=
		  NULL);
	SH_ASSERT_STREQ(cfg_op_name(CFG_OP_EVENT), "event");
	cfg_free(c);
}

/* The configuration changes' table: numbers as the log holds them, each named. */
TEST(cfg_op_table)
{
	SH_ASSERT_EQ(CFG_OP_CREATE, 1);
	SH_ASSERT_EQ(CFG_OP_MGROUP_REPLACE, 9);
	SH_ASSERT_EQ(CFG_OP_EVENT, 13);
	SH_ASSERT_EQ(CFG_OP_SNAP_CREATE, 14);
	SH_ASSERT_EQ(CFG_OP_SNAP_STATE, 15);
	SH_ASSERT_EQ(CFG_OP_SNAP_DELETE, 16);
	SH_ASSERT_EQ(CFG_OP_SNAP_FORGET, 17);
	SH_ASSERT_EQ(CFG_OP_SNAP_SCHEDULE, 18);
	SH_ASSERT_STREQ(cfg_op_name(CFG_OP_SNAP_SCHEDULE), "snap.schedule");
	SH_ASSERT_STREQ(cfg_op_name(CFG_OP_SNAP_CREATE), "snap.create");
	SH_ASSERT_STREQ(cfg_op_name(CFG_OP_SNAP_FORGET), "snap.forget");
	SH_ASSERT_STREQ(cfg_op_name(CFG_OP_CREATE), "cluster.create");
	SH_ASSERT_STREQ(cfg_op_name(CFG_OP_MAX), "?");
	SH_ASSERT_STREQ(cfg_op_name(0), "?");
	for (unsigned op = 1; op < CFG_OP_MAX; op++)
		SH_ASSERT_MSG(strcmp(cfg_op_name(op), "?") != 0, "op %u has no name", op);
}

/* ---- snapshots ---- */

/* Six nodes with a drive each, and filesystems "data" and "logs". */
static struct cfg *
cluster_with_fs(void)
{
	struct cfg *c = cluster_of(6, 64);
	struct cfg_cmd fs = { .op = CFG_OP_FS_CREATE, .d = 4, .p = 2, .time = 100 };
	char msg[CFG_MSG_MAX];

	for (uint64_t n = 1; n <= 6; n++)
		add_drive(c, n);
	snprintf(fs.name, sizeof(fs.name), "data");
	SH_ASSERT_MSG(cfg_apply(c, &fs, msg, sizeof(msg)) == 0, "%s", msg);
	snprintf(fs.name, sizeof(fs.name), "logs");
	SH_ASSERT_MSG(cfg_apply(c, &fs, msg, sizeof(msg)) == 0, "%s", msg);
	return c;
}

static struct cfg_cmd
snap_cmd(uint8_t op, const char *fs, const char *snap, uint64_t time)
{
	struct cfg_cmd c = { .op = op, .time = time };

	snprintf(c.name, sizeof(c.name), "%s", fs);
	snprintf(c.snap, sizeof(c.snap), "%s", snap);
	if (op == CFG_OP_SNAP_STATE)
		c.state = CFG_SNAP_READY;
	return c;
}

/* Apply: 0, or the error; msg must then say text. The epoch moves only on success. */
static void
snap_expect(struct cfg *c, struct cfg_cmd cmd, int want, const char *text)
{
	char msg[CFG_MSG_MAX];
	uint64_t epoch = c->epoch;
	uint32_t n = c->nsnaps;
	int rc = cfg_apply(c, &cmd, msg, sizeof(msg));

	SH_ASSERT_MSG(rc == want, "%s %s/%s: %d (%s), want %d", cfg_op_name(cmd.op), cmd.name,
		      cmd.snap, rc, msg, want);
	if (want == 0) {
		SH_ASSERT_EQ(c->epoch, epoch + 1);
		return;
	}
	SH_ASSERT_EQ(c->epoch, epoch);
	SH_ASSERT_EQ(c->nsnaps, n);
	SH_ASSERT_MSG(strstr(msg, text) != NULL, "'%s' lacks '%s'", msg, text);
}

TEST(config_snapshot_create)
{
	struct cfg *c = cluster_with_fs();
	const struct cfg_fs *data = cfg_fs_find(c, "data"), *logs = cfg_fs_find(c, "logs");
	const struct cfg_snap *s;

	SH_ASSERT_EQ(data->version, 1u); /* a new filesystem starts at 1 */
	SH_ASSERT_EQ(c->nsnaps, 0u);
	snap_expect(c, snap_cmd(CFG_OP_SNAP_CREATE, "data", "ckpt1", 5000), 0, NULL);
	s = cfg_snap_find(c, data->id, "ckpt1");
	SH_ASSERT_NOT_NULL(s);
	SH_ASSERT_EQ(s->version, 1u); /* the version writes carried until now */
	SH_ASSERT_EQ(s->state, CFG_SNAP_CREATING);
	SH_ASSERT_EQ(s->created, 5000u);
	SH_ASSERT_EQ(s->fs, data->id);
	SH_ASSERT_EQ(data->version, 2u); /* writes from now on carry the next one */
	SH_ASSERT_EQ(logs->version, 1u); /* the other filesystem's stays */
	SH_ASSERT_STREQ(cfg_event_at(c, 0)->text, "snapshot ckpt1 of fs data created (version 1)");
	snap_expect(c, snap_cmd(CFG_OP_SNAP_CREATE, "data", "ckpt2", 6000), 0, NULL);
	SH_ASSERT_EQ(cfg_snap_find(c, data->id, "ckpt2")->version, 2u);
	SH_ASSERT_EQ(data->version, 3u);
	/* names are unique within a filesystem, not across them */
	snap_expect(c, snap_cmd(CFG_OP_SNAP_CREATE, "logs", "ckpt1", 7000), 0, NULL);
	SH_ASSERT_EQ(cfg_snap_find(c, logs->id, "ckpt1")->version, 1u);
	SH_ASSERT_EQ(logs->version, 2u);
	SH_ASSERT_EQ(c->nsnaps, 3u);
	SH_ASSERT_NULL(cfg_snap_find(c, logs->id, "ckpt2"));
	/* what a creation refuses, changing nothing */
	snap_expect(c, snap_cmd(CFG_OP_SNAP_CREATE, "data", "ckpt1", 1), -EEXIST,
		    "already has a snapshot 'ckpt1'");
	snap_expect(c, snap_cmd(CFG_OP_SNAP_CREATE, "data", "a b", 1), -EINVAL,
		    "not a snapshot name");
	snap_expect(c, snap_cmd(CFG_OP_SNAP_CREATE, "data", "", 1), -EINVAL, "not a snapshot name");
	snap_expect(c, snap_cmd(CFG_OP_SNAP_CREATE, "data", "x/y", 1), -EINVAL,
		    "not a snapshot name");
	snap_expect(c, snap_cmd(CFG_OP_SNAP_CREATE, "nope", "ckpt9", 1), -ENOENT,
		    "no filesystem 'nope'");
	SH_ASSERT_EQ(data->version, 3u);
	cfg_free(c);
}

TEST(config_snapshot_table_full)
{
	struct cfg *c = cluster_with_fs();
	const char *fss[] = { "data", "logs" };
	char name[16];

	/*
	 * A filesystem keeps at most CFG_FS_SNAPS_MAX; those being deleted still take room
	 * in the cluster's table until forgotten: twice that per filesystem fills it.
	 */
	for (unsigned f = 0; f < 2; f++) {
		for (unsigned i = 0; i < CFG_FS_SNAPS_MAX; i++) {
			snprintf(name, sizeof(name), "s%u", i);
			snap_expect(c, snap_cmd(CFG_OP_SNAP_CREATE, fss[f], name, i), 0, NULL);
		}
		snap_expect(c, snap_cmd(CFG_OP_SNAP_CREATE, fss[f], "one-more", 1), -ENOSPC,
			    "most snapshots it can keep");
		for (unsigned i = 0; i < CFG_FS_SNAPS_MAX; i++) {
			snprintf(name, sizeof(name), "s%u", i);
			snap_expect(c, snap_cmd(CFG_OP_SNAP_DELETE, fss[f], name, i), 0, NULL);
		}
		for (unsigned i = 0; i < CFG_FS_SNAPS_MAX; i++) {
			snprintf(name, sizeof(name), "t%u", i);
			snap_expect(c, snap_cmd(CFG_OP_SNAP_CREATE, fss[f], name, i), 0, NULL);
		}
	}
	_Static_assert(4 * CFG_FS_SNAPS_MAX == CFG_SNAPS_MAX, "the test fills the table");
	SH_ASSERT_EQ(c->nsnaps, (uint32_t)CFG_SNAPS_MAX);
	snap_expect(c, snap_cmd(CFG_OP_SNAP_DELETE, "data", "t0", 1), 0, NULL);
	snap_expect(c, snap_cmd(CFG_OP_SNAP_CREATE, "data", "one-more", 1), -ENOSPC,
		    "the cluster has the most snapshots");
	/* one forgotten makes room */
	snap_expect(c, snap_cmd(CFG_OP_SNAP_FORGET, "data", "s0", 1), 0, NULL);
	snap_expect(c, snap_cmd(CFG_OP_SNAP_CREATE, "data", "one-more", 1), 0, NULL);
	cfg_free(c);
}

/* creating -> ready -> deleting -> gone, and creating -> deleting; nothing else. */
TEST(config_snapshot_states)
{
	struct cfg *c = cluster_with_fs();
	uint32_t data = cfg_fs_find(c, "data")->id;
	struct cfg_cmd st;

	snap_expect(c, snap_cmd(CFG_OP_SNAP_CREATE, "data", "a", 1), 0, NULL);
	snap_expect(c, snap_cmd(CFG_OP_SNAP_CREATE, "data", "b", 2), 0, NULL);
	/* only ready is a state to move to */
	st = snap_cmd(CFG_OP_SNAP_STATE, "data", "a", 3);
	st.state = CFG_SNAP_DELETING;
	snap_expect(c, st, -EINVAL, "only becomes ready");
	st.state = CFG_SNAP_CREATING;
	snap_expect(c, st, -EINVAL, "only becomes ready");
	snap_expect(c, snap_cmd(CFG_OP_SNAP_STATE, "data", "a", 3), 0, NULL);
	SH_ASSERT_EQ(cfg_snap_find(c, data, "a")->state, CFG_SNAP_READY);
	SH_ASSERT_STREQ(cfg_event_at(c, 0)->text, "snapshot a of fs data is ready (version 1)");
	snap_expect(c, snap_cmd(CFG_OP_SNAP_STATE, "data", "a", 4), -EALREADY, "ready already");
	snap_expect(c, snap_cmd(CFG_OP_SNAP_STATE, "data", "zz", 4), -ENOENT,
		    "has no snapshot 'zz'");
	snap_expect(c, snap_cmd(CFG_OP_SNAP_STATE, "nope", "a", 4), -ENOENT, "no filesystem");
	/* forgotten only once deleting */
	snap_expect(c, snap_cmd(CFG_OP_SNAP_FORGET, "data", "a", 5), -EINVAL, "delete it first");
	snap_expect(c, snap_cmd(CFG_OP_SNAP_FORGET, "data", "b", 5), -EINVAL, "creating");
	/* a ready one deleted */
	snap_expect(c, snap_cmd(CFG_OP_SNAP_DELETE, "data", "a", 6), 0, NULL);
	SH_ASSERT_EQ(cfg_snap_find(c, data, "a")->state, CFG_SNAP_DELETING);
	SH_ASSERT(strstr(cfg_event_at(c, 0)->text, "snapshot a of fs data deleted (version 1)") !=
		  NULL);
	snap_expect(c, snap_cmd(CFG_OP_SNAP_DELETE, "data", "a", 7), -EALREADY,
		    "being deleted already");
	snap_expect(c, snap_cmd(CFG_OP_SNAP_STATE, "data", "a", 7), -EINVAL, "being deleted");
	snap_expect(c, snap_cmd(CFG_OP_SNAP_DELETE, "data", "zz", 7), -ENOENT, "no snapshot");
	/* a creating one deleted: it never becomes ready */
	snap_expect(c, snap_cmd(CFG_OP_SNAP_DELETE, "data", "b", 8), 0, NULL);
	SH_ASSERT_EQ(cfg_snap_find(c, data, "b")->state, CFG_SNAP_DELETING);
	snap_expect(c, snap_cmd(CFG_OP_SNAP_STATE, "data", "b", 9), -EINVAL, "being deleted");
	/* gone once its space is freed; the name may be used again */
	snap_expect(c, snap_cmd(CFG_OP_SNAP_FORGET, "data", "a", 10), 0, NULL);
	SH_ASSERT_NULL(cfg_snap_find(c, data, "a"));
	SH_ASSERT_EQ(c->nsnaps, 1u);
	SH_ASSERT_STREQ(c->snaps[0].name, "b");
	SH_ASSERT(strstr(cfg_event_at(c, 0)->text, "snapshot a of fs data is gone") != NULL);
	snap_expect(c, snap_cmd(CFG_OP_SNAP_FORGET, "data", "a", 11), -ENOENT, "no snapshot");
	snap_expect(c, snap_cmd(CFG_OP_SNAP_CREATE, "data", "a", 12), 0, NULL);
	SH_ASSERT_EQ(cfg_snap_find(c, data, "a")->version, 3u);
	SH_ASSERT_EQ(cfg_snap_find(c, data, "a")->state, CFG_SNAP_CREATING);
	SH_ASSERT_STREQ(cfg_snap_state_name(CFG_SNAP_CREATING), "creating");
	SH_ASSERT_STREQ(cfg_snap_state_name(CFG_SNAP_DELETING), "deleting");
	SH_ASSERT_STREQ(cfg_snap_state_name(7), "?");
	cfg_free(c);
}

/* The versions a filesystem's metadata keeps: its snapshots' but those being deleted. */
TEST(config_snapshot_keep)
{
	struct cfg *c = cluster_with_fs();
	uint32_t data = cfg_fs_find(c, "data")->id, logs = cfg_fs_find(c, "logs")->id;
	uint64_t v[8] = { 0 };
	const char *names[] = { "a", "b", "c", "d", "e" };

	SH_ASSERT_EQ(cfg_fs_keep(c, data, v, 8), 0u);
	for (unsigned i = 0; i < 5; i++) {
		snap_expect(c, snap_cmd(CFG_OP_SNAP_CREATE, "data", names[i], i), 0, NULL);
		if (i == 1)
			snap_expect(c, snap_cmd(CFG_OP_SNAP_CREATE, "logs", "l", i), 0, NULL);
	}
	/* a: ready, b: deleting, c: deleted and forgotten, d: creating, e: ready */
	snap_expect(c, snap_cmd(CFG_OP_SNAP_STATE, "data", "a", 10), 0, NULL);
	snap_expect(c, snap_cmd(CFG_OP_SNAP_DELETE, "data", "b", 10), 0, NULL);
	snap_expect(c, snap_cmd(CFG_OP_SNAP_DELETE, "data", "c", 10), 0, NULL);
	snap_expect(c, snap_cmd(CFG_OP_SNAP_FORGET, "data", "c", 10), 0, NULL);
	snap_expect(c, snap_cmd(CFG_OP_SNAP_STATE, "data", "e", 10), 0, NULL);
	/* kept: a, d and e (b is being deleted: its groups settle without it) */
	SH_ASSERT_EQ(cfg_fs_keep(c, data, v, 8), 3u);
	SH_ASSERT_EQ(v[0], 1u);
	SH_ASSERT_EQ(v[1], 4u);
	SH_ASSERT_EQ(v[2], 5u);
	SH_ASSERT_EQ(cfg_fs_keep(c, logs, v, 8), 1u);
	SH_ASSERT_EQ(v[0], 1u);
	SH_ASSERT_EQ(cfg_fs_keep(c, 99, v, 8), 0u);
	/* at most max written; the count says how many there are */
	memset(v, 0, sizeof(v));
	SH_ASSERT_EQ(cfg_fs_keep(c, data, v, 2), 3u);
	SH_ASSERT_EQ(v[0], 1u);
	SH_ASSERT_EQ(v[1], 4u);
	SH_ASSERT_EQ(v[2], 0u);
	SH_ASSERT_EQ(cfg_fs_keep(c, data, NULL, 0), 3u);
	/* a table in any order, with a version twice (a decoded one may be): sorted, once each */
	SH_ASSERT_STREQ(c->snaps[0].name, "a");
	SH_ASSERT_STREQ(c->snaps[3].name, "d");
	c->snaps[0].version = 9;
	c->snaps[3].version = 9;
	SH_ASSERT_EQ(cfg_fs_keep(c, data, v, 8), 2u);
	SH_ASSERT_EQ(v[0], 5u);
	SH_ASSERT_EQ(v[1], 9u);
	cfg_free(c);
}

TEST(config_fs_delete_drops_its_snapshots)
{
	struct cfg *c = cluster_with_fs();
	struct cfg_cmd del = { .op = CFG_OP_FS_DELETE, .time = 50 };
	uint32_t logs = cfg_fs_find(c, "logs")->id;
	char msg[CFG_MSG_MAX];

	snap_expect(c, snap_cmd(CFG_OP_SNAP_CREATE, "data", "a", 1), 0, NULL);
	snap_expect(c, snap_cmd(CFG_OP_SNAP_CREATE, "logs", "a", 1), 0, NULL);
	snap_expect(c, snap_cmd(CFG_OP_SNAP_CREATE, "data", "b", 1), 0, NULL);
	snap_expect(c, snap_cmd(CFG_OP_SNAP_DELETE, "data", "b", 1), 0, NULL);
	snprintf(del.name, sizeof(del.name), "data");
	SH_ASSERT_OK(cfg_apply(c, &del, msg, sizeof(msg)));
	SH_ASSERT_EQ(c->nsnaps, 1u);
	SH_ASSERT_EQ(c->snaps[0].fs, logs);
	SH_ASSERT_NOT_NULL(cfg_snap_find(c, logs, "a"));
	SH_ASSERT_STREQ(cfg_event_at(c, 0)->text, "filesystem data deleted, with its 2 snapshots");
	/* a filesystem of the same name is another filesystem: no snapshots, version 1 */
	{
		struct cfg_cmd fs = { .op = CFG_OP_FS_CREATE, .d = 4, .p = 2, .time = 60 };

		snprintf(fs.name, sizeof(fs.name), "data");
		SH_ASSERT_OK(cfg_apply(c, &fs, msg, sizeof(msg)));
		SH_ASSERT_EQ(cfg_fs_find(c, "data")->version, 1u);
		SH_ASSERT_EQ(cfg_fs_keep(c, cfg_fs_find(c, "data")->id, NULL, 0), 0u);
	}
	snprintf(del.name, sizeof(del.name), "logs");
	SH_ASSERT_OK(cfg_apply(c, &del, msg, sizeof(msg)));
	SH_ASSERT_EQ(c->nsnaps, 0u);
	SH_ASSERT_STREQ(cfg_event_at(c, 0)->text, "filesystem logs deleted, with its 1 snapshot");
	cfg_free(c);
}

TEST(config_snapshot_codecs)
{
	struct cfg *c = cluster_with_fs(), *d = cfg_new();
	struct cfg_cmd cmd = snap_cmd(CFG_OP_SNAP_CREATE, "data", "ckpt-1.x", 77), back;
	struct sh_enc e, f;

	snap_expect(c, cmd, 0, NULL);
	snap_expect(c, snap_cmd(CFG_OP_SNAP_CREATE, "logs", "l", 78), 0, NULL);
	snap_expect(c, snap_cmd(CFG_OP_SNAP_CREATE, "data", "two", 79), 0, NULL);
	snap_expect(c, snap_cmd(CFG_OP_SNAP_STATE, "data", "ckpt-1.x", 80), 0, NULL);
	snap_expect(c, snap_cmd(CFG_OP_SNAP_DELETE, "data", "two", 81), 0, NULL);
	sh_enc_init(&e);
	sh_enc_init(&f);
	cfg_encode(&e, c);
	SH_ASSERT_EQ(memcmp(e.p, "CFG9", 4), 0);
	SH_ASSERT_OK(cfg_decode(e.p, e.len, d));
	cfg_encode(&f, d);
	SH_ASSERT_EQ(e.len, f.len);
	SH_ASSERT_MEMEQ(e.p, f.p, e.len);
	SH_ASSERT_EQ(d->nsnaps, 3u);
	SH_ASSERT_MEMEQ(d->snaps, c->snaps, 3 * sizeof(c->snaps[0]));
	SH_ASSERT_EQ(cfg_fs_find(d, "data")->version, 3u);
	SH_ASSERT_EQ(cfg_fs_find(d, "logs")->version, 2u);
	SH_ASSERT_EQ(cfg_snap_find(d, cfg_fs_find(d, "data")->id, "ckpt-1.x")->created, 77u);
	SH_ASSERT_EQ(cfg_snap_find(d, cfg_fs_find(d, "data")->id, "two")->state, CFG_SNAP_DELETING);
	/* every truncation is refused */
	for (size_t n = 0; n < e.len; n += 61)
		SH_ASSERT_EQ(cfg_decode(e.p, n, d), -EBADMSG);
	SH_ASSERT_EQ(cfg_decode(e.p, e.len - 1, d), -EBADMSG);
	/* a snapshot in no state there is, or a filesystem at version 0: refused */
	{
		uint8_t *b = sh_malloc(e.len);
		size_t st = e.len - CFG7_TAIL(c) - 4 - (size_t)c->nfs * 8 -
			    9; /* before schedules and keys */

		memcpy(b, e.p, e.len);
		b[st] = 3; /* the last snapshot's state */
		SH_ASSERT_EQ(cfg_decode(b, e.len, d), -EBADMSG);
		b[st] = CFG_SNAP_READY;
		SH_ASSERT_OK(cfg_decode(b, e.len, d));
		sh_free(b);
	}
	sh_enc_fini(&e);
	sh_enc_fini(&f);

	/* a command carries its snapshot */
	sh_enc_init(&e);
	cfg_cmd_encode(&e, &cmd);
	SH_ASSERT_OK(cfg_cmd_decode(e.p, e.len, &back));
	SH_ASSERT_EQ(back.op, CFG_OP_SNAP_CREATE);
	SH_ASSERT_STREQ(back.name, "data");
	SH_ASSERT_STREQ(back.snap, "ckpt-1.x");
	SH_ASSERT_EQ(back.time, 77u);
	SH_ASSERT_EQ(cfg_cmd_decode(e.p, e.len - 1, &back), -EBADMSG);
	/* one written before snapshots (no snap, who asked, key at its end) decodes with none */
	SH_ASSERT_OK(cfg_cmd_decode(
	    e.p, e.len - CMD7_TAIL - CFG_KEY_LEN - 2 - strlen(cmd.snap) - 2 - strlen(cmd.by),
	    &back));
	SH_ASSERT_STREQ(back.snap, "");
	SH_ASSERT_STREQ(back.name, "data");
	sh_enc_fini(&e);
	cfg_free(d);
	cfg_free(c);
}

/* fs.restore: pausing, reverting, done; refused while under way, and what it refuses. */
TEST(config_restore_phases)
{
	struct cfg *c = cluster_with_fs(), *d = cfg_new();
	const struct cfg_fs *data = cfg_fs_find(c, "data");
	struct cfg_cmd step = snap_cmd(CFG_OP_FS_RESTORE_STEP, "data", "", 10);
	struct sh_enc e;

	snap_expect(c, snap_cmd(CFG_OP_SNAP_CREATE, "data", "a", 1), 0, NULL);
	snap_expect(c, snap_cmd(CFG_OP_SNAP_CREATE, "data", "b", 2), 0, NULL);
	snap_expect(c, snap_cmd(CFG_OP_FS_RESTORE, "data", "a", 3), -EINVAL,
		    "only a ready one can be restored");
	snap_expect(c, snap_cmd(CFG_OP_SNAP_STATE, "data", "a", 3), 0, NULL);
	snap_expect(c, snap_cmd(CFG_OP_FS_RESTORE, "data", "zz", 4), -ENOENT, "no snapshot 'zz'");
	snap_expect(c, snap_cmd(CFG_OP_FS_RESTORE, "nope", "a", 4), -ENOENT, "no filesystem");
	step.size = 1;
	step.state = CFG_RESTORE_REVERTING;
	snap_expect(c, step, -EALREADY, "not under restore 1");
	snap_expect(c, snap_cmd(CFG_OP_FS_RESTORE, "data", "a", 5), 0, NULL);
	SH_ASSERT_EQ(data->restore_epoch, 1u);
	SH_ASSERT_EQ(data->restore_phase, CFG_RESTORE_PAUSING);
	SH_ASSERT_EQ(data->restore_ver, 1u);
	SH_ASSERT(strstr(cfg_event_at(c, 0)->text, "goes back to snapshot a") != NULL);
	/* under way: no second one, the snapshot stays, no new snapshot */
	snap_expect(c, snap_cmd(CFG_OP_FS_RESTORE, "data", "a", 6), -EBUSY, "being restored");
	snap_expect(c, snap_cmd(CFG_OP_SNAP_DELETE, "data", "a", 6), -EBUSY, "being restored");
	snap_expect(c, snap_cmd(CFG_OP_SNAP_CREATE, "data", "c", 6), -EBUSY, "being restored");
	/* phases in order only, of this restore only */
	step.state = CFG_RESTORE_NONE;
	snap_expect(c, step, -EINVAL, "cannot go to 0");
	step.size = 2;
	step.state = CFG_RESTORE_REVERTING;
	snap_expect(c, step, -EALREADY, "not under restore 2");
	step.size = 1;
	snap_expect(c, step, 0, NULL);
	SH_ASSERT_EQ(data->restore_phase, CFG_RESTORE_REVERTING);
	snap_expect(c, step, -EALREADY, "phase 2");
	/* a configuration in the middle of one round-trips; a phase past reverting is refused */
	sh_enc_init(&e);
	cfg_encode(&e, c);
	SH_ASSERT_OK(cfg_decode(e.p, e.len, d));
	SH_ASSERT_EQ(cfg_fs_find(d, "data")->restore_phase, CFG_RESTORE_REVERTING);
	SH_ASSERT_EQ(cfg_fs_find(d, "data")->restore_ver, 1u);
	SH_ASSERT_EQ(cfg_fs_find(d, "data")->restore_epoch, 1u);
	{
		size_t at = e.len - CFG8_TAIL(c); /* data's: the first filesystem */

		SH_ASSERT_EQ(e.p[at + 4], CFG_RESTORE_REVERTING);
		e.p[at + 4] = 3;
		SH_ASSERT_EQ(cfg_decode(e.p, e.len, d), -EBADMSG);
		e.p[at + 4] = CFG_RESTORE_NONE; /* none, with a version */
		SH_ASSERT_EQ(cfg_decode(e.p, e.len, d), -EBADMSG);
	}
	sh_enc_fini(&e);
	step.state = CFG_RESTORE_NONE;
	snap_expect(c, step, 0, NULL);
	SH_ASSERT_EQ(data->restore_phase, CFG_RESTORE_NONE);
	SH_ASSERT_EQ(data->restore_ver, 0u);
	SH_ASSERT_EQ(data->restore_epoch, 1u);
	SH_ASSERT(strstr(cfg_event_at(c, 0)->text, "back at version 1 (restore 1)") != NULL);
	/* done: snapshots are taken and deleted again, and another restore begins */
	snap_expect(c, snap_cmd(CFG_OP_SNAP_DELETE, "data", "b", 11), 0, NULL);
	snap_expect(c, snap_cmd(CFG_OP_FS_RESTORE, "data", "a", 12), 0, NULL);
	SH_ASSERT_EQ(data->restore_epoch, 2u);
	cfg_free(d);
	cfg_free(c);
}

/* A configuration written before snapshots ("CFG3"): every filesystem at version 1, none kept. */
TEST(config_decodes_before_snapshots)
{
	struct cfg *c = cluster_with_fs(), *d = cfg_new();
	struct sh_enc e, f;
	size_t tail;

	/*
	 * "CFG4" is "CFG3" and then the versions (u64 each) and the count of snapshots;
	 * "CFG5" is "CFG4" and then the schedules (u32, u32 each); "CFG6" then the keys (a
	 * count, 0 here)
	 */
	SH_ASSERT_EQ(c->nsnaps, 0u);
	sh_enc_init(&e);
	cfg_encode(&e, c);
	tail = (size_t)c->nfs * 8 + 4 + (size_t)c->nfs * 8 + 4 + CFG7_TAIL(c);
	e.p[3] = '3';
	SH_ASSERT_OK(cfg_decode(e.p, e.len - tail, d));
	SH_ASSERT_EQ(d->nfs, 2u);
	SH_ASSERT_EQ(cfg_fs_find(d, "data")->version, 1u);
	SH_ASSERT_EQ(cfg_fs_find(d, "logs")->version, 1u);
	SH_ASSERT_EQ(d->nsnaps, 0u);
	SH_ASSERT_EQ(d->rebuild_share, c->rebuild_share);
	/* "CFG3" with the new tail, or "CFG4" and "CFG5" without it: refused */
	SH_ASSERT_EQ(cfg_decode(e.p, e.len, d), -EBADMSG);
	e.p[3] = '4';
	SH_ASSERT_EQ(cfg_decode(e.p, e.len - tail, d), -EBADMSG);
	e.p[3] = '5';
	SH_ASSERT_EQ(cfg_decode(e.p, e.len - tail, d), -EBADMSG);
	e.p[3] = '6';
	SH_ASSERT_EQ(cfg_decode(e.p, e.len - tail, d), -EBADMSG);
	/* and it goes on from there: the first snapshot takes version 1 */
	e.p[3] = '3';
	SH_ASSERT_OK(cfg_decode(e.p, e.len - tail, d));
	snap_expect(d, snap_cmd(CFG_OP_SNAP_CREATE, "data", "first", 1), 0, NULL);
	SH_ASSERT_EQ(cfg_snap_find(d, cfg_fs_find(d, "data")->id, "first")->version, 1u);
	SH_ASSERT_EQ(cfg_fs_find(d, "data")->version, 2u);
	sh_enc_init(&f);
	cfg_encode(&f, d);
	SH_ASSERT_EQ(memcmp(f.p, "CFG9", 4), 0); /* written in the new form */
	sh_enc_fini(&f);
	sh_enc_fini(&e);
	cfg_free(d);
	cfg_free(c);
}

/* ---- snapshot schedules ---- */

static struct cfg_cmd
sched_cmd(const char *fs, uint64_t every, uint64_t keep, uint64_t time)
{
	struct cfg_cmd c = {
		.op = CFG_OP_SNAP_SCHEDULE, .size = every, .quota = keep, .time = time
	};

	snprintf(c.name, sizeof(c.name), "%s", fs);
	return c;
}

/* Apply: 0, or the error; msg must then say text, and nothing changed. */
static void
sched_expect(struct cfg *c, struct cfg_cmd cmd, int want, const char *text)
{
	char msg[CFG_MSG_MAX];
	uint64_t epoch = c->epoch;
	const struct cfg_fs *f = cfg_fs_find(c, cmd.name);
	uint32_t every = f ? f->snap_every_s : 0, keep = f ? f->snap_keep : 0;
	int rc = cfg_apply(c, &cmd, msg, sizeof(msg));

	SH_ASSERT_MSG(rc == want, "snap.schedule %s every %llu keep %llu: %d (%s), want %d",
		      cmd.name, (unsigned long long)cmd.size, (unsigned long long)cmd.quota, rc,
		      msg, want);
	if (want == 0) {
		SH_ASSERT_EQ(c->epoch, epoch + 1);
		return;
	}
	SH_ASSERT_EQ(c->epoch, epoch);
	if (f != NULL) {
		SH_ASSERT_EQ(f->snap_every_s, every);
		SH_ASSERT_EQ(f->snap_keep, keep);
	}
	SH_ASSERT_MSG(strstr(msg, text) != NULL, "'%s' lacks '%s'", msg, text);
}

TEST(config_snapshot_schedule)
{
	struct cfg *c = cluster_with_fs();
	const struct cfg_fs *data = cfg_fs_find(c, "data"), *logs = cfg_fs_find(c, "logs");
	struct cfg_cmd del = { .op = CFG_OP_FS_DELETE, .time = 50 };
	struct cfg_cmd fs = { .op = CFG_OP_FS_CREATE, .d = 4, .p = 2, .time = 60 };
	char msg[CFG_MSG_MAX];

	SH_ASSERT_EQ(data->snap_every_s, 0u); /* a new filesystem has none */
	SH_ASSERT_EQ(data->snap_keep, 0u);
	/* set */
	sched_expect(c, sched_cmd("data", 900, 96, 1), 0, NULL);
	SH_ASSERT_EQ(data->snap_every_s, 900u);
	SH_ASSERT_EQ(data->snap_keep, 96u);
	SH_ASSERT_EQ(logs->snap_every_s, 0u);
	SH_ASSERT_STREQ(cfg_event_at(c, 0)->text,
			"filesystem data: a snapshot every 15m, the last 96 kept");
	sched_expect(c, sched_cmd("data", 900, 96, 2), -EALREADY,
		     "already takes a snapshot every 15m, the last 96 kept");
	/* changed: the interval, or how many are kept */
	sched_expect(c, sched_cmd("data", 2 * 3600, 96, 3), 0, NULL);
	SH_ASSERT_STREQ(cfg_event_at(c, 0)->text,
			"filesystem data: a snapshot every 2h, the last 96 kept");
	sched_expect(c, sched_cmd("data", 2 * 3600, 12, 4), 0, NULL);
	SH_ASSERT_EQ(data->snap_keep, 12u);
	sched_expect(c, sched_cmd("logs", 1, 1, 5), 0, NULL); /* a second: for tests */
	SH_ASSERT_STREQ(cfg_event_at(c, 0)->text,
			"filesystem logs: a snapshot every 1s, the last 1 kept");
	sched_expect(c, sched_cmd("logs", CFG_SNAP_EVERY_MAX, CFG_FS_SNAPS_MAX, 6), 0, NULL);
	SH_ASSERT_STREQ(cfg_event_at(c, 0)->text,
			"filesystem logs: a snapshot every 30d, the last 256 kept");
	/* bad values, and no such filesystem: refused, changing nothing */
	sched_expect(c, sched_cmd("data", CFG_SNAP_EVERY_MAX + 1, 5, 7), -EINVAL,
		     "every 1 s to 30 days (2592000 s), not 2592001 s");
	sched_expect(c, sched_cmd("data", 60, 0, 7), -EINVAL, "keeps the last 1 to 256");
	sched_expect(c, sched_cmd("data", 60, CFG_FS_SNAPS_MAX + 1, 7), -EINVAL, "not 257");
	sched_expect(c, sched_cmd("nope", 60, 5, 7), -ENOENT, "no filesystem 'nope'");
	sched_expect(c, sched_cmd("nope", 0, 0, 7), -ENOENT, "no filesystem 'nope'");
	/* off: keep is ignored and forgotten */
	sched_expect(c, sched_cmd("data", 0, 7777, 8), 0, NULL);
	SH_ASSERT_EQ(data->snap_every_s, 0u);
	SH_ASSERT_EQ(data->snap_keep, 0u);
	SH_ASSERT_STREQ(cfg_event_at(c, 0)->text, "filesystem data: no scheduled snapshots");
	sched_expect(c, sched_cmd("data", 0, 0, 9), -EALREADY, "has no scheduled snapshots");
	/* "schedule" is the schedule's name in the admin API: no snapshot takes it */
	snap_expect(c, snap_cmd(CFG_OP_SNAP_CREATE, "data", "schedule", 10), -EINVAL,
		    "'schedule' is not a snapshot name");
	snap_expect(c, snap_cmd(CFG_OP_SNAP_CREATE, "data", "schedule2", 10), 0, NULL);
	/* the schedule goes with its filesystem: one of the same name starts without */
	snprintf(del.name, sizeof(del.name), "logs");
	SH_ASSERT_OK(cfg_apply(c, &del, msg, sizeof(msg)));
	snprintf(fs.name, sizeof(fs.name), "logs");
	SH_ASSERT_OK(cfg_apply(c, &fs, msg, sizeof(msg)));
	SH_ASSERT_EQ(cfg_fs_find(c, "logs")->snap_every_s, 0u);
	SH_ASSERT_EQ(cfg_fs_find(c, "logs")->snap_keep, 0u);
	cfg_free(c);
}

TEST(config_durations)
{
	char b[32];

	SH_ASSERT_STREQ(cfg_duration_str(0, b, sizeof(b)), "0s");
	SH_ASSERT_STREQ(cfg_duration_str(1, b, sizeof(b)), "1s");
	SH_ASSERT_STREQ(cfg_duration_str(90, b, sizeof(b)), "90s");
	SH_ASSERT_STREQ(cfg_duration_str(900, b, sizeof(b)), "15m");
	SH_ASSERT_STREQ(cfg_duration_str(5400, b, sizeof(b)), "90m");
	SH_ASSERT_STREQ(cfg_duration_str(7200, b, sizeof(b)), "2h");
	SH_ASSERT_STREQ(cfg_duration_str(86400, b, sizeof(b)), "1d");
	SH_ASSERT_EQ(cfg_duration_parse("0"), 0);
	SH_ASSERT_EQ(cfg_duration_parse("45"), 45);
	SH_ASSERT_EQ(cfg_duration_parse("2s"), 2);
	SH_ASSERT_EQ(cfg_duration_parse("15m"), 900);
	SH_ASSERT_EQ(cfg_duration_parse("6h"), 21600);
	SH_ASSERT_EQ(cfg_duration_parse("30d"), 2592000);
	SH_ASSERT_EQ(cfg_duration_parse(""), -EINVAL);
	SH_ASSERT_EQ(cfg_duration_parse("m"), -EINVAL);
	SH_ASSERT_EQ(cfg_duration_parse("15x"), -EINVAL);
	SH_ASSERT_EQ(cfg_duration_parse("15mm"), -EINVAL);
	SH_ASSERT_EQ(cfg_duration_parse("-5m"), -EINVAL);
	SH_ASSERT_EQ(cfg_duration_parse("1.5h"), -EINVAL);
	SH_ASSERT_EQ(cfg_duration_parse("99999999999999999999d"), -EINVAL);
}

TEST(config_schedule_codecs)
{
	struct cfg *c = cluster_with_fs(), *d = cfg_new();
	struct cfg_cmd cmd = sched_cmd("data", 900, 96, 42), back;
	struct sh_enc e, f;
	uint8_t *b;

	sched_expect(c, cmd, 0, NULL);
	snap_expect(c, snap_cmd(CFG_OP_SNAP_CREATE, "logs", "l", 43), 0, NULL);
	sh_enc_init(&e);
	sh_enc_init(&f);
	cfg_encode(&e, c);
	SH_ASSERT_EQ(memcmp(e.p, "CFG9", 4), 0);
	SH_ASSERT_OK(cfg_decode(e.p, e.len, d));
	SH_ASSERT_EQ(cfg_fs_find(d, "data")->snap_every_s, 900u);
	SH_ASSERT_EQ(cfg_fs_find(d, "data")->snap_keep, 96u);
	SH_ASSERT_EQ(cfg_fs_find(d, "logs")->snap_every_s, 0u);
	SH_ASSERT_EQ(cfg_fs_find(d, "logs")->snap_keep, 0u);
	SH_ASSERT_EQ(d->nsnaps, 1u);
	cfg_encode(&f, d);
	SH_ASSERT_EQ(e.len, f.len);
	SH_ASSERT_MEMEQ(e.p, f.p, e.len);
	for (size_t n = 0; n < e.len; n += 37)
		SH_ASSERT_EQ(cfg_decode(e.p, n, d), -EBADMSG);
	SH_ASSERT_EQ(cfg_decode(e.p, e.len - 1, d), -EBADMSG);
	/* schedules out of range: refused (data's: the second-to-last pair of u32s, then the keys'
	 * count) */
	b = sh_malloc(e.len);
	memcpy(b, e.p, e.len);
	b[e.len - CFG7_TAIL(c) - 20] = 0; /* every 0 with keep 96 */
	b[e.len - CFG7_TAIL(c) - 19] = 0;
	SH_ASSERT_EQ(cfg_decode(b, e.len, d), -EBADMSG);
	memcpy(b, e.p, e.len);
	memset(b + e.len - CFG7_TAIL(c) - 16, 0, 4); /* every 900 with keep 0 */
	SH_ASSERT_EQ(cfg_decode(b, e.len, d), -EBADMSG);
	memcpy(b, e.p, e.len);
	b[e.len - CFG7_TAIL(c) - 15] = 1; /* keep 96 + 256 */
	SH_ASSERT_EQ(cfg_decode(b, e.len, d), -EBADMSG);
	memcpy(b, e.p, e.len);
	b[e.len - CFG7_TAIL(c) - 18] = 0xff; /* every past 30 days */
	SH_ASSERT_EQ(cfg_decode(b, e.len, d), -EBADMSG);
	memcpy(b, e.p, e.len);
	SH_ASSERT_OK(cfg_decode(b, e.len, d));
	sh_free(b);
	/* a "CFG4" configuration (no schedules at its end): every filesystem without one */
	e.p[3] = '4';
	SH_ASSERT_OK(cfg_decode(e.p, e.len - CFG7_TAIL(c) - (size_t)c->nfs * 8 - 4, d));
	SH_ASSERT_EQ(d->nfs, 2u);
	SH_ASSERT_EQ(cfg_fs_find(d, "data")->snap_every_s, 0u);
	SH_ASSERT_EQ(cfg_fs_find(d, "data")->snap_keep, 0u);
	SH_ASSERT_EQ(cfg_fs_find(d, "logs")->version, 2u);
	SH_ASSERT_EQ(d->nsnaps, 1u);
	SH_ASSERT_EQ(cfg_decode(e.p, e.len, d), -EBADMSG); /* "CFG4" with the schedules */
	SH_ASSERT_OK(cfg_decode(e.p, e.len - CFG7_TAIL(c) - (size_t)c->nfs * 8 - 4, d));
	sched_expect(d, sched_cmd("logs", 60, 3, 44), 0, NULL);
	sh_enc_fini(&f);
	sh_enc_init(&f);
	cfg_encode(&f, d);
	SH_ASSERT_EQ(memcmp(f.p, "CFG9", 4), 0);
	sh_enc_fini(&f);
	sh_enc_fini(&e);
	/* the command carries every and keep */
	sh_enc_init(&e);
	cfg_cmd_encode(&e, &cmd);
	SH_ASSERT_OK(cfg_cmd_decode(e.p, e.len, &back));
	SH_ASSERT_EQ(back.op, CFG_OP_SNAP_SCHEDULE);
	SH_ASSERT_STREQ(back.name, "data");
	SH_ASSERT_EQ(back.size, 900u);
	SH_ASSERT_EQ(back.quota, 96u);
	sh_enc_fini(&e);
	cfg_free(d);
	cfg_free(c);
}

/* A node's data interfaces: labelled, added, removed, and listed per worker. */
TEST(config_node_data_interfaces)
{
	struct cfg *c = cluster_of(3, 64);
	struct cfg_cmd x = { .op = CFG_OP_NET_ADD, .id = 2 };
	const struct cfg_node *n = cfg_node_find(c, 2);
	char msg[CFG_MSG_MAX], list[CFG_ADDRS_MAX];
	uint64_t epoch;

	SH_ASSERT_GT(cfg_node_data(n, 0, list, sizeof(list)), 0);
	SH_ASSERT_STREQ(list, n->data); /* no label, nothing added: its data address */
	/* its own data address takes a label; a second interface joins it */
	snprintf(x.addr, sizeof(x.addr), "%s", n->data);
	snprintf(x.label, sizeof(x.label), "sw1");
	SH_ASSERT_MSG(cfg_apply(c, &x, msg, sizeof(msg)) == 0, "%s", msg);
	SH_ASSERT_EQ(cfg_apply(c, &x, msg, sizeof(msg)), -EEXIST);
	SH_ASSERT(strstr(msg, "already has") != NULL);
	snprintf(x.addr, sizeof(x.addr), "10.9.0.2:7100");
	snprintf(x.label, sizeof(x.label), "sw2");
	SH_ASSERT_MSG(cfg_apply(c, &x, msg, sizeof(msg)) == 0, "%s", msg);
	n = cfg_node_find(c, 2);
	SH_ASSERT_GT(cfg_node_data(n, 3, list, sizeof(list)), 0);
	SH_ASSERT_STREQ(list, "10.0.0.2:7103/sw1,10.9.0.2:7103/sw2"); /* ports + worker 3 */
	SH_ASSERT_EQ(cfg_node_data(n, 0, list, 8), -ENOSPC);
	/* another node may not take the address */
	x.id = 3;
	SH_ASSERT_EQ(cfg_apply(c, &x, msg, sizeof(msg)), -EEXIST);
	/* removed: gone from the list; one that is not there, or the data address, refused */
	x = (struct cfg_cmd){ .op = CFG_OP_NET_REMOVE, .id = 2 };
	snprintf(x.addr, sizeof(x.addr), "10.9.0.2:7100");
	SH_ASSERT_MSG(cfg_apply(c, &x, msg, sizeof(msg)) == 0, "%s", msg);
	epoch = c->epoch;
	SH_ASSERT_EQ(cfg_apply(c, &x, msg, sizeof(msg)), -ENOENT);
	SH_ASSERT_EQ(c->epoch, epoch);
	x.id = 9;
	SH_ASSERT_EQ(cfg_apply(c, &x, msg, sizeof(msg)), -ENOENT);
	n = cfg_node_find(c, 2);
	SH_ASSERT_EQ(n->nnets, 1);
	SH_ASSERT(strstr(cfg_event_at(c, 0)->text, "removed") != NULL);
	/* the data-down state: marked, and not an unknown state */
	x = (struct cfg_cmd){ .op = CFG_OP_NODE_STATE, .id = 2, .state = CFG_DATA_DOWN };
	SH_ASSERT_MSG(cfg_apply(c, &x, msg, sizeof(msg)) == 0, "%s", msg);
	SH_ASSERT(cfg_node_down(cfg_node_find(c, 2)));
	SH_ASSERT(strstr(cfg_event_at(c, 0)->text, "data network down") != NULL);
	x.state = 4;
	SH_ASSERT_EQ(cfg_apply(c, &x, msg, sizeof(msg)), -EINVAL);
	cfg_free(c);
}

/*
 * The audit trail (docs/security.md): a change says who asked for it in
 * every event it records; the cluster's own changes and posted events
 * say nothing more; a command encoded before the field decodes without it.
 */
TEST(config_events_say_who_asked)
{
	struct cfg *c = cluster_of(3, 64);
	struct cfg_cmd cmd = node_cmd(CFG_OP_NODE_ADD, 4, NULL), back;
	struct cfg_cmd ev = { .op = CFG_OP_EVENT, .time = 5 };
	char msg[CFG_MSG_MAX];
	struct sh_enc e;

	snprintf(cmd.by, sizeof(cmd.by), "admin API from 10.9.8.7:41234");
	SH_ASSERT_OK(cfg_apply(c, &cmd, msg, sizeof(msg)));
	SH_ASSERT_STREQ(
	    cfg_event_at(c, 0)->text,
	    "node 4 added (10.0.0.4:7000, domain node-4) (admin API from 10.9.8.7:41234)");
	cmd = node_cmd(CFG_OP_NODE_STATE, 4, NULL);
	cmd.state = CFG_DOWN;
	SH_ASSERT_OK(cfg_apply(c, &cmd, msg, sizeof(msg)));
	SH_ASSERT(strstr(cfg_event_at(c, 0)->text, "(admin API") == NULL);
	snprintf(ev.path, sizeof(ev.path), "rebuild: 50%% done");
	snprintf(ev.by, sizeof(ev.by), "admin API from 10.9.8.7:41235");
	if (cfg_apply(c, &ev, msg, sizeof(msg)) == 0)
		SH_ASSERT(strstr(cfg_event_at(c, 0)->text, "(admin API") == NULL);
	/* the codec carries it; without it (an older command) it is empty */
	cmd = node_cmd(CFG_OP_NODE_ADD, 5, NULL);
	snprintf(cmd.by, sizeof(cmd.by), "admin API from [::1]:8");
	sh_enc_init(&e);
	cfg_cmd_encode(&e, &cmd);
	SH_ASSERT_OK(cfg_cmd_decode(e.p, e.len, &back));
	SH_ASSERT_STREQ(back.by, cmd.by);
	SH_ASSERT_OK(
	    cfg_cmd_decode(e.p, e.len - CMD7_TAIL - CFG_KEY_LEN - 2 - strlen(cmd.by), &back));
	SH_ASSERT_STREQ(back.by, "");
	SH_ASSERT_EQ(back.id, 5u);
	sh_enc_fini(&e);
	cfg_free(c);
}

/* ---- access keys ---- */

static struct cfg_cmd
key_cmd(uint8_t op, const char *fs, uint64_t id, uint8_t access, uint64_t time)
{
	struct cfg_cmd cmd = { .op = op, .id = id, .state = access, .time = time };

	snprintf(cmd.name, sizeof(cmd.name), "%s", fs);
	for (unsigned i = 0; i < CFG_KEY_LEN; i++)
		cmd.key[i] = (uint8_t)(id + i);
	return cmd;
}

TEST(config_access_keys_made_revoked_and_kept_from_clients)
{
	struct cfg *c = cluster_with_fs(), *d = cfg_new();
	struct cfg_cmd cmd;
	char msg[CFG_MSG_MAX];
	const struct cfg_key *k;
	struct sh_enc e, f;

	cmd = key_cmd(CFG_OP_KEY_CREATE, "data", 7, CFG_KEY_WRITE, 500);
	SH_ASSERT_OK(cfg_apply(c, &cmd, msg, sizeof(msg)));
	SH_ASSERT_STREQ(cfg_event_at(c, 0)->text,
			"access key 7 (read-write) of filesystem data created");
	cmd = key_cmd(CFG_OP_KEY_CREATE, "logs", 8, CFG_KEY_READ, 501);
	SH_ASSERT_OK(cfg_apply(c, &cmd, msg, sizeof(msg)));
	/* refused: an id taken, one of the cluster's own, no such filesystem, no access, no bytes
	 */
	cmd = key_cmd(CFG_OP_KEY_CREATE, "data", 7, CFG_KEY_READ, 502);
	SH_ASSERT_EQ(cfg_apply(c, &cmd, msg, sizeof(msg)), -EEXIST);
	cmd = key_cmd(CFG_OP_KEY_CREATE, "data", 1, CFG_KEY_READ, 502);
	SH_ASSERT_EQ(cfg_apply(c, &cmd, msg, sizeof(msg)), -EINVAL);
	cmd = key_cmd(CFG_OP_KEY_CREATE, "nope", 9, CFG_KEY_READ, 502);
	SH_ASSERT_EQ(cfg_apply(c, &cmd, msg, sizeof(msg)), -ENOENT);
	cmd = key_cmd(CFG_OP_KEY_CREATE, "data", 9, 3, 502);
	SH_ASSERT_EQ(cfg_apply(c, &cmd, msg, sizeof(msg)), -EINVAL);
	cmd = key_cmd(CFG_OP_KEY_CREATE, "data", 9, CFG_KEY_READ, 502);
	memset(cmd.key, 0, sizeof(cmd.key));
	SH_ASSERT_EQ(cfg_apply(c, &cmd, msg, sizeof(msg)), -EINVAL);
	k = cfg_key_find(c, 7);
	SH_ASSERT_NOT_NULL(k);
	SH_ASSERT_EQ(k->fs, cfg_fs_find(c, "data")->id);
	SH_ASSERT_EQ(k->access, CFG_KEY_WRITE);
	SH_ASSERT_EQ(k->secret[3], 10);
	/* revoked: kept, so that its clients are told EACCES; twice is -EALREADY */
	cmd = key_cmd(CFG_OP_KEY_REVOKE, "", 7, 0, 600);
	snprintf(cmd.by, sizeof(cmd.by), "admin API from 10.1.1.1:5");
	SH_ASSERT_OK(cfg_apply(c, &cmd, msg, sizeof(msg)));
	SH_ASSERT_STREQ(cfg_event_at(c, 0)->text, "access key 7 (read-write) of filesystem data "
						  "revoked (admin API from 10.1.1.1:5)");
	SH_ASSERT(cfg_key_find(c, 7)->revoked);
	SH_ASSERT_EQ(cfg_key_find(c, 7)->revoked_at, 600u);
	SH_ASSERT_EQ(cfg_apply(c, &cmd, msg, sizeof(msg)), -EALREADY);
	cmd = key_cmd(CFG_OP_KEY_REVOKE, "", 99, 0, 600);
	SH_ASSERT_EQ(cfg_apply(c, &cmd, msg, sizeof(msg)), -ENOENT);

	/* the codec: the nodes' copy has the bytes, the clients' none */
	sh_enc_init(&e);
	sh_enc_init(&f);
	cfg_encode(&e, c);
	SH_ASSERT_EQ(memcmp(e.p, "CFG9", 4), 0);
	SH_ASSERT_OK(cfg_decode(e.p, e.len, d));
	SH_ASSERT_EQ(d->nkeys, 2u);
	SH_ASSERT_MEMEQ(d->keys, c->keys, 2 * sizeof(c->keys[0]));
	for (size_t n = 0; n < e.len; n += 53)
		SH_ASSERT_EQ(cfg_decode(e.p, n, d), -EBADMSG);
	cfg_encode_public(&f, c);
	SH_ASSERT_EQ(f.len, e.len);
	SH_ASSERT_OK(cfg_decode(f.p, f.len, d));
	SH_ASSERT_EQ(d->nkeys, 2u);
	SH_ASSERT_EQ(cfg_key_find(d, 8)->access, CFG_KEY_READ);
	for (unsigned i = 0; i < CFG_KEY_LEN; i++)
		SH_ASSERT_EQ(cfg_key_find(d, 8)->secret[i], 0);
	/* the bytes of key 8 are nowhere in the clients' copy */
	for (size_t i = 0; i + CFG_KEY_LEN <= f.len; i++)
		SH_ASSERT(memcmp(f.p + i, cfg_key_find(c, 8)->secret, CFG_KEY_LEN) != 0);
	/* a key of id 1 (the cluster's own) or twice the same id: refused */
	{
		uint8_t *b = sh_malloc(e.len);
		size_t at = e.len - CFG7_TAIL(c) -
			    2 * (4 + 4 + 1 + 1 + 8 + 8 + CFG_KEY_LEN); /* key 7's id */

		memcpy(b, e.p, e.len);
		SH_ASSERT_EQ(b[at], 7);
		b[at] = 1;
		SH_ASSERT_EQ(cfg_decode(b, e.len, d), -EBADMSG);
		b[at] = 8;
		SH_ASSERT_EQ(cfg_decode(b, e.len, d), -EBADMSG);
		b[at] = 7;
		SH_ASSERT_OK(cfg_decode(b, e.len, d));
		sh_free(b);
	}
	sh_enc_fini(&e);
	sh_enc_fini(&f);
	/* a command carries the key's bytes */
	cmd = key_cmd(CFG_OP_KEY_CREATE, "data", 12, CFG_KEY_READ, 700);
	{
		struct cfg_cmd back;

		sh_enc_init(&e);
		cfg_cmd_encode(&e, &cmd);
		SH_ASSERT_OK(cfg_cmd_decode(e.p, e.len, &back));
		SH_ASSERT_MEMEQ(back.key, cmd.key, CFG_KEY_LEN);
		SH_ASSERT_EQ(back.id, 12u);
		sh_enc_fini(&e);
	}
	/* a filesystem deleted takes its keys with it */
	cmd = (struct cfg_cmd){ .op = CFG_OP_FS_DELETE, .time = 800 };
	snprintf(cmd.name, sizeof(cmd.name), "logs");
	SH_ASSERT_OK(cfg_apply(c, &cmd, msg, sizeof(msg)));
	SH_ASSERT_NULL(cfg_key_find(c, 8));
	SH_ASSERT_NOT_NULL(cfg_key_find(c, 7));
	cfg_free(d);
	cfg_free(c);
}

TEST(config_access_keys_full_table_takes_a_revoked_ones_room)
{
	struct cfg *c = cluster_with_fs();
	struct cfg_cmd cmd;
	char msg[CFG_MSG_MAX];

	for (uint32_t i = 0; i < CFG_KEYS_MAX; i++) {
		cmd = key_cmd(CFG_OP_KEY_CREATE, "data", 100 + i, CFG_KEY_READ, 1000 + i);
		SH_ASSERT_OK(cfg_apply(c, &cmd, msg, sizeof(msg)));
	}
	cmd = key_cmd(CFG_OP_KEY_CREATE, "data", 50, CFG_KEY_READ, 5000);
	SH_ASSERT_EQ(cfg_apply(c, &cmd, msg, sizeof(msg)), -ENOSPC);
	SH_ASSERT(strstr(msg, "revoke one") != NULL);
	cmd = key_cmd(CFG_OP_KEY_REVOKE, "", 130, 0, 5001);
	SH_ASSERT_OK(cfg_apply(c, &cmd, msg, sizeof(msg)));
	cmd = key_cmd(CFG_OP_KEY_CREATE, "data", 50, CFG_KEY_READ, 5002);
	SH_ASSERT_OK(cfg_apply(c, &cmd, msg, sizeof(msg)));
	SH_ASSERT_NULL(cfg_key_find(c, 130));
	SH_ASSERT_NOT_NULL(cfg_key_find(c, 50));
	SH_ASSERT_EQ(c->nkeys, (uint32_t)CFG_KEYS_MAX);
	cfg_free(c);
}

/*
 * An encrypted filesystem (docs/security.md, "Encrypted file systems"):
 * created only with its wrapped key, which the configuration keeps, in the
 * nodes' copy and in the clients' (they unwrap it), through the codecs; a
 * "CFG6" configuration has none encrypted.
 */
TEST(config_encrypted_filesystems_keep_their_wrapped_key)
{
	struct cfg *c = cluster_with_fs(), *d = cfg_new();
	struct cfg_cmd fs = { .op = CFG_OP_FS_CREATE, .d = 4, .p = 2, .time = 200, .sealed = true },
		       back;
	char msg[CFG_MSG_MAX];
	struct sh_enc e, f;
	const struct cfg_fs *got;

	snprintf(fs.name, sizeof(fs.name), "secret");
	/* without its wrapped key: refused, and nothing changes */
	SH_ASSERT_EQ(cfg_apply(c, &fs, msg, sizeof(msg)), -EINVAL);
	SH_ASSERT(strstr(msg, "wrapped key") != NULL);
	SH_ASSERT_NULL(cfg_fs_find(c, "secret"));
	for (unsigned i = 0; i < CFG_WRAP_LEN; i++)
		fs.wrapped[i] = (uint8_t)(i * 3 + 1);
	/* the command through its codec, then applied */
	sh_enc_init(&e);
	cfg_cmd_encode(&e, &fs);
	SH_ASSERT_OK(cfg_cmd_decode(e.p, e.len, &back));
	SH_ASSERT(back.sealed);
	SH_ASSERT_MEMEQ(back.wrapped, fs.wrapped, CFG_WRAP_LEN);
	/* an older command (before encryption) is a plain filesystem's */
	SH_ASSERT_OK(cfg_cmd_decode(e.p, e.len - CMD7_TAIL, &back));
	SH_ASSERT(!back.sealed);
	sh_enc_fini(&e);
	SH_ASSERT_MSG(cfg_apply(c, &fs, msg, sizeof(msg)) == 0, "%s", msg);
	SH_ASSERT(strstr(cfg_event_at(c, 0)->text, "encrypted") != NULL);
	got = cfg_fs_find(c, "secret");
	SH_ASSERT(got->sealed && !cfg_fs_find(c, "data")->sealed);
	/* both copies of the configuration carry it, and decode to the same */
	sh_enc_init(&e);
	sh_enc_init(&f);
	cfg_encode_public(&e, c);
	SH_ASSERT_EQ(memcmp(e.p, "CFG9", 4), 0);
	SH_ASSERT_OK(cfg_decode(e.p, e.len, d));
	SH_ASSERT(cfg_fs_find(d, "secret")->sealed);
	SH_ASSERT_MEMEQ(cfg_fs_find(d, "secret")->wrapped, fs.wrapped, CFG_WRAP_LEN);
	SH_ASSERT(!cfg_fs_find(d, "logs")->sealed);
	cfg_encode_public(&f, d);
	SH_ASSERT_EQ(f.len, e.len);
	SH_ASSERT_MEMEQ(f.p, e.p, e.len);
	SH_ASSERT_EQ(e.len, f.len);
	for (size_t n = 0; n < e.len; n += 41)
		SH_ASSERT_EQ(cfg_decode(e.p, n, d), -EBADMSG);
	SH_ASSERT_EQ(cfg_decode(e.p, e.len - 1, d), -EBADMSG);
	/* a flag that is neither 0 nor 1: refused */
	e.p[e.len - CFG8_TAIL(c) - CFG_WRAP_LEN - 1] = 2;
	SH_ASSERT_EQ(cfg_decode(e.p, e.len, d), -EBADMSG);
	e.p[e.len - CFG8_TAIL(c) - CFG_WRAP_LEN - 1] = 1;
	SH_ASSERT_OK(cfg_decode(e.p, e.len, d));
	/* "CFG6" (without the tail): nothing encrypted */
	e.p[3] = '6';
	SH_ASSERT_OK(cfg_decode(e.p, e.len - CFG7_TAIL(c) - CFG_WRAP_LEN, d));
	SH_ASSERT(!cfg_fs_find(d, "secret")->sealed);
	sh_enc_fini(&f);
	sh_enc_fini(&e);
	cfg_free(d);
	cfg_free(c);
}

/*
 * An encrypted filesystem's key wrapped anew (fs.rekey, docs/security.md
 * "Rotation"): only over the wrapping it read (-ESTALE after another),
 * never the same bytes, never a plain filesystem's; said in the events.
 */
TEST(config_encrypted_filesystems_rekey_only_over_what_was_read)
{
	struct cfg *c = cluster_with_fs();
	struct cfg_cmd fs = { .op = CFG_OP_FS_CREATE, .d = 4, .p = 2, .time = 200, .sealed = true };
	struct cfg_cmd rk = { .op = CFG_OP_FS_REKEY, .time = 300 }, back;
	uint8_t w1[CFG_WRAP_LEN], w2[CFG_WRAP_LEN];
	char msg[CFG_MSG_MAX];
	struct sh_enc e;

	for (unsigned i = 0; i < CFG_WRAP_LEN; i++) {
		w1[i] = (uint8_t)(i + 1);
		w2[i] = (uint8_t)(200 - i);
	}
	snprintf(fs.name, sizeof(fs.name), "secret");
	memcpy(fs.wrapped, w1, CFG_WRAP_LEN);
	SH_ASSERT_MSG(cfg_apply(c, &fs, msg, sizeof(msg)) == 0, "%s", msg);
	snprintf(rk.name, sizeof(rk.name), "secret");
	memcpy(rk.key, w1, CFG_KEY_LEN);
	memcpy(rk.wrapped, w2, CFG_WRAP_LEN);
	/* through the codec */
	sh_enc_init(&e);
	cfg_cmd_encode(&e, &rk);
	SH_ASSERT_OK(cfg_cmd_decode(e.p, e.len, &back));
	SH_ASSERT_EQ(back.op, CFG_OP_FS_REKEY);
	SH_ASSERT_MEMEQ(back.wrapped, w2, CFG_WRAP_LEN);
	SH_ASSERT_MEMEQ(back.key, w1, CFG_KEY_LEN);
	sh_enc_fini(&e);
	SH_ASSERT_MSG(cfg_apply(c, &rk, msg, sizeof(msg)) == 0, "%s", msg);
	SH_ASSERT_MEMEQ(cfg_fs_find(c, "secret")->wrapped, w2, CFG_WRAP_LEN);
	SH_ASSERT(strstr(cfg_event_at(c, 0)->text, "wrapped under a new") != NULL);
	/* the same change again: what it replaces is gone */
	SH_ASSERT_EQ(cfg_apply(c, &rk, msg, sizeof(msg)), -ESTALE);
	SH_ASSERT(strstr(msg, "meanwhile") != NULL);
	/* the same bytes over themselves */
	memcpy(rk.key, w2, CFG_KEY_LEN);
	SH_ASSERT_EQ(cfg_apply(c, &rk, msg, sizeof(msg)), -EALREADY);
	/* none, a plain filesystem, none at all */
	memset(rk.wrapped, 0, CFG_WRAP_LEN);
	SH_ASSERT_EQ(cfg_apply(c, &rk, msg, sizeof(msg)), -EINVAL);
	memcpy(rk.wrapped, w1, CFG_WRAP_LEN);
	snprintf(rk.name, sizeof(rk.name), "data");
	SH_ASSERT_EQ(cfg_apply(c, &rk, msg, sizeof(msg)), -EINVAL);
	SH_ASSERT(strstr(msg, "not encrypted") != NULL);
	snprintf(rk.name, sizeof(rk.name), "nope");
	SH_ASSERT_EQ(cfg_apply(c, &rk, msg, sizeof(msg)), -ENOENT);
	SH_ASSERT_MEMEQ(cfg_fs_find(c, "secret")->wrapped, w2, CFG_WRAP_LEN);
	cfg_free(c);
}

static struct cfg_cmd
clone_cmd(const char *fs, const char *snap, const char *name, uint64_t time)
{
	struct cfg_cmd c = snap_cmd(CFG_OP_FS_CLONE, fs, snap, time);

	snprintf(c.path, sizeof(c.path), "%s", name);
	return c;
}

static struct cfg_cmd
clone_state(const char *name, uint8_t state, uint64_t time)
{
	struct cfg_cmd c = snap_cmd(CFG_OP_FS_CLONE_STATE, name, "", time);

	c.state = state;
	return c;
}

/*
 * Writable snapshots (snap.create with CFG_SNAP_WRITABLE): the snapshot
 * and its clone, named FS@NAME, come in one change; the snapshot cannot be
 * cloned again or restored to; deleting it deletes the clone first, and
 * the snapshot goes (deleting) when the clone is gone, as deleting the
 * clone itself does.
 */
TEST(config_writable_snapshots_go_with_their_clone)
{
	struct cfg *c = cluster_with_fs();
	struct cfg_cmd w = snap_cmd(CFG_OP_SNAP_CREATE, "data", "w", 1);
	const struct cfg_fs *data, *wf;
	const struct cfg_snap *s;
	uint32_t nfs = c->nfs;
	char longname[CFG_NAME_MAX];

	w.state = CFG_SNAP_WRITABLE;
	snap_expect(c, w, 0, NULL);
	data = cfg_fs_find(c, "data");
	s = cfg_snap_find(c, data->id, "w");
	wf = cfg_fs_find(c, "data@w");
	SH_ASSERT(s != NULL && wf != NULL);
	SH_ASSERT_EQ(c->nfs, nfs + 1);
	SH_ASSERT_EQ(wf->origin, data->id);
	SH_ASSERT_EQ(wf->base, s->version);
	SH_ASSERT_EQ(wf->clone_state, CFG_CLONE_CREATING);
	SH_ASSERT(cfg_writable_of(c, data, s) == wf);
	SH_ASSERT(strstr(cfg_event_at(c, 0)->text, "writable") != NULL);
	/* a read-only one has none */
	snap_expect(c, snap_cmd(CFG_OP_SNAP_CREATE, "data", "r", 2), 0, NULL);
	SH_ASSERT(cfg_writable_of(c, data, cfg_snap_find(c, data->id, "r")) == NULL);
	/* a name that would not fit, one taken, a flag that is not one */
	memset(longname, 'n', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	snprintf(w.snap, sizeof(w.snap), "%s", longname + 4);
	snap_expect(c, w, -ENAMETOOLONG, "name it shorter");
	snprintf(w.snap, sizeof(w.snap), "w");
	snap_expect(c, w, -EEXIST, "already exists");
	w.state = 7;
	snprintf(w.snap, sizeof(w.snap), "w2");
	snap_expect(c, w, -EINVAL, "read-only (0) or writable");
	snap_expect(c, snap_cmd(CFG_OP_SNAP_STATE, "data", "w", 3), 0, NULL);
	snap_expect(c, clone_state("data@w", CFG_CLONE_READY, 4), 0, NULL);
	/* it is a clone already: not cloned again, nor restored to */
	snap_expect(c, clone_cmd("data", "w", "c1", 5), -EOPNOTSUPP, "is writable");
	snap_expect(c, snap_cmd(CFG_OP_FS_RESTORE, "data", "w", 5), -EOPNOTSUPP, "is writable");
	snap_expect(c, snap_cmd(CFG_OP_FS_DELETE, "data", "", 5), -EBUSY, "data@w");
	/* deleted: its writes go first, the snapshot stays until they are gone */
	snap_expect(c, snap_cmd(CFG_OP_SNAP_DELETE, "data", "w", 6), 0, NULL);
	data = cfg_fs_find(c, "data");
	s = cfg_snap_find(c, data->id, "w");
	SH_ASSERT_EQ(s->state, CFG_SNAP_READY);
	SH_ASSERT_EQ(cfg_fs_find(c, "data@w")->clone_state, CFG_CLONE_DELETING);
	snap_expect(c, snap_cmd(CFG_OP_SNAP_DELETE, "data", "w", 7), -EALREADY, "its writes first");
	snap_expect(c, clone_state("data@w", CFG_CLONE_NONE, 8), 0, NULL);
	SH_ASSERT(cfg_fs_find(c, "data@w") == NULL);
	s = cfg_snap_find(c, data->id, "w");
	SH_ASSERT_EQ(s->state, CFG_SNAP_DELETING);
	SH_ASSERT(strstr(cfg_event_at(c, 0)->text, "its writes gone") != NULL);
	/* another, deleted by its clone's name: the same end */
	w.state = CFG_SNAP_WRITABLE;
	snprintf(w.snap, sizeof(w.snap), "w3");
	w.time = 9;
	snap_expect(c, w, 0, NULL);
	snap_expect(c, snap_cmd(CFG_OP_SNAP_STATE, "data", "w3", 10), 0, NULL);
	snap_expect(c, snap_cmd(CFG_OP_FS_DELETE, "data@w3", "", 11), 0, NULL);
	snap_expect(c, clone_state("data@w3", CFG_CLONE_NONE, 12), 0, NULL);
	SH_ASSERT_EQ(cfg_snap_find(c, data->id, "w3")->state, CFG_SNAP_DELETING);
	SH_ASSERT_EQ(c->nfs, nfs);
	/* while data is restored, no snapshot of it goes: nor by its clone's name */
	snprintf(w.snap, sizeof(w.snap), "w4");
	w.time = 13;
	snap_expect(c, w, 0, NULL);
	snap_expect(c, snap_cmd(CFG_OP_SNAP_STATE, "data", "w4", 14), 0, NULL);
	snap_expect(c, clone_state("data@w4", CFG_CLONE_READY, 15), 0, NULL);
	snap_expect(c, snap_cmd(CFG_OP_SNAP_STATE, "data", "r", 16), 0, NULL);
	snap_expect(c, snap_cmd(CFG_OP_FS_RESTORE, "data", "r", 17), 0, NULL);
	snap_expect(c, snap_cmd(CFG_OP_SNAP_DELETE, "data", "w4", 18), -EBUSY, "being restored");
	snap_expect(c, snap_cmd(CFG_OP_FS_DELETE, "data@w4", "", 18), -EBUSY, "being restored");
	SH_ASSERT_EQ(cfg_fs_find(c, "data@w4")->clone_state, CFG_CLONE_READY);
	cfg_free(c);
}

/*
 * Writable clones (fs.clone, fs.clone_state): on a ready snapshot, a
 * branch number each, never used twice; what a clone stands on (its
 * snapshot, its origin) stays while it does; a clone has no snapshots,
 * restores or clones of its own yet; deleted, it goes once its groups
 * dropped it; the configuration's bytes carry it and refuse a bad one; an
 * encrypted filesystem's clone is encrypted, and rekeyed with its origin.
 */
TEST(config_clones_stand_on_their_snapshot)
{
	struct cfg *c = cluster_with_fs(), *d = cfg_new();
	const struct cfg_fs *data = cfg_fs_find(c, "data"), *cl;
	uint32_t nfs = c->nfs;
	struct sh_enc e;

	snap_expect(c, snap_cmd(CFG_OP_SNAP_CREATE, "data", "s1", 1), 0, NULL);
	snap_expect(c, clone_cmd("data", "s1", "c1", 2), -EINVAL, "only a ready one");
	snap_expect(c, snap_cmd(CFG_OP_SNAP_STATE, "data", "s1", 3), 0, NULL);
	snap_expect(c, clone_cmd("data", "nope", "c1", 4), -ENOENT, "no snapshot 'nope'");
	snap_expect(c, clone_cmd("data", "s1", "logs", 4), -EEXIST, "already exists");
	snap_expect(c, clone_cmd("data", "s1", "bad/name", 4), -EINVAL, "not a filesystem name");
	snap_expect(c, clone_cmd("data", "s1", "c1", 5), 0, NULL);
	data = cfg_fs_find(c, "data");
	cl = cfg_fs_find(c, "c1");
	SH_ASSERT_EQ(c->nfs, nfs + 1);
	SH_ASSERT_EQ(cl->origin, data->id);
	SH_ASSERT_EQ(cl->branch, 1u);
	SH_ASSERT_EQ(cl->base, cfg_snap_find(c, data->id, "s1")->version);
	SH_ASSERT_EQ(cl->clone_state, CFG_CLONE_CREATING);
	SH_ASSERT_EQ(data->branches, 1u);
	SH_ASSERT(!cfg_fs_own(cl) && cfg_fs_own(data));
	SH_ASSERT_EQ(cfg_nfs_own(c), nfs);
	SH_ASSERT(strstr(cfg_event_at(c, 0)->text, "writable clone of data@s1") != NULL);

	/* what it stands on stays; what it has not yet is refused */
	snap_expect(c, snap_cmd(CFG_OP_SNAP_DELETE, "data", "s1", 6), -EBUSY, "has clones (c1)");
	snap_expect(c, snap_cmd(CFG_OP_FS_DELETE, "data", "", 6), -EBUSY, "has clones (c1)");
	snap_expect(c, snap_cmd(CFG_OP_SNAP_CREATE, "c1", "x", 6), -EOPNOTSUPP, "is a clone");
	snap_expect(c, snap_cmd(CFG_OP_FS_RESTORE, "c1", "s1", 6), -EOPNOTSUPP, "is a clone");
	snap_expect(c, clone_cmd("c1", "s1", "c2", 6), -EOPNOTSUPP, "clones of clones");
	snap_expect(c, clone_state("c1", CFG_CLONE_NONE, 7), -EINVAL, "being created");
	snap_expect(c, clone_state("c1", CFG_CLONE_READY, 7), 0, NULL);
	snap_expect(c, clone_state("c1", CFG_CLONE_READY, 8), -EALREADY, "ready already");
	snap_expect(c, clone_state("data", CFG_CLONE_READY, 8), -EINVAL, "no clone");
	/* another: the next branch */
	snap_expect(c, clone_cmd("data", "s1", "c2", 9), 0, NULL);
	SH_ASSERT_EQ(cfg_fs_find(c, "c2")->branch, 2u);

	/* the bytes carry them; a clone of a filesystem not there is refused */
	sh_enc_init(&e);
	cfg_encode(&e, c);
	SH_ASSERT_EQ(memcmp(e.p, "CFG9", 4), 0);
	SH_ASSERT_OK(cfg_decode(e.p, e.len, d));
	SH_ASSERT_EQ(cfg_fs_find(d, "c1")->origin, data->id);
	SH_ASSERT_EQ(cfg_fs_find(d, "c1")->clone_state, CFG_CLONE_READY);
	SH_ASSERT_EQ(cfg_fs_find(d, "c2")->branch, 2u);
	SH_ASSERT_EQ(cfg_fs_find(d, "data")->branches, 2u);
	{
		size_t at = e.len - CFG9_TAIL(c) + (size_t)(cl - c->fs) * 17;

		SH_ASSERT_EQ(e.p[at], (uint8_t)data->id);
		e.p[at] = 99; /* an origin not there */
		SH_ASSERT_EQ(cfg_decode(e.p, e.len, d), -EBADMSG);
		e.p[at] = (uint8_t)data->id;
		e.p[at + 16] = 4; /* no such state */
		SH_ASSERT_EQ(cfg_decode(e.p, e.len, d), -EBADMSG);
	}
	sh_enc_fini(&e);

	/* deleted: its branch is dropped first, then it is forgotten */
	snap_expect(c, snap_cmd(CFG_OP_FS_DELETE, "c1", "", 10), 0, NULL);
	SH_ASSERT_EQ(cfg_fs_find(c, "c1")->clone_state, CFG_CLONE_DELETING);
	snap_expect(c, snap_cmd(CFG_OP_FS_DELETE, "c1", "", 11), -EALREADY, "being deleted");
	snap_expect(c, clone_state("c1", CFG_CLONE_NONE, 12), 0, NULL);
	SH_ASSERT(cfg_fs_find(c, "c1") == NULL);
	snap_expect(c, snap_cmd(CFG_OP_FS_DELETE, "c2", "", 13), 0, NULL);
	snap_expect(c, clone_state("c2", CFG_CLONE_NONE, 14), 0, NULL);
	/* nothing stands on them now */
	snap_expect(c, snap_cmd(CFG_OP_SNAP_DELETE, "data", "s1", 15), 0, NULL);
	snap_expect(c, snap_cmd(CFG_OP_SNAP_CREATE, "data", "s2", 16), 0, NULL);
	snap_expect(c, snap_cmd(CFG_OP_SNAP_STATE, "data", "s2", 17), 0, NULL);
	snap_expect(c, clone_cmd("data", "s2", "c3", 18), 0, NULL);
	SH_ASSERT_EQ(cfg_fs_find(c, "c3")->branch, 3u); /* never a number used before */

	/* an encrypted filesystem's clone: encrypted too, opened with its origin's key */
	{
		struct cfg_cmd fs = {
			.op = CFG_OP_FS_CREATE, .d = 4, .p = 2, .time = 19, .sealed = true
		};
		struct cfg_cmd rk = { .op = CFG_OP_FS_REKEY, .time = 23 };
		char msg[CFG_MSG_MAX];

		snprintf(fs.name, sizeof(fs.name), "secret");
		memset(fs.wrapped, 7, CFG_WRAP_LEN);
		SH_ASSERT_MSG(cfg_apply(c, &fs, msg, sizeof(msg)) == 0, "%s", msg);
		snap_expect(c, snap_cmd(CFG_OP_SNAP_CREATE, "secret", "s", 20), 0, NULL);
		snap_expect(c, snap_cmd(CFG_OP_SNAP_STATE, "secret", "s", 21), 0, NULL);
		snap_expect(c, clone_cmd("secret", "s", "sc", 22), 0, NULL);
		SH_ASSERT(cfg_fs_find(c, "sc")->sealed);
		/* its key is its origin's: rekeyed there, never here */
		snprintf(rk.name, sizeof(rk.name), "sc");
		memset(rk.key, 7, CFG_KEY_LEN);
		memset(rk.wrapped, 8, CFG_WRAP_LEN);
		SH_ASSERT_EQ(cfg_apply(c, &rk, msg, sizeof(msg)), -EINVAL);
		SH_ASSERT(strstr(msg, "is a clone") != NULL);
		snprintf(rk.name, sizeof(rk.name), "secret");
		SH_ASSERT_MSG(cfg_apply(c, &rk, msg, sizeof(msg)) == 0, "%s", msg);
		sh_enc_init(&e);
		cfg_encode(&e, c);
		SH_ASSERT_OK(cfg_decode(e.p, e.len, d));
		SH_ASSERT(cfg_fs_find(d, "sc")->sealed);
		SH_ASSERT_EQ(cfg_fs_find(d, "sc")->origin, cfg_fs_find(d, "secret")->id);
		sh_enc_fini(&e);
	}
	cfg_free(d);
	cfg_free(c);
}
