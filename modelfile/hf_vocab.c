/* hf_vocab.c - tokenizer.json and friends to the converter's tokenizer.* keys (hf_vocab.h). */
#include "hf_vocab.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf_meta.h"
#include "ns_util.h"

/* gguf TokenType */
enum { S_NORMAL = 1, S_CONTROL = 3, S_USER_DEFINED = 4, S_UNUSED = 5 };

/* Split patterns of tokenizer.json files and the pre-tokenizer names llama.cpp gives their
 * vocabularies (the texts llama-vocab.cpp quotes as "original regex from tokenizer.json").
 * llama3's pattern names two families; ignore_merges tells them apart. */
static const struct {
	const char *regex;
	const char *pre;
	const char *pre_no_ignore_merges; /* NULL: the same name either way */
} s_patterns[] = {
	{ "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+"
	  "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+", "qwen2", NULL },
	{ "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}"
	  "\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+", "qwen35", NULL },
	{ "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}"
	  "\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+", "llama-bpe", "smaug-bpe" },
	{ "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"
	  "(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+"
	  "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}| ?[^\\s\\p{L}"
	  "\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+", "gpt-4o", NULL },
};

/* SpecialVocab's token types, their id keys and their add_* keys (NULL: none written). */
static const struct {
	const char *typ;
	const char *id_key;
	const char *add_key;
} s_special[] = {
	{ "bos", "tokenizer.ggml.bos_token_id", "tokenizer.ggml.add_bos_token" },
	{ "eos", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.add_eos_token" },
	{ "unk", "tokenizer.ggml.unknown_token_id", NULL },
	{ "sep", "tokenizer.ggml.seperator_token_id", "tokenizer.ggml.add_sep_token" },
	{ "pad", "tokenizer.ggml.padding_token_id", NULL },
	{ "cls", NULL, NULL }, /* the writer has no cls key */
	{ "mask", "tokenizer.ggml.mask_token_id", NULL },
};
#define S_N_SPECIAL NS_ARRAY_LEN(s_special)

struct s_vocab {
	const char *dir;
	char path[4096];        /* tokenizer.json */
	char *err;
	size_t errlen;
	json_t *tok, *tcfg, *cfg; /* tokenizer.json, tokenizer_config.json, config.json */
	struct ns_gguf *g;
	int64_t ids[S_N_SPECIAL]; /* special token ids found, -1 none */
	int add[S_N_SPECIAL];     /* add_<typ>_token: -1 unset, 0, 1 */
};

static int s_bad(struct s_vocab *v, const char *what)
{
	ns_errf(v->err, v->errlen, "%s: %s", v->path, what);
	return -EINVAL;
}

/* json_load_file of dir/name, NULL when the file does not exist; -EINVAL for bad JSON. */
static int s_load_json(struct s_vocab *v, const char *name, json_t **out)
{
	char path[4096];
	json_error_t je;
	FILE *f;

	*out = NULL;
	if (snprintf(path, sizeof(path), "%s/%s", v->dir, name) >= (int)sizeof(path))
		return 0;
	f = fopen(path, "r");
	if (!f)
		return 0;
	fclose(f);
	*out = json_load_file(path, 0, &je);
	if (!*out || !json_is_object(*out)) {
		ns_errf(v->err, v->errlen, "%s: line %d: not a JSON object (%s)", path, je.line,
			*out ? "" : je.text);
		json_decref(*out);
		*out = NULL;
		return -EINVAL;
	}
	return 0;
}

static bool s_prefix(const char *s, const char *p)
{
	return !strncmp(s, p, strlen(p));
}

static bool s_suffix(const char *s, const char *p)
{
	size_t n = strlen(s), m = strlen(p);

	return n >= m && !strcmp(s + n - m, p);
}

/* The converter's does_token_look_special. */
static bool s_looks_special(const char *t)
{
	return !strcmp(t, "<pad>") || !strcmp(t, "<mask>") || !strcmp(t, "<2mass>") ||
	       !strcmp(t, "[@BOS@]") || (s_prefix(t, "<|") && s_suffix(t, "|>")) ||
	       (s_prefix(t, "<\xef\xbd\x9c") && s_suffix(t, "\xef\xbd\x9c>")) || /* fullwidth | */
	       (s_prefix(t, "<unused") && s_suffix(t, ">"));
}

/* strdup of s with every "▁" (U+2581) replaced by a space (user-defined tokens). */
static char *s_unescape_spaces(const char *s)
{
	char *out = malloc(strlen(s) + 1), *o = out;

	if (!out)
		return NULL;
	while (*s) {
		if (s_prefix(s, "\xe2\x96\x81")) {
			*o++ = ' ';
			s += 3;
		} else {
			*o++ = *s++;
		}
	}
	*o = '\0';
	return out;
}

static int s_set_str(struct ns_gguf_str *item, const char *s)
{
	item->len = strlen(s);
	item->s = strdup(s);
	return item->s ? 0 : -ENOMEM;
}

static void s_free_strs(struct ns_gguf_str *v, uint64_t n)
{
	for (uint64_t i = 0; v && i < n; i++)
		free(v[i].s);
	free(v);
}

/* model.vocab plus added_tokens -> tokenizer.ggml.tokens / token_type (get_vocab_base). */
static int s_tokens(struct s_vocab *v, const json_t *model, uint32_t n_vocab)
{
	const json_t *vocab = json_object_get(model, "vocab");
	const json_t *added = json_object_get(v->tok, "added_tokens");
	const char **text = NULL;
	int8_t *kind = NULL; /* 0 normal, 1 added, 2 added special */
	struct ns_gguf_str *items = NULL;
	int32_t *types = NULL;
	const char *key;
	const json_t *x;
	uint64_t n = n_vocab;
	size_t i;
	int rc = -ENOMEM;

	if (!json_is_object(vocab) || (added && !json_is_array(added)))
		return s_bad(v, "model.vocab is not an object or added_tokens not a list");
	if (!n) { /* len(tokenizer.vocab): the model's tokens and the added ones not among them */
		n = json_object_size(vocab);
		json_array_foreach(added, i, x) {
			const char *c = json_string_value(json_object_get(x, "content"));

			if (c && !json_object_get(vocab, c))
				n++;
		}
	}
	if (!n || n > INT32_MAX)
		return s_bad(v, "no tokens");
	text = calloc((size_t)n, sizeof(*text));
	kind = calloc((size_t)n, 1);
	items = calloc((size_t)n, sizeof(*items));
	types = calloc((size_t)n, sizeof(*types));
	if (!text || !kind || !items || !types)
		goto out;
	json_object_foreach((json_t *)vocab, key, x) {
		if (!json_is_integer(x) || json_integer_value(x) < 0 ||
		    (uint64_t)json_integer_value(x) >= n) {
			ns_errf(v->err, v->errlen, "%s: token '%s' has id %" JSON_INTEGER_FORMAT
				", not under the vocabulary size %" PRIu64, v->path, key,
				json_is_integer(x) ? json_integer_value(x) : -1, n);
			rc = -EINVAL;
			goto out;
		}
		text[json_integer_value(x)] = key;
	}
	json_array_foreach(added, i, x) {
		const json_t *id = json_object_get(x, "id");
		const char *c = json_string_value(json_object_get(x, "content"));

		if (!c || !json_is_integer(id) || json_integer_value(id) < 0 ||
		    (uint64_t)json_integer_value(id) >= n) {
			ns_errf(v->err, v->errlen, "%s: added token %zu has no content or an id not "
				"under the vocabulary size %" PRIu64, v->path, i, n);
			rc = -EINVAL;
			goto out;
		}
		text[json_integer_value(id)] = c;
		kind[json_integer_value(id)] = json_is_true(json_object_get(x, "special")) ? 2 : 1;
	}
	for (uint64_t t = 0; t < n; t++) {
		char pad[32];

		if (!text[t]) {
			snprintf(pad, sizeof(pad), "[PAD%" PRIu64 "]", t);
			types[t] = S_UNUSED;
			if (s_set_str(&items[t], pad))
				goto out;
		} else if (kind[t] == 2 || (kind[t] == 1 && s_looks_special(text[t]))) {
			types[t] = S_CONTROL;
			if (s_set_str(&items[t], text[t]))
				goto out;
		} else if (kind[t] == 1) {
			types[t] = S_USER_DEFINED;
			if (!(items[t].s = s_unescape_spaces(text[t])))
				goto out;
			items[t].len = strlen(items[t].s);
		} else {
			types[t] = S_NORMAL;
			if (s_set_str(&items[t], text[t]))
				goto out;
		}
	}
	rc = ns_gguf_meta_take_arr_str(v->g, "tokenizer.ggml.tokens", items, n);
	items = NULL;
	if (!rc)
		rc = ns_gguf_meta_arr_i32(v->g, "tokenizer.ggml.token_type", types, n);
out:
	s_free_strs(items, n);
	free(types);
	free(kind);
	free(text);
	return rc;
}

/* part at o + k with each space written as U+0120 (two bytes); returns the new end. */
static size_t s_put_merge_part(char *o, size_t k, const char *part)
{
	for (; *part; part++) {
		if (*part == ' ') {
			o[k++] = '\xc4';
			o[k++] = '\xa0';
		} else {
			o[k++] = *part;
		}
	}
	return k;
}

/* model.merges ("a b" strings, or [a, b] pairs joined by a space with spaces inside a part
 * written as U+0120, as SpecialVocab does) -> tokenizer.ggml.merges. */
static int s_merges(struct s_vocab *v, const json_t *model)
{
	const json_t *merges = json_object_get(model, "merges");
	struct ns_gguf_str *items;
	size_t n = json_array_size(merges), i;
	const json_t *x;

	if (!json_is_array(merges) || !n)
		return 0; /* the converter warns and writes none */
	items = calloc(n, sizeof(*items));
	if (!items)
		return -ENOMEM;
	json_array_foreach(merges, i, x) {
		if (json_is_string(x)) {
			if (s_set_str(&items[i], json_string_value(x)))
				goto oom;
			continue;
		}
		if (!json_is_array(x) || json_array_size(x) != 2 ||
		    !json_is_string(json_array_get(x, 0)) || !json_is_string(json_array_get(x, 1))) {
			s_free_strs(items, n);
			return s_bad(v, "model.merges holds an entry that is neither \"a b\" nor "
				     "[a, b]");
		}
		{
			const char *a = json_string_value(json_array_get(x, 0));
			const char *b = json_string_value(json_array_get(x, 1));
			size_t la = strlen(a), lb = strlen(b), k = 0;
			char *o = malloc(2 * (la + lb) + 2); /* a space becomes two bytes */

			if (!o)
				goto oom;
			k = s_put_merge_part(o, k, a);
			o[k++] = ' ';
			k = s_put_merge_part(o, k, b);
			o[k] = '\0';
			items[i].s = o;
			items[i].len = k;
		}
	}
	return ns_gguf_meta_take_arr_str(v->g, "tokenizer.ggml.merges", items, n);
oom:
	s_free_strs(items, n);
	return -ENOMEM;
}

/* A JSON string equal to s? */
static bool s_is(const json_t *x, const char *s)
{
	return json_is_string(x) && !strcmp(json_string_value(x), s);
}

/* The pre-tokenizer name from tokenizer.json's pre_tokenizer. */
static int s_pre(struct s_vocab *v, const json_t *model, const char **out)
{
	const json_t *pt = json_object_get(v->tok, "pre_tokenizer");
	const char *type = json_string_value(json_object_get(pt, "type"));
	const json_t *list, *split, *bl;
	const char *regex;
	bool ignore = json_is_true(json_object_get(model, "ignore_merges"));

	if (type && !strcmp(type, "ByteLevel")) {
		/* the GPT-2 split inside ByteLevel itself */
		if (json_is_false(json_object_get(pt, "use_regex")) ||
		    json_is_true(json_object_get(pt, "add_prefix_space")))
			return s_bad(v, "a ByteLevel pre-tokenizer without its split pattern or with "
				     "add_prefix_space is not supported");
		*out = "gpt-2";
		return 0;
	}
	list = json_object_get(pt, "pretokenizers");
	split = json_array_get(list, 0);
	bl = json_array_get(list, 1);
	regex = json_string_value(json_object_get(json_object_get(split, "pattern"), "Regex"));
	if (!type || strcmp(type, "Sequence") || json_array_size(list) != 2 || !regex ||
	    !s_is(json_object_get(split, "type"), "Split") ||
	    !s_is(json_object_get(split, "behavior"), "Isolated") ||
	    json_is_true(json_object_get(split, "invert")) ||
	    !s_is(json_object_get(bl, "type"), "ByteLevel") ||
	    !json_is_false(json_object_get(bl, "use_regex")))
		return s_bad(v, "pre_tokenizer is not a split pattern followed by ByteLevel (a "
			     "vocabulary we cannot name; convert it to GGUF with llama.cpp)");
	for (size_t i = 0; i < NS_ARRAY_LEN(s_patterns); i++) {
		if (!strcmp(regex, s_patterns[i].regex)) {
			*out = !ignore && s_patterns[i].pre_no_ignore_merges ?
			       s_patterns[i].pre_no_ignore_merges : s_patterns[i].pre;
			return 0;
		}
	}
	return s_bad(v, "the pre-tokenizer's split pattern is not one we know (qwen2, qwen35, "
		     "llama-bpe, gpt-4o, gpt-2)");
}

/* Id of the added token whose content is text (tokenizer_config's *_token), or -1. */
static int64_t s_added_id(const struct s_vocab *v, const char *text)
{
	const json_t *added = json_object_get(v->tok, "added_tokens"), *x;
	size_t i;

	json_array_foreach(added, i, x) {
		const char *c = json_string_value(json_object_get(x, "content"));
		const json_t *id = json_object_get(x, "id");

		if (c && !strcmp(c, text) && json_is_integer(id))
			return json_integer_value(id);
	}
	return -1;
}

/* tokenizer_config's <typ>_token: a string or an AddedToken object's content. */
static const char *s_cfg_token(const struct s_vocab *v, const char *typ)
{
	char k[32];
	const json_t *e;

	snprintf(k, sizeof(k), "%s_token", typ);
	e = json_object_get(v->tcfg, k);
	if (json_is_object(e))
		e = json_object_get(e, "content");
	return json_string_value(e);
}

static int s_special_index(const char *typ)
{
	for (size_t i = 0; i < S_N_SPECIAL; i++)
		if (!strcmp(s_special[i].typ, typ))
			return (int)i;
	return -1;
}

/* The SpecialToken id of a TemplateProcessing template item, or NULL. */
static const char *s_tmpl_special(const json_t *item)
{
	return json_string_value(json_object_get(json_object_get(item, "SpecialToken"), "id"));
}

/* post_processor, as SpecialVocab reads it for decoder models: RobertaProcessing adds
 * bos/eos/sep; a TemplateProcessing single template that starts (ends) with a special token
 * adds BOS (EOS) when that token is the BOS (EOS) of tokenizer_config.json, and names it the
 * BOS (EOS) when tokenizer_config.json names none. (Its pair template only decides add_sep,
 * and a trailing token other than the EOS an EOT: neither occurs in the vocabularies we
 * translate, whose templates we refuse no further.) */
static void s_post_processor(struct s_vocab *v)
{
	const json_t *pp = json_object_get(v->tok, "post_processor");
	const json_t *list = json_object_get(pp, "processors");
	const char *bos = s_cfg_token(v, "bos"), *eos = s_cfg_token(v, "eos");
	int ib = s_special_index("bos"), ie = s_special_index("eos");
	size_t n = list ? json_array_size(list) : (pp ? 1 : 0);

	for (size_t i = 0; i < n; i++) {
		const json_t *p = list ? json_array_get(list, i) : pp;
		const json_t *single = json_object_get(p, "single");
		size_t k = json_array_size(single);
		const char *first, *last;

		if (s_is(json_object_get(p, "type"), "RobertaProcessing")) {
			v->add[ib] = v->add[ie] = v->add[s_special_index("sep")] = 1;
			continue;
		}
		if (!s_is(json_object_get(p, "type"), "TemplateProcessing") || k < 2)
			continue;
		first = s_tmpl_special(json_array_get(single, 0));
		last = s_tmpl_special(json_array_get(single, k - 1));
		if (first) {
			if (!bos) { /* tokenizer_config's bos_token becomes this one */
				bos = first;
				if (v->tcfg)
					v->ids[ib] = s_added_id(v, bos);
			}
			v->add[ib] = !strcmp(first, bos);
		}
		if (last) {
			if (!eos) {
				eos = last;
				if (v->tcfg)
					v->ids[ie] = s_added_id(v, eos);
			}
			v->add[ie] = !strcmp(last, eos);
		}
	}
}

/* Special ids (tokenizer_config.json's *_token found among added_tokens, then config.json's
 * *_token_id at the top level or in text_config) and the add_* flags. */
static int s_special_ids(struct s_vocab *v)
{
	const json_t *text = json_object_get(v->cfg, "text_config");
	int rc = 0;

	for (size_t i = 0; i < S_N_SPECIAL; i++) {
		v->ids[i] = -1;
		v->add[i] = -1;
	}
	s_post_processor(v);
	for (size_t i = 0; v->tcfg && i < S_N_SPECIAL; i++) {
		char k[32];
		const json_t *a;
		const char *t = s_cfg_token(v, s_special[i].typ);

		snprintf(k, sizeof(k), "add_%s_token", s_special[i].typ);
		a = json_object_get(v->tcfg, k);
		if (json_is_boolean(a))
			v->add[i] = json_is_true(a);
		if (t && v->ids[i] < 0)
			v->ids[i] = s_added_id(v, t);
	}
	for (size_t i = 0; i < S_N_SPECIAL; i++) {
		char k[32];
		const json_t *id;

		snprintf(k, sizeof(k), "%s_token_id", s_special[i].typ);
		id = json_object_get(v->cfg, k);
		if (!id && text)
			id = json_object_get(text, k);
		if (v->ids[i] < 0 && json_is_integer(id)) {
			if (json_integer_value(id) < 0) {
				ns_errf(v->err, v->errlen, "%s/config.json: %s is negative", v->dir, k);
				return -EINVAL;
			}
			v->ids[i] = json_integer_value(id);
		}
	}
	for (size_t i = 0; i < S_N_SPECIAL && !rc; i++) {
		if (v->ids[i] >= 0 && s_special[i].id_key)
			rc = ns_gguf_meta_u32(v->g, s_special[i].id_key, (uint32_t)v->ids[i]);
	}
	for (size_t i = 0; i < S_N_SPECIAL && !rc; i++) {
		if (v->add[i] >= 0 && s_special[i].add_key)
			rc = ns_gguf_meta_bool(v->g, s_special[i].add_key, v->add[i] == 1);
	}
	return rc;
}

/* A whole text file (at most 16 MiB) into a malloc'd string; NULL if absent. */
static int s_read_text(const char *path, char **out, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	*out = NULL;
	if (!f)
		return 0;
	if (fseek(f, 0, SEEK_END) || (n = ftell(f)) < 0 || n > (16l << 20) ||
	    fseek(f, 0, SEEK_SET)) {
		fclose(f);
		return -EINVAL;
	}
	buf = malloc((size_t)n + 1);
	if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
		free(buf);
		fclose(f);
		return buf ? -EIO : -ENOMEM;
	}
	fclose(f);
	buf[n] = '\0';
	*out = buf;
	*len = (size_t)n;
	return 0;
}

