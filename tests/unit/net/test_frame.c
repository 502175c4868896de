// SPDX-License-Identifier: Apache-2.0
/*
 * Frames built and parsed in user space (net/frame.h) and Shoal's own ARP
 * table (net/arp.h): checksums against a known header, round trips,
 * every single-bit corruption of a datagram refused, VLAN tags, and ARP's
 * answers, resolution, refresh, giving up and an address that moved.
 */
#include <errno.h>
#include <string.h>

#include "../../../src/base/base.h"
#include "../../../src/net/arp.h"
#include "../../../src/net/frame.h"
#include "../../lib/test.h"

#define IP(a, b, c, d) ((uint32_t)(a) << 24 | (uint32_t)(b) << 16 | (uint32_t)(c) << 8 | (d))
#define MS	       (1000ull * 1000)

static const struct sh_frame_end A = { { 0x02, 0, 0, 0, 0, 0x0a }, IP(10, 99, 0, 1), 7401 },
				 B = { { 0x02, 0, 0, 0, 0, 0x0b }, IP(10, 99, 0, 2), 7402 };

TEST(frame_ipv4_checksum_of_a_known_header)
{
	/* RFC 1071's sum over a header whose checksum is known to be 0xb861 */
	uint8_t h[20] = { 0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11,
			  0x00, 0x00, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7 };

	SH_ASSERT_EQ(sh_csum_fold(sh_csum_add(0, h, sizeof(h))), 0xb861);
	h[10] = 0xb8;
	h[11] = 0x61;
	SH_ASSERT_EQ(sh_csum_fold(sh_csum_add(0, h, sizeof(h))), 0);
	/* an odd length: the last byte counts as the high half of a word */
	SH_ASSERT_EQ(sh_csum_fold(sh_csum_add(0, (const uint8_t *)"\x01", 1)), 0xfeff);
}

/* A UDP frame from A to B with plen bytes of payload (i*7): its length. */
static size_t
udp_frame(uint8_t *f, size_t plen, unsigned flags)
{
	for (size_t i = 0; i < plen; i++)
		f[SH_FRAME_UDP_HLEN + i] = (uint8_t)(i * 7);
	SH_ASSERT_EQ(sh_frame_udp_head(f, SH_FRAME_UDP_HLEN, &A, &B, f + SH_FRAME_UDP_HLEN, plen,
				       0x1234, flags),
		     SH_FRAME_UDP_HLEN);
	return SH_FRAME_UDP_HLEN + plen;
}

TEST(frame_udp_round_trips_and_refuses_every_corruption)
{
	static uint8_t f[SH_FRAME_UDP_HLEN + 1001];
	struct sh_frame p;
	size_t len = udp_frame(f, 1001, 0);

	SH_ASSERT_OK(sh_frame_parse(f, len, &p));
	SH_ASSERT_EQ(p.kind, SH_FRAME_UDP);
	SH_ASSERT_MEMEQ(p.src.mac, A.mac, 6);
	SH_ASSERT_MEMEQ(p.dst.mac, B.mac, 6);
	SH_ASSERT_EQ(p.src.ip, A.ip);
	SH_ASSERT_EQ(p.dst.ip, B.ip);
	SH_ASSERT_EQ(p.src.port, A.port);
	SH_ASSERT_EQ(p.dst.port, B.port);
	SH_ASSERT_EQ(p.plen, 1001u);
	SH_ASSERT(p.payload == f + SH_FRAME_UDP_HLEN);
	/* every bit of the IPv4 and UDP headers and of the payload is covered by a checksum, or
	 * makes the frame something else */
	for (size_t i = SH_ETH_HLEN; i < len; i++) {
		for (int bit = 0; bit < 8; bit++) {
			int rc;

			f[i] ^= (uint8_t)(1 << bit);
			rc = sh_frame_parse(f, len, &p);
			SH_ASSERT_MSG(rc < 0 || p.kind != SH_FRAME_UDP,
				      "byte %zu bit %d flipped: taken as a datagram", i, bit);
			f[i] ^= (uint8_t)(1 << bit);
		}
	}
	/* a frame cut short is malformed; one padded past its datagram is not */
	for (size_t cut = SH_ETH_HLEN; cut < len; cut += 97)
		SH_ASSERT_ERR(sh_frame_parse(f, cut, &p), -EBADMSG);
	SH_ASSERT_ERR(sh_frame_parse(f, 9, &p), -EBADMSG);
	len = udp_frame(f, 3, 0);
	SH_ASSERT_OK(sh_frame_parse(f, SH_FRAME_MIN, &p));
	SH_ASSERT_EQ(p.plen, 3u);
	SH_ASSERT_ERR(sh_frame_udp_head(f, sizeof(f), &A, &B, f, SH_UDP_PAYLOAD_MAX + 1, 0, 0),
		      -EMSGSIZE);
	SH_ASSERT_ERR(sh_frame_udp_head(f, SH_FRAME_UDP_HLEN - 1, &A, &B, f, 1, 0, 0), -EINVAL);
}

