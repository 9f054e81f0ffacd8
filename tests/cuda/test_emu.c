/* test_emu: the host emulation of nscuda.h (nscompute/cuda/emu) against direct computations
 * on small random inputs:
 *   memory, streams, events; the VRAM arena's refusals with figures (never an abort);
 *   dequant bit-identical to ns_dequant_rows; GEMV and the prefill GEMM (padded ldx / ldy) of
 *   every type vs ns_dequant_rows + a double dot within gemv.h's bound, prefill token = GEMV
 *   in bits; the launch checks (-ENOTSUP, -EINVAL);
 *   rmsnorm, softmax, rope, swiglu (plain and gpt-oss) vs formulas in double;
 *   router top-k on hand cases with ties; argmax with ties and NaN;
 *   attention with GQA, a sliding window, sinks and padded K/V rows vs a plain double loop,
 *   decode equal in bits to its prefill row;
 *   add, add_rows, gather_rows, scatter_scaled, sum_slots exactly.
 * Exit 0 pass, 1 fail. */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "cuda_test.h"
#include "dequant.h"
#include "ggml_type.h"

/* |got - want| <= rel * |want| + abs_tol for each of n */
static void s_close(const char *what, const float *got, const double *want, uint64_t n,
		    double rel, double abs_tol)
{
	for (uint64_t i = 0; i < n; i++)
		if (!(fabs(got[i] - want[i]) <= rel * fabs(want[i]) + abs_tol))
			CT_FAIL("%s[%llu]: %.9g vs direct %.9g", what, (unsigned long long)i,
				got[i], want[i]);
}

static void s_exact(const char *what, const float *got, const float *want, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		if (memcmp(&got[i], &want[i], 4))
			CT_FAIL("%s[%llu]: %.9g vs %.9g", what, (unsigned long long)i, got[i],
				want[i]);
}

/* ---------------------------------------------------------------- plumbing ------------- */

static void s_plumbing(void)
{
	struct ns_cuda_devinfo di;
	ns_cuda_stream_t st = NULL;
	ns_cuda_event_t a = NULL, b = NULL;
	char err[256];
	uint8_t *d, h[1000], back[1000];
	float ms = -1.0f;

	if (ns_cuda_device_count() != 1 || ns_cuda_device_info(0, &di, err, sizeof(err)) ||
	    strcmp(di.name, "cpu-emulation") || di.total_bytes != 16ull << 30)
		CT_FAIL("emulated device info");
	if (ns_cuda_init(1, err, sizeof(err)) != -ENODEV || !strstr(err, "device 1"))
		CT_FAIL("device 1 accepted: '%s'", err);
	d = ct_dev(sizeof(h));
	if ((uintptr_t)d % 256)
		CT_FAIL("ns_cuda_malloc not 256-byte aligned");
	for (size_t i = 0; i < sizeof(h); i++)
		h[i] = (uint8_t)(i * 13);
	CT_CHECK(ns_cuda_host_register(h, sizeof(h), err, sizeof(err)));
	CT_CHECK(ns_cuda_stream_new(&st));
	CT_CHECK(ns_cuda_event_new(&a));
	CT_CHECK(ns_cuda_event_new(&b));
	if (!st || !a || !b)
		CT_FAIL("NULL handles");
	CT_CHECK(ns_cuda_event_record(a, st));
	CT_CHECK(ns_cuda_copy_h2d_async(d, h, sizeof(h), st, b));
	CT_CHECK(ns_cuda_stream_wait(NULL, b));
	CT_CHECK(ns_cuda_event_sync(b));
	if (ns_cuda_event_done(b) != 1)
		CT_FAIL("event not done");
	CT_CHECK(ns_cuda_event_ms(a, b, &ms));
	if (!(ms >= 0.0f))
		CT_FAIL("event ms %g", ms);
	CT_CHECK(ns_cuda_stream_sync(st));
	CT_CHECK(ns_cuda_d2h(back, d, sizeof(back)));
	if (memcmp(back, h, sizeof(h)))
		CT_FAIL("h2d / d2h round trip");
	CT_CHECK(ns_cuda_d2d_async(d, d + 500, 500, st));
	CT_CHECK(ns_cuda_memset(d + 500, 7, 500));
	CT_CHECK(ns_cuda_d2h(back, d, sizeof(back)));
	if (memcmp(back, h + 500, 500) || back[500] != 7 || back[999] != 7)
		CT_FAIL("d2d / memset");
	CT_CHECK(ns_cuda_host_unregister(h));
	ns_cuda_event_destroy(&a);
	ns_cuda_event_destroy(&b);
	ns_cuda_stream_destroy(&st);
	if (a || b || st)
		CT_FAIL("destroy did not null");
	ns_cuda_free(d);
	CT_CHECK(ns_cuda_sync());
	printf("plumbing: ok\n");
}

