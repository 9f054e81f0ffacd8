/* test_ctower - the vision tower on the CUDA side (nscompute/cuda/ctower.h) against the host
 * tower and Transformers (../shared/oracle/hf).
 *
 *   test_ctower DIR MMPROJ [--kernels]
 *
 * DIR (hf/qwen3_vl, hf/qwen3_5_cond) as tests/vision/test_vision_tower.c reads it: the
 * processor's pixel values of a 64x64 image (grid 1x4x4) and Transformers' float32
 * vision.last_hidden_state, vision.pooler_output and (Qwen3-VL) vision.deepstack_features_0.
 * The host tower (fused provider) and the CUDA tower run on the same pixels:
 *   1. CUDA tower vs Transformers: every output within S_TOL_HF (1e-4) of the reference's
 *      largest magnitude, emulated or not (the tower's matrices take the f32 GEMM, not the
 *      text pass's f16 prefill GEMM, which was 5e-4 off here).
 *   2. CUDA tower vs the host tower: over the emulation (its kernels are the host tower's
 *      arithmetic) bit for bit; with --kernels (the kernels' sources under simt, or a GPU)
 *      within S_TOL_KERNELS.
 *   3. ns_vision_encode with the CUDA tower attached (ns_ctower_attach: what nscompute-cuda
 *      runs) gives ns_ctower_encode's bits; destroyed, the host tower's again.
 *   4. Random pixels on a (2, 4, 8) grid (two frames, each attending only to itself; a
 *      non-square frame) with the attention workspace capped so that queries go in blocks:
 *      against the host tower as in 2.
 *      And one 16x20 frame (320 keys: two attention chunks), default options.
 *   5. The arena: ns_ctower_vram_need's total is what the encode allocated; a budget the
 *      device cannot give is refused with one line naming the tower.
 *   6. The mmproj rewritten with F16, then Q8_0 matrices (s_types): the dequantizing path
 *      against the host tower, and matrices staged one row at a time, bit for bit.
 *   Every encode (1-6) took an arena of exactly ns_ctower_vram_need's figure (vision_vram.h,
 *   the arithmetic nsctl reserves in --vram-budget) and used all of it.
 *   7. The tower's share of --vram-budget (s_cap): ns_vision_vram_largest at -c 4 is the
 *      4-token image's need, the peak of every smaller one; an encode capped at it runs in an
 *      arena of exactly that; a cap 1 B short is refused in one line (-ENOSPC), nothing run.
 * Linked three ways: the emulation (cuda_ctower_emu_*), the kernels' sources (cuda_simt_
 * ctower_*, --kernels) and the GPU (cuda_ctower_*, --kernels; exit 77 without a device). */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "ctower.h"
#include "cuda_test.h"
#include "ggml_type.h"
#include "gguf.h"
#include "gguf_write.h"
#include "ns_util.h"
#include "nscuda.h"
#include "vision_vram.h"
#include "vt_util.h"
#include "weights_fused.h"

#define S_TOL_HF 1e-4
/* the kernels (simt, a GPU) vs the host tower: CUDA's double libm and the chunked f32
 * attention, a few ulps a step (measured figures printed) */
#define S_TOL_KERNELS 1e-5

struct s_run {
	uint64_t n, n_tok;
	float *last, *embd, *ds;
};

static void s_alloc(struct s_run *r, const struct ns_vision_hparams *hp, uint64_t n)
{
	r->n = n;
	r->n_tok = n / (hp->merge * hp->merge);
	r->last = calloc(n * hp->n_embd, sizeof(float));
	r->embd = calloc(r->n_tok * hp->n_embd_out, sizeof(float));
	r->ds = calloc((hp->n_deepstack ? hp->n_deepstack : 1) * r->n_tok * hp->n_embd_out,
		       sizeof(float));
	NS_REQUIRE(r->last && r->embd && r->ds, "out of memory");
}

static void s_free(struct s_run *r)
{
	free(r->last);
	free(r->embd);
	free(r->ds);
}

static struct ns_vision_out s_out(struct s_run *r)
{
	return (struct ns_vision_out){ .embd = r->embd, .deepstack = r->ds,
				       .last_hidden = r->last };
}

