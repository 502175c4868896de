// SPDX-License-Identifier: Apache-2.0
/* The cluster configuration: validation, apply, placement (config.h; codecs in config_codec.c). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../env/env.h"
#include "config_int.h"

static const char *const op_names[CFG_OP_MAX] = {
#define CFG_OP_NAME(id, num, name) [num] = name,
	CFG_OPS(CFG_OP_NAME)
#undef CFG_OP_NAME
};

const char *
cfg_op_name(unsigned op)
{
	return op < CFG_OP_MAX && op_names[op] ? op_names[op] : "?";
}

const char *
cfg_comp_name(unsigned comp)
{
	switch (CFG_COMP_ALGO(comp)) {
	case CFG_COMP_NONE:
		return "none";
	case CFG_COMP_LZ4:
		return "lz4";
	case CFG_COMP_ZSTD:
		return "zstd";
	default:
		return "?";
	}
}

const char *
cfg_comp_str(unsigned comp, char *buf, size_t len)
{
	if (CFG_COMP_LEVEL(comp) == 0)
		snprintf(buf, len, "%s", cfg_comp_name(comp));
	else
		snprintf(buf, len, "%s:%u", cfg_comp_name(comp), CFG_COMP_LEVEL(comp));
	return buf;
}

int
cfg_comp_parse(const char *s)
{
	for (int i = CFG_COMP_NONE; i <= CFG_COMP_ZSTD; i++) {
		const char *name = cfg_comp_name((unsigned)i);
		size_t nl = strlen(name);
		char *end;
		long level;

		if (strcmp(s, name) == 0)
			return i;
		/* zstd takes a level: zstd:1 (fastest) to zstd:19 */
		if (i != CFG_COMP_ZSTD || strncmp(s, name, nl) != 0 || s[nl] != ':')
			continue;
		level = strtol(s + nl + 1, &end, 10);
		if (*end != '\0' || end == s + nl + 1 || level < 1 || level > CFG_COMP_LEVEL_MAX)
			return -EINVAL;
		return i | (int)level << CFG_COMP_LEVEL_SHIFT;
	}
	return -EINVAL;
}

int
cfg_protection_parse(const char *s, uint8_t *d, uint8_t *p)
{
	unsigned a, b;
	char tail;

	if (sscanf(s, "%u+%u%c", &a, &b, &tail) != 2 || a > 255 || b > 255)
		return -EINVAL;
	*d = (uint8_t)a;
	*p = (uint8_t)b;
	return 0;
}

bool
cfg_name_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n >= CFG_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char ch = s[i];
		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		      (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '-'))
			return false;
	}
	return true;
}

struct cfg *
cfg_new(void)
{
	struct cfg *c = sh_calloc(1, sizeof(struct cfg));

	if (c != NULL)
		cfg_heal_defaults(c);
	return c;
}

void
cfg_free(struct cfg *c)
{
	if (c == NULL)
		return;
	sh_free(c->buckets);
	sh_free(c->bgroup);
	sh_free(c->gepoch);
	explicit_bzero(c->keys, sizeof(c->keys));
	sh_free(c);
}

static void *
dup_array(const void *src, size_t n, size_t size, bool *failed)
{
	void *p;

	if (src == NULL || n == 0)
		return NULL;
	p = sh_malloc(n * size);
	if (p == NULL)
		*failed = true;
	else
		memcpy(p, src, n * size);
	return p;
}

int
cfg_copy(struct cfg *dst, const struct cfg *src)
{
	bool failed = false;
	uint64_t *b =
	    dup_array(src->buckets, (size_t)src->nbuckets * src->replicas, sizeof(*b), &failed);
	uint16_t *bg = dup_array(src->bgroup, src->nbuckets, sizeof(*bg), &failed);
	uint32_t *ge = dup_array(src->gepoch, src->ngroups, sizeof(*ge), &failed);

	if (failed) {
		sh_free(b);
		sh_free(bg);
		sh_free(ge);
		return -ENOMEM;
	}
	sh_free(dst->buckets);
	sh_free(dst->bgroup);
	sh_free(dst->gepoch);
	memcpy(dst, src, sizeof(*dst));
	dst->buckets = b;
	dst->bgroup = bg;
	dst->gepoch = ge;
	return 0;
}

const struct cfg_node *
cfg_node_find(const struct cfg *c, uint64_t id)
{
	for (uint32_t i = 0; i < c->nnodes; i++)
		if (c->nodes[i].id == id)
			return &c->nodes[i];
	return NULL;
}

/* Append one interface (port + worker) to out at *off. */
static int
data_put(char *out, size_t len, size_t *off, const char *addr, unsigned worker, const char *label)
{
	struct env_addr a;
	char txt[ENV_ADDRSTRLEN];
	int w;

	if (env_addr_parse(addr, &a) < 0 || a.port + worker > 65535)
		return -EINVAL;
	a.port = (uint16_t)(a.port + worker);
	env_addr_format(&a, txt, sizeof(txt));
	w = snprintf(out + *off, len - *off, "%s%s%s%s", *off ? "," : "", txt, label[0] ? "/" : "",
		     label);
	if (w < 0 || (size_t)w >= len - *off)
		return -ENOSPC;
	*off += (size_t)w;
	return 0;
}

