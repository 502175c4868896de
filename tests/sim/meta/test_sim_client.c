// SPDX-License-Identifier: Apache-2.0
/*
 * The real client in the simulator (src/client/client_env.h): three
 * libshoal clients, each on a simulated machine of its own, against the
 * six real backends of the metadata world (msvc, drive targets) on a
 * lossy, duplicating, reordering network. They create, write, fsync,
 * read, rename over and remove files through the public API while
 * backends are kill -9'd with their disks' last writes torn, restarted,
 * and cut off by partitions (one at a time: 4+2 and groups of five
 * survive it). Each call is whole before the next starts (the test's
 * thread drives the world inside it); the clients' caches, holds and
 * leases, recalls, retries and timeouts are theirs.
 *
 * Checked against a model of what was acknowledged:
 *  - every call succeeds (one backend lost at a time is not an error);
 *  - a read returns exactly the bytes of the last acknowledged write of
 *    the file, through any client (no lost write, no torn or stale read,
 *    no wrong byte);
 *  - a rename over leaves the new bytes at the name, once;
 *  - at the end, with every backend back, a fresh client lists each
 *    directory as the model has it and reads every file back exactly.
 */
#include <fcntl.h>

#include "world.h"
#include "shoal/client.h"

#define CLIENTS	  3
#define NAMES	  8 /* per client directory */
#define MAX_BYTES (96u << 10)
#define OPS	  150

struct file {
	bool exists;
	uint64_t seed; /* its bytes: content(seed, len) */
	uint32_t len;
};

struct model {
	struct file f[CLIENTS][NAMES];
};

static void
content(uint64_t seed, uint32_t len, uint8_t *out)
{
	struct sh_rand r;

	sh_rand_seed(&r, seed);
	sh_rand_fill(&r, out, len);
}

static void
path_of(int dir, int name, char *buf, size_t len)
{
	snprintf(buf, len, "/c%d/f%d", dir, name);
}

/* Write the file anew (O_TRUNC), fsync, close: acknowledged only if all three were. */
static int
put(sh_fs *fs, const char *path, uint64_t seed, uint32_t len, uint8_t *buf)
{
	sh_file *f;
	int rc = sh_open(fs, path, O_CREAT | O_TRUNC | O_WRONLY, 0644, &f);
	long n;

	if (rc < 0)
		return rc;
	content(seed, len, buf);
	/* in two writes, the second at an odd offset: stripes and tails both */
	n = sh_pwrite(f, buf, len / 3, 0);
	if (n >= 0 && len > len / 3)
		n = sh_pwrite(f, buf + len / 3, len - len / 3, len / 3);
	rc = n < 0 ? (int)n : sh_fsync(f);
	n = sh_close(f);
	return rc < 0 ? rc : (int)n;
}

/* The file at path as the model says it must be, or -errno, or 1 for wrong bytes. */
static int
check(sh_fs *fs, const char *path, const struct file *m, uint8_t *buf, uint8_t *want)
{
	struct stat st;
	sh_file *f;
	long n;
	int rc = sh_stat(fs, path, &st);

	if (!m->exists)
		return rc == -ENOENT ? 0 : rc == 0 ? 2 : rc;
	if (rc < 0)
		return rc;
	if ((uint64_t)st.st_size != m->len) {
		printf("%s: size %lld, the model's %u\n", path, (long long)st.st_size, m->len);
		return 3;
	}
	rc = sh_open(fs, path, O_RDONLY, 0, &f);
	if (rc < 0)
		return rc;
	n = sh_pread(f, buf, MAX_BYTES + 1, 0);
	sh_close(f);
	if (n < 0)
		return (int)n;
	content(m->seed, m->len, want);
	return (uint32_t)n == m->len && memcmp(buf, want, m->len) == 0 ? 0 : 1;
}

struct faults {
	int down;	/* the node now crashed (0: none) */
	int cut;	/* the node now partitioned away (0: none) */
	uint64_t until; /* when it comes back */
	unsigned crashes, cuts;
};

