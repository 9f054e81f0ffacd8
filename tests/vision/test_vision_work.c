/* test_vision_work.c - ns_image_work_bytes (what the budgets count for an image) against the
 * heap an image's pass really takes: malloc and friends are interposed here and the peak of
 * live bytes (malloc_usable_size) is taken from the image file's open to its embeddings.
 *
 *   test_vision_work MMPROJ   (relative to NS_ORACLE_DIR)
 *
 * For images stored at their resized size (1024x1024: 1024 tokens, 4096 patches; 64x64 with
 * --min-pixels 4096: 4 tokens), the tower as nscompute runs it (fused weights, n_batch 0, 2
 * threads): the peak is at most the count for one image (tower + decode + its embeddings) and
 * at least half of it (a count that grew far past the allocations would show); the progress
 * hook (nscompute's heartbeat) is called through the pass, at each block of attention. Not under
 * ASan (its allocator is not interposable here). */
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "image_embed.h"
#include "model.h"
#include "ns_util.h"
#include "ns_test.h"
#include "vision.h"
#include "vt_util.h"
#include "weights_fused.h"

extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t a, size_t b);
extern void *__libc_realloc(void *p, size_t n);
extern void *__libc_memalign(size_t a, size_t n);
extern void __libc_free(void *p);

static int s_fails;
static int64_t s_live, s_peak; /* bytes; updated atomically (the pool's threads allocate too) */

