// SPDX-License-Identifier: Apache-2.0
/*
 * Namespace operations inside buckets (four buckets of one store): every
 * operation and its errors, parent deltas applied at once in the parent's
 * bucket or queued, shipped and applied exactly once in another, hard
 * links across buckets, xattrs, and reads at a kept snapshot.
 */
#include <stdio.h>
#include <unistd.h>

#include "../../../src/meta/meta_cmd.h"
#include "../../../src/meta/meta_ops.h"
#include "../../lib/test.h"

#define NB 4

struct fx {
	struct meta_db *db;
	struct meta_txn *t;
	struct meta_bucket b[NB];
	uint64_t keepv[4];
	struct meta_keep keep;
};

/*
 * A regular file's last name went: it is an orphan (nlink 0, kept for its
 * holders) until meta_orphan_drop, then gone (-ESTALE). What getattr then says.
 */
static int
orphan_dropped(struct meta_bucket *b, uint64_t ino)
{
	struct meta_inode in;
	int rc = meta_getattr(b, ino, &in);

	if (rc == 0 && in.type == META_REG) {
		SH_ASSERT_EQ(in.nlink, 0u);
		SH_ASSERT_OK(meta_orphan_drop(b, ino));
		SH_ASSERT_OK(meta_orphan_drop(b, ino)); /* a retry: done already */
		rc = meta_getattr(b, ino, &in);
	}
	return rc;
}

static void
fx_open(struct fx *f)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/ops.mdb", sh_test_dir());
	unlink(path); /* a fresh store each time */
	snprintf(path + strlen(path), sizeof(path) - strlen(path), "-lock");
	unlink(path);
	path[strlen(path) - 5] = '\0';
	SH_ASSERT_OK(meta_db_open(path, 64ull << 20, 0, &f->db));
	SH_ASSERT_OK(meta_txn_begin(f->db, true, &f->t));
	f->keep = (struct meta_keep){ f->keepv, 0 };
	for (int i = 0; i < NB; i++)
		f->b[i] = (struct meta_bucket){
			.t = f->t, .bucket = (uint16_t)i, .nbuckets = NB, .ver = 1, .keep = &f->keep
		};
}

/* Every other bucket gets a lease on directory dir (as it would on first use). */
static void
lease_all(struct fx *f, uint64_t dir)
{
	int home = meta_ino_bucket(dir);

	for (int i = 0; i < NB; i++) {
		struct meta_lease l;

		if (i == home)
			continue;
		SH_ASSERT_OK(meta_lease_grant(&f->b[home], dir, (uint16_t)i, &l));
		SH_ASSERT_OK(meta_lease_hold(&f->b[i], &l));
	}
}

static void
mkroot(struct fx *f)
{
	SH_ASSERT_OK(meta_mkroot(&f->b[0], 0755, 500));
	lease_all(f, META_ROOT_INO);
}

static void
fx_close(struct fx *f)
{
	SH_ASSERT_OK(meta_txn_commit(f->t));
	meta_db_close(f->db);
}

/* A name whose entry under parent lands in bucket b. */
static const char *
name_in(uint64_t parent, int b, const char *stem)
{
	static char buf[64];

	for (int i = 0;; i++) {
		snprintf(buf, sizeof(buf), "%s%d", stem, i);
		if (meta_dentry_bucket(parent, buf, strlen(buf), NB) == b)
			return buf;
	}
}

static struct meta_new
newf(uint8_t type)
{
	return (struct meta_new){ .type = type, .mode = 0644, .uid = 10, .gid = 20, .now = 1000 };
}

static void
attr(struct fx *f, uint64_t ino, struct meta_inode *in)
{
	SH_ASSERT_OK(meta_getattr(&f->b[meta_ino_bucket(ino)], ino, in));
}

struct ship {
	struct fx *f;
	int n;
};

static int
ship_one(void *arg, const struct meta_delta *d)
{
	struct ship *s = arg;

	SH_ASSERT_OK(meta_apply_delta(&s->f->b[d->to], d));
	SH_ASSERT_OK(meta_apply_delta(&s->f->b[d->to], d)); /* a resend changes nothing */
	s->n++;
	return 0;
}

/* Ship every bucket's outbox to where it goes; returns how many deltas. */
static int
ship_all(struct fx *f)
{
	struct ship s = { f, 0 };

	for (int i = 0; i < NB; i++) {
		SH_ASSERT_OK(meta_outbox(&f->b[i], ship_one, &s));
		SH_ASSERT_OK(meta_outbox_ack(&f->b[i], UINT64_MAX));
	}
	return s.n;
}

TEST(meta_ops_create_lookup_and_parent_counts)
{
	struct fx f;
	struct meta_inode in, root;
	struct meta_dentry d;
	struct meta_delta delta;
	struct meta_new n = newf(META_REG);
	const char *nm;
	uint64_t file0, dir0;

	fx_open(&f);
	mkroot(&f);
	SH_ASSERT_EQ(meta_mkroot(&f.b[0], 0755, 500), -EEXIST);

	/* an entry in the root's own bucket: the root is updated in the same transaction */
	nm = name_in(META_ROOT_INO, 0, "a");
	SH_ASSERT_OK(meta_create(&f.b[0], META_ROOT_INO, nm, strlen(nm), &n, &in, &d, &delta));
	file0 = d.ino;
	SH_ASSERT_EQ(meta_ino_bucket(file0), 0);
	SH_ASSERT_EQ(delta.ino, 0); /* nothing to ship */
	SH_ASSERT_EQ(in.nlink, 1);
	attr(&f, META_ROOT_INO, &root);
	SH_ASSERT_EQ(root.size, 1);
	SH_ASSERT_EQ(root.nlink, 2);
	SH_ASSERT_EQ(root.mtime, 1000);
	SH_ASSERT_EQ(meta_create(&f.b[0], META_ROOT_INO, nm, strlen(nm), &n, &in, &d, &delta),
		     -EEXIST);
	SH_ASSERT_OK(meta_lookup(&f.b[0], META_ROOT_INO, nm, strlen(nm), &d));
	SH_ASSERT_EQ(d.ino, file0);
	SH_ASSERT_EQ(d.type, META_REG);

	/* a directory there: the root's nlink grows */
	n = newf(META_DIR);
	n.now = 1100;
	nm = name_in(META_ROOT_INO, 0, "d");
	SH_ASSERT_OK(meta_create(&f.b[0], META_ROOT_INO, nm, strlen(nm), &n, &in, &d, &delta));
	dir0 = d.ino;
	SH_ASSERT_EQ(in.nlink, 2);
	attr(&f, META_ROOT_INO, &root);
	SH_ASSERT_EQ(root.nlink, 3);
	SH_ASSERT_EQ(root.size, 2);

	/* an entry in bucket 1: the root's update is queued, shipped, applied once */
	n = newf(META_REG);
	n.now = 1200;
	nm = name_in(META_ROOT_INO, 1, "b");
	SH_ASSERT_OK(meta_create(&f.b[1], META_ROOT_INO, nm, strlen(nm), &n, &in, &d, &delta));
	SH_ASSERT_EQ(meta_ino_bucket(d.ino), 1);
	SH_ASSERT_EQ(delta.to, 0);
	SH_ASSERT_EQ(delta.seq, 1);
	attr(&f, META_ROOT_INO, &root);
	SH_ASSERT_EQ(root.size, 2); /* not yet */
	SH_ASSERT_EQ(ship_all(&f), 1);
	attr(&f, META_ROOT_INO, &root);
	SH_ASSERT_EQ(root.size, 3);
	SH_ASSERT_EQ(root.mtime, 1200);
	SH_ASSERT_EQ(ship_all(&f), 0); /* acked: gone */

	/* errors */
	SH_ASSERT_EQ(meta_create(&f.b[0], META_ROOT_INO, nm, strlen(nm), &n, &in, &d, &delta),
		     -EINVAL); /* not this bucket's entry */
	SH_ASSERT_EQ(meta_lookup(&f.b[1], META_ROOT_INO, "x/y", 3, &d), -EINVAL);
	{
		char longn[300];

		memset(longn, 'z', sizeof(longn));
		SH_ASSERT_EQ(meta_lookup(&f.b[1], META_ROOT_INO, longn, 256, &d), -ENAMETOOLONG);
	}
	nm = name_in(META_ROOT_INO, 2, "missing");
	SH_ASSERT_EQ(meta_lookup(&f.b[2], META_ROOT_INO, nm, strlen(nm), &d), -ENOENT);
	SH_ASSERT_EQ(meta_getattr(&f.b[2], meta_ino_make(2, 12345), &in), -ESTALE);
	/* creating under a file of this bucket */
	nm = name_in(file0, 0, "under");
	SH_ASSERT_EQ(meta_create(&f.b[0], file0, nm, strlen(nm), &n, &in, &d, &delta), -ENOTDIR);
	(void)dir0;
	fx_close(&f);
}

