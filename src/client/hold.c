// SPDX-License-Identifier: Apache-2.0
/*
 * Open files held at their buckets (client_int.h; the leaders' side is
 * src/meta/msvc_hold.c, docs/metadata.md "Open files without names"): a
 * file opened here is held at its bucket's leader so that, unlinked or
 * renamed over by anyone, it lives on until its last close here.
 *
 * The first open of a file sends MP_HOLD (which answers its attributes,
 * as a getattr would); later opens count. A thread per filesystem handle
 * renews every file held every MP_HOLD_RENEW_MS, one MP_HOLD per
 * metadata group (per bucket when the groups are not known, at most
 * MP_HOLD_MAX files each), and gives back the files whose last handle
 * closed (batched the same way, a few ms after the close): a file held
 * nowhere goes with its remove at once
 * (msvc_hold.c), its space back; one left to run out at the leader
 * (MP_HOLD_MS) would keep a file unlinked after its close for 10 s.
 * An open of a file whose hold is being given back waits for that answer
 * first, so a hold is never given back after it was taken again.
 */
#define _GNU_SOURCE /* qsort_r */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client_int.h"

SH_LOG_FACILITY("client.hold");

#define RELEASE_DELAY_NS (20ull * 1000 * 1000) /* closes gathered into one release */
#define LOOKED_N	 64
#define LOOKED_NS	 (200ull * 1000 * 1000) /* the kernel's retry: lookup and open this soon */

enum { H_HELD, H_QUEUED, H_RELEASING };

struct chold {
	struct sh_hnode hn;
	uint64_t ino;
	unsigned opens;
	uint8_t state;
};

struct cholds {
	struct env *env; /* the client's: its clock */
	pthread_mutex_t mu;
	pthread_cond_t cv;   /* the thread's wake-up, and the end of a release */
	struct sh_htable t;  /* struct chold by ino */
	unsigned queued;     /* H_QUEUED entries */
	uint64_t renewed_at; /* monotonic ns */
	struct {
		uint64_t ino, at;
	} looked[LOOKED_N]; /* inodes the leaders just named (a ring) */
	unsigned nlooked;
	uint64_t stale_at; /* monotonic ns: the last fresh open refused (-ESTALE) */
	unsigned retries;  /* refused opens whose retry's lookup has not come yet */
	pthread_t th;
	bool started, stopping;
};

static bool
eq(const struct sh_hnode *n, const void *key)
{
	return ((const struct chold *)n)->ino == *(const uint64_t *)key;
}

static struct chold *
find(struct cholds *h, uint64_t ino)
{
	return (struct chold *)sh_htable_find(&h->t, sh_hash_u64(ino), &ino, eq);
}

static uint64_t
mono(const struct cholds *h)
{
	return env_clock(h->env);
}

/* One MP_HOLD to bucket for inos (renew or give back); what it answered. */
static int
send_batch(sh_fs *fs, uint16_t bucket, const uint64_t *inos, unsigned n, uint32_t flags)
{
	struct mp_req q = {
		.kind = MP_HOLD, .fs = fs->id, .bucket = bucket, .max = flags, .at = client_at(fs)
	};
	struct sh_enc e;
	struct cres r;
	int rc;

	sh_enc_init(&e);
	for (unsigned i = 0; i < n; i++)
		sh_enc_u64(&e, inos[i]);
	q.data = e.p;
	q.dlen = e.len;
	rc = sh_enc_error(&e) ? -ENOMEM : client_meta(fs->c, &q, &r);
	if (rc != -ENOMEM)
		cres_fini(&r);
	sh_enc_fini(&e);
	return rc;
}

/* An ino's group (from the table of bucket groups), or its bucket past them (unknown). */
static uint32_t
group_of(const uint16_t *gof, unsigned nb, uint64_t ino)
{
	uint16_t b = meta_ino_bucket(ino);

	return b < nb ? gof[b] : 0x10000u + b;
}

struct groups {
	const uint16_t *gof;
	unsigned nb;
};

static int
by_group(const void *a, const void *b, void *arg)
{
	const struct groups *t = arg;
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	uint32_t gx = group_of(t->gof, t->nb, x), gy = group_of(t->gof, t->nb, y);

	return gx != gy ? (gx < gy ? -1 : 1) : (x < y ? -1 : x > y);
}

/*
 * inos (sorted here) sent in one request per metadata group (its leader
 * holds the files of all its buckets), at most MP_HOLD_MAX each: a reader
 * of files spread over every bucket renews and gives back its holds in a
 * few requests, not one per bucket.
 */
