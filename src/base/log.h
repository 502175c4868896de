/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Logging with levels and per-file facilities.
 *
 * Each .c file that logs names its facility once:
 *     SH_LOG_FACILITY("env.udp");
 * and then calls sh_log_info("bound %s", addr). A facility's level comes from
 * the spec given to sh_log_configure() or the SH_LOG environment variable:
 *     "info"                       every facility at info
 *     "warn,env.*=debug,net=trace" default warn, globs per facility
 * Later rules win. A disabled message costs one load and one compare.
 * Lines go to stderr or to a file, one write() per line, so threads and
 * processes sharing a file do not interleave inside a line.
 */
#ifndef SH_BASE_LOG_H
#define SH_BASE_LOG_H

#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "compiler.h"

enum sh_log_level {
	SH_LL_FATAL = 0,
	SH_LL_ERROR,
	SH_LL_WARN,
	SH_LL_INFO,
	SH_LL_DEBUG,
	SH_LL_TRACE,
};

struct sh_log_fac {
	const char *name;
	int level;    /* cached effective level */
	unsigned gen; /* sh_log_gen when level was computed */
};

extern _Atomic unsigned sh_log_gen;

#define SH_LOG_FACILITY(nm) static struct sh_log_fac sh_log_fac_ SH_UNUSED = { .name = (nm) }

int sh_log_level_of(struct sh_log_fac *fac);

static inline bool
sh_log_enabled(struct sh_log_fac *fac, int level)
{
	if (sh_likely(fac->gen == atomic_load_explicit(&sh_log_gen, memory_order_relaxed)))
		return level <= fac->level;
	return level <= sh_log_level_of(fac);
}

void sh_log_write(struct sh_log_fac *fac, int level, const char *file, int line, const char *fmt,
		  ...) SH_PRINTF(5, 6);

#define sh_log(lvl, ...)                                                                    \
	do {                                                                                \
		if (sh_log_enabled(&sh_log_fac_, (lvl)))                                    \
			sh_log_write(&sh_log_fac_, (lvl), __FILE__, __LINE__, __VA_ARGS__); \
	} while (0)

#define sh_log_error(...) sh_log(SH_LL_ERROR, __VA_ARGS__)
#define sh_log_warn(...)  sh_log(SH_LL_WARN, __VA_ARGS__)
#define sh_log_info(...)  sh_log(SH_LL_INFO, __VA_ARGS__)
#define sh_log_debug(...) sh_log(SH_LL_DEBUG, __VA_ARGS__)
#define sh_log_trace(...) sh_log(SH_LL_TRACE, __VA_ARGS__)

/*
 * Parse and apply a level spec (see above). On error returns -EINVAL, keeps
 * the previous configuration and, if err is not NULL, writes a one-line
 * reason into err (errlen bytes). The spec is copied.
 */
int sh_log_configure(const char *spec, char *err, size_t errlen);

/* Check a spec without applying it; same errors as sh_log_configure(). */
int sh_log_spec_check(const char *spec, char *err, size_t errlen);

/* Apply $SH_LOG if set; a bad value is reported on stderr and ignored. */
void sh_log_init_from_env(void);

/* Send lines to a file opened for append (NULL: back to stderr). */
int sh_log_set_file(const char *path);

/*
 * Clock used for the time stamp of each line; the default is wall-clock
 * time. The simulator installs its virtual clock so that logs are
 * reproducible. fn returns nanoseconds; virt selects "t=SEC" formatting.
 */
void sh_log_set_clock(uint64_t (*fn)(void *arg), void *arg, bool virt);

/* A short tag printed on each line of this thread ("n3", "worker1"). */
void sh_log_set_tag(const char *tag);

/* Capture lines instead of writing them (tests); NULL restores output. */
void sh_log_set_sink(void (*fn)(void *arg, int level, const char *line), void *arg);

const char *sh_log_level_name(int level);

#endif /* SH_BASE_LOG_H */