int
cfg_node_data(const struct cfg_node *n, unsigned worker, char *out, size_t len)
{
	const char *label = "";
	size_t off = 0;
	int rc;

	if (len == 0)
		return -ENOSPC;
	out[0] = '\0';
	for (unsigned k = 0; k < n->nnets; k++)
		if (strcmp(n->nets[k].addr, n->data) == 0)
			label = n->nets[k].label;
	rc = data_put(out, len, &off, n->data, worker, label);
	for (unsigned k = 0; rc == 0 && k < n->nnets; k++)
		if (strcmp(n->nets[k].addr, n->data) != 0)
			rc = data_put(out, len, &off, n->nets[k].addr, worker, n->nets[k].label);
	return rc < 0 ? rc : (int)off;
}

static bool
domain_seen(const struct cfg *c, uint32_t upto, const char *domain, bool with_drives)
{
	for (uint32_t i = 0; i < upto; i++) {
		if (strcmp(c->nodes[i].domain, domain) != 0)
			continue;
		if (!with_drives)
			return true;
		for (uint32_t k = 0; k < c->ndrives; k++)
			if (c->drives[k].node == c->nodes[i].id)
				return true;
	}
	return false;
}

static unsigned
count_domains(const struct cfg *c, bool with_drives)
{
	unsigned n = 0;

	for (uint32_t i = 0; i < c->nnodes; i++) {
		bool has = !with_drives;

		for (uint32_t k = 0; k < c->ndrives && !has; k++)
			has = c->drives[k].node == c->nodes[i].id;
		if (has && !domain_seen(c, i, c->nodes[i].domain, with_drives))
			n++;
	}
	return n;
}

unsigned
cfg_domains_with_drives(const struct cfg *c)
{
	return count_domains(c, true);
}

const struct cfg_event *
cfg_event_at(const struct cfg *c, uint32_t i)
{
	if (i >= c->nevents)
		return NULL;
	return &c->events[(c->next_event - 1 - i) % CFG_EVENTS_MAX];
}

/* ---- placement ---- */

static uint64_t
hrw(uint32_t bucket, uint64_t node)
{
	return sh_hash_u64(node * 0x9E3779B97F4A7C15ull ^ ((uint64_t)bucket << 1 | 1));
}

/* Each bucket's group: the highest-scoring nodes on distinct failure domains. */
static int
place(struct cfg *c)
{
	unsigned domains = count_domains(c, false);
	uint32_t r = domains >= 6 ? 5 : (domains >= 3 ? 3 : domains);
	uint64_t *b;

	if (r == 0)
		r = 1;
	b = sh_calloc((size_t)c->nbuckets * r, sizeof(*b));
	if (b == NULL)
		return -ENOMEM;
	for (uint32_t k = 0; k < c->nbuckets; k++) {
		uint64_t *g = b + (size_t)k * r;
		uint32_t got = 0;
		bool used[CFG_NODES_MAX] = { false };

		while (got < r) {
			int best = -1;
			uint64_t bs = 0;

			for (uint32_t i = 0; i < c->nnodes; i++) {
				uint64_t s;
				bool clash = false;

				if (used[i])
					continue;
				for (uint32_t j = 0; j < got && !clash; j++)
					clash = strcmp(cfg_node_find(c, g[j])->domain,
						       c->nodes[i].domain) == 0;
				if (clash)
					continue;
				s = hrw(k, c->nodes[i].id);
				if (best < 0 || s > bs) {
					best = (int)i;
					bs = s;
				}
			}
			if (best < 0)
				break;
			used[best] = true;
			g[got++] = c->nodes[best].id;
		}
	}
	sh_free(c->buckets);
	c->buckets = b;
	c->replicas = r;
	/* no filesystem holds metadata in groups yet: they follow the new sets */
	sh_free(c->bgroup);
	sh_free(c->gepoch);
	c->bgroup = NULL;
	c->gepoch = NULL;
	c->ngroups = 0;
	return 0;
}

/* ---- metadata groups ---- */

struct set_ref {
	const uint64_t *sorted;
	uint32_t bucket;
	unsigned n;
};

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int
cmp_set(const void *a, const void *b)
{
	const struct set_ref *x = a, *y = b;

	for (unsigned i = 0; i < x->n; i++)
		if (x->sorted[i] != y->sorted[i])
			return x->sorted[i] < y->sorted[i] ? -1 : 1;
	return x->bucket < y->bucket ? -1 : x->bucket > y->bucket;
}

