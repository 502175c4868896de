/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Events of self-healing (docs/healing.md "Events"): the cluster's heal
 * state as GET /v1/rebuild gives it, seen every few seconds by the
 * configuration's leader, turned into the events an operator reads in
 * `shoal events`: a rebuild started, each quarter of it done, finished;
 * a drain started and finished; stripes unreadable, and readable again.
 * Pure: the caller fetches the views and posts the texts.
 */
#ifndef SH_ADMIN_HEAL_EVENTS_H
#define SH_ADMIN_HEAL_EVENTS_H

#include <stdbool.h>
#include <stdint.h>

#include "../cluster/config.h"

/* The parts of GET /v1/rebuild that events speak of. */
struct heal_view {
	char state[16];		  /* "checking", "rebuilding", "full", ... */
	uint64_t pending_bytes;	  /* fragment bytes on lost targets, to re-create */
	uint64_t draining;	  /* stripes with fragments on draining drives */
	uint64_t drives_draining; /* drives the configuration has draining (drained or not) */
	uint64_t unreadable;	  /* stripes missing more than their parity */
	uint64_t targets_lost;	  /* targets lost now */
	uint64_t rebuilt_frags;	  /* fragments re-created so far (the nodes' counters summed) */
	int64_t eta_s;		  /* -1: not known */
};

struct heal_events {
	bool primed; /* a view seen: what is under way then "started" before it */
	bool rebuilding, draining, unreadable;
	uint64_t rebuild_at, drain_at;	 /* when they started (ns, any clock) */
	uint64_t total;			 /* the most pending bytes seen in this rebuild */
	uint64_t drain_total;		 /* the most draining stripes seen in this drain */
	uint64_t drain_drives;		 /* draining drives whose drain was said finished */
	unsigned next_pct;		 /* the next quarter said of the rebuild */
	uint64_t rebuilt_frags, seen_at; /* at the last view */
};

#define HEAL_EVENTS_MAX 4

/*
 * What changed since the last view v (at now, ns): up to HEAL_EVENTS_MAX
 * texts into out; returns how many. A "checking" view (a node did not
 * answer, a pass has not seen the newest configuration) ends nothing. A
 * rebuild over between two views (nothing pending at either, fragments
 * re-created meanwhile) is said once, finished.
 */
unsigned heal_events_step(struct heal_events *w, const struct heal_view *v, uint64_t now,
			  char out[][CFG_MSG_MAX]);

#endif /* SH_ADMIN_HEAL_EVENTS_H */
