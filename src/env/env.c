// SPDX-License-Identifier: Apache-2.0
/*
 * The env front door: thin dispatch to the implementation's vtable, plus the
 * argument checks shared by every implementation (so real and sim reject
 * exactly the same bad calls), timers, tasks and addresses.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "env.h"

SH_LOG_FACILITY("env");

void
env_event_init(struct env *env, struct env_event *ev, void (*fire)(struct env_event *))
{
	sh_heap_node_init(&ev->hn);
	sh_list_init(&ev->link);
	ev->env = env;
	ev->fire = fire;
}

/* ---- clock, randomness ---- */

uint64_t
env_now(struct env *env)
{
	return env->ops->now(env);
}

uint64_t
env_realtime(struct env *env)
{
	return env->ops->realtime(env);
}

uint64_t
env_clock(struct env *env)
{
	return env->ops->clock(env);
}

void
env_random(struct env *env, void *buf, size_t len)
{
	env->ops->random(env, buf, len);
}

uint64_t
env_random_u64(struct env *env)
{
	uint64_t v;

	env->ops->random(env, &v, sizeof(v));
	return v;
}

const char *
env_name(struct env *env)
{
	return env->name;
}

/* ---- timers ---- */

static void
timer_fire(struct env_event *ev)
{
	struct env_timer *t = sh_container_of(ev, struct env_timer, ev);

	t->cb(t);
}

void
env_timer_init(struct env *env, struct env_timer *t, env_timer_cb cb, void *arg)
{
	env_event_init(env, &t->ev, timer_fire);
	t->cb = cb;
	t->arg = arg;
}

int
env_timer_arm_at(struct env_timer *t, uint64_t deadline_ns)
{
	struct env *env = t->ev.env;

	if (sh_heap_node_queued(&t->ev.hn))
		env->ops->event_cancel(env, &t->ev);
	return env->ops->event_push(env, &t->ev, deadline_ns);
}

int
env_timer_arm(struct env_timer *t, uint64_t delay_ns)
{
	uint64_t now = env_now(t->ev.env);
	uint64_t when = now + delay_ns < now ? UINT64_MAX : now + delay_ns;

	return env_timer_arm_at(t, when);
}

int
env_timer_arm_period(struct env_timer *t, uint64_t period_ns)
{
	struct env *env = t->ev.env;
	uint64_t from = env_now(env), off;

	if (period_ns == 0)
		return env_timer_arm_at(t, from);
	if (env->phase == 0)
		env->phase = env_random_u64(env) | 1;
	off = env->phase % period_ns;
	from += period_ns / 2; /* the first point of the grid (off + k x period) from here on */
	return env_timer_arm_at(t, from + (off + period_ns - from % period_ns) % period_ns);
}

void
env_timer_cancel(struct env_timer *t)
{
	if (sh_heap_node_queued(&t->ev.hn))
		t->ev.env->ops->event_cancel(t->ev.env, &t->ev);
}

/* ---- tasks and asyncs ---- */

static void
task_fire(struct env_event *ev)
{
	struct env_task *t = sh_container_of(ev, struct env_task, ev);

	t->cb(t);
}

void
env_task_init(struct env *env, struct env_task *t, env_task_cb cb, void *arg)
{
	env_event_init(env, &t->ev, task_fire);
	t->cb = cb;
	t->arg = arg;
}

void
env_post(struct env_task *t)
{
	if (sh_heap_node_queued(&t->ev.hn) || !sh_list_empty(&t->ev.link))
		return;
	t->ev.env->ops->post(t->ev.env, &t->ev);
}

void
env_task_cancel(struct env_task *t)
{
	t->ev.env->ops->event_cancel(t->ev.env, &t->ev);
}

static void
async_fire(struct env_event *ev)
{
	struct env_async *a = sh_container_of(ev, struct env_async, ev);

	if (atomic_exchange(&a->pending, 0))
		a->cb(a);
}

int
env_poller_add(struct env *env, struct env_poller *p)
{
	if (env->ops->poller_add == NULL)
		return -EOPNOTSUPP;
	p->env = env;
	p->backoff_ns = 0;
	if (p->max_sleep_ns == 0)
		p->max_sleep_ns = SH_NSEC_PER_MSEC;
	return env->ops->poller_add(env, p);
}

