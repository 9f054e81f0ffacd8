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
	int32_t *pen_id;       /* (repeat_last_n) the history's distinct tokens, ascending */
	float *pen_logit;      /* (repeat_last_n) their penalized logits (s_penalized) */
	struct s_fsum *fsum;   /* s_top_p_logits' sum (2 KiB: kept off the stack) */
	struct ns_sort_scratch sort_scratch; /* the candidates' radix sort, kept warm */
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

/* The candidates' total order: a higher logit first, a NaN logit after every number (it never
 * wins), equal logits by lower id. True when a comes before b. */
static inline bool s_before(const struct ns_cand *a, const struct ns_cand *b)
{
	const bool na = isnan(a->logit), nb = isnan(b->logit);

	if (na != nb)
		return nb;
	if (!na && a->logit != b->logit)
		return a->logit > b->logit;
	return a->id < b->id;
}

static int s_cmp_desc(const void *a, const void *b)
{
	return s_before(a, b) ? -1 : s_before(b, a) ? 1 : 0;
}

/* Min-heap on s_before (the root is the candidate that comes last): sift h[i] down. */
static void s_heap_down(struct ns_cand *h, size_t n, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, last = i;
		struct ns_cand t;

		if (l < n && s_before(&h[last], &h[l]))
			last = l;
		if (r < n && s_before(&h[last], &h[r]))
			last = r;
		if (last == i)
			return;
		t = h[i];
		h[i] = h[last];
		h[last] = t;
		i = last;
	}
}

static void s_sort_cands(struct ns_cand *d, size_t n, struct ns_sort_scratch *sc);

/* top-p selects the first k of the vocabulary while k <= n / S_SELECT_MAX_DIV, then sorts it
 * whole: past that, a heap selection costs more than the radix sort (s_sort_cands). */
#define S_SELECT_MAX_DIV 64

/* The k candidates that come first in the total order, moved to data[0..k) and sorted: the
 * same k, in the same order, as sorting all n and keeping k, in O(n log k): for small k far
 * cheaper than the whole vocabulary's sort (s_sort_cands, ~2.6 ms at 152k on this machine). */
static void s_select_sorted(struct ns_cands *c, size_t k)
{
	struct ns_cand *d = c->data;

	for (size_t i = k / 2; i-- > 0;)
		s_heap_down(d, k, i);
	for (size_t i = k; i < c->n; i++) {
		if (s_before(&d[i], &d[0])) {
			struct ns_cand t = d[0];

			d[0] = d[i];
			d[i] = t;
			s_heap_down(d, k, 0);
		}
	}
	s_sort_cands(d, k, c->scratch);
}

/* s_before's logit order as an unsigned key, smaller first: the logit mapped to an
 * order-preserving integer and flipped (higher first; -0 as +0; NaN after everything). */
static inline uint32_t s_radix_key(float f)
{
	uint32_t u;

	if (isnan(f))
		return UINT32_MAX;
	if (f == 0.0f)
		f = 0.0f;
	memcpy(&u, &f, sizeof(u));
	return ~(u & 0x80000000u ? ~u : u | 0x80000000u);
}

#define S_RADIX_BITS 8
#define S_RADIX_DIGITS 4 /* of the 32-bit key */
#define S_RADIX_MIN 2048 /* under it qsort is as fast */

struct s_radix_rec {
	uint32_t key;
	uint32_t at; /* index in the input */
};

typedef uint32_t s_radix_hist[S_RADIX_DIGITS][1u << S_RADIX_BITS];

void ns_sort_scratch_free(struct ns_sort_scratch *s)
{
	free(s->buf);
	s->buf = NULL;
	s->cap = 0;
}

/* Sort d[0..n) by s_before, as qsort with s_cmp_desc would (the order is total: ids are
 * distinct token ids, >= 0): the records placed in id order first (a rank by id), then a
 * stable least-significant-digit radix sort on the logit's key, digits every key shares
 * skipped. A flat distribution's top-p sorts the whole vocabulary: 28 ms a token with qsort at
 * 152k on the development machine. sc: scratch kept between sorts (NULL: allocated here).
 * Falls back to qsort when ids are repeated, negative or sparse, or no scratch can be had. */