/* A create retried after its answer was lost finds its own inode by the request's tag. */
TEST(meta_ops_create_retried_by_tag)
{
	struct fx f;
	struct meta_inode in, in2, root;
	struct meta_dentry d, d2;
	struct meta_delta delta;
	struct meta_new n = newf(META_REG);
	const char *nm;

	fx_open(&f);
	mkroot(&f);
	nm = name_in(META_ROOT_INO, 0, "t");
	n.tag = 0xabcdef;
	SH_ASSERT_OK(meta_create(&f.b[0], META_ROOT_INO, nm, strlen(nm), &n, &in, &d, &delta));
	SH_ASSERT_EQ(in.generation, 0xabcdefull);
	/* the same request again: the same inode, the parent counted once */
	SH_ASSERT_OK(meta_create(&f.b[0], META_ROOT_INO, nm, strlen(nm), &n, &in2, &d2, &delta));
	SH_ASSERT_EQ(d2.ino, d.ino);
	SH_ASSERT_EQ(delta.ino, 0);
	SH_ASSERT_EQ(in2.ctime, in.ctime);
	attr(&f, META_ROOT_INO, &root);
	SH_ASSERT_EQ(root.size, 1);
	/* another request (another tag, none, or another type) for the name: EEXIST */
	n.tag = 0xabcdee;
	SH_ASSERT_EQ(meta_create(&f.b[0], META_ROOT_INO, nm, strlen(nm), &n, &in2, &d2, &delta),
		     -EEXIST);
	n.tag = 0;
	SH_ASSERT_EQ(meta_create(&f.b[0], META_ROOT_INO, nm, strlen(nm), &n, &in2, &d2, &delta),
		     -EEXIST);
	n = newf(META_DIR);
	n.tag = 0xabcdef;
	SH_ASSERT_EQ(meta_create(&f.b[0], META_ROOT_INO, nm, strlen(nm), &n, &in2, &d2, &delta),
		     -EEXIST);
	fx_close(&f);
}

TEST(meta_ops_remove_rmdir_symlink)
{
	struct fx f;
	struct meta_inode in, root;
	struct meta_dentry d;
	struct meta_delta delta, two[2];
	struct meta_new n = newf(META_DIR);
	const char *nm;
	char dname[64], target[64];
	uint64_t dir, removed;
	size_t len;

	fx_open(&f);
	mkroot(&f);
	snprintf(dname, sizeof(dname), "%s", name_in(META_ROOT_INO, 0, "dir"));
	SH_ASSERT_OK(
	    meta_create(&f.b[0], META_ROOT_INO, dname, strlen(dname), &n, &in, &d, &delta));
	dir = d.ino;
	/* a file in the directory, in the directory's own bucket */
	n = newf(META_REG);
	nm = name_in(dir, 0, "f");
	SH_ASSERT_OK(meta_create(&f.b[0], dir, nm, strlen(nm), &n, &in, &d, &delta));
	SH_ASSERT_EQ(
	    meta_remove(&f.b[0], META_ROOT_INO, dname, strlen(dname), true, 2000, &removed, two),
	    -ENOTEMPTY);
	SH_ASSERT_EQ(
	    meta_remove(&f.b[0], META_ROOT_INO, dname, strlen(dname), false, 2000, &removed, two),
	    -EISDIR);
	SH_ASSERT_EQ(meta_remove(&f.b[0], dir, nm, strlen(nm), true, 2000, &removed, two),
		     -ENOTDIR);
	SH_ASSERT_OK(meta_remove(&f.b[0], dir, nm, strlen(nm), false, 2000, &removed, two));
	SH_ASSERT_EQ(orphan_dropped(&f.b[0], removed), -ESTALE); /* its last link */
	SH_ASSERT_OK(
	    meta_remove(&f.b[0], META_ROOT_INO, dname, strlen(dname), true, 2100, &removed, two));
	SH_ASSERT_EQ(removed, dir);
	attr(&f, META_ROOT_INO, &root);
	SH_ASSERT_EQ(root.nlink, 2);
	SH_ASSERT_EQ(root.size, 0);
	SH_ASSERT_EQ(root.mtime, 2100);
	SH_ASSERT_EQ(
	    meta_remove(&f.b[0], META_ROOT_INO, dname, strlen(dname), true, 2100, &removed, two),
	    -ENOENT);

	/* symlinks */
	n = newf(META_LNK);
	snprintf(target, sizeof(target), "../some/where");
	n.target = target;
	n.tlen = strlen(target);
	nm = name_in(META_ROOT_INO, 3, "ln");
	SH_ASSERT_OK(meta_create(&f.b[3], META_ROOT_INO, nm, strlen(nm), &n, &in, &d, &delta));
	SH_ASSERT_EQ(in.size, strlen(target));
	{
		char buf[64];

		SH_ASSERT_OK(meta_readlink(&f.b[3], d.ino, buf, sizeof(buf), &len));
		SH_ASSERT_EQ(len, strlen(target));
		SH_ASSERT_MEMEQ(buf, target, len);
		SH_ASSERT_EQ(meta_readlink(&f.b[3], d.ino, buf, 3, &len), -ERANGE);
		SH_ASSERT_EQ(meta_readlink(&f.b[0], META_ROOT_INO, buf, sizeof(buf), &len),
			     -EINVAL);
	}
	n.tlen = 0;
	SH_ASSERT_EQ(meta_create(&f.b[3], META_ROOT_INO, name_in(META_ROOT_INO, 3, "l0"), 3, &n,
				 &in, &d, &delta),
		     -ENOENT);
	fx_close(&f);
}