/* Between calls: a backend crashed, restarted, cut off or healed, one at a time. */
static void
faults_turn(struct world *w, struct faults *ft)
{
	uint64_t now = sim_now(w->sim);

	if (ft->down != 0 && now >= ft->until) {
		node_start(&w->n[ft->down]);
		ft->down = 0;
	} else if (ft->cut != 0 && now >= ft->until) {
		sim_heal(w->sim);
		ft->cut = 0;
	} else if (ft->down == 0 && ft->cut == 0 && sh_rand_u64(&w->rng) % 12 == 0) {
		int victim = 1 + (int)(sh_rand_u64(&w->rng) % N);

		ft->until = now + (2 + sh_rand_u64(&w->rng) % 8) * SH_NSEC_PER_SEC;
		if (sh_rand_u64(&w->rng) % 3 == 0) {
			sim_partition_set(w->n[victim].sn, 1);
			ft->cut = victim;
			ft->cuts++;
		} else {
			node_stop(w, &w->n[victim], true);
			w->n[victim].up = false;
			ft->down = victim;
			ft->crashes++;
		}
	}
}

static uint64_t
run_in(uint64_t seed, bool sealed)
{
	struct world w;
	struct model *m = sh_calloc(1, sizeof(*m));
	uint8_t *buf = sh_malloc(MAX_BYTES + 1), *want = sh_malloc(MAX_BYTES + 1);
	uint64_t trace;
	sh_client *c[CLIENTS];
	sh_fs *fs[CLIENTS];
	struct faults ft = { 0 };
	char p1[64], p2[64];
	unsigned counts[4] = { 0 };

	world_start_sealed(&w, seed, 4ull << 20, true, sealed);
	for (int i = 0; i < CLIENTS; i++) {
		c[i] = world_client(&w, 4, i + 1);
		SH_ASSERT_OK(sh_fs_open(c[i], "fs1", &fs[i]));
	}
	for (int i = 0; i < CLIENTS; i++) {
		snprintf(p1, sizeof(p1), "/c%d", i);
		SH_ASSERT_MSG(sh_mkdir(fs[i], p1, 0755) == 0, "seed %llu: mkdir %s",
			      (unsigned long long)seed, p1);
	}
	for (int op = 0; op < OPS; op++) {
		int who = (int)(sh_rand_u64(&w.rng) % CLIENTS);
		int dir = (int)(sh_rand_u64(&w.rng) % CLIENTS);
		int a = (int)(sh_rand_u64(&w.rng) % NAMES), b = (int)(sh_rand_u64(&w.rng) % NAMES);
		unsigned kind = (unsigned)(sh_rand_u64(&w.rng) % 10);
		struct file *fa = &m->f[dir][a], *fb = &m->f[dir][b];
		int rc;

		faults_turn(&w, &ft);
		path_of(dir, a, p1, sizeof(p1));
		path_of(dir, b, p2, sizeof(p2));
		if (kind < 4) { /* write anew */
			uint64_t s = sh_rand_u64(&w.rng);
			uint32_t len = (uint32_t)(sh_rand_u64(&w.rng) % (MAX_BYTES + 1));

			int other =
			    (who + 1 + (int)(sh_rand_u64(&w.rng) % (CLIENTS - 1))) % CLIENTS;

			/* another client has the file's attributes cached (under a lease) ... */
			rc = check(fs[other], p1, fa, buf, want);
			SH_ASSERT_MSG(rc == 0, "seed %llu op %d: client %d reads %s before: %d",
				      (unsigned long long)seed, op, other, p1, rc);
			rc = put(fs[who], p1, s, len, buf);
			SH_ASSERT_MSG(rc == 0,
				      "seed %llu op %d: client %d writes %u bytes to %s: %s",
				      (unsigned long long)seed, op, who, len, p1, sh_strerror(rc));
			*fa = (struct file){ .exists = true, .seed = s, .len = len };
			/* ... and sees the new bytes at once: the write recalled what it had */
			rc = check(fs[other], p1, fa, buf, want);
			SH_ASSERT_MSG(
			    rc == 0,
			    "seed %llu op %d: client %d reads %s just written by %d: %d (%s); "
			    "node %d down, node %d cut off",
			    (unsigned long long)seed, op, other, p1, who, rc,
			    rc < 0 ? sh_strerror(rc) : "stale or wrong", ft.down, ft.cut);
			counts[0]++;
		} else if (kind < 7) { /* read back, through any client */
			rc = check(fs[who], p1, fa, buf, want);
			SH_ASSERT_MSG(
			    rc == 0, "seed %llu op %d: client %d reads %s (%s, %u bytes): %d (%s)",
			    (unsigned long long)seed, op, who, p1, fa->exists ? "exists" : "absent",
			    fa->len, rc, rc < 0 ? sh_strerror(rc) : "wrong answer");
			counts[1]++;
		} else if (kind < 9) { /* rename over */
			rc = sh_rename(fs[who], p1, p2, 0);
			if (!fa->exists) {
				SH_ASSERT_MSG(rc == -ENOENT,
					      "seed %llu op %d: rename of absent %s: %d",
					      (unsigned long long)seed, op, p1, rc);
			} else {
				SH_ASSERT_MSG(
				    rc == 0, "seed %llu op %d: client %d renames %s over %s: %s",
				    (unsigned long long)seed, op, who, p1, p2, sh_strerror(rc));
				if (a != b) {
					*fb = *fa;
					fa->exists = false;
				}
			}
			counts[2]++;
		} else { /* remove */
			rc = sh_unlink(fs[who], p1);
			SH_ASSERT_MSG(rc == (fa->exists ? 0 : -ENOENT),
				      "seed %llu op %d: client %d removes %s (%s): %d",
				      (unsigned long long)seed, op, who, p1,
				      fa->exists ? "exists" : "absent", rc);
			fa->exists = false;
			counts[3]++;
		}
	}
	if (ft.down != 0)
		node_start(&w.n[ft.down]);
	sim_heal(w.sim);
	for (int i = 0; i < CLIENTS; i++) {
		sh_fs_close(fs[i]);
		sh_client_close(c[i]);
	}
	/* a fresh client sees exactly the model */
	c[0] = world_client(&w, 4, CLIENTS + 1);
	SH_ASSERT_OK(sh_fs_open(c[0], "fs1", &fs[0]));
	for (int dir = 0; dir < CLIENTS; dir++) {
		unsigned listed = 0, want_n = 0;
		sh_dir *d;
		struct sh_dirent de;

		snprintf(p1, sizeof(p1), "/c%d", dir);
		SH_ASSERT_OK(sh_opendir(fs[0], p1, &d));
		while (sh_readdir(d, &de) == 1) {
			int k = -1;

			SH_ASSERT_MSG(sscanf(de.name, "f%d", &k) == 1 && k >= 0 && k < NAMES &&
					  m->f[dir][k].exists,
				      "seed %llu: %s/%s listed, not in the model",
				      (unsigned long long)seed, p1, de.name);
			listed++;
		}
		sh_closedir(d);
		for (int k = 0; k < NAMES; k++) {
			want_n += m->f[dir][k].exists;
			path_of(dir, k, p2, sizeof(p2));
			SH_ASSERT_MSG(check(fs[0], p2, &m->f[dir][k], buf, want) == 0,
				      "seed %llu: %s at the end", (unsigned long long)seed, p2);
		}
		SH_ASSERT_MSG(listed == want_n, "seed %llu: %s lists %u of %u names",
			      (unsigned long long)seed, p1, listed, want_n);
	}
	printf("seed %llu: %u writes, %u reads, %u renames, %u removes by %d clients; %u backends "
	       "killed, %u cut off; %.1f s simulated, trace %016llx\n",
	       (unsigned long long)seed, counts[0], counts[1], counts[2], counts[3], CLIENTS,
	       ft.crashes, ft.cuts, (double)sim_now(w.sim) / SH_NSEC_PER_SEC,
	       (unsigned long long)sim_trace_hash(w.sim));
	SH_ASSERT_MSG(ft.crashes + ft.cuts > 0, "seed %llu: no fault happened",
		      (unsigned long long)seed);
	trace = sim_trace_hash(w.sim);
	sh_fs_close(fs[0]);
	sh_client_close(c[0]);
	if (sealed) {
		/* a client without the file system key is refused, never given ciphertext */
		w.sealed = false;
		c[0] = world_client(&w, 4, CLIENTS + 2);
		SH_ASSERT_MSG(sh_fs_open(c[0], "fs1", &fs[0]) == -EACCES,
			      "seed %llu: an encrypted file system opened without its key",
			      (unsigned long long)seed);
		sh_client_close(c[0]);
	}
	world_end(&w);
	sh_free(buf);
	sh_free(want);
	sh_free(m);
	return trace;
}