static int s_check(const char *what, const char *name, const float *got, const float *want,
		   size_t n, double tol)
{
	const struct vt_diff d = vt_diff(got, want, n);

	printf("  %-34s %-22s max|d| %.3g (ref max %.3g) rel %.3g\n", what, name, d.max_abs,
	       d.ref_max, d.rel);
	if (d.rel <= tol)
		return 0;
	fprintf(stderr, "FAIL %s %s: rel %.3g > %g at %zu (%g vs %g)\n", what, name, d.rel, tol,
		d.at, (double)got[d.at], (double)want[d.at]);
	return 1;
}

/* got vs want: bit for bit (exact) or within tol of want's largest magnitude. */
static int s_compare(const char *what, const struct ns_vision_hparams *hp,
		     const struct s_run *got, const struct s_run *want, bool exact, double tol)
{
	const size_t nl = got->n * hp->n_embd, ne = got->n_tok * hp->n_embd_out;
	int fails = 0;

	if (exact) {
		const bool same = !memcmp(got->last, want->last, nl * 4) &&
				  !memcmp(got->embd, want->embd, ne * 4) &&
				  !memcmp(got->ds, want->ds, hp->n_deepstack * ne * 4);

		printf("  %-34s %s\n", what, same ? "bit-identical" : "DIFFERENT");
		if (same)
			return 0;
		tol = 0;
	}
	fails += s_check(what, "last_hidden_state", got->last, want->last, nl, tol);
	fails += s_check(what, "embd", got->embd, want->embd, ne, tol);
	for (uint32_t l = 0; l < hp->n_deepstack; l++)
		fails += s_check(what, "deepstack", got->ds + l * ne, want->ds + l * ne, ne, tol);
	return fails + (exact ? 1 : 0);
}

/* f to IEEE half, round to nearest even (two fp16.h headers of the tree share the name). */
static uint16_t s_half(float f)
{
	uint32_t x, m, h, rem;
	int32_t e;
	uint16_t sign;

	memcpy(&x, &f, 4);
	sign = (uint16_t)((x >> 16) & 0x8000);
	e = (int32_t)((x >> 23) & 0xff) - 127 + 15;
	m = x & 0x7fffff;
	if (((x >> 23) & 0xff) == 0xff)
		return sign | 0x7c00 | (m ? 0x200 : 0);
	if (e >= 31)
		return sign | 0x7c00;
	if (e <= 0) { /* subnormal */
		const uint32_t shift = (uint32_t)(14 - e);

		if (e < -10)
			return sign;
		m |= 0x800000;
		h = m >> shift;
		rem = m & ((1u << shift) - 1);
		if (rem > (1u << (shift - 1)) || (rem == (1u << (shift - 1)) && (h & 1)))
			h++;
		return sign | (uint16_t)h;
	}
	h = ((uint32_t)e << 10) | (m >> 13);
	rem = m & 0x1fff;
	if (rem > 0x1000 || (rem == 0x1000 && (h & 1)))
		h++; /* a carry into the exponent is the right rounding */
	return sign | (uint16_t)h;
}

/* 4b. One 16x20 frame of random pixels (320 keys: the attention's chunks of 256 merged; the
 * position grid resampled to a non-square image), default options, against the host tower. */
/* The last encode of ct (options co, n patches in grid_t frames) took an arena of exactly
 * vision_vram.h's figure (ns_ctower_vram_need: what nsctl counts) and used every byte. */
static int s_arena(const char *what, const struct ns_ctower *ct, const struct ns_vision *v,
		   const struct ns_ctower_opts *co, uint64_t n, uint32_t grid_t)
{
	struct ns_ctower_stats st;
	struct ns_ctower_need need;
	char err[NS_ERR_LEN];

	ns_ctower_stats(ct, &st);
	NS_REQUIRE(ns_ctower_vram_need(v, co, n, grid_t, &need, err, sizeof(err)) == 0, "%s", err);
	if (st.vram_used != need.total || st.vram_arena != need.total) {
		fprintf(stderr, "FAIL: %s the encode's arena %llu B, %llu B used; the need says "
			"%llu B\n", what, (unsigned long long)st.vram_arena,
			(unsigned long long)st.vram_used, (unsigned long long)need.total);
		return 1;
	}
	return 0;
}

/* 7. The tower's share of --vram-budget (nscompute-cuda: vram_budget = vram_cap = the largest
 * image's need, ns_vision_vram_largest): an image runs in an arena of exactly that; a cap
 * one byte short is refused in one line. */
