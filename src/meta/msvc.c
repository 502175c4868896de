// SPDX-License-Identifier: Apache-2.0
/* A backend's metadata service: groups, requests, leases, deltas (msvc.h). */
#include <assert.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "msvc_int.h"

SH_LOG_FACILITY("meta.svc");

#define CALL_NS		(5ull * 1000 * 1000 * 1000)
#define READY_WAIT_NS	(2ull * 1000 * 1000 * 1000)
#define BUSY_WAIT_NS	(20ull * 1000 * 1000)
#define VERSION_WAIT_NS (2ull * 1000 * 1000) /* a command waiting for its group's version */
#define OP_NS		(8ull * 1000 * 1000 * 1000)
#define MAX_ROUNDS	16

static void dispatch(struct mreq *m);
static void run_cmd(struct mreq *m);

/* ---- answering ---- */

const char *
msvc_slot_name(unsigned slot)
{
	_Static_assert(MP_KIND_MAX <= MSVC_SLOT_CMD, "request kinds overflow their slots");
	_Static_assert(META_OP_MAX <= MSVC_SLOTS - MSVC_SLOT_CMD, "commands overflow their slots");
	if (slot < MSVC_SLOT_CMD)
		return slot == MP_CMD ? NULL : mp_kind_name(slot); /* commands count by op */
	return slot < MSVC_SLOTS ? meta_op_name(slot - MSVC_SLOT_CMD) : NULL;
}

void
msvc_stats(const struct msvc *s, struct msvc_stats *out)
{
	struct sh_list *pos;

	*out = s->st;
	if (s->wal_ready) {
		out->log_instances = rwal_count(s->wal);
		rwal_stats(s->wal, &out->log);
	}
	memset(&out->heal, 0, sizeof(out->heal));
	out->heal.pass_epoch = UINT64_MAX; /* no filesystem: nothing to wait for */
	sh_list_for_each (pos, &s->fss)
		msvc_heal_add(sh_list_entry(pos, struct mfs, link), &out->heal);
}

static void
mreq_account(struct mreq *m, int status)
{
	unsigned slot = m->req.kind == MP_CMD ? MSVC_SLOT_CMD + m->cmd.op : m->req.kind;

	if (slot >= MSVC_SLOTS || msvc_slot_name(slot) == NULL)
		return;
	m->s->st.requests[slot]++;
	m->s->st.errors[slot] += status < 0;
	m->s->st.time_ns[slot] += env_now(m->s->env) - m->t0;
}

void
mreq_answer(struct mreq *m, int status, const struct mp_reply *r)
{
	struct mp_reply nl = { 0 };

	/* answered once, with nothing of it in flight: what calls back for it would find it freed
	 */
	assert(m->pending == 0);
	mreq_account(m, status);
	sh_list_del(&m->link);
	env_timer_cancel(&m->timer);
	if (m->step == ST_FLUSH || m->step == ST_SHIPPED)
		sh_list_del(&m->flink);
	if (m->fenced)
		msvc_hold_unfence(m->fs, m->fenced);
	if (status < 0)
		sh_log_debug("request %u (op %u) for bucket %u of fs %u: %s", m->req.kind,
			     m->req.kind == MP_CMD ? m->cmd.op : 0, m->req.bucket, m->req.fs,
			     sh_errname(status));
	if (status == SH_ENOTLEADER && r == NULL) {
		nl.aux = m->g ? mgroup_leader(m->g) : 0;
		r = &nl;
	}
	if (m->nr != NULL) {
		struct sh_enc e;

		sh_enc_init(&e);
		if (r != NULL)
			mp_reply_encode(&e, r);
		/* a command's answer leaves once what it changed is recalled from clients */
		bool parked =
		    !sh_enc_error(&e) && m->req.kind == MP_CMD && m->fs != NULL && m->g != NULL &&
		    msvc_cache_park(m->fs, m->g, m->nr, status, e.p, r != NULL ? e.len : 0);

		if (sh_enc_error(&e))
			net_reply(m->nr, -ENOMEM, NULL, 0);
		else if (!parked)
			net_reply(m->nr, status, &(struct iovec){ e.p, e.len }, r != NULL ? 1 : 0);
		sh_enc_fini(&e);
	} else {
		m->cb(m->cbarg, status, r);
	}
	if (m->fs)
		mfs_unref(m->fs);
	sh_free(m);
}

