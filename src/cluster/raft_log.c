// SPDX-License-Identifier: Apache-2.0
/* Raft instances' durable state: one two-half record file shared by many (raft_log.h). */
#include <assert.h>
#include <string.h>

#include "raft_codec.h"
#include "raft_log_int.h"

SH_LOG_FACILITY("cluster.raftlog");

#define HALF_HDR 4096u
#define RD_CHUNK (4u << 20) /* a half is read this much at a time when opened */

enum { PH_LOADING, PH_IDLE, PH_WRITE, PH_IMAGE, PH_HEADER, PH_ZERO, PH_FAILED };

/*
 * Zeros written ahead of the tail, a chunk at a time, before records go
 * there. The file's blocks are allocated at creation but unwritten (as
 * fallocate leaves them): the first durable write into each block then
 * also converts it, a metadata update and a second device write (3,000
 * durable 4 KiB writes/s into such blocks on this machine's ext4, 5,500
 * into written ones). A zeroed chunk costs one write per ZERO_CHUNK of
 * log, over a thousand appends.
 */
#define ZERO_CHUNK (256u << 10)

struct waiter {
	struct sh_list link;
	uint64_t seq;
	struct rlog *owner;
	rlog_done_cb cb;
	void *arg;
};

struct rlog {
	struct rwal *w;
	struct rlog_inst *in;
};

struct rwal {
	struct env *env;
	struct env_disk *disk;
	char path[256];
	uint64_t half;	 /* bytes per half */
	unsigned active; /* the half new records go to */
	uint64_t gen;	 /* its generation */
	uint64_t tail;	 /* next record's offset in the active half */
	uint64_t zeroed; /* the active half is written (records, zeros) up to here */
	struct rlog_set set;
	uint16_t next_id;      /* the next instance number in the active half */
	struct sh_enc pending; /* records not yet submitted */
	uint64_t seq_queued, seq_durable, seq_writing;
	struct sh_list waiters;
	bool need_image;
	int phase;
	int err;
	struct env_disk_req req;
	struct iovec iov;
	uint8_t *wbuf; /* the bytes in flight (or being read) */
	size_t wlen;
	uint64_t rd_off; /* loading: the active half's bytes replayed so far */
	size_t rd_have;	 /* bytes in wbuf not replayed yet */
	size_t rd_cap;	 /* wbuf's size while loading */
	struct env_task kick;
	struct rwal_stats st;
	uint64_t recs_pending; /* records in pending */
	rlog_done_cb open_cb;
	void *open_arg;
};

/* ---- queueing ---- */

static void
schedule(struct rwal *w)
{
	env_post(&w->kick);
}

static int
check(struct rlog *l)
{
	if (l->w->err)
		return l->w->err;
	return sh_enc_error(&l->w->pending);
}

static int
add_waiter(struct rlog *l, rlog_done_cb cb, void *arg)
{
	struct waiter *wt;

	if (cb == NULL)
		return 0;
	wt = sh_calloc(1, sizeof(*wt));
	if (wt == NULL)
		return -ENOMEM;
	wt->seq = l->w->seq_queued;
	wt->owner = l;
	wt->cb = cb;
	wt->arg = arg;
	sh_list_add_tail(&l->w->waiters, &wt->link);
	return 0;
}

static int
queued(struct rlog *l, rlog_done_cb cb, void *arg)
{
	int rc = sh_enc_error(&l->w->pending);

	if (rc)
		return rc;
	l->w->seq_queued++;
	l->w->recs_pending++;
	rc = add_waiter(l, cb, arg);
	schedule(l->w);
	return rc;
}

int
rlog_set_meta(struct rlog *l, uint64_t term, uint64_t vote)
{
	int rc = check(l);

	if (rc)
		return rc;
	l->in->st.term = term;
	l->in->st.vote = vote;
	rlog_enc_meta(&l->w->pending, l->in->id, l->w->gen, term, vote);
	return queued(l, NULL, NULL);
}

