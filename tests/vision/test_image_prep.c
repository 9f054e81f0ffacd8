/* test_image_prep - images in: decoding, refusals, the processor's plan and pixel values.
 *
 *   1. The oracle's image.u8 (hf/qwen3_vl and hf/qwen3_5_cond, 64x64 RGB) written to a PNG,
 *      read back through ns_image_open/decode (bytes equal), preprocessed with the mmproj's
 *      mean/std: equal to the processor's image.pixel_values.f32 bit for bit, grid (1, 4, 4)
 *      as the sidecar's grid_thw.
 *   2. EXIF orientation: a 3x2 PNG with an eXIf chunk for each of the 8 orientations against
 *      the pictures PIL's exif_transpose gives (written out by hand below).
 *   3. Smart resize plans: Transformers' own example (1365x2048 -> 1376x2048, grid 86x128),
 *      Python's half-to-even rounding, the max_pixels and min_pixels branches, the token cap.
 *   4. Bad images, each refused with one line before decoding: not an image, empty, cut
 *      short (PNG, JPEG, WebP), 0x0, 30000x30000 (PNG and JPEG headers), aspect ratio 201,
 *      more tokens than allowed. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h> /* jpeglib.h needs FILE and size_t */
#include <jpeglib.h>
#include <string.h>
#include <webp/encode.h>
#include <zlib.h>

#include "image_prep.h"
#include "ns_util.h"
#include "vt_util.h"

#define S_SIDE 64u

static int s_fails;

/* Scratch files (removed at exit). */
static const char *s_png, *s_jpg, *s_webp, *s_bad;

/* ---------------------------------------------------------------- files --------------- */

static void s_write(const char *path, const void *data, size_t n)
{
	FILE *f = fopen(path, "wb");

	NS_REQUIRE(f && fwrite(data, 1, n, f) == n && fclose(f) == 0, "write %s", path);
}

static uint8_t *s_slurp(const char *path, size_t *n)
{
	uint8_t *p = ns_test_read_file(path, n);

	NS_REQUIRE(p, "read %s", path);
	return p;
}

static void s_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

/* A PNG of chunks IHDR (w, h, RGB8), one small IDAT, IEND: a header any reader accepts. */
static size_t s_png_header(uint8_t *b, uint32_t w, uint32_t h)
{
	static const uint8_t idat[] = { 0x78, 0x9c, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01 };
	const struct { const char *type; const uint8_t *data; uint32_t n; } ch[3] = {
		{ "IHDR", NULL, 13 }, { "IDAT", idat, sizeof(idat) }, { "IEND", NULL, 0 } };
	uint8_t ihdr[13] = { 0 };
	size_t n = 8;

	memcpy(b, "\x89PNG\r\n\x1a\n", 8);
	s_be32(ihdr, w);
	s_be32(ihdr + 4, h);
	ihdr[8] = 8; /* bit depth */
	ihdr[9] = 2; /* RGB */
	for (int i = 0; i < 3; i++) {
		const uint8_t *d = i == 0 ? ihdr : ch[i].data;

		s_be32(b + n, ch[i].n);
		memcpy(b + n + 4, ch[i].type, 4);
		if (ch[i].n)
			memcpy(b + n + 8, d, ch[i].n);
		s_be32(b + n + 8 + ch[i].n,
		       (uint32_t)crc32(0, b + n + 4, (uInt)(4 + ch[i].n)));
		n += 12 + ch[i].n;
	}
	return n;
}

static void s_write_jpeg(const char *path, const uint8_t *rgb, uint32_t w, uint32_t h)
{
	struct jpeg_compress_struct ci;
	struct jpeg_error_mgr je;
	FILE *f = fopen(path, "wb");

	NS_REQUIRE(f, "open %s", path);
	ci.err = jpeg_std_error(&je);
	jpeg_create_compress(&ci);
	jpeg_stdio_dest(&ci, f);
	ci.image_width = w;
	ci.image_height = h;
	ci.input_components = 3;
	ci.in_color_space = JCS_RGB;
	jpeg_set_defaults(&ci);
	jpeg_set_quality(&ci, 95, TRUE);
	jpeg_start_compress(&ci, TRUE);
	while (ci.next_scanline < h) {
		JSAMPROW row = (JSAMPROW)(rgb + (size_t)ci.next_scanline * w * 3);

		jpeg_write_scanlines(&ci, &row, 1);
	}
	jpeg_finish_compress(&ci);
	jpeg_destroy_compress(&ci);
	NS_REQUIRE(fclose(f) == 0, "close %s", path);
}

