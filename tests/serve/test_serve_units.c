/* test_serve_units: the parts of nsctl serve's text and sampling path on their own, against
 * expectations written from their definitions:
 *   - stop strings (srv_stop.h): the text before the first stop string whatever the piece
 *     boundaries, a held tail that turns out not to be one handed on, the earliest of several;
 *   - <think> splitting (srv_think.h) over every way of cutting a reply into pieces;
 *   - a reply's text from token ids (srv_text.h): harmony channels of the tiny gpt-oss
 *     vocabulary's structure tokens, <think> tokens typed CONTROL in the tiny qwen3 vocabulary;
 *   - logprobs (srv_logprob.h) against a log-softmax in long double and a full sort;
 *   - request parsing (srv_oai.h): the fields, the refusals, the prompt from the template.
 * Exit 0 pass, 1 fail, 77 oracle missing (fail when CI=true). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat.h"
#include "ctl_msg.h"
#include "gguf.h"
#include "model.h"
#include "ns_test.h"
#include "srv_logprob.h"
#include "srv_oai.h"
#include "srv_stop.h"
#include "srv_text.h"
#include "srv_think.h"
#include "tokenizer.h"

#define CHECK(c, ...) NS_REQUIRE(c, __VA_ARGS__)

/* ------------------------------------------------------------ stop strings ----------- */

/* Feed text cut at the given offsets (ascending, ending with len); returns what came out and
 * whether a stop was reported. */
static char *s_stop_run(const char *const *stops, size_t n, const char *text, const size_t *cuts,
			size_t n_cuts, bool *hit)
{
	struct srv_stop st;
	struct ns_text out = { 0 };
	size_t at = 0;

	CHECK(srv_stop_init(&st, stops, n) == 0, "init");
	*hit = false;
	for (size_t i = 0; i < n_cuts && !*hit; i++) {
		int rc = srv_stop_feed(&st, text + at, cuts[i] - at, &out);

		CHECK(rc >= 0, "feed");
		*hit = rc == 1;
		at = cuts[i];
	}
	if (!*hit)
		CHECK(srv_stop_flush(&st, &out) == 0, "flush");
	srv_stop_free(&st);
	return out.buf ? out.buf : strdup("");
}

static void s_test_stop(void)
{
	const char *text = "Hello wor, world! The end.";
	const char *one[] = { "world" }, *two[] = { "end", "o w" }, *none[] = { "zzz" };
	const size_t len = strlen(text);
	bool hit;

	/* every way of cutting the text in two and three pieces */
	for (size_t a = 0; a <= len; a++)
		for (size_t b = a; b <= len; b++) {
			size_t cuts[3] = { a, b, len };
			char *o = s_stop_run(one, 1, text, cuts, 3, &hit);

			CHECK(hit && !strcmp(o, "Hello wor, "), "cut %zu/%zu: '%s'", a, b, o);
			free(o);
			o = s_stop_run(two, 2, text, cuts, 3, &hit);
			CHECK(hit && !strcmp(o, "Hell"), "two stops, cut %zu/%zu: '%s'", a, b, o);
			free(o);
			o = s_stop_run(none, 1, text, cuts, 3, &hit);
			CHECK(!hit && !strcmp(o, text), "no stop, cut %zu/%zu: '%s'", a, b, o);
			free(o);
		}
	/* a held tail ("wor" could start "world") is handed on once it is not */
	{
		struct srv_stop st;
		struct ns_text out = { 0 };

		CHECK(srv_stop_init(&st, one, 1) == 0, "init");
		CHECK(srv_stop_feed(&st, "a wor", 5, &out) == 0 && out.len == 2, "held: %zu",
		      out.len);
		CHECK(srv_stop_feed(&st, "k", 1, &out) == 0 && !strcmp(out.buf, "a work"),
		      "released: %s", out.buf);
		srv_stop_free(&st);
		free(out.buf);
	}
	printf("stop strings: cut before the earliest, at every piece boundary\n");
}

/* ------------------------------------------------------------ think ------------------ */

