/* ring_fault.h - test hook: one shm ring record made malformed, as a record damaged in shared
 * memory would be, so a test can sweep every record of a short run (tests/fault).
 *
 *   NS_FAULT_RING=req:N   the N-th request record this process pushes (a client: nscompute,
 *                         nsrouter; each counts its own), N from 1
 *   NS_FAULT_RING=cpl:N   the N-th completion record nsio pushes
 *
 * The record keeps its place and ticket; its version is flipped, which the reader's validator
 * (ring_rec.h) refuses. When it fires the process says so on stderr, once, so a sweep knows
 * where a run's records end. Unset or another side: never fires. */
#ifndef NSIO_RING_FAULT_H
#define NSIO_RING_FAULT_H

#include <stdbool.h>
#include <stdint.h>

struct ns_ring_fault {
	uint64_t nth;   /* 0: off */
	uint64_t count; /* records seen */
};

/* side: "req" or "cpl". Reads NS_FAULT_RING. */
void ns_ring_fault_init(struct ns_ring_fault *f, const char *side);
/* Count one record; true when it is the one to damage (who names the process on stderr). */
bool ns_ring_fault_hit(struct ns_ring_fault *f, const char *who);

#endif
