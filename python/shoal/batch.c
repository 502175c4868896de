// SPDX-License-Identifier: Apache-2.0
/*
 * FS.read_many: many reads in flight from one Python call, for loaders.
 *
 *   read_many([(path_or_file, offset, length, buffer), ...], threads=16,
 *             raise_errors=True) -> [result, ...]
 *
 * length -1 (or left out) reads to the end of the file; buffer (any
 * writable buffer, left out or None: a bytes object is made) receives the
 * bytes without a copy. A result is the count read into the given buffer,
 * or the bytes object. Reads of open files go to sh_io_submit together;
 * paths are opened, read whole and closed by `threads` threads at once
 * (an open is a round trip, so they must overlap too). The GIL is released
 * for all of it. The first failure raises its OSError (with the path), or
 * with raise_errors=False stands in the list in place of its result.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>

#include "_shoal.h"

struct rm_item {
	PyObject *path; /* bytes (owned), or NULL for an open file */
	ShFile *file;	/* owned reference, or NULL */
	sh_file *f;
	uint64_t off;
	Py_ssize_t len; /* -1: to the end of the file */
	Py_buffer buf;
	bool has_buf;
	PyObject *out; /* the bytes made here when no buffer was given */
	long result;
	struct rm_batch *batch;
	struct iovec iov;
	sh_io io;
};

struct rm_batch {
	struct rm_item *it;
	size_t n;
	sh_fs *fs;
	atomic_size_t next; /* the next path item a thread takes */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	size_t pending; /* submitted reads not yet called back */
};

/* A bytes object of len to read into, made with the GIL taken for it. */
static int
make_out(struct rm_item *it, Py_ssize_t len)
{
	PyGILState_STATE g = PyGILState_Ensure();

	it->out = PyBytes_FromStringAndSize(NULL, len);
	if (it->out == NULL)
		PyErr_Clear();
	PyGILState_Release(g);
	return it->out == NULL ? -ENOMEM : 0;
}

/* Open, size, read and close one path item (no GIL held). */
static void
read_path(struct rm_batch *b, struct rm_item *it)
{
	sh_file *f = NULL;
	struct stat st;
	Py_ssize_t len = it->len;
	long rc = sh_open(b->fs, PyBytes_AS_STRING(it->path), O_RDONLY, 0, &f);
	void *dst;

	if (rc < 0)
		goto out;
	if (len < 0) {
		rc = sh_fstat(f, &st);
		if (rc < 0)
			goto out;
		len = (uint64_t)st.st_size > it->off ? (Py_ssize_t)(st.st_size - it->off) : 0;
		if (it->has_buf && len > it->buf.len)
			len = it->buf.len;
	}
	if (!it->has_buf) {
		rc = make_out(it, len);
		if (rc < 0)
			goto out;
		dst = PyBytes_AS_STRING(it->out);
	} else {
		dst = it->buf.buf;
	}
	rc = len > 0 ? sh_pread(f, dst, (size_t)len, it->off) : 0;
out:
	if (f != NULL) {
		int crc = sh_close(f);

		if (rc >= 0 && crc < 0)
			rc = crc;
	}
	it->result = rc;
}

static void *
path_worker(void *arg)
{
	struct rm_batch *b = arg;

	for (;;) {
		size_t i = atomic_fetch_add(&b->next, 1);

		if (i >= b->n)
			break;
		if (b->it[i].path != NULL)
			read_path(b, &b->it[i]);
	}
	return NULL;
}

static void
io_done(sh_io *io)
{
	struct rm_item *it = io->data;
	struct rm_batch *b = it->batch;

	it->result = io->result;
	pthread_mutex_lock(&b->mu);
	if (--b->pending == 0)
		pthread_cond_signal(&b->cv);
	pthread_mutex_unlock(&b->mu);
}

