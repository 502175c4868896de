// SPDX-License-Identifier: Apache-2.0
/*
 * The watcher (shoald.h, docs/healing.md "Failing drives" and "Events"):
 * a thread that talks to this node's own admin API, as an operator would.
 * A drive whose write path failed, or whose reads failed WATCH_READ_ERRORS
 * times within WATCH_WINDOW_S, is marked failed (PUT /v1/drives/ID, with
 * the reason): its fragments are rebuilt elsewhere at once, without anyone
 * running `shoal drive fail`. On the configuration's leader, the cluster's
 * heal state (GET /v1/rebuild) is turned into events (POST /v1/events),
 * and the filesystems' snapshot schedules are run (docs/snapshots.md
 * "Schedules"): what is due is worked out from the configuration and the
 * snapshots' names alone, so a new leader goes on where the last one was.
 */
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <shoal/sh_errno.h>

#include "../base/clock.h"
#include "../base/http.h"
#include "shoald.h"

SH_LOG_FACILITY("shoald.watch");

struct seen {
	uint64_t target[WATCH_DRIVES], read_errors[WATCH_DRIVES];
	bool failed[WATCH_DRIVES];
	int open_err[WATCH_DRIVES];
	unsigned n;
};

/*
 * The drives' counters the workers published last (under stats_mu; not
 * through with_stats, whose management-loop part is that loop's own).
 */
static void
collect(struct shoald *d, struct seen *s)
{
	pthread_mutex_lock(&d->stats_mu);
	for (unsigned w = 0; w < d->o.workers && w < SHOALD_WORKERS_MAX; w++) {
		const struct admin_stats *ws = &d->stats[w];

		for (unsigned k = 0; k < ws->ndrives && s->n < WATCH_DRIVES; k++) {
			s->target[s->n] = ws->drives[k].target;
			s->read_errors[s->n] = ws->drives[k].st.read_errors;
			s->failed[s->n] = ws->drives[k].st.failed != 0;
			s->open_err[s->n] = ws->drives[k].open_err;
			s->n++;
		}
	}
	pthread_mutex_unlock(&d->stats_mu);
}

static int
call(struct watcher *w, const char *method, const char *path, json_t *body, json_t **out)
{
	char *text = body ? json_dumps(body, JSON_COMPACT) : NULL, *reply = NULL;
	int st = sh_http_call(w->d->o.mgmt, w->d->token, method, path, text, &reply, 30);

	/* the answer, whatever the status (an error's: {"error", "code"}) */
	if (out != NULL)
		*out = st > 0 && reply ? json_loads(reply, 0, NULL) : NULL;
	free(text);
	free(reply);
	return st;
}

/* Mark a drive failed, saying why; true once the configuration has it failed. */
static bool
fail_drive(struct watcher *w, uint64_t target, const char *why)
{
	char path[64];
	json_t *b = json_pack("{s:s, s:s}", "state", "failed", "reason", why);
	int st;

	snprintf(path, sizeof(path), "/v1/drives/%llu", (unsigned long long)target);
	st = call(w, "PUT", path, b, NULL);
	json_decref(b);
	if (st == 200)
		sh_log_error("drive %llu marked failed (%s): its fragments are rebuilt elsewhere",
			     (unsigned long long)target, why);
	/* 409: failed already; 404: not in the configuration (any more) */
	return st == 200 || st == 409 || st == 404;
}

/* An error opening a drive that says it is gone or broken, not that the node is short of
 * something for a moment. */
static bool
lasting(int err)
{
	return err == -EIO || err == -ENOENT || err == -ENODEV || err == -ENXIO ||
	       err == -EBADMSG || err == -ESTALE || err == SH_ENOTFORMATTED || err == SH_EVERSION;
}

/* The cluster's rebuild delay (s): how long a drive that does not open is waited for. */
static uint64_t
rebuild_delay(struct watcher *w)
{
	json_t *o = NULL;
	uint64_t v = 60;

	if (call(w, "GET", "/v1/settings", NULL, &o) == 200 &&
	    json_is_integer(json_object_get(o, "rebuild-delay")))
		v = (uint64_t)json_integer_value(json_object_get(o, "rebuild-delay"));
	json_decref(o);
	return v;
}

