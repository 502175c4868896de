/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Allocation wrappers. All Shoal code allocates through these so that the
 * fault point FP_ALLOC can make any allocation fail (tests fail each one in
 * turn with "alloc:nth=N") and so that tests can check for leaks with
 * sh_alloc_live(). The data path returns -ENOMEM on NULL; only start-up may
 * abort (sh_xmalloc).
 */
#ifndef SH_BASE_ALLOC_H
#define SH_BASE_ALLOC_H

#include <stddef.h>
#include <stdint.h>

void *sh_malloc(size_t size);
void *sh_calloc(size_t n, size_t size);
/* n * size with overflow check (NULL on overflow); memory is zeroed. */
void *sh_alloc_array(size_t n, size_t size);
void *sh_realloc(void *p, size_t size);
/* size bytes aligned to align (a power of two, >= sizeof(void *)). */
void *sh_aligned_alloc(size_t align, size_t size);
char *sh_strdup(const char *s);
char *sh_strndup(const char *s, size_t n);
void sh_free(void *p);
/* Aborts with a message on failure: for start-up only. */
void *sh_xmalloc(size_t size);

/* Allocations made through these wrappers and not yet freed. */
int64_t sh_alloc_live(void);

#endif /* SH_BASE_ALLOC_H */
