/* nsctl - the user's command: describes models, starts and supervises the pipeline. */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "ns_util.h"

struct command {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *summary;
};

static const struct command s_commands[] = {
	{ "info", cmd_info, "describe a GGUF model (single or split): nsctl info MODEL [--json]" },
	{ "logits", cmd_logits, "logits of every position: nsctl logits MODEL --tokens 1,2,3 -o FILE" },
	{ "bench", cmd_bench, "llama-bench style speed table with the drive roofline: nsctl bench MODEL [-p 512] [-n 128] [-r 5] [--budgets LIST]" },
	{ "run", cmd_run, "generate text through the streaming pipeline: nsctl run MODEL -p TEXT [-n N] [--chat]" },
	{ "serve", cmd_serve, "OpenAI-compatible server: nsctl serve MODEL [--host 127.0.0.1] [--port 8080] [--parallel N]" },
	{ "ps", cmd_ps, "live sessions, their processes, pids and counters: nsctl ps [--json]" },
	{ "mkmodel", cmd_mkmodel, "write a random-weight model: nsctl mkmodel --preset NAME -o FILE" },
	{ "plan", cmd_plan, "residency plan under budgets: nsctl plan MODEL [--ram-budget B] [--mem-budget B] [-c CTX] [--json]" },
	{ "image", cmd_image, "an image through the vision tower: nsctl image MODEL_OR_MMPROJ --image FILE [-o FILE] [--max-patches N]" },
	{ "tensor", cmd_tensor, "dequantize a tensor to raw float32: nsctl tensor MODEL NAME [--rows A:B] -o FILE" },
	{ "tokenize", cmd_tokenize, "text to ids: nsctl tokenize MODEL [--json] [--chat] [--] TEXT" },
	{ "detokenize", cmd_detokenize, "token ids to text: nsctl detokenize MODEL IDS" },
	{ "pull", cmd_pull, "a model from the Hugging Face hub: nsctl pull REPO[:QUANT|/FILE] [-o DIR]" },
};

static void s_usage(FILE *f)
{
	fprintf(f, "usage: nsctl COMMAND [ARGS]   (nsctl COMMAND --help: its options)\n"
		"       nsctl -v | --version\n\ncommands:\n");
	for (size_t i = 0; i < NS_ARRAY_LEN(s_commands); i++)
		fprintf(f, "  %-11s %s\n", s_commands[i].name, s_commands[i].summary);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		s_usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
		s_usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "-v") || !strcmp(argv[1], "--version")) {
		printf("nsctl (neurostream) %s\n", NS_VERSION);
		return 0;
	}
	for (size_t i = 0; i < NS_ARRAY_LEN(s_commands); i++)
		if (!strcmp(argv[1], s_commands[i].name))
			return s_commands[i].fn(argc - 1, argv + 1);
	fprintf(stderr, "nsctl: unknown command '%s' (try nsctl --help)\n", argv[1]);
	return 2;
}
