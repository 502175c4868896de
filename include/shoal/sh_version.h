/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Version of the Shoal public API and the SH_API export marker.
 * Everything in include/shoal/ is the public API; all else is private.
 */
#ifndef SH_VERSION_H
#define SH_VERSION_H

#define SH_VERSION_MAJOR  0
#define SH_VERSION_MINOR  1
#define SH_VERSION_PATCH  0
#define SH_VERSION_STRING "0.1.0"

/* Shoal builds with -fvisibility=hidden; public symbols carry SH_API. */
#if defined(__GNUC__)
#define SH_API __attribute__((visibility("default")))
#else
#define SH_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Returns SH_VERSION_STRING of the library actually linked. */
SH_API const char *sh_version(void);

#ifdef __cplusplus
}
#endif

#endif /* SH_VERSION_H */
