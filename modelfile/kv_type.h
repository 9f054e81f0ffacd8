/* kv_type.h - the element types of a KV cache (llama.cpp's -ctk/-ctv names): what they are
 * called and how many bytes a row takes. A description, not the cache: nsctl and nsplan
 * weigh and check them without linking the forward pass (nscompute/forward/kvcache.h keeps
 * the cache itself). */
#ifndef NS_KV_TYPE_H
#define NS_KV_TYPE_H

#include <stdbool.h>
#include <stdint.h>

enum ns_kv_type {
	NS_KV_F32 = 0,
	NS_KV_F16 = 1,
	NS_KV_Q8_0 = 2,
};

/* "f32", "f16", "q8_0". */
const char *ns_kv_type_name(enum ns_kv_type t);
/* The names above; returns 0 or -EINVAL. */
int ns_kv_type_parse(const char *s, enum ns_kv_type *out);
/* Can a head dimension of dim elements be stored as t (q8_0: multiples of 32)? */
bool ns_kv_type_fits(enum ns_kv_type t, uint32_t dim);
/* Bytes of one head dimension's worth of dim elements: 4 dim, 2 dim or dim / 32 * 34. */
uint64_t ns_kv_row_bytes(enum ns_kv_type t, uint32_t dim);

/* Positions the KV cache of a sliding layer holds (a ring, nscompute/forward/kvcache.h) for
 * a window of `window` positions, chunks of at most n_batch tokens and a context of n_ctx:
 * R = window + n_batch - 1 rounded up to the K tile of 16, or n_ctx (the whole context)
 * when that is not smaller. A chunk's last query reads its window, its first one the
 * window before it: window + n - 1 positions live at once (docs/decisions.md). window 0
 * (full attention): n_ctx. nsplan counts what nscompute allocates with the same rule. */
static inline uint32_t ns_kv_ring_positions(uint32_t window, uint32_t n_batch, uint32_t n_ctx)
{
	uint64_t r = ((uint64_t)window + (n_batch ? n_batch : 1) - 1 + 15) / 16 * 16;

	return window && r < n_ctx ? (uint32_t)r : n_ctx;
}

#endif
