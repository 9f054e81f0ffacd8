/* test_harmony - the harmony stream parser (modelfile/tokenizer/harmony.h).
 *
 * Every result is written as a canonical string: "|<channel>:<text>" per message body, in
 * order (e.g. "|analysis:User says hi.|final:Hello!"), with the expected strings written by
 * hand from the transcripts' text.
 *   1. text transcripts fed whole, byte by byte, split at every single point and at random
 *      points: the same events (markers split across pieces never leak);
 *   2. the oracle's llama.cpp token ids of harmony transcripts (vocab-hf/hf-gptoss.jsonl,
 *      real gpt-oss vocabulary: "commentary" is two tokens) decoded token by token with the
 *      streaming detokenizer exactly as the engine does (structure tokens rendered as text,
 *      <|return|>/<|call|> as nothing), and with every special token rendered;
 *   3. the tiny gpt-oss oracle model's 512-token vocabulary, where "analysis" is five tokens;
 *   4. unterminated streams (inside a body, inside a header), text outside messages, a
 *      header too long to be one, unknown channels, '<' in text, callback stop.
 * Exit 0 pass, 1 fail, 77 oracle missing (parts 2 and 3 need it; part 1 and 4 run first). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "harmony.h"
#include "ns_test.h"
#include "ns_util.h"
#include "tokenizer.h"

struct s_acc {
	struct ns_harmony *h;
	char out[4096];
	size_t len;
	unsigned msg;
	enum ns_harmony_channel ch;
	bool any;
	int stop_after; /* > 0: return 1 on that event */
	int n_events;
};

static void s_put(struct s_acc *a, const char *s, size_t n)
{
	NS_REQUIRE(a->len + n < sizeof(a->out), "event log overflow");
	memcpy(a->out + a->len, s, n);
	a->len += n;
	a->out[a->len] = 0;
}

static int s_on(enum ns_harmony_channel ch, const char *text, size_t len, void *user)
{
	struct s_acc *a = user;
	unsigned msg = ns_harmony_n_messages(a->h);

	NS_REQUIRE(len > 0, "empty event");
	if (!a->any || msg != a->msg || ch != a->ch) {
		const char *name = ns_harmony_channel_name(ch);

		s_put(a, "|", 1);
		s_put(a, name, strlen(name));
		s_put(a, ":", 1);
	}
	a->any = true;
	a->msg = msg;
	a->ch = ch;
	s_put(a, text, len);
	return ++a->n_events == a->stop_after;
}

static void s_acc_init(struct s_acc *a, bool in_header)
{
	memset(a, 0, sizeof(*a));
	a->h = ns_harmony_new(in_header);
	NS_REQUIRE(a->h, "ns_harmony_new");
}

/* Feed text cut at the given offsets (sorted, ascending, < n). */
static void s_feed_cuts(struct s_acc *a, const char *t, size_t n, const size_t *cut, size_t nc)
{
	size_t at = 0;

	for (size_t i = 0; i <= nc; i++) {
		size_t end = i < nc ? cut[i] : n;

		NS_REQUIRE(ns_harmony_feed(a->h, t + at, end - at, s_on, a) == 0, "feed");
		at = end;
	}
	NS_REQUIRE(ns_harmony_finish(a->h, s_on, a) == 0, "finish");
}

static int s_check(const char *what, const struct s_acc *a, const char *want)
{
	if (!strcmp(a->out, want))
		return 0;
	fprintf(stderr, "FAIL %s:\n  got  '%s'\n  want '%s'\n", what, a->out, want);
	return 1;
}

struct s_case {
	const char *text;
	bool in_header;
	const char *want;
};