static void s_vram(void)
{
	struct ns_vram *v = NULL;
	char err[512];
	void *a, *b, *c;
	float f;

	if (ns_vram_new(64 << 20, 0, &v, err, sizeof(err)))
		CT_FAIL("%s", err);
	if (ns_vram_budget(v) != 64 << 20 || ns_vram_used(v) != 0)
		CT_FAIL("budget %llu", (unsigned long long)ns_vram_budget(v));
	if (ns_vram_alloc(v, 40 << 20, &a, err, sizeof(err)) ||
	    ns_vram_alloc(v, 20 << 20, &b, err, sizeof(err)))
		CT_FAIL("%s", err);
	if ((uintptr_t)a % 256 || (uintptr_t)b % 256)
		CT_FAIL("arena allocations not 256-byte aligned");
	memcpy(&f, b, 4);
	if (!isnan(f))
		CT_FAIL("fresh VRAM not poisoned (%g)", f);
	if (ns_vram_alloc(v, 8 << 20, &c, err, sizeof(err)) != -ENOMEM || c ||
	    !strstr(err, "largest free extent 4.00 MiB") || !strstr(err, "64.00 MiB budget"))
		CT_FAIL("overflowing allocation not refused with figures: '%s'", err);
	printf("refusal: %s\n", err);
	if (ns_vram_largest_free(v) != 4 << 20 || ns_vram_used(v) != 60 << 20)
		CT_FAIL("largest %llu", (unsigned long long)ns_vram_largest_free(v));
	if (ns_vram_release(v, a) || ns_vram_alloc(v, 8 << 20, &c, err, sizeof(err)) || c != a)
		CT_FAIL("reuse after release: %s", err);
	if (ns_vram_release(v, (char *)b + 1) != -EINVAL || ns_vram_release(v, err) != -EINVAL)
		CT_FAIL("foreign pointer released");
	memset(b, 1, 20 << 20); /* the memory is real */
	ns_vram_destroy(&v);
	if (v)
		CT_FAIL("destroy did not null");
	if (ns_vram_new(1ull << 50, 0, &v, err, sizeof(err)) != -ENOMEM || v ||
	    !strstr(err, "exceeds the 16.00 GiB free"))
		CT_FAIL("1 PiB budget accepted: '%s'", err);
	printf("refusal: %s\n", err);
	if (ns_vram_new(8ull << 30, 9ull << 30, &v, err, sizeof(err)) != -ENOMEM || v)
		CT_FAIL("budget + reserve over the device accepted");
	if (ns_vram_new(0, 16ull << 30, &v, err, sizeof(err)) != -ENOMEM || v ||
	    !strstr(err, "leaves nothing"))
		CT_FAIL("reserve of everything accepted: '%s'", err);
	/* automatic budget: capped at 1 GiB, nothing committed up front */
	if (ns_vram_new(0, 1 << 20, &v, err, sizeof(err)) || ns_vram_budget(v) != 1ull << 30)
		CT_FAIL("automatic budget: %s", err);
	ns_vram_destroy(&v);
	printf("vram: ok\n");
}

/* ---------------------------------------------------------------- weights -------------- */

