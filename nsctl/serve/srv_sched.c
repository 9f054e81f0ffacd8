/* srv_sched.c - see srv_sched.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ns_util.h"
#include "srv_sched.h"
#include "tokenizer.h"

/* One active sequence: the scheduler thread's alone. */
struct srv_seq {
	struct srv_req *r;
	struct ns_sampler *smp;
	struct srv_text text;
	uint32_t n_done;          /* prompt tokens in the slot's cache */
	bool first_eval;          /* the next evaluation is the first (reuse is counted) */
	int32_t last;             /* sampled and not evaluated yet; -1 while prefilling */
	uint32_t n_gen;
	uint32_t n_cached;
	enum srv_finish finish;   /* set when the sequence ends */
	int err_status;
	char err[320];
	/* output of this step, published under the lock */
	struct ns_text answer, reasoning;
	struct srv_token_lp *lps;
	uint32_t n_lps, cap_lps;
};

struct srv_slot {
	int32_t *toks;            /* (cap) what the slot's cache holds: positions [0, n) */
	uint32_t n, cap;
	uint64_t last_used;
	bool busy;
	struct srv_seq seq;
	float *logits;            /* (n_vocab) after the slot's last token */
};

struct srv_sched {
	pthread_mutex_t mu;
	pthread_cond_t cv;        /* work arrived, or stop */
	pthread_t th;
	struct srv_engine *eng;
	const struct ns_tok *tok;
	struct srv_sched_opts o;
	uint32_t n_slots, n_vocab, n_ctx;
	bool whole_prefix;        /* recurrent model: reuse a slot only whole (s_pick_slot) */
	struct srv_slot *slots;
	float *biased;            /* (n_vocab) logits + logit_bias */
	struct srv_req *head, *tail;
	uint32_t n_waiting, n_active;
	uint64_t order, clock;
	bool stopping, dead;
	bool joined;              /* srv_sched_stop has run */
	bool ended;               /* the thread has left its loop */
	pthread_cond_t cv_end;    /* signalled when it does */
	uint64_t deadline_ns;     /* stopping: active requests end with an error after it */
	uint64_t served, steps;
};

void srv_params_free(struct srv_params *p)
{
	free(p->model);
	free(p->prompt);
	free(p->bias_ids);
	free(p->bias);
	for (size_t i = 0; i < p->n_stop; i++)
		free(p->stop[i]);
	memset(p, 0, sizeof(*p));
}

struct srv_req *srv_req_new(struct srv_params *p)
{
	struct srv_req *r = calloc(1, sizeof(*r));

	if (!r || pthread_cond_init(&r->cv, NULL)) {
		free(r);
		return NULL;
	}
	r->p = *p;
	memset(p, 0, sizeof(*p));
	r->refs = 2;
	return r;
}

static void s_req_free(struct srv_req *r)
{
	srv_params_free(&r->p);
	free(r->answer.buf);
	free(r->reasoning.buf);
	free(r->lps);
	pthread_cond_destroy(&r->cv);
	free(r);
}

/* Under the lock. */
static void s_release_locked(struct srv_req *r)
{
	if (--r->refs == 0)
		s_req_free(r);
}

void srv_sched_release(struct srv_sched *s, struct srv_req *r)
{
	pthread_mutex_lock(&s->mu);
	s_release_locked(r);
	pthread_mutex_unlock(&s->mu);
}

/* End a request that holds no slot (waiting, refused). Under the lock. */
static void s_req_fail(struct srv_req *r, int status, const char *msg)
{
	r->finish = SRV_FIN_ERROR;
	r->err_status = status;
	snprintf(r->err, sizeof(r->err), "%s", msg);
	r->done = true;
	r->queued = false;
	pthread_cond_broadcast(&r->cv);
}

/* ------------------------------------------------------------ slots ------------------ */

static uint32_t s_lcp(const int32_t *a, uint32_t na, const int32_t *b, uint32_t nb)
{
	uint32_t k = 0, n = na < nb ? na : nb;

	while (k < n && a[k] == b[k])
		k++;
	return k;
}

