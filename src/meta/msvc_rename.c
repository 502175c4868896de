// SPDX-License-Identifier: Apache-2.0
/*
 * Rename between two buckets, coordinated by the source entry's bucket
 * (msvc_int.h, docs/metadata.md): prepare_src here, prepare_dst at the
 * target entry's bucket, commit_src here (the decision: the intent says
 * committed), commit_dst there, finish here. A step that fails before
 * the decision undoes both sides; after it, commit_dst is retried until
 * it is done. A leader that finds intents at start finishes or undoes
 * them the same way.
 */
#include <string.h>

#include "msvc_int.h"

SH_LOG_FACILITY("meta.rename");

#define R2_CALL_NS  (3ull * 1000 * 1000 * 1000)
#define R2_RETRY_NS (200ull * 1000 * 1000)
#define R2_REDO_NS  (60ull * 1000 * 1000 * 1000) /* then an intent waits for the next leader */
#define R2_BUSY_NS  (8ull * 1000 * 1000 * 1000)	 /* how long a name locked by another waits */

enum r2_step {
	R2_PREP_SRC = 1,
	R2_PREP_DST,
	R2_COMMIT_SRC,
	R2_COMMIT_DST,
	R2_FINISH,
	R2_ABORT_DST,
	R2_ABORT_SRC,
};

struct r2 {
	struct sh_list link; /* in fs->r2s */
	struct mfs *fs;
	struct mreq *m; /* the client's request; NULL in recovery */
	struct meta_rename2 r;
	enum r2_step step;
	int status; /* what the rename comes to (0, or why not) */
	uint64_t deadline;
	uint64_t busy_until; /* a name held by another rename: start again until then */
	bool again;	     /* after undoing, start again (the target name was held) */
	bool waiting;	     /* on its timer (which a crash may never fire) */
	uint64_t ship_seq;   /* the last delta the source's commit queued: the client waits */
	struct env_timer timer;
};

static void r2_go(struct r2 *j);

static void
r2_later(struct r2 *j)
{
	j->waiting = true;
	env_timer_arm(&j->timer, R2_RETRY_NS);
}

static void
r2_end(struct r2 *j)
{
	struct mfs *fs = j->fs;

	env_timer_cancel(&j->timer);
	sh_list_del(&j->link);
	if (j->m != NULL) {
		/* aborted at the target by the source's next leader (its recovery): the
		 * client asks that leader again, where its tag says what happened */
		if (j->status == -ECANCELED)
			j->status = SH_ENOTLEADER;
		if (j->status == 0)
			msvc_answer_shipped(j->m, j->ship_seq); /* its next stat sees the ctime */
		else
			mreq_answer(j->m, j->status, NULL);
	} else if (j->status < 0) {
		sh_log_warn("rename %llx (%s -> %s): %s", (unsigned long long)j->r.id, j->r.oname,
			    j->r.nname, sh_strerror(j->status));
	}
	sh_free(j);
	mfs_unref(fs);
}

static void
r2_cmd(struct r2 *j, uint32_t step, struct meta_cmd *c, struct sh_enc *e)
{
	/* (a step of a clone's rename is a command of its branch) */
	*c = (struct meta_cmd){ .op = META_OP_RENAME2,
				.ver = (uint64_t)j->r.branch << META_BRANCH_SHIFT | 1,
				.now = j->r.now,
				.flags = step };
	sh_enc_init(e);
	meta_rename2_encode(e, &j->r);
	c->data = e->p;
	c->dlen = e->len;
}

