// SPDX-License-Identifier: Apache-2.0
/* shoald I/O workers: one loop per thread, data endpoint, drive targets (shoald.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "shoald.h"

SH_LOG_FACILITY("shoald.worker");

struct wdrive {
	struct sh_list link;
	struct worker *w;
	uint64_t target;
	char path[CFG_PATH_MAX];
	struct store *st;
	bool buffered;
	bool open;
	int open_err; /* why it does not open (the watcher marks it failed) */
};

static void wdrive_open(struct wdrive *dr);

static void
on_opened(void *arg, int rc)
{
	struct wdrive *dr = arg;
	struct worker *w = dr->w;

	if (rc == -EINVAL && !dr->buffered) {
		/* a file system without O_DIRECT (tmpfs): buffered I/O */
		store_close(dr->st);
		dr->st = NULL;
		dr->buffered = true;
		wdrive_open(dr);
		return;
	}
	if (rc < 0) {
		sh_log_error("worker %u: drive %llu (%s) does not open: %s", w->idx,
			     (unsigned long long)dr->target, dr->path, sh_strerror(rc));
		store_close(dr->st);
		dr->st = NULL;
		dr->open_err = rc;
		return;
	}
	if (store_target_id(dr->st) != dr->target) {
		sh_log_error("worker %u: %s holds target %llu, not %llu: not serving it", w->idx,
			     dr->path, (unsigned long long)store_target_id(dr->st),
			     (unsigned long long)dr->target);
		store_close(dr->st);
		dr->st = NULL;
		dr->open_err = -ESTALE; /* another drive's (or an old) target */
		return;
	}
	rc = store_svc_add(w->svc, dr->st);
	if (rc < 0) {
		sh_log_error("worker %u: serving drive %llu: %s", w->idx,
			     (unsigned long long)dr->target, sh_strerror(rc));
		return;
	}
	dr->open = true;
	if (sweep_add(w->sweep, dr->st) < 0)
		sh_log_warn("worker %u: drive %llu: no orphan sweep (out of memory)", w->idx,
			    (unsigned long long)dr->target);
	if (scrub_add(w->scrub, dr->st) < 0)
		sh_log_warn("worker %u: drive %llu: no scrub (out of memory)", w->idx,
			    (unsigned long long)dr->target);
	sh_log_info("worker %u serves drive %llu (%s%s)", w->idx, (unsigned long long)dr->target,
		    dr->path, dr->buffered ? ", buffered" : "");
}

static void
wdrive_open(struct wdrive *dr)
{
	struct store_opts so = { .buffered = dr->buffered };
	int rc = store_open(dr->w->env, dr->path, &so, &dr->st, on_opened, dr);

	if (rc < 0) {
		sh_log_error("worker %u: drive %s: %s", dr->w->idx, dr->path, sh_strerror(rc));
		dr->st = NULL;
		dr->open_err = rc;
	}
}

#define PUBLISH_NS (300ull * 1000 * 1000)

/* This worker's counters, its endpoint's, its drives' and its metadata groups'. */
static void
publish_stats(struct worker *w)
{
	struct admin_stats s, old;
	unsigned nd = 0, i = 0;
	struct sh_list *pos;

	if (admin_stats_of_net(w->net, &s) < 0)
		return;
	sh_list_for_each (pos, &w->drives)
		nd++;
	s.drives = nd ? sh_calloc(nd, sizeof(*s.drives)) : NULL;
	if (s.drives != NULL) {
		sh_list_for_each (pos, &w->drives) {
			struct wdrive *dr = sh_list_entry(pos, struct wdrive, link);

			if (dr->st == NULL && dr->open_err == 0)
				continue; /* opening */
			s.drives[i].target = dr->target;
			s.drives[i].open_err = dr->st == NULL ? dr->open_err : 0;
			if (dr->st != NULL)
				store_stats(dr->st, &s.drives[i].st);
			i++;
		}
	}
	s.ndrives = i;
	if (w->meta != NULL) {
		unsigned ng = msvc_groups(w->meta, NULL, 0);

		s.has_meta = true;
		msvc_stats(w->meta, &s.meta);
		s.groups = ng ? sh_calloc(ng, sizeof(*s.groups)) : NULL;
		if (s.groups != NULL) {
			unsigned got = msvc_groups(w->meta, s.groups, ng);

			s.ngroups = got < ng ? got : ng;
		}
	}
	pthread_mutex_lock(&w->d->stats_mu);
	old = w->d->stats[w->idx];
	w->d->stats[w->idx] = s;
	pthread_mutex_unlock(&w->d->stats_mu);
	admin_stats_clear(&old);
}

