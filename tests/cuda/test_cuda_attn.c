/* test_cuda_attn: ns_cuda_attention against the CPU attention of nscompute/forward/llama.c
 * (double sums) for decode and prefill, GQA, a sliding window and sinks; and decode equal in
 * bits to the same query inside a prefill. |err| <= 2e-5 * max|v|. Exit 77 without a GPU. */
#include <math.h>
#include <string.h>

#include "cuda_test.h"
#include "ops.h"

enum { NH = 8, NKV = 2, DK = 64, DV = 64, CTX = 1200 };

/* out: (n_tok, NH, DV) */
static void s_cpu(const float *q, const float *k, const float *v, uint32_t n_tok, uint32_t pos0,
		  uint32_t window, const float *sinks, float scale, float *out)
{
	static float att[CTX];

	for (uint32_t t = 0; t < n_tok; t++) {
		const uint32_t p1 = pos0 + t + 1, j0 = window && p1 > window ? p1 - window : 0;
		const uint32_t n = p1 - j0;

		for (uint32_t h = 0; h < NH; h++) {
			const uint32_t hk = h / (NH / NKV);
			const float *qh = q + ((uint64_t)t * NH + h) * DK;
			for (uint32_t j = 0; j < n; j++) {
				double a = 0;
				for (uint32_t d = 0; d < DK; d++)
					a += (double)qh[d] * k[(uint64_t)(j0 + j) * NKV * DK + hk * DK + d];
				att[j] = (float)a * scale;
			}
			if (sinks)
				ns_softmax_sink(att, n, sinks[h]);
			else
				ns_softmax(att, n);
			for (uint32_t d = 0; d < DV; d++) {
				double a = 0;
				for (uint32_t j = 0; j < n; j++)
					a += (double)att[j] * v[(uint64_t)(j0 + j) * NKV * DV + hk * DV + d];
				out[((uint64_t)t * NH + h) * DV + d] = (float)a;
			}
		}
	}
}

