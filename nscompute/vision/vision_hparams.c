/* vision_hparams.c - see vision_hparams.h. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ns_util.h"
#include "vision_hparams.h"

#define S_POS_TENSOR "v.position_embd.weight"

bool ns_vision_is_mmproj(const struct ns_model *m)
{
	const char *arch = ns_gguf_get_str(ns_model_meta(m), "general.architecture");

	return arch && strcmp(arch, "clip") == 0;
}

/* A required count in lo..hi. */
static int s_u32(const struct ns_model *m, const char *key, uint64_t lo, uint64_t hi,
		 uint32_t *out, char *err, size_t errlen)
{
	uint64_t v;

	if (!ns_gguf_get_u64(ns_model_meta(m), key, &v)) {
		ns_errf(err, errlen, "%s: mmproj key %s is missing", ns_model_meta(m)->path, key);
		return -EINVAL;
	}
	if (v < lo || v > hi) {
		ns_errf(err, errlen, "%s: mmproj key %s = %llu, outside %llu..%llu",
			ns_model_meta(m)->path, key, (unsigned long long)v,
			(unsigned long long)lo, (unsigned long long)hi);
		return -EINVAL;
	}
	*out = (uint32_t)v;
	return 0;
}

/* Three floats of a F32/F64 array key; absent: def. */
static int s_rgb(const struct ns_model *m, const char *key, float def, bool positive, float *out,
		 char *err, size_t errlen)
{
	const struct ns_gguf_value *a = ns_gguf_get_arr(ns_model_meta(m), key);

	for (int c = 0; c < 3; c++)
		out[c] = def;
	if (!a)
		return 0;
	if (a->v.arr.n != 3 ||
	    (a->v.arr.item_type != NS_GGUF_F32 && a->v.arr.item_type != NS_GGUF_F64)) {
		ns_errf(err, errlen, "%s: mmproj key %s is not 3 floats", ns_model_meta(m)->path,
			key);
		return -EINVAL;
	}
	for (int c = 0; c < 3; c++) {
		out[c] = (float)ns_gguf_arr_f64(a, (uint64_t)c);
		if (!isfinite(out[c]) || (positive && !(out[c] > 0.0f))) {
			ns_errf(err, errlen, "%s: mmproj key %s[%d] = %g", ns_model_meta(m)->path,
				key, c, (double)out[c]);
			return -EINVAL;
		}
	}
	return 0;
}

static int s_deepstack(const struct ns_model *m, struct ns_vision_hparams *hp, char *err,
		       size_t errlen)
{
	const char *key = "clip.vision.is_deepstack_layers";
	const struct ns_gguf_value *a = ns_gguf_get_arr(ns_model_meta(m), key);

	if (!a)
		return 0;
	if (a->v.arr.item_type != NS_GGUF_BOOL || a->v.arr.n != hp->n_layer) {
		ns_errf(err, errlen, "%s: mmproj key %s is not %u booleans",
			ns_model_meta(m)->path, key, hp->n_layer);
		return -EINVAL;
	}
	for (uint32_t l = 0; l < hp->n_layer; l++) {
		hp->deepstack[l] = ns_gguf_arr_i64(a, l) != 0;
		hp->n_deepstack += hp->deepstack[l];
	}
	return 0;
}

static int s_pos_grid(const struct ns_model *m, struct ns_vision_hparams *hp, char *err,
		      size_t errlen)
{
	const struct ns_model_tensor *t = ns_model_find(m, S_POS_TENSOR);
	uint64_t side;

	if (!t || t->n_dims != 2 || t->ne[0] != hp->n_embd) {
		ns_errf(err, errlen, "%s: %s is missing or not (%u, N)", ns_model_meta(m)->path,
			S_POS_TENSOR, hp->n_embd);
		return -EINVAL;
	}
	side = (uint64_t)sqrt((double)t->ne[1]);
	while (side * side > t->ne[1])
		side--;
	while ((side + 1) * (side + 1) <= t->ne[1])
		side++;
	if (side * side != t->ne[1] || side < 2 || side > 65535) {
		ns_errf(err, errlen, "%s: %s has %llu rows, not a square grid of at least 2x2",
			ns_model_meta(m)->path, S_POS_TENSOR, (unsigned long long)t->ne[1]);
		return -EINVAL;
	}
	hp->pos_side = (uint32_t)side;
	return 0;
}

