/* test_cfwd.c - the CUDA forward pass (cfwd.h) against the CPU forward pass.
 *
 *   test_cfwd MODEL.gguf [--expect-refusal TEXT | --kernels]
 *
 * Linked twice: with the real kernels (exit 77 without a GPU) and with the host emulation of
 * nscuda.h (runs everywhere: the orchestration - VRAM windows, staging, MoE grouping, KV
 * placement - checked against the CPU on every machine). For one oracle model:
 *   1. prompt of 37 tokens with logits of every position: per-position cosine with the CPU
 *      pass >= 0.999, and max |diff| reported;
 *   2. the same prompt with every weight streamed through 4 KiB-ish staging slots, and with
 *      half of every matrix resident: logits bit-identical to the all-resident run
 *      (output identical across budgets and block sizes);
 *   3. 8 greedy decode steps after the prompt: the same token as the CPU wherever the CPU's
 *      top-2 margin exceeds the largest CPU/CUDA difference of those two logits; and the
 *      same steps with CUDA graphs off give the same bits (dense models replay a graph);
 *   4. MoE: every (token, layer) routed n_used experts (hit counts);
 *   5. a VRAM budget too small is refused with -ENOMEM and figures, never an abort;
 *   6. int8 activations (opts.act_q8, ns_cuda_gemv_q8): the prompt fed one token at a time
 *      (n_batch 1, so every matmul is a decode GEMV) against the CPU pass with NS_ACT_Q8 the
 *      same way: per-position cosine >= 0.9999 (both quantize x identically; only summation
 *      order differs); the logits are not the f32 CUDA pass's (q8 applied); streamed through
 *      small slots bit-identical to resident. The cosine with the f32 CPU pass is printed,
 *      not checked: int8 activations can flip an MoE routing on these tiny models (0.90 at
 *      one position of tiny-gpt-oss, the CPU's own q8 pass alike).
 * With --expect-refusal TEXT: ns_cfwd_new must refuse the model (a negative errno, no pass
 * made) with a one-line reason containing TEXT.
 * With --kernels (the simt build: the kernels' sources on the CPU, ~100x slower than the
 * emulation) only the passes that reach different kernels run: 1, 3 without the plain-launch
 * pass (simt has no graphs), 4, 5 and 6 resident. Streaming, half residency and graph replay
 * are the host's orchestration over the same kernels, checked on every model by the emulation
 * build of this program. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cfwd.h"
#include "forward.h"
#include "ggml_type.h"
#include "gemv.h"
#include "model.h"
#include "ns_test.h"
#include "nscuda.h"
#include "weights_fused.h"

#define N_PROMPT 37
#define N_GEN 8

static int s_fails;

#define CHECK(cond, ...)                                                                      \
	do {                                                                                  \
		if (!(cond)) {                                                                \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                 \
			fprintf(stderr, __VA_ARGS__);                                         \
			fputc('\n', stderr);                                                  \
			s_fails++;                                                            \
		}                                                                             \
	} while (0)

static double s_cosine(const float *a, const float *b, uint64_t n)
{
	double ab = 0, aa = 0, bb = 0;

	for (uint64_t i = 0; i < n; i++) {
		ab += (double)a[i] * b[i];
		aa += (double)a[i] * a[i];
		bb += (double)b[i] * b[i];
	}
	return aa > 0 && bb > 0 ? ab / sqrt(aa * bb) : (aa == bb ? 1.0 : 0.0);
}

static uint32_t s_argmax(const float *x, uint32_t n, float *margin)
{
	uint32_t best = 0, second = n > 1 ? 1 : 0;

	if (n > 1 && x[1] > x[0]) {
		best = 1;
		second = 0;
	}
	for (uint32_t i = 2; i < n; i++) {
		if (x[i] > x[best]) {
			second = best;
			best = i;
		} else if (x[i] > x[second]) {
			second = i;
		}
	}
	*margin = n > 1 ? x[best] - x[second] : INFINITY;
	return best;
}

/* true when some weight matrix is quantized (act q8 changes nothing for float models) */
static bool s_quantized(const struct ns_model *m)
{
	for (uint64_t i = 0; i < m->n_tensors; i++) {
		const uint32_t ty = m->tensors[i].type;

		if (m->tensors[i].ne[1] > 1 && ty != NS_TYPE_F32 && ty != NS_TYPE_F16 &&
		    ty != NS_TYPE_BF16)
			return true;
	}
	return false;
}

/* Logits of the prompt (all positions) through a CUDA pass with options o. */
static int s_cuda_prompt(const struct ns_model *m, struct ns_weights *w,
			 const struct ns_cfwd_opts *o, const int32_t *toks, float *out,
			 struct ns_fwd **keep)
{
	char err[512];
	struct ns_fwd *f = NULL;
	int rc = ns_cfwd_new(m, w, o, &f, err, sizeof(err));

