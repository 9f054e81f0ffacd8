/* test_cfwd_mm.c - test_cfwd's section 9: image prompts (ns_fwd_eval_mm) through the CUDA pass
 * against the CPU pass, and against Transformers' logits of the oracle's image prompt.
 *
 * For a model with M-RoPE (qwen3vl, qwen3vlmoe, qwen35, qwen35moe with rope sections):
 *   a. a synthetic image call: the 37-token prompt with rows 6..29 an image of 1 x 4 x 6
 *      tokens (height and width positions differ, and the text after it resumes at 12, not
 *      30), its embeddings and DeepStack features random at the scale of the model's token
 *      embeddings; every position's logits against the CPU pass's: bit-identical over the
 *      emulation (the kernels' twins are the CPU's code), printed over the kernels' sources
 *      (their prefill GEMM rounds x and W to f16, as section 8: on the chaotic
 *      tiny-qwen35moe that alone moves the text after the image to cosine 0.9985, max |diff|
 *      0.23, while the same call token by token is within 3.1e-5); streamed through 4 KiB
 *      slots bit-identical to all resident (emulation);
 *   b. the same rows as an image call of 30 rows in chunks of 4 (the image cut across
 *      chunks; the kernels' sources: token by token, every matmul a GEMV in f32), the text
 *      after it in one ns_fwd_eval, then 4 tokens one at a time (the decode path past the
 *      image, at the image's M-RoPE offset), the CPU fed the same way: bit-identical over the
 *      emulation, cosine >= 0.999 over the kernels' sources;
 *   c. with --mm MMPROJ DIR: the tower (on the host, as nscompute runs it) over
 *      DIR/image.pixel_values.f32 and DIR/seqA.json's vision.mm_tokens (placeholder 1000)
 *      through the CUDA pass token by token (every matmul a GEMV in f32): max |diff| <= 1e-4
 *      from DIR/mm.logits.f32 (Transformers); in one chunk too over the emulation (printed
 *      elsewhere, as section 8).
 * A model without M-RoPE: the CUDA pass refuses an image call as the CPU's does. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "cfwd.h"
#include "forward.h"
#include "hparams.h"
#include "json_ints.h"
#include "model.h"
#include "ns_test.h"
#include "nscuda.h"
#include "test_cfwd_mm.h"
#include "vision.h"
#include "vision_hparams.h"
#include "weights.h"
#include "weights_fused.h"

#define MM_IMG0 6        /* first image row of the synthetic call */
#define MM_GRID_H 4
#define MM_GRID_W 6
#define MM_SPLIT 30      /* b: the image call's rows */
#define MM_DECODE 4      /* b: tokens decoded one at a time after the prompt */
#define MM_MAX_ROWS 64
#define MM_ORACLE_ID 1000 /* the oracle's image placeholder (tests/vision/test_vision_mm.c) */
#define MM_REF_TOL 1e-4  /* section 8's */

static int s_fails;

#define MCHECK(cond, ...) NS_EXPECT(s_fails, cond, __VA_ARGS__)

/* The call's rows and what ns_fwd_eval_mm reads of them. */
struct s_call {
	int32_t tok[MM_MAX_ROWS];
	uint32_t n;
	int32_t pos[MM_MAX_ROWS * 3];
	uint8_t is_embd[MM_MAX_ROWS];
	float *embd;      /* (n, D) */
	float *ds;        /* (n_ds, n, D) or NULL */
	uint32_t n_ds;
};

static struct ns_fwd_mm s_mm(const struct s_call *c)
{
	return (struct ns_fwd_mm){ .is_embd = c->is_embd, .embd = c->embd, .deepstack = c->ds,
				   .n_deepstack = c->n_ds, .pos = c->pos };
}

/* CUDA (got) against CPU (want), rows positions each of V: bit-identical when exact, else
 * (check) cosine >= 0.999 at every position; the figures printed under what. */
static void s_compare(const char *what, const float *got, const float *want, uint32_t rows,
		      uint64_t V, bool exact, bool check)
{
	double worst = 1.0;

	for (uint32_t t = 0; t < rows; t++) {
		const double c = ns_test_cosine(got + t * V, want + t * V, V);

		worst = c < worst ? c : worst;
		MCHECK(exact || !check || c >= 0.999, "%s, position %u: cosine %.6f < 0.999", what,
		       t, c);
	}
	printf("images: %s: cosine >= %.6f, max |diff| %.3g over %u positions%s\n", what, worst,
	       ns_test_maxdiff(got, want, rows * V), rows, exact ? " (bit-identical required)" :
	       check ? "" : " (not checked: the f16 prefill GEMM)");
	MCHECK(!exact || !memcmp(got, want, rows * V * 4), "%s: not bit-identical to the CPU "
	       "pass (max |diff| %.3g)", what, ns_test_maxdiff(got, want, rows * V));
}

