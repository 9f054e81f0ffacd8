/* hf_tensors.c - safetensors names to the converter's tensors (hf_tensors.h).
 *
 * Every rewrite follows llama.cpp's convert_hf_to_gguf.py for Qwen3.5 (conversion/qwen.py:
 * _LinearAttentionVReorderBase, Qwen3NextModel, _QwenMtpMixin, Qwen2MoeModel; base.py's
 * name filter and type rules):
 *  - "language_model." is dropped from names; vision, audio and projector tensors are not
 *    the text model's; mtp.* becomes block n_layer + i (mtp.fc -> nextn.eh_proj, ...);
 *  - RMSNorm weights stored as offsets (names ending "norm.weight", except the gated
 *    linear_attn.norm) become 1 + w; A_log becomes ssm_a = -exp(A_log); dt_bias is ssm_dt.bias;
 *    conv1d [C, 1, K] is squeezed to [C, K];
 *  - with fewer key than value heads, the value heads go from grouped order (the r = n_v/n_k
 *    heads of key head g together) to tiled order (value head v of every key head, then v+1):
 *    tiled head j = v * n_k + g is file head g * r + v. That permutes the V rows of
 *    in_proj_qkv, the rows of in_proj_z, in_proj_a, in_proj_b and the V channels of conv1d
 *    (row mappings), the elements of A_log and dt_bias and the columns of out_proj (groups);
 *  - experts: per-expert matrices are stacked [n_expert, rows, cols] (a row mapping, one run
 *    per expert); a fused gate_up_proj [E, 2 ff, n_embd] is split into gate and up;
 *  - types: 1-D tensors, ssm_conv1d and ffn_gate_inp_shexp are F32 (base.py's rule for every
 *    output type); other matrices keep the file's type, as a conversion to that type does.
 *    (The converter also forces ffn_gate_inp to F32; we keep the router in the file's type:
 *    the values are equal and float-type GEMVs of equal values agree bit for bit, while F32
 *    would double a router's bytes and take it off the streaming path.) */
#include "hf_tensors.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml_type.h"
#include "hf_model.h"
#include "ns_util.h"

enum s_fix {
	FIX_NONE,
	FIX_QKV,     /* in_proj_qkv: the V rows after q and k, by value head */
	FIX_V_ROWS,  /* in_proj_z: rows by value head (head_v_dim rows each) */
	FIX_V_ROW1,  /* in_proj_a, in_proj_b: one row per value head */
	FIX_V_ELEM,  /* A_log, dt_bias: one element per value head */
	FIX_CONV,    /* conv1d: squeezed, the V channels by value head */
	FIX_V_COLS,  /* out_proj: columns by value head */
};

struct s_rule {
	const char *hf;   /* after "model.layers.N." */
	const char *gguf; /* after "blk.N." */
	enum s_fix fix;
	enum ns_src_op op; /* COPY, ADD_ONE or NEG_EXP */
	bool f32;          /* written F32 whatever the output type */
};