static void
send_all(sh_fs *fs, uint64_t *inos, unsigned n, uint32_t flags)
{
	uint16_t *gof = NULL;
	unsigned nb = 0;

	(void)client_bucket_groups(fs->c, &gof, &nb); /* none: one request per bucket */
	qsort_r(inos, n, sizeof(*inos), by_group, &(struct groups){ gof, nb });
	for (unsigned i = 0; i < n;) {
		uint16_t b = meta_ino_bucket(inos[i]);
		uint32_t g = group_of(gof, nb, inos[i]);
		unsigned k = i;

		while (k < n && k - i < MP_HOLD_MAX && group_of(gof, nb, inos[k]) == g)
			k++;
		int rc = send_batch(fs, b, inos + i, k - i, flags);

		if (rc < 0)
			sh_log_debug("bucket %u's group: %s of %u open files: %s", b,
				     flags & MP_HOLD_RELEASE ? "release" : "renewal", k - i,
				     sh_strerror(rc));
		i = k;
	}
	sh_free(gof);
}

/* The inos of entries in state (all of them: state > H_RELEASING), into a new array. */
static uint64_t *
collect(struct cholds *h, int state, uint8_t to, unsigned *n)
{
	uint64_t *out = sh_calloc(sh_htable_count(&h->t) + 1, sizeof(*out));
	struct sh_hnode *x;
	size_t it;

	*n = 0;
	if (out == NULL)
		return NULL;
	for (x = sh_htable_first(&h->t, &it); x; x = sh_htable_next(&h->t, &it, x)) {
		struct chold *c = (struct chold *)x;

		if (state <= H_RELEASING && c->state != state)
			continue;
		out[(*n)++] = c->ino;
		if (state <= H_RELEASING)
			c->state = to;
	}
	return out;
}

/* Under h->mu (dropped meanwhile): the queued closes given back in one batch; false: no memory. */
static bool
release_queued(sh_fs *fs)
{
	struct cholds *h = fs->holds;
	unsigned n;
	uint64_t *inos = collect(h, H_QUEUED, H_RELEASING, &n);

	if (inos == NULL)
		return false;
	h->queued = 0;
	pthread_mutex_unlock(&h->mu);
	send_all(fs, inos, n, MP_HOLD_RELEASE);
	pthread_mutex_lock(&h->mu);
	for (unsigned i = 0; i < n; i++) {
		struct chold *c = find(h, inos[i]);

		if (c && c->state == H_RELEASING) {
			sh_htable_remove(&h->t, &c->hn);
			sh_free(c);
		}
	}
	sh_free(inos);
	pthread_cond_broadcast(&h->cv);
	return true;
}

/* Under h->mu (dropped meanwhile): every file held here renewed at its leader. */
static void
renew(sh_fs *fs, uint64_t now)
{
	struct cholds *h = fs->holds;
	unsigned n;
	uint64_t *inos;

	h->renewed_at = now;
	inos = collect(h, H_RELEASING + 1, 0, &n);
	pthread_mutex_unlock(&h->mu);
	if (inos)
		send_all(fs, inos, n, 0);
	sh_free(inos);
	pthread_mutex_lock(&h->mu);
}

static bool
renew_due(const struct cholds *h, uint64_t now)
{
	return now - h->renewed_at >= (uint64_t)MP_HOLD_RENEW_MS * 1000 * 1000 &&
	       sh_htable_count(&h->t) > 0;
}

static void *
run(void *arg)
{
	sh_fs *fs = arg;
	struct cholds *h = fs->holds;
	struct timespec d = { 0, (long)RELEASE_DELAY_NS };

	pthread_mutex_lock(&h->mu);
	while (!h->stopping || h->queued > 0) {
		uint64_t now = mono(h), renew_ns = (uint64_t)MP_HOLD_RENEW_MS * 1000 * 1000;
		struct timespec ts;
		uint64_t wait;

		if (h->queued > 0) {
			/* gather the closes of a moment into one release */
			pthread_mutex_unlock(&h->mu);
			if (!h->stopping)
				nanosleep(&d, NULL);
			pthread_mutex_lock(&h->mu);
			if (!release_queued(fs)) { /* no memory now: again in a moment */
				pthread_mutex_unlock(&h->mu);
				nanosleep(&d, NULL);
				pthread_mutex_lock(&h->mu);
			}
			continue;
		}
		if (h->stopping)
			break;
		if (renew_due(h, now)) {
			renew(fs, now);
			continue;
		}
		wait =
		    now - h->renewed_at >= renew_ns ? renew_ns : renew_ns - (now - h->renewed_at);
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_sec += (time_t)(wait / 1000000000ull);
		ts.tv_nsec += (long)(wait % 1000000000ull);
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&h->cv, &h->mu, &ts);
	}
	pthread_mutex_unlock(&h->mu);
	return NULL;
}

/*
 * On a caller's env (client_env.h), the thread's work done from the calls
 * themselves: the closes given back at once, the renewals that are due.
 */