static uint64_t s_rng(uint64_t *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return *s >> 11;
}

/* a: rows MM_IMG0 .. + 24 an image of 1 x 4 x 6 tokens, random rows at the RMS of the
 * prompt's token embeddings (DeepStack features at half of it). */
static int s_synthetic(const struct ns_model *m, struct ns_weights *w, const struct ns_hparams *hp,
		       uint64_t V, const int32_t *toks, uint32_t n, struct s_call *c)
{
	const struct ns_model_tensor *te = ns_model_find(m, "token_embd.weight");
	const uint64_t D = hp->n_embd, n_img = MM_GRID_H * MM_GRID_W;
	const struct ns_fwd_mm_grid grid = { 1, MM_GRID_H, MM_GRID_W };
	const int32_t image_id = (int32_t)V - 1;
	int64_t ids[MM_MAX_ROWS];
	float *rows;
	double ss = 0;
	uint64_t seed = 77;
	char err[256];
	int32_t next;
	float rms;

	if (!te || n > MM_MAX_ROWS || MM_IMG0 + n_img > n)
		return -EINVAL;
	c->n = n;
	for (uint32_t i = 0; i < n; i++) {
		const bool img = i >= MM_IMG0 && i < MM_IMG0 + n_img;

		/* the placeholder only at the image's rows */
		c->tok[i] = img ? image_id : toks[i] == image_id ? image_id - 1 : toks[i];
		ids[i] = toks[i];
	}
	rows = calloc(n * D, 4);
	if (!rows || ns_weights_get_rows(w, (uint32_t)(te - m->tensors), ids, n, rows) < 0) {
		free(rows);
		return -EIO;
	}
	for (uint64_t i = 0; i < n * D; i++)
		ss += (double)rows[i] * rows[i];
	free(rows);
	rms = (float)sqrt(ss / (double)(n * D));
	c->n_ds = hp->n_deepstack;
	c->embd = calloc(n * D, 4);
	c->ds = c->n_ds ? calloc((uint64_t)c->n_ds * n * D, 4) : NULL;
	if (!c->embd || (c->n_ds && !c->ds))
		return -ENOMEM;
	/* uniform in [-sqrt 3, sqrt 3] * rms: that rms; only the image rows are read */
	for (uint64_t i = MM_IMG0 * D; i < (MM_IMG0 + n_img) * D; i++)
		c->embd[i] = rms * (float)((double)s_rng(&seed) / (1ull << 53) * 2 - 1) * 1.7320508f;
	for (uint32_t l = 0; l < c->n_ds; l++)
		for (uint64_t i = MM_IMG0 * D; i < (MM_IMG0 + n_img) * D; i++)
			c->ds[(uint64_t)l * n * D + i] =
				0.5f * rms * (float)((double)s_rng(&seed) / (1ull << 53) * 2 - 1);
	if (ns_fwd_mm_positions(c->tok, n, image_id, &grid, 1, 0, c->pos, c->is_embd, &next, err,
				sizeof(err)) < 0) {
		fprintf(stderr, "positions: %s\n", err);
		return -EINVAL;
	}
	printf("images: synthetic 1 x %u x %u image at rows %u..%u of %u, %u DeepStack level(s), "
	       "rms %.3g; text after it at position %d (cache %u)\n", MM_GRID_H, MM_GRID_W, MM_IMG0,
	       (unsigned)(MM_IMG0 + n_img - 1), n, c->n_ds, rms, c->pos[3 * (MM_IMG0 + n_img)],
	       (unsigned)(MM_IMG0 + n_img));
	return 0;
}

