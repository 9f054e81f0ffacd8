/* bench_sampling - the sampler's host time per token against one read of the logits.
 *
 *   bench_sampling [N_VOCAB] [REPS]     (default 151936, Qwen's vocabulary, and 200)
 *
 * Every decoded token ends in ns_sampler_sample over n_vocab logits on the host. The floor
 * is reading them once (a sum over the array, timed in the same run): the chain cannot do
 * with less. Prints, for greedy and for the default chain (temperature 0.8, top-k 40, top-p
 * 0.95, min-p 0.05), the median time per token and its ratio to that floor, the same
 * with a repetition penalty over 64 tokens of history, and top-k and top-p off (gpt-oss's
 * recommended settings; min-p alone then cuts the vocabulary), and top-p alone (top-k 0). The
 * logits are random with ties (flat: the worst case for top-p and min-p, whose survivors are
 * then a large part of the vocabulary), then model-like (-2 ln rank: a dozen tokens hold the
 * mass) for the last two rows; one changes every token so no result is cached. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ns_util.h"
#include "sampling.h"

static int s_cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

static double s_median_ms(uint64_t *ns, unsigned n)
{
	qsort(ns, n, sizeof(*ns), s_cmp_u64);
	return (double)ns[n / 2] / 1e6;
}

/* median ms per ns_sampler_sample with params p (history filled first) */
static int s_time_chain(const struct ns_sampler_params *p, float *lg, uint32_t v, unsigned reps,
			uint64_t *ns, double *ms)
{
	struct ns_sampler *s = NULL;
	int64_t sink = 0;

	if (ns_sampler_new(p, v, &s) < 0)
		return -ENOMEM;
	for (int32_t t = 0; t < p->repeat_last_n; t++)
		ns_sampler_accept(s, (int32_t)((uint32_t)t * 2654435761u % v));
	for (unsigned r = 0; r < reps; r++) {
		uint64_t t0;

		lg[(r * 7919u) % v] += 0.25f;
		t0 = ns_now_ns();
		sink += ns_sampler_sample(s, lg);
		ns[r] = ns_now_ns() - t0;
	}
	ns_sampler_destroy(&s);
	*ms = s_median_ms(ns, reps);
	return sink < 0 ? -EINVAL : 0;
}

int main(int argc, char **argv)
{
	uint32_t v = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 10) : 151936;
	unsigned reps = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 10) : 200;
	struct ns_sampler_params p;
	uint64_t rng = 7, *ns;
	float *lg;
	double floor_ms, ms;
	volatile float sink = 0;

	if (v < 2 || v > (1u << 28) || reps < 3 || reps > 100000) {
		fprintf(stderr, "usage: bench_sampling [N_VOCAB 2..2^28] [REPS 3..100000]\n");
		return 2;
	}
	lg = malloc((size_t)v * sizeof(*lg));
	ns = malloc(reps * sizeof(*ns));
	if (!lg || !ns) {
		fprintf(stderr, "bench_sampling: out of memory\n");
		return 1;
	}
	for (uint32_t i = 0; i < v; i++) /* quarter steps: many ties */
		lg[i] = (float)(int)(ns_rng_uniform(&rng) * 80.0) / 4.0f - 10.0f;
	for (unsigned r = 0; r < reps; r++) { /* the floor: one pass over the logits */
		uint64_t t0 = ns_now_ns();
		float acc[8] = { 0 }; /* independent sums: the loads, not one add chain, set the pace */
		uint32_t i = 0;

		for (; i + 8 <= v; i += 8)
			for (int j = 0; j < 8; j++)
				acc[j] += lg[i + j];
		for (; i < v; i++)
			acc[0] += lg[i];
		for (int j = 0; j < 8; j++)
			sink += acc[j];
		ns[r] = ns_now_ns() - t0;
	}
	floor_ms = s_median_ms(ns, reps);
	printf("n_vocab %u, %u tokens; floor (one read of the logits) %.3f ms\n", v, reps,
	       floor_ms);
	printf("| chain | ms/token | x floor |\n| --- | ---: | ---: |\n");
	for (int k = 0; k < 8; k++) {
		ns_sampler_params_default(&p);
		p.seed = 1;
		if (k % 2 == 0 && k < 4)
			p.temperature = 0.0f;
		if (k == 2 || k == 3)
			p.repeat_penalty = 1.1f;
		if (k == 4 || k == 7) { /* gpt-oss's recommendation: top-k, top-p off, min-p 0.05 */
			p.temperature = 1.0f;
			p.top_k = 0;
			p.top_p = 1.0f;
		}
		if (k == 5 || k == 6) { /* top-p alone (top-k 0): on flat logits, then model-like */
			p.top_k = 0;
			p.min_p = 0.0f;
		}
		if (k == 6) /* logit -2 ln(rank): a few tokens hold the mass, as after a model */
			for (uint32_t i = 0; i < v; i++)
				lg[i] = -2.0f * logf(1.0f + (float)(((uint64_t)i * 7919u) % v));
		if (s_time_chain(&p, lg, v, reps, ns, &ms) < 0) {
			fprintf(stderr, "bench_sampling: sampler failed\n");
			return 1;
		}
		printf("| %s%s | %.3f | %.1f |\n", k == 7 ? "t 1.0, top-k 0, top-p 1.0, min-p 0.05, model-like logits" :
		       k == 6 ? "t 0.8, top-k 0, top-p 0.95, model-like logits" :
		       k == 5 ? "t 0.8, top-k 0, top-p 0.95" :
		       k == 4 ? "t 1.0, top-k 0, top-p 1.0, min-p 0.05" :
		       k % 2 ? "default (t 0.8, top-k 40, top-p 0.95)" : "greedy",
		       k == 2 || k == 3 ? ", repeat penalty 1.1 over 64" : "", ms, ms / floor_ms);
	}
	free(lg);
	free(ns);
	return 0;
}
