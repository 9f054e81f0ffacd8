/* gemma.c - the gemma builder's setup (gemma.h): every layer's tensors, vectors, RoPE, KV
 * cache (own, or the layer it shares), the attention workspaces and the scratch. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn.h"
#include "gemma.h"
#include "moe.h"

static void s_destroy(void *arch)
{
	struct ns_gemma *G = arch;

	if (!G)
		return;
	for (uint32_t l = 0; G->layers && l < G->n_layer; l++)
		ns_kvcache_destroy(&G->layers[l].kv);
	for (uint32_t i = 0; G->ws && i < G->n_ws; i++)
		ns_attn_ws_destroy(&G->ws[i]);
	free(G->ws);
	free(G->layers);
	ns_moe_destroy(&G->moe);
	free(G->xm);
	free(G->ids);
	free(G->x);
	free(G->xb);
	free(G->xb2);
	free(G->q);
	free(G->k);
	free(G->v);
	free(G->ao);
	free(G->hb);
	free(G->hu);
	free(G->pl);
	free(G->pg);
	free(G->cs);
	free(G);
}

/* *p = zeroed (rows, cols) floats, the size product checked. */
static int s_floats(float **p, uint64_t rows, uint64_t cols)
{
	uint64_t bytes;

	if (ns_mul_u64_overflow(rows, cols, &bytes) ||
	    ns_mul_u64_overflow(bytes, sizeof(float), &bytes) || bytes > SIZE_MAX)
		return -EOVERFLOW;
	*p = calloc(1, bytes ? (size_t)bytes : 1);
	return *p ? 0 : -ENOMEM;
}

static uint32_t s_tensor(const struct ns_fwd *f, int32_t layer, unsigned slot)
{
	return (uint32_t)ns_arch_tensor(f->am, layer, slot);
}

/* RoPE of layer l: sliding layers rope.freq_base_swa (10000 when absent), unscaled, over
 * rope.dimension_count_swa dims; global layers rope.freq_base, linear scaling, rope_freqs. */
static int s_rope_init(struct ns_fwd *f, struct ns_gemma_layer *y, bool swa, char *err,
		       size_t errlen)
{
	const struct ns_hparams *hp = &f->am->hp;
	double base = 10000.0;
	uint64_t dims = hp->rope_dims;

	y->rope.neox = f->am->arch->flags & NS_ARCH_ROPE_NEOX;
	y->rope.freq_scale = 1.0f;
	if (swa) {
		ns_hparams_get_f64(f->am->m, hp->arch, "rope.freq_base_swa", &base);
		ns_hparams_get_u64(f->am->m, hp->arch, "rope.dimension_count_swa", &dims);
	} else {
		base = hp->rope_freq_base;
		if (!strcmp(hp->rope_scaling_type, "yarn")) {
			ns_errf(err, errlen, "forward: %s with yarn rope scaling is not supported",
				hp->arch);
			return -EINVAL;
		}
		if (strcmp(hp->rope_scaling_type, "none") && hp->rope_scale > 0)
			y->rope.freq_scale = (float)(1.0 / hp->rope_scale);
		y->rope.freq_factors = ns_held_get(f->held, -1, NS_T_ROPE_FREQS);
	}
	if (!dims || dims % 2 || dims > y->dk || !(base > 0)) {
		ns_errf(err, errlen, "forward: %s: rope dimension count %llu or base %g does not "
			"fit heads of %u", hp->arch, (unsigned long long)dims, base, y->dk);
		return -EINVAL;
	}
	y->rope.n_dims = (uint32_t)dims;
	y->rope.freq_base = (float)base;
	return 0;
}

/* The layer a KV-shared layer reads: the last layer with a cache of its own and the same
 * kind (sliding or global), as Transformers' kv_shared_layer_index. */
