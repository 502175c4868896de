// SPDX-License-Identifier: Apache-2.0
/* The cluster secret and the admin token (secret.h). */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "secret.h"

static const char token_label[] = "shoal admin token v1";

/* Whether an open file may be read under rule (fstat'd as st). */
static bool
rule_ok(const struct stat *st, enum sh_file_rule rule)
{
	if (!S_ISREG(st->st_mode))
		return false;
	switch (rule) {
	case SH_FILE_PUBLIC:
		return true;
	case SH_FILE_GROUP:
		return (st->st_mode & S_IRWXO) == 0;
	case SH_FILE_PRIVATE:
		return (st->st_mode & (S_IRWXG | S_IRWXO)) == 0 && st->st_uid == geteuid();
	}
	return false;
}

/*
 * The text of a small file into buf (NUL-terminated), if it obeys rule.
 * -EFBIG if it does not fit.
 */
static int
read_text(const char *path, enum sh_file_rule rule, char *buf, size_t cap)
{
	struct stat st;
	size_t len = 0;
	int fd, rc = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC | (rule == SH_FILE_PRIVATE ? O_NOFOLLOW : 0));
	if (fd < 0)
		return errno == ELOOP ? -EPERM : -errno;
	if (fstat(fd, &st) < 0) {
		rc = -errno;
		goto out;
	}
	if (!rule_ok(&st, rule)) {
		rc = -EPERM;
		goto out;
	}
	for (;;) {
		ssize_t n = read(fd, buf + len, cap - 1 - len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = -errno;
			goto out;
		}
		if (n == 0)
			break;
		len += (size_t)n;
		if (len == cap - 1) {
			char c;

			if (read(fd, &c, 1) == 1)
				rc = -EFBIG;
			break;
		}
	}
	buf[len] = '\0';
out:
	close(fd);
	return rc;
}

/* read_text of a secret or a token: one too long for buf is not one */
static int
read_small(const char *path, enum sh_file_rule rule, char *buf, size_t cap)
{
	int rc = read_text(path, rule, buf, cap);

	return rc == -EFBIG ? -EINVAL : rc;
}

int
sh_secret_read_file(const char *path, enum sh_file_rule rule, size_t max, char **out)
{
	char *buf = sh_malloc(max + 1);
	int rc;

	*out = NULL;
	if (buf == NULL)
		return -ENOMEM;
	rc = read_text(path, rule, buf, max + 1);
	if (rc < 0) {
		explicit_bzero(buf, max + 1);
		sh_free(buf);
		return rc;
	}
	*out = buf;
	return 0;
}

int
sh_hex_digit(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

bool
sh_unhex(const char *s, uint8_t *out, size_t n)
{
	if (s == NULL || strlen(s) != 2 * n)
		return false;
	for (size_t i = 0; i < n; i++) {
		int hi = sh_hex_digit((unsigned char)s[2 * i]),
		    lo = hi < 0 ? -1 : sh_hex_digit((unsigned char)s[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return false;
		out[i] = (uint8_t)(hi << 4 | lo);
	}
	return true;
}

void
sh_hex(const uint8_t *b, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[b[i] >> 4];
		out[2 * i + 1] = digits[b[i] & 15];
	}
	out[2 * n] = '\0';
}

/* text: 64 hex digits with only white space around them; copied to out, lower case. */
bool
sh_token_parse(const char *text, char *out)
{
	const char *p = text;
	size_t n = 0;

	while (isspace((unsigned char)*p))
		p++;
	while (sh_hex_digit((unsigned char)p[n]) >= 0 && n <= SH_TOKEN_LEN)
		n++;
	if (n != SH_TOKEN_LEN)
		return false;
	for (const char *q = p + n; *q; q++)
		if (!isspace((unsigned char)*q))
			return false;
	for (size_t i = 0; i < n; i++)
		out[i] = (char)tolower((unsigned char)p[i]);
	out[n] = '\0';
	return true;
}

int
sh_secret_load(const char *path, uint8_t out[SH_SECRET_LEN])
{
	char text[256], hex[SH_TOKEN_LEN + 1];
	int rc = read_small(path, SH_FILE_PRIVATE, text, sizeof(text));

	if (rc == 0 && !sh_token_parse(text, hex))
		rc = -EINVAL;
	if (rc == 0)
		for (size_t i = 0; i < SH_SECRET_LEN; i++)
			out[i] =
			    (uint8_t)(sh_hex_digit(hex[2 * i]) << 4 | sh_hex_digit(hex[2 * i + 1]));
	explicit_bzero(text, sizeof(text));
	explicit_bzero(hex, sizeof(hex));
	return rc;
}

int
sh_token_load(const char *path, char *out)
{
	char text[256];
	int rc = read_small(path, SH_FILE_GROUP, text, sizeof(text));

	if (rc == 0 && !sh_token_parse(text, out))
		rc = -EINVAL;
	explicit_bzero(text, sizeof(text));
	return rc;
}

int
sh_token_env(char *out)
{
	const char *env = getenv("SHOAL_TOKEN"), *file = getenv("SHOAL_TOKEN_FILE");
	int rc;

	if (env != NULL && *env != '\0')
		return sh_token_parse(env, out) ? 1 : -EINVAL;
	if (file != NULL && *file != '\0') {
		rc = sh_token_load(file, out);
		return rc < 0 ? rc : 1;
	}
	return 0;
}

int
sh_secret_random(uint8_t out[SH_SECRET_LEN])
{
	size_t got = 0;

	while (got < SH_SECRET_LEN) {
		ssize_t n = getrandom(out + got, SH_SECRET_LEN - got, 0);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		got += (size_t)n;
	}
	return 0;
}

/* The rename into path made durable: its directory synced (best effort). */
static void
sync_parent(const char *path)
{
	char dir[PATH_MAX];
	const char *slash = strrchr(path, '/');
	int fd;

	if (slash == NULL)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == path)
		snprintf(dir, sizeof(dir), "/");
	else
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		fsync(fd);
		close(fd);
	}
}

