/* SPDX-License-Identifier: Apache-2.0 */
/* The drive-target RPC service: serves the targets added to it on a net endpoint. */
#ifndef SH_STORE_SERVICE_H
#define SH_STORE_SERVICE_H

#include "../net/net.h"
#include "store.h"

struct store_svc;

/* Registers the NET_OP_STORE_* handlers on n. -EEXIST if already registered. */
int store_svc_create(struct net *n, struct store_svc **out);
/* Serve s (by its target id). -EEXIST, -ENOSPC (too many targets). */
int store_svc_add(struct store_svc *svc, struct store *s);
/* The target served here with that id, or NULL. */
struct store *store_svc_find(const struct store_svc *svc, uint64_t target);
/* Requests in progress must have been answered (close the stores first). */
void store_svc_destroy(struct store_svc *svc);

#endif /* SH_STORE_SERVICE_H */
