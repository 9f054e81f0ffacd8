/* test_proto.c - ring records and ZeroMQ messages: round trips, and every malformed input
 * (truncations, bit flips, out-of-range fields) rejected without reading past its length. */
#include <stdlib.h>

#include "io_testlib.h"
#include "proto_all.h"

static const struct ns_rec_tensor s_tensors[] = { { 10, 64 }, { 1, 4 }, { 1000, 8192 } };

static void s_ring_records(void)
{
	struct ns_req_rec ok = { .version = NS_RING_REC_VERSION, .op = NS_REQ_READ, .tensor = 2,
				 .row0 = 990, .nrows = 10 };
	struct ns_req_rec r;
	struct ns_cpl_rec c = { .version = NS_RING_REC_VERSION, .op = NS_CPL_BLOCK, .tensor = 2,
				.lease_idx = 3, .lease_off = 4096, .first = 100, .row0 = 0,
				.nrows = 2 };

	IOT_CHECK(ns_req_validate(&ok, s_tensors, 3, 8, 0) == 0, "valid read");
	r = ok; r.tensor = 3;
	IOT_CHECK(ns_req_validate(&r, s_tensors, 3, 8, 0) == -EINVAL, "tensor index");
	r = ok; r.nrows = 11;
	IOT_CHECK(ns_req_validate(&r, s_tensors, 3, 8, 0) == -EINVAL, "row range");
	r = ok; r.row0 = UINT64_MAX - 3;
	IOT_CHECK(ns_req_validate(&r, s_tensors, 3, 8, 0) == -EINVAL, "row overflow");
	r = ok; r.nrows = 0;
	IOT_CHECK(ns_req_validate(&r, s_tensors, 3, 8, 0) == -EINVAL, "zero rows");
	r = ok;
	IOT_CHECK(ns_req_validate(&r, s_tensors, 3, 8, 8192 * 9) == -E2BIG, "max bytes");
	r = ok; r.version = 9;
	IOT_CHECK(ns_req_validate(&r, s_tensors, 3, 8, 0) == -EPROTO, "version");
	r = ok; r.op = 0;
	IOT_CHECK(ns_req_validate(&r, s_tensors, 3, 8, 0) == -EPROTO, "op");
	r = ok; r.op = NS_REQ_PREDICT; /* a prefetch of a predicted window: checked as one */
	IOT_CHECK(ns_req_validate(&r, s_tensors, 3, 8, 0) == 0, "predict");
	r.nrows = 11;
	IOT_CHECK(ns_req_validate(&r, s_tensors, 3, 8, 0) == -EINVAL, "predict row range");
	r = (struct ns_req_rec){ .version = 1, .op = NS_REQ_RETIRE, .lease_idx = 8 };
	IOT_CHECK(ns_req_validate(&r, s_tensors, 3, 8, 0) == -EINVAL, "lease index");
	r.lease_idx = 7;
	IOT_CHECK(ns_req_validate(&r, s_tensors, 3, 8, 0) == 0, "lease index ok");

	IOT_CHECK(ns_cpl_validate(&c, &s_tensors[2], 8, 1 << 20) == 0, "valid completion");
	c.lease_off = (1 << 20) - 4096;
	IOT_CHECK(ns_cpl_validate(&c, &s_tensors[2], 8, 1 << 20) == -EINVAL, "past arena");
	c.lease_off = UINT64_MAX - 10;
	IOT_CHECK(ns_cpl_validate(&c, &s_tensors[2], 8, 1 << 20) == -EINVAL, "offset overflow");
	c.lease_off = 0;
	c.lease_idx = 8;
	IOT_CHECK(ns_cpl_validate(&c, &s_tensors[2], 8, 1 << 20) == -EINVAL, "lease index");
	c.lease_idx = 0;
	c.status = 1;
	IOT_CHECK(ns_cpl_validate(&c, &s_tensors[2], 8, 1 << 20) == -EINVAL, "positive status");
	c.status = -EIO;
	IOT_CHECK(ns_cpl_validate(&c, &s_tensors[2], 8, 1 << 20) == 0, "error completion");
	c.version = 0;
	IOT_CHECK(ns_cpl_validate(&c, &s_tensors[2], 8, 1 << 20) == -EPROTO, "cpl version");
}

