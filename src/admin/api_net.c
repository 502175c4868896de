// SPDX-License-Identifier: Apache-2.0
/*
 * The networks' views (docs/networking.md): GET /v1/processes, this
 * node's loops as WEKA's `weka cluster processes` lists them (its
 * management loop and each I/O worker: role, network mode, transport,
 * interfaces with labels, and each peer's paths with their state, loss
 * and RTT; clients are the peers with the top bit of their id set, with
 * what the clients that follow this node's configuration said they are:
 * mode, transport, interfaces, host and process), and
 * DELETE /v1/nets/ADDR, a data interface removed from its node.
 * `shoal cluster processes` asks every node and puts them together.
 */
#include <errno.h>
#include <string.h>

#include "../cluster/client_info.h"
#include "../dpdk/dpdk.h"
#include "api_int.h"

/* A DPDK port of this process: what it did, and its ARP table (dpdk.h); NULL if none. */
static json_t *
dpdk_json(const char *dev)
{
	struct sh_arp_entry e[64];
	struct sh_dpdk_stats st;
	unsigned n = 0;
	json_t *arp, *o;

	if (sh_dpdk_port_stats(dev, &st, e, SH_ARRAY_SIZE(e), &n) < 0)
		return NULL;
	arp = json_array();
	for (unsigned i = 0; i < n && i < SH_ARRAY_SIZE(e); i++) {
		char ip[16], mac[18];

		snprintf(ip, sizeof(ip), "%u.%u.%u.%u", e[i].ip >> 24, (e[i].ip >> 16) & 0xff,
			 (e[i].ip >> 8) & 0xff, e[i].ip & 0xff);
		snprintf(mac, sizeof(mac), "%02x:%02x:%02x:%02x:%02x:%02x", e[i].mac[0],
			 e[i].mac[1], e[i].mac[2], e[i].mac[3], e[i].mac[4], e[i].mac[5]);
		json_array_append_new(arp, json_pack("{s:s, s:s, s:b, s:I}", "ip", ip, "mac", mac,
						     "resolved", e[i].resolved, "asks",
						     (json_int_t)e[i].asks));
	}
	o = json_pack("{s:o, s:b}", "arp", arp, "rx_interrupts", st.rx_intr);
#define X(f) json_object_set_new(o, #f, json_integer((json_int_t)st.f));
	DPDK_STATS_FIELDS(X)
#undef X
	return o;
}

static json_t *
ifaces_json(const struct net_iface *ifc, unsigned n)
{
	json_t *a = json_array();

	for (unsigned i = 0; i < n; i++) {
		char addr[ENV_ADDRSTRLEN];
		json_t *o, *d;

		env_addr_format(&ifc[i].addr, addr, sizeof(addr));
		o = json_pack("{s:s, s:s, s:s, s:s, s:I}", "addr", addr, "label", ifc[i].label,
			      "transport", ifc[i].transport[0] ? ifc[i].transport : "udp", "dev",
			      ifc[i].dev, "mtu", (json_int_t)ifc[i].mtu);
		if (ifc[i].dev[0] && (d = dpdk_json(ifc[i].dev)) != NULL)
			json_object_set_new(o, "dpdk", d);
		json_array_append_new(a, o);
	}
	return a;
}

/* A process's transport: "dpdk" when any of its interfaces is on DPDK. */
static const char *
transport_of(const struct net_iface *ifc, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		if (strcmp(ifc[i].transport, "dpdk") == 0)
			return "dpdk";
	return "udp";
}

static json_t *
path_json(const struct net_path_stats *x)
{
	char l[ENV_ADDRSTRLEN], r[ENV_ADDRSTRLEN];

	env_addr_format(&x->local, l, sizeof(l));
	env_addr_format(&x->remote, r, sizeof(r));
	return json_pack("{s:s, s:s, s:s, s:s, s:s, s:b, s:b, s:b, s:f, s:f, s:I, s:I, s:I, s:I, "
			 "s:I, s:I, s:I, s:I, s:I}",
			 "local", l, "remote", r, "local_label", x->local_label, "remote_label",
			 x->remote_label, "state", net_path_state_name(x->state), "cross", x->cross,
			 "suspect", x->suspect, "in_use", x->in_use, "loss_pct", x->loss_ppm / 1e4,
			 "rtt_us", x->rtt_ns / 1e3, "pkts_sent", (json_int_t)x->pkts_sent,
			 "pkts_received", (json_int_t)x->pkts_received, "bytes_sent",
			 (json_int_t)x->bytes_sent, "probes_sent", (json_int_t)x->probes_sent,
			 "probes_answered", (json_int_t)x->probes_answered, "probes_lost",
			 (json_int_t)x->probes_lost, "timeouts", (json_int_t)x->timeouts, "downs",
			 (json_int_t)x->downs, "mtu", (json_int_t)x->mtu);
}