static void s_think_run(const char *text, const size_t *cuts, size_t n_cuts, char **r, char **a)
{
	struct srv_think t = { 0 };
	struct ns_text rs = { 0 }, as = { 0 };
	size_t at = 0;

	for (size_t i = 0; i < n_cuts; i++) {
		CHECK(srv_think_feed(&t, text + at, cuts[i] - at, &rs, &as) == 0, "feed");
		at = cuts[i];
	}
	CHECK(srv_think_finish(&t, &rs, &as) == 0, "finish");
	srv_think_free(&t);
	*r = rs.buf ? rs.buf : strdup("");
	*a = as.buf ? as.buf : strdup("");
}

static void s_test_think(void)
{
	static const struct {
		const char *text, *reasoning, *answer;
	} cases[] = {
		{ "<think>\nLet me see.\n</think>\n\nParis.", "Let me see.", "Paris." },
		{ "  <think>a b\n\nc</think>x y ", "a b\n\nc", "x y " },
		{ "Paris, no thinking.", "", "Paris, no thinking." },
		{ "<think>\n\n</think>\n\nDirect.", "", "Direct." },
		{ "<think>cut off inside  \n", "cut off inside", "" },
		{ "<thinking>is not the marker", "", "<thinking>is not the marker" },
		{ "<think>a</think>b<think>c</think>", "a", "b<think>c</think>" },
	};

	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		const char *text = cases[c].text;
		const size_t len = strlen(text);

		for (size_t a = 0; a <= len; a++)
			for (size_t b = a; b <= len; b++) {
				size_t cuts[3] = { a, b, len };
				char *r, *an;

				s_think_run(text, cuts, 3, &r, &an);
				CHECK(!strcmp(r, cases[c].reasoning) && !strcmp(an, cases[c].answer),
				      "case %zu cut %zu/%zu: reasoning '%s' answer '%s'", c, a, b, r,
				      an);
				free(r);
				free(an);
			}
	}
	printf("<think> split: reasoning and answer at every piece boundary, %zu cases\n",
	       sizeof(cases) / sizeof(cases[0]));
}

/* ------------------------------------------------------------ a reply's text --------- */

static struct ns_tok *s_tok(const char *rel, struct ns_model **m)
{
	char path[4096], err[256];
	struct ns_tok *t;

	ns_test_oracle_path(path, sizeof(path), rel);
	CHECK(ns_model_open(path, m, err, sizeof(err)) == 0, "%s: %s", path, err);
	t = ns_tok_new(ns_model_meta(*m), err, sizeof(err));
	CHECK(t, "tokenizer: %s", err);
	return t;
}

/* Token ids of text with special tokens parsed (the model would generate these). drain: as
 * the scheduler does, each call's outputs start empty and are moved to r / a after it. */
static void s_text_of(const struct ns_tok *tok, enum srv_split split, const char *gen,
		      const char *const *stop, size_t n_stop, struct ns_text *r, struct ns_text *a,
		      int *stopped, bool drain)
{
	struct ns_text dr = { 0 }, da = { 0 };
	struct srv_text t;
	int32_t *ids;
	size_t n;

	CHECK(ns_tok_encode(tok, gen, strlen(gen), false, true, &ids, &n) == 0, "encode");
	CHECK(srv_text_init(&t, tok, split, stop, n_stop) == 0, "init");
	*stopped = 0;
	for (size_t i = 0; i < n && !*stopped; i++) {
		int rc = srv_text_token(&t, ids[i], drain ? &dr : r, drain ? &da : a);

		CHECK(rc >= 0, "token");
		*stopped = rc;
		if (drain) {
			CHECK((!dr.len || ns_text_append(r, dr.buf, dr.len) == 0) &&
			      (!da.len || ns_text_append(a, da.buf, da.len) == 0), "append");
			dr.len = da.len = 0;
		}
	}
	if (!*stopped)
		CHECK(srv_text_finish(&t, drain ? &dr : r, drain ? &da : a) == 0, "finish");
	if (drain)
		CHECK((!dr.len || ns_text_append(r, dr.buf, dr.len) == 0) &&
		      (!da.len || ns_text_append(a, da.buf, da.len) == 0), "append");
	srv_text_free(&t);
	free(dr.buf);
	free(da.buf);
	free(ids);
}

