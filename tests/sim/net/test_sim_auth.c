// SPDX-License-Identifier: Apache-2.0
/*
 * Authenticated datagrams (src/net/auth.h) in the simulator, with an
 * adversary on the wire (sim_net_tap): it flips bits and mends the crc,
 * strips MACs, forges tags, and replays recorded packets with their
 * sender's address. Every call still completes with the right bytes, and
 * every packet it altered is dropped and counted by the endpoint it
 * reached, exactly; replays are what the sessions already drop. Endpoints
 * without the key, or with another one, are not heard. Clients with a key
 * (the cluster's client key, a file system's access key) are heard under
 * it, as the adversary attacks them too; one without a key is told EACCES,
 * a read-only key's writes EROFS, and a revoked key's calls EACCES from the
 * moment the server is told.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "../../../src/env/env_sim.h"
#include "../../../src/net/auth.h"
#include "../../../src/net/net.h"
#include "../../lib/test.h"

#define HOSTS	 8
#define CALLS	 150
#define RECORDED 64

static const uint8_t key_a[NET_AUTH_KEY_LEN] = { 0x5a, 1, 2, 3 };
static const uint8_t key_b[NET_AUTH_KEY_LEN] = { 0xa5, 1, 2, 3 };
static const uint8_t key_fs[NET_AUTH_KEY_LEN] = { 0x33, 7, 7, 7 }; /* access key 7 */
static const uint8_t key_ro[NET_AUTH_KEY_LEN] = { 0x44, 8, 8, 8 }; /* access key 8, read-only */
static uint8_t key_client[NET_AUTH_KEY_LEN];			   /* key a's client key (id 1) */

struct host {
	struct sim_node *node;
	struct net *net;
	struct net_iface ifc;
	uint64_t id;
	const uint8_t *key;
	uint32_t key_id; /* a client's (0: none) */
	uint16_t op;	 /* what it calls: NET_OP_ECHO (KEY), or NET_OP_STORE_PUT (WRITE) */
	int issued, ok, timedout, denied, inflight;
	uint32_t crc[CALLS], len[CALLS];
	uint64_t expect_failed; /* datagrams the adversary spoiled that reached it */
};

struct world {
	struct sim *sim;
	struct host h[HOSTS];
	int n;
	struct sh_rand rng;
	uint64_t timeout_ns;
	/* the adversary */
	bool attack;
	struct env_addr attacker;
	struct {
		struct env_addr src, dst;
		size_t len;
		uint8_t data[ENV_DGRAM_MAX];
	} * rec;
	unsigned nrec;
	uint64_t flipped, stripped, forged, replayed;
	bool revoked; /* the server's access key 7 */
};

struct call_ctx {
	struct host *h;
	int idx;
};

static void issue(struct world *w, struct host *h);

static struct world *the_world;

static void
on_reply(void *arg, int status, const struct net_msg *reply)
{
	struct call_ctx *x = arg;
	struct host *h = x->h;

	h->inflight--;
	if (status == 0) { /* NET_OP_ECHO's answer */
		SH_ASSERT_EQ(reply->len, h->len[x->idx]);
		SH_ASSERT_EQ(sh_crc32c(0, reply->buf->data + reply->off, reply->len),
			     h->crc[x->idx]);
		h->ok++;
	} else if (status == -EACCES || status == -EROFS) {
		h->denied++; /* what its key does not allow */
	} else {
		SH_ASSERT_MSG(status == -ETIMEDOUT, "call %d of %llx: %s", x->idx,
			      (unsigned long long)h->id, sh_errname(status));
		h->timedout++;
	}
	sh_free(x);
	issue(the_world, h);
}

static void
issue(struct world *w, struct host *h)
{
	while (h->inflight < 6 && h->issued < CALLS) {
		int idx = h->issued++;
		size_t len = 8 + sh_rand_below(&w->rng, 12000);
		uint8_t *body = sh_malloc(len);
		struct call_ctx *x = sh_malloc(sizeof(*x));
		struct iovec iov = { body, len };
		struct net_call_opts o = { .timeout_ns = w->timeout_ns, .retries = 5 };

		SH_ASSERT_NOT_NULL(body);
		SH_ASSERT_NOT_NULL(x);
		for (size_t i = 0; i < len; i++)
			body[i] = (uint8_t)(h->id * 31 + (uint64_t)idx * 7 + i);
		h->len[idx] = (uint32_t)len;
		h->crc[idx] = sh_crc32c(0, body, len);
		*x = (struct call_ctx){ h, idx };
		SH_ASSERT_OK(net_call(h->net, 1, h->op, &iov, 1, &o, on_reply, x, NULL));
		sh_free(body);
		h->inflight++;
	}
}

