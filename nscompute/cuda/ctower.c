/* ctower.c - the vision tower's forward pass on a CUDA device (ctower.h; the math is
 * vision.h's, step for step as vision_encode.c runs it). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctower.h"
#include "ggml_type.h"
#include "nscuda.h"
#include "vision_impl.h"
#include "vision_vram.h"

#define S_ROWS_MAX NS_VISION_VRAM_ROWS_MAX /* glue.cu's bias rows per launch */

struct ns_ctower {
	struct ns_vision *v;           /* borrowed */
	struct ns_ctower_opts o;
	struct ns_ctower_stats st;
	bool attached;
};

/* Device copies of a merger's vectors. */
struct s_dmerger {
	float *norm_w, *norm_b, *b1, *b2;
};

struct s_dlayer {
	float *ln1_w, *ln1_b, *ln2_w, *ln2_b, *b_qkv, *b_o, *b_up, *b_down;
	struct s_dmerger ds;
};

/* One encode's device state. */
struct s_run {
	struct ns_ctower *t;
	struct ns_vram *vram;
	ns_cuda_stream_t cs;
	ns_cuda_event_t copied;
	char *err;
	size_t errlen;
	uint64_t n, frame, qb;    /* patches, per frame, queries per attention launch */
	float *patch_w, *patch_b;
	struct s_dlayer *dl;      /* (n_layer) */
	struct s_dmerger merger;
	float *px, *pos, *cs_tab, *x, *h, *qkv, *ao, *ff, *embd, *ds;
	void *ws, *stage;
	float *deq;               /* a staged piece of a non-F32 matrix as float32, or NULL */
	uint64_t stage_bytes, ws_bytes, deq_bytes;
};

/* *p = a * b floats of the arena. */
static int s_alloc(struct s_run *r, void **p, uint64_t a, uint64_t b)
{
	uint64_t n;

	if (ns_mul_u64_overflow(a, b, &n) || ns_mul_u64_overflow(n, sizeof(float), &n)) {
		ns_errf(r->err, r->errlen, "vision (cuda): %llu x %llu floats overflow",
			(unsigned long long)a, (unsigned long long)b);
		return -EOVERFLOW;
	}
	return ns_vram_alloc(r->vram, n ? n : 1, p, r->err, r->errlen);
}

#define S_A(p, a, b) s_alloc(r, (void **)(p), a, b)

/* Up to the host's floats into *dev (allocated first). */
static int s_up(struct s_run *r, float **dev, const float *host, uint64_t n)
{
	int rc = S_A(dev, n, 1);

	if (rc == 0 &&
	    (rc = ns_cuda_copy_h2d_async(*dev, host, n * sizeof(float), r->cs, NULL)) < 0)
		ns_errf(r->err, r->errlen, "vision (cuda): upload: %s", ns_cuda_last_error());
	return rc;
}

static int s_merger_up(struct s_run *r, const struct ns_vision_merger *g, struct s_dmerger *d)
{
	const struct ns_vision_hparams *hp = &r->t->v->hp;
	const uint64_t wide = (uint64_t)hp->n_embd * hp->merge * hp->merge;
	int rc;

	if ((rc = s_up(r, &d->norm_w, g->norm_w, g->norm_dim)) ||
	    (rc = s_up(r, &d->norm_b, g->norm_b, g->norm_dim)) ||
	    (rc = s_up(r, &d->b1, g->b1, wide)) || (rc = s_up(r, &d->b2, g->b2, hp->n_embd_out)))
		return rc;
	return 0;
}

/* Every buffer of an encode of n patches in grid_t frames, allocated and the vectors
 * uploaded, as vn (ns_vision_vram_need: vision_vram.c) sized them, in its order: the arena of
 * vn->total bytes is used to the last granule (test_ctower). */
