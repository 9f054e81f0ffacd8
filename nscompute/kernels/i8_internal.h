/* i8_internal.h - what the int8 GEMM's dispatcher (gemm_i8.c) shares with its paths.
 *
 * Activations (filled once per call by the dispatcher), per token t of n_tok_pad (n_tok rounded
 * up to NS_I8_TOKS; the padding tokens are all zero):
 *   xu  : [n_tok_pad][ldu] u8, xq + 128 (vpdpbusd / tdpbusd take the unsigned operand first)
 *   dxb : [n_tok_pad][ldb] dx of scale block b (the scale of the 32-block that holds it)
 *   xsb : [n_tok_pad][ldb] dx_b * (float)(sum of xq over block b)
 *
 * A panel is 16 consecutive weight rows decoded and packed for vpdpbusd and tdpbusd, B the
 * scale block (16 or 32 elements), nb = n_cols / B blocks:
 *   wq   : [nb][B/4][16][4] int8  - the 4 consecutive values k..k+3 of row i at [k/4][i]
 *   d    : [nb][16] float         - d_b of each row
 *   m    : [nb][16] float         - m_b of each row (types with a minimum)
 *   corr : [nb][16] int32         - -128 * sum_{k in b} s_k: with the +128 of xu it makes the
 *                                   unsigned-by-signed byte sums exactly sum s_k * xq_k
 * Rows past the matrix are zero (s = 0, d = m = 0: they add +0 and are never stored). One
 * panel's layout in wq is one AMX B tile (B/4 rows of 64 bytes) per block. */
#ifndef NS_I8_INTERNAL_H
#define NS_I8_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "gemm_i8.h"
#include "kern_internal.h"

#define NS_I8_PANEL 16 /* rows per panel: one 32-bit lane per row */
#define NS_I8_TOKS 16  /* token rows are padded to this (an AMX tile holds 16 tokens) */

struct ns_i8job {
	const struct ns_kqtype *qt;
	uint32_t blk;        /* B: elements per scale block, 16 or 32 */
	bool has_min;
	const uint8_t *w;    /* row r at w + r * row_bytes */
	uint64_t row_bytes;
	uint64_t n_cols;
	uint64_t n_rows;
	uint64_t nb;         /* n_cols / blk */
	uint64_t n_tok;      /* real tokens; buffers hold n_tok_pad */
	const uint8_t *xu;
	uint64_t ldu;
	const float *dxb;
	const float *xsb;
	uint64_t ldb;
	float *y;
	uint64_t ldy;
	/* packing scratch: n_slots slots of panels_per_task panels, one slot per running task */
	uint32_t panels_per_task;
	uint64_t panel_bytes;
	uint8_t *slots;
	uint64_t slot_bytes;
	uint32_t n_slots;
	_Atomic uint32_t *slot_busy; /* [n_slots] */
};

struct ns_i8panel {
	int8_t *wq;
	float *d;
	float *m;
	int32_t *corr;
};

/* The parts of the panel at base (64-byte aligned; wq first, every part a multiple of 64). */
static inline struct ns_i8panel ns_i8_panel(const struct ns_i8job *j, uint8_t *base)
{
	struct ns_i8panel p;
	uint64_t nq = j->n_cols * NS_I8_PANEL, ns = j->nb * NS_I8_PANEL * 4;

	p.wq = (int8_t *)base;
	p.d = (float *)(void *)(base + nq);
	p.m = (float *)(void *)(base + nq + ns);
	p.corr = (int32_t *)(void *)(base + nq + 2 * ns);
	return p;
}

/* Bytes of one panel: n_cols * 16 + 3 arrays of nb * 16 four-byte values (a multiple of 64). */
static inline uint64_t ns_i8_panel_bytes(uint64_t n_cols, uint64_t nb)
{
	return n_cols * NS_I8_PANEL + 3 * nb * NS_I8_PANEL * 4;
}

/* The reference: rows [r0, r1) for every token, straight from the weight bytes (no packing). */
void ns_i8_rows_scalar(const struct ns_i8job *j, uint64_t r0, uint64_t r1);

/* Decode rows [r0, r0 + n) (n <= 16) into the panel at base (AVX-512 VNNI file: the sums of
 * corr are vpdpbusd with a vector of 128s). */
void ns_i8_pack(const struct ns_i8job *j, uint64_t r0, uint32_t n, uint8_t *base);

/* Multiply np packed panels (rows r0 .. r0 + 16 np) with every token; y rows past n_rows are
 * not written. */
void ns_i8_panels_vnni(const struct ns_i8job *j, uint8_t *panels, uint32_t np, uint64_t r0);
void ns_i8_panels_amx(const struct ns_i8job *j, uint8_t *panels, uint32_t np, uint64_t r0);
void ns_i8_panels_amx_emu(const struct ns_i8job *j, uint8_t *panels, uint32_t np, uint64_t r0);

/* cpu_features.c: AMX-TILE + AMX-INT8 in CPUID, the tile state enabled by the OS (XCR0) and
 * granted to this process (arch_prctl, asked once). */
bool ns_i8_amx_usable(void);

#endif
