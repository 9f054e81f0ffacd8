/* test_attn: attention over the KV cache (attn.h) at every cache type against an exact
 * reference written here from plain row-major copies of K and V (not through the cache):
 *   - f32 cache: the forward pass's first attention (double sums in order, ns_softmax),
 *     bit for bit, on every path and 1/2/3 threads, and at every chunking of the same
 *     sequence (one chunk, chunks of 5, one token at a time);
 *   - f16 and q8_0 caches: the same reference over values rounded here as the cache should
 *     round them (half, ggml's Q8_0), within a float-rounding tolerance; the cache's own
 *     elements equal those values exactly;
 *   - GQA and MHA, head sizes 8 (scalar only), 32, 64, 128, K and V sizes apart, sliding
 *     windows, attention sinks, chunks starting past position 0;
 *   - ring caches of sliding layers (window + chunk - 1 positions) bit-identical to the
 *     whole cache on every path and type, chunkings wrapping the ring many times, and the
 *     reads a ring cannot serve refused. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn.h"
#include "fp16.h"
#include "ns_test.h"
#include "ns_util.h"
#include "ops.h"

static uint64_t s_seed = 0x853c49e6748fea9bull;
static int s_n_exact, s_n_tol, s_n_ring;
static double s_worst[3];

static float s_rand(void)
{
	s_seed ^= s_seed >> 12;
	s_seed ^= s_seed << 25;
	s_seed ^= s_seed >> 27;
	return (float)((double)((s_seed * 2685821657736338717ull) >> 11) * 0x1p-53 * 2.0 - 1.0);
}

struct s_case {
	uint32_t n_head, n_head_kv, dk, dv, n_pos, window;
	bool sinks;
};

/* What the cache should hold for x as type t (the reference's view of a stored value). */
static void s_round(enum ns_kv_type t, const float *x, uint32_t n, float *out)
{
	for (uint32_t b = 0; b < n; b += 32) {
		float amax = 0, d, id;

		if (t == NS_KV_F32) {
			memcpy(out, x, n * sizeof(float));
			return;
		}
		if (t == NS_KV_F16) {
			for (uint32_t i = 0; i < n; i++)
				out[i] = ns_fp16_to_f32(ns_f32_to_fp16(x[i]));
			return;
		}
		for (uint32_t i = b; i < b + 32; i++)
			amax = fmaxf(amax, fabsf(x[i]));
		d = amax / 127.0f;
		id = d != 0 ? 1.0f / d : 0.0f;
		for (uint32_t i = b; i < b + 32; i++)
			out[i] = ns_fp16_to_f32(ns_f32_to_fp16(d)) * roundf(x[i] * id);
	}
}

/* The reference: k (n_pos, n_head_kv, dk), v (n_pos, n_head_kv, dv) as stored values. */
static void s_reference(const struct s_case *c, const float *q, const float *k, const float *v,
			const float *sinks, float scale, uint32_t pos0, uint32_t n_tok, float *out)
{
	float *att = malloc(c->n_pos * sizeof(float));
	const uint32_t G = c->n_head / c->n_head_kv;

	for (uint32_t t = 0; t < n_tok; t++)
		for (uint32_t h = 0; h < c->n_head; h++) {
			const uint32_t p1 = pos0 + t + 1, hk = h / G;
			const uint32_t j0 = c->window && p1 > c->window ? p1 - c->window : 0;
			const float *qh = q + ((uint64_t)t * c->n_head + h) * c->dk;

			for (uint32_t j = j0; j < p1; j++) {
				double acc = 0;

				for (uint32_t d = 0; d < c->dk; d++)
					acc += (double)qh[d] *
					       (double)k[((uint64_t)j * c->n_head_kv + hk) * c->dk + d];
				att[j - j0] = (float)acc * scale;
			}
			if (sinks)
				ns_softmax_sink(att, p1 - j0, sinks[h]);
			else
				ns_softmax(att, p1 - j0);
			for (uint32_t d = 0; d < c->dv; d++) {
				double acc = 0;

				for (uint32_t j = j0; j < p1; j++)
					acc += (double)att[j - j0] *
					       (double)v[((uint64_t)j * c->n_head_kv + hk) * c->dv + d];
				out[((uint64_t)t * c->n_head + h) * c->dv + d] = (float)acc;
			}
		}
	free(att);
}

static const char *s_path_name(enum ns_kpath p)
{
	return ns_kpath_name(p);
}

/* Fill a cache of types (tk, tv) with positions [0, n_pos), run attention for the whole
 * sequence in the chunks given (cuts: chunk lengths summing to n_pos), compare. */