static uint64_t
run_clients(uint64_t seed)
{
	return run_in(seed, false);
}

TEST(client_real_libshoal_through_crashes_and_partitions)
{
	run_clients(sh_test_seed());
}

/*
 * The same on an encrypted file system (docs/security.md): every block
 * sealed by the client that writes it and opened by whichever reads it,
 * through the same crashes and partitions; small files in stripes.
 */
TEST(client_real_encrypted_through_crashes_and_partitions)
{
	run_in(sh_test_seed(), true);
}

/*
 * Seeds that found a window, run whatever the seed given: 18 (and 1139
 * before the clients spread their configuration polls) cut a leader
 * off while a client caches a file's attributes from it, and another
 * client removes the file through the new leader (the first stat it from
 * its cache until leaders gave leases only within their own,
 * docs/metadata.md "Leader leases").
 */
TEST(client_real_seeds_that_found_a_window)
{
	static const uint64_t seeds[] = { 18, 1139 };

	for (unsigned i = 0; i < sizeof(seeds) / sizeof(seeds[0]); i++)
		run_clients(seeds[i]);
}

/*
 * One seed, one run, clients included: every packet and disk request of
 * two runs the same (a Raft barrier's unwritten bytes once made runs
 * differ with the address layout).
 */
TEST(client_sim_runs_the_same_from_one_seed)
{
	uint64_t seed = sh_test_seed(), a = run_clients(seed), b = run_clients(seed);

	SH_ASSERT_MSG(a == b, "seed %llu: traces %016llx and %016llx", (unsigned long long)seed,
		      (unsigned long long)a, (unsigned long long)b);
}

