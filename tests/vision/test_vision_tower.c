/* test_vision_tower - the vision tower against Transformers' outputs (../shared/oracle/hf).
 *
 *   test_vision_tower DIR MMPROJ --provider ref|fused
 *
 * DIR (hf/qwen3_vl, hf/qwen3_5_cond) holds image.u8 (64x64 RGB), image.pixel_values.f32 (the
 * processor's output), vision.last_hidden_state.f32, vision.pooler_output.f32 and, for
 * Qwen3-VL, vision.deepstack_features_0.f32; MMPROJ is the F32 mmproj GGUF converted from the
 * same checkpoint. The tower runs twice: on the oracle's pixel values, and on our own
 * preprocessing of image.u8 written to a PNG; both must equal the references within 1e-5 of
 * the reference's largest magnitude (the issue asks 1e-4). Then: chunked matmuls (n_batch of
 * one merge group) give bit-identical results; and llama.cpp's own image embeddings
 * (gguf/...image.llamacpp.f32) are compared with the same references, to report how far each
 * implementation is (ours must be the closer). */
#include <errno.h>
#include <string.h>

#include "image_embed.h"
#include "ns_util.h"
#include "vt_util.h"
#include "weights_fused.h"

#define S_SIDE 64u
/* The issue asks 1e-4; we reach ~1e-6, and an exact GELU in the encoder MLP is 3e-5 off. */
#define S_TOL 1e-5

struct s_ref {
	uint64_t n_patches, n_tok, d, n_out, n_ds, patch_dim;
	float *pixels, *last, *pooler, *ds;
};

struct s_run {
	float *last, *embd, *ds;
};

static void s_run_free(struct s_run *r)
{
	free(r->last);
	free(r->embd);
	free(r->ds);
}

static void s_encode(struct ns_vision *v, const struct s_ref *ref, const float *pixels,
		     struct s_run *r)
{
	const struct ns_vision_hparams *hp = ns_vision_hparams(v);
	struct ns_vision_out out;
	int rc;

	r->last = calloc(ref->n_patches * ref->d, sizeof(float));
	r->embd = calloc(ref->n_tok * ref->n_out, sizeof(float));
	r->ds = hp->n_deepstack ? calloc(hp->n_deepstack * ref->n_tok * ref->n_out, sizeof(float))
				: NULL;
	NS_REQUIRE(r->last && r->embd && (r->ds || !hp->n_deepstack), "out of memory");
	out = (struct ns_vision_out){ .embd = r->embd, .deepstack = r->ds, .last_hidden = r->last };
	rc = ns_vision_encode(v, pixels, 1, 4, 4, &out);
	NS_REQUIRE(rc == 0, "encode: %s", ns_vision_error(v));
}

static int s_check(const char *what, const char *name, const float *a, const float *b, size_t n)
{
	const struct vt_diff d = vt_diff(a, b, n);

	printf("  %-26s %-22s max|d| %.3g  (ref max %.3g, rms %.3g)  rel %.3g\n", what, name,
	       d.max_abs, d.ref_max, d.ref_rms, d.rel);
	if (d.rel <= S_TOL)
		return 0;
	fprintf(stderr, "FAIL %s %s: rel %.3g > %g at %zu (%g vs %g)\n", what, name, d.rel, S_TOL,
		d.at, (double)a[d.at], (double)b[d.at]);
	return 1;
}

static int s_check_run(const char *what, const struct s_ref *ref, const struct s_run *r)
{
	int fails = 0;

	fails += s_check(what, "last_hidden_state", r->last, ref->last, ref->n_patches * ref->d);
	fails += s_check(what, "pooler_output", r->embd, ref->pooler, ref->n_tok * ref->n_out);
	if (ref->ds)
		fails += s_check(what, "deepstack_features_0", r->ds, ref->ds,
				 ref->n_tok * ref->n_out);
	return fails;
}