static void
on_publish(struct env_timer *t)
{
	struct worker *w = t->arg;

	if (w->stopping)
		return;
	publish_stats(w);
	env_timer_arm_period(&w->publish, PUBLISH_NS);
}

void
shoald_with_stats(void *arg, admin_stats_fn fn, void *ctx)
{
	struct shoald *d = arg;
	const struct admin_stats *ws[SHOALD_WORKERS_MAX + 1];
	struct admin_stats mgmt;
	unsigned n = 0;

	if (admin_stats_of_net(d->net, &mgmt) == 0)
		ws[n++] = &mgmt;
	pthread_mutex_lock(&d->stats_mu);
	for (unsigned i = 0; i < d->o.workers && i < SHOALD_WORKERS_MAX; i++)
		ws[n++] = &d->stats[i];
	fn(ctx, ws, n);
	pthread_mutex_unlock(&d->stats_mu);
	if (ws[0] == &mgmt)
		admin_stats_clear(&mgmt);
}

unsigned
shoald_meta_groups(void *arg, struct msvc_group_info *out, unsigned max)
{
	struct shoald *d = arg;
	unsigned n = 0;

	pthread_mutex_lock(&d->stats_mu);
	for (unsigned i = 0; i < d->o.workers && i < SHOALD_WORKERS_MAX; i++) {
		const struct admin_stats *s = &d->stats[i];

		for (unsigned g = 0; g < s->ngroups; g++, n++)
			if (n < max)
				out[n] = s->groups[g];
	}
	pthread_mutex_unlock(&d->stats_mu);
	return n;
}

/* A target this worker serves, for the metadata service (releases, rebuilds). */
static struct store *
store_local(void *arg, uint64_t target)
{
	struct worker *w = arg;

	return store_svc_find(w->svc, target);
}

static void
on_meta_stopped(void *arg)
{
	struct worker *w = arg;

	w->meta = NULL;
	env_real_stop(w->env);
}

/* On the worker's loop: take the commands of the management thread. */
static void
on_wake(struct env_async *a)
{
	struct worker *w = a->arg;
	struct cfg *c;

	pthread_mutex_lock(&w->mu);
	c = w->new_cfg;
	w->new_cfg = NULL;
	pthread_mutex_unlock(&w->mu);
	if (c != NULL) {
		if (!w->stopping)
			worker_net_follow(w, c);
		if (!w->stopping && sweep_set_cfg(w->sweep, c) < 0)
			sh_log_error("worker %u: orphan sweep configuration: out of memory",
				     w->idx);
		if (!w->stopping && scrub_set_cfg(w->scrub, c) < 0)
			sh_log_error("worker %u: scrub configuration: out of memory", w->idx);
		if (w->meta != NULL && !w->stopping) {
			int rc = msvc_set_cfg(w->meta, c);

			if (rc < 0)
				sh_log_error("worker %u: metadata configuration: %s", w->idx,
					     sh_strerror(rc));
		}
		cfg_free(c);
	}

	for (;;) {
		struct worker_cmd *c = NULL;
		struct sh_list *l;
		struct wdrive *dr;

		pthread_mutex_lock(&w->mu);
		l = sh_list_pop(&w->cmds);
		if (l)
			c = sh_list_entry(l, struct worker_cmd, link);
		pthread_mutex_unlock(&w->mu);
		if (c == NULL)
			break;
		dr = sh_calloc(1, sizeof(*dr));
		if (dr != NULL) {
			dr->w = w;
			dr->target = c->target;
			snprintf(dr->path, sizeof(dr->path), "%s", c->path);
			sh_list_add_tail(&w->drives, &dr->link);
			wdrive_open(dr);
		}
		sh_free(c);
	}
	if (w->stopping && !w->stop_begun) {
		w->stop_begun = true;
		env_timer_cancel(&w->publish);
		sweep_stop(w->sweep);
		scrub_stop(w->scrub);
		if (w->meta != NULL)
			msvc_stop(w->meta, on_meta_stopped, w); /* then the loop ends */
		else
			env_real_stop(w->env);
	}
}

