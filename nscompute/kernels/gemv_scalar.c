/* gemv_scalar.c - the portable reference row kernel (both activation modes).
 *
 * NS_ACT_F32: each 256-element chunk is dequantized exactly (ns_kdec_to_f32), its products with
 * x summed in element order into a chunk partial, and the partials summed in chunk order.
 * NS_ACT_Q8: per group of 16, the exact integer sum I_g = sum s*xq is scaled by d_g * dx_g;
 * the offset term m_g * dx_g * sum(xq) is summed separately and added last. */
#include <string.h>

#include "fp16.h"
#include "ggml_type.h"
#include "kern_internal.h"

/* Float conversion of n elements of a float-typed row starting at element k0. */
static void s_float_chunk(uint32_t type, const uint8_t *row, uint64_t k0, uint32_t n, float *dst)
{
	if (type == NS_TYPE_F32) {
		memcpy(dst, row + 4 * k0, (size_t)n * 4);
	} else if (type == NS_TYPE_F16) {
		for (uint32_t i = 0; i < n; i++)
			dst[i] = ns_fp16_to_fp32(ns_le16(row + 2 * (k0 + i)));
	} else {
		for (uint32_t i = 0; i < n; i++)
			dst[i] = ns_bf16_to_fp32(ns_le16(row + 2 * (k0 + i)));
	}
}

static void s_row_f32(const struct ns_kjob *j, const uint8_t *row, uint64_t t0, uint32_t nt,
		      float *acc)
{
	const struct ns_kqtype *qt = j->qt;
	struct ns_kdec dc;
	float wf[NS_KCHUNK];

	memset(&dc, 0, sizeof(dc));
	for (uint64_t k0 = 0; k0 < j->n_cols; k0 += NS_KCHUNK) {
		uint32_t n = (uint32_t)(j->n_cols - k0 < NS_KCHUNK ? j->n_cols - k0 : NS_KCHUNK);

		if (qt->is_float) {
			s_float_chunk(qt->type, row, k0, n, wf);
		} else {
			qt->dec(row + k0 / qt->blk_elems * qt->blk_bytes, n / qt->blk_elems, &dc);
			ns_kdec_to_f32(qt, &dc, n, wf);
		}
		for (uint32_t t = 0; t < nt; t++) {
			const float *x = j->x + (t0 + t) * j->ldx + k0;
			float part = 0.0f;

			for (uint32_t i = 0; i < n; i++)
				part += wf[i] * x[i];
			acc[t] += part;
		}
	}
}

static void s_row_q8(const struct ns_kjob *j, const uint8_t *row, uint64_t t0, uint32_t nt,
		     float *acc)
{
	const struct ns_kqtype *qt = j->qt;
	float accm[NS_KTILE] = { 0 };
	struct ns_kdec dc;

	memset(&dc, 0, sizeof(dc));
	for (uint64_t k0 = 0; k0 < j->n_cols; k0 += NS_KCHUNK) {
		uint32_t n = (uint32_t)(j->n_cols - k0 < NS_KCHUNK ? j->n_cols - k0 : NS_KCHUNK);

		qt->dec(row + k0 / qt->blk_elems * qt->blk_bytes, n / qt->blk_elems, &dc);
		for (uint32_t t = 0; t < nt; t++) {
			const int8_t *xq = j->xq + (t0 + t) * j->ldq + k0;
			const float *dxg = j->dxg + (t0 + t) * j->ldg + k0 / NS_KGROUP;
			const float *xsg = j->xsg + (t0 + t) * j->ldg + k0 / NS_KGROUP;

			for (uint32_t g = 0; g < n / NS_KGROUP; g++) {
				int32_t isum = 0;

				for (uint32_t i = 0; i < NS_KGROUP; i++)
					isum += (int32_t)dc.s[g * NS_KGROUP + i] *
						(int32_t)xq[g * NS_KGROUP + i];
				acc[t] += (dc.d[g] * dxg[g]) * (float)isum;
				if (qt->has_min)
					accm[t] += dc.m[g] * xsg[g];
			}
		}
	}
	for (uint32_t t = 0; t < nt; t++)
		acc[t] += accm[t];
}

void ns_krows_scalar(const struct ns_kjob *j, uint64_t r0, uint64_t r1)
{
	for (uint64_t t0 = 0; t0 < j->n_tok; t0 += NS_KTILE) {
		uint32_t nt = (uint32_t)(j->n_tok - t0 < NS_KTILE ? j->n_tok - t0 : NS_KTILE);

		for (uint64_t r = r0; r < r1; r++) {
			const uint8_t *row = j->w + r * j->row_bytes;
			float acc[NS_KTILE] = { 0 };

			if (j->q8)
				s_row_q8(j, row, t0, nt, acc);
			else
				s_row_f32(j, row, t0, nt, acc);
			for (uint32_t t = 0; t < nt; t++)
				j->y[(t0 + t) * j->ldy + r] = acc[t];
		}
	}
}
