/* bench_gemv - fused dequant-GEMV throughput against memory bandwidth measured in the same run.
 *
 * usage: bench_gemv [--types T1,T2,..] [--threads 1,2] [--mib N] [--reps N] [--act f32|q8|both]
 *                   [--path auto|scalar|avx2|avx512] [--no-gemm] [--gemm-only] [--peak]
 *
 * For every type, --mib MiB (default 256, several times the L3) of random weights with sane
 * scales are split into 32 MiB matrices of 4096 columns, and ns_gemv runs over them in turn so
 * that every byte comes from DRAM. Reported per type, activation mode and thread count: the
 * median over --reps passes of quantized-weight GB/s, next to the read bandwidth of the same
 * buffer with the same number of threads (AVX2 loads summed, STREAM-like), and their ratio.
 * The batched kernel (ns_gemm) is then timed on one 2048 x 4096 matrix for 1, 8, 64 and 512
 * tokens and reported as effective GFLOP/s (2 * rows * cols * tokens / time), beside the int8
 * GEMM (gemm_i8.h, path auto, int8 GOP/s) and the machine's int8 peak measured in the same run
 * (vpdpbusd with 16 independent accumulators on every thread: 2 * 64 ops per instruction);
 * --gemm-only skips the GEMV sweep, --peak prints only the peak line ("int8 peak: N GOP/s").
 * Numbers are noisy when other work shares the cores: rerun when the machine is quiet. */
#include <errno.h>
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gemm_i8.h"
#include "gemv.h"
#include "ggml_type.h"
#include "ns_util.h"
#include "threadpool.h"

#define S_MAT_BYTES (32ull << 20)
#define S_COLS 4096ull
#define S_MAX_REPS 31

struct s_ty {
	const char *name;
	uint32_t type;
	int half[2]; /* fp16 scale offsets in a block, -1 none */
	int e8m0;
};

static const struct s_ty s_tys[] = {
	{ "q4_0", NS_TYPE_Q4_0, { 0, -1 }, -1 },  { "q4_1", NS_TYPE_Q4_1, { 0, 2 }, -1 },
	{ "q5_0", NS_TYPE_Q5_0, { 0, -1 }, -1 },  { "q5_1", NS_TYPE_Q5_1, { 0, 2 }, -1 },
	{ "q8_0", NS_TYPE_Q8_0, { 0, -1 }, -1 },  { "q2_k", NS_TYPE_Q2_K, { 80, 82 }, -1 },
	{ "q3_k", NS_TYPE_Q3_K, { 108, -1 }, -1 }, { "q4_k", NS_TYPE_Q4_K, { 0, 2 }, -1 },
	{ "q5_k", NS_TYPE_Q5_K, { 0, 2 }, -1 },   { "q6_k", NS_TYPE_Q6_K, { 208, -1 }, -1 },
	{ "mxfp4", NS_TYPE_MXFP4, { -1, -1 }, 0 }, { "f16", NS_TYPE_F16, { -1, -1 }, -1 },
	{ "bf16", NS_TYPE_BF16, { -1, -1 }, -1 },  { "f32", NS_TYPE_F32, { -1, -1 }, -1 },
};

static uint64_t s_rng = 0x2545F4914F6CDD1Dull;

static uint64_t s_next(void)
{
	s_rng ^= s_rng >> 12;
	s_rng ^= s_rng << 25;
	s_rng ^= s_rng >> 27;
	return s_rng * 2685821657736338717ull;
}

static uint64_t s_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int s_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double s_median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), s_cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* ---- memory bandwidth: each task sums 4 MiB of the buffer ---- */
struct s_read {
	const uint8_t *buf;
	uint64_t len;
	double sink[64];
};

__attribute__((target("avx2"))) static double s_sum_avx2(const uint8_t *p, uint64_t n)
{
	__m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;

	for (uint64_t i = 0; i + 128 <= n; i += 128) {
		a0 = _mm256_add_epi64(a0, _mm256_load_si256((const __m256i *)(p + i)));
		a1 = _mm256_add_epi64(a1, _mm256_load_si256((const __m256i *)(p + i + 32)));
		a2 = _mm256_add_epi64(a2, _mm256_load_si256((const __m256i *)(p + i + 64)));
		a3 = _mm256_add_epi64(a3, _mm256_load_si256((const __m256i *)(p + i + 96)));
	}
	a0 = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3));
	return (double)_mm256_extract_epi64(a0, 0);
}

