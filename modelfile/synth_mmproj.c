/* synth_mmproj.c - the Qwen3-VL presets' text keys and their vision tower, an mmproj GGUF
 * written beside the model as llama.cpp's conversion writes Qwen3-VL's (conversion/qwen3vl.py
 * Qwen3VLVisionModel over MmprojModel): architecture "clip", projector "qwen3vl_merger", the
 * Conv3d patch kernel split into two Conv2d kernels (v.patch_embd.weight, .weight.1), the
 * merger as mm.0 / mm.2 with its norm as v.post_ln, each DeepStack merger named by the tower
 * block it follows (v.deepstack.<block>.*). Types as MmprojModel's: 1-D tensors and the
 * position grid F32, the patch kernels F16 (F32 unless the file is F16), the other matrices of
 * the file's type. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml_type.h"
#include "ns_util.h"
#include "synth_internal.h"

/* nscompute's NS_VISION_MAX_LAYERS: the most blocks a tower may have */
#define S_MAX_BLOCKS 256

const struct vl ns_synth_qwen3vl = {
	.mrope = { 24, 20, 20, 0 },
	.depth = 27, .width = 1152, .n_ff = 4304, .n_head = 16,
	.patch = 16, .merge = 2, .n_pos = 2304,
	.n_deepstack = 3, .deepstack = { 8, 16, 24 },
};

/* The keys convert_hf_to_gguf adds for Qwen3VLTextModel / Qwen3VLMoeTextModel over Qwen3's
 * (as the oracle's hf/qwen3_vl conversion has them: no rope.dimension_count). */
int ns_synth_qwen3vl_meta(struct ns_gguf_writer *w, const struct preset *p, uint32_t n_layer)
{
	char key[128];
	int ret;

	(void)n_layer;
	snprintf(key, sizeof(key), "%s.rope.dimension_sections", p->arch);
	if ((ret = ns_gguf_writer_set_arr(w, key, 5 /* I32 */, p->vl->mrope, 4)))
		return ret;
	snprintf(key, sizeof(key), "%s.n_deepstack_layers", p->arch);
	return ns_gguf_writer_set_u32(w, key, p->vl->n_deepstack);
}

int ns_synth_mmproj_path(const char *path, char *out, size_t outlen)
{
	const char *slash = strrchr(path, '/');
	int n = slash ? snprintf(out, outlen, "%.*s/mmproj-%s", (int)(slash - path), path, slash + 1)
		      : snprintf(out, outlen, "mmproj-%s", path);

	return n < 0 || (size_t)n >= outlen ? -ENAMETOOLONG : 0;
}

/* The tower's shape for one write: the preset's, its depth cut for tests. */
struct tower {
	const struct vl *v;
	uint32_t depth;
	uint32_t ds[4]; /* the DeepStack blocks of this depth */
	uint32_t out;   /* projection_dim: the text model's hidden size */
	uint32_t ftype; /* general.file_type (llama_ftype) */
	uint32_t mat;   /* the type of the matrices */
	const char *name;
};

/* llama.cpp's mmproj file types: an F32, F16, BF16 or Q8_0 conversion; a text model in any
 * other mix (Q4_K_M, Q4_0, MXFP4) is published beside an F16 mmproj (llama-quantize leaves
 * towers alone). */
static void s_types(enum ns_synth_quant q, uint32_t *ftype, uint32_t *mat)
{
	switch (q) {
	case NS_SYNTH_F32: *ftype = 0; *mat = NS_TYPE_F32; return;
	case NS_SYNTH_BF16: *ftype = 32; *mat = NS_TYPE_BF16; return;
	case NS_SYNTH_Q8_0: *ftype = 7; *mat = NS_TYPE_Q8_0; return;
	default: *ftype = 1; *mat = NS_TYPE_F16; return;
	}
}

