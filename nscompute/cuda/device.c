/* device.c - device discovery, plain allocations, streams, events and transfers (nscuda.h).
 *
 * Host code in C against the CUDA runtime's C API. Any runtime failure becomes -EIO (-ENODEV
 * when there is no usable device), never an abort; ns_cuda_last_error() names the cause. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "ns_util.h"
#include "nscuda.h"
#include "nscuda_internal.h"

int ns_cuda_device_count(void)
{
	int n = 0;
	cudaError_t e = cudaGetDeviceCount(&n);

	if (e != cudaSuccess) {
		/* cudaErrorNoDevice, cudaErrorInsufficientDriver, no libcuda...: no GPU here */
		(void)cudaGetLastError();
		return 0;
	}
	return n < 0 ? 0 : n;
}

int ns_cuda_rc(int e)
{
	switch ((cudaError_t)e) {
	case cudaSuccess:
		return 0;
	case cudaErrorNoDevice:
	case cudaErrorInsufficientDriver:
	case cudaErrorInvalidDevice:
		return -ENODEV;
	case cudaErrorMemoryAllocation:
		return -ENOMEM;
	case cudaErrorInvalidValue:
		return -EINVAL;
	default:
		return -EIO;
	}
}

const char *ns_cuda_last_error(void)
{
	return cudaGetErrorString(cudaPeekAtLastError());
}

int ns_cuda_init(int dev, char *err, size_t errlen)
{
	int n = ns_cuda_device_count();
	cudaError_t e;

	if (dev < 0 || dev >= n) {
		ns_errf(err, errlen, "cuda: device %d does not exist (%d found)", dev, n);
		return -ENODEV;
	}
	e = cudaSetDevice(dev);
	if (e == cudaSuccess)
		e = cudaFree(NULL); /* creates the context now, not at the first kernel */
	if (e != cudaSuccess) {
		ns_errf(err, errlen, "cuda: initialising device %d: %s", dev, cudaGetErrorString(e));
		return ns_cuda_rc(e);
	}
	return 0;
}

int ns_cuda_device_info(int dev, struct ns_cuda_devinfo *out, char *err, size_t errlen)
{
	struct cudaDeviceProp p;
	size_t fr = 0, tot = 0;
	cudaError_t e;
	int v = 0;

	memset(out, 0, sizeof(*out));
	e = cudaGetDeviceProperties(&p, dev);
	if (e != cudaSuccess) {
		ns_errf(err, errlen, "cuda: properties of device %d: %s", dev, cudaGetErrorString(e));
		return ns_cuda_rc(e);
	}
	snprintf(out->name, sizeof(out->name), "%s", p.name);
	out->cc_major = p.major;
	out->cc_minor = p.minor;
	out->n_sm = p.multiProcessorCount;
	out->total_bytes = p.totalGlobalMem;
	out->l2_bytes = (uint64_t)(p.l2CacheSize > 0 ? p.l2CacheSize : 0);
	out->smem_optin = p.sharedMemPerBlockOptin;
	if (cudaDeviceGetAttribute(&v, cudaDevAttrMemoryClockRate, dev) == cudaSuccess)
		out->mem_clock_khz = v;
	if (cudaDeviceGetAttribute(&v, cudaDevAttrGlobalMemoryBusWidth, dev) == cudaSuccess)
		out->mem_bus_bits = v;
	(void)cudaGetLastError();
	if (cudaMemGetInfo(&fr, &tot) == cudaSuccess)
		out->free_bytes = fr;
	(void)cudaGetLastError();
	return 0;
}

int ns_cuda_malloc(void **dev_p, size_t bytes, char *err, size_t errlen)
{
	cudaError_t e = cudaMalloc(dev_p, bytes ? bytes : 1);

	if (e != cudaSuccess) {
		char b[32];

		*dev_p = NULL;
		ns_format_bytes(bytes, b, sizeof(b));
		ns_errf(err, errlen, "cuda: cannot allocate %s of device memory: %s", b,
			cudaGetErrorString(e));
		(void)cudaGetLastError();
		return ns_cuda_rc(e);
	}
	return 0;
}

void ns_cuda_free(void *dev_p)
{
	if (dev_p)
		(void)cudaFree(dev_p);
}

int ns_cuda_h2d(void *dev_dst, const void *src, size_t bytes)
{
	return ns_cuda_rc(cudaMemcpy(dev_dst, src, bytes, cudaMemcpyHostToDevice));
}

int ns_cuda_d2h(void *dst, const void *dev_src, size_t bytes)
{
	return ns_cuda_rc(cudaMemcpy(dst, dev_src, bytes, cudaMemcpyDeviceToHost));
}

int ns_cuda_d2d_async(void *dev_dst, const void *dev_src, size_t bytes, ns_cuda_stream_t s)
{
	return ns_cuda_rc(cudaMemcpyAsync(dev_dst, dev_src, bytes, cudaMemcpyDeviceToDevice,
					  (cudaStream_t)s));
}

int ns_cuda_memset(void *dev_p, int byte, size_t bytes)
{
	return ns_cuda_rc(cudaMemset(dev_p, byte, bytes));
}

int ns_cuda_memset_async(void *dev_p, int byte, size_t bytes, ns_cuda_stream_t s)
{
	return ns_cuda_rc(cudaMemsetAsync(dev_p, byte, bytes, (cudaStream_t)s));
}

int ns_cuda_sync(void)
{
	return ns_cuda_rc(cudaDeviceSynchronize());
}

