/* stream.c - ns_stream_linear: a tensor's rows as a pipeline of lookahead + 1 blocks. */
#include <errno.h>
#include <stdlib.h>

#include "arena.h"
#include "client.h"
#include "ns_util.h"

int ns_stream_block_rows(struct ns_client *c, uint64_t tensor, uint64_t want_rows,
			 uint32_t lookahead, uint64_t *rows, char *err, size_t errlen)
{
	struct ns_client_tensor t;
	uint64_t cap = ns_client_arena_bytes(c), need;
	char b1[32], b2[32];
	int rc;

	if (ns_client_tensor(c, tensor, &t) || t.row_bytes == 0 || t.n_rows == 0)
		return ns_errf(err, errlen, "tensor %llu does not exist or is empty",
			       (unsigned long long)tensor), -EINVAL;
	rc = ns_block_rows_fit(cap, ns_client_align(c), lookahead, t.file_offset, t.row_bytes,
			       t.n_rows, want_rows, rows, &need);
	if (rc == -ENOSPC)
		ns_errf(err, errlen, "memory budget %s cannot hold lookahead+1 = %u blocks of one "
			"row of tensor '%s'; smallest budget that works: %s (%llu bytes)",
			ns_format_bytes(cap, b1, sizeof(b1)), lookahead + 1, t.name,
			ns_format_bytes(need, b2, sizeof(b2)), (unsigned long long)need);
	return rc;
}

int ns_stream_linear(struct ns_client *c, uint64_t tensor, uint64_t row0, uint64_t row_end,
		     uint64_t block_rows, uint32_t lookahead, ns_block_fn cb, void *ctx)
{
	struct ns_client_tensor t;
	char err[NS_ERR_LEN];
	uint64_t rows, nblocks, *tickets, issued = 0, cancel_from = 0;
	uint32_t depth;
	int rc = 0;

	if (ns_client_tensor(c, tensor, &t) || row0 >= row_end || row_end > t.n_rows)
		return -EINVAL;
	rc = ns_stream_block_rows(c, tensor, block_rows, lookahead, &rows, err, sizeof(err));
	if (rc)
		return rc;
	nblocks = (row_end - row0 + rows - 1) / rows;
	depth = lookahead < ns_client_max_outstanding(c) ? lookahead + 1
							 : ns_client_max_outstanding(c);
	tickets = calloc(depth, sizeof(*tickets));
	if (!tickets)
		return -ENOMEM;
	for (uint64_t i = 0; i < nblocks && !rc; i++) {
		struct ns_block b;
		int rr;

		/* keep lookahead + 1 blocks requested: the one consumed now and those after it */
		while (issued < nblocks && issued < i + depth) {
			uint64_t r0 = row0 + issued * rows;
			uint64_t n = row_end - r0 < rows ? row_end - r0 : rows;

			rc = ns_client_request(c, tensor, r0, n, &tickets[issued % depth]);
			if (rc)
				break;
			issued++;
		}
		if (rc) {
			cancel_from = i;
			break;
		}
		rc = ns_client_wait(c, tickets[i % depth], &b);
		if (rc) { /* a failed read's ticket is gone already: cancel says -ENOENT */
			cancel_from = i;
			break;
		}
		rc = cb(ctx, &b);
		rr = ns_client_retire(c, &b);
		if (!rc)
			rc = rr;
		cancel_from = i + 1;
	}
	/* on an error, forget the blocks still requested (their leases go back) */
	for (uint64_t k = cancel_from; rc && k < issued; k++)
		ns_client_cancel(c, tickets[k % depth]);
	free(tickets);
	return rc;
}