int
rlog_append(struct rlog *l, const struct raft_entry *e, unsigned n, rlog_done_cb cb, void *arg)
{
	struct rlog_state *st = &l->in->st;
	int rc = check(l);

	if (rc)
		return rc;
	for (unsigned i = 0; i < n; i++) {
		uint64_t index = rlog_st_last(st) + 1;

		rc = rlog_st_append(st, index, e[i].term, e[i].type, e[i].buf.base, e[i].buf.len);
		if (rc)
			return rc;
		rlog_enc_entry(&l->w->pending, l->in->id, l->w->gen, index, e[i].term, e[i].type,
			       e[i].buf.base, e[i].buf.len);
	}
	return queued(l, cb, arg);
}

int
rlog_truncate(struct rlog *l, uint64_t index)
{
	int rc = check(l);
	size_t at;

	if (rc)
		return rc;
	if (index == 0)
		return -EINVAL;
	rlog_st_truncate(&l->in->st, index);
	at = rlog_rec_begin(&l->w->pending);
	sh_enc_u64(&l->w->pending, index);
	rlog_rec_end(&l->w->pending, at, REC_TRUNC, l->in->id, l->w->gen);
	return queued(l, NULL, NULL);
}

int
rlog_snapshot(struct rlog *l, const struct raft_snapshot *s, unsigned trailing, rlog_done_cb cb,
	      void *arg)
{
	struct sh_enc conf, data;
	struct rlog_snap *ns;
	int rc = check(l);

	if (rc)
		return rc;
	sh_enc_init(&conf);
	sh_enc_init(&data);
	rc_conf_encode(&conf, &s->configuration);
	for (unsigned i = 0; i < s->n_bufs; i++)
		sh_enc_bytes(&data, s->bufs[i].base, s->bufs[i].len);
	rc = sh_enc_error(&conf) ? sh_enc_error(&conf) : sh_enc_error(&data);
	ns = rc ? NULL : rlog_snap_dup(conf.p, conf.len, data.p, data.len);
	sh_enc_fini(&conf);
	sh_enc_fini(&data);
	if (ns == NULL)
		return rc ? rc : -ENOMEM;
	ns->index = s->index;
	ns->term = s->term;
	ns->conf_index = s->configuration_index;
	/* a record, not an image: the other instances' states stay where they are */
	rlog_enc_snap(&l->w->pending, l->in->id, l->w->gen, ns, trailing);
	rlog_st_snap(&l->in->st, ns, trailing);
	return queued(l, cb, arg);
}

int
rlog_barrier(struct rlog *l, rlog_done_cb cb, void *arg)
{
	int rc = check(l);

	if (rc)
		return rc;
	rc = add_waiter(l, cb, arg);
	schedule(l->w);
	return rc;
}

uint64_t
rlog_last_index(const struct rlog *l)
{
	return rlog_st_last(&l->in->st);
}

const struct rlog_state *
rlog_state(const struct rlog *l)
{
	return &l->in->st;
}

/* ---- instances ---- */

/* A number for an instance new in the active half; none left: the next image renumbers. */
static uint16_t
new_id(struct rwal *w)
{
	if (w->next_id >= RLOG_ID_NONE) {
		w->need_image = true;
		return RLOG_ID_NONE;
	}
	return w->next_id++;
}