int ns_cuda_stream_new(ns_cuda_stream_t *out)
{
	cudaStream_t s = NULL;
	int rc = ns_cuda_rc(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

	*out = rc ? NULL : (ns_cuda_stream_t)s;
	return rc;
}

void ns_cuda_stream_destroy(ns_cuda_stream_t *s)
{
	if (s && *s) {
		(void)cudaStreamDestroy((cudaStream_t)*s);
		*s = NULL;
	}
}

int ns_cuda_graph_begin(ns_cuda_stream_t s)
{
	return ns_cuda_rc(cudaStreamBeginCapture((cudaStream_t)s,
						 cudaStreamCaptureModeThreadLocal));
}

int ns_cuda_graph_end(ns_cuda_stream_t s, ns_cuda_graph_t *out)
{
	cudaGraph_t g = NULL;
	cudaGraphExec_t x = NULL;
	int rc = ns_cuda_rc(cudaStreamEndCapture((cudaStream_t)s, &g));

	*out = NULL;
	if (rc == 0)
		rc = ns_cuda_rc(cudaGraphInstantiate(&x, g, 0));
	if (g)
		(void)cudaGraphDestroy(g);
	if (rc == 0)
		*out = (ns_cuda_graph_t)x;
	else
		(void)cudaGetLastError();
	return rc;
}

int ns_cuda_graph_launch(ns_cuda_graph_t g, ns_cuda_stream_t s)
{
	return ns_cuda_rc(cudaGraphLaunch((cudaGraphExec_t)g, (cudaStream_t)s));
}

void ns_cuda_graph_destroy(ns_cuda_graph_t *g)
{
	if (g && *g) {
		(void)cudaGraphExecDestroy((cudaGraphExec_t)*g);
		*g = NULL;
	}
}

int ns_cuda_stream_sync(ns_cuda_stream_t s)
{
	return ns_cuda_rc(cudaStreamSynchronize((cudaStream_t)s));
}

/* ---------------------------------------------------------------- transfers ------------ */

static int s_register(void *p, size_t bytes, unsigned flags, char *err, size_t errlen)
{
	cudaError_t e = cudaHostRegister(p, bytes, flags);

	if (e != cudaSuccess) {
		char b[32];

		ns_format_bytes(bytes, b, sizeof(b));
		ns_errf(err, errlen, "cuda: cannot page-lock %s of host memory at %p: %s", b, p,
			cudaGetErrorString(e));
		(void)cudaGetLastError();
		return ns_cuda_rc(e);
	}
	return 0;
}

int ns_cuda_host_register(void *p, size_t bytes, char *err, size_t errlen)
{
	return s_register(p, bytes, cudaHostRegisterDefault, err, errlen);
}

int ns_cuda_host_register_ro(const void *p, size_t bytes, char *err, size_t errlen)
{
	return s_register((void *)p, bytes, cudaHostRegisterReadOnly, err, errlen);
}

int ns_cuda_host_unregister(void *p)
{
	return ns_cuda_rc(cudaHostUnregister(p));
}

int ns_cuda_host_pinned(const void *p)
{
	struct cudaPointerAttributes a;
	cudaError_t e = cudaPointerGetAttributes(&a, p);

	if (e != cudaSuccess)
		return ns_cuda_rc(e);
	return a.type == cudaMemoryTypeHost;
}

int ns_cuda_event_new(ns_cuda_event_t *out)
{
	cudaEvent_t e = NULL;
	int rc = ns_cuda_rc(cudaEventCreate(&e));

	*out = rc ? NULL : (ns_cuda_event_t)e;
	return rc;
}

void ns_cuda_event_destroy(ns_cuda_event_t *e)
{
	if (e && *e) {
		(void)cudaEventDestroy((cudaEvent_t)*e);
		*e = NULL;
	}
}

int ns_cuda_copy_h2d_async(void *dev_dst, const void *src, size_t bytes, ns_cuda_stream_t s,
			   ns_cuda_event_t done)
{
	int rc = ns_cuda_rc(cudaMemcpyAsync(dev_dst, src, bytes, cudaMemcpyHostToDevice,
					    (cudaStream_t)s));

	if (rc == 0 && done)
		rc = ns_cuda_rc(cudaEventRecord((cudaEvent_t)done, (cudaStream_t)s));
	return rc;
}

int ns_cuda_stream_wait(ns_cuda_stream_t s, ns_cuda_event_t e)
{
	return ns_cuda_rc(cudaStreamWaitEvent((cudaStream_t)s, (cudaEvent_t)e, 0));
}

int ns_cuda_event_record(ns_cuda_event_t e, ns_cuda_stream_t s)
{
	return ns_cuda_rc(cudaEventRecord((cudaEvent_t)e, (cudaStream_t)s));
}

int ns_cuda_event_sync(ns_cuda_event_t e)
{
	return ns_cuda_rc(cudaEventSynchronize((cudaEvent_t)e));
}

int ns_cuda_event_done(ns_cuda_event_t e)
{
	cudaError_t r = cudaEventQuery((cudaEvent_t)e);

	if (r == cudaSuccess)
		return 1;
	if (r == cudaErrorNotReady) {
		(void)cudaGetLastError();
		return 0;
	}
	return ns_cuda_rc(r);
}

int ns_cuda_event_ms(ns_cuda_event_t a, ns_cuda_event_t b, float *ms)
{
	return ns_cuda_rc(cudaEventElapsedTime(ms, (cudaEvent_t)a, (cudaEvent_t)b));
}
