// SPDX-License-Identifier: Apache-2.0
/* The cluster configuration as bytes: commands and whole configurations (config.h; fuzzed). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_int.h"

/*
 * "CFGn" (n the version, little-endian in a u32): what each adds, the
 * older ones ending before it:
 *   1  the first
 *   2  the metadata groups' table
 *   3  drive states and the heal settings
 *   4  the filesystems' versions and snapshots
 *   5  the filesystems' snapshot schedules
 *   6  the file systems' access keys
 *   7  encrypted file systems' wrapped keys
 *   8  the filesystems' restores
 *   9  the filesystems' clones
 */
#define CFG_MAGIC_BASE 0x00474643u /* "CFG" */
#define CFG_VERSION    9u
#define CFG_MAGIC      (CFG_MAGIC_BASE | (uint32_t)('0' + CFG_VERSION) << 24)

void
cfg_cmd_encode(struct sh_enc *e, const struct cfg_cmd *cmd)
{
	sh_enc_u8(e, cmd->op);
	sh_enc_u8(e, cmd->state);
	sh_enc_u8(e, cmd->d);
	sh_enc_u8(e, cmd->p);
	sh_enc_u8(e, cmd->compression);
	sh_enc_u8(e, cmd->dedup);
	sh_enc_u32(e, cmd->nbuckets);
	sh_enc_u64(e, cmd->time);
	sh_enc_u64(e, cmd->id);
	sh_enc_u64(e, cmd->size);
	sh_enc_u64(e, cmd->quota);
	sh_enc_u64(e, cmd->target);
	sh_enc_u32(e, cmd->worker);
	sh_enc_bytes(e, cmd->uuid, sizeof(cmd->uuid));
	sh_enc_str(e, cmd->name);
	sh_enc_str(e, cmd->addr);
	sh_enc_str(e, cmd->data);
	sh_enc_str(e, cmd->domain);
	sh_enc_str(e, cmd->label);
	sh_enc_str(e, cmd->path);
	sh_enc_u32(e, cmd->group);
	sh_enc_u64(e, cmd->node2);
	sh_enc_str(e, cmd->snap);
	sh_enc_str(e, cmd->by);
	sh_enc_bytes(e, cmd->key, sizeof(cmd->key));
	sh_enc_u8(e, cmd->sealed);
	sh_enc_bytes(e, cmd->wrapped, sizeof(cmd->wrapped));
}

int
cfg_cmd_decode(const uint8_t *b, size_t len, struct cfg_cmd *cmd)
{
	struct sh_dec d;
	const uint8_t *u;

	memset(cmd, 0, sizeof(*cmd));
	sh_dec_init(&d, b, len);
	cmd->op = sh_dec_u8(&d);
	cmd->state = sh_dec_u8(&d);
	cmd->d = sh_dec_u8(&d);
	cmd->p = sh_dec_u8(&d);
	cmd->compression = sh_dec_u8(&d);
	cmd->dedup = sh_dec_u8(&d);
	cmd->nbuckets = sh_dec_u32(&d);
	cmd->time = sh_dec_u64(&d);
	cmd->id = sh_dec_u64(&d);
	cmd->size = sh_dec_u64(&d);
	cmd->quota = sh_dec_u64(&d);
	cmd->target = sh_dec_u64(&d);
	cmd->worker = sh_dec_u32(&d);
	u = sh_dec_bytes(&d, sizeof(cmd->uuid));
	if (u)
		memcpy(cmd->uuid, u, sizeof(cmd->uuid));
	sh_dec_str(&d, cmd->name, sizeof(cmd->name));
	sh_dec_str(&d, cmd->addr, sizeof(cmd->addr));
	sh_dec_str(&d, cmd->data, sizeof(cmd->data));
	sh_dec_str(&d, cmd->domain, sizeof(cmd->domain));
	sh_dec_str(&d, cmd->label, sizeof(cmd->label));
	sh_dec_str(&d, cmd->path, sizeof(cmd->path));
	if (sh_dec_left(&d) > 0) { /* since metadata groups are replaced */
		cmd->group = sh_dec_u32(&d);
		cmd->node2 = sh_dec_u64(&d);
	}
	if (sh_dec_left(&d) > 0) /* since snapshots */
		sh_dec_str(&d, cmd->snap, sizeof(cmd->snap));
	if (sh_dec_left(&d) > 0) /* since the audit trail */
		sh_dec_str(&d, cmd->by, sizeof(cmd->by));
	if (sh_dec_left(&d) > 0 && (u = sh_dec_bytes(&d, sizeof(cmd->key))) != NULL)
		memcpy(cmd->key, u, sizeof(cmd->key)); /* since access keys */
	if (sh_dec_left(&d) > 0) {		       /* since encrypted filesystems */
		uint8_t v = sh_dec_u8(&d);

		if (v > 1)
			return -EBADMSG;
		cmd->sealed = v;
		if ((u = sh_dec_bytes(&d, sizeof(cmd->wrapped))) != NULL)
			memcpy(cmd->wrapped, u, sizeof(cmd->wrapped));
	}
	sh_dec_end(&d);
	if (d.err || cmd->op == 0 || cmd->op >= CFG_OP_MAX)
		return -EBADMSG;
	return 0;
}

