/* test_hf_tensors - a Hugging Face checkpoint read as a model equals its GGUF conversion.
 *
 * For hf/qwen3_5 and hf/qwen3_5_cond (BF16 safetensors; the oracle's qwen3_5-f32.gguf is
 * llama.cpp's convert_hf_to_gguf.py --outtype f32 of the same weights, and the two
 * checkpoints hold the same text weights), opened as the directory, as model.safetensors
 * and (cond) with a trailing slash:
 *  - the same tensor names and shapes; every tensor read through ns_model_read_rows and
 *    dequantized equals the GGUF tensor bit for bit (the F32 conversion holds BF16 values
 *    upcast, and the converter's 1 + w, -exp(A_log), value-head reorders and conv1d squeeze);
 *    also read in windows of 1, 3 and 7 rows (row runs and groups cut anywhere);
 *  - the same hyperparameters (ns_hparams_load) and every metadata key of the conversion with
 *    the same value, except general.name / size_label / file_type / quantization_version
 *    (naming and output type);
 *  - the tensors that need a rewrite are the ones the converter rewrites: the model has
 *    sources exactly for norms (+1), ssm_a, ssm_dt.bias, ssm_conv1d, ssm_norm (F32), and the
 *    value-head tensors, and streams every other matrix straight from the file.
 * Exit 0 pass, 1 fail, 77 oracle missing. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dequant.h"
#include "ggml_type.h"
#include "gguf.h"
#include "hparams.h"
#include "model.h"
#include "ns_test_gguf.h"
#include "ns_test.h"
#include "ns_util.h"

static int s_fails;

/* Dequantized rows [r0, r0 + n) of t. */
static float *s_rows(const struct ns_model *m, const int *fds, const struct ns_model_tensor *t,
		     uint64_t r0, uint64_t n)
{
	uint8_t *raw = malloc((size_t)(n * t->row_bytes) + 1);
	float *f = malloc((size_t)(n * t->ne[0] * sizeof(float)) + 1);
	int rc;

	NS_REQUIRE(raw && f, "malloc");
	rc = ns_model_read_rows(m, fds, t, r0, n, raw);
	NS_REQUIRE(rc == 0, "%s rows %llu+%llu: %s", t->name, (unsigned long long)r0,
		   (unsigned long long)n, strerror(-rc));
	NS_REQUIRE(ns_dequant_rows(t->type, raw, t->ne[0], n, f) == 0, "dequant %s", t->name);
	free(raw);
	return f;
}

static void s_check_meta(const char *what, const struct ns_model *hf, const struct ns_model *gg)
{
	static const char *const skip[] = { "general.name", "general.size_label",
					    "general.file_type", "general.quantization_version" };
	const struct ns_gguf *a = ns_model_meta(hf), *b = ns_model_meta(gg);
	struct ns_hparams ha, hb;
	char err[NS_ERR_LEN];
	uint64_t n = 0;

	for (uint64_t i = 0; i < b->n_kv; i++) {
		const struct ns_gguf_kv *kb = &b->kv[i], *ka = ns_gguf_find(a, kb->key.s);
		bool skipped = false;

		for (size_t k = 0; k < NS_ARRAY_LEN(skip); k++)
			skipped = skipped || !strcmp(kb->key.s, skip[k]);
		if (skipped)
			continue;
		NS_EXPECT(s_fails, ka && ns_test_gguf_value_eq(&ka->value, &kb->value),
			  "%s: metadata %s %s", what, kb->key.s, ka ? "differs" : "missing");
		n++;
	}
	NS_EXPECT(s_fails, ns_hparams_load(hf, &ha, err, sizeof(err)) == 0, "%s: %s", what, err);
	NS_EXPECT(s_fails, ns_hparams_load(gg, &hb, err, sizeof(err)) == 0, "%s: %s", what, err);
	memset(ha.name, 0, sizeof(ha.name));
	memset(hb.name, 0, sizeof(hb.name));
	NS_EXPECT(s_fails, !memcmp(&ha, &hb, sizeof(ha)), "%s: hyperparameters differ", what);
	printf("%s: %llu metadata keys of the conversion equal, hyperparameters equal\n", what,
	       (unsigned long long)n);
}

/* The tensors a conversion rewrites: which of ours have a source. */
static bool s_rewritten(const char *name, bool reorder)
{
	static const char *const always[] = { "norm.weight", "ssm_a", "ssm_dt.bias",
					      "ssm_conv1d.weight" };
	static const char *const heads[] = { "attn_qkv.weight", "attn_gate.weight",
					     "ssm_beta.weight", "ssm_alpha.weight",
					     "ssm_out.weight" };
	size_t n = strlen(name);

	for (size_t i = 0; i < NS_ARRAY_LEN(always); i++)
		if (n >= strlen(always[i]) && !strcmp(name + n - strlen(always[i]), always[i]))
			return true;
	for (size_t i = 0; reorder && i < NS_ARRAY_LEN(heads); i++)
		if (n >= strlen(heads[i]) && !strcmp(name + n - strlen(heads[i]), heads[i]))
			return true;
	return false;
}

