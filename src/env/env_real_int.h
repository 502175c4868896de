/* SPDX-License-Identifier: Apache-2.0 */
/* Private to the real env: the loop structure shared by env_real*.c. */
#ifndef SH_ENV_ENV_REAL_INT_H
#define SH_ENV_ENV_REAL_INT_H

#include <liburing.h>
#include <stdatomic.h>

#include "env_real.h"

/* Something registered with epoll: fn runs with the ready events. */
struct real_watch {
	void (*fn)(struct real_watch *w, uint32_t events);
	/* Closed handles are freed at the end of the turn, since epoll may
	 * still have returned their events in this one; dead ones are skipped. */
	bool dead;
	struct sh_list zlink;
	void (*free)(struct real_watch *w);
	/* POLL mode: read without asking epoll first (sockets) */
	struct sh_list plink;
	void (*poll)(struct real_watch *w);
};

struct env_real {
	struct env env;
	enum env_real_mode mode;
	uint64_t spin_ns;
	uint64_t last_event_ns; /* when an fd last had something */
	uint64_t now;		/* the loop's time, read once per turn and after each wait */
	int epfd;
	int efd; /* eventfd: asyncs and stop */
	struct real_watch efd_watch;
	struct sh_heap timers;
	struct sh_list ready; /* posted tasks */
	struct sh_list asyncs;
	struct sh_list zombies; /* real_watch.zlink of closed handles */
	struct sh_list polled;	/* real_watch.plink: read directly each turn in POLL mode */
	struct sh_list pollers; /* env_poller.link: run every turn */
	unsigned turn;
	_Atomic int stop;
	int ncallbacks; /* callbacks run in the current turn */

	/* io_uring for disks */
	struct io_uring ring;
	bool ring_ok;
	bool ring_bufs;	   /* a sparse fixed-buffer table is registered */
	bool eager_submit; /* disk requests go to the kernel at once, not with the turn */
	/* waiting in the ring: epoll's fd is polled through it (one-shot POLL_ADD) */
	char poll_token;
	bool poll_armed;
	bool poll_fired;
	unsigned ring_unsubmitted;
	unsigned ring_inflight;
	struct sh_list ring_backlog; /* requests waiting for a free SQE */
	struct sh_list done;	     /* requests completed without I/O (faults, cancel) */
	struct sh_list disks;
};

static inline struct env_real *
to_real(struct env *env)
{
	return sh_container_of(env, struct env_real, env);
}

int real_watch_add(struct env_real *r, int fd, uint32_t events, struct real_watch *w);
int real_watch_mod(struct env_real *r, int fd, uint32_t events, struct real_watch *w);
void real_watch_del(struct env_real *r, int fd);
/* Stop watching fd and free w (through w->free) at the end of the turn. */
void real_watch_retire(struct env_real *r, int fd, struct real_watch *w);

/* env_real_udp.c */
int real_dgram_open(struct env *env, const struct env_addr *bind, const struct env_dgram_cbs *cbs,
		    void *arg, struct env_dgram **out);
int real_dgram_addr(struct env_dgram *d, struct env_addr *out);
int real_dgram_send(struct env_dgram *d, const struct env_dgram_msg *msgs, unsigned n);
void real_dgram_stats(struct env_dgram *d, struct env_dgram_stats *out);
uint32_t real_dgram_mtu(struct env_dgram *d);
void real_dgram_close(struct env_dgram *d);

/* env_real_disk.c */
int real_ring_init(struct env_real *r, unsigned depth);
void real_ring_fini(struct env_real *r);
void real_ring_flush(struct env_real *r);
int real_ring_reap(struct env_real *r);
/* Disk I/O in flight: the loop should sleep in the ring, not in epoll. */
bool real_ring_busy(const struct env_real *r);
/*
 * Submit what is queued and sleep until a disk completion or until epoll
 * has something (its fd is polled through the ring), at most ts. Returns 1
 * if epoll has events, 0 if not, or a negative errno.
 */
int real_ring_wait(struct env_real *r, struct timespec *ts);
int real_disk_open(struct env *env, const char *path, unsigned flags, uint64_t size,
		   struct env_disk **out);
int real_disk_submit(struct env_disk *d, struct env_disk_req *r);
void real_disk_info(struct env_disk *d, struct env_disk_info *out);
void real_disk_close(struct env_disk *d);
int real_disk_remove(struct env *env, const char *path);
int real_disk_buf_update(struct env *env, unsigned slot, void *base, size_t len);

#endif /* SH_ENV_ENV_REAL_INT_H */
