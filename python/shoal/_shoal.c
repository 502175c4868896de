// SPDX-License-Identifier: Apache-2.0
/*
 * shoal._shoal: libshoal for Python (docs/python.md). Two types: FS (a
 * connected client with one file system open) and File (an open file).
 * Every call that may wait on the network runs with the GIL released, so
 * Python threads read and write in parallel; buffers come in and go out
 * through the buffer protocol, so readinto lands bytes in the caller's
 * memory (a bytearray, a numpy array, a tensor's storage) without a copy.
 * Errors raise OSError with the errno (Python picks the subclass:
 * FileNotFoundError for ENOENT, ...). The Python layer (__init__.py)
 * builds file objects, os.stat_result and the os-like API on these.
 */
#include "_shoal.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <shoal/sh_errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

unsigned long sh_py_gen = 1;

static void
forked_child(void)
{
	sh_py_gen++;
}

PyObject *
sh_py_err(long rc, PyObject *path)
{
	int e = (int)-rc;

	if (rc <= -SH_ERR_BASE) {
		/* Shoal's own conditions are errors of the cluster, not of the call */
		PyErr_Format(PyExc_OSError, "%s (%s)", sh_strerror((int)rc), sh_errname((int)rc));
		return NULL;
	}
	if (path != NULL) {
		/* the name as os gives it: a str (what the Python layer passes in) */
		PyObject *name = PyBytes_Check(path)
				     ? PyUnicode_DecodeFSDefaultAndSize(PyBytes_AS_STRING(path),
									PyBytes_GET_SIZE(path))
				     : (Py_INCREF(path), path);
		PyObject *a = name ? Py_BuildValue("(isO)", e, strerror(e), name) : NULL;

		if (a != NULL) {
			PyErr_SetObject(PyExc_OSError, a);
			Py_DECREF(a);
		}
		Py_XDECREF(name);
		return NULL;
	}
	errno = e;
	return PyErr_SetFromErrno(PyExc_OSError);
}

/* ---- the file system ---- */

static int
connect_fs(ShFS *self)
{
	sh_client *c = NULL;
	sh_fs *fs = NULL;
	int rc;

	Py_BEGIN_ALLOW_THREADS
		rc = sh_client_connect(self->addr, &self->opts, &c);
		if (rc == 0) {
			rc = sh_fs_open(c, self->name, &fs);
			if (rc < 0)
				sh_client_close(c);
		}
	Py_END_ALLOW_THREADS
	if (rc < 0) {
		if (rc == -ENOENT)
			PyErr_Format(PyExc_FileNotFoundError,
				     "[Errno %d] no file system named '%s' on the cluster at %s",
				     ENOENT, self->name, self->addr);
		else if (rc == -EACCES)
			PyErr_Format(
			    PyExc_PermissionError,
			    "[Errno %d] the cluster at %s refuses file system '%s' to this "
			    "client: it needs a key of that file system (key_file, "
			    "$SHOAL_KEY_FILE or $SHOAL_KEY), not revoked; an encrypted one "
			    "also its file system key ($SHOAL_FS_KEY_FILE or $SHOAL_FS_KEY)",
			    EACCES, self->addr, self->name);
		else
			sh_py_err(rc, NULL);
		return -1;
	}
	self->c = c;
	self->fs = fs;
	self->gen = sh_py_gen;
	return 0;
}

/* Another thread is connecting (or opening) this handle again: wait for it, GIL let go. */
static void
wait_other(const bool *busy)
{
	while (*busy) {
		Py_BEGIN_ALLOW_THREADS
			usleep(1000);
		Py_END_ALLOW_THREADS
	}
}

sh_fs *
sh_py_fs(ShFS *self)
{
	wait_other(&self->connecting);
	if (self->closing || self->addr == NULL) {
		PyErr_SetString(PyExc_ValueError, "the file system is closed");
		return NULL;
	}
	if (self->gen != sh_py_gen) {
		/* inherited over a fork: the parent's threads are not here, leave it be */
		int rc;

		self->c = NULL;
		self->fs = NULL;
		self->busy = 0; /* calls of the parent's threads, which the child has not */
		self->connecting = true;
		rc = connect_fs(self);
		self->connecting = false;
		if (rc < 0)
			return NULL;
	}
	self->busy++;
	return self->fs;
}

/* Close for real once closed and neither a call nor an open file uses it (GIL held). */
static void
fs_maybe_release(ShFS *self)
{
	sh_fs *fs = self->fs;
	sh_client *c = self->c;

	if (!self->closing || self->busy > 0 || self->nfiles > 0 || c == NULL)
		return;
	self->fs = NULL;
	self->c = NULL;
	if (self->gen != sh_py_gen)
		return; /* the parent's: not ours to free */
	Py_BEGIN_ALLOW_THREADS
		sh_fs_close(fs);
		sh_client_close(c);
	Py_END_ALLOW_THREADS
}