TEST(meta_ops_hard_links_across_buckets)
{
	struct fx f;
	struct meta_inode in;
	struct meta_dentry d;
	struct meta_delta delta, two[2];
	struct meta_new n = newf(META_REG);
	char a[64], bname[64];
	uint64_t file, removed;

	fx_open(&f);
	mkroot(&f);
	snprintf(a, sizeof(a), "%s", name_in(META_ROOT_INO, 0, "orig"));
	SH_ASSERT_OK(meta_create(&f.b[0], META_ROOT_INO, a, strlen(a), &n, &in, &d, &delta));
	file = d.ino;
	/* a second name in bucket 2: the link count changes in bucket 0, by a delta */
	snprintf(bname, sizeof(bname), "%s", name_in(META_ROOT_INO, 2, "link"));
	SH_ASSERT_OK(
	    meta_link(&f.b[2], META_ROOT_INO, bname, strlen(bname), file, META_REG, 3000, two));
	SH_ASSERT_EQ(
	    meta_link(&f.b[2], META_ROOT_INO, bname, strlen(bname), file, META_REG, 3000, two),
	    -EEXIST);
	SH_ASSERT_EQ(meta_link(&f.b[2], META_ROOT_INO, name_in(META_ROOT_INO, 2, "dl"), 3, file,
			       META_DIR, 3000, two),
		     -EPERM);
	SH_ASSERT_EQ(ship_all(&f), 2); /* the root's entry count, the file's nlink */
	attr(&f, file, &in);
	SH_ASSERT_EQ(in.nlink, 2);
	SH_ASSERT_EQ(in.ctime, 3000);
	/* remove the first name: the inode stays with one link */
	SH_ASSERT_OK(meta_remove(&f.b[0], META_ROOT_INO, a, strlen(a), false, 3100, &removed, two));
	attr(&f, file, &in);
	SH_ASSERT_EQ(in.nlink, 1);
	/* and the last, from the other bucket: the inode goes once the delta lands */
	SH_ASSERT_OK(
	    meta_remove(&f.b[2], META_ROOT_INO, bname, strlen(bname), false, 3200, &removed, two));
	SH_ASSERT_EQ(removed, file);
	SH_ASSERT_EQ(ship_all(&f), 2);
	SH_ASSERT_EQ(orphan_dropped(&f.b[0], file), -ESTALE);
	fx_close(&f);
}

TEST(meta_ops_setattr_xattrs_and_snapshots)
{
	struct fx f;
	struct meta_inode in;
	struct meta_dentry d;
	struct meta_delta delta, two[2];
	struct meta_new n = newf(META_REG);
	struct meta_setattr sa = { .valid = META_SET_SIZE | META_SET_MODE,
				   .size = 4096,
				   .mode = 0600 };
	char buf[128], nm[64];
	size_t len;
	uint64_t file, removed;

	fx_open(&f);
	mkroot(&f);
	snprintf(nm, sizeof(nm), "%s", name_in(META_ROOT_INO, 1, "x"));
	SH_ASSERT_OK(meta_create(&f.b[1], META_ROOT_INO, nm, strlen(nm), &n, &in, &d, &delta));
	file = d.ino;
	SH_ASSERT_OK(meta_setattr(&f.b[1], file, &sa, 4000, &in));
	SH_ASSERT_EQ(in.size, 4096);
	SH_ASSERT_EQ(in.mode, 0600);
	SH_ASSERT_EQ(in.mtime, 4000);
	SH_ASSERT_EQ(in.ctime, 4000);
	SH_ASSERT_EQ(meta_setattr(&f.b[0], META_ROOT_INO, &sa, 4000, &in), -EISDIR);
	sa = (struct meta_setattr){ .valid = META_SET_MODE, .mode = 010000 };
	SH_ASSERT_EQ(meta_setattr(&f.b[1], file, &sa, 4000, &in), -EINVAL);

	SH_ASSERT_OK(meta_setxattr(&f.b[1], file, "user.a", "1", 1, META_XATTR_CREATE, 4100));
	SH_ASSERT_EQ(meta_setxattr(&f.b[1], file, "user.a", "2", 1, META_XATTR_CREATE, 4100),
		     -EEXIST);
	SH_ASSERT_EQ(meta_setxattr(&f.b[1], file, "user.b", "2", 1, META_XATTR_REPLACE, 4100),
		     -ENODATA);
	SH_ASSERT_OK(meta_setxattr(&f.b[1], file, "user.a", "22", 2, META_XATTR_REPLACE, 4100));
	SH_ASSERT_OK(meta_setxattr(&f.b[1], file, "user.b", "", 0, 0, 4100));
	SH_ASSERT_OK(meta_getxattr(&f.b[1], file, "user.a", buf, sizeof(buf), &len));
	SH_ASSERT_EQ(len, 2);
	SH_ASSERT_MEMEQ(buf, "22", 2);
	SH_ASSERT_OK(meta_getxattr(&f.b[1], file, "user.a", buf, 0, &len)); /* size only */
	SH_ASSERT_EQ(len, 2);
	SH_ASSERT_EQ(meta_getxattr(&f.b[1], file, "user.a", buf, 1, &len), -ERANGE);
	SH_ASSERT_EQ(meta_getxattr(&f.b[1], file, "user.c", buf, sizeof(buf), &len), -ENODATA);
	SH_ASSERT_OK(meta_listxattr(&f.b[1], file, buf, sizeof(buf), &len));
	SH_ASSERT_EQ(len, 14);
	SH_ASSERT_MEMEQ(buf, "user.a\0user.b\0", 14);
	SH_ASSERT_OK(meta_listxattr(&f.b[1], file, NULL, 0, &len));
	SH_ASSERT_EQ(len, 14);
	SH_ASSERT_EQ(meta_listxattr(&f.b[1], file, buf, 5, &len), -ERANGE);
	SH_ASSERT_OK(meta_removexattr(&f.b[1], file, "user.b", 4200));
	SH_ASSERT_EQ(meta_removexattr(&f.b[1], file, "user.b", 4200), -ENODATA);
	{
		char longx[300];

		memset(longx, 'q', sizeof(longx));
		longx[299] = '\0';
		SH_ASSERT_EQ(meta_setxattr(&f.b[1], file, longx, "", 0, 0, 4100), -ERANGE);
	}

	/* a snapshot at version 1 keeps the file as it was when the version moves on */
	f.keepv[0] = 1;
	f.keep.n = 1;
	for (int i = 0; i < NB; i++)
		f.b[i].ver = 2;
	SH_ASSERT_OK(
	    meta_remove(&f.b[1], META_ROOT_INO, nm, strlen(nm), false, 5000, &removed, two));
	SH_ASSERT_EQ(orphan_dropped(&f.b[1], file), -ESTALE);
	f.b[1].ver = 1; /* read as of the snapshot */
	SH_ASSERT_OK(meta_getattr(&f.b[1], file, &in));
	SH_ASSERT_EQ(in.size, 4096);
	SH_ASSERT_OK(meta_getxattr(&f.b[1], file, "user.a", buf, sizeof(buf), &len));
	SH_ASSERT_OK(meta_lookup(&f.b[1], META_ROOT_INO, nm, strlen(nm), &d));
	fx_close(&f);
}

