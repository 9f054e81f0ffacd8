/* dequant.c - ns_dequant_rows: bit-exact float32 values of a GGUF row window (see dequant.h).
 *
 * Quantized types go through the scalar reference decoders (decode_scalar.c) one chunk of at
 * most 256 elements at a time and are widened with ggml's own operation order; float types are
 * widened exactly. */
#include "dequant.h"

#include <errno.h>
#include <string.h>

#include "fp16.h"
#include "ggml_type.h"
#include "kern_internal.h"

static void s_row_float(uint32_t type, const uint8_t *src, uint64_t n, float *dst)
{
	if (type == NS_TYPE_F32) {
		memcpy(dst, src, n * sizeof(float));
	} else if (type == NS_TYPE_F16) {
		for (uint64_t i = 0; i < n; i++)
			dst[i] = ns_fp16_to_fp32(ns_le16(src + 2 * i));
	} else {
		for (uint64_t i = 0; i < n; i++)
			dst[i] = ns_bf16_to_fp32(ns_le16(src + 2 * i));
	}
}

int ns_dequant_rows(uint32_t type, const void *src, uint64_t n_cols, uint64_t n_rows, float *dst)
{
	const struct ns_kqtype *qt = ns_kq_get(type);
	const uint8_t *p = src;
	uint64_t nblk, row_bytes, total;
	struct ns_kdec dc;

	if (!qt)
		return -ENOTSUP;
	if (n_cols % qt->blk_elems)
		return -EINVAL;
	nblk = n_cols / qt->blk_elems;
	if (__builtin_mul_overflow(nblk, (uint64_t)qt->blk_bytes, &row_bytes) ||
	    __builtin_mul_overflow(n_cols, n_rows, &total) ||
	    __builtin_mul_overflow(total, (uint64_t)sizeof(float), &total))
		return -EOVERFLOW;
	if (n_rows == 0 || n_cols == 0)
		return 0;
	if (!src || !dst)
		return -EINVAL;
	memset(&dc, 0, sizeof(dc));
	for (uint64_t r = 0; r < n_rows; r++, p += row_bytes, dst += n_cols) {
		if (qt->is_float) {
			s_row_float(type, p, n_cols, dst);
			continue;
		}
		for (uint64_t b = 0; b < nblk; b += qt->chunk_blocks) {
			uint32_t nb = (uint32_t)(nblk - b < qt->chunk_blocks ? nblk - b : qt->chunk_blocks);

			qt->dec(p + b * qt->blk_bytes, nb, &dc);
			ns_kdec_to_f32(qt, &dc, nb * qt->blk_elems, dst + b * qt->blk_elems);
		}
	}
	return 0;
}
