// SPDX-License-Identifier: Apache-2.0
/*
 * Fuzz target: the metadata protocol as a bucket leader reads requests
 * (from clients and other leaders) and a client reads replies and
 * readdir pages. A decoded message must re-encode to the same bytes, and
 * whatever it points to must lie inside the input.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/meta/mproto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
on_key(void *arg, uint32_t fs, const struct mp_key *k)
{
	(void)arg;
	(void)fs;
	if (k->kind != MP_KEY_ATTR && k->kind != MP_KEY_DENTRY)
		__builtin_trap();
}

static void
inside(const uint8_t *p, size_t n, const uint8_t *data, size_t size)
{
	if (n && (p < data || p + n > data + size))
		__builtin_trap();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct mp_req q;
	struct mp_reply r;
	struct sh_enc e;
	struct sh_dec d;
	struct meta_dirent de;
	struct meta_inode a;
	struct mp_diff_rec dr;
	int k, n = 0;

	if (mp_req_decode(data, size, &q) == 0) {
		inside(q.data, q.dlen, data, size);
		if (strlen(q.name) > q.nlen)
			__builtin_trap();
		sh_enc_init(&e);
		if (mp_req_encode(&e, &q) == 0 && (e.len != size || memcmp(e.p, data, size) != 0))
			__builtin_trap();
		sh_enc_fini(&e);
	}
	if (mp_reply_decode(data, size, &r) == 0) {
		inside(r.data, r.dlen, data, size);
		if ((r.flags & MP_DENTRY) && r.dentry.ino == 0)
			__builtin_trap();
	}
	(void)mp_recall_decode(data, size, on_key, NULL);
	sh_dec_init(&d, data, size);
	while ((k = mp_dirent_next(&d, &de, NULL)) == 1 && n++ < 100000)
		if (de.len == 0 || strlen(de.name) > de.len)
			__builtin_trap();
	/* readdirplus pages: what decodes encodes back to the same bytes */
	sh_dec_init(&d, data, size);
	sh_enc_init(&e);
	n = 0;
	while ((k = mp_dirent_next(&d, &de, &a)) == 1 && n++ < 100000) {
		if (de.len == 0 || strlen(de.name) > de.len)
			__builtin_trap();
		mp_dirent_put(&e, &de, &a);
	}
	if (k == 0 && (e.len != size || (size > 0 && memcmp(e.p, data, size) != 0)))
		__builtin_trap();
	sh_enc_fini(&e);
	/* MP_DIFF pages: inside the input, and encoded back to the same bytes */
	sh_dec_init(&d, data, size);
	sh_enc_init(&e);
	n = 0;
	while ((k = mp_diff_next(&d, &dr)) == 1 && n++ < 100000) {
		inside(dr.key, dr.klen, data, size);
		inside(dr.old, dr.olen, data, size);
		inside(dr.new, dr.nlen, data, size);
		if (dr.cursor ? dr.old != NULL || dr.new != NULL : dr.old == NULL && dr.new == NULL)
			__builtin_trap();
		mp_diff_put(&e, &dr);
	}
	if (k == 0 && (e.len != size || (size > 0 && memcmp(e.p, data, size) != 0)))
		__builtin_trap();
	sh_enc_fini(&e);
	return 0;
}