TEST(frame_offloaded_checksum_vlan_tags_and_others)
{
	static uint8_t f[SH_FRAME_UDP_HLEN + 64 + 4], g[sizeof(f)];
	struct sh_frame p;
	size_t len = udp_frame(f, 64, SH_FRAME_NO_UDP_CSUM);

	/* the port computes it from the pseudo-header's sum left in the field: done here as
	 * a port would, the datagram is taken */
	{
		uint8_t *udp = f + SH_ETH_HLEN + SH_IP4_HLEN;
		uint16_t c;

		SH_ASSERT_NE(udp[6] << 8 | udp[7], 0);
		SH_ASSERT_ERR(sh_frame_parse(f, len, &p), -EBADMSG); /* not yet complete */
		c = sh_csum_fold(sh_csum_add(0, udp, SH_UDP_HLEN + 64));
		udp[6] = (uint8_t)(c >> 8);
		udp[7] = (uint8_t)c;
	}
	SH_ASSERT_OK(sh_frame_parse(f, len, &p));
	SH_ASSERT_EQ(p.kind, SH_FRAME_UDP);
	/* an 802.1Q tag (VLAN 42) before the ethertype */
	memcpy(g, f, 12);
	g[12] = 0x81;
	g[13] = 0x00;
	g[14] = 0x20; /* priority 1 */
	g[15] = 42;
	memcpy(g + 16, f + 12, len - 12);
	SH_ASSERT_OK(sh_frame_parse(g, len + 4, &p));
	SH_ASSERT_EQ(p.kind, SH_FRAME_UDP);
	SH_ASSERT_EQ(p.vlan, 42);
	SH_ASSERT_EQ(p.plen, 64u);
	/* TCP, IPv6 and a fragment are not for us */
	f[SH_ETH_HLEN + 9] = 6;
	f[SH_ETH_HLEN + 10] = f[SH_ETH_HLEN + 11] = 0;
	{
		uint16_t c = sh_csum_fold(sh_csum_add(0, f + SH_ETH_HLEN, SH_IP4_HLEN));

		f[SH_ETH_HLEN + 10] = (uint8_t)(c >> 8);
		f[SH_ETH_HLEN + 11] = (uint8_t)c;
	}
	SH_ASSERT_OK(sh_frame_parse(f, len, &p));
	SH_ASSERT_EQ(p.kind, SH_FRAME_OTHER);
	f[12] = 0x86;
	f[13] = 0xdd;
	SH_ASSERT_OK(sh_frame_parse(f, len, &p));
	SH_ASSERT_EQ(p.kind, SH_FRAME_OTHER);
}

static struct sh_arp *
table(const struct sh_frame_end *me)
{
	struct sh_arp_config c = {
		.nips = 1, .ips = { me->ip }, .retry_ns = 100 * MS, .ttl_ns = 1000 * MS, .tries = 3
	};
	struct sh_arp *a;

	memcpy(c.mac, me->mac, 6);
	SH_ASSERT_OK(sh_arp_create(&c, &a));
	return a;
}

