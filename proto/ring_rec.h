/* ring_rec.h - records of the shm request and completion rings (version NS_RING_REC_VERSION).
 *
 * Every record is 64 bytes, little-endian host layout (both ends run on the same machine).
 * A record read from a ring came from another process: decode it with the validators below
 * before using any field; they check version, opcode and every index and range against what
 * the reader knows (tensor table, lease table, arena size). */
#ifndef NS_PROTO_RING_REC_H
#define NS_PROTO_RING_REC_H

#include <stdbool.h>
#include <stdint.h>

#define NS_RING_REC_VERSION 1

enum ns_req_op {
	NS_REQ_READ = 1,     /* read rows [row0, row0+nrows) of tensor into a new lease */
	NS_REQ_RETIRE = 2,   /* give back lease (lease_idx, lease_seq) */
	NS_REQ_PREFETCH = 3, /* read ahead a window without an owner (served to a later READ) */
	NS_REQ_CLOSE = 4,    /* the client leaves: free its leases and its slot */
	NS_REQ_PREDICT = 5,  /* a PREFETCH of a predicted window: lower class, spare arena only
			      * (nsio/README.md "Predicted windows") */
};

enum ns_cpl_op {
	NS_CPL_BLOCK = 1, /* a READ finished: status 0 and a lease, or status < 0 */
	NS_CPL_ERROR = 2, /* a record was rejected (status = -errno, ticket echoes it) */
};

/* client -> nsio */
struct ns_req_rec {
	uint16_t version;
	uint16_t op;
	uint32_t nsio_gen;  /* the nsio generation the client is talking to */
	uint64_t ticket;    /* client's id for the request, echoed in its completion */
	uint32_t tensor;
	uint32_t lease_idx; /* RETIRE */
	uint64_t row0;
	uint64_t nrows;
	uint64_t lease_seq; /* RETIRE */
	uint64_t reserved[2];
};
_Static_assert(sizeof(struct ns_req_rec) == 64, "request record is 64 bytes");

/* nsio -> client */
struct ns_cpl_rec {
	uint16_t version;
	uint16_t op;
	int32_t status;     /* 0 or -errno */
	uint64_t ticket;
	uint32_t tensor;
	uint32_t lease_idx;
	uint64_t lease_seq;
	uint64_t lease_off; /* arena offset of the lease (aligned start of the read) */
	uint64_t first;     /* offset of the first wanted byte inside the lease */
	uint64_t row0;
	uint64_t nrows;
};
_Static_assert(sizeof(struct ns_cpl_rec) == 64, "completion record is 64 bytes");

/* What a reader knows about one tensor, for validation. */
struct ns_rec_tensor {
	uint64_t n_rows;
	uint64_t row_bytes;
};

/* Validate a request: version, op, tensor < n_tensors, 1 <= nrows, row0 + nrows <= n_rows,
 * nrows * row_bytes fits in max_bytes (0 = no limit), lease_idx < lease_slots for RETIRE.
 * Returns 0 or -EPROTO (version/op), -EINVAL (ranges), -E2BIG (too large). */
int ns_req_validate(const struct ns_req_rec *r, const struct ns_rec_tensor *tensors,
		    uint64_t n_tensors, uint32_t lease_slots, uint64_t max_bytes);

/* Validate a completion against the reader's view: version, op, lease_idx < lease_slots, the
 * wanted bytes [lease_off + first, + nrows * row_bytes) inside arena_bytes, nrows >= 1 and the
 * row window inside the tensor. t is the tensor the ticket asked for (may be NULL when the
 * ticket is unknown: then only the structural checks run). */
int ns_cpl_validate(const struct ns_cpl_rec *c, const struct ns_rec_tensor *t,
		    uint32_t lease_slots, uint64_t arena_bytes);

#endif