static void s_sort_cands(struct ns_cand *d, size_t n, struct ns_sort_scratch *sc)
{
	struct ns_sort_scratch own = { 0 };
	struct s_radix_rec *a, *b, *t;
	struct ns_cand *copy;
	s_radix_hist *hist;
	uint32_t *rank, n_ids = 0;
	size_t need;

	if (n < S_RADIX_MIN || n > UINT32_MAX / 8)
		goto fallback;
	for (size_t i = 0; i < n; i++) {
		if (d[i].id < 0)
			goto fallback;
		if ((uint32_t)d[i].id >= n_ids)
			n_ids = (uint32_t)d[i].id + 1;
	}
	if (n_ids > 8 * n) /* (a vocabulary's candidates: n_ids <= n_vocab) */
		goto fallback;
	/* hist, records a and b, a copy of d, the ranks: every size a multiple of 4 */
	need = sizeof(*hist) + n * (2 * sizeof(*a) + sizeof(*copy)) + (size_t)n_ids * 4;
	if (!sc)
		sc = &own;
	if (sc->cap < need) {
		void *p = realloc(sc->buf, need);

		if (!p)
			goto fallback;
		sc->buf = p;
		sc->cap = need;
	}
	hist = sc->buf;
	a = (struct s_radix_rec *)(hist + 1);
	b = a + n;
	copy = (struct ns_cand *)(b + n);
	rank = (uint32_t *)(copy + n);
	memset(hist, 0, sizeof(*hist));
	memset(rank, 0, (size_t)n_ids * 4);
	for (size_t i = 0; i < n; i++) {
		if (rank[d[i].id]) { /* a repeated id: no total order to keep */
			ns_sort_scratch_free(&own);
			goto fallback;
		}
		rank[d[i].id] = 1;
	}
	for (uint32_t id = 0, sum = 0; id < n_ids; id++) {
		uint32_t present = rank[id];

		rank[id] = sum;
		sum += present;
	}
	for (size_t i = 0; i < n; i++) {
		const uint32_t key = s_radix_key(d[i].logit);

		a[rank[d[i].id]] = (struct s_radix_rec){ key, (uint32_t)i };
		for (int g = 0; g < S_RADIX_DIGITS; g++)
			(*hist)[g][key >> (g * S_RADIX_BITS) & ((1u << S_RADIX_BITS) - 1)]++;
	}
	for (int g = 0; g < S_RADIX_DIGITS; g++) {
		const unsigned shift = (unsigned)g * S_RADIX_BITS;
		uint32_t *h = (*hist)[g], sum = 0;
		bool one_bucket = false;

		for (uint32_t v = 0; v < 1u << S_RADIX_BITS; v++) {
			uint32_t cnt = h[v];

			if (cnt == n)
				one_bucket = true;
			h[v] = sum;
			sum += cnt;
		}
		if (one_bucket) /* every key has this digit: the pass would move nothing */
			continue;
		for (size_t i = 0; i < n; i++) /* stable: equal keys stay in id order */
			b[h[a[i].key >> shift & ((1u << S_RADIX_BITS) - 1)]++] = a[i];
		t = a;
		a = b;
		b = t;
	}
	memcpy(copy, d, n * sizeof(*d));
	for (size_t i = 0; i < n; i++)
		d[i] = copy[a[i].at];
	ns_sort_scratch_free(&own);
	return;
fallback:
	qsort(d, n, sizeof(*d), s_cmp_desc);
}

static void s_sort(struct ns_cands *c)
{
	if (!c->sorted) {
		s_sort_cands(c->data, c->n, c->scratch);
		c->sorted = true;
	}
}

