/* test_fwd_cache_bytes - nsplan's KV-cache term (nsplan/fixed_mem.h, what `plan`'s host_total
 * and the named-budget check count) equals the bytes the cpu pass allocates for its caches
 * (ns_fwd_cache_bytes), for every architecture's tiny oracle model, contexts that are and are
 * not multiples of the K tile, every cache type, and serve's several sequences, and -c 1024
 * where the gemmas' and gpt-oss's sliding layers keep rings of window + n_batch - 1
 * positions (gpt-oss's one per sequence); and its recurrent term (state and rollback
 * buffers, qwen35) equals ns_fwd_state_bytes. An
 * under-count lets a capped run be killed; it once missed sliding-window layers (counted at
 * the window, allocated at the whole context) and K's tile rounding.
 * Exit 0 pass, 1 fail, 77 skip (oracle missing outside CI). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "fixed_mem.h"
#include "forward.h"
#include "hparams.h"
#include "kv_type.h"
#include "model.h"
#include "ns_test.h"
#include "ns_util.h"
#include "weights.h"

int main(void)
{
	static const char *const models[] = {
		"tiny/tiny-llama-F32.gguf", "tiny/tiny-qwen3-Q4_K_M.gguf",
		"tiny/tiny-qwen3moe-Q4_K_M.gguf", "tiny/tiny-gpt-oss-MXFP4_MOE.gguf",
		"tiny/tiny-gemma3-Q4_K_M.gguf", "tiny/tiny-gemma4-Q4_K_M.gguf",
		"hf/gemma4_e/gguf/gemma4_e-f32.gguf", "tiny/tiny-qwen35-Q4_K_M.gguf",
		"tiny/tiny-qwen3vlmoe-Q4_K_M.gguf",
	};
	/* 1024: past window + n_batch - 1, the sliding layers keep rings */
	static const uint32_t ctxs[] = { 4, 100, 256, 1024 };
	/* (K, V) types and their bytes per 32 elements */
	static const struct { enum ns_kv_type k, v; uint32_t kb, vb; } types[] = {
		{ NS_KV_F32, NS_KV_F32, 128, 128 }, { NS_KV_F16, NS_KV_Q8_0, 64, 34 },
	};
	char path[1024], err[NS_ERR_LEN];
	int fails = 0, n = 0, n_ring = 0, n_rec = 0;

	ns_test_require_oracle();
	for (size_t i = 0; i < NS_ARRAY_LEN(models); i++) {
		struct ns_model *m = NULL;
		struct ns_weights *w = NULL;
		struct ns_hparams hp;

		NS_REQUIRE(ns_model_open(ns_test_oracle_path(path, sizeof(path), models[i]), &m,
					 err, sizeof(err)) == 0 &&
			   ns_hparams_load(m, &hp, err, sizeof(err)) == 0 &&
			   ns_weights_ref_new(m, &w, err, sizeof(err)) == 0, "%s: %s", models[i],
			   err);
		for (size_t c = 0; c < NS_ARRAY_LEN(ctxs); c++) {
			for (size_t t = 0; t < NS_ARRAY_LEN(types); t++) {
				for (uint32_t n_seq = 1; n_seq <= 2; n_seq++) {
					struct ns_fwd_opts o = { .n_ctx = ctxs[c], .n_seq = n_seq,
								 .kv_k = types[t].k,
								 .kv_v = types[t].v,
								 .n_rollback =
									 NSPLAN_ROLLBACK_TOKENS };
					struct nsplan_fixed fx;
					struct ns_fwd *f = NULL;
					uint64_t got;

					NS_REQUIRE(nsplan_fixed_compute_kv(m, &hp, ctxs[c], types[t].kb,
									   types[t].vb, 0, &fx, err,
									   sizeof(err)) == 0,
						   "%s: %s", models[i], err);
					if (ns_fwd_new(m, w, &o, &f, err, sizeof(err)) < 0) {
						/* one sequence only (recurrent, gemma): the plan's
						 * n_seq check refuses the same */
						NS_REQUIRE(n_seq > 1, "%s: %s", models[i], err);
						continue;
					}
					got = ns_fwd_cache_bytes(f);
					n++;
					n_ring += fx.ring_positions != 0;
					if (got != fx.kv_bytes * n_seq) {
						fprintf(stderr, "FAIL: %s -c %u %s/%s x%u: the pass holds "
							"%" PRIu64 " bytes of KV cache, the plan counts "
							"%" PRIu64 "\n", models[i], ctxs[c],
							ns_kv_type_name(types[t].k),
							ns_kv_type_name(types[t].v), n_seq, got,
							fx.kv_bytes * n_seq);
						fails++;
					}
					/* the recurrent state and its rollback buffers */
					if (ns_fwd_state_bytes(f) !=
					    fx.recurrent_bytes + fx.rollback_bytes) {
						fprintf(stderr, "FAIL: %s -c %u: the pass holds %" PRIu64
							" bytes of recurrent state and rollback, the "
							"plan counts %" PRIu64 "\n", models[i], ctxs[c],
							ns_fwd_state_bytes(f),
							fx.recurrent_bytes + fx.rollback_bytes);
						fails++;
					}
					n_rec += fx.rollback_bytes != 0;
					ns_fwd_destroy(&f);
				}
			}
		}
		ns_weights_destroy(&w);
		ns_model_close(&m);
	}
	printf("%d passes (%d with rings): KV cache bytes %s the plan's count\n", n, n_ring,
	       fails ? "DIFFER from" : "equal to");
	if (n_rec < 8) { /* qwen35 at every context and type pair */
		fprintf(stderr, "FAIL: only %d passes had a recurrent state\n", n_rec);
		fails++;
	}
	/* the three gemmas at -c 1024, both type pairs, and gpt-oss's with one and two
	 * sequences */
	if (n_ring < 10) {
		fprintf(stderr, "FAIL: only %d passes had ring caches\n", n_ring);
		fails++;
	}
	return fails ? 1 : 0;
}
