// mtp_oracle.cpp - the reference for neurostream's MTP drafter (nscompute/forward/mtp.h):
// llama.cpp's own Qwen3.5 MTP head (src/models/qwen35.cpp graph_mtp) run the way
// common/speculative.cpp's draft-mtp drives it, on a tiny model, dumped for
// tests/forward/test_mtp.c. Not built by meson (it needs a llama.cpp build).
//
// Built and run (llama.cpp d32676d at /work/llama-new, CPU build in b/):
//   L=/work/llama-new
//   g++ -std=c++17 -O1 -I$L/include -I$L/ggml/include -I$L/src tools/mtp_oracle.cpp \
//       -L$L/b/bin -lllama -lggml -lggml-base -Wl,-rpath,$L/b/bin -o /tmp/mtp_oracle
//   build/nsctl/nsctl mkmodel --preset tiny-qwen35 --mtp -s 7 -o /tmp/tq35-mtp.gguf --force
//   /tmp/mtp_oracle /tmp/tq35-mtp.gguf tests/forward/data/mtp-tiny-qwen35
//   (and the same with --preset tiny-qwen35moe into tests/forward/data/mtp-tiny-qwen35moe)
// llama.cpp runs with f32 KV caches and flash attention off: its CPU flash-attention kernel
// rounds K/V to f16 (3e-4 on these logits), which neurostream's exact default does not.
//
// What it writes (float32 little-endian, row-major, no header):
//   PREFIX.proc.f32   (N, n_vocab): the MTP head's logits at positions 0..N-1 of the fixed
//                     sequence, position p fed token p and the trunk's h_nextn of p - 1 (the
//                     hidden state after output_norm; zeros for p = 0), as draft-mtp's
//                     process() pairs them
//   PREFIX.draft.f32  (K, n_vocab): the chained drafts after the sequence: step 0 feeds the
//                     trunk's greedy token after the sequence at position N with h of N - 1,
//                     step i > 0 feeds draft i - 1 at N + i with the MTP's own h_nextn
//                     (after shared_head_norm) of step i - 1, as draft() does
//   PREFIX.json       the tokens, n_vocab, the trunk's next token and the K draft ids
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "llama.h"
#include "llama-ext.h"

static const int SEQ[] = { 1, 17, 300, 42, 99, 7, 511, 256, 3, 128, 64, 200 };
static const int N = sizeof(SEQ) / sizeof(SEQ[0]);
static const int K = 4;

static int argmax(const float *x, int n)
{
	int b = 0;
	for (int i = 1; i < n; i++)
		if (x[i] > x[b])
			b = i;
	return b;
}

