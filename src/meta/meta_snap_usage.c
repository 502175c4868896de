// SPDX-License-Identifier: Apache-2.0
/*
 * What a bucket's snapshots hold (meta_version.h; docs/snapshots.md,
 * "Space"). A record of a versioned key written at version w, whose next
 * newer record is at version n, is read by the kept snapshots k with
 * w <= k < n, and by the live filesystem if it is the key's newest and not
 * a tombstone: the versions that read a record are one run of the kept
 * list.
 *
 * A file's map is counted in the bytes its extents name in their stripes,
 * not in the extents' lengths: an overwrite of 4 KiB in a 64 MiB extent
 * leaves a snapshot the only reader of the 64 MiB record, but the live
 * file still maps all of it but those 4 KiB (in two trimmed records). So
 * the records of one file are gathered, each as a range of a stored block
 * ((stripe, block) for a compressed or deduplicated block, in its expanded
 * bytes; (stripe) for raw data, in the stripe's bytes), and what snapshot
 * k holds alone is the measure of the ranges k reads less those the live
 * file or any other kept snapshot reads. Small files' inline bytes are one
 * record each and count whole.
 *
 * A writable clone (branch b, based on kept version B) reads its own
 * newest record of a key where it has one (a tombstone: nothing), and
 * otherwise branch 0's record that B reads. It is one more reader of the
 * ranges: what it alone reads is what deleting it frees, and what it
 * reads of its snapshot's records is no longer only the snapshot's. A
 * writable snapshot and its clone go together: they are one reader, and
 * the clone's figure is the snapshot's.
 */
#include <stdlib.h>
#include <string.h>

#include "../base/alloc.h"
#include "meta_version.h"

/* One stored extent record of the file being gathered: a range of a block, and its readers. */
struct xrec {
	uint64_t stripe, block; /* block: the block's start (compressed, dedup), else ~0 */
	uint64_t a, b;		/* [a, b): the bytes it names there */
	bool live;		/* the live file reads it */
	unsigned first, n;	/* kept snapshots first .. first + n - 1 read it */
	unsigned clones;	/* the clones that read it (a mask of walk.br's indexes) */
};

struct walk {
	const uint64_t *keep;
	unsigned nkeep;
	const struct meta_vbranch *br;
	unsigned nbr;
	/* the reader each clone is (pick's who): its writable snapshot's index, else nkeep + 1 +
	 * its own */
	unsigned reader[META_BRANCH_MAX];
	unsigned wall;		   /* the writable snapshots' clones (a mask) */
	uint8_t key[META_KEY_MAX]; /* the key whose records are being read */
	size_t klen;
	unsigned own; /* the clones with a record of it (they read none of branch 0's) */
	struct meta_snap_usage *u;
	uint64_t ino; /* the file gathered (its extents are adjacent keys) */
	struct xrec *x;
	unsigned nx, cap;
	struct xrec *tmp; /* room for the ranges of one reader and of the others */
	unsigned tcap;
	int err;
};

/* Which kept snapshots read a record written at ver whose next newer is at newer (0: none). */
static void
readers(const struct walk *w, uint64_t ver, uint64_t newer, unsigned *first, unsigned *n)
{
	*first = 0;
	*n = 0;
	while (*first < w->nkeep && w->keep[*first] < ver)
		(*first)++;
	while (*first + *n < w->nkeep && (newer == 0 || w->keep[*first + *n] < newer))
		(*n)++;
}

static int
by_range(const void *x, const void *y)
{
	const struct xrec *a = x, *b = y;

	if (a->stripe != b->stripe)
		return a->stripe < b->stripe ? -1 : 1;
	if (a->block != b->block)
		return a->block < b->block ? -1 : 1;
	return a->a < b->a ? -1 : a->a > b->a;
}

/* Sort and merge ranges in place into disjoint ones; how many are left. */
static unsigned
merged(struct xrec *r, unsigned n)
{
	unsigned k = 0;

	qsort(r, n, sizeof(*r), by_range);
	for (unsigned i = 0; i < n; i++) {
		if (k > 0 && r[k - 1].stripe == r[i].stripe && r[k - 1].block == r[i].block &&
		    r[i].a <= r[k - 1].b) {
			if (r[i].b > r[k - 1].b)
				r[k - 1].b = r[i].b;
			continue;
		}
		r[k++] = r[i];
	}
	return k;
}

