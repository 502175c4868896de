// SPDX-License-Identifier: Apache-2.0
/*
 * What the simulator's checkers read behind the client's back (world.h):
 * a stripe's fragments straight from its targets, where its record says
 * they are now, and the bytes a slot's version holds. The data itself is
 * written and read by real libshoal clients (world_client).
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
