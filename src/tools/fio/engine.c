// SPDX-License-Identifier: Apache-2.0
/*
 * The Shoal fio engine (docs/fio.md): fio's I/O straight on libshoal's
 * asynchronous request API, no mount in between.
 *
 *   fio --ioengine=external:libshoal_fio.so --shoal_cluster=127.0.0.1:7400 \
 *       --shoal_fs=bench [--shoal_protection=4+2] [--shoal_frag_kb=128] ...
 *
 * Each fio job connects its own client. queue() hands an io_u to
 * sh_io_submit and says FIO_Q_QUEUED (FIO_Q_BUSY once iodepth are in
 * flight); the library's I/O threads complete them into a list that
 * getevents() drains, waiting on a condition variable for the minimum
 * fio asks. Files are "/" + fio's file name in the filesystem; a file a
 * read-only job finds missing or short is laid out first, as fio does on
 * a local file system. Built against the headers of the fio that loads it
 * (scripts/fio-src), and it checks the version again when loaded.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fio.h"
#include "optgroup.h"

#include <shoal/client.h>

#include "../../base/http.h"
#include "../../base/secret.h"

#ifndef SHF_FIO_VERSION
#error "build with -DSHF_FIO_VERSION=\"fio-X.Y\" (the fio these headers belong to)"
#endif

#define SHF_LAYOUT_CHUNK (1u << 20)
#define SHF_EXPORT	 __attribute__((visibility("default"))) /* fio dlsym()s "ioengine" */

struct shf_options {
	void *pad; /* fio: an option's off1 must not be 0 */
	char *cluster;
	char *fs;
	char *protection;
	unsigned int frag_kb;
	char *key_file;
	char *fs_key_file;
};

static struct fio_option shf_fio_options[] = {
	{
	    .name = "shoal_cluster",
	    .lname = "Shoal cluster",
	    .type = FIO_OPT_STR_STORE,
	    .off1 = offsetof(struct shf_options, cluster),
	    .help = "Admin address of any node, ip:port (several: comma-separated)",
	    .def = "127.0.0.1:7400",
	    .category = FIO_OPT_C_ENGINE,
	    .group = FIO_OPT_G_INVALID,
	},
	{
	    .name = "shoal_fs",
	    .lname = "Shoal filesystem",
	    .type = FIO_OPT_STR_STORE,
	    .off1 = offsetof(struct shf_options, fs),
	    .help = "Filesystem name",
	    .def = "fio",
	    .category = FIO_OPT_C_ENGINE,
	    .group = FIO_OPT_G_INVALID,
	},
	{
	    .name = "shoal_protection",
	    .lname = "Shoal protection",
	    .type = FIO_OPT_STR_STORE,
	    .off1 = offsetof(struct shf_options, protection),
	    .help = "Create the filesystem with this D+P (e.g. 4+2) if it does not exist",
	    .category = FIO_OPT_C_ENGINE,
	    .group = FIO_OPT_G_INVALID,
	},
	{
	    .name = "shoal_frag_kb",
	    .lname = "Shoal fragment size",
	    .type = FIO_OPT_INT,
	    .off1 = offsetof(struct shf_options, frag_kb),
	    .help = "Fragment size of written stripes, KiB (4-2048, 0: the library's)",
	    .def = "0",
	    .category = FIO_OPT_C_ENGINE,
	    .group = FIO_OPT_G_INVALID,
	},
	{
	    .name = "shoal_key_file",
	    .lname = "Shoal client key file",
	    .type = FIO_OPT_STR_STORE,
	    .off1 = offsetof(struct shf_options, key_file),
	    .help = "The client's key (sk1.ID.HEX, mode 0600; default $SHOAL_KEY, "
		    "$SHOAL_KEY_FILE): docs/security.md",
	    .category = FIO_OPT_C_ENGINE,
	    .group = FIO_OPT_G_INVALID,
	},
	{
	    .name = "shoal_fs_key_file",
	    .lname = "Shoal file system key file",
	    .type = FIO_OPT_STR_STORE,
	    .off1 = offsetof(struct shf_options, fs_key_file),
	    .help = "What opens an encrypted file system (sek1.HEX, mode 0600; default "
		    "$SHOAL_FS_KEY, $SHOAL_FS_KEY_FILE): docs/security.md",
	    .category = FIO_OPT_C_ENGINE,
	    .group = FIO_OPT_G_INVALID,
	},
	{
	    .name = NULL,
	},
};