/* out parsed as an ARP frame. */
static struct sh_frame
arp_of(const uint8_t *out, size_t len)
{
	struct sh_frame f;

	SH_ASSERT_OK(sh_frame_parse(out, len, &f));
	SH_ASSERT_EQ(f.kind, SH_FRAME_ARP);
	return f;
}

TEST(arp_resolves_a_peer_that_answers_for_itself)
{
	struct sh_arp *a = table(&A), *b = table(&B);
	uint8_t out[SH_FRAME_MIN], back[SH_FRAME_MIN], mac[6];
	struct sh_arp_entry e[4];
	struct sh_frame req, rep;
	size_t olen, blen;

	/* A asks for B: a broadcast request */
	SH_ASSERT_ERR(sh_arp_resolve(a, B.ip, 1 * MS, mac, out, sizeof(out), &olen), -EAGAIN);
	SH_ASSERT_EQ(olen, (size_t)SH_FRAME_MIN);
	req = arp_of(out, olen);
	SH_ASSERT_EQ(req.op, SH_ARP_REQUEST);
	SH_ASSERT_MEMEQ(req.dst.mac, "\xff\xff\xff\xff\xff\xff", 6);
	SH_ASSERT_EQ(req.spa, A.ip);
	SH_ASSERT_EQ(req.tpa, B.ip);
	/* asked again at once: nothing more to send before the retry */
	SH_ASSERT_ERR(sh_arp_resolve(a, B.ip, 2 * MS, mac, out, sizeof(out), &olen), -EAGAIN);
	SH_ASSERT_EQ(olen, 0u);
	/* B answers (and learns A, who asked for one of its addresses) */
	SH_ASSERT_EQ(sh_arp_input(b, &req, 3 * MS, back, sizeof(back), &blen), 1);
	rep = arp_of(back, blen);
	SH_ASSERT_EQ(rep.op, SH_ARP_REPLY);
	SH_ASSERT_MEMEQ(rep.dst.mac, A.mac, 6);
	SH_ASSERT_MEMEQ(rep.sha, B.mac, 6);
	SH_ASSERT_EQ(rep.spa, B.ip);
	SH_ASSERT_EQ(sh_arp_list(b, e, 4), 1u);
	SH_ASSERT(e[0].resolved && e[0].ip == A.ip && memcmp(e[0].mac, A.mac, 6) == 0);
	/* A learns B from the reply */
	SH_ASSERT_EQ(sh_arp_input(a, &rep, 4 * MS, out, sizeof(out), &olen), 0);
	SH_ASSERT_OK(sh_arp_resolve(a, B.ip, 5 * MS, mac, out, sizeof(out), &olen));
	SH_ASSERT_MEMEQ(mac, B.mac, 6);
	SH_ASSERT_EQ(olen, 0u);
	/* a request for an address not ours is not answered, nor its sender learned */
	req.tpa = IP(10, 99, 0, 77);
	req.spa = IP(10, 99, 0, 66);
	SH_ASSERT_EQ(sh_arp_input(b, &req, 6 * MS, back, sizeof(back), &blen), 0);
	SH_ASSERT_EQ(sh_arp_list(b, e, 4), 1u);
	/* nor our own request come back (our MAC and our address) */
	req.tpa = B.ip;
	req.spa = B.ip;
	memcpy(req.sha, B.mac, 6);
	SH_ASSERT_EQ(sh_arp_input(b, &req, 7 * MS, back, sizeof(back), &blen), 0);
	SH_ASSERT_EQ(sh_arp_list(b, e, 4), 1u);
	/* our MAC with another address is a peer sharing it (a tap's kernel side): answered */
	req.spa = IP(10, 99, 0, 66);
	SH_ASSERT_EQ(sh_arp_input(b, &req, 7 * MS, back, sizeof(back), &blen), 1);
	SH_ASSERT_EQ(sh_arp_list(b, e, 4), 2u);
	SH_ASSERT_ERR(sh_arp_resolve(a, A.ip, 8 * MS, mac, out, sizeof(out), &olen), -EINVAL);
	sh_arp_destroy(a);
	sh_arp_destroy(b);
}