/*
 * A client that closes gives its cache leases back (MP_FORGET): a change
 * to what it cached is not held for a recall it would never answer. And a
 * change to what a live client caches waits for its recall, which it
 * answers at once.
 */
TEST(client_sim_gone_client_holds_no_change)
{
	struct world w;
	uint8_t *buf = sh_malloc(MAX_BYTES + 1), *want = sh_malloc(MAX_BYTES + 1);
	struct file f = { .exists = true, .seed = 7, .len = 5000 };
	sh_client *a, *b;
	sh_fs *fa, *fb;
	uint64_t t0, held_live, held_gone;

	world_start_opts(&w, sh_test_seed(), 4ull << 20, true);
	a = world_client(&w, 4, 1);
	b = world_client(&w, 4, 2);
	SH_ASSERT_OK(sh_fs_open(a, "fs1", &fa));
	SH_ASSERT_OK(sh_fs_open(b, "fs1", &fb));
	SH_ASSERT_OK(put(fb, "/x", f.seed, f.len, buf));
	/* a caches /x (its attributes under a lease), b rewrites it: a's recall answered */
	SH_ASSERT_OK(check(fa, "/x", &f, buf, want));
	t0 = sim_now(w.sim);
	f.seed = 8;
	SH_ASSERT_OK(put(fb, "/x", f.seed, f.len, buf));
	held_live = sim_now(w.sim) - t0;
	SH_ASSERT_OK(check(fa, "/x", &f, buf, want));
	/* a caches it again and goes; b's next rewrite waits for nobody */
	sh_fs_close(fa);
	sh_client_close(a);
	t0 = sim_now(w.sim);
	f.seed = 9;
	SH_ASSERT_OK(put(fb, "/x", f.seed, f.len, buf));
	held_gone = sim_now(w.sim) - t0;
	printf("a rewrite took %.1f ms with a live client caching the file, %.1f ms after it "
	       "left\n",
	       (double)held_live / 1e6, (double)held_gone / 1e6);
	SH_ASSERT_MSG(held_gone < 500 * SH_NSEC_PER_MSEC,
		      "seed %llu: a rewrite after the caching client left took %llu ms",
		      (unsigned long long)w.seed, (unsigned long long)(held_gone / 1000000));
	SH_ASSERT_OK(check(fb, "/x", &f, buf, want));
	sh_fs_close(fb);
	sh_client_close(b);
	world_end(&w);
	sh_free(buf);
	sh_free(want);
}

/* ---- O_APPEND from several clients ---- */

#define APPENDS	   90
#define APPEND_MAX (12u << 10)
#define REC_HDR	   12 /* 'A', client, 2 spare, seq (u32), payload length (u32) */

/* Record seq of client who: its header and payload (content of who and seq). */
static uint32_t
record(int who, uint32_t seq, uint32_t len, uint8_t *out)
{
	out[0] = 'A';
	out[1] = (uint8_t)who;
	out[2] = out[3] = 0;
	memcpy(out + 4, &seq, 4);
	memcpy(out + 8, &len, 4);
	content(((uint64_t)who << 32) | seq, len, out + REC_HDR);
	return REC_HDR + len;
}

