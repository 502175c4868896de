// SPDX-License-Identifier: Apache-2.0
/* The bucket store on LMDB: every LMDB call of Shoal is in this file (meta_db.h). */
#include <errno.h>
#include <lmdb.h>
#include <string.h>

#include "meta_db.h"

SH_LOG_FACILITY("meta.db");

#define TOMBSTONE 0x1

struct meta_db {
	MDB_env *env;
	MDB_dbi dbi;
	unsigned flags;
	MDB_txn *batch;		/* META_DB_BATCH: the open top-level write transaction */
	unsigned batch_n;	/* write transactions merged into it */
	struct meta_txn *child; /* the one transaction now open on the batch */
	uint64_t *base;		/* base[b]: branch b's base (0: none); nbase of them */
	unsigned nbase;
};

struct meta_txn {
	struct meta_db *db;
	MDB_txn *txn;
	bool write;
	bool borrowed; /* reads through the batch itself: nothing to end */
	bool wrote;    /* a put or delete was made through it */
};

static int
err(int rc)
{
	switch (rc) {
	case 0:
		return 0;
	case MDB_NOTFOUND:
		return -ENOENT;
	case MDB_MAP_FULL:
	case MDB_TXN_FULL:
		return -ENOSPC;
	case MDB_BAD_VALSIZE:
		return -EINVAL;
	default:
		if (rc > 0)
			return -rc; /* an errno */
		sh_log_error("lmdb: %s", mdb_strerror(rc));
		return -EIO;
	}
}

int
meta_db_open(const char *path, uint64_t map_size, unsigned flags, struct meta_db **out)
{
	struct meta_db *db = sh_calloc(1, sizeof(*db));
	MDB_txn *txn;
	int rc;

	if (db == NULL)
		return -ENOMEM;
	rc = mdb_env_create(&db->env);
	if (rc == 0)
		rc = mdb_env_set_mapsize(db->env, map_size);
	if (rc == 0)
		rc = mdb_env_open(db->env, path,
				  MDB_NOSUBDIR | MDB_NOTLS |
				      (flags & META_DB_NOSYNC  ? MDB_NOSYNC | MDB_NOMETASYNC
				       : flags & META_DB_BATCH ? MDB_NOMETASYNC
							       : 0),
				  0644);
	if (rc == 0)
		rc = mdb_txn_begin(db->env, NULL, 0, &txn);
	if (rc == 0) {
		rc = mdb_dbi_open(txn, NULL, 0, &db->dbi);
		rc = rc ? (mdb_txn_abort(txn), rc) : mdb_txn_commit(txn);
	}
	if (rc != 0) {
		sh_log_error("bucket store %s: %s", path, mdb_strerror(rc));
		if (db->env)
			mdb_env_close(db->env);
		sh_free(db);
		return err(rc);
	}
	db->flags = flags;
	*out = db;
	return 0;
}

void
meta_db_close(struct meta_db *db)
{
	if (db == NULL)
		return;
	if (meta_db_flush(db, false) < 0)
		sh_log_error("bucket store: the last batch was not committed");
	mdb_env_close(db->env);
	sh_free(db->base);
	sh_free(db);
}

int
meta_db_branch(struct meta_db *db, uint16_t branch, uint64_t base)
{
	if (branch == 0 || (base != 0 && meta_ver_branch(base) >= branch))
		return -EINVAL;
	if (branch >= db->nbase) {
		uint64_t *g;

		if (base == 0)
			return 0;
		g = sh_realloc(db->base, ((size_t)branch + 1) * sizeof(*g));
		if (g == NULL)
			return -ENOMEM;
		memset(g + db->nbase, 0, ((size_t)branch + 1 - db->nbase) * sizeof(*g));
		db->base = g;
		db->nbase = (unsigned)branch + 1;
	}
	db->base[branch] = base;
	return 0;
}

int
meta_db_flush(struct meta_db *db, bool sync)
{
	int rc = 0;

	if (db->child != NULL)
		return -EBUSY;
	if (db->batch != NULL) {
		rc = mdb_txn_commit(db->batch);
		db->batch = NULL;
		db->batch_n = 0;
		if (rc != 0)
			return err(rc);
	}
	if (sync)
		rc = mdb_env_sync(db->env, 1);
	return err(rc);
}

void
meta_db_discard(struct meta_db *db)
{
	if (db->batch != NULL && db->child == NULL) {
		mdb_txn_abort(db->batch);
		db->batch = NULL;
		db->batch_n = 0;
	}
}

unsigned
meta_db_pending(const struct meta_db *db)
{
	return db->batch_n;
}

