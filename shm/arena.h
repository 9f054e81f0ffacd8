/* arena.h - the budgeted arena allocator, operated by nsio only.
 *
 * The arena is exactly ctl->arena_bytes bytes (the --mem-budget rounded down to the O_DIRECT
 * alignment). Leases are variable-size, align-multiple ranges handed out in strict request
 * order from a ring: a lease is placed right after the previous one, wrapping to offset 0 when
 * the end does not fit. Released leases are swept from the tail. An allocation that does not
 * fit returns -EAGAIN: the caller (nsio) keeps the request queued and retries after a release,
 * so the arena never overruns and, because allocation is first-come-first-served, a request
 * that fits an empty arena is always served once older leases are retired.
 *
 * The lease table is a ring too: lease slot = seq % lease_slots; a lease is named by
 * (slot index, seq) so a stale reference to a reused slot is detected.
 *
 * Accounting: arena.reserved = sum of live lease lengths; arena.peak = its maximum. Both are
 * atomics in shm so tests and nsctl can read them while nsio runs. */
#ifndef NS_SHM_ARENA_H
#define NS_SHM_ARENA_H

#include <stdbool.h>
#include <stdint.h>

#include "layout.h"

/* Reserve len bytes (a positive multiple of ctl->align). On success writes the lease slot index
 * into *idx, leaves the lease in NS_LEASE_ALLOC state with owner/ticket/epoch set and returns 0.
 * -EAGAIN: not now (no room or no free lease slot). -E2BIG: larger than the whole arena.
 * -EINVAL: len zero or not aligned. */
int ns_arena_alloc(struct ns_ctl *ctl, uint64_t len, uint32_t owner, uint64_t ticket,
		   uint64_t client_epoch, uint32_t *idx);

/* Release a live lease (any state but FREE/RETIRED); returns -EINVAL otherwise. */
int ns_arena_release(struct ns_ctl *ctl, uint32_t idx);

/* Find a lease by (index, seq) in the given state; NULL if the reference is stale or bad. */
struct ns_lease *ns_arena_lookup(struct ns_ctl *ctl, uint32_t idx, uint64_t seq);

/* What a restarted nsio does with a live lease of the dead one. */
enum ns_lease_fate {
	NS_LEASE_DROP,        /* release it */
	NS_LEASE_KEEP,        /* a live client holds it */
	NS_LEASE_QUARANTINED, /* keep it reserved, unowned, in NS_LEASE_QUARANTINE state */
};

/* Rebuild the accounting after an nsio restart: fate(lease, arg) decides for every live
 * lease; reserved is recomputed from the table. Returns the number of leases dropped and
 * adds the quarantined ones to *quarantined. */
uint64_t ns_arena_recover(struct ns_ctl *ctl,
			  enum ns_lease_fate (*fate)(struct ns_ctl *, struct ns_lease *, void *),
			  void *arg, uint64_t *quarantined);

/* Release every lease in NS_LEASE_QUARANTINE state. Returns how many. */
uint64_t ns_arena_release_quarantine(struct ns_ctl *ctl);

/* Number of live (unswept) leases. */
static inline uint64_t ns_arena_live(struct ns_ctl *ctl)
{
	return atomic_load(&ctl->arena.head_seq) - atomic_load(&ctl->arena.tail_seq);
}

/* Largest aligned enclosing span of nrows consecutive rows starting at any row of a tensor
 * whose data starts at file_offset with rows of row_bytes, n_rows in all: the bytes one block of
 * nrows rows can reserve. Exact (walks the row offsets modulo align). 0 on overflow. */
uint64_t ns_span_max(uint64_t file_offset, uint64_t row_bytes, uint64_t n_rows, uint64_t nrows,
		     uint32_t align);

/* Rows per block for streaming a tensor with lookahead + 1 blocks in an arena of cap bytes:
 * the largest n <= want (want 0: all rows) such that lookahead + 1 blocks of n rows, each with
 * its alignment slack, fit. Shared by the client library (ns_stream_block_rows) and nsio's
 * run-ahead schedule, so both cut a tensor the same way. Returns 0, or -ENOSPC when even one
 * row per block does not fit; *need then holds the smallest arena that works. */
int ns_block_rows_fit(uint64_t cap, uint32_t align, uint32_t lookahead, uint64_t file_offset,
		      uint64_t row_bytes, uint64_t n_rows, uint64_t want, uint64_t *rows,
		      uint64_t *need);

/* Aligned enclosing range of [off, off+len): *a_off, *a_len. False on overflow. */
bool ns_span_aligned(uint64_t off, uint64_t len, uint32_t align, uint64_t *a_off,
		     uint64_t *a_len);

#endif