__attribute__((target("avx512f"))) static double s_sum_avx512(const uint8_t *p, uint64_t n)
{
	__m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;

	for (uint64_t i = 0; i + 256 <= n; i += 256) {
		a0 = _mm512_add_epi64(a0, _mm512_load_si512(p + i));
		a1 = _mm512_add_epi64(a1, _mm512_load_si512(p + i + 64));
		a2 = _mm512_add_epi64(a2, _mm512_load_si512(p + i + 128));
		a3 = _mm512_add_epi64(a3, _mm512_load_si512(p + i + 192));
	}
	a0 = _mm512_add_epi64(_mm512_add_epi64(a0, a1), _mm512_add_epi64(a2, a3));
	uint64_t l[8], sum = 0; /* unsigned: the sum only keeps the loads alive */

	_mm512_storeu_si512(l, a0);
	for (int i = 0; i < 8; i++)
		sum += l[i];
	return (double)sum;
}

static double s_sum_scalar(const uint8_t *p, uint64_t n)
{
	uint64_t a = 0, v;

	for (uint64_t i = 0; i + 8 <= n; i += 8) {
		memcpy(&v, p + i, 8);
		a += v;
	}
	return (double)a;
}

static void s_read_task(void *ctx, uint64_t t)
{
	struct s_read *r = ctx;
	uint64_t off = t * (4ull << 20);
	uint64_t n = r->len - off < (4ull << 20) ? r->len - off : (4ull << 20);

	if (__builtin_cpu_supports("avx512f"))
		r->sink[t % 64] += s_sum_avx512(r->buf + off, n);
	else if (__builtin_cpu_supports("avx2"))
		r->sink[t % 64] += s_sum_avx2(r->buf + off, n);
	else
		r->sink[t % 64] += s_sum_scalar(r->buf + off, n);
}

static double s_read_gbs(struct ns_pool *p, const uint8_t *buf, uint64_t len, int reps)
{
	struct s_read r = { .buf = buf, .len = len };
	double v[S_MAX_REPS];

	for (int i = 0; i < reps; i++) {
		uint64_t t0 = ns_now_ns();

		ns_pool_run(p, s_read_task, &r, (len + (4ull << 20) - 1) / (4ull << 20));
		v[i] = (double)len / (double)(ns_now_ns() - t0);
	}
	return s_median(v, reps);
}

static double s_memcpy_gbs(uint8_t *dst, const uint8_t *src, uint64_t len, int reps)
{
	double v[S_MAX_REPS];

	for (int i = 0; i < reps; i++) {
		uint64_t t0 = ns_now_ns();

		memcpy(dst, src, len);
		v[i] = (double)len / (double)(ns_now_ns() - t0);
	}
	return s_median(v, reps);
}

/* Random bytes for the whole buffer, then finite scales in every block of type ty. */
static void s_fill(uint8_t *buf, uint64_t len, const struct s_ty *ty, const struct ns_type_info *ti)
{
	for (uint64_t i = 0; i + 8 <= len; i += 8) {
		uint64_t v = s_next();

		memcpy(buf + i, &v, 8);
	}
	if (ty->type == NS_TYPE_F32 || ty->type == NS_TYPE_BF16 || ty->type == NS_TYPE_F16) {
		/* keep floats finite: clear the top exponent bit of every element */
		uint32_t es = ty->type == NS_TYPE_F32 ? 4 : 2;

		for (uint64_t i = es - 1; i < len; i += es)
			buf[i] &= 0xBF;
		return;
	}
	for (uint64_t b = 0; b + ti->block_bytes <= len; b += ti->block_bytes) {
		for (int h = 0; h < 2; h++)
			if (ty->half[h] >= 0)
				buf[b + (uint64_t)ty->half[h] + 1] &= 0xBB; /* exponent <= 14 */
		if (ty->e8m0 >= 0)
			buf[b + (uint64_t)ty->e8m0] = (uint8_t)(120 + buf[b + (uint64_t)ty->e8m0] % 12);
	}
}

/* The int8 multiply-add peak of one thread: 16 independent vpdpbusd chains (enough to cover
 * the latency on every x86 core with VNNI) over registers only. Returns int8 ops (2 per
 * multiply-add) done. */