TEST(meta_ops_readdir_pages)
{
	struct fx f;
	struct meta_inode in;
	struct meta_dentry d;
	struct meta_delta delta;
	struct meta_new n = newf(META_REG);
	struct meta_dirent ents[7];
	char last[META_NAME_MAX + 1] = "";
	size_t lastlen = 0;
	int made = 0, seen = 0;
	bool more = true;

	fx_open(&f);
	mkroot(&f);
	for (int i = 0; i < 200; i++) {
		char nm[32];

		snprintf(nm, sizeof(nm), "file-%03d", i);
		if (meta_dentry_bucket(META_ROOT_INO, nm, strlen(nm), NB) != 2)
			continue;
		SH_ASSERT_OK(
		    meta_create(&f.b[2], META_ROOT_INO, nm, strlen(nm), &n, &in, &d, &delta));
		made++;
	}
	while (more) {
		unsigned got;

		SH_ASSERT_OK(meta_readdir(&f.b[2], META_ROOT_INO, lastlen ? last : NULL, lastlen,
					  ents, 7, &got, &more));
		for (unsigned i = 0; i < got; i++) {
			/* strictly increasing: none twice */
			SH_ASSERT(lastlen == 0 || strcmp(ents[i].name, last) > 0);
			SH_ASSERT_EQ(ents[i].type, META_REG);
			memcpy(last, ents[i].name, ents[i].len + 1);
			lastlen = ents[i].len;
			seen++;
		}
		/* an entry removed meanwhile, behind the cursor, changes nothing ahead */
		if (seen == 7) {
			struct meta_delta two[2];
			uint64_t removed;

			SH_ASSERT_OK(meta_remove(&f.b[2], META_ROOT_INO, ents[0].name, ents[0].len,
						 false, 600, &removed, two));
		}
	}
	SH_ASSERT_EQ(seen, made);
	SH_ASSERT_EQ(
	    meta_readdir(&f.b[2], META_ROOT_INO, NULL, 0, ents, 0, &(unsigned){ 0 }, &more),
	    -EINVAL);
	fx_close(&f);
}

/* Create (parent, a name in bucket k) of a type; returns the name (copied into out). */
static uint64_t
make_in(struct fx *f, uint64_t parent, int k, const char *stem, uint8_t type, char *out)
{
	struct meta_new n = newf(type);
	struct meta_inode in;
	struct meta_dentry d;
	struct meta_delta delta;

	strcpy(out, name_in(parent, k, stem));
	SH_ASSERT_OK(meta_create(&f->b[k], parent, out, strlen(out), &n, &in, &d, &delta));
	if (type == META_DIR)
		lease_all(f, d.ino);
	return d.ino;
}

TEST(meta_ops_rename_in_one_bucket)
{
	struct fx f;
	struct meta_inode in;
	struct meta_dentry d;
	struct meta_delta dl[META_DELTAS_MAX];
	char a[64], b2[64], c[64], da[64], db[64], p1n[64], p2n[64], x[64], y[64];
	uint64_t fa, fb, dira, p1, p2, sub;
	const int k = 1;

	fx_open(&f);
	mkroot(&f);
	fa = make_in(&f, META_ROOT_INO, k, "a", META_REG, a);
	fb = make_in(&f, META_ROOT_INO, k, "b", META_REG, b2);
	strcpy(c, name_in(META_ROOT_INO, k, "c"));
	ship_all(&f);

	/* a plain rename in one directory */
	SH_ASSERT_OK(meta_rename(&f.b[k], META_ROOT_INO, a, strlen(a), META_ROOT_INO, c, strlen(c),
				 0, 7000, dl));
	SH_ASSERT_EQ(meta_lookup(&f.b[k], META_ROOT_INO, a, strlen(a), &d), -ENOENT);
	SH_ASSERT_OK(meta_lookup(&f.b[k], META_ROOT_INO, c, strlen(c), &d));
	SH_ASSERT_EQ(d.ino, fa);
	attr(&f, fa, &in);
	SH_ASSERT_EQ(in.ctime, 7000);
	/* NOREPLACE onto an existing name; bad flags; onto itself */
	SH_ASSERT_EQ(meta_rename(&f.b[k], META_ROOT_INO, c, strlen(c), META_ROOT_INO, b2,
				 strlen(b2), META_RENAME_NOREPLACE, 7100, dl),
		     -EEXIST);
	SH_ASSERT_EQ(meta_rename(&f.b[k], META_ROOT_INO, c, strlen(c), META_ROOT_INO, b2,
				 strlen(b2), 3, 7100, dl),
		     -EINVAL);
	SH_ASSERT_OK(meta_rename(&f.b[k], META_ROOT_INO, c, strlen(c), META_ROOT_INO, c, strlen(c),
				 0, 7100, dl));
	/* EXCHANGE swaps */
	SH_ASSERT_OK(meta_rename(&f.b[k], META_ROOT_INO, c, strlen(c), META_ROOT_INO, b2,
				 strlen(b2), META_RENAME_EXCHANGE, 7200, dl));
	SH_ASSERT_OK(meta_lookup(&f.b[k], META_ROOT_INO, c, strlen(c), &d));
	SH_ASSERT_EQ(d.ino, fb);
	SH_ASSERT_OK(meta_lookup(&f.b[k], META_ROOT_INO, b2, strlen(b2), &d));
	SH_ASSERT_EQ(d.ino, fa);
	/* replacing a file drops the replaced inode (its last link) */
	SH_ASSERT_OK(meta_rename(&f.b[k], META_ROOT_INO, c, strlen(c), META_ROOT_INO, b2,
				 strlen(b2), 0, 7300, dl));
	SH_ASSERT_EQ(orphan_dropped(&f.b[k], fa), -ESTALE);
	SH_ASSERT_OK(meta_lookup(&f.b[k], META_ROOT_INO, b2, strlen(b2), &d));
	SH_ASSERT_EQ(d.ino, fb);
	ship_all(&f);
	attr(&f, META_ROOT_INO, &in);
	SH_ASSERT_EQ(in.size, 1); /* a and b made 2; a replaced b */

	/* type rules */
	dira = make_in(&f, META_ROOT_INO, k, "dirA", META_DIR, da);
	SH_ASSERT_EQ(meta_rename(&f.b[k], META_ROOT_INO, da, strlen(da), META_ROOT_INO, b2,
				 strlen(b2), 0, 7400, dl),
		     -ENOTDIR);
	SH_ASSERT_EQ(meta_rename(&f.b[k], META_ROOT_INO, b2, strlen(b2), META_ROOT_INO, da,
				 strlen(da), 0, 7400, dl),
		     -EISDIR);
	make_in(&f, META_ROOT_INO, k, "dirB", META_DIR, db);
	make_in(&f, dira, k, "inside", META_REG, x);
	SH_ASSERT_EQ(meta_rename(&f.b[k], META_ROOT_INO, db, strlen(db), META_ROOT_INO, da,
				 strlen(da), 0, 7400, dl),
		     -ENOTEMPTY);
	/* entries in two buckets: the two-phase path */
	strcpy(y, name_in(META_ROOT_INO, 2, "far"));
	SH_ASSERT_EQ(meta_rename(&f.b[k], META_ROOT_INO, b2, strlen(b2), META_ROOT_INO, y,
				 strlen(y), 0, 7400, dl),
		     -EXDEV);

	/* a directory moves between parents: their link counts follow */
	p1 = make_in(&f, META_ROOT_INO, 0, "p1", META_DIR, p1n);
	p2 = make_in(&f, META_ROOT_INO, 0, "p2", META_DIR, p2n);
	sub = make_in(&f, p1, k, "sub", META_DIR, x);
	strcpy(y, name_in(p2, k, "moved"));
	ship_all(&f);
	attr(&f, p1, &in);
	SH_ASSERT_EQ(in.nlink, 3);
	SH_ASSERT_OK(meta_rename(&f.b[k], p1, x, strlen(x), p2, y, strlen(y), 0, 7500, dl));
	SH_ASSERT_EQ(ship_all(&f), 2);
	attr(&f, p1, &in);
	SH_ASSERT_EQ(in.nlink, 2);
	SH_ASSERT_EQ(in.size, 0);
	attr(&f, p2, &in);
	SH_ASSERT_EQ(in.nlink, 3);
	SH_ASSERT_EQ(in.size, 1);
	SH_ASSERT_EQ(in.mtime, 7500);
	SH_ASSERT_OK(meta_lookup(&f.b[k], p2, y, strlen(y), &d));
	SH_ASSERT_EQ(d.ino, sub);
	fx_close(&f);
}

