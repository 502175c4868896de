// SPDX-License-Identifier: Apache-2.0
/*
 * Snapshots in the simulator (docs/snapshots.md): random creates, mode
 * changes, removes and renames in the root, with snapshots taken and
 * deleted among them and a node killed (-9, its disk torn) right after
 * each one; every ready snapshot must read exactly as the model was when
 * it was taken (each name there or not, its inode and its mode), the live
 * tree as the model is now, and a deleted snapshot must be forgotten once
 * every group has settled. What MP_DIFF says changed between two ready
 * snapshots, asked a page of a few records at a time, is what the model
 * says: the entries whose presence or inode differ, the inodes whose mode
 * does (each page looking at 1 to 4 keys: the cursors of pages that stop
 * before a change are followed too). Now and then the live tree is
 * restored to a ready snapshot (a node killed midway, one time in two):
 * it then reads as the snapshot does, goes on from there, and every
 * snapshot still reads as it was. A writable clone of a ready snapshot
 * comes and goes (a node killed while it is made or dropped, one time in
 * two): it reads as its snapshot did, then takes half the changes, which
 * neither its origin nor any snapshot sees, while the origin's (and its
 * restores) are not the clone's. One snapshot in four taken while no
 * clone is there is writable: its clone (FS@NAME) comes with it, and
 * deleting the snapshot drops the clone first, then the snapshot.
 */
#include "world.h"

#define NAMES	  24
#define OPS	  240
#define SNAPS_MAX 12

struct entry {
	bool there;
	uint64_t ino;
	uint32_t mode;
};

struct snap {
	char name[16];
	uint64_t version;
	bool deleted;
	bool writable;	/* made so: its clone is FS@NAME */
	char clone[64]; /* the clone on it now, if any */
	struct entry e[NAMES];
};

static const struct cfg_snap *
find_snap(struct world *w, const char *name)
{
	return cfg_snap_find(w->cfg, w->fs, name);
}

struct ready {
	struct world *w;
	const char *name;
	bool gone; /* wait for it to be forgotten, not ready */
};

static bool
is_ready(void *arg)
{
	struct ready *r = arg;
	const struct cfg_snap *sn;

	world_submits(r->w);
	sn = find_snap(r->w, r->name);
	return r->gone ? sn == NULL : sn != NULL && sn->state == CFG_SNAP_READY;
}

/* Run until snapshot name is ready (gone: forgotten), applying what the nodes propose. */
static void
wait_snap(struct world *w, const char *name, bool gone)
{
	struct ready r = { w, name, gone };

	SH_ASSERT_MSG(sim_run_until(w->sim, is_ready, &r, 60 * SH_NSEC_PER_SEC),
		      "seed %llu: snapshot %s never %s", (unsigned long long)w->seed, name,
		      gone ? "forgotten" : "ready");
}

/* Every name as of version at (0: the newest) against e. */
static void
check_tree(struct world *w, const struct entry *e, uint64_t at, const char *what)
{
	w->at = at;
	for (int i = 0; i < NAMES; i++) {
		char name[16];
		struct meta_dentry d;
		struct meta_inode in;
		int rc;

		snprintf(name, sizeof(name), "f%d", i);
		rc = lookup(w, META_ROOT_INO, name, &d);
		SH_ASSERT_MSG(rc == (e[i].there ? 0 : -ENOENT),
			      "seed %llu: %s: %s is %s, lookup says %s",
			      (unsigned long long)w->seed, what, name,
			      e[i].there ? "there" : "not there", sh_errname(rc));
		if (!e[i].there)
			continue;
		SH_ASSERT_MSG(d.ino == e[i].ino, "seed %llu: %s: %s is inode %llx, want %llx",
			      (unsigned long long)w->seed, what, name, (unsigned long long)d.ino,
			      (unsigned long long)e[i].ino);
		SH_ASSERT_OK(getattr(w, d.ino, &in));
		SH_ASSERT_MSG((in.mode & 07777) == e[i].mode,
			      "seed %llu: %s: %s has mode %o, want %o", (unsigned long long)w->seed,
			      what, name, in.mode & 07777, e[i].mode);
	}
	w->at = 0;
}

