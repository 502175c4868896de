// SPDX-License-Identifier: Apache-2.0
/*
 * A handle's stripe buffers (io_write.c): fragments are sent straight from
 * them, so one a session still holds (its sends not all acknowledged) is
 * never handed out to be written again; and a read's holes are zeroed
 * without zeroing what the extents bring (io_read.c).
 */
#include <string.h>

#include "../../../src/base/buf.h"
#include "../../../src/client/io_int.h"
#include "../../lib/test.h"

struct fake {
	sh_client c;
	sh_fs fs;
	sh_file f;
};

static struct fake *
fake_new(void)
{
	struct fake *x = sh_calloc(1, sizeof(*x));

	SH_ASSERT(x != NULL);
	x->c.frag = 4096;
	x->fs.c = &x->c;
	x->fs.code.d = 4;
	x->fs.code.p = 2;
	x->f.fs = &x->fs;
	return x;
}

static void
fake_free(struct fake *x)
{
	while (x->f.nspare > 0)
		sh_buf_put(x->f.spare[--x->f.nspare]);
	sh_buf_put(x->f.bufh);
	sh_free(x);
}

static uint32_t
refs(struct sh_buf *b)
{
	return atomic_load(&b->ref);
}

TEST(client_stripe_buffer_held_by_a_send_is_not_handed_out)
{
	struct fake *x = fake_new();
	struct sh_buf *a = io_buf_take(&x->f), *b, *held;

	SH_ASSERT(a != NULL);
	SH_ASSERT_EQ(a->cap, (size_t)6 * 4096); /* d + p fragments: parity goes after the data */
	held = sh_buf_get(a);			/* a session sends from it */
	io_buf_give(&x->f, a);
	b = io_buf_take(&x->f);
	SH_ASSERT(b != NULL && b != a); /* not while the send holds it */
	SH_ASSERT_EQ(refs(b), 1u);
	io_buf_give(&x->f, b);
	sh_buf_put(held); /* acknowledged: a spare to use again */
	b = io_buf_take(&x->f);
	SH_ASSERT_EQ(refs(b), 1u);
	SH_ASSERT_EQ(x->f.nspare, 1u);
	io_buf_give(&x->f, b);
	/* more spares than a handle keeps: the oldest go, nothing leaks (ASan builds) */
	for (unsigned i = 0; i < SPARES_MAX + 3; i++)
		io_buf_give(&x->f, sh_buf_create(6 * 4096, 0));
	SH_ASSERT_EQ(x->f.nspare, (unsigned)SPARES_MAX);
	fake_free(x);
}

TEST(client_stripe_buffer_written_only_when_nobody_else_holds_it)
{
	struct fake *x = fake_new();
	struct sh_buf *first, *held;

	x->f.bufh = first = io_buf_take(&x->f);
	memset(first->data, 'a', 100);
	x->f.fill = 100;
	SH_ASSERT_EQ(io_buf_own(&x->f), 0);
	SH_ASSERT(x->f.bufh == first); /* its own already: kept */
	held = sh_buf_get(first);      /* a failed put's sends still hold it */
	SH_ASSERT_EQ(io_buf_own(&x->f), 0);
	SH_ASSERT(x->f.bufh != first);
	SH_ASSERT_EQ(refs(x->f.bufh), 1u);
	for (unsigned i = 0; i < 100; i++) /* what it held came along */
		SH_ASSERT_EQ(x->f.bufh->data[i], 'a');
	memset(x->f.bufh->data, 'b', 200);
	SH_ASSERT_EQ(first->data[0], 'a'); /* what the send holds is as it was */
	SH_ASSERT_EQ(first->data[99], 'a');
	sh_buf_put(held);
	fake_free(x);
}

TEST(client_read_zeroes_holes_and_only_holes)
{
	uint8_t buf[100];
	struct meta_extent ex[3] = {
		{ .off = 130, .len = 20 }, /* given out of order, */
		{ .off = 110, .len = 10 },
		{ .off = 140, .len = 30 }, /* overlapping, and past the range */
	};

	/* the file from 100: holes [100, 110), [120, 130), nothing past 170 in [100, 160) */
	memset(buf, 0xAA, sizeof(buf));
	io_zero_holes(ex, 3, 100, 160, buf, 100);
	for (unsigned i = 0; i < 60; i++) {
		uint64_t pos = 100 + i;
		bool hole = pos < 110 || (pos >= 120 && pos < 130);

		SH_ASSERT_MSG(buf[i] == (hole ? 0 : 0xAA), "byte at %llu", (unsigned long long)pos);
	}
	SH_ASSERT_EQ(buf[60], 0xAA); /* nothing past upto */
	/* from an offset inside the range, and no extents at all: all zeros */
	memset(buf, 0xAA, sizeof(buf));
	io_zero_holes(ex, 0, 105, 125, buf, 100);
	for (unsigned i = 0; i < 100; i++)
		SH_ASSERT_EQ(buf[i], i >= 5 && i < 25 ? 0 : 0xAA);
}