TEST(meta_ops_directory_leases)
{
	struct fx f;
	struct meta_inode in;
	struct meta_dentry d;
	struct meta_delta delta, two[2];
	struct meta_new n = newf(META_REG);
	struct meta_lease l;
	char dn[64], fn[64];
	uint16_t lessees[8];
	unsigned nl;
	uint64_t dir, file, removed;

	fx_open(&f);
	SH_ASSERT_OK(meta_mkroot(&f.b[0], 0755, 500)); /* no leases yet */
	strcpy(fn, name_in(META_ROOT_INO, 1, "f"));
	SH_ASSERT_EQ(meta_create(&f.b[1], META_ROOT_INO, fn, strlen(fn), &n, &in, &d, &delta),
		     -ENOLCK);
	SH_ASSERT_OK(meta_lease_grant(&f.b[0], META_ROOT_INO, 1, &l));
	SH_ASSERT_EQ(l.mode, 0755);
	SH_ASSERT_OK(meta_lease_hold(&f.b[1], &l));
	SH_ASSERT_OK(meta_create(&f.b[1], META_ROOT_INO, fn, strlen(fn), &n, &in, &d, &delta));
	file = d.ino;
	SH_ASSERT_EQ(meta_lease_grant(&f.b[1], file, 2, &l), -ENOTDIR);
	SH_ASSERT_EQ(meta_lease_grant(&f.b[0], meta_ino_make(0, 999), 2, &l), -ENOENT);

	/* a directory with a lease out cannot go until the lease is back */
	n = newf(META_DIR);
	strcpy(dn, name_in(META_ROOT_INO, 0, "d"));
	SH_ASSERT_OK(meta_create(&f.b[0], META_ROOT_INO, dn, strlen(dn), &n, &in, &d, &delta));
	dir = d.ino;
	SH_ASSERT_OK(meta_lease_grant(&f.b[0], dir, 3, &l));
	SH_ASSERT_OK(meta_lease_hold(&f.b[3], &l));
	SH_ASSERT_EQ(meta_remove(&f.b[0], META_ROOT_INO, dn, strlen(dn), true, 900, &removed, two),
		     -EBUSY);
	SH_ASSERT_OK(meta_lease_close(&f.b[0], dir, lessees, 8, &nl));
	SH_ASSERT_EQ(nl, 1);
	SH_ASSERT_EQ(lessees[0], 3);
	SH_ASSERT_EQ(meta_lease_grant(&f.b[0], dir, 2, &l), -EBUSY); /* closing */
	SH_ASSERT_OK(meta_lease_revoke(&f.b[3], dir));
	SH_ASSERT_OK(meta_lease_drop(&f.b[0], dir, 3));
	/* bucket 3 may no longer create under it */
	n = newf(META_REG);
	SH_ASSERT_EQ(meta_create(&f.b[3], dir, name_in(dir, 3, "late"),
				 strlen(name_in(dir, 3, "late")), &n, &in, &d, &delta),
		     -ENOLCK);
	SH_ASSERT_OK(meta_remove(&f.b[0], META_ROOT_INO, dn, strlen(dn), true, 900, &removed, two));
	SH_ASSERT_EQ(removed, dir);
	/* reopen clears closing (rmdir that found entries) */
	n = newf(META_DIR);
	strcpy(dn, name_in(META_ROOT_INO, 0, "e"));
	SH_ASSERT_OK(meta_create(&f.b[0], META_ROOT_INO, dn, strlen(dn), &n, &in, &d, &delta));
	SH_ASSERT_OK(meta_lease_close(&f.b[0], d.ino, lessees, 8, &nl));
	SH_ASSERT_EQ(nl, 0);
	SH_ASSERT_OK(meta_lease_reopen(&f.b[0], d.ino));
	SH_ASSERT_OK(meta_lease_grant(&f.b[0], d.ino, 2, &l));
	fx_close(&f);
}

/*
 * A rename whose two entries share a bucket that is not the new parent's
 * needs that bucket's lease on the new parent, as a create there does: the
 * lease is what tells a readdir of the parent to look in that bucket.
 */
TEST(meta_ops_rename_in_one_bucket_needs_lease_on_new_parent)
{
	struct fx f;
	struct meta_inode in;
	struct meta_dentry d;
	struct meta_delta delta, dl[META_DELTAS_MAX];
	struct meta_new n = newf(META_DIR);
	struct meta_lease l;
	char dn[64], fn[64], gn[64];
	uint16_t lessees[NB];
	unsigned nl;
	uint64_t dir, file;

	fx_open(&f);
	mkroot(&f);
	/* a directory at bucket 0 that has given no lease yet */
	strcpy(dn, name_in(META_ROOT_INO, 0, "d"));
	SH_ASSERT_OK(meta_create(&f.b[0], META_ROOT_INO, dn, strlen(dn), &n, &in, &d, &delta));
	dir = d.ino;
	file = make_in(&f, META_ROOT_INO, 1, "f", META_REG, fn);
	strcpy(gn, name_in(dir, 1, "g"));
	SH_ASSERT_EQ(
	    meta_rename(&f.b[1], META_ROOT_INO, fn, strlen(fn), dir, gn, strlen(gn), 0, 9000, dl),
	    -ENOLCK);
	SH_ASSERT_EQ(meta_lookup(&f.b[1], META_ROOT_INO, fn, strlen(fn), &d), 0); /* unmoved */
	SH_ASSERT_OK(meta_lease_grant(&f.b[0], dir, 1, &l));
	SH_ASSERT_OK(meta_lease_hold(&f.b[1], &l));
	SH_ASSERT_OK(
	    meta_rename(&f.b[1], META_ROOT_INO, fn, strlen(fn), dir, gn, strlen(gn), 0, 9000, dl));
	SH_ASSERT_OK(meta_lookup(&f.b[1], dir, gn, strlen(gn), &d));
	SH_ASSERT_EQ(d.ino, file);
	SH_ASSERT_OK(meta_lease_list(&f.b[0], dir, lessees, NB, &nl));
	SH_ASSERT_EQ(nl, 1);
	SH_ASSERT_EQ(lessees[0], 1);
	/* a new parent in this bucket that is not a directory */
	SH_ASSERT_EQ(meta_ino_bucket(file), 1);
	strcpy(fn, name_in(file, 1, "h"));
	SH_ASSERT_EQ(meta_rename(&f.b[1], dir, gn, strlen(gn), file, fn, strlen(fn), 0, 9100, dl),
		     -ENOTDIR);
	fx_close(&f);
}

