// SPDX-License-Identifier: Apache-2.0
/*
 * Named fault points: parsing of SH_FAULTS specs, arming, and the slow path
 * of SH_FAULT() that decides whether an armed point fires. See fault.h.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fault.h"
#include "rand.h"

enum fault_mode { FM_OFF = 0, FM_ONCE, FM_ALWAYS, FM_EVERY, FM_NTH, FM_PROB };

struct fault_arm {
	enum fault_mode mode;
	uint64_t n;
	double p;
};

struct fault_state {
	_Atomic int mode;
	uint64_t n;
	double p;
	_Atomic uint64_t hits;
	_Atomic uint64_t fired;
};

static const char *const fault_names[] = {
#define FAULT_NAME(id, name, doc) name,
	SH_FAULT_LIST(FAULT_NAME)
#undef FAULT_NAME
};

static const char *const fault_docs[] = {
#define FAULT_DOC(id, name, doc) doc,
	SH_FAULT_LIST(FAULT_DOC)
#undef FAULT_DOC
};

_Atomic int sh_fault_armed_count;
static struct fault_state faults[FP__COUNT];
static pthread_mutex_t fault_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sh_rand fault_rng = { { 1, 2, 3, 4 } };

const char *
sh_fault_name(enum sh_fault_id id)
{
	if ((unsigned)id >= FP__COUNT)
		return "?";
	return fault_names[id];
}

const char *
sh_fault_doc(enum sh_fault_id id)
{
	if ((unsigned)id >= FP__COUNT)
		return "?";
	return fault_docs[id];
}

int
sh_fault_lookup(const char *name, size_t len)
{
	for (int i = 0; i < FP__COUNT; i++)
		if (strlen(fault_names[i]) == len && memcmp(fault_names[i], name, len) == 0)
			return i;
	return -ENOENT;
}

void
sh_fault_seed(uint64_t seed)
{
	pthread_mutex_lock(&fault_lock);
	sh_rand_seed(&fault_rng, seed);
	pthread_mutex_unlock(&fault_lock);
}

static int
parse_u64(const char *s, size_t len, uint64_t *out)
{
	uint64_t v = 0;

	if (len == 0 || len > 19)
		return -EINVAL;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	*out = v;
	return 0;
}

static int
parse_prob(const char *s, size_t len, double *out)
{
	char tmp[32];
	char *end;
	double p;

	if (len == 0 || len >= sizeof(tmp))
		return -EINVAL;
	for (size_t i = 0; i < len; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || s[i] == '.'))
			return -EINVAL;
	memcpy(tmp, s, len);
	tmp[len] = '\0';
	p = strtod(tmp, &end);
	if (*end != '\0' || !(p >= 0.0 && p <= 1.0))
		return -EINVAL;
	*out = p;
	return 0;
}

static int
parse_mode(const char *s, size_t len, struct fault_arm *a)
{
	const char *eq = memchr(s, '=', len);
	size_t klen = eq ? (size_t)(eq - s) : len;
	const char *v = eq ? eq + 1 : NULL;
	size_t vlen = eq ? len - klen - 1 : 0;

	memset(a, 0, sizeof(*a));
#define KEY_IS(k) (klen == sizeof(k) - 1 && memcmp(s, k, klen) == 0)
	if (KEY_IS("off") && !eq) {
		a->mode = FM_OFF;
	} else if (KEY_IS("once") && !eq) {
		a->mode = FM_ONCE;
	} else if (KEY_IS("always") && !eq) {
		a->mode = FM_ALWAYS;
	} else if ((KEY_IS("every") || KEY_IS("nth")) && eq) {
		a->mode = KEY_IS("every") ? FM_EVERY : FM_NTH;
		if (parse_u64(v, vlen, &a->n) < 0 || a->n == 0)
			return -EINVAL;
	} else if (KEY_IS("prob") && eq) {
		a->mode = FM_PROB;
		if (parse_prob(v, vlen, &a->p) < 0)
			return -EINVAL;
	} else {
		return -EINVAL;
	}
#undef KEY_IS
	return 0;
}

/* Caller holds fault_lock. */
static void
fault_apply(enum sh_fault_id id, const struct fault_arm *a)
{
	struct fault_state *f = &faults[id];
	int was = atomic_load(&f->mode);

	f->n = a->n;
	f->p = a->p;
	atomic_store(&f->hits, 0);
	atomic_store(&f->fired, 0);
	atomic_store(&f->mode, (int)a->mode);
	if (was == FM_OFF && a->mode != FM_OFF)
		atomic_fetch_add(&sh_fault_armed_count, 1);
	else if (was != FM_OFF && a->mode == FM_OFF)
		atomic_fetch_sub(&sh_fault_armed_count, 1);
}

int
sh_fault_arm(enum sh_fault_id id, const char *mode, char *err, size_t errlen)
{
	struct fault_arm a;

	if ((unsigned)id >= FP__COUNT || mode == NULL) {
		if (err)
			snprintf(err, errlen, "fault: no such fault point id %d", (int)id);
		return -EINVAL;
	}
	if (parse_mode(mode, strlen(mode), &a) < 0) {
		if (err)
			snprintf(err, errlen,
				 "fault %s: bad mode '%.40s' (want once, always, off, every=N, "
				 "nth=N, prob=P with N >= 1 and 0 <= P <= 1)",
				 fault_names[id], mode);
		return -EINVAL;
	}
	pthread_mutex_lock(&fault_lock);
	fault_apply(id, &a);
	pthread_mutex_unlock(&fault_lock);
	return 0;
}

