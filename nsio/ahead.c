/* ahead.c - read-ahead: explicit prefetches and the static run-ahead schedule. Blocks read
 * ahead hold unowned leases on s->ahead, in order; a READ for exactly one of them adopts it
 * (a cache hit); unclaimed ones yield their space to real reads. */
#include <errno.h>
#include <stdlib.h>

#include "arena.h"
#include "nsio.h"
#include "ns_util.h"

static void s_ahead_bytes(struct nsio *s, int64_t delta)
{
	s->ahead_bytes += (uint64_t)delta;
	atomic_store(&s->ctl->stats.ahead_bytes, s->ahead_bytes);
}

static void s_ahead_unlink(struct nsio *s, struct nsio_req *r)
{
	for (struct nsio_req **pp = &s->ahead; *pp; pp = &(*pp)->next) {
		if (*pp == r) {
			*pp = r->next;
			return;
		}
	}
}

/* Drop a read-ahead block nobody claimed: now if its reads are done, else when they finish
 * (nsio_req_done sees evict). Either way it leaves the ahead list at once. */
void nsio_ahead_drop(struct nsio *s, struct nsio_req *r)
{
	s_ahead_unlink(s, r);
	s_ahead_bytes(s, -(int64_t)r->len);
	if (!r->done) {
		r->evict = true;
		return;
	}
	nsio_release(s, r);
	free(r);
}

/* A claimed read-ahead block: a cache hit, unless only a prediction asked for it (then the
 * real plan would have missed it: counted apart, so cache_hits stays the real plan's). */
static void s_count_claim(struct nsio *s, struct nsio_req *r)
{
	if (r->predicted)
		atomic_fetch_add(&s->ctl->stats.predict_claims, 1);
	else
		atomic_fetch_add(&s->ctl->stats.cache_hits, 1);
	r->predicted = false;
}

/* A READ for a block read ahead: adopt it (cache hit). Earlier unclaimed blocks are stale.
 * Not while the client still has older requests waiting for space: a client must never hold a
 * lease while an older ticket of its own is unallocated, or it could hold arena space that the
 * request at the head of the queue needs (the first-come-first-served progress argument). The
 * read-ahead block then stays unclaimed and is evicted if space runs out. */
bool nsio_ahead_claim(struct nsio *s, uint32_t client, uint64_t epoch, uint64_t ticket,
		      uint32_t tensor, uint64_t row0, uint64_t nrows)
{
	struct nsio_req *r;

	for (r = s->waitq; r; r = r->next)
		if (r->client == client && r->epoch == epoch)
			return false;

	for (r = s->waitq; r; r = r->next) { /* a prefetch still waiting for space */
		if (r->client == NS_OWNER_NONE && !r->promote && r->tensor == tensor &&
		    r->row0 == row0 && r->nrows == nrows) {
			r->client = client;
			r->epoch = epoch;
			r->ticket = ticket;
			s_count_claim(s, r);
			return true;
		}
	}
	for (r = s->ahead; r; r = r->next)
		if (!r->evict && r->tensor == tensor && r->row0 == row0 && r->nrows == nrows)
			break;
	if (!r)
		return false;
	while (s->ahead != r) /* the consumer moved past these */
		nsio_ahead_drop(s, s->ahead);
	s_ahead_unlink(s, r);
	s_ahead_bytes(s, -(int64_t)r->len);
	r->client = client;
	r->epoch = epoch;
	r->ticket = ticket;
	ns_ctl_leases(s->ctl)[r->lease].owner = client;
	ns_ctl_leases(s->ctl)[r->lease].ticket = ticket;
	ns_ctl_leases(s->ctl)[r->lease].client_epoch = epoch;
	s_count_claim(s, r);
	if (r->done)
		nsio_deliver(s, r);
	return true;
}

void nsio_ahead_follow(struct nsio *s, uint32_t tensor, uint64_t row0, uint64_t nrows)
{
	uint64_t rows, k;

	if (!s->n_sched || tensor >= s->text.n_tensors || !(rows = s->sched_rows[tensor]))
		return;
	if (row0 < s->sched_start[tensor] || (row0 - s->sched_start[tensor]) % rows)
		return;
	k = s->sched_first[tensor] + (row0 - s->sched_start[tensor]) / rows;
	if (k < s->n_sched && s->sched[k].tensor == tensor && s->sched[k].nrows == nrows)
		s->ahead_next = (k + 1) % s->n_sched;
}

