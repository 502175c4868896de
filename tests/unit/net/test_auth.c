// SPDX-License-Identifier: Apache-2.0
/*
 * Authenticated datagrams (src/net/auth.h): the trailer's format, a sealed
 * packet checked as it came, and every change that must fail it: a byte of
 * the datagram, the tag, another key, another session, direction or
 * incarnation. A forged packet never pushes the receiver's good key out.
 */
#include <errno.h>

#include "../../../src/env/env_sim.h"
#include "../../../src/net/auth.h"
#include "../../lib/test.h"

static const uint8_t key1[NET_AUTH_KEY_LEN] = { 1, 2, 3 };
static const uint8_t key2[NET_AUTH_KEY_LEN] = { 1, 2, 4 };

/* A DATA packet with a 30-byte message, sealed by a; returns its length in buf. */
static size_t
sealed(struct net_auth *a, struct net_mac_key *k, struct net_pkt *h, uint8_t *buf)
{
	uint8_t body[NET_CHUNK_HDR + 30];
	struct net_chunk c = { .msg_id = 1, .msg_len = 30, .frag_cnt = 1, .len = 30 };
	struct iovec iov[2];
	size_t n;

	net_chunk_hdr_put(body, &c);
	for (unsigned i = 0; i < 30; i++)
		body[NET_CHUNK_HDR + i] = (uint8_t)i;
	h->flags = NET_FLAG_MAC;
	h->nchunks = 1;
	h->payload_len = sizeof(body);
	iov[0] = (struct iovec){ body, sizeof(body) };
	n = net_pkt_encode_hdr(h, buf, iov, 1);
	memcpy(buf + n, body, sizeof(body));
	iov[0] = (struct iovec){ buf, n + sizeof(body) };
	SH_ASSERT_OK(net_auth_seal(a, k, NULL, h, iov, 1, buf + n + sizeof(body)));
	return n + sizeof(body) + NET_MAC_TRAILER;
}

static struct net_pkt
header(void)
{
	return (struct net_pkt){ .type = NET_PKT_DATA,
				 .src_id = 2,
				 .dst_id = 1,
				 .src_inc = 100,
				 .dst_inc = 200,
				 .sess = 3,
				 .seq = 9 };
}

static int
check(struct net_auth *a, struct net_mac_key *k, const uint8_t *buf, size_t n)
{
	const uint8_t(*keys)[NET_AUTH_KEY_LEN];
	struct net_pkt p;
	int rc = net_pkt_decode(buf, n, &p);
	unsigned nkeys = rc < 0 ? 0 : net_auth_keys(a, p.key_id, &keys);

	if (rc == 0)
		rc = net_auth_check(a, k, keys, nkeys, &p, buf, n);
	return rc < 0 ? rc : 0;
}

