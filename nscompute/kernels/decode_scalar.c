/* decode_scalar.c - portable reference decoders of every computable quantized type into the
 * common chunk form (kern_internal.h), and the type table.
 *
 * Block layouts (bytes, little endian; "half" = IEEE fp16):
 *   Q4_0  18: half d, u8 qs[16]          w = (nib - 8) * d; low nibbles are elements 0..15
 *   Q4_1  20: half d, half m, u8 qs[16]  w = nib * d + m
 *   Q5_0  22: half d, u32 qh, u8 qs[16]  w = ((nib | bit_e(qh) << 4) - 16) * d
 *   Q5_1  24: half d, half m, u32 qh, qs w = (nib | bit_e(qh) << 4) * d + m
 *   Q8_0  34: half d, i8 qs[32]          w = q * d
 *   MXFP4 17: u8 e (E8M0), u8 qs[16]     w = kv[nib] * 2^(e-128), kv = 2 * (E2M1 values)
 *   Q2_K  84: u8 sc[16] (lo: scale, hi: min), u8 qs[64] (2-bit), half d, half dmin
 *             w = (d * (sc & 15)) * q - dmin * (sc >> 4)
 *   Q3_K 110: u8 hmask[32], u8 qs[64], u8 scales[12] (16 6-bit, packed), half d
 *             w = (d * (sc - 32)) * (q2 - (hbit ? 0 : 4))
 *   Q4_K 144: half d, half dmin, u8 scales[12] (8 6-bit scales + 8 6-bit mins), u8 qs[128]
 *             w = (d * sc) * nib - dmin * mn, in 32-element sub-blocks
 *   Q5_K 176: half d, half dmin, scales[12], u8 qh[32], u8 qs[128]   (nib | hbit << 4)
 *   Q6_K 210: u8 ql[128], u8 qh[64], i8 scales[16], half d     w = (d * sc) * (q6 - 32)
 * The element order and scale packing follow ggml (ggml-common.h / ggml-quants.c). */
#include <stddef.h>
#include <string.h>

#include "fp16.h"
#include "ggml_type.h"
#include "kern_internal.h"

/* E2M1 values doubled, as ggml's kvalues_mxfp4; the block scale is halved to match. */
static const int8_t s_kv_mxfp4[16] = { 0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12 };

/* E8M0 exponent to 2^(e-128), i.e. half of the OCP scale 2^(e-127) (ggml E8M0_TO_FP32_HALF). */
static inline float s_e8m0_half(uint8_t e)
{
	uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;

	return ns_bits_to_fp32(bits);
}

static void s_dec_q4_0(const uint8_t *b, uint32_t nb, struct ns_kdec *o)
{
	for (uint32_t k = 0; k < nb; k++, b += 18) {
		float d = ns_fp16_to_fp32(ns_le16(b));
		int8_t *s = o->s + 32 * k;

		for (int j = 0; j < 16; j++) {
			s[j] = (int8_t)((b[2 + j] & 15) - 8);
			s[j + 16] = (int8_t)((b[2 + j] >> 4) - 8);
		}
		o->d[2 * k] = o->d[2 * k + 1] = d;
	}
}

static void s_dec_q4_1(const uint8_t *b, uint32_t nb, struct ns_kdec *o)
{
	for (uint32_t k = 0; k < nb; k++, b += 20) {
		float d = ns_fp16_to_fp32(ns_le16(b)), m = ns_fp16_to_fp32(ns_le16(b + 2));
		int8_t *s = o->s + 32 * k;

		for (int j = 0; j < 16; j++) {
			s[j] = (int8_t)(b[4 + j] & 15);
			s[j + 16] = (int8_t)(b[4 + j] >> 4);
		}
		o->d[2 * k] = o->d[2 * k + 1] = d;
		o->m[2 * k] = o->m[2 * k + 1] = m;
	}
}

