// SPDX-License-Identifier: Apache-2.0
/*
 * The real env's loop: epoll, eventfd, timers, posted tasks and asyncs.
 * Timers live in a heap; the loop sleeps in epoll_pwait2 no longer than
 * until the earliest one (nanosecond timeout), so arming, re-arming and
 * cancelling a timer never costs a system call (docs/decisions.md).
 * Sockets are in env_real_udp.c, disks (io_uring) in env_real_disk.c.
 *
 * One turn of the loop:
 *   posted tasks -> submit queued disk I/O -> wait (epoll, until the
 *   earliest timer; 0 if work is ready or in POLL mode) -> ready fds ->
 *   [POLL: reap io_uring] -> due timers -> disk completions.
 * Tasks run at the start of the turn after the one that posted them,
 * before it waits: what they send leaves at once, and a task that posts
 * itself cannot starve the loop.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "env_real_int.h"

SH_LOG_FACILITY("env.real");

#define EPOLL_BATCH 64

int
real_watch_add(struct env_real *r, int fd, uint32_t events, struct real_watch *w)
{
	struct epoll_event ev = { .events = events, .data.ptr = w };

	if (epoll_ctl(r->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
		return -errno;
	return 0;
}

int
real_watch_mod(struct env_real *r, int fd, uint32_t events, struct real_watch *w)
{
	struct epoll_event ev = { .events = events, .data.ptr = w };

	if (epoll_ctl(r->epfd, EPOLL_CTL_MOD, fd, &ev) < 0)
		return -errno;
	return 0;
}

void
real_watch_del(struct env_real *r, int fd)
{
	epoll_ctl(r->epfd, EPOLL_CTL_DEL, fd, NULL);
}

void
real_watch_retire(struct env_real *r, int fd, struct real_watch *w)
{
	real_watch_del(r, fd);
	if (w->poll != NULL)
		sh_list_del(&w->plink);
	w->dead = true;
	sh_list_add_tail(&r->zombies, &w->zlink);
}

static void
free_zombies(struct env_real *r)
{
	struct sh_list *pos;

	while ((pos = sh_list_pop(&r->zombies)) != NULL) {
		struct real_watch *w = sh_list_entry(pos, struct real_watch, zlink);

		w->free(w);
	}
}

/*
 * The loop's time (as libuv's uv_now): read at the start of each turn and
 * after each wait, so a burst of packets handled in one turn costs one clock
 * read, not one per packet and timer. Code that runs long inside a callback
 * sees the time its turn began.
 */
static uint64_t
real_now(struct env *env)
{
	return to_real(env)->now;
}

static uint64_t
real_realtime(struct env *env)
{
	(void)env;
	return sh_clock_real_ns();
}

static uint64_t
real_clock(struct env *env)
{
	(void)env;
	return sh_clock_mono_ns();
}

static void
real_random(struct env *env, void *buf, size_t len)
{
	unsigned char *p = buf;

	(void)env;
	while (len > 0) {
		ssize_t n = getrandom(p, len, 0);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			sh_log(SH_LL_FATAL, "getrandom failed: %s", strerror(errno));
		}
		p += n;
		len -= (size_t)n;
	}
}

static int
real_event_push(struct env *env, struct env_event *ev, uint64_t when)
{
	return sh_heap_push(&to_real(env)->timers, &ev->hn, when);
}

static void
real_event_cancel(struct env *env, struct env_event *ev)
{
	sh_heap_remove(&to_real(env)->timers, &ev->hn);
	sh_list_del(&ev->link);
}

static void
real_post(struct env *env, struct env_event *ev)
{
	sh_list_add_tail(&to_real(env)->ready, &ev->link);
}

static int
real_async_init(struct env *env, struct env_async *a)
{
	sh_list_add_tail(&to_real(env)->asyncs, &a->ev.link);
	return 0;
}

static void
efd_kick(int fd)
{
	uint64_t one = 1;
	ssize_t n = write(fd, &one, sizeof(one));

	(void)n; /* EAGAIN means the counter is already non-zero: the loop will wake */
}

static void
real_async_send(struct env_async *a)
{
	efd_kick(to_real(a->ev.env)->efd);
}

static void
real_async_fini(struct env_async *a)
{
	sh_list_del(&a->ev.link);
}

