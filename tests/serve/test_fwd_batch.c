/* test_fwd_batch: several sequences in one evaluation (ns_fwd_eval_batch, the forward pass
 * under nsctl serve's batched decoding) give every sequence exactly - bit for bit - the logits
 * it gets evaluated alone, whatever the grouping: sequences prefilling and decoding in the
 * same step, a sequence split across chunks (n_batch 5), one cut back and continued
 * differently (ns_fwd_seq_truncate), sequences joining late. Models: tiny qwen3 (Q4_K_M),
 * llama (Q8_0) and gpt-oss (MXFP4 experts, sliding-window layers: sequences longer than the
 * window; with n_batch 5 each sequence's sliding layers keep a ring of ceil16(8 + 4) = 16
 * positions, so the cut back by 16 is refused and sequence 1 evaluated again from 0, as
 * nsctl serve does), 2 kernel threads. Independent check: sequence 0 is the oracle's seqA, its logits
 * against llama.cpp's (dequantized weights, as tests/forward). Exit 0 pass, 1 fail, 77 oracle
 * missing (fail when CI=true). */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "forward.h"
#include "kv_type.h"
#include "model.h"
#include "ns_test.h"
#include "weights_fused.h"

#define CHECK(c, ...) NS_REQUIRE(c, __VA_ARGS__)
#define S_SEQ 4
#define S_LEN 24

static const int32_t s_seqA[12] = { 302, 417, 288, 356, 471, 265, 399, 330, 444, 281, 376, 459 };

/* Sequence s's tokens: seqA, then a continuation; the others are other mixes. */
static void s_tokens(uint32_t s, int32_t *t)
{
	for (uint32_t i = 0; i < S_LEN; i++)
		t[i] = s == 0 && i < 12 ? s_seqA[i] :
		       (int32_t)((s_seqA[(i * (s + 3)) % 12] + 37 * s + 11 * i) % 500);
}

/* Logits of every position of ids evaluated alone from an empty cache: (n, n_vocab). */
static float *s_alone(struct ns_fwd *f, const int32_t *ids, uint32_t n)
{
	float *lg = malloc((size_t)n * ns_fwd_n_vocab(f) * sizeof(float));

	CHECK(lg, "oom");
	ns_fwd_reset(f);
	CHECK(ns_fwd_eval(f, ids, n, lg, true) == 0, "alone: %s", ns_fwd_error(f));
	return lg;
}

struct s_item {
	uint32_t seq, n; /* this step: n tokens of sequence seq */
};