int
meta_txn_begin(struct meta_db *db, bool write, struct meta_txn **out)
{
	struct meta_txn *t;
	MDB_txn *parent = NULL;
	int rc;

	if (db->child != NULL)
		return -EBUSY; /* one transaction at a time on a batch */
	t = sh_calloc(1, sizeof(*t));
	if (t == NULL)
		return -ENOMEM;
	t->db = db;
	t->write = write;
	if ((db->flags & META_DB_BATCH) && (write || db->batch != NULL)) {
		if (db->batch == NULL) {
			rc = mdb_txn_begin(db->env, NULL, 0, &db->batch);
			if (rc != 0) {
				db->batch = NULL;
				sh_free(t);
				return err(rc);
			}
		}
		if (!write) {
			t->txn = db->batch;
			t->borrowed = true;
			db->child = t;
			*out = t;
			return 0;
		}
		parent = db->batch;
	}
	rc = mdb_txn_begin(db->env, parent, write ? 0 : MDB_RDONLY, &t->txn);
	if (rc != 0) {
		sh_free(t);
		return err(rc);
	}
	if (parent != NULL)
		db->child = t;
	*out = t;
	return 0;
}

static void
txn_end(struct meta_txn *t)
{
	if (t->db->child == t)
		t->db->child = NULL;
	sh_free(t);
}

int
meta_txn_commit(struct meta_txn *t)
{
	struct meta_db *db = t->db;
	int rc = 0;

	if (!t->borrowed) {
		rc = mdb_txn_commit(t->txn);
		if (rc == 0 && db->child == t)
			db->batch_n++;
	}
	txn_end(t);
	return err(rc);
}

void
meta_txn_abort(struct meta_txn *t)
{
	if (t == NULL)
		return;
	if (!t->borrowed)
		mdb_txn_abort(t->txn);
	txn_end(t);
}

/* ---- versioned keys ---- */

static size_t
full_key(uint8_t *out, const struct meta_key *k, uint64_t ver)
{
	memcpy(out, k->b, k->len);
	meta_be64_put(out + k->len, ~ver);
	return k->len + META_VER_LEN;
}

static uint64_t
key_ver(const MDB_val *key)
{
	return ~meta_be64_get((const uint8_t *)key->mv_data + key->mv_size - META_VER_LEN);
}

static bool
same_logical(const MDB_val *key, const uint8_t *lk, size_t llen)
{
	return key->mv_size == llen + META_VER_LEN && memcmp(key->mv_data, lk, llen) == 0;
}

/* A record written at version w is read as of version at (meta_db.h, "Branches"). */
static bool
visible(const struct meta_db *db, uint64_t at, uint64_t w)
{
	for (;;) {
		uint16_t ab = meta_ver_branch(at), wb = meta_ver_branch(w);

		if (wb == ab)
			return w <= at;
		if (ab == 0 || wb > ab || ab >= db->nbase || db->base[ab] == 0)
			return false;
		at = db->base[ab]; /* down the chain: a lower branch */
	}
}

/* A stored key is read as of at: its version is, or it is bookkeeping (one copy for all). */
static bool
read_as_of(const struct meta_db *db, uint64_t at, const MDB_val *key)
{
	return !meta_kind_versioned(((const uint8_t *)key->mv_data)[2]) ||
	       visible(db, at, key_ver(key));
}

int
meta_get(struct meta_txn *t, const struct meta_key *k, uint64_t at, void *val, size_t cap,
	 size_t *len)
{
	uint8_t kb[META_KEY_MAX + META_VER_LEN];
	MDB_val key = { full_key(kb, k, at), kb }, data;
	MDB_cursor *c;
	int rc;

	rc = mdb_cursor_open(t->txn, t->db->dbi, &c);
	if (rc != 0)
		return err(rc);
	rc = mdb_cursor_get(c, &key, &data, MDB_SET_RANGE);
	/* at or below `at`, newest first: past records of branches `at` does not read */
	while (rc == 0 && same_logical(&key, k->b, k->len) && !read_as_of(t->db, at, &key))
		rc = mdb_cursor_get(c, &key, &data, MDB_NEXT);
	if (rc == 0 && !same_logical(&key, k->b, k->len))
		rc = MDB_NOTFOUND;
	if (rc == 0 && (data.mv_size == 0 || (((const uint8_t *)data.mv_data)[0] & TOMBSTONE)))
		rc = MDB_NOTFOUND;
	if (rc == 0) {
		*len = data.mv_size - 1;
		if (*len <= cap)
			memcpy(val, (const uint8_t *)data.mv_data + 1, *len);
	}
	mdb_cursor_close(c);
	if (rc == 0 && *len > cap)
		return -EOVERFLOW;
	return err(rc);
}

int
meta_get_exact(struct meta_txn *t, const struct meta_key *k, uint64_t at, void *val, size_t len)
{
	size_t n;
	int rc = meta_get(t, k, at, val, len, &n);

	if (rc == 0 && n != len)
		rc = -EBADMSG;
	return rc;
}

/* A value whose standing changed (meta_keep.moved), told once the cursor is closed. */
struct moved {
	uint8_t *val;
	size_t len;
	int delta;
};

struct moves {
	struct moved *m;
	unsigned n, cap;
};

static bool
tombstone(const MDB_val *data)
{
	return data->mv_size == 0 || (((const uint8_t *)data->mv_data)[0] & TOMBSTONE);
}