static void
driven_turn(sh_fs *fs)
{
	struct cholds *h = fs->holds;

	if (!client_driven(fs->c))
		return;
	pthread_mutex_lock(&h->mu);
	if (h->queued > 0)
		(void)release_queued(fs); /* no memory: at the next call */
	if (renew_due(h, mono(h)))
		renew(fs, mono(h));
	pthread_mutex_unlock(&h->mu);
}

int
client_holds_init(sh_fs *fs)
{
	struct cholds *h = sh_calloc(1, sizeof(*h));
	pthread_condattr_t ca;

	if (h == NULL)
		return -ENOMEM;
	if (sh_htable_init(&h->t, 0) < 0) {
		sh_free(h);
		return -ENOMEM;
	}
	h->env = fs->c->env;
	pthread_mutex_init(&h->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&h->cv, &ca);
	pthread_condattr_destroy(&ca);
	fs->holds = h;
	return 0;
}

void
client_holds_fini(sh_fs *fs)
{
	struct cholds *h = fs->holds;
	struct sh_hnode *x;
	size_t it;

	if (h == NULL)
		return;
	pthread_mutex_lock(&h->mu);
	h->stopping = true;
	/* whatever is still open here is given back now: this handle goes */
	for (x = sh_htable_first(&h->t, &it); x; x = sh_htable_next(&h->t, &it, x)) {
		struct chold *c = (struct chold *)x;

		if (c->state == H_HELD) {
			c->state = H_QUEUED;
			h->queued++;
		}
	}
	pthread_cond_broadcast(&h->cv);
	while (client_driven(fs->c) && h->queued > 0 && release_queued(fs))
		;
	pthread_mutex_unlock(&h->mu);
	if (h->started)
		pthread_join(h->th, NULL);
	while ((x = sh_htable_first(&h->t, &it)) != NULL) {
		sh_htable_remove(&h->t, x);
		sh_free(x);
	}
	sh_htable_fini(&h->t);
	pthread_cond_destroy(&h->cv);
	pthread_mutex_destroy(&h->mu);
	sh_free(h);
	fs->holds = NULL;
}

/*
 * ino is open once more here. 1 if it was held already (nothing to ask),
 * 2 if its last handle here closed a moment ago and its hold is still
 * queued for release (taken back, nothing to ask), 0 if the caller must
 * ask its leader (the entry is made, opens 1), or -ENOMEM. Waits for a
 * release of ino in flight.
 */
static int
take(sh_fs *fs, uint64_t ino)
{
	struct cholds *h = fs->holds;
	struct chold *c;

	for (;;) {
		c = find(h, ino);
		if (c == NULL || c->state != H_RELEASING)
			break;
		pthread_cond_wait(&h->cv, &h->mu);
	}
	if (c != NULL) {
		c->opens++;
		if (c->state == H_QUEUED) {
			c->state = H_HELD; /* closed a moment ago: its hold never went */
			h->queued--;
			return 2;
		}
		return 1;
	}
	c = sh_calloc(1, sizeof(*c));
	if (c == NULL)
		return -ENOMEM;
	*c = (struct chold){ .ino = ino, .opens = 1, .state = H_HELD };
	sh_htable_insert(&h->t, &c->hn, sh_hash_u64(ino));
	if (!h->started && !client_driven(fs->c) && pthread_create(&h->th, NULL, run, fs) == 0)
		h->started = true;
	return 0;
}

/* The opens just counted for ino are undone (its leader refused it). */
static void
untake(struct cholds *h, uint64_t ino)
{
	struct chold *c = find(h, ino);

	if (c != NULL && --c->opens == 0) {
		sh_htable_remove(&h->t, &c->hn);
		sh_free(c);
	}
}

/*
 * A fresh open refused: the file has no names now, so the kernel named it
 * from an entry older than its remove (-ESTALE: it looks the name up again
 * and retries once). What led here is stale: the lookup that follows asks.
 */
static int
refused_stale(sh_fs *fs)
{
	struct cholds *h = fs->holds;

	cache_drop_all(fs);
	pthread_mutex_lock(&h->mu);
	h->stale_at = mono(h);
	if (h->retries < LOOKED_N)
		h->retries++;
	pthread_mutex_unlock(&h->mu);
	return -ESTALE;
}

static bool looked_up(const struct cholds *h, uint64_t ino);

int
client_hold_open(sh_fs *fs, uint64_t ino, bool fresh, struct stat *st)
{
	return client_hold_open_read(fs, ino, fresh, st, NULL, NULL, NULL);
}

