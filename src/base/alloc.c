// SPDX-License-Identifier: Apache-2.0
/* Allocation wrappers with the FP_ALLOC fault point and a live-allocation counter. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "fault.h"

static _Atomic int64_t alloc_live;

int64_t
sh_alloc_live(void)
{
	return atomic_load(&alloc_live);
}

static void *
counted(void *p)
{
	if (p != NULL)
		atomic_fetch_add_explicit(&alloc_live, 1, memory_order_relaxed);
	return p;
}

void *
sh_malloc(size_t size)
{
	if (SH_FAULT(FP_ALLOC))
		return NULL;
	return counted(malloc(size ? size : 1));
}

void *
sh_calloc(size_t n, size_t size)
{
	if (SH_FAULT(FP_ALLOC))
		return NULL;
	return counted(calloc(n ? n : 1, size ? size : 1));
}

void *
sh_alloc_array(size_t n, size_t size)
{
	size_t total;

	if (__builtin_mul_overflow(n, size, &total))
		return NULL;
	return sh_calloc(1, total);
}

void *
sh_realloc(void *p, size_t size)
{
	void *q;

	if (SH_FAULT(FP_ALLOC))
		return NULL;
	q = realloc(p, size ? size : 1);
	if (p == NULL)
		return counted(q);
	return q;
}

void *
sh_aligned_alloc(size_t align, size_t size)
{
	void *p = NULL;

	if (SH_FAULT(FP_ALLOC))
		return NULL;
	if (posix_memalign(&p, align, size ? size : 1) != 0)
		return NULL;
	return counted(p);
}

char *
sh_strdup(const char *s)
{
	size_t n = strlen(s) + 1;
	char *d = sh_malloc(n);

	if (d != NULL)
		memcpy(d, s, n);
	return d;
}

char *
sh_strndup(const char *s, size_t n)
{
	size_t len = strnlen(s, n);
	char *d = sh_malloc(len + 1);

	if (d != NULL) {
		memcpy(d, s, len);
		d[len] = '\0';
	}
	return d;
}

void
sh_free(void *p)
{
	if (p == NULL)
		return;
	atomic_fetch_sub_explicit(&alloc_live, 1, memory_order_relaxed);
	free(p);
}

void *
sh_xmalloc(size_t size)
{
	void *p = malloc(size ? size : 1);

	if (p == NULL) {
		fprintf(stderr, "shoal: out of memory allocating %zu bytes at start-up\n", size);
		abort();
	}
	return counted(p);
}