static int s_kv_source(struct ns_fwd *f, struct ns_gemma *G, uint32_t l, char *err,
		       size_t errlen)
{
	const bool swa = f->am->layer[l].kinds & NS_LAYER_SWA;

	for (uint32_t j = l; j-- > 0;) {
		if (G->layers[j].own_kv && !!(f->am->layer[j].kinds & NS_LAYER_SWA) == swa &&
		    G->layers[j].n_head_kv == G->layers[l].n_head_kv &&
		    G->layers[j].dk == G->layers[l].dk) {
			G->layers[l].kv_src = j;
			return 0;
		}
	}
	ns_errf(err, errlen, "forward: %s layer %u shares K/V but no earlier %s layer of its head "
		"geometry has any", f->am->hp.arch, l, swa ? "sliding" : "global");
	return -EINVAL;
}

static int s_layer_init(struct ns_fwd *f, struct ns_gemma *G, uint32_t l, char *err,
			size_t errlen)
{
	const struct ns_arch_layer *al = &f->am->layer[l];
	struct ns_gemma_layer *y = &G->layers[l];
	const struct ns_held *h = f->held;
	const int32_t i = (int32_t)l;

	y->n_head_kv = (uint32_t)al->dim[NS_DIM_HEAD_KV];
	y->dk = (uint32_t)al->dim[NS_DIM_DK];
	y->n_ff = (uint32_t)al->dim[NS_DIM_FF];
	y->window = al->window;
	if (al->dim[NS_DIM_DV] != y->dk) {
		ns_errf(err, errlen, "forward: %s layer %u: value heads of %llu differ from key "
			"heads of %u", f->am->hp.arch, l, (unsigned long long)al->dim[NS_DIM_DV],
			y->dk);
		return -EINVAL;
	}
	y->own_kv = !(al->kinds & NS_LAYER_KV_SHARED);
	y->kv_src = l;
	y->wq = s_tensor(f, i, NS_T_ATTN_Q);
	y->wo = s_tensor(f, i, NS_T_ATTN_OUT);
	if (y->own_kv) {
		y->wk = s_tensor(f, i, NS_T_ATTN_K);
		y->has_v = ns_arch_tensor(f->am, i, NS_T_ATTN_V) >= 0;
		y->wv = y->has_v ? s_tensor(f, i, NS_T_ATTN_V) : y->wk;
	}
	y->w_gate = s_tensor(f, i, NS_T_FFN_GATE);
	y->w_up = s_tensor(f, i, NS_T_FFN_UP);
	y->w_down = s_tensor(f, i, NS_T_FFN_DOWN);
	if (al->kinds & NS_LAYER_PLE) {
		y->ple_gate = s_tensor(f, i, NS_T_PLE_INP_GATE);
		y->ple_proj = s_tensor(f, i, NS_T_PLE_PROJ);
		y->ple_post_norm = ns_held_get(h, i, NS_T_PLE_POST_NORM);
	}
	y->attn_norm = ns_held_get(h, i, NS_T_ATTN_NORM);
	y->q_norm = ns_held_get(h, i, NS_T_ATTN_Q_NORM);
	y->k_norm = ns_held_get(h, i, NS_T_ATTN_K_NORM);
	y->attn_post_norm = ns_held_get(h, i, NS_T_ATTN_POST_NORM);
	y->ffn_norm = ns_held_get(h, i, NS_T_FFN_NORM);
	y->ffn_post_norm = ns_held_get(h, i, NS_T_FFN_POST_NORM);
	y->out_scale = ns_held_get(h, i, NS_T_LAYER_OUT_SCALE);
	y->moe = al->kinds & NS_LAYER_MOE;
	if (y->moe) {
		y->ffn_post_norm_1 = ns_held_get(h, i, NS_T_FFN_POST_NORM_1);
		y->ffn_pre_norm_2 = ns_held_get(h, i, NS_T_FFN_PRE_NORM_2);
		y->ffn_post_norm_2 = ns_held_get(h, i, NS_T_FFN_POST_NORM_2);
	}
	if (!y->own_kv)
		return s_kv_source(f, G, l, err, errlen);
	return s_rope_init(f, y, al->kinds & NS_LAYER_SWA, err, errlen);
}