static void
r2_init(struct meta_rename2 *r, uint64_t id, int sb, uint64_t op, const char *on, int db,
	uint64_t np, const char *nn, unsigned flags)
{
	memset(r, 0, sizeof(*r));
	r->id = id;
	r->src_bucket = (uint16_t)sb;
	r->dst_bucket = (uint16_t)db;
	r->oparent = op;
	r->nparent = np;
	strcpy(r->oname, on);
	strcpy(r->nname, nn);
	r->flags = flags;
	r->now = 8000 + id;
}

/* The whole protocol, in order; returns the first failure (after aborting both sides). */
static int
rename2(struct fx *f, struct meta_rename2 *r)
{
	struct meta_delta dl[META_DELTAS_MAX];
	int rc = meta_rename_prepare_src(&f->b[r->src_bucket], r);

	if (rc < 0)
		return rc;
	rc = meta_rename_prepare_dst(&f->b[r->dst_bucket], r);
	if (rc != 0) {
		SH_ASSERT_OK(meta_rename_abort(&f->b[r->src_bucket], r));
		SH_ASSERT_OK(meta_rename_abort(&f->b[r->dst_bucket], r));
		return rc > 0 ? 0 : rc;
	}
	SH_ASSERT_OK(meta_rename_commit_src(&f->b[r->src_bucket], r, dl));
	SH_ASSERT_OK(meta_rename_commit_dst(&f->b[r->dst_bucket], r, dl));
	SH_ASSERT_OK(meta_rename_finish(&f->b[r->src_bucket], r));
	ship_all(f);
	return 0;
}

/*
 * A directory's parent, kept at its own bucket for the subtree check of a
 * rename by inode: set by mkdir, moved by renames (here, or by a delta
 * when the entry's bucket is another), the newest rename winning when
 * deltas come out of order, gone with the directory.
 */
TEST(meta_ops_directory_parents)
{
	struct fx f;
	struct meta_delta dl[META_DELTAS_MAX], two[2];
	struct meta_rename2 r;
	char p1n[64], p2n[64], dn[64], x[64], y[64];
	uint64_t p1, p2, dir, got, removed;

	fx_open(&f);
	mkroot(&f);
	SH_ASSERT_OK(meta_parent_get(&f.b[0], META_ROOT_INO, &got));
	SH_ASSERT_EQ(got, META_ROOT_INO);
	p1 = make_in(&f, META_ROOT_INO, 0, "p1", META_DIR, p1n);
	p2 = make_in(&f, META_ROOT_INO, 1, "p2", META_DIR, p2n);
	dir = make_in(&f, p1, 2, "d", META_DIR, dn);
	SH_ASSERT_OK(meta_parent_get(&f.b[2], dir, &got));
	SH_ASSERT_EQ(got, p1);
	SH_ASSERT_EQ(meta_parent_get(&f.b[2], meta_ino_make(2, 999), &got), -ESTALE);
	SH_ASSERT_EQ(meta_parent_get(&f.b[0], p1 + 1000, &got), -ESTALE);

	/* moved between two buckets: its entry's new bucket tells the directory's */
	strcpy(x, name_in(p2, 3, "moved"));
	r2_init(&r, 1, 2, p1, dn, 3, p2, x, 0);
	SH_ASSERT_OK(rename2(&f, &r));
	SH_ASSERT_OK(meta_parent_get(&f.b[2], dir, &got));
	SH_ASSERT_EQ(got, p2);
	/* then within the entry's bucket, back under p1 (a delta again: the inode is in 2) */
	strcpy(y, name_in(p1, 3, "back"));
	SH_ASSERT_OK(meta_rename(&f.b[3], p2, x, strlen(x), p1, y, strlen(y), 0, 9000, dl));
	ship_all(&f);
	SH_ASSERT_OK(meta_parent_get(&f.b[2], dir, &got));
	SH_ASSERT_EQ(got, p1);
	/* a delta of an older rename, late: the newer stands */
	{
		struct meta_delta late = { .kind = META_DELTA_PARENT,
					   .to = 2,
					   .from = 1,
					   .seq = 77,
					   .ino = dir,
					   .time = 8500 };

		memcpy(late.fp, &p2, sizeof(p2));
		SH_ASSERT_OK(meta_apply_delta(&f.b[2], &late));
		SH_ASSERT_OK(meta_parent_get(&f.b[2], dir, &got));
		SH_ASSERT_EQ(got, p1);
		late.seq = 78;
		late.time = 9500;
		SH_ASSERT_OK(meta_apply_delta(&f.b[2], &late));
		SH_ASSERT_OK(meta_parent_get(&f.b[2], dir, &got));
		SH_ASSERT_EQ(got, p2);
	}
	/* gone with the directory */
	SH_ASSERT_OK(meta_remove(&f.b[3], p1, y, strlen(y), 2, 9600, &removed, two));
	ship_all(&f);
	SH_ASSERT_EQ(meta_parent_get(&f.b[2], dir, &got), -ESTALE);
	fx_close(&f);
}