static void s_write_webp(const char *path, const uint8_t *rgb, uint32_t w, uint32_t h)
{
	uint8_t *out = NULL;
	size_t n = WebPEncodeLosslessRGB(rgb, (int)w, (int)h, (int)w * 3, &out);

	NS_REQUIRE(n > 0, "WebP encode");
	s_write(path, out, n);
	WebPFree(out);
}

/* ------------------------------------------------------------- checks ----------------- */

/* Open and decode; expect rgb (w, h) exactly, or within `tol` mean absolute difference. */
static void s_expect_pixels(const char *path, const uint8_t *want, uint32_t w, uint32_t h,
			    double tol)
{
	char err[NS_ERR_LEN];
	struct ns_image_file *f;
	struct ns_image img;
	double sum = 0.0;
	size_t n = (size_t)w * h * 3;

	NS_REQUIRE(ns_image_open(path, &f, err, sizeof(err)) == 0, "%s", err);
	NS_REQUIRE(ns_image_decode(f, &img, err, sizeof(err)) == 0, "%s", err);
	NS_EXPECT(s_fails, img.width == w && img.height == h, "%s: %ux%u, not %ux%u", path,
		  img.width, img.height, w, h);
	if (img.width == w && img.height == h) {
		for (size_t i = 0; i < n; i++)
			sum += abs((int)img.rgb[i] - (int)want[i]);
		NS_EXPECT(s_fails, tol > 0 ? sum / n <= tol : sum == 0, "%s (%s): mean |d| %.3f",
			  path, ns_image_format_name(f->format), sum / n);
		printf("  %-5s %ux%u decoded, mean |d| vs the source %.3f\n",
		       ns_image_format_name(f->format), w, h, sum / n);
	}
	ns_image_free(&img);
	ns_image_close(&f);
}

/* JPEG is lossy and the oracle image is noise: a smooth picture instead, decoded within a
 * mean error of 1 (channels, rows, upsampling all right), here; test_image_pil.py holds the
 * decoder to Pillow's bytes. */
static void s_jpeg_smooth(const char *jpg)
{
	uint8_t *rgb = malloc(S_SIDE * S_SIDE * 3);

	NS_REQUIRE(rgb, "out of memory");
	for (uint32_t y = 0; y < S_SIDE; y++)
		for (uint32_t x = 0; x < S_SIDE; x++) {
			uint8_t *p = rgb + (y * S_SIDE + x) * 3;

			p[0] = (uint8_t)(x * 4);
			p[1] = (uint8_t)(y * 4);
			p[2] = (uint8_t)(255 - (x + y) * 2);
		}
	s_write_jpeg(jpg, rgb, S_SIDE, S_SIDE);
	s_expect_pixels(jpg, rgb, S_SIDE, S_SIDE, 1.0);
	free(rgb);
}

