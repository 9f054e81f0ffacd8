/* tok_load.c - build a tokenizer from GGUF tokenizer.* metadata.
 *
 * Besides the stored arrays, a few facts are derived from token texts, as every GGUF consumer
 * must (converters do not write them): the end-of-generation set (<|eot_id|>, <|im_end|>,
 * <|return|>, ...), the end-of-turn token, and attribute fixes for families whose converter
 * writes them wrong (a "</s>" typed NORMAL that is an EOG token, gpt-oss harmony tokens that
 * must be rendered, Phi-3's right-stripping special tokens). The rules follow llama.cpp's
 * loader so ids and renderings agree with the reference. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "ns_util.h"
#include "tok_internal.h"

static const char *const s_eot_names[] = {
	"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
	"<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]", "<\xef\xbd\x9c" "end\xe2\x96\x81of"
	"\xe2\x96\x81sentence\xef\xbd\x9c>", "<end_of_utterance>",
};

static const char *const s_eog_names[] = {
	"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>",
	"<|calls|>", "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>",
	"[EOT]", "[EOS]", "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>",
	"<|tool_response>", "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>",
	"[e~[",
};

/* FIM tokens: pad/repo/file-sep end generation; all of them are control tokens. */
static const char *const s_fim_eog_names[] = {
	"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]",
	"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>", "<|file_sep|>",
};

static const char *const s_fim_other_names[] = {
	"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<PRE>", "\xe2\x96\x81<PRE>",
	"<|code_prefix|>", "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<SUF>",
	"\xe2\x96\x81<SUF>", "<|code_suffix|>", "<|fim_middle|>", "<fim-middle>", "<fim_middle>",
	"<MID>", "\xe2\x96\x81<MID>", "<|code_middle|>",
};

static int32_t s_find(const struct ns_tok *t, const char *text)
{
	return ns_strmap_get(&t->text_to_id, text, strlen(text));
}

static const char *s_text(const struct ns_tok *t, int32_t id)
{
	return t->blob + t->tokens[id].off;
}

static void s_special_id(const struct ns_gguf *g, const char *key, uint32_t n_vocab, int32_t *id)
{
	uint64_t v;

	if (*id >= 0 && (uint32_t)*id >= n_vocab)
		*id = -1;
	if (ns_gguf_get_u64(g, key, &v) && v < n_vocab)
		*id = (int32_t)v;
}

static int s_eog_add(struct ns_tok *t, int32_t id)
{
	int32_t *p;

	if (id < 0)
		return 0;
	for (size_t i = 0; i < t->n_eog; i++)
		if (t->eog[i] == id)
			return 0;
	p = realloc(t->eog, (t->n_eog + 1) * sizeof(*p));
	if (!p)
		return -ENOMEM;
	t->eog = p;
	t->eog[t->n_eog++] = id;
	return 0;
}

static void s_eog_remove(struct ns_tok *t, int32_t id)
{
	for (size_t i = 0; i < t->n_eog; i++)
		if (t->eog[i] == id)
			t->eog[i] = t->eog[--t->n_eog];
}