int
rlog_open(struct rwal *w, const char *name, struct rlog **out)
{
	struct rlog_inst *in;
	struct rlog *l;

	if (w->phase == PH_LOADING)
		return -EAGAIN;
	if (w->err)
		return w->err;
	if (name[0] == '\0' || strlen(name) > RLOG_NAME_MAX)
		return -EINVAL;
	in = rlog_set_find(&w->set, name);
	if (in != NULL && in->open != NULL)
		return -EBUSY;
	l = sh_calloc(1, sizeof(*l));
	if (l == NULL)
		return -ENOMEM;
	if (in == NULL && (in = rlog_set_find(&w->set, "")) != NULL) {
		/* an older log's one instance: this name's from now on, numbered by an image */
		snprintf(in->name, sizeof(in->name), "%s", name);
		w->need_image = true;
		schedule(w);
	} else if (in == NULL) {
		size_t at;

		in = rlog_set_add(&w->set, name, new_id(w));
		if (in == NULL) {
			sh_free(l);
			return -ENOMEM;
		}
		at = rlog_rec_begin(&w->pending);
		sh_enc_str(&w->pending, name);
		rlog_rec_end(&w->pending, at, REC_NAME, in->id, w->gen);
		w->seq_queued++;
		schedule(w);
	}
	l->w = w;
	l->in = in;
	in->open = l;
	*out = l;
	return 0;
}

void
rlog_close(struct rlog *l)
{
	struct sh_list *pos, *tmp;

	if (l == NULL)
		return;
	sh_list_for_each_safe (pos, tmp, &l->w->waiters) {
		struct waiter *wt = sh_list_entry(pos, struct waiter, link);

		if (wt->owner != l)
			continue;
		sh_list_del(&wt->link);
		wt->cb(wt->arg, -ECANCELED);
		sh_free(wt);
	}
	l->in->open = NULL;
	sh_free(l);
}

bool
rwal_has(const struct rwal *w, const char *name)
{
	return name[0] != '\0' && rlog_set_find(&w->set, name) != NULL;
}

int
rwal_remove(struct rwal *w, const char *name)
{
	struct rlog_inst *in = name[0] ? rlog_set_find(&w->set, name) : NULL;

	if (w->phase == PH_LOADING)
		return -EAGAIN;
	if (in == NULL)
		return -ENOENT;
	if (in->open != NULL)
		return -EBUSY;
	if (w->err == 0 && in->id != RLOG_ID_NONE) {
		size_t at = rlog_rec_begin(&w->pending);

		rlog_rec_end(&w->pending, at, REC_DROP, in->id, w->gen);
		w->seq_queued++;
		schedule(w);
	}
	rlog_set_remove(&w->set, in);
	return 0;
}

int
rwal_flush(struct rwal *w, rlog_done_cb cb, void *arg)
{
	struct waiter *wt;

	if (w->phase == PH_LOADING)
		return -EAGAIN;
	if (w->err)
		return w->err;
	wt = sh_calloc(1, sizeof(*wt));
	if (wt == NULL)
		return -ENOMEM;
	wt->seq = w->seq_queued;
	wt->cb = cb;
	wt->arg = arg;
	sh_list_add_tail(&w->waiters, &wt->link);
	schedule(w);
	return 0;
}

void
rwal_each(const struct rwal *w, void (*fn)(void *arg, const char *name), void *arg)
{
	for (const struct rlog_inst *in = w->set.head; in != NULL; in = in->next)
		if (in->name[0])
			fn(arg, in->name);
}

unsigned
rwal_count(const struct rwal *w)
{
	unsigned n = 0;

	for (const struct rlog_inst *in = w->set.head; in != NULL; in = in->next)
		n++;
	return n;
}

uint64_t
rwal_used(const struct rwal *w)
{
	return w->tail;
}

void
rwal_stats(const struct rwal *w, struct rwal_stats *out)
{
	*out = w->st;
}

/* ---- a log of its own brought in ---- */

struct import {
	struct rwal *w, *from;
	char name[RLOG_NAME_MAX + 1];
	char path[256];
	rlog_done_cb cb;
	void *arg;
	struct env_task later;
	int rc;
};

static void
import_end(struct import *im, int rc)
{
	rwal_close(im->from);
	if (rc == 0) {
		rc = env_disk_remove(im->w->env, im->path);
		if (rc == 0)
			sh_log_info("raft log %s: %s brought in from %s, which is removed",
				    im->w->path, im->name, im->path);
	}
	im->cb(im->arg, rc);
	sh_free(im);
}

