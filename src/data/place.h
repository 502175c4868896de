/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Where a stripe's fragments go (DESIGN.md §3): D+P targets on D+P
 * distinct failure domains, chosen deterministically from the stripe id
 * and the targets, each target drawn with a probability proportional to
 * its weight (place_targets: its capacity), so that targets fill in
 * proportion to their size.
 *
 * Weighted rendezvous hashing: every target scores w / -ln(u) with u a
 * hash of (stripe, target) in (0, 1); the best target wins the first
 * fragment, the best of another failure domain the second, and so on.
 * Adding or removing a target moves only the fragments it wins or held.
 */
#ifndef SH_DATA_PLACE_H
#define SH_DATA_PLACE_H

#include <stdint.h>

#include "../cluster/config.h"

struct place_target {
	uint64_t id;	 /* the drive's target id */
	uint32_t domain; /* its failure domain, as a small number */
	uint64_t weight; /* capacity in bytes (0: never chosen) */
};

/*
 * The n targets of stripe, into out[0..n) (fragment i on out[i]). -ENOSPC
 * when fewer than n failure domains have a target with weight > 0; -ENOMEM
 * (above 256 targets a call takes a table of their scores from the heap).
 * Each target is scored once per call: O(nt x n) compares, nt logs.
 */
int place_stripe(const struct place_target *t, unsigned nt, uint64_t stripe, unsigned n,
		 uint64_t *out);

/*
 * While failure domains are down: as place_stripe, but when distinct
 * domains run out the remaining fragments are spread over the domains up,
 * the least used first (another target of it before the same one again),
 * never more than p on one domain: losing any one domain still leaves
 * n - p fragments, so an acknowledged stripe survives one more failure.
 * *shared: how many fragments went to a domain used already (a rebuild
 * spreads them again). -ENOSPC when the domains up cannot hold n that way.
 */
int place_stripe_degraded(const struct place_target *t, unsigned nt, uint64_t stripe, unsigned n,
			  unsigned p, uint64_t *out, unsigned *shared);

/*
 * Rebuild and re-protection (docs/healing.md): new targets for the
 * fragments of stripe not in keep (bit i: fragment i stays on cur[i]), on
 * failure domains the kept ones do not use, by the same scores as a new
 * stripe's; when domains run out, at most p on one domain (*shared counts
 * those). out[i] = cur[i] for the kept ones. -ENOSPC, -EINVAL (n > 32),
 * -ENOMEM.
 */
int place_refill(const struct place_target *t, unsigned nt, uint64_t stripe, unsigned n, unsigned p,
		 const uint64_t *cur, uint32_t keep, uint64_t *out, unsigned *shared);
/*
 * How many of cur[0..n)'s fragments share a failure domain with an earlier
 * one (a stripe written degraded); *which: their bits.
 */
unsigned place_shared(const struct place_target *t, unsigned nt, const uint64_t *cur, unsigned n,
		      uint32_t *which);

/*
 * The targets of a configuration (every drive; the failure domain is its
 * node's), weighted by capacity (not free space); a drive failed or
 * draining, or whose node is down, weighs 0 (never chosen). *out is
 * sh_malloc'd; -ENOMEM.
 */
int place_targets(const struct cfg *c, struct place_target **out, unsigned *n);

#endif /* SH_DATA_PLACE_H */
