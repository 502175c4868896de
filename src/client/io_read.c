// SPDX-License-Identifier: Apache-2.0
/*
 * libshoal's read pipeline (docs/client.md "Data"): the data fragments'
 * byte ranges read straight from the targets, compressed blocks expanded,
 * stripes rebuilt from any D fragments when some are missing or corrupt;
 * a handle's map of extents, and read-ahead for a sequential reader.
 */
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "../data/reduce.h"
#include "../data/seal.h"
#include "../store/store_proto.h"
#include "io_int.h"

/* ---- reading ---- */

#define READ_MAP_DROPS 4 /* a read's passes over kept maps that failed, read again afresh */

/* One fragment range to read into dst. */
struct piece {
	unsigned frag; /* index */
	uint32_t off, len;
	uint8_t *dst;
};

static int
get_calls(sh_file *f, const struct meta_extent *e, const struct piece *pc, unsigned np,
	  struct dcall *calls, uint8_t (*hdr)[STORE_PROTO_HDR + 8])
{
	for (unsigned i = 0; i < np; i++) {
		struct store_proto_req r = { .target = e->targets[pc[i].frag],
					     .stripe = e->stripe,
					     .idx = pc[i].frag,
					     .len = pc[i].len,
					     .off = pc[i].off };
		int rc;

		calls[i] = (struct dcall){
			.op = NET_OP_STORE_GET, .niov = 1, .out = pc[i].dst, .cap = pc[i].len
		};
		rc = client_target(f->fs->c, r.target, &calls[i].peer, calls[i].addr);
		if (rc < 0) {
			calls[i].peer = 0; /* down: not asked */
			calls[i].status = rc;
			continue;
		}
		calls[i].iov[0] =
		    (struct iovec){ hdr[i], store_proto_encode(NET_OP_STORE_GET, &r, hdr[i]) };
	}
	return 0;
}

/*
 * A stripe read around what did not come (degraded reads, in batches): [soff,
 * soff + len) of the stripe's data rebuilt from D fragments and copied to
 * dst. The same byte range of every fragment (the one the range touches,
 * or whole fragments when it crosses from one to the next) is asked of D
 * of them, the data fragments first and targets down skipped, then of the
 * others while fewer than D came. moved: a fragment may be elsewhere now
 * (its target is lost, or it answered that it does not have it): where the
 * stripe is now is worth asking.
 */
struct dplan {
	struct meta_extent e; /* where its stripe is known to be now */
	uint64_t soff;
	size_t len;
	uint8_t *dst;
	unsigned i0, i1, have;
	uint32_t lo, hi, got, tried;
	bool moved;
	bool denied; /* a target refused this client (its key revoked): EACCES, not EIO */
	int rc;
	uint8_t *frags[EC_N_MAX];
};

static void
dplan_init(sh_file *f, struct dplan *p, const struct meta_extent *e, uint64_t soff, size_t len,
	   uint8_t *dst)
{
	unsigned n = (unsigned)e->d + e->p;

	memset(p, 0, sizeof(*p));
	p->e = *e;
	client_loc_apply(f->fs, &p->e); /* (learnt by another extent of the same read) */
	p->soff = soff;
	p->len = len;
	p->dst = dst;
	p->i0 = (unsigned)(soff / e->frag);
	p->i1 = (unsigned)((soff + (len ? len : 1) - 1) / e->frag);
	p->lo = p->i0 == p->i1 ? (uint32_t)(soff % e->frag) : 0;
	p->hi = p->i0 == p->i1 ? (uint32_t)((soff + len - 1) % e->frag) + 1 : e->frag;
	for (unsigned i = 0; len > 0 && p->rc == 0 && i < n; i++)
		if ((p->frags[i] = sh_malloc(p->hi - p->lo)) == NULL)
			p->rc = -ENOMEM;
}

/*
 * What the plain read got already: a data fragment's piece that covers the
 * range [lo, hi) the plan needs of it is taken, not asked again.
 */
static void
dplan_reuse(struct dplan *p, const struct piece *pc, const struct dcall *calls, unsigned np)
{
	for (unsigned k = 0; k < np && p->rc == 0; k++) {
		unsigned i = pc[k].frag;

		if (calls[k].status < 0 || calls[k].got != pc[k].len || pc[k].off > p->lo ||
		    pc[k].off + pc[k].len < p->hi || (p->got & 1u << i) || p->have >= p->e.d)
			continue;
		memcpy(p->frags[i], pc[k].dst + (p->lo - pc[k].off), p->hi - p->lo);
		p->got |= 1u << i;
		p->tried |= 1u << i;
		p->have++;
	}
}