static void
on_import_durable(void *arg, int status)
{
	import_end(arg, status);
}

static void
on_import_loaded(void *arg, int status)
{
	struct import *im = arg;
	struct rwal *w = im->w;
	struct rlog_inst *src = im->from->set.head, *in;
	struct waiter *wt;

	/* (ended later: this runs inside the old file's read) */
	im->rc = status < 0			    ? status
		 : w->err			    ? w->err
		 : src != NULL && src->next	    ? -EBADMSG
		 : rlog_set_find(&w->set, im->name) ? -EEXIST
						    : 0;
	if (im->rc < 0) {
		env_post(&im->later);
		return;
	}
	in = rlog_set_add(&w->set, im->name, new_id(w));
	wt = sh_calloc(1, sizeof(*wt));
	if (in == NULL || wt == NULL) {
		if (in != NULL)
			rlog_set_remove(&w->set, in);
		sh_free(wt);
		im->rc = -ENOMEM;
		env_post(&im->later);
		return;
	}
	if (src != NULL) { /* (none: a log never written counts as an empty one) */
		in->st = src->st;
		memset(&src->st, 0, sizeof(src->st));
	}
	/* its state reaches this file in an image; the old file goes once that is durable */
	w->need_image = true;
	wt->seq = ++w->seq_queued;
	wt->cb = on_import_durable;
	wt->arg = im;
	sh_list_add_tail(&w->waiters, &wt->link);
	schedule(w);
}

static void
on_import_later(struct env_task *t)
{
	struct import *im = t->arg;

	import_end(im, im->rc);
}

int
rwal_import(struct rwal *w, const char *name, const char *path, rlog_done_cb cb, void *arg)
{
	struct import *im;
	int rc;

	if (w->phase == PH_LOADING)
		return -EAGAIN;
	if (name[0] == '\0' || strlen(name) > RLOG_NAME_MAX)
		return -EINVAL;
	if (rlog_set_find(&w->set, name) != NULL)
		return -EEXIST;
	im = sh_calloc(1, sizeof(*im));
	if (im == NULL)
		return -ENOMEM;
	im->w = w;
	snprintf(im->name, sizeof(im->name), "%s", name);
	snprintf(im->path, sizeof(im->path), "%s", path);
	im->cb = cb;
	im->arg = arg;
	env_task_init(w->env, &im->later, on_import_later, im);
	rc = rwal_open(w->env, path, 0, on_import_loaded, im, &im->from);
	if (rc < 0) {
		/* none there (-ENOENT) or unreadable: said later, as the contract goes */
		im->from = NULL;
		im->rc = rc;
		env_post(&im->later);
	}
	return 0;
}

/* ---- writing ---- */

static void
fire_waiters(struct rwal *w, int status)
{
	while (!sh_list_empty(&w->waiters)) {
		struct waiter *wt = sh_list_entry(w->waiters.next, struct waiter, link);

		if (status == 0 && wt->seq > w->seq_durable)
			break;
		sh_list_del(&wt->link);
		wt->cb(wt->arg, status);
		sh_free(wt);
	}
}

static void on_write(struct env_disk_req *r, int result);

/* The file's one request: at most one is in flight. Returns env_disk_submit's result. */
static int
disk_io(struct rwal *w, enum env_disk_op op, uint64_t off, uint8_t *buf, size_t len, env_disk_cb cb)
{
	w->iov = (struct iovec){ buf, len };
	w->req = (struct env_disk_req){
		.op = op, .off = off, .iov = &w->iov, .iovcnt = 1, .cb = cb, .arg = w
	};
	return env_disk_submit(w->disk, &w->req);
}

