// SPDX-License-Identifier: Apache-2.0
/* Encrypted stripes and wrapped keys: round trips unit by unit, keyed fingerprints, key files. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../../src/base/rand.h"
#include "../../../src/data/seal.h"
#include "../../lib/test.h"

#define STRIPE (512 * 1024)

static void
keys_of(struct seal_keys *k, uint8_t fill)
{
	uint8_t master[SEAL_KEY_LEN];

	memset(master, fill, sizeof(master));
	SH_ASSERT_OK(seal_keys_init(k, master));
}

TEST(seal_stripes_round_trip_unit_by_unit_and_leave_no_plaintext)
{
	static uint8_t plain[STRIPE], data[STRIPE], again[STRIPE], part[3 * SEAL_UNIT];
	struct seal_keys k, other;
	struct sh_rand r;

	sh_rand_seed(&r, 11);
	sh_rand_text(&r, plain, sizeof(plain));
	keys_of(&k, 0x42);
	keys_of(&other, 0x43);
	SH_ASSERT_OK(seal_units(&k, 77, 0, plain, data, sizeof(data), true));
	/* ciphertext: no 64-byte run of the text is left, and not even the same length twice */
	for (size_t i = 0; i + 64 <= sizeof(plain); i += 4096)
		SH_ASSERT(memmem(data, sizeof(data), plain + i, 64) == NULL);
	/* the same bytes in another stripe, or another unit of the same, encrypt otherwise */
	SH_ASSERT_OK(seal_units(&k, 78, 0, plain, again, sizeof(again), true));
	SH_ASSERT(memcmp(again, data, SEAL_UNIT) != 0);
	memcpy(again, plain, SEAL_UNIT);
	memcpy(again + SEAL_UNIT, plain, SEAL_UNIT); /* two equal units */
	SH_ASSERT_OK(seal_units(&k, 77, 0, again, again, 2 * SEAL_UNIT, true));
	SH_ASSERT(memcmp(again, again + SEAL_UNIT, SEAL_UNIT) != 0);
	/* any run of whole units decrypts on its own, where it lies in the stripe */
	memcpy(part, data + 5 * SEAL_UNIT, sizeof(part));
	SH_ASSERT_OK(seal_units(&k, 77, 5, part, part, sizeof(part), false));
	SH_ASSERT_MEMEQ(part, plain + 5 * SEAL_UNIT, sizeof(part));
	/* in place, the whole stripe */
	memcpy(again, data, sizeof(data));
	SH_ASSERT_OK(seal_units(&k, 77, 0, again, again, sizeof(again), false));
	SH_ASSERT_MEMEQ(again, plain, sizeof(plain));
	/* another key, another stripe id, another unit: not the bytes */
	SH_ASSERT_OK(seal_units(&other, 77, 0, data, again, sizeof(again), false));
	SH_ASSERT(memcmp(again, plain, SEAL_UNIT) != 0);
	SH_ASSERT_OK(seal_units(&k, 76, 0, data, again, sizeof(again), false));
	SH_ASSERT(memcmp(again, plain, SEAL_UNIT) != 0);
	memcpy(part, data + 5 * SEAL_UNIT, sizeof(part));
	SH_ASSERT_OK(seal_units(&k, 77, 6, part, part, sizeof(part), false));
	SH_ASSERT(memcmp(part, plain + 5 * SEAL_UNIT, SEAL_UNIT) != 0);
	/* only whole units */
	SH_ASSERT_ERR(seal_units(&k, 77, 0, plain, again, SEAL_UNIT + 16, true), -EINVAL);
	seal_keys_wipe(&k);
}

