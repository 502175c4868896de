// SPDX-License-Identifier: Apache-2.0
/* Authenticated datagrams: keys per session, GMAC trailers (auth.h). */
#include "auth.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <string.h>

#include "../base/base.h"
#include "../env/env.h"

#define SESSION_LABEL "shoal net session v1"
#define CLIENT_LABEL  "shoal client key v1"

struct net_auth {
	uint8_t key[2][NET_AUTH_KEY_LEN];    /* [0] seals and is accepted; [1], if any, accepted */
	uint8_t client[2][NET_AUTH_KEY_LEN]; /* the cluster's client key of each (key id 1) */
	unsigned nkeys;
	uint32_t key_id; /* the id of key[]: 0 (a backend's network key), or a client's */
	uint8_t salt[4];
	uint64_t ctr;		      /* packets sealed: the nonce's counter */
	struct net_mac_key scratch;   /* a key derived for one packet */
	atomic_int busy;	      /* sealing or checking now (its endpoint's thread) */
	struct net_auth *prev, *next; /* every endpoint's, for quiesce() */
	bool linked;
};

/*
 * At the process's exit OpenSSL frees its global state (its own exit
 * handler), while a client's or a node's loop thread may still be sealing
 * a datagram, or a library's destructor still sending one: that crashed a
 * forked child of a preloaded program as libshoal_preload.so flushed its
 * files at exit (tests/cluster/test_preload.py). So the first to need it
 * initializes OpenSSL without that handler (OPENSSL_INIT_NO_ATEXIT: the
 * process's end frees its memory anyway). Where the program initialized
 * OpenSSL first, with the handler (Python's hashlib), a handler of ours,
 * registered after it and so run before it, stops sealing and checking
 * (datagrams are then lost, as at a crash) and waits for those under way.
 */
static atomic_bool stopped;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t all_mu = PTHREAD_MUTEX_INITIALIZER;
static struct net_auth *all; /* under all_mu */

static void
quiesce(void)
{
	atomic_store(&stopped, true);
	pthread_mutex_lock(&all_mu);
	for (struct net_auth *a = all; a != NULL; a = a->next)
		for (int i = 0; i < 1000 && atomic_load(&a->busy) > 0; i++)
			usleep(100);
	pthread_mutex_unlock(&all_mu);
}

static void
exit_hook(void)
{
	OPENSSL_init_crypto(OPENSSL_INIT_NO_ATEXIT, NULL); /* (no effect if it was already) */
	atexit(quiesce);
}

void
net_auth_init(void)
{
	pthread_once(&exit_once, exit_hook);
}

/* (each endpoint's own count: no cache line shared between endpoints' threads) */
static bool
enter(struct net_auth *a)
{
	atomic_fetch_add(&a->busy, 1);
	if (!atomic_load(&stopped))
		return true;
	atomic_fetch_sub(&a->busy, 1);
	return false;
}

static void
leave(struct net_auth *a)
{
	atomic_fetch_sub(&a->busy, 1);
}

int
net_auth_client_key(const uint8_t net_key[NET_AUTH_KEY_LEN], uint8_t out[NET_AUTH_KEY_LEN])
{
	unsigned len = 0;

	if (HMAC(EVP_sha256(), net_key, NET_AUTH_KEY_LEN, (const uint8_t *)CLIENT_LABEL,
		 sizeof(CLIENT_LABEL) - 1, out, &len) == NULL ||
	    len != NET_AUTH_KEY_LEN)
		return -EIO;
	return 0;
}

int
net_auth_create(struct env *env, const uint8_t key[NET_AUTH_KEY_LEN],
		const uint8_t also[NET_AUTH_KEY_LEN], uint32_t key_id, struct net_auth **out)
{
	struct net_auth *a = sh_calloc(1, sizeof(*a));

	if (a == NULL)
		return -ENOMEM;
	net_auth_init();
	memcpy(a->key[0], key, NET_AUTH_KEY_LEN);
	a->nkeys = 1;
	a->key_id = key_id;
	if (also != NULL && memcmp(also, key, NET_AUTH_KEY_LEN) != 0)
		memcpy(a->key[a->nkeys++], also, NET_AUTH_KEY_LEN);
	for (unsigned m = 0; m < a->nkeys && key_id == NET_KEY_NETWORK; m++)
		if (net_auth_client_key(a->key[m], a->client[m]) < 0) {
			net_auth_destroy(a);
			return -EIO;
		}
	env_random(env, a->salt, sizeof(a->salt));
	pthread_mutex_lock(&all_mu);
	a->next = all;
	if (all != NULL)
		all->prev = a;
	all = a;
	a->linked = true;
	pthread_mutex_unlock(&all_mu);
	*out = a;
	return 0;
}