static int s_load_tokens(struct ns_tok *t, const struct ns_gguf *g, char *err, size_t errlen)
{
	const struct ns_gguf_value *toks = ns_gguf_get_arr(g, "tokenizer.ggml.tokens");
	const struct ns_gguf_value *scores = ns_gguf_get_arr(g, "tokenizer.ggml.scores");
	const struct ns_gguf_value *types = ns_gguf_get_arr(g, "tokenizer.ggml.token_type");
	const struct ns_gguf_str *s;
	uint64_t total = 0;
	size_t off = 0;

	if (!toks || toks->v.arr.item_type != NS_GGUF_STRING || toks->v.arr.n == 0) {
		ns_errf(err, errlen, "tokenizer.ggml.tokens is missing or not an array of strings");
		return -EINVAL;
	}
	if (toks->v.arr.n > INT32_MAX - 1) {
		ns_errf(err, errlen, "tokenizer.ggml.tokens: %llu tokens is too many",
			(unsigned long long)toks->v.arr.n);
		return -EINVAL;
	}
	t->n_vocab = (uint32_t)toks->v.arr.n;
	if (scores && (!ns_gguf_vtype_size(scores->v.arr.item_type) ||
		       scores->v.arr.n < t->n_vocab)) {
		ns_errf(err, errlen, "tokenizer.ggml.scores: %llu numbers for %u tokens",
			(unsigned long long)scores->v.arr.n, t->n_vocab);
		return -EINVAL;
	}
	if (types && (types->v.arr.item_type != NS_GGUF_I32 || types->v.arr.n < t->n_vocab)) {
		ns_errf(err, errlen, "tokenizer.ggml.token_type: not %u INT32 values", t->n_vocab);
		return -EINVAL;
	}
	s = toks->v.arr.items;
	for (uint32_t i = 0; i < t->n_vocab; i++)
		total += s[i].len + 1;
	if (total > UINT32_MAX) {
		ns_errf(err, errlen, "tokenizer.ggml.tokens: %llu bytes of text is too much",
			(unsigned long long)total);
		return -EINVAL;
	}
	t->tokens = calloc(t->n_vocab, sizeof(*t->tokens));
	t->blob = malloc(total ? total : 1);
	if (!t->tokens || !t->blob || ns_strmap_init(&t->text_to_id, t->n_vocab, t->blob))
		return -ENOMEM;
	for (uint32_t i = 0; i < t->n_vocab; i++) {
		struct ns_tok_token *tk = &t->tokens[i];

		memcpy(t->blob + off, s[i].s, s[i].len);
		t->blob[off + s[i].len] = '\0';
		tk->off = (uint32_t)off;
		tk->len = (uint32_t)s[i].len;
		off += s[i].len + 1;
		tk->score = scores ? (float)ns_gguf_arr_f64(scores, i) : 0.0f;
		switch (types ? ns_gguf_arr_i64(types, i) : 1) {
		case 1: tk->attr = NS_TOK_ATTR_NORMAL; break;
		case 2: tk->attr = NS_TOK_ATTR_UNKNOWN; break;
		case 3: tk->attr = NS_TOK_ATTR_CONTROL; break;
		case 4: tk->attr = NS_TOK_ATTR_USER_DEFINED; break;
		case 5: tk->attr = NS_TOK_ATTR_UNUSED; break;
		case 6: tk->attr = NS_TOK_ATTR_BYTE; break;
		default: tk->attr = NS_TOK_ATTR_UNDEFINED; break;
		}
		/* An empty or duplicate text cannot be looked up; the first id of a text wins. */
		if (tk->len)
			(void)ns_strmap_put(&t->text_to_id, tk->off, tk->len, (int32_t)i);
	}
	return 0;
}

static int s_load_merges(struct ns_tok *t, const struct ns_gguf *g, char *err, size_t errlen)
{
	const struct ns_gguf_value *m = ns_gguf_get_arr(g, "tokenizer.ggml.merges");
	const struct ns_gguf_str *s;
	size_t maxlen = 0;
	char *buf;

	if (!m || m->v.arr.item_type != NS_GGUF_STRING) {
		ns_errf(err, errlen, "tokenizer.ggml.merges is missing or not an array of strings");
		return -EINVAL;
	}
	if (m->v.arr.n > INT32_MAX) {
		ns_errf(err, errlen, "tokenizer.ggml.merges: too many merges");
		return -EINVAL;
	}
	s = m->v.arr.items;
	for (uint64_t i = 0; i < m->v.arr.n; i++)
		if (s[i].len > maxlen)
			maxlen = s[i].len;
	if (ns_pairmap_init(&t->merges, m->v.arr.n) || !(buf = malloc(maxlen + 1)))
		return -ENOMEM;
	for (uint64_t i = 0; i < m->v.arr.n; i++) {
		const char *sp = s[i].len > 1 ? memchr(s[i].s + 1, ' ', s[i].len - 1) : NULL;
		size_t ll, rl;
		int32_t a, b, ab;

		if (!sp)
			continue; /* not "A B": never matches a pair */
		ll = (size_t)(sp - s[i].s);
		rl = s[i].len - ll - 1;
		a = ns_strmap_get(&t->text_to_id, s[i].s, ll);
		b = ns_strmap_get(&t->text_to_id, sp + 1, rl);
		memcpy(buf, s[i].s, ll);
		memcpy(buf + ll, sp + 1, rl);
		ab = ns_strmap_get(&t->text_to_id, buf, ll + rl);
		/* A merge whose parts or result are no tokens can never apply to token symbols. */
		if (a >= 0 && b >= 0 && ab >= 0)
			ns_pairmap_put(&t->merges, a, b, (int32_t)i, ab);
	}
	free(buf);
	return 0;
}

