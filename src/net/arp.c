// SPDX-License-Identifier: Apache-2.0
/*
 * Shoal's own ARP table (arp.h): learned from every ARP frame as RFC 826
 * says, requests for our addresses answered, peers resolved, refreshed
 * while used and given up on after `tries` unanswered requests.
 */
#include <errno.h>
#include <string.h>

#include "../base/alloc.h"
#include "../base/hash.h"
#include "../base/htable.h"
#include "arp.h"

struct node {
	struct sh_hnode hn;
	struct sh_arp_entry e;
};

struct sh_arp {
	struct sh_arp_config cfg;
	struct sh_htable t; /* struct node by ip */
};

static const uint8_t bcast[6] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff }, none[6];

static bool
eq(const struct sh_hnode *n, const void *key)
{
	return ((const struct node *)n)->e.ip == *(const uint32_t *)key;
}

static struct node *
find(const struct sh_arp *a, uint32_t ip)
{
	return (struct node *)sh_htable_find(&a->t, sh_hash_u64(ip), &ip, eq);
}

static bool
ours(const struct sh_arp *a, uint32_t ip)
{
	for (unsigned i = 0; i < a->cfg.nips; i++)
		if (a->cfg.ips[i] == ip)
			return true;
	return false;
}

int
sh_arp_create(const struct sh_arp_config *cfg, struct sh_arp **out)
{
	struct sh_arp *a;

	if (cfg->nips == 0 || cfg->nips > SH_ARP_OWN_MAX || (cfg->mac[0] & 1))
		return -EINVAL;
	a = sh_calloc(1, sizeof(*a));
	if (a == NULL)
		return -ENOMEM;
	a->cfg = *cfg;
	a->cfg.ttl_ns = cfg->ttl_ns ? cfg->ttl_ns : 60ull * 1000 * 1000 * 1000;
	a->cfg.retry_ns = cfg->retry_ns ? cfg->retry_ns : 200ull * 1000 * 1000;
	a->cfg.tries = cfg->tries ? cfg->tries : 5;
	if (sh_htable_init(&a->t, 64) < 0) {
		sh_free(a);
		return -ENOMEM;
	}
	*out = a;
	return 0;
}

void
sh_arp_destroy(struct sh_arp *a)
{
	struct sh_hnode *x;
	size_t it;

	if (a == NULL)
		return;
	while ((x = sh_htable_first(&a->t, &it)) != NULL) {
		sh_htable_remove(&a->t, x);
		sh_free(x);
	}
	sh_htable_fini(&a->t);
	sh_free(a);
}

/* When an entry was last heard from or asked for. */
static uint64_t
last_of(const struct node *n)
{
	return n->e.heard_ns > n->e.asked_ns ? n->e.heard_ns : n->e.asked_ns;
}

/* A new entry for ip (the one heard from longest ago gives way when the table is full). */
static struct node *
add(struct sh_arp *a, uint32_t ip)
{
	struct node *n;

	if (sh_htable_count(&a->t) >= SH_ARP_MAX) {
		struct node *old = NULL;
		struct sh_hnode *x;
		size_t it;

		for (x = sh_htable_first(&a->t, &it); x; x = sh_htable_next(&a->t, &it, x))
			if (old == NULL || last_of((struct node *)x) < last_of(old))
				old = (struct node *)x;
		sh_htable_remove(&a->t, &old->hn);
		sh_free(old);
	}
	n = sh_calloc(1, sizeof(*n));
	if (n == NULL)
		return NULL;
	n->e.ip = ip;
	sh_htable_insert(&a->t, &n->hn, sh_hash_u64(ip));
	return n;
}

static void
learn(struct node *n, const uint8_t mac[6], uint64_t now)
{
	memcpy(n->e.mac, mac, 6);
	n->e.resolved = true;
	n->e.heard_ns = now;
	n->e.asks = 0;
}