static void s_test_text(void)
{
	struct ns_model *m1 = NULL, *m2 = NULL;
	struct ns_tok *go = s_tok("tiny/tiny-gpt-oss-F32.gguf", &m1);
	struct ns_tok *q3 = s_tok("tiny/tiny-qwen3-F32.gguf", &m2);
	struct ns_text r = { 0 }, a = { 0 };
	const char *stop[] = { "is 4" };
	int stopped;

	/* whole, and token by token into emptied buffers (the reasoning messages' '\n' must not
	 * depend on what the current call's buffer holds) */
	for (int drain = 0; drain < 2; drain++) {
		s_text_of(go, SRV_SPLIT_HARMONY, "<|channel|>analysis<|message|>Two plus two.<|end|>"
			  "<|start|>assistant<|channel|>commentary<|message|>Tool?<|end|>"
			  "<|start|>assistant<|channel|>final<|message|>It is 4.", NULL, 0, &r, &a,
			  &stopped, drain);
		CHECK(r.buf && !strcmp(r.buf, "Two plus two.\nTool?") && a.buf &&
		      !strcmp(a.buf, "It is 4."), "harmony (drain %d): reasoning '%s' answer '%s'",
		      drain, r.buf, a.buf);
		r.len = a.len = 0;
	}
	s_text_of(go, SRV_SPLIT_HARMONY, "<|channel|>analysis<|message|>is 4 here<|end|>"
		  "<|start|>assistant<|channel|>final<|message|>It is 4. Yes.", stop, 1, &r, &a,
		  &stopped, false);
	CHECK(stopped == 1 && !strcmp(r.buf, "is 4 here") && !strcmp(a.buf, "It "),
	      "harmony + stop: %d '%s' '%s'", stopped, r.buf, a.buf);
	r.len = a.len = 0;
	CHECK(ns_tok_attr(q3, ns_tok_find(q3, "<think>", 7)) & NS_TOK_ATTR_CONTROL,
	      "the tiny qwen3 vocabulary no longer types <think> CONTROL");
	s_text_of(q3, SRV_SPLIT_THINK, "<think>\nhmm\n</think>\n\nok", NULL, 0, &r, &a, &stopped,
		  false);
	CHECK(r.buf && !strcmp(r.buf, "hmm") && a.buf && !strcmp(a.buf, "ok"),
	      "think tokens: reasoning '%s' answer '%s'", r.buf, a.buf);
	r.len = a.len = 0;
	/* Qwen3.5 thinking: the prompt opened the block */
	s_text_of(q3, SRV_SPLIT_THINK_OPEN, "hmm\n</think>\n\nok", NULL, 0, &r, &a, &stopped,
		  false);
	CHECK(r.buf && !strcmp(r.buf, "hmm") && a.buf && !strcmp(a.buf, "ok"),
	      "think open: reasoning '%s' answer '%s'", r.buf, a.buf);
	r.len = a.len = 0;
	s_text_of(q3, SRV_SPLIT_NONE, "<think>\nhmm\n</think>\n\nok", NULL, 0, &r, &a, &stopped,
		  false);
	CHECK(!r.len && a.buf && !strcmp(a.buf, "\nhmm\n\n\nok"), "no split: '%s'", a.buf);
	free(r.buf);
	free(a.buf);
	ns_tok_destroy(&go);
	ns_tok_destroy(&q3);
	ns_model_close(&m1);
	ns_model_close(&m2);
	printf("reply text: harmony channels, <think> tokens, stop strings on the answer only\n");
}

/* ------------------------------------------------------------ logprobs --------------- */

static int s_desc(const void *x, const void *y)
{
	const float *a = x, *b = y;

	return *a < *b ? 1 : *a > *b ? -1 : 0;
}

