/* attach.c - nsio start-up: session, model, tensor table, budget check, restart recovery. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "arena.h"
#include "nsio.h"
#include "ns_util.h"
#include "ring.h"

static uint64_t s_model_hash(const struct ns_model *m)
{
	uint64_t h = 1469598103934665603ull;
	uint64_t v[6];

	for (uint64_t i = 0; i < m->n_tensors; i++) {
		const struct ns_model_tensor *t = &m->tensors[i];
		v[0] = t->type;
		v[1] = t->shard;
		v[2] = t->file_offset;
		v[3] = t->n_rows;
		v[4] = t->row_bytes;
		v[5] = i;
		for (size_t k = 0; k < sizeof(v); k++) {
			h ^= ((const uint8_t *)v)[k];
			h *= 1099511628211ull;
		}
	}
	return h ^ m->n_shards;
}

/* --mmproj: the tower's tensors after the model's, in one table, read as the model's are
 * (docs/decisions.md "Images and the vision tower"). */
static int s_open_mmproj(struct nsio *s)
{
	struct ns_model *x = NULL;
	char err[NS_ERR_LEN];
	int rc = ns_model_open_flags(s->o.mmproj_path, NS_MODEL_OPEN_NO_VOCAB, &x, err,
				     sizeof(err));

	if (rc == 0 && (rc = ns_model_append(s->model, &x, err, sizeof(err))) == 0) {
		s->text.shards = s->model->shards; /* the view: the model's first tensors */
		s->text.tensors = s->model->tensors;
		s->text.slots = s->model->slots;
		s->text.n_slots = s->model->n_slots;
		return 0;
	}
	ns_model_close(&x);
	fprintf(stderr, "nsio: --mmproj %s: %s\n", s->o.mmproj_path, err);
	return rc == -ENOMEM ? 1 : 2;
}

static int s_open_session(struct nsio *s)
{
	char err[NS_ERR_LEN];
	struct ns_session_params p = NS_SESSION_PARAMS_DEFAULT;
	int rc = -ENOENT;

	if (s->o.session)
		rc = ns_session_attach(s->o.session, true, &s->sess, err, sizeof(err));
	if (rc == -ENOENT) {
		if (!s->o.mem_budget) {
			fprintf(stderr, "nsio: --mem-budget is required to create a session\n");
			return 2;
		}
		p.arena_bytes = s->o.mem_budget;
		p.id = s->o.session;
		rc = ns_session_create(&p, &s->sess, err, sizeof(err));
		if (rc) {
			fprintf(stderr, "nsio: cannot create session: %s\n", err);
			return rc == -EINVAL ? 2 : rc == -EPERM ? NS_EXIT_FOREIGN : 1;
		}
		s->created_session = true;
		if (!s->o.quiet)
			printf("nsio: created session %s\n", s->sess->id);
	} else if (rc) {
		fprintf(stderr, "nsio: cannot attach session %s: %s\n", s->o.session, err);
		return rc == -EPERM ? NS_EXIT_FOREIGN : 1;
	} else {
		ns_session_set_owner(s->sess, false);
		if (s->o.mem_budget && s->o.mem_budget != s->sess->ctl->budget_bytes) {
			fprintf(stderr, "nsio: --mem-budget %llu differs from session %s's %llu B\n",
				(unsigned long long)s->o.mem_budget, s->sess->id,
				(unsigned long long)s->sess->ctl->budget_bytes);
			return 2;
		}
	}
	s->ctl = s->sess->ctl;
	return 0;
}

/* Claim the nsio role: refuse while another nsio lives. */
static int s_claim(struct nsio *s)
{
	int32_t old = atomic_load(&s->ctl->nsio_pid), self = (int32_t)getpid();

	if (old != 0 && old != self && ns_pid_alive(old)) {
		fprintf(stderr, "nsio: session %s is served by nsio pid %d already\n", s->sess->id,
			(int)old);
		return 1;
	}
	if (!atomic_compare_exchange_strong(&s->ctl->nsio_pid, &old, self)) {
		fprintf(stderr, "nsio: another nsio claimed session %s concurrently\n", s->sess->id);
		return 1;
	}
	return 0;
}

static int s_publish_tensors(struct nsio *s)
{
	struct ns_ctl *c = s->ctl;
	const struct ns_model *m = s->model;
	uint64_t hash = s_model_hash(m);
	uint64_t prev = atomic_load(&c->n_tensors);

	if (m->n_tensors > c->tensor_cap) {
		fprintf(stderr, "nsio: model has %llu tensors, the session holds %u\n",
			(unsigned long long)m->n_tensors, c->tensor_cap);
		return 2;
	}
	if (prev && atomic_load(&c->model_hash) != hash) {
		fprintf(stderr, "nsio: session %s was serving a different model\n", s->sess->id);
		return 2;
	}
	for (uint64_t i = 0; i < m->n_tensors; i++) {
		struct ns_tensor_entry *e = &ns_ctl_tensors(c)[i];
		const struct ns_model_tensor *t = &m->tensors[i];

		memset(e, 0, sizeof(*e));
		snprintf(e->name, sizeof(e->name), "%s", t->name);
		e->type = t->type;
		e->shard = t->shard;
		e->file_offset = t->file_offset;
		e->n_rows = t->n_rows;
		e->row_bytes = t->row_bytes;
		s->rt[i].n_rows = t->n_rows;
		s->rt[i].row_bytes = t->row_bytes;
	}
	atomic_store(&c->model_hash, hash);
	atomic_store(&c->n_tensors, m->n_tensors);
	return 0;
}

