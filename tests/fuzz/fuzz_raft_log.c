// SPDX-License-Identifier: Apache-2.0
/* Fuzz target: a Raft log half as read from disk (records of many instances replayed). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <raft.h>

#include "../../src/cluster/raft_log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rlog_set set = { 0 };
	uint64_t gen = 0;
	bool more;
	long used;

	if (size >= 8 + RLOG_REC_HDR)
		memcpy(&gen, data + 16, 8); /* the first record's generation, so that some replay */
	used = rlog_replay(data, size, gen, &set, &more);
	if (used < 0 && used != -ENOMEM)
		__builtin_trap();
	if (used > (long)size)
		__builtin_trap();
	for (const struct rlog_inst *in = set.head; in != NULL; in = in->next) {
		if (rlog_set_find(&set, in->name) != in)
			__builtin_trap(); /* one instance per name */
		for (size_t i = 0; i < in->st.n; i++)
			if (in->st.entries[i].data == NULL)
				__builtin_trap();
	}
	rlog_set_free(&set);
	return 0;
}