static void s_test_logprobs(void)
{
	enum { N = 1000 };
	float lg[N], sorted[N];
	long double sum = 0;
	uint64_t rng = 99;
	struct srv_token_lp lp;

	for (int i = 0; i < N; i++) {
		rng = rng * 6364136223846793005ull + 1442695040888963407ull;
		lg[i] = (float)((rng >> 40) % 20000) / 1000.0f - 10.0f;
	}
	lg[17] = lg[400]; /* a tie */
	for (int i = 0; i < N; i++)
		sum += expl((long double)lg[i]);
	memcpy(sorted, lg, sizeof(lg));
	qsort(sorted, N, sizeof(float), s_desc);
	srv_logprobs(lg, N, 123, 20, &lp);
	CHECK(lp.chosen.id == 123 && fabsl(lp.chosen.lp - (lg[123] - logl(sum))) < 1e-5,
	      "chosen %g vs %Lg", lp.chosen.lp, lg[123] - logl(sum));
	CHECK(lp.n_top == 20, "n_top %u", lp.n_top);
	for (uint32_t k = 0; k < lp.n_top; k++) {
		CHECK(lg[lp.top[k].id] == sorted[k], "top %u: %g, want %g", k, lg[lp.top[k].id],
		      sorted[k]);
		CHECK(fabsl(lp.top[k].lp - (sorted[k] - logl(sum))) < 1e-5, "top %u lp", k);
		CHECK(k == 0 || lg[lp.top[k].id] < lg[lp.top[k - 1].id] ||
		      lp.top[k].id > lp.top[k - 1].id, "ties: lower id first");
	}
	srv_logprobs(lg, N, 0, 0, &lp);
	CHECK(lp.n_top == 0, "k 0");
	printf("logprobs: the chosen token's and the 20 best against a sort and a long double "
	       "log-softmax\n");
}

/* ------------------------------------------------------------ parsing ---------------- */

static void s_parse_case(const struct srv_model_info *mi, enum srv_kind k, const char *body,
			 int status, const char *param, const char *code)
{
	struct srv_params p;
	struct srv_error e;
	int rc = srv_oai_parse(mi, k, body, strlen(body), &p, &e);

	if (!status) {
		CHECK(rc == 0, "%s: refused: %s", body, e.message);
	} else {
		CHECK(rc < 0 && e.status == status, "%s: rc %d status %d, want %d", body, rc,
		      rc < 0 ? e.status : 0, status);
		CHECK(!param || !strcmp(e.param, param), "%s: param '%s', want '%s'", body, e.param,
		      param);
		CHECK(!code || (e.code && !strcmp(e.code, code)), "%s: code %s, want %s", body,
		      e.code ? e.code : "(null)", code);
	}
	srv_params_free(&p);
}