void
msvc_reply_result(struct mreq *m, const struct meta_result *r)
{
	struct mp_reply rep = { 0 };

	if (r->status < 0) {
		mreq_answer(m, r->status, NULL);
		return;
	}
	if (r->attr.type) {
		rep.flags |= MP_ATTR;
		rep.attr = r->attr;
	}
	rep.aux = r->dentry.ino; /* remove: the inode the entry held */
	rep.ver = r->ver;
	if (r->dentry.ino && r->dentry.type) {
		rep.flags |= MP_DENTRY;
		rep.dentry = r->dentry;
	}
	if (r->lease.dir) {
		rep.flags |= MP_LEASE;
		rep.lease = r->lease;
	}
	if (m->cmd.op == META_OP_LEASE_CLOSE) {
		/* the lessees to revoke, as u16s */
		struct sh_enc e;

		sh_enc_init(&e);
		for (unsigned i = 0; i < r->nlessees; i++)
			sh_enc_u16(&e, r->lessees[i]);
		rep.data = e.p;
		rep.dlen = e.len;
		mreq_answer(m, sh_enc_error(&e) ? -ENOMEM : 0, sh_enc_error(&e) ? NULL : &rep);
		sh_enc_fini(&e);
		return;
	}
	if (m->cmd.op == META_OP_DEDUP_CLAIM) {
		/* where each block is (or not here), and when the claim was made */
		struct sh_enc e;

		sh_enc_init(&e);
		sh_enc_u8(&e, (uint8_t)r->ndedup);
		for (unsigned i = 0; i < r->ndedup; i++) {
			uint8_t v[META_EXTENT_VMAX];
			int vl = r->dedup[i].loc.stripe
				     ? meta_extent_encode(&r->dedup[i].loc, v, sizeof(v))
				     : 0;

			sh_enc_u8(&e, (uint8_t)(vl > 0 ? vl : 0));
			if (vl > 0)
				sh_enc_bytes(&e, v, (size_t)vl);
		}
		rep.aux = r->aux;
		rep.data = e.p;
		rep.dlen = e.len;
		mreq_answer(m, sh_enc_error(&e) ? -ENOMEM : 0, sh_enc_error(&e) ? NULL : &rep);
		sh_enc_fini(&e);
		return;
	}
	if (m->cmd.op == META_OP_DEDUP_KILL)
		rep.aux = r->aux;
	if (m->cmd.op == META_OP_RENAME2) {
		/* a step of a rename between buckets: how it left the rename, and its status */
		struct sh_enc e;

		sh_enc_init(&e);
		meta_rename2_encode(&e, &r->rename);
		rep.aux = (uint64_t)r->status;
		rep.data = e.p;
		rep.dlen = e.len;
		mreq_answer(m, sh_enc_error(&e) ? -ENOMEM : 0, sh_enc_error(&e) ? NULL : &rep);
		sh_enc_fini(&e);
		return;
	}
	if (m->cmd.op == META_OP_CREATE && r->dentry.ino && msvc_client_of(m))
		(void)msvc_hold(m->fs, msvc_client_of(m), r->dentry.ino,
				false); /* opened by its creator */
	mreq_answer(m, 0, &rep);
}

/* ---- a client's command answered once its deltas are applied ---- */

#define SHIPPED_WAIT_NS (2ull * 1000 * 1000 * 1000)

/*
 * A link, remove or rename a client asked for that changed an inode or a
 * directory of another bucket (a delta): answered once that bucket applied
 * it (its outbox shipped past the delta), or after SHIPPED_WAIT_NS at most.
 * So what the client asks next sees it: the next stat shows the new link
 * count and ctime, and an unlink right after a link (git's objects) never
 * reaches the inode's bucket before the link's +1 does. true if m waits.
 */
static void
ship_wait(struct mreq *m, uint64_t seq)
{
	if (seq <= m->fs->ship[m->req.bucket].applied) {
		msvc_reply_result(m, &m->res); /* shipped meanwhile (as soon as it was applied) */
		return;
	}
	m->wait_seq = seq;
	m->step = ST_SHIPPED;
	sh_list_add_tail(&m->fs->ship[m->req.bucket].waiters, &m->flink);
	env_timer_arm(&m->timer, SHIPPED_WAIT_NS);
	mfs_ship_kick(m->fs, m->req.bucket);
}

uint64_t
msvc_deltas_out(const struct meta_result *r, uint16_t bucket)
{
	uint64_t seq = 0;

	for (unsigned i = 0; r->queued > 0 && i < sizeof(r->deltas) / sizeof(r->deltas[0]); i++)
		if (r->deltas[i].ino != 0 && r->deltas[i].to != bucket && r->deltas[i].seq > seq)
			seq = r->deltas[i].seq;
	return seq;
}

/*
 * The same for a step of a rename between buckets: the target's commit
 * (asked by the coordinator, a backend) is answered once its deltas are
 * applied, as the coordinator answers its client once its own are.
 */
static bool
wait_deltas(struct mreq *m, const struct meta_result *r)
{
	bool r2_dst = m->cmd.op == META_OP_RENAME2 && m->cmd.flags == META_R2_COMMIT_DST;
	uint64_t seq;

	if (r->status < 0 || (!msvc_client_of(m) && !r2_dst) ||
	    (m->cmd.op != META_OP_LINK && m->cmd.op != META_OP_REMOVE &&
	     m->cmd.op != META_OP_RENAME && !r2_dst))
		return false;
	seq = msvc_deltas_out(r, m->req.bucket);
	if (seq == 0)
		return false;
	if (r != &m->res)
		memcpy(&m->res, r, offsetof(struct meta_result, dedup));
	ship_wait(m, seq);
	return true;
}

void
msvc_answer_shipped(struct mreq *m, uint64_t seq)
{
	META_RESULT_CLEAR(&m->res);
	if (seq == 0) {
		msvc_reply_result(m, &m->res);
		return;
	}
	ship_wait(m, seq);
}

/* bucket's outbox was applied up to upto where it goes: the commands waiting for it answer. */
void
mfs_shipped(struct mfs *fs, uint16_t bucket, uint64_t upto)
{
	struct sh_list *pos, *tmp;

	sh_list_for_each_safe (pos, tmp, &fs->ship[bucket].waiters) {
		struct mreq *m = sh_list_entry(pos, struct mreq, flink);

		if (m->wait_seq <= upto)
			msvc_reply_result(m, &m->res);
	}
}

/* ---- proposing, with the request waiting ---- */

