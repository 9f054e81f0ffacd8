/* nsctl tokenize MODEL [--json|--ids] [--add-special] [--parse-special] [--] TEXT
 * nsctl tokenize MODEL --chat [--system S] [--no-think] [--thinking] [--chat-date YYYY-MM-DD]
 *                      [--reasoning[-effort] E] [--chat-template FAMILY] [--print-prompt] TEXT
 *   (thinking as `nsctl run` has it: Qwen3 thinks unless --no-think, Qwen3.5 and Gemma 4 only
 *   with --thinking)
 * nsctl detokenize MODEL [--json] [--remove-special] [--hide-special] [--] IDS...
 *
 * tokenize prints one line per token ("   id -> 'piece'", as llama-tokenize does), or the bare
 * id list with --ids, or a JSON object with --json. TEXT "-" reads standard input.
 * With --chat, TEXT is the user message of a chat rendered with the model's own template
 * (recognised from tokenizer.chat_template; an unknown one is an error), tokenized with
 * special tokens parsed; --print-prompt prints the rendered prompt instead.
 * detokenize takes ids as arguments or from standard input ("-"), separated by spaces,
 * commas or newlines, optionally in [brackets], and prints the text they decode to. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat.h"
#include "cmd_opt.h"
#include "commands.h"
#include "json_out.h"
#include "model.h"
#include "ns_util.h"
#include "tokenizer.h"

static const char s_tokenize_usage[] =
	"usage: nsctl tokenize MODEL [options] [--] TEXT   (TEXT \"-\": standard input)\n"
	"  Prints one line per token (\"   id -> 'piece'\"), as llama-tokenize does.\n"
	"  -m, --model MODEL     the model (then every non-option is TEXT)\n"
	"  -p, --prompt TEXT     the text as one argument instead of TEXT's words\n"
	"  --ids                 the id list only\n"
	"  --json                one JSON object\n"
	"  --add-special         add BOS/EOS as the vocabulary asks\n"
	"  --parse-special       special-token text in TEXT becomes those tokens\n"
	"  --chat                TEXT is a user message, rendered with the model's template\n"
	"  -sys, --system S      a system message first (with --chat)\n"
	"  --no-think            the template's no-thinking variant (with --chat)\n"
	"  --thinking            let the model think (with --chat; as run: Qwen3 thinks unless\n"
	"                        --no-think, Qwen3.5 and Gemma 4 only with --thinking)\n"
	"  --chat-date D         the date a template shows (YYYY-MM-DD)\n"
	"  --reasoning[-effort] low|medium|high  gpt-oss's reasoning effort\n"
	"  --chat-template FAMILY  a template family instead of the model's own\n"
	"  --print-prompt        print the rendered prompt instead of tokens\n";

static const char s_detokenize_usage[] =
	"usage: nsctl detokenize MODEL [options] [--] IDS...   (IDS \"-\": standard input)\n"
	"  Prints the text the ids decode to; ids separated by spaces, commas or newlines,\n"
	"  optionally in [brackets].\n"
	"  -m, --model MODEL     the model (then every non-option is an IDS argument)\n"
	"  --json                one JSON object\n"
	"  --remove-special      drop a leading BOS and a trailing EOS (as llama.cpp)\n"
	"  --hide-special        special tokens print as nothing, not as their text\n";

/* All of standard input, NUL-terminated (may hold other NULs: trust *len). */
static char *s_read_stdin(size_t *len)
{
	size_t cap = 4096, n = 0;
	char *buf = malloc(cap);

	while (buf) {
		size_t r;

		if (n + 1 >= cap) {
			char *p = cap > SIZE_MAX / 2 ? NULL : realloc(buf, cap * 2);

			if (!p) {
				free(buf);
				return NULL;
			}
			buf = p;
			cap *= 2;
		}
		r = fread(buf + n, 1, cap - n, stdin);
		n += r;
		if (r == 0)
			break;
	}
	if (buf && ferror(stdin)) {
		free(buf);
		return NULL;
	}
	if (buf)
		buf[n] = '\0';
	*len = n;
	return buf;
}

