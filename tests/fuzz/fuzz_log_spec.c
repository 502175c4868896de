// SPDX-License-Identifier: Apache-2.0
/* Fuzz target: SH_LOG level specs (user input). */
#include <stdint.h>
#include <string.h>

#include "../../src/base/base.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char spec[512], err[256] = "";
	int rc;

	if (size >= sizeof(spec))
		size = sizeof(spec) - 1;
	memcpy(spec, data, size);
	spec[size] = '\0';
	rc = sh_log_spec_check(spec, err, sizeof(err));
	if (rc < 0 && strlen(err) == 0)
		__builtin_trap();
	return 0;
}
