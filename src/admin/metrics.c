// SPDX-License-Identifier: Apache-2.0
/* GET /metrics in the Prometheus text format (metrics.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <shoal/sh_version.h>

#include "../base/alloc.h"
#include "api_int.h"

/* ---- a growing text buffer ---- */

struct mtext {
	char *p;
	size_t len, cap;
	bool oom;
};

SH_PRINTF(2, 3)
static void
put(struct mtext *t, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (t->oom)
		return;
	for (;;) {
		size_t room = t->cap - t->len;

		va_start(ap, fmt);
		n = vsnprintf(t->p ? t->p + t->len : NULL, room, fmt, ap);
		va_end(ap);
		if (n < 0) {
			t->oom = true;
			return;
		}
		if ((size_t)n < room) {
			t->len += (size_t)n;
			return;
		}
		size_t cap = t->cap ? t->cap * 2 : 16384;
		while (cap - t->len <= (size_t)n)
			cap *= 2;
		char *np = sh_realloc(t->p, cap);

		if (np == NULL) {
			t->oom = true;
			return;
		}
		t->p = np;
		t->cap = cap;
	}
}

static void
family(struct mtext *t, const char *name, const char *type, const char *help)
{
	put(t, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* ---- snapshots ---- */

int
admin_stats_of_net(struct net *n, struct admin_stats *out)
{
	unsigned cnt = net_peer_stats(n, NULL, 0);

	memset(out, 0, sizeof(*out));
	out->endpoint = net_node_id(n);
	for (unsigned i = 0; i < net_iface_slots(n) && out->nifaces < ADMIN_IFACES_MAX; i++)
		if (net_iface_get(n, i, &out->ifaces[out->nifaces]) == 0)
			out->nifaces++;
	net_stats(n, &out->net);
	net_op_stats_add(n, out->ops);
	if (cnt == 0)
		return 0;
	out->peers = sh_calloc(cnt, sizeof(*out->peers));
	if (out->peers == NULL)
		return -ENOMEM;
	out->npeers = net_peer_stats(n, out->peers, cnt);
	if (out->npeers > cnt)
		out->npeers = cnt;
	return 0;
}

void
admin_stats_clear(struct admin_stats *s)
{
	sh_free(s->peers);
	sh_free(s->drives);
	sh_free(s->groups);
	s->peers = NULL;
	s->drives = NULL;
	s->groups = NULL;
	s->npeers = s->ndrives = s->ngroups = 0;
}

/* ---- families ---- */

struct mctx {
	struct mtext t;
	uint64_t node;
	const struct admin_stats *const *ws;
	unsigned nws;
};

static double
sec(uint64_t ns)
{
	return (double)ns / 1e9;
}

/*
 * One sample column of a table-driven family: a u64 at off in the stats
 * struct, printed with extra labels. A row with name NULL is another
 * sample of the family above it.
 */
struct field {
	const char *name, *type, *help, *extra;
	size_t off;
};

/* The family a field belongs to (declared when it starts one). */
static const char *
field_family(struct mtext *t, const struct field *f, const char *name)
{
	if (f->name == NULL)
		return name;
	family(t, f->name, f->type, f->help);
	return f->name;
}

static unsigned long long
field_value(const void *stats, const struct field *f)
{
	return (unsigned long long)*(const uint64_t *)((const char *)stats + f->off);
}

static void
rpc_families(struct mctx *m)
{
	struct net_op_stats ops[NET_OPS_TRACKED] = { 0 };
	struct mtext *t = &m->t;
	static const struct field f[] = {
		{ "shoal_rpc_requests_total", "counter", "Requests served, by opcode.", "",
		  offsetof(struct net_op_stats, requests) },
		{ "shoal_rpc_errors_total", "counter",
		  "Requests answered with an error, by opcode.", "",
		  offsetof(struct net_op_stats, errors) },
		{ "shoal_rpc_received_bytes_total", "counter",
		  "Bytes of request bodies, by opcode.", "",
		  offsetof(struct net_op_stats, bytes_in) },
		{ "shoal_rpc_sent_bytes_total", "counter", "Bytes of reply bodies, by opcode.", "",
		  offsetof(struct net_op_stats, bytes_out) },
	};

	for (unsigned w = 0; w < m->nws; w++)
		for (unsigned op = 0; op < NET_OPS_TRACKED; op++)
			net_op_stats_sum(&ops[op], &m->ws[w]->ops[op]);
	for (size_t c = 0; c < sizeof(f) / sizeof(f[0]); c++) {
		field_family(t, &f[c], NULL);
		for (unsigned op = 0; op < NET_OPS_TRACKED; op++)
			if (ops[op].requests != 0)
				put(t, "%s{node=\"%llu\",op=\"%s\"} %llu\n", f[c].name,
				    (unsigned long long)m->node, net_op_name(op),
				    field_value(&ops[op], &f[c]));
	}
	family(t, "shoal_rpc_latency_seconds", "histogram",
	       "Time from a request's arrival to its reply, by opcode.");
	for (unsigned op = 0; op < NET_OPS_TRACKED; op++) {
		uint64_t cum = 0;

		if (ops[op].requests == 0)
			continue;
		for (unsigned b = 0; b < NET_LAT_BUCKETS; b++) {
			char le[32] = "+Inf";

			if (b < NET_LAT_BUCKETS - 1)
				snprintf(le, sizeof(le), "%g", sec(net_lat_bound_ns[b]));
			cum += ops[op].lat[b];
			put(t,
			    "shoal_rpc_latency_seconds_bucket{node=\"%llu\",op=\"%s\",le=\"%s\"} "
			    "%llu\n",
			    (unsigned long long)m->node, net_op_name(op), le,
			    (unsigned long long)cum);
		}
		put(t, "shoal_rpc_latency_seconds_sum{node=\"%llu\",op=\"%s\"} %.9f\n",
		    (unsigned long long)m->node, net_op_name(op), sec(ops[op].lat_sum_ns));
		put(t, "shoal_rpc_latency_seconds_count{node=\"%llu\",op=\"%s\"} %llu\n",
		    (unsigned long long)m->node, net_op_name(op), (unsigned long long)cum);
	}
}

static void
net_families(struct mctx *m)
{
	struct mtext *t = &m->t;
	static const struct field f[] = {
		{ "shoal_net_packets_total", "counter", "Datagrams sent and received.",
		  ",dir=\"sent\"", offsetof(struct net_stats, pkts_sent) },
		{ NULL, NULL, NULL, ",dir=\"received\"",
		  offsetof(struct net_stats, pkts_received) },
		{ "shoal_net_bytes_total", "counter", "Datagram bytes sent and received.",
		  ",dir=\"sent\"", offsetof(struct net_stats, bytes_sent) },
		{ NULL, NULL, NULL, ",dir=\"received\"",
		  offsetof(struct net_stats, bytes_received) },
		{ "shoal_net_acks_total", "counter",
		  "Packets that carried only an acknowledgement (nothing to send it with).", "",
		  offsetof(struct net_stats, acks_sent) },
		{ "shoal_net_retransmits_total", "counter", "Packets sent again.", "",
		  offsetof(struct net_stats, retransmits) },
		{ "shoal_net_timeouts_total", "counter", "Retransmission timeouts.", "",
		  offsetof(struct net_stats, timeouts) },
		{ "shoal_net_backoffs_ended_total", "counter",
		  "Backed-off retransmission timers cut short: a silent peer was heard again.", "",
		  offsetof(struct net_stats, backoffs_ended) },
		{ "shoal_net_bad_crc_total", "counter", "Datagrams dropped for a bad checksum.", "",
		  offsetof(struct net_stats, bad_crc) },
		{ "shoal_net_refused_total", "counter",
		  "Requests and messages a client sent that only a backend may (refused).", "",
		  offsetof(struct net_stats, refused) },
		{ "shoal_net_auth_failed_total", "counter",
		  "Datagrams without a valid MAC where one is needed (dropped).", "",
		  offsetof(struct net_stats, auth_failed) },
		{ "shoal_net_denied_total", "counter",
		  "Requests a client's key does not allow: none, revoked, read-only (refused).", "",
		  offsetof(struct net_stats, denied) },
		{ "shoal_net_calls_total", "counter", "Calls this node made to others.", "",
		  offsetof(struct net_stats, calls) },
		{ "shoal_net_calls_failed_total", "counter", "Calls that ended with an error.", "",
		  offsetof(struct net_stats, calls_failed) },
		{ "shoal_net_reply_cache_entries", "gauge", "Replies kept for retried calls.", "",
		  offsetof(struct net_stats, reply_cache_entries) },
		{ "shoal_net_peers_forgotten_total", "counter",
		  "Clients forgotten after they went silent.", "",
		  offsetof(struct net_stats, peers_forgotten) },
	};
	const char *name = NULL;

	for (size_t c = 0; c < sizeof(f) / sizeof(f[0]); c++) {
		unsigned long long sum = 0;

		name = field_family(t, &f[c], name);
		for (unsigned w = 0; w < m->nws; w++)
			sum += field_value(&m->ws[w]->net, &f[c]);
		put(t, "%s{node=\"%llu\"%s} %llu\n", name, (unsigned long long)m->node, f[c].extra,
		    sum);
	}
}

/* Peers summed over every loop; a peer is a node endpoint or a client. */
static void
peer_families(struct mctx *m)
{
	struct mtext *t = &m->t;
	struct net_peer_stats *all = NULL;
	const char *name = NULL;
	unsigned n = 0, cap = 0;
	static const struct field f[] = {
		{ "shoal_peer_packets_total", "counter", "Datagrams to and from a peer.",
		  ",dir=\"sent\"", offsetof(struct net_peer_stats, pkts_sent) },
		{ NULL, NULL, NULL, ",dir=\"received\"",
		  offsetof(struct net_peer_stats, pkts_received) },
		{ "shoal_peer_bytes_total", "counter", "Datagram bytes to and from a peer.",
		  ",dir=\"sent\"", offsetof(struct net_peer_stats, bytes_sent) },
		{ NULL, NULL, NULL, ",dir=\"received\"",
		  offsetof(struct net_peer_stats, bytes_received) },
		{ "shoal_peer_retransmits_total", "counter", "Packets sent again to a peer.", "",
		  offsetof(struct net_peer_stats, retransmits) },
		{ "shoal_peer_timeouts_total", "counter", "Retransmission timeouts toward a peer.",
		  "", offsetof(struct net_peer_stats, timeouts) },
		{ "shoal_peer_drops_total", "counter",
		  "Packets from a peer thrown away (duplicate, stale, no memory).", "",
		  offsetof(struct net_peer_stats, drops) },
		{ "shoal_peer_auth_failed_total", "counter",
		  "Datagrams claiming to come from a peer without a valid MAC (dropped).", "",
		  offsetof(struct net_peer_stats, auth_failed) },
	};

	for (unsigned w = 0; w < m->nws; w++) {
		for (unsigned i = 0; i < m->ws[w]->npeers; i++) {
			const struct net_peer_stats *p = &m->ws[w]->peers[i];
			unsigned k = 0;

			while (k < n && all[k].id != p->id)
				k++;
			if (k == n) {
				if (n == cap) {
					unsigned nc = cap ? cap * 2 : 64;
					struct net_peer_stats *na =
					    sh_realloc(all, nc * sizeof(*all));

					if (na == NULL) {
						m->t.oom = true;
						goto out;
					}
					all = na;
					cap = nc;
				}
				all[n] = *p;
				n++;
				continue;
			}
			all[k].pkts_sent += p->pkts_sent;
			all[k].pkts_received += p->pkts_received;
			all[k].bytes_sent += p->bytes_sent;
			all[k].bytes_received += p->bytes_received;
			all[k].retransmits += p->retransmits;
			all[k].timeouts += p->timeouts;
			all[k].drops += p->drops;
			all[k].auth_failed += p->auth_failed;
			if (p->srtt_ns > all[k].srtt_ns)
				all[k].srtt_ns = p->srtt_ns;
			all[k].connected |= p->connected;
		}
	}
	for (size_t c = 0; c < sizeof(f) / sizeof(f[0]); c++) {
		name = field_family(t, &f[c], name);
		for (unsigned k = 0; k < n; k++)
			put(t, "%s{node=\"%llu\",peer=\"%llx\"%s} %llu\n", name,
			    (unsigned long long)m->node, (unsigned long long)all[k].id, f[c].extra,
			    field_value(&all[k], &f[c]));
	}
	family(t, "shoal_peer_rtt_seconds", "gauge", "Smoothed round-trip time to a peer.");
	for (unsigned k = 0; k < n; k++)
		put(t, "shoal_peer_rtt_seconds{node=\"%llu\",peer=\"%llx\"} %.9f\n",
		    (unsigned long long)m->node, (unsigned long long)all[k].id,
		    sec(all[k].srtt_ns));
	family(t, "shoal_peer_connected", "gauge", "1 while a session with the peer is up.");
	for (unsigned k = 0; k < n; k++)
		put(t, "shoal_peer_connected{node=\"%llu\",peer=\"%llx\"} %d\n",
		    (unsigned long long)m->node, (unsigned long long)all[k].id, all[k].connected);
out:
	sh_free(all);
}

static void
target_families(struct mctx *m)
{
	struct mtext *t = &m->t;
	static const struct field f[] = {
		{ "shoal_target_capacity_bytes", "gauge", "A drive target's usable size.", "",
		  offsetof(struct store_stats, capacity) },
		{ "shoal_target_used_bytes", "gauge", "Bytes in segments in use.", "",
		  offsetof(struct store_stats, used) },
		{ "shoal_target_live_bytes", "gauge", "Bytes of live fragments.", "",
		  offsetof(struct store_stats, live) },
		{ "shoal_target_garbage_bytes", "gauge", "Bytes of dead fragments not yet cleaned.",
		  "", offsetof(struct store_stats, garbage) },
		{ "shoal_target_fragments", "gauge", "Live fragments.", "",
		  offsetof(struct store_stats, fragments) },
		{ "shoal_target_ops_total", "counter", "Fragment operations on a target.",
		  ",op=\"append\"", offsetof(struct store_stats, appends) },
		{ NULL, NULL, NULL, ",op=\"read\"", offsetof(struct store_stats, reads) },
		{ NULL, NULL, NULL, ",op=\"release\"", offsetof(struct store_stats, releases) },
		{ "shoal_target_io_bytes_total", "counter", "Fragment bytes written and read.",
		  ",dir=\"written\"", offsetof(struct store_stats, bytes_appended) },
		{ NULL, NULL, NULL, ",dir=\"read\"", offsetof(struct store_stats, bytes_read) },
		{ "shoal_target_fsyncs_total", "counter", "Flushes of a target's drive.", "",
		  offsetof(struct store_stats, fsyncs) },
		{ "shoal_target_cleaned_segments_total", "counter",
		  "Segments the cleaner emptied and freed.", "",
		  offsetof(struct store_stats, cleaned_segs) },
		{ "shoal_target_moved_bytes_total", "counter", "Live bytes the cleaner moved.", "",
		  offsetof(struct store_stats, moved_bytes) },
		{ "shoal_target_corrupt_blocks_total", "counter",
		  "Blocks found corrupt (reads or scrubs).", "",
		  offsetof(struct store_stats, corrupt_blocks) },
		{ "shoal_target_read_errors_total", "counter",
		  "Fragment reads the drive failed (I/O errors).", "",
		  offsetof(struct store_stats, read_errors) },
		{ "shoal_target_failed", "gauge",
		  "1: the target's write path failed (I/O errors); its node marks the drive "
		  "failed.",
		  "", offsetof(struct store_stats, failed) },
	};

	const char *name = NULL;

	for (size_t c = 0; c < sizeof(f) / sizeof(f[0]); c++) {
		name = field_family(t, &f[c], name);
		for (unsigned w = 0; w < m->nws; w++)
			for (unsigned i = 0; i < m->ws[w]->ndrives; i++) {
				const struct admin_drive_stats *d = &m->ws[w]->drives[i];

				put(t, "%s{node=\"%llu\",target=\"%llu\"%s} %llu\n", name,
				    (unsigned long long)m->node, (unsigned long long)d->target,
				    f[c].extra, field_value(&d->st, &f[c]));
			}
	}
}

/* Self-healing, this node's part (docs/healing.md). */
static void
heal_families(struct mctx *m)
{
	struct msvc_heal_stats h = { .pass_epoch = UINT64_MAX };
	unsigned long long node = (unsigned long long)m->node;
	struct mtext *t = &m->t;
	static const struct {
		const char *name, *type, *help;
		size_t off;
	} one[] = {
		{ "shoal_heal_unreadable_stripes", "gauge",
		  "Stripes led here missing more fragments than their parity.",
		  offsetof(struct msvc_heal_stats, unreadable) },
		{ "shoal_heal_shared_stripes", "gauge",
		  "Stripes led here with fragments sharing a failure domain (written degraded).",
		  offsetof(struct msvc_heal_stats, shared) },
		{ "shoal_heal_pending_bytes", "gauge", "Fragment bytes on lost targets to rebuild.",
		  offsetof(struct msvc_heal_stats, pending_bytes) },
		{ "shoal_heal_targets_full", "gauge",
		  "Targets a heal write found out of space lately (none planned onto them).",
		  offsetof(struct msvc_heal_stats, targets_full) },
		{ "shoal_heal_rebuilt_fragments_total", "counter",
		  "Fragments re-created from the others.",
		  offsetof(struct msvc_heal_stats, rebuilt_frags) },
		{ "shoal_heal_moved_fragments_total", "counter",
		  "Fragments moved to spread a stripe over more failure domains.",
		  offsetof(struct msvc_heal_stats, moved_frags) },
		{ "shoal_heal_repaired_fragments_total", "counter",
		  "Corrupt fragments re-created where they were.",
		  offsetof(struct msvc_heal_stats, repaired_frags) },
		{ "shoal_heal_written_bytes_total", "counter",
		  "Fragment bytes rebuilds and moves wrote.",
		  offsetof(struct msvc_heal_stats, rebuilt_bytes) },
		{ "shoal_heal_failed_jobs_total", "counter",
		  "Stripe rebuilds that failed and were planned again.",
		  offsetof(struct msvc_heal_stats, failed_jobs) },
		{ "shoal_heal_in_flight", "gauge", "Stripes being rebuilt or moved now.",
		  offsetof(struct msvc_heal_stats, in_flight) },
		{ "shoal_heal_queued", "gauge", "Stripes planned, waiting for a slot.",
		  offsetof(struct msvc_heal_stats, queued) },
		{ "shoal_heal_rate_bytes", "gauge", "Bytes per second rebuilds wrote lately.",
		  offsetof(struct msvc_heal_stats, rate_bps) },
		{ "shoal_heal_passes_total", "counter", "Passes over the stripes led here.",
		  offsetof(struct msvc_heal_stats, passes) },
	};

	for (unsigned w = 0; w < m->nws; w++)
		if (m->ws[w]->has_meta)
			msvc_heal_stats_add(&h, &m->ws[w]->meta.heal);
	family(t, "shoal_heal_stripes", "gauge",
	       "Stripes led here, by fragments missing (down or lost), as the last pass found.");
	for (unsigned i = 0; i < MSVC_HEAL_LEVELS; i++)
		put(t, "shoal_heal_stripes{node=\"%llu\",missing=\"%u%s\"} %llu\n", node, i,
		    i == MSVC_HEAL_LEVELS - 1 ? "+" : "", (unsigned long long)h.stripes[i]);
	family(t, "shoal_heal_bytes", "gauge", "Their data bytes, by fragments missing.");
	for (unsigned i = 0; i < MSVC_HEAL_LEVELS; i++)
		put(t, "shoal_heal_bytes{node=\"%llu\",missing=\"%u%s\"} %llu\n", node, i,
		    i == MSVC_HEAL_LEVELS - 1 ? "+" : "", (unsigned long long)h.bytes[i]);
	for (size_t k = 0; k < sizeof(one) / sizeof(one[0]); k++) {
		uint64_t v;

		memcpy(&v, (const uint8_t *)&h + one[k].off, sizeof(v));
		family(t, one[k].name, one[k].type, one[k].help);
		put(t, "%s{node=\"%llu\"} %llu\n", one[k].name, node, (unsigned long long)v);
	}
}

static void
meta_families(struct mctx *m)
{
	unsigned groups[2] = { 0 }, buckets[2] = { 0 }, ready = 0;
	struct mtext *t = &m->t;

	for (unsigned w = 0; w < m->nws; w++)
		for (unsigned i = 0; i < m->ws[w]->ngroups; i++) {
			const struct msvc_group_info *g = &m->ws[w]->groups[i];
			bool lead = g->raft_state == RGROUP_LEADER;

			groups[lead]++;
			buckets[lead] += g->nbuckets;
			ready += g->ready;
		}
	family(t, "shoal_meta_groups", "gauge", "Metadata Raft groups on this node, by role.");
	put(t, "shoal_meta_groups{node=\"%llu\",role=\"leader\"} %u\n", (unsigned long long)m->node,
	    groups[1]);
	put(t, "shoal_meta_groups{node=\"%llu\",role=\"follower\"} %u\n",
	    (unsigned long long)m->node, groups[0]);
	family(t, "shoal_meta_buckets", "gauge", "Metadata buckets on this node, by role.");
	put(t, "shoal_meta_buckets{node=\"%llu\",role=\"leader\"} %u\n",
	    (unsigned long long)m->node, buckets[1]);
	put(t, "shoal_meta_buckets{node=\"%llu\",role=\"follower\"} %u\n",
	    (unsigned long long)m->node, buckets[0]);
	{
		struct msvc_stats ms = { 0 };
		static const char *const fam[3][2] = {
			{ "shoal_meta_requests_total",
			  "Metadata requests answered here, by kind (commands by operation)." },
			{ "shoal_meta_errors_total", "Of them answered with an error." },
			{ "shoal_meta_request_seconds_total",
			  "Time from arrival to answer, summed (divide by requests: the mean)." },
		};

		for (unsigned w = 0; w < m->nws; w++)
			for (unsigned k = 0; m->ws[w]->has_meta && k < MSVC_SLOTS; k++) {
				ms.requests[k] += m->ws[w]->meta.requests[k];
				ms.errors[k] += m->ws[w]->meta.errors[k];
				ms.time_ns[k] += m->ws[w]->meta.time_ns[k];
			}
		for (unsigned f = 0; f < 3; f++) {
			family(t, fam[f][0], "counter", fam[f][1]);
			for (unsigned k = 0; k < MSVC_SLOTS; k++) {
				if (ms.requests[k] == 0)
					continue;
				if (f < 2)
					put(t, "%s{node=\"%llu\",kind=\"%s\"} %llu\n", fam[f][0],
					    (unsigned long long)m->node, msvc_slot_name(k),
					    (unsigned long long)(f == 0 ? ms.requests[k]
									: ms.errors[k]));
				else
					put(t, "%s{node=\"%llu\",kind=\"%s\"} %.9f\n", fam[f][0],
					    (unsigned long long)m->node, msvc_slot_name(k),
					    sec(ms.time_ns[k]));
			}
		}
	}
	{
		struct msvc_stats ms = { 0 };
		static const char *const fam[5][2] = {
			{ "shoal_meta_log_writes_total",
			  "Durable writes of the groups' shared Raft log (each a batch of every "
			  "group's records)." },
			{ "shoal_meta_log_records_total", "Records in them." },
			{ "shoal_meta_log_bytes_total", "Their bytes." },
			{ "shoal_meta_log_images_total",
			  "Images of every group's log state into the other half." },
		};

		for (unsigned w = 0; w < m->nws; w++)
			if (m->ws[w]->has_meta) {
				ms.log_instances += m->ws[w]->meta.log_instances;
				ms.log.writes += m->ws[w]->meta.log.writes;
				ms.log.records += m->ws[w]->meta.log.records;
				ms.log.bytes += m->ws[w]->meta.log.bytes;
				ms.log.images += m->ws[w]->meta.log.images;
			}
		family(t, "shoal_meta_log_instances", "gauge",
		       "Metadata groups whose Raft log this node keeps (serving or not).");
		put(t, "shoal_meta_log_instances{node=\"%llu\"} %u\n", (unsigned long long)m->node,
		    ms.log_instances);
		for (unsigned f = 0; f < 4; f++) {
			uint64_t v = f == 0   ? ms.log.writes
				     : f == 1 ? ms.log.records
				     : f == 2 ? ms.log.bytes
					      : ms.log.images;

			family(t, fam[f][0], "counter", fam[f][1]);
			put(t, "%s{node=\"%llu\"} %llu\n", fam[f][0], (unsigned long long)m->node,
			    (unsigned long long)v);
		}
	}
	heal_families(m);
	family(t, "shoal_meta_groups_serving", "gauge",
	       "Metadata groups here that serve requests (state loaded, leader known).");
	put(t, "shoal_meta_groups_serving{node=\"%llu\"} %u\n", (unsigned long long)m->node, ready);
}

static void
cluster_families(struct mctx *m, struct cluster *cl, const struct admin_node *self)
{
	const struct cfg *c = cluster_cfg(cl);
	unsigned long long node = (unsigned long long)m->node;
	struct mtext *t = &m->t;
	struct cluster_info ci;
	unsigned up = 0, down = 0;

	cluster_info(cl, &ci);
	for (uint32_t i = 0; i < c->nnodes; i++)
		c->nodes[i].state == CFG_UP ? up++ : down++;
	family(t, "shoal_build_info", "gauge", "This node's version and mode (value 1).");
	put(t, "shoal_build_info{node=\"%llu\",version=\"%s\",mode=\"%s\",workers=\"%u\"} 1\n",
	    node, SH_VERSION_STRING, self->mode, self->workers);
	family(t, "shoal_start_time_seconds", "gauge", "When this node started (Unix time).");
	put(t, "shoal_start_time_seconds{node=\"%llu\"} %.3f\n", node, sec(self->started_ns));
	family(t, "shoal_admin_unauthorized_total", "counter",
	       "Admin API requests refused (401) for want of a valid token.");
	put(t, "shoal_admin_unauthorized_total{node=\"%llu\"} %llu\n", node,
	    (unsigned long long)(self->http ? admin_http_refused(self->http) : 0));
	family(t, "shoal_config_epoch", "gauge", "Configuration epoch seen by this node.");
	put(t, "shoal_config_epoch{node=\"%llu\"} %llu\n", node, (unsigned long long)c->epoch);
	family(t, "shoal_nodes", "gauge", "Nodes in the cluster by state.");
	put(t, "shoal_nodes{node=\"%llu\",state=\"up\"} %u\n", node, up);
	put(t, "shoal_nodes{node=\"%llu\",state=\"down\"} %u\n", node, down);
	family(t, "shoal_drives", "gauge", "Drives in the cluster.");
	put(t, "shoal_drives{node=\"%llu\"} %u\n", node, c->ndrives);
	family(t, "shoal_filesystems", "gauge", "Filesystems.");
	put(t, "shoal_filesystems{node=\"%llu\"} %u\n", node, c->nfs);
	family(t, "shoal_config_leader", "gauge", "1 if this node leads the configuration group.");
	put(t, "shoal_config_leader{node=\"%llu\"} %d\n", node, ci.leader == self->id);
	family(t, "shoal_config_raft_term", "gauge", "Raft term of the configuration group.");
	put(t, "shoal_config_raft_term{node=\"%llu\"} %llu\n", node, (unsigned long long)ci.term);
	family(t, "shoal_config_raft_commit_index", "gauge",
	       "Raft commit index of the configuration group.");
	put(t, "shoal_config_raft_commit_index{node=\"%llu\"} %llu\n", node,
	    (unsigned long long)ci.commit);
}

void
admin_fs_usage(const struct msvc_group_info *g, unsigned n, const struct cfg_fs *f,
	       struct usage_sum *out)
{
	bool clone = !cfg_fs_own(f);

	for (unsigned i = 0; i < n; i++) {
		if (g[i].fs != (clone ? f->origin : f->id) || !g[i].ready)
			continue;
		for (unsigned k = 0; clone && k < g[i].nclones; k++)
			if (g[i].clone_branch[k] == f->branch) {
				out->u.mapped += g[i].clone_mapped[k];
				out->own += g[i].clone_only[k];
			}
		if (clone)
			continue;
		out->u.mapped += g[i].usage.mapped;
		out->u.data += g[i].usage.data;
		out->u.phys += g[i].usage.phys;
		out->u.unique += g[i].usage.unique;
		out->held += g[i].snap_held;
	}
}

/* What each filesystem's files use, from the groups this node leads. */
static void
usage_families(struct mctx *m, const struct cfg *c)
{
	static const char *const fam[6][2] = {
		{ "shoal_fs_logical_bytes",
		  "File data a filesystem's files map (holes and inline bytes not counted), in "
		  "the buckets this node leads (sum over nodes: the filesystem's)." },
		{ "shoal_fs_stored_bytes",
		  "Data bytes of the stripes those files refer to: after compression, before "
		  "parity (sum over nodes)." },
		{ "shoal_fs_physical_bytes",
		  "Data and parity bytes of those stripes (sum over nodes)." },
		{ "shoal_fs_unique_bytes",
		  "Of the logical bytes, those stored once: all but what dedup shares (sum over "
		  "nodes; logical / unique: the dedup ratio)." },
		{ "shoal_fs_snapshot_bytes",
		  "File bytes only snapshots hold, no longer mapped by the live filesystem (sum "
		  "over nodes; summed every 10 s while it has snapshots)." },
		{ "shoal_fs_clone_own_bytes",
		  "File bytes a writable clone alone reads: what deleting it frees, before "
		  "compression, dedup and parity (sum over nodes; summed every 10 s; 0 for a "
		  "filesystem that is not a clone, whose logical bytes are those its own files "
		  "map)." },
	};
	struct mtext *t = &m->t;

	for (unsigned k = 0; k < SH_ARRAY_SIZE(fam); k++) {
		family(t, fam[k][0], "gauge", fam[k][1]);
		for (uint32_t i = 0; i < c->nfs; i++) {
			struct usage_sum s = { 0 };
			uint64_t v[6];

			for (unsigned w = 0; w < m->nws; w++)
				admin_fs_usage(m->ws[w]->groups, m->ws[w]->ngroups, &c->fs[i], &s);
			v[0] = s.u.mapped;
			v[1] = s.u.data;
			v[2] = s.u.phys;
			v[3] = s.u.unique;
			v[4] = s.held;
			v[5] = s.own;
			put(t, "%s{node=\"%llu\",fs=\"%s\"} %llu\n", fam[k][0],
			    (unsigned long long)m->node, c->fs[i].name, (unsigned long long)v[k]);
		}
	}
}

void
admin_metrics_reply(struct cluster *cl, const struct admin_node *self,
		    const struct admin_stats *const *ws, unsigned nws, struct admin_req *req)
{
	struct mctx m = { .node = self->id, .ws = ws, .nws = nws };

	cluster_families(&m, cl, self);
	meta_families(&m);
	usage_families(&m, cluster_cfg(cl));
	rpc_families(&m);
	net_families(&m);
	peer_families(&m);
	target_families(&m);
	if (m.t.oom) {
		admin_reply(req, 500, "text/plain", "out of memory\n", 14);
	} else {
		admin_reply(req, 200, "text/plain; version=0.0.4; charset=utf-8", m.t.p, m.t.len);
	}
	sh_free(m.t.p);
}
