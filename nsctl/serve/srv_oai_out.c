/* srv_oai_out.c - responses, stream chunks and errors of the OpenAI API (srv_oai.h). */
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "json_text.h"
#include "srv_oai.h"
#include "tokenizer.h"

json_t *srv_oai_error(const struct srv_error *e)
{
	return json_pack("{s:{s:s, s:s, s:s?, s:s?}}", "error", "message", e->message, "type",
			 e->type ? e->type : "server_error", "param", e->param[0] ? e->param : NULL,
			 "code", e->code);
}

const char *srv_finish_name(enum srv_finish f)
{
	return f == SRV_FIN_STOP ? "stop" : f == SRV_FIN_LENGTH ? "length" : NULL;
}

void srv_resp_init(struct srv_resp *r, const struct srv_model_info *mi, enum srv_kind kind,
		   const struct srv_params *p)
{
	static const char al[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
	unsigned char rnd[24];
	size_t n;

	memset(r, 0, sizeof(*r));
	r->mi = mi;
	r->kind = kind;
	r->model = p->model;
	r->created = (uint64_t)time(NULL);
	r->logprobs = p->logprobs;
	r->top_logprobs = p->top_logprobs;
	r->n_prompt = p->n_prompt;
	if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd))
		for (size_t i = 0; i < sizeof(rnd); i++)
			rnd[i] = (unsigned char)(r->created >> (i % 8) ^ i * 131);
	n = (size_t)snprintf(r->id, sizeof(r->id), "%s", kind == SRV_CHAT ? "chatcmpl-" : "cmpl-");
	for (size_t i = 0; i < sizeof(rnd) && n + 1 < sizeof(r->id); i++)
		r->id[n++] = al[rnd[i] % (sizeof(al) - 1)];
	r->id[n] = 0;
}

/* A token's text and bytes: the piece it decodes to, special tokens as their text. */
static json_t *s_token_text(const struct srv_model_info *mi, int32_t id, json_t **bytes)
{
	const char *s = "";
	size_t n = 0;

	ns_tok_piece(mi->tok, id, true, &s, &n);
	if (bytes) {
		*bytes = json_array();
		for (size_t i = 0; *bytes && i < n; i++)
			json_array_append_new(*bytes, json_integer((unsigned char)s[i]));
	}
	return ns_json_text(s, n);
}

/* chat: {"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}, ...]} */
static json_t *s_chat_logprobs(const struct srv_resp *r, const struct srv_token_lp *lps,
			       uint32_t n)
{
	json_t *content = json_array();

	for (uint32_t i = 0; content && i < n; i++) {
		json_t *top = json_array(), *bytes = NULL, *tok;

		for (uint32_t k = 0; top && k < lps[i].n_top && k < r->top_logprobs; k++) {
			json_t *b = NULL, *t = s_token_text(r->mi, lps[i].top[k].id, &b);

			json_array_append_new(top, json_pack("{s:o, s:f, s:o}", "token", t,
							      "logprob", (double)lps[i].top[k].lp,
							      "bytes", b));
		}
		tok = s_token_text(r->mi, lps[i].chosen.id, &bytes);
		json_array_append_new(content, json_pack("{s:o, s:f, s:o, s:o}", "token", tok,
							 "logprob", (double)lps[i].chosen.lp,
							 "bytes", bytes, "top_logprobs", top));
	}
	return json_pack("{s:o}", "content", content);
}

/* completions: {"tokens": [...], "token_logprobs": [...], "top_logprobs": [{tok: lp}],
 * "text_offset": [...]}; offset: bytes of text before the first of these tokens. */
static json_t *s_completion_logprobs(const struct srv_resp *r, const struct srv_token_lp *lps,
				     uint32_t n, size_t *offset)
{
	json_t *toks = json_array(), *lp = json_array(), *top = json_array(), *off = json_array();

	for (uint32_t i = 0; toks && lp && top && off && i < n; i++) {
		json_t *t = json_object();
		const char *s = "";
		size_t len = 0;

		for (uint32_t k = 0; t && k < lps[i].n_top && k < r->top_logprobs; k++) {
			json_t *name = s_token_text(r->mi, lps[i].top[k].id, NULL);

			if (name)
				json_object_set_new(t, json_string_value(name),
						    json_real(lps[i].top[k].lp));
			json_decref(name);
		}
		json_array_append_new(toks, s_token_text(r->mi, lps[i].chosen.id, NULL));
		json_array_append_new(lp, json_real(lps[i].chosen.lp));
		json_array_append_new(top, t);
		json_array_append_new(off, json_integer((json_int_t)*offset));
		ns_tok_piece(r->mi->tok, lps[i].chosen.id, true, &s, &len);
		*offset += len;
	}
	return json_pack("{s:o, s:o, s:o, s:o}", "tokens", toks, "token_logprobs", lp,
			 "top_logprobs", top, "text_offset", off);
}

