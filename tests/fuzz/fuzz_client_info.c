// SPDX-License-Identifier: Apache-2.0
/* Fuzz target: a client's description of itself (NET_OP_CLIENT_INFO, from the network). */
#include <stdint.h>
#include <string.h>

#include "../../src/cluster/client_info.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cinfo a, b;
	struct sh_enc e;

	if (cinfo_decode(data, size, &a) < 0)
		return 0;
	/* what decodes encodes to the same bytes */
	sh_enc_init(&e);
	cinfo_encode(&e, &a);
	if (sh_enc_error(&e) || e.len != size || memcmp(e.p, data, size) != 0 ||
	    cinfo_decode(e.p, e.len, &b) < 0 || b.nifaces != a.nifaces)
		__builtin_trap();
	sh_enc_fini(&e);
	return 0;
}
