/* vision.c - the tower's setup: every tensor checked against the hyperparameters, the small
 * ones read once (see vision.h for what is held and what is streamed). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml_type.h"
#include "vision_impl.h"

static int s_alloc(float **p, uint64_t a, uint64_t b)
{
	*p = ns_vision_falloc(a, b);
	return *p ? 0 : -ENOMEM;
}

/* What the tower holds, as ns_vision_held_bytes counts it: a held float array of a x b. */
static int s_hold(struct ns_vision *v, float **p, uint64_t a, uint64_t b)
{
	int rc = s_alloc(p, a, b);

	if (rc == 0)
		v->held_bytes += 4 * a * b; /* fits: falloc checked the product */
	return rc;
}

uint64_t ns_vision_held_bytes(const struct ns_vision_hparams *hp)
{
	const uint64_t d = hp->n_embd, P = hp->patch, wide = d * hp->merge * hp->merge;
	const uint64_t patch_dim = 3ull * hp->temporal * P * P;
	/* the patch kernel (d, patch_dim) and its bias; the main merger: norm (d), fc1 and fc2
	 * biases; per block: 4 norms (d), qkv (3d), out (d), up (n_ff), down (d) biases; a
	 * DeepStack merger: norm (4d), fc1 and fc2 biases */
	uint64_t f = d * patch_dim + d + 2 * d + wide + hp->n_embd_out;

	for (uint32_t l = 0; l < hp->n_layer; l++) {
		f += 4 * d + 3 * d + d + hp->n_ff + d;
		if (hp->deepstack[l])
			f += 2 * wide + wide + hp->n_embd_out;
	}
	/* + the largest setup transient: one frame's kernel as read (3d x P rows of P floats)
	 * and its row list, freed before the next (s_read_rows) */
	return 4 * f + 3 * d * P * (4 * P + sizeof(int64_t));
}

/* The tensor of that name with exactly ne (n_dims entries, ggml order); matrices must have a
 * type the kernels compute. */
static int s_tensor(struct ns_vision *v, const char *name, uint32_t n_dims, const uint64_t *ne,
		    bool matrix, uint32_t *id)
{
	int64_t i = ns_model_find_index(v->m, name);
	const struct ns_model_tensor *t;
	char tb[32];

	if (i < 0) {
		ns_errf(v->err, sizeof(v->err), "vision: tensor %s is missing", name);
		return -EINVAL;
	}
	t = &v->m->tensors[i];
	for (uint32_t k = 0; k < NS_GGUF_MAX_DIMS; k++)
		if (t->ne[k] != (k < n_dims ? ne[k] : 1)) {
			ns_errf(v->err, sizeof(v->err), "vision: %s has shape [%llu, %llu, %llu, %llu], "
				"not the [%llu, %llu, %llu, %llu] the hparams give", name,
				(unsigned long long)t->ne[0], (unsigned long long)t->ne[1],
				(unsigned long long)t->ne[2], (unsigned long long)t->ne[3],
				(unsigned long long)ne[0],
				(unsigned long long)(n_dims > 1 ? ne[1] : 1),
				(unsigned long long)(n_dims > 2 ? ne[2] : 1),
				(unsigned long long)(n_dims > 3 ? ne[3] : 1));
			return -EINVAL;
		}
	if (!ns_type_computable(t->type)) {
		ns_errf(v->err, sizeof(v->err), "vision: %s has type %s, which we cannot %s", name,
			ns_type_name(t->type, tb, sizeof(tb)), matrix ? "compute" : "read");
		return -EINVAL;
	}
	*id = (uint32_t)i;
	return 0;
}

static int s_matrix(struct ns_vision *v, const char *name, uint64_t n_cols, uint64_t n_rows,
		    uint32_t *id)
{
	const uint64_t ne[2] = { n_cols, n_rows };

	return s_tensor(v, name, 2, ne, true, id);
}

/* rows [0, n_rows) of tensor id as floats into *out (allocated; NULL after a failure). */
static int s_read_rows(struct ns_vision *v, uint32_t id, const char *name, uint64_t n_rows,
		       uint64_t n_cols, bool held, float **out)
{
	int64_t *rows = NULL;
	int rc = held ? s_hold(v, out, n_rows, n_cols) : s_alloc(out, n_rows, n_cols);

	if (rc == 0 && !(rows = malloc(n_rows * sizeof(*rows))))
		rc = -ENOMEM;
	for (uint64_t r = 0; rc == 0 && r < n_rows; r++)
		rows[r] = (int64_t)r;
	if (rc == 0 && (rc = ns_weights_get_rows(v->w, id, rows, n_rows, *out)) < 0)
		ns_errf(v->err, sizeof(v->err), "vision: reading %s: %s", name,
			ns_weights_error(v->w));
	else if (rc < 0)
		ns_errf(v->err, sizeof(v->err), "vision: reading %s: out of memory", name);
	free(rows);
	if (rc < 0) {
		if (held && *out)
			v->held_bytes -= 4 * n_rows * n_cols;
		free(*out);
		*out = NULL;
	}
	return rc;
}

