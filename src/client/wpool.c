// SPDX-License-Identifier: Apache-2.0
/* A filesystem handle's background threads (client_int.h, "wpool"). */
#include "client_int.h"

SH_LOG_FACILITY("client.wpool");

struct wtask {
	struct sh_list link;
	void (*fn)(void *arg);
	void *arg;
};

struct wpool {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct sh_list q;
	pthread_t *th;
	unsigned nth;
	bool stop;
};

static void *
worker(void *arg)
{
	struct wpool *p = arg;

	pthread_mutex_lock(&p->mu);
	for (;;) {
		struct wtask *t;

		while (sh_list_empty(&p->q) && !p->stop)
			pthread_cond_wait(&p->cv, &p->mu);
		if (sh_list_empty(&p->q))
			break; /* stopping, nothing left */
		t = sh_list_entry(sh_list_pop(&p->q), struct wtask, link);
		pthread_mutex_unlock(&p->mu);
		t->fn(t->arg);
		sh_free(t);
		pthread_mutex_lock(&p->mu);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

static const unsigned pool_threads[WPOOL_N] = {
	[WPOOL_BEHIND] = 16, [WPOOL_AIO] = 16, [WPOOL_RA] = 8
};

static struct wpool *
pool_get(sh_fs *fs, unsigned which)
{
	struct wpool *p;

	pthread_mutex_lock(&fs->wmu);
	p = fs->wpool[which];
	if (p == NULL && (p = sh_calloc(1, sizeof(*p))) != NULL) {
		pthread_mutex_init(&p->mu, NULL);
		pthread_cond_init(&p->cv, NULL);
		sh_list_init(&p->q);
		p->th = sh_calloc(pool_threads[which], sizeof(*p->th));
		for (unsigned i = 0; p->th != NULL && i < pool_threads[which]; i++)
			if (pthread_create(&p->th[p->nth], NULL, worker, p) == 0)
				p->nth++;
		if (p->nth == 0) {
			sh_log_warn("no background threads: work is done by the caller");
			pthread_cond_destroy(&p->cv);
			pthread_mutex_destroy(&p->mu);
			sh_free(p->th);
			sh_free(p);
			p = NULL;
		}
		fs->wpool[which] = p;
	}
	pthread_mutex_unlock(&fs->wmu);
	return p;
}

int
wpool_run(sh_fs *fs, unsigned which, void (*fn)(void *arg), void *arg)
{
	struct wpool *p;
	struct wtask *t;

	if (client_driven(fs->c))
		return -EOPNOTSUPP; /* no threads on a caller's env (client_env.h) */
	p = pool_get(fs, which);
	if (p == NULL || (t = sh_calloc(1, sizeof(*t))) == NULL)
		return -ENOMEM;
	t->fn = fn;
	t->arg = arg;
	pthread_mutex_lock(&p->mu);
	sh_list_add_tail(&p->q, &t->link);
	pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&p->mu);
	return 0;
}

void
wpool_stop(sh_fs *fs)
{
	/* asynchronous calls first: what they write may still queue stripes behind */
	for (unsigned which = WPOOL_N; which-- > 0;) {
		struct wpool *p = fs->wpool[which];

		if (p == NULL)
			continue;
		pthread_mutex_lock(&p->mu);
		p->stop = true;
		pthread_cond_broadcast(&p->cv);
		pthread_mutex_unlock(&p->mu);
		for (unsigned i = 0; i < p->nth; i++)
			pthread_join(p->th[i], NULL);
		pthread_cond_destroy(&p->cv);
		pthread_mutex_destroy(&p->mu);
		sh_free(p->th);
		sh_free(p);
		fs->wpool[which] = NULL;
	}
}
