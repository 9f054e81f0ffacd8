/* image_jpeg.c - JPEG through libjpeg(-turbo), from memory.
 *
 * libjpeg's defaults (ISLOW DCT, fancy upsampling) are what Pillow uses with the same library,
 * so the RGB is the one Transformers' load_image sees. Fatal errors longjmp out of the
 * library; warnings are counted by s_emit, and any warning but stray bytes before a marker
 * (harmless, common in files from the wild) refuses the image: libjpeg warns and pads with
 * gray when data is cut or corrupt, which would be silent garbage. CMYK / YCCK files are
 * refused (Pillow's inverted-Adobe handling is not reproduced). */
#include <errno.h>
#include <setjmp.h>
#include <stdio.h> /* jpeglib.h needs FILE */
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <jerror.h>

#include "image_codec.h"
#include "ns_util.h"

struct s_jerr {
	struct jpeg_error_mgr mgr;
	jmp_buf jb;
	int warnings;
	char msg[JMSG_LENGTH_MAX];
};

static void s_error_exit(j_common_ptr c)
{
	struct s_jerr *e = (struct s_jerr *)c->err;

	c->err->format_message(c, e->msg);
	longjmp(e->jb, 1);
}

static void s_emit(j_common_ptr c, int level)
{
	struct s_jerr *e = (struct s_jerr *)c->err;

	if (level >= 0 || c->err->msg_code == JWRN_EXTRANEOUS_DATA)
		return; /* trace messages; stray bytes before a marker */
	if (e->warnings++ == 0)
		c->err->format_message(c, e->msg);
}

static uint32_t s_orientation(j_decompress_ptr ci)
{
	for (jpeg_saved_marker_ptr m = ci->marker_list; m; m = m->next)
		if (m->marker == JPEG_APP0 + 1 && m->data_length >= 6 &&
		    memcmp(m->data, "Exif\0\0", 6) == 0)
			return ns_exif_orientation(m->data, m->data_length);
	return 1;
}

struct s_jpeg {
	struct jpeg_decompress_struct ci;
	struct s_jerr e;
	uint8_t *rgb;
};

static int s_decode(struct s_jpeg *j, struct ns_image_raw *out, char *err, size_t errlen)
{
	j_decompress_ptr ci = &j->ci;
	const size_t stride = (size_t)out->width * 3;

	if (ci->jpeg_color_space == JCS_CMYK || ci->jpeg_color_space == JCS_YCCK) {
		ns_errf(err, errlen, "CMYK JPEG images are not supported");
		return -EINVAL;
	}
	ci->out_color_space = JCS_RGB;
	jpeg_start_decompress(ci);
	if (ci->output_width != out->width || ci->output_height != out->height ||
	    ci->output_components != 3) {
		ns_errf(err, errlen, "JPEG decoder gave %ux%u with %d components", ci->output_width,
			ci->output_height, ci->output_components);
		return -EINVAL;
	}
	j->rgb = ns_image_rgb_alloc(out->width, out->height);
	if (!j->rgb) {
		ns_errf(err, errlen, "out of memory for the pixels");
		return -ENOMEM;
	}
	while (ci->output_scanline < ci->output_height) {
		JSAMPROW row = j->rgb + (size_t)ci->output_scanline * stride;

		if (jpeg_read_scanlines(ci, &row, 1) != 1)
			break;
	}
	if (ci->output_scanline == ci->output_height)
		jpeg_finish_decompress(ci);
	if (j->e.warnings || ci->output_scanline != ci->output_height) {
		ns_errf(err, errlen, "corrupt or truncated JPEG: %s",
			j->e.warnings ? j->e.msg : "rows missing");
		return -EINVAL;
	}
	out->rgb = j->rgb;
	j->rgb = NULL;
	return 0;
}

static int s_read(struct s_jpeg *volatile j, const uint8_t *data, size_t len, bool decode,
		  struct ns_image_raw *out, char *err, size_t errlen)
{
	volatile int rc = 0;

	j->ci.err = jpeg_std_error(&j->e.mgr);
	j->e.mgr.error_exit = s_error_exit;
	j->e.mgr.emit_message = s_emit;
	if (setjmp(j->e.jb)) {
		ns_errf(err, errlen, "corrupt JPEG: %s", j->e.msg);
		jpeg_destroy_decompress(&j->ci);
		free(j->rgb);
		j->rgb = NULL;
		return -EINVAL;
	}
	jpeg_create_decompress(&j->ci);
	jpeg_mem_src(&j->ci, data, (unsigned long)len);
	jpeg_save_markers(&j->ci, JPEG_APP0 + 1, 0xffff);
	if (jpeg_read_header(&j->ci, TRUE) != JPEG_HEADER_OK) {
		ns_errf(err, errlen, "corrupt JPEG: no image in the file");
		rc = -EINVAL;
	} else {
		out->width = j->ci.image_width;
		out->height = j->ci.image_height;
		out->orientation = s_orientation(&j->ci);
		if (decode)
			rc = s_decode(j, out, err, errlen);
	}
	jpeg_destroy_decompress(&j->ci);
	free(j->rgb);
	j->rgb = NULL;
	return rc;
}

int ns_image_jpeg_read(const uint8_t *data, size_t len, bool decode, struct ns_image_raw *out,
		       char *err, size_t errlen)
{
	struct s_jpeg *j = calloc(1, sizeof(*j));
	int rc;

	if (!j) {
		ns_errf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	rc = s_read(j, data, len, decode, out, err, errlen);
	free(j);
	return rc;
}
