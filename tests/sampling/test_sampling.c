/* test_sampling - the sampling steps against llama.cpp's definitions, and seeded determinism.
 * Exits 0 pass, 1 fail. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sampling.h"

static int s_fail;

#define CHECK(cond)                                                                      \
	do {                                                                             \
		if (!(cond)) {                                                           \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
			s_fail = 1;                                                      \
		}                                                                        \
	} while (0)

/* logits = log(probs): softmax gives the probs back */
static void s_from_probs(struct ns_cands *c, const double *p, uint32_t n)
{
	float lg[16];

	for (uint32_t i = 0; i < n; i++)
		lg[i] = (float)log(p[i]);
	ns_cands_init(c, lg, n);
}

static int s_has(const struct ns_cands *c, int32_t id)
{
	for (size_t i = 0; i < c->n; i++)
		if (c->data[i].id == id)
			return 1;
	return 0;
}

static void test_greedy(void)
{
	struct ns_cand buf[8];
	struct ns_cands c = { .data = buf };
	const float lg[5] = { 0.5f, 2.0f, -1.0f, 2.0f, 1.0f };

	ns_cands_init(&c, lg, 5);
	CHECK(ns_sample_greedy(&c) == 1); /* tie between 1 and 3: lowest id */
	ns_sample_temp(&c, 0.0f);         /* temperature 0 keeps only the best */
	CHECK(c.n == 1 && c.data[0].id == 1);
}

static void test_top_k(void)
{
	struct ns_cand buf[8];
	struct ns_cands c = { .data = buf };
	const float lg[5] = { 0.1f, 3.0f, -2.0f, 2.0f, 1.0f };

	ns_cands_init(&c, lg, 5);
	ns_sample_top_k(&c, 2);
	CHECK(c.n == 2 && c.data[0].id == 1 && c.data[1].id == 3);
	ns_cands_init(&c, lg, 5);
	ns_sample_top_k(&c, 0); /* off */
	CHECK(c.n == 5);
	ns_sample_top_k(&c, 99); /* more than there are: all stay */
	CHECK(c.n == 5);
}

static void test_top_p(void)
{
	const double p[4] = { 0.15, 0.5, 0.05, 0.3 };
	struct ns_cand buf[8];
	struct ns_cands c = { .data = buf };

	s_from_probs(&c, p, 4);
	ns_sample_top_p(&c, 0.7f, 1); /* 0.5 + 0.3 reaches 0.7 */
	CHECK(c.n == 2 && s_has(&c, 1) && s_has(&c, 3));
	s_from_probs(&c, p, 4);
	ns_sample_top_p(&c, 0.85f, 1); /* needs 0.5 + 0.3 + 0.15 */
	CHECK(c.n == 3 && !s_has(&c, 2));
	s_from_probs(&c, p, 4);
	ns_sample_top_p(&c, 0.1f, 3); /* min_keep wins */
	CHECK(c.n == 3);
	s_from_probs(&c, p, 4);
	ns_sample_top_p(&c, 1.0f, 1); /* off */
	CHECK(c.n == 4);
}

