// SPDX-License-Identifier: Apache-2.0
/*
 * bench/crc32c: checksum speed of sh_crc32c (ISA-L) on 64 KiB blocks, as a
 * ratio to memcpy of the same bytes (the baseline: a checksum that costs
 * less than a copy is free on the data path) and to the portable table
 * version. Ends with: BENCH crc32c {...}
 */
#include <stdio.h>
#include <string.h>

#include "../src/base/base.h"

#define BLOCK	 (64 << 10)
#define TOTAL	 (512ull << 20)
#define SW_TOTAL (32ull << 20)

static volatile uint32_t sink;

static double
gbps(uint64_t bytes, uint64_t ns)
{
	return (double)bytes / (double)ns;
}

int
main(void)
{
	static unsigned char src[BLOCK], dst[BLOCK];
	struct sh_rand r;
	uint64_t t0, t_isal, t_memcpy, t_sw;
	uint32_t c = 0;
	double isal, mc, sw;

	sh_rand_seed(&r, 1);
	sh_rand_fill(&r, src, sizeof(src));
	/* warm up */
	for (int i = 0; i < 64; i++)
		c = sh_crc32c(c, src, BLOCK);

	t0 = sh_clock_mono_ns();
	for (uint64_t done = 0; done < TOTAL; done += BLOCK)
		c = sh_crc32c(c, src, BLOCK);
	t_isal = sh_clock_mono_ns() - t0;

	t0 = sh_clock_mono_ns();
	for (uint64_t done = 0; done < TOTAL; done += BLOCK) {
		memcpy(dst, src, BLOCK);
		__asm__ volatile("" : : "r"(dst) : "memory");
	}
	t_memcpy = sh_clock_mono_ns() - t0;

	t0 = sh_clock_mono_ns();
	for (uint64_t done = 0; done < SW_TOTAL; done += BLOCK)
		c = sh_crc32c_sw(c, src, BLOCK);
	t_sw = sh_clock_mono_ns() - t0;
	sink = c;

	isal = gbps(TOTAL, t_isal);
	mc = gbps(TOTAL, t_memcpy);
	sw = gbps(SW_TOTAL, t_sw);
	printf("crc32c ISA-L      %6.2f GB/s\n", isal);
	printf("memcpy (baseline) %6.2f GB/s\n", mc);
	printf("crc32c table      %6.2f GB/s\n", sw);
	printf("BENCH crc32c "
	       "{\"block\":%d,\"isal_gbps\":%.2f,\"memcpy_gbps\":%.2f,\"table_gbps\":%.2f,"
	       "\"ratio_vs_memcpy\":%.2f,\"ratio_vs_table\":%.1f}\n",
	       BLOCK, isal, mc, sw, isal / mc, isal / sw);
	return 0;
}
