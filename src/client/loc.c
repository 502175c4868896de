// SPDX-License-Identifier: Apache-2.0
/*
 * Where stripes are now (docs/healing.md): an extent names the targets its
 * stripe was written to; a rebuild or a move changes only the stripe's
 * record at the bucket its id names. A read that does not get what it
 * asked of a target asks that record (MP_STRIPE_LOC) and keeps the answer
 * here, so the next reads of the stripe go straight to where it is.
 * Fragments are immutable and keyed by (stripe, index): a place that is
 * out of date is never a wrong byte, only a fragment not found.
 */
#include <string.h>

#include "client_int.h"

#define LOCS 4096 /* stripes remembered, direct-mapped by id */
/*
 * A stripe's bucket is asked again after `wait`: 1 s, doubling (to 16 s)
 * each time it answers that the stripe is still where it was (a lost
 * target's stripes wait their turn in the rebuild: the readers decode
 * meanwhile, without asking again and again).
 */
#define WAIT_MIN_NS (1000ull * 1000 * 1000)
#define WAIT_MAX_NS (16ull * 1000 * 1000 * 1000)

struct cloc {
	uint64_t stripe; /* 0: empty */
	uint64_t at;	 /* when its bucket was asked (cache_now) */
	uint64_t wait;	 /* until it is asked again */
	uint8_t n;
	uint64_t targets[META_FRAGS_MAX];
};

static struct cloc *
slot(sh_fs *fs, uint64_t stripe)
{
	return &fs->locs[sh_hash_u64(stripe) % LOCS];
}

void
client_loc_apply(sh_fs *fs, struct meta_extent *e)
{
	struct cloc *l;

	if (atomic_load_explicit(&fs->nlocs, memory_order_relaxed) == 0)
		return; /* nothing ever moved under this handle: the common case */
	pthread_mutex_lock(&fs->lmu);
	l = slot(fs, e->stripe);
	if (l->stripe == e->stripe && l->n == (unsigned)e->d + e->p)
		memcpy(e->targets, l->targets, l->n * sizeof(l->targets[0]));
	pthread_mutex_unlock(&fs->lmu);
}

int
client_loc_fetch(sh_fs *fs, struct meta_extent *e)
{
	unsigned n = (unsigned)e->d + e->p;
	uint64_t now = cache_now(fs);
	struct meta_extent loc;
	struct cres r;
	bool same, recent = false;
	int rc;

	pthread_mutex_lock(&fs->lmu);
	if (fs->locs != NULL) {
		struct cloc *l = slot(fs, e->stripe);

		recent = l->stripe == e->stripe && now - l->at < l->wait;
	}
	pthread_mutex_unlock(&fs->lmu);
	if (recent)
		return -EAGAIN; /* asked a moment ago: what apply gave is the answer */
	rc = ns_read(fs, MP_STRIPE_LOC, meta_ino_bucket(e->stripe), e->stripe, "", 0, 0, &r);
	if (rc == 0)
		rc = meta_extent_decode(r.rep.data, r.rep.dlen, &loc);
	cres_fini(&r);
	if (rc < 0)
		return rc;
	if ((unsigned)loc.d + loc.p != n || loc.frag != e->frag)
		return -EBADMSG;
	same = memcmp(loc.targets, e->targets, n * sizeof(loc.targets[0])) == 0;
	pthread_mutex_lock(&fs->lmu);
	if (fs->locs == NULL)
		fs->locs = sh_calloc(LOCS, sizeof(*fs->locs));
	if (fs->locs != NULL) {
		struct cloc *l = slot(fs, e->stripe);

		if (l->stripe != e->stripe || !same)
			l->wait = WAIT_MIN_NS;
		else if (l->wait < WAIT_MAX_NS)
			l->wait *= 2;
		l->stripe = e->stripe;
		l->at = now;
		l->n = (uint8_t)n;
		memcpy(l->targets, loc.targets, n * sizeof(loc.targets[0]));
		atomic_fetch_add(&fs->nlocs, 1);
	}
	pthread_mutex_unlock(&fs->lmu);
	if (same)
		return -EAGAIN;
	memcpy(e->targets, loc.targets, n * sizeof(loc.targets[0]));
	return 0;
}

void
client_locs_fini(sh_fs *fs)
{
	sh_free(fs->locs);
	fs->locs = NULL;
	pthread_mutex_destroy(&fs->lmu);
}
