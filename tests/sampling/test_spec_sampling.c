/* test_spec_sampling: speculative sampling's acceptance rule (ns_sampler_verify) on stories260K's
 * logits from llama.cpp (oracle golden/stories260K__long.f32): for several positions, sampler
 * settings (plain temperature; llama.cpp's default chain; top-k with a repetition penalty
 * over the prompt; min-p alone; top-p alone) and drafted tokens (the most likely, the second,
 * an unlikely one, one the chain cuts), the tokens verify returns over many draws (a fresh
 * uniform each) are distributed as the chain's own distribution, computed independently with
 * the candidate steps of sampling.h: a chi-square test with a bound far in the tail (the
 * seeds are fixed, so the test is deterministic). A rule that always accepts, or that draws
 * from the whole distribution after a rejection, fails it by thousands of sigma. Greedy
 * verification returns the argmax and accepts exactly when the draft is it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ns_test.h"
#include "sampling.h"

#define NV 512     /* stories260K's vocabulary */
#define DRAWS 20000

struct s_set {
	const char *name;
	struct ns_sampler_params p;
};

/* The chain's distribution over the vocabulary (sampling.h's steps in llama.cpp's order). */
static void s_reference(const float *logits, const struct ns_sampler_params *p,
			const int32_t *hist, size_t n_hist, double *dist)
{
	static struct ns_cand data[NV];
	struct ns_cands c = { .data = data };

	ns_cands_init(&c, logits, NV);
	ns_sample_penalties(&c, hist, n_hist, p->repeat_penalty, 0, 0);
	ns_sample_top_k(&c, p->top_k);
	ns_sample_top_p(&c, p->top_p, 1);
	ns_sample_min_p(&c, p->min_p, 1);
	ns_sample_temp(&c, p->temperature);
	ns_cands_softmax(&c);
	memset(dist, 0, NV * sizeof(*dist));
	for (size_t i = 0; i < c.n; i++)
		dist[c.data[i].id] = c.data[i].p;
}

/* Chi-square of counts against DRAWS * dist, tokens expected under 5 times pooled. Fails past
 * df + 8 sqrt(2 df) + 16 (beyond a 1e-9 tail for every df here). */
static void s_chi2(const uint32_t *count, const double *dist, const char *what)
{
	double chi = 0, pool_e = 0, pool_o = 0, bound;
	int df = -1;

	for (int i = 0; i < NV; i++) {
		double e = DRAWS * dist[i];

		if (e == 0) {
			NS_REQUIRE(count[i] == 0, "%s: token %d has probability 0 and came %u times",
				   what, i, count[i]);
			continue;
		}
		if (e < 5) {
			pool_e += e;
			pool_o += count[i];
			continue;
		}
		chi += (count[i] - e) * (count[i] - e) / e;
		df++;
	}
	if (pool_e > 0) {
		chi += (pool_o - pool_e) * (pool_o - pool_e) / pool_e;
		df++;
	}
	df = df < 1 ? 1 : df;
	bound = df + 8 * sqrt(2.0 * df) + 16;
	NS_REQUIRE(chi <= bound, "%s: chi-square %.1f over %d degrees of freedom (bound %.1f): "
		   "not the target's distribution", what, chi, df, bound);
	printf("ok %s: chi-square %.1f, %d degrees of freedom\n", what, chi, df);
}

/* The drafts to try at a row: the first, the second, one of probability in (0, 0.05) if any,
 * one the chain cuts (probability 0) if any. Returns how many. */
static int s_drafts(const double *dist, int32_t *out)
{
	int32_t best = 0, second = -1, low = -1, cut = -1;
	int n = 0;

	for (int32_t i = 1; i < NV; i++)
		if (dist[i] > dist[best])
			best = i;
	for (int32_t i = 0; i < NV; i++) {
		if (i != best && (second < 0 || dist[i] > dist[second]))
			second = i;
		if (dist[i] > 0 && dist[i] < 0.05 && low < 0)
			low = i;
		if (dist[i] == 0 && cut < 0)
			cut = i;
	}
	out[n++] = best;
	if (dist[second] > 0)
		out[n++] = second;
	if (low >= 0)
		out[n++] = low;
	if (cut >= 0)
		out[n++] = cut;
	return n;
}

