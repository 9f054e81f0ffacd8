/* test_api: the C API (neurostream.h) as an embedding program uses it, on stories260K:
 * load under a 64 KiB budget, greedy generation through the per-token callback equals the
 * golden tokens and text, a callback that stops early leaves the engine usable (the next
 * generation is identical), logits match llama.cpp's, a budget below the smallest fails with
 * -ENOSPC naming it, and free leaves no shm segment or runtime dir behind. */
#include <math.h>

#include "neurostream.h"
#include "run_testlib.h"

#define MAX_TOK 64

struct s_acc {
	char text[4096];
	size_t len;
	int32_t ids[MAX_TOK * 4];
	size_t n;
	size_t stop_after; /* 0: never */
};

static int s_on_token(const char *piece, size_t len, int32_t id, void *user)
{
	struct s_acc *a = user;

	if (len < sizeof(a->text) - a->len) {
		memcpy(a->text + a->len, piece, len);
		a->len += len;
		a->text[a->len] = 0;
	}
	if (id >= 0 && a->n < MAX_TOK * 4)
		a->ids[a->n++] = id;
	return a->stop_after && a->n >= a->stop_after;
}

/* The sampler chain on its own (neurostream.h): sampling from ns_engine_logits of the
 * growing sequence, with the prompt and each chosen token accepted, chooses exactly the tokens
 * ns_engine_generate chose with the same settings and seed (penalties on, so the history
 * counts too); a bad setting is refused. */
static void s_sampler_chain(struct ns_engine *e, const char *prompt)
{
	struct ns_gen_params g;
	struct ns_sampler_chain *ch = NULL;
	struct s_acc want = { 0 };
	int32_t *ids = NULL, seq[MAX_TOK * 4];
	size_t n = 0;
	float *lg;

	ns_gen_params_default(&g);
	g.n_predict = 16;
	g.seed = 42;
	g.repeat_penalty = 1.3f;
	g.repeat_last_n = 8;
	g.no_stop = true;
	RT_CHECK(ns_engine_generate(e, prompt, &g, s_on_token, &want) == 0 && want.n == 16,
		 "sampled generate: %s", ns_engine_error(e));
	RT_CHECK(ns_engine_tokenize(e, prompt, true, &ids, &n) == 0 && n + 16 < MAX_TOK * 4,
		 "tokenize");
	memcpy(seq, ids, n * sizeof(*ids));
	RT_CHECK(ns_sampler_chain_new(&g, ns_engine_n_vocab(e), &ch) == 0, "chain");
	for (size_t i = 0; i < n; i++)
		ns_sampler_chain_accept(ch, seq[i]);
	lg = malloc((n + 16) * ns_engine_n_vocab(e) * sizeof(float));
	RT_CHECK(lg, "out of memory");
	for (size_t k = 0; k < 16; k++) {
		int32_t id;

		RT_CHECK(ns_engine_logits(e, seq, (uint32_t)(n + k), lg) == 0, "logits: %s",
			 ns_engine_error(e));
		id = ns_sampler_chain_sample(ch, lg + (n + k - 1) * ns_engine_n_vocab(e));
		RT_CHECK(id == want.ids[k], "chain token %zu: %d, generate chose %d", k, id,
			 want.ids[k]);
		ns_sampler_chain_accept(ch, id);
		seq[n + k] = id;
	}
	ns_sampler_chain_free(&ch);
	RT_CHECK(!ch, "free did not null");
	ns_sampler_chain_free(&ch);
	g.repeat_last_n = -1;
	RT_CHECK(ns_sampler_chain_new(&g, 512, &ch) == -EINVAL && !ch, "negative history taken");
	printf("sampler chain: 16 sampled tokens (seed 42, penalties over 8) = generate's\n");
	free(lg);
	free(ids);
}

