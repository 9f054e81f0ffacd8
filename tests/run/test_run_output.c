/* test_run_output: what nsctl run shows of a harmony stream and of a Qwen think block
 * (nsctl/run_output.h; the think cases at s_think), fed the
 * pieces the engine's callback gets: a transcript tokenized with the real gpt-oss vocabulary
 * (vocab-hf/hf-gptoss-vocab.gguf) and with the tiny gpt-oss oracle model's (channel names are
 * several tokens there; <|end|> is an end-of-generation token decoding to nothing, as
 * <|return|> and <|call|> are in both), decoded token by token with the streaming
 * detokenizer as the engine does. Checked byte for byte:
 *   - default: the final channel on stdout, "[analysis] ..." and "[commentary] ..." blocks on
 *     stderr, one line per message; --final-only: nothing on stderr; --json texts;
 *   - the stream cut after every token (-n): stdout never shows header or marker text, and
 *     "-n N reached inside/after the analysis channel" (or "before any message text")
 *     appears exactly when no final text was shown; none after an end-of-generation stop;
 *   - plain (non-harmony) output is passed through.
 * Exit 0 pass, 1 fail, 77 oracle missing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "ns_test.h"
#include "ns_util.h"
#include "run_output.h"
#include "tokenizer.h"

struct s_cap {
	char *out, *err;
	size_t n_out, n_err;
	FILE *fo, *fe;
};

static void s_cap_open(struct s_cap *c)
{
	memset(c, 0, sizeof(*c));
	c->fo = open_memstream(&c->out, &c->n_out);
	c->fe = open_memstream(&c->err, &c->n_err);
	NS_REQUIRE(c->fo && c->fe, "open_memstream");
}

static void s_cap_close(struct s_cap *c)
{
	fclose(c->fo);
	fclose(c->fe);
}

static void s_cap_free(struct s_cap *c)
{
	free(c->out);
	free(c->err);
}

/* Feed ids[0..n) through the detokenizer into o, then end it with stop_reason. */
static void s_run(struct ns_run_out *o, const struct ns_tok *t, const int32_t *ids, size_t n,
		  uint32_t stop_reason, int32_t n_predict)
{
	struct ns_detok *d = ns_detok_new(t, false, false);
	const char *txt;
	size_t len;

	NS_REQUIRE(d, "detok");
	for (size_t i = 0; i < n; i++) {
		NS_REQUIRE(ns_detok_feed(d, ids[i], &txt, &len) == 0, "detok");
		NS_REQUIRE(ns_run_out_piece(txt, len, ids[i], o) == 0, "piece");
	}
	if (ns_detok_flush(d, &txt, &len) == 0 && len)
		NS_REQUIRE(ns_run_out_piece(txt, len, -1, o) == 0, "piece");
	ns_detok_destroy(&d);
	ns_run_out_end(o, stop_reason, n_predict);
}

static int s_eq(const char *what, const char *got, const char *want)
{
	if (got && !strcmp(got, want))
		return 0;
	fprintf(stderr, "FAIL %s:\n  got  '%s'\n  want '%s'\n", what, got ? got : "(null)", want);
	return 1;
}

