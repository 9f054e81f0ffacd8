/* test_mtp - Qwen3.5's MTP block as a drafter (nscompute/forward/mtp.h).
 *
 * 1. Against llama.cpp: the tiny qwen35 (qwen35moe) file with an MTP block is made again by the
 *    generator nsctl mkmodel runs (ns_synth_write: preset PRESET, --mtp, seed 7, F32) and the
 *    block's logits compared with those tools/mtp_oracle.cpp dumped from llama.cpp d32676d
 *    (tests/forward/data/mtp-<preset>.*): every position of a 12-token sequence as the
 *    block follows the trunk (token p with the trunk's h of p - 1), and 4 drafts chained
 *    after it from the trunk's greedy token (each step's logits and argmax).
 * 2. Following the trunk through speculative decoding: pass F (with rollback buffers) drafts
 *    K tokens with the block, evaluates the pending token and K drafts (the first j right,
 *    the rest wrong) as one chunk and is cut back after the j kept, j = 0 .. K in turn; at
 *    every step the block's drafts and their logits equal those of a fresh pass G that
 *    evaluated the kept sequence in one call (so its cache was cut back with the trunk's).
 * 3. A model without an MTP block is refused with -ENOENT and one line.
 * Args: DATA_PREFIX (tests/forward/data/mtp-tiny-qwen35) PRESET (tiny-qwen35). Exit 0 pass,
 * 1 fail.
 *
 * Built again by tests/cuda with NS_TEST_CFWD: every pass is a CUDA pass over the host
 * emulation of the kernels (cfwd.h; the block on the host, fed the pass's h rows), held to
 * the same bounds, and in 1 its block's logits and drafts are also compared with a cpu pass's
 * block: bit for bit (the emulation computes the cpu pass's bits). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef NS_TEST_CFWD
#include "cfwd.h"
#endif
#include "fixed_mem.h"
#include "forward.h"
#include "hparams.h"
#include "json_ints.h"
#include "ns_test.h"
#include "ns_util.h"
#include "synth.h"
#include "weights.h"
#include "weights_fused.h"

#define S_K 4u
#define S_CTX 96u
#define S_STEPS 12u
#define S_TOL 1e-5 /* llama.cpp (f32 caches, no flash attention) against us: 9.5e-7 */

static int s_fails;

/* One FAIL line and go on (the other checks still run). */
#define S_CHECK(cond, ...)                                                   \
	do {                                                                 \
		if (!(cond)) {                                               \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
			fprintf(stderr, __VA_ARGS__);                        \
			fputc('\n', stderr);                                 \
			s_fails++;                                           \
		}                                                            \
	} while (0)

static float *s_read_f32(const char *prefix, const char *ext, uint64_t n)
{
	char path[1024];
	float *x = malloc(n * sizeof(float));
	FILE *fp;

	snprintf(path, sizeof(path), "%s.%s", prefix, ext);
	fp = fopen(path, "rb");
	NS_REQUIRE(x && fp && fread(x, sizeof(float), n, fp) == n && fgetc(fp) == EOF,
		   "%s: missing or not %llu floats", path, (unsigned long long)n);
	fclose(fp);
	return x;
}

static double s_maxdiff(const float *a, const float *b, uint64_t n)
{
	double d = 0;

	for (uint64_t i = 0; i < n; i++)
		d = fmax(d, fabs((double)a[i] - (double)b[i]));
	return d;
}

static int32_t s_argmax(const float *x, uint32_t n)
{
	uint32_t b = 0;

	for (uint32_t i = 1; i < n; i++)
		if (x[i] > x[b])
			b = i;
	return (int32_t)b;
}

static int32_t s_tok(uint32_t i)
{
	return (int32_t)((i * 7919u + 13u) % 509u);
}

static int32_t s_wrong(uint32_t i)
{
	return (int32_t)((s_tok(i) + 17u + i % 5u) % 509u);
}

static void s_beat(void *user)
{
	(*(uint64_t *)user)++;
}

/* A pass of the build's backend with o's context */
#ifdef NS_TEST_CFWD
#define S_NEW(m, w, o, f, err)                                                              \
	ns_cfwd_new(m, w, &(struct ns_cfwd_opts){ .n_ctx = (o)->n_ctx }, f, err, sizeof(err))
#else
#define S_NEW(m, w, o, f, err) ns_fwd_new(m, w, o, f, err, sizeof(err))
#endif

/* A pass with its MTP block open: the cpu pass (cpu), else the build's (NS_TEST_CFWD: the
 * CUDA pass) */
