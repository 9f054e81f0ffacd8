/* gemv.c - argument checks, path choice, activation quantization and the split of a row window
 * over the pool (see gemv.h). */
#include "gemv.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gemm_i8.h"
#include "ggml_type.h"
#include "kern_internal.h"
#include "ns_util.h"

/* Rows per task: enough tasks to balance across threads (cores are shared), few enough that a
 * task's weights (read once per token tile) stay within ~256 KiB of L2. */
#define S_TASK_BYTES (256u * 1024u)
/* Windows smaller than this (weight bytes x tokens) run on the calling thread. */
#define S_INLINE_BYTES (64u * 1024u)

struct s_run {
	const struct ns_kjob *job;
	ns_krows_fn fn;
	uint64_t rows_per_task;
	uint64_t n_rows;
};

static void s_task(void *ctx, uint64_t t)
{
	const struct s_run *run = ctx;
	uint64_t r0 = t * run->rows_per_task;
	uint64_t r1 = r0 + run->rows_per_task;

	run->fn(run->job, r0, r1 < run->n_rows ? r1 : run->n_rows);
}

/* Reference quantizer of one token's activations (layout in kern_internal.h). Padding past
 * n_cols is left untouched (the caller zeroes it). */
void ns_kquant_x_scalar(const float *x, uint64_t n_cols, int8_t *q, float *dg, float *sg, int32_t *c)
{
	for (uint64_t b = 0; b < n_cols / 32; b++) {
		float amax = 0.0f, dx, id;

		for (int i = 0; i < 32; i++) {
			float a = fabsf(x[32 * b + i]);

			if (a > amax) /* NaN never wins */
				amax = a;
		}
		dx = amax / 127.0f;
		id = (dx > 0.0f && isfinite(dx)) ? 1.0f / dx : 0.0f;
		for (int i = 0; i < 32; i++) {
			float v = x[32 * b + i] * id; /* |v| <= 127 unless x is not finite */

			if (!(v >= -127.0f && v <= 127.0f))
				v = v > 0.0f ? 127.0f : (v == v ? -127.0f : 0.0f);
			/* round to nearest even: exact for |v| < 2^22, no libm call */
			v = (v + 0x1.8p23f) - 0x1.8p23f;
			q[32 * b + i] = (int8_t)v;
		}
		for (int h = 0; h < 2; h++) {
			int32_t s = 0;

			for (int i = 0; i < 16; i++)
				s += q[32 * b + 16 * h + i];
			dg[2 * b + h] = dx;
			sg[2 * b + h] = dx * (float)s;
		}
		for (int k = 0; k < 8; k++)
			c[8 * b + k] = -128 * (q[32 * b + 4 * k] + q[32 * b + 4 * k + 1] +
					       q[32 * b + 4 * k + 2] + q[32 * b + 4 * k + 3]);
	}
}

/* Quantize x [n_tok][n_cols] once per call; buffers are zeroed (calloc) so padding reads 0. */
static void s_quantize_x(struct ns_kjob *j, enum ns_kpath path, int8_t *xq, float *dxg,
			 float *xsg, int32_t *c4, float *dxl)
{
	for (uint64_t t = 0; t < j->n_tok; t++) {
		const float *x = j->x + t * j->ldx;

		if (path == NS_KPATH_AVX512)
			ns_kquant_x_avx512(x, j->n_cols, xq + t * j->ldq, dxg + t * j->ldg,
					   xsg + t * j->ldg, c4 + t * j->ldc);
		else if (path == NS_KPATH_AVX2)
			ns_kquant_x_avx2(x, j->n_cols, xq + t * j->ldq, dxg + t * j->ldg,
					 xsg + t * j->ldg, c4 + t * j->ldc);
		else
			ns_kquant_x_scalar(x, j->n_cols, xq + t * j->ldq, dxg + t * j->ldg,
					   xsg + t * j->ldg, c4 + t * j->ldc);
		/* per-lane scales: only the AVX-512 MXFP4 kernel reads them */
		for (uint64_t k = 0; j->qt->type == NS_TYPE_MXFP4 && k < j->n_cols / 4; k++)
			dxl[t * j->ldc + k] = dxg[t * j->ldg + k / 4]; /* group k / 4 holds element 4k */
	}
}

static ns_krows_fn s_path_fn(enum ns_kpath path)
{
	switch (path) {
	case NS_KPATH_AVX512:
		return ns_krows_avx512;
	case NS_KPATH_AVX2:
		return ns_krows_avx2;
	default:
		return ns_krows_scalar;
	}
}

uint64_t ns_gemm_x_bytes(uint64_t n_tok, uint64_t n_cols)
{
	/* as ns_gemm_ex below: the float copy's row stride, the q8 buffers' three strides */
	uint64_t ldx = n_tok > 1 ? (n_cols + 15) / 16 * 16 + 16 : n_cols;
	uint64_t ldq = (n_cols + 63) / 64 * 64 + 64;
	uint64_t ldg = (n_cols / NS_KGROUP + 16 + 15) / 16 * 16;
	uint64_t ldc = (n_cols / 4 + 16 + 15) / 16 * 16;
	uint64_t f, q;

	if (n_cols > UINT64_MAX / 64 || ns_mul_u64_overflow(n_tok, ldx * sizeof(float), &f) ||
	    ns_mul_u64_overflow(n_tok, ldq + 2 * 4 * ldg + 2 * 4 * ldc, &q) ||
	    (f > q ? f : q) > UINT64_MAX - 64)
		return UINT64_MAX;
	return (f > q ? f : q) + 64;
}

