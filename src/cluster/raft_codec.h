/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Raft messages and configurations as bytes (docs/protocol.md, "Raft").
 *
 * The encoding is Shoal's own (libraft 0.15 exports no message codec):
 * little-endian integers, u16-length strings, u32-length blobs, checked
 * on decode. A decoded message owns raft_malloc'd memory in the layout
 * libraft expects to take over from a recv callback (entries in one
 * batch, snapshot data and configuration); rc_msg_free releases it when
 * the message is not handed to raft.
 */
#ifndef SH_CLUSTER_RAFT_CODEC_H
#define SH_CLUSTER_RAFT_CODEC_H

#include <raft.h>

#include "../base/base.h"

#define RC_ADDR_MAX    64	    /* longest server address, with its NUL */
#define RC_ENTRIES_MAX 65536	    /* most entries in one AppendEntries */
#define RC_DATA_MAX    (256u << 20) /* largest entry or snapshot payload */

void rc_conf_encode(struct sh_enc *e, const struct raft_configuration *c);
/* Into an initialized, empty c; on error c is emptied again. */
int rc_conf_decode(struct sh_dec *d, struct raft_configuration *c);

/* The message with the sender's id and address (of this node) in front. */
int rc_msg_encode(struct sh_enc *e, const struct raft_message *m, raft_id from, const char *addr);
/*
 * Decode into m; the sender's address lands in addr (RC_ADDR_MAX bytes)
 * and m->server_address points there. -EBADMSG on malformed input
 * (nothing left allocated), -ENOMEM.
 */
int rc_msg_decode(const uint8_t *b, size_t len, struct raft_message *m, char *addr);
/* Free what a decoded message owns (when it is not given to raft). */
void rc_msg_free(struct raft_message *m);

#endif /* SH_CLUSTER_RAFT_CODEC_H */
