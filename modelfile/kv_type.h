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

#endif
