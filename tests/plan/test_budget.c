/* test_budget.c - default budgets from fake /proc/meminfo and cgroup files (v1, v2, "max",
 * nested v2 limits, no cgroup), the documented split, refusals, and the fixed set (KV cache
 * hand-computed from the oracle tiny models' dimensions). Exit 0 pass, 1 fail, 77 skip. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "budget_defaults.h"
#include "fixed_mem.h"
#include "ns_test.h"
#include "ns_util.h"

static int s_fail;

#define CHECK(cond, ...) NS_EXPECT(s_fail, cond, __VA_ARGS__)

static char s_dir[256];

static void s_write(const char *rel, const char *text)
{
	char path[512], cmd[600];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", s_dir, rel);
	snprintf(cmd, sizeof(cmd), "%s", path);
	*strrchr(cmd, '/') = '\0';
	for (char *p = cmd + strlen(s_dir) + 1; *p; p++) /* mkdir -p */
		if (*p == '/') {
			*p = '\0';
			mkdir(cmd, 0700);
			*p = '/';
		}
	mkdir(cmd, 0700);
	f = fopen(path, "w");
	if (!f) {
		CHECK(0, "cannot write %s", path);
		return;
	}
	fputs(text, f);
	fclose(f);
}

static int s_probe(const char *meminfo, const char *cgroup, const char *root,
		   struct nsplan_mem_probe *p)
{
	char a[512], b[512], c[512], err[NS_ERR_LEN];
	struct nsplan_mem_paths paths = { a, b, c };

	snprintf(a, sizeof(a), "%s/%s", s_dir, meminfo);
	snprintf(b, sizeof(b), "%s/%s", s_dir, cgroup);
	snprintf(c, sizeof(c), "%s/%s", s_dir, root);
	return nsplan_mem_probe(&paths, p, err, sizeof(err));
}

static void s_probes(void)
{
	struct nsplan_mem_probe p;
	const uint64_t G = 1ull << 30;

	s_write("meminfo", "MemTotal:       65536000 kB\nMemFree:         1000 kB\n"
		"MemAvailable:   8388608 kB\nBuffers: 1 kB\n");
	s_write("meminfo-none", "MemTotal:       65536000 kB\n");

	/* v2 with a 4 GiB limit in the leaf */
	s_write("v2/self", "0::/user.slice/app.scope\n");
	s_write("v2/root/user.slice/app.scope/memory.max", "4294967296\n");
	s_write("v2/root/user.slice/memory.max", "max\n");
	CHECK(s_probe("meminfo", "v2/self", "v2/root", &p) == 0, "v2 probe");
	CHECK(p.mem_available == 8 * G && p.cgroup_version == 2 && p.cgroup_limit == 4 * G &&
	      p.available == 4 * G, "v2: avail %" PRIu64 " ver %d limit %" PRIu64 " -> %" PRIu64,
	      p.mem_available, p.cgroup_version, p.cgroup_limit, p.available);
	/* v2: a tighter parent limit wins */
	s_write("v2p/self", "0::/a/b\n");
	s_write("v2p/root/a/b/memory.max", "max\n");
	s_write("v2p/root/a/memory.max", "1073741824\n");
	CHECK(s_probe("meminfo", "v2p/self", "v2p/root", &p) == 0 && p.available == G,
	      "v2 parent: %" PRIu64, p.available);
	/* v2: memory.high below memory.max (in a parent) is the limit, named as read */
	s_write("v2h/self", "0::/a/b\n");
	s_write("v2h/root/a/b/memory.max", "4294967296\n");
	s_write("v2h/root/a/memory.high", "1610612736\n");
	s_write("v2h/root/a/memory.max", "max\n");
	CHECK(s_probe("meminfo", "v2h/self", "v2h/root", &p) == 0 && p.available == 3 * G / 2 &&
	      strstr(p.cgroup_file, "v2h/root/a/memory.high"), "v2 high: %" PRIu64 " from %s",
	      p.available, p.cgroup_file);
	/* v2 "max": MemAvailable decides */
	s_write("v2max/self", "0::/x\n");
	s_write("v2max/root/x/memory.max", "max\n");
	CHECK(s_probe("meminfo", "v2max/self", "v2max/root", &p) == 0 && p.cgroup_version == 2 &&
	      p.cgroup_limit == NSPLAN_NO_LIMIT && p.available == 8 * G,
	      "v2 max: limit %" PRIu64 " avail %" PRIu64, p.cgroup_limit, p.available);
	/* v2 namespace: the path is not visible, the root file is the container's own */
	s_write("v2ns/self", "0::/../../host/path\n");
	s_write("v2ns/root/memory.max", "2147483648\n");
	CHECK(s_probe("meminfo", "v2ns/self", "v2ns/root", &p) == 0 && p.available == 2 * G,
	      "v2 ns: %" PRIu64, p.available);
	/* v1 with a 2 GiB limit */
	s_write("v1/self", "12:pids:/x\n11:cpu,cpuacct:/x\n4:memory:/docker/abc\n0::/x\n");
	s_write("v1/root/memory/docker/abc/memory.limit_in_bytes", "2147483648\n");
	CHECK(s_probe("meminfo", "v1/self", "v1/root", &p) == 0 && p.cgroup_version == 1 &&
	      p.cgroup_limit == 2 * G && p.available == 2 * G,
	      "v1: ver %d limit %" PRIu64, p.cgroup_version, p.cgroup_limit);
	/* v1 unlimited (the kernel writes a huge page-rounded number) */
	s_write("v1u/self", "4:memory:/\n");
	s_write("v1u/root/memory/memory.limit_in_bytes", "9223372036854771712\n");
	CHECK(s_probe("meminfo", "v1u/self", "v1u/root", &p) == 0 && p.cgroup_version == 1 &&
	      p.cgroup_limit == NSPLAN_NO_LIMIT && p.available == 8 * G,
	      "v1 unlimited: %" PRIu64, p.cgroup_limit);
	/* no cgroup file at all */
	CHECK(s_probe("meminfo", "nonexistent", "nonexistent", &p) == 0 && p.cgroup_version == 0 &&
	      p.available == 8 * G, "no cgroup: ver %d avail %" PRIu64, p.cgroup_version,
	      p.available);
	/* cgroup limit only */
	CHECK(s_probe("meminfo-none", "v1/self", "v1/root", &p) == 0 && p.available == 2 * G,
	      "no MemAvailable: %" PRIu64, p.available);
	/* nothing at all: refused */
	CHECK(s_probe("meminfo-none", "nonexistent", "nonexistent", &p) == -ENOENT, "nothing");
}

