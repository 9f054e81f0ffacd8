/* compute_eval.c - EVAL requests: prompt evaluation, sampling, one TOKEN message per token. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "client.h"
#include "compute_draft_model.h"
#include "compute_eval.h"
#include "compute_image.h"
#include "ctl_msg.h"
#include "forward.h"
#include "model.h"
#include "ns_util.h"
#include "sampling.h"
#include "session.h"
#include "weights_stream.h"

int nsc_send(struct nsc_proc *p, const void *buf, int n)
{
	if (n < 0)
		return n;
	ns_client_beat(p->c); /* every token, logits row and answer is progress */
	while (zmq_send(p->sock, buf, (size_t)n, 0) < 0) {
		if (zmq_errno() == EINTR && !*p->stop)
			continue;
		if (!*p->stop)
			fprintf(stderr, "nscompute: control socket: cannot send: %s\n",
				zmq_strerror(zmq_errno()));
		return -EPIPE;
	}
	return 0;
}

int nsc_send_hello(struct nsc_proc *p)
{
	uint8_t buf[64];
	struct ns_cmsg_hello h = { .n_vocab = ns_fwd_n_vocab(p->f), .n_ctx = ns_fwd_n_ctx(p->f),
				   .pid = (int32_t)getpid() };

	return nsc_send(p, buf, ns_cmsg_enc_hello(&h, buf, sizeof(buf)));
}

int nsc_send_error(struct nsc_proc *p, int code, const char *text)
{
	struct ns_cmsg_error e = { .code = code < 0 ? code : -EIO };
	uint8_t buf[NS_CMSG_HDR + 8 + NS_CMSG_ERR_LEN];

	snprintf(e.text, sizeof(e.text), "%s", text);
	return nsc_send(p, buf, ns_cmsg_enc_error(&e, buf, sizeof(buf)));
}

static int s_send_logits(struct nsc_proc *p, const float *lg, uint32_t n, uint32_t pos0)
{
	uint32_t nv = ns_fwd_n_vocab(p->f);
	size_t sz = ns_cmsg_size_logits(nv);
	uint8_t *buf = malloc(sz);
	int rc = buf ? 0 : -ENOMEM;

	for (uint32_t i = 0; i < n && rc == 0; i++) {
		struct ns_cmsg_logits m = { .pos = pos0 + i, .n_vocab = nv,
					    .logits = lg + (uint64_t)i * nv };

		rc = nsc_send(p, buf, ns_cmsg_enc_logits(&m, buf, sz));
	}
	free(buf);
	return rc;
}

/* p->logits holds rows of logits; its old contents are not kept (every eval rewrites them).
 * Page-aligned whole pages, so the cuda backend can page-lock exactly this buffer. */
int nsc_logits_room(struct nsc_proc *p, uint64_t rows)
{
	const size_t page = 4096;
	uint64_t need;
	float *q;

	if (ns_mul_u64_overflow(rows, ns_fwd_n_vocab(p->f), &need) ||
	    need > (SIZE_MAX - page) / sizeof(float))
		return -ENOMEM;
	if (need <= p->logits_cap)
		return 0;
	q = aligned_alloc(page, ((size_t)need * sizeof(float) + page - 1) / page * page);
	if (!q)
		return -ENOMEM;
#ifdef NS_WITH_CUDA
	nsc_cuda_logits_unpin(p);
#endif
	free(p->logits);
	p->logits = q;
	p->logits_cap = need;
#ifdef NS_WITH_CUDA
	nsc_cuda_logits_pin(p);
#endif
	return 0;
}

static void s_io(struct nsc_proc *p, uint64_t *req, uint64_t *dev)
{
	struct ns_stats_snapshot st;

	ns_stats_snapshot(ns_client_ctl(p->c), &st);
	*req = st.bytes_requested;
	*dev = st.bytes_device;
}

/* A STOP (or QUIT) waiting on the socket? 1 yes, 0 no; -EPROTO for anything else (counted:
 * nsctl sends nothing else during a generation, so the stream is out of step), -EPIPE when
 * receiving failed (a message is lost). */
