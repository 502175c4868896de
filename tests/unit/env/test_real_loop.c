// SPDX-License-Identifier: Apache-2.0
/* The real loop: timers in deadline order, cancel, re-arm, posted tasks, cross-thread asyncs. */
#include <pthread.h>
#include <stdatomic.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "../../../src/env/env_real.h"
#include "../../lib/test.h"

struct rec {
	int order[16];
	int n;
};

struct tctx {
	struct env_timer t;
	struct rec *r;
	int id;
};

static void
tctx_fire(struct env_timer *t)
{
	struct tctx *c = sh_container_of(t, struct tctx, t);

	c->r->order[c->r->n++] = c->id;
}

static void
run_until(struct env *env, int *n, int want, uint64_t max_ns)
{
	uint64_t end = sh_clock_mono_ns() + max_ns;

	while (*n < want && sh_clock_mono_ns() < end)
		SH_ASSERT_OK(env_real_run_once(env, 10 * SH_NSEC_PER_MSEC));
}

static void
timers_in_mode(enum env_real_mode mode)
{
	struct env_real_opts o = { .mode = mode };
	struct env *env = env_real_create(&o);
	struct tctx c[5];
	struct rec r = { .n = 0 };
	uint64_t t0;
	static const int delays_ms[5] = { 30, 10, 20, 50, 40 };

	SH_ASSERT_NOT_NULL(env);
	t0 = env_now(env);
	for (int i = 0; i < 5; i++) {
		c[i].r = &r;
		c[i].id = i;
		env_timer_init(env, &c[i].t, tctx_fire, NULL);
		SH_ASSERT_OK(env_timer_arm(&c[i].t, (uint64_t)delays_ms[i] * SH_NSEC_PER_MSEC));
	}
	env_timer_cancel(&c[3].t);
	SH_ASSERT(!env_timer_armed(&c[3].t));
	SH_ASSERT_OK(env_timer_arm(&c[4].t, 5 * SH_NSEC_PER_MSEC)); /* moved earlier */
	run_until(env, &r.n, 4, 2 * SH_NSEC_PER_SEC);
	SH_ASSERT_EQ(r.n, 4);
	SH_ASSERT_EQ(r.order[0], 4);
	SH_ASSERT_EQ(r.order[1], 1);
	SH_ASSERT_EQ(r.order[2], 2);
	SH_ASSERT_EQ(r.order[3], 0);
	SH_ASSERT_GE(env_now(env) - t0, 30 * SH_NSEC_PER_MSEC);
	/* the cancelled one never fires */
	SH_ASSERT_OK(env_real_run_once(env, 60 * SH_NSEC_PER_MSEC));
	SH_ASSERT_EQ(r.n, 4);
	env_real_destroy(env);
}

TEST(real_timers_event_mode)
{
	timers_in_mode(ENV_REAL_EVENT);
}

TEST(real_timers_poll_mode)
{
	timers_in_mode(ENV_REAL_POLL);
}

struct post_ctx {
	struct env_task t;
	int runs;
	int reposts;
};

static void
post_fire(struct env_task *t)
{
	struct post_ctx *p = sh_container_of(t, struct post_ctx, t);

	p->runs++;
	if (p->reposts-- > 0)
		env_post(t); /* runs again next turn, not now */
}

TEST(real_post_runs_next_turn)
{
	struct env *env = env_real_create(NULL);
	struct post_ctx p = { .reposts = 2 };

	SH_ASSERT_NOT_NULL(env);
	env_task_init(env, &p.t, post_fire, NULL);
	env_post(&p.t);
	env_post(&p.t); /* already queued: no-op */
	SH_ASSERT_EQ(p.runs, 0);
	SH_ASSERT_EQ(env_real_run_once(env, 0), 1);
	SH_ASSERT_EQ(p.runs, 1);
	SH_ASSERT_EQ(env_real_run_once(env, 0), 1);
	SH_ASSERT_EQ(env_real_run_once(env, 0), 1);
	SH_ASSERT_EQ(env_real_run_once(env, 0), 0);
	SH_ASSERT_EQ(p.runs, 3);
	env_post(&p.t);
	env_task_cancel(&p.t);
	SH_ASSERT_EQ(env_real_run_once(env, 0), 0);
	env_real_destroy(env);
}

struct async_ctx {
	struct env_async a;
	struct env *env;
	_Atomic int got;
};

static void
async_fire(struct env_async *a)
{
	struct async_ctx *c = sh_container_of(a, struct async_ctx, a);

	if (++c->got == 100)
		env_real_stop(c->env);
}

static void *
sender(void *arg)
{
	struct async_ctx *c = arg;

	for (int i = 0; i < 100; i++) {
		int before = c->got;

		env_async_send(&c->a);
		while (c->got == before)
			sched_yield();
	}
	return NULL;
}

TEST(real_async_from_other_thread)
{
	struct async_ctx c = { .got = 0 };
	pthread_t th;

	c.env = env_real_create(NULL);
	SH_ASSERT_NOT_NULL(c.env);
	SH_ASSERT_OK(env_async_init(c.env, &c.a, async_fire, NULL));
	SH_ASSERT_EQ(pthread_create(&th, NULL, sender, &c), 0);
	SH_ASSERT_OK(env_real_run(c.env));
	pthread_join(th, NULL);
	SH_ASSERT_EQ(c.got, 100);
	env_async_fini(&c.a);
	env_real_destroy(c.env);
}

TEST(real_random_differs)
{
	struct env *env = env_real_create(NULL);

	SH_ASSERT_NE(env_random_u64(env), env_random_u64(env));
	SH_ASSERT_GT(env_realtime(env), 1700000000ULL * SH_NSEC_PER_SEC);
	SH_ASSERT_STREQ(env_name(env), "real");
	env_real_destroy(env);
}

