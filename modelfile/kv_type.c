/* kv_type.c - see kv_type.h. */
#include <errno.h>
#include <string.h>

#include "kv_type.h"

const char *ns_kv_type_name(enum ns_kv_type t)
{
	switch (t) {
	case NS_KV_F32:
		return "f32";
	case NS_KV_F16:
		return "f16";
	case NS_KV_Q8_0:
		return "q8_0";
	}
	return "?";
}

int ns_kv_type_parse(const char *s, enum ns_kv_type *out)
{
	for (int t = NS_KV_F32; t <= NS_KV_Q8_0; t++)
		if (s && !strcmp(s, ns_kv_type_name((enum ns_kv_type)t))) {
			*out = (enum ns_kv_type)t;
			return 0;
		}
	return -EINVAL;
}

bool ns_kv_type_fits(enum ns_kv_type t, uint32_t dim)
{
	return dim > 0 && (t != NS_KV_Q8_0 || dim % 32 == 0);
}

uint64_t ns_kv_row_bytes(enum ns_kv_type t, uint32_t dim)
{
	switch (t) {
	case NS_KV_F16:
		return 2ull * dim;
	case NS_KV_Q8_0:
		return (uint64_t)dim / 32 * 34;
	default:
		return 4ull * dim;
	}
}