int nsc_poll_stop(struct nsc_proc *p)
{
	int stop = 0;

	for (;;) {
		zmq_msg_t msg;
		int type, err;

		zmq_msg_init(&msg);
		if (zmq_msg_recv(&msg, p->sock, ZMQ_DONTWAIT) < 0) {
			err = zmq_errno();
			zmq_msg_close(&msg);
			if (err == EAGAIN || err == EINTR)
				return stop;
			fprintf(stderr, "nscompute: control socket: cannot receive: %s\n",
				zmq_strerror(err));
			return -EPIPE;
		}
		type = ns_cmsg_type(zmq_msg_data(&msg), zmq_msg_size(&msg));
		if ((type == NS_CMSG_STOP || type == NS_CMSG_QUIT) &&
		    zmq_msg_size(&msg) == NS_CMSG_HDR) {
			stop = 1;
			if (type == NS_CMSG_QUIT)
				p->quit = true;
		} else {
			p->rejected++;
			stop = -EPROTO;
		}
		zmq_msg_close(&msg);
		if (stop < 0)
			return stop;
	}
}

/* nsc_poll_stop failed: a malformed message ends this request with ERROR (nsctl refuses the
 * channel from then on); a failed receive ends the process (-EPIPE). */
int nsc_stream_broken(struct nsc_proc *p, int err)
{
	if (err != -EPROTO)
		return err;
	fprintf(stderr, "nscompute: malformed control message during a generation\n");
	return nsc_send_error(p, -EPROTO, "malformed control message during a generation");
}

bool nsc_is_stop(const struct ns_cmsg_eval *e, int32_t id)
{
	for (uint32_t i = 0; i < e->n_stop; i++)
		if (e->stop[i] == id)
			return true;
	return false;
}

/* One timed single-token evaluation (a decode step), its logits in p->logits. Returns 0, or
 * with *failed set after sending ERROR: 0 or -EPIPE from that send. */
static int s_decode_step(struct nsc_proc *p, int32_t id, struct ns_cmsg_done *d, bool *failed)
{
	uint64_t t0 = ns_now_ns();
	int rc = ns_fwd_eval(p->f, &id, 1, p->logits, false);

	d->decode_ns += ns_now_ns() - t0;
	if (rc < 0) {
		*failed = true;
		return nsc_send_error(p, rc, ns_fwd_error(p->f));
	}
	d->n_decode++;
	return 0;
}

/* The layer of a tensor named "blk.N.*", or UINT32_MAX. */
static uint32_t s_layer_of(const char *name)
{
	unsigned long l;
	char *end;

	if (strncmp(name, "blk.", 4) || name[4] < '0' || name[4] > '9')
		return UINT32_MAX;
	l = strtoul(name + 4, &end, 10);
	return *end == '.' && l < NS_CMSG_MAX_LAYERS ? (uint32_t)l : UINT32_MAX;
}

uint32_t nsc_layers(const struct ns_model *m)
{
	uint32_t n = 0;

	for (uint64_t t = 0; t < m->n_tensors; t++) {
		uint32_t l = s_layer_of(m->tensors[t].name);

		if (l != UINT32_MAX && l + 1 > n)
			n = l + 1;
	}
	return n;
}

#define S_PROGRESS_NS 100000000ull /* at most ten PROGRESS a second */

void nsc_on_window(void *ctx, uint32_t tensor)
{
	struct nsc_proc *p = ctx;
	struct ns_cmsg_progress m;
	uint8_t buf[64];
	uint32_t l;
	uint64_t now;

	if (!p->pf_on || tensor >= p->m->n_tensors)
		return;
	l = s_layer_of(p->m->tensors[tensor].name); /* the layers before it are done */
	now = ns_now_ns();
	if (l == UINT32_MAX || l <= p->pf_done || l > p->n_layers ||
	    now - p->pf_last < S_PROGRESS_NS)
		return;
	p->pf_done = l;
	p->pf_last = now;
	m = (struct ns_cmsg_progress){ .n_tokens = p->pf_tokens, .layers_done = l,
				       .n_layers = p->n_layers, .elapsed_ns = now - p->pf_t0 };
	/* a failed send is seen again by the DONE or ERROR that ends the request */
	(void)nsc_send(p, buf, ns_cmsg_enc_progress(&m, buf, sizeof(buf)));
}

