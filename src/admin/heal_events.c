// SPDX-License-Identifier: Apache-2.0
/* Self-healing's events from its views (heal_events.h). */
#include "heal_events.h"

#include <stdio.h>
#include <string.h>

#include "../base/clock.h"

/* "1.5 GiB" */
static const char *
size_str(uint64_t b, char *buf, size_t len)
{
	static const char *const u[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
	double v = (double)b;
	unsigned i = 0;

	while (v >= 1024 && i + 1 < sizeof(u) / sizeof(u[0])) {
		v /= 1024;
		i++;
	}
	snprintf(buf, len, i == 0 ? "%.0f %s" : "%.1f %s", v, u[i]);
	return buf;
}

static unsigned
secs(uint64_t from, uint64_t to)
{
	return to > from ? (unsigned)((to - from + SH_NSEC_PER_SEC / 2) / SH_NSEC_PER_SEC) : 0;
}

static unsigned
rebuild(struct heal_events *w, const struct heal_view *v, uint64_t now, char out[][CFG_MSG_MAX])
{
	char a[32], b[48];
	unsigned n = 0, pct;

	if (!w->rebuilding && v->pending_bytes > 0) {
		w->rebuilding = true;
		w->rebuild_at = now;
		w->total = v->pending_bytes;
		w->next_pct = 25;
		snprintf(out[n++], CFG_MSG_MAX,
			 "rebuild %s: %s of fragments on %llu lost target%s to re-create",
			 w->primed ? "started" : "under way",
			 size_str(v->pending_bytes, a, sizeof(a)),
			 (unsigned long long)v->targets_lost, v->targets_lost == 1 ? "" : "s");
		return n;
	}
	if (!w->rebuilding) {
		if (w->primed && v->rebuilt_frags > w->rebuilt_frags &&
		    strcmp(v->state, "checking") != 0)
			snprintf(
			    out[n++], CFG_MSG_MAX,
			    "rebuild finished within %u s: %llu fragments re-created; state %s",
			    secs(w->seen_at, now),
			    (unsigned long long)(v->rebuilt_frags - w->rebuilt_frags), v->state);
		return n;
	}
	if (v->pending_bytes > w->total)
		w->total = v->pending_bytes; /* more found as the passes go over the buckets */
	if (v->pending_bytes == 0 && strcmp(v->state, "checking") != 0) {
		w->rebuilding = false;
		snprintf(out[n++], CFG_MSG_MAX, "rebuild finished in %u s: %s re-created; state %s",
			 secs(w->rebuild_at, now), size_str(w->total, a, sizeof(a)), v->state);
		return n;
	}
	pct = (unsigned)((w->total - v->pending_bytes) * 100 / w->total);
	if (pct >= w->next_pct && pct < 100) {
		w->next_pct = (pct / 25 + 1) * 25;
		if (v->eta_s >= 0)
			snprintf(b, sizeof(b), ", about %lld s left", (long long)v->eta_s);
		else
			b[0] = '\0';
		snprintf(out[n++], CFG_MSG_MAX, "rebuild %u%% done: %s of fragments to go%s", pct,
			 size_str(v->pending_bytes, a, sizeof(a)), b);
	}
	return n;
}

/*
 * A drain is under way while stripes have fragments on draining drives,
 * and starts too when a drive is set draining: one whose stripes all
 * moved between two views is still said, started and finished.
 */
static unsigned
drain(struct heal_events *w, const struct heal_view *v, uint64_t now, char out[][CFG_MSG_MAX])
{
	bool more = v->drives_draining > w->drain_drives; /* a drive set draining since */

	if (v->drives_draining < w->drain_drives)
		w->drain_drives = v->drives_draining; /* removed */
	if (!w->primed && v->draining == 0) {
		w->drain_drives = v->drives_draining; /* drained before the watcher looked */
		return 0;
	}
	if (!w->draining && (v->draining > 0 || more)) {
		w->draining = true;
		w->drain_at = now;
		w->drain_total = v->draining;
		snprintf(out[0], CFG_MSG_MAX,
			 "drain %s: %llu stripes have fragments on draining drives",
			 w->primed ? "started" : "under way", (unsigned long long)v->draining);
		return 1;
	}
	if (!w->draining)
		return 0;
	if (v->draining > w->drain_total)
		w->drain_total = v->draining;
	if (v->draining > 0 || strcmp(v->state, "checking") == 0)
		return 0;
	w->draining = false;
	w->drain_drives = v->drives_draining;
	if (w->drain_total == 0)
		snprintf(
		    out[0], CFG_MSG_MAX,
		    "drain finished within %u s: nothing left on the draining drives; state %s",
		    secs(w->drain_at, now), v->state);
	else
		snprintf(out[0], CFG_MSG_MAX,
			 "drain finished in %u s: %llu stripes moved off the draining drives; "
			 "state %s",
			 secs(w->drain_at, now), (unsigned long long)w->drain_total, v->state);
	return 1;
}

static unsigned
unreadable(struct heal_events *w, const struct heal_view *v, char out[][CFG_MSG_MAX])
{
	if (!w->unreadable && v->unreadable > 0) {
		w->unreadable = true;
		snprintf(out[0], CFG_MSG_MAX,
			 "%llu stripes unreadable: more of their fragments are missing than their "
			 "parity (nodes down? shoal rebuild status)",
			 (unsigned long long)v->unreadable);
		return 1;
	}
	if (w->unreadable && v->unreadable == 0 && strcmp(v->state, "checking") != 0) {
		w->unreadable = false;
		snprintf(out[0], CFG_MSG_MAX, "every stripe is readable again; state %s", v->state);
		return 1;
	}
	return 0;
}

unsigned
heal_events_step(struct heal_events *w, const struct heal_view *v, uint64_t now,
		 char out[][CFG_MSG_MAX])
{
	unsigned n = 0;

	n += unreadable(w, v, out + n);
	n += rebuild(w, v, now, out + n);
	n += drain(w, v, now, out + n);
	w->primed = true;
	if (strcmp(v->state, "checking") != 0) {     /* (while checking, sums may miss a node) */
		w->rebuilt_frags = v->rebuilt_frags; /* a node restarted counts from 0 again */
		w->seen_at = now;
	}
	return n;
}
