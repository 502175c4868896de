// SPDX-License-Identifier: Apache-2.0
/*
 * sh_strerror() and sh_errname(): the one place where return codes become
 * text. Errno values use glibc's thread-safe tables; Shoal's own codes come
 * from the X-macro table in include/shoal/sh_errno.h.
 */
#define _GNU_SOURCE
#include <string.h>

#include <shoal/sh_errno.h>
#include <shoal/sh_version.h>

struct err_entry {
	int code;
	const char *name;
	const char *msg;
};

static const struct err_entry sh_err_table[] = {
#define ERR_ENTRY(name, off, msg) { -(SH_ERR_BASE + (off)), #name, msg },
	SH_ERRNO_TABLE(ERR_ENTRY)
#undef ERR_ENTRY
};

static const struct err_entry *
err_lookup(int rc)
{
	for (size_t i = 0; i < sizeof(sh_err_table) / sizeof(sh_err_table[0]); i++)
		if (sh_err_table[i].code == rc)
			return &sh_err_table[i];
	return NULL;
}

SH_API const char *
sh_strerror(int rc)
{
	const struct err_entry *e;
	const char *s;

	if (rc >= 0)
		return "success";
	e = err_lookup(rc);
	if (e != NULL)
		return e->msg;
	if (rc > -SH_ERR_BASE) {
		s = strerrordesc_np(-rc);
		if (s != NULL)
			return s;
	}
	return "unknown error";
}

SH_API const char *
sh_errname(int rc)
{
	const struct err_entry *e;
	const char *s;

	if (rc >= 0)
		return "OK";
	e = err_lookup(rc);
	if (e != NULL)
		return e->name;
	if (rc > -SH_ERR_BASE) {
		s = strerrorname_np(-rc);
		if (s != NULL)
			return s;
	}
	return "EUNKNOWN";
}

SH_API const char *
sh_version(void)
{
	return SH_VERSION_STRING;
}
