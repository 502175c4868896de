/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz targets' scratch bucket store: one per process, its file gone once open. */
#ifndef SH_TESTS_FUZZ_DB_H
#define SH_TESTS_FUZZ_DB_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "../../src/meta/meta_db.h"

static struct meta_db *
fuzz_scratch_db(const char *name)
{
	static struct meta_db *db;

	if (db == NULL) {
		char path[96], lock[104];

		snprintf(path, sizeof(path), "/tmp/shoal-fuzz-%s-%d.mdb", name, (int)getpid());
		snprintf(lock, sizeof(lock), "%s-lock", path);
		unlink(path);
		if (meta_db_open(path, 256ull << 20, META_DB_NOSYNC, &db) != 0)
			abort();
		/* the open environment keeps both while it runs */
		unlink(path);
		unlink(lock);
	}
	return db;
}

#endif /* SH_TESTS_FUZZ_DB_H */
