// SPDX-License-Identifier: Apache-2.0
/* Real disks: io_uring with O_DIRECT writes and reads back, many in flight, errors and cancel. */
#include <errno.h>
#include <stdio.h>
#include <unistd.h>

#include "../../../src/env/env_real.h"
#include "../../lib/test.h"

#define DISK_SIZE (16u << 20)
#define NREQ	  600 /* more than the ring's 256 entries: exercises the backlog */
#define BS	  4096

struct io {
	struct env_disk_req r;
	struct iovec iov;
	int done;
	int result;
};

static int completed;

static void
io_cb(struct env_disk_req *r, int result)
{
	struct io *io = sh_container_of(r, struct io, r);

	io->done++;
	io->result = result;
	completed++;
}

static void
wait_for(struct env *env, int want)
{
	uint64_t end = sh_clock_mono_ns() + 20 * SH_NSEC_PER_SEC;

	while (completed < want && sh_clock_mono_ns() < end)
		SH_ASSERT_OK(env_real_run_once(env, 10 * SH_NSEC_PER_MSEC));
	SH_ASSERT_EQ(completed, want);
}

static struct env_disk *
open_disk(struct env *env, const char *path, unsigned flags)
{
	struct env_disk *d = NULL;
	int rc = env_disk_open(env, path, flags, DISK_SIZE, &d);

	if (rc == -EINVAL && (flags & ENV_DISK_DIRECT))
		sh_test_skip("%s is on a file system without O_DIRECT", path);
	if (rc == -ENOSYS)
		sh_test_skip("io_uring is not available here");
	SH_ASSERT_OK(rc);
	return d;
}

static void
submit(struct env_disk *d, struct io *io, enum env_disk_op op, uint64_t off, void *buf, size_t len)
{
	memset(io, 0, sizeof(*io));
	io->iov = (struct iovec){ buf, len };
	io->r = (struct env_disk_req){
		.op = op, .off = off, .iov = &io->iov, .iovcnt = 1, .cb = io_cb
	};
	SH_ASSERT_OK(env_disk_submit(d, &io->r));
}

static void
write_read(enum env_real_mode mode)
{
	struct env_real_opts o = { .mode = mode };
	struct env *env = env_real_create(&o);
	char path[4200];
	struct env_disk *d;
	struct env_disk_info info;
	static struct io ios[NREQ];
	struct io fs;
	unsigned char *wbuf = sh_aligned_alloc(BS, (size_t)NREQ * BS);
	unsigned char *rbuf = sh_aligned_alloc(BS, (size_t)NREQ * BS);
	struct sh_rand rng;

	SH_ASSERT_NOT_NULL(env);
	snprintf(path, sizeof(path), "%s/disk0", sh_test_dir());
	d = open_disk(env, path, ENV_DISK_CREATE | ENV_DISK_DIRECT);
	env_disk_info(d, &info);
	SH_ASSERT_EQ(info.size, DISK_SIZE);
	SH_ASSERT(info.direct);
	sh_rand_seed(&rng, sh_test_seed());
	sh_rand_fill(&rng, wbuf, (size_t)NREQ * BS);
	completed = 0;
	/* every other block, so the holes must read back as zeros */
	for (int i = 0; i < NREQ; i++)
		submit(d, &ios[i], ENV_DISK_WRITE, (uint64_t)i * 2 * BS, wbuf + (size_t)i * BS, BS);
	wait_for(env, NREQ);
	for (int i = 0; i < NREQ; i++) {
		SH_ASSERT_EQ(ios[i].done, 1);
		SH_ASSERT_EQ(ios[i].result, BS);
	}
	submit(d, &fs, ENV_DISK_FSYNC, 0, NULL, 0);
	wait_for(env, NREQ + 1);
	SH_ASSERT_EQ(fs.result, 0);
	env_disk_close(d);

	/* reopen: what was written and flushed is there */
	d = open_disk(env, path, ENV_DISK_DIRECT);
	env_disk_info(d, &info);
	SH_ASSERT_EQ(info.size, DISK_SIZE);
	completed = 0;
	memset(rbuf, 0xAA, (size_t)NREQ * BS);
	for (int i = 0; i < NREQ / 2; i++)
		submit(d, &ios[i], ENV_DISK_READ, (uint64_t)i * 2 * BS, rbuf + (size_t)i * BS, BS);
	wait_for(env, NREQ / 2);
	for (int i = 0; i < NREQ / 2; i++)
		SH_ASSERT_EQ(ios[i].result, BS);
	SH_ASSERT_MEMEQ(rbuf, wbuf, (size_t)NREQ / 2 * BS);
	/* a hole */
	completed = 0;
	submit(d, &ios[0], ENV_DISK_READ, BS, rbuf, BS);
	wait_for(env, 1);
	for (int k = 0; k < BS; k++)
		SH_ASSERT_EQ(rbuf[k], 0);
	env_disk_close(d);
	env_real_run_once(env, 0);
	env_real_destroy(env);
	sh_free(wbuf);
	sh_free(rbuf);
}

