// SPDX-License-Identifier: Apache-2.0
/* Extent maps: overwrites split and trim, truncate and unlink drop references, reclaim queue. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../../../src/data/reduce.h"
#include "../../../src/meta/meta_cmd.h"
#include "../../../src/meta/meta_dedup.h"
#include "../../lib/test.h"

struct fx {
	struct meta_db *db;
	struct meta_txn *t;
	struct meta_bucket b;
	uint64_t ino;
};

static void
fx_open(struct fx *f)
{
	char path[512];
	struct meta_new n = { .type = META_REG, .mode = 0644, .now = 10 };
	struct meta_inode in;
	struct meta_dentry d;
	struct meta_delta delta;

	snprintf(path, sizeof(path), "%s/extent.mdb", sh_test_dir());
	unlink(path);
	SH_ASSERT_OK(meta_db_open(path, 64ull << 20, META_DB_NOSYNC, &f->db));
	SH_ASSERT_OK(meta_txn_begin(f->db, true, &f->t));
	f->b = (struct meta_bucket){ .t = f->t, .bucket = 0, .nbuckets = 1, .ver = 1 };
	SH_ASSERT_OK(meta_mkroot(&f->b, 0755, 1));
	SH_ASSERT_OK(meta_create(&f->b, META_ROOT_INO, "f", 1, &n, &in, &d, &delta));
	f->ino = d.ino;
}

static void
fx_close(struct fx *f)
{
	meta_txn_abort(f->t);
	meta_db_close(f->db);
}

static struct meta_extent
ext(uint64_t off, uint64_t len, uint64_t stripe, uint64_t soff)
{
	struct meta_extent e = { .off = off,
				 .len = len,
				 .stripe = stripe,
				 .soff = soff,
				 .d = 4,
				 .p = 2,
				 .frag = 1 << 20 };

	for (int i = 0; i < 6; i++)
		e.targets[i] = 1000 + (uint64_t)i;
	return e;
}

/* The map as "off+len@stripe:soff ..." for comparing. */
static void
map(struct fx *f, char *out, size_t cap)
{
	struct meta_extent e[64];
	unsigned n;
	size_t used = 0;

	SH_ASSERT_OK(meta_extents(&f->b, f->ino, 0, UINT64_MAX, e, 64, &n));
	out[0] = '\0';
	for (unsigned i = 0; i < n; i++)
		used += (size_t)snprintf(
		    out + used, cap - used, "%s%llu+%llu@%llu:%llu", i ? " " : "",
		    (unsigned long long)e[i].off, (unsigned long long)e[i].len,
		    (unsigned long long)e[i].stripe, (unsigned long long)e[i].soff);
}

static int
count(void *arg, const struct meta_extent *e)
{
	uint64_t *sum = arg;

	*sum += e->stripe;
	SH_ASSERT_EQ(e->soff, 0);
	SH_ASSERT_EQ(e->len, 4ull << 20); /* the whole stripe */
	return 0;
}

TEST(meta_extent_overwrite_truncate_unlink)
{
	struct fx f;
	struct meta_extent e[2];
	struct meta_inode in;
	struct meta_setattr sa = { .valid = META_SET_SIZE };
	char m[1024];
	uint64_t gone = 0, removed;
	struct meta_delta dl[2];

	fx_open(&f);
	/* 0..3 MiB of stripe 7 */
	e[0] = ext(0, 3 << 20, 7, 0);
	SH_ASSERT_OK(meta_extent_set(&f.b, f.ino, e, 1, 0, 20, &in));
	SH_ASSERT_EQ(in.size, 3ull << 20);
	SH_ASSERT_EQ(in.mtime, 20);
	/* an overwrite in the middle splits it: head and tail keep stripe 7 */
	e[0] = ext(1 << 20, 4096, 8, 0);
	SH_ASSERT_OK(meta_extent_set(&f.b, f.ino, e, 1, 0, 30, &in));
	map(&f, m, sizeof(m));
	SH_ASSERT_MSG(strcmp(m, "0+1048576@7:0 1048576+4096@8:0 1052672+2093056@7:1052672") == 0,
		      "%s", m);
	SH_ASSERT_EQ(in.size, 3ull << 20);
	/* a range query returns what overlaps only */
	{
		struct meta_extent got[4];
		unsigned n;

		SH_ASSERT_OK(meta_extents(&f.b, f.ino, (1 << 20) + 100, 10, got, 4, &n));
		SH_ASSERT_EQ(n, 1u);
		SH_ASSERT_EQ(got[0].stripe, 8);
		SH_ASSERT_OK(meta_extents(&f.b, f.ino, 5 << 20, 10, got, 4, &n));
		SH_ASSERT_EQ(n, 0u);
	}
	/* stripe 8 overwritten whole: its reference goes, it waits for release */
	e[0] = ext((1 << 20) - 10, 5000, 9, 100);
	SH_ASSERT_OK(meta_extent_set(&f.b, f.ino, e, 1, 0, 40, &in));
	SH_ASSERT_OK(meta_reclaims(&f.b, count, &gone));
	SH_ASSERT_EQ(gone, 8);
	SH_ASSERT_OK(meta_reclaim_done(&f.b, 8));
	gone = 0;
	SH_ASSERT_OK(meta_reclaims(&f.b, count, &gone));
	SH_ASSERT_EQ(gone, 0);
	/* a write past the end grows the file (the gap is a hole) */
	e[0] = ext(10 << 20, 100, 10, 0);
	e[1] = ext(12 << 20, 100, 11, 0);
	SH_ASSERT_OK(meta_extent_set(&f.b, f.ino, e, 2, 0, 50, &in));
	SH_ASSERT_EQ(in.size, (12ull << 20) + 100);
	/* truncate to 2 MiB: stripes 10, 11 go; stripe 7's tail is cut */
	sa.size = 2 << 20;
	SH_ASSERT_OK(meta_setattr(&f.b, f.ino, &sa, 60, &in));
	map(&f, m, sizeof(m));
	SH_ASSERT_MSG(strcmp(m, "0+1048566@7:0 1048566+5000@9:100 1053566+1043586@7:1053566") == 0,
		      "%s", m);
	SH_ASSERT_OK(meta_reclaims(&f.b, count, &gone));
	SH_ASSERT_EQ(gone, 21); /* 10 + 11 */
	SH_ASSERT_OK(meta_reclaim_done(&f.b, 10));
	SH_ASSERT_OK(meta_reclaim_done(&f.b, 11));
	/* unlink: every stripe goes */
	SH_ASSERT_OK(meta_remove(&f.b, META_ROOT_INO, "f", 1, false, 70, &removed, dl));
	gone = 0;
	SH_ASSERT_OK(meta_reclaims(&f.b, count, &gone));
	SH_ASSERT_EQ(gone, 0); /* an orphan: its holders still read it */
	SH_ASSERT_OK(meta_orphan_drop(&f.b, removed));
	SH_ASSERT_OK(meta_reclaims(&f.b, count, &gone));
	SH_ASSERT_EQ(gone, 16); /* 7 + 9 */
	fx_close(&f);
}