static void s_test_parse(void)
{
	struct ns_model *m = NULL;
	struct ns_tok *tok = s_tok("tiny/tiny-qwen3-F32.gguf", &m);
	struct srv_model_info mi = { .id = "m", .tok = tok, .fam = NS_CHAT_QWEN3, .n_ctx = 64,
				     .n_vocab = 512 };
	struct srv_params p;
	struct srv_error e;
	const char *ok = "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
			 "\"temperature\":0.5,\"top_p\":0.9,\"top_k\":7,\"min_p\":0.1,"
			 "\"frequency_penalty\":0.5,\"presence_penalty\":-0.5,\"seed\":5,"
			 "\"max_completion_tokens\":9,\"stop\":\"x\",\"logprobs\":true,"
			 "\"top_logprobs\":3,\"logit_bias\":{\"12\":-100},\"stream\":true,"
			 "\"stream_options\":{\"include_usage\":true},\"user\":\"u\"}";
	char *want_text = NULL;
	struct ns_chat_msg cm = { .role = "user", .content = "hi" };
	struct ns_chat_opts co = { .enable_thinking = true };
	int32_t *ids;
	size_t n;
	char err[128];

	CHECK(srv_oai_parse(&mi, SRV_CHAT, ok, strlen(ok), &p, &e) == 0, "ok: %s", e.message);
	CHECK(p.sp.temperature == 0.5f && p.sp.top_p == 0.9f && p.sp.top_k == 7 &&
	      p.sp.min_p == 0.1f && p.sp.freq_penalty == 0.5f && p.sp.presence_penalty == -0.5f &&
	      p.sp.seed == 5 && p.max_tokens == 9 && p.n_stop == 1 && !strcmp(p.stop[0], "x") &&
	      p.logprobs && p.top_logprobs == 3 && p.n_bias == 1 && p.bias_ids[0] == 12 &&
	      p.bias[0] == -100 && p.stream && p.include_usage && p.split == SRV_SPLIT_THINK,
	      "fields");
	CHECK(ns_chat_render(NS_CHAT_QWEN3, &cm, 1, true, &co, &want_text, err, sizeof(err)) == 0 &&
	      ns_tok_encode(tok, want_text, strlen(want_text), false, true, &ids, &n) == 0, "render");
	CHECK(p.n_prompt == n && !memcmp(p.prompt, ids, n * sizeof(*ids)), "prompt tokens");
	free(ids);
	free(want_text);
	srv_params_free(&p);

	/* Qwen3.5: the template's default thinks (the prompt opens the block); enable_thinking
	 * false closes it empty */
	for (int think = 0; think < 2; think++) {
		struct srv_model_info m35 = mi;
		char body[256];

		m35.fam = NS_CHAT_QWEN35;
		co.enable_thinking = think;
		snprintf(body, sizeof(body), "{\"model\":\"m\",\"messages\":[{\"role\":\"user\","
			 "\"content\":\"hi\"}]%s}", think ? "" :
			 ",\"chat_template_kwargs\":{\"enable_thinking\":false}");
		CHECK(srv_oai_parse(&m35, SRV_CHAT, body, strlen(body), &p, &e) == 0, "qwen35: %s",
		      e.message);
		CHECK(p.split == (think ? SRV_SPLIT_THINK_OPEN : SRV_SPLIT_THINK), "qwen35 split %d",
		      (int)p.split);
		CHECK(ns_chat_render(NS_CHAT_QWEN35, &cm, 1, true, &co, &want_text, err,
				     sizeof(err)) == 0 &&
		      ns_tok_encode(tok, want_text, strlen(want_text), false, true, &ids, &n) == 0,
		      "render");
		CHECK(p.n_prompt == n && !memcmp(p.prompt, ids, n * sizeof(*ids)),
		      "qwen35 prompt tokens (thinking %d)", think);
		free(ids);
		free(want_text);
		srv_params_free(&p);
	}

	s_parse_case(&mi, SRV_COMPLETION, "{\"model\":\"m\",\"prompt\":\"a\"}", 0, NULL, NULL);
	s_parse_case(&mi, SRV_COMPLETION, "{\"model\":\"m\",\"prompt\":[1,2,3],\"logprobs\":5}", 0,
		     NULL, NULL);
	s_parse_case(&mi, SRV_COMPLETION, "{\"model\":\"m\",\"prompt\":\"a\",\"logprobs\":6}", 400,
		     "logprobs", NULL);
	s_parse_case(&mi, SRV_COMPLETION, "{\"model\":\"x\",\"prompt\":\"a\"}", 404, "model",
		     "model_not_found");
	s_parse_case(&mi, SRV_COMPLETION, "{\"prompt\":\"a\"}", 400, "model", NULL);
	s_parse_case(&mi, SRV_COMPLETION, "{\"model\":\"m\"}", 400, "prompt", NULL);
	s_parse_case(&mi, SRV_COMPLETION, "{\"model\":\"m\",\"prompt\":\"a\",\"messages\":[]}",
		     400, "messages", "unknown_parameter");
	s_parse_case(&mi, SRV_CHAT, "{\"model\":\"m\",\"messages\":[],\"prompt\":\"a\"}", 400,
		     "prompt", "unknown_parameter");
	s_parse_case(&mi, SRV_COMPLETION, "{\"model\":\"m\",\"prompt\":\"a\",\"temperature\":"
		     "true}", 400, "temperature", "invalid_type");
	s_parse_case(&mi, SRV_COMPLETION, "{\"model\":\"m\",\"prompt\":\"a\",\"top_p\":1.5}",
		     400, "top_p", "invalid_value");
	s_parse_case(&mi, SRV_COMPLETION, "{\"model\":\"m\",\"prompt\":\"a\",\"top_k\":1.5}",
		     400, "top_k", "invalid_type");
	s_parse_case(&mi, SRV_COMPLETION, "{\"model\":\"m\",\"prompt\":\"a\",\"max_tokens\":0}",
		     400, "max_tokens", NULL);
	s_parse_case(&mi, SRV_COMPLETION, "{\"model\":\"m\",\"prompt\":\"a\",\"stop\":[\"\"]}",
		     400, "stop", NULL);
	s_parse_case(&mi, SRV_COMPLETION, "{\"model\":\"m\",\"prompt\":\"a\",\"logit_bias\":"
		     "{\"512\":1}}", 400, "logit_bias", NULL);
	s_parse_case(&mi, SRV_COMPLETION, "{\"model\":\"m\",\"prompt\":\"a\",\"logit_bias\":"
		     "{\"-1\":1}}", 400, "logit_bias", NULL);
	s_parse_case(&mi, SRV_COMPLETION, "{\"model\":\"m\",\"prompt\":\"a\",\"logit_bias\":"
		     "{\"3\":101}}", 400, "logit_bias", NULL);
	s_parse_case(&mi, SRV_COMPLETION, "{\"model\":\"m\",\"prompt\":\"a\",\"stream_options\":"
		     "{\"include_usage\":true}}", 400, "stream_options", NULL);
	s_parse_case(&mi, SRV_COMPLETION, "{\"model\":\"m\",\"prompt\":\"a\",\"echo\":true}",
		     400, "echo", NULL);
	s_parse_case(&mi, SRV_COMPLETION, "{\"model\":\"m\",\"prompt\":[\"a\",\"b\"]}", 400,
		     "prompt", NULL);
	s_parse_case(&mi, SRV_COMPLETION, "{\"model\":\"m\",\"prompt\":\"" /* 70 > 64 tokens */
		     "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa "
		     "b c d e f g h i j k l m n o p q r s t u v w x y z a b c d e f g h i j k l m "
		     "n o p q r s t u v w x y z\"}", 400, "prompt", "context_length_exceeded");
	s_parse_case(&mi, SRV_CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\","
		     "\"content\":\"a\"}],\"top_logprobs\":2}", 400, "top_logprobs", NULL);
	s_parse_case(&mi, SRV_CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"robot\","
		     "\"content\":\"a\"}]}", 400, "messages[0]", NULL);
	s_parse_case(&mi, SRV_CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\","
		     "\"content\":[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"text\","
		     "\"text\":\"b\"}]}]}", 0, NULL, NULL);
	s_parse_case(&mi, SRV_CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\","
		     "\"content\":\"a\"}],\"response_format\":{\"type\":\"json_object\"}}", 400,
		     "response_format", NULL);
	s_parse_case(&mi, SRV_CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\","
		     "\"content\":\"a\"}],\"reasoning_effort\":\"max\"}", 400, "reasoning_effort",
		     NULL);
	s_parse_case(&mi, SRV_CHAT, "{\"model\":\"m\",\"messages\":{}}", 400, "messages", NULL);
	s_parse_case(&mi, SRV_CHAT, "[]", 400, NULL, "invalid_json");
	s_parse_case(&mi, SRV_CHAT, "{\"model\":\"m\",\"model\":\"m\"}", 400, NULL,
		     "invalid_json");
	mi.fam = NS_CHAT_UNKNOWN;
	s_parse_case(&mi, SRV_CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\","
		     "\"content\":\"a\"}]}", 400, "messages", "no_chat_template");
	ns_tok_destroy(&tok);
	ns_model_close(&m);
	printf("request parsing: every field, the refusals by param and code, the prompt as the "
	       "template renders it\n");
}

