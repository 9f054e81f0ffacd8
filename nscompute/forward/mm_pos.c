/* mm_pos.c - M-RoPE positions of a multimodal prompt (forward.h, ns_fwd_mm_positions). */
#include <errno.h>

#include "forward.h"
#include "ns_util.h"

int ns_fwd_mm_positions(const int32_t *tokens, uint32_t n, int32_t image_id,
			const struct ns_fwd_mm_grid *grids, uint32_t n_images, int32_t pos0,
			int32_t *pos, uint8_t *is_embd, int32_t *next, char *err, size_t errlen)
{
	int64_t p = pos0; /* the next text position */
	uint32_t img = 0;

	for (uint32_t i = 0; i < n;) {
		uint32_t run = 0;
		uint64_t want, top = 0;

		if (tokens[i] != image_id) { /* text: (p, p, p) */
			if (p >= INT32_MAX)
				goto too_far;
			pos[3ull * i + 0] = pos[3ull * i + 1] = pos[3ull * i + 2] = (int32_t)p++;
			is_embd[i++] = 0;
			continue;
		}
		while (i + run < n && tokens[i + run] == image_id)
			run++;
		if (img == n_images) {
			ns_errf(err, errlen, "the prompt has more runs of the image token %d than the "
				"%u image(s) given", image_id, n_images);
			return -EINVAL;
		}
		want = (uint64_t)grids[img].t * grids[img].h * grids[img].w;
		if (run != want) {
			ns_errf(err, errlen, "image %u is %llu tokens (%u x %u x %u), but its run of "
				"the image token %d in the prompt is %u long", img + 1,
				(unsigned long long)want, grids[img].t, grids[img].h, grids[img].w,
				image_id, run);
			return -EINVAL;
		}
		/* (p + t, p + y, p + x) row-major over the merged grid; text resumes past the
		 * largest */
		for (uint32_t k = 0; k < run; k++, i++) {
			const uint32_t hw = grids[img].h * grids[img].w;
			const uint64_t c[3] = { k / hw, k % hw / grids[img].w, k % grids[img].w };

			for (unsigned a = 0; a < 3; a++) {
				if (p + (int64_t)c[a] >= INT32_MAX)
					goto too_far;
				pos[3ull * i + a] = (int32_t)(p + (int64_t)c[a]);
				top = c[a] > top ? c[a] : top;
			}
			is_embd[i] = 1;
		}
		p += (int64_t)top + 1;
		img++;
	}
	if (img != n_images) {
		ns_errf(err, errlen, "%u image(s) given, but the prompt has %u run(s) of the image "
			"token %d", n_images, img, image_id);
		return -EINVAL;
	}
	*next = (int32_t)p;
	return 0;
too_far:
	ns_errf(err, errlen, "M-RoPE positions past 2^31");
	return -EINVAL;
}