static void test_min_p(void)
{
	const double p[4] = { 0.15, 0.5, 0.05, 0.3 };
	struct ns_cand buf[8];
	struct ns_cands c = { .data = buf };

	s_from_probs(&c, p, 4);
	ns_sample_min_p(&c, 0.2f, 1); /* keep p >= 0.1: 0.5, 0.3, 0.15 */
	CHECK(c.n == 3 && !s_has(&c, 2));
	s_from_probs(&c, p, 4);
	ns_sample_min_p(&c, 0.7f, 1); /* keep p >= 0.35: only 0.5 */
	CHECK(c.n == 1 && c.data[0].id == 1);
	s_from_probs(&c, p, 4);
	ns_sample_min_p(&c, 0.7f, 2); /* min_keep */
	CHECK(c.n == 2);
	s_from_probs(&c, p, 4);
	ns_sample_min_p(&c, 0.0f, 1); /* off */
	CHECK(c.n == 4);
	/* a logit exactly at the threshold (max + ln p) stays, on candidates (unsorted and
	 * sorted) and in the sampler's min-p-alone path, which draws it */
	{
		enum { N = 1000 };
		static float lg[N];
		static struct ns_cand big[N];
		struct ns_cands u = { .data = big };
		struct ns_sampler_params sp;
		struct ns_sampler *s = NULL;
		int drawn = 0;

		for (uint32_t i = 0; i < N; i++)
			lg[i] = -30.0f;
		lg[5] = 0.0f;
		lg[9] = 0.0f + logf(0.3f);
		ns_cands_init(&u, lg, N);
		ns_sample_min_p(&u, 0.3f, 1);
		CHECK(u.n == 2 && u.data[1].id == 9);
		ns_cands_init(&u, lg, N);
		ns_cands_softmax(&u);
		ns_sample_min_p(&u, 0.3f, 1);
		CHECK(u.n == 2);
		ns_sampler_params_default(&sp);
		sp.temperature = 1.0f;
		sp.top_k = 0;
		sp.top_p = 1.0f;
		sp.min_p = 0.3f;
		CHECK(ns_sampler_new(&sp, N, &s) == 0);
		for (int r = 0; s && r < 200; r++)
			drawn += ns_sampler_sample(s, lg) == 9; /* p = 0.3 / 1.3 */
		CHECK(drawn > 20 && drawn < 100);
		ns_sampler_destroy(&s);
	}
}

static void test_temperature(void)
{
	struct ns_cand buf[4];
	struct ns_cands c = { .data = buf };
	const float lg[3] = { 1.0f, -2.0f, 4.0f };

	ns_cands_init(&c, lg, 3);
	ns_sample_temp(&c, 0.5f);
	CHECK(c.data[0].logit == 2.0f && c.data[1].logit == -4.0f && c.data[2].logit == 8.0f);
}

static void test_penalties(void)
{
	struct ns_cand buf[6];
	struct ns_cands c = { .data = buf };
	const float lg[6] = { 2.0f, -2.0f, 1.0f, 3.0f, 0.0f, 5.0f };
	const int32_t last[5] = { 0, 1, 0, 4, 0 };

	ns_cands_init(&c, lg, 6);
	ns_sample_penalties(&c, last, 5, 2.0f, 0.0f, 0.0f);
	CHECK(c.data[0].logit == 1.0f);  /* positive: divided */
	CHECK(c.data[1].logit == -4.0f); /* negative: multiplied */
	CHECK(c.data[4].logit == 0.0f);  /* zero stays zero */
	CHECK(c.data[2].logit == 1.0f && c.data[3].logit == 3.0f && c.data[5].logit == 5.0f);
	ns_cands_init(&c, lg, 6);
	/* token 0 seen 3 times: 2 - 3 * 0.5 - 0.25; token 1 once: -2 - 0.5 - 0.25 */
	ns_sample_penalties(&c, last, 5, 1.0f, 0.5f, 0.25f);
	CHECK(fabsf(c.data[0].logit - 0.25f) < 1e-6f && fabsf(c.data[1].logit + 2.75f) < 1e-6f);
	CHECK(c.data[5].logit == 5.0f);
}

static void test_draw_distribution(void)
{
	const double p[3] = { 0.5, 0.3, 0.2 };
	struct ns_cand buf[4];
	struct ns_cands c = { .data = buf };
	uint64_t rng = 1234;
	int hits[3] = { 0 };
	const int n = 20000;

	for (int i = 0; i < n; i++) {
		int32_t id;

		s_from_probs(&c, p, 3);
		id = ns_sample_draw(&c, &rng);
		CHECK(id >= 0 && id < 3);
		if (id >= 0 && id < 3)
			hits[id]++;
	}
	for (int i = 0; i < 3; i++)
		CHECK(fabs((double)hits[i] / n - p[i]) < 0.02);
}

