// SPDX-License-Identifier: Apache-2.0
/* Raft messages and configurations as bytes (raft_codec.h). */
#include <string.h>

#include "raft_codec.h"

void
rc_conf_encode(struct sh_enc *e, const struct raft_configuration *c)
{
	sh_enc_u32(e, c->n);
	for (unsigned i = 0; i < c->n; i++) {
		sh_enc_u64(e, c->servers[i].id);
		sh_enc_u8(e, (uint8_t)c->servers[i].role);
		sh_enc_str(e, c->servers[i].address);
	}
}

int
rc_conf_decode(struct sh_dec *d, struct raft_configuration *c)
{
	uint32_t n = sh_dec_u32(d);
	char addr[RC_ADDR_MAX];

	if (n > 64 && !d->err)
		d->err = -EBADMSG;
	for (uint32_t i = 0; i < n && !d->err; i++) {
		uint64_t id = sh_dec_u64(d);
		uint8_t role = sh_dec_u8(d);

		sh_dec_str(d, addr, sizeof(addr));
		if (d->err)
			break;
		if (id == 0 || role > RAFT_SPARE) {
			d->err = -EBADMSG;
			break;
		}
		int rc = raft_configuration_add(c, id, addr, role);
		if (rc != 0) {
			d->err = rc == RAFT_NOMEM ? -ENOMEM : -EBADMSG;
			break;
		}
	}
	if (d->err) {
		raft_configuration_close(c);
		raft_configuration_init(c);
	}
	return d->err;
}

int
rc_msg_encode(struct sh_enc *e, const struct raft_message *m, raft_id from, const char *addr)
{
	sh_enc_u8(e, (uint8_t)m->type);
	sh_enc_u64(e, from);
	sh_enc_str(e, addr);
	switch (m->type) {
	case RAFT_IO_REQUEST_VOTE: {
		const struct raft_request_vote *p = &m->request_vote;
		sh_enc_u64(e, p->term);
		sh_enc_u64(e, p->candidate_id);
		sh_enc_u64(e, p->last_log_index);
		sh_enc_u64(e, p->last_log_term);
		sh_enc_u8(e, (uint8_t)((p->disrupt_leader ? 1 : 0) | (p->pre_vote ? 2 : 0)));
		break;
	}
	case RAFT_IO_REQUEST_VOTE_RESULT:
		sh_enc_u64(e, m->request_vote_result.term);
		sh_enc_u8(e, m->request_vote_result.vote_granted);
		sh_enc_u8(e, (uint8_t)m->request_vote_result.pre_vote);
		break;
	case RAFT_IO_APPEND_ENTRIES: {
		const struct raft_append_entries *p = &m->append_entries;
		sh_enc_u64(e, p->term);
		sh_enc_u64(e, p->prev_log_index);
		sh_enc_u64(e, p->prev_log_term);
		sh_enc_u64(e, p->leader_commit);
		sh_enc_u32(e, p->n_entries);
		for (unsigned i = 0; i < p->n_entries; i++) {
			sh_enc_u64(e, p->entries[i].term);
			sh_enc_u8(e, (uint8_t)p->entries[i].type);
			sh_enc_blob(e, p->entries[i].buf.base, p->entries[i].buf.len);
		}
		break;
	}
	case RAFT_IO_APPEND_ENTRIES_RESULT:
		sh_enc_u64(e, m->append_entries_result.term);
		sh_enc_u64(e, m->append_entries_result.rejected);
		sh_enc_u64(e, m->append_entries_result.last_log_index);
		break;
	case RAFT_IO_INSTALL_SNAPSHOT: {
		const struct raft_install_snapshot *p = &m->install_snapshot;
		sh_enc_u64(e, p->term);
		sh_enc_u64(e, p->last_index);
		sh_enc_u64(e, p->last_term);
		rc_conf_encode(e, &p->conf);
		sh_enc_u64(e, p->conf_index);
		sh_enc_blob(e, p->data.base, p->data.len);
		break;
	}
	case RAFT_IO_TIMEOUT_NOW:
		sh_enc_u64(e, m->timeout_now.term);
		sh_enc_u64(e, m->timeout_now.last_log_index);
		sh_enc_u64(e, m->timeout_now.last_log_term);
		break;
	default:
		return -EINVAL;
	}
	return sh_enc_error(e);
}

static int
decode_entries(struct sh_dec *d, struct raft_append_entries *p)
{
	size_t start, total = 0;
	uint8_t *batch;

	p->n_entries = sh_dec_u32(d);
	p->entries = NULL;
	if (d->err || p->n_entries > RC_ENTRIES_MAX)
		return -EBADMSG;
	if (p->n_entries == 0)
		return 0;
	/* first pass: sizes, so that the data goes into one batch */
	start = d->off;
	for (unsigned i = 0; i < p->n_entries && !d->err; i++) {
		size_t len;
		sh_dec_u64(d);
		sh_dec_u8(d);
		sh_dec_blob(d, RC_DATA_MAX, &len);
		total += len;
	}
	if (d->err)
		return -EBADMSG;
	d->off = start;
	p->entries = raft_calloc(p->n_entries, sizeof(*p->entries));
	batch = raft_malloc(total ? total : 1);
	if (p->entries == NULL || batch == NULL) {
		raft_free(p->entries);
		raft_free(batch);
		p->entries = NULL;
		return -ENOMEM;
	}
	for (unsigned i = 0, off = 0; i < p->n_entries; i++) {
		struct raft_entry *en = &p->entries[i];
		size_t len;
		const uint8_t *b;

		en->term = sh_dec_u64(d);
		en->type = sh_dec_u8(d);
		b = sh_dec_blob(d, RC_DATA_MAX, &len);
		if (len)
			memcpy(batch + off, b, len);
		en->buf.base = batch + off;
		en->buf.len = len;
		en->batch = batch;
		off += (unsigned)len;
		if (en->type < RAFT_COMMAND || en->type > RAFT_CHANGE)
			d->err = -EBADMSG;
	}
	if (d->err) {
		raft_free(batch);
		raft_free(p->entries);
		p->entries = NULL;
		return -EBADMSG;
	}
	return 0;
}