/* ------------------------------------------------------------ STEP messages ---------- */

static void s_test_step_msg(void)
{
	int32_t toks[6] = { 1, 2, 3, 4, 5, 6 }, out[64];
	struct ns_cmsg_step st = { .n_seq = 3, .tokens = toks }, d;
	uint8_t buf[512], bad[512];
	uint64_t rng = 7;
	int n, accepted = 0;

	st.seq[0] = (struct ns_cmsg_step_seq){ .slot = 2, .keep = 10, .n_tokens = 1,
					       .want_logits = 1 };
	st.seq[1] = (struct ns_cmsg_step_seq){ .slot = 0, .keep = 0, .n_tokens = 4 };
	st.seq[2] = (struct ns_cmsg_step_seq){ .slot = 1, .keep = 3, .n_tokens = 1,
					       .want_logits = 1 };
	n = ns_cmsg_enc_step(&st, buf, sizeof(buf));
	CHECK(n == (int)ns_cmsg_size_step(3, 6), "size %d", n);
	CHECK(ns_cmsg_dec_step(buf, (size_t)n, 100, 3, out, 64, &d) == 0, "decode");
	CHECK(d.n_seq == 3 && d.seq[0].slot == 2 && d.seq[0].keep == 10 && d.seq[1].n_tokens == 4 &&
	      d.seq[2].want_logits == 1 && !memcmp(d.tokens, toks, sizeof(toks)), "fields");
	CHECK(ns_cmsg_dec_step(buf, (size_t)n, 100, 2, out, 64, &d) < 0, "slot 2 of 2 accepted");
	CHECK(ns_cmsg_dec_step(buf, (size_t)n, 6, 3, out, 64, &d) < 0, "id 6 of 6 accepted");
	CHECK(ns_cmsg_dec_step(buf, (size_t)n, 100, 3, out, 5, &d) < 0, "over the cap accepted");
	CHECK(ns_cmsg_dec_step(buf, (size_t)n - 4, 100, 3, out, 64, &d) < 0, "short accepted");
	st.seq[2].slot = 2;
	n = ns_cmsg_enc_step(&st, buf, sizeof(buf));
	CHECK(ns_cmsg_dec_step(buf, (size_t)n, 100, 3, out, 64, &d) < 0, "a slot twice accepted");
	st.seq[2].slot = 1;
	st.seq[1].n_tokens = 0;
	st.seq[2].n_tokens = 5;
	n = ns_cmsg_enc_step(&st, buf, sizeof(buf));
	CHECK(ns_cmsg_dec_step(buf, (size_t)n, 100, 3, out, 64, &d) < 0, "no tokens accepted");
	/* random corruption: rejected or decoded, never read past the buffer (ASan) */
	st.seq[1].n_tokens = 4;
	st.seq[2].n_tokens = 1;
	n = ns_cmsg_enc_step(&st, buf, sizeof(buf));
	for (int trial = 0; trial < 5000; trial++) {
		size_t len = (size_t)n;

		memcpy(bad, buf, len);
		for (int k = 0; k < 3; k++) {
			rng = rng * 6364136223846793005ull + 1442695040888963407ull;
			bad[(rng >> 33) % len] ^= (uint8_t)(1u << ((rng >> 20) % 8));
		}
		if (trial % 7 == 0)
			len = (size_t)(rng >> 40) % len;
		accepted += ns_cmsg_dec_step(bad, len, 100, 3, out, 64, &d) == 0;
	}
	printf("STEP messages: round trip; a slot twice or out of range, ids past the vocabulary, "
	       "short or empty refused; %d of 5000 corrupted copies still well-formed\n",
	       accepted);
}

int main(void)
{
	ns_test_require_oracle();
	s_test_stop();
	s_test_think();
	s_test_text();
	s_test_logprobs();
	s_test_parse();
	s_test_step_msg();
	return 0;
}
