/* gguf_meta.c - a struct ns_gguf's metadata built in memory (see gguf_meta.h). */
#include "gguf_meta.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct ns_gguf *ns_gguf_meta_new(const char *path, uint64_t file_size)
{
	struct ns_gguf *g = calloc(1, sizeof(*g));

	if (!g)
		return NULL;
	g->path = strdup(path);
	if (!g->path) {
		free(g);
		return NULL;
	}
	g->file_size = file_size;
	g->alignment = NS_GGUF_DEFAULT_ALIGNMENT;
	return g;
}

static void s_free_value(struct ns_gguf_value *v)
{
	if (v->type == NS_GGUF_STRING) {
		free(v->v.str.s);
	} else if (v->type == NS_GGUF_ARRAY) {
		if (v->v.arr.item_type == NS_GGUF_STRING) {
			struct ns_gguf_str *s = v->v.arr.items;

			for (uint64_t i = 0; s && i < v->v.arr.n; i++)
				free(s[i].s);
		}
		free(v->v.arr.items);
	}
	memset(v, 0, sizeof(*v));
}

/* Store v under key (taking over what v owns, also on failure). */
static int s_put(struct ns_gguf *g, const char *key, struct ns_gguf_value *v)
{
	struct ns_gguf_kv *kv;

	for (uint64_t i = 0; i < g->n_kv; i++) {
		if (!strcmp(g->kv[i].key.s, key)) {
			s_free_value(&g->kv[i].value);
			g->kv[i].value = *v;
			return 0;
		}
	}
	kv = realloc(g->kv, (size_t)(g->n_kv + 1) * sizeof(*kv));
	if (!kv)
		goto oom;
	g->kv = kv;
	kv = &g->kv[g->n_kv];
	memset(kv, 0, sizeof(*kv));
	kv->key.s = strdup(key);
	if (!kv->key.s)
		goto oom;
	kv->key.len = strlen(key);
	kv->value = *v;
	g->n_kv++;
	return 0;
oom:
	s_free_value(v);
	return -ENOMEM;
}

int ns_gguf_meta_u32(struct ns_gguf *g, const char *key, uint32_t x)
{
	struct ns_gguf_value v = { .type = NS_GGUF_U32, .v.u64 = x };

	return s_put(g, key, &v);
}

int ns_gguf_meta_i32(struct ns_gguf *g, const char *key, int32_t x)
{
	struct ns_gguf_value v = { .type = NS_GGUF_I32, .v.i64 = x };

	return s_put(g, key, &v);
}

int ns_gguf_meta_f32(struct ns_gguf *g, const char *key, float x)
{
	struct ns_gguf_value v = { .type = NS_GGUF_F32, .v.f64 = x }; /* widened, as gguf.c does */

	return s_put(g, key, &v);
}

int ns_gguf_meta_bool(struct ns_gguf *g, const char *key, bool x)
{
	struct ns_gguf_value v = { .type = NS_GGUF_BOOL, .v.b = x };

	return s_put(g, key, &v);
}

int ns_gguf_meta_str(struct ns_gguf *g, const char *key, const char *s, size_t len)
{
	struct ns_gguf_value v = { .type = NS_GGUF_STRING };

	v.v.str.s = malloc(len + 1);
	if (!v.v.str.s)
		return -ENOMEM;
	memcpy(v.v.str.s, s, len);
	v.v.str.s[len] = '\0';
	v.v.str.len = len;
	return s_put(g, key, &v);
}

int ns_gguf_meta_arr_i32(struct ns_gguf *g, const char *key, const int32_t *x, uint64_t n)
{
	struct ns_gguf_value v = { .type = NS_GGUF_ARRAY };
	uint8_t *items = malloc(n ? (size_t)n * 4 : 1);

	if (!items)
		return -ENOMEM;
	for (uint64_t i = 0; i < n; i++) { /* little-endian items, as read from a file */
		uint32_t u = (uint32_t)x[i];

		for (int b = 0; b < 4; b++)
			items[4 * i + (uint64_t)b] = (uint8_t)(u >> (8 * b));
	}
	v.v.arr.item_type = NS_GGUF_I32;
	v.v.arr.n = n;
	v.v.arr.items = items;
	return s_put(g, key, &v);
}

int ns_gguf_meta_take_arr_str(struct ns_gguf *g, const char *key, struct ns_gguf_str *items,
			      uint64_t n)
{
	struct ns_gguf_value v = { .type = NS_GGUF_ARRAY };

	v.v.arr.item_type = NS_GGUF_STRING;
	v.v.arr.n = n;
	v.v.arr.items = items;
	return s_put(g, key, &v);
}