__attribute__((target("avx512f,avx512vnni"), noinline)) static uint64_t s_vnni_loop(uint64_t iters)
{
	const __m512i x = _mm512_set1_epi8(3), w = _mm512_set1_epi8(-2);
	__m512i a0 = _mm512_set1_epi32(0), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0,
		a7 = a0, a8 = a0, a9 = a0, a10 = a0, a11 = a0, a12 = a0, a13 = a0, a14 = a0, a15 = a0;

	for (uint64_t it = 0; it < iters; it++) {
#define S_DP(a) a = _mm512_dpbusd_epi32(a, x, w)
		S_DP(a0); S_DP(a1); S_DP(a2); S_DP(a3); S_DP(a4); S_DP(a5); S_DP(a6); S_DP(a7);
		S_DP(a8); S_DP(a9); S_DP(a10); S_DP(a11); S_DP(a12); S_DP(a13); S_DP(a14); S_DP(a15);
#undef S_DP
		__asm__ volatile("" : "+v"(a0), "+v"(a1), "+v"(a2), "+v"(a3), "+v"(a4), "+v"(a5),
				 "+v"(a6), "+v"(a7));
		__asm__ volatile("" : "+v"(a8), "+v"(a9), "+v"(a10), "+v"(a11), "+v"(a12),
				 "+v"(a13), "+v"(a14), "+v"(a15));
	}
	a0 = _mm512_add_epi32(_mm512_add_epi32(_mm512_add_epi32(a0, a1), _mm512_add_epi32(a2, a3)),
			      _mm512_add_epi32(_mm512_add_epi32(a4, a5), _mm512_add_epi32(a6, a7)));
	a8 = _mm512_add_epi32(_mm512_add_epi32(_mm512_add_epi32(a8, a9), _mm512_add_epi32(a10, a11)),
			      _mm512_add_epi32(_mm512_add_epi32(a12, a13), _mm512_add_epi32(a14, a15)));
	volatile int sink = _mm512_reduce_add_epi32(_mm512_add_epi32(a0, a8));
	(void)sink;
	return iters * 16 * 64 * 2;
}

static void s_peak_task(void *ctx, uint64_t t)
{
	(void)t;
	s_vnni_loop(*(const uint64_t *)ctx);
}

/* int8 GOP/s of the pool's threads together, median of 5 (0 without AVX-512 VNNI). */
static double s_int8_peak(struct ns_pool *p)
{
	uint64_t iters = 2000000;
	double v[5];
	int n = ns_pool_threads(p);

	if (!ns_kpath_supported(NS_KPATH_AVX512))
		return 0;
	for (int r = 0; r < 5; r++) {
		uint64_t t0 = ns_now_ns();

		ns_pool_run(p, s_peak_task, &iters, (uint64_t)n);
		v[r] = (double)iters * 16 * 64 * 2 * n / (double)(ns_now_ns() - t0);
	}
	return s_median(v, 5);
}

struct s_opts {
	bool types[NS_ARRAY_LEN(s_tys)];
	int threads[4], n_threads;
	uint64_t mib;
	int reps;
	bool act[2];
	enum ns_kpath path;
	bool gemm;
	bool gemv;
	bool peak_only;
};

