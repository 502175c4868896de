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
#include "../admin/heal_events.h"
#include "../cluster/cluster.h"
#include "../env/env_real.h"
#include "../meta/msvc.h"
#include "../store/service.h"

#define SHOALD_WORKERS_MAX 64
#define SHOALD_IFACES_MAX  8 /* data interfaces of a node (a net endpoint's most) */

struct shoald_opts {
	uint64_t id;
	char mgmt[CFG_ADDR_MAX];
	char data[CFG_ADDR_MAX];       /* the first data interface: the node's data address */
	char data_list[CFG_ADDRS_MAX]; /* --data as given */
	char dpdk[1024];	       /* --dpdk: the EAL's arguments ("": no DPDK) */
	unsigned dpdk_mtu;	       /* --dpdk-mtu: the ports' MTU (0: their own) */
	struct net_iface data_ifc[SHOALD_IFACES_MAX];
	unsigned ndata;
	bool announced[SHOALD_IFACES_MAX]; /* net.add sent for it (once) */
	char domain[CFG_NAME_MAX];
	char dir[512];
	char log[512];
	bool performance; /* --mode performance: pinned, busy-polling workers */
	unsigned workers;
	unsigned election_ms;
	unsigned down_ms;
	unsigned heartbeat_ms;
	unsigned orphan_age_s;	 /* --orphan-age: 0 sweeps nothing */
	unsigned claim_age_s;	 /* SHOAL_CLAIM_AGE: dedup claims this old are checked */
	unsigned clean_s;	 /* SHOAL_CLEAN_INTERVAL: background cleaning every (0: off) */
	unsigned watch_s;	 /* SHOAL_WATCH_INTERVAL: the watcher's rounds (0: off) */
	unsigned meta_replace_s; /* SHOAL_META_REPLACE: a node down this long loses its metadata
				    replicas */
	char secret[512];	 /* --secret: the cluster secret's file ("": DIR/cluster.secret) */
	bool metrics_auth;	 /* --metrics-auth: GET /metrics needs the admin token too */
	/* --tls-cert, --tls-key, --tls-ca (or $SHOAL_TLS_CERT, ...): the admin API over TLS */
	char tls_cert[512], tls_key[512], tls_ca[512];
};

/*
 * sweep.c: the orphan sweep of a worker's drives (fragments nothing refers
 * to, older than age_s, released). sweep_create with age 0 gives NULL (off);
 * every other call takes NULL as off too.
 */
#define SWEEP_HIST 8
struct sweep;
struct sdrive {
	struct sh_list link;
	struct sweep *sw;
	struct store *st;
	uint32_t cursor; /* the segment the next round lists from */
	bool busy;	 /* a round in flight */
	struct {
		uint64_t t, epoch;
	} hist[SWEEP_HIST]; /* the store's epoch as time went, newest first */
};
struct sweep {
	struct env *env;
	struct mroute *rt;
	struct env_timer tick;
	unsigned age_s;
	uint64_t period_ns;
	uint32_t fs[CFG_FS_MAX];
	unsigned nfs;
	uint32_t nbuckets;
	struct sh_list drives; /* struct sdrive */
	bool stopping;
};
int sweep_create(struct net *n, unsigned age_s, struct sweep **out);
int sweep_set_cfg(struct sweep *sw, const struct cfg *c);
int sweep_add(struct sweep *sw, struct store *st);
/* Calls to this node's own groups served by fn (msvc_local_call), not sent to itself. */
void sweep_set_local(struct sweep *sw, mroute_local_fn fn, void *arg);
/* No new rounds (before the metadata service stops); destroy after the loop ended. */
void sweep_stop(struct sweep *sw);
void sweep_destroy(struct sweep *sw);

/*
 * scrub.c: scrub and repair of a worker's drives (docs/healing.md): each
 * drive read through at scrub-rate, a pass every scrub-interval hours;
 * the fragments a scrub or a read found corrupt reported to their stripes'
 * buckets (MP_REPAIR), whose leaders re-create them in place.
 */
