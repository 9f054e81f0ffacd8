/* vision.h - the Qwen3-VL / Qwen3.5 vision tower (mmproj "qwen3vl_merger"), cpu.
 *
 * For one image (or video) of grid (t, h, w) patches, pixels (t*h*w, 3 * temporal * patch^2)
 * in the processor's order (image_prep.h), with d = n_embd and n = t*h*w:
 *     x = pixels Wpatch^T + bpatch                   Conv3d as one matrix (both frames' kernels)
 *     x += bilinear(pos_grid, h, w)                  learned grid resampled, corners aligned
 *     per block l:
 *         x += attn(LN1(x)) Wo^T + bo                qkv = LN1(x) Wqkv^T + b, 2-D RoPE on q, k
 *                                                    (head_dim/4 frequencies for the patch row,
 *                                                    head_dim/4 for its column, theta 10000),
 *                                                    softmax(q k^T / sqrt(head_dim)) v per frame
 *         x += gelu_tanh(LN2(x) Wup^T + bup) Wdown^T + bdown
 *         deepstack after l: ds = fc2(gelu_erf(fc1(LN(x viewed (n/4, 4d)))))
 *     last_hidden = x
 *     embd = fc2(gelu_erf(fc1(LN(x) viewed (n/4, 4d))))      (mm.0, mm.2)
 * Rows come in 2x2 merge groups, so "viewed (n/4, 4d)" is the same memory.
 *
 * Weights: every matrix (attention, MLP, mergers) is reached only through the weight provider
 * (weights.h), one matmul per matrix and chunk of at most n_batch patches, so over the
 * streaming provider the tower's weights stream through nsio under the session's budgets, and
 * each is read once per chunk, not once per patch. Held at ns_vision_new (read once through
 * get_rows, as the text model's norms): biases, norms, and the patch kernel as float
 * (n_embd x 3 * temporal * patch^2; 7 MiB for Qwen3-VL's 1152-wide tower); the position grid
 * is read through get_rows for each image.
 *
 * Ownership: the model (an mmproj) and the provider over it are borrowed and must outlive the
 * tower; ns_vision_destroy(&v) frees the rest. Not thread-safe: one caller at a time. */
#ifndef NS_VISION_H
#define NS_VISION_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"
#include "vision_hparams.h"
#include "weights.h"

struct ns_vision;

struct ns_vision_opts {
	int n_threads;    /* threads of the patch-embedding and attention kernels; <= 0: 1 */
	uint64_t n_batch; /* patches per weight matmul (each call reads the weights once);
			   * 0 = all of an image's; rounded down to whole merge groups */
	/* called after each matmul and each frame's attention (a long pass is progress:
	 * nscompute beats its heartbeat, which the streaming provider's products beat for the
	 * text model); NULL: none */
	void (*progress)(void *user);
	void *progress_user;
};

/* Where ns_vision_encode writes, all caller-owned, sized from the grid and the hparams:
 * embd:        (n / merge^2, n_embd_out), the image's tokens for the text model
 * deepstack:   (n_deepstack, n / merge^2, n_embd_out), or NULL when n_deepstack is 0
 * last_hidden: (n, n_embd), the encoder's output before the merger; NULL to skip */
struct ns_vision_out {
	float *embd;
	float *deepstack;
	float *last_hidden;
};

/* Check every tensor (presence, shape, computable type) against the hparams and read the held
 * ones. Returns 0, or -EINVAL (with the tensor's name), -ENOMEM, or the provider's error, with
 * one line in err. opts may be NULL. */
int ns_vision_new(const struct ns_model *m, struct ns_weights *w, const struct ns_vision_opts *opts,
		  struct ns_vision **out, char *err, size_t errlen);

const struct ns_vision_hparams *ns_vision_hparams(const struct ns_vision *v);

/* Run the tower over pixels (grid_t * grid_h * grid_w rows). grid_h and grid_w must be
 * multiples of merge. Returns 0, -EINVAL (bad grid), -ENOMEM, or the provider's error;
 * ns_vision_error says why. */
int ns_vision_encode(struct ns_vision *v, const float *pixels, uint32_t grid_t, uint32_t grid_h,
		     uint32_t grid_w, const struct ns_vision_out *out);

/* The most heap ns_vision_encode takes for an image of n_patches patches (one frame) with
 * opts' n_batch (0: all of an image's, as nscompute runs it): its activations (s_alloc_act),
 * the position rows of the patch embedding and one frame's attention scratch; the weights,
 * the pixels and the outputs are the caller's. UINT64_MAX on overflow. Kept beside the
 * allocations it counts (vision_encode.c), so that the budgets (nsctl's fixed set) follow
 * them. */
uint64_t ns_vision_work_bytes(const struct ns_vision_hparams *hp, uint64_t n_patches,
			      uint64_t n_batch);

/* The bytes the tower holds from ns_vision_new to its destroy (biases, norms and the patch
 * kernel as float: the floats it allocates at setup, s_hold in vision.c) plus the largest
 * transient of that setup (one frame's kernel as read), from the hparams alone: what nsctl
 * counts in the fixed set for the tower (its matrices and the position grid stream through
 * the arena). Kept beside the allocations it counts; ns_vision_held(v) is what a built tower
 * holds (ns_vision_held_bytes less the transient, tested). */
uint64_t ns_vision_held_bytes(const struct ns_vision_hparams *hp);
uint64_t ns_vision_held(const struct ns_vision *v);

/* Another implementation of the encoder (the CUDA tower, nscompute/cuda/ctower.h) behind
 * ns_vision_encode: once set, ns_vision_encode checks its arguments as always, then returns
 * fn(user, ...) instead of running the host tower; fn writes one line in err on failure.
 * fn NULL: the host tower again. The tower's setup (held vectors, tensor ids) is unchanged,
 * and fn may read it (vision_impl.h). */
typedef int (*ns_vision_encode_fn)(void *user, const float *pixels, uint32_t grid_t,
				   uint32_t grid_h, uint32_t grid_w,
				   const struct ns_vision_out *out, char *err, size_t errlen);
void ns_vision_set_encoder(struct ns_vision *v, ns_vision_encode_fn fn, void *user);

const char *ns_vision_error(const struct ns_vision *v);

void ns_vision_destroy(struct ns_vision **v);

#endif
