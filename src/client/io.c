// SPDX-License-Identifier: Apache-2.0
/*
 * libshoal's file data (client.h, docs/client.md "Data"): writes buffered
 * into stripes, erasure-coded and written straight to their targets, then
 * mapped in the file's bucket; reads of the data fragments' byte ranges
 * straight from the targets, rebuilt from any D fragments when some are
 * missing or corrupt.
 */
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include <openssl/sha.h>

#include "../data/reduce.h"
#include "../meta/meta_dedup.h"
#include "../store/store_proto.h"
#include "client_int.h"

_Static_assert((int)REDUCE_ALGO_LZ4 == (int)CFG_COMP_LZ4 &&
		   (int)REDUCE_ALGO_ZSTD == (int)CFG_COMP_ZSTD &&
		   (1u << 2) == (1u << CFG_COMP_LEVEL_SHIFT),
	       "reduce.h reads cfg_fs.compression as config.h writes it");

#define SMALL_ALIGN   4096u /* a partial stripe's fragments round up to this */
#define PUT_NS	      (5ull * 1000 * 1000 * 1000)
#define GET_NS	      (2ull * 1000 * 1000 * 1000)
#define RETRY_US      300000
#define EXTENTS_BATCH 64
#define BEHIND_MAX    16	 /* stripes of one file in flight in the background, at most */
#define BEHIND_BYTES  (8u << 20) /* and at most this much of them (but 4 stripes) */
#define SPARES_MAX    4		 /* stripe buffers a handle keeps for reuse between them */
/* Files up to this size keep their bytes with the inode (one metadata write, no stripe). */
#define INLINE_MAX META_INLINE_MAX

#define RA_WIN 2 /* read-ahead windows per open file */

struct sh_file {
	sh_fs *fs;
	uint64_t ino;
	int flags;
	pthread_mutex_t mu;
	uint8_t *buf; /* the stripe being filled: d x frag_of() bytes */
	uint64_t buf_off;
	size_t fill;
	bool checked; /* this handle knows the file has no inline bytes (it has extents) */
	/* it was empty at open (created, truncated): no inline bytes to take along before its
	 * first stripe; another writer's since then make the mapping say -EAGAIN */
	bool empty;
	int err;	  /* a failed flush, reported by the next call */
	struct emap *map; /* the extents last fetched (under mu), NULL until a read */
	/* stripes written in the background (wpool), under mu */
	pthread_cond_t idle; /* signalled as each one ends */
	unsigned behind;
	struct {
		uint64_t off, end;
	} rng[BEHIND_MAX];	    /* what each covers (off == end: a free slot) */
	uint8_t *spare[SPARES_MAX]; /* stripe buffers to reuse */
	unsigned nspare;
	/*
	 * read-ahead for a sequential reader (under mu; filled by the AIO
	 * threads): RA_WIN windows, so that one is fetched while the reader
	 * copies from the other (one window made each read wait for a fetch
	 * of what it had just passed: 0.76x the mount's kernel read-ahead)
	 */
	struct ra_win {
		uint8_t *buf;
		uint64_t off, len;	     /* what buf holds (len 0: nothing) */
		uint64_t want_off, want_len; /* what is being fetched, while busy */
		bool busy;
		uint64_t wgen, ctime_ns, size; /* the file as it was then */
	} ra[RA_WIN];
	uint64_t ra_seq_end; /* where the last read ended */
	unsigned ra_seq;     /* reads in a row, each where the last ended */
};

/*
 * A handle's map of [from, to) of its file, kept while nothing on this
 * client changes extents (fs->wgen) and the file's ctime and size stay
 * what they were (another client's write changes them, and the attribute
 * cache is recalled then): sequential reads ask the metadata bucket once
 * per EXTENTS_BATCH extents, not once per read. A stripe released under
 * a map that could not know it fails the read, which then refetches.
 */
struct emap {
	uint64_t from, to, wgen;
	/* the file as it was when fetched: another client's change moves ctime (recalled) */
	uint64_t ctime_ns, size;
	unsigned n;
	struct meta_extent ex[EXTENTS_BATCH];
};

/* A full stripe's fragment size (the client's, sh_client_opts.frag_kb). */
static size_t
frag_of(const sh_file *f)
{
	return f->fs->c->frag;
}

static unsigned
ndata(const sh_file *f)
{
	return f->fs->code.d;
}

static unsigned
nfrags(const sh_file *f)
{
	return f->fs->code.d + f->fs->code.p;
}

/* ---- writing a stripe ---- */

/* What a stripe maps: its extents (stripe, d, p, frag and targets filled in once placed). */
struct packed {
	unsigned n;
	struct meta_extent ex[META_EXTENTS_MAX];
};

/* The file bytes per compressed block: 64 KiB, more when a stripe would need too many. */
static size_t
block_of(const sh_file *f)
{
	size_t full = (size_t)ndata(f) * frag_of(f), bl = REDUCE_BLOCK * 1024u;
	size_t need = (full + META_EXTENTS_MAX - 1) / META_EXTENTS_MAX;

	return need > bl ? (need + SMALL_ALIGN - 1) / SMALL_ALIGN * SMALL_ALIGN : bl;
}

/*
 * Compress the fill bytes of src (file offset off) block by block, packing
 * what is stored to the front of out (each block stored compressed, or raw
 * when that does not pay): the bytes the stripe holds. A run of raw blocks
 * is one extent, each compressed block one of its own. out may be src
 * (then src is changed); it is not when compressing, so that a stripe the
 * mapping refuses (-EAGAIN) is written again from the bytes the file had,
 * not from what was packed of them (fsx caught LZ4 frames read back as
 * file data).
 */
static size_t
pack(sh_file *f, uint64_t off, const uint8_t *src, size_t fill, uint8_t *out, struct packed *pk)
{
	size_t bl = block_of(f), w = 0;
	uint8_t *tmp = f->fs->comp ? sh_malloc(bl) : NULL;

	pk->n = 0;
	for (size_t r = 0; r < fill; r += bl) {
		size_t len = fill - r < bl ? fill - r : bl;
		struct meta_extent *last = pk->n ? &pk->ex[pk->n - 1] : NULL;
		uint8_t enc = REDUCE_RAW;
		size_t slen = tmp ? reduce_block(f->fs->comp, src + r, len, tmp, &enc) : 0;

		if (enc != REDUCE_RAW) {
			memcpy(out + w, tmp, slen); /* w <= r: nothing unread is overwritten */
			pk->ex[pk->n++] = (struct meta_extent){ .off = off + r,
								.len = len,
								.soff = w,
								.enc = enc,
								.slen = (uint32_t)slen,
								.blen = (uint32_t)len };
			w += slen;
			continue;
		}
		if (out + w != src + r)
			memmove(out + w, src + r, len);
		if (last && !last->enc && last->soff + last->len == w)
			last->len += len; /* raw after raw: one extent */
		else
			pk->ex[pk->n++] =
			    (struct meta_extent){ .off = off + r, .len = len, .soff = w };
		w += len;
	}
	sh_free(tmp);
	return w;
}

/* One stripe to write: d data fragments of frag bytes (parity is made here), in bucket's name. */
struct wstripe {
	uint8_t *data; /* d x frag bytes */
	uint32_t frag;
	uint16_t bucket; /* whom its id names: who is asked whether it is still needed */
	uint64_t stripe; /* set once written */
	uint64_t targets[EC_N_MAX];
	uint8_t *parity[EC_P_MAX];
	struct dcall puts[EC_N_MAX];
	uint8_t hdr[EC_N_MAX][STORE_PROTO_HDR + 8];
	bool done;
};

