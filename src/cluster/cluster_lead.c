// SPDX-License-Identifier: Apache-2.0
/*
 * The configuration group leader's duties (cluster.h): failure detection
 * from heartbeats, node states proposed, voters reconciled with the
 * configuration, metadata groups of dead nodes replaced.
 */
#include <string.h>

#include "cluster_int.h"

SH_LOG_FACILITY("cluster");

/* Propose state for t's node if it is not the one the configuration has. */
static void
set_state(struct cluster *cl, struct track *t, uint8_t have, uint8_t state)
{
	struct cfg_cmd cmd = { .op = CFG_OP_NODE_STATE, .id = t->id, .state = state };
	struct sub *s;

	if (have == state)
		return;
	s = cluster_sub_new(cl, &cmd);
	if (s == NULL)
		return;
	s->internal = true;
	t->proposing = true;
	sh_log_info("node %llu %s", (unsigned long long)t->id,
		    state == CFG_DOWN ? "is silent: marking it down"
		    : state == CFG_UP ? "is back: marking it up"
				      : "says its data network is down: marking it so");
}

static void
on_change(void *arg, int status, void *result)
{
	struct cluster *cl = arg;

	(void)result;
	cl->changing = false;
	if (status != 0)
		sh_log_warn("config membership change: %s", sh_strerror(status));
}

/* Whether id is a voter of the configuration group. */
static bool
is_voter(const struct cluster *cl, uint64_t id)
{
	struct rgroup_member m;

	return rgroup_find(cl->rg, id, &m) && m.role == RGROUP_VOTER;
}

static bool
in_cfg(const struct cluster *cl, uint64_t id)
{
	return cfg_node_find(cl->cfg, id) != NULL;
}

/* Keep min(5, nodes) voters: add nodes that are up, promote them, drop removed ones. */
static void
reconcile(struct cluster *cl)
{
	unsigned n = rgroup_nmembers(cl->rg), voters = 0, want;
	struct rgroup_member m;
	int err = 0;

	if (cl->changing || !cl->cfg->created)
		return;
	for (unsigned i = 0; i < n; i++) {
		m = rgroup_member(cl->rg, i);
		if (m.id != cl->p.node_id && !in_cfg(cl, m.id)) {
			sh_log_info("config group: removing node %llu", (unsigned long long)m.id);
			err = rgroup_remove(cl->rg, m.id, on_change, cl);
			goto out;
		}
		if (m.role == RGROUP_VOTER)
			voters++;
	}
	want = cl->cfg->nnodes < VOTERS_MAX ? cl->cfg->nnodes : VOTERS_MAX;
	if (voters >= want) {
		/*
		 * A voter down for longer than replace_ns while a node that is
		 * up is not a voter: demote it to standby; the next rounds make
		 * the up node a voter, so the group again survives two failures.
		 */
		uint64_t now = env_realtime(cl->env), down = 0;
		bool spare_up = false;

		for (unsigned i = 0; i < n; i++) {
			const struct cfg_node *cn;

			m = rgroup_member(cl->rg, i);
			cn = cfg_node_find(cl->cfg, m.id);
			if (cn == NULL)
				continue;
			if (m.role == RGROUP_VOTER && cn->state == CFG_DOWN &&
			    m.id != cl->p.node_id && now - cn->since > cl->p.replace_ns)
				down = m.id;
		}
		for (uint32_t i = 0; i < cl->cfg->nnodes && !spare_up; i++) {
			const struct cfg_node *cn = &cl->cfg->nodes[i];

			spare_up = !is_voter(cl, cn->id) && cn->state == CFG_UP;
		}
		if (down == 0 || !spare_up)
			return;
		sh_log_info("config group: node %llu has been down for long: a node that is up "
			    "takes its vote",
			    (unsigned long long)down);
		/* a standby: the log is still sent to it, so when it is back it learns the
		 * change (a spare would not, and would go on waiting for an election) */
		err = rgroup_assign(cl->rg, down, RGROUP_STANDBY, on_change, cl);
		goto out;
	}
	for (unsigned i = 0; i < n; i++) {
		const struct cfg_node *cn;

		m = rgroup_member(cl->rg, i);
		cn = cfg_node_find(cl->cfg, m.id);
		if (m.role != RGROUP_VOTER && cn != NULL && cn->state == CFG_UP) {
			sh_log_info("config group: node %llu becomes a voter",
				    (unsigned long long)m.id);
			err = rgroup_assign(cl->rg, m.id, RGROUP_VOTER, on_change, cl);
			goto out;
		}
	}
	for (uint32_t i = 0; i < cl->cfg->nnodes; i++) {
		const struct cfg_node *cn = &cl->cfg->nodes[i];

		if (rgroup_find(cl->rg, cn->id, &m) || cn->state != CFG_UP)
			continue;
		sh_log_info("config group: adding node %llu (%s)", (unsigned long long)cn->id,
			    cn->mgmt);
		err = rgroup_add(cl->rg, cn->id, cn->mgmt, on_change, cl);
		goto out;
	}
	return;
out:
	if (err == 0)
		cl->changing = true;
	else
		sh_log_debug("config membership change refused: %s", sh_strerror(err));
}