/* c: the oracle's image prompt, its rows from the tower over DIR's pixel values. */
static int s_oracle_call(const char *mmproj, const char *dir, uint64_t D, struct s_call *c)
{
	struct ns_vision_opts vo = { .n_threads = 2 };
	struct ns_model *pm = NULL;
	struct ns_weights *pw = NULL;
	struct ns_vision *v = NULL;
	const struct ns_vision_hparams *vh;
	struct ns_fwd_mm_grid grid;
	int64_t t64[MM_MAX_ROWS];
	char path[4096], rel[1024], err[512];
	float *px = NULL, *embd = NULL, *ds = NULL;
	size_t n = 0, len = 0;
	uint32_t n_img, k = 0;
	int32_t next;
	char *json;
	int rc = -EINVAL;

	snprintf(rel, sizeof(rel), "%s/seqA.json", dir);
	json = ns_test_read_file(ns_test_oracle_path(path, sizeof(path), rel), &len);
	if (!json || json_ints(json, "vision.mm_tokens", t64, MM_MAX_ROWS, &n) || !n) {
		fprintf(stderr, "%s: no vision.mm_tokens\n", path);
		free(json);
		return -EINVAL;
	}
	free(json);
	c->n = (uint32_t)n;
	for (size_t i = 0; i < n; i++)
		c->tok[i] = (int32_t)t64[i];
	if (ns_model_open(ns_test_oracle_path(path, sizeof(path), mmproj), &pm, err,
			  sizeof(err)) < 0 ||
	    ns_weights_fused_new(pm, NULL, &pw, err, sizeof(err)) < 0 ||
	    ns_vision_new(pm, pw, &vo, &v, err, sizeof(err)) < 0) {
		fprintf(stderr, "tower %s: %s\n", mmproj, err);
		goto out;
	}
	vh = ns_vision_hparams(v);
	/* the oracle's image: 4 x 4 patches, one frame */
	snprintf(rel, sizeof(rel), "%s/image.pixel_values.f32", dir);
	px = ns_test_read_file(ns_test_oracle_path(path, sizeof(path), rel), &len);
	if (vh->n_embd_out != D || !px ||
	    len != 16ull * 3 * vh->temporal * vh->patch * vh->patch * 4) {
		fprintf(stderr, "%s: %zu bytes, or the tower's width %u is not the model's %llu\n",
			path, len, vh->n_embd_out, (unsigned long long)D);
		goto out;
	}
	grid = (struct ns_fwd_mm_grid){ 1, 4 / vh->merge, 4 / vh->merge };
	n_img = grid.t * grid.h * grid.w;
	c->n_ds = vh->n_deepstack;
	embd = calloc((uint64_t)n_img * D, 4);
	ds = c->n_ds ? calloc((uint64_t)c->n_ds * n_img * D, 4) : NULL;
	c->embd = calloc(n * D, 4);
	c->ds = c->n_ds ? calloc((uint64_t)c->n_ds * n * D, 4) : NULL;
	if (!embd || !c->embd || (c->n_ds && (!ds || !c->ds))) {
		rc = -ENOMEM;
		goto out;
	}
	if (ns_vision_encode(v, px, 1, 4, 4, &(struct ns_vision_out){ embd, ds, NULL }) < 0 ||
	    ns_fwd_mm_positions(c->tok, c->n, MM_ORACLE_ID, &grid, 1, 0, c->pos, c->is_embd,
				&next, err, sizeof(err)) < 0) {
		fprintf(stderr, "tower or positions: %s %s\n", ns_vision_error(v), err);
		goto out;
	}
	for (uint32_t i = 0; i < c->n; i++) { /* the image's rows of the call */
		if (!c->is_embd[i])
			continue;
		memcpy(c->embd + i * D, embd + k * D, D * 4);
		for (uint32_t l = 0; l < c->n_ds; l++)
			memcpy(c->ds + ((uint64_t)l * c->n + i) * D,
			       ds + ((uint64_t)l * n_img + k) * D, D * 4);
		k++;
	}
	rc = k == n_img ? 0 : -EINVAL;
	printf("images: %s's image through the tower (host): %u tokens in %u rows, %u DeepStack "
	       "level(s)\n", dir, n_img, c->n, c->n_ds);
out:
	free(px);
	free(embd);
	free(ds);
	ns_vision_destroy(&v);
	ns_weights_destroy(&pw);
	ns_model_close(&pm);
	return rc;
}

/* The call's logits (all rows) through a pass made by mk: CPU (cuda NULL) or CUDA. */
static int s_run(const struct ns_model *m, struct ns_weights *w, const struct ns_fwd_opts *fo,
		 const struct ns_cfwd_opts *co, const struct s_call *c, float *out)
{
	struct ns_fwd_mm mm = s_mm(c);
	struct ns_fwd *f = NULL;
	char err[512];
	int rc = co ? ns_cfwd_new(m, w, co, &f, err, sizeof(err)) :
		      ns_fwd_new(m, w, fo, &f, err, sizeof(err));

	if (rc < 0) {
		fprintf(stderr, "images: %s pass: %s\n", co ? "cuda" : "cpu", err);
		return rc;
	}
	rc = ns_fwd_eval_mm(f, c->tok, c->n, &mm, out, true);
	if (rc < 0)
		fprintf(stderr, "images: %s eval: %s\n", co ? "cuda" : "cpu", ns_fwd_error(f));
	ns_fwd_destroy(&f);
	return rc;
}