static void
encode(struct sh_enc *e, const struct cfg *c, bool secrets)
{
	static const uint8_t none[CFG_KEY_LEN];

	sh_enc_u32(e, CFG_MAGIC);
	sh_enc_u64(e, c->epoch);
	sh_enc_u8(e, c->created);
	sh_enc_str(e, c->name);
	sh_enc_bytes(e, c->uuid, sizeof(c->uuid));
	sh_enc_u32(e, c->nbuckets);
	sh_enc_u32(e, c->replicas);
	sh_enc_u64(e, c->next_drive);
	sh_enc_u64(e, c->next_event);
	sh_enc_u32(e, c->next_fs);
	sh_enc_u32(e, c->nnodes);
	for (uint32_t i = 0; i < c->nnodes; i++) {
		const struct cfg_node *n = &c->nodes[i];

		sh_enc_u64(e, n->id);
		sh_enc_str(e, n->mgmt);
		sh_enc_str(e, n->data);
		sh_enc_str(e, n->domain);
		sh_enc_u8(e, n->state);
		sh_enc_u64(e, n->since);
		sh_enc_u8(e, n->nnets);
		for (unsigned k = 0; k < n->nnets; k++) {
			sh_enc_str(e, n->nets[k].addr);
			sh_enc_str(e, n->nets[k].label);
		}
	}
	sh_enc_u32(e, c->ndrives);
	for (uint32_t i = 0; i < c->ndrives; i++) {
		sh_enc_u64(e, c->drives[i].id);
		sh_enc_u64(e, c->drives[i].node);
		sh_enc_u32(e, c->drives[i].worker);
		sh_enc_str(e, c->drives[i].path);
		sh_enc_u64(e, c->drives[i].capacity);
	}
	sh_enc_u32(e, c->nfs);
	for (uint32_t i = 0; i < c->nfs; i++) {
		const struct cfg_fs *f = &c->fs[i];

		sh_enc_str(e, f->name);
		sh_enc_u32(e, f->id);
		sh_enc_u8(e, f->d);
		sh_enc_u8(e, f->p);
		sh_enc_u8(e, f->compression);
		sh_enc_u8(e, f->dedup);
		sh_enc_u64(e, f->quota);
		sh_enc_u64(e, f->created);
	}
	sh_enc_u32(e, c->nevents);
	for (uint32_t i = c->nevents; i > 0; i--) { /* oldest first */
		const struct cfg_event *ev = cfg_event_at(c, i - 1);

		sh_enc_u64(e, ev->seq);
		sh_enc_u64(e, ev->time);
		sh_enc_u64(e, ev->node);
		sh_enc_str(e, ev->text);
	}
	for (size_t i = 0; i < (size_t)c->nbuckets * c->replicas; i++)
		sh_enc_u64(e, c->buckets[i]);
	/* the fixed groups (a "CFG1" configuration ends before them) */
	sh_enc_u32(e, c->bgroup ? c->ngroups : 0);
	if (c->bgroup != NULL) {
		for (uint32_t b = 0; b < c->nbuckets; b++)
			sh_enc_u16(e, c->bgroup[b]);
		for (uint32_t g = 0; g < c->ngroups; g++)
			sh_enc_u32(e, c->gepoch[g]);
	}
	/* the drives' states and the heal settings (a "CFG2" configuration ends before them) */
	for (uint32_t i = 0; i < c->ndrives; i++) {
		sh_enc_u8(e, c->drives[i].state);
		sh_enc_u64(e, c->drives[i].since);
	}
	sh_enc_u32(e, c->rebuild_delay_s);
	sh_enc_u8(e, c->rebuild_share);
	sh_enc_u32(e, c->scrub_rate);
	sh_enc_u32(e, c->scrub_interval);
	/* the filesystems' versions and the snapshots (a "CFG3" configuration ends before them) */
	for (uint32_t i = 0; i < c->nfs; i++)
		sh_enc_u64(e, c->fs[i].version);
	sh_enc_u32(e, c->nsnaps);
	for (uint32_t i = 0; i < c->nsnaps; i++) {
		const struct cfg_snap *s = &c->snaps[i];

		sh_enc_str(e, s->name);
		sh_enc_u32(e, s->fs);
		sh_enc_u64(e, s->version);
		sh_enc_u8(e, s->state);
		sh_enc_u64(e, s->created);
	}
	/* the filesystems' snapshot schedules (a "CFG4" configuration ends before them) */
	for (uint32_t i = 0; i < c->nfs; i++) {
		sh_enc_u32(e, c->fs[i].snap_every_s);
		sh_enc_u32(e, c->fs[i].snap_keep);
	}
	/* the access keys (a "CFG5" configuration ends before them) */
	sh_enc_u32(e, c->nkeys);
	for (uint32_t i = 0; i < c->nkeys; i++) {
		const struct cfg_key *k = &c->keys[i];

		sh_enc_u32(e, k->id);
		sh_enc_u32(e, k->fs);
		sh_enc_u8(e, k->access);
		sh_enc_u8(e, k->revoked);
		sh_enc_u64(e, k->created);
		sh_enc_u64(e, k->revoked_at);
		sh_enc_bytes(e, secrets ? k->secret : none, CFG_KEY_LEN);
	}
	/* encrypted filesystems (a "CFG6" configuration ends before them): their wrapped keys
	 * are no secret (only a key the nodes never hold opens them), clients need them */
	for (uint32_t i = 0; i < c->nfs; i++) {
		sh_enc_u8(e, c->fs[i].sealed);
		if (c->fs[i].sealed)
			sh_enc_bytes(e, c->fs[i].wrapped, CFG_WRAP_LEN);
	}
	/* the filesystems' restores (a "CFG7" configuration ends before them) */
	for (uint32_t i = 0; i < c->nfs; i++) {
		sh_enc_u32(e, c->fs[i].restore_epoch);
		sh_enc_u8(e, c->fs[i].restore_phase);
		sh_enc_u64(e, c->fs[i].restore_ver);
	}
	/* the filesystems' clones (a "CFG8" configuration ends before them) */
	for (uint32_t i = 0; i < c->nfs; i++) {
		sh_enc_u32(e, c->fs[i].origin);
		sh_enc_u16(e, c->fs[i].branch);
		sh_enc_u16(e, c->fs[i].branches);
		sh_enc_u64(e, c->fs[i].base);
		sh_enc_u8(e, c->fs[i].clone_state);
	}
}

