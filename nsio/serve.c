/* serve.c - nsio's loop: client rings in, arena allocation in arrival order, completions out,
 * read-ahead, dead clients reclaimed. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "arena.h"
#include "nsio.h"
#include "ns_util.h"
#include "ring.h"

#define S_REAP_NS 100000000ull /* client liveness scan period */
#define S_POP_BURST 64         /* records taken from one client per pass */

void nsio_go_live(struct nsio *s);

static struct ns_lease *s_lease(struct nsio *s, uint32_t idx)
{
	return &ns_ctl_leases(s->ctl)[idx];
}

static bool s_client_live(struct nsio *s, uint32_t client, uint64_t epoch)
{
	struct ns_client_slot *cs;

	if (client >= s->ctl->max_clients)
		return false;
	cs = ns_ctl_client(s->ctl, client);
	return atomic_load(&cs->state) == NS_CLIENT_ACTIVE && atomic_load(&cs->epoch) == epoch;
}

/* Write one completion to a client's ring; if lease is given it becomes DELIVERED with the
 * record's position before the position is published (see s_keep_lease in attach.c). */
static bool s_push_cpl(struct nsio *s, uint32_t client, const struct ns_cpl_rec *rec,
		       struct ns_lease *lease)
{
	struct ns_client_slot *cs = ns_ctl_client(s->ctl, client);
	uint32_t n = s->ctl->ring_slots;
	uint32_t t = atomic_load(&cs->cpl_tail), h = atomic_load(&cs->cpl_head);
	int64_t cnt = ns_ring_count(h, t, n);
	struct ns_cpl_rec bad;

	if (cnt < 0 || cnt >= (int64_t)n) {
		atomic_fetch_add(&s->ctl->stats.rejected, 1);
		return false;
	}
	if (ns_ring_fault_hit(&s->fault, "nsio")) {
		bad = *rec;
		bad.version ^= 0xffff;
		rec = &bad;
	}
	memcpy(&ns_slot_cpl(s->ctl, cs)[t & (n - 1)], rec, sizeof(*rec));
	if (lease) {
		lease->cpl_pos = t;
		atomic_store(&lease->state, NS_LEASE_DELIVERED);
	}
	atomic_store(&cs->cpl_tail, t + 1);
	if (atomic_load(&cs->cpl_waiting))
		ns_futex_wake(&cs->cpl_tail, 1 << 30);
	return true;
}

static void s_error_cpl(struct nsio *s, uint32_t client, uint16_t op, uint64_t ticket,
			uint32_t tensor, int status)
{
	struct ns_cpl_rec c = {
		.version = NS_RING_REC_VERSION, .op = op, .status = status, .ticket = ticket,
		.tensor = tensor,
	};

	s_push_cpl(s, client, &c, NULL);
}

void nsio_release(struct nsio *s, struct nsio_req *r)
{
	if (r->allocated) {
		ns_arena_release(s->ctl, r->lease);
		r->allocated = false;
	}
}

/* Hand a finished request (status 0, lease filled) to its client. Frees r. */
void nsio_deliver(struct nsio *s, struct nsio_req *r)
{
	struct ns_lease *l = s_lease(s, r->lease);
	struct ns_cpl_rec c = {
		.version = NS_RING_REC_VERSION, .op = NS_CPL_BLOCK, .status = 0,
		.ticket = r->ticket, .tensor = r->tensor, .lease_idx = r->lease,
		.lease_seq = r->lease_seq, .lease_off = l->off, .first = r->first,
		.row0 = r->row0, .nrows = r->nrows,
	};

	if (!s_client_live(s, r->client, r->epoch) || !s_push_cpl(s, r->client, &c, l)) {
		nsio_release(s, r);
		atomic_fetch_add(&s->ctl->stats.leases_reclaimed, 1);
	} else {
		atomic_fetch_add(&s->ctl->stats.blocks_delivered, 1);
	}
	free(r);
}