/* The processor's pixel values for the oracle image, bit for bit. */
static void s_oracle(const char *dir)
{
	char rel[256], err[NS_ERR_LEN];
	const char *png = s_png, *jpg = s_jpg, *webp = s_webp;
	struct ns_image_geom g = { .patch = 16, .merge = 2, .temporal = 2,
				   .min_pixels = S_SIDE * S_SIDE,
				   .max_pixels = NS_IMAGE_DEFAULT_MAX_PIXELS,
				   .mean = { 0.5f, 0.5f, 0.5f }, .std = { 0.5f, 0.5f, 0.5f } };
	struct ns_image_plan p;
	struct ns_image_file *f;
	struct ns_image img;
	uint8_t *u8;
	float *want, *px;
	size_t diff = 0;

	printf("%s:\n", dir);
	snprintf(rel, sizeof(rel), "%s/image.u8", dir);
	u8 = vt_read_u8(rel, S_SIDE * S_SIDE * 3);
	snprintf(rel, sizeof(rel), "%s/image.pixel_values.f32", dir);
	want = vt_read_f32(rel, 16 * 1536);
	vt_write_png(png, u8, S_SIDE, S_SIDE, NULL, 0);
	s_write_webp(webp, u8, S_SIDE, S_SIDE);
	s_expect_pixels(png, u8, S_SIDE, S_SIDE, 0);
	s_expect_pixels(webp, u8, S_SIDE, S_SIDE, 0);
	s_jpeg_smooth(jpg);

	NS_REQUIRE(ns_image_open(png, &f, err, sizeof(err)) == 0, "%s", err);
	NS_REQUIRE(ns_image_plan(&g, f->width, f->height, &p, err, sizeof(err)) == 0, "%s", err);
	NS_EXPECT(s_fails, p.grid_t == 1 && p.grid_h == 4 && p.grid_w == 4 && p.n_tokens == 4 &&
		  p.patch_dim == 1536, "plan %ux%ux%u, %llu tokens", p.grid_t, p.grid_h,
		  p.grid_w, (unsigned long long)p.n_tokens);
	NS_REQUIRE(ns_image_decode(f, &img, err, sizeof(err)) == 0, "%s", err);
	NS_REQUIRE(ns_image_preprocess(&img, &g, &p, &px, err, sizeof(err)) == 0, "%s", err);
	for (size_t i = 0; i < 16 * 1536; i++)
		diff += memcmp(&px[i], &want[i], sizeof(float)) != 0;
	printf("  pixel values: %zu of %u differ from image.pixel_values.f32 (max |d| %.3g)\n",
	       diff, 16 * 1536, vt_diff(px, want, 16 * 1536).max_abs);
	NS_EXPECT(s_fails, diff == 0, "%s: %zu pixel values differ", dir, diff);
	free(px);
	ns_image_free(&img);
	ns_image_close(&f);
	free(want);
	free(u8);
}

/* A TIFF block holding only Orientation = o, little-endian. */
static size_t s_exif(uint8_t *b, uint16_t o)
{
	static const uint8_t head[] = { 'I', 'I', 42, 0, 8, 0, 0, 0, 1, 0, 0x12, 0x01, 3, 0,
					1, 0, 0, 0 };

	memcpy(b, head, sizeof(head));
	b[18] = (uint8_t)o;
	b[19] = 0;
	memset(b + 20, 0, 6);
	return 26;
}

static void s_orientation(void)
{
	/* the stored picture, 3 wide and 2 high: A B C / D E F (one grey level per pixel) */
	static const uint8_t src[6] = { 'A', 'B', 'C', 'D', 'E', 'F' };
	/* PIL: 2 FLIP_LEFT_RIGHT, 3 ROTATE_180, 4 FLIP_TOP_BOTTOM, 5 TRANSPOSE, 6 ROTATE_270,
	 * 7 TRANSVERSE, 8 ROTATE_90 (counter-clockwise) */
	static const char *want[9] = { NULL, "ABCDEF", "CBAFED", "FEDCBA", "DEFABC",
				       "ADBECF", "DAEBFC", "FCEBDA", "CFBEAD" };
	const char *png = s_png;
	uint8_t rgb[18], exif[32];
	char err[NS_ERR_LEN];

	for (int i = 0; i < 6; i++)
		memset(rgb + i * 3, src[i], 3);
	for (uint16_t o = 1; o <= 8; o++) {
		struct ns_image_file *f;
		struct ns_image img;
		const bool swap = o >= 5;
		char got[7] = { 0 };

		vt_write_png(png, rgb, 3, 2, exif, (uint32_t)s_exif(exif, o));
		NS_REQUIRE(ns_image_open(png, &f, err, sizeof(err)) == 0, "%s", err);
		NS_REQUIRE(ns_image_decode(f, &img, err, sizeof(err)) == 0, "%s", err);
		NS_EXPECT(s_fails, f->orientation == o && img.width == (swap ? 2u : 3u) &&
			  img.height == (swap ? 3u : 2u), "orientation %u: read %u, %ux%u", o,
			  f->orientation, img.width, img.height);
		for (int i = 0; i < 6; i++)
			got[i] = (char)img.rgb[i * 3];
		NS_EXPECT(s_fails, !strcmp(got, want[o]), "orientation %u: %s, not %s", o, got,
			  want[o]);
		ns_image_free(&img);
		ns_image_close(&f);
	}
	printf("EXIF orientations 1..8: as PIL's exif_transpose\n");
}

