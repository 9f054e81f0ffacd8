/* client.c - the nsio client library: session slot, request/completion rings, restarts. */
#include "client.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "layout.h"
#include "ns_util.h"
#include "proto_all.h"
#include "ring.h"
#include "ring_fault.h"
#include "session.h"

#define S_WAIT_NS 100000000ull /* futex timeout: nsio death is checked at least this often */

enum { S_FREE, S_PENDING, S_DONE, S_HELD, S_CANCELLED };

struct s_out {
	uint64_t ticket;
	uint32_t tensor;
	uint32_t state;
	uint64_t row0, nrows;
	struct ns_cpl_rec cpl;
};

struct s_tensor {
	char name[NS_TENSOR_NAME_LEN];
	uint32_t type;
	uint64_t file_offset;
};

struct ns_client {
	struct ns_session *sess;
	struct ns_ctl *ctl;
	struct ns_client_slot *slot;
	uint32_t idx;
	uint64_t epoch;
	struct ns_client_opts o;
	uint64_t n_tensors;
	struct s_tensor *t;
	struct ns_rec_tensor *rt;
	uint32_t seen_gen;
	uint64_t next_ticket;
	struct s_out *out;
	uint32_t n_out;
	uint64_t dead_since;
	struct ns_ring_fault fault; /* test hook NS_FAULT_RING=req:N */
	int broken;                 /* -EPROTO once a record between us and nsio was malformed:
				     * a lost completion or lease cannot be recovered, so every
				     * later request and wait fails instead of waiting forever */
};

static bool s_nsio_live(struct ns_client *c)
{
	return atomic_load(&c->ctl->nsio_state) == NS_NSIO_RUNNING &&
	       ns_pid_alive(atomic_load(&c->ctl->nsio_pid));
}

/* -EPIPE once nsio has been gone longer than dead_timeout_ms. */
static int s_check_dead(struct ns_client *c)
{
	uint64_t now = ns_now_ns();

	if (s_nsio_live(c)) {
		c->dead_since = 0;
		return 0;
	}
	if (!c->dead_since)
		c->dead_since = now;
	return now - c->dead_since > c->o.dead_timeout_ms * 1000000ull ? -EPIPE : 0;
}

static int s_push(struct ns_client *c, const struct ns_req_rec *r)
{
	struct ns_client_slot *s = c->slot;
	struct ns_req_rec bad;

	if (c->broken)
		return c->broken;
	if (ns_ring_fault_hit(&c->fault, program_invocation_short_name)) {
		bad = *r;
		bad.version ^= 0xffff;
		r = &bad;
	}

	for (;;) {
		uint32_t h;
		int rc;

		if (ns_ring_push(ns_slot_req(c->ctl, s), c->ctl->ring_slots, &s->req_head,
				 &s->req_tail, r)) {
			atomic_fetch_add(&c->ctl->doorbell, 1);
			ns_futex_wake(&c->ctl->doorbell, 1);
			return 0;
		}
		h = atomic_load(&s->req_head);
		atomic_store(&s->req_waiting, 1);
		rc = ns_futex_wait(&s->req_head, h, S_WAIT_NS / 10);
		atomic_store(&s->req_waiting, 0);
		ns_beat(c->ctl, c->o.beat_role);
		if (c->o.cancel && *c->o.cancel)
			return -ECANCELED;
		if (rc == -ETIMEDOUT && (rc = s_check_dead(c)) < 0)
			return rc;
	}
}

static struct s_out *s_find(struct ns_client *c, uint64_t ticket)
{
	for (uint32_t i = 0; i < c->n_out; i++)
		if (c->out[i].state != S_FREE && c->out[i].ticket == ticket)
			return &c->out[i];
	return NULL;
}

static int s_send_read(struct ns_client *c, struct s_out *e, uint16_t op)
{
	struct ns_req_rec r = {
		.version = NS_RING_REC_VERSION, .op = op, .nsio_gen = c->seen_gen,
		.ticket = e ? e->ticket : 0,
	};

	if (e) {
		r.tensor = e->tensor;
		r.row0 = e->row0;
		r.nrows = e->nrows;
	}
	return s_push(c, &r);
}

static int s_send_retire(struct ns_client *c, uint64_t ticket, uint32_t idx, uint64_t seq)
{
	struct ns_req_rec r = {
		.version = NS_RING_REC_VERSION, .op = NS_REQ_RETIRE, .nsio_gen = c->seen_gen,
		.ticket = ticket, .lease_idx = idx, .lease_seq = seq,
	};

	return s_push(c, &r);
}