void nsio_req_done(struct nsio *s, struct nsio_req *r)
{
	s->pending_reqs--;
	r->done = true;
	if (r->client == NS_OWNER_NONE) { /* read-ahead: wait for a claimer */
		if (r->evict) {
			nsio_release(s, r);
			free(r);
		} else if (r->status < 0) {
			nsio_ahead_drop(s, r);
		}
		return;
	}
	if (r->status < 0) {
		nsio_release(s, r);
		if (s_client_live(s, r->client, r->epoch))
			s_error_cpl(s, r->client, NS_CPL_BLOCK, r->ticket, r->tensor, r->status);
		free(r);
		return;
	}
	nsio_deliver(s, r);
}

struct nsio_req *nsio_new_req(struct nsio *s, uint32_t client, uint64_t epoch, uint64_t ticket,
			      uint32_t tensor, uint64_t row0, uint64_t nrows, int *err)
{
	const struct ns_model_tensor *mt = &s->model->tensors[tensor];
	uint64_t off, bytes, a_off, a_len;
	struct nsio_req *r;

	uint32_t shard = mt->shard;
	bool sync = false;

	/* geometry comes from our own model, never from the shm table; rows stored as the
	 * tensor presents them are read as they lie (a checkpoint's row mapping gives where),
	 * the others are made in place by ns_model_read_rows (s_start_sync) */
	if (ns_mul_u64_overflow(row0, mt->row_bytes, &off) ||
	    ns_add_u64_overflow(off, mt->file_offset, &off) ||
	    ns_mul_u64_overflow(nrows, mt->row_bytes, &bytes)) {
		*err = -EOVERFLOW;
		return NULL;
	}
	if (mt->src && !ns_model_rows_plain(mt, row0, nrows, &shard, &off))
		sync = true;
	if (sync) {
		a_off = 0;
		a_len = bytes + (s->ctl->align ? s->ctl->align - 1 : 0);
		a_len = s->ctl->align ? a_len / s->ctl->align * s->ctl->align : bytes;
		off = 0;
	} else if (!ns_span_aligned(off, bytes, s->ctl->align, &a_off, &a_len)) {
		*err = -EOVERFLOW;
		return NULL;
	}
	if (a_len > s->ctl->arena_bytes) {
		*err = -E2BIG;
		return NULL;
	}
	r = calloc(1, sizeof(*r));
	if (!r) {
		*err = -ENOMEM;
		return NULL;
	}
	r->client = client;
	r->epoch = epoch;
	r->ticket = ticket;
	r->tensor = tensor;
	r->row0 = row0;
	r->nrows = nrows;
	r->shard = shard;
	r->sync = sync;
	r->file_off = a_off;
	r->len = a_len;
	r->first = off - a_off;
	r->want_end = r->first + bytes;
	r->t_queued = ns_now_ns();
	return r;
}

static void s_waitq_push(struct nsio *s, struct nsio_req *r)
{
	r->next = NULL;
	if (s->waitq_tail)
		s->waitq_tail->next = r;
	else
		s->waitq = r;
	s->waitq_tail = r;
}

static void s_accept_read(struct nsio *s, uint32_t client, uint64_t epoch,
			  const struct ns_req_rec *q)
{
	struct nsio_req *r;
	uint64_t bytes = q->nrows * s->rt[q->tensor].row_bytes; /* checked by the validator */
	bool promote = false;
	int err = 0;

	if (q->nsio_gen != atomic_load(&s->ctl->nsio_gen)) {
		atomic_fetch_add(&s->ctl->stats.stale_dropped, 1); /* the client re-issues it */
		return;
	}
	if (q->op == NS_REQ_READ) {
		const uint8_t *src;
		uint64_t res = nsio_ram_prefix(&s->ram, q->tensor, q->row0, q->nrows,
					       s->rt[q->tensor].row_bytes, &src);

		/* bytes requested: only the rows that are read from disk (DESIGN.md, Residency) */
		atomic_fetch_add(&s->ctl->stats.requests, 1);
		atomic_fetch_add(&s->ctl->stats.bytes_requested,
				 bytes - res * s->rt[q->tensor].row_bytes);
		if (res == q->nrows)
			atomic_fetch_add(&s->ctl->stats.cache_hits, 1);
		nsio_ahead_follow(s, q->tensor, q->row0, q->nrows);
		if (nsio_ahead_claim(s, client, epoch, q->ticket, q->tensor, q->row0, q->nrows))
			return;
	}
	if (q->op != NS_REQ_READ &&
	    nsio_ahead_hint(s, q->op == NS_REQ_PREDICT, q->tensor, q->row0, q->nrows, &promote))
		return; /* queued or read ahead already: a second read would only waste */
	r = nsio_new_req(s, q->op == NS_REQ_READ ? client : NS_OWNER_NONE, epoch, q->ticket,
		      q->tensor, q->row0, q->nrows, &err);
	if (r) {
		r->predicted = q->op == NS_REQ_PREDICT;
		r->promote = promote;
	}
	if (!r) {
		atomic_fetch_add(&s->ctl->stats.rejected, 1);
		if (q->op == NS_REQ_READ)
			s_error_cpl(s, client, NS_CPL_BLOCK, q->ticket, q->tensor, err);
		return;
	}
	/* explicit prefetches queue in order with reads; one that does not fit when its turn
	 * comes is dropped (it is a hint), see s_schedule */
	s_waitq_push(s, r);
}

