/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libshoal's insides (docs/client.md): one event loop thread per client
 * with two endpoints (management: the configuration; data: buckets and
 * targets). Public calls run on the caller's thread up to the point where
 * they need the network, then hand a request to the loop and wait.
 */
#ifndef SH_CLIENT_CLIENT_INT_H
#define SH_CLIENT_CLIENT_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <shoal/client.h>

#include "../base/access_key.h"
#include "../data/ec.h"
#include "../data/seal.h"
#include "../meta/mroute.h"

struct sh_client {
	pthread_t th;
	uint32_t key_id; /* its key's (docs/security.md); 0: none */
	uint8_t key[SH_KEY_LEN];
	/* where encrypted file systems' key comes from (seal_kek_find): this file, or (env)
	 * the environment's; NULL and !env: none */
	char *fs_key_file;
	bool fs_key_env;
	struct env *env;
	struct net *mnet, *dnet;
	struct mroute *rt;
	struct env_async wake;
	struct env_timer poll;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct sh_list q;	 /* struct cop to start, under mu */
	struct sh_list inflight; /* data calls in flight (the loop's; client.c) */
	struct cfg *view;	 /* the newest configuration, under mu */
	struct sh_list fss;	 /* open sh_fs, under mu (recalls find their caches) */
	uint64_t timeout_ns;
	uint32_t frag;	   /* the fragment size of the stripes written (sh_client_opts.frag_kb) */
	uint64_t tag_seed; /* create tags: seed ^ counter (client.h: retried creates) */
	uint64_t tag_ctr;  /* atomic */
	uint64_t cfg_node; /* the node asked for the configuration */
	unsigned cfg_tries;
	bool cfg_busy;
	uint64_t info_ns;     /* when this client last said what it is (client_info.h) */
	uint64_t info_node;   /* to which node */
	bool cfg_spread;      /* cfg_node chosen from a configuration (client_cfg_node) */
	bool warned_degraded; /* said once that stripes share failure domains */
	bool stopping;
	bool stopped;
	/* the filesystems opened (their leases are given back at the close; under mu) */
	uint32_t used_fs[8];
	unsigned nused_fs;
	/* a client on its caller's env (client_env.h): no loop thread; waits drive the world */
	bool (*drive)(void *world, bool (*pred)(void *arg), void *arg, uint64_t max_ns);
	void *world;
};

struct ccache;
struct cloc;

/* a filesystem handle's background thread pools (wpool.c, below) */
enum { WPOOL_BEHIND = 0, WPOOL_AIO = 1, WPOOL_RA = 2, WPOOL_N = 3 };

struct sh_fs {
	struct sh_list link; /* in the client's open filesystems */
	struct ccache *cache;
	sh_client *c;
	uint32_t id;
	uint32_t nbuckets;
	struct ec_code code; /* the filesystem's protection */
	uint8_t comp;	     /* and compression (cfg_fs.compression) */
	bool dedup;
	/* encrypted (cfg_fs.sealed): every block sealed with these keys (seal.h); else NULL */
	struct seal_keys *keys;
	uint64_t at; /* a snapshot's version (read-only), 0: the live filesystem */
	/*
	 * A writable clone (docs/snapshots.md "Clones"): its branch of its
	 * origin's version space (0: none). id is then the origin's: the
	 * clone's requests go to its groups, commands at the branch's
	 * version, reads as of its newest (client_at).
	 */
	uint16_t branch;
	/* the newest version a command of ours was applied at: the next ones say they come
	 * after it, so a snapshot never holds a change without what it followed here */
	_Atomic uint64_t ver_seen;
	/* the filesystem's restores as this client's configuration says (cfg_fs.restore_epoch):
	 * a handle opened under an older one answers -ESTALE (docs/snapshots.md "Restore") */
	_Atomic uint32_t epoch;
	char name[64 + 1 + 64];
	/* bumped by every change of a file's extents made here: handles' maps go stale */
	_Atomic uint64_t wgen;
	/* loc.c: where stripes are now, as their buckets said (under lmu, made at first use) */
	pthread_mutex_t lmu;
	struct cloc *locs;
	_Atomic uint64_t nlocs;
	pthread_mutex_t wmu;
	/* quota.c: the filesystem's quota in bytes (0: none), its use as last learned (at
	 * q_at, monotonic ns), and what this client wrote since */
	uint64_t quota;
	pthread_mutex_t qmu;
	uint64_t q_used, q_added, q_at;
	struct wpool *wpool[WPOOL_N]; /* started at first use (under wmu) */
	struct cholds *holds;	      /* hold.c: the files open here, held at their buckets */
};