TEST(meta_extent_bad_input)
{
	struct fx f;
	struct meta_extent e = ext(0, 100, 1, 0), got;
	uint8_t v[META_EXTENT_LEN(META_FRAGS_MAX)];
	struct sh_enc enc;
	struct meta_extent list[META_EXTENTS_MAX];
	unsigned n;
	int len;

	fx_open(&f);
	/* past the stripe's data, empty, too many fragments, past 2^63 */
	e.soff = (4ull << 20) - 50;
	SH_ASSERT_EQ(meta_extent_set(&f.b, f.ino, &e, 1, 0, 1, NULL), -EINVAL);
	e = ext(0, 0, 1, 0);
	SH_ASSERT_EQ(meta_extent_set(&f.b, f.ino, &e, 1, 0, 1, NULL), -EINVAL);
	e = ext(0, 100, 1, 0);
	e.p = 20;
	SH_ASSERT_EQ(meta_extent_set(&f.b, f.ino, &e, 1, 0, 1, NULL), -EINVAL);
	e = ext(1ull << 63, 100, 1, 0);
	SH_ASSERT_EQ(meta_extent_set(&f.b, f.ino, &e, 1, 0, 1, NULL), -EFBIG);
	/* on a directory, on a gone inode */
	e = ext(0, 100, 1, 0);
	SH_ASSERT_EQ(meta_extent_set(&f.b, META_ROOT_INO, &e, 1, 0, 1, NULL), -EISDIR);
	SH_ASSERT_EQ(meta_extent_set(&f.b, f.ino + 1000, &e, 1, 0, 1, NULL), -ESTALE);
	/* round trips, and a list through a command */
	len = meta_extent_encode(&e, v, sizeof(v));
	SH_ASSERT_EQ(len, (int)META_EXTENT_LEN(6));
	SH_ASSERT_OK(meta_extent_decode(v, (size_t)len, &got));
	SH_ASSERT_EQ(got.stripe, 1);
	SH_ASSERT_EQ(meta_extent_decode(v, (size_t)len - 1, &got), -EBADMSG);
	sh_enc_init(&enc);
	SH_ASSERT_OK(meta_extent_list_encode(&enc, &e, 1));
	SH_ASSERT_OK(meta_extent_list_decode(enc.p, enc.len, list, &n));
	SH_ASSERT_EQ(n, 1u);
	SH_ASSERT_EQ(meta_extent_list_decode(enc.p, enc.len - 1, list, &n), -EBADMSG);
	{
		struct meta_cmd c = { .op = META_OP_EXTENT,
				      .ver = 1,
				      .now = 5,
				      .ino = f.ino,
				      .data = enc.p,
				      .dlen = enc.len };
		struct meta_result r;

		meta_cmd_apply(&f.b, &c, &r);
		SH_ASSERT_EQ(r.status, 0);
		SH_ASSERT_EQ(r.attr.size, 100);
	}
	sh_enc_fini(&enc);
	fx_close(&f);
}