static void test_sampler_seeded(void)
{
	struct ns_sampler_params sp;
	struct ns_sampler *a = NULL, *b = NULL, *d = NULL;
	float lg[64];
	int same_ab = 1, same_ad = 1;

	for (int i = 0; i < 64; i++)
		lg[i] = (float)sin(i * 0.7) * 2.0f;
	ns_sampler_params_default(&sp);
	sp.temperature = 1.5f;
	sp.top_k = 0;
	sp.top_p = 1.0f;
	sp.min_p = 0.0f;
	sp.seed = 42;
	CHECK(ns_sampler_new(&sp, 64, &a) == 0 && ns_sampler_new(&sp, 64, &b) == 0);
	sp.seed = 43;
	CHECK(ns_sampler_new(&sp, 64, &d) == 0);
	if (!a || !b || !d)
		return;
	for (int i = 0; i < 200; i++) {
		int32_t x = ns_sampler_sample(a, lg), y = ns_sampler_sample(b, lg);
		int32_t z = ns_sampler_sample(d, lg);

		same_ab &= x == y;
		same_ad &= x == z;
		CHECK(x >= 0 && x < 64);
	}
	CHECK(same_ab);  /* same seed: same choices */
	CHECK(!same_ad); /* another seed: another sequence */
	ns_sampler_destroy(&a);
	ns_sampler_destroy(&b);
	ns_sampler_destroy(&d);
	CHECK(a == NULL);
}

static void test_sampler_chain(void)
{
	struct ns_sampler_params sp;
	struct ns_sampler *s = NULL;
	const float lg[4] = { 1.0f, 5.0f, 4.9f, 0.0f };

	ns_sampler_params_default(&sp);
	sp.top_k = 1; /* only the best survives whatever the draw */
	CHECK(ns_sampler_new(&sp, 4, &s) == 0);
	for (int i = 0; s && i < 50; i++)
		CHECK(ns_sampler_sample(s, lg) == 1);
	ns_sampler_destroy(&s);

	/* greedy with a repetition penalty: token 1 seen, 5 / 2 < 4.9 -> token 2 */
	ns_sampler_params_default(&sp);
	sp.temperature = 0.0f;
	sp.repeat_penalty = 2.0f;
	CHECK(ns_sampler_new(&sp, 4, &s) == 0);
	if (s) {
		CHECK(ns_sampler_sample(s, lg) == 1);
		ns_sampler_accept(s, 1);
		CHECK(ns_sampler_sample(s, lg) == 2);
		CHECK(lg[1] == 5.0f); /* the caller's logits are untouched */
	}
	ns_sampler_destroy(&s);

	/* the history is a window of repeat_last_n tokens */
	sp.repeat_last_n = 2;
	CHECK(ns_sampler_new(&sp, 4, &s) == 0);
	if (s) {
		ns_sampler_accept(s, 1);
		ns_sampler_accept(s, 3);
		ns_sampler_accept(s, 3); /* 1 has left the window */
		CHECK(ns_sampler_sample(s, lg) == 1);
	}
	ns_sampler_destroy(&s);

	sp.repeat_last_n = -1;
	CHECK(ns_sampler_new(&sp, 4, &s) == -EINVAL);
}

/* The reference order, written out: higher logit first, NaN after every number, ties by id. */
static int s_ref_cmp(const void *a, const void *b)
{
	const struct ns_cand *x = a, *y = b;
	const int nx = isnan(x->logit), ny = isnan(y->logit);

	if (nx != ny)
		return nx - ny;
	if (!nx && x->logit != y->logit)
		return x->logit > y->logit ? -1 : 1;
	return (x->id > y->id) - (x->id < y->id);
}

/* top-k keeps exactly the first k of the whole vocabulary sorted (selection instead of a full
 * sort: it must agree on every set, order and tie), and greedy takes the first of that order
 * (a NaN never wins, not even at index 0) */