static void
on_local(void *arg, int status, const struct meta_result *r)
{
	struct r2 *j = arg;
	int rc = status < 0 ? status : r->status;

	if (j->fs->closing) {
		j->status = -ESHUTDOWN;
		r2_end(j);
		return;
	}
	switch (j->step) {
	case R2_PREP_SRC:
		if (rc == -EBUSY && j->m != NULL && env_now(j->fs->s->env) < j->busy_until) {
			/* the name is in another rename (one a new leader is finishing): wait */
			r2_later(j);
			return;
		}
		if (rc != 0) { /* 1: this request was decided by another coordinator: done */
			j->status = rc < 0 ? rc : 0;
			r2_end(j);
			return;
		}
		j->r.src = r->rename.src;
		j->step = R2_PREP_DST;
		break;
	case R2_COMMIT_SRC:
		if (status < 0) {
			/*
			 * Not known whether the decision committed (leadership lost with it
			 * in flight): undoing the target now could lose the file if it did.
			 * The source's next leader finds the intent and finishes or undoes
			 * it; the client's retry (its tag) learns which.
			 */
			j->status = status;
			r2_end(j);
			return;
		}
		if (rc < 0) { /* refused when applied: not decided, undo */
			j->status = rc;
			j->step = R2_ABORT_DST;
			break;
		}
		j->ship_seq = msvc_deltas_out(r, j->r.src_bucket);
		j->step = R2_COMMIT_DST;
		break;
	case R2_ABORT_SRC:
		if (j->again) {
			j->again = false;
			j->status = 0;
			j->r.id = env_random_u64(j->fs->s->env) | 1;
			j->step = R2_PREP_SRC;
			r2_later(j);
			return;
		}
		/* fall through */
	case R2_FINISH:
		if (rc < 0 && rc != -ENOENT)
			sh_log_warn("rename %llx: finishing at bucket %u: %s",
				    (unsigned long long)j->r.id, j->r.src_bucket, sh_strerror(rc));
		r2_end(j);
		return;
	default:
		break;
	}
	r2_go(j);
}

static void
on_remote(void *arg, int status, const struct mp_reply *rep)
{
	struct r2 *j = arg;

	if (j->fs->closing) {
		j->status = -ESHUTDOWN;
		r2_end(j);
		return;
	}
	switch (j->step) {
	case R2_PREP_DST:
		if (status == 1 || (status == 0 && rep != NULL && rep->aux == 1)) {
			/* two names of one inode: nothing to do */
			j->status = 0;
			j->step = R2_ABORT_SRC;
		} else if (status < 0) {
			j->status = status;
			/* a lost answer may have left a lock there: undo both sides */
			j->step = R2_ABORT_DST;
			/* -ECANCELED: aborted there already (by a new leader's recovery,
			 * or after a lost answer): from the start, with a new id */
			j->again = (status == -EBUSY || status == -ECANCELED) && j->m != NULL &&
				   env_now(j->fs->s->env) < j->busy_until;
		} else {
			struct meta_rename2 got;

			if (rep == NULL || meta_rename2_decode(rep->data, rep->dlen, &got) < 0 ||
			    got.id != j->r.id) {
				j->status = -EPROTO;
				j->step = R2_ABORT_DST;
			} else {
				j->r.dst = got.dst;
				j->r.have_dst = got.have_dst;
				j->step = R2_COMMIT_SRC;
			}
		}
		break;
	case R2_COMMIT_DST:
		/* -ESTALE: its lock is gone, so this was done before */
		if (status < 0 && status != -ESTALE) {
			if (env_now(j->fs->s->env) < j->deadline) {
				r2_later(j);
				return;
			}
			sh_log_error("rename %llx: bucket %u does not take the commit (%s); the "
				     "intent stays for the next leader",
				     (unsigned long long)j->r.id, j->r.dst_bucket,
				     sh_strerror(status));
			j->status = 0; /* decided: the client's rename happened */
			r2_end(j);
			return;
		}
		j->step = R2_FINISH;
		break;
	case R2_ABORT_DST:
		if (status < 0 && status != -ESTALE && env_now(j->fs->s->env) < j->deadline) {
			r2_later(j);
			return;
		}
		j->step = R2_ABORT_SRC;
		break;
	default:
		break;
	}
	r2_go(j);
}

static void
on_timer(struct env_timer *t)
{
	struct r2 *j = t->arg;

	j->waiting = false;
	r2_go(j);
}

/* Run the current step: here (a proposal) or at the target bucket (a call). */
static void
r2_go(struct r2 *j)
{
	static const uint32_t op[] = {
		[R2_PREP_SRC] = META_R2_PREPARE_SRC,  [R2_PREP_DST] = META_R2_PREPARE_DST,
		[R2_COMMIT_SRC] = META_R2_COMMIT_SRC, [R2_COMMIT_DST] = META_R2_COMMIT_DST,
		[R2_FINISH] = META_R2_FINISH,	      [R2_ABORT_DST] = META_R2_ABORT,
		[R2_ABORT_SRC] = META_R2_ABORT
	};
	bool here = j->step == R2_PREP_SRC || j->step == R2_COMMIT_SRC || j->step == R2_FINISH ||
		    j->step == R2_ABORT_SRC;
	struct meta_cmd c;
	struct sh_enc e;
	int rc;

	r2_cmd(j, op[j->step], &c, &e);
	if (here) {
		struct mgroup *g = mfs_group(j->fs, j->r.src_bucket);

		rc = g ? mgroup_propose(g, j->r.src_bucket, &c, on_local, j) : -ENXIO;
	} else {
		rc = msvc_call_cmd(j->fs, j->r.dst_bucket, &c, R2_CALL_NS, on_remote, j);
	}
	sh_enc_fini(&e);
	if (rc < 0) {
		/* this node stopped leading the source: the next leader's recovery takes over
		 * (and the client hears of success only once the decision is committed) */
		if (j->status == 0 && j->step <= R2_COMMIT_SRC)
			j->status = rc;
		r2_end(j);
	}
}

