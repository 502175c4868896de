// SPDX-License-Identifier: Apache-2.0
/*
 * A node's data interfaces (docs/networking.md): the --data list it starts
 * with, the configuration's (net.add, net.remove) it follows at run time.
 *
 *   --data 10.1.0.11:7100/sw1,10.2.0.11/sw2
 *
 * The first interface is the node's data address (it joins with it); the
 * others, and a label on the first, are announced to the configuration
 * with net.add once the node is in it, so clients and the other nodes
 * learn them. Each worker binds every interface at its port + the
 * worker's index, and follows the configuration: an interface added to
 * the node is bound, one removed (that the configuration had listed) is
 * closed.
 */
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "shoald.h"

SH_LOG_FACILITY("shoald");

int
shoald_data_parse(const char *s, uint16_t port, struct net_iface *out, unsigned max)
{
	int n = net_ifaces_parse(s, out, max);

	if (n < 0)
		return -EINVAL;
	if (out[0].addr.port == 0)
		out[0].addr.port = port;
	for (int i = 1; i < n; i++)
		if (out[i].addr.port == 0)
			out[i].addr.port = out[0].addr.port; /* the first's port by default */
	return n;
}

int
worker_ifaces(const struct shoald *d, unsigned idx, struct net_iface *out)
{
	for (unsigned i = 0; i < d->o.ndata; i++) {
		out[i] = d->o.data_ifc[i];
		if (out[i].addr.port + idx > 65535)
			return -EINVAL;
		out[i].addr.port = (uint16_t)(out[i].addr.port + idx);
	}
	return (int)d->o.ndata;
}

/* Is a (the interface's address as the configuration has it, port of worker 0) in list? */
static int
find_addr(const struct net_iface *list, unsigned n, const struct env_addr *a)
{
	for (unsigned i = 0; i < n; i++)
		if (env_addr_eq(&list[i].addr, a))
			return (int)i;
	return -1;
}

void
shoald_nets_announce(struct shoald *d, const struct cfg *c)
{
	const struct cfg_node *n = cfg_node_find(c, d->o.id);

	if (n == NULL)
		return; /* not joined yet */
	for (unsigned i = 0; i < d->o.ndata; i++) {
		const struct net_iface *x = &d->o.data_ifc[i];
		struct cfg_cmd cmd = { .op = CFG_OP_NET_ADD, .id = d->o.id };
		bool listed = false;

		env_addr_format(&x->addr, cmd.addr, sizeof(cmd.addr));
		for (unsigned k = 0; k < n->nnets; k++)
			listed |= strcmp(n->nets[k].addr, cmd.addr) == 0;
		/* the data address needs an entry only to carry a label */
		if (listed || d->o.announced[i] || (i == 0 && x->label[0] == '\0'))
			continue;
		if (x->label[0] == '\0') {
			sh_log_warn("data interface %s has no label: not announced (net.add needs "
				    "one; --data IP:PORT/LABEL)",
				    cmd.addr);
			d->o.announced[i] = true;
			continue;
		}
		snprintf(cmd.label, sizeof(cmd.label), "%s", x->label);
		d->o.announced[i] = true; /* once: an operator's net.remove later stands */
		sh_log_info("announcing data interface %s (label %s)", cmd.addr, cmd.label);
		shoald_cfg_submit(&d->workers[0], &cmd);
	}
}

void
worker_net_follow(struct worker *w, const struct cfg *c)
{
	const struct cfg_node *n = cfg_node_find(c, w->d->o.id);
	struct net_iface want[SHOALD_IFACES_MAX];
	char list[CFG_ADDRS_MAX];
	int nwant;

	if (n == NULL || cfg_node_data(n, w->idx, list, sizeof(list)) < 0)
		return;
	nwant = net_ifaces_parse(list, want, SHOALD_IFACES_MAX);
	if (nwant <= 0)
		return;
	/* remember what the configuration listed: only those are closed when it drops them */
	for (int i = 0; i < nwant; i++)
		if (find_addr(w->cfg_seen, w->ncfg_seen, &want[i].addr) < 0 &&
		    w->ncfg_seen < SHOALD_IFACES_MAX)
			w->cfg_seen[w->ncfg_seen++] = want[i];
	for (int i = 0; i < nwant; i++) {
		int rc = net_iface_add(w->net, &want[i]);

		if (rc == -EEXIST)
			rc = net_iface_label(w->net, &want[i].addr, want[i].label);
		else if (rc == 0)
			sh_log_info("worker %u: data interface %s bound", w->idx, list);
		if (rc < 0)
			sh_log_warn("worker %u: data interface %d of %s: %s", w->idx, i, list,
				    sh_strerror(rc));
	}
	for (unsigned i = 0; i < net_iface_slots(w->net); i++) {
		struct net_iface have;
		char a[ENV_ADDRSTRLEN];

		if (net_iface_get(w->net, i, &have) < 0 ||
		    find_addr(want, (unsigned)nwant, &have.addr) >= 0)
			continue;
		if (find_addr(w->cfg_seen, w->ncfg_seen, &have.addr) < 0)
			continue; /* from --data, not announced yet */
		env_addr_format(&have.addr, a, sizeof(a));
		if (net_iface_remove(w->net, &have.addr) == 0)
			sh_log_info("worker %u: data interface %s closed (removed from the node)",
				    w->idx, a);
	}
}

/* Does the kernel's interface entry a carry the address of x? */
static bool
same_ip(const struct ifaddrs *a, const struct env_addr *x)
{
	if (a->ifa_addr == NULL || a->ifa_addr->sa_family != x->family)
		return false;
	if (x->family == AF_INET)
		return memcmp(&((const struct sockaddr_in *)(const void *)a->ifa_addr)->sin_addr,
			      x->ip, 4) == 0;
	return memcmp(&((const struct sockaddr_in6 *)(const void *)a->ifa_addr)->sin6_addr, x->ip,
		      16) == 0;
}

bool
shoald_data_down(void *arg)
{
	struct shoald *d = arg;
	struct ifaddrs *all, *a;
	bool found = false, running = false;

	if (getifaddrs(&all) < 0)
		return false; /* cannot tell: not down */
	for (unsigned i = 0; i < d->o.ndata; i++) {
		for (a = all; a != NULL; a = a->ifa_next) {
			if (!same_ip(a, &d->o.data_ifc[i].addr))
				continue;
			found = true;
			running |= (a->ifa_flags & IFF_UP) && (a->ifa_flags & IFF_RUNNING);
		}
	}
	freeifaddrs(all);
	/* none of its addresses is on a link that is up and has a carrier */
	return found && !running;
}