static void s_weights(int ti, uint64_t nc, uint64_t *seed)
{
	enum { NR = 19, NT = 6, PADX = 8, PADY = 5 };
	const uint32_t type = ct_types[ti];
	const uint64_t ldx = nc + PADX, ldy = NR + PADY;
	uint64_t rb;
	uint8_t *raw = ct_random_rows(type, nc, NR, seed, &rb);
	float *x = ct_random_floats(ldx * NT, seed);
	float *w = malloc(nc * NR * 4), *got = malloc(nc * NR * 4), yv[NR], ym[NT * (NR + PADY)];

	if (ns_dequant_rows(type, raw, nc, NR, w))
		CT_FAIL("cpu dequant");
	uint8_t *dw = ct_upload(raw, rb * NR);
	float *dx = ct_upload(x, ldx * NT * 4), *dy = ct_dev(nc * NR * 4);

	CT_CHECK(ns_cuda_dequant(type, dw, nc, NR, dy, NULL));
	ct_download(got, dy, nc * NR * 4);
	s_exact(ct_type_names[ti], got, w, nc * NR);
	CT_CHECK(ns_cuda_gemv(type, dw, nc, NR, dx, dy, NULL));
	ct_download(yv, dy, sizeof(yv));
	CT_CHECK(ns_cuda_memset(dy, 0, sizeof(ym)));
	CT_CHECK(ns_cuda_gemm_prefill(type, dw, nc, NR, dx, ldx, NT, dy, ldy, NULL));
	ct_download(ym, dy, sizeof(ym));
	for (int t = 0; t < NT; t++)
		for (int r = 0; r < NR + PADY; r++) {
			double a, e;
			float g = ym[t * ldy + r];

			if (r >= NR) {
				if (g != 0.0f)
					CT_FAIL("%s prefill wrote the padding (%d, %d)",
						ct_type_names[ti], t, r);
				continue;
			}
			e = ct_dot(w + r * nc, x + t * ldx, nc, &a);
			if (!(fabs(g - e) <= (nc / 16 + 320) * 0x1p-24 * a))
				CT_FAIL("%s prefill row %d tok %d: %.9g vs exact %.9g",
					ct_type_names[ti], r, t, g, e);
			if (t == 0) {
				if (!(fabs(yv[r] - e) <= (nc / 16 + 320) * 0x1p-24 * a))
					CT_FAIL("%s gemv row %d: %.9g vs exact %.9g",
						ct_type_names[ti], r, yv[r], e);
				if (memcmp(&yv[r], &g, 4))
					CT_FAIL("%s gemv row %d differs in bits from prefill token 0",
						ct_type_names[ti], r);
			}
		}
	/* a window of rows 3..9 gives the same bits */
	CT_CHECK(ns_cuda_gemv(type, dw + 3 * rb, nc, 7, dx, dy, NULL));
	ct_download(got, dy, 7 * 4);
	s_exact("gemv window", got, yv + 3, 7);
	ns_cuda_free(dw);
	ns_cuda_free(dx);
	ns_cuda_free(dy);
	free(raw);
	free(x);
	free(w);
	free(got);
}

static void s_launch_checks(void)
{
	float *dx = ct_dev(4096 * 4), *dy = ct_dev(4096 * 4);
	uint8_t *dw = ct_dev(1 << 16);

	if (!ns_cuda_type_supported(NS_TYPE_Q4_K) || ns_cuda_type_supported(NS_TYPE_Q8_1) ||
	    ns_cuda_type_supported(NS_TYPE_IQ2_XXS))
		CT_FAIL("type support");
	if (ns_cuda_gemv(NS_TYPE_IQ2_XXS, dw, 256, 4, dx, dy, NULL) != -ENOTSUP)
		CT_FAIL("unsupported type not -ENOTSUP");
	if (ns_cuda_gemv(NS_TYPE_Q4_K, dw, 300, 4, dx, dy, NULL) != -EINVAL ||
	    ns_cuda_gemv(NS_TYPE_Q4_K, dw, 0, 4, dx, dy, NULL) != -EINVAL ||
	    ns_cuda_gemv(NS_TYPE_Q4_K, dw + 8, 256, 4, dx, dy, NULL) != -EINVAL ||
	    ns_cuda_gemv(NS_TYPE_Q4_K, dw, 256, 4, dx + 1, dy, NULL) != -EINVAL ||
	    ns_cuda_gemv(NS_TYPE_Q4_K, NULL, 256, 4, dx, dy, NULL) != -EINVAL)
		CT_FAIL("bad gemv arguments accepted");
	/* Q4_0 blocks of 18 bytes: 2-byte alignment is enough */
	if (ns_cuda_gemv(NS_TYPE_Q4_0, dw + 2, 32, 1, dx, dy, NULL) ||
	    ns_cuda_gemv(NS_TYPE_Q4_0, dw + 1, 32, 1, dx, dy, NULL) != -EINVAL)
		CT_FAIL("q4_0 alignment");
	if (ns_cuda_gemm_prefill(NS_TYPE_Q8_0, dw, 64, 4, dx, 66, 2, dy, 4, NULL) != -EINVAL ||
	    ns_cuda_gemm_prefill(NS_TYPE_Q8_0, dw, 64, 4, dx, 32, 2, dy, 4, NULL) != -EINVAL ||
	    ns_cuda_gemm_prefill(NS_TYPE_Q8_0, dw, 64, 4, dx, 64, 2, dy, 3, NULL) != -EINVAL ||
	    ns_cuda_dequant(NS_TYPE_Q8_0, dw, 64, 2, dy + 1, NULL) != -EINVAL)
		CT_FAIL("bad prefill / dequant arguments accepted");
	if (ns_cuda_gemv(NS_TYPE_Q8_0, dw, 64, 0, NULL, NULL, NULL) != 0)
		CT_FAIL("empty gemv refused");
	ns_cuda_free(dx);
	ns_cuda_free(dy);
	ns_cuda_free(dw);
	printf("launch checks: ok\n");
}

