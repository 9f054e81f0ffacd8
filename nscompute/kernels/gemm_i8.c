/* gemm_i8.c - argument checks, path choice, activation quantization and the split of the rows
 * over the pool for the int8 GEMM (gemm_i8.h, layouts in i8_internal.h). */
#include "gemm_i8.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ggml_type.h"
#include "i8_internal.h"
#include "ns_util.h"

/* Packed bytes a task aims at: its panels stay in L2 while every token passes over them. */
#define S_TASK_BYTES (256u * 1024u)
#define S_MAX_PANELS 4u

/* Scale block of a type: 16 where the decoded scale changes every 16 elements. */
static uint32_t s_blk(uint32_t type)
{
	return type == NS_TYPE_Q2_K || type == NS_TYPE_Q3_K || type == NS_TYPE_Q6_K ? 16 : 32;
}

bool ns_gemm_i8_type(uint32_t type)
{
	const struct ns_kqtype *qt = ns_kq_get(type);

	return qt && !qt->is_float;
}

const char *ns_i8path_name(enum ns_i8path path)
{
	switch (path) {
	case NS_I8_AUTO:
		return "auto";
	case NS_I8_SCALAR:
		return "scalar";
	case NS_I8_VNNI:
		return "vnni";
	case NS_I8_AMX:
		return "amx";
	case NS_I8_AMX_EMU:
		return "amx-emu";
	}
	return "?";
}

bool ns_i8path_supported(enum ns_i8path path)
{
	switch (path) {
	case NS_I8_AUTO:
	case NS_I8_SCALAR:
		return true;
	case NS_I8_VNNI:
	case NS_I8_AMX_EMU:
		return ns_kpath_supported(NS_KPATH_AVX512);
	case NS_I8_AMX:
		return ns_kpath_supported(NS_KPATH_AVX512) && ns_i8_amx_usable();
	}
	return false;
}

enum ns_i8path ns_i8path_best(void)
{
	if (ns_i8path_supported(NS_I8_AMX))
		return NS_I8_AMX;
	if (ns_i8path_supported(NS_I8_VNNI))
		return NS_I8_VNNI;
	return NS_I8_SCALAR;
}

/* One token's activations in the int8 form of i8_internal.h. q, dg, sg, c are scratch of
 * n_cols, n_cols / 16, n_cols / 16 and n_cols / 4 elements. Every quantizer gives the same
 * bytes (tests/kernels/test_gemv), so the path does not change the result. */
static void s_quantize_tok(const struct ns_i8job *j, enum ns_kpath kp, const float *x,
			   uint8_t *xu, float *dxb, float *xsb, int8_t *q, float *dg, float *sg,
			   int32_t *c)
{
	if (kp == NS_KPATH_AVX512)
		ns_kquant_x_avx512(x, j->n_cols, q, dg, sg, c);
	else if (kp == NS_KPATH_AVX2)
		ns_kquant_x_avx2(x, j->n_cols, q, dg, sg, c);
	else
		ns_kquant_x_scalar(x, j->n_cols, q, dg, sg, c);
	for (uint64_t k = 0; k < j->n_cols; k++)
		xu[k] = (uint8_t)(q[k] + 128);
	for (uint64_t b = 0; b < j->nb; b++) {
		if (j->blk == 16) {
			dxb[b] = dg[b];
			xsb[b] = sg[b];
		} else {
			int32_t s = 0;

			for (uint32_t i = 0; i < 32; i++)
				s += q[32 * b + i];
			dxb[b] = dg[2 * b];
			xsb[b] = dg[2 * b] * (float)s;
		}
	}
}

struct s_run {
	const struct ns_i8job *j;
	enum ns_i8path path;
};

static uint32_t s_slot_claim(const struct ns_i8job *j)
{
	for (;;) /* at most n_slots tasks run at once: one is always free */
		for (uint32_t i = 0; i < j->n_slots; i++) {
			uint32_t free_ = 0;

			if (atomic_compare_exchange_strong(&j->slot_busy[i], &free_, 1))
				return i;
		}
}