/* The next pieces to ask (up to D - have of them, not asked before) into pc: how many. */
static unsigned
dplan_next(sh_file *f, struct dplan *p, struct piece *pc)
{
	unsigned n = (unsigned)p->e.d + p->e.p, np = 0;

	for (unsigned i = 0; p->rc == 0 && p->len > 0 && i < n && p->have + np < p->e.d; i++) {
		uint64_t peer;
		char a[CFG_ADDR_MAX];

		if (p->tried & 1u << i)
			continue;
		p->tried |= 1u << i;
		if (client_target(f->fs->c, p->e.targets[i], &peer, a) < 0) {
			p->moved |= client_target_lost(f->fs->c, p->e.targets[i]);
			continue; /* down: not asked */
		}
		pc[np++] = (struct piece){
			.frag = i, .off = p->lo, .len = p->hi - p->lo, .dst = p->frags[i]
		};
	}
	return np;
}

static void
dplan_took(struct dplan *p, const struct piece *pc, const struct dcall *calls, unsigned np)
{
	for (unsigned k = 0; k < np; k++) {
		if (calls[k].status >= 0 && calls[k].got == pc[k].len) {
			p->got |= 1u << pc[k].frag;
			p->have++;
		} else {
			p->moved |= calls[k].status == -ENOENT;
			p->denied |= calls[k].status == -EACCES;
		}
	}
}

/* Decode (if a data fragment the range needs is missing) and copy out; frees. */
static int
dplan_end(struct dplan *p)
{
	unsigned n = (unsigned)p->e.d + p->e.p;
	uint32_t need = ((1u << (p->i1 + 1)) - 1) & ~((1u << p->i0) - 1);
	struct ec_code code;
	struct ec_decoder dec;
	int rc = p->rc;

	if (rc == 0 && p->len > 0 && p->have < p->e.d)
		rc = p->denied ? -EACCES : -EIO; /* more than P lost: nothing to rebuild from */
	if (rc == 0 && p->len > 0 && (~p->got & need) != 0) {
		rc = ec_code_init(&code, p->e.d, p->e.p);
		if (rc == 0)
			rc = ec_decoder_init(&code, &dec, ((1u << n) - 1) & ~p->got);
		if (rc == 0)
			ec_decode(&code, &dec, p->hi - p->lo, p->frags);
	}
	for (size_t done = 0; rc == 0 && done < p->len;) {
		uint64_t s = p->soff + done;
		unsigned i = (unsigned)(s / p->e.frag);
		size_t o = s % p->e.frag,
		       k = p->e.frag - o < p->len - done ? p->e.frag - o : p->len - done;

		memcpy(p->dst + done, p->frags[i] + (o - p->lo), k);
		done += k;
	}
	for (unsigned i = 0; i < n; i++) {
		sh_free(p->frags[i]);
		p->frags[i] = NULL;
	}
	return rc;
}

#define DPLAN_MAX 8

/* Plans p[0..n) at once: each round asks every plan's next pieces in one batch. */
static void
dplan_run(sh_file *f, struct dplan *p, unsigned n)
{
	struct piece pc[DPLAN_MAX * EC_D_MAX];
	struct dcall calls[DPLAN_MAX * EC_D_MAX];
	uint8_t hdr[DPLAN_MAX * EC_D_MAX][STORE_PROTO_HDR + 8];
	unsigned first[DPLAN_MAX + 1];

	for (;;) {
		unsigned np = 0;

		for (unsigned k = 0; k < n; k++) {
			first[k] = np;
			np += dplan_next(f, &p[k], pc + np);
		}
		first[n] = np;
		if (np == 0)
			return; /* every plan has D, or nothing left to ask */
		for (unsigned k = 0; k < n; k++)
			get_calls(f, &p[k].e, pc + first[k], first[k + 1] - first[k],
				  calls + first[k], hdr + first[k]);
		client_calls(f->fs->c, calls, np, GET_NS);
		for (unsigned k = 0; k < n; k++)
			dplan_took(&p[k], pc + first[k], calls + first[k], first[k + 1] - first[k]);
	}
}

/*
 * Degraded reads of up to DPLAN_MAX extents at once; a stripe whose fragment
 * may be elsewhere now (rebuilt or moved: docs/healing.md) has its bucket
 * asked where it is, for this read if it failed, and for the next ones.
 * The first error, or 0.
 */