int
worker_set_cfg(struct worker *w, const struct cfg *c)
{
	struct cfg *copy = cfg_new();

	if (copy == NULL || cfg_copy(copy, c) < 0) {
		cfg_free(copy);
		return -ENOMEM;
	}
	pthread_mutex_lock(&w->mu);
	cfg_free(w->new_cfg);
	w->new_cfg = copy;
	pthread_mutex_unlock(&w->mu);
	env_async_send(&w->wake);
	return 0;
}

int
worker_open(struct worker *w, uint64_t target, const char *path)
{
	struct worker_cmd *c = sh_calloc(1, sizeof(*c));

	if (c == NULL)
		return -ENOMEM;
	c->target = target;
	snprintf(c->path, sizeof(c->path), "%s", path);
	pthread_mutex_lock(&w->mu);
	sh_list_add_tail(&w->cmds, &c->link);
	pthread_mutex_unlock(&w->mu);
	env_async_send(&w->wake);
	return 0;
}

static void
started(struct worker *w, int rc)
{
	pthread_mutex_lock(&w->start_mu);
	w->start_rc = rc;
	w->started = true;
	pthread_cond_broadcast(&w->start_cv);
	pthread_mutex_unlock(&w->start_mu);
}

static void *
worker_main(void *arg)
{
	struct worker *w = arg;
	struct shoald *d = w->d;
	struct env_real_opts eo = { .mode = d->o.performance ? ENV_REAL_POLL : ENV_REAL_EVENT };
	struct net_iface ifc[SHOALD_IFACES_MAX];
	/* a worker's endpoint id: node id and worker index (docs/cluster.md) */
	struct net_config nc = { .node_id = (d->o.id << 8) | w->idx,
				 .ifaces = ifc,
				 .auth_key = d->net_key,
				 .auth_key_also = d->rotating ? d->net_key_also : NULL,
				 .client_key = shoald_client_key,
				 .arg = &d->keys };
	char name[48];
	int rc;

	snprintf(name, sizeof(name), "shoald-%llu.w%u", (unsigned long long)d->o.id, w->idx);
	sh_log_set_tag(name); /* this thread's log lines say which node and worker */
	eo.name = name;
	if (d->o.performance) {
		cpu_set_t set;
		long n = sysconf(_SC_NPROCESSORS_ONLN);

		CPU_ZERO(&set);
		CPU_SET((w->idx + 1) % (n > 0 ? (unsigned)n : 1), &set);
		if (pthread_setaffinity_np(pthread_self(), sizeof(set), &set) != 0)
			sh_log_warn("worker %u: cannot pin to a core", w->idx);
	}
	w->env = env_real_create(&eo);
	if (w->env == NULL) {
		started(w, -errno);
		return NULL;
	}
	rc = worker_ifaces(d, w->idx, ifc);
	if (rc > 0) {
		nc.nifaces = (unsigned)rc;
		rc = net_create(w->env, &nc, &w->net);
	}
	if (rc == 0)
		rc = store_svc_create(w->net, &w->svc);
	if (rc == 0 && w->idx == 0) {
		/* metadata: on worker 0, whose endpoint is the node's (node id << 8) */
		struct msvc_params mp = { .dir = d->o.dir,
					  .claim_age_ns =
					      (uint64_t)d->o.claim_age_s * 1000000000ull,
					  .store_local = store_local,
					  .cfg_submit = shoald_cfg_submit,
					  .arg = w };

		rc = msvc_create(w->net, &mp, &w->meta);
	}
	if (rc == 0)
		rc = sweep_create(w->net, d->o.orphan_age_s, &w->sweep);
	if (rc == 0 && w->meta != NULL)
		sweep_set_local(w->sweep, msvc_local_call, w->meta);
	if (rc == 0)
		rc = scrub_create(w->net, &w->scrub);
	if (rc == 0 && w->meta != NULL)
		scrub_set_local(w->scrub, msvc_local_call, w->meta);
	if (rc == 0)
		rc = env_async_init(w->env, &w->wake, on_wake, w);
	if (rc < 0) {
		sh_log_error("worker %u: cannot start its data endpoint: %s", w->idx,
			     sh_strerror(rc));
		if (w->meta)
			msvc_stop(w->meta, NULL, NULL); /* nothing started: it is done at once */
		sweep_destroy(w->sweep);
		scrub_destroy(w->scrub);
		if (w->svc)
			store_svc_destroy(w->svc);
		if (w->net)
			net_destroy(w->net);
		env_real_destroy(w->env);
		started(w, rc);
		return NULL;
	}
	started(w, 0);
	env_timer_init(w->env, &w->publish, on_publish, w);
	env_timer_arm_period(&w->publish, PUBLISH_NS);
	env_real_run(w->env);
	/* stop: the sweep and the scrub, the drives, then the endpoint */
	sweep_destroy(w->sweep);
	scrub_destroy(w->scrub);
	while (!sh_list_empty(&w->drives)) {
		struct wdrive *dr = sh_list_entry(sh_list_pop(&w->drives), struct wdrive, link);

		if (dr->st)
			store_close(dr->st);
		sh_free(dr);
	}
	store_svc_destroy(w->svc);
	net_destroy(w->net);
	env_async_fini(&w->wake);
	cfg_free(w->new_cfg);
	while (!sh_list_empty(&w->cmds))
		sh_free(sh_list_entry(sh_list_pop(&w->cmds), struct worker_cmd, link));
	env_real_destroy(w->env);
	return NULL;
}