static int s_layout(struct s_run *r, const struct ns_vision_vram *vn, uint64_t n,
		    uint32_t grid_t)
{
	const struct ns_vision *v = r->t->v;
	const struct ns_vision_hparams *hp = &v->hp;
	const uint64_t d = hp->n_embd, group = (uint64_t)hp->merge * hp->merge, ng = n / group;
	int rc;

	r->n = n;
	r->frame = n / grid_t;
	r->qb = vn->queries;
	r->ws_bytes = vn->ws_bytes;
	r->stage_bytes = vn->stage_bytes;
	r->deq_bytes = vn->deq_bytes;
	if ((rc = s_up(r, &r->patch_w, v->patch_w, d * v->patch_dim)) ||
	    (rc = s_up(r, &r->patch_b, v->patch_b, d)))
		return rc;
	for (uint32_t l = 0; l < hp->n_layer; l++) {
		const struct ns_vision_layer *y = &v->layers[l];
		struct s_dlayer *dl = &r->dl[l];

		if ((rc = s_up(r, &dl->ln1_w, y->ln1_w, d)) ||
		    (rc = s_up(r, &dl->ln1_b, y->ln1_b, d)) ||
		    (rc = s_up(r, &dl->ln2_w, y->ln2_w, d)) ||
		    (rc = s_up(r, &dl->ln2_b, y->ln2_b, d)) ||
		    (rc = s_up(r, &dl->b_qkv, y->b_qkv, 3 * d)) ||
		    (rc = s_up(r, &dl->b_o, y->b_o, d)) ||
		    (rc = s_up(r, &dl->b_up, y->b_up, hp->n_ff)) ||
		    (rc = s_up(r, &dl->b_down, y->b_down, d)) ||
		    (y->ds && (rc = s_merger_up(r, y->ds, &dl->ds))))
			return rc;
	}
	if ((rc = s_merger_up(r, &v->merger, &r->merger)) ||
	    (rc = S_A(&r->px, n, v->patch_dim)) || (rc = S_A(&r->pos, n, d)) ||
	    (rc = S_A(&r->cs_tab, n, hp->head_dim)) || (rc = S_A(&r->x, n, d)) ||
	    (rc = S_A(&r->h, n, d)) || (rc = S_A(&r->qkv, n, 3 * d)) ||
	    (rc = S_A(&r->ao, n, d)) || (rc = S_A(&r->ff, n, hp->n_ff)) ||
	    (rc = S_A(&r->embd, ng, hp->n_embd_out)) ||
	    (hp->n_deepstack &&
	     (rc = S_A(&r->ds, (uint64_t)hp->n_deepstack * ng, hp->n_embd_out))))
		return rc;
	if ((rc = ns_vram_alloc(r->vram, r->ws_bytes ? r->ws_bytes : 1, &r->ws, r->err,
				r->errlen)) ||
	    (rc = ns_vram_alloc(r->vram, r->stage_bytes, &r->stage, r->err, r->errlen)) ||
	    (r->deq_bytes &&
	     (rc = ns_vram_alloc(r->vram, r->deq_bytes, (void **)&r->deq, r->err, r->errlen))))
		return rc;
	return 0;
}

int ns_ctower_vram_need(const struct ns_vision *v, const struct ns_ctower_opts *opts,
			uint64_t n_patches, uint32_t grid_t, struct ns_ctower_need *need,
			char *err, size_t errlen)
{
	struct ns_vision_vram vn;
	int rc;

	memset(need, 0, sizeof(*need));
	rc = ns_vision_vram_need(v->m, &v->hp, n_patches, grid_t, opts ? opts->stage_bytes : 0,
				 opts ? opts->attn_ws_max : 0, &vn, err, errlen);
	if (rc < 0)
		return rc;
	need->vectors = vn.vectors;
	need->activations = vn.activations;
	need->attn_ws = vn.attn_ws;
	need->staging = vn.staging;
	need->total = vn.total;
	return 0;
}

/* ---------------------------------------------------------------- matmuls -------------- */

struct s_mm {
	struct s_run *r;
	const struct ns_model_tensor *mt;
	const float *x;
	uint64_t n_tok;
	float *y;
	uint64_t ldy;
};

/* visit callback: rows [row0, row0 + nrows) through the staging buffer, in pieces that fit;
 * the copies and kernels are ordered on the one stream. */