/* Parse a spec into per-point arms; nothing is applied here. */
static int
spec_parse(const char *spec, struct fault_arm *arms, bool *set, char *err, size_t errlen)
{
	const char *p = spec, *end, *colon;
	size_t n;
	int id;

	for (int i = 0; i < FP__COUNT; i++)
		set[i] = false;
	while (*p != '\0') {
		end = strchr(p, ',');
		if (end == NULL)
			end = p + strlen(p);
		n = (size_t)(end - p);
		if (n == 0)
			goto next;
		colon = memchr(p, ':', n);
		if (colon == NULL) {
			if (err)
				snprintf(err, errlen,
					 "SH_FAULTS: '%.*s' has no ':mode' (name:mode)",
					 (int)SH_MIN(n, 64), p);
			return -EINVAL;
		}
		id = sh_fault_lookup(p, (size_t)(colon - p));
		if (id < 0) {
			if (err)
				snprintf(
				    err, errlen,
				    "SH_FAULTS: unknown fault point '%.*s' (see docs/testing.md "
				    "for the list)",
				    (int)SH_MIN((size_t)(colon - p), 64), p);
			return -EINVAL;
		}
		if (parse_mode(colon + 1, (size_t)(end - colon - 1), &arms[id]) < 0) {
			if (err)
				snprintf(
				    err, errlen,
				    "SH_FAULTS: bad mode '%.*s' for %s (want once, always, off, "
				    "every=N, nth=N, prob=P)",
				    (int)SH_MIN((size_t)(end - colon - 1), 40), colon + 1,
				    fault_names[id]);
			return -EINVAL;
		}
		set[id] = true;
next:
		p = *end == ',' ? end + 1 : end;
	}
	return 0;
}

int
sh_fault_spec_check(const char *spec, char *err, size_t errlen)
{
	struct fault_arm arms[FP__COUNT];
	bool set[FP__COUNT];

	if (spec == NULL)
		return -EINVAL;
	return spec_parse(spec, arms, set, err, errlen);
}

int
sh_fault_arm_spec(const char *spec, char *err, size_t errlen)
{
	struct fault_arm arms[FP__COUNT];
	bool set[FP__COUNT];
	int rc;

	if (spec == NULL)
		return -EINVAL;
	rc = spec_parse(spec, arms, set, err, errlen);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&fault_lock);
	for (int i = 0; i < FP__COUNT; i++)
		if (set[i])
			fault_apply((enum sh_fault_id)i, &arms[i]);
	pthread_mutex_unlock(&fault_lock);
	return 0;
}

int
sh_fault_init_from_env(void)
{
	const char *spec = getenv("SH_FAULTS");
	const char *seed = getenv("SH_FAULTS_SEED");
	char err[256];
	uint64_t s;

	if (seed != NULL && *seed != '\0') {
		if (parse_u64(seed, strlen(seed), &s) < 0) {
			fprintf(stderr,
				"shoal: SH_FAULTS_SEED must be a decimal number, not '%.40s'\n",
				seed);
			return -EINVAL;
		}
		sh_fault_seed(s);
	}
	if (spec == NULL || *spec == '\0')
		return 0;
	if (sh_fault_arm_spec(spec, err, sizeof(err)) < 0) {
		fprintf(stderr, "shoal: %s\n", err);
		return -EINVAL;
	}
	return 0;
}

void
sh_fault_disarm_all(void)
{
	struct fault_arm off = { .mode = FM_OFF };

	pthread_mutex_lock(&fault_lock);
	for (int i = 0; i < FP__COUNT; i++)
		fault_apply((enum sh_fault_id)i, &off);
	pthread_mutex_unlock(&fault_lock);
}

uint64_t
sh_fault_fired(enum sh_fault_id id)
{
	return (unsigned)id < FP__COUNT ? atomic_load(&faults[id].fired) : 0;
}

uint64_t
sh_fault_hits(enum sh_fault_id id)
{
	return (unsigned)id < FP__COUNT ? atomic_load(&faults[id].hits) : 0;
}

bool
sh_fault_check(enum sh_fault_id id)
{
	struct fault_state *f;
	uint64_t hit;
	bool fire = false;
	int mode, expect;

	if ((unsigned)id >= FP__COUNT)
		return false;
	f = &faults[id];
	mode = atomic_load(&f->mode);
	if (mode == FM_OFF)
		return false;
	hit = atomic_fetch_add(&f->hits, 1) + 1;
	switch (mode) {
	case FM_ONCE:
		expect = FM_ONCE;
		if (atomic_compare_exchange_strong(&f->mode, &expect, FM_OFF)) {
			atomic_fetch_sub(&sh_fault_armed_count, 1);
			fire = true;
		}
		break;
	case FM_ALWAYS:
		fire = true;
		break;
	case FM_EVERY:
		fire = hit % f->n == 0;
		break;
	case FM_NTH:
		fire = hit == f->n;
		break;
	case FM_PROB:
		pthread_mutex_lock(&fault_lock);
		fire = sh_rand_chance(&fault_rng, f->p);
		pthread_mutex_unlock(&fault_lock);
		break;
	}
	if (fire)
		atomic_fetch_add(&f->fired, 1);
	return fire;
}