TEST(seal_fingerprints_are_keyed_per_file_system)
{
	static const char text[] = "the same block in two file systems";
	uint8_t a[32], b[32], c[32];
	struct seal_keys k1, k1b, k2;

	keys_of(&k1, 0x11);
	keys_of(&k1b, 0x11);
	keys_of(&k2, 0x22);
	SH_ASSERT_OK(seal_fingerprint(&k1, text, sizeof(text), a));
	SH_ASSERT_OK(seal_fingerprint(&k1b, text, sizeof(text), b));
	SH_ASSERT_OK(seal_fingerprint(&k2, text, sizeof(text), c));
	SH_ASSERT_MEMEQ(a, b, 32); /* dedup within a file system works */
	SH_ASSERT(memcmp(a, c, 32) != 0);
	/* the keys differ from each other: the data key's halves, the dedup key */
	SH_ASSERT(memcmp(k1.data, k1.data + SEAL_KEY_LEN, SEAL_KEY_LEN) != 0);
	SH_ASSERT(memcmp(k1.data, k1.dedup, SEAL_KEY_LEN) != 0);
}

TEST(seal_master_keys_unwrap_only_with_their_kek)
{
	uint8_t kek[SEAL_KEY_LEN], wrong[SEAL_KEY_LEN], master[SEAL_KEY_LEN], back[SEAL_KEY_LEN];
	uint8_t wrapped[SEAL_WRAPPED_LEN];

	memset(kek, 0xA5, sizeof(kek));
	memset(wrong, 0xA6, sizeof(wrong));
	for (unsigned i = 0; i < SEAL_KEY_LEN; i++)
		master[i] = (uint8_t)(i * 7 + 1);
	SH_ASSERT_OK(seal_wrap(kek, master, wrapped));
	SH_ASSERT(memmem(wrapped, sizeof(wrapped), master, 8) == NULL);
	SH_ASSERT_OK(seal_unwrap(kek, wrapped, back));
	SH_ASSERT_MEMEQ(back, master, SEAL_KEY_LEN);
	SH_ASSERT_ERR(seal_unwrap(wrong, wrapped, back), -EACCES);
	wrapped[SEAL_WRAPPED_LEN - 1] ^= 1;
	SH_ASSERT_ERR(seal_unwrap(kek, wrapped, back), -EACCES);
}

TEST(seal_keks_as_text_files_and_the_environment)
{
	uint8_t kek[SEAL_KEY_LEN], back[SEAL_KEY_LEN];
	char text[SEAL_KEK_TEXT], path[] = "/tmp/seal_kek_XXXXXX";
	int fd = mkstemp(path);

	SH_ASSERT_GE(fd, 0);
	for (unsigned i = 0; i < SEAL_KEY_LEN; i++)
		kek[i] = (uint8_t)(0xF0 ^ i);
	seal_kek_format(kek, text);
	SH_ASSERT_EQ(strlen(text), (size_t)SEAL_KEK_TEXT - 1);
	SH_ASSERT_OK(seal_kek_parse(text, strlen(text), back));
	SH_ASSERT_MEMEQ(back, kek, SEAL_KEY_LEN);
	SH_ASSERT_ERR(seal_kek_parse(text, strlen(text) - 1, back), -EINVAL);
	SH_ASSERT_ERR(seal_kek_parse("sk1.5.00", 8, back), -EINVAL);
	SH_ASSERT_EQ(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	SH_ASSERT_EQ(write(fd, "\n", 1), 1);
	close(fd);
	unsetenv("SHOAL_FS_KEY");
	unsetenv("SHOAL_FS_KEY_FILE");
	SH_ASSERT_ERR(seal_kek_find(NULL, back), -ENOKEY);
	SH_ASSERT_OK(chmod(path, 0600));
	memset(back, 0, sizeof(back));
	SH_ASSERT_OK(seal_kek_find(path, back));
	SH_ASSERT_MEMEQ(back, kek, SEAL_KEY_LEN);
	setenv("SHOAL_FS_KEY_FILE", path, 1);
	memset(back, 0, sizeof(back));
	SH_ASSERT_OK(seal_kek_find(NULL, back));
	SH_ASSERT_MEMEQ(back, kek, SEAL_KEY_LEN);
	/* a file others may read is refused */
	SH_ASSERT_OK(chmod(path, 0644));
	SH_ASSERT_ERR(seal_kek_find(path, back), -EPERM);
	setenv("SHOAL_FS_KEY", text, 1); /* the text wins over the file */
	SH_ASSERT_OK(seal_kek_find(NULL, back));
	unsetenv("SHOAL_FS_KEY");
	unsetenv("SHOAL_FS_KEY_FILE");
	unlink(path);
}