static const struct s_case s_cases[] = {
	{ "<|channel|>analysis<|message|>We need to answer.<|end|><|start|>assistant<|channel|>"
	  "final<|message|>Hi<|return|>",
	  true, "|analysis:We need to answer.|final:Hi" },
	{ "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
	  "{\"city\":\"Paris\"}<|call|>",
	  true, "|commentary:{\"city\":\"Paris\"}" },
	{ "<|start|>assistant to=functions.f<|channel|>commentary json<|message|>{}<|call|>",
	  false, "|commentary:{}" },
	{ "<|channel|>analysis<|message|>a<|end|><|start|>assistant<|channel|>analysis"
	  "<|message|>b<|end|><|start|>assistant<|channel|>final<|message|>c",
	  true, "|analysis:a|analysis:b|final:c" },
	/* '<' and marker look-alikes in a body are text */
	{ "<|channel|>final<|message|>x<y <| <|end <|chan|> <<|en <|<|message|",
	  true, "|final:x<y <| <|end <|chan|> <<|en <|<|message|" },
	{ "<|channel|>final<|message|>a <<|end|>tail", true, "|final:a <|none:tail" },
	/* unterminated inside the analysis body */
	{ "<|channel|>analysis<|message|>thinking about it", true, "|analysis:thinking about it" },
	/* unterminated inside a header: nothing of it shows */
	{ "<|channel|>analysis<|message|>t<|end|><|start|>assistant<|channel|>fin", true,
	  "|analysis:t" },
	{ "<|channel|>analy", true, "" },
	{ "plain text, no format", false, "|none:plain text, no format" },
	{ "<|start|>assistant<|message|>no channel<|end|>", false, "|none:no channel" },
	{ "<|channel|>foo<|message|>bar<|end|>", true, "|other:bar" },
	{ "<|channel|>  final\n<|message|>x<|end|>", true, "|final:x" },
	{ "<|channel|>finally<|message|>x<|end|>", true, "|other:x" },
	/* stray markers in a body are dropped */
	{ "<|channel|>final<|message|>a<|constrain|>b<|message|>c<|return|>", true,
	  "|final:abc" },
	{ "", true, "" },
};

static int s_text_cases(void)
{
	int fails = 0;
	unsigned seed = 12345;

	for (size_t c = 0; c < NS_ARRAY_LEN(s_cases); c++) {
		const struct s_case *k = &s_cases[c];
		size_t n = strlen(k->text), cut[64];
		struct s_acc a;
		char what[128];

		s_acc_init(&a, k->in_header);
		s_feed_cuts(&a, k->text, n, NULL, 0);
		snprintf(what, sizeof(what), "case %zu whole", c);
		fails += s_check(what, &a, k->want);
		ns_harmony_destroy(&a.h);
		NS_REQUIRE(!a.h, "destroy nulls");

		s_acc_init(&a, k->in_header); /* byte by byte */
		for (size_t i = 0; i < n; i++)
			NS_REQUIRE(ns_harmony_feed(a.h, k->text + i, 1, s_on, &a) == 0, "feed");
		NS_REQUIRE(ns_harmony_finish(a.h, s_on, &a) == 0, "finish");
		snprintf(what, sizeof(what), "case %zu bytewise", c);
		fails += s_check(what, &a, k->want);
		ns_harmony_destroy(&a.h);

		for (size_t i = 1; i < n; i++) { /* every single cut */
			s_acc_init(&a, k->in_header);
			cut[0] = i;
			s_feed_cuts(&a, k->text, n, cut, 1);
			snprintf(what, sizeof(what), "case %zu cut at %zu", c, i);
			fails += s_check(what, &a, k->want);
			ns_harmony_destroy(&a.h);
		}
		for (int r = 0; r < 50 && n > 1; r++) { /* random cuts */
			size_t nc = 0, at = 0;

			while (nc < NS_ARRAY_LEN(cut)) {
				seed = seed * 1103515245u + 12345u;
				at += 1 + (seed >> 16) % 7;
				if (at >= n)
					break;
				cut[nc++] = at;
			}
			s_acc_init(&a, k->in_header);
			s_feed_cuts(&a, k->text, n, cut, nc);
			snprintf(what, sizeof(what), "case %zu random cuts #%d", c, r);
			fails += s_check(what, &a, k->want);
			ns_harmony_destroy(&a.h);
		}
	}
	return fails;
}

