// SPDX-License-Identifier: Apache-2.0
/* Sealed blocks and wrapped keys of encrypted file systems (seal.h). */
#include "seal.h"

#include <errno.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../base/alloc.h"
#include "../base/secret.h"

#define KEK_PREFIX "sek1."
#define SALT_LEN   16
#define TAG_LEN	   16

/* HMAC-SHA-256(key, what) into out: 0, or -EIO (OpenSSL could not: out of memory). */
static int
mac(const uint8_t key[SEAL_KEY_LEN], const void *what, size_t len, uint8_t out[32])
{
	unsigned n = 32;

	return HMAC(EVP_sha256(), key, SEAL_KEY_LEN, what, len, out, &n) == NULL ? -EIO : 0;
}

int
seal_keys_init(struct seal_keys *k, const uint8_t master[SEAL_KEY_LEN])
{
	static const char d1[] = "shoal data key v1 a", d2[] = "shoal data key v1 b",
			  dedup[] = "shoal dedup key v1";

	if (mac(master, d1, sizeof(d1) - 1, k->data) < 0 ||
	    mac(master, d2, sizeof(d2) - 1, k->data + SEAL_KEY_LEN) < 0 ||
	    mac(master, dedup, sizeof(dedup) - 1, k->dedup) < 0) {
		seal_keys_wipe(k);
		return -EIO;
	}
	return 0;
}

void
seal_keys_wipe(struct seal_keys *k)
{
	explicit_bzero(k, sizeof(*k));
}

/* AES-256-XTS, fetched once (an implicit fetch per call costs microseconds in OpenSSL 3). */
static EVP_CIPHER *xts;
static pthread_once_t xts_once = PTHREAD_ONCE_INIT;

static void
xts_fetch(void)
{
	xts = EVP_CIPHER_fetch(NULL, "AES-256-XTS", NULL);
}

int
seal_units(const struct seal_keys *k, uint64_t stripe, uint64_t unit0, const void *in, void *out,
	   size_t len, bool enc)
{
	const uint8_t *src = in;
	uint8_t *dst = out, tweak[16];
	EVP_CIPHER_CTX *x;
	int rc = -EIO, n;

	if (len % SEAL_UNIT != 0)
		return -EINVAL;
	pthread_once(&xts_once, xts_fetch);
	if (xts == NULL || (x = EVP_CIPHER_CTX_new()) == NULL)
		return -EIO;
	/* the key once; then each unit under its own tweak */
	if (EVP_CipherInit_ex(x, xts, NULL, k->data, NULL, enc ? 1 : 0) != 1)
		goto out;
	memcpy(tweak, &stripe, 8);
	for (size_t at = 0; at < len; at += SEAL_UNIT) {
		uint64_t u = unit0 + at / SEAL_UNIT;

		memcpy(tweak + 8, &u, 8);
		if (EVP_CipherInit_ex(x, NULL, NULL, NULL, tweak, -1) != 1 ||
		    EVP_CipherUpdate(x, dst + at, &n, src + at, (int)SEAL_UNIT) != 1 ||
		    n != (int)SEAL_UNIT)
			goto out;
	}
	rc = 0;
out:
	EVP_CIPHER_CTX_free(x);
	return rc;
}

/*
 * AES-256-GCM of len bytes of in into out under HMAC(base, salt) (a key of
 * its own per wrapping), with aad; the tag written to (encrypting) or
 * checked against (not) tag. 0, or -EBADMSG (the tag does not match), -EIO.
 */
static int
gcm(const uint8_t base[SEAL_KEY_LEN], const uint8_t salt[SALT_LEN], const uint8_t *aad, size_t alen,
    const uint8_t *in, size_t len, uint8_t *out, uint8_t tag[TAG_LEN], bool enc)
{
	static const uint8_t iv[12]; /* a key of its own per wrapping: the nonce may be fixed */
	uint8_t key[32];
	EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new();
	int n = 0, rc = -EIO;

	if (x == NULL || mac(base, salt, SALT_LEN, key) < 0 ||
	    EVP_CipherInit_ex(x, EVP_aes_256_gcm(), NULL, key, iv, enc ? 1 : 0) != 1)
		goto out;
	if (EVP_CipherUpdate(x, NULL, &n, aad, (int)alen) != 1)
		goto out;
	if (len > 0 && EVP_CipherUpdate(x, out, &n, in, (int)len) != 1)
		goto out;
	if (!enc && EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_GCM_SET_TAG, TAG_LEN, tag) != 1)
		goto out;
	if (EVP_CipherFinal_ex(x, out + n, &n) != 1) {
		rc = enc ? -EIO : -EBADMSG;
		goto out;
	}
	if (enc && EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_GCM_GET_TAG, TAG_LEN, tag) != 1)
		goto out;
	rc = 0;