static void s_set_bytes(struct ns_tok *t)
{
	for (int b = 0; b < 256; b++) {
		char hex[8], ch[4];
		int32_t id = -1;

		snprintf(hex, sizeof(hex), "<0x%02X>", b);
		if (t->byte_encode) {
			size_t l = ns_utf8_encode(ns_tok_byte_to_cp((uint8_t)b), ch);

			id = ns_strmap_get(&t->text_to_id, ch, l);
		} else {
			id = s_find(t, hex);
			if (id < 0 && t->kind == NS_TOK_SPM) {
				ch[0] = (char)b;
				id = ns_strmap_get(&t->text_to_id, ch, 1);
			}
		}
		t->byte_to_id[b] = id;
	}
}

static void s_mark_control(struct ns_tok *t, int32_t id)
{
	if (id >= 0)
		t->tokens[id].attr |= NS_TOK_ATTR_CONTROL;
}

static int s_derive_special(struct ns_tok *t, const struct ns_gguf *g)
{
	bool harmony = s_find(t, "<|return|>") >= 0;
	const char *name = ns_gguf_get_str(g, "general.name");
	int32_t id;
	int rc = 0;

	if (t->eot < 0) {
		for (size_t i = 0; i < NS_ARRAY_LEN(s_eot_names) && t->eot < 0; i++) {
			/* harmony's <|end|> ends a message, not the turn */
			if (harmony && !strcmp(s_eot_names[i], "<|end|>"))
				continue;
			t->eot = s_find(t, s_eot_names[i]);
		}
		s_mark_control(t, t->eot);
	}
	if (t->eom < 0) {
		t->eom = s_find(t, "<|eom_id|>");
		s_mark_control(t, t->eom);
	}
	for (size_t i = 0; i < NS_ARRAY_LEN(s_fim_other_names); i++)
		s_mark_control(t, s_find(t, s_fim_other_names[i]));
	for (size_t i = 0; i < NS_ARRAY_LEN(s_fim_eog_names); i++) {
		id = s_find(t, s_fim_eog_names[i]);
		s_mark_control(t, id);
		rc |= s_eog_add(t, id);
	}
	for (size_t i = 0; i < NS_ARRAY_LEN(s_eog_names); i++) {
		id = s_find(t, s_eog_names[i]);
		s_mark_control(t, id);
		rc |= s_eog_add(t, id);
	}
	/* gpt-oss harmony: these structure tokens are always rendered */
	static const char *const harmony_user[] = {
		"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>",
	};
	for (size_t i = 0; i < NS_ARRAY_LEN(harmony_user); i++)
		if ((id = s_find(t, harmony_user[i])) >= 0)
			t->tokens[id].attr = NS_TOK_ATTR_USER_DEFINED;
	rc |= s_eog_add(t, t->eos);
	rc |= s_eog_add(t, t->eot);
	rc |= s_eog_add(t, t->eom);
	if (rc)
		return -ENOMEM;
	/* <|end|> is no EOG where <|return|> and <|call|> (or <|calls|>/<|flush|>) exist */
	id = s_find(t, "<|end|>");
	if (id >= 0 && ((harmony && s_find(t, "<|call|>") >= 0) ||
			(s_find(t, "<|calls|>") >= 0 && s_find(t, "<|flush|>") >= 0))) {
		s_eog_remove(t, id);
		t->tokens[id].attr = NS_TOK_ATTR_USER_DEFINED;
	}
	/* gemma4: </s> is text */
	id = s_find(t, "</s>");
	if (id >= 0 && s_find(t, "<|tool_response>") >= 0) {
		s_eog_remove(t, id);
		t->tokens[id].attr = NS_TOK_ATTR_NORMAL;
	}
	/* special tokens split out of text, longest first (ties: lower id) */
	t->special = malloc(t->n_vocab * sizeof(*t->special));
	if (!t->special)
		return -ENOMEM;
	for (uint32_t i = 0; i < t->n_vocab; i++)
		if (t->tokens[i].attr & (NS_TOK_ATTR_CONTROL | NS_TOK_ATTR_USER_DEFINED |
					 NS_TOK_ATTR_UNKNOWN) && t->tokens[i].len)
			t->special[t->n_special++] = (int32_t)i;
	for (size_t i = 1; i < t->n_special; i++) { /* insertion sort: stable, lists are short */
		int32_t x = t->special[i];
		size_t j = i;

		while (j > 0 && t->tokens[t->special[j - 1]].len < t->tokens[x].len) {
			t->special[j] = t->special[j - 1];
			j--;
		}
		t->special[j] = x;
	}
	/* Phi-3: special tokens swallow the whitespace after them, except <unk> <s> <|endoftext|> */
	if (name) {
		char low[128];
		size_t k;

		for (k = 0; k < sizeof(low) - 1 && name[k]; k++)
			low[k] = (char)tolower((unsigned char)name[k]);
		low[k] = '\0';
		if (strstr(low, "phi-3") || strstr(low, "phi3")) {
			static const char *const keep[] = { "<unk>", "<s>", "<|endoftext|>" };

			for (size_t i = 0; i < t->n_special; i++)
				t->tokens[t->special[i]].attr |= NS_TOK_ATTR_RSTRIP;
			if ((id = s_find(t, "</s>")) >= 0)
				t->tokens[id].attr |= NS_TOK_ATTR_RSTRIP;
			for (size_t i = 0; i < NS_ARRAY_LEN(keep); i++)
				if ((id = s_find(t, keep[i])) >= 0)
					t->tokens[id].attr &= ~(uint32_t)NS_TOK_ATTR_RSTRIP;
		}
	}
	return 0;
}