/* image.u8 -> PNG -> our decoder and preprocessing -> the tower. */
static void s_from_u8(struct ns_vision *v, const char *dir, struct s_run *r,
		      const struct s_ref *ref)
{
	char rel[512], err[NS_ERR_LEN];
	const char *png = ns_test_scratch("vt_tower", "png");
	uint8_t *u8;
	struct ns_image_file *f;
	struct ns_image_plan plan;
	struct ns_image img;
	struct ns_image_geom g;
	float *px;

	snprintf(rel, sizeof(rel), "%s/image.u8", dir);
	u8 = vt_read_u8(rel, S_SIDE * S_SIDE * 3);
	vt_write_png(png, u8, S_SIDE, S_SIDE, NULL, 0);
	NS_REQUIRE(ns_image_open(png, &f, err, sizeof(err)) == 0, "%s", err);
	ns_vision_image_geom(ns_vision_hparams(v), NULL, &g);
	g.min_pixels = S_SIDE * S_SIDE; /* the references kept the 64x64 image as it is */
	NS_REQUIRE(ns_image_plan(&g, f->width, f->height, &plan, err, sizeof(err)) == 0, "%s",
		   err);
	NS_REQUIRE(plan.grid_h == 4 && plan.grid_w == 4 && plan.n_tokens == ref->n_tok,
		   "plan %ux%u", plan.grid_h, plan.grid_w);
	NS_REQUIRE(ns_image_decode(f, &img, err, sizeof(err)) == 0, "%s", err);
	NS_REQUIRE(ns_image_preprocess(&img, &g, &plan, &px, err, sizeof(err)) == 0, "%s", err);
	s_encode(v, ref, px, r);
	free(px);
	ns_image_free(&img);
	ns_image_close(&f);
	free(u8);
}

/* llama.cpp's embeddings: (n_tok, n_out * (1 + n_ds)) = [pooler | deepstack...] per token. */
static void s_llamacpp(const char *dir, const char *mmproj, const struct s_ref *ref,
		       const struct s_run *ours)
{
	const uint64_t w = ref->n_out * (1 + ref->n_ds);
	char rel[512], base[256];
	const char *slash = strrchr(mmproj, '/');
	float *l, *cols;

	snprintf(base, sizeof(base), "%.*s", (int)(strlen(slash + 1) - 5), slash + 1);
	snprintf(rel, sizeof(rel), "%s/gguf/%s.image.llamacpp.f32", dir, base);
	l = vt_read_f32(rel, ref->n_tok * w);
	cols = malloc(ref->n_tok * ref->n_out * sizeof(float));
	NS_REQUIRE(cols, "out of memory");
	for (uint64_t part = 0; part <= ref->n_ds; part++) {
		const float *hf = part ? ref->ds : ref->pooler;
		const float *us = part ? ours->ds : ours->embd;
		const char *name = part ? "deepstack_features_0" : "pooler_output";
		struct vt_diff a, b, c;

		for (uint64_t t = 0; t < ref->n_tok; t++)
			memcpy(cols + t * ref->n_out, l + t * w + part * ref->n_out,
			       ref->n_out * sizeof(float));
		a = vt_diff(cols, hf, ref->n_tok * ref->n_out);
		b = vt_diff(us, hf, ref->n_tok * ref->n_out);
		c = vt_diff(us, cols, ref->n_tok * ref->n_out);
		printf("  llama.cpp %-20s vs Transformers max|d| %.3g rel %.3g; ours vs "
		       "Transformers %.3g rel %.3g; ours vs llama.cpp %.3g\n", name, a.max_abs,
		       a.rel, b.max_abs, b.rel, c.max_abs);
		NS_REQUIRE(b.max_abs < a.max_abs, "%s: ours is not closer to Transformers than "
			   "llama.cpp's", name);
	}
	free(cols);
	free(l);
}

static struct ns_weights *s_provider(const struct ns_model *m, const char *kind)
{
	struct ns_weights_fused_opts fo = { .n_threads = 2 };
	struct ns_weights *w = NULL;
	char err[NS_ERR_LEN];
	int rc;

