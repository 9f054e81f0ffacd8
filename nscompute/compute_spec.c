/* compute_spec.c - speculative generation (EVAL with NS_EVAL_DRAFT): the pending token (sampled,
 * not yet evaluated) and up to k drafted tokens (compute_draft.h, the draft model's:
 * compute_draft_model.h, or the MTP block's: forward/mtp.h) go through the model as one
 * chunk, so the weights are read once for up to k + 1 tokens; the logits of every position of
 * the chunk verify the drafts in order (ns_sampler_verify: under greedy decoding the agreeing
 * prefix, under sampling the speculative sampling rule), the first rejection is replaced by
 * the target's own token, and the KV cache is cut back past it (ns_fwd_truncate; a recurrent
 * state, qwen35's, is rolled back to the mark set before the pass and its recurrence run again
 * over the kept tokens: ns_fwd_mark). The tokens,
 * their TOKEN messages (n_past as the one-token loop reports it) and the sampler's history are
 * those of compute_eval.c's loop; greedy output is the same, sampled output has the same
 * distribution. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "compute_draft.h"
#include "compute_draft_model.h"
#include "compute_eval.h"
#include "ctl_msg.h"
#include "forward.h"
#include "ns_util.h"
#include "sampling.h"

struct s_spec {
	struct nsc_proc *p;
	const struct ns_cmsg_eval *e;
	struct ns_sampler *smp;
	struct ns_cmsg_done *d;
	struct ns_cmsg_spec sp;
	struct nsc_draft dr;
	int32_t *ctx;      /* (cap) this request's tokens, then the generated ones */
	uint32_t n, cap;
	uint32_t logical;  /* positions before the last emitted token: the n_past the one-token
			    * loop has when it emits that token */
	struct nsc_dmodel *dm; /* NS_DRAFT_MODEL: the resident drafter (follows every token) */
	bool mtp;              /* NS_DRAFT_MTP: the pass's MTP block (forward.h, mtp.h) */
};

/* Emit generated token id, which follows `logical` positions: history, TOKEN, the end tests of
 * the one-token loop. 1: the generation ends (d->reason set), 0: go on, <0: -EPIPE. */
static int s_emit(struct s_spec *s, int32_t id, uint32_t logical)
{
	struct ns_cmsg_token tk = { .id = id, .n_past = logical };
	uint8_t buf[64];
	int rc;

	ns_sampler_accept(s->smp, id);
	if (s->dm)
		nsc_dmodel_accept(s->dm, id);
	s->d->n_gen++;
	s->logical = logical;
	if (s->n < s->cap)
		s->ctx[s->n++] = id;
	if ((rc = nsc_send(s->p, buf, ns_cmsg_enc_token(&tk, buf, sizeof(buf)))) < 0)
		return rc;
	if (nsc_is_stop(s->e, id))
		s->d->reason = NS_DONE_STOP;
	else if (s->d->n_gen >= s->e->n_predict)
		s->d->reason = NS_DONE_LENGTH;
	else if (logical >= ns_fwd_n_ctx(s->p->f))
		s->d->reason = NS_DONE_CONTEXT;
	else
		return 0;
	return 1;
}

/* One pass over chunk (n tokens) after the KV cache was cut to `logical`: logits of every
 * position into p->logits, timed into d and the drafter. 0, or ERROR sent (*failed). */
static int s_pass(struct s_spec *s, const int32_t *chunk, uint32_t n, bool *failed)
{
	struct nsc_proc *p = s->p;
	uint64_t t0, dt;
	int rc = ns_fwd_truncate(p->f, s->logical);

	/* a cut back by at most the last pass's tokens: within a ring's bound whenever a pass
	 * fits one chunk (docs/decisions.md); else refused, never wrong logits */
	if (rc < 0) {
		*failed = true;
		return nsc_send_error(p, -EINVAL, rc == -ERANGE ? ns_fwd_error(p->f) :
				      "speculative decoding: the sequence cannot be cut back (a "
				      "recurrent state)");
	}
	/* a recurrent state can be rolled back into this pass's tokens (no-op for a KV cache) */
	if (n > 1 && (rc = ns_fwd_mark(p->f)) < 0) {
		*failed = true;
		return nsc_send_error(p, rc, ns_fwd_error(p->f));
	}
	t0 = ns_now_ns();
	rc = ns_fwd_eval(p->f, chunk, n, p->logits, true);
	dt = ns_now_ns() - t0;
	s->d->decode_ns += dt;
	if (rc < 0) {
		*failed = true;
		return nsc_send_error(p, rc, ns_fwd_error(p->f));
	}
	s->d->n_decode++;
	if (n > 1) {
		s->sp.draft_passes++;
		s->sp.chunk_ns += dt;
	} else {
		s->sp.one_ns += dt;
	}
	return 0;
}

