// SPDX-License-Identifier: Apache-2.0
/*
 * shoal cluster processes: every node's loops (GET /v1/processes of each
 * node up, through its management address) and the clients they see,
 * with network mode, transport, interfaces and labels, and each path's
 * state, loss and RTT. --json prints {"processes": [...], "clients":
 * [...], "unreachable": [node ids]}.
 */
#include <stdio.h>
#include <string.h>

#include "shoal.h"

static void
show_paths(json_t *paths, const char *indent)
{
	size_t k;
	json_t *x;

	json_array_foreach(paths, k, x)
	{
		char lab[48];

		snprintf(lab, sizeof(lab), "%s>%s", jstr(x, "local_label"),
			 jstr(x, "remote_label"));
		printf("%s%-21s -> %-21s %-11s %-7s %5.1f%% %8.0fus mtu %-5lld%s%s\n", indent,
		       jstr(x, "local"), jstr(x, "remote"), lab, jstr(x, "state"),
		       json_real_value(json_object_get(x, "loss_pct")),
		       json_real_value(json_object_get(x, "rtt_us")),
		       (long long)json_integer_value(json_object_get(x, "mtu")),
		       json_is_true(json_object_get(x, "in_use")) ? " in use" : "",
		       json_is_true(json_object_get(x, "cross")) ? " cross" : "");
	}
}

static void
show_ifaces(json_t *ifs)
{
	size_t k;
	json_t *x;

	json_array_foreach(ifs, k, x)
	    printf("%s%s%s%s%s%s", k ? ", " : "", jstr(x, "addr"), jstr(x, "label")[0] ? "/" : "",
		   jstr(x, "label"), jstr(x, "dev")[0] ? " on DPDK port " : "", jstr(x, "dev"));
}

/* The DPDK ports among ifs: what each did and its ARP table (Shoal's own, not the kernel's). */
static void
show_dpdk(json_t *ifs)
{
	size_t k, m;
	json_t *x, *e;

	json_array_foreach(ifs, k, x)
	{
		json_t *d = json_object_get(x, "dpdk");

		if (d == NULL)
			continue;
		printf(
		    "  DPDK port %s: %lld frames in, %lld out, %lld malformed, %lld not ours, "
		    "%lld handed to another queue; dropped %lld resolving, %lld unreachable, %lld "
		    "queue full; ARP %lld in, %lld out; %lld bytes sent in place\n",
		    jstr(x, "dev"), jint(d, "rx_frames"), jint(d, "tx_frames"), jint(d, "rx_bad"),
		    jint(d, "rx_other"), jint(d, "rx_handoff"), jint(d, "tx_unresolved"),
		    jint(d, "tx_unreachable"), jint(d, "tx_full"), jint(d, "arp_in"),
		    jint(d, "arp_out"), jint(d, "tx_zc_bytes"));
		json_array_foreach(json_object_get(d, "arp"), m, e)
		    printf("    arp %-15s %s%s\n", jstr(e, "ip"), jstr(e, "mac"),
			   json_is_true(json_object_get(e, "resolved")) ? "" : " (resolving)");
	}
}

/* The entry of client id in clients (one per client), made if new. */
static json_t *
client_entry(json_t *clients, long long id_num)
{
	json_t *cl;
	char id[32];

	snprintf(id, sizeof(id), "%llx", (unsigned long long)id_num);
	cl = json_object_get(clients, id);
	if (cl == NULL) {
		cl = json_pack("{s:s, s:s, s:s, s:s, s:[], s:[]}", "id", id, "role", "client",
			       "transport", "udp", "mode", "?", "interfaces", "seen_by");
		json_object_set_new(clients, id, cl);
	}
	return cl;
}

/* A client seen by a loop: its path view added to its entry. */
static void
add_client(json_t *clients, json_t *proc, json_t *peer)
{
	json_t *cl = client_entry(clients, jint(peer, "id"));

	json_array_append_new(json_object_get(cl, "seen_by"),
			      json_pack("{s:I, s:I, s:b, s:O}", "node", jint(proc, "node"),
					"endpoint", jint(proc, "endpoint"), "connected",
					json_is_true(json_object_get(peer, "connected")), "paths",
					json_object_get(peer, "paths")));
}

