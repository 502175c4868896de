/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Shoal's test harness. A test file holds
 *
 *     TEST(name) { ... SH_ASSERT_EQ(got, want); ... }
 *
 * and is linked with test.c, whose main() is the module's runner:
 *     --list            print test names
 *     --only GLOB[,..]  run the tests whose names match
 *     --seed N          seed for sh_test_seed() (simulator tests)
 *     --repeat N        run each test N times with seeds seed, seed+1, ...
 *     --timeout S       per-test limit in seconds (default 120)
 *     --no-fork         run in-process (for a debugger)
 *     -v                show each test's output even when it passes
 * Each test runs in a forked child with a timeout and must not leak
 * allocations made through sh_malloc. A failed assert prints both values.
 * The run ends with the line "N passed, N failed, N skipped".
 */
#ifndef SH_TEST_H
#define SH_TEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdnoreturn.h>

struct sh_test {
	const char *name;
	void (*fn)(void);
	const char *file;
	struct sh_test *next;
};

void sh_test_register(struct sh_test *t);

#define TEST(tname)                                                                            \
	static void test_fn_##tname(void);                                                     \
	static struct sh_test test_desc_##tname = { #tname, test_fn_##tname, __FILE__, NULL }; \
	__attribute__((constructor)) static void test_reg_##tname(void)                        \
	{                                                                                      \
		sh_test_register(&test_desc_##tname);                                          \
	}                                                                                      \
	static void test_fn_##tname(void)

/* The seed of this run (--seed, else 1 + repetition). Print it in your own messages. */
uint64_t sh_test_seed(void);
/* A fresh empty directory for this test on a real (non-tmpfs) file system. */
const char *sh_test_dir(void);
/* Give up on this test as skipped (a capability is missing); prints the reason. */
noreturn void sh_test_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
noreturn void sh_test_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void sh_test_fail_int(const char *file, int line, const char *ea, const char *op, const char *eb,
		      unsigned long long a, unsigned long long b, bool is_signed);
void sh_test_fail_rc(const char *file, int line, const char *expr, long long rc, long long want);
void sh_test_fail_mem(const char *file, int line, const char *ea, const char *eb, const void *a,
		      const void *b, size_t len);
/* Allow n allocations to outlive this test (global caches created on purpose). */
void sh_test_allow_leak(long long n);

#define SH_ASSERT(cond)                                                                  \
	do {                                                                             \
		if (!(cond))                                                             \
			sh_test_fail(__FILE__, __LINE__, "assertion failed: %s", #cond); \
	} while (0)

#define SH_ASSERT_MSG(cond, ...)                                       \
	do {                                                           \
		if (!(cond))                                           \
			sh_test_fail(__FILE__, __LINE__, __VA_ARGS__); \
	} while (0)

#define SH_TEST_SIGNED(x)                                                                     \
	_Generic((x), char : 1, signed char : 1, short : 1, int : 1, long : 1, long long : 1, \
		 default : 0)

/* Order of two integers of any types, as mathematics sees them: -1, 0 or 1. */
static inline int
sh_test_cmp(unsigned long long a, bool as, unsigned long long b, bool bs)
{
	bool an = as && (long long)a < 0, bn = bs && (long long)b < 0;

	if (an != bn)
		return an ? -1 : 1;
	if (an)
		return (long long)a < (long long)b ? -1 : (long long)a > (long long)b;
	return a < b ? -1 : a > b;
}

#define SH_ASSERT_CMP_(a, op, b)                                                               \
	do {                                                                                   \
		__auto_type sh_a_ = (a);                                                       \
		__auto_type sh_b_ = (b);                                                       \
		if (!(sh_test_cmp((unsigned long long)sh_a_, SH_TEST_SIGNED(sh_a_),            \
				  (unsigned long long)sh_b_, SH_TEST_SIGNED(sh_b_)) op 0))     \
			sh_test_fail_int(__FILE__, __LINE__, #a, #op, #b,                      \
					 (unsigned long long)sh_a_, (unsigned long long)sh_b_, \
					 SH_TEST_SIGNED(sh_a_) || SH_TEST_SIGNED(sh_b_));      \
	} while (0)

/* Integer equality compares the 64-bit patterns, so mixed types never warn. */
#define SH_ASSERT_EQ(a, b)                                                                     \
	do {                                                                                   \
		__auto_type sh_a_ = (a);                                                       \
		__auto_type sh_b_ = (b);                                                       \
		if ((unsigned long long)sh_a_ != (unsigned long long)sh_b_)                    \
			sh_test_fail_int(__FILE__, __LINE__, #a, "==", #b,                     \
					 (unsigned long long)sh_a_, (unsigned long long)sh_b_, \
					 SH_TEST_SIGNED(sh_a_) || SH_TEST_SIGNED(sh_b_));      \
	} while (0)
#define SH_ASSERT_NE(a, b)                                                                     \
	do {                                                                                   \
		__auto_type sh_a_ = (a);                                                       \
		__auto_type sh_b_ = (b);                                                       \
		if ((unsigned long long)sh_a_ == (unsigned long long)sh_b_)                    \
			sh_test_fail_int(__FILE__, __LINE__, #a, "!=", #b,                     \
					 (unsigned long long)sh_a_, (unsigned long long)sh_b_, \
					 SH_TEST_SIGNED(sh_a_) || SH_TEST_SIGNED(sh_b_));      \
	} while (0)
#define SH_ASSERT_LT(a, b) SH_ASSERT_CMP_(a, <, b)
#define SH_ASSERT_LE(a, b) SH_ASSERT_CMP_(a, <=, b)
#define SH_ASSERT_GT(a, b) SH_ASSERT_CMP_(a, >, b)
#define SH_ASSERT_GE(a, b) SH_ASSERT_CMP_(a, >=, b)

/* rc >= 0; on failure prints the error's name and message. */
#define SH_ASSERT_OK(rc)                                                     \
	do {                                                                 \
		long long sh_rc_ = (long long)(rc);                          \
		if (sh_rc_ < 0)                                              \
			sh_test_fail_rc(__FILE__, __LINE__, #rc, sh_rc_, 0); \
	} while (0)

/* rc == want (a negative code). */
#define SH_ASSERT_ERR(rc, want)                                                              \
	do {                                                                                 \
		long long sh_rc_ = (long long)(rc);                                          \
		if (sh_rc_ != (long long)(want))                                             \
			sh_test_fail_rc(__FILE__, __LINE__, #rc, sh_rc_, (long long)(want)); \
	} while (0)

#define SH_ASSERT_STREQ(a, b)                                                                     \
	do {                                                                                      \
		const char *sh_a_ = (a), *sh_b_ = (b);                                            \
		if (sh_a_ == NULL || sh_b_ == NULL || strcmp(sh_a_, sh_b_) != 0)                  \
			sh_test_fail(__FILE__, __LINE__,                                          \
				     "expected %s == %s\n  %s = \"%s\"\n  %s = \"%s\"", #a, #b,   \
				     #a, sh_a_ ? sh_a_ : "(null)", #b, sh_b_ ? sh_b_ : "(null)"); \
	} while (0)

#define SH_ASSERT_MEMEQ(a, b, len)                                                         \
	do {                                                                               \
		const void *sh_a_ = (a), *sh_b_ = (b);                                     \
		size_t sh_n_ = (len);                                                      \
		if (memcmp(sh_a_, sh_b_, sh_n_) != 0)                                      \
			sh_test_fail_mem(__FILE__, __LINE__, #a, #b, sh_a_, sh_b_, sh_n_); \
	} while (0)

#define SH_ASSERT_NULL(p)     SH_ASSERT_MSG((p) == NULL, "expected %s to be NULL", #p)
#define SH_ASSERT_NOT_NULL(p) SH_ASSERT_MSG((p) != NULL, "expected %s not to be NULL", #p)

#include <string.h>

#endif /* SH_TEST_H */