/* Take every completion out of the ring; match it to its ticket. */
static void s_drain(struct ns_client *c)
{
	struct ns_client_slot *s = c->slot;
	struct ns_cpl_rec cpl;

	while (ns_ring_pop(ns_slot_cpl(c->ctl, s), c->ctl->ring_slots, &s->cpl_head, &s->cpl_tail,
			   &cpl)) {
		struct s_out *e = s_find(c, cpl.ticket);
		const struct ns_rec_tensor *t = NULL;

		if (e && cpl.op == NS_CPL_BLOCK && (e->state == S_PENDING ||
						    e->state == S_CANCELLED))
			t = &c->rt[e->tensor];
		if (ns_cpl_validate(&cpl, t, c->ctl->lease_slots, c->ctl->arena_bytes) != 0 ||
		    (t && cpl.status == 0 && (cpl.tensor != e->tensor || cpl.row0 != e->row0 ||
					      cpl.nrows != e->nrows))) {
			atomic_fetch_add(&c->ctl->stats.rejected, 1);
			c->broken = -EPROTO; /* whose block or lease it was is not known */
			continue;
		}
		if (cpl.op == NS_CPL_ERROR && cpl.status == -EPROTO)
			c->broken = -EPROTO; /* nsio could not read a record of ours */
		if (cpl.op != NS_CPL_BLOCK || !t) {
			/* error for a retire, or a block nobody waits for: give its lease back */
			if (cpl.op == NS_CPL_BLOCK && cpl.status == 0)
				s_send_retire(c, cpl.ticket, cpl.lease_idx, cpl.lease_seq);
			continue;
		}
		if (e->state == S_CANCELLED) {
			if (cpl.status == 0)
				s_send_retire(c, cpl.ticket, cpl.lease_idx, cpl.lease_seq);
			e->state = S_FREE;
			continue;
		}
		e->cpl = cpl;
		e->state = S_DONE;
	}
}

/* A new nsio generation. Blocks the caller holds stay valid (nsio kept their leases). Blocks
 * delivered but not yet taken by ns_client_wait are given back and re-read with everything
 * that had no completion: the caller then sees every block again in ticket order, and no lease
 * is held while waiting for an older ticket, which keeps the arena's first-come-first-served
 * progress guarantee across restarts. Re-issue goes in ticket order, for the same reason. */
static int s_check_gen(struct ns_client *c)
{
	uint32_t g = atomic_load(&c->ctl->nsio_gen);
	uint64_t last = 0;
	int rc;

	if (g == c->seen_gen || atomic_load(&c->ctl->nsio_state) != NS_NSIO_RUNNING)
		return 0;
	s_drain(c);
	c->seen_gen = g;
	for (uint32_t i = 0; i < c->n_out; i++) {
		struct s_out *e = &c->out[i];

		if (e->state == S_CANCELLED)
			e->state = S_FREE;
		if (e->state == S_DONE && e->cpl.status == 0) {
			rc = s_send_retire(c, e->ticket, e->cpl.lease_idx, e->cpl.lease_seq);
			if (rc)
				return rc;
			e->state = S_PENDING;
		}
	}
	for (;;) {
		struct s_out *next = NULL;

		for (uint32_t i = 0; i < c->n_out; i++) {
			struct s_out *e = &c->out[i];
			if (e->state == S_PENDING && e->ticket > last &&
			    (!next || e->ticket < next->ticket))
				next = e;
		}
		if (!next)
			return 0;
		last = next->ticket;
		rc = s_send_read(c, next, NS_REQ_READ);
		if (rc)
			return rc;
	}
}

static int s_wait_running(struct ns_ctl *ctl, uint64_t timeout_ms)
{
	uint64_t t0 = ns_now_ns();

	while (atomic_load(&ctl->nsio_state) != NS_NSIO_RUNNING ||
	       !ns_pid_alive(atomic_load(&ctl->nsio_pid))) {
		uint32_t g = atomic_load(&ctl->nsio_gen);

		if (ns_now_ns() - t0 > timeout_ms * 1000000ull)
			return -ETIMEDOUT;
		ns_futex_wait(&ctl->nsio_gen, g, 10000000ull);
	}
	return 0;
}

