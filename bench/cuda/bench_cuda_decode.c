/* bench_cuda_decode.c - decode speed of the CUDA forward pass with every weight in VRAM.
 *
 *   bench_cuda_decode MODEL.gguf [-p PROMPT_TOKENS] [-n GEN_TOKENS] [-r REPS] [--act f32|q8]
 *
 * Reads the model into RAM (weights_fused), puts every weight matrix in VRAM (cfwd.h
 * all_resident), prefills a prompt of fixed pseudo-random tokens, then decodes greedily, REPS
 * times. Prints prefill and decode tokens per second (median of the reps) and, as the limit
 * measured in the same run, the device-to-device copy bandwidth: a decoded token must read
 * every weight matrix once (bytes/token below), so the decode roofline is copy read-rate ÷
 * bytes per token, and "/roof" is the share of it reached. --act q8: decode GEMVs with int8
 * activations (ns_cuda_gemv_q8, nsctl's `--act q8`). Exit 77 without a GPU. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "cfwd.h"
#include "forward.h"
#include "model.h"
#include "ns_util.h"
#include "nscuda.h"
#include "weights_fused.h"

static int s_cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static uint32_t s_argmax(const float *x, uint32_t n)
{
	uint32_t b = 0;

	for (uint32_t i = 1; i < n; i++)
		if (x[i] > x[b])
			b = i;
	return b;
}

/* Read rate of a 1 GiB device-to-device copy (GB/s of bytes read), best of 5. */
static double s_copy_rate(void)
{
	const uint64_t n = 1ull << 30;
	void *a = NULL, *b = NULL;
	char err[256];
	double best = 0;

	if (ns_cuda_malloc(&a, n, err, sizeof(err)) || ns_cuda_malloc(&b, n, err, sizeof(err))) {
		ns_cuda_free(a);
		return 0;
	}
	ns_cuda_memset(a, 1, n);
	for (int i = 0; i < 6; i++) {
		uint64_t t0;
		double s;

		ns_cuda_sync();
		t0 = ns_now_ns();
		ns_cuda_d2d_async(b, a, n, NULL);
		ns_cuda_sync();
		s = (ns_now_ns() - t0) / 1e9;
		if (i && n / s / 1e9 > best)
			best = n / s / 1e9;
	}
	ns_cuda_free(a);
	ns_cuda_free(b);
	return best;
}