TEST(disk_direct_write_read_event_mode)
{
	write_read(ENV_REAL_EVENT);
}

TEST(disk_direct_write_read_poll_mode)
{
	write_read(ENV_REAL_POLL);
}

TEST(disk_bad_requests)
{
	struct env *env = env_real_create(NULL);
	char path[4200];
	struct env_disk *d, *d2;
	unsigned char *buf = sh_aligned_alloc(BS, 2 * BS);
	struct io io;
	struct iovec iov;

	snprintf(path, sizeof(path), "%s/disk1", sh_test_dir());
	d = open_disk(env, path, ENV_DISK_CREATE | ENV_DISK_DIRECT);
	memset(&io, 0, sizeof(io));
	io.r.cb = io_cb;
	io.r.iov = &iov;
	io.r.iovcnt = 1;
	io.r.op = ENV_DISK_WRITE;
	iov = (struct iovec){ buf + 1, BS }; /* misaligned buffer */
	SH_ASSERT_ERR(env_disk_submit(d, &io.r), -EINVAL);
	iov = (struct iovec){ buf, 100 }; /* length not a block multiple */
	SH_ASSERT_ERR(env_disk_submit(d, &io.r), -EINVAL);
	iov = (struct iovec){ buf, BS };
	io.r.off = 512; /* misaligned offset */
	SH_ASSERT_ERR(env_disk_submit(d, &io.r), -EINVAL);
	io.r.off = DISK_SIZE; /* past the end */
	SH_ASSERT_ERR(env_disk_submit(d, &io.r), -ERANGE);
	io.r.off = DISK_SIZE - BS;
	iov.iov_len = 2 * BS; /* runs off the end */
	SH_ASSERT_ERR(env_disk_submit(d, &io.r), -ERANGE);
	iov.iov_len = BS;
	io.r.iovcnt = 0;
	SH_ASSERT_ERR(env_disk_submit(d, &io.r), -EINVAL);
	io.r.iovcnt = ENV_DISK_IOV_MAX + 1;
	SH_ASSERT_ERR(env_disk_submit(d, &io.r), -EINVAL);
	io.r.iovcnt = 1;
	io.r.op = (enum env_disk_op)7;
	SH_ASSERT_ERR(env_disk_submit(d, &io.r), -EINVAL);
	io.r.op = ENV_DISK_WRITE;
	io.r.cb = NULL;
	SH_ASSERT_ERR(env_disk_submit(d, &io.r), -EINVAL);
	SH_ASSERT_EQ(io.done, 0); /* refused calls never call back */

	/* opening */
	SH_ASSERT_ERR(env_disk_open(env, "", 0, 0, &d2), -EINVAL);
	SH_ASSERT_ERR(env_disk_open(env, path, ENV_DISK_CREATE, 1000, &d2), -EINVAL);
	SH_ASSERT_ERR(env_disk_open(env, path, 0x80, 0, &d2), -EINVAL);
	{
		char missing[4300];

		snprintf(missing, sizeof(missing), "%s/none", sh_test_dir());
		SH_ASSERT_ERR(env_disk_open(env, missing, 0, 0, &d2), -ENOENT);
	}
	env_disk_close(d);
	env_real_destroy(env);
	sh_free(buf);
}

