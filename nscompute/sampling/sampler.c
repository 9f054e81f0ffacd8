/* sampler.c - the second sampler: ns_sampler, the whole chain of sampling.h per token,
 * straight from the logits where it can (greedy scans them, top-k selects from them, min-p
 * or top-p alone keep only their survivors; the penalties touch only the history's
 * tokens), with the choices of cand_steps.c's steps in turn. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sampling_internal.h"

struct ns_sampler {
	struct ns_sampler_params p;
	uint32_t n_vocab;
	uint64_t rng;          /* splitmix64 state */
	struct ns_cand *cands; /* (n_vocab) */
	int32_t *hist;         /* (repeat_last_n) ring of accepted tokens */
	size_t hist_n;         /* entries used, <= repeat_last_n */
	size_t hist_head;      /* next slot to write */
	int32_t *hist_sorted;  /* (repeat_last_n) scratch for counting */
	int32_t *pen_id;       /* (repeat_last_n) the history's distinct tokens, ascending */
	float *pen_logit;      /* (repeat_last_n) their penalized logits (s_penalized) */
	struct nss_fsum *fsum;   /* s_top_p_logits' sum (2 KiB: kept off the stack) */
	struct ns_sort_scratch sort_scratch; /* the candidates' radix sort, kept warm */
};

void ns_sampler_params_default(struct ns_sampler_params *p)
{
	memset(p, 0, sizeof(*p));
	p->temperature = 0.8f;
	p->top_k = 40;
	p->top_p = 0.95f;
	p->min_p = 0.05f;
	p->repeat_penalty = 1.0f;
	p->repeat_last_n = 64;
}

int ns_sampler_new(const struct ns_sampler_params *p, uint32_t n_vocab, struct ns_sampler **out)
{
	struct ns_sampler *s;
	size_t nh;

	*out = NULL;
	if (n_vocab == 0 || p->repeat_last_n < 0 || isnan(p->temperature) || isnan(p->top_p) ||
	    isnan(p->min_p) || isnan(p->repeat_penalty) || isnan(p->freq_penalty) ||
	    isnan(p->presence_penalty) || !(p->repeat_penalty > 0))
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->p = *p;
	s->n_vocab = n_vocab;
	s->rng = p->seed;
	nh = (size_t)p->repeat_last_n;
	s->cands = calloc(n_vocab, sizeof(*s->cands));
	s->hist = calloc(nh ? nh : 1, sizeof(*s->hist));
	s->hist_sorted = calloc(nh ? nh : 1, sizeof(*s->hist_sorted));
	s->pen_id = calloc(nh ? nh : 1, sizeof(*s->pen_id));
	s->pen_logit = calloc(nh ? nh : 1, sizeof(*s->pen_logit));
	s->fsum = calloc(1, sizeof(*s->fsum));
	if (!s->cands || !s->hist || !s->hist_sorted || !s->pen_id || !s->pen_logit || !s->fsum) {
		ns_sampler_destroy(&s);
		return -ENOMEM;
	}
	*out = s;
	return 0;
}

void ns_sampler_accept(struct ns_sampler *s, int32_t token)
{
	size_t cap = (size_t)s->p.repeat_last_n;

	if (cap == 0)
		return;
	s->hist[s->hist_head] = token;
	s->hist_head = (s->hist_head + 1) % cap;
	if (s->hist_n < cap)
		s->hist_n++;
}

/* The logits a token sees: logits[i], or its penalized value when i is one of the np ids of
 * pen (ascending) that the scan has reached (*at walks along them as i rises). */
static inline float s_seen(const float *logits, uint32_t i, const int32_t *pen_id,
			   const float *pen_logit, size_t np, size_t *at)
{
	if (*at < np && (uint32_t)pen_id[*at] == i)
		return pen_logit[(*at)++];
	return logits[i];
}

typedef float s_f4 __attribute__((vector_size(16)));
typedef int32_t s_i4 __attribute__((vector_size(16)));

/* True when one of l[0..8) is over t (a NaN is not): two vector compares (the compiler's
 * vector extension; SSE on x86-64, NEON on arm64), so that the scans below skip a block of
 * logits at about the speed of reading it. A scalar loop here ran at 5 cycles a logit. */
static inline bool s_any_over(const float *l, float t)
{
	const s_f4 tv = { t, t, t, t };
	s_f4 a, b;
	s_i4 over;

	memcpy(&a, l, sizeof(a));
	memcpy(&b, l + 4, sizeof(b));
	over = (a > tv) | (b > tv);
	return (over[0] | over[1] | over[2] | over[3]) != 0;
}