TEST(meta_ops_rename_across_buckets)
{
	struct fx f;
	struct meta_inode in, root;
	struct meta_dentry d;
	struct meta_delta dl[META_DELTAS_MAX], two[2];
	struct meta_new n = newf(META_REG);
	struct meta_rename2 r;
	char a[64], t[64], b1[64], c2[64], dn[64], fn[64];
	uint64_t fa, fb, fc, dir, ff, removed;

	fx_open(&f);
	mkroot(&f);
	fa = make_in(&f, META_ROOT_INO, 1, "a", META_REG, a);
	strcpy(t, name_in(META_ROOT_INO, 2, "t"));
	ship_all(&f);
	attr(&f, META_ROOT_INO, &root);
	SH_ASSERT_EQ(root.size, 1);

	/* step by step, with the names locked in between */
	r2_init(&r, 1, 1, META_ROOT_INO, a, 2, META_ROOT_INO, t, 0);
	SH_ASSERT_OK(meta_rename_prepare_src(&f.b[1], &r));
	SH_ASSERT_EQ(r.src.ino, fa);
	SH_ASSERT_EQ(meta_remove(&f.b[1], META_ROOT_INO, a, strlen(a), false, 1, &removed, two),
		     -EBUSY);
	SH_ASSERT_OK(meta_rename_prepare_dst(&f.b[2], &r));
	SH_ASSERT_EQ(meta_create(&f.b[2], META_ROOT_INO, t, strlen(t), &n, &in, &d, dl), -EBUSY);
	SH_ASSERT_OK(meta_rename_commit_src(&f.b[1], &r, dl));
	SH_ASSERT_OK(meta_rename_commit_dst(&f.b[2], &r, dl));
	SH_ASSERT_OK(meta_rename_finish(&f.b[1], &r));
	SH_ASSERT_EQ(meta_lookup(&f.b[1], META_ROOT_INO, a, strlen(a), &d), -ENOENT);
	SH_ASSERT_OK(meta_lookup(&f.b[2], META_ROOT_INO, t, strlen(t), &d));
	SH_ASSERT_EQ(d.ino, fa);
	SH_ASSERT_EQ(ship_all(&f), 2); /* -1 from bucket 1, +1 from bucket 2 */
	attr(&f, META_ROOT_INO, &root);
	SH_ASSERT_EQ(root.size, 1);

	/* replacing a file in the other bucket drops it */
	fb = make_in(&f, META_ROOT_INO, 1, "b", META_REG, b1);
	fc = make_in(&f, META_ROOT_INO, 2, "c", META_REG, c2);
	r2_init(&r, 2, 1, META_ROOT_INO, b1, 2, META_ROOT_INO, c2, META_RENAME_NOREPLACE);
	SH_ASSERT_EQ(rename2(&f, &r), -EEXIST); /* and both sides were released */
	SH_ASSERT_OK(meta_lookup(&f.b[1], META_ROOT_INO, b1, strlen(b1), &d));
	r2_init(&r, 3, 1, META_ROOT_INO, b1, 2, META_ROOT_INO, c2, 0);
	SH_ASSERT_OK(rename2(&f, &r));
	SH_ASSERT_EQ(orphan_dropped(&f.b[2], fc), -ESTALE);
	SH_ASSERT_OK(meta_lookup(&f.b[2], META_ROOT_INO, c2, strlen(c2), &d));
	SH_ASSERT_EQ(d.ino, fb);

	/* exchange a directory and a file across buckets */
	dir = make_in(&f, META_ROOT_INO, 1, "dir", META_DIR, dn);
	ff = make_in(&f, META_ROOT_INO, 2, "file", META_REG, fn);
	ship_all(&f);
	attr(&f, META_ROOT_INO, &root);
	r2_init(&r, 4, 1, META_ROOT_INO, dn, 2, META_ROOT_INO, fn, META_RENAME_EXCHANGE);
	SH_ASSERT_OK(rename2(&f, &r));
	SH_ASSERT_OK(meta_lookup(&f.b[1], META_ROOT_INO, dn, strlen(dn), &d));
	SH_ASSERT_EQ(d.ino, ff);
	SH_ASSERT_OK(meta_lookup(&f.b[2], META_ROOT_INO, fn, strlen(fn), &d));
	SH_ASSERT_EQ(d.ino, dir);
	SH_ASSERT_EQ(d.type, META_DIR);
	{
		struct meta_inode after;

		attr(&f, META_ROOT_INO, &after);
		SH_ASSERT_EQ(after.nlink, root.nlink); /* the directory is still in the root */
		SH_ASSERT_EQ(after.size, root.size);
	}
	/* type rules and a missing source */
	r2_init(&r, 5, 2, META_ROOT_INO, fn, 1, META_ROOT_INO, dn, 0); /* dir over file */
	SH_ASSERT_EQ(rename2(&f, &r), -ENOTDIR);
	r2_init(&r, 6, 1, META_ROOT_INO, "nope", 2, META_ROOT_INO, t, 0);
	if (meta_dentry_bucket(META_ROOT_INO, "nope", 4, NB) == 1)
		SH_ASSERT_EQ(rename2(&f, &r), -ENOENT);
	/* names are free again after every outcome */
	SH_ASSERT_OK(
	    meta_remove(&f.b[1], META_ROOT_INO, dn, strlen(dn), false, 9000, &removed, two));
	fx_close(&f);
}

struct found {
	int phase;
	struct meta_rename2 r;
	int n;
};

static int
on_found(void *arg, int phase, const struct meta_rename2 *r)
{
	struct found *x = arg;

	x->phase = phase;
	x->r = *r;
	x->n++;
	return 0;
}

/* A coordinator that stops between any two steps: its intent says how to finish. */
TEST(meta_ops_rename_recovers_from_its_intent)
{
	for (int stop = 1; stop <= 3; stop++) {
		struct fx f;
		struct meta_rename2 r;
		struct meta_delta dl[META_DELTAS_MAX];
		struct meta_dentry d;
		struct found x = { 0 };
		char a[64], t[64];
		uint64_t fa;
		bool at_old, at_new;

		fx_open(&f);
		mkroot(&f);
		fa = make_in(&f, META_ROOT_INO, 1, "a", META_REG, a);
		strcpy(t, name_in(META_ROOT_INO, 3, "t"));
		r2_init(&r, 7, 1, META_ROOT_INO, a, 3, META_ROOT_INO, t, 0);
		SH_ASSERT_OK(meta_rename_prepare_src(&f.b[1], &r));
		if (stop >= 2)
			SH_ASSERT_OK(meta_rename_prepare_dst(&f.b[3], &r));
		if (stop >= 3)
			SH_ASSERT_OK(meta_rename_commit_src(&f.b[1], &r, dl));
		/* ... the coordinator's leader changes: the new one reads the intent */
		SH_ASSERT_OK(meta_intents(&f.b[1], on_found, &x));
		SH_ASSERT_EQ(x.n, 1);
		SH_ASSERT_EQ(x.phase, stop >= 3 ? 2 : 1);
		SH_ASSERT_EQ(x.r.src.ino, fa);
		if (x.phase == 2) {
			SH_ASSERT_OK(meta_rename_commit_dst(&f.b[3], &x.r, dl));
			SH_ASSERT_OK(meta_rename_finish(&f.b[1], &x.r));
		} else {
			SH_ASSERT_OK(meta_rename_abort(&f.b[1], &x.r));
			SH_ASSERT_OK(meta_rename_abort(&f.b[3], &x.r));
		}
		/* exactly one of the two names, and nothing left behind */
		at_old = meta_lookup(&f.b[1], META_ROOT_INO, a, strlen(a), &d) == 0;
		at_new = meta_lookup(&f.b[3], META_ROOT_INO, t, strlen(t), &d) == 0;
		SH_ASSERT_MSG(at_old != at_new, "stop %d: old %d new %d", stop, at_old, at_new);
		SH_ASSERT_EQ(at_new, stop >= 3);
		x.n = 0;
		SH_ASSERT_OK(meta_intents(&f.b[1], on_found, &x));
		SH_ASSERT_EQ(x.n, 0);
		SH_ASSERT_OK(meta_remove(&f.b[at_new ? 3 : 1], META_ROOT_INO, at_new ? t : a,
					 strlen(at_new ? t : a), false, 1, &fa,
					 (struct meta_delta[2]){}));
		fx_close(&f);
	}
}

/*
 * A hard link renamed, the file's inode in neither entry's bucket: its
 * ctime still becomes the rename's time (a delta to the inode's bucket),
 * for a rename in one bucket and one between two.
 */
