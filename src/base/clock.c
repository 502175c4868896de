// SPDX-License-Identifier: Apache-2.0
/* Thin wrappers over clock_gettime(). */
#include <time.h>

#include "clock.h"

static uint64_t
read_clock(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * SH_NSEC_PER_SEC + (uint64_t)ts.tv_nsec;
}

uint64_t
sh_clock_mono_ns(void)
{
	return read_clock(CLOCK_MONOTONIC);
}

uint64_t
sh_clock_real_ns(void)
{
	return read_clock(CLOCK_REALTIME);
}

uint64_t
sh_clock_cpu_ns(void)
{
	return read_clock(CLOCK_PROCESS_CPUTIME_ID);
}
