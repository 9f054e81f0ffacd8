/* ggml_type.c - see ggml_type.h. Geometry follows ggml's type traits (block size, bytes). */
#include "ggml_type.h"

#include <errno.h>
#include <stdio.h>

#include "ns_util.h"

static const struct ns_type_info s_types[NS_TYPE_COUNT] = {
	[NS_TYPE_F32] = { "F32", 1, 4, true },
	[NS_TYPE_F16] = { "F16", 1, 2, true },
	[NS_TYPE_Q4_0] = { "Q4_0", 32, 18, true },
	[NS_TYPE_Q4_1] = { "Q4_1", 32, 20, true },
	[NS_TYPE_Q5_0] = { "Q5_0", 32, 22, true },
	[NS_TYPE_Q5_1] = { "Q5_1", 32, 24, true },
	[NS_TYPE_Q8_0] = { "Q8_0", 32, 34, true },
	[NS_TYPE_Q8_1] = { "Q8_1", 32, 36, false },
	[NS_TYPE_Q2_K] = { "Q2_K", 256, 84, true },
	[NS_TYPE_Q3_K] = { "Q3_K", 256, 110, true },
	[NS_TYPE_Q4_K] = { "Q4_K", 256, 144, true },
	[NS_TYPE_Q5_K] = { "Q5_K", 256, 176, true },
	[NS_TYPE_Q6_K] = { "Q6_K", 256, 210, true },
	[NS_TYPE_Q8_K] = { "Q8_K", 256, 292, false },
	[NS_TYPE_IQ2_XXS] = { "IQ2_XXS", 256, 66, false },
	[NS_TYPE_IQ2_XS] = { "IQ2_XS", 256, 74, false },
	[NS_TYPE_IQ3_XXS] = { "IQ3_XXS", 256, 98, false },
	[NS_TYPE_IQ1_S] = { "IQ1_S", 256, 50, false },
	[NS_TYPE_IQ4_NL] = { "IQ4_NL", 32, 18, false },
	[NS_TYPE_IQ3_S] = { "IQ3_S", 256, 110, false },
	[NS_TYPE_IQ2_S] = { "IQ2_S", 256, 82, false },
	[NS_TYPE_IQ4_XS] = { "IQ4_XS", 256, 136, false },
	[NS_TYPE_I8] = { "I8", 1, 1, false },
	[NS_TYPE_I16] = { "I16", 1, 2, false },
	[NS_TYPE_I32] = { "I32", 1, 4, false },
	[NS_TYPE_I64] = { "I64", 1, 8, false },
	[NS_TYPE_F64] = { "F64", 1, 8, false },
	[NS_TYPE_IQ1_M] = { "IQ1_M", 256, 56, false },
	[NS_TYPE_BF16] = { "BF16", 1, 2, true },
	[NS_TYPE_TQ1_0] = { "TQ1_0", 256, 54, false },
	[NS_TYPE_TQ2_0] = { "TQ2_0", 256, 66, false },
	[NS_TYPE_MXFP4] = { "MXFP4", 32, 17, true },
	[NS_TYPE_NVFP4] = { "NVFP4", 64, 36, false },
	[NS_TYPE_Q1_0] = { "Q1_0", 128, 18, false },
};

const struct ns_type_info *ns_type_get(uint32_t type)
{
	if (type >= NS_TYPE_COUNT || !s_types[type].name)
		return NULL;
	return &s_types[type];
}

const char *ns_type_name(uint32_t type, char *buf, size_t buflen)
{
	const struct ns_type_info *ti = ns_type_get(type);

	if (ti)
		return ti->name;
	snprintf(buf, buflen, "unknown type %u", type);
	return buf;
}

bool ns_type_computable(uint32_t type)
{
	const struct ns_type_info *ti = ns_type_get(type);

	return ti && ti->computable;
}

int ns_type_row_bytes(uint32_t type, uint64_t n, uint64_t *bytes)
{
	const struct ns_type_info *ti = ns_type_get(type);

	if (!ti || n % ti->block_elems)
		return -EINVAL;
	if (ns_mul_u64_overflow(n / ti->block_elems, ti->block_bytes, bytes))
		return -EOVERFLOW;
	return 0;
}
