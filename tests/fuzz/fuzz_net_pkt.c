// SPDX-License-Identifier: Apache-2.0
/*
 * Fuzz target: data-network packets (every datagram from the network).
 * Decoding must never crash or read out of bounds; what decodes must
 * re-encode to the same bytes.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/base/base.h"
#include "../../src/net/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct net_pkt p;
	uint8_t *copy, hdr[NET_HDR_SIZE + 8 * NET_MAX_SACK];
	struct iovec iov;
	size_t h;

	/* an exact-size heap copy, so ASan sees any read past the end */
	copy = malloc(size ? size : 1);
	if (copy == NULL)
		return 0;
	memcpy(copy, data, size);
	if (net_pkt_decode(copy, size, &p) == 0) {
		iov = (struct iovec){ (void *)p.payload, p.payload_len };
		h = net_pkt_encode_hdr(&p, hdr, &iov, 1);
		size_t tail = p.flags & NET_FLAG_MAC ? NET_MAC_TRAILER : 0;

		if (h + p.payload_len + tail != size || memcmp(hdr, copy, h) != 0 ||
		    (tail && p.mac != copy + size - tail))
			__builtin_trap();
	}
	free(copy);
	return 0;
}
