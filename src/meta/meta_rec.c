// SPDX-License-Identifier: Apache-2.0
/* Metadata keys and records (meta_rec.h). */
#include <string.h>

#include "meta_rec.h"

#define INODE_VERSION  1
#define DENTRY_VERSION 1

uint16_t
meta_dentry_bucket(uint64_t parent, const char *name, size_t len, uint32_t nbuckets)
{
	uint64_t h = sh_hash64(name, len, parent * 0x9E3779B97F4A7C15ull + 1);

	return (uint16_t)(h % (nbuckets ? nbuckets : 1));
}

int
meta_name_check(const char *name, size_t len)
{
	if (len == 0)
		return -EINVAL;
	if (len > META_NAME_MAX)
		return -ENAMETOOLONG;
	if (memchr(name, '/', len) != NULL || memchr(name, '\0', len) != NULL)
		return -EINVAL;
	if ((len == 1 && name[0] == '.') || (len == 2 && name[0] == '.' && name[1] == '.'))
		return -EINVAL;
	return 0;
}

static void
key_head(struct meta_key *k, uint16_t bucket, uint8_t kind, uint64_t id)
{
	k->b[0] = (uint8_t)(bucket >> 8);
	k->b[1] = (uint8_t)bucket;
	k->b[2] = kind;
	meta_be64_put(k->b + 3, id);
	k->len = 11;
}

void
meta_key_inode(struct meta_key *k, uint16_t bucket, uint64_t ino)
{
	key_head(k, bucket, META_K_INODE, ino);
}

void
meta_key_id(struct meta_key *k, uint16_t bucket, uint8_t kind, uint64_t id)
{
	key_head(k, bucket, kind, id);
}

void
meta_key_kind(struct meta_key *k, uint16_t bucket, uint8_t kind)
{
	key_head(k, bucket, kind, 0);
	k->len = 3;
}

static int
key_named(struct meta_key *k, uint16_t bucket, uint8_t kind, uint64_t id, const char *name,
	  size_t len)
{
	int rc = len > META_NAME_MAX ? -ENAMETOOLONG : 0;

	if (rc == 0 && (len == 0 || memchr(name, '\0', len) != NULL))
		rc = -EINVAL;
	if (rc < 0)
		return rc;
	key_head(k, bucket, kind, id);
	memcpy(k->b + k->len, name, len);
	k->len += len;
	k->b[k->len++] = 0;
	return 0;
}

int
meta_key_dentry(struct meta_key *k, uint16_t bucket, uint64_t parent, const char *name, size_t len)
{
	int rc = meta_name_check(name, len);

	return rc < 0 ? rc : key_named(k, bucket, META_K_DENTRY, parent, name, len);
}

int
meta_key_lock(struct meta_key *k, uint16_t bucket, uint64_t parent, const char *name, size_t len)
{
	int rc = meta_name_check(name, len);

	return rc < 0 ? rc : key_named(k, bucket, META_K_LOCK, parent, name, len);
}

int
meta_key_xattr(struct meta_key *k, uint16_t bucket, uint64_t ino, const char *name, size_t len)
{
	return key_named(k, bucket, META_K_XATTR, ino, name, len);
}

void
meta_key_dir_prefix(struct meta_key *k, uint16_t bucket, uint64_t parent)
{
	key_head(k, bucket, META_K_DENTRY, parent);
}

int
meta_key_dentry_name(const uint8_t *key, size_t len, const uint8_t **name, size_t *nlen)
{
	if (len < 13 || key[2] != META_K_DENTRY || key[len - 1] != 0)
		return -EINVAL;
	*name = key + 11;
	*nlen = len - 12;
	return 0;
}

void
meta_inode_encode(const struct meta_inode *in, uint8_t out[META_INODE_LEN])
{
	uint8_t *p = out;

	*p++ = INODE_VERSION;
	*p++ = in->type;
	memcpy(p, &in->mode, 4), p += 4;
	memcpy(p, &in->uid, 4), p += 4;
	memcpy(p, &in->gid, 4), p += 4;
	memcpy(p, &in->nlink, 4), p += 4;
	memcpy(p, &in->rdev, 4), p += 4;
	memcpy(p, &in->size, 8), p += 8;
	memcpy(p, &in->atime, 8), p += 8;
	memcpy(p, &in->mtime, 8), p += 8;
	memcpy(p, &in->ctime, 8), p += 8;
	memcpy(p, &in->btime, 8), p += 8;
	memcpy(p, &in->generation, 8), p += 8;
	memcpy(p, &in->flags, 8);
}

int
meta_inode_decode(const uint8_t *b, size_t len, struct meta_inode *in)
{
	const uint8_t *p = b + 2;

	if (len != META_INODE_LEN || b[0] != INODE_VERSION || b[1] < META_REG || b[1] > META_SOCK)
		return -EBADMSG;
	memset(in, 0, sizeof(*in));
	in->type = b[1];
	memcpy(&in->mode, p, 4), p += 4;
	memcpy(&in->uid, p, 4), p += 4;
	memcpy(&in->gid, p, 4), p += 4;
	memcpy(&in->nlink, p, 4), p += 4;
	memcpy(&in->rdev, p, 4), p += 4;
	memcpy(&in->size, p, 8), p += 8;
	memcpy(&in->atime, p, 8), p += 8;
	memcpy(&in->mtime, p, 8), p += 8;
	memcpy(&in->ctime, p, 8), p += 8;
	memcpy(&in->btime, p, 8), p += 8;
	memcpy(&in->generation, p, 8), p += 8;
	memcpy(&in->flags, p, 8);
	if (in->mode & ~07777u)
		return -EBADMSG;
	return 0;
}

void
meta_dentry_encode(const struct meta_dentry *d, uint8_t out[META_DENTRY_LEN])
{
	out[0] = DENTRY_VERSION;
	out[1] = d->type;
	meta_be64_put(out + 2, d->ino);
}

int
meta_dentry_decode(const uint8_t *b, size_t len, struct meta_dentry *d)
{
	if (len != META_DENTRY_LEN || b[0] != DENTRY_VERSION || b[1] < META_REG || b[1] > META_SOCK)
		return -EBADMSG;
	d->type = b[1];
	d->ino = meta_be64_get(b + 2);
	return d->ino == 0 ? -EBADMSG : 0;
}
