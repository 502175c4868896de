// SPDX-License-Identifier: Apache-2.0
/* A minimal blocking HTTP/1.1 client for the admin API (http.h). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "http.h"

static pthread_mutex_t tls_mu = PTHREAD_MUTEX_INITIALIZER;
static char *tls_ca; /* sh_http_tls_ca's, else NULL: $SHOAL_CA_FILE */

void
sh_http_tls_ca(const char *ca_file)
{
	pthread_mutex_lock(&tls_mu);
	free(tls_ca);
	tls_ca = ca_file && *ca_file ? strdup(ca_file) : NULL;
	pthread_mutex_unlock(&tls_mu);
}

/* The CA file to trust (a copy, to free), or NULL: plain HTTP. */
static char *
tls_ca_file(void)
{
	const char *env = getenv("SHOAL_CA_FILE");
	char *ca;

	pthread_mutex_lock(&tls_mu);
	ca = tls_ca ? strdup(tls_ca) : env && *env ? strdup(env) : NULL;
	pthread_mutex_unlock(&tls_mu);
	return ca;
}

static int
parse_addr(const char *addr, struct sockaddr_in *sin, char *host, size_t hlen)
{
	const char *colon = strrchr(addr, ':');
	char *end;
	long port;

	if (colon == NULL || (size_t)(colon - addr) >= hlen)
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

/* One connection, plain or TLS. */
struct conn {
	int fd;
	SSL_CTX *ctx;
	SSL *ssl;
	int timeout_s;
	bool clean;	  /* TLS: the server's close_notify came: ours may go back */
	bool sigpipe;	  /* SIGPIPE blocked in this thread for the call (OpenSSL's writes) */
	sigset_t oldmask; /* the thread's mask before */
};

/*
 * TLS over the connected socket, the node's certificate checked against
 * the CA file and the address it was asked at (an IP subject alternative
 * name). -EKEYREJECTED: not trusted; -EPROTO: no TLS there.
 */
static int
conn_tls(struct conn *c, const char *ca, const char *host)
{
	struct timeval tv = { .tv_sec = c->timeout_s };
	sigset_t pipe;
	int rc;

	/*
	 * OpenSSL writes to the socket without MSG_NOSIGNAL: a server gone
	 * would kill the calling program. SIGPIPE is held for the call and
	 * one raised meanwhile taken back (conn_close).
	 */
	sigemptyset(&pipe);
	sigaddset(&pipe, SIGPIPE);
	c->sigpipe = pthread_sigmask(SIG_BLOCK, &pipe, &c->oldmask) == 0;
	/* the handshake and the reads block: the socket's own timeouts bound them */
	setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	c->ctx = SSL_CTX_new(TLS_client_method());
	if (c->ctx == NULL)
		return -ENOMEM;
	SSL_CTX_set_min_proto_version(c->ctx, TLS1_2_VERSION);
	SSL_CTX_set_verify(c->ctx, SSL_VERIFY_PEER, NULL);
	/* ca NULL (an https:// address, no CA file set): the system's certificates */
	if ((ca != NULL ? SSL_CTX_load_verify_locations(c->ctx, ca, NULL)
			: SSL_CTX_set_default_verify_paths(c->ctx)) != 1)
		return -ENOENT;
	c->ssl = SSL_new(c->ctx);
	if (c->ssl == NULL)
		return -ENOMEM;
	if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(c->ssl), host) != 1 ||
	    SSL_set_fd(c->ssl, c->fd) != 1)
		return -EINVAL;
	rc = SSL_connect(c->ssl);
	if (rc != 1) {
		long v = SSL_get_verify_result(c->ssl);

		ERR_clear_error();
		return v != X509_V_OK ? -EKEYREJECTED : -EPROTO;
	}
	return 0;
}

static int
conn_send(struct conn *c, const char *b, size_t len)
{
	size_t off = 0;

	while (off < len) {
		ssize_t w;

		if (c->ssl != NULL) {
			int n = SSL_write(c->ssl, b + off, (int)(len - off));

			if (n <= 0) {
				ERR_clear_error();
				return -EIO;
			}
			w = n;
		} else {
			w = send(c->fd, b + off, len - off, MSG_NOSIGNAL);
			if (w < 0)
				return -errno;
		}
		off += (size_t)w;
	}
	return 0;
}

