// SPDX-License-Identifier: Apache-2.0
/*
 * Ethernet, IPv4, UDP and ARP frames built and parsed in user space
 * (frame.h): for a transport that hands frames to the NIC itself.
 */
#include <errno.h>
#include <string.h>

#include "frame.h"

static void
put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void
put32(uint8_t *p, uint32_t v)
{
	put16(p, (uint16_t)(v >> 16));
	put16(p + 2, (uint16_t)v);
}

static uint16_t
get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t
get32(const uint8_t *p)
{
	return (uint32_t)get16(p) << 16 | get16(p + 2);
}

uint32_t
sh_csum_add(uint32_t sum, const uint8_t *b, size_t len)
{
	uint64_t acc = 0;
	size_t i = 0;
	uint16_t h;

	/*
	 * RFC 1071's sum is the same in either byte order, swapped (its §2 B):
	 * add the words as the CPU loads them, 32 bits at a time into 64 (an
	 * end-around carry folded later is the same sum), and swap the folded
	 * 16 bits to network order once at the end.
	 */
	for (; i + 8 <= len; i += 8) {
		uint64_t w;

		memcpy(&w, b + i, 8);
		acc += (w & 0xffffffffu) + (w >> 32);
	}
	for (; i + 2 <= len; i += 2) {
		memcpy(&h, b + i, 2);
		acc += h;
	}
	while (acc >> 16)
		acc = (acc & 0xffff) + (acc >> 16);
	h = (uint16_t)acc;
	if (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__)
		h = (uint16_t)(h << 8 | h >> 8);
	sum += h;
	if (i < len)
		sum += (uint32_t)b[i] << 8;  /* an odd last byte is the high half of a word */
	return (sum & 0xffff) + (sum >> 16); /* never overflows, whatever the calls */
}