static int s_meta(struct ns_gguf_writer *w, const void *user)
{
	const struct tower *t = user;
	const float half[3] = { 0.5f, 0.5f, 0.5f }; /* preprocessor_config.json's mean and std */
	uint8_t is_ds[S_MAX_BLOCKS] = { 0 };
	char name[96];
	int ret;

	for (uint32_t k = 0; k < t->v->n_deepstack; k++)
		is_ds[t->ds[k]] = 1;
	snprintf(name, sizeof(name), "neurostream synthetic %s (random weights)", t->name);
	if ((ret = ns_gguf_writer_set_str(w, "general.architecture", "clip")) ||
	    (ret = ns_gguf_writer_set_str(w, "general.type", "mmproj")) ||
	    (ret = ns_gguf_writer_set_str(w, "general.name", name)) ||
	    (ret = ns_gguf_writer_set_u32(w, "general.file_type", t->ftype)) ||
	    (ret = ns_gguf_writer_set_bool(w, "clip.has_vision_encoder", true)) ||
	    (ret = ns_gguf_writer_set_u32(w, "clip.vision.projection_dim", t->out)) ||
	    /* MmprojModel: sqrt(num_position_embeddings) * patch_size */
	    (ret = ns_gguf_writer_set_u32(w, "clip.vision.image_size", 48 * t->v->patch)) ||
	    (ret = ns_gguf_writer_set_u32(w, "clip.vision.patch_size", t->v->patch)) ||
	    (ret = ns_gguf_writer_set_u32(w, "clip.vision.embedding_length", t->v->width)) ||
	    (ret = ns_gguf_writer_set_u32(w, "clip.vision.feed_forward_length", t->v->n_ff)) ||
	    (ret = ns_gguf_writer_set_u32(w, "clip.vision.block_count", t->depth)) ||
	    (ret = ns_gguf_writer_set_u32(w, "clip.vision.attention.head_count", t->v->n_head)) ||
	    (ret = ns_gguf_writer_set_arr(w, "clip.vision.image_mean", 6 /* F32 */, half, 3)) ||
	    (ret = ns_gguf_writer_set_arr(w, "clip.vision.image_std", 6 /* F32 */, half, 3)) ||
	    (ret = ns_gguf_writer_set_str(w, "clip.projector_type", "qwen3vl_merger")) ||
	    (ret = ns_gguf_writer_set_bool(w, "clip.use_gelu", true)) ||
	    (ret = ns_gguf_writer_set_u32(w, "clip.vision.spatial_merge_size", t->v->merge)) ||
	    /* the text config's rms_norm_eps, as the conversion takes it */
	    (ret = ns_gguf_writer_set_f32(w, "clip.vision.attention.layer_norm_epsilon", 1e-6f)) ||
	    (ret = ns_gguf_writer_set_arr(w, "clip.vision.is_deepstack_layers", 7 /* BOOL */, is_ds,
					  t->depth)))
		return ret;
	return ns_gguf_writer_set_u32(w, "general.quantization_version", 2);
}

/* A matrix of the file's type (F16 when its rows do not fit the type's blocks, as the
 * conversion's fallback), a 1-D tensor F32. */
static int s_mat(struct plan *pl, const struct tower *t, const char *name, uint64_t ne0,
		 uint64_t ne1)
{
	uint32_t type = t->mat;

	if (ne0 % ns_type_get(type)->block_elems)
		type = NS_TYPE_F16;
	return ns_synth_add(pl, name, ROLE_MATRIX, type, 2, ne0, ne1, 1);
}

static int s_vec(struct plan *pl, const char *name, uint64_t n, enum role role)
{
	return ns_synth_add(pl, name, role, NS_TYPE_F32, 1, n, 1, 1);
}

