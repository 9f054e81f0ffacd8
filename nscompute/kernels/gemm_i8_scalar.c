/* gemm_i8_scalar.c - the int8 GEMM's definition in portable C (gemm_i8.h): rows decoded by the
 * reference decoders, one exact integer sum per scale block, then the scales in block order
 * with fmaf. The VNNI and AMX paths must reproduce these bits. */
#include <math.h>
#include <string.h>

#include "i8_internal.h"

/* One row against token t: acc over the blocks of every decoded chunk, in column order. */
static float s_row_tok(const struct ns_i8job *j, const struct ns_kdec *dc, uint64_t k0,
		       uint32_t n, uint64_t t, float acc)
{
	const uint8_t *xu = j->xu + t * j->ldu + k0;
	const float *dxb = j->dxb + t * j->ldb + k0 / j->blk;
	const float *xsb = j->xsb + t * j->ldb + k0 / j->blk;

	for (uint32_t b = 0; b < n / j->blk; b++) {
		uint32_t g = b * j->blk / NS_KGROUP; /* the block's first 16-group */
		int32_t isum = 0;

		for (uint32_t i = 0; i < j->blk; i++)
			isum += (int32_t)dc->s[b * j->blk + i] *
				((int32_t)xu[b * j->blk + i] - 128);
		acc = fmaf(dc->d[g] * dxb[b], (float)isum, acc);
		if (j->has_min)
			acc = fmaf(dc->m[g], xsb[b], acc);
	}
	return acc;
}

void ns_i8_rows_scalar(const struct ns_i8job *j, uint64_t r0, uint64_t r1)
{
	const struct ns_kqtype *qt = j->qt;
	struct ns_kdec dc;

	memset(&dc, 0, sizeof(dc));
	for (uint64_t r = r0; r < r1; r++) {
		const uint8_t *row = j->w + r * j->row_bytes;

		for (uint64_t t = 0; t < j->n_tok; t++)
			j->y[t * j->ldy + r] = 0.0f;
		for (uint64_t k0 = 0; k0 < j->n_cols; k0 += NS_KCHUNK) {
			uint32_t n = (uint32_t)(j->n_cols - k0 < NS_KCHUNK ? j->n_cols - k0
									 : NS_KCHUNK);

			qt->dec(row + k0 / qt->blk_elems * qt->blk_bytes, n / qt->blk_elems, &dc);
			for (uint64_t t = 0; t < j->n_tok; t++)
				j->y[t * j->ldy + r] =
					s_row_tok(j, &dc, k0, n, t, j->y[t * j->ldy + r]);
		}
	}
}