/* Decode every truncation and many random corruptions of a valid message: must not crash
 * (ASan watches reads) and must reject all truncations. */
typedef int (*s_decode_fn)(const void *buf, size_t len);

static int s_dec_router(const void *b, size_t n) { struct ns_zrouter m; return ns_zrouter_decode(b, n, 128, &m); }

static void s_fuzz(const uint8_t *msg, size_t len, s_decode_fn dec, const char *what)
{
	uint64_t seed = 42;

	IOT_CHECK(dec(msg, len) == 0, "%s: valid message refused", what);
	for (size_t n = 0; n < len; n++) {
		uint8_t *cut = malloc(n ? n : 1); /* exact-size copy: ASan sees any overread */
		memcpy(cut, msg, n);
		IOT_CHECK(dec(cut, n) != 0, "%s: truncation to %zu accepted", what, n);
		free(cut);
	}
	for (int i = 0; i < 5000; i++) {
		uint8_t *m = malloc(len);
		memcpy(m, msg, len);
		for (int k = 0; k < 1 + (int)(iot_rand(&seed) % 4); k++)
			m[iot_rand(&seed) % len] ^= (uint8_t)(1u << (iot_rand(&seed) % 8));
		(void)dec(m, len);
		free(m);
	}
}

static void s_zmsgs(void)
{
	struct ns_zrouter rt = { .token = 7, .layer = 3, .n_used = 4 }, rt2;
	struct ns_cmsg_token tok = { .id = 5, .n_past = 9 };
	uint8_t buf[1 << 17];
	int n;

	for (uint32_t i = 0; i < 4; i++) {
		rt.expert[i] = i * 30;
		rt.weight[i] = 0.25f;
	}
	n = ns_zrouter_encode(&rt, buf, sizeof(buf));
	IOT_CHECK(n > 0 && ns_zmsg_type(buf, (size_t)n) == NS_ZMSG_ROUTER, "router encode");
	IOT_CHECK(ns_zrouter_decode(buf, (size_t)n, 128, &rt2) == 0 && rt2.n_used == 4 &&
		  rt2.expert[3] == 90 && rt2.token == 7, "router round trip");
	IOT_CHECK(ns_zrouter_decode(buf, (size_t)n, 64, &rt2) == -EINVAL, "expert id range");
	rt.predicted = 1; /* a prediction: its own type, the same payload */
	n = ns_zrouter_encode(&rt, buf, sizeof(buf));
	IOT_CHECK(n > 0 && ns_zmsg_type(buf, (size_t)n) == NS_ZMSG_ROUTER_PREDICT, "predict type");
	IOT_CHECK(ns_zrouter_decode(buf, (size_t)n, 128, &rt2) == 0 && rt2.predicted == 1 &&
		  rt2.expert[3] == 90 && rt2.layer == 3, "predicted round trip");
	rt.predicted = 0;
	n = ns_zrouter_encode(&rt, buf, sizeof(buf));
	IOT_CHECK(ns_zrouter_decode(buf, (size_t)n, 128, &rt2) == 0 && rt2.predicted == 0,
		  "real decision is not predicted");
	s_fuzz(buf, (size_t)n, s_dec_router, "router");
	IOT_CHECK(ns_zrouter_encode(&rt, buf, 10) == -ENOSPC, "router small buffer");
	/* cross-type, both ways: a router decision is not a control message and a control
	 * message (same envelope, ctl_msg.h) is not a router decision */
	IOT_CHECK(ns_cmsg_type(buf, (size_t)n) == -EPROTO, "router as control message");
	n = ns_cmsg_enc_token(&tok, buf, sizeof(buf));
	IOT_CHECK(n > 0 && ns_zmsg_type(buf, (size_t)n) == NS_ZMSG_CTL_TOKEN &&
		  ns_cmsg_type(buf, (size_t)n) == NS_CMSG_TOKEN, "control message envelope");
	IOT_CHECK(ns_zrouter_decode(buf, (size_t)n, 128, &rt2) == -EPROTO, "type confusion");
	buf[6] = NS_ZMSG_TYPE_MAX + 1; /* a type nobody speaks */
	IOT_CHECK(ns_zmsg_type(buf, (size_t)n) == -EPROTO, "unknown type");
}

int main(void)
{
	s_ring_records();
	s_zmsgs();
	printf("ok\n");
	return 0;
}
