// SPDX-License-Identifier: Apache-2.0
/*
 * libshoal's write pipeline (docs/client.md "Data"): a handle's bytes
 * buffered into stripes, compressed and packed or, with dedup,
 * fingerprinted, claimed and stored once; erasure-coded, written straight
 * to their targets (several stripes of a file behind the writer), then
 * mapped in the file's bucket; small files kept inline with the inode.
 */
#include <assert.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include <openssl/sha.h>

#include "../data/reduce.h"
#include "../data/seal.h"
#include "../meta/meta_proto.h"
#include "../store/store_proto.h"
#include "io_int.h"

_Static_assert((int)REDUCE_ALGO_LZ4 == (int)CFG_COMP_LZ4 &&
		   (int)REDUCE_ALGO_ZSTD == (int)CFG_COMP_ZSTD &&
		   (1u << 2) == (1u << CFG_COMP_LEVEL_SHIFT),
	       "reduce.h reads cfg_fs.compression as config.h writes it");

/* ---- stripe buffers ---- */

/*
 * A handle fills a stripe buffer and its fragments are sent straight from
 * it (and parity from after them): a buffer whose sends are not all
 * acknowledged yet (a session still holds it, to send again) is not
 * written; it waits among the spares, or is freed by the last send.
 */
static bool
buf_alone(struct sh_buf *b)
{
	return atomic_load_explicit(&b->ref, memory_order_acquire) == 1;
}

struct sh_buf *
io_buf_take(sh_file *f)
{
	for (unsigned i = 0; i < f->nspare; i++) {
		struct sh_buf *b = f->spare[i];

		if (buf_alone(b)) {
			f->spare[i] = f->spare[--f->nspare];
			return b;
		}
	}
	return sh_buf_create((size_t)nfrags(f) * frag_of(f), 0);
}

void
io_buf_give(sh_file *f, struct sh_buf *b)
{
	if (f->nspare == SPARES_MAX) { /* the oldest goes (when its sends let it) */
		sh_buf_put(f->spare[0]);
		f->spare[0] = f->spare[--f->nspare];
	}
	f->spare[f->nspare++] = b;
}

int
io_buf_own(sh_file *f)
{
	struct sh_buf *b;

	if (buf_alone(f->bufh))
		return 0;
	b = io_buf_take(f);
	if (b == NULL)
		return -ENOMEM;
	memcpy(b->data, f->bufh->data, f->fill);
	io_buf_give(f, f->bufh);
	f->bufh = b;
	return 0;
}

/* ---- writing a stripe ---- */

/* What a stripe maps: its extents (stripe, d, p, frag and targets filled in once placed). */
struct packed {
	unsigned n;
	struct meta_extent ex[META_EXTENTS_MAX];
};

/* The file bytes per compressed block: 128 KiB, more when a stripe would need too many. */
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
	/* the buffer data lies in (its fragments are sent from it, and parity goes after
	 * them where it has room), or NULL (they are copied) */
	struct sh_buf *dbuf;
	struct sh_buf *pbuf; /* the parity's buffer, while it is written */
	uint32_t frag;
	uint16_t bucket; /* whom its id names: who is asked whether it is still needed */
	uint64_t stripe; /* set once written */
	/* an encrypted file system's: this attempt's ciphertext of data (seal.h), the parity
	 * after it; NULL otherwise */
	struct sh_buf *cbuf;
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

/* The parity fragments of the d data fragments at data. */
static void
parity(sh_file *f, struct wstripe *w, uint8_t *data)
{
	unsigned d = ndata(f), n = nfrags(f);
	uint8_t *frags[EC_N_MAX];

	for (unsigned i = 0; i < n; i++)
		frags[i] = i < d ? data + (size_t)i * w->frag : w->parity[i - d];
	ec_encode(&f->fs->code, w->frag, (const uint8_t *const *)frags, w->parity);
}