static int s_stage_cb(void *ctx, uint64_t row0, uint64_t nrows, const void *data)
{
	struct s_mm *k = ctx;
	struct s_run *r = k->r;
	const uint64_t rb = k->mt->row_bytes, per = r->stage_bytes / rb;
	const uint8_t *src = data;
	int rc = 0;

	for (uint64_t i = 0; i < nrows && rc == 0; i += per) {
		const uint64_t n = nrows - i < per ? nrows - i : per;

		const bool f32 = k->mt->type == NS_TYPE_F32;

		/* float32 rows multiplied where they land, others dequantized first (exactly,
		 * ns_dequant_rows' values): the f32 GEMM, not the prefill's f16 operands */
		if ((rc = ns_cuda_copy_h2d_async(r->stage, src + i * rb, n * rb, r->cs,
						 r->copied)) == 0 && !f32)
			rc = ns_cuda_dequant(k->mt->type, r->stage, k->mt->ne[0], n, r->deq, r->cs);
		if (rc == 0)
			rc = ns_cuda_sgemm(f32 ? r->stage : r->deq, k->mt->ne[0], n, k->x,
					   k->mt->ne[0], k->n_tok, k->y + row0 + i, k->ldy, r->cs);
		r->t->st.staged_bytes += rc == 0 ? n * rb : 0;
		r->t->st.matmuls += rc == 0;
	}
	/* data dies when we return: its copies must have left it (the next copy into the
	 * buffer is ordered after this kernel by the stream) */
	return rc ? rc : ns_cuda_event_sync(r->copied);
}

static void s_beat(const struct s_run *r)
{
	if (r->t->o.progress)
		r->t->o.progress(r->t->o.progress_user);
}

/* dev y (n_tok, n_out) = x (n_tok, n_in) W^T + bias (rows of at most S_ROWS_MAX per bias
 * launch). */
static int s_linear(struct s_run *r, uint32_t id, const float *bias, const float *x,
		    uint64_t n_tok, float *y)
{
	const struct ns_vision *v = r->t->v;
	const struct ns_model_tensor *mt = &v->m->tensors[id];
	struct s_mm k = { r, mt, x, n_tok, y, mt->n_rows };
	int rc = ns_weights_visit(v->w, id, 0, mt->n_rows, s_stage_cb, &k);

	s_beat(r);
	for (uint64_t t0 = 0; rc == 0 && t0 < n_tok; t0 += S_ROWS_MAX) {
		const uint64_t nt = n_tok - t0 < S_ROWS_MAX ? n_tok - t0 : S_ROWS_MAX;

		rc = ns_cuda_add_rows(y + t0 * mt->n_rows, mt->n_rows, bias, mt->n_rows,
				      (uint32_t)nt, r->cs);
	}
	if (rc < 0)
		ns_errf(r->err, r->errlen, "vision (cuda): %s: %s", mt->name,
			rc == -ENOTSUP ? "no raw bytes from the weight provider" :
			rc == -EIO || rc == -ENODEV ? ns_cuda_last_error() :
			rc == -EINVAL || rc == -EOVERFLOW ? strerror(-rc) :
			ns_weights_error(v->w));
	return rc;
}

/* The step's error line from a kernel's rc. */
static int s_kfail(struct s_run *r, const char *what, int rc)
{
	ns_errf(r->err, r->errlen, "vision (cuda): %s: %s", what,
		rc == -EIO || rc == -ENODEV ? ns_cuda_last_error() : strerror(-rc));
	return rc;
}

#define S_K(what, call)                                                                      \
	do {                                                                                 \
		int s_rc_ = (call);                                                          \
		if (s_rc_ < 0)                                                               \
			return s_kfail(r, what, s_rc_);                                      \
	} while (0)

/* ---------------------------------------------------------------- the pass ------------- */

