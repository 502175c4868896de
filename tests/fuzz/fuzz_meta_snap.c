// SPDX-License-Identifier: Apache-2.0
/*
 * Fuzz target: a metadata group's whole state as a leader sends it to a
 * follower (mgroup_snap_walk), each bucket imported into a bucket store
 * (then rolled back).
 */
#include <stdint.h>
#include <string.h>

#include "fuzz_db.h"
#include "../../src/meta/mgroup.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int
import(void *arg, uint16_t bucket, const uint8_t *b, size_t len)
{
	return meta_import_bucket(arg, bucket, b, len);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct meta_db *db = fuzz_scratch_db("snap");
	struct meta_txn *t;
	uint64_t idx = 0;

	if (meta_txn_begin(db, true, &t) != 0)
		abort();
	(void)mgroup_snap_walk(data, size, &idx, import, t);
	meta_txn_abort(t);
	return 0;
}
