/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Shoal's own ARP table (issue #28; docs/networking.md "Frames and ARP in
 * user space"): a transport that owns its NIC (DPDK) answers ARP for its
 * addresses and resolves its peers itself, never through the kernel's
 * neighbour table. Not thread-safe: one per port, used from its loop.
 *
 * RFC 826's rules: a sender already in the table has its MAC updated
 * (an address that moved: a gratuitous ARP too), and a request or reply
 * for one of our addresses adds its sender. A resolved entry is used for
 * ttl, then refreshed by a request to the MAC it has while still used;
 * unanswered `tries` times (retry apart), it is resolved again by
 * broadcast. A peer that never answers is -EHOSTUNREACH until ttl has
 * passed, then asked again.
 */
#ifndef SH_NET_ARP_H
#define SH_NET_ARP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "frame.h"

#define SH_ARP_OWN_MAX 8    /* our addresses on one port */
#define SH_ARP_MAX     4096 /* entries: past it, the one heard from longest ago goes */

struct sh_arp_config {
	uint8_t mac[6]; /* the port's */
	uint32_t ips[SH_ARP_OWN_MAX];
	unsigned nips;
	uint64_t ttl_ns;   /* 0: 60 s */
	uint64_t retry_ns; /* 0: 200 ms */
	unsigned tries;	   /* 0: 5 */
};

struct sh_arp_entry {
	uint32_t ip;
	uint8_t mac[6];
	bool resolved;
	uint64_t heard_ns; /* when its MAC was last learned (resolved) */
	uint64_t asked_ns; /* when it was last asked for (0: never) */
	unsigned asks;	   /* requests unanswered since it was last heard */
};

struct sh_arp;

/* -EINVAL (no address, a multicast MAC), -ENOMEM. */
int sh_arp_create(const struct sh_arp_config *cfg, struct sh_arp **out);
void sh_arp_destroy(struct sh_arp *a);

/*
 * An ARP frame received at now (f->kind SH_FRAME_ARP), learned from as
 * RFC 826 says. A request for one of our addresses is answered: the reply
 * is built into out (cap >= SH_FRAME_MIN) and 1 returned, its length in
 * *olen; 0: nothing to send.
 */
int sh_arp_input(struct sh_arp *a, const struct sh_frame *f, uint64_t now, uint8_t *out, size_t cap,
		 size_t *olen);

/*
 * The MAC to send to ip at now: 0 and mac; -EAGAIN while it is being
 * resolved; -EHOSTUNREACH after `tries` unanswered requests (for ttl).
 * *olen > 0 when a request is due now, built into out (cap >=
 * SH_FRAME_MIN): broadcast to resolve, unicast to refresh (with 0).
 */
int sh_arp_resolve(struct sh_arp *a, uint32_t ip, uint64_t now, uint8_t mac[6], uint8_t *out,
		   size_t cap, size_t *olen);

/* A gratuitous ARP for our address ip (an address now here): its length, -EINVAL. */
int sh_arp_announce(const struct sh_arp *a, uint32_t ip, uint8_t *out, size_t cap);

/* Up to max entries into out, in no order; how many there are. */
unsigned sh_arp_list(const struct sh_arp *a, struct sh_arp_entry *out, unsigned max);

#endif /* SH_NET_ARP_H */
