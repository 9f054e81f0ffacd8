/* sampling.h - choosing the next token from logits, with llama.cpp's semantics.
 *
 * The steps work on a candidate list and can be used alone (tests do); ns_sampler chains them
 * in llama.cpp's default order:
 *     penalties -> top-k -> top-p -> min-p -> temperature -> draw
 * with temperature <= 0 meaning greedy (argmax, lowest id on ties).
 *   repetition penalty: for a token seen c > 0 times in the last repeat_last_n accepted tokens,
 *     logit = logit <= 0 ? logit * repeat : logit / repeat;  logit -= c * freq + present.
 *   top-k: keep the k highest logits (k <= 0: keep all).
 *   top-p: keep the smallest prefix (by probability, descending) whose cumulative probability
 *     reaches p, at least min_keep (p >= 1: keep all).
 *   min-p: keep tokens with probability >= p * max probability, i.e.
 *     logit >= max_logit + log(p) (p <= 0: keep all; never fewer than min_keep).
 *   temperature: logit /= t.
 *   draw: softmax over the survivors and one uniform draw from the sampler's seeded generator.
 * Same seed, same logits, same accepted tokens -> same choices, on every machine.
 *
 * Ownership: ns_sampler_new copies the params; ns_sampler_destroy(&s) frees and nulls. */
#ifndef NS_SAMPLING_H
#define NS_SAMPLING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ns_cand {
	int32_t id;
	float logit;
	float p; /* valid after ns_cands_softmax */
};

/* Buffers for sorting many candidates (a radix sort's), kept from one sort to the next so
 * that a token does not fault in megabytes of fresh pages. Zero-initialized before first use;
 * owned by whoever holds it, freed with ns_sort_scratch_free. */
struct ns_sort_scratch {
	void *buf;
	size_t cap;
};

void ns_sort_scratch_free(struct ns_sort_scratch *s);

struct ns_cands {
	struct ns_cand *data; /* (cap) caller-owned storage */
	size_t n;             /* live candidates: data[0 .. n) */
	bool sorted;          /* descending by logit (ties: lower id first) */
	struct ns_sort_scratch *scratch; /* borrowed, may be NULL (then a sort allocates) */
};

/* data[i] = { i, logits[i] } for i < n_vocab; data must hold n_vocab entries. */
void ns_cands_init(struct ns_cands *c, const float *logits, uint32_t n_vocab);
/* Sort descending and fill p with the softmax of the logits. Each p is the same bits
 * whatever order the candidates came in (the sum is taken exactly per exponent). */
void ns_cands_softmax(struct ns_cands *c);
/* The sum of d[0..n).p, the same bits in any order of d (NaN if one is NaN). */
double ns_cands_sum_p(const struct ns_cand *d, size_t n);

void ns_sample_penalties(struct ns_cands *c, const int32_t *last, size_t n_last, float repeat,
			 float freq, float present);
void ns_sample_top_k(struct ns_cands *c, int32_t k);
void ns_sample_top_p(struct ns_cands *c, float p, size_t min_keep);
void ns_sample_min_p(struct ns_cands *c, float p, size_t min_keep);
void ns_sample_temp(struct ns_cands *c, float t);
/* Id with the highest logit (lowest id on ties); -1 when empty. */
int32_t ns_sample_greedy(const struct ns_cands *c);
/* Softmax, then one draw with u in [0, 1) from *rng (advanced). -1 when empty. */
int32_t ns_sample_draw(struct ns_cands *c, uint64_t *rng);

/* Next uniform double in [0, 1) from a splitmix64 state. */
double ns_rng_uniform(uint64_t *state);

struct ns_sampler_params {
	float temperature;     /* <= 0: greedy */
	int32_t top_k;         /* <= 0: off */
	float top_p;           /* >= 1: off */
	float min_p;           /* <= 0: off */
	float repeat_penalty;  /* 1: off */
	int32_t repeat_last_n; /* history length for penalties; 0: off */
	float freq_penalty;    /* 0: off */
	float presence_penalty; /* 0: off */
	uint64_t seed;
};

/* llama.cpp's defaults: temp 0.8, top_k 40, top_p 0.95, min_p 0.05, repeat 1.0 over 64,
 * no frequency/presence penalty, seed 0. */
void ns_sampler_params_default(struct ns_sampler_params *p);

struct ns_sampler;

/* Returns 0, -EINVAL (n_vocab 0, negative repeat_last_n, NaN params), -ENOMEM. */
int ns_sampler_new(const struct ns_sampler_params *p, uint32_t n_vocab, struct ns_sampler **out);
/* Choose a token from logits (n_vocab); logits are not modified. Does not accept it. */
int32_t ns_sampler_sample(struct ns_sampler *s, const float *logits);
/* Verify a drafted token against logits with the same chain (speculative sampling, the
 * drafter deterministic): greedy returns the argmax, *accepted when it is draft; sampling
 * accepts draft with its probability after the chain, else draws from the chain's
 * distribution without draft. The token returned is distributed exactly as
 * ns_sampler_sample's. Does not accept it into the history. */
int32_t ns_sampler_verify(struct ns_sampler *s, const float *logits, int32_t draft,
			  bool *accepted);
/* Record a token in the penalty history (prompt tokens and generated ones). */
void ns_sampler_accept(struct ns_sampler *s, int32_t token);
void ns_sampler_destroy(struct ns_sampler **s);

#endif