/* An exact sum of floats in any order. Each float is an integer mantissa times a power of
 * two, so the mantissas are summed exactly per exponent (2^32 of 24 bits fit in 64) and the
 * 254 exact sums added up from the smallest at the end. Why: top-p on unsorted candidates
 * must cut where the walk over the sorted ones does, and a sum in double rounds differently
 * in another order. */
struct s_fsum {
	uint64_t mant[256]; /* by biased exponent; two's complement for negative terms */
	bool nan, pinf, ninf;
};

static inline void s_fsum_add(struct s_fsum *f, float v)
{
	uint32_t bits, e, m;

	memcpy(&bits, &v, sizeof(bits));
	e = (bits >> 23) & 0xff;
	m = bits & 0x7fffff;
	if (e == 0xff) {
		if (m)
			f->nan = true;
		else if (bits >> 31)
			f->ninf = true;
		else
			f->pinf = true;
		return;
	}
	if (e)
		m |= 0x800000; /* normal: the hidden bit */
	else
		e = 1;         /* subnormal: the smallest exponent, no hidden bit */
	f->mant[e] += bits >> 31 ? (uint64_t)0 - m : m;
}

static double s_fsum_total(const struct s_fsum *f)
{
	double sum = 0.0;

	if (f->nan || (f->pinf && f->ninf))
		return NAN;
	if (f->pinf || f->ninf)
		return f->pinf ? INFINITY : -INFINITY;
	for (uint32_t e = 1; e < 255; e++)
		if (f->mant[e])
			sum += ldexp((double)(int64_t)f->mant[e], (int)e - 150);
	return sum;
}

double ns_cands_sum_p(const struct ns_cand *d, size_t n)
{
	struct s_fsum f = { { 0 }, false, false, false };

	for (size_t i = 0; i < n; i++)
		s_fsum_add(&f, d[i].p);
	return s_fsum_total(&f);
}

/* p = exp(logit - first) / sum over data[0..n), with first the logit that comes first in
 * s_before's order; the sum is ns_cands_sum_p's, so p depends on neither the order of data
 * nor on whether it was sorted. */
static void s_softmax_at(struct ns_cands *c, float first)
{
	double sum;

	for (size_t i = 0; i < c->n; i++) /* -inf logits (masked) get probability 0 */
		c->data[i].p = expf(c->data[i].logit - first);
	sum = ns_cands_sum_p(c->data, c->n);
	for (size_t i = 0; i < c->n; i++)
		c->data[i].p = (float)(c->data[i].p / sum);
}

