// SPDX-License-Identifier: Apache-2.0
/* Fault points: every mode, spec parsing and its errors, SH_FAULTS from the environment. */
#include <errno.h>
#include <stdlib.h>

#include "../../../src/base/base.h"
#include "../../lib/test.h"

static int
count_fires(enum sh_fault_id id, int hits)
{
	int n = 0;

	for (int i = 0; i < hits; i++)
		n += SH_FAULT(id);
	return n;
}

TEST(fault_unarmed_never_fires)
{
	SH_ASSERT_EQ(count_fires(FP_ENV_DISK_WRITE_EIO, 1000), 0);
	SH_ASSERT_EQ(sh_fault_hits(FP_ENV_DISK_WRITE_EIO), 0);
}

TEST(fault_modes)
{
	SH_ASSERT_OK(sh_fault_arm(FP_ENV_DISK_WRITE_EIO, "once", NULL, 0));
	SH_ASSERT_EQ(count_fires(FP_ENV_DISK_WRITE_EIO, 10), 1);
	SH_ASSERT_EQ(sh_fault_armed_count, 0);

	SH_ASSERT_OK(sh_fault_arm(FP_ENV_DISK_WRITE_EIO, "always", NULL, 0));
	SH_ASSERT_EQ(count_fires(FP_ENV_DISK_WRITE_EIO, 10), 10);

	SH_ASSERT_OK(sh_fault_arm(FP_ENV_DISK_WRITE_EIO, "every=3", NULL, 0));
	SH_ASSERT_EQ(count_fires(FP_ENV_DISK_WRITE_EIO, 10), 3);

	SH_ASSERT_OK(sh_fault_arm(FP_ENV_DISK_WRITE_EIO, "nth=4", NULL, 0));
	SH_ASSERT_EQ(count_fires(FP_ENV_DISK_WRITE_EIO, 3), 0);
	SH_ASSERT_EQ(count_fires(FP_ENV_DISK_WRITE_EIO, 1), 1);
	SH_ASSERT_EQ(count_fires(FP_ENV_DISK_WRITE_EIO, 10), 0);
	SH_ASSERT_EQ(sh_fault_fired(FP_ENV_DISK_WRITE_EIO), 1);

	SH_ASSERT_OK(sh_fault_arm(FP_ENV_DISK_WRITE_EIO, "off", NULL, 0));
	SH_ASSERT_EQ(count_fires(FP_ENV_DISK_WRITE_EIO, 10), 0);
	SH_ASSERT_EQ(sh_fault_armed_count, 0);
}

TEST(fault_prob_is_seeded)
{
	int a, b, c;

	sh_fault_seed(99);
	SH_ASSERT_OK(sh_fault_arm(FP_ENV_DGRAM_SEND_DROP, "prob=0.25", NULL, 0));
	a = count_fires(FP_ENV_DGRAM_SEND_DROP, 10000);
	sh_fault_seed(99);
	SH_ASSERT_OK(sh_fault_arm(FP_ENV_DGRAM_SEND_DROP, "prob=0.25", NULL, 0));
	b = count_fires(FP_ENV_DGRAM_SEND_DROP, 10000);
	SH_ASSERT_EQ(a, b);
	SH_ASSERT_GT(a, 2200);
	SH_ASSERT_LT(a, 2800);
	SH_ASSERT_OK(sh_fault_arm(FP_ENV_DGRAM_SEND_DROP, "prob=0", NULL, 0));
	c = count_fires(FP_ENV_DGRAM_SEND_DROP, 1000);
	SH_ASSERT_EQ(c, 0);
	SH_ASSERT_OK(sh_fault_arm(FP_ENV_DGRAM_SEND_DROP, "prob=1", NULL, 0));
	SH_ASSERT_EQ(count_fires(FP_ENV_DGRAM_SEND_DROP, 100), 100);
	sh_fault_disarm_all();
}

TEST(fault_spec_applies_all)
{
	SH_ASSERT_OK(sh_fault_arm_spec(
	    "env.disk.read_eio:always,alloc:off,env.dgram.recv_drop:every=2", NULL, 0));
	SH_ASSERT_EQ(count_fires(FP_ENV_DISK_READ_EIO, 5), 5);
	SH_ASSERT_EQ(count_fires(FP_ENV_DGRAM_RECV_DROP, 4), 2);
	SH_ASSERT_EQ(count_fires(FP_ALLOC, 4), 0);
	sh_fault_disarm_all();
	SH_ASSERT_EQ(sh_fault_armed_count, 0);
}

TEST(fault_spec_errors_are_clear_and_atomic)
{
	char err[256];
	static const char *const bad[] = {
		"nosuch.point:once",
		"env.disk.read_eio",
		"env.disk.read_eio:sometimes",
		"env.disk.read_eio:every=0",
		"env.disk.read_eio:every=x",
		"env.disk.read_eio:prob=1.5",
		"env.disk.read_eio:prob=-1",
		"env.disk.read_eio:nth=",
		"env.disk.read_eio:once=3",
		":once",
		"env.disk.read_eio:every=99999999999999999999",
	};

	for (size_t i = 0; i < SH_ARRAY_SIZE(bad); i++) {
		err[0] = '\0';
		SH_ASSERT_ERR(sh_fault_arm_spec(bad[i], err, sizeof(err)), -EINVAL);
		SH_ASSERT_MSG(strstr(err, "SH_FAULTS") != NULL, "no reason for '%s': '%s'", bad[i],
			      err);
	}
	/* a good item before a bad one is not applied */
	SH_ASSERT_ERR(sh_fault_arm_spec("env.disk.read_eio:always,bogus:once", err, sizeof(err)),
		      -EINVAL);
	SH_ASSERT(strstr(err, "bogus") != NULL);
	SH_ASSERT_EQ(count_fires(FP_ENV_DISK_READ_EIO, 3), 0);
	SH_ASSERT_ERR(sh_fault_arm(FP__COUNT, "once", err, sizeof(err)), -EINVAL);
	SH_ASSERT_ERR(sh_fault_arm(FP_ALLOC, "twice", err, sizeof(err)), -EINVAL);
}

TEST(fault_from_environment)
{
	setenv("SH_FAULTS", "env.disk.fsync_eio:once", 1);
	setenv("SH_FAULTS_SEED", "7", 1);
	SH_ASSERT_OK(sh_fault_init_from_env());
	SH_ASSERT_EQ(count_fires(FP_ENV_DISK_FSYNC_EIO, 3), 1);

	setenv("SH_FAULTS", "what:ever", 1);
	SH_ASSERT_ERR(sh_fault_init_from_env(), -EINVAL);
	setenv("SH_FAULTS", "", 1);
	setenv("SH_FAULTS_SEED", "seven", 1);
	SH_ASSERT_ERR(sh_fault_init_from_env(), -EINVAL);
	unsetenv("SH_FAULTS");
	unsetenv("SH_FAULTS_SEED");
}

TEST(fault_names_are_unique)
{
	for (int i = 0; i < FP__COUNT; i++) {
		const char *n = sh_fault_name((enum sh_fault_id)i);

		SH_ASSERT_EQ(sh_fault_lookup(n, strlen(n)), i);
		SH_ASSERT(strlen(sh_fault_doc((enum sh_fault_id)i)) > 0);
	}
	SH_ASSERT_ERR(sh_fault_lookup("alloc2", 6), -ENOENT);
	SH_ASSERT_STREQ(sh_fault_name(FP__COUNT), "?");
}