static int
moves_add(struct moves *ms, const MDB_val *data, int delta)
{
	struct moved *m;

	if (tombstone(data))
		return 0; /* a tombstone refers to nothing */
	if (ms->n == ms->cap) {
		unsigned cap = ms->cap ? 2 * ms->cap : 4;
		struct moved *g = sh_realloc(ms->m, cap * sizeof(*g));

		if (g == NULL)
			return -ENOMEM;
		ms->m = g;
		ms->cap = cap;
	}
	m = &ms->m[ms->n];
	m->len = data->mv_size - 1;
	m->val = sh_malloc(m->len ? m->len : 1);
	if (m->val == NULL)
		return -ENOMEM;
	memcpy(m->val, (const uint8_t *)data->mv_data + 1, m->len);
	m->delta = delta;
	ms->n++;
	return 0;
}

/* Tell keep->moved of each (rc: the write's outcome so far; 0 to tell them), and free. */
static int
moves_tell(const struct meta_key *k, struct moves *ms, const struct meta_keep *keep, int rc)
{
	for (unsigned i = 0; i < ms->n; i++) {
		if (rc == 0)
			rc = keep->moved(keep->arg, k, ms->m[i].val, ms->m[i].len, ms->m[i].delta);
		sh_free(ms->m[i].val);
	}
	sh_free(ms->m);
	return rc;
}

/* Version w, with the next newer stored version at newer, is read by a kept snapshot. */
static bool
kept_reads(const struct meta_keep *keep, uint64_t w, uint64_t newer)
{
	for (unsigned i = 0; keep && i < keep->n; i++)
		if (keep->v[i] >= w && keep->v[i] < newer)
			return true;
	return false;
}

/*
 * The versions of k older than ver of ver's branch: drop those that no
 * kept snapshot reads. Version w is read by snapshot S when w <= S and the
 * next newer version of k is above S. was_newest: the first of them was
 * k's newest until this write (it is news whether it stays: +1, or goes:
 * nothing); the others lived for the snapshots already (news only when
 * they go: -1). Below the branch's records, the value its base reads is
 * news (+1) when the branch had none of its own: the branch stopped
 * reading it, the base has not. *older: a version older than ver is left
 * that this one may hide.
 */
static int
prune(struct meta_txn *t, const struct meta_key *k, uint64_t ver, bool was_newest,
      const struct meta_keep *keep, bool *older, uint64_t *dropped)
{
	uint8_t kb[META_KEY_MAX + META_VER_LEN];
	MDB_val key = { full_key(kb, k, ver), kb }, data;
	bool tell = keep != NULL && keep->moved != NULL, first = true;
	uint16_t br = meta_ver_branch(ver);
	struct moves ms = { 0 };
	uint64_t newer = ver;
	MDB_cursor *c;
	int rc, mrc = 0;

	*older = false;
	rc = mdb_cursor_open(t->txn, t->db->dbi, &c);
	if (rc != 0)
		return err(rc);
	rc = mdb_cursor_get(c, &key, &data, MDB_SET_RANGE);
	if (rc == 0 && same_logical(&key, k->b, k->len) && key_ver(&key) == ver)
		rc = mdb_cursor_get(c, &key, &data, MDB_NEXT); /* skip what was just written */
	while (rc == 0 && mrc == 0 && same_logical(&key, k->b, k->len)) {
		uint64_t w = key_ver(&key);
		bool needed = kept_reads(keep, w, newer), news = was_newest && first;

		if (meta_ver_branch(w) != br) {
			/* a lower branch's: never ours to drop; the one the base reads, if any */
			while (rc == 0 && same_logical(&key, k->b, k->len) &&
			       !visible(t->db, ver, key_ver(&key)))
				rc = mdb_cursor_get(c, &key, &data, MDB_NEXT);
			if (rc == 0 && same_logical(&key, k->b, k->len) && !tombstone(&data)) {
				*older = true;
				if (news && tell)
					mrc = moves_add(&ms, &data, +1);
			}
			break;
		}
		newer = w;
		first = false;
		if (needed) {
			*older = true;
			if (news && tell)
				mrc = moves_add(&ms, &data, +1);
			rc = mdb_cursor_get(c, &key, &data, MDB_NEXT);
			continue;
		}
		if (!news && tell)
			mrc = moves_add(&ms, &data, -1); /* copied before it goes */
		if (mrc != 0)
			break;
		rc = mdb_cursor_del(c, 0);
		if (rc != 0)
			break;
		if (dropped)
			(*dropped)++;
		/* the cursor now rests on the record after the deleted one, if any */
		if (mdb_cursor_get(c, &key, &data, MDB_GET_CURRENT) != 0)
			rc = MDB_NOTFOUND;
	}
	mdb_cursor_close(c);
	rc = mrc != 0 ? mrc : rc == MDB_NOTFOUND ? 0 : err(rc);
	if (tell)
		return moves_tell(k, &ms, keep, rc);
	return rc;
}

