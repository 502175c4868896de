/* SPDX-License-Identifier: Apache-2.0 */
/* What raft_log.c (the file) and raft_log_state.c (records, state, replay) share. */
#ifndef SH_CLUSTER_RAFT_LOG_INT_H
#define SH_CLUSTER_RAFT_LOG_INT_H

#include "../base/codec.h"
#include "raft_log.h"

#define RLOG_MAGIC 0x474C5253u /* "SRLG" */

/* Record types (docs/ondisk.md, "Raft log"): numbers stored on disk. */
#define RLOG_RECS(X)                                                              \
	X(REC_HDR, 1)	/* a half's header block: the half's size */              \
	X(REC_META, 2)	/* term, vote */                                          \
	X(REC_ENTRY, 3) /* index, term, type, data */                             \
	X(REC_TRUNC, 4) /* first index removed */                                 \
	X(REC_SNAP, 5)	/* in an image: the snapshot, the entries follow */       \
	X(REC_SNAPT, 6) /* a snapshot stored, with the entries it keeps before */ \
	X(REC_NAME, 7)	/* the instance number in this record's header: name */   \
	X(REC_DROP, 8)	/* the instance is removed */

enum rlog_rec {
#define X(name, n) name = n,
	RLOG_RECS(X)
#undef X
};

/* The unnumbered instance of a log written before files were shared; the placeholder. */
#define RLOG_ID_NONE 0xFFFFu

size_t rlog_rec_begin(struct sh_enc *e);
void rlog_rec_end(struct sh_enc *e, size_t at, uint16_t type, uint16_t inst, uint64_t gen);

void rlog_enc_meta(struct sh_enc *e, uint16_t inst, uint64_t gen, uint64_t term, uint64_t vote);
void rlog_enc_entry(struct sh_enc *e, uint16_t inst, uint64_t gen, uint64_t index, uint64_t term,
		    uint16_t type, const void *data, size_t len);
/* trailing UINT64_MAX: an image's snapshot record (the entries follow it) */
void rlog_enc_snap(struct sh_enc *e, uint16_t inst, uint64_t gen, const struct rlog_snap *s,
		   uint64_t trailing);

uint64_t rlog_st_last(const struct rlog_state *st);
void rlog_st_truncate(struct rlog_state *st, uint64_t from);
int rlog_st_append(struct rlog_state *st, uint64_t index, uint64_t term, uint16_t type,
		   const void *data, size_t len);
/* Take s as the snapshot, keeping trailing entries before it (UINT64_MAX: all). */
void rlog_st_snap(struct rlog_state *st, struct rlog_snap *s, uint64_t trailing);
struct rlog_snap *rlog_snap_dup(const uint8_t *conf, size_t conf_len, const uint8_t *data,
				size_t len);
void rlog_snap_free(struct rlog_snap *s);

struct rlog_inst *rlog_set_add(struct rlog_set *set, const char *name, uint16_t id);
int rlog_set_bind(struct rlog_set *set, struct rlog_inst *in, uint16_t id);

#endif /* SH_CLUSTER_RAFT_LOG_INT_H */