int ns_vision_hparams_load(const struct ns_model *m, struct ns_vision_hparams *hp, char *err,
			   size_t errlen)
{
	const struct ns_gguf *g = ns_model_meta(m);
	const char *proj = ns_gguf_get_str(g, "clip.projector_type");
	bool flag = false;
	double eps = 0.0;
	int rc;

	memset(hp, 0, sizeof(*hp));
	if (!ns_vision_is_mmproj(m) ||
	    !(ns_gguf_get_bool(g, "clip.has_vision_encoder", &flag) && flag)) {
		ns_errf(err, errlen, "%s: not an mmproj file with a vision encoder "
			"(general.architecture clip, clip.has_vision_encoder)", g->path);
		return -EINVAL;
	}
	if (!proj || strcmp(proj, "qwen3vl_merger") != 0) {
		ns_errf(err, errlen, "%s: projector %s: only qwen3vl_merger (Qwen3-VL, Qwen3.5) is "
			"computed", g->path, proj ? proj : "(none)");
		return -EINVAL;
	}
	snprintf(hp->projector, sizeof(hp->projector), "%s", proj);
	if (!(ns_gguf_get_bool(g, "clip.use_gelu", &flag) && flag)) {
		ns_errf(err, errlen, "%s: clip.use_gelu is not true: the qwen3vl_merger encoder's "
			"MLP is GELU", g->path);
		return -EINVAL;
	}
	if ((rc = s_u32(m, "clip.vision.embedding_length", 4, 1u << 16, &hp->n_embd, err,
			errlen)) ||
	    (rc = s_u32(m, "clip.vision.feed_forward_length", 1, 1u << 18, &hp->n_ff, err,
			errlen)) ||
	    (rc = s_u32(m, "clip.vision.block_count", 1, NS_VISION_MAX_LAYERS, &hp->n_layer, err,
			errlen)) ||
	    (rc = s_u32(m, "clip.vision.attention.head_count", 1, 1024, &hp->n_head, err,
			errlen)) ||
	    (rc = s_u32(m, "clip.vision.patch_size", 1, 1024, &hp->patch, err, errlen)) ||
	    (rc = s_u32(m, "clip.vision.spatial_merge_size", 1, 64, &hp->merge, err, errlen)) ||
	    (rc = s_u32(m, "clip.vision.projection_dim", 1, 1u << 18, &hp->n_embd_out, err,
			errlen)))
		return rc;
	if (hp->n_embd % hp->n_head || (hp->n_embd / hp->n_head) % 4) {
		ns_errf(err, errlen, "%s: %u heads do not split %u into head widths divisible by 4 "
			"(two rotary axes)", g->path, hp->n_head, hp->n_embd);
		return -EINVAL;
	}
	hp->head_dim = hp->n_embd / hp->n_head;
	if (!ns_gguf_get_f64(g, "clip.vision.attention.layer_norm_epsilon", &eps))
		eps = 1e-6; /* both references' LayerNorm */
	if (!(eps > 0.0 && eps < 1.0)) {
		ns_errf(err, errlen, "%s: layer_norm_epsilon %g", g->path, eps);
		return -EINVAL;
	}
	hp->eps = (float)eps;
	hp->temporal = 2;
	hp->rope_theta = 10000.0;
	if ((rc = s_rgb(m, "clip.vision.image_mean", 0.5f, false, hp->mean, err, errlen)) ||
	    (rc = s_rgb(m, "clip.vision.image_std", 0.5f, true, hp->std, err, errlen)) ||
	    (rc = s_deepstack(m, hp, err, errlen)))
		return rc;
	return s_pos_grid(m, hp, err, errlen);
}

void ns_vision_image_geom(const struct ns_vision_hparams *hp, const struct ns_image_limits *lim,
			  struct ns_image_geom *g)
{
	memset(g, 0, sizeof(*g));
	g->patch = hp->patch;
	g->merge = hp->merge;
	g->temporal = hp->temporal;
	g->min_pixels = lim && lim->min_pixels ? lim->min_pixels : NS_IMAGE_DEFAULT_MIN_PIXELS;
	g->max_pixels = lim && lim->max_pixels ? lim->max_pixels : NS_IMAGE_DEFAULT_MAX_PIXELS;
	g->max_tokens = lim ? lim->max_tokens : 0;
	memcpy(g->mean, hp->mean, sizeof(g->mean));
	memcpy(g->std, hp->std, sizeof(g->std));
}