TEST(auth_sealed_packets_check_and_changed_ones_fail)
{
	struct sim *s = sim_create(sh_test_seed());
	struct sim_node *node = sim_node_create(s, "n", "127.5.0.1");
	struct net_auth *tx, *rx, *other;
	struct net_mac_key ktx = { 0 }, krx = { 0 };
	struct net_pkt h = header(), q;
	uint8_t buf[512], bad[512], again[512];
	size_t n;

	SH_ASSERT_OK(net_auth_create(sim_node_env(node), key1, NULL, 0, &tx));
	SH_ASSERT_OK(net_auth_create(sim_node_env(node), key1, NULL, 0, &rx));
	SH_ASSERT_OK(net_auth_create(sim_node_env(node), key2, NULL, 0, &other));
	n = sealed(tx, &ktx, &h, buf);
	SH_ASSERT_OK(net_pkt_decode(buf, n, &q));
	SH_ASSERT(q.mac == buf + n - NET_MAC_TRAILER);
	SH_ASSERT_EQ(q.payload_len, NET_CHUNK_HDR + 30);
	SH_ASSERT_OK(check(rx, &krx, buf, n));
	SH_ASSERT(krx.valid); /* proved: the peer's key is kept */
	SH_ASSERT_OK(check(rx, NULL, buf, n));
	SH_ASSERT_ERR(check(other, NULL, buf, n), -EACCES);
	/* every bit of the datagram before the trailer, and of the tag */
	for (size_t bit = 0; bit < n * 8; bit++) {
		int rc;

		memcpy(bad, buf, n);
		bad[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		if (bit / 8 < n - NET_MAC_TRAILER) {
			/* mend the crc as a forger would */
			uint32_t crc;

			memset(bad + 72, 0, 4);
			crc = sh_crc32c(0, bad, n - NET_MAC_TRAILER);
			memcpy(bad + 72, &crc, 4);
			if (bit / 8 >= 72 && bit / 8 < 76)
				continue;
		}
		rc = check(rx, &krx, bad, n);
		SH_ASSERT_MSG(rc < 0, "bit %zu flipped was accepted", bit);
	}
	/* the forgeries did not push the good key out */
	SH_ASSERT(krx.valid && krx.sess == 3 && krx.src_inc == 100);
	/* the same bytes under another session, direction or incarnation */
	{
		struct net_pkt v[4] = { header(), header(), header(), header() };

		v[0].sess = 4;
		v[1].src_id = 1, v[1].dst_id = 2;
		v[2].dst_inc = 201;
		v[3].src_inc = 101;
		for (unsigned i = 0; i < 4; i++) {
			size_t m = sealed(tx, NULL, &v[i], again);

			SH_ASSERT_OK(check(rx, NULL, again, m));
			/* its tag on the first packet's header: refused */
			memcpy(bad, buf, n);
			memcpy(bad + n - NET_MAC_TRAILER, again + m - NET_MAC_TRAILER,
			       NET_MAC_TRAILER);
			SH_ASSERT_ERR(check(rx, &krx, bad, n), -EACCES);
		}
	}
	/* without the trailer, or with it cut short */
	memcpy(bad, buf, n);
	bad[6] = 0;
	SH_ASSERT_ERR(check(rx, &krx, bad, n), -EBADMSG);
	SH_ASSERT_LT(check(rx, &krx, buf, n - 1), 0);
	/* another flag bit */
	memcpy(bad, buf, n);
	bad[6] = 3;
	SH_ASSERT_ERR(check(rx, &krx, bad, n), -EBADMSG);
	/* nonces never repeat: two seals of one header differ */
	{
		struct net_pkt h2 = header();
		size_t m = sealed(tx, &ktx, &h2, again);

		SH_ASSERT_EQ(m, n);
		SH_ASSERT(memcmp(again + n - NET_MAC_TRAILER, buf + n - NET_MAC_TRAILER,
				 NET_MAC_NONCE) != 0);
		SH_ASSERT_OK(check(rx, &krx, again, m));
	}
	net_mac_key_fini(&ktx);
	net_mac_key_fini(&krx);
	net_auth_destroy(tx);
	net_auth_destroy(rx);
	net_auth_destroy(other);
	sim_destroy(s);
}

/*
 * A rotation of the secret: an endpoint that seals with one key and also
 * accepts another hears both; one that knows only the old key does not
 * hear the new.
 */
TEST(auth_a_second_key_is_accepted_while_the_secret_rotates)
{
	struct sim *s = sim_create(sh_test_seed());
	struct sim_node *node = sim_node_create(s, "n", "127.5.0.1");
	struct net_auth *old_only, *old_new, *new_old, *new_only;
	struct net_mac_key k1 = { 0 }, k2 = { 0 };
	struct net_pkt h = header();
	uint8_t by_old[512], by_new[512];
	size_t n_old, n_new;

	SH_ASSERT_OK(net_auth_create(sim_node_env(node), key1, NULL, 0, &old_only));
	SH_ASSERT_OK(net_auth_create(sim_node_env(node), key1, key2, 0, &old_new));
	SH_ASSERT_OK(net_auth_create(sim_node_env(node), key2, key1, 0, &new_old));
	SH_ASSERT_OK(net_auth_create(sim_node_env(node), key2, NULL, 0, &new_only));
	n_old = sealed(old_new, NULL, &h, by_old); /* seals with its first key: the old */
	h = header();
	n_new = sealed(new_old, NULL, &h, by_new);
	SH_ASSERT_OK(check(old_only, NULL, by_old, n_old));
	SH_ASSERT_ERR(check(old_only, NULL, by_new, n_new), -EACCES);
	SH_ASSERT_ERR(check(new_only, NULL, by_old, n_old), -EACCES);
	SH_ASSERT_OK(check(new_only, NULL, by_new, n_new));
	for (int i = 0; i < 2; i++) { /* both, through one cached key, in either order */
		SH_ASSERT_OK(check(old_new, &k1, by_new, n_new));
		SH_ASSERT_EQ(k1.master, 1);
		SH_ASSERT_OK(check(old_new, &k1, by_old, n_old));
		SH_ASSERT_EQ(k1.master, 0);
		SH_ASSERT_OK(check(new_old, &k2, by_old, n_old));
		SH_ASSERT_EQ(k2.master, 1);
		SH_ASSERT_OK(check(new_old, &k2, by_new, n_new));
		SH_ASSERT_EQ(k2.master, 0);
	}
	net_mac_key_fini(&k1);
	net_mac_key_fini(&k2);
	net_auth_destroy(old_only);
	net_auth_destroy(old_new);
	net_auth_destroy(new_old);
	net_auth_destroy(new_only);
	sim_destroy(s);
}
