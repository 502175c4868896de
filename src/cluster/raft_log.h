/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The durable state of one Raft instance (docs/ondisk.md, "Raft log"):
 * term, vote, the latest snapshot and the entries after (and just before)
 * it, kept in memory and persisted to one file through env.
 *
 * The file is two halves. Each half begins with a header block (its
 * generation) followed by records appended in order: META (term, vote),
 * ENTRY (index, term, type, data), TRUNC (index), SNAP. A record carries
 * its half's generation and a crc32c over header and payload. Appends are
 * batched: all records queued while a write is in flight go out in the
 * next write, written with RWF_DSYNC (durable on completion). When a half
 * fills up, or a snapshot is stored, the whole state is written as a fresh
 * image into the other half with the next generation: body first, header
 * block last, so a crash in between leaves the old half in charge.
 *
 * Open reads both headers, takes the newer valid half and replays its
 * records up to the first that is torn, fails its crc, or belongs to an
 * older generation: the state after a crash is a prefix of what was queued
 * in order, and everything whose callback ran is in it.
 */
#ifndef SH_CLUSTER_RAFT_LOG_H
#define SH_CLUSTER_RAFT_LOG_H

#include <raft.h>

#include "../env/env.h"

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

/*
 * Open (creating it with size bytes if absent) and load the log file.
 * cb(arg, 0) runs once the state is loaded, or with a negative errno.
 * *out is valid at once, but usable only after the callback.
 */
int rlog_open(struct env *env, const char *path, uint64_t size, rlog_done_cb cb, void *arg,
	      struct rlog **out);
/* Abandons queued writes: their callbacks run now with -ECANCELED. */
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

/* Parse one record (fuzzed): 0 with type/gen/payload, -EBADMSG, -EAGAIN if torn short. */
#define RLOG_REC_HDR 24
int rlog_rec_parse(const uint8_t *b, size_t len, uint16_t *type, uint64_t *gen,
		   const uint8_t **payload, uint32_t *plen);
/*
 * Replay the records of one half body into st (fuzzed; st starts zeroed):
 * the bytes that held valid records of generation gen, or -ENOMEM.
 */
long rlog_replay(const uint8_t *b, size_t len, uint64_t gen, struct rlog_state *st);
void rlog_state_free(struct rlog_state *st);

#endif /* SH_CLUSTER_RAFT_LOG_H */
