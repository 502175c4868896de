// SPDX-License-Identifier: Apache-2.0
/* Encoding and checked decoding of the drive-target RPCs; the layout is in store_proto.h. */
#include <errno.h>
#include <string.h>

#include "../net/rpc_ops.h"
#include "store_df.h"
#include "store_proto.h"

size_t
store_proto_encode(uint16_t op, const struct store_proto_req *r, uint8_t *b)
{
	memcpy(b, &r->target, 8);
	if (op == NET_OP_STORE_STAT)
		return 8;
	memcpy(b + 8, &r->stripe, 8);
	memcpy(b + 16, &r->idx, 4);
	memcpy(b + 20, op == NET_OP_STORE_RELEASE ? &(uint32_t){ 0 } : &r->len, 4);
	if (op == NET_OP_STORE_GET) {
		memcpy(b + 24, &r->off, 8);
		return 32;
	}
	return STORE_PROTO_HDR;
}

int
store_proto_decode(uint16_t op, const uint8_t *b, size_t len, struct store_proto_req *r)
{
	memset(r, 0, sizeof(*r));
	if (op == NET_OP_STORE_STAT) {
		if (len != 8)
			return -EINVAL;
		memcpy(&r->target, b, 8);
		return 0;
	}
	if (len < STORE_PROTO_HDR)
		return -EINVAL;
	{
		/* a PUT's header follows its bytes */
		const uint8_t *h = op == NET_OP_STORE_PUT ? b + len - STORE_PROTO_HDR : b;

		memcpy(&r->target, h, 8);
		memcpy(&r->stripe, h + 8, 8);
		memcpy(&r->idx, h + 16, 4);
		memcpy(&r->len, h + 20, 4);
	}
	switch (op) {
	case NET_OP_STORE_PUT:
		if (r->len == 0 || r->len > STORE_MAX_FRAG || len - STORE_PROTO_HDR != r->len)
			return -EINVAL;
		r->data = b;
		return 0;
	case NET_OP_STORE_GET:
		if (len != STORE_PROTO_HDR + 8 || r->len == 0 || r->len > STORE_MAX_FRAG)
			return -EINVAL;
		memcpy(&r->off, b + 24, 8);
		return 0;
	case NET_OP_STORE_RELEASE:
		return len == STORE_PROTO_HDR && r->len == 0 ? 0 : -EINVAL;
	default:
		return -EINVAL;
	}
}