	if (rc < 0) {
		fprintf(stderr, "ns_cfwd_new: %s\n", err);
		return rc;
	}
	rc = ns_fwd_eval(f, toks, N_PROMPT, out, true);
	if (rc < 0)
		fprintf(stderr, "cuda eval: %s\n", ns_fwd_error(f));
	if (keep && rc == 0)
		*keep = f;
	else
		ns_fwd_destroy(&f);
	return rc;
}

int main(int argc, char **argv)
{
	struct ns_cfwd_opts o = { .n_ctx = 128, .n_batch = 64, .all_resident = true };
	struct ns_fwd_opts fo = { .n_ctx = 128, .n_batch = 64 };
	struct ns_cfwd_window *half = NULL;
	struct ns_model *m = NULL;
	struct ns_weights *w = NULL;
	struct ns_fwd *cpu = NULL, *gpu = NULL, *plain = NULL;
	float *lc = NULL, *lg = NULL, *ls = NULL, *lh = NULL, *gc = NULL, *gg = NULL, *gp = NULL;
	struct ns_cfwd_stats gst;
	int32_t toks[N_PROMPT];
	char path[4096], err[512];
	uint64_t nh = 0, V;
	double worst_cos = 1.0, worst_diff = 0.0, worst_q8 = 1.0, worst_q8f = 1.0;
	uint32_t seed = 12345u;
	bool kernels_only = argc > 2 && !strcmp(argv[2], "--kernels");

	if (argc < 2) {
		fprintf(stderr, "usage: test_cfwd MODEL.gguf [--expect-refusal TEXT | --kernels]\n");
		return 2;
	}
	ns_test_require_oracle();
	if (ns_cuda_device_count() <= 0) {
		printf("no CUDA device: skipped\n");
		return NS_TEST_SKIP;
	}
	ns_test_oracle_path(path, sizeof(path), argv[1]);
	if (argc > 2 && !strcmp(argv[2], "--expect-refusal")) { /* a model the GPU cannot run */
		const char *want = argc > 3 ? argv[3] : "";
		bool ok;
		int rc;

		if (ns_model_open(path, &m, err, sizeof(err)) < 0 ||
		    ns_weights_fused_new(m, NULL, &w, err, sizeof(err)) < 0) {
			fprintf(stderr, "%s: %s\n", path, err);
			return 1;
		}
		rc = ns_cfwd_new(m, w, &o, &gpu, err, sizeof(err));
		printf("refused: rc %d, '%s'\n", rc, err);
		ok = rc < 0 && !gpu && strstr(err, want) && !strchr(err, '\n');
		ns_fwd_destroy(&gpu);
		ns_weights_destroy(&w);
		ns_model_close(&m);
		if (!ok)
			fprintf(stderr, "FAIL: expected a refusal containing '%s'\n", want);
		return ok ? 0 : 1;
	}
	if (ns_model_open(path, &m, err, sizeof(err)) < 0 ||
	    ns_weights_fused_new(m, NULL, &w, err, sizeof(err)) < 0 ||
	    ns_fwd_new(m, w, &fo, &cpu, err, sizeof(err)) < 0) {
		fprintf(stderr, "%s: %s\n", path, err);
		return 1;
	}
	V = ns_fwd_n_vocab(cpu);
	for (int i = 0; i < N_PROMPT; i++) { /* fixed pseudo-random prompt over the vocabulary */
		seed = seed * 1103515245u + 12345u;
		toks[i] = (int32_t)((seed >> 8) % (V < 4096 ? V : 4096));
	}
	lc = calloc(N_PROMPT * V, 4);
	lg = calloc(N_PROMPT * V, 4);
	ls = calloc(N_PROMPT * V, 4);
	lh = calloc(N_PROMPT * V, 4);
	gc = calloc(V, 4);
	gg = calloc(V, 4);
	gp = calloc(V, 4);
	half = calloc(m->n_tensors, sizeof(*half));
	if (!lc || !lg || !ls || !lh || !gc || !gg || !gp || !half)
		return 1;
	if (ns_fwd_eval(cpu, toks, N_PROMPT, lc, true) < 0) {
		fprintf(stderr, "cpu eval: %s\n", ns_fwd_error(cpu));
		return 1;
	}

	/* 1. all resident vs the CPU */
	if (s_cuda_prompt(m, w, &o, toks, lg, &gpu) < 0)
		return 1;
	for (int t = 0; t < N_PROMPT; t++) {
		double c = s_cosine(lc + t * V, lg + t * V, V);

		worst_cos = c < worst_cos ? c : worst_cos;
		for (uint64_t i = 0; i < V; i++) {
			double d = fabs((double)lc[t * V + i] - lg[t * V + i]);

			worst_diff = d > worst_diff ? d : worst_diff;
		}
		CHECK(c >= 0.999, "position %d: cosine %.6f < 0.999", t, c);
	}

	/* the arena is exactly what ns_cfwd_vram_need says */
	{
		struct ns_cfwd_need nd;
		struct ns_cfwd_stats st;

		CHECK(ns_cfwd_vram_need(m, &o, &nd, err, sizeof(err)) == 0, "need: %s", err);
		ns_cfwd_stats(gpu, &st);
		CHECK(st.vram_budget == nd.total && st.vram_used <= st.vram_budget &&
		      st.vram_bytes <= nd.weights && nd.weights - st.vram_bytes < 256 * m->n_tensors,
		      "arena %llu (used %llu, weights %llu) vs need %llu (weights %llu)",
		      (unsigned long long)st.vram_budget, (unsigned long long)st.vram_used,
		      (unsigned long long)st.vram_bytes, (unsigned long long)nd.total,
		      (unsigned long long)nd.weights);
	}

	/* 2. streamed through small staging slots; half of every matrix resident */
	if (!kernels_only) {
		struct ns_cfwd_opts so = o;

		so.all_resident = false;
		so.stage_bytes = 4096;
		if (s_cuda_prompt(m, w, &so, toks, ls, NULL) < 0)
			return 1;
		CHECK(!memcmp(ls, lg, N_PROMPT * V * 4),
		      "streamed logits differ from all-resident ones");
		for (uint64_t i = 0; i < m->n_tensors; i++) {
			const struct ns_model_tensor *t = &m->tensors[i];

			if (t->n_rows >= 2 && t->ne[1] > 1)
				half[nh++] = (struct ns_cfwd_window){ (uint32_t)i, t->n_rows / 4,
								     t->n_rows * 3 / 4 };
		}
		so.vram = half;
		so.n_vram = nh;
		if (s_cuda_prompt(m, w, &so, toks, lh, NULL) < 0)
			return 1;
		CHECK(!memcmp(lh, lg, N_PROMPT * V * 4),
		      "half-resident logits differ from all-resident ones");
	}

	/* 3. greedy decode, CPU and CUDA side by side (cc, cg: this step's logits); the same
	 * steps without graphs on a third pass (its prompt must give the same bits first) */
	if (!kernels_only) {
		struct ns_cfwd_opts po = o;

		po.no_graphs = true;
		if (s_cuda_prompt(m, w, &po, toks, ls, &plain) < 0)
			return 1;
		CHECK(!memcmp(ls, lg, N_PROMPT * V * 4), "prompt logits differ without graphs");
	}
	ns_cfwd_stats(gpu, &gst);
	{
		const float *cc = lc + (N_PROMPT - 1) * V, *cg = lg + (N_PROMPT - 1) * V;

		for (int s = 0; s < N_GEN; s++) {
			float mc, mg;
			int32_t tc = (int32_t)s_argmax(cc, (uint32_t)V, &mc);
			int32_t tg = (int32_t)s_argmax(cg, (uint32_t)V, &mg);

			if (tc != tg) {
				double d = fmax(fabs(cc[tc] - cg[tc]), fabs(cc[tg] - cg[tg]));

				CHECK(mc <= 2 * d + 1e-6, "step %d: CPU chose %d, CUDA %d, CPU "
				      "margin %g > difference %g", s, tc, tg, mc, d);
				break;
			}
			if (ns_fwd_eval(cpu, &tc, 1, gc, false) < 0 ||
			    ns_fwd_eval(gpu, &tg, 1, gg, false) < 0 ||
			    (plain && ns_fwd_eval(plain, &tg, 1, gp, false) < 0)) {
				fprintf(stderr, "decode: %s / %s\n", ns_fwd_error(cpu),
					ns_fwd_error(gpu));
				return 1;
			}
			CHECK(s_cosine(gc, gg, V) >= 0.999, "decode step %d: cosine %.6f", s,
			      s_cosine(gc, gg, V));
			CHECK(!plain || !memcmp(gg, gp, V * 4), "decode step %d: graph replay (%s) "
			      "and plain launches differ", s, gst.graphs ? "on" : "off");
			cc = gc;
			cg = gg;
		}
	}

	/* 4. MoE hit counts: every token routed n_used experts in every layer */
	{
		uint32_t nl, ne, nlc, nec;
		const uint64_t *hg = ns_fwd_expert_hits(gpu, &nl, &ne);
		const uint64_t *hc = ns_fwd_expert_hits(cpu, &nlc, &nec);

		CHECK(nl == nlc && ne == nec, "expert tables differ");
		for (uint32_t l = 0; hg && hc && l < nl; l++) {
			uint64_t sg = 0, sc = 0;

			for (uint32_t e = 0; e < ne; e++) {
				sg += hg[(uint64_t)l * ne + e];
				sc += hc[(uint64_t)l * ne + e];
			}
			CHECK(sg == sc, "layer %u: %llu expert selections on the GPU, %llu on the "
			      "CPU", l, (unsigned long long)sg, (unsigned long long)sc);
		}
	}

	/* 5. refusal with figures */
	{
		struct ns_cfwd_opts bo = o;
		struct ns_fwd *f = NULL;
		int rc;

		bo.vram_budget = 1 << 20;
		bo.reserve_vram = 1 << 19;
		rc = ns_cfwd_new(m, w, &bo, &f, err, sizeof(err));
		CHECK(rc == -ENOMEM && strstr(err, "VRAM") && strstr(err, " B"),
		      "a 1 MiB budget: rc %d, '%s'", rc, err);
		ns_fwd_destroy(&f);
	}

	/* 6. int8 activations, token by token, against the CPU's NS_ACT_Q8 */
	{
		const struct ns_weights_fused_opts wo8 = { .act = NS_ACT_Q8 };
		struct ns_fwd_opts fo8 = fo;
		struct ns_cfwd_opts qo = o, qs;
		struct ns_weights *w8 = NULL;
		struct ns_fwd *cpu8 = NULL;
		float *lq = calloc(N_PROMPT * V, 4), *lqs = calloc(N_PROMPT * V, 4);
		float *lc8 = calloc(N_PROMPT * V, 4);
		bool differs = false;

		fo8.n_batch = 1;
		qo.n_batch = 1;
		qo.act_q8 = true;
		qs = qo;
		qs.all_resident = false;
		qs.stage_bytes = 4096;
		if (!lq || !lqs || !lc8 ||
		    ns_weights_fused_new(m, &wo8, &w8, err, sizeof(err)) < 0 ||
		    ns_fwd_new(m, w8, &fo8, &cpu8, err, sizeof(err)) < 0 ||
		    ns_fwd_eval(cpu8, toks, N_PROMPT, lc8, true) < 0) {
			fprintf(stderr, "cpu q8: %s\n", cpu8 ? ns_fwd_error(cpu8) : err);
			return 1;
		}
		if (s_cuda_prompt(m, w, &qo, toks, lq, NULL) < 0 ||
		    (!kernels_only && s_cuda_prompt(m, w, &qs, toks, lqs, NULL) < 0))
			return 1;
		for (int t = 0; t < N_PROMPT; t++) {
			double c8 = s_cosine(lc8 + t * V, lq + t * V, V);
			double cf = s_cosine(lc + t * V, lq + t * V, V);

			worst_q8 = c8 < worst_q8 ? c8 : worst_q8;
			worst_q8f = cf < worst_q8f ? cf : worst_q8f;
			CHECK(c8 >= 0.9999, "act q8, position %d: cosine %.6f with the CPU's q8 pass",
			      t, c8);
		}
		for (uint64_t i = 0; i < N_PROMPT * V && !differs; i++)
			differs = lq[i] != lg[i];
		CHECK(differs || !s_quantized(m), "act q8: logits equal the f32 pass's (not applied)");
		CHECK(kernels_only || !memcmp(lq, lqs, N_PROMPT * V * 4), "act q8: streamed "
		      "logits differ from resident ones");
		ns_fwd_destroy(&cpu8);
		ns_weights_destroy(&w8);
		free(lq);
		free(lqs);
		free(lc8);
	}

	ns_cfwd_stats(gpu, &gst);
	printf("%s: cosine >= %.6f, max |diff| %.3g over %d positions; %s; decode graphs %s; act "
	       "q8 token by token: cosine >= %.6f with the CPU's q8 pass, >= %.6f with its f32 "
	       "pass; %s\n", argv[1], worst_cos, worst_diff, N_PROMPT,
	       kernels_only ? "kernels only (no streamed passes)" :
	       "streamed and half-resident bit-identical",
	       gst.graphs ? "on, bit-identical to plain launches" : "off", worst_q8, worst_q8f,
	       s_fails ? "FAILED" : "ok");
	ns_fwd_destroy(&gpu);
	ns_fwd_destroy(&plain);
	ns_fwd_destroy(&cpu);
	ns_weights_destroy(&w);
	ns_model_close(&m);
	free(lc);
	free(lg);
	free(ls);
	free(lh);
	free(gc);
	free(gg);
	free(gp);
	free(half);
	return s_fails ? 1 : 0;
}
