// SPDX-License-Identifier: Apache-2.0
/* Refcounted buffers and slice vectors. */
#include <errno.h>

#include "../../../src/base/base.h"
#include "../../lib/test.h"

static int released;

static void
on_release(void *arg, void *data)
{
	SH_ASSERT(arg == data);
	released++;
}

TEST(buf_refcount_and_wrap)
{
	char user[100];
	struct sh_buf *b = sh_buf_wrap(user, sizeof(user), on_release, user);

	SH_ASSERT_NOT_NULL(b);
	sh_buf_get(b);
	sh_buf_put(b);
	SH_ASSERT_EQ(released, 0);
	sh_buf_put(b);
	SH_ASSERT_EQ(released, 1);

	b = sh_buf_create(8192, 4096);
	SH_ASSERT_NOT_NULL(b);
	SH_ASSERT_EQ((uintptr_t)b->data % 4096, 0);
	sh_buf_put(b);
	SH_ASSERT_NULL(sh_buf_create(10, 3)); /* alignment not a power of two */
}

TEST(iov_slices)
{
	struct sh_buf *a = sh_buf_create(10, 0), *b = sh_buf_create(10, 0);
	struct sh_iov v, w;
	struct iovec out[8];
	char got[32];

	memcpy(a->data, "0123456789", 10);
	memcpy(b->data, "abcdefghij", 10);
	sh_iov_init(&v);
	sh_iov_init(&w);
	SH_ASSERT_OK(sh_iov_append(&v, a, 2, 5)); /* 23456 */
	SH_ASSERT_OK(sh_iov_append(&v, b, 0, 10));
	for (int i = 0; i < 5; i++) /* past the inline slots */
		SH_ASSERT_OK(sh_iov_append(&v, a, (size_t)i, 1));
	SH_ASSERT_EQ(v.len, 20);
	SH_ASSERT_ERR(sh_iov_append(&v, a, 8, 3), -EINVAL);
	SH_ASSERT_ERR(sh_iov_append(&v, a, 11, 0), -EINVAL);
	SH_ASSERT_EQ(sh_iov_copyout(&v, 0, got, sizeof(got)), 20);
	SH_ASSERT_MEMEQ(got, "23456abcdefghij01234", 20);
	SH_ASSERT_EQ(sh_iov_copyout(&v, 3, got, 4), 4);
	SH_ASSERT_MEMEQ(got, "56ab", 4);

	SH_ASSERT_OK(sh_iov_append_range(&w, &v, 4, 8)); /* 6abcdefg */
	SH_ASSERT_EQ(w.len, 8);
	SH_ASSERT_EQ(sh_iov_copyout(&w, 0, got, sizeof(got)), 8);
	SH_ASSERT_MEMEQ(got, "6abcdefg", 8);
	SH_ASSERT_ERR(sh_iov_append_range(&w, &v, 15, 6), -EINVAL);
	SH_ASSERT_EQ(sh_iov_to_iovec(&w, out, 8), 2);
	SH_ASSERT_ERR(sh_iov_to_iovec(&v, out, 3), -E2BIG);
	SH_ASSERT_EQ(sh_iov_crc32c(&w, 0), sh_crc32c(0, "6abcdefg", 8));

	/* the slices keep the buffers alive */
	sh_buf_put(a);
	sh_buf_put(b);
	SH_ASSERT_EQ(sh_iov_copyout(&v, 0, got, 5), 5);
	SH_ASSERT_MEMEQ(got, "23456", 5);
	sh_iov_fini(&v);
	sh_iov_fini(&w);
	SH_ASSERT_EQ(v.len, 0);
}
