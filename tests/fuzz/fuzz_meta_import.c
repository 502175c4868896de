// SPDX-License-Identifier: Apache-2.0
/* Fuzz target: a bucket snapshot from another replica, imported into a bucket store (then rolled
 * back). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../src/meta/meta_db.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct meta_db *db;
	struct meta_txn *t;
	uint16_t bucket = size >= 2 ? (uint16_t)(data[0] << 8 | data[1]) : 0;

	if (db == NULL) {
		char path[64];

		snprintf(path, sizeof(path), "/tmp/shoal-fuzz-meta-%d.mdb", (int)getpid());
		unlink(path);
		if (meta_db_open(path, 256ull << 20, META_DB_NOSYNC, &db) != 0)
			abort();
		unlink(path); /* the open environment keeps it while it runs */
	}
	if (meta_txn_begin(db, true, &t) != 0)
		abort();
	(void)meta_import_bucket(t, bucket, data, size);
	meta_txn_abort(t);
	return 0;
}
