/* chat.h - chat prompt rendering for the model families we support.
 *
 * A GGUF carries its chat template as Jinja text (tokenizer.chat_template). We do not run
 * Jinja: we recognise the family from the template text and render that family's format in
 * C, byte for byte as the template renders it (checked against Python jinja2 renderings of
 * the real templates). A template we do not recognise is an error, never a guess. */
#ifndef NS_CHAT_H
#define NS_CHAT_H

#include <stdbool.h>
#include <stddef.h>

enum ns_chat_family {
	NS_CHAT_UNKNOWN = 0,
	NS_CHAT_QWEN3,  /* <|im_start|> ChatML with <think> blocks, enable_thinking */
	NS_CHAT_LLAMA3, /* <|start_header_id|> ... <|eot_id|> */
	NS_CHAT_GEMMA,  /* <start_of_turn>user ... <end_of_turn> (Gemma 2/3) */
	NS_CHAT_GPTOSS, /* OpenAI harmony: <|start|>role<|channel|>...<|message|>...<|end|> */
	NS_CHAT_LLAMA31, /* Llama 3.1/3.3: Llama 3 with the "Cutting Knowledge Date" system
			    header and the template's fixed "Today Date: 26 Jul 2024" */
	NS_CHAT_LLAMA32, /* Llama 3.2: the same header with today's date (strftime_now) */
	NS_CHAT_GEMMA4, /* <|turn>user ... <turn|> (Gemma 4): the system turn first, thinking only
			 * when asked (think_opt_in) */
	NS_CHAT_QWEN35, /* Qwen3.5: ChatML with trimmed messages; the generation prompt opens the
			 * think block unless enable_thinking is false */
	/* llama.cpp's built-in families (chat_lcpp.h), rendered as llama.cpp renders them,
	 * without BOS text (ns_chat_family_adds_bos) */
	NS_CHAT_CHATML,            /* <|im_start|>role\n...<|im_end|>\n */
	NS_CHAT_PHI4,              /* ChatML with <|im_sep|> */
	NS_CHAT_MISTRAL_V1,        /* " [INST] ... [/INST]" */
	NS_CHAT_MISTRAL_V3,        /* "[INST] ...[/INST] answer</s>", answers trimmed */
	NS_CHAT_MISTRAL_V3_TEKKEN, /* "[INST]...[/INST]answer</s>" */
	NS_CHAT_MISTRAL_V7,        /* [SYSTEM_PROMPT] ...[/SYSTEM_PROMPT][INST] ...[/INST] */
	NS_CHAT_MISTRAL_V7_TEKKEN, /* v7 without the spaces (by name only) */
	NS_CHAT_LLAMA2,            /* "[INST] ... [/INST]", system text without <<SYS>> */
	NS_CHAT_LLAMA2_SYS,        /* with <<SYS>>\n...\n<</SYS>>\n\n */
	NS_CHAT_LLAMA2_SYS_BOS,    /* and <s> before each later [INST] */
	NS_CHAT_LLAMA2_SYS_STRIP,  /* and every message stripped */
	NS_CHAT_PHI3,              /* <|role|>\n...<|end|>\n */
	NS_CHAT_ZEPHYR,            /* <|role|>\n...<|endoftext|>\n */
	NS_CHAT_VICUNA,            /* USER: ...\nASSISTANT: ...</s>\n */
	NS_CHAT_VICUNA_ORCA,       /* with SYSTEM: */
	NS_CHAT_DEEPSEEK,          /* deepseek-coder: ### Instruction: / ### Response: */
	NS_CHAT_DEEPSEEK2,         /* User: / Assistant: */
	NS_CHAT_DEEPSEEK3,         /* <｜User｜> / <｜Assistant｜> (DeepSeek-V3, R1) */
	NS_CHAT_COMMAND_R,         /* <|START_OF_TURN_TOKEN|><|USER_TOKEN|> ... */
};

struct ns_chat_msg {
	const char *role;      /* "system", "developer", "user", "assistant", "tool" */
	const char *content;
	const char *reasoning; /* assistant's thinking (Qwen3 reasoning_content); NULL = none */
};

struct ns_chat_opts {
	bool enable_thinking;         /* Qwen3, Qwen3.5: false adds the empty <think></think>
				       * block (Qwen3.5: true opens the block, "<think>\n") */
	bool think_opt_in;            /* Gemma 4, whose template thinks only when asked: true
					 puts <|think|> in the system turn; false (the default)
					 closes an empty thought channel before the reply */
	const char *date;             /* "YYYY-MM-DD" printed by templates that print today's
					 date (gpt-oss, Llama 3.2); NULL = today (UTC) */
	const char *reasoning_effort; /* gpt-oss: "low" | "medium" | "high"; NULL = "medium" */
	const char *bos_text;         /* the vocabulary's BOS text for templates that print it
					 (Llama 3, Gemma); NULL = the family's usual one */
};

/* Family of a chat template text (NULL or unrecognised: NS_CHAT_UNKNOWN); also a family's
 * name given as the text (as llama.cpp accepts a template name there). */
enum ns_chat_family ns_chat_family_detect(const char *template_text);
const char *ns_chat_family_name(enum ns_chat_family f);
/* Family by name ("qwen3", "llama3", "gemma", "gptoss", "llama31", "llama32");
 * NS_CHAT_UNKNOWN if none. */
enum ns_chat_family ns_chat_family_from_name(const char *name);
/* True for the families rendered without the BOS text (chat_lcpp.h): the caller encodes the
 * rendering with the vocabulary's add-BOS flag, as llama.cpp does. */
bool ns_chat_family_adds_bos(enum ns_chat_family f);

/* Render messages as the family's template does with add_generation_prompt. On success *out
 * is a malloc'd NUL-terminated string the caller frees; returns 0. Returns -EINVAL with one
 * line in err for input the template rejects (unknown family, bad role order, tool messages,
 * a date that is not a real YYYY-MM-DD day), -ENOMEM on allocation failure. */
int ns_chat_render(enum ns_chat_family f, const struct ns_chat_msg *msgs, size_t n,
		   bool add_generation_prompt, const struct ns_chat_opts *opts, char **out,
		   char *err, size_t errlen);

#endif
