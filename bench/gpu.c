// SPDX-License-Identifier: Apache-2.0
/*
 * bench/gpu: file bytes into GPU memory (make bench-gpu; issue #24).
 *
 * On a 6-node local cluster (4+2, no compression), a file of
 * SH_BENCH_GIB GiB (default 4) is read into device memory two ways in
 * one run:
 *
 *   staged:  read into one pinned host buffer (GPU_INFLIGHT reads of
 *            8 MiB in flight, as many as sh_pread_device keeps), then one
 *            host-to-device copy of the whole;
 *   device:  sh_pread_device (its pinned ring, copies overlapped with reads).
 *
 * The device's bytes are copied back and compared with the staged ones.
 * Prints, last,
 *
 *   BENCH gpu {"device_gib_s":X,"staged_gib_s":Y,"device_vs_staged":R}
 *
 * (the target: device_vs_staged >= 0.9). Where there is no CUDA driver
 * or no GPU it says so and exits 0 before starting anything.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <shoal/client.h>
#include <shoal/sh_errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

#define CHUNK	     (8u << 20)
#define GPU_INFLIGHT 4

static struct {
	int (*init)(unsigned);
	int (*device_get)(int *, int);
	int (*ctx_create)(void **, unsigned, int);
	int (*mem_alloc)(unsigned long long *, size_t);
	int (*host_alloc)(void **, size_t, unsigned);
	int (*htod)(unsigned long long, const void *, size_t);
	int (*dtoh)(void *, unsigned long long, size_t);
} cu;

static int
cuda_up(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW);
	void *ctx;
	int dev;

	if (h == NULL)
		return -1;
	cu.init = dlsym(h, "cuInit");
	cu.device_get = dlsym(h, "cuDeviceGet");
	cu.ctx_create = dlsym(h, "cuCtxCreate_v2");
	cu.mem_alloc = dlsym(h, "cuMemAlloc_v2");
	cu.host_alloc = dlsym(h, "cuMemHostAlloc");
	cu.htod = dlsym(h, "cuMemcpyHtoD_v2");
	cu.dtoh = dlsym(h, "cuMemcpyDtoH_v2");
	if (!cu.init || !cu.device_get || !cu.ctx_create || !cu.mem_alloc || !cu.host_alloc ||
	    !cu.htod || !cu.dtoh)
		return -1;
	if (cu.init(0) != 0 || cu.device_get(&dev, 0) != 0 || cu.ctx_create(&ctx, 0, dev) != 0)
		return -1;
	return 0;
}

struct staged {
	sh_file *f;
	uint8_t *host;
	uint64_t size;
	atomic_uint_fast64_t next;
	void *ctx;
	int err;
};

static void *
staged_reader(void *arg)
{
	struct staged *s = arg;

	for (;;) {
		uint64_t off = atomic_fetch_add(&s->next, CHUNK);
		size_t n;

		if (off >= s->size)
			return NULL;
		n = s->size - off < CHUNK ? (size_t)(s->size - off) : CHUNK;
		if (sh_pread(s->f, s->host + off, n, off) != (long)n)
			s->err = -EIO;
	}
}

int
main(int argc, char **argv)
{
	unsigned gib = getenv("SH_BENCH_GIB") ? (unsigned)atoi(getenv("SH_BENCH_GIB")) : 4;
	unsigned port = getenv("SH_BENCH_PORT") ? (unsigned)atoi(getenv("SH_BENCH_PORT")) : 7880;
	char self[PATH_MAX], bin[PATH_MAX], tmp[] = "/var/tmp/shoal-bench-gpu-XXXXXX";
	uint64_t size = (uint64_t)gib << 30;
	unsigned long long dptr;
	uint8_t *host, *back, *wbuf;
	struct staged st = { 0 };
	pthread_t th[GPU_INFLIGHT];
	double t0, staged_s, device_s;
	sh_client *cl;
	sh_fs *fs;
	sh_file *f;
	long got;

	(void)argc;
	if (gib == 0)
		bench_die("bench/gpu", "bad SH_BENCH_GIB");
	if (cuda_up() < 0) {
		printf("bench/gpu: no CUDA driver or no GPU here: nothing to measure\n");
		return 0;
	}
	if (cu.mem_alloc(&dptr, size) != 0 || cu.host_alloc((void **)&host, size, 0) != 0)
		bench_die("bench/gpu", "cannot allocate %u GiB on the device and pinned", gib);
	back = malloc(size);
	wbuf = malloc(CHUNK);
	if (back == NULL || wbuf == NULL || mkdtemp(tmp) == NULL)
		bench_die("bench/gpu", "no memory or no temporary directory");
	snprintf(self, sizeof(self), "%s", argv[0]);
	snprintf(bin, sizeof(bin), "%s/../bin/shoal", dirname(self));
	printf("bench/gpu: 6-node local cluster in %s, 4+2, a %u GiB file\n", tmp, gib);
	fflush(stdout);
	bench_cluster_fs("bench/gpu", bin, tmp, port, gib + 2, "g", "/f", &cl, &fs);
	if (sh_open(fs, "/f", O_WRONLY | O_TRUNC, 0, &f) < 0)
		bench_die("bench/gpu", "open the file");
	for (uint64_t off = 0; off < size; off += CHUNK) {
		for (size_t k = 0; k < CHUNK; k += 8)
			*(uint64_t *)(wbuf + k) = (off + k) * 0x9e3779b97f4a7c15ull;
		if (sh_pwrite(f, wbuf, CHUNK, off) != CHUNK)
			bench_die("bench/gpu", "write at %llu", (unsigned long long)off);
	}
	if (sh_close(f) < 0 || sh_open(fs, "/f", O_RDONLY, 0, &f) < 0)
		bench_die("bench/gpu", "close and open the file");

	/* staged: pinned host memory, then one copy */
	st = (struct staged){ .f = f, .host = host, .size = size };
	t0 = bench_now();
	for (int i = 0; i < GPU_INFLIGHT; i++)
		pthread_create(&th[i], NULL, staged_reader, &st);
	for (int i = 0; i < GPU_INFLIGHT; i++)
		pthread_join(th[i], NULL);
	if (st.err < 0 || cu.htod(dptr, host, size) != 0)
		bench_die("bench/gpu", "the staged read");
	staged_s = bench_now() - t0;

	/* device: sh_pread_device */
	t0 = bench_now();
	got = sh_pread_device(f, (void *)(uintptr_t)dptr, size, 0, 0);
	device_s = bench_now() - t0;
	if (got != (long)size)
		bench_die("bench/gpu", "sh_pread_device: %ld (%s)", got,
			  got < 0 ? sh_strerror((int)got) : "short");
	if (cu.dtoh(back, dptr, size) != 0 || memcmp(back, host, size) != 0)
		bench_die("bench/gpu", "the device's bytes differ from the file's");
	sh_close(f);
	sh_fs_close(fs);
	sh_client_close(cl);
	printf("staged (pinned read, one copy): %.2f GiB/s; sh_pread_device: %.2f GiB/s\n",
	       gib / staged_s, gib / device_s);
	printf(
	    "BENCH gpu {\"device_gib_s\":%.3f,\"staged_gib_s\":%.3f,\"device_vs_staged\":%.3f}\n",
	    gib / device_s, gib / staged_s, staged_s / device_s);
	return 0;
}
