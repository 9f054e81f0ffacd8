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