static void s_check(const char *hf_rel, const char *gguf_rel)
{
	char hp[1024], gp[1024], err[NS_ERR_LEN];
	struct ns_model *hf = NULL, *gg = NULL;
	int *hfd = NULL, *gfd = NULL;
	uint64_t bytes = 0, rewritten = 0;

	ns_test_oracle_path(hp, sizeof(hp), hf_rel);
	ns_test_oracle_path(gp, sizeof(gp), gguf_rel);
	NS_REQUIRE(ns_model_open(hp, &hf, err, sizeof(err)) == 0, "%s", err);
	NS_REQUIRE(ns_model_open(gp, &gg, err, sizeof(err)) == 0, "%s", err);
	NS_REQUIRE(hf->format == NS_MODEL_SAFETENSORS && gg->format == NS_MODEL_GGUF, "formats");
	NS_REQUIRE(ns_model_open_fds(hf, &hfd, err, sizeof(err)) == 0, "%s", err);
	NS_REQUIRE(ns_model_open_fds(gg, &gfd, err, sizeof(err)) == 0, "%s", err);
	NS_EXPECT(s_fails, hf->n_tensors == gg->n_tensors, "%s: %llu tensors, the conversion %llu",
		  hf_rel, (unsigned long long)hf->n_tensors, (unsigned long long)gg->n_tensors);
	for (uint64_t i = 0; i < gg->n_tensors; i++) {
		const struct ns_model_tensor *b = &gg->tensors[i], *a = ns_model_find(hf, b->name);
		float *fa, *fb;
		uint64_t cells;

		NS_EXPECT(s_fails, a, "%s: no tensor %s", hf_rel, b->name);
		if (!a)
			continue;
		if (a->n_dims != b->n_dims || memcmp(a->ne, b->ne, sizeof(a->ne))) {
			NS_EXPECT(s_fails, false, "%s: %s has another shape", hf_rel, b->name);
			continue;
		}
		NS_EXPECT(s_fails, (a->src != NULL) == s_rewritten(a->name, true),
			  "%s: %s %s a source", hf_rel, a->name, a->src ? "has" : "lacks");
		rewritten += a->src != NULL;
		cells = b->n_rows * b->ne[0];
		fa = s_rows(hf, hfd, a, 0, a->n_rows);
		fb = s_rows(gg, gfd, b, 0, b->n_rows);
		NS_EXPECT(s_fails, !memcmp(fa, fb, (size_t)cells * sizeof(float)),
			  "%s: %s differs from the conversion", hf_rel, b->name);
		/* windows cut anywhere give the same rows */
		for (uint64_t w = 1; w <= 7; w += 2) {
			for (uint64_t r = 0; r < a->n_rows; r += w) {
				uint64_t n = a->n_rows - r < w ? a->n_rows - r : w;
				float *fw = s_rows(hf, hfd, a, r, n);

				NS_EXPECT(s_fails, !memcmp(fw, fb + r * b->ne[0],
							   (size_t)(n * b->ne[0]) * sizeof(float)),
					  "%s: %s rows %llu+%llu differ", hf_rel, a->name,
					  (unsigned long long)r, (unsigned long long)n);
				free(fw);
			}
		}
		bytes += cells * sizeof(float);
		free(fa);
		free(fb);
	}
	printf("%s: %llu tensors (%llu rewritten at read) equal %s bit for bit (%llu floats), "
	       "whole and in windows of 1, 3, 5, 7 rows\n", hf_rel,
	       (unsigned long long)gg->n_tensors, (unsigned long long)rewritten, gguf_rel,
	       (unsigned long long)(bytes / 4));
	s_check_meta(hf_rel, hf, gg);
	ns_model_close_fds(hf, &hfd);
	ns_model_close_fds(gg, &gfd);
	ns_model_close(&hf);
	ns_model_close(&gg);
}

int main(void)
{
	ns_test_require_oracle();
	s_check("hf/qwen3_5/model-bf16", "hf/qwen3_5/gguf/qwen3_5-f32.gguf");
	s_check("hf/qwen3_5/model-bf16/model.safetensors", "hf/qwen3_5/gguf/qwen3_5-f32.gguf");
	s_check("hf/qwen3_5_cond/model-bf16/", "hf/qwen3_5/gguf/qwen3_5-f32.gguf");
	if (s_fails)
		fprintf(stderr, "%d checks failed\n", s_fails);
	return s_fails ? 1 : 0;
}