/* Shared layers rotate their queries as the layer they read rotated its keys. */
static void s_shared_rope(struct ns_gemma *G)
{
	for (uint32_t l = 0; l < G->n_layer; l++)
		if (!G->layers[l].own_kv)
			G->layers[l].rope = G->layers[G->layers[l].kv_src].rope;
}

/* llama.cpp's rule for gemma3: attention.scale when the file has it, else 1/sqrt(n_embd /
 * n_head) for the 62-layer 27B (query_pre_attn_scalar), else 1/sqrt(head size); gemma4: 1. */
static float s_attn_scale(const struct ns_fwd *f)
{
	const struct ns_hparams *hp = &f->am->hp;
	double scale = 0.0;

	if (f->am->arch->flags & NS_ARCH_V_NORM)
		return 1.0f;
	if (ns_hparams_get_f64(f->am->m, hp->arch, "attention.scale", &scale) && scale > 0)
		return (float)scale;
	if (hp->n_layer == 62)
		return 1.0f / sqrtf((float)(hp->n_embd / hp->n_head));
	return 1.0f / sqrtf((float)hp->head_dim_k);
}

/* The window a cache's ring must serve: the widest of the layers reading it (itself and
 * the KV-shared ones), 0 when one of them attends to everything. */
static uint32_t s_ring_window(const struct ns_gemma *G, uint32_t src)
{
	uint32_t w = G->layers[src].window;

	for (uint32_t l = src + 1; l < G->n_layer && w; l++) {
		const struct ns_gemma_layer *y = &G->layers[l];

		if (y->own_kv || y->kv_src != src)
			continue;
		if (!y->window)
			return 0;
		if (y->window > w)
			w = y->window;
	}
	return w;
}

/* f->arch_cut: a cut back to keep needs positions keep + 1 - window .. keep - 1 of every
 * ring (the next token's window); a ring that overwrote one of them refuses. */
static int s_cut(struct ns_fwd *f, uint32_t seq, uint32_t keep)
{
	struct ns_gemma *G = f->arch;

	(void)seq; /* one sequence (ns_fwd_seqs_init refuses more without a host cache) */

	for (uint32_t l = 0; l < G->n_layer; l++) {
		struct ns_kvcache *kv = G->layers[l].kv;
		const uint32_t w = G->layers[l].ring_window;

		if (!kv || !ns_kvcache_is_ring(kv))
			continue;
		if (!keep) {
			kv->lo = 0; /* everything is written again before it is read */
			continue;
		}
		if (kv->lo > (keep + 1 > w ? keep + 1 - w : 0)) {
			ns_errf(f->err, sizeof(f->err), "forward: cannot go back to position %u: "
				"layer %u's sliding-window cache (a ring of %u positions, window %u) "
				"no longer holds position %u; evaluate from the start", keep, l,
				kv->n_slot, w, kv->lo - 1);
			return -ERANGE;
		}
	}
	return 0;
}

/* Each layer with its own K/V: a one-layer cache (a ring of the window on sliding layers),
 * and the workspace of its geometry. */