TEST(arp_refreshes_gives_up_and_asks_again_later)
{
	struct sh_arp *a = table(&A), *b = table(&B);
	uint8_t out[SH_FRAME_MIN], back[SH_FRAME_MIN], mac[6];
	struct sh_frame f;
	size_t olen, blen;
	uint64_t t;
	unsigned sent = 0;

	/* nobody answers: 3 requests 100 ms apart, then unreachable until the ttl has passed */
	for (t = 0; t < 400 * MS; t += 10 * MS) {
		int rc = sh_arp_resolve(a, IP(10, 99, 0, 9), t, mac, out, sizeof(out), &olen);

		sent += olen > 0;
		SH_ASSERT(rc == -EAGAIN || (rc == -EHOSTUNREACH && t >= 300 * MS));
	}
	SH_ASSERT_EQ(sent, 3u);
	SH_ASSERT_ERR(sh_arp_resolve(a, IP(10, 99, 0, 9), 1100 * MS, mac, out, sizeof(out), &olen),
		      -EHOSTUNREACH);
	SH_ASSERT_ERR(sh_arp_resolve(a, IP(10, 99, 0, 9), 1300 * MS, mac, out, sizeof(out), &olen),
		      -EAGAIN); /* the ttl past its last request: asked again */
	SH_ASSERT_EQ(olen, (size_t)SH_FRAME_MIN);
	/* B resolved, then stale: still used while a request goes to its MAC alone */
	SH_ASSERT_ERR(sh_arp_resolve(a, B.ip, 0, mac, out, sizeof(out), &olen), -EAGAIN);
	f = arp_of(out, olen);
	SH_ASSERT_EQ(sh_arp_input(b, &f, 0, back, sizeof(back), &blen), 1);
	f = arp_of(back, blen);
	sh_arp_input(a, &f, 0, out, sizeof(out), &olen);
	SH_ASSERT_OK(sh_arp_resolve(a, B.ip, 1500 * MS, mac, out, sizeof(out), &olen));
	SH_ASSERT_MEMEQ(mac, B.mac, 6);
	f = arp_of(out, olen);
	SH_ASSERT_EQ(f.op, SH_ARP_REQUEST);
	SH_ASSERT_MEMEQ(f.dst.mac, B.mac, 6); /* unicast: a refresh */
	/* unanswered 3 times: by broadcast again, and not used meanwhile */
	SH_ASSERT_OK(sh_arp_resolve(a, B.ip, 1600 * MS, mac, out, sizeof(out), &olen));
	SH_ASSERT_OK(sh_arp_resolve(a, B.ip, 1700 * MS, mac, out, sizeof(out), &olen));
	SH_ASSERT_ERR(sh_arp_resolve(a, B.ip, 1800 * MS, mac, out, sizeof(out), &olen), -EAGAIN);
	f = arp_of(out, olen);
	SH_ASSERT_MEMEQ(f.dst.mac, "\xff\xff\xff\xff\xff\xff", 6);
	sh_arp_destroy(a);
	sh_arp_destroy(b);
}

