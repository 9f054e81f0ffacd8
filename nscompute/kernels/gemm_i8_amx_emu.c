/* gemm_i8_amx_emu.c - the int8 GEMM's AMX kernel (gemm_i8_amx_body.h) with every tile
 * instruction carried out in C, so the kernel's tiling, tile configuration and scaling run and
 * are tested on CPUs without AMX (NS_I8_AMX_EMU). The emulation follows the instructions'
 * definitions: a load fills the configured rows x colsb and zeroes the rest of the tile;
 * tdpbusd adds, for each C element, the 4-byte dot products of an A row (unsigned bytes) with
 * a B column (signed bytes) over colsb(A) / 4 B rows, wrapping like the hardware; shapes that
 * the hardware would refuse (#UD) stop the process through assert. */
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")

#include <assert.h>
#include <immintrin.h>
#include <string.h>

#include "i8_internal.h"

struct s_tcfg;

struct s_emu {
	_Alignas(64) uint8_t t[8][16][64];
	uint8_t rows[8];
	uint16_t colsb[8];
	bool configured;
};

static void s_emu_config(struct s_emu *e, const void *cfg)
{
	const uint8_t *c = cfg;

	memset(e, 0, sizeof(*e));
	assert(c[0] == 1); /* palette 1 */
	for (int i = 0; i < 8; i++) {
		memcpy(&e->colsb[i], c + 16 + 2 * i, 2);
		e->rows[i] = c[48 + i];
		assert(e->rows[i] <= 16 && e->colsb[i] <= 64);
	}
	e->configured = true;
}

static void s_emu_load(struct s_emu *e, int t, const void *p, long ld)
{
	assert(e->configured && e->rows[t] && e->colsb[t]);
	memset(e->t[t], 0, sizeof(e->t[t]));
	for (int r = 0; r < e->rows[t]; r++)
		memcpy(e->t[t][r], (const uint8_t *)p + r * ld, e->colsb[t]);
}

static void s_emu_store(const struct s_emu *e, int t, void *p, long ld)
{
	assert(e->configured);
	for (int r = 0; r < e->rows[t]; r++)
		memcpy((uint8_t *)p + r * ld, e->t[t][r], e->colsb[t]);
}

static void s_emu_zero(struct s_emu *e, int t)
{
	assert(e->configured);
	memset(e->t[t], 0, sizeof(e->t[t]));
}

static void s_emu_dpbusd(struct s_emu *e, int c, int a, int b)
{
	assert(e->configured && e->rows[c] == e->rows[a] && e->colsb[c] == e->colsb[b] &&
	       e->rows[b] * 4 == e->colsb[a] && e->colsb[a] % 4 == 0);
	for (int m = 0; m < e->rows[c]; m++)
		for (int n = 0; n < e->colsb[c] / 4; n++) {
			uint32_t acc;

			memcpy(&acc, &e->t[c][m][4 * n], 4);
			for (int k = 0; k < e->colsb[a] / 4; k++)
				for (int i = 0; i < 4; i++)
					acc += (uint32_t)((int32_t)e->t[a][m][4 * k + i] *
							  (int32_t)(int8_t)e->t[b][k][4 * n + i]);
			memcpy(&e->t[c][m][4 * n], &acc, 4);
		}
}

#define S_AMX_FN ns_i8_panels_amx_emu
#define S_TSTATE struct s_emu emu_
#define S_TSTATE_PTR (&emu_)
#define S_TCONFIG(cfg) s_emu_config(&emu_, cfg)
#define S_TRELEASE() ((void)0)
/* inside s_amx_panel the state arrives as a void pointer */
#define S_TLOAD(t, p, ld) s_emu_load((struct s_emu *)tstate, t, p, (long)(ld))
#define S_TSTORE(t, p, ld) s_emu_store((const struct s_emu *)tstate, t, p, (long)(ld))
#define S_TZERO(t) s_emu_zero((struct s_emu *)tstate, t)
#define S_TDP(c, a, b) s_emu_dpbusd((struct s_emu *)tstate, c, a, b)

#include "gemm_i8_amx_body.h"

#pragma GCC pop_options
