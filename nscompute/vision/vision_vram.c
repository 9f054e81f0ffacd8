/* vision_vram.c - see vision_vram.h. The list of allocations is ctower.c's s_layout, in its
 * order; a change there must be made here (test_ctower fails otherwise). */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "ggml_type.h"
#include "gpu_need.h"
#include "image_embed.h"
#include "ns_util.h"
#include "vision_vram.h"

/* What does not depend on the image: the vectors and the matrices' widest row, largest
 * matrix and the dequantized piece's sizing. */
struct s_fixed {
	uint64_t vectors;
	uint64_t widest, largest;      /* bytes of the widest row, of the largest matrix */
	const struct ns_model_tensor *mat[2 * NS_VISION_MAX_LAYERS * 3 + 2];
	uint32_t n_mat;
};

static uint64_t s_round(uint64_t b)
{
	return (b + NS_VISION_VRAM_GRAN - 1) / NS_VISION_VRAM_GRAN * NS_VISION_VRAM_GRAN;
}

/* *acc += a * b floats, rounded as ns_vram allocates them (at least one byte). */
static bool s_add(uint64_t *acc, uint64_t a, uint64_t b)
{
	uint64_t n;

	if (ns_mul_u64_overflow(a, b, &n) || ns_mul_u64_overflow(n, sizeof(float), &n) ||
	    n > UINT64_MAX - NS_VISION_VRAM_GRAN)
		return false;
	return !ns_add_u64_overflow(*acc, s_round(n ? n : 1), acc);
}

static int s_matrix(const struct ns_model *m, struct s_fixed *f, const char *name, char *err,
		    size_t errlen)
{
	const int64_t i = ns_model_find_index(m, name);
	const struct ns_model_tensor *t;

	if (i < 0 || !m->tensors[i].row_bytes) {
		ns_errf(err, errlen, "vision (cuda): the mmproj has no matrix %s", name);
		return -EINVAL;
	}
	t = &m->tensors[i];
	f->mat[f->n_mat++] = t;
	f->widest = t->row_bytes > f->widest ? t->row_bytes : f->widest;
	f->largest = t->n_bytes > f->largest ? t->n_bytes : f->largest;
	return 0;
}

/* A merger's vectors: norm (norm_dim) x 2, fc1's bias (wide), fc2's (n_embd_out). */
static bool s_merger_vectors(const struct ns_vision_hparams *hp, uint64_t norm_dim,
			     uint64_t *acc)
{
	const uint64_t wide = (uint64_t)hp->n_embd * hp->merge * hp->merge;

	return s_add(acc, norm_dim, 1) && s_add(acc, norm_dim, 1) && s_add(acc, wide, 1) &&
	       s_add(acc, hp->n_embd_out, 1);
}

static int s_fixed(const struct ns_model *m, const struct ns_vision_hparams *hp,
		   struct s_fixed *f, char *err, size_t errlen)
{
	const uint64_t d = hp->n_embd, wide = d * hp->merge * hp->merge;
	const uint64_t patch_dim = 3ull * hp->temporal * hp->patch * hp->patch;
	char name[96];
	bool ok;
	int rc;

	memset(f, 0, sizeof(*f));
	if (hp->n_layer > NS_VISION_MAX_LAYERS || !hp->merge || !hp->n_head) {
		ns_errf(err, errlen, "vision (cuda): the tower's hparams are not usable");
		return -EINVAL;
	}
	ok = s_add(&f->vectors, d, patch_dim) && s_add(&f->vectors, d, 1);
	for (uint32_t l = 0; ok && l < hp->n_layer; l++) {
		static const char *const mats[] = { "attn_qkv", "attn_out", "ffn_up", "ffn_down" };

		/* ln1 w b, ln2 w b, qkv's bias, out's, up's, down's (s_layout's order) */
		ok = s_add(&f->vectors, d, 1) && s_add(&f->vectors, d, 1) &&
		     s_add(&f->vectors, d, 1) && s_add(&f->vectors, d, 1) &&
		     s_add(&f->vectors, 3 * d, 1) && s_add(&f->vectors, d, 1) &&
		     s_add(&f->vectors, hp->n_ff, 1) && s_add(&f->vectors, d, 1);
		for (int k = 0; ok && k < 4; k++) {
			snprintf(name, sizeof(name), "v.blk.%u.%s.weight", l, mats[k]);
			if ((rc = s_matrix(m, f, name, err, errlen)) < 0)
				return rc;
		}
		if (ok && hp->deepstack[l]) {
			ok = s_merger_vectors(hp, wide, &f->vectors);
			for (int k = 1; ok && k <= 2; k++) {
				snprintf(name, sizeof(name), "v.deepstack.%u.fc%d.weight", l, k);
				if ((rc = s_matrix(m, f, name, err, errlen)) < 0)
					return rc;
			}
		}
	}
	ok = ok && s_merger_vectors(hp, d, &f->vectors);
	if (ok && ((rc = s_matrix(m, f, "mm.0.weight", err, errlen)) < 0 ||
		   (rc = s_matrix(m, f, "mm.2.weight", err, errlen)) < 0))
		return rc;
	if (!ok) {
		ns_errf(err, errlen, "vision (cuda): the tower's vectors overflow");
		return -EOVERFLOW;
	}
	return 0;
}

/* The float32 copy of the largest staged piece of any matrix (rows of stage bytes, at most
 * the matrix's own): none for F32 rows, multiplied where they were copied. */