static struct ns_fwd *s_pass_on(struct ns_model *m, struct ns_weights *w, uint32_t n_rollback,
				bool cpu)
{
	struct ns_fwd_opts o = { .n_ctx = S_CTX, .n_rollback = n_rollback };
	struct ns_fwd *f = NULL;
	char err[NS_ERR_LEN];
	uint64_t beats = 0;
	int rc;

#ifdef NS_TEST_CFWD
	struct ns_cfwd_opts co = { .n_ctx = S_CTX, .n_rollback = n_rollback };

	rc = cpu ? ns_fwd_new(m, w, &o, &f, err, sizeof(err)) :
		   ns_cfwd_new(m, w, &co, &f, err, sizeof(err));
#else
	(void)cpu;
	rc = ns_fwd_new(m, w, &o, &f, err, sizeof(err));
#endif
	NS_REQUIRE(rc == 0 && ns_fwd_mtp_open(f, s_beat, &beats, err, sizeof(err)) == 0,
		   "pass: %s", err);
	/* the caller's heartbeat through the block's read: a beat a slice, a slice a tensor at
	 * least (the block holds more than ten) */
	NS_REQUIRE(beats > 10, "%llu beats reading the MTP block", (unsigned long long)beats);
	return f;
}

static struct ns_fwd *s_pass(struct ns_model *m, struct ns_weights *w, uint32_t n_rollback)
{
	return s_pass_on(m, w, n_rollback, false);
}

#ifdef NS_TEST_CFWD
/* NS_TEST_CFWD: a cpu pass's block over the same tokens: its logits following the trunk
 * (cap) and its chained drafts (x, dl) are the CUDA pass's bits */
static void s_vs_cpu(struct ns_model *m, struct ns_weights *w, const int32_t *toks,
		     uint32_t n_tok, int32_t next, const float *cap, const int32_t *x,
		     const float *dl)
{
	struct ns_fwd *c = s_pass_on(m, w, 0, true);
	const uint32_t nv = ns_fwd_n_vocab(c);
	float *ccap = calloc((uint64_t)n_tok * nv, sizeof(float));
	float *cdl = calloc((uint64_t)S_K * nv, sizeof(float));
	int32_t cx[S_K];

	NS_REQUIRE(ccap && cdl, "out of memory");
	ns_fwd_mtp_capture(c, ccap);
	NS_REQUIRE(ns_fwd_eval(c, toks, n_tok, NULL, false) == 0, "cpu eval: %s",
		   ns_fwd_error(c));
	ns_fwd_mtp_capture(c, NULL);
	NS_REQUIRE(ns_fwd_mtp_draft(c, next, S_K, cx, cdl) == (int)S_K, "cpu draft: %s",
		   ns_fwd_error(c));
	S_CHECK(!memcmp(cap, ccap, (uint64_t)n_tok * nv * sizeof(float)),
		 "the block following the CUDA pass: max |diff| %.3g from the cpu pass's block",
		 s_maxdiff(cap, ccap, (uint64_t)n_tok * nv));
	S_CHECK(!memcmp(dl, cdl, (uint64_t)S_K * nv * sizeof(float)) &&
		 !memcmp(x, cx, sizeof(cx)), "chained drafts beside the CUDA pass: %d %d %d %d, "
		 "cpu %d %d %d %d (max |diff| %.3g)", x[0], x[1], x[2], x[3], cx[0], cx[1], cx[2],
		 cx[3], s_maxdiff(dl, cdl, (uint64_t)S_K * nv));
	printf("ok: the block beside the CUDA pass: its logits over %u positions and %u chained "
	       "drafts bit-identical to the cpu pass's block\n", n_tok, S_K);
	free(ccap);
	free(cdl);
	ns_fwd_destroy(&c);
}
#endif