static int s_misc(void)
{
	struct s_acc a;
	char big[NS_HARMONY_HEADER_MAX + 40];
	char want[sizeof(big) + 8];
	int fails = 0;

	/* a header longer than any real one: shown as text outside the format */
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	snprintf(want, sizeof(want), "|none:%s", big);
	s_acc_init(&a, true);
	s_feed_cuts(&a, big, strlen(big), NULL, 0);
	fails += s_check("long header", &a, want);
	ns_harmony_destroy(&a.h);
	s_acc_init(&a, true); /* the same arriving in pieces of 10 */
	for (size_t i = 0, n = strlen(big); i < n; i += 10)
		NS_REQUIRE(ns_harmony_feed(a.h, big + i, n - i < 10 ? n - i : 10, s_on, &a) == 0,
			   "feed");
	NS_REQUIRE(ns_harmony_finish(a.h, s_on, &a) == 0, "finish");
	fails += s_check("long header in pieces", &a, want);
	ns_harmony_destroy(&a.h);

	/* state queries: inside the analysis body, then after it, then final */
	s_acc_init(&a, true);
	NS_EXPECT(fails, ns_harmony_last_channel(a.h) == NS_HARMONY_NONE &&
		  !ns_harmony_in_body(a.h), "fresh parser state");
	ns_harmony_feed(a.h, "<|channel|>analysis<|message|>abc", 33, s_on, &a);
	NS_EXPECT(fails, ns_harmony_last_channel(a.h) == NS_HARMONY_ANALYSIS &&
		  ns_harmony_in_body(a.h) && ns_harmony_n_messages(a.h) == 1, "in analysis body");
	ns_harmony_feed(a.h, "<|end|><|start|>assistant", 25, s_on, &a);
	NS_EXPECT(fails, ns_harmony_last_channel(a.h) == NS_HARMONY_ANALYSIS &&
		  !ns_harmony_in_body(a.h), "after analysis");
	ns_harmony_feed(a.h, "<|channel|>final<|message|>", 27, s_on, &a);
	NS_EXPECT(fails, ns_harmony_last_channel(a.h) == NS_HARMONY_FINAL &&
		  ns_harmony_n_messages(a.h) == 2, "final");
	ns_harmony_destroy(&a.h);

	/* a non-zero callback return stops the feed and is returned */
	s_acc_init(&a, false);
	a.stop_after = 1;
	NS_EXPECT(fails, ns_harmony_feed(a.h, "ab<c", 4, s_on, &a) == 1 && a.n_events == 1,
		  "callback stop");
	ns_harmony_destroy(&a.h);
	ns_harmony_destroy(&a.h); /* twice: no-op */
	ns_harmony_destroy(NULL);
	NS_EXPECT(fails, !strcmp(ns_harmony_channel_name(NS_HARMONY_COMMENTARY), "commentary") &&
		  !strcmp(ns_harmony_channel_name((enum ns_harmony_channel)99), "other"), "names");
	return fails;
}

/* ids through the streaming detokenizer, one token at a time, into the parser. */
static void s_feed_ids(struct s_acc *a, const struct ns_tok *t, const int32_t *ids, size_t n,
		       bool unparse)
{
	struct ns_detok *d = ns_detok_new(t, unparse, false);
	const char *txt;
	size_t len;

	NS_REQUIRE(d, "ns_detok_new");
	for (size_t i = 0; i < n; i++) {
		NS_REQUIRE(ns_detok_feed(d, ids[i], &txt, &len) == 0, "detok id %d", ids[i]);
		NS_REQUIRE(ns_harmony_feed(a->h, txt, len, s_on, a) == 0, "feed");
	}
	NS_REQUIRE(ns_detok_flush(d, &txt, &len) == 0, "flush");
	NS_REQUIRE(ns_harmony_feed(a->h, txt, len, s_on, a) == 0, "feed");
	NS_REQUIRE(ns_harmony_finish(a->h, s_on, a) == 0, "finish");
	ns_detok_destroy(&d);
}