TEST(meta_ops_rename_of_a_link_touches_the_far_inode)
{
	struct fx f;
	struct meta_new n = newf(META_REG);
	struct meta_inode in;
	struct meta_dentry d;
	struct meta_delta delta, two[2], dl[META_DELTAS_MAX];
	struct meta_rename2 r;
	char a[64], l1[64], l2[64], l3[64];
	uint64_t file;

	fx_open(&f);
	mkroot(&f);
	strcpy(a, name_in(META_ROOT_INO, 0, "orig"));
	SH_ASSERT_OK(meta_create(&f.b[0], META_ROOT_INO, a, strlen(a), &n, &in, &d, &delta));
	file = d.ino;
	strcpy(l1, name_in(META_ROOT_INO, 1, "link"));
	SH_ASSERT_OK(meta_link(&f.b[1], META_ROOT_INO, l1, strlen(l1), file, META_REG, 3000, two));
	ship_all(&f);
	/* in bucket 1, the inode in bucket 0 */
	strcpy(l2, name_in(META_ROOT_INO, 1, "link2"));
	SH_ASSERT_OK(meta_rename(&f.b[1], META_ROOT_INO, l1, strlen(l1), META_ROOT_INO, l2,
				 strlen(l2), 0, 5000, dl));
	SH_ASSERT_EQ(dl[3].ino, file);
	SH_ASSERT_EQ(dl[3].to, 0);
	attr(&f, file, &in);
	SH_ASSERT_EQ(in.ctime, 3000); /* not yet: the delta is on its way */
	ship_all(&f);
	attr(&f, file, &in);
	SH_ASSERT_EQ(in.ctime, 5000);
	SH_ASSERT_EQ(in.nlink, 2);
	/* from bucket 1 to bucket 2, the inode still in bucket 0 */
	strcpy(l3, name_in(META_ROOT_INO, 2, "link3"));
	r2_init(&r, 7, 1, META_ROOT_INO, l2, 2, META_ROOT_INO, l3, 0);
	SH_ASSERT_OK(rename2(&f, &r));
	attr(&f, file, &in);
	SH_ASSERT_EQ(in.ctime, 8007u);
	SH_ASSERT_EQ(in.mtime, 1000u); /* a rename changes no file's mtime */
	SH_ASSERT_EQ(in.nlink, 2);
	SH_ASSERT_OK(meta_lookup(&f.b[2], META_ROOT_INO, l3, strlen(l3), &d));
	SH_ASSERT_EQ(d.ino, file);
	fx_close(&f);
}

static int
last_seq(void *arg, const struct meta_delta *d)
{
	uint64_t *seq = arg;

	seq[0]++;
	seq[1] = d->seq;
	return 0;
}

/* What version 3 appends to a command: trim, lease (dir, mode, uid, gid, generation). */
#define V3_TAIL (8 + 8 + 4 + 4 + 4 + 8)

/*
 * A command carries the outbox's trim: the deltas its bucket's leader
 * knows applied where they went go in the same commit (no OUTBOX_ACK of
 * their own), the newer stay; a command from a log written before trim
 * existed (version 2) still decodes, with none.
 */
TEST(meta_cmd_trim_drops_applied_deltas_with_the_command)
{
	struct fx f;
	struct meta_cmd c = { .op = META_OP_CREATE,
			      .ver = 1,
			      .now = 2000,
			      .type = META_REG,
			      .mode = 0644,
			      .parent = META_ROOT_INO },
			d;
	struct meta_result r;
	uint64_t seen[2] = { 0 }, first;
	struct sh_enc e;

	fx_open(&f);
	mkroot(&f);
	snprintf(c.name, sizeof(c.name), "%s", name_in(META_ROOT_INO, 1, "a"));
	meta_cmd_apply(&f.b[1], &c, &r);
	SH_ASSERT_OK(r.status);
	SH_ASSERT_OK(meta_outbox(&f.b[1], last_seq, seen));
	SH_ASSERT_EQ(seen[0], 1u); /* the root's size and mtime, queued for bucket 0 */
	first = seen[1];
	snprintf(c.name, sizeof(c.name), "%s", name_in(META_ROOT_INO, 1, "b"));
	c.trim = first;
	meta_cmd_apply(&f.b[1], &c, &r);
	SH_ASSERT_OK(r.status);
	memset(seen, 0, sizeof(seen));
	SH_ASSERT_OK(meta_outbox(&f.b[1], last_seq, seen));
	SH_ASSERT_EQ(seen[0], 1u); /* the second create's delta only */
	SH_ASSERT_GT(seen[1], first);
	/* through the codec; then as version 2 wrote it (no trim at the end) */
	sh_enc_init(&e);
	SH_ASSERT_OK(meta_cmd_encode(&e, &c));
	SH_ASSERT_OK(meta_cmd_decode(e.p, e.len, &d));
	SH_ASSERT_EQ(d.trim, first);
	e.p[0] = 2;
	SH_ASSERT_OK(meta_cmd_decode(e.p, e.len - V3_TAIL, &d));
	SH_ASSERT_EQ(d.trim, 0u);
	SH_ASSERT_EQ(d.lease.dir, 0u);
	SH_ASSERT_STREQ(d.name, c.name);
	SH_ASSERT_EQ(meta_cmd_decode(e.p, e.len, &d), -EBADMSG); /* 2 with v3's tail too many */
	sh_enc_fini(&e);
	fx_close(&f);
}

/*
 * A command carries the lease it needs, just granted: held in the same
 * commit (no LEASE_HOLD of its own), through the codec.
 */
TEST(meta_cmd_carries_the_lease_it_needs)
{
	struct fx f;
	struct meta_cmd mk = { .op = META_OP_CREATE,
			       .ver = 1,
			       .now = 2000,
			       .type = META_DIR,
			       .mode = 0755,
			       .parent = META_ROOT_INO },
			c, d;
	struct meta_result r;
	struct meta_lease l;
	uint64_t dir;
	struct sh_enc e;

	fx_open(&f);
	mkroot(&f);
	/* a directory kept in bucket 2; a file under it, in bucket 3 */
	snprintf(mk.name, sizeof(mk.name), "%s", name_in(META_ROOT_INO, 2, "d"));
	meta_cmd_apply(&f.b[2], &mk, &r);
	SH_ASSERT_OK(r.status);
	dir = r.dentry.ino;
	c = (struct meta_cmd){ .op = META_OP_CREATE,
			       .ver = 1,
			       .now = 3000,
			       .type = META_REG,
			       .mode = 0644,
			       .parent = dir };
	snprintf(c.name, sizeof(c.name), "%s", name_in(dir, 3, "f"));
	meta_cmd_apply(&f.b[3], &c, &r);
	SH_ASSERT_EQ(r.status, -ENOLCK); /* no lease on dir yet */
	SH_ASSERT_OK(meta_lease_grant(&f.b[2], dir, 3, &l));
	c.lease = l;
	sh_enc_init(&e);
	SH_ASSERT_OK(meta_cmd_encode(&e, &c));
	SH_ASSERT_OK(meta_cmd_decode(e.p, e.len, &d));
	sh_enc_fini(&e);
	SH_ASSERT_EQ(d.lease.dir, dir);
	SH_ASSERT_EQ(d.lease.generation, l.generation);
	meta_cmd_apply(&f.b[3], &d, &r);
	SH_ASSERT_OK(r.status);
	SH_ASSERT_OK(meta_lease_held(&f.b[3], dir));
	/* held from now on: the next create needs none */
	snprintf(c.name, sizeof(c.name), "%s", name_in(dir, 3, "g"));
	c.lease.dir = 0;
	meta_cmd_apply(&f.b[3], &c, &r);
	SH_ASSERT_OK(r.status);
	fx_close(&f);
}