static void test_top_k_large(void)
{
	const uint32_t n = 5003;
	static const int32_t ks[] = { 1, 2, 7, 40, 1000, 5002 };
	struct ns_cand *buf = malloc(n * sizeof(*buf)), *ref = malloc(n * sizeof(*ref));
	float *lg = malloc(n * sizeof(*lg));
	uint64_t rng = 99;

	if (!buf || !ref || !lg) {
		CHECK(0);
		goto out;
	}
	for (int round = 0; round < 6; round++) {
		for (uint32_t i = 0; i < n; i++) /* few distinct values: many ties */
			lg[i] = (float)(int)(ns_rng_uniform(&rng) * (round ? 50 : 5000)) / 8.0f;
		if (round == 5) /* negative numbers, and -0 tied with +0 (by id, as equal) */
			for (uint32_t i = 0; i < n; i++)
				lg[i] = i % 13 == 0 ? -0.0f : i % 17 == 0 ? 0.0f : lg[i] - 3.0f;
		if (round == 2 || round == 3) /* NaNs, one at index 0, and infinities */
			for (uint32_t i = 0; i < n; i += 97)
				lg[i] = i % 3 == 0 ? NAN : i % 2 ? INFINITY : -INFINITY;
		if (round == 4) /* the first 50 NaN: the scans start from a NaN best */
			for (uint32_t i = 0; i < 50; i++)
				lg[i] = NAN;
		for (uint32_t i = 0; i < n; i++)
			ref[i] = (struct ns_cand){ (int32_t)i, lg[i], 0.0f };
		qsort(ref, n, sizeof(*ref), s_ref_cmp);
		for (size_t j = 0; j < sizeof(ks) / sizeof(ks[0]); j++) {
			struct ns_cands c = { .data = buf };
			int same = 1;

			ns_cands_init(&c, lg, n);
			ns_sample_top_k(&c, ks[j]);
			CHECK(c.n == (size_t)ks[j] && c.sorted);
			for (size_t i = 0; i < c.n; i++)
				same &= c.data[i].id == ref[i].id;
			CHECK(same);
		}
		/* min-p on unsorted candidates (one pass, then only the survivors sorted) keeps
		 * what the walk over the sorted vocabulary keeps, in the same order */
		for (int q = 0; q < 4; q++) {
			static const float ps[4] = { 0.05f, 0.5f, 0.999f, 1.5f };
			struct ns_cands u = { .data = buf }, w = { .data = ref };
			int same;

			ns_cands_init(&u, lg, n);
			ns_cands_init(&w, lg, n);
			ns_cands_softmax(&w); /* sorted: the walk */
			ns_sample_min_p(&u, ps[q], 1);
			ns_sample_min_p(&w, ps[q], 1);
			same = u.n == w.n && u.sorted;
			for (size_t i = 0; same && i < u.n; i++)
				same = u.data[i].id == w.data[i].id;
			CHECK(same);
		}
		/* top-p on unsorted candidates (a selection growing until the mass is reached)
		 * keeps what the walk over the sorted vocabulary keeps, in the same order, with
		 * the same probabilities to the bit */
		for (int q = 0; q < 6; q++) {
			static const float ps[6] = { 0.01f, 0.3f, 0.9f, 0.995f, 0.99999f, 0.5f };
			const size_t keep = q == 5 ? 300 : 1;
			struct ns_cands u = { .data = buf }, w = { .data = ref };
			int same;

			ns_cands_init(&u, lg, n);
			ns_cands_init(&w, lg, n);
			ns_cands_softmax(&w);
			ns_sample_top_p(&u, ps[q], keep);
			ns_sample_top_p(&w, ps[q], keep);
			same = u.n == w.n && u.sorted;
			for (size_t i = 0; same && i < u.n; i++)
				same = u.data[i].id == w.data[i].id &&
				       memcmp(&u.data[i].p, &w.data[i].p, sizeof(float)) == 0;
			CHECK(same);
		}
		for (uint32_t i = 0; i < n; i++) /* ref again: the reference order */
			ref[i] = (struct ns_cand){ (int32_t)i, lg[i], 0.0f };
		qsort(ref, n, sizeof(*ref), s_ref_cmp);
		{ /* a full sort of shuffled candidates (softmax sorts): the reference order */
			struct ns_cands c = { .data = buf };
			int same = 1;

			ns_cands_init(&c, lg, n);
			for (uint32_t i = n - 1; i > 0; i--) {
				uint32_t j = (uint32_t)(ns_rng_uniform(&rng) * (i + 1));
				struct ns_cand t = buf[i];

				buf[i] = buf[j < i ? j : i];
				buf[j < i ? j : i] = t;
			}
			ns_cands_softmax(&c);
			for (uint32_t i = 0; i < n; i++)
				same &= c.data[i].id == ref[i].id;
			CHECK(same && c.sorted);
		}
		{
			struct ns_cands c = { .data = buf };
			struct ns_sampler_params sp;
			struct ns_sampler *sm = NULL;

			ns_cands_init(&c, lg, n);
			CHECK(ns_sample_greedy(&c) == ref[0].id);
			ns_sampler_params_default(&sp);
			sp.temperature = 0.0f; /* the sampler's own greedy path, no candidates */
			CHECK(ns_sampler_new(&sp, n, &sm) == 0);
			if (sm)
				CHECK(ns_sampler_sample(sm, lg) == ref[0].id);
			ns_sampler_destroy(&sm);
			/* its top-k path (k 7) at a temperature that leaves the best logit only */
			sp.temperature = 0.001f;
			sp.top_k = 7;
			CHECK(ns_sampler_new(&sp, n, &sm) == 0);
			if (sm) {
				const int32_t t = ns_sampler_sample(sm, lg);

				CHECK(t >= 0 && (uint32_t)t < n && lg[t] == ref[0].logit);
			}
			ns_sampler_destroy(&sm);
		}
	}
	/* all NaN: the lowest id, both ways */
	for (uint32_t i = 0; i < 8; i++)
		lg[i] = NAN;
	{
		struct ns_cands c = { .data = buf };

		ns_cands_init(&c, lg, 8);
		CHECK(ns_sample_greedy(&c) == 0);
	}
out:
	free(buf);
	free(ref);
	free(lg);
}