#define SCRUB_REPORTED 64
struct scrubber;
struct scdrive {
	struct sh_list link;
	struct scrubber *sc;
	struct store *st;
	uint64_t last_end; /* when its last scrub ended (or it was added) */
	bool running;
	struct {
		uint64_t stripe, at;
		uint32_t idx;
	} reported[SCRUB_REPORTED]; /* a ring: corrupt fragments reported lately */
	unsigned nrep;
};
struct scrubber {
	struct env *env;
	struct mroute *rt;
	struct env_timer tick;
	uint32_t fs[CFG_FS_MAX];
	unsigned nfs;
	uint32_t nbuckets, rate_mib, interval_h;
	struct sh_list drives; /* struct scdrive */
	bool stopping;
};
int scrub_create(struct net *n, struct scrubber **out);
int scrub_set_cfg(struct scrubber *sc, const struct cfg *c);
int scrub_add(struct scrubber *sc, struct store *st);
void scrub_set_local(struct scrubber *sc, mroute_local_fn fn, void *arg);
void scrub_stop(struct scrubber *sc);
void scrub_destroy(struct scrubber *sc);

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
	struct sweep *sweep;	  /* its drives' orphan sweep (NULL: off) */
	struct scrubber *scrub;	  /* its drives' scrub and repair reports */
	struct cfg *new_cfg;	  /* from the management thread, under mu */
	struct env_timer publish; /* its counters (and metadata groups) for the admin API */
	struct env_async wake;
	pthread_mutex_t mu;
	struct sh_list cmds;   /* struct worker_cmd, from the management thread */
	struct sh_list drives; /* struct wdrive */
	/* data interfaces the configuration has listed for this worker (netcfg.c) */
	struct net_iface cfg_seen[SHOALD_IFACES_MAX];
	unsigned ncfg_seen;
	bool stopping;
	bool stop_begun;
	int start_rc;
	pthread_mutex_t start_mu;
	pthread_cond_t start_cv;
	bool started;
};

/* clean.c: background cleaning, on a thread of its own with a client of the cluster. */
struct cleaner {
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool stop, started;
	char addr[CFG_ADDR_MAX];
	char key_file[600]; /* the node's client key (DIR/client.key) */
	unsigned interval_s;
	/* from the configuration, under mu */
	char fs[CFG_FS_MAX][CFG_NAME_MAX];
	unsigned nfs, rank, nnodes, nbuckets;
};
/* Every interval_s (0: never), through addr (this node's admin address), with the key in key_file.
 */
int cleaner_start(struct cleaner *k, const char *addr, const char *key_file, unsigned interval_s);
/* A newer configuration: the filesystems, and this node's share (self: its id). */
void cleaner_cfg(struct cleaner *k, const struct cfg *c, uint64_t self);
void cleaner_stop(struct cleaner *k);

/*
 * watch.c: a thread that every interval_s looks at this node's drives (a
 * write path failed, reads failing with I/O errors, a drive that has not
 * opened for the rebuild delay: the drive is marked failed, its fragments
 * rebuilt) and, on the configuration's leader, at
 * the cluster's heal state (its changes posted as events: heal_events.h)
 * and at the filesystems' snapshot schedules (the snapshots due taken, the
 * oldest beyond those kept deleted: docs/snapshots.md "Schedules").
 */
#define WATCH_READ_ERRORS 8 /* read errors of a drive within WATCH_WINDOW_S: failed */
#define WATCH_WINDOW_S	  600
#define WATCH_DRIVES	  64
struct watcher {
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool stop, started;
	struct shoald *d;
	unsigned interval_s;
	struct heal_events ev;
	bool leading;
	struct {
		uint64_t target, errors, since; /* read errors counted from since (realtime ns) */
		uint64_t gone_since;		/* first seen not opening (0: it opens) */
		bool told;			/* marked failed (or asked to be) */
	} drives[WATCH_DRIVES];
	unsigned ndrives;
	/* the schedule slot a filesystem's scheduled snapshot last failed for (said once each) */
	struct {
		char fs[CFG_NAME_MAX];
		int64_t slot;
	} sched_failed[CFG_FS_MAX];
};
int watcher_start(struct watcher *w, struct shoald *d, unsigned interval_s);
void watcher_stop(struct watcher *w);
/* Sleep interval_s on (mu, cv) unless *stop is set meanwhile (the cleaner's and the watcher's). */
void shoald_wait(pthread_mutex_t *mu, pthread_cond_t *cv, const bool *stop, unsigned interval_s);

#define SHOALD_SUBMITS_MAX 32

/*
 * keys.c: the file system access keys of the configuration, for every
 * endpoint's thread (net_config.client_key), under mu.
 */