static void s_dec_q5(const uint8_t *b, uint32_t nb, struct ns_kdec *o, bool with_min)
{
	uint32_t bsz = with_min ? 24 : 22, off = with_min ? 4 : 2;

	for (uint32_t k = 0; k < nb; k++, b += bsz) {
		float d = ns_fp16_to_fp32(ns_le16(b));
		uint32_t qh = ns_le32(b + off);
		const uint8_t *qs = b + off + 4;
		int8_t *s = o->s + 32 * k;
		int bias = with_min ? 0 : 16;

		for (int j = 0; j < 16; j++) {
			s[j] = (int8_t)(((qs[j] & 15) | (((qh >> j) & 1) << 4)) - bias);
			s[j + 16] = (int8_t)(((qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) - bias);
		}
		o->d[2 * k] = o->d[2 * k + 1] = d;
		if (with_min)
			o->m[2 * k] = o->m[2 * k + 1] = ns_fp16_to_fp32(ns_le16(b + 2));
	}
}

static void s_dec_q5_0(const uint8_t *b, uint32_t nb, struct ns_kdec *o)
{
	s_dec_q5(b, nb, o, false);
}

static void s_dec_q5_1(const uint8_t *b, uint32_t nb, struct ns_kdec *o)
{
	s_dec_q5(b, nb, o, true);
}

static void s_dec_q8_0(const uint8_t *b, uint32_t nb, struct ns_kdec *o)
{
	for (uint32_t k = 0; k < nb; k++, b += 34) {
		o->d[2 * k] = o->d[2 * k + 1] = ns_fp16_to_fp32(ns_le16(b));
		memcpy(o->s + 32 * k, b + 2, 32);
	}
}

static void s_dec_mxfp4(const uint8_t *b, uint32_t nb, struct ns_kdec *o)
{
	for (uint32_t k = 0; k < nb; k++, b += 17) {
		int8_t *s = o->s + 32 * k;

		for (int j = 0; j < 16; j++) {
			s[j] = s_kv_mxfp4[b[1 + j] & 15];
			s[j + 16] = s_kv_mxfp4[b[1 + j] >> 4];
		}
		o->d[2 * k] = o->d[2 * k + 1] = s_e8m0_half(b[0]);
	}
}

void ns_kdec_q2k_dm(const uint8_t *b, struct ns_kdec *o)
{
	float d = ns_fp16_to_fp32(ns_le16(b + 80)), dmin = ns_fp16_to_fp32(ns_le16(b + 82));

	for (int g = 0; g < 16; g++) {
		o->d[g] = d * (float)(b[g] & 15);
		o->m[g] = -(dmin * (float)(b[g] >> 4));
	}
}

static void s_dec_q2_k(const uint8_t *b, uint32_t nb, struct ns_kdec *o)
{
	const uint8_t *qs = b + 16;

	(void)nb; /* always one 256-element block */
	ns_kdec_q2k_dm(b, o);
	/* element 128n + 32j + l: bits 2j of qs[32n + l] */
	for (int n = 0; n < 2; n++)
		for (int j = 0; j < 4; j++)
			for (int l = 0; l < 32; l++)
				o->s[128 * n + 32 * j + l] = (int8_t)((qs[32 * n + l] >> (2 * j)) & 3);
}

/* Unpack Q3_K's 12 bytes into 16 6-bit scales (ggml's kmask shuffle, written per element). */
static void s_q3k_scales(const uint8_t *p, int sc[16])
{
	for (int i = 0; i < 16; i++) {
		int lo = i < 8 ? (p[i] & 15) : (p[i - 8] >> 4);
		int hi = (p[8 + (i & 3)] >> (2 * (i >> 2))) & 3;

		sc[i] = lo | (hi << 4);
	}
}

void ns_kdec_q3k_dm(const uint8_t *b, struct ns_kdec *o)
{
	float d = ns_fp16_to_fp32(ns_le16(b + 108));
	int sc[16];

	s_q3k_scales(b + 96, sc);
	for (int g = 0; g < 16; g++) {
		o->d[g] = d * (float)(sc[g] - 32);
		o->m[g] = 0.0f;
	}
}

static void s_dec_q3_k(const uint8_t *b, uint32_t nb, struct ns_kdec *o)
{
	const uint8_t *hm = b, *qs = b + 32;

	(void)nb;
	ns_kdec_q3k_dm(b, o);
	/* element 128n + 32j + l: 2 bits at 2j of qs[32n + l], high bit (4n + j) of hm[l] */
	for (int n = 0; n < 2; n++)
		for (int j = 0; j < 4; j++)
			for (int l = 0; l < 32; l++) {
				int q = (qs[32 * n + l] >> (2 * j)) & 3;
				int h = (hm[l] >> (4 * n + j)) & 1;

				o->s[128 * n + 32 * j + l] = (int8_t)(q - (h ? 0 : 4));
			}
}

/* Q4_K / Q5_K: 8 6-bit scales and 8 6-bit mins packed in 12 bytes (ggml get_scale_min_k4). */
static void s_k4_scale_min(const uint8_t *q, int j, int *sc, int *mn)
{
	if (j < 4) {
		*sc = q[j] & 63;
		*mn = q[j + 4] & 63;
	} else {
		*sc = (q[j + 4] & 15) | ((q[j - 4] >> 6) << 4);
		*mn = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
	}
}

void ns_kdec_k4_dm(const uint8_t *b, struct ns_kdec *o)
{
	float d = ns_fp16_to_fp32(ns_le16(b)), dmin = ns_fp16_to_fp32(ns_le16(b + 2));

	for (int j = 0; j < 8; j++) {
		int sc, mn;

		s_k4_scale_min(b + 4, j, &sc, &mn);
		o->d[2 * j] = o->d[2 * j + 1] = d * (float)sc;
		o->m[2 * j] = o->m[2 * j + 1] = -(dmin * (float)mn);
	}
}

static void s_dec_q4_k(const uint8_t *b, uint32_t nb, struct ns_kdec *o)
{
	const uint8_t *qs = b + 16;

	(void)nb;
	ns_kdec_k4_dm(b, o);
	for (int j = 0; j < 4; j++)
		for (int l = 0; l < 32; l++) {
			o->s[64 * j + l] = (int8_t)(qs[32 * j + l] & 15);
			o->s[64 * j + 32 + l] = (int8_t)(qs[32 * j + l] >> 4);
		}
}

static void s_dec_q5_k(const uint8_t *b, uint32_t nb, struct ns_kdec *o)
{
	const uint8_t *qh = b + 16, *qs = b + 48;

	(void)nb;
	ns_kdec_k4_dm(b, o);
	for (int j = 0; j < 4; j++)
		for (int l = 0; l < 32; l++) {
			int h1 = (qh[l] >> (2 * j)) & 1, h2 = (qh[l] >> (2 * j + 1)) & 1;

			o->s[64 * j + l] = (int8_t)((qs[32 * j + l] & 15) | (h1 << 4));
			o->s[64 * j + 32 + l] = (int8_t)((qs[32 * j + l] >> 4) | (h2 << 4));
		}
}

void ns_kdec_q6k_dm(const uint8_t *b, struct ns_kdec *o)
{
	const int8_t *sc = (const int8_t *)(b + 192);
	float d = ns_fp16_to_fp32(ns_le16(b + 208));

	for (int g = 0; g < 16; g++) {
		o->d[g] = d * (float)sc[g];
		o->m[g] = 0.0f;
	}
}

static void s_dec_q6_k(const uint8_t *b, uint32_t nb, struct ns_kdec *o)
{
	(void)nb;
	ns_kdec_q6k_dm(b, o);
	for (int n = 0; n < 2; n++) {
		const uint8_t *ql = b + 64 * n, *qh = b + 128 + 32 * n;
		int8_t *s = o->s + 128 * n;

		for (int l = 0; l < 32; l++) {
			s[l] = (int8_t)(((ql[l] & 15) | ((qh[l] & 3) << 4)) - 32);
			s[l + 32] = (int8_t)(((ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4)) - 32);
			s[l + 64] = (int8_t)(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
			s[l + 96] = (int8_t)(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
		}
	}
}

static const struct ns_kqtype s_types[] = {
	{ NS_TYPE_F32, 1, 4, 256, false, true, NULL },
	{ NS_TYPE_F16, 1, 2, 256, false, true, NULL },
	{ NS_TYPE_BF16, 1, 2, 256, false, true, NULL },
	{ NS_TYPE_Q4_0, 32, 18, 8, false, false, s_dec_q4_0 },
	{ NS_TYPE_Q4_1, 32, 20, 8, true, false, s_dec_q4_1 },
	{ NS_TYPE_Q5_0, 32, 22, 8, false, false, s_dec_q5_0 },
	{ NS_TYPE_Q5_1, 32, 24, 8, true, false, s_dec_q5_1 },
	{ NS_TYPE_Q8_0, 32, 34, 8, false, false, s_dec_q8_0 },
	{ NS_TYPE_Q2_K, 256, 84, 1, true, false, s_dec_q2_k },
	{ NS_TYPE_Q3_K, 256, 110, 1, false, false, s_dec_q3_k },
	{ NS_TYPE_Q4_K, 256, 144, 1, true, false, s_dec_q4_k },
	{ NS_TYPE_Q5_K, 256, 176, 1, true, false, s_dec_q5_k },
	{ NS_TYPE_Q6_K, 256, 210, 1, false, false, s_dec_q6_k },
	{ NS_TYPE_MXFP4, 32, 17, 8, false, false, s_dec_mxfp4 },
};

const struct ns_kqtype *ns_kq_get(uint32_t type)
{
	for (size_t i = 0; i < sizeof(s_types) / sizeof(s_types[0]); i++)
		if (s_types[i].type == type)
			return &s_types[i];
	return NULL;
}

void ns_kdec_to_f32(const struct ns_kqtype *qt, const struct ns_kdec *dc, uint32_t n, float *dst)
{
	if (qt->has_min) {
		for (uint32_t i = 0; i < n; i++)
			dst[i] = (float)dc->s[i] * dc->d[i / NS_KGROUP] + dc->m[i / NS_KGROUP];
	} else {
		for (uint32_t i = 0; i < n; i++)
			dst[i] = (float)dc->s[i] * dc->d[i / NS_KGROUP];
	}
}
