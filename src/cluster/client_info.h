/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What a client says of itself to the node whose configuration it follows
 * (NET_OP_CLIENT_INFO, on the management network), at connect and every
 * CINFO_EVERY_NS after, so that `shoal cluster processes` shows every
 * connected client as WEKA's process view does. Little-endian:
 *
 *   size  field
 *      8  the client's data endpoint id (the id nodes see its data calls from)
 *      1  mode: 0 cpu-optimized (event-driven), 1 performance-optimized (polling)
 *  2 + n  transport ("udp")
 *      1  interfaces, 0..CINFO_IFACES (0: one socket on every address)
 *         each: 2 + n address ("IP:PORT"), 2 + n label (1-15 chars, or empty)
 *  2 + n  host name (at most 63)
 *      4  process id
 * The reply is empty. A node keeps what CINFO_MAX clients said, each for
 * CINFO_TTL_NS after it last said it.
 */
#ifndef SH_CLUSTER_CLIENT_INFO_H
#define SH_CLUSTER_CLIENT_INFO_H

#include <stddef.h>
#include <stdint.h>

#include "../base/codec.h"

#define CINFO_IFACES   8
#define CINFO_MAX      256
#define CINFO_EVERY_NS (10ull * 1000 * 1000 * 1000)
#define CINFO_TTL_NS   (35ull * 1000 * 1000 * 1000)

struct cinfo {
	uint64_t id;
	uint8_t mode;
	char transport[16];
	uint8_t nifaces;
	struct {
		char addr[64];
		char label[16];
	} ifaces[CINFO_IFACES];
	char host[64];
	uint32_t pid;
	uint64_t seen_ns; /* the node's clock when it last heard (not sent) */
};

void cinfo_encode(struct sh_enc *e, const struct cinfo *c);
/* 0, or -EBADMSG (short, too many interfaces, a string too long, trailing bytes). */
int cinfo_decode(const uint8_t *b, size_t len, struct cinfo *out);

#endif /* SH_CLUSTER_CLIENT_INFO_H */
