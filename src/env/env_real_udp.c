// SPDX-License-Identifier: Apache-2.0
/*
 * UDP endpoints of the real env: non-blocking sockets, batched with
 * sendmmsg()/recvmmsg(). Received datagrams land in buffers owned by the
 * endpoint and are handed to the callback in batches of up to
 * ENV_DGRAM_BATCH; a full socket buffer on send returns a partial count and
 * arms EPOLLOUT so the owner hears when it can send again.
 *
 * Segmentation offload where the kernel has it: consecutive datagrams of
 * one size to one peer leave as one UDP_SEGMENT send (one trip through the
 * stack for up to 64 of them), and UDP_GRO lets the kernel hand over
 * several received datagrams in one buffer, split here again. Both fall
 * back to plain datagrams when the kernel refuses.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "env_real_int.h"

SH_LOG_FACILITY("env.udp");

/* Batches read per readiness event before yielding to other fds. */
#define RECV_ROUNDS    8
#define SOCK_BUF_BYTES (8 << 20)
#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif
#define GSO_MAX_SEGS  64
#define GSO_MAX_BYTES 65000
#define CBUF_SIZE     CMSG_SPACE(sizeof(int))

struct real_dgram {
	struct env_dgram base;
	struct env_real *r;
	int fd;
	struct real_watch watch;
	uint32_t events;
	const struct env_dgram_cbs *cbs;
	void *arg;
	struct env_addr local;
	struct env_dgram_stats st;
	unsigned char *rbuf; /* ENV_DGRAM_BATCH slots of ENV_DGRAM_MAX bytes */
	/* receive headers, set up once: a poll of an empty socket touches only the first */
	struct mmsghdr mh[ENV_DGRAM_BATCH];
	struct iovec iov[ENV_DGRAM_BATCH];
	struct sockaddr_storage ss[ENV_DGRAM_BATCH];
	char cbuf[ENV_DGRAM_BATCH][CBUF_SIZE];
	bool gso, gro;
	uint32_t mtu; /* env_dgram_mtu: its interface's, found when bound */
};

static void
rx_slot_reset(struct real_dgram *d, int i)
{
	d->iov[i].iov_base = d->rbuf + (size_t)i * ENV_DGRAM_MAX;
	d->iov[i].iov_len = ENV_DGRAM_MAX;
	memset(&d->mh[i], 0, sizeof(d->mh[i]));
	d->mh[i].msg_hdr.msg_iov = &d->iov[i];
	d->mh[i].msg_hdr.msg_iovlen = 1;
	d->mh[i].msg_hdr.msg_name = &d->ss[i];
	d->mh[i].msg_hdr.msg_namelen = sizeof(d->ss[i]);
	if (d->gro) {
		d->mh[i].msg_hdr.msg_control = d->cbuf[i];
		d->mh[i].msg_hdr.msg_controllen = sizeof(d->cbuf[i]);
	}
}

/* The segment size the kernel coalesced a received buffer with (GRO), or 0. */
static int
gro_size(struct msghdr *mh)
{
	struct cmsghdr *c;

	for (c = CMSG_FIRSTHDR(mh); c != NULL; c = CMSG_NXTHDR(mh, c)) {
		if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) {
			int v;

			memcpy(&v, CMSG_DATA(c), sizeof(v));
			return v;
		}
	}
	return 0;
}

static socklen_t
to_sockaddr(const struct env_addr *a, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (a->family == AF_INET) {
		struct sockaddr_in *sin = (struct sockaddr_in *)ss;

		sin->sin_family = AF_INET;
		sin->sin_port = htons(a->port);
		memcpy(&sin->sin_addr, a->ip, 4);
		return sizeof(*sin);
	}
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;

	sin6->sin6_family = AF_INET6;
	sin6->sin6_port = htons(a->port);
	sin6->sin6_scope_id = a->scope;
	memcpy(&sin6->sin6_addr, a->ip, 16);
	return sizeof(*sin6);
}

static void
from_sockaddr(const struct sockaddr_storage *ss, struct env_addr *a)
{
	memset(a, 0, sizeof(*a));
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *sin = (const struct sockaddr_in *)ss;

		a->family = AF_INET;
		a->port = ntohs(sin->sin_port);
		memcpy(a->ip, &sin->sin_addr, 4);
	} else if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)ss;

		a->family = AF_INET6;
		a->port = ntohs(sin6->sin6_port);
		a->scope = sin6->sin6_scope_id;
		memcpy(a->ip, &sin6->sin6_addr, 16);
	}
}

/*
 * The MTU of the interface that holds address a, less the IP and UDP
 * headers: 0 for the wildcard address or one no interface holds exactly
 * (127.0.0.2 is lo's only through its /8 route).
 */