static void s_retire(struct nsio *s, uint32_t client, uint64_t epoch, const struct ns_req_rec *q)
{
	struct ns_lease *l = ns_arena_lookup(s->ctl, q->lease_idx, q->lease_seq);

	if (!l || atomic_load(&l->state) != NS_LEASE_DELIVERED || l->owner != client ||
	    l->client_epoch != epoch) {
		atomic_fetch_add(&s->ctl->stats.rejected, 1);
		s_error_cpl(s, client, NS_CPL_ERROR, q->ticket, 0, -EINVAL);
		return;
	}
	ns_arena_release(s->ctl, q->lease_idx);
}

/* Free everything a client holds: delivered leases now, queued requests now, in-flight reads
 * when they finish (their delivery finds the epoch gone). Then free the slot. */
static void s_reclaim_client(struct nsio *s, uint32_t client)
{
	struct ns_client_slot *cs = ns_ctl_client(s->ctl, client);
	uint64_t epoch = atomic_load(&cs->epoch), n = 0;
	uint64_t head = atomic_load(&s->ctl->arena.head_seq);

	for (uint64_t q = atomic_load(&s->ctl->arena.tail_seq); q != head; q++) {
		uint32_t idx = (uint32_t)(q & (s->ctl->lease_slots - 1));
		struct ns_lease *l = s_lease(s, idx);

		if (atomic_load(&l->state) == NS_LEASE_DELIVERED && l->owner == client &&
		    l->client_epoch == epoch) {
			ns_arena_release(s->ctl, idx);
			n++;
		}
	}
	for (struct nsio_req **pp = &s->waitq; *pp;) {
		struct nsio_req *r = *pp;

		if (r->client == client && r->epoch == epoch) {
			*pp = r->next;
			free(r);
			continue;
		}
		pp = &r->next;
	}
	s->waitq_tail = NULL;
	for (struct nsio_req *r = s->waitq; r; r = r->next)
		s->waitq_tail = r;
	atomic_fetch_add(&s->ctl->stats.leases_reclaimed, n);
	atomic_store(&cs->pid, 0);
	atomic_store(&cs->state, NS_CLIENT_FREE);
}

static int s_poll_rings(struct nsio *s)
{
	struct ns_ctl *c = s->ctl;
	int work = 0;

	for (uint32_t i = 0; i < c->max_clients; i++) {
		struct ns_client_slot *cs = ns_ctl_client(c, i);
		uint64_t epoch;
		int k;

		if (atomic_load(&cs->state) != NS_CLIENT_ACTIVE)
			continue;
		epoch = atomic_load(&cs->epoch);
		for (k = 0; k < S_POP_BURST; k++) {
			struct ns_req_rec q;
			int rc;

			if (!ns_ring_pop(ns_slot_req(c, cs), c->ring_slots, &cs->req_head,
					 &cs->req_tail, &q))
				break;
			work++;
			rc = ns_req_validate(&q, s->rt, s->model->n_tensors, c->lease_slots, 0);
			if (rc) {
				atomic_fetch_add(&c->stats.rejected, 1);
				s_error_cpl(s, i, q.op == NS_REQ_READ ? NS_CPL_BLOCK : NS_CPL_ERROR,
					    q.ticket, q.tensor, rc);
				continue;
			}
			if (q.op == NS_REQ_READ || q.op == NS_REQ_PREFETCH ||
			    q.op == NS_REQ_PREDICT) {
				s_accept_read(s, i, epoch, &q);
			} else if (q.op == NS_REQ_RETIRE) {
				s_retire(s, i, epoch, &q);
			} else if (q.op == NS_REQ_CLOSE) {
				s_reclaim_client(s, i);
				break;
			}
		}
		if (k && atomic_load(&cs->req_waiting))
			ns_futex_wake(&cs->req_head, 1 << 30);
	}
	return work;
}

