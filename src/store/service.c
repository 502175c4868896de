// SPDX-License-Identifier: Apache-2.0
/*
 * The drive-target RPC handlers: put, get, release, stat on the targets
 * this node serves. Each request is decoded (store_proto.c), routed to its
 * target, and answered when the store calls back: a put only once the
 * fragment is durable.
 */
#include <errno.h>
#include <string.h>

#include "../net/net.h"
#include "service.h"
#include "store_int.h"
#include "store_proto.h"

SH_LOG_FACILITY("store.svc");

#define SVC_MAX_TARGETS 64

struct store_svc {
	struct net *net;
	struct store *targets[SVC_MAX_TARGETS];
	unsigned ntargets;
};

struct svc_op {
	struct net_req *req;
	uint8_t *buf; /* GET */
	uint32_t len;
};

struct store *
store_svc_find(const struct store_svc *svc, uint64_t id)
{
	for (unsigned i = 0; i < svc->ntargets; i++)
		if (store_target_id(svc->targets[i]) == id)
			return svc->targets[i];
	return NULL;
}

static void
op_done(void *arg, int rc)
{
	struct svc_op *op = arg;

	if (op->buf != NULL && rc >= 0) {
		struct iovec iov = { op->buf, (size_t)rc };

		net_reply(op->req, 0, &iov, 1);
	} else {
		net_reply(op->req, rc < 0 ? rc : 0, NULL, 0);
	}
	sh_free(op->buf);
	sh_free(op);
}

static void
handle(struct net_req *req, void *arg)
{
	struct store_svc *svc = arg;
	const struct net_msg *m = net_req_body(req);
	uint16_t opc = net_req_opcode(req);
	struct store_proto_req r;
	struct store *s;
	struct svc_op *op;
	int rc = store_proto_decode(opc, m->buf->data + m->off, m->len, &r);

	if (rc < 0) {
		sh_log_debug("malformed %s from %llx", net_op_name(opc),
			     (unsigned long long)net_req_peer(req));
		net_reply(req, rc, NULL, 0);
		return;
	}
	s = store_svc_find(svc, r.target);
	if (s == NULL) {
		net_reply(req, -ENODEV, NULL, 0);
		return;
	}
	if (opc == NET_OP_STORE_STAT) {
		struct store_stats st;
		struct store_proto_stat ps;
		struct iovec iov = { &ps, sizeof(ps) };

		store_stats(s, &st);
		ps = (struct store_proto_stat){ .capacity = st.capacity,
						.used = st.used,
						.live = st.live,
						.garbage = st.garbage,
						.fragments = st.fragments,
						.segs = st.segs,
						.segs_free = st.segs_free };
		net_reply(req, 0, &iov, 1);
		return;
	}
	op = sh_calloc(1, sizeof(*op));
	if (op == NULL) {
		net_reply(req, -ENOMEM, NULL, 0);
		return;
	}
	op->req = req;
	switch (opc) {
	case NET_OP_STORE_PUT:
		/*
		 * Written from the request itself (it stays until the reply): the
		 * net layer lands large bodies 4 KiB-aligned, bytes first
		 */
		rc = store_append_ref(s, r.stripe, r.idx, r.data, r.len, op_done, op);
		break;
	case NET_OP_STORE_GET:
		op->buf = sh_malloc(r.len);
		rc = op->buf ? store_read(s, r.stripe, r.idx, r.off, r.len, op->buf, op_done, op)
			     : -ENOMEM;
		break;
	default:
		rc = store_release(s, r.stripe, r.idx, op_done, op);
		break;
	}
	if (rc < 0) {
		sh_free(op->buf);
		sh_free(op);
		net_reply(req, rc, NULL, 0);
	}
}

static const uint16_t svc_ops[] = { NET_OP_STORE_PUT, NET_OP_STORE_GET, NET_OP_STORE_RELEASE,
				    NET_OP_STORE_STAT };

int
store_svc_create(struct net *n, struct store_svc **out)
{
	struct store_svc *svc = sh_calloc(1, sizeof(*svc));
	int rc;

	if (svc == NULL)
		return -ENOMEM;
	svc->net = n;
	for (size_t i = 0; i < SH_ARRAY_SIZE(svc_ops); i++) {
		rc = net_handle(n, svc_ops[i], handle, svc);
		if (rc < 0) {
			while (i-- > 0)
				net_unhandle(n, svc_ops[i]);
			sh_free(svc);
			return rc;
		}
	}
	*out = svc;
	return 0;
}

int
store_svc_add(struct store_svc *svc, struct store *s)
{
	if (store_svc_find(svc, store_target_id(s)) != NULL)
		return -EEXIST;
	if (svc->ntargets == SVC_MAX_TARGETS)
		return -ENOSPC;
	svc->targets[svc->ntargets++] = s;
	return 0;
}

void
store_svc_destroy(struct store_svc *svc)
{
	for (size_t i = 0; svc != NULL && i < SH_ARRAY_SIZE(svc_ops); i++)
		net_unhandle(svc->net, svc_ops[i]); /* a request that comes later finds no one */
	sh_free(svc);
}
