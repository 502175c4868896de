/* SPDX-License-Identifier: Apache-2.0 */
/*
 * env: the one door to the operating system (DESIGN.md §2).
 *
 * Protocol code never calls the OS for time, network, disk or randomness:
 * it calls these functions on a struct env. Two implementations exist:
 *   real (env_real.h)  epoll loop with heap timers, UDP sockets with sendmmsg/
 *                      recvmmsg, io_uring with O_DIRECT, getrandom();
 *                      event-driven or busy-polling.
 *   sim  (env_sim.h)   many nodes in one process on virtual time, seeded,
 *                      with a lossy network and crashable disks.
 *
 * Threading: an env and everything opened on it belong to one thread (the
 * loop's). Only env_async_send() may be called from another thread.
 *
 * Callbacks (libuv's rule): a call that takes a callback and returns an
 * error never calls it; one that returns 0 calls it exactly once, later,
 * never from inside the call itself. The one exception is teardown:
 * closing a disk abandons its pending requests (waiting for the device
 * where it must), so that no callback runs after env_disk_close() returns
 * and their memory can be freed at once.
 */
#ifndef SH_ENV_ENV_H
#define SH_ENV_ENV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "../base/base.h"

struct env;
struct env_dgram;
struct env_disk;

/* ---- time-ordered events (the implementations' common currency) ---- */

struct env_event {
	struct sh_heap_node hn;
	struct sh_list link; /* the owning env's list of queued events */
	struct env *env;
	void (*fire)(struct env_event *ev);
};

/* ---- addresses ---- */

struct env_addr {
	uint16_t family; /* AF_INET or AF_INET6 */
	uint16_t port;	 /* host byte order */
	uint32_t scope;	 /* IPv6 scope id */
	uint8_t ip[16];	 /* network byte order; IPv4 in the first 4 bytes */
};

#define ENV_ADDRSTRLEN 64

/* "127.0.0.1:7000", "[::1]:7000", or without port (port 0). -EINVAL if malformed. */
int env_addr_parse(const char *s, struct env_addr *out);
/* Writes "ip:port" ("[ip]:port" for IPv6); returns buf. */
const char *env_addr_format(const struct env_addr *a, char *buf, size_t len);
bool env_addr_eq(const struct env_addr *a, const struct env_addr *b);
uint64_t env_addr_hash(const struct env_addr *a);

/* ---- timers ---- */

struct env_timer;
typedef void (*env_timer_cb)(struct env_timer *t);

struct env_timer {
	struct env_event ev;
	env_timer_cb cb;
	void *arg;
};

/* Caller-allocated; may be armed and cancelled any number of times. */
void env_timer_init(struct env *env, struct env_timer *t, env_timer_cb cb, void *arg);
/* (Re)arm to fire once delay_ns from now. -ENOMEM only if the queue cannot grow. */
int env_timer_arm(struct env_timer *t, uint64_t delay_ns);
int env_timer_arm_at(struct env_timer *t, uint64_t deadline_ns);
/*
 * A periodic tick: arm t for the next point of this env's grid of
 * period_ns at least half a period from now. Every timer armed with the
 * same period on one env fires on the same points, in one wake-up of the
 * loop, where timers armed at their own times would each wake it (a node's
 * many Raft groups, its transports, its groups' housekeeping). The grid's
 * phase is drawn once per env (env_random), so nodes, and a node's
 * threads, do not tick in step. Re-armed from its callback, a timer fires
 * one period later, unless the loop ran more than half a period late.
 */
int env_timer_arm_period(struct env_timer *t, uint64_t period_ns);
/* Disarm; harmless if not armed. The callback will not run. */
void env_timer_cancel(struct env_timer *t);
static inline bool
env_timer_armed(const struct env_timer *t)
{
	return sh_heap_node_queued(&t->ev.hn);
}

/* ---- deferred work on the loop ---- */

struct env_task;
typedef void (*env_task_cb)(struct env_task *t);

struct env_task {
	struct env_event ev;
	env_task_cb cb;
	void *arg;
};

void env_task_init(struct env *env, struct env_task *t, env_task_cb cb, void *arg);
/* Run t->cb on the loop soon (same thread), in post order. Posting a queued task is a no-op. */
void env_post(struct env_task *t);
void env_task_cancel(struct env_task *t);

