// SPDX-License-Identifier: Apache-2.0
/*
 * Fuzz target: configuration commands and configuration copies (bytes from
 * the management network and the Raft log). A decoded command is checked
 * and applied to a small cluster; a decoded configuration re-encodes alike.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/cluster/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cfg *c = cfg_new();
	struct cfg_cmd cmd;
	char msg[CFG_MSG_MAX];

	if (c == NULL)
		return 0;
	if (cfg_cmd_decode(data, size, &cmd) == 0) {
		struct cfg_cmd create = { .op = CFG_OP_CREATE, .id = 1, .nbuckets = 16 };

		strcpy(create.name, "f");
		strcpy(create.addr, "10.0.0.1:1");
		strcpy(create.data, "10.0.0.1:2");
		if (cmd.op != CFG_OP_CREATE && cfg_apply(c, &create, msg, sizeof(msg)) != 0)
			__builtin_trap();
		if (cmd.nbuckets > 4096)
			cmd.nbuckets = 4096; /* keep runs fast: placement is linear in buckets */
		(void)cfg_apply(c, &cmd, msg, sizeof(msg));
	}
	if (cfg_decode(data, size, c) == 0) {
		/* what decodes encodes to bytes that decode and encode to themselves */
		struct sh_enc e, f;

		sh_enc_init(&e);
		sh_enc_init(&f);
		cfg_encode(&e, c);
		if (sh_enc_error(&e) == 0) {
			if (cfg_decode(e.p, e.len, c) != 0)
				__builtin_trap();
			cfg_encode(&f, c);
			if (f.len != e.len || memcmp(f.p, e.p, e.len) != 0)
				__builtin_trap();
		}
		sh_enc_fini(&e);
		sh_enc_fini(&f);
	}
	cfg_free(c);
	return 0;
}
