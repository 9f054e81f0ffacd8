/* test_chat_qwen35 - the Qwen3.5 chat rendering (modelfile/tokenizer/chat.h, NS_CHAT_QWEN35)
 * against renderings of the Qwen3.5 releases' chat_template.jinja (the text-only part: no
 * tools list, string contents) by Python jinja2 3.1 with trim_blocks and lstrip_blocks, as
 * transformers' apply_chat_template renders it. The oracle has no Qwen3.5 rendering (its
 * qwen3_5 checkpoints carry a generic template), so these strings are the reference: every
 * content trimmed, the generation prompt opening the think block unless enable_thinking is
 * false, an assistant turn after the last user query with its (possibly empty) think block,
 * one before it without, reasoning taken out of the content, tool results joined in one
 * user turn, and the template's three refusals. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat.h"
#include "ns_util.h"

static int s_fail;

static void s_case(const char *name, const struct ns_chat_msg *m, size_t n, bool gen,
		   bool think, const char *want)
{
	const struct ns_chat_opts o = { .enable_thinking = think };
	char err[NS_ERR_LEN], *got = NULL;
	int rc = ns_chat_render(NS_CHAT_QWEN35, m, n, gen, &o, &got, err, sizeof(err));

	if (!want) { /* the template raises */
		if (rc == 0) {
			printf("FAIL %s: rendered '%s', want a refusal\n", name, got);
			s_fail = 1;
		} else {
			printf("ok   %s (%s)\n", name, err);
		}
		free(got);
		return;
	}
	if (rc < 0) {
		printf("FAIL %s: %s\n", name, err);
		s_fail = 1;
		return;
	}
	if (strcmp(got, want)) {
		printf("FAIL %s:\n got: '%s'\nwant: '%s'\n", name, got, want);
		s_fail = 1;
	} else {
		printf("ok   %s\n", name);
	}
	free(got);
}

#define U(t) { .role = "user", .content = (t) }
#define A(t) { .role = "assistant", .content = (t) }
#define S(t) { .role = "system", .content = (t) }
#define T(t) { .role = "tool", .content = (t) }
#define N(a) NS_ARRAY_LEN(a)

int main(void)
{
	const struct ns_chat_msg one[] = { U("Hi there") };
	const struct ns_chat_msg sys[] = { S("  Be brief.\n"), U("\n What is 2+2?  \n") };
	const struct ns_chat_msg hist[] = { U("A?"), A("<think>\nhmm\n</think>\n\nB."), U("C?") };
	const struct ns_chat_msg after[] = { U("A?"), A("  B. ") };
	const struct ns_chat_msg reason[] = { U("A?"),
		A("x <think>\n\n r1 \n</think>\n\ny</think>\nB.") };
	const struct ns_chat_msg given[] = { U("A?"),
		{ .role = "assistant", .content = "B.", .reasoning = "\n because \n" } };
	const struct ns_chat_msg tools[] = { U("Weather?"), A("calling"), T(" sunny "), T("20C") };
	const struct ns_chat_msg wrapped[] = { U("Q1"), A("a1"),
		U(" <tool_response>r</tool_response> ") };
	const struct ns_chat_msg no_query[] = { S("s") };
	const struct ns_chat_msg late_sys[] = { U("u"), S("s") };
	const struct ns_chat_msg dev[] = { { .role = "developer", .content = "d" }, U("u") };
	const char *tpl_gen = "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
			      "{%- if enable_thinking is defined and enable_thinking is false %}"
			      "{{- '<think>\\n\\n</think>\\n\\n' }}{%- else %}{{- '<think>\\n' }}"
			      "{%- endif %}{%- endif %}";
	const char *tpl_qwen3 = "<|im_start|>assistant\\n{%- if enable_thinking is defined and "
				"enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}";

	s_case("one user, thinking", one, N(one), true, true,
	       "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n<think>\n");
	s_case("one user, no thinking", one, N(one), true, false,
	       "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n"
	       "<think>\n\n</think>\n\n");
	s_case("system, contents trimmed", sys, N(sys), true, false,
	       "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWhat is 2+2?"
	       "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
	s_case("history: an earlier answer loses its thinking", hist, N(hist), true, true,
	       "<|im_start|>user\nA?<|im_end|>\n<|im_start|>assistant\nB.<|im_end|>\n"
	       "<|im_start|>user\nC?<|im_end|>\n<|im_start|>assistant\n<think>\n");
	s_case("after the last query: an empty think block", after, N(after), false, true,
	       "<|im_start|>user\nA?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
	       "B.<|im_end|>\n");
	s_case("after the last query: reasoning out of the content", reason, N(reason), false,
	       true, "<|im_start|>user\nA?<|im_end|>\n<|im_start|>assistant\n<think>\nr1\n"
	       "</think>\n\nB.<|im_end|>\n");
	s_case("after the last query: reasoning given", given, N(given), false, true,
	       "<|im_start|>user\nA?<|im_end|>\n<|im_start|>assistant\n<think>\nbecause\n"
	       "</think>\n\nB.<|im_end|>\n");
	s_case("tool results in one user turn", tools, N(tools), true, true,
	       "<|im_start|>user\nWeather?<|im_end|>\n<|im_start|>assistant\n<think>\n\n"
	       "</think>\n\ncalling<|im_end|>\n<|im_start|>user\n<tool_response>\nsunny\n"
	       "</tool_response>\n<tool_response>\n20C\n</tool_response><|im_end|>\n"
	       "<|im_start|>assistant\n<think>\n");
	s_case("a wrapped tool response is no query", wrapped, N(wrapped), true, false,
	       "<|im_start|>user\nQ1<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
	       "a1<|im_end|>\n<|im_start|>user\n<tool_response>r</tool_response><|im_end|>\n"
	       "<|im_start|>assistant\n<think>\n\n</think>\n\n");
	s_case("refused: no user query", no_query, N(no_query), true, true, NULL);
	s_case("refused: a system message not first", late_sys, N(late_sys), true, true, NULL);
	s_case("refused: an unknown role", dev, N(dev), true, true, NULL);

	/* detection: the generation prompt that opens the block marks Qwen3.5; Qwen3's (only
	 * the empty block) stays Qwen3; the name works as a template (--chat-template qwen35) */
	if (ns_chat_family_detect(tpl_gen) != NS_CHAT_QWEN35 ||
	    ns_chat_family_detect(tpl_qwen3) != NS_CHAT_QWEN3 ||
	    ns_chat_family_from_name("qwen35") != NS_CHAT_QWEN35 ||
	    strcmp(ns_chat_family_name(NS_CHAT_QWEN35), "qwen35")) {
		printf("FAIL detection: %s / %s\n",
		       ns_chat_family_name(ns_chat_family_detect(tpl_gen)),
		       ns_chat_family_name(ns_chat_family_detect(tpl_qwen3)));
		s_fail = 1;
	} else {
		printf("ok   detection\n");
	}
	return s_fail;
}
