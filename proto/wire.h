/* wire.h - the byte writer and reader of every ZeroMQ message (zmsg.c, ctl_msg.c), and the
 * envelope they share (zmsg.h): one place that bounds every put and get by the buffer.
 * Header-only. Hosts are little-endian (x86-64, aarch64), checked at compile time. */
#ifndef NS_PROTO_WIRE_H
#define NS_PROTO_WIRE_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "zmsg.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the wire format is little-endian");

/* Writer into buf[cap]: a put past cap sets overflow and writes nothing more. */
struct ns_wr {
	uint8_t *p;
	size_t n, cap;
	bool overflow;
};

static inline void ns_wr_put(struct ns_wr *w, const void *v, size_t n)
{
	if (w->overflow || w->cap - w->n < n) {
		w->overflow = true;
		return;
	}
	memcpy(w->p + w->n, v, n);
	w->n += n;
}

static inline void ns_wr_u32(struct ns_wr *w, uint32_t v) { ns_wr_put(w, &v, 4); }
static inline void ns_wr_u64(struct ns_wr *w, uint64_t v) { ns_wr_put(w, &v, 8); }
static inline void ns_wr_f32(struct ns_wr *w, float v) { ns_wr_put(w, &v, 4); }

/* u32 magic "NSZM" | u16 version | u16 type | u32 payload bytes. */
static inline void ns_wr_envelope(struct ns_wr *w, uint16_t type, uint32_t payload)
{
	uint16_t ver = NS_ZMSG_VERSION;

	ns_wr_u32(w, NS_ZMSG_MAGIC);
	ns_wr_put(w, &ver, 2);
	ns_wr_put(w, &type, 2);
	ns_wr_u32(w, payload);
}

/* Bytes written, or -ENOSPC. */
static inline int ns_wr_finish(const struct ns_wr *w)
{
	return w->overflow ? -ENOSPC : (int)w->n;
}

/* Reader of buf[len]: a get past len sets bad and yields zeros. */
struct ns_rd {
	const uint8_t *p;
	size_t n, len;
	bool bad;
};

static inline void ns_rd_get(struct ns_rd *r, void *v, size_t n)
{
	if (r->bad || r->len - r->n < n) {
		r->bad = true;
		memset(v, 0, n);
		return;
	}
	memcpy(v, r->p + r->n, n);
	r->n += n;
}

static inline uint32_t ns_rd_u32(struct ns_rd *r) { uint32_t v; ns_rd_get(r, &v, 4); return v; }
static inline uint64_t ns_rd_u64(struct ns_rd *r) { uint64_t v; ns_rd_get(r, &v, 8); return v; }
static inline float ns_rd_f32(struct ns_rd *r) { float v; ns_rd_get(r, &v, 4); return v; }

/* Check buf's envelope is of type (ns_zmsg_type), position r after it. 0 or -EPROTO. */
static inline int ns_rd_open(struct ns_rd *r, const void *buf, size_t len, int type)
{
	if (ns_zmsg_type(buf, len) != type)
		return -EPROTO;
	*r = (struct ns_rd){ .p = buf, .n = NS_ZMSG_HDR_BYTES, .len = len };
	return 0;
}

/* 0 when every byte was read and none past the end, else -EPROTO. */
static inline int ns_rd_close(const struct ns_rd *r)
{
	return (r->bad || r->n != r->len) ? -EPROTO : 0;
}

#endif