/*
 * Three clients append to one file, each through an O_APPEND handle of its
 * own, records of 1 B to 12 KiB (small ones inline with the inode, larger
 * ones in stripes), fsync'd now and then, while backends are kill -9'd and
 * cut off: each client's appends are buffered while another's land, so
 * each is placed at an end that moved and must be placed again (a mapping
 * refused, META_AT_END), and answers lost to the faults make appends come
 * twice (tagged: done once). At the end the file is every record exactly
 * once, whole, each client's in its order: nothing overwritten, nothing
 * doubled.
 */
TEST(client_appends_from_three_clients_land_whole_once)
{
	struct world w;
	uint64_t seed = sh_test_seed();
	sh_client *c[CLIENTS];
	sh_fs *fs[CLIENTS];
	sh_file *f[CLIENTS];
	uint32_t next[CLIENTS] = { 0 }, seen[CLIENTS] = { 0 };
	uint8_t *rec = sh_malloc(REC_HDR + APPEND_MAX), *want = sh_malloc(REC_HDR + APPEND_MAX);
	uint8_t *all;
	uint64_t total = 0, at = 0;
	struct faults ft = { 0 };
	struct stat st;
	sh_file *r;

	world_start_opts(&w, seed, 4ull << 20, true);
	for (int i = 0; i < CLIENTS; i++) {
		c[i] = world_client(&w, 4, i + 1);
		SH_ASSERT_OK(sh_fs_open(c[i], "fs1", &fs[i]));
	}
	SH_ASSERT_OK(sh_open(fs[0], "/log", O_CREAT | O_WRONLY, 0644, &f[0]));
	SH_ASSERT_OK(sh_close(f[0]));
	for (int i = 0; i < CLIENTS; i++)
		SH_ASSERT_OK(sh_open(fs[i], "/log", O_WRONLY | O_APPEND, 0, &f[i]));
	for (int op = 0; op < APPENDS; op++) {
		int who = (int)(sh_rand_u64(&w.rng) % CLIENTS);
		uint64_t pick = sh_rand_u64(&w.rng);
		uint32_t len = pick % 3 ? 1 + (uint32_t)(pick >> 8) % 300
					: 1 + (uint32_t)(pick >> 8) % APPEND_MAX;
		uint32_t n = record(who, next[who], len, rec);
		long got;

		faults_turn(&w, &ft);
		got = sh_pwrite(f[who], rec, n, 0);
		SH_ASSERT_MSG(got == (long)n, "seed %llu op %d: client %d appends %u bytes: %ld",
			      (unsigned long long)seed, op, who, n, got);
		next[who]++;
		total += n;
		if (sh_rand_u64(&w.rng) % 4 == 0)
			SH_ASSERT_MSG(sh_fsync(f[who]) == 0, "seed %llu op %d: fsync",
				      (unsigned long long)seed, op);
	}
	for (int i = 0; i < CLIENTS; i++)
		SH_ASSERT_MSG(sh_close(f[i]) == 0, "seed %llu: client %d's close",
			      (unsigned long long)seed, i);
	if (ft.down != 0)
		node_start(&w.n[ft.down]);
	sim_heal(w.sim);
	/* what a fresh client reads: the records one after another */
	SH_ASSERT_OK(sh_stat(fs[0], "/log", &st));
	SH_ASSERT_MSG((uint64_t)st.st_size == total, "seed %llu: %llu bytes, %llu appended",
		      (unsigned long long)seed, (unsigned long long)st.st_size,
		      (unsigned long long)total);
	all = sh_malloc(total + 1);
	SH_ASSERT_OK(sh_open(fs[0], "/log", O_RDONLY, 0, &r));
	SH_ASSERT_EQ(sh_pread(r, all, total, 0), (long)total);
	SH_ASSERT_OK(sh_close(r));
	while (at < total) {
		uint32_t seq, len;
		int who;

		SH_ASSERT_MSG(total - at >= REC_HDR && all[at] == 'A' && all[at + 1] < CLIENTS,
			      "seed %llu: no record at %llu", (unsigned long long)seed,
			      (unsigned long long)at);
		who = all[at + 1];
		memcpy(&seq, all + at + 4, 4);
		memcpy(&len, all + at + 8, 4);
		SH_ASSERT_MSG(seq == seen[who] && len <= APPEND_MAX && total - at >= REC_HDR + len,
			      "seed %llu: at %llu client %d's record %u (want %u), %u bytes",
			      (unsigned long long)seed, (unsigned long long)at, who, seq, seen[who],
			      len);
		record(who, seq, len, want);
		if (memcmp(all + at, want, REC_HDR + len) != 0) {
			uint32_t k = 0;

			while (all[at + k] == want[k])
				k++;
			SH_ASSERT_MSG(false,
				      "seed %llu: client %d's record %u (%u bytes) at %llu: "
				      "wrong from its byte %u on",
				      (unsigned long long)seed, who, seq, REC_HDR + len,
				      (unsigned long long)at, k);
		}
		seen[who]++;
		at += REC_HDR + len;
	}
	for (int i = 0; i < CLIENTS; i++)
		SH_ASSERT_MSG(seen[i] == next[i], "seed %llu: client %d: %u of %u records",
			      (unsigned long long)seed, i, seen[i], next[i]);
	printf("seed %llu: %d appends (%llu bytes) by %d clients, each once and whole; %u "
	       "backends killed, %u cut off\n",
	       (unsigned long long)seed, APPENDS, (unsigned long long)total, CLIENTS, ft.crashes,
	       ft.cuts);
	for (int i = 0; i < CLIENTS; i++) {
		sh_fs_close(fs[i]);
		sh_client_close(c[i]);
	}
	world_end(&w);
	sh_free(all);
	sh_free(rec);
	sh_free(want);
}