/* b: an image call of MM_SPLIT rows in chunks of nb, the text after it in one call, then
 * MM_DECODE tokens one at a time; out (n + MM_DECODE, V). */
static int s_split(const struct ns_model *m, struct ns_weights *w, const struct ns_fwd_opts *fo,
		   const struct ns_cfwd_opts *co, const struct s_call *c, uint64_t V, uint32_t nb,
		   float *out)
{
	struct ns_fwd_opts f4 = *fo;
	struct ns_cfwd_opts c4 = co ? *co : (struct ns_cfwd_opts){ 0 };
	struct ns_fwd_mm mm = s_mm(c);
	struct ns_fwd *f = NULL;
	char err[512];
	int rc;

	f4.n_batch = c4.n_batch = nb;
	rc = co ? ns_cfwd_new(m, w, &c4, &f, err, sizeof(err)) :
		  ns_fwd_new(m, w, &f4, &f, err, sizeof(err));
	if (rc < 0) {
		fprintf(stderr, "images: split %s pass: %s\n", co ? "cuda" : "cpu", err);
		return rc;
	}
	rc = ns_fwd_eval_mm(f, c->tok, MM_SPLIT, &mm, out, true);
	if (rc == 0)
		rc = ns_fwd_eval(f, c->tok + MM_SPLIT, c->n - MM_SPLIT, out + MM_SPLIT * V, true);
	for (uint32_t i = 0; rc == 0 && i < MM_DECODE; i++)
		rc = ns_fwd_eval(f, &c->tok[i], 1, out + (c->n + i) * V, false);
	if (rc < 0)
		fprintf(stderr, "images: split %s eval: %s\n", co ? "cuda" : "cpu", ns_fwd_error(f));
	ns_fwd_destroy(&f);
	return rc;
}

/* c: the oracle's prompt through the CUDA pass in one chunk and token by token against
 * Transformers' DIR/mm.logits.f32. */
static void s_oracle(const struct ns_model *m, struct ns_weights *w, const struct ns_fwd_opts *fo,
		     const struct ns_cfwd_opts *o, uint64_t V, uint64_t D, const char *mmproj,
		     const char *dir, bool emulated)
{
	struct s_call c = { 0 };
	char path[4096], rel[1024];
	float *ref = NULL, *got = NULL, *cpu = NULL;
	size_t len = 0;

	if (s_oracle_call(mmproj, dir, D, &c) < 0) {
		MCHECK(0, "the oracle's image prompt (%s, %s) could not be made", mmproj, dir);
		goto out;
	}
	snprintf(rel, sizeof(rel), "%s/mm.logits.f32", dir);
	ref = ns_test_read_file(ns_test_oracle_path(path, sizeof(path), rel), &len);
	got = calloc((uint64_t)c.n * V, 4);
	cpu = calloc((uint64_t)c.n * V, 4);
	if (!ref || len != c.n * V * 4 || !got || !cpu) {
		MCHECK(0, "%s: %zu bytes, expected %llu", path, len,
		       (unsigned long long)(c.n * V * 4));
		goto out;
	}
	if (s_run(m, w, fo, NULL, &c, cpu) == 0)
		printf("images: cpu pass: max |diff| %.3g from Transformers\n",
		       ns_test_maxdiff(cpu, ref, c.n * V));
	for (int tbt = 0; tbt < 2; tbt++) {
		struct ns_cfwd_opts ro = *o;
		const bool check = tbt || emulated;
		double d;

		ro.n_batch = tbt ? 1 : 0;
		if (s_run(m, w, fo, &ro, &c, got) < 0) {
			MCHECK(0, "the oracle's image prompt through the CUDA pass failed");
			break;
		}
		d = ns_test_maxdiff(got, ref, c.n * V);
		printf("images: %s (Transformers, %u rows, %s): max |diff| %.3g%s\n", rel, c.n,
		       tbt ? "token by token" : "one chunk", d, check ? "" : " (not checked)");
		MCHECK(!check || d <= MM_REF_TOL, "%s (%s): max |diff| %.3g > %g", rel,
		       tbt ? "token by token" : "one chunk", d, MM_REF_TOL);
		if (!tbt && emulated)
			s_compare("the oracle's image prompt, one chunk, vs the cpu pass", got, cpu,
				  c.n, V, true, true);
	}
out:
	free(ref);
	free(got);
	free(cpu);
	free(c.embd);
	free(c.ds);
}