int
worker_start(struct shoald *d, unsigned idx)
{
	struct worker *w = &d->workers[idx];
	int rc;

	w->d = d;
	w->idx = idx;
	sh_list_init(&w->cmds);
	sh_list_init(&w->drives);
	pthread_mutex_init(&w->mu, NULL);
	pthread_mutex_init(&w->start_mu, NULL);
	pthread_cond_init(&w->start_cv, NULL);
	rc = pthread_create(&w->th, NULL, worker_main, w);
	if (rc != 0)
		return -rc;
	pthread_mutex_lock(&w->start_mu);
	while (!w->started)
		pthread_cond_wait(&w->start_cv, &w->start_mu);
	pthread_mutex_unlock(&w->start_mu);
	if (w->start_rc < 0) {
		pthread_join(w->th, NULL);
		return w->start_rc;
	}
	return 0;
}

void
worker_stop(struct worker *w)
{
	pthread_mutex_lock(&w->mu);
	w->stopping = true;
	pthread_mutex_unlock(&w->mu);
	env_async_send(&w->wake);
	pthread_join(w->th, NULL);
	pthread_mutex_destroy(&w->mu);
	pthread_mutex_destroy(&w->start_mu);
	pthread_cond_destroy(&w->start_cv);
}

/* ---- configuration changes from the workers, submitted on the management loop ---- */

static void
on_submitted(void *arg, int status, const char *msg)
{
	(void)arg;
	if (status < 0 && status != -EALREADY && status != -EINVAL)
		sh_log_warn("configuration change from the metadata service: %s (%s)",
			    sh_strerror(status), msg ? msg : "");
}

static void
on_submit_wake(struct env_async *a)
{
	struct shoald *d = a->arg;
	struct cfg_cmd cmds[SHOALD_SUBMITS_MAX];
	unsigned n;

	pthread_mutex_lock(&d->submit_mu);
	n = d->nsubmits;
	memcpy(cmds, d->submits, n * sizeof(cmds[0]));
	d->nsubmits = 0;
	pthread_mutex_unlock(&d->submit_mu);
	for (unsigned i = 0; i < n && d->cl != NULL; i++)
		if (cluster_submit(d->cl, &cmds[i], on_submitted, NULL) < 0)
			sh_log_warn("configuration change from the metadata service not submitted");
}

int
shoald_submit_init(struct shoald *d)
{
	pthread_mutex_init(&d->submit_mu, NULL);
	return env_async_init(d->env, &d->submit_wake, on_submit_wake, d);
}

void
shoald_cfg_submit(void *arg, const struct cfg_cmd *cmd)
{
	struct worker *w = arg;
	struct shoald *d = w->d;
	bool full;

	pthread_mutex_lock(&d->submit_mu);
	full = d->nsubmits == SHOALD_SUBMITS_MAX;
	if (!full)
		d->submits[d->nsubmits++] = *cmd;
	pthread_mutex_unlock(&d->submit_mu);
	if (!full)
		env_async_send(
		    &d->submit_wake); /* (else asked again: the next tick's is the same) */
}
