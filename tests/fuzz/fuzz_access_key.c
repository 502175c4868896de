// SPDX-License-Identifier: Apache-2.0
/*
 * Fuzz target: a client's key as a program reads it from a key file or
 * $SHOAL_KEY (src/base/access_key.h). One that parses formats back to the
 * same key, and its text parses again to it.
 */
#include <stdint.h>
#include <string.h>

#include "../../src/base/access_key.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char s[512], text[SH_KEY_TEXT_MAX];
	uint8_t key[SH_KEY_LEN], again[SH_KEY_LEN];
	uint32_t id, id2;

	if (size >= sizeof(s))
		size = sizeof(s) - 1;
	memcpy(s, data, size);
	s[size] = '\0';
	if (sh_key_parse(s, &id, key) != 0)
		return 0;
	if (id == 0)
		__builtin_trap();
	sh_key_format(id, key, text);
	if (strlen(text) >= SH_KEY_TEXT_MAX || sh_key_parse(text, &id2, again) != 0 || id2 != id ||
	    memcmp(again, key, SH_KEY_LEN) != 0)
		__builtin_trap();
	return 0;
}
