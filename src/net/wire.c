// SPDX-License-Identifier: Apache-2.0
/* Encoding and bounds-checked decoding of data-network packets; the layout is in wire.h. */
#include <errno.h>
#include <string.h>
#include <sys/uio.h>

#include "../base/base.h"
#include "wire.h"

static inline void
put8(uint8_t *b, size_t off, uint8_t v)
{
	b[off] = v;
}

static inline void
put32(uint8_t *b, size_t off, uint32_t v)
{
	memcpy(b + off, &v, 4); /* little-endian host: checked in base/hash.c */
}

static inline void
put64(uint8_t *b, size_t off, uint64_t v)
{
	memcpy(b + off, &v, 8);
}

static inline uint32_t
get32(const uint8_t *b, size_t off)
{
	uint32_t v;

	memcpy(&v, b + off, 4);
	return v;
}

static inline uint64_t SH_UNUSED
get64(const uint8_t *b, size_t off)
{
	uint64_t v;

	memcpy(&v, b + off, 8);
	return v;
}

size_t
net_pkt_encode_hdr(const struct net_pkt *p, uint8_t *b, const struct iovec *payload, int iovcnt)
{
	size_t hlen = net_pkt_hdr_len(p->nsack);
	uint32_t crc;

	put32(b, 0, NET_MAGIC);
	put8(b, 4, NET_VERSION);
	put8(b, 5, p->type);
	put8(b, 6, p->flags);
	put8(b, 7, p->nsack);
	put64(b, 8, p->src_id);
	put64(b, 16, p->dst_id);
	put64(b, 24, p->src_inc);
	put64(b, 32, p->dst_inc);
	put32(b, 40, p->sess);
	put32(b, 44, p->seq);
	put32(b, 48, p->ack);
	put32(b, 52, p->rwnd);
	put32(b, 56, p->ts);
	put32(b, 60, p->ts_ecr);
	b[64] = (uint8_t)p->nchunks;
	b[65] = (uint8_t)(p->nchunks >> 8);
	b[66] = (uint8_t)p->mtu;
	b[67] = (uint8_t)(p->mtu >> 8);
	put32(b, 68, p->payload_len);
	put32(b, 72, 0);
	put32(b, 76, p->key_id);
	/* (tests encode nsack > NET_MAX_SACK on purpose: the decoder must refuse it) */
	for (unsigned i = 0; i < SH_MIN(p->nsack, (unsigned)NET_MAX_SACK); i++) {
		put32(b, NET_HDR_SIZE + 8 * i, p->sack[i].start);
		put32(b, NET_HDR_SIZE + 8 * i + 4, p->sack[i].end);
	}
	if (p->nsack > NET_MAX_SACK)
		memset(b + NET_HDR_SIZE + 8 * NET_MAX_SACK, 0,
		       8 * (size_t)(p->nsack - NET_MAX_SACK));
	crc = sh_crc32c(0, b, hlen);
	crc = sh_crc32c_iov(crc, payload, iovcnt);
	put32(b, 72, crc);
	return hlen;
}

void
net_chunk_hdr_put(uint8_t *b, const struct net_chunk *c)
{
	put32(b, 0, c->msg_id);
	put32(b, 4, c->msg_len);
	put32(b, 8, c->frag_idx);
	put32(b, 12, c->frag_cnt);
	put32(b, 16, c->len);
}

