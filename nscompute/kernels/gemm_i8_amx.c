/* gemm_i8_amx.c - the int8 GEMM's AMX kernel with the tile instructions themselves
 * (gemm_i8_amx_body.h). Runs only where ns_i8path_supported(NS_I8_AMX): CPUID has AMX-TILE and
 * AMX-INT8, the OS enables the tile state and arch_prctl granted it to this process. */
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni,amx-tile,amx-int8")

#include <immintrin.h>
#include <string.h>

#include "i8_internal.h"

#define S_AMX_FN ns_i8_panels_amx
#define S_TSTATE (void)0
#define S_TSTATE_PTR NULL
#define S_TCONFIG(cfg) _tile_loadconfig(cfg)
#define S_TRELEASE() _tile_release()
#define S_TLOAD(t, p, ld) _tile_loadd(t, p, (long)(ld))
#define S_TSTORE(t, p, ld) _tile_stored(t, p, (long)(ld))
#define S_TZERO(t) _tile_zero(t)
#define S_TDP(c, a, b) _tile_dpbusd(c, a, b)

#include "gemm_i8_amx_body.h"

#pragma GCC pop_options
