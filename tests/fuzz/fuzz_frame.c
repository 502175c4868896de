// SPDX-License-Identifier: Apache-2.0
/*
 * Fuzz target: frames as a kernel-bypass port receives them (net/frame.h)
 * and Shoal's ARP table fed what parses as ARP (net/arp.h). What a frame
 * points to lies inside it; a datagram taken is built back to the same
 * UDP and IPv4 header fields; the table answers only for its addresses.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/net/arp.h"
#include "../../src/net/frame.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct sh_arp *table;
static uint64_t now;

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sh_frame f;
	uint8_t out[SH_FRAME_MIN], mac[6];
	size_t olen;

	if (table == NULL) {
		struct sh_arp_config c = {
			.mac = { 2, 0, 0, 0, 0, 1 }, .ips = { 0x0a630001 }, .nips = 1, .tries = 2
		};

		if (sh_arp_create(&c, &table) < 0)
			__builtin_trap();
	}
	now += 50ull * 1000 * 1000;
	if (sh_frame_parse(data, size, &f) < 0)
		return 0;
	if (f.kind == SH_FRAME_UDP) {
		uint8_t h[SH_FRAME_UDP_HLEN];

		if (f.payload < data || f.payload + f.plen > data + size)
			__builtin_trap();
		/* the same ends and length: the same UDP header but for its checksum */
		if (sh_frame_udp_head(h, sizeof(h), &f.src, &f.dst, f.payload, f.plen, 0, 0) !=
		    SH_FRAME_UDP_HLEN)
			__builtin_trap();
		if (memcmp(h + SH_ETH_HLEN + SH_IP4_HLEN, f.payload - SH_UDP_HLEN, 6) != 0)
			__builtin_trap();
	} else if (f.kind == SH_FRAME_ARP) {
		int rc = sh_arp_input(table, &f, now, out, sizeof(out), &olen);
		struct sh_frame r;

		if (rc == 1) {
			if (f.tpa != 0x0a630001 || f.op != SH_ARP_REQUEST ||
			    sh_frame_parse(out, olen, &r) < 0 || r.kind != SH_FRAME_ARP ||
			    r.op != SH_ARP_REPLY || r.tpa != f.spa)
				__builtin_trap();
		}
		if (f.spa != 0 && f.spa != 0x0a630001)
			(void)sh_arp_resolve(table, f.spa, now, mac, out, sizeof(out), &olen);
	}
	return 0;
}
