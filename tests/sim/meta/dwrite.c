// SPDX-License-Identifier: Apache-2.0
/*
 * The data path in the simulator's world (world.h): stripes of 4+2
 * fragments written to the targets and mapped as a client does, read back
 * and decoded.
 */
#include "world.h"

static void
on_dreply(void *arg, int status, const struct net_msg *m)
{
	struct dreply *r = arg;

	r->done = true;
	r->status = status;
	r->len = 0;
	if (status >= 0 && m != NULL && m->len <= sizeof(r->data)) {
		memcpy(r->data, m->buf->data + m->off, m->len);
		r->len = m->len;
	}
}

static bool
all_replied(void *arg)
{
	struct dreply *r = arg;

	for (int i = 0; i < DW_D + DW_P; i++)
		if (!r[i].done)
			return false;
	return true;
}

/* One request for each of the six fragments (fragment i on node tg[i]), all at once. */
void
to_targets(struct world *w, uint16_t op, uint64_t stripe, const uint64_t *tg,
	   uint8_t (*frags)[DW_FRAG], struct dreply *r)
{
	static uint8_t hdr[DW_D + DW_P][STORE_PROTO_HDR + 8];
	struct net_call_opts o = { .timeout_ns = 2 * SH_NSEC_PER_SEC, .retries = 1 };

	for (int i = 0; i < DW_D + DW_P; i++) {
		struct store_proto_req q = {
			.target = tg[i], .stripe = stripe, .idx = (uint32_t)i, .len = DW_FRAG
		};
		struct iovec iov[2];
		char a[64];
		uint64_t peer = mplace_endpoint(tg[i]);

		addr((int)tg[i], a, sizeof(a));
		memset(&r[i], 0, sizeof(r[i]) - sizeof(r[i].data));
		/* a PUT's bytes go first, its header after them */
		iov[frags ? 1 : 0] = (struct iovec){ hdr[i], store_proto_encode(op, &q, hdr[i]) };
		if (frags)
			iov[0] = (struct iovec){ frags[i], DW_FRAG };
		if (net_peer_ensure(w->cnet, peer, a) < 0 ||
		    net_call(w->cnet, peer, op, iov, frags ? 2 : 1, &o, on_dreply, &r[i], NULL) <
			0) {
			r[i].done = true;
			r[i].status = -EIO;
		}
	}
	SH_ASSERT(sim_run_until(w->sim, all_replied, r, 30 * SH_NSEC_PER_SEC));
}

/*
 * Where a stripe's six fragments go: on nodes 1..6 when they are all up and
 * none failed the last try, else spread over the nodes up, the least used
 * first, never more than P on one (client/client.c, place_stripe_degraded:
 * one more failure never loses it). -ENOSPC when the nodes up cannot.
 */
int
dw_place(struct world *w, uint64_t stripe, uint32_t avoid, uint64_t *tg)
{
	unsigned count[N + 1] = { 0 };

	for (int i = 0; i < DW_D + DW_P; i++) {
		int best = 0;

		for (int k = 1; k <= N; k++) {
			/* the same node for fragment i when it can, then by fewest, then by hash */
			int pref = 1 + (int)((stripe + (uint64_t)i) % N);

			if (!w->n[k].up || (avoid & (1u << k)) || count[k] >= DW_P)
				continue;
			if (best == 0 || count[k] < count[best] ||
			    (count[k] == count[best] && k == pref))
				best = k;
		}
		if (best == 0)
			return -ENOSPC;
		count[best]++;
		tg[i] = (uint64_t)best;
	}
	return 0;
}

/*
 * What a client does (client/io.c, write_stripes, map_extents): a stripe of
 * 4+2 fragments to six targets, tried again elsewhere (a new stripe id)
 * while a target fails, then its extent committed in the file's bucket
 * with a request tag. Returns 0 if acknowledged, -EAGAIN if it may or may
 * not have landed (the commit failed, maybe after it applied), another
 * error if surely not (no try stored every fragment: nothing was mapped).
 */
int
write_stripe(struct world *w, uint64_t ino, uint64_t off, const uint8_t *data, uint64_t stripe)
{
	static uint8_t frags[DW_D + DW_P][DW_FRAG];
	static struct dreply r[DW_D + DW_P];
	const uint8_t *dp[DW_D];
	uint8_t *pp[DW_P];
	struct ec_code code;
	struct meta_extent e = {
		.off = off, .len = DW_STRIPE, .d = DW_D, .p = DW_P, .frag = DW_FRAG
	};
	struct meta_cmd mc = { .op = META_OP_EXTENT, .ino = ino, .tag = sh_rand_u64(&w->rng) | 1 };
	struct call *c;
	struct sh_enc enc;
	uint32_t failed = 0;
	int rc = -EIO;

	SH_ASSERT_OK(ec_code_init(&code, DW_D, DW_P));
	for (int i = 0; i < DW_D; i++) {
		memcpy(frags[i], data + i * DW_FRAG, DW_FRAG);
		dp[i] = frags[i];
	}
	for (int i = 0; i < DW_P; i++)
		pp[i] = frags[DW_D + i];
	ec_encode(&code, DW_FRAG, dp, pp);
	for (unsigned attempt = 0; attempt < 4 && rc < 0; attempt++) {
		e.stripe = stripe + ((uint64_t)attempt << 14);
		if (dw_place(w, e.stripe, failed, e.targets) < 0 &&
		    dw_place(w, e.stripe, 0, e.targets) < 0) {
			sim_run_for(w->sim, 300 * SH_NSEC_PER_MSEC); /* too few up: wait */
			continue;
		}
		to_targets(w, NET_OP_STORE_PUT, e.stripe, e.targets, frags, r);
		rc = 0;
		failed = 0;
		for (int i = 0; i < DW_D + DW_P; i++)
			if (r[i].status < 0) {
				rc = r[i].status; /* not every fragment is durable: not mapped */
				failed |= 1u << e.targets[i];
			}
	}
	if (rc < 0)
		return rc;
	sh_enc_init(&enc);
	SH_ASSERT_OK(meta_extent_list_encode(&enc, &e, 1));
	mc.data = enc.p;
	mc.dlen = enc.len;
	c = sh_calloc(1, sizeof(*c));
	rc = cmd(w, meta_ino_bucket(ino), &mc, c);
	sh_free(c);
	sh_enc_fini(&enc);
	/* an error from the commit (timeout, a restarted peer...) may hide one that landed */
	return rc == 0 ? 0 : -EAGAIN;
}

