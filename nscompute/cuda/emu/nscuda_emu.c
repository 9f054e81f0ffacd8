/* nscuda_emu.c - the device half of nscuda.h emulated on the host: one "device", memory,
 * copies, streams, events, graphs (unavailable) and struct ns_vram (see emu/README.md for what
 * differs from CUDA).
 *
 * "Device memory" is host memory, so dev_* pointers may be read directly by the host (the real
 * backend's callers must not). Every call runs synchronously: a launch or copy has finished
 * when it returns, streams and events are bookkeeping only, except that ns_cuda_h2d's bytes
 * land in legacy-stream order (below). No CUDA header is included. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "ns_util.h"
#include "nscuda.h"
#include "nscuda_internal.h"
#include "nscuda_emu.h"

/* ---------------------------------------------------------------- device --------------- */

int ns_cuda_device_count(void)
{
	return 1;
}

const char *ns_cuda_last_error(void)
{
	return "no error (cpu emulation: calls complete synchronously)";
}

int ns_cuda_init(int dev, char *err, size_t errlen)
{
	if (dev != 0) {
		ns_errf(err, errlen, "cuda: device %d does not exist (1 found)", dev);
		return -ENODEV;
	}
	return 0;
}

int ns_cuda_device_info(int dev, struct ns_cuda_devinfo *out, char *err, size_t errlen)
{
	memset(out, 0, sizeof(*out));
	if (dev != 0) {
		ns_errf(err, errlen, "cuda: properties of device %d: invalid device ordinal", dev);
		return -ENODEV;
	}
	snprintf(out->name, sizeof(out->name), "cpu-emulation");
	out->cc_major = 0;
	out->cc_minor = 0;
	out->n_sm = 1;
	out->total_bytes = NS_EMU_MEM_BYTES;
	out->free_bytes = NS_EMU_MEM_BYTES;
	out->l2_bytes = 0;
	out->smem_optin = 0;
	return 0;
}

/* ---------------------------------------------------------------- memory --------------- */

int ns_cuda_malloc(void **dev_p, size_t bytes, char *err, size_t errlen)
{
	size_t n = bytes ? bytes : 1;
	char b[32];

	*dev_p = NULL;
	if (n > SIZE_MAX - NS_RANGE_ALIGN || n > NS_EMU_MEM_BYTES) {
		ns_errf(err, errlen, "cuda: cannot allocate %s of device memory: out of memory "
			"(emulated device of %s)", ns_format_bytes(bytes, b, sizeof(b)),
			"16 GiB");
		return -ENOMEM;
	}
	n = (n + NS_RANGE_ALIGN - 1) / NS_RANGE_ALIGN * NS_RANGE_ALIGN;
	*dev_p = aligned_alloc(NS_RANGE_ALIGN, n);
	if (!*dev_p) {
		ns_errf(err, errlen, "cuda: cannot allocate %s of device memory: out of host memory "
			"(cpu emulation)", ns_format_bytes(bytes, b, sizeof(b)));
		return -ENOMEM;
	}
	memset(*dev_p, NS_EMU_POISON, n); /* never zero: cudaMalloc does not clear either */
	return 0;
}

/* ---------------------------------------------------------------- the legacy stream ---- */

/* ns_cuda_h2d is cudaMemcpy from pageable memory: it returns once the bytes are staged, and
 * they reach device memory in the order of the legacy default stream, which the streams of
 * ns_cuda_stream_new (non-blocking) do not wait for. The emulation keeps such copies pending
 * until something orders them: the next operation on the legacy stream (a copy, a memset, a
 * launch or record with s == NULL), ns_cuda_sync, ns_cuda_stream_sync(NULL), ns_cuda_free
 * (cudaFree synchronizes the device). A kernel launched on a non-blocking stream before then
 * reads what was there before, as it may on a GPU: callers must upload on their stream
 * (ns_cuda_copy_h2d_async) or synchronize first. Process-wide, as the driver's stream is. */
struct s_pending {
	void *dst;
	size_t bytes;
	unsigned char data[]; /* the staged bytes */
};

static struct s_pending **s_pend;
static size_t s_n_pend, s_cap_pend;
static pthread_mutex_t s_pend_mu = PTHREAD_MUTEX_INITIALIZER;

