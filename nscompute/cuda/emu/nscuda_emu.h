/* nscuda_emu.h - constants of the host emulation of nscuda.h (nscompute/cuda/emu, not
 * installed). The emulation implements every function of nscuda.h on the CPU so that code
 * written against that API (the CUDA forward pass) can be tested without a GPU. */
#ifndef NS_CUDA_EMU_H
#define NS_CUDA_EMU_H

/* The emulated device's memory: what ns_cuda_device_info reports as total and free, and what
 * ns_vram_new's refusals compare against. Nothing of it is allocated up front. */
#define NS_EMU_MEM_BYTES (16ull << 30)

/* ns_vram_new(budget = 0) would take "free minus reserve", almost 16 GiB; the emulation caps
 * that automatic budget at 1 GiB (an explicit budget is taken as asked, up to 16 GiB). The
 * arena is mmap'd without reserve either way, so only touched pages cost host memory. */
#define NS_EMU_AUTO_BUDGET (1ull << 30)

/* Byte written over fresh ns_cuda_malloc / ns_vram_alloc memory: floats read before being
 * written are NaN, int32 are -1 (cudaMalloc does not clear memory either). */
#define NS_EMU_POISON 0xFF

#include "nscuda.h"

/* The legacy default stream's pending ns_cuda_h2d copies (nscuda_emu.c) land now. */
void ns_emu_legacy_order(void);
/* Called by every emulated launch on stream s: a launch on the legacy stream (NULL) comes
 * after that stream's copies; one on a non-blocking stream does not wait for them. */
void ns_emu_launch_order(ns_cuda_stream_t s);

#endif