void
sh_py_fs_done(ShFS *self)
{
	if (self->busy > 0)
		self->busy--;
	fs_maybe_release(self);
}

static int
ShFS_init(ShFS *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "addr", "name", "timeout_ms", "frag_kb", "key_file", NULL };
	const char *addr, *name, *key_file = NULL;
	unsigned timeout_ms = 0, frag_kb = 0;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "ss|IIz", kwlist, &addr, &name, &timeout_ms,
					 &frag_kb, &key_file))
		return -1;
	if (self->addr != NULL) {
		PyErr_SetString(PyExc_RuntimeError, "FS is initialized already");
		return -1;
	}
	self->addr = strdup(addr);
	self->name = strdup(name);
	self->key_file = key_file ? strdup(key_file) : NULL;
	if (self->addr == NULL || self->name == NULL || (key_file && self->key_file == NULL)) {
		PyErr_NoMemory();
		goto err;
	}
	self->opts = (struct sh_client_opts){ .timeout_ms = timeout_ms,
					      .frag_kb = frag_kb,
					      .key_file = self->key_file };
	if (connect_fs(self) < 0)
		goto err;
	return 0;
err:
	free(self->addr);
	free(self->name);
	free(self->key_file);
	self->addr = self->name = self->key_file = NULL;
	return -1;
}

