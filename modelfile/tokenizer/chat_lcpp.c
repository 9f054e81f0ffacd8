/* chat_lcpp.c - the chat families of llama.cpp's built-in list (src/llama-chat.cpp) beyond
 * those chat.c renders from their Jinja templates: detected from the template text by the same
 * substrings, rendered as llama.cpp's built-in renderer writes them (no BOS text: the caller
 * encodes with the vocabulary's add-BOS flag, as llama.cpp does; ns_chat_family_adds_bos). */
#include "chat_lcpp.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ns_util.h"

static bool s_has(const char *t, const char *s)
{
	return strstr(t, s) != NULL;
}

/* The template-text tests of llama.cpp's detection, in its order, for the families here.
 * Called after chat.c's own families (Qwen3, Llama 3.x, Gemma, gpt-oss) did not match. */
enum ns_chat_family ns_chat_lcpp_detect(const char *t)
{
	if (s_has(t, "<|im_start|>"))
		return s_has(t, "<|im_sep|>") ? NS_CHAT_PHI4 :
		       s_has(t, "<end_of_utterance>") ? NS_CHAT_UNKNOWN /* SmolVLM */ :
		       NS_CHAT_CHATML;
	if (!strncmp(t, "mistral", 7) || s_has(t, "[INST]")) {
		if (s_has(t, "[SYSTEM_PROMPT]"))
			return NS_CHAT_MISTRAL_V7;
		if (s_has(t, "' [INST] ' + system_message") || s_has(t, "[AVAILABLE_TOOLS]")) {
			if (s_has(t, " [INST]"))
				return NS_CHAT_MISTRAL_V1;
			if (s_has(t, "\"[INST]\""))
				return NS_CHAT_MISTRAL_V3_TEKKEN;
			return NS_CHAT_MISTRAL_V3;
		}
		if (s_has(t, "content.strip()"))
			return NS_CHAT_LLAMA2_SYS_STRIP;
		if (s_has(t, "bos_token + '[INST]"))
			return NS_CHAT_LLAMA2_SYS_BOS;
		return s_has(t, "<<SYS>>") ? NS_CHAT_LLAMA2_SYS : NS_CHAT_LLAMA2;
	}
	if (s_has(t, "<|assistant|>") && s_has(t, "<|end|>"))
		return NS_CHAT_PHI3;
	if (s_has(t, "<|user|>") && s_has(t, "<|endoftext|>") && !s_has(t, "<|assistant|>"))
		return NS_CHAT_ZEPHYR;
	if (s_has(t, "USER: ") && s_has(t, "ASSISTANT: "))
		return s_has(t, "SYSTEM: ") ? NS_CHAT_VICUNA_ORCA : NS_CHAT_VICUNA;
	if (s_has(t, "### Instruction:") && s_has(t, "<|EOT|>"))
		return NS_CHAT_DEEPSEEK;
	if (s_has(t, "<|START_OF_TURN_TOKEN|>") && s_has(t, "<|USER_TOKEN|>"))
		return NS_CHAT_COMMAND_R;
	if (s_has(t, "'Assistant: ' + message['content'] + eos_token"))
		return NS_CHAT_DEEPSEEK2;
	if (s_has(t, "<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>") &&
	    s_has(t, "<\xef\xbd\x9c" "User\xef\xbd\x9c>") &&
	    s_has(t, "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>"))
		return NS_CHAT_DEEPSEEK3;
	return NS_CHAT_UNKNOWN;
}

