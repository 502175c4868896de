// SPDX-License-Identifier: Apache-2.0
/* The packet format: round trip, and every kind of malformed datagram refused with its code. */
#include <errno.h>

#include "../../../src/base/base.h"
#include "../../../src/net/wire.h"
#include "../../lib/test.h"

/* Lay out p's chunks (with data bytes) and encode; returns the datagram length. */
static size_t
make(uint8_t *buf, struct net_pkt *p, const void *payload, uint32_t len)
{
	uint8_t body[2048];
	struct iovec iov;
	size_t off = 0, h;

	for (unsigned i = 0; i < p->nchunks && p->type == NET_PKT_DATA; i++) {
		net_chunk_hdr_put(body + off, &p->chunk[i]);
		off += NET_CHUNK_HDR;
		memcpy(body + off, payload, p->chunk[i].len);
		off += p->chunk[i].len;
	}
	if (p->type != NET_PKT_DATA) {
		memcpy(body, payload, len);
		off = len;
	}
	p->payload_len = (uint32_t)off;
	iov = (struct iovec){ body, off };
	h = net_pkt_encode_hdr(p, buf, &iov, 1);
	memcpy(buf + h, body, off);
	return h + off;
}

/* Two chunks: fragment 1 of 3 of a 100-byte message (34 bytes), and a whole 6-byte message. */
static struct net_pkt
sample(void)
{
	struct net_pkt p = { .type = NET_PKT_DATA,
			     .flags = 0,
			     .nsack = 2,
			     .src_id = 0x1111,
			     .dst_id = 0x2222,
			     .src_inc = 0x3333,
			     .dst_inc = 0x4444,
			     .sess = 5,
			     .seq = 6,
			     .ack = 7,
			     .rwnd = 8,
			     .ts = 9,
			     .ts_ecr = 10,
			     .nchunks = 2 };

	p.chunk[0] = (struct net_chunk){
		.msg_id = 11, .msg_len = 100, .frag_idx = 1, .frag_cnt = 3, .len = 34
	};
	p.chunk[1] = (struct net_chunk){ .msg_id = 12, .msg_len = 6, .frag_cnt = 1, .len = 6 };
	p.sack[0] = (struct net_sack){ 9, 12 };
	p.sack[1] = (struct net_sack){ 0xfffffffe, 2 }; /* wraps */
	return p;
}

TEST(wire_round_trip)
{
	uint8_t buf[512], payload[40];
	struct net_pkt p = sample(), q;
	size_t n;

	for (size_t i = 0; i < sizeof(payload); i++)
		payload[i] = (uint8_t)i;
	n = make(buf, &p, payload, 0);
	SH_ASSERT_EQ(n, NET_HDR_SIZE + 16 + 2 * NET_CHUNK_HDR + 34 + 6);
	SH_ASSERT_OK(net_pkt_decode(buf, n, &q));
	SH_ASSERT_EQ(q.type, NET_PKT_DATA);
	SH_ASSERT_EQ(q.src_id, 0x1111);
	SH_ASSERT_EQ(q.dst_id, 0x2222);
	SH_ASSERT_EQ(q.src_inc, 0x3333);
	SH_ASSERT_EQ(q.dst_inc, 0x4444);
	SH_ASSERT_EQ(q.sess, 5);
	SH_ASSERT_EQ(q.seq, 6);
	SH_ASSERT_EQ(q.ack, 7);
	SH_ASSERT_EQ(q.rwnd, 8);
	SH_ASSERT_EQ(q.ts, 9);
	SH_ASSERT_EQ(q.ts_ecr, 10);
	SH_ASSERT_EQ(q.nchunks, 2);
	SH_ASSERT_EQ(q.chunk[0].msg_id, 11);
	SH_ASSERT_EQ(q.chunk[0].msg_len, 100);
	SH_ASSERT_EQ(q.chunk[0].frag_idx, 1);
	SH_ASSERT_EQ(q.chunk[0].frag_cnt, 3);
	SH_ASSERT_EQ(q.chunk[0].len, 34);
	SH_ASSERT_MEMEQ(q.chunk[0].data, payload, 34);
	SH_ASSERT_EQ(q.chunk[1].msg_id, 12);
	SH_ASSERT_EQ(q.chunk[1].len, 6);
	SH_ASSERT_MEMEQ(q.chunk[1].data, payload, 6);
	SH_ASSERT_EQ(q.nsack, 2);
	SH_ASSERT_EQ(q.sack[1].start, 0xfffffffe);
	SH_ASSERT_EQ(q.sack[1].end, 2);
	SH_ASSERT_EQ(q.payload_len, 2 * NET_CHUNK_HDR + 40);
}