/* Open MODEL (single file, any shard, or a vocab-only GGUF) and build its tokenizer. When
 * tpl is not NULL it receives a malloc'd copy of tokenizer.chat_template (NULL if none). */
static struct ns_tok *s_open_tok(const char *who, const char *path, char **tpl)
{
	char err[NS_ERR_LEN];
	struct ns_model *m = NULL;
	struct ns_tok *t;
	int rc = ns_model_open(path, &m, err, sizeof(err));

	if (rc) {
		fprintf(stderr, "%s: %s\n", who, err);
		return NULL;
	}
	t = ns_tok_new(ns_model_meta(m), err, sizeof(err));
	if (t && tpl) {
		const char *s = ns_gguf_get_str(ns_model_meta(m), "tokenizer.chat_template");

		*tpl = s ? strdup(s) : NULL;
	}
	ns_model_close(&m);
	if (!t)
		fprintf(stderr, "%s: %s: %s\n", who, path, err);
	return t;
}

/* A piece as a JSON string: bytes that are no valid UTF-8 (a character split across tokens)
 * become U+FFFD, as JSON text must be UTF-8. */
static void s_json_piece(struct json_out *j, const char *p, size_t l)
{
	char *buf = malloc(3 * l + 1);
	size_t k = 0;

	if (!buf) {
		jo_str(j, "");
		return;
	}
	for (size_t i = 0; i < l;) {
		uint8_t c = (uint8_t)p[i];
		size_t n = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 :
			   (c & 0xf8) == 0xf0 ? 4 : 0;
		bool ok = n && i + n <= l;

		for (size_t m = 1; ok && m < n; m++)
			ok = ((uint8_t)p[i + m] & 0xc0) == 0x80;
		if (ok) {
			memcpy(buf + k, p + i, n);
			k += n;
			i += n;
		} else {
			memcpy(buf + k, "\xef\xbf\xbd", 3);
			k += 3;
			i++;
		}
	}
	jo_strn(j, buf, k);
	free(buf);
}

struct s_chat_args {
	bool on, print_prompt;
	int think; /* -1: the family's default as run has it, 0: --no-think, 1: --thinking */
	const char *system, *date, *effort, *family;
};

/* Render text as the user turn of a chat; returns the prompt (malloc'd) or NULL after one
 * error line. */
static char *s_chat_prompt(const struct ns_tok *t, const char *tpl, const struct s_chat_args *a,
			   const char *text)
{
	struct ns_chat_msg m[2];
	struct ns_chat_opts o = { .think_opt_in = a->think > 0, .date = a->date,
				  .reasoning_effort = a->effort };
	enum ns_chat_family f;
	char err[NS_ERR_LEN], *out = NULL;
	size_t n = 0;

	if (a->family) {
		f = ns_chat_family_from_name(a->family);
		if (f == NS_CHAT_UNKNOWN) {
			fprintf(stderr, "nsctl tokenize: unknown chat template family '%s' (qwen3, "
				"llama3, llama31, llama32, gemma, gemma4, gptoss)\n", a->family);
			return NULL;
		}
	} else {
		f = ns_chat_family_detect(tpl);
		if (f == NS_CHAT_UNKNOWN) {
			fprintf(stderr, "nsctl tokenize: %s; name one with --chat-template FAMILY\n",
				tpl ? "the model's chat template is of no supported family"
				    : "the model has no chat template");
			return NULL;
		}
	}
	/* run's defaults (api.c ns_engine_chat_prompt): Qwen3.5's template would think, run
	 * does not unless asked; Qwen3 does */
	o.enable_thinking = a->think >= 0 ? a->think > 0 : f != NS_CHAT_QWEN35;
	o.bos_text = ns_tok_bos(t) >= 0 ? ns_tok_text(t, ns_tok_bos(t), NULL) : NULL;
	if (a->system)
		m[n++] = (struct ns_chat_msg){ "system", a->system, NULL };
	m[n++] = (struct ns_chat_msg){ "user", text, NULL };
	if (ns_chat_render(f, m, n, true, &o, &out, err, sizeof(err))) {
		fprintf(stderr, "nsctl tokenize: %s\n", err);
		return NULL;
	}
	return out;
}

