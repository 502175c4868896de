// SPDX-License-Identifier: Apache-2.0
/* Error names and messages: errno values, Shoal codes, unknown codes. */
#include <errno.h>

#include "../../../src/base/base.h"
#include "../../lib/test.h"

TEST(strerror_errno)
{
	SH_ASSERT_STREQ(sh_errname(-ENOENT), "ENOENT");
	SH_ASSERT_STREQ(sh_strerror(-ENOENT), "No such file or directory");
	SH_ASSERT_STREQ(sh_errname(0), "OK");
	SH_ASSERT_STREQ(sh_strerror(5), "success");
}

TEST(strerror_shoal_codes)
{
	SH_ASSERT_STREQ(sh_errname(SH_ECRC), "SH_ECRC");
	SH_ASSERT_STREQ(sh_strerror(SH_ECRC), "checksum mismatch");
	SH_ASSERT_LE(SH_EINTERNAL, -4096);
	SH_ASSERT_STREQ(sh_errname(SH_ECRASHED), "SH_ECRASHED");
}

TEST(strerror_unknown)
{
	SH_ASSERT_STREQ(sh_errname(-3000), "EUNKNOWN");
	SH_ASSERT_STREQ(sh_strerror(-999999), "unknown error");
	SH_ASSERT_STREQ(sh_errname(-2147483647 - 1), "EUNKNOWN");
}