static int s_parse(int argc, char **argv, struct s_opts *o)
{
	memset(o, 0, sizeof(*o));
	for (size_t i = 0; i < NS_ARRAY_LEN(s_tys); i++)
		o->types[i] = true;
	o->threads[0] = 1;
	o->threads[1] = 2;
	o->n_threads = 2;
	o->mib = 256;
	o->reps = 5;
	o->act[0] = o->act[1] = true;
	o->gemm = o->gemv = true;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--no-gemm") || !strcmp(a, "--gemm-only") || !strcmp(a, "--peak")) {
			o->gemm = strcmp(a, "--no-gemm") != 0;
			o->gemv = !strcmp(a, "--no-gemm");
			o->peak_only = !strcmp(a, "--peak");
			continue;
		}
		if (!v) {
			fprintf(stderr, "bench_gemv: %s needs a value\n", a);
			return -EINVAL;
		}
		i++;
		if (!strcmp(a, "--types")) {
			memset(o->types, 0, sizeof(o->types));
			char *dup = strdup(v), *save = NULL;

			for (char *t = strtok_r(dup, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
				size_t k = 0;

				while (k < NS_ARRAY_LEN(s_tys) && strcmp(s_tys[k].name, t))
					k++;
				if (k == NS_ARRAY_LEN(s_tys)) {
					fprintf(stderr, "bench_gemv: unknown type %s\n", t);
					free(dup);
					return -EINVAL;
				}
				o->types[k] = true;
			}
			free(dup);
		} else if (!strcmp(a, "--threads")) {
			o->n_threads = sscanf(v, "%d,%d,%d,%d", &o->threads[0], &o->threads[1],
					      &o->threads[2], &o->threads[3]);
			if (o->n_threads < 1)
				return -EINVAL;
		} else if (!strcmp(a, "--mib")) {
			o->mib = strtoull(v, NULL, 10);
			if (o->mib < 32)
				return -EINVAL;
		} else if (!strcmp(a, "--reps")) {
			o->reps = atoi(v);
			if (o->reps < 1 || o->reps > S_MAX_REPS)
				return -EINVAL;
		} else if (!strcmp(a, "--act")) {
			o->act[0] = !strcmp(v, "f32") || !strcmp(v, "both");
			o->act[1] = !strcmp(v, "q8") || !strcmp(v, "both");
		} else if (!strcmp(a, "--path")) {
			o->path = !strcmp(v, "scalar") ? NS_KPATH_SCALAR : !strcmp(v, "avx2") ? NS_KPATH_AVX2 :
				  !strcmp(v, "avx512") ? NS_KPATH_AVX512 : NS_KPATH_AUTO;
		} else {
			fprintf(stderr, "bench_gemv: unknown option %s\n", a);
			return -EINVAL;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct s_opts o;
	uint64_t len;
	uint8_t *buf, *dst;
	float *x, *y;
	struct ns_pool *pools[4];
	double rd[4], peak;

	if (s_parse(argc, argv, &o))
		return 2;
	if (!ns_kpath_supported(o.path)) {
		fprintf(stderr, "bench_gemv: path %s not supported here\n", ns_kpath_name(o.path));
		return 2;
	}
	len = o.mib << 20;
	buf = aligned_alloc(64, len);
	dst = aligned_alloc(64, len);
	x = malloc(S_COLS * 512 * sizeof(float));
	y = malloc(2048 * 512 * sizeof(float)); /* >= rows of any 32 MiB matrix (Q2_K: 24966) */
	if (!buf || !dst || !x || !y) {
		fprintf(stderr, "bench_gemv: out of memory\n");
		return 1;
	}
	for (uint64_t i = 0; i < S_COLS * 512; i++)
		x[i] = (float)((int64_t)(s_next() >> 40) - (1 << 23)) / (float)(1 << 23);
	memset(buf, 1, len);
	memset(dst, 2, len);
	for (int t = 0; t < o.n_threads; t++) {
		pools[t] = ns_pool_new(o.threads[t]);
		if (!pools[t]) {
			fprintf(stderr, "bench_gemv: cannot start %d threads\n", o.threads[t]);
			return 1;
		}
	}
	if (o.peak_only) {
		printf("int8 peak: %.1f GOP/s (%d threads)\n", s_int8_peak(pools[o.n_threads - 1]),
		       o.threads[o.n_threads - 1]);
		goto out;
	}
	if (!o.gemv)
		goto gemm;
	printf("path %s, %llu MiB per type in %llu MiB matrices of %llu columns, median of %d\n",
	       ns_kpath_name(o.path == NS_KPATH_AUTO ? ns_kpath_best() : o.path),
	       (unsigned long long)o.mib, (unsigned long long)(S_MAT_BYTES >> 20),
	       (unsigned long long)S_COLS, o.reps);
	printf("memcpy (1 thread): %.2f GB/s copied\n", s_memcpy_gbs(dst, buf, len, o.reps));
	for (int t = 0; t < o.n_threads; t++) {
		rd[t] = s_read_gbs(pools[t], buf, len, o.reps);
		printf("read bandwidth at start, %d thread%s: %.2f GB/s\n", o.threads[t], o.threads[t] > 1 ? "s" : "", rd[t]);
	}
	printf("\n(read GB/s: the read sweep of the same bytes, alternated with the gemv passes;\n"
	       " cpu: CPU time the process got during gemv / (wall time x threads), low = shared cores)\n");
	printf("%-6s %-4s %4s %10s %10s %7s %6s\n", "type", "act", "thr", "gemv GB/s", "read GB/s",
	       "ratio", "cpu");
	for (size_t ti = 0; ti < NS_ARRAY_LEN(s_tys); ti++) {
		const struct ns_type_info *inf = ns_type_get(s_tys[ti].type);
		uint64_t rb, rows, n_mat;

		if (!o.types[ti])
			continue;
		ns_type_row_bytes(s_tys[ti].type, S_COLS, &rb);
		rows = S_MAT_BYTES / rb;
		n_mat = len / (rows * rb);
		s_fill(buf, len, &s_tys[ti], inf);
		for (int act = 0; act < 2; act++) {
			struct ns_kopts ko = { o.path, (enum ns_act)act, false };

			if (!o.act[act] || (act == 1 && inf->block_elems == 1))
				continue;
			for (int t = 0; t < o.n_threads; t++) {
				double v[S_MAX_REPS], rv[S_MAX_REPS], cpu[S_MAX_REPS];
				struct s_read rr = { .buf = buf, .len = n_mat * rows * rb };
				uint64_t n_read_tasks = (rr.len + (4ull << 20) - 1) / (4ull << 20);

				/* one untimed pass to warm the pool and page tables */
				for (uint64_t mi = 0; mi < n_mat; mi++)
					ns_gemv_ex(pools[t], &ko, s_tys[ti].type, buf + mi * rows * rb, S_COLS,
						   rows, x, y);
				/* gemv and the read sweep alternate, so both see the same machine */
				for (int r = 0; r < o.reps; r++) {
					uint64_t t0 = ns_now_ns(), c0 = s_cpu_ns();

					for (uint64_t mi = 0; mi < n_mat; mi++) {
						int rc = ns_gemv_ex(pools[t], &ko, s_tys[ti].type,
								    buf + mi * rows * rb, S_COLS, rows, x, y);
						if (rc) {
							fprintf(stderr, "bench_gemv: ns_gemv %s: %d\n", s_tys[ti].name, rc);
							return 1;
						}
					}
					uint64_t t1 = ns_now_ns();
					v[r] = (double)(n_mat * rows * rb) / (double)(t1 - t0);
					cpu[r] = (double)(s_cpu_ns() - c0) / (double)(t1 - t0) / o.threads[t];
					t0 = ns_now_ns();
					ns_pool_run(pools[t], s_read_task, &rr, n_read_tasks);
					rv[r] = (double)rr.len / (double)(ns_now_ns() - t0);
				}
				double g = s_median(v, o.reps), rd_t = s_median(rv, o.reps);

				printf("%-6s %-4s %4d %10.2f %10.2f %6.0f%% %5.0f%%\n", s_tys[ti].name,
				       act ? "q8" : "f32", o.threads[t], g, rd_t, 100.0 * g / rd_t,
				       100.0 * s_median(cpu, o.reps));
				fflush(stdout);
			}
		}
	}
	if (!o.gemm)
		goto out;
gemm:
	peak = s_int8_peak(pools[o.n_threads - 1]);
	printf("\nbatched ns_gemm, 2048 x %llu matrix, %d thread(s), effective GFLOP/s (median of 3);\n"
	       "i8: the int8 GEMM (gemm_i8.h, path %s); int8 peak measured now: %.1f GOP/s\n",
	       (unsigned long long)S_COLS, o.threads[o.n_threads - 1],
	       ns_i8path_name(ns_i8path_best()), peak);
	printf("%-6s %-4s %8s %8s %8s %8s\n", "type", "act", "1 tok", "8 tok", "64 tok", "512 tok");
	for (size_t ti = 0; ti < NS_ARRAY_LEN(s_tys); ti++) {
		const struct ns_type_info *inf = ns_type_get(s_tys[ti].type);
		static const uint64_t toks[] = { 1, 8, 64, 512 };
		struct ns_pool *p = pools[o.n_threads - 1];

		if (!o.types[ti])
			continue;
		s_fill(buf, S_MAT_BYTES, &s_tys[ti], inf);
		for (int act = 0; act < 3; act++) {
			struct ns_kopts ko = { o.path, (enum ns_act)(act > 0), true }; /* q8: the row kernels */
			double last = 0;

			if (!o.act[act > 0] || (act > 0 && inf->block_elems == 1))
				continue;
			printf("%-6s %-4s", s_tys[ti].name, act == 2 ? "i8" : act ? "q8" : "f32");
			for (size_t k = 0; k < NS_ARRAY_LEN(toks); k++) {
				double v[3];

				for (int r = 0; r < 3; r++) {
					uint64_t t0 = ns_now_ns();

					if (act == 2)
						ns_gemm_i8(p, NS_I8_AUTO, s_tys[ti].type, buf, S_COLS, 2048, x,
							   toks[k], y, 2048);
					else
						ns_gemm_ex(p, &ko, s_tys[ti].type, buf, S_COLS, 2048, x,
							   toks[k], y, 2048);
					v[r] = 2.0 * 2048 * S_COLS * (double)toks[k] / (double)(ns_now_ns() - t0);
				}
				last = s_median(v, 3);
				printf(" %8.1f", last);
				fflush(stdout);
			}
			if (act > 0 && peak > 0)
				printf("   (512 tok: %.2f of the int8 peak)", last / peak);
			printf("\n");
		}
	}
out:
	for (int t = 0; t < o.n_threads; t++)
		ns_pool_destroy(&pools[t]);
	free(buf);
	free(dst);
	free(x);
	free(y);
	return 0;
}