/* One job's connection and completion list. */
struct shf_data {
	sh_client *c;
	sh_fs *fs;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct io_u **done; /* completed, not yet handed to fio */
	unsigned ndone;
	struct io_u **events; /* handed out by the last getevents */
	unsigned depth, inflight;
};

/* An io_u's request. */
struct shf_io {
	sh_io io;
	struct iovec iov;
	struct io_u *io_u;
	struct shf_data *d;
};

static void
shf_done(sh_io *io)
{
	struct shf_io *s = io->data;
	struct shf_data *d = s->d;
	struct io_u *u = s->io_u;

	u->error = io->result < 0 ? (int)-io->result : 0;
	if (io->result >= 0 && io->op != SH_IO_FSYNC)
		u->resid = u->xfer_buflen - (unsigned long long)io->result; /* short: at the end */
	pthread_mutex_lock(&d->mu);
	d->done[d->ndone++] = u;
	d->inflight--;
	pthread_cond_signal(&d->cv);
	pthread_mutex_unlock(&d->mu);
}

static enum fio_q_status
shf_queue(struct thread_data *td, struct io_u *u)
{
	struct shf_data *d = td->io_ops_data;
	struct shf_io *s = u->engine_data;
	sh_file *f = FILE_ENG_DATA(u->file);
	int rc;

	fio_ro_check(td, u);
	if (f == NULL) {
		u->error = EBADF;
		return FIO_Q_COMPLETED;
	}
	s->io = (sh_io){
		.f = f, .iov = &s->iov, .iovcnt = 1, .off = u->offset, .cb = shf_done, .data = s
	};
	s->iov = (struct iovec){ u->xfer_buf, u->xfer_buflen };
	switch (u->ddir) {
	case DDIR_READ:
		s->io.op = SH_IO_READ;
		break;
	case DDIR_WRITE:
		s->io.op = SH_IO_WRITE;
		break;
	case DDIR_SYNC:
	case DDIR_DATASYNC:
		s->io.op = SH_IO_FSYNC;
		s->io.iovcnt = 0;
		break;
	default:
		u->error = EOPNOTSUPP; /* trim: Shoal frees space when files shrink or go */
		return FIO_Q_COMPLETED;
	}
	pthread_mutex_lock(&d->mu);
	if (d->inflight >= d->depth) {
		pthread_mutex_unlock(&d->mu);
		return FIO_Q_BUSY;
	}
	d->inflight++;
	pthread_mutex_unlock(&d->mu);
	rc = sh_io_submit(&s->io);
	if (rc < 0) {
		pthread_mutex_lock(&d->mu);
		d->inflight--;
		pthread_mutex_unlock(&d->mu);
		u->error = -rc;
		return FIO_Q_COMPLETED;
	}
	return FIO_Q_QUEUED;
}

static int
shf_getevents(struct thread_data *td, unsigned int min, unsigned int max, const struct timespec *t)
{
	struct shf_data *d = td->io_ops_data;
	struct timespec until;
	unsigned n;

	if (t != NULL) {
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += t->tv_sec;
		until.tv_nsec += t->tv_nsec;
		if (until.tv_nsec >= 1000000000) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000;
		}
	}
	pthread_mutex_lock(&d->mu);
	while (d->ndone < min) {
		if (t == NULL) {
			pthread_cond_wait(&d->cv, &d->mu);
		} else if (pthread_cond_timedwait(&d->cv, &d->mu, &until) == ETIMEDOUT) {
			break;
		}
	}
	n = d->ndone < max ? d->ndone : max;
	memcpy(d->events, d->done, n * sizeof(*d->done));
	memmove(d->done, d->done + n, (d->ndone - n) * sizeof(*d->done));
	d->ndone -= n;
	pthread_mutex_unlock(&d->mu);
	return (int)n;
}

static struct io_u *
shf_event(struct thread_data *td, int event)
{
	struct shf_data *d = td->io_ops_data;

	return d->events[event];
}

