/* SPDX-License-Identifier: Apache-2.0 */
/* Private to the simulated env: the world, nodes, endpoints and disks. */
#ifndef SH_ENV_ENV_SIM_INT_H
#define SH_ENV_ENV_SIM_INT_H

#include "env_sim.h"

/* A value for some interfaces (an exact address and port); those not listed have 0. */
struct sim_ports {
	struct {
		struct env_addr addr;
		double v;
	} e[SIM_LOSSY_MAX];
	unsigned n;
};

struct sim {
	uint64_t seed;
	uint64_t now;
	struct sh_rand rng;
	struct sh_heap q;
	struct sh_list nodes;
	struct sh_htable by_ip; /* struct sim_node by address (sim_node_by_ip) */
	unsigned nnodes;
	struct sim_net_params net;
	struct sh_htable eps;  /* struct sim_ep by bound address */
	struct sh_htable cuts; /* struct sim_cut by (from, to) */
	struct sh_list cut_list;
	/* interfaces (address and port) that lose datagrams (sim_port_loss), with an MTU */
	struct sim_ports lossy, mtus;
	sim_tap_fn tap; /* an adversary on the wire (sim_net_tap) */
	void *tap_arg;
	struct sim_stats st;
	uint64_t trace;
};

struct sim_node {
	struct env env; /* first: what the code under test holds */
	struct sim *sim;
	unsigned id;
	struct env_addr addr;
	bool alive;
	uint64_t incarnation;
	struct sh_rand rng;
	int group;
	uint16_t next_port;
	struct sh_list events; /* queued env_events of this node */
	struct sh_list eps;
	struct sh_list disks;	   /* open handles */
	struct sh_list dead_eps;   /* endpoints of a crashed process, not closed yet */
	struct sh_list dead_disks; /* likewise, disks */
	struct sh_list media;	   /* what survives crashes */
	struct sim_disk_params dparams;
	struct sh_list link;
	struct sh_hnode ip_hn; /* in sim->by_ip */
};

/* The node of address a (its port ignored), NULL if none: O(1), every datagram asks. */
struct sim_node *sim_node_by_ip(struct sim *sim, const struct env_addr *a);

static inline struct sim_node *
to_node(struct env *env)
{
	return sh_container_of(env, struct sim_node, env);
}

void sim_trace_mix(struct sim *sim, uint64_t v);
int sim_event_push(struct env *env, struct env_event *ev, uint64_t when);

/* env_sim_net.c */
int simnet_open(struct env *env, const struct env_addr *bind, const struct env_dgram_cbs *cbs,
		void *arg, struct env_dgram **out);
int simnet_addr(struct env_dgram *d, struct env_addr *out);
int simnet_send(struct env_dgram *d, const struct env_dgram_msg *msgs, unsigned n);
void simnet_stats(struct env_dgram *d, struct env_dgram_stats *out);
uint32_t simnet_mtu(struct env_dgram *d);
void simnet_close(struct env_dgram *d);
void simnet_node_crash(struct sim_node *node);
void simnet_node_fini(struct sim_node *node);
void simnet_fini(struct sim *sim);
bool simnet_is_packet(const struct env_event *ev);
void simnet_packet_free(struct env_event *ev);

/* env_sim_disk.c */
int simdisk_open(struct env *env, const char *path, unsigned flags, uint64_t size,
		 struct env_disk **out);
int simdisk_submit(struct env_disk *d, struct env_disk_req *r);
void simdisk_info(struct env_disk *d, struct env_disk_info *out);
void simdisk_close(struct env_disk *d);
int simdisk_remove(struct env *env, const char *path);
void simdisk_node_crash(struct sim_node *node, unsigned flags);
void simdisk_node_fini(struct sim_node *node);
/* A crash removed ev: if it was a disk request, it is no longer in flight. */
void simdisk_event_dropped(struct env_event *ev);

#endif /* SH_ENV_ENV_SIM_INT_H */