TEST(wire_rejects_malformed)
{
	uint8_t buf[512], good[512], payload[40] = { 1, 2, 3 };
	struct net_pkt p = sample(), q;
	size_t n = make(good, &p, payload, 0);

	/* truncated anywhere */
	for (size_t cut = 0; cut < n; cut++)
		SH_ASSERT_NE(net_pkt_decode(good, cut, &q), 0);
	SH_ASSERT_ERR(net_pkt_decode(good, 10, &q), -EPROTO);
	/* every single bit flipped is caught */
	for (size_t bit = 0; bit < n * 8; bit++) {
		memcpy(buf, good, n);
		buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		SH_ASSERT_MSG(net_pkt_decode(buf, n, &q) < 0, "bit %zu flipped was accepted", bit);
	}
	/* the crc alone */
	memcpy(buf, good, n);
	buf[n - 1] ^= 0xff;
	SH_ASSERT_ERR(net_pkt_decode(buf, n, &q), SH_ECRC);
	/* wrong magic, wrong version */
	memcpy(buf, good, n);
	buf[0] = 'X';
	SH_ASSERT_ERR(net_pkt_decode(buf, n, &q), -EPROTO);
	p = sample();
	n = make(buf, &p, payload, 0);
	buf[4] = 2;
	SH_ASSERT_ERR(net_pkt_decode(buf, n, &q), -EPROTO);
	/* well-formed crc but nonsense fields: each is -EBADMSG */
	{
		struct net_pkt bad;

		bad = sample();
		bad.type = 9;
		SH_ASSERT_ERR(net_pkt_decode(buf, make(buf, &bad, payload, 0), &q), -EBADMSG);
		bad = sample();
		bad.nsack = 5;
		SH_ASSERT_ERR(net_pkt_decode(buf, make(buf, &bad, payload, 0), &q), -EBADMSG);
		bad = sample();
		bad.chunk[0].frag_idx = 3; /* >= count */
		SH_ASSERT_ERR(net_pkt_decode(buf, make(buf, &bad, payload, 0), &q), -EBADMSG);
		bad = sample();
		bad.chunk[0].frag_cnt = 0;
		SH_ASSERT_ERR(net_pkt_decode(buf, make(buf, &bad, payload, 0), &q), -EBADMSG);
		bad = sample();
		bad.chunk[0].len = 35; /* not this fragment's share */
		SH_ASSERT_ERR(net_pkt_decode(buf, make(buf, &bad, payload, 0), &q), -EBADMSG);
		bad = sample();
		bad.chunk[0].msg_len = 10; /* three fragments of 10 bytes cannot be 34 long */
		SH_ASSERT_ERR(net_pkt_decode(buf, make(buf, &bad, payload, 0), &q), -EBADMSG);
		bad = sample();
		bad.chunk[1].frag_cnt = 7; /* the last fragment would be empty */
		bad.chunk[1].frag_idx = 6;
		bad.chunk[1].len = 0;
		SH_ASSERT_ERR(net_pkt_decode(buf, make(buf, &bad, payload, 0), &q), -EBADMSG);
		bad = sample();
		bad.nchunks = 0;
		SH_ASSERT_ERR(net_pkt_decode(buf, make(buf, &bad, payload, 0), &q), -EBADMSG);
		bad = sample();
		n = make(buf, &bad, payload, 0);
		buf[64] = 3; /* says three chunks, holds two (crc fixed up below) */
		{
			struct iovec piov = { buf + NET_HDR_SIZE + 16, n - NET_HDR_SIZE - 16 };
			struct net_pkt hdr = bad;

			hdr.nchunks = 3;
			net_pkt_encode_hdr(&hdr, buf, &piov, 1);
		}
		SH_ASSERT_ERR(net_pkt_decode(buf, n, &q), -EBADMSG);
		bad = sample();
		bad.sack[0] = (struct net_sack){ 5, 5 }; /* empty range */
		SH_ASSERT_ERR(net_pkt_decode(buf, make(buf, &bad, payload, 0), &q), -EBADMSG);
		bad = sample();
		bad.src_inc = 0;
		SH_ASSERT_ERR(net_pkt_decode(buf, make(buf, &bad, payload, 0), &q), -EBADMSG);
		bad = sample();
		bad.type = NET_PKT_ACK; /* control packets carry no payload */
		bad.nchunks = 0;
		SH_ASSERT_ERR(net_pkt_decode(buf, make(buf, &bad, payload, 10), &q), -EBADMSG);
		bad.nchunks = 0;
		SH_ASSERT_OK(net_pkt_decode(buf, make(buf, &bad, payload, 0), &q));
		/* a payload length that disagrees with the datagram */
		bad = sample();
		n = make(buf, &bad, payload, 0);
		SH_ASSERT_ERR(net_pkt_decode(buf, n + 1, &q), -EBADMSG);
	}
}