static int s_check_budget(struct nsio *s)
{
	uint64_t worst, span, need;
	char b1[32], b2[32], b3[32];

	need = nsio_min_budget(s->model, s->o.lookahead, s->ctl->align, &worst, &span);
	if (need <= s->ctl->arena_bytes)
		return 0;
	fprintf(stderr, "nsio: memory budget %s cannot hold lookahead+1 = %u blocks of one row of "
		"tensor '%s' (%s per block with O_DIRECT alignment); smallest budget that works: "
		"%s (%llu bytes)\n",
		ns_format_bytes(s->ctl->budget_bytes, b1, sizeof(b1)), s->o.lookahead + 1,
		s->model->tensors[worst].name, ns_format_bytes(span, b2, sizeof(b2)),
		ns_format_bytes(need, b3, sizeof(b3)), (unsigned long long)need);
	return 2;
}

/* Restart rule: a lease survives a dead nsio only if its owner is a live client and its
 * completion was published (the client may be reading it). A lease whose reads were in flight
 * is quarantined: the kernel finishes a killed process's reads asynchronously (io_uring's exit
 * work runs after the process is gone), so those bytes may still land; the new nsio keeps the
 * range reserved for --restart-quarantine-ms before reusing it. Everything else is dropped and
 * re-issued by its client. */
static enum ns_lease_fate s_lease_fate(struct ns_ctl *c, struct ns_lease *l, void *arg)
{
	struct ns_client_slot *cs;
	uint32_t st = atomic_load(&l->state), tail;

	(void)arg;
	if (st == NS_LEASE_ALLOC || st == NS_LEASE_ORPHAN || st == NS_LEASE_QUARANTINE)
		return NS_LEASE_QUARANTINED;
	if (st != NS_LEASE_DELIVERED || l->owner >= c->max_clients)
		return NS_LEASE_DROP;
	cs = ns_ctl_client(c, l->owner);
	if (atomic_load(&cs->state) != NS_CLIENT_ACTIVE || atomic_load(&cs->epoch) != l->client_epoch
	    || !ns_pid_alive(atomic_load(&cs->pid)))
		return NS_LEASE_DROP;
	/* nsio writes the record at cpl_tail, marks the lease DELIVERED with cpl_pos = that
	 * position, then publishes cpl_tail + 1: only cpl_pos == cpl_tail is unpublished */
	tail = atomic_load(&cs->cpl_tail);
	return tail != l->cpl_pos ? NS_LEASE_KEEP : NS_LEASE_DROP;
}

int nsio_attach(struct nsio *s)
{
	char err[NS_ERR_LEN];
	uint64_t gen, dropped, quarantined = 0;
	int rc;

	rc = ns_model_open_flags(s->o.model_path, NS_MODEL_OPEN_NO_VOCAB, &s->model, err,
				 sizeof(err));
	if (rc) {
		fprintf(stderr, "nsio: %s\n", err);
		return rc == -ENOMEM ? 1 : 2; /* missing, unreadable or malformed: bad input */
	}
	s->text = *s->model;
	if (s->o.mmproj_path && (rc = s_open_mmproj(s)) != 0)
		return rc;
	rc = s_open_session(s);
	if (rc)
		return rc;
	rc = s_claim(s);
	if (rc)
		return rc;
	s->rt = calloc(s->model->n_tensors ? s->model->n_tensors : 1, sizeof(*s->rt));
	if (!s->rt)
		return fprintf(stderr, "nsio: out of memory\n"), 1;
	atomic_store(&s->ctl->nsio_state, NS_NSIO_RECOVERING);
	gen = atomic_fetch_add(&s->ctl->hdr.generation, 1) + 1;
	atomic_store(&((struct ns_seg_header *)s->sess->arena_seg.base)->generation, gen);
	atomic_store(&s->ctl->nsio_gen, (uint32_t)gen);
	if (gen > 1)
		atomic_fetch_add(&s->ctl->stats.restarts, 1);
	s->restarted = gen > 1;
	rc = s_publish_tensors(s);
	if (rc)
		return rc;
	rc = s_check_budget(s);
	if (rc)
		return rc;
	dropped = ns_arena_recover(s->ctl, s_lease_fate, NULL, &quarantined);
	if (quarantined)
		s->quarantine_until = ns_now_ns() + s->o.quarantine_ms * 1000000ull;
	atomic_fetch_add(&s->ctl->stats.leases_reclaimed, dropped);
	atomic_store(&s->ctl->stats.ahead_bytes, 0); /* read-ahead of a dead nsio is gone */
	atomic_store(&s->ctl->lookahead, s->o.lookahead);
	atomic_store(&s->ctl->queue_depth, s->o.queue_depth);
	atomic_store(&s->ctl->block_bytes, s->o.block_bytes);
	if (s->o.run_ahead && nsio_build_schedule(s) != 0)
		return fprintf(stderr, "nsio: out of memory\n"), 1;
	if (!s->o.quiet && gen > 1)
		printf("nsio: generation %llu attached to session %s, %llu leases reclaimed, %llu "
		       "quarantined\n", (unsigned long long)gen, s->sess->id,
		       (unsigned long long)dropped, (unsigned long long)quarantined);
	return 0;
}

/* Called once the ring is up: clients may now talk to us. */
void nsio_go_live(struct nsio *s);
void nsio_go_live(struct nsio *s)
{
	atomic_store(&s->ctl->nsio_state, NS_NSIO_RUNNING);
	ns_futex_wake(&s->ctl->nsio_gen, 1 << 30);
	for (uint32_t i = 0; i < s->ctl->max_clients; i++)
		ns_futex_wake(&ns_ctl_client(s->ctl, i)->cpl_tail, 1 << 30);
}
