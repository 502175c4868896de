/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The packet format of Shoal's data network (docs/protocol.md): one
 * versioned, little-endian, bounds-checked header per datagram, optional
 * selective-ack ranges, then the payload. Every field is encoded and
 * decoded here and nowhere else; net_pkt_decode() is fuzzed.
 *
 *   off  size  field
 *     0     4  magic "SHN1"
 *     4     1  version (1)
 *     5     1  type (NET_PKT_*, 1..8)
 *     6     1  flags: bit 0 NET_FLAG_MAC (a MAC trailer follows the payload); others 0
 *     7     1  nsack: selective-ack ranges that follow the header (0..4)
 *     8     8  source node id
 *    16     8  destination node id
 *    24     8  source incarnation (never 0)
 *    32     8  destination incarnation as the source knows it (0: unknown)
 *    40     4  session number (per peer pair, grows on each new session)
 *    44     4  sequence number (DATA; a PROBE's number; 0 otherwise)
 *    48     4  cumulative ack: every seq below it was received
 *    52     4  receive window, in packets
 *    56     4  timestamp: sender's clock, microseconds
 *    60     4  timestamp echo: the newest timestamp received from the peer
 *    64     2  nchunks: message chunks in the payload (DATA: 1..64; else 0)
 *    66     2  mtu: on HELLO, HELLO_ACK, KEEPALIVE, PROBE and PROBE_ACK
 *              (net_pkt_says_mtu), the largest datagram the interface it
 *              left from takes (its MTU less IP and UDP headers; 0: not
 *              said, else 512..65507), which the peer sends it no larger
 *              than; 0 on the other types
 *    68     4  payload length (all chunks with their headers)
 *    72     4  crc32c of header (this field 0), ranges and payload
 *    76     4  key id (NET_FLAG_MAC only, else 0): which key the MAC is under:
 *              0 the cluster's network key (between backends); to and from a
 *              client, its key (1 the cluster's client key, 2 and up a file
 *              system's access key; docs/security.md)
 *    80   8*n  ranges: [start, end) pairs of u32
 *     .     .  chunks, each a 20-byte header then its bytes:
 *              u32 message id, u32 message length, u32 fragment index,
 *              u32 fragment count, u32 length
 *     .    28  with NET_FLAG_MAC only: the MAC trailer (net/auth.h), a 12-byte
 *              nonce then a 16-byte AES-GCM tag over everything before it;
 *              the payload length and the crc do not count it
 * A message is cut into fragments of equal size (the last may be
 * shorter): fragment size = ceil(length / count). Several small messages
 * ride in one packet; a large fragment rides alone.
 */
#ifndef SH_NET_WIRE_H
#define SH_NET_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NET_MAGIC      0x314E4853u /* "SHN1" little-endian */
#define NET_VERSION    1
#define NET_HDR_SIZE   80
#define NET_MAX_SACK   4
#define NET_CHUNK_HDR  20
#define NET_MAX_CHUNKS 64

#define NET_FLAG_MAC	0x01u
#define NET_MAC_NONCE	12
#define NET_MAC_TAG	16
#define NET_MAC_TRAILER (NET_MAC_NONCE + NET_MAC_TAG)

enum net_pkt_type {
	NET_PKT_HELLO = 1,     /* open a session: "I am src, incarnation X" */
	NET_PKT_HELLO_ACK = 2, /* accept it */
	NET_PKT_DATA = 3,      /* one fragment of a message */
	NET_PKT_ACK = 4,       /* acks only */
	NET_PKT_KEEPALIVE = 5, /* idle session: please ack */
	NET_PKT_RESET = 6,     /* "you talk to a session I do not have" */
	/*
	 * Path probes (peers with several interface pairs): "is this path
	 * alive?", sent on one path; the answer goes back on the same pair,
	 * its ts_ecr echoing the probe's ts. seq carries the probe's number.
	 * Neither touches the session's state.
	 */
	NET_PKT_PROBE = 7,
	NET_PKT_PROBE_ACK = 8,
	NET_PKT_TYPE_MAX = NET_PKT_PROBE_ACK,
};

#define NET_MTU_MIN 512	  /* the smallest MTU a packet may say */
#define NET_MTU_MAX 65507 /* the largest: a UDP datagram's payload over IPv4 */

/* The packet types that say their interface's MTU (offset 66); the others carry 0 there. */
static inline bool
net_pkt_says_mtu(uint8_t type)
{
	return type == NET_PKT_HELLO || type == NET_PKT_HELLO_ACK || type == NET_PKT_KEEPALIVE ||
	       type == NET_PKT_PROBE || type == NET_PKT_PROBE_ACK;
}

struct net_sack {
	uint32_t start, end; /* [start, end) */
};

struct net_chunk {
	uint32_t msg_id, msg_len, frag_idx, frag_cnt, len;
	const uint8_t *data; /* decode: points into the datagram */
};

struct net_pkt {
	uint8_t type;
	uint8_t flags;
	uint8_t nsack;
	uint16_t nchunks;
	uint16_t mtu; /* net_pkt_says_mtu types: the sending interface's MTU (0: not said) */
	uint64_t src_id, dst_id;
	uint64_t src_inc, dst_inc;
	uint32_t sess;
	uint32_t seq, ack, rwnd;
	uint32_t ts, ts_ecr;
	uint32_t payload_len;
	uint32_t key_id; /* with NET_FLAG_MAC: the key it is under (0: the network key) */
	struct net_sack sack[NET_MAX_SACK];
	const uint8_t *payload; /* decode: points into the datagram */
	const uint8_t *mac;	/* decode: the MAC trailer (NET_FLAG_MAC), else NULL */
	struct net_chunk chunk[NET_MAX_CHUNKS];
};

/*
 * Encode the header and ranges of p into buf (at least NET_HDR_SIZE +
 * 8 * nsack bytes) with the crc covering them and the payload (the chunks,
 * headers included, already laid out by the caller) given as iovecs whose
 * total is p->payload_len. Returns the header length.
 */
size_t net_pkt_encode_hdr(const struct net_pkt *p, uint8_t *buf, const struct iovec *payload,
			  int iovcnt);

/* Write one chunk header (NET_CHUNK_HDR bytes). */
void net_chunk_hdr_put(uint8_t *b, const struct net_chunk *c);

/*
 * Parse n chunks laid out in [payload, payload + len): every chunk must be
 * well-formed (index < count, length = the fragment's share of the message
 * length) and the chunks must fill len exactly. 0 or -EBADMSG.
 */
int net_chunks_parse(const uint8_t *payload, uint32_t len, unsigned n, struct net_chunk *out);

/* Fragment size of a message of len bytes cut into cnt fragments, and fragment idx's length. */
static inline uint32_t
net_frag_size(uint32_t len, uint32_t cnt)
{
	return (uint32_t)(((uint64_t)len + cnt - 1) / cnt);
}

static inline uint32_t
net_frag_len(uint32_t len, uint32_t cnt, uint32_t idx)
{
	uint32_t fs = net_frag_size(len, cnt);

	return idx + 1 < cnt ? fs : len - fs * (cnt - 1);
}

/*
 * Decode a datagram. Checks magic, version, type, flags, sizes (nsack,
 * payload length against the datagram, less the MAC trailer if flagged,
 * every chunk) and the crc; the MAC is net_auth_check's. 0, or -EPROTO
 * (not ours / bad version), -EBADMSG (malformed), SH_ECRC (checksum).
 * p->payload and the chunks' data point into buf.
 */
int net_pkt_decode(const uint8_t *buf, size_t len, struct net_pkt *p);

static inline size_t
net_pkt_hdr_len(unsigned nsack)
{
	return NET_HDR_SIZE + 8 * (size_t)nsack;
}

/* Sequence comparisons that survive wrap-around. */
static inline bool
net_seq_lt(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b) < 0;
}

static inline bool
net_seq_le(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b) <= 0;
}

#endif /* SH_NET_WIRE_H */
