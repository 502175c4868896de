// SPDX-License-Identifier: Apache-2.0
/* Fuzz target: drive-target RPC requests (bytes from the network), for every opcode. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/net/rpc_ops.h"
#include "../../src/store/store_proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint16_t ops[] = { NET_OP_STORE_PUT, NET_OP_STORE_GET, NET_OP_STORE_RELEASE,
					NET_OP_STORE_STAT, 0 };
	uint8_t *copy = malloc(size ? size : 1);
	struct store_proto_req r;

	if (copy == NULL)
		return 0;
	memcpy(copy, data, size);
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		if (store_proto_decode(ops[i], copy, size, &r) == 0 && ops[i] == NET_OP_STORE_PUT &&
		    (r.data < copy || r.data + r.len > copy + size))
			__builtin_trap();
	}
	free(copy);
	return 0;
}
