/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The simulated env: a whole cluster in one process on virtual time.
 *
 * A struct sim is a world: one virtual clock, one queue of events ordered
 * by (time, sequence), one random generator seeded by the caller. Each
 * simulated machine is a sim_node with its own struct env (what the code
 * under test sees), its own addresses and its own disks. Every decision —
 * latency, loss, duplication, reordering, disk latency, torn writes — is
 * drawn from the world's generator in event order, so the same seed gives
 * the same run, byte for byte; sim_trace_hash() fingerprints a run.
 *
 * Network: datagrams between endpoints are copied and delivered after a
 * random latency; each may be lost, duplicated or delayed extra (reordered)
 * with the configured probabilities. Partitions put nodes in groups (only
 * same-group traffic flows); single links can be cut one way.
 *
 * Disks: a completed write sits in the device's volatile cache until an
 * fsync submitted after its completion finishes. sim_node_crash() kills the
 * node's "process" (its timers, endpoints, pending requests vanish without
 * callbacks) and power-fails its disks: unflushed writes are lost, and with
 * SIM_CRASH_TEAR the last one may be torn at a sector boundary. The node's
 * env is usable again after sim_node_restart(); its disks keep what was
 * durable. Handles the dead process held (endpoints, disks) are inert: a
 * send goes nowhere, a submit gets SH_ECRASHED, and closing them frees
 * them, so the test can run the dead code's normal clean-up.
 */
#ifndef SH_ENV_ENV_SIM_H
#define SH_ENV_ENV_SIM_H

#include "env.h"

struct sim;
struct sim_node;

struct sim_net_params {
	uint64_t lat_min_ns; /* one-way latency, uniform in [min, max] */
	uint64_t lat_max_ns;
	double loss;	     /* probability a datagram is dropped */
	double dup;	     /* probability it is delivered twice */
	double reorder;	     /* probability it is delayed extra */
	uint64_t reorder_ns; /* the extra delay, uniform in [0, reorder_ns] */
};

struct sim_disk_params {
	uint64_t lat_min_ns;
	uint64_t lat_max_ns;
	double read_err;  /* probability a read completes with -EIO */
	double write_err; /* probability a write completes with -EIO (nothing written) */
};

struct sim_stats {
	uint64_t events;
	uint64_t dgram_sent, dgram_delivered, dgram_lost, dgram_dup, dgram_reordered;
	uint64_t dgram_partitioned, dgram_unbound;
	uint64_t dgram_too_big; /* longer than an end's MTU (sim_port_mtu): dropped */
	uint64_t disk_reads, disk_writes, disk_fsyncs, disk_errors;
	uint64_t crashes, lost_writes, torn_writes;
};

/* Crash flags. */
#define SIM_CRASH_TEAR	      0x1 /* the newest unflushed write may be torn (a prefix persists) */
#define SIM_CRASH_KEEP_RANDOM 0x2 /* each unflushed write persists with probability 1/2 */

/* A new world at virtual time 0 with the default network (10-100 us, no faults). */
struct sim *sim_create(uint64_t seed);
void sim_destroy(struct sim *sim);
uint64_t sim_seed(const struct sim *sim);
uint64_t sim_now(const struct sim *sim);

/* A node with one address (no port), e.g. "127.0.1.5". NULL if bad or duplicate. */
struct sim_node *sim_node_create(struct sim *sim, const char *name, const char *addr);
struct env *sim_node_env(struct sim_node *node);
struct sim_node *sim_env_node(struct env *env);
const char *sim_node_name(const struct sim_node *node);
bool sim_node_alive(const struct sim_node *node);
void sim_node_crash(struct sim_node *node, unsigned flags);
void sim_node_restart(struct sim_node *node);

/* Run one event; false if nothing is queued. */
bool sim_step(struct sim *sim);
/* Run events until virtual time now + ns (the clock ends there). Returns events run. */
uint64_t sim_run_for(struct sim *sim, uint64_t ns);
/* Run until pred(arg) is true (checked after each event) or max_ns pass. Returns pred's last value.
 */
bool sim_run_until(struct sim *sim, bool (*pred)(void *arg), void *arg, uint64_t max_ns);

void sim_net_set(struct sim *sim, const struct sim_net_params *p);
void sim_net_get(const struct sim *sim, struct sim_net_params *p);
/* Put node in partition group g (all start in 0). */
void sim_partition_set(struct sim_node *node, int group);
/* Everyone back in group 0, all links restored. */
void sim_heal(struct sim *sim);
/* Cut (or restore) the one-way link from a to b. -ENOMEM. */
int sim_link_cut(struct sim_node *a, struct sim_node *b, bool cut);
/*
 * One interface (an exact address and port) loses this share of the
 * datagrams it sends or that are sent to it: 1 is a link down (its own
 * sends are refused at once, counted in send_dropped, as the kernel's are
 * with no route), 0 restores it. At most SIM_LOSSY_MAX at once: -ENOSPC.
 */
#define SIM_LOSSY_MAX 16
int sim_port_loss(struct sim *sim, const struct env_addr *a, double loss);
/*
 * One interface's MTU as env_dgram_mtu reports it (the largest datagram
 * payload in one frame): a datagram longer than the MTU of either end is
 * dropped on the wire, counted in dgram_too_big, as a NIC or a switch
 * drops a frame over its MTU. 0: no limit but ENV_DGRAM_MAX (the
 * default), and env_dgram_mtu says 0 (not known). At most SIM_LOSSY_MAX
 * interfaces with an MTU: -ENOSPC.
 */
int sim_port_mtu(struct sim *sim, const struct env_addr *a, uint32_t mtu);

/*
 * An adversary on the wire: tap sees every datagram as it is about to be
 * delivered (after loss, partitions and latency) and may change its bytes
 * in place (*len may shrink, never grow) or return false to drop it; what
 * it leaves is delivered. NULL: none. sim_inject puts a datagram of its
 * own on the wire, from any address (bound or not), delivered after the
 * network's latency (and shown to the tap). -ENOMEM, -EINVAL (too long).
 */
typedef bool (*sim_tap_fn)(void *arg, const struct env_addr *src, const struct env_addr *dst,
			   uint8_t *data, size_t *len);
void sim_net_tap(struct sim *sim, sim_tap_fn fn, void *arg);
int sim_inject(struct sim *sim, const struct env_addr *src, const struct env_addr *dst,
	       const void *data, size_t len);

/* Parameters of the disks of node (existing and future). */
void sim_disk_set(struct sim_node *node, const struct sim_disk_params *p);

void sim_stats(const struct sim *sim, struct sim_stats *out);
/*
 * A running hash of everything observable that happened (delivery times,
 * sources, destinations and bytes of datagrams, disk completions): equal
 * for equal runs.
 */
uint64_t sim_trace_hash(const struct sim *sim);

#endif /* SH_ENV_ENV_SIM_H */
