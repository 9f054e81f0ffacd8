/* fp16.h - exact IEEE half <-> float conversion (header-only, no CPU extensions needed). */
#ifndef NS_FP16_H
#define NS_FP16_H

#include <stdint.h>
#include <string.h>

static inline float ns_fp16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16;
	uint32_t exp = (h >> 10) & 0x1f;
	uint32_t man = h & 0x3ff;
	uint32_t bits;
	float f;

	if (exp == 0x1f) {
		bits = sign | 0x7f800000u | (man << 13);
	} else if (exp == 0) {
		if (man == 0) {
			bits = sign;
		} else {
			/* subnormal: renormalise */
			int e = -1;
			do {
				man <<= 1;
				e++;
			} while (!(man & 0x400));
			bits = sign | (uint32_t)(127 - 15 - e) << 23 | (man & 0x3ff) << 13;
		}
	} else {
		bits = sign | (exp + 112) << 23 | man << 13;
	}
	memcpy(&f, &bits, 4);
	return f;
}

/* Round to nearest even, with overflow to inf and correct subnormals. */
static inline uint16_t ns_f32_to_fp16(float f)
{
	uint32_t x;
	uint32_t sign, mant;
	int32_t exp;

	memcpy(&x, &f, 4);
	sign = (x >> 16) & 0x8000;
	exp = (int32_t)((x >> 23) & 0xff);
	mant = x & 0x7fffff;
	if (exp == 0xff)
		return (uint16_t)(sign | 0x7c00 | (mant ? 0x200 : 0));
	exp = exp - 127 + 15;
	if (exp >= 0x1f)
		return (uint16_t)(sign | 0x7c00);
	if (exp <= 0) {
		if (exp < -10)
			return (uint16_t)sign;
		mant |= 0x800000;
		uint32_t shift = (uint32_t)(14 - exp);
		uint32_t half = mant >> shift;
		uint32_t rem = mant & ((1u << shift) - 1);
		uint32_t mid = 1u << (shift - 1);
		if (rem > mid || (rem == mid && (half & 1)))
			half++;
		return (uint16_t)(sign | half);
	}
	uint32_t h = sign | (uint32_t)exp << 10 | (mant >> 13);
	uint32_t rem = mant & 0x1fff;
	if (rem > 0x1000 || (rem == 0x1000 && (h & 1)))
		h++; /* may carry into the exponent, which is the correct rounding */
	return (uint16_t)h;
}

#endif