/* A held vector of n floats. */
static int s_vector(struct ns_vision *v, const char *name, uint64_t n, float **out)
{
	uint32_t id;
	int rc = s_tensor(v, name, 1, &n, false, &id);

	return rc ? rc : s_read_rows(v, id, name, 1, n, true, out);
}

/* Both frames' Conv2d kernels (P, P, 3, d) into one (d, [3][T][P][P]) matrix. */
static int s_patch_kernel(struct ns_vision *v)
{
	const struct ns_vision_hparams *hp = &v->hp;
	const uint64_t P = hp->patch, d = hp->n_embd, plane = P * P;
	const uint64_t ne[4] = { P, P, 3, d };
	const char *names[2] = { "v.patch_embd.weight", "v.patch_embd.weight.1" };
	float *k = NULL;
	int rc;

	v->patch_dim = 3 * hp->temporal * plane;
	if ((rc = s_hold(v, &v->patch_w, d, v->patch_dim)) < 0) {
		ns_errf(v->err, sizeof(v->err), "vision: patch kernel: out of memory");
		return rc;
	}
	for (uint32_t t = 0; t < hp->temporal; t++) {
		uint32_t id;

		if ((rc = s_tensor(v, names[t], 4, ne, false, &id)) ||
		    (rc = s_read_rows(v, id, names[t], 3 * d * P, P, false, &k)))
			return rc;
		for (uint64_t o = 0; o < d; o++) /* k: (o, c, y, x) */
			for (uint64_t c = 0; c < 3; c++)
				memcpy(v->patch_w + o * v->patch_dim + (c * hp->temporal + t) * plane,
				       k + (o * 3 + c) * plane, plane * sizeof(float));
		free(k);
		k = NULL;
	}
	return s_vector(v, "v.patch_embd.bias", d, &v->patch_b);
}

static int s_merger(struct ns_vision *v, const char *prefix, const char *norm, const char *fc1,
		    const char *fc2, uint32_t norm_dim, struct ns_vision_merger *g)
{
	const uint64_t wide = (uint64_t)v->hp.n_embd * v->hp.merge * v->hp.merge;
	char name[128];
	int rc;

	g->norm_dim = norm_dim;
#define S_NAME(part, what) (snprintf(name, sizeof(name), "%s%s.%s", prefix, part, what), name)
	if ((rc = s_vector(v, S_NAME(norm, "weight"), norm_dim, &g->norm_w)) ||
	    (rc = s_vector(v, S_NAME(norm, "bias"), norm_dim, &g->norm_b)) ||
	    (rc = s_matrix(v, S_NAME(fc1, "weight"), wide, wide, &g->fc1)) ||
	    (rc = s_vector(v, S_NAME(fc1, "bias"), wide, &g->b1)) ||
	    (rc = s_matrix(v, S_NAME(fc2, "weight"), wide, v->hp.n_embd_out, &g->fc2)) ||
	    (rc = s_vector(v, S_NAME(fc2, "bias"), v->hp.n_embd_out, &g->b2)))
		return rc;
#undef S_NAME
	return 0;
}

static void s_merger_free(struct ns_vision_merger *g)
{
	if (!g)
		return;
	free(g->norm_w);
	free(g->norm_b);
	free(g->b1);
	free(g->b2);
}