void
env_poller_del(struct env_poller *p)
{
	if (p->env != NULL && p->env->ops->poller_del != NULL)
		p->env->ops->poller_del(p);
	p->env = NULL;
}

int
env_async_init(struct env *env, struct env_async *a, env_async_cb cb, void *arg)
{
	env_event_init(env, &a->ev, async_fire);
	atomic_init(&a->pending, 0);
	a->cb = cb;
	a->arg = arg;
	return env->ops->async_init(env, a);
}

void
env_async_send(struct env_async *a)
{
	if (atomic_exchange(&a->pending, 1) == 0)
		a->ev.env->ops->async_send(a);
}

void
env_async_fini(struct env_async *a)
{
	a->ev.env->ops->async_fini(a);
}

/* ---- datagrams ---- */

int
env_dgram_bind_check(const struct env_addr *bind)
{
	if (bind == NULL || (bind->family != AF_INET && bind->family != AF_INET6)) {
		sh_log_warn("dgram open: address family %d is not IPv4 or IPv6",
			    bind ? bind->family : -1);
		return -EINVAL;
	}
	return 0;
}

int
env_dgram_open(struct env *env, const struct env_addr *bind, const struct env_dgram_cbs *cbs,
	       void *arg, struct env_dgram **out)
{
	int rc = env_dgram_bind_check(bind);

	if (rc < 0)
		return rc;
	if (cbs == NULL || cbs->recv == NULL || out == NULL) {
		sh_log_warn("dgram open: a receive callback is required");
		return -EINVAL;
	}
	return env->ops->dgram_open(env, bind, cbs, arg, out);
}

int
env_dgram_addr(struct env_dgram *d, struct env_addr *out)
{
	return d->env->ops->dgram_addr(d, out);
}

int
env_dgram_batch_check(const struct env_dgram_msg *msgs, unsigned n)
{
	if (n > ENV_DGRAM_BATCH || (n > 0 && msgs == NULL)) {
		sh_log_warn("dgram send: batch of %u datagrams (at most %d)", n, ENV_DGRAM_BATCH);
		return -EINVAL;
	}
	for (unsigned i = 0; i < n; i++) {
		size_t len = 0;

		if (msgs[i].iovcnt > ENV_DGRAM_IOV_MAX || (msgs[i].iovcnt && !msgs[i].iov)) {
			sh_log_warn("dgram send: %u iovecs in datagram %u (at most %d)",
				    msgs[i].iovcnt, i, ENV_DGRAM_IOV_MAX);
			return -EINVAL;
		}
		if (msgs[i].peer.family != AF_INET && msgs[i].peer.family != AF_INET6) {
			sh_log_warn("dgram send: datagram %u has no destination address", i);
			return -EINVAL;
		}
		for (unsigned k = 0; k < msgs[i].iovcnt; k++) {
			if (msgs[i].iov[k].iov_len > ENV_DGRAM_MAX) {
				len = SIZE_MAX;
				break;
			}
			len += msgs[i].iov[k].iov_len;
		}
		if (len > ENV_DGRAM_MAX) {
			sh_log_warn("dgram send: datagram %u is larger than %d bytes", i,
				    ENV_DGRAM_MAX);
			return -EMSGSIZE;
		}
	}
	return 0;
}

int
env_dgram_send(struct env_dgram *d, const struct env_dgram_msg *msgs, unsigned n)
{
	int rc = env_dgram_batch_check(msgs, n);

	if (rc < 0)
		return rc;
	if (n == 0)
		return 0;
	return d->env->ops->dgram_send(d, msgs, n);
}

void
env_dgram_stats(struct env_dgram *d, struct env_dgram_stats *out)
{
	d->env->ops->dgram_stats(d, out);
}

uint32_t
env_dgram_mtu(struct env_dgram *d)
{
	uint32_t mtu = d->env->ops->dgram_mtu(d);

	return mtu > ENV_DGRAM_MAX ? ENV_DGRAM_MAX : mtu;
}

void
env_dgram_close(struct env_dgram *d)
{
	if (d != NULL)
		d->env->ops->dgram_close(d);
}

/* ---- disks ---- */