struct ns_tok *ns_tok_new(const struct ns_gguf *g, char *err, size_t errlen)
{
	const char *model = ns_gguf_get_str(g, "tokenizer.ggml.model");
	const char *pre = ns_gguf_get_str(g, "tokenizer.ggml.pre");
	struct ns_tok *t;
	bool b;
	int rc;

	if (!model) {
		ns_errf(err, errlen, "no tokenizer.ggml.model: the file has no vocabulary");
		return NULL;
	}
	t = calloc(1, sizeof(*t));
	if (!t) {
		ns_errf(err, errlen, "out of memory");
		return NULL;
	}
	t->bos = t->eos = t->eot = t->eom = t->unk = t->pad = -1;
	if (!strcmp(model, "gpt2")) {
		t->kind = NS_TOK_BPE;
		if (!pre || !*pre)
			pre = "default";
		t->byte_encode = true;
	} else if (!strcmp(model, "gemma4")) {
		t->kind = NS_TOK_SPM_BPE;
		pre = "gemma4";
		t->escape_whitespace = true;
	} else if (!strcmp(model, "llama")) {
		t->kind = NS_TOK_SPM;
		pre = NULL;
		t->bos = 1;
		t->eos = 2;
		t->unk = 0;
		t->add_space_prefix = true;
		t->escape_whitespace = true;
		t->add_bos = true;
	} else {
		ns_errf(err, errlen, "unsupported tokenizer.ggml.model '%s' (supported: gpt2, llama, "
			"gemma4)", model);
		goto fail;
	}
	if (pre) {
		t->pre = ns_tok_pre_find(pre);
		if (!t->pre) {
			ns_errf(err, errlen, "unknown pre-tokenizer tokenizer.ggml.pre = '%s'", pre);
			goto fail;
		}
		snprintf(t->pre_name, sizeof(t->pre_name), "%s", pre);
		t->clean_spaces = t->pre->clean_spaces;
		t->ignore_merges = t->pre->ignore_merges;
		t->add_bos = t->pre->add_bos || t->kind == NS_TOK_SPM_BPE;
		t->nfc = t->pre->nfc;
		if (t->kind == NS_TOK_SPM_BPE)
			t->clean_spaces = true;
	} else {
		snprintf(t->pre_name, sizeof(t->pre_name), "spm");
	}
	rc = s_load_tokens(t, g, err, errlen);
	if (rc)
		goto fail_rc;
	if (t->kind != NS_TOK_SPM && (rc = s_load_merges(t, g, err, errlen)))
		goto fail_rc;
	s_set_bytes(t);
	if (ns_gguf_get_bool(g, "tokenizer.ggml.add_space_prefix", &b))
		t->add_space_prefix = b;
	s_special_id(g, "tokenizer.ggml.bos_token_id", t->n_vocab, &t->bos);
	s_special_id(g, "tokenizer.ggml.eos_token_id", t->n_vocab, &t->eos);
	s_special_id(g, "tokenizer.ggml.eot_token_id", t->n_vocab, &t->eot);
	s_special_id(g, "tokenizer.ggml.eom_token_id", t->n_vocab, &t->eom);
	s_special_id(g, "tokenizer.ggml.unknown_token_id", t->n_vocab, &t->unk);
	s_special_id(g, "tokenizer.ggml.padding_token_id", t->n_vocab, &t->pad);
	if (ns_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &b))
		t->add_bos = b;
	if (ns_gguf_get_bool(g, "tokenizer.ggml.add_eos_token", &b))
		t->add_eos = b;
	if (t->kind == NS_TOK_SPM_BPE)
		t->add_bos = true;
	if ((t->add_bos && t->bos < 0) || (t->add_eos && t->eos < 0)) {
		ns_errf(err, errlen, "the vocabulary asks to add %s but has no %s token id",
			t->add_bos && t->bos < 0 ? "BOS" : "EOS", t->add_bos && t->bos < 0 ? "BOS" : "EOS");
		goto fail;
	}
	if ((rc = s_derive_special(t, g)))
		goto fail_rc;
	if (t->pre && (rc = ns_tok_regex_compile(t, err, errlen)))
		goto fail;
	if ((rc = ns_tok_build_pieces(t)))
		goto fail_rc;
	return t;