int
rc_msg_decode(const uint8_t *b, size_t len, struct raft_message *m, char *addr)
{
	struct sh_dec d;
	int rc = 0;

	memset(m, 0, sizeof(*m));
	sh_dec_init(&d, b, len);
	m->type = sh_dec_u8(&d);
	m->server_id = sh_dec_u64(&d);
	sh_dec_str(&d, addr, RC_ADDR_MAX);
	m->server_address = addr;
	if (d.err)
		return -EBADMSG;
	switch (m->type) {
	case RAFT_IO_REQUEST_VOTE: {
		struct raft_request_vote *p = &m->request_vote;
		uint8_t f;
		p->term = sh_dec_u64(&d);
		p->candidate_id = sh_dec_u64(&d);
		p->last_log_index = sh_dec_u64(&d);
		p->last_log_term = sh_dec_u64(&d);
		f = sh_dec_u8(&d);
		p->disrupt_leader = f & 1;
		p->pre_vote = (f & 2) != 0;
		if (f & ~3)
			d.err = -EBADMSG;
		break;
	}
	case RAFT_IO_REQUEST_VOTE_RESULT: {
		uint8_t g, pv;
		m->request_vote_result.term = sh_dec_u64(&d);
		g = sh_dec_u8(&d);
		pv = sh_dec_u8(&d);
		m->request_vote_result.vote_granted = g != 0;
		m->request_vote_result.pre_vote = (raft_tribool)pv;
		if (g > 1 || pv > raft_tribool_false)
			d.err = -EBADMSG;
		break;
	}
	case RAFT_IO_APPEND_ENTRIES: {
		struct raft_append_entries *p = &m->append_entries;
		p->term = sh_dec_u64(&d);
		p->prev_log_index = sh_dec_u64(&d);
		p->prev_log_term = sh_dec_u64(&d);
		p->leader_commit = sh_dec_u64(&d);
		rc = decode_entries(&d, p);
		if (rc == 0) {
			sh_dec_end(&d);
			if (d.err) {
				rc_msg_free(m);
				return -EBADMSG;
			}
		}
		return rc;
	}
	case RAFT_IO_APPEND_ENTRIES_RESULT:
		m->append_entries_result.term = sh_dec_u64(&d);
		m->append_entries_result.rejected = sh_dec_u64(&d);
		m->append_entries_result.last_log_index = sh_dec_u64(&d);
		break;
	case RAFT_IO_INSTALL_SNAPSHOT: {
		struct raft_install_snapshot *p = &m->install_snapshot;
		const uint8_t *data;
		size_t n;

		p->term = sh_dec_u64(&d);
		p->last_index = sh_dec_u64(&d);
		p->last_term = sh_dec_u64(&d);
		raft_configuration_init(&p->conf);
		rc = rc_conf_decode(&d, &p->conf);
		if (rc)
			return rc;
		p->conf_index = sh_dec_u64(&d);
		data = sh_dec_blob(&d, RC_DATA_MAX, &n);
		sh_dec_end(&d);
		if (d.err) {
			raft_configuration_close(&p->conf);
			return -EBADMSG;
		}
		p->data.base = raft_malloc(n ? n : 1);
		if (p->data.base == NULL) {
			raft_configuration_close(&p->conf);
			return -ENOMEM;
		}
		if (n)
			memcpy(p->data.base, data, n);
		p->data.len = n;
		return 0;
	}
	case RAFT_IO_TIMEOUT_NOW:
		m->timeout_now.term = sh_dec_u64(&d);
		m->timeout_now.last_log_index = sh_dec_u64(&d);
		m->timeout_now.last_log_term = sh_dec_u64(&d);
		break;
	default:
		return -EBADMSG;
	}
	sh_dec_end(&d);
	return d.err ? -EBADMSG : 0;
}

void
rc_msg_free(struct raft_message *m)
{
	if (m->type == RAFT_IO_APPEND_ENTRIES && m->append_entries.entries != NULL) {
		raft_free(m->append_entries.entries[0].batch);
		raft_free(m->append_entries.entries);
		m->append_entries.entries = NULL;
	} else if (m->type == RAFT_IO_INSTALL_SNAPSHOT) {
		raft_configuration_close(&m->install_snapshot.conf);
		raft_free(m->install_snapshot.data.base);
		m->install_snapshot.data.base = NULL;
	}
}
