/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The C half of the Python package (docs/python.md): the two handle types
 * the Python layer wraps, shared by _shoal.c (the module, the file system
 * and file types) and batch.c (read_many).
 *
 * Fork: libshoal runs threads, and a forked child has none of them. A
 * child therefore never touches a handle it inherited: pthread_atfork
 * bumps sh_py_gen in the child, and every call first checks its handle's
 * generation. A file system handle from an older generation is abandoned
 * (neither used nor freed: its memory is the parent's copy) and connected
 * again with the address and name it was opened with; a file handle is
 * opened again by its path, with the flags it was opened with less
 * O_CREAT, O_EXCL and O_TRUNC. So DataLoader workers forked from a
 * process that has a Shoal file system open just work.
 */
#ifndef SH_PY_SHOAL_H
#define SH_PY_SHOAL_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <shoal/client.h>
#include <stdbool.h>

extern unsigned long sh_py_gen;

/*
 * Lifetimes (all fields under the GIL): a call takes its handle with
 * sh_py_fs / sh_py_file, which count it busy, and gives it back with
 * sh_py_fs_done / sh_py_file_done once its GIL-free part has ended. A
 * close while calls run (or, for a file system, while files are open)
 * marks the object closing; the last of them closes it for real. So no
 * thread ever uses a handle another has freed.
 */
typedef struct {
	PyObject ob_base; /* PyObject_HEAD */
	sh_client *c;
	sh_fs *fs;
	char *addr, *name;
	char *key_file; /* NULL: $SHOAL_KEY, $SHOAL_KEY_FILE (docs/security.md) */
	struct sh_client_opts opts;
	unsigned long gen;
	unsigned busy;	 /* calls running on it */
	unsigned nfiles; /* its files not yet closed */
	bool closing;
	bool connecting; /* a thread connects it again (after a fork) */
} ShFS;

typedef struct {
	PyObject ob_base; /* PyObject_HEAD */
	ShFS *fs;	  /* a reference */
	sh_file *f;
	char *path;
	int flags;
	unsigned long gen;
	unsigned busy; /* calls running on it */
	bool closing;
	bool counted;	/* in fs->nfiles */
	bool reopening; /* a thread opens it again (after a fork) */
} ShFile;

extern PyTypeObject ShFS_Type, ShFile_Type;

/* Raise the OSError (its errno subclass) for rc < 0; path may be NULL. Returns NULL. */
PyObject *sh_py_err(long rc, PyObject *path);
/* The file system usable in this process (connected again after a fork), or NULL raised. */
sh_fs *sh_py_fs(ShFS *self);
void sh_py_fs_done(ShFS *self);
/* The file usable in this process (opened again after a fork), or NULL raised. */
sh_file *sh_py_file(ShFile *self);
void sh_py_file_done(ShFile *self);
/* fs.read_many(requests): batch.c */
PyObject *sh_py_read_many(ShFS *self, PyObject *args);
/* fs.diff(from or None, to): snap.c */
PyObject *sh_py_diff(ShFS *self, PyObject *args);

#endif /* SH_PY_SHOAL_H */