/* Lookups far into a file start from a window before the offset, and still see a long extent. */
TEST(meta_extent_far_offsets)
{
	struct fx f;
	struct meta_extent e[3], got[4];
	unsigned n;

	fx_open(&f);
	e[0] = ext(0, 100, 1, 0);
	e[1] = ext(100ull << 20, 3 << 20, 2, 0);
	e[1].frag = 16 << 20; /* a long extent: 48 MiB of a 64 MiB stripe */
	e[1].len = 48ull << 20;
	e[2] = ext(300ull << 20, 100, 3, 0);
	SH_ASSERT_OK(meta_extent_set(&f.b, f.ino, e, 3, 0, 1, NULL));
	SH_ASSERT_OK(meta_extents(&f.b, f.ino, (100ull << 20) + (47ull << 20), 10, got, 4, &n));
	SH_ASSERT_EQ(n, 1u);
	SH_ASSERT_EQ(got[0].stripe, 2);
	SH_ASSERT_OK(meta_extents(&f.b, f.ino, 300ull << 20, 1, got, 4, &n));
	SH_ASSERT_EQ(n, 1u);
	SH_ASSERT_EQ(got[0].stripe, 3);
	SH_ASSERT_OK(meta_extents(&f.b, f.ino, 200ull << 20, 1 << 20, got, 4, &n));
	SH_ASSERT_EQ(n, 0u);
	/* longer than the longest extent: refused */
	e[0] = ext(0, 100, 4, 0);
	e[0].frag = 32 << 20;
	e[0].len = (64ull << 20) + 1;
	SH_ASSERT_EQ(meta_extent_set(&f.b, f.ino, e, 1, 0, 1, NULL), -EINVAL);
	fx_close(&f);
}

/* Small files: bytes with the inode; extents and inline bytes never both; truncate cuts them. */
TEST(meta_inline_small_files)
{
	struct fx f;
	struct meta_inode in;
	struct meta_extent e = ext(0, 100, 9, 0);
	struct meta_setattr sa = { .valid = META_SET_SIZE };
	uint8_t buf[META_INLINE_MAX];
	uint64_t gone = 0;

	fx_open(&f);
	SH_ASSERT_EQ(meta_inline_get(&f.b, f.ino, buf, sizeof(buf)), -ENOENT);
	SH_ASSERT_OK(meta_inline_set(&f.b, f.ino, "hello", 5, 10, &in));
	SH_ASSERT_EQ(in.size, 5);
	SH_ASSERT_EQ(meta_inline_get(&f.b, f.ino, buf, sizeof(buf)), 5);
	SH_ASSERT_MEMEQ(buf, "hello", 5);
	/* too big, empty, on a directory */
	SH_ASSERT_EQ(meta_inline_set(&f.b, f.ino, buf, META_INLINE_MAX + 1, 10, NULL), -EINVAL);
	SH_ASSERT_EQ(meta_inline_set(&f.b, f.ino, buf, 0, 10, NULL), -EINVAL);
	SH_ASSERT_EQ(meta_inline_set(&f.b, META_ROOT_INO, "x", 1, 10, NULL), -EISDIR);
	/* truncate cuts them */
	sa.size = 3;
	SH_ASSERT_OK(meta_setattr(&f.b, f.ino, &sa, 20, &in));
	SH_ASSERT_EQ(meta_inline_get(&f.b, f.ino, buf, sizeof(buf)), 3);
	/* an extent replaces them, when its writer took them along (else EAGAIN); inline
	 * bytes never hide extents (refused while any is left, anywhere in the file); once
	 * a truncate dropped them, they go inline again */
	SH_ASSERT_EQ(meta_extent_set(&f.b, f.ino, &e, 1, 0, 30, &in), -EAGAIN);
	SH_ASSERT_EQ(meta_inline_get(&f.b, f.ino, buf, sizeof(buf)), 3);
	SH_ASSERT_OK(meta_extent_set(&f.b, f.ino, &e, 1, META_EXTENT_TAKES_INLINE, 30, &in));
	SH_ASSERT_EQ(meta_inline_get(&f.b, f.ino, buf, sizeof(buf)), -ENOENT);
	SH_ASSERT_EQ(meta_inline_set(&f.b, f.ino, "again", 5, 40, &in), -ENOTEMPTY);
	{
		struct meta_extent far = ext(1 << 20, 100, 10, 0);

		sa.size = 0;
		SH_ASSERT_OK(meta_setattr(&f.b, f.ino, &sa, 41, &in));
		SH_ASSERT_OK(meta_extent_set(&f.b, f.ino, &far, 1, 0, 42, &in));
		/* the first 4 KiB a hole, an extent far out: still refused */
		SH_ASSERT_EQ(meta_inline_set(&f.b, f.ino, "again", 5, 43, &in), -ENOTEMPTY);
		SH_ASSERT_OK(meta_setattr(&f.b, f.ino, &sa, 44, &in));
	}
	SH_ASSERT_OK(meta_inline_set(&f.b, f.ino, "again", 5, 45, &in));
	SH_ASSERT_EQ(in.size, 5);
	SH_ASSERT_OK(meta_reclaims(&f.b, count, &gone));
	SH_ASSERT_EQ(gone, 9 + 10);
	fx_close(&f);
}