void
cfg_encode(struct sh_enc *e, const struct cfg *c)
{
	encode(e, c, true);
}

void
cfg_encode_public(struct sh_enc *e, const struct cfg *c)
{
	encode(e, c, false);
}

/* The fixed groups: each bucket's (every group has one, and its buckets one replica set). */
static int
decode_groups(struct sh_dec *d, struct cfg *t)
{
	uint32_t ng = sh_dec_u32(d), *first;
	int rc = 0;

	if (ng == 0)
		return 0;
	if (t->nbuckets == 0 || t->replicas == 0 || ng > t->nbuckets ||
	    sh_dec_left(d) < (size_t)t->nbuckets * 2 + (size_t)ng * 4)
		return -EBADMSG;
	t->bgroup = sh_malloc(t->nbuckets * sizeof(*t->bgroup));
	t->gepoch = sh_malloc(ng * sizeof(*t->gepoch));
	first = sh_malloc(ng * sizeof(*first));
	if (t->bgroup == NULL || t->gepoch == NULL || first == NULL) {
		sh_free(first);
		return -ENOMEM;
	}
	t->ngroups = ng;
	memset(first, 0xff, ng * sizeof(*first));
	for (uint32_t b = 0; b < t->nbuckets && rc == 0; b++) {
		uint16_t g = sh_dec_u16(d);

		t->bgroup[b] = g;
		if (g >= ng) {
			rc = -EBADMSG;
		} else if (first[g] == UINT32_MAX) {
			first[g] = b;
		} else {
			for (uint32_t k = 0; k < t->replicas && rc == 0; k++)
				if (!cfg_in_set(cfg_bucket(t, first[g]), t->replicas,
						cfg_bucket(t, b)[k]))
					rc = -EBADMSG;
		}
	}
	for (uint32_t g = 0; g < ng && rc == 0; g++) {
		t->gepoch[g] = sh_dec_u32(d);
		if (first[g] == UINT32_MAX)
			rc = -EBADMSG;
	}
	sh_free(first);
	return rc;
}

