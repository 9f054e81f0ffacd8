/* test_quant_host: the device decoders of nscompute/cuda/quant.cuh compiled for the CPU through
 * quant_host_shim.h (no GPU needed; runs in CI and under the sanitizers).
 *   deq_unit  == ns_dequant_rows, bit for bit, for every type, on random rows;
 *   dot_unit  (the GEMV's per-unit dot, including the half-trick conversions and MXFP4's
 *              nibble-to-half bits) within 2^-20 * sum|w x| of the exact dot of those weights;
 *   bytes_f   exact for every byte and bias. */
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "quant_host_shim.h"

#include "quant.cuh"

extern "C" {
#include "dequant.h"
#include "ggml_type.h"
}

#define FAIL(...) do { std::fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
	std::fprintf(stderr, __VA_ARGS__); std::fputc('\n', stderr); std::exit(1); } while (0)

static uint64_t s_rng = 0x2545F4914F6CDD1Dull;

static uint32_t s_next(void)
{
	s_rng ^= s_rng >> 12;
	s_rng ^= s_rng << 25;
	s_rng ^= s_rng >> 27;
	return (uint32_t)((s_rng * 2685821657736338717ull) >> 32);
}

/* random blocks with finite fp16 scales near 2^-7, finite f16/bf16/f32 values */
static void s_fill(uint32_t type, uint8_t *b, uint64_t n, uint32_t blk)
{
	for (uint64_t i = 0; i < n; i++)
		b[i] = (uint8_t)s_next();
	if (type == NS_TYPE_F32) {
		for (uint64_t i = 3; i < n; i += 4)
			b[i] &= 0xBF;
		return;
	}
	if (type == NS_TYPE_F16 || type == NS_TYPE_BF16) {
		for (uint64_t i = 1; i < n; i += 2)
			b[i] &= 0xBF;
		return;
	}
	for (uint64_t o = 0; o + blk <= n; o += blk) {
		size_t at = type == NS_TYPE_Q6_K ? 208 : type == NS_TYPE_Q3_K ? 108 :
			    type == NS_TYPE_Q2_K ? 80 : 0;
		if (type == NS_TYPE_MXFP4) {
			b[o] = (uint8_t)(100 + s_next() % 40);
			continue;
		}
		for (int k = 0; k < 2; k++) { /* the scale and the min beside it (if any) */
			uint16_t h = (uint16_t)((8u << 10) | (s_next() & 1023) | (k ? 0x8000u : 0));
			if (k && !(type == NS_TYPE_Q4_1 || type == NS_TYPE_Q5_1 || type == NS_TYPE_Q2_K ||
				   type == NS_TYPE_Q4_K || type == NS_TYPE_Q5_K))
				break;
			b[o + at + 2 * k] = (uint8_t)h;
			b[o + at + 2 * k + 1] = (uint8_t)(h >> 8);
		}
	}
}

template <int T>
static void s_check(const char *name, uint64_t n_cols, uint64_t n_rows)
{
	using G = nsq::geo<T>;
	const uint64_t rb = n_cols / G::QK * G::BYTES, nu = n_cols / 32;
	std::vector<uint8_t> w(rb * n_rows + 16);
	std::vector<float> ref(n_cols * n_rows), x(n_cols);
	uint8_t *wp = w.data();
	double worst = 0;

	s_fill(T, wp, rb * n_rows, G::BYTES);
	if (ns_dequant_rows(T, wp, n_cols, n_rows, ref.data()))
		FAIL("%s: cpu dequant", name);
	for (auto &v : x)
		v = (float)((int)(s_next() % 20001) - 10000) * 1e-4f;
	for (uint64_t r = 0; r < n_rows; r++) {
		const uint8_t *row = wp + r * rb;

		for (uint32_t u = 0; u < nu; u++) {
			float v[32], xv[32];
			double exact = 0, mag = 0;

			nsq::deq_unit<T>(row, u, v);
			if (std::memcmp(v, &ref[r * n_cols + 32 * u], sizeof(v))) {
				for (int i = 0; i < 32; i++)
					if (std::memcmp(&v[i], &ref[r * n_cols + 32 * u + i], 4))
						FAIL("%s: row %llu element %llu: %.9g vs cpu %.9g", name,
						     (unsigned long long)r, (unsigned long long)(32 * u + i),
						     v[i], ref[r * n_cols + 32 * u + i]);
			}
			std::memcpy(xv, &x[32 * u], sizeof(xv));
			for (int i = 0; i < 32; i++) {
				exact += (double)v[i] * xv[i];
				mag += std::fabs((double)v[i] * xv[i]);
			}
			const float got = nsq::dot_unit<T>(row, u, xv);
			if (!(std::fabs(got - exact) <= 0x1p-20 * mag + 1e-30))
				FAIL("%s: row %llu unit %u: dot %.9g vs exact %.9g (sum|wx| %.3g)", name,
				     (unsigned long long)r, u, got, exact, mag);
			if (mag > 0)
				worst = std::fmax(worst, std::fabs(got - exact) / mag);
		}
	}
	std::printf("%-6s deq_unit bit-exact, dot_unit worst |err|/sum|wx| %.2e\n", name, worst);
}

template <int BIAS>
static void s_bytes(void)
{
	for (uint32_t b = 0; b < 256; b++) {
		const uint32_t word = b | ((255 - b) << 8) | (((b * 7) & 255) << 16) | (((b * 13) & 255) << 24);
		float f[4];
		nsq::bytes_f<BIAS>(word, f[0], f[1], f[2], f[3]);
		for (int k = 0; k < 4; k++)
			if (f[k] != (float)((int)((word >> (8 * k)) & 255) - BIAS))
				FAIL("bytes_f<%d>: byte %u lane %d gives %g", BIAS, b, k, f[k]);
	}
}

int main(void)
{
	s_bytes<0>();
	s_bytes<8>();
	s_bytes<32>();
	s_bytes<128>();
	s_check<nsq::F32>("f32", 512, 3);
	s_check<nsq::F16>("f16", 512, 3);
	s_check<nsq::BF16>("bf16", 512, 3);
	s_check<nsq::Q4_0>("q4_0", 1024, 5);
	s_check<nsq::Q4_1>("q4_1", 1024, 5);
	s_check<nsq::Q5_0>("q5_0", 1024, 5);
	s_check<nsq::Q5_1>("q5_1", 1024, 5);
	s_check<nsq::Q8_0>("q8_0", 1024, 5);
	s_check<nsq::Q2_K>("q2_k", 1024, 5);
	s_check<nsq::Q3_K>("q3_k", 1024, 5);
	s_check<nsq::Q4_K>("q4_k", 1024, 5);
	s_check<nsq::Q5_K>("q5_k", 1024, 5);
	s_check<nsq::Q6_K>("q6_k", 1024, 5);
	s_check<nsq::MXFP4>("mxfp4", 1024, 5);
	std::printf("bytes_f exact for biases 0, 8, 32, 128\n");
	return 0;
}