/* Incremental evaluation: the context grown in pieces (a chunk with every row's logits, then
 * token by token with the last row's), cut back and grown again, gives the logits of the
 * whole sequence evaluated at once, bit for bit. */
static void s_incremental(struct ns_engine *e, const int32_t *ids, uint32_t n)
{
	const uint32_t nv = ns_engine_n_vocab(e);
	float *ref = malloc((size_t)n * nv * sizeof(float)), *got = malloc((size_t)n * nv * 4);
	int32_t other[MAX_TOK];

	RT_CHECK(ref && got && n > 6 && n < MAX_TOK, "setup");
	RT_CHECK(ns_engine_logits(e, ids, n, ref) == 0, "logits: %s", ns_engine_error(e));
	RT_CHECK(ns_engine_n_past(e) == 0, "logits leaves a context of %u", ns_engine_n_past(e));
	RT_CHECK(ns_engine_eval(e, ids, 4, got, true) == 0, "eval: %s", ns_engine_error(e));
	for (uint32_t i = 4; i < n; i++)
		RT_CHECK(ns_engine_eval(e, ids + i, 1, got + (size_t)i * nv, false) == 0,
			 "eval %u: %s", i, ns_engine_error(e));
	RT_CHECK(!memcmp(got, ref, (size_t)n * nv * sizeof(float)) && ns_engine_n_past(e) == n,
		 "4 then 1 by 1: logits differ from one call, or n_past %u", ns_engine_n_past(e));
	/* back to 6, the same tail again in one call: the same rows */
	RT_CHECK(ns_engine_rollback(e, 6) == 0 && ns_engine_n_past(e) == 6, "rollback 6");
	RT_CHECK(ns_engine_eval(e, ids + 6, n - 6, got + 6 * nv, true) == 0 &&
		 !memcmp(got, ref, (size_t)n * nv * sizeof(float)), "after rollback to 6: differ");
	/* back to 3, another tail: the logits of that sequence from scratch */
	memcpy(other, ids, 3 * sizeof(*ids));
	for (uint32_t i = 3; i < n; i++)
		other[i] = ids[n - 1 - (i - 3)];
	RT_CHECK(ns_engine_logits(e, other, n, ref) == 0, "logits of the other sequence");
	RT_CHECK(ns_engine_eval(e, ids, 3, NULL, false) == 0 && ns_engine_eval(e, ids + 3, 2,
		 NULL, false) == 0 && ns_engine_rollback(e, 3) == 0 &&
		 ns_engine_eval(e, other + 3, n - 3, got + 3 * nv, true) == 0 &&
		 !memcmp(got + 3 * nv, ref + 3 * nv, (size_t)(n - 3) * nv * sizeof(float)),
		 "3, 2 more, back to 3, another tail: differs from that sequence at once");
	RT_CHECK(ns_engine_rollback(e, n + 1) == -EINVAL && ns_engine_n_past(e) == n,
		 "a rollback past the end taken");
	ns_engine_reset(e);
	RT_CHECK(ns_engine_n_past(e) == 0, "reset leaves %u", ns_engine_n_past(e));
	printf("incremental: %u tokens in pieces, rolled back to 6 and to 3: logits bit-identical "
	       "to one call\n", n);
	free(ref);
	free(got);
}

