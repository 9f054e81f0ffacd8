/* vision_encode.c - the tower's forward pass, straight-line (the math is in vision.h).
 *
 * Activations for n patches of width d: x (residual), h (normed), qkv (3d), ao (d; also the
 * mergers' 4d-wide hidden of n/4 rows), ff (the MLP hidden of one chunk). Weight matrices go
 * through the provider in chunks of n_batch rows (s_linear); the patch kernel and attention
 * use the gemm kernels on float data. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ggml_type.h"
#include "gemv.h"
#include "vision_impl.h"

struct s_act {
	uint64_t n;   /* patches */
	float *x;     /* (n, d) */
	float *h;     /* (n, d) */
	float *qkv;   /* (n, 3d) */
	float *ao;    /* (n, d) */
	float *ff;    /* (chunk, n_ff) */
	float *cs;    /* (n, head_dim) rotary cos | sin */
	float *pos;   /* (pos_side^2, d) the learned grid */
};

static void s_act_free(struct s_act *a)
{
	free(a->x);
	free(a->h);
	free(a->qkv);
	free(a->ao);
	free(a->ff);
	free(a->cs);
	free(a->pos);
}

static uint64_t s_chunk(const struct ns_vision *v, uint64_t n)
{
	return v->n_batch && v->n_batch < n ? v->n_batch : n;
}

/* y (n, n_out) = x (n, n_in) W^T + bias, one provider matmul per chunk of `step` rows. */
static int s_linear(struct ns_vision *v, uint32_t id, const float *bias, const float *x,
		    uint64_t n, uint64_t n_in, uint64_t step, float *y, uint64_t n_out)
{
	for (uint64_t t0 = 0; t0 < n; t0 += step) {
		const uint64_t nt = n - t0 < step ? n - t0 : step;
		int rc = ns_weights_matmul(v->w, id, 0, n_out, x + t0 * n_in, nt, y + t0 * n_out,
					   n_out);

		if (v->progress)
			v->progress(v->progress_user);

		if (rc < 0) {
			ns_errf(v->err, sizeof(v->err), "vision: %s: %s", v->m->tensors[id].name,
				ns_weights_error(v->w));
			return rc;
		}
	}
	for (uint64_t t = 0; t < n; t++)
		for (uint64_t i = 0; i < n_out; i++)
			y[t * n_out + i] += bias[i];
	return 0;
}

static void s_add(float *x, const float *y, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		x[i] += y[i];
}

/* torch.linspace(0, side - 1, steps)[i] in float, as torch computes it (symmetric halves). */
static float s_linspace(uint32_t side, uint32_t steps, uint32_t i)
{
	const float end = (float)(side - 1);
	float step;

	if (steps == 1)
		return 0.0f;
	step = end / (float)(steps - 1);
	return i < steps / 2 ? step * (float)i : end - step * (float)(steps - i - 1);
}

/* x += the learned grid resampled bilinearly (corners aligned) to (grid_h, grid_w), rows in
 * merge-group order, the same for every frame. */
static void s_pos_embed(struct ns_vision *v, struct s_act *a, uint32_t grid_t, uint32_t gh,
			uint32_t gw)
{
	const uint32_t S = v->hp.pos_side, M = v->hp.merge, d = v->hp.n_embd;
	float *row = a->x;

	for (uint32_t t = 0; t < grid_t; t++)
		for (uint32_t bh = 0; bh < gh / M; bh++)
			for (uint32_t bw = 0; bw < gw / M; bw++)
				for (uint32_t mh = 0; mh < M; mh++)
					for (uint32_t mw = 0; mw < M; mw++, row += d) {
						const float fh = s_linspace(S, gh, bh * M + mh);
						const float fw = s_linspace(S, gw, bw * M + mw);
						const uint32_t h0 = (uint32_t)fh, w0 = (uint32_t)fw;
						const uint32_t h1 = h0 + 1 < S ? h0 + 1 : S - 1;
						const uint32_t w1 = w0 + 1 < S ? w0 + 1 : S - 1;
						const float dh = fh - (float)h0, dw = fw - (float)w0;
						const float k[4] = { (1 - dh) * (1 - dw), (1 - dh) * dw,
								     dh * (1 - dw), dh * dw };
						const float *p[4] = {
							a->pos + ((uint64_t)h0 * S + w0) * d,
							a->pos + ((uint64_t)h0 * S + w1) * d,
							a->pos + ((uint64_t)h1 * S + w0) * d,
							a->pos + ((uint64_t)h1 * S + w1) * d };

						for (uint32_t i = 0; i < d; i++)
							row[i] += p[0][i] * k[0] + p[1][i] * k[1] +
								  p[2][i] * k[2] + p[3][i] * k[3];
					}
}