/*
 * An encrypted file system's stripe, for this attempt: its data encrypted
 * under its id now (seal.h) into a buffer of its own, and the parity of
 * that after it, so that no node ever needs a key to heal it. Never in
 * place: an earlier attempt's sends may still hold its buffers and send
 * them again (they stay ciphertext; the plain bytes are never sent).
 */
static int
seal_stripe(sh_file *f, struct wstripe *w)
{
	size_t len = (size_t)ndata(f) * w->frag;
	struct sh_buf *cb = sh_buf_create((size_t)nfrags(f) * w->frag, 0);
	int rc = cb == NULL ? -ENOMEM
			    : seal_units(f->fs->keys, w->stripe, 0, w->data, cb->data, len, true);

	if (rc < 0) {
		sh_buf_put(cb);
		return rc;
	}
	sh_buf_put(w->cbuf); /* (the sessions keep what they still send) */
	sh_buf_put(w->pbuf);
	w->cbuf = cb;
	w->pbuf = sh_buf_get(cb);
	for (unsigned i = 0; i < f->fs->code.p; i++)
		w->parity[i] = cb->data + len + (size_t)i * w->frag;
	parity(f, w, cb->data);
	return 0;
}

/*
 * Write k stripes, all their fragments at once: parity, a new stripe id
 * (and so new places) for each attempt of one that did not make it,
 * around the targets that failed the last attempt (until the
 * configuration says they are down, a node just killed still looks up).
 * Tried for as long as the client's operation timeout, not a number of
 * times: a node restarting refuses PUTs for a moment (its drive not open
 * yet), and writes must not fail while no more than P nodes are down.
 * -EIO after the timeout; -ENOSPC once FULL_TRIES attempts in a row failed
 * only on targets out of space (each around the last ones: the file system
 * is full, not one drive); what was put of a failed attempt is released.
 */
