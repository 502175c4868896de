/* SPDX-License-Identifier: Apache-2.0 */
/*
 * shoald, the backend daemon (DESIGN.md §1): a management thread (config
 * Raft member or follower, heartbeats, admin HTTP API on the management
 * address) and N I/O workers, each a run-to-completion loop on its own
 * thread with its own data-network endpoint, serving the drive targets
 * it owns (drive id mod N).
 */
#ifndef SH_SHOALD_SHOALD_H
#define SH_SHOALD_SHOALD_H

#include <pthread.h>

#include "../admin/api.h"
#include "../cluster/cluster.h"
#include "../env/env_real.h"
#include "../meta/msvc.h"
#include "../store/service.h"

#define SHOALD_WORKERS_MAX 64

struct shoald_opts {
	uint64_t id;
	char mgmt[CFG_ADDR_MAX];
	char data[CFG_ADDR_MAX];
	char domain[CFG_NAME_MAX];
	char dir[512];
	char log[512];
	bool performance; /* --mode performance: pinned, busy-polling workers */
	unsigned workers;
	unsigned election_ms;
	unsigned down_ms;
	unsigned heartbeat_ms;
};

struct worker_cmd {
	struct sh_list link;
	uint64_t target;
	char path[CFG_PATH_MAX];
};

struct worker {
	struct shoald *d;
	unsigned idx;
	pthread_t th;
	struct env *env;
	struct net *net;
	struct store_svc *svc;
	struct msvc *meta;	  /* worker 0: the node's metadata groups */
	struct cfg *new_cfg;	  /* from the management thread, under mu */
	struct env_timer publish; /* worker 0: the metadata groups' state, for the admin API */
	struct env_async wake;
	pthread_mutex_t mu;
	struct sh_list cmds;   /* struct worker_cmd, from the management thread */
	struct sh_list drives; /* struct wdrive */
	bool stopping;
	bool stop_begun;
	int start_rc;
	pthread_mutex_t start_mu;
	pthread_cond_t start_cv;
	bool started;
};

struct shoald {
	struct shoald_opts o;
	struct env *env; /* the management loop */
	struct net *net;
	struct cluster *cl;
	struct admin_http *http;
	struct admin_node self;
	struct worker workers[SHOALD_WORKERS_MAX];
	uint64_t opened[CFG_DRIVES_MAX]; /* targets handed to workers */
	unsigned nopened;
	uint64_t last_target;	 /* the last drive id prepared here */
	pthread_mutex_t meta_mu; /* what worker 0 published of its metadata groups */
	struct msvc_group_info meta_info[256];
	unsigned nmeta;
	bool stopped;
};

int worker_start(struct shoald *d, unsigned idx);
void worker_stop(struct worker *w);
/* Ask worker w to open (formatting is done) and serve a target. */
int worker_open(struct worker *w, uint64_t target, const char *path);
/* The metadata groups worker 0 published last (admin_node.meta_groups). */
unsigned shoald_meta_groups(void *arg, struct msvc_group_info *out, unsigned max);
/* Hand worker w a newer configuration (copied). */
int worker_set_cfg(struct worker *w, const struct cfg *c);

/* Check, measure and format a drive for the cluster (the prepare hook). */
int shoald_drive_prepare(void *arg, struct cfg_cmd *cmd, char *msg, size_t len);

#endif /* SH_SHOALD_SHOALD_H */
