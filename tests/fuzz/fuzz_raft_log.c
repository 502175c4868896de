// SPDX-License-Identifier: Apache-2.0
/* Fuzz target: a Raft log half as read from disk (records replayed into a state). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/cluster/raft_log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rlog_state st = { 0 };
	uint64_t gen = 0;
	long used;

	if (size >= 8 + RLOG_REC_HDR)
		memcpy(&gen, data + 16, 8); /* the first record's generation, so that some replay */
	used = rlog_replay(data, size, gen, &st);
	if (used < 0 && used != -ENOMEM)
		__builtin_trap();
	if (used > (long)size)
		__builtin_trap();
	for (size_t i = 0; i < st.n; i++)
		if (st.entries[i].data == NULL)
			__builtin_trap();
	rlog_state_free(&st);
	return 0;
}