static void s_check(const struct s_case *c, enum ns_kv_type tk, enum ns_kv_type tv,
		    struct ns_pool **pools)
{
	const uint64_t nk = (uint64_t)c->n_head_kv * c->dk, nv = (uint64_t)c->n_head_kv * c->dv;
	const uint64_t nq = (uint64_t)c->n_head * c->dk, no = (uint64_t)c->n_head * c->dv;
	float *q = malloc(c->n_pos * nq * 4), *k = malloc(c->n_pos * nk * 4);
	float *v = malloc(c->n_pos * nv * 4), *kr = malloc(c->n_pos * nk * 4);
	float *vr = malloc(c->n_pos * nv * 4), *ref = malloc(c->n_pos * no * 4);
	float *out = malloc(c->n_pos * no * 4), sinks[64];
	const float scale = 1.0f / sqrtf((float)c->dk);
	struct ns_kvcache *kv;
	enum ns_kpath paths[2] = { NS_KPATH_SCALAR, NS_KPATH_AVX512 };
	const uint32_t chunkings[3] = { c->n_pos, 5, 1 };
	const bool exact = tk == NS_KV_F32 && tv == NS_KV_F32;
	double vmax = 0;

	for (uint64_t i = 0; i < c->n_pos * nq; i++)
		q[i] = 2.0f * s_rand();
	for (uint64_t i = 0; i < c->n_pos * nk; i++)
		k[i] = 2.0f * s_rand();
	for (uint64_t i = 0; i < c->n_pos * nv; i++) {
		v[i] = s_rand();
		vmax = fmax(vmax, fabs(v[i]));
	}
	for (uint32_t h = 0; h < c->n_head; h++)
		sinks[h] = 3.0f * s_rand();
	for (uint32_t p = 0; p < c->n_pos * c->n_head_kv; p++) {
		s_round(tk, k + (uint64_t)p * c->dk, c->dk, kr + (uint64_t)p * c->dk);
		s_round(tv, v + (uint64_t)p * c->dv, c->dv, vr + (uint64_t)p * c->dv);
	}
	s_reference(c, q, kr, vr, c->sinks ? sinks : NULL, scale, 0, c->n_pos, ref);
	if (ns_kvcache_new(1, c->n_pos, c->n_head_kv, c->dk, c->dv, tk, tv, &kv))
		NS_FAIL("ns_kvcache_new");
	for (uint32_t p = 0; p < c->n_pos; p++)
		ns_kvcache_store(kv, 0, p, k + p * nk, v + p * nv);
	for (uint32_t p = 0; p < c->n_pos; p++)
		for (uint32_t h = 0; h < c->n_head_kv; h++) {
			for (uint32_t d = 0; d < c->dk; d++)
				if (ns_kvcache_k_at(kv, 0, h, p, d) != kr[(p * c->n_head_kv + h) * c->dk + d])
					NS_FAIL("%s K element (pos %u head %u dim %u) is %g, not %g",
						ns_kv_type_name(tk), p, h, d, ns_kvcache_k_at(kv, 0, h, p, d),
						kr[(p * c->n_head_kv + h) * c->dk + d]);
			for (uint32_t d = 0; d < c->dv; d++)
				if (ns_kvcache_v_at(kv, 0, h, p, d) != vr[(p * c->n_head_kv + h) * c->dv + d])
					NS_FAIL("%s V element (pos %u head %u dim %u) differs",
						ns_kv_type_name(tv), p, h, d);
		}
	for (int pi = 0; pi < 2; pi++) {
		if (!ns_kpath_supported(paths[pi]))
			continue;
		for (int ci = 0; ci < 3; ci++)
			for (int th = 0; th < 4; th++) {
				/* th 3: three threads sharing one workspace slot, as a pool of more
				 * than NS_ATTN_MAX_SLOTS threads shares the slots */
				const int n_thr = th < 3 ? th + 1 : 3, n_slot = th < 3 ? th + 1 : 1;
				struct ns_attn_ws *ws = ns_attn_ws_new(n_slot, c->n_head, c->n_head_kv,
								       c->dk, c->dv, c->n_pos);
				uint32_t step = chunkings[ci];

				if (!ws)
					NS_FAIL("ns_attn_ws_new");
				if ((ci > 0 && th != 1) || (ci == 2 && c->n_pos > 70))
					goto next; /* chunkings: on 2 threads, short sequences */
				memset(out, 0xff, c->n_pos * no * 4);
				for (uint32_t p0 = 0; p0 < c->n_pos; p0 += step) {
					struct ns_attn a = {
						.kv = kv, .layer = 0, .q = q + p0 * nq, .out = out + p0 * no,
						.n_tok = c->n_pos - p0 < step ? c->n_pos - p0 : step,
						.pos0 = p0, .n_head = c->n_head, .window = c->window,
						.scale = scale, .sinks = c->sinks ? sinks : NULL,
					};
					int rc = ns_attn_run(pools[n_thr - 1], ws, paths[pi], &a);

					if (rc)
						NS_FAIL("ns_attn_run: %d", rc);
				}
				if (exact) {
					if (memcmp(out, ref, c->n_pos * no * 4))
						NS_FAIL("f32 cache, %s path, chunks of %u, %d threads on %d "
							"slots, heads %u/%u, dk %u dv %u, window %u, sinks %d: not "
							"bit-identical to the reference", s_path_name(paths[pi]),
							step, n_thr, n_slot,
							c->n_head, c->n_head_kv, c->dk, c->dv, c->window, c->sinks);
					s_n_exact++;
				} else {
					for (uint64_t i = 0; i < c->n_pos * no; i++) {
						double e = fabs((double)out[i] - ref[i]);
						double tol = 5e-6 * vmax; /* worst seen ~1e-6 (float rounding) */

						if (!(e <= tol))
							NS_FAIL("%s/%s cache, %s path, chunks of %u: output %llu "
								"is %.9g, reference %.9g (|err| %.3g > %.3g; heads "
								"%u/%u dk %u dv %u window %u sinks %d)",
								ns_kv_type_name(tk), ns_kv_type_name(tv),
								s_path_name(paths[pi]), step, (unsigned long long)i,
								out[i], ref[i], e, tol, c->n_head, c->n_head_kv,
								c->dk, c->dv, c->window, c->sinks);
						if (e / vmax > s_worst[tk > tv ? tk : tv])
							s_worst[tk > tv ? tk : tv] = e / vmax;
					}
					s_n_tol++;
				}
next:
				ns_attn_ws_destroy(&ws);
			}
	}
	ns_kvcache_destroy(&kv);
	free(q), free(k), free(v), free(kr), free(vr), free(ref), free(out);
}