out:
	EVP_CIPHER_CTX_free(x);
	explicit_bzero(key, sizeof(key));
	return rc;
}

int
seal_fingerprint(const struct seal_keys *k, const void *src, size_t len, uint8_t fp[32])
{
	return mac(k->dedup, src, len, fp);
}

static const uint8_t wrap_aad[] = "shoal fs master key v1";

int
seal_wrap(const uint8_t kek[SEAL_KEY_LEN], const uint8_t master[SEAL_KEY_LEN],
	  uint8_t out[SEAL_WRAPPED_LEN])
{
	if (RAND_bytes(out, SALT_LEN) != 1)
		return -EIO;
	return gcm(kek, out, wrap_aad, sizeof(wrap_aad) - 1, master, SEAL_KEY_LEN, out + SALT_LEN,
		   out + SALT_LEN + SEAL_KEY_LEN, true);
}

int
seal_unwrap(const uint8_t kek[SEAL_KEY_LEN], const uint8_t in[SEAL_WRAPPED_LEN],
	    uint8_t master[SEAL_KEY_LEN])
{
	uint8_t tag[TAG_LEN];
	int rc;

	memcpy(tag, in + SALT_LEN + SEAL_KEY_LEN, TAG_LEN);
	rc = gcm(kek, in, wrap_aad, sizeof(wrap_aad) - 1, in + SALT_LEN, SEAL_KEY_LEN, master, tag,
		 false);
	if (rc < 0)
		explicit_bzero(master, SEAL_KEY_LEN);
	return rc == -EBADMSG ? -EACCES : rc;
}

void
seal_kek_format(const uint8_t kek[SEAL_KEY_LEN], char out[SEAL_KEK_TEXT])
{
	memcpy(out, KEK_PREFIX, sizeof(KEK_PREFIX) - 1);
	sh_hex(kek, SEAL_KEY_LEN, out + sizeof(KEK_PREFIX) - 1);
}

int
seal_kek_parse(const char *text, size_t len, uint8_t kek[SEAL_KEY_LEN])
{
	char hex[2 * SEAL_KEY_LEN + 1];
	int rc;

	while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == '\r'))
		len--;
	if (len != sizeof(KEK_PREFIX) - 1 + 2 * SEAL_KEY_LEN ||
	    memcmp(text, KEK_PREFIX, sizeof(KEK_PREFIX) - 1) != 0)
		return -EINVAL;
	memcpy(hex, text + sizeof(KEK_PREFIX) - 1, 2 * SEAL_KEY_LEN);
	hex[2 * SEAL_KEY_LEN] = '\0';
	rc = sh_unhex(hex, kek, SEAL_KEY_LEN) ? 0 : -EINVAL;
	if (rc < 0)
		explicit_bzero(kek, SEAL_KEY_LEN);
	explicit_bzero(hex, sizeof(hex));
	return rc;
}

static int
kek_load(const char *path, uint8_t kek[SEAL_KEY_LEN])
{
	char *text = NULL;
	int rc = sh_secret_read_file(path, SH_FILE_GROUP, 4096, &text);

	if (rc == -EFBIG)
		rc = -EINVAL;
	if (rc == 0) {
		rc = seal_kek_parse(text, strlen(text), kek);
		explicit_bzero(text, strlen(text));
	}
	sh_free(text);
	return rc;
}

int
seal_kek_find(const char *path, uint8_t kek[SEAL_KEY_LEN])
{
	const char *env = getenv("SHOAL_FS_KEY"), *file = getenv("SHOAL_FS_KEY_FILE");

	if (path != NULL && *path != '\0')
		return kek_load(path, kek);
	if (env != NULL && *env != '\0')
		return seal_kek_parse(env, strlen(env), kek);
	if (file != NULL && *file != '\0')
		return kek_load(file, kek);
	return -ENOKEY;
}