static int s_caches_init(struct ns_fwd *f, struct ns_gemma *G, char *err, size_t errlen)
{
	struct ns_pool *pool = ns_weights_pool(f->w);
	const int threads = pool ? ns_pool_threads(pool) : 1;

	G->ws = calloc(G->n_layer, sizeof(*G->ws));
	if (!G->ws)
		return -ENOMEM;
	for (uint32_t l = 0; l < G->n_layer; l++) {
		struct ns_gemma_layer *y = &G->layers[l];
		uint32_t w = 0;
		int rc;

		if (!y->own_kv)
			continue;
		y->ring_window = s_ring_window(G, l);
		rc = ns_kvcache_new_ring(1, f->n_ctx, ns_kv_ring_positions(y->ring_window,
									   f->n_batch, f->n_ctx),
					 y->n_head_kv, y->dk, y->dk, (enum ns_kv_type)f->kv_k,
					 (enum ns_kv_type)f->kv_v, &y->kv);
		if (rc == -EINVAL) {
			ns_errf(err, errlen, "forward: a %s/%s KV cache needs head sizes that are "
				"multiples of 32 (layer %u: %u)",
				ns_kv_type_name((enum ns_kv_type)f->kv_k),
				ns_kv_type_name((enum ns_kv_type)f->kv_v), l, y->dk);
			return rc;
		}
		if (rc < 0)
			return rc;
		f->arch_cache_bytes += ns_kvcache_bytes(y->kv);
		/* an earlier layer of this geometry has its workspace already */
		for (w = 0; w < l && !y->ws; w++)
			if (G->layers[w].own_kv && G->layers[w].n_head_kv == y->n_head_kv &&
			    G->layers[w].dk == y->dk)
				y->ws = G->layers[w].ws;
		if (y->ws)
			continue;
		y->ws = ns_attn_ws_new(threads, G->n_head, y->n_head_kv, y->dk, y->dk, f->n_ctx);
		if (!y->ws)
			return -ENOMEM;
		G->ws[G->n_ws++] = y->ws;
	}
	for (uint32_t l = 0; l < G->n_layer; l++)
		if (!G->layers[l].own_kv)
			G->layers[l].ws = G->layers[G->layers[l].kv_src].ws;
	return 0;
}

static int s_scratch_init(struct ns_gemma *G, uint32_t n_batch)
{
	const uint64_t nb = n_batch, ple_all = (uint64_t)G->n_layer * G->ple;
	uint32_t max_rope = 0;
	int rc;

	for (uint32_t l = 0; l < G->n_layer; l++)
		if (G->layers[l].rope.n_dims > max_rope)
			max_rope = G->layers[l].rope.n_dims;
	G->ids = calloc(n_batch, sizeof(*G->ids));
	if (!G->ids)
		return -ENOMEM;
	if ((rc = s_floats(&G->x, nb, G->n_embd)) || (rc = s_floats(&G->xb, nb, G->n_embd)) ||
	    (rc = s_floats(&G->xb2, nb, G->n_embd)) || (rc = s_floats(&G->q, nb, G->max_q)) ||
	    (rc = s_floats(&G->k, nb, G->max_kv)) || (rc = s_floats(&G->v, nb, G->max_kv)) ||
	    (rc = s_floats(&G->ao, nb, G->max_q)) ||
	    (rc = s_floats(&G->hb, nb, ple_all > G->max_ff ? ple_all : G->max_ff)) ||
	    (rc = s_floats(&G->hu, nb, G->ffn_rows)) ||
	    (rc = s_floats(&G->pl, nb, ple_all)) ||
	    (rc = s_floats(&G->pg, nb, G->ple)) || (rc = s_floats(&G->cs, max_rope, 1)) ||
	    (G->moe && (rc = s_floats(&G->xm, nb, G->n_embd))))
		return rc;
	return 0;
}

/* Widths of the scratch: the widest layer of each kind. */
static void s_widths(struct ns_gemma *G)
{
	for (uint32_t l = 0; l < G->n_layer; l++) {
		const struct ns_gemma_layer *y = &G->layers[l];
		const uint32_t q = G->n_head * y->dk, kv = y->n_head_kv * y->dk;

		G->max_q = q > G->max_q ? q : G->max_q;
		G->max_kv = kv > G->max_kv ? kv : G->max_kv;
		G->max_ff = y->n_ff > G->max_ff ? y->n_ff : G->max_ff;
	}
}