/* Evaluate, then generate. Returns 0 (DONE or ERROR sent) or -EPIPE (socket gone). */
static int s_eval(struct nsc_proc *p, const struct ns_cmsg_eval *e)
{
	struct ns_sampler_params sp;
	struct ns_sampler *smp = NULL;
	/* teacher forcing: the tail of the tokens is the continuation (ctl_msg.h) */
	uint32_t n_forced = e->flags & NS_EVAL_FORCED ? e->n_predict : 0;
	uint32_t n_prompt = e->n_tokens - n_forced;
	struct ns_cmsg_done d = { .n_prompt = n_prompt, .reason = NS_DONE_PROMPT };
	struct ns_weights_stream_stats w0, w1;
	bool all = e->flags & NS_EVAL_LOGITS_ALL, failed = false;
	uint64_t t0, r0, v0, r1, v1, r2, v2;
	uint8_t buf[64];
	bool images = nsc_images_pending(p);
	char ierr[NS_ERR_LEN];
	int rc;

	if (e->flags & NS_EVAL_RESET)
		ns_fwd_reset(p->f);
	if (e->flags & NS_EVAL_KEEP) {
		rc = ns_fwd_truncate(p->f, e->keep);
		/* -ERANGE: a sliding layer's ring no longer holds what the kept prefix needs;
		 * nsctl evaluates it again from 0 (api.c s_run_kept) */
		if (rc < 0) {
			nsc_images_clear(p);
			return rc == -ERANGE ? nsc_send_error(p, rc, ns_fwd_error(p->f))
					     : nsc_send_error(p, -EINVAL, "keep is past the end "
							      "of the sequence");
		}
	}
	if ((uint64_t)ns_fwd_n_past(p->f) + e->n_tokens > ns_fwd_n_ctx(p->f)) {
		nsc_images_clear(p);
		return nsc_send_error(p, -ENOSPC, "the prompt does not fit the context (-c)");
	}
	if (n_forced >= e->n_tokens)
		return nsc_send_error(p, -EINVAL, "teacher forcing needs a prompt token");
	if (nsc_logits_room(p, all ? n_prompt : 1) < 0)
		return nsc_send_error(p, -ENOMEM, "out of memory for the logits");
	/* the draft model follows the sequence through every request, drafted or not, so a
	 * later drafted one finds the kept prefix in its record (compute_draft_model.h) */
	if (p->dm)
		nsc_dmodel_begin(p->dm, ns_fwd_n_past(p->f), e->tokens, e->n_tokens);
	ns_sampler_params_default(&sp);
	sp.temperature = e->sampling.temperature;
	sp.top_k = e->sampling.top_k;
	sp.top_p = e->sampling.top_p;
	sp.min_p = e->sampling.min_p;
	sp.repeat_penalty = e->sampling.repeat_penalty;
	sp.repeat_last_n = e->sampling.repeat_last_n;
	sp.seed = e->sampling.seed;
	if (e->n_predict && !n_forced && ns_sampler_new(&sp, ns_fwd_n_vocab(p->f), &smp) < 0)
		return nsc_send_error(p, -EINVAL, "bad sampling parameters");

	ns_weights_stream_stats(p->w, &w0);
	s_io(p, &r0, &v0);
	t0 = ns_now_ns();
	p->pf_on = n_prompt >= 2 && p->n_layers; /* PROGRESS during it (nsc_on_window) */
	p->pf_tokens = n_prompt;
	p->pf_done = 0;
	p->pf_t0 = p->pf_last = t0;
	if (images) /* the tower, then the prompt with the images' rows (compute_image.h) */
		rc = nsc_images_eval(p, e->tokens, n_prompt, p->logits, all, &d.n_image_tokens,
				     &d.tower_ns, &d.tower_req, ierr, sizeof(ierr));
	else
		rc = ns_fwd_eval(p->f, e->tokens, n_prompt, p->logits, all);
	p->pf_on = false;
	d.prefill_ns = ns_now_ns() - t0;
	s_io(p, &r1, &v1);
	if (rc < 0) {
		ns_sampler_destroy(&smp);
		if (images)
			ns_fwd_reset(p->f); /* the sequence is undefined after a failed pass */
		return nsc_send_error(p, rc, images ? ierr : ns_fwd_error(p->f));
	}
	if (all && (rc = s_send_logits(p, p->logits, n_prompt,
				       ns_fwd_n_past(p->f) - n_prompt)) < 0)
		goto out;

	/* teacher-forced decode: the same steps as generation, the token given instead of
	 * sampled (every configuration of a benchmark decodes the same tokens) */
	for (uint32_t i = 0; i < n_forced && !*p->stop; i++) {
		const int32_t id = e->tokens[n_prompt + i];
		struct ns_cmsg_token tk = { .id = id, .n_past = ns_fwd_n_past(p->f) };

		d.n_gen++;
		d.reason = NS_DONE_LENGTH;
		if ((rc = nsc_send(p, buf, ns_cmsg_enc_token(&tk, buf, sizeof(buf)))) < 0)
			goto out;
		if ((rc = nsc_poll_stop(p)) < 0) {
			rc = nsc_stream_broken(p, rc);
			goto out;
		}
		if (rc) {
			rc = 0;
			d.reason = NS_DONE_STOPPED;
			break;
		}
		rc = s_decode_step(p, id, &d, &failed);
		if (failed || rc < 0)
			goto out;
		if (all && (rc = s_send_logits(p, p->logits, 1, ns_fwd_n_past(p->f) - 1)) < 0)
			goto out;
	}
	for (uint32_t i = 0; i < e->n_tokens && smp; i++)
		ns_sampler_accept(smp, e->tokens[i]);

	if (smp && (e->flags & NS_EVAL_DRAFT)) {
		rc = nsc_spec_generate(p, e, smp, p->logits, &d, &failed);
		if (failed || rc < 0)
			goto out;
	}
	/* the hot loop: sample, report, evaluate the token */
	while (smp && !(e->flags & NS_EVAL_DRAFT) && !*p->stop) {
		const float *last = p->logits + (all ? (uint64_t)(n_prompt - 1) *
							   ns_fwd_n_vocab(p->f) : 0);
		struct ns_cmsg_token tk;
		int32_t id = ns_sampler_sample(smp, last);

		if (id < 0) {
			rc = nsc_send_error(p, -EINVAL, "sampling found no candidate");
			goto out;
		}
		ns_sampler_accept(smp, id);
		if (p->dm)
			nsc_dmodel_accept(p->dm, id);
		d.n_gen++;
		tk = (struct ns_cmsg_token){ .id = id, .n_past = ns_fwd_n_past(p->f) };
		if ((rc = nsc_send(p, buf, ns_cmsg_enc_token(&tk, buf, sizeof(buf)))) < 0)
			goto out;
		if (nsc_is_stop(e, id)) {
			d.reason = NS_DONE_STOP;
			break;
		}
		if (d.n_gen >= e->n_predict) {
			d.reason = NS_DONE_LENGTH;
			break;
		}
		if (ns_fwd_n_past(p->f) >= ns_fwd_n_ctx(p->f)) {
			d.reason = NS_DONE_CONTEXT;
			break;
		}
		if ((rc = nsc_poll_stop(p)) < 0) {
			rc = nsc_stream_broken(p, rc);
			goto out;
		}
		if (rc) {
			rc = 0;
			d.reason = NS_DONE_STOPPED;
			break;
		}
		all = false;
		rc = s_decode_step(p, id, &d, &failed);
		if (failed || rc < 0)
			goto out;
	}
	if (*p->stop) {
		rc = -EPIPE;
		goto out;
	}
	s_io(p, &r2, &v2);
	ns_weights_stream_stats(p->w, &w1);
	d.n_past = ns_fwd_n_past(p->f);
	d.wait_ns = w1.wait_ns - w0.wait_ns;
	d.blocks = w1.blocks - w0.blocks;
	d.block_bytes = w1.bytes - w0.bytes;
	d.req_prefill = r1 - r0;
	d.dev_prefill = v1 - v0;
	d.req_decode = r2 - r1;
	d.dev_decode = v2 - v1;
	{
		uint8_t db[160];

		rc = nsc_send(p, db, ns_cmsg_enc_done(&d, db, sizeof(db)));
	}
out:
	ns_sampler_destroy(&smp);
	return rc;
}