static void
drives(struct watcher *w)
{
	struct seen s = { .n = 0 };
	uint64_t now = sh_clock_real_ns(), delay = UINT64_MAX;
	char why[CFG_MSG_MAX];

	collect(w->d, &s);
	for (unsigned i = 0; i < s.n; i++) {
		unsigned k;

		for (k = 0; k < w->ndrives && w->drives[k].target != s.target[i]; k++)
			;
		if (k == w->ndrives) {
			if (w->ndrives == WATCH_DRIVES)
				continue;
			w->ndrives++;
			w->drives[k].target = s.target[i];
			w->drives[k].errors = s.read_errors[i];
			w->drives[k].since = now;
			w->drives[k].told = false;
			w->drives[k].gone_since = 0;
		}
		if (w->drives[k].told)
			continue;
		if (now - w->drives[k].since > (uint64_t)WATCH_WINDOW_S * SH_NSEC_PER_SEC) {
			w->drives[k].errors = s.read_errors[i]; /* a new window */
			w->drives[k].since = now;
		}
		if (s.open_err[i] < 0) {
			/* as a node down: lost once it has been gone for the rebuild delay */
			if (!lasting(s.open_err[i]))
				continue;
			if (delay == UINT64_MAX)
				delay = rebuild_delay(w);
			if (w->drives[k].gone_since == 0)
				w->drives[k].gone_since = now;
			if (now - w->drives[k].gone_since < delay * SH_NSEC_PER_SEC)
				continue;
			snprintf(why, sizeof(why), "it does not open: %s",
				 sh_strerror(s.open_err[i]));
		} else if (s.failed[i])
			snprintf(why, sizeof(why), "its writes fail with I/O errors");
		else if (s.read_errors[i] - w->drives[k].errors >= WATCH_READ_ERRORS)
			snprintf(
			    why, sizeof(why), "%llu reads failed with I/O errors in %llu s",
			    (unsigned long long)(s.read_errors[i] - w->drives[k].errors),
			    (unsigned long long)((now - w->drives[k].since) / SH_NSEC_PER_SEC));
		else
			continue;
		w->drives[k].told = fail_drive(w, s.target[i], why);
	}
}

static uint64_t
u64_of(json_t *o, const char *key)
{
	json_int_t v = json_integer_value(json_object_get(o, key));

	return v > 0 ? (uint64_t)v : 0;
}

/* Is this node the configuration's leader (as it sees it)? */
static bool
leads(struct watcher *w)
{
	json_t *st = NULL;
	bool lead;

	call(w, "GET", "/v1/status", NULL, &st);
	lead = u64_of(st, "leader") == w->d->o.id;
	json_decref(st);
	if (!lead && w->leading)
		memset(&w->ev, 0, sizeof(w->ev)); /* another leader speaks now */
	w->leading = lead;
	return lead;
}

/* On the configuration's leader: the heal state's changes, posted as events. */
static void
events(struct watcher *w)
{
	char out[HEAL_EVENTS_MAX][CFG_MSG_MAX];
	struct heal_view v = { .eta_s = -1 };
	json_t *rb = NULL, *eta;
	unsigned n;

	if (call(w, "GET", "/v1/rebuild", NULL, &rb) != 200 || !json_is_object(rb)) {
		json_decref(rb);
		return;
	}
	snprintf(v.state, sizeof(v.state), "%s",
		 json_string_value(json_object_get(rb, "state")) ?: "checking");
	v.pending_bytes = u64_of(rb, "pending_bytes");
	v.draining = u64_of(rb, "draining_stripes");
	v.unreadable = u64_of(rb, "unreadable_stripes");
	v.targets_lost = u64_of(rb, "targets_lost");
	v.rebuilt_frags = u64_of(rb, "rebuilt_fragments");
	eta = json_object_get(rb, "eta_s");
	if (json_is_integer(eta))
		v.eta_s = json_integer_value(eta);
	json_decref(rb);
	if (call(w, "GET", "/v1/drives", NULL, &rb) == 200 && json_is_array(rb)) {
		size_t i;
		json_t *d;

		json_array_foreach(rb, i, d)
		{
			const char *ds = json_string_value(json_object_get(d, "state"));

			v.drives_draining += ds != NULL && strcmp(ds, "draining") == 0;
		}
	}
	json_decref(rb);
	n = heal_events_step(&w->ev, &v, sh_clock_mono_ns(), out);
	for (unsigned i = 0; i < n; i++) {
		json_t *b = json_pack("{s:s}", "text", out[i]);

		sh_log_info("%s", out[i]);
		if (call(w, "POST", "/v1/events", b, NULL) != 200)
			sh_log_warn("event not recorded: %s", out[i]);
		json_decref(b);
	}
}