/* The bytes of a (disjoint, sorted) not in b (disjoint, sorted). */
static uint64_t
less(const struct xrec *a, unsigned na, const struct xrec *b, unsigned nb)
{
	uint64_t sum = 0;
	unsigned j = 0;

	for (unsigned i = 0; i < na; i++) {
		uint64_t at = a[i].a, left = a[i].b - a[i].a;

		/* the ranges of b before this one's block, or ending before it, are past */
		while (j < nb && (b[j].stripe < a[i].stripe ||
				  (b[j].stripe == a[i].stripe &&
				   (b[j].block < a[i].block ||
				    (b[j].block == a[i].block && b[j].b <= a[i].a)))))
			j++;
		for (unsigned k = j; k < nb && b[k].stripe == a[i].stripe &&
				     b[k].block == a[i].block && b[k].a < a[i].b;
		     k++) {
			uint64_t s = b[k].a > at ? b[k].a : at,
				 e = b[k].b < a[i].b ? b[k].b : a[i].b;

			if (e > s) {
				left -= e - s;
				at = e;
			}
		}
		sum += left;
	}
	return sum;
}

/*
 * Who reads a record of key at version ver whose next newer of its branch
 * is at newer (tomb: a tombstone, which maps nothing) into r: the live
 * file, a run of kept snapshots, clones. A key's records come by branch,
 * the highest first, so its clones' records are seen before branch 0's.
 */
static void
who_reads(struct walk *w, const uint8_t *key, size_t klen, uint64_t ver, bool tomb, uint64_t newer,
	  struct xrec *r)
{
	uint16_t b = meta_ver_branch(ver);

	r->live = false;
	r->first = r->n = r->clones = 0;
	if (klen != w->klen || memcmp(key, w->key, klen) != 0) {
		memcpy(w->key, key, klen);
		w->klen = klen;
		w->own = 0;
	}
	if (b != 0) {
		for (unsigned j = 0; j < w->nbr; j++)
			if (w->br[j].id == b) {
				w->own |= 1u << j;
				if (newer == 0 && !tomb)
					r->clones = 1u << j;
			}
		return; /* (a branch not served: read by none) */
	}
	if (tomb)
		return;
	readers(w, ver, newer, &r->first, &r->n);
	r->live = newer == 0;
	for (unsigned j = 0; j < w->nbr; j++)
		if (!(w->own & 1u << j) && ver <= w->br[j].base &&
		    (newer == 0 || w->br[j].base < newer))
			r->clones |= 1u << j;
}

/* The clones that are reader who (pick's who; a mask): a writable snapshot's, or one. */
static unsigned
members(const struct walk *w, unsigned who)
{
	unsigned m = 0;

	for (unsigned j = 0; j < w->nbr; j++)
		if (w->reader[j] == who)
			m |= 1u << j;
	return m;
}

/*
 * The ranges of the records that `in` says yes to into tmp, merged: how
 * many. who < nkeep: r is read by snapshot who (or its writable clone), or
 * (others) by anyone else; who == nkeep: by a kept snapshot or a writable
 * snapshot's clone, or (others) by the live file or another clone; who >
 * nkeep: by clone who - nkeep - 1 (not a writable snapshot's), or
 * (others) by anyone else.
 */
static unsigned
pick(struct walk *w, unsigned off, unsigned who, bool others)
{
	unsigned n = 0, mem = members(w, who);

	for (unsigned i = 0; i < w->nx; i++) {
		const struct xrec *r = &w->x[i];
		bool in_run = who < w->nkeep && who >= r->first && who < r->first + r->n, yes;

		if (who == w->nkeep)
			yes = others ? r->live || (r->clones & ~w->wall)
				     : r->n > 0 || (r->clones & w->wall);
		else
			yes = others ? r->live || (r->clones & ~mem) ||
					   (r->n > 0 && !(r->n == 1 && in_run))
				     : in_run || (r->clones & mem);
		if (yes)
			w->tmp[off + n++] = *r;
	}
	return merged(w->tmp + off, n);
}

/* v bytes that who alone reads (pick's who); a writable snapshot's clone's figure is its. */
static void
add_alone(struct walk *w, unsigned who, uint64_t v)
{
	if (who < w->nkeep)
		w->u->only[who] += v;
	for (unsigned j = 0; j < w->nbr; j++)
		if (w->reader[j] == who)
			w->u->clone_only[j] += v;
}

/* The one reader of r (pick's who), or -1: several, none, or the live file. */
static int
one_reader(const struct walk *w, const struct xrec *r)
{
	int g = r->n == 1 ? (int)r->first : -1;

	if (r->live || r->n > 1)
		return -1;
	for (unsigned j = 0; j < w->nbr; j++) {
		if (!(r->clones & 1u << j))
			continue;
		if (g >= 0 && g != (int)w->reader[j])
			return -1;
		g = (int)w->reader[j];
	}
	return g;
}

/* The bytes of the file gathered that who reads and no one else does (pick's who). */
static uint64_t
alone(struct walk *w, unsigned who)
{
	unsigned na = pick(w, 0, who, false), nb = pick(w, na, who, true);

	return less(w->tmp, na, w->tmp + na, nb);
}