/* STEP: every sequence's tokens in one batched evaluation (forward.h, ns_fwd_eval_batch).
 * Returns 0 (DONE or ERROR sent) or -EPIPE. */
static int s_step(struct nsc_proc *p, const struct ns_cmsg_step *st)
{
	struct ns_cmsg_done d = { .reason = NS_DONE_PROMPT };
	struct ns_weights_stream_stats w0, w1;
	uint32_t n = 0, n_out = 0, out[NS_CMSG_MAX_SEQ], idx[NS_CMSG_MAX_SEQ];
	uint32_t *seq = NULL;
	uint64_t t0, r0, v0, r1, v1;
	int rc;

	for (uint32_t i = 0; i < st->n_seq; i++) {
		const struct ns_cmsg_step_seq *q = &st->seq[i];

		if (q->keep > ns_fwd_seq_n_past(p->f, q->slot) ||
		    (uint64_t)q->keep + q->n_tokens > ns_fwd_n_ctx(p->f))
			return nsc_send_error(p, -EINVAL, "step: a slot's kept positions and tokens "
					    "do not fit what it holds and the context (-c)");
	}
	for (uint32_t i = 0; i < st->n_seq; i++)
		n += st->seq[i].n_tokens;
	if (!(seq = malloc((size_t)n * sizeof(*seq))) || nsc_logits_room(p, st->n_seq) < 0) {
		free(seq);
		return nsc_send_error(p, -ENOMEM, "out of memory for a step");
	}
	n = 0;
	for (uint32_t i = 0; i < st->n_seq; i++) {
		const struct ns_cmsg_step_seq *q = &st->seq[i];

		/* the bounds are checked above; a recurrent state refuses any other cut than
		 * to 0 or to all it holds (one sequence: nothing else was cut yet) */
		if ((rc = ns_fwd_seq_truncate(p->f, q->slot, q->keep)) < 0) {
			free(seq);
			/* -ERANGE: a sliding layer's ring cannot go back so far; nsctl serve
			 * evaluates the slot again from 0 (srv_sched.c) */
			return rc == -ERANGE ? nsc_send_error(p, rc, ns_fwd_error(p->f)) :
			       nsc_send_error(p, -EINVAL, "step: this model's recurrent state goes "
					      "back only to the start: keep 0 or all the slot holds");
		}
		if (q->slot == 0 && p->dm) /* EVAL's sequence: the draft model follows it */
			nsc_dmodel_begin(p->dm, q->keep, st->tokens + n, q->n_tokens);
		for (uint32_t k = 0; k < q->n_tokens; k++)
			seq[n++] = q->slot;
		if (q->want_logits) {
			out[n_out] = n - 1;
			idx[n_out++] = i;
		}
	}
	ns_weights_stream_stats(p->w, &w0);
	s_io(p, &r0, &v0);
	t0 = ns_now_ns();
	rc = ns_fwd_eval_batch(p->f, &(struct ns_fwd_batch){ .tokens = st->tokens, .seq = seq,
		.n = n, .out_rows = out, .n_out = n_out, .logits = p->logits });
	d.prefill_ns = ns_now_ns() - t0;
	s_io(p, &r1, &v1);
	free(seq);
	if (rc < 0) {
		/* the slots' contents are undefined now: nsctl starts them over */
		for (uint32_t i = 0; i < st->n_seq; i++)
			ns_fwd_seq_truncate(p->f, st->seq[i].slot, 0);
		return nsc_send_error(p, rc, ns_fwd_error(p->f));
	}
	for (uint32_t k = 0; k < n_out; k++)
		if ((rc = s_send_logits(p, p->logits + (uint64_t)k * ns_fwd_n_vocab(p->f), 1,
					idx[k])) < 0)
			return rc;
	ns_weights_stream_stats(p->w, &w1);
	d.n_prompt = n;
	d.wait_ns = w1.wait_ns - w0.wait_ns;
	d.blocks = w1.blocks - w0.blocks;
	d.block_bytes = w1.bytes - w0.bytes;
	d.req_prefill = r1 - r0;
	d.dev_prefill = v1 - v0;
	{
		uint8_t db[160];

		return nsc_send(p, db, ns_cmsg_enc_done(&d, db, sizeof(db)));
	}
}

