/* test_vision_mm - a multimodal prompt through the decoder (ns_fwd_eval_mm) against
 * Transformers' logits of the same prompt with the same image.
 *
 *   test_vision_mm MODEL MMPROJ DIR --provider ref|fused
 *
 * The tower (the mmproj) turns DIR/image.pixel_values.f32 into the image's embeddings and
 * DeepStack features; the prompt DIR/seqA.json's vision.mm_tokens (image placeholder 1000 x 4
 * between 1002 / 1003) gets its M-RoPE positions from ns_fwd_mm_positions; the logits of every
 * row must equal DIR/mm.logits.f32 within 1e-3 (the bound; the tower alone is within
 * 1e-4 relative, tests/vision/test_vision_tower). Then, bit-identical to the whole: chunks of 3
 * rows (an image cut across chunks) and the prompt in two calls, the image call then the text
 * after it through ns_fwd_eval (the M-RoPE offset carried over). Refusals: a run of the
 * placeholder of the wrong length, a model without M-RoPE, DeepStack features that do not
 * match, a cut inside the image. Exit 0 pass, 1 fail, 77 skip (oracle missing outside CI). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>

#include "forward.h"
#include "model.h"
#include "ns_test.h"
#include "ns_util.h"
#include "vision.h"
#include "vision_hparams.h"
#include "vt_util.h"
#include "weights.h"
#include "weights_fused.h"

#define IMAGE_ID 1000
#define MM_TOL 1e-3

struct s_prompt {
	int32_t tok[64];
	uint32_t n;
	int32_t pos[64 * 3];
	uint8_t is_embd[64];
	float *embd;      /* (n, n_embd) */
	float *deepstack; /* (n_ds, n, n_embd) or NULL */
	uint32_t n_ds;
};

static struct ns_weights *s_provider(const struct ns_model *m, const char *kind)
{
	struct ns_weights_fused_opts fo = { .n_threads = 2 };
	struct ns_weights *w = NULL;
	char err[NS_ERR_LEN];
	int rc = !strcmp(kind, "ref") ? ns_weights_ref_new(m, &w, err, sizeof(err)) :
		 ns_weights_fused_new(m, &fo, &w, err, sizeof(err));

	NS_REQUIRE(rc == 0, "provider %s: %s", kind, err);
	return w;
}

static struct ns_fwd *s_fwd(const struct ns_model *m, struct ns_weights *w, uint32_t n_batch)
{
	struct ns_fwd_opts o = { .n_ctx = 64, .n_batch = n_batch };
	struct ns_fwd *f = NULL;
	char err[NS_ERR_LEN];

	NS_REQUIRE(ns_fwd_new(m, w, &o, &f, err, sizeof(err)) == 0, "forward: %s", err);
	return f;
}

/* The tower over the oracle's pixel values: the embeddings of the image's rows. */
static void s_image(const char *mmproj, const char *provider, const char *dir, uint32_t n_embd,
		    struct s_prompt *p)
{
	struct ns_vision_opts vo = { .n_threads = 2 };
	struct ns_model *m = NULL;
	struct ns_weights *w;
	struct ns_vision *v = NULL;
	const struct ns_vision_hparams *hp;
	char err[NS_ERR_LEN], path[4096], rel[512];
	float *px, *embd, *ds = NULL;
	struct ns_fwd_mm_grid grid;
	int32_t next;
	uint32_t n_img, k = 0;

