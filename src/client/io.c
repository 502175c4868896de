// SPDX-License-Identifier: Apache-2.0
/*
 * libshoal's file handles (client.h, docs/client.md "Data"): open (a hold
 * on the file, with its first extents for a reader), write, fsync,
 * truncate and close; targets' usage; cleaning of stripes. The pipelines
 * behind them are io_write.c and io_read.c (io_int.h).
 */
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "../store/store_proto.h"
#include "io_int.h"

/* ---- targets ---- */

/* What a target can still take (STORE_PROTO_RESERVE_SEGS) */
static uint64_t
target_room(const struct store_proto_stat *st)
{
	uint64_t keep =
	    st->live + (st->segs ? st->capacity / st->segs * STORE_PROTO_RESERVE_SEGS : 0);

	return st->capacity > keep ? st->capacity - keep : 0;
}

int
sh_targets_usage(sh_fs *fs, struct sh_target_usage *out, unsigned max)
{
	uint64_t ids[CFG_DRIVES_MAX];
	unsigned n = client_targets(fs->c, ids, CFG_DRIVES_MAX), k = n < max ? n : max;
	struct dcall *calls = sh_calloc(k ? k : 1, sizeof(*calls));
	struct store_proto_stat *st = sh_calloc(k ? k : 1, sizeof(*st));
	uint8_t(*hdr)[STORE_PROTO_HDR + 8] = sh_calloc(k ? k : 1, sizeof(*hdr));

	if (calls == NULL || st == NULL || hdr == NULL) {
		sh_free(calls);
		sh_free(st);
		sh_free(hdr);
		return -ENOMEM;
	}
	for (unsigned i = 0; i < k; i++) {
		struct store_proto_req r = { .target = ids[i] };
		int rc = client_target(fs->c, ids[i], &calls[i].peer, calls[i].addr);

		calls[i].op = NET_OP_STORE_STAT;
		calls[i].niov = 1;
		calls[i].out = (uint8_t *)&st[i];
		calls[i].cap = sizeof(st[i]);
		calls[i].iov[0] =
		    (struct iovec){ hdr[i], store_proto_encode(NET_OP_STORE_STAT, &r, hdr[i]) };
		if (rc < 0) {
			calls[i].peer = 0;
			calls[i].status = rc;
		}
	}
	client_calls(fs->c, calls, k, GET_NS); /* those of nodes down are not asked */
	for (unsigned i = 0; i < k; i++) {
		out[i] = (struct sh_target_usage){ .target = ids[i], .status = calls[i].status };
		if (calls[i].status >= 0 && calls[i].got == sizeof(st[i])) {
			out[i].capacity = st[i].capacity;
			out[i].used = st[i].used;
			out[i].live = st[i].live;
			out[i].fragments = st[i].fragments;
			out[i].room = target_room(&st[i]);
		} else if (calls[i].status >= 0) {
			out[i].status = -EPROTO;
		}
	}
	sh_free(calls);
	sh_free(st);
	sh_free(hdr);
	return (int)n;
}

/* ---- the handle ---- */

/* O_APPEND: how soon an append must follow the last to land with it (sh_pwrite) */
#define APPEND_JOIN_NS (200ull * 1000 * 1000)

