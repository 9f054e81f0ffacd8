/* tok_pre.c - the pre-tokenizers named by tokenizer.ggml.pre: split patterns and the
 * family's flags. Patterns are the ones of each family's tokenizer.json (PCRE2 syntax), with
 * two deliberate spellings:
 *  - `\s` is the explicit Unicode White_Space set (PCRE2's \s adds U+180E);
 *  - `(?i:'s|'t|...)` is written with explicit case pairs, so no Unicode case folding
 *    ("'ſ", Kelvin sign) can join a contraction.
 * The list of names and which family each one belongs to follows llama.cpp's vocabulary
 * loader, so a GGUF converted by its tools means the same thing here. */
#include <string.h>

#include "tok_internal.h"

#define WS "\\t\\n\\x{0B}\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}" \
	   "\\x{202F}\\x{205F}\\x{3000}"
#define S "[" WS "]"
#define NS "[^" WS "]"
#define CONTR "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
#define WS_TAIL S "*[\\r\\n]+|" S "+(?!" NS ")|" S "+"
#define GPT2_CORE "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" WS "\\p{L}\\p{N}]+|" \
		  S "+(?!" NS ")"
#define UPPER "[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]"
#define LOWER "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]"

static const struct ns_tok_pre s_gpt2 = {
	.name = "gpt-2",
	.regex = { GPT2_CORE "|" S "+" },
	.clean_spaces = true,
};

static const struct ns_tok_pre s_default = {
	.name = "default",
	.regex = { "[\\p{P}\\$\\+<=>\\^~\\|]+", GPT2_CORE, "\\p{N}+", "[0-9][0-9][0-9]" },
	.clean_spaces = true,
};

static const struct ns_tok_pre s_llama3 = {
	.name = "llama3",
	.regex = { CONTR "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^" WS
		   "\\p{L}\\p{N}]+[\\r\\n]*|" WS_TAIL },
	.clean_spaces = true,
	.ignore_merges = true,
	.add_bos = true,
};

/* smaug-bpe, dbrx: the llama3 pattern without llama3's flags. */
static const struct ns_tok_pre s_smaug = {
	.name = "smaug-bpe",
	.regex = { CONTR "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^" WS
		   "\\p{L}\\p{N}]+[\\r\\n]*|" WS_TAIL },
	.clean_spaces = true,
};

static const struct ns_tok_pre s_qwen2 = {
	.name = "qwen2",
	.regex = { CONTR "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^" WS
		   "\\p{L}\\p{N}]+[\\r\\n]*|" WS_TAIL },
	.nfc = true,
};

/* Qwen3.5's tokenizer does not normalize (its pattern keeps combining marks with letters
 * instead); llama.cpp's qwen35 test pairs (HF ids) have decomposed text stay decomposed. */
static const struct ns_tok_pre s_qwen35 = {
	.name = "qwen35",
	.regex = { CONTR "|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^" WS
		   "\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|" WS_TAIL },
};

static const struct ns_tok_pre s_gpt4o = {
	.name = "gpt-4o",
	.regex = { "[^\\r\\n\\p{L}\\p{N}]?" UPPER "*" LOWER "+" CONTR "?|[^\\r\\n\\p{L}\\p{N}]?"
		   UPPER "+" LOWER "*" CONTR "?|\\p{N}{1,3}| ?[^" WS "\\p{L}\\p{N}]+[\\r\\n/]*|"
		   WS_TAIL },
};

static const struct ns_tok_pre s_tekken = {
	.name = "tekken",
	.regex = { "[^\\r\\n\\p{L}\\p{N}]?" UPPER "*" LOWER "+|[^\\r\\n\\p{L}\\p{N}]?" UPPER "+"
		   LOWER "*|\\p{N}| ?[^" WS "\\p{L}\\p{N}]+[\\r\\n/]*|" WS_TAIL },
	.ignore_merges = true,
	.add_bos = true,
};

static const struct ns_tok_pre s_starcoder = {
	.name = "starcoder",
	.regex = { "\\p{N}", GPT2_CORE },
	.clean_spaces = true,
};

static const struct ns_tok_pre s_starcoder_noclean = {
	.name = "command-r",
	.regex = { "\\p{N}", GPT2_CORE },
};

static const struct ns_tok_pre s_falcon = {
	.name = "falcon",
	.regex = { "[\\p{P}\\$\\+<=>\\^~\\|`]+", GPT2_CORE, "[0-9][0-9][0-9]" },
	.clean_spaces = true,
};

/* gemma4: spaces become "▁" before splitting; only newlines split. */
static const struct ns_tok_pre s_gemma4 = {
	.name = "gemma4",
	.regex = { "[^\\n]+|[\\n]+" },
};

static const struct {
	const char *name;
	const struct ns_tok_pre *pre;
} s_names[] = {
	{ "default", &s_default },
	{ "gpt-2", &s_gpt2 },
	{ "phi-2", &s_gpt2 },
	{ "mpt", &s_gpt2 },
	{ "olmo", &s_gpt2 },
	{ "jais", &s_gpt2 },
	{ "exaone4", &s_gpt2 },
	{ "llama3", &s_llama3 },
	{ "llama-v3", &s_llama3 },
	{ "llama-bpe", &s_llama3 },
	{ "falcon3", &s_llama3 },
	{ "falcon-h1", &s_llama3 },
	{ "pixtral", &s_llama3 },
	{ "lfm2", &s_llama3 },
	{ "smaug-bpe", &s_smaug },
	{ "dbrx", &s_smaug },
	{ "qwen2", &s_qwen2 },
	{ "deepseek-r1-qwen", &s_qwen2 },
	{ "megrez", &s_qwen2 },
	{ "qwen35", &s_qwen35 },
	{ "gpt-4o", &s_gpt4o },
	{ "llama4", &s_gpt4o },
	{ "tekken", &s_tekken },
	{ "starcoder", &s_starcoder },
	{ "refact", &s_starcoder },
	{ "codeshell", &s_starcoder },
	{ "exaone", &s_starcoder },
	{ "minerva-7b", &s_starcoder },
	{ "command-r", &s_starcoder_noclean },
	{ "smollm", &s_starcoder_noclean },
	{ "falcon", &s_falcon },
	{ "gemma4", &s_gemma4 },
};

const struct ns_tok_pre *ns_tok_pre_find(const char *name)
{
	for (size_t i = 0; i < sizeof(s_names) / sizeof(s_names[0]); i++)
		if (!strcmp(s_names[i].name, name))
			return s_names[i].pre;
	return NULL;
}