/* The free slot for a prompt: longest shared prefix, then least recently used. A recurrent
 * model's state cannot be cut back: its slot's prefix counts only when it is all the slot
 * holds and the prompt goes past it (else the prompt is evaluated whole, from position 0). */
static int64_t s_pick_slot(struct srv_sched *s, const int32_t *prompt, uint32_t n,
			   uint32_t *lcp)
{
	int64_t best = -1;
	uint32_t best_lcp = 0;

	for (uint32_t i = 0; i < s->n_slots; i++) {
		struct srv_slot *sl = &s->slots[i];
		uint32_t k;

		if (sl->busy)
			continue;
		k = s->o.no_reuse ? 0 : s_lcp(sl->toks, sl->n, prompt, n);
		if (s->whole_prefix && (k < sl->n || k >= n))
			k = 0;
		if (best < 0 || k > best_lcp ||
		    (k == best_lcp && sl->last_used < s->slots[best].last_used)) {
			best = i;
			best_lcp = k;
		}
	}
	*lcp = best_lcp;
	return best;
}

static void s_seq_free(struct srv_seq *q)
{
	ns_sampler_destroy(&q->smp);
	srv_text_free(&q->text);
	free(q->answer.buf);
	free(q->reasoning.buf);
	free(q->lps);
	memset(q, 0, sizeof(*q));
}

/* Start r on slot i. Under the lock (allocations only). Returns 0 or -ENOMEM. */
static int s_seq_start(struct srv_sched *s, uint32_t i, struct srv_req *r, uint32_t lcp)
{
	struct srv_slot *sl = &s->slots[i];
	struct srv_seq *q = &sl->seq;
	int rc;

	memset(q, 0, sizeof(*q));
	q->r = r;
	q->last = -1;
	q->first_eval = true;
	/* at least the last prompt token is evaluated: its logits give the first token */
	q->n_done = lcp < r->p.n_prompt ? lcp : r->p.n_prompt - 1;
	rc = ns_sampler_new(&r->p.sp, s->n_vocab, &q->smp);
	if (rc == 0)
		rc = srv_text_init(&q->text, s->tok, r->p.split, (const char *const *)r->p.stop,
				   r->p.n_stop);
	if (rc < 0) {
		s_seq_free(q);
		return rc;
	}
	for (uint32_t k = 0; k < r->p.n_prompt; k++)
		ns_sampler_accept(q->smp, r->p.prompt[k]);
	sl->busy = true;
	sl->last_used = ++s->clock;
	r->active = true;
	r->queued = false;
	s->n_active++;
	return 0;
}

/* Waiting requests into free slots, in order. Under the lock. */
static void s_admit(struct srv_sched *s)
{
	while (s->head && s->n_active < s->n_slots) {
		struct srv_req *r = s->head;
		uint32_t lcp;
		int64_t i;

		s->head = r->next;
		if (!s->head)
			s->tail = NULL;
		s->n_waiting--;
		r->next = NULL;
		if (r->cancelled) {
			r->queued = false;
			r->done = true;
			s_release_locked(r);
			continue;
		}
		i = s_pick_slot(s, r->p.prompt, r->p.n_prompt, &lcp);
		if (i < 0 || s_seq_start(s, (uint32_t)i, r, lcp) < 0) {
			s_req_fail(r, 500, "out of memory starting the request");
			s_release_locked(r);
		}
	}
}

/* ------------------------------------------------------------ a step ----------------- */

