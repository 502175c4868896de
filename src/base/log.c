// SPDX-License-Identifier: Apache-2.0
/*
 * Logging: level specs, facility level cache, line formatting and output.
 * The design is in log.h.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

#define LOG_MAX_RULES 32
#define LOG_MAX_PAT   64
#define LOG_LINE_MAX  2048

struct log_rule {
	char pat[LOG_MAX_PAT];
	int level;
};

struct log_spec {
	int deflt;
	int nrules;
	struct log_rule rules[LOG_MAX_RULES];
};

_Atomic unsigned sh_log_gen = 1;

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static struct log_spec log_cur = { .deflt = SH_LL_WARN };
static int log_fd = 2;
static uint64_t (*log_clock_fn)(void *);
static void *log_clock_arg;
static bool log_clock_virt;
static void (*log_sink_fn)(void *, int, const char *);
static void *log_sink_arg;
static __thread char log_tag[16];

/*
 * fork() while another thread writes a line would leave the child's copy
 * of log_lock held forever (a Python DataLoader worker forked from a
 * process using libshoal logs through it again): the lock is taken
 * around the fork and let go on both sides.
 */
static void
log_fork_prepare(void)
{
	pthread_mutex_lock(&log_lock);
}

static void
log_fork_done(void)
{
	pthread_mutex_unlock(&log_lock);
}

__attribute__((constructor)) static void
log_fork_handlers(void)
{
	pthread_atfork(log_fork_prepare, log_fork_done, log_fork_done);
}

static const char *const level_names[] = { "fatal", "error", "warn", "info", "debug", "trace" };

const char *
sh_log_level_name(int level)
{
	if (level < 0 || level > SH_LL_TRACE)
		return "?";
	return level_names[level];
}

static int
parse_level(const char *s, size_t n)
{
	for (int i = 0; i <= SH_LL_TRACE; i++)
		if (strlen(level_names[i]) == n && strncmp(s, level_names[i], n) == 0)
			return i;
	return -1;
}

static int
spec_parse(const char *spec, struct log_spec *out, char *err, size_t errlen)
{
	const char *p = spec, *end, *eq;
	size_t n;
	int lvl;

	memset(out, 0, sizeof(*out));
	out->deflt = SH_LL_WARN;
	while (*p != '\0') {
		end = strchr(p, ',');
		if (end == NULL)
			end = p + strlen(p);
		n = (size_t)(end - p);
		eq = memchr(p, '=', n);
		if (n == 0)
			goto next;
		if (eq == NULL) {
			lvl = parse_level(p, n);
			if (lvl < 0)
				goto bad_level;
			out->deflt = lvl;
			goto next;
		}
		if (eq == p || (size_t)(eq - p) >= LOG_MAX_PAT) {
			if (err)
				snprintf(err, errlen, "log spec: bad facility pattern in '%.*s'",
					 (int)n, p);
			return -EINVAL;
		}
		lvl = parse_level(eq + 1, (size_t)(end - eq - 1));
		if (lvl < 0)
			goto bad_level;
		if (out->nrules == LOG_MAX_RULES) {
			if (err)
				snprintf(err, errlen, "log spec: more than %d rules",
					 LOG_MAX_RULES);
			return -EINVAL;
		}
		memcpy(out->rules[out->nrules].pat, p, (size_t)(eq - p));
		out->rules[out->nrules].pat[eq - p] = '\0';
		out->rules[out->nrules].level = lvl;
		out->nrules++;
next:
		p = *end == ',' ? end + 1 : end;
	}
	return 0;

bad_level:
	if (err)
		snprintf(
		    err, errlen,
		    "log spec: bad level in '%.*s' (want fatal, error, warn, info, debug, trace)",
		    (int)n, p);
	return -EINVAL;
}

int
sh_log_spec_check(const char *spec, char *err, size_t errlen)
{
	struct log_spec s;

	if (spec == NULL)
		return -EINVAL;
	return spec_parse(spec, &s, err, errlen);
}

int
sh_log_configure(const char *spec, char *err, size_t errlen)
{
	struct log_spec s;
	int rc;

	if (spec == NULL)
		return -EINVAL;
	rc = spec_parse(spec, &s, err, errlen);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&log_lock);
	log_cur = s;
	atomic_fetch_add(&sh_log_gen, 1);
	pthread_mutex_unlock(&log_lock);
	return 0;
}

