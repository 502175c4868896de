// SPDX-License-Identifier: Apache-2.0
/*
 * libshoal: what the client's copy of the configuration says (client_int.h):
 * where a target is, where a stripe goes, a filesystem's settings and keys,
 * its buckets' groups. Each reads c->view under c->mu; client.c follows it.
 */
#include <stdio.h>
#include <string.h>

#include "../data/place.h"
#include "client_int.h"

SH_LOG_FACILITY("client");

int
client_target(sh_client *c, uint64_t target, uint64_t *peer, char *addr)
{
	int rc;

	pthread_mutex_lock(&c->mu);
	rc = mplace_target(c->view, target, peer, addr);
	pthread_mutex_unlock(&c->mu);
	return rc;
}

bool
client_target_lost(sh_client *c, uint64_t target)
{
	bool lost;

	pthread_mutex_lock(&c->mu);
	lost = cfg_target_state(c->view, target, env_realtime(c->env)) == CFG_TGT_LOST;
	pthread_mutex_unlock(&c->mu);
	return lost;
}

unsigned
client_targets(sh_client *c, uint64_t *ids, unsigned max)
{
	unsigned n;

	pthread_mutex_lock(&c->mu);
	n = c->view->ndrives;
	for (unsigned i = 0; i < n && i < max; i++)
		ids[i] = c->view->drives[i].id;
	pthread_mutex_unlock(&c->mu);
	return n;
}

int
client_place(sh_client *c, uint64_t stripe, unsigned n, unsigned p, const uint64_t *avoid,
	     unsigned navoid, bool degrade, uint64_t *out)
{
	struct place_target *t;
	unsigned nt;
	int rc;

	pthread_mutex_lock(&c->mu);
	rc = place_targets(c->view, &t, &nt);
	pthread_mutex_unlock(&c->mu);
	if (rc < 0)
		return rc;
	for (unsigned i = 0; i < nt; i++)
		for (unsigned k = 0; k < navoid; k++)
			if (t[i].id == avoid[k])
				t[i].weight = 0;
	rc = place_stripe(t, nt, stripe, n, out);
	if (rc == -ENOSPC && degrade) {
		/* failure domains are down: write anyway, with less protection until rebuilt */
		unsigned shared;

		rc = place_stripe_degraded(t, nt, stripe, n, p, out, &shared);
		if (rc == 0 && !c->warned_degraded) {
			c->warned_degraded = true;
			sh_log_warn("too few failure domains up: stripes are written with %u "
				    "fragment(s) sharing a domain (less protection until rebuilt)",
				    shared);
		}
	}
	sh_free(t);
	return rc;
}

int
client_fs_settings(sh_client *c, uint32_t id, unsigned *d, unsigned *p, unsigned *comp, bool *dedup,
		   uint64_t *quota)
{
	const struct cfg_fs *f;

	pthread_mutex_lock(&c->mu);
	f = cfg_fs_by_id(c->view, id);
	if (f) {
		*d = f->d;
		*p = f->p;
		*comp = f->compression;
		*dedup = f->dedup;
		*quota = f->quota; /* set at creation, never changed */
	}
	pthread_mutex_unlock(&c->mu);
	return f ? 0 : -ENOENT;
}

int
client_fs_keys(sh_client *c, uint32_t id, const char *name, struct seal_keys **out)
{
	uint8_t wrapped[CFG_WRAP_LEN], kek[SEAL_KEY_LEN], master[SEAL_KEY_LEN];
	const struct cfg_fs *f;
	bool sealed = false;
	int rc;

	_Static_assert(CFG_WRAP_LEN == SEAL_WRAPPED_LEN, "the configuration keeps a wrapped key");
	*out = NULL;
	pthread_mutex_lock(&c->mu);
	f = cfg_fs_by_id(c->view, id);
	if (f && (sealed = f->sealed))
		memcpy(wrapped, f->wrapped, sizeof(wrapped));
	pthread_mutex_unlock(&c->mu);
	if (f == NULL)
		return -ENOENT;
	if (!sealed)
		return 0;
	rc = c->fs_key_file || c->fs_key_env ? seal_kek_find(c->fs_key_file, kek) : -ENOKEY;
	if (rc == 0) {
		rc = seal_unwrap(kek, wrapped, master);
		if (rc == -EACCES)
			sh_log_error("filesystem %s: the file system key given does not open it",
				     name);
		else if (rc < 0)
			sh_log_error("filesystem %s: unwrapping its key: %s", name,
				     sh_strerror(rc));
	} else {
		sh_log_error("filesystem %s is encrypted: %s", name,
			     rc == -ENOKEY   ? "no file system key given (--fs-key-file, "
					       "$SHOAL_FS_KEY_FILE or $SHOAL_FS_KEY)"
			     : rc == -EINVAL ? "the file system key is not one (sek1. and 64 hex "
					       "digits)"
			     : rc == -EPERM  ? "others may read the file system key's file "
					       "(chmod 600 it)"
					     : sh_strerror(rc));
	}
	explicit_bzero(kek, sizeof(kek));
	if (rc == 0 && (*out = sh_malloc(sizeof(**out))) == NULL)
		rc = -ENOMEM;
	if (rc == 0 && (rc = seal_keys_init(*out, master)) < 0) {
		sh_log_error("filesystem %s: deriving its keys: %s", name, sh_strerror(rc));
		seal_keys_wipe(*out);
		sh_free(*out);
		*out = NULL;
	}
	explicit_bzero(master, sizeof(master));
	/* the key's faults are the caller's (EACCES); the machine's are not */
	return rc == 0 || rc == -ENOMEM || rc == -EIO ? rc : -EACCES;
}