void ns_cands_softmax(struct ns_cands *c)
{
	if (c->n == 0)
		return;
	s_sort(c);
	s_softmax_at(c, c->data[0].logit);
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

/* A logit of a token seen cnt > 0 times in the history, penalized (llama.cpp's order). */
static void s_penalize(float *l, size_t cnt, float repeat, float freq, float present)
{
	*l = *l <= 0 ? *l * repeat : *l / repeat;
	*l -= (float)cnt * freq + present;
}

/* last: the history, already sorted ascending (ns_sampler sorts it). */
static void s_penalties_sorted(struct ns_cands *c, const int32_t *last, size_t n_last,
			       float repeat, float freq, float present)
{
	for (size_t i = 0; i < c->n; i++) {
		size_t cnt = s_count(last, n_last, c->data[i].id);

		if (cnt)
			s_penalize(&c->data[i].logit, cnt, repeat, freq, present);
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

			for (size_t j = 0; j < n_last; j++)
				cnt += last[j] == c->data[i].id;
			if (cnt)
				s_penalize(&c->data[i].logit, cnt, repeat, freq, present);
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
	if (!c->sorted)
		s_select_sorted(c, (size_t)k);
	c->n = (size_t)k;
	c->sorted = true;
}

/* The index of the candidate that comes first in s_before's order. */
static size_t s_first(const struct ns_cands *c)
{
	size_t best = 0;

	for (size_t i = 1; i < c->n; i++)
		if (s_before(&c->data[i], &c->data[best]))
			best = i;
	return best;
}

/* The sorted walk: keep data[0..i] for the first i where the mass reaches p. Returns true
 * when it cut within the first k (those sorted); cum carries the mass of data[0..from). */
static bool s_top_p_walk(struct ns_cands *c, float p, size_t min_keep, size_t from, size_t k,
			 double *cum)
{
	for (size_t i = from; i < k; i++) {
		*cum += c->data[i].p;
		if (*cum >= p && i + 1 >= min_keep) {
			c->n = i + 1;
			return true;
		}
	}
	return false;
}

void ns_sample_top_p(struct ns_cands *c, float p, size_t min_keep)
{
	double cum = 0.0;
	size_t k = 64, done = 0;

	if (p >= 1.0f || c->n == 0)
		return;
	if (c->sorted) {
		ns_cands_softmax(c);
		s_top_p_walk(c, p, min_keep, 0, c->n, &cum);
		return;
	}
	/* Unsorted (top-k off): the probabilities of all candidates, then the first k selected
	 * and walked, k growing eightfold until the mass is reached. A language model's nucleus
	 * is usually a few dozen tokens: one selection, not a sort of the vocabulary. Same p,
	 * same set, same order as sorting first (the sum does not depend on the order). */
	s_softmax_at(c, c->data[s_first(c)].logit);
	while (k < c->n) {
		s_select_sorted(c, k); /* data[0..k) sorted, and the first done of them unchanged */
		if (s_top_p_walk(c, p, min_keep, done, k, &cum)) {
			c->sorted = true;
			return;
		}
		done = k;
		k = k * 8 > c->n / S_SELECT_MAX_DIV ? c->n : k * 8;
	}
	s_sort(c);
	s_top_p_walk(c, p, min_keep, done, c->n, &cum);
}

static void s_swap(struct ns_cand *a, struct ns_cand *b)
{
	struct ns_cand t = *a;

	*a = *b;
	*b = t;
}

void ns_sample_min_p(struct ns_cands *c, float p, size_t min_keep)
{
	float min_logit;
	size_t i, best, kept = 1;
	bool cut = false;

	if (p <= 0.0f || c->n == 0)
		return;
	if (!c->sorted && min_keep <= 1) {
		/* Unsorted (top-k off): the sorted walk below keeps the first candidate and then
		 * every one until the first number under the threshold, i.e. every number at or
		 * over it, and the NaNs (sorted last) only when no number was cut. The same set
		 * here in two passes; then only the survivors are sorted, not the vocabulary. */
		best = s_first(c);
		min_logit = c->data[best].logit + logf(p);
		if (!isnan(min_logit)) { /* (all NaN: the walk keeps them all) */
			s_swap(&c->data[0], &c->data[best]);
			for (i = 1; i < c->n; i++) {
				if (c->data[i].logit >= min_logit)
					s_swap(&c->data[kept++], &c->data[i]);
				else if (!isnan(c->data[i].logit))
					cut = true;
			}
			for (i = kept; !cut && i < c->n; i++)
				if (isnan(c->data[i].logit))
					s_swap(&c->data[kept++], &c->data[i]);
			c->n = kept;
		}
		s_sort(c);
		return;
	}
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
	/* s_before's order, with the common case (numbers) first */
	for (size_t i = 1; i < c->n; i++) {
		const struct ns_cand *a = &c->data[i], *b = &c->data[best];

		if (a->logit > b->logit || (a->logit == b->logit && a->id < b->id) ||
		    (isnan(b->logit) && s_before(a, b)))
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
		s_heap_down(d, k, 0);
	}
}

/* ns_sample_top_k over the seen logits of tokens 0..n-1 (token i at i), without writing all
 * n of them as candidates first: the k first in s_before's order into c->data[0..k), sorted.
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
		s_heap_down(d, k, j);
	for (i = (uint32_t)k; i < n && i % 8; i++) /* up to a multiple of 8 */
		s_heap_offer(d, k, i, s_seen(logits, i, pen_id, pen_logit, np, &at));
	for (; n - i >= 8; i += 8)
		if (s_block_needs_look(logits, i, d[0].logit, pen_id, np, at))
			for (uint32_t j = i; j < i + 8; j++)
				s_heap_offer(d, k, j, s_seen(logits, j, pen_id, pen_logit, np,
							      &at));
	for (; i < n; i++)
		s_heap_offer(d, k, i, s_seen(logits, i, pen_id, pen_logit, np, &at));
	s_sort_cands(d, k, c->scratch);
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
	s_sort(c);
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
			   struct s_fsum *f)
{
	float lb;
	double sum, cum = 0.0;
	size_t at = 0, done = 0;

	(void)s_argmax(logits, n, pen_id, pen_logit, np, &lb);
	if (isnan(lb))
		return false;
	memset(f, 0, sizeof(*f));
	for (uint32_t i = 0; i < n; i++)
		s_fsum_add(f, expf(s_seen(logits, i, pen_id, pen_logit, np, &at) - lb));
	sum = s_fsum_total(f);
	for (size_t k = 64; k <= n / S_SELECT_MAX_DIV; k *= 8) {
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
	qsort(s->hist_sorted, s->hist_n, sizeof(*s->hist_sorted), s_cmp_i32);
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
		s_penalize(&s->pen_logit[np], cnt, p->repeat_penalty, p->freq_penalty,
			   p->presence_penalty);
		np++;
	}
	return np;
}

/* The chain over the vocabulary without a copy of it where it can: greedy scans the logits,
 * top-k selects straight from them; the penalties touch only the history's tokens. Draws and
 * choices are those of ns_sample_penalties, _top_k, _top_p, _min_p, _temp, _draw in turn on
 * all n_vocab candidates (tests/forward/test_sampling.c checks it). */
int32_t ns_sampler_sample(struct ns_sampler *s, const float *logits)
{
	const struct ns_sampler_params *p = &s->p;
	struct ns_cands c = { .data = s->cands, .scratch = &s->sort_scratch };
	const bool top_k_off = p->top_k <= 0 || (uint32_t)p->top_k >= s->n_vocab;
	bool top_p_done = false;
	size_t np = 0;
	float unused;

	if (s->hist_n && (p->repeat_penalty != 1.0f || p->freq_penalty != 0.0f ||
			  p->presence_penalty != 0.0f))
		np = s_penalized(s, logits);
	if (p->temperature <= 0.0f)
		return s_argmax(logits, s->n_vocab, s->pen_id, s->pen_logit, np, &unused);
	if (top_k_off && p->top_p >= 1.0f && p->min_p > 0.0f &&
	    s_min_p_logits(&c, logits, s->n_vocab, p->min_p, s->pen_id, s->pen_logit, np)) {
		/* min-p alone (gpt-oss's settings): only its survivors become candidates */
	} else if (top_k_off && p->top_p < 1.0f &&
		   s_top_p_logits(&c, logits, s->n_vocab, p->top_p, s->pen_id, s->pen_logit,
				  np, s->fsum)) {
		top_p_done = true; /* top-p alone: only the nucleus becomes candidates */
	} else if (!top_k_off) {
		s_top_k_logits(&c, logits, s->n_vocab, (size_t)p->top_k, s->pen_id, s->pen_logit,
			       np);
	} else {
		ns_cands_init(&c, logits, s->n_vocab);
		for (size_t j = 0; j < np; j++)
			c.data[s->pen_id[j]].logit = s->pen_logit[j];
	}
	if (!top_p_done)
		ns_sample_top_p(&c, p->top_p, 1);
	ns_sample_min_p(&c, p->min_p, 1); /* (after s_min_p_logits: cuts nothing more) */
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
	free((*s)->pen_id);
	free((*s)->pen_logit);
	free((*s)->fsum);
	ns_sort_scratch_free(&(*s)->sort_scratch);
	free(*s);
	*s = NULL;
}