TEST(wire_seq_wraps)
{
	SH_ASSERT(net_seq_lt(0xffffffffu, 0));
	SH_ASSERT(net_seq_lt(5, 6));
	SH_ASSERT(!net_seq_lt(6, 6));
	SH_ASSERT(net_seq_le(6, 6));
	SH_ASSERT(!net_seq_lt(0, 0xffffffffu));
}

TEST(wire_says_mtu_on_session_and_probe_packets_only)
{
	static const uint8_t says[] = { NET_PKT_HELLO, NET_PKT_HELLO_ACK, NET_PKT_KEEPALIVE,
					NET_PKT_PROBE, NET_PKT_PROBE_ACK };
	static const uint8_t silent[] = { NET_PKT_ACK, NET_PKT_RESET };
	uint8_t buf[512], payload[40] = { 0 }; /* sample()'s chunks take 34 and 6 bytes */
	struct net_pkt p, q;

	for (size_t i = 0; i < sizeof(says); i++) {
		p = sample();
		p.type = says[i];
		p.nchunks = 0;
		p.nsack = 0;
		SH_ASSERT(net_pkt_says_mtu(says[i]));
		/* the bounds, and a jumbo frame's */
		p.mtu = 8972;
		SH_ASSERT_OK(net_pkt_decode(buf, make(buf, &p, payload, 0), &q));
		SH_ASSERT_EQ(q.mtu, 8972);
		p.mtu = NET_MTU_MIN;
		SH_ASSERT_OK(net_pkt_decode(buf, make(buf, &p, payload, 0), &q));
		SH_ASSERT_EQ(q.mtu, NET_MTU_MIN);
		p.mtu = NET_MTU_MAX;
		SH_ASSERT_OK(net_pkt_decode(buf, make(buf, &p, payload, 0), &q));
		SH_ASSERT_EQ(q.mtu, NET_MTU_MAX);
		p.mtu = 0; /* not said */
		SH_ASSERT_OK(net_pkt_decode(buf, make(buf, &p, payload, 0), &q));
		SH_ASSERT_EQ(q.mtu, 0);
		p.mtu = NET_MTU_MIN - 1;
		SH_ASSERT_ERR(net_pkt_decode(buf, make(buf, &p, payload, 0), &q), -EBADMSG);
		p.mtu = NET_MTU_MAX + 1;
		SH_ASSERT_ERR(net_pkt_decode(buf, make(buf, &p, payload, 0), &q), -EBADMSG);
	}
	/* data, acks and resets carry 0 there */
	p = sample();
	p.mtu = 1472;
	SH_ASSERT(!net_pkt_says_mtu(NET_PKT_DATA));
	SH_ASSERT_ERR(net_pkt_decode(buf, make(buf, &p, payload, 0), &q), -EBADMSG);
	for (size_t i = 0; i < sizeof(silent); i++) {
		p = sample();
		p.type = silent[i];
		p.nchunks = 0;
		p.mtu = 1472;
		SH_ASSERT(!net_pkt_says_mtu(silent[i]));
		SH_ASSERT_ERR(net_pkt_decode(buf, make(buf, &p, payload, 0), &q), -EBADMSG);
		p.mtu = 0;
		SH_ASSERT_OK(net_pkt_decode(buf, make(buf, &p, payload, 0), &q));
	}
}
