// SPDX-License-Identifier: Apache-2.0
/* Log level specs, per-facility levels, tags and capture. */
#include <errno.h>
#include <stdio.h>

#include "../../../src/base/base.h"
#include "../../lib/test.h"

SH_LOG_FACILITY("test.log");

static char captured[4096];
static int ncaptured;

static void
sink(void *arg, int level, const char *line)
{
	(void)arg;
	(void)level;
	ncaptured++;
	snprintf(captured, sizeof(captured), "%s", line);
}

TEST(log_spec_valid)
{
	char err[128] = "";

	SH_ASSERT_OK(sh_log_spec_check("info", err, sizeof(err)));
	SH_ASSERT_OK(sh_log_spec_check("warn,env.*=debug,net=trace", err, sizeof(err)));
	SH_ASSERT_OK(sh_log_spec_check("", err, sizeof(err)));
	SH_ASSERT_OK(sh_log_spec_check(",,info,", err, sizeof(err)));
}

TEST(log_spec_invalid)
{
	char err[128] = "";

	SH_ASSERT_ERR(sh_log_spec_check("loud", err, sizeof(err)), -EINVAL);
	SH_ASSERT(strstr(err, "bad level") != NULL);
	SH_ASSERT_ERR(sh_log_spec_check("=debug", err, sizeof(err)), -EINVAL);
	SH_ASSERT(strstr(err, "pattern") != NULL);
	SH_ASSERT_ERR(sh_log_spec_check("env=", err, sizeof(err)), -EINVAL);
	SH_ASSERT_ERR(sh_log_configure(NULL, err, sizeof(err)), -EINVAL);
}

TEST(log_levels_per_facility)
{
	sh_log_set_sink(sink, NULL);
	SH_ASSERT_OK(sh_log_configure("error,test.*=debug", NULL, 0));
	ncaptured = 0;
	sh_log_debug("hello %d", 42);
	SH_ASSERT_EQ(ncaptured, 1);
	SH_ASSERT(strstr(captured, "hello 42") != NULL);
	SH_ASSERT(strstr(captured, " D test.log ") != NULL);
	sh_log_trace("not shown");
	SH_ASSERT_EQ(ncaptured, 1);

	SH_ASSERT_OK(sh_log_configure("error", NULL, 0));
	sh_log_warn("hidden now");
	SH_ASSERT_EQ(ncaptured, 1);
	sh_log_error("shown");
	SH_ASSERT_EQ(ncaptured, 2);

	/* a bad spec keeps the old configuration */
	SH_ASSERT_ERR(sh_log_configure("nonsense", NULL, 0), -EINVAL);
	sh_log_warn("still hidden");
	SH_ASSERT_EQ(ncaptured, 2);
	sh_log_set_sink(NULL, NULL);
}

static uint64_t
fixed_clock(void *arg)
{
	(void)arg;
	return 1500000000ULL; /* 1.5 s */
}

TEST(log_virtual_clock_and_tag)
{
	sh_log_set_sink(sink, NULL);
	SH_ASSERT_OK(sh_log_configure("info", NULL, 0));
	sh_log_set_clock(fixed_clock, NULL, true);
	sh_log_set_tag("n7");
	sh_log_info("x");
	SH_ASSERT(strncmp(captured, "t=1.500000 I n7 test.log", 24) == 0);
	sh_log_set_clock(NULL, NULL, false);
	sh_log_set_tag(NULL);
	sh_log_set_sink(NULL, NULL);
}

TEST(log_long_line_truncated)
{
	char big[5000];

	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	sh_log_set_sink(sink, NULL);
	SH_ASSERT_OK(sh_log_configure("info", NULL, 0));
	sh_log_info("%s", big);
	SH_ASSERT(strlen(captured) < 2048);
	SH_ASSERT_EQ(captured[strlen(captured) - 1], '\n');
	sh_log_set_sink(NULL, NULL);
}