/* Copy the request's resident row prefix from the RAM tier into its lease; the disk read
 * then starts at the aligned boundary below the first non-resident byte (the bytes it reads
 * again are the same file bytes). */
static void s_fill_from_ram(struct nsio *s, struct nsio_req *r)
{
	uint64_t rb = s->model->tensors[r->tensor].row_bytes;
	const uint8_t *src = NULL;
	uint64_t k = nsio_ram_prefix(&s->ram, r->tensor, r->row0, r->nrows, rb, &src);
	uint8_t *dst = s->sess->arena + s_lease(s, r->lease)->off + r->first;
	uint64_t align = s->ctl->align ? s->ctl->align : 1;

	r->disk_pos = 0;
	if (!k)
		return;
	memcpy(dst, src, (size_t)(k * rb)); /* k * rb <= the wanted bytes, checked at new_req */
	if (k == r->nrows)
		r->disk_pos = r->len;
	else
		r->disk_pos = (r->first + k * rb) / align * align;
}

/* Rows made by ns_model_read_rows (a checkpoint tensor the converter rewrites): the RAM
 * prefix is copied as for any request, the rest read and made here, in the lease; the request
 * is complete when this returns. */
static void s_start_sync(struct nsio *s, struct nsio_req *r)
{
	const struct ns_model_tensor *t = &s->model->tensors[r->tensor];
	uint8_t *dst = s->sess->arena + s_lease(s, r->lease)->off;
	const uint8_t *src = NULL;
	uint64_t k = nsio_ram_prefix(&s->ram, r->tensor, r->row0, r->nrows, t->row_bytes, &src);
	int rc = 0;

	if (k)
		memcpy(dst, src, (size_t)(k * t->row_bytes));
	if (k < r->nrows) {
		rc = ns_model_read_rows(s->model, s->bfds, t, r->row0 + k, r->nrows - k,
					dst + k * t->row_bytes);
		atomic_fetch_add(&s->ctl->stats.reads, 1);
		atomic_fetch_add(&s->ctl->stats.bytes_device, (r->nrows - k) * t->src->row_bytes);
	}
	if (rc && !s->said_read_err) {
		s->said_read_err = true;
		fprintf(stderr, "nsio: %s: reading %s rows %llu..%llu: %s\n",
			s->model->shards[r->shard]->path, t->name, (unsigned long long)r->row0,
			(unsigned long long)(r->row0 + r->nrows),
			rc == -EIO ? "the file ends before them (truncated while in use?)" :
			strerror(-rc));
	}
	r->status = rc;
	r->chunks_left = 0;
	s->pending_reqs++;
	nsio_req_done(s, r);
}

int nsio_start_req(struct nsio *s, struct nsio_req *r)
{
	int rc;

	if (r->sync) {
		s_start_sync(s, r);
		return 0;
	}
	s_fill_from_ram(s, r);
	rc = nsio_queue_chunks(s, r);
	if (rc)
		return rc;
	s->pending_reqs++;
	if (r->chunks_left == 0) /* all of it was resident */
		nsio_req_done(s, r);
	return 0;
}

/* What the RAM fill borrows from us: leases of at most chunk bytes. */
static void s_ram_io(struct nsio *s, struct nsio_ram_io *io, uint64_t chunk)
{
	uint64_t cap = s->ctl->arena_bytes;

	*io = (struct nsio_ram_io){ .ctl = s->ctl, .arena = s->sess->arena, .fds = s->fds,
				    .bfds = s->bfds, .chunk = chunk < cap ? chunk : cap };
}