/* The filesystems' versions and the snapshots ("CFG4"). */
static int
decode_snaps(struct sh_dec *d, struct cfg *t)
{
	for (uint32_t i = 0; i < t->nfs; i++) {
		t->fs[i].version = sh_dec_u64(d);
		if (t->fs[i].version == 0)
			return -EBADMSG;
	}
	t->nsnaps = sh_dec_u32(d);
	if (t->nsnaps > CFG_SNAPS_MAX)
		return -EBADMSG;
	for (uint32_t i = 0; i < t->nsnaps && !d->err; i++) {
		struct cfg_snap *s = &t->snaps[i];

		sh_dec_str(d, s->name, sizeof(s->name));
		s->fs = sh_dec_u32(d);
		s->version = sh_dec_u64(d);
		s->state = sh_dec_u8(d);
		s->created = sh_dec_u64(d);
		if (s->state > CFG_SNAP_DELETING)
			return -EBADMSG;
	}
	return d->err ? -EBADMSG : 0;
}

/* The filesystems' snapshot schedules ("CFG5"): off (0, 0), or every 1 s..30 days, keep 1..max. */
static int
decode_schedules(struct sh_dec *d, struct cfg *t)
{
	for (uint32_t i = 0; i < t->nfs; i++) {
		struct cfg_fs *f = &t->fs[i];

		f->snap_every_s = sh_dec_u32(d);
		f->snap_keep = sh_dec_u32(d);
		if (f->snap_every_s > CFG_SNAP_EVERY_MAX ||
		    (f->snap_every_s == 0 && f->snap_keep != 0) ||
		    (f->snap_every_s != 0 && (f->snap_keep < 1 || f->snap_keep > CFG_FS_SNAPS_MAX)))
			return -EBADMSG;
	}
	return d->err ? -EBADMSG : 0;
}

/* Which filesystems are encrypted, and their wrapped keys ("CFG7"). */
static int
decode_sealed(struct sh_dec *d, struct cfg *t)
{
	const uint8_t *u;

	for (uint32_t i = 0; i < t->nfs && !d->err; i++) {
		struct cfg_fs *f = &t->fs[i];
		uint8_t v = sh_dec_u8(d);

		if (v > 1)
			return -EBADMSG;
		f->sealed = v;
		if (f->sealed && (u = sh_dec_bytes(d, CFG_WRAP_LEN)) != NULL)
			memcpy(f->wrapped, u, CFG_WRAP_LEN);
	}
	return d->err ? -EBADMSG : 0;
}

/* The filesystems' restores ("CFG8"): a phase, and a version while under way. */
static int
decode_restores(struct sh_dec *d, struct cfg *t)
{
	for (uint32_t i = 0; i < t->nfs; i++) {
		struct cfg_fs *f = &t->fs[i];

		f->restore_epoch = sh_dec_u32(d);
		f->restore_phase = sh_dec_u8(d);
		f->restore_ver = sh_dec_u64(d);
		if (f->restore_phase > CFG_RESTORE_REVERTING ||
		    (f->restore_phase != CFG_RESTORE_NONE) != (f->restore_ver != 0) ||
		    (f->restore_phase != CFG_RESTORE_NONE && f->restore_epoch == 0))
			return -EBADMSG;
	}
	return d->err ? -EBADMSG : 0;
}

/*
 * The filesystems' clones ("CFG9"): a clone names an origin there that is
 * no clone, a branch it gave, a base and a state; anything else none.
 */