int
sh_arp_input(struct sh_arp *a, const struct sh_frame *f, uint64_t now, uint8_t *out, size_t cap,
	     size_t *olen)
{
	struct node *n;
	bool merged = false;
	int len;

	*olen = 0;
	if (f->kind != SH_FRAME_ARP)
		return -EINVAL;
	/*
	 * A group MAC is no one's address; our MAC with our address is our own
	 * frame come back. Our MAC with another address is a peer that shares
	 * it: the kernel's side of a tap (net_tap gives both ends one MAC).
	 */
	if ((f->sha[0] & 1) || (memcmp(f->sha, a->cfg.mac, 6) == 0 && ours(a, f->spa)))
		return 0;
	if (f->spa != 0 && (n = find(a, f->spa)) != NULL) {
		learn(n, f->sha, now); /* known: its MAC as it is now (it may have moved) */
		merged = true;
	}
	if (!ours(a, f->tpa))
		return 0;
	if (!merged && f->spa != 0 && !ours(a, f->spa) && (n = add(a, f->spa)) != NULL)
		learn(n, f->sha, now);
	if (f->op != SH_ARP_REQUEST)
		return 0;
	len = sh_frame_arp(out, cap, f->sha, SH_ARP_REPLY, a->cfg.mac, f->tpa, f->sha, f->spa);
	if (len < 0)
		return len;
	*olen = (size_t)len;
	return 1;
}

/* A request for n's address: to its MAC if it has one (a refresh), else to everyone. */
static int
ask(struct sh_arp *a, struct node *n, uint64_t now, uint8_t *out, size_t cap, size_t *olen)
{
	int len = sh_frame_arp(out, cap, n->e.resolved ? n->e.mac : bcast, SH_ARP_REQUEST,
			       a->cfg.mac, a->cfg.ips[0], n->e.resolved ? n->e.mac : none, n->e.ip);

	if (len < 0)
		return len;
	n->e.asked_ns = now;
	n->e.asks++;
	*olen = (size_t)len;
	return 0;
}

int
sh_arp_resolve(struct sh_arp *a, uint32_t ip, uint64_t now, uint8_t mac[6], uint8_t *out,
	       size_t cap, size_t *olen)
{
	const struct sh_arp_config *c = &a->cfg;
	struct node *n = find(a, ip);
	int rc;

	*olen = 0;
	if (ip == 0 || ours(a, ip))
		return -EINVAL;
	if (n == NULL && (n = add(a, ip)) == NULL)
		return -ENOMEM;
	if (n->e.resolved) {
		if (now - n->e.heard_ns < c->ttl_ns) {
			memcpy(mac, n->e.mac, 6);
			return 0;
		}
		if (n->e.asks < c->tries || now - n->e.asked_ns < c->retry_ns) {
			/* stale, still used while it is refreshed */
			memcpy(mac, n->e.mac, 6);
			if (n->e.asks < c->tries &&
			    (n->e.asks == 0 || now - n->e.asked_ns >= c->retry_ns))
				return ask(a, n, now, out, cap, olen);
			return 0;
		}
		n->e.resolved = false; /* no answer to its refreshes: by broadcast now */
		n->e.asks = 0;
	}
	if (n->e.asks >= c->tries && now - n->e.asked_ns >= c->retry_ns) {
		if (now - n->e.asked_ns < c->ttl_ns)
			return -EHOSTUNREACH;
		n->e.asks = 0; /* given up on a while ago: asked again */
	}
	if (n->e.asks < c->tries && (n->e.asks == 0 || now - n->e.asked_ns >= c->retry_ns)) {
		rc = ask(a, n, now, out, cap, olen);
		if (rc < 0)
			return rc;
	}
	return -EAGAIN;
}

int
sh_arp_announce(const struct sh_arp *a, uint32_t ip, uint8_t *out, size_t cap)
{
	if (!ours(a, ip))
		return -EINVAL;
	return sh_frame_arp(out, cap, bcast, SH_ARP_REQUEST, a->cfg.mac, ip, none, ip);
}

unsigned
sh_arp_list(const struct sh_arp *a, struct sh_arp_entry *out, unsigned max)
{
	struct sh_hnode *x;
	unsigned n = 0;
	size_t it;

	for (x = sh_htable_first(&a->t, &it); x; x = sh_htable_next(&a->t, &it, x), n++)
		if (n < max)
			out[n] = ((const struct node *)x)->e;
	return n;
}
