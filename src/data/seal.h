/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Encryption at rest (docs/security.md, "Encrypted file systems"): the
 * stripes of an encrypted file system are encrypted in the client, after
 * compression and packing, so that drives, nodes and the wire only ever
 * carry ciphertext and the nodes never hold a key.
 *
 * Keys:
 *   - the key-encryption key (KEK, 32 bytes) comes from a key provider in
 *     the client (a key file to start: "sek1.HEX");
 *   - the file system's master key (32 random bytes, made by whoever
 *     creates the file system) is kept in the cluster's configuration
 *     only wrapped by the KEK (AES-256-GCM, SEAL_WRAPPED_LEN bytes): a
 *     client with another KEK fails to unwrap it (-EACCES), never reads
 *     garbage;
 *   - from the master key (HMAC-SHA-256 of labels): a data key (the two
 *     halves of an AES-256-XTS key) and a dedup key.
 *
 * Stripes: the D fragments' data of a stripe (what is packed: raw runs and
 * compressed blocks, and the zeros after them) is AES-256-XTS in units of
 * SEAL_UNIT bytes, unit u of stripe s under the tweak (s, u), both u64 LE.
 * Length-preserving: an encrypted stripe is laid out exactly as a plain
 * one, its extents are the same records, parity is over the ciphertext
 * (so healing never needs a key), and any unit reads back on its own.
 * Stripe ids are never reused and a stripe is written once, so no tweak
 * ever encrypts two different contents.
 *
 * Thread-safe: nothing is kept between calls but the caller's keys.
 */
#ifndef SH_DATA_SEAL_H
#define SH_DATA_SEAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SEAL_KEY_LEN	 32
#define SEAL_UNIT	 4096u /* bytes of a stripe's data encrypted under one tweak */
#define SEAL_WRAPPED_LEN (16 + SEAL_KEY_LEN + 16) /* a wrapped master key: salt, key, tag */

/* A file system's keys, derived from its master key (seal_keys_init). */
struct seal_keys {
	uint8_t data[2 * SEAL_KEY_LEN]; /* AES-256-XTS */
	uint8_t dedup[SEAL_KEY_LEN];
};

/* Derive the keys from a master key: 0, or -EIO (OpenSSL could not; k wiped). */
int seal_keys_init(struct seal_keys *k, const uint8_t master[SEAL_KEY_LEN]);
/* Forget them (zeroed in a way the compiler keeps). */
void seal_keys_wipe(struct seal_keys *k);

/*
 * Encrypt (enc) or decrypt len bytes of stripe's data from in to out (the
 * same, or not overlapping), starting at unit unit0: len a multiple of
 * SEAL_UNIT. 0, or -EIO if the cipher failed.
 */
int seal_units(const struct seal_keys *k, uint64_t stripe, uint64_t unit0, const void *in,
	       void *out, size_t len, bool enc);

/* A dedup fingerprint: HMAC-SHA-256(dedup key, the block's plain bytes). 0 or -EIO. */
int seal_fingerprint(const struct seal_keys *k, const void *src, size_t len, uint8_t fp[32]);

/* The master key wrapped by a KEK (random salt), and unwrapped: -EACCES for another KEK. */
int seal_wrap(const uint8_t kek[SEAL_KEY_LEN], const uint8_t master[SEAL_KEY_LEN],
	      uint8_t out[SEAL_WRAPPED_LEN]);
int seal_unwrap(const uint8_t kek[SEAL_KEY_LEN], const uint8_t in[SEAL_WRAPPED_LEN],
		uint8_t master[SEAL_KEY_LEN]);

/*
 * The key provider (a key file to start; a KMIP or HTTP KMS would answer
 * the same call): the KEK from the file path names, or when path is NULL
 * or empty from $SHOAL_FS_KEY (the key's text) or the file
 * $SHOAL_FS_KEY_FILE names. The text is "sek1." and 64 hex digits, then
 * optionally a newline; a file others may read is refused (-EPERM), text
 * that is not a key is -EINVAL, no key anywhere -ENOKEY.
 */
int seal_kek_find(const char *path, uint8_t kek[SEAL_KEY_LEN]);
/* A key's text ("sek1.HEX", NUL-ended: room for SEAL_KEK_TEXT) and back (-EINVAL). */
#define SEAL_KEK_TEXT (5 + 2 * SEAL_KEY_LEN + 1)
void seal_kek_format(const uint8_t kek[SEAL_KEY_LEN], char out[SEAL_KEK_TEXT]);
int seal_kek_parse(const char *text, size_t len, uint8_t kek[SEAL_KEY_LEN]);

#endif
