/* kt_rand_mat.h - random test matrices in every type the kernels compute (header-only):
 * random bytes with sane scale fields (any bytes are valid kernel input; dequantization itself
 * is proven bit-exact by test_dequant_oracle), and activations with zeros and outliers. */
#ifndef KT_RAND_MAT_H
#define KT_RAND_MAT_H

#include "ggml_type.h"
#include "kt_util.h"

struct kt_ty {
	uint32_t type;
	uint32_t be, bb;   /* block elements, bytes */
	int half[2];       /* offsets of fp16 scale fields in a block, -1 = none */
	int e8m0;          /* offset of an E8M0 exponent, -1 = none */
};

static const struct kt_ty kt_tys[] = {
	{ NS_TYPE_F32, 1, 4, { -1, -1 }, -1 },     { NS_TYPE_F16, 1, 2, { -1, -1 }, -1 },
	{ NS_TYPE_BF16, 1, 2, { -1, -1 }, -1 },    { NS_TYPE_Q4_0, 32, 18, { 0, -1 }, -1 },
	{ NS_TYPE_Q4_1, 32, 20, { 0, 2 }, -1 },    { NS_TYPE_Q5_0, 32, 22, { 0, -1 }, -1 },
	{ NS_TYPE_Q5_1, 32, 24, { 0, 2 }, -1 },    { NS_TYPE_Q8_0, 32, 34, { 0, -1 }, -1 },
	{ NS_TYPE_Q2_K, 256, 84, { 80, 82 }, -1 }, { NS_TYPE_Q3_K, 256, 110, { 108, -1 }, -1 },
	{ NS_TYPE_Q4_K, 256, 144, { 0, 2 }, -1 },  { NS_TYPE_Q5_K, 256, 176, { 0, 2 }, -1 },
	{ NS_TYPE_Q6_K, 256, 210, { 208, -1 }, -1 }, { NS_TYPE_MXFP4, 32, 17, { -1, -1 }, 0 },
};

static inline uint16_t kt_rand_half(uint64_t *seed, int emin, int emax)
{
	uint32_t e = (uint32_t)(emin + (int)(kt_rand(seed) * (emax - emin + 1)));
	uint32_t m = (uint32_t)(kt_rand(seed) * 1024);

	return (uint16_t)((kt_rand(seed) < 0.5 ? 0x8000u : 0) | (e << 10) | m);
}

/* Random but finite weights of n_rows x n_cols in type ty. */
static inline uint8_t *kt_rand_matrix(uint64_t *seed, const struct kt_ty *ty, uint64_t n_cols,
				       uint64_t n_rows)
{
	uint64_t nb = n_cols / ty->be * n_rows;
	uint8_t *w = malloc(nb * ty->bb + 1);

	for (uint64_t i = 0; i < nb * ty->bb; i++)
		w[i] = (uint8_t)(kt_rand(seed) * 256);
	for (uint64_t b = 0; b < nb; b++) {
		uint8_t *p = w + b * ty->bb;

		for (int h = 0; h < 2; h++)
			if (ty->half[h] >= 0) {
				uint16_t v = kt_rand_half(seed, 8, 15);

				memcpy(p + ty->half[h], &v, 2);
			}
		if (ty->e8m0 >= 0)
			p[ty->e8m0] = (uint8_t)(118 + kt_rand(seed) * 12);
	}
	if (ty->type == NS_TYPE_F32)
		for (uint64_t i = 0; i < n_cols * n_rows; i++) {
			float f = kt_normal(seed);

			memcpy(w + 4 * i, &f, 4);
		}
	if (ty->type == NS_TYPE_F16)
		for (uint64_t i = 0; i < n_cols * n_rows; i++) {
			uint16_t v = kt_rand_half(seed, 5, 16);

			memcpy(w + 2 * i, &v, 2);
		}
	if (ty->type == NS_TYPE_BF16)
		for (uint64_t i = 0; i < n_cols * n_rows; i++) {
			float f = kt_normal(seed);
			uint32_t u;

			memcpy(&u, &f, 4);
			w[2 * i] = (uint8_t)(u >> 16);
			w[2 * i + 1] = (uint8_t)(u >> 24);
		}
	return w;
}

static inline float *kt_rand_x(uint64_t *seed, uint64_t n)
{
	float *x = malloc(n * sizeof(float));

	for (uint64_t i = 0; i < n; i++) {
		double u = kt_rand(seed);

		x[i] = u < 0.05 ? 0.0f : u < 0.06 ? 40.0f * kt_normal(seed) : kt_normal(seed);
	}
	return x;
}
#endif