/* ---- snapshot schedules ---- */

#define AUTO_PREFIX   "auto-"
#define AUTO_NAME_LEN 21 /* "auto-YYYYMMDDTHHMMSSZ" */

/* The scheduled snapshot of the slot that starts at t (s since the epoch, UTC). */
static void
auto_name(int64_t t, char *buf, size_t len)
{
	time_t tt = (time_t)t;
	struct tm tm;

	gmtime_r(&tt, &tm);
	strftime(buf, len, AUTO_PREFIX "%Y%m%dT%H%M%SZ", &tm);
}

/* The slot a scheduled snapshot's name says, or -1: the name is not one (the user's own). */
static int64_t
auto_slot(const char *name)
{
	static const char form[] = AUTO_PREFIX "DDDDDDDDTDDDDDDZ";
	int v[AUTO_NAME_LEN] = { 0 }, x = 0;
	struct tm tm = { 0 };
	char again[32];
	int64_t t;

	if (strlen(name) != AUTO_NAME_LEN)
		return -1;
	for (unsigned i = 0; i < AUTO_NAME_LEN; i++) {
		if (form[i] != 'D' ? name[i] != form[i] : name[i] < '0' || name[i] > '9')
			return -1;
		if (form[i] == 'D')
			v[x++] = name[i] - '0';
	}
	tm.tm_year = v[0] * 1000 + v[1] * 100 + v[2] * 10 + v[3] - 1900;
	tm.tm_mon = v[4] * 10 + v[5] - 1;
	tm.tm_mday = v[6] * 10 + v[7];
	tm.tm_hour = v[8] * 10 + v[9];
	tm.tm_min = v[10] * 10 + v[11];
	tm.tm_sec = v[12] * 10 + v[13];
	t = (int64_t)timegm(&tm);
	auto_name(t, again, sizeof(again));
	return t >= 0 && strcmp(again, name) == 0 ? t : -1; /* exactly as the runner names it */
}

/* The reason in an admin API error's answer, or its status. */
static const char *
why(json_t *o, int st, char *buf, size_t len)
{
	const char *e = json_string_value(json_object_get(o, "error"));

	if (e != NULL)
		return e;
	if (st < 0)
		snprintf(buf, len, "%s", sh_strerror(st));
	else
		snprintf(buf, len, "HTTP %d", st);
	return buf;
}

/* A failure to take fs's snapshot of slot: said once per slot (the next pass tries again). */
static void
sched_failed(struct watcher *w, const char *fs, int64_t slot, const char *name, const char *msg)
{
	unsigned k;

	for (k = 0; k < CFG_FS_MAX && w->sched_failed[k].fs[0] != '\0' &&
		    strcmp(w->sched_failed[k].fs, fs) != 0;
	     k++)
		;
	if (k == CFG_FS_MAX)
		k = 0;
	if (strcmp(w->sched_failed[k].fs, fs) == 0 && w->sched_failed[k].slot == slot)
		return;
	snprintf(w->sched_failed[k].fs, sizeof(w->sched_failed[k].fs), "%s", fs);
	w->sched_failed[k].slot = slot;
	sh_log_warn("filesystem %s: scheduled snapshot %s not taken: %s", fs, name, msg);
}

struct auto_snap {
	int64_t slot;
	char name[CFG_NAME_MAX];
};

static int
by_slot(const void *a, const void *b)
{
	int64_t x = ((const struct auto_snap *)a)->slot, y = ((const struct auto_snap *)b)->slot;

	return x < y ? -1 : x > y;
}

/*
 * One filesystem's schedule at now (s since the epoch): its snapshot of
 * the current slot taken unless one of that slot or a later one is there
 * (two nodes that both think they lead name it alike: the second is
 * refused), then the ready scheduled ones beyond the newest keep deleted.
 * Snapshots not named by the schedule are never touched.
 */