/*
 * Cross-thread wake-up: env_async_send() from any thread makes cb run once
 * on the env's loop (several sends before it runs coalesce).
 */
struct env_async;
typedef void (*env_async_cb)(struct env_async *a);

struct env_async {
	struct env_event ev;
	_Atomic int pending;
	env_async_cb cb;
	void *arg;
};

int env_async_init(struct env *env, struct env_async *a, env_async_cb cb, void *arg);
void env_async_send(struct env_async *a);
void env_async_fini(struct env_async *a);

/* ---- pollers: queues the loop reads itself ---- */

/*
 * Something only the loop can look at, without a file descriptor that says
 * when (a user-space NIC queue: net/dpdk). poll reads what is there and
 * returns how much it found (0: nothing). ENV_REAL_POLL runs it every
 * turn. ENV_REAL_EVENT runs it every turn too and sleeps no longer than
 * the poller's backoff: none while it finds work, then from 1 us doubling
 * up to max_sleep_ns (adaptive sleep-polling: a burst is read at once, an
 * idle poller costs about a wake-up per max_sleep_ns).
 *
 * A poller that can say when work arrives (RX interrupts) gives arm and
 * fd: once the backoff has reached max_sleep_ns, ENV_REAL_EVENT arms it
 * (arm(p, true): fd becomes readable when work arrives), polls once more
 * for what came meanwhile, and sleeps as long as nothing else is due; the
 * next turn disarms it (arm(p, false)). The loop watches fd edge-triggered
 * and never reads it (it may be the queue itself, as a tap's is). An arm
 * that fails (-errno) leaves the poller sleep-polling.
 *
 * Only the real env has pollers (-EOPNOTSUPP elsewhere).
 */
struct env_poller {
	unsigned (*poll)(struct env_poller *p);
	void *arg;
	uint64_t max_sleep_ns;			   /* 0: 1 ms */
	int (*arm)(struct env_poller *p, bool on); /* optional */
	int fd;					   /* with arm */
	/* the loop's */
	struct env *env;
	struct sh_list link;
	uint64_t backoff_ns;
	bool armed;
	void *impl;
};

int env_poller_add(struct env *env, struct env_poller *p);
/* Harmless if not added. */
void env_poller_del(struct env_poller *p);

/* ---- datagram endpoints ---- */

/* Largest payload of one datagram (IPv4 UDP: 65535 - 8 - 20). */
#define ENV_DGRAM_MAX 65507
/* Most datagrams in one env_dgram_send() or one receive callback. */
#define ENV_DGRAM_BATCH 64
/* Most iovecs in one datagram. */
#define ENV_DGRAM_IOV_MAX 16

struct sh_buf;

struct env_dgram_msg {
	struct env_addr peer; /* destination on send, source on receive */
	struct iovec *iov;
	unsigned iovcnt;
	size_t len; /* receive: bytes in iov[0]; ignored on send */
	/*
	 * send, NULL or one per iov: the buffer iov[j] lies in, which a
	 * transport may keep a reference on (sh_buf_get) to send from it
	 * after the call returns (a DPDK port's zero-copy sends); NULL where
	 * the bytes are valid only during the call.
	 */
	struct sh_buf *const *bufs;
};

struct env_dgram_cbs {
	/*
	 * n datagrams arrived. Each msgs[i].iov[0] is env memory valid only
	 * until this callback returns; msgs[i].len is its length.
	 */
	void (*recv)(struct env_dgram *d, const struct env_dgram_msg *msgs, unsigned n, void *arg);
	/* After a send accepted fewer than asked: the endpoint can take more. Optional. */
	void (*writable)(struct env_dgram *d, void *arg);
};

struct env_dgram_stats {
	uint64_t sent, send_dropped, send_calls;
	uint64_t received, recv_dropped, recv_calls;
};

/*
 * Bind an endpoint (port 0: any free port). cbs and arg must stay valid
 * until env_dgram_close(). -EADDRINUSE, -EADDRNOTAVAIL, -EINVAL, -ENOMEM.
 */
int env_dgram_open(struct env *env, const struct env_addr *bind, const struct env_dgram_cbs *cbs,
		   void *arg, struct env_dgram **out);