static void
submit(struct rwal *w, int phase, uint64_t off, uint8_t *buf, size_t len)
{
	int rc;

	w->phase = phase;
	w->wbuf = buf;
	w->wlen = len;
	rc = disk_io(w, ENV_DISK_WRITE_DSYNC, off, buf, len, on_write);
	if (rc < 0)
		on_write(&w->req, rc);
}

static void
fail(struct rwal *w, int err)
{
	sh_log_error("raft log %s: %s; its instances stop persisting", w->path, sh_strerror(err));
	w->err = err;
	w->phase = PH_FAILED;
	fire_waiters(w, err);
}

/* One instance's whole state, numbered id, into an image of generation gen. */
static void
image_inst(struct sh_enc *e, const struct rlog_inst *in, uint16_t id, uint64_t gen)
{
	const struct rlog_state *st = &in->st;

	if (id != 0) {
		size_t at = rlog_rec_begin(e);

		sh_enc_str(e, in->name);
		rlog_rec_end(e, at, REC_NAME, id, gen);
	}
	rlog_enc_meta(e, id, gen, st->term, st->vote);
	if (st->snap)
		rlog_enc_snap(e, id, gen, st->snap, UINT64_MAX);
	for (size_t i = 0; i < st->n; i++)
		rlog_enc_entry(e, id, gen, st->start + i, st->entries[i].term, st->entries[i].type,
			       st->entries[i].data, st->entries[i].len);
}

/* Write every instance's state as a new image into the other half, numbered afresh. */
static void
start_image(struct rwal *w)
{
	struct sh_enc e;
	uint64_t gen = w->gen + 1;
	uint16_t id = 1;
	size_t len;
	uint8_t *b;

	sh_enc_init(&e);
	for (struct rlog_inst *in = w->set.head; in != NULL; in = in->next)
		if (id < RLOG_ID_NONE)
			image_inst(&e, in, in->name[0] ? id++ : 0, gen);
	if (id >= RLOG_ID_NONE) {
		sh_log_error("raft log %s: more than %u instances", w->path, RLOG_ID_NONE - 1);
		sh_enc_fini(&e);
		fail(w, -ENOSPC);
		return;
	}
	/*
	 * Zeros after the records, in the same write, up to the next block
	 * and at least a record's magic: what a crash left here of an image
	 * that never got its header (of this same generation) can never be
	 * read on past the end of this one. (An empty image is then a block
	 * of zeros: every instance removed.)
	 */
	len = e.len;
	if (e.err == 0) {
		size_t pad = ENV_DISK_BLOCK - e.len % ENV_DISK_BLOCK;
		uint8_t *z = sh_enc_reserve(&e, pad < 8 ? pad + ENV_DISK_BLOCK : pad);

		if (z != NULL)
			memset(z, 0, e.len - len);
	}
	if (sh_enc_error(&e)) {
		sh_enc_fini(&e);
		fail(w, -ENOMEM);
		return;
	}
	if (e.len > w->half - HALF_HDR) {
		sh_log_error("raft log %s: state of %zu bytes does not fit in a half of %llu",
			     w->path, e.len, (unsigned long long)w->half);
		sh_enc_fini(&e);
		fail(w, -ENOSPC);
		return;
	}
	/* the numbers the image gave: what is queued from now on is of the new half */
	memset(w->set.byid, 0, w->set.nids * sizeof(*w->set.byid));
	id = 1;
	for (struct rlog_inst *in = w->set.head; in != NULL; in = in->next)
		if (rlog_set_bind(&w->set, in, in->name[0] ? id++ : 0) < 0) {
			sh_enc_fini(&e);
			fail(w, -ENOMEM);
			return;
		}
	w->next_id = id;
	/* everything pending is in the image */
	sh_enc_fini(&w->pending);
	sh_enc_init(&w->pending);
	w->seq_writing = w->seq_queued;
	w->need_image = false;
	w->recs_pending = 0;
	w->st.images++;
	w->active ^= 1;
	w->gen = gen;
	w->tail = HALF_HDR + len;
	w->zeroed = HALF_HDR + e.len; /* (beyond: what was there before is not known) */
	b = sh_enc_take(&e, &len);
	submit(w, PH_IMAGE, w->active * w->half + HALF_HDR, b, len);
}

