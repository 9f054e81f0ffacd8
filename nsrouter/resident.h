/* resident.h - which expert rows are already cached: nsrouter never prefetches them.
 *
 * The source is the plan nsplan publishes (nsplan/plan_shm.h, segment
 * "/ns-<user>-<session>-plan"), read the way nsio reads it (nsio/ramcache.c): copied under the
 * seqlock and validated with nsplan_records_check before use. Its RAM-tier windows are what
 * nsio holds in the RAM cache: compute's request for rows inside them is served by copy, never
 * from the disk, so a prefetch of them would only spend arena bytes and a copy. A block is
 * skipped only when every one of its rows is in such a window (a partly resident block is
 * still a disk read, and prefetching it keeps the hit); the cuts themselves never change, so
 * every block that is prefetched is still exactly the READ compute issues.
 *
 * The plan can change (nsplan re-plans from expert statistics, nsio loads the new windows
 * while it serves): ns_rres_refresh() looks at the segment's seqlock counter, at most every
 * 100 ms, and re-reads the plan when it moved. A window of a new plan that nsio has not
 * finished loading is still skipped: compute then reads it on demand (speed, never tokens).
 * Without a plan (nsctl --no-plan, or nsplan not up yet) nothing is resident.
 *
 * Ownership: struct ns_rres is owned by its creator (ns_rres_new / ns_rres_destroy); it
 * borrows the model, which must outlive it. */
#ifndef NS_ROUTER_RESIDENT_H
#define NS_ROUTER_RESIDENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ns_model;
struct ns_rres;

/* A resident-rows table for session's plan (nothing resident until a plan is found). */
int ns_rres_new(const struct ns_model *m, const char *session, struct ns_rres **out);
void ns_rres_destroy(struct ns_rres **r);

/* Look for a (new) plan when 100 ms have passed since the last look, or always when force.
 * Returns 1 when a new plan was taken, 0 when nothing changed, -EPERM (a line in err) when the
 * plan segment is not ours, another negative errno (with a line in err) for a plan that fails
 * validation (the old table stays). */
int ns_rres_refresh(struct ns_rres *r, bool force, char *err, size_t errlen);

/* Take the plan records buf (len bytes) directly (tests, and the refresh above). Returns 0 or
 * -EPROTO/-ENOMEM with a line in err (the old table stays). */
int ns_rres_load(struct ns_rres *r, const void *buf, size_t len, char *err, size_t errlen);

/* True when rows [row0, row0 + nrows) of tensor (model index) are all in RAM windows. */
bool ns_rres_covered(const struct ns_rres *r, uint32_t tensor, uint64_t row0, uint64_t nrows);

/* Figures of the current table: generation of the plan, RAM windows kept, their bytes. */
void ns_rres_figures(const struct ns_rres *r, uint32_t *generation, uint64_t *windows,
		     uint64_t *bytes);

#endif
