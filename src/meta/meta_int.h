/* SPDX-License-Identifier: Apache-2.0 */
/* What meta's files share and nobody else sees. */
#ifndef SH_META_META_INT_H
#define SH_META_META_INT_H

#include "meta_ops.h"

/* An inode of this bucket: -ESTALE if gone, -EINVAL if of another bucket. */
int meta_inode_load(struct meta_bucket *b, uint64_t ino, struct meta_inode *in);
int meta_inode_store(struct meta_bucket *b, uint64_t ino, const struct meta_inode *in);

#endif /* SH_META_META_INT_H */