static const struct s_rule s_layer_rules[] = {
	{ "input_layernorm.weight", "attn_norm.weight", FIX_NONE, NS_SRC_ADD_ONE, true },
	{ "post_attention_layernorm.weight", "post_attention_norm.weight", FIX_NONE,
	  NS_SRC_ADD_ONE, true },
	{ "self_attn.q_proj.weight", "attn_q.weight", FIX_NONE, NS_SRC_COPY, false },
	{ "self_attn.k_proj.weight", "attn_k.weight", FIX_NONE, NS_SRC_COPY, false },
	{ "self_attn.v_proj.weight", "attn_v.weight", FIX_NONE, NS_SRC_COPY, false },
	{ "self_attn.o_proj.weight", "attn_output.weight", FIX_NONE, NS_SRC_COPY, false },
	{ "self_attn.q_norm.weight", "attn_q_norm.weight", FIX_NONE, NS_SRC_ADD_ONE, true },
	{ "self_attn.k_norm.weight", "attn_k_norm.weight", FIX_NONE, NS_SRC_ADD_ONE, true },
	{ "linear_attn.in_proj_qkv.weight", "attn_qkv.weight", FIX_QKV, NS_SRC_COPY, false },
	{ "linear_attn.in_proj_z.weight", "attn_gate.weight", FIX_V_ROWS, NS_SRC_COPY, false },
	{ "linear_attn.in_proj_b.weight", "ssm_beta.weight", FIX_V_ROW1, NS_SRC_COPY, false },
	{ "linear_attn.in_proj_a.weight", "ssm_alpha.weight", FIX_V_ROW1, NS_SRC_COPY, false },
	{ "linear_attn.A_log", "ssm_a", FIX_V_ELEM, NS_SRC_NEG_EXP, true },
	{ "linear_attn.dt_bias", "ssm_dt.bias", FIX_V_ELEM, NS_SRC_COPY, true },
	{ "linear_attn.conv1d.weight", "ssm_conv1d.weight", FIX_CONV, NS_SRC_COPY, true },
	{ "linear_attn.norm.weight", "ssm_norm.weight", FIX_NONE, NS_SRC_COPY, true },
	{ "linear_attn.out_proj.weight", "ssm_out.weight", FIX_V_COLS, NS_SRC_COPY, false },
	{ "mlp.gate_proj.weight", "ffn_gate.weight", FIX_NONE, NS_SRC_COPY, false },
	{ "mlp.up_proj.weight", "ffn_up.weight", FIX_NONE, NS_SRC_COPY, false },
	{ "mlp.down_proj.weight", "ffn_down.weight", FIX_NONE, NS_SRC_COPY, false },
	{ "mlp.gate.weight", "ffn_gate_inp.weight", FIX_NONE, NS_SRC_COPY, false },
	{ "mlp.shared_expert.gate_proj.weight", "ffn_gate_shexp.weight", FIX_NONE, NS_SRC_COPY,
	  false },
	{ "mlp.shared_expert.up_proj.weight", "ffn_up_shexp.weight", FIX_NONE, NS_SRC_COPY, false },
	{ "mlp.shared_expert.down_proj.weight", "ffn_down_shexp.weight", FIX_NONE, NS_SRC_COPY,
	  false },
	{ "mlp.shared_expert_gate.weight", "ffn_gate_inp_shexp.weight", FIX_NONE, NS_SRC_COPY,
	  true },
	/* the MTP block's own tensors (its layer is an ordinary full-attention layer) */
	{ "eh_proj.weight", "nextn.eh_proj.weight", FIX_NONE, NS_SRC_COPY, false },
	{ "embed_tokens.weight", "nextn.embed_tokens.weight", FIX_NONE, NS_SRC_COPY, false },
	{ "enorm.weight", "nextn.enorm.weight", FIX_NONE, NS_SRC_ADD_ONE, true },
	{ "hnorm.weight", "nextn.hnorm.weight", FIX_NONE, NS_SRC_ADD_ONE, true },
	{ "shared_head.head.weight", "nextn.shared_head_head.weight", FIX_NONE, NS_SRC_COPY, false },
	{ "shared_head.norm.weight", "nextn.shared_head_norm.weight", FIX_NONE, NS_SRC_ADD_ONE,
	  true },
};

static const struct {
	const char *hf, *gguf;
	enum ns_src_op op;
	bool f32;
} s_global_rules[] = {
	{ "model.embed_tokens.weight", "token_embd.weight", NS_SRC_COPY, false },
	{ "model.norm.weight", "output_norm.weight", NS_SRC_ADD_ONE, true },
	{ "lm_head.weight", "output.weight", NS_SRC_COPY, false },
};

/* The three expert matrices, in GGUF's names. */
static const char *const s_exp_hf[3] = { "gate_proj", "up_proj", "down_proj" };
static const char *const s_exp_gguf[3] = { "ffn_gate_exps.weight", "ffn_up_exps.weight",
					   "ffn_down_exps.weight" };

/* One safetensors tensor under its normalised name. */
struct s_item {
	char name[256];
	const struct ns_st_tensor *st;
	uint32_t shard;
};