/* A poller that finds work while it has some (a NIC queue read by the loop). */
struct qpoll {
	struct env_poller p;
	unsigned left; /* items still to find */
	unsigned polls;
};

static unsigned
qpoll_poll(struct env_poller *p)
{
	struct qpoll *q = p->arg;
	unsigned got = q->left > 4 ? 4 : q->left;

	q->polls++;
	q->left -= got;
	return got;
}

TEST(real_poller_runs_every_turn_and_sleeps_adaptively_when_idle)
{
	struct env *env = env_real_create(NULL);
	struct qpoll q = { .left = 40 };
	uint64_t t0;
	int n;

	SH_ASSERT_NOT_NULL(env);
	q.p.poll = qpoll_poll;
	q.p.arg = &q;
	q.p.max_sleep_ns = 2 * SH_NSEC_PER_MSEC;
	SH_ASSERT_OK(env_poller_add(env, &q.p));
	/* while it finds work the loop never sleeps: ten turns of a 1 s timeout take no time */
	t0 = sh_clock_mono_ns();
	for (int i = 0; i < 10; i++) {
		n = env_real_run_once(env, SH_NSEC_PER_SEC);
		SH_ASSERT_MSG(n == 4, "turn %d: %d found, %u polls", i, n, q.polls);
	}
	SH_ASSERT_EQ(q.left, 0u);
	SH_ASSERT_LT(sh_clock_mono_ns() - t0, 500 * SH_NSEC_PER_MSEC);
	/* idle, it backs off from 1 us to max_sleep_ns: a turn with a 1 s timeout lasts no longer
	 * than that (and some slack), and the backoff has reached it after a dozen turns */
	for (int i = 0; i < 12; i++)
		env_real_run_once(env, SH_NSEC_PER_SEC);
	SH_ASSERT_EQ(q.p.backoff_ns, 2 * SH_NSEC_PER_MSEC);
	t0 = sh_clock_mono_ns();
	env_real_run_once(env, SH_NSEC_PER_SEC);
	SH_ASSERT_GE(sh_clock_mono_ns() - t0, SH_NSEC_PER_MSEC);
	SH_ASSERT_LT(sh_clock_mono_ns() - t0, 200 * SH_NSEC_PER_MSEC);
	/* work again: found on the next turn, and the backoff is gone */
	q.left = 1;
	SH_ASSERT_EQ(env_real_run_once(env, SH_NSEC_PER_SEC), 1);
	SH_ASSERT_EQ(q.p.backoff_ns, 0u);
	/* removed: never polled again */
	env_poller_del(&q.p);
	unsigned polls = q.polls;

	env_real_run_once(env, SH_NSEC_PER_MSEC);
	SH_ASSERT_EQ(q.polls, polls);
	env_real_destroy(env);
}

/* A poller woken by an eventfd while armed (RX interrupts), fed from another thread. */
struct ipoll {
	struct env_poller p;
	_Atomic unsigned left;
	unsigned arms, disarms;
	bool on;
};

static unsigned
ipoll_poll(struct env_poller *p)
{
	struct ipoll *q = p->arg;

	return atomic_exchange(&q->left, 0);
}

static int
ipoll_arm(struct env_poller *p, bool on)
{
	struct ipoll *q = p->arg;

	SH_ASSERT(q->on != on); /* never armed twice, never disarmed unarmed */
	q->on = on;
	on ? q->arms++ : q->disarms++;
	return 0;
}

static void *
ipoll_feed(void *arg)
{
	struct ipoll *q = arg;
	uint64_t one = 1;

	usleep(50 * 1000);
	atomic_store(&q->left, 3);
	SH_ASSERT_EQ(write(q->p.fd, &one, sizeof(one)), (ssize_t)sizeof(one));
	return NULL;
}

TEST(real_poller_with_interrupts_sleeps_armed_until_its_fd_says_work_came)
{
	struct env *env = env_real_create(NULL);
	struct ipoll q = { 0 };
	pthread_t th;
	uint64_t t0;
	int n = 0;

	SH_ASSERT_NOT_NULL(env);
	q.p.poll = ipoll_poll;
	q.p.arm = ipoll_arm;
	q.p.arg = &q;
	q.p.max_sleep_ns = 100 * SH_NSEC_PER_USEC;
	q.p.fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	SH_ASSERT_GE(q.p.fd, 0);
	SH_ASSERT_OK(env_poller_add(env, &q.p));
	/* idle: the backoff climbs to max_sleep_ns, then it is armed and the loop sleeps on */
	for (int i = 0; i < 12 && !q.on; i++)
		env_real_run_once(env, 0);
	SH_ASSERT(q.on);
	SH_ASSERT_EQ(q.arms, 1u);
	/* armed, a turn with a 2 s timeout sleeps until the feeder's write, not max_sleep_ns */
	SH_ASSERT_OK(pthread_create(&th, NULL, ipoll_feed, &q));
	t0 = sh_clock_mono_ns();
	while (n == 0 && sh_clock_mono_ns() - t0 < 2 * SH_NSEC_PER_SEC)
		n = env_real_run_once(env, 2 * SH_NSEC_PER_SEC);
	SH_ASSERT_GE(sh_clock_mono_ns() - t0, 40 * SH_NSEC_PER_MSEC);
	SH_ASSERT_LT(sh_clock_mono_ns() - t0, SH_NSEC_PER_SEC);
	pthread_join(th, NULL);
	SH_ASSERT_EQ(atomic_load(&q.left), 0u);
	SH_ASSERT_GE(q.disarms, 1u); /* woken: disarmed to poll */
	env_poller_del(&q.p);
	SH_ASSERT(!q.on);
	env_real_run_once(env, 0);
	close(q.p.fd);
	env_real_destroy(env);
}
