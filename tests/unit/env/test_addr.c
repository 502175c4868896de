// SPDX-License-Identifier: Apache-2.0
/* Address parsing and formatting. */
#include <errno.h>
#include <netinet/in.h>

#include "../../../src/env/env.h"
#include "../../lib/test.h"

TEST(addr_parse_format)
{
	struct env_addr a, b;
	char buf[ENV_ADDRSTRLEN];

	SH_ASSERT_OK(env_addr_parse("127.0.0.1:7000", &a));
	SH_ASSERT_EQ(a.family, AF_INET);
	SH_ASSERT_EQ(a.port, 7000);
	SH_ASSERT_STREQ(env_addr_format(&a, buf, sizeof(buf)), "127.0.0.1:7000");
	SH_ASSERT_OK(env_addr_parse("[::1]:65535", &b));
	SH_ASSERT_EQ(b.family, AF_INET6);
	SH_ASSERT_STREQ(env_addr_format(&b, buf, sizeof(buf)), "[::1]:65535");
	SH_ASSERT(!env_addr_eq(&a, &b));
	SH_ASSERT_OK(env_addr_parse("127.0.0.1", &b));
	SH_ASSERT_EQ(b.port, 0);
	b.port = 7000;
	SH_ASSERT(env_addr_eq(&a, &b));
	SH_ASSERT_EQ(env_addr_hash(&a), env_addr_hash(&b));
	SH_ASSERT_OK(env_addr_parse("fe80::1", &b));
	SH_ASSERT_EQ(b.family, AF_INET6);
}

TEST(addr_parse_rejects)
{
	static const char *const bad[] = {
		"",
		":80",
		"127.0.0.1:",
		"127.0.0.1:65536",
		"127.0.0.1:-1",
		"127.0.0.1:+5",
		"127.0.0.1:8x",
		"256.0.0.1:80",
		"[::1",
		"[::1]x",
		"host.example:80",
		"[]:1",
		"1.2.3.4:99999999999999999999",
	};
	struct env_addr a;

	for (size_t i = 0; i < SH_ARRAY_SIZE(bad); i++)
		SH_ASSERT_MSG(env_addr_parse(bad[i], &a) == -EINVAL, "accepted '%s'", bad[i]);
	SH_ASSERT_ERR(env_addr_parse(NULL, &a), -EINVAL);
}
