/* zmsg.c - encode/decode/validate the ZeroMQ message formats. */
#include "zmsg.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include "ns_util.h"

struct s_wr {
	uint8_t *p;
	size_t n, cap;
	bool overflow;
};

struct s_rd {
	const uint8_t *p;
	size_t n, len;
	bool bad;
};

static void s_put(struct s_wr *w, const void *v, size_t n)
{
	if (w->overflow || w->cap - w->n < n) {
		w->overflow = true;
		return;
	}
	memcpy(w->p + w->n, v, n); /* hosts are little-endian (x86-64, aarch64) */
	w->n += n;
}

static void s_put_u32(struct s_wr *w, uint32_t v) { s_put(w, &v, 4); }
static void s_put_u64(struct s_wr *w, uint64_t v) { s_put(w, &v, 8); }

static void s_get(struct s_rd *r, void *v, size_t n)
{
	if (r->bad || r->len - r->n < n) {
		r->bad = true;
		memset(v, 0, n);
		return;
	}
	memcpy(v, r->p + r->n, n);
	r->n += n;
}

static uint32_t s_get_u32(struct s_rd *r) { uint32_t v; s_get(r, &v, 4); return v; }
static uint64_t s_get_u64(struct s_rd *r) { uint64_t v; s_get(r, &v, 8); return v; }

static void s_envelope(struct s_wr *w, uint16_t type, uint32_t payload)
{
	uint16_t ver = NS_ZMSG_VERSION;

	s_put_u32(w, NS_ZMSG_MAGIC);
	s_put(w, &ver, 2);
	s_put(w, &type, 2);
	s_put_u32(w, payload);
}

static int s_finish(struct s_wr *w)
{
	return w->overflow ? -ENOSPC : (int)w->n;
}

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
	if (type < NS_ZMSG_ROUTER || type > NS_ZMSG_STATS)
		return -EPROTO;
	return type;
}

/* Check the envelope is of type, position r after it. */
static int s_open(struct s_rd *r, const void *buf, size_t len, int type)
{
	int t = ns_zmsg_type(buf, len);

	if (t != type)
		return -EPROTO;
	r->p = buf;
	r->len = len;
	r->n = NS_ZMSG_HDR_BYTES;
	r->bad = false;
	return 0;
}

static int s_close(const struct s_rd *r)
{
	return (r->bad || r->n != r->len) ? -EPROTO : 0;
}

int ns_zrouter_encode(const struct ns_zrouter *m, void *buf, size_t cap)
{
	struct s_wr w = { .p = buf, .cap = cap };

	if (m->n_used > NS_ZMSG_MAX_EXPERTS)
		return -EINVAL;
	s_envelope(&w, NS_ZMSG_ROUTER, 16 + 8 * m->n_used);
	s_put_u64(&w, m->token);
	s_put_u32(&w, m->layer);
	s_put_u32(&w, m->n_used);
	for (uint32_t i = 0; i < m->n_used; i++) {
		s_put_u32(&w, m->expert[i]);
		s_put(&w, &m->weight[i], 4);
	}
	return s_finish(&w);
}

int ns_zrouter_decode(const void *buf, size_t len, uint32_t n_expert, struct ns_zrouter *m)
{
	struct s_rd r;
	int rc = s_open(&r, buf, len, NS_ZMSG_ROUTER);

	if (rc)
		return rc;
	m->token = s_get_u64(&r);
	m->layer = s_get_u32(&r);
	m->n_used = s_get_u32(&r);
	if (r.bad || m->n_used > NS_ZMSG_MAX_EXPERTS || m->n_used > n_expert)
		return -EINVAL;
	for (uint32_t i = 0; i < m->n_used; i++) {
		m->expert[i] = s_get_u32(&r);
		s_get(&r, &m->weight[i], 4);
		if (m->expert[i] >= n_expert || !isfinite(m->weight[i]))
			return -EINVAL;
	}
	return s_close(&r);
}