/* Verify the n drafts of chunk (chunk[0] the pending token, evaluated at s->logical) against
 * its rows of logits and emit what is kept. *next = the new pending token (the first
 * rejection's replacement, or after n kept drafts the last row's), *acc = the drafts kept.
 * Returns as s_emit. */
static int s_verify(struct s_spec *s, const int32_t *chunk, uint32_t n, uint64_t pass_ns,
		    int32_t *next, uint32_t *acc)
{
	const uint32_t nv = ns_fwd_n_vocab(s->p->f), base = s->logical;
	bool ok = true;
	int rc = 0;

	*acc = 0;
	for (uint32_t i = 0; i < n && rc == 0 && ok; i++) {
		int32_t id = ns_sampler_verify(s->smp, s->p->logits + (uint64_t)i * nv,
					       chunk[1 + i], &ok);

		if (!ok)
			*next = id;
		else if ((*acc)++, (rc = s_emit(s, id, base + 1 + i)) < 0)
			return rc;
	}
	nsc_draft_observe(&s->dr, n, *acc, pass_ns);
	s->sp.drafted += n;
	s->sp.accepted += *acc;
	if (rc == 0 && ok) /* every draft kept: the last row gives one more token */
		*next = ns_sampler_sample(s->smp, s->p->logits + (uint64_t)n * nv);
	return rc;
}

/* Up to k drafts after s->ctx into out, *nd of them (fewer than the drafter's min: none).
 * 0; the drafter failed: -1 after ERROR was sent, -EPIPE when it could not be. */
static int s_propose(struct s_spec *s, int32_t id, uint32_t k, int32_t *out, uint32_t *nd)
{
	char err[NS_ERR_LEN];
	int got;

	if (s->mtp) { /* --draft mtp: chained from the pending token id (mtp.h) */
		got = ns_fwd_mtp_draft(s->p->f, id, k, out, NULL);
		if (got < 0)
			return nsc_send_error(s->p, got, ns_fwd_error(s->p->f)) < 0 ? -EPIPE : -1;
		*nd = (uint32_t)got >= (k < s->dr.min ? k : s->dr.min) ? (uint32_t)got : 0;
		return 0;
	}
	if (!s->dm) {
		*nd = nsc_draft_propose(&s->dr, s->ctx, s->n, s->d->n_gen - 1, k, out);
		return 0;
	}
	got = nsc_dmodel_propose(s->dm, k, out, err, sizeof(err));
	if (got < 0)
		return nsc_send_error(s->p, got, err) < 0 ? -EPIPE : -1;
	/* fewer than min count as none, as nsc_draft_propose's */
	*nd = (uint32_t)got >= (k < s->dr.min ? k : s->dr.min) ? (uint32_t)got : 0;
	return 0;
}

/* Emit id and what the passes after it yield until the generation ends. Returns as
 * nsc_spec_generate. */
