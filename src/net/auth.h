/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Authenticated datagrams (docs/security.md, "Datagrams between backends").
 *
 * An endpoint given the cluster's network key (net_config.auth_key, derived
 * from the cluster secret) puts a MAC on every datagram it sends to a
 * backend and takes none from a backend without a valid one.
 *
 * A client holds a key of its own instead (docs/security.md, "Clients'
 * keys"): the cluster's client key (key id 1, derived from the network key:
 * net_auth_client_key), or a file system's access key (id 2 and up, made by
 * `shoal fs key create`; a backend finds it with net_config.client_key).
 * Its datagrams, and the backends' to it, carry a MAC under that key, its
 * id in the header. A client without a key sends none and gets none: a
 * backend serves it nothing but the configuration (rpc_ops.h).
 *
 * The MAC: AES-256-GCM with no plaintext (GMAC) over the whole datagram
 * before the trailer (header with its crc, ranges, payload), under a key
 * of the packet's own session, derived from the network key and the
 * header's five fields that name the session:
 *
 *   key = HMAC-SHA-256(net key, "shoal net session v1" || src id ||
 *                      dst id || src incarnation || dst incarnation ||
 *                      session number)   (little-endian u64 x4, u32)
 *
 * So any receiver holding the network key checks any packet from its
 * header alone, with no state (a RESET, a HELLO from a peer never seen, a
 * packet of a session already gone), and a packet moved into another
 * session, direction or incarnation fails. The nonce (12 bytes, sent in
 * the trailer) is the sender's 4 random bytes and a 64-bit counter of every
 * packet it ever sealed: never twice under one key, as GCM needs.
 *
 * A packet replayed within its own session passes the MAC and is what the
 * session already drops: a duplicate sequence number, an old ack, a HELLO
 * of a session that is not new. A node joins by proving it holds the key
 * without sending it: its HELLO_ACK (or first packet) is sealed under a
 * key bound to the incarnation the other side chose at its start.
 *
 * The header's key id says which key the session keys come from: 0 the
 * network key, else the client's; it is under the MAC like every field.
 *
 * Per peer, the key last used each way is kept ready (struct net_mac_key:
 * the derivation costs an HMAC and an AES key schedule, about 2 us; a
 * packet's MAC about 0.2 us plus 0.12 ns a byte here, bench/crypto).
 */
#ifndef SH_NET_AUTH_H
#define SH_NET_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "net.h"

struct env;
struct net_auth;

/* A derived key, kept with the header fields it is for. */
struct net_mac_key {
	uint64_t src_id, dst_id, src_inc, dst_inc;
	uint32_t sess;
	uint32_t key_id; /* the header's key id */
	uint8_t
	    master; /* which of that id's keys it comes from: 0 the one that seals, 1 the other */
	bool valid;
	void *ctx; /* EVP_CIPHER_CTX, keyed */
};

#define NET_KEY_NETWORK	       0u /* key id: the cluster's network key (backends) */
#define NET_KEY_CLUSTER_CLIENT 1u /* key id: the cluster's client key */

/*
 * key seals and is accepted; also (NULL: none) is accepted too, while the
 * cluster's secret is rotated (docs/security.md). key_id: the key's id,
 * NET_KEY_NETWORK for a backend's (which then also accepts the cluster's
 * client keys derived from them), a client's own otherwise. The sender's
 * random nonce prefix comes from env (seeded in the simulator). 0, -ENOMEM,
 * -EIO.
 */
int net_auth_create(struct env *env, const uint8_t key[NET_AUTH_KEY_LEN],
		    const uint8_t also[NET_AUTH_KEY_LEN], uint32_t key_id, struct net_auth **out);
uint32_t net_auth_key_id(const struct net_auth *a);
/*
 * Initialize OpenSSL so that it does not free itself at exit, and, where
 * the program set it up first, stop sealing and checking datagrams before
 * it does (auth.c). net_auth_create does it; a library whose destructor
 * uses the network (libshoal_preload.so flushing files) does it first.
 */
void net_auth_init(void);
/* The cluster's client key: HMAC-SHA-256(network key, "shoal client key v1"). 0, -EIO. */
int net_auth_client_key(const uint8_t net_key[NET_AUTH_KEY_LEN], uint8_t out[NET_AUTH_KEY_LEN]);
/*
 * The keys of key id an endpoint holds itself: its own (one, two while the
 * secret is rotated), a backend's cluster client keys (id 1); else none.
 * How many, *keys pointing at them.
 */
unsigned net_auth_keys(const struct net_auth *a, uint32_t key_id,
		       const uint8_t (**keys)[NET_AUTH_KEY_LEN]);
void net_auth_destroy(struct net_auth *a);
void net_mac_key_fini(struct net_mac_key *k);

/*
 * The trailer of a packet whose header h (with NET_FLAG_MAC in its flags)
 * is already encoded: iov holds the encoded header, ranges and payload.
 * k: the sender's cached key for this peer (re-derived if h names another
 * session), or NULL for a one-off. master: the key h's key id names (a
 * client's, at a backend), NULL for the endpoint's own. 0 or -EIO;
 * -ESHUTDOWN once the process exits (auth.c: OpenSSL is going away).
 */
int net_auth_seal(struct net_auth *a, struct net_mac_key *k, const uint8_t *master,
		  const struct net_pkt *h, const struct iovec *iov, unsigned iovcnt,
		  uint8_t trailer[NET_MAC_TRAILER]);

/*
 * Whether a decoded packet pkt (the datagram b, len bytes) carries a valid
 * MAC under one of the nkeys keys its key id names: which one (0 up), or
 * -EACCES (none, or a wrong one), -EIO. k: the receiver's cached key for the claimed
 * sender, or NULL; it takes a newly derived key only once a packet proved
 * it, so forged packets cannot push a good key out.
 */
int net_auth_check(struct net_auth *a, struct net_mac_key *k,
		   const uint8_t (*keys)[NET_AUTH_KEY_LEN], unsigned nkeys,
		   const struct net_pkt *pkt, const uint8_t *b, size_t len);

#endif /* SH_NET_AUTH_H */
