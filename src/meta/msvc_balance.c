// SPDX-License-Identifier: Apache-2.0
/*
 * Leader balancing (docs/metadata.md, "Leader balancing"): a node that
 * leads two groups more than another member of one of them hands one
 * over (raft_transfer), one group every few seconds at most. Elections
 * after a restart or a node marked down leave the leaders where the
 * election put them; without this, a node back from a restart leads
 * nothing and the others carry its share of the requests.
 *
 * Each node counts, over the groups it is a member of (of every
 * filesystem), which node leads each, and picks the member that seems to
 * lead fewest. That view is partial (a member also leads groups this node
 * is not in), so before handing over it asks that node how many it leads
 * (NET_OP_META_LEADS) and hands over only if the answer is two fewer than
 * its own: two nodes that each see the other lead nothing do not pass a
 * group back and forth. Nothing moves while a group it is in has no
 * leader (an election in progress).
 */
#include "msvc_int.h"

SH_LOG_FACILITY("meta.balance");

#define BALANCE_TICK_NS (250ull * 1000 * 1000)
/*
 * Before a hand-over, the leases given run out (MP_CACHE_MS) — and more:
 * with 400 ms, hand-overs came sooner after one another and the heal's
 * balance missed its mark in 3 of 20 soak seeds (heal_grow_rebalances_and_
 * drain_empties_a_drive, fill max/mean 1.086 at the end); 1.1 s as before.
 */
#define HAND_WAIT_NS (1100ull * 1000 * 1000)
_Static_assert(HAND_WAIT_NS > MP_CACHE_NS, "a hand-over waits the cache leases out");
#define BALANCE_QUIET_NS (5000ull * 1000 * 1000) /* after a hand-over, or a group changing */
#define HEARD_NS	 (200ull * 1000 * 1000)	 /* a Raft message from the member this recently */

struct count {
	uint64_t node;
	unsigned led;
};

static unsigned *
led_by(struct count *c, unsigned *n, uint64_t node)
{
	for (unsigned i = 0; i < *n; i++)
		if (c[i].node == node)
			return &c[i].led;
	if (*n == CFG_NODES_MAX)
		return NULL;
	c[*n] = (struct count){ .node = node };
	return &c[(*n)++].led;
}

static bool
node_up(const struct cfg *c, uint64_t node)
{
	const struct cfg_node *n = cfg_node_find(c, node);

	return n != NULL && n->state == CFG_UP;
}

/* Who leads what, as this node's groups see it; false while one has no leader. */
static bool
count_leaders(struct msvc *s, struct count *c, unsigned *n)
{
	struct sh_list *pos;

	*n = 0;
	sh_list_for_each (pos, &s->fss) {
		struct mfs *fs = sh_list_entry(pos, struct mfs, link);

		for (uint32_t g = 0; g < fs->ngroups && !fs->closing; g++) {
			unsigned *l;
			uint64_t leader;

			if (fs->groups[g] == NULL)
				continue;
			leader = mgroup_leader(fs->groups[g]);
			if (leader == 0 || (l = led_by(c, n, leader >> 8)) == NULL)
				return false;
			(*l)++;
		}
	}
	return true;
}

struct pick {
	struct mgroup *g;
	uint64_t to;
	unsigned led; /* as this node sees it */
};

/* What a member answered lately (BALANCE_QUIET_NS): better than this node's view of it. */
static unsigned
answered(const struct msvc *s, uint64_t node, unsigned seen)
{
	uint64_t now = env_now(s->env);

	for (unsigned i = 0; i < BALANCE_ANSWERS; i++)
		if (s->answers[i].node == node && now - s->answers[i].at < BALANCE_QUIET_NS)
			return s->answers[i].led > seen ? s->answers[i].led : seen;
	return seen;
}

static void
remember(struct msvc *s, uint64_t node, unsigned led)
{
	unsigned oldest = 0;

	for (unsigned i = 0; i < BALANCE_ANSWERS; i++) {
		if (s->answers[i].node == node) {
			oldest = i;
			break;
		}
		if (s->answers[i].at < s->answers[oldest].at)
			oldest = i;
	}
	s->answers[oldest].node = node;
	s->answers[oldest].led = led;
	s->answers[oldest].at = env_now(s->env);
}

/* Of the groups led here, one whose voter seems to lead at least two fewer (the fewest). */
static void
choose(struct msvc *s, struct count *c, unsigned n, unsigned mine, struct pick *p)
{
	const struct cfg *cfg = mroute_cfg(s->rt);
	struct sh_list *pos;

	sh_list_for_each (pos, &s->fss) {
		struct mfs *fs = sh_list_entry(pos, struct mfs, link);

		for (uint32_t g = 0; g < fs->ngroups && !fs->closing; g++) {
			struct mgroup_info gi;

			if (fs->groups[g] == NULL)
				continue;
			mgroup_info(fs->groups[g], &gi);
			if (!gi.ready)
				continue;
			for (unsigned v = 0; v < gi.nvoters; v++) {
				uint64_t node = gi.voters[v] >> 8;
				unsigned *l = led_by(c, &n, node), led;

				if (gi.voters[v] == s->self || l == NULL || !node_up(cfg, node))
					continue;
				led = answered(s, node, *l);
				if (led + 2 <= mine && (p->g == NULL || led < p->led))
					*p = (struct pick){ .g = fs->groups[g],
							    .to = gi.voters[v],
							    .led = led };
			}
		}
	}
}