TEST(arp_follows_an_address_that_moved)
{
	struct sh_arp *a = table(&A), *b = table(&B);
	struct sh_frame_end moved = B;
	uint8_t out[SH_FRAME_MIN], mac[6];
	struct sh_arp_config c = { .nips = 1, .ips = { B.ip } };
	struct sh_arp *b2;
	struct sh_frame f;
	size_t olen;

	/* A knows B at its first MAC */
	SH_ASSERT_ERR(sh_arp_resolve(a, B.ip, 0, mac, out, sizeof(out), &olen), -EAGAIN);
	f = arp_of(out, olen);
	SH_ASSERT_EQ(sh_arp_input(b, &f, 0, out, sizeof(out), &olen), 1);
	f = arp_of(out, olen);
	sh_arp_input(a, &f, 0, out, sizeof(out), &olen);
	/* B's address comes up on another port, which announces it */
	moved.mac[5] = 0xbb;
	memcpy(c.mac, moved.mac, 6);
	SH_ASSERT_OK(sh_arp_create(&c, &b2));
	SH_ASSERT_EQ(sh_arp_announce(b2, B.ip, out, sizeof(out)), SH_FRAME_MIN);
	SH_ASSERT_ERR(sh_arp_announce(b2, A.ip, out, sizeof(out)), -EINVAL);
	SH_ASSERT_EQ(sh_arp_announce(b2, B.ip, out, sizeof(out)), SH_FRAME_MIN);
	f = arp_of(out, SH_FRAME_MIN);
	SH_ASSERT_EQ(sh_arp_input(a, &f, 10 * MS, out, sizeof(out), &olen), 0);
	SH_ASSERT_OK(sh_arp_resolve(a, B.ip, 20 * MS, mac, out, sizeof(out), &olen));
	SH_ASSERT_MEMEQ(mac, moved.mac, 6);
	{
		struct sh_arp *none;

		SH_ASSERT_ERR(sh_arp_create(&(struct sh_arp_config){ .nips = 0 }, &none), -EINVAL);
	}
	sh_arp_destroy(b2);
	sh_arp_destroy(a);
	sh_arp_destroy(b);
}

/* RFC 1071 word by word, as the standard writes it: what sh_csum_add must equal. */
static uint16_t
csum_reference(const uint8_t *b, size_t len)
{
	uint32_t sum = 0;

	for (size_t i = 0; i < len; i += 2) {
		sum += (uint32_t)b[i] << 8 | (i + 1 < len ? b[i + 1] : 0);
		sum = (sum & 0xffff) + (sum >> 16);
	}
	return (uint16_t)~sum;
}

TEST(frame_checksum_equals_the_word_by_word_sum_at_any_length_and_alignment)
{
	static uint8_t buf[2048 + 8];
	uint64_t x = sh_test_seed() | 1;

	for (size_t i = 0; i < sizeof(buf); i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		buf[i] = (uint8_t)x;
	}
	memset(buf + 100, 0xff, 600); /* long runs of carries */
	for (size_t off = 0; off < 8; off++)
		for (size_t len = 0; len <= 2048; len += (len < 80 ? 1 : 37)) {
			SH_ASSERT_EQ(sh_csum_fold(sh_csum_add(0, buf + off, len)),
				     csum_reference(buf + off, len));
			/* chained over an even split, as headers and payload are */
			size_t half = (len / 2) & ~(size_t)1;

			SH_ASSERT_EQ(sh_csum_fold(sh_csum_add(sh_csum_add(0, buf + off, half),
							      buf + off + half, len - half)),
				     csum_reference(buf + off, len));
		}
}

TEST(frame_without_a_udp_checksum_is_sent_as_zero_and_taken)
{
	static uint8_t f[SH_FRAME_UDP_HLEN + 300];
	const uint8_t *udp = f + SH_ETH_HLEN + SH_IP4_HLEN;
	struct sh_frame p;
	size_t len = udp_frame(f, 300, SH_FRAME_UDP_CSUM_NONE);

	SH_ASSERT_EQ(udp[6] << 8 | udp[7], 0); /* RFC 768: none */
	SH_ASSERT_OK(sh_frame_parse(f, len, &p));
	SH_ASSERT_EQ(p.kind, SH_FRAME_UDP);
	SH_ASSERT_EQ(p.plen, 300u);
	/* the IPv4 header's own checksum is still there and checked */
	f[SH_ETH_HLEN + 8] ^= 1;
	SH_ASSERT_ERR(sh_frame_parse(f, len, &p), -EBADMSG);
}