static int
degraded(sh_file *f, struct dplan *p, unsigned n)
{
	int rc = 0;

	dplan_run(f, p, n);
	for (unsigned k = 0; k < n; k++) {
		struct meta_extent now = p[k].e; /* where it read */
		int r = dplan_end(&p[k]);

		if (!p[k].moved && r == 0)
			goto next;
		/* asked its bucket, or learnt from another extent of this read a moment ago */
		if (client_loc_fetch(f->fs, &now) != 0)
			client_loc_apply(f->fs, &now);
		if (r < 0 && memcmp(now.targets, p[k].e.targets,
				    ((size_t)now.d + now.p) * sizeof(now.targets[0])) != 0) {
			dplan_init(f, &p[k], &now, p[k].soff, p[k].len, p[k].dst);
			dplan_run(f, &p[k], 1);
			r = dplan_end(&p[k]);
		}
next:
		if (rc == 0)
			rc = r;
	}
	return rc;
}

/*
 * The data fragments' byte ranges that hold [s0, s1) of the stripe's data,
 * extent e's stripe, into pc (dst gets s0 on): how many.
 */
static unsigned
pieces(const struct meta_extent *e, uint64_t s0, uint64_t s1, uint8_t *dst, struct piece *pc)
{
	unsigned np = 0;

	for (uint64_t s = s0; s < s1 && np < EC_D_MAX;) {
		unsigned i = (unsigned)(s / e->frag);
		uint64_t end = (uint64_t)(i + 1) * e->frag < s1 ? (uint64_t)(i + 1) * e->frag : s1;

		pc[np++] = (struct piece){ .frag = i,
					   .off = (uint32_t)(s % e->frag),
					   .len = (uint32_t)(end - s),
					   .dst = dst + (s - s0) };
		s = end;
	}
	return np;
}

/* [a, b) of the file from encoded extent e, whose stored block is in stored, into dst. */
static int
expand(const struct meta_extent *e, const uint8_t *stored, uint64_t a, uint64_t b, uint8_t *dst)
{
	size_t from = e->boff + (size_t)(a - e->off);
	bool whole = from == 0 && b - a == e->blen;
	uint8_t *blk = whole ? dst : sh_malloc(e->blen);
	int rc;

	if (blk == NULL)
		return -ENOMEM;
	rc = reduce_unblock(e->enc, stored, e->slen, blk, e->blen);
	if (rc == 0 && !whole)
		memcpy(dst, blk + from, (size_t)(b - a));
	if (!whole)
		sh_free(blk);
	return rc < 0 ? -EIO : 0; /* stored bytes that passed their crcs yet do not expand */
}

/*
 * An encrypted file system's extent (seal.h): the stripe data it needs,
 * [*s0, *s0 + *sl), widened to whole SEAL_UNITs (fragments are 4 KiB
 * multiples, so the stripe's data is a whole number of them), which is
 * what is fetched and decrypted; *skip: where the bytes needed start in
 * it. False (nothing changed) when the range is whole units already.
 */
static bool
widen(uint64_t *s0, uint64_t *sl, uint64_t *skip)
{
	uint64_t a = *s0 / SEAL_UNIT * SEAL_UNIT,
		 b = (*s0 + *sl + SEAL_UNIT - 1) / SEAL_UNIT * SEAL_UNIT;

	*skip = *s0 - a;
	if (a == *s0 && b == *s0 + *sl)
		return false;
	*s0 = a;
	*sl = b - a;
	return true;
}

#define READ_BATCH 8 /* extents whose fragments are asked at once */
_Static_assert(READ_BATCH <= DPLAN_MAX, "a batch's degraded reads go at once");

struct rbatch {
	struct piece pc[READ_BATCH * EC_D_MAX];
	struct dcall calls[READ_BATCH * EC_D_MAX];
	uint8_t hdr[READ_BATCH * EC_D_MAX][STORE_PROTO_HDR + 8];
	unsigned first[READ_BATCH + 1];
	uint64_t a[READ_BATCH], b[READ_BATCH];	 /* the file range each extent gives */
	uint64_t s0[READ_BATCH], sl[READ_BATCH]; /* the stripe data it needs for that */
	/* an encoded block's stored bytes, or an encrypted extent's units (from skip on) */
	uint8_t *stored[READ_BATCH];
	uint64_t skip[READ_BATCH];
	struct meta_extent ex[READ_BATCH]; /* the extents, where their stripes are now */
	struct dplan dp[READ_BATCH];	   /* those read around what did not come */
	unsigned plan[READ_BATCH];	   /* 1 + the plan of an extent planned at once */
};