/* True when a block of 8 from token i must be looked at one by one: the bound is NaN (a
 * number beats it), a penalized token lies in the block (its seen logit is not logits[]), or
 * a logit of the block is over the bound. */
static inline bool s_block_needs_look(const float *logits, uint32_t i, float bound,
				      const int32_t *pen_id, size_t np, size_t at)
{
	return isnan(bound) || (at < np && (uint32_t)pen_id[at] < i + 8) ||
	       s_any_over(logits + i, bound);
}

/* Heap step of s_top_k_logits: token i with seen logit l replaces the root when it comes
 * before it (ids rise along the scan, so an equal logit never does). */
static inline void s_heap_offer(struct ns_cand *d, size_t k, uint32_t i, float l)
{
	if (l > d[0].logit || (isnan(d[0].logit) && !isnan(l))) {
		d[0] = (struct ns_cand){ (int32_t)i, l, 0.0f };
		nss_heap_down(d, k, 0);
	}
}

/* ns_sample_top_k over the seen logits of tokens 0..n-1 (token i at i), without writing all
 * n of them as candidates first: the k first in nss_before's order into c->data[0..k), sorted.
 * Blocks of 8 with nothing over the heap's last are skipped after eight compares. */
static void s_top_k_logits(struct ns_cands *c, const float *logits, uint32_t n, size_t k,
			   const int32_t *pen_id, const float *pen_logit, size_t np)
{
	struct ns_cand *d = c->data;
	size_t at = 0;
	uint32_t i;

	for (i = 0; i < k; i++)
		d[i] = (struct ns_cand){ (int32_t)i, s_seen(logits, i, pen_id, pen_logit, np, &at),
					 0.0f };
	for (size_t j = k / 2; j-- > 0;)
		nss_heap_down(d, k, j);
	for (i = (uint32_t)k; i < n && i % 8; i++) /* up to a multiple of 8 */
		s_heap_offer(d, k, i, s_seen(logits, i, pen_id, pen_logit, np, &at));
	for (; n - i >= 8; i += 8)
		if (s_block_needs_look(logits, i, d[0].logit, pen_id, np, at))
			for (uint32_t j = i; j < i + 8; j++)
				s_heap_offer(d, k, j, s_seen(logits, j, pen_id, pen_logit, np,
							      &at));
	for (; i < n; i++)
		s_heap_offer(d, k, i, s_seen(logits, i, pen_id, pen_logit, np, &at));
	nss_sort_cands(d, k, c->scratch);
	c->n = k;
	c->sorted = true;
}

/* Step of s_argmax: token i with seen logit l becomes the best when it comes before it (ties:
 * the first, the lowest id; NaN never wins). */
static inline void s_argmax_offer(uint32_t *best, float *lb, uint32_t i, float l)
{
	if (l > *lb || (isnan(*lb) && !isnan(l))) {
		*best = i;
		*lb = l;
	}
}

/* ns_sample_greedy over the seen logits of tokens 0..n-1, without copying them; blocks of 8
 * with nothing over the best so far are skipped as in s_top_k_logits. */
static int32_t s_argmax(const float *logits, uint32_t n, const int32_t *pen_id,
			const float *pen_logit, size_t np, float *best_logit)
{
	size_t at = 0;
	uint32_t best = 0, i;
	float lb = s_seen(logits, 0, pen_id, pen_logit, np, &at);

	for (i = 1; i < n && i % 8; i++) /* up to a multiple of 8 */
		s_argmax_offer(&best, &lb, i, s_seen(logits, i, pen_id, pen_logit, np, &at));
	for (; n - i >= 8; i += 8)
		if (s_block_needs_look(logits, i, lb, pen_id, np, at))
			for (uint32_t j = i; j < i + 8; j++)
				s_argmax_offer(&best, &lb, j,
					       s_seen(logits, j, pen_id, pen_logit, np, &at));
	for (; i < n; i++)
		s_argmax_offer(&best, &lb, i, s_seen(logits, i, pen_id, pen_logit, np, &at));
	*best_logit = lb;
	return (int32_t)best;
}

/* ns_sample_min_p (min_keep 1) over all n_vocab candidates, straight from the seen logits:
 * the survivors (the first candidate, every number at or over its logit + ln p, the NaNs only
 * when no number was cut) into c->data, sorted. False when every logit is NaN (the caller
 * takes the general path). */