int
client_hold_open_read(sh_fs *fs, uint64_t ino, bool fresh, struct stat *st, uint8_t **ext,
		      size_t *elen, bool *more)
{
	struct cholds *h = fs->holds;
	struct mp_req q = { .kind = MP_HOLD,
			    .fs = fs->id,
			    .bucket = meta_ino_bucket(ino),
			    .ino = ino,
			    .max = (fresh ? MP_HOLD_FRESH : 0) | (ext ? MP_HOLD_EXTENTS : 0),
			    .at = client_at(fs) };
	struct cres r;
	uint64_t since;
	int rc;

	if (ext != NULL)
		*ext = NULL;
	if (fs->at != 0)
		return sh_getattr(fs, ino, st); /* a snapshot's file changes never: nothing held */

	driven_turn(fs);
	pthread_mutex_lock(&h->mu);
	if (fresh && looked_up(h, ino))
		q.max &= ~(uint32_t)MP_HOLD_FRESH;
	rc = take(fs, ino);
	pthread_mutex_unlock(&h->mu);
	if (rc < 0)
		return rc;
	if (rc > 0) {
		/*
		 * 1: held here already, a second open, even of a file without names now.
		 * 2: closed here a moment ago, its hold not given back yet: an open as any
		 * other, so that one of a file renamed over meanwhile is refused as by its
		 * leader. Refused, the open is undone as a close (its hold queued again).
		 */
		bool second = rc == 1;

		rc = sh_getattr(fs, ino, st);
		if (rc == 0 && !second && st->st_nlink == 0 && (q.max & MP_HOLD_FRESH))
			rc = refused_stale(fs);
		if (rc < 0)
			client_hold_close(fs, ino);
		return rc;
	}
	since = cache_now(fs);
	rc = client_meta(fs->c, &q, &r);
	if (rc == 0 && ext != NULL && (r.rep.flags & MP_EXTS) &&
	    (*ext = sh_malloc(r.rep.dlen ? r.rep.dlen : 1)) != NULL) {
		memcpy(*ext, r.rep.data, r.rep.dlen);
		*elen = r.rep.dlen;
		*more = (r.rep.flags & MP_MORE) != 0;
	}
	rc = client_attr_reply(fs, ino, rc, &r, since, st);
	if (rc < 0 && ext != NULL) {
		sh_free(*ext);
		*ext = NULL;
	}
	if (rc == -ESTALE && fresh)
		(void)refused_stale(fs);
	if (rc < 0) {
		pthread_mutex_lock(&h->mu);
		untake(h, ino);
		pthread_cond_broadcast(&h->cv);
		pthread_mutex_unlock(&h->mu);
	}
	return rc;
}

void
client_hold_looked_up(sh_fs *fs, uint64_t ino)
{
	struct cholds *h = fs->holds;
	uint64_t now = mono(h);

	pthread_mutex_lock(&h->mu);
	if (h->retries > 0 && now - h->stale_at < LOOKED_NS) {
		/* the lookup that follows a refused open: the kernel's retry of it */
		h->retries--;
		h->looked[h->nlooked % LOOKED_N].ino = ino;
		h->looked[h->nlooked % LOOKED_N].at = now;
		h->nlooked++;
	} else {
		h->retries = 0;
	}
	pthread_mutex_unlock(&h->mu);
}

/*
 * ino was named a moment ago by the lookup that came first after a fresh
 * open was refused (under h->mu): the kernel's one retry of an open that
 * raced with a rename over. Its open is not fresh: had a second rename
 * over come between that lookup and this open, the retry would fail too;
 * the file the lookup named is read whole, as a local file system's open
 * through a name resolved before the rename would. Any other open is
 * fresh: a name another client renamed over since this mount's last
 * lookup of it is looked up again (close-to-open), however recent that
 * lookup.
 */
static bool
looked_up(const struct cholds *h, uint64_t ino)
{
	uint64_t now = mono(h);

	for (unsigned i = 0; i < LOOKED_N; i++)
		if (h->looked[i].ino == ino && now - h->looked[i].at < LOOKED_NS)
			return true;
	return false;
}

int
client_hold_created(sh_fs *fs, uint64_t ino)
{
	struct cholds *h = fs->holds;
	int rc;

	if (fs->at != 0)
		return -EROFS;
	pthread_mutex_lock(&h->mu);
	rc = take(fs, ino);
	pthread_mutex_unlock(&h->mu);
	return rc < 0 ? rc : 0;
}

void
client_hold_close(sh_fs *fs, uint64_t ino)
{
	struct cholds *h = fs->holds;
	struct chold *c;

	if (fs->at != 0)
		return; /* (a snapshot's: nothing was held) */
	pthread_mutex_lock(&h->mu);
	c = find(h, ino);
	if (c != NULL && c->state == H_HELD && --c->opens == 0) {
		c->state = H_QUEUED;
		h->queued++;
		pthread_cond_broadcast(&h->cv);
	}
	pthread_mutex_unlock(&h->mu);
	driven_turn(fs);
}
