// SPDX-License-Identifier: Apache-2.0
/* Raft log records, the instances' in-memory state and its replay (raft_log.h). */
#include <assert.h>
#include <string.h>

#include "raft_codec.h"
#include "raft_log_int.h"

/* ---- records ---- */

size_t
rlog_rec_begin(struct sh_enc *e)
{
	sh_enc_reserve(e, RLOG_REC_HDR);
	return e->len - RLOG_REC_HDR;
}

void
rlog_rec_end(struct sh_enc *e, size_t at, uint16_t type, uint16_t inst, uint64_t gen)
{
	uint8_t *h;
	uint32_t len, crc, magic = RLOG_MAGIC;

	if (e->err)
		return;
	h = e->p + at;
	len = (uint32_t)(e->len - at - RLOG_REC_HDR);
	memcpy(h, &magic, 4);
	memcpy(h + 4, &type, 2);
	memcpy(h + 6, &inst, 2);
	memcpy(h + 8, &len, 4);
	memset(h + 12, 0, 4);
	memcpy(h + 16, &gen, 8);
	crc = sh_crc32c(0, h, e->len - at);
	memcpy(h + 12, &crc, 4);
}

int
rlog_rec_parse(const uint8_t *b, size_t len, uint16_t *type, uint16_t *inst, uint64_t *gen,
	       const uint8_t **payload, uint32_t *plen)
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
	memcpy(inst, b + 6, 2);
	memcpy(gen, b + 16, 8);
	*payload = b + RLOG_REC_HDR;
	*plen = n;
	return 0;
}

void
rlog_enc_meta(struct sh_enc *e, uint16_t inst, uint64_t gen, uint64_t term, uint64_t vote)
{
	size_t at = rlog_rec_begin(e);
	sh_enc_u64(e, term);
	sh_enc_u64(e, vote);
	rlog_rec_end(e, at, REC_META, inst, gen);
}

void
rlog_enc_entry(struct sh_enc *e, uint16_t inst, uint64_t gen, uint64_t index, uint64_t term,
	       uint16_t type, const void *data, size_t len)
{
	size_t at = rlog_rec_begin(e);
	sh_enc_u64(e, index);
	sh_enc_u64(e, term);
	sh_enc_u16(e, type);
	sh_enc_blob(e, data, len);
	rlog_rec_end(e, at, REC_ENTRY, inst, gen);
}

void
rlog_enc_snap(struct sh_enc *e, uint16_t inst, uint64_t gen, const struct rlog_snap *s,
	      uint64_t trailing)
{
	size_t at = rlog_rec_begin(e);
	sh_enc_u64(e, s->index);
	sh_enc_u64(e, s->term);
	sh_enc_u64(e, s->conf_index);
	if (trailing != UINT64_MAX)
		sh_enc_u64(e, trailing);
	sh_enc_blob(e, s->conf, s->conf_len);
	sh_enc_blob(e, s->data, s->len);
	rlog_rec_end(e, at, trailing != UINT64_MAX ? REC_SNAPT : REC_SNAP, inst, gen);
}

/* ---- the in-memory state ---- */

void
rlog_snap_free(struct rlog_snap *s)
{
	if (s == NULL)
		return;
	sh_free(s->conf);
	sh_free(s->data);
	sh_free(s);
}

uint64_t
rlog_st_last(const struct rlog_state *st)
{
	if (st->n)
		return st->start + st->n - 1;
	return st->start ? st->start - 1 : (st->snap ? st->snap->index : 0);
}

/* Drop entries with index >= from. */
void
rlog_st_truncate(struct rlog_state *st, uint64_t from)
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

