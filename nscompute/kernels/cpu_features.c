/* cpu_features.c - which kernel paths this CPU can run (cpuid via __builtin_cpu_supports,
 * which also checks that the OS saves the AVX / AVX-512 register state). */
#include "gemv.h"

static bool s_has_avx2(void)
{
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
	       __builtin_cpu_supports("f16c");
}

static bool s_has_avx512(void)
{
	return s_has_avx2() && __builtin_cpu_supports("avx512f") &&
	       __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
	       __builtin_cpu_supports("avx512vnni");
}

bool ns_kpath_supported(enum ns_kpath path)
{
	switch (path) {
	case NS_KPATH_AUTO:
	case NS_KPATH_SCALAR:
		return true;
	case NS_KPATH_AVX2:
		return s_has_avx2();
	case NS_KPATH_AVX512:
		return s_has_avx512();
	}
	return false;
}

enum ns_kpath ns_kpath_best(void)
{
	if (s_has_avx512())
		return NS_KPATH_AVX512;
	if (s_has_avx2())
		return NS_KPATH_AVX2;
	return NS_KPATH_SCALAR;
}

const char *ns_kpath_name(enum ns_kpath path)
{
	switch (path) {
	case NS_KPATH_AUTO:
		return "auto";
	case NS_KPATH_SCALAR:
		return "scalar";
	case NS_KPATH_AVX2:
		return "avx2";
	case NS_KPATH_AVX512:
		return "avx512";
	}
	return "?";
}

/* ---- AMX (int8 GEMM, gemm_i8.h) ---- */

#include <cpuid.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "i8_internal.h"

#define S_ARCH_REQ_XCOMP_PERM 0x1023 /* arch_prctl: ask for an XSTATE component */
#define S_XFEATURE_XTILEDATA 18      /* the tile data component */

struct s_amx_probe {
	pthread_once_t once;
	bool usable;
};

static struct s_amx_probe s_amx = { PTHREAD_ONCE_INIT, false };

static uint64_t s_xgetbv0(void)
{
	uint32_t lo, hi;

	__asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
	return (uint64_t)hi << 32 | lo;
}

/* Once per process: CPUID.7.0:EDX bit 24 (AMX-TILE) and 25 (AMX-INT8), OSXSAVE, XCR0 bits 17
 * and 18 (tile config and data enabled by the OS), then the kernel's permission (Linux 5.16+
 * keeps the tile state off until a process asks; a refusal leaves the path unsupported). */
static void s_amx_probe_once(void)
{
	unsigned a, b, c, d;

	if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d & (1u << 24)) || !(d & (1u << 25)))
		return;
	if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) /* OSXSAVE */
		return;
	if ((s_xgetbv0() & (3ull << 17)) != (3ull << 17))
		return;
	if (syscall(SYS_arch_prctl, S_ARCH_REQ_XCOMP_PERM, S_XFEATURE_XTILEDATA) != 0)
		return;
	s_amx.usable = true;
}

bool ns_i8_amx_usable(void)
{
	pthread_once(&s_amx.once, s_amx_probe_once);
	return s_amx.usable;
}