enum {
	O_HELP = 1, O_MODEL, O_JSON, O_IDS, O_ADD_SPECIAL, O_PARSE_SPECIAL, O_CHAT, O_NO_THINK,
	O_THINKING, O_PRINT_PROMPT, O_SYSTEM, O_CHAT_DATE, O_REASONING, O_CHAT_TEMPLATE, O_PROMPT,
	O_REMOVE_SPECIAL, O_HIDE_SPECIAL,
};

static const struct ns_opt s_tokenize_opts[] = {
	NSCTL_OPT_HELP(O_HELP),
	NSCTL_OPT_MODEL(O_MODEL),
	{ "json", NULL, NS_OPT_SWITCH, O_JSON },
	{ "ids", NULL, NS_OPT_SWITCH, O_IDS },
	{ "add-special", NULL, NS_OPT_SWITCH, O_ADD_SPECIAL },
	{ "parse-special", NULL, NS_OPT_SWITCH, O_PARSE_SPECIAL },
	{ "chat", NULL, NS_OPT_SWITCH, O_CHAT },
	{ "no-think", NULL, NS_OPT_SWITCH, O_NO_THINK },
	{ "thinking", NULL, NS_OPT_SWITCH, O_THINKING },
	{ "print-prompt", NULL, NS_OPT_SWITCH, O_PRINT_PROMPT },
	{ "system", "-sys --system-prompt", NS_OPT_VALUE, O_SYSTEM },
	{ "chat-date", NULL, NS_OPT_VALUE, O_CHAT_DATE },
	{ "reasoning", "--reasoning-effort", NS_OPT_VALUE, O_REASONING },
	{ "chat-template", NULL, NS_OPT_VALUE, O_CHAT_TEMPLATE },
	{ "prompt", "-p", NS_OPT_VALUE, O_PROMPT },
};

/* tokenize's command line: TEXT's words are every argument from the first non-option after
 * MODEL on (options among them are words of the text), or -p's text. */
struct s_tok_args {
	bool json, ids_only, add_special, parse_special;
	struct s_chat_args chat;
	const char *model, *prompt;
	const char **words;
	int n_words;
};

static int s_tok_opt(void *user, const struct ns_opt *o, const char *f, const char *v)
{
	struct s_tok_args *a = user;

	(void)f;
	switch (o ? o->id : 0) {
	case O_HELP:
		fputs(s_tokenize_usage, stdout);
		exit(0);
	case O_JSON:
		a->json = true;
		return 0;
	case O_IDS:
		a->ids_only = true;
		return 0;
	case O_ADD_SPECIAL:
		a->add_special = true;
		return 0;
	case O_PARSE_SPECIAL:
		a->parse_special = true;
		return 0;
	case O_CHAT:
		a->chat.on = true;
		return 0;
	case O_NO_THINK:
		a->chat.think = 0;
		return 0;
	case O_THINKING:
		a->chat.think = 1;
		return 0;
	case O_PRINT_PROMPT:
		a->chat.print_prompt = true;
		return 0;
	case O_SYSTEM:
		a->chat.system = v;
		return 0;
	case O_CHAT_DATE:
		a->chat.date = v;
		return 0;
	case O_REASONING:
		a->chat.effort = v;
		return 0;
	case O_CHAT_TEMPLATE:
		a->chat.family = v;
		return 0;
	case O_PROMPT:
		a->prompt = v;
		return 0;
	case O_MODEL:
		if (a->model) {
			fprintf(stderr, "nsctl tokenize: %s '%s': a model was given already ('%s')\n",
				f, v, a->model);
			return -EINVAL;
		}
		a->model = v;
		return 0;
	}
	if (!a->model) {
		a->model = v;
		return 0;
	}
	a->words[a->n_words++] = v; /* TEXT: this word and all after it */
	return NS_OPT_REST;
}