void ns_emu_legacy_order(void)
{
	pthread_mutex_lock(&s_pend_mu);
	for (size_t i = 0; i < s_n_pend; i++) {
		memcpy(s_pend[i]->dst, s_pend[i]->data, s_pend[i]->bytes);
		free(s_pend[i]);
	}
	s_n_pend = 0;
	free(s_pend);
	s_pend = NULL;
	s_cap_pend = 0;
	pthread_mutex_unlock(&s_pend_mu);
}

void ns_emu_launch_order(ns_cuda_stream_t s)
{
	if (!s)
		ns_emu_legacy_order();
}

/* Queue a staged copy; 1 when it could not be queued (no memory: the caller copies now,
 * which only makes the emulation less strict). */
static int s_pend_push(void *dst, const void *src, size_t bytes)
{
	struct s_pending *p = malloc(sizeof(*p) + bytes);
	int rc = 1;

	if (!p)
		return 1;
	p->dst = dst;
	p->bytes = bytes;
	memcpy(p->data, src, bytes);
	pthread_mutex_lock(&s_pend_mu);
	if (s_n_pend == s_cap_pend) {
		size_t cap = s_cap_pend ? 2 * s_cap_pend : 16;
		struct s_pending **q = realloc(s_pend, cap * sizeof(*q));

		if (q) {
			s_pend = q;
			s_cap_pend = cap;
		}
	}
	if (s_n_pend < s_cap_pend) {
		s_pend[s_n_pend++] = p;
		rc = 0;
	}
	pthread_mutex_unlock(&s_pend_mu);
	if (rc)
		free(p);
	return rc;
}

void ns_cuda_free(void *dev_p)
{
	ns_emu_legacy_order(); /* cudaFree waits for the device: nothing lands in freed memory */
	free(dev_p);
}

int ns_cuda_h2d(void *dev_dst, const void *src, size_t bytes)
{
	if (bytes && (!dev_dst || !src))
		return -EINVAL;
	if (bytes && s_pend_push(dev_dst, src, bytes))
		memmove(dev_dst, src, bytes);
	return 0;
}

/* A copy in stream s that has finished when it returns (after the legacy stream's earlier
 * copies when s is the legacy stream). */
static int s_copy_now(void *dst, const void *src, size_t bytes, ns_cuda_stream_t s)
{
	if (bytes && (!dst || !src))
		return -EINVAL;
	ns_emu_launch_order(s);
	if (bytes)
		memmove(dst, src, bytes);
	return 0;
}

int ns_cuda_d2h(void *dst, const void *dev_src, size_t bytes)
{
	return s_copy_now(dst, dev_src, bytes, NULL);
}

int ns_cuda_d2d_async(void *dev_dst, const void *dev_src, size_t bytes, ns_cuda_stream_t s)
{
	return s_copy_now(dev_dst, dev_src, bytes, s);
}

int ns_cuda_memset(void *dev_p, int byte, size_t bytes)
{
	if (bytes && !dev_p)
		return -EINVAL;
	ns_emu_legacy_order();
	if (bytes)
		memset(dev_p, byte, bytes);
	return 0;
}

int ns_cuda_memset_async(void *dev_p, int byte, size_t bytes, ns_cuda_stream_t s)
{
	if (bytes && !dev_p)
		return -EINVAL;
	ns_emu_launch_order(s);
	if (bytes)
		memset(dev_p, byte, bytes);
	return 0;
}

int ns_cuda_sync(void)
{
	ns_emu_legacy_order();
	return 0;
}

/* ---------------------------------------------------------------- streams, events ------ */

/* The opaque handle types of nscuda.h, given a body here (no CUDA headers in the emulation). */
struct CUstream_st {
	uint32_t magic;
};

struct CUevent_st {
	uint32_t magic;
	bool recorded;
	uint64_t t_ns; /* host clock when recorded: work before it has finished by then */
};

#define S_STREAM_MAGIC 0x5354524du /* "STRM" */
#define S_EVENT_MAGIC 0x45564e54u  /* "EVNT" */

int ns_cuda_stream_new(ns_cuda_stream_t *out)
{
	struct CUstream_st *s = calloc(1, sizeof(*s));

	*out = NULL;
	if (!s)
		return -ENOMEM;
	s->magic = S_STREAM_MAGIC;
	*out = s;
	return 0;
}

