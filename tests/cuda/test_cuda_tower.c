/* test_cuda_tower: the vision tower's kernels (tower.cu; attn.cu's bidirectional attention)
 * against direct computations in double, at sizes that are not multiples of a block, warp or
 * attention chunk:
 *   - LayerNorm with bias over 5 rows of 1000 (and 3 rows of 4 * 1000, a merger's view),
 *     in place and out of place, vs the double formula: relative 1e-6 + 1e-6;
 *   - GELU tanh and erf on 3001 values vs the double formulas: relative 1e-6 + 1e-7 (and
 *     the two differ, so a swapped flag fails);
 *   - the table-driven rotation on q and k inside qkv rows (stride 3 * heads * hd), vs the
 *     same float expressions: bit for bit, and the v part and the padding untouched;
 *   - bidirectional attention over 300 keys (two chunks), 3 heads, head sizes 72 (float4
 *     loads) and 10 (scalar), q/k/v read inside qkv rows, vs a double softmax: within 2e-5 of
 *     max |v| (as test_cuda_attn); query 0 must see the last key (a causal mask fails it);
 *     queries cut in blocks of 7 give the same bits as one call;
 *   - the f32 GEMM (70 rows x 100 columns, 67 tokens, padded ldx / ldy) vs double dots within
 *     n_cols 2^-23 sum |w x|; one token alone gives its bits among 67;
 *   - refusals: missing bias, odd head size, no keys, ldx < n_cols.
 * Run on a GPU (cuda_tower, exit 77 without), over the emulation (cuda_emu_tower) and over
 * the kernels' own sources (cuda_simt_tower). */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "cuda_test.h"

static void s_close(const char *what, const float *got, const double *want, uint64_t n,
		    double rel, double abs_tol)
{
	for (uint64_t i = 0; i < n; i++)
		if (!(fabs(got[i] - want[i]) <= rel * fabs(want[i]) + abs_tol))
			CT_FAIL("%s[%llu]: %.9g vs %.9g", what, (unsigned long long)i, got[i],
				want[i]);
}

static void s_layernorm(uint64_t *seed, uint32_t n, uint32_t rows, bool in_place)
{
	float *x = ct_random_floats((uint64_t)n * rows, seed), *w = ct_random_floats(n, seed);
	float *b = ct_random_floats(n, seed), *got = malloc((uint64_t)n * rows * 4);
	double *want = malloc((uint64_t)n * rows * sizeof(double));
	float *dx = ct_upload(x, (uint64_t)n * rows * 4), *dw = ct_upload(w, n * 4);
	float *db = ct_upload(b, n * 4), *dy = in_place ? dx : ct_dev((uint64_t)n * rows * 4);

	if (!got || !want)
		CT_FAIL("out of memory");
	for (uint32_t i = 0; i < n * rows; i++)
		x[i] = x[i] * 3.0f + 0.5f; /* a mean away from 0: the bias of a variance matters */
	CT_CHECK(ns_cuda_h2d(dx, x, (uint64_t)n * rows * 4));
	for (uint32_t r = 0; r < rows; r++) {
		double mean = 0, var = 0;

		for (uint32_t i = 0; i < n; i++)
			mean += x[r * n + i];
		mean /= n;
		for (uint32_t i = 0; i < n; i++)
			var += (x[r * n + i] - mean) * (x[r * n + i] - mean);
		var /= n;
		for (uint32_t i = 0; i < n; i++)
			want[r * n + i] = (x[r * n + i] - mean) / sqrt(var + 1e-6) * w[i] + b[i];
	}
	CT_CHECK(ns_cuda_layernorm(dy, dx, dw, db, n, rows, 1e-6f, NULL));
	CT_CHECK(ns_cuda_sync());
	ct_download(got, dy, (uint64_t)n * rows * 4);
	s_close(in_place ? "layernorm (in place)" : "layernorm", got, want, (uint64_t)n * rows,
		1e-6, 1e-6);
	if (ns_cuda_layernorm(dy, dx, dw, NULL, n, rows, 1e-6f, NULL) != -EINVAL)
		CT_FAIL("layernorm: a missing bias accepted");
	free(x);
	free(w);
	free(b);
	free(got);
	free(want);
}

static void s_gelu(uint64_t *seed)
{
	enum { N = 3001 };
	float *x = ct_random_floats(N, seed), got[N];
	double want[N];

	for (int i = 0; i < N; i++)
		x[i] *= 4.0f;
	for (int exact = 0; exact < 2; exact++) {
		float *dx = ct_upload(x, sizeof(got));

		for (int i = 0; i < N; i++) {
			const double v = x[i];

			want[i] = exact ? 0.5 * v * (1 + erf(v / sqrt(2.0)))
					: 0.5 * v * (1 + tanh(sqrt(2 / M_PI) *
							      (v + 0.044715 * v * v * v)));
		}
		CT_CHECK(ns_cuda_gelu(dx, N, exact, NULL));
		CT_CHECK(ns_cuda_sync());
		ct_download(got, dx, sizeof(got));
		s_close(exact ? "gelu erf" : "gelu tanh", got, want, N, 1e-6, 1e-7);
	}
	free(x);
}