/* What fs's requests read as of: a snapshot's version, a clone's newest, or 0 (the newest). */
static inline uint64_t
client_at(const sh_fs *fs)
{
	return fs->at != 0	 ? fs->at
	       : fs->branch != 0 ? meta_ver_newest((uint64_t)fs->branch << META_BRANCH_SHIFT)
				 : 0;
}

/*
 * hold.c: files open here are held at their bucket's leader, so that one
 * unlinked or renamed over lives until its last close (docs/client.md).
 * client_hold_open: an open of ino (fresh: by name, refused with -ESTALE if
 * it has no name any more, unless held here already); *st its attributes.
 * client_hold_created: an open of a file this client just created (its
 * leader holds it already). client_hold_close: a handle closed.
 */
int client_holds_init(sh_fs *fs);
void client_holds_fini(sh_fs *fs);
int client_hold_open(sh_fs *fs, uint64_t ino, bool fresh, struct stat *st);
/*
 * The same for an open that reads: ext (sh_free it) then holds the file's
 * first extents if they came with the hold (meta_extent_list_encode; *more:
 * there are more), else NULL.
 */
int client_hold_open_read(sh_fs *fs, uint64_t ino, bool fresh, struct stat *st, uint8_t **ext,
			  size_t *elen, bool *more);
int client_hold_created(sh_fs *fs, uint64_t ino);
void client_hold_close(sh_fs *fs, uint64_t ino);
/*
 * The leader just named ino for a name (a lookup that asked): an open of it
 * in the next moment is not fresh (the name said so a moment ago; if it
 * was renamed over since, the open raced with the rename and gets the old
 * file whole). sh_open_ino's opens are fresh otherwise.
 */
void client_hold_looked_up(sh_fs *fs, uint64_t ino);
struct cres;
/* ns.c: a struct stat from an inode record. */
void client_to_stat(uint64_t ino, const struct meta_inode *in, struct stat *st);
/*
 * ns.c: the answer r (status rc) to a getattr-like request for ino asked at
 * since: cached as it allows, into *st (if st); r finished. The status.
 */
int client_attr_reply(sh_fs *fs, uint64_t ino, int rc, struct cres *r, uint64_t since,
		      struct stat *st);
/* ns.c: the inode path names, symlinks followed where follow says. */
int client_resolve(sh_fs *fs, const char *path, bool follow, uint64_t *ino);
/* ns.c: a dirent's d_type for an inode type (meta_inode.type). */
unsigned char client_type_dt(uint8_t t);
/* ino is an inode of this filesystem's buckets. */
static inline bool
client_ino_valid(sh_fs *fs, uint64_t ino)
{
	return ino != 0 && meta_ino_bucket(ino) < fs->nbuckets;
}

/*
 * wpool.c: a filesystem handle's background threads. WPOOL_BEHIND (16
 * threads): write-behind, so that a file has several stripes in flight
 * while its writer fills the next one. WPOOL_AIO (16): the asynchronous
 * calls (sh_io_submit), as many in flight at once. WPOOL_RA (8): the
 * read-ahead of sequential readers. A task never waits for one queued
 * on its own pool: an sh_pread on an AIO thread may wait for the file's
 * read-ahead, so that runs on threads of its own (on the AIO pool all 16
 * could wait for a job queued behind them). wpool_run queues fn(arg) on
 * one (its threads start at first use): 0 or -ENOMEM. wpool_stop (at
 * sh_fs_close) runs what is queued, then stops them.
 */
int wpool_run(sh_fs *fs, unsigned which, void (*fn)(void *arg), void *arg);
/*
 * client.c: ns of the client's time asleep (on a caller's env, its world
 * driven meanwhile); whether the client runs on a caller's env
 * (client_env.h: no threads of its own, its calls drive the world).
 */
