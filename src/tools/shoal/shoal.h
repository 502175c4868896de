/* SPDX-License-Identifier: Apache-2.0 */
/* The shoal command line (docs/cli.md): admin commands over the HTTP API, and `shoal local`. */
#ifndef SH_TOOLS_SHOAL_H
#define SH_TOOLS_SHOAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "../../base/http.h"
#include "../../base/secret.h"
#include "../../cluster/config.h"

#define SHOAL_DEFAULT_ADDR "127.0.0.1:7400"

struct cli {
	const char *addr; /* the admin API of a node: ip:port */
	bool json;
};

/*
 * The admin API's token (docs/security.md): $SHOAL_TOKEN, else the file
 * $SHOAL_TOKEN_FILE names, else, for a loopback address only,
 * ./run/admin.token or ./run/local/admin.token (the local cluster of
 * `shoal local up` or of `make run`), else none (NULL). Read once; exits 2
 * on a malformed one.
 */
const char *cli_token(const char *addr);

/* Exit helpers: print "shoal: reason" and exit 2 (usage) or 1 (failure). */
_Noreturn void usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
_Noreturn void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* GET path from cli->addr as JSON; exits 1 with the server's reason on error. */
json_t *api_get(const struct cli *c, const char *path);
/* POST/PUT/DELETE; exits 1 with the server's reason on error (any 2xx is success). */
void api_change(const struct cli *c, const char *method, const char *path, json_t *body);
/* The same, not exiting: the HTTP status, the server's reason in reason unless 2xx. */
int api_try(const struct cli *c, const char *method, const char *path, json_t *body, char *reason,
	    size_t len);
/* method path with body (taken; NULL: none): the JSON answer; exits 1 with the reason unless 2xx.
 */
json_t *api_call(const struct cli *c, const char *method, const char *path, json_t *body);
/* Member k of a JSON object: a string ("" if none), an integer (0 if none). */
const char *jstr(json_t *o, const char *k);
long long jint(json_t *o, const char *k);

int cmd_local(struct cli *c, int argc, char **argv);
int cmd_ns(struct cli *c, int argc, char **argv);
int cmd_mount(struct cli *c, int argc, char **argv);
int cmd_umount(struct cli *c, int argc, char **argv);
int cmd_stats(struct cli *c, int argc, char **argv);
/* snap.c: shoal fs snapshot create|list|delete|schedule (argv from after "snapshot") */
int cmd_snapshot(struct cli *c, int argc, char **argv);
int cmd_restore(struct cli *c, int argc, char **argv);
int cmd_clone(struct cli *c, int argc, char **argv);
/* snap_diff.c: shoal fs snapshot diff FS FROM TO (FROM "-": the empty filesystem) */
int snap_diff(const struct cli *c, const char *fs, const char *from, const char *to);
/* Seconds since the epoch as "2024-05-01T12:00:00Z" (UTC) into buf; buf. */
const char *iso_time(long long secs, char *buf, size_t len);
/* key.c: shoal fs key create|list|revoke (argv from after "key") */
int cmd_key(struct cli *c, int argc, char **argv);
/* The body of a filesystem create: encrypted, its key wrapped by the key in path (made if none). */
void fs_encrypt_body(json_t *body, const char *path);
/* shoal fs rekey FS --old KEYFILE --new KEYFILE: FS's master key wrapped under a new key. */
int fs_rekey(const struct cli *c, const char *fs, const char *old_path, const char *new_path);
/* heal.c: shoal rebuild status; the line of `shoal status` that says how protected data is. */
int cmd_rebuild(struct cli *c, int argc, char **argv);
void rebuild_status_line(const struct cli *c);
/* shoal drive remove: drain the drive (its fragments copied off), then remove it. */
int drive_remove(const struct cli *c, unsigned long long id);
/*
 * shoal node remove: a node up has its drives drained and its metadata
 * replicas moved to other nodes first; then it is removed.
 */
int node_remove(const struct cli *c, unsigned long long id);
/* net.c: shoal cluster processes (every node asked). */
int cmd_processes(const struct cli *c);
/* "1.5 GiB" */
void human_size(long long b, char *buf, size_t len);
void print_json(json_t *j);

/* Seconds on the monotonic clock (for durations). */
double now_s(void);

/* "2G", "512M", "1048576" -> bytes; -1 if malformed. */
long long parse_size(const char *s);

#endif /* SH_TOOLS_SHOAL_H */