static struct ns_tok *s_tok(const char *rel)
{
	char path[4096], err[NS_ERR_LEN];
	struct ns_gguf *g = NULL;
	struct ns_tok *t;

	ns_test_oracle_path(path, sizeof(path), rel);
	NS_REQUIRE(ns_gguf_open(path, &g, err, sizeof(err)) == 0, "%s: %s", path, err);
	t = ns_tok_new(g, err, sizeof(err));
	NS_REQUIRE(t, "%s: %s", path, err);
	ns_gguf_close(&g);
	return t;
}

/* The ids of the oracle line whose text is text (llama.cpp's tokenization). */
static size_t s_oracle_ids(const char *jsonl, const char *text_json, int32_t *ids, size_t cap)
{
	const char *p = strstr(jsonl, text_json), *q;
	size_t n = 0;

	NS_REQUIRE(p && (q = strstr(p, "\"ids\": [")), "oracle line %s missing", text_json);
	q += 8;
	while (*q && *q != ']' && n < cap) {
		ids[n++] = (int32_t)strtol(q, (char **)&q, 10);
		while (*q == ',' || *q == ' ')
			q++;
	}
	return n;
}

static const struct {
	const char *text_json; /* as in the JSONL, the start of its "text" member */
	const char *want;      /* the engine's stream: starts after "<|start|>assistant" */
} s_oracle[] = {
	{ "{\"text\": \"<|start|>assistant<|channel|>analysis<|message|>User says hi.<|end|>",
	  "|analysis:User says hi.|final:Hello!" },
	{ "{\"text\": \"<|start|>assistant<|channel|>commentary to=functions.get_weather ",
	  "|commentary:{\"city\":\"Paris\"}" },
	{ "{\"text\": \"<|channel|>final<|message|>\xe4\xbd\xa0",
	  "|final:\xe4\xbd\xa0\xe5\xa5\xbd\xf0\x9f\x98\x80" },
	{ "{\"text\": \"<|start|>assistant<|channel|>final<|message|>Hi<|end|>\"",
	  "|final:Hi" },
};

static int s_oracle_vocab(void)
{
	struct ns_tok *t = s_tok("vocab-hf/hf-gptoss-vocab.gguf");
	char path[4096];
	size_t jl;
	char *jsonl = ns_test_read_file(ns_test_oracle_path(path, sizeof(path),
							    "vocab-hf/hf-gptoss.jsonl"), &jl);
	static const struct {
		int32_t id;
		const char *text;
	} marks[] = { { 200005, "<|channel|>" }, { 200006, "<|start|>" }, { 200007, "<|end|>" },
		      { 200008, "<|message|>" }, { 200003, "<|constrain|>" },
		      { 200002, "<|return|>" }, { 200012, "<|call|>" } };
	int fails = 0;

	NS_REQUIRE(jsonl, "hf-gptoss.jsonl");
	/* the structure tokens are single tokens of the vocabulary */
	for (size_t i = 0; i < NS_ARRAY_LEN(marks); i++) {
		size_t l;
		const char *s = ns_tok_text(t, marks[i].id, &l);

		NS_EXPECT(fails, s && l == strlen(marks[i].text) && !memcmp(s, marks[i].text, l),
			  "vocab id %d is not %s", marks[i].id, marks[i].text);
	}
	for (size_t c = 0; c < NS_ARRAY_LEN(s_oracle); c++) {
		int32_t ids[256];
		size_t skip = 0, n = s_oracle_ids(jsonl, s_oracle[c].text_json, ids,
						  NS_ARRAY_LEN(ids));

		/* the engine's stream begins after the prompt's "<|start|>assistant" */
		if (n >= 2 && ids[0] == 200006 && ids[1] == 173781)
			skip = 2;
		for (int unparse = 0; unparse < 2; unparse++) {
			struct s_acc a;
			char what[160];

			s_acc_init(&a, true);
			s_feed_ids(&a, t, ids + skip, n - skip, unparse);
			snprintf(what, sizeof(what), "oracle ids case %zu (unparse_special %d)", c,
				 unparse);
			fails += s_check(what, &a, s_oracle[c].want);
			ns_harmony_destroy(&a.h);
		}
	}
	/* "commentary" is two ordinary tokens in the real vocabulary */
	{
		int32_t ids[64];
		size_t n = s_oracle_ids(jsonl, s_oracle[1].text_json, ids, NS_ARRAY_LEN(ids));

		NS_EXPECT(fails, n > 4 && ids[2] == 200005 && ids[3] != 200008 && ids[4] != 200008,
			  "the channel name should span two tokens");
	}
	free(jsonl);
	ns_tok_destroy(&t);
	return fails;
}

