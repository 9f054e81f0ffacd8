/* serve_model SRC DST FAMILY - a copy of an oracle model with a chat template of FAMILY
 * (qwen3, gptoss, llama3): the oracle's tiny models carry none, and nsctl serve's chat
 * endpoint needs one. The template text only has to be recognised (modelfile/tokenizer/chat.h
 * renders each family in C). Exit 0, or 1 with a line. */
#include <string.h>

#include "rt_template.h"

int main(int argc, char **argv)
{
	static const struct {
		const char *family, *tpl;
	} tpls[] = {
		{ "qwen3", "{# qwen3 #}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>"
			   "{% if enable_thinking %}<think>\n\n</think>\n\n{% endif %}" },
		{ "gptoss", "{# harmony #}<|start|>{{ m.role }}<|channel|>{{ m.channel }}"
			    "<|message|>{{ m.content }}<|end|>" },
		{ "llama3", "{# llama3 #}<|start_header_id|>{{ m.role }}<|end_header_id|>\n\n"
			    "{{ m.content }}<|eot_id|>" },
	};

	if (argc != 4) {
		fprintf(stderr, "usage: serve_model SRC DST qwen3|gptoss|llama3\n");
		return 1;
	}
	for (size_t i = 0; i < sizeof(tpls) / sizeof(tpls[0]); i++)
		if (!strcmp(argv[3], tpls[i].family)) {
			rt_copy_with_template(argv[1], argv[2], tpls[i].tpl);
			return 0;
		}
	fprintf(stderr, "serve_model: unknown family '%s'\n", argv[3]);
	return 1;
}