long
sh_pwrite(sh_file *f, const void *buf, size_t len, uint64_t off)
{
	const uint8_t *p = buf;
	size_t stripe = (size_t)ndata(f) * frag_of(f), done = 0;
	int rc;

	if ((f->flags & O_ACCMODE) == O_RDONLY)
		return -EBADF;
	if (off > CLIENT_FILE_MAX || len > CLIENT_FILE_MAX - off)
		return -EFBIG;
	pthread_mutex_lock(&f->mu);
	rc = f->err ? f->err : io_stale(f); /* a stripe written behind failed: reported until
					     * fsync or close */
	if (rc == 0 && !(f->flags & O_APPEND))
		rc = client_quota_admit(f->fs, f->ino, off, len);
	if (rc == 0 && (f->flags & O_APPEND)) {
		uint64_t now = env_clock(f->fs->c->env);
		struct stat st;

		/*
		 * An append soon after this handle's last one, still buffered,
		 * with room for it in the buffer, continues it: both land
		 * together, at the end as it is then (flush_append), so no
		 * other client's append comes between them. This keeps a
		 * write(2) whole when the kernel sends it in two WRITEs (split
		 * at a page it does not have). Later (a log written line by
		 * line, read elsewhere), or without room, what is buffered
		 * lands first: an append of up to a stripe's bytes is never cut
		 * in two, and the last but one is visible to other clients.
		 */
		if (f->fill > 0 && len <= stripe - f->fill && now - f->append_t0 < APPEND_JOIN_NS &&
		    f->append_tag == 0) { /* (a placement tried, its outcome unknown: not joined) */
			off = f->buf_off + f->fill;
		} else {
			io_wait_behind(f); /* the size counts every stripe */
			rc = f->err ? f->err : f->fill ? io_flush(f) : 0;
			if (rc == 0)
				rc = sh_getattr(f->fs, f->ino, &st);
			off = rc == 0 ? (uint64_t)st.st_size : 0;
			f->append_t0 = now;
		}
		if (rc == 0)
			rc = client_quota_admit(f->fs, f->ino, off, len);
	}
	while (rc == 0 && done < len) {
		size_t k;

		/* not where the buffer ends: write what it holds, start it here */
		if (f->fill > 0 && off + done != f->buf_off + f->fill)
			rc = io_flush(f);
		if (rc < 0)
			break;
		if (f->fill == 0)
			/* (an append's next stripe: where its last one landed) */
			f->buf_off = (f->flags & O_APPEND) && done > 0 ? f->append_end : off + done;
		k = stripe - f->fill < len - done ? stripe - f->fill : len - done;
		rc = io_buf_own(f);
		if (rc < 0)
			break;
		memcpy(f->bufh->data + f->fill, p + done, k);
		f->fill += k;
		done += k;
		if (f->fill == stripe)
			rc = io_flush_full(f);
	}
	pthread_mutex_unlock(&f->mu);
	return rc < 0 ? rc : (long)len;
}

/* What f buffered, written and mapped: 0 or an error a write met (reported once if clear). */
static int
flush_all(sh_file *f, bool clear)
{
	int rc;

	pthread_mutex_lock(&f->mu);
	io_wait_behind(f);
	/* (a stale handle with nothing to write closes fine) */
	rc = f->err ? f->err : f->fill > 0 ? io_stale(f) : 0;
	if (rc == 0)
		rc = io_flush(f);
	if (clear)
		f->err = 0;
	pthread_mutex_unlock(&f->mu);
	return rc;
}

int
sh_fsync(sh_file *f)
{
	/* a handle that writes, opened before a restore: what it wrote is not there */
	int rc = (f->flags & O_ACCMODE) != O_RDONLY ? io_stale(f) : 0;

	return rc < 0 ? rc : flush_all(f, true);
}

int
sh_flush(sh_file *f)
{
	return flush_all(f, false);
}

int
sh_ftruncate(sh_file *f, uint64_t size)
{
	struct stat st = { .st_size = (off_t)size };
	int rc = sh_fsync(f); /* (-ESTALE opened before a restore) */

	if ((f->flags & O_ACCMODE) == O_RDONLY)
		return -EBADF;
	return rc < 0 ? rc : sh_setattr(f->fs, f->ino, &st, SH_SET_SIZE, NULL);
}

int
sh_fstat(sh_file *f, struct stat *st)
{
	int rc = sh_fsync(f);

	return rc < 0 ? rc : sh_getattr(f->fs, f->ino, st);
}

