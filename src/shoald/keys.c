// SPDX-License-Identifier: Apache-2.0
/*
 * The file system access keys every endpoint of the node checks clients'
 * datagrams with (net_config.client_key, docs/security.md "Clients' keys"):
 * a copy of the configuration's, taken on the management loop, read on the
 * workers' threads.
 */
#include <string.h>

#include "shoald.h"

SH_LOG_FACILITY("shoald.keys");

void
shoald_keys_init(struct shoald_keys *t)
{
	memset(t, 0, sizeof(*t));
	pthread_mutex_init(&t->mu, NULL);
}

void
shoald_keys_fini(struct shoald_keys *t)
{
	explicit_bzero(t->k, sizeof(t->k));
	pthread_mutex_destroy(&t->mu);
}

int
shoald_client_key(void *arg, uint32_t id, uint8_t key[NET_AUTH_KEY_LEN], struct net_cred *cred)
{
	struct shoald_keys *t = arg;
	int rc = -ENOENT;

	pthread_mutex_lock(&t->mu);
	for (uint32_t i = 0; i < t->n; i++) {
		const struct cfg_key *k = &t->k[i];

		if (k->id != id)
			continue;
		memcpy(key, k->secret, NET_AUTH_KEY_LEN);
		/* a revoked key still proves its datagrams: its clients are told EACCES */
		*cred = (struct net_cred){ .key_id = id,
					   .fs = k->fs,
					   .access = k->revoked ? NET_ACCESS_NONE : k->access };
		rc = 0;
		break;
	}
	pthread_mutex_unlock(&t->mu);
	return rc;
}

void
shoald_keys_follow(struct shoald *d, const struct cfg *c)
{
	struct shoald_keys *t = &d->keys;
	bool same;

	pthread_mutex_lock(&t->mu);
	same = t->n == c->nkeys && memcmp(t->k, c->keys, c->nkeys * sizeof(c->keys[0])) == 0;
	if (!same) {
		explicit_bzero(t->k, sizeof(t->k));
		memcpy(t->k, c->keys, c->nkeys * sizeof(c->keys[0]));
		t->n = c->nkeys;
	}
	pthread_mutex_unlock(&t->mu);
	if (same)
		return;
	/* every client's next datagram asks again: a revoked key is refused from then on */
	net_client_keys_changed(d->net);
	for (unsigned i = 0; i < d->o.workers; i++)
		if (d->workers[i].net != NULL)
			net_client_keys_changed(d->workers[i].net);
	sh_log_debug("%u access keys", c->nkeys);
}