/* Inline bytes are counted in the bucket's usage (quotas): set, merged, cut, dropped. */
TEST(meta_inline_bytes_in_usage)
{
	struct fx f;
	struct meta_inode in;
	struct meta_usage u;
	struct meta_setattr sa = { .valid = META_SET_SIZE, .size = 2 };
	struct meta_extent e = ext(0, 100, 9, 0);

	fx_open(&f);
	SH_ASSERT_OK(meta_inline_set(&f.b, f.ino, "hello", 5, 10, &in));
	SH_ASSERT_OK(meta_usage_get(&f.b, &u));
	SH_ASSERT_EQ(u.inlined, 5);
	SH_ASSERT_EQ(u.mapped, 0);
	SH_ASSERT_OK(meta_inline_merge(&f.b, f.ino, 3, "world", 5, 11, &in));
	SH_ASSERT_OK(meta_usage_get(&f.b, &u));
	SH_ASSERT_EQ(u.inlined, 8);
	SH_ASSERT_OK(meta_setattr(&f.b, f.ino, &sa, 12, &in));
	SH_ASSERT_OK(meta_usage_get(&f.b, &u));
	SH_ASSERT_EQ(u.inlined, 2);
	/* an extent takes them along: counted as mapped from then on */
	SH_ASSERT_OK(meta_extent_set(&f.b, f.ino, &e, 1, META_EXTENT_TAKES_INLINE, 13, &in));
	SH_ASSERT_OK(meta_usage_get(&f.b, &u));
	SH_ASSERT_EQ(u.inlined, 0);
	SH_ASSERT_EQ(u.mapped, 100);
	sa.size = 0;
	SH_ASSERT_OK(meta_setattr(&f.b, f.ino, &sa, 14, &in));
	SH_ASSERT_OK(meta_inline_set(&f.b, f.ino, "abc", 3, 15, &in));
	SH_ASSERT_OK(meta_usage_get(&f.b, &u));
	SH_ASSERT_EQ(u.inlined, 3);
	SH_ASSERT_EQ(u.mapped, 0);
	fx_close(&f);
}

/* A writer's bytes merged into the inline bytes where they lie, in one step. */
TEST(meta_inline_merge_at_offsets)
{
	struct fx f;
	struct meta_inode in;
	struct meta_extent e = ext(0, 100, 9, 0);
	uint8_t buf[META_INLINE_MAX], want[META_INLINE_MAX];

	fx_open(&f);
	/* nothing there yet: zeros before the offset */
	SH_ASSERT_OK(meta_inline_merge(&f.b, f.ino, 10, "world", 5, 10, &in));
	SH_ASSERT_EQ(in.size, 15);
	memset(want, 0, sizeof(want));
	memcpy(want + 10, "world", 5);
	SH_ASSERT_EQ(meta_inline_get(&f.b, f.ino, buf, sizeof(buf)), 15);
	SH_ASSERT_MEMEQ(buf, want, 15);
	/* inside what is there: the rest kept; past the end: the file grows */
	SH_ASSERT_OK(meta_inline_merge(&f.b, f.ino, 0, "hello", 5, 11, &in));
	memcpy(want, "hello", 5);
	SH_ASSERT_EQ(meta_inline_get(&f.b, f.ino, buf, sizeof(buf)), 15);
	SH_ASSERT_MEMEQ(buf, want, 15);
	SH_ASSERT_OK(meta_inline_merge(&f.b, f.ino, 20, "!", 1, 12, &in));
	want[20] = '!';
	SH_ASSERT_EQ(in.size, 21);
	SH_ASSERT_EQ(meta_inline_get(&f.b, f.ino, buf, sizeof(buf)), 21);
	SH_ASSERT_MEMEQ(buf, want, 21);
	/* up to the very end of the inline space, not a byte past it */
	SH_ASSERT_OK(meta_inline_merge(&f.b, f.ino, META_INLINE_MAX - 1, "z", 1, 13, &in));
	SH_ASSERT_EQ(in.size, META_INLINE_MAX);
	SH_ASSERT_EQ(meta_inline_merge(&f.b, f.ino, META_INLINE_MAX, "z", 1, 14, &in), -EFBIG);
	SH_ASSERT_EQ(meta_inline_merge(&f.b, f.ino, META_INLINE_MAX - 2, "zzz", 3, 14, &in),
		     -EFBIG);
	SH_ASSERT_EQ(meta_inline_merge(&f.b, f.ino, 0, "z", 0, 14, &in), -EINVAL);
	/* a file with extents: refused as a set is */
	SH_ASSERT_OK(meta_extent_set(&f.b, f.ino, &e, 1, META_EXTENT_TAKES_INLINE, 30, &in));
	SH_ASSERT_EQ(meta_inline_merge(&f.b, f.ino, 0, "again", 5, 40, &in), -ENOTEMPTY);
	fx_close(&f);
}

/* A compressed block: stored slen bytes at soff expanding to 64 KiB, range [boff, boff + len). */
static struct meta_extent
cext(uint64_t off, uint32_t len, uint64_t stripe, uint64_t soff, uint32_t slen)
{
	struct meta_extent e = ext(off, len, stripe, soff);

	e.enc = REDUCE_LZ4;
	e.slen = slen;
	e.blen = 65536;
	e.boff = 0;
	return e;
}