static int s_claim_slot(struct ns_client *c)
{
	struct ns_ctl *ctl = c->ctl;

	for (uint32_t i = 0; i < ctl->max_clients; i++) {
		struct ns_client_slot *s = ns_ctl_client(ctl, i);
		uint32_t st = NS_CLIENT_FREE;

		/* a FREE slot's pid is 0 (nsio clears it when it frees the slot), and nsio
		 * leaves a CLAIMED slot without a pid alone */
		if (!atomic_compare_exchange_strong(&s->state, &st, NS_CLIENT_CLAIMED))
			continue;
		atomic_store(&s->pid, (int32_t)getpid());
		c->epoch = atomic_fetch_add(&s->epoch, 1) + 1;
		atomic_store(&s->req_head, 0);
		atomic_store(&s->req_tail, 0);
		atomic_store(&s->req_waiting, 0);
		atomic_store(&s->cpl_head, 0);
		atomic_store(&s->cpl_tail, 0);
		atomic_store(&s->cpl_waiting, 0);
		atomic_store(&s->state, NS_CLIENT_ACTIVE);
		c->slot = s;
		c->idx = i;
		return 0;
	}
	return -EBUSY;
}

static int s_copy_tensors(struct ns_client *c, char *err, size_t errlen)
{
	struct ns_ctl *ctl = c->ctl;
	uint64_t n = atomic_load(&ctl->n_tensors);

	if (n > ctl->tensor_cap)
		return ns_errf(err, errlen, "session tensor table claims %llu > %u entries",
			       (unsigned long long)n, ctl->tensor_cap), -EPROTO;
	c->n_tensors = n;
	c->t = calloc(n ? n : 1, sizeof(*c->t));
	c->rt = calloc(n ? n : 1, sizeof(*c->rt));
	if (!c->t || !c->rt)
		return ns_errf(err, errlen, "out of memory"), -ENOMEM;
	for (uint64_t i = 0; i < n; i++) {
		const struct ns_tensor_entry *e = &ns_ctl_tensors(ctl)[i];
		uint64_t bytes;

		memcpy(c->t[i].name, e->name, sizeof(c->t[i].name));
		c->t[i].name[sizeof(c->t[i].name) - 1] = '\0';
		c->t[i].type = e->type;
		c->t[i].file_offset = e->file_offset;
		c->rt[i].n_rows = e->n_rows;
		c->rt[i].row_bytes = e->row_bytes;
		if (ns_mul_u64_overflow(e->n_rows, e->row_bytes, &bytes))
			return ns_errf(err, errlen, "tensor %llu size overflows",
				       (unsigned long long)i), -EPROTO;
	}
	return 0;
}

int ns_client_open(const char *session, const struct ns_client_opts *o, struct ns_client **out,
		   char *err, size_t errlen)
{
	struct ns_client *c;
	int rc;

	*out = NULL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return ns_errf(err, errlen, "out of memory"), -ENOMEM;
	c->o.attach_timeout_ms = o && o->attach_timeout_ms ? o->attach_timeout_ms : 10000;
	c->o.dead_timeout_ms = o && o->dead_timeout_ms ? o->dead_timeout_ms : 15000;
	c->o.beat_role = o ? o->beat_role : 0;
	c->o.cancel = o ? o->cancel : NULL;
	ns_ring_fault_init(&c->fault, "req");
	/* the session may still be being created (by nsio itself): retry until the timeout */
	for (uint64_t t0 = ns_now_ns();;) {
		rc = ns_session_attach(session, false, &c->sess, err, errlen);
		if (rc != -ENOENT && rc != -EPROTO)
			break;
		if (ns_now_ns() - t0 > c->o.attach_timeout_ms * 1000000ull)
			break;
		usleep(5000);
	}
	if (rc)
		goto fail;
	c->ctl = c->sess->ctl;
	ns_beat_hello(c->ctl, c->o.beat_role, (int32_t)getpid());
	rc = s_wait_running(c->ctl, c->o.attach_timeout_ms);
	if (rc) {
		ns_errf(err, errlen, "session %s: no running nsio after %llu ms", session,
			(unsigned long long)c->o.attach_timeout_ms);
		goto fail;
	}
	c->seen_gen = atomic_load(&c->ctl->nsio_gen);
	rc = s_copy_tensors(c, err, errlen);
	if (rc)
		goto fail;
	c->n_out = c->ctl->ring_slots / 2;
	c->out = calloc(c->n_out, sizeof(*c->out));
	if (!c->out) {
		rc = -ENOMEM;
		ns_errf(err, errlen, "out of memory");
		goto fail;
	}
	rc = s_claim_slot(c);
	if (rc) {
		ns_errf(err, errlen, "session %s: all %u client slots are taken", session,
			c->ctl->max_clients);
		goto fail;
	}
	*out = c;
	return 0;
fail:
	free(c->out);
	free(c->t);
	free(c->rt);
	ns_session_destroy(&c->sess);
	free(c);
	return rc;
}

