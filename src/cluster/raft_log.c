// SPDX-License-Identifier: Apache-2.0
/* The durable state of one Raft instance: two-half record file (raft_log.h). */
#include <string.h>

#include "raft_codec.h"
#include "raft_log.h"

SH_LOG_FACILITY("cluster.raftlog");

#define RLOG_MAGIC 0x474C5253u /* "SRLG" */
#define HALF_HDR   4096u

enum { REC_HDR = 1, REC_META, REC_ENTRY, REC_TRUNC, REC_SNAP };

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
	rlog_done_cb cb;
	void *arg;
};

struct rlog {
	struct env *env;
	struct env_disk *disk;
	uint64_t half;	 /* bytes per half */
	unsigned active; /* the half new records go to */
	uint64_t gen;	 /* its generation */
	uint64_t tail;	 /* next record's offset in the active half */
	uint64_t zeroed; /* the active half is written (records, zeros) up to here */
	struct rlog_state st;
	struct sh_enc pending; /* records not yet submitted */
	uint64_t seq_queued, seq_durable, seq_writing;
	struct sh_list waiters;
	bool need_image;
	int phase;
	int err;
	struct env_disk_req req;
	struct iovec iov;
	uint8_t *wbuf; /* the bytes in flight */
	size_t wlen;
	struct env_task kick;
	rlog_done_cb open_cb;
	void *open_arg;
};

/* ---- records ---- */

static size_t
rec_begin(struct sh_enc *e)
{
	sh_enc_reserve(e, RLOG_REC_HDR);
	return e->len - RLOG_REC_HDR;
}

static void
rec_end(struct sh_enc *e, size_t at, uint16_t type, uint64_t gen)
{
	uint8_t *h;
	uint32_t len, crc, magic = RLOG_MAGIC;

	if (e->err)
		return;
	h = e->p + at;
	len = (uint32_t)(e->len - at - RLOG_REC_HDR);
	memcpy(h, &magic, 4);
	memcpy(h + 4, &type, 2);
	memset(h + 6, 0, 2);
	memcpy(h + 8, &len, 4);
	memset(h + 12, 0, 4);
	memcpy(h + 16, &gen, 8);
	crc = sh_crc32c(0, h, e->len - at);
	memcpy(h + 12, &crc, 4);
}

int
rlog_rec_parse(const uint8_t *b, size_t len, uint16_t *type, uint64_t *gen, const uint8_t **payload,
	       uint32_t *plen)
{
	uint32_t magic, n, crc;
	uint8_t h[RLOG_REC_HDR];

	if (len < RLOG_REC_HDR)
		return -EAGAIN;
	memcpy(&magic, b, 4);
	if (magic != RLOG_MAGIC)
		return -EBADMSG;
	memcpy(&n, b + 8, 4);
	if (n > len - RLOG_REC_HDR)
		return -EAGAIN;
	memcpy(h, b, RLOG_REC_HDR);
	memcpy(&crc, h + 12, 4);
	memset(h + 12, 0, 4);
	if (sh_crc32c(sh_crc32c(0, h, RLOG_REC_HDR), b + RLOG_REC_HDR, n) != crc)
		return -EBADMSG;
	memcpy(type, b + 4, 2);
	memcpy(gen, b + 16, 8);
	*payload = b + RLOG_REC_HDR;
	*plen = n;
	return 0;
}

/* ---- the in-memory state ---- */

static void
snap_free(struct rlog_snap *s)
{
	if (s == NULL)
		return;
	sh_free(s->conf);
	sh_free(s->data);
	sh_free(s);
}

static uint64_t
st_last(const struct rlog_state *st)
{
	if (st->n)
		return st->start + st->n - 1;
	return st->start ? st->start - 1 : (st->snap ? st->snap->index : 0);
}

/* Drop entries with index >= from. */
static void
st_truncate(struct rlog_state *st, uint64_t from)
{
	while (st->n && st->start + st->n - 1 >= from) {
		st->n--;
		sh_free(st->entries[st->n].data);
	}
	if (st->n == 0 && st->start > from)
		st->start = from;
}

