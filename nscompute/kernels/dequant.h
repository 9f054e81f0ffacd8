/* dequant.h - bit-exact dequantization of GGUF row windows to float32.
 *
 * A row window is n_rows whole rows of n_cols elements each, stored contiguously as the GGUF
 * stores them (row r starts at src + r * row_bytes(type, n_cols)). Results are bit-identical
 * to ggml's to_float for every supported type. */
#ifndef NS_DEQUANT_H
#define NS_DEQUANT_H

#include <stddef.h>
#include <stdint.h>

/* Returns 0, -ENOTSUP for a type we cannot compute (name it with ns_type_name), -EINVAL when
 * n_cols is not a whole number of blocks of the type. dst holds n_rows * n_cols floats. */
int ns_dequant_rows(uint32_t type, const void *src, uint64_t n_cols, uint64_t n_rows, float *dst);

#endif
