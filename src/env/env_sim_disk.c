// SPDX-License-Identifier: Apache-2.0
/*
 * Simulated disks with a volatile write cache.
 *
 * A medium (what survives a crash) holds durable 4 KiB pages plus the list
 * of completed-but-unflushed writes in completion order. Reads see the
 * durable pages overlaid with that list. An fsync remembers the newest
 * write completed when it was submitted and, when it completes, makes that
 * write and all older ones durable: exactly the guarantee a real device
 * gives, so code that forgets an fsync, or issues it before its writes
 * complete, loses data here. A crash applies a chosen subset of the
 * unflushed writes (none by default; the newest torn with SIM_CRASH_TEAR;
 * each with probability 1/2 with SIM_CRASH_KEEP_RANDOM) and drops the rest.
 *
 * Request states: submitted -> (latency) -> completed -> callback.
 * A write changes the medium only when it completes; a crash before that
 * loses it without a callback.
 */
#include <errno.h>
#include <string.h>

#include "env_sim_int.h"

SH_LOG_FACILITY("env.simdisk");

#define PAGE   ENV_DISK_BLOCK
#define SECTOR 512

struct sim_page {
	struct sh_hnode hn;
	uint64_t pno;
	unsigned char data[PAGE];
};

struct sim_vwrite {
	struct sh_list link;
	bool durable; /* a DSYNC write: already in the pages, kept here for ordering */
	uint64_t seq;
	uint64_t off;
	size_t len;
	unsigned char data[];
};

struct sim_media {
	struct sh_list link; /* node->media */
	char *path;
	uint64_t size;
	struct sh_htable pages; /* durable */
	struct sh_list vwrites; /* unflushed, oldest first */
	uint64_t write_seq;	/* seq of the newest completed write */
	unsigned opens;
};

struct sim_disk {
	struct env_disk base;
	struct sim_node *node;
	struct sim_media *m;
	struct sh_list link; /* node->disks, or node->dead_disks after a crash */
	bool dead;
};

static bool
page_eq(const struct sh_hnode *n, const void *key)
{
	return sh_container_of(n, struct sim_page, hn)->pno == *(const uint64_t *)key;
}

static struct sim_page *
page_get(struct sim_media *m, uint64_t pno, bool create)
{
	struct sh_hnode *n = sh_htable_find(&m->pages, sh_hash_u64(pno), &pno, page_eq);
	struct sim_page *p;

	if (n != NULL || !create)
		return n ? sh_container_of(n, struct sim_page, hn) : NULL;
	p = sh_calloc(1, sizeof(*p));
	if (p == NULL)
		return NULL;
	p->pno = pno;
	sh_htable_insert(&m->pages, &p->hn, sh_hash_u64(pno));
	return p;
}

/* Write bytes to the durable pages. -ENOMEM leaves a partial write (a crash-time concern only). */
static int
durable_write(struct sim_media *m, uint64_t off, const unsigned char *src, size_t len)
{
	while (len > 0) {
		uint64_t pno = off / PAGE;
		size_t po = (size_t)(off % PAGE), n = SH_MIN(PAGE - po, len);
		struct sim_page *p = page_get(m, pno, true);

		if (p == NULL)
			return -ENOMEM;
		memcpy(p->data + po, src, n);
		off += n;
		src += n;
		len -= n;
	}
	return 0;
}

static void
media_read(struct sim_media *m, uint64_t off, unsigned char *dst, size_t len)
{
	struct sh_list *pos;

	for (size_t done = 0; done < len;) {
		uint64_t o = off + done;
		size_t po = (size_t)(o % PAGE), n = SH_MIN(PAGE - po, len - done);
		struct sim_page *p = page_get(m, o / PAGE, false);

		if (p != NULL)
			memcpy(dst + done, p->data + po, n);
		else
			memset(dst + done, 0, n);
		done += n;
	}
	sh_list_for_each (pos, &m->vwrites) {
		struct sim_vwrite *w = sh_list_entry(pos, struct sim_vwrite, link);
		uint64_t lo = SH_MAX(w->off, off), hi = SH_MIN(w->off + w->len, off + len);

		if (lo < hi)
			memcpy(dst + (lo - off), w->data + (lo - w->off), hi - lo);
	}
}

static struct sim_media *
media_find(struct sim_node *node, const char *path)
{
	struct sh_list *pos;

	sh_list_for_each (pos, &node->media) {
		struct sim_media *m = sh_list_entry(pos, struct sim_media, link);

		if (strcmp(m->path, path) == 0)
			return m;
	}
	return NULL;
}

