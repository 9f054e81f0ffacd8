/* ops.h - small float kernels of the forward pass, written to round like ggml's CPU ops. */
#ifndef NS_FWD_OPS_H
#define NS_FWD_OPS_H

#include <stdint.h>

/* y = x / sqrt(mean(x^2) + eps) * w, all (n); w may be NULL (unweighted). y may equal x.
 * The sum of squares is accumulated in double, the scale applied in float (as ggml). */
void ns_rmsnorm(float *y, const float *x, const float *w, uint32_t n, float eps);

/* In place softmax of x: (n); exp in float, sum in double. */
void ns_softmax(float *x, uint32_t n);

/* Softmax of x: (n) with one extra logit `sink` in the denominator only (attention sinks):
 * x_i = exp(x_i - m) / (sum_j exp(x_j - m) + exp(sink - m)), m = max(max_i x_i, sink). */
void ns_softmax_sink(float *x, uint32_t n, float sink);

/* x * sigmoid(x) */
float ns_silu(float x);

/* GELU, tanh approximation (Transformers' gelu_pytorch_tanh), evaluated in float with tanhf:
 * 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). Not ggml's f16 table, which moves gemma's
 * logits by up to 4e-3. */
float ns_gelu_tanh(float x);

#endif