/* Tell the targets of a stripe that never got mapped to drop its fragments (those put). */
static void
release(sh_file *f, const struct wstripe *w)
{
	struct dcall rel[EC_N_MAX];
	uint8_t hdr[EC_N_MAX][STORE_PROTO_HDR + 8];
	unsigned n = 0;

	for (unsigned i = 0; i < nfrags(f); i++) {
		struct store_proto_req r = { .target = w->targets[i],
					     .stripe = w->stripe,
					     .idx = i };

		if (w->puts[i].status < 0)
			continue;
		rel[n] = (struct dcall){ .peer = w->puts[i].peer,
					 .op = NET_OP_STORE_RELEASE,
					 .niov = 1 };
		memcpy(rel[n].addr, w->puts[i].addr, sizeof(rel[n].addr));
		rel[n].iov[0] =
		    (struct iovec){ hdr[n], store_proto_encode(NET_OP_STORE_RELEASE, &r, hdr[n]) };
		n++;
	}
	client_calls(f->fs->c, rel, n, PUT_NS);
}

/* The fragment size of a stripe holding len bytes: full, or the least 4 KiB multiple. */
static uint32_t
frag_for(const sh_file *f, size_t len)
{
	unsigned d = ndata(f);

	return len == (size_t)d * frag_of(f)
		   ? (uint32_t)frag_of(f)
		   : (uint32_t)(((len + d - 1) / d + SMALL_ALIGN - 1) / SMALL_ALIGN * SMALL_ALIGN);
}

/*
 * Write k stripes, all their fragments at once: parity, a new stripe id
 * (and so new places) for each attempt of one that did not make it,
 * around the targets that failed the last attempt (until the
 * configuration says they are down, a node just killed still looks up).
 * Tried for as long as the client's operation timeout, not a number of
 * times: a node restarting refuses PUTs for a moment (its drive not open
 * yet), and writes must not fail while no more than P nodes are down.
 * -EIO after the timeout; what was put of a failed attempt is released.
 */
static int
write_stripes(sh_file *f, struct wstripe *w, unsigned k)
{
	unsigned d = ndata(f), n = nfrags(f), left = k;
	struct dcall *calls = sh_calloc((size_t)k * n, sizeof(*calls));
	uint64_t failed[EC_N_MAX * 2];
	unsigned nfailed = 0;
	uint64_t deadline = sh_clock_mono_ns() + f->fs->c->timeout_ns;
	int rc = calls == NULL ? -ENOMEM : 0;

	for (unsigned j = 0; rc == 0 && j < k; j++) {
		uint8_t *frags[EC_N_MAX];

		for (unsigned i = 0; i < f->fs->code.p; i++)
			if ((w[j].parity[i] = sh_malloc(w[j].frag)) == NULL)
				rc = -ENOMEM;
		for (unsigned i = 0; rc == 0 && i < n; i++)
			frags[i] = i < d ? w[j].data + (size_t)i * w[j].frag : w[j].parity[i - d];
		if (rc == 0)
			ec_encode(&f->fs->code, w[j].frag, (const uint8_t *const *)frags,
				  w[j].parity);
		w[j].done = false;
	}
	for (int attempt = 0; rc == 0 && left > 0; attempt++) {
		unsigned nc = 0;

		if (attempt > 0 && sh_clock_mono_ns() + RETRY_US * 1000ull > deadline) {
			rc = -EIO;
			break;
		}
		if (attempt > 0)
			usleep(attempt == 1 ? RETRY_US / 3 : RETRY_US);
		for (unsigned j = 0; rc == 0 && j < k; j++) {
			if (w[j].done)
				continue;
			w[j].stripe = (uint64_t)w[j].bucket << 48 |
				      (client_tag(f->fs->c) & 0xFFFFFFFFFFFFull);
			rc = client_place(f->fs->c, w[j].stripe, n, f->fs->code.p, failed, nfailed,
					  w[j].targets);
			if (rc == -ENOSPC && nfailed > 0) /* not around them all: with them */
				rc = client_place(f->fs->c, w[j].stripe, n, f->fs->code.p, NULL, 0,
						  w[j].targets);
			for (unsigned i = 0; rc == 0 && i < n; i++) {
				struct store_proto_req r = { .target = w[j].targets[i],
							     .stripe = w[j].stripe,
							     .idx = i,
							     .len = w[j].frag };
				struct dcall *c = &w[j].puts[i];

				*c = (struct dcall){ .op = NET_OP_STORE_PUT, .niov = 2 };
				rc = client_target(f->fs->c, r.target, &c->peer, c->addr);
				/* the bytes first, then the header (store_proto.h) */
				c->iov[0] =
				    (struct iovec){ i < d ? w[j].data + (size_t)i * w[j].frag
							  : w[j].parity[i - d],
						    w[j].frag };
				c->iov[1] = (struct iovec){ w[j].hdr[i],
							    store_proto_encode(NET_OP_STORE_PUT, &r,
									       w[j].hdr[i]) };
			}
			for (unsigned i = 0; rc == 0 && i < n; i++)
				calls[nc++] = w[j].puts[i];
		}
		if (rc == -ENOSPC || rc == -ENXIO) {
			/* too few domains up for the protection (or a target not in the
			 * configuration yet): wait for the configuration to change */
			rc = 0;
			nfailed = 0;
			continue;
		}
		if (rc < 0)
			break;
		client_calls(f->fs->c, calls, nc, PUT_NS);
		nc = 0;
		nfailed = 0;
		for (unsigned j = 0; j < k; j++) {
			bool ok = true;

			if (w[j].done)
				continue;
			for (unsigned i = 0; i < n; i++) {
				w[j].puts[i] = calls[nc++];
				ok &= w[j].puts[i].status >= 0;
				if (w[j].puts[i].status < 0 && nfailed < sizeof(failed) / 8)
					failed[nfailed++] = w[j].targets[i];
			}
			if (ok) {
				w[j].done = true;
				left--;
			} else {
				release(f, &w[j]);
			}
		}
	}
	for (unsigned j = 0; j < k; j++)
		for (unsigned i = 0; i < f->fs->code.p; i++) {
			sh_free(w[j].parity[i]);
			w[j].parity[i] = NULL;
		}
	sh_free(calls);
	return rc;
}

/* Map the extents (of stripes written) at the file's bucket, with the claims they use. */
static int
map_extents(sh_file *f, const struct meta_extent *ex, unsigned n, const struct meta_claim_ref *cl,
	    unsigned ncl, unsigned flags, uint64_t from)
{
	struct meta_cmd mc = { .op = META_OP_EXTENT,
			       .ino = f->ino,
			       .flags = flags | (from ? META_EXTENT_MOVE : 0),
			       .upto = from,
			       .tag = client_tag(f->fs->c) };
	struct sh_enc enc;
	struct cres res;
	int rc;

	sh_enc_init(&enc);
	if (ncl > 0) {
		mc.flags |= META_EXTENT_CLAIMS;
		rc = meta_claims_encode(&enc, ex, n, cl, ncl);
	} else {
		rc = meta_extent_list_encode(&enc, ex, n);
	}
	mc.data = enc.p;
	mc.dlen = enc.len;
	if (rc == 0)
		rc = ns_cmd(f->fs, meta_ino_bucket(f->ino), &mc, &res);
	else
		memset(&res, 0, sizeof(res));
	cres_fini(&res);
	sh_enc_fini(&enc);
	return rc;
}

/* ---- writing with dedup (meta_dedup.h; docs/reduction.md "Deduplication") ---- */

struct dblock {
	uint64_t off; /* file offset */
	size_t len;
	uint8_t fp[META_FP_LEN];
	uint16_t bucket;	/* of its entry */
	unsigned claim;		/* its claim (cl[]) */
	struct meta_extent loc; /* where it is (stripe 0: not in the index) */
	int w;			/* the stripe this write stores it in, or -1 */
};