/* A list of {name, template}: "default" is the chat template, the others
 * tokenizer.chat_template.<name> (names with [A-Za-z0-9] kept, others as '_'). */
static int s_template_list(struct s_vocab *v, const json_t *list)
{
	const json_t *x;
	size_t i;
	int rc = 0;

	json_array_foreach(list, i, x) {
		const char *name = json_string_value(json_object_get(x, "name"));
		const json_t *tpl = json_object_get(x, "template");
		char key[160], clean[96];
		size_t k = 0;

		if (!name || !*name || !json_is_string(tpl))
			continue;
		for (; name[k] && k + 1 < sizeof(clean); k++)
			clean[k] = (name[k] >= 'a' && name[k] <= 'z') || (name[k] >= 'A' && name[k] <= 'Z') ||
				   (name[k] >= '0' && name[k] <= '9') ? name[k] : '_';
		clean[k] = '\0';
		if (!strcmp(clean, "default"))
			snprintf(key, sizeof(key), "tokenizer.chat_template");
		else
			snprintf(key, sizeof(key), "tokenizer.chat_template.%s", clean);
		rc = ns_gguf_meta_str(v->g, key, json_string_value(tpl), json_string_length(tpl));
		if (rc)
			break;
	}
	return rc;
}

/* tokenizer_config.json's chat_template, else chat_template.jinja, else chat_template.json's
 * (SpecialVocab reads them only when tokenizer_config.json exists). */