static void s_globals_init(struct ns_fwd *f, struct ns_gemma *G)
{
	const struct ns_arch_model *am = f->am;
	double cap = 0.0;

	G->n_embd = (uint32_t)am->dim[NS_DIM_EMBD];
	G->n_layer = am->n_layer;
	G->n_head = (uint32_t)am->dim[NS_DIM_HEAD];
	G->ple = (uint32_t)am->dim[NS_DIM_PLE];
	G->eps = (float)am->hp.rms_eps;
	G->attn_scale = s_attn_scale(f);
	G->v_norm = am->arch->flags & NS_ARCH_V_NORM;
	if ((am->arch->flags & NS_ARCH_LOGIT_SOFTCAP) &&
	    ns_hparams_get_f64(am->m, am->hp.arch, "final_logit_softcapping", &cap) && cap > 0)
		G->softcap = (float)cap;
	G->tok_embd = s_tensor(f, -1, NS_T_TOKEN_EMBD);
	G->output = s_tensor(f, -1, NS_T_OUTPUT);
	f->n_tok_rows = am->m->tensors[G->tok_embd].n_rows;
	if (G->ple) {
		G->ple_embd = s_tensor(f, -1, NS_T_PER_LAYER_TOKEN_EMBD);
		G->ple_model_proj = s_tensor(f, -1, NS_T_PER_LAYER_MODEL_PROJ);
		G->ple_proj_norm = ns_held_get(f->held, -1, NS_T_PER_LAYER_PROJ_NORM);
		if (am->m->tensors[G->ple_embd].n_rows < f->n_tok_rows)
			f->n_tok_rows = am->m->tensors[G->ple_embd].n_rows;
	}
	G->n_vocab = f->n_vocab = (uint32_t)am->dim[NS_DIM_VOCAB];
	G->output_norm = ns_held_get(f->held, -1, NS_T_OUTPUT_NORM);
}

int ns_gemma_init(struct ns_fwd *f, uint32_t ffn_rows, char *err, size_t errlen)
{
	return ns_gemma_setup(f, ffn_rows, true, err, errlen);
}

int ns_gemma_setup(struct ns_fwd *f, uint32_t ffn_rows, bool host_state, char *err,
		   size_t errlen)
{
	const struct ns_arch_model *am = f->am;
	struct ns_gemma *G;
	int rc;

	G = calloc(1, sizeof(*G));
	if (!G || !(G->layers = calloc(am->n_layer, sizeof(*G->layers)))) {
		free(G);
		ns_errf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	f->arch = G;
	f->arch_destroy = s_destroy;
	f->arch_cut = s_cut;
	f->eval_chunk = ns_gemma_eval_chunk;
	rc = ns_held_load(am, f->w, &f->held, err, errlen);
	if (rc < 0)
		return rc;
	s_globals_init(f, G);
	for (uint32_t l = 0; l < G->n_layer; l++)
		if ((rc = s_layer_init(f, G, l, err, errlen)))
			return rc;
	s_shared_rope(G);
	s_widths(G);
	G->ffn_rows = ffn_rows && ffn_rows < G->max_ff ? ffn_rows : G->max_ff;
	f->kv = calloc(1, sizeof(*f->kv)); /* n_past only: the layers own the caches */
	if (!f->kv) {
		ns_errf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	f->kv->n_ctx = f->kv->n_slot = f->n_ctx; /* holds nothing: not a ring */
	/* the experts' description (and f->expert_hits) for both passes: the CUDA pass routes
	 * and counts through it too (cfwd_moe_routed) */
	if ((am->kinds & NS_LAYER_MOE) &&
	    (rc = ns_moe_new(f, f->n_batch, ffn_rows, &G->moe, err, errlen)))
		return rc;
	if (!host_state) { /* the backend keeps its own caches and scratch (nscompute/cuda) */
		f->arch_cut = NULL;
		return 0;
	}
	rc = s_caches_init(f, G, err, errlen);
	if (rc == 0)
		rc = s_scratch_init(G, f->n_batch);
	if (rc < 0 && rc != -EINVAL)
		ns_errf(err, errlen, "forward: cannot allocate the KV caches and scratch for "
			"n_ctx %u, n_batch %u: %s", f->n_ctx, f->n_batch, strerror(-rc));
	return rc;
}
