/* test_range: the offset allocator behind struct ns_vram (no GPU needed). A random sequence
 * of allocations and releases is checked against a byte map: live blocks never overlap, stay
 * inside the range, are granule aligned; released space is merged back (the whole range is one
 * extent again at the end); failures are -ENOMEM / -EINVAL, never a crash. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nscuda_internal.h"
#include "ns_test.h"

#define FAIL(...) NS_FAIL(__VA_ARGS__)

static uint64_t s_rng = 0x9e3779b97f4a7c15ull;

static uint64_t s_next(void)
{
	s_rng ^= s_rng >> 12;
	s_rng ^= s_rng << 25;
	s_rng ^= s_rng >> 27;
	return s_rng * 2685821657736338717ull;
}

int main(void)
{
	enum { SIZE = 1 << 20, NG = SIZE / NS_RANGE_ALIGN, MAXL = 512 };
	static uint8_t map[NG]; /* granule -> owner slot + 1 */
	uint64_t off[MAXL], len[MAXL];
	int live[MAXL] = { 0 }, n_ok = 0, n_full = 0;
	struct ns_range r;

	if (ns_range_init(&r, SIZE + 100))
		FAIL("init");
	if (r.size != SIZE || ns_range_largest(&r) != SIZE)
		FAIL("size %llu not rounded down to the granule", (unsigned long long)r.size);
	for (int it = 0; it < 200000; it++) {
		int k = (int)(s_next() % MAXL);

		if (live[k]) {
			if (ns_range_release(&r, off[k]))
				FAIL("release of a live block refused");
			for (uint64_t g = off[k] / NS_RANGE_ALIGN; g < (off[k] + len[k]) / NS_RANGE_ALIGN; g++)
				map[g] = 0;
			live[k] = 0;
			continue;
		}
		uint64_t want = s_next() % 3 ? s_next() % 9000 : s_next() % (SIZE / 8);
		int rc = ns_range_alloc(&r, want, &off[k]);
		if (rc == -ENOMEM) {
			if (ns_range_largest(&r) >= want && want)
				FAIL("refused %llu with an extent of %llu free",
				     (unsigned long long)want, (unsigned long long)ns_range_largest(&r));
			n_full++;
			continue;
		}
		if (rc)
			FAIL("alloc rc %d", rc);
		len[k] = want ? (want + NS_RANGE_ALIGN - 1) / NS_RANGE_ALIGN * NS_RANGE_ALIGN
			      : NS_RANGE_ALIGN;
		if (off[k] % NS_RANGE_ALIGN || off[k] + len[k] > SIZE)
			FAIL("block [%llu, +%llu) misplaced", (unsigned long long)off[k],
			     (unsigned long long)len[k]);
		for (uint64_t g = off[k] / NS_RANGE_ALIGN; g < (off[k] + len[k]) / NS_RANGE_ALIGN; g++) {
			if (map[g])
				FAIL("overlap at granule %llu", (unsigned long long)g);
			map[g] = 1;
		}
		live[k] = 1;
		n_ok++;
	}
	uint64_t used = 0;
	for (int k = 0; k < MAXL; k++)
		used += live[k] ? len[k] : 0;
	if (used != r.used)
		FAIL("used %llu, blocks hold %llu", (unsigned long long)r.used, (unsigned long long)used);
	if (ns_range_release(&r, 12345) != -EINVAL)
		FAIL("release of a foreign offset accepted");
	for (int k = 0; k < MAXL; k++)
		if (live[k] && ns_range_release(&r, off[k]))
			FAIL("final release");
	if (r.used || r.n_free != 1 || ns_range_largest(&r) != SIZE)
		FAIL("not merged back: %u extents, largest %llu", r.n_free,
		     (unsigned long long)ns_range_largest(&r));
	if (ns_range_alloc(&r, UINT64_MAX, &off[0]) != -EOVERFLOW)
		FAIL("huge request not refused with -EOVERFLOW");
	if (ns_range_alloc(&r, SIZE + 1, &off[0]) != -ENOMEM)
		FAIL("oversized request not refused");
	ns_range_fini(&r);
	printf("range: %d allocations, %d refused when full, merged back to one extent\n", n_ok,
	       n_full);
	return 0;
}
