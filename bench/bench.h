/* SPDX-License-Identifier: Apache-2.0 */
/* What the cluster benchmarks share: a clock, running a command, giving up. */
#ifndef SH_BENCH_BENCH_H
#define SH_BENCH_BENCH_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static inline double
bench_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Give up: "name: what went wrong" on stderr, and exit 1 (the atexit handlers clean up). */
static inline void __attribute__((format(printf, 2, 3), noreturn))
bench_die(const char *name, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

/* Run a shell command; a failure ends the benchmark (its atexit handlers clean up). */
static inline void __attribute__((format(printf, 2, 3)))
bench_sh(const char *name, const char *fmt, ...)
{
	char cmd[8192];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	if (system(cmd) != 0) {
		fprintf(stderr, "%s: failed: %s\n", name, cmd);
		exit(1);
	}
}

/* What tears the benchmark's cluster down, run at exit (unless SH_BENCH_KEEP is set). */
static char bench_down_cmd[16384];

static inline void
bench_down(void)
{
	if (bench_down_cmd[0] && getenv("SH_BENCH_KEEP") == NULL && system(bench_down_cmd) != 0)
		fprintf(stderr, "bench: could not clean up: %s\n", bench_down_cmd);
}

/* Set the clean-up command (printf-like) and run it however the benchmark ends. */
static inline void __attribute__((format(printf, 1, 2))) bench_at_exit(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(bench_down_cmd, sizeof(bench_down_cmd), fmt, ap);
	va_end(ap);
	atexit(bench_down);
}

#endif /* SH_BENCH_BENCH_H */