static void
schedule_fs(struct watcher *w, const char *fs, uint64_t every, uint64_t keep, int64_t now)
{
	struct auto_snap ready[CFG_FS_SNAPS_MAX + 1]; /* a filesystem keeps at most 256 */
	int64_t slot = now - now % (int64_t)every, newest = -1;
	char path[CFG_NAME_MAX + 32], name[CFG_NAME_MAX], buf[32];
	json_t *a = NULL, *s, *b;
	unsigned n = 0;
	size_t i;
	int st;

	snprintf(path, sizeof(path), "/v1/fs/%s/snapshots?usage=0", fs); /* names, not bytes */
	if (call(w, "GET", path, NULL, &a) != 200 || !json_is_array(a)) {
		json_decref(a);
		return;
	}
	json_array_foreach(a, i, s)
	{
		const char *sn = json_string_value(json_object_get(s, "name"));
		const char *ss = json_string_value(json_object_get(s, "state"));
		int64_t t = sn ? auto_slot(sn) : -1;

		if (t < 0)
			continue;
		newest = t > newest ? t : newest;
		if (ss != NULL && strcmp(ss, "ready") == 0 && n < SH_ARRAY_SIZE(ready)) {
			ready[n].slot = t;
			snprintf(ready[n].name, sizeof(ready[n].name), "%s", sn);
			n++;
		}
	}
	json_decref(a);
	if (newest < slot) {
		auto_name(slot, name, sizeof(name));
		b = json_pack("{s:s}", "name", name);
		a = NULL;
		st = call(w, "POST", path, b, &a); /* answered once ready (504 after 28 s) */
		json_decref(b);
		if (st == 201) {
			sh_log_info("filesystem %s: scheduled snapshot %s taken", fs, name);
			if (n < SH_ARRAY_SIZE(ready)) {
				ready[n].slot = slot;
				snprintf(ready[n].name, sizeof(ready[n].name), "%s", name);
				n++;
			}
		} else if (st == 504) {
			sh_log_info("filesystem %s: scheduled snapshot %s taken; it becomes ready "
				    "by itself",
				    fs, name);
		} else if (st != 409) { /* 409: another node, leading a moment ago, took it */
			sched_failed(w, fs, slot, name, why(a, st, buf, sizeof(buf)));
		}
		json_decref(a);
	}
	if (n <= keep)
		return;
	qsort(ready, n, sizeof(ready[0]), by_slot);
	for (unsigned k = 0; k < n - keep; k++) {
		snprintf(path, sizeof(path), "/v1/fs/%s/snapshots/%s", fs, ready[k].name);
		a = NULL;
		st = call(w, "DELETE", path, NULL, &a);
		if (st == 202)
			sh_log_info(
			    "filesystem %s: scheduled snapshot %s deleted (keeping the last "
			    "%llu)",
			    fs, ready[k].name, (unsigned long long)keep);
		else if (st != 404 && st != 409) /* deleted already, by another node */
			sh_log_warn("filesystem %s: scheduled snapshot %s not deleted: %s", fs,
				    ready[k].name, why(a, st, buf, sizeof(buf)));
		json_decref(a);
	}
}

/* On the configuration's leader: every filesystem's snapshot schedule, run. */
static void
schedules(struct watcher *w)
{
	json_t *a = NULL, *f;
	int64_t now = (int64_t)(sh_clock_real_ns() / SH_NSEC_PER_SEC);
	size_t i;

	/* without usage: the filesystems as configured, no node asked */
	if (call(w, "GET", "/v1/fs?usage=0", NULL, &a) != 200 || !json_is_array(a)) {
		json_decref(a);
		return;
	}
	json_array_foreach(a, i, f)
	{
		const char *fs = json_string_value(json_object_get(f, "name"));
		uint64_t every = u64_of(f, "snapshot_every_s"), keep = u64_of(f, "snapshot_keep");

		if (fs != NULL && every > 0 && keep > 0 && !w->stop)
			schedule_fs(w, fs, every, keep, now);
	}
	json_decref(a);
}

static void *
run(void *arg)
{
	struct watcher *w = arg;

	for (shoald_wait(&w->mu, &w->cv, &w->stop, w->interval_s); !w->stop;
	     shoald_wait(&w->mu, &w->cv, &w->stop, w->interval_s)) {
		drives(w);
		if (leads(w)) {
			events(w);
			schedules(w);
		}
	}
	return NULL;
}

int
watcher_start(struct watcher *w, struct shoald *d, unsigned interval_s)
{
	memset(w, 0, sizeof(*w));
	w->d = d;
	w->interval_s = interval_s;
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv, NULL);
	if (interval_s == 0)
		return 0; /* off */
	if (pthread_create(&w->th, NULL, run, w) != 0)
		return -EAGAIN;
	w->started = true;
	return 0;
}

void
watcher_stop(struct watcher *w)
{
	pthread_mutex_lock(&w->mu);
	w->stop = true;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
	if (w->started)
		pthread_join(w->th, NULL);
	pthread_mutex_destroy(&w->mu);
	pthread_cond_destroy(&w->cv);
}
