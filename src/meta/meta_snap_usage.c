// SPDX-License-Identifier: Apache-2.0
/*
 * What a bucket's snapshots hold (meta_version.h; docs/snapshots.md,
 * "Space"). A record of a versioned key written at version w, whose next
 * newer record is at version n, is read by the kept snapshots k with
 * w <= k < n, and by the live filesystem if it is the key's newest and not
 * a tombstone: the versions that read a record are one run of the kept
 * list. Deleting a snapshot frees what it alone reads.
 */
#include <string.h>

#include "meta_version.h"

struct walk {
	const uint64_t *keep;
	unsigned nkeep;
	struct meta_snap_usage *u;
};

/* The file bytes a record maps: an extent's length, a small file's inline bytes. */
static uint64_t
bytes_of(const uint8_t *key, const void *val, size_t len)
{
	struct meta_extent x;

	if (key[2] == META_K_INLINE)
		return len;
	return meta_extent_decode(val, len, &x) == 0 ? x.len : 0;
}

static int
on_record(void *arg, const uint8_t *key, size_t klen, uint64_t ver, const void *val, size_t len,
	  uint64_t newer)
{
	struct walk *w = arg;
	unsigned first = 0, n = 0;
	uint64_t b;

	(void)klen;
	if (val == NULL || newer == 0)
		return 0; /* a tombstone, or what the live filesystem reads */
	while (first < w->nkeep && w->keep[first] < ver)
		first++;
	while (first + n < w->nkeep && w->keep[first + n] < newer)
		n++;
	if (n == 0)
		return 0; /* read by none: settling drops it */
	b = bytes_of(key, val, len);
	w->u->held += b;
	if (n == 1)
		w->u->only[first] += b;
	return 0;
}

int
meta_snap_usage(struct meta_txn *t, uint16_t bucket, const uint64_t *keep, unsigned nkeep,
		struct meta_snap_usage *u)
{
	static const uint8_t kinds[] = { META_K_EXTENT, META_K_INLINE };
	struct walk w = { keep, nkeep < META_KEEP_MAX ? nkeep : META_KEEP_MAX, u };
	int rc = 0;

	for (size_t i = 0; rc == 0 && i < sizeof(kinds); i++) {
		struct meta_key pk;

		meta_key_kind(&pk, bucket, kinds[i]);
		rc = meta_history(t, &pk, on_record, &w);
	}
	return rc;
}
