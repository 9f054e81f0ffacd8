/* kvcache.h - float32 key/value cache of a decoder, one slab per layer.
 *
 * Layer l keeps K: (n_ctx, kv_dim_k) and V: (n_ctx, kv_dim_v), row = position, where
 * kv_dim_k = n_head_kv * head_dim_k. Positions [0, n_past) are filled; the forward pass
 * writes positions n_past.. and then advances n_past.
 *
 * Ownership: ns_kvcache_new allocates everything; ns_kvcache_destroy(&c) frees and nulls. */
#ifndef NS_KVCACHE_H
#define NS_KVCACHE_H

#include <stdint.h>

struct ns_kvcache {
	uint32_t n_layer;
	uint32_t n_ctx;
	uint32_t kv_dim_k;
	uint32_t kv_dim_v;
	uint32_t n_past; /* positions filled */
	float *k;        /* (n_layer, n_ctx, kv_dim_k) */
	float *v;        /* (n_layer, n_ctx, kv_dim_v) */
};

/* Returns 0, -EOVERFLOW when the sizes do not fit, -ENOMEM. */
int ns_kvcache_new(uint32_t n_layer, uint32_t n_ctx, uint32_t kv_dim_k, uint32_t kv_dim_v,
		   struct ns_kvcache **out);
void ns_kvcache_destroy(struct ns_kvcache **c);

/* Row of position pos in layer l: (kv_dim_k) / (kv_dim_v). pos < n_ctx is the caller's. */
static inline float *ns_kvcache_k(struct ns_kvcache *c, uint32_t l, uint32_t pos)
{
	return c->k + ((uint64_t)l * c->n_ctx + pos) * c->kv_dim_k;
}

static inline float *ns_kvcache_v(struct ns_kvcache *c, uint32_t l, uint32_t pos)
{
	return c->v + ((uint64_t)l * c->n_ctx + pos) * c->kv_dim_v;
}

#endif