static int s_cap(struct ns_vision *v, const struct ns_model *m, const float *pixels)
{
	const struct ns_vision_hparams *hp = ns_vision_hparams(v);
	const uint64_t group = (uint64_t)hp->merge * hp->merge;
	struct ns_vision_vram big, one;
	struct ns_ctower_opts co = { 0 };
	struct ns_ctower_stats st;
	struct ns_ctower *ct;
	struct s_run d = { 0 };
	struct ns_vision_out o;
	char err[NS_ERR_LEN];
	uint64_t max_tokens, most = 0;
	int fails = 0, rc;

	/* a context of 4 tokens: the largest image is 4 tokens, 16 patches (1x4x4) */
	NS_REQUIRE(ns_vision_vram_largest(m, hp, NULL, 4, &big, &max_tokens, err,
					  sizeof(err)) == 0, "%s", err);
	for (uint64_t t = 1; t <= max_tokens; t++) {
		NS_REQUIRE(ns_vision_vram_need(m, hp, t * group, 1, 0, 0, &one, err,
					       sizeof(err)) == 0, "%s", err);
		most = one.total > most ? one.total : most;
	}
	printf("  the largest image at -c 4: %llu tokens, %llu B of VRAM\n",
	       (unsigned long long)max_tokens, (unsigned long long)big.total);
	if (max_tokens != 4 || big.total != most || big.total != one.total) {
		fprintf(stderr, "FAIL: the largest image's need %llu B (%llu tokens), the needs "
			"up to 4 tokens peak at %llu B, 4 tokens' is %llu B\n",
			(unsigned long long)big.total, (unsigned long long)max_tokens,
			(unsigned long long)most, (unsigned long long)one.total);
		fails++;
	}
	s_alloc(&d, hp, 16);
	co.vram_budget = co.vram_cap = big.total;
	NS_REQUIRE(ns_ctower_new(v, &co, &ct, err, sizeof(err)) == 0, "%s", err);
	o = s_out(&d);
	NS_REQUIRE(ns_ctower_encode(ct, pixels, 1, 4, 4, &o, err, sizeof(err)) == 0, "%s", err);
	ns_ctower_stats(ct, &st);
	if (st.vram_arena != big.total || st.vram_used != big.total) {
		fprintf(stderr, "FAIL: capped at %llu B: arena %llu B, %llu B used\n",
			(unsigned long long)big.total, (unsigned long long)st.vram_arena,
			(unsigned long long)st.vram_used);
		fails++;
	}
	ns_ctower_destroy(&ct);
	co.vram_budget = 0;
	co.vram_cap = big.total - 1;
	NS_REQUIRE(ns_ctower_new(v, &co, &ct, err, sizeof(err)) == 0, "%s", err);
	rc = ns_ctower_encode(ct, pixels, 1, 4, 4, &o, err, sizeof(err));
	printf("  a cap 1 B short: %d: %s\n", rc, err);
	if (rc != -ENOSPC || !strstr(err, "--vram-budget") || strchr(err, '\n')) {
		fprintf(stderr, "FAIL: a cap 1 B short of the need: %d, %s\n", rc, err);
		fails++;
	}
	ns_ctower_stats(ct, &st);
	if (st.encodes) {
		fprintf(stderr, "FAIL: a cap 1 B short: the image ran\n");
		fails++;
	}
	ns_ctower_destroy(&ct);
	s_free(&d);
	return fails;
}

static int s_large(struct ns_vision *v, uint64_t *seed, bool emulated)
{
	const struct ns_vision_hparams *hp = ns_vision_hparams(v);
	const uint64_t n = 320, patch_dim = 3ull * hp->temporal * hp->patch * hp->patch;
	float *px = ct_random_floats(n * patch_dim, seed);
	struct s_run h = { 0 }, d = { 0 };
	struct ns_ctower *ct;
	struct ns_vision_out o;
	char err[NS_ERR_LEN];
	int fails;

	s_alloc(&h, hp, n);
	s_alloc(&d, hp, n);
	o = s_out(&h);
	NS_REQUIRE(ns_vision_encode(v, px, 1, 16, 20, &o) == 0, "%s", ns_vision_error(v));
	NS_REQUIRE(ns_ctower_new(v, NULL, &ct, err, sizeof(err)) == 0, "%s", err);
	o = s_out(&d);
	NS_REQUIRE(ns_ctower_encode(ct, px, 1, 16, 20, &o, err, sizeof(err)) == 0, "%s", err);
	fails = s_arena("1x16x20:", ct, v, NULL, n, 1);
	ns_ctower_destroy(&ct);
	fails += s_compare("1x16x20 (320 keys):", hp, &d, &h, emulated, S_TOL_KERNELS);
	s_free(&h);
	s_free(&d);
	free(px);
	return fails;
}

