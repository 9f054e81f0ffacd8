/* ops.c - see ops.h. */
#include <math.h>

#include "ops.h"

void ns_rmsnorm(float *y, const float *x, const float *w, uint32_t n, float eps)
{
	double sum = 0.0;
	float mean, scale;

	for (uint32_t i = 0; i < n; i++)
		sum += (double)(x[i] * x[i]);
	mean = (float)(sum / n);
	scale = 1.0f / sqrtf(mean + eps);
	for (uint32_t i = 0; i < n; i++)
		y[i] = w ? (x[i] * scale) * w[i] : x[i] * scale;
}

void ns_softmax(float *x, uint32_t n)
{
	float max = -INFINITY;
	double sum = 0.0;
	float inv;

	for (uint32_t i = 0; i < n; i++)
		if (x[i] > max)
			max = x[i];
	for (uint32_t i = 0; i < n; i++) {
		x[i] = expf(x[i] - max);
		sum += (double)x[i];
	}
	inv = (float)(1.0 / sum);
	for (uint32_t i = 0; i < n; i++)
		x[i] *= inv;
}

void ns_softmax_sink(float *x, uint32_t n, float sink)
{
	float max = sink;
	double sum = 0.0;
	float inv;

	for (uint32_t i = 0; i < n; i++)
		if (x[i] > max)
			max = x[i];
	for (uint32_t i = 0; i < n; i++) {
		x[i] = expf(x[i] - max);
		sum += (double)x[i];
	}
	sum += (double)expf(sink - max);
	inv = (float)(1.0 / sum);
	for (uint32_t i = 0; i < n; i++)
		x[i] *= inv;
}

float ns_silu(float x)
{
	return x / (1.0f + expf(-x));
}

float ns_gelu_tanh(float x)
{
	const float sqrt_2_over_pi = 0.79788456080286535588f;

	return 0.5f * x * (1.0f + tanhf(sqrt_2_over_pi * x * (1.0f + 0.044715f * x * x)));
}