static uint32_t
iface_mtu(int fd, const struct env_addr *a)
{
	static const uint8_t any[16];
	uint32_t hdrs = a->family == AF_INET6 ? 48 : 28, mtu = 0;
	struct ifaddrs *all;

	if (memcmp(a->ip, any, sizeof(any)) == 0 || getifaddrs(&all) < 0)
		return 0;
	for (struct ifaddrs *i = all; i != NULL; i = i->ifa_next) {
		struct sockaddr_storage ss = { 0 };
		struct env_addr x;
		struct ifreq ifr = { 0 };

		if (i->ifa_addr == NULL || i->ifa_addr->sa_family != a->family)
			continue;
		memcpy(&ss, i->ifa_addr,
		       a->family == AF_INET6 ? sizeof(struct sockaddr_in6)
					     : sizeof(struct sockaddr_in));
		from_sockaddr(&ss, &x);
		if (memcmp(x.ip, a->ip, sizeof(x.ip)) != 0 ||
		    (a->scope != 0 && x.scope != a->scope))
			continue; /* (a link-local address: on the interface of its scope) */
		snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", i->ifa_name);
		if (ioctl(fd, SIOCGIFMTU, &ifr) == 0 && ifr.ifr_mtu > (int)hdrs)
			mtu = (uint32_t)ifr.ifr_mtu - hdrs;
		break;
	}
	freeifaddrs(all);
	return mtu;
}

static void
set_bufsize(int fd, int opt, int force_opt)
{
	int v = SOCK_BUF_BYTES;

	/* FORCE ignores rmem_max/wmem_max but needs CAP_NET_ADMIN */
	if (setsockopt(fd, SOL_SOCKET, force_opt, &v, sizeof(v)) < 0)
		setsockopt(fd, SOL_SOCKET, opt, &v, sizeof(v));
}

static void
deliver(struct real_dgram *d, struct env_dgram_msg *msgs, unsigned *k)
{
	if (*k == 0)
		return;
	d->st.received += *k;
	d->cbs->recv(&d->base, msgs, *k, d->arg);
	d->r->ncallbacks++;
	*k = 0;
}

static void
do_recv(struct real_dgram *d)
{
	struct mmsghdr *mh = d->mh;
	struct env_dgram_msg msgs[ENV_DGRAM_BATCH];
	struct iovec siov[ENV_DGRAM_BATCH];

	for (int round = 0; round < RECV_ROUNDS && !d->watch.dead; round++) {
		unsigned k = 0;
		int n;

		n = recvmmsg(d->fd, mh, ENV_DGRAM_BATCH, MSG_DONTWAIT, NULL);
		if (n > 0)
			d->st.recv_calls++; /* calls that returned datagrams */
		if (n < 0) {
			if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
				sh_log_debug("recvmmsg: %s", strerror(errno));
			return;
		}
		for (int i = 0; i < n && !d->watch.dead; i++) {
			unsigned char *p = d->iov[i].iov_base;
			size_t len = mh[i].msg_len;
			int seg = d->gro ? gro_size(&mh[i].msg_hdr) : 0;
			struct env_addr from;

			if (mh[i].msg_hdr.msg_flags & MSG_TRUNC) {
				d->st.recv_dropped++;
				continue;
			}
			from_sockaddr(&d->ss[i], &from);
			/* one datagram, or several the kernel coalesced (GRO): cut them apart again
			 */
			for (size_t off = 0; off < len || (len == 0 && off == 0);) {
				size_t l = seg > 0 ? SH_MIN((size_t)seg, len - off) : len;

				if (SH_FAULT(FP_ENV_DGRAM_RECV_DROP)) {
					d->st.recv_dropped++;
				} else {
					siov[k] = (struct iovec){ p + off, l };
					msgs[k] = (struct env_dgram_msg){
						.peer = from, .iov = &siov[k], .iovcnt = 1, .len = l
					};
					if (++k == ENV_DGRAM_BATCH)
						deliver(d, msgs, &k);
				}
				off += l;
				if (l == 0)
					break;
			}
		}
		if (!d->watch.dead)
			deliver(d, msgs, &k);
		if (d->watch.dead)
			return; /* closed by the callback: d is freed at the end of the turn */
		for (int i = 0; i < n; i++)
			rx_slot_reset(d, i);
		if (n < ENV_DGRAM_BATCH)
			return;
	}
}

static void
dgram_poll(struct real_watch *w)
{
	do_recv(sh_container_of(w, struct real_dgram, watch));
}

