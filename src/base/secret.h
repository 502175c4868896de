/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The cluster secret and what is derived from it (docs/security.md).
 *
 * The secret is 32 random bytes, kept as 64 hex digits and a newline in a
 * file of mode 0600 (DIR/cluster.secret on each node). A file that group
 * or others may read, that another user owns, or a symbolic link is
 * refused, as ssh refuses such a key: the secret is every node's
 * identity, and a copy anyone else on the host can read or replace is no
 * secret.
 *
 * The admin API's bearer token is HMAC-SHA-256(secret, "shoal admin token
 * v1") in hex: every node holding the secret knows it (the nodes call one
 * another's API with it), and the token gives no way back to the secret.
 */
#ifndef SH_BASE_SECRET_H
#define SH_BASE_SECRET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SH_SECRET_LEN 32
#define SH_TOKEN_LEN  64 /* hex digits, without the NUL */

/* The file names in a node's state directory (and a local cluster's). */
#define SH_SECRET_FILE "cluster.secret"
#define SH_TOKEN_FILE  "admin.token"

/*
 * Read a secret file (SH_FILE_PRIVATE). -ENOENT: none; -EPERM: not
 * private (sh_file_rule); -EINVAL: not 64 hex digits (a trailing newline
 * allowed); -errno otherwise.
 */
int sh_secret_load(const char *path, uint8_t out[SH_SECRET_LEN]);

/*
 * Load the secret at path, or make one there when there is none: written
 * to a file of its own, then linked in, so two that make one at once end
 * with the same (the second loads the first's). 1 made, 0 loaded, or
 * sh_secret_load's errors.
 */
int sh_secret_load_or_make(const char *path, uint8_t out[SH_SECRET_LEN]);

/* What a file must be to be read (-EPERM otherwise). */
enum sh_file_rule {
	SH_FILE_PUBLIC,	 /* a regular file (a certificate) */
	SH_FILE_GROUP,	 /* and no access for others; links followed (a TLS key, 0640) */
	SH_FILE_PRIVATE, /* a regular file, not a link, of this user, 0600 or less (a secret) */
};

/*
 * A whole text file of at most max bytes into *out (sh_malloc'd,
 * NUL-terminated): a TLS certificate or key. -EPERM if it breaks the
 * rule, -EFBIG if longer than max.
 */
int sh_secret_read_file(const char *path, enum sh_file_rule rule, size_t max, char **out);

/* 32 bytes from the kernel's random source. 0 or -errno. */
int sh_secret_random(uint8_t out[SH_SECRET_LEN]);

/*
 * Write text (with a newline) to path with mode 0600, atomically (a new
 * temporary file, O_EXCL, renamed over it; both synced). 0 or -errno.
 */
int sh_secret_write_text(const char *path, const char *text);

/* The secret as the file holds it: 64 hex digits. out: SH_TOKEN_LEN + 1. */
void sh_secret_hex(const uint8_t secret[SH_SECRET_LEN], char *out);

/*
 * Which secret a node holds, shown openly (GET /v1/status) so that a node
 * with another cluster's secret is told apart before it is added: 8 bytes
 * of HMAC-SHA-256(secret, "shoal secret fingerprint v1") in hex, which say
 * nothing of the secret. out: SH_FINGERPRINT_LEN + 1.
 */
#define SH_FINGERPRINT_LEN 16
int sh_secret_fingerprint(const uint8_t secret[SH_SECRET_LEN], char *out);

/*
 * The data network's key, HMAC-SHA-256(secret, "shoal net key v1"): what
 * the endpoints derive their sessions' keys from (net_config.auth_key,
 * src/net/auth.h). out: SH_SECRET_LEN bytes. 0, or -EIO.
 */
int sh_secret_net_key(const uint8_t secret[SH_SECRET_LEN], uint8_t out[SH_SECRET_LEN]);

/* The admin API's token from the secret. out: SH_TOKEN_LEN + 1. 0, or -EIO (the HMAC failed). */
int sh_token_derive(const uint8_t secret[SH_SECRET_LEN], char *out);

/*
 * A token file (or $SHOAL_TOKEN's value): 64 hex digits, surrounding
 * white space ignored; a regular file others may not read
 * (SH_FILE_GROUP: the operators' group may). -EINVAL if not that; -EPERM,
 * -ENOENT, -errno.
 */
int sh_token_load(const char *path, char *out);
/* Write token to path (sh_secret_write_text) unless it holds it already. 0 or -errno. */
int sh_token_keep(const char *path, const char *token);
/* Whether text (NUL-terminated, white space around it ignored) is a token. */
bool sh_token_parse(const char *text, char *out);

/*
 * The token a program was given: $SHOAL_TOKEN (the text), else the file
 * $SHOAL_TOKEN_FILE names. 1 found, 0 neither set; -EINVAL ($SHOAL_TOKEN
 * is not a token) or sh_token_load's errors.
 */
int sh_token_env(char *out);

/*
 * Whether an HTTP Authorization header's value is "Bearer TOKEN" with the
 * given token (the scheme's case and white space around the token
 * ignored). authorization may be NULL. Fuzzed (fuzz_bearer).
 */
bool sh_bearer_ok(const char *authorization, const char *token);

/* n bytes as 2n lower-case hex digits and a NUL into out. */
void sh_hex(const uint8_t *b, size_t n, char *out);
/* A hex digit's value (either case), or -1. */
int sh_hex_digit(int c);
/* Exactly 2n hex digits (s NUL-ended) into n bytes: true, or false (out partly written). */
bool sh_unhex(const char *s, uint8_t *out, size_t n);

/* Token comparison in time that does not depend on where they differ. */
bool sh_token_equal(const char *a, const char *b);

#endif /* SH_BASE_SECRET_H */