/* The mmproj at src rewritten to dst with every matrix the tower multiplies (2-D weights
 * but the position grid) in type (F16, or Q8_0 as ggml quantizes it: d = max|x| / 127 as
 * half, round(x / d)): the dequantizing path of the CUDA tower. */
static void s_convert(const char *src, const char *dst, uint32_t type)
{
	struct ns_gguf *g = NULL;
	struct ns_gguf_writer *w;
	char err[NS_ERR_LEN];
	int fd;

	NS_REQUIRE(ns_gguf_open(src, &g, err, sizeof(err)) == 0, "%s", err);
	NS_REQUIRE((w = ns_gguf_writer_new(g->alignment)), "out of memory");
	for (uint64_t i = 0; i < g->n_kv; i++)
		NS_REQUIRE(ns_gguf_writer_set_value(w, g->kv[i].key.s, &g->kv[i].value) == 0, "kv");
	NS_REQUIRE((fd = open(src, O_RDONLY)) >= 0, "open %s", src);
	for (uint64_t i = 0; i < g->n_tensors; i++) {
		const struct ns_gguf_tensor *t = &g->tensors[i];
		const bool mat = t->n_dims == 2 && t->type == NS_TYPE_F32 && t->ne[1] > 1 &&
				 !strstr(t->name.s, "position_embd");
		float *f = malloc(t->n_bytes);
		uint8_t *out = NULL;
		uint64_t nb = t->n_bytes;

		NS_REQUIRE(f && pread(fd, f, t->n_bytes, (off_t)t->file_offset) ==
			   (ssize_t)t->n_bytes, "read %s", t->name.s);
		if (mat && type == NS_TYPE_F16) {
			nb = t->n_elems * 2;
			NS_REQUIRE((out = malloc(nb)), "out of memory");
			for (uint64_t e = 0; e < t->n_elems; e++)
				((uint16_t *)out)[e] = s_half(f[e]);
		} else if (mat) { /* Q8_0: blocks of 32 */
			nb = t->n_elems / 32 * 34;
			NS_REQUIRE(t->ne[0] % 32 == 0 && (out = malloc(nb)), "q8_0 %s", t->name.s);
			for (uint64_t b = 0; b < t->n_elems / 32; b++) {
				const float *x = f + 32 * b;
				uint8_t *blk = out + 34 * b;
				float amax = 0, d, id;
				uint16_t h;

				for (int k = 0; k < 32; k++)
					amax = fabsf(x[k]) > amax ? fabsf(x[k]) : amax;
				d = amax / 127.0f;
				id = d ? 1.0f / d : 0.0f;
				h = s_half(d);
				memcpy(blk, &h, 2);
				for (int k = 0; k < 32; k++)
					blk[2 + k] = (uint8_t)(int8_t)roundf(x[k] * id);
			}
		}
		NS_REQUIRE(ns_gguf_writer_add_tensor(w, t->name.s, mat ? type : t->type, t->n_dims,
						     t->ne, out ? (void *)out : (void *)f, nb) == 0,
			   "add %s", t->name.s);
		free(f);
		free(out);
	}
	close(fd);
	NS_REQUIRE(ns_gguf_writer_write_file(w, dst, err, sizeof(err)) == 0, "%s", err);
	ns_gguf_writer_destroy(&w);
	ns_gguf_close(&g);
}

/* 6. The mmproj's matrices in F16 and in Q8_0 (dequantized on the device, then the f32
 * GEMM; the host tower multiplies them as stored): within S_TOL_KERNELS of the host tower
 * (the same weight values, another summation order); and the staging buffer of one widest
 * row (matrices cut in many pieces) bit-identical to the default. */