static void s_ram_said(struct nsio *s)
{
	const struct ns_ram_dir *d = s->ram.dir;

	if (s->o.quiet || !d)
		return;
	printf("nsio: RAM tier: plan generation %u: %llu bytes resident of --ram-budget %llu; "
	       "filled through the arena: %llu bytes in %llu reads (%llu from the device), "
	       "leases of at most %llu bytes (arena %llu); %llu bytes kept, %llu dropped\n",
	       s->ram.plan_gen, (unsigned long long)s->ram.resident_bytes,
	       (unsigned long long)s->ram.budget, (unsigned long long)atomic_load(&d->fill_bytes),
	       (unsigned long long)atomic_load(&d->fill_reads),
	       (unsigned long long)atomic_load(&d->fill_device),
	       (unsigned long long)atomic_load(&d->fill_lease_max),
	       (unsigned long long)s->ctl->arena_bytes,
	       (unsigned long long)atomic_load(&d->kept_bytes),
	       (unsigned long long)atomic_load(&d->dropped_bytes));
	fflush(stdout);
}

/* A segment of the session is not ours: stop serving (exit NS_EXIT_FOREIGN), nothing of it
 * used. Returns false / 0 for the callers below. */
static bool s_foreign(struct nsio *s, const char *why)
{
	fprintf(stderr, "nsio: %s; stopping\n", why);
	s->exit_code = NS_EXIT_FOREIGN;
	*s->stop = 1;
	return false;
}

bool nsio_ram_ready(struct nsio *s)
{
	char err[NS_ERR_LEN] = "";
	struct nsio_ram_io io;
	uint64_t t0 = ns_now_ns();
	int rc = 0;

	if (s->ram.ready)
		return true;
	if (!s->ram.t_start)
		s->ram.t_start = t0;
	if (!s->ram.plan_gen) {
		rc = nsio_ram_poll(&s->ram, &s->text, s->sess->id, err,
				   sizeof(err));
		if (rc == -EPERM || rc == -EEXIST) /* a plan or RAM segment that is not ours */
			return s_foreign(s, err);
		if (rc == -EAGAIN && !(s->no_plan && *s->no_plan) &&
		    t0 - s->ram.t_start < s->o.plan_wait_ms * 1000000ull)
			return false;
	}
	if (rc >= 0) { /* fill for up to 20 ms at a time: the loop keeps its other duties */
		s_ram_io(s, &io, s->o.block_bytes);
		do
			rc = nsio_ram_fill_step(&s->ram, &s->text, &io, err, sizeof(err));
		while (rc == 1 && ns_now_ns() - t0 < 20000000ull);
		if (rc == 1 || rc == -EAGAIN) /* -EAGAIN: a dead nsio's quarantined leases */
			return false;
	}
	if (rc == 0) {
		s_ram_said(s);
		if (s->ram.ignored)
			fprintf(stderr, "nsio: %llu RAM windows did not fit; streaming them\n",
				(unsigned long long)s->ram.ignored);
	} else {
		bool late = rc == -EAGAIN && !(s->no_plan && *s->no_plan);

		fprintf(stderr, "nsio: no RAM tier (%s%s%s); streaming every weight\n",
			rc != -EAGAIN ? err : late ? "no plan was published in time" :
			"nsplan ended before publishing a plan", late && err[0] ? ": " : "",
			late ? err : "");
		nsio_ram_destroy(&s->ram);
	}
	s->ram.ready = true;
	/* the run-ahead schedule starts each tensor after its RAM-resident prefix */
	if (s->o.run_ahead && nsio_build_schedule(s) != 0)
		fprintf(stderr, "nsio: out of memory for the run-ahead schedule; reading on "
			"demand\n");
	fflush(stdout);
	return true;
}

/* Between requests: pick up a new plan generation (every 50 ms) and fill its new windows one
 * chunk at a time while no request waits for arena space. Returns 1 when it did something. */