/* pixels (n, patch_dim) -> x (n, d): the patch kernel, its bias, the position grid. */
static int s_embed(struct ns_vision *v, struct s_act *a, const float *pixels, uint32_t grid_t,
		   uint32_t gh, uint32_t gw)
{
	const uint64_t d = v->hp.n_embd, npos = (uint64_t)v->hp.pos_side * v->hp.pos_side;
	int64_t *rows = malloc(npos * sizeof(*rows));
	int rc;

	if (!rows)
		return -ENOMEM;
	rc = ns_gemm(v->pool, NS_TYPE_F32, v->patch_w, v->patch_dim, d, pixels, a->n, a->x, d);
	if (v->progress)
		v->progress(v->progress_user);
	for (uint64_t t = 0; rc == 0 && t < a->n; t++)
		s_add(a->x + t * d, v->patch_b, d);
	for (uint64_t r = 0; r < npos; r++)
		rows[r] = (int64_t)r;
	if (rc < 0)
		ns_errf(v->err, sizeof(v->err), "vision: patch embedding: error %d", rc);
	else if ((rc = ns_weights_get_rows(v->w, v->pos, rows, npos, a->pos)) < 0)
		ns_errf(v->err, sizeof(v->err), "vision: v.position_embd.weight: %s",
			ns_weights_error(v->w));
	else
		s_pos_embed(v, a, grid_t, gh, gw);
	free(rows);
	return rc;
}

/* One encoder block on x. */
static int s_block(struct ns_vision *v, const struct ns_vision_layer *y, struct s_act *a,
		   uint32_t grid_t)
{
	const struct ns_vision_hparams *hp = &v->hp;
	const uint64_t d = hp->n_embd, n = a->n, frame = n / grid_t, step = s_chunk(v, n);
	int rc;

	ns_vision_layernorm(a->h, a->x, n, hp->n_embd, y->ln1_w, y->ln1_b, hp->eps);
	if ((rc = s_linear(v, y->qkv, y->b_qkv, a->h, n, d, step, a->qkv, 3 * d)) < 0)
		return rc;
	ns_vision_rope_apply(a->qkv, n, 3 * d, hp->n_head, hp->head_dim, a->cs);     /* q */
	ns_vision_rope_apply(a->qkv + d, n, 3 * d, hp->n_head, hp->head_dim, a->cs); /* k */
	for (uint32_t f = 0; f < grid_t; f++) /* each frame attends to itself */
		if ((rc = ns_vision_attention(v->pool, a->qkv + f * frame * 3 * d, frame,
					      hp->n_head, hp->head_dim, a->ao + f * frame * d, v))) {
			ns_errf(v->err, sizeof(v->err), "vision: attention: error %d", rc);
			return rc;
		}
	if ((rc = s_linear(v, y->o, y->b_o, a->ao, n, d, step, a->h, d)) < 0)
		return rc;
	s_add(a->x, a->h, n * d);
	ns_vision_layernorm(a->h, a->x, n, hp->n_embd, y->ln2_w, y->ln2_b, hp->eps);
	for (uint64_t t0 = 0; t0 < n; t0 += step) { /* the MLP hidden one chunk at a time */
		const uint64_t nt = n - t0 < step ? n - t0 : step;

		if ((rc = s_linear(v, y->up, y->b_up, a->h + t0 * d, nt, d, nt, a->ff, hp->n_ff)) <
		    0)
			return rc;
		ns_vision_gelu_tanh(a->ff, nt * hp->n_ff);
		if ((rc = s_linear(v, y->down, y->b_down, a->ff, nt, hp->n_ff, nt, a->ao + t0 * d,
				   d)) < 0)
			return rc;
	}
	s_add(a->x, a->ao, n * d);
	return 0;
}

