/* zmsg.h - the ZeroMQ message envelope (version NS_ZMSG_VERSION) and the router decisions
 * nscompute publishes to nsrouter (PUB/SUB over ipc://RUNDIR/router.ipc). The control messages
 * between nsctl and nscompute travel in the same envelope (ctl_msg.h).
 *
 * Wire format: one ZeroMQ frame, little-endian, starting with a 12-byte envelope
 *   u32 magic "NSZM" | u16 version | u16 type | u32 payload bytes
 * followed by the payload of that type. Encoders write into a caller buffer and return the byte
 * count (or -ENOSPC); decoders check the envelope, the exact length and every field against the
 * limits the reader passes (expert count) and return -EPROTO/-EINVAL on anything malformed,
 * never reading past len (wire.h does the bounded reads and writes).
 *
 * struct ns_zplan (a layer's prefetch plan) is not a message: DESIGN.md's PUSH/PULL plans
 * became nsio ring records (NS_REQ_PREFETCH, docs/decisions.md "Control channel"); nsrouter
 * and nsio's run-ahead schedule build it in their own memory. */
#ifndef NS_PROTO_ZMSG_H
#define NS_PROTO_ZMSG_H

#include <stddef.h>
#include <stdint.h>


#define NS_ZMSG_MAGIC 0x4d5a534eu /* "NSZM" */
#define NS_ZMSG_VERSION 3 /* 3: the ctl EVAL carries keep; ctl STEP */
#define NS_ZMSG_HDR_BYTES 12
#define NS_ZMSG_MAX_EXPERTS 256
#define NS_ZMSG_MAX_PLAN 4096

enum ns_zmsg_type {
	NS_ZMSG_ROUTER = 1,      /* router decision for one token and layer */
	/* nsctl <-> nscompute (ctl_msg.h) */
	NS_ZMSG_CTL_HELLO = 2,
	NS_ZMSG_CTL_EVAL = 3,
	NS_ZMSG_CTL_TOKEN = 4,
	NS_ZMSG_CTL_LOGITS = 5,
	NS_ZMSG_CTL_DONE = 6,
	NS_ZMSG_CTL_ERROR = 7,
	NS_ZMSG_CTL_QUIT = 8,
	NS_ZMSG_CTL_STOP = 9,
	NS_ZMSG_CTL_STEP = 10,
	NS_ZMSG_CTL_SPEC = 11,   /* speculative decoding's counters, before DONE (ctl_msg.h) */
	NS_ZMSG_CTL_PROGRESS = 12, /* prefill's pass over the layers (ctl_msg.h) */
	NS_ZMSG_ROUTER_PREDICT = 13, /* a predicted decision (the next layer's router on this
				      * layer's output): the payload of NS_ZMSG_ROUTER */
	NS_ZMSG_CTL_IMAGES = 14, /* the images of the next EVAL's prompt (ctl_msg.h) */
	NS_ZMSG_TYPE_MAX = 14,
};

struct ns_zrouter {
	uint64_t token;   /* position in the sequence */
	uint32_t predicted; /* 1: sent as NS_ZMSG_ROUTER_PREDICT, a guess for I/O only */
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

/* Type of a message (after an envelope check), or -EPROTO. */
int ns_zmsg_type(const void *buf, size_t len);

/* predicted picks the type: NS_ZMSG_ROUTER_PREDICT when set, else NS_ZMSG_ROUTER; the
 * decoder takes either and sets predicted from the type. */
int ns_zrouter_encode(const struct ns_zrouter *m, void *buf, size_t cap);
int ns_zrouter_decode(const void *buf, size_t len, uint32_t n_expert, struct ns_zrouter *m);

#endif
