/* zmsg.h - ZeroMQ message formats (version NS_ZMSG_VERSION): router decisions (PUB/SUB),
 * prefetch plans (PUSH/PULL), control requests and stats replies (REQ/REP).
 *
 * Wire format: one ZeroMQ frame, little-endian, starting with a 12-byte envelope
 *   u32 magic "NSZM" | u16 version | u16 type | u32 payload bytes
 * followed by the payload of that type. Encoders write into a caller buffer and return the byte
 * count (or -ENOSPC); decoders check the envelope, the exact length and every field against the
 * limits the reader passes (tensor count, expert count) and return -EPROTO/-EINVAL on anything
 * malformed, never reading past len. */
#ifndef NS_PROTO_ZMSG_H
#define NS_PROTO_ZMSG_H

#include <stddef.h>
#include <stdint.h>

#include "ring_rec.h"

#define NS_ZMSG_MAGIC 0x4d5a534eu /* "NSZM" */
#define NS_ZMSG_VERSION 1
#define NS_ZMSG_HDR_BYTES 12
#define NS_ZMSG_MAX_EXPERTS 256
#define NS_ZMSG_MAX_PLAN 4096

enum ns_zmsg_type {
	NS_ZMSG_ROUTER = 1,   /* router decision for one token and layer */
	NS_ZMSG_PLAN = 2,     /* prefetch plan: tensor row windows in consumption order */
	NS_ZMSG_CONTROL = 3,  /* control request */
	NS_ZMSG_STATS = 4,    /* stats reply */
};

enum ns_zctl_cmd {
	NS_ZCTL_PING = 1,
	NS_ZCTL_STATS = 2,
	NS_ZCTL_STOP = 3,
};

struct ns_zrouter {
	uint64_t token;   /* position in the sequence */
	uint32_t layer;
	uint32_t n_used;  /* experts chosen, <= NS_ZMSG_MAX_EXPERTS */
	uint32_t expert[NS_ZMSG_MAX_EXPERTS];
	float weight[NS_ZMSG_MAX_EXPERTS];
};

struct ns_zplan_item {
	uint32_t tensor;
	uint64_t row0;
	uint64_t nrows;
};

struct ns_zplan {
	uint64_t plan_id;
	uint32_t layer;
	uint32_t n_items; /* <= NS_ZMSG_MAX_PLAN */
	struct ns_zplan_item item[NS_ZMSG_MAX_PLAN];
};

struct ns_zcontrol {
	uint32_t cmd;  /* enum ns_zctl_cmd */
	uint64_t arg;
};

#define NS_ZSTATS_FIELDS 16
struct ns_zstats {
	uint32_t n_fields;                 /* <= NS_ZSTATS_FIELDS; unknown trailing ones ignored */
	uint64_t value[NS_ZSTATS_FIELDS];  /* order of struct ns_stats_snapshot's counters */
};

/* Type of a message (after an envelope check), or -EPROTO. */
int ns_zmsg_type(const void *buf, size_t len);

int ns_zrouter_encode(const struct ns_zrouter *m, void *buf, size_t cap);
int ns_zrouter_decode(const void *buf, size_t len, uint32_t n_expert, struct ns_zrouter *m);

int ns_zplan_encode(const struct ns_zplan *m, void *buf, size_t cap);
/* tensors/n_tensors: the reader's tensor table; every window must lie inside its tensor. */
int ns_zplan_decode(const void *buf, size_t len, const struct ns_rec_tensor *tensors,
		    uint64_t n_tensors, struct ns_zplan *m);

int ns_zcontrol_encode(const struct ns_zcontrol *m, void *buf, size_t cap);
int ns_zcontrol_decode(const void *buf, size_t len, struct ns_zcontrol *m);

int ns_zstats_encode(const struct ns_zstats *m, void *buf, size_t cap);
int ns_zstats_decode(const void *buf, size_t len, struct ns_zstats *m);

#endif
