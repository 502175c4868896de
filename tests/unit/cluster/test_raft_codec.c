// SPDX-License-Identifier: Apache-2.0
/* Raft messages and the byte codecs: every message type round-trips; truncations are refused. */
#include <stdio.h>

#include "../../../src/cluster/raft_codec.h"
#include "../../lib/test.h"

static void
round_trip(const struct raft_message *m)
{
	struct raft_message d;
	char addr[RC_ADDR_MAX];
	struct sh_enc e, f;

	sh_enc_init(&e);
	sh_enc_init(&f);
	SH_ASSERT_OK(rc_msg_encode(&e, m, 7, "10.0.0.7:7000"));
	SH_ASSERT_OK(rc_msg_decode(e.p, e.len, &d, addr));
	SH_ASSERT_EQ(d.type, m->type);
	SH_ASSERT_EQ(d.server_id, 7);
	SH_ASSERT_STREQ(addr, "10.0.0.7:7000");
	SH_ASSERT_OK(rc_msg_encode(&f, &d, 7, addr));
	SH_ASSERT_EQ(e.len, f.len);
	SH_ASSERT_MEMEQ(e.p, f.p, e.len);
	rc_msg_free(&d);
	for (size_t n = 0; n < e.len; n++)
		SH_ASSERT_EQ(rc_msg_decode(e.p, n, &d, addr), -EBADMSG);
	sh_enc_fini(&e);
	sh_enc_fini(&f);
}

TEST(raft_codec_every_message)
{
	struct raft_message m = { 0 };
	struct raft_entry ents[3];
	char data[3][32];

	m.type = RAFT_IO_REQUEST_VOTE;
	m.request_vote = (struct raft_request_vote){ 5, 2, 100, 4, true, true };
	round_trip(&m);
	m.type = RAFT_IO_REQUEST_VOTE_RESULT;
	m.request_vote_result = (struct raft_request_vote_result){ 5, true, raft_tribool_true };
	round_trip(&m);
	m.type = RAFT_IO_APPEND_ENTRIES_RESULT;
	m.append_entries_result = (struct raft_append_entries_result){ 6, 0, 99 };
	round_trip(&m);
	m.type = RAFT_IO_TIMEOUT_NOW;
	m.timeout_now = (struct raft_timeout_now){ 6, 10, 5 };
	round_trip(&m);
	m.type = RAFT_IO_APPEND_ENTRIES;
	for (int i = 0; i < 3; i++) {
		snprintf(data[i], sizeof(data[i]), "entry %d", i);
		ents[i] = (struct raft_entry){ .term = 6,
					       .type = RAFT_COMMAND,
					       .buf = { data[i], strlen(data[i]) } };
	}
	ents[2].type = RAFT_BARRIER;
	ents[2].buf.len = 0;
	m.append_entries = (struct raft_append_entries){ 6, 10, 5, 9, ents, 3 };
	round_trip(&m);
	m.append_entries.n_entries = 0; /* a heartbeat */
	round_trip(&m);
	m.type = RAFT_IO_INSTALL_SNAPSHOT;
	memset(&m.install_snapshot, 0, sizeof(m.install_snapshot));
	m.install_snapshot.term = 7;
	m.install_snapshot.last_index = 50;
	m.install_snapshot.last_term = 6;
	raft_configuration_init(&m.install_snapshot.conf);
	SH_ASSERT_EQ(
	    raft_configuration_add(&m.install_snapshot.conf, 1, "10.0.0.1:7000", RAFT_VOTER), 0);
	SH_ASSERT_EQ(
	    raft_configuration_add(&m.install_snapshot.conf, 2, "10.0.0.2:7000", RAFT_SPARE), 0);
	m.install_snapshot.conf_index = 3;
	m.install_snapshot.data = (struct raft_buffer){ data[0], 8 };
	round_trip(&m);
	raft_configuration_close(&m.install_snapshot.conf);
}

TEST(raft_codec_rejects_nonsense)
{
	uint8_t b[64] = { 0 };
	struct raft_message m;
	char addr[RC_ADDR_MAX];

	SH_ASSERT_EQ(rc_msg_decode(b, 0, &m, addr), -EBADMSG);
	b[0] = 99; /* no such type */
	SH_ASSERT_EQ(rc_msg_decode(b, sizeof(b), &m, addr), -EBADMSG);
}

TEST(codec_strings_and_blobs)
{
	struct sh_enc e;
	struct sh_dec d;
	char s[8];
	size_t n;
	const uint8_t *p;

	sh_enc_init(&e);
	sh_enc_str(&e, "hello");
	sh_enc_blob(&e, "xyz", 3);
	sh_enc_u64(&e, 42);
	SH_ASSERT_OK(sh_enc_error(&e));
	sh_dec_init(&d, e.p, e.len);
	sh_dec_str(&d, s, sizeof(s));
	SH_ASSERT_STREQ(s, "hello");
	p = sh_dec_blob(&d, 16, &n);
	SH_ASSERT_EQ(n, 3);
	SH_ASSERT_MEMEQ(p, "xyz", 3);
	SH_ASSERT_EQ(sh_dec_u64(&d), 42);
	sh_dec_end(&d);
	SH_ASSERT_OK(sh_dec_error(&d));
	/* a string longer than the buffer, a blob over its limit, reads past the end */
	sh_dec_init(&d, e.p, e.len);
	sh_dec_str(&d, s, 4);
	SH_ASSERT_EQ(sh_dec_error(&d), -EBADMSG);
	sh_dec_init(&d, e.p + 7, e.len - 7);
	sh_dec_blob(&d, 2, &n);
	SH_ASSERT_EQ(sh_dec_error(&d), -EBADMSG);
	sh_dec_init(&d, e.p, 3);
	SH_ASSERT_EQ(sh_dec_u64(&d), 0);
	SH_ASSERT_EQ(sh_dec_error(&d), -EBADMSG);
	sh_enc_fini(&e);
}