static int s_types(const char *mmproj, const float *pixels, const float *ref_pool)
{
	const uint32_t types[2] = { NS_TYPE_F16, NS_TYPE_Q8_0 };
	const char *names[2] = { "f16", "q8_0" };
	int fails = 0;

	for (int i = 0; i < 2; i++) {
		struct ns_weights_fused_opts fo = { .n_threads = 2 };
		struct ns_vision_opts vo = { .n_threads = 2 };
		struct ns_ctower_opts co = { 0 };
		struct s_run host = { 0 }, dev = { 0 }, small = { 0 };
		const char *path = ns_test_scratch("ctower", names[i]);
		char err[NS_ERR_LEN], what[64];
		struct ns_model *m;
		struct ns_weights *w;
		struct ns_vision *v;
		struct ns_ctower *ct;
		struct ns_vision_out o;

		s_convert(mmproj, path, types[i]);
		NS_REQUIRE(ns_model_open(path, &m, err, sizeof(err)) == 0, "%s", err);
		NS_REQUIRE(ns_weights_fused_new(m, &fo, &w, err, sizeof(err)) == 0, "%s", err);
		NS_REQUIRE(ns_vision_new(m, w, &vo, &v, err, sizeof(err)) == 0, "%s", err);
		s_alloc(&host, ns_vision_hparams(v), 16);
		s_alloc(&dev, ns_vision_hparams(v), 16);
		s_alloc(&small, ns_vision_hparams(v), 16);
		o = s_out(&host);
		NS_REQUIRE(ns_vision_encode(v, pixels, 1, 4, 4, &o) == 0, "%s", ns_vision_error(v));
		NS_REQUIRE(ns_ctower_new(v, &co, &ct, err, sizeof(err)) == 0, "%s", err);
		o = s_out(&dev);
		NS_REQUIRE(ns_ctower_encode(ct, pixels, 1, 4, 4, &o, err, sizeof(err)) == 0, "%s",
			   err);
		snprintf(what, sizeof(what), "%s matrices:", names[i]);
		fails += s_arena(what, ct, v, &co, 16, 1);
		ns_ctower_destroy(&ct);
		co.stage_bytes = 1; /* at least the widest row: one row at a time there */
		NS_REQUIRE(ns_ctower_new(v, &co, &ct, err, sizeof(err)) == 0, "%s", err);
		o = s_out(&small);
		NS_REQUIRE(ns_ctower_encode(ct, pixels, 1, 4, 4, &o, err, sizeof(err)) == 0, "%s",
			   err);
		snprintf(what, sizeof(what), "%s matrices, row-sized staging:", names[i]);
		fails += s_arena(what, ct, v, &co, 16, 1);
		ns_ctower_destroy(&ct);
		snprintf(what, sizeof(what), "%s matrices, vs host tower:", names[i]);
		fails += s_compare(what, ns_vision_hparams(v), &dev, &host, false, S_TOL_KERNELS);
		snprintf(what, sizeof(what), "%s matrices, row-sized staging:", names[i]);
		fails += s_compare(what, ns_vision_hparams(v), &small, &dev, true, 0);
		snprintf(what, sizeof(what), "%s matrices vs Transformers:", names[i]);
		s_check(what, "pooler_output", dev.embd, ref_pool,
			4 * ns_vision_hparams(v)->n_embd_out, 1);
		s_free(&host);
		s_free(&dev);
		s_free(&small);
		ns_vision_destroy(&v);
		ns_weights_destroy(&w);
		ns_model_close(&m);
	}
	return fails;
}

