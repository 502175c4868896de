// SPDX-License-Identifier: Apache-2.0
/* Fuzz target: network addresses from configuration and the command line; parse/format round trip.
 */
#include <stdint.h>
#include <string.h>

#include "../../src/env/env.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char s[128], buf[ENV_ADDRSTRLEN];
	struct env_addr a, b;

	if (size >= sizeof(s))
		size = sizeof(s) - 1;
	memcpy(s, data, size);
	s[size] = '\0';
	if (env_addr_parse(s, &a) < 0)
		return 0;
	env_addr_format(&a, buf, sizeof(buf));
	if (env_addr_parse(buf, &b) < 0 || !env_addr_eq(&a, &b))
		__builtin_trap();
	return 0;
}