/*
 * What the writer keeps true: records lie within the active half, after
 * its header; nothing is durable that was not queued; and a write in
 * flight covers at least what is durable (durable never moves back).
 */
static void
check_writer(const struct rwal *w)
{
	assert(w->tail >= HALF_HDR && w->tail <= w->half);
	assert(w->seq_durable <= w->seq_queued && w->seq_writing <= w->seq_queued);
	assert(w->phase != PH_WRITE || w->seq_writing >= w->seq_durable);
	(void)w;
}

static void
kick(struct rwal *w)
{
	size_t len;
	uint8_t *b;

	if (w->phase != PH_IDLE)
		return;
	check_writer(w);
	if (sh_enc_error(&w->pending)) {
		/* a record cut short by memory: nothing after it could be read back */
		fail(w, -ENOMEM);
		return;
	}
	if (w->need_image || w->tail + w->pending.len > w->half) {
		start_image(w);
		return;
	}
	if (w->pending.len == 0) {
		w->seq_durable = w->seq_queued;
		fire_waiters(w, 0);
		return;
	}
	if (w->tail + w->pending.len > w->zeroed && w->zeroed < w->half) {
		/* past the tail only: nothing valid lies there (replay stops at zeros) */
		uint64_t from = w->zeroed > w->tail ? w->zeroed : w->tail;
		uint64_t n = w->half - from < ZERO_CHUNK ? w->half - from : ZERO_CHUNK;

		b = sh_aligned_alloc(ENV_DISK_BLOCK, n);
		if (b != NULL) {
			memset(b, 0, n);
			w->zeroed = from + n;
			submit(w, PH_ZERO, w->active * w->half + from, b, n);
			return;
		}
		w->zeroed = w->half; /* short of memory: records go on unwritten blocks */
	}
	w->seq_writing = w->seq_queued;
	b = sh_enc_take(&w->pending, &len);
	w->st.writes++;
	w->st.records += w->recs_pending;
	w->st.bytes += len;
	w->recs_pending = 0;
	submit(w, PH_WRITE, w->active * w->half + w->tail, b, len);
	w->tail += len;
	if (w->tail > w->zeroed)
		w->zeroed = w->tail;
	check_writer(w);
}

static void
on_kick(struct env_task *t)
{
	kick(t->arg);
}

static void
on_write(struct env_disk_req *r, int result)
{
	struct rwal *w = r->arg;

	sh_free(w->wbuf);
	w->wbuf = NULL;
	if (result < 0) {
		fail(w, result == -ENOSPC ? -ENOSPC : -EIO);
		return;
	}
	if (w->phase == PH_IMAGE) {
		/* the body is durable: now the header that makes it the current half */
		struct sh_enc e;
		size_t at, len, pad;
		uint8_t *b;

		sh_enc_init(&e);
		at = rlog_rec_begin(&e);
		sh_enc_u64(&e, w->half);
		rlog_rec_end(&e, at, REC_HDR, 0, w->gen);
		pad = HALF_HDR - e.len;
		b = sh_enc_reserve(&e, pad);
		if (b)
			memset(b, 0, pad);
		if (sh_enc_error(&e)) {
			sh_enc_fini(&e);
			fail(w, -ENOMEM);
			return;
		}
		b = sh_enc_take(&e, &len);
		submit(w, PH_HEADER, w->active * w->half, b, len);
		return;
	}
	if (w->phase == PH_ZERO) {
		w->phase = PH_IDLE;
		kick(w); /* the records now */
		return;
	}
	check_writer(w);
	w->phase = PH_IDLE;
	w->seq_durable = w->seq_writing;
	fire_waiters(w, 0);
	kick(w);
}

