// SPDX-License-Identifier: Apache-2.0
/*
 * shoal fs key: a file system's access keys made, listed and revoked over
 * the admin API (docs/cli.md "Access keys", docs/security.md "Clients'
 * keys"). A new key's text is written to a file of mode 0600 (--out), or
 * to standard output when it is not a terminal's: never on a command line.
 */
#include <errno.h>
#include <shoal/sh_errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../../base/access_key.h"
#include "../../base/secret.h"
#include "../../data/seal.h"
#include "shoal.h"

static const char key_usage[] =
    "usage: shoal fs key create FS --read-only|--read-write [--out FILE]\n"
    "       shoal fs key list FS [--json] | revoke FS ID\n"
    "  create FS   make an access key for filesystem FS: clients that hold it open FS\n"
    "              (and write it, with --read-write). Its text (sk1.ID.HEX) is shown\n"
    "              once: written to FILE (mode 0600) with --out, else to standard\n"
    "              output (redirect it: it is not shown on a terminal). Give it to a\n"
    "              client with --key-file FILE (shoal mount), $SHOAL_KEY_FILE or\n"
    "              $SHOAL_KEY, never on a command line.\n"
    "  list FS     FS's keys: id, access, created, revoked (never their text)\n"
    "  revoke FS ID  revoke a key: its clients are refused (EACCES) within seconds\n";

static void
show_keys(json_t *a)
{
	size_t i;
	json_t *k;

	printf("%-12s %-11s %-21s %s\n", "ID", "ACCESS", "CREATED", "REVOKED");
	json_array_foreach(a, i, k)
	{
		char when[32], rev[32] = "-";

		iso_time(jint(k, "created"), when, sizeof(when));
		if (json_is_true(json_object_get(k, "revoked")))
			iso_time(jint(k, "revoked_at"), rev, sizeof(rev));
		printf("%-12lld %-11s %-21s %s\n", jint(k, "id"), jstr(k, "access"), when, rev);
	}
}

static int
create(struct cli *c, const char *fs, const char *access, const char *out)
{
	char path[256];
	json_t *j;
	int rc;

	if (out == NULL && isatty(STDOUT_FILENO))
		usage_error("a key is not shown on a terminal: give --out FILE, or redirect "
			    "standard output to a file");
	snprintf(path, sizeof(path), "/v1/fs/%s/keys", fs);
	j = api_call(c, "POST", path, json_pack("{s:s}", "access", access));
	if (out != NULL) {
		rc = sh_secret_write_text(out, jstr(j, "key"));
		if (rc < 0)
			fail("key %lld was made, but cannot be written to %s: %s (revoke it: "
			     "shoal fs key revoke %s %lld)",
			     jint(j, "id"), out, strerror(-rc), fs, jint(j, "id"));
		if (c->json) {
			json_object_del(j, "key");
			print_json(j);
		} else {
			printf("access key %lld (%s) of filesystem %s written to %s\n",
			       jint(j, "id"), jstr(j, "access"), fs, out);
		}
	} else if (c->json) {
		print_json(j);
	} else {
		printf("%s\n", jstr(j, "key"));
	}
	json_decref(j);
	return 0;
}

int
cmd_key(struct cli *c, int argc, char **argv)
{
	const char *pos[3], *access = NULL, *out = NULL;
	char path[256];
	int n = 0;

	for (int i = 0; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0) {
			c->json = true;
		} else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			fputs(key_usage, stdout);
			return 0;
		} else if (strcmp(argv[i], "--read-only") == 0 ||
			   strcmp(argv[i], "--read-write") == 0) {
			if (access != NULL)
				usage_error("--read-only or --read-write, once");
			access = argv[i] + 2;
		} else if (strcmp(argv[i], "--out") == 0) {
			if (i + 1 >= argc)
				usage_error("--out needs a file");
			out = argv[++i];
		} else if (strncmp(argv[i], "--", 2) == 0) {
			usage_error("unknown option '%s'", argv[i]);
		} else if (n < 3) {
			pos[n++] = argv[i];
		} else {
			usage_error("unexpected argument '%s'", argv[i]);
		}
	}
	if (n == 0) {
		fputs(key_usage, stderr);
		return 2;
	}
	if (n >= 2 && !cfg_name_ok(pos[1]))
		usage_error("'%s' is not a filesystem name", pos[1]);
	if (strcmp(pos[0], "create") == 0) {
		if (n != 2 || access == NULL)
			usage_error("fs key create takes FS and --read-only or --read-write");
		return create(c, pos[1], access, out);
	}
	if (access != NULL || out != NULL)
		usage_error("--read-only, --read-write and --out go with 'fs key create'");
	if (strcmp(pos[0], "list") == 0 && n == 2) {
		json_t *j;

		snprintf(path, sizeof(path), "/v1/fs/%s/keys", pos[1]);
		j = api_get(c, path);
		if (c->json)
			print_json(j);
		else
			show_keys(j);
		json_decref(j);
		return 0;
	}
	if (strcmp(pos[0], "revoke") == 0 && n == 3) {
		char msg[160];

		snprintf(path, sizeof(path), "/v1/fs/%s/keys/%s", pos[1], pos[2]);
		api_change(c, "DELETE", path, NULL);
		if (c->json) {
			print_json(json_pack("{s:b}", "ok", 1));
		} else {
			snprintf(msg, sizeof(msg), "access key %s of filesystem %s revoked", pos[2],
				 pos[1]);
			puts(msg);
		}
		return 0;
	}
	fputs(key_usage, stderr);
	return 2;
}

