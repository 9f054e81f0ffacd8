/* image_codec.h - the per-format readers behind image.h (internal to modelfile).
 *
 * Each reader parses one encoded file held in memory. With decode false it reads only the
 * header (stored size, EXIF orientation); with decode true it also decodes the first frame to
 * RGB8 as stored (orientation not yet applied) into a buffer it allocates. The caller has
 * checked the size limits between the two calls. Returns 0 or a negative errno with one line
 * in err (without the file name: image.c prefixes it). */
#ifndef NS_IMAGE_CODEC_H
#define NS_IMAGE_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ns_image_raw {
	uint32_t width;       /* as stored */
	uint32_t height;
	uint32_t orientation; /* EXIF 1..8, 1 when none */
	uint8_t *rgb;         /* (height, width, 3) after a decode, owned by the caller */
};

int ns_image_png_read(const uint8_t *data, size_t len, bool decode, struct ns_image_raw *out,
		      char *err, size_t errlen);
int ns_image_jpeg_read(const uint8_t *data, size_t len, bool decode, struct ns_image_raw *out,
		       char *err, size_t errlen);
int ns_image_webp_read(const uint8_t *data, size_t len, bool decode, struct ns_image_raw *out,
		       char *err, size_t errlen);

/* EXIF orientation (tag 0x0112 of IFD0) from a TIFF block ("II*\0" or "MM\0*" ...), also when
 * it starts with the "Exif\0\0" prefix. 1 when absent, malformed or out of 1..8. */
uint32_t ns_exif_orientation(const uint8_t *p, size_t len);

/* rgb (height, width, 3) of `bytes` = width * height * 3 allocated with malloc, overflow- and
 * limit-checked by the caller; NULL on failure. */
uint8_t *ns_image_rgb_alloc(uint32_t width, uint32_t height);

#endif