static void s_split(void)
{
	const uint64_t M = 1ull << 20, G = 1ull << 30;
	struct nsplan_default_in in = {
		.available = 16 * G, .fixed = 100 * M, .min_arena = 5 * 8192,
		.max_row_bytes = 4096, .cacheable = 64 * G, .lookahead = 4,
		.block_bytes = NSPLAN_DEFAULT_BLOCK_BYTES,
	};
	struct nsplan_budgets b = { 0 };
	struct nsplan_default_out o;
	char err[NS_ERR_LEN];
	uint64_t want_arena = 5 * (M + 4096);

	/* A = 16 GiB: H = 1 GiB, U = 15 GiB - 100 MiB, arena = 5 blocks of 1 MiB + slack */
	CHECK(nsplan_default_budgets(&in, &b, &o, err, sizeof(err)) == 0, "%s", err);
	CHECK(o.headroom == G && o.usable == 15 * G - 100 * M && b.mem == want_arena &&
	      b.ram == o.usable - want_arena, "split: H %" PRIu64 " U %" PRIu64 " mem %" PRIu64
	      " ram %" PRIu64, o.headroom, o.usable, b.mem, b.ram);
	CHECK(b.ram + b.mem + in.fixed + o.headroom == in.available, "split does not add up");
	/* MoE: the arena holds twice one layer's routed-expert bytes (nsrouter's prefetch) */
	in.layer_expert_bytes = 53 * M;
	b = (struct nsplan_budgets){ 0 };
	CHECK(nsplan_default_budgets(&in, &b, &o, err, sizeof(err)) == 0 && b.mem == 106 * M &&
	      b.ram == o.usable - 106 * M, "MoE arena %" PRIu64 ", want 106 MiB", b.mem);
	in.layer_expert_bytes = 1 * M; /* smaller than lookahead + 1 blocks: those */
	b = (struct nsplan_budgets){ 0 };
	CHECK(nsplan_default_budgets(&in, &b, &o, err, sizeof(err)) == 0 && b.mem == want_arena,
	      "small MoE layer arena %" PRIu64, b.mem);
	in.layer_expert_bytes = 0;
	/* the RAM cache never takes more than the model */
	in.cacheable = 3 * G;
	b = (struct nsplan_budgets){ 0 };
	CHECK(nsplan_default_budgets(&in, &b, &o, err, sizeof(err)) == 0 && b.ram == 3 * G,
	      "cacheable cap: %" PRIu64, b.ram);
	/* small memory: headroom is 64 MiB, the arena a quarter of usable but not below minimum */
	in.available = 80 * M;
	in.fixed = 12 * M;
	in.cacheable = G;
	b = (struct nsplan_budgets){ 0 };
	CHECK(nsplan_default_budgets(&in, &b, &o, err, sizeof(err)) == 0 && o.headroom == 64 * M &&
	      b.mem == 1 * M && b.ram == 3 * M, "small: H %" PRIu64 " mem %" PRIu64 " ram %" PRIu64,
	      o.headroom, b.mem, b.ram);
	/* MoE on small memory: still at most a quarter of usable */
	in.layer_expert_bytes = 53 * M;
	b = (struct nsplan_budgets){ 0 };
	CHECK(nsplan_default_budgets(&in, &b, &o, err, sizeof(err)) == 0 && b.mem == 1 * M,
	      "small MoE: mem %" PRIu64, b.mem);
	in.layer_expert_bytes = 0;
	/* a given RAM budget is kept */
	b = (struct nsplan_budgets){ .ram = 123 };
	in.ram_given = true;
	CHECK(nsplan_default_budgets(&in, &b, &o, err, sizeof(err)) == 0 && b.ram == 123,
	      "given ram changed: %" PRIu64, b.ram);
	in.ram_given = false;
	/* less than headroom + fixed + minimum arena: refused with the figures */
	in.available = 70 * M;
	b = (struct nsplan_budgets){ 0 };
	err[0] = '\0';
	CHECK(nsplan_default_budgets(&in, &b, &o, err, sizeof(err)) == -ENOSPC, "not refused");
	CHECK(strstr(err, "--mem-budget 40960") && strstr(err, "smallest workable") &&
	      !strchr(err, '\n'), "refusal text: %s", err);
}

