// SPDX-License-Identifier: Apache-2.0
/*
 * A filesystem's quota (docs/client.md, "Quota"): the bytes its files map
 * (cfg_fs.quota; 0: none). Enforced by the writers, as CephFS does: a
 * client learns the filesystem's use from every metadata group's leader
 * (MP_USAGE, at most every QUOTA_REFRESH_NS), adds what it wrote since,
 * and refuses a write that would go past the quota with -EDQUOT. Several
 * clients writing at once can each go past by what they write between two
 * refreshes. Small files' inline bytes count too.
 */
#include <string.h>

#include "client_int.h"

#define QUOTA_REFRESH_NS (2000ull * 1000 * 1000)

/* The filesystem's use now, from each group's leader: 0, or the first error. */
static int
fetch_used(sh_fs *fs, uint64_t *used)
{
	uint16_t *first = NULL;
	struct mp_req *req = NULL;
	struct cres *res = NULL;
	unsigned n = 0;
	int rc = client_group_buckets(fs->c, &first, &n);

	if (rc == 0 && n > 0) {
		req = sh_calloc(n, sizeof(*req));
		res = sh_calloc(n, sizeof(*res));
		if (req == NULL || res == NULL)
			rc = -ENOMEM;
	}
	for (unsigned i = 0; rc == 0 && i < n; i++)
		req[i] = (struct mp_req){ .kind = MP_USAGE, .fs = fs->id, .bucket = first[i] };
	if (rc == 0)
		client_metas(fs->c, req, res, n);
	*used = 0;
	for (unsigned i = 0; rc == 0 && i < n; i++) {
		struct sh_dec d;

		sh_dec_init(&d, res[i].rep.data, res[i].rep.dlen);
		if (res[i].status < 0) {
			rc = res[i].status;
		} else {
			uint64_t mapped = sh_dec_u64(&d);

			(void)sh_dec_u64(&d); /* unique, data, phys */
			(void)sh_dec_u64(&d);
			(void)sh_dec_u64(&d);
			*used += mapped + sh_dec_u64(&d); /* and small files' inline bytes */
		}
		if (rc == 0 && sh_dec_error(&d))
			rc = -EPROTO;
	}
	for (unsigned i = 0; res != NULL && i < n; i++)
		cres_fini(&res[i]);
	sh_free(first);
	sh_free(req);
	sh_free(res);
	return rc;
}

/*
 * The quota (0: none) and the use as this client knows it: asked again
 * when older than QUOTA_REFRESH_NS. A use that cannot be learned (a group
 * in an election) leaves the last one, or none, until the next refresh:
 * writes go on meanwhile.
 */
void
client_quota_space(sh_fs *fs, uint64_t *quota, uint64_t *used)
{
	uint64_t now = env_clock(fs->c->env);
	bool fresh;

	*used = 0;
	*quota = fs->quota;
	if (*quota == 0)
		return;
	pthread_mutex_lock(&fs->qmu);
	fresh = fs->q_at != 0 && now - fs->q_at < QUOTA_REFRESH_NS;
	pthread_mutex_unlock(&fs->qmu);
	if (!fresh) {
		uint64_t u;
		int rc = fetch_used(fs, &u);

		pthread_mutex_lock(&fs->qmu);
		if (rc == 0) {
			fs->q_used = u;
			fs->q_added = 0;
		}
		fs->q_at = now;
		pthread_mutex_unlock(&fs->qmu);
	}
	pthread_mutex_lock(&fs->qmu);
	*used = fs->q_used + fs->q_added;
	pthread_mutex_unlock(&fs->qmu);
}

int
client_quota_admit(sh_fs *fs, uint64_t ino, uint64_t off, size_t len)
{
	uint64_t quota, used, add = len;
	struct stat st;

	client_quota_space(fs, &quota, &used);
	if (quota == 0)
		return 0;
	if (used + add > quota) {
		/* past it as a whole: only what lands beyond the file's end adds to the use */
		if (sh_getattr(fs, ino, &st) < 0)
			return -EDQUOT;
		add = off + len > (uint64_t)st.st_size
			  ? off + len - (off > (uint64_t)st.st_size ? off : (uint64_t)st.st_size)
			  : 0;
		if (add > 0 && used + add > quota)
			return -EDQUOT;
	}
	pthread_mutex_lock(&fs->qmu);
	fs->q_added += add;
	pthread_mutex_unlock(&fs->qmu);
	return 0;
}