	NS_REQUIRE(ns_model_open(ns_test_oracle_path(path, sizeof(path), mmproj), &m, err,
				 sizeof(err)) == 0, "%s", err);
	w = s_provider(m, provider);
	NS_REQUIRE(ns_vision_new(m, w, &vo, &v, err, sizeof(err)) == 0, "%s", err);
	hp = ns_vision_hparams(v);
	NS_REQUIRE(hp->n_embd_out == n_embd, "mmproj width %u, model %u", hp->n_embd_out, n_embd);
	snprintf(rel, sizeof(rel), "%s/image.pixel_values.f32", dir);
	px = vt_read_f32(rel, 16ull * 3 * hp->temporal * hp->patch * hp->patch);
	grid = (struct ns_fwd_mm_grid){ 1, 4 / hp->merge, 4 / hp->merge };
	n_img = grid.t * grid.h * grid.w;
	embd = calloc((size_t)n_img * n_embd, sizeof(float));
	p->n_ds = hp->n_deepstack;
	if (p->n_ds)
		ds = calloc((size_t)p->n_ds * n_img * n_embd, sizeof(float));
	NS_REQUIRE(embd && (!p->n_ds || ds), "out of memory");
	NS_REQUIRE(ns_vision_encode(v, px, 1, 4, 4, &(struct ns_vision_out){ embd, ds, NULL }) ==
		   0, "encode: %s", ns_vision_error(v));
	NS_REQUIRE(ns_fwd_mm_positions(p->tok, p->n, IMAGE_ID, &grid, 1, 0, p->pos, p->is_embd,
				       &next, err, sizeof(err)) == 0, "positions: %s", err);
	/* the image's rows of the call: (n, n_embd), and (n_ds, n, n_embd) */
	p->embd = calloc((size_t)p->n * n_embd, sizeof(float));
	p->deepstack = p->n_ds ? calloc((size_t)p->n_ds * p->n * n_embd, sizeof(float)) : NULL;
	NS_REQUIRE(p->embd && (!p->n_ds || p->deepstack), "out of memory");
	for (uint32_t i = 0; i < p->n; i++) {
		if (!p->is_embd[i])
			continue;
		memcpy(p->embd + (size_t)i * n_embd, embd + (size_t)k * n_embd,
		       n_embd * sizeof(float));
		for (uint32_t l = 0; l < p->n_ds; l++)
			memcpy(p->deepstack + ((size_t)l * p->n + i) * n_embd,
			       ds + ((size_t)l * n_img + k) * n_embd, n_embd * sizeof(float));
		k++;
	}
	NS_REQUIRE(k == n_img, "%u image rows, %u tokens", k, n_img);
	printf("image: %u tokens (grid 1 x %u x %u), %u DeepStack level(s); positions", n_img,
	       grid.h, grid.w, p->n_ds);
	for (uint32_t i = 0; i < p->n; i++)
		printf(" %d%s", p->pos[3 * i], p->is_embd[i] ? "*" : "");
	printf(", next %d\n", next);
	free(px);
	free(embd);
	free(ds);
	ns_vision_destroy(&v);
	ns_weights_destroy(&w);
	ns_model_close(&m);
}

static struct ns_fwd_mm s_mm(const struct s_prompt *p)
{
	return (struct ns_fwd_mm){ .is_embd = p->is_embd, .embd = p->embd,
				   .deepstack = p->deepstack, .n_deepstack = p->n_ds,
				   .pos = p->pos };
}

/* The refusals: each one line, the sequence untouched. */
static int s_refusals(struct ns_fwd *f, const struct s_prompt *p, const char *plain_model,
		      const char *provider)
{
	struct ns_fwd_mm mm = s_mm(p);
	struct ns_fwd_mm_grid wrong = { 1, 3, 1 }, grid = { 1, 2, 2 };
	struct ns_model *m = NULL;
	struct ns_weights *w;
	struct ns_fwd *g;
	char err[NS_ERR_LEN], path[4096];
	int32_t pos[64 * 3], next;
	uint8_t is_embd[64];
	int bad = 0;

	if (ns_fwd_mm_positions(p->tok, p->n, IMAGE_ID, &wrong, 1, 0, pos, is_embd, &next, err,
				sizeof(err)) != -EINVAL || !strstr(err, "is 3 tokens") ||
	    !strstr(err, "is 4 long")) {
		fprintf(stderr, "FAIL: a 4-token run for a 3-token image: %s\n", err);
		bad++;
	}
	if (ns_fwd_mm_positions(p->tok, p->n, IMAGE_ID, &grid, 0, 0, pos, is_embd, &next, err,
				sizeof(err)) != -EINVAL) {
		fprintf(stderr, "FAIL: an image run without an image accepted\n");
		bad++;
	}
	mm.n_deepstack = p->n_ds + 1;
	if (!mm.deepstack)
		mm.deepstack = p->embd;
	if (ns_fwd_eval_mm(f, p->tok, p->n, &mm, NULL, false) != -EINVAL ||
	    ns_fwd_n_past(f) != 0) {
		fprintf(stderr, "FAIL: DeepStack levels that do not match accepted\n");
		bad++;
	}
	mm = s_mm(p);
	/* past the image: taken (a recurrent state goes back only to 0 anyway) */
	if (ns_fwd_eval_mm(f, p->tok, p->n, &mm, NULL, false) != 0 ||
	    ns_fwd_truncate(f, 4) != -EINVAL ||
	    (ns_fwd_truncate(f, p->n - 1) != 0 && !strstr(ns_fwd_error(f), "recurrent")) ||
	    ns_fwd_truncate(f, 0) != 0) {
		fprintf(stderr, "FAIL: cuts: inside the image refused, past it and to 0 taken: %s\n",
			ns_fwd_error(f));
		bad++;
	}
	NS_REQUIRE(ns_model_open(ns_test_oracle_path(path, sizeof(path), plain_model), &m, err,
				 sizeof(err)) == 0, "%s", err);
	w = s_provider(m, provider);
	g = s_fwd(m, w, 0);
	if (ns_fwd_eval_mm(g, p->tok, p->n, &mm, NULL, false) != -EINVAL) {
		fprintf(stderr, "FAIL: an image given to a model without M-RoPE (%s)\n",
			plain_model);
		bad++;
	}
	printf("refused: a run of the wrong length, DeepStack mismatch, a cut inside the image, "
	       "an image for %s (%s)\n", plain_model, ns_fwd_error(g));
	ns_fwd_destroy(&g);
	ns_weights_destroy(&w);
	ns_model_close(&m);
	return bad;
}