/*
 * Extent j's bytes, fetched, into dst (the file's bytes [a, b)): decrypted
 * (an encrypted file system's: in place, in dst or where they were
 * staged), expanded (a compressed block), or copied out of the units
 * staged around them.
 */
static int
land(sh_file *f, struct rbatch *r, unsigned j, uint8_t *dst)
{
	const struct meta_extent *e = &r->ex[j];
	uint8_t *at = r->stored[j] ? r->stored[j] : dst;
	int rc = 0;

	if (f->fs->keys)
		rc = seal_units(f->fs->keys, e->stripe, r->s0[j] / SEAL_UNIT, at, at,
				(size_t)r->sl[j], false);
	if (rc == 0 && e->enc != REDUCE_RAW)
		rc = expand(e, at + r->skip[j], r->a[j], r->b[j], dst);
	else if (rc == 0 && r->stored[j])
		memcpy(dst, at + r->skip[j], (size_t)(r->b[j] - r->a[j]));
	return rc;
}

/*
 * Read [at, upto) of the file, covered by extents ex[0..n), into buf (the
 * file offset off): the fragment ranges of up to READ_BATCH extents in
 * one round, all in parallel; an extent whose fragments do not all come
 * (a target down or silent, a corrupt block) is decoded from the others;
 * a compressed block is fetched whole and expanded.
 */
static int
read_extents(sh_file *f, const struct meta_extent *ex, unsigned n, uint64_t at, uint64_t upto,
	     uint8_t *buf, uint64_t off)
{
	struct rbatch *r = sh_calloc(1, sizeof(*r));
	int rc = r == NULL ? -ENOMEM : 0;

	for (unsigned i0 = 0; rc == 0 && i0 < n; i0 += READ_BATCH) {
		unsigned k = n - i0 < READ_BATCH ? n - i0 : READ_BATCH, np = 0, nd = 0;

		for (unsigned j = 0; rc == 0 && j < k; j++) {
			const struct meta_extent *e = &r->ex[j];
			uint64_t a, b;
			uint8_t *dst;
			unsigned c = 0;

			r->ex[j] = ex[i0 + j];
			client_loc_apply(f->fs, &r->ex[j]);
			a = e->off > at ? e->off : at;
			b = e->off + e->len < upto ? e->off + e->len : upto;
			dst = buf + (a - off);
			r->a[j] = a;
			r->b[j] = b;
			r->first[j] = np;
			r->skip[j] = 0;
			if (a < b) {
				/* encoded: the whole block, staged; encrypted: whole units, staged
				 * unless the file's bytes are those units (decrypted in place) */
				bool staged;

				meta_extent_stored(e, a, b, &r->s0[j], &r->sl[j]);
				staged =
				    f->fs->keys ? widen(&r->s0[j], &r->sl[j], &r->skip[j]) : false;
				staged |= e->enc != REDUCE_RAW;
				if (staged && (dst = r->stored[j] = sh_malloc(r->sl[j])) == NULL)
					rc = -ENOMEM;
				if (rc == 0)
					c = pieces(e, r->s0[j], r->s0[j] + r->sl[j], dst,
						   r->pc + np);
			}
			get_calls(f, e, r->pc + np, c, r->calls + np, r->hdr + np);
			r->plan[j] = 0;
			for (unsigned i = np; rc == 0 && i < np + c; i++) {
				if (r->calls[i].peer != 0)
					continue;
				/* a target known down: read around it in this same round */
				dplan_init(f, &r->dp[nd], e, r->s0[j], (size_t)r->sl[j], dst);
				c = dplan_next(f, &r->dp[nd], r->pc + np);
				get_calls(f, &r->dp[nd].e, r->pc + np, c, r->calls + np,
					  r->hdr + np);
				r->plan[j] = ++nd;
				break;
			}
			np += c;
		}
		r->first[k] = np;
		if (rc == 0)
			client_calls(f->fs->c, r->calls, np, GET_NS);
		/* the extents whose fragments did not all come: read around, all at once */
		for (unsigned j = 0; rc == 0 && j < k; j++) {
			const struct meta_extent *e = &r->ex[j];
			bool ok = true;

			if (r->a[j] >= r->b[j])
				continue;
			if (r->plan[j] != 0) {
				dplan_took(&r->dp[r->plan[j] - 1], r->pc + r->first[j],
					   r->calls + r->first[j], r->first[j + 1] - r->first[j]);
				continue;
			}
			for (unsigned i = r->first[j]; i < r->first[j + 1]; i++)
				ok &= r->calls[i].status >= 0 && r->calls[i].got == r->pc[i].len;
			if (ok)
				continue;
			dplan_init(f, &r->dp[nd], e, r->s0[j], (size_t)r->sl[j],
				   r->stored[j] ? r->stored[j] : buf + (r->a[j] - off));
			/* (the same targets: the pieces that came are the same bytes) */
			if (memcmp(r->dp[nd].e.targets, e->targets,
				   ((size_t)e->d + e->p) * sizeof(e->targets[0])) == 0)
				dplan_reuse(&r->dp[nd], r->pc + r->first[j], r->calls + r->first[j],
					    r->first[j + 1] - r->first[j]);
			nd++;
		}
		if (rc == 0 && nd > 0)
			rc = degraded(f, r->dp, nd);
		for (unsigned j = 0; rc == 0 && j < k; j++)
			if (r->a[j] < r->b[j])
				rc = land(f, r, j, buf + (r->a[j] - off));
		for (unsigned j = 0; j < k; j++) {
			sh_free(r->stored[j]);
			r->stored[j] = NULL;
		}
	}
	sh_free(r);
	return rc;
}