static void s_task(void *ctx, uint64_t task)
{
	const struct s_run *run = ctx;
	const struct ns_i8job *j = run->j;
	uint64_t r0 = task * j->panels_per_task * NS_I8_PANEL;
	uint64_t left = (j->n_rows - r0 + NS_I8_PANEL - 1) / NS_I8_PANEL;
	uint32_t np = (uint32_t)(left < j->panels_per_task ? left : j->panels_per_task);
	uint32_t slot;
	uint8_t *base;

	if (run->path == NS_I8_SCALAR) {
		uint64_t r1 = r0 + (uint64_t)np * NS_I8_PANEL;

		ns_i8_rows_scalar(j, r0, r1 < j->n_rows ? r1 : j->n_rows);
		return;
	}
	slot = s_slot_claim(j);
	base = j->slots + slot * j->slot_bytes;
	for (uint32_t p = 0; p < np; p++) {
		uint64_t rp = r0 + (uint64_t)p * NS_I8_PANEL;
		uint64_t n = j->n_rows - rp < NS_I8_PANEL ? j->n_rows - rp : NS_I8_PANEL;

		ns_i8_pack(j, rp, (uint32_t)n, base + p * j->panel_bytes);
	}
	if (run->path == NS_I8_AMX)
		ns_i8_panels_amx(j, base, np, r0);
	else if (run->path == NS_I8_AMX_EMU)
		ns_i8_panels_amx_emu(j, base, np, r0);
	else
		ns_i8_panels_vnni(j, base, np, r0);
	atomic_store(&j->slot_busy[slot], 0);
}

/* Activation buffers and packing slots, one allocation: xu, dxb, xsb, the quantizer's scratch,
 * slot flags, slots. */
static int s_buffers(struct ns_i8job *j, uint64_t n_pad, bool packed, void **buf,
		     int8_t **q, float **dg, float **sg, int32_t **c)
{
	uint64_t sz_u, sz_b, sz_q, sz_g, sz_c, sz_f, sz_s, tot, tmp;
	uint8_t *p;

	if (ns_mul_u64_overflow(n_pad, j->ldu, &sz_u) ||
	    ns_mul_u64_overflow(n_pad, j->ldb * 4, &sz_b) ||
	    ns_mul_u64_overflow((uint64_t)j->n_slots, j->slot_bytes, &sz_s))
		return -EOVERFLOW;
	sz_u = ns_align_up_u64(sz_u, 64);
	sz_b = ns_align_up_u64(sz_b, 64);
	sz_q = ns_align_up_u64(j->n_cols, 64);
	sz_g = ns_align_up_u64(j->n_cols / 16 * 4, 64);
	sz_c = ns_align_up_u64(j->n_cols / 4 * 4, 64);
	sz_f = ns_align_up_u64((uint64_t)j->n_slots * sizeof(*j->slot_busy), 64);
	if (!packed)
		sz_s = 0;
	tot = sz_u + 2 * sz_b + sz_q + 2 * sz_g + sz_c + sz_f;
	if (ns_add_u64_overflow(tot, sz_s, &tmp) || tmp > SIZE_MAX - 64)
		return -EOVERFLOW;
	p = aligned_alloc(64, (size_t)tmp);
	if (!p)
		return -ENOMEM;
	*buf = p;
	memset(p, 0, (size_t)(sz_u + 2 * sz_b)); /* padding tokens' scales; their xu below */
	j->xu = p;
	j->dxb = (float *)(void *)(p + sz_u);
	j->xsb = (float *)(void *)(p + sz_u + sz_b);
	*q = (int8_t *)(p + sz_u + 2 * sz_b);
	*dg = (float *)(void *)((uint8_t *)*q + sz_q);
	*sg = (float *)(void *)((uint8_t *)*dg + sz_g);
	*c = (int32_t *)(void *)((uint8_t *)*sg + sz_g);
	j->slot_busy = (_Atomic uint32_t *)(void *)((uint8_t *)*c + sz_c);
	for (uint32_t i = 0; i < j->n_slots; i++)
		atomic_init(&j->slot_busy[i], 0);
	j->slots = packed ? (uint8_t *)j->slot_busy + sz_f : NULL;
	return 0;
}

