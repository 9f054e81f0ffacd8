/* vt_util.h - helpers of the vision tests (header-only): oracle arrays, image files written
 * with the encoders' own libraries, and the error figures the tests report. */
#ifndef NS_VT_UTIL_H
#define NS_VT_UTIL_H

#include <math.h>
#include <png.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ns_test.h"

/* A whole oracle file of exactly n floats (the test fails otherwise). Caller frees. */
static inline float *vt_read_f32(const char *rel, size_t n)
{
	char path[4096];
	size_t len = 0;
	float *p = ns_test_read_file(ns_test_oracle_path(path, sizeof(path), rel), &len);

	NS_REQUIRE(p, "cannot read %s", path);
	NS_REQUIRE(len == n * sizeof(float), "%s: %zu bytes, not %zu floats", path, len, n);
	return p;
}

static inline uint8_t *vt_read_u8(const char *rel, size_t n)
{
	char path[4096];
	size_t len = 0;
	uint8_t *p = ns_test_read_file(ns_test_oracle_path(path, sizeof(path), rel), &len);

	NS_REQUIRE(p, "cannot read %s", path);
	NS_REQUIRE(len == n, "%s: %zu bytes, not %zu", path, len, n);
	return p;
}

/* The multimodal prompt's tokens: DIR/seqA.json's "mm_tokens" array (at most cap of them) into
 * tok; returns their count (the test fails on an unreadable or empty array). */
static inline uint32_t vt_mm_tokens(const char *dir, int32_t *tok, uint32_t cap)
{
	char rel[512], path[4096];
	size_t len = 0;
	uint32_t n = 0;
	char *json, *s;

	snprintf(rel, sizeof(rel), "%s/seqA.json", dir);
	json = ns_test_read_file(ns_test_oracle_path(path, sizeof(path), rel), &len);
	NS_REQUIRE(json && (s = strstr(json, "\"mm_tokens\"")) && (s = strchr(s, '[')),
		   "no mm_tokens in %s", path);
	for (s++; *s && *s != ']' && n < cap; n++) {
		tok[n] = (int32_t)strtol(s, &s, 10);
		while (*s == ',' || *s == ' ' || *s == '\n')
			s++;
	}
	NS_REQUIRE(*s == ']' && n > 0, "mm_tokens unreadable in %s", path);
	free(json);
	return n;
}

/* Write rgb (h, w, 3) as an 8-bit RGB PNG with libpng; exif (TIFF bytes) as an eXIf chunk
 * when given. */
static inline void vt_write_png(const char *path, const uint8_t *rgb, uint32_t w, uint32_t h,
				const uint8_t *exif, uint32_t n_exif)
{
	FILE *f = fopen(path, "wb");
	png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
	png_infop info = png ? png_create_info_struct(png) : NULL;

	NS_REQUIRE(f && png && info, "png writer for %s", path);
	if (setjmp(png_jmpbuf(png)))
		NS_FAIL("libpng failed writing %s", path);
	png_init_io(png, f);
	png_set_IHDR(png, info, w, h, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
		     PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
	if (exif)
		png_set_eXIf_1(png, info, n_exif, (png_bytep)exif);
	png_write_info(png, info);
	for (uint32_t y = 0; y < h; y++)
		png_write_row(png, (png_const_bytep)(rgb + (size_t)y * w * 3));
	png_write_end(png, NULL);
	png_destroy_write_struct(&png, &info);
	NS_REQUIRE(fclose(f) == 0, "close %s", path);
}

/* Difference of a computed array against a reference: the largest |a - b|, the reference's
 * largest |b| and its rms. rel = max_abs / ref_max is what the tests bound. */
struct vt_diff {
	double max_abs;
	double ref_max;
	double ref_rms;
	double rel;
	size_t at;
};

static inline struct vt_diff vt_diff(const float *a, const float *b, size_t n)
{
	struct vt_diff d = { 0 };
	double ss = 0.0;

	for (size_t i = 0; i < n; i++) {
		const double e = fabs((double)a[i] - (double)b[i]);

		if (e > d.max_abs || isnan(e)) {
			d.max_abs = isnan(e) ? INFINITY : e;
			d.at = i;
		}
		d.ref_max = fmax(d.ref_max, fabs((double)b[i]));
		ss += (double)b[i] * b[i];
	}
	d.ref_rms = sqrt(ss / (double)(n ? n : 1));
	d.rel = d.ref_max > 0 ? d.max_abs / d.ref_max : d.max_abs;
	return d;
}

#endif