/* A handle on a regular file whose attributes are st (after create/truncate). */
static int
open_stat(sh_fs *fs, const struct stat *st, int flags, sh_file **out)
{
	sh_file *f;

	if (S_ISDIR(st->st_mode))
		return -EISDIR;
	if (!S_ISREG(st->st_mode))
		return -EINVAL;
	if (fs->at != 0 && (flags & O_ACCMODE) != O_RDONLY)
		return -EROFS; /* a snapshot */
	/*
	 * O_TRUNC of a file that was there: its size 0, its mtime and ctime
	 * now even when it was empty already (POSIX open(2), as ext4). A file
	 * this open made comes without O_TRUNC (sh_open, sh_open_stat).
	 */
	if ((flags & O_TRUNC) && (flags & O_ACCMODE) != O_RDONLY) {
		struct stat z = { 0 };
		unsigned valid = SH_SET_SIZE;
		int rc;

		if (st->st_size == 0) {
			client_now_ts(fs, &z.st_mtim);
			valid |= SH_SET_MTIME;
		}
		rc = sh_setattr(fs, st->st_ino, &z, valid, NULL);
		if (rc < 0)
			return rc;
	}
	f = sh_calloc(1, sizeof(*f));
	if (f == NULL)
		return -ENOMEM;
	f->fs = fs;
	f->epoch = fs->epoch;
	f->bufh = io_buf_take(f);
	if (f->bufh == NULL) {
		sh_free(f);
		return -ENOMEM;
	}
	f->ino = st->st_ino;
	f->flags = flags;
	f->empty = st->st_size == 0 || ((flags & O_TRUNC) && (flags & O_ACCMODE) != O_RDONLY);
	pthread_mutex_init(&f->mu, NULL);
	pthread_cond_init(&f->idle, NULL);
	*out = f;
	return 0;
}

/*
 * A new handle's map of the file from the extents that came with its hold
 * (wgen: the client's writes counter before it asked), as map_fetch keeps them.
 */
static void
map_seed(sh_file *f, const struct stat *st, const uint8_t *ext, size_t elen, bool more,
	 uint64_t wgen)
{
	struct emap *m = sh_malloc(sizeof(*m));

	if (m == NULL)
		return; /* the first read asks */
	m->n = 0;
	if (elen > 0 && meta_extent_list_decode(ext, elen, m->ex, &m->n) < 0) {
		sh_free(m);
		return;
	}
	io_map_bounds(m, st, 0, more, wgen);
	f->map[0] = m;
}

static int open_held(sh_fs *fs, const struct stat *st, int flags, sh_file **out);

/*
 * ino held here (client_hold_open) and opened: an open that reads gets the
 * file's first extents along with the hold. -ESTALE: looked up again.
 */
static int
open_ino_held(sh_fs *fs, uint64_t ino, int flags, struct stat *st, sh_file **out)
{
	bool reads = (flags & O_ACCMODE) != O_WRONLY, more = false;
	uint64_t wgen = atomic_load(&fs->wgen);
	uint8_t *ext = NULL;
	size_t elen = 0;
	int rc = reads ? client_hold_open_read(fs, ino, true, st, &ext, &elen, &more)
		       : client_hold_open(fs, ino, true, st);

	if (rc == 0)
		rc = open_held(fs, st, flags, out); /* (a directory: -EISDIR, the hold undone) */
	if (rc == 0 && ext != NULL)
		map_seed(*out, st, ext, elen, more, wgen);
	sh_free(ext);
	return rc;
}

/* An open of a file now held here (client_hold_*): a handle, or the hold undone. */
static int
open_held(sh_fs *fs, const struct stat *st, int flags, sh_file **out)
{
	int rc = open_stat(fs, st, flags, out);

	if (rc < 0)
		client_hold_close(fs, st->st_ino);
	return rc;
}