static int
write_ver(struct meta_txn *t, const struct meta_key *k, uint64_t ver, uint8_t flags,
	  const void *val, size_t len, const struct meta_keep *keep)
{
	uint8_t kb[META_KEY_MAX + META_VER_LEN];
	MDB_val key, data;
	bool existed, older;
	int rc;

	if (!t->write || k->len < 3 || k->len > META_KEY_MAX || ver == 0)
		return -EINVAL;
	if (!meta_kind_versioned(k->b[2])) {
		ver = 1; /* bookkeeping: one copy */
		keep = NULL;
	}
	key = (MDB_val){ full_key(kb, k, ver), kb };
	existed = mdb_get(t->txn, t->db->dbi, &key, &data) == 0;
	data.mv_size = len + 1;
	rc = mdb_put(t->txn, t->db->dbi, &key, &data, MDB_RESERVE);
	if (rc != 0)
		return err(rc);
	((uint8_t *)data.mv_data)[0] = flags;
	if (len)
		memcpy((uint8_t *)data.mv_data + 1, val, len);
	rc = prune(t, k, ver, !existed, keep, &older, NULL);
	if (rc != 0 || !(flags & TOMBSTONE) || older)
		return rc;
	/* a tombstone with nothing older left to hide: it goes too */
	key = (MDB_val){ full_key(kb, k, ver), kb };
	return err(mdb_del(t->txn, t->db->dbi, &key, NULL));
}

bool
meta_txn_wrote(const struct meta_txn *t)
{
	return t->wrote;
}

int
meta_put(struct meta_txn *t, const struct meta_key *k, uint64_t ver, const void *val, size_t len,
	 const struct meta_keep *keep)
{
	t->wrote = true;
	return write_ver(t, k, ver, 0, val, len, keep);
}

int
meta_del(struct meta_txn *t, const struct meta_key *k, uint64_t ver, const struct meta_keep *keep)
{
	t->wrote = true;
	return write_ver(t, k, ver, TOMBSTONE, NULL, 0, keep);
}

int
meta_scan(struct meta_txn *t, const struct meta_key *prefix, const uint8_t *after, size_t alen,
	  uint64_t at, meta_scan_fn fn, void *arg)
{
	uint8_t kb[META_KEY_MAX + META_VER_LEN], last[META_KEY_MAX];
	size_t lastlen = 0;
	MDB_val key, data;
	MDB_cursor *c;
	int rc;

	if (after != NULL && (alen > META_KEY_MAX || alen < prefix->len))
		return -EINVAL;
	rc = mdb_cursor_open(t->txn, t->db->dbi, &c);
	if (rc != 0)
		return err(rc);
	if (after != NULL) {
		/* past every version of `after`: its smallest stored key is version UINT64_MAX...
		 */
		memcpy(kb, after, alen);
		memset(kb + alen, 0xff, META_VER_LEN); /* ~0: after all its versions */
		key = (MDB_val){ alen + META_VER_LEN, kb };
		memcpy(last, after, alen);
		lastlen = alen;
	} else {
		memcpy(kb, prefix->b, prefix->len);
		key = (MDB_val){ prefix->len, kb };
	}
	rc = mdb_cursor_get(c, &key, &data, MDB_SET_RANGE);
	while (rc == 0) {
		size_t llen = key.mv_size - META_VER_LEN;
		const uint8_t *k = key.mv_data;

		if (key.mv_size < prefix->len + META_VER_LEN ||
		    memcmp(k, prefix->b, prefix->len) != 0)
			break;
		/* a logical key seen already (an older version of it, or `after` itself) */
		if (lastlen == llen && memcmp(last, k, llen) == 0) {
			rc = mdb_cursor_get(c, &key, &data, MDB_NEXT);
			continue;
		}
		if (!read_as_of(t->db, at, &key)) {
			/* written after `at`, or in a branch it does not read: its older versions
			 */
			rc = mdb_cursor_get(c, &key, &data, MDB_NEXT);
			continue;
		}
		memcpy(last, k, llen);
		lastlen = llen;
		if (data.mv_size >= 1 && !(((const uint8_t *)data.mv_data)[0] & TOMBSTONE)) {
			int r =
			    fn(arg, k, llen, (const uint8_t *)data.mv_data + 1, data.mv_size - 1);

			if (r != 0) {
				mdb_cursor_close(c);
				return r < 0 ? r : 0;
			}
		}
		rc = mdb_cursor_get(c, &key, &data, MDB_NEXT);
	}
	mdb_cursor_close(c);
	return rc == MDB_NOTFOUND || rc == 0 ? 0 : err(rc);
}