/* out (n / merge^2, n_embd_out) = fc2(gelu_erf(fc1(LN(x) as (n / merge^2, wide rows)))). */
static int s_merge(struct ns_vision *v, const struct ns_vision_merger *g, struct s_act *a,
		   float *out)
{
	const uint64_t group = (uint64_t)v->hp.merge * v->hp.merge;
	const uint64_t wide = v->hp.n_embd * group, ng = a->n / group;
	const uint64_t step = s_chunk(v, a->n) / group;
	int rc;

	ns_vision_layernorm(a->h, a->x, a->n * v->hp.n_embd / g->norm_dim, g->norm_dim, g->norm_w,
			    g->norm_b, v->hp.eps);
	if ((rc = s_linear(v, g->fc1, g->b1, a->h, ng, wide, step, a->ao, wide)) < 0)
		return rc;
	ns_vision_gelu_erf(a->ao, ng * wide);
	return s_linear(v, g->fc2, g->b2, a->ao, ng, wide, step, out, v->hp.n_embd_out);
}

static int s_alloc_act(struct ns_vision *v, struct s_act *a)
{
	const struct ns_vision_hparams *hp = &v->hp;
	const uint64_t d = hp->n_embd;

	a->x = ns_vision_falloc(a->n, d);
	a->h = ns_vision_falloc(a->n, d);
	a->qkv = ns_vision_falloc(a->n, 3 * d);
	a->ao = ns_vision_falloc(a->n, d);
	a->ff = ns_vision_falloc(s_chunk(v, a->n), hp->n_ff);
	a->cs = ns_vision_falloc(a->n, hp->head_dim);
	a->pos = ns_vision_falloc((uint64_t)hp->pos_side * hp->pos_side, d);
	if (a->x && a->h && a->qkv && a->ao && a->ff && a->cs && a->pos)
		return 0;
	ns_errf(v->err, sizeof(v->err), "vision: out of memory for %llu patches",
		(unsigned long long)a->n);
	return -ENOMEM;
}