int main(void)
{
	uint64_t seed = 3;
	float *k = ct_random_floats(CTX * NKV * DK, &seed), *v = ct_random_floats(CTX * NKV * DV, &seed);
	float *q = ct_random_floats(64 * NH * DK, &seed), sinks[NH];
	float *ref = malloc(64 * NH * DV * 4), *got = malloc(64 * NH * DV * 4);
	const float scale = 1.0f / 8.0f;
	const struct { uint32_t n_tok, pos0, window; bool sink; } cs[] = {
		{ 1, 0, 0, false }, { 1, 700, 0, false }, { 1, 1100, 128, true },
		{ 50, 300, 0, false }, { 60, 1000, 300, true }, { 64, 0, 0, true },
	};

	ct_init("cuda_attn");
	for (int h = 0; h < NH; h++)
		sinks[h] = 0.5f * h - 1.0f;
	float *dk = ct_upload(k, CTX * NKV * DK * 4), *dv = ct_upload(v, CTX * NKV * DV * 4);
	float *dq = ct_upload(q, 64 * NH * DK * 4), *ds = ct_upload(sinks, sizeof(sinks));
	float *dout = ct_dev(64 * NH * DV * 4);
	void *ws = ct_dev(ns_cuda_attn_ws_bytes(64, NH, CTX, DV));
	for (size_t c = 0; c < sizeof(cs) / sizeof(cs[0]); c++) {
		const uint32_t nt = cs[c].n_tok;

		s_cpu(q, k, v, nt, cs[c].pos0, cs[c].window, cs[c].sink ? sinks : NULL, scale, ref);
		CT_CHECK(ns_cuda_attention(dq, dk, NKV * DK, dv, NKV * DV, nt, cs[c].pos0, NH, NKV, DK,
					   DV, scale, cs[c].window, cs[c].sink ? ds : NULL, dout, ws,
					   NULL));
		CT_CHECK(ns_cuda_sync());
		ct_download(got, dout, nt * NH * DV * 4);
		for (uint32_t i = 0; i < nt * NH * DV; i++)
			if (!(fabs(got[i] - ref[i]) <= 2e-5 * 5.0))
				CT_FAIL("case %zu element %u: %.9g vs cpu %.9g", c, i, got[i], ref[i]);
		/* the last query alone (decode) equals its row of the prefill in bits */
		if (nt > 1) {
			float one[NH * DV];
			CT_CHECK(ns_cuda_attention(dq + (nt - 1) * NH * DK, dk, NKV * DK, dv, NKV * DV, 1,
						   cs[c].pos0 + nt - 1, NH, NKV, DK, DV, scale,
						   cs[c].window, cs[c].sink ? ds : NULL, dout, ws, NULL));
			CT_CHECK(ns_cuda_sync());
			ct_download(one, dout, sizeof(one));
			if (memcmp(one, got + (nt - 1) * NH * DV, sizeof(one)))
				CT_FAIL("case %zu: decode differs in bits from the prefill row", c);
			/* the graph variant: position from device memory, grid over CTX */
			const int64_t pos = cs[c].pos0 + nt - 1;
			int64_t *dpos = ct_upload(&pos, sizeof(pos));
			CT_CHECK(ns_cuda_attention_at(dq + (nt - 1) * NH * DK, dk, NKV * DK, dv,
						      NKV * DV, dpos, CTX, NH, NKV, DK, DV, scale,
						      cs[c].window, cs[c].sink ? ds : NULL, dout, ws,
						      NULL));
			CT_CHECK(ns_cuda_sync());
			ct_download(one, dout, sizeof(one));
			if (memcmp(one, got + (nt - 1) * NH * DV, sizeof(one)))
				CT_FAIL("case %zu: ns_cuda_attention_at differs in bits", c);
			ns_cuda_free(dpos);
		}
		printf("attention n_tok %2u pos0 %4u window %3u sinks %d: ok\n", nt, cs[c].pos0,
		       cs[c].window, cs[c].sink);
	}
	/* The same caches with one float of padding per row (strides not a multiple of 4, rows
	 * not 16-byte aligned): the kernels' scalar path, same reference. */
	const uint32_t lk = NKV * DK + 1, lv = NKV * DV + 1;
	float *kp = calloc((size_t)CTX * lk, 4), *vp = calloc((size_t)CTX * lv, 4);
	if (!kp || !vp)
		CT_FAIL("out of memory");
	for (uint32_t j = 0; j < CTX; j++) {
		memcpy(kp + (size_t)j * lk, k + (size_t)j * NKV * DK, NKV * DK * 4);
		memcpy(vp + (size_t)j * lv, v + (size_t)j * NKV * DV, NKV * DV * 4);
	}
	float *dkp = ct_upload(kp, (size_t)CTX * lk * 4), *dvp = ct_upload(vp, (size_t)CTX * lv * 4);
	for (size_t c = 1; c < 5; c += 3) {
		const uint32_t nt = cs[c].n_tok;

		s_cpu(q, k, v, nt, cs[c].pos0, cs[c].window, cs[c].sink ? sinks : NULL, scale, ref);
		CT_CHECK(ns_cuda_attention(dq, dkp, lk, dvp, lv, nt, cs[c].pos0, NH, NKV, DK, DV,
					   scale, cs[c].window, cs[c].sink ? ds : NULL, dout, ws,
					   NULL));
		CT_CHECK(ns_cuda_sync());
		ct_download(got, dout, nt * NH * DV * 4);
		for (uint32_t i = 0; i < nt * NH * DV; i++)
			if (!(fabs(got[i] - ref[i]) <= 2e-5 * 5.0))
				CT_FAIL("padded case %zu element %u: %.9g vs cpu %.9g", c, i, got[i],
					ref[i]);
		printf("attention, padded rows, n_tok %2u pos0 %4u: ok\n", nt, cs[c].pos0);
	}
	free(kp);
	free(vp);
	return 0;
}