/*
 * A reader's kept maps of extents (src/client/io_int.h, struct emap)
 * outlived by a cleaning: client 0 writes a file of many small stripes,
 * then overwrites most of each; client 1 reads its far half, so its
 * handle keeps maps of those extents; client 0 cleans (the live bytes
 * move to new stripes, the old ones are released: nothing the file's
 * attributes show changes); client 1 then reads the file whole through
 * the same handle. Its first pass fetches a map of the file's start and
 * a later one finds a kept map that names released stripes: that pass is
 * read again from a fresh map, and every byte is the model's.
 */
TEST(client_kept_maps_survive_a_cleaning)
{
	enum { CHUNK = 16u << 10, CHUNKS = 160, OVER = 12u << 10 };
	struct world w;
	uint64_t seed = sh_test_seed();
	size_t size = (size_t)CHUNK * CHUNKS;
	uint8_t *model = sh_malloc(size), *got = sh_malloc(size);
	struct sh_clean_stats cs = { 0 };
	sh_client *c[2];
	sh_fs *fs[2];
	sh_file *f, *r;
	long n;

	world_start_opts(&w, seed, 4ull << 20, true);
	for (int i = 0; i < 2; i++) {
		c[i] = world_client(&w, 4, i + 1);
		SH_ASSERT_OK(sh_fs_open(c[i], "fs1", &fs[i]));
	}
	content(seed, (uint32_t)size, model);
	SH_ASSERT_OK(sh_open(fs[0], "/big", O_CREAT | O_WRONLY, 0644, &f));
	for (unsigned k = 0; k < CHUNKS; k++) { /* a stripe or more each: many extents */
		SH_ASSERT_EQ(sh_pwrite(f, model + (size_t)k * CHUNK, CHUNK, (off_t)k * CHUNK),
			     (long)CHUNK);
		SH_ASSERT_OK(sh_fsync(f));
	}
	content(seed + 1, (uint32_t)size, got); /* (the new bytes) */
	for (unsigned k = 0; k < CHUNKS; k++) { /* 3/4 of each overwritten: its old stripe dies */
		size_t at = (size_t)k * CHUNK + 1000;

		memcpy(model + at, got + at, OVER);
		SH_ASSERT_EQ(sh_pwrite(f, model + at, OVER, (off_t)at), (long)OVER);
		SH_ASSERT_OK(sh_fsync(f));
	}
	SH_ASSERT_OK(sh_close(f));
	/* client 1 reads the far half: its handle keeps maps of it */
	SH_ASSERT_OK(sh_open(fs[1], "/big", O_RDONLY, 0, &r));
	for (size_t at = size / 2; at < size; at += CHUNK) {
		n = sh_pread(r, got, 4096, (off_t)at);
		SH_ASSERT_MSG(n == 4096 && memcmp(got, model + at, 4096) == 0,
			      "seed %llu: the far half at %zu before the cleaning: %ld",
			      (unsigned long long)seed, at, n);
	}
	SH_ASSERT_OK(sh_fs_clean(fs[0], 0, 0, &cs, NULL, NULL));
	SH_ASSERT_MSG(cs.stripes > 0, "seed %llu: nothing cleaned", (unsigned long long)seed);
	sim_run_for(w.sim, 5 * SH_NSEC_PER_SEC); /* the old stripes released */
	memset(got, 0, size);
	n = sh_pread(r, got, size, 0);
	SH_ASSERT_MSG(n == (long)size, "seed %llu: the whole read after the cleaning: %ld",
		      (unsigned long long)seed, n);
	SH_ASSERT_MSG(memcmp(got, model, size) == 0,
		      "seed %llu: the whole read after the cleaning differs",
		      (unsigned long long)seed);
	printf("seed %llu: %u chunks, %llu stripes cleaned (%llu bytes moved); read whole "
	       "through kept maps after\n",
	       (unsigned long long)seed, (unsigned)CHUNKS, (unsigned long long)cs.stripes,
	       (unsigned long long)cs.moved_bytes);
	SH_ASSERT_OK(sh_close(r));
	for (int i = 0; i < 2; i++) {
		sh_fs_close(fs[i]);
		sh_client_close(c[i]);
	}
	world_end(&w);
	sh_free(model);
	sh_free(got);
}