/* 1: the block's logits against llama.cpp's */
static void s_oracle(const char *prefix, struct ns_model *m, struct ns_weights *w)
{
	char path[1024], json[4096];
	int64_t t64[64], d64[S_K];
	int32_t toks[64], drafts[S_K], next = -1;
	size_t n_tok = 0, n_dr = 0, got;
	struct ns_fwd *f = s_pass(m, w, 0);
	const uint32_t nv = ns_fwd_n_vocab(f);
	float *proc, *dref, *cap, *last, *dl;
	double d_proc, d_draft;
	const char *p;
	FILE *fp;

	snprintf(path, sizeof(path), "%s.json", prefix);
	fp = fopen(path, "r");
	NS_REQUIRE(fp, "%s: missing", path);
	got = fread(json, 1, sizeof(json) - 1, fp);
	fclose(fp);
	json[got] = 0;
	NS_REQUIRE(json_ints(json, "tokens", t64, 64, &n_tok) == 0 && n_tok > 1 &&
		   json_ints(json, "drafts", d64, S_K, &n_dr) == 0 && n_dr == S_K &&
		   (p = strstr(json, "\"next\":")) && sscanf(p + 7, "%d", &next) == 1,
		   "%s: malformed", path);
	for (size_t i = 0; i < n_tok; i++)
		toks[i] = (int32_t)t64[i];
	proc = s_read_f32(prefix, "proc.f32", (uint64_t)n_tok * nv);
	dref = s_read_f32(prefix, "draft.f32", (uint64_t)S_K * nv);
	cap = calloc((uint64_t)n_tok * nv, sizeof(float));
	last = calloc(nv, sizeof(float));
	dl = calloc((uint64_t)S_K * nv, sizeof(float));
	NS_REQUIRE(cap && last && dl, "out of memory");
	ns_fwd_mtp_capture(f, cap);
	NS_REQUIRE(ns_fwd_eval(f, toks, (uint32_t)n_tok, last, false) == 0, "eval: %s",
		   ns_fwd_error(f));
	ns_fwd_mtp_capture(f, NULL);
	d_proc = s_maxdiff(cap, proc, (uint64_t)n_tok * nv);
	if (getenv("NS_TEST_VERBOSE"))
		for (size_t i = 0; i < n_tok; i++)
			fprintf(stderr, "position %zu: max |diff| %.3g\n", i,
				s_maxdiff(cap + i * nv, proc + i * nv, nv));
	S_CHECK(d_proc <= S_TOL, "the block following the trunk: max |diff| %.3g against "
		 "llama.cpp's (bound %.0e)", d_proc, S_TOL);
	S_CHECK(s_argmax(last, nv) == next, "the trunk's next token %d, llama.cpp's %d",
		 s_argmax(last, nv), next);
	NS_REQUIRE(ns_fwd_mtp_draft(f, next, S_K, drafts, dl) == (int)S_K, "draft: %s",
		   ns_fwd_error(f));
	d_draft = s_maxdiff(dl, dref, (uint64_t)S_K * nv);
	S_CHECK(d_draft <= S_TOL, "chained drafts: max |diff| %.3g against llama.cpp's (bound "
		 "%.0e)", d_draft, S_TOL);
	for (uint32_t i = 0; i < S_K; i++)
		S_CHECK(drafts[i] == d64[i], "draft %u is %d, llama.cpp's %d", i, drafts[i],
			(int)d64[i]);
#ifdef NS_TEST_CFWD
	s_vs_cpu(m, w, toks, (uint32_t)n_tok, next, cap, drafts, dl);
#endif
	{ /* nsplan's count of what the block holds (the fixed set's --draft mtp) */
		struct ns_hparams hp;
		uint64_t want = 0;
		char err[NS_ERR_LEN];

		NS_REQUIRE(ns_hparams_load(m, &hp, err, sizeof(err)) == 0 &&
			   nsplan_mtp_bytes(m, &hp, S_CTX, &want, err, sizeof(err)) == 0, "%s", err);
		S_CHECK(ns_fwd_mtp_bytes(f) == want, "the block holds %llu bytes, nsplan counts "
			"%llu", (unsigned long long)ns_fwd_mtp_bytes(f), (unsigned long long)want);
		printf("ok: the block holds %llu bytes, as nsplan counts\n",
		       (unsigned long long)want);
	}
	printf("ok: the MTP block against llama.cpp: %zu positions max |diff| %.3g, %u chained "
	       "drafts max |diff| %.3g, drafts %d %d %d %d equal\n", n_tok, d_proc, S_K, d_draft,
	       drafts[0], drafts[1], drafts[2], drafts[3]);
	free(proc);
	free(dref);
	free(cap);
	free(last);
	free(dl);
	ns_fwd_destroy(&f);
}

