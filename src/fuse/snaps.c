// SPDX-License-Identifier: Apache-2.0
/*
 * shoal mount: the file system's snapshots under /.snapshots
 * (docs/snapshots.md, docs/mount.md). The root does not list it (as ZFS
 * hides .zfs); a lookup of it, or a path through it, works. It holds a
 * directory per ready snapshot, that snapshot's root, read-only: every
 * change there is EROFS.
 *
 * Shoal's inode numbers are the same in every snapshot as in the live
 * file system, so the kernel gets numbers of the mount's own for what is
 * in a snapshot: from SFUSE_SNAP_FIRST up, handed out at first sight and
 * kept, both ways, for the mount's life (a Shoal number never comes that
 * high: its top 16 bits are a bucket below the cluster's bucket count, and
 * a bucket's sequence would have to pass 2^47). Each snapshot is a
 * library handle of its own (sh_fs_open of FS@NAME), opened at first use.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../base/hash.h"
#include "../base/htable.h"
#include "ops.h"

#define SNAPS_MAX 256

struct kmap {
	struct sh_hnode by_kino, by_ino;
	fuse_ino_t kino;
	int snap;
	uint64_t ino;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
	char name[64];
	sh_fs *fs;
} snaps[SNAPS_MAX];
static int nsnaps;
static struct sh_htable by_kino, by_ino;
static bool tables;
static fuse_ino_t next_kino = SFUSE_SNAP_FIRST;

static uint64_t
ino_hash(int snap, uint64_t ino)
{
	return sh_hash_u64(ino ^ ((uint64_t)(unsigned)snap << 52));
}

static bool
eq_kino(const struct sh_hnode *n, const void *key)
{
	return ((const struct kmap *)((const char *)n - offsetof(struct kmap, by_kino)))->kino ==
	       *(const fuse_ino_t *)key;
}

struct ino_key {
	int snap;
	uint64_t ino;
};

static bool
eq_ino(const struct sh_hnode *n, const void *key)
{
	const struct kmap *m =
	    (const struct kmap *)((const char *)n - offsetof(struct kmap, by_ino));
	const struct ino_key *k = key;

	return m->snap == k->snap && m->ino == k->ino;
}

/* Snapshot name's index among those seen (under mu), or -1. */
static int
snap_find(const char *name)
{
	for (int k = 0; k < nsnaps; k++)
		if (strcmp(snaps[k].name, name) == 0)
			return k;
	return -1;
}

/*
 * Snapshot name's index, its handle opened at first use (without mu held:
 * the open may wait for the configuration). -ENOENT, -EAGAIN.
 */
static int
snap_index(struct sfuse *s, const char *name)
{
	char full[192];
	sh_fs *fs;
	int k, rc;

	pthread_mutex_lock(&mu);
	k = snap_find(name);
	pthread_mutex_unlock(&mu);
	if (k >= 0)
		return k;
	if (strlen(name) >= sizeof(snaps[0].name))
		return -ENOENT;
	snprintf(full, sizeof(full), "%s@%s", s->o.fs, name);
	rc = sh_fs_open(s->c, full, &fs);
	if (rc < 0)
		return rc == -EAGAIN || rc == -ESTALE ? -ENOENT : rc;
	pthread_mutex_lock(&mu);
	k = snap_find(name); /* another thread opened it meanwhile: its handle stays */
	if (k < 0 && nsnaps < SNAPS_MAX) {
		snprintf(snaps[nsnaps].name, sizeof(snaps[0].name), "%s", name);
		snaps[nsnaps].fs = fs;
		fs = NULL;
		k = nsnaps++;
	}
	pthread_mutex_unlock(&mu);
	if (fs != NULL)
		sh_fs_close(fs);
	return k >= 0 ? k : -ENOENT;
}

int
sfuse_where(struct sfuse *s, fuse_ino_t kino, struct sfuse_where *w)
{
	struct sh_hnode *n = NULL;

	if (sfuse_live(kino)) {
		*w = (struct sfuse_where){ .fs = s->fs, .ino = kino, .snap = -1 };
		return 0;
	}
	if (kino == SFUSE_SNAPDIR_INO)
		return 1;
	pthread_mutex_lock(&mu);
	if (tables)
		n = sh_htable_find(&by_kino, sh_hash_u64(kino), &kino, eq_kino);
	if (n != NULL) {
		const struct kmap *m =
		    (const struct kmap *)((char *)n - offsetof(struct kmap, by_kino));

		*w =
		    (struct sfuse_where){ .fs = snaps[m->snap].fs, .ino = m->ino, .snap = m->snap };
	}
	pthread_mutex_unlock(&mu);
	return n != NULL ? 0 : -ESTALE;
}