int cmd_tokenize(int argc, char **argv)
{
	struct s_tok_args a = { .chat = { .think = -1 } };
	bool json, ids_only, add_special, parse_special;
	struct s_chat_args chat;
	const char *model;
	char *text = NULL, *tpl = NULL;
	size_t len = 0;
	int32_t *ids = NULL;
	size_t n = 0;
	struct ns_tok *t;
	int i, rc;

	a.words = calloc((size_t)argc + 1, sizeof(*a.words));
	if (!a.words) {
		fprintf(stderr, "nsctl tokenize: out of memory\n");
		return 1;
	}
	rc = ns_opt_parse("nsctl tokenize", s_tokenize_opts, NS_ARRAY_LEN(s_tokenize_opts), argc,
			  argv, s_tok_opt, &a);
	json = a.json;
	ids_only = a.ids_only;
	add_special = a.add_special;
	parse_special = a.parse_special;
	chat = a.chat;
	model = a.model;
	if (rc < 0)
		goto usage_fail;
	if (chat.effort && strcmp(chat.effort, "low") && strcmp(chat.effort, "medium") &&
	    strcmp(chat.effort, "high")) {
		fprintf(stderr, "nsctl tokenize: --reasoning low|medium|high (got '%s')\n",
			chat.effort);
		goto usage_fail;
	}
	if (json && ids_only) {
		fprintf(stderr, "nsctl tokenize: --json and --ids do not go together\n");
		goto usage_fail;
	}
	if (a.prompt && a.n_words) {
		fprintf(stderr, "nsctl tokenize: -p gives the text already ('%s' is more)\n",
			a.words[0]);
		goto usage_fail;
	}
	if (!model || (!a.n_words && !a.prompt)) { /* one line */
		fprintf(stderr, "usage: nsctl tokenize MODEL [--json|--ids] [--add-special] "
			"[--parse-special] [--chat [--system S] [--no-think] [--thinking] "
			"[--chat-date YYYY-MM-DD] [--reasoning[-effort] E] [--chat-template FAMILY] "
			"[--print-prompt]] [--] TEXT   (TEXT - reads standard input)\n");
		goto usage_fail;
	}
	if (a.n_words == 1 && !strcmp(a.words[0], "-")) {
		text = s_read_stdin(&len);
		if (!text) {
			fprintf(stderr, "nsctl tokenize: cannot read standard input\n");
			free(a.words);
			return 1;
		}
	} else { /* -p's text, or the words of TEXT joined by single spaces */
		if (a.prompt)
			a.words[a.n_words++] = a.prompt;
		for (i = 0; i < a.n_words; i++)
			len += strlen(a.words[i]) + 1;
		text = malloc(len + 1);
		if (!text) {
			free(a.words);
			return 1;
		}
		len = 0;
		for (i = 0; i < a.n_words; i++) {
			size_t l = strlen(a.words[i]);

			if (i > 0)
				text[len++] = ' ';
			memcpy(text + len, a.words[i], l);
			len += l;
		}
		text[len] = '\0';
	}
	free(a.words);
	t = s_open_tok("nsctl tokenize", model, chat.on ? &tpl : NULL);
	if (!t) {
		free(text);
		return 2;
	}
	if (chat.on) {
		char *prompt;

		if (memchr(text, '\0', len)) {
			fprintf(stderr, "nsctl tokenize: a chat message cannot contain NUL bytes\n");
			prompt = NULL;
		} else {
			prompt = s_chat_prompt(t, tpl, &chat, text);
		}
		free(tpl);
		free(text);
		if (!prompt) {
			ns_tok_destroy(&t);
			return 2;
		}
		if (chat.print_prompt) {
			fputs(prompt, stdout);
			free(prompt);
			ns_tok_destroy(&t);
			return 0;
		}
		text = prompt;
		len = strlen(prompt);
		parse_special = true; /* the template's markers are special tokens */
	}
	rc = ns_tok_encode(t, text, len, add_special, parse_special, &ids, &n);
	if (rc) {
		fprintf(stderr, "nsctl tokenize: %s\n", strerror(-rc));
		free(text);
		ns_tok_destroy(&t);
		return 1;
	}
	if (json) {
		struct json_out j;

		jo_init(&j, stdout);
		jo_begin_obj(&j);
		jo_key(&j, "n_tokens");
		jo_u64(&j, n);
		jo_key(&j, "ids");
		jo_begin_arr(&j);
		for (size_t k = 0; k < n; k++)
			jo_i64(&j, ids[k]);
		jo_end_arr(&j);
		jo_key(&j, "pieces");
		jo_begin_arr(&j);
		for (size_t k = 0; k < n; k++) {
			const char *p;
			size_t l;

			ns_tok_piece(t, ids[k], true, &p, &l);
			s_json_piece(&j, p, l);
		}
		jo_end_arr(&j);
		jo_end_obj(&j); /* ends the line */
	} else if (ids_only) {
		printf("[");
		for (size_t k = 0; k < n; k++)
			printf("%s%d", k ? ", " : "", ids[k]);
		printf("]\n");
	} else {
		for (size_t k = 0; k < n; k++) {
			const char *p;
			size_t l;

			ns_tok_piece(t, ids[k], true, &p, &l);
			printf("%6d -> '", ids[k]);
			fwrite(p, 1, l, stdout);
			printf("'\n");
		}
	}
	free(ids);
	free(text);
	ns_tok_destroy(&t);
	return 0;
usage_fail:
	free(a.words);
	return 2;
}

