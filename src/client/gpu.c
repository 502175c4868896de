// SPDX-License-Identifier: Apache-2.0
/*
 * sh_pread_device: file bytes into GPU memory (include/shoal/client.h,
 * docs/python.md "GPU").
 *
 * The CUDA driver API is loaded at run time (dlopen of libcuda.so.1), so
 * libshoal builds and runs where there is no GPU and no toolkit; there the
 * call says -ENODEV, once in the log with why. Where there is one:
 *
 *   a staging ring of GPU_BUFS page-locked host buffers of GPU_CHUNK bytes;
 *   the reads of the next GPU_BUFS chunks are in flight at once (sh_io_submit);
 *   a chunk that has landed is copied to the device asynchronously on a
 *   stream of its own, and its buffer is read into again once the copy's
 *   event has fired;
 *
 * so the network and the host-to-device copies overlap, and the caller's
 * thread only waits. A ring is made at the first call and kept for the
 * next one (a free list: concurrent callers get rings of their own).
 * GPUDirect RDMA (fragments straight into device memory, no staging)
 * comes with the RDMA transport.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>

#include "client_int.h"

SH_LOG_FACILITY("client.gpu");

#define GPU_BUFS  4
#define GPU_CHUNK (8u << 20)

/* The few driver API calls used, as libcuda.so.1 exports them (cuda.h's v2 names). */
typedef int cu_result;
typedef int cu_device;
typedef void *cu_context;
typedef void *cu_stream;
typedef void *cu_event;
typedef unsigned long long cu_devptr;

static struct {
	cu_result (*init)(unsigned);
	cu_result (*device_get)(cu_device *, int);
	cu_result (*primary_retain)(cu_context *, cu_device);
	cu_result (*primary_release)(cu_device);
	cu_result (*pointer_attr)(void *, int, cu_devptr);
	cu_result (*ctx_get_current)(cu_context *);
	cu_result (*ctx_push)(cu_context);
	cu_result (*ctx_pop)(cu_context *);
	cu_result (*host_alloc)(void **, size_t, unsigned);
	cu_result (*host_free)(void *);
	cu_result (*stream_create)(cu_stream *, unsigned);
	cu_result (*stream_destroy)(cu_stream);
	cu_result (*stream_sync)(cu_stream);
	cu_result (*memcpy_htod_async)(cu_devptr, const void *, size_t, cu_stream);
	cu_result (*event_create)(cu_event *, unsigned);
	cu_result (*event_record)(cu_event, cu_stream);
	cu_result (*event_sync)(cu_event);
	cu_result (*event_destroy)(cu_event);
	cu_result (*error_string)(cu_result, const char **);
} cu;

static pthread_once_t cu_once = PTHREAD_ONCE_INIT;
static int cu_status = -ENODEV;
static char cu_why[160];

static void
cu_load(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	struct {
		void **fn;
		const char *name;
	} syms[] = {
		{ (void **)&cu.init, "cuInit" },
		{ (void **)&cu.device_get, "cuDeviceGet" },
		{ (void **)&cu.primary_retain, "cuDevicePrimaryCtxRetain" },
		{ (void **)&cu.primary_release, "cuDevicePrimaryCtxRelease_v2" },
		{ (void **)&cu.pointer_attr, "cuPointerGetAttribute" },
		{ (void **)&cu.ctx_get_current, "cuCtxGetCurrent" },
		{ (void **)&cu.ctx_push, "cuCtxPushCurrent_v2" },
		{ (void **)&cu.ctx_pop, "cuCtxPopCurrent_v2" },
		{ (void **)&cu.host_alloc, "cuMemHostAlloc" },
		{ (void **)&cu.host_free, "cuMemFreeHost" },
		{ (void **)&cu.stream_create, "cuStreamCreate" },
		{ (void **)&cu.stream_destroy, "cuStreamDestroy_v2" },
		{ (void **)&cu.stream_sync, "cuStreamSynchronize" },
		{ (void **)&cu.memcpy_htod_async, "cuMemcpyHtoDAsync_v2" },
		{ (void **)&cu.event_create, "cuEventCreate" },
		{ (void **)&cu.event_record, "cuEventRecord" },
		{ (void **)&cu.event_sync, "cuEventSynchronize" },
		{ (void **)&cu.event_destroy, "cuEventDestroy_v2" },
		{ (void **)&cu.error_string, "cuGetErrorString" },
	};
	cu_result r;

	if (h == NULL) {
		snprintf(cu_why, sizeof(cu_why), "no CUDA driver here (%s)", dlerror());
		return;
	}
	for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
		*syms[i].fn = dlsym(h, syms[i].name);
		if (*syms[i].fn == NULL) {
			snprintf(cu_why, sizeof(cu_why), "the CUDA driver has no %s", syms[i].name);
			return;
		}
	}
	r = cu.init(0);
	if (r != 0) {
		const char *s = NULL;

		cu.error_string(r, &s);
		snprintf(cu_why, sizeof(cu_why), "cuInit: %s (%d): no usable GPU", s ? s : "?", r);
		return;
	}
	cu_status = 0;
}