int
net_chunks_parse(const uint8_t *b, uint32_t len, unsigned n, struct net_chunk *out)
{
	uint32_t off = 0;

	for (unsigned i = 0; i < n; i++) {
		struct net_chunk *c = &out[i];

		if (len - off < NET_CHUNK_HDR)
			return -EBADMSG;
		c->msg_id = get32(b, off);
		c->msg_len = get32(b, off + 4);
		c->frag_idx = get32(b, off + 8);
		c->frag_cnt = get32(b, off + 12);
		c->len = get32(b, off + 16);
		off += NET_CHUNK_HDR;
		if (c->frag_cnt == 0 || c->frag_idx >= c->frag_cnt || c->len > len - off ||
		    (c->msg_len == 0 && c->frag_cnt != 1) ||
		    (uint64_t)net_frag_size(c->msg_len, c->frag_cnt) * (c->frag_cnt - 1) >=
			(uint64_t)c->msg_len + (c->msg_len == 0) ||
		    c->len != net_frag_len(c->msg_len, c->frag_cnt, c->frag_idx))
			return -EBADMSG;
		c->data = b + off;
		off += c->len;
	}
	return off == len ? 0 : -EBADMSG;
}

int
net_pkt_decode(const uint8_t *b, size_t len, struct net_pkt *p)
{
	uint32_t crc, want;
	size_t hlen;

	if (len < NET_HDR_SIZE || get32(b, 0) != NET_MAGIC)
		return -EPROTO;
	if (b[4] != NET_VERSION)
		return -EPROTO;
	memset(p, 0, sizeof(*p));
	p->type = b[5];
	p->flags = b[6];
	p->nsack = b[7];
	if (p->type < NET_PKT_HELLO || p->type > NET_PKT_TYPE_MAX || p->nsack > NET_MAX_SACK)
		return -EBADMSG;
	if ((p->flags & ~NET_FLAG_MAC) != 0)
		return -EBADMSG;
	if (p->flags & NET_FLAG_MAC) {
		if (len < NET_HDR_SIZE + NET_MAC_TRAILER)
			return -EBADMSG;
		len -= NET_MAC_TRAILER;
		p->mac = b + len;
	}
	hlen = net_pkt_hdr_len(p->nsack);
	p->payload_len = get32(b, 68);
	if (len < hlen || p->payload_len != len - hlen)
		return -EBADMSG;
	want = get32(b, 72);
	{
		uint8_t tmp[NET_HDR_SIZE];

		memcpy(tmp, b, NET_HDR_SIZE);
		put32(tmp, 72, 0);
		crc = sh_crc32c(0, tmp, NET_HDR_SIZE);
		crc = sh_crc32c(crc, b + NET_HDR_SIZE, len - NET_HDR_SIZE);
	}
	if (crc != want)
		return SH_ECRC;
	p->src_id = get64(b, 8);
	p->dst_id = get64(b, 16);
	p->src_inc = get64(b, 24);
	p->dst_inc = get64(b, 32);
	p->sess = get32(b, 40);
	p->seq = get32(b, 44);
	p->ack = get32(b, 48);
	p->rwnd = get32(b, 52);
	p->ts = get32(b, 56);
	p->ts_ecr = get32(b, 60);
	p->nchunks = (uint16_t)(b[64] | b[65] << 8);
	p->mtu = (uint16_t)(b[66] | b[67] << 8);
	p->key_id = get32(b, 76);
	if (p->src_inc == 0 || (p->key_id != 0 && !(p->flags & NET_FLAG_MAC)))
		return -EBADMSG;
	if (p->mtu != 0 &&
	    (!net_pkt_says_mtu(p->type) || p->mtu < NET_MTU_MIN || p->mtu > NET_MTU_MAX))
		return -EBADMSG;
	for (unsigned i = 0; i < p->nsack; i++) {
		p->sack[i].start = get32(b, NET_HDR_SIZE + 8 * i);
		p->sack[i].end = get32(b, NET_HDR_SIZE + 8 * i + 4);
		if (!net_seq_lt(p->sack[i].start, p->sack[i].end))
			return -EBADMSG;
	}
	p->payload = b + hlen;
	if (p->type == NET_PKT_DATA) {
		if (p->nchunks == 0 || p->nchunks > NET_MAX_CHUNKS)
			return -EBADMSG;
		return net_chunks_parse(p->payload, p->payload_len, p->nchunks, p->chunk);
	}
	if (p->payload_len != 0 || p->nchunks != 0)
		return -EBADMSG;
	return 0;
}