static void put(const char *prefix, const char *ext, const float *x, size_t n)
{
	char path[1024];
	snprintf(path, sizeof(path), "%s.%s", prefix, ext);
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(x, sizeof(float), n, f) != n || fclose(f)) {
		fprintf(stderr, "cannot write %s\n", path);
		exit(1);
	}
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: mtp_oracle MODEL.gguf OUT_PREFIX\n");
		return 2;
	}
	llama_backend_init();
	llama_model_params mp = llama_model_default_params();
	mp.load_mtp = true;
	llama_model *model = llama_model_load_from_file(argv[1], mp);
	if (!model || llama_model_n_layer_nextn(model) != 1) {
		fprintf(stderr, "no model with one MTP block\n");
		return 1;
	}
	const int nv = llama_vocab_n_tokens(llama_model_get_vocab(model));
	const int E = llama_model_n_embd_out(model);

	llama_context_params cp = llama_context_default_params();
	cp.n_ctx = 256;
	cp.n_batch = 64;
	cp.n_ubatch = 64;
	cp.n_threads = 1;
	cp.n_threads_batch = 1;
	cp.type_k = GGML_TYPE_F32; /* exact caches: neurostream's default (f16 rounds K/V) */
	cp.type_v = GGML_TYPE_F32;
	cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED; /* its CPU kernel rounds to f16 */
	llama_context *tgt = llama_init_from_model(model, cp);
	llama_context_params cd = cp;
	cd.ctx_type = LLAMA_CONTEXT_TYPE_MTP;
	cd.n_rs_seq = 0;
	llama_context *dft = llama_init_from_model(model, cd);
	if (!tgt || !dft) {
		fprintf(stderr, "no context\n");
		return 1;
	}
	llama_set_embeddings_nextn(tgt, true, false);
	llama_set_embeddings_nextn(dft, true, true);

	// the trunk over the sequence: h_nextn of every row, the logits of the last
	llama_batch b = llama_batch_init(N, 0, 1);
	for (int i = 0; i < N; i++) {
		b.token[i] = SEQ[i];
		b.pos[i] = i;
		b.n_seq_id[i] = 1;
		b.seq_id[i][0] = 0;
		b.logits[i] = i == N - 1;
	}
	b.n_tokens = N;
	if (llama_decode(tgt, b)) {
		fprintf(stderr, "trunk decode failed\n");
		return 1;
	}
	const int next = argmax(llama_get_logits_ith(tgt, N - 1), nv);
	std::vector<float> H((size_t)N * E);
	memcpy(H.data(), llama_get_embeddings_nextn(tgt), H.size() * sizeof(float));

	// process(): position p gets token p and h of p - 1 (zeros at 0); logits of every row
	llama_batch m = llama_batch_init(N, E, 1);
	m.token = (llama_token *)malloc(sizeof(llama_token) * N);
	for (int i = 0; i < N; i++) {
		m.token[i] = SEQ[i];
		m.pos[i] = i;
		m.n_seq_id[i] = 1;
		m.seq_id[i][0] = 0;
		m.logits[i] = 1;
		if (i == 0)
			memset(m.embd, 0, sizeof(float) * E);
		else
			memcpy(m.embd + (size_t)i * E, H.data() + (size_t)(i - 1) * E,
			       sizeof(float) * E);
	}
	m.n_tokens = N;
	if (llama_decode(dft, m)) {
		fprintf(stderr, "mtp decode failed\n");
		return 1;
	}
	std::vector<float> proc((size_t)N * nv);
	for (int i = 0; i < N; i++)
		memcpy(proc.data() + (size_t)i * nv, llama_get_logits_ith(dft, i),
		       sizeof(float) * nv);

	// draft(): chained from the trunk's next token with h of N - 1
	std::vector<float> drafts((size_t)K * nv), h(H.end() - E, H.end());
	int ids[K], tok = next;
	for (int k = 0; k < K; k++) {
		m.token[0] = tok;
		m.pos[0] = N + k;
		m.logits[0] = 1;
		memcpy(m.embd, h.data(), sizeof(float) * E);
		m.n_tokens = 1;
		if (llama_decode(dft, m)) {
			fprintf(stderr, "draft decode failed\n");
			return 1;
		}
		const float *lg = llama_get_logits_ith(dft, 0);
		memcpy(drafts.data() + (size_t)k * nv, lg, sizeof(float) * nv);
		ids[k] = tok = argmax(lg, nv);
		memcpy(h.data(), llama_get_embeddings_nextn_ith(dft, 0), sizeof(float) * E);
	}
	put(argv[2], "proc.f32", proc.data(), proc.size());
	put(argv[2], "draft.f32", drafts.data(), drafts.size());
	char path[1024];
	snprintf(path, sizeof(path), "%s.json", argv[2]);
	FILE *f = fopen(path, "w");
	fprintf(f, "{\"n_vocab\": %d, \"n_embd\": %d, \"tokens\": [", nv, E);
	for (int i = 0; i < N; i++)
		fprintf(f, "%s%d", i ? ", " : "", SEQ[i]);
	fprintf(f, "], \"next\": %d, \"drafts\": [", next);
	for (int k = 0; k < K; k++)
		fprintf(f, "%s%d", k ? ", " : "", ids[k]);
	fprintf(f, "]}\n");
	fclose(f);
	printf("next %d drafts %d %d %d %d\n", next, ids[0], ids[1], ids[2], ids[3]);
	llama_free(dft);
	llama_free(tgt);
	llama_model_free(model);
	return 0;
}
