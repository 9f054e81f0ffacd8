/* test_cuda_attn: ns_cuda_attention against the CPU attention of nscompute/forward/llama.c
 * (double sums) for decode and prefill, GQA, a sliding window and sinks; and decode equal in
 * bits to the same query inside a prefill. |err| <= 2e-5 * max|v|. Typed caches (f16, q8_0,
 * mixed): ns_cuda_kv_store writes the bytes computed here (half to nearest even, ggml's
 * Q8_0), by chunk and by device position alike, and ns_cuda_attention_kv matches the same
 * reference over those values. Exit 77 without a GPU. */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "cuda_test.h"
#include "fp16.h"
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

/* Expected cache row of n floats as type t (and the values it holds, widened). */
static void s_row(uint32_t t, const float *x, uint32_t n, uint8_t *row, float *val)
{
	for (uint32_t b = 0; b < n / 32; b++) {
		float amax = 0, d, id, dh;
		uint16_t h;

		if (t == NS_CUDA_KV_F16) {
			for (uint32_t i = 32 * b; i < 32 * b + 32; i++) {
				h = ns_fp32_to_fp16(x[i]);
				memcpy(row + 2 * i, &h, 2);
				val[i] = ns_fp16_to_fp32(h);
			}
			continue;
		}
		if (t == NS_CUDA_KV_F32) {
			memcpy(row + 128 * b, x + 32 * b, 128);
			memcpy(val + 32 * b, x + 32 * b, 128);
			continue;
		}
		for (uint32_t i = 32 * b; i < 32 * b + 32; i++)
			amax = fmaxf(amax, fabsf(x[i]));
		d = amax / 127.0f;
		id = d != 0 ? 1.0f / d : 0.0f;
		h = ns_fp32_to_fp16(d);
		dh = ns_fp16_to_fp32(h);
		memcpy(row + 34 * b, &h, 2);
		for (uint32_t i = 0; i < 32; i++) {
			int8_t q = (int8_t)roundf(x[32 * b + i] * id);

			row[34 * b + 2 + i] = (uint8_t)q;
			val[32 * b + i] = dh * (float)q;
		}
	}
}

