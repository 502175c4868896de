// SPDX-License-Identifier: Apache-2.0
/* The cluster secret's file, the admin token derived from it, tokens given to programs. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../../src/base/access_key.h"
#include "../../../src/base/secret.h"
#include "../../lib/test.h"

/* The secret 00 01 .. 1f's token, from Python's hmac (tests/cluster/test_cluster.py
 * derives tokens the same way, and checks them against the nodes'). */
#define TOKEN_0_31 "78f38a4276e0592d2fadb341cab06972cc429dc62f090d8f4db5d5aed1079aea"

static void
tmp_path(char *out, size_t len, const char *name)
{
	const char *t = getenv("TMPDIR");

	snprintf(out, len, "%s/sh-secret-%d-%s", t && *t ? t : "/tmp", (int)getpid(), name);
}

static void
put_file(const char *path, const char *text, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);

	SH_ASSERT(fd >= 0);
	SH_ASSERT_EQ(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	SH_ASSERT_OK(fchmod(fd, mode));
	close(fd);
}

TEST(secret_written_private_read_back_and_its_token_derived)
{
	uint8_t s[SH_SECRET_LEN], back[SH_SECRET_LEN];
	char path[256], hex[SH_TOKEN_LEN + 1], token[SH_TOKEN_LEN + 1];
	struct stat st;

	for (unsigned i = 0; i < SH_SECRET_LEN; i++)
		s[i] = (uint8_t)i;
	SH_ASSERT_OK(sh_token_derive(s, token));
	SH_ASSERT_STREQ(token, TOKEN_0_31);
	tmp_path(path, sizeof(path), "secret");
	sh_secret_hex(s, hex);
	SH_ASSERT_STREQ(hex, "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f");
	SH_ASSERT_OK(sh_secret_write_text(path, hex));
	SH_ASSERT_OK(stat(path, &st));
	SH_ASSERT_EQ(st.st_mode & 0777, 0600u);
	SH_ASSERT_OK(sh_secret_load(path, back));
	SH_ASSERT(memcmp(s, back, sizeof(s)) == 0);
	/* written again over a wider file: 0600 again */
	SH_ASSERT_OK(chmod(path, 0644));
	SH_ASSERT_OK(sh_secret_write_text(path, hex));
	SH_ASSERT_OK(stat(path, &st));
	SH_ASSERT_EQ(st.st_mode & 0777, 0600u);
	/* two random secrets differ, and so do their tokens */
	{
		uint8_t a[SH_SECRET_LEN], b[SH_SECRET_LEN];
		char ta[SH_TOKEN_LEN + 1], tb[SH_TOKEN_LEN + 1];

		SH_ASSERT_OK(sh_secret_random(a));
		SH_ASSERT_OK(sh_secret_random(b));
		SH_ASSERT(memcmp(a, b, sizeof(a)) != 0);
		SH_ASSERT_OK(sh_token_derive(a, ta));
		SH_ASSERT_OK(sh_token_derive(b, tb));
		SH_ASSERT(!sh_token_equal(ta, tb));
	}
	unlink(path);
}

TEST(secret_made_once_then_loaded)
{
	uint8_t a[SH_SECRET_LEN], b[SH_SECRET_LEN];
	char path[256], fa[SH_FINGERPRINT_LEN + 1], fb[SH_FINGERPRINT_LEN + 1];
	struct stat st;

	tmp_path(path, sizeof(path), "made");
	unlink(path);
	SH_ASSERT_EQ(sh_secret_load_or_make(path, a), 1);
	SH_ASSERT_OK(stat(path, &st));
	SH_ASSERT_EQ(st.st_mode & 0777, 0600u);
	SH_ASSERT_EQ(sh_secret_load_or_make(path, b), 0);
	SH_ASSERT(memcmp(a, b, sizeof(a)) == 0);
	SH_ASSERT_OK(sh_secret_fingerprint(a, fa));
	SH_ASSERT_EQ(strlen(fa), (size_t)SH_FINGERPRINT_LEN);
	SH_ASSERT_OK(sh_secret_random(b));
	SH_ASSERT_OK(sh_secret_fingerprint(b, fb));
	SH_ASSERT(strcmp(fa, fb) != 0);
	/* one that others may read is not replaced by a new one: refused */
	SH_ASSERT_OK(chmod(path, 0644));
	SH_ASSERT_EQ(sh_secret_load_or_make(path, b), -EPERM);
	unlink(path);
}

