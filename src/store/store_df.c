// SPDX-License-Identifier: Apache-2.0
/* Encoding and checked decoding of the on-disk structures of store_df.h. */
#include <errno.h>
#include <string.h>

#include "../base/base.h"
#include "store_df.h"

/* The structs are laid out little-endian with explicit padding: the host is little-endian. */

void
store_sb_encode(const struct store_sb_df *sb, uint8_t *block)
{
	struct store_sb_df x = *sb;

	x.magic = STORE_SB_MAGIC;
	x.version = STORE_VERSION;
	x.block_size = STORE_BLOCK;
	x.crc = sh_crc32c(0, &x, offsetof(struct store_sb_df, crc));
	memset(block, 0, STORE_BLOCK);
	memcpy(block, &x, sizeof(x));
}

int
store_sb_decode(const uint8_t *block, size_t len, struct store_sb_df *sb)
{
	if (len < sizeof(*sb))
		return -EBADMSG;
	memcpy(sb, block, sizeof(*sb));
	if (sb->magic != STORE_SB_MAGIC)
		return -EBADMSG;
	if (sb->crc != sh_crc32c(0, sb, offsetof(struct store_sb_df, crc)))
		return -EBADMSG;
	if (sb->version != STORE_VERSION)
		return SH_EVERSION;
	if (sb->block_size != STORE_BLOCK || sb->seg_size < 16 * STORE_BLOCK ||
	    sb->seg_size % STORE_BLOCK != 0 || sb->nsegs == 0 || sb->seg_base % STORE_BLOCK != 0 ||
	    sb->seg_base < 2 * STORE_BLOCK ||
	    (uint64_t)sb->nsegs * sb->seg_size > sb->size - sb->seg_base || sb->size < sb->seg_base)
		return -EBADMSG;
	return 0;
}

void
store_seg_encode(const struct store_seg_df *sh, uint8_t *block)
{
	struct store_seg_df x = *sh;

	x.magic = STORE_SEG_MAGIC;
	x.version = STORE_VERSION;
	x.crc = sh_crc32c(0, &x, offsetof(struct store_seg_df, crc));
	memset(block, 0, STORE_BLOCK);
	memcpy(block, &x, sizeof(x));
}

int
store_seg_decode(const uint8_t *block, size_t len, struct store_seg_df *sh)
{
	if (len < sizeof(*sh))
		return -EBADMSG;
	memcpy(sh, block, sizeof(*sh));
	if (sh->magic != STORE_SEG_MAGIC ||
	    sh->crc != sh_crc32c(0, sh, offsetof(struct store_seg_df, crc)))
		return -EBADMSG;
	if (sh->version != STORE_VERSION)
		return SH_EVERSION;
	if (sh->seq == 0)
		return -EBADMSG;
	return 0;
}

void
store_rec_encode(const struct store_rec_df *rh, const uint32_t *bcrc, uint8_t *block)
{
	struct store_rec_df x = *rh;
	uint32_t crc;

	x.magic = STORE_REC_MAGIC;
	x.version = STORE_VERSION;
	x.crc = 0;
	if (x.nblocks > 0)
		memcpy(block + sizeof(x), bcrc, 4 * (size_t)x.nblocks);
	memset(block + sizeof(x) + 4 * (size_t)x.nblocks, 0,
	       STORE_BLOCK - sizeof(x) - 4 * (size_t)x.nblocks);
	crc = sh_crc32c(0, &x, offsetof(struct store_rec_df, crc));
	crc = sh_crc32c(crc, block + sizeof(x), 4 * (size_t)x.nblocks);
	x.crc = crc;
	memcpy(block, &x, sizeof(x));
}

int
store_rec_decode(const uint8_t *block, size_t len, struct store_rec_df *rh, uint32_t *bcrc)
{
	uint32_t crc;

	if (len < STORE_BLOCK)
		return -EBADMSG;
	memcpy(rh, block, sizeof(*rh));
	if (rh->magic != STORE_REC_MAGIC)
		return -EBADMSG;
	if (rh->nblocks > STORE_MAX_BLOCKS)
		return -EBADMSG;
	crc = sh_crc32c(0, rh, offsetof(struct store_rec_df, crc));
	crc = sh_crc32c(crc, block + sizeof(*rh), 4 * (size_t)rh->nblocks);
	if (crc != rh->crc)
		return -EBADMSG;
	if (rh->version != STORE_VERSION)
		return SH_EVERSION;
	if (rh->seg_seq == 0 || rh->epoch == 0 || rh->wseq == 0)
		return -EBADMSG;
	if (rh->type == STORE_REC_FRAG) {
		if (rh->len == 0 || rh->len > STORE_MAX_FRAG ||
		    rh->nblocks != store_blocks(rh->len))
			return -EBADMSG;
	} else if (rh->type == STORE_REC_TOMB) {
		if (rh->len != 0 || rh->nblocks != 0 || rh->killed_epoch >= rh->epoch)
			return -EBADMSG;
	} else {
		return -EBADMSG;
	}
	if (bcrc != NULL)
		memcpy(bcrc, block + sizeof(*rh), 4 * (size_t)rh->nblocks);
	return 0;
}