void client_sleep(sh_client *c, uint64_t ns);
bool client_driven(const sh_client *c);
/* io.c: the filesystem handle a file belongs to. */
sh_fs *client_file_fs(const sh_file *f);
void wpool_stop(sh_fs *fs);

/* The answer to a metadata request, copied out of the loop. */
struct cres {
	int status;
	struct mp_reply rep;
	uint8_t *data; /* rep.data points here; cres_fini frees */
};

/* Send req to its bucket's leader and wait. Returns res->status. */
int client_meta(sh_client *c, const struct mp_req *req, struct cres *res);
/* Snapshot snap of filesystem id: *ver its version. -ENOENT, -EAGAIN (creating), -ESTALE. */
int client_snap_lookup(sh_client *c, uint32_t id, const char *snap, uint64_t *ver);
/* The same, asking the configuration again (up to a second) when not known or not ready. */
int client_snap_lookup_fresh(sh_client *c, uint32_t id, const char *snap, uint64_t *ver);
/* n requests at once (to their buckets' leaders, in parallel); each one's result in res[i]. */
void client_metas(sh_client *c, const struct mp_req *req, struct cres *res, unsigned n);
void cres_fini(struct cres *r);
/* A copy of what the configuration says about filesystem name (id 0: none). */
int client_fs_lookup(sh_client *c, const char *name, uint32_t *id, uint32_t *nbuckets);
/* A call to a data endpoint, made on the client's loop (client_calls). */
struct dcall {
	uint64_t peer;		 /* endpoint id (0: not to be called) */
	char addr[CFG_ADDR_MAX]; /* its address */
	uint16_t op;
	struct iovec iov[2];
	int niov;
	/* iov[0] lies in zbuf at zoff: sent as slices of it, not copied (the session holds a
	 * reference until they are acknowledged); NULL: copied into the message */
	struct sh_buf *zbuf;
	size_t zoff;
	uint8_t *out;	/* the reply's bytes go here, up to cap */
	bool peer_down; /* ended early: a newer configuration marks its node down */
	size_t cap, got;
	int status;
};

/*
 * Make the calls at once and wait for every one (each dcall's status). A
 * call with peer 0 is not made: it keeps the status the caller gave it.
 */
void client_calls(sh_client *c, struct dcall *calls, unsigned n, uint64_t timeout_ns);
/*
 * Where target lives: its worker's endpoint and address. -ENOENT (no such
 * drive), -EHOSTDOWN (its node is marked down).
 */
int client_target(sh_client *c, uint64_t target, uint64_t *peer, char *addr);
/* The configuration says target is lost (its fragments are rebuilt elsewhere). */
bool client_target_lost(sh_client *c, uint64_t target);
/* The ids of every target (drive) of the configuration, up to max; returns how many. */
unsigned client_targets(sh_client *c, uint64_t *ids, unsigned max);
/*
 * The n targets of a new stripe with p parity fragments (place.h, from the
 * configuration), none of avoid[0..navoid); with degrade, while domains are
 * down (or avoided), fragments share them, never more than p on one;
 * without, -ENOSPC then.
 */
int client_place(sh_client *c, uint64_t stripe, unsigned n, unsigned p, const uint64_t *avoid,
		 unsigned navoid, bool degrade, uint64_t *out);
/* Protection of filesystem id: d, p. */
/* A filesystem's protection and compression (cfg_fs.compression). */
int client_fs_settings(sh_client *c, uint32_t id, unsigned *d, unsigned *p, unsigned *comp,
		       bool *dedup, uint64_t *quota);
/*
 * An encrypted filesystem's keys (docs/security.md, "Encrypted file
 * systems"): its master key unwrapped with the client's file system key.
 * 0 and *out NULL when fs is not encrypted; -EACCES with the reason logged
 * when the client has no key, or one that does not open it.
 */
int client_fs_keys(sh_client *c, uint32_t id, const char *name, struct seal_keys **out);
/*
 * loc.c: where stripes are now (docs/healing.md). apply: e's targets
 * become where the stripe is known to be now, if it moved. fetch: ask the
 * stripe's bucket; 0 and e's targets updated if it is elsewhere, -EAGAIN
 * if it is where e says, or the request's error.
 */
