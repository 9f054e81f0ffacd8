/* sampling.c - see sampling.h. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sampling.h"

struct ns_sampler {
	struct ns_sampler_params p;
	uint32_t n_vocab;
	uint64_t rng;          /* splitmix64 state */
	struct ns_cand *cands; /* (n_vocab) */
	int32_t *hist;         /* (repeat_last_n) ring of accepted tokens */
	size_t hist_n;         /* entries used, <= repeat_last_n */
	size_t hist_head;      /* next slot to write */
	int32_t *hist_sorted;  /* (repeat_last_n) scratch for counting */
};

/* ---------------------------------------------------------------- candidate steps ------ */

void ns_cands_init(struct ns_cands *c, const float *logits, uint32_t n_vocab)
{
	for (uint32_t i = 0; i < n_vocab; i++) {
		c->data[i].id = (int32_t)i;
		c->data[i].logit = logits[i];
		c->data[i].p = 0.0f;
	}
	c->n = n_vocab;
	c->sorted = false;
}

static int s_cmp_desc(const void *a, const void *b)
{
	const struct ns_cand *x = a, *y = b;

	if (x->logit != y->logit)
		return x->logit > y->logit ? -1 : 1;
	return (x->id > y->id) - (x->id < y->id);
}

static void s_sort(struct ns_cands *c)
{
	if (!c->sorted) {
		qsort(c->data, c->n, sizeof(*c->data), s_cmp_desc);
		c->sorted = true;
	}
}

void ns_cands_softmax(struct ns_cands *c)
{
	double sum = 0.0;

	if (c->n == 0)
		return;
	s_sort(c);
	for (size_t i = 0; i < c->n; i++) {
		/* -inf logits (masked) get probability 0 */
		c->data[i].p = expf(c->data[i].logit - c->data[0].logit);
		sum += c->data[i].p;
	}
	for (size_t i = 0; i < c->n; i++)
		c->data[i].p = (float)(c->data[i].p / sum);
}

static int s_cmp_i32(const void *a, const void *b)
{
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;

	return (x > y) - (x < y);
}