/* A node down for long: another takes its place in a metadata group (one at a time). */
static void
replace_members(struct cluster *cl)
{
	struct cfg_cmd cmd = { .op = CFG_OP_MGROUP_REPLACE };
	struct sub *s;
	int rc;

	if (cl->replacing)
		return;
	rc = cfg_mgroup_replacement(cl->cfg, env_realtime(cl->env), cl->p.meta_replace_ns,
				    &cmd.group, &cmd.id, &cmd.node2);
	if (rc == -ENOSPC && env_now(cl->env) >= cl->stuck_warned) {
		/* said every 10 minutes: the groups run one member short meanwhile */
		cl->stuck_warned = env_now(cl->env) + 600ull * 1000 * 1000 * 1000;
		sh_log_warn("a node has been down for long, but no node outside its metadata "
			    "groups is up to take its place: add a node (docs/metadata.md)");
	}
	if (rc < 0)
		return;
	s = cluster_sub_new(cl, &cmd);
	if (s == NULL)
		return;
	s->internal = true;
	cl->replacing = true;
	sh_log_info("node %llu %s: node %llu takes its place in metadata group %u",
		    (unsigned long long)cmd.id,
		    cfg_node_leaving(cl->cfg, cmd.id) ? "leaves the cluster"
						      : "has been down for long",
		    (unsigned long long)cmd.node2, cmd.group);
}

void
cluster_lead(struct cluster *cl)
{
	uint64_t now = env_now(cl->env);
	struct sh_enc body;

	if (!cl->was_leader) {
		/* new leader: judge nodes from now on, or from their last Raft message */
		cl->was_leader = true;
		cl->ntrack = 0;
		sh_log_info("this node leads the configuration (term %llu, epoch %llu)",
			    (unsigned long long)rgroup_term(cl->rg),
			    (unsigned long long)cl->cfg->epoch);
		for (uint32_t i = 0; i < cl->cfg->nnodes; i++) {
			struct track *t = cluster_track(cl, cl->cfg->nodes[i].id);
			uint64_t heard = rnet_last_heard(cl->rn, t->id);

			if (heard)
				t->seen = heard;
		}
	}
	sh_enc_init(&body);
	for (uint32_t i = 0; i < cl->cfg->nnodes; i++) {
		const struct cfg_node *n = &cl->cfg->nodes[i];
		struct track *t = cluster_track(cl, n->id);
		uint64_t heard;
		bool silent;

		if (t == NULL)
			continue;
		heard = rnet_last_heard(cl->rn, n->id);
		if (n->id == cl->p.node_id) {
			t->seen = now;
			t->data_down = cl->p.data_down != NULL && cl->p.data_down(cl->p.arg);
		} else if (heard > t->seen) {
			t->seen = heard;
		}
		silent = now - t->seen > cl->p.down_ns;
		if (!t->proposing)
			set_state(cl, t, n->state,
				  silent	 ? CFG_DOWN
				  : t->data_down ? CFG_DATA_DOWN
						 : CFG_UP);
		if (n->id != cl->p.node_id && t->acked < cl->cfg->epoch &&
		    (t->pushed_epoch < cl->cfg->epoch || now - t->pushed >= PUSH_RETRY_NS)) {
			if (body.len == 0) {
				sh_enc_u64(&body, cl->p.node_id);
				cfg_encode(&body, cl->cfg);
			}
			cluster_push(cl, t, &body);
		}
	}
	sh_enc_fini(&body);
	reconcile(cl);
	replace_members(cl);
}