static uint64_t
ctime_ns(const struct stat *st)
{
	return (uint64_t)st->st_ctim.tv_sec * 1000000000ull + (uint64_t)st->st_ctim.tv_nsec;
}

/* Map m still describes the file, whose attributes are st now. */
static bool
map_fresh(const sh_file *f, const struct emap *m, const struct stat *st)
{
	return m->wgen == atomic_load(&f->fs->wgen) && m->ctime_ns == ctime_ns(st) &&
	       m->size == (uint64_t)st->st_size;
}

/*
 * The extents of [at, end) from the handle's maps (the first fresh one
 * that holds at): up to max into ex (*n), and *upto, how far they
 * describe the file (<= end). 0, or 1 if no fresh map holds at (the
 * file's attributes are st now).
 */

static int
map_get(sh_file *f, const struct stat *st, uint64_t at, uint64_t end, struct meta_extent *ex,
	unsigned max, unsigned *n, uint64_t *upto)
{
	const struct emap *m = NULL;
	int rc = 1;

	*n = 0;
	pthread_mutex_lock(&f->mu);
	for (unsigned w = 0; w < MAP_WINDOWS && m == NULL; w++)
		if (f->map[w] != NULL && f->map[w]->from <= at && at < f->map[w]->to &&
		    map_fresh(f, f->map[w], st))
			m = f->map[w];
	if (m != NULL) {
		*upto = m->to < end ? m->to : end;
		for (unsigned i = 0; i < m->n && *n < max; i++)
			if (m->ex[i].off < *upto && m->ex[i].off + m->ex[i].len > at)
				ex[(*n)++] = m->ex[i];
		if (*n == max && ex[max - 1].off + ex[max - 1].len < *upto)
			*upto = ex[max - 1].off + ex[max - 1].len;
		rc = 0;
	}
	pthread_mutex_unlock(&f->mu);
	return rc;
}

/*
 * What a map of the extents from at (m->n of them, more: the bucket has
 * more after the last) describes of the file whose attributes are st, as
 * of the client's writes counter wgen.
 */
void
io_map_bounds(struct emap *m, const struct stat *st, uint64_t at, bool more, uint64_t wgen)
{
	m->from = at;
	m->to = (uint64_t)st->st_size;
	if (more)
		m->to = m->n ? m->ex[m->n - 1].off + m->ex[m->n - 1].len : at + 1;
	m->wgen = wgen;
	m->ctime_ns = ctime_ns(st);
	m->size = (uint64_t)st->st_size;
}

/* [off, end) of a small file whose bytes are the slen at data into buf; the rest reads as zeros. */
static void
inline_copy(uint8_t *buf, uint64_t off, uint64_t end, const uint8_t *data, size_t slen)
{
	size_t n = off < slen ? (size_t)((end < slen ? end : slen) - off) : 0;

	memcpy(buf, data + off, n);
	memset(buf + n, 0, (size_t)(end - off) - n);
}

/*
 * (under f->mu) m among f's maps: in a free window, else in
 * place of the oldest; the maps that no longer describe the file (its
 * attributes are st now) go first.
 */
