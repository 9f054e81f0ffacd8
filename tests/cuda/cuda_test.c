/* cuda_test.c - see cuda_test.h. */
#include "cuda_test.h"

#include <math.h>
#include <string.h>

#include "ggml_type.h"
#include "kt_util.h"

const uint32_t ct_types[14] = { NS_TYPE_F32, NS_TYPE_F16, NS_TYPE_BF16, NS_TYPE_Q4_0,
	NS_TYPE_Q4_1, NS_TYPE_Q5_0, NS_TYPE_Q5_1, NS_TYPE_Q8_0, NS_TYPE_Q2_K, NS_TYPE_Q3_K,
	NS_TYPE_Q4_K, NS_TYPE_Q5_K, NS_TYPE_Q6_K, NS_TYPE_MXFP4 };
const char *const ct_type_names[14] = { "f32", "f16", "bf16", "q4_0", "q4_1", "q5_0", "q5_1",
	"q8_0", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k", "mxfp4" };

int ct_init(const char *test)
{
	struct ns_cuda_devinfo di;
	char err[256];

	if (ns_cuda_device_count() == 0) {
		printf("%s: no CUDA device: skipping\n", test);
		exit(77);
	}
	if (ns_cuda_init(0, err, sizeof(err)) || ns_cuda_device_info(0, &di, err, sizeof(err)))
		CT_FAIL("%s", err);
	printf("%s on %s (sm_%d%d, %d SMs)\n", test, di.name, di.cc_major, di.cc_minor, di.n_sm);
	return di.n_sm;
}

void *ct_dev(size_t n)
{
	char err[256];
	void *p;

	if (ns_cuda_malloc(&p, n, err, sizeof(err)))
		CT_FAIL("%s", err);
	return p;
}

void *ct_upload(const void *src, size_t n)
{
	void *p = ct_dev(n);

	CT_CHECK(ns_cuda_h2d(p, src, n));
	return p;
}

void ct_download(void *dst, const void *dev, size_t n)
{
	CT_CHECK(ns_cuda_d2h(dst, dev, n));
}

/* half bits of a positive scale around 2^-7 .. 2^-6 */
static uint16_t s_scale16(uint64_t *s)
{
	return (uint16_t)((8u << 10) | (uint16_t)(kt_rand(s) * 2047.0));
}

static void s_put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

uint8_t *ct_random_rows(uint32_t type, uint64_t n_cols, uint64_t n_rows, uint64_t *seed,
			uint64_t *row_bytes)
{
	const struct ns_type_info *ti = ns_type_get(type);
	uint64_t rb, n;
	uint8_t *b;

	if (!ti || ns_type_row_bytes(type, n_cols, &rb))
		CT_FAIL("bad type %u / %llu columns", type, (unsigned long long)n_cols);
	n = rb * n_rows;
	b = malloc(n ? n : 1);
	if (!b)
		CT_FAIL("out of memory");
	for (uint64_t i = 0; i < n; i++)
		b[i] = (uint8_t)(kt_rand(seed) * 256.0);
	*row_bytes = rb;
	if (type == NS_TYPE_F32) {
		for (uint64_t i = 0; i < n / 4; i++) {
			float f = kt_normal(seed);
			memcpy(b + 4 * i, &f, 4);
		}
		return b;
	}
	if (type == NS_TYPE_F16 || type == NS_TYPE_BF16) {
		for (uint64_t i = 1; i < n; i += 2)
			b[i] &= 0xBF; /* top exponent bit clear: finite, |v| < 2 */
		return b;
	}
	for (uint64_t o = 0; o < n; o += ti->block_bytes) {
		uint8_t *k = b + o;

		switch (type) {
		case NS_TYPE_Q4_1: case NS_TYPE_Q5_1:
			s_put16(k + 2, (uint16_t)(s_scale16(seed) | 0x8000u)); /* negative min */
			/* fall through */
		case NS_TYPE_Q4_0: case NS_TYPE_Q5_0: case NS_TYPE_Q8_0:
			s_put16(k, s_scale16(seed));
			break;
		case NS_TYPE_Q2_K:
			s_put16(k + 80, s_scale16(seed));
			s_put16(k + 82, s_scale16(seed));
			break;
		case NS_TYPE_Q3_K:
			s_put16(k + 108, s_scale16(seed));
			break;
		case NS_TYPE_Q4_K: case NS_TYPE_Q5_K:
			s_put16(k, s_scale16(seed));
			s_put16(k + 2, s_scale16(seed));
			break;
		case NS_TYPE_Q6_K:
			s_put16(k + 208, s_scale16(seed));
			break;
		case NS_TYPE_MXFP4:
			k[0] = (uint8_t)(118 + kt_rand(seed) * 12); /* 2^-10 .. 2^1 */
			break;
		default:
			CT_FAIL("type %u", type);
		}
	}
	return b;
}

float *ct_random_floats(uint64_t n, uint64_t *seed)
{
	float *x = malloc((n ? n : 1) * sizeof(float));

	if (!x)
		CT_FAIL("out of memory");
	for (uint64_t i = 0; i < n; i++)
		x[i] = kt_normal(seed);
	return x;
}

double ct_dot(const float *w, const float *x, uint64_t n, double *abs_sum)
{
	double s = 0.0, a = 0.0;

	for (uint64_t i = 0; i < n; i++) {
		s += (double)w[i] * (double)x[i];
		a += fabs((double)w[i] * (double)x[i]);
	}
	if (abs_sum)
		*abs_sum = a;
	return s;
}
