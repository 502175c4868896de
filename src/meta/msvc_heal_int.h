/* SPDX-License-Identifier: Apache-2.0 */
/* Self-healing's insides, shared by msvc_heal.c (passes and jobs) and msvc_heal_fill.c. */
#ifndef SH_META_MSVC_HEAL_INT_H
#define SH_META_MSVC_HEAL_INT_H

#include "../data/place.h"
#include "msvc_int.h"

#define TICK_NS	    (1000ull * 1000 * 1000)
#define CALL_NS	    (10ull * 1000 * 1000 * 1000)
#define JOBS_MAX    8	 /* stripes being healed at once, per filesystem here */
#define CANDS_MAX   1024 /* stripes planned by one pass (the most endangered kept) */
#define CLEAN_NS    (30ull * 1000 * 1000 * 1000) /* a pass this often when all is well */
#define WAITING_NS  (5ull * 1000 * 1000 * 1000)	 /* ... when stripes wait for nodes down */
#define WRITTEN_NS  (2ull * 1000 * 1000 * 1000)	 /* ... when stripes were written since */
#define REPAIRS_MAX 256 /* corrupt fragments queued to be re-created in place */
#define PEERS_MAX   1024
#define FILL_NS	    (5ull * 1000 * 1000 * 1000) /* targets' fill asked this often */
#define BALANCE_ON  1.05       /* max / mean fill above this: stripes move to even it out */
#define BALANCE_OFF 1.02       /* ... until it is below this */
#define BUSY_BYTES  (1u << 20) /* clients moved more than this in a tick: not idle */
#define FULL_NS	    (15ull * 1000 * 1000 * 1000) /* a target out of space takes no heal writes */
#define FULLS_MAX   64 /* targets remembered as out of space (the oldest forgotten first) */

struct hcand {
	uint16_t bucket;
	uint8_t missing; /* fragments down or lost: the sort key */
	bool balance;	 /* a move to even the targets' fill out, planned: */
	uint32_t make;	 /* the fragments that move */
	uint64_t to[META_FRAGS_MAX];
	struct meta_extent loc;
};

/* What a target holds, as its last STORE_STAT said; what a pass moves off and onto it. */
struct hfill {
	uint64_t target, live, capacity;
	int64_t out, in; /* bytes this leader's pass may still move off it, onto it */
};

struct hjob;

struct hcall {
	struct hjob *j;
	struct net_call *h;
	unsigned idx;
	bool put;
};

struct hjob {
	struct sh_list link; /* in heal->jobs */
	struct mfs *fs;
	uint16_t bucket;
	struct meta_extent loc;	     /* the stripe as its record said */
	uint64_t to[META_FRAGS_MAX]; /* where each fragment goes (loc's for those kept) */
	uint32_t make;		     /* fragments written to their new place */
	uint32_t cand;		     /* fragments that may be read (their targets up) */
	uint32_t tried, got;	     /* reads started, reads done */
	unsigned reading, pending;   /* reads in flight; writes in flight */
	bool reprotect;		     /* moves of fragments that are still there */
	bool repair;		     /* a corrupt fragment re-created where it is */
	bool copy;		     /* the moving fragments are read as they are, not decoded */
	bool balance;		     /* ... to even the fill out */
	bool cancelled;
	int status;
	uint8_t *frags[META_FRAGS_MAX];
	struct hcall calls[META_FRAGS_MAX];
};

struct hrepair {
	uint16_t bucket;
	uint32_t idx;
	uint64_t stripe, target;
};

struct fround;

/* A target that answered a heal write with -ENOSPC, and until when it is not planned onto. */
struct hfull {
	uint64_t target, until; /* (env_now) */
};

struct mheal {
	struct mfs *fs;
	struct hrepair rep[REPAIRS_MAX]; /* corrupt fragments reported, oldest first */
	unsigned nrep;
	struct env_timer tick;
	struct sh_list jobs;
	unsigned njobs;
	struct hcand *cand;	      /* CANDS_MAX, sorted most endangered first */
	unsigned ncand, next, last;   /* last: the one cand_add put in */
	uint64_t pass_epoch, pass_at; /* the configuration and time of the last pass */
	bool pass_work, pass_waiting; /* what it found: work to do, stripes waiting */
	uint64_t client, client_at;   /* bytes moved for clients here, at the last sample, when */
	bool idle;		      /* the last second's sample saw no client traffic */
	uint64_t cap, spent;	      /* bytes jobs may move per second (0: any), and did */
	struct hfill *fill;	      /* every target's, as last asked (fill_at), by target */
	unsigned nfill;
	unsigned *take, ntake; /* the fills a pass's budgets let take bytes (indexes) */
	uint64_t fill_at;
	bool filling;	       /* a round of STORE_STATs in flight */
	struct fround *fround; /* (that round) */
	bool balancing;	       /* the fill is uneven: stripes move to where placement puts them */
	double fill_mean;      /* live / capacity, over the targets up */
	uint64_t mine;	       /* bytes of the stripes led here, as the last pass counted them */
	uint64_t frag_seen;    /* the largest fragment a balance pass looked at */
	unsigned bal_jobs;     /* balance moves in flight */
	uint64_t bal_end;      /* when the last one ended (env_now) */
	uint64_t writes;       /* its stripe-mapping commands at the last pass */
	uint64_t led;	       /* which groups served here at the last pass (a hash) */
	unsigned lost;	       /* targets lost at the last pass */
	uint64_t bytes_at, rate_at; /* rebuilt bytes at the rate's last sample, and when */
	struct hfull full[FULLS_MAX];
	unsigned nfull;
	struct msvc_heal_stats st;
};

struct plan {
	const struct cfg *c;
	struct place_target *t;
	unsigned nt;
	uint64_t now;
};

/*
 * msvc_heal_fill.c: ask every target how full it is (a round, answered into
 * h->fill; while the fill is uneven it sets the budgets of the moves that
 * even it out); plan the moves of a stripe within them; balance moves
 * planned and not started yet.
 */
void heal_fill_ask(struct mheal *h, const struct cfg *c);
/*
 * The budgets from h->fill: each target's surplus over the mean fill to
 * move off it, each one's shortfall onto it, this leader's part of them
 * (h->mine of all the targets hold). A part under a fragment is one with
 * probability part / fragment: u, uniform in [0, 1), is the round's draw.
 */
void heal_balance_budgets(struct mheal *h, double u);
/* The fullest of the n targets' fill (live / capacity), *mean: theirs (targets of capacity 0 not
 * counted). */
double heal_fill_max(const struct hfill *f, unsigned n, double *mean);
int heal_plan_balance(struct mheal *h, const struct plan *pl, const struct meta_extent *loc,
		      uint32_t *make, uint64_t *to);
bool heal_balance_queued(const struct mheal *h);
/* The filesystem closes: the round in flight ends now. */
void heal_fill_cancel(struct mheal *h);
/* target answered a heal write with -ENOSPC: no more are planned onto it for FULL_NS. */
void heal_mark_full(struct mheal *h, uint64_t target);
/*
 * A pass's targets (place_targets), sorted by id, those out of space lately
 * weighing 0 (never a destination); the one of id (NULL: not in the
 * configuration).
 */
int heal_plan_targets(struct mheal *h, struct plan *pl);
const struct place_target *heal_plan_target(const struct plan *pl, uint64_t id);

#endif /* SH_META_MSVC_HEAL_INT_H */