static void
map_keep(sh_file *f, struct emap *m, const struct stat *st)
{
	int free_at = -1;

	for (unsigned w = 0; w < MAP_WINDOWS; w++) {
		if (f->map[w] != NULL && !map_fresh(f, f->map[w], st)) {
			sh_free(f->map[w]);
			f->map[w] = NULL;
		}
		if (f->map[w] == NULL && free_at < 0)
			free_at = (int)w;
	}
	if (free_at < 0) {
		free_at = (int)(f->map_hand++ % MAP_WINDOWS);
		sh_free(f->map[free_at]);
	}
	f->map[free_at] = m;
}

/*
 * Ask the file's bucket for the extents from at to the end of the file
 * (size), EXTENTS_BATCH at most, and keep them in the handle's map; those
 * of [at, end) into ex and *n as map_get does. 0, 1 if the file's bytes
 * are inline (copied to buf, which is file offset off, up to end), or
 * -errno.
 */
static int
map_fetch(sh_file *f, const struct stat *st, uint64_t at, uint64_t off, uint64_t end, uint8_t *buf,
	  struct meta_extent *ex, unsigned *n, uint64_t *upto)
{
	uint64_t size = (uint64_t)st->st_size;
	struct mp_req q = { .kind = MP_EXTENTS,
			    .fs = f->fs->id,
			    .bucket = meta_ino_bucket(f->ino),
			    .ino = f->ino,
			    .max = EXTENTS_BATCH,
			    .off = at,
			    .len = size - at,
			    .at = client_at(f->fs) };
	uint64_t wgen = atomic_load(&f->fs->wgen);
	struct emap *m = sh_malloc(sizeof(*m));
	struct cres res;
	int rc;

	if (m == NULL)
		return -ENOMEM;
	{
		/* the bytes of a small file may have come with its attributes */
		uint8_t small[META_INLINE_MAX];
		size_t slen;

		if (cache_get_inline(f->fs, f->ino, size, ctime_ns(st), small, sizeof(small),
				     &slen)) {
			inline_copy(buf, off, end, small, slen);
			sh_free(m);
			return 1;
		}
	}
	m->n = 0;
	rc = client_meta(f->fs->c, &q, &res);
	if (rc == 0 && (res.rep.flags & MP_INLINE)) {
		/* a small file: its bytes came back; the rest is a hole */
		inline_copy(buf, off, end, res.rep.data, res.rep.dlen);
		cres_fini(&res);
		sh_free(m);
		return 1;
	}
	if (rc == 0 && res.rep.dlen > 0 &&
	    meta_extent_list_decode(res.rep.data, res.rep.dlen, m->ex, &m->n) < 0)
		rc = -EPROTO;
	if (rc == 0) {
		io_map_bounds(m, st, at, (res.rep.flags & MP_MORE) != 0, wgen);
		*n = 0;
		*upto = m->to < end ? m->to : end;
		for (unsigned i = 0; i < m->n; i++)
			if (m->ex[i].off < *upto && m->ex[i].off + m->ex[i].len > at)
				ex[(*n)++] = m->ex[i];
		pthread_mutex_lock(&f->mu);
		map_keep(f, m, st);
		m = NULL;
		pthread_mutex_unlock(&f->mu);
	}
	cres_fini(&res);
	sh_free(m);
	return rc;
}

/* (io_int.h, under f->mu) Every map of f forgotten. */
void
io_map_drop_all(sh_file *f)
{
	for (unsigned w = 0; w < MAP_WINDOWS; w++) {
		sh_free(f->map[w]);
		f->map[w] = NULL;
	}
}

static void
map_drop(sh_file *f)
{
	pthread_mutex_lock(&f->mu);
	io_map_drop_all(f);
	pthread_mutex_unlock(&f->mu);
}

/*
 * (io_int.h) Holes read as zeros; the rest is read over, not zeroed first
 * (a pass over every byte read: 6.5% of a sequential read's profile).
 */
void
io_zero_holes(const struct meta_extent *ex, unsigned n, uint64_t at, uint64_t upto, uint8_t *buf,
	      uint64_t off)
{
	for (uint64_t pos = at; pos < upto;) {
		uint64_t next = upto, cover = pos;

		for (unsigned i = 0; i < n; i++) {
			uint64_t a = ex[i].off, b = ex[i].off + ex[i].len;

			if (a <= pos && pos < b)
				cover = b > cover ? b : cover;
			else if (a > pos && a < next)
				next = a;
		}
		if (cover == pos) {
			memset(buf + (pos - off), 0, (size_t)(next - pos));
			cover = next;
		}
		pos = cover;
	}
}