/* Softmax gives every token the same probability, to the bit, whatever order its candidates
 * are in (top-p relies on it to cut unsorted candidates where the sorted walk cuts); and a
 * peaked distribution (a model's nucleus: a few tokens hold most of the mass, the cut lies
 * in the first selection, or past several) is cut by top-p unsorted as sorted. */
static void test_softmax_any_order(void)
{
	const uint32_t n = 40000;
	struct ns_cand *a = malloc(n * sizeof(*a)), *b = malloc(n * sizeof(*b));
	float *lg = malloc(n * sizeof(*lg)), *pa = malloc(n * sizeof(*pa));
	uint64_t rng = 321;

	if (!a || !b || !lg || !pa) {
		CHECK(0);
		goto out;
	}
	for (uint32_t i = 0; i < n; i++) /* 60 nats of spread: sums in double would round */
		lg[i] = (float)(ns_rng_uniform(&rng) * 60.0 - 50.0);
	for (int round = 0; round < 3; round++) {
		struct ns_cands u = { .data = a }, w = { .data = b };
		int same = 1;

		ns_cands_init(&u, lg, n);
		for (uint32_t i = n - 1; i > 0; i--) { /* shuffle u */
			uint32_t j = (uint32_t)(ns_rng_uniform(&rng) * (i + 1));
			struct ns_cand t = u.data[i];

			u.data[i] = u.data[j];
			u.data[j] = t;
		}
		/* the sum itself: sorted, shuffled and reversed, the same bits (a sum in double
		 * in the array's order differs in its last bits) */
		for (size_t i = 0; i < u.n; i++)
			u.data[i].p = expf(u.data[i].logit - 10.0f);
		{
			const double s1 = ns_cands_sum_p(u.data, u.n);
			double s2, s3;

			for (size_t i = 0; i < u.n / 2; i++) {
				struct ns_cand t = u.data[i];

				u.data[i] = u.data[u.n - 1 - i];
				u.data[u.n - 1 - i] = t;
			}
			s2 = ns_cands_sum_p(u.data, u.n);
			qsort(u.data, u.n, sizeof(*u.data), s_ref_cmp);
			s3 = ns_cands_sum_p(u.data, u.n);
			CHECK(memcmp(&s1, &s2, sizeof(s1)) == 0 && memcmp(&s1, &s3, sizeof(s1)) == 0);
			long double ref = 0.0L; /* and the right sum */

			for (size_t i = 0; i < u.n; i++)
				ref += u.data[i].p;
			CHECK(fabsl((long double)s1 - ref) <= 1e-12L * ref && s1 > 1.0);
		}
		ns_cands_softmax(&u);
		for (size_t i = 0; i < u.n; i++)
			pa[u.data[i].id] = u.data[i].p;
		/* the same logits, computed unsorted by top-p (p just under 1: no cut) */
		ns_cands_init(&w, lg, n);
		for (uint32_t i = 0; i < n / 2; i++) { /* reversed halves: another order */
			struct ns_cand t = w.data[i];

			w.data[i] = w.data[n - 1 - i];
			w.data[n - 1 - i] = t;
		}
		ns_sample_top_p(&w, 0.9999999f, 1);
		for (size_t i = 0; i < w.n; i++)
			same &= memcmp(&pa[w.data[i].id], &w.data[i].p, sizeof(float)) == 0;
		CHECK(same && w.n > 0);
		/* peaked: logit -s*ln(rank), ranks scattered over the ids */
		for (uint32_t i = 0; i < n; i++)
			lg[i] = -(float)(round + 1) * logf(1.0f + (float)((i * 7919u) % n));
		for (int q = 0; q < 3; q++) {
			static const float ps[3] = { 0.5f, 0.95f, 0.9999f };
			struct ns_sampler_params sp;
			struct ns_sampler *sm = NULL;
			uint64_t rng = 77;

			ns_cands_init(&u, lg, n);
			ns_cands_init(&w, lg, n);
			ns_cands_softmax(&w);
			ns_sample_top_p(&u, ps[q], 1);
			ns_sample_top_p(&w, ps[q], 1);
			same = u.n == w.n && u.sorted && u.n < n;
			for (size_t i = 0; same && i < u.n; i++)
				same = u.data[i].id == w.data[i].id &&
				       memcmp(&u.data[i].p, &w.data[i].p, sizeof(float)) == 0;
			CHECK(same);
			/* the sampler's top-p-alone path (the nucleus straight from the logits: in
			 * its first selection, after growing, or handed to the sort) draws what
			 * the steps draw */
			ns_sampler_params_default(&sp);
			sp.temperature = 1.0f;
			sp.top_k = 0;
			sp.top_p = ps[q];
			sp.min_p = 0.0f;
			sp.seed = 77;
			CHECK(ns_sampler_new(&sp, n, &sm) == 0);
			for (int r = 0; sm && r < 40; r++) {
				lg[(uint32_t)r * 7u % n] -= 0.5f;
				ns_cands_init(&w, lg, n);
				ns_sample_top_p(&w, sp.top_p, 1);
				ns_sample_temp(&w, sp.temperature);
				same &= ns_sampler_sample(sm, lg) == ns_sample_draw(&w, &rng);
			}
			CHECK(same);
			ns_sampler_destroy(&sm);
		}
		for (uint32_t i = 0; i < n; i++)
			lg[i] = (float)(ns_rng_uniform(&rng) * 60.0 - 50.0);
	}
out:
	free(a);
	free(b);
	free(lg);
	free(pa);
}