/* A ring cache (kvcache.h ns_kvcache_new_ring) of window + chunk - 1 positions against the
 * whole cache: the forward pass's order (store a chunk's K/V, then its attention), chunks of
 * `chunk` tokens over n_pos positions that wrap the ring many times; every output bit for
 * bit equal to the whole cache's on every path and cache type (only the addressing
 * differs), and ns_attn_reference's too. Then: a chunk longer than the ring serves, and a
 * full-causal read of a ring, are refused (-ERANGE). */
static void s_check_ring(const struct s_case *c, uint32_t chunk, enum ns_kv_type tk,
			 enum ns_kv_type tv, struct ns_pool *pool)
{
	const uint64_t nk = (uint64_t)c->n_head_kv * c->dk, nv = (uint64_t)c->n_head_kv * c->dv;
	const uint64_t nq = (uint64_t)c->n_head * c->dk, no = (uint64_t)c->n_head * c->dv;
	const uint32_t R = ns_kv_ring_positions(c->window, chunk, c->n_pos);
	float *q = malloc(c->n_pos * nq * 4), *k = malloc(c->n_pos * nk * 4);
	float *v = malloc(c->n_pos * nv * 4), *ow = malloc(chunk * no * 4);
	float *orr = malloc(chunk * no * 4), *att = malloc(c->n_pos * 4), sinks[64];
	const float scale = 1.0f / sqrtf((float)c->dk);
	enum ns_kpath paths[2] = { NS_KPATH_SCALAR, NS_KPATH_AVX512 };
	struct ns_kvcache *whole, *ring;
	struct ns_attn_ws *ws = ns_attn_ws_new(2, c->n_head, c->n_head_kv, c->dk, c->dv, c->n_pos);

