/* test_cuda_vram: the VRAM arena takes exactly its budget, refuses what does not fit with
 * figures (never aborts), refuses a budget beyond the free memory, and the async copy helper
 * moves registered host memory through events. Exit 77 without a GPU. */
#include <errno.h>
#include <string.h>

#include "cuda_test.h"

int main(void)
{
	struct ns_vram *v = NULL;
	char err[512];
	void *a, *b, *c;

	ct_init("cuda_vram");
	if (ns_vram_new(64 << 20, 0, &v, err, sizeof(err)))
		CT_FAIL("%s", err);
	if (ns_vram_budget(v) != 64 << 20)
		CT_FAIL("budget %llu", (unsigned long long)ns_vram_budget(v));
	if (ns_vram_alloc(v, 40 << 20, &a, err, sizeof(err)) ||
	    ns_vram_alloc(v, 20 << 20, &b, err, sizeof(err)))
		CT_FAIL("%s", err);
	if (ns_vram_alloc(v, 8 << 20, &c, err, sizeof(err)) != -ENOMEM || !strstr(err, "MiB"))
		CT_FAIL("overflowing allocation not refused with figures: '%s'", err);
	printf("refusal: %s\n", err);
	if (ns_vram_release(v, a) || ns_vram_alloc(v, 8 << 20, &c, err, sizeof(err)))
		CT_FAIL("reuse after release: %s", err);
	if (ns_vram_release(v, (char *)b + 1) != -EINVAL)
		CT_FAIL("foreign pointer released");
	/* the memory is real: write and read back through an async copy and events */
	enum { N = 1 << 20 };
	uint8_t *h = malloc(N), *back = malloc(N);
	ns_cuda_stream_t cs = NULL;
	ns_cuda_event_t ev = NULL;
	for (int i = 0; i < N; i++)
		h[i] = (uint8_t)(i * 7);
	if (ns_cuda_host_pinned(h + N / 2) != 0)
		CT_FAIL("malloc'd memory reported page-locked");
	CT_CHECK(ns_cuda_host_register(h, N, err, sizeof(err)));
	if (ns_cuda_host_pinned(h) != 1 || ns_cuda_host_pinned(h + N / 2) != 1)
		CT_FAIL("registered memory not reported page-locked");
	CT_CHECK(ns_cuda_stream_new(&cs));
	CT_CHECK(ns_cuda_event_new(&ev));
	CT_CHECK(ns_cuda_copy_h2d_async(c, h, N, cs, ev));
	CT_CHECK(ns_cuda_stream_wait(NULL, ev));
	CT_CHECK(ns_cuda_event_sync(ev));
	if (ns_cuda_event_done(ev) != 1)
		CT_FAIL("event not done after sync");
	ct_download(back, c, N);
	if (memcmp(back, h, N))
		CT_FAIL("copy through the arena differs");
	CT_CHECK(ns_cuda_host_unregister(h));
	if (ns_cuda_host_pinned(h + N / 2) != 0)
		CT_FAIL("unregistered memory still reported page-locked");
	ns_cuda_event_destroy(&ev);
	ns_cuda_stream_destroy(&cs);
	ns_vram_destroy(&v);
	if (v)
		CT_FAIL("destroy did not null");
	/* a budget beyond the device */
	if (ns_vram_new(1ull << 50, 0, &v, err, sizeof(err)) != -ENOMEM || v)
		CT_FAIL("1 PiB budget accepted");
	printf("refusal: %s\nvram: ok\n", err);
	free(h);
	free(back);
	return 0;
}
