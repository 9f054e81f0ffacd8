/* bench_cuda_gemv - quantized bytes per second of the fused CUDA GEMV, next to the device's
 * own device-to-device copy bandwidth measured in the same run.
 *
 * For each type and shape the weight matrix is replicated until the copies exceed 4x the L2
 * cache (cudaDevAttrL2CacheSize), and the timed loop rotates over them, so every GEMV reads its
 * weights from HBM. Timing: CUDA events around N back-to-back launches after a warm-up.
 *   GB/s       = weight bytes read per second (x and y are negligible)
 *   copy GB/s  = cudaMemcpy device-to-device of 1 GiB, counted as bytes read (= bytes written);
 *                the read+write total is printed too
 *   ratio      = GEMV GB/s / copy read+write GB/s (what the memory delivered in the copy;
 *                target >= 0.75 on the large shapes)
 * "host" is the launch loop's own time per call on the CPU: when it is close to us/gemv the
 * loop, not the GPU, set the pace (launch overhead; small shapes).
 * Each shape is timed for every GEMV kernel family (ns_cuda_gemv_variant, nscuda_internal.h):
 * v1 gemv.cu (ns_cuda_gemv's default), v2 gemv2.cu (all quantized types staged with cp.async),
 * v3 gemv2.cu with Q4_K/Q5_K read directly (printed for those two only), and q8:
 * ns_cuda_gemv_q8 (int8 activations, `--act q8`; its x quantization inside the kernel is
 * timed with it).
 * Also the tensor-core prefill GEMM of 512 tokens on 4096 x 4096, in TFLOP/s.
 * Usage: bench_cuda_gemv [--iters N] [--types q4_k,q8_0,...]. Exit 77 without a GPU. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ggml_type.h"
#include "nscuda.h"
#include "nscuda_internal.h"

#define DIE(...) do { fprintf(stderr, "bench_cuda_gemv: "); fprintf(stderr, __VA_ARGS__); \
	fputc('\n', stderr); exit(1); } while (0)
#define CK(call) do { int rc_ = (call); if (rc_) \
	DIE("%s = %d (%s)", #call, rc_, ns_cuda_last_error()); } while (0)

static uint64_t s_seed = 0x1234567887654321ull;

static uint32_t s_rand(void)
{
	s_seed ^= s_seed >> 12;
	s_seed ^= s_seed << 25;
	s_seed ^= s_seed >> 27;
	return (uint32_t)((s_seed * 2685821657736338717ull) >> 32);
}

/* random blocks with fp16 scales near 2^-7 (no inf/nan), f16/bf16 values finite */
static void s_fill(uint32_t type, uint8_t *b, uint64_t n, uint32_t blk)
{
	for (uint64_t i = 0; i < n; i++)
		b[i] = (uint8_t)s_rand();
	if (type == NS_TYPE_F16 || type == NS_TYPE_BF16 || type == NS_TYPE_F32) {
		for (uint64_t i = (type == NS_TYPE_F32 ? 3 : 1); i < n; i += (type == NS_TYPE_F32 ? 4 : 2))
			b[i] &= 0xBF;
		return;
	}
	for (uint64_t o = 0; o + blk <= n; o += blk) {
		uint16_t h = (uint16_t)((8u << 10) | (s_rand() & 1023));
		size_t at = type == NS_TYPE_Q6_K ? 208 : type == NS_TYPE_Q3_K ? 108 :
			    type == NS_TYPE_Q2_K ? 80 : 0;

		if (type == NS_TYPE_MXFP4) {
			b[o] = (uint8_t)(118 + s_rand() % 12);
			continue;
		}
		b[o + at] = (uint8_t)h;
		b[o + at + 1] = (uint8_t)(h >> 8);
		if (type == NS_TYPE_Q4_1 || type == NS_TYPE_Q5_1 || type == NS_TYPE_Q2_K ||
		    type == NS_TYPE_Q4_K || type == NS_TYPE_Q5_K) { /* the min beside it */
			b[o + at + 2] = (uint8_t)h;
			b[o + at + 3] = (uint8_t)(h >> 8);
		}
	}
}

/* host clock: the launch loop's own time per call next to the GPU's (a host-bound loop shows
 * both about equal) */
static uint64_t s_host_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Kernel families: 1..3 ns_cuda_gemv_variant's f32 ones, S_VAR_Q8 ns_cuda_gemv_q8 (int8
 * activations, `--act q8`: x quantized inside the kernel, dp4a). */
#define S_VAR_Q8 5