static void
efd_ready(struct real_watch *w, uint32_t events)
{
	struct env_real *r = sh_container_of(w, struct env_real, efd_watch);
	struct sh_list *pos, *tmp;
	uint64_t n;
	ssize_t rc = read(r->efd, &n, sizeof(n));

	(void)events;
	(void)rc;
	/* asyncs are added and removed on this thread only; senders touch just the flag */
	sh_list_for_each_safe (pos, tmp, &r->asyncs) {
		struct env_event *ev = sh_list_entry(pos, struct env_event, link);
		struct env_async *a = sh_container_of(ev, struct env_async, ev);

		if (atomic_load(&a->pending)) {
			ev->fire(ev);
			r->ncallbacks++;
		}
	}
}

static void
poll_turn(struct env_real *r)
{
	struct sh_list *pos, *tmp;

	sh_list_for_each_safe (pos, tmp, &r->polled) {
		struct real_watch *w = sh_list_entry(pos, struct real_watch, plink);

		if (!w->dead)
			w->poll(w);
	}
	sh_list_for_each_safe (pos, tmp, &r->asyncs) {
		struct env_event *ev = sh_list_entry(pos, struct env_event, link);
		struct env_async *a = sh_container_of(ev, struct env_async, ev);

		if (atomic_load_explicit(&a->pending, memory_order_acquire)) {
			ev->fire(ev);
			r->ncallbacks++;
		}
	}
}

/* A poller's fd in epoll: readable when its queue got work while it was armed. */
struct poller_watch {
	struct real_watch w;
	int fd;
};

/* Woken: nothing to do but wake (the next turn polls); the fd is not ours to read. */
static void
poller_fd_ready(struct real_watch *w, uint32_t events)
{
	(void)w;
	(void)events;
}

static void
poller_watch_free(struct real_watch *w)
{
	sh_free(sh_container_of(w, struct poller_watch, w));
}

static int
real_poller_add(struct env *env, struct env_poller *p)
{
	struct env_real *r = to_real(env);

	p->impl = NULL;
	p->armed = false;
	if (p->arm != NULL) {
		struct poller_watch *pw = sh_calloc(1, sizeof(*pw));
		int rc;

		if (pw == NULL)
			return -ENOMEM;
		pw->fd = p->fd;
		pw->w.fn = poller_fd_ready;
		pw->w.free = poller_watch_free;
		/* edge-triggered: each arrival wakes the loop once, and the fd is never read (a
		 * tap's is the queue itself; an eventfd's count means nothing to us) */
		rc = real_watch_add(r, p->fd, EPOLLIN | EPOLLET, &pw->w);
		if (rc < 0) {
			sh_free(pw);
			return rc;
		}
		p->impl = pw;
	}
	sh_list_add_tail(&r->pollers, &p->link);
	return 0;
}

static void
real_poller_del(struct env_poller *p)
{
	struct poller_watch *pw = p->impl;

	if (p->armed)
		p->arm(p, false);
	p->armed = false;
	if (pw != NULL)
		real_watch_retire(to_real(p->env), pw->fd, &pw->w);
	p->impl = NULL;
	sh_list_del(&p->link);
}

/*
 * An idle poller that can be woken: armed, and polled once more for what
 * came before it was. Returns what that poll found (0: it sleeps armed).
 */
static unsigned
poller_sleep(struct env_poller *p)
{
	unsigned got;

	if (p->arm(p, true) < 0)
		return 0;
	p->armed = true;
	got = p->poll(p);
	if (got > 0) {
		p->arm(p, false);
		p->armed = false;
	}
	return got;
}

/*
 * Every poller, at the start of a turn: the longest the loop may sleep
 * after it (0 when one found work; UINT64_MAX without pollers, or when all
 * of them sleep armed).
 */
static uint64_t
run_pollers(struct env_real *r)
{
	uint64_t sleep = UINT64_MAX;
	struct sh_list *pos, *tmp;

	sh_list_for_each_safe (pos, tmp, &r->pollers) {
		struct env_poller *p = sh_list_entry(pos, struct env_poller, link);
		unsigned got;

		if (p->armed) {
			p->arm(p, false);
			p->armed = false;
		}
		got = p->poll(p);
		if (got == 0 && r->mode == ENV_REAL_EVENT && p->arm != NULL &&
		    p->backoff_ns >= p->max_sleep_ns) {
			got = poller_sleep(p);
			if (got == 0 && p->armed)
				continue; /* its fd wakes the loop */
		}
		if (got > 0) {
			r->ncallbacks += (int)got;
			p->backoff_ns = 0;
		} else {
			p->backoff_ns = p->backoff_ns == 0
					    ? SH_NSEC_PER_USEC
					    : SH_MIN(p->backoff_ns * 2, p->max_sleep_ns);
		}
		sleep = SH_MIN(sleep, p->backoff_ns);
	}
	return sleep;
}