/* Bytes read (0: the other end closed) or -errno. */
static ssize_t
conn_recv(struct conn *c, char *b, size_t cap)
{
	int n, rc;

	if (c->ssl == NULL) {
		ssize_t r;

		rc = wait_fd(c->fd, POLLIN, c->timeout_s);
		if (rc < 0)
			return rc;
		r = recv(c->fd, b, cap, 0);
		return r < 0 ? -errno : r;
	}
	errno = 0;
	n = SSL_read(c->ssl, b, (int)(cap > INT32_MAX ? INT32_MAX : cap));
	if (n > 0)
		return n;
	rc = SSL_get_error(c->ssl, n);
	switch (rc) {
	case SSL_ERROR_ZERO_RETURN:
		c->clean = true;
		ERR_clear_error();
		return 0;
	case SSL_ERROR_SYSCALL:
		/* the socket's timeout, or the server gone (the length check says if early) */
		ERR_clear_error();
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return -ETIMEDOUT;
		return errno == 0 || errno == ECONNRESET ? 0 : -errno;
	case SSL_ERROR_SSL:
		/* OpenSSL 3: a close without close_notify after "Connection: close" */
		if (ERR_GET_REASON(ERR_peek_error()) == SSL_R_UNEXPECTED_EOF_WHILE_READING) {
			ERR_clear_error();
			return 0;
		}
		ERR_clear_error();
		return -EIO;
	default:
		ERR_clear_error();
		return -EIO;
	}
}

static void
conn_close(struct conn *c)
{
	if (c->ssl != NULL) {
		if (c->clean)
			SSL_shutdown(c->ssl); /* only after an exchange that ended well */
		SSL_free(c->ssl);
	}
	if (c->ctx != NULL)
		SSL_CTX_free(c->ctx);
	if (c->fd >= 0)
		close(c->fd);
	ERR_clear_error();
	if (c->sigpipe) {
		sigset_t pipe;
		struct timespec zero = { 0, 0 };

		sigemptyset(&pipe);
		sigaddset(&pipe, SIGPIPE);
		while (sigtimedwait(&pipe, NULL, &zero) > 0)
			; /* ours, raised while it was held */
		pthread_sigmask(SIG_SETMASK, &c->oldmask, NULL);
	}
}

/*
 * The reply's body must be as long as its Content-Length says (a
 * connection cut early is not a short answer). -EIO if shorter.
 */
static int
body_complete(const char *reply, const char *head_end, size_t blen)
{
	const char *p = reply;

	while (p < head_end) {
		const char *eol = strstr(p, "\r\n");

		if (eol == NULL || eol > head_end)
			break;
		if (strncasecmp(p, "Content-Length:", 15) == 0) {
			unsigned long long want = strtoull(p + 15, NULL, 10);

			return blen < want ? -EIO : 0;
		}
		p = eol + 2;
	}
	return 0;
}

int
sh_http_call(const char *addr, const char *token, const char *method, const char *path,
	     const char *body, char **body_out, int timeout_s)
{
	struct sockaddr_in sin;
	struct conn c = { .fd = -1, .timeout_s = timeout_s };
	size_t blen = body ? strlen(body) : 0, cap = 4096, len = 0;
	char *req = NULL, *buf = NULL, *p, auth[300] = "", host[64], *ca = NULL;
	bool https = strncmp(addr, "https://", 8) == 0;
	int rc, status = 0, n;

	*body_out = NULL;
	if (https)
		addr += 8;
	if (parse_addr(addr, &sin, host, sizeof(host)) < 0)
		return -EINVAL;
	if (token != NULL && *token != '\0') {
		/* a token with a line break in it would end the header: refused */
		if (strpbrk(token, "\r\n") != NULL || strlen(token) > 256)
			return -EINVAL;
		snprintf(auth, sizeof(auth), "Authorization: Bearer %s\r\n", token);
	}
	c.fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c.fd < 0)
		return -errno;
	if (connect(c.fd, (struct sockaddr *)&sin, sizeof(sin)) < 0) {
		rc = -errno;
		goto out;
	}
	ca = tls_ca_file();
	if (ca != NULL || https) {
		rc = conn_tls(&c, ca, host);
		if (rc < 0)
			goto out;
	}
	n = asprintf(&req,
		     "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n%s"
		     "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
		     method, path, addr, auth, blen, body ? body : "");
	if (n < 0) {
		rc = -ENOMEM;
		goto out;
	}
	rc = conn_send(&c, req, (size_t)n);
	if (rc < 0)
		goto out;
	buf = malloc(cap);
	if (buf == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	for (;;) {
		ssize_t r;

		if (len + 1 >= cap) {
			char *nb = realloc(buf, cap * 2);
			if (nb == NULL) {
				rc = -ENOMEM;
				goto out;
			}
			buf = nb;
			cap *= 2;
		}
		r = conn_recv(&c, buf + len, cap - len - 1);
		if (r < 0) {
			rc = (int)r;
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
	if (p == NULL || body_complete(buf, p, len - (size_t)(p + 4 - buf)) < 0) {
		rc = -EIO; /* cut off before its end */
		goto out;
	}
	*body_out = strdup(p + 4);
	rc = *body_out ? status : -ENOMEM;
out:
	free(ca);
	free(req);
	free(buf);
	conn_close(&c);
	return rc;
}