bool ns_chat_family_adds_bos(enum ns_chat_family f)
{
	static const enum ns_chat_family mine[] = {
		NS_CHAT_CHATML, NS_CHAT_PHI4, NS_CHAT_MISTRAL_V1, NS_CHAT_MISTRAL_V3,
		NS_CHAT_MISTRAL_V3_TEKKEN, NS_CHAT_MISTRAL_V7, NS_CHAT_MISTRAL_V7_TEKKEN,
		NS_CHAT_LLAMA2, NS_CHAT_LLAMA2_SYS, NS_CHAT_LLAMA2_SYS_BOS, NS_CHAT_LLAMA2_SYS_STRIP,
		NS_CHAT_PHI3, NS_CHAT_ZEPHYR, NS_CHAT_VICUNA, NS_CHAT_VICUNA_ORCA, NS_CHAT_DEEPSEEK,
		NS_CHAT_DEEPSEEK2, NS_CHAT_DEEPSEEK3, NS_CHAT_COMMAND_R,
	};

	for (size_t i = 0; i < NS_ARRAY_LEN(mine); i++)
		if (f == mine[i])
			return true;
	return false;
}

/* content with leading and trailing ASCII whitespace removed (C isspace, as llama.cpp's
 * trim) */
static void s_put_ctrim(FILE *b, const char *s)
{
	const char *e = s + strlen(s);

	while (s < e && (*s == ' ' || (*s >= '\t' && *s <= '\r')))
		s++;
	while (e > s && (e[-1] == ' ' || (e[-1] >= '\t' && e[-1] <= '\r')))
		e--;
	fwrite(s, 1, (size_t)(e - s), b);
}

static bool s_is(const struct ns_chat_msg *m, const char *role)
{
	return !strcmp(m->role, role);
}

static const char *s_c(const struct ns_chat_msg *m)
{
	return m->content ? m->content : "";
}

/* Mistral v1 / v3 / v3-tekken: [INST] turns, the system text at the head of the next user
 * turn; v1 puts a space before [INST] and [/INST], v3 trims assistant text, tekken has no
 * space after [INST] and before the answer. */
static void s_mistral(FILE *b, enum ns_chat_family f, const struct ns_chat_msg *m,
		      size_t n)
{
	const char *lead = f == NS_CHAT_MISTRAL_V1 ? " " : "";
	const char *trail = f == NS_CHAT_MISTRAL_V3_TEKKEN ? "" : " ";
	bool in_turn = false;

	for (size_t i = 0; i < n; i++) {
		if (!in_turn) {
			fputs(lead, b);
			fputs("[INST]", b);
			fputs(trail, b);
			in_turn = true;
		}
		if (s_is(&m[i], "system")) {
			fputs(s_c(&m[i]), b);
			fputs("\n\n", b);
		} else if (s_is(&m[i], "user")) {
			fputs(s_c(&m[i]), b);
			fputs(lead, b);
			fputs("[/INST]", b);
		} else {
			fputs(trail, b);
			if (f == NS_CHAT_MISTRAL_V3)
				s_put_ctrim(b, s_c(&m[i]));
			else
				fputs(s_c(&m[i]), b);
			fputs("</s>", b);
			in_turn = false;
		}
	}
}

/* Llama 2 and its variants: "[INST] " opens each turn (with "<s>" before it in the -bos
 * variant, except the first), the system text in <<SYS>> (plain + "\n" where the template has
 * no system support), " [/INST]" after the user text, "</s>" after the answer. */
static void s_llama2(FILE *b, enum ns_chat_family f, const struct ns_chat_msg *m,
		     size_t n)
{
	bool in_turn = true;

	fputs("[INST] ", b);
	for (size_t i = 0; i < n; i++) {
		if (!in_turn) {
			fputs(f == NS_CHAT_LLAMA2_SYS_BOS ? "<s>[INST] " : "[INST] ", b);
			in_turn = true;
		}
		if (s_is(&m[i], "system") && f != NS_CHAT_LLAMA2) /* Llama 2 proper: no <<SYS>> */
			fputs("<<SYS>>\n", b);
		if (f == NS_CHAT_LLAMA2_SYS_STRIP)
			s_put_ctrim(b, s_c(&m[i]));
		else
			fputs(s_c(&m[i]), b);
		if (s_is(&m[i], "system")) {
			fputs(f == NS_CHAT_LLAMA2 ? "\n" : "\n<</SYS>>\n\n", b);
		} else if (s_is(&m[i], "user")) {
			fputs(" [/INST]", b);
		} else {
			fputs("</s>", b);
			in_turn = false;
		}
	}
}

