/* test_chat_lcpp - the llama.cpp built-in chat families (chat_lcpp.h): detection from template
 * text and rendering.
 *
 * Oracle: llama.cpp's own expected renderings of its test conversation (tests/test-chat-
 * template.cpp, the "expected_output" of each family's case: system "You are a helpful
 * assistant", user "Hello", assistant "Hi there", user "Who are you", assistant
 * "   I am an assistant   ", user "Another question"), transcribed by hand into this file.
 * Zephyr and DeepSeek-V3 have no case there: their strings are derived by hand from llama.cpp's
 * renderer (src/llama-chat.cpp). ../shared/oracle holds no real Jinja template of these
 * families (its hf/ templates are one toy <|role|> template, which must stay unrecognised), so
 * no jinja2 rendering is possible here.
 *
 * Detection: a short template text holding the substrings llama.cpp tests for each family
 * (written for this test, not copied from a model) must give that family; the family's name
 * given as the text too (llama.cpp accepts a name there). Exit 0 pass, 1 fail. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat.h"
#include "ns_util.h"

#define DS(x) "<\xef\xbd\x9c" x "\xef\xbd\x9c>"      /* DeepSeek's <｜x｜> */
#define EOS_DS DS("end\xe2\x96\x81of\xe2\x96\x81sentence") /* <｜end▁of▁sentence｜> */

static const struct ns_chat_msg s_conv[] = {
	{ "system", "You are a helpful assistant", NULL },
	{ "user", "Hello", NULL },
	{ "assistant", "Hi there", NULL },
	{ "user", "Who are you", NULL },
	{ "assistant", "   I am an assistant   ", NULL },
	{ "user", "Another question", NULL },
};

struct s_case {
	const char *family; /* chat.h name */
	const char *tpl;    /* a template text with the family's markers; NULL: by name only */
	const char *want;   /* rendering of s_conv with add_generation_prompt */
};