fuse_ino_t
sfuse_kino(const struct sfuse_where *w, uint64_t ino)
{
	struct ino_key key = { w->snap, ino };
	uint64_t h = ino_hash(w->snap, ino);
	struct sh_hnode *n;
	struct kmap *m;
	fuse_ino_t kino = 0;

	if (w->snap < 0)
		return ino;
	pthread_mutex_lock(&mu);
	if (!tables && sh_htable_init(&by_kino, 0) == 0) {
		if (sh_htable_init(&by_ino, 0) == 0)
			tables = true;
		else
			sh_htable_fini(&by_kino);
	}
	n = tables ? sh_htable_find(&by_ino, h, &key, eq_ino) : NULL;
	if (n != NULL) {
		kino = ((struct kmap *)((char *)n - offsetof(struct kmap, by_ino)))->kino;
	} else if (tables && (m = calloc(1, sizeof(*m))) != NULL) {
		m->kino = kino = next_kino++;
		m->snap = w->snap;
		m->ino = ino;
		sh_htable_insert(&by_kino, &m->by_kino, sh_hash_u64(m->kino));
		sh_htable_insert(&by_ino, &m->by_ino, h);
	}
	pthread_mutex_unlock(&mu);
	return kino; /* (0 only without memory: the kernel is told ENOMEM by the caller) */
}

int
sfuse_kstat(const struct sfuse_where *w, struct stat *st)
{
	st->st_ino = sfuse_kino(w, st->st_ino);
	return st->st_ino != 0 ? 0 : -ENOMEM;
}

void
sfuse_snapdir_stat(struct sfuse *s, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	if (sh_getattr(s->fs, FUSE_ROOT_ID, st) < 0)
		clock_gettime(CLOCK_REALTIME, &st->st_mtim);
	st->st_ino = SFUSE_SNAPDIR_INO;
	st->st_mode = S_IFDIR | 0555;
	st->st_nlink = 2;
	st->st_size = 0;
}

bool
sfuse_snap_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct sfuse *s = sfuse_of(req);
	struct sfuse_where w;
	struct stat st;
	int k, rc;

	if (parent == FUSE_ROOT_ID && strcmp(name, SFUSE_SNAPDIR_NAME) == 0) {
		sfuse_snapdir_stat(s, &st);
		sfuse_reply_entry(req, 0, &st);
		return true;
	}
	if (parent != SFUSE_SNAPDIR_INO)
		return false;
	k = snap_index(s, name);
	if (k < 0) {
		sfuse_reply_entry(req, k, &st);
		return true;
	}
	w = (struct sfuse_where){ .fs = snaps[k].fs, .ino = FUSE_ROOT_ID, .snap = k };
	rc = sh_getattr(w.fs, FUSE_ROOT_ID, &st);
	if (rc == 0)
		rc = sfuse_kstat(&w, &st);
	sfuse_reply_entry(req, rc, &st);
	return true;
}

int
sfuse_snapdir_list(struct sfuse *s, char (**names)[64], fuse_ino_t **kinos)
{
	char(*all)[64] = calloc(SNAPS_MAX, 64);
	fuse_ino_t *ks = calloc(SNAPS_MAX, sizeof(*ks));
	int n = all && ks ? sh_fs_snapshots(s->c, s->o.fs, all, SNAPS_MAX) : -ENOMEM, got = 0;

	for (int i = 0; i < n && i < SNAPS_MAX; i++) {
		int k;

		k = snap_index(s, all[i]);
		if (k < 0)
			continue; /* deleted meanwhile */
		ks[got] =
		    sfuse_kino(&(struct sfuse_where){ .fs = snaps[k].fs, .snap = k }, FUSE_ROOT_ID);
		memmove(all[got], all[i], 64);
		got++;
	}
	if (n < 0) {
		free(all);
		free(ks);
		return n;
	}
	*names = all;
	*kinos = ks;
	return got;
}

void
sfuse_snaps_fini(void)
{
	pthread_mutex_lock(&mu);
	for (int k = 0; k < nsnaps; k++)
		sh_fs_close(snaps[k].fs);
	nsnaps = 0;
	if (tables) {
		size_t it;
		struct sh_hnode *n = sh_htable_first(&by_kino, &it), *next;

		for (; n != NULL; n = next) {
			next = sh_htable_next(&by_kino, &it, n);
			free((char *)n - offsetof(struct kmap, by_kino));
		}
		sh_htable_fini(&by_kino);
		sh_htable_fini(&by_ino);
		tables = false;
	}
	pthread_mutex_unlock(&mu);
}