TEST(disk_fault_points_and_cancel)
{
	struct env *env = env_real_create(NULL);
	char path[4200];
	struct env_disk *d;
	unsigned char *buf = sh_aligned_alloc(BS, 8 * BS);
	struct io io[8];

	snprintf(path, sizeof(path), "%s/disk2", sh_test_dir());
	d = open_disk(env, path, ENV_DISK_CREATE | ENV_DISK_DIRECT);
	completed = 0;
	SH_ASSERT_OK(sh_fault_arm(FP_ENV_DISK_WRITE_EIO, "once", NULL, 0));
	submit(d, &io[0], ENV_DISK_WRITE, 0, buf, BS);
	submit(d, &io[1], ENV_DISK_WRITE, BS, buf, BS);
	SH_ASSERT_EQ(io[0].done, 0);			     /* never inside submit */
	SH_ASSERT_ERR(env_disk_submit(d, &io[0].r), -EBUSY); /* still in flight */
	wait_for(env, 2);
	SH_ASSERT_ERR(io[0].result, -EIO);
	SH_ASSERT_EQ(io[1].result, BS);
	SH_ASSERT_OK(sh_fault_arm(FP_ENV_DISK_FSYNC_EIO, "once", NULL, 0));
	submit(d, &io[2], ENV_DISK_FSYNC, 0, NULL, 0);
	SH_ASSERT_OK(sh_fault_arm(FP_ENV_DISK_READ_EIO, "once", NULL, 0));
	submit(d, &io[3], ENV_DISK_READ, 0, buf, BS);
	wait_for(env, 4);
	SH_ASSERT_ERR(io[2].result, -EIO);
	SH_ASSERT_ERR(io[3].result, -EIO);

	/* closing with requests pending abandons them: no callback, ever, after close */
	completed = 0;
	for (int i = 0; i < 8; i++)
		submit(d, &io[i], ENV_DISK_WRITE, (uint64_t)i * BS, buf + (size_t)i * BS, BS);
	env_disk_close(d);
	for (int i = 0; i < 20; i++)
		SH_ASSERT_OK(env_real_run_once(env, SH_NSEC_PER_MSEC));
	SH_ASSERT_EQ(completed, 0);
	for (int i = 0; i < 8; i++)
		SH_ASSERT(!io[i].r.inflight);
	env_real_destroy(env);
	sh_free(buf);
}

