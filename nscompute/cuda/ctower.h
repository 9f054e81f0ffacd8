/* ctower.h - the vision tower (nscompute/vision/vision.h) run on a CUDA device.
 *
 * The host tower's setup is reused (ns_vision_new: tensors checked, biases, norms and the
 * patch kernel held as floats); ns_ctower_encode runs its forward pass with nscuda.h's kernels:
 *   - the patch kernel as an F32 matrix through the f32 GEMM (ns_cuda_sgemm), its bias as a
 *     bias row;
 *   - every block: LayerNorm with bias (ns_cuda_layernorm), qkv, attention out, MLP up and
 *     down through the f32 GEMM (other weight types dequantized first, ns_cuda_dequant), the 2-D RoPE (ns_cuda_rope_table), bidirectional
 *     per-frame attention (ns_cuda_attention_full), GELU tanh (ns_cuda_gelu), bias rows and
 *     residual adds (glue.cu);
 *   - the DeepStack mergers and the main merger: LayerNorm, fc1, GELU erf, fc2.
 * Stays on the host: the learned position grid resampled to the image (a bilinear blend of
 * four rows per patch, n x d floats, read from the provider once per image and uploaded as
 * rows to add) and the rotary table (n x head_dim floats of cos | sin from double angles,
 * vision_ops.c's ns_vision_rope_table): both are a few MiB at most and computed once per
 * image, not per block, and keeping them on the host keeps their rounding the host tower's.
 *
 * Weights: each matrix is read through the tower's provider (weights.h's visit op: its RAM
 * copy, or nsio's arena blocks) once per image, copied to a staging buffer on the device and
 * multiplied there, as the text pass streams its non-resident rows (cfwd_matmul.c); every
 * patch of the image is one GEMM (no n_batch chunks: device memory holds the image's
 * activations). The provider must hand out raw bytes (visit), else -ENOTSUP.
 *
 * VRAM: one arena (ns_vram) per encode, of exactly ns_ctower_vram_need's bytes (or
 * opts.vram_budget if larger), released before ns_ctower_encode returns; a device that cannot
 * give it, or an arena over opts.vram_cap, is refused with the figures in one line. The sizes
 * are vision_vram.h's arithmetic (no GPU: nsctl counts the same figure in --vram-budget). The host tower's results are the
 * reference: over the emulation (nscuda_emu) the CUDA tower computes them bit for bit (F32
 * weights; other types are dequantized, then multiplied in f32, where the CPU multiplies them
 * directly: rounding-close); the kernels' own sources (simt) within ~1e-6. Not the text pass's
 * prefill GEMM: its f16 operands cost the tower ~5e-4 relative (measured over simt).
 *
 * Outputs go back to the caller's host arrays (struct ns_vision_out): the text pass takes
 * the image's rows from the host (ns_fwd_eval_mm scatters them over the prompt's rows and
 * uploads each chunk's), so the tower's embeddings and DeepStack features make one round trip
 * through host memory: n_tokens x n_embd_out x (1 + n_deepstack) floats, 64 MiB for a
 * 1024-token image into a 4096-wide model with 3 DeepStack levels, a few ms over PCIe and
 * small next to the tower's weights, which cross it once per image.
 *
 * Ownership: the tower (ns_vision) is borrowed and must outlive the ctower. One thread. */
#ifndef NS_CTOWER_H
#define NS_CTOWER_H

#include <stddef.h>
#include <stdint.h>

#include "vision.h"

struct ns_ctower;

struct ns_ctower_opts {
	int device;            /* CUDA device index */
	uint64_t vram_budget;  /* bytes of the per-image arena; 0 = exactly what is needed */
	uint64_t vram_cap;     /* the most an image's arena may take (nscompute-cuda: the tower's
				* share of --vram-budget); more is -ENOSPC; 0 = no cap */
	uint64_t stage_bytes;  /* the staging buffer; 0 = 16 MiB, or the widest row if more */
	uint64_t attn_ws_max;  /* the attention workspace's cap (queries are cut in blocks to
				* fit); 0 = 64 MiB */
	void (*progress)(void *user); /* after each matmul and each layer; NULL: none */
	void *progress_user;
};

/* VRAM figures of an image of n_patches patches (grid_t frames) with these options, exactly
 * (the arena's 256-byte granules included): vision_vram.h ns_vision_vram_need's. */
struct ns_ctower_need {
	uint64_t vectors;     /* biases, norms and the patch kernel (F32) */
	uint64_t activations; /* pixels, position rows, rotary table, x, h, qkv, ao, MLP hidden,
			       * outputs */
	uint64_t attn_ws;     /* the attention workspace of one block of queries */
	uint64_t staging;
	uint64_t total;
};
int ns_ctower_vram_need(const struct ns_vision *v, const struct ns_ctower_opts *opts,
			uint64_t n_patches, uint32_t grid_t, struct ns_ctower_need *need,
			char *err, size_t errlen);

/* Checks that a device is usable (ns_cuda_init). opts may be NULL. 0 or -ENODEV / -EINVAL
 * with a line in err. */
int ns_ctower_new(struct ns_vision *v, const struct ns_ctower_opts *opts,
		  struct ns_ctower **out, char *err, size_t errlen);

/* ns_vision_encode's contract (grid, outputs), on the device. 0, or a negative errno with one
 * line in err: -ENOMEM (VRAM, with figures), -ENOSPC (over opts.vram_cap), -ENOTSUP (a provider without visit), the
 * provider's or a kernel's error. */
int ns_ctower_encode(struct ns_ctower *t, const float *pixels, uint32_t grid_t, uint32_t grid_h,
		     uint32_t grid_w, const struct ns_vision_out *out, char *err, size_t errlen);

/* Make ns_vision_encode (and so ns_image_embed) of t's tower run ns_ctower_encode
 * (ns_vision_set_encoder); ns_ctower_destroy undoes it. */
void ns_ctower_attach(struct ns_ctower *t);

/* Figures of the last encode. */
struct ns_ctower_stats {
	uint64_t encodes;
	uint64_t vram_used;     /* the last encode's arena use */
	uint64_t vram_arena;    /* the last encode's arena (opts.vram_budget if larger than
				 * its need) */
	uint64_t staged_bytes;  /* weight bytes copied to the device, all encodes */
	uint64_t matmuls;       /* GEMM launches, all encodes */
};
void ns_ctower_stats(const struct ns_ctower *t, struct ns_ctower_stats *out);

void ns_ctower_destroy(struct ns_ctower **t);

#endif