static int
shf_io_u_init(struct thread_data *td, struct io_u *u)
{
	struct shf_io *s = calloc(1, sizeof(*s));

	if (s == NULL)
		return 1;
	s->io_u = u;
	s->d = td->io_ops_data;
	u->engine_data = s;
	return 0;
}

static void
shf_io_u_free(struct thread_data *td, struct io_u *u)
{
	(void)td;
	free(u->engine_data);
	u->engine_data = NULL;
}

/* The file's path in the filesystem: "/" + fio's name. */
static void
shf_path(const struct fio_file *f, char *out, size_t len)
{
	const char *n = f->file_name;

	while (*n == '/')
		n++;
	snprintf(out, len, "/%s", n);
}

/* Create the directories above path (fio's directory= option). */
static int
shf_mkparents(sh_fs *fs, const char *path)
{
	char p[PATH_MAX];

	snprintf(p, sizeof(p), "%s", path);
	for (char *s = strchr(p + 1, '/'); s != NULL; s = strchr(s + 1, '/')) {
		int rc;

		*s = '\0';
		rc = sh_mkdir(fs, p, 0755);
		*s = '/';
		if (rc < 0 && rc != -EEXIST)
			return rc;
	}
	return 0;
}

static int shf_connect(struct thread_data *td, struct shf_data *d);
static void shf_disconnect(struct shf_data *d);

/* Fill [from, to) of a file with pseudo-random bytes (a read job's file, as fio lays it out). */
static int
shf_layout(struct thread_data *td, sh_fs *fs, const char *path, uint64_t from, uint64_t to)
{
	uint64_t x = 0x9e3779b97f4a7c15ull ^ to;
	sh_file *f = NULL;
	uint64_t *buf;
	int rc;

	log_info("%s: laying out %s (%llu MiB) in Shoal\n", td->o.name, path,
		 (unsigned long long)((to - from) >> 20));
	buf = malloc(SHF_LAYOUT_CHUNK);
	if (buf == NULL)
		return -ENOMEM;
	rc = sh_open(fs, path, O_WRONLY | O_CREAT, 0644, &f);
	for (uint64_t off = from; rc >= 0 && off < to; off += SHF_LAYOUT_CHUNK) {
		size_t n = to - off < SHF_LAYOUT_CHUNK ? (size_t)(to - off) : SHF_LAYOUT_CHUNK;

		for (size_t i = 0; i < SHF_LAYOUT_CHUNK / 8; i++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			buf[i] = x;
		}
		long w = sh_pwrite(f, buf, n, off);

		rc = w < 0 ? (int)w : 0;
	}
	if (f != NULL) {
		int c = sh_close(f);

		rc = rc < 0 ? rc : c;
	}
	free(buf);
	return rc;
}

/* The size fio may use of f: what it holds, or what the job wants (laid out for a reader). */
static int
shf_file_size(struct thread_data *td, sh_fs *fs, struct fio_file *f)
{
	char path[PATH_MAX];
	uint64_t want;
	struct stat st;
	int rc;

	shf_path(f, path, sizeof(path));
	want = td->o.file_size_low ? td->o.file_size_low
				   : (td->o.nr_files ? td->o.size / td->o.nr_files : td->o.size);
	rc = sh_stat(fs, path, &st);
	if (rc < 0 && rc != -ENOENT) {
		log_err("shoal: stat %s: %s\n", path, strerror(-rc));
		return 1;
	}
	if (rc == -ENOENT)
		st.st_size = 0;
	if ((uint64_t)st.st_size < want && td_read(td) && !td_write(td)) {
		rc = shf_mkparents(fs, path);
		if (rc == 0)
			rc = shf_layout(td, fs, path, (uint64_t)st.st_size, want);
		if (rc < 0) {
			log_err("shoal: laying out %s: %s\n", path, strerror(-rc));
			return 1;
		}
		st.st_size = (off_t)want;
	}
	f->real_file_size = (uint64_t)st.st_size > want ? (uint64_t)st.st_size : want;
	fio_file_set_size_known(f);
	return 0;
}