int
sh_open(sh_fs *fs, const char *path, int flags, mode_t mode, sh_file **out)
{
	struct stat st;
	int rc = -ESTALE;

	if (fs->at != 0 && ((flags & O_ACCMODE) != O_RDONLY || (flags & (O_CREAT | O_TRUNC))))
		return -EROFS; /* a snapshot */
	/* a name renamed over or removed between its lookup and the hold: looked up again */
	int fl = flags;

	for (int tries = 0; rc == -ESTALE && tries < 5; tries++) {
		fl = flags;
		rc = sh_stat(fs, path, &st);
		if (rc == -ENOENT && (flags & O_CREAT)) {
			rc = sh_mknod(fs, path, S_IFREG | (mode & 07777), 0);
			if (rc == 0)
				fl &= ~O_TRUNC; /* new and empty: nothing to cut */
			if (rc == -EEXIST && !(flags & O_EXCL))
				rc = 0; /* someone else made it meanwhile */
			if (rc == 0)
				rc = sh_stat(fs, path, &st);
		} else if (rc == 0 && (flags & O_CREAT) && (flags & O_EXCL)) {
			rc = -EEXIST;
		}
		if (rc < 0 || !S_ISREG(st.st_mode))
			break;
		rc = open_ino_held(fs, st.st_ino, fl, &st, out);
		if (rc == 0)
			return 0;
	}
	if (rc < 0)
		return rc;
	return open_stat(fs, &st, fl, out);
}

int
sh_open_ino(sh_fs *fs, uint64_t ino, int flags, sh_file **out)
{
	struct stat st;

	return sh_open_ino_st(fs, ino, flags, &st, out);
}

int
sh_open_ino_st(sh_fs *fs, uint64_t ino, int flags, struct stat *st, sh_file **out)
{
	return open_ino_held(fs, ino, flags & ~(O_CREAT | O_EXCL), st, out);
}

int
sh_open_stat(sh_fs *fs, const struct stat *st, int flags, sh_file **out)
{
	int rc;

	if (fs == NULL || st == NULL || out == NULL)
		return -EINVAL;
	flags &= ~(O_CREAT | O_EXCL);
	if (!S_ISREG(st->st_mode))
		return open_stat(fs, st, flags, out);
	rc = client_hold_created(fs, st->st_ino);
	return rc < 0 ? rc : open_held(fs, st, flags, out);
}

sh_fs *
client_file_fs(const sh_file *f)
{
	return f->fs;
}

int
sh_close(sh_file *f)
{
	int rc;

	if (f == NULL)
		return -EINVAL;
	rc = flush_all(f, true); /* (a stale handle with nothing to write closes fine) */
	pthread_mutex_lock(&f->mu);
	while (io_ra_coming(f, 0, UINT64_MAX))
		pthread_cond_wait(&f->idle, &f->mu);
	pthread_mutex_unlock(&f->mu);
	client_hold_close(f->fs, f->ino); /* the last close here: a file without names goes */
	for (unsigned i = 0; i < RA_WIN; i++)
		sh_free(f->ra[i].buf);
	pthread_cond_destroy(&f->idle);
	pthread_mutex_destroy(&f->mu);
	while (f->nspare > 0)
		sh_buf_put(f->spare[--f->nspare]);
	io_map_drop_all(f);
	sh_buf_put(f->bufh);
	sh_free(f);
	return rc;
}

/* ---- cleaning (docs/reduction.md "Cleaning") ---- */

/*
 * The live ranges of stripe of file ino: read and written anew (in new
 * stripes, compressed as any write), each mapped only if it is still all
 * the stripe's. Once none is left the stripe goes with its last reference.
 */