static int s_vocab(const char *rel)
{
	static const char text[] =
		"<|channel|>analysis<|message|>We need to think.<|end|><|start|>assistant"
		"<|channel|>commentary to=functions.x <|constrain|>json<|message|>{\"a\":1}<|call|>"
		"<|start|>assistant<|channel|>final<|message|>Done: 4.<|return|>";
	char path[4096], err[NS_ERR_LEN];
	struct ns_gguf *g = NULL;
	struct ns_tok *t;
	int32_t *ids = NULL;
	size_t n = 0, n_analysis = 0;
	int fails = 0;

	ns_test_oracle_path(path, sizeof(path), rel);
	NS_REQUIRE(ns_gguf_open(path, &g, err, sizeof(err)) == 0, "%s: %s", path, err);
	t = ns_tok_new(g, err, sizeof(err));
	NS_REQUIRE(t, "%s", err);
	ns_gguf_close(&g);
	NS_REQUIRE(ns_tok_encode(t, text, strlen(text), false, true, &ids, &n) == 0, "encode");
	/* tokens up to the end of the analysis body */
	for (size_t i = 0, seen = 0; i < n && !n_analysis; i++) {
		size_t l;
		const char *s = ns_tok_text(t, ids[i], &l);

		if (s && l == 7 && !memcmp(s, "<|end|>", 7) && !seen++)
			n_analysis = i;
	}
	NS_REQUIRE(n_analysis > 5, "no <|end|> token in the tiny vocabulary's transcript");

	for (int final_only = 0; final_only < 2; final_only++) { /* the whole reply */
		struct ns_run_out o;
		struct s_cap c;

		s_cap_open(&c);
		NS_REQUIRE(ns_run_out_begin(&o, NS_RUN_HARMONY, final_only, c.fo, c.fe) == 0, "begin");
		s_run(&o, t, ids, n, 2, 100);
		s_cap_close(&c);
		fails += s_eq("stdout", c.out, "Done: 4.\n");
		fails += s_eq("stderr", c.err, final_only ? "" :
			      "[analysis] We need to think.\n[commentary] {\"a\":1}\n");
		fails += s_eq("content", o.content.buf, "Done: 4.");
		fails += s_eq("reasoning", o.reasoning.buf, "We need to think.\n{\"a\":1}");
		NS_EXPECT(fails, o.final_seen, "final seen");
		ns_run_out_free(&o);
		s_cap_free(&c);
	}

	for (size_t k = 0; k <= n; k++) { /* -n after k tokens */
		struct ns_run_out o;
		struct s_cap c;
		bool want_line;

		s_cap_open(&c);
		NS_REQUIRE(ns_run_out_begin(&o, NS_RUN_HARMONY, false, c.fo, c.fe) == 0, "begin");
		s_run(&o, t, ids, k, 1, (int32_t)k);
		s_cap_close(&c);
		/* no answer text */
		want_line = !strcmp(c.out, "\n");
		NS_EXPECT(fails, !strstr(c.out, "<|") && !strstr(c.out, "assistant") &&
			  !strstr(c.out, "analysis") && !strstr(c.out, "final") &&
			  !strncmp(c.out, "Done: 4.", strlen(c.out) - 1) &&
			  c.out[strlen(c.out) - 1] == '\n', "stdout after %zu tokens: '%s'", k, c.out);
		NS_EXPECT(fails, !strstr(c.err, "functions") && !strstr(c.err, "json<"),
			  "stderr after %zu tokens: '%s'", k, c.err);
		NS_EXPECT(fails, want_line == (strstr(c.err, "answer yet (raise -n)\n") != NULL),
			  "after %zu tokens: -n line %s expected: '%s'", k, want_line ? "" : "not",
			  c.err);
		if (!strstr(c.err, "[analysis] ")) {
			char line[128];

			snprintf(line, sizeof(line), "nsctl run: -n %zu reached before any message "
				 "text; no answer yet (raise -n)\n", k);
			fails += s_eq("nothing shown yet", c.err, line);
		}
		if (strstr(c.err, "[analysis] ") && k <= n_analysis) {
			char line[128];

			snprintf(line, sizeof(line), "\nnsctl run: -n %zu reached inside the analysis "
				 "channel; no final answer yet (raise -n)\n", k);
			NS_EXPECT(fails, strstr(c.err, line) != NULL, "after %zu tokens: '%s'", k,
				  c.err);
		}
		if (k == n_analysis + 1 && (ns_tok_attr(t, ids[n_analysis]) &
					    NS_TOK_ATTR_USER_DEFINED)) /* <|end|> in, as text */
			NS_EXPECT(fails, strstr(c.err, "reached after the analysis channel"),
				  "after <|end|>: '%s'", c.err);
		ns_run_out_free(&o);
		s_cap_free(&c);
	}

	{ /* inside analysis but ended by an end-of-generation token: no -n line; context: */
		struct ns_run_out o;
		struct s_cap c;

		for (uint32_t reason = 2; reason <= 3; reason++) {
			s_cap_open(&c);
			NS_REQUIRE(ns_run_out_begin(&o, NS_RUN_HARMONY, false, c.fo, c.fe) == 0, "begin");
			s_run(&o, t, ids, n_analysis, reason, 9);
			s_cap_close(&c);
			fails += s_eq(reason == 2 ? "eog stop" : "context full", c.err,
				      reason == 2 ? "[analysis] We need to think.\n" :
				      "[analysis] We need to think.\nnsctl run: the context filled "
				      "up inside the analysis channel; no final answer (raise -c)\n");
			ns_run_out_free(&o);
			s_cap_free(&c);
		}
	}

	{ /* plain output */
		struct ns_run_out o;
		struct s_cap c;

		s_cap_open(&c);
		NS_REQUIRE(ns_run_out_begin(&o, NS_RUN_PLAIN, false, c.fo, c.fe) == 0, "begin");
		NS_REQUIRE(ns_run_out_piece("a <|x", 5, 1, &o) == 0 &&
			   ns_run_out_piece("|>b", 3, 2, &o) == 0, "piece");
		ns_run_out_end(&o, 1, 2);
		s_cap_close(&c);
		fails += s_eq("plain stdout", c.out, "a <|x|>b\n");
		fails += s_eq("plain stderr", c.err, "");
		fails += s_eq("plain content", o.content.buf, "a <|x|>b");
		ns_run_out_free(&o);
		s_cap_free(&c);
	}
	free(ids);
	ns_tok_destroy(&t);
	if (fails)
		fprintf(stderr, "%s: %d failure(s)\n", rel, fails);
	return fails;
}

