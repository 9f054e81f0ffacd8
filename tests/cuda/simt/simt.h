/* simt.h - CUDA's execution model on the CPU, enough to run nscompute/cuda's kernels from their
 * own source in tests on machines without a GPU.
 *
 * What it runs: a .cu file rewritten by cu2host.py (launches `k<<<g, b, sm, s>>>(a)` become
 * `::simt::launch(g, b, sm, s).run(k, a)`, `extern __shared__ T x[]` becomes a pointer to the
 * launch's dynamic shared memory) and compiled as C++17 with this header in place of
 * cuda_runtime.h (include/cuda_runtime.h).
 *
 * How: blocks run one after another; the threads of a block are fibers on one OS thread,
 * switched cooperatively at __syncthreads, at every warp shuffle and at __syncwarp. So shared
 * memory is a function-static array (one block lives at a time), warp shuffles exchange
 * through a slot per lane between two warp barriers, and a barrier that can never complete
 * (threads of one block at different __syncthreads, a shuffle with exited lanes) aborts with a
 * message instead of hanging. Exited threads leave the barrier's count, as on the hardware.
 *
 * Races: fibers switch only at sync points, and alternate blocks run their threads in
 * opposite orders (first to last, last to first), so a thread that reads another's write
 * without a barrier in between reads it before it is written in one of the two orders.
 *
 * What it does not model: concurrency between blocks (a kernel that relies on two blocks
 * running at once deadlocks here), memory ordering, the device's libm (expf, sinf... are the
 * host's: results agree with the GPU's to a few ulps, not in bits), inline PTX.
 *
 * The CUDA builtins (threadIdx, blockIdx, blockDim, gridDim) are one process-wide record the
 * scheduler rewrites at every switch: a device's registers have no other place to live here.
 * One launch at a time; not thread-safe. */
#ifndef NS_SIMT_H
#define NS_SIMT_H

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <utility>

#include "quant_host_shim.h" /* __device__, __forceinline__, halves, float4, __fmul_rn ... */

#define NS_SIMT_HOST 1 /* for the few lines of inline PTX a kernel file replaces (gemv2.cu) */

#define __global__
#define __host__
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(...)
#define __noinline__ __attribute__((noinline))