/* The tensor list in the order the conversion writes it (the checkpoint's order). */
static int s_plan(struct plan *pl, const struct tower *t)
{
	const uint64_t W = t->v->width, F = t->v->n_ff, M = W * t->v->merge * t->v->merge;
	const uint64_t P = t->v->patch;
	char n[96];
	int ret = 0;

#define NM(...) (snprintf(n, sizeof(n), __VA_ARGS__), n)
	for (uint32_t l = 0; l < t->depth && !ret; l++) {
		if ((ret = s_vec(pl, NM("v.blk.%u.attn_out.bias", l), W, ROLE_BIAS)) ||
		    (ret = s_mat(pl, t, NM("v.blk.%u.attn_out.weight", l), W, W)) ||
		    (ret = s_vec(pl, NM("v.blk.%u.attn_qkv.bias", l), 3 * W, ROLE_BIAS)) ||
		    (ret = s_mat(pl, t, NM("v.blk.%u.attn_qkv.weight", l), W, 3 * W)) ||
		    (ret = s_vec(pl, NM("v.blk.%u.ffn_up.bias", l), F, ROLE_BIAS)) ||
		    (ret = s_mat(pl, t, NM("v.blk.%u.ffn_up.weight", l), W, F)) ||
		    (ret = s_vec(pl, NM("v.blk.%u.ffn_down.bias", l), W, ROLE_BIAS)) ||
		    (ret = s_mat(pl, t, NM("v.blk.%u.ffn_down.weight", l), F, W)) ||
		    (ret = s_vec(pl, NM("v.blk.%u.ln1.bias", l), W, ROLE_BIAS)) ||
		    (ret = s_vec(pl, NM("v.blk.%u.ln1.weight", l), W, ROLE_NORM)) ||
		    (ret = s_vec(pl, NM("v.blk.%u.ln2.bias", l), W, ROLE_BIAS)) ||
		    (ret = s_vec(pl, NM("v.blk.%u.ln2.weight", l), W, ROLE_NORM)))
			return ret;
	}
	for (uint32_t k = 0; k < t->v->n_deepstack; k++) {
		uint32_t b = t->ds[k];

		if ((ret = s_vec(pl, NM("v.deepstack.%u.fc1.bias", b), M, ROLE_BIAS)) ||
		    (ret = s_mat(pl, t, NM("v.deepstack.%u.fc1.weight", b), M, M)) ||
		    (ret = s_vec(pl, NM("v.deepstack.%u.fc2.bias", b), t->out, ROLE_BIAS)) ||
		    (ret = s_mat(pl, t, NM("v.deepstack.%u.fc2.weight", b), M, t->out)) ||
		    (ret = s_vec(pl, NM("v.deepstack.%u.norm.bias", b), M, ROLE_BIAS)) ||
		    (ret = s_vec(pl, NM("v.deepstack.%u.norm.weight", b), M, ROLE_NORM)))
			return ret;
	}
	{
		const uint64_t kern[4] = { P, P, 3, W };
		const uint32_t kt = t->mat == NS_TYPE_F16 ? NS_TYPE_F16 : NS_TYPE_F32;

		if ((ret = s_vec(pl, "mm.0.bias", M, ROLE_BIAS)) ||
		    (ret = s_mat(pl, t, "mm.0.weight", M, M)) ||
		    (ret = s_vec(pl, "mm.2.bias", t->out, ROLE_BIAS)) ||
		    (ret = s_mat(pl, t, "mm.2.weight", M, t->out)) ||
		    (ret = s_vec(pl, "v.post_ln.bias", W, ROLE_BIAS)) ||
		    (ret = s_vec(pl, "v.post_ln.weight", W, ROLE_NORM)) ||
		    (ret = s_vec(pl, "v.patch_embd.bias", W, ROLE_BIAS)) ||
		    (ret = ns_synth_add4(pl, "v.patch_embd.weight", ROLE_MATRIX, kt, 4, kern)) ||
		    (ret = ns_synth_add4(pl, "v.patch_embd.weight.1", ROLE_MATRIX, kt, 4, kern)) ||
		    /* the position grid stays F32 in every conversion (V_ENC_EMBD_POS) */
		    (ret = ns_synth_add(pl, "v.position_embd.weight", ROLE_MATRIX, NS_TYPE_F32, 2, W,
					t->v->n_pos, 1)))
			return ret;
	}
#undef NM
	return 0;
}

int ns_synth_write_mmproj(const struct ns_synth_opts *o, const struct plan *text, const char *path,
			  char *err, size_t errlen)
{
	const struct vl *v = text->p->vl;
	struct tower t = { .v = v, .depth = v->depth, .out = text->p->n_embd, .name = text->p->name };
	struct plan pl = { .p = text->p, .q = text->q, .n_layer = 0, .seed = text->seed ^ 0x6d6d70ull };
	char mm[4096];
	int ret;

	if (ns_synth_mmproj_path(path, mm, sizeof(mm)) < 0) {
		ns_errf(err, errlen, "%s: path too long", path);
		return -ENAMETOOLONG;
	}
	if (o->max_vision_layers && o->max_vision_layers < v->depth)
		t.depth = o->max_vision_layers;
	if (t.depth < v->n_deepstack || t.depth > S_MAX_BLOCKS) {
		ns_errf(err, errlen, "max_vision_layers %u: the tower needs %u to %u blocks",
			t.depth, v->n_deepstack, S_MAX_BLOCKS);
		return -EINVAL;
	}
	/* the same fractions of a cut tower; distinct, since the indexes are spread by at least
	 * depth / n_deepstack and floor(i * d / D) keeps that order */
	for (uint32_t k = 0; k < v->n_deepstack; k++) {
		t.ds[k] = (uint32_t)((uint64_t)v->deepstack[k] * t.depth / v->depth);
		if (k && t.ds[k] <= t.ds[k - 1])
			t.ds[k] = t.ds[k - 1] + 1;
	}
	if (t.ds[v->n_deepstack - 1] >= t.depth) {
		ns_errf(err, errlen, "max_vision_layers %u: too few blocks for %u DeepStack layers",
			t.depth, v->n_deepstack);
		return -EINVAL;
	}
	s_types(text->q, &t.ftype, &t.mat);
	ret = s_plan(&pl, &t);
	if (ret == 0)
		ret = ns_synth_write_plan(o, &pl, mm, s_meta, &t, err, errlen);
	else
		ns_errf(err, errlen, "%s: cannot build the tower (%s)", mm, strerror(-ret));
	free(pl.t);
	return ret;
}
