/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The frames a kernel-bypass transport (DPDK, issue #28; docs/networking.md
 * "Frames and ARP in user space") builds and parses itself: Ethernet II,
 * IPv4 and UDP around Shoal's datagrams (net/wire.h), and ARP. Every field
 * is written and checked here; sh_frame_parse() is fuzzed. Multi-byte
 * fields are big-endian (network order), as the standards say; addresses
 * are held in host order.
 *
 *   Ethernet II (14 bytes; one 802.1Q tag, 4 more, is skipped on receive)
 *     0   6  destination MAC
 *     6   6  source MAC
 *    12   2  ethertype: 0x0800 IPv4, 0x0806 ARP (0x8100: a VLAN tag first)
 *   IPv4 (20 bytes sent; options skipped on receive)
 *     0   1  version 4, header length in 32-bit words (5 .. 15)
 *     1   1  DSCP/ECN (0)
 *     2   2  total length (header and UDP)
 *     4   2  identification
 *     6   2  flags and fragment offset: DF sent; a fragment is not taken
 *     8   1  TTL (64)
 *     9   1  protocol: 17 UDP
 *    10   2  header checksum (ones' complement of the header's sum)
 *    12   4  source address
 *    16   4  destination address
 *   UDP (8 bytes)
 *     0   2  source port
 *     2   2  destination port
 *     4   2  length (header and payload)
 *     6   2  checksum over the pseudo-header (addresses, 17, length), the
 *            header and the payload; 0 sent as 0xffff; 0 received: none
 *   ARP and datagrams are sent untagged: a port is on one VLAN (a tagged
 *   ARP is answered untagged).
 *   ARP for IPv4 over Ethernet (28 bytes)
 *     0   2  hardware type 1      2   2  protocol type 0x0800
 *     4   1  hardware length 6    5   1  protocol length 4
 *     6   2  operation: 1 request, 2 reply
 *     8   6  sender MAC          14   4  sender address
 *    18   6  target MAC          24   4  target address
 */
#ifndef SH_NET_FRAME_H
#define SH_NET_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SH_ETH_HLEN	   14
#define SH_IP4_HLEN	   20
#define SH_UDP_HLEN	   8
#define SH_FRAME_UDP_HLEN  (SH_ETH_HLEN + SH_IP4_HLEN + SH_UDP_HLEN) /* 42 */
#define SH_ARP_LEN	   28
#define SH_FRAME_ARP_LEN   (SH_ETH_HLEN + SH_ARP_LEN) /* 42 (padded to 60 on the wire) */
#define SH_FRAME_MIN	   60			      /* Ethernet's minimum, without the FCS */
#define SH_ETHERTYPE_IP4   0x0800
#define SH_ETHERTYPE_ARP   0x0806
#define SH_ETHERTYPE_VLAN  0x8100
#define SH_ARP_REQUEST	   1
#define SH_ARP_REPLY	   2
#define SH_UDP_PAYLOAD_MAX (65535 - SH_IP4_HLEN - SH_UDP_HLEN)

/* One end of a UDP datagram on Ethernet. ip and port in host order. */
struct sh_frame_end {
	uint8_t mac[6];
	uint32_t ip;
	uint16_t port;
};

enum sh_frame_kind {
	SH_FRAME_OTHER = 0, /* not ours to read: another ethertype or protocol, a fragment */
	SH_FRAME_UDP,
	SH_FRAME_ARP,
};

/* What a frame says (sh_frame_parse); payload points into it. */
struct sh_frame {
	enum sh_frame_kind kind;
	struct sh_frame_end src, dst; /* UDP: both ends; ARP: MACs of the Ethernet header */
	const uint8_t *payload;	      /* UDP */
	size_t plen;
	uint16_t vlan; /* the 802.1Q tag's VLAN id, 0 if none */
	/* ARP */
	uint16_t op;
	uint8_t sha[6], tha[6];
	uint32_t spa, tpa;
};

/*
 * The port computes the UDP checksum (offloaded): the field holds the
 * pseudo-header's sum, folded and not complemented, as ports that offload
 * it expect (DPDK's rte_ipv4_phdr_cksum).
 */
#define SH_FRAME_NO_UDP_CSUM 0x1
/*
 * No UDP checksum at all (the field 0, as IPv4 allows: RFC 768): for
 * payloads that carry a stronger check of their own end to end (every
 * Shoal datagram's CRC32C covers its header and payload, net/wire.h), so
 * that a port without checksum offload does not sum every byte twice.
 */
#define SH_FRAME_UDP_CSUM_NONE 0x2

/*
 * The 42 bytes of Ethernet, IPv4 and UDP headers in front of plen payload
 * bytes going from src to dst, into out (cap at least SH_FRAME_UDP_HLEN):
 * the payload is read only for the UDP checksum. -EMSGSIZE (payload too
 * large), -EINVAL.
 */
int sh_frame_udp_head(uint8_t *out, size_t cap, const struct sh_frame_end *src,
		      const struct sh_frame_end *dst, const uint8_t *payload, size_t plen,
		      uint16_t ip_id, unsigned flags);

/* An ARP frame (SH_FRAME_MIN bytes, zero-padded) into out; its length or -EINVAL. */
int sh_frame_arp(uint8_t *out, size_t cap, const uint8_t eth_dst[6], uint16_t op,
		 const uint8_t sha[6], uint32_t spa, const uint8_t tha[6], uint32_t tpa);

/*
 * Fuzzed. A received frame (without its FCS): 0 and *f, with kind
 * SH_FRAME_OTHER for what is not for a Shoal transport; -EBADMSG for a
 * frame that is malformed (lengths that do not fit, a bad IPv4 header or
 * UDP checksum, an ARP of another hardware or protocol).
 */
int sh_frame_parse(const uint8_t *b, size_t len, struct sh_frame *f);

/* The Internet checksum (RFC 1071) of len bytes, added to sum (0 to start); not folded. */
uint32_t sh_csum_add(uint32_t sum, const uint8_t *b, size_t len);
/* Folded to 16 bits and complemented. */
uint16_t sh_csum_fold(uint32_t sum);

#endif /* SH_NET_FRAME_H */
