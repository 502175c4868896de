// SPDX-License-Identifier: Apache-2.0
/* Vectored and asynchronous file calls (include/shoal/client.h, docs/client.md "Data"). */
#include <errno.h>
#include <string.h>
#include <sys/uio.h>

#include "client_int.h"

static long
iov_total(const struct iovec *iov, int iovcnt)
{
	size_t total = 0;

	if (iovcnt < 0 || iovcnt > SH_IOV_MAX || (iovcnt > 0 && iov == NULL))
		return -EINVAL;
	for (int i = 0; i < iovcnt; i++) {
		if (iov[i].iov_len > ((size_t)1 << 40) || total > ((size_t)1 << 40))
			return -EINVAL;
		total += iov[i].iov_len;
	}
	return (long)total;
}

long
sh_preadv(sh_file *f, const struct iovec *iov, int iovcnt, uint64_t off)
{
	long total = iov_total(iov, iovcnt), n;
	uint8_t *tmp;
	size_t done = 0;

	if (total <= 0)
		return total;
	if (iovcnt == 1)
		return sh_pread(f, iov[0].iov_base, iov[0].iov_len, off);
	/* one read of the whole range (one extent lookup, fragments in parallel), scattered */
	tmp = sh_malloc((size_t)total);
	if (tmp == NULL)
		return -ENOMEM;
	n = sh_pread(f, tmp, (size_t)total, off);
	for (int i = 0; n > 0 && i < iovcnt && done < (size_t)n; i++) {
		size_t k = iov[i].iov_len < (size_t)n - done ? iov[i].iov_len : (size_t)n - done;

		memcpy(iov[i].iov_base, tmp + done, k);
		done += k;
	}
	sh_free(tmp);
	return n;
}

long
sh_pwritev(sh_file *f, const struct iovec *iov, int iovcnt, uint64_t off)
{
	long total = iov_total(iov, iovcnt);
	uint64_t at = off;

	if (total <= 0)
		return total;
	/* each piece goes into the handle's stripe buffer where the last one ended */
	for (int i = 0; i < iovcnt; i++) {
		long n;

		if (iov[i].iov_len == 0)
			continue;
		n = sh_pwrite(f, iov[i].iov_base, iov[i].iov_len, at);
		if (n < 0)
			return n;
		at += iov[i].iov_len;
	}
	return total;
}

static void
run_io(void *arg)
{
	sh_io *io = arg;

	switch (io->op) {
	case SH_IO_READ:
		io->result = sh_preadv(io->f, io->iov, io->iovcnt, io->off);
		break;
	case SH_IO_WRITE:
		io->result = sh_pwritev(io->f, io->iov, io->iovcnt, io->off);
		break;
	default:
		io->result = sh_fsync(io->f);
	}
	io->cb(io);
}

int
sh_io_submit(sh_io *io)
{
	if (io == NULL || io->f == NULL || io->cb == NULL)
		return -EINVAL;
	if (io->op != SH_IO_READ && io->op != SH_IO_WRITE && io->op != SH_IO_FSYNC)
		return -EINVAL;
	if (io->op != SH_IO_FSYNC && iov_total(io->iov, io->iovcnt) < 0)
		return -EINVAL;
	return wpool_run(client_file_fs(io->f), WPOOL_AIO, run_io, io);
}