int
client_group_buckets(sh_client *c, uint16_t **out, unsigned *n)
{
	uint32_t *first = NULL, ng = 0;
	uint16_t *b = NULL;
	int rc;

	pthread_mutex_lock(&c->mu);
	rc = cfg_group_firsts(c->view, &first, &ng);
	pthread_mutex_unlock(&c->mu);
	if (rc == 0 && (b = sh_calloc(ng ? ng : 1, sizeof(*b))) == NULL)
		rc = -ENOMEM;
	for (uint32_t g = 0; rc == 0 && g < ng; g++)
		b[g] = (uint16_t)first[g];
	sh_free(first);
	*out = rc == 0 ? b : NULL;
	*n = rc == 0 ? ng : 0;
	return rc;
}

int
client_bucket_groups(sh_client *c, uint16_t **out, unsigned *n)
{
	uint16_t *gof;
	uint32_t ng = 0;
	int rc;

	pthread_mutex_lock(&c->mu);
	*n = c->view ? c->view->nbuckets : 0;
	gof = sh_calloc(*n ? *n : 1, sizeof(*gof));
	rc = gof == NULL ? -ENOMEM : c->view ? cfg_groups(c->view, gof, &ng) : -ENOENT;
	pthread_mutex_unlock(&c->mu);
	if (rc < 0) {
		sh_free(gof);
		gof = NULL;
		*n = 0;
	}
	*out = gof;
	return rc;
}

int
client_fs_lookup(sh_client *c, const char *name, uint32_t *id, uint32_t *nbuckets)
{
	const struct cfg_fs *f;

	pthread_mutex_lock(&c->mu);
	f = cfg_fs_find(c->view, name);
	*id = f ? f->id : 0;
	*nbuckets = c->view->nbuckets;
	pthread_mutex_unlock(&c->mu);
	return f ? 0 : -ENOENT;
}

uint64_t
client_capacity(sh_client *c)
{
	uint64_t cap = 0;

	pthread_mutex_lock(&c->mu);
	for (uint32_t i = 0; i < c->view->ndrives; i++)
		cap += c->view->drives[i].capacity;
	pthread_mutex_unlock(&c->mu);
	return cap;
}

int
client_snap_lookup(sh_client *c, uint32_t id, const char *snap, uint64_t *ver)
{
	const struct cfg_snap *sn;
	int rc;

	pthread_mutex_lock(&c->mu);
	sn = cfg_snap_find(c->view, id, snap);
	rc = sn == NULL			      ? -ENOENT
	     : sn->state == CFG_SNAP_CREATING ? -EAGAIN
	     : sn->state == CFG_SNAP_DELETING ? -ESTALE
					      : 0;
	*ver = sn != NULL ? sn->version : 0;
	pthread_mutex_unlock(&c->mu);
	return rc;
}

int
sh_fs_snapshots(sh_client *c, const char *fs, char (*names)[64], unsigned max)
{
	const struct cfg_fs *f;
	int n = 0;

	_Static_assert(CFG_NAME_MAX <= 64, "a snapshot's name fits");
	pthread_mutex_lock(&c->mu);
	f = cfg_fs_find(c->view, fs);
	for (uint32_t i = 0; f != NULL && i < c->view->nsnaps; i++) {
		const struct cfg_snap *sn = &c->view->snaps[i];

		if (sn->fs != f->id || sn->state != CFG_SNAP_READY)
			continue;
		if ((unsigned)n < max)
			snprintf(names[n], 64, "%s", sn->name);
		n++;
	}
	pthread_mutex_unlock(&c->mu);
	return f != NULL ? n : -ENOENT;
}