/* Parse ids separated by spaces, commas, newlines, optionally bracketed. */
static int s_parse_ids(const char *s, int32_t **ids, size_t *n, size_t *cap)
{
	while (*s) {
		char *end;
		long long v;

		if (strchr(" \t\r\n,[]", *s)) {
			s++;
			continue;
		}
		if (*s < '0' || *s > '9')
			return -EINVAL;
		errno = 0;
		v = strtoll(s, &end, 10);
		if (errno || v > INT32_MAX)
			return -ERANGE;
		if (*n == *cap) {
			size_t c = *cap ? *cap * 2 : 64;
			int32_t *p = realloc(*ids, c * sizeof(*p));

			if (!p)
				return -ENOMEM;
			*ids = p;
			*cap = c;
		}
		(*ids)[(*n)++] = (int32_t)v;
		s = end;
	}
	return 0;
}

static const struct ns_opt s_detokenize_opts[] = {
	NSCTL_OPT_HELP(O_HELP),
	NSCTL_OPT_MODEL(O_MODEL),
	{ "json", NULL, NS_OPT_SWITCH, O_JSON },
	{ "remove-special", NULL, NS_OPT_SWITCH, O_REMOVE_SPECIAL },
	{ "hide-special", NULL, NS_OPT_SWITCH, O_HIDE_SPECIAL },
};

struct s_detok_args {
	bool json, remove_special, unparse, given;
	const char *model, *bad; /* bad: the argument whose ids did not parse */
	int32_t *ids;
	size_t n, cap;
	int ids_rc; /* s_parse_ids' error (its line is printed after the parse), or 0 */
};