struct s_ctx {
	struct ns_model *m;
	const struct ns_hf_config *c;
	struct ns_st_file *const *files;
	char *err;
	size_t errlen;
	uint64_t cap;           /* entries of m->tensors */
	uint32_t n_blocks;      /* n_layer + MTP layers */
	const struct s_item **exp; /* per-expert matrices: [block][expert][3] */
};

/* A tensor being translated. */
struct s_spec {
	char name[128];
	const struct s_item *from; /* for messages */
	uint32_t src_type;
	uint32_t n_dims;
	uint64_t ne[NS_GGUF_MAX_DIMS];
	enum ns_src_op op;
	bool f32;
	uint32_t n_runs;
	struct ns_row_run *runs;
	uint32_t col_group, n_col_groups;
	uint32_t *col_from;
};

static int s_fail(struct s_ctx *x, const struct s_item *it, const char *what)
{
	ns_errf(x->err, x->errlen, "%s: tensor '%s' %s", x->files[it->shard]->path, it->st->name,
		what);
	return -EINVAL;
}

static int s_oom(struct s_ctx *x)
{
	ns_errf(x->err, x->errlen, "%s: out of memory", x->files[0]->path);
	return -ENOMEM;
}

static bool s_prefix(const char *s, const char *p)
{
	return !strncmp(s, p, strlen(p));
}

static bool s_suffix(const char *s, const char *p)
{
	size_t n = strlen(s), m = strlen(p);

	return n >= m && !strcmp(s + n - m, p);
}

/* base.py's TextModel filter for multimodal checkpoints: tensors of another tower. */
static bool s_not_text(const char *n)
{
	static const char *const prefixes[] = { "mlp", "vit.", "vpm.", "siglip2.", "conformer.",
						"merger.", "resampler.", "sound_encoder.",
						"sound_projection.", "speech_embeddings." };
	static const char *const parts[] = { "visual.", "vision.", "audio.", "talker.",
					     "vision_", "audio_", "token2wav.", "code2wav.",
					     "projector.", "pre_mm_projector_norm", "image_newline",
					     "view_seperator", "patch_embed", "patch_embedding",
					     "patch_merger.", "patch_merge_mlp.", "model.connector." };

	for (size_t i = 0; i < NS_ARRAY_LEN(prefixes); i++)
		if (s_prefix(n, prefixes[i]))
			return true;
	for (size_t i = 0; i < NS_ARRAY_LEN(parts); i++)
		if (strstr(n, parts[i]))
			return true;
	return false;
}

static uint32_t s_type_of(enum ns_st_dtype d)
{
	return d == NS_ST_F32 ? NS_TYPE_F32 : d == NS_ST_F16 ? NS_TYPE_F16 : NS_TYPE_BF16;
}

static uint32_t s_esize(uint32_t type)
{
	return type == NS_TYPE_F32 ? 4 : 2;
}

/* Tiled value head j comes from file head from(j) (see the header comment). */
static uint32_t s_vhead_from(const struct ns_hf_config *c, uint32_t j)
{
	uint32_t nk = c->lin_k_heads, r = c->lin_v_heads / nk;

	return (j % nk) * r + j / nk;
}

/* The file tensor as one run of all its rows. */
static int s_one_run(struct s_ctx *x, struct s_spec *sp, const struct s_item *it, uint64_t rows)
{
	sp->runs = ns_hf_store_alloc(x->m->hf, sizeof(*sp->runs));
	if (!sp->runs)
		return s_oom(x);
	sp->n_runs = 1;
	sp->runs[0] = (struct ns_row_run){ 0, rows, it->shard, it->st->file_offset };
	return 0;
}

/* Rows [base, base + n_v * hd) of a tensor of `rows` rows taken by value head in tiled order:
 * a run for the rows before base, then one run of hd rows per value head. */