static int s_push_lp(struct srv_seq *q, const struct srv_token_lp *lp)
{
	if (q->n_lps == q->cap_lps) {
		uint32_t cap = q->cap_lps ? q->cap_lps * 2 : 8;
		struct srv_token_lp *p = realloc(q->lps, (size_t)cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		q->lps = p;
		q->cap_lps = cap;
	}
	q->lps[q->n_lps++] = *lp;
	return 0;
}

static void s_seq_error(struct srv_seq *q, int status, const char *msg)
{
	q->finish = SRV_FIN_ERROR;
	q->err_status = status;
	snprintf(q->err, sizeof(q->err), "%s", msg);
}

/* The slot's logits are in: choose the next token, turn it into text, decide whether the
 * sequence ends. */
static void s_sample(struct srv_sched *s, struct srv_slot *sl)
{
	struct srv_seq *q = &sl->seq;
	const struct srv_params *p = &q->r->p;
	const float *lg = sl->logits;
	int32_t id;
	int rc = 0;

	if (p->n_bias) {
		memcpy(s->biased, sl->logits, (size_t)s->n_vocab * sizeof(float));
		for (uint32_t k = 0; k < p->n_bias; k++)
			s->biased[p->bias_ids[k]] += p->bias[k];
		lg = s->biased;
	}
	id = ns_sampler_sample(q->smp, lg);
	if (id < 0 || (uint32_t)id >= s->n_vocab) {
		s_seq_error(q, 500, "sampling found no candidate (the logits are not finite)");
		return;
	}
	if (p->logprobs) {
		struct srv_token_lp lp;

		srv_logprobs(lg, s->n_vocab, id, p->top_logprobs, &lp);
		rc = s_push_lp(q, &lp);
	}
	ns_sampler_accept(q->smp, id);
	q->n_gen++;
	if (rc == 0 && !p->ignore_eos && ns_tok_is_eog(s->tok, id))
		q->finish = SRV_FIN_STOP;
	else if (rc == 0 && (rc = srv_text_token(&q->text, id, &q->reasoning, &q->answer)) == 1)
		q->finish = SRV_FIN_STOP;
	if (rc < 0) {
		s_seq_error(q, 500, "out of memory");
		return;
	}
	if (!q->finish && p->max_tokens && q->n_gen >= p->max_tokens)
		q->finish = SRV_FIN_LENGTH;
	if (!q->finish && sl->n >= s->n_ctx) /* no room to evaluate it */
		q->finish = SRV_FIN_LENGTH;
	if (q->finish && srv_text_finish(&q->text, &q->reasoning, &q->answer) < 0)
		s_seq_error(q, 500, "out of memory");
	q->last = id;
}

/* One step over every active sequence: decoders by one token, the oldest prefilling
 * sequence by a chunk. Without the lock. Returns the engine's result. */
static int s_step(struct srv_sched *s)
{
	struct srv_eval ev[s->n_slots];
	uint32_t idx[s->n_slots], n = 0;
	int64_t pre = -1;
	int rc;

	for (uint32_t i = 0; i < s->n_slots; i++) {
		struct srv_seq *q = &s->slots[i].seq;

		if (!s->slots[i].busy || q->finish)
			continue;
		if (q->last >= 0) {
			ev[n] = (struct srv_eval){ .slot = i, .keep = s->slots[i].n,
						   .tokens = &q->last, .n = 1,
						   .logits = s->slots[i].logits };
			idx[n++] = i;
		} else if (pre < 0 || q->r->order < s->slots[pre].seq.r->order) {
			pre = i;
		}
	}
	if (pre >= 0) {
		struct srv_slot *sl = &s->slots[pre];
		struct srv_seq *q = &sl->seq;
		uint32_t left = q->r->p.n_prompt - q->n_done;
		uint32_t c = left < s->o.prefill_chunk ? left : s->o.prefill_chunk;

		ev[n] = (struct srv_eval){ .slot = (uint32_t)pre, .keep = q->n_done,
					   .tokens = q->r->p.prompt + q->n_done, .n = c,
					   .logits = c == left ? sl->logits : NULL };
		idx[n++] = (uint32_t)pre;
	}
	if (!n)
		return 0;
	rc = srv_engine_step(s->eng, ev, n);
	s->steps++;
	if (rc == -ERANGE && pre >= 0 && ev[n - 1].keep && s->slots[pre].seq.first_eval) {
		/* the reused prefix reaches back past what a sliding layer's ring cache still
		 * holds (nscompute refused the cut, evaluating nothing): the prompt from 0 */
		s->slots[pre].seq.n_done = 0;
		s->slots[pre].n = 0;
		return s_step(s);
	}
	if (rc < 0)
		return rc;
	for (uint32_t k = 0; k < n; k++) {
		struct srv_slot *sl = &s->slots[idx[k]];
		struct srv_seq *q = &sl->seq;
		uint32_t total = ev[k].keep + ev[k].n;

		if (total > sl->cap) {
			int32_t *t = realloc(sl->toks, (size_t)total * 2 * sizeof(*t));

			if (!t) { /* the mirror is lost: nothing of this slot is reused */
				sl->n = 0;
				s_seq_error(q, 500, "out of memory");
				continue;
			}
			sl->toks = t;
			sl->cap = total * 2;
		}
		memcpy(sl->toks + ev[k].keep, ev[k].tokens, (size_t)ev[k].n * sizeof(int32_t));
		sl->n = total;
		if (q->last < 0) { /* prefill chunk */
			if (q->first_eval)
				q->n_cached = ev[k].keep;
			q->first_eval = false;
			q->n_done += ev[k].n;
		}
		if (ev[k].logits)
			s_sample(s, sl);
	}
	return 0;
}

/* ------------------------------------------------------------ publishing ------------- */

/* Hand a sequence's step output to its request; end it when finished or cancelled. Under
 * the lock. */
static void s_publish(struct srv_sched *s, struct srv_slot *sl)
{
	struct srv_seq *q = &sl->seq;
	struct srv_req *r = q->r;

	if (q->answer.len)
		ns_text_append(&r->answer, q->answer.buf, q->answer.len);
	if (q->reasoning.len)
		ns_text_append(&r->reasoning, q->reasoning.buf, q->reasoning.len);
	q->answer.len = q->reasoning.len = 0;
	if (q->n_lps) {
		if (r->n_lps + q->n_lps > r->cap_lps) {
			uint32_t cap = (r->n_lps + q->n_lps) * 2;
			struct srv_token_lp *p = realloc(r->lps, (size_t)cap * sizeof(*p));

			if (p) {
				r->lps = p;
				r->cap_lps = cap;
			}
		}
		if (r->n_lps + q->n_lps <= r->cap_lps) {
			memcpy(r->lps + r->n_lps, q->lps, (size_t)q->n_lps * sizeof(*q->lps));
			r->n_lps += q->n_lps;
		}
		q->n_lps = 0;
	}
	r->n_gen = q->n_gen;
	r->n_cached = q->n_cached;
	if (r->cancelled && !q->finish)
		s_seq_error(q, 499, "the client went away");
	if (q->finish) {
		r->finish = q->finish;
		r->err_status = q->err_status;
		snprintf(r->err, sizeof(r->err), "%s", q->err);
		r->done = true;
		r->active = false;
		sl->busy = false;
		s->n_active--;
		s->served++;
		s_seq_free(q);
		s_release_locked(r);
	}
	pthread_cond_broadcast(&r->cv);
}

/* Every active sequence ends with an error (the engine failed, or the grace ran out). */
static void s_fail_active(struct srv_sched *s, int status, const char *msg)
{
	for (uint32_t i = 0; i < s->n_slots; i++) {
		if (!s->slots[i].busy)
			continue;
		s_seq_error(&s->slots[i].seq, status, msg);
		s_publish(s, &s->slots[i]);
	}
}

static void s_fail_waiting(struct srv_sched *s, int status, const char *msg)
{
	while (s->head) {
		struct srv_req *r = s->head;

		s->head = r->next;
		s->n_waiting--;
		s_req_fail(r, status, msg);
		s_release_locked(r);
	}
	s->tail = NULL;
}

static void *s_main(void *arg)
{
	struct srv_sched *s = arg;
	char msg[600];

	pthread_mutex_lock(&s->mu);
	for (;;) {
		int rc = 0;

		s_admit(s);
		for (uint32_t i = 0; i < s->n_slots; i++) /* cancelled between steps */
			if (s->slots[i].busy && s->slots[i].seq.r->cancelled)
				s_publish(s, &s->slots[i]);
		if (s->stopping && s->deadline_ns && ns_now_ns() > s->deadline_ns)
			s_fail_active(s, 503, "the server is shutting down");
		if (s->stopping && !s->n_active && !s->head)
			break;
		if (!s->n_active) {
			struct timespec ts;

			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += 200 * 1000000L;
			if (ts.tv_nsec >= 1000000000L) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000L;
			}
			pthread_cond_timedwait(&s->cv, &s->mu, &ts);
			if (s->n_active || s->head || s->stopping)
				continue;
			pthread_mutex_unlock(&s->mu);
			rc = srv_engine_poll(s->eng); /* restart a dead nsio while idle */
			pthread_mutex_lock(&s->mu);
		} else {
			pthread_mutex_unlock(&s->mu);
			rc = s_step(s);
			pthread_mutex_lock(&s->mu);
			for (uint32_t i = 0; i < s->n_slots; i++)
				if (s->slots[i].busy)
					s_publish(s, &s->slots[i]);
		}
		if (rc < 0) {
			snprintf(msg, sizeof(msg), "%s", srv_engine_error(s->eng));
			fprintf(stderr, "nsctl serve: %s\n", msg);
			for (uint32_t i = 0; i < s->n_slots; i++)
				s->slots[i].n = 0; /* the engine forgot every slot */
			s_fail_active(s, 500, msg);
			if (rc == -EPIPE || rc == -ECANCELED) {
				s->dead = true;
				s->stopping = true;
				s_fail_waiting(s, 503, "the pipeline stopped");
				break;
			}
		}
	}
	s_fail_waiting(s, 503, "the server is shutting down");
	s->ended = true;
	pthread_cond_broadcast(&s->cv_end);
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

/* ------------------------------------------------------------ the API ---------------- */

int srv_sched_start(struct srv_engine *eng, const struct ns_tok *tok,
		    const struct srv_sched_opts *o, struct srv_sched **out)
{
	struct srv_sched *s = calloc(1, sizeof(*s));
	int rc = -ENOMEM;

	*out = NULL;
	if (!s)
		return -ENOMEM;
	s->eng = eng;
	s->tok = tok;
	s->o = *o;
	if (!s->o.prefill_chunk)
		s->o.prefill_chunk = 256;
	s->n_slots = srv_engine_n_slots(eng);
	s->n_vocab = srv_engine_n_vocab(eng);
	s->n_ctx = srv_engine_n_ctx(eng);
	s->whole_prefix = ns_engine_is_recurrent(srv_engine_ns(eng));
	s->slots = calloc(s->n_slots, sizeof(*s->slots));
	s->biased = malloc((size_t)s->n_vocab * sizeof(float));
	if (s->slots && s->biased) {
		rc = 0;
		for (uint32_t i = 0; i < s->n_slots && rc == 0; i++)
			if (!(s->slots[i].logits = malloc((size_t)s->n_vocab * sizeof(float))))
				rc = -ENOMEM;
	}
	if (rc == 0 && (pthread_mutex_init(&s->mu, NULL) || pthread_cond_init(&s->cv, NULL) ||
			pthread_cond_init(&s->cv_end, NULL)))
		rc = -ENOMEM;
	if (rc == 0 && pthread_create(&s->th, NULL, s_main, s))
		rc = -EAGAIN;
	if (rc < 0) {
		for (uint32_t i = 0; s->slots && i < s->n_slots; i++)
			free(s->slots[i].logits);
		free(s->slots);
		free(s->biased);
		free(s);
		return rc;
	}
	*out = s;
	return 0;
}

void srv_sched_stop(struct srv_sched *s, uint64_t grace_ms)
{
	pthread_mutex_lock(&s->mu);
	if (s->joined) {
		pthread_mutex_unlock(&s->mu);
		return;
	}
	s->joined = true;
	s->stopping = true;
	s->deadline_ns = ns_now_ns() + grace_ms * 1000000ull;
	s_fail_waiting(s, 503, "the server is shutting down");
	pthread_cond_broadcast(&s->cv);
	/* a step of a streamed model can take long: past the grace, cancel it */
	while (!s->ended) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += 1;
		pthread_cond_timedwait(&s->cv_end, &s->mu, &ts);
		if (!s->ended && ns_now_ns() > s->deadline_ns + 1000000000ull)
			srv_engine_cancel(s->eng);
	}
	pthread_mutex_unlock(&s->mu);
	pthread_join(s->th, NULL);
}