static struct host *
host_at(struct world *w, const struct env_addr *a)
{
	for (int i = 0; i < w->n; i++)
		if (env_addr_eq(&w->h[i].ifc.addr, a))
			return &w->h[i];
	return NULL;
}

/* Recompute a datagram's crc (what an adversary who knows the format does). */
static void
mend_crc(uint8_t *b, size_t len, bool mac)
{
	uint32_t crc;

	if (mac)
		len -= NET_MAC_TRAILER;
	memset(b + 72, 0, 4);
	crc = sh_crc32c(0, b, len);
	memcpy(b + 72, &crc, 4); /* little-endian host */
}

/* An altered datagram that still decodes must fail authentication where it lands. */
static void
spoiled(struct world *w, const struct env_addr *dst, const uint8_t *b, size_t len, uint64_t *count)
{
	struct net_pkt pkt;
	struct host *to = host_at(w, dst);

	if (to != NULL && net_pkt_decode(b, len, &pkt) == 0) {
		to->expect_failed++;
		(*count)++;
	}
}

static bool
adversary(void *arg, const struct env_addr *src, const struct env_addr *dst, uint8_t *data,
	  size_t *len)
{
	struct world *w = arg;
	struct net_pkt pkt;
	uint64_t dice;

	if (!w->attack || env_addr_eq(src, &w->attacker) || net_pkt_decode(data, *len, &pkt) != 0 ||
	    !(pkt.flags & NET_FLAG_MAC))
		return true;
	dice = sh_rand_below(&w->rng, 1000);
	if (dice < 20 && w->nrec < RECORDED) { /* keep a copy to replay later */
		w->rec[w->nrec].src = *src;
		w->rec[w->nrec].dst = *dst;
		w->rec[w->nrec].len = *len;
		memcpy(w->rec[w->nrec].data, data, *len);
		w->nrec++;
	} else if (dice < 40 && w->nrec > 0) { /* replay one, from its sender's address */
		unsigned k = (unsigned)sh_rand_below(&w->rng, w->nrec);

		SH_ASSERT_OK(sim_inject(w->sim, &w->rec[k].src, &w->rec[k].dst, w->rec[k].data,
					w->rec[k].len));
		w->replayed++;
	} else if (dice < 70) { /* flip one bit before the trailer, mend the crc */
		size_t bit = sh_rand_below(&w->rng, (*len - NET_MAC_TRAILER) * 8);

		if (bit / 8 >= 72 && bit / 8 < 76)
			bit += 32; /* not the crc itself */
		data[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		mend_crc(data, *len, true);
		spoiled(w, dst, data, *len, &w->flipped);
	} else if (dice < 80) { /* a copy without its MAC, from the attacker */
		static uint8_t copy[ENV_DGRAM_MAX];
		size_t n = *len - NET_MAC_TRAILER;

		memcpy(copy, data, n);
		copy[6] = 0;
		mend_crc(copy, n, false);
		SH_ASSERT_OK(sim_inject(w->sim, &w->attacker, dst, copy, n));
		spoiled(w, dst, copy, n, &w->stripped);
	} else if (dice < 90) { /* a copy with a tag of its own */
		static uint8_t copy[ENV_DGRAM_MAX];

		memcpy(copy, data, *len);
		for (unsigned i = 0; i < NET_MAC_TAG; i++)
			copy[*len - NET_MAC_TAG + i] = (uint8_t)sh_rand_u64(&w->rng);
		SH_ASSERT_OK(sim_inject(w->sim, &w->attacker, dst, copy, *len));
		spoiled(w, dst, copy, *len, &w->forged);
	}
	return true;
}

/* The server's access keys (net_config.client_key): 7 read-write, 8 read-only, of fs 3. */
static int
client_key(void *arg, uint32_t id, uint8_t key[NET_AUTH_KEY_LEN], struct net_cred *cred)
{
	struct world *w = arg;

	if (id != 7 && id != 8)
		return -ENOENT;
	memcpy(key, id == 7 ? key_fs : key_ro, NET_AUTH_KEY_LEN);
	*cred = (struct net_cred){ .key_id = id,
				   .fs = 3,
				   .access = id == 7 && w->revoked ? NET_ACCESS_NONE
					     : id == 7		   ? NET_ACCESS_WRITE
								   : NET_ACCESS_READ };
	return 0;
}

/* NET_OP_STORE_PUT at the server: as ECHO (the test's stand-in for a write). */
static void
on_put(struct net_req *r, void *arg)
{
	const struct net_msg *m = net_req_body(r);
	struct iovec iov = { m->buf->data + m->off, m->len };

	(void)arg;
	net_reply(r, 0, &iov, 1);
}

/*
 * keys[i]: host i's key; key_ids[i] (NULL: all 0) its id, for a client's.
 * Host 0 is the server: every other host calls it.
 */
static void
world_init_keyed(struct world *w, uint64_t seed, int n, const uint8_t *const *keys,
		 const uint64_t *ids, const uint32_t *key_ids)
{
	memset(w, 0, sizeof(*w));
	the_world = w;
	w->sim = sim_create(seed);
	w->n = n;
	w->timeout_ns = 20 * SH_NSEC_PER_SEC;
	sh_rand_seed(&w->rng, seed);
	SH_ASSERT_OK(env_addr_parse("127.4.0.99:6666", &w->attacker));
	for (int i = 0; i < n; i++) {
		struct host *h = &w->h[i];
		char ip[32], name[16];

		h->id = ids ? ids[i] : (uint64_t)i + 1;
		h->key = keys[i];
		h->key_id = key_ids ? key_ids[i] : 0;
		h->op = NET_OP_ECHO;
		snprintf(ip, sizeof(ip), "127.4.0.%d:7000", i + 1);
		SH_ASSERT_OK(env_addr_parse(ip, &h->ifc.addr));
		h->ifc.mtu = 1472; /* most calls take several fragments */
		ip[strlen(ip) - 5] = '\0';
		snprintf(name, sizeof(name), "h%d", i);
		h->node = sim_node_create(w->sim, name, ip);
		SH_ASSERT_NOT_NULL(h->node);
	}
	for (int i = 0; i < n; i++) {
		struct host *h = &w->h[i];
		struct net_config c = { .node_id = h->id,
					.ifaces = &h->ifc,
					.nifaces = 1,
					.dead_ns = 30 * SH_NSEC_PER_SEC,
					.auth_key = h->key,
					.auth_key_id = h->key_id,
					.client_key = i == 0 ? client_key : NULL,
					.arg = w };

		SH_ASSERT_OK(net_create(sim_node_env(h->node), &c, &h->net));
		if (i == 0)
			SH_ASSERT_OK(net_handle(h->net, NET_OP_STORE_PUT, on_put, NULL));
		if (i > 0) /* (every endpoint answers NET_OP_ECHO) */
			SH_ASSERT_OK(net_peer_add(h->net, 1, &w->h[0].ifc, 1));
	}
	/* the server knows every backend (as the configuration would list them) */
	for (int i = 1; i < n; i++)
		if (!net_id_is_client(w->h[i].id))
			SH_ASSERT_OK(net_peer_add(w->h[0].net, w->h[i].id, &w->h[i].ifc, 1));
}

static void
world_init(struct world *w, uint64_t seed, int n, const uint8_t *const *keys, const uint64_t *ids)
{
	world_init_keyed(w, seed, n, keys, ids, NULL);
}

static void
world_fini(struct world *w)
{
	for (int i = 0; i < w->n; i++)
		net_destroy(w->h[i].net);
	sim_destroy(w->sim);
	sh_free(w->rec);
}

static bool
all_done(void *arg)
{
	struct world *w = arg;

	for (int i = 1; i < w->n; i++)
		if (w->h[i].ok + w->h[i].timedout + w->h[i].denied < CALLS)
			return false;
	return true;
}

TEST(auth_sessions_work_through_an_adversary)
{
	static struct world w;
	/* the server, two backends, and a client with file system access key 7 */
	const uint8_t *keys[4] = { key_a, key_a, key_a, key_fs };
	const uint64_t ids[4] = { 1, 2, 3, 1ull << 63 | 5 };
	const uint32_t key_ids[4] = { 0, 0, 0, 7 };
	struct sim_net_params p = { .lat_min_ns = 5 * SH_NSEC_PER_USEC,
				    .lat_max_ns = 50 * SH_NSEC_PER_USEC,
				    .loss = 0.03,
				    .dup = 0.03,
				    .reorder = 0.03,
				    .reorder_ns = 500 * SH_NSEC_PER_USEC };
	uint64_t failed = 0, expected = 0, dups = 0;

	world_init_keyed(&w, sh_test_seed(), 4, keys, ids, key_ids);
	w.rec = sh_calloc(RECORDED, sizeof(*w.rec));
	SH_ASSERT_NOT_NULL(w.rec);
	w.attack = true;
	sim_net_set(w.sim, &p);
	sim_net_tap(w.sim, adversary, &w);
	for (int i = 1; i < w.n; i++)
		issue(&w, &w.h[i]);
	SH_ASSERT_MSG(sim_run_until(w.sim, all_done, &w, 300 * SH_NSEC_PER_SEC),
		      "calls still pending after 300 s (seed %llu)",
		      (unsigned long long)sh_test_seed());
	w.attack = false;
	sim_run_for(w.sim, SH_NSEC_PER_SEC); /* what was injected lands */
	for (int i = 0; i < w.n; i++) {
		struct net_stats st;

		net_stats(w.h[i].net, &st);
		SH_ASSERT_MSG(st.auth_failed == w.h[i].expect_failed,
			      "host %d dropped %llu datagrams for their MAC, the adversary spoiled "
			      "%llu that reached it",
			      i, (unsigned long long)st.auth_failed,
			      (unsigned long long)w.h[i].expect_failed);
		failed += st.auth_failed;
		expected += w.h[i].expect_failed;
		dups += st.dup_pkts + st.stale;
		if (i > 0) {
			SH_ASSERT_EQ(w.h[i].ok, CALLS); /* no call lost to the adversary */
			SH_ASSERT_EQ(w.h[i].timedout, 0);
		}
	}
	printf(
	    "adversary: %llu flipped, %llu stripped, %llu forged, %llu replayed; %llu dropped for "
	    "their MAC, %llu duplicates or stale\n",
	    (unsigned long long)w.flipped, (unsigned long long)w.stripped,
	    (unsigned long long)w.forged, (unsigned long long)w.replayed,
	    (unsigned long long)failed, (unsigned long long)dups);
	SH_ASSERT_GT(w.flipped, 10);
	SH_ASSERT_GT(w.stripped, 10);
	SH_ASSERT_GT(w.forged, 10);
	SH_ASSERT_GT(w.replayed, 10);
	SH_ASSERT_EQ(failed, expected);
	world_fini(&w);
}

TEST(auth_endpoints_without_the_key_are_not_heard)
{
	static struct world w;
	/* server (key a), a backend with key a, one with key b, one with none, a client */
	const uint8_t *keys[5] = { key_a, key_a, key_b, NULL, NULL };
	const uint64_t ids[5] = { 1, 2, 3, 4 << 8 | 1, 1ull << 63 | 9 };
	struct net_peer_stats ps[8];
	unsigned np;
	struct net_stats st;

	world_init(&w, sh_test_seed(), 5, keys, ids);
	w.timeout_ns = 3 * SH_NSEC_PER_SEC;
	for (int i = 1; i < w.n; i++)
		issue(&w, &w.h[i]);
	SH_ASSERT(sim_run_until(w.sim, all_done, &w, 120 * SH_NSEC_PER_SEC));
	SH_ASSERT_EQ(w.h[1].ok, CALLS);	    /* the same key */
	SH_ASSERT_EQ(w.h[2].ok, 0);	    /* another cluster's key */
	SH_ASSERT_EQ(w.h[3].ok, 0);	    /* no key */
	SH_ASSERT_EQ(w.h[4].denied, CALLS); /* a client without a key: EACCES, at once */
	SH_ASSERT_EQ(w.h[4].timedout, 0);
	SH_ASSERT(!net_peer_connected(w.h[0].net, 3));
	SH_ASSERT(!net_peer_connected(w.h[0].net, 4 << 8 | 1));
	/* the server counted both, per claimed id; they heard nothing from it either */
	net_stats(w.h[0].net, &st);
	SH_ASSERT_GT(st.auth_failed, 0);
	np = net_peer_stats(w.h[0].net, ps, 8);
	SH_ASSERT_LE(np, 8u);
	for (unsigned i = 0; i < np; i++) {
		bool stranger = ps[i].id == 3 || ps[i].id == (4 << 8 | 1);

		SH_ASSERT_MSG(stranger == (ps[i].auth_failed > 0), "peer %llx: %llu failed",
			      (unsigned long long)ps[i].id, (unsigned long long)ps[i].auth_failed);
		SH_ASSERT(!stranger || ps[i].pkts_received == 0);
	}
	net_stats(w.h[2].net, &st);
	SH_ASSERT_EQ(st.sessions_opened, 0);
	net_stats(w.h[3].net, &st);
	SH_ASSERT_EQ(st.sessions_opened, 0);
	world_fini(&w);
}

TEST(auth_clients_are_heard_under_their_keys_and_refused_without)
{
	static struct world w;
	/*
	 * the server (key a); clients: the cluster's client key; access key 7
	 * (read-write); access key 8 (read-only) reading, then writing; key 7's id
	 * with other bytes; a key id the server does not have
	 */
	const uint8_t *keys[7] = { key_a, key_client, key_fs, key_ro, key_ro, key_b, key_fs };
	const uint64_t c = 1ull << 63;
	const uint64_t ids[7] = { 1, c | 11, c | 12, c | 13, c | 14, c | 15, c | 16 };
	const uint32_t key_ids[7] = { 0, 1, 7, 8, 8, 7, 9 };
	struct net_stats st;

	SH_ASSERT_OK(net_auth_client_key(key_a, key_client));
	world_init_keyed(&w, sh_test_seed(), 7, keys, ids, key_ids);
	w.timeout_ns = 3 * SH_NSEC_PER_SEC;
	w.h[4].op = NET_OP_STORE_PUT;
	for (int i = 1; i < w.n; i++)
		issue(&w, &w.h[i]);
	SH_ASSERT(sim_run_until(w.sim, all_done, &w, 300 * SH_NSEC_PER_SEC));
	SH_ASSERT_EQ(w.h[1].ok, CALLS);	    /* the cluster's client key */
	SH_ASSERT_EQ(w.h[2].ok, CALLS);	    /* an access key */
	SH_ASSERT_EQ(w.h[3].ok, CALLS);	    /* a read-only key, reading */
	SH_ASSERT_EQ(w.h[4].denied, CALLS); /* ... writing: EROFS */
	SH_ASSERT_EQ(w.h[5].ok, 0);	    /* a key's id with other bytes: not heard */
	SH_ASSERT_EQ(w.h[5].denied, 0);
	SH_ASSERT_EQ(w.h[6].ok, 0); /* a key the server does not have: not heard */
	SH_ASSERT_EQ(w.h[6].denied, 0);
	net_stats(w.h[0].net, &st);
	SH_ASSERT_GT(st.auth_failed, 0);
	SH_ASSERT_EQ(st.denied, (uint64_t)CALLS);
	/* key 7 revoked: from the moment the server is told, its calls are refused */
	w.revoked = true;
	net_client_keys_changed(w.h[0].net);
	w.h[2].issued = w.h[2].ok = 0;
	issue(&w, &w.h[2]);
	SH_ASSERT(sim_run_until(w.sim, all_done, &w, 60 * SH_NSEC_PER_SEC));
	SH_ASSERT_EQ(w.h[2].ok, 0);
	SH_ASSERT_EQ(w.h[2].denied, CALLS);
	SH_ASSERT_EQ(w.h[2].timedout, 0);
	world_fini(&w);
}