/* ---------------------------------------------------------------- row ops -------------- */

static void s_rows(uint64_t *seed)
{
	enum { N = 300, NT = 3 };
	float *x = ct_random_floats(N * NT, seed), *wt = ct_random_floats(N, seed);
	float *u = ct_random_floats(N * NT, seed), got[N * NT];
	double want[N * NT];
	float *dx = ct_upload(x, sizeof(got)), *dw = ct_upload(wt, N * 4), *dy = ct_dev(sizeof(got));
	float *du;

	/* rmsnorm, weighted, into another buffer and in place unweighted */
	CT_CHECK(ns_cuda_rmsnorm(dy, dx, dw, N, NT, 1e-5f, NULL));
	ct_download(got, dy, sizeof(got));
	for (int t = 0; t < NT; t++) {
		double ss = 0;

		for (int i = 0; i < N; i++)
			ss += (double)x[t * N + i] * x[t * N + i];
		for (int i = 0; i < N; i++)
			want[t * N + i] = x[t * N + i] / sqrt(ss / N + 1e-5) * wt[i];
	}
	s_close("rmsnorm", got, want, N * NT, 1e-5, 1e-7);
	CT_CHECK(ns_cuda_rmsnorm(dx, dx, NULL, N, NT, 1e-5f, NULL));
	ct_download(got, dx, sizeof(got));
	for (int i = 0; i < N * NT; i++)
		want[i] /= wt[i % N];
	s_close("rmsnorm in place", got, want, N * NT, 1e-5, 1e-7);

	/* softmax */
	CT_CHECK(ns_cuda_h2d(dx, x, sizeof(got)));
	CT_CHECK(ns_cuda_softmax(dx, N, NT, NULL));
	ct_download(got, dx, sizeof(got));
	for (int t = 0; t < NT; t++) {
		double s = 0;

		for (int i = 0; i < N; i++)
			s += exp((double)x[t * N + i]);
		for (int i = 0; i < N; i++)
			want[t * N + i] = exp((double)x[t * N + i]) / s;
	}
	s_close("softmax", got, want, N * NT, 1e-5, 1e-9);

	/* swiglu: silu(g) * u; gpt-oss clamp(g, 7) sigmoid(1.702 g) (clamp(u, -7, 7) + 1) */
	for (int i = 0; i < N * NT; i++) {
		x[i] *= 4.0f; /* reach the clamps */
		u[i] *= 4.0f;
	}
	du = ct_upload(u, sizeof(got));
	for (int oai = 0; oai < 2; oai++) {
		CT_CHECK(ns_cuda_h2d(dx, x, sizeof(got)));
		CT_CHECK(ns_cuda_swiglu(dx, du, N * NT, oai, NULL));
		ct_download(got, dx, sizeof(got));
		for (int i = 0; i < N * NT; i++) {
			double g = x[i], uu = u[i];

			if (oai) {
				g = fmin(g, 7.0);
				uu = fmax(-7.0, fmin(7.0, uu));
				want[i] = g / (1.0 + exp(-1.702 * g)) * (uu + 1.0);
			} else {
				want[i] = g / (1.0 + exp(-g)) * uu;
			}
		}
		s_close(oai ? "swiglu oai" : "swiglu", got, want, N * NT, 1e-5, 1e-6);
	}
	ns_cuda_free(dx);
	ns_cuda_free(dw);
	ns_cuda_free(dy);
	ns_cuda_free(du);
	free(x);
	free(wt);
	free(u);
	printf("rmsnorm, softmax, swiglu: ok\n");
}