	if (!q || !k || !v || !ow || !orr || !att || !ws)
		NS_FAIL("out of memory");
	if (R >= c->n_pos || c->n_pos / R < 3)
		NS_FAIL("case: a ring of %u positions does not wrap %u positions 3 times", R,
			c->n_pos);
	for (uint64_t i = 0; i < c->n_pos * nq; i++)
		q[i] = 2.0f * s_rand();
	for (uint64_t i = 0; i < c->n_pos * nk; i++)
		k[i] = 2.0f * s_rand();
	for (uint64_t i = 0; i < c->n_pos * nv; i++)
		v[i] = s_rand();
	for (uint32_t h = 0; h < c->n_head; h++)
		sinks[h] = 3.0f * s_rand();
	for (int pi = 0; pi < 2; pi++) {
		if (!ns_kpath_supported(paths[pi]) ||
		    (paths[pi] == NS_KPATH_AVX512 && (c->dk % 16 || c->dv % 16)))
			continue;
		if (ns_kvcache_new(1, c->n_pos, c->n_head_kv, c->dk, c->dv, tk, tv, &whole) ||
		    ns_kvcache_new_ring(1, c->n_pos, R, c->n_head_kv, c->dk, c->dv, tk, tv, &ring) ||
		    !ns_kvcache_is_ring(ring) || ns_kvcache_bytes(ring) >= ns_kvcache_bytes(whole))
			NS_FAIL("ns_kvcache_new_ring");
		for (uint32_t p0 = 0; p0 < c->n_pos; p0 += chunk) {
			const uint32_t n = c->n_pos - p0 < chunk ? c->n_pos - p0 : chunk;
			struct ns_attn a = {
				.layer = 0, .q = q + p0 * nq, .n_tok = n, .pos0 = p0,
				.n_head = c->n_head, .window = c->window, .scale = scale,
				.sinks = c->sinks ? sinks : NULL,
			};
			int rc;

			for (uint32_t p = p0; p < p0 + n; p++) {
				ns_kvcache_store(whole, 0, p, k + p * nk, v + p * nv);
				ns_kvcache_store(ring, 0, p, k + p * nk, v + p * nv);
			}
			a.kv = whole;
			a.out = ow;
			rc = ns_attn_run(pool, ws, paths[pi], &a);
			a.kv = ring;
			a.out = orr;
			if (rc || (rc = ns_attn_run(pool, ws, paths[pi], &a)))
				NS_FAIL("ns_attn_run: %d", rc);
			if (memcmp(ow, orr, n * no * 4))
				NS_FAIL("%s/%s ring of %u (window %u, chunks of %u), %s path: chunk at %u "
					"differs from the whole cache", ns_kv_type_name(tk),
					ns_kv_type_name(tv), R, c->window, chunk,
					s_path_name(paths[pi]), p0);
			if (pi == 0 && p0 % (3 * chunk) == 0) { /* the reference's addressing too */
				ns_attn_reference(&a, att);
				a.kv = whole;
				a.out = ow;
				ns_attn_reference(&a, att);
				if (memcmp(ow, orr, n * no * 4))
					NS_FAIL("ns_attn_reference over a ring of %u differs at %u", R,
						p0);
			}
		}
		if (ring->lo != c->n_pos - R)
			NS_FAIL("ring lo %u, want %u", ring->lo, c->n_pos - R);
		{	/* the boundary: a query at lo + window - 1 reads lo (held), one a position
			 * earlier reads lo - 1 (overwritten) */
			struct ns_attn a = {
				.kv = ring, .layer = 0, .q = q, .out = orr, .n_tok = 1,
				.pos0 = ring->lo + c->window - 1, .n_head = c->n_head,
				.window = c->window, .scale = scale,
			};
			int rc = ns_attn_run(pool, ws, paths[pi], &a);

			a.pos0--;
			if (rc || ns_attn_run(pool, ws, paths[pi], &a) != -ERANGE)
				NS_FAIL("ring holding %u..: a read from %u gave %d, from %u was not "
					"refused", ring->lo, ring->lo, rc, ring->lo - 1);
			a.pos0 = c->n_pos - 1;
			a.window = 0;
			if (ns_attn_run(pool, ws, paths[pi], &a) != -ERANGE)
				NS_FAIL("a full-causal read of a ring was not refused");
		}
		ns_kvcache_destroy(&whole);
		ns_kvcache_destroy(&ring);
		s_n_ring++;
	}
	ns_attn_ws_destroy(&ws);
	free(q), free(k), free(v), free(ow), free(orr), free(att);
}

