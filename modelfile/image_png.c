/* image_png.c - PNG through libpng, from memory.
 *
 * libpng reports errors by longjmp to the setjmp in s_read; everything allocated after it is
 * reached through the volatile context so that path frees it. Transformations give RGB8 as
 * Pillow's convert("RGB") does: palette expanded, gray replicated (1/2/4-bit scaled to 8),
 * 16-bit samples cut to their high byte, alpha (and tRNS) dropped, interlacing undone.
 * libpng's warnings (benign problems of ancillary chunks) are ignored; an error in a critical
 * chunk or data that ends early refuses the image. */
#include <errno.h>
#include <png.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

#include "image_codec.h"
#include "ns_util.h"

struct s_png {
	const uint8_t *data;
	size_t len;
	size_t off;
	char *err;
	size_t errlen;
	uint8_t *rgb;      /* the output, freed on error */
	png_bytep *rows;   /* (height) row pointers into rgb */
	bool oom;
};

static void s_error(png_structp png, png_const_charp msg)
{
	struct s_png *s = png_get_error_ptr(png);

	ns_errf(s->err, s->errlen, "corrupt PNG: %s", msg);
	png_longjmp(png, 1);
}

static void s_warning(png_structp png, png_const_charp msg)
{
	(void)png;
	(void)msg;
}

static void s_source(png_structp png, png_bytep dst, size_t n)
{
	struct s_png *s = png_get_io_ptr(png);

	if (n > s->len - s->off)
		png_error(png, "the file ends early (truncated)");
	memcpy(dst, s->data + s->off, n);
	s->off += n;
}

/* Transformations to RGB8, then the check that libpng agrees on the layout. */
static void s_setup_rgb8(png_structp png, png_infop info, uint32_t width)
{
	int color = png_get_color_type(png, info);

	if (png_get_bit_depth(png, info) == 16)
		png_set_strip_16(png);
	if (color == PNG_COLOR_TYPE_PALETTE)
		png_set_palette_to_rgb(png);
	if (!(color & PNG_COLOR_MASK_COLOR)) {
		png_set_expand_gray_1_2_4_to_8(png);
		png_set_gray_to_rgb(png);
	}
	png_set_strip_alpha(png); /* also an alpha channel the expansions add from tRNS */
	png_set_interlace_handling(png);
	png_read_update_info(png, info);
	if (png_get_channels(png, info) != 3 || png_get_bit_depth(png, info) != 8 ||
	    png_get_rowbytes(png, info) != (size_t)width * 3)
		png_error(png, "unexpected pixel layout after conversion to RGB");
}

static int s_read(struct s_png *volatile s, bool decode, struct ns_image_raw *out)
{
	png_structp png;
	png_infop info = NULL;
	png_bytep exif = NULL;
	png_uint_32 w, h, n_exif = 0;

	png = png_create_read_struct(PNG_LIBPNG_VER_STRING, s, s_error, s_warning);
	if (!png || !(info = png_create_info_struct(png))) {
		png_destroy_read_struct(&png, NULL, NULL);
		ns_errf(s->err, s->errlen, "out of memory");
		return -ENOMEM;
	}
	if (setjmp(png_jmpbuf(png))) {
		png_destroy_read_struct(&png, &info, NULL);
		free(s->rows);
		free(s->rgb);
		s->rows = NULL;
		s->rgb = NULL;
		return s->oom ? -ENOMEM : -EINVAL;
	}
	png_set_read_fn(png, s, s_source);
	png_set_user_limits(png, 0x7fffffff, 0x7fffffff); /* image.c applies the real limits */
	png_read_info(png, info);
	w = png_get_image_width(png, info);
	h = png_get_image_height(png, info);
	out->width = w;
	out->height = h;
	out->orientation = 1;
#ifdef PNG_eXIf_SUPPORTED
	if (png_get_eXIf_1(png, info, &n_exif, &exif) && exif)
		out->orientation = ns_exif_orientation(exif, n_exif);
#endif
	if (decode) {
		s_setup_rgb8(png, info, w);
		s->rgb = ns_image_rgb_alloc(w, h);
		s->rows = s->rgb ? malloc((size_t)h * sizeof(*s->rows)) : NULL;
		if (!s->rows) {
			s->oom = true;
			png_error(png, "out of memory for the pixels");
		}
		for (png_uint_32 y = 0; y < h; y++)
			s->rows[y] = s->rgb + (size_t)y * w * 3;
		png_read_image(png, s->rows);
		free(s->rows);
		s->rows = NULL;
		out->rgb = s->rgb;
		s->rgb = NULL;
	}
	png_destroy_read_struct(&png, &info, NULL);
	return 0;
}

int ns_image_png_read(const uint8_t *data, size_t len, bool decode, struct ns_image_raw *out,
		      char *err, size_t errlen)
{
	struct s_png s = { .data = data, .len = len, .err = err, .errlen = errlen };

	return s_read(&s, decode, out);
}
