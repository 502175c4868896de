// SPDX-License-Identifier: Apache-2.0
/* Fuzz target: a bucket snapshot from another replica, imported into a bucket store (then rolled
 * back). */
#include <stdint.h>
#include <string.h>

#include "fuzz_db.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct meta_db *db = fuzz_scratch_db("meta");
	struct meta_txn *t;
	uint16_t bucket = size >= 2 ? (uint16_t)(data[0] << 8 | data[1]) : 0;

	if (meta_txn_begin(db, true, &t) != 0)
		abort();
	(void)meta_import_bucket(t, bucket, data, size);
	meta_txn_abort(t);
	return 0;
}
