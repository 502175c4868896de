// SPDX-License-Identifier: Apache-2.0
/* Per-block compression (reduce.h). */
#include <errno.h>
#include <lz4.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <zstd.h>

#include "reduce.h"

/* One zstd context of each kind per thread (made on first use, freed as the thread ends). */
static pthread_key_t ckey, dkey;
static pthread_once_t zonce = PTHREAD_ONCE_INIT;

static void
cfree(void *p)
{
	ZSTD_freeCCtx(p);
}

static void
dfree(void *p)
{
	ZSTD_freeDCtx(p);
}

static void
zinit(void)
{
	(void)pthread_key_create(&ckey, cfree);
	(void)pthread_key_create(&dkey, dfree);
}

static ZSTD_CCtx *
cctx(void)
{
	ZSTD_CCtx *z;

	pthread_once(&zonce, zinit);
	z = pthread_getspecific(ckey);
	if (z == NULL && (z = ZSTD_createCCtx()) != NULL && pthread_setspecific(ckey, z) != 0) {
		ZSTD_freeCCtx(z);
		z = NULL;
	}
	return z;
}

static ZSTD_DCtx *
dctx(void)
{
	ZSTD_DCtx *z;

	pthread_once(&zonce, zinit);
	z = pthread_getspecific(dkey);
	if (z == NULL && (z = ZSTD_createDCtx()) != NULL && pthread_setspecific(dkey, z) != 0) {
		ZSTD_freeDCtx(z);
		z = NULL;
	}
	return z;
}

/*
 * Worth trying at all? A big block whose samples (4 KiB at its start and
 * at its middle) both fail to shrink by 1/8 under lz4 is taken for
 * incompressible (random, encrypted, already compressed): it costs two
 * small attempts instead of one over the whole block. dst is scratch.
 */
static bool
worth_trying(const uint8_t *src, size_t len, void *dst)
{
	static const size_t sample = 4096;
	size_t at[2] = { 0, len / 2 };

	if (len < 8 * sample)
		return true;
	for (unsigned i = 0; i < 2; i++)
		if (LZ4_compress_default((const char *)src + at[i], dst, (int)sample,
					 (int)(sample - sample / REDUCE_MIN_GAIN)) > 0)
			return true;
	return false;
}

size_t
reduce_block(unsigned comp, const void *src, size_t len, void *dst, uint8_t *enc)
{
	/* the most a stored block may take: anything more is stored raw */
	size_t cap = len - len / REDUCE_MIN_GAIN, out = 0;

	*enc = REDUCE_RAW;
	if (len < 2 * REDUCE_MIN_GAIN || len > REDUCE_BLOCK_MAX ||
	    REDUCE_ALGO(comp) == REDUCE_NONE || !worth_trying(src, len, dst))
		return 0;
	switch (REDUCE_ALGO(comp)) {
	case REDUCE_ALGO_LZ4: {
		/* lz4 gives up as soon as the output would pass cap */
		int n = LZ4_compress_default(src, dst, (int)len, (int)cap);

		if (n > 0) {
			out = (size_t)n;
			*enc = REDUCE_LZ4;
		}
		break;
	}
	case REDUCE_ALGO_ZSTD: {
		ZSTD_CCtx *z = cctx();
		int level = REDUCE_LEVEL(comp) ? REDUCE_LEVEL(comp) : REDUCE_ZSTD_DEFAULT;
		size_t n;

		if (z == NULL)
			break;
		n = ZSTD_compressCCtx(z, dst, cap, src, len, level);
		if (!ZSTD_isError(n) && n > 0) {
			out = n;
			*enc = REDUCE_ZSTD;
		}
		break;
	}
	default:
		break;
	}
	return out;
}

int
reduce_unblock(uint8_t enc, const void *src, size_t slen, void *dst, size_t blen)
{
	if (blen > REDUCE_BLOCK_MAX || slen > blen)
		return -EBADMSG;
	switch (enc) {
	case REDUCE_RAW:
		if (slen != blen)
			return -EBADMSG;
		memcpy(dst, src, blen);
		return 0;
	case REDUCE_LZ4: {
		int n = LZ4_decompress_safe(src, dst, (int)slen, (int)blen);

		return n >= 0 && (size_t)n == blen ? 0 : -EBADMSG;
	}
	case REDUCE_ZSTD: {
		ZSTD_DCtx *z = dctx();
		size_t n;

		if (z == NULL)
			return -ENOMEM;
		n = ZSTD_decompressDCtx(z, dst, blen, src, slen);
		return !ZSTD_isError(n) && n == blen ? 0 : -EBADMSG;
	}
	default:
		return -EINVAL;
	}
}
