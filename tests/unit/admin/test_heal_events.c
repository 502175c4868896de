// SPDX-License-Identifier: Apache-2.0
/* Self-healing's events from the cluster's heal views (src/admin/heal_events.h). */
#include <stdio.h>
#include <string.h>

#include "../../../src/admin/heal_events.h"
#include "../../../src/base/clock.h"
#include "../../lib/test.h"

static struct heal_view
view(const char *state, uint64_t pending, uint64_t draining, uint64_t unreadable)
{
	struct heal_view v = { .pending_bytes = pending,
			       .draining = draining,
			       .unreadable = unreadable,
			       .targets_lost = pending ? 1 : 0,
			       .eta_s = -1 };

	snprintf(v.state, sizeof(v.state), "%s", state);
	return v;
}

static unsigned
step(struct heal_events *w, struct heal_view v, uint64_t s, char out[][CFG_MSG_MAX])
{
	memset(out, 0, HEAL_EVENTS_MAX * CFG_MSG_MAX);
	return heal_events_step(w, &v, s * SH_NSEC_PER_SEC, out);
}

/* A rebuild: started, its quarters, finished once; a "checking" view ends nothing. */
TEST(heal_events_rebuild_start_quarters_end)
{
	struct heal_events w = { 0 };
	char out[HEAL_EVENTS_MAX][CFG_MSG_MAX];
	struct heal_view v;

	SH_ASSERT_EQ(step(&w, view("full", 0, 0, 0), 0, out), 0u); /* all well: nothing */
	SH_ASSERT_EQ(step(&w, view("rebuilding", 1000 << 20, 0, 0), 10, out), 1u);
	SH_ASSERT_STREQ(out[0], "rebuild started: 1000.0 MiB of fragments on 1 lost target to "
				"re-create");
	/* more found as passes go on: the total grows, nothing said */
	SH_ASSERT_EQ(step(&w, view("rebuilding", 1200 << 20, 0, 0), 12, out), 0u);
	SH_ASSERT_EQ(step(&w, view("rebuilding", 1000 << 20, 0, 0), 14, out), 0u); /* 16% */
	v = view("rebuilding", 600 << 20, 0, 0);
	v.eta_s = 20;
	SH_ASSERT_EQ(step(&w, v, 16, out), 1u); /* 50%: one event, the quarters skipped */
	SH_ASSERT_STREQ(out[0], "rebuild 50% done: 600.0 MiB of fragments to go, about 20 s left");
	SH_ASSERT_EQ(step(&w, view("rebuilding", 590 << 20, 0, 0), 17, out), 0u);
	SH_ASSERT_EQ(step(&w, view("rebuilding", 200 << 20, 0, 0), 18, out), 1u); /* 83% */
	SH_ASSERT(strstr(out[0], "rebuild 83% done") != NULL);
	SH_ASSERT_EQ(step(&w, view("checking", 0, 0, 0), 19, out), 0u); /* not sure yet */
	SH_ASSERT_EQ(step(&w, view("full", 0, 0, 0), 20, out), 1u);
	SH_ASSERT_STREQ(out[0], "rebuild finished in 10 s: 1.2 GiB re-created; state full");
	SH_ASSERT_EQ(step(&w, view("full", 0, 0, 0), 22, out), 0u);
	/* a second one starts afresh */
	SH_ASSERT_EQ(step(&w, view("rebuilding", 4096, 0, 0), 30, out), 1u);
	SH_ASSERT(strstr(out[0], "rebuild started: 4.0 KiB") != NULL);
}

