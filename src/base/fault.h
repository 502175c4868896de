/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Named fault points. Code that can fail in a way tests must reach marks the
 * spot with
 *     if (SH_FAULT(FP_ENV_DISK_WRITE_EIO))
 *             return -EIO;
 * Points are listed in fault_list.h. They are armed by tests (sh_fault_arm)
 * or from the environment:
 *     SH_FAULTS=name:mode[,name:mode...]
 * with mode one of
 *     once      fire on the next hit, then disarm
 *     always    fire on every hit
 *     every=N   fire on every Nth hit (N, 2N, ...)
 *     nth=N     fire on the Nth hit only (to fail each allocation in turn)
 *     prob=P    fire with probability P in [0, 1] (seeded: sh_fault_seed)
 *     off       disarm
 * When nothing is armed a fault point costs one relaxed load and a branch.
 */
#ifndef SH_BASE_FAULT_H
#define SH_BASE_FAULT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "compiler.h"
#include "fault_list.h"

enum sh_fault_id {
#define SH_FAULT_ENUM(id, name, doc) id,
	SH_FAULT_LIST(SH_FAULT_ENUM)
#undef SH_FAULT_ENUM
	    FP__COUNT
};

extern _Atomic int sh_fault_armed_count;

bool sh_fault_check(enum sh_fault_id id);

#define SH_FAULT(id)                                                                            \
	(sh_unlikely(atomic_load_explicit(&sh_fault_armed_count, memory_order_relaxed) != 0) && \
	 sh_fault_check(id))

/* Arm one point with a mode string as above. -EINVAL with a reason in err. */
int sh_fault_arm(enum sh_fault_id id, const char *mode, char *err, size_t errlen);

/*
 * Parse and apply a whole SH_FAULTS spec. All or nothing: on -EINVAL no
 * point changes and err says which item is wrong and why.
 */
int sh_fault_arm_spec(const char *spec, char *err, size_t errlen);

/* Check a spec without applying it. */
int sh_fault_spec_check(const char *spec, char *err, size_t errlen);

/* Apply $SH_FAULTS (and $SH_FAULTS_SEED). Prints the reason and returns -EINVAL if bad. */
int sh_fault_init_from_env(void);

void sh_fault_disarm_all(void);
void sh_fault_seed(uint64_t seed);

/* -ENOENT for an unknown name. */
int sh_fault_lookup(const char *name, size_t len);
const char *sh_fault_name(enum sh_fault_id id);
const char *sh_fault_doc(enum sh_fault_id id);
/* How many times the point fired / was hit while armed since it was last armed. */
uint64_t sh_fault_fired(enum sh_fault_id id);
uint64_t sh_fault_hits(enum sh_fault_id id);

#endif /* SH_BASE_FAULT_H */
