/* vision_hparams.h - a vision tower's hyperparameters from an mmproj GGUF's metadata.
 *
 * llama.cpp's mmproj layout (general.architecture "clip", clip.vision.* keys, clip.projector_type)
 * as convert_hf_to_gguf.py --mmproj writes it for Qwen3-VL and Qwen3.5 ("qwen3vl_merger"; the
 * only projector we compute). Reading them touches no tensor data, so a command can plan an
 * image's tokens (image_prep.h) and refuse a bad image before any weight is read.
 *
 * The Transformers references these numbers stand for (Qwen3VLVisionModel, Qwen3_5VisionModel):
 * a Conv3d patch embedding of temporal x patch x patch (stored as two Conv2d kernels,
 * v.patch_embd.weight and .weight.1, one per frame), a learned square position grid resampled
 * bilinearly, n_layer pre-LayerNorm blocks with 2-D rotary attention and a GELU (tanh) MLP, a
 * 2x2 patch merger (LayerNorm per patch, then fc1, GELU (erf), fc2 to the text model's width),
 * and for Qwen3-VL the DeepStack mergers after the flagged blocks. */
#ifndef NS_VISION_HPARAMS_H
#define NS_VISION_HPARAMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "image_prep.h"
#include "model.h"

#define NS_VISION_MAX_LAYERS 256

struct ns_vision_hparams {
	char projector[32];  /* clip.projector_type */
	uint32_t n_embd;     /* clip.vision.embedding_length: width of the encoder */
	uint32_t n_ff;       /* clip.vision.feed_forward_length */
	uint32_t n_layer;    /* clip.vision.block_count */
	uint32_t n_head;     /* clip.vision.attention.head_count */
	uint32_t head_dim;   /* n_embd / n_head; a multiple of 4 (two rotary axes) */
	float eps;           /* clip.vision.attention.layer_norm_epsilon */
	uint32_t patch;      /* clip.vision.patch_size */
	uint32_t merge;      /* clip.vision.spatial_merge_size */
	uint32_t temporal;   /* frames per patch: 2 (the two kernels) */
	uint32_t n_embd_out; /* clip.vision.projection_dim: the text model's n_embd */
	uint32_t pos_side;   /* the learned position grid is pos_side x pos_side */
	double rope_theta;   /* 10000, as both references */
	uint32_t n_deepstack;
	bool deepstack[NS_VISION_MAX_LAYERS]; /* clip.vision.is_deepstack_layers */
	float mean[3];       /* clip.vision.image_mean / image_std */
	float std[3];
};

/* Reads and checks the metadata and the shape of v.position_embd.weight. Returns 0, or
 * -EINVAL with one line in err naming the file and the key (not an mmproj, a projector we do
 * not compute, a missing or inconsistent value). */
int ns_vision_hparams_load(const struct ns_model *m, struct ns_vision_hparams *hp, char *err,
			   size_t errlen);

/* What a user may change of the preprocessing (the processor's min_pixels / max_pixels, and
 * nsctl's --max-patches); 0 keeps the default (NS_IMAGE_DEFAULT_*, no token cap). */
struct ns_image_limits {
	uint64_t max_tokens;
	uint64_t min_pixels;
	uint64_t max_pixels;
};

/* The preprocessing of this tower's images: its patch, merge, temporal, mean and std, and the
 * limits (lim may be NULL: all defaults). */
void ns_vision_image_geom(const struct ns_vision_hparams *hp, const struct ns_image_limits *lim,
			  struct ns_image_geom *g);

/* Is this model file an mmproj (general.architecture "clip")? */
bool ns_vision_is_mmproj(const struct ns_model *m);

#endif