static void s_rope(uint64_t *seed)
{
	enum { NT = 3, NH = 2, HD = 16, ND = 12 };
	const int64_t pos0 = 37;
	float *x = ct_random_floats(NT * NH * HD, seed), got[NT * NH * HD];
	float ff[ND / 2] = { 1, 2, 1, 4, 1, 8 };
	double want[NT * NH * HD];
	float *dx = ct_dev(sizeof(got)), *dff = ct_upload(ff, sizeof(ff));

	for (int neox = 0; neox < 2; neox++) {
		const struct ns_cuda_rope r = { ND, neox, 10000.0f, 0.5f, dff, 0.0f, 1.0f, { 0, 0 } };

		CT_CHECK(ns_cuda_h2d(dx, x, sizeof(got)));
		CT_CHECK(ns_cuda_rope(&r, dx, NT, NH, HD, pos0, NULL));
		ct_download(got, dx, sizeof(got));
		for (int t = 0; t < NT; t++)
			for (int h = 0; h < NH; h++) {
				const float *v = x + (t * NH + h) * HD;
				double *o = want + (t * NH + h) * HD;

				for (int i = 0; i < HD; i++)
					o[i] = v[i]; /* beyond n_dims: unchanged */
				for (int i = 0; i < ND / 2; i++) {
					const double th = 0.5 * (double)(pos0 + t) *
							  pow(10000.0, -2.0 * i / ND) / ff[i];
					const int a = neox ? i : 2 * i, b = neox ? i + ND / 2 : 2 * i + 1;

					o[a] = v[a] * cos(th) - v[b] * sin(th);
					o[b] = v[a] * sin(th) + v[b] * cos(th);
				}
			}
		s_close(neox ? "rope neox" : "rope", got, want, NT * NH * HD, 1e-4, 1e-4);
	}
	const struct ns_cuda_rope bad = { 5, false, 10000.0f, 1.0f, NULL, 0.0f, 1.0f, { 0, 0 } };
	if (ns_cuda_rope(&bad, dx, NT, NH, HD, 0, NULL) != -EINVAL)
		CT_FAIL("odd n_dims accepted");
	ns_cuda_free(dx);
	ns_cuda_free(dff);
	free(x);
	printf("rope: ok\n");
}