/* x = pixels Wpatch^T + bpatch + the position rows. */
static int s_embed(struct s_run *r, const float *pixels, uint32_t grid_t, uint32_t gh,
		   uint32_t gw)
{
	struct ns_vision *v = r->t->v;
	const uint64_t d = v->hp.n_embd, n = r->n;
	float *pos = ns_vision_falloc(n, d);
	int rc;

	if (!pos)
		return ns_errf(r->err, r->errlen, "vision (cuda): out of memory"), -ENOMEM;
	if ((rc = ns_vision_pos_rows(v, grid_t, gh, gw, pos)) < 0) {
		ns_errf(r->err, r->errlen, "%s", ns_vision_error(v));
		free(pos);
		return rc;
	}
	/* pageable sources: staged before the calls return */
	rc = ns_cuda_copy_h2d_async(r->pos, pos, n * d * sizeof(float), r->cs, NULL);
	free(pos);
	S_K("upload", rc);
	S_K("upload", ns_cuda_copy_h2d_async(r->px, pixels, n * v->patch_dim * sizeof(float),
					     r->cs, NULL));
	S_K("patch embedding", ns_cuda_sgemm(r->patch_w, v->patch_dim, d, r->px, v->patch_dim, n,
					     r->x, d, r->cs));
	for (uint64_t t0 = 0; t0 < n; t0 += S_ROWS_MAX) {
		const uint64_t nt = n - t0 < S_ROWS_MAX ? n - t0 : S_ROWS_MAX;

		S_K("patch bias", ns_cuda_add_rows(r->x + t0 * d, d, r->patch_b, d, (uint32_t)nt,
						   r->cs));
	}
	S_K("position rows", ns_cuda_add(r->x, r->pos, n * d, r->cs));
	s_beat(r);
	return 0;
}

static int s_block(struct s_run *r, uint32_t l, uint32_t grid_t)
{
	const struct ns_vision *v = r->t->v;
	const struct ns_vision_hparams *hp = &v->hp;
	const struct ns_vision_layer *y = &v->layers[l];
	const struct s_dlayer *dl = &r->dl[l];
	const uint64_t d = hp->n_embd, n = r->n, F = r->frame;
	const float scale = 1.0f / sqrtf((float)hp->head_dim);
	int rc;

	S_K("layernorm", ns_cuda_layernorm(r->h, r->x, dl->ln1_w, dl->ln1_b, hp->n_embd,
					   (uint32_t)n, hp->eps, r->cs));
	if ((rc = s_linear(r, y->qkv, dl->b_qkv, r->h, n, r->qkv)) < 0)
		return rc;
	S_K("rope", ns_cuda_rope_table(r->qkv, n, 3 * d, hp->n_head, hp->head_dim, r->cs_tab,
				       r->cs));
	S_K("rope", ns_cuda_rope_table(r->qkv + d, n, 3 * d, hp->n_head, hp->head_dim,
				       r->cs_tab, r->cs));
	for (uint32_t f = 0; f < grid_t; f++) /* each frame attends to itself */
		for (uint64_t q0 = 0; q0 < F; q0 += r->qb) {
			const uint64_t nq = F - q0 < r->qb ? F - q0 : r->qb;
			const float *fq = r->qkv + f * F * 3 * d;

			S_K("attention",
			    ns_cuda_attention_full(fq + q0 * 3 * d, 3 * d, fq + d, 3 * d, fq + 2 * d,
						   3 * d, (uint32_t)nq, F, hp->n_head, hp->head_dim,
						   hp->head_dim, scale, r->ao + (f * F + q0) * d,
						   r->ws, r->cs));
		}
	if ((rc = s_linear(r, y->o, dl->b_o, r->ao, n, r->h)) < 0)
		return rc;
	S_K("residual", ns_cuda_add(r->x, r->h, n * d, r->cs));
	S_K("layernorm", ns_cuda_layernorm(r->h, r->x, dl->ln2_w, dl->ln2_b, hp->n_embd,
					   (uint32_t)n, hp->eps, r->cs));
	if ((rc = s_linear(r, y->up, dl->b_up, r->h, n, r->ff)) < 0)
		return rc;
	S_K("gelu", ns_cuda_gelu(r->ff, n * hp->n_ff, false, r->cs));
	if ((rc = s_linear(r, y->down, dl->b_down, r->ff, n, r->ao)) < 0)
		return rc;
	S_K("residual", ns_cuda_add(r->x, r->ao, n * d, r->cs));
	return 0;
}

