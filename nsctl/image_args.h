/* image_args.h - --image / --mmproj / --max-patches of nsctl run and nsctl logits: judged before
 * any process starts or weight is read (one line, exit 2), then handed to the engine. */
#ifndef NSCTL_IMAGE_ARGS_H
#define NSCTL_IMAGE_ARGS_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "neurostream.h"

struct nsctl_images {
	const char *path[NS_ENGINE_MAX_IMAGES];
	uint32_t n;
	const char *mmproj;       /* --mmproj, or NULL: the tower beside the model (mmproj_beside.h) */
	bool no_mmproj;           /* --no-mmproj: no tower, not even the one beside the model */
	bool later;               /* images may come after the start (run --chat's /image; plan):
				   * the tower beside the model is taken without --image too */
	bool beside;              /* mmproj was found beside the model (said on stderr) */
	uint64_t max_tokens;      /* --max-patches (0: none) */
	uint64_t min_pixels, max_pixels; /* --min-pixels, --max-pixels (0: the processor's) */
	int64_t image_token;      /* --image-token (-1: the vocabulary's <|image_pad|>) */
	char found[PATH_MAX];     /* the tower found beside the model */
};

/* One more --image: 0, or -EINVAL after one line (too many). */
int nsctl_images_add(struct nsctl_images *im, const char *who, const char *path);

/* The image flags of run and logits (id: one of NSCTL_IMG_*): 0, or -EINVAL after one line. */
enum { NSCTL_IMG_IMAGE = 900, NSCTL_IMG_MMPROJ, NSCTL_IMG_MAX_PATCHES, NSCTL_IMG_MIN_PIXELS,
       NSCTL_IMG_MAX_PIXELS, NSCTL_IMG_TOKEN, NSCTL_IMG_NO_MMPROJ };
#define NSCTL_IMAGE_OPTS \
	{ "image", NULL, NS_OPT_VALUE, NSCTL_IMG_IMAGE }, \
	{ "mmproj", NULL, NS_OPT_VALUE, NSCTL_IMG_MMPROJ }, \
	NSCTL_NO_MMPROJ_OPT, \
	{ "max-patches", NULL, NS_OPT_VALUE, NSCTL_IMG_MAX_PATCHES }, \
	{ "min-pixels", NULL, NS_OPT_VALUE, NSCTL_IMG_MIN_PIXELS }, \
	{ "max-pixels", NULL, NS_OPT_VALUE, NSCTL_IMG_MAX_PIXELS }, \
	{ "image-token", NULL, NS_OPT_VALUE, NSCTL_IMG_TOKEN }
/* --no-mmproj, and llama.cpp's --no-mmproj-auto */
#define NSCTL_NO_MMPROJ_OPT { "no-mmproj", "--no-mmproj-auto", NS_OPT_SWITCH, NSCTL_IMG_NO_MMPROJ }
#define NSCTL_NO_MMPROJ_USAGE \
	"  --no-mmproj           no vision tower, not even a mmproj*.gguf beside MODEL\n"
#define NSCTL_IMAGE_USAGE \
	"  --image FILE          an image in the prompt (repeatable; PNG, JPEG, WebP)\n" \
	"  --mmproj FILE         the vision tower (default: the one mmproj*.gguf beside MODEL\n" \
	"                        that fits it; docs/decisions.md)\n" \
	NSCTL_NO_MMPROJ_USAGE \
	"  --max-patches N       an image becomes at most N tokens (merged patches)\n" \
	"  --min-pixels N, --max-pixels N  the processor's resize bounds (65536, 16777216)\n" \
	"  --image-token ID      the image placeholder id (default: <|image_pad|>)\n"
int nsctl_images_opt(struct nsctl_images *im, const char *who, int id, const char *flag,
		     const char *v);

/* With images: the model takes images (M-RoPE), the tower (given or found beside the model)
 * is its tower, each image is acceptable (header only) and all fit n_ctx (0: not checked
 * here). Without images, --mmproj alone is checked the same way, and with im->later the
 * tower beside a model that takes images is taken (none there: no tower; im->beside when
 * one was). 0, or 2 after one line prefixed with who. Sets eo's mmproj, max_image_tokens and
 * image_token. */
int nsctl_images_check(struct nsctl_images *im, const char *who, const char *model,
		       uint32_t n_ctx, struct ns_engine_opts *eo);

/* One line on stderr naming the tower found beside the model, if it was (said once the
 * command's own checks passed, so that a refusal stays one line). */
void nsctl_images_say(const struct nsctl_images *im, const char *who);

#endif