static uint64_t s_deq(const struct s_fixed *f, uint64_t stage)
{
	uint64_t b = 0;

	for (uint32_t i = 0; i < f->n_mat; i++) {
		const struct ns_model_tensor *t = f->mat[i];
		const uint64_t per = stage / t->row_bytes;
		uint64_t x;

		if (t->type == NS_TYPE_F32)
			continue;
		x = (per < t->n_rows ? per : t->n_rows) * t->ne[0] * sizeof(float);
		b = x > b ? x : b;
	}
	return b;
}

static int s_need(const struct s_fixed *f, const struct ns_vision_hparams *hp, uint64_t n,
		  uint32_t grid_t, uint64_t stage, uint64_t ws_max, struct ns_vision_vram *o,
		  char *err, size_t errlen)
{
	const uint64_t d = hp->n_embd, group = (uint64_t)hp->merge * hp->merge;
	const uint64_t patch_dim = 3ull * hp->temporal * hp->patch * hp->patch;
	const uint64_t ng = n / group, cap = ws_max ? ws_max : NS_VISION_VRAM_WS;
	uint64_t frame, act = 0;

	memset(o, 0, sizeof(*o));
	if (!grid_t || !n || n % grid_t || n % group) {
		ns_errf(err, errlen, "vision (cuda): %llu patches in %u frames are not whole merge "
			"groups", (unsigned long long)n, grid_t);
		return -EINVAL;
	}
	frame = n / grid_t;
	/* queries per attention launch: the workspace under the cap, at least one */
	o->queries = frame < NS_VISION_VRAM_ROWS_MAX ? frame : NS_VISION_VRAM_ROWS_MAX;
	while (o->queries > 1 &&
	       nsplan_gpu_attn_ws(o->queries, hp->n_head, frame, hp->head_dim) > cap)
		o->queries = (o->queries + 1) / 2;
	o->ws_bytes = nsplan_gpu_attn_ws(o->queries, hp->n_head, frame, hp->head_dim);
	o->stage_bytes = stage ? stage : NS_VISION_VRAM_STAGE;
	if (!stage && o->stage_bytes > f->largest)
		o->stage_bytes = f->largest;
	if (o->stage_bytes < f->widest)
		o->stage_bytes = f->widest;
	o->deq_bytes = s_deq(f, o->stage_bytes);
	if (o->ws_bytes == UINT64_MAX || o->ws_bytes > UINT64_MAX - NS_VISION_VRAM_GRAN ||
	    o->stage_bytes > UINT64_MAX / 4 || o->deq_bytes > UINT64_MAX / 4 ||
	    !s_add(&act, n, patch_dim) || !s_add(&act, n, d) || !s_add(&act, n, hp->head_dim) ||
	    !s_add(&act, n, d) || !s_add(&act, n, d) || !s_add(&act, n, 3 * d) ||
	    !s_add(&act, n, d) || !s_add(&act, n, hp->n_ff) || !s_add(&act, ng, hp->n_embd_out) ||
	    (hp->n_deepstack && !s_add(&act, (uint64_t)hp->n_deepstack * ng, hp->n_embd_out))) {
		ns_errf(err, errlen, "vision (cuda): the VRAM need of %llu patches overflows",
			(unsigned long long)n);
		return -EOVERFLOW;
	}
	o->vectors = f->vectors;
	o->activations = act;
	o->attn_ws = s_round(o->ws_bytes ? o->ws_bytes : 1);
	o->staging = s_round(o->stage_bytes) + (o->deq_bytes ? s_round(o->deq_bytes) : 0);
	if (ns_add_u64_overflow(o->vectors, o->activations, &o->total) ||
	    ns_add_u64_overflow(o->total, o->attn_ws, &o->total) ||
	    ns_add_u64_overflow(o->total, o->staging, &o->total)) {
		ns_errf(err, errlen, "vision (cuda): the VRAM need overflows");
		return -EOVERFLOW;
	}
	return 0;
}

int ns_vision_vram_need(const struct ns_model *m, const struct ns_vision_hparams *hp,
			uint64_t n_patches, uint32_t grid_t, uint64_t stage_bytes,
			uint64_t attn_ws_max, struct ns_vision_vram *out, char *err, size_t errlen)
{
	struct s_fixed f;
	int rc;

	memset(out, 0, sizeof(*out));
	if ((rc = s_fixed(m, hp, &f, err, errlen)) < 0)
		return rc;
	return s_need(&f, hp, n_patches, grid_t, stage_bytes, attn_ws_max, out, err, errlen);
}

int ns_vision_vram_largest(const struct ns_model *m, const struct ns_vision_hparams *hp,
			   const struct ns_image_limits *lim, uint32_t n_ctx,
			   struct ns_vision_vram *out, uint64_t *max_tokens, char *err,
			   size_t errlen)
{
	const uint64_t group = (uint64_t)hp->merge * hp->merge;
	struct ns_image_work w;
	struct s_fixed f;
	int rc;

	memset(out, 0, sizeof(*out));
	if (max_tokens)
		*max_tokens = 0;
	if ((rc = s_fixed(m, hp, &f, err, errlen)) < 0)
		return rc;
	if (ns_image_work_bytes(hp, lim, n_ctx, 1, &w) < 0 || !w.max_tokens) {
		ns_errf(err, errlen, "vision (cuda): no image fits a context of %u tokens", n_ctx);
		return -EINVAL;
	}
	/* every size up to the largest: the attention workspace is not monotonic in the
	 * patches (its queries are halved under the cap), the rest grows with them */
	for (uint64_t t = 1; t <= w.max_tokens; t++) {
		struct ns_vision_vram x;

		if ((rc = s_need(&f, hp, t * group, 1, 0, 0, &x, err, errlen)) < 0)
			return rc;
		if (x.total > out->total)
			*out = x;
	}
	if (max_tokens)
		*max_tokens = w.max_tokens;
	return 0;
}
