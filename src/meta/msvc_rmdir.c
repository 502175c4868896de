// SPDX-License-Identifier: Apache-2.0
/*
 * rmdir of a directory whose inode lives in another bucket than its entry
 * (it was renamed between buckets): its own bucket H closes it to new
 * entries (lessees revoked, their deltas shipped, those that hold none
 * dropped), says whether it is empty, and only then does the entry's
 * bucket remove the entry, with a delta that drops the inode at H
 * (msvc_int.h). Every step at H goes through the metadata protocol (to
 * this node itself when it leads H too).
 */
#include <string.h>

#include "msvc_int.h"

SH_LOG_FACILITY("meta.rmdir");

#define CALL_NS (5ull * 1000 * 1000 * 1000)

enum rd_step { RD_CLOSE = 1, RD_REVOKE, RD_DROP, RD_CHECK, RD_REMOVE, RD_REOPEN };

struct rd {
	struct mreq *m;
	struct mfs *fs;
	uint64_t dir;
	uint16_t home;
	/* the rmdir's branch (a clone's; meta_version.h): its steps' version, what they read */
	uint64_t ver, at;
	enum rd_step step;
	int status; /* the answer once reopened */
	uint16_t lessees[64];
	unsigned n, pending;
	bool held; /* a lessee still holds entries */
};

static void rd_go(struct rd *r);

static void
rd_end(struct rd *r, int status, const struct mp_reply *rep)
{
	struct mreq *m = r->m;

	sh_free(r);
	mreq_answer(m, status, rep);
}

/* A command at the directory's bucket. */
static int
at_home(struct rd *r, uint8_t op, uint32_t flags, mroute_cb cb, void *arg)
{
	struct meta_cmd c = { .op = op,
			      .ver = r->ver,
			      .now = env_realtime(r->fs->s->env),
			      .ino = r->dir,
			      .flags = flags };

	return msvc_call_cmd(r->fs, r->home, &c, CALL_NS, cb, arg);
}

/* The directory takes entries again; then the rmdir's answer. */
static void
reopen(struct rd *r, int status)
{
	r->status = status;
	r->step = RD_REOPEN;
	rd_go(r);
}

static void
on_home(void *arg, int status, const struct mp_reply *rep)
{
	struct rd *r = arg;

	if (r->fs->closing) {
		if (r->step == RD_REVOKE || r->step == RD_DROP) {
			if (--r->pending > 0)
				return;
		}
		rd_end(r, -ESHUTDOWN, NULL);
		return;
	}
	switch (r->step) {
	case RD_CLOSE:
		if (status < 0) {
			rd_end(r, status, NULL);
			return;
		}
		r->n = rep ? (unsigned)(rep->dlen / 2) : 0;
		if (r->n > 64)
			r->n = 64;
		for (unsigned i = 0; i < r->n; i++)
			r->lessees[i] = (uint16_t)(rep->data[2 * i] | rep->data[2 * i + 1] << 8);
		r->step = r->n ? RD_REVOKE : RD_CHECK;
		break;
	case RD_REVOKE:
		if (status < 0 && r->status == 0)
			r->status = status;
		if (status == 0 && rep != NULL && rep->aux > 0)
			r->held = true;
		if (--r->pending > 0)
			return;
		if (r->status < 0 || r->held) {
			reopen(r, r->held ? -ENOTEMPTY : r->status);
			return;
		}
		r->step = RD_DROP;
		break;
	case RD_DROP:
		if (status < 0 && r->status == 0)
			r->status = status;
		if (--r->pending > 0)
			return;
		if (r->status < 0) {
			reopen(r, r->status);
			return;
		}
		/* more lessees than one close lists: close again */
		r->step = r->n == 64 ? RD_CLOSE : RD_CHECK;
		break;
	case RD_CHECK:
		if (status < 0 || rep == NULL || !(rep->flags & MP_ATTR)) {
			reopen(r, status < 0 ? status : -EPROTO);
			return;
		}
		if (rep->attr.size != 0) {
			reopen(r, -ENOTEMPTY);
			return;
		}
		r->step = RD_REMOVE;
		break;
	case RD_REOPEN:
		rd_end(r, r->status, NULL);
		return;
	default:
		rd_end(r, SH_EINTERNAL, NULL);
		return;
	}
	rd_go(r);
}

static void
on_removed(void *arg, int status, const struct meta_result *res)
{
	struct rd *r = arg;

	if (status < 0 || res->status < 0) {
		reopen(r, status < 0 ? status : res->status);
		return;
	}
	{
		struct mp_reply rep = { .aux = r->dir };

		rd_end(r, 0, &rep);
	}
}

static void
rd_go(struct rd *r)
{
	int rc = 0;

	switch (r->step) {
	case RD_CLOSE:
		rc = at_home(r, META_OP_LEASE_CLOSE, 0, on_home, r);
		break;
	case RD_REVOKE:
	case RD_DROP:
		r->pending = 1;
		r->status = 0;
		for (unsigned i = 0; i < r->n; i++) {
			int c;

			r->pending++;
			if (r->step == RD_REVOKE) {
				struct mp_req q = { .kind = MP_REVOKE,
						    .fs = r->fs->id,
						    .bucket = r->lessees[i],
						    .ino = r->dir,
						    .at = r->at };

				c = mroute_call(r->fs->s->rt, &q, CALL_NS, on_home, r);
			} else {
				c = at_home(r, META_OP_LEASE_DROP, r->lessees[i], on_home, r);
			}
			if (c < 0) {
				r->pending--;
				if (r->status == 0)
					r->status = c;
			}
		}
		on_home(r, 0, NULL); /* the hold taken above */
		return;
	case RD_CHECK: {
		struct mp_req q = { .kind = MP_GETATTR,
				    .fs = r->fs->id,
				    .bucket = r->home,
				    .ino = r->dir,
				    .at = r->at };

		rc = mroute_call(r->fs->s->rt, &q, CALL_NS, on_home, r);
		break;
	}
	case RD_REMOVE: {
		struct meta_cmd c = r->m->cmd;

		c.dir = 2; /* checked empty at its bucket */
		rc = mgroup_propose(r->m->g, r->m->req.bucket, &c, on_removed, r);
		break;
	}
	case RD_REOPEN:
		rc = at_home(r, META_OP_LEASE_REOPEN, 0, on_home, r);
		if (rc < 0) { /* nothing more to do: it reopens when its bucket's leader changes */
			rd_end(r, r->status, NULL);
			return;
		}
		break;
	}
	if (rc < 0)
		reopen(r, rc);
}

void
msvc_rmdir_remote(struct mreq *m, uint64_t dir)
{
	struct rd *r = sh_calloc(1, sizeof(*r));

	if (r == NULL) {
		mreq_answer(m, -ENOMEM, NULL);
		return;
	}
	r->m = m;
	r->fs = m->fs;
	r->dir = dir;
	r->home = meta_ino_bucket(dir);
	r->ver = (uint64_t)meta_ver_branch(m->cmd.ver) << META_BRANCH_SHIFT | 1;
	r->at = meta_ver_branch(m->cmd.ver) ? meta_ver_newest(m->cmd.ver) : 0;
	r->step = RD_CLOSE;
	m->step = ST_RENAME2; /* owned by this job until it answers */
	rd_go(r);
}