int main(int argc, char **argv)
{
	struct ns_weights_fused_opts fo = { .n_threads = 2 };
	struct ns_vision_opts vo = { .n_threads = 2 };
	struct s_run host = { 0 }, dev = { 0 }, hooked = { 0 }, h2 = { 0 }, d2 = { 0 };
	struct ns_ctower_opts co = { 0 };
	struct ns_ctower_need need;
	struct ns_ctower_stats st;
	struct ns_cuda_devinfo di;
	char rel[512], path[4096], err[NS_ERR_LEN];
	struct ns_model *m;
	struct ns_weights *w;
	struct ns_vision *v;
	struct ns_ctower *ct;
	const struct ns_vision_hparams *hp;
	float *pixels, *ref_last, *ref_pool, *ref_ds = NULL, *rnd;
	uint64_t seed = 0xc70e, patch_dim;
	struct ns_vision_out o;
	bool kernels, emulated;
	int fails = 0, rc;

	ns_test_require_oracle();
	atexit(ns_test_scratch_remove);
	NS_REQUIRE(argc == 3 || (argc == 4 && !strcmp(argv[3], "--kernels")),
		   "usage: %s DIR MMPROJ [--kernels]", argv[0]);
	kernels = argc == 4;
	if (ns_cuda_device_count() == 0) {
		printf("no CUDA device: skipping\n");
		return 77;
	}
	NS_REQUIRE(ns_cuda_init(0, err, sizeof(err)) == 0 &&
		   ns_cuda_device_info(0, &di, err, sizeof(err)) == 0, "%s", err);
	emulated = !strcmp(di.name, "cpu-emulation") && !kernels;
	NS_REQUIRE(ns_model_open(ns_test_oracle_path(path, sizeof(path), argv[2]), &m, err,
				 sizeof(err)) == 0, "%s", err);
	NS_REQUIRE(ns_weights_fused_new(m, &fo, &w, err, sizeof(err)) == 0, "%s", err);
	NS_REQUIRE(ns_vision_new(m, w, &vo, &v, err, sizeof(err)) == 0, "%s", err);
	hp = ns_vision_hparams(v);
	patch_dim = 3ull * hp->temporal * hp->patch * hp->patch;
	printf("%s on %s%s: d %u, %u layers, %u heads of %u, n_ff %u, out %u, %u deepstack\n",
	       argv[2], di.name, kernels ? " (kernels)" : "", hp->n_embd, hp->n_layer, hp->n_head,
	       hp->head_dim, hp->n_ff, hp->n_embd_out, hp->n_deepstack);
#define S_F32(var, file, n) \
	(snprintf(rel, sizeof(rel), "%s/" file, argv[1]), var = vt_read_f32(rel, n))
	S_F32(pixels, "image.pixel_values.f32", 16 * patch_dim);
	S_F32(ref_last, "vision.last_hidden_state.f32", 16 * (uint64_t)hp->n_embd);
	S_F32(ref_pool, "vision.pooler_output.f32", 4 * (uint64_t)hp->n_embd_out);
	if (hp->n_deepstack)
		S_F32(ref_ds, "vision.deepstack_features_0.f32", 4 * (uint64_t)hp->n_embd_out);
#undef S_F32

	/* the host tower, then the CUDA tower on the oracle's pixels */
	s_alloc(&host, hp, 16);
	s_alloc(&dev, hp, 16);
	o = s_out(&host);
	NS_REQUIRE(ns_vision_encode(v, pixels, 1, 4, 4, &o) == 0, "%s", ns_vision_error(v));
	NS_REQUIRE(ns_ctower_new(v, &co, &ct, err, sizeof(err)) == 0, "%s", err);
	o = s_out(&dev);
	rc = ns_ctower_encode(ct, pixels, 1, 4, 4, &o, err, sizeof(err));
	NS_REQUIRE(rc == 0, "ctower: %s", err);

	/* 1. against Transformers */
	{
		const double tol = S_TOL_HF;

		fails += s_check("cuda tower vs Transformers:", "last_hidden_state", dev.last,
				 ref_last, 16 * hp->n_embd, tol);
		fails += s_check("cuda tower vs Transformers:", "pooler_output", dev.embd,
				 ref_pool, 4 * hp->n_embd_out, tol);
		if (ref_ds)
			fails += s_check("cuda tower vs Transformers:", "deepstack_features_0",
					 dev.ds, ref_ds, 4 * hp->n_embd_out, tol);
		s_check("host tower vs Transformers:", "pooler_output", host.embd, ref_pool,
			4 * hp->n_embd_out, 1);
	}
	/* 2. against the host tower */
	fails += s_compare("cuda tower vs host tower:", hp, &dev, &host, emulated, S_TOL_KERNELS);

	/* 5. the arena: the need is what the encode took */
	ns_ctower_stats(ct, &st);
	NS_REQUIRE(ns_ctower_vram_need(v, &co, 16, 1, &need, err, sizeof(err)) == 0, "%s", err);
	printf("  VRAM: need %llu (vectors %llu, activations %llu, attention %llu, staging "
	       "%llu), used %llu; staged %llu weight bytes in %llu GEMMs\n",
	       (unsigned long long)need.total, (unsigned long long)need.vectors,
	       (unsigned long long)need.activations, (unsigned long long)need.attn_ws,
	       (unsigned long long)need.staging, (unsigned long long)st.vram_used,
	       (unsigned long long)st.staged_bytes, (unsigned long long)st.matmuls);
	if (st.vram_used != need.total) {
		fprintf(stderr, "FAIL: the encode used %llu bytes of VRAM, the need says %llu\n",
			(unsigned long long)st.vram_used, (unsigned long long)need.total);
		fails++;
	}

	/* 3. through ns_vision_encode, attached; then detached */
	ns_ctower_attach(ct);
	s_alloc(&hooked, hp, 16);
	o = s_out(&hooked);
	NS_REQUIRE(ns_vision_encode(v, pixels, 1, 4, 4, &o) == 0, "%s", ns_vision_error(v));
	fails += s_compare("ns_vision_encode, attached:", hp, &hooked, &dev, true, 0);
	{ /* it ran on the device (the emulation's bits are the host tower's: count it) */
		struct ns_ctower_stats st2;

		ns_ctower_stats(ct, &st2);
		if (st2.encodes != st.encodes + 1) {
			fprintf(stderr, "FAIL: ns_vision_encode, attached, did not run the CUDA "
				"tower (%llu encodes, %llu before)\n",
				(unsigned long long)st2.encodes, (unsigned long long)st.encodes);
			fails++;
		}
	}

	/* 4. two frames of 4x8, queries in blocks (a workspace cap of one query's) */
	rnd = ct_random_floats(64 * patch_dim, &seed);
	s_alloc(&h2, hp, 64);
	s_alloc(&d2, hp, 64);
	co.attn_ws_max = ns_cuda_attn_ws_bytes(5, hp->n_head, 32, hp->head_dim);
	{
		struct ns_ctower *c2;

		NS_REQUIRE(ns_ctower_new(v, &co, &c2, err, sizeof(err)) == 0, "%s", err);
		o = s_out(&d2);
		NS_REQUIRE(ns_ctower_encode(c2, rnd, 2, 4, 8, &o, err, sizeof(err)) == 0, "%s",
			   err);
		fails += s_arena("2x4x8, queries in blocks:", c2, v, &co, 64, 2);
		ns_ctower_destroy(&c2);
	}
	ns_ctower_destroy(&ct); /* detaches: the host tower again */
	o = s_out(&h2);
	NS_REQUIRE(ns_vision_encode(v, rnd, 2, 4, 8, &o) == 0, "%s", ns_vision_error(v));
	fails += s_compare("2x4x8, queries in blocks of 4:", hp, &d2, &h2, emulated, S_TOL_KERNELS);
	fails += s_large(v, &seed, emulated);

	/* 5. a budget the device cannot give: one line */
	co.vram_budget = 1ull << 50;
	NS_REQUIRE(ns_ctower_new(v, &co, &ct, err, sizeof(err)) == 0, "%s", err);
	o = s_out(&dev);
	rc = ns_ctower_encode(ct, pixels, 1, 4, 4, &o, err, sizeof(err));
	printf("  a 1 PiB budget: %d: %s\n", rc, err);
	if (rc != -ENOMEM || !strstr(err, "vision (cuda)") || strchr(err, '\n')) {
		fprintf(stderr, "FAIL: a 1 PiB arena: %d, %s\n", rc, err);
		fails++;
	}
	rc = ns_ctower_encode(ct, pixels, 1, 4, 3, &o, err, sizeof(err));
	if (rc != -EINVAL) {
		fprintf(stderr, "FAIL: a 4x3 grid (not whole merge groups): %d\n", rc);
		fails++;
	}
	ns_ctower_destroy(&ct);

	fails += s_cap(v, m, pixels);
	fails += s_types(path, pixels, ref_pool);

	s_free(&host);
	s_free(&dev);
	s_free(&hooked);
	s_free(&h2);
	s_free(&d2);
	free(rnd);
	free(pixels);
	free(ref_last);
	free(ref_pool);
	free(ref_ds);
	ns_vision_destroy(&v);
	ns_weights_destroy(&w);
	ns_model_close(&m);
	if (fails)
		return 1;
	printf("ok\n");
	return 0;
}
