/* rope.h - rotary position embedding, normal and NeoX layouts.
 *
 * For position p and pair i (0 <= i < n_dims/2) the angle is
 *     theta_i = freq_scale * p * freq_base^(-2i/n_dims) / freq_factor_i
 * computed in float the way ggml does (theta_scale = powf(base, -2/n_dims), then repeated
 * multiplication), so our angles equal the reference implementation's.
 * Normal layout rotates consecutive pairs (x[2i], x[2i+1]) (llama); NeoX rotates
 * (x[i], x[i + n_dims/2]) (qwen3). Dimensions at and beyond n_dims pass through.
 *
 * YaRN (ext_factor != 0, set by ns_rope_yarn_init) blends per pair the interpolated angle
 * theta_interp = freq_scale * theta_extrap with the unscaled theta_extrap:
 *     ramp_i = 1 - clamp((i - corr_lo) / max(0.001, corr_hi - corr_lo), 0, 1)
 *     theta  = theta_interp * (1 - ramp_i * ext) + theta_extrap * ramp_i * ext
 * and scales cos and sin by mscale = attn_factor * (1 + 0.1 ln(1 / freq_scale)), all in float
 * as ggml's rope_yarn does. With ext_factor == 0 the yarn fields are ignored. */
#ifndef NS_ROPE_H
#define NS_ROPE_H

#include <stdbool.h>
#include <stdint.h>

struct ns_rope {
	uint32_t n_dims;           /* rotated dimensions per head, even, <= head_dim */
	bool neox;                 /* NeoX pairing */
	float freq_base;           /* rope.freq_base */
	float freq_scale;          /* 1 / linear scaling factor; 1 without scaling */
	const float *freq_factors; /* (n_dims/2) divisors of each frequency, or NULL; borrowed */
	float ext_factor;          /* YaRN extrapolation mix; 0 = plain RoPE */
	float attn_factor;         /* YaRN magnitude factor (before the 1 + 0.1 ln term) */
	float corr_dims[2];        /* YaRN ramp: pairs below [0] extrapolate, above [1] interpolate */
};

/* Switch r (n_dims, freq_base and freq_scale already set) to YaRN with ext_factor 1:
 * correction dims from n_ctx_orig and beta_fast/beta_slow as ggml_rope_yarn_corr_dims. */
void ns_rope_yarn_init(struct ns_rope *r, uint32_t n_ctx_orig, float beta_fast, float beta_slow,
		       float attn_factor);

/* cs: (n_dims) as [cos_0, sin_0, cos_1, sin_1, ...] for position pos. */
void ns_rope_angles(const struct ns_rope *r, int64_t pos, float *cs);

/* Interleaved M-RoPE (Qwen3-VL; Transformers' apply_interleaved_mrope, llama.cpp's imrope):
 * pair i rotates by the height position pos[1] when i % 3 == 1 and i < 3 * sections[1], by
 * the width position pos[2] when i % 3 == 2 and i < 3 * sections[2], else by the temporal
 * position pos[0]. With three equal positions this is ns_rope_angles. cs as there. */
void ns_rope_angles_mrope(const struct ns_rope *r, const int32_t pos[3],
			  const uint32_t sections[4], float *cs);

/* Rotate x: (n_heads, head_dim) in place with the angles from ns_rope_angles. */
void ns_rope_rotate(const struct ns_rope *r, const float *cs, float *x, uint32_t n_heads,
		    uint32_t head_dim);

#endif