/*
 * fio asks before the job's init when it sets files up one job after the
 * other (create_serialize, the default, in the parent process, for every
 * file): then one connection of the parent's own, kept for the next file
 * and job (a forked job never uses its parent's).
 */
static struct {
	struct shf_data d;
	pid_t pid;
	char key[512];
} shf_setup;

static void
shf_setup_close(void)
{
	if (shf_setup.pid == getpid())
		shf_disconnect(&shf_setup.d);
	memset(&shf_setup, 0, sizeof(shf_setup));
}

static __attribute__((destructor)) void
shf_unload(void)
{
	shf_setup_close();
}

static int
shf_get_file_size(struct thread_data *td, struct fio_file *f)
{
	struct shf_options *o = td->eo;
	struct shf_data *d = td->io_ops_data;
	char key[sizeof(shf_setup.key)];

	if (fio_file_size_known(f))
		return 0;
	if (d != NULL && d->fs != NULL)
		return shf_file_size(td, d->fs, f);
	snprintf(key, sizeof(key), "%s|%s|%u|%s", o->cluster, o->fs, o->frag_kb,
		 o->fs_key_file ? o->fs_key_file : "");
	if (shf_setup.pid != getpid() || strcmp(shf_setup.key, key) != 0) {
		shf_setup_close();
		if (shf_connect(td, &shf_setup.d) < 0) {
			shf_setup_close();
			return 1;
		}
		shf_setup.pid = getpid();
		memcpy(shf_setup.key, key, sizeof(key));
	}
	return shf_file_size(td, shf_setup.d.fs, f);
}

static int
shf_open_file(struct thread_data *td, struct fio_file *f)
{
	struct shf_data *d = td->io_ops_data;
	int flags = td_write(td) ? O_RDWR | O_CREAT : O_RDONLY;
	char path[PATH_MAX];
	sh_file *h = NULL;
	int rc;

	shf_path(f, path, sizeof(path));
	if (td_write(td) && (rc = shf_mkparents(d->fs, path)) < 0) {
		log_err("shoal: directories of %s: %s\n", path, strerror(-rc));
		return 1;
	}
	rc = sh_open(d->fs, path, flags, 0644, &h);
	if (rc < 0) {
		td_verror(td, -rc, "sh_open");
		return 1;
	}
	FILE_SET_ENG_DATA(f, h);
	return 0;
}

static int
shf_close_file(struct thread_data *td, struct fio_file *f)
{
	sh_file *h = FILE_ENG_DATA(f);
	int rc = 0;

	if (h != NULL)
		rc = sh_close(h);
	FILE_SET_ENG_DATA(f, NULL);
	if (rc < 0) {
		td_verror(td, -rc, "sh_close");
		return 1;
	}
	return 0;
}

static int
shf_unlink_file(struct thread_data *td, struct fio_file *f)
{
	struct shf_data *d = td->io_ops_data;
	char path[PATH_MAX];
	int rc;

	shf_path(f, path, sizeof(path));
	rc = sh_unlink(d->fs, path);
	return rc < 0 && rc != -ENOENT ? -rc : 0;
}

/* Create the filesystem (protection given and it does not exist), then wait for its root. */
static int
shf_create_fs(struct shf_data *d, const struct shf_options *o)
{
	char addr[128], body[256], *reply = NULL, token[SH_TOKEN_LEN + 1];
	struct timespec pause = { 0, 100 * 1000 * 1000 };
	int st;

	snprintf(addr, sizeof(addr), "%s", o->cluster);
	addr[strcspn(addr, ",")] = '\0';
	snprintf(body, sizeof(body), "{\"name\":\"%s\",\"protection\":\"%s\"}", o->fs,
		 o->protection);
	/* the admin token from $SHOAL_TOKEN or $SHOAL_TOKEN_FILE (docs/security.md) */
	st = sh_token_env(token);
	if (st < 0) {
		log_err("shoal: the admin token ($SHOAL_TOKEN or $SHOAL_TOKEN_FILE): %s\n",
			st == -EINVAL ? "not a token (64 hex digits)" : strerror(-st));
		return -EINVAL;
	}
	st = sh_http_call(addr, st > 0 ? token : NULL, "POST", "/v1/fs", body, &reply, 30);
	if (st != 200 && st != 409) {
		log_err("shoal: creating filesystem %s (%s) on %s: %s\n", o->fs, o->protection,
			addr, st < 0 ? strerror(-st) : (reply ? reply : "refused"));
		free(reply);
		return -EIO;
	}
	free(reply);
	for (int i = 0; i < 300; i++) {
		struct stat root;

		if (d->fs == NULL && sh_fs_open(d->c, o->fs, &d->fs) < 0) {
			nanosleep(&pause, NULL);
			continue;
		}
		if (sh_stat(d->fs, "/", &root) == 0)
			return 0;
		nanosleep(&pause, NULL);
	}
	log_err("shoal: filesystem %s never became ready\n", o->fs);
	return -ETIMEDOUT;
}

