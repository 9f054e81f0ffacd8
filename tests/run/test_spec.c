/* test_spec: speculative decoding (issue 26) through the C API on one oracle model, resident
 * and streamed (--mem-budget 256KB --block-rows 4 or 16): greedy output with a drafter is the
 * output without one, token for token, for the ngram drafter (adaptive and fixed lengths) and
 * the test-only oracle drafter fed the greedy tokens perturbed at rate 0.3 (so drafts are
 * both accepted and rejected), the model as its own draft model (NS_GEN_DRAFT_MODEL: nearly
 * every draft kept), with a repetition penalty (the sampler's history across
 * rejections), until the context is full, and stopped by the callback; afterwards the KV cache
 * holds exactly the positions the one-token loop leaves. With a fixed draft
 * length the oracle drafter's drafted / accepted / pass counts are exactly those a
 * simulation of the rule predicts (the longest agreeing prefix plus the target's token).
 *
 * usage: test_spec MODEL_IN_ORACLE NGRAM_ACCEPTS BLOCK_ROWS [nodm] [cuda=EXE] (nodm: no draft
 * model, for the recurrent qwen35 targets, whose state is rolled back: ns_fwd_mark; 1: the
 * ngram drafter must get a draft accepted on this model's repetitive prompt; 0: only
 * identical output; the streamed configuration's rows per block; cuda=EXE: the cuda
 * backend's process EXE ($NS_NSCOMPUTE_CUDA), the draft model on the cpu beside it) */
#include "neurostream.h"
#include "run_testlib.h"

#define S_N 96
#define S_CTX 192

/* "cuda": the cuda backend's process (argv cuda=EXE), the weights all in VRAM in the
 * first configuration and all streamed through the device in the second; NULL: cpu */
static const char *s_backend;

struct s_out {
	int32_t ids[S_CTX];
	size_t n;
	size_t stop_after; /* 0: never */
};

static int s_tok(const char *piece, size_t len, int32_t id, void *user)
{
	struct s_out *o = user;

	(void)piece;
	(void)len;
	if (id >= 0 && o->n < S_CTX)
		o->ids[o->n++] = id;
	return o->stop_after && o->n >= o->stop_after;
}