/* One claim command: up to META_DEDUP_MAX blocks of one claim (one bucket). */
struct creq {
	unsigned claim; /* in cl[] */
	unsigned idx[META_DEDUP_MAX], n;
	struct sh_enc items, cmd;
};

/* The reply to r: each block's loc (stripe 0: not in the index, when not stored). */
static int
claim_reply(struct dblock *b, const struct creq *r, const struct cres *res, bool stored,
	    uint64_t *when)
{
	struct sh_dec d;
	int rc = res->status;

	if (rc < 0)
		return rc;
	sh_dec_init(&d, res->rep.data, res->rep.dlen);
	if (sh_dec_u8(&d) != r->n)
		return -EPROTO;
	for (unsigned i = 0; i < r->n; i++) {
		struct dblock *blk = &b[r->idx[i]];
		uint8_t vl = sh_dec_u8(&d);
		const uint8_t *v = sh_dec_bytes(&d, vl);

		if (vl == 0 && !stored) {
			blk->loc.stripe = 0; /* not there: this write stores it */
			continue;
		}
		if (v == NULL || meta_extent_decode(v, vl, &blk->loc) < 0 || !blk->loc.dedup ||
		    blk->loc.blen != blk->len || memcmp(blk->loc.fp, blk->fp, META_FP_LEN) != 0)
			return -EPROTO;
	}
	if (sh_dec_error(&d))
		return -EPROTO;
	if (*when == 0 || res->rep.aux < *when)
		*when = res->rep.aux;
	return 0;
}

/*
 * Claim blocks at their entries' buckets, all buckets at once: every block
 * (stored false: the reply says which the index has, and holds those), or
 * those this write stored (stored true: entered, or the copy that was
 * first returned). Sets each block's loc and each claim's time.
 */
static int
claim_all(sh_file *f, struct dblock *b, unsigned nb, struct meta_claim_ref *cl, unsigned ncl,
	  bool stored)
{
	struct creq *r = sh_calloc(nb, sizeof(*r));
	struct mp_req *q = sh_calloc(nb, sizeof(*q));
	struct cres *res = sh_calloc(nb, sizeof(*res));
	unsigned nr = 0;
	int rc = r && q && res ? 0 : -ENOMEM;

	for (unsigned c = 0; rc == 0 && c < ncl; c++) {
		struct creq *cur = NULL;

		for (unsigned i = 0; i < nb; i++) {
			if (b[i].claim != c || (stored && b[i].w < 0))
				continue;
			if (cur == NULL || cur->n == META_DEDUP_MAX) {
				cur = &r[nr++];
				cur->claim = c;
			}
			cur->idx[cur->n++] = i;
		}
	}
	for (unsigned k = 0; rc == 0 && k < nr; k++) {
		struct meta_dedup_item it[META_DEDUP_MAX];
		struct meta_cmd mc = { .op = META_OP_DEDUP_CLAIM, .ver = 1 };

		memset(it, 0, sizeof(it));
		for (unsigned i = 0; i < r[k].n; i++) {
			memcpy(it[i].fp, b[r[k].idx[i]].fp, META_FP_LEN);
			it[i].has_loc = stored;
			if (stored)
				it[i].loc = b[r[k].idx[i]].loc;
		}
		sh_enc_init(&r[k].items);
		sh_enc_init(&r[k].cmd);
		rc = meta_claim_encode(&r[k].items, cl[r[k].claim].claim, meta_ino_bucket(f->ino),
				       it, r[k].n);
		mc.data = r[k].items.p;
		mc.dlen = r[k].items.len;
		if (rc == 0)
			rc = meta_cmd_encode(&r[k].cmd, &mc);
		q[k] = (struct mp_req){ .kind = MP_CMD,
					.fs = f->fs->id,
					.bucket = cl[r[k].claim].bucket,
					.data = r[k].cmd.p,
					.dlen = r[k].cmd.len };
	}
	if (rc == 0)
		client_metas(f->fs->c, q, res, nr);
	for (unsigned k = 0; k < nr; k++) {
		if (rc == 0)
			rc = claim_reply(b, &r[k], &res[k], stored, &cl[r[k].claim].when);
		cres_fini(&res[k]);
		sh_enc_fini(&r[k].items);
		sh_enc_fini(&r[k].cmd);
	}
	sh_free(r);
	sh_free(q);
	sh_free(res);
	return rc;
}

/*
 * Write fill bytes of buf at file offset off with dedup: each block's
 * fingerprint asked of its entry's bucket (held there if it is known);
 * the unknown ones compressed and stored, a stripe each, and entered
 * (another writer may have been first: then its copy is used and ours
 * released); then the extents mapped, consuming the claims.
 */
static int
dedup_once(sh_file *f, uint64_t off, uint8_t *buf, size_t fill, unsigned flags)
{
	size_t bl = block_of(f);
	unsigned nb = (unsigned)((fill + bl - 1) / bl), ncl = 0, nw = 0, d = ndata(f);
	struct dblock *b = sh_calloc(nb, sizeof(*b));
	struct wstripe *w = sh_calloc(nb, sizeof(*w));
	struct meta_claim_ref cl[META_CLAIMS_MAX];
	struct meta_extent *ex = sh_calloc(nb, sizeof(*ex));
	uint8_t *tmp = sh_malloc(bl);
	int rc = b && w && ex && tmp ? 0 : -ENOMEM;
	bool entered = false;

	/* 1. fingerprints; a claim per bucket */
	for (unsigned i = 0; rc == 0 && i < nb; i++) {
		unsigned c = 0;

		b[i].off = off + (uint64_t)i * bl;
		b[i].len = fill - (size_t)i * bl < bl ? fill - (size_t)i * bl : bl;
		b[i].w = -1;
		SHA256(buf + (size_t)i * bl, b[i].len, b[i].fp);
		b[i].bucket = meta_fp_bucket(b[i].fp, f->fs->nbuckets);
		while (c < ncl && cl[c].bucket != b[i].bucket)
			c++;
		if (c == ncl)
			cl[ncl++] = (struct meta_claim_ref){ .bucket = b[i].bucket,
							     .claim = client_tag(f->fs->c) };
		b[i].claim = c;
	}
	/* 2. which does the cluster have? (those it has are held from here on) */
	if (rc == 0)
		rc = claim_all(f, b, nb, cl, ncl, false);
	/* 3. the others: compressed, a stripe each (a block twice in this write: once) */
	for (unsigned i = 0; rc == 0 && i < nb; i++) {
		uint8_t enc = REDUCE_RAW;
		size_t slen;

		if (b[i].loc.stripe != 0)
			continue;
		for (unsigned k = 0; k < i && b[i].w < 0; k++)
			if (b[k].w >= 0 && memcmp(b[k].fp, b[i].fp, META_FP_LEN) == 0) {
				b[i].w = b[k].w;
				b[i].loc = b[k].loc;
			}
		if (b[i].w >= 0)
			continue;
		slen = reduce_block(f->fs->comp, buf + (size_t)i * bl, b[i].len, tmp, &enc);
		if (enc == REDUCE_RAW)
			slen = b[i].len;
		w[nw].frag = frag_for(f, slen);
		w[nw].bucket = b[i].bucket; /* its entry's bucket keeps its stripe */
		w[nw].data = sh_calloc(d, w[nw].frag);
		if (w[nw].data == NULL) {
			rc = -ENOMEM;
			break;
		}
		memcpy(w[nw].data, enc == REDUCE_RAW ? buf + (size_t)i * bl : tmp, slen);
		b[i].loc = (struct meta_extent){ .len = b[i].len,
						 .soff = 0,
						 .d = (uint8_t)d,
						 .p = (uint8_t)f->fs->code.p,
						 .enc = enc,
						 .slen = (uint32_t)slen,
						 .blen = (uint32_t)b[i].len,
						 .dedup = true };
		memcpy(b[i].loc.fp, b[i].fp, META_FP_LEN);
		b[i].w = (int)nw++;
	}
	if (rc == 0 && nw > 0)
		rc = write_stripes(f, w, nw);
	for (unsigned i = 0; rc == 0 && i < nb; i++) {
		if (b[i].w < 0)
			continue;
		b[i].loc.stripe = w[b[i].w].stripe;
		b[i].loc.frag = w[b[i].w].frag;
		memcpy(b[i].loc.targets, w[b[i].w].targets, nfrags(f) * sizeof(uint64_t));
	}
	/* 4. enter what was stored (or learn whose copy was first) */
	if (rc == 0 && nw > 0)
		rc = claim_all(f, b, nb, cl, ncl, true);
	entered = rc == 0;
	/* 5. map */
	for (unsigned i = 0; rc == 0 && i < nb; i++) {
		ex[i] = b[i].loc;
		ex[i].off = b[i].off;
		ex[i].len = b[i].len;
		ex[i].boff = 0;
	}
	if (rc == 0)
		rc = map_extents(f, ex, nb, cl, ncl, flags, 0);
	/*
	 * Our copies another writer's came first for: released. Not one that
	 * was entered (others may use it already, mapped or not here: its
	 * entry's counts decide), nor any if we do not know what was entered
	 * (a claim whose answer was lost may have been applied): what no
	 * entry names, the targets' orphan sweep releases.
	 */
	for (unsigned k = 0; b && k < nw; k++) {
		bool used = false;

		for (unsigned i = 0; i < nb; i++)
			used |= b[i].loc.stripe == w[k].stripe;
		if (entered && !used && w[k].done)
			release(f, &w[k]);
		sh_free(w[k].data);
	}
	sh_free(b);
	sh_free(w);
	sh_free(ex);
	sh_free(tmp);
	return rc;
}