/* Drop entries with index <= upto. */
static void
st_drop_head(struct rlog_state *st, uint64_t upto)
{
	size_t k = 0;

	while (k < st->n && st->start + k <= upto)
		sh_free(st->entries[k++].data);
	if (k) {
		memmove(st->entries, st->entries + k, (st->n - k) * sizeof(*st->entries));
		st->n -= k;
	}
	st->start += k;
	if (st->n == 0 && st->start <= upto)
		st->start = upto + 1;
}

static int
st_append(struct rlog_state *st, uint64_t index, uint64_t term, uint16_t type, const void *data,
	  size_t len)
{
	struct rlog_entry *e;

	if (st->start == 0)
		st->start = index;
	if (index < st->start) {
		/* before what we hold (a snapshot covers it): start over from index */
		st_truncate(st, st->start);
		st->start = index;
	} else if (index <= st_last(st)) {
		st_truncate(st, index);
	} else if (index != st_last(st) + 1) {
		return -EBADMSG;
	}
	if (st->n == 0)
		st->start = index;
	if ((st->n & (st->n - 1)) == 0) {
		size_t cap = st->n ? st->n * 2 : 16;
		struct rlog_entry *ne = sh_realloc(st->entries, cap * sizeof(*ne));
		if (ne == NULL)
			return -ENOMEM;
		st->entries = ne;
	}
	e = &st->entries[st->n];
	e->data = sh_malloc(len ? len : 1);
	if (e->data == NULL)
		return -ENOMEM;
	if (len)
		memcpy(e->data, data, len);
	e->term = term;
	e->type = type;
	e->len = (uint32_t)len;
	st->n++;
	return 0;
}

void
rlog_state_free(struct rlog_state *st)
{
	for (size_t i = 0; i < st->n; i++)
		sh_free(st->entries[i].data);
	sh_free(st->entries);
	snap_free(st->snap);
	memset(st, 0, sizeof(*st));
}

static struct rlog_snap *
snap_dup(const uint8_t *conf, size_t conf_len, const uint8_t *data, size_t len)
{
	struct rlog_snap *s = sh_calloc(1, sizeof(*s));

	if (s == NULL)
		return NULL;
	s->conf = sh_malloc(conf_len ? conf_len : 1);
	s->data = sh_malloc(len ? len : 1);
	if (s->conf == NULL || s->data == NULL) {
		snap_free(s);
		return NULL;
	}
	memcpy(s->conf, conf, conf_len);
	if (len)
		memcpy(s->data, data, len);
	s->conf_len = conf_len;
	s->len = len;
	return s;
}

static int
replay_one(struct rlog_state *st, uint16_t type, const uint8_t *p, uint32_t n)
{
	struct sh_dec d;
	int rc = 0;

	sh_dec_init(&d, p, n);
	switch (type) {
	case REC_META:
		st->term = sh_dec_u64(&d);
		st->vote = sh_dec_u64(&d);
		break;
	case REC_ENTRY: {
		uint64_t index = sh_dec_u64(&d), term = sh_dec_u64(&d);
		uint16_t et = sh_dec_u16(&d);
		size_t len;
		const uint8_t *b = sh_dec_blob(&d, RC_DATA_MAX, &len);
		sh_dec_end(&d);
		if (d.err || index == 0)
			return -EBADMSG;
		return st_append(st, index, term, et, b, len);
	}
	case REC_TRUNC: {
		uint64_t index = sh_dec_u64(&d);
		if (d.err || index == 0)
			return -EBADMSG;
		st_truncate(st, index);
		break;
	}
	case REC_SNAP: {
		struct rlog_snap *s;
		uint64_t index = sh_dec_u64(&d), term = sh_dec_u64(&d), ci = sh_dec_u64(&d);
		size_t cl, dl;
		const uint8_t *c = sh_dec_blob(&d, RC_DATA_MAX, &cl);
		const uint8_t *b = sh_dec_blob(&d, RC_DATA_MAX, &dl);
		sh_dec_end(&d);
		if (d.err || index == 0)
			return -EBADMSG;
		s = snap_dup(c, cl, b, dl);
		if (s == NULL)
			return -ENOMEM;
		s->index = index;
		s->term = term;
		s->conf_index = ci;
		snap_free(st->snap);
		st->snap = s;
		if (st->n == 0 && st->start <= index)
			st->start = index + 1;
		return 0;
	}
	default:
		return -EBADMSG;
	}
	sh_dec_end(&d);
	return d.err ? -EBADMSG : rc;
}

