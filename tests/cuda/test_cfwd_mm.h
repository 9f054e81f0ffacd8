/* test_cfwd_mm.h - test_cfwd's section 9, image prompts (test_cfwd_mm.c). */
#ifndef NS_TEST_CFWD_MM_H
#define NS_TEST_CFWD_MM_H

#include <stdbool.h>
#include <stdint.h>

#include "cfwd.h"

/* Image calls through the CUDA pass (options o) against the CPU pass (fo) on the model's
 * weights w (V logits per row; toks: the n-token prompt of the other sections); with mmproj
 * and dir (oracle-relative) the oracle's image prompt against Transformers too. kernels_only:
 * the simt build (no bit-identities, no streamed pass). Returns the number of failures. */
int cfwd_test_images(const struct ns_model *m, struct ns_weights *w,
		     const struct ns_cfwd_opts *o, const struct ns_fwd_opts *fo,
		     uint64_t V, const int32_t *toks, uint32_t n, bool kernels_only,
		     const char *mmproj, const char *dir);

#endif