static int
put_dedup(sh_file *f, uint64_t off, uint8_t *buf, size_t fill, unsigned flags)
{
	int rc = dedup_once(f, off, buf, fill, flags);

	/* claims that grew too old before the mapping (a very slow write): once more, afresh;
	 * the old ones are released by their buckets */
	return rc == -ETIMEDOUT ? dedup_once(f, off, buf, fill, flags) : rc;
}

/*
 * Write fill bytes of buf (room for D x frag_of(f)) as one stripe and map them
 * at file offset off (flags: META_EXTENT_TAKES_INLINE when the stripe holds
 * the file's inline bytes), compressed first if the filesystem says so
 * (buf's fill bytes stay the file's). -EAGAIN: the file has inline bytes this writer did not
 * know of (the stripe was released; look again). from (cleaning): mapped
 * only where the range is still all stripe from's, else -ESTALE.
 */
static int
put_stripe_from(sh_file *f, uint64_t off, uint8_t *buf, size_t fill, unsigned flags, uint64_t from)
{
	uint8_t *out;
	struct wstripe *w;
	struct packed pk;
	int rc;

	if (f->fs->dedup && from == 0)
		return put_dedup(f, off, buf, fill, flags);
	w = sh_calloc(1, sizeof(*w));
	/* compressed: packed apart, buf left as the file's bytes (pack) */
	out = f->fs->comp ? sh_malloc((size_t)ndata(f) * frag_of(f)) : buf;
	if (w == NULL || out == NULL) {
		sh_free(w);
		return -ENOMEM;
	}
	fill = pack(f, off, buf, fill, out, &pk);
	w->frag = frag_for(f, fill);
	w->data = out;
	/* the file's bucket in the top 16 bits: whoever finds a fragment knows whom to ask
	 * whether anything still refers to its stripe */
	w->bucket = meta_ino_bucket(f->ino);
	memset(out + fill, 0, (size_t)ndata(f) * w->frag - fill);
	rc = write_stripes(f, w, 1);
	if (rc == 0) {
		for (unsigned i = 0; i < pk.n; i++) {
			struct meta_extent *e = &pk.ex[i];

			e->stripe = w->stripe;
			e->d = (uint8_t)ndata(f);
			e->p = (uint8_t)f->fs->code.p;
			e->frag = w->frag;
			memcpy(e->targets, w->targets, nfrags(f) * sizeof(w->targets[0]));
		}
		rc = map_extents(f, pk.ex, pk.n, NULL, 0, flags, from);
		/* refused as such (nothing mapped): its fragments go now; after any other
		 * failure (a lost answer, a timeout) the mapping may have happened, and the
		 * targets' orphan sweep releases them if it did not */
		if (rc == -EAGAIN || rc == -ESTALE)
			release(f, w);
	}
	if (out != buf)
		sh_free(out);
	sh_free(w);
	return rc;
}

static int
put_stripe(sh_file *f, uint64_t off, uint8_t *buf, size_t fill, unsigned flags)
{
	return put_stripe_from(f, off, buf, fill, flags, 0);
}

/*
 * A small file's bytes as they are now: *len of them into buf (capacity
 * META_INLINE_MAX). 1 if they are inline, 0 if the file has extents (or
 * nothing) in its first META_INLINE_MAX bytes, or -errno.
 */
static int
inline_now(sh_file *f, uint8_t *buf, size_t *len)
{
	struct mp_req q = { .kind = MP_EXTENTS,
			    .fs = f->fs->id,
			    .bucket = meta_ino_bucket(f->ino),
			    .ino = f->ino,
			    .max = 1,
			    .off = 0,
			    .len = UINT64_MAX }; /* an extent anywhere: not a small file */
	struct cres res;
	int rc = client_meta(f->fs->c, &q, &res);

	*len = 0;
	if (rc == 0 && (res.rep.flags & MP_INLINE)) {
		*len = res.rep.dlen < META_INLINE_MAX ? res.rep.dlen : META_INLINE_MAX;
		memcpy(buf, res.rep.data, *len);
		rc = 1;
	} else if (rc == 0) {
		rc = res.rep.dlen > 0 ? 0 : 2; /* 2: nothing there yet */
	}
	cres_fini(&res);
	return rc;
}

/* The file's inline bytes cur (clen of them) into a stripe of their own (mapping drops them). */
static int
move_inline(sh_file *f, const uint8_t *cur, size_t clen)
{
	uint8_t *tmp = sh_calloc(ndata(f), frag_of(f));
	int rc;

	if (tmp == NULL)
		return -ENOMEM;
	memcpy(tmp, cur, clen);
	rc = put_stripe(f, 0, tmp, clen, META_EXTENT_TAKES_INLINE);
	sh_free(tmp);
	return rc;
}

/* Whatever the file has inline now, into a stripe (after -EAGAIN from a mapping). */
static int
take_inline(sh_file *f)
{
	uint8_t cur[META_INLINE_MAX];
	size_t clen = 0;
	int state = inline_now(f, cur, &clen);

	if (state < 0)
		return state;
	return state == 1 && clen > 0 ? move_inline(f, cur, clen) : 0;
}

/* The buffer written into the file's inline bytes where it lies (the bucket merges them). */
static int
inline_merge(sh_file *f)
{
	struct meta_cmd mc = { .op = META_OP_INLINE,
			       .flags = META_INLINE_MERGE,
			       .ino = f->ino,
			       .upto = f->buf_off,
			       .data = f->buf,
			       .dlen = f->fill };
	struct cres res;
	int rc = ns_cmd(f->fs, meta_ino_bucket(f->ino), &mc, &res);

	cres_fini(&res);
	return rc;
}