uint32_t
net_auth_key_id(const struct net_auth *a)
{
	return a->key_id;
}

unsigned
net_auth_keys(const struct net_auth *a, uint32_t key_id, const uint8_t (**keys)[NET_AUTH_KEY_LEN])
{
	if (key_id == a->key_id) {
		*keys = a->key;
		return a->nkeys;
	}
	if (key_id == NET_KEY_CLUSTER_CLIENT && a->key_id == NET_KEY_NETWORK) {
		*keys = a->client;
		return a->nkeys;
	}
	*keys = NULL;
	return 0;
}

void
net_mac_key_fini(struct net_mac_key *k)
{
	EVP_CIPHER_CTX_free(k->ctx);
	memset(k, 0, sizeof(*k));
}

void
net_auth_destroy(struct net_auth *a)
{
	if (a == NULL)
		return;
	if (a->linked) {
		pthread_mutex_lock(&all_mu);
		if (a->prev != NULL)
			a->prev->next = a->next;
		else
			all = a->next;
		if (a->next != NULL)
			a->next->prev = a->prev;
		pthread_mutex_unlock(&all_mu);
	}
	net_mac_key_fini(&a->scratch);
	OPENSSL_cleanse(a->key, sizeof(a->key));
	OPENSSL_cleanse(a->client, sizeof(a->client));
	sh_free(a);
}

static void
le64(uint8_t *b, uint64_t v)
{
	for (unsigned i = 0; i < 8; i++)
		b[i] = (uint8_t)(v >> (8 * i));
}

static bool
key_is(const struct net_mac_key *k, const struct net_pkt *h)
{
	return k->valid && k->src_id == h->src_id && k->dst_id == h->dst_id &&
	       k->src_inc == h->src_inc && k->dst_inc == h->dst_inc && k->sess == h->sess &&
	       k->key_id == h->key_id;
}

/* k becomes the key of the session h names, derived from master (h's key id's m-th). */
static int
key_derive(const uint8_t *master, unsigned m, struct net_mac_key *k, const struct net_pkt *h)
{
	uint8_t msg[sizeof(SESSION_LABEL) - 1 + 36], key[EVP_MAX_MD_SIZE];
	size_t off = sizeof(SESSION_LABEL) - 1;
	unsigned klen = 0;
	int rc = -EIO;

	memcpy(msg, SESSION_LABEL, off);
	le64(msg + off, h->src_id);
	le64(msg + off + 8, h->dst_id);
	le64(msg + off + 16, h->src_inc);
	le64(msg + off + 24, h->dst_inc);
	for (unsigned i = 0; i < 4; i++)
		msg[off + 32 + i] = (uint8_t)(h->sess >> (8 * i));
	k->valid = false;
	if (k->ctx == NULL && (k->ctx = EVP_CIPHER_CTX_new()) == NULL)
		return -ENOMEM;
	if (HMAC(EVP_sha256(), master, NET_AUTH_KEY_LEN, msg, sizeof(msg), key, &klen) == NULL ||
	    klen != 32)
		goto out;
	if (EVP_EncryptInit_ex(k->ctx, EVP_aes_256_gcm(), NULL, key, NULL) != 1)
		goto out;
	k->src_id = h->src_id;
	k->dst_id = h->dst_id;
	k->src_inc = h->src_inc;
	k->dst_inc = h->dst_inc;
	k->sess = h->sess;
	k->key_id = h->key_id;
	k->master = (uint8_t)m;
	k->valid = true;
	rc = 0;
out:
	OPENSSL_cleanse(key, sizeof(key));
	return rc;
}