void ns_cuda_stream_destroy(ns_cuda_stream_t *s)
{
	if (s && *s) {
		(*s)->magic = 0;
		free(*s);
		*s = NULL;
	}
}

/* NULL is the legacy default stream; anything else must be a live stream. */
static int s_stream_ok(ns_cuda_stream_t s)
{
	return !s || s->magic == S_STREAM_MAGIC ? 0 : -EINVAL;
}

int ns_cuda_stream_sync(ns_cuda_stream_t s)
{
	ns_emu_launch_order(s);
	return s_stream_ok(s);
}

/* The page-locked ranges, as the driver keeps them: process-wide, like the real driver's table
 * (the emulation stands in for that one device context). Registration changes nothing else
 * here; ns_cuda_host_pinned answers from this table so callers' choices are testable. */
#define S_MAX_LOCKED 64
static struct { uintptr_t base, end; } s_locked[S_MAX_LOCKED];
static unsigned s_n_locked;
static pthread_mutex_t s_locked_mu = PTHREAD_MUTEX_INITIALIZER;

int ns_cuda_host_register(void *p, size_t bytes, char *err, size_t errlen)
{
	const uintptr_t b = (uintptr_t)p;
	int rc = 0;

	if (!p || !bytes || b + bytes < b) {
		ns_errf(err, errlen, "cuda: cannot page-lock %zu bytes of host memory at %p: "
			"invalid argument", bytes, p);
		return -EINVAL;
	}
	pthread_mutex_lock(&s_locked_mu);
	for (unsigned i = 0; i < s_n_locked && rc == 0; i++)
		if (b < s_locked[i].end && s_locked[i].base < b + bytes)
			rc = -EEXIST; /* cudaErrorHostMemoryAlreadyRegistered */
	if (rc == 0 && s_n_locked == S_MAX_LOCKED)
		rc = -ENOMEM;
	if (rc == 0) {
		s_locked[s_n_locked].base = b;
		s_locked[s_n_locked].end = b + bytes;
		s_n_locked++;
	}
	pthread_mutex_unlock(&s_locked_mu);
	if (rc)
		ns_errf(err, errlen, "cuda: cannot page-lock %zu bytes of host memory at %p: %s",
			bytes, p, rc == -EEXIST ? "part of it is already registered"
						: "too many registered ranges");
	return rc;
}

int ns_cuda_host_register_ro(const void *p, size_t bytes, char *err, size_t errlen)
{
	return ns_cuda_host_register((void *)p, bytes, err, errlen);
}

int ns_cuda_host_unregister(void *p)
{
	int rc = -EINVAL; /* cudaErrorHostMemoryNotRegistered: p must be a registered base */

	pthread_mutex_lock(&s_locked_mu);
	for (unsigned i = 0; i < s_n_locked; i++)
		if (s_locked[i].base == (uintptr_t)p) {
			s_locked[i] = s_locked[--s_n_locked];
			rc = 0;
			break;
		}
	pthread_mutex_unlock(&s_locked_mu);
	return rc;
}

int ns_cuda_host_pinned(const void *p)
{
	int pinned = 0;

	pthread_mutex_lock(&s_locked_mu);
	for (unsigned i = 0; i < s_n_locked && !pinned; i++)
		pinned = (uintptr_t)p >= s_locked[i].base && (uintptr_t)p < s_locked[i].end;
	pthread_mutex_unlock(&s_locked_mu);
	return pinned;
}

int ns_cuda_event_new(ns_cuda_event_t *out)
{
	struct CUevent_st *e = calloc(1, sizeof(*e));

	*out = NULL;
	if (!e)
		return -ENOMEM;
	e->magic = S_EVENT_MAGIC;
	*out = e;
	return 0;
}

void ns_cuda_event_destroy(ns_cuda_event_t *e)
{
	if (e && *e) {
		(*e)->magic = 0;
		free(*e);
		*e = NULL;
	}
}

static int s_event_ok(ns_cuda_event_t e)
{
	return e && e->magic == S_EVENT_MAGIC ? 0 : -EINVAL;
}

int ns_cuda_event_record(ns_cuda_event_t e, ns_cuda_stream_t s)
{
	int rc = s_event_ok(e);

	if (rc || (rc = s_stream_ok(s)))
		return rc;
	ns_emu_launch_order(s);
	e->recorded = true;
	e->t_ns = ns_now_ns();
	return 0;
}