TEST(secret_files_others_may_read_or_not_secrets_are_refused)
{
	uint8_t s[SH_SECRET_LEN];
	char path[256], link[256];
	char good[] = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f\n";

	tmp_path(path, sizeof(path), "bad");
	tmp_path(link, sizeof(link), "link");
	SH_ASSERT_EQ(sh_secret_load(path, s), -ENOENT);
	put_file(path, good, 0644);
	SH_ASSERT_EQ(sh_secret_load(path, s), -EPERM);
	put_file(path, good, 0640);
	SH_ASSERT_EQ(sh_secret_load(path, s), -EPERM);
	put_file(path, good, 0400);
	SH_ASSERT_OK(sh_secret_load(path, s));
	SH_ASSERT_EQ(s[31], 0x1f);
	/* a link to it is not followed */
	unlink(link);
	SH_ASSERT_OK(symlink(path, link));
	SH_ASSERT_EQ(sh_secret_load(link, s), -EPERM);
	unlink(link);
	/* not 64 hex digits */
	put_file(path, "0001", 0600);
	SH_ASSERT_EQ(sh_secret_load(path, s), -EINVAL);
	put_file(path, "g00102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f", 0600);
	SH_ASSERT_EQ(sh_secret_load(path, s), -EINVAL);
	put_file(path, "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f00", 0600);
	SH_ASSERT_EQ(sh_secret_load(path, s), -EINVAL);
	put_file(path, "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f x", 0600);
	SH_ASSERT_EQ(sh_secret_load(path, s), -EINVAL);
	put_file(path, "", 0600);
	SH_ASSERT_EQ(sh_secret_load(path, s), -EINVAL);
	unlink(path);
}

TEST(tokens_parsed_compared_and_taken_from_the_environment)
{
	char t[SH_TOKEN_LEN + 1], path[256];

	SH_ASSERT(sh_token_parse("  " TOKEN_0_31 "\n", t));
	SH_ASSERT_STREQ(t, TOKEN_0_31);
	SH_ASSERT(
	    sh_token_parse("78F38A4276E0592D2FADB341CAB06972CC429DC62F090D8F4DB5D5AED1079AEA", t));
	SH_ASSERT_STREQ(t, TOKEN_0_31);
	SH_ASSERT(!sh_token_parse("", t));
	SH_ASSERT(!sh_token_parse(TOKEN_0_31 "0", t));
	SH_ASSERT(!sh_token_parse(TOKEN_0_31 " x", t));
	SH_ASSERT(sh_token_equal(TOKEN_0_31, TOKEN_0_31));
	SH_ASSERT(!sh_token_equal(
	    TOKEN_0_31, "78f38a4276e0592d2fadb341cab06972cc429dc62f090d8f4db5d5aed1079aeb"));
	SH_ASSERT(!sh_token_equal(TOKEN_0_31, "78f3"));
	SH_ASSERT(!sh_token_equal("", ""));

	unsetenv("SHOAL_TOKEN");
	unsetenv("SHOAL_TOKEN_FILE");
	SH_ASSERT_EQ(sh_token_env(t), 0);
	tmp_path(path, sizeof(path), "token");
	put_file(path, TOKEN_0_31 "\n", 0600);
	setenv("SHOAL_TOKEN_FILE", path, 1);
	SH_ASSERT_EQ(sh_token_env(t), 1);
	SH_ASSERT_STREQ(t, TOKEN_0_31);
	SH_ASSERT_OK(chmod(path, 0640)); /* the operators' group may read a token */
	SH_ASSERT_EQ(sh_token_env(t), 1);
	SH_ASSERT_OK(chmod(path, 0644));
	SH_ASSERT_EQ(sh_token_env(t), -EPERM);
	/* the text wins over the file */
	setenv("SHOAL_TOKEN", "1111111111111111111111111111111111111111111111111111111111111111",
	       1);
	SH_ASSERT_EQ(sh_token_env(t), 1);
	SH_ASSERT_STREQ(t, "1111111111111111111111111111111111111111111111111111111111111111");
	setenv("SHOAL_TOKEN", "short", 1);
	SH_ASSERT_EQ(sh_token_env(t), -EINVAL);
	unsetenv("SHOAL_TOKEN");
	unsetenv("SHOAL_TOKEN_FILE");
	unlink(path);
}