void nsio_ahead_park(struct nsio *s, struct nsio_req *r)
{
	struct nsio_req **pp = &s->ahead;

	while (*pp)
		pp = &(*pp)->next;
	r->next = NULL;
	*pp = r;
	s_ahead_bytes(s, (int64_t)r->len);
}

bool nsio_ahead_evict_done(struct nsio *s)
{
	struct nsio_req *a = s->ahead;
	bool any = false;

	while (a) {
		struct nsio_req *nx = a->next;

		if (a->done) {
			nsio_ahead_drop(s, a);
			any = true;
		}
		a = nx;
	}
	return any;
}

/* Static run-ahead along the per-token order: only with no request waiting, within half the
 * arena, never waiting for space. Returns blocks started or -ENOMEM. */
int nsio_run_ahead(struct nsio *s)
{
	int work = 0;

	while (s->n_sched && !s->waitq && s->ahead_bytes < s->ctl->arena_bytes / 2) {
		const struct ns_zplan_item *it = &s->sched[s->ahead_next];
		struct nsio_req *r;
		bool have = false;
		int err;

		for (r = s->ahead; r; r = r->next)
			if (r->tensor == it->tensor && r->row0 == it->row0)
				have = true;
		if (have)
			break;
		r = nsio_new_req(s, NS_OWNER_NONE, 0, 0, it->tensor, it->row0, it->nrows, &err);
		if (!r)
			break;
		if (s->ahead_bytes + r->len > s->ctl->arena_bytes / 2 ||
		    ns_arena_alloc(s->ctl, r->len, NS_OWNER_NONE, 0, 0, &r->lease) != 0) {
			free(r);
			break;
		}
		r->allocated = true;
		r->lease_seq = ns_ctl_leases(s->ctl)[r->lease].seq;
		nsio_ahead_park(s, r);
		s->ahead_next = (s->ahead_next + 1) % s->n_sched;
		if (nsio_start_req(s, r))
			return -ENOMEM;
		work++;
	}
	return work;
}

static bool s_same(const struct nsio_req *r, uint32_t tensor, uint64_t row0, uint64_t nrows)
{
	return r->tensor == tensor && r->row0 == row0 && r->nrows == nrows;
}

bool nsio_ahead_hint(struct nsio *s, bool predict, uint32_t tensor, uint64_t row0,
		     uint64_t nrows, bool *promote)
{
	struct nsio_req *r;

	*promote = false;
	for (r = s->waitq; r; r = r->next) {
		if (r->client != NS_OWNER_NONE || r->promote || !s_same(r, tensor, row0, nrows))
			continue;
		if (!predict && r->predicted) { /* still queued: promoted where it stands */
			r->predicted = false;
			atomic_fetch_add(&s->ctl->stats.predict_promoted, 1);
		} else if (predict) {
			atomic_fetch_add(&s->ctl->stats.predict_skipped, 1);
		}
		return true; /* never a second read of a queued window */
	}
	for (r = s->ahead; r; r = r->next) {
		if (r->evict || !s_same(r, tensor, row0, nrows))
			continue;
		if (predict)
			atomic_fetch_add(&s->ctl->stats.predict_skipped, 1);
		/* a predicted block the real plan wants: it must take the real plan's place in
		 * the list (a claim drops the unclaimed blocks before it), and that place is
		 * where this PREFETCH stands in the queue, behind the plan's earlier windows */
		*promote = !predict && r->predicted;
		return !*promote;
	}
	return false;
}

bool nsio_ahead_promote(struct nsio *s, const struct nsio_req *q)
{
	struct nsio_req *r;

	for (r = s->ahead; r; r = r->next)
		if (!r->evict && r->predicted && s_same(r, q->tensor, q->row0, q->nrows))
			break;
	if (!r)
		return false; /* evicted meanwhile (a real read needed the space) */
	s_ahead_unlink(s, r);
	s_ahead_bytes(s, -(int64_t)r->len);
	r->predicted = false;
	nsio_ahead_park(s, r);
	atomic_fetch_add(&s->ctl->stats.predict_promoted, 1);
	return true;
}

bool nsio_ahead_evict_predicted(struct nsio *s)
{
	struct nsio_req *a = s->ahead;
	bool any = false;

	while (a) {
		struct nsio_req *nx = a->next;

		if (a->predicted) {
			nsio_ahead_drop(s, a);
			any = true;
		}
		a = nx;
	}
	return any;
}
