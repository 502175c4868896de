/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Error codes. Shoal functions return 0 (or a count) on success and a
 * negative errno-style code on failure: either a Linux errno (-ENOENT) or
 * one of Shoal's own conditions below, all at or below -4096 so that they
 * never collide with an errno. One X-macro table makes the enum and the
 * strings of sh_strerror() and sh_errname().
 */
#ifndef SH_ERRNO_H
#define SH_ERRNO_H

#include <shoal/sh_version.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SH_ERR_BASE 4096

/* X(name, offset from SH_ERR_BASE, message) */
#define SH_ERRNO_TABLE(X)                                            \
	X(SH_EINTERNAL, 0, "internal error (a bug in Shoal)")        \
	X(SH_EFAULTINJ, 1, "injected fault")                         \
	X(SH_ECRC, 2, "checksum mismatch")                           \
	X(SH_EVERSION, 3, "incompatible format or protocol version") \
	X(SH_ENOTLEADER, 4, "not the leader of this group")          \
	X(SH_ESTALEEPOCH, 5, "configuration epoch is stale")         \
	X(SH_EPEERRESTART, 6, "peer restarted (new incarnation)")    \
	X(SH_EPEERDEAD, 7, "peer declared dead")                     \
	X(SH_ENOQUORUM, 8, "no quorum")                              \
	X(SH_EAUTH, 9, "authentication failed")                      \
	X(SH_ENOTFORMATTED, 10, "target is not formatted")           \
	X(SH_EBADCONFIG, 11, "invalid configuration")                \
	X(SH_ECRASHED, 12, "node crashed (simulated)")               \
	X(SH_EPAUSED, 13, "file system paused (being restored)")

enum sh_errno {
#define SH_ERRNO_ENUM(name, off, msg) name = -(SH_ERR_BASE + (off)),
	SH_ERRNO_TABLE(SH_ERRNO_ENUM)
#undef SH_ERRNO_ENUM
};

/*
 * Message for a return code: a negative errno, a Shoal code, or 0.
 * Never NULL; the string is static and valid forever. Thread-safe.
 */
SH_API const char *sh_strerror(int rc);

/* Symbolic name of a return code ("ENOENT", "SH_ECRC", "OK"); never NULL. */
SH_API const char *sh_errname(int rc);

#ifdef __cplusplus
}
#endif

#endif /* SH_ERRNO_H */