/* the sampler's penalties (applied by token id) equal ns_sample_penalties on candidates */
static void test_sampler_penalties_sparse(void)
{
	const uint32_t n = 300;
	float lg[300];
	struct ns_cand buf[300];
	struct ns_sampler_params sp;
	struct ns_sampler *s = NULL;
	int32_t last[64]; /* the sampler's window, oldest first */
	size_t n_last = 0;
	uint64_t rng = 5;

	for (uint32_t i = 0; i < n; i++)
		lg[i] = (float)(ns_rng_uniform(&rng) * 8.0 - 4.0);
	lg[7] = 6.0f; /* wins until its count in the window pulls it under the others */
	ns_sampler_params_default(&sp);
	sp.temperature = 0.0f;
	sp.repeat_penalty = 1.3f;
	sp.freq_penalty = 0.2f;
	sp.presence_penalty = 0.1f;
	CHECK(ns_sampler_new(&sp, n, &s) == 0);
	for (int step = 0; s && step < 200; step++) {
		struct ns_cands c = { .data = buf };
		const int32_t got = ns_sampler_sample(s, lg);
		/* the winner, and every third step token 7 as well: counts above 1 occur */
		const int32_t acc[2] = { got, 7 };

		ns_cands_init(&c, lg, n);
		ns_sample_penalties(&c, last, n_last, sp.repeat_penalty, sp.freq_penalty,
				    sp.presence_penalty);
		CHECK(got == ns_sample_greedy(&c));
		for (int a = 0; a < (step % 3 ? 1 : 2); a++) {
			ns_sampler_accept(s, acc[a]);
			if (n_last == 64)
				memmove(last, last + 1, --n_last * sizeof(*last));
			last[n_last++] = acc[a];
		}
	}
	ns_sampler_destroy(&s);
}