TEST(meta_extent_encoded_blocks_trim_by_offset_in_block)
{
	struct fx f;
	struct meta_extent e[3], got[8];
	struct meta_inode in;
	struct meta_usage u;
	uint8_t v[META_EXTENT_VMAX];
	unsigned n;
	uint64_t s0, sl;

	fx_open(&f);
	/* two compressed blocks of stripe 5 back to back, then a raw block */
	e[0] = cext(0, 65536, 5, 0, 30000);
	e[1] = cext(65536, 65536, 5, 30000, 20000);
	e[2] = ext(131072, 65536, 5, 50000);
	SH_ASSERT_OK(meta_extent_set(&f.b, f.ino, e, 3, 0, 20, &in));
	SH_ASSERT_OK(meta_usage_get(&f.b, &u));
	SH_ASSERT_EQ(u.mapped, 3 * 65536);
	SH_ASSERT_EQ(u.data, 4ull << 20); /* one stripe: d x frag, counted once */
	SH_ASSERT_EQ(u.phys, 6ull << 20);
	/* overwrite the middle of the first block: head and tail stay, the tail by boff */
	e[0] = ext(1000, 2000, 6, 0);
	SH_ASSERT_OK(meta_extent_set(&f.b, f.ino, e, 1, 0, 30, &in));
	SH_ASSERT_OK(meta_extents(&f.b, f.ino, 0, UINT64_MAX, got, 8, &n));
	SH_ASSERT_EQ(n, 5u);
	SH_ASSERT_EQ(got[0].enc, REDUCE_LZ4);
	SH_ASSERT_EQ(got[0].len, 1000);
	SH_ASSERT_EQ(got[0].boff, 0);
	SH_ASSERT_EQ(got[2].off, 3000);
	SH_ASSERT_EQ(got[2].soff, 0); /* the block stays where it is stored */
	SH_ASSERT_EQ(got[2].boff, 3000);
	SH_ASSERT_EQ(got[2].len, 65536 - 3000);
	SH_ASSERT_EQ(got[2].slen, 30000);
	/* a read of any part of an encoded extent fetches its whole stored block */
	meta_extent_stored(&got[2], 4000, 5000, &s0, &sl);
	SH_ASSERT_EQ(s0, 0);
	SH_ASSERT_EQ(sl, 30000);
	meta_extent_stored(&got[4], 131072 + 10, 131072 + 20, &s0, &sl);
	SH_ASSERT_EQ(s0, 50010);
	SH_ASSERT_EQ(sl, 10);
	SH_ASSERT_OK(meta_usage_get(&f.b, &u));
	SH_ASSERT_EQ(u.mapped, 3 * 65536); /* 2000 replaced by 2000 */
	SH_ASSERT_EQ(u.data, 8ull << 20);  /* stripes 5 and 6 */
	/* records round-trip; a range past its block, or a block past the stripe, is refused */
	{
		struct meta_extent back;
		int vl = meta_extent_encode(&got[2], v, sizeof(v));

		SH_ASSERT_EQ(vl, (int)META_EXTENT_LEN_V2(6));
		SH_ASSERT_OK(meta_extent_decode(v, (size_t)vl, &back));
		SH_ASSERT_EQ(back.boff, 3000);
		SH_ASSERT_EQ(back.enc, REDUCE_LZ4);
		e[0] = got[2];
		e[0].len = 65536 - 2999;
		vl = meta_extent_encode(&e[0], v, sizeof(v));
		SH_ASSERT_ERR(meta_extent_decode(v, (size_t)vl, &back), -EBADMSG);
		e[0] = got[2];
		e[0].soff = (4ull << 20) - 100;
		vl = meta_extent_encode(&e[0], v, sizeof(v));
		SH_ASSERT_ERR(meta_extent_decode(v, (size_t)vl, &back), -EBADMSG);
		e[0] = got[2];
		e[0].enc = REDUCE_ENC_MAX;
		vl = meta_extent_encode(&e[0], v, sizeof(v));
		SH_ASSERT_ERR(meta_extent_decode(v, (size_t)vl, &back), -EBADMSG);
		SH_ASSERT_ERR(meta_extent_set(&f.b, f.ino, e, 1, 0, 40, &in), -EINVAL);
	}
	/* truncate to nothing: usage goes back to zero */
	SH_ASSERT_OK(meta_extent_punch(&f.b, f.ino, 0, UINT64_MAX));
	SH_ASSERT_OK(meta_usage_get(&f.b, &u));
	SH_ASSERT_EQ(u.mapped, 0);
	SH_ASSERT_EQ(u.data, 0);
	SH_ASSERT_EQ(u.phys, 0);
	fx_close(&f);
}

static int
on_dirty(void *arg, uint64_t stripe, uint64_t ino, uint64_t live, uint64_t total)
{
	uint64_t *got = arg;

	got[0] = stripe;
	got[1] = ino;
	got[2] = live;
	got[3] = total;
	return 0;
}

