// SPDX-License-Identifier: Apache-2.0
/*
 * Background cleaning (docs/reduction.md "Cleaning"): a thread with its
 * own client of the cluster, through this node's admin address, that
 * every interval rewrites the live bytes of files' stripes at least half
 * dead (sh_fs_clean), in this node's share of the buckets (bucket mod the
 * number of nodes is its rank among them), so that overwritten and
 * truncated space comes back without anyone asking.
 */
#include <errno.h>
#include <pthread.h>
#include <shoal/client.h>
#include <shoal/sh_errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "shoald.h"

SH_LOG_FACILITY("shoald.clean");

void
shoald_wait(pthread_mutex_t *mu, pthread_cond_t *cv, const bool *stop, unsigned interval_s)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += interval_s;
	pthread_mutex_lock(mu);
	while (!*stop && pthread_cond_timedwait(cv, mu, &ts) != ETIMEDOUT)
		;
	pthread_mutex_unlock(mu);
}

static void
wait_interval(struct cleaner *k)
{
	shoald_wait(&k->mu, &k->cv, &k->stop, k->interval_s);
}

/* One round over this node's share of every filesystem's buckets. */
static void
round_of(struct cleaner *k, sh_client *cl)
{
	char names[CFG_FS_MAX][CFG_NAME_MAX];
	unsigned nfs, rank, nnodes, nbuckets;

	pthread_mutex_lock(&k->mu);
	nfs = k->nfs;
	rank = k->rank;
	nnodes = k->nnodes;
	nbuckets = k->nbuckets;
	memcpy(names, k->fs, sizeof(names));
	pthread_mutex_unlock(&k->mu);
	for (unsigned i = 0; i < nfs && nnodes > 0 && !k->stop; i++) {
		struct sh_clean_stats all = { 0 };
		sh_fs *fs;
		int rc = sh_fs_open(cl, names[i], &fs);

		if (rc < 0)
			continue;
		for (uint32_t b = rank; rc == 0 && b < nbuckets && !k->stop; b += nnodes) {
			struct sh_clean_stats st;

			rc = sh_fs_clean(fs, b, b + 1, &st, NULL, NULL);
			all.stripes += st.stripes;
			all.moved_bytes += st.moved_bytes;
			all.skipped += st.skipped;
		}
		if (rc < 0)
			sh_log_warn("cleaning %s: %s (again next round)", names[i],
				    sh_strerror(rc));
		if (all.stripes > 0)
			sh_log_info("cleaned %s: %llu stripes, %llu live bytes moved, %llu ranges "
				    "written meanwhile left",
				    names[i], (unsigned long long)all.stripes,
				    (unsigned long long)all.moved_bytes,
				    (unsigned long long)all.skipped);
		sh_fs_close(fs);
	}
}

static void *
run(void *arg)
{
	struct cleaner *k = arg;
	struct sh_client_opts o = { .key_file = k->key_file }; /* the node's client key */
	sh_client *cl = NULL;

	for (wait_interval(k); !k->stop; wait_interval(k)) {
		if (cl == NULL && sh_client_connect(k->addr, &o, &cl) < 0) {
			cl = NULL;
			continue; /* not in a cluster yet, or not reachable: next round */
		}
		round_of(k, cl);
	}
	if (cl != NULL)
		sh_client_close(cl);
	return NULL;
}

int
cleaner_start(struct cleaner *k, const char *addr, const char *key_file, unsigned interval_s)
{
	memset(k, 0, sizeof(*k));
	snprintf(k->addr, sizeof(k->addr), "%s", addr);
	snprintf(k->key_file, sizeof(k->key_file), "%s", key_file);
	k->interval_s = interval_s;
	pthread_mutex_init(&k->mu, NULL);
	pthread_cond_init(&k->cv, NULL);
	if (interval_s == 0)
		return 0; /* off */
	if (pthread_create(&k->th, NULL, run, k) != 0)
		return -EAGAIN;
	k->started = true;
	return 0;
}

void
cleaner_cfg(struct cleaner *k, const struct cfg *c, uint64_t self)
{
	unsigned rank = 0;

	for (uint32_t i = 0; i < c->nnodes; i++)
		rank += c->nodes[i].id < self;
	pthread_mutex_lock(&k->mu);
	k->nfs = 0;
	/* not encrypted ones: no node holds their key (a client with it cleans them) */
	for (uint32_t i = 0; i < c->nfs && i < CFG_FS_MAX; i++)
		if (!c->fs[i].sealed && cfg_fs_own(&c->fs[i])) /* (a clone: its origin's) */
			snprintf(k->fs[k->nfs++], CFG_NAME_MAX, "%s", c->fs[i].name);
	k->rank = rank;
	k->nnodes = c->nnodes;
	k->nbuckets = c->nbuckets;
	pthread_mutex_unlock(&k->mu);
}

void
cleaner_stop(struct cleaner *k)
{
	pthread_mutex_lock(&k->mu);
	k->stop = true;
	pthread_cond_broadcast(&k->cv);
	pthread_mutex_unlock(&k->mu);
	if (k->started)
		pthread_join(k->th, NULL);
	pthread_mutex_destroy(&k->mu);
	pthread_cond_destroy(&k->cv);
}