static void s_greedy(const float *logits)
{
	struct ns_sampler_params p;
	struct ns_sampler *s = NULL;
	int32_t best = 0;
	bool ok;

	for (int32_t i = 1; i < NV; i++)
		if (logits[i] > logits[best])
			best = i;
	ns_sampler_params_default(&p);
	p.temperature = 0;
	NS_REQUIRE(ns_sampler_new(&p, NV, &s) == 0, "sampler");
	NS_REQUIRE(ns_sampler_verify(s, logits, best, &ok) == best && ok, "greedy: the argmax "
		   "drafted is not accepted");
	NS_REQUIRE(ns_sampler_verify(s, logits, (best + 1) % NV, &ok) == best && !ok,
		   "greedy: another draft is not replaced by the argmax");
	ns_sampler_destroy(&s);
}

int main(void)
{
	static const uint32_t rows[] = { 10, 40, 70 };
	static uint32_t count[NV];
	static double dist[NV];
	struct s_set sets[5];
	char path[4096], what[160];
	size_t len;
	float *lg;
	int32_t hist[80];
	size_t n_rows;

	ns_test_require_oracle();
	lg = ns_test_read_file(ns_test_oracle_path(path, sizeof(path),
						   "golden/stories260K__long.f32"), &len);
	NS_REQUIRE(lg && len % (NV * sizeof(float)) == 0, "%s: missing or not [n][512] float32",
		   path);
	n_rows = len / (NV * sizeof(float));
	NS_REQUIRE(n_rows > 70, "%s: %zu rows", path, n_rows);
	for (int i = 0; i < 5; i++)
		ns_sampler_params_default(&sets[i].p);
	sets[0].name = "temperature 1";
	sets[0].p.temperature = 1.0f;
	sets[0].p.top_k = 0;
	sets[0].p.top_p = 1.0f;
	sets[0].p.min_p = 0;
	sets[1].name = "llama.cpp's defaults";
	sets[2].name = "top-k 20, temperature 1.3, repeat penalty 1.3";
	sets[2].p.top_k = 20;
	sets[2].p.temperature = 1.3f;
	sets[2].p.repeat_penalty = 1.3f;
	sets[3].name = "min-p 0.1 alone";
	sets[3].p.top_k = 0;
	sets[3].p.top_p = 1.0f;
	sets[3].p.min_p = 0.1f;
	sets[4].name = "top-p 0.9 alone";
	sets[4].p.top_k = 0;
	sets[4].p.top_p = 0.9f;
	sets[4].p.min_p = 0;
	for (size_t r = 0; r < sizeof(rows) / sizeof(rows[0]); r++) {
		const float *row = lg + (size_t)rows[r] * NV;

		s_greedy(row);
		for (int si = 0; si < 5; si++) {
			struct ns_sampler_params p = sets[si].p;
			size_t n_hist = (size_t)p.repeat_last_n < rows[r] ? (size_t)p.repeat_last_n :
									    rows[r];
			int32_t drafts[4];
			int nd;

			/* the history: stand-in ids of the positions before (penalised tokens) */
			for (size_t i = 0; i < n_hist; i++)
				hist[i] = (int32_t)((rows[r] - n_hist + i) * 37 % NV);
			s_reference(row, &p, hist, p.repeat_penalty != 1.0f ? n_hist : 0, dist);
			nd = s_drafts(dist, drafts);
			for (int di = 0; di < nd; di++) {
				struct ns_sampler *s = NULL;
				uint32_t acc = 0;

				p.seed = 1000u * rows[r] + 10u * si + di;
				NS_REQUIRE(ns_sampler_new(&p, NV, &s) == 0, "sampler");
				for (size_t i = 0; i < n_hist; i++)
					ns_sampler_accept(s, hist[i]);
				memset(count, 0, sizeof(count));
				for (int k = 0; k < DRAWS; k++) {
					bool ok;
					int32_t id = ns_sampler_verify(s, row, drafts[di], &ok);

					NS_REQUIRE(id >= 0 && id < NV, "verify returned %d", id);
					NS_REQUIRE(!ok || id == drafts[di], "accepted, yet not the draft");
					count[id]++;
					acc += ok;
				}
				ns_sampler_destroy(&s);
				snprintf(what, sizeof(what), "row %u, %s, draft %d (p %.4f, accepted "
					 "%.4f)", rows[r], sets[si].name, drafts[di], dist[drafts[di]],
					 (double)acc / DRAWS);
				s_chi2(count, dist, what);
			}
		}
	}
	free(lg);
	printf("ok: verified tokens follow the target's distribution\n");
	return 0;
}
