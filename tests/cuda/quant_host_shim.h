/* quant_host_shim.h - just enough of CUDA's device vocabulary, written for the CPU, to compile
 * nscompute/cuda/quant.cuh with g++ and check its decoders without a GPU. Each intrinsic follows
 * the PTX/CUDA definition: __byte_perm as prmt.b32 in its default mode (selector bit 3
 * replicates the chosen byte's sign), __*_rn as single IEEE operations (this file is compiled
 * with -ffp-contract=off), halves as IEEE binary16. */
#ifndef NS_QUANT_HOST_SHIM_H
#define NS_QUANT_HOST_SHIM_H

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#define NSQ_HOST_SHIM 1
#define __device__
#define __forceinline__ inline

struct __half { uint16_t bits; };
struct __half2 { __half x, y; };
struct float2 { float x, y; };
struct float4 { float x, y, z, w; };
struct uint2 { uint32_t x, y; };
struct uint4 { uint32_t x, y, z, w; };

static inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
static inline float __uint_as_float(uint32_t i) { float f; std::memcpy(&f, &i, 4); return f; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }

static inline __half __ushort_as_half(unsigned short u) { __half h; h.bits = u; return h; }

static inline float __half2float(__half h)
{
	const uint32_t sign = (uint32_t)(h.bits & 0x8000u) << 16, exp = (h.bits >> 10) & 0x1fu;
	const uint32_t man = h.bits & 0x3ffu;

	if (exp == 0x1f)
		return __uint_as_float(sign | 0x7f800000u | (man << 13));
	if (exp)
		return __uint_as_float(sign | ((exp + 112u) << 23) | (man << 13));
	const float f = (float)man * 0x1p-24f;
	return sign ? -f : f;
}

/* Only values a half holds exactly occur here (small integers); anything else fails loudly. */
static inline __half s_float2half_exact(float f)
{
	uint32_t u;
	std::memcpy(&u, &f, 4);
	const uint32_t sign = (u >> 16) & 0x8000u, exp = (u >> 23) & 0xffu, man = u & 0x7fffffu;
	__half h;

	if (exp == 0 && man == 0) {
		h.bits = (uint16_t)sign;
	} else if (exp >= 113 && exp <= 142 && (man & 0x1fffu) == 0) {
		h.bits = (uint16_t)(sign | ((exp - 112) << 10) | (man >> 13));
	} else {
		const float m = std::fabs(f) * 0x1p24f; /* subnormal half: m * 2^-24 */
		if (m != std::floor(m) || m >= 1024.0f)
			std::abort();
		h.bits = (uint16_t)(sign | (uint32_t)m);
	}
	return h;
}

static inline __half2 __half2half2(__half h) { return __half2{ h, h }; }

static inline __half2 __hsub2(__half2 a, __half2 b)
{
	return __half2{ s_float2half_exact(__half2float(a.x) - __half2float(b.x)),
			s_float2half_exact(__half2float(a.y) - __half2float(b.y)) };
}

static inline float2 __half22float2(__half2 h)
{
	return float2{ __half2float(h.x), __half2float(h.y) };
}

static inline uint32_t __byte_perm(uint32_t x, uint32_t y, uint32_t s)
{
	const uint64_t v = (uint64_t)x | ((uint64_t)y << 32);
	uint32_t r = 0;

	for (int i = 0; i < 4; i++) {
		const uint32_t n = (s >> (4 * i)) & 15u;
		uint32_t b = (uint32_t)(v >> (8 * (n & 7))) & 0xffu;

		if (n & 8)
			b = (b & 0x80u) ? 0xffu : 0u;
		r |= b << (8 * i);
	}
	return r;
}

#endif