int main(int argc, char **argv)
{
	struct s_prompt p = { 0 };
	struct ns_model *m = NULL;
	struct ns_weights *w;
	struct ns_fwd *f;
	struct ns_fwd_mm mm;
	char err[NS_ERR_LEN], path[4096], rel[512];
	float *want, *got, *chunked, *split;
	uint32_t n_vocab, n_embd, cut = 0;
	struct vt_diff d;
	int bad = 0;

	NS_REQUIRE(argc == 6 && !strcmp(argv[4], "--provider"),
		   "usage: %s MODEL MMPROJ DIR --provider ref|fused", argv[0]);
	ns_test_require_oracle();
	NS_REQUIRE(ns_model_open(ns_test_oracle_path(path, sizeof(path), argv[1]), &m, err,
				 sizeof(err)) == 0, "%s", err);
	w = s_provider(m, argv[5]);
	f = s_fwd(m, w, 0);
	n_vocab = ns_fwd_n_vocab(f);
	n_embd = (uint32_t)ns_model_find(m, "token_embd.weight")->ne[0];
	p.n = vt_mm_tokens(argv[3], p.tok, 64);
	s_image(argv[2], argv[5], argv[3], n_embd, &p);
	snprintf(rel, sizeof(rel), "%s/mm.logits.f32", argv[3]);
	want = vt_read_f32(rel, (size_t)p.n * n_vocab);
	got = calloc((size_t)p.n * n_vocab, sizeof(float));
	chunked = calloc((size_t)p.n * n_vocab, sizeof(float));
	split = calloc((size_t)p.n * n_vocab, sizeof(float));
	NS_REQUIRE(got && chunked && split, "out of memory");

	/* 1. the whole prompt in one call */
	mm = s_mm(&p);
	NS_REQUIRE(ns_fwd_eval_mm(f, p.tok, p.n, &mm, got, true) == 0, "%s", ns_fwd_error(f));
	d = vt_diff(got, want, (size_t)p.n * n_vocab);
	printf("%s [%s] + image: %u rows, max abs diff vs transformers %.3g (tol %.0e) %s\n",
	       argv[1], argv[5], p.n, d.max_abs, MM_TOL, d.max_abs <= MM_TOL ? "ok" : "FAIL");
	bad += !(d.max_abs <= MM_TOL);

	/* 2. the image call up to the end of the image, then the text after it */
	while (cut < p.n && !(cut > 0 && p.is_embd[cut - 1] && !p.is_embd[cut]))
		cut++;
	NS_REQUIRE(cut > 0 && cut < p.n, "no text after the image");
	ns_fwd_reset(f);
	NS_REQUIRE(ns_fwd_eval_mm(f, p.tok, cut, &mm, split, true) == 0 &&
		   ns_fwd_eval(f, p.tok + cut, p.n - cut, split + (size_t)cut * n_vocab, true) == 0,
		   "split: %s", ns_fwd_error(f));
	/* 3. chunks of 3 rows: the image cut across two chunks */
	ns_fwd_destroy(&f);
	f = s_fwd(m, w, 3);
	NS_REQUIRE(ns_fwd_eval_mm(f, p.tok, p.n, &mm, chunked, true) == 0, "chunked: %s",
		   ns_fwd_error(f));
	if (memcmp(split, got, (size_t)p.n * n_vocab * sizeof(float)) ||
	    memcmp(chunked, got, (size_t)p.n * n_vocab * sizeof(float))) {
		fprintf(stderr, "FAIL: image call then text (%s), chunks of 3 (%s)\n",
			memcmp(split, got, (size_t)p.n * n_vocab * 4) ? "differs" : "same",
			memcmp(chunked, got, (size_t)p.n * n_vocab * 4) ? "differ" : "same");
		bad++;
	} else {
		printf("  image call then the text after it (%u + %u rows), chunks of 3: "
		       "bit-identical\n", cut, p.n - cut);
	}
	ns_fwd_reset(f);
	bad += s_refusals(f, &p, "tiny/tiny-qwen3-F32.gguf", argv[5]);

	free(want);
	free(got);
	free(chunked);
	free(split);
	free(p.embd);
	free(p.deepstack);
	ns_fwd_destroy(&f);
	ns_weights_destroy(&w);
	ns_model_close(&m);
	return bad ? 1 : 0;
}
