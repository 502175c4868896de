// SPDX-License-Identifier: Apache-2.0
/*
 * fs.diff(from, to): what changed between two snapshots (sh_fs_diff,
 * docs/snapshots.md "What changed between two snapshots"). The records
 * are gathered without the GIL into one buffer, then made Python tuples.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "_shoal.h"

/* The records as they came: a growable buffer of (record, key, old, new) copies. */
struct gathered {
	uint8_t *b;
	size_t len, cap;
	size_t n;
};

struct rec {
	char kind;
	uint16_t bucket;
	uint64_t ino, off;
	size_t name_off, name_len, klen, olen, nlen; /* name: into the key */
	bool has_old, has_new;
};

static int
put(struct gathered *g, const void *p, size_t n)
{
	if (g->len + n > g->cap) {
		size_t cap = g->cap ? g->cap : 1 << 16;
		uint8_t *b;

		while (cap < g->len + n)
			cap *= 2;
		b = realloc(g->b, cap);
		if (b == NULL)
			return -ENOMEM;
		g->b = b;
		g->cap = cap;
	}
	if (n > 0)
		memcpy(g->b + g->len, p, n);
	g->len += n;
	return 0;
}

static int
on_diff(void *arg, const struct sh_diff *d)
{
	struct gathered *g = arg;
	struct rec r = { .kind = d->kind,
			 .bucket = d->bucket,
			 .ino = d->ino,
			 .off = d->off,
			 .name_off = d->name ? (size_t)((const uint8_t *)d->name - d->key) : 0,
			 .name_len = d->name_len,
			 .klen = d->key_len,
			 .olen = d->old_len,
			 .nlen = d->new_len,
			 .has_old = d->old != NULL,
			 .has_new = d->new != NULL };
	int rc = put(g, &r, sizeof(r));

	if (rc == 0)
		rc = put(g, d->key, d->key_len);
	if (rc == 0 && d->old != NULL)
		rc = put(g, d->old, d->old_len);
	if (rc == 0 && d->new != NULL)
		rc = put(g, d->new, d->new_len);
	g->n++;
	return rc;
}

/* One record as (op, kind, bucket, ino, name, off, old, new); NULL raised. */
static PyObject *
record(const uint8_t **p)
{
	struct rec r;
	const uint8_t *key;
	PyObject *name, *old, *new;

	memcpy(&r, *p, sizeof(r));
	key = *p + sizeof(r);
	*p = key + r.klen;
	name = r.name_len ? PyBytes_FromStringAndSize((const char *)key + r.name_off,
						      (Py_ssize_t)r.name_len)
			  : (Py_INCREF(Py_None), Py_None);
	old = r.has_old ? PyBytes_FromStringAndSize((const char *)*p, (Py_ssize_t)r.olen)
			: (Py_INCREF(Py_None), Py_None);
	*p += r.has_old ? r.olen : 0;
	new = r.has_new ? PyBytes_FromStringAndSize((const char *)*p, (Py_ssize_t)r.nlen)
			: (Py_INCREF(Py_None), Py_None);
	*p += r.has_new ? r.nlen : 0;
	if (name == NULL || old == NULL || new == NULL) {
		Py_XDECREF(name);
		Py_XDECREF(old);
		Py_XDECREF(new);
		return NULL;
	}
	return Py_BuildValue("(sCiKNKNN)",
			     !r.has_old	  ? "+"
			     : !r.has_new ? "-"
					  : "~",
			     (int)r.kind, (int)r.bucket, (unsigned long long)r.ino, name,
			     (unsigned long long)r.off, old, new);
}

PyObject *
sh_py_diff(ShFS *self, PyObject *args)
{
	const char *from, *to;
	struct gathered g = { 0 };
	PyObject *list = NULL;
	const uint8_t *p;
	sh_fs *fs;
	int rc;

	if (!PyArg_ParseTuple(args, "zs", &from, &to))
		return NULL;
	fs = sh_py_fs(self);
	if (fs == NULL)
		return NULL;
	Py_BEGIN_ALLOW_THREADS
		rc = sh_fs_diff(fs, from, to, on_diff, &g);
	Py_END_ALLOW_THREADS
	sh_py_fs_done(self);
	if (rc < 0) {
		free(g.b);
		return sh_py_err(rc, NULL);
	}
	list = PyList_New((Py_ssize_t)g.n);
	p = g.b;
	for (size_t i = 0; list != NULL && i < g.n; i++) {
		PyObject *t = record(&p);

		if (t == NULL) {
			Py_CLEAR(list);
			break;
		}
		PyList_SET_ITEM(list, (Py_ssize_t)i, t);
	}
	free(g.b);
	return list;
}
