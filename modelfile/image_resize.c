/* image_resize.c - bicubic resampling of 8-bit RGB, as Pillow's Image.resize(BICUBIC).
 *
 * Pillow's ImagingResample (libImaging/Resample.c), which the reference processor ran: one
 * pass along x (when the width changes) into an 8-bit buffer, then one along y. For an axis of
 * `in` samples resized to `out`, in double:
 *     scale = in / out, support = 2 * max(scale, 1), taps = ceil(support) * 2 + 1
 *     output i covers inputs [xmin, xmin + n): center = scale * (i + 0.5),
 *         xmin = max(trunc(center - support + 0.5), 0),
 *         n = min(trunc(center + support + 0.5), in) - xmin
 *     weight j = keys((xmin + j - center + 0.5) / max(scale, 1)), normalised to sum 1
 *     keys: Keys' cubic with a = -0.5 (antialiasing: stretched by the downscale factor)
 * Weights become integers at 22 fractional bits, rounded half away from zero; a sample is
 * (2^21 + sum v_j w_j) >> 22 clamped to 0..255, in 32-bit int.
 * torch's uint8 kernel (torchvision's resize) computes the same weights but keeps ~15 bits of
 * them, so it differs from this by a unit in a few samples. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "image_prep.h"

#define S_PREC 22 /* Pillow's PRECISION_BITS for 8-bit images: 32 - 8 - 2 */

struct s_axis {
	uint32_t taps;     /* weights stored per output sample */
	uint32_t *xmin;    /* (out) first input sample */
	uint32_t *n;       /* (out) inputs used */
	int32_t *w;        /* (out, taps) */
};

/* Written as Pillow writes it: the rounding of the last bit decides some weights. */
static double s_keys(double x)
{
	const double a = -0.5;

	if (x < 0.0)
		x = -x;
	if (x < 1.0)
		return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
	if (x < 2.0)
		return (((x - 5) * x + 8) * x - 4) * a;
	return 0.0;
}

static void s_axis_free(struct s_axis *ax)
{
	free(ax->xmin);
	free(ax->n);
	free(ax->w);
}

static int s_axis_new(uint32_t in, uint32_t out, struct s_axis *ax)
{
	const double scale = (double)in / out;
	const double support = scale >= 1.0 ? 2.0 * scale : 2.0;
	const double inv = scale >= 1.0 ? 1.0 / scale : 1.0;
	double *wd;

	memset(ax, 0, sizeof(*ax));
	ax->taps = (uint32_t)ceil(support) * 2 + 1;
	ax->xmin = calloc(out, sizeof(*ax->xmin));
	ax->n = calloc(out, sizeof(*ax->n));
	ax->w = calloc((size_t)out * ax->taps, sizeof(*ax->w));
	wd = calloc((size_t)out * ax->taps, sizeof(*wd));
	if (!ax->xmin || !ax->n || !ax->w || !wd) {
		free(wd);
		s_axis_free(ax);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < out; i++) {
		const double center = scale * (i + 0.5);
		int64_t lo = (int64_t)(center - support + 0.5), hi = (int64_t)(center + support + 0.5);
		double *w = wd + (size_t)i * ax->taps, total = 0.0;

		lo = lo < 0 ? 0 : lo;
		hi = hi > (int64_t)in ? (int64_t)in : hi;
		hi = hi - lo > (int64_t)ax->taps ? lo + ax->taps : hi < lo ? lo : hi;
		ax->xmin[i] = (uint32_t)lo;
		ax->n[i] = (uint32_t)(hi - lo);
		for (uint32_t j = 0; j < ax->n[i]; j++) {
			w[j] = s_keys((j + lo - center + 0.5) * inv);
			total += w[j];
		}
		for (uint32_t j = 0; total != 0.0 && j < ax->n[i]; j++)
			w[j] /= total;
	}
	for (size_t k = 0; k < (size_t)out * ax->taps; k++)
		ax->w[k] = wd[k] < 0 ? (int32_t)(-0.5 + wd[k] * (1 << S_PREC))
				     : (int32_t)(0.5 + wd[k] * (1 << S_PREC));
	free(wd);
	return 0;
}

/* Pillow's clip8. */
static uint8_t s_round(int32_t acc)
{
	if (acc >= (1 << S_PREC << 8))
		return 255;
	if (acc <= 0)
		return 0;
	return (uint8_t)(acc >> S_PREC);
}

/* dst (rows, out, 3) from src (rows, in, 3) along x. */
static void s_pass_x(const uint8_t *src, uint32_t in, uint32_t rows, const struct s_axis *ax,
		     uint32_t out, uint8_t *dst)
{
	for (uint32_t y = 0; y < rows; y++)
		for (uint32_t i = 0; i < out; i++) {
			const uint8_t *s = src + ((size_t)y * in + ax->xmin[i]) * 3;
			const int32_t *w = ax->w + (size_t)i * ax->taps;

			for (uint32_t c = 0; c < 3; c++) {
				int32_t acc = 1 << (S_PREC - 1);

				for (uint32_t j = 0; j < ax->n[i]; j++)
					acc += s[(size_t)j * 3 + c] * w[j];
				dst[((size_t)y * out + i) * 3 + c] = s_round(acc);
			}
		}
}

/* dst (out, cols, 3) from src (in, cols, 3) along y. */
static void s_pass_y(const uint8_t *src, uint32_t cols, const struct s_axis *ax, uint32_t out,
		     uint8_t *dst)
{
	const size_t stride = (size_t)cols * 3;

	for (uint32_t i = 0; i < out; i++) {
		const uint8_t *s = src + (size_t)ax->xmin[i] * stride;
		const int32_t *w = ax->w + (size_t)i * ax->taps;

		for (size_t k = 0; k < stride; k++) {
			int32_t acc = 1 << (S_PREC - 1);

			for (uint32_t j = 0; j < ax->n[i]; j++)
				acc += s[(size_t)j * stride + k] * w[j];
			dst[(size_t)i * stride + k] = s_round(acc);
		}
	}
}

int ns_image_resize(const struct ns_image *src, uint32_t width, uint32_t height,
		    struct ns_image *dst)
{
	const uint8_t *cur = src->rgb;
	uint8_t *tmp = NULL, *out;
	struct s_axis ax;
	int rc = 0;

	memset(dst, 0, sizeof(*dst));
	if (!width || !height || !src->width || !src->height)
		return -EINVAL;
	out = malloc((size_t)width * height * 3);
	if (!out)
		return -ENOMEM;
	if (width != src->width) {
		tmp = height != src->height ? malloc((size_t)width * src->height * 3) : out;
		if (!tmp || (rc = s_axis_new(src->width, width, &ax)) < 0) {
			rc = -ENOMEM;
			goto fail;
		}
		s_pass_x(cur, src->width, src->height, &ax, width, tmp);
		s_axis_free(&ax);
		cur = tmp;
	}
	if (height != src->height) {
		if ((rc = s_axis_new(src->height, height, &ax)) < 0)
			goto fail;
		s_pass_y(cur, width, &ax, height, out);
		s_axis_free(&ax);
	} else if (cur == src->rgb) {
		memcpy(out, cur, (size_t)width * height * 3);
	}
	if (tmp != out)
		free(tmp);
	dst->width = width;
	dst->height = height;
	dst->rgb = out;
	return 0;
fail:
	if (tmp != out)
		free(tmp);
	free(out);
	return rc;
}