	if (!strcmp(kind, "ref"))
		rc = ns_weights_ref_new(m, &w, err, sizeof(err));
	else
		rc = ns_weights_fused_new(m, &fo, &w, err, sizeof(err));
	NS_REQUIRE(rc == 0, "provider %s: %s", kind, err);
	return w;
}

int main(int argc, char **argv)
{
	struct ns_vision_opts vo = { .n_threads = 2 };
	struct s_run oracle_px = { 0 }, ours_px = { 0 }, chunked = { 0 };
	char rel[512], path[4096], err[NS_ERR_LEN];
	struct ns_model *m;
	struct ns_weights *w;
	struct ns_vision *v;
	const struct ns_vision_hparams *hp;
	struct s_ref ref = { 0 };
	int fails = 0;

	ns_test_require_oracle();
	atexit(ns_test_scratch_remove);
	NS_REQUIRE(argc == 5 && !strcmp(argv[3], "--provider"),
		   "usage: %s DIR MMPROJ --provider ref|fused", argv[0]);
	NS_REQUIRE(ns_model_open(ns_test_oracle_path(path, sizeof(path), argv[2]), &m, err,
				 sizeof(err)) == 0, "%s", err);
	w = s_provider(m, argv[4]);
	NS_REQUIRE(ns_vision_new(m, w, &vo, &v, err, sizeof(err)) == 0, "%s", err);
	hp = ns_vision_hparams(v);
	ref.n_patches = 16;
	ref.n_tok = 4;
	ref.d = hp->n_embd;
	ref.n_out = hp->n_embd_out;
	ref.n_ds = hp->n_deepstack;
	ref.patch_dim = 3ull * hp->temporal * hp->patch * hp->patch;
	printf("%s (%s): d %u, %u layers, %u heads, n_ff %u, out %u, pos grid %ux%u, %u deepstack\n",
	       argv[2], argv[4], hp->n_embd, hp->n_layer, hp->n_head, hp->n_ff, hp->n_embd_out,
	       hp->pos_side, hp->pos_side, hp->n_deepstack);
#define S_F32(field, file, n) \
	(snprintf(rel, sizeof(rel), "%s/" file, argv[1]), ref.field = vt_read_f32(rel, n))
	S_F32(pixels, "image.pixel_values.f32", ref.n_patches * ref.patch_dim);
	S_F32(last, "vision.last_hidden_state.f32", ref.n_patches * ref.d);
	S_F32(pooler, "vision.pooler_output.f32", ref.n_tok * ref.n_out);
	if (ref.n_ds)
		S_F32(ds, "vision.deepstack_features_0.f32", ref.n_tok * ref.n_out);
#undef S_F32

	s_encode(v, &ref, ref.pixels, &oracle_px);
	fails += s_check_run("oracle pixel values:", &ref, &oracle_px);
	s_from_u8(v, argv[1], &ours_px, &ref);
	fails += s_check_run("image.u8 -> PNG -> ours:", &ref, &ours_px);

	/* one merge group per matmul: each weight read 4 times, results unchanged */
	ns_vision_destroy(&v);
	vo.n_batch = 4;
	NS_REQUIRE(ns_vision_new(m, w, &vo, &v, err, sizeof(err)) == 0, "%s", err);
	s_encode(v, &ref, ref.pixels, &chunked);
	NS_REQUIRE(!memcmp(chunked.embd, oracle_px.embd, ref.n_tok * ref.n_out * sizeof(float)) &&
		   !memcmp(chunked.last, oracle_px.last, ref.n_patches * ref.d * sizeof(float)),
		   "n_batch 4 changed the results");
	printf("  n_batch 4 (one merge group per matmul): bit-identical\n");

	s_llamacpp(argv[1], argv[2], &ref, &oracle_px);

	s_run_free(&oracle_px);
	s_run_free(&ours_px);
	s_run_free(&chunked);
	free(ref.pixels);
	free(ref.last);
	free(ref.pooler);
	free(ref.ds);
	ns_vision_destroy(&v);
	ns_weights_destroy(&w);
	ns_model_close(&m);
	if (fails)
		return 1;
	printf("ok\n");
	return 0;
}