/* What MP_DIFF said of the root's entries and of inodes: per name, per inode. */
struct diffs {
	int entry[NAMES]; /* times named */
	bool old[NAMES], new[NAMES];
	uint64_t inos[1024];
	unsigned ninos;
};

static void
diff_record(struct world *w, struct diffs *ds, const struct mp_diff_rec *r)
{
	const uint8_t *name;
	size_t nlen;

	if (r->key[2] == META_K_INODE) {
		SH_ASSERT(ds->ninos < 1024);
		ds->inos[ds->ninos++] = meta_be64_get(r->key + 3);
		return;
	}
	if (meta_key_dentry_name(r->key, r->klen, &name, &nlen) < 0 ||
	    meta_be64_get(r->key + 3) != META_ROOT_INO)
		return;
	for (int i = 0; i < NAMES; i++) {
		char n[16];

		snprintf(n, sizeof(n), "f%d", i);
		if (strlen(n) == nlen && memcmp(n, name, nlen) == 0) {
			ds->entry[i]++;
			ds->old[i] = r->old != NULL;
			ds->new[i] = r->new != NULL;
			return;
		}
	}
	SH_ASSERT_MSG(0, "seed %llu: MP_DIFF names an entry never made",
		      (unsigned long long)w->seed);
}

/* Every bucket's changes from v1 to v2, paged (max: a few records' bytes). */
static void
diff_buckets(struct world *w, uint64_t v1, uint64_t v2, struct diffs *ds)
{
	static struct call c;
	uint8_t last[META_KEY_MAX];

	for (uint16_t b = 0; b < NBUCKETS; b++) {
		size_t llen = 0;

		for (;;) {
			struct mp_req q = { .kind = MP_DIFF,
					    .bucket = b,
					    .off = v1,
					    .max = 1 + (uint32_t)sh_rand_below(&w->rng, 400),
					    .len = 1 + sh_rand_below(&w->rng, 4), /* keys */
					    .data = last,
					    .dlen = llen };
			struct mp_diff_rec r;
			struct sh_dec d;
			int k;

			w->at = v2;
			SH_ASSERT_OK(call(w, &q, &c));
			w->at = 0;
			sh_dec_init(&d, c.r.data, c.r.dlen);
			while ((k = mp_diff_next(&d, &r)) == 1) {
				if (!r.cursor)
					diff_record(w, ds, &r);
				memcpy(last, r.key, r.klen);
				llen = r.klen;
			}
			SH_ASSERT_EQ(k, 0);
			if (!(c.r.flags & MP_MORE))
				break;
		}
	}
}

/* MP_DIFF from a (NULL: nothing) to b against the model. */
static void
check_diff(struct world *w, const struct snap *a, const struct snap *b)
{
	static struct diffs ds;
	uint64_t v1 = a ? a->version : 0;

	memset(&ds, 0, sizeof(ds));
	diff_buckets(w, v1, b->version, &ds);
	for (int i = 0; i < NAMES; i++) {
		struct entry was = a ? a->e[i] : (struct entry){ 0 }, is = b->e[i];
		bool changed = was.there != is.there || (was.there && was.ino != is.ino);

		SH_ASSERT_MSG(ds.entry[i] == (changed ? 1 : 0),
			      "seed %llu: f%d from %s to %s: %s, MP_DIFF named it %d times",
			      (unsigned long long)w->seed, i, a ? a->name : "nothing", b->name,
			      changed ? "changed" : "the same", ds.entry[i]);
		SH_ASSERT(!changed || (ds.old[i] == was.there && ds.new[i] == is.there));
		if (was.there && is.there && was.ino == is.ino && was.mode != is.mode) {
			bool named = false;

			for (unsigned k = 0; k < ds.ninos; k++)
				named |= ds.inos[k] == is.ino;
			SH_ASSERT_MSG(named, "seed %llu: f%d's mode changed, MP_DIFF says nothing",
				      (unsigned long long)w->seed, i);
		}
	}
}

