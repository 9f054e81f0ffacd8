/* cuda_test.h - helpers of the GPU tests: skip without a device, device buffers, random
 * quantized matrices with sane scales, exact reference dots. */
#ifndef NS_CUDA_TEST_H
#define NS_CUDA_TEST_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "nscuda.h"

#define CT_FAIL(...) do { fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
	fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); exit(1); } while (0)
#define CT_CHECK(call) do { int rc_ = (call); if (rc_) \
	CT_FAIL("%s = %d (%s)", #call, rc_, ns_cuda_last_error()); } while (0)

/* Exit 77 without a device, else initialise device 0, print its name and return its number
 * of SMs. */
int ct_init(const char *test);

/* Device copy of n bytes of host memory (allocation failure fails the test). */
void *ct_upload(const void *src, size_t n);
void *ct_dev(size_t n);
void ct_download(void *dst, const void *dev, size_t n);

/* Random row window of type: n_rows rows of n_cols, scales kept in a sane range.
 * Returns malloc'd bytes; *row_bytes set. */
uint8_t *ct_random_rows(uint32_t type, uint64_t n_cols, uint64_t n_rows, uint64_t *seed,
			uint64_t *row_bytes);
float *ct_random_floats(uint64_t n, uint64_t *seed);
/* sum_k w[k] x[k] in double and sum |w x| */
double ct_dot(const float *w, const float *x, uint64_t n, double *abs_sum);

extern const uint32_t ct_types[14];
extern const char *const ct_type_names[14];

#endif
