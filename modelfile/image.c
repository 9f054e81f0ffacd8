/* image.c - see image.h: the file, its format, the limits, the EXIF orientation. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image.h"
#include "image_codec.h"
#include "ns_util.h"

typedef int (*s_reader)(const uint8_t *data, size_t len, bool decode, struct ns_image_raw *out,
			char *err, size_t errlen);

const char *ns_image_format_name(enum ns_image_format fmt)
{
	switch (fmt) {
	case NS_IMAGE_PNG:
		return "PNG";
	case NS_IMAGE_JPEG:
		return "JPEG";
	case NS_IMAGE_WEBP:
		return "WebP";
	}
	return "?";
}

uint8_t *ns_image_rgb_alloc(uint32_t width, uint32_t height)
{
	uint64_t n;

	if (ns_mul_u64_overflow(width, height, &n) || n > NS_IMAGE_MAX_PIXELS || n == 0)
		return NULL;
	return malloc((size_t)n * 3);
}

static int s_format(const uint8_t *p, size_t len, enum ns_image_format *fmt)
{
	if (len >= 8 && memcmp(p, "\x89PNG\r\n\x1a\n", 8) == 0)
		*fmt = NS_IMAGE_PNG;
	else if (len >= 3 && memcmp(p, "\xff\xd8\xff", 3) == 0)
		*fmt = NS_IMAGE_JPEG;
	else if (len >= 12 && memcmp(p, "RIFF", 4) == 0 && memcmp(p + 8, "WEBP", 4) == 0)
		*fmt = NS_IMAGE_WEBP;
	else
		return -EINVAL;
	return 0;
}

static s_reader s_reader_of(enum ns_image_format fmt)
{
	return fmt == NS_IMAGE_PNG ? ns_image_png_read
	       : fmt == NS_IMAGE_JPEG ? ns_image_jpeg_read : ns_image_webp_read;
}

/* Orientations 5..8 turn the picture a quarter: width and height swap. */
static bool s_swaps(uint32_t orientation)
{
	return orientation >= 5 && orientation <= 8;
}

/* Format, header, limits: what may be known of an image before decoding it. */
static int s_probe(struct ns_image_file *f, char *err, size_t errlen)
{
	struct ns_image_raw raw = { 0 };
	char why[NS_ERR_LEN];
	uint64_t px;
	int rc;

	if (s_format(f->data, f->len, &f->format) < 0) {
		ns_errf(err, errlen, "%s: not a PNG, JPEG or WebP file%s", f->path,
			f->len ? "" : " (empty)");
		return -EINVAL;
	}
	rc = s_reader_of(f->format)(f->data, f->len, false, &raw, why, sizeof(why));
	if (rc < 0) {
		ns_errf(err, errlen, "%s: %s", f->path, why);
		return rc;
	}
	px = (uint64_t)raw.width * raw.height;
	if (px == 0) {
		ns_errf(err, errlen, "%s: the %s image is %ux%u: no pixels", f->path,
			ns_image_format_name(f->format), raw.width, raw.height);
		return -EINVAL;
	}
	if (px > NS_IMAGE_MAX_PIXELS) {
		ns_errf(err, errlen, "%s: the %s image is %ux%u = %llu pixels, more than the %llu "
			"we decode", f->path, ns_image_format_name(f->format), raw.width,
			raw.height, (unsigned long long)px,
			(unsigned long long)NS_IMAGE_MAX_PIXELS);
		return -EFBIG;
	}
	f->stored_width = raw.width;
	f->stored_height = raw.height;
	f->orientation = raw.orientation;
	f->width = s_swaps(raw.orientation) ? raw.height : raw.width;
	f->height = s_swaps(raw.orientation) ? raw.width : raw.height;
	return 0;
}

static int s_new(const char *name, struct ns_image_file **out, char *err, size_t errlen)
{
	struct ns_image_file *f = calloc(1, sizeof(*f));

	if (!f || !(f->path = strdup(name))) {
		free(f);
		ns_errf(err, errlen, "%s: out of memory", name);
		return -ENOMEM;
	}
	*out = f;
	return 0;
}

static int s_slurp(int fd, struct ns_image_file *f, char *err, size_t errlen)
{
	struct stat st;
	size_t got = 0;

	if (fstat(fd, &st) < 0) {
		ns_errf(err, errlen, "%s: %s", f->path, strerror(errno));
		return -errno;
	}
	if (!S_ISREG(st.st_mode)) {
		ns_errf(err, errlen, "%s: not a regular file", f->path);
		return -EINVAL;
	}
	if ((uint64_t)st.st_size > NS_IMAGE_MAX_FILE_BYTES) {
		ns_errf(err, errlen, "%s: %llu bytes, more than the %llu an image file may have",
			f->path, (unsigned long long)st.st_size,
			(unsigned long long)NS_IMAGE_MAX_FILE_BYTES);
		return -EFBIG;
	}
	f->data = malloc(st.st_size ? (size_t)st.st_size : 1);
	if (!f->data) {
		ns_errf(err, errlen, "%s: out of memory", f->path);
		return -ENOMEM;
	}
	while (got < (size_t)st.st_size) {
		ssize_t n = read(fd, f->data + got, (size_t)st.st_size - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			ns_errf(err, errlen, "%s: %s", f->path, n ? strerror(errno) : "file shrank");
			return n ? -errno : -EIO;
		}
		got += (size_t)n;
	}
	f->len = got;
	return 0;
}