/* ------------------------------------------------------------- plans ------------------ */

static void s_plan(uint32_t w, uint32_t h, uint64_t min_px, uint64_t max_tokens, int want_rc,
		   uint32_t want_w, uint32_t want_h)
{
	struct ns_image_geom g = { .patch = 16, .merge = 2, .temporal = 2, .min_pixels = min_px,
				   .max_pixels = NS_IMAGE_DEFAULT_MAX_PIXELS,
				   .max_tokens = max_tokens, .mean = { 0.5f, 0.5f, 0.5f },
				   .std = { 0.5f, 0.5f, 0.5f } };
	struct ns_image_plan p;
	char err[NS_ERR_LEN] = "";
	int rc = ns_image_plan(&g, w, h, &p, err, sizeof(err));

	printf("  %ux%u (min_pixels %llu, max tokens %llu): ", w, h, (unsigned long long)min_px,
	       (unsigned long long)max_tokens);
	if (rc == 0)
		printf("%ux%u, grid %ux%u, %llu tokens\n", p.width, p.height, p.grid_w, p.grid_h,
		       (unsigned long long)p.n_tokens);
	else
		printf("refused: %s\n", err);
	NS_EXPECT(s_fails, rc == want_rc, "%ux%u: rc %d, not %d", w, h, rc, want_rc);
	NS_EXPECT(s_fails, rc || (p.width == want_w && p.height == want_h &&
				  p.n_tokens == (uint64_t)want_w * want_h / 1024),
		  "%ux%u: planned %ux%u, not %ux%u", w, h, p.width, p.height, want_w, want_h);
	NS_EXPECT(s_fails, rc == 0 || (err[0] && !strchr(err, '\n')), "no one-line reason");
}

static void s_plans(void)
{
	const uint64_t dflt = NS_IMAGE_DEFAULT_MIN_PIXELS;

	printf("smart resize (patch 16, merge 2):\n");
	s_plan(2048, 1365, dflt, 0, 0, 2048, 1376); /* Transformers' example, grid 128x86 */
	s_plan(80, 48, 64 * 64, 0, 0, 64, 64);      /* round(2.5) = 2, round(1.5) = 2 */
	s_plan(4000, 3000, dflt, 256, 0, 576, 416); /* max: sqrt(12e6 / 262144) = 6.77 */
	s_plan(30, 20, dflt, 0, 0, 320, 224);       /* min: sqrt(65536 / 600) = 10.45 */
	s_plan(64, 64, dflt, 0, 0, 256, 256);       /* the processor's default upscales */
	s_plan(64, 64, 64 * 64, 3, 0, 32, 32);      /* capped: 1 token */
	s_plan(6400, 32, 64 * 64, 10, -E2BIG, 0, 0); /* stays >= 32 high: 44 tokens */
	s_plan(2010, 10, dflt, 0, -EINVAL, 0, 0);   /* aspect ratio 201 */
}

/* ------------------------------------------------------------- refusals --------------- */

static void s_refuse(const char *what, const char *path, int want_rc)
{
	char err[NS_ERR_LEN] = "";
	struct ns_image_file *f = NULL;
	int rc = ns_image_open(path, &f, err, sizeof(err));

	printf("  %-30s -> %s\n", what, rc ? err : "(accepted)");
	NS_EXPECT(s_fails, rc == want_rc && !f == !!rc, "%s: rc %d, not %d", what, rc, want_rc);
	NS_EXPECT(s_fails, rc == 0 || (strstr(err, path) && !strchr(err, '\n')),
		  "%s: the line does not name the file", what);
	ns_image_close(&f);
}