static const struct env_ops real_ops = {
	.name = "real",
	.version = 1,
	.now = real_now,
	.realtime = real_realtime,
	.clock = real_clock,
	.random = real_random,
	.event_push = real_event_push,
	.event_cancel = real_event_cancel,
	.post = real_post,
	.async_init = real_async_init,
	.async_send = real_async_send,
	.async_fini = real_async_fini,
	.dgram_open = real_dgram_open,
	.dgram_addr = real_dgram_addr,
	.dgram_send = real_dgram_send,
	.dgram_stats = real_dgram_stats,
	.dgram_mtu = real_dgram_mtu,
	.dgram_close = real_dgram_close,
	.disk_open = real_disk_open,
	.disk_submit = real_disk_submit,
	.disk_info = real_disk_info,
	.disk_close = real_disk_close,
	.disk_remove = real_disk_remove,
	.disk_buf_update = real_disk_buf_update,
	.poller_add = real_poller_add,
	.poller_del = real_poller_del,
};

struct env *
env_real_create(const struct env_real_opts *opts)
{
	struct env_real *r = sh_calloc(1, sizeof(*r));
	int rc;

	if (r == NULL) {
		errno = ENOMEM;
		return NULL;
	}
	r->env.ops = &real_ops;
	snprintf(r->env.name, sizeof(r->env.name), "%s", opts && opts->name ? opts->name : "real");
	r->mode = opts ? opts->mode : ENV_REAL_EVENT;
	r->eager_submit = !(opts && opts->batch_disk_submit);
	r->spin_ns = opts && opts->spin_ns ? opts->spin_ns : 50 * SH_NSEC_PER_USEC;
	if (r->spin_ns == UINT64_MAX)
		r->spin_ns = 0;
	r->epfd = r->efd = -1;
	r->now = sh_clock_mono_ns();
	sh_heap_init(&r->timers);
	sh_list_init(&r->ready);
	sh_list_init(&r->asyncs);
	sh_list_init(&r->zombies);
	sh_list_init(&r->polled);
	sh_list_init(&r->pollers);
	sh_list_init(&r->ring_backlog);
	sh_list_init(&r->done);
	sh_list_init(&r->disks);
	atomic_init(&r->stop, 0);

	r->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (r->epfd < 0)
		goto out_errno;
	r->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (r->efd < 0)
		goto out_errno;
	r->efd_watch.fn = efd_ready;
	rc = real_watch_add(r, r->efd, EPOLLIN, &r->efd_watch);
	if (rc < 0) {
		errno = -rc;
		goto out_destroy;
	}
	rc = real_ring_init(r, opts && opts->uring_depth ? opts->uring_depth : 256);
	if (rc < 0) {
		errno = -rc;
		goto out_destroy;
	}
	return &r->env;

out_errno:
	sh_log_error("env_real_create: %s", strerror(errno));
out_destroy:
	rc = errno;
	env_real_destroy(&r->env);
	errno = rc;
	return NULL;
}

void
env_real_destroy(struct env *env)
{
	struct env_real *r;

	if (env == NULL)
		return;
	r = to_real(env);
	real_ring_fini(r);
	free_zombies(r);
	sh_heap_fini(&r->timers);
	if (r->epfd >= 0)
		close(r->epfd);
	if (r->efd >= 0)
		close(r->efd);
	sh_free(r);
}

void
env_real_stop(struct env *env)
{
	struct env_real *r = to_real(env);

	atomic_store(&r->stop, 1);
	efd_kick(r->efd);
}

static void
run_timers(struct env_real *r)
{
	uint64_t now = r->now;
	struct sh_heap_node *top;

	while ((top = sh_heap_peek(&r->timers)) != NULL && top->key <= now) {
		struct env_event *ev = sh_container_of(top, struct env_event, hn);

		sh_heap_remove(&r->timers, top);
		ev->fire(ev);
		r->ncallbacks++;
	}
}

static void
run_list(struct env_real *r, struct sh_list *src)
{
	struct sh_list batch, *pos;

	if (sh_list_empty(src))
		return;
	/* take the whole list: what is posted now runs next turn */
	batch = *src;
	batch.next->prev = &batch;
	batch.prev->next = &batch;
	sh_list_init(src);
	while ((pos = sh_list_pop(&batch)) != NULL) {
		struct env_event *ev = sh_list_entry(pos, struct env_event, link);

		ev->fire(ev);
		r->ncallbacks++;
	}
}

