/* deltanet.c - see deltanet.h. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "deltanet.h"
#include "ops.h"

static float *s_floats(uint64_t a, uint64_t b)
{
	uint64_t n;

	if (ns_mul_u64_overflow(a, b, &n) || ns_mul_u64_overflow(n, sizeof(float), &n) ||
	    n > SIZE_MAX)
		return NULL;
	return calloc(1, n ? (size_t)n : 1);
}

void ns_dnet_destroy(struct ns_dnet **pd)
{
	struct ns_dnet *d;

	if (!pd || !*pd)
		return;
	d = *pd;
	for (uint32_t l = 0; d->layers && l < d->n_layer; l++) {
		free(d->layers[l].hist);
		free(d->layers[l].S);
		free(d->layers[l].hist0);
		free(d->layers[l].S0);
		free(d->layers[l].log);
	}
	free(d->layers);
	free(d->qkv);
	free(d->z);
	free(d->b);
	free(d->a);
	free(d->o);
	free(d->conv);
	free(d->kv);
	free(d);
	*pd = NULL;
}

static int s_layer_init(const struct ns_fwd *f, struct ns_dnet *d, uint32_t l, bool host_state)
{
	struct ns_dnet_layer *y = &d->layers[l];
	const int32_t i = (int32_t)l;

	y->qkv = (uint32_t)ns_arch_tensor(f->am, i, NS_T_ATTN_QKV);
	y->gate = (uint32_t)ns_arch_tensor(f->am, i, NS_T_ATTN_GATE);
	y->beta = (uint32_t)ns_arch_tensor(f->am, i, NS_T_SSM_BETA);
	y->alpha = (uint32_t)ns_arch_tensor(f->am, i, NS_T_SSM_ALPHA);
	y->out = (uint32_t)ns_arch_tensor(f->am, i, NS_T_SSM_OUT);
	y->conv_w = ns_held_get(f->held, i, NS_T_SSM_CONV1D);
	y->dt_b = ns_held_get(f->held, i, NS_T_SSM_DT_B);
	y->ssm_a = ns_held_get(f->held, i, NS_T_SSM_A);
	y->norm = ns_held_get(f->held, i, NS_T_SSM_NORM);
	if (!host_state) /* the backend keeps the state */
		return 0;
	y->hist = s_floats((uint64_t)d->K - 1, d->CH);
	y->S = s_floats((uint64_t)d->n_v * d->dk, d->dv);
	if (!y->hist || !y->S)
		return -ENOMEM;
	d->state_bytes += ((uint64_t)(d->K - 1) * d->CH + (uint64_t)d->n_v * d->dk * d->dv) *
			  sizeof(float);
	if (!d->rb_cap)
		return 0;
	y->hist0 = s_floats((uint64_t)d->K - 1, d->CH);
	y->S0 = s_floats((uint64_t)d->n_v * d->dk, d->dv);
	y->log = s_floats(d->rb_cap, (uint64_t)d->CH + 2ull * d->n_v);
	if (!y->hist0 || !y->S0 || !y->log)
		return -ENOMEM;
	d->state_bytes += ((uint64_t)(d->K - 1) * d->CH + (uint64_t)d->n_v * d->dk * d->dv +
			   (uint64_t)d->rb_cap * (d->CH + 2ull * d->n_v)) * sizeof(float);
	return 0;
}