int ns_image_open(const char *path, struct ns_image_file **out, char *err, size_t errlen)
{
	struct ns_image_file *f;
	int fd, rc;

	*out = NULL;
	rc = s_new(path, &f, err, errlen);
	if (rc < 0)
		return rc;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		ns_errf(err, errlen, "%s: %s", path, strerror(errno));
	} else {
		rc = s_slurp(fd, f, err, errlen);
		close(fd);
	}
	if (rc == 0)
		rc = s_probe(f, err, errlen);
	if (rc < 0)
		ns_image_close(&f);
	*out = f;
	return rc;
}

int ns_image_open_mem(const void *data, size_t len, const char *name, struct ns_image_file **out,
		      char *err, size_t errlen)
{
	struct ns_image_file *f;
	int rc;

	*out = NULL;
	if (len > NS_IMAGE_MAX_FILE_BYTES) {
		ns_errf(err, errlen, "%s: %zu bytes, more than the %llu an image file may have",
			name, len, (unsigned long long)NS_IMAGE_MAX_FILE_BYTES);
		return -EFBIG;
	}
	rc = s_new(name, &f, err, errlen);
	if (rc < 0)
		return rc;
	f->data = malloc(len ? len : 1);
	if (!f->data) {
		ns_errf(err, errlen, "%s: out of memory", name);
		rc = -ENOMEM;
	} else {
		memcpy(f->data, data, len);
		f->len = len;
		rc = s_probe(f, err, errlen);
	}
	if (rc < 0)
		ns_image_close(&f);
	*out = f;
	return rc;
}

/* dst (oriented) pixel (x, y) from the stored picture of sw x sh, as PIL's exif_transpose:
 * 2 mirror, 3 rotate 180, 4 flip, 5 transpose, 6 rotate 90 clockwise, 7 transverse, 8 rotate
 * 90 counter-clockwise. */
static void s_source_xy(uint32_t o, uint32_t sw, uint32_t sh, uint32_t x, uint32_t y,
			uint32_t *sx, uint32_t *sy)
{
	switch (o) {
	case 2: *sx = sw - 1 - x; *sy = y; break;
	case 3: *sx = sw - 1 - x; *sy = sh - 1 - y; break;
	case 4: *sx = x; *sy = sh - 1 - y; break;
	case 5: *sx = y; *sy = x; break;
	case 6: *sx = y; *sy = sh - 1 - x; break;
	case 7: *sx = sw - 1 - y; *sy = sh - 1 - x; break;
	case 8: *sx = sw - 1 - y; *sy = x; break;
	default: *sx = x; *sy = y; break;
	}
}

static int s_orient(const struct ns_image_file *f, uint8_t *stored, struct ns_image *out)
{
	uint8_t *rgb;

	out->width = f->width;
	out->height = f->height;
	if (f->orientation == 1) {
		out->rgb = stored;
		return 0;
	}
	rgb = ns_image_rgb_alloc(f->width, f->height);
	if (!rgb) {
		free(stored);
		return -ENOMEM;
	}
	for (uint32_t y = 0; y < f->height; y++)
		for (uint32_t x = 0; x < f->width; x++) {
			uint32_t sx, sy;

			s_source_xy(f->orientation, f->stored_width, f->stored_height, x, y, &sx,
				    &sy);
			memcpy(rgb + ((size_t)y * f->width + x) * 3,
			       stored + ((size_t)sy * f->stored_width + sx) * 3, 3);
		}
	free(stored);
	out->rgb = rgb;
	return 0;
}

int ns_image_decode(const struct ns_image_file *f, struct ns_image *out, char *err,
		    size_t errlen)
{
	struct ns_image_raw raw = { 0 };
	char why[NS_ERR_LEN];
	int rc;

	memset(out, 0, sizeof(*out));
	rc = s_reader_of(f->format)(f->data, f->len, true, &raw, why, sizeof(why));
	if (rc == 0 && (raw.width != f->stored_width || raw.height != f->stored_height)) {
		free(raw.rgb);
		ns_errf(why, sizeof(why), "the decoder's size differs from the header's");
		rc = -EINVAL;
	}
	if (rc == 0 && (rc = s_orient(f, raw.rgb, out)) < 0)
		ns_errf(why, sizeof(why), "out of memory");
	if (rc < 0)
		ns_errf(err, errlen, "%s: %s", f->path, why);
	return rc;
}

void ns_image_close(struct ns_image_file **f)
{
	if (!f || !*f)
		return;
	free((*f)->data);
	free((*f)->path);
	free(*f);
	*f = NULL;
}

void ns_image_free(struct ns_image *img)
{
	if (!img)
		return;
	free(img->rgb);
	img->rgb = NULL;
}