static void s_router(void)
{
	/* token 0: ties at 3 (ids 1, 2, 4): the two lowest ids win; token 1: distinct */
	const float lg[2][5] = { { 1, 3, 3, 2, 3 }, { 0.5f, -1, 2, 0, 1 } };
	float *dl = ct_dev(sizeof(lg)), *dw = ct_dev(4 * 4), w[4];
	int32_t *ds = ct_dev(4 * 4), sel[4];

	/* top-k of the logits, softmax of the two, normalised, times 2 */
	CT_CHECK(ns_cuda_h2d(dl, lg, sizeof(lg)));
	CT_CHECK(ns_cuda_router_topk(dl, 2, 5, 2, false, true, 2.0f, ds, dw, NULL));
	ct_download(sel, ds, sizeof(sel));
	ct_download(w, dw, sizeof(w));
	const double e1 = 1.0 / (1.0 + exp(-1.0)); /* softmax of (2, 1) */
	if (sel[0] != 1 || sel[1] != 2 || sel[2] != 2 || sel[3] != 4)
		CT_FAIL("router sel %d %d %d %d", sel[0], sel[1], sel[2], sel[3]);
	if (fabs(w[0] - 1.0) > 1e-6 || fabs(w[1] - 1.0) > 1e-6 || fabs(w[2] - 2 * e1) > 1e-6 ||
	    fabs(w[3] - 2 * (1 - e1)) > 1e-6)
		CT_FAIL("router weights %g %g %g %g", w[0], w[1], w[2], w[3]);
	/* softmax over all first, k = 3, no normalisation: weights are probabilities */
	int32_t sel3[6];
	float w3[6], *dw3 = ct_dev(sizeof(w3));
	int32_t *ds3 = ct_dev(sizeof(sel3));

	CT_CHECK(ns_cuda_h2d(dl, lg, sizeof(lg)));
	CT_CHECK(ns_cuda_router_topk(dl, 2, 5, 3, true, false, 1.0f, ds3, dw3, NULL));
	ct_download(sel3, ds3, sizeof(sel3));
	ct_download(w3, dw3, sizeof(w3));
	double z = exp(1) + 3 * exp(3) + exp(2);
	if (sel3[0] != 1 || sel3[1] != 2 || sel3[2] != 4 || fabs(w3[0] - exp(3) / z) > 1e-6 ||
	    fabs(w3[2] - exp(3) / z) > 1e-6)
		CT_FAIL("router softmax-first token 0: %d %d %d %g", sel3[0], sel3[1], sel3[2],
			w3[0]);
	z = exp(0.5) + exp(-1) + exp(2) + 1 + exp(1);
	if (sel3[3] != 2 || sel3[4] != 4 || sel3[5] != 0 || fabs(w3[5] - exp(0.5) / z) > 1e-6)
		CT_FAIL("router softmax-first token 1: %d %d %d", sel3[3], sel3[4], sel3[5]);
	if (ns_cuda_router_topk(dl, 1, 5, 6, false, false, 1.0f, ds, dw, NULL) != -EINVAL ||
	    ns_cuda_router_topk(dl, 1, 1025, 2, false, false, 1.0f, ds, dw, NULL) != -EINVAL)
		CT_FAIL("bad router arguments accepted");

	/* argmax: ties keep the lowest, NaN never wins, all NaN gives -1 */
	const float ax[3][5] = { { NAN, 1, 5, 5, NAN }, { -INFINITY, -INFINITY, -3, NAN, -3 },
				 { NAN, NAN, NAN, NAN, NAN } };
	int32_t am[3];
	float *dax = ct_upload(ax, sizeof(ax));
	int32_t *dam = ct_dev(sizeof(am));

	CT_CHECK(ns_cuda_argmax(dax, 5, 3, dam, NULL));
	ct_download(am, dam, sizeof(am));
	if (am[0] != 2 || am[1] != 2 || am[2] != -1)
		CT_FAIL("argmax %d %d %d", am[0], am[1], am[2]);
	ns_cuda_free(dl);
	ns_cuda_free(dw);
	ns_cuda_free(ds);
	ns_cuda_free(dw3);
	ns_cuda_free(ds3);
	ns_cuda_free(dax);
	ns_cuda_free(dam);
	printf("router, argmax: ok\n");
}

/* ---------------------------------------------------------------- attention ------------ */

enum { AH = 6, AKV = 2, ADK = 8, ADV = 12, ALDK = AKV * ADK + 3, ALDV = AKV * ADV + 5, ACTX = 40 };

/* out: (n_tok, AH, ADV), plain loops in double */
static void s_attn_ref(const float *q, const float *k, const float *v, uint32_t n_tok,
		       uint32_t pos0, uint32_t window, const float *sinks, float scale,
		       double *out)
{
	for (uint32_t t = 0; t < n_tok; t++) {
		const uint32_t p = pos0 + t;

		for (uint32_t h = 0; h < AH; h++) {
			const uint32_t hk = h / (AH / AKV);
			double s[ACTX], m = sinks ? sinks[h] : -INFINITY, z = 0;

			for (uint32_t j = 0; j <= p; j++) {
				double a = 0;

				if (window && p - j >= window) {
					s[j] = -INFINITY;
					continue;
				}
				for (uint32_t d = 0; d < ADK; d++)
					a += (double)q[(t * AH + h) * ADK + d] * k[j * ALDK + hk * ADK + d];
				s[j] = a * scale;
				m = fmax(m, s[j]);
			}
			for (uint32_t j = 0; j <= p; j++)
				z += exp(s[j] - m);
			if (sinks)
				z += exp(sinks[h] - m);
			for (uint32_t d = 0; d < ADV; d++) {
				double a = 0;

				for (uint32_t j = 0; j <= p; j++)
					a += exp(s[j] - m) / z * v[j * ALDV + hk * ADV + d];
				out[(t * AH + h) * ADV + d] = a;
			}
		}
	}
}

