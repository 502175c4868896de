// SPDX-License-Identifier: Apache-2.0
/* A minimal blocking HTTP/1.1 client for the admin API (http.h). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http.h"

static int
parse_addr(const char *addr, struct sockaddr_in *sin)
{
	char host[64];
	const char *colon = strrchr(addr, ':');
	char *end;
	long port;

	if (colon == NULL || (size_t)(colon - addr) >= sizeof(host))
		return -EINVAL;
	memcpy(host, addr, (size_t)(colon - addr));
	host[colon - addr] = '\0';
	port = strtol(colon + 1, &end, 10);
	if (*end != '\0' || port <= 0 || port > 65535)
		return -EINVAL;
	memset(sin, 0, sizeof(*sin));
	sin->sin_family = AF_INET;
	sin->sin_port = htons((uint16_t)port);
	if (inet_pton(AF_INET, host, &sin->sin_addr) != 1)
		return -EINVAL;
	return 0;
}

static int
wait_fd(int fd, short ev, int timeout_s)
{
	struct pollfd p = { .fd = fd, .events = ev };
	int rc = poll(&p, 1, timeout_s * 1000);

	if (rc == 0)
		return -ETIMEDOUT;
	return rc < 0 ? -errno : 0;
}

int
sh_http_call(const char *addr, const char *method, const char *path, const char *body,
	     char **body_out, int timeout_s)
{
	struct sockaddr_in sin;
	size_t blen = body ? strlen(body) : 0, cap = 4096, len = 0, off = 0;
	char *req = NULL, *buf = NULL, *p;
	int fd, rc, status = 0;
	int n;

	*body_out = NULL;
	if (parse_addr(addr, &sin) < 0)
		return -EINVAL;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0) {
		rc = -errno;
		goto out;
	}
	n = asprintf(&req,
		     "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n"
		     "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
		     method, path, addr, blen, body ? body : "");
	if (n < 0) {
		rc = -ENOMEM;
		goto out;
	}
	while (off < (size_t)n) {
		ssize_t w = send(fd, req + off, (size_t)n - off, MSG_NOSIGNAL);
		if (w < 0) {
			rc = -errno;
			goto out;
		}
		off += (size_t)w;
	}
	buf = malloc(cap);
	if (buf == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	for (;;) {
		ssize_t r;

		rc = wait_fd(fd, POLLIN, timeout_s);
		if (rc < 0)
			goto out;
		if (len + 1 >= cap) {
			char *nb = realloc(buf, cap * 2);
			if (nb == NULL) {
				rc = -ENOMEM;
				goto out;
			}
			buf = nb;
			cap *= 2;
		}
		r = recv(fd, buf + len, cap - len - 1, 0);
		if (r < 0) {
			rc = -errno;
			goto out;
		}
		if (r == 0)
			break;
		len += (size_t)r;
	}
	buf[len] = '\0';
	if (sscanf(buf, "HTTP/1.%*d %d", &status) != 1) {
		rc = -EPROTO;
		goto out;
	}
	p = strstr(buf, "\r\n\r\n");
	*body_out = strdup(p ? p + 4 : "");
	rc = *body_out ? status : -ENOMEM;
out:
	free(req);
	free(buf);
	close(fd);
	return rc;
}