static int s_vhead_runs(struct s_ctx *x, struct s_spec *sp, const struct s_item *it,
			uint64_t base, uint64_t hd)
{
	uint32_t nv = x->c->lin_v_heads, k = 0;
	uint64_t srb = sp->ne[0] * s_esize(sp->src_type);

	sp->runs = ns_hf_store_alloc(x->m->hf, (nv + 1) * sizeof(*sp->runs));
	if (!sp->runs)
		return s_oom(x);
	if (base)
		sp->runs[k++] = (struct ns_row_run){ 0, base, it->shard, it->st->file_offset };
	for (uint32_t j = 0; j < nv; j++)
		sp->runs[k++] = (struct ns_row_run){ base + j * hd, hd, it->shard,
			it->st->file_offset + (base + s_vhead_from(x->c, j) * hd) * srb };
	sp->n_runs = k;
	return 0;
}

/* Each row's elements taken in groups of g, one group per value head, in tiled order. */
static int s_vhead_cols(struct s_ctx *x, struct s_spec *sp, uint32_t g)
{
	uint32_t nv = x->c->lin_v_heads;

	sp->col_from = ns_hf_store_alloc(x->m->hf, nv * sizeof(*sp->col_from));
	if (!sp->col_from)
		return s_oom(x);
	for (uint32_t j = 0; j < nv; j++)
		sp->col_from[j] = s_vhead_from(x->c, j);
	sp->col_group = g;
	sp->n_col_groups = nv;
	return 0;
}

/* Shape, runs and groups of a layer tensor under its rule. */
static int s_shape(struct s_ctx *x, struct s_spec *sp, const struct s_item *it, enum s_fix fix)
{
	const struct ns_st_tensor *st = it->st;
	const struct ns_hf_config *c = x->c;
	uint64_t kd = (uint64_t)c->lin_k_heads * c->lin_k_dim;
	uint64_t vd = (uint64_t)c->lin_v_heads * c->lin_v_dim, rows = 1;
	bool reorder = c->lin_k_heads != c->lin_v_heads;

	if (fix == FIX_CONV) { /* [C, 1, K] -> ne [K, C] */
		if (st->n_dims != 3 || st->shape[1] != 1 || st->shape[0] != 2 * kd + vd ||
		    st->shape[2] != c->conv_kernel)
			return s_fail(x, it, "is not [2 * key dim + value dim, 1, conv kernel]");
		sp->n_dims = 2;
		sp->ne[0] = st->shape[2];
		sp->ne[1] = st->shape[0];
	} else {
		if (st->n_dims < 1 || st->n_dims > NS_GGUF_MAX_DIMS)
			return s_fail(x, it, "has a number of dimensions GGUF cannot hold");
		sp->n_dims = st->n_dims;
		for (uint32_t d = 0; d < st->n_dims; d++)
			sp->ne[d] = st->shape[st->n_dims - 1 - d];
	}
	for (uint32_t d = 1; d < sp->n_dims; d++)
		rows *= sp->ne[d];
	if (fix == FIX_QKV && (sp->n_dims != 2 || sp->ne[1] != 2 * kd + vd))
		return s_fail(x, it, "does not have 2 * key dim + value dim rows");
	if (fix == FIX_V_ROWS && (sp->n_dims != 2 || sp->ne[1] != vd))
		return s_fail(x, it, "does not have value dim rows");
	if (fix == FIX_V_ROW1 && (sp->n_dims != 2 || sp->ne[1] != c->lin_v_heads))
		return s_fail(x, it, "does not have one row per value head");
	if (fix == FIX_V_ELEM && (sp->n_dims != 1 || sp->ne[0] != c->lin_v_heads))
		return s_fail(x, it, "does not have one element per value head");
	if (fix == FIX_V_COLS && (sp->n_dims != 2 || sp->ne[0] != vd))
		return s_fail(x, it, "does not have value dim columns");
	if (!reorder || fix == FIX_NONE || fix == FIX_V_COLS || fix == FIX_V_ELEM) {
		int rc = s_one_run(x, sp, it, rows);

		if (rc || !reorder)
			return rc;
		if (fix == FIX_V_COLS)
			return s_vhead_cols(x, sp, c->lin_v_dim);
		if (fix == FIX_V_ELEM)
			return s_vhead_cols(x, sp, 1);
		return 0;
	}
	if (fix == FIX_QKV || fix == FIX_CONV)
		return s_vhead_runs(x, sp, it, 2 * kd, c->lin_v_dim);
	return s_vhead_runs(x, sp, it, 0, fix == FIX_V_ROW1 ? 1 : c->lin_v_dim);
}