fail_rc:
	if (rc == -ENOMEM)
		ns_errf(err, errlen, "out of memory loading the vocabulary");
fail:
	ns_tok_destroy(&t);
	return NULL;
}

void ns_tok_destroy(struct ns_tok **tp)
{
	struct ns_tok *t = tp ? *tp : NULL;

	if (!t)
		return;
	ns_tok_regex_free(t);
	ns_strmap_free(&t->text_to_id);
	ns_pairmap_free(&t->merges);
	free(t->tokens);
	free(t->blob);
	free(t->eog);
	free(t->special);
	free(t->piece_off);
	free(t->pieces);
	free(t);
	*tp = NULL;
}

size_t ns_tok_n_vocab(const struct ns_tok *t) { return t->n_vocab; }
enum ns_tok_kind ns_tok_kind(const struct ns_tok *t) { return t->kind; }
const char *ns_tok_pre(const struct ns_tok *t) { return t->pre_name; }
int32_t ns_tok_bos(const struct ns_tok *t) { return t->bos; }
int32_t ns_tok_eos(const struct ns_tok *t) { return t->eos; }
int32_t ns_tok_eot(const struct ns_tok *t) { return t->eot; }
bool ns_tok_add_bos(const struct ns_tok *t) { return t->add_bos; }
bool ns_tok_add_eos(const struct ns_tok *t) { return t->add_eos; }

uint32_t ns_tok_attr(const struct ns_tok *t, int32_t id)
{
	return id >= 0 && (uint32_t)id < t->n_vocab ? t->tokens[id].attr : 0;
}

bool ns_tok_is_eog(const struct ns_tok *t, int32_t id)
{
	for (size_t i = 0; i < t->n_eog; i++)
		if (t->eog[i] == id)
			return true;
	return false;
}

const char *ns_tok_text(const struct ns_tok *t, int32_t id, size_t *len)
{
	if (id < 0 || (uint32_t)id >= t->n_vocab)
		return NULL;
	if (len)
		*len = t->tokens[id].len;
	return s_text(t, id);
}

int32_t ns_tok_find(const struct ns_tok *t, const char *text, size_t len)
{
	return ns_strmap_get(&t->text_to_id, text, len);
}