uint16_t
sh_csum_fold(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

/* The UDP pseudo-header's sum: addresses, protocol, UDP length. */
static uint32_t
pseudo(uint32_t src, uint32_t dst, uint16_t ulen)
{
	uint8_t ph[12];

	put32(ph, src);
	put32(ph + 4, dst);
	ph[8] = 0;
	ph[9] = 17;
	put16(ph + 10, ulen);
	return sh_csum_add(0, ph, sizeof(ph));
}

int
sh_frame_udp_head(uint8_t *out, size_t cap, const struct sh_frame_end *src,
		  const struct sh_frame_end *dst, const uint8_t *payload, size_t plen,
		  uint16_t ip_id, unsigned flags)
{
	uint8_t *ip = out + SH_ETH_HLEN, *udp = ip + SH_IP4_HLEN;
	uint16_t ulen = (uint16_t)(SH_UDP_HLEN + plen);

	if (cap < SH_FRAME_UDP_HLEN || (plen > 0 && payload == NULL))
		return -EINVAL;
	if (plen > SH_UDP_PAYLOAD_MAX)
		return -EMSGSIZE;
	memcpy(out, dst->mac, 6);
	memcpy(out + 6, src->mac, 6);
	put16(out + 12, SH_ETHERTYPE_IP4);
	ip[0] = 0x45;
	ip[1] = 0;
	put16(ip + 2, (uint16_t)(SH_IP4_HLEN + ulen));
	put16(ip + 4, ip_id);
	put16(ip + 6, 0x4000); /* DF: Shoal's datagrams fit the path (docs/protocol.md) */
	ip[8] = 64;
	ip[9] = 17;
	put16(ip + 10, 0);
	put32(ip + 12, src->ip);
	put32(ip + 16, dst->ip);
	put16(ip + 10, sh_csum_fold(sh_csum_add(0, ip, SH_IP4_HLEN)));
	put16(udp, src->port);
	put16(udp + 2, dst->port);
	put16(udp + 4, ulen);
	/* offloaded: the port adds the header and payload to the pseudo-header's sum, which
	 * it finds in the field (folded, not complemented), and complements the total */
	put16(udp + 6, (flags & SH_FRAME_NO_UDP_CSUM)
			   ? (uint16_t)~sh_csum_fold(pseudo(src->ip, dst->ip, ulen))
			   : 0);
	if (!(flags & (SH_FRAME_NO_UDP_CSUM | SH_FRAME_UDP_CSUM_NONE))) {
		uint32_t s = pseudo(src->ip, dst->ip, ulen);
		uint16_t c;

		s = sh_csum_add(s, udp, SH_UDP_HLEN);
		/* the payload's sum starts on an even offset: the header is 8 bytes */
		c = sh_csum_fold(sh_csum_add(s, payload, plen));
		put16(udp + 6, c == 0 ? 0xffff : c);
	}
	return SH_FRAME_UDP_HLEN;
}

int
sh_frame_arp(uint8_t *out, size_t cap, const uint8_t eth_dst[6], uint16_t op, const uint8_t sha[6],
	     uint32_t spa, const uint8_t tha[6], uint32_t tpa)
{
	uint8_t *a = out + SH_ETH_HLEN;

	if (cap < SH_FRAME_MIN || (op != SH_ARP_REQUEST && op != SH_ARP_REPLY))
		return -EINVAL;
	memset(out, 0, SH_FRAME_MIN);
	memcpy(out, eth_dst, 6);
	memcpy(out + 6, sha, 6);
	put16(out + 12, SH_ETHERTYPE_ARP);
	put16(a, 1);
	put16(a + 2, SH_ETHERTYPE_IP4);
	a[4] = 6;
	a[5] = 4;
	put16(a + 6, op);
	memcpy(a + 8, sha, 6);
	put32(a + 14, spa);
	memcpy(a + 18, tha, 6);
	put32(a + 24, tpa);
	return SH_FRAME_MIN;
}

static int
parse_arp(const uint8_t *a, size_t len, struct sh_frame *f)
{
	if (len < SH_ARP_LEN)
		return -EBADMSG;
	if (get16(a) != 1 || get16(a + 2) != SH_ETHERTYPE_IP4 || a[4] != 6 || a[5] != 4)
		return -EBADMSG;
	f->op = get16(a + 6);
	if (f->op != SH_ARP_REQUEST && f->op != SH_ARP_REPLY)
		return -EBADMSG;
	memcpy(f->sha, a + 8, 6);
	f->spa = get32(a + 14);
	memcpy(f->tha, a + 18, 6);
	f->tpa = get32(a + 24);
	f->kind = SH_FRAME_ARP;
	return 0;
}

static int
parse_ip4(const uint8_t *ip, size_t len, struct sh_frame *f)
{
	size_t hl, tot, ulen;
	const uint8_t *udp;

	if (len < SH_IP4_HLEN || ip[0] >> 4 != 4)
		return -EBADMSG;
	hl = (size_t)(ip[0] & 0xf) * 4;
	tot = get16(ip + 2);
	/* a frame may be longer than its datagram (Ethernet's padding), never shorter */
	if (hl < SH_IP4_HLEN || tot < hl || tot > len)
		return -EBADMSG;
	if (sh_csum_fold(sh_csum_add(0, ip, hl)) != 0)
		return -EBADMSG;
	if (ip[9] != 17 || (get16(ip + 6) & 0x3fff) != 0)
		return 0; /* not UDP, or a fragment (Shoal sends DF): SH_FRAME_OTHER */
	udp = ip + hl;
	if (tot - hl < SH_UDP_HLEN)
		return -EBADMSG;
	ulen = get16(udp + 4);
	if (ulen < SH_UDP_HLEN || ulen > tot - hl)
		return -EBADMSG;
	f->src.ip = get32(ip + 12);
	f->dst.ip = get32(ip + 16);
	f->src.port = get16(udp);
	f->dst.port = get16(udp + 2);
	if (get16(udp + 6) != 0) {
		uint32_t s = pseudo(f->src.ip, f->dst.ip, (uint16_t)ulen);

		if (sh_csum_fold(sh_csum_add(s, udp, ulen)) != 0)
			return -EBADMSG;
	}
	f->payload = udp + SH_UDP_HLEN;
	f->plen = ulen - SH_UDP_HLEN;
	f->kind = SH_FRAME_UDP;
	return 0;
}

int
sh_frame_parse(const uint8_t *b, size_t len, struct sh_frame *f)
{
	size_t off = SH_ETH_HLEN;
	uint16_t type;

	memset(f, 0, sizeof(*f));
	if (len < SH_ETH_HLEN)
		return -EBADMSG;
	memcpy(f->dst.mac, b, 6);
	memcpy(f->src.mac, b + 6, 6);
	type = get16(b + 12);
	if (type == SH_ETHERTYPE_VLAN) {
		if (len < SH_ETH_HLEN + 4)
			return -EBADMSG;
		f->vlan = get16(b + 14) & 0x0fff;
		type = get16(b + 16);
		off += 4;
	}
	if (type == SH_ETHERTYPE_ARP)
		return parse_arp(b + off, len - off, f);
	if (type == SH_ETHERTYPE_IP4)
		return parse_ip4(b + off, len - off, f);
	return 0; /* SH_FRAME_OTHER */
}
