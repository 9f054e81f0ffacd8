/* test_arena.c - the arena allocator alone (no nsio): random allocate/release sequences at
 * random budgets. Live leases never overlap, stay inside the arena and are aligned; reserved
 * equals the sum of live lengths and never exceeds the budget; an empty arena serves any
 * request that fits; stale (index, seq) references are refused. Also ns_span_max against a
 * brute-force walk over every row. */
#include <stdlib.h>

#include "arena.h"
#include "io_testlib.h"

struct live {
	uint32_t idx;
	uint64_t seq, off, len;
};

static struct ns_ctl *s_ctl(uint64_t cap, uint32_t slots)
{
	size_t bytes = 4096 + (size_t)slots * sizeof(struct ns_lease);
	struct ns_ctl *c = aligned_alloc(4096, ns_align_up_u64(bytes, 4096));

	IOT_CHECK(c, "alloc");
	memset(c, 0, bytes);
	c->arena_bytes = cap;
	c->align = 4096;
	c->lease_slots = slots;
	c->off_leases = 4096;
	return c;
}

static void s_random_runs(void)
{
	uint64_t seed = 99;

	for (int run = 0; run < 300; run++) {
		uint64_t cap = 4096 * (1 + iot_rand(&seed) % 64);
		uint32_t slots = 8u << (iot_rand(&seed) % 4);
		struct ns_ctl *c = s_ctl(cap, slots);
		struct live live[1024];
		size_t n = 0;

		for (int op = 0; op < 2000; op++) {
			bool do_alloc = n == 0 || iot_rand(&seed) % 2;

			if (do_alloc) {
				uint64_t len = 4096 * (1 + iot_rand(&seed) % (cap / 4096 + 1));
				uint32_t idx;
				int rc = ns_arena_alloc(c, len, 1, 0, 0, &idx);
				uint64_t sum = 0;

				for (size_t i = 0; i < n; i++)
					sum += live[i].len;
				if (len > cap) {
					IOT_CHECK(rc == -E2BIG, "oversize gave %d", rc);
					continue;
				}
				if (n == 0)
					IOT_CHECK(rc == 0, "empty arena refused %llu of %llu",
						  (unsigned long long)len, (unsigned long long)cap);
				if (rc == -EAGAIN)
					continue;
				IOT_CHECK(rc == 0, "alloc rc %d", rc);
				struct ns_lease *l = &ns_ctl_leases(c)[idx];
				IOT_CHECK(l->off % 4096 == 0 && l->len == len && l->off + len <= cap,
					  "lease outside the arena");
				for (size_t i = 0; i < n; i++)
					IOT_CHECK(l->off + len <= live[i].off ||
						  live[i].off + live[i].len <= l->off,
						  "leases overlap");
				IOT_CHECK(sum + len <= cap, "over budget");
				live[n++] = (struct live){ idx, l->seq, l->off, len };
			} else {
				size_t k = iot_rand(&seed) % n;

				IOT_CHECK(ns_arena_lookup(c, live[k].idx, live[k].seq), "lookup");
				IOT_CHECK(!ns_arena_lookup(c, live[k].idx, live[k].seq + slots),
					  "stale seq accepted");
				IOT_CHECK(ns_arena_release(c, live[k].idx) == 0, "release");
				IOT_CHECK(ns_arena_release(c, live[k].idx) == -EINVAL, "double release");
				live[k] = live[--n];
			}
			{
				uint64_t sum = 0;
				for (size_t i = 0; i < n; i++)
					sum += live[i].len;
				IOT_CHECK(atomic_load(&c->arena.reserved) == sum, "reserved mismatch");
				IOT_CHECK(atomic_load(&c->arena.peak) <= cap, "peak over budget");
			}
		}
		free(c);
	}
}

static void s_span(void)
{
	uint64_t seed = 5;

	for (int i = 0; i < 2000; i++) {
		uint64_t off = iot_rand(&seed) % 100000, rb = 1 + iot_rand(&seed) % 20000;
		uint64_t n_rows = 1 + iot_rand(&seed) % 300, k = 1 + iot_rand(&seed) % 8;
		uint64_t best = 0, got;

		if (k > n_rows)
			k = n_rows;
		for (uint64_t r = 0; r + k <= n_rows; r++) {
			uint64_t a, l;
			ns_span_aligned(off + r * rb, k * rb, 4096, &a, &l);
			if (l > best)
				best = l;
		}
		got = ns_span_max(off, rb, n_rows, k, 4096);
		IOT_CHECK(got == best, "span_max %llu != brute force %llu", (unsigned long long)got,
			  (unsigned long long)best);
	}
}

/* Restart recovery: in-flight leases are quarantined (still reserved, unowned) until released,
 * kept ones stay, dropped ones go. */
static enum ns_lease_fate s_fate(struct ns_ctl *c, struct ns_lease *l, void *arg)
{
	(void)c;
	(void)arg;
	switch (atomic_load(&l->state)) {
	case NS_LEASE_ALLOC: return NS_LEASE_QUARANTINED;
	case NS_LEASE_DELIVERED: return l->ticket == 1 ? NS_LEASE_KEEP : NS_LEASE_DROP;
	default: return NS_LEASE_DROP;
	}
}

static void s_recover(void)
{
	struct ns_ctl *c = s_ctl(64 * 4096, 16);
	uint32_t idx[4];
	uint64_t q = 0, dropped;

	for (int i = 0; i < 4; i++)
		IOT_CHECK(ns_arena_alloc(c, 4096 * 4, 0, (uint64_t)i, 0, &idx[i]) == 0, "alloc");
	atomic_store(&ns_ctl_leases(c)[idx[1]].state, NS_LEASE_DELIVERED); /* ticket 1: kept */
	atomic_store(&ns_ctl_leases(c)[idx[2]].state, NS_LEASE_DELIVERED); /* ticket 2: dropped */
	/* idx 0 and 3 stay ALLOC: quarantined */
	dropped = ns_arena_recover(c, s_fate, NULL, &q);
	IOT_CHECK(dropped == 1 && q == 2, "recover: dropped %llu quarantined %llu",
		  (unsigned long long)dropped, (unsigned long long)q);
	IOT_CHECK(atomic_load(&c->arena.reserved) == 3 * 4 * 4096, "reserved after recover");
	IOT_CHECK(atomic_load(&ns_ctl_leases(c)[idx[0]].state) == NS_LEASE_QUARANTINE &&
		  ns_ctl_leases(c)[idx[0]].owner == NS_OWNER_NONE, "quarantine state");
	IOT_CHECK(ns_arena_release_quarantine(c) == 2, "release quarantine");
	IOT_CHECK(atomic_load(&c->arena.reserved) == 4 * 4096, "only the kept lease remains");
	IOT_CHECK(ns_arena_release(c, idx[1]) == 0 && ns_arena_live(c) == 0, "empty at the end");
	free(c);
}

int main(void)
{
	s_random_runs();
	s_recover();
	s_span();
	printf("ok\n");
	return 0;
}
