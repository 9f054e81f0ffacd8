/* bench_draft.c - nsctl bench --draft: the speculative tg rows. Teacher forcing cannot draft
 * (the forced token is known, nothing is verified), so with --draft every tg row is a greedy
 * generation of n_gen tokens after the same prompt ids, one row per drafter; greedy decoding
 * makes every drafter's tokens the one-token decode's, and a run whose tokens differ fails the
 * bench (as bench/spec/bench_spec). oracle:ALPHA drafts the one-token decode's own tokens,
 * 1 - ALPHA of them replaced by other ids (exactly that many, at positions drawn with a fixed
 * seed per rate), so its drafts agree with the target at rate ALPHA: the acceptance is
 * controlled, the cost of verifying is real. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "ns_progress.h"
#include "ns_util.h"

/* splitmix64 */
static uint64_t s_rng(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* The oracle's drafts for alpha: ref's tokens, of which exactly round((1 - alpha) n) are
 * replaced by another id of the vocabulary (n_vocab >= 2), at positions drawn uniformly
 * (a partial Fisher-Yates shuffle, a fixed seed per rate). Exact, not each token kept with
 * probability alpha: over the few dozen tokens a bench generates, independent draws stray
 * far from the rate (0.9 drew 7 wrong of 24, an agreement of 0.71, below 0.8's draw).
 * Malloc'd, or NULL. */
static int32_t *s_oracle(const struct bench_ids *ref, double alpha, uint32_t n_vocab)
{
	const uint32_t n = ref->n, n_wrong = n_vocab < 2 ? 0 : (uint32_t)((1.0 - alpha) * n + 0.5);
	int32_t *v = malloc((size_t)(n ? n : 1) * sizeof(*v));
	uint32_t *at = malloc((size_t)(n ? n : 1) * sizeof(*at));
	uint64_t x = 0x5eed ^ (uint64_t)(alpha * 1e6);

	if (!v || !at) {
		free(v);
		free(at);
		return NULL;
	}
	for (uint32_t i = 0; i < n; i++) {
		v[i] = ref->ids[i];
		at[i] = i;
	}
	for (uint32_t i = 0; i < n_wrong && i < n; i++) {
		uint32_t j = i + (uint32_t)(s_rng(&x) % (n - i)), p = at[j];

		at[j] = at[i];
		at[i] = p;
		v[p] = (int32_t)(((uint32_t)ref->ids[p] + 1 + s_rng(&x) % (n_vocab - 1)) % n_vocab);
	}
	free(at);
	return v;
}

/* One greedy generation with drafter d (NULL: none, untimed reference) into got. */
static int s_generate(struct ns_engine *e, const struct bench_opts *o, const int32_t *prompt,
		      uint32_t n_prompt, const struct bench_draft *d, const int32_t *oracle,
		      uint32_t n_oracle, struct bench_ids *got)
{
	struct ns_gen_params g;

	ns_gen_params_default(&g);
	g.temperature = 0;
	g.no_stop = true;
	g.repeat_penalty = 1.0f;
	g.n_predict = (int32_t)o->n_gen;
	if (d && d->kind != NS_GEN_DRAFT_NONE) {
		g.draft = d->kind;
		g.draft_max = o->draft_max;
		g.draft_min = o->draft_min;
		g.draft_oracle = oracle;
		g.n_draft_oracle = n_oracle;
	}
	got->n = 0;
	got->n_want = ns_progress_wanted(o->quiet) ? o->n_gen : 0;
	got->t0 = ns_now_ns();
	return ns_engine_generate_ids(e, prompt, n_prompt, &g, bench_collect, got);
}

int bench_draft_runs(struct ns_engine *e, const struct bench_opts *o, const int32_t *prompt,
		     uint32_t n_prompt, struct bench_ids *ref, struct ns_bench_row *rows)
{
	struct bench_ids got = { 0 };
	int rc = 0;

	/* no "none" row to take the target's tokens from: an untimed generation gives them */
	if (!ref->n && o->drafts[0].kind != NS_GEN_DRAFT_NONE) {
		if ((rc = s_generate(e, o, prompt, n_prompt, NULL, NULL, 0, ref)) < 0) {
			fprintf(stderr, "\nnsctl bench: %s\n", ns_engine_error(e));
			return rc;
		}
	}
	for (size_t k = 0; k < o->n_drafts && rc == 0; k++) {
		const struct bench_draft *d = &o->drafts[k];
		struct ns_bench_row *r = &rows[k];
		struct ns_engine_stats st;
		int32_t *oracle = NULL;
		double n;

		if (d->kind == NS_GEN_DRAFT_ORACLE &&
		    !(oracle = s_oracle(ref, d->alpha, ns_engine_n_vocab(e)))) {
			fprintf(stderr, "\nnsctl bench: out of memory\n");
			rc = -ENOMEM;
			break;
		}
		rc = s_generate(e, o, prompt, n_prompt, d, oracle, ref->n, &got);
		free(oracle);
		if (rc < 0) {
			fprintf(stderr, "\nnsctl bench: --draft %s: %s\n", d->name,
				ns_engine_error(e));
			break;
		}
		if (!ref->n && d->kind == NS_GEN_DRAFT_NONE) { /* the first run: the reference */
			struct bench_ids t = *ref;

			*ref = got;
			got = t;
		} else if (got.n != ref->n || memcmp(got.ids, ref->ids, got.n * sizeof(*got.ids))) {
			fprintf(stderr, "\nnsctl bench: --draft %s: the greedy tokens differ from the "
				"one-token decode's (%u and %u tokens)\n", d->name, got.n, ref->n);
			rc = -EPROTO;
			break;
		}
		ns_engine_stats(e, &st);
		if (!(st.decode_tok_s > 0) || r->n_samples >= NS_BENCH_MAX_SAMPLES)
			continue;
		/* running sums; cmd_bench.c's s_finish divides by n_samples */
		n = (double)r->n_samples;
		r->ts[r->n_samples++] = st.decode_tok_s;
		/* per generated token (neurostream.h: so are st's with a drafter) */
		r->bytes_per_token = (r->bytes_per_token < 0 ? 0 : r->bytes_per_token) +
				     (st.dev_gb_per_token > 0 ? st.dev_gb_per_token
							      : st.gb_per_token) * 1e9;
		r->req_bytes_per_token = (r->req_bytes_per_token < 0 ? 0 : r->req_bytes_per_token) +
					 st.gb_per_token * 1e9;
		r->stall_ms_per_token = (r->stall_ms_per_token < 0 ? 0 : r->stall_ms_per_token) +
					st.stall_ms_per_token;
		if ((double)st.arena_peak > r->arena_peak)
			r->arena_peak = (double)st.arena_peak;
		r->cache_hit_rate = (r->cache_hit_rate < 0 ? 0 : r->cache_hit_rate) +
				    st.cache_hit_rate;
		/* means as they go: the drafter's figures */
		r->drafted = ((n ? r->drafted * n : 0) + (st.draft ? st.drafted : 0)) / (n + 1);
		r->accepted = ((n ? r->accepted * n : 0) + (st.draft ? st.accepted : 0)) / (n + 1);
		r->passes_per_token = ((n ? r->passes_per_token * n : 0) +
				       (st.draft ? st.passes_per_token : 1.0)) / (n + 1);
	}
	free(got.ids);
	return rc;
}