static int s_ram_update(struct nsio *s)
{
	char err[NS_ERR_LEN] = "";
	struct nsio_ram_io io;
	int rc;

	if (!s->ram.budget || !s->ram.plan_gen)
		return 0;
	if (ns_now_ns() - s->ram.t_poll > 50000000ull) {
		s->ram.t_poll = ns_now_ns();
		rc = nsio_ram_poll(&s->ram, &s->text, s->sess->id, err,
				   sizeof(err));
		if (rc == -EPERM || rc == -EEXIST)
			return s_foreign(s, err);
		if (rc < 0 && rc != -EAGAIN)
			fprintf(stderr, "nsio: keeping RAM generation %u: %s\n", s->ram.plan_gen, err);
	}
	if (!s->ram.filling || s->waitq)
		return 0;
	s_ram_io(s, &io, s->ctl->arena_bytes / 2 < s->o.block_bytes ? s->ctl->arena_bytes / 2
								       : s->o.block_bytes);
	rc = nsio_ram_fill_step(&s->ram, &s->text, &io, err, sizeof(err));
	if (rc == 0) {
		s_ram_said(s);
	} else if (rc < 0 && rc != -EAGAIN) {
		fprintf(stderr, "nsio: %s; streaming the rest of generation %u\n", err,
			s->ram.plan_gen);
		s->ram.filling = false;
	}
	return rc == 1;
}

/* Give arena space to queued requests in arrival order; then read ahead if idle. */
static int s_schedule(struct nsio *s)
{
	int work = 0, ahead;

	while (s->waitq) {
		struct nsio_req *r = s->waitq;
		uint32_t owner = r->client;
		int rc;

		/* a promotion takes its place in the ahead list now (or, its block evicted
		 * meanwhile, is read as the PREFETCH it is); a prediction only ever uses spare
		 * arena (the read-ahead share), else it is not read */
		if (owner == NS_OWNER_NONE && r->promote && !nsio_ahead_promote(s, r))
			r->promote = false;
		if (owner == NS_OWNER_NONE && (r->promote || (r->predicted &&
		    s->ahead_bytes + r->len > s->ctl->arena_bytes / 2))) {
			s->waitq = r->next;
			if (!s->waitq)
				s->waitq_tail = NULL;
			if (!r->promote)
				atomic_fetch_add(&s->ctl->stats.predict_skipped, 1);
			free(r);
			continue;
		}
		rc = ns_arena_alloc(s->ctl, r->len, owner, r->ticket, r->epoch, &r->lease);
		/* unclaimed read-ahead yields to real reads, predicted blocks first; predicted
		 * blocks yield to the real plan's prefetches too */
		if (rc == -EAGAIN && !(owner == NS_OWNER_NONE && r->predicted) &&
		    nsio_ahead_evict_predicted(s))
			continue;
		if (rc == -EAGAIN && owner != NS_OWNER_NONE && nsio_ahead_evict_done(s))
			continue;
		if (rc == -EAGAIN && owner == NS_OWNER_NONE && r->predicted)
			atomic_fetch_add(&s->ctl->stats.predict_skipped, 1);
		if (rc == -EAGAIN && owner == NS_OWNER_NONE)
			rc = -ENOSPC; /* a prefetch never holds up the reads behind it */
		if (rc == -EAGAIN)
			break;
		if (rc) { /* a prefetch that does not fit now (sizes were checked at accept) */
			s->waitq = r->next;
			if (!s->waitq)
				s->waitq_tail = NULL;
			if (owner != NS_OWNER_NONE && s_client_live(s, owner, r->epoch))
				s_error_cpl(s, owner, NS_CPL_BLOCK, r->ticket, r->tensor, rc);
			free(r);
			continue;
		}
		s->waitq = r->next;
		if (!s->waitq)
			s->waitq_tail = NULL;
		r->allocated = true;
		r->lease_seq = s_lease(s, r->lease)->seq;
		atomic_fetch_add(&s->ctl->stats.arena_wait_ns, ns_now_ns() - r->t_queued);
		if (owner == NS_OWNER_NONE) /* explicit prefetch: park it on the ahead list */
			nsio_ahead_park(s, r);
		if (owner == NS_OWNER_NONE && r->predicted)
			atomic_fetch_add(&s->ctl->stats.predict_reads, 1);
		if (nsio_start_req(s, r))
			return -ENOMEM;
		work++;
	}
	ahead = nsio_run_ahead(s);
	return ahead < 0 ? ahead : work + ahead;
}

