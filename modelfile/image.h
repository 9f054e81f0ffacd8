/* image.h - image files in: PNG, JPEG and WebP decoded to 8-bit RGB.
 *
 * Decoding is Debian's libraries' (libpng, libjpeg-turbo, libwebp with its demuxer); what this
 * module adds is the contract a multimodal prompt needs:
 *   - ns_image_open reads the file (at most NS_IMAGE_MAX_FILE_BYTES) and only its header:
 *     format, stored size and EXIF orientation. Bad files (not an image, truncated header,
 *     0x0, more than NS_IMAGE_MAX_PIXELS pixels) are refused here with one line, before any
 *     pixel is decoded or any weight read, so a caller can also refuse an image whose token
 *     count is too large (image_prep.h) at this point.
 *   - ns_image_decode turns it into RGB the way Transformers' load_image does with Pillow
 *     (Image.open, ImageOps.exif_transpose, convert("RGB")): EXIF orientation applied, alpha
 *     dropped (not blended), grayscale replicated, palettes expanded, 16-bit samples reduced
 *     to their high byte, the first frame of an animation. JPEGs decode with libjpeg's
 *     defaults (ISLOW DCT, fancy upsampling), which is what Pillow asks of the same library;
 *     a JPEG that makes libjpeg warn (corrupt or cut data it would pad with gray) is refused.
 *     Known difference: Pillow clips 16-bit grayscale to 255 when converting to RGB; we keep
 *     the high byte. CMYK JPEGs are refused.
 *
 * Ownership: ns_image_open returns a struct ns_image_file owning the file's bytes, freed with
 * ns_image_close(&f) (nulls f). ns_image_decode fills a struct ns_image whose rgb the caller
 * frees with ns_image_free. Errors are negative errnos with one line in err naming the file:
 * -EINVAL for a bad or unsupported image, -EFBIG for one over the limits, -ENOMEM, -errno for
 * I/O. */
#ifndef NS_IMAGE_H
#define NS_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#define NS_IMAGE_MAX_FILE_BYTES (256ull << 20)
/* 64 Mpx: 192 MiB of RGB; a 30000x30000 "image" (often a decompression bomb) is refused. */
#define NS_IMAGE_MAX_PIXELS (1ull << 26)

enum ns_image_format {
	NS_IMAGE_PNG = 1,
	NS_IMAGE_JPEG = 2,
	NS_IMAGE_WEBP = 3,
};

struct ns_image_file {
	char *path;                  /* copy, for messages */
	uint8_t *data;               /* (len) the file's bytes */
	size_t len;
	enum ns_image_format format;
	uint32_t stored_width;       /* as encoded */
	uint32_t stored_height;
	uint32_t orientation;        /* EXIF orientation 1..8; 1 when absent or invalid */
	uint32_t width;              /* after orientation: what the model sees */
	uint32_t height;
};

struct ns_image {
	uint32_t width;
	uint32_t height;
	uint8_t *rgb; /* (height, width, 3) row-major, R G B */
};

int ns_image_open(const char *path, struct ns_image_file **out, char *err, size_t errlen);

/* The same from bytes in memory (copied); name is used in messages. */
int ns_image_open_mem(const void *data, size_t len, const char *name, struct ns_image_file **out,
		      char *err, size_t errlen);

int ns_image_decode(const struct ns_image_file *f, struct ns_image *out, char *err,
		    size_t errlen);

const char *ns_image_format_name(enum ns_image_format fmt);

void ns_image_close(struct ns_image_file **f);
void ns_image_free(struct ns_image *img);

#endif
