// SPDX-License-Identifier: Apache-2.0
/*
 * Scrub and repair of a worker's drives (shoald.h, docs/healing.md). Each
 * drive is read through, every block's crc checked, at the configuration's
 * scrub-rate (MiB/s per target), a pass scrub-interval hours after the
 * last one ended (or after the worker started). Every fragment a scrub or
 * a client's read found corrupt (the store marks it: reads of it answer
 * -EBADMSG, so the readers decode around it) is reported to the bucket its
 * stripe id names, in every filesystem (the id does not say which), whose
 * leader re-creates it where it was from the other fragments; the newer
 * append replaces the corrupt one. A report is repeated every 30 s while
 * the fragment is still marked.
 */
#include <string.h>

#include "shoald.h"

SH_LOG_FACILITY("shoald.scrub");

#define TICK_NS	    (5ull * 1000 * 1000 * 1000)
#define AGAIN_NS    (30ull * 1000 * 1000 * 1000) /* a report not answered by a repair: again */
#define CALL_NS	    (5ull * 1000 * 1000 * 1000)
#define CORRUPT_MAX 64 /* reported per drive per tick */

static void
on_scrubbed(void *arg, int corrupt)
{
	struct scdrive *d = arg;

	if (corrupt == -ECANCELED)
		return; /* the drive closes (after scrub_destroy: d is gone) */
	d->running = false;
	d->last_end = env_now(d->sc->env);
	if (corrupt > 0)
		sh_log_warn("drive %llu: scrub found %d corrupt fragment(s): reported for repair",
			    (unsigned long long)store_target_id(d->st), corrupt);
}

static void
on_reported(void *arg, int status, const struct mp_reply *rep)
{
	(void)arg;
	(void)rep;
	if (status < 0 && status != -ENOENT && status != -ECANCELED)
		sh_log_debug("a repair report: %s", sh_strerror(status));
}

static bool
reported_lately(struct scdrive *d, const struct store_key *k, uint64_t now)
{
	for (unsigned i = 0; i < d->nrep && i < SCRUB_REPORTED; i++)
		if (d->reported[i].stripe == k->stripe && d->reported[i].idx == k->idx &&
		    now - d->reported[i].at < AGAIN_NS)
			return true;
	return false;
}

static void
report(struct scdrive *d, uint64_t now)
{
	struct scrubber *sc = d->sc;
	struct store_key keys[CORRUPT_MAX];
	unsigned n = store_corrupt_list(d->st, keys, CORRUPT_MAX);

	for (unsigned i = 0; i < n; i++) {
		unsigned slot;

		if (reported_lately(d, &keys[i], now) || (keys[i].stripe >> 48) >= sc->nbuckets)
			continue;
		/* a slot only for a report sent: skipped keys would wrap the ring over recent ones
		 */
		slot = d->nrep++ % SCRUB_REPORTED;
		d->reported[slot].stripe = keys[i].stripe;
		d->reported[slot].idx = keys[i].idx;
		d->reported[slot].at = now;
		for (unsigned f = 0; f < sc->nfs; f++) {
			struct mp_req q = { .kind = MP_REPAIR,
					    .fs = sc->fs[f],
					    .bucket = (uint16_t)(keys[i].stripe >> 48),
					    .ino = keys[i].stripe,
					    .max = keys[i].idx,
					    .off = store_target_id(d->st) };

			(void)mroute_call(sc->rt, &q, CALL_NS, on_reported, NULL);
		}
	}
}

static void
on_tick(struct env_timer *t)
{
	struct scrubber *sc = t->arg;
	uint64_t now = env_now(sc->env), every = (uint64_t)sc->interval_h * 3600 * SH_NSEC_PER_SEC;
	struct sh_list *pos;

	if (sc->stopping)
		return;
	sh_list_for_each (pos, &sc->drives) {
		struct scdrive *d = sh_list_entry(pos, struct scdrive, link);

		report(d, now);
		if (sc->rate_mib == 0 || d->running || now - d->last_end < every)
			continue;
		if (store_scrub_paced(d->st, (uint64_t)sc->rate_mib << 20, on_scrubbed, d) == 0) {
			d->running = true;
			sh_log_info("drive %llu: scrub started (%u MiB/s)",
				    (unsigned long long)store_target_id(d->st), sc->rate_mib);
		}
	}
	env_timer_arm(&sc->tick, TICK_NS);
}

int
scrub_create(struct net *n, struct scrubber **out)
{
	struct scrubber *sc = sh_calloc(1, sizeof(*sc));
	int rc;

	*out = NULL;
	if (sc == NULL)
		return -ENOMEM;
	rc = mroute_create(n, &sc->rt);
	if (rc < 0) {
		sh_free(sc);
		return rc;
	}
	sc->env = net_env(n);
	sc->interval_h = CFG_SCRUB_INTERVAL;
	sh_list_init(&sc->drives);
	env_timer_init(sc->env, &sc->tick, on_tick, sc);
	env_timer_arm(&sc->tick, TICK_NS);
	*out = sc;
	return 0;
}

int
scrub_set_cfg(struct scrubber *sc, const struct cfg *c)
{
	sc->nfs = 0;
	for (uint32_t i = 0; i < c->nfs && i < CFG_FS_MAX; i++)
		if (cfg_fs_own(&c->fs[i])) /* (a clone's stripes are its origin's) */
			sc->fs[sc->nfs++] = c->fs[i].id;
	sc->nbuckets = c->nbuckets;
	sc->rate_mib = c->scrub_rate;
	sc->interval_h = c->scrub_interval;
	return mroute_set_cfg(sc->rt, c);
}

int
scrub_add(struct scrubber *sc, struct store *st)
{
	struct scdrive *d = sh_calloc(1, sizeof(*d));

	if (d == NULL)
		return -ENOMEM;
	d->sc = sc;
	d->st = st;
	d->last_end = env_now(sc->env); /* its first pass an interval from now */
	sh_list_add_tail(&sc->drives, &d->link);
	return 0;
}

void
scrub_set_local(struct scrubber *sc, mroute_local_fn fn, void *arg)
{
	mroute_set_local(sc->rt, fn, arg);
}

void
scrub_stop(struct scrubber *sc)
{
	if (sc == NULL)
		return;
	sc->stopping = true;
	env_timer_cancel(&sc->tick);
}

void
scrub_destroy(struct scrubber *sc)
{
	if (sc == NULL)
		return;
	env_timer_cancel(&sc->tick);
	mroute_cancel_all(sc->rt);
	mroute_destroy(sc->rt);
	while (!sh_list_empty(&sc->drives))
		sh_free(sh_list_entry(sh_list_pop(&sc->drives), struct scdrive, link));
	sh_free(sc);
}