/* The driver ready, or -ENODEV (said once in the log). */
static int
cu_ready(void)
{
	static atomic_bool said;

	pthread_once(&cu_once, cu_load);
	if (cu_status < 0 && !atomic_exchange(&said, true))
		sh_log_warn("sh_pread_device: %s", cu_why);
	return cu_status;
}

struct gpu_slot {
	struct gpu_ring *ring;
	void *buf;
	cu_event copied;
	bool copying; /* a copy from buf was queued: wait for its event before reading into it */
	bool reading;
	struct iovec iov;
	sh_io io;
};

struct gpu_ring {
	struct gpu_ring *next; /* in the free list */
	cu_context ctx;	       /* its stream and events are this context's */
	cu_stream stream;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	unsigned inflight;
	struct gpu_slot slot[GPU_BUFS];
};

static pthread_mutex_t rings_mu = PTHREAD_MUTEX_INITIALIZER;
static struct gpu_ring *rings_free;

static int
cu_err(cu_result r, const char *what)
{
	const char *s = NULL;

	cu.error_string(r, &s);
	sh_log_warn("sh_pread_device: %s: %s (%d)", what, s ? s : "?", r);
	return -EIO;
}

/* A ring of context ctx (the current one): a free one, else a new one. */
static int
ring_get(cu_context ctx, struct gpu_ring **out)
{
	struct gpu_ring *g, **pp;
	cu_result r;

	pthread_mutex_lock(&rings_mu);
	for (pp = &rings_free; (g = *pp) != NULL && g->ctx != ctx; pp = &g->next)
		;
	if (g != NULL)
		*pp = g->next;
	pthread_mutex_unlock(&rings_mu);
	if (g != NULL) {
		*out = g;
		return 0;
	}
	/* made once and kept: pinned memory is dear to make, so rings are never freed */
	g = sh_calloc(1, sizeof(*g));
	if (g == NULL)
		return -ENOMEM;
	pthread_mutex_init(&g->mu, NULL);
	pthread_cond_init(&g->cv, NULL);
	g->ctx = ctx;
	/* a blocking stream: its copies wait for work queued on the legacy default stream
	 * (where a framework may still be using the memory it just handed out) */
	r = cu.stream_create(&g->stream, 0);
	if (r != 0) {
		g->stream = NULL;
		goto err;
	}
	for (unsigned i = 0; i < GPU_BUFS; i++) {
		g->slot[i].ring = g;
		r = cu.host_alloc(&g->slot[i].buf, GPU_CHUNK, 0);
		if (r != 0) {
			g->slot[i].buf = NULL;
			goto err;
		}
		r = cu.event_create(&g->slot[i].copied, 2 /* CU_EVENT_DISABLE_TIMING */);
		if (r != 0) {
			g->slot[i].copied = NULL;
			goto err;
		}
	}
	*out = g;
	return 0;
err:
	for (unsigned i = 0; i < GPU_BUFS; i++) {
		if (g->slot[i].copied != NULL)
			cu.event_destroy(g->slot[i].copied);
		if (g->slot[i].buf != NULL)
			cu.host_free(g->slot[i].buf);
	}
	if (g->stream != NULL)
		cu.stream_destroy(g->stream);
	sh_free(g);
	return cu_err(r, "the staging ring (pinned buffers, stream, events)");
}

static void
ring_put(struct gpu_ring *g)
{
	pthread_mutex_lock(&rings_mu);
	g->next = rings_free;
	rings_free = g;
	pthread_mutex_unlock(&rings_mu);
}

static void
slot_read_done(sh_io *io)
{
	struct gpu_slot *s = io->data;
	struct gpu_ring *g = s->ring;

	pthread_mutex_lock(&g->mu);
	s->reading = false;
	g->inflight--;
	pthread_cond_broadcast(&g->cv);
	pthread_mutex_unlock(&g->mu);
}