static void s_add(void *p)
{
	int64_t now, old;

	if (!p)
		return;
	now = __atomic_add_fetch(&s_live, (int64_t)malloc_usable_size(p), __ATOMIC_RELAXED);
	old = __atomic_load_n(&s_peak, __ATOMIC_RELAXED);
	while (now > old && !__atomic_compare_exchange_n(&s_peak, &old, now, false,
							 __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

static void s_sub(void *p)
{
	if (p)
		__atomic_sub_fetch(&s_live, (int64_t)malloc_usable_size(p), __ATOMIC_RELAXED);
}

void *malloc(size_t n)
{
	void *p = __libc_malloc(n);

	s_add(p);
	return p;
}

void *calloc(size_t a, size_t b)
{
	void *p = __libc_calloc(a, b);

	s_add(p);
	return p;
}

void *realloc(void *p, size_t n)
{
	void *q;

	s_sub(p);
	q = __libc_realloc(p, n);
	s_add(q ? q : n ? p : NULL); /* a failed realloc keeps p */
	return q;
}

void *aligned_alloc(size_t a, size_t n)
{
	void *p = __libc_memalign(a, n);

	s_add(p);
	return p;
}

void *memalign(size_t a, size_t n)
{
	return aligned_alloc(a, n);
}

int posix_memalign(void **out, size_t a, size_t n)
{
	void *p = aligned_alloc(a, n);

	if (!p)
		return ENOMEM;
	*out = p;
	return 0;
}

void free(void *p)
{
	s_sub(p);
	__libc_free(p);
}

static uint64_t s_beats; /* progress calls (nscompute's heartbeat) */

static void s_progress(void *user)
{
	(void)user;
	s_beats++;
}

/* One image of w x h random pixels through the tower: its measured peak against the count. */
static void s_check(struct ns_vision *v, uint32_t w, uint32_t h, uint64_t min_pixels)
{
	const struct ns_vision_hparams *hp = ns_vision_hparams(v);
	struct ns_image_limits lim = { .min_pixels = min_pixels };
	const char *png = ns_test_scratch("vt_work", "png");
	struct ns_image_embedding e;
	struct ns_image_file *f = NULL;
	struct ns_image_plan plan;
	struct ns_image_work wk;
	uint8_t *rgb = malloc((size_t)w * h * 3);
	uint64_t one, rows, row;
	char err[NS_ERR_LEN];
	int64_t peak;

	NS_REQUIRE(rgb, "out of memory");
	srand(21);
	for (size_t i = 0; i < (size_t)w * h * 3; i++)
		rgb[i] = (uint8_t)(rand() >> 7);
	vt_write_png(png, rgb, w, h, NULL, 0);
	free(rgb);
	__atomic_store_n(&s_peak, __atomic_load_n(&s_live, __ATOMIC_RELAXED), __ATOMIC_RELAXED);
	int64_t base = __atomic_load_n(&s_live, __ATOMIC_RELAXED);

	NS_REQUIRE(ns_image_embed_plan(hp, png, &lim, &f, &plan, err, sizeof(err)) == 0, "%s",
		   err);
	NS_REQUIRE(plan.width == w && plan.height == h, "%ux%u is resized to %ux%u", w, h,
		   plan.width, plan.height);
	s_beats = 0;
	NS_REQUIRE(ns_image_embed(v, f, &plan, &lim, &e, err, sizeof(err)) == 0, "%s", err);
	/* progress at least after the decode, the pixels, the patch kernel, each block of 128
	 * queries of each head of each layer and each of the layers' 4 matmuls */
	uint64_t want = 3 + (uint64_t)hp->n_layer * (hp->n_head * ((plan.n_patches + 127) / 128) +
						    4);
	printf("%ux%u: %llu progress calls (at least %llu)\n", w, h,
	       (unsigned long long)s_beats, (unsigned long long)want);
	NS_EXPECT(s_fails, s_beats >= want, "%llu progress calls, fewer than %llu",
		  (unsigned long long)s_beats, (unsigned long long)want);
	peak = __atomic_load_n(&s_peak, __ATOMIC_RELAXED) - base;
	ns_image_embedding_free(&e);
	ns_image_close(&f);
	/* the count for one image of this size: n_ctx = its tokens; less the prompt's rows,
	 * which nscompute allocates after the tower (compute_image.c), not ns_image_embed */
	NS_REQUIRE(ns_image_work_bytes(hp, &lim, (uint32_t)plan.n_tokens, 1, &wk) == 0,
		   "overflow");
	row = (uint64_t)hp->n_embd_out * (1 + hp->n_deepstack) * sizeof(float);
	rows = plan.n_tokens * (row + 3 * sizeof(int32_t) + 1);
	one = wk.total - rows;
	printf("%ux%u: %llu tokens, %llu patches: peak %lld bytes, counted %llu (tower %llu, "
	       "decode %llu, embeddings %llu): %.2f\n", w, h,
	       (unsigned long long)plan.n_tokens, (unsigned long long)plan.n_patches,
	       (long long)peak, (unsigned long long)one, (unsigned long long)wk.tower,
	       (unsigned long long)wk.decode, (unsigned long long)(wk.embeddings - rows),
	       (double)peak / (double)one);
	NS_EXPECT(s_fails, wk.max_tokens == plan.n_tokens, "counted %llu tokens, the image is %llu",
		 (unsigned long long)wk.max_tokens, (unsigned long long)plan.n_tokens);
	NS_EXPECT(s_fails, peak > 0 && (uint64_t)peak <= one, "peak %lld over the count %llu",
		 (long long)peak, (unsigned long long)one);
	NS_EXPECT(s_fails, (uint64_t)peak >= one / 2, "peak %lld under half the count %llu",
		 (long long)peak, (unsigned long long)one);
}

int main(int argc, char **argv)
{
	struct ns_weights_fused_opts fo = { .n_threads = 2 };
	struct ns_vision_opts vo = { .n_threads = 2, .progress = s_progress };
	/* n_batch 0: as nscompute */
	struct ns_model *m = NULL;
	struct ns_weights *w = NULL;
	struct ns_vision *v = NULL;
	char path[4096], err[NS_ERR_LEN];

	ns_test_require_oracle();
	atexit(ns_test_scratch_remove);
	NS_REQUIRE(argc == 2, "usage: %s MMPROJ", argv[0]);
	NS_REQUIRE(ns_model_open(ns_test_oracle_path(path, sizeof(path), argv[1]), &m, err,
				 sizeof(err)) == 0, "%s", err);
	NS_REQUIRE(ns_weights_fused_new(m, &fo, &w, err, sizeof(err)) == 0, "%s", err);
	NS_REQUIRE(ns_vision_new(m, w, &vo, &v, err, sizeof(err)) == 0, "%s", err);
	s_check(v, 1024, 1024, 0);
	s_check(v, 64, 64, 4096);
	ns_vision_destroy(&v);
	ns_weights_destroy(&w);
	ns_model_close(&m);
	printf("%s\n", s_fails ? "FAIL" : "ok");
	return s_fails ? 1 : 0;
}