/* KV cache, by hand from tiny/README.md (f32 K and V, 4 bytes):
 *   qwen3: 2 layers, kv width 2*64 = 128:  2 * (ceil16(n_ctx) + n_ctx) * 128 * 4 (K in tiles
 *          of 16 positions)
 *   gpt-oss: layer 0 slides (window 8), layer 1 full
 *   gemma3: layers 0-4 slide (window 8), layer 5 full; past -c 519 the sliding ones (gpt-oss's
 *   too) keep rings of window + 512 - 1 rounded to 16
 *   gemma4: layers 0,1 slide, width 128; layer 2 full, 1 kv head of 128, V = K
 *   qwen35: only layer 3 has attention; layers 0-2 carry conv (3 * 512) and 64 * 256 state */
static void s_fixed(void)
{
	/* kk / kv: the f32 bytes of the K and of the V caches */
	static const struct { const char *rel; uint32_t ctx; uint64_t kk, kv; uint32_t swa;
			      uint64_t rec; } c[] = {
		{ "tiny/tiny-qwen3-Q4_K_M.gguf", 256, 2ull * 256 * 128 * 4, 2ull * 256 * 128 * 4,
		  0, 0 },
		{ "tiny/tiny-qwen3-Q4_K_M.gguf", 1000, 2ull * 1008 * 128 * 4, 2ull * 1000 * 128 * 4,
		  0, 0 },
		{ "tiny/tiny-gpt-oss-MXFP4_MOE.gguf", 256, 2ull * 256 * 128 * 4,
		  2ull * 256 * 128 * 4, 1, 0 },
		{ "tiny/tiny-gpt-oss-MXFP4_MOE.gguf", 4, 2ull * 16 * 128 * 4, 2ull * 4 * 128 * 4, 1,
		  0 },
		{ "tiny/tiny-gemma3-Q4_K_M.gguf", 256, 6ull * 256 * 128 * 4, 6ull * 256 * 128 * 4, 5,
		  0 },
		{ "tiny/tiny-gemma4-Q4_K_M.gguf", 256, 3ull * 256 * 128 * 4, 3ull * 256 * 128 * 4, 2,
		  0 },
		/* past window + B - 1: the sliding layers keep rings of ceil16(8 + 511) = 528 */
		{ "tiny/tiny-gemma3-Q4_K_M.gguf", 2048, (5ull * 528 + 2048) * 128 * 4,
		  (5ull * 528 + 2048) * 128 * 4, 5, 0 },
		{ "tiny/tiny-gemma4-Q4_K_M.gguf", 2048, (2ull * 528 + 2048) * 128 * 4,
		  (2ull * 528 + 2048) * 128 * 4, 2, 0 },
		{ "tiny/tiny-gpt-oss-MXFP4_MOE.gguf", 2048, (528ull + 2048) * 128 * 4,
		  (528ull + 2048) * 128 * 4, 1, 0 },
		{ "tiny/tiny-qwen35-Q4_K_M.gguf", 256, 256ull * 128 * 4, 256ull * 128 * 4, 0,
		  3ull * (3 * 512 + 64 * 256) * 4 },
	};
	char path[1024], err[NS_ERR_LEN];

	for (size_t i = 0; i < NS_ARRAY_LEN(c); i++) {
		struct ns_model *m = NULL;
		struct ns_hparams hp;
		struct nsplan_fixed fx;

		ns_test_oracle_path(path, sizeof(path), c[i].rel);
		if (ns_model_open(path, &m, err, sizeof(err)) ||
		    ns_hparams_load(m, &hp, err, sizeof(err)) ||
		    nsplan_fixed_compute(m, &hp, c[i].ctx, 777, &fx, err, sizeof(err))) {
			CHECK(0, "%s: %s", c[i].rel, err);
			ns_model_close(&m);
			continue;
		}
		CHECK(fx.kv_bytes == c[i].kk + c[i].kv && fx.n_swa_layers == c[i].swa &&
		      fx.recurrent_bytes == c[i].rec, "%s ctx %u: kv %" PRIu64 " (want %" PRIu64
		      "), swa %u (want %u), recurrent %" PRIu64 " (want %" PRIu64 ")", c[i].rel,
		      c[i].ctx, fx.kv_bytes, c[i].kk + c[i].kv, fx.n_swa_layers, c[i].swa,
		      fx.recurrent_bytes, c[i].rec);
		CHECK(fx.margin_bytes == (fx.kv_bytes + fx.recurrent_bytes + fx.rollback_bytes +
					  fx.scratch_bytes + 777) / NSPLAN_MARGIN_DIV +
					 NSPLAN_MARGIN_MIN &&
		      fx.total == fx.kv_bytes + fx.recurrent_bytes + fx.rollback_bytes +
		      fx.scratch_bytes + 777 + fx.margin_bytes && fx.scratch_bytes > 0 &&
		      (fx.rollback_bytes > fx.recurrent_bytes) == (fx.recurrent_bytes > 0),
		      "%s: total", c[i].rel);
		/* other cache types: f16 K (64 bytes per 32) and q8_0 V (34): both halves scale */
		{
			struct nsplan_fixed fh;

			CHECK(!nsplan_fixed_compute_kv(m, &hp, c[i].ctx, 64, 34, 777, &fh, err,
						       sizeof(err)) &&
			      fh.kv_bytes == c[i].kk / 2 + c[i].kv * 34 / 128 &&
			      fh.total == fh.kv_bytes + fh.recurrent_bytes + fh.rollback_bytes +
			      fh.scratch_bytes + 777 + fh.margin_bytes,
			      "%s ctx %u: f16/q8_0 kv %" PRIu64 " (want %" PRIu64 ")", c[i].rel,
			      c[i].ctx, fh.kv_bytes, c[i].kk / 2 + c[i].kv * 34 / 128);
		}
		ns_model_close(&m);
	}
}

int main(void)
{
	char cmd[300];

	ns_test_require_oracle();
	snprintf(s_dir, sizeof(s_dir), "/tmp/ns-test-budget-XXXXXX");
	if (!mkdtemp(s_dir)) {
		perror("mkdtemp");
		return 1;
	}
	s_probes();
	s_split();
	s_fixed();
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", s_dir);
	if (system(cmd) != 0)
		fprintf(stderr, "warning: could not remove %s\n", s_dir);
	if (s_fail) {
		fprintf(stderr, "%d failures\n", s_fail);
		return 1;
	}
	printf("ok\n");
	return 0;
}