void ns_client_close(struct ns_client **cp)
{
	struct ns_client *c = *cp;
	uint64_t t0;

	if (!c)
		return;
	if (c->slot) {
		for (uint32_t i = 0; i < c->n_out; i++) {
			struct s_out *e = &c->out[i];
			if ((e->state == S_HELD || e->state == S_DONE) && e->cpl.status == 0)
				s_send_retire(c, e->ticket, e->cpl.lease_idx, e->cpl.lease_seq);
			e->state = S_FREE;
		}
		if (s_nsio_live(c) && s_send_read(c, NULL, NS_REQ_CLOSE) == 0) {
			t0 = ns_now_ns();
			while (atomic_load(&c->slot->state) == NS_CLIENT_ACTIVE &&
			       atomic_load(&c->slot->epoch) == c->epoch &&
			       ns_now_ns() - t0 < 1000000000ull && s_nsio_live(c))
				usleep(1000);
		}
		/* nsio gone or slow: free the slot ourselves; a new nsio drops its leases */
		uint32_t st = NS_CLIENT_ACTIVE;
		if (atomic_load(&c->slot->epoch) == c->epoch)
			atomic_compare_exchange_strong(&c->slot->state, &st, NS_CLIENT_CLOSING);
	}
	free(c->out);
	free(c->t);
	free(c->rt);
	ns_session_destroy(&c->sess);
	free(c);
	*cp = NULL;
}

uint64_t ns_client_n_tensors(const struct ns_client *c)
{
	return c->n_tensors;
}

int64_t ns_client_find_tensor(const struct ns_client *c, const char *name)
{
	for (uint64_t i = 0; i < c->n_tensors; i++)
		if (strcmp(c->t[i].name, name) == 0)
			return (int64_t)i;
	return -1;
}

int ns_client_tensor(const struct ns_client *c, uint64_t idx, struct ns_client_tensor *t)
{
	if (idx >= c->n_tensors)
		return -EINVAL;
	t->name = c->t[idx].name;
	t->type = c->t[idx].type;
	t->n_rows = c->rt[idx].n_rows;
	t->row_bytes = c->rt[idx].row_bytes;
	t->file_offset = c->t[idx].file_offset;
	return 0;
}

uint64_t ns_client_arena_bytes(const struct ns_client *c)
{
	return c->ctl->arena_bytes;
}

void ns_client_arena_map(const struct ns_client *c, const void **base, uint64_t *bytes)
{
	*base = c->sess->arena_seg.base;
	*bytes = c->sess->arena_seg.size;
}

uint32_t ns_client_align(const struct ns_client *c)
{
	return c->ctl->align;
}

uint32_t ns_client_max_outstanding(const struct ns_client *c)
{
	return c->n_out;
}

uint32_t ns_client_default_lookahead(const struct ns_client *c)
{
	return atomic_load(&c->ctl->lookahead);
}

void ns_client_beat(struct ns_client *c)
{
	ns_beat(c->ctl, c->o.beat_role);
}

struct ns_ctl *ns_client_ctl(struct ns_client *c)
{
	return c->ctl;
}

static int s_check_window(struct ns_client *c, uint64_t tensor, uint64_t row0, uint64_t nrows)
{
	uint64_t end;

	if (tensor >= c->n_tensors || nrows == 0 || ns_add_u64_overflow(row0, nrows, &end) ||
	    end > c->rt[tensor].n_rows)
		return -EINVAL;
	return 0;
}

int ns_client_request(struct ns_client *c, uint64_t tensor, uint64_t row0, uint64_t nrows,
		      uint64_t *ticket)
{
	struct s_out *e = NULL;
	int rc;

	if (s_check_window(c, tensor, row0, nrows))
		return -EINVAL;
	rc = s_check_gen(c);
	if (rc)
		return rc;
	for (uint32_t i = 0; i < c->n_out && !e; i++)
		if (c->out[i].state == S_FREE)
			e = &c->out[i];
	if (!e) {
		s_drain(c); /* cancelled entries may free up */
		for (uint32_t i = 0; i < c->n_out && !e; i++)
			if (c->out[i].state == S_FREE)
				e = &c->out[i];
		if (!e)
			return -EBUSY;
	}
	e->ticket = ++c->next_ticket;
	e->tensor = (uint32_t)tensor;
	e->row0 = row0;
	e->nrows = nrows;
	e->state = S_PENDING;
	rc = s_send_read(c, e, NS_REQ_READ);
	if (rc) {
		e->state = S_FREE;
		return rc;
	}
	*ticket = e->ticket;
	return 0;
}