void client_loc_apply(sh_fs *fs, struct meta_extent *e);
int client_loc_fetch(sh_fs *fs, struct meta_extent *e);
void client_locs_fini(sh_fs *fs);
/* cache.c: attributes and entries a leader let this client keep */
int cache_init(sh_fs *fs);
void cache_fini(sh_fs *fs);
uint64_t cache_now(const sh_fs *fs);
void cache_put_attr(sh_fs *fs, uint64_t ino, const struct meta_inode *attr, uint64_t since);
void cache_put_entry(sh_fs *fs, uint64_t parent, const char *name, size_t len, uint64_t ino,
		     uint8_t type, uint64_t since);
bool cache_get_attr(sh_fs *fs, uint64_t ino, struct meta_inode *attr);
/*
 * A small file's inline bytes that came with its attributes (a lookup's or
 * getattr's reply, MP_INLINE): kept with the cached attributes, under the
 * same lease (the bucket recalls the attributes when the bytes change).
 * get: only while the cached attributes say size and ctime (ns).
 */
void cache_put_inline(sh_fs *fs, uint64_t ino, const struct meta_inode *attr, const void *data,
		      size_t len);
bool cache_get_inline(sh_fs *fs, uint64_t ino, uint64_t size, uint64_t ctime, uint8_t *buf,
		      size_t cap, size_t *len);
bool cache_get_entry(sh_fs *fs, uint64_t parent, const char *name, size_t len, uint64_t *ino,
		     uint8_t *type);
void cache_drop(sh_fs *fs, const struct mp_key *k);
void cache_drop_all_attrs(sh_fs *fs);
/* Every entry and attribute kept (a name found to point at a file it no longer names). */
void cache_drop_all(sh_fs *fs);
/* What mc changes (before it is sent, and again once done) is not trusted. */
void cache_forget_cmd(sh_fs *fs, const struct meta_cmd *mc, bool done);
void cache_stats(sh_fs *fs, uint64_t *hits, uint64_t *misses);

/* Replicate a command at bucket (ns.c); res holds the reply. */
int ns_cmd(sh_fs *fs, uint16_t bucket, struct meta_cmd *mc, struct cres *res);
/* A read of bucket's applied state (ns.c). */
int ns_read(sh_fs *fs, uint8_t kind, uint16_t bucket, uint64_t ino, const char *name, size_t nlen,
	    uint32_t max, struct cres *res);
/* The same with the request's off (MP_READDIR's flags). */
int ns_read_at(sh_fs *fs, uint8_t kind, uint16_t bucket, uint64_t ino, const char *name,
	       size_t nlen, uint32_t max, uint64_t off, struct cres *res);
/* A tag for a create request, unique to this client (never 0). */
uint64_t client_tag(sh_client *c);
/* Capacity of all drives, bytes. */
uint64_t client_capacity(sh_client *c);
/* The first bucket of every metadata group (sh_free it): a request there reaches each leader. */
int client_group_buckets(sh_client *c, uint16_t **out, unsigned *n);
/* The metadata group of every bucket (*n of them; sh_free it). */
int client_bucket_groups(sh_client *c, uint16_t **out, unsigned *n);
/*
 * quota.c: may a write of len bytes at off of file ino go on? 0 (counted as
 * written), or -EDQUOT when the filesystem's quota would be passed.
 */
int client_quota_admit(sh_fs *fs, uint64_t ino, uint64_t off, size_t len);
/* The quota (0: none) and the use as this client knows it (statvfs). */
void client_quota_space(sh_fs *fs, uint64_t *quota, uint64_t *used);

/*
 * How often a client asks for the configuration (answered with an epoch
 * alone when nothing changed), and of which node: once it has a
 * configuration, the node up that its own key picks, so that many clients
 * spread their asking over the backends instead of all asking the node
 * they were pointed at (bench/scale: 10,000 clients, 1,000 backends). 0:
 * no node up.
 */
#define CLIENT_CFG_POLL_NS (500ull * 1000 * 1000)

/* The client's wall clock (its env's: virtual in the simulator) as a time to set */
void client_now_ts(sh_fs *fs, struct timespec *ts);

/* The largest offset a write may start at and a size a file may be cut or grown to (-EFBIG) */
#define CLIENT_FILE_MAX ((uint64_t)1 << 62)
uint64_t client_cfg_node(const struct cfg *c, uint64_t key);

#endif /* SH_CLIENT_CLIENT_INT_H */