static int
clean_stripe(sh_fs *fs, uint64_t stripe, uint64_t ino, struct sh_clean_stats *out)
{
	struct {
		uint64_t off, end;
	} rng[META_EXTENTS_MAX];
	unsigned nr = 0;
	uint64_t at = 0;
	struct stat st;
	sh_file *f;
	uint8_t *buf = NULL;
	int rc = sh_open_ino(fs, ino, O_RDONLY, &f);

	if (rc == -ENOENT || rc == -ESTALE)
		return 0; /* the file went meanwhile: so does the stripe */
	if (rc < 0)
		return rc;
	rc = sh_fstat(f, &st);
	/* where the file still maps the stripe: its extents, EXTENTS_BATCH at a time */
	while (rc == 0 && at < (uint64_t)st.st_size && nr < META_EXTENTS_MAX) {
		struct mp_req q = { .kind = MP_EXTENTS,
				    .fs = fs->id,
				    .bucket = meta_ino_bucket(ino),
				    .ino = ino,
				    .max = EXTENTS_BATCH,
				    .off = at,
				    .len = (uint64_t)st.st_size - at,
				    .at = client_at(fs) };
		struct meta_extent ex[EXTENTS_BATCH];
		struct cres res;
		unsigned n = 0;

		rc = client_meta(fs->c, &q, &res);
		if (rc == 0 && (res.rep.flags & MP_INLINE))
			n = 0;
		else if (rc == 0 && res.rep.dlen > 0 &&
			 meta_extent_list_decode(res.rep.data, res.rep.dlen, ex, &n) < 0)
			rc = -EPROTO;
		for (unsigned i = 0; rc == 0 && i < n && nr < META_EXTENTS_MAX; i++) {
			if (ex[i].stripe != stripe || ex[i].dedup)
				continue;
			if (nr > 0 && rng[nr - 1].end == ex[i].off)
				rng[nr - 1].end += ex[i].len; /* adjacent: one range */
			else
				rng[nr++] = (typeof(rng[0])){ ex[i].off, ex[i].off + ex[i].len };
		}
		at = rc == 0 && n > 0 && (res.rep.flags & MP_MORE) ? ex[n - 1].off + ex[n - 1].len
								   : UINT64_MAX;
		cres_fini(&res);
	}
	if (rc == 0 && nr > 0 && (buf = sh_malloc((size_t)ndata(f) * frag_of(f))) == NULL)
		rc = -ENOMEM;
	for (unsigned i = 0; rc == 0 && i < nr; i++) {
		for (uint64_t off = rng[i].off; rc == 0 && off < rng[i].end;) {
			size_t len = (size_t)(rng[i].end - off) < (size_t)ndata(f) * frag_of(f)
					 ? (size_t)(rng[i].end - off)
					 : (size_t)ndata(f) * frag_of(f);

			rc = io_read_range(f, &st, buf, off, off + len);
			if (rc == 0)
				rc = io_put_stripe_from(f, off, buf, len, 0, stripe);
			if (rc == -ESTALE) {
				out->skipped++; /* written meanwhile: the new bytes are not ours to
						   move */
				rc = 0;
			} else if (rc == 0) {
				out->moved_bytes += len;
			}
			off += len;
		}
	}
	if (rc == 0 && nr > 0)
		out->stripes++;
	atomic_fetch_add(&fs->wgen, 1); /* the file's extents changed: maps go stale */
	sh_free(buf);
	sh_close(f);
	return rc;
}

int
sh_fs_clean(sh_fs *fs, uint32_t from, uint32_t to, struct sh_clean_stats *out,
	    void (*progress)(void *arg, uint32_t done, uint32_t total), void *arg)
{
	int rc = 0;

	memset(out, 0, sizeof(*out));
	if (to == 0 || to > fs->nbuckets)
		to = fs->nbuckets;
	for (uint32_t b = from; rc == 0 && b < to; b++) {
		struct mp_req q = {
			.kind = MP_DIRTY, .fs = fs->id, .bucket = (uint16_t)b, .max = 64
		};
		struct cres res;
		struct sh_dec d;

		rc = client_meta(fs->c, &q, &res);
		sh_dec_init(&d, res.rep.data, res.rep.dlen);
		for (size_t i = 0; rc == 0 && i < res.rep.dlen / 32; i++) {
			uint64_t stripe = sh_dec_u64(&d), ino = sh_dec_u64(&d);

			(void)sh_dec_u64(&d); /* live */
			(void)sh_dec_u64(&d); /* total */
			rc = clean_stripe(fs, stripe, ino, out);
		}
		cres_fini(&res);
		out->buckets++;
		if (progress)
			progress(arg, b - from + 1, to - from);
	}
	return rc;
}