/* Families whose every message is prefix + content + suffix by role, then the generation
 * prompt: {system prefix, system suffix, user prefix, user suffix, assistant prefix,
 * assistant suffix, generation prompt}. NULL prefix: that role is not rendered. */
struct s_fmt {
	enum ns_chat_family f;
	bool trim; /* content trimmed (C isspace) */
	const char *sp, *ss, *up, *us, *ap, *as, *gen;
};

#define S_DS "\xef\xbd\x9c" /* U+FF5C FULLWIDTH VERTICAL LINE of DeepSeek's tokens */
static const struct s_fmt s_fmts[] = {
	{ NS_CHAT_CHATML, false, "<|im_start|>system\n", "<|im_end|>\n", "<|im_start|>user\n",
	  "<|im_end|>\n", "<|im_start|>assistant\n", "<|im_end|>\n", "<|im_start|>assistant\n" },
	{ NS_CHAT_PHI4, false, "<|im_start|>system<|im_sep|>", "<|im_end|>",
	  "<|im_start|>user<|im_sep|>", "<|im_end|>", "<|im_start|>assistant<|im_sep|>",
	  "<|im_end|>", "<|im_start|>assistant<|im_sep|>" },
	{ NS_CHAT_PHI3, false, "<|system|>\n", "<|end|>\n", "<|user|>\n", "<|end|>\n",
	  "<|assistant|>\n", "<|end|>\n", "<|assistant|>\n" },
	{ NS_CHAT_ZEPHYR, false, "<|system|>\n", "<|endoftext|>\n", "<|user|>\n",
	  "<|endoftext|>\n", "<|assistant|>\n", "<|endoftext|>\n", "<|assistant|>\n" },
	{ NS_CHAT_VICUNA, false, "", "\n\n", "USER: ", "\n", "ASSISTANT: ", "</s>\n",
	  "ASSISTANT:" },
	{ NS_CHAT_VICUNA_ORCA, false, "SYSTEM: ", "\n", "USER: ", "\n", "ASSISTANT: ", "</s>\n",
	  "ASSISTANT:" },
	{ NS_CHAT_DEEPSEEK, false, "", "", "### Instruction:\n", "\n", "### Response:\n",
	  "\n<|EOT|>\n", "### Response:\n" },
	{ NS_CHAT_DEEPSEEK2, false, "", "\n\n", "User: ", "\n\n", "Assistant: ",
	  "<" S_DS "end\xe2\x96\x81of\xe2\x96\x81sentence" S_DS ">", "Assistant:" },
	{ NS_CHAT_DEEPSEEK3, false, "", "\n\n", "<" S_DS "User" S_DS ">", "", "<" S_DS "Assistant"
	  S_DS ">", "<" S_DS "end\xe2\x96\x81of\xe2\x96\x81sentence" S_DS ">",
	  "<" S_DS "Assistant" S_DS ">" },
	{ NS_CHAT_COMMAND_R, true, "<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>",
	  "<|END_OF_TURN_TOKEN|>", "<|START_OF_TURN_TOKEN|><|USER_TOKEN|>", "<|END_OF_TURN_TOKEN|>",
	  "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>", "<|END_OF_TURN_TOKEN|>",
	  "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>" },
};

/* ChatML, Phi-3 and Zephyr write any role name between their markers. */
static bool s_role_named(enum ns_chat_family f)
{
	return f == NS_CHAT_CHATML || f == NS_CHAT_PHI3 || f == NS_CHAT_ZEPHYR ||
	       f == NS_CHAT_PHI4;
}

