/* kvcache.c - see kvcache.h. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "fp16.h" /* modelfile/fp16.h: exact half <-> float, round to nearest even */
#include "kvcache.h"
#include "ns_util.h"

/* *p = a * b * c zeroed bytes, page-aligned (the kernels load whole vectors), checked; *size
 * the mapping's. Anonymous pages: zero until written, so a cache of gigabytes costs nothing
 * to create (a memset of it took over 10 s on a loaded machine, long enough for the
 * supervisor to take nscompute for stuck before its first beat) and is charged as the
 * positions fill. */
static int s_slab(uint64_t a, uint64_t b, uint64_t c, uint8_t **p, size_t *size)
{
	uint64_t n;
	void *m;

	if (ns_mul_u64_overflow(a, b, &n) || ns_mul_u64_overflow(n, c, &n) ||
	    n > SIZE_MAX - 4096)
		return -EOVERFLOW;
	n = n ? n : 1;
	m = mmap(NULL, (size_t)n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return -ENOMEM;
	*p = m;
	*size = (size_t)n;
	return 0;
}

int ns_kvcache_new(uint32_t n_layer, uint32_t n_ctx, uint32_t n_head_kv, uint32_t dk,
		   uint32_t dv, enum ns_kv_type tk, enum ns_kv_type tv, struct ns_kvcache **out)
{
	return ns_kvcache_new_ring(n_layer, n_ctx, n_ctx, n_head_kv, dk, dv, tk, tv, out);
}

int ns_kvcache_new_ring(uint32_t n_layer, uint32_t n_ctx, uint32_t n_slot, uint32_t n_head_kv,
			uint32_t dk, uint32_t dv, enum ns_kv_type tk, enum ns_kv_type tv,
			struct ns_kvcache **out)
{
	struct ns_kvcache *c;
	int rc;

	*out = NULL;
	if (!ns_kv_type_fits(tk, dk) || !ns_kv_type_fits(tv, dv))
		return -EINVAL;
	if (n_slot > n_ctx)
		n_slot = n_ctx;
	/* a ring's tiles hold whole tiles of positions: slot p mod n_slot keeps p's column */
	if (n_slot < n_ctx && (n_slot == 0 || n_slot % NS_KV_TILE))
		return -EINVAL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->n_layer = n_layer;
	c->n_ctx = n_ctx;
	c->n_head_kv = n_head_kv;
	c->dk = dk;
	c->dv = dv;
	c->tk = tk;
	c->tv = tv;
	c->n_slot = n_slot;
	c->n_tile = (n_slot + NS_KV_TILE - 1) / NS_KV_TILE;
	c->k_tile_bytes = ns_kv_row_bytes(tk, dk) * NS_KV_TILE;
	c->v_row_bytes = ns_kv_row_bytes(tv, dv);
	rc = s_slab((uint64_t)n_layer * n_head_kv, c->n_tile, c->k_tile_bytes, &c->k, &c->k_map);
	if (rc == 0)
		rc = s_slab((uint64_t)n_layer * n_head_kv, n_slot, c->v_row_bytes, &c->v,
			    &c->v_map);
	if (rc < 0) {
		ns_kvcache_destroy(&c);
		return rc;
	}
	*out = c;
	return 0;
}

uint64_t ns_kvcache_bytes(const struct ns_kvcache *c)
{
	/* the sizes s_slab allocated without overflow */
	return (uint64_t)c->n_layer * c->n_head_kv *
	       (c->n_tile * c->k_tile_bytes + (uint64_t)c->n_slot * c->v_row_bytes) +
	       (c->swa ? ns_kvcache_bytes(c->swa) : 0);
}

int ns_kvcache_new_like(const struct ns_kvcache *c, struct ns_kvcache **out)
{
	int rc = ns_kvcache_new_ring(c->n_layer, c->n_ctx, c->n_slot, c->n_head_kv, c->dk, c->dv,
				     c->tk, c->tv, out);

	if (rc == 0 && c->swa && (rc = ns_kvcache_new_like(c->swa, &(*out)->swa)) < 0)
		ns_kvcache_destroy(out);
	return rc;
}

void ns_kvcache_destroy(struct ns_kvcache **c)
{
	if (!c || !*c)
		return;
	ns_kvcache_destroy(&(*c)->swa);
	if ((*c)->k)
		munmap((*c)->k, (*c)->k_map);
	if ((*c)->v)
		munmap((*c)->v, (*c)->v_map);
	free(*c);
	*c = NULL;
}

/* ggml's Q8_0 of 32 values: d = max|x| / 127, q = round(x / d) (half away from zero), d kept
 * as half (the values are quantized with the float d, as ggml does). */
static uint16_t s_q8_0(const float *x, int8_t *q)
{
	float amax = 0.0f, d, id;

	for (int i = 0; i < 32; i++)
		if (fabsf(x[i]) > amax)
			amax = fabsf(x[i]);
	d = amax / 127.0f;
	id = d != 0.0f ? 1.0f / d : 0.0f;
	for (int i = 0; i < 32; i++) {
		float v = roundf(x[i] * id);

		q[i] = (int8_t)(v >= -127.0f && v <= 127.0f ? v : 0.0f); /* NaN / inf rows: 0 */
	}
	return ns_f32_to_fp16(d);
}

void ns_kvcache_store(struct ns_kvcache *c, uint32_t l, uint32_t pos, const float *k,
		      const float *v)
{
	const uint32_t tile = pos / NS_KV_TILE, col = pos % NS_KV_TILE;

	if (pos >= c->n_slot && pos - c->n_slot + 1 > c->lo)
		c->lo = pos - c->n_slot + 1; /* the slot held pos - n_slot */
	for (uint32_t h = 0; h < c->n_head_kv; h++) {
		uint8_t *kt = (uint8_t *)ns_kvcache_ktile(c, l, h, tile);
		uint8_t *vr = (uint8_t *)ns_kvcache_vrow(c, l, h, pos);
		const float *kh = k + (uint64_t)h * c->dk, *vh = v + (uint64_t)h * c->dv;

		switch (c->tk) {
		case NS_KV_F32:
			for (uint32_t d = 0; d < c->dk; d++)
				memcpy(kt + 4 * ((uint64_t)d * NS_KV_TILE + col), &kh[d], 4);
			break;
		case NS_KV_F16:
			for (uint32_t d = 0; d < c->dk; d++) {
				uint16_t hv = ns_f32_to_fp16(kh[d]);

				memcpy(kt + 2 * ((uint64_t)d * NS_KV_TILE + col), &hv, 2);
			}
			break;
		case NS_KV_Q8_0:
			for (uint32_t b = 0; b < c->dk / 32; b++) {
				int8_t q[32];
				uint16_t s = s_q8_0(kh + 32 * b, q);

				for (uint32_t i = 0; i < 32; i++)
					kt[(uint64_t)(32 * b + i) * NS_KV_TILE + col] = (uint8_t)q[i];
				memcpy(kt + (uint64_t)c->dk * NS_KV_TILE +
					       2 * ((uint64_t)b * NS_KV_TILE + col), &s, 2);
			}
			break;
		}
		switch (c->tv) {
		case NS_KV_F32:
			memcpy(vr, vh, 4ull * c->dv);
			break;
		case NS_KV_F16:
			for (uint32_t d = 0; d < c->dv; d++) {
				uint16_t hv = ns_f32_to_fp16(vh[d]);

				memcpy(vr + 2 * d, &hv, 2);
			}
			break;
		case NS_KV_Q8_0:
			for (uint32_t b = 0; b < c->dv / 32; b++) {
				uint16_t s = s_q8_0(vh + 32 * b, (int8_t *)(vr + 34 * b + 2));

				memcpy(vr + 34 * b, &s, 2);
			}
			break;
		}
	}
}

static uint16_t s_le16(const uint8_t *p)
{
	uint16_t h;

	memcpy(&h, p, 2);
	return h;
}

float ns_kvcache_k_at(const struct ns_kvcache *c, uint32_t l, uint32_t h, uint32_t pos,
		      uint32_t d)
{
	const uint8_t *kt = ns_kvcache_ktile(c, l, h, pos / NS_KV_TILE);
	const uint64_t i = (uint64_t)d * NS_KV_TILE + pos % NS_KV_TILE;
	float f;

	switch (c->tk) {
	case NS_KV_F16:
		return ns_fp16_to_f32(s_le16(kt + 2 * i));
	case NS_KV_Q8_0:
		return ns_fp16_to_f32(s_le16(kt + (uint64_t)c->dk * NS_KV_TILE +
					       2 * ((uint64_t)(d / 32) * NS_KV_TILE +
						    pos % NS_KV_TILE))) *
		       (float)(int8_t)kt[i];
	default:
		memcpy(&f, kt + 4 * i, 4);
		return f;
	}
}

float ns_kvcache_v_at(const struct ns_kvcache *c, uint32_t l, uint32_t h, uint32_t pos,
		      uint32_t d)
{
	const uint8_t *vr = ns_kvcache_vrow(c, l, h, pos);
	float f;

	switch (c->tv) {
	case NS_KV_F16:
		return ns_fp16_to_f32(s_le16(vr + 2 * d));
	case NS_KV_Q8_0:
		return ns_fp16_to_f32(s_le16(vr + 34 * (d / 32))) *
		       (float)(int8_t)vr[34 * (d / 32) + 2 + d % 32];
	default:
		memcpy(&f, vr + 4ull * d, 4);
		return f;
	}
}