static void on_step(void *arg, int status, const struct meta_result *r);

/* A command that carried a trim up to upto is through: if applied, the outbox is dropped there. */
void
mfs_trimmed(struct ship *sh, int status, const struct meta_result *r, uint64_t upto)
{
	if (status == 0 && r->status == 0 && upto > sh->trimmed)
		sh->trimmed = upto;
}

static void
propose(struct mreq *m, enum step step, uint16_t bucket, const struct meta_cmd *c)
{
	struct ship *sh = &m->fs->ship[bucket];
	struct meta_cmd tc = *c;
	int rc;

	m->step = step;
	/* the outbox's deltas applied where they went are dropped with this command */
	m->trim = 0;
	if (tc.op != META_OP_OUTBOX_ACK && sh->applied > sh->trimmed) {
		tc.trim = m->trim = sh->applied;
		m->trim_bucket = bucket;
	}
	rc = mgroup_propose(m->g, bucket, &tc, on_step, m);
	if (rc < 0) {
		m->step = ST_NONE;
		mreq_answer(m, rc, NULL);
	}
}

static void
later(struct mreq *m, uint64_t ns)
{
	if (env_now(m->s->env) + ns > m->deadline) {
		mreq_answer(m, m->status ? m->status : -ETIMEDOUT, NULL);
		return;
	}
	m->step = ST_LATER;
	env_timer_arm(&m->timer, ns);
}

/* The branch request m is of (a clone's; meta_version.h), as a version: its commands'. */
static uint64_t
branch_ver(const struct mreq *m)
{
	uint64_t v = m->req.kind == MP_CMD ? m->cmd.ver : m->req.at;

	return (uint64_t)meta_ver_branch(v) << META_BRANCH_SHIFT | 1;
}

/* What m's command causes at once (a lease, a revoke): a command of m's branch. */
static struct meta_cmd
internal_cmd(struct mreq *m, uint8_t op, uint64_t ino, uint32_t flags)
{
	return (struct meta_cmd){ .op = op,
				  .ver = branch_ver(m),
				  .now = env_realtime(m->s->env),
				  .ino = ino,
				  .flags = flags };
}

/* Read bucket as m's branch has it now. */
static int
read_branch(struct mreq *m, uint16_t bucket, struct meta_bucket *mb)
{
	return mgroup_read_at(m->g, bucket, meta_ver_newest(branch_ver(m)), mb);
}

/* ---- leases: an entry under another bucket's directory ---- */

static void
on_lease(void *arg, int status, const struct mp_reply *r)
{
	struct mreq *m = arg;
	struct meta_cmd c;

	if (m->fs->closing) {
		mreq_answer(m, -ESHUTDOWN, NULL);
		return;
	}
	if (status == -EBUSY) { /* the directory is being removed: see how that ends */
		m->status = -EBUSY;
		m->step = ST_NONE;
		later(m, BUSY_WAIT_NS);
		return;
	}
	if (status == 0 && (r == NULL || !(r->flags & MP_LEASE)))
		status = -EBADMSG;
	if (status < 0) {
		mreq_answer(m, status, NULL);
		return;
	}
	if (!mgroup_ready(m->g)) {
		mreq_answer(m, SH_ENOTLEADER, NULL);
		return;
	}
	if (m->cmd.op != META_OP_RENAME) {
		/* one directory: the command holds the lease itself, one commit for both
		 * (proposed now, before a revoke that follows the grant can be) */
		m->fold = r->lease;
		m->step = ST_NONE;
		run_cmd(m);
		return;
	}
	c = internal_cmd(m, META_OP_LEASE_HOLD, r->lease.dir, 0);
	c.mode = r->lease.mode;
	c.uid = r->lease.uid;
	c.gid = r->lease.gid;
	c.upto = r->lease.generation;
	propose(m, ST_HOLD, m->req.bucket, &c);
}

int
msvc_call_cmd(struct mfs *fs, uint16_t bucket, const struct meta_cmd *c, uint64_t timeout_ns,
	      mroute_cb cb, void *arg)
{
	struct mp_req q = { .kind = MP_CMD, .fs = fs->id, .bucket = bucket };
	struct sh_enc e;
	int rc;

	sh_enc_init(&e);
	rc = meta_cmd_encode(&e, c);
	q.data = e.p;
	q.dlen = e.len;
	if (rc == 0)
		rc = mroute_call(fs->s->rt, &q, timeout_ns, cb, arg);
	sh_enc_fini(&e);
	return rc;
}

static void
get_lease(struct mreq *m, uint64_t dir)
{
	struct meta_cmd c = internal_cmd(m, META_OP_LEASE_GRANT, dir, m->req.bucket);
	int rc;

	m->step = ST_LEASE;
	rc = msvc_call_cmd(m->fs, meta_ino_bucket(dir), &c, CALL_NS, on_lease, m);
	if (rc < 0) {
		m->step = ST_NONE;
		mreq_answer(m, rc, NULL);
	}
}