static const struct s_case s_cases[] = {
	{ "chatml", "{{ '<|im_start|>' + m.role + '\\n' }}",
	  "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n<|im_start|>user\nHello"
	  "<|im_end|>\n<|im_start|>assistant\nHi there<|im_end|>\n<|im_start|>user\nWho are you"
	  "<|im_end|>\n<|im_start|>assistant\n   I am an assistant   <|im_end|>\n<|im_start|>user\n"
	  "Another question<|im_end|>\n<|im_start|>assistant\n" },
	{ "phi4", "{{'<|im_start|>user<|im_sep|>'}}",
	  "<|im_start|>system<|im_sep|>You are a helpful assistant<|im_end|><|im_start|>user"
	  "<|im_sep|>Hello<|im_end|><|im_start|>assistant<|im_sep|>Hi there<|im_end|><|im_start|>"
	  "user<|im_sep|>Who are you<|im_end|><|im_start|>assistant<|im_sep|>   I am an assistant"
	  "   <|im_end|><|im_start|>user<|im_sep|>Another question<|im_end|><|im_start|>assistant"
	  "<|im_sep|>" },
	{ "llama2", "{{ '[INST] ' + m.content + ' [/INST]' }}",
	  "[INST] You are a helpful assistant\nHello [/INST]Hi there</s>[INST] Who are you [/INST]"
	  "   I am an assistant   </s>[INST] Another question [/INST]" },
	{ "llama2-sys", "{{ '[INST] <<SYS>>\\n' }}",
	  "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]Hi there</s>"
	  "[INST] Who are you [/INST]   I am an assistant   </s>[INST] Another question [/INST]" },
	{ "llama2-sys-bos", "{{ bos_token + '[INST] ' }}{{ '<<SYS>>' }}",
	  "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]Hi there</s><s>"
	  "[INST] Who are you [/INST]   I am an assistant   </s><s>[INST] Another question "
	  "[/INST]" },
	{ "llama2-sys-strip", "{{ '[INST] ' + content.strip() }}{{ '<<SYS>>' }}",
	  "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]Hi there</s>"
	  "[INST] Who are you [/INST]I am an assistant</s>[INST] Another question [/INST]" },
	{ "mistral-v1", "{{- ' [INST] ' + system_message }}",
	  " [INST] You are a helpful assistant\n\nHello [/INST] Hi there</s> [INST] Who are you "
	  "[/INST]    I am an assistant   </s> [INST] Another question [/INST]" },
	{ "mistral-v3", "{{- '[AVAILABLE_TOOLS] [' }}{{- '[INST]' }}",
	  "[INST] You are a helpful assistant\n\nHello[/INST] Hi there</s>[INST] Who are you"
	  "[/INST] I am an assistant</s>[INST] Another question[/INST]" },
	{ "mistral-v3-tekken", "{{- \"[AVAILABLE_TOOLS][\" }}{{- \"[INST]\" }}",
	  "[INST]You are a helpful assistant\n\nHello[/INST]Hi there</s>[INST]Who are you[/INST]"
	  "   I am an assistant   </s>[INST]Another question[/INST]" },
	{ "mistral-v7", "{{ '[SYSTEM_PROMPT] ' }}{{ '[INST] ' }}",
	  "[SYSTEM_PROMPT] You are a helpful assistant[/SYSTEM_PROMPT][INST] Hello[/INST] Hi there"
	  "</s>[INST] Who are you[/INST]    I am an assistant   </s>[INST] Another question"
	  "[/INST]" },
	{ "mistral-v7-tekken", NULL,
	  "[SYSTEM_PROMPT]You are a helpful assistant[/SYSTEM_PROMPT][INST]Hello[/INST]Hi there"
	  "</s>[INST]Who are you[/INST]   I am an assistant   </s>[INST]Another question[/INST]" },
	{ "phi3", "{{'<|user|>\\n'}}{{'<|end|>\\n<|assistant|>\\n'}}",
	  "<|system|>\nYou are a helpful assistant<|end|>\n<|user|>\nHello<|end|>\n<|assistant|>\n"
	  "Hi there<|end|>\n<|user|>\nWho are you<|end|>\n<|assistant|>\n   I am an assistant   "
	  "<|end|>\n<|user|>\nAnother question<|end|>\n<|assistant|>\n" },
	{ "zephyr", "{{ '<|user|>\\n' + c + '<|endoftext|>' }}",
	  "<|system|>\nYou are a helpful assistant<|endoftext|>\n<|user|>\nHello<|endoftext|>\n"
	  "<|assistant|>\nHi there<|endoftext|>\n<|user|>\nWho are you<|endoftext|>\n<|assistant|>"
	  "\n   I am an assistant   <|endoftext|>\n<|user|>\nAnother question<|endoftext|>\n"
	  "<|assistant|>\n" },
	{ "vicuna", "{{-'USER: ' + c + '\\n'-}}{{-'ASSISTANT: ' + c -}}",
	  "You are a helpful assistant\n\nUSER: Hello\nASSISTANT: Hi there</s>\nUSER: Who are you\n"
	  "ASSISTANT:    I am an assistant   </s>\nUSER: Another question\nASSISTANT:" },
	{ "vicuna-orca", "{{-'SYSTEM: ' + c}}{{-'USER: ' + c}}{{-'ASSISTANT: ' + c}}",
	  "SYSTEM: You are a helpful assistant\nUSER: Hello\nASSISTANT: Hi there</s>\nUSER: Who "
	  "are you\nASSISTANT:    I am an assistant   </s>\nUSER: Another question\nASSISTANT:" },
	{ "deepseek", "{{'### Instruction:\\n' + c}}{{'\\n<|EOT|>\\n'}}",
	  "You are a helpful assistant### Instruction:\nHello\n### Response:\nHi there\n<|EOT|>\n"
	  "### Instruction:\nWho are you\n### Response:\n   I am an assistant   \n<|EOT|>\n"
	  "### Instruction:\nAnother question\n### Response:\n" },
	{ "deepseek2", "{{ 'Assistant: ' + message['content'] + eos_token }}",
	  "You are a helpful assistant\n\nUser: Hello\n\nAssistant: Hi there" EOS_DS "User: Who are "
	  "you\n\nAssistant:    I am an assistant   " EOS_DS "User: Another question\n\nAssistant:" },
	{ "deepseek3", "{{'" DS("User") "'}}{{'" DS("Assistant") "' + c + '" EOS_DS "'}}",
	  "You are a helpful assistant\n\n" DS("User") "Hello" DS("Assistant") "Hi there" EOS_DS
	  DS("User") "Who are you" DS("Assistant") "   I am an assistant   " EOS_DS DS("User")
	  "Another question" DS("Assistant") },
	{ "command-r", "{{ '<|START_OF_TURN_TOKEN|><|USER_TOKEN|>' + c }}",
	  "<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>You are a helpful assistant<|END_OF_TURN_TOKEN|>"
	  "<|START_OF_TURN_TOKEN|><|USER_TOKEN|>Hello<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|>"
	  "<|CHATBOT_TOKEN|>Hi there<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>Who "
	  "are you<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>I am an assistant"
	  "<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>Another question"
	  "<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>" },
};