enum { RN = 37, RH = 3, RD = 72 };

static void s_rope(uint64_t *seed)
{
	const uint64_t d = RH * RD, stride = 3 * d + 5;
	float *x = ct_random_floats(RN * stride, seed), *cs = malloc(RN * RD * 4);
	float *got = malloc(RN * stride * 4), *want = malloc(RN * stride * 4);
	float *dx = ct_upload(x, RN * stride * 4), *dcs;

	if (!cs || !got || !want)
		CT_FAIL("out of memory");
	for (uint32_t p = 0; p < RN; p++) /* any angles: the kernel reads the table */
		for (uint32_t i = 0; i < RD / 2; i++) {
			const double a = (p % 5) * 0.7 + (p / 5) * 0.3 * (i + 1);

			cs[p * RD + i] = (float)cos(a);
			cs[p * RD + RD / 2 + i] = (float)sin(a);
		}
	dcs = ct_upload(cs, RN * RD * 4);
	memcpy(want, x, RN * stride * 4);
	for (uint32_t part = 0; part < 2; part++) /* q, then k */
		for (uint32_t p = 0; p < RN; p++)
			for (uint32_t h = 0; h < RH; h++) {
				float *v = want + p * stride + part * d + h * RD;
				const float *c = cs + p * RD, *s = c + RD / 2;

				for (uint32_t i = 0; i < RD / 2; i++) {
					const float a = v[i], b = v[RD / 2 + i];
					volatile float t1 = a * c[i], t2 = b * s[i];
					volatile float t3 = b * c[i], t4 = a * s[i];

					v[i] = t1 - t2;
					v[RD / 2 + i] = t3 + t4;
				}
			}
	CT_CHECK(ns_cuda_rope_table(dx, RN, stride, RH, RD, dcs, NULL));
	CT_CHECK(ns_cuda_rope_table(dx + d, RN, stride, RH, RD, dcs, NULL));
	CT_CHECK(ns_cuda_sync());
	ct_download(got, dx, RN * stride * 4);
	for (uint64_t i = 0; i < RN * stride; i++)
		if (memcmp(&got[i], &want[i], 4))
			CT_FAIL("rope_table[%llu]: %.9g vs %.9g (bit for bit)",
				(unsigned long long)i, got[i], want[i]);
	if (ns_cuda_rope_table(dx, RN, stride, RH, 71, dcs, NULL) != -EINVAL)
		CT_FAIL("rope_table: an odd head size accepted");
	free(x);
	free(cs);
	free(got);
	free(want);
}