int
cfg_groups(const struct cfg *c, uint16_t *group_of, uint32_t *ngroups)
{
	uint32_t nb = c->nbuckets, r = c->replicas, g = 0;
	uint64_t *sorted;
	struct set_ref *refs;
	int rc = 0;

	if (!c->created || nb == 0 || r == 0 || c->buckets == NULL)
		return -ENOENT;
	if (c->bgroup != NULL) {
		memcpy(group_of, c->bgroup, nb * sizeof(*group_of));
		*ngroups = c->ngroups;
		return 0;
	}
	sorted = sh_calloc((size_t)nb * r, sizeof(*sorted));
	refs = sh_calloc(nb, sizeof(*refs));
	if (sorted == NULL || refs == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	for (uint32_t b = 0; b < nb; b++) {
		memcpy(sorted + (size_t)b * r, cfg_bucket(c, b), r * sizeof(*sorted));
		qsort(sorted + (size_t)b * r, r, sizeof(*sorted), cmp_u64);
		refs[b] = (struct set_ref){ .sorted = sorted + (size_t)b * r, .bucket = b, .n = r };
	}
	qsort(refs, nb, sizeof(*refs), cmp_set);
	for (uint32_t i = 0; i < nb; i++) {
		if (i == 0 || memcmp(refs[i].sorted, refs[i - 1].sorted, r * sizeof(uint64_t))) {
			if (g >= 65536) {
				rc = -E2BIG;
				goto out;
			}
			g++;
		}
		group_of[refs[i].bucket] = (uint16_t)(g - 1);
	}
	*ngroups = g;
out:
	sh_free(sorted);
	sh_free(refs);
	return rc;
}

/* Fix the groups as they are now: filesystems keep their metadata in them. */
static int
freeze_groups(struct cfg *c)
{
	uint16_t *bg;
	uint32_t *ge, n = 0;
	int rc;

	if (c->bgroup != NULL)
		return 0;
	bg = sh_calloc(c->nbuckets ? c->nbuckets : 1, sizeof(*bg));
	if (bg == NULL)
		return -ENOMEM;
	rc = cfg_groups(c, bg, &n);
	ge = rc == 0 ? sh_calloc(n ? n : 1, sizeof(*ge)) : NULL;
	if (rc == 0 && ge == NULL)
		rc = -ENOMEM;
	if (rc < 0) {
		sh_free(bg);
		return rc;
	}
	c->bgroup = bg;
	c->gepoch = ge;
	c->ngroups = n;
	return 0;
}

int
cfg_group_firsts(const struct cfg *c, uint32_t **first, uint32_t *ngroups)
{
	uint16_t *gof = sh_calloc(c->nbuckets ? c->nbuckets : 1, sizeof(*gof));
	uint32_t *f = NULL, ng = 0;
	int rc = gof ? cfg_groups(c, gof, &ng) : -ENOMEM;

	if (rc == 0 && (f = sh_malloc((ng ? ng : 1) * sizeof(*f))) == NULL)
		rc = -ENOMEM;
	for (uint32_t b = c->nbuckets; rc == 0 && b-- > 0;)
		f[gof[b]] = b; /* from the top: the lowest bucket stays */
	sh_free(gof);
	if (rc < 0) {
		sh_free(f);
		return rc;
	}
	*first = f;
	*ngroups = ng;
	return 0;
}

bool
cfg_in_set(const uint64_t *set, unsigned n, uint64_t id)
{
	for (unsigned i = 0; i < n; i++)
		if (set[i] == id)
			return true;
	return false;
}

/* Who takes old's place in group g: up, not a member, a domain of its own if any. */
static uint64_t
pick_replacement(const struct cfg *c, uint32_t g, const uint64_t *set, uint64_t old)
{
	uint64_t best = 0, bs = 0;
	bool best_fresh = false;

	for (uint32_t i = 0; i < c->nnodes; i++) {
		const struct cfg_node *n = &c->nodes[i];
		bool fresh = true;
		uint64_t s;

		if (n->state != CFG_UP || cfg_in_set(set, c->replicas, n->id) ||
		    cfg_node_leaving(c, n->id))
			continue;
		for (uint32_t k = 0; k < c->replicas && fresh; k++) {
			const struct cfg_node *m = cfg_node_find(c, set[k]);

			fresh = set[k] == old || m == NULL || strcmp(m->domain, n->domain) != 0;
		}
		s = hrw(g, n->id);
		if (best == 0 || (fresh && !best_fresh) || (fresh == best_fresh && s > bs)) {
			best = n->id;
			bs = s;
			best_fresh = fresh;
		}
	}
	return best;
}

int
cfg_mgroup_replacement(const struct cfg *c, uint64_t now, uint64_t after_ns, uint32_t *group,
		       uint64_t *old, uint64_t *node)
{
	uint32_t *first = NULL, n = 0;
	bool stuck = false;
	int rc;

	if (c->nfs == 0)
		return -ENOENT;
	rc = cfg_group_firsts(c, &first, &n);
	for (uint32_t g = 0; rc == 0 && g < n; g++) {
		const uint64_t *set = cfg_bucket(c, first[g]);

		for (uint32_t k = 0; k < c->replicas; k++) {
			const struct cfg_node *m = cfg_node_find(c, set[k]);
			uint64_t pick;

			if (m == NULL ||
			    (!cfg_node_leaving(c, m->id) &&
			     (!cfg_node_down(m) || now < m->since || now - m->since < after_ns)))
				continue;
			pick = pick_replacement(c, g, set, m->id);
			if (pick == 0) {
				stuck = true; /* no node up outside the group */
				continue;
			}
			*group = g;
			*old = m->id;
			*node = pick;
			sh_free(first);
			return 0;
		}
	}
	sh_free(first);
	return rc < 0 ? rc : stuck ? -ENOSPC : -ENOENT;
}

/* ---- validation ---- */

/* A node up with a drive in service: removing it would take fragments away unread. */
static bool
n_up_with_active_drive(const struct cfg *c, uint64_t node)
{
	const struct cfg_node *n = cfg_node_find(c, node);

	for (uint32_t i = 0; n != NULL && n->state == CFG_UP && i < c->ndrives; i++)
		if (c->drives[i].node == node && c->drives[i].state == CFG_DRIVE_ACTIVE)
			return true;
	return false;
}

static bool
holds_buckets(const struct cfg *c, uint64_t node)
{
	for (size_t i = 0; i < (size_t)c->nbuckets * c->replicas; i++)
		if (c->buckets[i] == node)
			return true;
	return false;
}

int
cfg_fail(char *msg, size_t len, int err, const char *fmt, ...)
{
	va_list ap;

	if (msg != NULL && len > 0) {
		va_start(ap, fmt);
		vsnprintf(msg, len, fmt, ap);
		va_end(ap);
	}
	return err;
}

static bool
addr_ok(const char *s)
{
	struct env_addr a;
	return env_addr_parse(s, &a) == 0 && a.port != 0;
}

static int
check_addr_free(const struct cfg *c, const char *addr, char *msg, size_t len)
{
	for (uint32_t i = 0; i < c->nnodes; i++) {
		const struct cfg_node *n = &c->nodes[i];

		if (strcmp(n->mgmt, addr) == 0 || strcmp(n->data, addr) == 0)
			return cfg_fail(msg, len, -EEXIST,
					"address %s is already used by node %llu", addr,
					(unsigned long long)n->id);
		for (unsigned k = 0; k < n->nnets; k++)
			if (strcmp(n->nets[k].addr, addr) == 0)
				return cfg_fail(msg, len, -EEXIST,
						"address %s is already used by node %llu", addr,
						(unsigned long long)n->id);
	}
	return 0;
}

static int
check_node_fields(const struct cfg *c, const struct cfg_cmd *cmd, char *msg, size_t len)
{
	int rc;

	if (cmd->id == 0)
		return cfg_fail(msg, len, -EINVAL, "node id must be a positive number");
	if (cfg_node_find(c, cmd->id) != NULL)
		return cfg_fail(msg, len, -EEXIST, "node %llu already exists",
				(unsigned long long)cmd->id);
	if (c->nnodes >= CFG_NODES_MAX)
		return cfg_fail(msg, len, -ENOSPC, "the cluster has the most nodes it can (%d)",
				CFG_NODES_MAX);
	if (!addr_ok(cmd->addr))
		return cfg_fail(msg, len, -EINVAL, "'%s' is not a management address (IP:PORT)",
				cmd->addr);
	if (!addr_ok(cmd->data))
		return cfg_fail(msg, len, -EINVAL, "'%s' is not a data address (IP:PORT)",
				cmd->data);
	if (strcmp(cmd->addr, cmd->data) == 0)
		return cfg_fail(msg, len, -EINVAL, "management and data addresses must differ");
	if (cmd->domain[0] && !cfg_name_ok(cmd->domain))
		return cfg_fail(msg, len, -EINVAL, "'%s' is not a failure domain name",
				cmd->domain);
	rc = check_addr_free(c, cmd->addr, msg, len);
	return rc ? rc : check_addr_free(c, cmd->data, msg, len);
}

const struct cfg_fs *
cfg_fs_by_id(const struct cfg *c, uint32_t id)
{
	for (uint32_t i = 0; i < c->nfs; i++)
		if (c->fs[i].id == id)
			return &c->fs[i];
	return NULL;
}

const struct cfg_fs *
cfg_fs_find(const struct cfg *c, const char *name)
{
	for (uint32_t i = 0; i < c->nfs; i++)
		if (strcmp(c->fs[i].name, name) == 0)
			return &c->fs[i];
	return NULL;
}

static int
check_replace(const struct cfg *c, const struct cfg_cmd *cmd, char *msg, size_t len)
{
	const struct cfg_node *n = cfg_node_find(c, cmd->node2);
	const uint64_t *set;
	uint32_t *first, ng = 0;
	int rc;

	if (c->nfs == 0)
		return cfg_fail(msg, len, -ENOENT, "no filesystem: no metadata groups to change");
	rc = cfg_group_firsts(c, &first, &ng);
	if (rc < 0)
		return cfg_fail(msg, len, rc, "metadata groups: %s", sh_strerror(rc));
	set = cmd->group < ng ? cfg_bucket(c, first[cmd->group]) : NULL;
	sh_free(first);
	if (set == NULL)
		return cfg_fail(msg, len, -ENOENT, "no metadata group %u (the cluster has %u)",
				cmd->group, ng);
	if (!cfg_in_set(set, c->replicas, cmd->id))
		return cfg_fail(msg, len, -ENOENT, "node %llu is not a member of metadata group %u",
				(unsigned long long)cmd->id, cmd->group);
	if (n == NULL)
		return cfg_fail(msg, len, -ENOENT, "no node %llu", (unsigned long long)cmd->node2);
	if (cfg_in_set(set, c->replicas, cmd->node2))
		return cfg_fail(msg, len, -EEXIST,
				"node %llu is already a member of metadata group %u",
				(unsigned long long)cmd->node2, cmd->group);
	if (n->state != CFG_UP)
		return cfg_fail(msg, len, -EHOSTDOWN, "node %llu is down",
				(unsigned long long)cmd->node2);
	return 0;
}

struct cfg_fs *
cfg_fs_add(struct cfg *c, const char *name, uint8_t d, uint8_t p, uint8_t compression,
	   uint8_t dedup, uint64_t time)
{
	struct cfg_fs *f = &c->fs[c->nfs++];

	memset(f, 0, sizeof(*f));
	snprintf(f->name, sizeof(f->name), "%.*s", (int)sizeof(f->name) - 1, name);
	f->d = d;
	f->p = p;
	f->compression = compression;
	f->dedup = dedup;
	f->created = time;
	f->version = 1;
	f->id = c->next_fs ? c->next_fs : 1;
	c->next_fs = f->id + 1;
	return f;
}

int
cfg_check(const struct cfg *c, const struct cfg_cmd *cmd, char *msg, size_t len)
{
	const struct cfg_node *n;

	if (msg && len)
		msg[0] = '\0';
	if (cmd->op == 0 || cmd->op >= CFG_OP_MAX)
		return cfg_fail(msg, len, -EINVAL, "unknown operation %u", cmd->op);
	if (cmd->op != CFG_OP_CREATE && !c->created)
		return cfg_fail(msg, len, -ENOTCONN,
				"no cluster yet: run 'shoal cluster create' first");
	{
		int rc = cfg_check_clone_rules(c, cmd, msg, len);

		if (rc < 0)
			return rc;
	}
	switch (cmd->op) {
	case CFG_OP_CREATE:
		if (c->created)
			return cfg_fail(msg, len, -EEXIST, "cluster '%s' already exists", c->name);
		if (!cfg_name_ok(cmd->name))
			return cfg_fail(msg, len, -EINVAL,
					"'%s' is not a cluster name (1-63 of A-Z a-z 0-9 . _ -)",
					cmd->name);
		if (cmd->nbuckets == 0 || cmd->nbuckets > CFG_BUCKETS_MAX)
			return cfg_fail(msg, len, -EINVAL, "buckets must be 1 to %d, not %u",
					CFG_BUCKETS_MAX, cmd->nbuckets);
		return check_node_fields(c, cmd, msg, len);
	case CFG_OP_NODE_ADD:
		return check_node_fields(c, cmd, msg, len);
	case CFG_OP_NODE_REMOVE:
		if (cfg_node_find(c, cmd->id) == NULL)
			return cfg_fail(msg, len, -ENOENT, "no node %llu",
					(unsigned long long)cmd->id);
		if (c->nfs > 0 && n_up_with_active_drive(c, cmd->id))
			return cfg_fail(
			    msg, len, -EBUSY,
			    "node %llu is up and its drives hold data: drain them first "
			    "(shoal node remove drains them; docs/healing.md)",
			    (unsigned long long)cmd->id);
		if (c->nfs > 0 && holds_buckets(c, cmd->id))
			return cfg_fail(
			    msg, len, -EBUSY,
			    "node %llu holds metadata replicas of existing filesystems; "
			    "they move to other nodes once its drives drain, or once it "
			    "has been down for the replacement delay (docs/metadata.md)",
			    (unsigned long long)cmd->id);
		if (c->nnodes == 1)
			return cfg_fail(msg, len, -EINVAL,
					"node %llu is the last node of the cluster",
					(unsigned long long)cmd->id);
		return 0;
	case CFG_OP_NODE_STATE:
		n = cfg_node_find(c, cmd->id);
		if (n == NULL)
			return cfg_fail(msg, len, -ENOENT, "no node %llu",
					(unsigned long long)cmd->id);
		if (cmd->state != CFG_UP && cmd->state != CFG_DOWN && cmd->state != CFG_DATA_DOWN)
			return cfg_fail(msg, len, -EINVAL, "bad node state %u", cmd->state);
		if (n->state == cmd->state)
			return cfg_fail(msg, len, -EALREADY, "node %llu is already %s",
					(unsigned long long)cmd->id,
					cmd->state == CFG_UP ? "up" : "down");
		return 0;
	case CFG_OP_NET_ADD:
		n = cfg_node_find(c, cmd->id);
		if (n == NULL)
			return cfg_fail(msg, len, -ENOENT, "no node %llu",
					(unsigned long long)cmd->id);
		if (!addr_ok(cmd->addr))
			return cfg_fail(msg, len, -EINVAL,
					"'%s' is not an interface address (IP:PORT)", cmd->addr);
		if (cmd->label[0] == '\0' || !cfg_name_ok(cmd->label))
			return cfg_fail(msg, len, -EINVAL,
					"'%s' is not a label (1-15 of A-Z a-z 0-9 . _ -)",
					cmd->label);
		if (n->nnets >= CFG_NETS_MAX)
			return cfg_fail(msg, len, -ENOSPC,
					"node %llu has the most interfaces it can (%d)",
					(unsigned long long)cmd->id, CFG_NETS_MAX);
		for (unsigned k = 0; k < n->nnets; k++)
			if (strcmp(n->nets[k].addr, cmd->addr) == 0)
				return cfg_fail(msg, len, -EEXIST,
						"node %llu already has data interface %s",
						(unsigned long long)cmd->id, cmd->addr);
		/* its own data address: gives it a label */
		if (strcmp(n->data, cmd->addr) == 0)
			return 0;
		return check_addr_free(c, cmd->addr, msg, len);
	case CFG_OP_NET_REMOVE: {
		bool found = false;

		n = cfg_node_find(c, cmd->id);
		if (n == NULL)
			return cfg_fail(msg, len, -ENOENT, "no node %llu",
					(unsigned long long)cmd->id);
		for (unsigned k = 0; k < n->nnets; k++)
			found |= strcmp(n->nets[k].addr, cmd->addr) == 0;
		if (!found)
			return cfg_fail(msg, len, -ENOENT,
					"node %llu has no added data interface %s%s",
					(unsigned long long)cmd->id, cmd->addr,
					strcmp(n->data, cmd->addr) == 0
					    ? " (its data address stays as long as the node)"
					    : "");
		return 0;
	}
	case CFG_OP_DRIVE_ADD:
		if (cfg_node_find(c, cmd->id) == NULL)
			return cfg_fail(msg, len, -ENOENT, "no node %llu",
					(unsigned long long)cmd->id);
		if (cmd->path[0] != '/')
			return cfg_fail(msg, len, -EINVAL, "drive path '%s' is not absolute",
					cmd->path);
		if (cmd->size < CFG_DRIVE_MIN)
			return cfg_fail(msg, len, -EINVAL,
					"drive %s is too small: %llu bytes, at least %llu",
					cmd->path, (unsigned long long)cmd->size,
					(unsigned long long)CFG_DRIVE_MIN);
		if (c->ndrives >= CFG_DRIVES_MAX)
			return cfg_fail(msg, len, -ENOSPC,
					"the cluster has the most drives it can (%d)",
					CFG_DRIVES_MAX);
		for (uint32_t i = 0; i < c->ndrives; i++) {
			if (c->drives[i].node == cmd->id &&
			    strcmp(c->drives[i].path, cmd->path) == 0)
				return cfg_fail(msg, len, -EEXIST, "node %llu already has drive %s",
						(unsigned long long)cmd->id, cmd->path);
			if (cmd->target != 0 && c->drives[i].id == cmd->target)
				return cfg_fail(msg, len, -EEXIST, "target id %llu is taken",
						(unsigned long long)cmd->target);
		}
		return 0;
	case CFG_OP_FS_CREATE: {
		unsigned dom = cfg_domains_with_drives(c);

		if (!cfg_name_ok(cmd->name))
			return cfg_fail(msg, len, -EINVAL,
					"'%s' is not a filesystem name (1-63 of A-Z a-z 0-9 . _ -)",
					cmd->name);
		if (cfg_fs_find(c, cmd->name) != NULL)
			return cfg_fail(msg, len, -EEXIST, "filesystem '%s' already exists",
					cmd->name);
		if (c->nfs >= CFG_FS_MAX)
			return cfg_fail(msg, len, -ENOSPC,
					"the cluster has the most filesystems it can (%d)",
					CFG_FS_MAX);
		if (cmd->d < 3 || cmd->d > 16 || (cmd->p != 2 && cmd->p != 4))
			return cfg_fail(
			    msg, len, -EINVAL,
			    "protection %u+%u is not supported: data 3 to 16, parity 2 or 4",
			    cmd->d, cmd->p);
		if ((unsigned)cmd->d + cmd->p > dom)
			return cfg_fail(
			    msg, len, -ENOSPC,
			    "protection %u+%u needs %u failure domains with drives; the "
			    "cluster has %u",
			    cmd->d, cmd->p, cmd->d + cmd->p, dom);
		if (CFG_COMP_ALGO(cmd->compression) > CFG_COMP_ZSTD ||
		    CFG_COMP_LEVEL(cmd->compression) > CFG_COMP_LEVEL_MAX ||
		    (CFG_COMP_LEVEL(cmd->compression) &&
		     CFG_COMP_ALGO(cmd->compression) != CFG_COMP_ZSTD) ||
		    cmd->dedup > 1)
			return cfg_fail(msg, len, -EINVAL, "bad compression or dedup setting");
		if (cmd->sealed) {
			static const uint8_t none[CFG_WRAP_LEN];

			if (memcmp(cmd->wrapped, none, CFG_WRAP_LEN) == 0)
				return cfg_fail(msg, len, -EINVAL,
						"an encrypted filesystem needs its wrapped key");
		}
		return 0;
	}
	case CFG_OP_FS_DELETE:
		if (cfg_fs_find(c, cmd->name) == NULL)
			return cfg_fail(msg, len, -ENOENT, "no filesystem '%s'", cmd->name);
		return 0;
	case CFG_OP_MGROUP_REPLACE:
		return check_replace(c, cmd, msg, len);
	case CFG_OP_DRIVE_STATE:
	case CFG_OP_SET:
	case CFG_OP_DRIVE_REMOVE:
	case CFG_OP_EVENT:
		return cfg_check_heal(c, cmd, msg, len);
	case CFG_OP_SNAP_CREATE:
	case CFG_OP_SNAP_STATE:
	case CFG_OP_SNAP_DELETE:
	case CFG_OP_SNAP_FORGET:
	case CFG_OP_SNAP_SCHEDULE:
	case CFG_OP_FS_RESTORE:
	case CFG_OP_FS_RESTORE_STEP:
		return cfg_check_snap(c, cmd, msg, len);
	case CFG_OP_FS_CLONE:
	case CFG_OP_FS_CLONE_STATE:
		return cfg_check_clone(c, cmd, msg, len);
	case CFG_OP_KEY_CREATE:
	case CFG_OP_KEY_REVOKE:
	case CFG_OP_FS_REKEY:
		return cfg_check_key(c, cmd, msg, len);
	}
	return -EINVAL;
}

/* ---- apply ---- */

void
cfg_event(struct cfg *c, uint64_t time, uint64_t node, const char *fmt, ...)
{
	struct cfg_event *e = &c->events[c->next_event % CFG_EVENTS_MAX];
	va_list ap;

	e->seq = ++c->next_event;
	e->time = time;
	e->node = node;
	va_start(ap, fmt);
	vsnprintf(e->text, sizeof(e->text), fmt, ap);
	va_end(ap);
	if (c->nevents < CFG_EVENTS_MAX)
		c->nevents++;
}

/* The events since first say who asked for the change (the audit trail). */
static void
said_by(struct cfg *c, uint64_t first, const char *by)
{
	if (by[0] == '\0')
		return;
	for (uint64_t seq = first + 1; seq <= c->next_event; seq++) {
		struct cfg_event *e = &c->events[(seq - 1) % CFG_EVENTS_MAX];
		size_t l = strlen(e->text);

		snprintf(e->text + l, sizeof(e->text) - l, " (%s)", by);
	}
}

static void
node_init(struct cfg_node *n, const struct cfg_cmd *cmd)
{
	memset(n, 0, sizeof(*n));
	n->id = cmd->id;
	snprintf(n->mgmt, sizeof(n->mgmt), "%s", cmd->addr);
	snprintf(n->data, sizeof(n->data), "%s", cmd->data);
	if (cmd->domain[0])
		snprintf(n->domain, sizeof(n->domain), "%s", cmd->domain);
	else
		snprintf(n->domain, sizeof(n->domain), "node-%llu", (unsigned long long)cmd->id);
	n->state = CFG_UP;
	n->since = cmd->time;
}

int
cfg_apply(struct cfg *c, const struct cfg_cmd *cmd, char *msg, size_t len)
{
	struct cfg_node *n;
	uint64_t first;
	int rc = cfg_check(c, cmd, msg, len);

	if (rc)
		return rc;
	first = c->next_event;
	switch (cmd->op) {
	case CFG_OP_CREATE:
		snprintf(c->name, sizeof(c->name), "%s", cmd->name);
		memcpy(c->uuid, cmd->uuid, sizeof(c->uuid));
		c->nbuckets = cmd->nbuckets;
		node_init(&c->nodes[c->nnodes++], cmd);
		rc = place(c);
		if (rc) {
			c->nnodes = 0;
			return cfg_fail(msg, len, rc, "out of memory placing buckets");
		}
		c->created = true;
		cfg_event(c, cmd->time, cmd->id, "cluster %s created with %u buckets on node %llu",
			  c->name, c->nbuckets, (unsigned long long)cmd->id);
		break;
	case CFG_OP_NODE_ADD:
		node_init(&c->nodes[c->nnodes++], cmd);
		/* bucket groups hold filesystems' metadata once one exists: they stay */
		rc = c->nfs == 0 ? place(c) : 0;
		if (rc) {
			c->nnodes--;
			return cfg_fail(msg, len, rc, "out of memory placing buckets");
		}
		cfg_event(c, cmd->time, cmd->id, "node %llu added (%s, domain %s)",
			  (unsigned long long)cmd->id, cmd->addr, c->nodes[c->nnodes - 1].domain);
		break;
	case CFG_OP_NODE_REMOVE: {
		uint32_t i, k = 0;
		struct cfg_node saved;

		for (i = 0; c->nodes[i].id != cmd->id; i++)
			;
		saved = c->nodes[i];
		memmove(&c->nodes[i], &c->nodes[i + 1], (c->nnodes - i - 1) * sizeof(c->nodes[0]));
		c->nnodes--;
		rc = c->nfs == 0 ? place(c) : 0;
		if (rc) {
			memmove(&c->nodes[i + 1], &c->nodes[i],
				(c->nnodes - i) * sizeof(c->nodes[0]));
			c->nodes[i] = saved;
			c->nnodes++;
			return cfg_fail(msg, len, rc, "out of memory placing buckets");
		}
		for (i = 0; i < c->ndrives; i++)
			if (c->drives[i].node != cmd->id)
				c->drives[k++] = c->drives[i];
		c->ndrives = k;
		cfg_event(c, cmd->time, cmd->id, "node %llu removed", (unsigned long long)cmd->id);
		break;
	}
	case CFG_OP_NODE_STATE:
		n = (struct cfg_node *)cfg_node_find(c, cmd->id);
		n->state = cmd->state;
		n->since = cmd->time;
		cfg_event(c, cmd->time, cmd->id, "node %llu is %s", (unsigned long long)cmd->id,
			  cmd->state == CFG_UP	   ? "up"
			  : cmd->state == CFG_DOWN ? "down"
						   : "up, its data network down");
		break;
	case CFG_OP_NET_ADD:
		n = (struct cfg_node *)cfg_node_find(c, cmd->id);
		snprintf(n->nets[n->nnets].addr, CFG_ADDR_MAX, "%s", cmd->addr);
		snprintf(n->nets[n->nnets].label, CFG_LABEL_MAX, "%s", cmd->label);
		n->nnets++;
		cfg_event(c, cmd->time, cmd->id, "node %llu: data interface %s (label %s) added",
			  (unsigned long long)cmd->id, cmd->addr, cmd->label);
		break;
	case CFG_OP_NET_REMOVE:
		n = (struct cfg_node *)cfg_node_find(c, cmd->id);
		for (unsigned k = 0; k < n->nnets; k++) {
			if (strcmp(n->nets[k].addr, cmd->addr) != 0)
				continue;
			memmove(&n->nets[k], &n->nets[k + 1],
				(n->nnets - k - 1) * sizeof(n->nets[0]));
			n->nnets--;
			break;
		}
		cfg_event(c, cmd->time, cmd->id, "node %llu: data interface %s removed",
			  (unsigned long long)cmd->id, cmd->addr);
		break;
	case CFG_OP_DRIVE_ADD: {
		struct cfg_drive *d = &c->drives[c->ndrives++];

		memset(d, 0, sizeof(*d));
		d->id = cmd->target ? cmd->target : c->next_drive + 1;
		if (d->id > c->next_drive)
			c->next_drive = d->id;
		d->node = cmd->id;
		d->worker = cmd->worker;
		d->capacity = cmd->size;
		d->since = cmd->time;
		snprintf(d->path, sizeof(d->path), "%s", cmd->path);
		cfg_event(c, cmd->time, cmd->id, "node %llu: drive %llu added (%s, %llu MiB)",
			  (unsigned long long)cmd->id, (unsigned long long)d->id, d->path,
			  (unsigned long long)(d->capacity >> 20));
		break;
	}
	case CFG_OP_FS_CREATE: {
		struct cfg_fs *f;
		char comp[16];

		/* its metadata goes into the groups as they are: they stay */
		rc = freeze_groups(c);
		if (rc < 0)
			return cfg_fail(msg, len, rc, "metadata groups: %s", sh_strerror(rc));
		f = cfg_fs_add(c, cmd->name, cmd->d, cmd->p, cmd->compression, cmd->dedup,
			       cmd->time);
		f->quota = cmd->quota;
		f->sealed = cmd->sealed;
		if (f->sealed)
			memcpy(f->wrapped, cmd->wrapped, CFG_WRAP_LEN);
		cfg_event(c, cmd->time, 0,
			  "filesystem %s created (%u+%u, compression %s, dedup %s%s)", f->name,
			  f->d, f->p, cfg_comp_str(f->compression, comp, sizeof(comp)),
			  f->dedup ? "on" : "off", f->sealed ? ", encrypted" : "");
		break;
	}
	case CFG_OP_FS_DELETE: {
		uint32_t i;
		unsigned snaps;

		for (i = 0; strcmp(c->fs[i].name, cmd->name) != 0; i++)
			;
		if (c->fs[i].origin != 0) {
			/* a clone: its groups drop its records first (fs.clone_state) */
			cfg_apply_clone_delete(c, &c->fs[i], cmd->time);
			break;
		}
		snaps = cfg_snaps_drop(c, c->fs[i].id);
		cfg_keys_drop(c, c->fs[i].id);
		memmove(&c->fs[i], &c->fs[i + 1], (c->nfs - i - 1) * sizeof(c->fs[0]));
		c->nfs--;
		if (snaps > 0)
			cfg_event(c, cmd->time, 0, "filesystem %s deleted, with its %u snapshot%s",
				  cmd->name, snaps, snaps == 1 ? "" : "s");
		else
			cfg_event(c, cmd->time, 0, "filesystem %s deleted", cmd->name);
		break;
	}
	case CFG_OP_MGROUP_REPLACE:
		rc = freeze_groups(c);
		if (rc < 0)
			return cfg_fail(msg, len, rc, "metadata groups: %s", sh_strerror(rc));
		for (uint32_t b = 0; b < c->nbuckets; b++) {
			uint64_t *set = c->buckets + (size_t)b * c->replicas;

			for (uint32_t k = 0; c->bgroup[b] == cmd->group && k < c->replicas; k++)
				if (set[k] == cmd->id)
					set[k] = cmd->node2;
		}
		c->gepoch[cmd->group]++;
		cfg_event(c, cmd->time, cmd->id,
			  "metadata group %u: node %llu replaced by node %llu (node %llu %s)",
			  cmd->group, (unsigned long long)cmd->id, (unsigned long long)cmd->node2,
			  (unsigned long long)cmd->id,
			  cfg_node_leaving(c, cmd->id) ? "leaves the cluster" : "was down");
		break;
	case CFG_OP_DRIVE_STATE:
	case CFG_OP_SET:
	case CFG_OP_DRIVE_REMOVE:
	case CFG_OP_EVENT:
		cfg_apply_heal(c, cmd);
		break;
	case CFG_OP_SNAP_CREATE:
	case CFG_OP_SNAP_STATE:
	case CFG_OP_SNAP_DELETE:
	case CFG_OP_SNAP_FORGET:
	case CFG_OP_SNAP_SCHEDULE:
	case CFG_OP_FS_RESTORE:
	case CFG_OP_FS_RESTORE_STEP:
		cfg_apply_snap(c, cmd);
		break;
	case CFG_OP_FS_CLONE:
	case CFG_OP_FS_CLONE_STATE:
		cfg_apply_clone(c, cmd);
		break;
	case CFG_OP_KEY_CREATE:
	case CFG_OP_KEY_REVOKE:
	case CFG_OP_FS_REKEY:
		cfg_apply_key(c, cmd);
		break;
	}
	if (cmd->op != CFG_OP_EVENT) /* (an event posted says what it says) */
		said_by(c, first, cmd->by);
	c->epoch++;
	return 0;
}
