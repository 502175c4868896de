// SPDX-License-Identifier: Apache-2.0
/* Extended attributes inside one bucket (meta_ops.h, docs/metadata.md). */
#include <string.h>

#include "meta_int.h"

#define XNAME_MAX 255

struct xcollect {
	struct meta_key keys[64];
	unsigned n;
	uint8_t *out;
	size_t cap, len;
};

static int
on_xattr(void *arg, const uint8_t *key, size_t klen, const void *val, size_t vlen)
{
	struct xcollect *x = arg;
	size_t nlen = klen - 11; /* name and its NUL */

	(void)val;
	(void)vlen;
	if (x->out != NULL || x->cap == SIZE_MAX) {
		if (x->out != NULL && x->len + nlen <= x->cap)
			memcpy(x->out + x->len, key + 11, nlen);
		x->len += nlen;
		return 0;
	}
	if (x->n == 64)
		return 1;
	memcpy(x->keys[x->n].b, key, klen);
	x->keys[x->n++].len = klen;
	return 0;
}

int
meta_xattrs_drop(struct meta_bucket *b, uint64_t ino)
{
	struct meta_key pk;
	int rc = 0;

	meta_key_id(&pk, b->bucket, META_K_XATTR, ino);
	while (rc == 0) {
		struct xcollect x = { .n = 0 };

		rc = meta_scan(b->t, &pk, NULL, 0, b->ver, on_xattr, &x);
		for (unsigned i = 0; rc == 0 && i < x.n; i++)
			rc = meta_del(b->t, &x.keys[i], b->ver, b->keep);
		if (x.n < 64)
			break;
	}
	return rc;
}

static int
xattr_key(struct meta_bucket *b, uint64_t ino, const char *name, struct meta_key *k)
{
	size_t n = strlen(name);

	if (n == 0 || n > XNAME_MAX)
		return -ERANGE;
	return meta_key_xattr(k, b->bucket, ino, name, n);
}

/* The inode, the xattr's key and whether it is set (for set and remove). */
static int
xattr_probe(struct meta_bucket *b, uint64_t ino, const char *name, struct meta_inode *in,
	    struct meta_key *k, bool *present)
{
	uint8_t probe;
	size_t n;
	int rc = meta_inode_load(b, ino, in);

	if (rc < 0)
		return rc;
	rc = xattr_key(b, ino, name, k);
	if (rc < 0)
		return rc;
	rc = meta_get(b->t, k, b->ver, &probe, 0, &n);
	*present = rc == 0 || rc == -EOVERFLOW; /* EOVERFLOW: present, with a value */
	return *present || rc == -ENOENT ? 0 : rc;
}

int
meta_setxattr(struct meta_bucket *b, uint64_t ino, const char *name, const void *val, size_t len,
	      int flags, uint64_t now)
{
	struct meta_inode in;
	struct meta_key k;
	bool present;
	int rc;

	if (len > META_XATTR_MAX)
		return -E2BIG;
	if ((flags & META_XATTR_CREATE) && (flags & META_XATTR_REPLACE))
		return -EINVAL;
	rc = xattr_probe(b, ino, name, &in, &k, &present);
	if (rc < 0)
		return rc;
	if (present && (flags & META_XATTR_CREATE))
		return -EEXIST;
	if (!present && (flags & META_XATTR_REPLACE))
		return -ENODATA;
	rc = meta_put(b->t, &k, b->ver, val, len, b->keep);
	return rc < 0 ? rc : meta_touch_ctime(b, ino, &in, now);
}

int
meta_getxattr(struct meta_bucket *b, uint64_t ino, const char *name, void *val, size_t cap,
	      size_t *len)
{
	struct meta_inode in;
	struct meta_key k;
	int rc = meta_inode_load(b, ino, &in);

	if (rc < 0)
		return rc;
	rc = xattr_key(b, ino, name, &k);
	if (rc < 0)
		return rc;
	rc = meta_get(b->t, &k, b->ver, val, cap, len);
	if (rc == -ENOENT)
		return -ENODATA;
	if (rc == -EOVERFLOW)
		return cap == 0 ? 0 : -ERANGE; /* cap 0 asks for the size, as Linux */
	return rc;
}

int
meta_listxattr(struct meta_bucket *b, uint64_t ino, char *buf, size_t cap, size_t *len)
{
	struct meta_inode in;
	struct xcollect x = { .out = (uint8_t *)buf, .cap = buf ? cap : SIZE_MAX };
	struct meta_key pk;
	int rc = meta_inode_load(b, ino, &in);

	if (rc < 0)
		return rc;
	meta_key_id(&pk, b->bucket, META_K_XATTR, ino);
	rc = meta_scan(b->t, &pk, NULL, 0, b->ver, on_xattr, &x);
	if (rc < 0)
		return rc;
	*len = x.len;
	return buf != NULL && cap > 0 && x.len > cap ? -ERANGE : 0;
}

int
meta_removexattr(struct meta_bucket *b, uint64_t ino, const char *name, uint64_t now)
{
	struct meta_inode in;
	struct meta_key k;
	bool present;
	int rc = xattr_probe(b, ino, name, &in, &k, &present);

	if (rc < 0)
		return rc;
	if (!present)
		return -ENODATA;
	rc = meta_del(b->t, &k, b->ver, b->keep);
	return rc < 0 ? rc : meta_touch_ctime(b, ino, &in, now);
}