/* out (n / merge^2, n_embd_out) = fc2(gelu_erf(fc1(LN(x) as (n / merge^2, wide rows)))). */
static int s_merge(struct s_run *r, const struct ns_vision_merger *g, const struct s_dmerger *dg,
		   float *out)
{
	const struct ns_vision_hparams *hp = &r->t->v->hp;
	const uint64_t group = (uint64_t)hp->merge * hp->merge, wide = hp->n_embd * group;
	const uint64_t ng = r->n / group;
	int rc;

	S_K("merger layernorm", ns_cuda_layernorm(r->h, r->x, dg->norm_w, dg->norm_b, g->norm_dim,
						  (uint32_t)(r->n * hp->n_embd / g->norm_dim),
						  hp->eps, r->cs));
	if ((rc = s_linear(r, g->fc1, dg->b1, r->h, ng, r->ao)) < 0)
		return rc;
	S_K("gelu", ns_cuda_gelu(r->ao, ng * wide, true, r->cs));
	return s_linear(r, g->fc2, dg->b2, r->ao, ng, out);
}

static int s_download(struct s_run *r, float *dst, const float *dev, uint64_t floats)
{
	S_K("download", ns_cuda_d2h(dst, dev, floats * sizeof(float)));
	return 0;
}

static int s_pass(struct s_run *r, const float *pixels, uint32_t grid_t, uint32_t gh, uint32_t gw,
		  const struct ns_vision_out *out)
{
	const struct ns_vision *v = r->t->v;
	const struct ns_vision_hparams *hp = &v->hp;
	const uint64_t ng = r->n / ((uint64_t)hp->merge * hp->merge);
	float *cs = ns_vision_falloc(r->n, hp->head_dim);
	float *ds = r->ds;
	int rc;

	if (!cs)
		return ns_errf(r->err, r->errlen, "vision (cuda): out of memory"), -ENOMEM;
	/* the rotary table from double angles on the host (vision_ops.c's), uploaded once */
	ns_vision_rope_table(cs, grid_t, gh, gw, hp->merge, hp->head_dim, hp->rope_theta);
	rc = ns_cuda_copy_h2d_async(r->cs_tab, cs, r->n * hp->head_dim * sizeof(float), r->cs,
				    NULL);
	free(cs);
	S_K("upload", rc);
	if ((rc = s_embed(r, pixels, grid_t, gh, gw)) < 0)
		return rc;
	for (uint32_t l = 0; l < hp->n_layer; l++) {
		if ((rc = s_block(r, l, grid_t)) < 0)
			return rc;
		if (v->layers[l].ds) {
			if ((rc = s_merge(r, v->layers[l].ds, &r->dl[l].ds, ds)) < 0)
				return rc;
			ds += ng * hp->n_embd_out;
		}
		s_beat(r);
	}
	if ((rc = s_merge(r, &v->merger, &r->merger, r->embd)) < 0)
		return rc;
	S_K("sync", ns_cuda_stream_sync(r->cs));
	if ((rc = s_download(r, out->embd, r->embd, ng * hp->n_embd_out)) < 0 ||
	    (hp->n_deepstack &&
	     (rc = s_download(r, out->deepstack, r->ds,
			      (uint64_t)hp->n_deepstack * ng * hp->n_embd_out)) < 0) ||
	    (out->last_hidden &&
	     (rc = s_download(r, out->last_hidden, r->x, r->n * hp->n_embd)) < 0))
		return rc;
	return 0;
}

