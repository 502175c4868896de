/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The durable state of Raft instances (docs/ondisk.md, "Raft log"): term,
 * vote, the latest snapshot and the entries after (and just before) it,
 * kept in memory and persisted through env to one file that many
 * instances share — a node's write-ahead log (DESIGN.md §5).
 *
 * struct rwal is the file; struct rlog an instance's handle in it, found
 * by name. Every record carries its instance's number; a NAME record
 * binds a number to a name. One write is in flight at a time: all records
 * queued by all instances while it runs go out in the next write, written
 * with RWF_DSYNC (durable on completion) — one durable write per batch
 * for every group of the node that has something to append.
 *
 * The file is two halves. Each half begins with a header block (its
 * generation) followed by records appended in order: NAME, META (term,
 * vote), ENTRY, TRUNC, SNAP (a snapshot stored, with the entries it keeps
 * before it), DROP (an instance removed). When a half fills up the whole
 * state of every instance is written as a fresh image into the other half
 * with the next generation: body first, header block last, so a crash in
 * between leaves the old half in charge.
 *
 * Open reads both headers, takes the newer valid half and replays its
 * records up to the first that is torn, fails its crc, or belongs to an
 * older generation: the state after a crash is a prefix of what was queued
 * in order, by all instances together, and everything whose callback ran
 * is in it.
 */
#ifndef SH_CLUSTER_RAFT_LOG_H
#define SH_CLUSTER_RAFT_LOG_H

#include "../env/env.h"

struct raft_entry;
struct raft_snapshot;
struct rwal;
struct rlog;

struct rlog_entry {
	uint64_t term;
	uint16_t type;
	uint32_t len;
	uint8_t *data;
};

struct rlog_snap {
	uint64_t index, term, conf_index;
	uint8_t *conf; /* rc_conf_encode bytes */
	size_t conf_len;
	uint8_t *data;
	size_t len;
};

/* The state as loaded or as now queued. */
struct rlog_state {
	uint64_t term, vote;
	struct rlog_snap *snap; /* NULL: none */
	uint64_t start;		/* index of entries[0] */
	struct rlog_entry *entries;
	size_t n;
};

typedef void (*rlog_done_cb)(void *arg, int status);

#define RLOG_NAME_MAX 63

/*
 * Open (creating it with size bytes if absent, unless size is 0; an
 * existing file keeps its size) and load the log file. cb(arg, 0) runs once every instance's state
 * is loaded, or with a negative errno. *out is valid at once, but usable
 * only after the callback.
 */
int rwal_open(struct env *env, const char *path, uint64_t size, rlog_done_cb cb, void *arg,
	      struct rwal **out);
/* Instances must be closed first. Abandons queued writes (callbacks: -ECANCELED). */
void rwal_close(struct rwal *w);
/* The instance name holds state here (open or not). */
bool rwal_has(const struct rwal *w, const char *name);
/*
 * Forget a closed instance: its state goes now, a DROP record is queued.
 * -ENOENT if there is none, -EBUSY while it is open, -EAGAIN while loading.
 */
int rwal_remove(struct rwal *w, const char *name);
/*
 * Bring in the one instance of the log file at path (a log of its own, as
 * groups kept before files were shared) as name, then remove that file:
 * cb(arg, 0) once its state is durable here and the file is gone, or
 * cb(arg, -ENOENT) when there is no such file (a file never written
 * counts as an empty log). -EEXIST (at once) if name is here already.
 */
int rwal_import(struct rwal *w, const char *name, const char *path, rlog_done_cb cb, void *arg);
/* cb(arg, 0) once everything queued so far is durable (or a negative errno). */
int rwal_flush(struct rwal *w, rlog_done_cb cb, void *arg);
/* fn for the name of every instance (fn must not add or remove any). */
void rwal_each(const struct rwal *w, void (*fn)(void *arg, const char *name), void *arg);
/* Instances, and bytes of the active half used, for metrics and tests. */
unsigned rwal_count(const struct rwal *w);
uint64_t rwal_used(const struct rwal *w);

struct rwal_stats {
	uint64_t writes;  /* durable writes of records (each carries a batch of all instances) */
	uint64_t records; /* records in them */
	uint64_t bytes;	  /* their bytes */
	uint64_t images;  /* images of every instance into the other half */
};
void rwal_stats(const struct rwal *w, struct rwal_stats *out);

/*
 * Open instance name (created empty if the file has none) after the
 * file's load callback: -EAGAIN before, -EBUSY if it is open already. A
 * log written before files were shared holds one unnamed instance: the
 * first name opened takes it over.
 */
int rlog_open(struct rwal *w, const char *name, struct rlog **out);
/* Its queued records stay queued; waiting callbacks run now with -ECANCELED. */
void rlog_close(struct rlog *l);
const struct rlog_state *rlog_state(const struct rlog *l);

/*
 * Mutations change the in-memory state at once and queue a record; cb
 * (if not NULL) runs when it is durable, never from inside the call.
 * rlog_barrier queues nothing and calls back once everything queued
 * before it is durable.
 */
int rlog_set_meta(struct rlog *l, uint64_t term, uint64_t vote);
int rlog_append(struct rlog *l, const struct raft_entry *e, unsigned n, rlog_done_cb cb, void *arg);
int rlog_truncate(struct rlog *l, uint64_t index);
int rlog_snapshot(struct rlog *l, const struct raft_snapshot *s, unsigned trailing, rlog_done_cb cb,
		  void *arg);
int rlog_barrier(struct rlog *l, rlog_done_cb cb, void *arg);
uint64_t rlog_last_index(const struct rlog *l);

/* Parse one record (fuzzed): 0 with type/instance/gen/payload, -EBADMSG, -EAGAIN if torn short. */
#define RLOG_REC_HDR 24
int rlog_rec_parse(const uint8_t *b, size_t len, uint16_t *type, uint16_t *inst, uint64_t *gen,
		   const uint8_t **payload, uint32_t *plen);

/* Instances as replayed from records (fuzzed through rlog_replay). */
struct rlog_inst {
	struct rlog_inst *next;
	char name[RLOG_NAME_MAX + 1]; /* "": the unnamed one of an older log */
	uint16_t id;		      /* its number in the active half's records */
	struct rlog_state st;
	struct rlog *open; /* its handle, NULL: closed */
};

struct rlog_set {
	struct rlog_inst *head;
	struct rlog_inst **byid; /* the active half's numbers */
	unsigned nids;
};

/*
 * Replay the records of one half body into set (fuzzed; set starts
 * zeroed): the bytes that held valid records of generation gen, or
 * -ENOMEM. Call it again with what follows (more of the half read) from
 * the returned offset on; *more is set when the bytes ended inside a
 * record or between two (read further to know), not when a record was bad.
 */
long rlog_replay(const uint8_t *b, size_t len, uint64_t gen, struct rlog_set *set, bool *more);
struct rlog_inst *rlog_set_find(const struct rlog_set *set, const char *name);
void rlog_set_remove(struct rlog_set *set, struct rlog_inst *in);
void rlog_set_free(struct rlog_set *set);
void rlog_state_free(struct rlog_state *st);

#endif /* SH_CLUSTER_RAFT_LOG_H */