/* The sampler's chain (top-k straight from the logits, penalties by token id, min-p alone
 * straight from the logits) draws what the steps draw one after another on all candidates,
 * with and without penalties, at several k (and top-k off), with top-p on and off and three
 * min-p, over logits that change every token (NaNs in some). */
static void test_sampler_matches_steps(void)
{
	enum { N = 2000, STEPS = 60 };
	static const int32_t ks[] = { 0, 1, 7, 40, N - 1, N };
	float *lg = malloc(N * sizeof(*lg));
	struct ns_cand *buf = malloc(N * sizeof(*buf));
	int32_t last[64];

	for (int pen = 0; pen < 8 && lg && buf; pen++) {
		for (size_t j = 0; j < sizeof(ks) / sizeof(ks[0]); j++) {
			/* (min-p 1e-4 cuts no number: the NaNs stay) */
			static const float top_ps[4] = { 0.9f, 1.0f, 1.0f, 1.0f };
			static const float min_ps[4] = { 0.02f, 0.02f, 0.3f, 1e-4f };
			struct ns_sampler_params sp;
			struct ns_sampler *s = NULL;
			uint64_t rng = 11, vals = 3;
			size_t n_last = 0;
			int same = 1;

			ns_sampler_params_default(&sp);
			sp.temperature = 0.9f;
			sp.top_k = ks[j];
			sp.top_p = top_ps[pen / 2];
			sp.min_p = min_ps[pen / 2];
			sp.seed = 11;
			sp.repeat_penalty = pen % 2 ? 1.4f : 1.0f;
			sp.freq_penalty = pen % 2 ? 0.3f : 0.0f;
			if (ns_sampler_new(&sp, N, &s) < 0) {
				CHECK(0);
				continue;
			}
			for (int step = 0; step < STEPS; step++) {
				struct ns_cands c = { .data = buf };
				int32_t got, want;

				for (uint32_t i = 0; i < N; i++) /* quarter steps: ties */
					lg[i] = (float)(int)(ns_rng_uniform(&vals) * 24.0) / 4.0f;
				if (step % 2) /* peaked (the nucleus is a few tokens), ties */
					for (uint32_t i = 0; i < N; i++)
						lg[i] = -2.0f * (float)(int)(4.0f * logf(1.0f +
							(float)((i * 7919u + (uint32_t)step) % N))) / 4.0f;
				if (step % 5 == 4)
					lg[(uint32_t)step * 37u % N] = NAN;
				got = ns_sampler_sample(s, lg);
				ns_cands_init(&c, lg, N);
				ns_sample_penalties(&c, last, n_last, sp.repeat_penalty,
						    sp.freq_penalty, sp.presence_penalty);
				ns_sample_top_k(&c, sp.top_k);
				ns_sample_top_p(&c, sp.top_p, 1);
				ns_sample_min_p(&c, sp.min_p, 1);
				ns_sample_temp(&c, sp.temperature);
				want = ns_sample_draw(&c, &rng);
				same &= got == want;
				ns_sampler_accept(s, got);
				if (n_last == 64)
					memmove(last, last + 1, --n_last * sizeof(*last));
				last[n_last++] = got;
			}
			CHECK(same);
			ns_sampler_destroy(&s);
		}
	}
	free(lg);
	free(buf);
}

int main(void)
{
	test_greedy();
	test_top_k();
	test_top_p();
	test_softmax_any_order();
	test_min_p();
	test_temperature();
	test_penalties();
	test_draw_distribution();
	test_sampler_seeded();
	test_sampler_chain();
	test_top_k_large();
	test_sampler_penalties_sparse();
	test_sampler_matches_steps();
	if (s_fail)
		return 1;
	printf("sampling: all checks passed\n");
	return 0;
}