void srv_sched_free(struct srv_sched **sp)
{
	struct srv_sched *s = sp ? *sp : NULL;

	if (!s)
		return;
	srv_sched_stop(s, 0);
	for (uint32_t i = 0; i < s->n_slots; i++) {
		free(s->slots[i].toks);
		free(s->slots[i].logits);
	}
	pthread_cond_destroy(&s->cv);
	pthread_cond_destroy(&s->cv_end);
	pthread_mutex_destroy(&s->mu);
	free(s->slots);
	free(s->biased);
	free(s);
	*sp = NULL;
}

int srv_sched_submit(struct srv_sched *s, struct srv_req *r)
{
	int rc = 0;

	pthread_mutex_lock(&s->mu);
	if (s->stopping)
		rc = -ESHUTDOWN;
	else if (s->n_waiting >= s->o.max_waiting &&
		 !(s->n_active + s->n_waiting < s->n_slots)) /* a free slot: never refused */
		rc = -EBUSY;
	if (rc < 0) {
		s_release_locked(r);
		pthread_mutex_unlock(&s->mu);
		return rc;
	}
	r->order = ++s->order;
	r->queued = true;
	if (s->tail)
		s->tail->next = r;
	else
		s->head = r;
	s->tail = r;
	s->n_waiting++;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	return 0;
}

