/* api_vocab.c - neurostream.h's read-only accessors: version, special tokens, pieces,
 * detokenization, model metadata, the options in effect. Nothing here talks to a child. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "engine_internal.h"
#include "gguf.h"
#include "model.h"
#include "ns_util.h"
#include "tokenizer.h"

#define S_STR(x) #x
#define S_XSTR(x) S_STR(x)

const char *ns_version(void)
{
	return S_XSTR(NS_VERSION_MAJOR) "." S_XSTR(NS_VERSION_MINOR) "." S_XSTR(NS_VERSION_PATCH);
}

int32_t ns_engine_token_bos(const struct ns_engine *e)
{
	return ns_tok_bos(e->tok);
}

int32_t ns_engine_token_eos(const struct ns_engine *e)
{
	return ns_tok_eos(e->tok);
}

int32_t ns_engine_token_eot(const struct ns_engine *e)
{
	return ns_tok_eot(e->tok);
}

bool ns_engine_token_is_eog(const struct ns_engine *e, int32_t id)
{
	return id >= 0 && (uint32_t)id < e->n_vocab && ns_tok_is_eog(e->tok, id);
}

int ns_engine_token_piece(const struct ns_engine *e, int32_t id, bool special,
			  const char **piece, size_t *len)
{
	return ns_tok_piece(e->tok, id, special, piece, len);
}

const char *ns_engine_token_text(const struct ns_engine *e, int32_t id)
{
	size_t len;

	return ns_tok_text(e->tok, id, &len);
}

int ns_engine_detokenize(const struct ns_engine *e, const int32_t *ids, size_t n,
			 bool remove_special, bool unparse_special, char **out, size_t *len)
{
	*out = NULL;
	*len = 0;
	for (size_t i = 0; i < n; i++)
		if (ids[i] < 0 || (size_t)ids[i] >= ns_tok_n_vocab(e->tok))
			return -EINVAL;
	return ns_tok_detokenize(e->tok, ids, n, remove_special, unparse_special, out, len);
}

uint64_t ns_engine_meta_count(const struct ns_engine *e)
{
	return ns_model_meta(e->m)->n_kv;
}

const char *ns_engine_meta_key(const struct ns_engine *e, uint64_t i)
{
	const struct ns_gguf *g = ns_model_meta(e->m);

	return i < g->n_kv ? g->kv[i].key.s : NULL;
}

int ns_engine_meta_str(const struct ns_engine *e, const char *key, char *buf, size_t len)
{
	const struct ns_gguf_kv *kv = ns_gguf_find(ns_model_meta(e->m), key);
	const struct ns_gguf_value *v;

	if (!kv)
		return -ENOENT;
	v = &kv->value;
	switch (v->type) {
	case NS_GGUF_U8: case NS_GGUF_U16: case NS_GGUF_U32: case NS_GGUF_U64:
		return snprintf(buf, len, "%" PRIu64, v->v.u64);
	case NS_GGUF_I8: case NS_GGUF_I16: case NS_GGUF_I32: case NS_GGUF_I64:
		return snprintf(buf, len, "%" PRId64, v->v.i64);
	case NS_GGUF_F32: case NS_GGUF_F64:
		return snprintf(buf, len, "%.9g", v->v.f64);
	case NS_GGUF_BOOL:
		return snprintf(buf, len, "%s", v->v.b ? "true" : "false");
	case NS_GGUF_STRING:
		return snprintf(buf, len, "%s", v->v.str.s);
	case NS_GGUF_ARRAY:
		return snprintf(buf, len, "[array of %" PRIu64 " %s]", v->v.arr.n,
				ns_gguf_vtype_name(v->v.arr.item_type));
	default:
		return snprintf(buf, len, "[%s]", ns_gguf_vtype_name(v->type));
	}
}

void ns_engine_get_opts(const struct ns_engine *e, struct ns_engine_opts *out)
{
	*out = e->o;
	out->n_ctx = e->n_ctx;
}

void ns_engine_set_thinking(struct ns_engine *e, bool on)
{
	e->think = on;
}

int ns_parse_size(const char *text, uint64_t *out)
{
	return ns_parse_bytes(text, out);
}

size_t ns_engine_opts_size(void)
{
	return sizeof(struct ns_engine_opts);
}

size_t ns_gen_params_size(void)
{
	return sizeof(struct ns_gen_params);
}

size_t ns_engine_stats_size(void)
{
	return sizeof(struct ns_engine_stats);
}