int
sh_secret_write_text(const char *path, const char *text)
{
	char tmp[PATH_MAX];
	size_t len = strlen(text), off = 0;
	int fd, rc = 0, n;

	n = snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid());
	if (n < 0 || (size_t)n >= sizeof(tmp))
		return -ENAMETOOLONG;
	/* a file of our own: one left by an earlier try (or put there) is removed, not reused */
	unlink(tmp);
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	while (rc == 0 && off <= len) {
		const char *p = off < len ? text + off : "\n";
		size_t want = off < len ? len - off : 1;
		ssize_t w = write(fd, p, want);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			rc = -errno;
			break;
		}
		off += (size_t)w;
	}
	if (rc == 0 && fsync(fd) < 0)
		rc = -errno;
	close(fd);
	if (rc == 0 && rename(tmp, path) < 0)
		rc = -errno;
	if (rc < 0) {
		unlink(tmp);
		return rc;
	}
	sync_parent(path);
	return 0;
}

void
sh_secret_hex(const uint8_t secret[SH_SECRET_LEN], char *out)
{
	sh_hex(secret, SH_SECRET_LEN, out);
}

/* HMAC-SHA-256(secret, label) into out (32 bytes). 0 or -EIO. */
static int
derive(const uint8_t secret[SH_SECRET_LEN], const char *label, uint8_t *out)
{
	unsigned len = 0;

	if (HMAC(EVP_sha256(), secret, SH_SECRET_LEN, (const uint8_t *)label, strlen(label), out,
		 &len) == NULL ||
	    len != SH_SECRET_LEN)
		return -EIO;
	return 0;
}

/* HMAC-SHA-256(secret, label), its first n bytes in hex. 0 or -EIO. */
static int
derive_hex(const uint8_t secret[SH_SECRET_LEN], const char *label, size_t n, char *out)
{
	uint8_t mac[EVP_MAX_MD_SIZE];

	out[0] = '\0';
	if (derive(secret, label, mac) < 0)
		return -EIO;
	sh_hex(mac, n, out);
	OPENSSL_cleanse(mac, sizeof(mac));
	return 0;
}

int
sh_secret_net_key(const uint8_t secret[SH_SECRET_LEN], uint8_t out[SH_SECRET_LEN])
{
	return derive(secret, "shoal net key v1", out);
}

int
sh_token_derive(const uint8_t secret[SH_SECRET_LEN], char *out)
{
	return derive_hex(secret, token_label, SH_TOKEN_LEN / 2, out);
}

int
sh_secret_fingerprint(const uint8_t secret[SH_SECRET_LEN], char *out)
{
	return derive_hex(secret, "shoal secret fingerprint v1", SH_FINGERPRINT_LEN / 2, out);
}

int
sh_secret_load_or_make(const char *path, uint8_t out[SH_SECRET_LEN])
{
	char tmp[PATH_MAX], hex[SH_TOKEN_LEN + 1];
	int rc = sh_secret_load(path, out), n;

	if (rc != -ENOENT)
		return rc;
	n = snprintf(tmp, sizeof(tmp), "%s.new.%d", path, (int)getpid());
	if (n < 0 || (size_t)n >= sizeof(tmp))
		return -ENAMETOOLONG;
	rc = sh_secret_random(out);
	if (rc < 0)
		return rc;
	sh_secret_hex(out, hex);
	rc = sh_secret_write_text(tmp, hex);
	explicit_bzero(hex, sizeof(hex));
	if (rc < 0)
		return rc;
	/* linked in, never renamed over: whoever links first made the secret */
	rc = link(tmp, path) < 0 ? -errno : 0;
	unlink(tmp);
	if (rc == -EEXIST)
		return sh_secret_load(path, out);
	if (rc < 0)
		return rc;
	sync_parent(path);
	return 1;
}

int
sh_token_keep(const char *path, const char *token)
{
	char cur[SH_TOKEN_LEN + 1];

	if (sh_token_load(path, cur) == 0 && sh_token_equal(cur, token))
		return 0;
	return sh_secret_write_text(path, token);
}

bool
sh_bearer_ok(const char *authorization, const char *token)
{
	static const char scheme[] = "Bearer ";
	char given[SH_TOKEN_LEN + 1];

	if (authorization == NULL || strncasecmp(authorization, scheme, sizeof(scheme) - 1) != 0)
		return false;
	if (!sh_token_parse(authorization + sizeof(scheme) - 1, given))
		return false;
	return sh_token_equal(given, token);
}

bool
sh_token_equal(const char *a, const char *b)
{
	unsigned diff = 0;

	if (strlen(a) != SH_TOKEN_LEN || strlen(b) != SH_TOKEN_LEN)
		return false;
	for (size_t i = 0; i < SH_TOKEN_LEN; i++)
		diff |= (unsigned)(uint8_t)a[i] ^ (uint8_t)b[i];
	return diff == 0;
}