int ns_cuda_copy_h2d_async(void *dev_dst, const void *src, size_t bytes, ns_cuda_stream_t s,
			   ns_cuda_event_t done)
{
	int rc = s_stream_ok(s);

	if (rc || (rc = s_copy_now(dev_dst, src, bytes, s)))
		return rc;
	return done ? ns_cuda_event_record(done, s) : 0;
}

int ns_cuda_stream_wait(ns_cuda_stream_t s, ns_cuda_event_t e)
{
	int rc = s_stream_ok(s);

	return rc ? rc : s_event_ok(e);
}

int ns_cuda_event_sync(ns_cuda_event_t e)
{
	return s_event_ok(e);
}

int ns_cuda_event_done(ns_cuda_event_t e)
{
	int rc = s_event_ok(e);

	return rc ? rc : 1; /* never-recorded events count as done, as in CUDA */
}

int ns_cuda_event_ms(ns_cuda_event_t a, ns_cuda_event_t b, float *ms)
{
	int rc = s_event_ok(a);

	if (rc || (rc = s_event_ok(b)))
		return rc;
	if (!ms || !a->recorded || !b->recorded)
		return -EINVAL; /* CUDA: cudaErrorInvalidResourceHandle */
	/* host time between the two records (work runs synchronously, so this is its cost) */
	*ms = (float)(((double)b->t_ns - (double)a->t_ns) / 1e6);
	return 0;
}

/* ---------------------------------------------------------------- VRAM ----------------- */

int ns_vram_new(uint64_t budget, uint64_t reserve, struct ns_vram **out, char *err,
		size_t errlen)
{
	const uint64_t fr = NS_EMU_MEM_BYTES, tot = NS_EMU_MEM_BYTES;
	const bool automatic = budget == 0;
	struct ns_vram *v;
	char b1[32], b2[32], b3[32];
	void *m;
	int rc;

	*out = NULL;
	if ((rc = ns_vram_resolve_budget(&budget, reserve, fr, tot, err, errlen)))
		return rc;
	if (automatic && budget > NS_EMU_AUTO_BUDGET)
		budget = NS_EMU_AUTO_BUDGET; /* emulation: see NS_EMU_AUTO_BUDGET */
	/* poisoned: reads before writes show up as NaN */
	if ((rc = ns_vram_bookkeeping_new(budget, NS_EMU_POISON, &v, err, errlen)))
		return rc;
	v->map_bytes = budget ? (size_t)budget : NS_RANGE_ALIGN;
	/* reserved, not committed: a large budget costs only the pages actually touched */
	m = mmap(NULL, v->map_bytes, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED) {
		ns_errf(err, errlen, "cuda: cannot allocate the VRAM budget of %s (%s free of %s): "
			"out of host memory (cpu emulation)", ns_format_bytes(budget, b1, sizeof(b1)),
			ns_format_bytes(fr, b2, sizeof(b2)), ns_format_bytes(tot, b3, sizeof(b3)));
		ns_vram_bookkeeping_free(v);
		return -ENOMEM;
	}
	v->base = m;
	*out = v;
	return 0;
}

void ns_vram_destroy(struct ns_vram **pv)
{
	struct ns_vram *v;

	if (!pv || !*pv)
		return;
	v = *pv;
	ns_emu_legacy_order(); /* cudaFree of the arena waits for the device */
	(void)munmap(v->base, v->map_bytes);
	ns_vram_bookkeeping_free(v);
	*pv = NULL;
}

/* Every call runs at once here, so there is nothing to record: graphs are not available and
 * the caller takes its plain path. */
int ns_cuda_graph_begin(ns_cuda_stream_t s)
{
	(void)s;
	return -ENOTSUP;
}

int ns_cuda_graph_end(ns_cuda_stream_t s, ns_cuda_graph_t *out)
{
	(void)s;
	*out = NULL;
	return -ENOTSUP;
}

int ns_cuda_graph_launch(ns_cuda_graph_t g, ns_cuda_stream_t s)
{
	(void)g;
	(void)s;
	return -ENOTSUP;
}

void ns_cuda_graph_destroy(ns_cuda_graph_t *g)
{
	if (g)
		*g = NULL;
}