/* Occurrences of id in the sorted array h (n). */
static size_t s_count(const int32_t *h, size_t n, int32_t id)
{
	size_t lo = 0, hi = n, c = 0;

	while (lo < hi) { /* first index with h[i] >= id */
		size_t mid = lo + (hi - lo) / 2;

		if (h[mid] < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	while (lo + c < n && h[lo + c] == id)
		c++;
	return c;
}

/* last: the history, already sorted ascending (ns_sampler sorts it). */
static void s_penalties_sorted(struct ns_cands *c, const int32_t *last, size_t n_last,
			       float repeat, float freq, float present)
{
	for (size_t i = 0; i < c->n; i++) {
		size_t cnt = s_count(last, n_last, c->data[i].id);
		float *l = &c->data[i].logit;

		if (cnt == 0)
			continue;
		*l = *l <= 0 ? *l * repeat : *l / repeat;
		*l -= (float)cnt * freq + present;
	}
	c->sorted = false;
}

void ns_sample_penalties(struct ns_cands *c, const int32_t *last, size_t n_last, float repeat,
			 float freq, float present)
{
	int32_t *h;

	if (n_last == 0 || (repeat == 1.0f && freq == 0.0f && present == 0.0f))
		return;
	h = malloc(n_last * sizeof(*h));
	if (!h) { /* fall back to a linear count per candidate: same result, slower */
		for (size_t i = 0; i < c->n; i++) {
			size_t cnt = 0;
			float *l = &c->data[i].logit;

			for (size_t j = 0; j < n_last; j++)
				cnt += last[j] == c->data[i].id;
			if (cnt == 0)
				continue;
			*l = *l <= 0 ? *l * repeat : *l / repeat;
			*l -= (float)cnt * freq + present;
		}
		c->sorted = false;
		return;
	}
	memcpy(h, last, n_last * sizeof(*h));
	qsort(h, n_last, sizeof(*h), s_cmp_i32);
	s_penalties_sorted(c, h, n_last, repeat, freq, present);
	free(h);
}

void ns_sample_top_k(struct ns_cands *c, int32_t k)
{
	if (k <= 0 || (size_t)k >= c->n)
		return;
	s_sort(c);
	c->n = (size_t)k;
}

void ns_sample_top_p(struct ns_cands *c, float p, size_t min_keep)
{
	double cum = 0.0;

	if (p >= 1.0f || c->n == 0)
		return;
	ns_cands_softmax(c);
	for (size_t i = 0; i < c->n; i++) {
		cum += c->data[i].p;
		if (cum >= p && i + 1 >= min_keep) {
			c->n = i + 1;
			return;
		}
	}
}

void ns_sample_min_p(struct ns_cands *c, float p, size_t min_keep)
{
	float min_logit;
	size_t i;

	if (p <= 0.0f || c->n == 0)
		return;
	s_sort(c);
	min_logit = c->data[0].logit + logf(p);
	for (i = 1; i < c->n; i++)
		if (c->data[i].logit < min_logit && i >= min_keep)
			break;
	c->n = i;
}

void ns_sample_temp(struct ns_cands *c, float t)
{
	if (t <= 0.0f) { /* greedy: only the best survives */
		int32_t best = ns_sample_greedy(c);

		for (size_t i = 0; i < c->n; i++)
			if (c->data[i].id == best) {
				c->data[0] = c->data[i];
				break;
			}
		c->n = c->n ? 1 : 0;
		c->sorted = true;
		return;
	}
	for (size_t i = 0; i < c->n; i++)
		c->data[i].logit /= t;
}

int32_t ns_sample_greedy(const struct ns_cands *c)
{
	size_t best = 0;

	if (c->n == 0)
		return -1;
	for (size_t i = 1; i < c->n; i++) {
		const struct ns_cand *a = &c->data[i], *b = &c->data[best];

		if (a->logit > b->logit || (a->logit == b->logit && a->id < b->id))
			best = i;
	}
	return c->data[best].id;
}

double ns_rng_uniform(uint64_t *state)
{
	uint64_t z = (*state += 0x9E3779B97F4A7C15ull);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	z ^= z >> 31;
	return (double)(z >> 11) * (1.0 / 9007199254740992.0); /* 53 bits */
}

int32_t ns_sample_draw(struct ns_cands *c, uint64_t *rng)
{
	double u, cum = 0.0;

	if (c->n == 0)
		return -1;
	ns_cands_softmax(c);
	u = ns_rng_uniform(rng);
	for (size_t i = 0; i < c->n; i++) {
		cum += c->data[i].p;
		if (u < cum)
			return c->data[i].id;
	}
	return c->data[c->n - 1].id; /* rounding left u just above the total */
}

/* ---------------------------------------------------------------- the chain ------------ */

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
	if (!s->cands || !s->hist || !s->hist_sorted) {
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

int32_t ns_sampler_sample(struct ns_sampler *s, const float *logits)
{
	const struct ns_sampler_params *p = &s->p;
	struct ns_cands c = { .data = s->cands };

	ns_cands_init(&c, logits, s->n_vocab);
	if (s->hist_n && (p->repeat_penalty != 1.0f || p->freq_penalty != 0.0f ||
			  p->presence_penalty != 0.0f)) {
		memcpy(s->hist_sorted, s->hist, s->hist_n * sizeof(*s->hist));
		qsort(s->hist_sorted, s->hist_n, sizeof(*s->hist_sorted), s_cmp_i32);
		s_penalties_sorted(&c, s->hist_sorted, s->hist_n, p->repeat_penalty,
				   p->freq_penalty, p->presence_penalty);
	}
	if (p->temperature <= 0.0f)
		return ns_sample_greedy(&c);
	ns_sample_top_k(&c, p->top_k);
	ns_sample_top_p(&c, p->top_p, 1);
	ns_sample_min_p(&c, p->min_p, 1);
	ns_sample_temp(&c, p->temperature);
	return ns_sample_draw(&c, &s->rng);
}

void ns_sampler_destroy(struct ns_sampler **s)
{
	if (!s || !*s)
		return;
	free((*s)->cands);
	free((*s)->hist);
	free((*s)->hist_sorted);
	free(*s);
	*s = NULL;
}