int
env_real_run_once(struct env *env, uint64_t timeout_ns)
{
	struct env_real *r = to_real(env);
	struct epoll_event evs[EPOLL_BATCH];
	struct timespec ts, *tsp = NULL;
	struct sh_heap_node *top;
	uint64_t now;
	int n;

	r->ncallbacks = 0;
	r->now = sh_clock_mono_ns();
	/* work posted since the last turn (from outside the loop, say) runs before the wait,
	 * so what it sends goes out now rather than after a zero-timeout poll */
	run_list(r, &r->ready);
	if (!sh_list_empty(&r->pollers)) {
		uint64_t sleep = run_pollers(r); /* (SH_MIN evaluates its arguments twice) */

		timeout_ns = SH_MIN(timeout_ns, sleep);
	}
	top = sh_heap_peek(&r->timers);
	now = r->now;
	/* disk completions already in the ring: take them now instead of sleeping for the eventfd
	 */
	if (real_ring_reap(r) > 0)
		timeout_ns = 0;
	if (r->mode == ENV_REAL_POLL || !sh_list_empty(&r->ready) || !sh_list_empty(&r->done))
		timeout_ns = 0;
	/* sleep no later than the earliest timer: no timer syscall at all */
	if (top != NULL && timeout_ns > 0)
		timeout_ns = top->key <= now ? 0 : SH_MIN(timeout_ns, top->key - now);
	n = 0;
	if (r->mode == ENV_REAL_POLL) {
		/*
		 * Busy-polling: read the sockets directly (one system call each, and
		 * it returns the data) and look at epoll only every 64 turns, for
		 * the eventfds; asyncs are checked by their flags.
		 */
		real_ring_flush(r);
		poll_turn(r);
		if (++r->turn % 64 != 0)
			goto dispatched;
		timeout_ns = 0;
	} else if (timeout_ns > 0 && r->spin_ns > 0 && now - r->last_event_ns < r->spin_ns) {
		/* hybrid: something happened a moment ago, so poll briefly before sleeping */
		uint64_t spin_end = now + SH_MIN(r->spin_ns, timeout_ns);
		struct timespec zero = { 0, 0 };

		do {
			n = epoll_pwait2(r->epfd, evs, EPOLL_BATCH, &zero, NULL);
		} while (n == 0 && sh_clock_mono_ns() < spin_end);
		if (n == 0) {
			uint64_t spent = sh_clock_mono_ns() - now;

			timeout_ns = timeout_ns == UINT64_MAX
					 ? timeout_ns
					 : (spent >= timeout_ns ? 0 : timeout_ns - spent);
		}
	}
	if (timeout_ns != UINT64_MAX) {
		ts.tv_sec = (time_t)(timeout_ns / SH_NSEC_PER_SEC);
		ts.tv_nsec = (long)(timeout_ns % SH_NSEC_PER_SEC);
		tsp = &ts;
	}
	if (n == 0 && timeout_ns > 0 && r->mode == ENV_REAL_EVENT && real_ring_busy(r)) {
		/* disk I/O in flight: one system call submits, sleeps and reaps */
		struct timespec zero = { 0, 0 };

		n = real_ring_wait(r, tsp);
		if (n > 0)
			n = epoll_pwait2(r->epfd, evs, EPOLL_BATCH, &zero, NULL);
	} else {
		real_ring_flush(r); /* queued disk I/O goes out before we sleep or poll */
		if (n == 0)
			n = epoll_pwait2(r->epfd, evs, EPOLL_BATCH, tsp, NULL);
	}
	if (n < 0) {
		if (errno != EINTR)
			return -errno;
		n = 0;
	}
	if (r->mode == ENV_REAL_EVENT || n > 0)
		r->now = sh_clock_mono_ns();
	if (n > 0)
		r->last_event_ns = r->now;
	for (int i = 0; i < n; i++) {
		struct real_watch *w = evs[i].data.ptr;

		if (!w->dead)
			w->fn(w, evs[i].events);
	}
dispatched:
	if (r->mode == ENV_REAL_POLL)
		real_ring_reap(r);
	run_timers(r);
	run_list(r, &r->done);
	free_zombies(r);
	return r->ncallbacks;
}

int
env_real_run(struct env *env)
{
	struct env_real *r = to_real(env);
	int rc;

	while (!atomic_load(&r->stop)) {
		rc = env_real_run_once(env, UINT64_MAX);
		if (rc < 0)
			return rc;
	}
	atomic_store(&r->stop, 0); /* a stop is consumed by the run it ended */
	return 0;
}
