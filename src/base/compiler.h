/* SPDX-License-Identifier: Apache-2.0 */
/* Small compiler helpers used everywhere: container_of, branch hints, sizes. */
#ifndef SH_BASE_COMPILER_H
#define SH_BASE_COMPILER_H

#include <stddef.h>

#define sh_container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))
#define SH_ARRAY_SIZE(a)		   (sizeof(a) / sizeof((a)[0]))
#define sh_likely(x)			   __builtin_expect(!!(x), 1)
#define sh_unlikely(x)			   __builtin_expect(!!(x), 0)
#define SH_UNUSED			   __attribute__((unused))
#define SH_PRINTF(fmt, args)		   __attribute__((format(printf, fmt, args)))
#define SH_MIN(a, b)			   ((a) < (b) ? (a) : (b))
#define SH_MAX(a, b)			   ((a) > (b) ? (a) : (b))
#define SH_ALIGN_UP(x, a)		   (((x) + ((a)-1)) & ~((__typeof__(x))(a)-1))
#define SH_IS_ALIGNED(x, a)		   (((x) & ((__typeof__(x))(a)-1)) == 0)
#define SH_IS_POW2(x)			   ((x) != 0 && ((x) & ((x)-1)) == 0)

#endif /* SH_BASE_COMPILER_H */