/* Write the buffer: inline with the inode if the file stays small, else as a stripe. */
static int
flush_buf(sh_file *f)
{
	int rc;

	if (f->fill == 0)
		return 0;
	if (f->buf_off + f->fill <= INLINE_MAX && !f->checked) {
		/* small: into what is inline (or nothing), kept with the inode, in one commit */
		rc = inline_merge(f);
		if (rc == 0) {
			f->fill = 0;
			f->empty = false; /* a stripe later takes these along */
			return 0;
		}
		if (rc != -ENOTEMPTY)
			return rc;
		/* the file has extents (another writer's, or from before): a stripe */
	} else if (!f->checked && !f->empty) {
		/* a stripe: what is inline goes into one of its own first (mapping drops it) */
		rc = take_inline(f);
		if (rc < 0)
			return rc;
	}
	f->checked = true;
	rc = put_stripe(f, f->buf_off, f->buf, f->fill, 0);
	if (rc == -EAGAIN) {
		/* another handle gave the file inline bytes since we looked: take them along */
		f->checked = false;
		f->empty = false;
		return flush_buf(f);
	}
	if (rc == 0)
		f->fill = 0;
	return rc;
}

static int flush(sh_file *f);

/*
 * How many stripes of a file are written at once in the background: as
 * many as fit in BEHIND_BYTES, 4 to BEHIND_MAX. Each stripe waits on
 * round trips (fragments, then its mapping; with dedup, claims too), so
 * more in flight hide more of them: 4 -> 12 took a 256 MiB write from
 * 1.13 s to 0.83 s, 3.5 s to 2.45 s with dedup (docs/performance.md).
 */
static unsigned
behind_max(const sh_file *f)
{
	size_t stripe = (size_t)ndata(f) * frag_of(f);
	size_t n = BEHIND_BYTES / (stripe ? stripe : 1);

	return n < 4 ? 4 : n > BEHIND_MAX ? BEHIND_MAX : (unsigned)n;
}

/* Wait (mu held) until no stripe of f is in flight in the background. */
static void
wait_behind(sh_file *f)
{
	while (f->behind > 0)
		pthread_cond_wait(&f->idle, &f->mu);
}

struct behind {
	sh_file *f;
	unsigned slot;
	uint64_t off;
	uint8_t *buf;
	size_t fill;
};

static void
run_behind(void *arg)
{
	struct behind *b = arg;
	sh_file *f = b->f;
	int rc;

	atomic_fetch_add(&f->fs->wgen, 1);
	rc = put_stripe(f, b->off, b->buf, b->fill, 0);
	if (rc == -EAGAIN) {
		/* another handle gave the file inline bytes: they go first, then this */
		rc = take_inline(f);
		if (rc == 0)
			rc = put_stripe(f, b->off, b->buf, b->fill, 0);
	}
	atomic_fetch_add(&f->fs->wgen, 1);
	pthread_mutex_lock(&f->mu);
	if (rc < 0 && f->err == 0)
		f->err = rc; /* the next call on the handle reports it */
	f->rng[b->slot].off = f->rng[b->slot].end = 0;
	if (f->nspare < SPARES_MAX)
		f->spare[f->nspare++] = b->buf;
	else
		sh_free(b->buf);
	f->behind--;
	pthread_cond_broadcast(&f->idle);
	pthread_mutex_unlock(&f->mu);
	sh_free(b);
}

/*
 * A full stripe buffer (mu held): written in the background when the
 * file is past its inline size, up to BEHIND_MAX stripes in flight,
 * after any in flight that overlaps it (extents commit in write order
 * where it matters). Otherwise, or short of memory, written now.
 */
static int
flush_full(sh_file *f)
{
	size_t full = (size_t)ndata(f) * frag_of(f);
	uint64_t off, end;
	struct behind *b;
	unsigned slot = 0;

	for (;;) {
		bool overlap = false;

		/* (again after each wait: other writers had the handle meanwhile) */
		if (f->fill != full)
			return 0; /* flushed meanwhile by another writer (and maybe refilled) */
		off = f->buf_off;
		end = off + f->fill;
		if (!f->checked || end <= INLINE_MAX)
			return flush(f);
		for (unsigned i = 0; i < BEHIND_MAX; i++)
			overlap |= f->rng[i].off < end && off < f->rng[i].end;
		if (!overlap && f->behind < behind_max(f))
			break;
		pthread_cond_wait(&f->idle, &f->mu);
	}
	if (f->err)
		return f->err;
	b = sh_calloc(1, sizeof(*b));
	if (b != NULL) {
		b->buf = f->buf;
		f->buf =
		    f->nspare ? f->spare[--f->nspare] : sh_malloc((size_t)ndata(f) * frag_of(f));
		if (f->buf == NULL) {
			f->buf = b->buf;
			sh_free(b);
			b = NULL;
		}
	}
	if (b == NULL)
		return flush(f);
	while (f->rng[slot].off != f->rng[slot].end)
		slot++;
	b->f = f;
	b->slot = slot;
	b->off = off;
	b->fill = f->fill;
	f->rng[slot].off = off;
	f->rng[slot].end = end;
	f->behind++;
	f->fill = 0;
	if (wpool_run(f->fs, WPOOL_BEHIND, run_behind, b) < 0) {
		/* no writer thread: here, now */
		pthread_mutex_unlock(&f->mu);
		run_behind(b);
		pthread_mutex_lock(&f->mu);
		return f->err;
	}
	return 0;
}

static int
flush(sh_file *f)
{
	int rc;

	wait_behind(f); /* what is written now may overlap them, and follows them */
	if (f->fill == 0)
		return 0;
	/* the file's extents change: bumped before and after, a read in between refetches */
	atomic_fetch_add(&f->fs->wgen, 1);
	rc = flush_buf(f);
	atomic_fetch_add(&f->fs->wgen, 1);
	return rc;
}

/* ---- reading ---- */

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
		rc = -EIO; /* more than P lost: nothing to rebuild from */
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

#define READ_BATCH 8 /* extents whose fragments are asked at once */
_Static_assert(READ_BATCH <= DPLAN_MAX, "a batch's degraded reads go at once");

struct rbatch {
	struct piece pc[READ_BATCH * EC_D_MAX];
	struct dcall calls[READ_BATCH * EC_D_MAX];
	uint8_t hdr[READ_BATCH * EC_D_MAX][STORE_PROTO_HDR + 8];
	unsigned first[READ_BATCH + 1];
	uint64_t a[READ_BATCH], b[READ_BATCH];	 /* the file range each extent gives */
	uint64_t s0[READ_BATCH], sl[READ_BATCH]; /* the stripe data it needs for that */
	uint8_t *stored[READ_BATCH];		 /* an encoded block's stored bytes */
	struct meta_extent ex[READ_BATCH];	 /* the extents, where their stripes are now */
	struct dplan dp[READ_BATCH];		 /* those read around what did not come */
	unsigned plan[READ_BATCH];		 /* 1 + the plan of an extent planned at once */
};

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
			if (a < b) {
				meta_extent_stored(e, a, b, &r->s0[j], &r->sl[j]);
				if (e->enc && (dst = r->stored[j] = sh_malloc(r->sl[j])) == NULL)
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
				   e->enc ? r->stored[j] : buf + (r->a[j] - off));
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
			if (r->a[j] < r->b[j] && r->ex[j].enc)
				rc = expand(&r->ex[j], r->stored[j], r->a[j], r->b[j],
					    buf + (r->a[j] - off));
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

