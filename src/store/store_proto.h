/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The drive-target RPCs on the data network, shared by the client and the
 * server halves (opcodes NET_OP_STORE_* in net/rpc_ops.h). Little-endian:
 *
 *   PUT      the bytes, then u64 target, u64 stripe, u32 index, u32 length
 *            (bytes first: the receiver gets large bodies 4 KiB-aligned, so
 *            they go to the drive from where they landed, net_int.h)
 *   GET      u64 target, u64 stripe, u32 index, u32 length, u64 offset
 *            -> the bytes
 *   RELEASE  u64 target, u64 stripe, u32 index, u32 0
 *   STAT     u64 target -> struct store_proto_stat
 *
 * Replies carry the status of net: 0 or a negative errno (-ENODEV: no such
 * target here; -EINVAL: malformed; -ENOENT, -ERANGE, -EBADMSG, -ENOSPC,
 * -EIO from the store). The decoders are fuzzed (fuzz_store_proto.c).
 */
#ifndef SH_STORE_STORE_PROTO_H
#define SH_STORE_STORE_PROTO_H

#include <stddef.h>
#include <stdint.h>

#define STORE_PROTO_HDR 24
/*
 * The free segments a target keeps for cleaning (store_opts.reserve_segs
 * when not set): a client counts what a target can still take (statfs) as
 * its capacity less its live bytes and these; garbage is cleaned as room
 * is needed, so it is room.
 */
#define STORE_PROTO_RESERVE_SEGS 2

struct store_proto_req {
	uint64_t target;
	uint64_t stripe;
	uint32_t idx;
	uint32_t len;
	uint64_t off;	     /* GET */
	const uint8_t *data; /* PUT: points into the request */
};

struct store_proto_stat {
	uint64_t capacity, used, live, garbage, fragments;
	uint32_t segs, segs_free;
};
_Static_assert(sizeof(struct store_proto_stat) == 48, "stat reply size");

/*
 * Encode into buf (STORE_PROTO_HDR + 8 bytes at most); returns the length.
 * A PUT's bytes go before this header in the body, every other op's after.
 */
size_t store_proto_encode(uint16_t op, const struct store_proto_req *r, uint8_t *buf);
/* Decode the body of a request of opcode op. 0 or -EINVAL. */
int store_proto_decode(uint16_t op, const uint8_t *b, size_t len, struct store_proto_req *r);

#endif /* SH_STORE_STORE_PROTO_H */
