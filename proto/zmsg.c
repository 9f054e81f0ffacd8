/* zmsg.c - the envelope check and the router decision message (zmsg.h). */
#include "zmsg.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include "wire.h"

int ns_zmsg_type(const void *buf, size_t len)
{
	const uint8_t *p = buf;
	uint32_t magic, payload;
	uint16_t ver, type;

	if (!buf || len < NS_ZMSG_HDR_BYTES)
		return -EPROTO;
	memcpy(&magic, p, 4);
	memcpy(&ver, p + 4, 2);
	memcpy(&type, p + 6, 2);
	memcpy(&payload, p + 8, 4);
	if (magic != NS_ZMSG_MAGIC || ver != NS_ZMSG_VERSION)
		return -EPROTO;
	if ((uint64_t)payload + NS_ZMSG_HDR_BYTES != len)
		return -EPROTO;
	if (type < NS_ZMSG_ROUTER || type > NS_ZMSG_TYPE_MAX)
		return -EPROTO;
	return type;
}

int ns_zrouter_encode(const struct ns_zrouter *m, void *buf, size_t cap)
{
	struct ns_wr w = { .p = buf, .cap = cap };

	if (m->n_used > NS_ZMSG_MAX_EXPERTS)
		return -EINVAL;
	ns_wr_envelope(&w, m->predicted ? NS_ZMSG_ROUTER_PREDICT : NS_ZMSG_ROUTER,
		       16 + 8 * m->n_used);
	ns_wr_u64(&w, m->token);
	ns_wr_u32(&w, m->layer);
	ns_wr_u32(&w, m->n_used);
	for (uint32_t i = 0; i < m->n_used; i++) {
		ns_wr_u32(&w, m->expert[i]);
		ns_wr_f32(&w, m->weight[i]);
	}
	return ns_wr_finish(&w);
}

int ns_zrouter_decode(const void *buf, size_t len, uint32_t n_expert, struct ns_zrouter *m)
{
	struct ns_rd r;
	const int type = ns_zmsg_type(buf, len);
	int rc;

	if (type != NS_ZMSG_ROUTER && type != NS_ZMSG_ROUTER_PREDICT)
		return -EPROTO;
	rc = ns_rd_open(&r, buf, len, type);
	if (rc)
		return rc;
	m->predicted = type == NS_ZMSG_ROUTER_PREDICT;
	m->token = ns_rd_u64(&r);
	m->layer = ns_rd_u32(&r);
	m->n_used = ns_rd_u32(&r);
	if (r.bad || m->n_used > NS_ZMSG_MAX_EXPERTS || m->n_used > n_expert)
		return -EINVAL;
	for (uint32_t i = 0; i < m->n_used; i++) {
		m->expert[i] = ns_rd_u32(&r);
		m->weight[i] = ns_rd_f32(&r);
		if (m->expert[i] >= n_expert || !isfinite(m->weight[i]))
			return -EINVAL;
	}
	return ns_rd_close(&r);
}