static void
media_free(struct sim_media *m)
{
	struct sh_hnode *n, *next;
	struct sh_list *pos;
	size_t it;

	while ((pos = sh_list_pop(&m->vwrites)) != NULL)
		sh_free(sh_list_entry(pos, struct sim_vwrite, link));
	for (n = sh_htable_first(&m->pages, &it); n != NULL; n = next) {
		next = sh_htable_next(&m->pages, &it, n);
		sh_htable_remove(&m->pages, n);
		sh_free(sh_container_of(n, struct sim_page, hn));
	}
	sh_htable_fini(&m->pages);
	sh_list_del(&m->link);
	sh_free(m->path);
	sh_free(m);
}

int
simdisk_remove(struct env *env, const char *path)
{
	struct sim_node *node = to_node(env);
	struct sim_media *m = media_find(node, path);

	if (!node->alive)
		return -SH_ECRASHED;
	if (m == NULL)
		return -ENOENT;
	if (m->opens > 0)
		return -EBUSY;
	media_free(m);
	return 0;
}

int
simdisk_open(struct env *env, const char *path, unsigned flags, uint64_t size,
	     struct env_disk **out)
{
	struct sim_node *node = to_node(env);
	struct sim_media *m = media_find(node, path);
	struct sim_disk *d;

	if (!node->alive)
		return -SH_ECRASHED;
	if (m == NULL) {
		if (!(flags & ENV_DISK_CREATE))
			return -ENOENT;
		m = sh_calloc(1, sizeof(*m));
		if (m == NULL)
			return -ENOMEM;
		m->path = sh_strdup(path);
		if (m->path == NULL || sh_htable_init(&m->pages, 64) < 0) {
			sh_free(m->path);
			sh_free(m);
			return -ENOMEM;
		}
		sh_list_init(&m->vwrites);
		sh_list_add_tail(&node->media, &m->link);
	}
	if ((flags & ENV_DISK_CREATE) && m->size < size)
		m->size = size;
	d = sh_calloc(1, sizeof(*d));
	if (d == NULL)
		return -ENOMEM;
	d->base.env = env;
	d->base.path = m->path;
	d->base.info.size = m->size;
	d->base.info.block = ENV_DISK_BLOCK;
	d->base.info.direct = (flags & ENV_DISK_DIRECT) != 0;
	d->node = node;
	d->m = m;
	m->opens++;
	sh_list_add_tail(&node->disks, &d->link);
	*out = &d->base;
	return 0;
}

static void
complete(struct env_event *ev)
{
	struct env_disk_req *r = sh_container_of(ev, struct env_disk_req, ev);
	struct sim_disk *d;
	struct sim *sim;

	d = sh_container_of(r->disk, struct sim_disk, base);
	sim = d->node->sim;
	if (r->result == 0) {
		struct sim_media *m = d->m;

		if (r->op == ENV_DISK_READ) {
			size_t off = 0;
			unsigned char *tmp = sh_malloc(r->len);

			if (tmp == NULL) {
				r->result = -ENOMEM;
				goto out;
			}
			media_read(m, r->off, tmp, r->len);
			for (unsigned i = 0; i < r->iovcnt; i++) {
				memcpy(r->iov[i].iov_base, tmp + off, r->iov[i].iov_len);
				off += r->iov[i].iov_len;
			}
			sh_free(tmp);
			r->result = (int)r->len;
		} else if (r->op == ENV_DISK_WRITE || r->op == ENV_DISK_WRITE_DSYNC) {
			struct sim_vwrite *w = sh_malloc(sizeof(*w) + r->len);
			size_t off = 0;

			if (w == NULL) {
				r->result = -ENOMEM;
				goto out;
			}
			for (unsigned i = 0; i < r->iovcnt; i++) {
				memcpy(w->data + off, r->iov[i].iov_base, r->iov[i].iov_len);
				off += r->iov[i].iov_len;
			}
			w->seq = ++m->write_seq;
			w->off = r->off;
			w->len = r->len;
			w->durable = r->op == ENV_DISK_WRITE_DSYNC;
			if (w->durable && durable_write(m, w->off, w->data, w->len) < 0) {
				sh_free(w);
				r->result = -ENOMEM;
				goto out;
			}
			sh_list_add_tail(&m->vwrites, &w->link);
			r->result = (int)r->len;
		} else {
			struct sh_list *pos;

			while ((pos = m->vwrites.next) != &m->vwrites) {
				struct sim_vwrite *w = sh_list_entry(pos, struct sim_vwrite, link);

				if (w->seq > r->flush_seq)
					break;
				if (durable_write(m, w->off, w->data, w->len) < 0) {
					r->result = -ENOMEM;
					goto out;
				}
				sh_list_del(pos);
				sh_free(w);
			}
		}
	}
	sim_trace_mix(sim, ((uint64_t)r->op << 60) ^ (r->off << 8) ^ r->len ^
			       ((uint64_t)(uint32_t)r->result << 32));
out:
	r->inflight = false;
	r->cb(r, r->result);
}