struct uint3 { unsigned x, y, z; };
struct int2 { int x, y; };
struct int4 { int x, y, z, w; };
struct dim3 {
	unsigned x, y, z;
	dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

static inline float4 make_float4(float x, float y, float z, float w) { return float4{ x, y, z, w }; }
static inline float2 make_float2(float x, float y) { return float2{ x, y }; }
static inline uint4 make_uint4(uint32_t x, uint32_t y, uint32_t z, uint32_t w)
{
	return uint4{ x, y, z, w };
}

typedef struct CUstream_st *cudaStream_t;
extern "C" void ns_emu_launch_order(cudaStream_t s); /* ../../../nscompute/cuda/emu */
enum cudaError_t {
	cudaSuccess = 0,
	cudaErrorInvalidValue = 1,
	cudaErrorInvalidConfiguration = 9,
	cudaErrorNoDevice = 100,
	cudaErrorInsufficientDriver = 35,
};

/* The device the launchers size themselves for: an H200's shared memory (sm_90) on 4 SMs, so
 * grids sized to the SMs stay small here and their blocks loop over more work. */
enum cudaDeviceAttr {
	cudaDevAttrMultiProcessorCount = 16,
	cudaDevAttrMaxSharedMemoryPerBlockOptin = 97,
	cudaDevAttrMaxSharedMemoryPerMultiprocessor = 81,
};
enum cudaFuncAttribute {
	cudaFuncAttributeMaxDynamicSharedMemorySize = 8,
	cudaFuncAttributePreferredSharedMemoryCarveout = 9,
};
enum { cudaSharedmemCarveoutMaxShared = 100 };

static inline cudaError_t cudaGetDevice(int *d)
{
	*d = 0;
	return cudaSuccess;
}

static inline cudaError_t cudaDeviceGetAttribute(int *v, cudaDeviceAttr a, int dev)
{
	(void)dev;
	switch (a) {
	case cudaDevAttrMultiProcessorCount: *v = 4; break;
	case cudaDevAttrMaxSharedMemoryPerBlockOptin: *v = 227 * 1024; break;
	case cudaDevAttrMaxSharedMemoryPerMultiprocessor: *v = 228 * 1024; break;
	default: return cudaErrorInvalidValue;
	}
	return cudaSuccess;
}

template <class F> static inline cudaError_t cudaFuncSetAttribute(F f, cudaFuncAttribute a, int v)
{
	(void)f;
	(void)a;
	(void)v;
	return cudaSuccess;
}

/* float -> binary16, round to nearest even (overflow to infinity, subnormals, NaN kept) */
static inline __half __float2half_rn(float f)
{
	uint32_t u;
	std::memcpy(&u, &f, 4);
	const uint32_t sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
	__half h;

	if (a >= 0x7f800000u) { /* inf or NaN */
		h.bits = (uint16_t)(sign | 0x7c00u | (a > 0x7f800000u ? 0x200u : 0u));
		return h;
	}
	if (a >= 0x477ff000u) { /* rounds to >= 65520: infinity */
		h.bits = (uint16_t)(sign | 0x7c00u);
		return h;
	}
	if (a < 0x38800000u) { /* below 2^-14: a subnormal half, units of 2^-24 */
		float m;
		std::memcpy(&m, &a, 4);
		h.bits = (uint16_t)(sign | (uint32_t)std::nearbyint(m * 0x1p24f));
		return h;
	}
	/* normal: drop 13 mantissa bits, ties to even (a carry into the exponent is right) */
	const uint32_t r = a + 0xfffu + ((a >> 13) & 1u);
	h.bits = (uint16_t)(sign | ((r - 0x38000000u) >> 13));
	return h;
}

static inline __half2 __floats2half2_rn(float a, float b)
{
	return __half2{ __float2half_rn(a), __float2half_rn(b) };
}

namespace simt {

struct builtins {
	uint3 thread_idx, block_idx;
	dim3 block_dim, grid_dim;
};

/* the record threadIdx & co. read (see the header comment) */
inline builtins regs;
inline cudaError_t last_error = cudaSuccess;

/* Fiber-side primitives: called only from inside a running kernel. */
void sync_block();
void sync_warp();
/* Exchanges 8 bytes with lane `src` of the caller's warp: every live lane of the warp calls
 * this together. src outside 0..31 returns the caller's own value. */
uint64_t warp_exchange(uint64_t mine, int src);
/* The launch's dynamic shared memory (the byte count given to the launch, 16-byte aligned). */
void *dyn_shared();

/* Runs body(ctx) once per thread of every block; blocks in x-fastest order. Returns
 * cudaErrorInvalidConfiguration (and runs nothing) for an empty or oversized geometry. */
cudaError_t execute(dim3 grid, dim3 block, size_t dyn_bytes, void (*body)(void *), void *ctx);

struct launch {
	dim3 grid, block;
	size_t dyn_bytes;

	/* in stream order: a launch on the legacy stream (nullptr) comes after that stream's
	 * pending copies (nscuda_emu.c), one on a non-blocking stream does not */
	launch(dim3 g, dim3 b, size_t sm = 0, cudaStream_t s = nullptr)
		: grid(g), block(b), dyn_bytes(sm) { ns_emu_launch_order(s); }