/*
 * Read [off, end) of the file, whose attributes are st, into buf. 0 or
 * -errno. A pass over a kept map that fails is read again from a map
 * fetched afresh (a kept map may name stripes released since: a cleaner
 * moved them, which changes nothing the file's attributes show); each
 * pass asks for itself, since a later pass of a read may find another
 * kept map after an earlier one fetched.
 */
int
io_read_range(sh_file *f, const struct stat *st, uint8_t *buf, uint64_t off, uint64_t end)
{
	unsigned drops = 0;
	int rc;

	for (uint64_t at = off; at < end;) {
		struct meta_extent ex[EXTENTS_BATCH];
		unsigned n = 0;
		uint64_t upto = end;
		bool fetched = false;

		if (map_get(f, st, at, end, ex, EXTENTS_BATCH, &n, &upto) != 0) {
			rc = map_fetch(f, st, at, off, end, buf, ex, &n, &upto);
			if (rc == 1)
				break; /* inline */
			if (rc < 0)
				return rc;
			fetched = true;
		}
		io_zero_holes(ex, n, at, upto, buf, off);
		rc = read_extents(f, ex, n, at, upto, buf, off);
		if (rc < 0 && !fetched && drops++ < READ_MAP_DROPS) {
			map_drop(f); /* (the pass again: it fetches, or another thread just did) */
			memset(buf + (at - off), 0, (size_t)(end - at));
			continue;
		}
		if (rc < 0)
			return rc;
		at = upto;
	}
	return 0;
}

/* ---- read-ahead ---- */

/*
 * Window w is valid for the file as st describes it, while nothing on this
 * client changed extents since wgen (the caller loads fs->wgen once: another
 * thread's write moves it at any time).
 */
static bool
ra_valid(const struct ra_win *w, const struct stat *st, uint64_t wgen)
{
	return w->len > 0 && !w->busy && w->wgen == wgen && w->ctime_ns == ctime_ns(st) &&
	       w->size == (uint64_t)st->st_size;
}

struct ra_job {
	sh_file *f;
	struct ra_win *w;
	struct stat st;
	uint64_t off, len, wgen;
	uint8_t *buf;
};

static void
run_ra(void *arg)
{
	struct ra_job *j = arg;
	sh_file *f = j->f;
	struct ra_win *w = j->w;
	int rc = io_read_range(f, &j->st, j->buf, j->off, j->off + j->len);

	pthread_mutex_lock(&f->mu);
	if (rc == 0) { /* (j->buf is w->buf) */
		w->off = j->off;
		w->len = j->len;
		w->wgen = j->wgen;
		w->ctime_ns = ctime_ns(&j->st);
		w->size = (uint64_t)j->st.st_size;
	}
	w->busy = false;
	pthread_cond_broadcast(&f->idle);
	pthread_mutex_unlock(&f->mu);
	sh_free(j);
}

/* Where window w's bytes end (held or coming), if they lie past pos for this file; else 0. */
static uint64_t
ra_front(const sh_file *f, const struct ra_win *w, const struct stat *st, uint64_t pos)
{
	uint64_t e = w->busy					  ? w->want_off + w->want_len
		     : ra_valid(w, st, atomic_load(&f->fs->wgen)) ? w->off + w->len
								  : 0;

	return e > pos ? e : 0;
}

/*
 * Under mu: after a read of [off, end) that followed the one before it,
 * keep the next 2 x ra_len bytes held or coming: a free window (one the
 * reader has passed, or stale) fetches ra_len more from where the others
 * end, in the background. ra_len: two stripes, or twice the read, up to
 * eight stripes.
 */
