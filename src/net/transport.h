/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Transports carry the protocol's datagrams for one local interface.
 * A vtable so that DPDK (user-space Ethernet/IPv4/UDP, own ARP table) and
 * RDMA (bulk payloads) plug in beside UDP without the session code
 * changing. Today: "udp", kernel sockets through env (sendmmsg/recvmmsg
 * batches, event-driven or busy-polled according to the env's mode).
 */
#ifndef SH_NET_TRANSPORT_H
#define SH_NET_TRANSPORT_H

#include "../env/env.h"

struct net_transport;

/* A batch of datagrams arrived; msgs are valid until the call returns. */
typedef void (*net_transport_recv_fn)(void *arg, struct net_transport *t,
				      const struct env_dgram_msg *msgs, unsigned n);

struct net_transport_ops {
	const char *name;
	unsigned version;
	/* Largest datagram payload this transport can carry. */
	uint32_t max_dgram;
	int (*open)(struct net_transport *t, struct env *env, const struct env_addr *bind);
	/* Returns datagrams taken (0..n) or a negative errno. */
	int (*send)(struct net_transport *t, const struct env_dgram_msg *msgs, unsigned n);
	int (*local_addr)(struct net_transport *t, struct env_addr *out);
	/* Datagrams the local stack refused so far (no route: the link is down). Optional. */
	uint64_t (*refused)(struct net_transport *t);
	/*
	 * The largest datagram payload the interface carries in one frame, as
	 * opened (its MTU less the IP and UDP headers), or 0 if not known.
	 * Optional. What an interface configured without an MTU takes.
	 */
	uint32_t (*mtu)(struct net_transport *t);
	void (*close)(struct net_transport *t);
};

struct net_transport {
	const struct net_transport_ops *ops;
	const char *dev; /* the interface's device (net_iface.dev) while open */
	net_transport_recv_fn recv;
	void (*writable)(void *arg, struct net_transport *t);
	void *arg;
	void *impl;
};

extern const struct net_transport_ops net_transport_udp;

/*
 * Transports by name: "udp" always; others once registered (the DPDK
 * module registers "dpdk" when its EAL is up). Registration is for
 * start-up, before any endpoint opens; at most NET_TRANSPORTS_MAX.
 * -EEXIST (another of that name), -ENOSPC.
 */
#define NET_TRANSPORTS_MAX 4
int net_transport_register(const struct net_transport_ops *ops);
/* "" is "udp". NULL if none has that name. */
const struct net_transport_ops *net_transport_find(const char *name);

#endif /* SH_NET_TRANSPORT_H */
