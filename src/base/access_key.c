// SPDX-License-Identifier: Apache-2.0
/* Clients' keys as text and files (access_key.h). */
#include "access_key.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "secret.h"

#define PREFIX "sk1."

void
sh_key_format(uint32_t id, const uint8_t key[SH_KEY_LEN], char *out)
{
	int n = snprintf(out, SH_KEY_TEXT_MAX, PREFIX "%u.", id);

	sh_hex(key, SH_KEY_LEN, out + n);
}

int
sh_key_parse(const char *text, uint32_t *id, uint8_t key[SH_KEY_LEN])
{
	const char *p = text;
	uint64_t v = 0;
	unsigned digits = 0;

	while (isspace((unsigned char)*p))
		p++;
	if (strncmp(p, PREFIX, sizeof(PREFIX) - 1) != 0)
		return -EINVAL;
	p += sizeof(PREFIX) - 1;
	for (; isdigit((unsigned char)*p) && digits < 10; p++, digits++)
		v = v * 10 + (uint64_t)(*p - '0');
	if (digits == 0 || v == 0 || v > UINT32_MAX || *p++ != '.')
		return -EINVAL;
	for (unsigned i = 0; i < SH_KEY_LEN; i++) {
		int hi = sh_hex_digit((unsigned char)p[2 * i]),
		    lo = hi < 0 ? -1 : sh_hex_digit((unsigned char)p[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return -EINVAL;
		key[i] = (uint8_t)(hi << 4 | lo);
	}
	for (p += 2 * SH_KEY_LEN; *p; p++)
		if (!isspace((unsigned char)*p))
			return -EINVAL;
	*id = (uint32_t)v;
	return 0;
}

int
sh_key_load(const char *path, uint32_t *id, uint8_t key[SH_KEY_LEN])
{
	char *text = NULL;
	int rc = sh_secret_read_file(path, SH_FILE_GROUP, 4096, &text);

	if (rc == -EFBIG)
		rc = -EINVAL;
	if (rc == 0) {
		rc = sh_key_parse(text, id, key);
		explicit_bzero(text, strlen(text));
	}
	sh_free(text);
	return rc;
}

int
sh_key_keep(const char *path, uint32_t id, const uint8_t key[SH_KEY_LEN])
{
	char text[SH_KEY_TEXT_MAX];
	uint8_t cur[SH_KEY_LEN];
	uint32_t cur_id;
	int rc = 0;

	if (sh_key_load(path, &cur_id, cur) != 0 || cur_id != id ||
	    memcmp(cur, key, SH_KEY_LEN) != 0) {
		sh_key_format(id, key, text);
		rc = sh_secret_write_text(path, text);
		explicit_bzero(text, sizeof(text));
	}
	explicit_bzero(cur, sizeof(cur));
	return rc;
}

int
sh_key_find(const char *path, uint32_t *id, uint8_t key[SH_KEY_LEN])
{
	const char *env = getenv("SHOAL_KEY"), *file = getenv("SHOAL_KEY_FILE");
	int rc;

	if (path != NULL && *path != '\0')
		rc = sh_key_load(path, id, key);
	else if (env != NULL && *env != '\0')
		rc = sh_key_parse(env, id, key);
	else if (file != NULL && *file != '\0')
		rc = sh_key_load(file, id, key);
	else
		return 0;
	return rc < 0 ? rc : 1;
}
