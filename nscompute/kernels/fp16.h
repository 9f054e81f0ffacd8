/* fp16.h - exact half and bfloat16 to float32 conversions (header-only, portable C).
 *
 * Every half value, including subnormals, infinities and NaN payloads, maps to the float with
 * the same value (the conversion is exact: float has a wider exponent and mantissa). BF16 is the
 * top half of a float32, so widening it is a shift. */
#ifndef NS_FP16_H
#define NS_FP16_H

#include <stdint.h>
#include <string.h>

static inline float ns_bits_to_fp32(uint32_t bits)
{
	float f;

	memcpy(&f, &bits, sizeof(f));
	return f;
}

static inline float ns_fp16_to_fp32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
	uint32_t exp = (h >> 10) & 0x1fu;
	uint32_t man = h & 0x3ffu;

	if (exp == 0x1f) /* inf / nan: keep the payload */
		return ns_bits_to_fp32(sign | 0x7f800000u | (man << 13));
	if (exp != 0) /* normal: rebias 15 -> 127 */
		return ns_bits_to_fp32(sign | ((exp + 112u) << 23) | (man << 13));
	if (man == 0)
		return ns_bits_to_fp32(sign);
	/* subnormal: man * 2^-24, exact in float (man < 2^10, the result is a normal float) */
	float f = (float)man * 0x1p-24f;
	return sign ? -f : f;
}

/* float32 -> half, rounded to nearest even as F16C's vcvtps2ph with rounding mode 0, CUDA's
 * __float2half_rn and ggml's GGML_FP32_TO_FP16 (equal to vcvtps2ph on all 2^32 inputs, NaN
 * payloads included): overflow gives infinity, tiny values round into subnormals or zero. */
static inline uint16_t ns_fp32_to_fp16(float f)
{
	uint32_t x, sign, abs;

	memcpy(&x, &f, sizeof(x));
	sign = (x >> 16) & 0x8000u;
	abs = x & 0x7fffffffu;
	if (abs > 0x7f800000u) /* NaN: quiet, top payload bits kept */
		return (uint16_t)(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
	if (abs >= 0x477ff000u) /* rounds to 2^16 or more: infinity */
		return (uint16_t)(sign | 0x7c00u);
	if (abs < 0x38800000u) { /* below 2^-14: a subnormal half or zero, unit 2^-24 */
		uint32_t e = abs >> 23, man = (abs & 0x7fffffu) | 0x800000u;
		uint32_t sh = 126u - e, q, rem, half;

		if (e < 102) /* below 2^-25: rounds to zero */
			return (uint16_t)sign;
		q = man >> sh;
		rem = man & ((1u << sh) - 1);
		half = 1u << (sh - 1);
		if (rem > half || (rem == half && (q & 1)))
			q++;
		return (uint16_t)(sign | q);
	}
	/* normal: rebias 127 -> 15 and round the 13 dropped bits to nearest even (a carry into
	 * the exponent is the right result) */
	abs -= 112u << 23;
	abs += 0xfffu + ((abs >> 13) & 1u);
	return (uint16_t)(sign | (abs >> 13));
}

static inline float ns_bf16_to_fp32(uint16_t h)
{
	return ns_bits_to_fp32((uint32_t)h << 16);
}

/* Little-endian 16- and 32-bit loads from unaligned bytes. */
static inline uint16_t ns_le16(const uint8_t *p)
{
	return (uint16_t)(p[0] | (p[1] << 8));
}

static inline uint32_t ns_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
	       ((uint32_t)p[3] << 24);
}

#endif
