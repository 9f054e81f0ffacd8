/* plan_shm.h - the published plan: segment "/ns-<user>-<session>-plan".
 *
 *   struct ns_seg_header   (shm/seg.h: magic, version, kind NSPLAN_SEG_KIND, size, owner)
 *   struct nsplan_seg_ctl  slot geometry and the seqlock below
 *   slot 0, slot 1         each slot_bytes: a plan in the record format of plan.h
 *                          (struct nsplan_header + entries)
 *
 * Double-buffered seqlock, one writer (nsplan), any number of readers:
 *   writer: seq++ (odd) -> write the slot that is not active -> len[slot] -> active = slot
 *           -> seq++ (even) -> futex-wake seq
 *   reader: s1 = seq; a = active; copy slot a; s2 = seq; the copy is good iff
 *           s2 <= (s1 | 1) + 1 (no second publish can have started writing slot a), then
 *           nsplan_records_check() it like any other untrusted input.
 * A restarted nsplan re-opens the segment and keeps publishing into it; readers keep the
 * last good plan meanwhile. The segment's owner_pid is the session owner's, so the stale
 * sweep treats it like the session's other segments.
 *
 * Ownership: the struct ns_seg belongs to the caller (ns_seg_unmap); nsplan unlinks the
 * segment when it stops cleanly (teardown), not when it is killed. */
#ifndef NSPLAN_PLAN_SHM_H
#define NSPLAN_PLAN_SHM_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "plan.h"
#include "seg.h"

#define NSPLAN_SEG_KIND NS_SEG_PLAN
#define NSPLAN_SEG_WHAT "plan"
#define NSPLAN_SLOT_NONE UINT32_MAX

struct nsplan_seg_ctl {
	_Atomic uint32_t seq;        /* seqlock counter, futex word */
	_Atomic uint32_t active;     /* slot of the current plan, NSPLAN_SLOT_NONE before any */
	_Atomic int32_t pid;         /* the nsplan publishing now */
	uint32_t reserved;
	uint64_t slot_bytes;         /* capacity of each slot */
	uint64_t off_slot[2];        /* from the segment base */
	_Atomic uint64_t len[2];     /* plan bytes in each slot */
	_Atomic uint64_t published;  /* plans published over all nsplan lifetimes */
};

/* Create the segment for plans of at most max_entries entries, or re-open the one a previous
 * nsplan of the session left (it must be at least as large, ours and 0600: ns_seg_open).
 * Its owner is the session's (ns_seg_create). */
int nsplan_shm_create(struct ns_seg *seg, const char *session, uint64_t max_entries,
		      char *err, size_t errlen);

/* Publish pl (see the protocol above). -ENOSPC if it does not fit a slot. */
int nsplan_shm_publish(struct ns_seg *seg, const struct nsplan *pl, char *err, size_t errlen);

/* Map the segment read-only and check its header and geometry. -ENOENT if absent. */
int nsplan_shm_open(struct ns_seg *seg, const char *session, char *err, size_t errlen);

/* Copy the current plan into buf (cap bytes); *len gets its size. Returns 0, -ENOENT before
 * the first publish, -EAGAIN if a publish raced the copy (call again), -ENOSPC if cap is
 * too small. The copy is not yet validated: use nsplan_records_check(). */
int nsplan_shm_read(const struct ns_seg *seg, void *buf, size_t cap, size_t *len);

#endif