/* The directory a command's entry needs a lease on (0: none it lacks). */
static uint64_t
lease_needed(const struct mreq *m)
{
	const struct meta_cmd *c = &m->cmd;
	uint64_t dirs[2] = { c->parent, c->op == META_OP_RENAME ? c->parent2 : 0 };
	struct meta_bucket mb;
	uint64_t need = 0;

	if (c->op == META_OP_RENAME2) {
		struct meta_rename2 r;

		if (c->flags != META_R2_PREPARE_DST ||
		    meta_rename2_decode(c->data, c->dlen, &r) < 0)
			return 0;
		dirs[0] = r.nparent;
	}
	if (read_branch((struct mreq *)m, m->req.bucket, &mb) < 0)
		return 0;
	for (int i = 0; i < 2 && need == 0; i++)
		if (dirs[i] != 0 && meta_lease_held(&mb, dirs[i]) == -ENOLCK)
			need = dirs[i];
	meta_txn_abort(mb.t);
	return need;
}

/* ---- rmdir with leases out ---- */

static void rmdir_close(struct mreq *m);

static void
on_revoked(void *arg, int status, const struct mp_reply *r)
{
	struct mreq *m = arg;
	unsigned i;

	if (status == 0 && r != NULL && r->aux > 0) {
		for (i = 0; i < m->nlessees; i++)
			if (m->lessees[i] == r->aux >> 16)
				m->held[i] = 1;
	}
	if (status < 0 && m->status == 0)
		m->status = status;
	assert(m->pending > 0 && m->step == ST_REVOKE);
	if (--m->pending > 0)
		return;
	if (m->fs->closing) {
		mreq_answer(m, -ESHUTDOWN, NULL);
		return;
	}
	if (!mgroup_ready(m->g)) {
		mreq_answer(m, SH_ENOTLEADER, NULL);
		return;
	}
	for (i = 0; i < m->nlessees && m->status == 0; i++)
		if (m->held[i])
			m->status = -ENOTEMPTY;
	if (m->status < 0) {
		struct meta_cmd c = internal_cmd(m, META_OP_LEASE_REOPEN, m->dir, 0);

		propose(m, ST_REOPEN, meta_ino_bucket(m->dir), &c);
		return;
	}
	/* nobody holds entries: forget them all */
	m->pending = m->nlessees;
	m->step = ST_DROP;
	for (i = 0; i < m->nlessees; i++) {
		struct meta_cmd c = internal_cmd(m, META_OP_LEASE_DROP, m->dir, m->lessees[i]);
		int rc = mgroup_propose(m->g, meta_ino_bucket(m->dir), &c, on_step, m);

		if (rc < 0) {
			m->status = rc;
			if (--m->pending == 0) {
				m->step = ST_NONE;
				mreq_answer(m, rc, NULL);
				return;
			}
		}
	}
}

static void
revoke_all(struct mreq *m)
{
	m->step = ST_REVOKE;
	m->pending = m->nlessees;
	m->status = 0;
	memset(m->held, 0, sizeof(m->held));
	for (unsigned i = 0; i < m->nlessees; i++) {
		/* (of the branch whose directory goes: its lessees' leases of it) */
		struct mp_req q = { .kind = MP_REVOKE,
				    .fs = m->fs->id,
				    .bucket = m->lessees[i],
				    .ino = m->dir,
				    .at = meta_ver_branch(branch_ver(m))
					      ? meta_ver_newest(branch_ver(m))
					      : 0 };
		int rc = mroute_call(m->s->rt, &q, CALL_NS, on_revoked, m);

		if (rc < 0)
			on_revoked(m, rc, NULL);
	}
}

static void
rmdir_close(struct mreq *m)
{
	struct meta_cmd c = internal_cmd(m, META_OP_LEASE_CLOSE, m->dir, 0);

	propose(m, ST_CLOSE, meta_ino_bucket(m->dir), &c);
}

static void
rmdir_start(struct mreq *m)
{
	struct meta_bucket mb;
	struct meta_dentry d;
	int rc = read_branch(m, m->req.bucket, &mb);

	if (rc == 0) {
		rc = meta_lookup(&mb, m->cmd.parent, m->cmd.name, strlen(m->cmd.name), &d);
		meta_txn_abort(mb.t);
	}
	if (rc < 0) {
		mreq_answer(m, rc, NULL);
		return;
	}
	if (meta_ino_bucket(d.ino) != m->req.bucket) {
		msvc_rmdir_remote(m, d.ino); /* renamed here from another bucket */
		return;
	}
	m->dir = d.ino;
	rmdir_close(m);
}

/* ---- the steps' results ---- */

