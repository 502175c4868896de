/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A minimal blocking HTTP/1.1 client for the admin API (the CLI, and the
 * client library's first contact with a cluster). IPv4 "ip:port" only
 * ("https://ip:port" is taken too, and means the same).
 *
 * TLS (docs/security.md): every call goes over TLS when a CA file is set,
 * by sh_http_tls_ca() or else $SHOAL_CA_FILE; the node's certificate must
 * chain to it and name the address's IP (a subject alternative name).
 */
#ifndef SH_BASE_HTTP_H
#define SH_BASE_HTTP_H

/*
 * One request; *body_out (malloc'd, NUL-terminated) is the reply. Returns
 * the HTTP status or -errno (no connection, timeout). token: the admin
 * API's bearer token (secret.h), or NULL for the paths open without one.
 */
int sh_http_call(const char *addr, const char *token, const char *method, const char *path,
		 const char *body, char **body_out, int timeout_s);

/*
 * The certificates this process trusts for every call from now on (a PEM
 * file), over $SHOAL_CA_FILE; NULL: back to $SHOAL_CA_FILE. Errors of a
 * call over TLS: -EKEYREJECTED (the certificate is not trusted or does not
 * name the address), -EPROTO (no TLS there), -ENOENT (no such CA file).
 */
void sh_http_tls_ca(const char *ca_file);

#endif /* SH_BASE_HTTP_H */