/*
 * The extents of [at, end) from the handle's map: up to max into ex (*n),
 * and *upto, how far they describe the file (<= end). 0, or 1 if the map
 * does not hold at or is stale (the file's attributes are st now).
 */
static int
map_get(sh_file *f, const struct stat *st, uint64_t at, uint64_t end, struct meta_extent *ex,
	unsigned max, unsigned *n, uint64_t *upto)
{
	const struct emap *m;
	int rc = 1;

	*n = 0;
	pthread_mutex_lock(&f->mu);
	m = f->map;
	if (m != NULL && m->wgen == atomic_load(&f->fs->wgen) && m->ctime_ns == ctime_ns(st) &&
	    m->size == (uint64_t)st->st_size && m->from <= at && at < m->to) {
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
static void
map_bounds(struct emap *m, const struct stat *st, uint64_t at, bool more, uint64_t wgen)
{
	m->from = at;
	m->to = (uint64_t)st->st_size;
	if (more)
		m->to = m->n ? m->ex[m->n - 1].off + m->ex[m->n - 1].len : at + 1;
	m->wgen = wgen;
	m->ctime_ns = ctime_ns(st);
	m->size = (uint64_t)st->st_size;
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
			    .len = size - at };
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
			if (off < slen)
				memcpy(buf, small + off, (size_t)((end < slen ? end : slen) - off));
			sh_free(m);
			return 1;
		}
	}
	m->n = 0;
	rc = client_meta(f->fs->c, &q, &res);
	if (rc == 0 && (res.rep.flags & MP_INLINE)) {
		/* a small file: its bytes came back; the rest is a hole */
		if (off < res.rep.dlen)
			memcpy(buf, res.rep.data + off,
			       (size_t)((end < res.rep.dlen ? end : res.rep.dlen) - off));
		cres_fini(&res);
		sh_free(m);
		return 1;
	}
	if (rc == 0 && res.rep.dlen > 0 &&
	    meta_extent_list_decode(res.rep.data, res.rep.dlen, m->ex, &m->n) < 0)
		rc = -EPROTO;
	if (rc == 0) {
		map_bounds(m, st, at, (res.rep.flags & MP_MORE) != 0, wgen);
		*n = 0;
		*upto = m->to < end ? m->to : end;
		for (unsigned i = 0; i < m->n; i++)
			if (m->ex[i].off < *upto && m->ex[i].off + m->ex[i].len > at)
				ex[(*n)++] = m->ex[i];
		pthread_mutex_lock(&f->mu);
		sh_free(f->map);
		f->map = m;
		m = NULL;
		pthread_mutex_unlock(&f->mu);
	}
	cres_fini(&res);
	sh_free(m);
	return rc;
}

static void
map_drop(sh_file *f)
{
	pthread_mutex_lock(&f->mu);
	sh_free(f->map);
	f->map = NULL;
	pthread_mutex_unlock(&f->mu);
}

/* Read [off, end) of the file, whose attributes are st, into buf. 0 or -errno. */
static int
read_range(sh_file *f, const struct stat *st, uint8_t *buf, uint64_t off, uint64_t end)
{
	bool fetched = false;
	int rc;

	memset(buf, 0, (size_t)(end - off)); /* holes read as zeros */
	for (uint64_t at = off; at < end;) {
		struct meta_extent ex[EXTENTS_BATCH];
		unsigned n = 0;
		uint64_t upto = end;

		if (map_get(f, st, at, end, ex, EXTENTS_BATCH, &n, &upto) != 0) {
			rc = map_fetch(f, st, at, off, end, buf, ex, &n, &upto);
			if (rc == 1)
				break; /* inline */
			if (rc < 0)
				return rc;
			fetched = true;
		}
		rc = read_extents(f, ex, n, at, upto, buf, off);
		if (rc < 0 && !fetched) {
			/* a kept map may name stripes since released: once more, afresh */
			map_drop(f);
			memset(buf + (at - off), 0, (size_t)(end - at));
			fetched = true;
			continue;
		}
		if (rc < 0)
			return rc;
		at = upto;
	}
	return 0;
}

/* ---- read-ahead ---- */

/* Window w is valid for the file as st describes it now. */
static bool
ra_valid(const sh_file *f, const struct ra_win *w, const struct stat *st)
{
	return w->len > 0 && !w->busy && w->wgen == atomic_load(&f->fs->wgen) &&
	       w->ctime_ns == ctime_ns(st) && w->size == (uint64_t)st->st_size;
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
	int rc = read_range(f, &j->st, j->buf, j->off, j->off + j->len);

	pthread_mutex_lock(&f->mu);
	if (rc == 0) {
		uint8_t *old = w->buf;

		w->buf = j->buf;
		j->buf = old;
		w->off = j->off;
		w->len = j->len;
		w->wgen = j->wgen;
		w->ctime_ns = ctime_ns(&j->st);
		w->size = (uint64_t)j->st.st_size;
	}
	w->busy = false;
	pthread_cond_broadcast(&f->idle);
	pthread_mutex_unlock(&f->mu);
	sh_free(j->buf);
	sh_free(j);
}

/* Where window w's bytes end (held or coming), if they lie past pos for this file; else 0. */
static uint64_t
ra_front(const sh_file *f, const struct ra_win *w, const struct stat *st, uint64_t pos)
{
	uint64_t e = w->busy ? w->want_off + w->want_len : ra_valid(f, w, st) ? w->off + w->len : 0;

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
	j = sh_calloc(1, sizeof(*j));
	if (j != NULL)
		j->buf = sh_malloc(ra_len);
	if (j == NULL || j->buf == NULL) {
		if (j != NULL)
			sh_free(j);
		return; /* short of memory: no read-ahead */
	}
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
		sh_free(j->buf);
		sh_free(j);
	}
}

/* Under mu: whether a window is fetching any of [off, end). */
static bool
ra_coming(const sh_file *f, uint64_t off, uint64_t end)
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
ra_at(const sh_file *f, const struct stat *st, uint64_t pos)
{
	for (unsigned i = 0; i < RA_WIN; i++) {
		const struct ra_win *w = &f->ra[i];

		if (ra_valid(f, w, st) && pos >= w->off && pos < w->off + w->len)
			return w;
	}
	return NULL;
}