int
env_disk_open(struct env *env, const char *path, unsigned flags, uint64_t size,
	      struct env_disk **out)
{
	if (path == NULL || *path == '\0' || out == NULL ||
	    (flags & ~(unsigned)(ENV_DISK_CREATE | ENV_DISK_DIRECT))) {
		sh_log_warn("disk open: bad arguments (path %s, flags %#x)", path ? path : "(null)",
			    flags);
		return -EINVAL;
	}
	if ((flags & ENV_DISK_CREATE) && (size == 0 || (size % ENV_DISK_BLOCK) != 0)) {
		sh_log_warn("disk open %s: size %llu is not a positive multiple of %d", path,
			    (unsigned long long)size, ENV_DISK_BLOCK);
		return -EINVAL;
	}
	return env->ops->disk_open(env, path, flags, size, out);
}

int
env_disk_req_check(struct env_disk *d, struct env_disk_req *r)
{
	uint64_t len = 0;
	uint32_t blk = d->info.direct ? d->info.block : 1;

	if (r == NULL || r->cb == NULL || (unsigned)r->op > ENV_DISK_WRITE_DSYNC) {
		sh_log_warn("disk %s: request without callback or with bad op", d->path);
		return -EINVAL;
	}
	r->disk = d;
	r->len = 0;
	if (r->op == ENV_DISK_FSYNC)
		return 0;
	if (r->iovcnt == 0 || r->iovcnt > ENV_DISK_IOV_MAX || r->iov == NULL) {
		sh_log_warn("disk %s: %u iovecs (1 to %d)", d->path, r->iovcnt, ENV_DISK_IOV_MAX);
		return -EINVAL;
	}
	for (unsigned i = 0; i < r->iovcnt; i++) {
		if (r->iov[i].iov_len == 0 || r->iov[i].iov_len % blk != 0 ||
		    (uintptr_t)r->iov[i].iov_base % blk != 0) {
			sh_log_warn("disk %s: iovec %u (%p, %zu) not aligned to %u bytes", d->path,
				    i, r->iov[i].iov_base, r->iov[i].iov_len, blk);
			return -EINVAL;
		}
		len += r->iov[i].iov_len;
	}
	if (r->off % blk != 0) {
		sh_log_warn("disk %s: offset %llu not aligned to %u bytes", d->path,
			    (unsigned long long)r->off, blk);
		return -EINVAL;
	}
	if (len > INT_MAX || r->off > d->info.size || len > d->info.size - r->off) {
		sh_log_warn("disk %s: range [%llu, +%llu) is outside the disk (%llu bytes)",
			    d->path, (unsigned long long)r->off, (unsigned long long)len,
			    (unsigned long long)d->info.size);
		return -ERANGE;
	}
	r->len = (size_t)len;
	return 0;
}

static int
buf_find(const struct env *env, const struct env_disk_req *r)
{
	uintptr_t a;

	if (env->nbufs == 0 || r->iovcnt != 1 || r->op == ENV_DISK_FSYNC)
		return -1;
	a = (uintptr_t)r->iov[0].iov_base;
	for (unsigned i = 0; i < ENV_DISK_BUFS_MAX; i++) {
		const struct env_disk_buf *b = &env->bufs[i];

		if (b->len > 0 && a >= b->base && r->iov[0].iov_len <= b->len - (a - b->base))
			return (int)i;
	}
	return -1;
}

int
env_disk_buf_register(struct env *env, void *base, size_t len)
{
	unsigned slot;
	int rc;

	if (base == NULL || len == 0 || (uintptr_t)base % ENV_DISK_BLOCK != 0 ||
	    len % ENV_DISK_BLOCK != 0) {
		sh_log_warn("disk buffer register: region %p +%zu is not block-aligned", base, len);
		return -EINVAL;
	}
	for (slot = 0; slot < ENV_DISK_BUFS_MAX; slot++)
		if (env->bufs[slot].len == 0)
			break;
	if (slot == ENV_DISK_BUFS_MAX)
		return -ENOSPC;
	if (env->ops->disk_buf_update != NULL) {
		rc = env->ops->disk_buf_update(env, slot, base, len);
		if (rc < 0)
			return rc;
	}
	env->bufs[slot] = (struct env_disk_buf){ (uintptr_t)base, len };
	env->nbufs++;
	return (int)slot;
}

