// SPDX-License-Identifier: Apache-2.0
/* Fuzz target: metadata records, keys, deltas and bucket commands as read from the bucket
 * store, a bucket's Raft log, a bucket snapshot or another bucket. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/meta/meta_cmd.h"
#include "../../src/meta/meta_version.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct meta_inode in;
	struct meta_dentry d;
	const uint8_t *name;
	size_t nlen;

	if (meta_inode_decode(data, size, &in) == 0) {
		uint8_t b[META_INODE_LEN];

		meta_inode_encode(&in, b);
		if (memcmp(b, data, sizeof(b)) != 0)
			__builtin_trap();
	}
	if (meta_dentry_decode(data, size, &d) == 0 && d.ino == 0)
		__builtin_trap();
	if (meta_key_dentry_name(data, size, &name, &nlen) == 0 &&
	    (name < data || name + nlen > data + size))
		__builtin_trap();
	(void)meta_name_check((const char *)data, size);
	{
		struct meta_cmd c;

		if (meta_cmd_decode(data, size, &c) == 0 && c.dlen &&
		    (c.data < data || c.data + c.dlen > data + size))
			__builtin_trap();
	}
	{
		struct meta_rename2 r;

		(void)meta_rename2_decode(data, size, &r);
	}
	{
		struct meta_delta md;

		if (meta_delta_decode(data, size, &md) == 0) {
			uint8_t b[META_DELTA_LEN];

			meta_delta_encode(&md, b);
			if (memcmp(b, data, sizeof(b)) != 0)
				__builtin_trap();
		}
	}
	{
		struct meta_extent e, list[META_EXTENTS_MAX];
		unsigned n;

		if (meta_extent_decode(data, size, &e) == 0) {
			uint8_t b[META_EXTENT_VMAX];
			uint64_t s0, sl;

			/* what a reader is told to fetch lies in the stripe's data */
			meta_extent_stored(&e, e.off, e.off + e.len, &s0, &sl);
			if (e.d == 0 || e.len == 0 || s0 + sl > (uint64_t)e.d * e.frag ||
			    (e.enc && (e.boff + e.len > e.blen || e.slen > e.blen)) ||
			    meta_extent_encode(&e, b, sizeof(b)) != (int)size ||
			    memcmp(b, data, size) != 0)
				__builtin_trap();
		}
		if (meta_extent_list_decode(data, size, list, &n) == 0 &&
		    (n == 0 || n > META_EXTENTS_MAX))
			__builtin_trap();
	}
	{
		/* a relocation's moves: round trip exactly */
		struct meta_move mv[META_FRAGS_MAX];
		unsigned n;

		if (meta_moves_decode(data, size, mv, &n) == 0) {
			struct sh_enc e;

			sh_enc_init(&e);
			if (n == 0 || n > META_FRAGS_MAX || meta_moves_encode(&e, mv, n) < 0 ||
			    e.len != size || memcmp(e.p, data, size) != 0)
				__builtin_trap();
			sh_enc_fini(&e);
		}
	}
	{
		/* a claim command's data, and an extent commit's with claims */
		static struct meta_dedup_item it[META_DEDUP_MAX];
		static struct meta_extent ex[META_EXTENTS_MAX];
		struct meta_claim_ref cl[META_CLAIMS_MAX];
		uint64_t claim;
		uint16_t owner;
		unsigned n, nex;

		if (meta_claim_decode(data, size, &claim, &owner, it, &n) == 0) {
			if (claim == 0 || n == 0 || n > META_DEDUP_MAX)
				__builtin_trap();
			for (unsigned i = 0; i < n; i++)
				if (it[i].has_loc &&
				    (!it[i].loc.dedup || it[i].loc.len != it[i].loc.blen))
					__builtin_trap();
		}
		if (meta_claims_decode(data, size, ex, &nex, cl, &n) == 0 &&
		    (nex == 0 || nex > META_EXTENTS_MAX || n > META_CLAIMS_MAX))
			__builtin_trap();
	}
	{
		/* a group's version record (the store) and a kept list (a command) */
		static struct meta_version v;
		static uint8_t b[META_VERSION_VAL_MAX];
		uint64_t keep[META_KEEP_MAX];
		unsigned n;
		int len;

		if (meta_version_decode(data, size, &v) == 0) {
			len = meta_version_encode(&v, b, sizeof(b));
			if (v.ver == 0 || v.settled > v.gen || v.nkeep > META_KEEP_MAX ||
			    (v.rdoing != 0 && v.rdoing <= v.repoch) ||
			    v.nbranch > META_BRANCH_MAX || len <= 0)
				__builtin_trap();
			for (unsigned i = 0; i < v.nbranch; i++)
				if (v.branch[i].id == 0 ||
				    meta_ver_branch(v.branch[i].ver) != v.branch[i].id ||
				    meta_ver_branch(v.branch[i].base) >= v.branch[i].id ||
				    (i > 0 && v.branch[i].id <= v.branch[i - 1].id))
					__builtin_trap();
			/* the newest format round-trips exactly; formats 1 and 2 (before
			 * restores, before branches) are written as the newest, which reads
			 * back the same */
			if (data[0] == 3 && (len != (int)size || memcmp(b, data, size) != 0))
				__builtin_trap();
			if (data[0] < 3) {
				static struct meta_version w;
				static uint8_t c[META_VERSION_VAL_MAX];

				if (meta_version_decode(b, (size_t)len, &w) != 0 ||
				    meta_version_encode(&w, c, sizeof(c)) != len ||
				    memcmp(b, c, (size_t)len) != 0 || w.nbranch != 0 ||
				    (data[0] == 1 && (w.repoch != 0 || w.rdoing != 0)))
					__builtin_trap();
			}
		}
		if (meta_keep_decode(data, size, keep, &n) == 0)
			for (unsigned i = 1; i < n; i++)
				if (keep[i] <= keep[i - 1])
					__builtin_trap();
	}
	return 0;
}