static int s_gemv(int var, uint32_t type, const void *w, uint64_t cols, uint64_t rows,
		  const float *x, float *y)
{
	if (var == S_VAR_Q8)
		return ns_cuda_gemv_q8(type, w, cols, rows, x, y, NULL);
	return ns_cuda_gemv_variant(var, type, w, cols, rows, x, y, NULL);
}

static const char *s_var_name(int var)
{
	static const char *const names[] = { "v0", "v1", "v2", "v3", "v4", "q8" };

	return var >= 0 && var <= S_VAR_Q8 ? names[var] : "v?";
}

struct shape {
	uint64_t rows, cols;
};

static double s_copy_gbs(uint64_t bytes, int iters)
{
	void *a, *b;
	ns_cuda_event_t e0, e1;
	char err[256];
	float ms;

	if (ns_cuda_malloc(&a, bytes, err, sizeof(err)) || ns_cuda_malloc(&b, bytes, err, sizeof(err)))
		DIE("%s", err);
	CK(ns_cuda_memset(a, 1, bytes));
	CK(ns_cuda_event_new(&e0));
	CK(ns_cuda_event_new(&e1));
	for (int i = 0; i < 3; i++)
		CK(ns_cuda_d2d_async(b, a, bytes, NULL));
	CK(ns_cuda_event_record(e0, NULL));
	for (int i = 0; i < iters; i++)
		CK(ns_cuda_d2d_async(i & 1 ? a : b, i & 1 ? b : a, bytes, NULL));
	CK(ns_cuda_event_record(e1, NULL));
	CK(ns_cuda_event_sync(e1));
	CK(ns_cuda_event_ms(e0, e1, &ms));
	ns_cuda_event_destroy(&e0);
	ns_cuda_event_destroy(&e1);
	ns_cuda_free(a);
	ns_cuda_free(b);
	return (double)bytes * iters / (ms * 1e-3) / 1e9;
}