static void s_reap_clients(struct nsio *s)
{
	struct timespec ts;

	for (uint32_t i = 0; i < s->ctl->max_clients; i++) {
		struct ns_client_slot *cs = ns_ctl_client(s->ctl, i);
		uint32_t st = atomic_load(&cs->state);

		int32_t pid = atomic_load(&cs->pid);

		/* a claim in progress has no pid yet: leave it alone (a client dying in those
		 * few instructions costs one slot until the session ends) */
		if (st == NS_CLIENT_FREE || (st == NS_CLIENT_CLAIMED && pid == 0))
			continue;
		if (st == NS_CLIENT_CLOSING || !ns_pid_alive(pid))
			s_reclaim_client(s, i);
	}
	/* the session's owner died without stopping us: nobody will tear the session down
	 * through us, so leave (the stale sweep of the next session removes the segments) */
	if (!s->created_session && !ns_session_owner_alive(s->ctl)) {
		if (!s->o.quiet)
			fprintf(stderr, "nsio: session owner pid %d is gone, stopping\n",
				(int)s->ctl->hdr.owner_pid);
		*s->stop = 1;
	}
	if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) == 0)
		atomic_store(&s->ctl->stats.nsio_cpu_ns,
			     (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec);
}

/* SIGUSR1: one snapshot of the queues on stderr, for a stalled pipeline. */
static void s_dump_state(struct nsio *s)
{
	struct ns_arena_state *a = &s->ctl->arena;

	fprintf(stderr, "nsio %d gen %u: inflight %u, pending %llu, arena head %llu tail %llu "
		"off_head %llu reserved %llu of %llu, ahead %llu B, doorbell %s\n", (int)getpid(),
		atomic_load(&s->ctl->nsio_gen), s->inflight, (unsigned long long)s->pending_reqs,
		(unsigned long long)atomic_load(&a->head_seq),
		(unsigned long long)atomic_load(&a->tail_seq),
		(unsigned long long)atomic_load(&a->off_head),
		(unsigned long long)atomic_load(&a->reserved),
		(unsigned long long)s->ctl->arena_bytes, (unsigned long long)s->ahead_bytes,
		s->efd_armed ? "armed" : "NOT ARMED");
	if (s->quarantine_until)
		fprintf(stderr, "  quarantine ends in %lld ms\n",
			(long long)((int64_t)(s->quarantine_until - ns_now_ns()) / 1000000));
	for (struct nsio_req *r = s->waitq; r; r = r->next)
		fprintf(stderr, "  waiting: client %d epoch %llu ticket %llu tensor %u rows %llu+%llu "
			"len %llu\n", r->client == NS_OWNER_NONE ? -1 : (int)r->client,
			(unsigned long long)r->epoch, (unsigned long long)r->ticket, r->tensor,
			(unsigned long long)r->row0, (unsigned long long)r->nrows,
			(unsigned long long)r->len);
	for (struct nsio_req *r = s->ahead; r; r = r->next)
		fprintf(stderr, "  ahead: tensor %u rows %llu+%llu lease %u %s\n", r->tensor,
			(unsigned long long)r->row0, (unsigned long long)r->nrows, r->lease,
			r->done ? "done" : "reading");
}