/* kv: the KV cache type of both passes (enum ns_kv_type: every sequence's cache has it). */
static void s_model(const char *rel, const char *oracle_rel, int kv)
{
	char path[4096], err[256];
	struct ns_model *m = NULL;
	struct ns_weights *w = NULL;
	struct ns_fwd *one = NULL, *many = NULL;
	struct ns_weights_fused_opts wo = { .n_threads = 2 };
	int32_t toks[S_SEQ][S_LEN], alt[S_LEN];
	float *ref[S_SEQ], *ref_alt, *got;
	uint32_t done[S_SEQ] = { 0 }, nv, compared = 0;
	/* steps: prefill chunks beside decodes, a late joiner, a sequence split by n_batch */
	static const struct s_item steps[][S_SEQ] = {
		{ { 0, 12 }, { 1, 3 } },
		{ { 0, 1 }, { 1, 9 }, { 2, 1 } },
		{ { 2, 7 }, { 0, 1 }, { 1, 1 } },
		{ { 0, 1 }, { 1, 1 }, { 2, 1 }, { 3, 14 } },
		{ { 3, 1 }, { 2, 1 }, { 1, 1 }, { 0, 1 } },
		{ { 0, 2 }, { 1, 2 }, { 2, 2 }, { 3, 2 } },
		{ { 1, 4 }, { 3, 1 } },
	};

	ns_test_oracle_path(path, sizeof(path), rel);
	CHECK(ns_model_open(path, &m, err, sizeof(err)) == 0, "%s: %s", path, err);
	CHECK(ns_weights_fused_new(m, &wo, &w, err, sizeof(err)) == 0, "weights: %s", err);
	CHECK(ns_fwd_new(m, w, &(struct ns_fwd_opts){ .n_ctx = 64, .kv_k = kv, .kv_v = kv }, &one,
			 err, sizeof(err)) == 0,
	      "fwd: %s", err);
	CHECK(ns_fwd_new(m, w, &(struct ns_fwd_opts){ .n_ctx = 64, .n_seq = S_SEQ, .n_batch = 5,
						     .kv_k = kv, .kv_v = kv },
			 &many, err, sizeof(err)) == 0, "fwd batch: %s", err);
	CHECK(ns_fwd_n_seq(many) == S_SEQ, "n_seq");
	nv = ns_fwd_n_vocab(one);
	for (uint32_t s = 0; s < S_SEQ; s++) {
		s_tokens(s, toks[s]);
		ref[s] = s_alone(one, toks[s], S_LEN);
	}
	got = malloc((size_t)S_SEQ * nv * sizeof(float));
	CHECK(got, "oom");
	for (size_t k = 0; k < sizeof(steps) / sizeof(steps[0]); k++) {
		int32_t bt[S_LEN * S_SEQ];
		uint32_t bs[S_LEN * S_SEQ], out[S_SEQ], who[S_SEQ], n = 0, n_out = 0;

		for (uint32_t i = 0; i < S_SEQ && steps[k][i].n; i++) {
			const struct s_item *it = &steps[k][i];

			for (uint32_t j = 0; j < it->n; j++) {
				bt[n] = toks[it->seq][done[it->seq] + j];
				bs[n++] = it->seq;
			}
			done[it->seq] += it->n;
			out[n_out] = n - 1; /* each sequence's last row of the step */
			who[n_out++] = it->seq;
		}
		/* rows must ascend: they do, items are laid out in order */
		CHECK(ns_fwd_eval_batch(many, &(struct ns_fwd_batch){ .tokens = bt, .seq = bs,
			.n = n, .out_rows = out, .n_out = n_out, .logits = got }) == 0,
		      "step %zu: %s", k, ns_fwd_error(many));
		for (uint32_t o = 0; o < n_out; o++) {
			const float *want = ref[who[o]] + (uint64_t)(done[who[o]] - 1) * nv;

			CHECK(!memcmp(got + (uint64_t)o * nv, want, nv * sizeof(float)),
			      "%s step %zu: sequence %u position %u differs from alone", rel, k,
			      who[o], done[who[o]] - 1);
			compared++;
		}
		for (uint32_t s = 0; s < S_SEQ; s++)
			CHECK(ns_fwd_seq_n_past(many, s) == done[s], "n_past of %u", s);
	}
	/* sequence 1 cut back to 5 positions and continued with other tokens */
	memcpy(alt, toks[1], 5 * sizeof(int32_t));
	for (uint32_t i = 5; i < S_LEN; i++)
		alt[i] = (int32_t)((i * 7 + 3) % 500);
	ref_alt = s_alone(one, alt, 12);
	CHECK(ns_fwd_seq_truncate(many, 1, done[1] + 1) < 0, "truncate past the end accepted");
	CHECK(ns_fwd_seq_truncate(many, S_SEQ, 0) < 0, "truncate of a sequence out of range");
	{
		/* gpt-oss: its ring (bound 16 + 1 - 8 = 9 back from 21) refuses; the 5 kept
		 * tokens again from 0 */
		const bool ring = strstr(rel, "gpt-oss") != NULL;
		int rc = ns_fwd_seq_truncate(many, 1, 5);
		uint32_t bs[5] = { 1, 1, 1, 1, 1 };

		CHECK(done[1] == 21 && rc == (ring ? -ERANGE : 0) && ns_fwd_seq_n_past(many, 1) ==
		      (ring ? 21u : 5u), "%s: truncate by 16 gave %d: %s", rel, rc,
		      ns_fwd_error(many));
		if (ring)
			CHECK(ns_fwd_seq_truncate(many, 1, 0) == 0 &&
			      ns_fwd_eval_batch(many, &(struct ns_fwd_batch){ .tokens = alt,
				.seq = bs, .n = 5 }) == 0, "%s: sequence 1 from 0: %s", rel,
			      ns_fwd_error(many));
	}
	{
		uint32_t bs[8] = { 1, 1, 1, 1, 1, 1, 1, 0 }, out[2] = { 6, 7 };
		int32_t bt[8];

		memcpy(bt, alt + 5, 7 * sizeof(int32_t));
		bt[7] = toks[0][done[0]];
		CHECK(ns_fwd_eval_batch(many, &(struct ns_fwd_batch){ .tokens = bt, .seq = bs,
			.n = 8, .out_rows = out, .n_out = 2, .logits = got }) == 0, "after cut");
		CHECK(!memcmp(got, ref_alt + 11 * (uint64_t)nv, nv * sizeof(float)),
		      "%s: the cut sequence's continuation differs from alone", rel);
		CHECK(!memcmp(got + nv, ref[0] + (uint64_t)done[0] * nv, nv * sizeof(float)),
		      "%s: sequence 0 beside the cut one differs", rel);
		compared += 2;
	}
	/* bad batches are refused whole */
	{
		uint32_t bs[1] = { S_SEQ }, out_bad[2] = { 0, 0 };
		int32_t bt[1] = { 1 };

		CHECK(ns_fwd_eval_batch(many, &(struct ns_fwd_batch){ .tokens = bt, .seq = bs,
			.n = 1 }) == -EINVAL, "sequence out of range accepted");
		bs[0] = 0;
		CHECK(ns_fwd_eval_batch(many, &(struct ns_fwd_batch){ .tokens = bt, .seq = bs,
			.n = 1, .out_rows = out_bad, .n_out = 2, .logits = got }) == -EINVAL,
		      "rows out of range accepted");
	}
	/* independent: sequence 0 is seqA, its logits against llama.cpp's */
	if (oracle_rel) {
		size_t len;
		char *o;
		double d = 0;

		ns_test_oracle_path(path, sizeof(path), oracle_rel);
		o = ns_test_read_file(path, &len);
		CHECK(o && len == 12 * (size_t)nv * sizeof(float), "%s", path);
		for (uint32_t i = 0; i < 12 * nv; i++)
			d = fmax(d, fabs(ref[0][i] - ((float *)o)[i]));
		CHECK(d <= 2e-3, "%s: sequence 0 vs llama.cpp max abs diff %g", rel, d);
		free(o);
	}
	printf("%s, %s KV cache: %u logits rows of batched steps bit-identical to each sequence "
	       "alone\n", rel, ns_kv_type_name((enum ns_kv_type)kv), compared);
	for (uint32_t s = 0; s < S_SEQ; s++)
		free(ref[s]);
	free(ref_alt);
	free(got);
	ns_fwd_destroy(&one);
	ns_fwd_destroy(&many);
	ns_weights_destroy(&w);
	ns_model_close(&m);
}

int main(void)
{
	ns_test_require_oracle();
	s_model("tiny/tiny-qwen3-Q4_K_M.gguf", "tiny/tiny-qwen3-Q4_K_M.seqA.dequant.f32", NS_KV_F32);
	s_model("tiny/tiny-llama-Q8_0.gguf", "tiny/tiny-llama-Q8_0.seqA.dequant.f32", NS_KV_F32);
	s_model("tiny/tiny-gpt-oss-MXFP4_MOE.gguf", "tiny/tiny-gpt-oss-MXFP4_MOE.seqA.dequant.f32",
		NS_KV_F32);
	/* typed caches (main's -ctk/-ctv): the batch stores and reads each sequence's own cache
	 * as one sequence alone does (no oracle: the rounding is the cache's) */
	s_model("tiny/tiny-qwen3-Q4_K_M.gguf", NULL, NS_KV_F16);
	s_model("tiny/tiny-llama-Q8_0.gguf", NULL, NS_KV_Q8_0);
	s_model("tiny/tiny-gpt-oss-MXFP4_MOE.gguf", NULL, NS_KV_Q8_0);
	return 0;
}
