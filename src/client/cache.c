// SPDX-License-Identifier: Apache-2.0
/*
 * libshoal's attribute and entry caches (client_int.h, docs/client.md):
 * what a bucket's leader let this client keep (MP_CACHE), for at most
 * MP_CACHE_MS from the request, dropped sooner when the leader recalls
 * it (NET_OP_META_RECALL) or when this client changes it itself.
 */
#include <stdio.h>
#include <string.h>

#include "client_int.h"

#define SLOTS 8192
/* the lease runs from when the leader answered: count it from before the request */
#define KEEP_NS ((uint64_t)MP_CACHE_MS * 1000 * 1000 - 50ull * 1000 * 1000)

struct centry {
	struct centry *next;
	struct mp_key key;
	uint64_t expires;
	uint64_t ino;		/* an entry's inode */
	uint8_t type;		/* and its type */
	struct meta_inode attr; /* an inode's attributes */
	uint8_t *inl;		/* and a small file's bytes, when they came with them */
	size_t inl_len;
	char name[SH_NAME_MAX + 1]; /* an entry's name (the key holds its hash) */
};

static void
entry_free(struct centry *e)
{
	sh_free(e->inl);
	sh_free(e);
}

/*
 * Inodes this client just changed in ways that reach them by a delta
 * from another bucket (a link, a create or remove under a directory):
 * their attributes are not cached for a moment, since the leader may not
 * have the delta yet.
 */
#define UNSTABLE    64
#define UNSTABLE_NS (300ull * 1000 * 1000)

struct ccache {
	struct env *env; /* the client's: its clock (env_clock, from any thread) */
	pthread_mutex_t mu;
	struct centry *slot[SLOTS];
	uint64_t hits, misses;
	struct {
		uint64_t ino, until;
	} unstable[UNSTABLE];
	unsigned next_unstable;
};

static bool
is_unstable(struct ccache *c, uint64_t ino)
{
	uint64_t now = env_clock(c->env);

	for (unsigned i = 0; i < UNSTABLE; i++)
		if (c->unstable[i].ino == ino && c->unstable[i].until > now)
			return true;
	return false;
}

static void
mark_unstable(struct ccache *c, uint64_t ino)
{
	c->unstable[c->next_unstable % UNSTABLE].ino = ino;
	c->unstable[c->next_unstable % UNSTABLE].until = env_clock(c->env) + UNSTABLE_NS;
	c->next_unstable++;
}

static unsigned
slot_of(const struct mp_key *k)
{
	return (unsigned)(sh_hash_u64(k->a * 31 + k->h + k->kind) % SLOTS);
}

int
cache_init(sh_fs *fs)
{
	fs->cache = sh_calloc(1, sizeof(*fs->cache));
	if (fs->cache == NULL)
		return -ENOMEM;
	fs->cache->env = fs->c->env;
	pthread_mutex_init(&fs->cache->mu, NULL);
	return 0;
}

void
cache_fini(sh_fs *fs)
{
	if (fs->cache == NULL)
		return;
	for (unsigned i = 0; i < SLOTS; i++)
		while (fs->cache->slot[i]) {
			struct centry *e = fs->cache->slot[i];

			fs->cache->slot[i] = e->next;
			entry_free(e);
		}
	pthread_mutex_destroy(&fs->cache->mu);
	sh_free(fs->cache);
	fs->cache = NULL;
}

uint64_t
cache_now(const sh_fs *fs)
{
	return env_clock(fs->c->env);
}

/* Find a live entry (the caller holds mu); stale ones go on the way. */
static struct centry *
find(struct ccache *c, const struct mp_key *k, const char *name)
{
	uint64_t now = env_clock(c->env);
	struct centry **pp = &c->slot[slot_of(k)], *e;

	while ((e = *pp) != NULL) {
		if (e->expires < now) {
			*pp = e->next;
			entry_free(e);
			continue;
		}
		if (e->key.kind == k->kind && e->key.a == k->a && e->key.h == k->h &&
		    (name == NULL || strcmp(e->name, name) == 0))
			return e;
		pp = &e->next;
	}
	return NULL;
}

static void
put(struct ccache *c, const struct mp_key *k, uint64_t since, const char *name, uint64_t ino,
    const struct meta_inode *attr, uint8_t type)
{
	struct centry *e;

	pthread_mutex_lock(&c->mu);
	e = find(c, k, name);
	if (e == NULL && (e = sh_calloc(1, sizeof(*e))) != NULL) {
		e->key = *k;
		e->next = c->slot[slot_of(k)];
		c->slot[slot_of(k)] = e;
	}
	if (e != NULL) {
		e->expires = since + KEEP_NS;
		e->ino = ino;
		e->type = type;
		if (attr) {
			e->attr = *attr;
			sh_free(e->inl); /* what came with older attributes */
			e->inl = NULL;
			e->inl_len = 0;
		}
		if (name)
			snprintf(e->name, sizeof(e->name), "%s", name);
	}
	pthread_mutex_unlock(&c->mu);
}

void
cache_put_attr(sh_fs *fs, uint64_t ino, const struct meta_inode *attr, uint64_t since)
{
	struct mp_key k = mp_key_attr(ino);
	bool skip;

	pthread_mutex_lock(&fs->cache->mu);
	skip = is_unstable(fs->cache, ino);
	pthread_mutex_unlock(&fs->cache->mu);
	if (!skip)
		put(fs->cache, &k, since, NULL, ino, attr, attr->type);
}