static void s_attention(uint64_t *seed)
{
	float *q = ct_random_floats(ACTX * AH * ADK, seed), *k = ct_random_floats(ACTX * ALDK, seed);
	float *v = ct_random_floats(ACTX * ALDV, seed), sinks[AH], got[ACTX * AH * ADV];
	double want[ACTX * AH * ADV];
	const float scale = 0.35f;
	const struct { uint32_t n_tok, pos0, window; bool sink; } cs[] = {
		{ 1, 0, 0, false }, { 1, 30, 0, true }, { 12, 20, 7, true }, { 25, 15, 0, false },
		{ 40, 0, 9, false },
	};

	for (int h = 0; h < AH; h++)
		sinks[h] = 0.7f * h - 2.0f;
	float *dq = ct_upload(q, ACTX * AH * ADK * 4), *dk = ct_upload(k, ACTX * ALDK * 4);
	float *dv = ct_upload(v, ACTX * ALDV * 4), *ds = ct_upload(sinks, sizeof(sinks));
	float *dout = ct_dev(sizeof(got)), one[AH * ADV];
	void *ws = ct_dev(ns_cuda_attn_ws_bytes(ACTX, AH, ACTX, ADV));

	for (size_t c = 0; c < sizeof(cs) / sizeof(cs[0]); c++) {
		const uint32_t nt = cs[c].n_tok, last = nt - 1;
		const float *sk = cs[c].sink ? ds : NULL;

		s_attn_ref(q, k, v, nt, cs[c].pos0, cs[c].window, cs[c].sink ? sinks : NULL, scale,
			   want);
		CT_CHECK(ns_cuda_attention(dq, dk, ALDK, dv, ALDV, nt, cs[c].pos0, AH, AKV, ADK, ADV,
					   scale, cs[c].window, sk, dout, ws, NULL));
		ct_download(got, dout, nt * AH * ADV * 4);
		s_close("attention", got, want, nt * AH * ADV, 1e-5, 1e-6);
		CT_CHECK(ns_cuda_attention(dq + last * AH * ADK, dk, ALDK, dv, ALDV, 1,
					   cs[c].pos0 + last, AH, AKV, ADK, ADV, scale, cs[c].window,
					   sk, dout, ws, NULL));
		ct_download(one, dout, sizeof(one));
		s_exact("attention decode vs prefill row", one, got + last * AH * ADV, AH * ADV);
	}
	if (ns_cuda_attention(dq, dk, ALDK, dv, ALDV, 1, 0, AH, 4, ADK, ADV, scale, 0, NULL, dout,
			      ws, NULL) != -EINVAL ||
	    ns_cuda_attention(dq, dk, ADK, dv, ALDV, 1, 0, AH, AKV, ADK, ADV, scale, 0, NULL, dout,
			      ws, NULL) != -EINVAL ||
	    ns_cuda_attention(dq, dk, ALDK, dv, ALDV, 1, 0, AH, AKV, ADK, ADV, scale, 0, NULL, dout,
			      NULL, NULL) != -EINVAL)
		CT_FAIL("bad attention arguments accepted");
	ns_cuda_free(dq);
	ns_cuda_free(dk);
	ns_cuda_free(dv);
	ns_cuda_free(ds);
	ns_cuda_free(dout);
	ns_cuda_free(ws);
	free(q);
	free(k);
	free(v);
	printf("attention (gqa 3, window, sinks, padded kv rows): ok\n");
}

/* ---------------------------------------------------------------- glue ----------------- */

