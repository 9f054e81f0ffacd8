/* mma.h for the SIMT host runs: nvcuda::wmma's m16n16k16 f16 -> f32 subset that gemm.cu uses.
 * On the device a fragment is spread over the warp's lanes in an unspecified layout; here lane
 * 0 holds the whole 16 x 16 tile (halves widened to float at the load) and does the warp's
 * loads, multiplies and stores alone: they are warp-collective, every lane calls them with
 * the same arguments, and a lane's share of a fragment is opaque to the kernel (a kernel that
 * reads fragment elements directly is not modelled). mma_sync sums the 16 products of each
 * element in k order in float: the device's order inside one mma is unspecified, so results
 * agree with the GPU's to rounding, not in bits. */
#ifndef NS_SIMT_MMA_H
#define NS_SIMT_MMA_H

#include "simt.h"

namespace nvcuda {
namespace wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <class Use, int M, int N, int K, class T, class Layout = void> struct fragment {
	static constexpr int num_elements = 256;
	float x[256]; /* element (i, j) of the 16 x 16 tile at x[16 * i + j], as float */
};

template <class Use, class T, class L>
static inline void fill_fragment(fragment<Use, 16, 16, 16, T, L> &f, T v)
{
	if (::simt::lane_id())
		return;
	for (int i = 0; i < 256; i++)
		f.x[i] = (float)v;
}

/* A: (16 rows, 16 k), row-major at p with leading dimension ld */
static inline void load_matrix_sync(fragment<matrix_a, 16, 16, 16, __half, row_major> &f,
				    const __half *p, unsigned ld)
{
	if (::simt::lane_id())
		return;
	for (int i = 0; i < 16; i++)
		for (int k = 0; k < 16; k++)
			f.x[16 * i + k] = __half2float(p[(size_t)i * ld + k]);
}

/* B: (16 k, 16 cols), column-major: column j's 16 k values are contiguous at p + j * ld */
static inline void load_matrix_sync(fragment<matrix_b, 16, 16, 16, __half, col_major> &f,
				    const __half *p, unsigned ld)
{
	if (::simt::lane_id())
		return;
	for (int j = 0; j < 16; j++)
		for (int k = 0; k < 16; k++)
			f.x[16 * k + j] = __half2float(p[(size_t)j * ld + k]);
}

static inline void mma_sync(fragment<accumulator, 16, 16, 16, float> &d,
			    const fragment<matrix_a, 16, 16, 16, __half, row_major> &a,
			    const fragment<matrix_b, 16, 16, 16, __half, col_major> &b,
			    const fragment<accumulator, 16, 16, 16, float> &c)
{
	float out[256];

	if (::simt::lane_id())
		return;
	for (int i = 0; i < 16; i++)
		for (int j = 0; j < 16; j++) {
			float acc = c.x[16 * i + j];

			for (int k = 0; k < 16; k++) /* f16 x f16 is exact in float */
				acc += a.x[16 * i + k] * b.x[16 * k + j];
			out[16 * i + j] = acc;
		}
	for (int i = 0; i < 256; i++)
		d.x[i] = out[i];
}

static inline void store_matrix_sync(float *p, const fragment<accumulator, 16, 16, 16, float> &f,
				     unsigned ld, layout_t layout)
{
	if (::simt::lane_id())
		return;
	for (int i = 0; i < 16; i++)
		for (int j = 0; j < 16; j++) {
			const size_t at = layout == mem_row_major ? (size_t)i * ld + j
								  : (size_t)j * ld + i;
			p[at] = f.x[16 * i + j];
		}
}

} /* namespace wmma */
} /* namespace nvcuda */

#endif