void
sh_log_init_from_env(void)
{
	const char *s = getenv("SH_LOG");
	char err[160];

	if (s == NULL || *s == '\0')
		return;
	if (sh_log_configure(s, err, sizeof(err)) < 0)
		fprintf(stderr, "shoal: ignoring SH_LOG: %s\n", err);
}

int
sh_log_level_of(struct sh_log_fac *fac)
{
	int level;
	unsigned gen;

	pthread_mutex_lock(&log_lock);
	gen = atomic_load(&sh_log_gen);
	level = log_cur.deflt;
	for (int i = 0; i < log_cur.nrules; i++)
		if (fnmatch(log_cur.rules[i].pat, fac->name, 0) == 0)
			level = log_cur.rules[i].level;
	fac->level = level;
	fac->gen = gen;
	pthread_mutex_unlock(&log_lock);
	return level;
}

int
sh_log_set_file(const char *path)
{
	int fd, old;

	if (path == NULL) {
		fd = 2;
	} else {
		fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		if (fd < 0)
			return -errno;
	}
	pthread_mutex_lock(&log_lock);
	old = log_fd;
	log_fd = fd;
	pthread_mutex_unlock(&log_lock);
	if (old != 2)
		close(old);
	return 0;
}

void
sh_log_set_clock(uint64_t (*fn)(void *arg), void *arg, bool virt)
{
	pthread_mutex_lock(&log_lock);
	log_clock_fn = fn;
	log_clock_arg = arg;
	log_clock_virt = virt;
	pthread_mutex_unlock(&log_lock);
}

void
sh_log_set_tag(const char *tag)
{
	if (tag == NULL)
		tag = "";
	snprintf(log_tag, sizeof(log_tag), "%s", tag);
}

void
sh_log_set_sink(void (*fn)(void *arg, int level, const char *line), void *arg)
{
	pthread_mutex_lock(&log_lock);
	log_sink_fn = fn;
	log_sink_arg = arg;
	pthread_mutex_unlock(&log_lock);
}

static int
format_time(char *buf, size_t len)
{
	struct timespec ts;
	struct tm tm;
	uint64_t ns;

	if (log_clock_fn != NULL) {
		ns = log_clock_fn(log_clock_arg);
		if (log_clock_virt)
			return snprintf(buf, len, "t=%llu.%06llu",
					(unsigned long long)(ns / 1000000000),
					(unsigned long long)(ns % 1000000000 / 1000));
	} else {
		clock_gettime(CLOCK_REALTIME, &ts);
		ns = (uint64_t)ts.tv_sec * 1000000000 + (uint64_t)ts.tv_nsec;
	}
	time_t sec = (time_t)(ns / 1000000000);
	gmtime_r(&sec, &tm);
	return snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02d.%06uZ", tm.tm_year + 1900,
			tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
			(unsigned)(ns % 1000000000 / 1000));
}

void
sh_log_write(struct sh_log_fac *fac, int level, const char *file, int line, const char *fmt, ...)
{
	char buf[LOG_LINE_MAX];
	const char *base = strrchr(file, '/');
	va_list ap;
	int n, m;

	base = base ? base + 1 : file;
	pthread_mutex_lock(&log_lock);
	n = format_time(buf, sizeof(buf));
	pthread_mutex_unlock(&log_lock);
	if (n < 0 || (size_t)n >= sizeof(buf))
		n = 0;
	m = snprintf(buf + n, sizeof(buf) - (size_t)n, " %c %s%s%s %s:%d ",
		     "FEWIDT"[level < 0 || level > SH_LL_TRACE ? 0 : level], log_tag,
		     log_tag[0] ? " " : "", fac->name, base, line);
	if (m > 0)
		n = SH_MIN((size_t)n + (size_t)m, sizeof(buf) - 1);
	va_start(ap, fmt);
	m = vsnprintf(buf + n, sizeof(buf) - (size_t)n, fmt, ap);
	va_end(ap);
	if (m > 0)
		n = SH_MIN((size_t)n + (size_t)m, sizeof(buf) - 2);
	buf[n++] = '\n';
	buf[n] = '\0';

	pthread_mutex_lock(&log_lock);
	if (log_sink_fn != NULL) {
		log_sink_fn(log_sink_arg, level, buf);
	} else {
		ssize_t w = write(log_fd, buf, (size_t)n);
		(void)w;
	}
	pthread_mutex_unlock(&log_lock);
	if (level == SH_LL_FATAL)
		abort();
}