int ns_dnet_new(struct ns_fwd *f, uint32_t n_batch, bool host_state, struct ns_dnet **out,
		char *err, size_t errlen)
{
	const struct ns_arch_model *am = f->am;
	const uint64_t groups_x_state = am->dim[NS_DIM_SSM_CH] - am->dim[NS_DIM_SSM_INNER];
	uint64_t state = 0;
	struct ns_dnet *d;
	int rc = 0;

	*out = NULL;
	d = calloc(1, sizeof(*d));
	if (!d || !(d->layers = calloc(am->n_layer, sizeof(*d->layers)))) {
		free(d);
		ns_errf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	d->n_layer = am->n_layer;
	d->n_embd = (uint32_t)am->dim[NS_DIM_EMBD];
	d->n_v = (uint32_t)am->dim[NS_DIM_SSM_HEADS];
	d->dv = (uint32_t)am->dim[NS_DIM_SSM_DV];
	d->K = (uint32_t)am->dim[NS_DIM_SSM_CONV];
	d->CH = (uint32_t)am->dim[NS_DIM_SSM_CH];
	d->eps = (float)am->hp.rms_eps;
	d->rb_cap = host_state ? f->rb_cap : 0; /* the CUDA pass keeps its own state */
	/* q and k: ssm.group_count heads of ssm.state_size (the rules' SSM_CH = inner + 2 g s) */
	ns_hparams_get_u64(am->m, am->hp.arch, "ssm.state_size", &state);
	d->dk = state <= UINT32_MAX ? (uint32_t)state : 0;
	d->n_k = d->dk ? (uint32_t)(groups_x_state / 2 / d->dk) : 0;
	if (!d->dk || !d->n_k || (uint64_t)2 * d->n_k * d->dk != groups_x_state ||
	    d->n_v % d->n_k || am->dim[NS_DIM_SSM_CH] > UINT32_MAX) {
		ns_errf(err, errlen, "forward: %s linear attention: %u value heads do not tile "
			"over %u key heads of %u", am->hp.arch, d->n_v, d->n_k, d->dk);
		ns_dnet_destroy(&d);
		return -EINVAL;
	}
	for (uint32_t l = 0; l < am->n_layer && rc == 0; l++)
		if (am->layer[l].kinds & NS_LAYER_RECURRENT)
			rc = s_layer_init(f, d, l, host_state);
	if (rc == 0 && host_state &&
	    (!(d->qkv = s_floats(n_batch, d->CH)) ||
	     !(d->z = s_floats(n_batch, (uint64_t)d->n_v * d->dv)) ||
	     !(d->b = s_floats(n_batch, d->n_v)) || !(d->a = s_floats(n_batch, d->n_v)) ||
	     !(d->o = s_floats(n_batch, (uint64_t)d->n_v * d->dv)) ||
	     !(d->conv = s_floats(d->CH, 1)) || !(d->kv = s_floats(d->dv, 1))))
		rc = -ENOMEM;
	if (rc < 0) {
		ns_errf(err, errlen, "forward: cannot allocate the recurrent state for n_batch "
			"%u: %s", n_batch, strerror(-rc));
		ns_dnet_destroy(&d);
		return rc;
	}
	*out = d;
	return 0;
}

/* ---------------------------------------------------------------- one token ------------ */

/* c = silu(conv(history, x)) per channel, then x joins the history. ggml_ssm_conv's order:
 * the taps summed oldest first, in float. */
void ns_dnet_conv_token(const float *w, float *hist, uint32_t K, uint32_t CH, const float *x,
			float *c)
{
	for (uint32_t ch = 0; ch < CH; ch++) {
		const float *wc = w + (uint64_t)ch * K; /* (K) */
		float s = 0.0f;

		for (uint32_t j = 0; j + 1 < K; j++)
			s += hist[(uint64_t)j * CH + ch] * wc[j];
		s += x[ch] * wc[K - 1];
		c[ch] = ns_silu(s);
	}
	if (K > 1) {
		memmove(hist, hist + CH, (uint64_t)(K - 2) * CH * sizeof(float));
		memcpy(hist + (uint64_t)(K - 2) * CH, x, CH * sizeof(float));
	}
}

/* x / max(|x|, eps) in place, the sum of squares in double (ggml_l2_norm). */
void ns_dnet_l2norm(float *x, uint32_t n, float eps, float extra_scale)
{
	double sum = 0.0;
	float scale;

	for (uint32_t i = 0; i < n; i++)
		sum += (double)(x[i] * x[i]);
	scale = 1.0f / fmaxf(sqrtf((float)sum), eps);
	for (uint32_t i = 0; i < n; i++)
		x[i] = x[i] * scale * extra_scale;
}

float ns_dnet_decay(float a, float dt_b, float ssm_a)
{
	const float x = a + dt_b;
	const float sp = x > 20.0f ? x : logf(1.0f + expf(x)); /* softplus, ggml's threshold */

	return expf(sp * ssm_a);
}

float ns_dnet_beta(float b)
{
	return 1.0f / (1.0f + expf(-b));
}

/* The delta rule for one value head and token: S, then o (dv). */
void ns_dnet_rule(float *S, const float *q, const float *k, const float *v, float decay,
		  float beta, uint32_t dk, uint32_t dv, float *kv, float *o)
{
	/* S *= exp(g); kv = S^T k   (dv) */
	memset(kv, 0, dv * sizeof(float));
	for (uint32_t i = 0; i < dk; i++) {
		float *row = S + (uint64_t)i * dv; /* (dv) */

		for (uint32_t j = 0; j < dv; j++) {
			row[j] *= decay;
			kv[j] += row[j] * k[i];
		}
	}
	/* d = (v - kv) * beta; S += k d^T; o = S^T q */
	for (uint32_t j = 0; j < dv; j++) {
		kv[j] = (v[j] - kv[j]) * beta;
		o[j] = 0.0f;
	}
	for (uint32_t i = 0; i < dk; i++) {
		float *row = S + (uint64_t)i * dv; /* (dv) */

		for (uint32_t j = 0; j < dv; j++) {
			row[j] += k[i] * kv[j];
			o[j] += row[j] * q[i];
		}
	}
}

void ns_dnet_gated_norm(float *o, const float *w, const float *z, uint32_t n, float eps)
{
	ns_rmsnorm(o, o, w, n, eps);
	for (uint32_t j = 0; j < n; j++)
		o[j] *= ns_silu(z[j]);
}

/* One token through the recurrence: x (CH) its qkv projections, a and b (n_v) its decay and
 * beta logits. Conv, normalisation, every head's rule; with z (n_v * dv, the output gate) the
 * gated norm of the outputs into o (n_v * dv), without (a replay: only the state matters) o
 * is scratch. */
static void s_token(struct ns_dnet *d, struct ns_dnet_layer *y, const float *x, const float *a,
		    const float *b, const float *z, float *o)
{
	const uint32_t dk = d->dk, dv = d->dv, nk = d->n_k;
	float *c = d->conv; /* (CH): q (nk, dk), k (nk, dk), v (n_v, dv) */
	const float qscale = 1.0f / sqrtf((float)dk);

	ns_dnet_conv_token(y->conv_w, y->hist, d->K, d->CH, x, c);
	for (uint32_t h = 0; h < nk; h++) {
		ns_dnet_l2norm(c + (uint64_t)h * dk, dk, d->eps, qscale);
		ns_dnet_l2norm(c + (uint64_t)(nk + h) * dk, dk, d->eps, 1.0f);
	}
	for (uint32_t h = 0; h < d->n_v; h++) {
		const uint32_t kh = h % nk;
		const float decay = ns_dnet_decay(a[h], y->dt_b[h], y->ssm_a[h]);
		const float beta = ns_dnet_beta(b[h]);
		float *oh = o + (uint64_t)h * dv; /* (dv) */

		ns_dnet_rule(y->S + (uint64_t)h * dk * dv, c + (uint64_t)kh * dk,
			     c + (uint64_t)(nk + kh) * dk, c + 2ull * nk * dk + (uint64_t)h * dv,
			     decay, beta, dk, dv, d->kv, oh);
		if (z)
			ns_dnet_gated_norm(oh, y->norm, z + (uint64_t)h * dv, dv, d->eps);
	}
}

/* Layer y's inputs of the chunk's n tokens join its log (a mark is set). */
static void s_log(struct ns_dnet *d, struct ns_dnet_layer *y, uint32_t n)
{
	const uint64_t w = (uint64_t)d->CH + 2ull * d->n_v;

	if (d->log_lost || n > d->rb_cap - y->n_log) {
		d->log_lost = true; /* the caller's bound was passed: refuse the rollback */
		return;
	}
	for (uint32_t t = 0; t < n; t++) {
		float *row = y->log + (uint64_t)(y->n_log + t) * w;

		memcpy(row, d->qkv + (uint64_t)t * d->CH, d->CH * sizeof(float));
		memcpy(row + d->CH, d->a + (uint64_t)t * d->n_v, d->n_v * sizeof(float));
		memcpy(row + d->CH + d->n_v, d->b + (uint64_t)t * d->n_v, d->n_v * sizeof(float));
	}
	y->n_log += n;
}

int ns_dnet_eval(struct ns_fwd *f, struct ns_dnet *d, uint32_t layer, uint32_t pos0,
		 const float *xb, uint32_t n, float *out)
{
	struct ns_dnet_layer *y = &d->layers[layer];
	const uint64_t vd = (uint64_t)d->n_v * d->dv;
	int rc;

	if (pos0 == 0) { /* a new sequence: no history, zero state */
		memset(y->hist, 0, (uint64_t)(d->K - 1) * d->CH * sizeof(float));
		memset(y->S, 0, (uint64_t)d->n_v * d->dk * d->dv * sizeof(float));
	}
	/* the table's order: qkv (n, CH), z (n, vd), beta (n, n_v), alpha (n, n_v) */
	if ((rc = ns_fwd_matmul(f, y->qkv, 0, d->CH, xb, n, d->qkv, d->CH)) ||
	    (rc = ns_fwd_matmul(f, y->gate, 0, vd, xb, n, d->z, vd)) ||
	    (rc = ns_fwd_matmul(f, y->beta, 0, d->n_v, xb, n, d->b, d->n_v)) ||
	    (rc = ns_fwd_matmul(f, y->alpha, 0, d->n_v, xb, n, d->a, d->n_v)))
		return rc;
	if (d->logging)
		s_log(d, y, n);
	for (uint32_t t = 0; t < n; t++)
		s_token(d, y, d->qkv + (uint64_t)t * d->CH, d->a + (uint64_t)t * d->n_v,
			d->b + (uint64_t)t * d->n_v, d->z + (uint64_t)t * vd, d->o + (uint64_t)t * vd);
	/* out = o Wout^T   (n, n_embd) */
	return ns_fwd_matmul(f, y->out, 0, d->n_embd, d->o, n, out, d->n_embd);
}

/* ---------------------------------------------------------------- rollback ------------- */

static uint64_t s_state_floats(const struct ns_dnet *d, uint64_t *hist)
{
	*hist = (uint64_t)(d->K - 1) * d->CH;
	return (uint64_t)d->n_v * d->dk * d->dv;
}

int ns_dnet_mark(struct ns_dnet *d, bool zero)
{
	uint64_t nh, ns = s_state_floats(d, &nh);

	if (!d->rb_cap)
		return -ENOTSUP;
	for (uint32_t l = 0; l < d->n_layer; l++) {
		struct ns_dnet_layer *y = &d->layers[l];

		if (!y->S)
			continue;
		if (zero) { /* the next chunk starts the sequence: its state is zero */
			memset(y->hist0, 0, nh * sizeof(float));
			memset(y->S0, 0, ns * sizeof(float));
		} else {
			memcpy(y->hist0, y->hist, nh * sizeof(float));
			memcpy(y->S0, y->S, ns * sizeof(float));
		}
		y->n_log = 0;
	}
	d->logging = true;
	d->log_lost = false;
	return 0;
}

void ns_dnet_unmark(struct ns_dnet *d)
{
	d->logging = false;
}

int ns_dnet_rollback(struct ns_dnet *d, uint32_t keep)
{
	const uint64_t w = (uint64_t)d->CH + 2ull * d->n_v;
	uint64_t nh, ns = s_state_floats(d, &nh);

	if (!d->logging || d->log_lost)
		return -ERANGE;
	for (uint32_t l = 0; l < d->n_layer; l++) {
		struct ns_dnet_layer *y = &d->layers[l];

		if (!y->S)
			continue;
		if (keep > y->n_log)
			return -ERANGE;
	}
	for (uint32_t l = 0; l < d->n_layer; l++) {
		struct ns_dnet_layer *y = &d->layers[l];

		if (!y->S)
			continue;
		memcpy(y->hist, y->hist0, nh * sizeof(float));
		memcpy(y->S, y->S0, ns * sizeof(float));
		/* the recurrence again over the kept tokens, from their logged inputs: the same
		 * operations in the same order as the pass, so the same bits */
		for (uint32_t t = 0; t < keep; t++) {
			const float *row = y->log + (uint64_t)t * w;

			s_token(d, y, row, row + d->CH, row + d->CH + d->n_v, NULL, d->o);
		}
	}
	d->logging = false;
	return 0;
}

uint64_t ns_dnet_state_bytes(const struct ns_dnet *d)
{
	return d ? d->state_bytes : 0;
}
