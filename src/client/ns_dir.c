// SPDX-License-Identifier: Apache-2.0
/*
 * libshoal's directories (client.h, docs/client.md "Namespace"): opened,
 * read as a fan-out to the buckets that hold their entries, closed.
 */
#include <dirent.h>
#include <string.h>
#include <unistd.h>

#include "client_int.h"

struct sh_dir {
	sh_fs *fs;
	uint64_t dir;
	uint16_t *buckets;
	unsigned nb, at; /* the bucket being read */
	char after[SH_NAME_MAX + 1];
	bool bucket_done;
	struct cres page;
	struct sh_dec dec;
	bool have_page;
	bool plus; /* the page holds attributes */
};

int
sh_opendir_ino(sh_fs *fs, uint64_t dir, sh_dir **out)
{
	struct cres r;
	sh_dir *d;
	uint16_t home;
	int rc;

	if (!client_ino_valid(fs, dir))
		return -ESTALE;
	home = meta_ino_bucket(dir);
	rc = ns_read(fs, MP_DIRBUCKETS, home, dir, "", 0, 0, &r);
	if (rc < 0) {
		cres_fini(&r);
		return rc == -ESTALE ? -ENOENT : rc;
	}
	d = sh_calloc(1, sizeof(*d));
	if (d != NULL)
		d->buckets = sh_calloc(1 + r.rep.dlen / 2, sizeof(*d->buckets));
	if (d == NULL || d->buckets == NULL) {
		sh_free(d);
		cres_fini(&r);
		return -ENOMEM;
	}
	d->fs = fs;
	d->dir = dir;
	d->buckets[d->nb++] = home;
	for (size_t i = 0; i + 2 <= r.rep.dlen; i += 2) {
		uint16_t b = (uint16_t)(r.rep.data[i] | r.rep.data[i + 1] << 8);

		if (b != home && b < fs->nbuckets)
			d->buckets[d->nb++] = b;
	}
	cres_fini(&r);
	*out = d;
	return 0;
}

int
sh_opendir(sh_fs *fs, const char *path, sh_dir **out)
{
	uint64_t ino;
	int rc = client_resolve(fs, path, true, &ino);
	struct stat st;

	if (rc == 0)
		rc = sh_getattr(fs, ino, &st);
	if (rc < 0)
		return rc;
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;
	return sh_opendir_ino(fs, ino, out);
}

/* The next entry, with its attributes (type 0: none came) when attr is given. */
static int
dir_next(sh_dir *d, struct sh_dirent *out, struct meta_inode *attr)
{
	for (;;) {
		struct meta_dirent de;
		struct meta_inode none;
		int rc;

		if (d->have_page) {
			if (attr != NULL)
				attr->type = 0;
			rc = mp_dirent_next(&d->dec, &de, !d->plus ? NULL : attr ? attr : &none);
			if (rc < 0)
				return -EPROTO;
			if (rc == 1) {
				out->ino = de.ino;
				out->type = client_type_dt(de.type);
				memcpy(out->name, de.name, (size_t)de.len + 1);
				memcpy(d->after, de.name, (size_t)de.len + 1);
				return 1;
			}
			d->have_page = false;
			cres_fini(&d->page);
			if (d->bucket_done) {
				d->at++;
				d->after[0] = '\0';
				d->bucket_done = false;
			}
		}
		if (d->at >= d->nb)
			return 0;
		d->plus = attr != NULL;
		rc = ns_read_at(d->fs, MP_READDIR, d->buckets[d->at], d->dir, d->after,
				strlen(d->after), 512, d->plus ? MP_READDIR_ATTRS : 0, &d->page);
		if (rc == -ESTALE || rc == -ENOENT) {
			cres_fini(&d->page);
			return rc == -ESTALE ? -ENOENT : rc;
		}
		if (rc < 0) {
			cres_fini(&d->page);
			return rc;
		}
		d->bucket_done = !(d->page.rep.flags & MP_MORE);
		sh_dec_init(&d->dec, d->page.rep.data, d->page.rep.dlen);
		d->have_page = true;
	}
}

int
sh_readdir(sh_dir *d, struct sh_dirent *out)
{
	return dir_next(d, out, NULL);
}

int
sh_readdir_plus(sh_dir *d, struct sh_dirent *out, struct stat *st)
{
	struct meta_inode a;
	int rc = dir_next(d, out, &a);

	if (rc == 1 && a.type != 0)
		client_to_stat(out->ino, &a, st);
	else if (rc == 1)
		memset(st, 0, sizeof(*st));
	return rc;
}

void
sh_closedir(sh_dir *d)
{
	if (d == NULL)
		return;
	cres_fini(&d->page);
	sh_free(d->buckets);
	sh_free(d);
}