int
meta_floor(struct meta_txn *t, const struct meta_key *prefix, const struct meta_key *k, uint64_t at,
	   meta_scan_fn fn, void *arg)
{
	uint8_t kb[META_KEY_MAX + META_VER_LEN];
	MDB_val key, data, best = { 0, NULL };
	MDB_cursor *c;
	int rc;

	if (k->len < prefix->len || memcmp(k->b, prefix->b, prefix->len) != 0)
		return -EINVAL;
	rc = mdb_cursor_open(t->txn, t->db->dbi, &c);
	if (rc != 0)
		return err(rc);
	/* past every version of k (logical keys are prefix-free: none sorts between) */
	memcpy(kb, k->b, k->len);
	memset(kb + k->len, 0xff, META_VER_LEN);
	key = (MDB_val){ k->len + META_VER_LEN, kb };
	rc = mdb_cursor_get(c, &key, &data, MDB_SET_RANGE);
	if (rc == 0 || rc == MDB_NOTFOUND)
		rc = mdb_cursor_get(c, &key, &data, rc == MDB_NOTFOUND ? MDB_LAST : MDB_PREV);
	/*
	 * Backwards, each logical key's records oldest first: the last one
	 * read as of at before the key changes is what at reads of it.
	 */
	while (rc == 0) {
		size_t llen = key.mv_size - META_VER_LEN;
		uint8_t lk[META_KEY_MAX];

		if (key.mv_size < prefix->len + META_VER_LEN || llen > META_KEY_MAX ||
		    memcmp(key.mv_data, prefix->b, prefix->len) != 0) {
			rc = MDB_NOTFOUND;
			break;
		}
		memcpy(lk, key.mv_data, llen);
		best = (MDB_val){ 0, NULL };
		do {
			if (read_as_of(t->db, at, &key))
				best = data;
			rc = mdb_cursor_get(c, &key, &data, MDB_PREV);
		} while (rc == 0 && same_logical(&key, lk, llen));
		if (best.mv_size >= 1 && !(((const uint8_t *)best.mv_data)[0] & TOMBSTONE)) {
			int r =
			    fn(arg, lk, llen, (const uint8_t *)best.mv_data + 1, best.mv_size - 1);

			mdb_cursor_close(c);
			return r < 0 ? r : 0;
		}
	}
	mdb_cursor_close(c);
	return rc == MDB_NOTFOUND ? -ENOENT : err(rc);
}

/*
 * The cursor rests on a bookkeeping key (a kind not versioned): on to the
 * first key of the next kind of its bucket; MDB_NOTFOUND when the prefix
 * names that kind or none comes after it. kb: room for a key.
 */
static int
next_kind(MDB_cursor *c, const struct meta_key *prefix, uint8_t *kb, MDB_val *key, MDB_val *data)
{
	const uint8_t *k = key->mv_data;

	if (prefix->len >= 3 || k[2] == 0xff)
		return MDB_NOTFOUND;
	kb[0] = k[0];
	kb[1] = k[1];
	kb[2] = (uint8_t)(k[2] + 1);
	*key = (MDB_val){ 3, kb };
	return mdb_cursor_get(c, key, data, MDB_SET_RANGE);
}

/* A key of meta_settle's to look at again: its branch's newest version, a tombstone or not. */
struct settle_key {
	struct meta_key k;
	uint64_t ver;
	bool tomb;
};

/*
 * The logical keys of versioned kinds after `after` that have records of
 * branch kb, at most max looked at (meta_settle's paging), into sk: those
 * with more than one record of kb or a tombstone newest (all: every one).
 */
static int
collect_keys(struct meta_txn *t, const struct meta_key *prefix, const uint8_t *after, size_t alen,
	     unsigned max, uint16_t kb, bool all, struct settle_key *sk, unsigned *nsk,
	     uint8_t *next, size_t *nlen)
{
	uint8_t kbuf[META_KEY_MAX + META_VER_LEN], last[META_KEY_MAX];
	unsigned seen = 0;
	size_t lastlen = 0;
	MDB_val key, data;
	MDB_cursor *c;
	int rc;

	*nsk = 0;
	rc = mdb_cursor_open(t->txn, t->db->dbi, &c);
	if (rc != 0)
		return err(rc);
	if (after != NULL) {
		memcpy(kbuf, after, alen);
		memset(kbuf + alen, 0xff, META_VER_LEN); /* past every version of `after` */
		key = (MDB_val){ alen + META_VER_LEN, kbuf };
	} else {
		memcpy(kbuf, prefix->b, prefix->len);
		key = (MDB_val){ prefix->len, kbuf };
	}
	rc = mdb_cursor_get(c, &key, &data, MDB_SET_RANGE);
	while (rc == 0) {
		const uint8_t *k = key.mv_data;
		size_t llen = key.mv_size - META_VER_LEN;
		unsigned mine = 0;
		struct settle_key *x = &sk[*nsk];

		if (key.mv_size < prefix->len + META_VER_LEN ||
		    memcmp(k, prefix->b, prefix->len) != 0 || llen < 3)
			break;
		if (!meta_kind_versioned(k[2])) {
			rc = next_kind(c, prefix, kbuf, &key, &data); /* bookkeeping: skipped */
			continue;
		}
		if (seen == max) {
			/* go on after the last key looked at */
			memcpy(next, last, lastlen);
			*nlen = lastlen;
			break;
		}
		seen++;
		memcpy(last, k, llen);
		lastlen = llen;
		/* its versions, newest first: the branch's newest, and whether it has older */
		while (rc == 0 && same_logical(&key, last, lastlen) && mine < 2) {
			if (meta_ver_branch(key_ver(&key)) == kb && mine++ == 0) {
				x->ver = key_ver(&key);
				x->tomb = tombstone(&data);
			}
			rc = mdb_cursor_get(c, &key, &data, MDB_NEXT);
		}
		if (mine > 0 && (all || mine > 1 || x->tomb)) {
			memcpy(x->k.b, last, lastlen);
			x->k.len = lastlen;
			(*nsk)++;
		}
		if (rc == 0 && same_logical(&key, last, lastlen)) {
			/* past its other versions */
			memcpy(kbuf, last, lastlen);
			memset(kbuf + lastlen, 0xff, META_VER_LEN);
			key = (MDB_val){ lastlen + META_VER_LEN, kbuf };
			rc = mdb_cursor_get(c, &key, &data, MDB_SET_RANGE);
		}
	}
	mdb_cursor_close(c);
	return rc == 0 || rc == MDB_NOTFOUND ? 0 : err(rc);
}