/* The GCM tag of the bytes in iov under k with nonce (no plaintext: GMAC). */
static int
gmac(struct net_mac_key *k, const uint8_t *nonce, const struct iovec *iov, unsigned iovcnt,
     uint8_t tag[NET_MAC_TAG])
{
	uint8_t none[16];
	int len;

	if (EVP_EncryptInit_ex(k->ctx, NULL, NULL, NULL, nonce) != 1)
		return -EIO;
	for (unsigned i = 0; i < iovcnt; i++)
		if (iov[i].iov_len > 0 && EVP_EncryptUpdate(k->ctx, NULL, &len, iov[i].iov_base,
							    (int)iov[i].iov_len) != 1)
			return -EIO;
	if (EVP_EncryptFinal_ex(k->ctx, none, &len) != 1 ||
	    EVP_CIPHER_CTX_ctrl(k->ctx, EVP_CTRL_GCM_GET_TAG, NET_MAC_TAG, tag) != 1)
		return -EIO;
	return 0;
}

static int
seal(struct net_auth *a, struct net_mac_key *k, const uint8_t *master, const struct net_pkt *h,
     const struct iovec *iov, unsigned iovcnt, uint8_t trailer[NET_MAC_TRAILER])
{
	int rc;

	if (k == NULL)
		k = &a->scratch;
	if (master == NULL)
		master = a->key[0];
	if ((!key_is(k, h) || k->master != 0) && (rc = key_derive(master, 0, k, h)) < 0)
		return rc;
	memcpy(trailer, a->salt, sizeof(a->salt));
	le64(trailer + sizeof(a->salt), a->ctr++);
	return gmac(k, trailer, iov, iovcnt, trailer + NET_MAC_NONCE);
}

/* Whether pkt's tag is right under key k. 0, -EACCES, -EIO. */
static int
verify(struct net_mac_key *k, const struct net_pkt *pkt, const uint8_t *b)
{
	struct iovec iov = { (void *)b, (size_t)(pkt->mac - b) };
	uint8_t tag[NET_MAC_TAG];
	int rc = gmac(k, pkt->mac, &iov, 1, tag);

	if (rc < 0)
		return rc;
	return CRYPTO_memcmp(tag, pkt->mac + NET_MAC_NONCE, NET_MAC_TAG) == 0 ? 0 : -EACCES;
}

static int
check(struct net_auth *a, struct net_mac_key *k, const uint8_t (*keys)[NET_AUTH_KEY_LEN],
      unsigned nkeys, const struct net_pkt *pkt, const uint8_t *b, size_t len)
{
	int rc = -EACCES;

	if (!(pkt->flags & NET_FLAG_MAC) || pkt->mac == NULL || pkt->mac < b ||
	    pkt->mac + NET_MAC_TRAILER != b + len)
		return -EACCES;
	if (k != NULL && key_is(k, pkt) && (rc = verify(k, pkt, b)) == 0)
		return 0;
	/* derived anew from each key it may be under (two while the secret is rotated) */
	for (unsigned m = 0; m < nkeys; m++) {
		if (k != NULL && key_is(k, pkt) && k->master == m)
			continue; /* tried above */
		if ((!key_is(&a->scratch, pkt) || a->scratch.master != m) &&
		    (rc = key_derive(keys[m], m, &a->scratch, pkt)) < 0)
			return rc;
		rc = verify(&a->scratch, pkt, b);
		if (rc == 0) {
			rc = (int)m;
			break;
		}
	}
	if (rc >= 0 && k != NULL) {
		/* proved: the peer's cache takes this key */
		struct net_mac_key t = *k;

		*k = a->scratch;
		a->scratch = t;
	}
	return rc;
}

int
net_auth_seal(struct net_auth *a, struct net_mac_key *k, const uint8_t *master,
	      const struct net_pkt *h, const struct iovec *iov, unsigned iovcnt,
	      uint8_t trailer[NET_MAC_TRAILER])
{
	int rc;

	if (!enter(a))
		return -ESHUTDOWN; /* the process exits */
	rc = seal(a, k, master, h, iov, iovcnt, trailer);
	leave(a);
	return rc;
}

int
net_auth_check(struct net_auth *a, struct net_mac_key *k, const uint8_t (*keys)[NET_AUTH_KEY_LEN],
	       unsigned nkeys, const struct net_pkt *pkt, const uint8_t *b, size_t len)
{
	int rc;

	if (!enter(a))
		return -ESHUTDOWN;
	rc = check(a, k, keys, nkeys, pkt, b, len);
	leave(a);
	return rc;
}
