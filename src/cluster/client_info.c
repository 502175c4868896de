// SPDX-License-Identifier: Apache-2.0
/* A client's description of itself (client_info.h has the byte table); fuzzed. */
#include <errno.h>
#include <string.h>

#include "client_info.h"

void
cinfo_encode(struct sh_enc *e, const struct cinfo *c)
{
	sh_enc_u64(e, c->id);
	sh_enc_u8(e, c->mode);
	sh_enc_str(e, c->transport);
	sh_enc_u8(e, c->nifaces);
	for (unsigned i = 0; i < c->nifaces && i < CINFO_IFACES; i++) {
		sh_enc_str(e, c->ifaces[i].addr);
		sh_enc_str(e, c->ifaces[i].label);
	}
	sh_enc_str(e, c->host);
	sh_enc_u32(e, c->pid);
}

int
cinfo_decode(const uint8_t *b, size_t len, struct cinfo *out)
{
	struct sh_dec d;

	memset(out, 0, sizeof(*out));
	sh_dec_init(&d, b, len);
	out->id = sh_dec_u64(&d);
	out->mode = sh_dec_u8(&d);
	sh_dec_str(&d, out->transport, sizeof(out->transport));
	out->nifaces = sh_dec_u8(&d);
	if (out->nifaces > CINFO_IFACES || out->mode > 1)
		return -EBADMSG;
	for (unsigned i = 0; i < out->nifaces; i++) {
		sh_dec_str(&d, out->ifaces[i].addr, sizeof(out->ifaces[i].addr));
		sh_dec_str(&d, out->ifaces[i].label, sizeof(out->ifaces[i].label));
	}
	sh_dec_str(&d, out->host, sizeof(out->host));
	out->pid = sh_dec_u32(&d);
	sh_dec_end(&d);
	return sh_dec_error(&d) ? -EBADMSG : 0;
}
