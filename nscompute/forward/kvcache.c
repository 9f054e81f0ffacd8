/* kvcache.c - see kvcache.h. */
#include <errno.h>
#include <stdlib.h>

#include "kvcache.h"
#include "ns_util.h"

static int s_slab(uint32_t n_layer, uint32_t n_ctx, uint32_t dim, float **out)
{
	uint64_t n;

	if (ns_mul_u64_overflow(n_layer, n_ctx, &n) || ns_mul_u64_overflow(n, dim, &n) ||
	    ns_mul_u64_overflow(n, sizeof(float), &n) || n > SIZE_MAX)
		return -EOVERFLOW;
	*out = calloc(1, n ? (size_t)n : 1);
	return *out ? 0 : -ENOMEM;
}

int ns_kvcache_new(uint32_t n_layer, uint32_t n_ctx, uint32_t kv_dim_k, uint32_t kv_dim_v,
		   struct ns_kvcache **out)
{
	struct ns_kvcache *c = calloc(1, sizeof(*c));
	int rc;

	*out = NULL;
	if (!c)
		return -ENOMEM;
	c->n_layer = n_layer;
	c->n_ctx = n_ctx;
	c->kv_dim_k = kv_dim_k;
	c->kv_dim_v = kv_dim_v;
	rc = s_slab(n_layer, n_ctx, kv_dim_k, &c->k);
	if (rc == 0)
		rc = s_slab(n_layer, n_ctx, kv_dim_v, &c->v);
	if (rc < 0) {
		ns_kvcache_destroy(&c);
		return rc;
	}
	*out = c;
	return 0;
}

void ns_kvcache_destroy(struct ns_kvcache **c)
{
	if (!c || !*c)
		return;
	free((*c)->k);
	free((*c)->v);
	free(*c);
	*c = NULL;
}