static bool s_min_p_logits(struct ns_cands *c, const float *logits, uint32_t n, float p,
			   const int32_t *pen_id, const float *pen_logit, size_t np)
{
	float lb, min_logit;
	const uint32_t best = (uint32_t)s_argmax(logits, n, pen_id, pen_logit, np, &lb);
	size_t at = 0, kept = 1;
	bool cut = false;

	min_logit = lb + logf(p);
	if (isnan(min_logit))
		return false;
	c->data[0] = (struct ns_cand){ (int32_t)best, lb, 0.0f };
	for (uint32_t i = 0; i < n; i++) {
		const float l = s_seen(logits, i, pen_id, pen_logit, np, &at);

		if (i == best)
			continue;
		if (l >= min_logit)
			c->data[kept++] = (struct ns_cand){ (int32_t)i, l, 0.0f };
		else if (!isnan(l))
			cut = true;
	}
	for (uint32_t i = 0; !cut && i < n; i++) /* (a penalty leaves a NaN NaN) */
		if (isnan(logits[i]))
			c->data[kept++] = (struct ns_cand){ (int32_t)i, logits[i], 0.0f };
	c->n = kept;
	c->sorted = false;
	nss_sort(c);
	return true;
}

/* ns_sample_top_p (min_keep 1) over all n_vocab candidates, straight from the seen logits:
 * the probabilities' sum over every token (exact, as ns_cands_sum_p), then the first k by
 * s_top_k_logits, k growing eightfold, walked with the probabilities ns_cands_softmax would
 * give them, until the mass is reached. The survivors into c->data, sorted. False when the
 * best logit is NaN or the nucleus is over an eighth of the vocabulary (the caller takes the
 * general path, which sorts). */
static bool s_top_p_logits(struct ns_cands *c, const float *logits, uint32_t n, float p,
			   const int32_t *pen_id, const float *pen_logit, size_t np,
			   struct nss_fsum *f)
{
	float lb;
	double sum, cum = 0.0;
	size_t at = 0, done = 0;

	(void)s_argmax(logits, n, pen_id, pen_logit, np, &lb);
	if (isnan(lb))
		return false;
	memset(f, 0, sizeof(*f));
	for (uint32_t i = 0; i < n; i++)
		nss_fsum_add(f, expf(s_seen(logits, i, pen_id, pen_logit, np, &at) - lb));
	sum = nss_fsum_total(f);
	for (size_t k = 64; k <= n / NSS_SELECT_MAX_DIV; k *= 8) {
		s_top_k_logits(c, logits, n, k, pen_id, pen_logit, np);
		for (size_t i = 0; i < k; i++) {
			c->data[i].p = (float)(expf(c->data[i].logit - lb) / sum);
			if (i < done)
				continue; /* (the same first done as the last round: summed) */
			cum += c->data[i].p;
			if (cum >= p) {
				c->n = i + 1;
				return true;
			}
		}
		done = k;
	}
	return false;
}

/* The history's distinct tokens (ascending, in the vocabulary) into s->pen_id and their
 * penalized logits into s->pen_logit. Returns how many. */
static size_t s_penalized(struct ns_sampler *s, const float *logits)
{
	const struct ns_sampler_params *p = &s->p;
	size_t np = 0;

	memcpy(s->hist_sorted, s->hist, s->hist_n * sizeof(*s->hist));
	qsort(s->hist_sorted, s->hist_n, sizeof(*s->hist_sorted), nss_cmp_i32);
	for (size_t j = 0; j < s->hist_n;) {
		const int32_t id = s->hist_sorted[j];
		size_t cnt = 1;

		while (j + cnt < s->hist_n && s->hist_sorted[j + cnt] == id)
			cnt++;
		j += cnt;
		if (id < 0 || (uint32_t)id >= s->n_vocab)
			continue;
		s->pen_id[np] = id;
		s->pen_logit[np] = logits[id];
		nss_penalize(&s->pen_logit[np], cnt, p->repeat_penalty, p->freq_penalty,
			   p->presence_penalty);
		np++;
	}
	return np;
}

/* The chain over the vocabulary without a copy of it where it can: greedy scans the logits,
 * top-k selects straight from them; the penalties touch only the history's tokens. Draws and
 * choices are those of ns_sample_penalties, _top_k, _top_p, _min_p, _temp, _draw in turn on
 * all n_vocab candidates (tests/sampling/test_sampling.c checks it). */