TEST(meta_extent_cleaning_moves_only_what_is_still_the_stripes)
{
	struct fx f;
	struct meta_extent e[2], got[8];
	struct meta_inode in, after;
	struct meta_usage u0, u1;
	uint64_t dirty[4] = { 0 };
	unsigned n;

	fx_open(&f);
	/* a 4 MiB stripe mapped whole, then 3/4 of it overwritten */
	e[0] = ext(0, 4 << 20, 7, 0);
	SH_ASSERT_OK(meta_extent_set(&f.b, f.ino, e, 1, 0, 20, &in));
	SH_ASSERT_OK(meta_stripes_dirty(&f.b, on_dirty, dirty));
	SH_ASSERT_EQ(dirty[0], 0); /* all live */
	e[0] = ext(1 << 20, 3 << 20, 8, 0);
	SH_ASSERT_OK(meta_extent_set(&f.b, f.ino, e, 1, 0, 30, &in));
	SH_ASSERT_OK(meta_stripes_dirty(&f.b, on_dirty, dirty));
	SH_ASSERT_EQ(dirty[0], 7);
	SH_ASSERT_EQ(dirty[1], f.ino);
	SH_ASSERT_EQ(dirty[2], 1 << 20);
	SH_ASSERT_EQ(dirty[3], 4 << 20);
	SH_ASSERT_OK(meta_usage_get(&f.b, &u0));
	/* a range that is not all stripe 7's any more is refused, nothing changed */
	e[0] = ext(0, 2 << 20, 9, 0);
	SH_ASSERT_ERR(meta_extent_move(&f.b, f.ino, e, 1, 7), -ESTALE);
	/* its live part moved: stripe 7 goes to the reclaim queue; size and times stay */
	e[0] = ext(0, 1 << 20, 9, 0);
	SH_ASSERT_OK(meta_extent_move(&f.b, f.ino, e, 1, 7));
	/* the same move again (a retry whose answer was lost): done already, nothing changes */
	SH_ASSERT_OK(meta_extent_move(&f.b, f.ino, e, 1, 7));
	SH_ASSERT_OK(meta_extents(&f.b, f.ino, 0, UINT64_MAX, got, 8, &n));
	SH_ASSERT_EQ(n, 2u);
	SH_ASSERT_EQ(got[0].stripe, 9);
	SH_ASSERT_EQ(got[1].stripe, 8);
	SH_ASSERT_OK(meta_getattr(&f.b, f.ino, &after));
	SH_ASSERT_EQ(after.size, in.size);
	SH_ASSERT_EQ(after.mtime, in.mtime);
	SH_ASSERT_EQ(after.ctime, in.ctime);
	{
		uint64_t gone = 0;

		SH_ASSERT_OK(meta_reclaims(&f.b, count, &gone));
		SH_ASSERT_EQ(gone, 7);
	}
	/* mapped bytes the same; one stripe fewer */
	SH_ASSERT_OK(meta_usage_get(&f.b, &u1));
	SH_ASSERT_EQ(u1.mapped, u0.mapped);
	SH_ASSERT_EQ(u1.unique, u0.unique);
	SH_ASSERT_EQ(u1.data, u0.data); /* stripe 9 replaced stripe 7: same size here */
	fx_close(&f);
}

static int
count_reclaims(void *arg, const struct meta_extent *e)
{
	(void)e;
	(*(unsigned *)arg)++;
	return 0;
}

/*
 * A mapping whose answer was lost (its leader killed after the commit) comes
 * again with the same tag: it is done already. Applied a second time it
 * punched its own extent, dropped the stripe's last reference and queued the
 * stripe for release while the file still named it (an fsync'd file read EIO
 * after node kills). A reference to a stripe being released is refused.
 */
TEST(meta_extent_retried_mapping_is_done)
{
	struct fx f;
	struct meta_extent e = ext(0, 4 << 20, 9, 0);
	struct sh_enc enc;
	struct meta_cmd c = { .op = META_OP_EXTENT, .ver = 1, .now = 5, .tag = 0xabc };
	struct meta_result *r = sh_calloc(1, sizeof(*r));
	struct meta_inode in;
	unsigned nrec = 0;
	char m[256];

	fx_open(&f);
	sh_enc_init(&enc);
	SH_ASSERT_OK(meta_extent_list_encode(&enc, &e, 1));
	c.ino = f.ino;
	c.data = enc.p;
	c.dlen = enc.len;
	meta_cmd_apply(&f.b, &c, r);
	SH_ASSERT_OK(r->status);
	meta_cmd_apply(&f.b, &c, r); /* the retry */
	SH_ASSERT_OK(r->status);
	SH_ASSERT_EQ(r->attr.size, 4ull << 20);
	SH_ASSERT_OK(meta_reclaims(&f.b, count_reclaims, &nrec));
	SH_ASSERT_EQ(nrec, 0u);
	map(&f, m, sizeof(m));
	SH_ASSERT_MSG(strcmp(m, "0+4194304@9:0") == 0, "%s", m);

	/* overwritten: stripe 9 is queued; a late mapping of it is refused, not resurrected */
	e = ext(0, 4 << 20, 10, 0);
	SH_ASSERT_OK(meta_extent_set(&f.b, f.ino, &e, 1, 0, 30, &in));
	SH_ASSERT_OK(meta_reclaims(&f.b, count_reclaims, &nrec));
	SH_ASSERT_EQ(nrec, 1u);
	e = ext(4 << 20, 4 << 20, 9, 0);
	SH_ASSERT_EQ(meta_extent_set(&f.b, f.ino, &e, 1, 0, 40, &in), -ESTALE);
	sh_enc_fini(&enc);
	sh_free(r);
	fx_close(&f);
}