/* ---- open ---- */

static void
on_loaded(struct rwal *w, int rc)
{
	sh_free(w->wbuf);
	w->wbuf = NULL;
	w->phase = rc ? PH_FAILED : PH_IDLE;
	w->err = rc;
	if (rc)
		sh_log_error("raft log %s: cannot load: %s", w->path, sh_strerror(rc));
	w->open_cb(w->open_arg, rc);
}

static int
hdr_gen(const uint8_t *b, uint64_t half, uint64_t *gen)
{
	uint16_t type, id;
	const uint8_t *p;
	uint32_t n;
	uint64_t h;

	if (rlog_rec_parse(b, HALF_HDR, &type, &id, gen, &p, &n) != 0 || type != REC_HDR || n != 8)
		return -1;
	memcpy(&h, p, 8);
	return h == half ? 0 : -1;
}

static void on_read_body(struct env_disk_req *r, int result);
static void on_read_hdrs(struct env_disk_req *r, int result);

static void
on_open_fail(struct env_task *t)
{
	struct rwal *w = t->arg;

	env_task_init(w->env, &w->kick, on_kick, w);
	on_loaded(w, w->err);
}

/* A read that could not be queued: its callback runs later, never inside the call. */
static void
read_failed(struct rwal *w, int rc)
{
	w->err = rc;
	env_task_init(w->env, &w->kick, on_open_fail, w);
	env_post(&w->kick);
}

static void
read_hdr(struct rwal *w, unsigned half, env_disk_cb cb)
{
	int rc = disk_io(w, ENV_DISK_READ, half * w->half, w->wbuf + half * HALF_HDR, HALF_HDR, cb);

	if (rc < 0)
		read_failed(w, rc);
}

static void
on_read_hdr0(struct env_disk_req *r, int result)
{
	struct rwal *w = r->arg;

	if (result < 0) {
		on_read_hdrs(r, result);
		return;
	}
	read_hdr(w, 1, on_read_hdrs);
}

/* Read the next piece of the active half after what is held in wbuf. */
static void
read_more(struct rwal *w)
{
	uint64_t at = w->rd_off + w->rd_have; /* from the body's start */
	uint64_t left = w->half - HALF_HDR - at;
	size_t n = left < RD_CHUNK ? (size_t)left : RD_CHUNK;
	int rc;

	if (w->rd_have + n > w->rd_cap) {
		uint8_t *nb = sh_realloc(w->wbuf, w->rd_have + n);

		if (nb == NULL) {
			on_loaded(w, -ENOMEM);
			return;
		}
		w->wbuf = nb;
		w->rd_cap = w->rd_have + n;
	}
	w->wlen = n;
	rc = disk_io(w, ENV_DISK_READ, w->active * w->half + HALF_HDR + at, w->wbuf + w->rd_have, n,
		     on_read_body);
	if (rc < 0)
		on_read_body(&w->req, rc);
}

static void
on_read_hdrs(struct env_disk_req *r, int result)
{
	struct rwal *w = r->arg;
	uint8_t *b = w->wbuf;
	uint64_t g0 = 0, g1 = 0;
	bool v0, v1;

	if (result < 0) {
		on_loaded(w, result);
		return;
	}
	v0 = hdr_gen(b, w->half, &g0) == 0;
	v1 = hdr_gen(b + HALF_HDR, w->half, &g1) == 0;
	sh_free(b);
	w->wbuf = NULL;
	if (!v0 && !v1) {
		/* a new log: the first write is an image into half 0, generation 1 */
		w->active = 1;
		w->gen = 0;
		w->tail = HALF_HDR;
		w->need_image = true;
		on_loaded(w, 0);
		return;
	}
	w->active = (v1 && (!v0 || g1 > g0)) ? 1 : 0;
	w->gen = w->active ? g1 : g0;
	w->rd_off = 0;
	w->rd_have = 0;
	w->rd_cap = 0;
	read_more(w);
}

