/* lcpp_logits.c - llama.cpp's logits of a token sequence, the independent oracle of tests that
 * compare ours against llama.cpp on a model we generate (tests/forward/
 * test_gemma4_moe_oracle.py and its committed reference).
 *
 * NOT built by meson: it needs a llama.cpp build. Built and run here as
 *     cc -O2 -std=c11 -I$LLAMA/include -I$LLAMA/ggml/include tools/lcpp_logits.c \
 *        -L$LLAMA/b/bin -lllama -lggml -lggml-base -Wl,-rpath,$LLAMA/b/bin -o lcpp_logits
 *     ./lcpp_logits MODEL.gguf 2,17,301,... OUT.f32
 * with LLAMA=/work/llama-new (ggml-org/llama.cpp d32676d, CPU backend). The tokens are
 * evaluated in one batch from position 0 with an empty cache, every position's logits kept
 * (OUT.f32: [n_tokens][n_vocab] float32, row-major, no header), as the oracle's goldens
 * (../shared/oracle/README.md): 2 threads, KV cache F32, flash attention off, no weight
 * repacking, the whole model on the CPU. No BOS is added: the ids are used as given. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"

static void s_quiet(enum ggml_log_level level, const char *text, void *user)
{
	(void)user;
	if (level >= GGML_LOG_LEVEL_ERROR)
		fputs(text, stderr);
}

int main(int argc, char **argv)
{
	struct llama_model_params mp = llama_model_default_params();
	struct llama_context_params cp = llama_context_default_params();
	struct llama_model *model;
	struct llama_context *ctx;
	struct llama_batch batch;
	int32_t ids[4096], n = 0, n_vocab;
	char *s, *end;
	FILE *out;

	if (argc != 4) {
		fprintf(stderr, "usage: lcpp_logits MODEL.gguf ID,ID,... OUT.f32\n");
		return 2;
	}
	for (s = argv[2]; *s && n < 4096; s = *end ? end + 1 : end) {
		long v = strtol(s, &end, 10);

		if (end == s || v < 0 || (*end && *end != ',')) {
			fprintf(stderr, "lcpp_logits: bad token list at '%s'\n", s);
			return 2;
		}
		ids[n++] = (int32_t)v;
	}
	llama_log_set(s_quiet, NULL);
	llama_backend_init();
	mp.n_gpu_layers = 0;
	mp.use_extra_bufts = false;
	model = llama_model_load_from_file(argv[1], mp);
	if (!model) {
		fprintf(stderr, "lcpp_logits: cannot load %s\n", argv[1]);
		return 1;
	}
	cp.n_ctx = (uint32_t)(n < 256 ? 256 : n);
	cp.n_batch = cp.n_ubatch = (uint32_t)n;
	cp.n_threads = cp.n_threads_batch = 2;
	cp.type_k = cp.type_v = GGML_TYPE_F32;
	cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
	ctx = llama_init_from_model(model, cp);
	if (!ctx) {
		fprintf(stderr, "lcpp_logits: cannot create a context\n");
		return 1;
	}
	n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
	batch = llama_batch_init(n, 0, 1);
	for (int32_t i = 0; i < n; i++) {
		batch.token[i] = ids[i];
		batch.pos[i] = i;
		batch.n_seq_id[i] = 1;
		batch.seq_id[i][0] = 0;
		batch.logits[i] = 1;
	}
	batch.n_tokens = n;
	if (llama_decode(ctx, batch)) {
		fprintf(stderr, "lcpp_logits: llama_decode failed\n");
		return 1;
	}
	out = fopen(argv[3], "wb");
	if (!out) {
		fprintf(stderr, "lcpp_logits: %s: %s\n", argv[3], strerror(errno));
		return 1;
	}
	for (int32_t i = 0; i < n; i++)
		if (fwrite(llama_get_logits_ith(ctx, i), sizeof(float), (size_t)n_vocab, out) !=
		    (size_t)n_vocab) {
			fprintf(stderr, "lcpp_logits: short write\n");
			return 1;
		}
	if (fclose(out)) {
		fprintf(stderr, "lcpp_logits: %s: %s\n", argv[3], strerror(errno));
		return 1;
	}
	fprintf(stderr, "lcpp_logits: %d x %d logits to %s\n", n, n_vocab, argv[3]);
	llama_batch_free(batch);
	llama_free(ctx);
	llama_model_free(model);
	llama_backend_free();
	return 0;
}