static int
chmod_ino(struct world *w, uint64_t ino, uint32_t mode)
{
	struct meta_cmd mc = { .op = META_OP_SETATTR, .ino = ino };
	struct call *c = sh_calloc(1, sizeof(*c));
	int rc;

	mc.sa.valid = META_SET_MODE;
	mc.sa.mode = mode;
	rc = cmd(w, meta_ino_bucket(ino), &mc, c);
	sh_free(c);
	return rc;
}

struct restored {
	struct world *w;
	uint32_t epoch;
};

static bool
is_restored(void *arg)
{
	struct restored *r = arg;
	const struct cfg_fs *f;

	world_submits(r->w);
	f = cfg_fs_by_id(r->w->cfg, r->w->fs);
	return f->restore_epoch == r->epoch && f->restore_phase == CFG_RESTORE_NONE;
}

static void crash_one(struct world *w);

struct clone_wait {
	struct world *w;
	bool gone; /* wait for it to be forgotten, not ready */
	const char *name;
};

static bool
clone_there(void *arg)
{
	struct clone_wait *cw = arg;
	const struct cfg_fs *f;

	world_submits(cw->w);
	f = cfg_fs_find(cw->w->cfg, cw->name);
	return cw->gone ? f == NULL : f != NULL && f->clone_state == CFG_CLONE_READY;
}

/*
 * A clone c1 of snapshot s made (gone: deleted), waited for until it
 * serves (is gone). A writable snapshot's clone came with it: gone, the
 * snapshot is deleted (its clone first).
 */
static uint16_t
clone_step(struct world *w, struct snap *s, bool gone)
{
	struct cfg_cmd c = { .op = gone ? CFG_OP_FS_DELETE : CFG_OP_FS_CLONE };
	struct clone_wait cw = { w, gone, s->clone };

	if (s->writable && gone) {
		c.op = CFG_OP_SNAP_DELETE;
		snprintf(c.name, sizeof(c.name), "%s", w->cfg->fs[0].name);
		snprintf(c.snap, sizeof(c.snap), "%s", s->name);
		s->deleted = true;
	} else if (gone) {
		snprintf(c.name, sizeof(c.name), "%s", s->clone);
	} else if (!s->writable) {
		snprintf(s->clone, sizeof(s->clone), "c1");
		snprintf(c.name, sizeof(c.name), "%s", w->cfg->fs[0].name);
		snprintf(c.snap, sizeof(c.snap), "%s", s->name);
		snprintf(c.path, sizeof(c.path), "c1");
	}
	if (c.name[0] != '\0')
		world_apply(w, &c);
	if (sh_rand_below(&w->rng, 2) == 0) {
		/* while the groups take (or drop) its branch */
		sim_run_for(w->sim, sh_rand_below(&w->rng, SH_NSEC_PER_SEC / 2));
		crash_one(w);
	}
	SH_ASSERT_MSG(sim_run_until(w->sim, clone_there, &cw, 60 * SH_NSEC_PER_SEC),
		      "seed %llu: clone of %s never %s", (unsigned long long)w->seed,
		      s ? s->name : "?", gone ? "gone" : "ready");
	return gone ? 0 : cfg_fs_find(w->cfg, s->clone)->branch;
}

/* The clone's tree (branch br) against e. */
static void
check_clone(struct world *w, uint16_t br, const struct entry *e, const char *what)
{
	w->branch = br;
	check_tree(w, e, 0, what);
	w->branch = 0;
}

/* The live tree back to snapshot s (a node killed midway, one time in two). */
static void
restore(struct world *w, const struct snap *s)
{
	struct cfg_cmd c = { .op = CFG_OP_FS_RESTORE };
	struct restored r = { w, cfg_fs_by_id(w->cfg, w->fs)->restore_epoch + 1 };

	snprintf(c.name, sizeof(c.name), "%s", w->cfg->fs[0].name);
	snprintf(c.snap, sizeof(c.snap), "%s", s->name);
	world_apply(w, &c);
	SH_ASSERT_EQ(cfg_fs_by_id(w->cfg, w->fs)->restore_epoch, r.epoch);
	if (sh_rand_below(&w->rng, 2) == 0) {
		/* while the groups drain or go back */
		sim_run_for(w->sim, sh_rand_below(&w->rng, 2 * SH_NSEC_PER_SEC));
		crash_one(w);
	}
	SH_ASSERT_MSG(sim_run_until(w->sim, is_restored, &r, 120 * SH_NSEC_PER_SEC),
		      "seed %llu: restore %u to %s never ended (phase %u)",
		      (unsigned long long)w->seed, r.epoch, s->name,
		      cfg_fs_by_id(w->cfg, w->fs)->restore_phase);
}