int ns_client_prefetch(struct ns_client *c, uint64_t tensor, uint64_t row0, uint64_t nrows)
{
	struct s_out tmp = { .tensor = (uint32_t)tensor, .row0 = row0, .nrows = nrows };

	if (s_check_window(c, tensor, row0, nrows))
		return -EINVAL;
	return s_send_read(c, &tmp, NS_REQ_PREFETCH);
}

int ns_client_predict(struct ns_client *c, uint64_t tensor, uint64_t row0, uint64_t nrows)
{
	struct s_out tmp = { .tensor = (uint32_t)tensor, .row0 = row0, .nrows = nrows };

	if (s_check_window(c, tensor, row0, nrows))
		return -EINVAL;
	return s_send_read(c, &tmp, NS_REQ_PREDICT);
}

int ns_client_wait(struct ns_client *c, uint64_t ticket, struct ns_block *b)
{
	struct s_out *e = s_find(c, ticket);
	uint64_t t0 = 0;
	int rc;

	if (!e || e->state == S_CANCELLED)
		return -ENOENT;
	if (e->state == S_HELD)
		return -EINVAL;
	for (;;) {
		struct ns_client_slot *s = c->slot;
		uint32_t tail;

		rc = s_check_gen(c);
		if (rc)
			return rc;
		s_drain(c);
		if (e->state == S_DONE)
			break;
		if (c->broken)
			return c->broken;
		if (!t0)
			t0 = ns_now_ns();
		atomic_store(&s->cpl_waiting, 1);
		tail = atomic_load(&s->cpl_tail);
		if (tail != atomic_load(&s->cpl_head)) {
			atomic_store(&s->cpl_waiting, 0);
			continue;
		}
		rc = ns_futex_wait(&s->cpl_tail, tail, S_WAIT_NS);
		atomic_store(&s->cpl_waiting, 0);
		ns_beat(c->ctl, c->o.beat_role); /* waiting on nsio is not being stuck */
		if (c->o.cancel && *c->o.cancel)
			return -ECANCELED;
		if (rc == -ETIMEDOUT && (rc = s_check_dead(c)) < 0)
			return rc;
	}
	if (t0)
		atomic_fetch_add(&c->ctl->stats.stall_ns, ns_now_ns() - t0);
	if (e->cpl.status < 0) {
		rc = e->cpl.status;
		e->state = S_FREE;
		return rc;
	}
	e->state = S_HELD;
	b->data = c->sess->arena + e->cpl.lease_off + e->cpl.first;
	b->nbytes = e->nrows * c->rt[e->tensor].row_bytes;
	b->tensor = e->tensor;
	b->row0 = e->row0;
	b->nrows = e->nrows;
	b->ticket = e->ticket;
	b->lease_idx = e->cpl.lease_idx;
	b->lease_seq = e->cpl.lease_seq;
	return 0;
}

int ns_client_retire(struct ns_client *c, struct ns_block *b)
{
	struct s_out *e = s_find(c, b->ticket);
	int rc;

	if (!e || e->state != S_HELD || e->cpl.lease_idx != b->lease_idx ||
	    e->cpl.lease_seq != b->lease_seq)
		return -EINVAL;
	e->state = S_FREE;
	rc = s_send_retire(c, e->ticket, e->cpl.lease_idx, e->cpl.lease_seq);
	b->data = NULL;
	return rc;
}

int ns_client_cancel(struct ns_client *c, uint64_t ticket)
{
	struct s_out *e = s_find(c, ticket);

	if (!e)
		return -ENOENT;
	if (e->state == S_PENDING) {
		e->state = S_CANCELLED;
		return 0;
	}
	if ((e->state == S_DONE || e->state == S_HELD) && e->cpl.status == 0) {
		e->state = S_FREE;
		return s_send_retire(c, e->ticket, e->cpl.lease_idx, e->cpl.lease_seq);
	}
	e->state = S_FREE;
	return 0;
}
