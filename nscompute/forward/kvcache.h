/* kvcache.h - key/value cache of a decoder in the layout the attention kernels read (attn.h).
 *
 * Per layer l and KV head h, positions [0, n_past) are filled; the forward pass stores
 * positions n_past.. and then advances n_past. Element types (llama.cpp's -ctk / -ctv names):
 *   f32   exact: what the projections produced (the default; attention over it is
 *         bit-identical to the reference, attn.h)
 *   f16   half, rounded to nearest even (as ggml's f16 cache)
 *   q8_0  ggml's Q8_0: per 32 elements of a row d = max|x| / 127 stored as half, values
 *         round(x / d) in int8 (head dimensions must be multiples of 32)
 * Layout:
 *   K of (l, h): tiles of NS_KV_TILE positions, each tile [dk][16]: element d of the 16
 *     positions side by side, so a vector load gives one dimension of 16 positions (scores
 *     of 16 positions per FMA). q8_0 tiles: int8 [dk][16], then half scales [dk/32][16].
 *   V of (l, h): one row of dv per position (f32, f16, or Q8_0 blocks of 34 bytes), so the
 *     weighted sum of rows runs along the row.
 * Bytes per position per layer are ns_kv_bytes_per_pos (the planner counts them).
 * Ring (sliding-window layers, ns_kvcache_new_ring): the cache holds n_slot < n_ctx positions,
 *   n_slot a multiple of NS_KV_TILE, position p in slot p mod n_slot (K: tile (p / 16) mod
 *   (n_slot / 16), column p mod 16 as before). Callers keep addressing by position: the
 *   accessors below map it, so the kernels' arithmetic and order of positions are those of a
 *   whole cache. Storing p overwrites p - n_slot: positions below `lo` are gone, and
 *   attention refuses (ns_attn_run -ERANGE) a chunk that needs one of them.
 *
 * Companion ring (llama.c, gpt-oss): a multi-layer cache whose layers all attend to everything
 *   may carry `swa`, the sliding layers' ring of the same sequence, so one pointer per
 *   sequence (f->kv, f->seq_kv, f->row_kv) still names all of its cache.
 *
 * Ownership: ns_kvcache_new allocates everything; ns_kvcache_destroy(&c) frees and nulls
 * (the companion too). */
#ifndef NS_KVCACHE_H
#define NS_KVCACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "kv_type.h" /* modelfile: the element types */

#define NS_KV_TILE 16 /* positions per K tile */

struct ns_kvcache {
	uint32_t n_layer;
	uint32_t n_ctx;
	uint32_t n_head_kv;
	uint32_t dk, dv;
	enum ns_kv_type tk, tv;
	uint32_t n_past;          /* positions filled */
	uint32_t n_slot;          /* positions held: n_ctx, or a ring's (a multiple of 16) */
	uint32_t lo;              /* ring: positions below lo were overwritten (0 when whole) */
	uint32_t n_tile;          /* K tiles per head: ceil(n_slot / 16) */
	uint64_t k_tile_bytes;    /* one K tile of one head */
	uint64_t v_row_bytes;     /* one V row of one head */
	size_t k_map, v_map;      /* the slabs' mapped sizes */
	uint8_t *k;               /* (n_layer, n_head_kv, n_tile) tiles */
	uint8_t *v;               /* (n_layer, n_head_kv, n_slot) rows */
	struct ns_kvcache *swa;   /* llama.c (gpt-oss): the same sequence's sliding-window
				   * layers, a ring of their own (owned: freed and counted with
				   * this cache; n_past is this one's), or NULL */
};

/* Returns 0, -EINVAL when a type does not fit its head dimension, -EOVERFLOW when the sizes
 * do not fit, -ENOMEM. */
int ns_kvcache_new(uint32_t n_layer, uint32_t n_ctx, uint32_t n_head_kv, uint32_t dk,
		   uint32_t dv, enum ns_kv_type tk, enum ns_kv_type tv, struct ns_kvcache **out);
/* The same holding n_slot positions of the n_ctx (a ring when n_slot < n_ctx: then n_slot
 * must be a positive multiple of NS_KV_TILE, else -EINVAL). */
int ns_kvcache_new_ring(uint32_t n_layer, uint32_t n_ctx, uint32_t n_slot, uint32_t n_head_kv,
			uint32_t dk, uint32_t dv, enum ns_kv_type tk, enum ns_kv_type tv,
			struct ns_kvcache **out);
/* An empty cache of c's shape, its companion ring (swa) included: another sequence's. */
int ns_kvcache_new_like(const struct ns_kvcache *c, struct ns_kvcache **out);
void ns_kvcache_destroy(struct ns_kvcache **c);

static inline bool ns_kvcache_is_ring(const struct ns_kvcache *c)
{
	return c->n_slot < c->n_ctx;
}

/* Bytes of its K and V storage (its companion ring's included). */
uint64_t ns_kvcache_bytes(const struct ns_kvcache *c);

/* Store position pos (< n_ctx, the caller's) of layer l: k (n_head_kv, dk), v (n_head_kv, dv),
 * converted to the cache's types (a ring: into its slot, raising lo past what it overwrote). */
void ns_kvcache_store(struct ns_kvcache *c, uint32_t l, uint32_t pos, const float *k,
		      const float *v);

/* Element d of position pos of head h as the kernels see it (dequantized): for tests and the
 * scalar kernels. */
float ns_kvcache_k_at(const struct ns_kvcache *c, uint32_t l, uint32_t h, uint32_t pos,
		      uint32_t d);
float ns_kvcache_v_at(const struct ns_kvcache *c, uint32_t l, uint32_t h, uint32_t pos,
		      uint32_t d);

/* Tile `tile` (positions 16 tile ..) of K, row pos of V, of head h in layer l; a ring maps
 * them to their slots (the branch is never taken on a whole cache). */
static inline const uint8_t *ns_kvcache_ktile(const struct ns_kvcache *c, uint32_t l,
					      uint32_t h, uint32_t tile)
{
	if (tile >= c->n_tile)
		tile %= c->n_tile;
	return c->k + (((uint64_t)l * c->n_head_kv + h) * c->n_tile + tile) * c->k_tile_bytes;
}

static inline const uint8_t *ns_kvcache_vrow(const struct ns_kvcache *c, uint32_t l,
					     uint32_t h, uint32_t pos)
{
	if (pos >= c->n_slot)
		pos %= c->n_slot;
	return c->v + (((uint64_t)l * c->n_head_kv + h) * c->n_slot + pos) * c->v_row_bytes;
}

#endif