/* Templates that must keep their own families (chat.c's, ahead of llama.cpp's list) or stay
 * unknown. */
static const struct {
	const char *tpl, *family;
} s_keep[] = {
	{ "{{ '<|im_start|>' }}{{ '<think>' }}{{ '</think>' }}", "qwen3" },
	{ "{{ '<|start_header_id|>' }}{{ '<|eot_id|>' }}", "llama3" },
	{ "{{ '<start_of_turn>' }}{{ '<end_of_turn>' }}", "gemma" },
	{ "{{ '<|im_start|>' }}{{ '<end_of_utterance>' }}", "unknown" }, /* SmolVLM */
	{ "{{ '<|' + message['role'] + '|>\\n' + message['content'] + '\\n' }}", "unknown" },
	{ "Hello {{ x }}", "unknown" },
};

int main(void)
{
	int fails = 0;

	for (size_t i = 0; i < NS_ARRAY_LEN(s_cases); i++) {
		const struct s_case *c = &s_cases[i];
		enum ns_chat_family f = ns_chat_family_from_name(c->family);
		char err[256], *got = NULL;

		if (f == NS_CHAT_UNKNOWN || strcmp(ns_chat_family_name(f), c->family) ||
		    ns_chat_family_detect(c->family) != f) {
			fprintf(stderr, "FAIL %s: not a family name\n", c->family);
			fails++;
			continue;
		}
		if (c->tpl && ns_chat_family_detect(c->tpl) != f) {
			fprintf(stderr, "FAIL %s: template detected as %s\n", c->family,
				ns_chat_family_name(ns_chat_family_detect(c->tpl)));
			fails++;
		}
		if (!ns_chat_family_adds_bos(f)) {
			fprintf(stderr, "FAIL %s: rendered without BOS text, so encoded with BOS\n",
				c->family);
			fails++;
		}
		if (ns_chat_render(f, s_conv, NS_ARRAY_LEN(s_conv), true, NULL, &got, err,
				   sizeof(err))) {
			fprintf(stderr, "FAIL %s: %s\n", c->family, err);
			fails++;
			continue;
		}
		if (strcmp(got, c->want)) {
			fprintf(stderr, "FAIL %s: rendering differs\n--- want\n%s\n--- got\n%s\n---\n",
				c->family, c->want, got);
			fails++;
		} else {
			printf("ok   %-18s %zu bytes\n", c->family, strlen(got));
		}
		free(got);
	}
	for (size_t i = 0; i < NS_ARRAY_LEN(s_keep); i++) {
		enum ns_chat_family f = ns_chat_family_detect(s_keep[i].tpl);

		if (strcmp(ns_chat_family_name(f), s_keep[i].family)) {
			fprintf(stderr, "FAIL '%s' detected as %s, want %s\n", s_keep[i].tpl,
				ns_chat_family_name(f), s_keep[i].family);
			fails++;
		}
		if (f != NS_CHAT_UNKNOWN && ns_chat_family_adds_bos(f)) {
			fprintf(stderr, "FAIL %s: its template prints BOS; encoded with BOS again\n",
				s_keep[i].family);
			fails++;
		}
	}
	printf("%zu llama.cpp families, %d failures\n", NS_ARRAY_LEN(s_cases), fails);
	return fails ? 1 : 0;
}