/* The file system key in path (what: the option that named it), or a new one made there. */
static void
kek_load_or_make(const char *what, const char *path, uint8_t kek[SEAL_KEY_LEN])
{
	char text[SEAL_KEK_TEXT];
	int rc = access(path, F_OK) == 0 ? seal_kek_find(path, kek) : -ENOENT;

	if (rc == -ENOENT) {
		/* a new key: 32 random bytes, written before anything depends on it */
		rc = sh_secret_random(kek);
		if (rc == 0) {
			seal_kek_format(kek, text);
			rc = sh_secret_write_text(path, text);
			explicit_bzero(text, sizeof(text));
		}
		if (rc == 0)
			fprintf(stderr,
				"made a file system key in %s (mode 0600): keep it and a copy "
				"of it; without it nothing of the file system can be read\n",
				path);
	}
	if (rc < 0)
		fail("%s %s: %s", what, path,
		     rc == -EINVAL  ? "not a file system key (sek1. and 64 hex digits)"
		     : rc == -EPERM ? "others may read it (chmod 600 it)"
				    : sh_strerror(rc));
}

/*
 * shoal fs create --encrypt KEYFILE (docs/security.md, "Encrypted file
 * systems"): the file system's master key is made here, wrapped by the key
 * in KEYFILE (made there, mode 0600, when the file does not exist), and only
 * the wrapped bytes go to the cluster: no node ever holds a key that opens
 * the file system's blocks.
 */
void
fs_encrypt_body(json_t *body, const char *path)
{
	uint8_t kek[SEAL_KEY_LEN], master[SEAL_KEY_LEN], wrapped[SEAL_WRAPPED_LEN];
	char hex[2 * SEAL_WRAPPED_LEN + 1];
	int rc;

	kek_load_or_make("--encrypt", path, kek);
	rc = sh_secret_random(master);
	if (rc == 0)
		rc = seal_wrap(kek, master, wrapped);
	explicit_bzero(kek, sizeof(kek));
	explicit_bzero(master, sizeof(master));
	if (rc < 0)
		fail("--encrypt: making the file system's key: %s", sh_strerror(rc));
	sh_hex(wrapped, sizeof(wrapped), hex);
	json_object_set_new(body, "encrypted", json_true());
	json_object_set_new(body, "wrapped_key", json_string(hex));
}

/*
 * shoal fs rekey FS --old KEYFILE --new KEYFILE (docs/security.md,
 * "Rotation"): FS's master key, read wrapped from the cluster, unwrapped
 * here with the old key and wrapped with the new one (made if the file is
 * not there); the cluster takes the new wrapping only over the one read.
 * The data is not rewritten: clients open FS with the new key from then
 * on, and the old one no longer opens it.
 */
int
fs_rekey(const struct cli *c, const char *fs, const char *old_path, const char *new_path)
{
	uint8_t okek[SEAL_KEY_LEN], nkek[SEAL_KEY_LEN], master[SEAL_KEY_LEN], check[SEAL_KEY_LEN];
	uint8_t cur[SEAL_WRAPPED_LEN], next[SEAL_WRAPPED_LEN];
	char path[CFG_NAME_MAX + 32], hex[2 * SEAL_WRAPPED_LEN + 1], msg[CFG_NAME_MAX + 160];
	json_t *j, *body;
	int rc;

	snprintf(path, sizeof(path), "/v1/fs/%s/keys/wrapped", fs);
	j = api_get(c, path);
	if (!sh_unhex(jstr(j, "wrapped_key"), cur, sizeof(cur)))
		fail("the cluster's wrapped key of %s is not 128 hex digits", fs);
	json_decref(j);
	rc = seal_kek_find(old_path, okek);
	if (rc < 0)
		fail("--old %s: %s", old_path,
		     rc == -EINVAL  ? "not a file system key (sek1. and 64 hex digits)"
		     : rc == -EPERM ? "others may read it (chmod 600 it)"
				    : sh_strerror(rc));
	rc = seal_unwrap(okek, cur, master);
	explicit_bzero(okek, sizeof(okek));
	if (rc < 0)
		fail("--old %s: %s", old_path,
		     rc == -EACCES ? "this key does not open the file system" : sh_strerror(rc));
	kek_load_or_make("--new", new_path, nkek);
	rc = seal_wrap(nkek, master, next);
	/* what the cluster is sent opens with the new key to the same master key */
	if (rc == 0 && (rc = seal_unwrap(nkek, next, check)) == 0 &&
	    memcmp(check, master, SEAL_KEY_LEN) != 0)
		rc = -EIO;
	explicit_bzero(nkek, sizeof(nkek));
	explicit_bzero(master, sizeof(master));
	explicit_bzero(check, sizeof(check));
	if (rc < 0)
		fail("wrapping the key anew: %s", sh_strerror(rc));
	sh_hex(next, sizeof(next), hex);
	body = json_pack("{s:s}", "wrapped_key", hex);
	sh_hex(cur, sizeof(cur), hex);
	json_object_set_new(body, "replaces", json_string(hex));
	api_change(c, "PUT", path, body);
	snprintf(msg, sizeof(msg),
		 "filesystem %s: its key is now the one in %s (the old one no longer opens it)", fs,
		 new_path);
	if (c->json)
		print_json(json_pack("{s:b}", "ok", 1));
	else
		puts(msg);
	return 0;
}
