/* image_prep.c - smart resize plan, normalisation and patch layout (see image_prep.h). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "image_prep.h"
#include "ns_util.h"

/* Sides at most this long (in pixels) come out of a plan: 1 << 20 keeps every product of
 * three of them, and the pixel values' size, well inside 64 bits. */
#define S_MAX_SIDE (1u << 20)

static int s_geom_check(const struct ns_image_geom *g, char *err, size_t errlen)
{
	if (!g->patch || !g->merge || !g->temporal || g->patch > 1024 || g->merge > 64 ||
	    g->temporal > 64) {
		ns_errf(err, errlen, "image geometry: patch %u, merge %u, temporal %u out of range",
			g->patch, g->merge, g->temporal);
		return -EINVAL;
	}
	for (int c = 0; c < 3; c++)
		if (!(g->std[c] > 0.0f) || !isfinite(g->mean[c]) || !isfinite(g->std[c])) {
			ns_errf(err, errlen, "image geometry: channel %d mean %g std %g", c,
				(double)g->mean[c], (double)g->std[c]);
			return -EINVAL;
		}
	return 0;
}

/* Python's round(x) for x >= 0: half to even (rint in the default rounding mode). */
static double s_round_even(double x)
{
	return nearbyint(x);
}

int ns_image_plan(const struct ns_image_geom *g, uint32_t width, uint32_t height,
		  struct ns_image_plan *p, char *err, size_t errlen)
{
	const double f = (double)g->patch * g->merge;
	double h, w, hb, wb, maxpx;
	int rc;

	memset(p, 0, sizeof(*p));
	if ((rc = s_geom_check(g, err, errlen)) < 0)
		return rc;
	if (!width || !height) {
		ns_errf(err, errlen, "the image is %ux%u: no pixels", width, height);
		return -EINVAL;
	}
	h = height;
	w = width;
	if ((h > w ? h / w : w / h) > 200.0) {
		ns_errf(err, errlen, "the image is %ux%u: aspect ratio over 200, which the "
			"processor refuses", width, height);
		return -EINVAL;
	}
	maxpx = (double)g->max_pixels;
	if (g->max_tokens && (double)g->max_tokens * f * f < maxpx)
		maxpx = (double)g->max_tokens * f * f;
	hb = s_round_even(h / f) * f;
	wb = s_round_even(w / f) * f;
	if (hb * wb > maxpx) {
		const double beta = sqrt(h * w / maxpx);

		hb = fmax(f, floor(h / beta / f) * f);
		wb = fmax(f, floor(w / beta / f) * f);
	} else if (hb * wb < (double)g->min_pixels) {
		const double beta = sqrt((double)g->min_pixels / (h * w));

		hb = ceil(h * beta / f) * f;
		wb = ceil(w * beta / f) * f;
	}
	if (!(hb >= f && wb >= f && hb <= S_MAX_SIDE && wb <= S_MAX_SIDE)) {
		ns_errf(err, errlen, "the image is %ux%u: smart resize gives %.0fx%.0f, not a "
			"usable size (min_pixels %llu, max_pixels %llu)", width, height, wb, hb,
			(unsigned long long)g->min_pixels, (unsigned long long)g->max_pixels);
		return -EINVAL;
	}
	p->width = (uint32_t)wb;
	p->height = (uint32_t)hb;
	p->grid_t = 1;
	p->grid_h = p->height / g->patch;
	p->grid_w = p->width / g->patch;
	p->n_patches = (uint64_t)p->grid_t * p->grid_h * p->grid_w;
	p->n_tokens = p->n_patches / ((uint64_t)g->merge * g->merge);
	p->patch_dim = 3ull * g->temporal * g->patch * g->patch;
	if (g->max_tokens && p->n_tokens > g->max_tokens) {
		ns_errf(err, errlen, "the image is %ux%u: it becomes %llu tokens (%ux%u), more than "
			"the %llu allowed", width, height, (unsigned long long)p->n_tokens,
			p->width, p->height, (unsigned long long)g->max_tokens);
		return -E2BIG;
	}
	return 0;
}

int ns_image_pixel_values(const struct ns_image *img, const struct ns_image_geom *g,
			  const struct ns_image_plan *p, float *out)
{
	const uint32_t P = g->patch, M = g->merge, T = g->temporal;
	const size_t plane = (size_t)P * P;
	float value[256][3]; /* every byte's normalised value, per channel */
	uint64_t row = 0;

	if (img->width != p->width || img->height != p->height || p->grid_h % M ||
	    p->grid_w % M)
		return -EINVAL;
	for (int v = 0; v < 256; v++) /* rescale in double, to float; normalise in float */
		for (int c = 0; c < 3; c++)
			value[v][c] = ((float)(v * (1.0 / 255.0)) - g->mean[c]) / g->std[c];
	for (uint32_t bh = 0; bh < p->grid_h / M; bh++)
		for (uint32_t bw = 0; bw < p->grid_w / M; bw++)
			for (uint32_t mh = 0; mh < M; mh++)
				for (uint32_t mw = 0; mw < M; mw++, row++) {
					const size_t y0 = ((size_t)bh * M + mh) * P;
					const size_t x0 = ((size_t)bw * M + mw) * P;
					float *r = out + row * p->patch_dim;

					for (uint32_t c = 0; c < 3; c++)
						for (uint32_t y = 0; y < P; y++)
							for (uint32_t x = 0; x < P; x++) {
								const uint8_t v = img->rgb[((y0 + y) * img->width + x0 + x) * 3 + c];
								const float f = value[v][c];

								for (uint32_t t = 0; t < T; t++)
									r[((size_t)c * T + t) * plane + (size_t)y * P + x] = f;
							}
				}
	return 0;
}

int ns_image_preprocess(const struct ns_image *img, const struct ns_image_geom *g,
			const struct ns_image_plan *p, float **out, char *err, size_t errlen)
{
	struct ns_image sized = { 0 };
	const struct ns_image *use = img;
	uint64_t n;
	int rc;

	*out = NULL;
	if (ns_mul_u64_overflow(p->n_patches, p->patch_dim, &n) ||
	    ns_mul_u64_overflow(n, sizeof(float), &n) || n > SIZE_MAX) {
		ns_errf(err, errlen, "pixel values of %llu patches overflow",
			(unsigned long long)p->n_patches);
		return -EOVERFLOW;
	}
	if (img->width != p->width || img->height != p->height) {
		rc = ns_image_resize(img, p->width, p->height, &sized);
		if (rc < 0) {
			ns_errf(err, errlen, "resizing %ux%u to %ux%u: %s", img->width,
				img->height, p->width, p->height, strerror(-rc));
			return rc;
		}
		use = &sized;
	}
	*out = malloc(n ? (size_t)n : 1);
	if (!*out) {
		ns_image_free(&sized);
		ns_errf(err, errlen, "out of memory for %llu pixel values",
			(unsigned long long)(n / sizeof(float)));
		return -ENOMEM;
	}
	rc = ns_image_pixel_values(use, g, p, *out);
	ns_image_free(&sized);
	if (rc < 0) {
		free(*out);
		*out = NULL;
		ns_errf(err, errlen, "pixel values: the image does not match its plan");
	}
	return rc;
}