int
rlog_st_append(struct rlog_state *st, uint64_t index, uint64_t term, uint16_t type,
	       const void *data, size_t len)
{
	struct rlog_entry *e;

	if (st->start == 0)
		st->start = index;
	if (index < st->start) {
		/* before what we hold (a snapshot covers it): start over from index */
		rlog_st_truncate(st, st->start);
		st->start = index;
	} else if (index <= rlog_st_last(st)) {
		rlog_st_truncate(st, index);
	} else if (index != rlog_st_last(st) + 1) {
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
	/* the entries are consecutive: this one is the last, whatever came before */
	assert(st->start + st->n - 1 == index && rlog_st_last(st) == index);
	return 0;
}

void
rlog_st_snap(struct rlog_state *st, struct rlog_snap *s, uint64_t trailing)
{
	rlog_snap_free(st->snap);
	st->snap = s;
	if (trailing == 0) {
		rlog_st_truncate(st, 0);
		st->start = s->index + 1;
	} else if (trailing != UINT64_MAX && s->index > trailing) {
		st_drop_head(st, s->index - trailing);
	}
	if (st->n == 0 && st->start <= s->index)
		st->start = s->index + 1;
}

void
rlog_state_free(struct rlog_state *st)
{
	for (size_t i = 0; i < st->n; i++)
		sh_free(st->entries[i].data);
	sh_free(st->entries);
	rlog_snap_free(st->snap);
	memset(st, 0, sizeof(*st));
}

struct rlog_snap *
rlog_snap_dup(const uint8_t *conf, size_t conf_len, const uint8_t *data, size_t len)
{
	struct rlog_snap *s = sh_calloc(1, sizeof(*s));

	if (s == NULL)
		return NULL;
	s->conf = sh_malloc(conf_len ? conf_len : 1);
	s->data = sh_malloc(len ? len : 1);
	if (s->conf == NULL || s->data == NULL) {
		rlog_snap_free(s);
		return NULL;
	}
	if (conf_len)
		memcpy(s->conf, conf, conf_len);
	if (len)
		memcpy(s->data, data, len);
	s->conf_len = conf_len;
	s->len = len;
	return s;
}

/* ---- the instances ---- */

struct rlog_inst *
rlog_set_find(const struct rlog_set *set, const char *name)
{
	for (struct rlog_inst *in = set->head; in != NULL; in = in->next)
		if (strcmp(in->name, name) == 0)
			return in;
	return NULL;
}

/* Number in as id of the active half (RLOG_ID_NONE: none yet). */
int
rlog_set_bind(struct rlog_set *set, struct rlog_inst *in, uint16_t id)
{
	in->id = id;
	if (id == RLOG_ID_NONE)
		return 0;
	if (id >= set->nids) {
		unsigned cap = set->nids ? set->nids : 16;
		struct rlog_inst **nb;

		while (cap <= id)
			cap *= 2;
		nb = sh_realloc(set->byid, cap * sizeof(*nb));
		if (nb == NULL)
			return -ENOMEM;
		memset(nb + set->nids, 0, (cap - set->nids) * sizeof(*nb));
		set->byid = nb;
		set->nids = cap;
	}
	set->byid[id] = in;
	return 0;
}

/* A new instance (name "" for the unnamed one), numbered id. */
struct rlog_inst *
rlog_set_add(struct rlog_set *set, const char *name, uint16_t id)
{
	struct rlog_inst *in = sh_calloc(1, sizeof(*in));

	if (in == NULL)
		return NULL;
	snprintf(in->name, sizeof(in->name), "%s", name);
	if (rlog_set_bind(set, in, id) < 0) {
		sh_free(in);
		return NULL;
	}
	in->next = set->head;
	set->head = in;
	return in;
}

void
rlog_set_remove(struct rlog_set *set, struct rlog_inst *in)
{
	for (struct rlog_inst **p = &set->head; *p != NULL; p = &(*p)->next)
		if (*p == in) {
			*p = in->next;
			break;
		}
	if (in->id < set->nids && set->byid[in->id] == in)
		set->byid[in->id] = NULL;
	rlog_state_free(&in->st);
	sh_free(in);
}

void
rlog_set_free(struct rlog_set *set)
{
	while (set->head != NULL)
		rlog_set_remove(set, set->head);
	sh_free(set->byid);
	memset(set, 0, sizeof(*set));
}

/* ---- replay ---- */

/* The instance a record of number id is for (the unnamed one for 0); NULL: none. */
static struct rlog_inst *
replay_inst(struct rlog_set *set, uint16_t id, int *err)
{
	struct rlog_inst *in;

	if (id != 0)
		return id < set->nids ? set->byid[id] : NULL;
	in = id < set->nids ? set->byid[0] : NULL;
	if (in == NULL) {
		if (rlog_set_find(set, "") != NULL)
			return NULL;
		in = rlog_set_add(set, "", 0);
		if (in == NULL)
			*err = -ENOMEM;
	}
	return in;
}

static int
replay_one(struct rlog_set *set, uint16_t type, uint16_t id, const uint8_t *p, uint32_t n)
{
	struct rlog_inst *in;
	struct rlog_state *st;
	struct sh_dec d;
	int err = 0;

	sh_dec_init(&d, p, n);
	if (type == REC_NAME) {
		char name[RLOG_NAME_MAX + 1];

		sh_dec_str(&d, name, sizeof(name));
		sh_dec_end(&d);
		if (d.err || id == 0 || id == RLOG_ID_NONE || name[0] == '\0' ||
		    (id < set->nids && set->byid[id] != NULL) || rlog_set_find(set, name) != NULL)
			return -EBADMSG;
		return rlog_set_add(set, name, id) != NULL ? 0 : -ENOMEM;
	}
	if (type < REC_META || type > REC_DROP || (type == REC_DROP && id == 0))
		return -EBADMSG; /* (before the unnamed instance is made for it) */
	in = replay_inst(set, id, &err);
	if (in == NULL)
		return err ? err : -EBADMSG;
	st = &in->st;
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
		return rlog_st_append(st, index, term, et, b, len);
	}
	case REC_TRUNC: {
		uint64_t index = sh_dec_u64(&d);
		if (d.err || index == 0)
			return -EBADMSG;
		rlog_st_truncate(st, index);
		break;
	}
	case REC_SNAP:
	case REC_SNAPT: {
		struct rlog_snap *s;
		uint64_t index = sh_dec_u64(&d), term = sh_dec_u64(&d), ci = sh_dec_u64(&d);
		uint64_t trailing = type == REC_SNAPT ? sh_dec_u64(&d) : UINT64_MAX;
		size_t cl, dl;
		const uint8_t *c = sh_dec_blob(&d, RC_DATA_MAX, &cl);
		const uint8_t *b = sh_dec_blob(&d, RC_DATA_MAX, &dl);
		sh_dec_end(&d);
		if (d.err || index == 0 || (type == REC_SNAPT && trailing == UINT64_MAX))
			return -EBADMSG;
		s = rlog_snap_dup(c, cl, b, dl);
		if (s == NULL)
			return -ENOMEM;
		s->index = index;
		s->term = term;
		s->conf_index = ci;
		rlog_st_snap(st, s, trailing);
		return 0;
	}
	case REC_DROP:
		sh_dec_end(&d);
		if (d.err || id == 0)
			return -EBADMSG;
		rlog_set_remove(set, in);
		return 0;
	default:
		return -EBADMSG;
	}
	sh_dec_end(&d);
	return d.err ? -EBADMSG : 0;
}

long
rlog_replay(const uint8_t *b, size_t len, uint64_t gen, struct rlog_set *set, bool *more)
{
	size_t off = 0;

	*more = false;
	while (off < len) {
		uint16_t type, id;
		uint64_t g;
		const uint8_t *p;
		uint32_t n;
		int rc = rlog_rec_parse(b + off, len - off, &type, &id, &g, &p, &n);

		if (rc == -EAGAIN)
			*more = true;
		if (rc < 0 || g != gen)
			break;
		rc = replay_one(set, type, id, p, n);
		if (rc == -ENOMEM)
			return rc;
		if (rc < 0)
			break; /* a record we cannot use ends the log, like a torn one */
		off += RLOG_REC_HDR + n;
	}
	if (off == len)
		*more = true; /* the bytes ended between records */
	return (long)off;
}