/* A Qwen reply through the think split: pieces as the engine hands them (id -1: text; a
 * marker id with no text: a CONTROL "</think>"), the stop reason, and what stdout, stderr,
 * the kept answer and reasoning must be. */
struct s_think_case {
	const char *name;
	enum ns_run_split split;
	bool final_only;
	const char *pieces[8];
	int32_t ids[8];
	uint32_t stop_reason;
	const char *out, *err, *content, *reasoning;
};

static int s_think(void)
{
	static const struct s_think_case cases[] = {
		{ "thinking: the open block to stderr", NS_RUN_THINK_OPEN, false,
		  { "Let me", " see.\n", "</th", "ink>\n\n", "Paris." }, { 0 }, 2,
		  "Paris.\n", "[thinking] Let me see.\n", "Paris.", "Let me see." },
		{ "--final-only: no thinking shown", NS_RUN_THINK_OPEN, true,
		  { "Let me", " see.\n", "</think>", "\n\nParis." }, { 0 }, 2,
		  "Paris.\n", "", "Paris.", "Let me see." },
		{ "a block opening the reply", NS_RUN_THINK, false,
		  { "\n<thi", "nk>\nhmm\n</think>\n\n", "OK" }, { 0 }, 2,
		  "OK\n", "[thinking] hmm\n", "OK", "hmm" },
		{ "no block: all answer", NS_RUN_THINK, false,
		  { "Hello <think>", " x</think>" }, { 0 }, 2,
		  "Hello <think> x</think>\n", "", "Hello <think> x</think>", "" },
		{ "a CONTROL marker fed as its text", NS_RUN_THINK_OPEN, false,
		  { "x", "", "\n\ny" }, { -1, 8, -1 }, 2, "y\n", "[thinking] x\n", "y", "x" },
		{ "-n inside the thinking", NS_RUN_THINK_OPEN, false,
		  { "a", "b" }, { 0 }, 1, "\n", "[thinking] ab\nnsctl run: -n 2 reached inside the "
		  "thinking; no answer yet (raise -n, or leave out --thinking)\n", "", "ab" },
		{ "the context full inside the thinking", NS_RUN_THINK, false,
		  { "<think>", "a" }, { 0 }, 3, "\n", "[thinking] a\nnsctl run: the context filled "
		  "up inside the thinking; no answer (raise -c)\n", "", "a" },
	};
	int fails = 0;

	for (size_t k = 0; k < NS_ARRAY_LEN(cases); k++) {
		const struct s_think_case *tc = &cases[k];
		struct ns_run_out o;
		struct s_cap c;
		size_t n = 0;

		s_cap_open(&c);
		NS_REQUIRE(ns_run_out_begin(&o, tc->split, tc->final_only, c.fo, c.fe) == 0, "begin");
		ns_run_out_markers(&o, 7, 8);
		for (; n < NS_ARRAY_LEN(tc->pieces) && tc->pieces[n]; n++)
			NS_REQUIRE(ns_run_out_piece(tc->pieces[n], strlen(tc->pieces[n]),
						    tc->ids[n] ? tc->ids[n] : -1, &o) == 0, "piece");
		ns_run_out_end(&o, tc->stop_reason, (int32_t)n);
		s_cap_close(&c);
		fails += s_eq(tc->name, c.out, tc->out) + s_eq(tc->name, c.err, tc->err) +
			 s_eq(tc->name, o.content.buf ? o.content.buf : "", tc->content) +
			 s_eq(tc->name, o.reasoning.buf ? o.reasoning.buf : "", tc->reasoning);
		ns_run_out_free(&o);
		s_cap_free(&c);
	}
	return fails;
}

int main(void)
{
	int fails;

	ns_test_require_oracle();
	fails = s_vocab("vocab-hf/hf-gptoss-vocab.gguf") + s_vocab("tiny/tiny-gpt-oss-F32.gguf") +
		s_think();
	if (fails) {
		fprintf(stderr, "%d failure(s)\n", fails);
		return 1;
	}
	printf("run_output: channels to stdout/stderr, --final-only, -n cut at every token; "
	       "think blocks to stderr\n");
	return 0;
}
