/* image_tool - our image reader for test_image_pil.py.
 *
 *   image_tool decode FILE OUT           decode (EXIF orientation applied) to raw RGB in OUT
 *   image_tool resize FILE W H OUT       the same, then resized (ns_image_resize) to W x H
 *
 * Prints "W H" of what it wrote; a refused image prints its line on stderr and exits 2. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "image_prep.h"
#include "ns_util.h"

int main(int argc, char **argv)
{
	struct ns_image_file *f;
	struct ns_image img, out;
	char err[NS_ERR_LEN];
	uint64_t w = 0, h = 0;
	const char *dst;
	FILE *o;
	size_t n;

	if (argc == 4 && !strcmp(argv[1], "decode")) {
		dst = argv[3];
	} else if (argc == 6 && !strcmp(argv[1], "resize") &&
		   !ns_parse_count(argv[3], 1, 1u << 16, &w) &&
		   !ns_parse_count(argv[4], 1, 1u << 16, &h)) {
		dst = argv[5];
	} else {
		fprintf(stderr, "usage: image_tool decode FILE OUT | resize FILE W H OUT\n");
		return 2;
	}
	if (ns_image_open(argv[2], &f, err, sizeof(err)) < 0 ||
	    ns_image_decode(f, &img, err, sizeof(err)) < 0) {
		fprintf(stderr, "%s\n", err);
		return 2;
	}
	if (w) {
		if (ns_image_resize(&img, (uint32_t)w, (uint32_t)h, &out) < 0) {
			fprintf(stderr, "resize failed\n");
			return 1;
		}
		ns_image_free(&img);
		img = out;
	}
	n = (size_t)img.width * img.height * 3;
	o = fopen(dst, "wb");
	if (!o || fwrite(img.rgb, 1, n, o) != n || fclose(o) != 0) {
		fprintf(stderr, "cannot write %s\n", dst);
		return 1;
	}
	printf("%u %u\n", img.width, img.height);
	ns_image_free(&img);
	ns_image_close(&f);
	return 0;
}