/* What was under way when the watcher first looked is "under way", not "started". */
TEST(heal_events_drain_and_unreadable)
{
	struct heal_events w = { 0 };
	char out[HEAL_EVENTS_MAX][CFG_MSG_MAX];

	SH_ASSERT_EQ(step(&w, view("draining", 0, 40, 0), 0, out), 1u);
	SH_ASSERT_STREQ(out[0], "drain under way: 40 stripes have fragments on draining drives");
	SH_ASSERT_EQ(step(&w, view("draining", 0, 50, 0), 3, out), 0u);
	SH_ASSERT_EQ(step(&w, view("checking", 0, 0, 0), 5, out), 0u);
	SH_ASSERT_EQ(step(&w, view("rebalancing", 0, 0, 0), 7, out), 1u);
	SH_ASSERT_STREQ(out[0], "drain finished in 7 s: 50 stripes moved off the draining drives; "
				"state rebalancing");
	/* stripes unreadable, a rebuild at once: both said in one step */
	SH_ASSERT_EQ(step(&w, view("data-loss", 1 << 20, 0, 3), 10, out), 2u);
	SH_ASSERT(strstr(out[0], "3 stripes unreadable") != NULL);
	SH_ASSERT(strstr(out[1], "rebuild started") != NULL);
	SH_ASSERT_EQ(step(&w, view("data-loss", 1 << 20, 0, 3), 12, out), 0u);
	SH_ASSERT_EQ(step(&w, view("rebuilding", 1 << 19, 0, 0), 14, out), 2u);
	SH_ASSERT_STREQ(out[0], "every stripe is readable again; state rebuilding");
	SH_ASSERT(strstr(out[1], "rebuild 50% done") != NULL);
	SH_ASSERT_EQ(step(&w, view("full", 0, 0, 0), 15, out), 1u);
	SH_ASSERT(strstr(out[0], "rebuild finished in 5 s") != NULL);
}

/* A rebuild that began and ended between two views is said once, finished. */
TEST(heal_events_rebuild_between_two_views)
{
	struct heal_events w = { 0 };
	char out[HEAL_EVENTS_MAX][CFG_MSG_MAX];
	struct heal_view v = view("full", 0, 0, 0);

	v.rebuilt_frags = 10; /* from before the watcher looked: not said */
	SH_ASSERT_EQ(step(&w, v, 0, out), 0u);
	v.rebuilt_frags = 40;
	snprintf(v.state, sizeof(v.state), "checking"); /* a node's sum missing: wait */
	SH_ASSERT_EQ(step(&w, v, 2, out), 0u);
	snprintf(v.state, sizeof(v.state), "full");
	SH_ASSERT_EQ(step(&w, v, 4, out), 1u);
	SH_ASSERT_STREQ(out[0], "rebuild finished within 4 s: 30 fragments re-created; state full");
	SH_ASSERT_EQ(step(&w, v, 6, out), 0u);
	v.rebuilt_frags = 5; /* a node restarted: its count from 0 */
	SH_ASSERT_EQ(step(&w, v, 8, out), 0u);
	v.rebuilt_frags = 6;
	SH_ASSERT_EQ(step(&w, v, 10, out), 1u);
	SH_ASSERT(strstr(out[0], "within 2 s: 1 fragments") != NULL);
}

/*
 * A drive set draining whose stripes all moved between two views: the drain is said,
 * started and finished, once; a drive drained before the watcher looked says nothing.
 */
TEST(heal_events_drain_between_two_views)
{
	struct heal_events w = { 0 };
	char out[HEAL_EVENTS_MAX][CFG_MSG_MAX];
	struct heal_view v = view("full", 0, 0, 0);

	v.drives_draining = 1; /* drained, not yet removed, when the watcher first looks */
	SH_ASSERT_EQ(step(&w, v, 0, out), 0u);
	SH_ASSERT_EQ(step(&w, v, 2, out), 0u);
	v.drives_draining = 2; /* another set draining, drained within the next 2 s */
	SH_ASSERT_EQ(step(&w, v, 4, out), 1u);
	SH_ASSERT_STREQ(out[0], "drain started: 0 stripes have fragments on draining drives");
	SH_ASSERT_EQ(step(&w, v, 6, out), 1u);
	SH_ASSERT_STREQ(out[0], "drain finished within 2 s: nothing left on the draining drives; "
				"state full");
	SH_ASSERT_EQ(step(&w, v, 8, out), 0u); /* said once */
	v.drives_draining = 0;		       /* both removed */
	SH_ASSERT_EQ(step(&w, v, 10, out), 0u);
	v.drives_draining = 1; /* a third one: said again */
	v.draining = 7;
	SH_ASSERT_EQ(step(&w, v, 12, out), 1u);
	SH_ASSERT(strstr(out[0], "drain started: 7 stripes") != NULL);
	v.draining = 0;
	SH_ASSERT_EQ(step(&w, v, 14, out), 1u);
	SH_ASSERT(strstr(out[0], "drain finished in 2 s: 7 stripes moved") != NULL);
}