/* Merge runs that continue each other in the same file. */
static void s_merge_runs(struct s_spec *sp, uint64_t srb)
{
	uint32_t k = 0;

	for (uint32_t i = 1; i < sp->n_runs; i++) {
		struct ns_row_run *a = &sp->runs[k], *b = &sp->runs[i];

		if (b->shard == a->shard && b->row0 == a->row0 + a->n_rows &&
		    b->file_offset == a->file_offset + a->n_rows * srb)
			a->n_rows += b->n_rows;
		else
			sp->runs[++k] = *b;
	}
	sp->n_runs = sp->n_runs ? k + 1 : 0;
}

/* The spec as a model tensor. */
static int s_finish(struct s_ctx *x, struct s_spec *sp)
{
	struct ns_model *m = x->m;
	struct ns_model_tensor *t;
	struct ns_tensor_src *src;
	uint64_t srb, rows = 1, bytes;
	bool identity = true;
	char *name;

	if (m->n_tensors == x->cap) {
		uint64_t cap = x->cap ? x->cap * 2 : 256;
		struct ns_model_tensor *v = realloc(m->tensors, (size_t)cap * sizeof(*v));

		if (!v)
			return s_oom(x);
		m->tensors = v;
		x->cap = cap;
	}
	for (uint32_t d = sp->n_dims; d < NS_GGUF_MAX_DIMS; d++)
		sp->ne[d] = 1;
	for (uint32_t d = 1; d < NS_GGUF_MAX_DIMS; d++)
		rows *= sp->ne[d];
	srb = sp->ne[0] * s_esize(sp->src_type);
	if (sp->op == NS_SRC_COPY && (sp->f32 || sp->n_dims <= 1) && sp->src_type != NS_TYPE_F32)
		sp->op = NS_SRC_WIDEN;
	s_merge_runs(sp, srb);
	for (uint32_t g = 0; g < sp->n_col_groups; g++)
		identity = identity && sp->col_from[g] == g;
	if (identity)
		sp->col_group = sp->n_col_groups = 0;
	name = ns_hf_store_alloc(m->hf, strlen(sp->name) + 1);
	if (!name)
		return s_oom(x);
	strcpy(name, sp->name);
	t = &m->tensors[m->n_tensors];
	memset(t, 0, sizeof(*t));
	t->name = name;
	t->type = sp->op == NS_SRC_COPY ? sp->src_type : NS_TYPE_F32;
	t->n_dims = sp->n_dims;
	memcpy(t->ne, sp->ne, sizeof(t->ne));
	t->n_rows = rows;
	t->n_elems = rows * sp->ne[0];
	t->row_bytes = sp->ne[0] * s_esize(t->type);
	if (ns_mul_u64_overflow(t->row_bytes, rows, &bytes))
		return s_fail(x, sp->from, "is too large");
	t->n_bytes = bytes;
	t->shard = sp->runs[0].shard;
	t->file_offset = sp->runs[0].file_offset;
	if (sp->n_runs > 1 || sp->op != NS_SRC_COPY || sp->col_group) {
		src = ns_hf_store_alloc(m->hf, sizeof(*src));
		if (!src)
			return s_oom(x);
		*src = (struct ns_tensor_src){ .type = sp->src_type, .row_bytes = srb, .op = sp->op,
					       .n_runs = sp->n_runs, .runs = sp->runs,
					       .col_group = sp->col_group,
					       .n_col_groups = sp->n_col_groups,
					       .col_from = sp->col_from };
		t->src = src;
	}
	m->total_tensor_bytes += t->n_bytes;
	m->n_tensors++;
	return 0;
}

static int s_dtype_ok(struct s_ctx *x, const struct s_item *it)
{
	enum ns_st_dtype d = it->st->dtype;

	if (d == NS_ST_F32 || d == NS_ST_F16 || d == NS_ST_BF16)
		return 0;
	ns_errf(x->err, x->errlen, "%s: tensor '%s' has dtype %s; neurostream reads F32, F16 "
		"and BF16 checkpoints", x->files[it->shard]->path, it->st->name,
		ns_st_dtype_name(d));
	return -EINVAL;
}