int nsio_serve(struct nsio *s)
{
	struct __kernel_timespec tmo = { .tv_sec = 0, .tv_nsec = 100000000 };

	nsio_go_live(s);
	s->t_reap = ns_now_ns();
	ns_beat_hello(s->ctl, NS_BEAT_NSIO, (int32_t)getpid());
	while (!*s->stop) {
		struct io_uring_cqe *cqe;
		unsigned head, n = 0;
		int work, rc;

		ns_beat(s->ctl, NS_BEAT_NSIO); /* every pass; an idle pass waits 100 ms at most */
		if (*s->dump) {
			*s->dump = 0;
			s_dump_state(s);
		}
		if (!s->efd_armed) /* the submission queue was full when its read finished */
			nsio_arm_doorbell(s);
		if (s->quarantine_until && ns_now_ns() >= s->quarantine_until) {
			atomic_fetch_add(&s->ctl->stats.leases_reclaimed,
					 ns_arena_release_quarantine(s->ctl));
			s->quarantine_until = 0;
		}
		/* At the first start requests wait until the RAM tier is loaded (compute maps it
		 * then, and bytes per token count only streamed rows). After a restart they do
		 * not: the compute already works from its mapping of the dead nsio's segment,
		 * and its leases, kept across the restart, may hold the arena space the reload
		 * needs, so waiting could never end. Rows not yet reloaded are read from disk. */
		if (!nsio_ram_ready(s) && !s->restarted) {
			usleep(1000);
			continue;
		}
		work = s_poll_rings(s);
		rc = s_schedule(s);
		if (rc < 0) {
			fprintf(stderr, "nsio: out of memory\n");
			return 1;
		}
		work += rc + s_ram_update(s);
		rc = nsio_submit_chunks(s);
		if (rc < 0) {
			fprintf(stderr, "nsio: io_uring_submit: %s\n", strerror(-rc));
			return 1;
		}
		if (ns_now_ns() - s->t_reap > S_REAP_NS) {
			s_reap_clients(s);
			s->t_reap = ns_now_ns();
		}
		if (!work && !io_uring_cq_ready(&s->ring)) {
			rc = io_uring_wait_cqe_timeout(&s->ring, &cqe, &tmo);
			if (rc < 0 && rc != -ETIME && rc != -EINTR && rc != -EAGAIN) {
				fprintf(stderr, "nsio: io_uring_wait_cqe: %s\n", strerror(-rc));
				return 1;
			}
		}
		io_uring_for_each_cqe(&s->ring, head, cqe) {
			nsio_handle_cqe(s, cqe);
			n++;
		}
		io_uring_cq_advance(&s->ring, n);
	}
	return 0;
}

void nsio_teardown(struct nsio *s)
{
	struct __kernel_timespec tmo = { .tv_sec = 0, .tv_nsec = 50000000 };
	uint64_t t0 = ns_now_ns();

	if (s->ring_ok) { /* let reads into the arena finish before we let go of it */
		while (s->inflight && ns_now_ns() - t0 < 5000000000ull) {
			struct io_uring_cqe *cqe;
			if (io_uring_wait_cqe_timeout(&s->ring, &cqe, &tmo) == 0) {
				nsio_handle_cqe(s, cqe);
				io_uring_cqe_seen(&s->ring, cqe);
			}
		}
	}
	if (s->bell_started) {
		atomic_store(&s->bell_stop, 1);
		atomic_fetch_add(&s->ctl->doorbell, 1);
		ns_futex_wake(&s->ctl->doorbell, 1 << 30);
		pthread_join(s->bell, NULL);
	}
	if (s->ring_ok)
		io_uring_queue_exit(&s->ring);
	if (s->efd > 0)
		close(s->efd);
	if (s->ctl && atomic_load(&s->ctl->nsio_pid) == (int32_t)getpid()) {
		atomic_store(&s->ctl->nsio_state, NS_NSIO_STOPPED);
		atomic_store(&s->ctl->nsio_pid, 0);
		ns_futex_wake(&s->ctl->nsio_gen, 1 << 30);
	}
	for (uint32_t i = 0; s->fds && i < s->model->n_shards; i++)
		if (s->fds[i] > 0)
			close(s->fds[i]);
	free(s->fds);
	ns_model_close_fds(s->model, &s->bfds);
	while (s->chunk_free) {
		struct nsio_chunk *c = s->chunk_free;
		s->chunk_free = c->next;
		free(c);
	}
	while (s->chunkq) {
		struct nsio_chunk *c = s->chunkq;
		s->chunkq = c->next;
		free(c);
	}
	while (s->waitq) {
		struct nsio_req *r = s->waitq;
		s->waitq = r->next;
		free(r);
	}
	while (s->ahead) {
		struct nsio_req *r = s->ahead;
		s->ahead = r->next;
		free(r);
	}
	free(s->sched);
	free(s->sched_first);
	free(s->sched_rows);
	free(s->sched_start);
	free(s->rt);
	nsio_ram_destroy(&s->ram);
	ns_model_close(&s->model);
	if (s->sess) {
		ns_session_set_owner(s->sess, s->created_session);
		ns_session_destroy(&s->sess);
	}
}