static void s_glue(uint64_t *seed)
{
	enum { T = 3, K = 2, N = 5, LD = 7 };
	float *a = ct_random_floats(T * LD, seed), *b = ct_random_floats(T * LD, seed);
	float *wts = ct_random_floats(T * K, seed), got[T * K * N], want[T * K * N];
	float *da = ct_upload(a, T * LD * 4), *db = ct_upload(b, T * LD * 4), *dw;
	float *dys = ct_dev(T * K * N * 4), *dg = ct_dev(T * K * N * 4);
	/* rows 2, 0, 2 of a (N wide, stride N), into slots 5, 0, 3 */
	const int32_t idx[3] = { 2, 0, 2 }, slot[3] = { 5, 0, 3 }, neg[1] = { -1 };
	int32_t *di = ct_upload(idx, sizeof(idx)), *dsl = ct_upload(slot, sizeof(slot));
	int32_t *dneg = ct_upload(neg, sizeof(neg));

	CT_CHECK(ns_cuda_add(da, db, T * LD, NULL));
	ct_download(got, da, T * LD * 4);
	for (int i = 0; i < T * LD; i++)
		want[i] = a[i] + b[i];
	s_exact("add", got, want, T * LD);
	CT_CHECK(ns_cuda_h2d(da, a, T * LD * 4));
	CT_CHECK(ns_cuda_add_rows(da, LD, db, N, T, NULL));
	ct_download(got, da, T * LD * 4);
	for (int t = 0; t < T; t++)
		for (int i = 0; i < LD; i++)
			want[t * LD + i] = i < N ? a[t * LD + i] + b[i] : a[t * LD + i];
	s_exact("add_rows", got, want, T * LD);
	CT_CHECK(ns_cuda_h2d(da, a, T * LD * 4));
	CT_CHECK(ns_cuda_gather_rows(dg, da, di, 3, N, NULL));
	ct_download(got, dg, 3 * N * 4);
	for (int i = 0; i < 3; i++)
		memcpy(want + i * N, a + idx[i] * N, N * 4);
	s_exact("gather_rows", got, want, 3 * N);
	/* scatter the gathered rows, weighted, into a zeroed (T, K, N) slot array */
	dw = ct_upload(wts, T * K * 4);
	CT_CHECK(ns_cuda_memset(dys, 0, T * K * N * 4));
	CT_CHECK(ns_cuda_scatter_scaled(dys, dg, dsl, dw, 3, N, NULL));
	float ys[T * K * N];
	ct_download(ys, dys, sizeof(ys));
	memset(want, 0, sizeof(want));
	for (int i = 0; i < 3; i++)
		for (int j = 0; j < N; j++)
			want[slot[i] * N + j] = a[idx[i] * N + j] * wts[slot[i]];
	s_exact("scatter_scaled", ys, want, T * K * N);
	/* sum the K slots of each token */
	CT_CHECK(ns_cuda_sum_slots(dg, dys, T, K, N, NULL));
	ct_download(got, dg, T * N * 4);
	for (int t = 0; t < T; t++)
		for (int j = 0; j < N; j++)
			want[t * N + j] = ys[(t * K) * N + j] + ys[(t * K + 1) * N + j];
	s_exact("sum_slots", got, want, T * N);
	if (ns_cuda_sum_slots(dg, dys, T, 0, N, NULL) != -EINVAL ||
	    ns_cuda_add_rows(da, 4, db, N, T, NULL) != -EINVAL ||
	    ns_cuda_gather_rows(dg, da, dneg, 1, N, NULL) != -EINVAL ||
	    ns_cuda_scatter_scaled(dys, dg, dneg, dw, 1, N, NULL) != -EINVAL ||
	    ns_cuda_add(NULL, db, 3, NULL) != -EINVAL || ns_cuda_add(NULL, NULL, 0, NULL) != 0)
		CT_FAIL("bad glue arguments");
	ns_cuda_free(da);
	ns_cuda_free(db);
	ns_cuda_free(dw);
	ns_cuda_free(dys);
	ns_cuda_free(dg);
	ns_cuda_free(di);
	ns_cuda_free(dsl);
	ns_cuda_free(dneg);
	free(a);
	free(b);
	free(wts);
	printf("add, add_rows, gather_rows, scatter_scaled, sum_slots: ok\n");
}

int main(void)
{
	uint64_t seed = 11;

	ct_init("cuda_emu");
	s_plumbing();
	s_vram();
	for (int ti = 0; ti < 14; ti++) {
		s_weights(ti, 256, &seed);
		s_weights(ti, 512, &seed);
	}
	printf("dequant, gemv, prefill (14 types, 256 and 512 columns): ok\n");
	s_launch_checks();
	s_rows(&seed);
	s_rope(&seed);
	s_router();
	s_attention(&seed);
	s_glue(&seed);
	printf("cuda_emu: ok\n");
	return 0;
}