int main(void)
{
	char path[PATH_MAX], model[PATH_MAX], err[512], id[32];
	int64_t gold_ids[MAX_TOK], toks[MAX_TOK];
	size_t n_gold = 0, n_toks = 0, len;
	struct ns_engine_opts o;
	struct ns_gen_params g;
	struct ns_engine_stats st;
	struct ns_engine *e = NULL;
	struct s_acc a = { 0 }, b = { 0 }, c = { 0 };
	char *json, *prompt, *want;
	float *lg, *gold;
	int32_t ids32[MAX_TOK];
	double d = 0;
	int rc;

	ns_test_require_oracle();
	json = ns_test_read_file(ns_test_oracle_path(path, sizeof(path),
						     "golden/stories260K__once.json"), &len);
	RT_CHECK(json, "%s missing", path);
	prompt = rt_json_str(json, "prompt_text");
	want = rt_json_str(json, "greedy_text");
	RT_CHECK(prompt && want && !json_ints(json, "greedy_tokens", gold_ids, MAX_TOK, &n_gold) &&
		 !json_ints(json, "tokens", toks, MAX_TOK, &n_toks), "sidecar fields");
	free(json);
	ns_test_oracle_path(model, sizeof(model), "models/stories260K.gguf");

	/* a budget below the smallest */
	ns_engine_opts_default(&o);
	o.mem_budget = 4096;
	o.no_plan = true;
	rc = ns_engine_load(model, &o, &e, err, sizeof(err));
	RT_CHECK(rc == -ENOSPC && !e, "4 KiB budget: rc %d, want -ENOSPC (%s)", rc, err);
	printf("4 KiB budget refused: %s\n", err);

	ns_engine_opts_default(&o);
	o.mem_budget = 64 << 10;
	o.threads = 1;
	rc = ns_engine_load(model, &o, &e, err, sizeof(err));
	RT_CHECK(rc == 0 && e, "load: %s", err);
	snprintf(id, sizeof(id), "%s", ns_engine_session(e));
	RT_CHECK(ns_engine_pid(e, NS_PROC_NSIO) > 0 && ns_engine_pid(e, NS_PROC_NSCOMPUTE) > 0,
		 "child pids");

	ns_gen_params_default(&g);
	g.temperature = 0;
	g.n_predict = (int32_t)n_gold;
	rc = ns_engine_generate(e, prompt, &g, s_on_token, &a);
	RT_CHECK(rc == 0, "generate: %s", ns_engine_error(e));
	RT_CHECK(a.n == n_gold, "%zu tokens, want %zu", a.n, n_gold);
	for (size_t i = 0; i < n_gold; i++)
		RT_CHECK(a.ids[i] == gold_ids[i], "token %zu: %d, want %lld", i, a.ids[i],
			 (long long)gold_ids[i]);
	RT_CHECK(!strcmp(a.text, want), "text '%s', want '%s'", a.text, want);
	ns_engine_stats(e, &st);
	RT_CHECK(st.n_gen == n_gold && st.n_decode == n_gold - 1 && st.req_decode > 0 &&
		 st.arena_peak <= st.arena_bytes && st.arena_bytes == 64 << 10,
		 "stats: gen %u decode %u req %llu peak %llu of %llu", st.n_gen, st.n_decode,
		 (unsigned long long)st.req_decode, (unsigned long long)st.arena_peak,
		 (unsigned long long)st.arena_bytes);
	printf("greedy %zu tokens = golden; %.6f GB/token, peak %llu of %llu\n", a.n,
	       st.gb_per_token, (unsigned long long)st.arena_peak,
	       (unsigned long long)st.arena_bytes);

	/* stop from the callback, then the same generation again */
	b.stop_after = 5;
	rc = ns_engine_generate(e, prompt, &g, s_on_token, &b);
	RT_CHECK(rc == 0 && b.n == 5, "stopped generation: rc %d, %zu tokens", rc, b.n);
	ns_engine_stats(e, &st);
	RT_CHECK(st.n_gen >= 5 && st.n_gen <= n_gold, "stopped: n_gen %u", st.n_gen);
	rc = ns_engine_generate(e, prompt, &g, s_on_token, &c);
	RT_CHECK(rc == 0 && c.n == n_gold && !strcmp(c.text, want),
		 "after a stop: rc %d, %zu tokens, '%s'", rc, c.n, c.text);
	printf("a callback stop after 5 tokens leaves the engine clean\n");

	/* logits of the prompt tokens */
	for (size_t i = 0; i < n_toks; i++)
		ids32[i] = (int32_t)toks[i];
	lg = malloc(n_toks * 512 * sizeof(float));
	RT_CHECK(lg && ns_engine_n_vocab(e) == 512, "vocab");
	rc = ns_engine_logits(e, ids32, (uint32_t)n_toks, lg);
	RT_CHECK(rc == 0, "logits: %s", ns_engine_error(e));
	gold = ns_test_read_file(ns_test_oracle_path(path, sizeof(path),
						     "golden/stories260K__once.f32"), &len);
	RT_CHECK(gold && len == n_toks * 512 * sizeof(float), "golden logits");
	for (size_t i = 0; i < n_toks * 512; i++)
		d = fmax(d, isnan(lg[i]) ? INFINITY : fabs((double)lg[i] - gold[i]));
	RT_CHECK(d <= 1e-3, "logits max abs diff %.3g > 1e-3", d);
	printf("logits max abs diff vs llama.cpp %.3g\n", d);

	/* teacher forcing: the first token as prompt, the rest decoded one by one; every
	 * decode step's logits are llama.cpp's for that position */
	{
		struct s_acc f = { 0 };
		uint64_t req_greedy;

		ns_engine_generate(e, prompt, &g, NULL, NULL);
		ns_engine_stats(e, &st);
		req_greedy = st.req_decode / st.n_decode;
		memset(lg, 0, n_toks * 512 * sizeof(float));
		rc = ns_engine_decode_forced(e, ids32, 1, ids32 + 1, (uint32_t)n_toks - 1, lg,
					     s_on_token, &f);
		RT_CHECK(rc == 0, "decode_forced: %s", ns_engine_error(e));
		RT_CHECK(f.n == n_toks - 1, "forced: %zu tokens reported, want %zu", f.n,
			 n_toks - 1);
		for (size_t i = 0; i + 1 < n_toks; i++)
			RT_CHECK(f.ids[i] == ids32[i + 1], "forced token %zu: %d, want %d", i,
				 f.ids[i], ids32[i + 1]);
		d = 0;
		for (size_t i = 0; i < n_toks * 512; i++)
			d = fmax(d, isnan(lg[i]) ? INFINITY : fabs((double)lg[i] - gold[i]));
		RT_CHECK(d <= 1e-3, "forced logits max abs diff %.3g > 1e-3", d);
		ns_engine_stats(e, &st);
		RT_CHECK(st.n_prompt == 1 && st.n_decode == n_toks - 1 && st.decode_s > 0 &&
			 st.req_decode == req_greedy * (n_toks - 1),
			 "forced stats: prompt %u decode %u req %llu (greedy %llu per token)",
			 st.n_prompt, st.n_decode, (unsigned long long)st.req_decode,
			 (unsigned long long)req_greedy);
		printf("teacher-forced %zu steps: logits max abs diff vs llama.cpp %.3g, %llu "
		       "bytes requested per step as in generation\n", n_toks - 1, d,
		       (unsigned long long)req_greedy);
		RT_CHECK(ns_engine_decode_forced(e, ids32, 0, ids32, 1, NULL, NULL, NULL) ==
			 -EINVAL, "empty forced prompt accepted");
	}
	ids32[0] = 512;
	RT_CHECK(ns_engine_logits(e, ids32, 1, lg) == -EINVAL, "token 512 accepted");
	s_sampler_chain(e, prompt);
	for (size_t i = 0; i < n_toks; i++)
		ids32[i] = (int32_t)toks[i];
	s_incremental(e, ids32, (uint32_t)n_toks);

	ns_engine_free(&e); /* a child ending badly says "at shutdown" on stderr (log) */
	RT_CHECK(!e, "free did not null");
	RT_CHECK(rt_shm_count(id) == 0 && rt_rundir_count(id) == 0, "session %s left behind", id);
	printf("free: nothing of session %s left\n", id);
	free(lg);
	free(gold);
	free(prompt);
	free(want);
	return 0;
}
