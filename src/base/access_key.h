/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A client's key as people handle it (docs/security.md, "Clients' keys"):
 * one line of text, "sk1.ID.HEX": the key's id in decimal and its 32 bytes
 * in 64 hex digits. A file system access key (`shoal fs key create`, id 2
 * and up) or the cluster's client key (id 1, DIR/client.key on each node,
 * derived from the cluster secret; it opens every file system).
 *
 * A program is given one in a file (a regular file others may not read) or
 * in $SHOAL_KEY, never on its command line, where ps shows it.
 */
#ifndef SH_BASE_ACCESS_KEY_H
#define SH_BASE_ACCESS_KEY_H

#include <stdint.h>

#define SH_KEY_LEN	   32
#define SH_KEY_TEXT_MAX	   (4 + 10 + 1 + 2 * SH_KEY_LEN + 1) /* with the NUL */
#define SH_CLIENT_KEY_FILE "client.key"
#define SH_CLIENT_KEY_ID   1u

/* The text of key id (1 or more). out: SH_KEY_TEXT_MAX. */
void sh_key_format(uint32_t id, const uint8_t key[SH_KEY_LEN], char *out);
/* "sk1.ID.HEX" with only white space around it: 0, or -EINVAL. Fuzzed (fuzz_access_key). */
int sh_key_parse(const char *text, uint32_t *id, uint8_t key[SH_KEY_LEN]);
/* A key file (SH_FILE_GROUP): 0, -EINVAL (not a key), -EPERM (others may read it), -errno. */
int sh_key_load(const char *path, uint32_t *id, uint8_t key[SH_KEY_LEN]);
/* Write key id to path, mode 0600 (sh_secret_write_text), unless it holds it already. */
int sh_key_keep(const char *path, uint32_t id, const uint8_t key[SH_KEY_LEN]);
/*
 * The key a program was given: the file path names (NULL: none), else
 * $SHOAL_KEY (the text), else the file $SHOAL_KEY_FILE names. 1 found, 0
 * none given, or sh_key_parse's and sh_key_load's errors.
 */
int sh_key_find(const char *path, uint32_t *id, uint8_t key[SH_KEY_LEN]);

#endif /* SH_BASE_ACCESS_KEY_H */