/* One request tuple into it (GIL held); -1 raised. */
static int
parse_item(PyObject *req, struct rm_item *it)
{
	PyObject *target, *buf = Py_None;
	unsigned long long off;
	Py_ssize_t len = -1;

	if (!PyArg_ParseTuple(req, "OK|nO", &target, &off, &len, &buf))
		return -1;
	it->off = off;
	it->len = len;
	if (PyObject_TypeCheck(target, &ShFile_Type)) {
		it->file = (ShFile *)target;
		Py_INCREF(target);
		it->f = sh_py_file(it->file);
		if (it->f == NULL)
			return -1;
	} else if (!PyUnicode_FSConverter(target, &it->path)) {
		return -1;
	}
	if (buf != Py_None) {
		if (PyObject_GetBuffer(buf, &it->buf, PyBUF_WRITABLE) < 0) {
			/* as readinto says it */
			PyErr_Format(PyExc_TypeError,
				     "read_many: a buffer must be a read-write bytes-like object, "
				     "not %.100s",
				     Py_TYPE(buf)->tp_name);
			return -1;
		}
		it->has_buf = true;
		if (len > it->buf.len) {
			PyErr_Format(PyExc_ValueError,
				     "read_many: length %zd is more than the buffer's %zd", len,
				     it->buf.len);
			return -1;
		}
		if (len < 0 && it->file != NULL)
			it->len = it->buf.len; /* an open file reads what fits */
	}
	return 0;
}

/* The length of a whole-file read of an open file, and its bytes object (GIL held). */
static int
size_file_item(struct rm_item *it)
{
	struct stat st;
	int rc;

	if (it->len < 0) {
		Py_BEGIN_ALLOW_THREADS
			rc = sh_fstat(it->f, &st);
		Py_END_ALLOW_THREADS
		if (rc < 0) {
			it->result = rc;
			return 1;
		}
		it->len = (uint64_t)st.st_size > it->off ? (Py_ssize_t)(st.st_size - it->off) : 0;
	}
	if (!it->has_buf) {
		it->out = PyBytes_FromStringAndSize(NULL, it->len);
		if (it->out == NULL)
			return -1;
	}
	return 0;
}

static PyObject *
item_error(struct rm_item *it)
{
	PyObject *name = it->path;
	PyObject *type, *value, *tb;

	if (name == NULL && it->file != NULL && it->file->path != NULL)
		name = PyBytes_FromString(it->file->path);
	else
		Py_XINCREF(name);
	sh_py_err(it->result, name);
	Py_XDECREF(name);
	PyErr_Fetch(&type, &value, &tb);
	PyErr_NormalizeException(&type, &value, &tb);
	Py_XDECREF(type);
	Py_XDECREF(tb);
	return value;
}

static PyObject *
results(struct rm_batch *b, int raise_errors)
{
	PyObject *list = PyList_New((Py_ssize_t)b->n);

	if (list == NULL)
		return NULL;
	for (size_t i = 0; i < b->n; i++) {
		struct rm_item *it = &b->it[i];
		PyObject *r;

		if (it->result < 0) {
			r = item_error(it);
			if (raise_errors || r == NULL) {
				if (r != NULL)
					PyErr_SetObject((PyObject *)Py_TYPE(r), r);
				Py_XDECREF(r);
				Py_DECREF(list);
				return NULL;
			}
		} else if (it->has_buf) {
			r = PyLong_FromLong(it->result);
		} else {
			if (it->result != PyBytes_GET_SIZE(it->out) &&
			    _PyBytes_Resize(&it->out, it->result) < 0) {
				Py_DECREF(list);
				return NULL;
			}
			r = it->out;
			it->out = NULL;
		}
		if (r == NULL) {
			Py_DECREF(list);
			return NULL;
		}
		PyList_SET_ITEM(list, (Py_ssize_t)i, r);
	}
	return list;
}

