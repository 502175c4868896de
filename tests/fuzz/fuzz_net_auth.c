// SPDX-License-Identifier: Apache-2.0
/*
 * Fuzz target: the authenticated session handshake (src/net/auth.h,
 * net.c). An endpoint holding the network key, with a call waiting for a
 * backend peer, takes a run of datagrams "from" that peer. Each record of
 * the input is [u8 mode][u16 length][bytes]: the bytes go as they are, or
 * (mode bit 0), when they decode as a packet, sealed with the right key
 * first, so that HELLO, HELLO_ACK, RESET, probes and data reach the
 * session's state machine as a peer holding the key could send them, in
 * any order and with any fields. Time moves mode >> 1 times 50 us between
 * records. Nothing may crash, leak or read out of bounds; the endpoint
 * must still close cleanly.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/env/env_sim.h"
#include "../../src/net/auth.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const uint8_t key[NET_AUTH_KEY_LEN] = { 7, 7, 7 };

static void
call_cb(void *arg, int status, const struct net_msg *reply)
{
	(void)arg;
	(void)status;
	(void)reply;
}

/* Re-encode a decoded packet with NET_FLAG_MAC and a valid trailer. */
static size_t
seal(struct net_auth *a, const uint8_t *in, size_t len, uint8_t *out)
{
	struct net_pkt p;
	struct iovec iov;
	size_t h;

	if (net_pkt_decode(in, len, &p) != 0 || p.flags != 0)
		return 0;
	p.flags = NET_FLAG_MAC;
	iov = (struct iovec){ (void *)p.payload, p.payload_len };
	h = net_pkt_encode_hdr(&p, out, &iov, 1);
	memcpy(out + h, p.payload, p.payload_len);
	iov = (struct iovec){ out, h + p.payload_len };
	if (net_auth_seal(a, NULL, NULL, &p, &iov, 1, out + h + p.payload_len) < 0)
		return 0;
	return h + p.payload_len + NET_MAC_TRAILER;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t buf[ENV_DGRAM_MAX], out[ENV_DGRAM_MAX + NET_MAC_TRAILER];
	struct sim *s = sim_create(1);
	struct sim_node *node = sim_node_create(s, "n", "127.6.0.1");
	struct sim_node *peer = sim_node_create(s, "p", "127.6.0.2");
	struct net_iface ifc = { 0 }, pifc = { 0 };
	struct net_config c = { .node_id = 1, .ifaces = &ifc, .nifaces = 1, .auth_key = key };
	struct net_auth *a = NULL;
	struct net *n = NULL;
	size_t off = 0;

	if (s == NULL || node == NULL || peer == NULL)
		__builtin_trap();
	env_addr_parse("127.6.0.1:7000", &ifc.addr);
	env_addr_parse("127.6.0.2:7000", &pifc.addr);
	if (net_create(sim_node_env(node), &c, &n) != 0 || net_peer_add(n, 2, &pifc, 1) != 0 ||
	    net_auth_create(sim_node_env(peer), key, NULL, 0, &a) != 0)
		__builtin_trap();
	net_call(n, 2, NET_OP_PING, NULL, 0, NULL, call_cb, NULL, NULL);
	sim_run_for(s, 10 * SH_NSEC_PER_USEC * 100);
	while (size - off >= 3) {
		uint8_t mode = data[off];
		size_t len = (size_t)data[off + 1] | (size_t)data[off + 2] << 8, m;

		off += 3;
		len = len < size - off ? len : size - off;
		memcpy(buf, data + off, len);
		off += len;
		m = mode & 1 ? seal(a, buf, len, out) : 0;
		if (m > 0)
			sim_inject(s, &pifc.addr, &ifc.addr, out, m);
		else
			sim_inject(s, &pifc.addr, &ifc.addr, buf, len);
		sim_run_for(s, (uint64_t)(mode >> 1) * 50 * SH_NSEC_PER_USEC + 1);
	}
	sim_run_for(s, 20 * SH_NSEC_PER_MSEC);
	net_destroy(n);
	net_auth_destroy(a);
	sim_destroy(s);
	return 0;
}