static void
on_read_body(struct env_disk_req *r, int result)
{
	struct rwal *w = r->arg;
	bool more = false;
	long used;

	if (result < 0) {
		on_loaded(w, result);
		return;
	}
	w->rd_have += w->wlen;
	used = rlog_replay(w->wbuf, w->rd_have, w->gen, &w->set, &more);
	if (used < 0) {
		on_loaded(w, (int)used);
		return;
	}
	w->rd_off += (uint64_t)used;
	w->rd_have -= (size_t)used;
	if (more && w->rd_off + w->rd_have < w->half - HALF_HDR) {
		/* a record goes on past what was read: keep its start, read on */
		memmove(w->wbuf, w->wbuf + used, w->rd_have);
		read_more(w);
		return;
	}
	w->tail = HALF_HDR + w->rd_off;
	/* numbers are given afresh by the image below */
	w->next_id = RLOG_ID_NONE;
	/*
	 * Past the last good record there may be records of this generation
	 * that a crash kept while losing one before them; appending over the
	 * gap could make them look valid again. The first write after open
	 * is therefore an image with a new generation.
	 */
	w->need_image = true;
	on_loaded(w, 0);
}

int
rwal_open(struct env *env, const char *path, uint64_t size, rlog_done_cb cb, void *arg,
	  struct rwal **out)
{
	struct env_disk_info info;
	struct rwal *w;
	int rc;

	if (size != 0 && (size < 4 * HALF_HDR || size % (2 * ENV_DISK_BLOCK) != 0))
		return -EINVAL;
	w = sh_calloc(1, sizeof(*w));
	if (w == NULL)
		return -ENOMEM;
	w->env = env;
	snprintf(w->path, sizeof(w->path), "%s", path);
	w->open_cb = cb;
	w->open_arg = arg;
	w->phase = PH_LOADING;
	w->next_id = 1;
	sh_list_init(&w->waiters);
	sh_enc_init(&w->pending);
	env_task_init(env, &w->kick, on_kick, w);
	/* an existing file keeps its size: the halves' places depend on it */
	rc = env_disk_open(env, path, 0, 0, &w->disk);
	if (rc == -ENOENT && size != 0)
		rc = env_disk_open(env, path, ENV_DISK_CREATE, size, &w->disk);
	if (rc < 0)
		goto err;
	env_disk_info(w->disk, &info);
	if (info.size < 4 * HALF_HDR || info.size % (2 * ENV_DISK_BLOCK) != 0) {
		sh_log_error("raft log %s: %llu bytes is not a log's size", path,
			     (unsigned long long)info.size);
		rc = -EINVAL;
		goto err_disk;
	}
	w->half = info.size / 2;
	w->wbuf = sh_aligned_alloc(ENV_DISK_BLOCK, 2 * HALF_HDR);
	if (w->wbuf == NULL) {
		rc = -ENOMEM;
		goto err_disk;
	}
	read_hdr(w, 0, on_read_hdr0);
	*out = w;
	return 0;
err_disk:
	env_disk_close(w->disk);
err:
	sh_enc_fini(&w->pending);
	sh_free(w);
	return rc;
}

void
rwal_close(struct rwal *w)
{
	if (w == NULL)
		return;
	env_task_cancel(&w->kick);
	env_disk_close(w->disk);
	sh_free(w->wbuf);
	fire_waiters(w, -ECANCELED);
	sh_enc_fini(&w->pending);
	for (struct rlog_inst *in = w->set.head; in != NULL; in = in->next)
		if (in->open != NULL) {
			sh_log_error("raft log %s: closed with instance %s open", w->path,
				     in->name);
			in->open->in = NULL;
		}
	rlog_set_free(&w->set);
	sh_free(w);
}