int cfwd_test_images(const struct ns_model *m, struct ns_weights *w,
		     const struct ns_cfwd_opts *o, const struct ns_fwd_opts *fo,
		     uint64_t V, const int32_t *toks, uint32_t n, bool kernels_only,
		     const char *mmproj, const char *dir)
{
	struct ns_hparams hp;
	const struct ns_arch *arch;
	struct ns_cuda_devinfo di;
	struct s_call c = { 0 };
	float *lc = NULL, *lg = NULL;
	char err[512];
	bool emulated;

	s_fails = 0;
	if (ns_hparams_load(m, &hp, err, sizeof(err)) < 0) {
		fprintf(stderr, "images: %s\n", err);
		return 1;
	}
	emulated = ns_cuda_device_info(0, &di, err, sizeof(err)) == 0 &&
		   !strcmp(di.name, "cpu-emulation") && !kernels_only;
	arch = ns_arch_find(hp.arch);
	if (!arch || !(arch->flags & NS_ARCH_MROPE) || !hp.rope_sections[0]) {
		/* the CUDA pass refuses an image call as the CPU's does (emulation: cheap) */
		if (emulated) {
			struct ns_fwd *f = NULL;
			int32_t pos[3] = { 0, 0, 0 };
			uint8_t img = 1;
			float row[1] = { 0 };
			struct ns_fwd_mm mm = { .is_embd = &img, .embd = row, .pos = pos };

			MCHECK(ns_cfwd_new(m, w, o, &f, err, sizeof(err)) == 0 &&
			       ns_fwd_eval_mm(f, toks, 1, &mm, NULL, false) == -EINVAL &&
			       ns_fwd_n_past(f) == 0, "a model without M-RoPE: the CUDA pass took "
			       "an image call (%s)", f ? ns_fwd_error(f) : err);
			ns_fwd_destroy(&f);
		}
		MCHECK(!mmproj, "--mm given for a model without M-RoPE images (%s)", hp.arch);
		return s_fails;
	}
	if (mmproj) /* c */
		s_oracle(m, w, fo, o, V, hp.n_embd, mmproj, dir, emulated);
	if (s_synthetic(m, w, &hp, V, toks, n, &c) < 0) {
		MCHECK(0, "the synthetic image call could not be made");
		goto out;
	}
	lc = calloc((uint64_t)(n + MM_DECODE) * V, 4);
	lg = calloc((uint64_t)(n + MM_DECODE) * V, 4);
	if (!lc || !lg)
		goto oom;
	/* a. all resident, then streamed through small slots */
	if (s_run(m, w, fo, NULL, &c, lc) < 0 || s_run(m, w, fo, o, &c, lg) < 0) {
		MCHECK(0, "the synthetic image call failed");
		goto out;
	}
	s_compare("image call, one chunk, all resident", lg, lc, n, V, emulated, !kernels_only);
	if (emulated) {
		struct ns_cfwd_opts so = *o;
		float *ls = calloc((uint64_t)n * V, 4);

		so.all_resident = false;
		so.stage_bytes = 4096;
		if (!ls)
			goto oom;
		MCHECK(s_run(m, w, fo, &so, &c, ls) == 0 && !memcmp(ls, lg, (uint64_t)n * V * 4),
		       "image call: streamed logits differ from all-resident ones");
		free(ls);
	}
	/* b. the image call in chunks of 4 (the kernels' sources: of 1, every matmul a GEMV in
	 * f32), the text after it, then decode steps */
	memset(lc, 0, (uint64_t)(n + MM_DECODE) * V * 4);
	memset(lg, 0, (uint64_t)(n + MM_DECODE) * V * 4);
	if (s_split(m, w, fo, NULL, &c, V, kernels_only ? 1 : 4, lc) < 0 ||
	    s_split(m, w, fo, o, &c, V, kernels_only ? 1 : 4, lg) < 0) {
		MCHECK(0, "the image call in chunks, then text, failed");
		goto out;
	}
	s_compare(kernels_only ? "image call token by token, text after it, 4 decode steps" :
		  "image call in chunks of 4, text after it, 4 decode steps", lg, lc,
		  n + MM_DECODE, V, emulated, true);
	goto out;
oom:
	MCHECK(0, "out of memory");
out:
	free(lc);
	free(lg);
	free(c.embd);
	free(c.ds);
	return s_fails;
}