/* ---- POSIX edges through the library (the mount's posix.py checks, without FUSE) ---- */

TEST(client_times_xattr_names_and_limits_as_linux)
{
	struct world w;
	struct timespec ts[2] = { { .tv_sec = -315532800, .tv_nsec = 123 }, { .tv_sec = -1 } };
	struct stat st;
	sh_client *c;
	sh_file *f;
	sh_fs *fs;
	uint64_t ino;
	char v[8];

	world_start_opts(&w, sh_test_seed(), 4ull << 20, true);
	c = world_client(&w, 4, 1);
	SH_ASSERT_OK(sh_fs_open(c, "fs1", &fs));
	SH_ASSERT_OK(sh_mkdir(fs, "/d", 0755));
	SH_ASSERT_OK(sh_open(fs, "/d/f", O_CREAT | O_WRONLY, 0644, &f));
	SH_ASSERT_OK(sh_close(f));

	/* a time before 1970 comes back as set, and a directory set back still moves */
	SH_ASSERT_OK(sh_utimens(fs, "/d/f", ts));
	SH_ASSERT_OK(sh_stat(fs, "/d/f", &st));
	SH_ASSERT_EQ((long long)st.st_atim.tv_sec, -315532800LL);
	SH_ASSERT_EQ((long long)st.st_atim.tv_nsec, 123LL);
	SH_ASSERT_EQ((long long)st.st_mtim.tv_sec, -1LL);
	SH_ASSERT_EQ((long long)st.st_mtim.tv_nsec, 0LL);
	SH_ASSERT_OK(sh_utimens(fs, "/d", ts));
	SH_ASSERT_OK(sh_open(fs, "/d/g", O_CREAT | O_WRONLY, 0644, &f));
	SH_ASSERT_OK(sh_close(f));
	sim_run_for(w.sim, SH_NSEC_PER_SEC); /* the parent's delta applied */
	SH_ASSERT_OK(sh_stat(fs, "/d", &st));
	SH_ASSERT_MSG(st.st_mtim.tv_sec > 0,
		      "seed %llu: a create left its directory's mtime at %lld",
		      (unsigned long long)w.seed, (long long)st.st_mtim.tv_sec);

	SH_ASSERT_OK(sh_stat(fs, "/d/f", &st));
	ino = st.st_ino;

	/* O_TRUNC of a file that was there, empty: its mtime moves */
	SH_ASSERT_OK(sh_utimens(fs, "/d/f", ts));
	SH_ASSERT_OK(sh_open(fs, "/d/f", O_WRONLY | O_TRUNC, 0, &f));
	SH_ASSERT_OK(sh_close(f));
	SH_ASSERT_OK(sh_stat(fs, "/d/f", &st));
	SH_ASSERT_MSG(st.st_mtim.tv_sec > 0, "seed %llu: O_TRUNC left the mtime at %lld",
		      (unsigned long long)w.seed, (long long)st.st_mtim.tv_sec);

	/* xattr names: the namespaces Linux knows */
	SH_ASSERT_EQ(sh_setxattr(fs, "/d/f", "foo.x", "1", 1, 0), -EOPNOTSUPP);
	SH_ASSERT_EQ(sh_setxattr(fs, "/d/f", "plain", "1", 1, 0), -EOPNOTSUPP);
	SH_ASSERT_EQ(sh_setxattr(fs, "/d/f", "user.", "1", 1, 0), -EINVAL);
	SH_ASSERT_EQ(sh_getxattr(fs, "/d/f", "foo.x", v, sizeof(v)), -EOPNOTSUPP);
	SH_ASSERT_EQ(sh_removexattr(fs, "/d/f", "foo.x"), -EOPNOTSUPP);
	SH_ASSERT_OK(sh_setxattr(fs, "/d/f", "trusted.t", "1", 1, 0));
	SH_ASSERT_EQ(sh_getxattr(fs, "/d/f", "trusted.t", v, sizeof(v)), 1L);

	/* a time with nanoseconds out of range */
	memset(&st, 0, sizeof(st));
	st.st_mtim.tv_nsec = 1000000000L;
	SH_ASSERT_EQ(sh_setattr(fs, ino, &st, SH_SET_MTIME, NULL), -EINVAL);

	/* a size no write could reach, by a write or a truncate */
	SH_ASSERT_OK(sh_open(fs, "/d/f", O_WRONLY, 0, &f));
	SH_ASSERT_EQ(sh_pwrite(f, "ab", 2, (1ull << 62) - 1), (long)-EFBIG);
	SH_ASSERT_OK(sh_close(f));
	SH_ASSERT_OK(sh_truncate(fs, "/d/f", 1ull << 62));
	SH_ASSERT_EQ(sh_truncate(fs, "/d/f", (1ull << 62) + 1), -EFBIG);
	SH_ASSERT_OK(sh_stat(fs, "/d/f", &st));
	SH_ASSERT_EQ((unsigned long long)st.st_size, 1ull << 62);

	sh_fs_close(fs);
	sh_client_close(c);
	world_end(&w);
}