/* Checked and allocated for meta_settle and meta_drop_branch: room for max keys. */
static struct settle_key *
settle_start(struct meta_txn *t, const struct meta_key *prefix, size_t alen, unsigned max,
	     const uint8_t *after, size_t *nlen, int *rc)
{
	struct settle_key *sk;

	*nlen = 0;
	if (!t->write || max == 0 || prefix->len < 2 ||
	    (after != NULL && (alen > META_KEY_MAX || alen < prefix->len))) {
		*rc = -EINVAL;
		return NULL;
	}
	sk = sh_calloc(max, sizeof(*sk));
	*rc = sk == NULL ? -ENOMEM : 0;
	return sk;
}

int
meta_settle(struct meta_txn *t, const struct meta_key *prefix, const uint8_t *after, size_t alen,
	    unsigned max, const struct meta_keep *keep, uint8_t *next, size_t *nlen,
	    uint64_t *dropped)
{
	uint8_t kb[META_KEY_MAX + META_VER_LEN];
	unsigned nsk = 0;
	MDB_val key, data;
	int rc;
	struct settle_key *sk = settle_start(t, prefix, alen, max, after, nlen, &rc);

	if (sk == NULL)
		return rc;
	rc = collect_keys(t, prefix, after, alen, max, keep ? keep->branch : 0, false, sk, &nsk,
			  next, nlen);
	for (unsigned i = 0; i < nsk && rc == 0; i++) {
		bool older;

		rc = prune(t, &sk[i].k, sk[i].ver, false, keep, &older, dropped);
		if (rc == 0 && !older && sk[i].tomb) {
			key = (MDB_val){ full_key(kb, &sk[i].k, sk[i].ver), kb };
			/* the newest is a tombstone only if it is one: look again */
			if (mdb_get(t->txn, t->db->dbi, &key, &data) == 0 && tombstone(&data)) {
				rc = err(mdb_del(t->txn, t->db->dbi, &key, NULL));
				if (rc == 0 && dropped)
					(*dropped)++;
			}
		}
	}
	if (rc == 0 && nsk > 0)
		t->wrote = true;
	sh_free(sk);
	return rc;
}

int
meta_drop_branch(struct meta_txn *t, const struct meta_key *prefix, const uint8_t *after,
		 size_t alen, unsigned max, const struct meta_keep *keep, uint8_t *next,
		 size_t *nlen, uint64_t *dropped)
{
	struct meta_keep none = { NULL, 0, keep->moved, keep->arg, keep->branch };
	/* above the branch's every version: prune then drops them all (nothing kept) */
	uint64_t top = (uint64_t)keep->branch << META_BRANCH_SHIFT | META_VER_NEWEST;
	struct settle_key *sk;
	unsigned nsk = 0;
	int rc;

	if (keep->branch == 0)
		return -EINVAL;
	sk = settle_start(t, prefix, alen, max, after, nlen, &rc);
	if (sk == NULL)
		return rc;
	rc = collect_keys(t, prefix, after, alen, max, keep->branch, true, sk, &nsk, next, nlen);
	for (unsigned i = 0; i < nsk && rc == 0; i++) {
		bool older;

		rc = prune(t, &sk[i].k, top, false, &none, &older, dropped);
	}
	if (rc == 0 && nsk > 0)
		t->wrote = true;
	sh_free(sk);
	return rc;
}

/* A record as meta_diff reads it: the version it was written at (0: none), a copy of it. */
struct diff_rec {
	uint64_t ver;
	bool tomb;
	uint8_t *val;
	size_t len;
};

