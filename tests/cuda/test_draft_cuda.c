/* test_draft_cuda: the draft model on the cuda backend (nscompute/compute_draft_cuda.c) over
 * the host emulation of the kernels (or the real ones where built with a GPU).
 *   1. its weights reach VRAM byte for byte: its logits are bit-identical to those of a CUDA
 *      pass all resident over the RAM copy of the file (weights_fused.c, the provider
 *      test_cfwd checks against the CPU), and close to the CPU draft pass's (cosine >= 0.999
 *      at every position; on the emulation the greedy tokens agree);
 *   2. the arena is exactly nsc_dmodel_vram_need (nsplan_gpu_resident_need, what nsctl counts)
 *      and ns_cfwd_vram_need's all-resident total, every byte of it used, and the weights in
 *      it are every multiplied tensor's bytes; the heartbeat is called at least once per
 *      tensor uploaded;
 *   3. rounds of proposals with partial acceptance (the cache cut back past rejections) give
 *      the CPU drafter's proposals (one round may differ on a near tie);
 *   4. refusals: an arena cap below the need (-ENOMEM, the figures in the line), another
 *      vocabulary size (-EINVAL), a missing file (-EINVAL).
 *
 * usage: test_draft_cuda MODEL_IN_ORACLE */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "cfwd.h"
#include "compute_draft_model.h"
#include "forward.h"
#include "gpu_need.h"
#include "hparams.h"
#include "model.h"
#include "ns_test.h"
#include "ns_util.h"
#include "weights_fused.h"

#define S_CTX 128
#define S_N 24
#define S_K 4

static uint64_t s_beats;

static void s_beat(void *ctx)
{
	(*(uint64_t *)ctx)++;
}