static void
free_items(struct rm_batch *b)
{
	for (size_t i = 0; i < b->n; i++) {
		struct rm_item *it = &b->it[i];

		Py_XDECREF(it->path);
		if (it->file != NULL && it->f != NULL)
			sh_py_file_done(it->file);
		Py_XDECREF((PyObject *)it->file);
		Py_XDECREF(it->out);
		if (it->has_buf)
			PyBuffer_Release(&it->buf);
	}
	PyMem_Free(b->it);
}

#define RM_THREADS_MAX 64

PyObject *
sh_py_read_many(ShFS *self, PyObject *args)
{
	PyObject *reqs, *seq, *ret = NULL;
	unsigned nthreads = 16;
	int raise_errors = 1;
	struct rm_batch b = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER };
	size_t npaths = 0;
	pthread_t tids[RM_THREADS_MAX];
	unsigned started = 0;

	if (!PyArg_ParseTuple(args, "O|Ip", &reqs, &nthreads, &raise_errors))
		return NULL;
	/* a copy: the caller's list may change while the GIL is let go */
	seq = PySequence_Tuple(reqs);
	if (seq == NULL)
		return NULL;
	b.fs = sh_py_fs(self);
	if (b.fs == NULL)
		goto out;
	b.n = (size_t)PyTuple_GET_SIZE(seq);
	b.it = PyMem_Calloc(b.n ? b.n : 1, sizeof(*b.it));
	if (b.it == NULL) {
		PyErr_NoMemory();
		goto out;
	}
	for (size_t i = 0; i < b.n; i++) {
		struct rm_item *it = &b.it[i];
		int rc;

		it->batch = &b;
		if (parse_item(PyTuple_GET_ITEM(seq, (Py_ssize_t)i), it) < 0)
			goto out;
		if (it->path != NULL) {
			npaths++;
			continue;
		}
		rc = size_file_item(it);
		if (rc < 0)
			goto out;
		if (rc > 0)
			continue; /* failed already: it->result says why */
		it->iov = (struct iovec){ it->has_buf ? it->buf.buf : PyBytes_AS_STRING(it->out),
					  (size_t)it->len };
		it->io = (sh_io){ .f = it->f,
				  .op = SH_IO_READ,
				  .iov = &it->iov,
				  .iovcnt = 1,
				  .off = it->off,
				  .cb = io_done,
				  .data = it };
	}
	nthreads = nthreads < 1 ? 1 : nthreads > RM_THREADS_MAX ? RM_THREADS_MAX : nthreads;
	if (npaths < nthreads)
		nthreads = (unsigned)npaths;

	Py_BEGIN_ALLOW_THREADS
		for (size_t i = 0; i < b.n; i++) {
			struct rm_item *it = &b.it[i];
			int rc;

			if (it->path != NULL || it->io.f == NULL)
				continue;
			pthread_mutex_lock(&b.mu);
			b.pending++;
			pthread_mutex_unlock(&b.mu);
			rc = sh_io_submit(&it->io);
			if (rc < 0) {
				it->result = rc;
				pthread_mutex_lock(&b.mu);
				b.pending--;
				pthread_mutex_unlock(&b.mu);
			}
		}
		/* the calling thread is one of the path readers */
		while (started + 1 < nthreads &&
		       pthread_create(&tids[started], NULL, path_worker, &b) == 0)
			started++;
		if (npaths > 0)
			path_worker(&b);
		for (unsigned t = 0; t < started; t++)
			pthread_join(tids[t], NULL);
		pthread_mutex_lock(&b.mu);
		while (b.pending > 0)
			pthread_cond_wait(&b.cv, &b.mu);
		pthread_mutex_unlock(&b.mu);
	Py_END_ALLOW_THREADS

	ret = results(&b, raise_errors);
out:
	if (b.it != NULL) {
		/* a parse failure part way: nothing was submitted yet */
		free_items(&b);
	}
	if (b.fs != NULL)
		sh_py_fs_done(self);
	Py_DECREF(seq);
	return ret;
}