static void s_role_marker(FILE *b, enum ns_chat_family f, const char *role)
{
	fputs(f == NS_CHAT_CHATML || f == NS_CHAT_PHI4 ? "<|im_start|>" : "<|", b);
	fputs(role, b);
	fputs(f == NS_CHAT_CHATML ? "\n" : f == NS_CHAT_PHI4 ? "<|im_sep|>" : "|>\n", b);
}

static void s_table(FILE *b, const struct s_fmt *t, const struct ns_chat_msg *m,
		    size_t n, bool gen)
{
	for (size_t i = 0; i < n; i++) {
		const char *pre, *suf;

		if (s_is(&m[i], "system")) {
			pre = t->sp;
			suf = t->ss;
		} else if (s_is(&m[i], "user")) {
			pre = t->up;
			suf = t->us;
		} else if (s_is(&m[i], "assistant")) {
			pre = t->ap;
			suf = t->as;
		} else if (s_role_named(t->f)) {
			pre = NULL;
			suf = t->us;
		} else {
			continue; /* llama.cpp drops roles the family has no place for */
		}
		if (pre)
			fputs(pre, b);
		else
			s_role_marker(b, t->f, m[i].role);
		if (t->trim)
			s_put_ctrim(b, s_c(&m[i]));
		else
			fputs(s_c(&m[i]), b);
		fputs(suf, b);
	}
	if (gen)
		fputs(t->gen, b);
}

static int s_render(FILE *b, enum ns_chat_family f, const struct ns_chat_msg *m, size_t n,
		    bool gen)
{
	switch (f) {
	case NS_CHAT_MISTRAL_V7:
	case NS_CHAT_MISTRAL_V7_TEKKEN: {
		const char *sp = f == NS_CHAT_MISTRAL_V7 ? " " : "";

		for (size_t i = 0; i < n; i++) {
			if (s_is(&m[i], "system")) {
				fputs("[SYSTEM_PROMPT]", b);
				fputs(sp, b);
				fputs(s_c(&m[i]), b);
				fputs("[/SYSTEM_PROMPT]", b);
			} else if (s_is(&m[i], "user")) {
				fputs("[INST]", b);
				fputs(sp, b);
				fputs(s_c(&m[i]), b);
				fputs("[/INST]", b);
			} else {
				fputs(sp, b);
				fputs(s_c(&m[i]), b);
				fputs("</s>", b);
			}
		}
		return 0;
	}
	case NS_CHAT_MISTRAL_V1:
	case NS_CHAT_MISTRAL_V3:
	case NS_CHAT_MISTRAL_V3_TEKKEN:
		s_mistral(b, f, m, n);
		return 0;
	case NS_CHAT_LLAMA2:
	case NS_CHAT_LLAMA2_SYS:
	case NS_CHAT_LLAMA2_SYS_BOS:
	case NS_CHAT_LLAMA2_SYS_STRIP:
		s_llama2(b, f, m, n);
		return 0;
	default:
		break;
	}
	for (size_t k = 0; k < NS_ARRAY_LEN(s_fmts); k++) {
		if (s_fmts[k].f == f) {
			s_table(b, &s_fmts[k], m, n, gen);
			return 0;
		}
	}
	return -EINVAL;
}

int ns_chat_lcpp_render(enum ns_chat_family f, const struct ns_chat_msg *m, size_t n, bool gen,
			char **out, char *err, size_t errlen)
{
	size_t len = 0;
	FILE *b = open_memstream(out, &len);
	int rc;

	*out = NULL;
	if (!b)
		return ns_errf(err, errlen, "chat: out of memory"), -ENOMEM;
	rc = s_render(b, f, m, n, gen);
	if (ferror(b) && !rc)
		rc = -ENOMEM;
	if (fclose(b) && !rc)
		rc = -ENOMEM;
	if (rc) {
		ns_errf(err, errlen, rc == -ENOMEM ? "chat: out of memory" :
			"chat: unknown chat template family");
		free(*out);
		*out = NULL;
	}
	return rc;
}