static void
ra_next(sh_file *f, const struct stat *st, uint64_t off, uint64_t end)
{
	size_t stripe = (size_t)ndata(f) * frag_of(f), ra_len = 2 * stripe;
	uint64_t size = (uint64_t)st->st_size, front = end;
	struct ra_win *free_w = NULL;
	struct ra_job *j;

	f->ra_seq = off == f->ra_seq_end ? f->ra_seq + 1 : 0;
	f->ra_seq_end = end;
	if (f->ra_seq == 0 || end >= size)
		return;
	if (2 * (end - off) > ra_len)
		ra_len = 2 * (end - off) < 8 * stripe ? (size_t)(2 * (end - off)) : 8 * stripe;
	for (unsigned i = 0; i < RA_WIN; i++) {
		uint64_t e = ra_front(f, &f->ra[i], st, end);

		if (e > front)
			front = e;
		else if (e == 0 && !f->ra[i].busy && free_w == NULL)
			free_w = &f->ra[i];
	}
	if (free_w == NULL || front >= size || front - end >= 2 * (uint64_t)ra_len)
		return;
	/* the window's own buffer is fetched into (a new one only to grow it): nothing reads
	 * a busy window, and a buffer used again costs no page faults */
	if (free_w->cap < ra_len) {
		uint8_t *b = sh_malloc(ra_len);

		if (b == NULL)
			return; /* short of memory: no read-ahead */
		sh_free(free_w->buf);
		free_w->buf = b;
		free_w->cap = ra_len;
	}
	j = sh_calloc(1, sizeof(*j));
	if (j == NULL)
		return;
	j->buf = free_w->buf;
	free_w->len = 0; /* its bytes are overwritten from here on */
	j->f = f;
	j->w = free_w;
	j->st = *st;
	j->off = front;
	j->len = front + ra_len < size ? ra_len : size - front;
	j->wgen = atomic_load(&f->fs->wgen);
	free_w->busy = true;
	free_w->want_off = j->off;
	free_w->want_len = j->len;
	if (wpool_run(f->fs, WPOOL_RA, run_ra, j) < 0) {
		free_w->busy = false;
		sh_free(j);
	}
}

/* Under mu: whether a window is fetching any of [off, end). */
bool
io_ra_coming(const sh_file *f, uint64_t off, uint64_t end)
{
	for (unsigned i = 0; i < RA_WIN; i++) {
		const struct ra_win *w = &f->ra[i];

		if (w->busy && off < w->want_off + w->want_len && w->want_off < end)
			return true;
	}
	return false;
}

/* Under mu: the valid window holding pos, or NULL. */
static const struct ra_win *
ra_at(const sh_file *f, const struct stat *st, uint64_t pos, uint64_t wgen)
{
	for (unsigned i = 0; i < RA_WIN; i++) {
		const struct ra_win *w = &f->ra[i];

		if (ra_valid(w, st, wgen) && pos >= w->off && pos < w->off + w->len)
			return w;
	}
	return NULL;
}

/*
 * Under mu: [off, end) copied from the windows if they hold all of it. Both
 * passes judge the windows by one load of wgen: with a load each, a write
 * on another thread between them made the second find no window where the
 * first had found one (the mount died so under dbench: a NULL window).
 */
static bool
ra_copy(const sh_file *f, const struct stat *st, uint8_t *buf, uint64_t off, uint64_t end)
{
	uint64_t wgen = atomic_load(&f->fs->wgen), pos, to;
	const struct ra_win *w;

	for (pos = off; pos < end; pos = w->off + w->len < end ? w->off + w->len : end)
		if ((w = ra_at(f, st, pos, wgen)) == NULL)
			return false;
	for (pos = off; pos < end; pos = to) {
		w = ra_at(f, st, pos, wgen);
		to = w->off + w->len < end ? w->off + w->len : end;
		memcpy(buf + (pos - off), w->buf + (pos - w->off), (size_t)(to - pos));
	}
	return true;
}

long
sh_pread(sh_file *f, void *buf, size_t len, uint64_t off)
{
	struct stat st;
	uint64_t end;
	bool hit = false;
	int rc;

	pthread_mutex_lock(&f->mu);
	io_wait_behind(f);
	rc = f->err ? f->err : io_stale(f);
	if (rc == 0 && f->fill > 0)
		rc = io_flush(f); /* what this handle wrote reads back */
	if (rc < 0) {
		pthread_mutex_unlock(&f->mu); /* the error stays for fsync and close */
		return rc;
	}
	pthread_mutex_unlock(&f->mu);
	if ((f->flags & O_ACCMODE) == O_WRONLY)
		return -EBADF;
	rc = sh_getattr(f->fs, f->ino, &st);
	if (rc < 0)
		return rc;
	if (off >= (uint64_t)st.st_size || len == 0)
		return 0;
	end = (uint64_t)st.st_size - off < len ? (uint64_t)st.st_size : off + len;
	/* sequential readers: from the read-ahead when it holds the range (or is fetching it) */
	pthread_mutex_lock(&f->mu);
	while (io_ra_coming(f, off, end))
		pthread_cond_wait(&f->idle, &f->mu);
	hit = ra_copy(f, &st, buf, off, end);
	ra_next(f, &st, off, end);
	pthread_mutex_unlock(&f->mu);
	if (!hit) {
		rc = io_read_range(f, &st, buf, off, end);
		if (rc < 0)
			return rc;
	}
	return (long)(end - off);
}