int nsc_handle(struct nsc_proc *p, const void *buf, size_t len)
{
	int32_t stop[NS_CMSG_MAX_STOP];
	struct ns_cmsg_eval e;
	int type = ns_cmsg_type(buf, len);

	if (type == NS_CMSG_QUIT && len == NS_CMSG_HDR)
		return 1;
	if (type == NS_CMSG_STOP && len == NS_CMSG_HDR)
		return 0; /* the generation it meant has ended already */
	if (type == NS_CMSG_IMAGES)
		return nsc_images_set(p, buf, len);
	if (type == NS_CMSG_STEP) {
		struct ns_cmsg_step st;

		if (!p->tokens && !(p->tokens = malloc(NS_CMSG_MAX_TOKENS * sizeof(int32_t))))
			return nsc_send_error(p, -ENOMEM, "out of memory");
		if (ns_cmsg_dec_step(buf, len, ns_fwd_n_vocab(p->f), ns_fwd_n_seq(p->f), p->tokens,
				     NS_CMSG_MAX_TOKENS, &st) == 0)
			return s_step(p, &st) < 0 ? -EPIPE : 0;
	}
	if (type == NS_CMSG_EVAL) {
		if (!p->tokens && !(p->tokens = malloc(NS_CMSG_MAX_TOKENS * sizeof(int32_t))))
			return nsc_send_error(p, -ENOMEM, "out of memory");
		if (ns_cmsg_dec_eval(buf, len, ns_fwd_n_vocab(p->f), p->tokens, NS_CMSG_MAX_TOKENS,
				     stop, &e) == 0) {
			int rc = s_eval(p, &e);

			nsc_images_clear(p); /* IMAGES are for this EVAL only, taken or refused */
			return rc < 0 ? rc : p->quit ? 1 : 0;
		}
	}
	p->rejected++;
	fprintf(stderr, "nscompute: malformed control message rejected (%zu bytes, type %d)\n",
		len, type);
	return nsc_send_error(p, -EPROTO, "malformed control message rejected");
}

void nsc_proc_free(struct nsc_proc *p)
{
	nsc_route_close(p);
	if (p->sock && p->stop && *p->stop) { /* told to stop: nobody waits for what is queued */
		int linger = 0;

		zmq_setsockopt(p->sock, ZMQ_LINGER, &linger, sizeof(linger));
	}
	if (p->sock)
		zmq_close(p->sock);
	if (p->zctx)
		zmq_ctx_term(p->zctx);
	nsc_dmodel_free(&p->dm);
	nsc_images_clear(p);
	nsc_tower_free(&p->tower);
	ns_fwd_destroy(&p->f);
	ns_weights_destroy(&p->w);
	ns_client_close(&p->c);
	ns_model_close(&p->m);
	free(p->tokens);
#ifdef NS_WITH_CUDA
	nsc_cuda_logits_unpin(p);
#endif
	free(p->logits);
}
