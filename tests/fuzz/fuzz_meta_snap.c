// SPDX-License-Identifier: Apache-2.0
/*
 * Fuzz target: a metadata group's whole state as a leader sends it to a
 * follower (mgroup_snap_walk), each bucket imported into a bucket store
 * (then rolled back).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../src/meta/meta_db.h"
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
	static struct meta_db *db;
	struct meta_txn *t;
	uint64_t idx = 0;

	if (db == NULL) {
		char path[64];

		snprintf(path, sizeof(path), "/tmp/shoal-fuzz-snap-%d.mdb", (int)getpid());
		unlink(path);
		if (meta_db_open(path, 256ull << 20, META_DB_NOSYNC, &db) != 0)
			abort();
		unlink(path); /* the open environment keeps it while it runs */
	}
	if (meta_txn_begin(db, true, &t) != 0)
		abort();
	(void)mgroup_snap_walk(data, size, &idx, import, t);
	meta_txn_abort(t);
	return 0;
}