/* Panels per task: packed bytes near S_TASK_BYTES, and enough tasks to balance the threads. */
static uint32_t s_panels_per_task(uint64_t panel_bytes, uint64_t n_panels, int nth)
{
	uint64_t ppt = S_TASK_BYTES / panel_bytes;

	if (ppt > S_MAX_PANELS)
		ppt = S_MAX_PANELS;
	while (ppt > 1 && n_panels / ppt < (uint64_t)nth * 4)
		ppt--;
	return ppt ? (uint32_t)ppt : 1;
}

int ns_gemm_i8(struct ns_pool *p, enum ns_i8path path, uint32_t type, const void *w,
	       uint64_t n_cols, uint64_t n_rows, const float *x, uint64_t n_tok, float *y,
	       uint64_t ldy)
{
	const struct ns_kqtype *qt = ns_kq_get(type);
	enum ns_kpath kp = ns_kpath_best();
	struct ns_i8job j = { 0 };
	uint64_t tmp, n_pad, n_panels;
	int8_t *q;
	float *dg, *sg;
	int32_t *c;
	void *buf = NULL;
	struct s_run run;
	int nth = ns_pool_threads(p), rc;

	if (!qt || qt->is_float)
		return -ENOTSUP;
	if (path == NS_I8_AUTO)
		path = ns_i8path_best();
	if (!ns_i8path_supported(path))
		return -ENOTSUP;
	if (n_cols == 0 || n_cols % qt->blk_elems || n_cols % 32)
		return -EINVAL;
	if (n_cols > UINT64_MAX / 64 || ns_mul_u64_overflow(n_tok, n_cols, &tmp) ||
	    ns_mul_u64_overflow(n_rows, n_cols, &tmp))
		return -EOVERFLOW;
	if (n_rows == 0 || n_tok == 0)
		return 0;
	if (!w || !x || !y || (n_tok > 1 && ldy < n_rows))
		return -EINVAL;
	if (ns_mul_u64_overflow(n_tok - 1, ldy, &tmp) || tmp > UINT64_MAX - n_rows ||
	    n_tok > UINT64_MAX - NS_I8_TOKS)
		return -EOVERFLOW;
	j.qt = qt;
	j.blk = s_blk(type);
	j.has_min = qt->has_min;
	j.w = w;
	j.row_bytes = n_cols / qt->blk_elems * qt->blk_bytes;
	j.n_cols = n_cols;
	j.n_rows = n_rows;
	j.nb = n_cols / j.blk;
	j.n_tok = n_tok;
	j.ldu = ns_align_up_u64(n_cols, 64) + 64; /* odd cache lines apart: no 4 KiB aliasing */
	j.ldb = ns_align_up_u64(j.nb, 16);
	j.y = y;
	j.ldy = ldy;
	n_pad = ns_align_up_u64(n_tok, NS_I8_TOKS);
	n_panels = (n_rows + NS_I8_PANEL - 1) / NS_I8_PANEL;
	j.panel_bytes = ns_i8_panel_bytes(n_cols, j.nb);
	j.panels_per_task = s_panels_per_task(j.panel_bytes, n_panels, nth);
	j.slot_bytes = j.panel_bytes * j.panels_per_task;
	j.n_slots = (uint32_t)(nth > 0 ? nth : 1);
	rc = s_buffers(&j, n_pad, path != NS_I8_SCALAR, &buf, &q, &dg, &sg, &c);
	if (rc)
		return rc;
	for (uint64_t t = 0; t < n_pad; t++) {
		uint8_t *xu = (uint8_t *)j.xu + t * j.ldu;

		if (t < n_tok)
			s_quantize_tok(&j, kp, x + t * n_cols, xu, (float *)j.dxb + t * j.ldb,
				       (float *)j.xsb + t * j.ldb, q, dg, sg, c);
		else
			memset(xu, 128, (size_t)n_cols); /* xq = 0; dxb = xsb = 0 already */
	}
	run = (struct s_run){ .j = &j, .path = path };
	ns_pool_run(p, s_task, &run, (n_panels + j.panels_per_task - 1) / j.panels_per_task);
	free(buf);
	return 0;
}
