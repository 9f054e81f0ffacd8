/* vision_impl.h - the tower's state, shared by vision.c (setup) and vision_encode.c (internal). */
#ifndef NS_VISION_IMPL_H
#define NS_VISION_IMPL_H

#include <stdbool.h>

#include "ns_util.h"
#include "threadpool.h"
#include "vision.h"

/* A merger: LayerNorm (of `norm_dim`), fc1 (4d -> 4d), GELU (erf), fc2 (4d -> n_embd_out). */
struct ns_vision_merger {
	float *norm_w, *norm_b; /* (norm_dim) */
	uint32_t norm_dim;      /* d: per patch, before the 2x2 view (main merger);
				 * 4d: after it (DeepStack mergers) */
	uint32_t fc1, fc2;      /* tensor ids */
	float *b1;              /* (4d) */
	float *b2;              /* (n_embd_out) */
};

struct ns_vision_layer {
	float *ln1_w, *ln1_b, *ln2_w, *ln2_b; /* (d) */
	uint32_t qkv, o, up, down;            /* tensor ids */
	float *b_qkv;                         /* (3d): q | k | v, each [head][head_dim] */
	float *b_o;                           /* (d) */
	float *b_up;                          /* (n_ff) */
	float *b_down;                        /* (d) */
	struct ns_vision_merger *ds;          /* DeepStack merger after this block, or NULL */
};

struct ns_vision {
	struct ns_vision_hparams hp;
	const struct ns_model *m;   /* borrowed */
	struct ns_weights *w;       /* borrowed */
	struct ns_pool *pool;       /* patch embedding and attention kernels */
	uint64_t n_batch;           /* patches per matmul, a multiple of merge^2; 0 = all */
	void (*progress)(void *user); /* ns_vision_opts' */
	void *progress_user;
	uint64_t patch_dim;         /* 3 * temporal * patch^2 */
	float *patch_w;             /* (d, patch_dim): row o = [channel][frame][y][x] */
	float *patch_b;             /* (d) */
	uint32_t pos;               /* tensor id of the (pos_side^2, d) position grid */
	struct ns_vision_layer *layers; /* (n_layer) */
	struct ns_vision_merger merger;
	uint64_t held_bytes;        /* the held float arrays (s_hold), ns_vision_held */
	ns_vision_encode_fn encode; /* ns_vision_set_encoder's, or NULL: the host tower */
	void *encode_user;
	char err[NS_ERR_LEN];
};

/* vision_encode.c: pos (grid_t * grid_h * grid_w, n_embd) = the learned position grid
 * resampled to the image (the rows ns_vision_encode adds after the patch kernel and its bias),
 * merge-group order, every frame the same. Reads the grid through the provider. Returns 0 or
 * -ENOMEM / the provider's error with a line in v's error. */
int ns_vision_pos_rows(struct ns_vision *v, uint32_t grid_t, uint32_t grid_h, uint32_t grid_w,
		       float *pos);

/* vision_ops.c: the float steps of the tower. */

/* malloc of a * b floats (at least one byte), NULL on overflow or failure. */
float *ns_vision_falloc(uint64_t a, uint64_t b);

/* y = (x - mean) / sqrt(var + eps) * w + b per row of n; moments in double. y may be x. */
void ns_vision_layernorm(float *y, const float *x, uint64_t rows, uint32_t n, const float *w,
			 const float *b, float eps);

/* In place: x = gelu(x), tanh approximation (gelu_pytorch_tanh) or exact (erf). */
void ns_vision_gelu_tanh(float *x, uint64_t n);
void ns_vision_gelu_erf(float *x, uint64_t n);

/* cs: (n, head_dim) interleaved per patch as [cos(head_dim/2) | sin(head_dim/2)] of the
 * angles row * f_k (k < head_dim/4) then col * f_k, f_k = theta^(-4k/head_dim), for the
 * patches of a (grid_h, grid_w) frame in merge-group order, repeated over frames. */
void ns_vision_rope_table(float *cs, uint32_t grid_t, uint32_t grid_h, uint32_t grid_w,
			  uint32_t merge, uint32_t head_dim, double theta);

/* x: n rows `stride` floats apart, each heads * head_dim, rotated in place with table cs
 * (rotate-half pairs i, i + head_dim/2). */
void ns_vision_rope_apply(float *x, uint64_t n, uint64_t stride, uint32_t heads,
			  uint32_t head_dim, const float *cs);

/* Bytes ns_vision_attention allocates for n rows of head_dim hd (UINT64_MAX on overflow). */
uint64_t ns_vision_attention_bytes(uint64_t n, uint32_t hd);

/* Full (bidirectional) attention of one frame's `n` patches, all heads:
 * qkv (n, 3 * heads * hd) rows of [q | k | v]; out (n, heads * hd). Uses the gemm kernels;
 * v's progress (NULL v: none) after each block of queries. Returns 0 or -ENOMEM / a kernel
 * error. */
int ns_vision_attention(struct ns_pool *pool, const float *qkv, uint64_t n, uint32_t heads,
			uint32_t hd, float *out, const struct ns_vision *v);

#endif