static int s_emit_rule(struct s_ctx *x, const struct s_item *it, const char *gguf,
		       enum s_fix fix, enum ns_src_op op, bool f32)
{
	struct s_spec sp = { .from = it, .op = op, .f32 = f32 };
	int rc;

	if ((rc = s_dtype_ok(x, it)))
		return rc;
	snprintf(sp.name, sizeof(sp.name), "%s", gguf);
	sp.src_type = s_type_of(it->st->dtype);
	if ((rc = s_shape(x, &sp, it, fix)))
		return rc;
	return s_finish(x, &sp);
}

/* A fused expert tensor [E, rows, cols] (rows 2 ff for gate_up_proj) as one or two stacked
 * [E, part rows, cols] tensors: a run per expert for a split. */
static int s_emit_fused(struct s_ctx *x, const struct s_item *it, uint32_t blk, bool gate_up)
{
	const struct ns_st_tensor *st = it->st;
	uint64_t n_e = st->n_dims == 3 ? st->shape[0] : 0, rows = st->n_dims == 3 ? st->shape[1] : 0;
	int rc;

	if ((rc = s_dtype_ok(x, it)))
		return rc;
	if (!n_e || n_e != x->c->n_expert || (gate_up && rows % 2))
		return s_fail(x, it, "is not [n_expert, rows, cols] (with an even number of rows "
			      "for gate_up_proj)");
	for (int part = 0; part < (gate_up ? 2 : 1); part++) {
		struct s_spec sp = { .from = it, .src_type = s_type_of(st->dtype), .n_dims = 3 };
		uint64_t pr = gate_up ? rows / 2 : rows, srb;

		sp.ne[0] = st->shape[2];
		sp.ne[1] = pr;
		sp.ne[2] = n_e;
		srb = sp.ne[0] * s_esize(sp.src_type);
		snprintf(sp.name, sizeof(sp.name), "blk.%u.%s", blk, s_exp_gguf[gate_up ? part : 2]);
		sp.runs = ns_hf_store_alloc(x->m->hf, (size_t)n_e * sizeof(*sp.runs));
		if (!sp.runs)
			return s_oom(x);
		for (uint64_t e = 0; e < n_e; e++)
			sp.runs[e] = (struct ns_row_run){ e * pr, pr, it->shard, st->file_offset +
				(e * rows + (uint64_t)part * pr) * srb };
		sp.n_runs = (uint32_t)n_e;
		if ((rc = s_finish(x, &sp)))
			return rc;
	}
	return 0;
}

/* Stack the per-expert matrices of block blk (all must be there, alike). */
static int s_emit_stacked(struct s_ctx *x, uint32_t blk)
{
	uint32_t ne_ = x->c->n_expert;
	const struct s_item **e = &x->exp[(size_t)blk * ne_ * 3];

	for (int w = 0; w < 3; w++) {
		const struct s_item *first = e[w];
		struct s_spec sp = { .from = first, .n_dims = 3 };
		int rc;

		for (uint32_t k = 0; k < ne_; k++) {
			const struct s_item *it = e[(size_t)k * 3 + w];

			if (!it) {
				ns_errf(x->err, x->errlen, "%s: block %u has per-expert tensors but no "
					"mlp.experts.%u.%s.weight", x->files[0]->path, blk, k,
					s_exp_hf[w]);
				return -EINVAL;
			}
			if ((rc = s_dtype_ok(x, it)))
				return rc;
			if (it->st->n_dims != 2 || it->st->dtype != first->st->dtype ||
			    it->st->shape[0] != first->st->shape[0] ||
			    it->st->shape[1] != first->st->shape[1])
				return s_fail(x, it, "differs in shape or dtype from expert 0's");
		}
		sp.src_type = s_type_of(first->st->dtype);
		sp.ne[0] = first->st->shape[1];
		sp.ne[1] = first->st->shape[0];
		sp.ne[2] = ne_;
		snprintf(sp.name, sizeof(sp.name), "blk.%u.%s", blk, s_exp_gguf[w]);
		sp.runs = ns_hf_store_alloc(x->m->hf, (size_t)ne_ * sizeof(*sp.runs));
		if (!sp.runs)
			return s_oom(x);
		for (uint32_t k = 0; k < ne_; k++) {
			const struct s_item *it = e[(size_t)k * 3 + w];

			sp.runs[k] = (struct ns_row_run){ (uint64_t)k * sp.ne[1], sp.ne[1], it->shard,
							  it->st->file_offset };
		}
		sp.n_runs = ne_;
		if ((rc = s_finish(x, &sp)))
			return rc;
	}
	return 0;
}