/* splitmix64 */
static uint64_t s_rng(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static const char *s_prompt = "the cat sat on the mat and the cat sat on the mat and the cat "
			      "sat on the mat and the cat sat on the";

static void s_gen(struct ns_engine *e, const struct ns_gen_params *g, struct s_out *o,
		  struct ns_engine_stats *st, const char *what)
{
	size_t keep = o->stop_after;

	memset(o, 0, sizeof(*o));
	o->stop_after = keep;
	RT_CHECK(ns_engine_generate(e, s_prompt, g, s_tok, o) == 0, "%s: %s", what,
		 ns_engine_error(e));
	ns_engine_stats(e, st);
}

static void s_same(const struct s_out *a, const struct s_out *b, const char *what)
{
	RT_CHECK(a->n == b->n, "%s: %zu tokens, without a drafter %zu", what, b->n, a->n);
	for (size_t i = 0; i < a->n; i++)
		RT_CHECK(a->ids[i] == b->ids[i], "%s: token %zu is %d, without a drafter %d", what,
			 i, b->ids[i], a->ids[i]);
}

/* The counts of a fixed draft length k with oracle drafts over greedy tokens base (n). */
static void s_simulate(const int32_t *base, const int32_t *oracle, size_t n, uint32_t k,
		       uint32_t *drafted, uint32_t *accepted, uint32_t *passes)
{
	*drafted = *accepted = *passes = 0;
	for (size_t g = 0; g + 1 < n;) { /* g: the pending token, emitted */
		size_t props = n - 1 - g < k ? n - 1 - g : k, a = 0;

		while (a < props && oracle[g + 1 + a] == base[g + 1 + a])
			a++;
		*drafted += (uint32_t)props;
		*accepted += (uint32_t)a;
		*passes += props > 0;
		g += a + 1;
	}
}

/* After a drafted generation the KV cache holds what the one-token loop leaves: the prompt and
 * every generated token but the last. A step (slot 0, the generation's context) may keep
 * exactly that many positions and not one more (-EINVAL: past what the slot holds). */
static void s_cache_check(struct ns_engine *e, size_t n_gen, const char *what)
{
	int32_t *ids = NULL, tok = 1;
	size_t n_prompt = 0;
	struct ns_engine_seq q = { .slot = 0, .tokens = &tok, .n = 1 };

	RT_CHECK(ns_engine_tokenize(e, s_prompt, true, &ids, &n_prompt) == 0, "tokenize");
	free(ids);
	q.keep = (uint32_t)(n_prompt + n_gen);
	RT_CHECK(ns_engine_step(e, &q, 1) == -EINVAL, "%s: the KV cache holds more than the "
		 "prompt and all but the last generated token", what);
	q.keep = (uint32_t)(n_prompt + n_gen - 1);
	RT_CHECK(ns_engine_step(e, &q, 1) == 0, "%s: the KV cache holds less than the prompt "
		 "and all but the last generated token: %s", what, ns_engine_error(e));
}

static void s_config(const char *model, uint64_t budget, uint64_t rows, bool ngram_accepts, bool dm)
{
	struct ns_engine_opts o;
	struct ns_engine *e = NULL;
	struct ns_gen_params g, d;
	struct ns_engine_stats st;
	static struct s_out base, out, pen_base;
	int32_t oracle[S_CTX];
	uint64_t rng = 0x9e3779b97f4a7c15ull;
	uint32_t nv, sd, sa, sp;
	char err[512], what[128];

	ns_engine_opts_default(&o);
	o.n_ctx = S_CTX;
	o.mem_budget = budget;
	o.block_rows = rows;
	o.draft_model = dm ? model : NULL; /* NS_GEN_DRAFT_MODEL: the model drafting for itself */
	o.backend = s_backend;
	if (s_backend && !budget) /* the whole model and the GPU's fixed set in VRAM */
		o.vram_budget = 256ull << 20;
	RT_CHECK(ns_engine_load(model, &o, &e, err, sizeof(err)) == 0, "load: %s", err);
	nv = ns_engine_n_vocab(e);
	ns_gen_params_default(&g);
	g.temperature = 0;
	g.n_predict = S_N;
	g.no_stop = true;
	s_gen(e, &g, &base, &st, "greedy");
	RT_CHECK(base.n == S_N && !st.draft, "greedy: %zu tokens", base.n);

	/* ngram: adaptive, then fixed lengths */
	d = g;
	d.draft = NS_GEN_DRAFT_NGRAM;
	for (uint32_t k = 0; k <= 8; k += 8) {
		d.draft_min = d.draft_max = k; /* 0: the defaults (adaptive in 1..16) */
		snprintf(what, sizeof(what), "%s budget %llu rows %llu ngram k %u", model,
			 (unsigned long long)budget, (unsigned long long)rows, k);
		s_gen(e, &d, &out, &st, what);
		s_same(&base, &out, what);
		RT_CHECK(st.draft && st.accepted <= st.drafted, "%s: stats", what);
		RT_CHECK(!ngram_accepts || st.accepted > 0, "%s: nothing accepted (%u drafted)",
			 what, st.drafted);
		printf("ok %s: %u drafted, %u accepted, %.3f passes/token\n", what, st.drafted,
		       st.accepted, st.passes_per_token);
	}

	if (dm) {
		/* the model as its own draft model (resident in nscompute): its greedy drafts are the
		 * target's, so nearly all are kept (chunked and one-token passes may round apart on
		 * a near tie) */
		d = g;
		d.draft = NS_GEN_DRAFT_MODEL;
		snprintf(what, sizeof(what), "%s budget %llu rows %llu draft model", model,
			 (unsigned long long)budget, (unsigned long long)rows);
		s_gen(e, &d, &out, &st, what);
		s_same(&base, &out, what);
		RT_CHECK(st.draft && st.drafted > 0 && st.accepted * 10 >= st.drafted * 9,
			 "%s: %u of %u drafts accepted", what, st.accepted, st.drafted);
		s_cache_check(e, out.n, what);
	}
	printf("ok %s: %u drafted, %u accepted, %.3f passes/token\n", what, st.drafted,
	       st.accepted, st.passes_per_token);

	/* oracle: the greedy tokens, each replaced by another at rate 0.3 */
	for (size_t i = 0; i < base.n; i++) {
		oracle[i] = base.ids[i];
		if (s_rng(&rng) % 10 < 3)
			oracle[i] = (int32_t)((base.ids[i] + 1 + s_rng(&rng) % (nv - 1)) %
					      nv);
	}
	d.draft = NS_GEN_DRAFT_ORACLE;
	d.draft_oracle = oracle;
	d.n_draft_oracle = (uint32_t)base.n;
	for (uint32_t k = 1; k <= 16; k = k * 4) {
		d.draft_min = d.draft_max = k;
		snprintf(what, sizeof(what), "%s budget %llu rows %llu oracle k %u", model,
			 (unsigned long long)budget, (unsigned long long)rows, k);
		s_gen(e, &d, &out, &st, what);
		s_same(&base, &out, what);
		s_simulate(base.ids, oracle, base.n, k, &sd, &sa, &sp);
		RT_CHECK(st.drafted == sd && st.accepted == sa && st.draft_passes == sp &&
			 st.n_decode == base.n - 1 - sa, "%s: drafted %u accepted %u passes %u of "
			 "%u, the rule gives %u %u %u of %zu", what, st.drafted, st.accepted,
			 st.draft_passes, st.n_decode, sd, sa, sp, base.n - 1 - sa);
		RT_CHECK(sa > 0 && sa < sd, "%s: the oracle drafts must be both kept and not", what);
		s_cache_check(e, out.n, what);
		printf("ok %s: %u drafted, %u accepted, %u passes (as the rule predicts)\n", what,
		       sd, sa, st.n_decode);
	}
	d.n_predict = 0; /* the prompt only: nothing to draft */
	s_gen(e, &d, &out, &st, "oracle with -n 0");
	RT_CHECK(out.n == 0 && !st.draft, "-n 0 with a drafter: %zu tokens", out.n);
	d.n_predict = S_N;
	d.draft_min = d.draft_max = 0; /* adaptive */
	s_gen(e, &d, &out, &st, "oracle adaptive");
	s_same(&base, &out, "oracle adaptive");
	RT_CHECK(st.accepted > 0, "oracle adaptive: nothing accepted");

	/* a repetition penalty: the sampler's history must hold exactly the emitted tokens */
	g.repeat_penalty = 1.5f;
	s_gen(e, &g, &pen_base, &st, "greedy with a penalty");
	d = g;
	d.draft = NS_GEN_DRAFT_ORACLE;
	for (size_t i = 0; i < pen_base.n; i++)
		oracle[i] = i % 3 ? pen_base.ids[i] : base.ids[i];
	d.draft_oracle = oracle;
	d.n_draft_oracle = (uint32_t)pen_base.n;
	d.draft_min = d.draft_max = 4;
	s_gen(e, &d, &out, &st, "oracle with a penalty");
	s_same(&pen_base, &out, "oracle with a penalty");
	RT_CHECK(st.accepted > 0, "oracle with a penalty: nothing accepted");
	if (dm) {
		/* the draft model knows no penalty: drafts rejected, its cache cut back */
		d.draft = NS_GEN_DRAFT_MODEL;
		d.draft_min = d.draft_max = 0;
		s_gen(e, &d, &out, &st, "draft model with a penalty");
		s_same(&pen_base, &out, "draft model with a penalty");
		s_cache_check(e, out.n, "draft model with a penalty");
		printf("ok draft model with a penalty: %u drafted, %u accepted\n", st.drafted,
		       st.accepted);
	}
	g.repeat_penalty = 1.0f;

	/* until the context is full; then a callback that stops at 10 tokens */
	g.n_predict = -1;
	s_gen(e, &g, &base, &st, "greedy to the full context");
	RT_CHECK(st.stop_reason == 3, "greedy to the full context: stop reason %u",
		 st.stop_reason);
	d = g;
	d.draft = NS_GEN_DRAFT_NGRAM;
	d.draft_min = d.draft_max = 8;
	s_gen(e, &d, &out, &st, "ngram to the full context");
	s_same(&base, &out, "ngram to the full context");
	RT_CHECK(st.stop_reason == 3, "ngram to the full context: stop reason %u",
		 st.stop_reason);
	if (dm) {
		d.draft = NS_GEN_DRAFT_MODEL;
		s_gen(e, &d, &out, &st, "draft model to the full context");
		s_same(&base, &out, "draft model to the full context");
		RT_CHECK(st.stop_reason == 3, "draft model to the full context: stop reason %u",
			 st.stop_reason);
	}
	d.draft = NS_GEN_DRAFT_NGRAM;
	out.stop_after = 10;
	s_gen(e, &d, &out, &st, "ngram stopped by the callback");
	out.stop_after = 0;
	base.n = 10;
	s_same(&base, &out, "ngram stopped by the callback");
	g.n_predict = S_N;
	s_gen(e, &g, &out, &st, "greedy after the stop");
	RT_CHECK(out.n == S_N && !memcmp(out.ids, base.ids, 10 * sizeof(int32_t)),
		 "greedy after a drafted generation was stopped differs");
	ns_engine_free(&e);
}

int main(int argc, char **argv)
{
	char model[PATH_MAX];
	bool dm = true;

	RT_CHECK(argc >= 4, "usage: test_spec MODEL_IN_ORACLE NGRAM_ACCEPTS BLOCK_ROWS [nodm] "
		 "[cuda=NSCOMPUTE]");
	for (int i = 4; i < argc; i++) {
		/* a model with a recurrent state cannot be a draft model (nsctl/draft_model.c) */
		if (!strcmp(argv[i], "nodm"))
			dm = false;
		else if (!strncmp(argv[i], "cuda=", 5)) { /* the emulation's process in CI */
			RT_CHECK(setenv("NS_NSCOMPUTE_CUDA", argv[i] + 5, 1) == 0, "setenv");
			s_backend = "cuda";
		} else {
			RT_CHECK(0, "unknown option %s", argv[i]);
		}
	}
	ns_test_require_oracle();
	ns_test_oracle_path(model, sizeof(model), argv[1]);
	RT_CHECK(access(model, R_OK) == 0, "%s missing from the oracle", model);
	s_config(model, 0, 0, argv[2][0] == '1', dm);
	s_config(model, 256u << 10, strtoull(argv[3], NULL, 10), argv[2][0] == '1', dm);
	printf("ok: greedy output identical with and without drafters\n");
	return 0;
}