static int
decode_clones(struct sh_dec *d, struct cfg *t)
{
	for (uint32_t i = 0; i < t->nfs; i++) {
		struct cfg_fs *f = &t->fs[i];

		f->origin = sh_dec_u32(d);
		f->branch = sh_dec_u16(d);
		f->branches = sh_dec_u16(d);
		f->base = sh_dec_u64(d);
		f->clone_state = sh_dec_u8(d);
	}
	if (d->err)
		return -EBADMSG;
	for (uint32_t i = 0; i < t->nfs; i++) {
		const struct cfg_fs *f = &t->fs[i], *o = cfg_fs_by_id(t, f->origin);

		if (f->origin == 0
			? f->branch || f->base || f->clone_state
			: o == NULL || o->origin != 0 || f->branch == 0 ||
			      f->branch > o->branches || f->base == 0 || f->base >= o->version ||
			      f->branches != 0 || f->clone_state < CFG_CLONE_CREATING ||
			      f->clone_state > CFG_CLONE_DELETING)
			return -EBADMSG;
	}
	return 0;
}

/* The access keys ("CFG6"): ids from CFG_KEY_FIRST, each once, read-only or read-write. */
static int
decode_keys(struct sh_dec *d, struct cfg *t)
{
	const uint8_t *u;

	t->nkeys = sh_dec_u32(d);
	if (t->nkeys > CFG_KEYS_MAX)
		return -EBADMSG;
	for (uint32_t i = 0; i < t->nkeys && !d->err; i++) {
		struct cfg_key *k = &t->keys[i];

		k->id = sh_dec_u32(d);
		k->fs = sh_dec_u32(d);
		k->access = sh_dec_u8(d);
		k->revoked = sh_dec_u8(d) != 0;
		k->created = sh_dec_u64(d);
		k->revoked_at = sh_dec_u64(d);
		if ((u = sh_dec_bytes(d, CFG_KEY_LEN)) != NULL)
			memcpy(k->secret, u, CFG_KEY_LEN);
		if (k->id < CFG_KEY_FIRST ||
		    (k->access != CFG_KEY_READ && k->access != CFG_KEY_WRITE))
			return -EBADMSG;
		for (uint32_t j = 0; j < i; j++)
			if (t->keys[j].id == k->id)
				return -EBADMSG;
	}
	return d->err ? -EBADMSG : 0;
}