static bool s_penalizes(const struct ns_sampler *s)
{
	const struct ns_sampler_params *p = &s->p;

	return s->hist_n && (p->repeat_penalty != 1.0f || p->freq_penalty != 0.0f ||
			     p->presence_penalty != 0.0f);
}

/* Greedy: the argmax of the penalized logits. */
static int32_t s_greedy(struct ns_sampler *s, const float *logits)
{
	size_t np = s_penalizes(s) ? s_penalized(s, logits) : 0;
	float unused;

	return s_argmax(logits, s->n_vocab, s->pen_id, s->pen_logit, np, &unused);
}

/* The chain up to the draw (temperature > 0): the survivors into *c, their logits tempered. */
static void s_chain(struct ns_sampler *s, const float *logits, struct ns_cands *c)
{
	const struct ns_sampler_params *p = &s->p;
	const bool top_k_off = p->top_k <= 0 || (uint32_t)p->top_k >= s->n_vocab;
	bool top_p_done = false;
	size_t np = s_penalizes(s) ? s_penalized(s, logits) : 0;

	if (top_k_off && p->top_p >= 1.0f && p->min_p > 0.0f &&
	    s_min_p_logits(c, logits, s->n_vocab, p->min_p, s->pen_id, s->pen_logit, np)) {
		/* min-p alone (gpt-oss's settings): only its survivors become candidates */
	} else if (top_k_off && p->top_p < 1.0f &&
		   s_top_p_logits(c, logits, s->n_vocab, p->top_p, s->pen_id, s->pen_logit,
				  np, s->fsum)) {
		top_p_done = true; /* top-p alone: only the nucleus becomes candidates */
	} else if (!top_k_off) {
		s_top_k_logits(c, logits, s->n_vocab, (size_t)p->top_k, s->pen_id, s->pen_logit,
			       np);
	} else {
		ns_cands_init(c, logits, s->n_vocab);
		for (size_t j = 0; j < np; j++)
			c->data[s->pen_id[j]].logit = s->pen_logit[j];
	}
	if (!top_p_done)
		ns_sample_top_p(c, p->top_p, 1);
	ns_sample_min_p(c, p->min_p, 1); /* (after s_min_p_logits: cuts nothing more) */
	ns_sample_temp(c, p->temperature);
}

int32_t ns_sampler_sample(struct ns_sampler *s, const float *logits)
{
	struct ns_cands c = { .data = s->cands, .scratch = &s->sort_scratch };

	if (s->p.temperature <= 0.0f)
		return s_greedy(s, logits);
	s_chain(s, logits, &c);
	return ns_sample_draw(&c, &s->rng);
}

/* Speculative sampling for a deterministic drafter (its distribution q is one-hot on draft):
 * accept with probability min(1, p(draft) / q(draft)) = p(draft); on a rejection draw from
 * max(p - q, 0) renormalised, i.e. p without draft. Any token x then comes out with
 * probability p(x) (draft: p(draft); another: (1 - p(draft)) p(x) / (1 - p(draft))). */
int32_t ns_sampler_verify(struct ns_sampler *s, const float *logits, int32_t draft,
			  bool *accepted)
{
	struct ns_cands c = { .data = s->cands, .scratch = &s->sort_scratch };
	double p_draft = 0.0;
	size_t at = SIZE_MAX;

	if (s->p.temperature <= 0.0f) {
		const int32_t id = s_greedy(s, logits);

		*accepted = id == draft;
		return id;
	}
	s_chain(s, logits, &c);
	ns_cands_softmax(&c);
	for (size_t i = 0; i < c.n; i++)
		if (c.data[i].id == draft) {
			p_draft = c.data[i].p;
			at = i;
		}
	*accepted = ns_rng_uniform(&s->rng) < p_draft;
	if (*accepted)
		return draft;
	if (at != SIZE_MAX) { /* the residual: the survivors without draft (still sorted) */
		memmove(&c.data[at], &c.data[at + 1], (c.n - at - 1) * sizeof(c.data[0]));
		c.n--;
	}
	return ns_sample_draw(&c, &s->rng);
}

void ns_sampler_destroy(struct ns_sampler **s)
{
	if (!s || !*s)
		return;
	free((*s)->cands);
	free((*s)->hist);
	free((*s)->hist_sorted);
	free((*s)->pen_id);
	free((*s)->pen_logit);
	free((*s)->fsum);
	ns_sort_scratch_free(&(*s)->sort_scratch);
	free(*s);
	*s = NULL;
}