static void
dgram_ready(struct real_watch *w, uint32_t events)
{
	struct real_dgram *d = sh_container_of(w, struct real_dgram, watch);

	if (events & EPOLLOUT) {
		d->events = EPOLLIN;
		real_watch_mod(d->r, d->fd, d->events, &d->watch);
		if (d->cbs->writable != NULL) {
			d->cbs->writable(&d->base, d->arg);
			d->r->ncallbacks++;
		}
	}
	if ((events & (EPOLLIN | EPOLLERR)) && !d->watch.dead)
		do_recv(d);
}

static void
dgram_free(struct real_watch *w)
{
	struct real_dgram *d = sh_container_of(w, struct real_dgram, watch);

	sh_free(d->rbuf);
	sh_free(d);
}

int
real_dgram_open(struct env *env, const struct env_addr *bind_addr, const struct env_dgram_cbs *cbs,
		void *arg, struct env_dgram **out)
{
	struct env_real *r = to_real(env);
	struct real_dgram *d = sh_calloc(1, sizeof(*d));
	struct sockaddr_storage ss;
	socklen_t sl;
	char abuf[ENV_ADDRSTRLEN];
	int rc, one = 1;

	if (d == NULL)
		return -ENOMEM;
	d->base.env = env;
	d->r = r;
	d->cbs = cbs;
	d->arg = arg;
	d->watch.fn = dgram_ready;
	d->watch.free = dgram_free;
	d->watch.poll = dgram_poll;
	d->rbuf = sh_malloc((size_t)ENV_DGRAM_BATCH * ENV_DGRAM_MAX);
	if (d->rbuf == NULL) {
		rc = -ENOMEM;
		goto out_free;
	}
	for (int i = 0; i < ENV_DGRAM_BATCH; i++)
		rx_slot_reset(d, i);
	d->fd = socket(bind_addr->family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (d->fd < 0) {
		rc = -errno;
		goto out_free;
	}
	if (bind_addr->family == AF_INET6)
		setsockopt(d->fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	set_bufsize(d->fd, SO_RCVBUF, SO_RCVBUFFORCE);
	set_bufsize(d->fd, SO_SNDBUF, SO_SNDBUFFORCE);
	d->gro = setsockopt(d->fd, SOL_UDP, UDP_GRO, &one, sizeof(one)) == 0;
	d->gso = true; /* tried on the first send; turned off if the kernel refuses */
	for (int i = 0; i < ENV_DGRAM_BATCH; i++)
		rx_slot_reset(d, i);
	sl = to_sockaddr(bind_addr, &ss);
	if (bind(d->fd, (struct sockaddr *)&ss, sl) < 0) {
		rc = -errno;
		sh_log_warn("bind %s: %s", env_addr_format(bind_addr, abuf, sizeof(abuf)),
			    strerror(-rc));
		goto out_close;
	}
	sl = sizeof(ss);
	if (getsockname(d->fd, (struct sockaddr *)&ss, &sl) < 0) {
		rc = -errno;
		goto out_close;
	}
	from_sockaddr(&ss, &d->local);
	d->mtu = iface_mtu(d->fd, &d->local);
	d->events = EPOLLIN;
	rc = real_watch_add(r, d->fd, d->events, &d->watch);
	if (rc < 0)
		goto out_close;
	sh_list_add_tail(&r->polled, &d->watch.plink);
	sh_log_debug("bound %s", env_addr_format(&d->local, abuf, sizeof(abuf)));
	*out = &d->base;
	return 0;

out_close:
	close(d->fd);
out_free:
	sh_free(d->rbuf);
	sh_free(d);
	return rc;
}

int
real_dgram_addr(struct env_dgram *base, struct env_addr *out)
{
	*out = sh_container_of(base, struct real_dgram, base)->local;
	return 0;
}

static size_t
msg_len(const struct env_dgram_msg *m)
{
	size_t len = 0;

	for (unsigned k = 0; k < m->iovcnt; k++)
		len += m->iov[k].iov_len;
	return len;
}

/* How many datagrams from `first` can leave as one UDP_SEGMENT send (1: none). */
static unsigned
gso_group(const struct env_dgram_msg *msgs, const bool *drop, unsigned first, unsigned n)
{
	size_t seg = msg_len(&msgs[first]), total = seg;
	unsigned cnt = 1, iovs = msgs[first].iovcnt;

	if (seg == 0)
		return 1;
	for (unsigned j = first + 1; j < n && cnt < GSO_MAX_SEGS; j++) {
		size_t l = msg_len(&msgs[j]);

		if (drop[j] || !env_addr_eq(&msgs[j].peer, &msgs[first].peer) || l == 0 ||
		    l > seg || total + l > GSO_MAX_BYTES ||
		    iovs + msgs[j].iovcnt > ENV_DGRAM_IOV_MAX * 4)
			break;
		total += l;
		iovs += msgs[j].iovcnt;
		cnt++;
		if (l < seg)
			break; /* a shorter one can only be the last */
	}
	return cnt;
}

int
real_dgram_send(struct env_dgram *base, const struct env_dgram_msg *msgs, unsigned n)
{
	struct real_dgram *d = sh_container_of(base, struct real_dgram, base);
	struct mmsghdr mh[ENV_DGRAM_BATCH];
	struct sockaddr_storage ss[ENV_DGRAM_BATCH];
	struct iovec giov[ENV_DGRAM_BATCH * ENV_DGRAM_IOV_MAX];
	char cbuf[ENV_DGRAM_BATCH][CMSG_SPACE(sizeof(uint16_t))];
	unsigned idx[ENV_DGRAM_BATCH + 1], cnt[ENV_DGRAM_BATCH];
	bool drop[ENV_DGRAM_BATCH];
	unsigned k = 0, done = 0, ng = 0;

	for (unsigned i = 0; i < n; i++) {
		drop[i] = SH_FAULT(FP_ENV_DGRAM_SEND_DROP);
		d->st.send_dropped += drop[i];
	}
	for (unsigned i = 0; i < n;) {
		unsigned g;

		if (drop[i]) {
			i++;
			continue;
		}
		g = d->gso ? gso_group(msgs, drop, i, n) : 1;
		memset(&mh[k], 0, sizeof(mh[k]));
		mh[k].msg_hdr.msg_name = &ss[k];
		mh[k].msg_hdr.msg_namelen = to_sockaddr(&msgs[i].peer, &ss[k]);
		if (g == 1) {
			mh[k].msg_hdr.msg_iov = msgs[i].iov;
			mh[k].msg_hdr.msg_iovlen = msgs[i].iovcnt;
		} else {
			/* the datagrams' bytes back to back, cut every seg bytes by the kernel */
			uint16_t seg = (uint16_t)msg_len(&msgs[i]);
			struct cmsghdr *c;
			unsigned start = ng;

			for (unsigned j = i; j < i + g; j++)
				for (unsigned v = 0; v < msgs[j].iovcnt; v++)
					giov[ng++] = msgs[j].iov[v];
			mh[k].msg_hdr.msg_iov = &giov[start];
			mh[k].msg_hdr.msg_iovlen = ng - start;
			mh[k].msg_hdr.msg_control = cbuf[k];
			mh[k].msg_hdr.msg_controllen = sizeof(cbuf[k]);
			c = CMSG_FIRSTHDR(&mh[k].msg_hdr);
			c->cmsg_level = SOL_UDP;
			c->cmsg_type = UDP_SEGMENT;
			c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
			memcpy(CMSG_DATA(c), &seg, sizeof(seg));
		}
		idx[k] = i;
		cnt[k] = g;
		k++;
		i += g;
	}
	idx[k] = n;
	/* datagrams dropped by the fault point count as taken */
	while (done < k) {
		int rc = sendmmsg(d->fd, mh + done, k - done, MSG_DONTWAIT);

		d->st.send_calls++;
		if (rc > 0) {
			for (int j = 0; j < rc; j++)
				d->st.sent += cnt[done + (unsigned)j];
			done += (unsigned)rc;
			continue;
		}
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS) {
			if (!(d->events & EPOLLOUT)) {
				d->events = EPOLLIN | EPOLLOUT;
				real_watch_mod(d->r, d->fd, d->events, &d->watch);
			}
			return (int)idx[done];
		}
		if (cnt[done] > 1 && d->gso) {
			/* the kernel will not segment for us: send the rest one by one */
			int more;

			sh_log_info(
			    "UDP segmentation offload refused (%s): sending datagrams singly",
			    strerror(errno));
			d->gso = false;
			more = real_dgram_send(base, msgs + idx[done], n - idx[done]);
			return more < 0 ? (int)idx[done] : (int)idx[done] + more;
		}
		/* a datagram the network will not take (unreachable, ...) is lost, not an error */
		sh_log_debug("sendmmsg: %s; datagram dropped", strerror(errno));
		d->st.send_dropped += cnt[done];
		done++;
	}
	return (int)n;
}

void
real_dgram_stats(struct env_dgram *base, struct env_dgram_stats *out)
{
	*out = sh_container_of(base, struct real_dgram, base)->st;
}

uint32_t
real_dgram_mtu(struct env_dgram *base)
{
	return sh_container_of(base, struct real_dgram, base)->mtu;
}

void
real_dgram_close(struct env_dgram *base)
{
	struct real_dgram *d = sh_container_of(base, struct real_dgram, base);

	real_watch_retire(d->r, d->fd, &d->watch);
	close(d->fd);
	d->fd = -1;
}