int ns_gemm_ex(struct ns_pool *p, const struct ns_kopts *opts, uint32_t type, const void *w,
	       uint64_t n_cols, uint64_t n_rows, const float *x, uint64_t n_tok, float *y,
	       uint64_t ldy)
{
	const struct ns_kqtype *qt = ns_kq_get(type);
	enum ns_kpath path = opts ? opts->path : NS_KPATH_AUTO;
	struct ns_kjob j = { 0 };
	uint64_t win_bytes, tmp, xq_n, g_n;
	void *buf = NULL;

	if (!qt)
		return -ENOTSUP;
	if (path == NS_KPATH_AUTO)
		path = ns_kpath_best();
	if (!ns_kpath_supported(path))
		return -ENOTSUP;
	if (n_cols == 0 || n_cols % qt->blk_elems)
		return -EINVAL;
	j.qt = qt;
	j.n_cols = n_cols;
	j.row_bytes = n_cols / qt->blk_elems * qt->blk_bytes; /* n_cols * 4 at most: no overflow */
	if (n_cols > UINT64_MAX / 4 || ns_mul_u64_overflow(n_rows, j.row_bytes, &win_bytes) ||
	    ns_mul_u64_overflow(n_tok, n_cols, &tmp))
		return -EOVERFLOW;
	if (n_rows == 0 || n_tok == 0)
		return 0;
	if (!w || !x || !y || (n_tok > 1 && ldy < n_rows))
		return -EINVAL;
	if (ns_mul_u64_overflow(n_tok - 1, ldy, &tmp) || tmp > UINT64_MAX - n_rows)
		return -EOVERFLOW;
	j.w = w;
	j.x = x;
	j.ldx = n_cols;
	j.n_tok = n_tok;
	j.y = y;
	j.ldy = ldy;
	j.q8 = opts && opts->act == NS_ACT_Q8 && !qt->is_float;
	if (j.q8 && n_tok >= NS_I8_MIN_TOK && !opts->no_i8 && path == NS_KPATH_AVX512 &&
	    ns_i8path_best() != NS_I8_SCALAR)
		return ns_gemm_i8(p, NS_I8_AUTO, type, w, n_cols, n_rows, x, n_tok, y, ldy);

	if (!j.q8 && ((uintptr_t)x % 64 || (n_tok > 1 && (n_cols * sizeof(float)) % 1024 == 0))) {
		/* Copy x once, 64-byte aligned (no cache-line-split loads) and, for batches, with a
		 * row stride of an odd number of cache lines: token rows a power-of-two stride apart
		 * would share L1 sets. Values are unchanged, so results are too. */
		uint64_t ldx = n_tok > 1 ? (n_cols + 15) / 16 * 16 + 16 : n_cols;

		if (ns_mul_u64_overflow(n_tok, ldx * sizeof(float), &tmp) || tmp > SIZE_MAX - 64)
			return -EOVERFLOW;
		buf = aligned_alloc(64, (size_t)(tmp + 63) / 64 * 64);
		if (!buf)
			return -ENOMEM;
		for (uint64_t t = 0; t < n_tok; t++)
			memcpy((float *)buf + t * ldx, x + t * n_cols, n_cols * sizeof(float));
		j.x = buf;
		j.ldx = ldx;
	}
	if (j.q8) {
		/* every per-token row 64-byte aligned: the kernels load 64 bytes at a time */
		j.ldq = (n_cols + 63) / 64 * 64 + 64;
		j.ldg = (n_cols / NS_KGROUP + 16 + 15) / 16 * 16;
		j.ldc = (n_cols / 4 + 16 + 15) / 16 * 16;
		if (ns_mul_u64_overflow(n_tok, j.ldq + 2 * 4 * j.ldg + 2 * 4 * j.ldc, &tmp) ||
		    tmp > SIZE_MAX - 64)
			return -EOVERFLOW;
		xq_n = n_tok * j.ldq;
		g_n = n_tok * j.ldg;
		buf = aligned_alloc(64, (size_t)tmp);
		if (!buf)
			return -ENOMEM;
		memset(buf, 0, (size_t)tmp); /* padding must read as zero */
		int8_t *xq = buf;
		float *dxg = (float *)(void *)(xq + xq_n), *xsg = dxg + g_n;
		int32_t *c4 = (int32_t *)(void *)(xsg + g_n);
		float *dxl = (float *)(void *)(c4 + n_tok * j.ldc);

		s_quantize_x(&j, path, xq, dxg, xsg, c4, dxl);
		j.xq = xq;
		j.dxg = dxg;
		j.xsg = xsg;
		j.c4 = c4;
		j.dxl = dxl;
	}

	struct s_run run = { .job = &j, .fn = s_path_fn(path), .n_rows = n_rows };
	int nth = ns_pool_threads(p);
	uint64_t per = j.row_bytes ? S_TASK_BYTES / j.row_bytes : n_rows;
	uint64_t bal = (n_rows + (uint64_t)nth * 8 - 1) / ((uint64_t)nth * 8);

	if (per < 1)
		per = 1;
	run.rows_per_task = bal < per ? (bal ? bal : 1) : per;
	if (win_bytes < S_INLINE_BYTES / n_tok) /* small job: waking workers costs more */
		p = NULL;
	ns_pool_run(p, s_task, &run, (n_rows + run.rows_per_task - 1) / run.rows_per_task);
	free(buf);
	return 0;
}