int main(int argc, char **argv)
{
	const char *only = NULL;
	int iters = 200;
	struct ns_cuda_devinfo di;
	char err[256];

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--iters") && i + 1 < argc)
			iters = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--types") && i + 1 < argc)
			only = argv[++i];
		else {
			fprintf(stderr, "usage: bench_cuda_gemv [--iters N] [--types q4_k,...]\n");
			return 2;
		}
	}
	if (iters < 10)
		iters = 10;
	if (ns_cuda_device_count() == 0) {
		printf("bench_cuda_gemv: no CUDA device: skipping\n");
		return 77;
	}
	if (ns_cuda_init(0, err, sizeof(err)) || ns_cuda_device_info(0, &di, err, sizeof(err)))
		DIE("%s", err);
	printf("device: %s, sm_%d%d, %d SMs, L2 %.1f MiB, %.1f GiB (%.1f free)\n", di.name,
	       di.cc_major, di.cc_minor, di.n_sm, di.l2_bytes / 1048576.0,
	       di.total_bytes / 1073741824.0, di.free_bytes / 1073741824.0);
	const double copy = s_copy_gbs(1ull << 30, 20);
	printf("device-to-device copy of 1 GiB: %.0f GB/s read, %.0f GB/s read+write\n", copy,
	       2 * copy);
	printf("/copy = GEMV weight bytes per second over the copy's read+write rate "
	       "(the memory's delivered rate; target >= 0.75 on the large shapes)\n\n");

	const struct { uint32_t type; const char *name; bool small; } types[] = {
		{ NS_TYPE_Q4_K, "q4_k", false }, { NS_TYPE_Q5_K, "q5_k", false },
		{ NS_TYPE_Q6_K, "q6_k", false }, { NS_TYPE_Q8_0, "q8_0", true },
		{ NS_TYPE_Q4_0, "q4_0", true }, { NS_TYPE_MXFP4, "mxfp4", true },
	};
	const struct shape shapes[] = { { 4096, 4096 }, { 14336, 4096 }, { 2880, 2880 } };
	float *dx, *dy;
	if (ns_cuda_malloc((void **)&dx, 14336 * 4 * 512, err, sizeof(err)) ||
	    ns_cuda_malloc((void **)&dy, 14336 * 4 * 512, err, sizeof(err)))
		DIE("%s", err);
	{ /* random activations: never time on zeros */
		float *hx = malloc(14336 * 4 * 512);
		if (!hx)
			DIE("out of memory");
		for (int i = 0; i < 14336 * 512; i++)
			hx[i] = (float)((int)(s_rand() % 2001) - 1000) * 1e-3f;
		CK(ns_cuda_h2d(dx, hx, 14336 * 4 * 512));
		free(hx);
	}

	printf("%-9s %14s %9s %7s %9s %7s\n", "type", "rows x cols", "MiB", "copies", "GB/s",
	       "/copy");
	for (size_t ti = 0; ti < sizeof(types) / sizeof(types[0]); ti++) {
		const struct ns_type_info *tinfo = ns_type_get(types[ti].type);

		if (only && !strstr(only, types[ti].name))
			continue;
		for (size_t si = 0; si < 3; si++) {
			const struct shape sh = shapes[si];
			uint64_t rb, bytes;

			if (si == 2 && !types[ti].small)
				continue;
			if (ns_type_row_bytes(types[ti].type, sh.cols, &rb))
				DIE("row bytes");
			bytes = rb * sh.rows;
			int n_copies = (int)((4 * di.l2_bytes + bytes - 1) / bytes) + 1;
			if (n_copies < 2)
				n_copies = 2;
			uint8_t *host = malloc(bytes), **dw = calloc(n_copies, sizeof(*dw));
			if (!host || !dw)
				DIE("out of memory");
			s_fill(types[ti].type, host, bytes, tinfo->block_bytes);
			for (int c = 0; c < n_copies; c++) {
				if (ns_cuda_malloc((void **)&dw[c], bytes, err, sizeof(err)))
					DIE("%s", err);
				CK(ns_cuda_h2d(dw[c], host, bytes));
			}
			ns_cuda_event_t e0, e1;
			float ms;
			CK(ns_cuda_event_new(&e0));
			CK(ns_cuda_event_new(&e1));
			for (int var = 1; var <= S_VAR_Q8; var++) {
				const uint32_t ty = types[ti].type;

				if (var == 3 && ty != NS_TYPE_Q4_K && ty != NS_TYPE_Q5_K)
					continue; /* v3 = v2 for the other types */
				if (var == 4)
					continue; /* the per-type pick of v1..v3 */
				for (int i = 0; i < n_copies; i++)
					CK(s_gemv(var, ty, dw[i], sh.cols, sh.rows, dx, dy));
				CK(ns_cuda_event_record(e0, NULL));
				const uint64_t h0 = s_host_ns();
				for (int i = 0; i < iters; i++)
					CK(s_gemv(var, ty, dw[i % n_copies], sh.cols, sh.rows, dx, dy));
				const uint64_t h1 = s_host_ns();
				CK(ns_cuda_event_record(e1, NULL));
				CK(ns_cuda_event_sync(e1));
				CK(ns_cuda_event_ms(e0, e1, &ms));
				const double gbs = (double)bytes * iters / (ms * 1e-3) / 1e9;
				printf("%-6s %s %6llu x %5llu %9.1f %7d %9.0f %7.2f   %.1f us/gemv "
				       "(host %.1f us/call)\n", types[ti].name, s_var_name(var),
				       (unsigned long long)sh.rows, (unsigned long long)sh.cols,
				       bytes / 1048576.0, n_copies, gbs, gbs / (2 * copy),
				       ms * 1e3 / iters, (h1 - h0) / 1e3 / iters);
			}
			if (si == 0) { /* prefill: 512 tokens through the tensor-core GEMM */
				const int nt = 512, gi = iters / 20 + 2;
				CK(ns_cuda_gemm_prefill(types[ti].type, dw[0], sh.cols, sh.rows, dx,
							sh.cols, nt, dy, sh.rows, NULL));
				CK(ns_cuda_event_record(e0, NULL));
				for (int i = 0; i < gi; i++)
					CK(ns_cuda_gemm_prefill(types[ti].type, dw[i % n_copies], sh.cols,
								sh.rows, dx, sh.cols, nt, dy, sh.rows,
								NULL));
				CK(ns_cuda_event_record(e1, NULL));
				CK(ns_cuda_event_sync(e1));
				CK(ns_cuda_event_ms(e0, e1, &ms));
				printf("%-9s %6llu x %5llu   prefill GEMM, %d tokens: %.1f TFLOP/s "
				       "(%.2f ms)\n", types[ti].name, (unsigned long long)sh.rows,
				       (unsigned long long)sh.cols, nt,
				       2.0 * sh.rows * sh.cols * nt * gi / (ms * 1e-3) / 1e12, ms / gi);
			}
			ns_cuda_event_destroy(&e0);
			ns_cuda_event_destroy(&e1);
			for (int c = 0; c < n_copies; c++)
				ns_cuda_free(dw[c]);
			free(dw);
			free(host);
		}
	}
	CK(ns_cuda_sync());
	ns_cuda_free(dx);
	ns_cuda_free(dy);
	return 0;
}
