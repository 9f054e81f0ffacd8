/* image_embed.c - see image_embed.h: file -> plan -> pixels -> tower. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "image_embed.h"
#include "ns_util.h"
#include "vision_impl.h"

int ns_image_embed_plan_file(const struct ns_vision_hparams *hp, const struct ns_image_file *f,
			     const struct ns_image_limits *lim, struct ns_image_plan *plan,
			     char *err, size_t errlen)
{
	struct ns_image_geom g;
	char why[NS_ERR_LEN];
	int rc;

	ns_vision_image_geom(hp, lim, &g);
	rc = ns_image_plan(&g, f->width, f->height, plan, why, sizeof(why));
	if (rc < 0)
		ns_errf(err, errlen, "%s: %s", f->path, why);
	return rc;
}

int ns_image_embed_plan(const struct ns_vision_hparams *hp, const char *path,
			const struct ns_image_limits *lim, struct ns_image_file **file,
			struct ns_image_plan *plan, char *err, size_t errlen)
{
	int rc = ns_image_open(path, file, err, errlen);

	if (rc == 0 && (rc = ns_image_embed_plan_file(hp, *file, lim, plan, err, errlen)) < 0)
		ns_image_close(file);
	return rc;
}

int ns_image_embed(struct ns_vision *v, const struct ns_image_file *file,
		   const struct ns_image_plan *plan, const struct ns_image_limits *lim,
		   struct ns_image_embedding *e, char *err, size_t errlen)
{
	const struct ns_vision_hparams *hp = ns_vision_hparams(v);
	struct ns_vision_out out = { 0 };
	struct ns_image img = { 0 };
	struct ns_image_geom g;
	float *pixels = NULL;
	int rc;

	memset(e, 0, sizeof(*e));
	e->plan = *plan;
	e->n_embd = hp->n_embd_out;
	e->n_deepstack = hp->n_deepstack;
	ns_vision_image_geom(hp, lim, &g);
	rc = ns_image_decode(file, &img, err, errlen);
	if (rc == 0 && v->progress) /* a large file's decoding and resize take seconds */
		v->progress(v->progress_user);
	if (rc == 0)
		rc = ns_image_preprocess(&img, &g, plan, &pixels, err, errlen);
	if (rc == 0 && v->progress)
		v->progress(v->progress_user);
	ns_image_free(&img);
	if (rc < 0)
		return rc;
	e->embd = ns_vision_falloc(plan->n_tokens, e->n_embd);
	if (e->n_deepstack && plan->n_tokens <= UINT64_MAX / e->n_deepstack)
		e->deepstack = ns_vision_falloc(e->n_deepstack * plan->n_tokens, e->n_embd);
	if (!e->embd || (e->n_deepstack && !e->deepstack)) {
		ns_errf(err, errlen, "%s: out of memory for %llu image embeddings", file->path,
			(unsigned long long)plan->n_tokens);
		rc = -ENOMEM;
	} else {
		out.embd = e->embd;
		out.deepstack = e->deepstack;
		rc = ns_vision_encode(v, pixels, plan->grid_t, plan->grid_h, plan->grid_w, &out);
		if (rc < 0)
			ns_errf(err, errlen, "%s: %s", file->path, ns_vision_error(v));
	}
	free(pixels);
	if (rc < 0)
		ns_image_embedding_free(e);
	return rc;
}

int ns_image_work_bytes(const struct ns_vision_hparams *hp, const struct ns_image_limits *lim,
			uint32_t n_ctx, uint32_t max_images, struct ns_image_work *w)
{
	const uint64_t f = (uint64_t)hp->patch * hp->merge, group = (uint64_t)hp->merge * hp->merge;
	const uint64_t patch_dim = 3ull * hp->temporal * hp->patch * hp->patch;
	const uint64_t row = (uint64_t)hp->n_embd_out * (1 + hp->n_deepstack) * sizeof(float);
	struct ns_image_geom g;
	uint64_t held, px, rows, raw;

	memset(w, 0, sizeof(*w));
	ns_vision_image_geom(hp, lim, &g);
	if (!f)
		return -EOVERFLOW;
	/* smart resize keeps an image within max_pixels (and max_tokens' pixels): the largest
	 * is max_pixels / f^2 tokens, and the engine takes no more than n_ctx */
	w->max_tokens = g.max_pixels / (f * f);
	if (g.max_tokens && g.max_tokens < w->max_tokens)
		w->max_tokens = g.max_tokens;
	if (w->max_tokens > n_ctx)
		w->max_tokens = n_ctx;
	w->n_patches = w->max_tokens * group;
	/* every image's embeddings at once, n_ctx tokens of them at most */
	held = (uint64_t)max_images * w->max_tokens;
	if (held > n_ctx)
		held = n_ctx;
	w->tower = ns_vision_work_bytes(hp, w->n_patches, 0);
	if (w->tower == UINT64_MAX || ns_mul_u64_overflow(w->n_patches, patch_dim * sizeof(float),
							    &px) ||
	    ns_add_u64_overflow(w->tower, px, &w->tower) ||
	    ns_mul_u64_overflow(held, row, &w->embeddings) ||
	    /* nsc_images_eval's rows: embeddings, DeepStack, 3 int32 positions, a flag */
	    ns_mul_u64_overflow(n_ctx, row + 3 * sizeof(int32_t) + 1, &rows) ||
	    ns_add_u64_overflow(w->embeddings, rows, &w->embeddings) ||
	    /* RGB of the image at its size: decoded, and its file at most that + 1/64 */
	    ns_mul_u64_overflow(w->n_patches, 3ull * hp->patch * hp->patch, &raw) ||
	    ns_mul_u64_overflow(raw, 2, &w->decode) ||
	    ns_add_u64_overflow(w->decode, raw / 64, &w->decode) ||
	    ns_add_u64_overflow(w->tower, w->embeddings, &w->total) ||
	    ns_add_u64_overflow(w->total, w->decode, &w->total))
		return -EOVERFLOW;
	return 0;
}

void ns_image_embedding_free(struct ns_image_embedding *e)
{
	if (!e)
		return;
	free(e->embd);
	free(e->deepstack);
	e->embd = NULL;
	e->deepstack = NULL;
}
