/* client.h - the library compute processes link to read weight rows through nsio.
 *
 *   struct ns_client *c;
 *   ns_client_open(session_id, NULL, &c, err, sizeof(err));
 *   int64_t t = ns_client_find_tensor(c, "blk.0.ffn_up.weight");
 *   uint64_t ticket;
 *   ns_client_request(c, t, row0, nrows, &ticket);     // nsio starts reading
 *   struct ns_block b;
 *   ns_client_wait(c, ticket, &b);                     // b.data: first wanted byte, read-only
 *   ... use b.nrows rows of b.data ...
 *   ns_client_retire(c, &b);                           // lease back to the arena; b.data dies
 *   ns_client_close(&c);
 *
 * Or let ns_stream_linear() run the pipeline: it keeps lookahead + 1 blocks in flight (the one
 * being consumed holds its lease) and shrinks the block rows so they fit the arena.
 *
 * Threads: one ns_client per thread (no locking inside). Each client takes one of the session's
 * client slots, with its own request and completion ring.
 *
 * Retire protocol: the client sends a RETIRE record (lease index + lease sequence) through its
 * request ring; nsio, the arena's only allocator, checks the lease is DELIVERED to this very
 * client and frees it. A client killed while holding leases is noticed by nsio (pid check every
 * 100 ms) and its leases return to the arena.
 *
 * Restarts: if nsio dies, ns_client_wait keeps waiting (futex timeouts of 100 ms); when a new
 * nsio has attached (generation bump), every request without a completion is re-issued with the
 * same ticket. Blocks already delivered stay valid across the restart. After dead_timeout_ms
 * without a live nsio, calls fail with -EPIPE. */
#ifndef NSIO_CLIENT_H
#define NSIO_CLIENT_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct ns_client;
struct ns_ctl;

struct ns_client_opts {
	uint64_t attach_timeout_ms; /* wait this long for nsio to be RUNNING at open (10000) */
	uint64_t dead_timeout_ms;   /* give up on a dead nsio after this long (15000) */
	volatile sig_atomic_t *cancel; /* when it becomes non-zero, a wait for nsio returns
				     * -ECANCELED within 100 ms (a SIGTERM flag); NULL: never */
	uint32_t beat_role;         /* enum ns_beat_role (shm/layout.h) the caller beats as: the
				     * client beats it at open and in every wait for nsio, so a
				     * process waiting on a stopped nsio does not look stopped
				     * itself; 0: none */
};

/* A block of whole rows in the arena. data stays valid until ns_client_retire(). */
struct ns_block {
	const void *data;   /* first byte of row row0, inside the read-only arena mapping */
	uint64_t nbytes;    /* nrows * row_bytes */
	uint32_t tensor;
	uint64_t row0, nrows;
	uint64_t ticket;
	uint32_t lease_idx; /* for retire */
	uint64_t lease_seq;
};

struct ns_client_tensor {
	const char *name;   /* points into the client's copy; dies with the client */
	uint32_t type;
	uint64_t n_rows;
	uint64_t row_bytes;
	uint64_t file_offset;
};

int ns_client_open(const char *session, const struct ns_client_opts *o, struct ns_client **out,
		   char *err, size_t errlen);
/* Retires every held block, sends CLOSE, unmaps. Blocks' data pointers die. */
void ns_client_close(struct ns_client **c);

uint64_t ns_client_n_tensors(const struct ns_client *c);
int64_t ns_client_find_tensor(const struct ns_client *c, const char *name);
int ns_client_tensor(const struct ns_client *c, uint64_t idx, struct ns_client_tensor *t);
uint64_t ns_client_arena_bytes(const struct ns_client *c);
/* The whole read-only arena mapping (page-aligned; every block's data lies inside it), for a
 * GPU backend to page-lock it once. Valid until ns_client_close. */