int
cmd_processes(const struct cli *c)
{
	json_t *nodes = api_get(c, "/v1/nodes"), *procs = json_array(), *clients = json_object();
	json_t *down = json_array(), *n, *out, *cl;
	size_t i;
	const char *key;

	json_array_foreach(nodes, i, n)
	{
		struct cli one = *c;
		char reason[256];
		json_t *j, *p;
		size_t k;

		one.addr = jstr(n, "mgmt");
		one.json = false;
		if (strcmp(jstr(n, "state"), "up") != 0 ||
		    api_try(&one, "GET", "/v1/processes", NULL, reason, sizeof(reason)) / 100 !=
			2) {
			json_array_append_new(down, json_integer(jint(n, "id")));
			continue;
		}
		j = api_get(&one, "/v1/processes");
		/* what clients following this node said they are */
		json_array_foreach(json_object_get(j, "clients"), k, p)
		{
			json_t *cl = client_entry(clients, jint(p, "id"));
			const char *f[] = {
				"mode", "transport", "interfaces", "host", "pid", "rdma"
			};

			for (unsigned x = 0; x < SH_ARRAY_SIZE(f); x++)
				json_object_set(cl, f[x], json_object_get(p, f[x]));
		}
		json_array_foreach(json_object_get(j, "processes"), k, p)
		{
			size_t m;
			json_t *peer;

			json_array_append(procs, p);
			json_array_foreach(json_object_get(p, "peers"), m,
					   peer) if (strcmp(jstr(peer, "kind"), "client") == 0)
			    add_client(clients, p, peer);
		}
		json_decref(j);
	}
	json_decref(nodes);
	out = json_pack("{s:o, s:[], s:o}", "processes", procs, "clients", "unreachable", down);
	json_object_foreach(clients, key, cl)
	    json_array_append(json_object_get(out, "clients"), cl);
	json_decref(clients);
	if (c->json) {
		print_json(out);
		json_decref(out);
		return 0;
	}
	json_array_foreach(json_object_get(out, "processes"), i, n)
	{
		size_t k;
		json_t *peer;

		printf("node %lld %-10s endpoint %llx  %s (%s), transport %s%s\n  interfaces: ",
		       jint(n, "node"), jstr(n, "role"), (unsigned long long)jint(n, "endpoint"),
		       jstr(n, "mode"), jstr(n, "mode_detail"), jstr(n, "transport"),
		       json_is_true(json_object_get(n, "rdma")) ? " + rdma" : "");
		show_ifaces(json_object_get(n, "interfaces"));
		printf("\n");
		show_dpdk(json_object_get(n, "interfaces"));
		json_array_foreach(json_object_get(n, "peers"), k, peer)
		{
			if (strcmp(jstr(peer, "kind"), "node") != 0 ||
			    json_array_size(json_object_get(peer, "paths")) < 2)
				continue; /* one path: nothing to show beyond the peer list */
			printf("  to %llx%s\n", (unsigned long long)jint(peer, "id"),
			       json_is_true(json_object_get(peer, "connected"))
				   ? ""
				   : " (not connected)");
			show_paths(json_object_get(peer, "paths"), "    ");
		}
	}
	json_array_foreach(json_object_get(out, "clients"), i, cl)
	{
		size_t k;
		json_t *s;

		if (jint(cl, "pid"))
			printf(
			    "client %s  on %s, process %lld, %s mode, transport %s\n  interfaces: ",
			    jstr(cl, "id"), jstr(cl, "host"), jint(cl, "pid"), jstr(cl, "mode"),
			    jstr(cl, "transport"));
		else
			printf("client %s  (has not said what it is), transport %s\n  interfaces: ",
			       jstr(cl, "id"), jstr(cl, "transport"));
		if (json_array_size(json_object_get(cl, "interfaces")) == 0)
			printf("one socket on every address");
		show_ifaces(json_object_get(cl, "interfaces"));
		printf("\n");
		json_array_foreach(json_object_get(cl, "seen_by"), k, s)
		{
			printf("  seen by node %lld (endpoint %llx)%s\n", jint(s, "node"),
			       (unsigned long long)jint(s, "endpoint"),
			       json_is_true(json_object_get(s, "connected")) ? ""
									     : ", not connected");
			show_paths(json_object_get(s, "paths"), "    ");
		}
	}
	if (json_array_size(down) > 0)
		printf("not asked (down or not answering): %zu node(s)\n", json_array_size(down));
	json_decref(out);
	return 0;
}