/* Connect d to the job's cluster and filesystem (creating it if shoal_protection says so). */
static int
shf_connect(struct thread_data *td, struct shf_data *d)
{
	struct shf_options *o = td->eo;
	struct sh_client_opts co = { .frag_kb = o->frag_kb,
				     .key_file = o->key_file,
				     .fs_key_file = o->fs_key_file };
	int rc;

	rc = sh_client_connect(o->cluster, &co, &d->c);
	if (rc < 0) {
		log_err("shoal: cannot reach the cluster at %s: %s\n", o->cluster, strerror(-rc));
		return rc;
	}
	rc = sh_fs_open(d->c, o->fs, &d->fs);
	if (rc == -ENOENT && o->protection != NULL && *o->protection != '\0')
		rc = shf_create_fs(d, o);
	if (rc < 0)
		log_err("shoal: filesystem %s: %s%s\n", o->fs, strerror(-rc),
			rc == -ENOENT	? " (shoal_protection=D+P creates it)"
			: rc == -EACCES ? " (it needs a key of the filesystem: shoal_key_file, "
					  "$SHOAL_KEY_FILE or $SHOAL_KEY)"
					: "");
	return rc;
}

static void
shf_disconnect(struct shf_data *d)
{
	if (d->fs)
		sh_fs_close(d->fs);
	if (d->c)
		sh_client_close(d->c);
	d->fs = NULL;
	d->c = NULL;
}

static void
shf_cleanup(struct thread_data *td)
{
	struct shf_data *d = td->io_ops_data;

	if (d == NULL)
		return;
	shf_disconnect(d);
	pthread_cond_destroy(&d->cv);
	pthread_mutex_destroy(&d->mu);
	free(d->done);
	free(d->events);
	free(d);
	td->io_ops_data = NULL;
}

static int
shf_init(struct thread_data *td)
{
	struct shf_data *d;

	if (strcmp(fio_version_string, SHF_FIO_VERSION) != 0) {
		log_err(
		    "shoal: this engine was built for %s, not %s: rebuild it (make fio-engine)\n",
		    SHF_FIO_VERSION, fio_version_string);
		return 1;
	}
	d = calloc(1, sizeof(*d));
	if (d == NULL)
		return 1;
	td->io_ops_data = d;
	pthread_mutex_init(&d->mu, NULL);
	pthread_cond_init(&d->cv, NULL);
	d->depth = td->o.iodepth ? td->o.iodepth : 1;
	d->done = calloc(d->depth, sizeof(*d->done));
	d->events = calloc(d->depth, sizeof(*d->events));
	if (d->done == NULL || d->events == NULL || shf_connect(td, d) < 0) {
		shf_cleanup(td);
		return 1;
	}
	return 0;
}

SHF_EXPORT struct ioengine_ops ioengine = {
	.name = "shoal",
	.version = FIO_IOOPS_VERSION,
	.flags = FIO_DISKLESSIO | FIO_NODISKUTIL,
	.init = shf_init,
	.cleanup = shf_cleanup,
	.queue = shf_queue,
	.getevents = shf_getevents,
	.event = shf_event,
	.io_u_init = shf_io_u_init,
	.io_u_free = shf_io_u_free,
	.open_file = shf_open_file,
	.close_file = shf_close_file,
	.unlink_file = shf_unlink_file,
	.get_file_size = shf_get_file_size,
	.options = shf_fio_options,
	.option_struct_size = sizeof(struct shf_options),
};