/* 2: through speculative decoding's cuts, against a pass that never saw the rejected drafts */
static void s_follow(struct ns_model *m, struct ns_weights *w)
{
	struct ns_fwd *f = s_pass(m, w, 1 + S_K), *g = s_pass(m, w, 0);
	const uint32_t nv = ns_fwd_n_vocab(f);
	float *lf = calloc((uint64_t)(1 + S_K) * nv, sizeof(float));
	float *df = calloc((uint64_t)S_K * nv, sizeof(float));
	float *dg = calloc((uint64_t)S_K * nv, sizeof(float));
	int32_t chunk[1 + S_K], ids[S_CTX], xf[S_K], xg[S_K];
	uint32_t pos = 0, n_cut = 0;
	double worst = 0;

	NS_REQUIRE(lf && df && dg, "out of memory");
	/* a prompt, then the steps */
	for (uint32_t i = 0; i < 7; i++)
		ids[i] = s_tok(i);
	NS_REQUIRE(ns_fwd_eval(f, ids, 7, NULL, false) == 0, "prompt: %s", ns_fwd_error(f));
	pos = 7;
	for (uint32_t step = 0; step < S_STEPS; step++) {
		const uint32_t j = step % (S_K + 1);
		int nf, ng;

		nf = ns_fwd_mtp_draft(f, s_tok(pos), S_K, xf, df);
		ns_fwd_reset(g);
		for (uint32_t i = 0; i < pos; i++)
			ids[i] = s_tok(i);
		NS_REQUIRE(ns_fwd_eval(g, ids, pos, NULL, false) == 0, "scratch: %s",
			   ns_fwd_error(g));
		ng = ns_fwd_mtp_draft(g, s_tok(pos), S_K, xg, dg);
		NS_REQUIRE(nf == (int)S_K && ng == (int)S_K, "step %u: %d and %d drafts", step, nf,
			   ng);
		worst = fmax(worst, s_maxdiff(df, dg, (uint64_t)S_K * nv));
		S_CHECK(!memcmp(xf, xg, sizeof(xf)) && worst <= 1e-5, "step %u (position %u): "
			 "drafts %d %d %d %d after the cuts, %d %d %d %d from scratch (max |diff| "
			 "%.3g)", step, pos, xf[0], xf[1], xf[2], xf[3], xg[0], xg[1], xg[2], xg[3],
			 worst);
		chunk[0] = s_tok(pos);
		for (uint32_t i = 1; i <= S_K; i++)
			chunk[i] = i <= j ? s_tok(pos + i) : s_wrong(pos + i);
		NS_REQUIRE(ns_fwd_mark(f) == 0 && ns_fwd_eval(f, chunk, 1 + S_K, lf, true) == 0,
			   "chunk at %u: %s", pos, ns_fwd_error(f));
		NS_REQUIRE(ns_fwd_truncate(f, pos + 1 + j) == 0, "cut: %s", ns_fwd_error(f));
		n_cut += j < S_K;
		pos += 1 + j;
	}
	printf("ok: the MTP block follows %u cuts over %u positions: its drafts equal a fresh "
	       "pass's (max |diff| %.3g)\n", n_cut, pos, worst);
	free(lf);
	free(df);
	free(dg);
	ns_fwd_destroy(&f);
	ns_fwd_destroy(&g);
}

/* 3: a model without the block */
static void s_refused(const char *path, const char *preset)
{
	struct ns_synth_opts so = { .preset = preset, .seed = 7 };
	struct ns_fwd_opts o = { .n_ctx = 16 };
	struct ns_model *m = NULL;
	struct ns_weights *w = NULL;
	struct ns_fwd *f = NULL;
	char err[NS_ERR_LEN] = "";
	int rc;

	NS_REQUIRE(ns_synth_write(&so, path, err, sizeof(err)) == 0 &&
		   ns_model_open(path, &m, err, sizeof(err)) == 0 &&
		   ns_weights_fused_new(m, NULL, &w, err, sizeof(err)) == 0 &&
		   S_NEW(m, w, &o, &f, err) == 0, "no-MTP model: %s", err);
	rc = ns_fwd_mtp_open(f, NULL, NULL, err, sizeof(err));
	S_CHECK(rc == -ENOENT && strstr(err, "no MTP block") && !strchr(err, '\n'),
		 "a model without an MTP block: %d '%s'", rc, err);
	S_CHECK(ns_fwd_mtp_draft(f, 1, 2, (int32_t[2]){ 0 }, NULL) == -EINVAL,
		 "drafts with no block open");
	printf("ok: a model without an MTP block refused: %s\n", err);
	ns_fwd_destroy(&f);
	ns_weights_destroy(&w);
	ns_model_close(&m);
}

int main(int argc, char **argv)
{
	char path[] = "/tmp/ns-test-mtp-XXXXXX", err[NS_ERR_LEN];
	struct ns_synth_opts so = { .seed = 7, .mtp = true };
	struct ns_model *m = NULL;
	struct ns_weights *w = NULL;
	int fd;

	if (argc != 3)
		NS_FAIL("usage: test_mtp DATA_PREFIX PRESET");
	so.preset = argv[2];
	fd = mkstemp(path);
	NS_REQUIRE(fd >= 0, "mkstemp");
	close(fd);
	NS_REQUIRE(ns_synth_write(&so, path, err, sizeof(err)) == 0 &&
		   ns_model_open(path, &m, err, sizeof(err)) == 0 &&
		   ns_weights_fused_new(m, NULL, &w, err, sizeof(err)) == 0, "%s", err);
	s_oracle(argv[1], m, w);
	s_follow(m, w);
	ns_weights_destroy(&w);
	ns_model_close(&m);
	s_refused(path, argv[2]);
	unlink(path);
	return s_fails ? 1 : 0;
}