int ns_ctower_encode(struct ns_ctower *t, const float *pixels, uint32_t grid_t, uint32_t grid_h,
		     uint32_t grid_w, const struct ns_vision_out *out, char *err, size_t errlen)
{
	const struct ns_vision_hparams *hp = &t->v->hp;
	const uint64_t n = (uint64_t)grid_t * grid_h * grid_w;
	struct s_run r = { .t = t, .err = err, .errlen = errlen };
	struct ns_vision_vram need;
	struct ns_cuda_devinfo di = { 0 };
	uint64_t budget;
	int rc;

	if (!n || grid_h % hp->merge || grid_w % hp->merge || !pixels || !out->embd ||
	    (hp->n_deepstack && !out->deepstack)) {
		ns_errf(err, errlen, "vision (cuda): grid %ux%ux%u is not whole %ux%u merge "
			"groups, or an input or output is missing", grid_t, grid_h, grid_w,
			hp->merge, hp->merge);
		return -EINVAL;
	}
	if ((rc = ns_vision_vram_need(t->v->m, hp, n, grid_t, t->o.stage_bytes, t->o.attn_ws_max,
				      &need, err, errlen)) < 0)
		return rc;
	budget = t->o.vram_budget > need.total ? t->o.vram_budget : need.total;
	if (t->o.vram_cap && budget > t->o.vram_cap) { /* the tower's share of --vram-budget */
		ns_errf(err, errlen, "vision (cuda): an image of %llu patches needs %llu B of VRAM "
			"for the tower, more than its %llu B of --vram-budget (the largest image "
			"--max-patches and -c let through)", (unsigned long long)n,
			(unsigned long long)budget, (unsigned long long)t->o.vram_cap);
		return -ENOSPC;
	}
	r.dl = calloc(hp->n_layer ? hp->n_layer : 1, sizeof(*r.dl));
	if (!r.dl)
		return ns_errf(err, errlen, "out of memory"), -ENOMEM;
	*err = 0;
	if ((rc = ns_cuda_device_info(t->o.device, &di, err, errlen)) < 0 ||
	    (rc = di.free_bytes < budget ? -ENOMEM : 0) < 0 ||
	    (rc = ns_vram_new(budget, 0, &r.vram, err, errlen)) < 0) {
		char why[NS_ERR_LEN];

		snprintf(why, sizeof(why), "%s", err);
		ns_errf(err, errlen, "vision (cuda): an image of %llu patches needs %.1f MiB of "
			"VRAM for the tower, the device has %.1f MiB free%s%s",
			(unsigned long long)n, budget / 1048576.0, di.free_bytes / 1048576.0,
			*why ? ": " : "", why);
		free(r.dl);
		return rc;
	}
	if ((rc = ns_cuda_stream_new(&r.cs)) < 0 || (rc = ns_cuda_event_new(&r.copied)) < 0)
		s_kfail(&r, "stream", rc);
	if (rc == 0)
		rc = s_layout(&r, &need, n, grid_t);
	if (rc == 0)
		rc = s_pass(&r, pixels, grid_t, grid_h, grid_w, out);
	t->st.vram_used = ns_vram_used(r.vram);
	t->st.vram_arena = budget;
	t->st.encodes += rc == 0;
	/* nothing may still read the arena when it goes */
	if (r.cs)
		(void)ns_cuda_stream_sync(r.cs);
	ns_cuda_event_destroy(&r.copied);
	ns_cuda_stream_destroy(&r.cs);
	ns_vram_destroy(&r.vram);
	free(r.dl);
	return rc;
}

static int s_encode_fn(void *user, const float *pixels, uint32_t grid_t, uint32_t grid_h,
		       uint32_t grid_w, const struct ns_vision_out *out, char *err, size_t errlen)
{
	return ns_ctower_encode(user, pixels, grid_t, grid_h, grid_w, out, err, errlen);
}

int ns_ctower_new(struct ns_vision *v, const struct ns_ctower_opts *opts,
		  struct ns_ctower **out, char *err, size_t errlen)
{
	struct ns_ctower *t;
	int rc;

	*out = NULL;
	if ((rc = ns_cuda_init(opts ? opts->device : 0, err, errlen)) < 0)
		return rc;
	if (!(t = calloc(1, sizeof(*t))))
		return ns_errf(err, errlen, "out of memory"), -ENOMEM;
	t->v = v;
	if (opts)
		t->o = *opts;
	*out = t;
	return 0;
}

void ns_ctower_attach(struct ns_ctower *t)
{
	ns_vision_set_encoder(t->v, s_encode_fn, t);
	t->attached = true;
}

void ns_ctower_stats(const struct ns_ctower *t, struct ns_ctower_stats *out)
{
	*out = t->st;
}

void ns_ctower_destroy(struct ns_ctower **tp)
{
	struct ns_ctower *t = tp ? *tp : NULL;

	if (!t)
		return;
	if (t->attached)
		ns_vision_set_encoder(t->v, NULL, NULL);
	free(t);
	*tp = NULL;
}