int main(int argc, char **argv)
{
	uint32_t n_prompt = 128, n_gen = 64, reps = 3;
	struct ns_model *m = NULL;
	struct ns_weights *w = NULL;
	struct ns_fwd *f = NULL;
	struct ns_cfwd_stats st;
	struct ns_hparams hp;
	char err[512];
	double *pre, *dec, copy;
	float *logits;
	int32_t *toks;
	uint64_t per_tok = 0, t0;
	uint32_t V, seed = 4242u;
	bool act_q8 = false;

	if (argc < 2) {
		fprintf(stderr, "usage: bench_cuda_decode MODEL.gguf [-p N] [-n N] [-r N] "
			"[--act f32|q8]\n");
		return 2;
	}
	for (int i = 2; i + 1 < argc; i += 2) {
		uint32_t v = (uint32_t)strtoul(argv[i + 1], NULL, 10);

		if (!strcmp(argv[i], "--act") &&
		    (!strcmp(argv[i + 1], "q8") || !strcmp(argv[i + 1], "f32")))
			act_q8 = !strcmp(argv[i + 1], "q8");
		else if (!strcmp(argv[i], "-p") && v)
			n_prompt = v;
		else if (!strcmp(argv[i], "-n") && v)
			n_gen = v;
		else if (!strcmp(argv[i], "-r") && v)
			reps = v;
		else {
			fprintf(stderr, "bench_cuda_decode: bad option %s %s\n", argv[i],
				argv[i + 1]);
			return 2;
		}
	}
	if (ns_cuda_device_count() <= 0) {
		printf("bench_cuda_decode: no CUDA device: skipped\n");
		return 77;
	}
	t0 = ns_now_ns();
	if (ns_model_open(argv[1], &m, err, sizeof(err)) < 0 ||
	    ns_weights_fused_new(m, NULL, &w, err, sizeof(err)) < 0) {
		fprintf(stderr, "bench_cuda_decode: %s\n", err);
		return 1;
	}
	printf("model read into RAM in %.1f s\n", (ns_now_ns() - t0) / 1e9);
	{
		const struct ns_cfwd_opts o = { .n_ctx = n_prompt + n_gen + 8, .n_batch = 512,
						.all_resident = true, .act_q8 = act_q8 };

		t0 = ns_now_ns();
		if (ns_cfwd_new(m, w, &o, &f, err, sizeof(err)) < 0) {
			fprintf(stderr, "bench_cuda_decode: %s\n", err);
			return 1;
		}
	}
	ns_cfwd_stats(f, &st);
	printf("weights to VRAM in %.1f s: %.2f GiB resident, arena %.2f GiB\n",
	       (ns_now_ns() - t0) / 1e9, st.vram_bytes / 1073741824.0,
	       st.vram_budget / 1073741824.0);
	/* bytes a decoded token reads: every resident matrix (MoE: scaled below), the roles of
	 * the architecture table */
	if (ns_hparams_load(m, &hp, err, sizeof(err)) < 0) {
		fprintf(stderr, "bench_cuda_decode: %s\n", err);
		return 1;
	}
	for (uint64_t i = 0; i < m->n_tensors; i++) {
		const enum ns_role r = ns_arch_role(&hp, &m->tensors[i]);

		if (r == NS_ROLE_MATRIX || r == NS_ROLE_EXPERT || r == NS_ROLE_ROWS_MATRIX)
			per_tok += m->tensors[i].n_bytes;
	}
	V = ns_fwd_n_vocab(f);
	toks = calloc(n_prompt + n_gen, sizeof(*toks));
	logits = calloc(V, sizeof(float));
	pre = calloc(reps, sizeof(double));
	dec = calloc(reps, sizeof(double));
	if (!toks || !logits || !pre || !dec)
		return 1;
	for (uint32_t i = 0; i < n_prompt; i++) {
		seed = seed * 1103515245u + 12345u;
		toks[i] = (int32_t)((seed >> 8) % V);
	}
	copy = s_copy_rate();
	for (uint32_t r = 0; r < reps; r++) {
		ns_fwd_reset(f);
		t0 = ns_now_ns();
		if (ns_fwd_eval(f, toks, n_prompt, logits, false) < 0)
			goto fail;
		pre[r] = n_prompt / ((ns_now_ns() - t0) / 1e9);
		t0 = ns_now_ns();
		for (uint32_t g = 0; g < n_gen; g++) {
			int32_t next = (int32_t)s_argmax(logits, V);

			toks[n_prompt + g] = next;
			if (ns_fwd_eval(f, &next, 1, logits, false) < 0)
				goto fail;
		}
		dec[r] = n_gen / ((ns_now_ns() - t0) / 1e9);
	}
	ns_cfwd_stats(f, &st);
	printf("decode steps replay a CUDA graph: %s\n", st.graphs ? "yes" : "no");
	qsort(pre, reps, sizeof(double), s_cmp_d);
	qsort(dec, reps, sizeof(double), s_cmp_d);
	{
		const double roof = copy * 1e9 / (double)per_tok;

		printf("device-to-device copy: %.0f GB/s read\n", copy);
		printf("model %s: %.3f GB of weight matrices per decoded token%s\n", argv[1],
		       per_tok / 1e9, ns_fwd_expert_hits(f, &(uint32_t){ 0 }, &(uint32_t){ 0 }) ?
		       " (MoE: all experts counted, so /roof is a lower bound)" : "");
		printf("prefill %u tokens: %.0f tok/s (median of %u)\n", n_prompt, pre[reps / 2],
		       reps);
		printf("decode %u tokens: %.1f tok/s (median of %u; min %.1f max %.1f), roofline "
		       "%.1f tok/s, /roof %.2f, weight read rate %.0f GB/s\n", n_gen,
		       dec[reps / 2], reps, dec[0], dec[reps - 1], roof, dec[reps / 2] / roof,
		       dec[reps / 2] * per_tok / 1e9);
	}
	ns_fwd_destroy(&f);
	ns_weights_destroy(&w);
	ns_model_close(&m);
	return 0;
fail:
	fprintf(stderr, "bench_cuda_decode: %s\n", ns_fwd_error(f));
	return 1;
}