long
rlog_replay(const uint8_t *b, size_t len, uint64_t gen, struct rlog_state *st)
{
	size_t off = 0;

	while (off < len) {
		uint16_t type;
		uint64_t g;
		const uint8_t *p;
		uint32_t n;
		int rc = rlog_rec_parse(b + off, len - off, &type, &g, &p, &n);

		if (rc < 0 || g != gen)
			break;
		rc = replay_one(st, type, p, n);
		if (rc == -ENOMEM)
			return rc;
		if (rc < 0)
			break; /* a record we cannot use ends the log, like a torn one */
		off += RLOG_REC_HDR + n;
	}
	return (long)off;
}

/* ---- queueing ---- */

static void
enc_meta(struct sh_enc *e, uint64_t gen, uint64_t term, uint64_t vote)
{
	size_t at = rec_begin(e);
	sh_enc_u64(e, term);
	sh_enc_u64(e, vote);
	rec_end(e, at, REC_META, gen);
}

static void
enc_entry(struct sh_enc *e, uint64_t gen, uint64_t index, uint64_t term, uint16_t type,
	  const void *data, size_t len)
{
	size_t at = rec_begin(e);
	sh_enc_u64(e, index);
	sh_enc_u64(e, term);
	sh_enc_u16(e, type);
	sh_enc_blob(e, data, len);
	rec_end(e, at, REC_ENTRY, gen);
}

static void
enc_snap(struct sh_enc *e, uint64_t gen, const struct rlog_snap *s)
{
	size_t at = rec_begin(e);
	sh_enc_u64(e, s->index);
	sh_enc_u64(e, s->term);
	sh_enc_u64(e, s->conf_index);
	sh_enc_blob(e, s->conf, s->conf_len);
	sh_enc_blob(e, s->data, s->len);
	rec_end(e, at, REC_SNAP, gen);
}

static void
schedule(struct rlog *l)
{
	env_post(&l->kick);
}

static int
check(struct rlog *l)
{
	if (l->phase == PH_LOADING)
		return -EAGAIN;
	if (l->err)
		return l->err;
	return sh_enc_error(&l->pending);
}

static int
add_waiter(struct rlog *l, rlog_done_cb cb, void *arg)
{
	struct waiter *w;

	if (cb == NULL)
		return 0;
	w = sh_calloc(1, sizeof(*w));
	if (w == NULL)
		return -ENOMEM;
	w->seq = l->seq_queued;
	w->cb = cb;
	w->arg = arg;
	sh_list_add_tail(&l->waiters, &w->link);
	return 0;
}

static int
queued(struct rlog *l, rlog_done_cb cb, void *arg)
{
	int rc = sh_enc_error(&l->pending);

	if (rc)
		return rc;
	l->seq_queued++;
	rc = add_waiter(l, cb, arg);
	schedule(l);
	return rc;
}

int
rlog_set_meta(struct rlog *l, uint64_t term, uint64_t vote)
{
	int rc = check(l);

	if (rc)
		return rc;
	l->st.term = term;
	l->st.vote = vote;
	enc_meta(&l->pending, l->gen, term, vote);
	return queued(l, NULL, NULL);
}

