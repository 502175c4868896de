// SPDX-License-Identifier: Apache-2.0
/*
 * Interfaces: the text form of a node's list ("IP:PORT[/LABEL],..."), and
 * interfaces added to and removed from a running endpoint. Every peer's
 * paths are rebuilt when the local list changes; packets in flight on a
 * path that is gone are retransmitted on the others.
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "net_int.h"

SH_LOG_FACILITY("net");

static bool
label_ok(const char *s, size_t len)
{
	if (len == 0 || len >= NET_LABEL_MAX)
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return false;
	}
	return true;
}

int
net_ifaces_parse(const char *s, struct net_iface *out, unsigned max)
{
	unsigned n = 0;

	if (s == NULL || *s == '\0')
		return -EINVAL;
	while (*s != '\0') {
		const char *end = strchr(s, ','), *slash, *at;
		char one[96 + NET_DEV_MAX];
		size_t len = end ? (size_t)(end - s) : strlen(s);

		if (n == max || len == 0 || len >= sizeof(one))
			return -EINVAL;
		memcpy(one, s, len);
		one[len] = '\0';
		memset(&out[n], 0, sizeof(out[n]));
		/* @TRANSPORT[:DEV] last: "10.0.0.1:7100/sw1@dpdk:net_af_packet0" */
		at = strchr(one, '@');
		if (at != NULL) {
			const char *colon = strchr(at + 1, ':');
			size_t tlen = colon ? (size_t)(colon - at - 1) : strlen(at + 1);

			if (tlen == 0 || tlen >= sizeof(out[n].transport) ||
			    (colon != NULL &&
			     (colon[1] == '\0' || strlen(colon + 1) >= NET_DEV_MAX)))
				return -EINVAL;
			memcpy(out[n].transport, at + 1, tlen);
			if (colon != NULL)
				snprintf(out[n].dev, sizeof(out[n].dev), "%s", colon + 1);
			one[at - one] = '\0';
		}
		slash = strchr(one, '/');
		if (slash != NULL) {
			size_t llen = strlen(slash + 1);

			if (!label_ok(slash + 1, llen))
				return -EINVAL;
			memcpy(out[n].label, slash + 1, llen + 1);
			one[slash - one] = '\0';
		}
		if (env_addr_parse(one, &out[n].addr) < 0)
			return -EINVAL;
		n++;
		s += len;
		if (*s == ',' && *++s == '\0')
			return -EINVAL; /* a trailing comma */
	}
	return (int)n;
}

int
net_ifaces_format(const struct net_iface *ifc, unsigned n, char *out, size_t len)
{
	size_t off = 0;

	if (len == 0)
		return -ENOSPC;
	out[0] = '\0';
	for (unsigned i = 0; i < n; i++) {
		char a[80];
		int w;

		env_addr_format(&ifc[i].addr, a, sizeof(a));
		w = snprintf(out + off, len - off, "%s%s%s%s%s%s%s%s", i ? "," : "", a,
			     ifc[i].label[0] ? "/" : "", ifc[i].label,
			     ifc[i].transport[0] ? "@" : "", ifc[i].transport,
			     ifc[i].dev[0] ? ":" : "", ifc[i].dev);
		if (w < 0 || (size_t)w >= len - off)
			return -ENOSPC;
		off += (size_t)w;
	}
	return (int)off;
}

static bool
ifaces_same(const struct net_iface *a, unsigned na, const struct net_iface *b, unsigned nb)
{
	if (na != nb)
		return false;
	for (unsigned i = 0; i < na; i++)
		if (!env_addr_eq(&a[i].addr, &b[i].addr) || strcmp(a[i].label, b[i].label) != 0)
			return false;
	return true;
}

int
net_peer_set(struct net *n, uint64_t id, const struct net_iface *ifaces, unsigned nifaces)
{
	struct net_peer *p = net_peer_get(n, id);

	if (p == NULL || p->learned)
		return net_peer_add(n, id, ifaces, nifaces);
	if (ifaces_same(p->ifaces, p->nifaces, ifaces, nifaces))
		return 0;
	if (nifaces == 0 || nifaces > NET_MAX_IFACES)
		return -EINVAL;
	for (unsigned i = 0; i < nifaces; i++)
		if (ifaces[i].addr.family != AF_INET && ifaces[i].addr.family != AF_INET6)
			return -EINVAL;
	net_peer_take_ifaces(p, ifaces, nifaces);
	net_mark_dirty(p); /* what was in flight on a path that is gone goes on the others */
	return 0;
}

static void
rebuild_all(struct net *n)
{
	struct sh_list *pos;

	sh_list_for_each (pos, &n->peer_list)
		net_paths_build(sh_list_entry(pos, struct net_peer, link));
}

int
net_iface_add(struct net *n, const struct net_iface *ifc)
{
	unsigned i, free_slot = n->nifaces;
	int rc;

	for (i = 0; i < n->nifaces; i++) {
		if (n->tps[i].impl == NULL)
			free_slot = SH_MIN(free_slot, i);
		else if (env_addr_eq(&n->ifaces[i].addr, &ifc->addr))
			return -EEXIST;
	}
	if (free_slot == NET_MAX_IFACES)
		return -ENOSPC;
	i = free_slot;
	n->ifaces[i] = *ifc;
	rc = net_transport_open(n, i);
	if (rc < 0) {
		memset(&n->ifaces[i], 0, sizeof(n->ifaces[i]));
		return rc;
	}
	n->tps_refused[i] = 0; /* a new transport counts from 0 (the slot may be reused) */
	if (i == n->nifaces)
		n->nifaces++;
	rebuild_all(n);
	return 0;
}

/*
 * A removed interface leaves its slot empty (no address family: no path
 * is made of it), so the others keep their indexes and the transports
 * their places, which their sockets' callbacks point at.
 */
int
net_iface_remove(struct net *n, const struct env_addr *addr)
{
	unsigned i, live = 0;

	for (unsigned k = 0; k < n->nifaces; k++)
		live += n->tps[k].impl != NULL;
	for (i = 0; i < n->nifaces; i++)
		if (n->tps[i].impl != NULL && env_addr_eq(&n->ifaces[i].addr, addr))
			break;
	if (i == n->nifaces)
		return -ENOENT;
	if (live == 1)
		return -EBUSY; /* the last one: an endpoint without an interface reaches nobody */
	net_out_flush(n);
	n->tps[i].ops->close(&n->tps[i]);
	n->tps[i].impl = NULL;
	memset(&n->ifaces[i], 0, sizeof(n->ifaces[i]));
	rebuild_all(n);
	return 0;
}

int
net_iface_get(const struct net *n, unsigned i, struct net_iface *out)
{
	if (i >= n->nifaces || n->tps[i].impl == NULL)
		return -ENOENT;
	*out = n->ifaces[i];
	return 0;
}

unsigned
net_iface_slots(const struct net *n)
{
	return n->nifaces;
}

int
net_iface_label(struct net *n, const struct env_addr *addr, const char *label)
{
	for (unsigned i = 0; i < n->nifaces; i++) {
		if (n->tps[i].impl == NULL || !env_addr_eq(&n->ifaces[i].addr, addr))
			continue;
		if (strlen(label) >= NET_LABEL_MAX)
			return -EINVAL;
		if (strcmp(n->ifaces[i].label, label) != 0) {
			snprintf(n->ifaces[i].label, NET_LABEL_MAX, "%s", label);
			rebuild_all(n);
		}
		return 0;
	}
	return -ENOENT;
}