/* The file gathered, counted: what each snapshot alone reads of it, what only snapshots do. */
static void
count_file(struct walk *w)
{
	if (w->nx == 0)
		return;
	if (w->tcap < 2 * w->nx) {
		struct xrec *t = sh_realloc(w->tmp, 2 * w->nx * sizeof(*t));

		if (t == NULL) {
			w->err = -ENOMEM;
			return;
		}
		w->tmp = t;
		w->tcap = 2 * w->nx;
	}
	w->u->held += alone(w, w->nkeep);
	/* each snapshot (with its writable clone), then each other clone: those reading any */
	for (unsigned who = 0; who <= w->nkeep + w->nbr; who++) {
		unsigned mem = members(w, who);
		bool any = false;

		if (who == w->nkeep || (who > w->nkeep && mem == 0))
			continue; /* (held; a writable snapshot's clone: counted with it) */
		for (unsigned i = 0; i < w->nx && !any; i++)
			any = (who < w->nkeep && who >= w->x[i].first &&
			       who < w->x[i].first + w->x[i].n) ||
			      (w->x[i].clones & mem);
		if (any)
			add_alone(w, who, alone(w, who));
	}
	w->nx = 0;
}

static int
on_extent(void *arg, const uint8_t *key, size_t klen, uint64_t ver, const void *val, size_t len,
	  uint64_t newer)
{
	struct walk *w = arg;
	struct meta_extent x;
	struct xrec r = { 0 };
	uint64_t ino = klen >= 11 ? meta_be64_get(key + 3) : 0;

	if (ino != w->ino) {
		count_file(w);
		w->ino = ino;
	}
	if (w->err < 0)
		return w->err;
	who_reads(w, key, klen, ver, val == NULL, newer, &r);
	if (val == NULL || meta_extent_decode(val, len, &x) < 0)
		return 0; /* a tombstone maps nothing */
	if (!r.live && r.n == 0 && r.clones == 0)
		return 0; /* read by none: settling drops it */
	for (unsigned j = 0; j < w->nbr; j++)
		if (r.clones & 1u << j)
			w->u->clone_mapped[j] += x.len;
	r.stripe = x.stripe;
	if (x.enc || x.dedup) {
		r.block = x.soff;
		r.a = x.boff;
	} else {
		r.block = UINT64_MAX;
		r.a = x.soff + x.boff;
	}
	r.b = r.a + x.len;
	if (w->nx == w->cap) {
		unsigned cap = w->cap ? 2 * w->cap : 64;
		struct xrec *g = sh_realloc(w->x, cap * sizeof(*g));

		if (g == NULL)
			return -ENOMEM;
		w->x = g;
		w->cap = cap;
	}
	w->x[w->nx++] = r;
	return 0;
}

static int
on_inline(void *arg, const uint8_t *key, size_t klen, uint64_t ver, const void *val, size_t len,
	  uint64_t newer)
{
	struct walk *w = arg;
	struct xrec r;
	int one;

	who_reads(w, key, klen, ver, val == NULL, newer, &r);
	if (val == NULL || r.live)
		return 0; /* a tombstone, or what the live filesystem reads */
	if ((r.n > 0 || (r.clones & w->wall)) && !(r.clones & ~w->wall))
		w->u->held += len;
	one = one_reader(w, &r);
	if (one >= 0)
		add_alone(w, (unsigned)one, len);
	return 0;
}

int
meta_snap_usage(struct meta_txn *t, uint16_t bucket, const uint64_t *keep, unsigned nkeep,
		const struct meta_vbranch *br, unsigned nbr, const bool *writable,
		struct meta_snap_usage *u)
{
	struct walk w = { .keep = keep,
			  .nkeep = nkeep < META_KEEP_MAX ? nkeep : META_KEEP_MAX,
			  .br = br,
			  .nbr = nbr < META_BRANCH_MAX ? nbr : META_BRANCH_MAX,
			  .u = u };
	struct meta_key pk;
	int rc;

	for (unsigned j = 0; j < w.nbr; j++) {
		w.reader[j] = w.nkeep + 1 + j;
		for (unsigned k = 0; writable != NULL && writable[j] && k < w.nkeep; k++)
			if (keep[k] == br[j].base)
				w.reader[j] = k;
		w.wall |= w.reader[j] < w.nkeep ? 1u << j : 0;
	}

	meta_key_kind(&pk, bucket, META_K_EXTENT);
	rc = meta_history(t, &pk, on_extent, &w);
	if (rc == 0) {
		count_file(&w);
		rc = w.err;
	}
	if (rc == 0) {
		meta_key_kind(&pk, bucket, META_K_INLINE);
		w.klen = 0;
		rc = meta_history(t, &pk, on_inline, &w);
	}
	sh_free(w.x);
	sh_free(w.tmp);
	return rc;
}
