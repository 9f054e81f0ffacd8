/* image_prep.h - an RGB image to the vision tower's input, as the Hugging Face Qwen2-VL /
 * Qwen3-VL image processor makes it: transformers 5.x with its Pillow backend, which is the
 * one the references in ../shared/oracle/hf ran (their pixel values are rescaled in double and
 * normalised in float, bit for bit what that backend does; the torchvision backend fuses the
 * two steps and differs in the last bit of half the values).
 *
 *   1. ns_image_plan: smart resize. Each side is rounded (half to even, as Python's round) to a
 *      multiple of factor = patch * merge; if the area is over max_pixels both sides shrink by
 *      sqrt(area / max_pixels) rounded down to multiples (at least factor), if under
 *      min_pixels they grow by sqrt(min_pixels / area) rounded up. An aspect ratio over 200 is
 *      refused, as the processor refuses it. max_tokens (nsctl's --max-patches) caps the
 *      merged tokens an image becomes: it lowers max_pixels to max_tokens * factor^2, and a
 *      plan still over it (a very thin image kept at least factor wide) is refused.
 *      Only the header's size is needed, so a caller refuses an image before decoding it.
 *   2. ns_image_resize: Pillow's Image.resize(size, BICUBIC) on 8-bit RGB, exactly (Keys
 *      kernel a = -0.5 stretched by the downscale factor, weights at 22 fractional bits, the
 *      horizontal pass first, each pass rounded and clamped to 0..255).
 *   3. ns_image_pixel_values: x / 255 (in double, then float), (x - mean) / std (in float),
 *      then patches in the processor's order: merge x merge groups in raster order of groups,
 *      inside a group raster order of patches, each row laid out [channel][frame][y][x] with
 *      the still image repeated as `temporal` frames.
 *
 * All functions are pure (no I/O, no global state). Errors: negative errno with one line. */
#ifndef NS_IMAGE_PREP_H
#define NS_IMAGE_PREP_H

#include <stddef.h>
#include <stdint.h>

#include "image.h"

/* Qwen3-VL's and Qwen3.5's preprocessor_config.json: size.shortest_edge / longest_edge. */
#define NS_IMAGE_DEFAULT_MIN_PIXELS 65536ull
#define NS_IMAGE_DEFAULT_MAX_PIXELS 16777216ull

struct ns_image_geom {
	uint32_t patch;      /* patch side in pixels */
	uint32_t merge;      /* spatial merge: merge x merge patches become one token */
	uint32_t temporal;   /* frames per patch: a still image is repeated this many times */
	uint64_t min_pixels; /* smart resize bounds */
	uint64_t max_pixels;
	uint64_t max_tokens; /* cap on the tokens of one image; 0 = none */
	float mean[3];       /* per channel, on the 0..1 scale */
	float std[3];
};

struct ns_image_plan {
	uint32_t width;     /* resized */
	uint32_t height;
	uint32_t grid_t;    /* patch grid: Transformers' image_grid_thw */
	uint32_t grid_h;
	uint32_t grid_w;
	uint64_t n_patches; /* grid_t * grid_h * grid_w: rows of pixel values */
	uint64_t n_tokens;  /* n_patches / merge^2: tokens in the prompt */
	uint64_t patch_dim; /* 3 * temporal * patch^2: floats per row */
};

/* Plan an image of width x height. Returns 0, -EINVAL (bad geometry, aspect ratio, no size
 * possible), -E2BIG (more tokens than max_tokens), with one line in err. */
int ns_image_plan(const struct ns_image_geom *g, uint32_t width, uint32_t height,
		  struct ns_image_plan *p, char *err, size_t errlen);

/* dst = src resized to width x height as Pillow's BICUBIC (dst->rgb allocated; free with
 * ns_image_free). The same size copies. Returns 0, -EINVAL (a zero size), -ENOMEM. */
int ns_image_resize(const struct ns_image *src, uint32_t width, uint32_t height,
		    struct ns_image *dst);

/* out: (p->n_patches, p->patch_dim) from img, which must be p->width x p->height. */
int ns_image_pixel_values(const struct ns_image *img, const struct ns_image_geom *g,
			  const struct ns_image_plan *p, float *out);

/* Steps 2 and 3: *out = malloc'd (p->n_patches, p->patch_dim) floats. */
int ns_image_preprocess(const struct ns_image *img, const struct ns_image_geom *g,
			const struct ns_image_plan *p, float **out, char *err, size_t errlen);

#endif