/*
 * O_APPEND between clients (META_AT_END): an append's inline bytes and an
 * append's extents land only where the file's size is still the one they
 * were placed for; otherwise -EAGAIN and nothing changed (the writer places
 * them at the new end). A tagged append retried after it landed is done,
 * not refused and not placed twice.
 */
TEST(meta_appends_land_only_at_the_end_they_were_for)
{
	struct fx f;
	struct meta_result *r = sh_calloc(1, sizeof(*r));
	struct meta_extent e;
	struct sh_enc enc;
	uint8_t got[64];
	char m[256];
	struct meta_cmd c = { .op = META_OP_INLINE,
			      .flags = META_INLINE_MERGE | META_AT_END,
			      .ver = 1,
			      .now = 5,
			      .upto = 0,
			      .tag = 0x51,
			      .data = (const uint8_t *)"aaaa",
			      .dlen = 4 };

	fx_open(&f);
	c.ino = f.ino;
	meta_cmd_apply(&f.b, &c, r); /* client A: at 0, the end */
	SH_ASSERT_OK(r->status);
	meta_cmd_apply(&f.b, &c, r); /* its retry, the answer lost: done */
	SH_ASSERT_OK(r->status);
	SH_ASSERT_EQ(r->attr.size, 4u);
	c.tag = 0x52; /* client B placed its bytes at 0 too: refused */
	c.data = (const uint8_t *)"bbbb";
	meta_cmd_apply(&f.b, &c, r);
	SH_ASSERT_EQ(r->status, -EAGAIN);
	c.upto = 4; /* again at the end it is now */
	meta_cmd_apply(&f.b, &c, r);
	SH_ASSERT_OK(r->status);
	SH_ASSERT_EQ(meta_inline_get(&f.b, f.ino, got, sizeof(got)), 8);
	SH_ASSERT(memcmp(got, "aaaabbbb", 8) == 0);
	/* without the flag a merge lands where it says (another descriptor's pwrite) */
	c = (struct meta_cmd){ .op = META_OP_INLINE,
			       .flags = META_INLINE_MERGE,
			       .ver = 1,
			       .now = 6,
			       .ino = f.ino,
			       .upto = 2,
			       .data = (const uint8_t *)"cc",
			       .dlen = 2 };
	meta_cmd_apply(&f.b, &c, r);
	SH_ASSERT_OK(r->status);
	SH_ASSERT_EQ(meta_inline_get(&f.b, f.ino, got, sizeof(got)), 8);
	SH_ASSERT(memcmp(got, "aaccbbbb", 8) == 0);

	/* extents: the inline bytes taken along at the end they were for (8), then an append */
	sh_enc_init(&enc);
	e = ext(0, 4 << 20, 7, 0);
	SH_ASSERT_OK(meta_extent_list_encode(&enc, &e, 1));
	c = (struct meta_cmd){ .op = META_OP_EXTENT,
			       .flags = META_EXTENT_TAKES_INLINE | META_AT_END,
			       .ver = 1,
			       .now = 7,
			       .ino = f.ino,
			       .upto = 3,
			       .tag = 0x61,
			       .data = enc.p,
			       .dlen = enc.len };
	meta_cmd_apply(&f.b, &c, r); /* placed for a size of 3: refused, the bytes stay */
	SH_ASSERT_EQ(r->status, -EAGAIN);
	SH_ASSERT_EQ(meta_inline_get(&f.b, f.ino, got, sizeof(got)), 8);
	c.upto = 8;
	meta_cmd_apply(&f.b, &c, r);
	SH_ASSERT_OK(r->status);
	SH_ASSERT_EQ(r->attr.size, 4ull << 20);
	sh_enc_fini(&enc);
	sh_enc_init(&enc);
	e = ext(4 << 20, 100, 8, 0);
	SH_ASSERT_OK(meta_extent_list_encode(&enc, &e, 1));
	c = (struct meta_cmd){ .op = META_OP_EXTENT,
			       .flags = META_AT_END,
			       .ver = 1,
			       .now = 8,
			       .ino = f.ino,
			       .upto = 4 << 20,
			       .tag = 0x62,
			       .data = enc.p,
			       .dlen = enc.len };
	meta_cmd_apply(&f.b, &c, r);
	SH_ASSERT_OK(r->status);
	SH_ASSERT_EQ(r->attr.size, (4ull << 20) + 100);
	c.tag = 0x63; /* another client's, placed for the same end: refused */
	meta_cmd_apply(&f.b, &c, r);
	SH_ASSERT_EQ(r->status, -EAGAIN);
	map(&f, m, sizeof(m));
	SH_ASSERT_MSG(strcmp(m, "0+4194304@7:0 4194304+100@8:0") == 0, "%s", m);
	sh_enc_fini(&enc);
	sh_free(r);
	fx_close(&f);
}

static int
first_loc(void *arg, const struct meta_extent *e)
{
	*(struct meta_extent *)arg = *e;
	return 1;
}

static int
take_targets(void *arg, const struct meta_extent *e)
{
	memcpy(arg, e->targets, 6 * sizeof(e->targets[0]));
	return 0;
}