static void
diff_take(struct diff_rec *r, const MDB_val *key, const MDB_val *data)
{
	r->ver = key_ver(key);
	r->tomb = tombstone(data);
	r->len = r->tomb ? 0 : data->mv_size - 1;
	if (!r->tomb)
		memcpy(r->val, (const uint8_t *)data->mv_data + 1, r->len);
}

int
meta_diff(struct meta_txn *t, const struct meta_key *prefix, const uint8_t *after, size_t alen,
	  uint64_t v1, uint64_t v2, unsigned max, uint8_t *next, size_t *nlen, meta_diff_fn fn,
	  void *arg)
{
	uint8_t kb[META_KEY_MAX + META_VER_LEN], cur[META_KEY_MAX];
	struct diff_rec a = { 0 }, b = { 0 };
	MDB_val key, data;
	MDB_cursor *c;
	unsigned seen = 0;
	int rc, r = 0;

	if (nlen != NULL)
		*nlen = 0;
	if (max != 0 && (next == NULL || nlen == NULL))
		return -EINVAL;

	if (v1 >= v2 || prefix->len < 2 || alen > META_KEY_MAX ||
	    (alen != 0 && (alen < prefix->len || memcmp(after, prefix->b, prefix->len) != 0)))
		return -EINVAL;
	a.val = sh_malloc(META_VALUE_MAX + 1);
	b.val = sh_malloc(META_VALUE_MAX + 1);
	rc = a.val && b.val ? mdb_cursor_open(t->txn, t->db->dbi, &c) : ENOMEM;
	if (rc != 0) {
		sh_free(a.val);
		sh_free(b.val);
		return err(rc);
	}
	if (alen != 0) { /* past every version of `after` */
		memcpy(kb, after, alen);
		memset(kb + alen, 0xff, META_VER_LEN);
		key = (MDB_val){ alen + META_VER_LEN, kb };
	} else {
		memcpy(kb, prefix->b, prefix->len);
		key = (MDB_val){ prefix->len, kb };
	}
	rc = mdb_cursor_get(c, &key, &data, MDB_SET_RANGE);
	while (rc == 0 && r == 0) {
		const uint8_t *k = key.mv_data;
		size_t llen = key.mv_size - META_VER_LEN;

		if (key.mv_size < prefix->len + META_VER_LEN ||
		    memcmp(k, prefix->b, prefix->len) != 0 || llen < 3)
			break;
		if (!meta_kind_versioned(k[2])) {
			rc = next_kind(c, prefix, kb, &key, &data); /* bookkeeping: skipped */
			continue;
		}
		/* one logical key's versions, newest first: its record as of v2, and as of v1 */
		memcpy(cur, k, llen);
		a.ver = b.ver = 0;
		while (rc == 0 && same_logical(&key, cur, llen)) {
			uint64_t w = key_ver(&key);

			if (b.ver == 0 && visible(t->db, v2, w))
				diff_take(&b, &key, &data);
			if (a.ver == 0 && visible(t->db, v1, w))
				diff_take(&a, &key, &data);
			if (a.ver != 0 && b.ver != 0)
				break;
			rc = mdb_cursor_get(c, &key, &data, MDB_NEXT);
		}
		bool had = a.ver != 0 && !a.tomb, has = b.ver != 0 && !b.tomb;

		/* a record written again with the same bytes (a name renamed away and back) is
		 * no change */
		if (a.ver != b.ver && (had || has) &&
		    !(had && has && a.len == b.len && memcmp(a.val, b.val, a.len) == 0))
			r = fn(arg, cur, llen, had ? a.val : NULL, a.len, has ? b.val : NULL,
			       b.len);
		if (r != 0 || rc != 0)
			break;
		if (max != 0 && ++seen == max) { /* enough looked at: the caller goes on after it */
			memcpy(next, cur, llen);
			*nlen = llen;
			break;
		}
		/* past the key's older versions */
		memcpy(kb, cur, llen);
		memset(kb + llen, 0xff, META_VER_LEN);
		key = (MDB_val){ llen + META_VER_LEN, kb };
		rc = mdb_cursor_get(c, &key, &data, MDB_SET_RANGE);
	}
	mdb_cursor_close(c);
	sh_free(a.val);
	sh_free(b.val);
	if (r != 0)
		return r < 0 ? r : 0;
	return rc == 0 || rc == MDB_NOTFOUND ? 0 : err(rc);
}