int
cfg_decode(const uint8_t *b, size_t len, struct cfg *c)
{
	struct sh_dec d;
	struct cfg *t = cfg_new();
	const uint8_t *u;
	uint32_t nev, magic, v;
	size_t nb;

	if (t == NULL)
		return -ENOMEM;
	sh_dec_init(&d, b, len);
	magic = sh_dec_u32(&d);
	v = (magic >> 24) - '0';
	if ((magic & 0xffffffu) != CFG_MAGIC_BASE || v < 1 || v > CFG_VERSION)
		goto bad;
	t->epoch = sh_dec_u64(&d);
	t->created = sh_dec_u8(&d) != 0;
	sh_dec_str(&d, t->name, sizeof(t->name));
	u = sh_dec_bytes(&d, sizeof(t->uuid));
	if (u)
		memcpy(t->uuid, u, sizeof(t->uuid));
	t->nbuckets = sh_dec_u32(&d);
	t->replicas = sh_dec_u32(&d);
	t->next_drive = sh_dec_u64(&d);
	t->next_event = sh_dec_u64(&d);
	t->next_fs = sh_dec_u32(&d);
	t->nnodes = sh_dec_u32(&d);
	if (t->nnodes > CFG_NODES_MAX || t->nbuckets > CFG_BUCKETS_MAX ||
	    t->replicas > CFG_REPLICAS_MAX)
		goto bad;
	for (uint32_t i = 0; i < t->nnodes && !d.err; i++) {
		struct cfg_node *n = &t->nodes[i];

		n->id = sh_dec_u64(&d);
		sh_dec_str(&d, n->mgmt, sizeof(n->mgmt));
		sh_dec_str(&d, n->data, sizeof(n->data));
		sh_dec_str(&d, n->domain, sizeof(n->domain));
		n->state = sh_dec_u8(&d);
		n->since = sh_dec_u64(&d);
		n->nnets = sh_dec_u8(&d);
		if (n->nnets > CFG_NETS_MAX)
			goto bad;
		for (unsigned k = 0; k < n->nnets; k++) {
			sh_dec_str(&d, n->nets[k].addr, sizeof(n->nets[k].addr));
			sh_dec_str(&d, n->nets[k].label, sizeof(n->nets[k].label));
		}
	}
	t->ndrives = sh_dec_u32(&d);
	if (t->ndrives > CFG_DRIVES_MAX)
		goto bad;
	for (uint32_t i = 0; i < t->ndrives && !d.err; i++) {
		t->drives[i].id = sh_dec_u64(&d);
		t->drives[i].node = sh_dec_u64(&d);
		t->drives[i].worker = sh_dec_u32(&d);
		sh_dec_str(&d, t->drives[i].path, sizeof(t->drives[i].path));
		t->drives[i].capacity = sh_dec_u64(&d);
	}
	t->nfs = sh_dec_u32(&d);
	if (t->nfs > CFG_FS_MAX)
		goto bad;
	for (uint32_t i = 0; i < t->nfs && !d.err; i++) {
		struct cfg_fs *f = &t->fs[i];

		sh_dec_str(&d, f->name, sizeof(f->name));
		f->id = sh_dec_u32(&d);
		f->d = sh_dec_u8(&d);
		f->p = sh_dec_u8(&d);
		f->compression = sh_dec_u8(&d);
		f->dedup = sh_dec_u8(&d);
		f->quota = sh_dec_u64(&d);
		f->created = sh_dec_u64(&d);
		f->version = 1; /* before snapshots ("CFG3" and older): every one at 1 */
		f->snap_every_s = 0;
		f->snap_keep = 0;
	}
	nev = sh_dec_u32(&d);
	if (nev > CFG_EVENTS_MAX || nev > t->next_event)
		goto bad;
	/* events come oldest first: slot them where the ring keeps them */
	for (uint32_t i = 0; i < nev && !d.err; i++) {
		struct cfg_event *ev = &t->events[(t->next_event - nev + i) % CFG_EVENTS_MAX];

		ev->seq = sh_dec_u64(&d);
		ev->time = sh_dec_u64(&d);
		ev->node = sh_dec_u64(&d);
		sh_dec_str(&d, ev->text, sizeof(ev->text));
	}
	t->nevents = nev;
	nb = (size_t)t->nbuckets * t->replicas;
	if (nb > sh_dec_left(&d) / 8)
		goto bad;
	if (nb) {
		t->buckets = sh_malloc(nb * sizeof(uint64_t));
		if (t->buckets == NULL) {
			cfg_free(t);
			return -ENOMEM;
		}
		for (size_t i = 0; i < nb; i++)
			t->buckets[i] = sh_dec_u64(&d);
	}
	if (v >= 2 && decode_groups(&d, t) < 0)
		goto bad;
	if (v >= 3) {
		for (uint32_t i = 0; i < t->ndrives; i++) {
			t->drives[i].state = sh_dec_u8(&d);
			t->drives[i].since = sh_dec_u64(&d);
			if (t->drives[i].state > CFG_DRIVE_DRAINING)
				goto bad;
		}
		t->rebuild_delay_s = sh_dec_u32(&d);
		t->rebuild_share = sh_dec_u8(&d);
		t->scrub_rate = sh_dec_u32(&d);
		t->scrub_interval = sh_dec_u32(&d);
		if (t->rebuild_share == 0 || t->rebuild_share > 100)
			goto bad;
	}
	if (v >= 4 && decode_snaps(&d, t) < 0)
		goto bad;
	/* before schedules ("CFG4" and older): none */
	if (v >= 5 && decode_schedules(&d, t) < 0)
		goto bad;
	/* before access keys ("CFG5" and older): none */
	if (v >= 6 && decode_keys(&d, t) < 0)
		goto bad;
	/* before encrypted filesystems ("CFG6" and older): none */
	if (v >= 7 && decode_sealed(&d, t) < 0)
		goto bad;
	/* before restores ("CFG7" and older): none */
	if (v >= 8 && decode_restores(&d, t) < 0)
		goto bad;
	/* before clones ("CFG8" and older): none */
	if (v >= 9 && decode_clones(&d, t) < 0)
		goto bad;
	sh_dec_end(&d);
	if (d.err)
		goto bad;
	sh_free(c->buckets);
	sh_free(c->bgroup);
	sh_free(c->gepoch);
	memcpy(c, t, sizeof(*c));
	sh_free(t);
	return 0;
bad:
	cfg_free(t);
	return -EBADMSG;
}