/* "mtp.*" -> "model.layers.<n_layer + i>.*" as _QwenMtpMixin renames; *mtp_idx the MTP
 * layer it belongs to (-1 for none). */
static void s_mtp_name(char *name, size_t n, uint32_t n_layer, int64_t *mtp_idx)
{
	static const char *const remap[][2] = { { "fc", "eh_proj" },
						{ "pre_fc_norm_embedding", "enorm" },
						{ "pre_fc_norm_hidden", "hnorm" },
						{ "norm", "shared_head.norm" } };
	const char *tail = s_prefix(name, "model.mtp.") ? name + 6 : name;
	char rest[252], part[64]; /* rest: a name (256) after "mtp." */
	unsigned idx;
	int used = 0;

	*mtp_idx = -1;
	if (!s_prefix(tail, "mtp."))
		return;
	snprintf(rest, sizeof(rest), "%s", tail + 4); /* copied: name is rewritten below */
	if (sscanf(rest, "layers.%u.%n", &idx, &used) == 1 && used && idx < 64) {
		*mtp_idx = idx;
		snprintf(name, n, "model.layers.%u.%s", n_layer + idx, rest + used);
		return;
	}
	for (size_t i = 0; i < NS_ARRAY_LEN(remap); i++) {
		size_t l = strlen(remap[i][0]);

		if (!strncmp(rest, remap[i][0], l) && rest[l] == '.' && !strchr(rest + l + 1, '.')) {
			snprintf(part, sizeof(part), "%s", rest + l + 1);
			*mtp_idx = 0;
			snprintf(name, n, "model.layers.%u.%s.%s", n_layer, remap[i][1], part);
			return;
		}
	}
	snprintf(name, n, "mtp.%s", rest); /* any other: without "model.", as before */
}

/* Normalise every tensor's name; drop the ones the text model does not have. */
static int s_collect(struct s_ctx *x, uint32_t n_files, struct s_item **out, uint64_t *n_out,
		     uint32_t *n_mtp)
{
	uint64_t total = 0, n = 0;
	int64_t max_mtp = -1;
	struct s_item *v;

	for (uint32_t f = 0; f < n_files; f++)
		total += x->files[f]->n_tensors;
	v = calloc(total ? (size_t)total : 1, sizeof(*v));
	if (!v)
		return s_oom(x);
	for (uint32_t f = 0; f < n_files; f++) {
		for (uint64_t i = 0; i < x->files[f]->n_tensors; i++) {
			const struct ns_st_tensor *st = &x->files[f]->tensors[i];
			struct s_item *it = &v[n];
			char *p;
			int64_t mi;

			if (strlen(st->name) >= sizeof(it->name) - 16) {
				ns_errf(x->err, x->errlen, "%s: tensor name '%.64s...' is too long",
					x->files[f]->path, st->name);
				free(v);
				return -EINVAL;
			}
			snprintf(it->name, sizeof(it->name), "%s", st->name);
			while ((p = strstr(it->name, "language_model.")))
				memmove(p, p + 15, strlen(p + 15) + 1);
			if (s_not_text(it->name) || s_suffix(it->name, ".attention.masked_bias") ||
			    s_suffix(it->name, ".attention.bias") ||
			    s_suffix(it->name, ".rotary_emb.inv_freq"))
				continue;
			s_mtp_name(it->name, sizeof(it->name), x->c->n_layer, &mi);
			max_mtp = mi > max_mtp ? mi : max_mtp;
			it->st = st;
			it->shard = f;
			n++;
		}
	}
	*n_mtp = max_mtp < 0 ? 0 : (uint32_t)max_mtp + 1;
	if (*n_mtp && x->c->n_mtp > *n_mtp)
		*n_mtp = x->c->n_mtp;
	*out = v;
	*n_out = n;
	return 0;
}