TEST(client_keys_as_text_files_and_the_environment)
{
	uint8_t key[SH_KEY_LEN], back[SH_KEY_LEN];
	char text[SH_KEY_TEXT_MAX], path[256], path2[256];
	uint32_t id;

	for (unsigned i = 0; i < SH_KEY_LEN; i++)
		key[i] = (uint8_t)(i * 37 + 1);
	sh_key_format(4000000000u, key, text);
	SH_ASSERT_EQ(strncmp(text, "sk1.4000000000.", 15), 0);
	SH_ASSERT_EQ(strlen(text), 15 + 2 * SH_KEY_LEN);
	SH_ASSERT_OK(sh_key_parse(text, &id, back));
	SH_ASSERT_EQ(id, 4000000000u);
	SH_ASSERT_MEMEQ(back, key, SH_KEY_LEN);
	/* white space around it is fine; anything else is not a key */
	{
		char t2[SH_KEY_TEXT_MAX + 8];

		snprintf(t2, sizeof(t2), "  %s\n", text);
		SH_ASSERT_OK(sh_key_parse(t2, &id, back));
		snprintf(t2, sizeof(t2), "%s0", text);
		SH_ASSERT_EQ(sh_key_parse(t2, &id, back), -EINVAL); /* 65 digits */
		snprintf(t2, sizeof(t2), "%s x", text);
		SH_ASSERT_EQ(sh_key_parse(t2, &id, back), -EINVAL);
	}
	SH_ASSERT_EQ(sh_key_parse("", &id, back), -EINVAL);
	SH_ASSERT_EQ(sh_key_parse("sk1.0." TOKEN_0_31, &id, back), -EINVAL);	      /* id 0 */
	SH_ASSERT_EQ(sh_key_parse("sk1.4294967296." TOKEN_0_31, &id, back), -EINVAL); /* > u32 */
	SH_ASSERT_EQ(sh_key_parse("sk1..", &id, back), -EINVAL);
	SH_ASSERT_EQ(sh_key_parse("sk2.5." TOKEN_0_31, &id, back), -EINVAL);
	SH_ASSERT_EQ(sh_key_parse("sk1.5." TOKEN_0_31, &id, back), 0);
	SH_ASSERT_EQ(id, 5u);

	/* a file: written 0600, kept as it is when it holds the key already */
	tmp_path(path, sizeof(path), "client.key");
	unlink(path);
	SH_ASSERT_OK(sh_key_keep(path, 7, key));
	SH_ASSERT_OK(sh_key_load(path, &id, back));
	SH_ASSERT_EQ(id, 7u);
	SH_ASSERT_MEMEQ(back, key, SH_KEY_LEN);
	SH_ASSERT_OK(chmod(path, 0644)); /* others may read it: refused */
	SH_ASSERT_EQ(sh_key_load(path, &id, back), -EPERM);
	SH_ASSERT_OK(chmod(path, 0600));

	/* what a program finds: the file it is given, else $SHOAL_KEY, else $SHOAL_KEY_FILE */
	unsetenv("SHOAL_KEY");
	unsetenv("SHOAL_KEY_FILE");
	SH_ASSERT_EQ(sh_key_find(NULL, &id, back), 0);
	setenv("SHOAL_KEY_FILE", path, 1);
	SH_ASSERT_EQ(sh_key_find(NULL, &id, back), 1);
	SH_ASSERT_EQ(id, 7u);
	setenv("SHOAL_KEY", text, 1);
	SH_ASSERT_EQ(sh_key_find(NULL, &id, back), 1);
	SH_ASSERT_EQ(id, 4000000000u);
	tmp_path(path2, sizeof(path2), "other.key");
	unlink(path2);
	SH_ASSERT_OK(sh_key_keep(path2, 9, key));
	SH_ASSERT_EQ(sh_key_find(path2, &id, back), 1);
	SH_ASSERT_EQ(id, 9u);
	setenv("SHOAL_KEY", "not a key", 1);
	SH_ASSERT_EQ(sh_key_find(NULL, &id, back), -EINVAL);
	SH_ASSERT_EQ(sh_key_find("/nonexistent/key", &id, back), -ENOENT);
	unsetenv("SHOAL_KEY");
	unsetenv("SHOAL_KEY_FILE");
	unlink(path);
	unlink(path2);
}

TEST(hex_round_trips_and_refuses_what_is_not_exactly_it)
{
	const uint8_t b[5] = { 0x00, 0x7f, 0x80, 0xab, 0xff };
	uint8_t back[5] = { 0 };
	char hex[11];

	sh_hex(b, sizeof(b), hex);
	SH_ASSERT_STREQ(hex, "007f80abff");
	SH_ASSERT(sh_unhex(hex, back, sizeof(back)));
	SH_ASSERT_MEMEQ(back, b, sizeof(b));
	SH_ASSERT(sh_unhex("007F80ABFF", back, sizeof(back))); /* either case */
	SH_ASSERT_MEMEQ(back, b, sizeof(b));
	SH_ASSERT(!sh_unhex("007f80abf", back, sizeof(back)));	 /* short */
	SH_ASSERT(!sh_unhex("007f80abff0", back, sizeof(back))); /* long */
	SH_ASSERT(!sh_unhex("007f80abfg", back, sizeof(back)));	 /* not a digit */
	SH_ASSERT(!sh_unhex(NULL, back, sizeof(back)));
}