static int s_layer(struct ns_vision *v, uint32_t l)
{
	const struct ns_vision_hparams *hp = &v->hp;
	struct ns_vision_layer *y = &v->layers[l];
	const uint64_t d = hp->n_embd;
	char name[96], prefix[64];
	int rc;

#define S_NAME(suffix) (snprintf(name, sizeof(name), "v.blk.%u." suffix, l), name)
	if ((rc = s_vector(v, S_NAME("ln1.weight"), d, &y->ln1_w)) ||
	    (rc = s_vector(v, S_NAME("ln1.bias"), d, &y->ln1_b)) ||
	    (rc = s_vector(v, S_NAME("ln2.weight"), d, &y->ln2_w)) ||
	    (rc = s_vector(v, S_NAME("ln2.bias"), d, &y->ln2_b)) ||
	    (rc = s_matrix(v, S_NAME("attn_qkv.weight"), d, 3 * d, &y->qkv)) ||
	    (rc = s_vector(v, S_NAME("attn_qkv.bias"), 3 * d, &y->b_qkv)) ||
	    (rc = s_matrix(v, S_NAME("attn_out.weight"), d, d, &y->o)) ||
	    (rc = s_vector(v, S_NAME("attn_out.bias"), d, &y->b_o)) ||
	    (rc = s_matrix(v, S_NAME("ffn_up.weight"), d, hp->n_ff, &y->up)) ||
	    (rc = s_vector(v, S_NAME("ffn_up.bias"), hp->n_ff, &y->b_up)) ||
	    (rc = s_matrix(v, S_NAME("ffn_down.weight"), hp->n_ff, d, &y->down)) ||
	    (rc = s_vector(v, S_NAME("ffn_down.bias"), d, &y->b_down)))
		return rc;
#undef S_NAME
	if (!hp->deepstack[l])
		return 0;
	y->ds = calloc(1, sizeof(*y->ds));
	if (!y->ds) {
		ns_errf(v->err, sizeof(v->err), "vision: out of memory");
		return -ENOMEM;
	}
	snprintf(prefix, sizeof(prefix), "v.deepstack.%u.", l); /* named by block, not rank */
	return s_merger(v, prefix, "norm", "fc1", "fc2", (uint32_t)(d * hp->merge * hp->merge),
			y->ds);
}

static int s_setup(struct ns_vision *v, const struct ns_vision_opts *opts)
{
	const uint64_t group = (uint64_t)v->hp.merge * v->hp.merge;
	const uint64_t npos = (uint64_t)v->hp.pos_side * v->hp.pos_side;
	const uint64_t pos_ne[2] = { v->hp.n_embd, npos };
	int rc;

	v->pool = ns_pool_new(opts && opts->n_threads > 1 ? opts->n_threads : 1);
	v->layers = calloc(v->hp.n_layer, sizeof(*v->layers));
	if (!v->pool || !v->layers) {
		ns_errf(v->err, sizeof(v->err), "vision: out of memory");
		return -ENOMEM;
	}
	v->n_batch = opts ? opts->n_batch / group * group : 0;
	v->progress = opts ? opts->progress : NULL;
	v->progress_user = opts ? opts->progress_user : NULL;
	if (opts && opts->n_batch && !v->n_batch)
		v->n_batch = group;
	if ((rc = s_patch_kernel(v)) ||
	    (rc = s_tensor(v, "v.position_embd.weight", 2, pos_ne, false, &v->pos)))
		return rc;
	for (uint32_t l = 0; l < v->hp.n_layer; l++)
		if ((rc = s_layer(v, l)) < 0)
			return rc;
	return s_merger(v, "", "v.post_ln", "mm.0", "mm.2", v->hp.n_embd, &v->merger);
}

int ns_vision_new(const struct ns_model *m, struct ns_weights *w, const struct ns_vision_opts *opts,
		  struct ns_vision **out, char *err, size_t errlen)
{
	struct ns_vision *v = calloc(1, sizeof(*v));
	int rc;

	*out = NULL;
	if (!v) {
		ns_errf(err, errlen, "vision: out of memory");
		return -ENOMEM;
	}
	v->m = m;
	v->w = w;
	rc = ns_vision_hparams_load(m, &v->hp, v->err, sizeof(v->err));
	if (rc == 0)
		rc = s_setup(v, opts);
	if (rc < 0) {
		ns_errf(err, errlen, "%s", v->err);
		ns_vision_destroy(&v);
		return rc;
	}
	*out = v;
	return 0;
}

const struct ns_vision_hparams *ns_vision_hparams(const struct ns_vision *v)
{
	return &v->hp;
}

uint64_t ns_vision_held(const struct ns_vision *v)
{
	return v->held_bytes;
}

const char *ns_vision_error(const struct ns_vision *v)
{
	return v->err;
}

void ns_vision_destroy(struct ns_vision **pv)
{
	struct ns_vision *v;

	if (!pv || !*pv)
		return;
	v = *pv;
	for (uint32_t l = 0; v->layers && l < v->hp.n_layer; l++) {
		struct ns_vision_layer *y = &v->layers[l];

		free(y->ln1_w);
		free(y->ln1_b);
		free(y->ln2_w);
		free(y->ln2_b);
		free(y->b_qkv);
		free(y->b_o);
		free(y->b_up);
		free(y->b_down);
		s_merger_free(y->ds);
		free(y->ds);
	}
	free(v->layers);
	s_merger_free(&v->merger);
	free(v->patch_w);
	free(v->patch_b);
	ns_pool_destroy(&v->pool);
	free(v);
	*pv = NULL;
}