int
stripe_loc(struct world *w, uint64_t stripe, struct meta_extent *loc)
{
	struct mp_req q = { .kind = MP_STRIPE_LOC,
			    .bucket = meta_ino_bucket(stripe),
			    .ino = stripe };
	struct call *c = sh_calloc(1, sizeof(*c));
	int rc = call(w, &q, c);

	if (rc == 0)
		rc = meta_extent_decode(c->data, c->r.dlen, loc);
	sh_free(c);
	return rc;
}

/*
 * What the file holds at [off, off + DW_STRIPE): its extent from the
 * bucket, the fragments from the targets, decoded from any four. 0, or
 * -ENOENT (no extent there), or an error.
 */
unsigned dw_decoded;
uint64_t dw_data_node;

int
read_stripe(struct world *w, uint64_t ino, uint64_t off, uint8_t *out)
{
	static uint8_t frags[DW_D + DW_P][DW_FRAG];
	static struct dreply r[DW_D + DW_P];
	struct mp_req q = { .kind = MP_EXTENTS,
			    .bucket = meta_ino_bucket(ino),
			    .ino = ino,
			    .off = off,
			    .len = DW_STRIPE };
	struct call *c = sh_calloc(1, sizeof(*c));
	struct meta_extent ex[META_EXTENTS_MAX];
	uint8_t *fp[DW_D + DW_P];
	struct ec_code code;
	struct ec_decoder dec;
	uint32_t missing = 0;
	unsigned n = 0;
	int rc = call(w, &q, c);

	if (rc == 0 && c->r.dlen > 0) /* none there: an empty answer */
		rc = meta_extent_list_decode(c->data, c->r.dlen, ex, &n);
	sh_free(c);
	if (rc < 0)
		return rc;
	if (n == 0)
		return -ENOENT;
	/* one write covers one whole slot: exactly one extent, aligned */
	SH_ASSERT_EQ(n, 1u);
	SH_ASSERT(ex[0].off == off && ex[0].len == DW_STRIPE && ex[0].soff == 0);
	for (int round = 0; round < 2; round++) {
		struct meta_extent loc;

		missing = 0;
		to_targets(w, NET_OP_STORE_GET, ex[0].stripe, ex[0].targets, NULL, r);
		dw_data_node = ex[0].targets[0];
		for (int i = 0; i < DW_D + DW_P; i++) {
			fp[i] = frags[i];
			if (r[i].status >= 0 && r[i].len == DW_FRAG)
				memcpy(frags[i], r[i].data, DW_FRAG);
			else
				missing |= 1u << i;
		}
		/*
		 * a fragment missing: as a client does (client/loc.c), ask the
		 * stripe's record where its fragments are now (self-healing moves
		 * them: a stripe written around nodes down is spread out again)
		 */
		if (missing == 0 || round == 1 || stripe_loc(w, ex[0].stripe, &loc) < 0 ||
		    memcmp(loc.targets, ex[0].targets, sizeof(loc.targets)) == 0)
			break;
		memcpy(ex[0].targets, loc.targets, sizeof(loc.targets));
	}
	if ((missing & ((1u << DW_D) - 1)) != 0) {
		SH_ASSERT_OK(ec_code_init(&code, DW_D, DW_P));
		rc = ec_decoder_init(&code, &dec, missing);
		if (rc < 0)
			return -EIO; /* more than P lost */
		ec_decode(&code, &dec, DW_FRAG, fp);
		dw_decoded++;
	}
	for (int i = 0; i < DW_D; i++)
		memcpy(out + i * DW_FRAG, frags[i], DW_FRAG);
	return 0;
}

void
slot_bytes(uint64_t seed, unsigned slot, unsigned version, uint8_t *b)
{
	struct sh_rand r;

	sh_rand_seed(&r, seed * 1000003 + slot * 131 + version);
	for (unsigned k = 0; k < DW_STRIPE; k += 8) {
		uint64_t v = sh_rand_u64(&r);

		memcpy(b + k, &v, 8);
	}
}
