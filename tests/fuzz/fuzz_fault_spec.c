// SPDX-License-Identifier: Apache-2.0
/* Fuzz target: SH_FAULTS specs (user input). Must never crash; must be all-or-nothing. */
#include <stdint.h>
#include <string.h>

#include "../../src/base/base.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char spec[512], err[256];
	int a, b;

	if (size >= sizeof(spec))
		size = sizeof(spec) - 1;
	memcpy(spec, data, size);
	spec[size] = '\0';
	a = sh_fault_spec_check(spec, err, sizeof(err));
	b = sh_fault_arm_spec(spec, err, sizeof(err));
	if (a != b)
		__builtin_trap();
	if (b < 0 && strlen(err) == 0)
		__builtin_trap(); /* every refusal says why */
	sh_fault_disarm_all();
	return 0;
}