static int
write_stripes(sh_file *f, struct wstripe *w, unsigned k)
{
	unsigned d = ndata(f), n = nfrags(f), left = k;
	struct dcall *calls = sh_calloc((size_t)k * n, sizeof(*calls));
	uint64_t failed[EC_N_MAX * 2];
	unsigned nfailed = 0, full = 0; /* attempts in a row that failed on full targets only */
	uint64_t deadline = env_clock(f->fs->c->env) + f->fs->c->timeout_ns;
	int rc = calls == NULL ? -ENOMEM : 0;

	for (unsigned j = 0; rc == 0 && j < k && !f->fs->keys; j++) {
		size_t at =
		    w[j].dbuf ? (size_t)(w[j].data - w[j].dbuf->data) + (size_t)d * w[j].frag : 0;

		/* parity after the data in their buffer where it has room, else a buffer of its own
		 */
		if (w[j].dbuf && at + (size_t)f->fs->code.p * w[j].frag <= w[j].dbuf->cap) {
			w[j].pbuf = sh_buf_get(w[j].dbuf);
		} else {
			w[j].pbuf = sh_buf_create((size_t)f->fs->code.p * w[j].frag, 0);
			at = 0;
		}
		if (w[j].pbuf == NULL)
			rc = -ENOMEM;
		for (unsigned i = 0; rc == 0 && i < f->fs->code.p; i++)
			w[j].parity[i] = w[j].pbuf->data + at + (size_t)i * w[j].frag;
		if (rc == 0)
			parity(f, &w[j], w[j].data);
	}
	for (unsigned j = 0; j < k; j++)
		w[j].done = false;
	for (int attempt = 0; rc == 0 && left > 0; attempt++) {
		unsigned nc = 0;
		bool only_full = true; /* every PUT that failed in this attempt: -ENOSPC */

		if (full >= FULL_TRIES) {
			rc = -ENOSPC;
			break;
		}
		if (attempt > 0 && env_clock(f->fs->c->env) + RETRY_US * 1000ull > deadline) {
			rc = full > 0 ? -ENOSPC : -EIO;
			break;
		}
		if (attempt > 0)
			client_sleep(f->fs->c, (attempt == 1 ? RETRY_US / 3 : RETRY_US) * 1000ull);
		for (unsigned j = 0; rc == 0 && j < k; j++) {
			uint8_t *sent; /* the data fragments sent: the data, or its ciphertext */

			if (w[j].done)
				continue;
			w[j].stripe = (uint64_t)w[j].bucket << 48 |
				      (client_tag(f->fs->c) & 0xFFFFFFFFFFFFull);
			/* encrypted: its data under this id's tweaks, and parity of that */
			if (f->fs->keys && (rc = seal_stripe(f, &w[j])) < 0)
				break;
			sent = w[j].cbuf ? w[j].cbuf->data : w[j].data;
			/* around targets out of space only while that keeps the protection:
			 * a domain down is a reason to write degraded, a full drive is not */
			rc = client_place(f->fs->c, w[j].stripe, n, f->fs->code.p, failed, nfailed,
					  full == 0, w[j].targets);
			if (rc == -ENOSPC && nfailed > 0) /* not around them all: with them */
				rc = client_place(f->fs->c, w[j].stripe, n, f->fs->code.p, NULL, 0,
						  true, w[j].targets);
			for (unsigned i = 0; rc == 0 && i < n; i++) {
				struct store_proto_req r = { .target = w[j].targets[i],
							     .stripe = w[j].stripe,
							     .idx = i,
							     .len = w[j].frag };
				struct dcall *c = &w[j].puts[i];

				*c = (struct dcall){ .op = NET_OP_STORE_PUT, .niov = 2 };
				rc = client_target(f->fs->c, r.target, &c->peer, c->addr);
				/* the bytes first, then the header (store_proto.h) */
				c->iov[0] = (struct iovec){ i < d ? sent + (size_t)i * w[j].frag
								  : w[j].parity[i - d],
							    w[j].frag };
				c->zbuf = i < d ? (w[j].cbuf ? w[j].cbuf : w[j].dbuf) : w[j].pbuf;
				c->zoff =
				    c->zbuf
					? (size_t)((uint8_t *)c->iov[0].iov_base - c->zbuf->data)
					: 0;
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
				if (w[j].puts[i].status < 0 && w[j].puts[i].status != -ENOSPC)
					only_full = false;
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
		full = nfailed > 0 && only_full ? full + 1 : 0;
	}
	for (unsigned j = 0; j < k; j++) {
		sh_buf_put(w[j].pbuf); /* freed once its sends are acknowledged */
		w[j].pbuf = NULL;
		sh_buf_put(w[j].cbuf);
		w[j].cbuf = NULL;
		for (unsigned i = 0; i < f->fs->code.p; i++)
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
			       /* an append's buffer: its placement's tag (flush_append) */
			       .tag = (f->flags & O_APPEND) && from == 0 &&
					      !(flags & META_EXTENT_TAKES_INLINE) && f->append_tag
					  ? f->append_tag
					  : client_tag(f->fs->c) };
	struct sh_enc enc;
	struct cres res;
	int rc;

	if ((f->flags & O_APPEND) && from == 0) {
		/* an append (or the inline bytes moved before one): at the end it was for */
		mc.flags |= META_AT_END;
		mc.upto = f->buf_off;
	}
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
		if (f->fs->keys) /* keyed: the nodes never learn a plain hash of the bytes */
			rc = seal_fingerprint(f->fs->keys, buf + (size_t)i * bl, b[i].len, b[i].fp);
		else
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
		w[nw].dbuf = sh_buf_create((size_t)nfrags(f) * w[nw].frag, 0);
		if (w[nw].dbuf == NULL) {
			rc = -ENOMEM;
			break;
		}
		w[nw].data = w[nw].dbuf->data;
		memcpy(w[nw].data, enc == REDUCE_RAW ? buf + (size_t)i * bl : tmp, slen);
		memset(w[nw].data + slen, 0, (size_t)d * w[nw].frag - slen);
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
		sh_buf_put(w[k].dbuf);
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
put_stripe_in(sh_file *f, uint64_t off, uint8_t *buf, struct sh_buf *bh, size_t fill,
	      unsigned flags, uint64_t from)
{
	uint8_t *out;
	struct wstripe *w;
	struct packed pk;
	struct sh_buf *ob = NULL;
	int rc;

	if (f->fs->dedup && from == 0)
		return put_dedup(f, off, buf, fill, flags);
	w = sh_calloc(1, sizeof(*w));
	/* compressed: packed apart, buf left as the file's bytes (pack); an encrypted stripe is
	 * encrypted out of its data into a buffer of its own (seal_stripe), buf left alike */
	if (f->fs->comp && (ob = sh_buf_create((size_t)nfrags(f) * frag_of(f), 0)) == NULL) {
		sh_free(w);
		return -ENOMEM;
	}
	if (w == NULL) {
		sh_buf_put(ob);
		return -ENOMEM;
	}
	out = ob ? ob->data : buf;
	fill = pack(f, off, buf, fill, out, &pk);
	w->frag = frag_for(f, fill);
	w->data = out;
	w->dbuf = ob ? ob : bh;
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
	sh_buf_put(ob); /* freed once its sends are acknowledged */
	sh_free(w);
	return rc;
}

int
io_put_stripe_from(sh_file *f, uint64_t off, uint8_t *buf, size_t fill, unsigned flags,
		   uint64_t from)
{
	return put_stripe_in(f, off, buf, NULL, fill, flags, from);
}

/* A stripe of the bytes in bh (whose fragments are sent from it, not copied). */
static int
put_stripe(sh_file *f, uint64_t off, struct sh_buf *bh, size_t fill, unsigned flags)
{
	return put_stripe_in(f, off, bh->data, bh, fill, flags, 0);
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
			    .len = UINT64_MAX, /* an extent anywhere: not a small file */
			    .at = client_at(f->fs) };
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
	struct sh_buf *tmp = sh_buf_create((size_t)nfrags(f) * frag_of(f), 0);
	int rc;

	if (tmp == NULL)
		return -ENOMEM;
	memcpy(tmp->data, cur, clen);
	rc = put_stripe(f, 0, tmp, clen, META_EXTENT_TAKES_INLINE);
	sh_buf_put(tmp);
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
			       .flags = META_INLINE_MERGE | (f->flags & O_APPEND ? META_AT_END : 0),
			       /* an append's retry (its answer lost) must not land twice */
			       .tag = f->flags & O_APPEND ? f->append_tag : 0,
			       .ino = f->ino,
			       .upto = f->buf_off,
			       .data = f->bufh->data,
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
	/* (encrypted: never inline, where the bucket would hold the bytes as they are) */
	if (f->buf_off + f->fill <= INLINE_MAX && !f->checked && !f->fs->keys) {
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
	rc = io_buf_own(f); /* (a failed put's sends may hold it still) */
	if (rc == 0)
		rc = put_stripe(f, f->buf_off, f->bufh, f->fill, 0);
	if (rc == -EAGAIN && !(f->flags & O_APPEND)) {
		/* another handle gave the file inline bytes since we looked: take them along */
		f->checked = false;
		f->empty = false;
		return flush_buf(f);
	}
	if (rc == 0)
		f->fill = 0;
	return rc;
}

/*
 * An O_APPEND handle's buffer: placed at the end it saw, and where another
 * client appended or truncated meanwhile (the mapping refused, -EAGAIN:
 * nothing changed), placed again at the end it is now. Each try that
 * fails follows another writer's success.
 */
static int
flush_append(sh_file *f)
{
	size_t fill = f->fill;
	int rc;

	if (f->append_tag == 0)
		f->append_tag = client_tag(f->fs->c);
	while ((rc = flush_buf(f)) == -EAGAIN) {
		struct stat st;

		rc = sh_getattr(f->fs, f->ino, &st); /* (the refused command dropped it: asked) */
		if (rc < 0)
			return rc;
		f->buf_off = (uint64_t)st.st_size;
		f->checked = false;
		f->empty = false;
		f->append_tag = client_tag(f->fs->c); /* a placement anew */
	}
	if (rc == 0) {
		f->append_tag = 0;
		f->append_end = f->buf_off + fill; /* (a landed buffer keeps its offset) */
	}
	return rc;
}

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
void
io_wait_behind(sh_file *f)
{
	while (f->behind > 0)
		pthread_cond_wait(&f->idle, &f->mu);
}

struct behind {
	sh_file *f;
	unsigned slot;
	uint64_t off;
	struct sh_buf *buf;
	size_t fill;
};

/*
 * The handle's stripes in the background (mu held): behind counts the
 * slots in use (off != end), at most BEHIND_MAX, and no two of them
 * overlap, so extents that overlap commit in the order they were written
 * (io_flush_full waits for an overlapping one before it starts the next).
 */
static void
check_behind(const sh_file *f)
{
	unsigned used = 0;

	assert(f->behind <= BEHIND_MAX && f->nspare <= SPARES_MAX);
	assert(f->fill <= (size_t)ndata(f) * frag_of(f));
	for (unsigned i = 0; i < BEHIND_MAX; i++) {
		if (f->rng[i].off == f->rng[i].end)
			continue;
		used++;
		assert(f->rng[i].off < f->rng[i].end);
		for (unsigned k = i + 1; k < BEHIND_MAX; k++)
			assert(f->rng[k].off == f->rng[k].end || f->rng[k].end <= f->rng[i].off ||
			       f->rng[i].end <= f->rng[k].off);
	}
	assert(used == f->behind);
	(void)used;
}

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
	assert(f->behind > 0 && f->rng[b->slot].off == b->off);
	f->rng[b->slot].off = f->rng[b->slot].end = 0;
	io_buf_give(f, b->buf);
	f->behind--;
	check_behind(f);
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
int
io_flush_full(sh_file *f)
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
		/* (an append's stripes map one after another, each at the end the last left) */
		if (!f->checked || end <= INLINE_MAX || (f->flags & O_APPEND))
			return io_flush(f);
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
		b->buf = f->bufh;
		f->bufh = io_buf_take(f);
		if (f->bufh == NULL) {
			f->bufh = b->buf;
			sh_free(b);
			b = NULL;
		}
	}
	if (b == NULL)
		return io_flush(f);
	while (f->rng[slot].off != f->rng[slot].end)
		slot++; /* behind < BEHIND_MAX: a slot is free */
	assert(slot < BEHIND_MAX);
	b->f = f;
	b->slot = slot;
	b->off = off;
	b->fill = f->fill;
	f->rng[slot].off = off;
	f->rng[slot].end = end;
	f->behind++;
	f->fill = 0;
	check_behind(f);
	if (wpool_run(f->fs, WPOOL_BEHIND, run_behind, b) < 0) {
		/* no writer thread: here, now */
		pthread_mutex_unlock(&f->mu);
		run_behind(b);
		pthread_mutex_lock(&f->mu);
		return f->err;
	}
	return 0;
}

int
io_flush(sh_file *f)
{
	int rc;

	io_wait_behind(f); /* what is written now may overlap them, and follows them */
	if (f->fill == 0)
		return 0;
	/* the file's extents change: bumped before and after, a read in between refetches */
	atomic_fetch_add(&f->fs->wgen, 1);
	rc = f->flags & O_APPEND ? flush_append(f) : flush_buf(f);
	atomic_fetch_add(&f->fs->wgen, 1);
	return rc;
}