/* n_kv keys, all queries of the frame, heads of hd, inside qkv rows (ld 3 * heads * hd + 4) */
static void s_attention(uint64_t *seed, uint32_t hd)
{
	enum { NKV = 300, H = 3 };
	const uint64_t d = (uint64_t)H * hd, ld = 3 * d + 4;
	const float scale = 1.0f / sqrtf((float)hd);
	float *qkv = ct_random_floats(NKV * ld, seed), *got = malloc(NKV * d * 4);
	float *blk = malloc(NKV * d * 4);
	double *want = malloc(NKV * d * sizeof(double)), *p = malloc(NKV * sizeof(double));
	const uint64_t ws_bytes = ns_cuda_attn_ws_bytes(NKV, H, NKV, hd);
	float *dqkv = ct_upload(qkv, NKV * ld * 4), *dout = ct_dev(NKV * d * 4);
	void *ws = ct_dev(ws_bytes);
	double vmax = 0;

	if (!got || !blk || !want || !p)
		CT_FAIL("out of memory");
	for (uint64_t i = 0; i < NKV * ld; i++)
		vmax = fabs(qkv[i]) > vmax ? fabs(qkv[i]) : vmax;
	for (uint32_t t = 0; t < NKV; t++)
		for (uint32_t h = 0; h < H; h++) {
			double m = -INFINITY, l = 0;

			for (uint32_t j = 0; j < NKV; j++) {
				double s = 0;

				for (uint32_t c = 0; c < hd; c++)
					s += (double)qkv[t * ld + h * hd + c] *
					     qkv[j * ld + d + h * hd + c];
				p[j] = s * scale;
				m = p[j] > m ? p[j] : m;
			}
			for (uint32_t j = 0; j < NKV; j++)
				l += (p[j] = exp(p[j] - m));
			for (uint32_t c = 0; c < hd; c++) {
				double o = 0;

				for (uint32_t j = 0; j < NKV; j++)
					o += p[j] * qkv[j * ld + 2 * d + h * hd + c];
				want[(t * H + h) * hd + c] = o / l;
			}
		}
	CT_CHECK(ns_cuda_attention_full(dqkv, ld, dqkv + d, ld, dqkv + 2 * d, ld, NKV, NKV, H, hd,
					hd, scale, dout, ws, NULL));
	CT_CHECK(ns_cuda_sync());
	ct_download(got, dout, NKV * d * 4);
	s_close(hd % 4 ? "attention_full (scalar)" : "attention_full", got, want, NKV * d, 0,
		2e-5 * vmax);
	/* the first query attends to the last key: with a causal mask it would be v_0 */
	{
		double dv = 0;

		for (uint32_t c = 0; c < hd; c++)
			dv += fabs(got[c] - qkv[2 * d + c]);
		if (dv < 1e-3)
			CT_FAIL("attention_full: query 0 is its own value (masked?)");
	}
	/* queries in blocks of 7: the same bits */
	for (uint32_t q0 = 0; q0 < NKV; q0 += 7) {
		const uint32_t nq = NKV - q0 < 7 ? NKV - q0 : 7;

		CT_CHECK(ns_cuda_attention_full(dqkv + q0 * ld, ld, dqkv + d, ld, dqkv + 2 * d, ld,
						nq, NKV, H, hd, hd, scale, dout + q0 * d, ws,
						NULL));
	}
	CT_CHECK(ns_cuda_sync());
	ct_download(blk, dout, NKV * d * 4);
	if (memcmp(blk, got, NKV * d * 4))
		CT_FAIL("attention_full: queries in blocks of 7 differ from one call");
	if (ns_cuda_attention_full(dqkv, ld, dqkv + d, ld, dqkv + 2 * d, ld, NKV, 0, H, hd, hd,
				   scale, dout, ws, NULL) != -EINVAL)
		CT_FAIL("attention_full: no keys accepted");
	free(qkv);
	free(got);
	free(blk);
	free(want);
	free(p);
}

/* the f32 GEMM on padded rows (ldx, ldy), sizes off the 64 x 64 tile and 16-column step */
static void s_sgemm(uint64_t *seed)
{
	enum { R = 70, C = 100, T = 67, LDX = 103, LDY = 75 };
	float *w = ct_random_floats(R * C, seed), *x = ct_random_floats(T * LDX, seed);
	float *got = malloc(T * LDY * 4), *one = malloc(LDY * 4);
	float *dw = ct_upload(w, R * C * 4), *dx = ct_upload(x, T * LDX * 4);
	float *dy = ct_dev(T * LDY * 4);

	if (!got || !one)
		CT_FAIL("out of memory");
	CT_CHECK(ns_cuda_sgemm(dw, C, R, dx, LDX, T, dy, LDY, NULL));
	CT_CHECK(ns_cuda_sync());
	ct_download(got, dy, T * LDY * 4);
	for (uint32_t t = 0; t < T; t++)
		for (uint32_t r = 0; r < R; r++) {
			double abs_sum, want = ct_dot(w + r * C, x + t * LDX, C, &abs_sum);

			if (!(fabs(got[t * LDY + r] - want) <= C * 0x1p-23 * abs_sum))
				CT_FAIL("sgemm[%u][%u]: %.9g vs %.9g (bound %.3g)", t, r,
					got[t * LDY + r], want, C * 0x1p-23 * abs_sum);
		}
	/* token 40 alone: its row's bits (an output depends on its row, token, n_cols only) */
	CT_CHECK(ns_cuda_sgemm(dw, C, R, dx + 40 * LDX, LDX, 1, dy, LDY, NULL));
	CT_CHECK(ns_cuda_sync());
	ct_download(one, dy, LDY * 4);
	if (memcmp(one, got + 40 * LDY, R * 4))
		CT_FAIL("sgemm: one token differs from the same token among 67");
	if (ns_cuda_sgemm(dw, C, R, dx, C - 1, T, dy, LDY, NULL) != -EINVAL)
		CT_FAIL("sgemm: ldx < n_cols accepted");
	free(w);
	free(x);
	free(got);
	free(one);
}

int main(void)
{
	uint64_t seed = 0x70e3;

	ct_init("cuda_tower");
	s_layernorm(&seed, 1000, 5, false);
	s_layernorm(&seed, 4000, 3, true);
	s_gelu(&seed);
	s_rope(&seed);
	s_attention(&seed, 72);
	s_attention(&seed, 10);
	s_sgemm(&seed);
	printf("ok\n");
	return 0;
}