	/* the kernel's parameters are converted once, as the launch copies them, and each
	 * thread gets its own copy, as each CUDA thread gets its own registers */
	template <class... P, class... A> void run(void (*k)(P...), A &&...a)
	{
		struct call {
			void (*k)(P...);
			std::tuple<P...> args;
		} c{ k, std::tuple<P...>(std::forward<A>(a)...) };
		auto body = [](void *p) {
			call *cp = static_cast<call *>(p);
			std::tuple<P...> mine = cp->args;
			std::apply(cp->k, mine);
		};
		const cudaError_t e = execute(grid, block, dyn_bytes, body, &c);
		if (e != cudaSuccess)
			last_error = e;
	}
};

template <class T> static inline T shuffle(T v, int src)
{
	static_assert(sizeof(T) <= 8, "simt: shuffles move at most 8 bytes");
	uint64_t b = 0;
	std::memcpy(&b, &v, sizeof(T));
	b = warp_exchange(b, src);
	T r;
	std::memcpy(&r, &b, sizeof(T));
	return r;
}

static inline int lane_id() { return (int)(regs.thread_idx.x % 32u); }

void check_mask(unsigned mask);

/* bar.sync id, count: the first `count` threads to arrive at named barrier id (1..15; 0 is
 * __syncthreads) go on together. */
void named_barrier(unsigned id, unsigned count);

/* cp.async's effect, at once: n (0..16) bytes from src, the rest of the 16 zero-filled. */
static inline void cp_async16(void *dst, const void *src, uint32_t n)
{
	std::memcpy(dst, src, n);
	std::memset(static_cast<unsigned char *>(dst) + n, 0, 16 - n);
}

} /* namespace simt */

#define threadIdx (::simt::regs.thread_idx)
#define blockIdx (::simt::regs.block_idx)
#define blockDim (::simt::regs.block_dim)
#define gridDim (::simt::regs.grid_dim)

static inline void __syncthreads() { ::simt::sync_block(); }
static inline void __syncwarp(unsigned mask = 0xffffffffu)
{
	::simt::check_mask(mask);
	::simt::sync_warp();
}

template <class T> static inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32)
{
	::simt::check_mask(mask);
	const int lane = ::simt::lane_id();
	return ::simt::shuffle(v, (lane & ~(width - 1)) | ((lane ^ lane_mask) & (width - 1)));
}

template <class T> static inline T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32)
{
	::simt::check_mask(mask);
	const int lane = ::simt::lane_id(), base = lane & ~(width - 1);
	const int src = lane + (int)delta;
	return ::simt::shuffle(v, src < base + width ? src : lane);
}

template <class T> static inline T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32)
{
	::simt::check_mask(mask);
	const int lane = ::simt::lane_id(), base = lane & ~(width - 1);
	const int src = lane - (int)delta;
	return ::simt::shuffle(v, src >= base ? src : lane);
}

template <class T> static inline T __shfl_sync(unsigned mask, T v, int src, int width = 32)
{
	::simt::check_mask(mask);
	const int lane = ::simt::lane_id();
	return ::simt::shuffle(v, (lane & ~(width - 1)) | (src & (width - 1)));
}

template <class T> static inline T __ldg(const T *p) { return *p; }

/* fibers never run at once: read-modify-write is atomic by construction */
template <class T> static inline T atomicAdd(T *p, T v) { T o = *p; *p = o + v; return o; }
template <class T> static inline T atomicMax(T *p, T v) { T o = *p; *p = o > v ? o : v; return o; }

static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline float __frcp_rn(float a) { return 1.0f / a; }
static inline float __fsqrt_rn(float a) { return std::sqrt(a); }
static inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
static inline float rsqrtf(float a) { return 1.0f / std::sqrt(a); }
static inline double __dadd_rn(double a, double b) { return a + b; }

static inline int __float_as_int(float f) { int i; std::memcpy(&i, &f, 4); return i; }
static inline uint32_t __float_as_uint(float f) { uint32_t i; std::memcpy(&i, &f, 4); return i; }

/* dp4a.s32.s32: c + the sum of the products of the four signed bytes of a and b (int32
 * arithmetic, wrapping as the hardware's) */
static inline int __dp4a(int a, int b, int c)
{
	uint32_t s = (uint32_t)c;

	for (int k = 0; k < 4; k++)
		s += (uint32_t)((int)(int8_t)(a >> (8 * k)) * (int)(int8_t)(b >> (8 * k)));
	return (int)s;
}

/* shf.r.wrap: the low 32 bits of (hi:lo) >> (shift & 31) */
static inline uint32_t __funnelshift_r(uint32_t lo, uint32_t hi, uint32_t shift)
{
	const uint64_t v = (uint64_t)hi << 32 | lo;
	return (uint32_t)(v >> (shift & 31));
}

static inline cudaError_t cudaPeekAtLastError() { return ::simt::last_error; }
static inline cudaError_t cudaGetLastError()
{
	const cudaError_t e = ::simt::last_error;
	::simt::last_error = cudaSuccess;
	return e;
}

#endif