void ns_client_arena_map(const struct ns_client *c, const void **base, uint64_t *bytes);
uint32_t ns_client_align(const struct ns_client *c);
/* Most requests one client may have outstanding (ring_slots / 2). */
uint32_t ns_client_max_outstanding(const struct ns_client *c);
/* nsio's --lookahead (a default for ns_stream_linear callers). */
uint32_t ns_client_default_lookahead(const struct ns_client *c);
/* The control segment (stats, arena counters) for monitoring; read-only use. */
struct ns_ctl *ns_client_ctl(struct ns_client *c);
/* One heartbeat of the caller's role (opts.beat_role): progress made outside the client,
 * e.g. a product of weights already in memory. */
void ns_client_beat(struct ns_client *c);

/* Ask for rows [row0, row0+nrows) of a tensor. Returns 0 with *ticket set, -EINVAL for a bad
 * tensor or window (checked locally too), -EBUSY when the client already has the maximum number
 * of requests outstanding (ring_slots / 2), -EPIPE if nsio is gone. */
int ns_client_request(struct ns_client *c, uint64_t tensor, uint64_t row0, uint64_t nrows,
		      uint64_t *ticket);
/* Hint: read this window ahead, unowned; a later request for exactly it is a cache hit. */
int ns_client_prefetch(struct ns_client *c, uint64_t tensor, uint64_t row0, uint64_t nrows);
/* A weaker hint: a window a prediction expects to be needed (NS_REQ_PREDICT). nsio reads it
 * only into spare arena, never twice, and a later ns_client_prefetch of the same window
 * promotes it to an ordinary read-ahead block (nsio/README.md "Predicted windows"). */
int ns_client_predict(struct ns_client *c, uint64_t tensor, uint64_t row0, uint64_t nrows);
/* Wait for a ticket's block. Returns 0 with *b filled, or the error of the read (-EIO, ...),
 * -ENOENT for an unknown ticket, -EPIPE if nsio stays dead. */
int ns_client_wait(struct ns_client *c, uint64_t ticket, struct ns_block *b);
/* Give the block's lease back. b->data must not be used afterwards. */
int ns_client_retire(struct ns_client *c, struct ns_block *b);
/* Forget an outstanding request (its block, if it arrives, is retired unseen). */
int ns_client_cancel(struct ns_client *c, uint64_t ticket);

/* Rows per block for streaming a tensor with lookahead: the largest n <= want_rows such that
 * lookahead + 1 blocks of n rows (with alignment slack) fit the arena. -ENOSPC with a message
 * naming the tensor and the smallest budget that works when even one row does not fit. */
int ns_stream_block_rows(struct ns_client *c, uint64_t tensor, uint64_t want_rows,
			 uint32_t lookahead, uint64_t *rows, char *err, size_t errlen);

/* Stream rows [row0, row_end) of a tensor in blocks of (at most) block_rows rows, calling
 * cb(ctx, block) in row order, with lookahead + 1 blocks in flight (at most
 * ns_client_max_outstanding; the block rows still leave room for lookahead + 1). A non-zero return from cb
 * stops the stream (returned as is). Returns 0 or -errno. */
typedef int (*ns_block_fn)(void *ctx, const struct ns_block *b);
int ns_stream_linear(struct ns_client *c, uint64_t tensor, uint64_t row0, uint64_t row_end,
		     uint64_t block_rows, uint32_t lookahead, ns_block_fn cb, void *ctx);

/* --- process management (nsctl, tests) --- */

/* Path of the built nsio: $NS_NSIO if set, else $NS_BUILD_ROOT/nsio/nsio, else "nsio". */
const char *ns_nsio_path(char *buf, size_t n);
/* fork+exec nsio --session ID --model MODEL [extra...] (extra NULL-terminated, may be NULL).
 * stdout/stderr are inherited unless quiet. Returns 0 with *pid, or -errno. */
int ns_nsio_spawn(const char *nsio, const char *session, const char *model,
		  const char *const *extra, pid_t *pid);
/* Wait until the session's nsio generation is > after_gen and RUNNING, or the child exits.
 * Returns 0, -ETIMEDOUT, or -ECHILD (child died: *status set if non-NULL). */
int ns_nsio_wait_running(struct ns_ctl *ctl, pid_t pid, uint32_t after_gen, uint64_t timeout_ms,
			 int *status);

#endif
