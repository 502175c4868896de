// SPDX-License-Identifier: Apache-2.0
/*
 * Client cache leases (msvc_int.h, docs/metadata.md "Client caches"): a
 * leader that answers a lookup or getattr to a client lets it cache the
 * entry and the attributes for MP_CACHE_MS, and records that it did; when
 * a command changes them it recalls them from every holder
 * (NET_OP_META_RECALL). The leases are the leader's memory only: a new
 * leader knows none, which is safe because each lasts MP_CACHE_MS, a
 * client never keeps one longer, and a leader gives one only while its own
 * lease outlasts it (mgroup_cache_ok: no other leader can have been
 * elected before it ends; docs/metadata.md "Leader leases").
 *
 * A command's answer waits for its recalls (the fence): every recall
 * sent before the answer is answered by its client, or, where the client
 * did not answer, its lease has run out. Without it the recall and the
 * answer raced: a recall lost once and resent, or reordered, let another
 * client stat a file after its writer's close and see the size of
 * before (the whole-system simulator test found it, tests/sim/meta
 * test_sim_client.c).
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

/* One group's recalls in flight, and the answers to its commands that wait for them. */
struct mfence {
	struct mfence *next;
	uint32_t group; /* mgroup_id */
	unsigned refs;	/* the filesystem's, and one per batch in flight */
	bool gone;	/* the filesystem went: nobody waits any more */
	struct env *env;
	uint64_t seq;		/* the seq of the next batch */
	struct sh_list batches; /* struct rbatch in flight, oldest first */
	struct sh_list parked;	/* struct parked, oldest first */
};

/* The recalls of one change: one call per client, then the wait for leases not recalled. */
struct rbatch {
	struct sh_list link;
	struct mfence *f;
	uint64_t seq;
	unsigned pending;	/* calls in flight */
	bool unanswered;	/* a client did not answer: its lease must run out */
	uint64_t expires;	/* the last lease recalled */
	uint64_t t0;		/* when it began */
	unsigned clients;	/* recalled from */
	struct env_timer timer; /* armed: until expires */
	bool timing;
};

/* An answer that waits for every batch up to seq `after`. */
struct parked {
	struct sh_list link;
	uint64_t after;
	struct net_req *nr;
	int status;
	size_t len;
	uint8_t body[];
};

