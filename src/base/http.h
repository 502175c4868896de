/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A minimal blocking HTTP/1.1 client for the admin API (the CLI, and the
 * client library's first contact with a cluster). IPv4 "ip:port" only.
 */
#ifndef SH_BASE_HTTP_H
#define SH_BASE_HTTP_H

/*
 * One request; *body_out (malloc'd, NUL-terminated) is the reply. Returns
 * the HTTP status or -errno (no connection, timeout).
 */
int sh_http_call(const char *addr, const char *method, const char *path, const char *body,
		 char **body_out, int timeout_s);

#endif /* SH_BASE_HTTP_H */
