/* ring.h - single-producer single-consumer rings of 64-byte records in shared memory, and the
 * futex calls used to sleep on them.
 *
 * Positions are free-running uint32_t counters; slot = pos & (n - 1) with n a power of two.
 * The producer owns tail, the consumer owns head; each reads the other's with acquire order.
 * A position read from the other side is validated (tail - head <= n) before use: a corrupt or
 * hostile peer can make a ring look empty or full, never make us read outside it. */
#ifndef NS_SHM_RING_H
#define NS_SHM_RING_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "layout.h"

/* Sleep while *word == expect, at most timeout_ns (0 = forever). Shared (not private) futex:
 * the word lives in a segment mapped by several processes. Returns 0, -ETIMEDOUT, -EAGAIN
 * (value already changed) or -EINTR. */
int ns_futex_wait(_Atomic uint32_t *word, uint32_t expect, uint64_t timeout_ns);
/* Wake up to n sleepers on word. */
void ns_futex_wake(_Atomic uint32_t *word, int n);

/* Number of records waiting, or -1 if the positions are inconsistent (peer corruption). */
static inline int64_t ns_ring_count(uint32_t head, uint32_t tail, uint32_t n)
{
	uint32_t d = tail - head;

	return d <= n ? (int64_t)d : -1;
}

/* Producer side: copy rec into the ring. Returns false if full (or inconsistent). */
static inline bool ns_ring_push(struct ns_ring_rec *recs, uint32_t n, _Atomic uint32_t *head,
				_Atomic uint32_t *tail, const void *rec)
{
	uint32_t t = atomic_load_explicit(tail, memory_order_relaxed);
	uint32_t h = atomic_load_explicit(head, memory_order_acquire);
	int64_t c = ns_ring_count(h, t, n);

	if (c < 0 || c >= (int64_t)n)
		return false;
	memcpy(&recs[t & (n - 1)], rec, NS_RING_REC_BYTES);
	atomic_store_explicit(tail, t + 1, memory_order_seq_cst);
	return true;
}

/* Consumer side: copy the oldest record out. Returns false if empty (or inconsistent). */
static inline bool ns_ring_pop(struct ns_ring_rec *recs, uint32_t n, _Atomic uint32_t *head,
			       _Atomic uint32_t *tail, void *rec)
{
	uint32_t h = atomic_load_explicit(head, memory_order_relaxed);
	uint32_t t = atomic_load_explicit(tail, memory_order_acquire);
	int64_t c = ns_ring_count(h, t, n);

	if (c <= 0)
		return false;
	memcpy(rec, &recs[h & (n - 1)], NS_RING_REC_BYTES);
	atomic_store_explicit(head, h + 1, memory_order_seq_cst);
	return true;
}

#endif
