/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Authenticated datagrams (docs/security.md, "Datagrams between backends").
 *
 * An endpoint given the cluster's network key (net_config.auth_key, derived
 * from the cluster secret) puts a MAC on every datagram it sends to a
 * backend and takes none from a backend without a valid one. Clients'
 * endpoint ids (net_id_is_client) are outside this until file-system access
 * keys give them a key of their own: to and from them, nothing changes.
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
	uint8_t master; /* which network key it comes from: 0 the one that seals, 1 the other */
	bool valid;
	void *ctx; /* EVP_CIPHER_CTX, keyed */
};

/*
 * key seals and is accepted; also (NULL: none) is accepted too, while the
 * cluster's secret is rotated (docs/security.md). The sender's random nonce
 * prefix comes from env (seeded in the simulator). 0, -ENOMEM.
 */
int net_auth_create(struct env *env, const uint8_t key[NET_AUTH_KEY_LEN],
		    const uint8_t also[NET_AUTH_KEY_LEN], struct net_auth **out);
void net_auth_destroy(struct net_auth *a);
void net_mac_key_fini(struct net_mac_key *k);

/*
 * The trailer of a packet whose header h (with NET_FLAG_MAC in its flags)
 * is already encoded: iov holds the encoded header, ranges and payload.
 * k: the sender's cached key for this peer (re-derived if h names another
 * session), or NULL for a one-off. 0 or -EIO.
 */
int net_auth_seal(struct net_auth *a, struct net_mac_key *k, const struct net_pkt *h,
		  const struct iovec *iov, unsigned iovcnt, uint8_t trailer[NET_MAC_TRAILER]);

/*
 * Whether a decoded packet pkt (the datagram b, len bytes) carries a valid
 * MAC: 0, or -EACCES (none, or a wrong one), -EIO. k: the receiver's cached
 * key for the claimed sender, or NULL; it takes a newly derived key only
 * once a packet proved it, so forged packets cannot push a good key out.
 */
int net_auth_check(struct net_auth *a, struct net_mac_key *k, const struct net_pkt *pkt,
		   const uint8_t *b, size_t len);

#endif /* SH_NET_AUTH_H */
