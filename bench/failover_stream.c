// SPDX-License-Identifier: Apache-2.0
/*
 * The stream bench/failover runs inside a client's network namespace:
 * sequential writes of SIZE bytes through the library, one after another,
 * into files of 64 MiB (the oldest removed once KEEP are there, so that
 * a long stream does not fill the drives), for SECONDS; each write's end
 * time and latency
 * (CLOCK_MONOTONIC, which every namespace shares, so the driver can line
 * them up with its link cuts) and status, one line each:
 *
 *   T_NS LAT_NS STATUS OP
 *
 * (OP: w a write, c a file's close, u the removal of an old one, o an open).
 * then "done WRITES ERRORS BYTES SECONDS". With --verify the files kept
 * are read back and compared at the end ("verify FILES MISMATCHES").
 *
 * usage: failover_stream MGMT FS SECONDS SIZE [--verify]
 */
#include <errno.h>
#include <string.h>

#include "bench.h"

#define NAME	  "failover_stream"
#define FILE_SIZE (64ull << 20)
#define KEEP	  3

static uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * The bytes at offset off of file k: a pattern the read-back can check,
 * and that compression cannot shrink (the links, not lz4, are measured).
 */
static void
fill(uint8_t *b, size_t len, unsigned k, uint64_t off)
{
	uint64_t x = ((uint64_t)k << 40) ^ off ^ 0x9e3779b97f4a7c15ull;

	for (size_t i = 0; i < len; i += 8) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		memcpy(b + i, &x, len - i < 8 ? len - i : 8);
	}
}

/* One line: the op's end, how long it took from start, its status. */
static void
report(uint64_t start, long rc, char op)
{
	uint64_t t = now_ns();

	printf("%llu %llu %ld %c\n", (unsigned long long)t, (unsigned long long)(t - start),
	       rc < 0 ? rc : 0, op);
}

static unsigned
verify(sh_fs *fs, unsigned first, unsigned files, uint64_t last_len, size_t size)
{
	uint8_t *want = malloc(size), *got = malloc(size);
	unsigned bad = 0;

	if (want == NULL || got == NULL)
		bench_die(NAME, "out of memory");
	for (unsigned k = first; k < files; k++) {
		uint64_t len = k + 1 == files ? last_len : FILE_SIZE;
		char path[64];
		sh_file *f;

		snprintf(path, sizeof(path), "/stream/f%u", k);
		if (sh_open(fs, path, O_RDONLY, 0, &f) < 0) {
			bad++;
			continue;
		}
		for (uint64_t off = 0; off < len; off += size) {
			long n = sh_pread(f, got, size, off);

			fill(want, size, k, off);
			if (n != (long)size || memcmp(want, got, size) != 0) {
				bad++;
				break;
			}
		}
		sh_close(f);
	}
	free(want);
	free(got);
	return bad;
}

int
main(int argc, char **argv)
{
	sh_client *c;
	sh_fs *fs;
	sh_file *f = NULL;
	uint8_t *buf;
	size_t size;
	double secs;
	uint64_t a, end, t0, off = 0, bytes = 0, writes = 0, errors = 0;
	unsigned k = 0;
	int rc;

	if (argc < 5) {
		fprintf(stderr, "usage: %s MGMT FS SECONDS SIZE [--verify]\n", NAME);
		return 2;
	}
	secs = atof(argv[3]);
	size = (size_t)strtoull(argv[4], NULL, 10);
	if (secs <= 0 || size == 0 || size > FILE_SIZE || FILE_SIZE % size != 0)
		bench_die(NAME, "SECONDS > 0 and SIZE dividing 64 MiB, please");
	buf = malloc(size);
	if (buf == NULL)
		bench_die(NAME, "out of memory");
	rc = sh_client_connect(argv[1], NULL, &c);
	if (rc == 0)
		rc = sh_fs_open(c, argv[2], &fs);
	if (rc < 0)
		bench_die(NAME, "connect %s / %s: %s", argv[1], argv[2], sh_strerror(rc));
	rc = sh_mkdir(fs, "/stream", 0755);
	if (rc < 0 && rc != -EEXIST)
		bench_die(NAME, "mkdir /stream: %s", sh_strerror(rc));
	t0 = now_ns();
	end = t0 + (uint64_t)(secs * 1e9);
	while (now_ns() < end) {
		long n;

		if (f == NULL) {
			char path[64];

			snprintf(path, sizeof(path), "/stream/f%u", k);
			a = now_ns();
			rc = sh_open(fs, path, O_WRONLY | O_CREAT | O_TRUNC, 0644, &f);
			report(a, rc, 'o');
			if (rc < 0)
				bench_die(NAME, "open %s: %s", path, sh_strerror(rc));
		}
		fill(buf, size, k, off);
		a = now_ns();
		n = sh_pwrite(f, buf, size, off);
		report(a, n, 'w');
		writes++;
		if (n != (long)size) {
			errors++;
			continue; /* the same bytes again: the file must hold them in the end */
		}
		bytes += size;
		off += size;
		if (off == FILE_SIZE) {
			a = now_ns();
			rc = sh_close(f);
			report(a, rc, 'c');
			if (rc < 0)
				errors++;
			f = NULL;
			off = 0;
			k++;
			if (k >= KEEP) {
				char old[64];

				snprintf(old, sizeof(old), "/stream/f%u", k - KEEP);
				a = now_ns();
				rc = sh_unlink(fs, old);
				report(a, rc, 'u');
				if (rc < 0)
					errors++;
			}
		}
	}
	if (f != NULL && sh_close(f) < 0)
		errors++;
	printf("done %llu %llu %llu %.3f\n", (unsigned long long)writes, (unsigned long long)errors,
	       (unsigned long long)bytes, (now_ns() - t0) / 1e9);
	if (argc > 5 && strcmp(argv[5], "--verify") == 0)
		printf("verify %u %u\n", k + (off > 0) - (k >= KEEP ? k - KEEP + 1 : 0),
		       verify(fs, k >= KEEP ? k - KEEP + 1 : 0, k + (off > 0), off, size));
	sh_fs_close(fs);
	sh_client_close(c);
	free(buf);
	return 0;
}
