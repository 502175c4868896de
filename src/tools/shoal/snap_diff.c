// SPDX-License-Identifier: Apache-2.0
/*
 * shoal fs snapshot diff FS FROM TO: what changed in FS between two of its
 * snapshots, record by record, through libshoal's sh_fs_diff (docs/cli.md
 * "Snapshots", docs/snapshots.md "What changed between two snapshots").
 */
#include <shoal/client.h>
#include <shoal/sh_errno.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../meta/meta_rec.h"
#include "shoal.h"

struct tally {
	const struct cli *c;
	unsigned long long added, removed, changed;
};

static const char *
kind_name(char k)
{
	switch (k) {
	case META_K_INODE:
		return "inode";
	case META_K_DENTRY:
		return "entry";
	case META_K_XATTR:
		return "xattr";
	case META_K_EXTENT:
		return "extent";
	case META_K_SYMLINK:
		return "symlink";
	case META_K_INLINE:
		return "inline";
	case META_K_PARENT:
		return "parent";
	case META_K_GRANT:
		return "lease";
	default:
		return "other";
	}
}

/* What a record says, as text: an entry's inode, an inode's type and size; "" otherwise. */
static void
describe(char kind, const void *v, size_t len, char *buf, size_t cap)
{
	struct meta_dentry d;
	struct meta_inode in;

	buf[0] = '\0';
	if (v == NULL)
		return;
	if (kind == META_K_DENTRY && meta_dentry_decode(v, len, &d) == 0)
		snprintf(buf, cap, "ino %llu", (unsigned long long)d.ino);
	else if (kind == META_K_INODE && meta_inode_decode(v, len, &in) == 0)
		snprintf(buf, cap, "type %u nlink %u size %llu", in.type, in.nlink,
			 (unsigned long long)in.size);
	else
		snprintf(buf, cap, "%zu bytes", len);
}

/*
 * A name for a line of text: its bytes as they are (UTF-8 shows as it is),
 * but quotes, backslashes and control bytes as \xNN.
 */
static void
text_name(const char *n, size_t len, char *out, size_t cap)
{
	size_t o = 0;

	for (size_t i = 0; i < len && o + 5 < cap; i++) {
		unsigned char ch = (unsigned char)n[i];

		if (ch < 0x20 || ch == 0x7f || ch == '"' || ch == '\\')
			o += (size_t)snprintf(out + o, cap - o, "\\x%02x", ch);
		else
			out[o++] = (char)ch;
	}
	out[o] = '\0';
}

static int
on_change(void *arg, const struct sh_diff *d)
{
	struct tally *t = arg;
	char op = d->old == NULL ? '+' : d->new == NULL ? '-' : '~';
	char name[4 * 255 + 1], was[96], is[96];

	t->added += op == '+';
	t->removed += op == '-';
	t->changed += op == '~';
	describe(d->kind, d->old, d->old_len, was, sizeof(was));
	describe(d->kind, d->new, d->new_len, is, sizeof(is));
	if (t->c->json) {
		/* a name that is not UTF-8 goes as name_hex: JSON strings are text */
		char ops[2] = { op, '\0' };
		json_t *o =
		    json_pack("{s:s, s:s, s:i, s:I, s:I, s:s, s:s}", "op", ops, "kind",
			      kind_name(d->kind), "bucket", (int)d->bucket, "ino",
			      (json_int_t)d->ino, "off", (json_int_t)d->off, "old", was, "new", is);
		json_t *nm = d->name_len ? json_stringn(d->name, d->name_len) : json_string("");
		char *line;

		if (o == NULL) {
			json_decref(nm);
			return -ENOMEM;
		}
		if (nm != NULL) {
			json_object_set_new(o, "name", nm);
		} else {
			char hex[2 * 255 + 1];

			sh_hex((const uint8_t *)d->name, d->name_len < 255 ? d->name_len : 255,
			       hex);
			json_object_set_new(o, "name_hex", json_string(hex));
		}
		line = json_dumps(o, JSON_COMPACT);
		json_decref(o);
		if (line == NULL)
			return -ENOMEM;
		puts(line);
		free(line);
		return 0;
	}
	text_name(d->name ? d->name : "", d->name_len, name, sizeof(name));
	if (d->kind == META_K_EXTENT)
		printf("%c %-7s ino %llu off %llu%s%s%s%s\n", op, kind_name(d->kind),
		       (unsigned long long)d->ino, (unsigned long long)d->off, was[0] ? ": " : "",
		       was, op == '~' ? " -> " : (op == '+' ? ": " : ""), is);
	else
		printf("%c %-7s ino %llu%s%s%s%s%s%s%s\n", op, kind_name(d->kind),
		       (unsigned long long)d->ino, d->name_len ? " name \"" : "", name,
		       d->name_len ? "\"" : "", was[0] ? ": " : "", was,
		       op == '~' ? " -> " : (op == '+' ? ": " : ""), is);
	return 0;
}

int
snap_diff(const struct cli *c, const char *fsname, const char *from, const char *to)
{
	struct tally t = { .c = c };
	sh_client *cl;
	sh_fs *fs;
	int rc = sh_client_connect(c->addr, NULL, &cl);

	if (rc < 0)
		fail("connect to %s: %s", c->addr, sh_strerror(rc));
	rc = sh_fs_open(cl, fsname, &fs);
	if (rc < 0)
		fail("open filesystem %s: %s", fsname, sh_strerror(rc));
	rc = sh_fs_diff(fs, strcmp(from, "-") == 0 ? NULL : from, to, on_change, &t);
	sh_fs_close(fs);
	sh_client_close(cl);
	if (rc < 0)
		fail("diff of %s from %s to %s: %s (%s)", fsname, from, to, sh_strerror(rc),
		     sh_errname(rc));
	if (c->json)
		printf("{\"added\":%llu,\"removed\":%llu,\"changed\":%llu}\n", t.added, t.removed,
		       t.changed);
	else
		printf("%llu records added, %llu removed, %llu changed from %s to %s\n", t.added,
		       t.removed, t.changed, strcmp(from, "-") == 0 ? "nothing" : from, to);
	return 0;
}
