/* ggml_type.h - the ggml tensor type ids GGUF files use, with block geometry.
 *
 * Every id a current llama.cpp can write is known by name, including the ones we cannot compute
 * (IQ*, TQ*, NVFP4, ...): a model holding them still opens and describes itself; only a
 * computation that needs such a tensor refuses it (ns_type_computable). */
#ifndef NS_GGML_TYPE_H
#define NS_GGML_TYPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum ns_type {
	NS_TYPE_F32 = 0,
	NS_TYPE_F16 = 1,
	NS_TYPE_Q4_0 = 2,
	NS_TYPE_Q4_1 = 3,
	NS_TYPE_Q5_0 = 6,
	NS_TYPE_Q5_1 = 7,
	NS_TYPE_Q8_0 = 8,
	NS_TYPE_Q8_1 = 9,
	NS_TYPE_Q2_K = 10,
	NS_TYPE_Q3_K = 11,
	NS_TYPE_Q4_K = 12,
	NS_TYPE_Q5_K = 13,
	NS_TYPE_Q6_K = 14,
	NS_TYPE_Q8_K = 15,
	NS_TYPE_IQ2_XXS = 16,
	NS_TYPE_IQ2_XS = 17,
	NS_TYPE_IQ3_XXS = 18,
	NS_TYPE_IQ1_S = 19,
	NS_TYPE_IQ4_NL = 20,
	NS_TYPE_IQ3_S = 21,
	NS_TYPE_IQ2_S = 22,
	NS_TYPE_IQ4_XS = 23,
	NS_TYPE_I8 = 24,
	NS_TYPE_I16 = 25,
	NS_TYPE_I32 = 26,
	NS_TYPE_I64 = 27,
	NS_TYPE_F64 = 28,
	NS_TYPE_IQ1_M = 29,
	NS_TYPE_BF16 = 30,
	NS_TYPE_TQ1_0 = 34,
	NS_TYPE_TQ2_0 = 35,
	NS_TYPE_MXFP4 = 39,
	NS_TYPE_NVFP4 = 40,
	NS_TYPE_Q1_0 = 41,
	NS_TYPE_COUNT = 42,
};

struct ns_type_info {
	const char *name;     /* "Q4_K", as llama.cpp prints it */
	uint32_t block_elems; /* elements per quantization block */
	uint32_t block_bytes; /* bytes per block */
	bool computable;      /* our kernels can dequantize and multiply it */
};

/* Geometry of a type id, or NULL for an id no ggml version defines (including the removed
 * 31..33 and 36..38). */
const struct ns_type_info *ns_type_get(uint32_t type);

/* Name for printing; "type#N" style text for unknown ids is written into buf. */
const char *ns_type_name(uint32_t type, char *buf, size_t buflen);

bool ns_type_computable(uint32_t type);

/* Bytes of a row of n elements: -EINVAL for an unknown type or a row that is not a whole
 * number of blocks, -EOVERFLOW on overflow, else 0. */
int ns_type_row_bytes(uint32_t type, uint64_t n, uint64_t *bytes);

#endif