static uint64_t s_max(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

uint64_t ns_vision_work_bytes(const struct ns_vision_hparams *hp, uint64_t n, uint64_t n_batch)
{
	const uint64_t d = hp->n_embd, npos = (uint64_t)hp->pos_side * hp->pos_side;
	const uint64_t group = (uint64_t)hp->merge * hp->merge;
	uint64_t chunk = group ? n_batch / group * group : n_batch, f = 0, t, attn;

	if (n_batch && !chunk)
		chunk = group;
	chunk = chunk && chunk < n ? chunk : n; /* s_chunk */
	/* s_alloc_act's floats: x, h, ao (n, d), qkv (n, 3d), cs (n, head_dim), ff (chunk,
	 * n_ff), pos (npos, d); all live through the pass */
	if (ns_mul_u64_overflow(n, 6 * d + hp->head_dim, &f) ||
	    ns_mul_u64_overflow(chunk, hp->n_ff, &t) || ns_add_u64_overflow(f, t, &f) ||
	    ns_add_u64_overflow(f, npos * d, &f) || ns_mul_u64_overflow(f, sizeof(float), &f))
		return UINT64_MAX;
	/* the patch embedding's row ids (s_embed) and one frame's attention (s_block) never
	 * overlap: the larger of the two */
	attn = ns_vision_attention_bytes(n, hp->head_dim);
	t = npos * sizeof(int64_t) > attn ? npos * sizeof(int64_t) : attn;
	if (ns_add_u64_overflow(f, t, &f))
		return UINT64_MAX;
	/* and the gemm's copy of its input (gemv.h), one call at a time: the largest of the
	 * pixels (patch kernel), a chunk's MLP hidden, a d- or merged 4d-wide activation (the
	 * attention's own are in ns_vision_attention_bytes) */
	t = ns_gemm_x_bytes(n, 3ull * hp->temporal * hp->patch * hp->patch);
	t = s_max(t, ns_gemm_x_bytes(chunk, hp->n_ff));
	t = s_max(t, ns_gemm_x_bytes(n, d));
	t = s_max(t, group ? ns_gemm_x_bytes(n / group, d * group) : 0);
	return t == UINT64_MAX || ns_add_u64_overflow(f, t, &f) ? UINT64_MAX : f;
}

int ns_vision_pos_rows(struct ns_vision *v, uint32_t grid_t, uint32_t grid_h, uint32_t grid_w,
		       float *pos)
{
	const uint64_t d = v->hp.n_embd, npos = (uint64_t)v->hp.pos_side * v->hp.pos_side;
	struct s_act a = { .n = (uint64_t)grid_t * grid_h * grid_w, .x = pos };
	int64_t *rows = malloc(npos * sizeof(*rows));
	int rc = 0;

	a.pos = ns_vision_falloc(npos, d);
	if (!rows || !a.pos) {
		ns_errf(v->err, sizeof(v->err), "vision: out of memory for the position grid");
		rc = -ENOMEM;
	}
	for (uint64_t r = 0; rc == 0 && r < npos; r++)
		rows[r] = (int64_t)r;
	if (rc == 0 && (rc = ns_weights_get_rows(v->w, v->pos, rows, npos, a.pos)) < 0)
		ns_errf(v->err, sizeof(v->err), "vision: v.position_embd.weight: %s",
			ns_weights_error(v->w));
	if (rc == 0) {
		memset(pos, 0, a.n * d * sizeof(float));
		s_pos_embed(v, &a, grid_t, grid_h, grid_w);
	}
	free(rows);
	free(a.pos);
	return rc;
}

void ns_vision_set_encoder(struct ns_vision *v, ns_vision_encode_fn fn, void *user)
{
	v->encode = fn;
	v->encode_user = user;
}

int ns_vision_encode(struct ns_vision *v, const float *pixels, uint32_t grid_t, uint32_t grid_h,
		     uint32_t grid_w, const struct ns_vision_out *out)
{
	const struct ns_vision_hparams *hp = &v->hp;
	struct s_act a = { .n = (uint64_t)grid_t * grid_h * grid_w };
	const uint64_t n_tok = a.n / ((uint64_t)hp->merge * hp->merge);
	float *ds = out->deepstack;
	int rc;

	if (!a.n || grid_h % hp->merge || grid_w % hp->merge || !out->embd ||
	    (hp->n_deepstack && !ds)) {
		ns_errf(v->err, sizeof(v->err), "vision: grid %ux%ux%u is not whole %ux%u merge "
			"groups, or an output is missing", grid_t, grid_h, grid_w, hp->merge,
			hp->merge);
		return -EINVAL;
	}
	if (v->encode)
		return v->encode(v->encode_user, pixels, grid_t, grid_h, grid_w, out, v->err,
				 sizeof(v->err));
	if ((rc = s_alloc_act(v, &a)) < 0 || (rc = s_embed(v, &a, pixels, grid_t, grid_h, grid_w)))
		goto out;
	ns_vision_rope_table(a.cs, grid_t, grid_h, grid_w, hp->merge, hp->head_dim,
			     hp->rope_theta);
	for (uint32_t l = 0; l < hp->n_layer; l++) {
		if ((rc = s_block(v, &v->layers[l], &a, grid_t)) < 0)
			goto out;
		if (v->layers[l].ds) {
			if ((rc = s_merge(v, v->layers[l].ds, &a, ds)) < 0)
				goto out;
			ds += n_tok * hp->n_embd_out;
		}
	}
	if (out->last_hidden)
		memcpy(out->last_hidden, a.x, a.n * hp->n_embd * sizeof(float));
	rc = s_merge(v, &v->merger, &a, out->embd);
out:
	s_act_free(&a);
	return rc;
}