static void
ShFS_dealloc(ShFS *self)
{
	/* no call runs and no file is open: each holds a reference */
	self->closing = true;
	fs_maybe_release(self);
	free(self->addr);
	free(self->name);
	free(self->key_file);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Closed now, or when the last call on it ends and its last open file is closed. */
static PyObject *
ShFS_close(ShFS *self, PyObject *unused)
{
	(void)unused;
	self->closing = true;
	fs_maybe_release(self);
	Py_RETURN_NONE;
}

static PyObject *
stat_tuple(const struct stat *st)
{
	return Py_BuildValue(
	    "(IKKKIIKLLLlLK)", (unsigned)st->st_mode, (unsigned long long)st->st_ino,
	    (unsigned long long)st->st_dev, (unsigned long long)st->st_nlink, (unsigned)st->st_uid,
	    (unsigned)st->st_gid, (unsigned long long)st->st_size,
	    (long long)st->st_atim.tv_sec * 1000000000LL + st->st_atim.tv_nsec,
	    (long long)st->st_mtim.tv_sec * 1000000000LL + st->st_mtim.tv_nsec,
	    (long long)st->st_ctim.tv_sec * 1000000000LL + st->st_ctim.tv_nsec,
	    (long)st->st_blksize, (long long)st->st_blocks, (unsigned long long)st->st_rdev);
}

/* A path argument: str or bytes (os.fspath-like), as a bytes object to DECREF. */
#define PATH(p) PyUnicode_FSConverter, &(p)

static PyObject *
ShFS_stat(ShFS *self, PyObject *args)
{
	PyObject *p;
	int follow = 1, rc;
	struct stat st;
	sh_fs *fs;

	if (!PyArg_ParseTuple(args, "O&|p", PATH(p), &follow))
		return NULL;
	fs = sh_py_fs(self);
	if (fs == NULL)
		goto err;
	Py_BEGIN_ALLOW_THREADS
		rc = follow ? sh_stat(fs, PyBytes_AS_STRING(p), &st)
			    : sh_lstat(fs, PyBytes_AS_STRING(p), &st);
	Py_END_ALLOW_THREADS
	sh_py_fs_done(self);
	if (rc < 0) {
		sh_py_err(rc, p);
		goto err;
	}
	Py_DECREF(p);
	return stat_tuple(&st);
err:
	Py_DECREF(p);
	return NULL;
}

/* The calls that take one path and an integer and return nothing. */
enum path_op { OP_MKDIR, OP_UNLINK, OP_RMDIR, OP_CHMOD, OP_MKNOD };

static PyObject *
path_call(ShFS *self, PyObject *args, const char *fmt, enum path_op op, unsigned long long arg)
{
	PyObject *p;
	long rc;
	sh_fs *fs;

	if (!PyArg_ParseTuple(args, fmt, PATH(p), &arg))
		return NULL;
	fs = sh_py_fs(self);
	if (fs == NULL) {
		Py_DECREF(p);
		return NULL;
	}
	Py_BEGIN_ALLOW_THREADS
		switch (op) {
		case OP_MKDIR:
			rc = sh_mkdir(fs, PyBytes_AS_STRING(p), (mode_t)arg);
			break;
		case OP_UNLINK:
			rc = sh_unlink(fs, PyBytes_AS_STRING(p));
			break;
		case OP_RMDIR:
			rc = sh_rmdir(fs, PyBytes_AS_STRING(p));
			break;
		case OP_CHMOD:
			rc = sh_chmod(fs, PyBytes_AS_STRING(p), (mode_t)arg);
			break;
		default:
			rc = sh_mknod(fs, PyBytes_AS_STRING(p), (mode_t)arg, 0);
		}
	Py_END_ALLOW_THREADS
	sh_py_fs_done(self);
	if (rc < 0) {
		sh_py_err(rc, p);
		Py_DECREF(p);
		return NULL;
	}
	Py_DECREF(p);
	Py_RETURN_NONE;
}

static PyObject *
ShFS_mkdir(ShFS *self, PyObject *args)
{
	return path_call(self, args, "O&|K", OP_MKDIR, 0777);
}

static PyObject *
ShFS_mknod(ShFS *self, PyObject *args)
{
	return path_call(self, args, "O&|K", OP_MKNOD, S_IFREG | 0666);
}

static PyObject *
ShFS_unlink(ShFS *self, PyObject *args)
{
	return path_call(self, args, "O&", OP_UNLINK, 0);
}

static PyObject *
ShFS_rmdir(ShFS *self, PyObject *args)
{
	return path_call(self, args, "O&", OP_RMDIR, 0);
}

static PyObject *
ShFS_chmod(ShFS *self, PyObject *args)
{
	return path_call(self, args, "O&K", OP_CHMOD, 0);
}

/* The calls of two paths. */
enum two_op { OP_RENAME, OP_LINK, OP_SYMLINK };

static PyObject *
two_call(ShFS *self, PyObject *args, enum two_op op)
{
	PyObject *a, *b;
	unsigned flags = 0;
	int rc;
	sh_fs *fs;

	if (!PyArg_ParseTuple(args, "O&O&|I", PATH(a), PATH(b), &flags))
		return NULL;
	fs = sh_py_fs(self);
	if (fs == NULL) {
		rc = 0;
		goto out;
	}
	Py_BEGIN_ALLOW_THREADS
		if (op == OP_RENAME)
			rc = sh_rename(fs, PyBytes_AS_STRING(a), PyBytes_AS_STRING(b), flags);
		else if (op == OP_LINK)
			rc = sh_link(fs, PyBytes_AS_STRING(a), PyBytes_AS_STRING(b));
		else
			rc = sh_symlink(fs, PyBytes_AS_STRING(a), PyBytes_AS_STRING(b));
	Py_END_ALLOW_THREADS
	sh_py_fs_done(self);
	if (rc < 0)
		sh_py_err(rc, op == OP_SYMLINK ? b : a);
out:
	Py_DECREF(a);
	Py_DECREF(b);
	if (PyErr_Occurred())
		return NULL;
	Py_RETURN_NONE;
}

static PyObject *
ShFS_rename(ShFS *self, PyObject *args)
{
	return two_call(self, args, OP_RENAME);
}

static PyObject *
ShFS_link(ShFS *self, PyObject *args)
{
	return two_call(self, args, OP_LINK);
}

static PyObject *
ShFS_symlink(ShFS *self, PyObject *args)
{
	return two_call(self, args, OP_SYMLINK);
}

static PyObject *
ShFS_readlink(ShFS *self, PyObject *args)
{
	PyObject *p, *r = NULL;
	char buf[4096];
	long n;
	sh_fs *fs;

	if (!PyArg_ParseTuple(args, "O&", PATH(p)))
		return NULL;
	fs = sh_py_fs(self);
	if (fs != NULL) {
		Py_BEGIN_ALLOW_THREADS
			n = sh_readlink(fs, PyBytes_AS_STRING(p), buf, sizeof(buf));
		Py_END_ALLOW_THREADS
		sh_py_fs_done(self);
		r = n < 0 ? sh_py_err(n, p) : PyBytes_FromStringAndSize(buf, n);
	}
	Py_DECREF(p);
	return r;
}

static PyObject *
ShFS_chown(ShFS *self, PyObject *args)
{
	PyObject *p;
	int uid, gid, rc = 0;
	sh_fs *fs;

	if (!PyArg_ParseTuple(args, "O&ii", PATH(p), &uid, &gid))
		return NULL;
	fs = sh_py_fs(self);
	if (fs != NULL) {
		Py_BEGIN_ALLOW_THREADS
			rc = sh_chown(fs, PyBytes_AS_STRING(p), (uid_t)uid, (gid_t)gid);
		Py_END_ALLOW_THREADS
		sh_py_fs_done(self);
		if (rc < 0)
			sh_py_err(rc, p);
	}
	Py_DECREF(p);
	if (fs == NULL || rc < 0)
		return NULL;
	Py_RETURN_NONE;
}

static PyObject *
ShFS_truncate(ShFS *self, PyObject *args)
{
	PyObject *p;
	unsigned long long size;
	int rc = 0;
	sh_fs *fs;

	if (!PyArg_ParseTuple(args, "O&K", PATH(p), &size))
		return NULL;
	fs = sh_py_fs(self);
	if (fs != NULL) {
		Py_BEGIN_ALLOW_THREADS
			rc = sh_truncate(fs, PyBytes_AS_STRING(p), size);
		Py_END_ALLOW_THREADS
		sh_py_fs_done(self);
		if (rc < 0)
			sh_py_err(rc, p);
	}
	Py_DECREF(p);
	if (fs == NULL || rc < 0)
		return NULL;
	Py_RETURN_NONE;
}

static int
time_arg(PyObject *o, struct timespec *ts)
{
	long long ns;

	if (o == Py_None) {
		ts->tv_sec = 0;
		ts->tv_nsec = UTIME_NOW;
		return 0;
	}
	ns = PyLong_AsLongLong(o);
	if (ns == -1 && PyErr_Occurred())
		return -1;
	ts->tv_sec = ns / 1000000000LL;
	ts->tv_nsec = ns % 1000000000LL;
	if (ts->tv_nsec < 0) {
		ts->tv_nsec += 1000000000LL;
		ts->tv_sec--;
	}
	return 0;
}

/* utime(path, atime_ns, mtime_ns): None for now. */
static PyObject *
ShFS_utime(ShFS *self, PyObject *args)
{
	PyObject *p, *at, *mt;
	struct timespec ts[2];
	int rc = 0;
	sh_fs *fs;

	if (!PyArg_ParseTuple(args, "O&OO", PATH(p), &at, &mt))
		return NULL;
	if (time_arg(at, &ts[0]) < 0 || time_arg(mt, &ts[1]) < 0) {
		Py_DECREF(p);
		return NULL;
	}
	fs = sh_py_fs(self);
	if (fs != NULL) {
		Py_BEGIN_ALLOW_THREADS
			rc = sh_utimens(fs, PyBytes_AS_STRING(p), ts);
		Py_END_ALLOW_THREADS
		sh_py_fs_done(self);
		if (rc < 0)
			sh_py_err(rc, p);
	}
	Py_DECREF(p);
	if (fs == NULL || rc < 0)
		return NULL;
	Py_RETURN_NONE;
}

static PyObject *
ShFS_statvfs(ShFS *self, PyObject *unused)
{
	struct statvfs v;
	sh_fs *fs = sh_py_fs(self);
	int rc;

	(void)unused;
	if (fs == NULL)
		return NULL;
	Py_BEGIN_ALLOW_THREADS
		rc = sh_statvfs(fs, &v);
	Py_END_ALLOW_THREADS
	sh_py_fs_done(self);
	if (rc < 0)
		return sh_py_err(rc, NULL);
	return Py_BuildValue("(kkKKKKKKkk)", v.f_bsize, v.f_frsize, (unsigned long long)v.f_blocks,
			     (unsigned long long)v.f_bfree, (unsigned long long)v.f_bavail,
			     (unsigned long long)v.f_files, (unsigned long long)v.f_ffree,
			     (unsigned long long)v.f_favail, v.f_flag, v.f_namemax);
}

/*
 * listdir(path, plus=False): [(name bytes, d_type, ino, stat tuple or None)]. With
 * plus, the attributes come with each page (readdirplus); None where they did not.
 */
#define LIST_CHUNK 256

static PyObject *
ShFS_listdir(ShFS *self, PyObject *args)
{
	PyObject *p, *list = NULL;
	int plus = 0, rc;
	sh_dir *d = NULL;
	sh_fs *fs;
	struct sh_dirent *ents = NULL;
	struct stat *sts = NULL;

	if (!PyArg_ParseTuple(args, "O&|p", PATH(p), &plus))
		return NULL;
	fs = sh_py_fs(self);
	if (fs == NULL)
		goto out;
	ents = malloc(LIST_CHUNK * sizeof(*ents));
	sts = plus ? malloc(LIST_CHUNK * sizeof(*sts)) : NULL;
	if (ents == NULL || (plus && sts == NULL)) {
		PyErr_NoMemory();
		goto out;
	}
	Py_BEGIN_ALLOW_THREADS
		rc = sh_opendir(fs, PyBytes_AS_STRING(p), &d);
	Py_END_ALLOW_THREADS
	if (rc < 0) {
		sh_py_err(rc, p);
		goto out;
	}
	list = PyList_New(0);
	if (list == NULL)
		goto out;
	for (;;) {
		int n = 0;

		/* a chunk of entries without the GIL, then into Python objects */
		Py_BEGIN_ALLOW_THREADS
			for (rc = 1; n < LIST_CHUNK; n++) {
				rc = plus ? sh_readdir_plus(d, &ents[n], &sts[n])
					  : sh_readdir(d, &ents[n]);
				if (rc <= 0)
					break;
			}
		Py_END_ALLOW_THREADS
		for (int i = 0; i < n; i++) {
			PyObject *st = plus && sts[i].st_ino != 0 ? stat_tuple(&sts[i]) : Py_None;
			PyObject *e;

			if (st == Py_None)
				Py_INCREF(st);
			e = st == NULL
				? NULL
				: Py_BuildValue("(y#iKN)", ents[i].name,
						(Py_ssize_t)strlen(ents[i].name), (int)ents[i].type,
						(unsigned long long)ents[i].ino, st);
			if (e == NULL || PyList_Append(list, e) < 0) {
				Py_XDECREF(e);
				Py_CLEAR(list);
				goto out;
			}
			Py_DECREF(e);
		}
		if (rc < 0) {
			sh_py_err(rc, p);
			Py_CLEAR(list);
			goto out;
		}
		if (rc == 0)
			break;
	}
out:
	if (d != NULL)
		sh_closedir(d);
	if (fs != NULL)
		sh_py_fs_done(self);
	free(ents);
	free(sts);
	Py_DECREF(p);
	return list;
}

static PyObject *
ShFS_open(ShFS *self, PyObject *args)
{
	PyObject *p;
	int flags = O_RDONLY, rc;
	unsigned mode = 0666;
	sh_file *f = NULL;
	ShFile *o = NULL;
	char *path;
	sh_fs *fs;

	if (!PyArg_ParseTuple(args, "O&|iI", PATH(p), &flags, &mode))
		return NULL;
	path = strdup(PyBytes_AS_STRING(p));
	o = PyObject_New(ShFile, &ShFile_Type);
	if (o != NULL) {
		*o = (ShFile){ .ob_base = o->ob_base };
	}
	if (path == NULL || o == NULL) {
		if (o == NULL)
			PyErr_NoMemory();
		goto err;
	}
	fs = sh_py_fs(self);
	if (fs == NULL)
		goto err;
	Py_BEGIN_ALLOW_THREADS
		rc = sh_open(fs, path, flags, (mode_t)mode, &f);
	Py_END_ALLOW_THREADS
	if (rc < 0) {
		sh_py_fs_done(self);
		sh_py_err(rc, p);
		goto err;
	}
	o->path = path;
	o->f = f;
	o->fs = self;
	Py_INCREF(self);
	self->nfiles++; /* before the call ends: the file system stays while the file does */
	o->counted = true;
	o->flags = flags & ~(O_CREAT | O_EXCL | O_TRUNC);
	o->gen = sh_py_gen;
	sh_py_fs_done(self);
	Py_DECREF(p);
	return (PyObject *)o;
err:
	free(path);
	Py_XDECREF(o);
	Py_DECREF(p);
	return NULL;
}

static PyObject *
ShFS_read_many(ShFS *self, PyObject *args)
{
	return sh_py_read_many(self, args);
}

static PyObject *
ShFS_diff(ShFS *self, PyObject *args)
{
	return sh_py_diff(self, args);
}

static PyMethodDef ShFS_methods[] = {
	{ "close", (PyCFunction)ShFS_close, METH_NOARGS, "close the file system and the client" },
	{ "stat", (PyCFunction)ShFS_stat, METH_VARARGS, "stat(path, follow=True) -> tuple" },
	{ "mkdir", (PyCFunction)ShFS_mkdir, METH_VARARGS, "mkdir(path, mode=0o777)" },
	{ "mknod", (PyCFunction)ShFS_mknod, METH_VARARGS, "mknod(path, mode)" },
	{ "unlink", (PyCFunction)ShFS_unlink, METH_VARARGS, "unlink(path)" },
	{ "rmdir", (PyCFunction)ShFS_rmdir, METH_VARARGS, "rmdir(path)" },
	{ "chmod", (PyCFunction)ShFS_chmod, METH_VARARGS, "chmod(path, mode)" },
	{ "chown", (PyCFunction)ShFS_chown, METH_VARARGS, "chown(path, uid, gid)" },
	{ "rename", (PyCFunction)ShFS_rename, METH_VARARGS, "rename(src, dst, flags=0)" },
	{ "link", (PyCFunction)ShFS_link, METH_VARARGS, "link(existing, new)" },
	{ "symlink", (PyCFunction)ShFS_symlink, METH_VARARGS, "symlink(target, linkpath)" },
	{ "readlink", (PyCFunction)ShFS_readlink, METH_VARARGS, "readlink(path) -> bytes" },
	{ "truncate", (PyCFunction)ShFS_truncate, METH_VARARGS, "truncate(path, size)" },
	{ "utime", (PyCFunction)ShFS_utime, METH_VARARGS, "utime(path, atime_ns, mtime_ns)" },
	{ "statvfs", (PyCFunction)ShFS_statvfs, METH_NOARGS, "statvfs() -> tuple" },
	{ "listdir", (PyCFunction)ShFS_listdir, METH_VARARGS,
	  "listdir(path, plus=False) -> [(name, d_type, ino, stat or None)]" },
	{ "open", (PyCFunction)ShFS_open, METH_VARARGS, "open(path, flags=O_RDONLY, mode=0o666)" },
	{ "read_many", (PyCFunction)ShFS_read_many, METH_VARARGS,
	  "read_many([(path_or_file, offset, length, buffer_or_None), ...], threads=16)" },
	{ "diff", (PyCFunction)ShFS_diff, METH_VARARGS,
	  "diff(from_snapshot_or_None, to_snapshot) -> [(op, kind, bucket, ino, name, off, old, "
	  "new)]" },
	{ NULL, NULL, 0, NULL }
};

PyTypeObject ShFS_Type = {
	PyVarObject_HEAD_INIT(NULL, 0).tp_name = "shoal._shoal.FS",
	.tp_basicsize = sizeof(ShFS),
	.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
	.tp_doc = "FS(addr, name, timeout_ms=0, frag_kb=0): a file system of a Shoal cluster",
	.tp_new = PyType_GenericNew,
	.tp_init = (initproc)ShFS_init,
	.tp_dealloc = (destructor)ShFS_dealloc,
	.tp_methods = ShFS_methods,
};

/* ---- an open file ---- */

sh_file *
sh_py_file(ShFile *self)
{
	sh_fs *fs;
	sh_file *f = NULL;
	int rc = 0;

	wait_other(&self->reopening);
	if (self->closing || self->path == NULL) {
		PyErr_SetString(PyExc_ValueError, "I/O operation on closed file");
		return NULL;
	}
	if (self->gen != sh_py_gen) {
		/* inherited over a fork: open it again here by its path */
		self->f = NULL;
		self->busy = 0;
		self->reopening = true;
		fs = sh_py_fs(self->fs);
		if (fs != NULL) {
			Py_BEGIN_ALLOW_THREADS
				rc = sh_open(fs, self->path, self->flags, 0, &f);
			Py_END_ALLOW_THREADS
			sh_py_fs_done(self->fs);
		}
		self->reopening = false;
		if (fs == NULL)
			return NULL;
		if (rc < 0) {
			PyObject *p = PyBytes_FromString(self->path);

			sh_py_err(rc, p);
			Py_XDECREF(p);
			return NULL;
		}
		self->f = f;
		self->gen = sh_py_gen;
	}
	self->busy++;
	return self->f;
}

/* Flush and free the handle, and let the file system go if it waits for that (GIL held). */
static int
file_really_close(ShFile *self)
{
	sh_file *f = self->f;
	int rc = 0;

	self->f = NULL;
	if (f != NULL && self->gen == sh_py_gen) {
		Py_BEGIN_ALLOW_THREADS
			rc = sh_close(f);
		Py_END_ALLOW_THREADS
	}
	if (self->counted) {
		self->counted = false;
		self->fs->nfiles--;
		fs_maybe_release(self->fs);
	}
	return rc;
}

void
sh_py_file_done(ShFile *self)
{
	if (self->busy > 0)
		self->busy--;
	if (self->closing && self->busy == 0 && self->counted) {
		/* closed while this call ran: it closes now, and only stderr hears of a failure */
		int rc = file_really_close(self);

		if (rc < 0)
			PySys_FormatStderr("shoal: closing %s: %s\n", self->path, sh_strerror(rc));
	}
}

static void
ShFile_dealloc(ShFile *self)
{
	/* no call runs: each holds a reference */
	self->closing = true;
	file_really_close(self);
	free(self->path);
	Py_CLEAR(self->fs);
	PyObject_Free(self);
}

/* Flush and close; while another thread's call on it runs, that call closes it at its end. */
static PyObject *
ShFile_close(ShFile *self, PyObject *unused)
{
	int rc;

	(void)unused;
	if (self->closing)
		Py_RETURN_NONE;
	self->closing = true;
	if (self->busy > 0)
		Py_RETURN_NONE;
	rc = file_really_close(self);
	if (rc < 0) {
		PyObject *p = PyBytes_FromString(self->path);

		sh_py_err(rc, p);
		Py_XDECREF(p);
		return NULL;
	}
	Py_RETURN_NONE;
}

static PyObject *
file_err(ShFile *self, long rc)
{
	PyObject *p = PyBytes_FromString(self->path ? self->path : "");

	sh_py_err(rc, p);
	Py_XDECREF(p);
	return NULL;
}

/* pread(n, offset) -> bytes (shorter at the end of the file) */
static PyObject *
ShFile_pread(ShFile *self, PyObject *args)
{
	Py_ssize_t n;
	unsigned long long off;
	PyObject *b;
	sh_file *f;
	long got;

	if (!PyArg_ParseTuple(args, "nK", &n, &off))
		return NULL;
	if (n < 0) {
		PyErr_SetString(PyExc_ValueError, "negative length");
		return NULL;
	}
	b = PyBytes_FromStringAndSize(NULL, n);
	if (b == NULL)
		return NULL;
	f = sh_py_file(self);
	if (f == NULL) {
		Py_DECREF(b);
		return NULL;
	}
	Py_BEGIN_ALLOW_THREADS
		got = sh_pread(f, PyBytes_AS_STRING(b), (size_t)n, off);
	Py_END_ALLOW_THREADS
	sh_py_file_done(self);
	if (got < 0) {
		Py_DECREF(b);
		return file_err(self, got);
	}
	if (got != n && _PyBytes_Resize(&b, got) < 0)
		return NULL;
	return b;
}

/*
 * preadinto(buffer, offset) -> bytes read, into any writable buffer, and
 * pwrite(buffer, offset) -> bytes written, from any buffer: no copy either way.
 */
static PyObject *
buf_call(ShFile *self, PyObject *args, bool write)
{
	Py_buffer buf;
	unsigned long long off;
	sh_file *f;
	long n;

	if (!PyArg_ParseTuple(args, write ? "y*K" : "w*K", &buf, &off))
		return NULL;
	f = sh_py_file(self);
	if (f == NULL) {
		PyBuffer_Release(&buf);
		return NULL;
	}
	Py_BEGIN_ALLOW_THREADS
		n = write ? sh_pwrite(f, buf.buf, (size_t)buf.len, off)
			  : sh_pread(f, buf.buf, (size_t)buf.len, off);
	Py_END_ALLOW_THREADS
	sh_py_file_done(self);
	PyBuffer_Release(&buf);
	if (n < 0)
		return file_err(self, n);
	return PyLong_FromLong(n);
}

static PyObject *
ShFile_preadinto(ShFile *self, PyObject *args)
{
	return buf_call(self, args, false);
}

static PyObject *
ShFile_pwrite(ShFile *self, PyObject *args)
{
	return buf_call(self, args, true);
}

/*
 * pread_device(device_pointer, n, offset, device=0) -> bytes read into GPU memory
 * (sh_pread_device); OSError ENODEV where there is no CUDA driver or GPU.
 */
static PyObject *
ShFile_pread_device(ShFile *self, PyObject *args)
{
	unsigned long long ptr, off;
	Py_ssize_t n;
	int device = 0;
	sh_file *f;
	long got;

	if (!PyArg_ParseTuple(args, "KnK|i", &ptr, &n, &off, &device))
		return NULL;
	if (n < 0) {
		PyErr_SetString(PyExc_ValueError, "negative length");
		return NULL;
	}
	f = sh_py_file(self);
	if (f == NULL)
		return NULL;
	Py_BEGIN_ALLOW_THREADS
		got = sh_pread_device(f, (void *)(uintptr_t)ptr, (size_t)n, off, device);
	Py_END_ALLOW_THREADS
	sh_py_file_done(self);
	if (got == -ENODEV) {
		PyObject *a = Py_BuildValue("(is)", ENODEV,
					    "no CUDA driver or no usable GPU on this machine "
					    "(sh_pread_device; the shoal log says which)");

		if (a != NULL) {
			PyErr_SetObject(PyExc_OSError, a);
			Py_DECREF(a);
		}
		return NULL;
	}
	if (got < 0)
		return file_err(self, got);
	return PyLong_FromLong(got);
}

static PyObject *
ShFile_fsync(ShFile *self, PyObject *unused)
{
	sh_file *f = sh_py_file(self);
	int rc;

	(void)unused;
	if (f == NULL)
		return NULL;
	Py_BEGIN_ALLOW_THREADS
		rc = sh_fsync(f);
	Py_END_ALLOW_THREADS
	sh_py_file_done(self);
	if (rc < 0)
		return file_err(self, rc);
	Py_RETURN_NONE;
}

static PyObject *
ShFile_ftruncate(ShFile *self, PyObject *args)
{
	unsigned long long size;
	sh_file *f;
	int rc;

	if (!PyArg_ParseTuple(args, "K", &size))
		return NULL;
	f = sh_py_file(self);
	if (f == NULL)
		return NULL;
	Py_BEGIN_ALLOW_THREADS
		rc = sh_ftruncate(f, size);
	Py_END_ALLOW_THREADS
	sh_py_file_done(self);
	if (rc < 0)
		return file_err(self, rc);
	Py_RETURN_NONE;
}

static PyObject *
ShFile_fstat(ShFile *self, PyObject *unused)
{
	sh_file *f = sh_py_file(self);
	struct stat st;
	int rc;

	(void)unused;
	if (f == NULL)
		return NULL;
	Py_BEGIN_ALLOW_THREADS
		rc = sh_fstat(f, &st);
	Py_END_ALLOW_THREADS
	sh_py_file_done(self);
	if (rc < 0)
		return file_err(self, rc);
	return stat_tuple(&st);
}

static PyObject *
ShFile_closed(ShFile *self, void *unused)
{
	(void)unused;
	return PyBool_FromLong(self->closing);
}

static PyMethodDef ShFile_methods[] = {
	{ "close", (PyCFunction)ShFile_close, METH_NOARGS, "flush and close" },
	{ "pread", (PyCFunction)ShFile_pread, METH_VARARGS, "pread(n, offset) -> bytes" },
	{ "preadinto", (PyCFunction)ShFile_preadinto, METH_VARARGS,
	  "preadinto(buffer, offset) -> bytes read" },
	{ "pwrite", (PyCFunction)ShFile_pwrite, METH_VARARGS, "pwrite(buffer, offset) -> written" },
	{ "pread_device", (PyCFunction)ShFile_pread_device, METH_VARARGS,
	  "pread_device(device_pointer, n, offset, device=0) -> bytes read into GPU memory" },
	{ "fsync", (PyCFunction)ShFile_fsync, METH_NOARGS, "make what was written durable" },
	{ "ftruncate", (PyCFunction)ShFile_ftruncate, METH_VARARGS, "ftruncate(size)" },
	{ "fstat", (PyCFunction)ShFile_fstat, METH_NOARGS, "fstat() -> tuple" },
	{ NULL, NULL, 0, NULL }
};

static PyGetSetDef ShFile_getset[] = { { "closed", (getter)ShFile_closed, NULL,
					 "whether the file is closed", NULL },
				       { NULL, NULL, NULL, NULL, NULL } };

PyTypeObject ShFile_Type = {
	PyVarObject_HEAD_INIT(NULL, 0).tp_name = "shoal._shoal.File",
	.tp_basicsize = sizeof(ShFile),
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "an open Shoal file (FS.open)",
	.tp_dealloc = (destructor)ShFile_dealloc,
	.tp_methods = ShFile_methods,
	.tp_getset = ShFile_getset,
};

/* ---- the module ---- */

static struct PyModuleDef shoal_module = {
	PyModuleDef_HEAD_INIT,
	.m_name = "shoal._shoal",
	.m_doc = "libshoal for Python: see the shoal package",
	.m_size = -1,
};

PyMODINIT_FUNC PyInit__shoal(void);

PyMODINIT_FUNC
PyInit__shoal(void)
{
	static bool atfork;
	PyObject *m;

	if (PyType_Ready(&ShFS_Type) < 0 || PyType_Ready(&ShFile_Type) < 0)
		return NULL;
	if (!atfork) {
		if (pthread_atfork(NULL, NULL, forked_child) != 0)
			return PyErr_NoMemory();
		atfork = true;
	}
	m = PyModule_Create(&shoal_module);
	if (m == NULL)
		return NULL;
	Py_INCREF(&ShFS_Type);
	Py_INCREF(&ShFile_Type);
	if (PyModule_AddObject(m, "FS", (PyObject *)&ShFS_Type) < 0 ||
	    PyModule_AddObject(m, "File", (PyObject *)&ShFile_Type) < 0 ||
	    PyModule_AddIntConstant(m, "RENAME_NOREPLACE", SH_RENAME_NOREPLACE) < 0 ||
	    PyModule_AddIntConstant(m, "RENAME_EXCHANGE", SH_RENAME_EXCHANGE) < 0) {
		Py_DECREF(m);
		return NULL;
	}
	return m;
}