struct mcache {
	struct clease *slot[SLOTS];
	struct mfence *fences; /* per group led here, made at its first recall */
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
fence_unref(struct mfence *f)
{
	if (--f->refs == 0)
		sh_free(f);
}

/* The oldest batch's seq in flight, or UINT64_MAX with none. */
static uint64_t
oldest(const struct mfence *f)
{
	return sh_list_empty(&f->batches)
		   ? UINT64_MAX
		   : sh_list_entry(f->batches.next, struct rbatch, link)->seq;
}

/* The answers whose recalls are all done leave (all of them, the filesystem gone). */
static void
release(struct mfence *f)
{
	uint64_t first = oldest(f);

	while (!sh_list_empty(&f->parked)) {
		struct parked *p = sh_list_entry(f->parked.next, struct parked, link);

		if (!f->gone && p->after >= first)
			break;
		sh_list_del(&p->link);
		net_reply(p->nr, p->status, &(struct iovec){ p->body, p->len }, p->len ? 1 : 0);
		sh_free(p);
	}
}

static void
batch_end(struct rbatch *b)
{
	struct mfence *f = b->f;
	uint64_t took = env_now(f->env) - b->t0;

	if (took > 200ull * 1000 * 1000)
		sh_log_info("group %#x: recalls from %u clients held answers %llu ms (%s)",
			    f->group, b->clients, (unsigned long long)(took / 1000000),
			    b->unanswered ? "a client did not answer: its lease ran out"
					  : "answered");
	sh_list_del(&b->link);
	sh_free(b);
	release(f);
	fence_unref(f);
}

static void
on_lease_out(struct env_timer *t)
{
	struct rbatch *b = t->arg;

	b->timing = false;
	batch_end(b);
}

/* A batch's calls all answered: done, or once the leases of clients that did not answer are out. */
static void
batch_maybe_end(struct rbatch *b)
{
	uint64_t now = env_now(b->f->env);

	if (b->pending > 0 || b->timing)
		return;
	if (b->unanswered && !b->f->gone && b->expires > now) {
		env_timer_init(b->f->env, &b->timer, on_lease_out, b);
		if (env_timer_arm(&b->timer, b->expires - now) == 0) {
			b->timing = true;
			return;
		}
	}
	batch_end(b);
}

void
msvc_cache_forget(struct mfs *fs, uint64_t client)
{
	unsigned n = 0;

	if (fs->cache == NULL)
		return;
	for (unsigned i = 0; i < SLOTS; i++)
		for (struct clease **pp = &fs->cache->slot[i], *l; (l = *pp) != NULL;) {
			if (l->client == client) {
				*pp = l->next;
				sh_free(l);
				n++;
			} else {
				pp = &l->next;
			}
		}
	sh_log_debug("client %llx gone: %u leases dropped", (unsigned long long)client, n);
}

static void
on_recalled(void *arg, int status, const struct net_msg *reply)
{
	struct rbatch *b = arg;

	(void)reply;
	b->pending--;
	b->unanswered |= status < 0; /* it keeps nothing past its lease */
	batch_maybe_end(b);
}

static struct mfence *
fence_find(const struct mfs *fs, uint32_t group)
{
	struct mfence *f = fs->cache ? fs->cache->fences : NULL;

	while (f != NULL && f->group != group)
		f = f->next;
	return f;
}

bool
msvc_cache_park(struct mfs *fs, struct mgroup *g, struct net_req *nr, int status, const void *body,
		size_t len)
{
	struct mfence *f = fence_find(fs, mgroup_id(g));
	struct parked *p;

	if (f == NULL || sh_list_empty(&f->batches))
		return false; /* nothing in flight: answered now */
	p = sh_malloc(sizeof(*p) + len);
	if (p == NULL)
		return false; /* no memory to wait: answered now, as before the fence */
	p->after = f->seq - 1;
	p->nr = nr;
	p->status = status;
	p->len = len;
	if (len > 0)
		memcpy(p->body, body, len);
	sh_list_add_tail(&f->parked, &p->link);
	return true;
}

static struct mfence *
fence_get(struct mfs *fs, uint32_t group)
{
	struct mfence *f;

	if (fs->cache == NULL && (fs->cache = sh_calloc(1, sizeof(*fs->cache))) == NULL)
		return NULL;
	f = fence_find(fs, group);
	if (f == NULL && (f = sh_calloc(1, sizeof(*f))) != NULL) {
		f->group = group;
		f->refs = 1;
		f->env = fs->s->env;
		f->seq = 1;
		sh_list_init(&f->batches);
		sh_list_init(&f->parked);
		f->next = fs->cache->fences;
		fs->cache->fences = f;
	}
	return f;
}

/* A batch in flight (its calls to come), the answers from now on behind it; NULL: no memory. */
static struct rbatch *
batch_new(struct mfs *fs, uint32_t group, uint64_t expires)
{
	struct mfence *f = fence_get(fs, group);
	struct rbatch *b = f ? sh_calloc(1, sizeof(*b)) : NULL;

	if (b == NULL)
		return NULL;
	b->f = f;
	b->seq = f->seq++;
	b->t0 = env_now(fs->s->env);
	b->expires = expires;
	f->refs++;
	sh_list_add_tail(&f->batches, &b->link);
	return b;
}

/* The holders of these keys lose them: one recall per client; the group's answers wait. */
static void
recall(struct mfs *fs, uint32_t group, const struct mp_key *keys, unsigned n)
{
	uint64_t now = env_now(fs->s->env), clients[16], expires = 0;
	unsigned nc = 0;
	struct rbatch *b;

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
					expires = l->expires > expires ? l->expires : expires;
				}
				*pp = l->next;
				sh_free(l);
				continue;
			}
			pp = &l->next;
		}
	}
	if (nc == 0)
		return;
	b = batch_new(fs, group, expires);
	if (b == NULL) {
		sh_log_warn("no memory to follow the recalls of %u leases: answered without them",
			    nc);
		return;
	}
	b->clients = nc;
	for (unsigned c = 0; c < nc; c++) {
		struct sh_enc e;
		struct net_call_opts o = { .timeout_ns = CALL_NS, .retries = 1 };

		sh_enc_init(&e);
		mp_recall_encode(&e, fs->id, keys, n);
		if (!sh_enc_error(&e) &&
		    net_call(fs->s->net, clients[c], NET_OP_META_RECALL,
			     &(struct iovec){ e.p, e.len }, 1, &o, on_recalled, b, NULL) == 0)
			b->pending++;
		else
			b->unanswered = true;
		sh_enc_fini(&e);
	}
	batch_maybe_end(b);
}

/*
 * The filesystem goes: the answers waiting leave now, the waits for leases
 * end; batches with calls in flight end with their calls (net_destroy's
 * cancel at the latest).
 */
static void
fence_detach(struct mfence *f)
{
	struct sh_list *pos, *tmp;

	f->gone = true;
	release(f);
	sh_list_for_each_safe (pos, tmp, &f->batches) {
		struct rbatch *b = sh_list_entry(pos, struct rbatch, link);

		if (b->timing) {
			env_timer_cancel(&b->timer);
			b->timing = false;
			batch_end(b);
		}
	}
	fence_unref(f);
}

void
msvc_cache_free(struct mfs *fs)
{
	if (fs->cache == NULL)
		return;
	while (fs->cache->fences != NULL) {
		struct mfence *f = fs->cache->fences;

		fs->cache->fences = f->next;
		fence_detach(f);
	}
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
msvc_cache_changed(struct mfs *fs, struct mgroup *g, const struct meta_cmd *c,
		   const struct meta_result *r)
{
	uint32_t group = mgroup_id(g);
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
				recall(fs, group, k, n);
				n = 0;
			}
		}
		break;
	default:
		return;
	}
	recall(fs, group, k, n);
}