void
simdisk_event_dropped(struct env_event *ev)
{
	if (ev->fire == complete)
		sh_container_of(ev, struct env_disk_req, ev)->inflight = false;
}

int
simdisk_submit(struct env_disk *base, struct env_disk_req *r)
{
	struct sim_disk *d = sh_container_of(base, struct sim_disk, base);
	struct sim_node *node = d->node;
	struct sim *sim = node->sim;
	struct sim_disk_params *p = &node->dparams;
	uint64_t lat;

	if (d->dead)
		return -SH_ECRASHED;
	lat = sh_rand_range(&sim->rng, p->lat_min_ns, p->lat_max_ns);

	env_event_init(&node->env, &r->ev, complete);
	r->result = 0;
	switch (r->op) {
	case ENV_DISK_READ:
		sim->st.disk_reads++;
		if (SH_FAULT(FP_ENV_DISK_READ_EIO) || sh_rand_chance(&sim->rng, p->read_err))
			r->result = -EIO;
		break;
	case ENV_DISK_WRITE:
	case ENV_DISK_WRITE_DSYNC:
		sim->st.disk_writes++;
		if (SH_FAULT(FP_ENV_DISK_WRITE_EIO) || sh_rand_chance(&sim->rng, p->write_err))
			r->result = -EIO;
		break;
	case ENV_DISK_FSYNC:
		sim->st.disk_fsyncs++;
		r->flush_seq = d->m->write_seq;
		if (SH_FAULT(FP_ENV_DISK_FSYNC_EIO))
			r->result = -EIO;
		break;
	}
	if (r->result < 0)
		sim->st.disk_errors++;
	return sim_event_push(&node->env, &r->ev, sim->now + lat);
}

void
simdisk_info(struct env_disk *base, struct env_disk_info *out)
{
	*out = base->info;
}

static void
disk_free(struct sim_disk *d)
{
	sh_list_del(&d->link);
	d->m->opens--;
	sh_free(d);
}

void
simdisk_close(struct env_disk *base)
{
	struct sim_disk *d = sh_container_of(base, struct sim_disk, base);
	struct sh_list *pos, *tmp;

	if (d->dead) {
		sh_list_del(&d->link);
		sh_free(d);
		return;
	}
	/* its queued requests are dropped: no callback after close */
	sh_list_for_each_safe (pos, tmp, &d->node->events) {
		struct env_event *ev = sh_list_entry(pos, struct env_event, link);
		struct env_disk_req *r = sh_container_of(ev, struct env_disk_req, ev);

		if (ev->fire == complete && r->disk == base) {
			sh_heap_remove(&d->node->sim->q, &ev->hn);
			sh_list_del(&ev->link);
			r->inflight = false;
		}
	}
	disk_free(d);
}

static void
media_crash(struct sim *sim, struct sim_media *m, unsigned flags)
{
	struct sh_list *pos;

	while ((pos = sh_list_pop(&m->vwrites)) != NULL) {
		struct sim_vwrite *w = sh_list_entry(pos, struct sim_vwrite, link);
		size_t keep = 0;

		if (w->durable) {
			keep = w->len; /* durable already; applied again to keep write order */
		} else if (sh_list_empty(&m->vwrites) && (flags & SIM_CRASH_TEAR)) {
			size_t nsect = w->len / SECTOR;

			keep = (size_t)sh_rand_range(&sim->rng, 0, nsect) * SECTOR;
			if (keep > 0 && keep < w->len)
				sim->st.torn_writes++;
		} else if ((flags & SIM_CRASH_KEEP_RANDOM) && sh_rand_chance(&sim->rng, 0.5)) {
			keep = w->len;
		}
		if (keep < w->len)
			sim->st.lost_writes++;
		if (keep > 0)
			durable_write(m, w->off, w->data, keep);
		sh_free(w);
	}
}

void
simdisk_node_crash(struct sim_node *node, unsigned flags)
{
	struct sh_list *pos;

	while ((pos = sh_list_pop(&node->disks)) != NULL) {
		struct sim_disk *d = sh_list_entry(pos, struct sim_disk, link);

		d->m->opens--;
		d->dead = true;
		sh_list_add_tail(&node->dead_disks, &d->link);
	}
	sh_list_for_each (pos, &node->media)
		media_crash(node->sim, sh_list_entry(pos, struct sim_media, link), flags);
}

void
simdisk_node_fini(struct sim_node *node)
{
	struct sh_list *pos;

	while ((pos = sh_list_pop(&node->dead_disks)) != NULL)
		sh_free(sh_list_entry(pos, struct sim_disk, link));

	while ((pos = node->media.next) != &node->media)
		media_free(sh_list_entry(pos, struct sim_media, link));
}