void
env_disk_buf_unregister(struct env *env, int slot)
{
	if (slot < 0 || slot >= ENV_DISK_BUFS_MAX || env->bufs[slot].len == 0)
		return;
	if (env->ops->disk_buf_update != NULL)
		env->ops->disk_buf_update(env, (unsigned)slot, NULL, 0);
	env->bufs[slot] = (struct env_disk_buf){ 0, 0 };
	env->nbufs--;
}

int
env_disk_submit(struct env_disk *d, struct env_disk_req *r)
{
	int rc;

	if (r != NULL && r->inflight) {
		sh_log_warn("disk %s: request %p submitted again while in flight", d->path,
			    (void *)r);
		return -EBUSY;
	}
	rc = env_disk_req_check(d, r);
	if (rc < 0)
		return rc;
	r->result = 0;
	r->inflight = true;
	r->buf_slot = buf_find(d->env, r);
	rc = d->env->ops->disk_submit(d, r);
	if (rc < 0)
		r->inflight = false;
	return rc;
}

void
env_disk_info(struct env_disk *d, struct env_disk_info *out)
{
	*out = d->info;
}

int
env_disk_remove(struct env *env, const char *path)
{
	if (path == NULL || *path == '\0')
		return -EINVAL;
	return env->ops->disk_remove(env, path);
}

void
env_disk_close(struct env_disk *d)
{
	if (d != NULL)
		d->env->ops->disk_close(d);
}

/* ---- addresses ---- */

int
env_addr_parse(const char *s, struct env_addr *out)
{
	char host[INET6_ADDRSTRLEN + 1];
	const char *port = NULL, *h = s;
	size_t hlen;
	unsigned long p = 0;
	char *end;

	if (s == NULL || out == NULL)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	if (*s == '[') {
		const char *rb = strchr(s, ']');

		if (rb == NULL)
			return -EINVAL;
		h = s + 1;
		hlen = (size_t)(rb - h);
		if (rb[1] == ':')
			port = rb + 2;
		else if (rb[1] != '\0')
			return -EINVAL;
	} else {
		const char *colon = strchr(s, ':');

		if (colon != NULL && strchr(colon + 1, ':') != NULL) {
			hlen = strlen(s); /* bare IPv6 without port */
		} else {
			hlen = colon ? (size_t)(colon - s) : strlen(s);
			port = colon ? colon + 1 : NULL;
		}
	}
	if (hlen == 0 || hlen >= sizeof(host))
		return -EINVAL;
	memcpy(host, h, hlen);
	host[hlen] = '\0';
	if (port != NULL) {
		if (*port == '\0' || *port == '-' || *port == '+')
			return -EINVAL;
		errno = 0;
		p = strtoul(port, &end, 10);
		if (errno != 0 || *end != '\0' || p > 65535)
			return -EINVAL;
	}
	if (inet_pton(AF_INET, host, out->ip) == 1) {
		out->family = AF_INET;
	} else if (inet_pton(AF_INET6, host, out->ip) == 1) {
		out->family = AF_INET6;
	} else {
		return -EINVAL;
	}
	out->port = (uint16_t)p;
	return 0;
}

const char *
env_addr_format(const struct env_addr *a, char *buf, size_t len)
{
	char ip[INET6_ADDRSTRLEN];

	if (a->family == AF_INET && inet_ntop(AF_INET, a->ip, ip, sizeof(ip)))
		snprintf(buf, len, "%s:%u", ip, a->port);
	else if (a->family == AF_INET6 && inet_ntop(AF_INET6, a->ip, ip, sizeof(ip)))
		snprintf(buf, len, "[%s]:%u", ip, a->port);
	else
		snprintf(buf, len, "(no address)");
	return buf;
}

bool
env_addr_eq(const struct env_addr *a, const struct env_addr *b)
{
	size_t n = a->family == AF_INET ? 4 : 16;

	return a->family == b->family && a->port == b->port && memcmp(a->ip, b->ip, n) == 0 &&
	       (a->family == AF_INET || a->scope == b->scope);
}

uint64_t
env_addr_hash(const struct env_addr *a)
{
	size_t n = a->family == AF_INET ? 4 : 16;
	uint64_t h = sh_hash64(a->ip, n, a->family);

	return sh_hash_u64(h ^ a->port);
}