static json_t *s_usage(const struct srv_resp *r, const struct srv_take *t)
{
	return json_pack("{s:I, s:I, s:I, s:{s:I}}", "prompt_tokens", (json_int_t)r->n_prompt,
			 "completion_tokens", (json_int_t)t->n_gen, "total_tokens",
			 (json_int_t)r->n_prompt + t->n_gen, "prompt_tokens_details",
			 "cached_tokens", (json_int_t)t->n_cached);
}

static json_t *s_envelope(const struct srv_resp *r, const char *object, json_t *choices)
{
	return json_pack("{s:s, s:s, s:I, s:s, s:s, s:o}", "id", r->id, "object", object,
			 "created", (json_int_t)r->created, "model", r->model,
			 "system_fingerprint", "neurostream", "choices", choices);
}

static json_t *s_text_or_null(const struct ns_text *t, bool null_if_empty)
{
	if (!t->len && null_if_empty)
		return json_null();
	return ns_json_text(t->buf ? t->buf : "", t->len);
}

json_t *srv_oai_full(const struct srv_resp *r, const struct srv_take *t)
{
	const char *fin = srv_finish_name(t->finish);
	json_t *choice, *out;
	size_t off = 0;

	if (r->kind == SRV_CHAT) {
		json_t *msg = json_pack("{s:s, s:o}", "role", "assistant", "content",
					s_text_or_null(&t->answer, false));

		if (msg && t->reasoning.len)
			json_object_set_new(msg, "reasoning_content",
					    s_text_or_null(&t->reasoning, false));
		choice = json_pack("{s:i, s:o, s:o, s:s?}", "index", 0, "message", msg,
				   "logprobs", r->logprobs ? s_chat_logprobs(r, t->lps, t->n_lps) :
				   json_null(), "finish_reason", fin);
	} else {
		choice = json_pack("{s:i, s:o, s:o, s:s?}", "index", 0, "text",
				   s_text_or_null(&t->answer, false), "logprobs", r->logprobs ?
				   s_completion_logprobs(r, t->lps, t->n_lps, &off) : json_null(),
				   "finish_reason", fin);
	}
	out = s_envelope(r, r->kind == SRV_CHAT ? "chat.completion" : "text_completion",
			 json_pack("[o]", choice));
	if (out)
		json_object_set_new(out, "usage", s_usage(r, t));
	return out;
}

json_t *srv_oai_chunk(struct srv_resp *r, const struct srv_take *t, bool role,
		      const char *finish)
{
	json_t *choice;
	size_t off = r->text_offset; /* text_offset counts from the start of the reply */

	if (r->kind == SRV_CHAT) {
		json_t *delta = json_object();

		if (delta && role)
			json_object_set_new(delta, "role", json_string("assistant"));
		if (delta && t->reasoning.len)
			json_object_set_new(delta, "reasoning_content",
					    s_text_or_null(&t->reasoning, false));
		if (delta && (t->answer.len || role))
			json_object_set_new(delta, "content", s_text_or_null(&t->answer, false));
		choice = json_pack("{s:i, s:o, s:o, s:s?}", "index", 0, "delta", delta,
				   "logprobs", r->logprobs && t->n_lps ?
				   s_chat_logprobs(r, t->lps, t->n_lps) : json_null(),
				   "finish_reason", finish);
	} else {
		choice = json_pack("{s:i, s:o, s:o, s:s?}", "index", 0, "text",
				   s_text_or_null(&t->answer, false), "logprobs",
				   r->logprobs && t->n_lps ?
				   s_completion_logprobs(r, t->lps, t->n_lps, &off) : json_null(),
				   "finish_reason", finish);
		r->text_offset = off;
	}
	return s_envelope(r, r->kind == SRV_CHAT ? "chat.completion.chunk" : "text_completion",
			  json_pack("[o]", choice));
}

json_t *srv_oai_usage_chunk(const struct srv_resp *r, const struct srv_take *t)
{
	json_t *out = s_envelope(r, r->kind == SRV_CHAT ? "chat.completion.chunk" :
				 "text_completion", json_array());

	if (out)
		json_object_set_new(out, "usage", s_usage(r, t));
	return out;
}

json_t *srv_oai_models(const struct srv_model_info *mi)
{
	return json_pack("{s:s, s:[{s:s, s:s, s:I, s:s, s:{s:I, s:I}}]}", "object", "list",
			 "data", "id", mi->id, "object", "model", "created",
			 (json_int_t)mi->created, "owned_by", "neurostream", "meta", "n_ctx",
			 (json_int_t)mi->n_ctx, "n_vocab", (json_int_t)mi->n_vocab);
}
