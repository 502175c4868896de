// SPDX-License-Identifier: Apache-2.0
/*
 * Client cache leases (msvc_int.h, docs/metadata.md "Client caches"): a
 * leader that answers a lookup or getattr to a client lets it cache the
 * entry and the attributes for MP_CACHE_MS, and records that it did; when
 * a command changes them it recalls them from every holder
 * (NET_OP_META_RECALL). The leases are the leader's memory only: a new
 * leader knows none, which is safe because each lasts MP_CACHE_MS and a
 * client never keeps one longer.
 */
#include <string.h>

#include "msvc_int.h"

SH_LOG_FACILITY("meta.cache");

#define SLOTS	 4096
#define LEASE_NS ((uint64_t)MP_CACHE_MS * 1000 * 1000)
#define CALL_NS	 (1000ull * 1000 * 1000)

struct clease {
	struct clease *next;
	struct mp_key key;
	uint64_t client;
	uint64_t expires;
};

struct mcache {
	struct clease *slot[SLOTS];
};

static unsigned
slot_of(const struct mp_key *k)
{
	return (unsigned)(sh_hash_u64(k->a * 31 + k->h + k->kind) % SLOTS);
}

static bool
same(const struct mp_key *x, const struct mp_key *y)
{
	return x->kind == y->kind && x->a == y->a && x->h == y->h;
}

void
msvc_cache_grant(struct mfs *fs, uint64_t client, const struct mp_key *k)
{
	uint64_t now = env_now(fs->s->env);
	struct clease **pp, *l;

	if (fs->cache == NULL && (fs->cache = sh_calloc(1, sizeof(*fs->cache))) == NULL)
		return;
	pp = &fs->cache->slot[slot_of(k)];
	while ((l = *pp) != NULL) {
		if (l->expires < now) { /* gone stale: drop it on the way */
			*pp = l->next;
			sh_free(l);
			continue;
		}
		if (l->client == client && same(&l->key, k)) {
			l->expires = now + LEASE_NS;
			return;
		}
		pp = &l->next;
	}
	l = sh_calloc(1, sizeof(*l));
	if (l == NULL)
		return;
	l->key = *k;
	l->client = client;
	l->expires = now + LEASE_NS;
	l->next = fs->cache->slot[slot_of(k)];
	fs->cache->slot[slot_of(k)] = l;
}

static void
on_recalled(void *arg, int status, const struct net_msg *reply)
{
	(void)arg;
	(void)status; /* a client that does not answer keeps nothing past its lease */
	(void)reply;
}

/* The holders of these keys lose them: one recall per client. */
void
msvc_cache_recall(struct mfs *fs, const struct mp_key *keys, unsigned n)
{
	uint64_t now = env_now(fs->s->env), clients[16];
	unsigned nc = 0;

	if (fs->cache == NULL || fs->closing)
		return;
	for (unsigned i = 0; i < n; i++) {
		struct clease **pp = &fs->cache->slot[slot_of(&keys[i])], *l;

		while ((l = *pp) != NULL) {
			bool live = l->expires >= now;

			if (!live || same(&l->key, &keys[i])) {
				if (live) {
					unsigned k;

					for (k = 0; k < nc && clients[k] != l->client; k++)
						;
					if (k == nc && nc < 16)
						clients[nc++] = l->client;
				}
				*pp = l->next;
				sh_free(l);
				continue;
			}
			pp = &l->next;
		}
	}
	for (unsigned c = 0; c < nc; c++) {
		struct sh_enc e;
		struct net_call_opts o = { .timeout_ns = CALL_NS, .retries = 1 };

		sh_enc_init(&e);
		mp_recall_encode(&e, fs->id, keys, n);
		if (!sh_enc_error(&e))
			(void)net_call(fs->s->net, clients[c], NET_OP_META_RECALL,
				       &(struct iovec){ e.p, e.len }, 1, &o, on_recalled, NULL,
				       NULL);
		sh_enc_fini(&e);
	}
}

void
msvc_cache_free(struct mfs *fs)
{
	if (fs->cache == NULL)
		return;
	for (unsigned i = 0; i < SLOTS; i++)
		while (fs->cache->slot[i]) {
			struct clease *l = fs->cache->slot[i];

			fs->cache->slot[i] = l->next;
			sh_free(l);
		}
	sh_free(fs->cache);
	fs->cache = NULL;
}

/* What a command changes that a client may have cached. */
void
msvc_cache_changed(struct mfs *fs, const struct meta_cmd *c, const struct meta_result *r)
{
	struct mp_key k[6];
	unsigned n = 0;

	if (fs->cache == NULL || r->status < 0)
		return;
	switch (c->op) {
	case META_OP_CREATE:
	case META_OP_LINK:
	case META_OP_REMOVE:
		k[n++] = mp_key_dentry(c->parent, c->name, strlen(c->name));
		k[n++] = mp_key_attr(c->parent);
		if (c->ino)
			k[n++] = mp_key_attr(c->ino);
		if (r->dentry.ino)
			k[n++] = mp_key_attr(r->dentry.ino);
		break;
	case META_OP_RENAME:
		k[n++] = mp_key_dentry(c->parent, c->name, strlen(c->name));
		k[n++] = mp_key_dentry(c->parent2, c->name2, strlen(c->name2));
		k[n++] = mp_key_attr(c->parent);
		k[n++] = mp_key_attr(c->parent2);
		break;
	case META_OP_RENAME2:
		k[n++] = mp_key_dentry(r->rename.oparent, r->rename.oname, strlen(r->rename.oname));
		k[n++] = mp_key_dentry(r->rename.nparent, r->rename.nname, strlen(r->rename.nname));
		if (r->rename.src.ino)
			k[n++] = mp_key_attr(r->rename.src.ino);
		if (r->rename.dst.ino)
			k[n++] = mp_key_attr(r->rename.dst.ino);
		break;
	case META_OP_SETATTR:
	case META_OP_SETXATTR:
	case META_OP_REMOVEXATTR:
	case META_OP_EXTENT:
	case META_OP_INLINE:
		k[n++] = mp_key_attr(c->ino);
		break;
	case META_OP_DELTA:
		if (c->delta.kind != META_DELTA_INODE)
			return;
		k[n++] = mp_key_attr(c->delta.ino);
		break;
	case META_OP_DELTAS:
		/* the inodes they change, a few keys at a time */
		for (size_t at = 0; at + META_DELTA_LEN <= c->dlen; at += META_DELTA_LEN) {
			struct meta_delta d;

			if (meta_delta_decode(c->data + at, META_DELTA_LEN, &d) < 0 ||
			    d.kind != META_DELTA_INODE)
				continue;
			k[n++] = mp_key_attr(d.ino);
			if (n == 6) {
				msvc_cache_recall(fs, k, n);
				n = 0;
			}
		}
		break;
	default:
		return;
	}
	msvc_cache_recall(fs, k, n);
}