static void
on_step(void *arg, int status, const struct meta_result *r)
{
	struct mreq *m = arg;
	enum step step = m->step;

	if (m->trim != 0) {
		mfs_trimmed(&m->fs->ship[m->trim_bucket], status, r, m->trim);
		m->trim = 0;
	}
	if (step == ST_DROP || step == ST_DELTAS) {
		if (status == 0 && r->status < 0 && m->status == 0)
			m->status = r->status;
		if (status < 0 && m->status == 0)
			m->status = status;
		assert(m->pending > 0);
		if (--m->pending > 0)
			return;
	}
	m->step = ST_NONE;
	if (m->fs->closing) {
		mreq_answer(m, -ESHUTDOWN, NULL);
		return;
	}
	if (step == ST_DELTAS) {
		mreq_answer(m, m->status, m->status == 0 ? &m->rep : NULL);
		return;
	}
	if (step == ST_DROP) {
		if (m->status < 0) {
			mreq_answer(m, m->status, NULL);
			return;
		}
		/* more lessees than one close lists: close again; else remove */
		if (m->nlessees == 64)
			rmdir_close(m);
		else
			propose(m, ST_PROPOSE, m->req.bucket, &m->cmd);
		return;
	}
	if (status < 0) {
		mreq_answer(m, status, NULL);
		return;
	}
	switch (step) {
	case ST_HOLD:
		if (r->status < 0) {
			mreq_answer(m, r->status, NULL);
			return;
		}
		run_cmd(m);
		return;
	case ST_PROPOSE:
		if (r->status == -ENOLCK && !m->dir) {
			run_cmd(m); /* the lease went meanwhile: again */
			return;
		}
		if (r->status < 0 && m->dir) {
			/* rmdir failed: the directory takes leases again */
			struct meta_cmd c = internal_cmd(m, META_OP_LEASE_REOPEN, m->dir, 0);

			m->status = r->status;
			propose(m, ST_REOPEN, meta_ino_bucket(m->dir), &c);
			return;
		}
		if (wait_deltas(m, r))
			return;
		msvc_reply_result(m, r);
		return;
	case ST_CLOSE:
		if (r->status < 0) {
			mreq_answer(m, r->status, NULL);
			return;
		}
		m->nlessees = r->nlessees;
		memcpy(m->lessees, r->lessees, r->nlessees * sizeof(m->lessees[0]));
		if (m->nlessees == 0) {
			/* no lease out: the command decides (empty or not, locked or not) */
			propose(m, ST_PROPOSE, m->req.bucket, &m->cmd);
			return;
		}
		revoke_all(m);
		return;
	case ST_REOPEN:
		mreq_answer(m, m->status ? m->status : -EBUSY, NULL);
		return;
	default:
		break;
	}
	mreq_answer(m, SH_EINTERNAL, NULL);
}

/* ---- commands ---- */

static void
run_cmd(struct mreq *m)
{
	struct meta_result *r = &m->res;
	struct meta_cmd c = m->cmd;
	bool wrote = true;
	uint64_t dir;
	int rc;

	/* a lease granted for this round only: a later one (after a wait) asks again */
	c.lease = m->fold;
	m->fold.dir = 0;
	if (++m->rounds > MAX_ROUNDS) {
		mreq_answer(m, m->status ? m->status : -EBUSY, NULL);
		return;
	}
	if (!mgroup_ready(m->g)) {
		mreq_answer(m, SH_ENOTLEADER, NULL);
		return;
	}
	/*
	 * Its client saw a newer version than the group writes at: a snapshot was
	 * just made, and the group has not taken the version step that keeps it
	 * (its kept list). Applied now, the command would raise the version
	 * without keeping the snapshot, and its writes would drop what the
	 * snapshot reads. So the step first (asked for at once), then the command.
	 */
	if (meta_ver_branch(c.ver) == 0 && c.ver > mgroup_version(m->g)->ver &&
	    env_now(m->s->env) + VERSION_WAIT_NS < m->deadline) {
		msvc_snap_kick(m->s, 0);
		m->rounds--;
		later(m, VERSION_WAIT_NS);
		return;
	}
	/* a dry run on the applied state says what the command needs first */
	rc = mgroup_try(m->g, m->req.bucket, &c, r, &wrote);
	if (rc < 0) {
		mreq_answer(m, rc, NULL);
		return;
	}
	if (r->status == -ENOLCK && (dir = lease_needed(m)) != 0) {
		get_lease(m, dir);
		return;
	}
	if ((r->status == -EBUSY || r->status == -EXDEV) && m->cmd.op == META_OP_REMOVE &&
	    m->cmd.dir) {
		rmdir_start(m); /* leases out, or its inode elsewhere */
		return;
	}
	if (r->status == -EBUSY && !(m->cmd.op == META_OP_REMOVE && m->cmd.dir)) {
		/* a rename between buckets holds the name: wait until it is through */
		m->rounds--;
		m->status = -EBUSY;
		later(m, BUSY_WAIT_NS);
		return;
	}
	if (r->status == -EXDEV && m->cmd.op == META_OP_RENAME) {
		m->step = ST_RENAME2;
		msvc_rename2(m); /* the entries are in two buckets: two phases */
		return;
	}
	if (r->status < 0) {
		mreq_answer(m, r->status, NULL);
		return;
	}
	if (!wrote) {
		/* it changes nothing (a claim of blocks the index does not have, a rename onto
		 * itself): answered like a read, from the state it was tried on */
		msvc_reply_result(m, r);
		return;
	}
	propose(m, ST_PROPOSE, m->req.bucket, &c);
}

static bool
from_server(const struct mreq *m)
{
	uint64_t peer;

	if (m->nr == NULL)
		return true;
	peer = net_req_peer(m->nr);
	return (peer >> 63) == 0 && cfg_node_find(mroute_cfg(m->s->rt), peer >> 8) != NULL;
}

/*
 * A remove of a file: its inode when it lives here and is open nowhere
 * (fenced until the remove is answered), so that it goes at once instead
 * of as an orphan; else 0.
 */
static uint64_t
unheld_target(struct mreq *m)
{
	struct meta_bucket mb;
	struct meta_dentry d;
	int rc;

	if (m->cmd.dir || meta_name_check(m->cmd.name, strlen(m->cmd.name)) < 0 ||
	    read_branch(m, m->req.bucket, &mb) < 0)
		return 0;
	rc = meta_lookup(&mb, m->cmd.parent, m->cmd.name, strlen(m->cmd.name), &d);
	meta_txn_abort(mb.t);
	if (rc < 0 || d.type != META_REG || meta_ino_bucket(d.ino) != m->req.bucket)
		return 0;
	for (uint32_t gi = 0; gi < m->fs->ngroups; gi++)
		if (m->fs->groups[gi] == m->g && msvc_hold_fence(m->fs, gi, d.ino)) {
			m->fenced = d.ino;
			return d.ino;
		}
	return 0;
}

