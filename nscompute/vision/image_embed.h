/* image_embed.h - an image file to the text model's input: the C API a multimodal prompt uses.
 *
 * Two steps, so that nothing heavy happens before an image is known to be acceptable:
 *
 *   ns_image_embed_plan(hp, path, lim, &file, &plan)
 *       reads the file and its header only, and plans it for the tower whose hyperparameters
 *       are hp (ns_vision_hparams_load reads them from the mmproj's metadata alone): the tokens
 *       it becomes and its grid. Bad images (not PNG/JPEG/WebP, truncated header, 0x0, over
 *       NS_IMAGE_MAX_PIXELS, an aspect ratio over 200, more than lim->max_tokens tokens) are
 *       refused here with one line: no pixel decoded, no weight read.
 *   ns_image_embed(v, file, &plan, lim, &e)
 *       decodes, preprocesses (image_prep.h) and runs the tower (vision.h): e.embd holds the
 *       n_tokens embeddings that replace the image's placeholder tokens, e.deepstack the
 *       features Qwen3-VL adds to the first n_deepstack text layers' hidden states at those
 *       positions.
 *
 * Position ids: Transformers' get_rope_index takes image_grid_thw = (plan.grid_t, plan.grid_h,
 * plan.grid_w), in patches; the text model's M-RoPE sees the image as grid_t x (grid_h / merge)
 * x (grid_w / merge) tokens, row-major, and text after it resumes past the larger of those.
 *
 * Ownership: plan gives *file (ns_image_close). ns_image_embed fills e with malloc'd arrays
 * the caller frees with ns_image_embedding_free. The tower is borrowed. Errors are negative
 * errnos with one line in err. */
#ifndef NS_IMAGE_EMBED_H
#define NS_IMAGE_EMBED_H

#include <stddef.h>
#include <stdint.h>

#include "image.h"
#include "image_prep.h"
#include "vision.h"

struct ns_image_embedding {
	struct ns_image_plan plan; /* n_tokens, grid (t, h, w) in patches, resized size */
	uint32_t n_embd;           /* the text model's width (the mmproj's projection_dim) */
	uint32_t n_deepstack;
	float *embd;               /* (n_tokens, n_embd) */
	float *deepstack;          /* (n_deepstack, n_tokens, n_embd), NULL when n_deepstack 0 */
};

/* lim may be NULL (the processor's defaults, no token cap). */
int ns_image_embed_plan(const struct ns_vision_hparams *hp, const char *path,
			const struct ns_image_limits *lim, struct ns_image_file **file,
			struct ns_image_plan *plan, char *err, size_t errlen);

/* The plan of an image already open (for callers holding the bytes). */
int ns_image_embed_plan_file(const struct ns_vision_hparams *hp, const struct ns_image_file *f,
			     const struct ns_image_limits *lim, struct ns_image_plan *plan,
			     char *err, size_t errlen);

/* The same lim as the plan's. */
int ns_image_embed(struct ns_vision *v, const struct ns_image_file *file,
		   const struct ns_image_plan *plan, const struct ns_image_limits *lim,
		   struct ns_image_embedding *e, char *err, size_t errlen);

/* What a prompt's images take in nscompute beyond the tower's weights (the budgets count it:
 * nsctl's fixed set), for images under lim (NULL: the processor's defaults), at most
 * max_images of them and n_ctx tokens in all (the engine refuses more):
 *   max_tokens, n_patches: the largest image the limits let through (one frame)
 *   tower:      ns_vision_work_bytes for it + its pixel values (n_patches x patch_dim floats)
 *   decode:     its file (held until its tower pass ends) and its decoded RGB, for an image
 *               stored at that size (raw pixels + 1/64 for the container)
 *   embeddings: every image's embeddings and DeepStack features, held until the decoder
 *               consumes them (n_image_tokens x n_embd_out x (1 + n_deepstack) floats), and
 *               the prompt's rows of them with their positions (compute_image.c: n_ctx rows)
 * Not counted: what an image stored larger than it is resized to takes beyond that (its
 * bigger file and decoded pixels, and the resize's output; freed before the tower runs), and
 * the image codecs' own buffers. 0, or -EOVERFLOW. */
struct ns_image_work {
	uint64_t max_tokens;
	uint64_t n_patches;
	uint64_t tower;
	uint64_t decode;
	uint64_t embeddings;
	uint64_t total;
};
int ns_image_work_bytes(const struct ns_vision_hparams *hp, const struct ns_image_limits *lim,
			uint32_t n_ctx, uint32_t max_images, struct ns_image_work *w);

void ns_image_embedding_free(struct ns_image_embedding *e);


#endif