/* ---- statfs: a file's space comes back when it is removed ---- */

TEST(client_statfs_counts_garbage_as_room)
{
	enum { LEN = 2u << 20 };
	struct world w;
	uint8_t *buf = sh_malloc(LEN);
	struct statvfs a, b, c0;
	sh_client *c;
	sh_file *f;
	sh_fs *fs;

	world_start_opts(&w, sh_test_seed(), 4ull << 20, true);
	c = world_client(&w, 4, 1);
	SH_ASSERT_OK(sh_fs_open(c, "fs1", &fs));
	SH_ASSERT_OK(sh_statvfs(fs, &c0));
	content(w.seed, LEN, buf);
	SH_ASSERT_OK(sh_open(fs, "/big", O_CREAT | O_WRONLY, 0644, &f));
	SH_ASSERT_EQ(sh_pwrite(f, buf, LEN, 0), (long)LEN);
	SH_ASSERT_OK(sh_close(f));
	SH_ASSERT_OK(sh_statvfs(fs, &a));
	SH_ASSERT_OK(sh_unlink(fs, "/big"));
	sim_run_for(w.sim, 15 * SH_NSEC_PER_SEC); /* released (a new leader waits 10 s): garbage */
	SH_ASSERT_OK(sh_statvfs(fs, &b));
	printf("seed %llu: free 4 KiB blocks %llu empty, %llu with 2 MiB written, %llu after it "
	       "went\n",
	       (unsigned long long)w.seed, (unsigned long long)c0.f_bfree,
	       (unsigned long long)a.f_bfree, (unsigned long long)b.f_bfree);
	SH_ASSERT_MSG(c0.f_bfree >= a.f_bfree + LEN / 4096 * 3 / 4,
		      "seed %llu: 2 MiB written took %llu blocks", (unsigned long long)w.seed,
		      (unsigned long long)(c0.f_bfree - a.f_bfree));
	SH_ASSERT_MSG(b.f_bfree >= a.f_bfree + LEN / 4096 * 3 / 4,
		      "seed %llu: its removal gave back %lld blocks", (unsigned long long)w.seed,
		      (long long)(b.f_bfree - a.f_bfree));
	sh_fs_close(fs);
	sh_client_close(c);
	world_end(&w);
	sh_free(buf);
}
