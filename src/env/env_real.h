/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The real env: one event loop per thread on the operating system.
 *
 *   ENV_REAL_EVENT  sleeps in epoll_pwait2 when idle (CPU-optimized mode),
 *                   until the earliest timer; eventfd for io_uring
 *                   completions and cross-thread wake-ups.
 *   ENV_REAL_POLL   never sleeps (performance-optimized mode, a dedicated
 *                   core): every turn polls sockets with epoll_wait(0), reaps
 *                   io_uring completions and checks the clock.
 */
#ifndef SH_ENV_ENV_REAL_H
#define SH_ENV_ENV_REAL_H

#include "env.h"

enum env_real_mode {
	ENV_REAL_EVENT = 0,
	ENV_REAL_POLL,
};

struct env_real_opts {
	enum env_real_mode mode;
	unsigned uring_depth; /* 0: 256 */
	const char *name;     /* for logs; default "real" */
	/*
	 * ENV_REAL_EVENT: after activity, poll this long before sleeping, so
	 * that a reply that is a few microseconds away does not pay for a
	 * sleep and a wake-up. 0: the default, 50 us; UINT64_MAX: never spin.
	 */
	uint64_t spin_ns;
	/*
	 * Disk requests: false (default) submits each at once, one
	 * io_uring_enter per request, lowest latency; true collects the turn's
	 * requests into one submission, fewest system calls.
	 */
	bool batch_disk_submit;
};

/* Create a loop for the calling thread. opts may be NULL. NULL and errno set on failure. */
struct env *env_real_create(const struct env_real_opts *opts);
/* Frees the loop. Open handles (endpoints, disks) must be closed first.
 */
void env_real_destroy(struct env *env);
/* Run until env_real_stop(). Returns 0 or a negative errno from the OS. */
int env_real_run(struct env *env);
/*
 * One turn: wait up to timeout_ns for events (0: don't wait; UINT64_MAX:
 * until something happens), then run what is due. Returns the number of
 * callbacks run or a negative errno.
 */
int env_real_run_once(struct env *env, uint64_t timeout_ns);
/* Make env_real_run() return; callable from any thread or a signal handler. */
void env_real_stop(struct env *env);

#endif /* SH_ENV_ENV_REAL_H */