static int s_layer_item(struct s_ctx *x, const struct s_item *it, uint32_t blk, const char *rest)
{
	char gguf[128];
	unsigned e;
	int used = 0;

	for (size_t r = 0; r < NS_ARRAY_LEN(s_layer_rules); r++) {
		const struct s_rule *ru = &s_layer_rules[r];

		if (strcmp(rest, ru->hf))
			continue;
		snprintf(gguf, sizeof(gguf), "blk.%u.%s", blk, ru->gguf);
		return s_emit_rule(x, it, gguf, ru->fix, ru->op, ru->f32);
	}
	if (!strcmp(rest, "mlp.experts.gate_up_proj") || !strcmp(rest, "mlp.experts.gate_up_proj.weight"))
		return s_emit_fused(x, it, blk, true);
	if (!strcmp(rest, "mlp.experts.down_proj") || !strcmp(rest, "mlp.experts.down_proj.weight"))
		return s_emit_fused(x, it, blk, false);
	if (x->c->n_expert && sscanf(rest, "mlp.experts.%u.%n", &e, &used) == 1 && used &&
	    e < x->c->n_expert) {
		for (int w = 0; w < 3; w++) {
			char want[64];

			snprintf(want, sizeof(want), "%s.weight", s_exp_hf[w]);
			if (!strcmp(rest + used, want)) {
				x->exp[((size_t)blk * x->c->n_expert + e) * 3 + (size_t)w] = it;
				return 0;
			}
		}
	}
	ns_errf(x->err, x->errlen, "%s: tensor '%s' has no counterpart in llama.cpp's %s "
		"conversion", x->files[it->shard]->path, it->st->name, x->c->arch);
	return -EINVAL;
}

static int s_item(struct s_ctx *x, const struct s_item *it)
{
	unsigned blk;
	int used = 0;

	for (size_t g = 0; g < NS_ARRAY_LEN(s_global_rules); g++)
		if (!strcmp(it->name, s_global_rules[g].hf))
			return s_emit_rule(x, it, s_global_rules[g].gguf, FIX_NONE,
					   s_global_rules[g].op, s_global_rules[g].f32);
	if (sscanf(it->name, "model.layers.%u.%n", &blk, &used) == 1 && used && blk < x->n_blocks)
		return s_layer_item(x, it, blk, it->name + used);
	ns_errf(x->err, x->errlen, "%s: tensor '%s' has no counterpart in llama.cpp's %s "
		"conversion", x->files[it->shard]->path, it->st->name, x->c->arch);
	return -EINVAL;
}

int ns_hf_tensors_build(struct ns_model *m, const struct ns_hf_config *c,
			struct ns_st_file *const *files, uint32_t n_files, uint32_t *n_mtp,
			char *err, size_t errlen)
{
	struct s_ctx x = { .m = m, .c = c, .files = files, .err = err, .errlen = errlen };
	struct s_item *items = NULL;
	uint64_t n = 0;
	int rc;

	if ((rc = s_collect(&x, n_files, &items, &n, n_mtp)))
		return rc;
	x.n_blocks = c->n_layer + *n_mtp;
	if (c->n_expert) {
		x.exp = calloc((size_t)x.n_blocks * c->n_expert * 3, sizeof(*x.exp));
		if (!x.exp) {
			free(items);
			return s_oom(&x);
		}
	}
	for (uint64_t i = 0; i < n && !rc; i++)
		rc = s_item(&x, &items[i]);
	for (uint32_t b = 0; b < x.n_blocks && c->n_expert && !rc; b++) {
		bool any = false;

		for (size_t k = 0; k < (size_t)c->n_expert * 3; k++)
			any = any || x.exp[(size_t)b * c->n_expert * 3 + k];
		if (any)
			rc = s_emit_stacked(&x, b);
	}
	free(x.exp);
	free(items);
	return rc;
}
