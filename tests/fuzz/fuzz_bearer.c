// SPDX-License-Identifier: Apache-2.0
/*
 * Fuzz target: an HTTP Authorization header as the admin API gets it from
 * anyone on the management network (docs/security.md). Accepted only when
 * it names the token; a token text that parses is 64 lower-case hex digits.
 */
#include <stdint.h>
#include <string.h>

#include "../../src/base/secret.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define TOKEN "78f38a4276e0592d2fadb341cab06972cc429dc62f090d8f4db5d5aed1079aea"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char s[512], t[SH_TOKEN_LEN + 1];

	if (size >= sizeof(s))
		size = sizeof(s) - 1;
	memcpy(s, data, size);
	s[size] = '\0';
	if (sh_bearer_ok(s, TOKEN)) {
		/* "Bearer " (any case), the token (any case), white space around it only */
		if (size < 7 + SH_TOKEN_LEN || !sh_token_parse(s + 7, t) || strcmp(t, TOKEN) != 0)
			__builtin_trap();
	}
	if (sh_token_parse(s, t)) {
		if (strlen(t) != SH_TOKEN_LEN)
			__builtin_trap();
		for (size_t i = 0; i < SH_TOKEN_LEN; i++)
			if (!((t[i] >= '0' && t[i] <= '9') || (t[i] >= 'a' && t[i] <= 'f')))
				__builtin_trap();
		if (!sh_token_equal(t, t))
			__builtin_trap();
	}
	return 0;
}