static uint64_t s_rng(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Every tensor the pass multiplies or looks rows up in: their bytes and how many. */
static void s_matrices(const struct ns_model *m, uint64_t *bytes, uint64_t *n)
{
	struct ns_hparams hp;
	char err[NS_ERR_LEN];

	NS_REQUIRE(ns_hparams_load(m, &hp, err, sizeof(err)) == 0, "%s", err);
	*bytes = *n = 0;
	for (uint64_t i = 0; i < m->n_tensors; i++) {
		enum ns_role r = ns_arch_role(&hp, &m->tensors[i]);

		if (r != NS_ROLE_HELD && r != NS_ROLE_UNUSED) {
			*bytes += m->tensors[i].n_bytes;
			(*n)++;
		}
	}
}

int main(int argc, char **argv)
{
	char path[4096], err[NS_ERR_LEN];
	struct ns_model *m = NULL;
	struct ns_weights *fw = NULL;
	struct ns_fwd *ref = NULL;
	struct nsc_dmodel *cpu = NULL, *gpu = NULL, *bad = NULL;
	struct ns_cfwd_opts ro = { .n_ctx = S_CTX, .all_resident = true,
				   .stage_bytes = NSPLAN_GPU_RESIDENT_STAGE };
	struct ns_cfwd_need nd;
	struct ns_cfwd_stats st;
	struct ns_weights_fused_opts wo = { .n_threads = 1 };
	int32_t toks[S_N], seq[S_CTX], pc[S_K], pg[S_K];
	uint64_t need = 0, mat_bytes, n_mat, rng = 26;
	uint32_t V, n, same = 0, rounds = 0;
	float *lc, *lg, *lr;
	double worst = 1.0;
	int rc;

	ns_test_require_oracle();
	NS_REQUIRE(argc == 2, "usage: test_draft_cuda MODEL_IN_ORACLE");
	if (ns_cfwd_probe(err, sizeof(err)) < 0) {
		printf("SKIP: %s\n", err);
		return 77;
	}
	ns_test_oracle_path(path, sizeof(path), argv[1]);
	NS_REQUIRE(ns_model_open(path, &m, err, sizeof(err)) == 0, "%s", err);
	s_matrices(m, &mat_bytes, &n_mat);

	/* the drafters: cpu (RAM copy), cuda (VRAM, read in slices) */
	NS_REQUIRE(ns_weights_fused_new(m, &wo, &fw, err, sizeof(err)) == 0, "%s", err);
	NS_REQUIRE(ns_cfwd_new(m, fw, &ro, &ref, err, sizeof(err)) == 0, "ref: %s", err);
	V = ns_fwd_n_vocab(ref);
	NS_REQUIRE(nsc_dmodel_open(path, S_CTX, 1, false, NULL, NULL, V, &cpu, err, sizeof(err)) == 0, "%s",
		   err);
	NS_REQUIRE(nsc_dmodel_vram_need(path, S_CTX, &need, err, sizeof(err)) == 0, "%s", err);
	NS_REQUIRE(nsc_dmodel_open_cuda(path, S_CTX, false, V, need, s_beat, &s_beats, &gpu, err,
					sizeof(err)) == 0, "cuda drafter: %s", err);

	/* 2. its arena is what nsctl counts, exactly */
	NS_REQUIRE(ns_cfwd_vram_need(m, &ro, &nd, err, sizeof(err)) == 0, "%s", err);
	ns_cfwd_stats(nsc_dmodel_fwd(gpu), &st);
	printf("arena %llu B (used %llu), weights %llu B, need %llu B (cfwd %llu), %llu beats for "
	       "%llu tensors\n", (unsigned long long)st.vram_budget,
	       (unsigned long long)st.vram_used, (unsigned long long)st.vram_bytes,
	       (unsigned long long)need, (unsigned long long)nd.total,
	       (unsigned long long)s_beats, (unsigned long long)n_mat);
	NS_REQUIRE(need == nd.total && st.vram_budget == need && st.vram_used == need,
		   "arena %llu used %llu; nsplan counts %llu, cfwd %llu",
		   (unsigned long long)st.vram_budget, (unsigned long long)st.vram_used,
		   (unsigned long long)need, (unsigned long long)nd.total);
	NS_REQUIRE(st.vram_bytes == mat_bytes, "%llu B of weights in VRAM, the matrices have %llu",
		   (unsigned long long)st.vram_bytes, (unsigned long long)mat_bytes);
	NS_REQUIRE(s_beats >= n_mat, "%llu heartbeats for %llu tensors uploaded",
		   (unsigned long long)s_beats, (unsigned long long)n_mat);

	/* 1. logits of a prompt: bit-identical to the RAM-copy CUDA pass, close to the cpu's */
	lc = calloc((size_t)S_N * V, 4);
	lg = calloc((size_t)S_N * V, 4);
	lr = calloc((size_t)S_N * V, 4);
	NS_REQUIRE(lc && lg && lr, "out of memory");
	for (int i = 0; i < S_N; i++)
		toks[i] = (int32_t)(s_rng(&rng) % V);
	NS_REQUIRE(ns_fwd_eval(nsc_dmodel_fwd(cpu), toks, S_N, lc, true) == 0, "cpu: %s",
		   ns_fwd_error(nsc_dmodel_fwd(cpu)));
	NS_REQUIRE(ns_fwd_eval(nsc_dmodel_fwd(gpu), toks, S_N, lg, true) == 0, "cuda: %s",
		   ns_fwd_error(nsc_dmodel_fwd(gpu)));
	NS_REQUIRE(ns_fwd_eval(ref, toks, S_N, lr, true) == 0, "ref: %s", ns_fwd_error(ref));
	NS_REQUIRE(!memcmp(lg, lr, (size_t)S_N * V * 4), "the VRAM draft pass's logits differ "
		   "from a CUDA pass over the RAM copy: its weights did not arrive intact");
	for (int t = 0; t < S_N; t++) {
		double c = ns_test_cosine(lc + (size_t)t * V, lg + (size_t)t * V, V);

		worst = c < worst ? c : worst;
		NS_REQUIRE(c >= 0.999, "position %d: cosine %.6f to the cpu draft pass", t, c);
	}
	printf("logits: bit-identical to the RAM-copy cuda pass, worst cosine to the cpu %.6f\n",
	       worst);
	ns_fwd_reset(nsc_dmodel_fwd(cpu));
	ns_fwd_reset(nsc_dmodel_fwd(gpu));

	/* 3. rounds of proposals, partly kept, on both drafters */
	for (n = 0; n < 10; n++)
		seq[n] = (int32_t)(s_rng(&rng) % V);
	nsc_dmodel_begin(cpu, 0, seq, n);
	nsc_dmodel_begin(gpu, 0, seq, n);
	while (n + 2 * S_K + 2 < S_CTX) {
		uint32_t keep;

		rc = nsc_dmodel_propose(cpu, S_K, pc, err, sizeof(err));
		NS_REQUIRE(rc == S_K, "cpu propose at %u: %d (%s)", n, rc, err);
		rc = nsc_dmodel_propose(gpu, S_K, pg, err, sizeof(err));
		NS_REQUIRE(rc == S_K, "cuda propose at %u: %d (%s)", n, rc, err);
		same += !memcmp(pc, pg, sizeof(pc));
		rounds++;
		keep = (uint32_t)(s_rng(&rng) % (S_K + 1));
		for (uint32_t i = 0; i < keep; i++) { /* the cpu's: both sequences stay equal */
			seq[n++] = pc[i];
			nsc_dmodel_accept(cpu, pc[i]);
			nsc_dmodel_accept(gpu, pc[i]);
		}
		do
			seq[n] = (int32_t)(s_rng(&rng) % V);
		while (keep < S_K && seq[n] == pc[keep]);
		nsc_dmodel_accept(cpu, seq[n]);
		nsc_dmodel_accept(gpu, seq[n++]);
	}
	printf("%u of %u rounds: the cuda drafter proposed what the cpu drafter did\n", same,
	       rounds);
	NS_REQUIRE(rounds >= 15 && same + 1 >= rounds, "cuda drafter out of step: %u of %u "
		   "rounds agree", same, rounds);

	/* 4. refusals */
	rc = nsc_dmodel_open_cuda(path, S_CTX, false, V, need - 256, NULL, NULL, &bad, err,
				  sizeof(err));
	NS_REQUIRE(rc == -ENOMEM && !bad && strstr(err, "VRAM"), "a cap below the need: %d (%s)",
		   rc, err);
	printf("ok: a cap 256 B short refused: %s\n", err);
	rc = nsc_dmodel_open_cuda(path, S_CTX, false, V + 1, 0, NULL, NULL, &bad, err,
				  sizeof(err));
	NS_REQUIRE(rc == -EINVAL && !bad && strstr(err, "vocabulary"), "another vocabulary: %d "
		   "(%s)", rc, err);
	rc = nsc_dmodel_open_cuda("/nonexistent/draft.gguf", S_CTX, false, V, 0, NULL, NULL,
				  &bad, err, sizeof(err));
	NS_REQUIRE(rc == -EINVAL && !bad, "a missing file: %d (%s)", rc, err);

	nsc_dmodel_free(&gpu);
	nsc_dmodel_free(&cpu);
	ns_fwd_destroy(&ref);
	ns_weights_destroy(&fw);
	ns_model_close(&m);
	free(lc);
	free(lg);
	free(lr);
	printf("ok: the draft model in VRAM\n");
	return 0;
}