int
rlog_append(struct rlog *l, const struct raft_entry *e, unsigned n, rlog_done_cb cb, void *arg)
{
	int rc = check(l);

	if (rc)
		return rc;
	for (unsigned i = 0; i < n; i++) {
		uint64_t index = st_last(&l->st) + 1;

		rc = st_append(&l->st, index, e[i].term, e[i].type, e[i].buf.base, e[i].buf.len);
		if (rc)
			return rc;
		enc_entry(&l->pending, l->gen, index, e[i].term, e[i].type, e[i].buf.base,
			  e[i].buf.len);
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
	st_truncate(&l->st, index);
	at = rec_begin(&l->pending);
	sh_enc_u64(&l->pending, index);
	rec_end(&l->pending, at, REC_TRUNC, l->gen);
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
	ns = rc ? NULL : snap_dup(conf.p, conf.len, data.p, data.len);
	sh_enc_fini(&conf);
	sh_enc_fini(&data);
	if (ns == NULL)
		return rc ? rc : -ENOMEM;
	ns->index = s->index;
	ns->term = s->term;
	ns->conf_index = s->configuration_index;
	snap_free(l->st.snap);
	l->st.snap = ns;
	if (trailing == 0) {
		st_truncate(&l->st, 0);
		l->st.start = s->index + 1;
	} else if (s->index > trailing) {
		st_drop_head(&l->st, s->index - trailing);
	}
	if (l->st.n == 0 && l->st.start <= s->index)
		l->st.start = s->index + 1;
	l->need_image = true;
	return queued(l, cb, arg);
}

int
rlog_barrier(struct rlog *l, rlog_done_cb cb, void *arg)
{
	int rc = check(l);

	if (rc)
		return rc;
	rc = add_waiter(l, cb, arg);
	schedule(l);
	return rc;
}

uint64_t
rlog_last_index(const struct rlog *l)
{
	return st_last(&l->st);
}

const struct rlog_state *
rlog_state(const struct rlog *l)
{
	return &l->st;
}

/* ---- writing ---- */

static void
fire_waiters(struct rlog *l, int status)
{
	while (!sh_list_empty(&l->waiters)) {
		struct waiter *w = sh_list_entry(l->waiters.next, struct waiter, link);

		if (status == 0 && w->seq > l->seq_durable)
			break;
		sh_list_del(&w->link);
		w->cb(w->arg, status);
		sh_free(w);
	}
}

static void on_write(struct env_disk_req *r, int result);

/* The log's one request: at most one is in flight. Returns env_disk_submit's result. */
static int
disk_io(struct rlog *l, enum env_disk_op op, uint64_t off, uint8_t *buf, size_t len, env_disk_cb cb)
{
	l->iov = (struct iovec){ buf, len };
	l->req = (struct env_disk_req){
		.op = op, .off = off, .iov = &l->iov, .iovcnt = 1, .cb = cb, .arg = l
	};
	return env_disk_submit(l->disk, &l->req);
}

static void
submit(struct rlog *l, int phase, uint64_t off, uint8_t *buf, size_t len)
{
	int rc;

	l->phase = phase;
	l->wbuf = buf;
	l->wlen = len;
	rc = disk_io(l, ENV_DISK_WRITE_DSYNC, off, buf, len, on_write);
	if (rc < 0)
		on_write(&l->req, rc);
}

static void
fail(struct rlog *l, int err)
{
	sh_log_error("raft log: %s; this instance stops persisting", sh_strerror(err));
	l->err = err;
	l->phase = PH_FAILED;
	fire_waiters(l, err);
}

/* Write the whole state as a new image into the other half. */
static void
start_image(struct rlog *l)
{
	struct sh_enc e;
	const struct rlog_state *st = &l->st;
	uint64_t gen = l->gen + 1;
	size_t len;
	uint8_t *b;

	sh_enc_init(&e);
	enc_meta(&e, gen, st->term, st->vote);
	if (st->snap)
		enc_snap(&e, gen, st->snap);
	for (size_t i = 0; i < st->n; i++)
		enc_entry(&e, gen, st->start + i, st->entries[i].term, st->entries[i].type,
			  st->entries[i].data, st->entries[i].len);
	if (sh_enc_error(&e)) {
		sh_enc_fini(&e);
		fail(l, -ENOMEM);
		return;
	}
	if (e.len > l->half - HALF_HDR) {
		sh_log_error("raft log: state of %zu bytes does not fit in a half of %llu", e.len,
			     (unsigned long long)l->half);
		sh_enc_fini(&e);
		fail(l, -ENOSPC);
		return;
	}
	/* everything pending is in the image; new records go to the new half */
	sh_enc_fini(&l->pending);
	sh_enc_init(&l->pending);
	l->seq_writing = l->seq_queued;
	l->need_image = false;
	l->active ^= 1;
	l->gen = gen;
	l->tail = HALF_HDR + e.len;
	l->zeroed = l->tail; /* (what was there before is not known: zeroed afresh) */
	b = sh_enc_take(&e, &len);
	submit(l, PH_IMAGE, l->active * l->half + HALF_HDR, b, len);
}

static void
kick(struct rlog *l)
{
	size_t len;
	uint8_t *b;

	if (l->phase != PH_IDLE)
		return;
	if (l->need_image || l->tail + l->pending.len > l->half) {
		start_image(l);
		return;
	}
	if (l->pending.len == 0) {
		l->seq_durable = l->seq_queued;
		fire_waiters(l, 0);
		return;
	}
	if (l->tail + l->pending.len > l->zeroed && l->zeroed < l->half) {
		/* past the tail only: nothing valid lies there (replay stops at zeros) */
		uint64_t from = l->zeroed > l->tail ? l->zeroed : l->tail;
		uint64_t n = l->half - from < ZERO_CHUNK ? l->half - from : ZERO_CHUNK;

		b = sh_aligned_alloc(ENV_DISK_BLOCK, n);
		if (b != NULL) {
			memset(b, 0, n);
			l->zeroed = from + n;
			submit(l, PH_ZERO, l->active * l->half + from, b, n);
			return;
		}
		l->zeroed = l->half; /* short of memory: records go on unwritten blocks */
	}
	l->seq_writing = l->seq_queued;
	b = sh_enc_take(&l->pending, &len);
	submit(l, PH_WRITE, l->active * l->half + l->tail, b, len);
	l->tail += len;
	if (l->tail > l->zeroed)
		l->zeroed = l->tail;
}

static void
on_kick(struct env_task *t)
{
	kick(t->arg);
}

static void
on_write(struct env_disk_req *r, int result)
{
	struct rlog *l = r->arg;

	sh_free(l->wbuf);
	l->wbuf = NULL;
	if (result < 0) {
		fail(l, result == -ENOSPC ? -ENOSPC : -EIO);
		return;
	}
	if (l->phase == PH_IMAGE) {
		/* the body is durable: now the header that makes it the current half */
		struct sh_enc e;
		size_t at, len, pad;
		uint8_t *b;

		sh_enc_init(&e);
		at = rec_begin(&e);
		sh_enc_u64(&e, l->half);
		rec_end(&e, at, REC_HDR, l->gen);
		pad = HALF_HDR - e.len;
		b = sh_enc_reserve(&e, pad);
		if (b)
			memset(b, 0, pad);
		if (sh_enc_error(&e)) {
			sh_enc_fini(&e);
			fail(l, -ENOMEM);
			return;
		}
		b = sh_enc_take(&e, &len);
		submit(l, PH_HEADER, l->active * l->half, b, len);
		return;
	}
	if (l->phase == PH_ZERO) {
		l->phase = PH_IDLE;
		kick(l); /* the records now */
		return;
	}
	l->phase = PH_IDLE;
	l->seq_durable = l->seq_writing;
	fire_waiters(l, 0);
	kick(l);
}

/* ---- open ---- */

static void
on_loaded(struct rlog *l, int rc)
{
	l->phase = rc ? PH_FAILED : PH_IDLE;
	l->err = rc;
	l->open_cb(l->open_arg, rc);
}

static int
hdr_gen(const uint8_t *b, uint64_t half, uint64_t *gen)
{
	uint16_t type;
	const uint8_t *p;
	uint32_t n;
	uint64_t h;

	if (rlog_rec_parse(b, HALF_HDR, &type, gen, &p, &n) != 0 || type != REC_HDR || n != 8)
		return -1;
	memcpy(&h, p, 8);
	return h == half ? 0 : -1;
}

static void on_read_body(struct env_disk_req *r, int result);
static void on_read_hdrs(struct env_disk_req *r, int result);

static void
on_open_fail(struct env_task *t)
{
	struct rlog *l = t->arg;

	sh_free(l->wbuf);
	l->wbuf = NULL;
	env_task_init(l->env, &l->kick, on_kick, l);
	on_loaded(l, l->err);
}

static void
read_hdr(struct rlog *l, unsigned half, env_disk_cb cb)
{
	int rc;

	rc = disk_io(l, ENV_DISK_READ, half * l->half, l->wbuf + half * HALF_HDR, HALF_HDR, cb);
	if (rc < 0) {
		/* callbacks never run inside the call that queued them: defer */
		l->err = rc;
		env_task_init(l->env, &l->kick, on_open_fail, l);
		env_post(&l->kick);
	}
}

static void
on_read_hdr0(struct env_disk_req *r, int result)
{
	struct rlog *l = r->arg;

	if (result < 0) {
		on_read_hdrs(r, result);
		return;
	}
	read_hdr(l, 1, on_read_hdrs);
}

static void
on_read_hdrs(struct env_disk_req *r, int result)
{
	struct rlog *l = r->arg;
	uint8_t *b = l->wbuf;
	uint64_t g0 = 0, g1 = 0;
	bool v0, v1;

	if (result < 0) {
		sh_free(b);
		on_loaded(l, result);
		return;
	}
	v0 = hdr_gen(b, l->half, &g0) == 0;
	v1 = hdr_gen(b + HALF_HDR, l->half, &g1) == 0;
	sh_free(b);
	l->wbuf = NULL;
	if (!v0 && !v1) {
		/* a new log: the first write is an image into half 0, generation 1 */
		l->active = 1;
		l->gen = 0;
		l->tail = HALF_HDR;
		l->need_image = true;
		on_loaded(l, 0);
		return;
	}
	l->active = (v1 && (!v0 || g1 > g0)) ? 1 : 0;
	l->gen = l->active ? g1 : g0;
	l->wlen = l->half - HALF_HDR;
	l->wbuf = sh_aligned_alloc(ENV_DISK_BLOCK, l->wlen);
	if (l->wbuf == NULL) {
		on_loaded(l, -ENOMEM);
		return;
	}
	result = disk_io(l, ENV_DISK_READ, l->active * l->half + HALF_HDR, l->wbuf, l->wlen,
			 on_read_body);
	if (result < 0)
		on_read_body(&l->req, result);
}

static void
on_read_body(struct env_disk_req *r, int result)
{
	struct rlog *l = r->arg;
	long used = 0;

	if (result >= 0)
		used = rlog_replay(l->wbuf, l->wlen, l->gen, &l->st);
	sh_free(l->wbuf);
	l->wbuf = NULL;
	if (result < 0 || used < 0) {
		on_loaded(l, result < 0 ? result : (int)used);
		return;
	}
	l->tail = HALF_HDR + (uint64_t)used;
	/*
	 * Past the last good record there may be records of this generation
	 * that a crash kept while losing one before them; appending over the
	 * gap could make them look valid again. The first write after open
	 * is therefore an image with a new generation.
	 */
	l->need_image = true;
	on_loaded(l, 0);
}

int
rlog_open(struct env *env, const char *path, uint64_t size, rlog_done_cb cb, void *arg,
	  struct rlog **out)
{
	struct rlog *l;
	int rc;

	if (size < 4 * HALF_HDR || size % (2 * ENV_DISK_BLOCK) != 0)
		return -EINVAL;
	l = sh_calloc(1, sizeof(*l));
	if (l == NULL)
		return -ENOMEM;
	l->env = env;
	l->half = size / 2;
	l->open_cb = cb;
	l->open_arg = arg;
	l->phase = PH_LOADING;
	sh_list_init(&l->waiters);
	sh_enc_init(&l->pending);
	env_task_init(env, &l->kick, on_kick, l);
	rc = env_disk_open(env, path, ENV_DISK_CREATE, size, &l->disk);
	if (rc < 0)
		goto err;
	l->wbuf = sh_aligned_alloc(ENV_DISK_BLOCK, 2 * HALF_HDR);
	if (l->wbuf == NULL) {
		rc = -ENOMEM;
		goto err_disk;
	}
	read_hdr(l, 0, on_read_hdr0);
	*out = l;
	return 0;
err_disk:
	env_disk_close(l->disk);
err:
	sh_free(l);
	return rc;
}

void
rlog_close(struct rlog *l)
{
	if (l == NULL)
		return;
	env_task_cancel(&l->kick);
	env_disk_close(l->disk);
	sh_free(l->wbuf);
	fire_waiters(l, -ECANCELED);
	sh_enc_fini(&l->pending);
	rlog_state_free(&l->st);
	sh_free(l);
}
