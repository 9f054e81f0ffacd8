/* gemm_i8_amx_body.h - the AMX kernel of the int8 GEMM, written once over tile macros.
 *
 * Included by gemm_i8_amx.c (the tile instructions themselves) and gemm_i8_amx_emu.c (each
 * tile instruction carried out in C), which define before including it:
 *   S_AMX_FN            name of the entry point (i8_internal.h)
 *   S_TSTATE            declarations the macros need (the emulator's tile registers)
 *   S_TCONFIG(cfg)      ldtilecfg          S_TRELEASE()        tilerelease
 *   S_TLOAD(t, p, ld)   tileloadd          S_TSTORE(t, p, ld)  tilestored
 *   S_TZERO(t)          tilezero           S_TDP(c, a, b)      tdpbusd c += a(u8) . b(s8)
 * Tiles: 0 = C, 16 tokens x 16 rows int32; 1 = A, 16 tokens x B activation bytes (u8);
 * 2 = B, B/4 rows of 16 weight rows x 4 bytes (the panel's wq of one block, as packed).
 * Per block the C tile is stored and scaled with AVX-512 exactly as the VNNI kernel scales its
 * lanes: acc = fma(d * dx, (float)(C + corr), acc) then fma(m, xs, acc). */

/* The 64-byte operand of ldtilecfg (palette 1). */
struct s_tcfg {
	uint8_t palette;
	uint8_t start_row;
	uint8_t reserved[14];
	uint16_t colsb[16];
	uint8_t rows[16];
};
_Static_assert(sizeof(struct s_tcfg) == 64, "ldtilecfg takes 64 bytes");

static inline __attribute__((always_inline)) void
s_amx_panel(const struct ns_i8job *j, const struct ns_i8panel *pp, uint64_t r0, const uint32_t B,
	    const bool has_min, void *tstate)
{
	_Alignas(64) int32_t cbuf[NS_I8_TOKS][16];
	uint64_t left = j->n_rows - r0;
	__mmask16 kr = left >= 16 ? 0xffff : (__mmask16)((1u << left) - 1);

	(void)tstate;
	for (uint64_t t0 = 0; t0 < j->n_tok; t0 += NS_I8_TOKS) {
		__m512 acc[NS_I8_TOKS];

#pragma GCC unroll 16
		for (int t = 0; t < NS_I8_TOKS; t++)
			acc[t] = _mm512_setzero_ps();
		for (uint64_t b = 0; b < j->nb; b++) {
			__m512i corr = _mm512_load_si512(pp->corr + b * 16);
			__m512 d = _mm512_load_ps(pp->d + b * 16);
			__m512 m = has_min ? _mm512_load_ps(pp->m + b * 16) : d;
			const float *dxb = j->dxb + t0 * j->ldb + b;
			const float *xsb = j->xsb + t0 * j->ldb + b;

			S_TLOAD(1, j->xu + t0 * j->ldu + b * B, j->ldu);
			S_TLOAD(2, pp->wq + b * B * NS_I8_PANEL, 64);
			S_TZERO(0);
			S_TDP(0, 1, 2);
			S_TSTORE(0, cbuf, 64);
#pragma GCC unroll 16
			for (int t = 0; t < NS_I8_TOKS; t++) {
				__m512i is = _mm512_add_epi32(_mm512_load_si512(cbuf[t]), corr);
				__m512 dx = _mm512_set1_ps(dxb[t * j->ldb]);

				acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(d, dx), _mm512_cvtepi32_ps(is), acc[t]);
				if (has_min)
					acc[t] = _mm512_fmadd_ps(m, _mm512_set1_ps(xsb[t * j->ldb]), acc[t]);
			}
		}
		for (uint64_t t = 0; t < NS_I8_TOKS && t0 + t < j->n_tok; t++)
			_mm512_mask_storeu_ps(j->y + (t0 + t) * j->ldy + r0, kr, acc[t]);
	}
}

#define S_AMX_VARIANT(name, B, mn)                                                          \
	static void name(const struct ns_i8job *j, const struct ns_i8panel *pp, uint64_t r0,  \
			 void *ts)                                                             \
	{                                                                                      \
		s_amx_panel(j, pp, r0, B, mn, ts);                                             \
	}
S_AMX_VARIANT(s_amx16, 16, false)
S_AMX_VARIANT(s_amx16m, 16, true)
S_AMX_VARIANT(s_amx32, 32, false)
S_AMX_VARIANT(s_amx32m, 32, true)

void S_AMX_FN(const struct ns_i8job *j, uint8_t *panels, uint32_t np, uint64_t r0)
{
	S_TSTATE;
	struct s_tcfg cfg;
	void (*fn)(const struct ns_i8job *, const struct ns_i8panel *, uint64_t, void *) =
		j->blk == 16 ? (j->has_min ? s_amx16m : s_amx16) : (j->has_min ? s_amx32m : s_amx32);

	memset(&cfg, 0, sizeof(cfg));
	cfg.palette = 1;
	cfg.rows[0] = NS_I8_TOKS; /* C */
	cfg.colsb[0] = 64;
	cfg.rows[1] = NS_I8_TOKS; /* A */
	cfg.colsb[1] = (uint16_t)j->blk;
	cfg.rows[2] = (uint8_t)(j->blk / 4); /* B */
	cfg.colsb[2] = 64;
	S_TCONFIG(&cfg);
	for (uint32_t p = 0; p < np; p++) {
		struct ns_i8panel pp = ns_i8_panel(j, panels + p * j->panel_bytes);

		fn(j, &pp, r0 + (uint64_t)p * NS_I8_PANEL, S_TSTATE_PTR);
	}
	S_TRELEASE();
}