static int s_loop(struct s_spec *s, int32_t id, bool *failed)
{
	struct nsc_proc *p = s->p;
	int32_t chunk[1 + NS_CMSG_MAX_DRAFT];
	uint32_t at = ns_fwd_n_past(p->f); /* the positions before the pending token */
	int rc;

	for (;;) {
		uint32_t room, k, nd, acc, base;
		uint64_t before, t_draft;

		if (id < 0) {
			*failed = true;
			return nsc_send_error(p, -EINVAL, "sampling found no candidate");
		}
		if ((rc = s_emit(s, id, at)) != 0)
			return rc < 0 ? rc : 0;
		if (*p->stop)
			return -EPIPE;
		if ((rc = nsc_poll_stop(p)) < 0) {
			*failed = true;
			return nsc_stream_broken(p, rc);
		}
		if (rc) {
			s->d->reason = NS_DONE_STOPPED;
			return 0;
		}
		/* drafts: as many as the adaptive length, the context and n_predict allow */
		room = ns_fwd_n_ctx(p->f) - s->logical - 1;
		k = nsc_draft_len(&s->dr);
		k = k < room ? k : room;
		k = k < s->e->n_predict - s->d->n_gen ? k : s->e->n_predict - s->d->n_gen;
		chunk[0] = id;
		t_draft = ns_now_ns();
		if ((rc = s_propose(s, id, k, chunk + 1, &nd)) < 0) {
			*failed = true;
			return rc == -EPIPE ? rc : 0;
		}
		t_draft = ns_now_ns() - t_draft;
		before = s->d->decode_ns;
		base = s->logical;
		if ((rc = s_pass(s, chunk, 1 + nd, failed)) < 0 || *failed)
			return rc;
		if (nd == 0) {
			nsc_draft_observe(&s->dr, 0, 0, s->d->decode_ns - before);
			id = ns_sampler_sample(s->smp, p->logits);
			at = base + 1;
			continue;
		}
		/* a drafter's own time is part of what a longer draft costs */
		if ((rc = s_verify(s, chunk, nd, s->d->decode_ns - before + t_draft, &id,
				   &acc)) != 0)
			return rc < 0 ? rc : 0;
		at = base + 1 + acc;
	}
}

int nsc_spec_generate(struct nsc_proc *p, const struct ns_cmsg_eval *e, struct ns_sampler *smp,
		      const float *last, struct ns_cmsg_done *d, bool *failed)
{
	struct s_spec s = { .p = p, .e = e, .smp = smp, .d = d };
	int32_t first = ns_sampler_sample(smp, last); /* (before p->logits may move) */
	uint64_t cap = (uint64_t)e->n_tokens + (e->n_predict < ns_fwd_n_ctx(p->f) ?
						 e->n_predict : ns_fwd_n_ctx(p->f));
	uint8_t buf[64];
	int rc;

	nsc_draft_init(&s.dr, e->draft.kind, e->draft.max, e->draft.min, e->draft.oracle,
		       e->draft.n_oracle);
	if (e->draft.kind == NS_DRAFT_MODEL) {
		if (!p->dm) {
			*failed = true;
			return nsc_send_error(p, -EINVAL, "no draft model: nscompute was started "
					      "without --draft-model");
		}
		s.dm = p->dm; /* following the sequence: compute_eval.c gave it the request */
	}
	if (e->draft.kind == NS_DRAFT_MTP) {
		if (!p->draft_mtp) {
			*failed = true;
			return nsc_send_error(p, -EINVAL, "no MTP block: nscompute was started "
					      "without --draft-mtp");
		}
		s.mtp = true; /* following the sequence: every ns_fwd_eval feeds it */
	}
	if (cap > UINT32_MAX || !(s.ctx = malloc((size_t)cap * sizeof(*s.ctx))) ||
	    nsc_logits_room(p, 1 + (uint64_t)e->draft.max) < 0) {
		free(s.ctx);
		*failed = true;
		return nsc_send_error(p, -ENOMEM, "out of memory for speculative decoding");
	}
	s.cap = (uint32_t)cap;
	memcpy(s.ctx, e->tokens, (size_t)e->n_tokens * sizeof(*s.ctx));
	s.n = e->n_tokens;
	rc = s_loop(&s, first, failed);
	free(s.ctx);
	if (rc < 0 || *failed)
		return rc;
	/* the KV cache holds what the one-token loop's would: all but the last token */
	if ((rc = ns_fwd_truncate(p->f, s.logical)) < 0) {
		*failed = true;
		return nsc_send_error(p, -EINVAL, rc == -ERANGE ? ns_fwd_error(p->f) :
				      "speculative decoding: the sequence cannot be cut back (a "
				      "recurrent state)");
	}
	s.sp.k_last = nsc_draft_len(&s.dr);
	return nsc_send(p, buf, ns_cmsg_enc_spec(&s.sp, buf, sizeof(buf)));
}