/* Read chunk at off (len bytes) into slot s, once its last copy out has finished. */
static int
slot_read(sh_file *f, struct gpu_slot *s, uint64_t off, size_t len)
{
	struct gpu_ring *g = s->ring;
	cu_result r;
	int rc;

	if (s->copying) {
		r = cu.event_sync(s->copied);
		if (r != 0)
			return cu_err(r, "cuEventSynchronize");
		s->copying = false;
	}
	s->iov = (struct iovec){ s->buf, len };
	s->io = (sh_io){ .f = f,
			 .op = SH_IO_READ,
			 .iov = &s->iov,
			 .iovcnt = 1,
			 .off = off,
			 .cb = slot_read_done,
			 .data = s };
	pthread_mutex_lock(&g->mu);
	s->reading = true;
	g->inflight++;
	pthread_mutex_unlock(&g->mu);
	rc = sh_io_submit(&s->io);
	if (rc < 0) {
		pthread_mutex_lock(&g->mu);
		s->reading = false;
		g->inflight--;
		pthread_mutex_unlock(&g->mu);
	}
	return rc;
}

static void
slot_wait(struct gpu_slot *s)
{
	struct gpu_ring *g = s->ring;

	pthread_mutex_lock(&g->mu);
	while (s->reading)
		pthread_cond_wait(&g->cv, &g->mu);
	pthread_mutex_unlock(&g->mu);
}

/* The length of chunk i of a read of len bytes. */
static size_t
chunk_len(size_t len, size_t i)
{
	return len - i * GPU_CHUNK < GPU_CHUNK ? len - i * GPU_CHUNK : GPU_CHUNK;
}

long
sh_pread_device(sh_file *f, void *dptr, size_t len, uint64_t off, int device)
{
	struct gpu_ring *g = NULL;
	cu_context ctx = NULL, cur = NULL, popped;
	cu_device dev = 0;
	cu_result r;
	size_t nchunks, next = 0, done = 0;
	long rc = 0;
	bool pushed = false, retained = false;

	if (f == NULL || (dptr == NULL && len > 0) || device < 0)
		return -EINVAL;
	rc = cu_ready();
	if (rc < 0 || len == 0)
		return rc;
	/*
	 * The context the memory belongs to (so the copies go to the right device), else
	 * the caller's current one, else the device's primary context.
	 */
	if (cu.pointer_attr(&ctx, 1 /* CU_POINTER_ATTRIBUTE_CONTEXT */,
			    (cu_devptr)(uintptr_t)dptr) != 0)
		ctx = NULL;
	r = cu.ctx_get_current(&cur);
	if (r != 0)
		cur = NULL;
	if (ctx == NULL && cur == NULL) {
		r = cu.device_get(&dev, device);
		if (r == 0)
			r = cu.primary_retain(&ctx, dev);
		if (r != 0)
			return cu_err(r, "the device's primary context");
		retained = true;
	}
	if (ctx == NULL) {
		ctx = cur;
	} else if (ctx != cur) {
		r = cu.ctx_push(ctx);
		if (r != 0) {
			rc = cu_err(r, "cuCtxPushCurrent");
			goto out;
		}
		pushed = true;
	}
	rc = ring_get(ctx, &g);
	if (rc < 0)
		goto out;
	nchunks = (len + GPU_CHUNK - 1) / GPU_CHUNK;
	for (; next < nchunks && next < GPU_BUFS; next++) {
		rc = slot_read(f, &g->slot[next], off + next * GPU_CHUNK, chunk_len(len, next));
		if (rc < 0)
			goto drain;
	}
	for (size_t i = 0; i < nchunks; i++) {
		struct gpu_slot *s = &g->slot[i % GPU_BUFS];
		size_t want = chunk_len(len, i);
		long got;

		slot_wait(s);
		got = s->io.result;
		if (got < 0) {
			rc = got;
			goto drain;
		}
		if (got > 0) {
			r = cu.memcpy_htod_async((cu_devptr)(uintptr_t)dptr + i * GPU_CHUNK, s->buf,
						 (size_t)got, g->stream);
			if (r == 0)
				r = cu.event_record(s->copied, g->stream);
			if (r != 0) {
				rc = cu_err(r, "cuMemcpyHtoDAsync");
				goto drain;
			}
			s->copying = true;
			done += (size_t)got;
		}
		if ((size_t)got < want)
			break; /* the end of the file */
		if (next < nchunks) {
			rc = slot_read(f, s, off + next * GPU_CHUNK, chunk_len(len, next));
			if (rc < 0)
				goto drain;
			next++;
		}
	}
drain:
	/* every read called back and every copy done before the ring is used again */
	pthread_mutex_lock(&g->mu);
	while (g->inflight > 0)
		pthread_cond_wait(&g->cv, &g->mu);
	pthread_mutex_unlock(&g->mu);
	r = cu.stream_sync(g->stream);
	if (r != 0 && rc >= 0)
		rc = cu_err(r, "cuStreamSynchronize");
	for (unsigned i = 0; i < GPU_BUFS; i++)
		g->slot[i].copying = false;
	ring_put(g);
	if (rc >= 0)
		rc = (long)done;
out:
	if (pushed)
		cu.ctx_pop(&popped);
	if (retained)
		cu.primary_release(dev);
	return rc;
}