struct shoald_keys {
	pthread_mutex_t mu;
	uint32_t n;
	struct cfg_key k[CFG_KEYS_MAX];
};
void shoald_keys_init(struct shoald_keys *t);
void shoald_keys_fini(struct shoald_keys *t);
/* net_config.client_key: arg is the struct shoald_keys. */
int shoald_client_key(void *arg, uint32_t id, uint8_t key[NET_AUTH_KEY_LEN], struct net_cred *cred);
struct shoald;
/* Management loop: the configuration's keys; every endpoint is told if they changed. */
void shoald_keys_follow(struct shoald *d, const struct cfg *c);

struct shoald {
	struct shoald_opts o;
	struct env *env; /* the management loop */
	struct net *net;
	struct cluster *cl;
	struct admin_http *http;
	struct admin_node self;
	char token[SH_TOKEN_LEN + 1]; /* the admin API's, from the cluster secret */
	char secret_fp[SH_FINGERPRINT_LEN + 1];
	/* every endpoint's network key (net_config.auth_key), from the secret */
	uint8_t net_key[SH_SECRET_LEN];
	/* while the secret is rotated: the second one's (FILE.also), accepted too */
	bool rotating;
	uint8_t net_key_also[SH_SECRET_LEN];
	struct shoald_keys keys;
	char token_also[SH_TOKEN_LEN + 1];
	char secret_fp_also[SH_FINGERPRINT_LEN + 1];
	struct worker workers[SHOALD_WORKERS_MAX];
	uint64_t opened[CFG_DRIVES_MAX]; /* targets handed to workers */
	unsigned nopened;
	uint64_t last_target; /* the last drive id prepared here */
	pthread_mutex_t stats_mu;
	/* what each worker published last (counters, its metadata groups), under stats_mu */
	struct admin_stats stats[SHOALD_WORKERS_MAX];
	struct cleaner cleaner;
	struct watcher watcher;
	/* configuration changes the workers propose (snapshot states), under submit_mu */
	pthread_mutex_t submit_mu;
	struct cfg_cmd submits[SHOALD_SUBMITS_MAX];
	unsigned nsubmits;
	struct env_async submit_wake; /* on the management loop: submit them */
	bool stopped;
};

/* A worker's configuration change, handed to the management loop (msvc_params.cfg_submit). */
void shoald_cfg_submit(void *arg, const struct cfg_cmd *cmd);
int shoald_submit_init(struct shoald *d);

/*
 * netcfg.c: data interfaces. --data parsed: the first takes port if it names
 * none (the management port + 100), later ones the first's.
 */
int shoald_data_parse(const char *s, uint16_t port, struct net_iface *out, unsigned max);
/* Worker idx's interfaces: --data's, each port + idx. Returns how many, or -EINVAL. */
int worker_ifaces(const struct shoald *d, unsigned idx, struct net_iface *out);
/* Management loop: announce --data's interfaces the configuration lacks (net.add, once). */
void shoald_nets_announce(struct shoald *d, const struct cfg *c);
/*
 * Whether this node's data network is down: no interface of --data on a
 * link that is up with a carrier (addresses not on this host, as a
 * wildcard, say nothing). cluster_params.data_down.
 */
bool shoald_data_down(void *arg);
/* Worker loop: bind interfaces the configuration gives the node, close those it removed. */
void worker_net_follow(struct worker *w, const struct cfg *c);
int worker_start(struct shoald *d, unsigned idx);
void worker_stop(struct worker *w);
/* Ask worker w to open (formatting is done) and serve a target. */
int worker_open(struct worker *w, uint64_t target, const char *path);
/* The metadata groups worker 0 published last (admin_node.meta_groups). */
unsigned shoald_meta_groups(void *arg, struct msvc_group_info *out, unsigned max);
/* The management loop's counters and what each worker published last (admin_node.with_stats). */
void shoald_with_stats(void *arg, admin_stats_fn fn, void *ctx);
/* Hand worker w a newer configuration (copied). */
int worker_set_cfg(struct worker *w, const struct cfg *c);

/* Check, measure and format a drive for the cluster (the prepare hook). */
int shoald_drive_prepare(void *arg, struct cfg_cmd *cmd, char *msg, size_t len);

#endif /* SH_SHOALD_SHOALD_H */
