// SPDX-License-Identifier: Apache-2.0
/*
 * The test runner behind every tests/<tier>/<module> binary: registration,
 * selection, one forked child per test with a time limit, captured output
 * shown on failure, leak check through sh_alloc_live(), and the closing
 * "N passed, N failed, N skipped" line. See test.h.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <ftw.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../src/base/base.h"
#include "test.h"

#define EXIT_SKIP 77

static struct sh_test *tests_head, **tests_tail = &tests_head;
static uint64_t cur_seed = 1;
static char cur_dir[4096];
static long long leak_allowance;
static const char *argv0;
static const char *cur_name;

void
sh_test_register(struct sh_test *t)
{
	t->next = NULL;
	*tests_tail = t;
	tests_tail = &t->next;
}

uint64_t
sh_test_seed(void)
{
	return cur_seed;
}

void
sh_test_allow_leak(long long n)
{
	leak_allowance += n;
}

const char *
sh_test_dir(void)
{
	if (cur_dir[0] == '\0') {
		const char *base = getenv("SH_TEST_TMP");
		char tmpl[4096];

		snprintf(tmpl, sizeof(tmpl), "%s/%s.XXXXXX", base && *base ? base : "build/tmp",
			 cur_name ? cur_name : "test");
		mkdir(base && *base ? base : "build", 0755);
		mkdir(base && *base ? base : "build/tmp", 0755);
		if (mkdtemp(tmpl) == NULL)
			sh_test_fail(__FILE__, __LINE__, "mkdtemp %s: %s", tmpl, strerror(errno));
		snprintf(cur_dir, sizeof(cur_dir), "%s", tmpl);
	}
	return cur_dir;
}

static int
rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static void
rm_tree(const char *dir)
{
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

noreturn void
sh_test_skip(const char *fmt, ...)
{
	va_list ap;

	printf("SKIP reason: ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	_exit(EXIT_SKIP);
}

noreturn void
sh_test_fail(const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fprintf(stderr, "%s:%d: ", file, line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n  (seed %llu)\n", (unsigned long long)cur_seed);
	fflush(stderr);
	_exit(1);
}

void
sh_test_fail_int(const char *file, int line, const char *ea, const char *op, const char *eb,
		 unsigned long long a, unsigned long long b, bool is_signed)
{
	if (is_signed)
		sh_test_fail(file, line,
			     "expected %s %s %s\n  %s = %lld (%#llx)\n  %s = %lld (%#llx)", ea, op,
			     eb, ea, (long long)a, a, eb, (long long)b, b);
	sh_test_fail(file, line, "expected %s %s %s\n  %s = %llu (%#llx)\n  %s = %llu (%#llx)", ea,
		     op, eb, ea, a, a, eb, b, b);
}

void
sh_test_fail_rc(const char *file, int line, const char *expr, long long rc, long long want)
{
	if (want == 0)
		sh_test_fail(file, line, "%s failed: %lld %s (%s)", expr, rc, sh_errname((int)rc),
			     sh_strerror((int)rc));
	sh_test_fail(file, line, "%s returned %lld %s (%s), expected %lld %s", expr, rc,
		     sh_errname((int)rc), sh_strerror((int)rc), want, sh_errname((int)want));
}

void
sh_test_fail_mem(const char *file, int line, const char *ea, const char *eb, const void *a,
		 const void *b, size_t len)
{
	const unsigned char *x = a, *y = b;
	size_t i = 0;

	while (i < len && x[i] == y[i])
		i++;
	sh_test_fail(file, line, "%s and %s differ at byte %zu of %zu: %#04x != %#04x", ea, eb, i,
		     len, x[i], y[i]);
}

static bool
selected(const struct sh_test *t, const char *only)
{
	char buf[1024], *save = NULL, *tok;

	if (only == NULL)
		return true;
	snprintf(buf, sizeof(buf), "%s", only);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
		if (fnmatch(tok, t->name, 0) == 0)
			return true;
	return false;
}

static void
run_child(const struct sh_test *t)
{
	int64_t live;

	cur_name = t->name;
	sh_fault_disarm_all();
	sh_fault_seed(cur_seed);
	live = sh_alloc_live();
	t->fn();
	if (sh_alloc_live() - live > leak_allowance)
		sh_test_fail(t->file, 0, "test %s leaked %lld allocations", t->name,
			     (long long)(sh_alloc_live() - live - leak_allowance));
	if (cur_dir[0] != '\0')
		rm_tree(cur_dir);
	fflush(stdout);
	fflush(stderr);
}

static void
dump_file(int fd)
{
	char buf[4096];
	ssize_t n;

	lseek(fd, 0, SEEK_SET);
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		fwrite(buf, 1, (size_t)n, stdout);
}

enum result { R_PASS, R_FAIL, R_SKIP };

static enum result
run_forked(const struct sh_test *t, unsigned timeout_s, bool verbose, double *secs)
{
	char path[] = "/tmp/shoal-test-out.XXXXXX";
	struct timespec t0, t1;
	int fd = mkstemp(path), status = 0;
	enum result res;
	pid_t pid;

	if (fd < 0) {
		perror("mkstemp");
		exit(2);
	}
	unlink(path);
	fflush(stdout);
	fflush(stderr);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	pid = fork();
	if (pid < 0) {
		perror("fork");
		exit(2);
	}
	if (pid == 0) {
		if (!verbose) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		alarm(timeout_s);
		run_child(t);
		_exit(0);
	}
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	*secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
		res = R_PASS;
	} else if (WIFEXITED(status) && WEXITSTATUS(status) == EXIT_SKIP) {
		res = R_SKIP;
	} else {
		res = R_FAIL;
	}
	if (res != R_PASS || verbose)
		dump_file(fd);
	if (res == R_FAIL) {
		if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM)
			printf("  TIMEOUT after %u s\n", timeout_s);
		else if (WIFSIGNALED(status))
			printf("  killed by signal %d (%s)\n", WTERMSIG(status),
			       strsignal(WTERMSIG(status)));
		printf("  seed %llu; rerun: %s --only %s --seed %llu\n",
		       (unsigned long long)cur_seed, argv0, t->name, (unsigned long long)cur_seed);
	}
	close(fd);
	return res;
}

static void
usage(void)
{
	fprintf(stderr,
		"usage: %s [--list] [--only GLOB[,GLOB]] [--seed N] [--repeat N] "
		"[--timeout S] [--no-fork] [-v]\n",
		argv0);
	exit(2);
}

static unsigned long long
num_arg(const char *s)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0 || *end != '\0' || *s == '\0' || *s == '-')
		usage();
	return v;
}

int
main(int argc, char **argv)
{
	const char *only = NULL;
	bool list = false, fork_each = true, verbose = false, seed_given = false;
	unsigned long long seed = 1, repeat = 1;
	unsigned timeout_s = 120;
	unsigned passed = 0, failed = 0, skipped = 0;
	struct sh_test *t;

	argv0 = argv[0];
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--list") == 0) {
			list = true;
		} else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
			only = argv[++i];
		} else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
			seed = num_arg(argv[++i]);
			seed_given = true;
		} else if (strcmp(argv[i], "--repeat") == 0 && i + 1 < argc) {
			repeat = num_arg(argv[++i]);
		} else if (strcmp(argv[i], "--timeout") == 0 && i + 1 < argc) {
			timeout_s = (unsigned)num_arg(argv[++i]);
		} else if (strcmp(argv[i], "--no-fork") == 0) {
			fork_each = false;
		} else if (strcmp(argv[i], "-v") == 0) {
			verbose = true;
		} else {
			usage();
		}
	}
	if (!seed_given && getenv("SH_TEST_SEED") != NULL)
		seed = num_arg(getenv("SH_TEST_SEED"));
	sh_log_init_from_env();
	for (t = tests_head; t != NULL; t = t->next) {
		if (!selected(t, only))
			continue;
		if (list) {
			printf("%s\n", t->name);
			continue;
		}
		for (unsigned long long r = 0; r < repeat; r++) {
			enum result res = R_PASS;
			double secs = 0;

			cur_seed = seed + r;
			if (fork_each) {
				res = run_forked(t, timeout_s, verbose, &secs);
			} else {
				run_child(t);
			}
			printf("%s %s (%.2fs)%s\n",
			       res == R_PASS   ? "PASS"
			       : res == R_FAIL ? "FAIL"
					       : "SKIP",
			       t->name, secs, repeat > 1 ? "" : "");
			if (repeat > 1 && res == R_FAIL)
				printf("  (repetition %llu)\n", r);
			passed += res == R_PASS;
			failed += res == R_FAIL;
			skipped += res == R_SKIP;
		}
	}
	if (!list)
		printf("%u passed, %u failed, %u skipped\n", passed, failed, skipped);
	return failed ? 1 : 0;
}