/* One pair of cache types: store, compare bytes, attend, compare with the reference. */
static void s_typed(uint32_t tk, uint32_t tv, const float *k, const float *v, const float *q,
		    const float *dq, const float *ds, const float *sinks, float *dout, void *ws)
{
	const uint64_t kr = ns_cuda_kv_row_bytes(tk, NKV * DK), vr = ns_cuda_kv_row_bytes(tv, NKV * DV);
	uint8_t *ek = malloc(CTX * kr), *ev = malloc(CTX * vr), *gk = malloc(CTX * kr);
	uint8_t *gv = malloc(CTX * vr);
	float *kv_k = malloc(CTX * NKV * DK * 4), *kv_v = malloc(CTX * NKV * DV * 4);
	float *ref = malloc(64 * NH * DV * 4), *got = malloc(64 * NH * DV * 4), one[NH * DV];
	float *dkf = ct_upload(k, CTX * NKV * DK * 4), *dvf = ct_upload(v, CTX * NKV * DV * 4);
	const struct { uint32_t n_tok, pos0, window; bool sink; } cs[] = {
		{ 1, 900, 0, false }, { 40, 500, 0, true }, { 33, 1100, 100, false },
	};
	struct ns_cuda_kv kv = { .dev_k = ct_dev(CTX * kr), .dev_v = ct_dev(CTX * vr), .tk = tk,
				 .tv = tv, .k_row = kr, .v_row = vr };
	const int64_t last = CTX - 1;
	int64_t *dpos = ct_upload(&last, sizeof(last));

	if (!ek || !ev || !gk || !gv || !kv_k || !kv_v || !ref || !got)
		CT_FAIL("out of memory");
	for (uint32_t j = 0; j < CTX; j++) {
		s_row(tk, k + (uint64_t)j * NKV * DK, NKV * DK, ek + j * kr, kv_k + (uint64_t)j * NKV * DK);
		s_row(tv, v + (uint64_t)j * NKV * DV, NKV * DV, ev + j * vr, kv_v + (uint64_t)j * NKV * DV);
	}
	/* rows 0..599 in one store, 600..CTX-2 in another, the last one at a device position */
	CT_CHECK(ns_cuda_kv_store(&kv, dkf, NKV * DK, dvf, NKV * DV, 600, 0, NULL, NULL));
	CT_CHECK(ns_cuda_kv_store(&kv, dkf + 600 * NKV * DK, NKV * DK, dvf + 600 * NKV * DV,
				  NKV * DV, CTX - 601, 600, NULL, NULL));
	CT_CHECK(ns_cuda_kv_store(&kv, dkf + (CTX - 1) * NKV * DK, NKV * DK,
				  dvf + (CTX - 1) * NKV * DV, NKV * DV, 1, 0, dpos, NULL));
	CT_CHECK(ns_cuda_sync());
	ct_download(gk, kv.dev_k, CTX * kr);
	ct_download(gv, kv.dev_v, CTX * vr);
	if (memcmp(gk, ek, CTX * kr) || memcmp(gv, ev, CTX * vr))
		CT_FAIL("kv types %u/%u: the stored bytes differ from the expected rounding", tk, tv);
	for (size_t c = 0; c < sizeof(cs) / sizeof(cs[0]); c++) {
		const uint32_t nt = cs[c].n_tok;

		s_cpu(q, kv_k, kv_v, nt, cs[c].pos0, cs[c].window, cs[c].sink ? sinks : NULL,
		      1.0f / 8.0f, ref);
		CT_CHECK(ns_cuda_attention_kv(dq, &kv, nt, cs[c].pos0, NULL, 0, NH, NKV, DK, DV,
					      1.0f / 8.0f, cs[c].window, cs[c].sink ? ds : NULL,
					      dout, ws, NULL));
		CT_CHECK(ns_cuda_sync());
		ct_download(got, dout, nt * NH * DV * 4);
		for (uint32_t i = 0; i < nt * NH * DV; i++)
			if (!(fabs(got[i] - ref[i]) <= 2e-5 * 5.0))
				CT_FAIL("kv %u/%u case %zu element %u: %.9g vs cpu %.9g", tk, tv, c, i,
					got[i], ref[i]);
		/* the last query alone, and at a device position: the prefill row's bits */
		const int64_t pos = cs[c].pos0 + nt - 1;
		int64_t *dp = ct_upload(&pos, sizeof(pos));
		CT_CHECK(ns_cuda_attention_kv(dq + (nt - 1) * NH * DK, &kv, 1, 0, dp, CTX, NH, NKV,
					      DK, DV, 1.0f / 8.0f, cs[c].window,
					      cs[c].sink ? ds : NULL, dout, ws, NULL));
		CT_CHECK(ns_cuda_sync());
		ct_download(one, dout, sizeof(one));
		if (memcmp(one, got + (nt - 1) * NH * DV, sizeof(one)))
			CT_FAIL("kv %u/%u case %zu: decode at a device position differs in bits", tk,
				tv, c);
		ns_cuda_free(dp);
		printf("attention over a %s/%s cache, n_tok %2u pos0 %4u: ok\n",
		       tk == 1 ? "f16" : tk == 2 ? "q8_0" : "f32",
		       tv == 1 ? "f16" : tv == 2 ? "q8_0" : "f32", nt, cs[c].pos0);
	}
	ns_cuda_free(dpos);
	ns_cuda_free(kv.dev_k);
	ns_cuda_free(kv.dev_v);
	ns_cuda_free(dkf);
	ns_cuda_free(dvf);
	free(ek), free(ev), free(gk), free(gv), free(kv_k), free(kv_v), free(ref), free(got);
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
	s_typed(NS_CUDA_KV_F16, NS_CUDA_KV_F16, k, v, q, dq, ds, sinks, dout, ws);
	s_typed(NS_CUDA_KV_Q8_0, NS_CUDA_KV_Q8_0, k, v, q, dq, ds, sinks, dout, ws);
	s_typed(NS_CUDA_KV_F16, NS_CUDA_KV_Q8_0, k, v, q, dq, ds, sinks, dout, ws);
	s_typed(NS_CUDA_KV_F32, NS_CUDA_KV_F16, k, v, q, dq, ds, sinks, dout, ws);
	s_typed(NS_CUDA_KV_Q8_0, NS_CUDA_KV_F32, k, v, q, dq, ds, sinks, dout, ws);
	{ /* a q8_0 row that is not whole blocks is refused */
		struct ns_cuda_kv bad = { .dev_k = dout, .dev_v = dout, .tk = NS_CUDA_KV_Q8_0,
					  .tv = NS_CUDA_KV_Q8_0, .k_row = 34, .v_row = 34 };

		if (ns_cuda_attention_kv(dq, &bad, 1, 0, NULL, 0, NH, NKV, 16, 16, 1.0f, 0, NULL,
					 dout, ws, NULL) != -EINVAL)
			CT_FAIL("a q8_0 cache of 16-element heads was accepted");
	}
	return 0;
}