TEST(disk_registered_buffers)
{
	struct env *env = env_real_create(NULL);
	char path[4200];
	struct env_disk *d;
	enum { N = 64 };
	unsigned char *wbuf = sh_aligned_alloc(BS, (size_t)N * BS);
	unsigned char *rbuf = sh_aligned_alloc(BS, (size_t)N * BS);
	unsigned char *other = sh_aligned_alloc(BS, 2 * BS);
	static struct io ios[N];
	struct io two;
	struct iovec iov2[2];
	struct sh_rand rng;
	int ws, rs, slots[ENV_DISK_BUFS_MAX];

	snprintf(path, sizeof(path), "%s/disk3", sh_test_dir());
	d = open_disk(env, path, ENV_DISK_CREATE | ENV_DISK_DIRECT);
	SH_ASSERT_ERR(env_disk_buf_register(env, wbuf + 1, BS), -EINVAL);
	SH_ASSERT_ERR(env_disk_buf_register(env, wbuf, 100), -EINVAL);
	ws = env_disk_buf_register(env, wbuf, (size_t)N * BS);
	if (ws == -EOPNOTSUPP || ws == -ENOMEM)
		sh_test_skip("this kernel or RLIMIT_MEMLOCK refuses fixed buffers (%d)", ws);
	SH_ASSERT(ws >= 0);
	rs = env_disk_buf_register(env, rbuf, (size_t)N * BS);
	SH_ASSERT(rs >= 0 && rs != ws);

	sh_rand_seed(&rng, sh_test_seed());
	sh_rand_fill(&rng, wbuf, (size_t)N * BS);
	completed = 0;
	for (int i = 0; i < N; i++)
		submit(d, &ios[i], i % 2 ? ENV_DISK_WRITE_DSYNC : ENV_DISK_WRITE, (uint64_t)i * BS,
		       wbuf + (size_t)i * BS, BS);
	for (int i = 0; i < N; i++)
		SH_ASSERT_EQ(ios[i].r.buf_slot, ws);
	/* two iovecs, or memory outside every region: the ordinary path */
	memset(&two, 0, sizeof(two));
	memcpy(other, wbuf, 2 * BS);
	iov2[0] = (struct iovec){ other, BS };
	iov2[1] = (struct iovec){ other + BS, BS };
	two.r = (struct env_disk_req){
		.op = ENV_DISK_WRITE, .off = (uint64_t)N * BS, .iov = iov2, .iovcnt = 2, .cb = io_cb
	};
	SH_ASSERT_OK(env_disk_submit(d, &two.r));
	SH_ASSERT_EQ(two.r.buf_slot, -1);
	wait_for(env, N + 1);
	for (int i = 0; i < N; i++)
		SH_ASSERT_EQ(ios[i].result, BS);
	SH_ASSERT_EQ(two.result, 2 * BS);

	completed = 0;
	memset(rbuf, 0, (size_t)N * BS);
	for (int i = 0; i < N; i++)
		submit(d, &ios[i], ENV_DISK_READ, (uint64_t)i * BS, rbuf + (size_t)i * BS, BS);
	SH_ASSERT_EQ(ios[0].r.buf_slot, rs);
	wait_for(env, N);
	SH_ASSERT_MEMEQ(rbuf, wbuf, (size_t)N * BS);
	/* a range that starts inside the region but runs past it is not fixed */
	completed = 0;
	submit(d, &ios[0], ENV_DISK_READ, 0, rbuf + (size_t)(N - 1) * BS, 2 * BS);
	SH_ASSERT_EQ(ios[0].r.buf_slot, -1);
	wait_for(env, 1);
	SH_ASSERT_EQ(ios[0].result, 2 * BS);

	/* unregistered: the same memory goes the ordinary way and still works */
	env_disk_buf_unregister(env, rs);
	completed = 0;
	memset(rbuf, 0, BS);
	submit(d, &ios[0], ENV_DISK_READ, 0, rbuf, BS);
	SH_ASSERT_EQ(ios[0].r.buf_slot, -1);
	wait_for(env, 1);
	SH_ASSERT_MEMEQ(rbuf, wbuf, BS);

	/* the table is finite */
	for (int i = 0; i < ENV_DISK_BUFS_MAX; i++)
		slots[i] = -1;
	for (int i = 0; i < ENV_DISK_BUFS_MAX - 1; i++) {
		slots[i] = env_disk_buf_register(env, other, BS);
		SH_ASSERT(slots[i] >= 0);
	}
	SH_ASSERT_ERR(env_disk_buf_register(env, other, BS), -ENOSPC);
	for (int i = 0; i < ENV_DISK_BUFS_MAX; i++)
		env_disk_buf_unregister(env, slots[i]);
	env_disk_buf_unregister(env, ws);
	env_disk_buf_unregister(env, ws); /* twice: harmless */
	SH_ASSERT_EQ(env->nbufs, 0);
	env_disk_close(d);
	env_real_destroy(env);
	sh_free(wbuf);
	sh_free(rbuf);
	sh_free(other);
}