/*
 * A stripe's record says where its fragments are: set at its first
 * reference, moved by META_OP_RELOCATE only from where it is, asked by the
 * sweep per fragment and target, and the reclaim record names where it is.
 */
TEST(meta_stripe_relocated_and_asked_where)
{
	struct fx f;
	struct meta_extent e = ext(0, 1 << 20, 42, 0), loc;
	struct meta_move mv[2] = { { .idx = 1, .from = 1001, .to = 2001 },
				   { .idx = 4, .from = 1004, .to = 2004 } };
	struct meta_inode in;
	struct meta_cmd c = { .op = META_OP_RELOCATE, .ver = 1, .upto = 42 };
	struct meta_result r;
	struct sh_enc enc;
	uint64_t tg[6] = { 0 }, removed;
	struct meta_delta dl[2];

	fx_open(&f);
	SH_ASSERT_OK(meta_extent_set(&f.b, f.ino, &e, 1, 0, 20, &in));
	e = ext(1 << 20, 1 << 20, 42, 1 << 20); /* a second extent of the same stripe */
	SH_ASSERT_OK(meta_extent_set(&f.b, f.ino, &e, 1, 0, 21, &in));
	SH_ASSERT_OK(meta_stripe_loc(&f.b, 42, &loc));
	SH_ASSERT_EQ(loc.stripe, 42u);
	SH_ASSERT_EQ(loc.len, 4ull << 20);
	SH_ASSERT_EQ(loc.targets[1], 1001u);
	SH_ASSERT_EQ(meta_stripe_loc(&f.b, 43, &loc), -ENOENT);
	memset(&loc, 0, sizeof(loc));
	SH_ASSERT_OK(meta_stripe_locs(&f.b, 0, first_loc, &loc));
	SH_ASSERT_EQ(loc.stripe, 42u);
	SH_ASSERT_EQ(meta_stripe_known_at(&f.b, 42, 1, 1001), 1);
	SH_ASSERT_EQ(meta_stripe_known_at(&f.b, 42, 2, 1001), 0); /* another fragment */
	/* moved through the command: the record changes, the extents keep their hints */
	sh_enc_init(&enc);
	SH_ASSERT_OK(meta_moves_encode(&enc, mv, 2));
	c.data = enc.p;
	c.dlen = enc.len;
	meta_cmd_apply(&f.b, &c, &r);
	SH_ASSERT_OK(r.status);
	SH_ASSERT_OK(meta_stripe_loc(&f.b, 42, &loc));
	SH_ASSERT_EQ(loc.targets[1], 2001u);
	SH_ASSERT_EQ(loc.targets[4], 2004u);
	SH_ASSERT_EQ(loc.targets[0], 1000u);
	SH_ASSERT_EQ(meta_stripe_known_at(&f.b, 42, 1, 1001), 0); /* stale there now */
	SH_ASSERT_EQ(meta_stripe_known_at(&f.b, 42, 1, 2001), 1);
	SH_ASSERT_EQ(meta_stripe_known(&f.b, 42), 1);
	/* the same moves again: not from where it is any more, nothing changes */
	meta_cmd_apply(&f.b, &c, &r);
	SH_ASSERT_EQ(r.status, -ESTALE);
	/* a move of a fragment that does not exist, or of another bucket's stripe */
	mv[0] = (struct meta_move){ .idx = 6, .from = 1, .to = 2 };
	SH_ASSERT_EQ(meta_stripe_relocate(&f.b, 42, mv, 1), -EINVAL);
	c.upto = 1ull << 48 | 42;
	meta_cmd_apply(&f.b, &c, &r);
	SH_ASSERT_EQ(r.status, -EINVAL);
	sh_enc_fini(&enc);
	/* the codec refuses what is not moves */
	{
		struct meta_move got[META_FRAGS_MAX];
		uint8_t bad[3] = { 0, 1, 2 };
		unsigned n;

		SH_ASSERT_EQ(meta_moves_decode(bad, sizeof(bad), got, &n), -EBADMSG);
		bad[0] = 1;
		SH_ASSERT_EQ(meta_moves_decode(bad, sizeof(bad), got, &n), -EBADMSG);
		SH_ASSERT_EQ(meta_moves_encode(&enc, mv, 0), -EINVAL);
	}
	/* released: the reclaim record names where the fragments are now */
	SH_ASSERT_OK(meta_remove(&f.b, META_ROOT_INO, "f", 1, false, 70, &removed, dl));
	SH_ASSERT_OK(meta_orphan_drop(&f.b, removed));
	SH_ASSERT_OK(meta_reclaims(&f.b, take_targets, tg));
	SH_ASSERT_EQ(tg[1], 2001u);
	SH_ASSERT_EQ(tg[4], 2004u);
	SH_ASSERT_EQ(meta_stripe_known_at(&f.b, 42, 4, 2004), 1); /* until it is released */
	SH_ASSERT_EQ(meta_stripe_known_at(&f.b, 42, 4, 1004), 0);
	SH_ASSERT_EQ(meta_stripe_loc(&f.b, 42, &loc), -ENOENT);
	fx_close(&f);
}