/* The bound address (with the real port after binding port 0). */
int env_dgram_addr(struct env_dgram *d, struct env_addr *out);
/*
 * Send up to n datagrams (n <= ENV_DGRAM_BATCH) in one call. Datagrams are
 * unreliable: a lost one is not an error. Returns how many were taken
 * (0..n); fewer than n means the endpoint is full and cbs->writable will be
 * called when it can take more. -EMSGSIZE if a datagram is larger than
 * ENV_DGRAM_MAX, -EINVAL for a bad batch (n, iovcnt, address family).
 * The bytes are copied or sent before the call returns.
 */
int env_dgram_send(struct env_dgram *d, const struct env_dgram_msg *msgs, unsigned n);
void env_dgram_stats(struct env_dgram *d, struct env_dgram_stats *out);
/*
 * The largest datagram payload the endpoint's interface carries in one
 * frame (its MTU less the IP and UDP headers; at most ENV_DGRAM_MAX), or 0
 * when that is not known: bound to every address, or an address no
 * interface of this host has.
 */
uint32_t env_dgram_mtu(struct env_dgram *d);
void env_dgram_close(struct env_dgram *d);

/* ---- disks ---- */

enum env_disk_op {
	ENV_DISK_READ = 0,
	ENV_DISK_WRITE,
	/* Makes durable every write that completed before the fsync was submitted. */
	ENV_DISK_FSYNC,
	/* A write that is durable when it completes (RWF_DSYNC: FUA where the device has it). */
	ENV_DISK_WRITE_DSYNC,
};

#define ENV_DISK_CREATE 0x1 /* create (or truncate up) the file to the given size */
#define ENV_DISK_DIRECT 0x2 /* O_DIRECT: buffers, offsets and lengths block-aligned */

#define ENV_DISK_BLOCK	 4096
#define ENV_DISK_IOV_MAX 64

struct env_disk_req;
typedef void (*env_disk_cb)(struct env_disk_req *r, int result);

/*
 * A caller-allocated request, zero-initialized before its first submit
 * (a designated initializer does it). result: bytes transferred (the full
 * length) or a negative errno; a short transfer is reported as -EIO. The
 * request and its iov memory must stay valid until the callback, and it may
 * be submitted again from the callback.
 */
struct env_disk_req {
	enum env_disk_op op;
	uint64_t off;
	struct iovec *iov;
	unsigned iovcnt;
	env_disk_cb cb;
	void *arg;
	/* private to the implementation */
	struct env_event ev;
	struct env_disk *disk;
	size_t len;
	int result;
	bool inflight;
	uint64_t flush_seq;
	int buf_slot; /* the registered buffer its one iovec lies in, or -1 */
};

struct env_disk_info {
	uint64_t size;
	uint32_t block;
	bool direct;
};

/*
 * Open a disk: a file or a block device. With ENV_DISK_CREATE a file is
 * created or grown to size bytes; otherwise size is ignored and the disk's
 * size is the file's (or device's). With ENV_DISK_DIRECT a file system
 * that cannot do O_DIRECT (tmpfs) gives -EINVAL and a log line saying so;
 * a file that does not exist, opened without ENV_DISK_CREATE, -ENOENT and no
 * log line (the caller says what that means).
 */
int env_disk_open(struct env *env, const char *path, unsigned flags, uint64_t size,
		  struct env_disk **out);
/*
 * Queue a request; requests are submitted in batches when the loop comes
 * round. -EINVAL (bad op, iovcnt, alignment), -ERANGE (past the end of
 * the disk) or -EBUSY (this request is already in flight) are returned at
 * once, with a log line that says which.
 */
int env_disk_submit(struct env_disk *d, struct env_disk_req *r);
void env_disk_info(struct env_disk *d, struct env_disk_info *out);
/* Close; requests still pending are abandoned: their callbacks never run. */
void env_disk_close(struct env_disk *d);
/* Remove a disk file that is not open: 0, -ENOENT (none), -EBUSY (open), or unlink's error. */
int env_disk_remove(struct env *env, const char *path);

#define ENV_DISK_BUFS_MAX 16

