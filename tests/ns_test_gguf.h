/* ns_test_gguf.h - two GGUF metadata values equal (same type; strings byte for byte, arrays
 * item for item, numbers by value), for the tests that compare our metadata with a
 * conversion's. */
#ifndef NS_TEST_GGUF_H
#define NS_TEST_GGUF_H

#include <stdbool.h>
#include <string.h>

#include "gguf.h"

static inline bool ns_test_gguf_value_eq(const struct ns_gguf_value *a,
					 const struct ns_gguf_value *b)
{
	if (a->type != b->type)
		return false;
	switch (a->type) {
	case NS_GGUF_STRING:
		return a->v.str.len == b->v.str.len && !memcmp(a->v.str.s, b->v.str.s, a->v.str.len);
	case NS_GGUF_ARRAY:
		if (a->v.arr.item_type != b->v.arr.item_type || a->v.arr.n != b->v.arr.n)
			return false;
		if (a->v.arr.item_type == NS_GGUF_STRING) {
			const struct ns_gguf_str *x = a->v.arr.items, *y = b->v.arr.items;

			for (uint64_t i = 0; i < a->v.arr.n; i++)
				if (x[i].len != y[i].len || memcmp(x[i].s, y[i].s, x[i].len))
					return false;
			return true;
		}
		return !memcmp(a->v.arr.items, b->v.arr.items,
			       (size_t)(a->v.arr.n * ns_gguf_vtype_size(a->v.arr.item_type)));
	case NS_GGUF_F32:
	case NS_GGUF_F64:
		return a->v.f64 == b->v.f64;
	case NS_GGUF_BOOL:
		return a->v.b == b->v.b;
	default:
		return a->v.u64 == b->v.u64;
	}
}

#endif