static json_t *
peers_json(const struct admin_stats *s)
{
	json_t *a = json_array();

	for (unsigned i = 0; i < s->npeers; i++) {
		const struct net_peer_stats *p = &s->peers[i];
		json_t *paths = json_array();

		for (unsigned k = 0; k < p->npaths; k++)
			json_array_append_new(paths, path_json(&p->paths[k]));
		json_array_append_new(
		    a, json_pack("{s:I, s:s, s:b, s:f, s:I, s:I, s:o}", "id", (json_int_t)p->id,
				 "kind", p->id >> 63 ? "client" : "node", "connected", p->connected,
				 "srtt_us", p->srtt_ns / 1e3, "retransmits",
				 (json_int_t)p->retransmits, "timeouts", (json_int_t)p->timeouts,
				 "paths", paths));
	}
	return a;
}

struct pctx {
	const struct admin_node *self;
	json_t *list;
};

static void
processes_of(void *arg, const struct admin_stats *const *ws, unsigned n)
{
	struct pctx *x = arg;
	bool perf = x->self->mode != NULL && strcmp(x->self->mode, "performance") == 0;

	for (unsigned i = 0; i < n; i++) {
		const struct admin_stats *s = ws[i];
		/* the management loop is event-driven whatever the workers' mode */
		bool mgmt = s->endpoint == x->self->id;
		char role[32];

		if (mgmt)
			snprintf(role, sizeof(role), "management");
		else
			snprintf(role, sizeof(role), "worker %u", (unsigned)(s->endpoint & 0xff));
		json_array_append_new(
		    x->list,
		    json_pack("{s:I, s:I, s:s, s:s, s:s, s:s, s:b, s:o, s:o}", "node",
			      (json_int_t)x->self->id, "endpoint", (json_int_t)s->endpoint, "role",
			      role, "mode", perf && !mgmt ? "performance" : "cpu", "mode_detail",
			      perf && !mgmt ? "performance-optimized: polling, a dedicated core"
					    : "cpu-optimized: event-driven",
			      "transport", transport_of(s->ifaces, s->nifaces), "rdma", false,
			      "interfaces", ifaces_json(s->ifaces, s->nifaces), "peers",
			      peers_json(s)));
	}
}

/* The clients that told this node what they are (client_info.h). */
static json_t *
clients_json(struct cluster *cl)
{
	struct cinfo *ci = sh_calloc(CINFO_MAX, sizeof(*ci));
	unsigned n = ci ? cluster_clients(cl, ci, CINFO_MAX) : 0;
	json_t *a = json_array();

	for (unsigned i = 0; i < n; i++) {
		json_t *ifs = json_array();

		for (unsigned k = 0; k < ci[i].nifaces; k++)
			json_array_append_new(ifs,
					      json_pack("{s:s, s:s}", "addr", ci[i].ifaces[k].addr,
							"label", ci[i].ifaces[k].label));
		json_array_append_new(a, json_pack("{s:I, s:s, s:s, s:s, s:b, s:o, s:s, s:i}", "id",
						   (json_int_t)ci[i].id, "role", "client", "mode",
						   ci[i].mode ? "performance" : "cpu", "transport",
						   ci[i].transport, "rdma", false, "interfaces",
						   ifs, "host", ci[i].host, "pid", (int)ci[i].pid));
	}
	sh_free(ci);
	return a;
}

json_t *
admin_processes_json(struct cluster *cl, const struct admin_node *self)
{
	struct pctx x = { .self = self, .list = json_array() };

	if (self->with_stats != NULL)
		self->with_stats(self->arg, processes_of, &x);
	return json_pack("{s:I, s:o, s:o}", "node", (json_int_t)self->id, "processes", x.list,
			 "clients", clients_json(cl));
}

int
admin_net_remove(const struct cfg *c, const char *key, struct cfg_cmd *cmd, char *err, size_t elen)
{
	for (uint32_t i = 0; i < c->nnodes; i++) {
		const struct cfg_node *n = &c->nodes[i];

		for (unsigned k = 0; k < n->nnets; k++) {
			if (strcmp(n->nets[k].addr, key) != 0)
				continue;
			cmd->op = CFG_OP_NET_REMOVE;
			cmd->id = n->id;
			snprintf(cmd->addr, sizeof(cmd->addr), "%s", key);
			return 0;
		}
	}
	snprintf(err, elen, "no node has data interface %s (shoal net list)", key);
	return -ENOENT;
}
