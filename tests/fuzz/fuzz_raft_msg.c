// SPDX-License-Identifier: Apache-2.0
/* Fuzz target: Raft messages (bytes from the management network); a decoded one round-trips. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/cluster/raft_codec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct raft_message m;
	char addr[RC_ADDR_MAX];
	struct sh_enc e;

	if (rc_msg_decode(data, size, &m, addr) != 0)
		return 0;
	sh_enc_init(&e);
	if (rc_msg_encode(&e, &m, m.server_id, addr) == 0) {
		/* what decodes encodes to bytes that decode and encode to themselves */
		struct raft_message m2;
		char addr2[RC_ADDR_MAX];
		struct sh_enc f;

		if (rc_msg_decode(e.p, e.len, &m2, addr2) != 0)
			__builtin_trap();
		sh_enc_init(&f);
		if (rc_msg_encode(&f, &m2, m2.server_id, addr2) != 0 || f.len != e.len ||
		    memcmp(f.p, e.p, e.len) != 0)
			__builtin_trap();
		sh_enc_fini(&f);
		rc_msg_free(&m2);
	}
	sh_enc_fini(&e);
	rc_msg_free(&m);
	return 0;
}