static int s_chat_template(struct s_vocab *v)
{
	const json_t *t = json_object_get(v->tcfg, "chat_template");
	char path[4096];
	char *text = NULL;
	size_t len = 0;
	json_t *cj = NULL;
	int rc;

	if (!v->tcfg)
		return 0;
	if (json_is_string(t))
		return ns_gguf_meta_str(v->g, "tokenizer.chat_template", json_string_value(t),
					json_string_length(t));
	if (json_is_array(t))
		return s_template_list(v, t);
	snprintf(path, sizeof(path), "%s/chat_template.jinja", v->dir);
	rc = s_read_text(path, &text, &len);
	if (rc) {
		ns_errf(v->err, v->errlen, "%s: cannot read it (%s)", path, strerror(-rc));
		return rc;
	}
	if (text) {
		rc = ns_gguf_meta_str(v->g, "tokenizer.chat_template", text, len);
		free(text);
		return rc;
	}
	if ((rc = s_load_json(v, "chat_template.json", &cj)))
		return rc;
	t = json_object_get(cj, "chat_template");
	if (json_is_string(t))
		rc = ns_gguf_meta_str(v->g, "tokenizer.chat_template", json_string_value(t),
				      json_string_length(t));
	else if (json_is_array(t))
		rc = s_template_list(v, t);
	json_decref(cj);
	return rc;
}