/* Under mu: [off, end) copied from the windows if they hold all of it. */
static bool
ra_copy(const sh_file *f, const struct stat *st, uint8_t *buf, uint64_t off, uint64_t end)
{
	const struct ra_win *w;
	uint64_t pos, to;

	for (pos = off; pos < end; pos = w->off + w->len < end ? w->off + w->len : end)
		if ((w = ra_at(f, st, pos)) == NULL)
			return false;
	for (pos = off; pos < end; pos = to) {
		w = ra_at(f, st, pos);
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
	wait_behind(f);
	rc = f->err;
	if (rc == 0 && f->fill > 0)
		rc = flush(f); /* what this handle wrote reads back */
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
	while (ra_coming(f, off, end))
		pthread_cond_wait(&f->idle, &f->mu);
	hit = ra_copy(f, &st, buf, off, end);
	ra_next(f, &st, off, end);
	pthread_mutex_unlock(&f->mu);
	if (!hit) {
		rc = read_range(f, &st, buf, off, end);
		if (rc < 0)
			return rc;
	}
	return (long)(end - off);
}

/* ---- targets ---- */

int
sh_targets_usage(sh_fs *fs, struct sh_target_usage *out, unsigned max)
{
	uint64_t ids[CFG_DRIVES_MAX];
	unsigned n = client_targets(fs->c, ids, CFG_DRIVES_MAX), k = n < max ? n : max;
	struct dcall *calls = sh_calloc(k ? k : 1, sizeof(*calls));
	struct store_proto_stat *st = sh_calloc(k ? k : 1, sizeof(*st));
	uint8_t(*hdr)[STORE_PROTO_HDR + 8] = sh_calloc(k ? k : 1, sizeof(*hdr));

	if (calls == NULL || st == NULL || hdr == NULL) {
		sh_free(calls);
		sh_free(st);
		sh_free(hdr);
		return -ENOMEM;
	}
	for (unsigned i = 0; i < k; i++) {
		struct store_proto_req r = { .target = ids[i] };
		int rc = client_target(fs->c, ids[i], &calls[i].peer, calls[i].addr);

		calls[i].op = NET_OP_STORE_STAT;
		calls[i].niov = 1;
		calls[i].out = (uint8_t *)&st[i];
		calls[i].cap = sizeof(st[i]);
		calls[i].iov[0] =
		    (struct iovec){ hdr[i], store_proto_encode(NET_OP_STORE_STAT, &r, hdr[i]) };
		if (rc < 0) {
			calls[i].peer = 0;
			calls[i].status = rc;
		}
	}
	client_calls(fs->c, calls, k, GET_NS); /* those of nodes down are not asked */
	for (unsigned i = 0; i < k; i++) {
		out[i] = (struct sh_target_usage){ .target = ids[i], .status = calls[i].status };
		if (calls[i].status >= 0 && calls[i].got == sizeof(st[i])) {
			out[i].capacity = st[i].capacity;
			out[i].used = st[i].used;
			out[i].live = st[i].live;
			out[i].fragments = st[i].fragments;
		} else if (calls[i].status >= 0) {
			out[i].status = -EPROTO;
		}
	}
	sh_free(calls);
	sh_free(st);
	sh_free(hdr);
	return (int)n;
}

/* ---- the handle ---- */

long
sh_pwrite(sh_file *f, const void *buf, size_t len, uint64_t off)
{
	const uint8_t *p = buf;
	size_t stripe = (size_t)ndata(f) * frag_of(f), done = 0;
	int rc;

	if ((f->flags & O_ACCMODE) == O_RDONLY)
		return -EBADF;
	if (len > ((uint64_t)1 << 62) || off > ((uint64_t)1 << 62))
		return -EFBIG;
	pthread_mutex_lock(&f->mu);
	rc = f->err; /* a stripe written behind failed: reported until fsync or close */
	if (rc == 0 && !(f->flags & O_APPEND))
		rc = client_quota_admit(f->fs, f->ino, off, len);
	if (rc == 0 && (f->flags & O_APPEND)) {
		struct stat st;

		wait_behind(f); /* the size counts every stripe */
		rc = f->err ? f->err : f->fill ? flush(f) : 0;
		if (rc == 0)
			rc = sh_getattr(f->fs, f->ino, &st);
		off = (uint64_t)st.st_size;
		if (rc == 0)
			rc = client_quota_admit(f->fs, f->ino, off, len);
	}
	while (rc == 0 && done < len) {
		size_t k;

		/* not where the buffer ends: write what it holds, start it here */
		if (f->fill > 0 && off + done != f->buf_off + f->fill)
			rc = flush(f);
		if (rc < 0)
			break;
		if (f->fill == 0)
			f->buf_off = off + done;
		k = stripe - f->fill < len - done ? stripe - f->fill : len - done;
		memcpy(f->buf + f->fill, p + done, k);
		f->fill += k;
		done += k;
		if (f->fill == stripe)
			rc = flush_full(f);
	}
	pthread_mutex_unlock(&f->mu);
	return rc < 0 ? rc : (long)len;
}

int
sh_fsync(sh_file *f)
{
	int rc;

	pthread_mutex_lock(&f->mu);
	wait_behind(f);
	rc = f->err ? f->err : flush(f);
	f->err = 0;
	pthread_mutex_unlock(&f->mu);
	return rc;
}

int
sh_ftruncate(sh_file *f, uint64_t size)
{
	struct stat st = { .st_size = (off_t)size };
	int rc = sh_fsync(f);

	if ((f->flags & O_ACCMODE) == O_RDONLY)
		return -EBADF;
	return rc < 0 ? rc : sh_setattr(f->fs, f->ino, &st, SH_SET_SIZE, NULL);
}

int
sh_fstat(sh_file *f, struct stat *st)
{
	int rc = sh_fsync(f);

	return rc < 0 ? rc : sh_getattr(f->fs, f->ino, st);
}

/* A handle on a regular file whose attributes are st (after create/truncate). */
static int
open_stat(sh_fs *fs, const struct stat *st, int flags, sh_file **out)
{
	sh_file *f;

	if (S_ISDIR(st->st_mode))
		return -EISDIR;
	if (!S_ISREG(st->st_mode))
		return -EINVAL;
	if ((flags & O_TRUNC) && (flags & O_ACCMODE) != O_RDONLY && st->st_size > 0) {
		struct stat z = { 0 };
		int rc = sh_setattr(fs, st->st_ino, &z, SH_SET_SIZE, NULL);

		if (rc < 0)
			return rc;
	}
	f = sh_calloc(1, sizeof(*f));
	if (f == NULL)
		return -ENOMEM;
	f->buf = sh_malloc((size_t)fs->code.d * fs->c->frag);
	if (f->buf == NULL) {
		sh_free(f);
		return -ENOMEM;
	}
	f->fs = fs;
	f->ino = st->st_ino;
	f->flags = flags;
	f->empty = st->st_size == 0 || ((flags & O_TRUNC) && (flags & O_ACCMODE) != O_RDONLY);
	pthread_mutex_init(&f->mu, NULL);
	pthread_cond_init(&f->idle, NULL);
	*out = f;
	return 0;
}

/*
 * A new handle's map of the file from the extents that came with its hold
 * (wgen: the client's writes counter before it asked), as map_fetch keeps them.
 */
static void
map_seed(sh_file *f, const struct stat *st, const uint8_t *ext, size_t elen, bool more,
	 uint64_t wgen)
{
	struct emap *m = sh_malloc(sizeof(*m));

	if (m == NULL)
		return; /* the first read asks */
	m->n = 0;
	if (elen > 0 && meta_extent_list_decode(ext, elen, m->ex, &m->n) < 0) {
		sh_free(m);
		return;
	}
	map_bounds(m, st, 0, more, wgen);
	f->map = m;
}

static int open_held(sh_fs *fs, const struct stat *st, int flags, sh_file **out);

/*
 * ino held here (client_hold_open) and opened: an open that reads gets the
 * file's first extents along with the hold. -ESTALE: looked up again.
 */
static int
open_ino_held(sh_fs *fs, uint64_t ino, int flags, struct stat *st, sh_file **out)
{
	bool reads = (flags & O_ACCMODE) != O_WRONLY, more = false;
	uint64_t wgen = atomic_load(&fs->wgen);
	uint8_t *ext = NULL;
	size_t elen = 0;
	int rc = reads ? client_hold_open_read(fs, ino, true, st, &ext, &elen, &more)
		       : client_hold_open(fs, ino, true, st);

	if (rc == 0)
		rc = open_held(fs, st, flags, out); /* (a directory: -EISDIR, the hold undone) */
	if (rc == 0 && ext != NULL)
		map_seed(*out, st, ext, elen, more, wgen);
	sh_free(ext);
	return rc;
}

/* An open of a file now held here (client_hold_*): a handle, or the hold undone. */
static int
open_held(sh_fs *fs, const struct stat *st, int flags, sh_file **out)
{
	int rc = open_stat(fs, st, flags, out);

	if (rc < 0)
		client_hold_close(fs, st->st_ino);
	return rc;
}

int
sh_open(sh_fs *fs, const char *path, int flags, mode_t mode, sh_file **out)
{
	struct stat st;
	int rc = -ESTALE;

	/* a name renamed over or removed between its lookup and the hold: looked up again */
	for (int tries = 0; rc == -ESTALE && tries < 5; tries++) {
		rc = sh_stat(fs, path, &st);
		if (rc == -ENOENT && (flags & O_CREAT)) {
			rc = sh_mknod(fs, path, S_IFREG | (mode & 07777), 0);
			if (rc == -EEXIST && !(flags & O_EXCL))
				rc = 0; /* someone else made it meanwhile */
			if (rc == 0)
				rc = sh_stat(fs, path, &st);
		} else if (rc == 0 && (flags & O_CREAT) && (flags & O_EXCL)) {
			rc = -EEXIST;
		}
		if (rc < 0 || !S_ISREG(st.st_mode))
			break;
		rc = open_ino_held(fs, st.st_ino, flags, &st, out);
		if (rc == 0)
			return 0;
	}
	if (rc < 0)
		return rc;
	return open_stat(fs, &st, flags, out);
}

int
sh_open_ino(sh_fs *fs, uint64_t ino, int flags, sh_file **out)
{
	struct stat st;

	return open_ino_held(fs, ino, flags & ~(O_CREAT | O_EXCL), &st, out);
}

int
sh_open_stat(sh_fs *fs, const struct stat *st, int flags, sh_file **out)
{
	int rc;

	if (fs == NULL || st == NULL || out == NULL)
		return -EINVAL;
	if (!S_ISREG(st->st_mode))
		return open_stat(fs, st, flags & ~(O_CREAT | O_EXCL), out);
	rc = client_hold_created(fs, st->st_ino);
	return rc < 0 ? rc : open_held(fs, st, flags & ~(O_CREAT | O_EXCL), out);
}

sh_fs *
client_file_fs(const sh_file *f)
{
	return f->fs;
}

int
sh_close(sh_file *f)
{
	int rc;

	if (f == NULL)
		return -EINVAL;
	rc = sh_fsync(f);
	pthread_mutex_lock(&f->mu);
	while (ra_coming(f, 0, UINT64_MAX))
		pthread_cond_wait(&f->idle, &f->mu);
	pthread_mutex_unlock(&f->mu);
	client_hold_close(f->fs, f->ino); /* the last close here: a file without names goes */
	for (unsigned i = 0; i < RA_WIN; i++)
		sh_free(f->ra[i].buf);
	pthread_cond_destroy(&f->idle);
	pthread_mutex_destroy(&f->mu);
	while (f->nspare > 0)
		sh_free(f->spare[--f->nspare]);
	sh_free(f->map);
	sh_free(f->buf);
	sh_free(f);
	return rc;
}

/* ---- cleaning (docs/reduction.md "Cleaning") ---- */

/*
 * The live ranges of stripe of file ino: read and written anew (in new
 * stripes, compressed as any write), each mapped only if it is still all
 * the stripe's. Once none is left the stripe goes with its last reference.
 */
static int
clean_stripe(sh_fs *fs, uint64_t stripe, uint64_t ino, struct sh_clean_stats *out)
{
	struct {
		uint64_t off, end;
	} rng[META_EXTENTS_MAX];
	unsigned nr = 0;
	uint64_t at = 0;
	struct stat st;
	sh_file *f;
	uint8_t *buf = NULL;
	int rc = sh_open_ino(fs, ino, O_RDONLY, &f);

	if (rc == -ENOENT || rc == -ESTALE)
		return 0; /* the file went meanwhile: so does the stripe */
	if (rc < 0)
		return rc;
	rc = sh_fstat(f, &st);
	/* where the file still maps the stripe: its extents, EXTENTS_BATCH at a time */
	while (rc == 0 && at < (uint64_t)st.st_size && nr < META_EXTENTS_MAX) {
		struct mp_req q = { .kind = MP_EXTENTS,
				    .fs = fs->id,
				    .bucket = meta_ino_bucket(ino),
				    .ino = ino,
				    .max = EXTENTS_BATCH,
				    .off = at,
				    .len = (uint64_t)st.st_size - at };
		struct meta_extent ex[EXTENTS_BATCH];
		struct cres res;
		unsigned n = 0;

		rc = client_meta(fs->c, &q, &res);
		if (rc == 0 && (res.rep.flags & MP_INLINE))
			n = 0;
		else if (rc == 0 && res.rep.dlen > 0 &&
			 meta_extent_list_decode(res.rep.data, res.rep.dlen, ex, &n) < 0)
			rc = -EPROTO;
		for (unsigned i = 0; rc == 0 && i < n && nr < META_EXTENTS_MAX; i++) {
			if (ex[i].stripe != stripe || ex[i].dedup)
				continue;
			if (nr > 0 && rng[nr - 1].end == ex[i].off)
				rng[nr - 1].end += ex[i].len; /* adjacent: one range */
			else
				rng[nr++] = (typeof(rng[0])){ ex[i].off, ex[i].off + ex[i].len };
		}
		at = rc == 0 && n > 0 && (res.rep.flags & MP_MORE) ? ex[n - 1].off + ex[n - 1].len
								   : UINT64_MAX;
		cres_fini(&res);
	}
	if (rc == 0 && nr > 0 && (buf = sh_malloc((size_t)ndata(f) * frag_of(f))) == NULL)
		rc = -ENOMEM;
	for (unsigned i = 0; rc == 0 && i < nr; i++) {
		for (uint64_t off = rng[i].off; rc == 0 && off < rng[i].end;) {
			size_t len = (size_t)(rng[i].end - off) < (size_t)ndata(f) * frag_of(f)
					 ? (size_t)(rng[i].end - off)
					 : (size_t)ndata(f) * frag_of(f);

			rc = read_range(f, &st, buf, off, off + len);
			if (rc == 0)
				rc = put_stripe_from(f, off, buf, len, 0, stripe);
			if (rc == -ESTALE) {
				out->skipped++; /* written meanwhile: the new bytes are not ours to
						   move */
				rc = 0;
			} else if (rc == 0) {
				out->moved_bytes += len;
			}
			off += len;
		}
	}
	if (rc == 0 && nr > 0)
		out->stripes++;
	atomic_fetch_add(&fs->wgen, 1); /* the file's extents changed: maps go stale */
	sh_free(buf);
	sh_close(f);
	return rc;
}

int
sh_fs_clean(sh_fs *fs, uint32_t from, uint32_t to, struct sh_clean_stats *out,
	    void (*progress)(void *arg, uint32_t done, uint32_t total), void *arg)
{
	int rc = 0;

	memset(out, 0, sizeof(*out));
	if (to == 0 || to > fs->nbuckets)
		to = fs->nbuckets;
	for (uint32_t b = from; rc == 0 && b < to; b++) {
		struct mp_req q = {
			.kind = MP_DIRTY, .fs = fs->id, .bucket = (uint16_t)b, .max = 64
		};
		struct cres res;
		struct sh_dec d;

		rc = client_meta(fs->c, &q, &res);
		sh_dec_init(&d, res.rep.data, res.rep.dlen);
		for (size_t i = 0; rc == 0 && i < res.rep.dlen / 32; i++) {
			uint64_t stripe = sh_dec_u64(&d), ino = sh_dec_u64(&d);

			(void)sh_dec_u64(&d); /* live */
			(void)sh_dec_u64(&d); /* total */
			rc = clean_stripe(fs, stripe, ino, out);
		}
		cres_fini(&res);
		out->buckets++;
		if (progress)
			progress(arg, b - from + 1, to - from);
	}
	return rc;
}