static struct r2 *
r2_new(struct mfs *fs)
{
	struct r2 *j = sh_calloc(1, sizeof(*j));

	if (j == NULL)
		return NULL;
	j->fs = fs;
	fs->refs++;
	sh_list_add_tail(&fs->r2s, &j->link);
	j->deadline = env_now(j->fs->s->env) + R2_REDO_NS;
	env_timer_init(j->fs->s->env, &j->timer, on_timer, j);
	return j;
}

void
msvc_rename2(struct mreq *m)
{
	const struct meta_cmd *c = &m->cmd;
	struct r2 *j = r2_new(m->fs);

	if (j == NULL) {
		mreq_answer(m, -ENOMEM, NULL);
		return;
	}
	j->m = m;
	j->busy_until = env_now(j->fs->s->env) + R2_BUSY_NS;
	j->r = (struct meta_rename2){
		.id = env_random_u64(j->fs->s->env) | 1,
		.src_bucket = m->req.bucket,
		.dst_bucket =
		    meta_dentry_bucket(c->parent2, c->name2, strlen(c->name2), m->fs->nbuckets),
		.oparent = c->parent,
		.nparent = c->parent2,
		.flags = c->flags,
		.now = c->now,
		.tag = c->tag,
		.branch = meta_ver_branch(c->ver),
	};
	memcpy(j->r.oname, c->name, sizeof(j->r.oname));
	memcpy(j->r.nname, c->name2, sizeof(j->r.nname));
	j->step = R2_PREP_SRC;
	r2_go(j);
}

void
msvc_rename2_cancel(struct mfs *fs)
{
	struct sh_list *pos, *tmp;

	/* those waiting to try again end now; those waiting on a call or a proposal end with it */
	sh_list_for_each_safe (pos, tmp, &fs->r2s) {
		struct r2 *j = sh_list_entry(pos, struct r2, link);

		if (j->waiting) {
			j->status = -ESHUTDOWN;
			r2_end(j);
		}
	}
}

struct recover {
	struct meta_rename2 *r;
	int *phase;
	unsigned n, cap;
};

static int
on_intent(void *arg, int phase, const struct meta_rename2 *r)
{
	struct recover *rc = arg;

	if (rc->n == rc->cap) {
		unsigned cap = rc->cap ? rc->cap * 2 : 16;
		struct meta_rename2 *nr = sh_realloc(rc->r, cap * sizeof(*nr));
		int *np = nr ? sh_realloc(rc->phase, cap * sizeof(*np)) : NULL;

		if (nr)
			rc->r = nr;
		if (np == NULL)
			return -ENOMEM;
		rc->phase = np;
		rc->cap = cap;
	}
	rc->r[rc->n] = *r;
	rc->phase[rc->n++] = phase;
	return 0;
}

void
msvc_rename2_recover(struct mfs *fs, struct mgroup *g)
{
	unsigned n;
	const uint16_t *b = mgroup_buckets(g, &n);
	struct recover rc = { 0 };

	/* collect first: the steps start once no transaction is open */
	for (unsigned i = 0; i < n; i++) {
		struct meta_bucket mb;

		if (mgroup_read(g, b[i], &mb) < 0)
			continue;
		(void)meta_intents(&mb, on_intent, &rc);
		meta_txn_abort(mb.t);
	}
	for (unsigned i = 0; i < rc.n; i++) {
		struct r2 *j = r2_new(fs);

		if (j == NULL)
			break;
		j->r = rc.r[i];
		/* prepared only: undo both sides; decided: commit the target, then finish */
		j->step = rc.phase[i] == 2 ? R2_COMMIT_DST : R2_ABORT_DST;
		r2_go(j);
	}
	if (rc.n)
		sh_log_info("filesystem %u: %u unfinished renames taken over", fs->id, rc.n);
	sh_free(rc.r);
	sh_free(rc.phase);
}