static int s_detok_opt(void *user, const struct ns_opt *o, const char *f, const char *v)
{
	struct s_detok_args *a = user;
	size_t len = 0;
	char *in;
	int rc;

	switch (o ? o->id : 0) {
	case O_HELP:
		free(a->ids);
		fputs(s_detokenize_usage, stdout);
		exit(0);
	case O_JSON:
		a->json = true;
		return 0;
	case O_REMOVE_SPECIAL:
		a->remove_special = true;
		return 0;
	case O_HIDE_SPECIAL:
		a->unparse = false;
		return 0;
	case O_MODEL:
		if (a->model) {
			fprintf(stderr, "nsctl detokenize: %s '%s': a model was given already "
				"('%s')\n", f, v, a->model);
			return -EINVAL;
		}
		a->model = v;
		return 0;
	}
	if (!a->model) {
		a->model = v;
		return 0;
	}
	a->given = true;
	if (strcmp(v, "-")) {
		a->bad = v;
		return a->ids_rc = s_parse_ids(v, &a->ids, &a->n, &a->cap);
	}
	in = s_read_stdin(&len);
	if (!in || memchr(in, '\0', len)) {
		fprintf(stderr, "nsctl detokenize: cannot read ids from standard input\n");
		free(in);
		return -EIO; /* its line is out */
	}
	rc = a->ids_rc = s_parse_ids(in, &a->ids, &a->n, &a->cap);
	free(in);
	return rc;
}

int cmd_detokenize(int argc, char **argv)
{
	struct s_detok_args a = { .unparse = true, .bad = "-" };
	bool json, remove_special, unparse, given;
	const char *model, *bad;
	int32_t *ids;
	size_t n, len = 0;
	char *out = NULL;
	struct ns_tok *t;
	int rc;

	rc = ns_opt_parse("nsctl detokenize", s_detokenize_opts, NS_ARRAY_LEN(s_detokenize_opts),
			  argc, argv, s_detok_opt, &a);
	json = a.json;
	remove_special = a.remove_special;
	unparse = a.unparse;
	given = a.given;
	model = a.model;
	bad = a.bad;
	ids = a.ids;
	n = a.n;
	if (rc && !a.ids_rc) { /* ns_opt's line, -m's or standard input's is out */
		free(ids);
		return 2;
	}
	if (!rc && model && !given) { /* an IDS argument may hold no id ("[]"), but one is needed */
		fprintf(stderr, "nsctl detokenize: no IDS given (token ids as arguments, or - to "
			"read them from standard input)\n");
		free(ids);
		return 2;
	}
	if (rc || !model) {
		if (rc == -ENOMEM)
			fprintf(stderr, "nsctl detokenize: out of memory\n");
		else if (rc)
			fprintf(stderr, "nsctl detokenize: bad ids '%s': ids are integers 0..%d\n",
				bad, INT32_MAX);
		else
			fprintf(stderr, "usage: nsctl detokenize MODEL [--json] [--remove-special] "
				"[--hide-special] [--] IDS...   (IDS - reads standard input)\n");
		free(ids);
		return 2;
	}
	t = s_open_tok("nsctl detokenize", model, NULL);
	if (!t) {
		free(ids);
		return 2;
	}
	for (size_t k = 0; k < n; k++) {
		if ((size_t)ids[k] >= ns_tok_n_vocab(t)) {
			fprintf(stderr, "nsctl detokenize: id %d is out of range (vocabulary of %zu)\n",
				ids[k], ns_tok_n_vocab(t));
			free(ids);
			ns_tok_destroy(&t);
			return 2;
		}
	}
	rc = ns_tok_detokenize(t, ids, n, remove_special, unparse, &out, &len);
	if (rc) {
		fprintf(stderr, "nsctl detokenize: %s\n", strerror(-rc));
	} else if (json) {
		struct json_out j;

		jo_init(&j, stdout);
		jo_begin_obj(&j);
		jo_key(&j, "text");
		jo_strn(&j, out, len);
		jo_end_obj(&j);
	} else {
		fwrite(out, 1, len, stdout);
		printf("\n");
	}
	free(out);
	free(ids);
	ns_tok_destroy(&t);
	return rc ? 1 : 0;
}
