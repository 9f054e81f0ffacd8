/* gemvq8.cu - ns_cuda_gemv_q8: the decode GEMV with int8 activations (nscuda.h; the CPU's
 * NS_ACT_Q8, nscompute/kernels/gemv.h "Activations").
 *
 * One launch, no workspace. Each block first quantizes x into shared memory (while its first
 * weight loads are in flight), exactly as ns_kquant_x_scalar: per unit of 32, amax = max |x|
 * (NaN never wins), dx = amax / 127 (IEEE division), id = 1 / dx when dx is > 0 and finite
 * (else 0), v = x * id clamped to [-127, 127] (NaN -> 0), xq = v rounded to nearest even (the
 * CPU's 1.5 * 2^23 addition), plus the sum of xq over each 16. So xq and dx are bit-identical
 * to the CPU's. A thread takes 4 consecutive elements; the 8 threads of a unit reduce its
 * amax and 16-sums with xor shuffles.
 *
 * Weights: block of 8 warps; a warp takes R rows at a time (a "row group", R per type, 2 or
 * 4) and lane l takes tasks l, l + 32, ... of each of them: a task is TE consecutive columns of
 * a row (32 or 64 by type), one unit or two. Per step a lane first issues the loads of its task
 * in all R rows (R tasks in flight per thread, 2-12 16-byte loads), then reads the task's xq
 * (shared memory, once for the R rows) and computes. The grid is the resident blocks
 * (3 per SM, 24 warps, for the types of <= 80 registers, else 2), each looping over row
 * groups, x quantized once per block; the first step's loads are issued before the
 * quantization barrier.
 * Registers (ptxas, no spills, no local memory), sm_90 / sm_80: Q4_0 76/72, Q4_1 48/45,
 * Q5_0 56/58, Q5_1 62/69, Q8_0 96/95, Q2_K 53/48, Q3_K 100/94, Q4_K 96/95, Q5_K 94/93,
 * Q6_K 126/117, MXFP4 76/78.
 * Integer products with __dp4a (signed x signed, exact in int32), then per unit:
 *   partial += (d_g * dx_u) * (float)I_g  [+ (m_g * dx_u) * (float)S_g]
 * with fmaf in a fixed order per type (I_g the integer dot of group g, S_g the xq sum the
 * offset multiplies; biased codes as Q4_0's q - 8 or Q6_K's q - 32 subtract bias * S_g from
 * I_g in integers). A lane sums its tasks' partials in task order, the warp reduces its lanes
 * by a fixed xor tree: every row's order depends only on (type, n_cols), never on n_rows, the
 * window or the row's place in its group, so rows are bit-identical in any window.
 *
 * Fast paths (byte-word arithmetic, no per-element decode):
 *   Q4_K  TE 64 (one 32-byte quarter of qs: two sub-blocks), 3 LDG.128 (header, qs), R 4
 *   Q5_K  TE 64, header + qh (32) + qs (32): 5 LDG.128, R 2
 *   Q6_K  TE 64 (units k and k + 2 of a half: one 32-byte ql span, the 32-byte qh span), R 2
 *   Q8_0, Q4_0, MXFP4  TE 32 (one block), R 4
 * Blocks that are not 16-byte multiples (Q8_0 34, Q4_0 18, MXFP4 17, Q6_K 210) are read as
 * the 16-byte aligned chunks that hold the task's bytes (only chunks holding at least one of
 * them: never past the window) and realigned in registers by a barrel shift (selects and
 * funnel shifts), so any window alignment takes 16-byte loads and gives the same bytes.
 * (Neighbouring lanes' chunks overlap: a warp's loads of Q8_0 touch each sector up to 3 times,
 * Q4_0/MXFP4 2; DRAM reads each once if L1 merges them, else L2 traffic grows by that much:
 * to be measured. The alternative is gemv2's coalesced cp.async staging.)
 * MXFP4 nibbles become the int8 2 * E2M1 by byte-permute tables (sign by a third permute);
 * its scale is E8M0 / 2 (quant.cuh e8m0_half). Q4_1, Q5_0, Q5_1, Q2_K, Q3_K: quant.cuh's
 * unit<T> (q[32], d[2], m[2]) and integer multiply-adds (TE 32, R 2): correct, slower.
 *
 * Estimated instructions per weight byte (per row and task, xq reads shared by R rows; not
 * measured: no GPU in the session that wrote this), as bytes per warp instruction:
 *   Q4_K ~60 instr / 36 B -> ~19 B; Q5_K ~85 / 44 -> ~16 B; Q8_0 ~45 / 34 -> ~24 B;
 *   Q4_0 ~45 / 18 -> ~13 B; MXFP4 ~95 / 17 -> ~6 B (the table lookups); Q6_K ~120 / 52 -> ~14 B;
 *   the generic path ~150-250 per unit -> 3-5 B. (gemv.cu / gemv2.cu: ~2.3.)
 *
 * Shared memory: xq as task slots of TE + 16 bytes (the pad makes a quarter warp's 16-byte
 * reads of consecutive tasks hit distinct banks), dx (n_cols / 32 floats), the 16-sums
 * (n_cols / 16 ints): about 1.4-1.9 bytes per column; n_cols beyond the device's opt-in
 * limit is -E2BIG. */