static void
do_cmd(struct mreq *m)
{
	int rc = meta_cmd_decode(m->req.data, m->req.dlen, &m->cmd);

	if (rc < 0) {
		mreq_answer(m, -EINVAL, NULL);
		return;
	}
	switch (m->cmd.op) {
	case META_OP_CREATE:
	case META_OP_LINK:
	case META_OP_REMOVE:
	case META_OP_RENAME:
	case META_OP_SETATTR:
	case META_OP_SETXATTR:
	case META_OP_REMOVEXATTR:
	case META_OP_EXTENT:
	case META_OP_INLINE:
	case META_OP_DEDUP_CLAIM:
		break;
	case META_OP_DEDUP_KILL:
	case META_OP_DEDUP_RELEASE:
	case META_OP_RECLAIM_DONE:
	case META_OP_LEASE_GRANT:
	case META_OP_LEASE_CLOSE:
	case META_OP_LEASE_DROP:
	case META_OP_LEASE_REOPEN:
	case META_OP_RENAME2:
		if (from_server(m))
			break;
		/* fall through */
	default:
		mreq_answer(m, -EPERM, NULL);
		return;
	}
	if (m->cmd.dir > 1) {
		mreq_answer(m, -EINVAL, NULL); /* "checked empty elsewhere" is the leaders' own */
		return;
	}
	/* what every replica must apply alike: the leader's clock, the version */
	m->cmd.now = env_realtime(m->s->env);
	if (meta_ver_branch(m->cmd.ver) != 0) {
		/* a clone's: at its branch's version (the group's record says which), if this
		 * file system has that clone */
		int rc = msvc_branch_ok(m->fs, meta_ver_branch(m->cmd.ver));

		if (rc < 0) {
			mreq_answer(m, rc, NULL);
			return;
		}
	} else {
		/* the newest version its client saw (its order after what that was), at most
		 * the filesystem's: the group writes at that or its own, whichever is newer */
		const struct cfg_fs *f = cfg_fs_by_id(mroute_cfg(m->s->rt), m->fs->id);
		uint64_t most = f != NULL && f->version > 1 ? f->version : 1;

		m->cmd.ver = m->cmd.ver < 1 ? 1 : m->cmd.ver > most ? most : m->cmd.ver;
	}
	if (m->cmd.op == META_OP_REMOVE)
		m->cmd.ino = unheld_target(m);
	if (m->cmd.op == META_OP_LEASE_GRANT || m->cmd.op == META_OP_LEASE_CLOSE ||
	    m->cmd.op == META_OP_LEASE_DROP || m->cmd.op == META_OP_LEASE_REOPEN) {
		propose(m, ST_PROPOSE, m->req.bucket, &m->cmd);
		return;
	}
	run_cmd(m);
}

/* ---- deltas: receiving; revokes ---- */

static void
do_deltas(struct mreq *m)
{
	size_t n = m->req.dlen / META_DELTA_LEN;

	if (n == 0 || n > MP_DELTAS_MAX || m->req.dlen % META_DELTA_LEN != 0 || !from_server(m)) {
		mreq_answer(m, -EINVAL, NULL);
		return;
	}
	m->step = ST_DELTAS;
	m->pending = 1;
	m->status = 0;
	/* one command per run of deltas for the same bucket: their order kept, one Raft entry */
	for (size_t i = 0; i < n;) {
		struct meta_cmd c = internal_cmd(m, META_OP_DELTAS, 0, 0);
		struct meta_delta d;
		size_t k = i;
		int rc = meta_delta_decode(m->req.data + i * META_DELTA_LEN, META_DELTA_LEN, &d);

		while (rc == 0 && k < n) {
			struct meta_delta e;

			if (meta_delta_decode(m->req.data + k * META_DELTA_LEN, META_DELTA_LEN,
					      &e) < 0 ||
			    e.to != d.to)
				break;
			k++;
		}
		if (rc == 0 && !mgroup_has_bucket(m->g, d.to))
			rc = -ENXIO;
		if (rc == 0) {
			c.data = m->req.data + i * META_DELTA_LEN;
			c.dlen = (k - i) * META_DELTA_LEN;
			m->pending++;
			rc = mgroup_propose(m->g, d.to, &c, on_step, m);
			if (rc < 0)
				m->pending--;
		}
		if (rc < 0 && m->status == 0)
			m->status = rc;
		if (rc < 0)
			break; /* in order or not at all: the sender resends from here */
		i = k;
	}
	on_step(m, 0, &(struct meta_result){ 0 });
}

static void
on_revoke_applied(void *arg, int status, const struct meta_result *r)
{
	struct mreq *m = arg;

	m->step = ST_NONE;
	if (m->fs->closing) {
		mreq_answer(m, -ESHUTDOWN, NULL);
		return;
	}
	if (status < 0 || r->status < 0) {
		mreq_answer(m, status < 0 ? status : r->status, NULL);
		return;
	}
	/* give the parent every delta we owe it before it counts its entries */
	m->step = ST_FLUSH;
	sh_list_add_tail(&m->fs->ship[m->req.bucket].flush, &m->flink);
	if (m->fs->ship[m->req.bucket].busy)
		m->fs->ship[m->req.bucket].dirty = true;
	else
		mfs_ship_kick(m->fs, m->req.bucket);
}