static void
crash_one(struct world *w)
{
	int victim = 1 + (int)sh_rand_below(&w->rng, (uint64_t)w->nn);

	node_stop(w, &w->n[victim], true);
	sim_run_for(w->sim, 300 * SH_NSEC_PER_MSEC + sh_rand_below(&w->rng, SH_NSEC_PER_SEC));
	node_start(&w->n[victim]);
}

static void
run(uint64_t seed)
{
	static struct world w;
	static struct snap snaps[SNAPS_MAX];
	struct entry live[NAMES] = { 0 }, cl[NAMES];
	const struct snap *prev = NULL; /* the last ready one checked */
	struct snap *base = NULL;	/* the clone's snapshot (NULL: no clone now) */
	unsigned nsnaps = 0, restores = 0, clones = 0;
	uint16_t br = 0;

	memset(snaps, 0, sizeof(snaps));
	world_start(&w, seed, 4ull << 20);
	for (int op = 0; op < OPS; op++) {
		int i = (int)sh_rand_below(&w.rng, NAMES), j = (int)sh_rand_below(&w.rng, NAMES);
		uint64_t r = sh_rand_below(&w.rng, 100);
		char name[16], name2[16];

		snprintf(name, sizeof(name), "f%d", i);
		snprintf(name2, sizeof(name2), "f%d", j);
		if (r < 6 && nsnaps < SNAPS_MAX) {
			struct snap *s = &snaps[nsnaps++];
			struct cfg_cmd c = { .op = CFG_OP_SNAP_CREATE };

			snprintf(s->name, sizeof(s->name), "s%u", nsnaps);
			snprintf(c.name, sizeof(c.name), "%s", w.cfg->fs[0].name);
			snprintf(c.snap, sizeof(c.snap), "%s", s->name);
			s->writable = base == NULL && sh_rand_below(&w.rng, 4) == 0;
			c.state = s->writable ? CFG_SNAP_WRITABLE : 0;
			world_apply(&w, &c);
			s->version = find_snap(&w, s->name)->version;
			memcpy(s->e, live, sizeof(live));
			if (sh_rand_below(&w.rng, 2) == 0)
				crash_one(&w); /* while the groups move on */
			wait_snap(&w, s->name, false);
			check_tree(&w, s->e, s->version, s->name);
			if (s->writable) { /* its clone: ready once every group takes it */
				char n[sizeof(s->clone)];

				snprintf(n, sizeof(n), "%.40s@%s", w.cfg->fs[0].name, s->name);
				memcpy(s->clone, n, sizeof(n));
				br = clone_step(&w, s, false);
				base = s;
				clones++;
				memcpy(cl, s->e, sizeof(cl));
				check_clone(&w, br, cl, "a writable snapshot made");
			}
			continue;
		}
		if ((r == 9 || r == 10) && nsnaps > 0) {
			const struct snap *s = &snaps[sh_rand_below(&w.rng, nsnaps)];

			if (s->deleted || s->writable)
				continue; /* (a writable one is not restored to) */
			restore(&w, s);
			restores++;
			memcpy(live, s->e, sizeof(live));
			check_tree(&w, live, 0, "the live tree after a restore");
			if (base != NULL)
				check_clone(&w, br, cl, "a clone after its origin's restore");
			continue;
		}
		if (r == 11 && nsnaps > 0 && base == NULL) {
			struct snap *s = &snaps[sh_rand_below(&w.rng, nsnaps)];

			if (s->deleted)
				continue;
			br = clone_step(&w, s, false);
			base = s;
			clones++;
			memcpy(cl, s->e, sizeof(cl));
			check_clone(&w, br, cl, "a clone made");
			continue;
		}
		if (r == 12 && base != NULL) {
			check_clone(&w, br, cl, "a clone before it goes");
			clone_step(&w, base, true);
			base = NULL;
			continue;
		}
		if (r < 9 && nsnaps > 0) {
			struct snap *s = &snaps[sh_rand_below(&w.rng, nsnaps)];
			struct cfg_cmd c = { .op = CFG_OP_SNAP_DELETE };

			if (s->deleted || s == base)
				continue; /* (a clone stands on it: refused) */
			snprintf(c.name, sizeof(c.name), "%s", w.cfg->fs[0].name);
			snprintf(c.snap, sizeof(c.snap), "%s", s->name);
			world_apply(&w, &c);
			s->deleted = true;
			if (sh_rand_below(&w.rng, 2) == 0)
				crash_one(&w); /* while the groups settle */
			continue;
		}
		world_submits(&w);
		/* half the changes in the clone, if there is one */
		struct entry *t = base != NULL && sh_rand_below(&w.rng, 2) ? cl : live;

		w.branch = t == cl ? br : 0;
		if (!t[i].there) {
			uint64_t ino;

			SH_ASSERT_MSG(mk(&w, META_ROOT_INO, name, META_REG, &ino) == 0,
				      "seed %llu: create %s", (unsigned long long)seed, name);
			t[i] = (struct entry){ true, ino, 0644 };
		} else if (r < 55) {
			uint32_t mode = (uint32_t)sh_rand_below(&w.rng, 0777);

			SH_ASSERT_OK(chmod_ino(&w, t[i].ino, mode));
			t[i].mode = mode;
		} else if (r < 75) {
			SH_ASSERT_OK(rm(&w, META_ROOT_INO, name, false));
			t[i].there = false;
		} else if (i != j) {
			SH_ASSERT_MSG(mv(&w, META_ROOT_INO, name, META_ROOT_INO, name2, 0) == 0,
				      "seed %llu: rename %s %s", (unsigned long long)seed, name,
				      name2);
			t[j] = t[i];
			t[i].there = false;
		}
		w.branch = 0;
	}
	for (unsigned k = 0; k < nsnaps && restores == 0; k++)
		if (!snaps[k].deleted &&
		    !snaps[k].writable) { /* (every run restores once at least) */
			restore(&w, &snaps[k]);
			restores++;
			memcpy(live, snaps[k].e, sizeof(live));
		}
	for (unsigned k = 0; k < nsnaps && clones == 0; k++)
		if (!snaps[k].deleted) { /* (every run clones once at least, and writes in it) */
			uint64_t ino;

			br = clone_step(&w, &snaps[k], false);
			base = &snaps[k];
			clones++;
			memcpy(cl, snaps[k].e, sizeof(cl));
			w.branch = br;
			for (int i = 0; i < NAMES; i += 3) {
				char name[16];

				snprintf(name, sizeof(name), "f%d", i);
				if (cl[i].there) {
					SH_ASSERT_OK(rm(&w, META_ROOT_INO, name, false));
					cl[i].there = false;
				} else {
					SH_ASSERT_OK(mk(&w, META_ROOT_INO, name, META_REG, &ino));
					cl[i] = (struct entry){ true, ino, 0644 };
				}
			}
			w.branch = 0;
		}
	check_tree(&w, live, 0, "the live tree");
	if (base != NULL) {
		check_clone(&w, br, cl, "the clone");
		clone_step(&w, base, true);
	}
	check_tree(&w, live, 0, "the live tree after its clone went");
	for (unsigned k = 0; k < nsnaps; k++) {
		if (snaps[k].deleted) {
			wait_snap(&w, snaps[k].name, true);
			w.at = snaps[k].version; /* a deleted snapshot reads no more */
			{
				struct meta_dentry d;

				SH_ASSERT_EQ(lookup(&w, META_ROOT_INO, "f0", &d), -ESTALE);
			}
			w.at = 0;
		} else {
			check_tree(&w, snaps[k].e, snaps[k].version, snaps[k].name);
			check_diff(&w, prev, &snaps[k]);
			prev = &snaps[k];
		}
	}
	world_end(&w);
}

TEST(meta_snapshots_read_as_they_were)
{
	run(sh_test_seed());
}