static void s_cut(const char *src, const char *dst, size_t keep)
{
	size_t n;
	uint8_t *b = s_slurp(src, &n);

	NS_REQUIRE(keep < n, "cut %s", src);
	s_write(dst, b, keep);
	free(b);
}

/* The SOF0 marker's height and width fields of a baseline JPEG set to (w, h). */
static void s_jpeg_size(const char *src, const char *dst, uint16_t w, uint16_t h)
{
	size_t n, i;
	uint8_t *b = s_slurp(src, &n);

	for (i = 2; i + 9 < n && !(b[i] == 0xff && b[i + 1] == 0xc0); i++)
		;
	NS_REQUIRE(i + 9 < n, "no SOF0 in %s", src);
	b[i + 5] = (uint8_t)(h >> 8);
	b[i + 6] = (uint8_t)h;
	b[i + 7] = (uint8_t)(w >> 8);
	b[i + 8] = (uint8_t)w;
	s_write(dst, b, n);
	free(b);
}

static void s_refusals(void)
{
	const char *png = s_png, *jpg = s_jpg, *webp = s_webp, *bad = s_bad;
	uint8_t hdr[128];
	size_t n;

	printf("refused:\n");
	s_write(bad, "this is not an image\n", 21);
	s_refuse("not an image", bad, -EINVAL);
	s_write(bad, "", 0);
	s_refuse("empty file", bad, -EINVAL);
	s_cut(png, bad, 20);
	s_refuse("PNG cut at 20 bytes", bad, -EINVAL);
	s_cut(jpg, bad, 12);
	s_refuse("JPEG cut at 12 bytes", bad, -EINVAL);
	s_cut(webp, bad, 40);
	s_refuse("WebP cut at 40 bytes", bad, -EINVAL);
	n = s_png_header(hdr, 0, 0);
	s_write(bad, hdr, n);
	s_refuse("PNG 0x0", bad, -EINVAL);
	n = s_png_header(hdr, 30000, 30000);
	s_write(bad, hdr, n);
	s_refuse("PNG 30000x30000", bad, -EFBIG);
	s_jpeg_size(jpg, bad, 30000, 30000);
	s_refuse("JPEG 30000x30000", bad, -EFBIG);
	n = s_png_header(hdr, 64, 64);
	s_write(bad, hdr, n);
	s_refuse("PNG header fine (control)", bad, 0);
}

/* A JPEG cut after its header opens (the header is whole) but does not decode. */
static void s_truncated_data(void)
{
	const char *bad = s_bad;
	const char *srcs[2] = { s_jpg, s_png };
	char err[NS_ERR_LEN];

	for (int i = 0; i < 2; i++) {
		struct ns_image_file *f;
		struct ns_image img;
		size_t n;
		uint8_t *b = s_slurp(srcs[i], &n);
		int rc;

		s_write(bad, b, n * 3 / 4);
		free(b);
		NS_REQUIRE(ns_image_open(bad, &f, err, sizeof(err)) == 0, "%s", err);
		rc = ns_image_decode(f, &img, err, sizeof(err));
		printf("  %s cut at 3/4 (header whole) -> decode: %s\n",
		       ns_image_format_name(f->format), rc ? err : "(accepted)");
		NS_EXPECT(s_fails, rc == -EINVAL && !img.rgb, "%s cut: decoded",
			  ns_image_format_name(f->format));
		ns_image_close(&f);
	}
}

int main(void)
{
	ns_test_require_oracle();
	atexit(ns_test_scratch_remove);
	s_png = ns_test_scratch("vt_prep", "png");
	s_jpg = ns_test_scratch("vt_prep", "jpg");
	s_webp = ns_test_scratch("vt_prep", "webp");
	s_bad = ns_test_scratch("vt_prep", "img");
	s_oracle("hf/qwen3_vl");
	s_oracle("hf/qwen3_5_cond");
	s_orientation();
	s_plans();
	s_refusals();
	s_truncated_data();
	if (s_fails)
		return 1;
	printf("ok\n");
	return 0;
}