static void
do_revoke(struct mreq *m)
{
	struct meta_cmd c = internal_cmd(m, META_OP_LEASE_REVOKE, m->req.ino, 0);
	int rc;

	if (!from_server(m) || m->req.ino == 0) {
		mreq_answer(m, -EINVAL, NULL);
		return;
	}
	m->step = ST_PROPOSE;
	rc = mgroup_propose(m->g, m->req.bucket, &c, on_revoke_applied, m);
	if (rc < 0) {
		m->step = ST_NONE;
		mreq_answer(m, rc, NULL);
	}
}

/* ---- requests ---- */

static void
on_ready_wait(void *arg, int status)
{
	struct mreq *m = arg;

	m->step = ST_NONE;
	if (status < 0 || m->fs->closing) {
		mreq_answer(m, m->fs->closing ? -ESHUTDOWN : status, NULL);
		return;
	}
	dispatch(m);
}

static void
dispatch(struct mreq *m)
{
	struct msvc *s = m->s;

	if (m->fs == NULL) {
		m->fs = mfs_find(s, m->req.fs);
		if (m->fs == NULL) {
			mreq_answer(m, -ENXIO, NULL);
			return;
		}
		m->fs->refs++;
	}
	if (m->req.kind == MP_FORGET) { /* of this node, not of a group */
		uint64_t client = msvc_client_of(m);

		if (client != 0)
			msvc_cache_forget(m->fs, client);
		mreq_answer(m, client != 0 ? 0 : -EPERM, NULL);
		return;
	}
	m->g = mfs_group(m->fs, m->req.bucket);
	if (m->g == NULL) {
		mreq_answer(m, m->req.bucket >= m->fs->nbuckets ? -EINVAL : -ENXIO, NULL);
		return;
	}
	if (!mgroup_ready(m->g)) {
		struct mgroup_info gi;

		mgroup_info(m->g, &gi);
		if (gi.raft_state == RGROUP_LEADER && m->step != ST_WAIT_READY) {
			m->step = ST_WAIT_READY;
			if (mgroup_wait_ready(m->g, READY_WAIT_NS, on_ready_wait, m) == 0)
				return;
		}
		m->step = ST_NONE;
		mreq_answer(m, SH_ENOTLEADER, NULL);
		return;
	}
	m->step = ST_NONE;
	if (msvc_restore_refuses(m->fs, m)) {
		mreq_answer(m, SH_EPAUSED, NULL);
		return;
	}
	if (m->req.at != 0) {
		int rc = msvc_snap_readable(m->fs, &m->req);

		if (rc < 0) {
			mreq_answer(m, rc, NULL);
			return;
		}
	}
	switch (m->req.kind) {
	case MP_CMD:
		do_cmd(m);
		return;
	case MP_DELTAS:
		do_deltas(m);
		return;
	case MP_REVOKE:
		do_revoke(m);
		return;
	default:
		msvc_do_read(m);
	}
}

static void
on_timer(struct env_timer *t)
{
	struct mreq *m = t->arg;

	if (m->step == ST_SHIPPED) {
		msvc_reply_result(m, &m->res); /* its deltas are late: done all the same */
		return;
	}
	m->step = ST_NONE;
	if (m->fs->closing) {
		mreq_answer(m, -ESHUTDOWN, NULL);
		return;
	}
	/* waited after -EBUSY from a lease: try the command again */
	m->g = mfs_group(m->fs, m->req.bucket);
	if (m->g == NULL) {
		mreq_answer(m, -ENXIO, NULL);
		return;
	}
	run_cmd(m);
}

static struct mreq *
mreq_new(struct msvc *s)
{
	struct mreq *m = sh_calloc(1, sizeof(*m));

	if (m == NULL)
		return NULL;
	m->s = s;
	m->t0 = env_now(s->env);
	m->deadline = m->t0 + OP_NS;
	env_timer_init(s->env, &m->timer, on_timer, m);
	sh_list_add_tail(&s->reqs, &m->link);
	return m;
}

/*
 * What a client's key allows (docs/security.md, "Clients' keys"): the file
 * system it was made for, and writes only with a read-write one. Those
 * that change a filesystem: commands, and what leaders send each other.
 */
static int
allowed(const struct msvc *s, const struct net_cred *cred, const struct mp_req *req)
{
	uint16_t br =
	    meta_ver_branch(req->kind == MP_CMD ? meta_cmd_ver_of(req->data, req->dlen) : req->at);
	uint32_t fs = req->fs;

	if (br != 0 && cred->fs != 0) {
		/* a clone's request (its origin's id, its branch): the clone's key opens it, not
		 * its origin's; a writable snapshot is its origin's as every snapshot is, and
		 * opens with either */
		const struct cfg *c = mroute_cfg(s->rt);
		const struct cfg_fs *f = cfg_clone_find(c, req->fs, br);

		fs = f != NULL ? f->id : 0;
		if (f != NULL && net_cred_opens(cred, req->fs) && cfg_writable_snap(c, f) != NULL)
			fs = req->fs;
	}
	if (!net_cred_opens(cred, fs))
		return -EACCES;
	if (cred->access != NET_ACCESS_WRITE &&
	    (req->kind == MP_CMD || req->kind == MP_DELTAS || req->kind == MP_REVOKE))
		return -EROFS;
	return 0;
}