void
cache_put_inline(sh_fs *fs, uint64_t ino, const struct meta_inode *attr, const void *data,
		 size_t len)
{
	struct mp_key k = mp_key_attr(ino);
	uint8_t *copy = sh_malloc(len ? len : 1);
	struct centry *e;

	if (copy == NULL)
		return;
	memcpy(copy, data, len);
	pthread_mutex_lock(&fs->cache->mu);
	e = find(fs->cache, &k, NULL);
	/* only with the very attributes just cached for it */
	if (e != NULL && e->inl == NULL && e->attr.size == attr->size &&
	    e->attr.ctime == attr->ctime && e->attr.mtime == attr->mtime &&
	    e->attr.generation == attr->generation) {
		e->inl = copy;
		e->inl_len = len;
		copy = NULL;
	}
	pthread_mutex_unlock(&fs->cache->mu);
	sh_free(copy);
}

bool
cache_get_inline(sh_fs *fs, uint64_t ino, uint64_t size, uint64_t ctime, uint8_t *buf, size_t cap,
		 size_t *len)
{
	struct mp_key k = mp_key_attr(ino);
	struct centry *e;
	bool hit = false;

	pthread_mutex_lock(&fs->cache->mu);
	e = find(fs->cache, &k, NULL);
	if (e != NULL && e->inl != NULL && e->attr.size == size && e->attr.ctime == ctime &&
	    e->inl_len <= cap) {
		memcpy(buf, e->inl, e->inl_len);
		*len = e->inl_len;
		hit = true;
	}
	pthread_mutex_unlock(&fs->cache->mu);
	return hit;
}

void
cache_put_entry(sh_fs *fs, uint64_t parent, const char *name, size_t len, uint64_t ino,
		uint8_t type, uint64_t since)
{
	struct mp_key k = mp_key_dentry(parent, name, len);

	put(fs->cache, &k, since, name, ino, NULL, type);
}

bool
cache_get_attr(sh_fs *fs, uint64_t ino, struct meta_inode *attr)
{
	struct mp_key k = mp_key_attr(ino);
	struct centry *e;

	pthread_mutex_lock(&fs->cache->mu);
	e = find(fs->cache, &k, NULL);
	if (e)
		*attr = e->attr;
	e ? fs->cache->hits++ : fs->cache->misses++;
	pthread_mutex_unlock(&fs->cache->mu);
	return e != NULL;
}

bool
cache_get_entry(sh_fs *fs, uint64_t parent, const char *name, size_t len, uint64_t *ino,
		uint8_t *type)
{
	struct mp_key k = mp_key_dentry(parent, name, len);
	struct centry *e;

	pthread_mutex_lock(&fs->cache->mu);
	e = find(fs->cache, &k, name);
	if (e) {
		*ino = e->ino;
		*type = e->type;
	}
	e ? fs->cache->hits++ : fs->cache->misses++;
	pthread_mutex_unlock(&fs->cache->mu);
	return e != NULL;
}

void
cache_drop(sh_fs *fs, const struct mp_key *k)
{
	struct centry **pp, *e;

	pthread_mutex_lock(&fs->cache->mu);
	pp = &fs->cache->slot[slot_of(k)];
	while ((e = *pp) != NULL) {
		if (e->key.kind == k->kind && e->key.a == k->a && e->key.h == k->h) {
			*pp = e->next;
			entry_free(e);
			continue;
		}
		pp = &e->next;
	}
	pthread_mutex_unlock(&fs->cache->mu);
}

/* What a command this client sends may change: not to be trusted from now on. */
void
cache_forget_cmd(sh_fs *fs, const struct meta_cmd *mc, bool done)
{
	struct mp_key k[6];
	unsigned n = 0;

	if (mc->ino)
		k[n++] = mp_key_attr(mc->ino);
	if (mc->parent) {
		k[n++] = mp_key_attr(mc->parent);
		if (mc->name[0])
			k[n++] = mp_key_dentry(mc->parent, mc->name, strlen(mc->name));
	}
	if (mc->parent2) {
		k[n++] = mp_key_attr(mc->parent2);
		if (mc->name2[0])
			k[n++] = mp_key_dentry(mc->parent2, mc->name2, strlen(mc->name2));
	}
	for (unsigned i = 0; i < n; i++)
		cache_drop(fs, &k[i]);
	pthread_mutex_lock(&fs->cache->mu);
	for (unsigned i = 0; i < n; i++)
		if (k[i].kind == MP_KEY_ATTR)
			mark_unstable(fs->cache, k[i].a);
	pthread_mutex_unlock(&fs->cache->mu);
	/* once it is done: the inode a remove, rename or link touches is not named in it */
	if (done &&
	    (mc->op == META_OP_REMOVE || mc->op == META_OP_RENAME || mc->op == META_OP_LINK))
		cache_drop_all_attrs(fs);
}

static void
drop_kinds(sh_fs *fs, bool entries)
{
	pthread_mutex_lock(&fs->cache->mu);
	for (unsigned i = 0; i < SLOTS; i++) {
		struct centry **pp = &fs->cache->slot[i], *e;

		while ((e = *pp) != NULL) {
			if (e->key.kind == MP_KEY_ATTR || entries) {
				*pp = e->next;
				entry_free(e);
				continue;
			}
			pp = &e->next;
		}
	}
	pthread_mutex_unlock(&fs->cache->mu);
}

void
cache_drop_all_attrs(sh_fs *fs)
{
	drop_kinds(fs, false);
}

void
cache_drop_all(sh_fs *fs)
{
	drop_kinds(fs, true);
}

void
cache_stats(sh_fs *fs, uint64_t *hits, uint64_t *misses)
{
	pthread_mutex_lock(&fs->cache->mu);
	*hits = fs->cache->hits;
	*misses = fs->cache->misses;
	pthread_mutex_unlock(&fs->cache->mu);
}