int
meta_history(struct meta_txn *t, const struct meta_key *prefix, meta_history_fn fn, void *arg)
{
	uint8_t kb[META_KEY_MAX + META_VER_LEN], cur[META_KEY_MAX];
	size_t clen = 0;
	uint64_t newer = 0;
	MDB_val key, data;
	MDB_cursor *c;
	int rc, r = 0;

	if (prefix->len < 3)
		return -EINVAL;
	rc = mdb_cursor_open(t->txn, t->db->dbi, &c);
	if (rc != 0)
		return err(rc);
	memcpy(kb, prefix->b, prefix->len);
	key = (MDB_val){ prefix->len, kb };
	rc = mdb_cursor_get(c, &key, &data, MDB_SET_RANGE);
	while (rc == 0 && r == 0) {
		size_t llen = key.mv_size - META_VER_LEN;
		uint64_t w;

		if (key.mv_size < prefix->len + META_VER_LEN ||
		    memcmp(key.mv_data, prefix->b, prefix->len) != 0)
			break;
		w = key_ver(&key);
		if (!same_logical(&key, cur, clen)) { /* a key's newest */
			memcpy(cur, key.mv_data, llen);
			clen = llen;
			newer = 0;
		} else if (meta_ver_branch(w) != meta_ver_branch(newer)) {
			newer = 0; /* its newest of another branch */
		}
		r = fn(arg, cur, clen, w,
		       tombstone(&data) ? NULL : (const uint8_t *)data.mv_data + 1,
		       tombstone(&data) ? 0 : data.mv_size - 1, newer);
		newer = w;
		rc = mdb_cursor_get(c, &key, &data, MDB_NEXT);
	}
	mdb_cursor_close(c);
	if (r != 0)
		return r < 0 ? r : 0;
	return rc == 0 || rc == MDB_NOTFOUND ? 0 : err(rc);
}

int
meta_drop_bucket(struct meta_txn *t, uint16_t bucket)
{
	uint8_t kb[2] = { (uint8_t)(bucket >> 8), (uint8_t)bucket };
	MDB_val key = { 2, kb }, data;
	MDB_cursor *c;
	int rc;

	if (!t->write)
		return -EINVAL;
	rc = mdb_cursor_open(t->txn, t->db->dbi, &c);
	if (rc != 0)
		return err(rc);
	rc = mdb_cursor_get(c, &key, &data, MDB_SET_RANGE);
	while (rc == 0 && key.mv_size >= 2 && memcmp(key.mv_data, kb, 2) == 0) {
		rc = mdb_cursor_del(c, 0);
		if (rc == 0 && mdb_cursor_get(c, &key, &data, MDB_GET_CURRENT) != 0)
			rc = MDB_NOTFOUND;
	}
	mdb_cursor_close(c);
	return rc == MDB_NOTFOUND || rc == 0 ? 0 : err(rc);
}

int
meta_export_bucket(struct meta_txn *t, uint16_t bucket, struct sh_enc *e)
{
	uint8_t kb[2] = { (uint8_t)(bucket >> 8), (uint8_t)bucket };
	MDB_val key = { 2, kb }, data;
	MDB_cursor *c;
	size_t count_at;
	uint64_t n = 0;
	int rc;

	rc = mdb_cursor_open(t->txn, t->db->dbi, &c);
	if (rc != 0)
		return err(rc);
	sh_enc_u16(e, bucket);
	count_at = e->len;
	sh_enc_u64(e, 0);
	rc = mdb_cursor_get(c, &key, &data, MDB_SET_RANGE);
	while (rc == 0 && key.mv_size >= 2 && memcmp(key.mv_data, kb, 2) == 0) {
		sh_enc_u16(e, (uint16_t)key.mv_size);
		sh_enc_bytes(e, key.mv_data, key.mv_size);
		sh_enc_blob(e, data.mv_data, data.mv_size);
		n++;
		rc = mdb_cursor_get(c, &key, &data, MDB_NEXT);
	}
	mdb_cursor_close(c);
	if (rc != 0 && rc != MDB_NOTFOUND)
		return err(rc);
	if (sh_enc_error(e))
		return sh_enc_error(e);
	memcpy(e->p + count_at, &n, sizeof(n));
	return 0;
}

int
meta_import_bucket(struct meta_txn *t, uint16_t bucket, const uint8_t *b, size_t len)
{
	struct sh_dec d;
	uint64_t n;
	int rc;

	if (!t->write)
		return -EINVAL;
	sh_dec_init(&d, b, len);
	if (sh_dec_u16(&d) != bucket)
		return -EBADMSG;
	n = sh_dec_u64(&d);
	if (d.err || n > len / 8)
		return -EBADMSG;
	rc = meta_drop_bucket(t, bucket);
	for (uint64_t i = 0; rc == 0 && i < n; i++) {
		size_t klen = sh_dec_u16(&d), vlen;
		const uint8_t *k = sh_dec_bytes(&d, klen);
		const uint8_t *v = sh_dec_blob(&d, META_VALUE_MAX, &vlen);
		MDB_val key, data;

		if (d.err || klen < 2 + 1 + META_VER_LEN || klen > META_KEY_MAX + META_VER_LEN ||
		    k[0] != (uint8_t)(bucket >> 8) || k[1] != (uint8_t)bucket || vlen < 1)
			return -EBADMSG;
		key = (MDB_val){ klen, (void *)k };
		data = (MDB_val){ vlen, (void *)v };
		rc = err(mdb_put(t->txn, t->db->dbi, &key, &data, 0));
	}
	if (rc == 0) {
		sh_dec_end(&d);
		if (d.err)
			return -EBADMSG;
	}
	return rc;
}
