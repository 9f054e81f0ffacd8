/* rope.c - see rope.h. */
#include <math.h>

#include "rope.h"

/* Pair index at which a rotation of n_rot turns fits n_ctx_orig positions (ggml's corr dim). */
static float s_corr_dim(uint32_t n_dims, uint32_t n_ctx_orig, float n_rot, float base)
{
	return (float)n_dims * logf((float)n_ctx_orig / (n_rot * 2.0f * (float)M_PI)) /
	       (2.0f * logf(base));
}

void ns_rope_yarn_init(struct ns_rope *r, uint32_t n_ctx_orig, float beta_fast, float beta_slow,
		       float attn_factor)
{
	const float lo = floorf(s_corr_dim(r->n_dims, n_ctx_orig, beta_fast, r->freq_base));
	const float hi = ceilf(s_corr_dim(r->n_dims, n_ctx_orig, beta_slow, r->freq_base));

	r->ext_factor = 1.0f;
	r->attn_factor = attn_factor;
	r->corr_dims[0] = lo > 0.0f ? lo : 0.0f;
	r->corr_dims[1] = hi < (float)(r->n_dims - 1) ? hi : (float)(r->n_dims - 1);
}

/* cos/sin of pair i for the unscaled angle theta_extrap, YaRN-blended. */
static void s_yarn(const struct ns_rope *r, float theta_extrap, uint32_t i, float *c, float *s)
{
	const float theta_interp = r->freq_scale * theta_extrap;
	const float den = r->corr_dims[1] - r->corr_dims[0];
	const float y = ((float)i - r->corr_dims[0]) / (den > 0.001f ? den : 0.001f);
	const float ramp = 1.0f - (y < 0.0f ? 0.0f : y > 1.0f ? 1.0f : y);
	const float mix = ramp * r->ext_factor;
	const float theta = theta_interp * (1.0f - mix) + theta_extrap * mix;
	const float mscale = r->attn_factor * (1.0f + 0.1f * logf(1.0f / r->freq_scale));

	*c = cosf(theta) * mscale;
	*s = sinf(theta) * mscale;
}

/* cos and sin of pair i at unscaled angle theta (position times theta_scale^i) */
static void s_pair(const struct ns_rope *r, float theta, uint32_t i, float *cs)
{
	const float ff = r->freq_factors ? r->freq_factors[i] : 1.0f;

	if (r->ext_factor != 0.0f) {
		s_yarn(r, theta / ff, i, &cs[2 * i + 0], &cs[2 * i + 1]);
	} else {
		const float th = r->freq_scale * (theta / ff);

		cs[2 * i + 0] = cosf(th);
		cs[2 * i + 1] = sinf(th);
	}
}

void ns_rope_angles(const struct ns_rope *r, int64_t pos, float *cs)
{
	const float theta_scale = powf(r->freq_base, -2.0f / (float)r->n_dims);
	float theta = (float)pos; /* p * theta_scale^i, built up as ggml builds it */

	for (uint32_t i = 0; i < r->n_dims / 2; i++) {
		s_pair(r, theta, i, cs);
		theta *= theta_scale;
	}
}

void ns_rope_angles_mrope(const struct ns_rope *r, const int32_t pos[3],
			  const uint32_t sections[4], float *cs)
{
	const float theta_scale = powf(r->freq_base, -2.0f / (float)r->n_dims);
	float theta[3] = { (float)pos[0], (float)pos[1], (float)pos[2] };

	for (uint32_t i = 0; i < r->n_dims / 2; i++) {
		const unsigned axis = i % 3 == 1 && i < 3 * sections[1] ? 1 :
				      i % 3 == 2 && i < 3 * sections[2] ? 2 : 0;

		s_pair(r, theta[axis], i, cs);
		for (unsigned a = 0; a < 3; a++)
			theta[a] *= theta_scale;
	}
}
void ns_rope_rotate(const struct ns_rope *r, const float *cs, float *x, uint32_t n_heads,
		    uint32_t head_dim)
{
	const uint32_t half = r->n_dims / 2;

	for (uint32_t h = 0; h < n_heads; h++) {
		float *v = x + (uint64_t)h * head_dim; /* (head_dim) */

		for (uint32_t i = 0; i < half; i++) {
			const float c = cs[2 * i], s = cs[2 * i + 1];
			/* the two elements of pair i */
			const uint32_t a = r->neox ? i : 2 * i;
			const uint32_t b = r->neox ? i + half : 2 * i + 1;
			const float x0 = v[a], x1 = v[b];

			v[a] = x0 * c - x1 * s;
			v[b] = x0 * s + x1 * c;
		}
	}
}