static int s_vocab(struct s_vocab *v, uint32_t n_vocab)
{
	const json_t *model = json_object_get(v->tok, "model");
	const char *type = json_string_value(json_object_get(model, "type"));
	const char *pre = NULL;
	int rc;

	if (!type || strcmp(type, "BPE") || json_is_true(json_object_get(model, "byte_fallback")))
		return s_bad(v, "only a byte-level BPE vocabulary (model.type BPE without "
			     "byte_fallback) is read from tokenizer.json");
	if ((rc = s_pre(v, model, &pre)) ||
	    (rc = ns_gguf_meta_str(v->g, "tokenizer.ggml.model", "gpt2", 4)) ||
	    (rc = ns_gguf_meta_str(v->g, "tokenizer.ggml.pre", pre, strlen(pre))) ||
	    (rc = s_tokens(v, model, n_vocab)) ||
	    (rc = s_merges(v, model)) ||
	    (rc = s_special_ids(v)))
		return rc;
	return s_chat_template(v);
}

int ns_hf_vocab_load(const char *dir, uint32_t n_vocab, struct ns_gguf *g, char *err,
		     size_t errlen)
{
	struct s_vocab v = { .dir = dir, .err = err, .errlen = errlen, .g = g };
	json_error_t je;
	FILE *f;
	int rc;

	if (snprintf(v.path, sizeof(v.path), "%s/tokenizer.json", dir) >= (int)sizeof(v.path)) {
		ns_errf(err, errlen, "%s: path too long", dir);
		return -ENAMETOOLONG;
	}
	f = fopen(v.path, "r");
	if (!f)
		return 0;
	fclose(f);
	v.tok = json_load_file(v.path, 0, &je);
	if (!v.tok || !json_is_object(v.tok)) {
		ns_errf(err, errlen, "%s: line %d: not a JSON object (%s)", v.path, je.line,
			v.tok ? "" : je.text);
		json_decref(v.tok);
		return -EINVAL;
	}
	rc = s_load_json(&v, "tokenizer_config.json", &v.tcfg);
	if (!rc)
		rc = s_load_json(&v, "config.json", &v.cfg);
	if (!rc)
		rc = s_vocab(&v, n_vocab);
	if (rc == -ENOMEM)
		ns_errf(err, errlen, "%s: out of memory", v.path);
	json_decref(v.tok);
	json_decref(v.tcfg);
	json_decref(v.cfg);
	return rc;
}