static void s_check_contract(void)
{
	struct ns_kvcache *kv;
	struct ns_attn_ws *ws = ns_attn_ws_new(1, 4, 2, 64, 64, 16);
	float q[4 * 64], o[4 * 64];
	struct ns_attn a = { .q = q, .out = o, .n_tok = 1, .pos0 = 16, .n_head = 4, .scale = 1 };

	if (ns_kvcache_new(1, 16, 2, 48, 64, NS_KV_Q8_0, NS_KV_F32, &kv) != -EINVAL ||
	    ns_kvcache_new(1, 16, 2, 64, 40, NS_KV_F16, NS_KV_Q8_0, &kv) != -EINVAL)
		NS_FAIL("a q8_0 cache of a head size not a multiple of 32 was accepted");
	if (ns_kvcache_new(2, 16, 2, 64, 64, NS_KV_F16, NS_KV_F16, &kv) || !ws)
		NS_FAIL("setup");
	a.kv = kv;
	if (ns_attn_run(NULL, ws, NS_KPATH_AUTO, &a) != -EINVAL)
		NS_FAIL("a chunk past the cache's context was accepted");
	a.pos0 = 0;
	a.layer = 2;
	if (ns_attn_run(NULL, ws, NS_KPATH_AUTO, &a) != -EINVAL)
		NS_FAIL("a layer past the cache was accepted");
	a.layer = 0;
	a.n_head = 3;
	if (ns_attn_run(NULL, ws, NS_KPATH_AUTO, &a) != -EINVAL)
		NS_FAIL("heads that do not fit the workspace were accepted");
	ns_attn_ws_destroy(&ws);
	ns_kvcache_destroy(&kv);
	enum ns_kv_type t;
	if (ns_kv_type_parse("q8_0", &t) || t != NS_KV_Q8_0 || ns_kv_type_parse("q4_0", &t) != -EINVAL ||
	    ns_kv_row_bytes(NS_KV_Q8_0, 128) != 136 || ns_kv_row_bytes(NS_KV_F16, 128) != 256)
		NS_FAIL("type names or sizes");
}

int main(void)
{
	static const struct s_case cases[] = {
		{ 4, 2, 64, 64, 150, 0, false },   { 8, 2, 128, 128, 90, 0, false },
		{ 4, 4, 32, 32, 70, 7, true },     { 8, 1, 64, 32, 77, 40, true },
		{ 6, 2, 128, 64, 200, 0, true },   { 2, 2, 8, 8, 40, 0, false },
		{ 4, 2, 64, 64, 33, 16, false },   { 32, 8, 64, 64, 40, 0, false },
	};
	/* rings: windows 7, 16, 40 over 300 positions, chunks 1 .. 37 (rings of 16 .. 80) */
	static const struct s_case ring_cases[] = {
		{ 4, 2, 64, 64, 300, 7, false }, { 8, 1, 64, 32, 300, 40, true },
		{ 2, 2, 8, 8, 300, 16, false },  { 4, 4, 32, 32, 300, 16, true },
	};
	static const uint32_t ring_chunks[] = { 1, 5, 16, 37 };
	struct ns_pool *pools[3] = { ns_pool_new(1), ns_pool_new(2), ns_pool_new(3) };

	if (!pools[0] || !pools[1] || !pools[2])
		NS_FAIL("ns_pool_new");
	printf("best path: %s\n", ns_kpath_name(ns_kpath_best()));
	s_check_contract();
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		for (int tk = NS_KV_F32; tk <= NS_KV_Q8_0; tk++) {
			const struct s_case *c = &cases[i];

			if (!ns_kv_type_fits((enum ns_kv_type)tk, c->dk) ||
			    !ns_kv_type_fits((enum ns_kv_type)tk, c->dv))
				continue;
			s_check(c, (enum ns_kv_type)tk, (enum ns_kv_type)tk, pools);
			if (tk == NS_KV_F16 && ns_kv_type_fits(NS_KV_Q8_0, c->dv))
				s_check(c, NS_KV_F16, NS_KV_Q8_0, pools);
		}
	for (size_t i = 0; i < NS_ARRAY_LEN(ring_cases); i++)
		for (size_t ch = 0; ch < NS_ARRAY_LEN(ring_chunks); ch++)
			for (int tk = NS_KV_F32; tk <= NS_KV_Q8_0; tk++)
				if (ns_kv_type_fits((enum ns_kv_type)tk, ring_cases[i].dk) &&
				    ns_kv_type_fits((enum ns_kv_type)tk, ring_cases[i].dv))
					s_check_ring(&ring_cases[i], ring_chunks[ch],
						     (enum ns_kv_type)tk, (enum ns_kv_type)tk,
						     pools[1]);
	s_check_ring(&ring_cases[0], 5, NS_KV_F16, NS_KV_Q8_0, pools[1]);
	printf("%d runs bit-identical to the reference (f32 cache), %d within tolerance; worst "
	       "|err| / max|v|: f16 %.3g, q8_0 %.3g; %d ring runs bit-identical to the whole "
	       "cache\n", s_n_exact, s_n_tol, s_worst[1], s_worst[2], s_n_ring);
	for (int i = 0; i < 3; i++)
		ns_pool_destroy(&pools[i]);
	return 0;
}
