/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Every named fault point of Shoal, in one table so that SH_FAULTS can be
 * validated (an unknown name is an error, not a silent no-op) and listed.
 * X(id, "name", "what firing it does"). Add new points at the end of their
 * module's group.
 */
#ifndef SH_BASE_FAULT_LIST_H
#define SH_BASE_FAULT_LIST_H

#define SH_FAULT_LIST(X)                                                                    \
	X(FP_ALLOC, "alloc", "sh_malloc/sh_calloc/sh_realloc return NULL")                  \
	X(FP_ENV_DISK_READ_EIO, "env.disk.read_eio", "a disk read completes with -EIO")     \
	X(FP_ENV_DISK_WRITE_EIO, "env.disk.write_eio", "a disk write completes with -EIO")  \
	X(FP_ENV_DISK_FSYNC_EIO, "env.disk.fsync_eio", "a disk fsync completes with -EIO")  \
	X(FP_ENV_DGRAM_SEND_DROP, "env.dgram.send_drop", "an outgoing datagram is dropped") \
	X(FP_ENV_DGRAM_RECV_DROP, "env.dgram.recv_drop", "an incoming datagram is dropped") \
	X(FP_STORE_WRITE_EIO, "store.write_eio",                                            \
	  "a drive target's segment write completes with -EIO (its write path fails)")      \
	X(FP_STORE_READ_EIO, "store.read_eio", "a drive target's fragment read completes with -EIO")

#endif /* SH_BASE_FAULT_LIST_H */
