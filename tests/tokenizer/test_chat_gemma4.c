/* test_chat_gemma4 - the Gemma 4 chat rendering (modelfile/tokenizer/chat.h, NS_CHAT_GEMMA4)
 * against renderings worked out by hand from Google's Gemma 4 chat template
 * (google/gemma-4-*-it chat_template.jinja; llama.cpp keeps a copy as
 * models/templates/google-gemma-4-31B-it.jinja): BOS; a system turn when the first message is
 * system/developer or thinking is asked for, with "<|think|>" first; each message as
 * "<|turn>ROLE\n" + trimmed content + "<turn|>\n", assistant as "model", consecutive assistant
 * messages in one turn, an earlier model turn's "<|channel>...<channel|>" thinking dropped;
 * the generation prompt "<|turn>model\n", followed by an empty thought channel unless
 * thinking is on (the template's default is off). The oracle has no Gemma 4 rendering (its
 * gemma4_e GGUF carries a generic template), so these strings are the reference. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat.h"
#include "ns_util.h"

static int s_fail;

static void s_case(const char *name, const struct ns_chat_msg *m, size_t n, bool think,
		   const char *want)
{
	const struct ns_chat_opts o = { .enable_thinking = true, .think_opt_in = think };
	char err[NS_ERR_LEN], *got = NULL;

	if (ns_chat_render(NS_CHAT_GEMMA4, m, n, true, &o, &got, err, sizeof(err)) < 0) {
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

int main(void)
{
	const struct ns_chat_msg user[] = { { "user", "  Hello there \n", NULL } };
	const struct ns_chat_msg sys[] = { { "system", "Be brief.\n", NULL },
					   { "user", "Hi", NULL } };
	const struct ns_chat_msg multi[] = {
		{ "user", "What is 2+2?", NULL },
		{ "assistant", "<|channel>thought\nadd them<channel|>  4 ", NULL },
		{ "assistant", "Anything else?", NULL },
		{ "user", "No", NULL },
	};
	const char *tpl = "{{ bos_token }}{% for m in messages %}<|turn>{{ m['role'] }}\n"
			  "{{ m['content'] | trim }}<turn|>\n{% endfor %}";

	s_case("user, thinking off (default)", user, 1, false,
	       "<bos><|turn>user\nHello there<turn|>\n<|turn>model\n<|channel>thought\n<channel|>");
	s_case("user, thinking on", user, 1, true,
	       "<bos><|turn>system\n<|think|>\n<turn|>\n<|turn>user\nHello there<turn|>\n"
	       "<|turn>model\n");
	s_case("system folded into the system turn", sys, 2, false,
	       "<bos><|turn>system\nBe brief.<turn|>\n<|turn>user\nHi<turn|>\n"
	       "<|turn>model\n<|channel>thought\n<channel|>");
	s_case("system and thinking", sys, 2, true,
	       "<bos><|turn>system\n<|think|>\nBe brief.<turn|>\n<|turn>user\nHi<turn|>\n"
	       "<|turn>model\n");
	s_case("multi-turn: thinking stripped, assistant turns joined", multi, 4, false,
	       "<bos><|turn>user\nWhat is 2+2?<turn|>\n<|turn>model\n4<turn|>\n"
	       "Anything else?<turn|>\n<|turn>user\nNo<turn|>\n"
	       "<|turn>model\n<|channel>thought\n<channel|>");
	if (ns_chat_family_detect(tpl) != NS_CHAT_GEMMA4 ||
	    strcmp(ns_chat_family_name(NS_CHAT_GEMMA4), "gemma4") ||
	    ns_chat_family_from_name("gemma4") != NS_CHAT_GEMMA4) {
		printf("FAIL detection / name of the gemma4 family\n");
		s_fail = 1;
	}
	return s_fail;
}