/*
 * Register memory that disk I/O will come from or go to (io_uring fixed
 * buffers: the kernel pins its pages once, not at every request). A read
 * or write with one iovec inside a registered region then skips the
 * per-request pinning; every other request works as before. Returns the
 * slot (>= 0) to unregister with; -ENOSPC when ENV_DISK_BUFS_MAX regions
 * are registered; -EOPNOTSUPP, -ENOMEM (RLIMIT_MEMLOCK) or -EINVAL
 * (unaligned) when the memory cannot be registered, which callers may
 * ignore. Unregister before the memory is freed; requests in flight keep
 * working.
 */
int env_disk_buf_register(struct env *env, void *base, size_t len);
void env_disk_buf_unregister(struct env *env, int slot);

/* ---- clock and randomness ---- */

/* Monotonic nanoseconds (virtual in the simulator). */
uint64_t env_now(struct env *env);
/* Wall-clock nanoseconds since the Unix epoch (virtual in the simulator). */
uint64_t env_realtime(struct env *env);
/*
 * Monotonic nanoseconds read now, callable from any thread (env_now is the
 * loop's clock of this turn, for the loop's own thread): the OS clock in
 * real, the virtual time in the simulator (whose env has one thread).
 */
uint64_t env_clock(struct env *env);
/* Random bytes: getrandom() in real, the seeded generator in the simulator. */
void env_random(struct env *env, void *buf, size_t len);
uint64_t env_random_u64(struct env *env);
const char *env_name(struct env *env);

/* ---- the implementations' vtable ---- */

struct env_ops {
	const char *name;
	unsigned version;
	uint64_t (*now)(struct env *env);
	uint64_t (*realtime)(struct env *env);
	uint64_t (*clock)(struct env *env);
	void (*random)(struct env *env, void *buf, size_t len);
	int (*event_push)(struct env *env, struct env_event *ev, uint64_t when);
	void (*event_cancel)(struct env *env, struct env_event *ev);
	void (*post)(struct env *env, struct env_event *ev);
	int (*async_init)(struct env *env, struct env_async *a);
	void (*async_send)(struct env_async *a);
	void (*async_fini)(struct env_async *a);
	int (*dgram_open)(struct env *env, const struct env_addr *bind,
			  const struct env_dgram_cbs *cbs, void *arg, struct env_dgram **out);
	int (*dgram_addr)(struct env_dgram *d, struct env_addr *out);
	int (*dgram_send)(struct env_dgram *d, const struct env_dgram_msg *msgs, unsigned n);
	void (*dgram_stats)(struct env_dgram *d, struct env_dgram_stats *out);
	uint32_t (*dgram_mtu)(struct env_dgram *d);
	void (*dgram_close)(struct env_dgram *d);
	int (*disk_open)(struct env *env, const char *path, unsigned flags, uint64_t size,
			 struct env_disk **out);
	int (*disk_submit)(struct env_disk *d, struct env_disk_req *r);
	void (*disk_info)(struct env_disk *d, struct env_disk_info *out);
	void (*disk_close)(struct env_disk *d);
	int (*disk_remove)(struct env *env, const char *path);
	/* optional: give region (base, len) slot to the kernel; len 0 clears it */
	int (*disk_buf_update)(struct env *env, unsigned slot, void *base, size_t len);
	/* optional: pollers (env_poller_add) */
	int (*poller_add)(struct env *env, struct env_poller *p);
	void (*poller_del)(struct env_poller *p);
};

struct env_disk_buf {
	uintptr_t base;
	size_t len; /* 0: a free slot */
};

struct env {
	const struct env_ops *ops;
	char name[32];
	struct env_disk_buf bufs[ENV_DISK_BUFS_MAX];
	unsigned nbufs; /* slots in use */
	uint64_t phase; /* env_timer_arm_period's grid; 0 until first drawn */
};

/* Common handles: implementations embed these first. */
struct env_dgram {
	struct env *env;
};

struct env_disk {
	struct env *env;
	struct env_disk_info info;
	char *path;
};

/* For implementations: validation shared by real and sim. */
int env_disk_req_check(struct env_disk *d, struct env_disk_req *r);
int env_dgram_batch_check(const struct env_dgram_msg *msgs, unsigned n);
int env_dgram_bind_check(const struct env_addr *bind);
void env_event_init(struct env *env, struct env_event *ev, void (*fire)(struct env_event *));

#endif /* SH_ENV_ENV_H */