#include "nscuda.h"

#include "launch.cuh"

namespace {

constexpr int Q8_WARPS = 8;  /* warps per block */

/* Task geometry per type: TE columns per task, R rows per warp step. */
template <int T> struct q8g {
	static constexpr int TE = T == nsq::Q4_K || T == nsq::Q5_K || T == nsq::Q6_K ? 64 : 32;
	static constexpr int R = T == nsq::Q4_K || T == nsq::Q8_0 || T == nsq::Q4_0 ||
				 T == nsq::MXFP4 ? 4 : 2;
	static constexpr int XB = TE + 16; /* bytes per task slot of xq in shared memory */
	/* blocks per SM aimed at (launch bounds, grid): 3 (<= 80 registers) for the types that
	 * move the fewest bytes per task (more warps, more bytes in flight) and fit, else 2 */
	static constexpr int BPS = T == nsq::Q4_0 || T == nsq::MXFP4 || T == nsq::Q4_1 ||
				   T == nsq::Q5_0 || T == nsq::Q5_1 || T == nsq::Q2_K ? 3 : 2;
};

/* Byte offset in the xq slots of unit u (32 contiguous bytes). Q6_K's task t holds units
 * 8b + 4n + k and + 2 (k = t & 1): the slot of unit u is task 4b + 2n + (k & 1), half k >> 1. */
template <int T>
__device__ __forceinline__ uint32_t upos(uint32_t u)
{
	using G = q8g<T>;

	if constexpr (T == nsq::Q6_K) {
		const uint32_t k = u & 3;
		return ((u >> 2) * 2 + (k & 1)) * G::XB + (k >> 1) * 32;
	} else if constexpr (G::TE == 64) {
		return (u >> 1) * G::XB + (u & 1) * 32;
	} else {
		return u * G::XB;
	}
}

__device__ __forceinline__ uint4 ld16(const uint8_t *p)
{
	return *reinterpret_cast<const uint4 *>(p);
}

/* The NC aligned 16-byte chunks from (p & ~15) that hold bytes of [p, p + nb), as words;
 * chunks past the span are zero, not read. *o = p & 15. */
template <int NC>
__device__ __forceinline__ void span(const uint8_t *p, uint32_t nb, uint32_t (&wd)[4 * NC],
				     uint32_t &o)
{
	o = (uint32_t)(uintptr_t)p & 15u;
	const uint8_t *a = p - o;

#pragma unroll
	for (int c = 0; c < NC; c++) {
		uint4 v = make_uint4(0, 0, 0, 0);

		if (16u * c < o + nb)
			v = ld16(a + 16 * c);
		wd[4 * c] = v.x;
		wd[4 * c + 1] = v.y;
		wd[4 * c + 2] = v.z;
		wd[4 * c + 3] = v.w;
	}
}

/* One level of extract's barrel shift: t[k] = t[k + B] when q has bit B (B <= NI - NO). */
template <int B, int NI, int NO>
__device__ __forceinline__ void shift_words(uint32_t (&t)[NI + 1], uint32_t q)
{
	if constexpr (B <= NI - NO) {
#pragma unroll
		for (int k = 0; k + B <= NI; k++)
			t[k] = (q & (uint32_t)B) ? t[k + B] : t[k];
	}
}

/* out[k] = bytes s + 4k .. s + 4k + 3 of wd (little-endian), s <= 4 * (NI - NO): a barrel
 * shift by whole words (selects, largest step first) then a funnel shift by s % 4 bytes. */
template <int NI, int NO>
__device__ __forceinline__ void extract(const uint32_t (&wd)[NI], uint32_t s,
					uint32_t (&out)[NO])
{
	uint32_t t[NI + 1];
	const uint32_t q = s >> 2, sh = 8 * (s & 3);

#pragma unroll
	for (int k = 0; k < NI; k++)
		t[k] = wd[k];
	t[NI] = 0;
	shift_words<8, NI, NO>(t, q);
	shift_words<4, NI, NO>(t, q);
	shift_words<2, NI, NO>(t, q);
	shift_words<1, NI, NO>(t, q);
#pragma unroll
	for (int k = 0; k < NO; k++)
		out[k] = __funnelshift_r(t[k], t[k + 1], sh);
}

__device__ __forceinline__ float half_bits(uint32_t h)
{
	return __half2float(__ushort_as_half((unsigned short)(h & 0xffffu)));
}

/* Four MXFP4 nibbles (selector form: 4 bits each, the low 16 bits of v) to int8 2 * E2M1. */
__device__ __forceinline__ uint32_t mx_lookup(uint32_t v)
{
	const uint32_t i = v & 0x7777u;
	const uint32_t pos = __byte_perm(0x03020100u, 0x0C080604u, i);
	const uint32_t neg = __byte_perm(0xFDFEFF00u, 0xF4F8FAFCu, i);

	return __byte_perm(pos, neg, 0x3210u | ((v & 0x8888u) >> 1));
}

/* ------------------------------------------------------------ per-type tasks ----------- */

/* A task's weight registers in one row. */
template <int T> struct wregs {
	static constexpr int N = T == nsq::Q4_K ? 12 : T == nsq::Q5_K ? 20 :
				 T == nsq::Q6_K ? 24 : T == nsq::Q8_0 ? 12 :
				 T == nsq::Q4_0 || T == nsq::MXFP4 ? 8 : 1;
	uint32_t w[N];
	uint32_t o;     /* span offsets (ql | qh << 8 for Q6_K) */
	uint32_t aux;   /* Q6_K: its two scale pairs; d in aux2 */
	uint32_t aux2;
	const uint8_t *p; /* generic path: the block */
};

/* A task's activations: xq words of its units, dx and 16-sums. */
struct xregs {
	uint32_t q[16];
	float dx[2];
	int s[4];
};

/* Issue the loads of task t of a row (never reads outside the task's block). */
template <int T>
__device__ __forceinline__ void load_task(wregs<T> &r, const uint8_t *row, uint32_t t)
{
	using G = nsq::geo<T>;

	if constexpr (T == nsq::Q4_K || T == nsq::Q5_K) {
		const uint8_t *b = row + (uint64_t)(t >> 2) * G::BYTES;
		const uint32_t j = t & 3;
		const uint4 h = ld16(b);
		const uint4 a = ld16(b + (T == nsq::Q4_K ? 16 : 48) + 32 * j);
		const uint4 c = ld16(b + (T == nsq::Q4_K ? 32 : 64) + 32 * j);

		r.w[0] = h.x; r.w[1] = h.y; r.w[2] = h.z; r.w[3] = h.w;
		r.w[4] = a.x; r.w[5] = a.y; r.w[6] = a.z; r.w[7] = a.w;
		r.w[8] = c.x; r.w[9] = c.y; r.w[10] = c.z; r.w[11] = c.w;
		if constexpr (T == nsq::Q5_K) {
			const uint4 e = ld16(b + 16), f = ld16(b + 32);

			r.w[12] = e.x; r.w[13] = e.y; r.w[14] = e.z; r.w[15] = e.w;
			r.w[16] = f.x; r.w[17] = f.y; r.w[18] = f.z; r.w[19] = f.w;
		}
	} else if constexpr (T == nsq::Q6_K) {
		/* t = 4b + 2n + k: ql bytes 64n + 32k .. + 31, qh 128 + 32n .., scales of units
		 * k and k + 2 at 192 + 8n + 2k and + 4, d at 208 */
		const uint8_t *b = row + (uint64_t)(t >> 2) * G::BYTES;
		const uint32_t n = (t >> 1) & 1, k = t & 1;
		uint32_t a[12], c[12], oa, oc;

		span<3>(b + 64 * n + 32 * k, 32, a, oa);
		span<3>(b + 128 + 32 * n, 32, c, oc);
#pragma unroll
		for (int i = 0; i < 12; i++) {
			r.w[i] = a[i];
			r.w[12 + i] = c[i];
		}
		r.o = oa | oc << 8;
		const uint16_t *sc = reinterpret_cast<const uint16_t *>(b + 192 + 8 * n + 2 * k);
		r.aux = (uint32_t)sc[0] | (uint32_t)sc[2] << 16;
		r.aux2 = *reinterpret_cast<const uint16_t *>(b + 208);
	} else if constexpr (T == nsq::Q8_0) {
		span<3>(row + (uint64_t)t * G::BYTES, G::BYTES, r.w, r.o);
	} else if constexpr (T == nsq::Q4_0 || T == nsq::MXFP4) {
		span<2>(row + (uint64_t)t * G::BYTES, G::BYTES, r.w, r.o);
	} else {
		r.p = row + (uint64_t)(t / G::SUBS) * G::BYTES;
	}
}

/* xq, dx and 16-sums of task t. */
template <int T>
__device__ __forceinline__ void load_x(xregs &x, const uint8_t *xq, const float *dxs,
				       const int *s16, uint32_t t)
{
	using Q = q8g<T>;
	const uint4 *p = reinterpret_cast<const uint4 *>(xq + t * Q::XB);
	constexpr int NV = Q::TE / 16;

#pragma unroll
	for (int i = 0; i < NV; i++) {
		const uint4 v = p[i];

		x.q[4 * i] = v.x; x.q[4 * i + 1] = v.y; x.q[4 * i + 2] = v.z; x.q[4 * i + 3] = v.w;
	}
	if constexpr (Q::TE == 32) {
		x.dx[0] = dxs[t];
		x.s[0] = s16[2 * t];
		x.s[1] = s16[2 * t + 1];
	} else {
		/* units of the task: Q4_K/Q5_K 2t, 2t + 1; Q6_K 8b + 4n + k and + 2 */
		const uint32_t u0 = T == nsq::Q6_K ? (t >> 1) * 4 + (t & 1) : 2 * t;
		const uint32_t u1 = T == nsq::Q6_K ? u0 + 2 : u0 + 1;

		x.dx[0] = dxs[u0];
		x.dx[1] = dxs[u1];
		x.s[0] = s16[2 * u0];
		x.s[1] = s16[2 * u0 + 1];
		x.s[2] = s16[2 * u1];
		x.s[3] = s16[2 * u1 + 1];
	}
}

/* sum of dp4a over n words from word i0 of a and b */
template <int N>
__device__ __forceinline__ int dot4(const uint32_t *a, const uint32_t *b)
{
	int s = 0;

#pragma unroll
	for (int i = 0; i < N; i++)
		s = __dp4a((int)a[i], (int)b[i], s);
	return s;
}

/* The task's contribution: sum over its groups of (d_g dx) I_g (+ (m_g dx) S_g). */
template <int T>
__device__ __forceinline__ float dot_task(const wregs<T> &r, const xregs &x, uint32_t t)
{
	if constexpr (T == nsq::Q4_K || T == nsq::Q5_K) {
		/* sub-blocks 2j (low nibbles) and 2j + 1 (high); scales 6-bit packed in the
		 * header's words 1..3 (ggml get_scale_min_k4, all eight at once) */
		const uint32_t j = t & 3;
		const uint32_t s0 = r.w[1], s1 = r.w[2], s2 = r.w[3];
		const uint32_t scw = j < 2 ? s0 & 0x3F3F3F3Fu :
				     (s2 & 0x0F0F0F0Fu) | ((s0 & 0xC0C0C0C0u) >> 2);
		const uint32_t mnw = j < 2 ? s1 & 0x3F3F3F3Fu :
				     ((s2 >> 4) & 0x0F0F0F0Fu) | ((s1 & 0xC0C0C0C0u) >> 2);
		const uint32_t sh = 16 * (j & 1);
		const float d = half_bits(r.w[0]), dmin = half_bits(r.w[0] >> 16);
		const float da = __fmul_rn(d, (float)((scw >> sh) & 0xff));
		const float db = __fmul_rn(d, (float)((scw >> (sh + 8)) & 0xff));
		const float ma = -__fmul_rn(dmin, (float)((mnw >> sh) & 0xff));
		const float mb = -__fmul_rn(dmin, (float)((mnw >> (sh + 8)) & 0xff));
		uint32_t lo[8], hi[8];

#pragma unroll
		for (int k = 0; k < 8; k++) {
			lo[k] = r.w[4 + k] & 0x0F0F0F0Fu;
			hi[k] = (r.w[4 + k] >> 4) & 0x0F0F0F0Fu;
			if constexpr (T == nsq::Q5_K) {
				lo[k] |= ((r.w[12 + k] >> (2 * j)) & 0x01010101u) << 4;
				hi[k] |= ((r.w[12 + k] >> (2 * j + 1)) & 0x01010101u) << 4;
			}
		}
		const int ia = dot4<8>(lo, x.q), ib = dot4<8>(hi, x.q + 8);
		float p = __fmul_rn(__fmul_rn(da, x.dx[0]), (float)ia);

		p = fmaf(__fmul_rn(db, x.dx[1]), (float)ib, p);
		p = fmaf(__fmul_rn(ma, x.dx[0]), (float)(x.s[0] + x.s[1]), p);
		return fmaf(__fmul_rn(mb, x.dx[1]), (float)(x.s[2] + x.s[3]), p);
	} else if constexpr (T == nsq::Q6_K) {
		const uint32_t k = t & 1;
		uint32_t ql[8], qh[8];

		extract<12, 8>(*reinterpret_cast<const uint32_t (*)[12]>(r.w), r.o & 0xff, ql);
		extract<12, 8>(*reinterpret_cast<const uint32_t (*)[12]>(r.w + 12), r.o >> 8, qh);
		uint32_t a[8], c[8];

#pragma unroll
		for (int i = 0; i < 8; i++) {
			a[i] = (ql[i] & 0x0F0F0F0Fu) | (((qh[i] >> (2 * k)) & 0x03030303u) << 4);
			c[i] = ((ql[i] >> 4) & 0x0F0F0F0Fu) |
			       (((qh[i] >> (2 * k + 4)) & 0x03030303u) << 4);
		}
		const float dd = half_bits(r.aux2);
		float p = 0.0f;

#pragma unroll
		for (int g = 0; g < 4; g++) {
			const uint32_t *v = g < 2 ? a + 4 * g : c + 4 * (g - 2);
			const int ig = dot4<4>(v, x.q + 4 * g) - 32 * x.s[g];
			const float dg = __fmul_rn(dd, (float)(int8_t)(r.aux >> (8 * g)));

			p = fmaf(__fmul_rn(dg, x.dx[g >> 1]), (float)ig, p);
		}
		return p;
	} else if constexpr (T == nsq::Q8_0) {
		uint32_t q[8], dw[1];

		extract<12, 1>(r.w, r.o, dw);
		extract<12, 8>(r.w, r.o + 2, q);
		const int i = dot4<8>(q, x.q);
		return __fmul_rn(__fmul_rn(half_bits(dw[0]), x.dx[0]), (float)i);
	} else if constexpr (T == nsq::Q4_0) {
		uint32_t q[4], dw[1], lo[4], hi[4];

		extract<8, 1>(r.w, r.o, dw);
		extract<8, 4>(r.w, r.o + 2, q);
#pragma unroll
		for (int k = 0; k < 4; k++) {
			lo[k] = q[k] & 0x0F0F0F0Fu;
			hi[k] = (q[k] >> 4) & 0x0F0F0F0Fu;
		}
		const int i = dot4<4>(lo, x.q) + dot4<4>(hi, x.q + 4) - 8 * (x.s[0] + x.s[1]);
		return __fmul_rn(__fmul_rn(half_bits(dw[0]), x.dx[0]), (float)i);
	} else if constexpr (T == nsq::MXFP4) {
		uint32_t q[4], ew[1], lo[4], hi[4];

		extract<8, 1>(r.w, r.o, ew);
		extract<8, 4>(r.w, r.o + 1, q);
#pragma unroll
		for (int k = 0; k < 4; k++) {
			/* word k's nibbles: elements 4k, 16 + 4k, 4k + 1, 17 + 4k | 4k + 2, ... */
			const uint32_t r0 = mx_lookup(q[k]), r1 = mx_lookup(q[k] >> 16);

			lo[k] = __byte_perm(r0, r1, 0x6420u);
			hi[k] = __byte_perm(r0, r1, 0x7531u);
		}
		const int i = dot4<4>(lo, x.q) + dot4<4>(hi, x.q + 4);
		return __fmul_rn(__fmul_rn(nsq::e8m0_half(ew[0] & 0xffu), x.dx[0]), (float)i);
	} else {
		using G = nsq::geo<T>;
		int q[32];
		float d[2], m[2];

		nsq::unit<T>(r.p, (int)(t % G::SUBS), q, d, m);
		int i0 = 0, i1 = 0;

#pragma unroll
		for (int i = 0; i < 16; i++) {
			i0 += q[i] * (int)(int8_t)(x.q[i >> 2] >> (8 * (i & 3)));
			i1 += q[16 + i] * (int)(int8_t)(x.q[4 + (i >> 2)] >> (8 * (i & 3)));
		}
		float p = __fmul_rn(__fmul_rn(d[0], x.dx[0]), (float)i0);

		p = fmaf(__fmul_rn(d[1], x.dx[0]), (float)i1, p);
		if constexpr (G::MIN) {
			p = fmaf(__fmul_rn(m[0], x.dx[0]), (float)x.s[0], p);
			p = fmaf(__fmul_rn(m[1], x.dx[0]), (float)x.s[1], p);
		}
		return p;
	}
}

/* ------------------------------------------------------------ quantization of x -------- */

/* x (n_cols floats, 16-byte aligned) into the block's shared memory: xq by unit (upos),
 * dxs[u], s16[2u + h]; as ns_kquant_x_scalar. Thread i of a pass takes floats 4i .. 4i + 3;
 * the 8 threads of a unit are 8 consecutive lanes. The caller synchronizes. */
template <int T>
__device__ __forceinline__ void quantize_x(const float *__restrict__ x, uint32_t n_cols,
					   uint8_t *xq, float *dxs, int *s16)
{
	const float4 *x4 = reinterpret_cast<const float4 *>(x);
	const uint32_t n4 = n_cols / 4, lane = threadIdx.x & 31;

	for (uint32_t i0 = 0; i0 < n4; i0 += blockDim.x) { /* the same trips in every thread */
		const uint32_t i = i0 + threadIdx.x;
		const bool on = i < n4;
		const float4 v = on ? x4[i] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
		float a = 0.0f;
		const float e[4] = { v.x, v.y, v.z, v.w };

#pragma unroll
		for (int k = 0; k < 4; k++) {
			const float f = fabsf(e[k]);

			if (f > a) /* NaN never wins */
				a = f;
		}
#pragma unroll
		for (int o = 1; o < 8; o <<= 1) {
			const float f = __shfl_xor_sync(0xffffffffu, a, o);

			if (f > a)
				a = f;
		}
		const float dx = __fdiv_rn(a, 127.0f);
		const float id = dx > 0.0f && dx <= 3.40282347e38f ? __fdiv_rn(1.0f, dx) : 0.0f;
		uint32_t word = 0;
		int s = 0;

#pragma unroll
		for (int k = 0; k < 4; k++) {
			float f = __fmul_rn(e[k], id);

			if (!(f >= -127.0f && f <= 127.0f))
				f = f > 0.0f ? 127.0f : (f == f ? -127.0f : 0.0f);
			/* round to nearest even: 1.5 * 2^23 + f has f's rounding in its low bits */
			const int q = __float_as_int(__fadd_rn(f, 12582912.0f)) - 0x4B400000;

			word |= ((uint32_t)q & 0xffu) << (8 * k);
			s += q;
		}
		s += __shfl_xor_sync(0xffffffffu, s, 1);
		s += __shfl_xor_sync(0xffffffffu, s, 2);
		if (on) {
			const uint32_t u = i / 8;

			*reinterpret_cast<uint32_t *>(xq + upos<T>(u) + 4 * (i % 8)) = word;
			if ((lane & 7) == 0)
				dxs[u] = dx;
			if ((lane & 3) == 0)
				s16[2 * u + ((lane >> 2) & 1)] = s;
		}
	}
}

/* ------------------------------------------------------------ the kernel --------------- */

/* Dynamic shared memory: xq (n_cols / TE slots of XB bytes), dxs (n_cols / 32 floats), s16
 * (n_cols / 16 ints). */
template <int T>
__global__ void __launch_bounds__(32 * Q8_WARPS, q8g<T>::BPS)
k_gemvq8(const uint8_t *__restrict__ w, uint64_t row_bytes, uint32_t n_cols,
	 const float *__restrict__ x, float *__restrict__ y, uint64_t n_rows)
{
	using Q = q8g<T>;
	constexpr int R = Q::R;
	extern __shared__ __align__(16) uint8_t smq[];
	const uint32_t lane = threadIdx.x & 31, warp = threadIdx.x / 32;
	const uint32_t ntask = n_cols / Q::TE, nu = n_cols / 32;
	uint8_t *xq = smq;
	float *dxs = reinterpret_cast<float *>(smq + (size_t)ntask * Q::XB);
	int *s16 = reinterpret_cast<int *>(dxs + nu);
	const uint32_t nstep = (ntask + 31) / 32;
	const uint64_t gstride = (uint64_t)gridDim.x * Q8_WARPS;
	uint64_t g = (uint64_t)blockIdx.x * Q8_WARPS + warp; /* rows g * R .. g * R + R - 1 */
	wregs<T> wr[R];

	/* the first step's loads, in flight while x is quantized */
	if (g * R < n_rows && lane < ntask) {
#pragma unroll
		for (int r = 0; r < R; r++)
			if (g * R + r < n_rows)
				load_task<T>(wr[r], w + (g * R + r) * row_bytes, lane);
	}
	quantize_x<T>(x, n_cols, xq, dxs, s16);
	__syncthreads();
	bool first = true;

	for (; g * R < n_rows; g += gstride) {
		float acc[R];

#pragma unroll
		for (int r = 0; r < R; r++)
			acc[r] = 0.0f;
		for (uint32_t i = 0; i < nstep; i++) {
			const uint32_t t = lane + 32 * i;

			if (t < ntask) {
				if (!first) {
#pragma unroll
					for (int r = 0; r < R; r++) {
						const uint64_t row = g * R + r;

						if (row < n_rows)
							load_task<T>(wr[r], w + row * row_bytes, t);
					}
				}
				xregs xv;

				load_x<T>(xv, xq, dxs, s16, t);
#pragma unroll
				for (int r = 0; r < R; r++)
					if (g * R + r < n_rows)
						acc[r] += dot_task<T>(wr[r], xv, t);
			}
			first = false;
		}
		float out = 0.0f;

#pragma unroll
		for (int r = 0; r < R; r++) {
#pragma unroll
			for (int o = 16; o > 0; o >>= 1)
				acc[r] += __shfl_xor_sync(0xffffffffu, acc[r], o);
			if (lane == (uint32_t)r)
				out = acc[r];
		}
		if (lane < (uint32_t)R && g * R + lane < n_rows)
			y[g * R + lane] = out;
	}
}

/* Launch for a quantized type: -E2BIG when x's quantized form does not fit a block. */
template <int T>
int gemvq8_type(const uint8_t *w, uint64_t rb, uint32_t n_cols, const float *x, float *y,
		uint64_t n_rows, cudaStream_t st)
{
	using Q = q8g<T>;
	nsl::limits lim;

	if (!nsl::device_limits(&lim))
		return nsl::launched();
	const int n_sm = lim.n_sm, optin = lim.optin, per_sm = lim.per_sm;
	const size_t smem = (size_t)(n_cols / Q::TE) * Q::XB + (size_t)(n_cols / 32) * 4 +
			    (size_t)(n_cols / 16) * 4;
	const size_t reserve = 1024;

	if (smem + reserve > (size_t)optin)
		return -E2BIG;
	if (smem + reserve > 48 * 1024 &&
	    (cudaFuncSetAttribute(k_gemvq8<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
				  (int)smem) != cudaSuccess ||
	     cudaFuncSetAttribute(k_gemvq8<T>, cudaFuncAttributePreferredSharedMemoryCarveout,
				  cudaSharedmemCarveoutMaxShared) != cudaSuccess))
		return nsl::launched();
	uint64_t bps = (uint64_t)per_sm / (smem + reserve);
	if (bps > (uint64_t)Q::BPS)
		bps = Q::BPS;
	if (bps < 1)
		bps = 1;
	const uint64_t per = (uint64_t)Q8_WARPS * Q::R;
	uint64_t blocks = (n_rows + per - 1) / per;
	if (blocks > bps * (uint64_t)n_sm)
		blocks = bps * (uint64_t)n_sm;
	k_gemvq8<T><<<(unsigned)blocks, 32 * Q8_WARPS, smem, st>>>(w, rb, n_cols, x, y, n_rows);
	return nsl::launched();
}

} /* namespace */

extern "C" int ns_cuda_gemv_q8(uint32_t type, const void *dev_w, uint64_t n_cols,
			       uint64_t n_rows, const float *dev_x, float *dev_y,
			       ns_cuda_stream_t s)
{
	nsl::gemv_args a;

	if (type == nsq::F32 || type == nsq::F16 || type == nsq::BF16)
		return -ENOTSUP; /* float weights: ns_cuda_gemv */
	const int rc = nsl::gemv_check(type, dev_w, n_cols, n_rows, dev_x, dev_y, &a);

	if (rc)
		return rc < 0 ? rc : 0;
	if (n_cols > UINT32_MAX / 2)
		return -E2BIG;
	return nsl::by_type(type, [&](auto tc) {
		constexpr int T = decltype(tc)::value;

		if constexpr (nsq::geo<T>::FLT)
			return -ENOTSUP; /* refused above; never instantiated for floats */
		else
			return gemvq8_type<T>((const uint8_t *)dev_w, a.rb, (uint32_t)n_cols, dev_x,
					      dev_y, n_rows, (cudaStream_t)s);
	});
}
