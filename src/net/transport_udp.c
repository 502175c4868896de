// SPDX-License-Identifier: Apache-2.0
/* The "udp" transport: a datagram endpoint of the env (kernel UDP sockets, batched). */
#include <errno.h>
#include <string.h>

#include "transport.h"

static void
udp_recv(struct env_dgram *d, const struct env_dgram_msg *msgs, unsigned n, void *arg)
{
	struct net_transport *t = arg;

	(void)d;
	t->recv(t->arg, t, msgs, n);
}

static void
udp_writable(struct env_dgram *d, void *arg)
{
	struct net_transport *t = arg;

	(void)d;
	if (t->writable != NULL)
		t->writable(t->arg, t);
}

static const struct env_dgram_cbs udp_cbs = { .recv = udp_recv, .writable = udp_writable };

static int
udp_open(struct net_transport *t, struct env *env, const struct env_addr *bind)
{
	struct env_dgram *d;
	int rc = env_dgram_open(env, bind, &udp_cbs, t, &d);

	if (rc < 0)
		return rc;
	t->impl = d;
	return 0;
}

static int
udp_send(struct net_transport *t, const struct env_dgram_msg *msgs, unsigned n)
{
	return env_dgram_send(t->impl, msgs, n);
}

static int
udp_local_addr(struct net_transport *t, struct env_addr *out)
{
	return env_dgram_addr(t->impl, out);
}

static uint64_t
udp_refused(struct net_transport *t)
{
	struct env_dgram_stats st;

	env_dgram_stats(t->impl, &st);
	return st.send_dropped;
}

static uint32_t
udp_mtu(struct net_transport *t)
{
	return env_dgram_mtu(t->impl);
}

static void
udp_close(struct net_transport *t)
{
	env_dgram_close(t->impl);
	t->impl = NULL;
}

const struct net_transport_ops net_transport_udp = {
	.name = "udp",
	.version = 1,
	.max_dgram = ENV_DGRAM_MAX,
	.open = udp_open,
	.send = udp_send,
	.local_addr = udp_local_addr,
	.refused = udp_refused,
	.mtu = udp_mtu,
	.close = udp_close,
};

static const struct net_transport_ops *registered[NET_TRANSPORTS_MAX] = { &net_transport_udp };

int
net_transport_register(const struct net_transport_ops *ops)
{
	for (unsigned i = 0; i < NET_TRANSPORTS_MAX; i++) {
		if (registered[i] == ops)
			return 0;
		if (registered[i] != NULL && strcmp(registered[i]->name, ops->name) == 0)
			return -EEXIST;
		if (registered[i] == NULL) {
			registered[i] = ops;
			return 0;
		}
	}
	return -ENOSPC;
}

const struct net_transport_ops *
net_transport_find(const char *name)
{
	if (name == NULL || name[0] == '\0')
		return &net_transport_udp;
	for (unsigned i = 0; i < NET_TRANSPORTS_MAX && registered[i] != NULL; i++)
		if (strcmp(registered[i]->name, name) == 0)
			return registered[i];
	return NULL;
}