/* The tiny gpt-oss model's vocabulary: channel names are several tokens each. */
static int s_tiny_vocab(void)
{
	static const char text[] =
		"<|channel|>analysis<|message|>We need to think.<|end|><|start|>assistant"
		"<|channel|>commentary to=functions.x <|constrain|>json<|message|>{\"a\":1}<|call|>"
		"<|start|>assistant<|channel|>final<|message|>Done: 4.<|return|>";
	static const char want[] =
		"|analysis:We need to think.|commentary:{\"a\":1}|final:Done: 4.";
	struct ns_tok *t = s_tok("tiny/tiny-gpt-oss-F32.gguf");
	int32_t *ids = NULL, *word = NULL;
	size_t n = 0, nw = 0;
	int fails = 0;

	NS_REQUIRE(ns_tok_encode(t, "analysis", 8, false, false, &word, &nw) == 0, "encode");
	NS_EXPECT(fails, nw > 1, "'analysis' is %zu token(s) in the tiny vocabulary", nw);
	free(word);
	NS_REQUIRE(ns_tok_encode(t, text, strlen(text), false, true, &ids, &n) == 0, "encode");
	for (int unparse = 0; unparse < 2; unparse++) {
		struct s_acc a;

		s_acc_init(&a, true);
		s_feed_ids(&a, t, ids, n, unparse);
		fails += s_check(unparse ? "tiny vocab (unparse)" : "tiny vocab", &a, want);
		ns_harmony_destroy(&a.h);
	}
	/* cut after every token (-n ending anywhere): the events are a prefix of the whole
	 * stream's, header text never shows; this vocabulary has no <|call|> token, so that
	 * marker arrives as six text tokens and a cut inside it leaves its start as text */
	for (size_t k = 0; k <= n; k++) {
		static const char *const partial[] = { "<|call|", "<|call", "<|cal", "<|ca", "<|c",
						       "<|", "<" };
		struct s_acc a;
		size_t l;

		s_acc_init(&a, true);
		s_feed_ids(&a, t, ids, k, false);
		l = strlen(a.out);
		for (size_t i = 0; i < NS_ARRAY_LEN(partial); i++) {
			size_t pl = strlen(partial[i]);

			if (l >= pl && !strcmp(a.out + l - pl, partial[i])) {
				l -= pl;
				break;
			}
		}
		NS_EXPECT(fails, !strncmp(a.out, want, l) && !strstr(a.out, "assistant") &&
			  !strstr(a.out, "functions"), "after %zu of %zu tokens: '%s'", k, n,
			  a.out);
		ns_harmony_destroy(&a.h);
	}
	free(ids);
	ns_tok_destroy(&t);
	return fails;
}

int main(void)
{
	int fails = s_text_cases() + s_misc();

	if (fails) {
		fprintf(stderr, "%d failure(s)\n", fails);
		return 1;
	}
	ns_test_require_oracle();
	fails += s_oracle_vocab() + s_tiny_vocab();
	if (fails) {
		fprintf(stderr, "%d failure(s)\n", fails);
		return 1;
	}
	printf("harmony: all passed\n");
	return 0;
}
