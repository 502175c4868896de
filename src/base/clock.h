/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The operating system's clocks. Only env/real, logging, tests and tools
 * call these: protocol code asks its env for the time (env_now), so that the
 * simulator can run it on virtual time.
 */
#ifndef SH_BASE_CLOCK_H
#define SH_BASE_CLOCK_H

#include <stdint.h>

#define SH_NSEC_PER_USEC 1000ULL
#define SH_NSEC_PER_MSEC 1000000ULL
#define SH_NSEC_PER_SEC	 1000000000ULL

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t sh_clock_mono_ns(void);
/* CLOCK_REALTIME in nanoseconds since the Unix epoch. */
uint64_t sh_clock_real_ns(void);
/* CPU time used by this process, nanoseconds. */
uint64_t sh_clock_cpu_ns(void);

#endif /* SH_BASE_CLOCK_H */