int ns_zplan_encode(const struct ns_zplan *m, void *buf, size_t cap)
{
	struct s_wr w = { .p = buf, .cap = cap };

	if (m->n_items > NS_ZMSG_MAX_PLAN)
		return -EINVAL;
	s_envelope(&w, NS_ZMSG_PLAN, 16 + 20 * m->n_items);
	s_put_u64(&w, m->plan_id);
	s_put_u32(&w, m->layer);
	s_put_u32(&w, m->n_items);
	for (uint32_t i = 0; i < m->n_items; i++) {
		s_put_u32(&w, m->item[i].tensor);
		s_put_u64(&w, m->item[i].row0);
		s_put_u64(&w, m->item[i].nrows);
	}
	return s_finish(&w);
}

int ns_zplan_decode(const void *buf, size_t len, const struct ns_rec_tensor *tensors,
		    uint64_t n_tensors, struct ns_zplan *m)
{
	struct s_rd r;
	int rc = s_open(&r, buf, len, NS_ZMSG_PLAN);

	if (rc)
		return rc;
	m->plan_id = s_get_u64(&r);
	m->layer = s_get_u32(&r);
	m->n_items = s_get_u32(&r);
	if (r.bad || m->n_items > NS_ZMSG_MAX_PLAN)
		return -EINVAL;
	for (uint32_t i = 0; i < m->n_items; i++) {
		struct ns_zplan_item *it = &m->item[i];
		uint64_t end, bytes;

		it->tensor = s_get_u32(&r);
		it->row0 = s_get_u64(&r);
		it->nrows = s_get_u64(&r);
		if (r.bad)
			return -EPROTO;
		if (it->tensor >= n_tensors || it->nrows == 0 ||
		    ns_add_u64_overflow(it->row0, it->nrows, &end) ||
		    end > tensors[it->tensor].n_rows ||
		    ns_mul_u64_overflow(it->nrows, tensors[it->tensor].row_bytes, &bytes))
			return -EINVAL;
	}
	return s_close(&r);
}

int ns_zcontrol_encode(const struct ns_zcontrol *m, void *buf, size_t cap)
{
	struct s_wr w = { .p = buf, .cap = cap };

	s_envelope(&w, NS_ZMSG_CONTROL, 12);
	s_put_u32(&w, m->cmd);
	s_put_u64(&w, m->arg);
	return s_finish(&w);
}

int ns_zcontrol_decode(const void *buf, size_t len, struct ns_zcontrol *m)
{
	struct s_rd r;
	int rc = s_open(&r, buf, len, NS_ZMSG_CONTROL);

	if (rc)
		return rc;
	m->cmd = s_get_u32(&r);
	m->arg = s_get_u64(&r);
	rc = s_close(&r);
	if (rc)
		return rc;
	return (m->cmd >= NS_ZCTL_PING && m->cmd <= NS_ZCTL_STOP) ? 0 : -EINVAL;
}

int ns_zstats_encode(const struct ns_zstats *m, void *buf, size_t cap)
{
	struct s_wr w = { .p = buf, .cap = cap };

	if (m->n_fields > NS_ZSTATS_FIELDS)
		return -EINVAL;
	s_envelope(&w, NS_ZMSG_STATS, 4 + 8 * m->n_fields);
	s_put_u32(&w, m->n_fields);
	for (uint32_t i = 0; i < m->n_fields; i++)
		s_put_u64(&w, m->value[i]);
	return s_finish(&w);
}

int ns_zstats_decode(const void *buf, size_t len, struct ns_zstats *m)
{
	struct s_rd r;
	uint32_t n;
	int rc = s_open(&r, buf, len, NS_ZMSG_STATS);

	if (rc)
		return rc;
	n = s_get_u32(&r);
	if (r.bad || (uint64_t)n * 8 != r.len - r.n)
		return -EPROTO;
	memset(m, 0, sizeof(*m));
	m->n_fields = n < NS_ZSTATS_FIELDS ? n : NS_ZSTATS_FIELDS;
	for (uint32_t i = 0; i < n; i++) {
		uint64_t v = s_get_u64(&r);
		if (i < NS_ZSTATS_FIELDS)
			m->value[i] = v;
	}
	return s_close(&r);
}