static bool s_has_output(const struct srv_req *r)
{
	return r->done || r->answer.len || r->reasoning.len || r->n_lps;
}

bool srv_sched_wait(struct srv_sched *s, struct srv_req *r, uint64_t timeout_ms)
{
	struct timespec ts;
	bool any;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += (time_t)(timeout_ms / 1000);
	ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&s->mu);
	while (!s_has_output(r))
		if (pthread_cond_timedwait(&r->cv, &s->mu, &ts) == ETIMEDOUT)
			break;
	any = s_has_output(r);
	pthread_mutex_unlock(&s->mu);
	return any;
}

void srv_sched_take(struct srv_sched *s, struct srv_req *r, struct srv_take *t)
{
	pthread_mutex_lock(&s->mu);
	if (r->answer.len)
		ns_text_append(&t->answer, r->answer.buf, r->answer.len);
	if (r->reasoning.len)
		ns_text_append(&t->reasoning, r->reasoning.buf, r->reasoning.len);
	r->answer.len = r->reasoning.len = 0;
	if (r->n_lps) {
		struct srv_token_lp *p = realloc(t->lps, (size_t)(t->n_lps + r->n_lps) *
						 sizeof(*p));

		if (p) {
			memcpy(p + t->n_lps, r->lps, (size_t)r->n_lps * sizeof(*p));
			t->lps = p;
			t->n_lps += r->n_lps;
		}
		r->n_lps = 0;
	}
	t->n_gen = r->n_gen;
	t->n_cached = r->n_cached;
	t->finish = r->finish;
	t->err_status = r->err_status;
	snprintf(t->err, sizeof(t->err), "%s", r->err);
	t->done = r->done;
	t->position = 0;
	if (r->queued)
		for (struct srv_req *q = s->head; q && q != r; q = q->next)
			t->position++;
	pthread_mutex_unlock(&s->mu);
}

void srv_take_free(struct srv_take *t)
{
	free(t->answer.buf);
	free(t->reasoning.buf);
	free(t->lps);
	memset(t, 0, sizeof(*t));
}

void srv_sched_cancel(struct srv_sched *s, struct srv_req *r)
{
	pthread_mutex_lock(&s->mu);
	r->cancelled = true;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
}

bool srv_sched_dead(struct srv_sched *s)
{
	bool d;

	pthread_mutex_lock(&s->mu);
	d = s->dead;
	pthread_mutex_unlock(&s->mu);
	return d;
}

void srv_sched_stats(struct srv_sched *s, struct srv_sched_stats *out)
{
	pthread_mutex_lock(&s->mu);
	out->active = s->n_active;
	out->waiting = s->n_waiting;
	out->slots = s->n_slots;
	out->served = s->served;
	out->steps = s->steps;
	pthread_mutex_unlock(&s->mu);
}