/* How many groups this node leads (serves), of every filesystem. */
static unsigned
leading(struct msvc *s)
{
	struct sh_list *pos;
	unsigned n = 0;

	sh_list_for_each (pos, &s->fss) {
		struct mfs *fs = sh_list_entry(pos, struct mfs, link);

		for (uint32_t g = 0; g < fs->ngroups && !fs->closing; g++)
			n += fs->groups[g] != NULL && mgroup_ready(fs->groups[g]);
	}
	return n;
}

static void
on_leads(struct net_req *req, void *arg)
{
	struct msvc *s = arg;

	net_reply(req, s->stopping ? -ESHUTDOWN : (int)leading(s), NULL, 0);
}

/* A question to the chosen member: how many it leads (detached if this service stops). */
struct ask {
	struct msvc *s;
	uint32_t gid; /* the group to hand over (its Raft group id) */
	uint64_t to;
	struct net_call *h;
};

static struct mgroup *
group_by_id(struct msvc *s, uint32_t gid)
{
	struct sh_list *pos;

	sh_list_for_each (pos, &s->fss) {
		struct mfs *fs = sh_list_entry(pos, struct mfs, link);
		uint32_t g = gid & 0xffff;

		if (fs->id == gid >> 16 && !fs->closing && g < fs->ngroups)
			return fs->groups[g];
	}
	return NULL;
}

static void
on_answer(void *arg, int status, const struct net_msg *reply)
{
	struct ask *a = arg;
	struct msvc *s = a->s;
	struct mgroup *g;
	unsigned mine;

	(void)reply;
	if (s == NULL) { /* stopped meanwhile */
		sh_free(a);
		return;
	}
	s->asking = NULL;
	if (status >= 0)
		remember(s, a->to >> 8, (unsigned)status);
	g = group_by_id(s, a->gid);
	mine = leading(s);
	if (status >= 0 && (unsigned)status + 2 <= mine && g != NULL && mgroup_ready(g)) {
		/*
		 * Clients may cache what this leader told them, and the next leader
		 * could not recall it: no more such leases, and the hand-over once
		 * the last one given has run out.
		 */
		mgroup_hold_cache(g, true);
		s->handing = (struct handing){ .gid = a->gid,
					       .to = a->to,
					       .led = status,
					       .at = env_now(s->env) + HAND_WAIT_NS };
		s->balance_quiet = env_now(s->env) + BALANCE_QUIET_NS;
	}
	sh_free(a);
}

/* The hand-over chosen a lease's length ago. */
static void
hand_over(struct msvc *s)
{
	struct mgroup *g = group_by_id(s, s->handing.gid);
	unsigned mine = leading(s);

	s->handing.gid = 0;
	if (g == NULL)
		return;
	/*
	 * Not to a member this node has not heard from lately (cut off since it
	 * answered): a transfer to it stalls the group's commands until it times
	 * out, and its followers then know a leader the clients cannot reach
	 * (tests/sim/meta client_real, seed 1067).
	 */
	if (mgroup_ready(g) && env_now(s->env) - rnet_last_heard(s->rn, s->handing.to) < HEARD_NS &&
	    mgroup_transfer(g, s->handing.to) == 0) {
		sh_log_info("leading %u groups: group %#x goes to node %llu, which leads %d", mine,
			    mgroup_id(g), (unsigned long long)(s->handing.to >> 8), s->handing.led);
		return; /* the cache lease hold ends with the transfer */
	}
	mgroup_hold_cache(g, false);
}

static void
on_tick(struct env_timer *t)
{
	struct msvc *s = t->arg;
	struct count *c;
	struct pick p = { 0 };
	unsigned n, mine;

	if (s->stopping)
		return;
	env_timer_arm_period(&s->balance, BALANCE_TICK_NS);
	if (s->handing.gid != 0 && env_now(s->env) >= s->handing.at)
		hand_over(s);
	if (s->asking != NULL || s->handing.gid != 0)
		return;
	c = sh_calloc(CFG_NODES_MAX, sizeof(*c));
	if (c == NULL)
		return;
	if (!count_leaders(s, c, &n)) {
		s->balance_quiet = env_now(s->env) + BALANCE_QUIET_NS;
		goto out;
	}
	mine = leading(s);
	if (mine < 2 || env_now(s->env) < s->balance_quiet)
		goto out;
	choose(s, c, n, mine, &p);
	if (p.g != NULL) {
		struct ask *a = sh_calloc(1, sizeof(*a));
		struct net_call_opts o = { .timeout_ns = 1000ull * 1000 * 1000, .retries = 0 };

		if (a == NULL)
			goto out;
		*a = (struct ask){ .s = s, .gid = mgroup_id(p.g), .to = p.to };
		s->asking = a;
		if (net_call(s->net, p.to, NET_OP_META_LEADS, NULL, 0, &o, on_answer, a, &a->h) <
		    0) {
			s->asking = NULL;
			sh_free(a);
		}
	}
out:
	sh_free(c);
}

void
msvc_balance_start(struct msvc *s)
{
	env_timer_init(s->env, &s->balance, on_tick, s);
	s->balance_quiet = env_now(s->env) + BALANCE_QUIET_NS;
	env_timer_arm_period(&s->balance, BALANCE_TICK_NS);
	if (net_handle(s->net, NET_OP_META_LEADS, on_leads, s) < 0)
		sh_log_warn("leader balancing: no handler for its question; balancing is off");
}

void
msvc_balance_stop(struct msvc *s)
{
	env_timer_cancel(&s->balance);
	if (s->asking != NULL) {
		struct ask *a = s->asking;

		s->asking = NULL;
		a->s = NULL; /* its callback frees it */
		net_call_cancel(a->h);
	}
}