static void
on_request(struct net_req *nr, void *arg)
{
	struct msvc *s = arg;
	const struct net_msg *b = net_req_body(nr);
	struct mreq *m;
	int rc;

	if (s->stopping) {
		net_reply(nr, -ESHUTDOWN, NULL, 0);
		return;
	}
	m = mreq_new(s);
	if (m == NULL) {
		net_reply(nr, -ENOMEM, NULL, 0);
		return;
	}
	m->nr = nr;
	if (mp_req_decode(b->buf->data + b->off, b->len, &m->req) < 0) {
		mreq_answer(m, -EINVAL, NULL);
		return;
	}
	if ((rc = allowed(s, net_req_cred(nr), &m->req)) < 0) {
		mreq_answer(m, rc, NULL);
		return;
	}
	dispatch(m);
}

int
msvc_local_call(void *arg, const struct mp_req *req, mroute_cb cb, void *cbarg)
{
	struct msvc *s = arg;
	struct mfs *fs = mfs_find(s, req->fs);
	struct mgroup *g = fs ? mfs_group(fs, req->bucket) : NULL;
	struct mreq *m;

	if (g == NULL || !mgroup_ready(g) || s->stopping)
		return 0;
	m = mreq_new(s);
	if (m == NULL)
		return 0;
	m->req = *req;
	m->cb = cb;
	m->cbarg = cbarg;
	dispatch(m);
	return 1;
}

static void
on_wal_loaded(void *arg, int status)
{
	struct msvc *s = arg;

	if (status < 0) {
		sh_log_error("metadata: the groups' Raft log: %s; no group starts here",
			     sh_strerror(status));
		return;
	}
	s->wal_ready = true;
	if (!s->stopping && mroute_cfg(s->rt) != NULL)
		msvc_apply_cfg(s, mroute_cfg(s->rt));
}

int
msvc_create(struct net *n, const struct msvc_params *p, struct msvc **out)
{
	struct msvc *s = sh_calloc(1, sizeof(*s));
	char path[600];
	int rc;

	if (s == NULL)
		return -ENOMEM;
	s->net = n;
	s->env = net_env(n);
	s->p = *p;
	snprintf(s->dir, sizeof(s->dir), "%s", p->dir);
	s->p.dir = s->dir;
	if (s->p.log_size == 0)
		s->p.log_size = 32ull << 20;
	if (s->p.wal_size == 0)
		s->p.wal_size = 512ull << 20;
	if (s->p.election_ms == 0)
		s->p.election_ms = 500;
	s->self = net_node_id(n);
	sh_list_init(&s->fss);
	sh_list_init(&s->reqs);
	rc = rnet_create(n, &s->rn);
	if (rc < 0)
		goto err;
	rc = mroute_create(n, &s->rt);
	if (rc < 0)
		goto err_rn;
	mroute_set_local(s->rt, msvc_local_call, s);
	rc = net_handle(n, NET_OP_META, on_request, s);
	if (rc < 0)
		goto err_rt;
	snprintf(path, sizeof(path), "%s/meta.wal", s->dir);
	rc = rwal_open(s->env, path, s->p.wal_size, on_wal_loaded, s, &s->wal);
	if (rc < 0) {
		sh_log_error("metadata: the groups' Raft log %s: %s", path, sh_strerror(rc));
		net_unhandle(n, NET_OP_META); /* s goes: nothing may call on it */
		goto err_rt;
	}
	msvc_balance_start(s);
	msvc_snap_start(s);
	*out = s;
	return 0;
err_rt:
	mroute_destroy(s->rt);
err_rn:
	rnet_destroy(s->rn);
err:
	sh_free(s);
	return rc;
}

static void
finish_stop(struct env_task *t)
{
	struct msvc *s = t->arg;
	void (*done)(void *) = s->done;
	void *arg = s->done_arg;

	while (!sh_list_empty(&s->reqs))
		mreq_answer(sh_list_entry(s->reqs.next, struct mreq, link), -ESHUTDOWN, NULL);
	net_unhandle(s->net, NET_OP_META); /* requests that come later find no one */
	net_unhandle(s->net, NET_OP_META_LEADS);
	mroute_destroy(s->rt);
	rnet_destroy(s->rn);
	rwal_close(s->wal);
	sh_free(s);
	if (done)
		done(arg);
}

void
msvc_stop(struct msvc *s, void (*done)(void *arg), void *arg)
{
	struct sh_list *pos, *tmp;

	s->stopping = true;
	s->done = done;
	s->done_arg = arg;
	msvc_balance_stop(s);
	msvc_snap_stop(s);
	env_task_init(s->env, &s->done_task, finish_stop, s);
	/* closing first, so that what the cancelled calls call back starts nothing new */
	sh_list_for_each (pos, &s->fss)
		sh_list_entry(pos, struct mfs, link)->closing = true;
	mroute_cancel_all(s->rt); /* what waits on other nodes ends now */
	if (sh_list_empty(&s->fss)) {
		env_post(&s->done_task);
		return;
	}
	sh_list_for_each_safe (pos, tmp, &s->fss)
		mfs_close(sh_list_entry(pos, struct mfs, link));
}

void
msvc_crash(struct msvc *s)
{
	struct sh_list *pos;

	sh_list_for_each (pos, &s->fss)
		meta_db_discard(sh_list_entry(pos, struct mfs, link)->db);
}
